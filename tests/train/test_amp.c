/* Tests of mixed precision: 16-bit GEMM (cl/gemm.cl with GEMM_*_DTYPE) against a float64
 * reference on the inputs rounded to 16 bits; the model in bf16 and f16 against the same model
 * in f32; dynamic loss scaling (cl/amp.cl, clt_scaler in src/train/optim.c): backoff and a skipped
 * step on an injected overflow, growth after growth_interval clean steps, Adam's and SGD's step
 * counts that exclude skipped steps; bf16 and fp16 training of a tiny model against fp32; and
 * the memory the accountant sees per precision (and clt_model_mem_estimate against it).
 * CLTRAIN_TEST_SMALL (tests/small.h) shrinks the GEMM shapes and the tiny training run. */
#include "common.h"
#include "small.h"

#include "cltrain/checkpoint.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/spec.h"
#include "nn/model_internal.h"
#include "ops/tune_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* v rounded to dtype d's storage (identity for f32). */
static float round_to(clt_dtype d, float v)
{
    if (d == CLT_DTYPE_F16) return clt_f16_to_f32(clt_f32_to_f16(v));
    if (d == CLT_DTYPE_BF16) return clt_bf16_to_f32(clt_f32_to_bf16(v));
    return v;
}

/* Relative rounding error of one store into d: half an ulp. */
static double unit_round(clt_dtype d)
{
    return d == CLT_DTYPE_F16 ? 0x1p-11 : d == CLT_DTYPE_BF16 ? 0x1p-8 : 0x1p-24;
}

