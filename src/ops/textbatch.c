/* C wrappers of cl/textbatch.cl (compiled after cl/rng.cl): the windows of a text's token ids
 * gathered on the device into a batch's inputs and targets, at offsets drawn from Philox
 * (training) or spread evenly (evaluation). */
#include "ops/nn_internal.h"

#include <stdint.h>
#include <stdio.h>

/* The token dtypes, in slot order. */
static const clt_dtype tok_dtypes[] = {CLT_DTYPE_U8, CLT_DTYPE_U16, CLT_DTYPE_I32};
#define TOK_DTYPES (int)(sizeof tok_dtypes / sizeof *tok_dtypes)

static int tok_slot(clt_dtype d)
{
    for (int i = 0; i < TOK_DTYPES; i++)
        if (tok_dtypes[i] == d) return i;
    return -1;
}

void clt__opts_textbatch(char *dst, size_t n, clt_dtype tok)
{
    snprintf(dst, n, "-DTOK_DTYPE=%d", (int)tok);
}

static clt_status text_kernel(clt_ctx *ctx, int slot_index, clt_dtype tok, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_textbatch, slot_index, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[32];
        clt__opts_textbatch(opts, sizeof opts, tok);
        st = clt__kernel(ctx, "rng,textbatch", opts, "textbatch_gather", slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* The checks of clt_op_textbatch_gather: shapes, dtypes and that every window lies in tokens. */
static clt_status check_windows(clt_tensor *x, clt_tensor *y, const clt_tensor *tokens,
                                size_t B, size_t T, const struct clt_textbatch_windows *w,
                                const char *op)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(tokens);
    const size_t n = clt_tensor_numel(tokens);
    CLT_TRY(clt_tensor_same_ctx(tokens, x));
    CLT_TRY(clt_tensor_same_ctx(tokens, y));
    if (tok_slot(clt_tensor_dtype(tokens)) < 0)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: tokens are %s, expected u8, u16 or i32", op,
                 clt_dtype_name(clt_tensor_dtype(tokens)));
    if (B < 1 || T < 1 || B > INT32_MAX || T > INT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: B = %zu and T = %zu must be in [1, 2^31)", op, B, T);
    CLT_TRY(clt__nn_need_dtype(x, CLT_DTYPE_I32, op, "x"));
    CLT_TRY(clt__nn_need_dtype(y, CLT_DTYPE_I32, op, "y"));
    CLT_TRY(clt__nn_need_numel(x, B * T, op, "x"));
    CLT_TRY(clt__nn_need_numel(y, B * T, op, "y"));
    if (w->count < 1 || w->count > UINT32_MAX || w->count > n || n - w->count < T)
        CLT_FAIL(ctx, CLT_ERR_SHAPE,
                 "%s: %zu window starts of T + 1 = %zu tokens do not fit %zu tokens", op,
                 w->count, T + 1, n);
    if (w->even && (w->total < 1 || w->total > UINT32_MAX || w->first > w->total - B ||
                    B > w->total))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: windows %zu .. %zu of %zu", op, w->first,
                 w->first + B, w->total);
fail:
    return st;
}

clt_status clt_op_textbatch_gather(clt_tensor *x, clt_tensor *y, const clt_tensor *tokens, size_t B,
                               size_t T, const struct clt_textbatch_windows *w)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(x && y && tokens && w);
    clt_ctx *ctx = clt_tensor_ctx(tokens);
    const char *op = "textbatch_gather";
    cl_kernel k;
    CLT_TRY(check_windows(x, y, tokens, B, T, w, op));
    const clt_dtype td = clt_tensor_dtype(tokens);
    CLT_TRY(text_kernel(ctx, tok_slot(td), td, &k));
    {
        cl_mem tm = clt_tensor_mem(tokens), xm = clt_tensor_mem(x), ym = clt_tensor_mem(y);
        cl_ulong to = clt_tensor_offset(tokens), xo = clt_tensor_offset(x),
                 yo = clt_tensor_offset(y);
        cl_ulong4 a = {{w->seed, w->stream, w->count, w->even ? w->total : 0}};
        cl_uint4 b = {{(cl_uint)T, w->even ? (cl_uint)w->first : 0, w->even ? 1u : 0u, 0}};
        size_t local = clt__local_size(ctx, k);
        if (local > T) local = T; /* more would idle */
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(tm), CLT__ARG(to), CLT__ARG(xm), CLT__ARG(xo),
                          CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(a), CLT__ARG(b)));
        CLT_TRY(clt__enqueue(ctx, k, B * local, local, op));
    }
fail:
    return st;
}

static void text_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int i = 0; i < TOK_DTYPES; i++) {
        clt__opts_textbatch(o, sizeof o, tok_dtypes[i]);
        fn("rng,textbatch", o, user);
    }
}

const struct clt__op_family clt__family_textbatch = {
    .name = "textbatch",
    .sources = "rng,textbatch",
    .slots = TOK_DTYPES, /* by the tokens' dtype */
    .variants = text_variants,
};
