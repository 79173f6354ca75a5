/* The build options of every program the ops compile, in one place: the ops format their options
 * with these functions, and clt_ops_program_variants walks every combination they can produce
 * (dtypes, GEMM choices and layouts), so the kernel portability guard
 * (tests/portability/kernel_guard.py) compiles exactly what the library may build on a device. */
#include "ops/ops_internal.h"

#include "ops/tune_internal.h"

#include <stdio.h>
#include <string.h>

void clt__opts_dtype(char *dst, size_t n, clt_dtype x)
{
    snprintf(dst, n, "-DX_DTYPE=%d", (int)x);
}

void clt__opts_cast(char *dst, size_t n, clt_dtype src, clt_dtype dstd)
{
    snprintf(dst, n, "-DSRC_DTYPE=%d -DDST_DTYPE=%d", (int)src, (int)dstd);
}

void clt__opts_conv(char *dst, size_t n, clt_dtype src, clt_dtype dstd, bool wide)
{
    int len = snprintf(dst, n, "-DSRC_DTYPE=%d -DDST_DTYPE=%d", (int)src, (int)dstd);
    if (wide && len > 0 && (size_t)len < n) /* the implicit conv's AVX-512 block */
        snprintf(dst + len, n - (size_t)len, " -DCONV_V=16 -DCONV_TM=12 -DCONV_DW_TO=8");
}

void clt__opts_batchnorm(char *dst, size_t n, clt_dtype x, clt_dtype g)
{
    snprintf(dst, n, "-DX_DTYPE=%d -DG_DTYPE=%d", (int)x, (int)g);
}