/* A tensor of n elements of dtype d holding src rounded to d (written in d's storage). */
static clt_tensor *upload(clt_ctx *ctx, clt_dtype d, const float *src, size_t n)
{
    clt_tensor *t = tc_tensor(ctx, d, n);
    if (d == CLT_DTYPE_F32) {
        tc_write(t, src);
    } else {
        uint16_t *h = xalloc(n, sizeof *h);
        for (size_t i = 0; i < n; i++)
            h[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(src[i]) : clt_f32_to_bf16(src[i]);
        tc_write(t, h);
        free(h);
    }
    return t;
}

static void download(const clt_tensor *t, float *dst)
{
    size_t n = clt_tensor_numel(t);
    clt_dtype d = clt_tensor_dtype(t);
    if (d == CLT_DTYPE_F32) {
        tc_read(t, dst);
        return;
    }
    uint16_t *h = xalloc(n, sizeof *h);
    tc_read(t, h);
    for (size_t i = 0; i < n; i++)
        dst[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(h[i]) : clt_bf16_to_f32(h[i]);
    free(h);
}

/* ---- GEMM with 16-bit operands ------------------------------------------------------------ */

/* One GEMM with A, B, C of the given dtypes against float64 on the rounded inputs.
 * Tolerance per element: |got - ref| <= u_C |ref| + 2^-23 (K |alpha| sum|a b| + 2 |beta c|)
 * + 1e-6, u_C the output's rounding (2^-11 f16, 2^-8 bf16, 2^-24 f32) plus the fp32 bound of a
 * K-term sum in any order, as test_gemm. */
static void check_gemm16(clt_ctx *ctx, const struct clt_gemm_choice *c, int ta, int tb, size_t M,
                         size_t N, size_t K, float alpha, float beta, clt_dtype da, clt_dtype db,
                         clt_dtype dc, tc_rng *r)
{
    size_t na = M * K, nb = K * N, nc = M * N, lda = ta ? M : K, ldb = tb ? K : N;
    float *a = xalloc(na, sizeof *a), *b = xalloc(nb, sizeof *b), *c0 = xalloc(nc, sizeof *c0),
          *got = xalloc(nc, sizeof *got);
    tc_fill_nonzero(r, a, na, 0.05f, 1.0f);
    tc_fill_nonzero(r, b, nb, 0.05f, 1.0f);
    tc_fill_nonzero(r, c0, nc, 0.05f, 1.0f);
    for (size_t i = 0; i < na; i++) a[i] = round_to(da, a[i]);
    for (size_t i = 0; i < nb; i++) b[i] = round_to(db, b[i]);
    for (size_t i = 0; i < nc; i++) c0[i] = round_to(dc, c0[i]);
    clt_tensor *A = upload(ctx, da, a, na), *B = upload(ctx, db, b, nb),
               *C = upload(ctx, dc, c0, nc);
    if (beta == 0.0f) tc_poison(C); /* beta = 0 must not read C */
    clt_trans tA = ta ? CLT_TRANS : CLT_NO_TRANS, tB = tb ? CLT_TRANS : CLT_NO_TRANS;
    clt_status st = c ? clt_op_gemm_with(c, tA, tB, M, N, K, alpha, A, B, beta, C)
                      : clt_op_gemm(tA, tB, M, N, K, alpha, A, B, beta, C);
    ck_assert_msg(st == CLT_OK, "gemm %s%s%s: %s", clt_dtype_name(da), clt_dtype_name(db),
                  clt_dtype_name(dc), clt_ctx_errmsg(ctx));
    download(C, got);
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double s = 0, sa = 0;
            for (size_t k = 0; k < K; k++) {
                double x = ta ? a[k * lda + m] : a[m * lda + k];
                double y = tb ? b[n * ldb + k] : b[k * ldb + n];
                s += x * y;
                sa += fabs(x * y);
            }
            double ref = alpha * s + (beta != 0.0f ? beta * (double)c0[m * N + n] : 0.0);
            double tol = unit_round(dc) * fabs(ref) +
                         0x1p-23 * ((double)K * fabs(alpha) * sa +
                                    2 * fabs(beta * (double)c0[m * N + n])) +
                         1e-6;
            double g = got[m * N + n];
            ck_assert_msg(fabs(g - ref) <= tol,
                          "gemm %c%c A %s B %s C %s M=%zu N=%zu K=%zu alpha=%g beta=%g: "
                          "C[%zu,%zu] = %.9g, ref %.9g, tol %.3g (seed %llu)",
                          ta ? 'T' : 'N', tb ? 'T' : 'N', clt_dtype_name(da), clt_dtype_name(db),
                          clt_dtype_name(dc), M, N, K, (double)alpha, (double)beta, m, n, g, ref,
                          tol, (unsigned long long)r->seed);
        }
    clt_tensor_free(A);
    clt_tensor_free(B);
    clt_tensor_free(C);
    free(a);
    free(b);
    free(c0);
    free(got);
}

START_TEST(test_gemm16)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    /* the dtype triples the model uses, and all-16-bit ones */
    const clt_dtype combos[][3] = {
        {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_BF16},  /* first layer forward */
        {CLT_DTYPE_BF16, CLT_DTYPE_BF16, CLT_DTYPE_F32},  /* last layer forward, dW */
        {CLT_DTYPE_BF16, CLT_DTYPE_BF16, CLT_DTYPE_BF16}, /* hidden forward, dX */
        {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_F16}, /* any mix works */
        {CLT_DTYPE_F16, CLT_DTYPE_F32, CLT_DTYPE_F32},
        {CLT_DTYPE_F16, CLT_DTYPE_F16, CLT_DTYPE_F16}};
    static const size_t full[][3] = {{1, 1, 1}, {17, 5, 33}, {100, 17, 129}, {33, 70, 300}},
                        small[][3] = {{1, 1, 1}, {17, 5, 33}, {65, 17, 33}, {5, 70, 130}};
    const size_t(*sizes)[3] = TC_SMALL_OR(full, small);
    /* ctx's choice (substituted by the built-in 16-bit kernel when it takes no 16-bit input),
     * a packed direct kernel with edges everywhere, and a tiled one */
    const struct clt_gemm_choice packed = {.kernel = CLT_GEMM_DIRECT, .tm = 3, .tn = 8, .vw = 4,
                                           .wgm = 1, .wgn = 1, .kb = 16, .bm = 2, .bn = 2},
                                 tiled = {.kernel = CLT_GEMM_TILED, .tm = 2, .tn = 2, .vw = 1,
                                          .wgm = 4, .wgn = 4, .kb = 8, .bm = 1, .bn = 1};
    /* and the panel family with a block that leaves edges everywhere */
    const struct clt_gemm_choice panel = {.kernel = CLT_GEMM_PANEL, .tm = 3, .tn = 8, .vw = 4,
                                          .wgm = 1, .wgn = 1, .kb = 16, .bm = 2, .bn = 2};
    struct clt_gemm_choice panel_ia = panel;
    panel_ia.ia = 1;
    const struct clt_gemm_choice *choices[] = {NULL, &packed, &tiled, &panel, &panel_ia};
    /* every triple with the ctx's choice; one mixed triple with the explicit ones (each triple,
     * layout and choice is one more kernel compile) */
    for (size_t ci = 0; ci < 5; ci++)
        for (size_t d = ci ? 3 : 0; d < (ci ? 4 : sizeof combos / sizeof *combos); d++)
            for (int l = 0; l < 4; l++)
                for (size_t s = 0; s < sizeof full / sizeof *full; s++) {
                    float beta = (s % 2) ? 1.0f : 0.0f, alpha = (l == 3) ? 0.5f : 1.0f;
                    check_gemm16(ctx, choices[ci], l >> 1, l & 1, sizes[s][0], sizes[s][1],
                                 sizes[s][2], alpha, beta, combos[d][0], combos[d][1],
                                 combos[d][2], &r);
                }
    /* the panel family through the edge sizes 1, 7, 33, 127, 1000 of M, N and K in turn, on
     * every layout, one 16-bit triple each (33 at most under oclgrind) */
    static const size_t edges[] = {1, 7, 33, 127, 1000};
    for (size_t e = 0; e < (tc_small() ? 3u : 5u); e++)
        for (int l = 0; l < 4; l++) {
            const size_t x = edges[e], d = (e + (size_t)l) % 3 + 2; /* combos 2, 3, 4 */
            const struct clt_gemm_choice *pc = l % 2 ? &panel_ia : &panel;
            check_gemm16(ctx, pc, l >> 1, l & 1, x, 9, 7, 1.0f, 0.0f, combos[d][0], combos[d][1],
                         combos[d][2], &r);
            check_gemm16(ctx, pc, l >> 1, l & 1, 5, x, 11, 1.0f, 1.0f, combos[d][0],
                         combos[d][1], combos[d][2], &r);
            check_gemm16(ctx, pc, l >> 1, l & 1, 13, 3, x, 1.0f, 0.0f, combos[d][0],
                         combos[d][1], combos[d][2], &r);
        }
    /* A 16-bit C takes the panel family's whole K range at once; one too deep for its
     * workspace (K (tm + tn) > CLT_GEMM_WS_FLOATS) runs the built-in 16-bit kernel instead. */
    if (!tc_small())
        check_gemm16(ctx, &panel, 1, 0, 5, 3, CLT_GEMM_WS_FLOATS / 11 + 7, 1.0f, 0.0f,
                     CLT_DTYPE_BF16, CLT_DTYPE_BF16, CLT_DTYPE_BF16, &r);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- the model in 16 bits against f32 ------------------------------------------------------ */

/* A model on inputs of shape (in), or (T, in / T) when T is not 0. */
static clt_model *make_model_seq(clt_ctx *ctx, const char *text, size_t T, size_t in, size_t out,
                                 size_t max_batch, clt_dtype precision)
{
    clt_spec s = {0};
    ck_assert_int_eq(clt_spec_parse(text, 0, &s), CLT_OK);
    struct clt_model_params p = clt_model_default_params();
    p.seed = 7;
    p.max_batch = max_batch;
    p.precision = precision;
    p.input_shape[0] = T;
    p.input_shape[1] = T ? in / T : 0;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, in, out, &p));
    clt_spec_free(&s);
    return m;
}

