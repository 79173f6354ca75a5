/* Helpers shared by the neural-network layer ops' wrappers (see nn_internal.h). */
#include "nn_internal.h"

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
    clt_status st = CLT_OK;
    if (groups == 0) return CLT_OK;
    const clt_device_info *dev = clt_ctx_device(ctx);
    size_t local = dev->max_work_group < 256 ? dev->max_work_group : 256, kernel_max = 0;
    cl_int err = clGetKernelWorkGroupInfo(k, dev->device, CL_KERNEL_WORK_GROUP_SIZE,
                                          sizeof kernel_max, &kernel_max, NULL);
    CLT_CHECK_CL(ctx, err, what);
    if (kernel_max < local) local = kernel_max;
    if (local == 0) local = 1;
    size_t global = groups * local;
    err = clEnqueueNDRangeKernel(clt_ctx_compute_queue(ctx), k, 1, NULL, &global, &local, 0, NULL,
                                 NULL);
    CLT_CHECK_CL(ctx, err, what);
fail:
    return st;
}
