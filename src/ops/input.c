/* C wrapper of cl/input.cl: u8 samples to f32 with a per-feature scale and shift. */
#include "ops/nn_internal.h"

#include <stdint.h>

clt_status clt_op_u8_to_f32(clt_tensor *y, const clt_tensor *x_u8, const clt_tensor *scale,
                            const clt_tensor *shift)
{
    static const char op[] = "u8_to_f32";
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x_u8 && scale && shift);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    CLT_TRY(clt__check_pair(y, x_u8, false, op));
    CLT_TRY(clt__check_pair(scale, shift, true, op));
    CLT_TRY(clt_tensor_same_ctx(y, scale));
    CLT_TRY(clt__nn_need_dtype(y, CLT_DTYPE_F32, op, "y"));
    CLT_TRY(clt__nn_need_dtype(x_u8, CLT_DTYPE_U8, op, "x"));
    CLT_TRY(clt__nn_need_dtype(scale, CLT_DTYPE_F32, op, "scale"));
    size_t F = clt_tensor_numel(scale), total = clt_tensor_numel(y);
    if (F == 0 || F > UINT32_MAX || total % F != 0)
        CLT_FAIL(ctx, CLT_ERR_SHAPE,
                 "%s: x has %zu elements, not a whole number of samples of %zu features", op, total,
                 F);
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x_u8), scm = clt_tensor_mem(scale),
           shm = clt_tensor_mem(shift);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x_u8),
             sco = clt_tensor_offset(scale), sho = clt_tensor_offset(shift), n = total;
    cl_uint f = (cl_uint)F;
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(ctx, CLT__OPF_input, 0, &slot));
    if (!*slot) CLT_TRY(clt__kernel(ctx, "input", NULL, "input_u8_to_f32", slot));
    k = *slot;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(scm),
                      CLT__ARG(sco), CLT__ARG(shm), CLT__ARG(sho), CLT__ARG(n), CLT__ARG(f)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, op));
fail:
    return st;
}

static void input_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    fn("input", "", user);
}

const struct clt__op_family clt__family_input = {
    .name = "input",
    .sources = "input",
    .slots = 1, /* input_u8_to_f32 */
    .variants = input_variants,
};