static clt_model *make_model(clt_ctx *ctx, const char *text, size_t in, size_t out,
                             size_t max_batch, clt_dtype precision)
{
    return make_model_seq(ctx, text, 0, in, out, max_batch, precision);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Forward (train mode, dropout on) and backward of `text` in f32 and in `prec` from the same
 * weights, inputs and output gradient, on 20 flat inputs (T 0) or sequences (T, 20 / T).
 * Tolerance, relative to the largest magnitude of the f32 result: bf16 4e-2, f16 5e-3 (several
 * 16-bit roundings of activations, weights and gradients: bf16 keeps 8 significant bits, f16
 * 11; measured about a third of these). */
static void compare_model_seq(clt_ctx *ctx, const char *text, size_t T, clt_dtype prec,
                              tc_rng *r)
{
    const size_t B = 17, IN = 20;
    clt_model *m32 = make_model_seq(ctx, text, T, IN, 5, 32, CLT_DTYPE_F32);
    clt_model *m16 = make_model_seq(ctx, text, T, IN, 5, 32, prec);
    size_t oshape[3];
    const size_t OUT = clt_model_output_shape(m32, oshape) == 2 ? oshape[0] * oshape[1] : 5;
    ck_assert_int_eq(clt_model_precision(m16), prec);
    ck_assert_int_eq(clt_tensor_dtype(clt_model_weights(m16)), prec);
    float *x = xalloc(B * IN, sizeof *x), *dout = xalloc(B * OUT, sizeof *dout);
    tc_fill_nonzero(r, x, B * IN, 0.1f, 2.0f);
    tc_fill_nonzero(r, dout, B * OUT, 0.1f, 1.0f);
    size_t xd[2] = {B, IN}, od[2] = {B, OUT};
    clt_tensor *xt = NULL, *dt = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, od, CLT_MEM_OTHER));
    tc_write(xt, x);
    tc_write(dt, dout);
    size_t P = clt_tensor_numel(clt_model_params(m32));
    float *y32 = xalloc(B * OUT, sizeof *y32), *y16 = xalloc(B * OUT, sizeof *y16),
          *g32 = xalloc(P, sizeof *g32), *g16 = xalloc(P, sizeof *g16);
    clt_model *ms[2] = {m32, m16};
    float *ys[2] = {y32, y16}, *gs[2] = {g32, g16};
    for (int k = 0; k < 2; k++) {
        clt_tensor *out = NULL;
        TC_OK(ctx, clt_model_forward(ms[k], xt, true, 3, &out));
        ck_assert_int_eq(clt_tensor_dtype(out), CLT_DTYPE_F32);
        tc_read(out, ys[k]);
        TC_OK(ctx, clt_model_backward(ms[k], dt, false));
        tc_read(clt_model_grads(ms[k]), gs[k]);
    }
    double tol = prec == CLT_DTYPE_BF16 ? 4e-2 : 5e-3;
    double ys_ = max_abs(y32, B * OUT), gs_ = max_abs(g32, P), ey = 0, eg = 0;
    for (size_t i = 0; i < B * OUT; i++) ey = fmax(ey, fabs((double)y16[i] - y32[i]));
    for (size_t i = 0; i < P; i++) eg = fmax(eg, fabs((double)g16[i] - g32[i]));
    ck_assert_msg(ey <= tol * ys_, "%s %s forward: max error %g > %g * %g", text,
                  clt_dtype_name(prec), ey, tol, ys_);
    ck_assert_msg(eg <= tol * gs_, "%s %s backward: max error %g > %g * %g", text,
                  clt_dtype_name(prec), eg, tol, gs_);
    /* the forward reads the 16-bit weights in every model (its output is never bit-identical) */
    ck_assert_msg(ey > 0, "%s %s: identical to f32, 16-bit storage not used", text,
                  clt_dtype_name(prec));
    clt_tensor_free(xt);
    clt_tensor_free(dt);
    clt_model_free(m32);
    clt_model_free(m16);
    free(x);
    free(dout);
    free(y32);
    free(y16);
    free(g32);
    free(g16);
}

static void compare_model(clt_ctx *ctx, const char *text, clt_dtype prec, tc_rng *r)
{
    compare_model_seq(ctx, text, 0, prec, r);
}

