/* Helpers shared by the C wrappers of the neural-network layer ops (activation.c, linear.c,
 * loss.c, dropout.c, input.c, conv.c, pool.c, batchnorm.c, layernorm.c, ...): argument checks with messages naming the op and the tensor, the
 * row length of a (..., N) tensor, and the launch of a given number of work-groups. */
#ifndef CLTRAIN_OPS_NN_INTERNAL_H
#define CLTRAIN_OPS_NN_INTERNAL_H

#include "ops/family_internal.h"
#include "ops/ops_internal.h"

#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include <stddef.h>

/* CLT_ERR_SHAPE unless t's dtype is d; the message names op and the argument `what`. */
clt_status clt__nn_need_dtype(const clt_tensor *t, clt_dtype d, const char *op, const char *what);
/* CLT_ERR_SHAPE unless t is f32, f16 or bf16. */
clt_status clt__nn_need_float(const clt_tensor *t, const char *op, const char *what);
/* CLT_ERR_SHAPE unless t has exactly n elements. */
clt_status clt__nn_need_numel(const clt_tensor *t, size_t n, const char *op, const char *what);
/* The length of t's last dimension (rows are the last dimension; 1 for a 0-d tensor). */
size_t clt__nn_last_dim(const clt_tensor *t);
/* Enqueues `groups` work-groups of the largest size up to 256 that the kernel allows on the
 * ctx's compute queue. The kernels launched this way give the same bits for any size. */
clt_status clt__nn_launch_groups(clt_ctx *ctx, cl_kernel k, size_t groups, const char *what);

#endif
