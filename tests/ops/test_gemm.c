/* Tests of clt_op_gemm and its two paths (cltrain's own kernels in cl/gemm.cl, CLBlast) and of
 * the tuning data (src/ops/tune.c): every layout x alpha/beta (beta 0 over a NaN-poisoned C, beta
 * 1 accumulating, and others) x awkward sizes {1, 17, 100, 129} against a float64 reference,
 * through views at odd offsets with guard elements around C that must stay untouched; both
 * paths (CLTRAIN_GEMM=own and clblast), every variant of clt_gemm_variants() the device
 * accepts, and tuning files that are malformed, foreign or valid.
 * CLTRAIN_TEST_SMALL (tests/small.h, for oclgrind): each path runs a few shapes with every edge
 * (below the vector width, more than one tile, slice or work-group, no multiple of any) instead
 * of the full sweep, and the variants' shapes are smaller with the same edges.
 * Tolerance, element-wise: |got - ref| <= 1e-5 + 1e-4 |ref| + 2^-23 (K |alpha| sum_k |a b| +
 * 2 |beta c|), i.e. the style guide's fp32 atol/rtol plus the classical bound K u sum |a b| of
 * a K-term float sum in any order (u = 2^-24, doubled for the products' and the final
 * roundings); and the normalized MSE sum (got - ref)^2 / sum ref^2 <= 1e-7. */
#include "common.h"
#include "small.h"

#include "ops/ops_internal.h"
#include "ops/tune_internal.h"
#include "ref/ref_nn.h"
#include "io/json.h"
#include "runtime/program_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GUARD 7           /* elements before and after C's view; odd, to misalign vectors */
#define SENTINEL 12345.0f /* the guards' value */

static const size_t sizes[] = {1, 17, 100, 129};

static void *xalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A view of n elements starting `off` elements into a buffer of n + 2 * off. */
static clt_tensor *view_at(clt_ctx *ctx, size_t n, size_t off, clt_tensor **base_out)
{
    size_t total = n + 2 * off;
    clt_tensor *base = NULL, *view = NULL;
    TC_OK(ctx, clt_tensor_create(&base, ctx, CLT_DTYPE_F32, 1, &total, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_view(&view, base, off, 1, &n));
    if (base_out)
        *base_out = base;
    else
        clt_tensor_free(base);
    return view;
}

/* Runs one GEMM (the ctx's choice when c is NULL) and checks it against float64. */
static void check_gemm(clt_ctx *ctx, const struct clt_gemm_choice *c, int ta, int tb, size_t M,
                       size_t N, size_t K, float alpha, float beta, tc_rng *r, const char *tag)
{
    size_t na = M * K, nb = K * N, nc = M * N, lda = ta ? M : K, ldb = tb ? K : N;
    float *a = xalloc(na, sizeof *a), *b = xalloc(nb, sizeof *b);
    float *c0 = xalloc(nc + 2 * GUARD, sizeof *c0), *got = xalloc(nc + 2 * GUARD, sizeof *got);
    tc_fill_nonzero(r, a, na, 0.05f, 1.0f);
    tc_fill_nonzero(r, b, nb, 0.05f, 1.0f);
    tc_fill_nonzero(r, c0 + GUARD, nc, 0.05f, 1.0f);
    for (size_t i = 0; i < GUARD; i++)
        c0[i] = c0[GUARD + nc + i] = SENTINEL;
    if (beta == 0.0f) /* beta = 0 must not read C */
        for (size_t i = 0; i < nc; i++)
            c0[GUARD + i] = NAN;

    clt_tensor *cbase = NULL;
    clt_tensor *A = view_at(ctx, na, 3, NULL), *B = view_at(ctx, nb, 5, NULL),
               *C = view_at(ctx, nc, GUARD, &cbase);
    tc_write(A, a);
    tc_write(B, b);
    tc_write(cbase, c0);
    clt_trans tA = ta ? CLT_TRANS : CLT_NO_TRANS, tB = tb ? CLT_TRANS : CLT_NO_TRANS;
    clt_status st = c ? clt_op_gemm_with(c, tA, tB, M, N, K, alpha, A, B, beta, C)
                      : clt_op_gemm(tA, tB, M, N, K, alpha, A, B, beta, C);
    ck_assert_msg(st == CLT_OK, "%s %c%c M=%zu N=%zu K=%zu: %s: %s", tag, ta ? 'T' : 'N',
                  tb ? 'T' : 'N', M, N, K, clt_status_name(st), clt_ctx_errmsg(ctx));
    tc_read(cbase, got);

    for (size_t i = 0; i < GUARD; i++)
        ck_assert_msg(got[i] == SENTINEL && got[GUARD + nc + i] == SENTINEL,
                      "%s %c%c M=%zu N=%zu K=%zu: wrote outside C", tag, ta ? 'T' : 'N',
                      tb ? 'T' : 'N', M, N, K);
    double err2 = 0, ref2 = 0;
    for (size_t m = 0; m < M; m++) {
        for (size_t n = 0; n < N; n++) {
            double s = 0, sabs = 0;
            for (size_t k = 0; k < K; k++) {
                double p = (double)(ta ? a[k * lda + m] : a[m * lda + k]) *
                           (double)(tb ? b[n * ldb + k] : b[k * ldb + n]);
                s += p;
                sabs += fabs(p);
            }
            double cold = beta == 0.0f ? 0.0 : (double)c0[GUARD + m * N + n];
            double ref = (double)alpha * s + (double)beta * cold;
            double tol = 1e-5 + 1e-4 * fabs(ref) +
                         0x1p-23 * ((double)K * fabs((double)alpha) * sabs +
                                    2.0 * fabs((double)beta * cold));
            double g = got[GUARD + m * N + n];
            if (!(fabs(g - ref) <= tol))
                ck_abort_msg("%s %c%c M=%zu N=%zu K=%zu alpha=%g beta=%g: C[%zu, %zu] = %.9g, "
                             "reference %.9g (|diff| %.3g > %.3g); seed %llu",
                             tag, ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, beta, m, n, g,
                             ref, fabs(g - ref), tol, (unsigned long long)r->seed);
            err2 += (g - ref) * (g - ref);
            ref2 += ref * ref;
        }
    }
    ck_assert_msg(ref2 == 0 || err2 / ref2 <= 1e-7,
                  "%s %c%c M=%zu N=%zu K=%zu: normalized MSE %.3g > 1e-7", tag, ta ? 'T' : 'N',
                  tb ? 'T' : 'N', M, N, K, err2 / ref2);
    clt_tensor_free(A);
    clt_tensor_free(B);
    clt_tensor_free(C);
    clt_tensor_free(cbase);
    free(a);
    free(b);
    free(c0);
    free(got);
}

/* Every layout x the awkward sizes x alpha/beta on the ctx's path. Under CLTRAIN_TEST_SMALL,
 * every layout x four shapes, each with one alpha/beta pair in turn: N below the vector width,
 * K over several slices (130: more than the largest packed slice of 128), M and N over two
 * tiles of the GPU kernels (65 x 70: 64 x 64 tiles, and 32 x 32 on a device of 64 items). */
static void sweep(clt_ctx *ctx, tc_rng *r, const char *tag)
{
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.75f, 0.5f}};
    static const size_t small[][3] = {{1, 1, 1}, {17, 5, 33}, {5, 17, 130}, {65, 70, 17}};
    int i = 0;
    for (int l = 0; l < 4; l++) {
        if (tc_small()) {
            for (size_t s = 0; s < sizeof small / sizeof *small; s++) {
                size_t p = (s + (size_t)l) % 3; /* each layout gets every pair */
                check_gemm(ctx, NULL, l >> 1, l & 1, small[s][0], small[s][1], small[s][2],
                           ab[p][0], ab[p][1], r, tag);
            }
            continue;
        }
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t ni = 0; ni < 4; ni++)
                for (size_t ki = 0; ki < 4; ki++, i++) {
                    /* beta 0 and 1 everywhere; the third pair on a rotating subset */
                    for (int p = 0; p < 3; p++)
                        if (p < 2 || i % 3 == 0)
                            check_gemm(ctx, NULL, l >> 1, l & 1, sizes[mi], sizes[ni], sizes[ki],
                                       ab[p][0], ab[p][1], r, tag);
                }
    }
    /* K = 0: C = beta * C (zeros over NaN when beta = 0) */
    for (int l = 0; l < 4; l++) {
        check_gemm(ctx, NULL, l >> 1, l & 1, 17, 5, 0, 1.0f, 0.0f, r, tag);
        check_gemm(ctx, NULL, l >> 1, l & 1, 5, 17, 0, 1.0f, 0.5f, r, tag);
    }
}

/* A ctx without cltrain's disk cache: fetching a program's binary for it makes PoCL compile
 * every kernel of the program, and these tests build many programs (PoCL's own cache, in the
 * build folder, still serves repeated runs). */
static clt_ctx *gemm_ctx(void)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.disk_cache = 0;
    return tc_ctx_with(&p);
}

static clt_ctx *ctx_with_gemm(const char *path)
{
    unsetenv("CLTRAIN_TUNE_FILE");
    if (path)
        setenv("CLTRAIN_GEMM", path, 1);
    else
        unsetenv("CLTRAIN_GEMM");
    return gemm_ctx();
}