void clt__opts_optim(char *dst, size_t n, clt_dtype copy)
{
    if (copy == CLT_DTYPE_F32)
        snprintf(dst, n, "%s", CLT__OPTS_OPTIM);
    else
        snprintf(dst, n, "%s -DCOPY_DTYPE=%d", CLT__OPTS_OPTIM, (int)copy);
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

const char *clt__gemm_program(const struct clt_gemm_choice *c, bool epi)
{
    return c->kernel == CLT_GEMM_PANEL ? "act_fn,gemm_panel" : epi ? "act_fn,gemm" : "gemm";
}

bool clt__gemm_fuses_epilogue(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb)
{
    (void)tb;
    if (c->kernel == CLT_GEMM_PANEL) return true;
    if (c->kernel == CLT_GEMM_TILED) return !ta; /* NN and NT: fewer programs to check */
    return c->kernel == CLT_GEMM_DIRECT && !ta;  /* NN and NT */
}

bool clt__gemm_sums_in_kernel(const struct clt_gemm_choice *c)
{
    return c->kernel == CLT_GEMM_DIRECT && !c->veck; /* the outer-product forms */
}

void clt__opts_gemm(char *dst, size_t n, const struct clt_gemm_choice *c, clt_trans ta,
                    clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd, int bias, bool epi)
{
    bool tiled = c->kernel == CLT_GEMM_TILED;
    int len;
    if (c->kernel == CLT_GEMM_PANEL)
        len = snprintf(dst, n,
                       "-DGEMM_TA=%d -DGEMM_TB=%d -DPANEL_MR=%d -DPANEL_NR=%d -DGEMM_VW=%d "
                       "-DGEMM_KB=%d -DGEMM_BM=%d -DGEMM_BN=%d -DPANEL_IA=%d -DPACK_KT=%d",
                       (int)ta, (int)tb, c->tm, c->tn, c->vw, c->kb, c->bm, c->bn, c->ia,
                       CLT__PANEL_PACK_KT);
    else
        len = snprintf(
        dst, n,
        "-DGEMM_TA=%d -DGEMM_TB=%d -DGEMM_TILED=%d -DGEMM_TM=%d -DGEMM_TN=%d -DGEMM_VW=%d "
        "-DGEMM_VECK=%d -DGEMM_MDIM=%d -DGEMM_WGM=%d -DGEMM_WGN=%d -DGEMM_KB=%d -DGEMM_BM=%d "
        "-DGEMM_BN=%d",
        (int)ta, (int)tb, tiled, c->tm, c->tn, tiled ? 1 : c->vw, tiled ? 0 : c->veck,
        tiled ? 0 : c->mdim, c->wgm, c->wgn, c->kb, tiled ? 1 : c->bm, tiled ? 1 : c->bn);
    /* all-f32 GEMMs have no dtype defines (the same programs as before 16-bit storage) */
    if (len > 0 && (size_t)len < n &&
        (a != CLT_DTYPE_F32 || b != CLT_DTYPE_F32 || cd != CLT_DTYPE_F32))
        len += snprintf(dst + len, n - (size_t)len,
                        " -DGEMM_A_DTYPE=%d -DGEMM_B_DTYPE=%d -DGEMM_C_DTYPE=%d", (int)a, (int)b,
                        (int)cd);
    if (len > 0 && (size_t)len < n && bias >= 0 && c->kernel == CLT_GEMM_PANEL)
        len += snprintf(dst + len, n - (size_t)len, " -DGEMM_BIAS=1 -DGEMM_BIAS_DTYPE=%d", bias);
    /* the direct and tiled kernels' epilogue (the direct kernel's bias is f32) */
    if (len > 0 && (size_t)len < n && epi && c->kernel != CLT_GEMM_PANEL)
        snprintf(dst + len, n - (size_t)len, " -DGEMM_EPI=1 -DGEMM_BIAS=%d -DGEMM_BIAS_DTYPE=%d",
                 bias >= 0, bias >= 0 ? bias : (int)CLT_DTYPE_F32);
}

/* ---- every variant ------------------------------------------------------------------------- */

static const clt_dtype all_dtypes[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16, CLT_DTYPE_I32,
                                       CLT_DTYPE_U8};
static const clt_dtype float_dtypes[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
#define COUNT(a) (sizeof(a) / sizeof *(a))

/* The operand dtypes a 16-bit-storage model may pass to a three-operand op: each operand f32
 * or the precision's 16-bit type, for fp16 and bf16 (the all-f32 case once). */
static int mixed_triples(clt_dtype out[][3])
{
    int n = 0;
    out[n][0] = out[n][1] = out[n][2] = CLT_DTYPE_F32;
    n++;
    const clt_dtype half[] = {CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t h = 0; h < COUNT(half); h++)
        for (int bits = 1; bits < 8; bits++) {
            for (int i = 0; i < 3; i++) out[n][i] = (bits >> i) & 1 ? half[h] : CLT_DTYPE_F32;
            n++;
        }
    return n;
}

/* The GEMM choices a ctx on dev may use: the tuner's table (any of which a tuning file may name,
 * for any layout with --all), the built-in own defaults, the 16-bit fallback and their narrowed
 * forms (clt__gemm_narrowed) and forms for a 16-bit op(A) (clt__gemm_for_a), each once, if it
 * fits dev. */
static int gemm_choices(const clt_device_info *dev, struct clt_gemm_choice *out, int cap)
{
    int nv = 0, n = 0;
    const struct clt_gemm_choice *table = clt_gemm_variants(&nv);
    struct clt_gemm_choice cand[128];
    int nc = 0;
    for (int i = 0; i < nv && nc < (int)COUNT(cand); i++) cand[nc++] = table[i];
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES && nc < (int)COUNT(cand); z++)
            cand[nc++] = clt_gemm_own_default(dev, (clt_gemm_layout)l, (clt_gemm_size)z);
    if (nc < (int)COUNT(cand)) cand[nc++] = clt__gemm_mixed_choice(dev);
    /* and what the dispatch narrows each of them to for narrow products */
    for (int i = 0, base = nc; i < base; i++)
        for (int N = cand[i].tn / 2; N >= 1 && nc < (int)COUNT(cand); N /= 2) {
            struct clt_gemm_choice nw = clt__gemm_narrowed(&cand[i], (size_t)N);
            if (nw.tn != cand[i].tn) cand[nc++] = nw;
        }
    for (int i = 0, base = nc; i < base && nc < (int)COUNT(cand); i++) {
        struct clt_gemm_choice a16 = clt__gemm_for_a(&cand[i], CLT_DTYPE_BF16);
        if (a16.ia != cand[i].ia) cand[nc++] = a16;
    }
    for (int i = 0; i < nc && n < cap; i++) {
        if (cand[i].kernel == CLT_GEMM_CLBLAST) continue;
        if (clt_gemm_choice_check(&cand[i], dev, NULL, 0) != CLT_OK) continue;
        char a[256], b[256];
        clt_gemm_choice_format(&cand[i], a, sizeof a);
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) {
            clt_gemm_choice_format(&out[j], b, sizeof b);
            seen = strcmp(a, b) == 0;
        }
        if (!seen) out[n++] = cand[i];
    }
    return n;
}

