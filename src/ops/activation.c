/* C wrappers of cl/activation.cl: relu, gelu (tanh approximation), tanh and sigmoid, forward
 * and backward, over f32, f16 or bf16 storage. */
#include "ops/nn_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const act_names[] = {"relu", "gelu", "tanh", "sigmoid"};

/* The ctx's kernel <activation>_<dir> for t's float dtype, built on first use. */
static clt_status act_kernel(const clt_tensor *t, clt_act a, const char *dir, cl_kernel *k)
{
    int backward = strcmp(dir, "backward") == 0;
    cl_kernel *slot = clt__kernel_slot(clt_tensor_ctx(t), CLT__K_ACT,
                                       ((int)a * 2 + backward) * 3 + (int)clt_tensor_dtype(t));
    if (!*slot) {
        char opts[32], name[32];
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(t));
        snprintf(name, sizeof name, "%s_%s", act_names[a], dir);
        clt_status st = clt__kernel(clt_tensor_ctx(t), "activation", opts, name, slot);
        if (st != CLT_OK) return st;
    }
    *k = *slot;
    return CLT_OK;
}

static clt_status check_act(const clt_tensor *t, clt_act a, const char *op)
{
    if ((unsigned)a < sizeof act_names / sizeof *act_names) return CLT_OK;
    return clt__fail(clt_tensor_ctx(t), CLT_ERR_INVALID_ARG, "%s: unknown activation %d", op,
                     (int)a);
}

clt_status clt_op_act_forward(clt_act a, clt_tensor *y, const clt_tensor *x)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    CLT_TRY(check_act(y, a, "act_forward"));
    CLT_TRY(clt__check_pair(y, x, true, "act_forward"));
    CLT_TRY(clt__nn_need_float(y, "act_forward", "y"));
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = clt_tensor_numel(y);
    CLT_TRY(act_kernel(y, a, "forward", &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo),
                      CLT__ARG(n)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "act_forward"));
fail:
    return st;
}

clt_status clt_op_act_backward(clt_act a, clt_tensor *dx, const clt_tensor *dy, const clt_tensor *x,
                               const clt_tensor *y)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(dx && dy);
    clt_ctx *ctx = clt_tensor_ctx(dx);
    cl_kernel k;
    const clt_tensor *s = NULL; /* the saved tensor the derivative is computed from */
    CLT_TRY(check_act(dx, a, "act_backward"));
    switch (a) {
    case CLT_ACT_RELU:
        s = x ? x : y;
        break;
    case CLT_ACT_GELU:
        s = x;
        break;
    case CLT_ACT_TANH:
    case CLT_ACT_SIGMOID:
        s = y;
        break;
    }
    if (!s)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "act_backward: %s needs the forward %s", act_names[a],
                 a == CLT_ACT_RELU   ? "input x or output y"
                 : a == CLT_ACT_GELU ? "input x"
                                     : "output y");
    CLT_TRY(clt__check_pair(dx, dy, true, "act_backward"));
    CLT_TRY(clt__check_pair(dx, s, true, "act_backward"));
    CLT_TRY(clt__nn_need_float(dx, "act_backward", "dx"));
    cl_mem dxm = clt_tensor_mem(dx), dym = clt_tensor_mem(dy), sm = clt_tensor_mem(s);
    cl_ulong dxo = clt_tensor_offset(dx), dyo = clt_tensor_offset(dy), so = clt_tensor_offset(s),
             n = clt_tensor_numel(dx);
    CLT_TRY(act_kernel(dx, a, "backward", &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(dym), CLT__ARG(dyo),
                      CLT__ARG(sm), CLT__ARG(so), CLT__ARG(n)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, "act_backward"));
fail:
    return st;
}