START_TEST(test_own_path)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm("own");
    const struct clt_tune *t = clt_ctx_tune(ctx);
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            ck_assert_int_ne(t->gemm[l][z].kernel, CLT_GEMM_CLBLAST);
    ck_assert(tc_contains(t->source, "CLTRAIN_GEMM=own"));
    sweep(ctx, &r, "own");
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_clblast_path)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm("clblast");
    const struct clt_tune *t = clt_ctx_tune(ctx);
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            ck_assert_int_eq(t->gemm[l][z].kernel, CLT_GEMM_CLBLAST);
    sweep(ctx, &r, "clblast");
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Every variant the tuner may choose on this device, for each layout it may choose it for
 * (clt_gemm_variant_applies), and the first variant of each family (unpacked outer products,
 * packed outer products, dot products, tiles) on every layout, which covers the gathering code
 * paths a hand-written tuning file could pick. Sizes hit every edge: N below the vector width,
 * M and N not multiples of the block, K not a multiple of the vector width or of the packed
 * slice, and more than one tile or slice. */
START_TEST(test_variants)
{
    static const size_t full[][3] = {{1, 1, 1}, {17, 129, 100}, {129, 5, 17}, {100, 17, 300}},
                        small[][3] = {{1, 1, 1}, {5, 129, 33}, {129, 5, 17}, {5, 17, 130}};
    const size_t(*shapes)[3] = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const clt_device_info *dev = clt_ctx_device(ctx);
    int n = 0, ran = 0;
    bool family_done[5] = {false, false, false, false, false};
    const struct clt_gemm_choice *v = clt_gemm_variants(&n);
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++) {
        char name[96];
        clt_gemm_choice_format(&v[i], name, sizeof name);
        if (clt_gemm_choice_check(&v[i], dev, NULL, 0) != CLT_OK) {
            printf("test_variants: %s does not fit this device, skipped\n", name);
            continue;
        }
        int family = v[i].kernel == CLT_GEMM_PANEL   ? 4
                     : v[i].kernel == CLT_GEMM_TILED ? 3
                     : v[i].veck                     ? 2
                     : v[i].kb > 0                   ? 1
                                                     : 0;
        bool first = !family_done[family];
        family_done[family] = true;
        for (int l = 0; l < 4; l++) {
            if (!first && !clt_gemm_variant_applies(&v[i], (clt_gemm_layout)l, dev)) continue;
            ran++;
            for (size_t s = 0; s < sizeof full / sizeof *full; s++) {
                bool acc = (s + (size_t)l) % 2 == 1;
                check_gemm(ctx, &v[i], l >> 1, l & 1, shapes[s][0], shapes[s][1], shapes[s][2],
                           acc ? 0.5f : 1.0f, acc ? 1.0f : 0.0f, &r, name);
            }
        }
    }
    ck_assert_int_gt(ran, 0);
    /* a tiled block whose sizes leave no 4-element runs to stage (GEMM_Q 1 in cl/gemm.cl) */
    const struct clt_gemm_choice odd = CLT_GEMM_CHOICE_TILED(4, 8, 2, 3, 5);
    for (int l = 0; l < 4; l++)
        for (size_t s = 0; s < sizeof full / sizeof *full; s++)
            check_gemm(ctx, &odd, l >> 1, l & 1, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f,
                       s % 2 ? 1.0f : 0.0f, &r, "tiled wg4x8 tm2 tn3 kb5");
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The panel family's chunks: operands whose panels exceed the ctx's workspace are cut, K
 * first (partial sums accumulate in C, beta applied once), then M and N too (panels repacked
 * per chunk). Shapes just past each threshold, with every edge: K chunks (33 x 7 x K with
 * (36 + 32) K > CLT_GEMM_WS_FLOATS), M chunks (M (rounded to tm) + 32) x 200 floats too many for
 * K chunks of a cache block). Too large for oclgrind: main() leaves it out under
 * CLTRAIN_TEST_SMALL and says so. */