void clt_ops_program_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    char o[512];
    for (size_t i = 0; i < COUNT(all_dtypes); i++) {
        clt__opts_dtype(o, sizeof o, all_dtypes[i]);
        fn("elementwise", o, user);
    }
    for (size_t i = 0; i < COUNT(float_dtypes); i++)
        for (size_t j = 0; j < COUNT(float_dtypes); j++) {
            clt__opts_cast(o, sizeof o, float_dtypes[i], float_dtypes[j]);
            fn("cast", o, user);
            clt__opts_conv(o, sizeof o, float_dtypes[i], float_dtypes[j], false);
            fn("conv", o, user);
            if (i == 0 && j == 0) { /* the implicit forward (f32 only) with wide vectors */
                clt__opts_conv(o, sizeof o, float_dtypes[i], float_dtypes[j], true);
                fn("conv", o, user);
            }
            clt__opts_batchnorm(o, sizeof o, float_dtypes[i], float_dtypes[j]);
            fn("batchnorm", o, user);
        }
    for (size_t i = 0; i < COUNT(float_dtypes); i++) {
        clt__opts_dtype(o, sizeof o, float_dtypes[i]);
        fn("act_fn,activation", o, user);
        fn("rng,dropout", o, user);
        fn("pool", o, user);
    }
    const clt_dtype gathered[] = {CLT_DTYPE_U8, CLT_DTYPE_F32, CLT_DTYPE_I32};
    for (size_t i = 0; i < COUNT(gathered); i++) {
        clt__opts_dtype(o, sizeof o, gathered[i]);
        fn("gather", o, user);
    }
    fn("loss", "", user);
    fn("input", "", user);
    fn("amp", "", user);
    fn("rng,augment", "", user);
    for (size_t i = 0; i < COUNT(float_dtypes); i++) {
        clt__opts_optim(o, sizeof o, float_dtypes[i]);
        fn("optim", o, user);
    }

    clt_dtype triples[16][3]; /* [0] is all-f32 */
    int nt = mixed_triples(triples);
    for (int t = 0; t < nt; t++) {
        clt__opts_linear(o, sizeof o, triples[t][0], triples[t][1], triples[t][2]);
        fn("linear", o, user);
    }
    struct clt_gemm_choice choices[128];
    int nc = gemm_choices(dev, choices, (int)COUNT(choices));
    for (int c = 0; c < nc; c++)
        for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
            for (int t = 0; t < (clt__gemm_takes_16bit(&choices[c]) ? nt : 1); t++) {
                const clt_trans ta = (clt_trans)(l >> 1), tb = (clt_trans)(l & 1);
                if (clt__gemm_for_a(&choices[c], triples[t][0]).ia != choices[c].ia)
                    continue; /* never run: its packing form runs instead */
                clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0], triples[t][1],
                               triples[t][2], -1, false);
                fn(clt__gemm_program(&choices[c], false), o, user);
                if (choices[c].kernel == CLT_GEMM_PANEL) {
                    /* a linear layer's forward (NT) with its bias fused, stored as its weight */
                    if (l != CLT_GEMM_NT) continue;
                    clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0],
                                   triples[t][1], triples[t][2], (int)triples[t][1], false);
                    fn(clt__gemm_program(&choices[c], false), o, user);
                } else if (l == CLT_GEMM_TN && clt__gemm_sums_in_kernel(&choices[c])) {
                    /* a linear layer's weight gradient with its bias gradient's sums */
                    clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0], triples[t][1],
                                   triples[t][2], -1, true);
                    fn(clt__gemm_program(&choices[c], true), o, user);
                } else if (clt__gemm_fuses_epilogue(&choices[c], ta, tb)) {
                    /* the direct kernel with the epilogue, without and with an f32 bias; the
                     * tiled one and the direct one with 16-bit operands also with a bias
                     * stored as the weight */
                    const int wb = (int)triples[t][1];
                    const bool any_bias = choices[c].kernel == CLT_GEMM_TILED || t > 0;
                    const int biases[] = {-1, (int)CLT_DTYPE_F32, wb};
                    const int nbias = any_bias && wb != (int)CLT_DTYPE_F32 ? 3 : 2;
                    for (int i = 0; i < nbias; i++) {
                        clt__opts_gemm(o, sizeof o, &choices[c], ta, tb, triples[t][0],
                                       triples[t][1], triples[t][2], biases[i], true);
                        fn(clt__gemm_program(&choices[c], true), o, user);
                    }
                }
            }
}