START_TEST(test_model16)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const char *specs[] = {"linear 32, relu, linear 16, tanh, linear 5",
                           /* f32 layers before the first and after the last linear layer */
                           "dropout 0.25, linear 24, gelu, dropout 0.1, linear 5, sigmoid",
                           "linear 5"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        compare_model(ctx, specs[i], CLT_DTYPE_BF16, &r);
        compare_model(ctx, specs[i], CLT_DTYPE_F16, &r);
    }
    /* on sequences (4, 5): the pre-norm block and a head per position, a dropout after it (f32
     * gradient buffers as wide as the (4, 5) output); per-position linear layers alone;
     * attention in a block reading the f32 input (its layernorm f32, its own storage 16-bit)
     * and alone between linear layers or reading the f32 input */
    const char *seq[] = {"residual { layernorm, linear 20, gelu, linear 5 }, layernorm, linear 5, "
                         "dropout 0.1",
                         "linear 12, gelu, linear 7, relu, linear 5",
                         "residual { layernorm, attention 1 causal }, layernorm, linear 8, "
                         "attention 2, linear 5",
                         "attention 5 causal, linear 5"};
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        compare_model_seq(ctx, seq[i], 4, CLT_DTYPE_BF16, &r);
        compare_model_seq(ctx, seq[i], 4, CLT_DTYPE_F16, &r);
    }
    /* the 16-bit copy follows the master weights */
    clt_model *m = make_model(ctx, "linear 3", 4, 3, 2, CLT_DTYPE_BF16);
    float w[15], back[15];
    for (int i = 0; i < 15; i++) w[i] = 0.1f * (float)(i + 1) + 1e-3f;
    TC_OK(ctx, clt_model_write_params(m, w));
    download(clt_model_weights(m), back);
    for (int i = 0; i < 15; i++) ck_assert_float_eq(back[i], round_to(CLT_DTYPE_BF16, w[i]));
    clt_model_free(m);
    struct clt_model_params bad = clt_model_default_params();
    bad.precision = CLT_DTYPE_I32;
    clt_spec s = {0};
    ck_assert_int_eq(clt_spec_parse("linear 3", 0, &s), CLT_OK);
    clt_model *none = NULL;
    ck_assert_int_eq(clt_model_create(&none, ctx, &s, 4, 3, &bad), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(none);
    clt_spec_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- a language model in 16 bits against f32 ---------------------------------------------- */

/* One forward (train mode) of the token model m on ids (B, T), the mean cross-entropy over the
 * B T positions (clt_op_softmax_xent, the trainer's loss) into *loss, and the backward of that
 * loss times `scale` (a loss scale) into grads (P, divided back by scale). */
static void lm_loss_grads(clt_model *m, const clt_tensor *ids, const clt_tensor *labels,
                          size_t R, size_t V, float scale, double *loss, float *grads)
{
    clt_ctx *ctx = clt_model_ctx(m);
    size_t od[2] = {R, V}, one = 1, P = clt_tensor_numel(clt_model_grads(m));
    clt_tensor *out = NULL, *dout = NULL, *lacc = NULL;
    TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, od, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&lacc, ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_OTHER));
    TC_OK(ctx, clt_model_forward(m, ids, true, 1, &out));
    ck_assert_int_eq(clt_tensor_dtype(out), CLT_DTYPE_F32); /* the logits stay f32 */
    clt_tensor *logits = NULL;
    TC_OK(ctx, clt_tensor_view(&logits, out, 0, 2, od));
    TC_OK(ctx, clt_op_softmax_xent(logits, labels, 0.0f, 1.0f / (float)R, scale / (float)R, dout,
                                   lacc, NULL));
    TC_OK(ctx, clt_model_backward(m, dout, false));
    float l = 0;
    tc_read(lacc, &l);
    *loss = l;
    tc_read(clt_model_grads(m), grads);
    for (size_t i = 0; i < P; i++) grads[i] /= scale;
    clt_tensor_free(logits);
    clt_tensor_free(dout);
    clt_tensor_free(lacc);
}

/* A small language model (embed, posembed, a pre-norm attention block, an MLP block, a final
 * layernorm, the tied head: gpt-mini's layers) in bf16 and in fp16 under a loss scale of 2^16
 * (the scaler's start), from the same weights and tokens as f32: the mean cross-entropy within
 * 5e-3 (bf16) and 5e-4 (fp16) of f32's, relative (about log V = 2.6 here; measured 1.1e-4 and
 * 8.5e-6: the mean over the positions averages the roundings out), and each parameter's
 * gradient within 4e-2 and 5e-3 of its largest f32 magnitude, as compare_model_seq's image and
 * sequence models (measured at most 1.3e-2 and 2.1e-3); fused (posembed in the embedding's
 * gather) and with CLTRAIN_FUSE=0 (posembed's own 16-bit kernel). */
