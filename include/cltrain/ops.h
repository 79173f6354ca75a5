/* Operations on device tensors, enqueued on the ctx's compute queue (asynchronous: they return
 * once enqueued). Every op checks that its tensors share one ctx (CLT_ERR_DEVICE_MISMATCH
 * otherwise, naming both devices) and have compatible shapes and dtypes (CLT_ERR_SHAPE).
 * Not thread-safe (per ctx). */
#ifndef CLTRAIN_OPS_H
#define CLTRAIN_OPS_H

#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x[:] = value, converted to x's dtype (round to nearest even; saturating for i32/u8). */
clt_status clt_op_fill(clt_tensor *x, float value);
/* dst[:] = src[:]: same dtype and element count (shapes may differ). */
clt_status clt_op_copy(clt_tensor *dst, const clt_tensor *src);
/* dst[:] = src[:] converted between f32, f16 and bf16 (round to nearest even); same count. */
clt_status clt_op_cast(clt_tensor *dst, const clt_tensor *src);
/* y[:] = alpha * x[:]; y may be x. Float dtypes; same dtype and count. */
clt_status clt_op_scale(clt_tensor *y, const clt_tensor *x, float alpha);
/* y[:] += alpha * x[:]. Float dtypes; same dtype and count. */
clt_status clt_op_axpy(clt_tensor *y, float alpha, const clt_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
