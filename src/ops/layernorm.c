/* C wrappers of cl/layernorm.cl: layer normalisation over the last dimension of (R, D) tensors,
 * the forward (one work-group per row, saving the row statistics) and backward (the parameter
 * gradients, one work-group per column tile, then dx, one work-group per row), over f32, f16 or
 * bf16 storage with f32 statistics and parameters. On CPU devices the `_vec` kernels take a row
 * (or 16 columns) per work-item instead, with the same bits (CLTRAIN_LAYERNORM=group|vec forces
 * either; cl/layernorm.cl says why). */
#include "ops/nn_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* The most lanes of a row's sums (CLT_LN_TILE) and the columns per work-group of
 * layernorm_backward_params (CLT_LN_COLS), both passed in the program's options. */
#define LN_TILE 256
#define LN_COLS 16

/* The kernels' flags (CLT_LN_* in cl/layernorm.cl). */
enum { LN_W = 1, LN_B = 2, LN_SAVE = 4 };
enum { LN_DW = 1, LN_DB = 2 };

/* The work-group kernels, then their CPU variants in the same order (LN_VEC + which). */
enum { LN_FORWARD, LN_DX, LN_PARAMS, LN_VEC, LN__KERNELS = 2 * LN_VEC };
static const char *const ln_names[LN__KERNELS] = {
    "layernorm_forward",     "layernorm_backward_dx",     "layernorm_backward_params",
    "layernorm_forward_vec", "layernorm_backward_dx_vec", "layernorm_backward_params_vec"};

/* LN_VEC when ctx's device takes the CPU variants, else 0 (added to a kernel's index). */
static int ln_variant(clt_ctx *ctx)
{
    return clt__nn_rows_vec(ctx, "CLTRAIN_LAYERNORM") ? LN_VEC : 0;
}

/* The ctx's kernel `which` for x dtype xd and gradient dtype gd (the forward passes gd = f32),
 * built on first use. */