START_TEST(test_panel_chunks)
{
    const struct clt_gemm_choice panel = CLT_GEMM_CHOICE_PANEL(12, 32, 16, 128, 4, 2);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const size_t deep = CLT_GEMM_WS_FLOATS / 68 + 13, tall = CLT_GEMM_WS_FLOATS / 100 + 5;
    check_gemm(ctx, &panel, 0, 1, 33, 7, deep, 1.0f, 0.0f, &r, "panel K chunks");
    check_gemm(ctx, &panel, 1, 0, 33, 7, deep, -0.5f, 1.0f, &r, "panel K chunks");
    check_gemm(ctx, &panel, 0, 0, tall, 17, 200, 1.0f, 0.0f, &r, "panel M chunks");
    check_gemm(ctx, &panel, 1, 1, tall, 17, 200, 0.5f, 1.0f, &r, "panel M chunks");
    /* op(A) in place: only B's panels count; K chunks past CLT_GEMM_WS_FLOATS / 32 (13 x 7 x
     * K), N and K chunks past CLT_GEMM_WS_FLOATS / 128 columns (too wide for one cache block
     * of K) */
    struct clt_gemm_choice ia = panel;
    ia.ia = 1;
    const size_t deep_b = CLT_GEMM_WS_FLOATS / 32 + 9, wide = CLT_GEMM_WS_FLOATS / 128 + 3;
    check_gemm(ctx, &ia, 0, 0, 13, 7, deep_b, 1.0f, 1.0f, &r, "panel ia K chunks");
    check_gemm(ctx, &ia, 1, 1, 13, 7, deep_b, 1.0f, 0.0f, &r, "panel ia K chunks");
    check_gemm(ctx, &ia, 0, 1, 9, wide, 600, 1.0f, 0.0f, &r, "panel ia N chunks");
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The panel family (packed and in-place op(A)) on every layout with each of M, N and K through
 * the edge sizes 1, 7, 33, 127 and 1000 (1000: several micro-tiles, work-items and cache
 * blocks, none whole), the others small and odd; beta 0 and 1 in turn. Then M through the edge
 * sizes with a B of more than CLT__PANEL_B_CACHED bytes, whose items run along M first. Under
 * oclgrind the sizes stop at 33 and the large B is left out. */
START_TEST(test_panel_edges)
{
    static const size_t edges[] = {1, 7, 33, 127, 1000};
    const size_t nedges = tc_small() ? 3 : 5;
    const struct clt_gemm_choice packed = CLT_GEMM_CHOICE_PANEL(6, 32, 16, 64, 2, 2);
    struct clt_gemm_choice inplace = packed;
    inplace.ia = 1;
    const struct clt_gemm_choice *choices[] = {&packed, &inplace};
    /* the large B: 131 columns, 1000 deep, packed in whole panels of tn; M first also needs an
     * item at least as wide as it is tall (src/ops/gemm.c's run_panel) */
    const size_t wide_n = 131, deep_k = 1000, tn = (size_t)packed.tn;
    ck_assert((wide_n + tn - 1) / tn * tn * deep_k * sizeof(float) > CLT__PANEL_B_CACHED);
    ck_assert(packed.tn * packed.bn >= packed.tm * packed.bm);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    int i = 0;
    for (int c = 0; c < 2; c++)
        for (int l = 0; l < 4; l++)
            for (size_t e = 0; e < nedges; e++, i++) {
                const size_t x = edges[e];
                const float beta = i % 2 ? 1.0f : 0.0f;
                char tag[64];
                snprintf(tag, sizeof tag, "panel%s edges", c ? " ia1" : "");
                check_gemm(ctx, choices[c], l >> 1, l & 1, x, 9, 7, 1.0f, beta, &r, tag);
                check_gemm(ctx, choices[c], l >> 1, l & 1, 5, x, 11, 1.0f, beta, &r, tag);
                check_gemm(ctx, choices[c], l >> 1, l & 1, 13, 3, x, 0.5f, beta, &r, tag);
                if (tc_small()) continue;
                snprintf(tag, sizeof tag, "panel%s edges, M first", c ? " ia1" : "");
                check_gemm(ctx, choices[c], l >> 1, l & 1, x, wide_n, deep_k, 1.0f, beta, &r,
                           tag);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* t with choice c for layout l's products. */
static struct clt_tune tunes_with(const struct clt_tune *t, clt_gemm_layout l,
                                  struct clt_gemm_choice c)
{
    struct clt_tune o = *t;
    o.gemm[l][CLT_GEMM_SMALL] = o.gemm[l][CLT_GEMM_LARGE] = c;
    return o;
}
/* The choices whose stores the epilogue tests run: a small panel choice (the packed family),
 * the direct kernel's outer-product form (its vector store), its dot-product form (its store
 * by pieces of 4 and 2 columns), and the tiled kernel (GPUs' 16-bit GEMM: any dtypes). */
#define EPI_PANEL ((struct clt_gemm_choice)CLT_GEMM_CHOICE_PANEL(3, 8, 4, 16, 2, 2))
#define EPI_OUTER ((struct clt_gemm_choice)CLT_GEMM_CHOICE_DIRECT(4, 32, 16, 0, 1, 1))
#define EPI_DOT4 ((struct clt_gemm_choice)CLT_GEMM_CHOICE_DIRECT(4, 4, 16, 1, 2, 4))
#define EPI_DOT6 ((struct clt_gemm_choice)CLT_GEMM_CHOICE_DIRECT(3, 6, 16, 1, 1, 1))
#define EPI_TILED ((struct clt_gemm_choice)CLT_GEMM_CHOICE_TILED(4, 4, 2, 2, 8))
/* the packed form in slices of 16 k: the epilogue in the last slice's store, edges in M and N */
#define EPI_PACKED ((struct clt_gemm_choice)CLT_GEMM_CHOICE_PACKED(3, 8, 4, 16, 2, 2))

/* x W^T (+ bias) when tb, else x W, in float64 for a (M x K) and b (N x K, or K x N), into
 * sum[M * N], with check_gemm's bound for it in tol[M * N] (the bias one more term). */
static void ref_product(const float *a, const float *b, const float *bias, int tb, size_t M,
                        size_t N, size_t K, double *sum, double *tol)
{
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double v = bias ? bias[n] : 0.0, sabs = bias ? fabs(bias[n]) : 0.0;
            for (size_t k = 0; k < K; k++) {
                double p = (double)a[m * K + k] * (double)(tb ? b[n * K + k] : b[k * N + n]);
                v += p;
                sabs += fabs(p);
            }
            sum[m * N + n] = v;
            tol[m * N + n] =
                1e-5 + 1e-4 * fabs(v) + 0x1p-23 * (double)(K + (bias != NULL)) * sabs;
        }
}

/* clt_op_gemm_bias, a linear layer's forward (NT): with every NT choice the panel family (the
 * bias added in its store) and with the built-in tuning data (small products: another kernel,
 * then the bias kernel), on edge shapes: the same bits as clt_op_gemm followed by
 * clt_op_bias_add, and the float64 reference within check_gemm's tolerance. C's view is longer
 * than M rows: the rows past M stay untouched. */
START_TEST(test_gemm_bias)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {5, 17, 33}, {37, 70, 300}, {13, 129, 7}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const struct clt_tune t = *clt_ctx_tune(ctx), panel = tunes_with(&t, CLT_GEMM_NT, EPI_PANEL);
    for (int pass = 0; pass < 2; pass++) {
        TC_OK(ctx, clt_ctx_set_tune(ctx, pass ? &t : &panel));
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            size_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], rows = M + 2;
            float *a = xalloc(M * K, sizeof *a), *b = xalloc(N * K, sizeof *b);
            float *bias = xalloc(N, sizeof *bias), *got = xalloc(rows * N, sizeof *got);
            float *want = xalloc(rows * N, sizeof *want);
            double *sum = xalloc(M * N, sizeof *sum), *tol = xalloc(M * N, sizeof *tol);
            tc_fill_nonzero(&r, a, M * K, 0.05f, 1.0f);
            tc_fill_nonzero(&r, b, N * K, 0.05f, 1.0f);
            tc_fill_nonzero(&r, bias, N, 0.05f, 1.0f);
            ref_product(a, b, bias, 1, M, N, K, sum, tol);
            for (size_t i = 0; i < rows * N; i++) got[i] = SENTINEL;
            clt_tensor *A = view_at(ctx, M * K, 3, NULL), *B = view_at(ctx, N * K, 5, NULL);
            clt_tensor *bt = view_at(ctx, N, 1, NULL), *C1 = NULL;
            size_t cd[2] = {rows, N};
            TC_OK(ctx, clt_tensor_create(&C1, ctx, CLT_DTYPE_F32, 2, cd, CLT_MEM_OTHER));
            size_t md[2] = {M, N};
            clt_tensor *ref = NULL;
            TC_OK(ctx, clt_tensor_create(&ref, ctx, CLT_DTYPE_F32, 2, md, CLT_MEM_OTHER));
            tc_write(A, a);
            tc_write(B, b);
            tc_write(bt, bias);
            tc_write(C1, got);
            TC_OK(ctx, clt_op_gemm_bias(CLT_NO_TRANS, CLT_TRANS, M, N, K, A, B, bt, C1));
            TC_OK(ctx, clt_op_gemm(CLT_NO_TRANS, CLT_TRANS, M, N, K, 1.0f, A, B, 0.0f, ref));
            TC_OK(ctx, clt_op_bias_add(ref, bt));
            tc_read(C1, got);
            tc_read(ref, want);
            for (size_t m = 0; m < rows; m++)
                for (size_t n = 0; n < N; n++) {
                    float g = got[m * N + n];
                    if (m >= M) {
                        ck_assert_msg(g == SENTINEL, "gemm_bias %zux%zux%zu wrote row %zu", M, N,
                                      K, m);
                        continue;
                    }
                    size_t i = m * N + n;
                    ck_assert_msg(fabs(g - sum[i]) <= tol[i] && memcmp(&g, &want[i], 4) == 0,
                                  "gemm_bias (%s) %zux%zux%zu C[%zu, %zu] = %.9g: reference "
                                  "%.9g, unfused %.9g",
                                  pass ? "built-in" : "panel", M, N, K, m, n, g, sum[i],
                                  want[i]);
                }
            clt_tensor_free(A);
            clt_tensor_free(B);
            clt_tensor_free(bt);
            clt_tensor_free(C1);
            clt_tensor_free(ref);
            free(a);
            free(b);
            free(bias);
            free(got);
            free(want);
            free(sum);
            free(tol);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The epilogue (clt_op_gemm_epilogue): C = act(x W^T + bias) and z = x W^T + bias, for every
 * activation and none, with and without a bias and z, C stored f32, f16 or bf16, through the
 * panel family's store, the built-in choice (with 16-bit storage a GEMM, then the bias and
 * activation kernels), the direct outer-product kernel (its vector store), the direct
 * dot-product kernel with 4 and 6 columns per work-item (its store by pieces of rows) and the
 * tiled kernel (GPUs' 16-bit GEMM, here also with 16-bit C); with a 16-bit C the bias is stored
 * in C's dtype too, as a 16-bit model stores it (multiples of 1/64: the same values),
 * against a float64 reference: the GEMM tolerance of gemm_bias for z, carried through the
 * activation (|act'| <= 1.13) plus the activation kernels' 1e-5 + 1e-4 |ref|, plus the
 * roundings of a 16-bit C (2^-8 |ref| each for bf16, 2^-11 for f16): of y, and of x W^T and z
 * before the activation (the unfused path stores each in C's dtype first). In f32, z has the
 * bits of the unfused pre-activation, and relu and leakyrelu those of the unfused output; rows
 * past M untouched. */
#define EPI_SENTINEL 12288.0f /* exact in f16 and bf16 too */
/* The epilogue tests' shapes, activation slopes (per clt_act) and C dtypes, with
 * CLTRAIN_TEST_SMALL (oclgrind) the first shape, f32 and bf16, and no tanh, sigmoid or silu
 * (every path of the store stays: the activation is a run-time argument). */
static const size_t epi_shapes[][3] = {{7, 33, 27}, {1, 1, 1}, {37, 70, 300}};
static const float epi_slopes[] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.3f};
static const clt_dtype epi_dtypes[] = {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_F16};
#define EPI_SHAPES tc_size(3, 1)
#define EPI_DTYPES tc_size(3, 2)
static bool epi_skip(int act)
{
    return tc_small() && (act == CLT_ACT_TANH || act == CLT_ACT_SIGMOID || act == CLT_ACT_SILU);
}

/* The relative rounding of a value stored in dtype d (0 for f32). */
static double round16_of(clt_dtype d)
{
    return d == CLT_DTYPE_BF16 ? 0x1p-8 : d == CLT_DTYPE_F16 ? 0x1p-11 : 0.0;
}


START_TEST(test_gemm_epilogue)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const struct clt_tune t = *clt_ctx_tune(ctx);
    static const char *const pass_name[] = {"panel", "built-in", "outer", "dot 4", "dot 6",
                                            "tiled", "packed"};
    const struct clt_tune tunes[] = {tunes_with(&t, CLT_GEMM_NT, EPI_PANEL),
                                     t,
                                     tunes_with(&t, CLT_GEMM_NT, EPI_OUTER),
                                     tunes_with(&t, CLT_GEMM_NT, EPI_DOT4),
                                     tunes_with(&t, CLT_GEMM_NT, EPI_DOT6),
                                     tunes_with(&t, CLT_GEMM_NT, EPI_TILED),
                                     tunes_with(&t, CLT_GEMM_NT, EPI_PACKED)};
    for (size_t pass = 0; pass < sizeof tunes / sizeof *tunes; pass++) {
        TC_OK(ctx, clt_ctx_set_tune(ctx, &tunes[pass]));
        for (size_t s = 0; s < EPI_SHAPES; s++) {
            size_t M = epi_shapes[s][0], N = epi_shapes[s][1], K = epi_shapes[s][2];
            size_t rows = M + 2;
            float *a = xalloc(M * K, sizeof *a), *b = xalloc(N * K, sizeof *b);
            float *bias = xalloc(N, sizeof *bias), *got = xalloc(rows * N, sizeof *got);
            float *gz = xalloc(rows * N, sizeof *gz), *want = xalloc(M * N, sizeof *want);
            float *wz = xalloc(M * N, sizeof *wz);
            double *sum = xalloc(M * N, sizeof *sum), *tol = xalloc(M * N, sizeof *tol);
            tc_fill_nonzero(&r, a, M * K, 0.05f, 1.0f);
            tc_fill_nonzero(&r, b, N * K, 0.05f, 1.0f);
            tc_fill_nonzero(&r, bias, N, 0.05f, 1.0f);
            /* multiples of 1/64: the same values stored f32, f16 or bf16 (as C) */
            for (size_t n = 0; n < N; n++) bias[n] = roundf(bias[n] * 64.0f) / 64.0f;
            for (size_t i = 0; i < rows * N; i++) got[i] = EPI_SENTINEL;
            clt_tensor *A = view_at(ctx, M * K, 3, NULL), *B = view_at(ctx, N * K, 5, NULL);
            clt_tensor *bt = view_at(ctx, N, 1, NULL), *bias_as[3] = {bt, NULL, NULL};
            tc_write(A, a);
            tc_write(B, b);
            tc_write(bt, bias);
            for (clt_dtype d = CLT_DTYPE_F16; d <= CLT_DTYPE_BF16; d++) {
                TC_OK(ctx, clt_tensor_create(&bias_as[d], ctx, d, 1, &N, CLT_MEM_OTHER));
                TC_OK(ctx, clt_op_cast(bias_as[d], bt));
            }
            for (int withb = 0; withb < 2; withb++) {
                ref_product(a, b, withb ? bias : NULL, 1, M, N, K, sum, tol);
                for (int act = -1; act < CLT_ACT__COUNT; act++)
                    for (int withz = 0; withz < (act >= 0 ? 2 : 1); withz++)
                        for (size_t d = 0; d < EPI_DTYPES; d++) {
                            if ((!withb && act < 0) || epi_skip(act)) continue; /* (none) */
                            clt_dtype cd = epi_dtypes[d];
                            double round16 = round16_of(cd);
                            size_t dims[2] = {rows, N}, md[2] = {M, N};
                            clt_tensor *C = NULL, *Z = NULL, *c32 = NULL, *z32 = NULL;
                            clt_tensor *ref = NULL, *refz = NULL;
                            TC_OK(ctx, clt_tensor_create(&C, ctx, cd, 2, dims, CLT_MEM_OTHER));
                            TC_OK(ctx, clt_tensor_create(&Z, ctx, cd, 2, dims, CLT_MEM_OTHER));
                            TC_OK(ctx, clt_tensor_create(&c32, ctx, CLT_DTYPE_F32, 2, dims,
                                                         CLT_MEM_OTHER));
                            TC_OK(ctx, clt_tensor_create(&z32, ctx, CLT_DTYPE_F32, 2, dims,
                                                         CLT_MEM_OTHER));
                            tc_write(c32, got); /* sentinels, cast into C and Z */
                            TC_OK(ctx, clt_op_cast(C, c32));
                            TC_OK(ctx, clt_op_cast(Z, c32));
                            struct clt_gemm_epilogue e = {.bias = withb ? bias_as[cd] : NULL,
                                                          .act = act,
                                                          .slope = act >= 0 ? epi_slopes[act]
                                                                            : 0,
                                                          .z = withz ? Z : NULL};
                            TC_OK(ctx, clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, M, N, K, A,
                                                            B, &e, C));
                            TC_OK(ctx, clt_op_cast(c32, C));
                            TC_OK(ctx, clt_op_cast(z32, Z));
                            tc_read(c32, got);
                            tc_read(z32, gz);
                            if (cd == CLT_DTYPE_F32) { /* unfused, for the bits */
                                TC_OK(ctx, clt_tensor_create(&refz, ctx, CLT_DTYPE_F32, 2, md,
                                                             CLT_MEM_OTHER));
                                TC_OK(ctx, clt_tensor_create(&ref, ctx, CLT_DTYPE_F32, 2, md,
                                                             CLT_MEM_OTHER));
                                TC_OK(ctx, clt_op_gemm(CLT_NO_TRANS, CLT_TRANS, M, N, K, 1.0f, A,
                                                       B, 0.0f, refz));
                                if (withb) TC_OK(ctx, clt_op_bias_add(refz, bt));
                                if (act >= 0)
                                    TC_OK(ctx, clt_op_act_forward_alpha((clt_act)act, e.slope,
                                                                        ref, refz));
                                tc_read(refz, wz);
                                if (act >= 0) tc_read(ref, want);
                                else memcpy(want, wz, M * N * sizeof *want);
                            }
                            for (size_t m = 0; m < rows; m++)
                                for (size_t n = 0; n < N; n++) {
                                    size_t i = m * N + n;
                                    float g = got[i], zg = gz[i];
                                    if (m >= M || !withz) {
                                        ck_assert_msg((m >= M ? g == EPI_SENTINEL : true) &&
                                                          zg == EPI_SENTINEL,
                                                      "epilogue (%s) act %d z %d %s %zux%zux%zu "
                                                      "wrote row %zu of C or z: %g, %g",
                                                      pass_name[pass], act, withz,
                                                      clt_dtype_name(cd), M, N, K, m, g, zg);
                                        if (m >= M) continue;
                                    }
                                    /* unfused, a 16-bit C holds x W^T before the bias */
                                    double v = sum[i], y = v, dmax = 1.0;
                                    double r16 = round16 * (fabs(v) + fabs(v - (withb ? bias[n]
                                                                                    : 0.0)));
                                    if (act >= 0) {
                                        y = ref_act_value_alpha((ref_act)act, e.slope, v);
                                        dmax = 1.13;
                                    }
                                    /* unfused, a 16-bit z is rounded before act */
                                    double tc = dmax * (tol[i] + r16) + 1e-5 +
                                                1e-4 * fabs(y) + round16 * fabs(y);
                                    bool bits = cd == CLT_DTYPE_F32 &&
                                                (act < 0 || act == CLT_ACT_RELU ||
                                                 act == CLT_ACT_LEAKYRELU);
                                    ck_assert_msg(fabs(g - y) <= tc &&
                                                      (!bits || memcmp(&g, &want[i], 4) == 0),
                                                  "epilogue (%s) act %d bias %d z %d %s "
                                                  "%zux%zux%zu C[%zu, %zu] = %.9g: reference "
                                                  "%.9g, unfused %.9g",
                                                  pass_name[pass], act, withb, withz,
                                                  clt_dtype_name(cd), M, N, K, m, n, g, y,
                                                  want[i]);
                                    if (!withz) continue;
                                    double tz = tol[i] + r16;
                                    ck_assert_msg(fabs(zg - v) <= tz &&
                                                      (cd != CLT_DTYPE_F32 ||
                                                       memcmp(&zg, &wz[i], 4) == 0),
                                                  "epilogue (%s) act %d %s z[%zu, %zu] = %.9g: "
                                                  "reference %.9g, unfused %.9g",
                                                  pass_name[pass], act,
                                                  clt_dtype_name(cd), m, n, zg, v, wz[i]);
                                }
                            for (size_t i = 0; i < rows * N; i++) got[i] = EPI_SENTINEL;
                            clt_tensor_free(C);
                            clt_tensor_free(Z);
                            clt_tensor_free(c32);
                            clt_tensor_free(z32);
                            clt_tensor_free(ref);
                            clt_tensor_free(refz);
                        }
            }
            clt_tensor_free(A);
            clt_tensor_free(B);
            clt_tensor_free(bt);
            clt_tensor_free(bias_as[CLT_DTYPE_F16]);
            clt_tensor_free(bias_as[CLT_DTYPE_BF16]);
            free(a);
            free(b);
            free(bias);
            free(got);
            free(gz);
            free(want);
            free(wz);
            free(sum);
            free(tol);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* d act / d(.) from the tensor act's backward reads (cl/act_fn.cl's rules): relu's and
 * leakyrelu's masks, tanh's and sigmoid's from y, gelu's and silu's from x. */
static double derivative_from_saved(int act, double slope, double s)
{
    switch (act) {
    case CLT_ACT_RELU:
        return s > 0.0 ? 1.0 : 0.0;
    case CLT_ACT_TANH:
        return (1.0 - s) * (1.0 + s);
    case CLT_ACT_SIGMOID:
        return s * (1.0 - s);
    case CLT_ACT_LEAKYRELU:
        return s > 0.0 ? 1.0 : slope;
    default: /* gelu, silu: from x */
        return ref_act_derivative_alpha((ref_act)act, slope, s);
    }
}


/* clt_op_gemm_tn_sums, a linear layer's weight and bias gradients: C = alpha A^T B + beta C and
 * sums = sums_beta sums + A's column sums, through the direct outer-product kernel (the sums in
 * its k loop: the small form, N < 16, and the vector one), its packed form (the sums from its
 * packed slices; also with A and B stored bf16, and so the built-in choice, which takes the
 * packed form for 16-bit operands on CPUs), the panel family, the tiled kernel and the built-in
 * choice (the last two: clt_op_bias_grad after the GEMM), with beta 0 over NaN-poisoned C and
 * sums and with beta 1, sums_beta 0.5 accumulating; edge shapes, K = 0 included. C has the
 * bits of clt_op_gemm with the same choice; C and the sums against float64 within check_gemm's
 * bound (the sums: K-term sums of |a|); the guards around both untouched. */
START_TEST(test_gemm_tn_sums)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const struct clt_tune builtin = *clt_ctx_tune(ctx);
    static const char *const pass_name[] = {"outer",  "built-in",    "panel",        "tiled",
                                            "packed", "packed bf16", "built-in bf16"};
    const struct clt_tune tunes[] = {tunes_with(&builtin, CLT_GEMM_TN, EPI_OUTER), builtin,
                                     tunes_with(&builtin, CLT_GEMM_TN, EPI_PANEL),
                                     tunes_with(&builtin, CLT_GEMM_TN, EPI_TILED),
                                     tunes_with(&builtin, CLT_GEMM_TN, EPI_PACKED),
                                     tunes_with(&builtin, CLT_GEMM_TN, EPI_PACKED), builtin};
    const size_t first_bf16 = 5; /* A and B stored bf16 from this pass on */
    static const size_t shapes[][3] = {{7, 33, 27}, {37, 5, 300}, {1, 1, 1}, {5, 9, 0},
                                       {70, 100, 129}};
    const size_t nshapes = tc_size(5, 3);
    for (size_t pass = 0; pass < sizeof tunes / sizeof *tunes; pass++) {
        TC_OK(ctx, clt_ctx_set_tune(ctx, &tunes[pass]));
        for (size_t sh = 0; sh < nshapes; sh++)
            for (int acc = 0; acc < 2; acc++) {
                const size_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
                const float alpha = acc ? 1.0f : 0.75f, beta = acc ? 1.0f : 0.0f,
                            sbeta = acc ? 0.5f : 0.0f;
                float *a = xalloc(K * M, sizeof *a), *b = xalloc(K * N, sizeof *b);
                float *c0 = xalloc(M * N + 2 * GUARD, sizeof *c0);
                float *s0 = xalloc(M + 2 * GUARD, sizeof *s0);
                float *got = xalloc(M * N + 2 * GUARD, sizeof *got);
                float *gots = xalloc(M + 2 * GUARD, sizeof *gots);
                float *want = xalloc(M * N + 2 * GUARD, sizeof *want);
                const bool bf16 = pass >= first_bf16;
                tc_fill_nonzero(&r, a, K * M, 0.05f, 1.0f);
                tc_fill_nonzero(&r, b, K * N, 0.05f, 1.0f);
                tc_fill_nonzero(&r, c0 + GUARD, M * N, 0.05f, 1.0f);
                tc_fill_nonzero(&r, s0 + GUARD, M, 0.05f, 1.0f);
                if (bf16) { /* multiples of 1/64: exact in bf16 */
                    for (size_t i = 0; i < K * M; i++) a[i] = roundf(a[i] * 64.0f) / 64.0f;
                    for (size_t i = 0; i < K * N; i++) b[i] = roundf(b[i] * 64.0f) / 64.0f;
                }
                for (size_t i = 0; i < GUARD; i++) {
                    c0[i] = c0[GUARD + M * N + i] = SENTINEL;
                    s0[i] = s0[GUARD + M + i] = SENTINEL;
                }
                if (!acc) { /* beta 0 reads neither */
                    for (size_t i = 0; i < M * N; i++) c0[GUARD + i] = NAN;
                    for (size_t i = 0; i < M; i++) s0[GUARD + i] = NAN;
                }
                clt_tensor *cbase = NULL, *sbase = NULL, *c2base = NULL;
                clt_tensor *A = view_at(ctx, K * M, 3, NULL), *B = view_at(ctx, K * N, 5, NULL);
                clt_tensor *C = view_at(ctx, M * N, GUARD, &cbase);
                clt_tensor *S = view_at(ctx, M, GUARD, &sbase);
                clt_tensor *C2 = view_at(ctx, M * N, GUARD, &c2base);
                tc_write(A, a);
                tc_write(B, b);
                tc_write(cbase, c0);
                tc_write(c2base, c0);
                tc_write(sbase, s0);
                clt_tensor *A16 = NULL, *B16 = NULL;
                if (bf16) {
                    size_t na = K * M, nb = K * N;
                    TC_OK(ctx,
                          clt_tensor_create(&A16, ctx, CLT_DTYPE_BF16, 1, &na, CLT_MEM_OTHER));
                    TC_OK(ctx,
                          clt_tensor_create(&B16, ctx, CLT_DTYPE_BF16, 1, &nb, CLT_MEM_OTHER));
                    TC_OK(ctx, clt_op_cast(A16, A));
                    TC_OK(ctx, clt_op_cast(B16, B));
                }
                const clt_tensor *Aop = bf16 ? A16 : A, *Bop = bf16 ? B16 : B;
                TC_OK(ctx, clt_op_gemm_tn_sums(M, N, K, alpha, Aop, Bop, beta, C, S, sbeta));
                TC_OK(ctx,
                      clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, M, N, K, alpha, Aop, Bop, beta, C2));
                tc_read(cbase, got);
                tc_read(sbase, gots);
                tc_read(c2base, want);
                const char *tag = pass_name[pass];
                for (size_t i = 0; i < GUARD; i++)
                    ck_assert_msg(got[i] == SENTINEL && got[GUARD + M * N + i] == SENTINEL &&
                                      gots[i] == SENTINEL && gots[GUARD + M + i] == SENTINEL,
                                  "tn_sums (%s) %zux%zux%zu: wrote outside C or the sums", tag,
                                  M, N, K);
                for (size_t m = 0; m < M; m++) {
                    double sum = 0, sabs = 0;
                    for (size_t k = 0; k < K; k++) {
                        sum += a[k * M + m];
                        sabs += fabs((double)a[k * M + m]);
                    }
                    const double old = acc ? (double)s0[GUARD + m] : 0.0;
                    const double ref = (double)sbeta * old + sum;
                    const double tol = 1e-5 + 1e-4 * fabs(ref) +
                                       0x1p-23 * ((double)K * sabs + 2.0 * fabs(sbeta * old));
                    const double g = gots[GUARD + m];
                    ck_assert_msg(fabs(g - ref) <= tol,
                                  "tn_sums (%s) %zux%zux%zu acc %d: sums[%zu] = %.9g, reference "
                                  "%.9g (tolerance %.3g)",
                                  tag, M, N, K, acc, m, g, ref, tol);
                    for (size_t n = 0; n < N; n++) {
                        double p = 0, pabs = 0;
                        for (size_t k = 0; k < K; k++) {
                            const double t = (double)a[k * M + m] * (double)b[k * N + n];
                            p += t;
                            pabs += fabs(t);
                        }
                        const size_t i = GUARD + m * N + n;
                        const double cold = acc ? (double)c0[i] : 0.0;
                        const double cref = (double)alpha * p + (double)beta * cold;
                        const double ctol = 1e-5 + 1e-4 * fabs(cref) +
                                            0x1p-23 * ((double)K * fabs((double)alpha) * pabs +
                                                       2.0 * fabs((double)beta * cold));
                        ck_assert_msg(fabs(got[i] - cref) <= ctol &&
                                          memcmp(&got[i], &want[i], sizeof got[i]) == 0,
                                      "tn_sums (%s) %zux%zux%zu acc %d: C[%zu, %zu] = %.9g, "
                                      "reference %.9g (tolerance %.3g), clt_op_gemm %.9g",
                                      tag, M, N, K, acc, m, n, got[i], cref, ctol, want[i]);
                    }
                }
                clt_tensor_free(A);
                clt_tensor_free(B);
                clt_tensor_free(A16);
                clt_tensor_free(B16);
                clt_tensor_free(C);
                clt_tensor_free(S);
                clt_tensor_free(C2);
                clt_tensor_free(cbase);
                clt_tensor_free(sbase);
                clt_tensor_free(c2base);
                free(a);
                free(b);
                free(c0);
                free(s0);
                free(got);
                free(gots);
                free(want);
            }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The backward epilogue (clt_op_gemm_epilogue with `saved`): dx = (dy W) * act'(s), a linear
 * layer's input gradient taken on through the activation before it, NN as the layer runs it,
 * for every activation, C and s stored f32, f16 or bf16, through the panel family's store, the
 * built-in choice (with 16-bit storage the GEMM, then the activation's backward in place), the
 * direct outer-product kernel (its vector store) and the tiled kernel, against a float64
 * reference from the saved values as stored: check_gemm's bound for the product carried
 * through |act'(s)| (plus a 16-bit C's rounding of the product on the unfused path), plus
 * 1e-5 + 1e-4 |ref| for the derivative's fp32 arithmetic and a 16-bit C's final rounding.
 * In f32, relu and leakyrelu give the bits of the unfused passes; rows past M untouched. */
START_TEST(test_gemm_epilogue_backward)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = ctx_with_gemm(NULL);
    const struct clt_tune builtin = *clt_ctx_tune(ctx);
    static const char *const pass_name[] = {"panel", "built-in", "outer", "tiled", "packed"};
    const struct clt_tune tunes[] = {tunes_with(&builtin, CLT_GEMM_NN, EPI_PANEL), builtin,
                                     tunes_with(&builtin, CLT_GEMM_NN, EPI_OUTER),
                                     tunes_with(&builtin, CLT_GEMM_NN, EPI_TILED),
                                     tunes_with(&builtin, CLT_GEMM_NN, EPI_PACKED)};
    for (size_t pass = 0; pass < sizeof tunes / sizeof *tunes; pass++) {
        TC_OK(ctx, clt_ctx_set_tune(ctx, &tunes[pass]));
        for (size_t sh = 0; sh < EPI_SHAPES; sh++) {
            size_t M = epi_shapes[sh][0], N = epi_shapes[sh][1], K = epi_shapes[sh][2];
            size_t rows = M + 2;
            size_t dims[2] = {rows, N}, md[2] = {M, N};
            float *a = xalloc(M * K, sizeof *a), *b = xalloc(K * N, sizeof *b);
            float *sv = xalloc(rows * N, sizeof *sv), *got = xalloc(rows * N, sizeof *got);
            float *want = xalloc(M * N, sizeof *want);
            double *sum = xalloc(M * N, sizeof *sum), *tol = xalloc(M * N, sizeof *tol);
            tc_fill_nonzero(&r, a, M * K, 0.05f, 1.0f);
            tc_fill_nonzero(&r, b, K * N, 0.05f, 1.0f);
            clt_tensor *A = view_at(ctx, M * K, 3, NULL), *B = view_at(ctx, K * N, 5, NULL);
            tc_write(A, a);
            tc_write(B, b);
            ref_product(a, b, NULL, 0, M, N, K, sum, tol); /* dy W */
            for (int act = 0; act < CLT_ACT__COUNT; act++)
                for (size_t d = 0; d < EPI_DTYPES; d++) {
                    if (epi_skip(act)) continue;
                    clt_dtype cd = epi_dtypes[d];
                    double round16 = round16_of(cd);
                    clt_tensor *C = NULL, *S = NULL, *c32 = NULL, *ref = NULL;
                    TC_OK(ctx, clt_tensor_create(&C, ctx, cd, 2, dims, CLT_MEM_OTHER));
                    TC_OK(ctx, clt_tensor_create(&S, ctx, cd, 2, dims, CLT_MEM_OTHER));
                    TC_OK(ctx, clt_tensor_create(&c32, ctx, CLT_DTYPE_F32, 2, dims,
                                                 CLT_MEM_OTHER));
                    /* saved values of either sign (s in (0, 1) too for sigmoid's y), as
                     * stored: cast into S and back */
                    tc_fill_nonzero(&r, sv, rows * N, 0.05f, 1.0f);
                    tc_write(c32, sv);
                    TC_OK(ctx, clt_op_cast(S, c32));
                    TC_OK(ctx, clt_op_cast(c32, S));
                    tc_read(c32, sv);
                    for (size_t i = 0; i < rows * N; i++) got[i] = EPI_SENTINEL;
                    tc_write(c32, got);
                    TC_OK(ctx, clt_op_cast(C, c32));
                    const struct clt_gemm_epilogue e = {.act = act, .slope = epi_slopes[act],
                                                        .saved = S};
                    TC_OK(ctx, clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, M, N, K, A, B,
                                                    &e, C));
                    TC_OK(ctx, clt_op_cast(c32, C));
                    tc_read(c32, got);
                    if (cd == CLT_DTYPE_F32) { /* unfused, for the bits */
                        clt_tensor *sm = NULL;
                        TC_OK(ctx, clt_tensor_create(&ref, ctx, CLT_DTYPE_F32, 2, md,
                                                     CLT_MEM_OTHER));
                        TC_OK(ctx, clt_tensor_view(&sm, S, 0, 2, md));
                        TC_OK(ctx, clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, N, K, 1.0f, A, B,
                                               0.0f, ref));
                        TC_OK(ctx, clt_op_act_backward_alpha((clt_act)act, epi_slopes[act], ref,
                                                             ref, sm, sm));
                        tc_read(ref, want);
                        clt_tensor_free(sm);
                    }
                    for (size_t m = 0; m < rows; m++)
                        for (size_t n = 0; n < N; n++) {
                            size_t i = m * N + n;
                            float g = got[i];
                            if (m >= M) {
                                ck_assert_msg(g == EPI_SENTINEL,
                                              "backward epilogue (%s) act %d %s wrote row %zu: "
                                              "%g",
                                              pass_name[pass], act, clt_dtype_name(cd), m,
                                              g);
                                continue;
                            }
                            double dv = derivative_from_saved(act, epi_slopes[act], sv[i]);
                            double y = sum[i] * dv;
                            double tc = fabs(dv) * (tol[i] + round16 * fabs(sum[i])) + 1e-5 +
                                        1e-4 * fabs(y) + round16 * fabs(y);
                            bool bits = cd == CLT_DTYPE_F32 &&
                                        (act == CLT_ACT_RELU || act == CLT_ACT_LEAKYRELU);
                            ck_assert_msg(fabs(g - y) <= tc &&
                                              (!bits || memcmp(&g, &want[i], 4) == 0),
                                          "backward epilogue (%s) act %d %s %zux%zux%zu "
                                          "C[%zu, %zu] = %.9g: reference %.9g (s %.9g), "
                                          "unfused %.9g",
                                          pass_name[pass], act, clt_dtype_name(cd), M, N, K,
                                          m, n, g, y, (double)sv[i],
                                          cd == CLT_DTYPE_F32 ? want[i] : 0.0f);
                        }
                    clt_tensor_free(C);
                    clt_tensor_free(S);
                    clt_tensor_free(c32);
                    clt_tensor_free(ref);
                }
            clt_tensor_free(A);
            clt_tensor_free(B);
            free(a);
            free(b);
            free(sv);
            free(got);
            free(want);
            free(sum);
            free(tol);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_choice_parse_check)
{
    int n = 0;
    const struct clt_gemm_choice *v = clt_gemm_variants(&n);
    for (int i = 0; i < n; i++) {
        char text[96];
        struct clt_gemm_choice back;
        clt_gemm_choice_format(&v[i], text, sizeof text);
        ck_assert_int_eq(clt_gemm_choice_check(&v[i], NULL, NULL, 0), CLT_OK);
        ck_assert_int_eq(clt_gemm_choice_parse(text, &back), CLT_OK);
        ck_assert_msg(memcmp(&back, &v[i], sizeof back) == 0,
                      "%s does not survive format and parse", text);
    }
    struct clt_gemm_choice c;
    ck_assert_int_eq(clt_gemm_choice_parse("clblast", &c), CLT_OK);
    ck_assert_int_eq(c.kernel, CLT_GEMM_CLBLAST);
    ck_assert_int_ne(clt_gemm_choice_parse("direct tm4 bogus7", &c), CLT_OK);
    ck_assert_int_ne(clt_gemm_choice_parse("fastest", &c), CLT_OK);
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm4 tn12 vw8", &c), CLT_OK);
    char why[128] = "";
    ck_assert_int_eq(clt_gemm_choice_check(&c, NULL, why, sizeof why), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(why, "multiple"));
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm4 tn16 vw3", &c), CLT_OK);
    ck_assert_int_eq(clt_gemm_choice_check(&c, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    clt_device_info small = {.max_work_group = 64, .local_mem = 4096};
    ck_assert_int_eq(clt_gemm_choice_parse("tiled wg16x16 tm4 tn4 kb16", &c), CLT_OK);
    ck_assert_int_eq(clt_gemm_choice_check(&c, &small, NULL, 0), CLT_ERR_INVALID_ARG);
    /* 16-bit operands where the chosen kernel reads f32 only: on a CPU (whose own large choice
     * is the panel family) outer products over packed slices in a block of the tuner's table
     * for its 16-float vectors (the 4 x 4 block of 4 floats it got once ran MLP-S's 16-bit
     * products 3 to 20 times slower); on a GPU its tiled default */
    clt_device_info cpu = {.type = CLT_DEVICE_CPU},
                    gpu = {.type = CLT_DEVICE_GPU, .max_work_group = 1024, .local_mem = 49152};
    c = clt__gemm_mixed_choice(&cpu);
    ck_assert(clt__gemm_takes_16bit(&c) && c.kernel == CLT_GEMM_DIRECT && c.kb > 0);
    ck_assert(c.vw == 16 && c.tm * c.bm >= 32 && c.tn * c.bn >= 32);
    bool listed = false;
    for (int i = 0; i < n; i++) listed = listed || memcmp(&v[i], &c, sizeof c) == 0;
    ck_assert_msg(listed, "the CPU's 16-bit fallback is not in the tuner's table");
    c = clt__gemm_mixed_choice(&gpu);
    ck_assert_int_eq(c.kernel, CLT_GEMM_TILED);
}
END_TEST

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

/* A ctx reading `text` as its tuning file: CLT_OK always, with the defaults unless valid. */
static clt_ctx *ctx_with_file(const char *path, const char *text)
{
    if (text) write_text(path, text);
    setenv("CLTRAIN_TUNE_FILE", path, 1);
    unsetenv("CLTRAIN_GEMM");
    return gemm_ctx();
}

START_TEST(test_tune_files)
{
    char dir[4096], path[4200];
    tc_rng r = tc_rng_for(__func__);
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tune.json", dir);

    /* malformed: ignored with a note, the built-in choices stay, GEMM works */
    const char *bad[] = {"{\"format\": \"cltrain-tune\", \"version\": 1, \"gemm\": {",
                         "not json at all", "[1, 2, 3]", "",
                         "{\"format\": \"cltrain-tune\", \"version\": 99}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        clt_ctx *ctx = ctx_with_file(path, bad[i]);
        struct clt_tune def;
        clt_tune_defaults(clt_ctx_device(ctx), &def);
        const struct clt_tune *t = clt_ctx_tune(ctx);
        ck_assert_msg(tc_contains(t->source, "ignored"), "source \"%s\"", t->source);
        ck_assert(tc_contains(clt_ctx_errmsg(ctx), "tune.json"));
        ck_assert(memcmp(t->gemm, def.gemm, sizeof def.gemm) == 0);
        check_gemm(ctx, NULL, 0, 1, 17, 5, 33, 1.0f, 0.0f, &r, "after a malformed file");
        clt_ctx_free(ctx);
    }

    /* valid for this device: applied; then the same data for another device: ignored */
    clt_ctx *ctx = ctx_with_file(path, NULL);
    const clt_device_info dev_copy = *clt_ctx_device(ctx), *dev = &dev_copy;
    struct clt_tune t;
    clt_tune_defaults(dev, &t);
    /* 17 * 100 * 129 = 219300 MACs: the classes split at 100000, so that the loop below runs
     * the large choices and the sweep at 1 x 17 x 100 the small ones */
    t.gemm_large_macs = 100000;
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm3 tn16 vw8 veck0 mdim1 wg2x1 kb40 bm2 bn3",
                                           &t.gemm[CLT_GEMM_NN][CLT_GEMM_LARGE]),
                     CLT_OK);
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm8 tn32 vw16 kb64 bm2 bn1",
                                           &t.gemm[CLT_GEMM_NT][CLT_GEMM_LARGE]),
                     CLT_OK);
    ck_assert_int_eq(
        clt_gemm_choice_parse("direct tm2 tn3 vw4 veck1", &t.gemm[CLT_GEMM_TN][CLT_GEMM_LARGE]),
        CLT_OK);
    ck_assert_int_eq(
        clt_gemm_choice_parse("tiled wg4x8 tm2 tn3 kb5", &t.gemm[CLT_GEMM_TT][CLT_GEMM_LARGE]),
        CLT_OK);
    ck_assert_int_eq(
        clt_gemm_choice_parse("direct tm1 tn2 vw2", &t.gemm[CLT_GEMM_NN][CLT_GEMM_SMALL]), CLT_OK);
    t.gemm_gflops[CLT_GEMM_NN][CLT_GEMM_LARGE] = 12.5;
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm4 tn8 vw4 kb32 bm2 bn2",
                                           &t.gemm16[CLT_GEMM_NT][CLT_GEMM_SMALL]),
                     CLT_OK);
    t.gemm16_gflops[CLT_GEMM_NT][CLT_GEMM_SMALL] = 7.5;
    ck_assert_int_eq(clt_tune_save(path, &t), CLT_OK);
    clt_ctx_free(ctx);

    ctx = ctx_with_file(path, NULL);
    const struct clt_tune *got = clt_ctx_tune(ctx);
    ck_assert_str_eq(got->source, path);
    ck_assert(memcmp(got->gemm, t.gemm, sizeof t.gemm) == 0);
    ck_assert(memcmp(got->gemm16, t.gemm16, sizeof t.gemm16) == 0); /* "gemm16" read back */
    ck_assert(fabs(got->gemm16_gflops[CLT_GEMM_NT][CLT_GEMM_SMALL] - 7.5) < 1e-9);
    ck_assert(got->gemm_large_macs == 100000);
    ck_assert(fabs(got->gemm_gflops[CLT_GEMM_NN][CLT_GEMM_LARGE] - 12.5) < 1e-9);
    for (int l = 0; l < 4; l++) {
        check_gemm(ctx, NULL, l >> 1, l & 1, 17, 100, 129, 1.0f, 0.0f, &r, "tuned large");
        check_gemm(ctx, NULL, l >> 1, l & 1, 1, 17, 100, 0.5f, 1.0f, &r, "tuned small");
    }
    clt_ctx_free(ctx);

    /* CLTRAIN_GEMM=clblast still wins over the file */
    setenv("CLTRAIN_GEMM", "clblast", 1);
    ctx = gemm_ctx();
    ck_assert_int_eq(clt_ctx_tune(ctx)->gemm[CLT_GEMM_NN][CLT_GEMM_LARGE].kernel, CLT_GEMM_CLBLAST);
    clt_ctx_free(ctx);
    unsetenv("CLTRAIN_GEMM");

    snprintf(t.device_name, sizeof t.device_name, "some other device");
    ck_assert_int_eq(clt_tune_save(path, &t), CLT_OK);
    ctx = ctx_with_file(path, NULL);
    ck_assert(tc_contains(clt_ctx_tune(ctx)->source, "ignored"));
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "some other device"));
    clt_ctx_free(ctx);

    /* a valid file naming an impossible choice: ignored as a whole */
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", \"driver\": "
             "\"%s\", \"gemm\": {\"NN\": {\"kernel\": \"direct\", \"tm\": 4, \"tn\": 12, \"vw\": "
             "8, \"veck\": 0, \"mdim\": 0, \"wgm\": 1, \"wgn\": 1, \"kb\": 0}}}",
             dev->device_name, dev->driver_version);
    ck_assert_ptr_null(strchr(dev->device_name, '"')); /* the text above is valid JSON */
    ctx = ctx_with_file(path, text);
    ck_assert(tc_contains(clt_ctx_tune(ctx)->source, "ignored"));
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "multiple"), "%s", clt_ctx_errmsg(ctx));
    clt_ctx_free(ctx);

    /* one choice for both classes of a layout; and a bad class boundary */
    snprintf(text, sizeof text,
             "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", \"driver\": "
             "\"%s\", \"gemm\": {\"TN\": {\"kernel\": \"direct\", \"tm\": 2, \"tn\": 8, \"vw\": "
             "4, \"veck\": 0, \"mdim\": 1, \"wgm\": 1, \"wgn\": 2, \"kb\": 0}}}",
             dev->device_name, dev->driver_version);
    ctx = ctx_with_file(path, text);
    ck_assert_str_eq(clt_ctx_tune(ctx)->source, path);
    for (int z = 0; z < CLT_GEMM__SIZES; z++) {
        const struct clt_gemm_choice *c = &clt_ctx_tune(ctx)->gemm[CLT_GEMM_TN][z];
        ck_assert(c->kernel == CLT_GEMM_DIRECT && c->tm == 2 && c->tn == 8 && c->mdim == 1 &&
                  c->wgn == 2 && c->bm == 1 && c->bn == 1);
    }
    check_gemm(ctx, NULL, 1, 0, 33, 17, 9, 1.0f, 0.0f, &r, "one choice");
    /* without "gemm16", the 16-bit choices follow the f32 ones where those take 16-bit
     * operands (not this direct kb0 one: the device's 16-bit fallback) */
    struct clt_gemm_choice fb = clt__gemm_mixed_choice(dev);
    for (int z = 0; z < CLT_GEMM__SIZES; z++)
        ck_assert(memcmp(&clt_ctx_tune(ctx)->gemm16[CLT_GEMM_TN][z], &fb, sizeof fb) == 0);
    clt_ctx_free(ctx);
    snprintf(text, sizeof text,
             "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", \"driver\": "
             "\"%s\", \"gemm\": {\"NN\": {\"kernel\": \"direct\", \"tm\": 2, \"tn\": 8, \"vw\": "
             "4, \"veck\": 0, \"mdim\": 0, \"wgm\": 1, \"wgn\": 1, \"kb\": 16}}}",
             dev->device_name, dev->driver_version);
    ctx = ctx_with_file(path, text);
    for (int z = 0; z < CLT_GEMM__SIZES; z++) {
        const struct clt_gemm_choice *c = &clt_ctx_tune(ctx)->gemm16[CLT_GEMM_NN][z];
        ck_assert(c->kernel == CLT_GEMM_DIRECT && c->tm == 2 && c->kb == 16);
    }
    clt_ctx_free(ctx);
    /* a 16-bit choice that cannot take 16-bit operands: the file is ignored */
    snprintf(text, sizeof text,
             "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", \"driver\": "
             "\"%s\", \"gemm16\": {\"NT\": {\"kernel\": \"clblast\"}}}",
             dev->device_name, dev->driver_version);
    ctx = ctx_with_file(path, text);
    ck_assert(tc_contains(clt_ctx_tune(ctx)->source, "ignored"));
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "gemm16 NT small: not a kernel that takes"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_ctx_free(ctx);
    snprintf(text, sizeof text,
             "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", \"driver\": "
             "\"%s\", \"large_macs\": 0}",
             dev->device_name, dev->driver_version);
    ctx = ctx_with_file(path, text);
    ck_assert(tc_contains(clt_ctx_tune(ctx)->source, "ignored"));
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "large_macs"));
    clt_ctx_free(ctx);

    /* a missing file is no failure and no note */
    remove(path);
    ctx = ctx_with_file(path, NULL);
    struct clt_tune builtin;
    clt_tune_defaults(clt_ctx_device(ctx), &builtin); /* "built-in", or the database's entry */
    ck_assert_str_eq(clt_ctx_tune(ctx)->source, builtin.source);
    clt_ctx_free(ctx);

    /* the default path is in the program cache dir */
    unsetenv("CLTRAIN_TUNE_FILE");
    struct clt_ctx_params p = clt_ctx_default_params();
    p.cache_dir = dir;
    p.disk_cache = 1;
    ctx = tc_ctx_with(&p);
    char def_path[4200];
    TC_OK(ctx, clt_tune_path(ctx, def_path, sizeof def_path));
    ck_assert(strncmp(def_path, dir, strlen(dir)) == 0 && tc_contains(def_path, "/tune-"));
    clt_ctx_free(ctx);

    /* an unknown CLTRAIN_GEMM fails clt_ctx_create (tests/runtime/test_runtime.c); one set
     * after the ctx was created is a usage error at the first use of the GEMM choices */
    ctx = ctx_with_gemm(NULL);
    setenv("CLTRAIN_GEMM", "fastest", 1);
    ck_assert_ptr_null(clt_ctx_tune(ctx));
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "CLTRAIN_GEMM=\"fastest\""));
    clt_tensor *A = tc_tensor(ctx, CLT_DTYPE_F32, 4), *C = tc_tensor(ctx, CLT_DTYPE_F32, 4);
    ck_assert_int_eq(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, 2, 2, 2, 1, A, A, 0, C),
                     CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "expected own, clblast or auto"));
    clt_tensor_free(A);
    clt_tensor_free(C);
    clt_ctx_free(ctx);
    unsetenv("CLTRAIN_GEMM");
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