START_TEST(test_lm16)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t B = 3, T = 16, V = 13, R = B * T;
    const char *spec = "embed 16, posembed, residual { layernorm, attention 2 causal }, residual { "
                       "layernorm, linear 64, gelu, linear 16 }, layernorm, linear V nobias tied";
    int32_t ids[3 * 16], next[3 * 16];
    for (size_t i = 0; i < R; i++) ids[i] = (int32_t)(tc_u32(&r) % V);
    for (size_t i = 0; i < R; i++) next[i] = (int32_t)(tc_u32(&r) % V);
    size_t xd[2] = {B, T};
    clt_tensor *xt = NULL, *yt = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&yt, ctx, CLT_DTYPE_I32, 1, &R, CLT_MEM_OTHER));
    tc_write(xt, ids);
    tc_write(yt, next);
    for (int fuse = 1; fuse >= 0; fuse--) {
        if (!fuse) setenv("CLTRAIN_FUSE", "0", 1);
        clt_model *m32 = make_model(ctx, spec, T, V, B, CLT_DTYPE_F32);
        const size_t P = clt_tensor_numel(clt_model_params(m32));
        float *w = xalloc(P, sizeof *w), *g32 = xalloc(P, sizeof *g32),
              *g16 = xalloc(P, sizeof *g16);
        TC_OK(ctx, clt_model_read_params(m32, w, CLT_WAIT_READ));
        /* layernorm's weight 1 and bias 0 and attention's zero biases moved off their init */
        for (size_t i = 0; i < P; i++) w[i] += 0.005f * (float)((int)(tc_u32(&r) % 21) - 10);
        TC_OK(ctx, clt_model_write_params(m32, w));
        double l32 = 0, l16 = 0;
        lm_loss_grads(m32, xt, yt, R, V, 1.0f, &l32, g32);
        const clt_dtype precs[] = {CLT_DTYPE_BF16, CLT_DTYPE_F16};
        for (int k = 0; k < 2; k++) {
            const clt_dtype prec = precs[k];
            clt_model *m16 = make_model(ctx, spec, T, V, B, prec);
            TC_OK(ctx, clt_model_write_params(m16, w));
            lm_loss_grads(m16, xt, yt, R, V, prec == CLT_DTYPE_F16 ? 65536.0f : 1.0f, &l16, g16);
            const double ltol = prec == CLT_DTYPE_BF16 ? 5e-3 : 5e-4;
            const double gtol = prec == CLT_DTYPE_BF16 ? 4e-2 : 5e-3;
            ck_assert_msg(fabs(l16 - l32) <= ltol * l32, "%s (fuse %d): loss %.6f vs f32 %.6f",
                          clt_dtype_name(prec), fuse, l16, l32);
            ck_assert_msg(l16 != l32, "%s: the loss of f32 to the bit: 16 bits not used",
                          clt_dtype_name(prec));
            for (int j = 0; j < clt_model_param_count(m32); j++) {
                const struct clt_param_info *pi = clt_model_param_info(m32, j);
                double big = max_abs(g32 + pi->offset, pi->numel), err = 0;
                for (size_t i = 0; i < pi->numel; i++)
                    err = fmax(err, fabs((double)g16[pi->offset + i] - g32[pi->offset + i]));
                ck_assert_msg(big > 0 && err <= gtol * big,
                              "%s (fuse %d): gradient of %s: max error %g > %g * %g",
                              clt_dtype_name(prec), fuse, pi->name, err, gtol, big);
            }
            clt_model_free(m16);
        }
        clt_model_free(m32);
        free(w);
        free(g32);
        free(g16);
        unsetenv("CLTRAIN_FUSE");
    }
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- dynamic loss scaling ------------------------------------------------------------------ */

static struct clt_scaler_values read_scaler(clt_ctx *ctx, const clt_scaler *s)
{
    int32_t raw[CLT_AMP_STATE_LEN];
    TC_OK(ctx, clt_scaler_read(s, raw, true, NULL));
    return clt_scaler_decode(raw);
}

/* Host Adam (PyTorch's rule) in double for step t. */
static void adam_ref(double *p, double *m, double *v, const double *g, size_t n, double lr, int t)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double denom = sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps;
        p[i] -= lr / (1 - pow(b1, t)) * m[i] / denom;
    }
}

/* Adam with a scaler (init 1024, growth interval 3): step 1 clean; step 2 carries an inf and is
 * skipped (parameters and both state tensors bit-identical, scale halved, skipped 1, tracker 0);
 * steps 3-5 are clean and must equal Adam's t = 2, 3, 4 (the skipped step does not count);
 * after the third clean step since the backoff the scale doubles back. A NaN skips too.
 * Tolerance 1e-5 + 1e-4 |ref| (fp32; the device computes the bias corrections in f32). */
