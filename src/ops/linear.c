/* C wrappers of cl/linear.cl: the bias half of a linear layer, y += bias and the deterministic
 * bias gradient (column sums of dy). The GEMM half is clt_op_gemm. */
#include "ops/nn_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BIAS_TILE CLT__BIAS_TILE

/* Both kernels come from one program per dtype combination; the f32 one has no dtype
 * defines (the same program as before 16-bit storage existed). */
static clt_status linear_kernel(clt_ctx *ctx, const char *name, clt_dtype y, clt_dtype b,
                                clt_dtype dy, cl_kernel *k)
{
    int backward = strcmp(name, "linear_backward_bias") == 0;
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_linear,
                                 backward * 27 + (int)y * 9 + (int)b * 3 + (int)dy, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[96];
        clt__opts_linear(opts, sizeof opts, y, b, dy);
        st = clt__kernel(ctx, "linear", opts, name, slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* OUT = numel(bias) and t's last dimension must equal it. */
static clt_status check_rows(const clt_tensor *t, const clt_tensor *bias, const char *op,
                             const char *what, size_t *out)
{
    size_t OUT = clt_tensor_numel(bias);
    if (OUT == 0 || OUT > UINT32_MAX || clt__nn_last_dim(t) != OUT)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "%s: %s's last dimension (%zu) must equal the bias length (%zu, >= 1)", op,
                         what, clt__nn_last_dim(t), OUT);
    *out = OUT;
    return CLT_OK;
}

clt_status clt_op_bias_add(clt_tensor *y, const clt_tensor *bias)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && bias);
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    size_t OUT = 0;
    CLT_TRY(clt_tensor_same_ctx(y, bias));
    CLT_TRY(clt__nn_need_float(y, "bias_add", "y"));
    CLT_TRY(clt__nn_need_float(bias, "bias_add", "bias"));
    CLT_TRY(check_rows(y, bias, "bias_add", "y", &OUT));
    cl_mem ym = clt_tensor_mem(y), bm = clt_tensor_mem(bias);
    cl_ulong yo = clt_tensor_offset(y), bo = clt_tensor_offset(bias),
             rows = clt_tensor_numel(y) / OUT;
    cl_uint out = (cl_uint)OUT;
    CLT_TRY(linear_kernel(ctx, "linear_forward_bias", clt_tensor_dtype(y), clt_tensor_dtype(bias),
                          CLT_DTYPE_F32, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(bm), CLT__ARG(bo),
                      CLT__ARG(rows), CLT__ARG(out)));
    /* a work-item per CLT__BIAS_COLS columns of a row (cl/linear.cl) */
    CLT_TRY(clt__launch_rows(ctx, k, (OUT + CLT__BIAS_COLS - 1) / CLT__BIAS_COLS, (size_t)rows,
                             "bias_add"));
fail:
    return st;
}

clt_status clt_op_bias_grad(clt_tensor *db, const clt_tensor *dy, float beta)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(db && dy);
    clt_ctx *ctx = clt_tensor_ctx(db);
    cl_kernel k;
    size_t OUT = 0;
    CLT_TRY(clt_tensor_same_ctx(db, dy));
    CLT_TRY(clt__nn_need_dtype(db, CLT_DTYPE_F32, "bias_grad", "db"));
    CLT_TRY(clt__nn_need_float(dy, "bias_grad", "dy"));
    CLT_TRY(check_rows(dy, db, "bias_grad", "dy", &OUT));
    cl_mem dbm = clt_tensor_mem(db), dym = clt_tensor_mem(dy);
    cl_ulong dbo = clt_tensor_offset(db), dyo = clt_tensor_offset(dy),
             B = clt_tensor_numel(dy) / OUT;
    cl_uint out = (cl_uint)OUT;
    CLT_TRY(linear_kernel(ctx, "linear_backward_bias", CLT_DTYPE_F32, CLT_DTYPE_F32,
                          clt_tensor_dtype(dy), &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dbm), CLT__ARG(dbo), CLT__ARG(dym), CLT__ARG(dyo),
                      CLT__ARG(B), CLT__ARG(out), CLT__ARG(beta)));
    CLT_TRY(clt__nn_launch_groups(ctx, k, (OUT + BIAS_TILE - 1) / BIAS_TILE, "bias_grad"));
fail:
    return st;
}

void clt__opts_linear(char *dst, size_t n, clt_dtype y, clt_dtype b, clt_dtype dy)
{
    int len = snprintf(dst, n, "-DCLT_BIAS_COLS=%d -DCLT_BIAS_VECS=%d", CLT__BIAS_COLS,
                       CLT__BIAS_TILE / CLT__BIAS_COLS);
    /* the f32 program has no dtype defines (the same program as before 16-bit storage) */
    if (len > 0 && (size_t)len < n &&
        (y != CLT_DTYPE_F32 || b != CLT_DTYPE_F32 || dy != CLT_DTYPE_F32))
        snprintf(dst + len, n - (size_t)len, " -DY_DTYPE=%d -DB_DTYPE=%d -DDY_DTYPE=%d", (int)y,
                 (int)b, (int)dy);
}

static void linear_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    clt_dtype triples[16][3];
    char o[128];
    for (int t = 0, nt = clt__mixed_triples(triples); t < nt; t++) {
        clt__opts_linear(o, sizeof o, triples[t][0], triples[t][1], triples[t][2]);
        fn("linear", o, user);
    }
}

const struct clt__op_family clt__family_linear = {
    .name = "linear",
    .sources = "linear",
    /* linear_bias_add and linear_backward_bias, then the y, b and dy float dtypes */
    .slots = 2 * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES,
    .variants = linear_variants,
};
