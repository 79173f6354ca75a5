/* Helpers shared by the C wrappers of the neural-network layer ops (activation.c, linear.c,
 * loss.c, dropout.c, input.c, conv.c, pool.c, batchnorm.c, layernorm.c, ...): argument checks with
 * messages naming the op and the tensor, the row length of a (..., N) tensor, the launch of a
 * given number of work-groups, and the choice and launch of the CPU variants of row kernels. */
#ifndef CLTRAIN_OPS_NN_INTERNAL_H
#define CLTRAIN_OPS_NN_INTERNAL_H

#include "ops/family_internal.h"
#include "ops/ops_internal.h"

#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include <stdbool.h>
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
/* Whether a row kernel takes its CPU variant (a row per work-item, its lanes in vectors: the
 * work-group variant's barriers run as loops over the work-items on CPU devices): on CPUs, unless
 * the environment variable `env` is "group"; "vec" forces it on any device (the tests run both
 * variants everywhere). */
bool clt__nn_rows_vec(clt_ctx *ctx, const char *env);
/* Enqueues n work-items (at least; the kernel checks its bound) in work-groups small enough that
 * every compute unit gets several: a kernel of one row per work-item, whose bits do not depend on
 * the launch. */
clt_status clt__nn_launch_items(clt_ctx *ctx, cl_kernel k, size_t n, const char *what);

#endif
