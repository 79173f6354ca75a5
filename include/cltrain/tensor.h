/* Device tensors: a dtype, up to four dimensions, and a view (buffer, element offset) into a
 * device buffer that is shared, reference-counted, among the views made from it. Pinned host
 * buffers for fast non-blocking copies. Memory accounting lives in alloc.h.
 * Not thread-safe: use a ctx and its tensors from one thread at a time.
 *
 * Usage:
 *
 *     size_t dims[2] = {64, 784};
 *     clt_tensor *x;
 *     clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 2, dims, CLT_MEM_OTHER);
 *     clt_tensor_write(x, host, true, NULL);    // blocking upload of 64 x 784 floats
 *     clt_tensor_free(x);
 */
#ifndef CLTRAIN_TENSOR_H
#define CLTRAIN_TENSOR_H

#include "cltrain/export.h"

#include "cltrain/device.h"
#include "cltrain/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLT_MAX_DIMS 4

/* Storage formats. f16 and bf16 are converted to fp32 for arithmetic inside kernels. */
typedef enum clt_dtype {
    CLT_DTYPE_F32 = 0,
    CLT_DTYPE_F16 = 1,
    CLT_DTYPE_BF16 = 2,
    CLT_DTYPE_I32 = 3,
    CLT_DTYPE_U8 = 4,
    CLT_DTYPE_U16 = 5, /* token ids of vocabularies up to 65,536 (cltrain/text.h) */
    CLT_DTYPE__COUNT
} clt_dtype;

CLT_API size_t clt_dtype_size(clt_dtype d);      /* bytes per element */
CLT_API const char *clt_dtype_name(clt_dtype d); /* "f32", "f16", "bf16", "i32", "u8", "u16" */
/* Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16", "i32", "u8", "u16". */
CLT_API clt_status clt_dtype_parse(const char *s, clt_dtype *out);

/* What an allocation is for; the accountant reports bytes per category. */
typedef enum clt_mem_category {
    CLT_MEM_PARAMS = 0,
    CLT_MEM_GRADS,
    CLT_MEM_OPTIM,
    CLT_MEM_ACTIVATIONS,
    CLT_MEM_STAGING,
    CLT_MEM_WORKSPACE,
    CLT_MEM_DATA, /* a data set resident on the device */
    CLT_MEM_OTHER,
    CLT_MEM__COUNT
} clt_mem_category;

CLT_API const char *clt_mem_category_name(clt_mem_category c); /* "parameters", "gradients", ... */

typedef struct clt_tensor clt_tensor;

/* New tensor of the given shape on ctx's device; contents undefined (the buffer is touched
 * with a fill so that lazy drivers fail here rather than later). The caller owns *out and frees
 * it with clt_tensor_free. The create functions only enqueue (fills on the compute queue); none
 * waits for the device. Returns CLT_ERR_OUT_OF_MEMORY (message: bytes requested, current, peak,
 * device total, cap) when it does not fit. */
CLT_API clt_status clt_tensor_create(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                                     const size_t *dims, clt_mem_category cat);
CLT_API clt_status clt_tensor_zeros(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                                    const size_t *dims, clt_mem_category cat);
/* Filled with `value`, converted to the dtype (round to nearest even for f16/bf16). */
CLT_API clt_status clt_tensor_filled(clt_tensor **out, clt_ctx *ctx, clt_dtype dtype, int ndim,
                                     const size_t *dims, double value, clt_mem_category cat);
/* Same ctx, dtype, shape and category as `like`; contents undefined. */
CLT_API clt_status clt_tensor_like(clt_tensor **out, const clt_tensor *like);
/* A view of `numel(dims)` elements starting `offset` elements into `base`'s storage. Shares
 * and keeps alive base's buffer. The view's dtype is base's. */
CLT_API clt_status clt_tensor_view(clt_tensor **out, const clt_tensor *base, size_t offset,
                                   int ndim, const size_t *dims);
/* Releases the tensor; the buffer goes when its last view goes. No host wait: the device keeps
 * the buffer while enqueued work still uses it. Accepts NULL. */
CLT_API void clt_tensor_free(clt_tensor *t);

CLT_API clt_ctx *clt_tensor_ctx(const clt_tensor *t);
CLT_API clt_dtype clt_tensor_dtype(const clt_tensor *t);
CLT_API int clt_tensor_ndim(const clt_tensor *t);
CLT_API size_t clt_tensor_dim(const clt_tensor *t, int i); /* 1 for i >= ndim */
CLT_API size_t clt_tensor_numel(const clt_tensor *t);
CLT_API size_t clt_tensor_nbytes(const clt_tensor *t);
/* In elements, from the start of the underlying buffer (cltrain/opencl.h: clt_tensor_mem). */
CLT_API size_t clt_tensor_offset(const clt_tensor *t);

/* Host -> device copy of all nbytes(t) bytes. Blocking: returns after the copy (a counted host
 * wait). Non-blocking: enqueued on the transfer queue ordered after all work already enqueued
 * on the compute queue, and later compute work waits for it; `src` must stay valid and
 * unchanged until the copy completes: until the returned event (if `done` is non-NULL; the caller
 * releases it) completes, or until clt_ctx_finish.
 * Pass a pointer inside a clt_pinned buffer for full-speed transfers. */
CLT_API clt_status clt_tensor_write(clt_tensor *t, const void *src, bool blocking, clt_event *done);
/* Device -> host copy of all bytes, ordered after the compute work enqueued so far.
 * Non-blocking: `dst` is filled when the returned event completes (or after clt_ctx_finish). */
CLT_API clt_status clt_tensor_read(const clt_tensor *t, void *dst, bool blocking, clt_event *done);
/* CLT_ERR_DEVICE_MISMATCH naming both devices unless a and b share a ctx. */
CLT_API clt_status clt_tensor_same_ctx(const clt_tensor *a, const clt_tensor *b);

/* Pinned (page-locked where the driver supports it) host memory: a CL_MEM_ALLOC_HOST_PTR
 * buffer mapped once for its lifetime (the map in create is a counted host wait, setup).
 * Counted as CLT_MEM_STAGING. The memory at clt_pinned_ptr is owned by the clt_pinned and valid
 * until clt_pinned_free, which accepts NULL; finish the copies that use it before freeing. */
typedef struct clt_pinned clt_pinned;
CLT_API clt_status clt_pinned_create(clt_pinned **out, clt_ctx *ctx, size_t bytes);
CLT_API void *clt_pinned_ptr(clt_pinned *p);
CLT_API size_t clt_pinned_size(const clt_pinned *p);
CLT_API void clt_pinned_free(clt_pinned *p);

#ifdef __cplusplus
}
#endif
#endif