static clt_status ln_kernel(clt_ctx *ctx, int which, clt_dtype xd, clt_dtype gd, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st =
        clt__op_slot(ctx, CLT__OPF_layernorm, (which * 3 + (int)xd) * 3 + (int)gd, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[80];
        clt__opts_layernorm(opts, sizeof opts, xd, gd);
        st = clt__kernel(ctx, "layernorm", opts, ln_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* x's checks: a float dtype and rows of D = its last dimension (1 <= D < 2^31, R < 2^32). */
static clt_status ln_rows(const clt_tensor *x, const char *op, size_t *R, size_t *D)
{
    clt_status st = clt__nn_need_float(x, op, "x");
    if (st != CLT_OK) return st;
    *D = clt__nn_last_dim(x);
    if (*D < 1 || *D > INT32_MAX)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE,
                         "%s: x's last dimension D = %zu must be in [1, 2^31)", op, *D);
    *R = clt_tensor_numel(x) / *D;
    if (*R > UINT32_MAX)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE, "%s: %zu rows are above 2^32 - 1", op,
                         *R);
    return CLT_OK;
}

/* The lanes of a row's sums (cl/layernorm.cl): the power of two at or above D, at most LN_TILE,
 * so that a short row adds no empty lanes; from D alone, so that the bits never depend on the
 * launch. */
static cl_uint ln_lanes(size_t D)
{
    cl_uint lanes = 1;
    while (lanes < D && lanes < LN_TILE)
        lanes *= 2;
    return lanes;
}

/* Launches a row kernel: R work-groups of up to `lanes` work-items (more would idle). */
static clt_status launch_rows(clt_ctx *ctx, cl_kernel k, size_t R, cl_uint lanes, const char *what)
{
    size_t local = clt__local_size(ctx, k);
    if (local > lanes) local = lanes;
    return clt__enqueue(ctx, k, R * local, local, what);
}

/* Checks an f32 (len) tensor of x's ctx. */
static clt_status need_vec(const clt_tensor *x, const clt_tensor *v, size_t len, const char *op,
                           const char *what)
{
    clt_status st = clt_tensor_same_ctx(x, v);
    if (st != CLT_OK) return st;
    st = clt__nn_need_dtype(v, CLT_DTYPE_F32, op, what);
    if (st != CLT_OK) return st;
    return clt__nn_need_numel(v, len, op, what);
}

/* The buffer and offset of t, or of `other` when t is NULL (an argument the kernel ignores). */
static void mem_or(const clt_tensor *t, const clt_tensor *other, cl_mem *m, cl_ulong *off)
{
    const clt_tensor *u = t ? t : other;
    *m = clt_tensor_mem(u);
    *off = clt_tensor_offset(u);
}

clt_status clt_op_layernorm_forward(clt_tensor *y, clt_tensor *mean, clt_tensor *rstd,
                                    const clt_tensor *x, const clt_tensor *weight,
                                    const clt_tensor *bias, float eps)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x);
    CLT_ASSERT(!mean == !rstd);
    clt_ctx *ctx = clt_tensor_ctx(x);
    const char *op = "layernorm_forward";
    size_t R = 0, D = 0;
    cl_kernel k;
    CLT_TRY(ln_rows(x, op, &R, &D));
    CLT_TRY(clt__check_pair(y, x, true, op));
    if (weight) CLT_TRY(need_vec(x, weight, D, op, "weight"));
    if (bias) CLT_TRY(need_vec(x, bias, D, op, "bias"));
    if (mean) {
        CLT_TRY(need_vec(x, mean, R, op, "mean"));
        CLT_TRY(need_vec(x, rstd, R, op, "rstd"));
    }
    if (!(eps > 0.0f) || !isfinite(eps))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: eps must be positive and finite, got %g", op,
                 (double)eps);
    const int vec = ln_variant(ctx);
    CLT_TRY(ln_kernel(ctx, vec + LN_FORWARD, clt_tensor_dtype(x), CLT_DTYPE_F32, &k));
    {
        cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x), wm, bm, mm, rm;
        cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), wo, bo, mo, ro;
        /* absent tensors: x's buffer in their place, never read or written */
        mem_or(weight, x, &wm, &wo);
        mem_or(bias, x, &bm, &bo);
        mem_or(mean, x, &mm, &mo);
        mem_or(rstd, x, &rm, &ro);
        cl_uint d = (cl_uint)D, lanes = ln_lanes(D), r = (cl_uint)R;
        cl_int flags = (weight ? LN_W : 0) | (bias ? LN_B : 0) | (mean ? LN_SAVE : 0);
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo),
                          CLT__ARG(wm), CLT__ARG(wo), CLT__ARG(bm), CLT__ARG(bo), CLT__ARG(mm),
                          CLT__ARG(mo), CLT__ARG(rm), CLT__ARG(ro), CLT__ARG(d), CLT__ARG(lanes),
                          CLT__ARG(eps), CLT__ARG(flags)));
        if (vec) {
            CLT_TRY(CLT__ARGS_AT(ctx, k, 16, CLT__ARG(r))); /* after the 16 arguments above */
            CLT_TRY(clt__nn_launch_items(ctx, k, R, "layernorm_forward_vec"));
        } else {
            CLT_TRY(launch_rows(ctx, k, R, lanes, op));
        }
    }
fail:
    return st;
}

