/* C wrappers of cl/amp.cl: the device half of dynamic loss scaling (fp16 mixed precision):
 * scale the loss gradient, unscale the flat gradients while checking them for inf/NaN, and
 * update the scale, all without a host wait. The scaler object is in src/train/optim.c. */
#include "ops/nn_internal.h"

static clt_status check_state(const clt_tensor *state, const char *op)
{
    if (clt_tensor_dtype(state) == CLT_DTYPE_I32 && clt_tensor_numel(state) >= CLT_AMP_STATE_LEN)
        return CLT_OK;
    return clt__fail(clt_tensor_ctx(state), CLT_ERR_SHAPE,
                     "%s: the scaler state must be i32 with %d elements, got %s with %zu", op,
                     CLT_AMP_STATE_LEN, clt_dtype_name(clt_tensor_dtype(state)),
                     clt_tensor_numel(state));
}

enum { AMP_SCALE, AMP_UNSCALE, AMP_UPDATE };
static const char *const amp_names[] = {"amp_scale", "amp_unscale", "amp_update"};

/* The ctx's kernel `which` of cl/amp.cl, built on first use. */
static clt_status amp_kernel(clt_ctx *ctx, int which, cl_kernel *k)
{
    return clt__op_kernel_by_index(ctx, CLT__OPF_amp, which, NULL, amp_names, k);
}

#define CLT__AMP_V 64 /* elements per work-item of amp_scale and amp_unscale (cl/amp.cl's AMP_V) */

/* x (f32) and the state: one item per AMP_V elements of x. */
static clt_status run_xs(int which, clt_tensor *x, const clt_tensor *state)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(x);
    const char *name = amp_names[which];
    cl_kernel k;
    CLT_TRY(clt_tensor_same_ctx(x, state));
    CLT_TRY(clt__nn_need_dtype(x, CLT_DTYPE_F32, name, "x"));
    CLT_TRY(check_state(state, name));
    cl_mem xm = clt_tensor_mem(x), sm = clt_tensor_mem(state);
    cl_ulong xo = clt_tensor_offset(x), n = clt_tensor_numel(x);
    if (n == 0) return CLT_OK;
    CLT_ASSERT(clt_tensor_offset(state) == 0); /* the kernels index the state from 0 */
    CLT_TRY(amp_kernel(ctx, which, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(n), CLT__ARG(sm)));
    CLT_TRY(clt__launch_1d(ctx, k, ((size_t)n + CLT__AMP_V - 1) / CLT__AMP_V, name));
fail:
    return st;
}

clt_status clt_op_amp_scale(clt_tensor *x, const clt_tensor *state)
{
    CLT_ASSERT(x && state);
    return run_xs(AMP_SCALE, x, state);
}

clt_status clt_op_amp_unscale(clt_tensor *grads, clt_tensor *state)
{
    CLT_ASSERT(grads && state);
    return run_xs(AMP_UNSCALE, grads, state);
}

clt_status clt_op_amp_update(clt_tensor *state, float growth, float backoff, int growth_interval)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(state);
    clt_ctx *ctx = clt_tensor_ctx(state);
    cl_kernel k;
    CLT_TRY(check_state(state, "amp_update"));
    CLT_ASSERT(clt_tensor_offset(state) == 0);
    if (!(growth >= 1.0f) || !(backoff > 0.0f && backoff <= 1.0f) || growth_interval < 1)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "amp_update: growth %g must be >= 1, backoff %g in (0, 1], interval %d >= 1",
                 (double)growth, (double)backoff, growth_interval);
    cl_mem sm = clt_tensor_mem(state);
    cl_int gi = growth_interval;
    CLT_TRY(amp_kernel(ctx, AMP_UPDATE, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(sm), CLT__ARG(growth), CLT__ARG(backoff), CLT__ARG(gi)));
    CLT_TRY(clt__launch_1d(ctx, k, 1, "amp_update"));
fail:
    return st;
}

static void amp_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    fn("amp", "", user);
}

const struct clt__op_family clt__family_amp = {
    .name = "amp",
    .sources = "amp",
    .slots = (int)(sizeof amp_names / sizeof *amp_names),
    .variants = amp_variants,
};
