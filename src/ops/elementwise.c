/* C wrappers of cl/elementwise.cl and cl/cast.cl: fill, copy, scale, axpy and casts. */
#include "ops_internal.h"

#include "internal.h"
#include "program.h"

#include <stdio.h>

bool clt__is_float(clt_dtype d)
{
    return d == CLT_DTYPE_F32 || d == CLT_DTYPE_F16 || d == CLT_DTYPE_BF16;
}

clt_status clt__check_pair(const clt_tensor *a, const clt_tensor *b, bool same_dtype,
                           const char *op)
{
    clt_status st = clt_tensor_same_ctx(a, b);
    if (st != CLT_OK) return st;
    if (same_dtype && clt_tensor_dtype(a) != clt_tensor_dtype(b))
        return clt__fail(clt_tensor_ctx(a), CLT_ERR_SHAPE, "%s: dtypes differ (%s and %s)", op,
                         clt_dtype_name(clt_tensor_dtype(a)), clt_dtype_name(clt_tensor_dtype(b)));
    if (clt_tensor_numel(a) != clt_tensor_numel(b))
        return clt__fail(clt_tensor_ctx(a), CLT_ERR_SHAPE, "%s: element counts differ (%zu and %zu)",
                         op, clt_tensor_numel(a), clt_tensor_numel(b));
    return CLT_OK;
}

static clt_status need_float(const clt_tensor *t, const char *op)
{
    if (clt__is_float(clt_tensor_dtype(t))) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: needs f32, f16 or bf16, got %s", op,
                     clt_dtype_name(clt_tensor_dtype(t)));
}

static clt_status elementwise_kernel(const clt_tensor *t, const char *name, cl_kernel *k)
{
    char opts[32];
    clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
    return clt__kernel(clt_tensor_ctx(t), "elementwise", opts, name, k);
}

clt_status clt_op_fill(clt_tensor *x, float value)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(x);
    cl_kernel k;
    cl_mem mem = clt_tensor_mem(x);
    cl_ulong off = clt_tensor_offset(x), n = clt_tensor_numel(x);
    CLT_TRY(elementwise_kernel(x, "fill", &k));
    cl_int err = CLT__SET_ARG(k, 0, mem);
    err |= CLT__SET_ARG(k, 1, off);
    err |= CLT__SET_ARG(k, 2, n);
    err |= CLT__SET_ARG(k, 3, value);
    CLT_CHECK_CL(ctx, err, "fill: clSetKernelArg");
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "fill"));
fail:
    return st;
}

/* Kernels of the form k(y, y_off, x, x_off, n[, alpha]). */
static clt_status launch_yx(cl_kernel k, const clt_tensor *y, const clt_tensor *x,
                            const float *alpha, const char *what)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = clt_tensor_numel(y);
    cl_int err = CLT__SET_ARG(k, 0, ym);
    err |= CLT__SET_ARG(k, 1, yo);
    err |= CLT__SET_ARG(k, 2, xm);
    err |= CLT__SET_ARG(k, 3, xo);
    err |= CLT__SET_ARG(k, 4, n);
    if (alpha) err |= clSetKernelArg(k, 5, sizeof *alpha, alpha);
    CLT_CHECK_CL(ctx, err, what);
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, what));
fail:
    return st;
}

clt_status clt_op_copy(clt_tensor *dst, const clt_tensor *src)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(dst, src, true, "copy"));
    CLT_TRY(elementwise_kernel(dst, "copy", &k));
    CLT_TRY(launch_yx(k, dst, src, NULL, "copy"));
fail:
    return st;
}

clt_status clt_op_scale(clt_tensor *y, const clt_tensor *x, float alpha)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "scale"));
    CLT_TRY(need_float(y, "scale"));
    CLT_TRY(elementwise_kernel(y, "scale", &k));
    CLT_TRY(launch_yx(k, y, x, &alpha, "scale"));
fail:
    return st;
}

clt_status clt_op_axpy(clt_tensor *y, float alpha, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "axpy"));
    CLT_TRY(need_float(y, "axpy"));
    CLT_TRY(elementwise_kernel(y, "axpy", &k));
    CLT_TRY(launch_yx(k, y, x, &alpha, "axpy"));
fail:
    return st;
}

clt_status clt_op_cast(clt_tensor *dst, const clt_tensor *src)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    char opts[48];
    CLT_TRY(clt__check_pair(dst, src, false, "cast"));
    CLT_TRY(need_float(dst, "cast"));
    CLT_TRY(need_float(src, "cast"));
    clt__opts_cast(opts, sizeof opts, clt_tensor_dtype(src), clt_tensor_dtype(dst));
    CLT_TRY(clt__kernel(clt_tensor_ctx(dst), "cast", opts, "cast", &k));
    CLT_TRY(launch_yx(k, dst, src, NULL, "cast"));
fail:
    return st;
}
