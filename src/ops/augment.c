/* C wrapper of cl/augment.cl (compiled after cl/rng.cl): random flip, translation and cutout of
 * an f32 image batch, out of place, with the host's Philox draws (see clt_op_augment). */
#include "ops/nn_internal.h"

#include <stdint.h>

clt_status clt_op_augment(clt_tensor *y, const clt_tensor *x, const struct clt_augment_geom *g,
                          uint64_t seed, uint64_t stream, uint64_t first)
{
    static const char op[] = "augment";
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x && g);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x, true, op));
    CLT_TRY(clt__nn_need_dtype(y, CLT_DTYPE_F32, op, "y"));
    if (g->shift < 0 || g->shift > (1 << 20) || g->cutout < 0 || g->flip < 0 || g->flip > 1)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "%s: flip %d, shift %d, cutout %d; expected flip 0 or 1, shift in [0, 2^20], "
                 "cutout >= 0",
                 op, g->flip, g->shift, g->cutout);
    if (g->H == 0 || g->W == 0 || g->C == 0 || g->H >= INT32_MAX || g->W >= INT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: images (%zu, %zu, %zu); expected sides in "
                 "[1, 2^31)", op, g->C, g->H, g->W);
    size_t sample = g->C * g->H * g->W, total = clt_tensor_numel(y);
    if (total % sample != 0)
        CLT_FAIL(ctx, CLT_ERR_SHAPE,
                 "%s: %zu elements, not a whole number of (%zu, %zu, %zu) images", op, total,
                 g->C, g->H, g->W);
    if (total == 0) goto fail; /* st is CLT_OK: nothing to do */
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = total, C = g->C, H = g->H,
             W = g->W, s = seed, str = stream, f = first;
    cl_int flip = g->flip, shift = g->shift, cutout = g->cutout;
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(ctx, CLT__OPF_augment, 0, &slot));
    if (!*slot) CLT_TRY(clt__kernel(ctx, "rng,augment", NULL, "augment_forward", slot));
    k = *slot;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(n),
                      CLT__ARG(C), CLT__ARG(H), CLT__ARG(W), CLT__ARG(flip), CLT__ARG(shift),
                      CLT__ARG(cutout), CLT__ARG(s), CLT__ARG(str), CLT__ARG(f)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, op));
fail:
    return st;
}

static void augment_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    fn("rng,augment", "", user);
}

const struct clt__op_family clt__family_augment = {
    .name = "augment",
    .sources = "rng,augment",
    .slots = 1, /* augment_forward, f32 batches */
    .variants = augment_variants,
};
