/* C wrappers of cl/dropout.cl (compiled after cl/rng.cl): inverted dropout with a Philox mask
 * that the host's rng.h reproduces bit for bit. */
#include "ops/nn_internal.h"

#include <stdio.h>
#include <string.h>

#define DROPOUT_RUN 32 /* elements per work-item: CLT_DROPOUT_RUN in cl/dropout.cl */

static clt_status dropout(const char *op, const char *kernel, clt_tensor *y, const clt_tensor *x,
                          float p, uint64_t seed, uint64_t stream)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    char opts[32];
    CLT_TRY(clt__check_pair(y, x, true, op));
    CLT_TRY(clt__nn_need_float(y, op, "the tensor"));
    if (!(p >= 0.0f && p < 1.0f))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: p = %g is outside [0, 1)", op, (double)p);
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), n = clt_tensor_numel(y),
             s = seed, str = stream;
    float scale = 1.0f / (1.0f - p);
    int backward = strcmp(kernel, "dropout_backward") == 0;
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(ctx, CLT__OPF_dropout, backward * 3 + (int)clt_tensor_dtype(y), &slot));
    if (!*slot) {
        clt__opts_dtype(opts, sizeof opts, clt_tensor_dtype(y));
        CLT_TRY(clt__kernel(ctx, "rng,dropout", opts, kernel, slot));
    }
    k = *slot;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(n),
                      CLT__ARG(p), CLT__ARG(scale), CLT__ARG(s), CLT__ARG(str)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)((n + DROPOUT_RUN - 1) / DROPOUT_RUN), op));
fail:
    return st;
}

clt_status clt_op_dropout_forward(clt_tensor *y, const clt_tensor *x, float p, uint64_t seed,
                                  uint64_t stream)
{
    return dropout("dropout_forward", "dropout_forward", y, x, p, seed, stream);
}

clt_status clt_op_dropout_backward(clt_tensor *dx, const clt_tensor *dy, float p, uint64_t seed,
                                   uint64_t stream)
{
    return dropout("dropout_backward", "dropout_backward", dx, dy, p, seed, stream);
}

static void dropout_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int d = 0; d < CLT__FLOAT_DTYPES; d++) {
        clt__opts_dtype(o, sizeof o, (clt_dtype)d);
        fn("rng,dropout", o, user);
    }
}

const struct clt__op_family clt__family_dropout = {
    .name = "dropout",
    .sources = "rng,dropout",
    .slots = 2 * CLT__FLOAT_DTYPES, /* direction, float dtype */
    .variants = dropout_variants,
};
