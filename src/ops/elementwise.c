/* C wrappers of cl/elementwise.cl and cl/cast.cl: fill, copy, scale, axpy and casts. */
#include "ops/ops_internal.h"

#include "runtime/internal.h"
#include "runtime/program_internal.h"

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
        return clt__fail(clt_tensor_ctx(a), CLT_ERR_SHAPE,
                         "%s: element counts differ (%zu and %zu)", op, clt_tensor_numel(a),
                         clt_tensor_numel(b));
    return CLT_OK;
}

static clt_status need_float(const clt_tensor *t, const char *op)
{
    if (clt__is_float(clt_tensor_dtype(t))) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: needs f32, f16 or bf16, got %s", op,
                     clt_dtype_name(clt_tensor_dtype(t)));
}

/* The ctx's kernel `name` (slot id) for t's dtype, built on first use. */
static clt_status elementwise_kernel(const clt_tensor *t, clt__kernel_id id, const char *name,
                                     cl_kernel *k)
{
    cl_kernel *slot = clt__kernel_slot(clt_tensor_ctx(t), id, (int)clt_tensor_dtype(t));
    if (!*slot) {
        char opts[32];
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
        clt_status st = clt__kernel(clt_tensor_ctx(t), "elementwise", opts, name, slot);
        if (st != CLT_OK) return st;
    }
    *k = *slot;
    return CLT_OK;
}

clt_status clt_op_fill(clt_tensor *x, float value)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(x);
    cl_kernel k;
    cl_mem mem = clt_tensor_mem(x);
    cl_ulong off = clt_tensor_offset(x), n = clt_tensor_numel(x);
    CLT_TRY(elementwise_kernel(x, CLT__K_FILL, "fill", &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(mem), CLT__ARG(off), CLT__ARG(n), CLT__ARG(value)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "fill"));
fail:
    return st;
}

/* Kernels of the form k(y, y_off, x, x_off, n[, alpha]), each work-item `per` elements. */
static clt_status launch_yx(cl_kernel k, const clt_tensor *y, const clt_tensor *x,
                            const float *alpha, size_t per, const char *what)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = clt_tensor_numel(y);
    CLT_TRY(
        CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(n)));
    if (alpha) CLT_TRY(CLT__ARGS_AT(ctx, k, 5, CLT__ARG(*alpha)));
    CLT_TRY(clt__launch_1d(ctx, k, ((size_t)n + per - 1) / per, what));
fail:
    return st;
}

clt_status clt_op_copy(clt_tensor *dst, const clt_tensor *src)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(dst, src, true, "copy"));
    CLT_TRY(elementwise_kernel(dst, CLT__K_COPY, "copy", &k));
    CLT_TRY(launch_yx(k, dst, src, NULL, 1, "copy"));
fail:
    return st;
}

clt_status clt_op_scale(clt_tensor *y, const clt_tensor *x, float alpha)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "scale"));
    CLT_TRY(need_float(y, "scale"));
    CLT_TRY(elementwise_kernel(y, CLT__K_SCALE, "scale", &k));
    CLT_TRY(launch_yx(k, y, x, &alpha, 1, "scale"));
fail:
    return st;
}

clt_status clt_op_axpy(clt_tensor *y, float alpha, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "axpy"));
    CLT_TRY(need_float(y, "axpy"));
    CLT_TRY(elementwise_kernel(y, CLT__K_AXPY, "axpy", &k));
    CLT_TRY(launch_yx(k, y, x, &alpha, 1, "axpy"));
fail:
    return st;
}

#define CLT__CAST_V 16 /* elements per work-item of cl/cast.cl (CAST_V) */

clt_status clt_op_cast(clt_tensor *dst, const clt_tensor *src)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    char opts[48];
    CLT_TRY(clt__check_pair(dst, src, false, "cast"));
    CLT_TRY(need_float(dst, "cast"));
    CLT_TRY(need_float(src, "cast"));
    cl_kernel *slot = clt__kernel_slot(clt_tensor_ctx(dst), CLT__K_CAST,
                                       (int)clt_tensor_dtype(src) * 3 + (int)clt_tensor_dtype(dst));
    if (!*slot) {
        clt__opts_cast(opts, sizeof opts, clt_tensor_dtype(src), clt_tensor_dtype(dst));
        CLT_TRY(clt__kernel(clt_tensor_ctx(dst), "cast", opts, "cast", slot));
    }
    k = *slot;
    CLT_TRY(launch_yx(k, dst, src, NULL, CLT__CAST_V, "cast"));
fail:
    return st;
}
