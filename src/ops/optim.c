/* The optimizers' update kernels (cl/optim.cl), an op family: SGD with or without momentum and
 * Adam, each also in a form for dynamic loss scaling, optionally storing a 16-bit copy of the
 * parameters, and the gradients' global norm for clipping. The optimizers themselves (hyper-parameters, state, schedules) are src/train's. */
#include "ops/family_internal.h"

#include "runtime/internal.h"

#include <stdio.h>

static const char *const optim_names[CLT__OPTIM__KERNELS] = {
    [CLT__OPTIM_SGD] = "sgd_step",
    [CLT__OPTIM_SGD_AMP] = "sgd_step_amp",
    [CLT__OPTIM_SGD_MOMENTUM] = "sgd_momentum_step",
    [CLT__OPTIM_SGD_MOMENTUM_AMP] = "sgd_momentum_step_amp",
    [CLT__OPTIM_ADAM_AMP_PREPARE] = "adam_amp_prepare",
    [CLT__OPTIM_ADAM_AMP] = "adam_step_amp",
    [CLT__OPTIM_ADAM] = "adam_step",
    [CLT__OPTIM_GRAD_NORM_PARTIAL] = "grad_norm_partial",
    [CLT__OPTIM_GRAD_NORM_FINISH] = "grad_norm_finish",
};

/* The program's options for a parameter copy in `copy` (f16, bf16; f32: none). */
static void opts_optim(char *dst, size_t n, clt_dtype copy)
{
    if (copy == CLT_DTYPE_F32)
        snprintf(dst, n, "%s", CLT__OPTS_OPTIM);
    else
        snprintf(dst, n, "%s -DCOPY_DTYPE=%d", CLT__OPTS_OPTIM, (int)copy);
}

clt_status clt__optim_kernel(clt_ctx *ctx, clt__optim_kernel_id which, clt_dtype copy, cl_kernel *k)
{
    CLT_ASSERT(which >= 0 && which < CLT__OPTIM__KERNELS && clt__is_float(copy));
    cl_kernel *slot = NULL;
    clt_status st =
        clt__op_slot(ctx, CLT__OPF_optim, (int)copy * CLT__OPTIM__KERNELS + (int)which, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[64];
        opts_optim(opts, sizeof opts, copy);
        st = clt__kernel(ctx, "optim", opts, optim_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

static void optim_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[64];
    for (int d = 0; d < CLT__FLOAT_DTYPES; d++) {
        opts_optim(o, sizeof o, (clt_dtype)d);
        fn("optim", o, user);
    }
}

const struct clt__op_family clt__family_optim = {
    .name = "optim",
    .sources = "optim",
    .slots = CLT__FLOAT_DTYPES * CLT__OPTIM__KERNELS, /* the copy's dtype, then the kernel */
    .variants = optim_variants,
};