START_TEST(test_scaler_adam)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t n = 1000;
    clt_tensor *params = tc_tensor(ctx, CLT_DTYPE_F32, n),
               *grads = tc_tensor(ctx, CLT_DTYPE_F32, n);
    float *p0 = xalloc(n, sizeof *p0), *g = xalloc(n, sizeof *g), *got = xalloc(n, sizeof *got),
          *before = xalloc(n, sizeof *before), *mb = xalloc(n, sizeof *mb),
          *ma = xalloc(n, sizeof *ma);
    double *pr = xalloc(n, sizeof *pr), *mr = xalloc(n, sizeof *mr), *vr = xalloc(n, sizeof *vr),
           *gr = xalloc(n, sizeof *gr), *ref = xalloc(n, sizeof *ref);
    tc_fill_nonzero(&r, p0, n, 0.1f, 1.0f);
    for (size_t i = 0; i < n; i++) pr[i] = p0[i];
    tc_write(params, p0);
    struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_ADAM);
    op.lr = 1e-2f;
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, &op));
    struct clt_scaler_params sp = clt_scaler_default_params();
    sp.init_scale = 1024.0f;
    sp.growth_interval = 3;
    clt_scaler *s = NULL;
    TC_OK(ctx, clt_scaler_create(&s, ctx, &sp));
    struct clt_scaler_values v0 = read_scaler(ctx, s);
    ck_assert_float_eq(v0.scale, 1024.0f);
    ck_assert_int_eq(v0.skipped, 0);

    int t = 0;
    float scale = 1024.0f;
    for (int stepi = 1; stepi <= 6; stepi++) {
        bool bad = stepi == 2 || stepi == 6;
        tc_fill_nonzero(&r, g, n, 0.01f, 1.0f);
        /* the gradients as backward gives them: times the scale (exact: a power of two) */
        for (size_t i = 0; i < n; i++) {
            gr[i] = g[i];
            g[i] *= scale;
        }
        if (stepi == 2) g[417] = INFINITY;
        if (stepi == 6) g[3] = NAN;
        tc_write(grads, g);
        tc_read(params, before);
        tc_read(clt_optim_state(o, 0, NULL), mb);
        TC_OK(ctx, clt_optim_step_scaled(o, grads, s));
        tc_read(params, got);
        tc_read(clt_optim_state(o, 0, NULL), ma);
        struct clt_scaler_values v = read_scaler(ctx, s);
        ck_assert_int_eq(clt_optim_steps(o), stepi); /* attempted steps, for the schedule */
        if (bad) {
            ck_assert_msg(memcmp(before, got, n * sizeof *got) == 0, "step %d: params changed",
                          stepi);
            ck_assert_msg(memcmp(mb, ma, n * sizeof *ma) == 0, "step %d: exp_avg changed", stepi);
            scale *= 0.5f;
            ck_assert_float_eq(v.scale, scale);
            ck_assert_int_eq(v.tracker, 0);
            ck_assert_int_eq(v.skipped, stepi == 2 ? 1 : 2);
        } else {
            adam_ref(pr, mr, vr, gr, n, 1e-2, ++t);
            for (size_t i = 0; i < n; i++) ref[i] = pr[i];
            tc_check_close(got, ref, n, 1e-5, 1e-4, "scaled adam", r.seed);
            /* clean steps since the backoff at step 2: 3 -> 1, 4 -> 2, 5 -> 3 = growth */
            if (stepi == 5) scale *= 2.0f;
            ck_assert_float_eq(v.scale, scale);
            ck_assert_int_eq(v.tracker, stepi == 1 ? 1 : stepi == 5 ? 0 : stepi - 2);
            ck_assert_int_eq(v.skipped, 1 - (stepi == 1));
        }
        ck_assert(!v.found_inf);
    }
    /* an invalid scaler */
    struct clt_scaler_params badp = clt_scaler_default_params();
    badp.growth_interval = 0;
    clt_scaler *none = NULL;
    ck_assert_int_eq(clt_scaler_create(&none, ctx, &badp), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(none);
    clt_scaler_free(s);
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_tensor_free(grads);
    free(p0);
    free(g);
    free(got);
    free(before);
    free(mb);
    free(ma);
    free(pr);
    free(mr);
    free(vr);
    free(gr);
    free(ref);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* SGD with momentum: an overflow on the very first step leaves the momentum buffer unset, so
 * the next (clean) step is the first one taken: buf = g, p -= lr * g (exact in fp32 up to one
 * rounding: tolerance 1e-6 + 1e-6 |ref|). Plain SGD skips as well. The scale grows by 2 on
 * every clean step with growth_interval 1. The overflow is the first gradient, then (with
 * momentum) the last: 257 of them, the unscale's vectors of 16 and its one-element tail. */
START_TEST(test_scaler_sgd)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t n = 257;
    float *p0 = xalloc(n, sizeof *p0), *g = xalloc(n, sizeof *g), *got = xalloc(n, sizeof *got);
    double *ref = xalloc(n, sizeof *ref);
    for (int momentum = 0; momentum < 2; momentum++) {
        clt_tensor *params = tc_tensor(ctx, CLT_DTYPE_F32, n),
                   *grads = tc_tensor(ctx, CLT_DTYPE_F32, n);
        tc_fill_nonzero(&r, p0, n, 0.1f, 1.0f);
        tc_write(params, p0);
        struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_SGD);
        op.lr = 0.1f;
        op.momentum = momentum ? 0.9f : 0.0f;
        clt_optim *o = NULL;
        TC_OK(ctx, clt_optim_create(&o, params, &op));
        struct clt_scaler_params sp = clt_scaler_default_params();
        sp.init_scale = 8.0f;
        sp.growth_interval = 1;
        clt_scaler *s = NULL;
        TC_OK(ctx, clt_scaler_create(&s, ctx, &sp));
        tc_fill_nonzero(&r, g, n, 0.01f, 1.0f);
        g[momentum ? n - 1 : 0] = -INFINITY;
        tc_write(grads, g);
        TC_OK(ctx, clt_optim_step_scaled(o, grads, s));
        tc_read(params, got);
        ck_assert(memcmp(got, p0, n * sizeof *got) == 0);
        struct clt_scaler_values v = read_scaler(ctx, s);
        ck_assert_float_eq(v.scale, 4.0f);
        ck_assert_int_eq(v.skipped, 1);
        tc_fill_nonzero(&r, g, n, 0.01f, 1.0f);
        for (size_t i = 0; i < n; i++) ref[i] = (double)p0[i] - 0.1 * (double)g[i];
        for (size_t i = 0; i < n; i++) g[i] *= 4.0f;
        tc_write(grads, g);
        TC_OK(ctx, clt_optim_step_scaled(o, grads, s));
        tc_read(params, got);
        tc_check_close(got, ref, n, 1e-6, 1e-6, "sgd after a skipped first step", r.seed);
        if (momentum) {
            tc_read(clt_optim_state(o, 0, NULL), got);
            for (size_t i = 0; i < n; i++) ref[i] = g[i] / 4.0f;
            tc_check_close(got, ref, n, 0, 0, "momentum buffer = first gradient", r.seed);
        }
        v = read_scaler(ctx, s);
        ck_assert_float_eq(v.scale, 8.0f); /* grown after one clean step */
        ck_assert_int_eq(v.skipped, 1);
        clt_scaler_free(s);
        clt_optim_free(o);
        clt_tensor_free(params);
        clt_tensor_free(grads);
    }
    free(p0);
    free(g);
    free(got);
    free(ref);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- training a tiny model ----------------------------------------------------------------- */