/* CLBlast's Xgemm parameters in the tuning data: every candidate of the tuner obeys Xgemm's
 * constraints and one that does not is refused with the reason; a file's "clblast_xgemm" round
 * trips, and a malformed one (a missing parameter, out of range, against the constraints)
 * makes the file ignored, naming the entry; with the smallest candidate applied, CLBlast's GEMM
 * (CLTRAIN_GEMM=clblast; at 448^3 it takes its indirect Xgemm path) matches the float64
 * reference (not under oclgrind: too slow there). */
START_TEST(test_xgemm_params)
{
    char dir[4096], path[4200], why[256];
    tc_rng r = tc_rng_for(__func__);
    int n = 0;
    const struct clt_xgemm_params *cand = clt_xgemm_candidates(&n);
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_msg(clt_xgemm_params_check(&cand[i], why, sizeof why) == CLT_OK,
                      "candidate %d: %s", i, why);
    struct clt_xgemm_params bad = cand[0];
    bad.v[6] = 48; /* MWG 48 with MDIMC 8 x VWM 2 = 16: fine; with VWM 4: 32 does not divide */
    bad.v[14] = 4;
    ck_assert_int_eq(clt_xgemm_params_check(&bad, why, sizeof why), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(why, "MWG"));

    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tune.json", dir);
    clt_ctx *ctx = ctx_with_file(path, NULL);
    struct clt_tune t;
    clt_tune_defaults(clt_ctx_device(ctx), &t);
    clt_ctx_free(ctx);
    t.xgemm = cand[0];
    ck_assert_int_eq(clt_tune_save(path, &t), CLT_OK);
    setenv("CLTRAIN_TUNE_FILE", path, 1);
    setenv("CLTRAIN_GEMM", "clblast", 1);
    ctx = gemm_ctx();
    const struct clt_tune *got = clt_ctx_tune(ctx);
    ck_assert_msg(tc_contains(got->source, path) && !tc_contains(got->source, "ignored"),
                  "source %s", got->source);
    ck_assert(got->xgemm.set && memcmp(got->xgemm.v, cand[0].v, sizeof cand[0].v) == 0);
    if (!tc_small()) {
        check_gemm(ctx, NULL, 0, 1, 448, 448, 448, 1.0f, 0.0f, &r, "CLBlast, Xgemm parameters");
        check_gemm(ctx, NULL, 1, 0, 448, 448, 448, 0.5f, 1.0f, &r, "CLBlast, Xgemm parameters");
    }
    clt_ctx_free(ctx);
    unsetenv("CLTRAIN_GEMM");

    /* malformed entries: the file is ignored with a note naming clblast_xgemm */
    const char *entries[] = {"{\"GEMMK\": 0}", "[1]", NULL};
    for (int e = 0; e < 3; e++) {
        char text[2048];
        int len = snprintf(text, sizeof text,
                           "{\"format\": \"cltrain-tune\", \"version\": 1, \"device\": \"%s\", "
                           "\"driver\": \"%s\", \"clblast_xgemm\": ",
                           t.device_name, t.driver_version);
        if (entries[e]) {
            snprintf(text + len, sizeof text - (size_t)len, "%s}", entries[e]);
        } else { /* every parameter, MWG against the constraints */
            len += snprintf(text + len, sizeof text - (size_t)len, "{");
            for (int k = 0; k < CLT_XGEMM_NPARAMS; k++)
                len += snprintf(text + len, sizeof text - (size_t)len, "%s\"%s\": %zu",
                                k ? ", " : "", clt_xgemm_param_names[k], bad.v[k]);
            snprintf(text + len, sizeof text - (size_t)len, "}}");
        }
        ctx = ctx_with_file(path, text);
        ck_assert_msg(tc_contains(clt_ctx_tune(ctx)->source, "ignored"), "entry %d", e);
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "clblast_xgemm"), "entry %d: %s", e,
                      clt_ctx_errmsg(ctx));
        ck_assert(!clt_ctx_tune(ctx)->xgemm.set);
        clt_ctx_free(ctx);
    }
    unsetenv("CLTRAIN_TUNE_FILE");
    tc_rmdir(dir);
    tc_assert_no_live();
}
END_TEST

