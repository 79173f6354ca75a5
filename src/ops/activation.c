/* C wrappers of cl/activation.cl: relu, gelu (tanh approximation), tanh, sigmoid, silu and
 * leakyrelu, forward and backward, over f32, f16 or bf16 storage. One row of `acts` per
 * activation says its kernels' stem and which saved tensor its backward reads. */
#include "ops/nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* What an activation's backward computes its derivative from. */
enum act_saves {
    SAVES_X_OR_Y, /* the input x, or the output y when x is NULL (the same mask) */
    SAVES_X,      /* the input x */
    SAVES_Y       /* the output y */
};

static const struct {
    const char *name;      /* kernels <name>_forward and <name>_backward */
    enum act_saves saves;
    bool alpha;            /* the kernels take alpha as a last argument */
} acts[CLT_ACT__COUNT] = {
    [CLT_ACT_RELU] = {"relu", SAVES_X_OR_Y, false},
    [CLT_ACT_GELU] = {"gelu", SAVES_X, false},
    [CLT_ACT_TANH] = {"tanh", SAVES_Y, false},
    [CLT_ACT_SIGMOID] = {"sigmoid", SAVES_Y, false},
    [CLT_ACT_SILU] = {"silu", SAVES_X, false},
    [CLT_ACT_LEAKYRELU] = {"leakyrelu", SAVES_X_OR_Y, true},
};

/* The slope clt_op_act_forward and clt_op_act_backward give leakyrelu (nn.LeakyReLU's). */
#define ACT_DEFAULT_ALPHA 0.01f

/* The ctx's kernel <activation>_<dir> for t's float dtype, built on first use. */
static clt_status act_kernel(const clt_tensor *t, clt_act a, const char *dir, cl_kernel *k)
{
    int backward = strcmp(dir, "backward") == 0;
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(clt_tensor_ctx(t), CLT__OPF_activation,
                                 ((int)a * 2 + backward) * 3 + (int)clt_tensor_dtype(t), &slot);
    if (st == CLT_OK && !*slot) {
        char opts[32], name[32];
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
        snprintf(name, sizeof name, "%s_%s", acts[a].name, dir);
        st = clt__kernel(clt_tensor_ctx(t), "act_fn,activation", opts, name, slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

static clt_status check_act(const clt_tensor *t, clt_act a, float alpha, const char *op)
{
    if ((unsigned)a >= CLT_ACT__COUNT)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_INVALID_ARG, "%s: unknown activation %d", op,
                         (int)a);
    if (acts[a].alpha && !isfinite(alpha))
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_INVALID_ARG,
                         "%s: %s slope must be finite, got %g", op, acts[a].name, (double)alpha);
    return CLT_OK;
}

clt_status clt_op_act_forward_alpha(clt_act a, float alpha, clt_tensor *y, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    CLT_TRY(check_act(y, a, alpha, "act_forward"));
    CLT_TRY(clt__check_pair(y, x, true, "act_forward"));
    CLT_TRY(clt__nn_need_float(y, "act_forward", "y"));
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = clt_tensor_numel(y);
    CLT_TRY(act_kernel(y, a, "forward", &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo),
                      CLT__ARG(n)));
    if (acts[a].alpha) CLT_TRY(CLT__ARGS_AT(ctx, k, 5, CLT__ARG(alpha)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "act_forward"));
fail:
    return st;
}

clt_status clt_op_act_forward(clt_act a, clt_tensor *y, const clt_tensor *x)
{
    return clt_op_act_forward_alpha(a, ACT_DEFAULT_ALPHA, y, x);
}

bool clt_op_act_backward_reads_y(clt_act a, float alpha)
{
    /* y has x's sign only where the negative side keeps it (leakyrelu with a slope < 0 flips) */
    bool y_masks = !acts[a].alpha || alpha >= 0.0f;
    return acts[a].saves == SAVES_Y || (acts[a].saves == SAVES_X_OR_Y && y_masks);
}

const clt_tensor *clt_op_act_saved(clt_act a, float alpha, const clt_tensor *x,
                                   const clt_tensor *y)
{
    switch (acts[a].saves) {
    case SAVES_X_OR_Y:
        return x ? x : clt_op_act_backward_reads_y(a, alpha) ? y : NULL;
    case SAVES_X:
        return x;
    default: /* SAVES_Y */
        return y;
    }
}

clt_status clt_op_act_backward_alpha(clt_act a, float alpha, clt_tensor *dx, const clt_tensor *dy,
                                     const clt_tensor *x, const clt_tensor *y)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(dx && dy);
    clt_ctx *ctx = clt_tensor_ctx(dx);
    cl_kernel k;
    CLT_TRY(check_act(dx, a, alpha, "act_backward"));
    /* the saved tensor the derivative is computed from */
    const clt_tensor *s = clt_op_act_saved(a, alpha, x, y);
    bool y_masks = !acts[a].alpha || alpha >= 0.0f;
    if (!s)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "act_backward: %s needs the forward %s", acts[a].name,
                 acts[a].saves == SAVES_X_OR_Y && y_masks ? "input x or output y"
                 : acts[a].saves == SAVES_Y               ? "output y"
                                                          : "input x");
    CLT_TRY(clt__check_pair(dx, dy, true, "act_backward"));
    CLT_TRY(clt__check_pair(dx, s, true, "act_backward"));
    CLT_TRY(clt__nn_need_float(dx, "act_backward", "dx"));
    cl_mem dxm = clt_tensor_mem(dx), dym = clt_tensor_mem(dy), sm = clt_tensor_mem(s);
    cl_ulong dxo = clt_tensor_offset(dx), dyo = clt_tensor_offset(dy), so = clt_tensor_offset(s),
             n = clt_tensor_numel(dx);
    CLT_TRY(act_kernel(dx, a, "backward", &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(dym), CLT__ARG(dyo),
                      CLT__ARG(sm), CLT__ARG(so), CLT__ARG(n)));
    if (acts[a].alpha) CLT_TRY(CLT__ARGS_AT(ctx, k, 7, CLT__ARG(alpha)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "act_backward"));
fail:
    return st;
}

clt_status clt_op_act_backward(clt_act a, clt_tensor *dx, const clt_tensor *dy, const clt_tensor *x,
                               const clt_tensor *y)
{
    return clt_op_act_backward_alpha(a, ACT_DEFAULT_ALPHA, dx, dy, x, y);
}

static void activation_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int d = 0; d < CLT__FLOAT_DTYPES; d++) {
        clt__opts_dtype(o, sizeof o, (clt_dtype)d);
        fn("act_fn,activation", o, user);
    }
}

const struct clt__op_family clt__family_activation = {
    .name = "activation",
    .sources = "act_fn,activation",
    .slots = CLT_ACT__COUNT * 2 * CLT__FLOAT_DTYPES, /* activation, direction, float dtype */
    .variants = activation_variants,
};