/* Full-batch Adam on a 4-class problem labelled by a random linear teacher (256 samples, 12
 * features), 60 steps at lr 2e-3, in `prec` (f16 with the scaler; the scaler also under f32 gives
 * the f32 result within rounding). Returns the final training loss. CLTRAIN_TEST_SMALL: 32 samples,
 * 12 steps at lr 1.2e-2 (final loss about 0.33 on PoCL instead of 0.38). */
static double train_tiny(clt_ctx *ctx, clt_dtype prec, bool scaled, tc_rng *data)
{
    const size_t B = tc_size(256, 32), IN = 12, N = 4;
    const int steps = (int)tc_size(60, 12);
    tc_rng r = *data; /* the same data for every precision */
    float *x = xalloc(B * IN, sizeof *x), *teach = xalloc(IN * N, sizeof *teach);
    int32_t *y = xalloc(B, sizeof *y);
    tc_fill_nonzero(&r, x, B * IN, 0.01f, 2.0f);
    tc_fill_nonzero(&r, teach, IN * N, 0.1f, 1.0f);
    for (size_t b = 0; b < B; b++) {
        double best = -1e30;
        for (size_t c = 0; c < N; c++) {
            double s = 0;
            for (size_t i = 0; i < IN; i++) s += x[b * IN + i] * teach[i * N + c];
            if (s > best) {
                best = s;
                y[b] = (int32_t)c;
            }
        }
    }
    clt_model *m = make_model(ctx, "linear 32, relu, linear 32, relu, linear 4", IN, N, B, prec);
    size_t xd[2] = {B, IN}, od[2] = {B, N}, one = 1;
    clt_tensor *xt = NULL, *yt = NULL, *dout = NULL, *loss = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&yt, ctx, CLT_DTYPE_I32, 1, &B, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, od, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&loss, ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_OTHER));
    tc_write(xt, x);
    tc_write(yt, y);
    struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_ADAM);
    op.lr = tc_small() ? 1.2e-2f : 2e-3f;
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, clt_model_params(m), &op));
    clt_scaler *s = NULL;
    if (scaled) TC_OK(ctx, clt_scaler_create(&s, ctx, NULL));
    float last = 0;
    for (int step = 0; step < steps; step++) {
        clt_tensor *out = NULL;
        TC_OK(ctx, clt_model_forward(m, xt, true, (uint64_t)step, &out));
        TC_OK(ctx, clt_op_fill(loss, 0.0f));
        TC_OK(ctx, clt_op_softmax_xent(out, yt, 0.0f, 1.0f / (float)B, 1.0f / (float)B, dout,
                                       loss, NULL));
        if (s) TC_OK(ctx, clt_scaler_scale(s, dout));
        TC_OK(ctx, clt_model_backward(m, dout, false));
        TC_OK(ctx, clt_optim_step_scaled(o, clt_model_grads(m), s));
        TC_OK(ctx, clt__model_sync_weights(m));
    }
    tc_read(loss, &last); /* the loss before the last step */
    if (s) {
        struct clt_scaler_values v = read_scaler(ctx, s);
        ck_assert_msg(v.skipped < 10, "%ld skipped steps", v.skipped);
    }
    clt_scaler_free(s);
    clt_optim_free(o);
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    clt_tensor_free(dout);
    clt_tensor_free(loss);
    clt_model_free(m);
    free(x);
    free(teach);
    free(y);
    return last;
}

/* The final loss in bf16 and f16 within 0.03 + 10 % of f32's (starting near log 4 = 1.39 and
 * ending around 0.1-0.2: a broken 16-bit path stays far above). */
START_TEST(test_train16)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    double l32 = train_tiny(ctx, CLT_DTYPE_F32, false, &r);
    double l32s = train_tiny(ctx, CLT_DTYPE_F32, true, &r);
    double lbf = train_tiny(ctx, CLT_DTYPE_BF16, false, &r);
    double lf16 = train_tiny(ctx, CLT_DTYPE_F16, true, &r);
    fprintf(stderr, "tiny model final loss: f32 %.5f, f32 scaled %.5f, bf16 %.5f, f16 %.5f\n", l32,
            l32s, lbf, lf16);
    ck_assert_msg(l32 < 0.6, "f32 did not learn: %g", l32);
    ck_assert_msg(fabs(l32s - l32) <= 1e-3 + 1e-2 * l32, "f32 scaled %g vs %g", l32s, l32);
    ck_assert_msg(fabs(lbf - l32) <= 0.03 + 0.1 * l32, "bf16 %g vs f32 %g", lbf, l32);
    ck_assert_msg(fabs(lf16 - l32) <= 0.03 + 0.1 * l32, "f16 %g vs f32 %g", lf16, l32);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- memory -------------------------------------------------------------------------------- */

/* The Fashion-MNIST MLP at batch 128: the accountant's bytes per category equal
 * clt_model_mem_estimate in every precision, and in bf16/f16 the activations plus the weights
 * that forward and backward read take less than 55 % of f32's (exactly half, but for the f32
 * logits); the master parameters and gradients stay f32. */