/* The tuning database (tools/tunedb/, embedded): every entry is a valid tuning file for the
 * device and driver it names, and a device with that name and driver gets it as its built-in
 * data (source "built-in (tools/tunedb/NAME.json)"); any other device gets none. */
START_TEST(test_tunedb)
{
    clt_ctx *ctx = gemm_ctx();
    int entries = 0;
    for (const struct clt__cl_source *e = clt__tunedb; e->name; e++, entries++) {
        clt__json *root = NULL;
        clt__json_error jerr = {0};
        ck_assert_msg(clt__json_parse(&root, e->data, e->len, &jerr) == CLT_OK,
                      "tools/tunedb/%s.json: %s", e->name, jerr.msg);
        const clt__json *name = clt__json_get(root, "device"), *drv = clt__json_get(root, "driver");
        ck_assert(name && name->type == CLT__JSON_STRING && drv && drv->type == CLT__JSON_STRING);
        clt_device_info dev = *clt_ctx_device(ctx); /* this device's limits, the entry's name */
        snprintf(dev.device_name, sizeof dev.device_name, "%s", name->str);
        snprintf(dev.driver_version, sizeof dev.driver_version, "%s", drv->str);
        clt__json_free(root);
        struct clt_tune t;
        clt_tune_defaults(&dev, &t);
        char want[160];
        snprintf(want, sizeof want, "built-in (tools/tunedb/%s.json)", e->name);
        ck_assert_msg(strcmp(t.source, want) == 0, "%s: source \"%s\"", e->name, t.source);
        snprintf(dev.driver_version, sizeof dev.driver_version, "another driver");
        clt_tune_defaults(&dev, &t);
        ck_assert_str_eq(t.source, "built-in");
    }
    ck_assert_int_gt(entries, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_argument_checks)
{
    clt_ctx *ctx = ctx_with_gemm(NULL);
    clt_tensor *A = tc_tensor(ctx, CLT_DTYPE_F32, 12), *B = tc_tensor(ctx, CLT_DTYPE_F32, 12),
               *C = tc_tensor(ctx, CLT_DTYPE_F32, 9), *H = tc_tensor(ctx, CLT_DTYPE_I32, 12);
    ck_assert_int_eq(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, 1, A, B, 0, C), CLT_OK);
    ck_assert_int_eq(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 5, 1, A, B, 0, C),
                     CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "A holds 12"));
    ck_assert_int_eq(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, 1, H, B, 0, C),
                     CLT_ERR_SHAPE);
    struct clt_gemm_choice bad = {
        .kernel = CLT_GEMM_DIRECT, .tm = 4, .tn = 12, .vw = 8, .wgm = 1, .wgn = 1};
    ck_assert_int_eq(clt_op_gemm_with(&bad, CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, 1, A, B, 0, C),
                     CLT_ERR_INVALID_ARG);
    /* M = 0 or N = 0 is a no-op */
    ck_assert_int_eq(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, 0, 3, 4, 1, A, B, 0, C), CLT_OK);
    /* the backward epilogue: an activation, no bias or z, another tensor of C's dtype and
     * size */
    clt_tensor *S = tc_tensor(ctx, CLT_DTYPE_F32, 9), *S8 = tc_tensor(ctx, CLT_DTYPE_F32, 8);
    struct clt_gemm_epilogue e = {.act = CLT_ACT_RELU, .saved = S};
    ck_assert_int_eq(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, A, B, &e, C),
                     CLT_OK);
    e.bias = S;
    ck_assert_int_eq(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, A, B, &e, C),
                     CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "backward epilogue"));
    e.bias = NULL;
    e.act = -1;
    ck_assert_int_eq(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, A, B, &e, C),
                     CLT_ERR_INVALID_ARG);
    e.act = CLT_ACT_TANH;
    const clt_tensor *bad_saved[] = {S8, C, H};
    for (size_t i = 0; i < 3; i++) {
        e.saved = bad_saved[i];
        ck_assert_int_eq(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, 3, 3, 4, A, B, &e, C),
                         CLT_ERR_SHAPE);
        ck_assert(tc_contains(clt_ctx_errmsg(ctx), "saved must be"));
    }
    /* the weight gradient's sums: f32, one per row of C */
    clt_tensor *s3 = tc_tensor(ctx, CLT_DTYPE_F32, 3), *h3 = tc_tensor(ctx, CLT_DTYPE_I32, 3);
    TC_OK(ctx, clt_op_gemm_tn_sums(3, 3, 4, 1, A, B, 0, C, s3, 0));
    clt_tensor *bad_sums[] = {S8, h3};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(clt_op_gemm_tn_sums(3, 3, 4, 1, A, B, 0, C, bad_sums[i], 0),
                         CLT_ERR_SHAPE);
        ck_assert(tc_contains(clt_ctx_errmsg(ctx), "sums must be f32 with 3 elements"));
    }
    clt_tensor_free(s3);
    clt_tensor_free(h3);
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_SETUP));
    clt_tensor_free(S);
    clt_tensor_free(S8);
    clt_tensor_free(A);
    clt_tensor_free(B);
    clt_tensor_free(C);
    clt_tensor_free(H);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    /* One case per test, so that CK_RUN_CASE can pick one. */
    const struct {
        const char *name;
        const TTest *test;
    } tests[] = {{"parse", test_choice_parse_check},
                 {"checks", test_argument_checks},
                 {"own", test_own_path},
                 {"clblast", test_clblast_path},
                 {"variants", test_variants},
                 {"panel_chunks", test_panel_chunks},
                 {"panel_edges", test_panel_edges},
                 {"gemm_bias", test_gemm_bias},
                 {"gemm_epilogue", test_gemm_epilogue},
                 {"gemm_epilogue_backward", test_gemm_epilogue_backward},
                 {"gemm_tn_sums", test_gemm_tn_sums},
                 {"xgemm_params", test_xgemm_params},
                 {"tunedb", test_tunedb},
                 {"files", test_tune_files}};
    Suite *s = suite_create("gemm");
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        if (tests[i].test == test_panel_chunks && tc_small()) {
            tc_skip_case(tests[i].name, "too large for CLTRAIN_TEST_SMALL (oclgrind)");
            continue;
        }
        TCase *tc = tc_tcase(tests[i].name);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return tc_run(s);
}
