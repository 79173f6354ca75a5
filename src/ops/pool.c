/* C wrappers of cl/pool.cl: max and average pooling over the (H, W) planes of (B, C, H, W)
 * tensors, forward and backward (a deterministic gather, no atomics), over f32, f16 or bf16
 * storage. The kernels take one work-item per row (see cl/pool.cl for which rows). */
#include "ops/nn_internal.h"

#include <limits.h>
#include <stdio.h>

static const char *const pool_names[CLT_POOL__COUNT] = {
    [CLT_POOL_MAX] = "maxpool",
    [CLT_POOL_AVG] = "avgpool",
};

/* The ctx's kernel <pool>_<forward|backward> for t's float dtype, built on first use. */
static clt_status pool_kernel(const clt_tensor *t, clt_pool p, int backward, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(clt_tensor_ctx(t), CLT__OPF_pool,
                                 ((int)p * 2 + backward) * 3 + (int)clt_tensor_dtype(t), &slot);
    if (st == CLT_OK && !*slot) {
        char opts[32], name[32];
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
        snprintf(name, sizeof name, "%s_%s", pool_names[p], backward ? "backward" : "forward");
        st = clt__kernel(clt_tensor_ctx(t), "pool", opts, name, slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* The kernels' geometry arguments (H, W, OH, OW, KH, KW, SH, SW) from g, checked: windows of at
 * least 1 x 1 that fit the planes, strides >= 1, and planes whose element counts fit an int. */
static clt_status pool_geometry(clt_ctx *ctx, clt_pool p, const struct clt_pool_geom *g,
                                const char *op, cl_int out[8], size_t *planes_in, size_t *plane_out)
{
    if ((unsigned)p >= CLT_POOL__COUNT)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: unknown pooling %d", op, (int)p);
    if (g->C < 1 || g->H < 1 || g->W < 1 || g->H > INT_MAX / g->W)
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: the input (C, H, W) = (%zu, %zu, %zu) must be "
                         "non-empty with H * W below 2^31", op, g->C, g->H, g->W);
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || (size_t)g->kh > g->H ||
        (size_t)g->kw > g->W)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: window %dx%d with stride %dx%d does not "
                         "fit the %zux%zu input", op, g->kh, g->kw, g->sh, g->sw, g->H, g->W);
    size_t OH = (g->H - (size_t)g->kh) / (size_t)g->sh + 1,
           OW = (g->W - (size_t)g->kw) / (size_t)g->sw + 1;
    const cl_int v[8] = {(cl_int)g->H, (cl_int)g->W, (cl_int)OH,    (cl_int)OW,
                         g->kh,        g->kw,        g->sh,         g->sw};
    for (int i = 0; i < 8; i++) out[i] = v[i];
    *planes_in = g->C * g->H * g->W;
    *plane_out = g->C * OH * OW;
    return CLT_OK;
}

/* B from x's element count: a whole number of (C, H, W) samples, at least one. */
static clt_status pool_batch(const clt_tensor *x, size_t per, const char *op, const char *what,
                             size_t *B)
{
    size_t n = clt_tensor_numel(x);
    if (n == 0 || n % per != 0)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE,
                         "%s: %s has %zu elements, not a whole number of (C, H, W) samples of %zu",
                         op, what, n, per);
    *B = n / per;
    return CLT_OK;
}

clt_status clt_op_pool_forward(clt_pool p, const struct clt_pool_geom *g, clt_tensor *y,
                               const clt_tensor *x)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(g && y && x);
    clt_ctx *ctx = clt_tensor_ctx(y);
    const char *op = "pool_forward";
    cl_kernel k;
    cl_int geo[8];
    size_t per_in = 0, per_out = 0, B = 0;
    CLT_TRY(pool_geometry(ctx, p, g, op, geo, &per_in, &per_out));
    CLT_TRY(clt_tensor_same_ctx(y, x));
    CLT_TRY(clt__nn_need_float(y, op, "y"));
    CLT_TRY(clt__nn_need_dtype(x, clt_tensor_dtype(y), op, "x"));
    CLT_TRY(pool_batch(x, per_in, op, "x", &B));
    CLT_TRY(clt__nn_need_numel(y, B * per_out, op, "y"));
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    /* one work-item per row of y */
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = B * g->C * (size_t)geo[2];
    CLT_TRY(pool_kernel(y, p, 0, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(n),
                      CLT__ARG(geo[0]), CLT__ARG(geo[1]), CLT__ARG(geo[2]), CLT__ARG(geo[3]),
                      CLT__ARG(geo[4]), CLT__ARG(geo[5]), CLT__ARG(geo[6]), CLT__ARG(geo[7])));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, pool_names[p]));
fail:
    return st;
}

clt_status clt_op_pool_backward(clt_pool p, const struct clt_pool_geom *g, clt_tensor *dx,
                                const clt_tensor *dy, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(g && dx && dy);
    clt_ctx *ctx = clt_tensor_ctx(dx);
    const char *op = "pool_backward";
    cl_kernel k;
    cl_int geo[8];
    size_t per_in = 0, per_out = 0, B = 0;
    CLT_TRY(pool_geometry(ctx, p, g, op, geo, &per_in, &per_out));
    if (p == CLT_POOL_MAX && !x)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: maxpool needs the forward input x", op);
    CLT_TRY(clt_tensor_same_ctx(dx, dy));
    CLT_TRY(clt__nn_need_float(dx, op, "dx"));
    CLT_TRY(clt__nn_need_dtype(dy, clt_tensor_dtype(dx), op, "dy"));
    CLT_TRY(pool_batch(dx, per_in, op, "dx", &B));
    CLT_TRY(clt__nn_need_numel(dy, B * per_out, op, "dy"));
    if (p == CLT_POOL_MAX) CLT_TRY(clt__check_pair(dx, x, true, op));
    cl_mem dxm = clt_tensor_mem(dx), dym = clt_tensor_mem(dy);
    /* one work-item per row of dx, or for max-pool without overlap per row of windows */
    const bool disjoint = p == CLT_POOL_MAX && g->sh >= g->kh && g->sw >= g->kw;
    cl_ulong dxo = clt_tensor_offset(dx), dyo = clt_tensor_offset(dy),
             n = B * g->C * (size_t)(disjoint ? geo[2] : geo[0]);
    CLT_TRY(pool_kernel(dx, p, 1, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(dym), CLT__ARG(dyo)));
    cl_uint next = 4;
    if (p == CLT_POOL_MAX) {
        cl_mem xm = clt_tensor_mem(x);
        cl_ulong xo = clt_tensor_offset(x);
        CLT_TRY(CLT__ARGS_AT(ctx, k, next, CLT__ARG(xm), CLT__ARG(xo)));
        next += 2;
    }
    CLT_TRY(CLT__ARGS_AT(ctx, k, next, CLT__ARG(n), CLT__ARG(geo[0]), CLT__ARG(geo[1]),
                         CLT__ARG(geo[2]), CLT__ARG(geo[3]), CLT__ARG(geo[4]), CLT__ARG(geo[5]),
                         CLT__ARG(geo[6]), CLT__ARG(geo[7])));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, pool_names[p]));
fail:
    return st;
}

static void pool_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int d = 0; d < CLT__FLOAT_DTYPES; d++) {
        clt__opts_dtype(o, sizeof o, (clt_dtype)d);
        fn("pool", o, user);
    }
}

const struct clt__op_family clt__family_pool = {
    .name = "pool",
    .sources = "pool",
    .slots = 2 * 2 * CLT__FLOAT_DTYPES, /* max or avg, direction, float dtype */
    .variants = pool_variants,
};
