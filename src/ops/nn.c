/* Helpers shared by the neural-network layer ops' wrappers (see nn_internal.h). */
#include "ops/nn_internal.h"

#include <stdlib.h>
#include <string.h>

clt_status clt__nn_need_dtype(const clt_tensor *t, clt_dtype d, const char *op, const char *what)
{
    if (clt_tensor_dtype(t) == d) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: %s must be %s, got %s", op, what,
                     clt_dtype_name(d), clt_dtype_name(clt_tensor_dtype(t)));
}

clt_status clt__nn_need_float(const clt_tensor *t, const char *op, const char *what)
{
    if (clt__is_float(clt_tensor_dtype(t))) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: %s must be f32, f16 or bf16, got %s",
                     op, what, clt_dtype_name(clt_tensor_dtype(t)));
}

clt_status clt__nn_need_numel(const clt_tensor *t, size_t n, const char *op, const char *what)
{
    if (clt_tensor_numel(t) == n) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: %s must have %zu elements, has %zu", op,
                     what, n, clt_tensor_numel(t));
}

size_t clt__nn_last_dim(const clt_tensor *t)
{
    int nd = clt_tensor_ndim(t);
    return nd > 0 ? clt_tensor_dim(t, nd - 1) : 1;
}

clt_status clt__nn_launch_groups(clt_ctx *ctx, cl_kernel k, size_t groups, const char *what)
{
    size_t local = clt__local_size(ctx, k);
    return clt__enqueue(ctx, k, groups * local, local, what);
}

bool clt__nn_rows_vec(clt_ctx *ctx, const char *env)
{
    const char *v = getenv(env);
    if (v && strcmp(v, "group") == 0) return false;
    if (v && strcmp(v, "vec") == 0) return true;
    return clt_ctx_device(ctx)->type == CLT_DEVICE_CPU;
}

clt_status clt__nn_launch_items(clt_ctx *ctx, cl_kernel k, size_t n, const char *what)
{
    /* 4 work-groups per compute unit at least, so that the last ones do not leave units idle */
    const unsigned cu = clt_ctx_device(ctx)->compute_units;
    const size_t want = 4 * (size_t)(cu ? cu : 1);
    size_t local = clt__local_size(ctx, k);
    while (local > 1 && (n + local - 1) / local < want)
        local /= 2;
    return clt__enqueue(ctx, k, (n + local - 1) / local * local, local, what);
}