clt_status clt_op_layernorm_backward(clt_tensor *dx, clt_tensor *dweight, clt_tensor *dbias,
                                     const clt_tensor *dy, const clt_tensor *x,
                                     const clt_tensor *mean, const clt_tensor *rstd,
                                     const clt_tensor *weight, float beta)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(dy && x && mean && rstd);
    clt_ctx *ctx = clt_tensor_ctx(x);
    const char *op = "layernorm_backward";
    size_t R = 0, D = 0;
    cl_kernel k;
    CLT_TRY(ln_rows(x, op, &R, &D));
    CLT_TRY(clt__check_pair(dy, x, false, op));
    CLT_TRY(clt__nn_need_float(dy, op, "dy"));
    if (dx) CLT_TRY(clt__check_pair(dx, dy, true, op));
    CLT_TRY(need_vec(x, mean, R, op, "mean"));
    CLT_TRY(need_vec(x, rstd, R, op, "rstd"));
    if (weight) CLT_TRY(need_vec(x, weight, D, op, "weight"));
    if (dweight) CLT_TRY(need_vec(x, dweight, D, op, "dweight"));
    if (dbias) CLT_TRY(need_vec(x, dbias, D, op, "dbias"));
    if (!isfinite(beta))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: beta must be finite, got %g", op, (double)beta);
    clt_dtype xd = clt_tensor_dtype(x), gd = clt_tensor_dtype(dy);
    cl_mem dym = clt_tensor_mem(dy), xm = clt_tensor_mem(x), mm = clt_tensor_mem(mean),
           rm = clt_tensor_mem(rstd);
    cl_ulong dyo = clt_tensor_offset(dy), xo = clt_tensor_offset(x), mo = clt_tensor_offset(mean),
             ro = clt_tensor_offset(rstd);
    cl_uint r = (cl_uint)R, d = (cl_uint)D, lanes = ln_lanes(D);
    const int vec = ln_variant(ctx);
    /* the parameter gradients first: they read dy, which dx may be */
    if (dweight || dbias) {
        cl_mem dwm, dbm;
        cl_ulong dwo, dbo;
        mem_or(dweight, mean, &dwm, &dwo);
        mem_or(dbias, mean, &dbm, &dbo);
        cl_int flags = (dweight ? LN_DW : 0) | (dbias ? LN_DB : 0);
        CLT_TRY(ln_kernel(ctx, vec + LN_PARAMS, xd, gd, &k));
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dwm), CLT__ARG(dwo), CLT__ARG(dbm), CLT__ARG(dbo),
                          CLT__ARG(dym), CLT__ARG(dyo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(mm),
                          CLT__ARG(mo), CLT__ARG(rm), CLT__ARG(ro), CLT__ARG(r), CLT__ARG(d),
                          CLT__ARG(beta), CLT__ARG(flags)));
        if (vec)
            CLT_TRY(clt__nn_launch_items(ctx, k, (D + 15) / 16, "layernorm_backward_params_vec"));
        else
            CLT_TRY(clt__nn_launch_groups(ctx, k, (D + LN_COLS - 1) / LN_COLS,
                                          "layernorm_backward_params"));
    }
    if (dx) {
        cl_mem dxm = clt_tensor_mem(dx), wm;
        cl_ulong dxo = clt_tensor_offset(dx), wo;
        mem_or(weight, mean, &wm, &wo);
        cl_int has_w = weight != NULL;
        CLT_TRY(ln_kernel(ctx, vec + LN_DX, xd, gd, &k));
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(dym), CLT__ARG(dyo),
                          CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(mm), CLT__ARG(mo), CLT__ARG(rm),
                          CLT__ARG(ro), CLT__ARG(wm), CLT__ARG(wo), CLT__ARG(d), CLT__ARG(lanes),
                          CLT__ARG(has_w)));
        if (vec) {
            CLT_TRY(CLT__ARGS_AT(ctx, k, 15, CLT__ARG(r))); /* after the 15 arguments above */
            CLT_TRY(clt__nn_launch_items(ctx, k, R, "layernorm_backward_dx_vec"));
        } else {
            CLT_TRY(launch_rows(ctx, k, R, lanes, "layernorm_backward_dx"));
        }
    }
fail:
    return st;
}

void clt__opts_layernorm(char *dst, size_t n, clt_dtype x, clt_dtype g)
{
    snprintf(dst, n, "-DX_DTYPE=%d -DG_DTYPE=%d -DCLT_LN_TILE=%d -DCLT_LN_COLS=%d", (int)x, (int)g,
             LN_TILE, LN_COLS);
}

static void layernorm_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[80];
    for (int x = 0; x < CLT__FLOAT_DTYPES; x++)
        for (int g = 0; g < CLT__FLOAT_DTYPES; g++) {
            clt__opts_layernorm(o, sizeof o, (clt_dtype)x, (clt_dtype)g);
            fn("layernorm", o, user);
        }
}

const struct clt__op_family clt__family_layernorm = {
    .name = "layernorm",
    .sources = "layernorm",
    .slots = LN__KERNELS * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES, /* kernel, x and dy dtypes */
    .variants = layernorm_variants,
};