START_TEST(test_memory16)
{
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_F16};
    uint64_t act[3] = {0}, wts[3] = {0}, grads[3] = {0};
    clt_spec s = {0};
    ck_assert_int_eq(clt_spec_parse("linear 256, relu, dropout 0.2, linear 128, relu, linear 10",
                                    0, &s), CLT_OK);
    for (int k = 0; k < 3; k++) {
        clt_ctx *ctx = tc_ctx();
        struct clt_mem_stats before = clt_ctx_mem_stats(ctx);
        struct clt_model_params p = clt_model_default_params();
        p.max_batch = 128;
        p.precision = precs[k];
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, 784, 10, &p));
        struct clt_mem_stats after = clt_ctx_mem_stats(ctx);
        uint64_t est[CLT_MEM__COUNT] = {0};
        TC_OK(ctx, clt_model_mem_estimate(&s, 784, 10, &p, est));
        for (int c = 0; c < CLT_MEM__COUNT; c++)
            ck_assert_msg(after.by_category[c] - before.by_category[c] == est[c],
                          "%s %s: accountant %llu, estimate %llu", clt_dtype_name(precs[k]),
                          clt_mem_category_name((clt_mem_category)c),
                          (unsigned long long)(after.by_category[c] - before.by_category[c]),
                          (unsigned long long)est[c]);
        act[k] = after.by_category[CLT_MEM_ACTIVATIONS] - before.by_category[CLT_MEM_ACTIVATIONS];
        wts[k] = clt_tensor_nbytes(clt_model_weights(m));
        grads[k] = after.by_category[CLT_MEM_GRADS] - before.by_category[CLT_MEM_GRADS];
        clt_model_free(m);
        clt_ctx_free(ctx);
    }
    for (int k = 1; k < 3; k++) {
        fprintf(stderr, "%s: activations %llu + weights %llu bytes vs f32 %llu + %llu\n",
                clt_dtype_name(precs[k]), (unsigned long long)act[k], (unsigned long long)wts[k],
                (unsigned long long)act[0], (unsigned long long)wts[0]);
        ck_assert(act[k] + wts[k] < 0.55 * (double)(act[0] + wts[0]));
        ck_assert_int_eq(grads[k], grads[0]);
    }
    clt_spec_free(&s);
    tc_assert_no_live();
}
END_TEST

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* An fp16 run's loss-scaler state goes into the checkpoint ("amp.scaler_state") and comes back
 * bit for bit into another scaler, so that --resume continues with the same scale, growth
 * tracker and skipped count; a checkpoint without it is refused by clt_checkpoint_load_scaler. */
START_TEST(test_scaler_checkpoint)
{
    clt_ctx *ctx = tc_ctx();
    char dir[4096], with[4200], without[4200];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(with, sizeof with, "%s/with.safetensors", dir);
    snprintf(without, sizeof without, "%s/without.safetensors", dir);
    clt_spec spec = {0};
    ck_assert_msg(clt_spec_parse("linear 5, relu, linear 3", 3, &spec) == CLT_OK, "%s",
                  clt_last_errmsg());
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 4;
    mp.precision = CLT_DTYPE_F16;
    clt_model *m = NULL;
    clt_scaler *a = NULL, *b = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, 4, 3, &mp));
    TC_OK(ctx, clt_scaler_create(&a, ctx, NULL));
    TC_OK(ctx, clt_scaler_create(&b, ctx, NULL));
    /* a state no fresh scaler has: scale 2^9, tracker 7, skipped 3 (fields as ops.h says) */
    int32_t raw[CLT_AMP_STATE_LEN], back[CLT_AMP_STATE_LEN];
    TC_OK(ctx, clt_scaler_read(a, raw, true, NULL));
    struct clt_scaler_values fresh = clt_scaler_decode(raw);
    float scale = 512.0f;
    memcpy(&raw[0], &scale, sizeof scale);
    for (int i = 1; i < CLT_AMP_STATE_LEN; i++) raw[i] += 3 + i;
    TC_OK(ctx, clt_tensor_write(clt_scaler_state(a), raw, true, NULL));
    struct clt_input_norm norm = {.features = 4, .scale = 1.0f};
    struct clt_checkpoint_info info = {.model_text = "linear 5, relu, linear 3", .norm = norm,
                                       .classes = 3, .seed = 1,
                                       .scaler_state = clt_scaler_state(a)};
    TC_OK(ctx, clt_checkpoint_save(with, m, NULL, &info));
    info.scaler_state = NULL;
    TC_OK(ctx, clt_checkpoint_save(without, m, NULL, &info));

    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, with) == CLT_OK, "%s", clt_last_errmsg());
    TC_OK(ctx, clt_checkpoint_load_scaler(ck, clt_scaler_state(b)));
    clt_checkpoint_close(ck);
    TC_OK(ctx, clt_scaler_read(b, back, true, NULL));
    ck_assert_msg(memcmp(raw, back, sizeof raw) == 0, "the scaler state changed on its way");
    ck_assert_msg(clt_scaler_decode(back).scale == 512.0f && fresh.scale != 512.0f,
                  "scale %g", (double)clt_scaler_decode(back).scale);

    ck_assert_msg(clt_checkpoint_open(&ck, without) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_int_eq(clt_checkpoint_load_scaler(ck, clt_scaler_state(b)), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "amp.scaler_state"), "%s",
                  clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    remove(with);
    remove(without);
    tc_rmdir(dir);
    clt_scaler_free(a);
    clt_scaler_free(b);
    clt_model_free(m);
    clt_spec_free(&spec);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    const struct {
        const char *name;
        const TTest *test;
    } tests[] = {{"gemm16", test_gemm16},         {"model16", test_model16},
                 {"lm16", test_lm16},
                 {"scaler_adam", test_scaler_adam}, {"scaler_sgd", test_scaler_sgd},
                 {"train16", test_train16},       {"memory16", test_memory16},
                 {"scaler_checkpoint", test_scaler_checkpoint}};
    Suite *s = suite_create("amp");
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        TCase *tc = tc_tcase(tests[i].name);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return tc_run(s);
}
