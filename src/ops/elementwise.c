/* C wrappers of cl/elementwise.cl (fill, copy, scale, axpy, by dtype), its op family, the
 * argument checks and launch form the ops share, and the device's self-check built on them. */
#include "ops/family_internal.h"

#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

clt_status clt__need_float(const clt_tensor *t, const char *op)
{
    if (clt__is_float(clt_tensor_dtype(t))) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE, "%s: needs f32, f16 or bf16, got %s", op,
                     clt_dtype_name(clt_tensor_dtype(t)));
}

/* The family's kernels, each in one slot per dtype. */
enum { FILL, COPY, SCALE, AXPY, ELEMENTWISE_KERNELS };
static const char *const elementwise_names[] = {"fill", "copy", "scale", "axpy"};

static void elementwise_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int d = 0; d < CLT_DTYPE__COUNT; d++) {
        clt__opts_dtype(o, sizeof o, (clt_dtype)d);
        fn("elementwise", o, user);
    }
}

const struct clt__op_family clt__family_elementwise = {
    .name = "elementwise",
    .sources = "elementwise",
    .slots = ELEMENTWISE_KERNELS * CLT_DTYPE__COUNT,
    .variants = elementwise_variants,
};

/* The ctx's kernel `which` for t's dtype, built on first use. */
static clt_status elementwise_kernel(const clt_tensor *t, int which, cl_kernel *k)
{
    clt_ctx *ctx = clt_tensor_ctx(t);
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_elementwise,
                                 which * CLT_DTYPE__COUNT + (int)clt_tensor_dtype(t), &slot);
    if (st == CLT_OK && !*slot) {
        char opts[32];
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
        st = clt__kernel(ctx, "elementwise", opts, elementwise_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

clt_status clt_op_fill(clt_tensor *x, float value)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(x);
    cl_kernel k;
    cl_mem mem = clt_tensor_mem(x);
    cl_ulong off = clt_tensor_offset(x), n = clt_tensor_numel(x);
    CLT_TRY(elementwise_kernel(x, FILL, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(mem), CLT__ARG(off), CLT__ARG(n), CLT__ARG(value)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "fill"));
fail:
    return st;
}

clt_status clt__launch_yx(cl_kernel k, const clt_tensor *y, const clt_tensor *x, const float *alpha,
                          size_t per, const char *what)
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
    CLT_TRY(elementwise_kernel(dst, COPY, &k));
    CLT_TRY(clt__launch_yx(k, dst, src, NULL, 1, "copy"));
fail:
    return st;
}

clt_status clt_op_scale(clt_tensor *y, const clt_tensor *x, float alpha)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "scale"));
    CLT_TRY(clt__need_float(y, "scale"));
    CLT_TRY(elementwise_kernel(y, SCALE, &k));
    CLT_TRY(clt__launch_yx(k, y, x, &alpha, 1, "scale"));
fail:
    return st;
}

clt_status clt_op_axpy(clt_tensor *y, float alpha, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, "axpy"));
    CLT_TRY(clt__need_float(y, "axpy"));
    CLT_TRY(elementwise_kernel(y, AXPY, &k));
    CLT_TRY(clt__launch_yx(k, y, x, &alpha, 1, "axpy"));
fail:
    return st;
}

/* The device's self-check (cltrain/device.h): scale and axpy, whose f32 results here are exact,
 * so that any difference is the device's. */
clt_status clt_ctx_selfcheck(clt_ctx *ctx)
{
    enum { N = 1000 };
    clt_status st = CLT_OK;
    clt_tensor *a = NULL, *b = NULL;
    float *host = NULL, *back = NULL;
    const size_t n = N;
    CLT_ASSERT(ctx);
    CLT_ALLOC(ctx, host, n);
    CLT_ALLOC(ctx, back, n);
    for (size_t i = 0; i < n; i++) host[i] = (float)i * 0.25f - 100.0f;
    CLT_TRY(clt_tensor_create(&a, ctx, CLT_DTYPE_F32, 1, &n, CLT_MEM_OTHER));
    CLT_TRY(clt_tensor_create(&b, ctx, CLT_DTYPE_F32, 1, &n, CLT_MEM_OTHER));
    CLT_TRY(clt_tensor_write(a, host, false, NULL));
    CLT_TRY(clt_op_scale(b, a, 2.0f));
    CLT_TRY(clt_op_axpy(b, -1.0f, a));
    CLT_TRY(clt_tensor_read(b, back, false, NULL));
    CLT_TRY(clt_ctx_finish(ctx, CLT_WAIT_SETUP));
    for (size_t i = 0; i < n; i++)
        if (memcmp(&host[i], &back[i], sizeof *host) != 0)
            CLT_FAIL(ctx, CLT_ERR_UNSUPPORTED,
                     "%s computed a wrong result: element %zu of %zu came back as %.9g, not "
                     "%.9g (2a - a through scale and axpy, exact in fp32)",
                     clt_ctx_device(ctx)->device_name, i, n, (double)back[i], (double)host[i]);
fail:
    if (st != CLT_OK) (void)clt_ctx_finish(ctx, CLT_WAIT_SETUP); /* the copies use host, back */
    clt_tensor_free(a);
    clt_tensor_free(b);
    free(host);
    free(back);
    return st;
}
