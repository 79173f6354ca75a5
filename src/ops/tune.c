/* Tuning data: the built-in GEMM choices per device type, the table of own-kernel variants the
 * tuner tries, validation of a choice against a device, the per-device JSON file (load, atomic
 * save, path) and the ctx's copy, read once at ctx creation with the CLTRAIN_GEMM override. */
#include "ops/tune_internal.h"

#include "runtime/ctx_internal.h"
#include "runtime/internal.h"
#include "io/json.h"

#include "cltrain/outfile.h"
#include "runtime/program_internal.h"

#include <clblast_c.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

const char *clt_gemm_kernel_name(clt_gemm_kernel k)
{
    switch (k) {
    case CLT_GEMM_CLBLAST:
        return "clblast";
    case CLT_GEMM_DIRECT:
        return "direct";
    case CLT_GEMM_TILED:
        return "tiled";
    case CLT_GEMM_PANEL:
        return "panel";
    }
    return "?";
}

const char *clt_gemm_layout_name(clt_gemm_layout l)
{
    static const char *names[] = {"NN", "NT", "TN", "TT"};
    return (unsigned)l < CLT_GEMM__LAYOUTS ? names[l] : "?";
}

const char *clt_gemm_size_name(clt_gemm_size s)
{
    return s == CLT_GEMM_SMALL ? "small" : s == CLT_GEMM_LARGE ? "large" : "?";
}

/* ---- choices ------------------------------------------------------------------------------ */

/* short names for the tables below (the constructors: tune_internal.h) */
#define DIRECT CLT_GEMM_CHOICE_DIRECT
#define PACKED CLT_GEMM_CHOICE_PACKED
#define TILED CLT_GEMM_CHOICE_TILED
#define PANEL CLT_GEMM_CHOICE_PANEL
#define PANEL_IA(tm_, tn_, vw_, kb_, bm_, bn_)                                                     \
    {                                                                                              \
        .kernel = CLT_GEMM_PANEL, .tm = tm_, .tn = tn_, .vw = vw_, .wgm = 1, .wgn = 1, .kb = kb_,  \
        .bm = bm_, .bn = bn_, .ia = 1                                                              \
    }

/* What the tuner tries on every device (clt_gemm_variant_applies says for which layouts).
 * Direct variants vectorise along N (outer products: NN and TN, and NT too when they pack)
 * or along K (dot products: NT); on a CPU the register block is what matters, 16-wide
 * vectors for AVX-512, 8-wide for AVX2. Tiled variants are the GPU family. */
static const struct clt_gemm_choice variants[] = {
    /* outer products, operands read in place */
    DIRECT(8, 32, 16, 0, 1, 1),
    DIRECT(6, 32, 16, 0, 1, 1),
    DIRECT(4, 64, 16, 0, 1, 1),
    DIRECT(6, 16, 8, 0, 1, 1), /* AVX2-sized: 12 + 3 of 16 ymm registers */
    /* outer products over packed slices */
    PACKED(8, 32, 16, 64, 8, 2),
    PACKED(8, 32, 16, 128, 4, 2),
    PACKED(6, 16, 8, 128, 4, 4),
    /* micro-tiles over operands packed into the workspace; with 16-wide vectors the sums
     * stay in registers over 1024 k (C read and written once per 1024: 3-8 % faster than
     * per 256 on 2 AVX-512 cores, commit bf0964c) */
    PANEL(8, 32, 16, 1024, 4, 2),
    PANEL(12, 32, 16, 1024, 4, 2),
    PANEL(6, 64, 16, 1024, 8, 1),
    PANEL(6, 16, 8, 256, 4, 4), /* AVX2-sized */
    PANEL_IA(12, 32, 16, 1024, 4, 2), /* op(A) read in place: no pass over it */
    PANEL_IA(6, 64, 16, 1024, 8, 1),
    PANEL_IA(6, 16, 8, 256, 4, 4),
    /* dot products */
    DIRECT(4, 4, 16, 1, 2, 4), /* in groups of 8: PoCL schedules each group alone */
    DIRECT(3, 6, 16, 1, 1, 1),
    DIRECT(2, 8, 16, 1, 1, 1),
    DIRECT(4, 4, 8, 1, 1, 1),
    DIRECT(2, 4, 8, 1, 1, 1), /* AVX2-sized: 8 + 6 of 16 ymm registers */
    /* local-memory tiles */
    TILED(16, 16, 4, 4, 16),
    TILED(16, 16, 8, 8, 16),
    TILED(8, 8, 4, 4, 16),
    TILED(16, 16, 4, 8, 32),
};

const struct clt_gemm_choice *clt_gemm_variants(int *n)
{
    *n = (int)(sizeof variants / sizeof *variants);
    return variants;
}

bool clt_gemm_variant_applies(const struct clt_gemm_choice *c, clt_gemm_layout l,
                              const clt_device_info *dev)
{
    if (clt_gemm_choice_check(c, dev, NULL, 0) != CLT_OK) return false;
    if (c->kernel == CLT_GEMM_TILED) return dev->type != CLT_DEVICE_CPU;
    if (c->kernel == CLT_GEMM_PANEL) return dev->type == CLT_DEVICE_CPU; /* every layout */
    if (c->kernel != CLT_GEMM_DIRECT) return false;
    if (c->veck) return l == CLT_GEMM_NT;
    /* packing gathers op(B)'s columns once per slice, so it serves NT as well */
    return l == CLT_GEMM_NN || l == CLT_GEMM_TN || (c->kb > 0 && l == CLT_GEMM_NT);
}

static const struct clt_gemm_choice clblast_choice = {.kernel = CLT_GEMM_CLBLAST};

struct clt_gemm_choice clt_gemm_own_default(const clt_device_info *dev, clt_gemm_layout l,
                                            clt_gemm_size s)
{
    if (dev->type == CLT_DEVICE_CPU) {
        /* Measured on PoCL 3.1, 2-core AVX-512 (BENCHMARKS.md, "GEMM against OpenBLAS";
         * commits a2a9fc9 and dbf32f3): dot products for small NT, outer products in place for small NN
         * and TN; the panel family (operands packed once into the workspace) for large ones
         * of every layout and for TT. The dot products run in groups of 2 x 4 work-items (PoCL
         * schedules each group alone).
         * Register blocks sized for 32 registers of 16 floats; a CPU with narrower native
         * vectors (AVX2: 16 of 8) gets blocks that fit its 16 registers. */
        cl_uint native = 16;
        if (dev->device && clGetDeviceInfo(dev->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT,
                                           sizeof native, &native, NULL) != CL_SUCCESS)
            native = 16;
        bool wide = native >= 16;
        const struct clt_gemm_choice dot = DIRECT(4, 4, 16, 1, 2, 4),
                                     outer = DIRECT(4, 64, 16, 0, 1, 1),
                                     panel = PANEL(12, 32, 16, 1024, 4, 2),
                                     panel_ia = PANEL_IA(6, 64, 16, 1024, 8, 1),
                                     dot8 = DIRECT(2, 4, 8, 1, 1, 1),
                                     outer8 = DIRECT(6, 16, 8, 0, 1, 1),
                                     panel8 = PANEL(6, 16, 8, 256, 4, 4);
        /* op(A) in place for NN and NT (row-major rows: activations, im2col matrices), packed
         * for TN and TT, whose op(A) = A^T steps over a power-of-two stride for every k */
        if ((l == CLT_GEMM_NN || l == CLT_GEMM_NT) && s == CLT_GEMM_LARGE && wide) return panel_ia;
        if (l == CLT_GEMM_TT || s == CLT_GEMM_LARGE) return wide ? panel : panel8;
        if (l == CLT_GEMM_NT) return wide ? dot : dot8;
        return wide ? outer : outer8;
    }
    const struct clt_gemm_choice tiled[] = {TILED(16, 16, 4, 4, 16), TILED(8, 8, 4, 4, 16),
                                            TILED(4, 4, 2, 2, 8)};
    for (size_t i = 0; i < sizeof tiled / sizeof *tiled; i++)
        if (clt_gemm_choice_check(&tiled[i], dev, NULL, 0) == CLT_OK) return tiled[i];
    const struct clt_gemm_choice one = DIRECT(1, 1, 1, 0, 1, 1);
    return one;
}

/* gemm16[l][z] from gemm[l][z]: the f32 choice where it takes 16-bit operands, else the
 * device's 16-bit fallback (what a file without "gemm16" means). */
static void derive16(const clt_device_info *dev, struct clt_tune *t, int l, int z)
{
    t->gemm16[l][z] = clt__gemm_takes_16bit(&t->gemm[l][z]) ? t->gemm[l][z]
                                                             : clt__gemm_mixed_choice(dev);
    t->gemm16_gflops[l][z] = 0.0;
}

void clt_tune_derive16(const clt_device_info *dev, struct clt_tune *t)
{
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++) derive16(dev, t, l, z);
}

static void builtin_defaults(const clt_device_info *dev, struct clt_tune *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->device_name, sizeof out->device_name, "%s", dev->device_name);
    snprintf(out->driver_version, sizeof out->driver_version, "%s", dev->driver_version);
    out->gemm_large_macs = CLT_GEMM_LARGE_MACS_DEFAULT;
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            out->gemm[l][z] = dev->type == CLT_DEVICE_CPU
                                  ? clt_gemm_own_default(dev, (clt_gemm_layout)l, (clt_gemm_size)z)
                                  : clblast_choice;
    clt_tune_derive16(dev, out);
    snprintf(out->source, sizeof out->source, "built-in");
}

static clt_status bad_choice(char *why, size_t n, const char *msg)
{
    if (why && n) snprintf(why, n, "%s", msg);
    return CLT_ERR_INVALID_ARG;
}

clt_status clt_gemm_choice_check(const struct clt_gemm_choice *c, const clt_device_info *dev,
                                 char *why, size_t why_len)
{
    if (c->kernel == CLT_GEMM_CLBLAST) return CLT_OK;
    if (c->kernel == CLT_GEMM_TILED && (c->bm != 1 || c->bn != 1))
        return bad_choice(why, why_len, "tiled: bm and bn must be 1");
    if (c->kernel != CLT_GEMM_DIRECT && c->kernel != CLT_GEMM_TILED &&
        c->kernel != CLT_GEMM_PANEL)
        return bad_choice(why, why_len, "unknown kernel");
    if (c->kernel == CLT_GEMM_PANEL) {
        if (c->vw != 4 && c->vw != 8 && c->vw != 16)
            return bad_choice(why, why_len, "panel: vw must be 4, 8 or 16");
        if (c->tm < 1 || c->tm > 16 || c->tn < c->vw || c->tn > 64 || c->tn % c->vw != 0)
            return bad_choice(why, why_len,
                              "panel: tm must be in [1, 16], tn a multiple of vw up to 64");
        if (c->kb < 1 || c->kb > 4096) return bad_choice(why, why_len, "panel: kb in [1, 4096]");
        if (c->bm < 1 || c->bn < 1 || c->bm > 64 || c->bn > 64)
            return bad_choice(why, why_len, "bm and bn must be in [1, 64]");
        if (c->veck != 0 || c->mdim != 0 || c->wgm != 1 || c->wgn != 1)
            return bad_choice(why, why_len, "panel: veck and mdim 0, work-groups 1x1");
        if (c->ia != 0 && c->ia != 1) return bad_choice(why, why_len, "panel: ia must be 0 or 1");
        return CLT_OK;
    }
    if (c->tm < 1 || c->tm > 16 || c->tn < 1 || c->tn > 64)
        return bad_choice(why, why_len, "tm must be in [1, 16] and tn in [1, 64]");
    if (c->wgm < 1 || c->wgn < 1 || c->wgm > 1024 || c->wgn > 1024)
        return bad_choice(why, why_len, "wgm and wgn must be in [1, 1024]");
    size_t wg = (size_t)c->wgm * (size_t)c->wgn;
    if (dev && dev->max_work_group > 0 && wg > dev->max_work_group)
        return bad_choice(why, why_len, "work-group larger than the device allows");
    if (c->kernel == CLT_GEMM_DIRECT) {
        if (c->vw != 1 && c->vw != 2 && c->vw != 4 && c->vw != 8 && c->vw != 16)
            return bad_choice(why, why_len, "vw must be 1, 2, 4, 8 or 16");
        if (c->veck != 0 && c->veck != 1) return bad_choice(why, why_len, "veck must be 0 or 1");
        if (c->mdim != 0 && c->mdim != 1) return bad_choice(why, why_len, "mdim must be 0 or 1");
        if (!c->veck && c->tn % c->vw != 0)
            return bad_choice(why, why_len, "tn must be a multiple of vw when veck is 0");
        if (c->veck && c->tm * c->tn > 64)
            return bad_choice(why, why_len, "tm * tn must be at most 64 when veck is 1");
        if (c->kb < 0 || c->kb > 1024) return bad_choice(why, why_len, "kb must be in [0, 1024]");
        if (c->bm < 1 || c->bn < 1 || c->bm > 64 || c->bn > 64)
            return bad_choice(why, why_len, "bm and bn must be in [1, 64]");
        if (c->kb == 0 && (c->bm != 1 || c->bn != 1))
            return bad_choice(why, why_len, "bm and bn must be 1 without packing (kb 0)");
        if (c->kb > 0 && c->veck) return bad_choice(why, why_len, "packing (kb > 0) needs veck 0");
        if ((uint64_t)c->kb * (uint64_t)(c->bm * c->tm + c->bn * c->tn) * sizeof(float) > 262144)
            return bad_choice(why, why_len, "packed slices must fit 256 KiB of private memory");
    } else {
        if (c->tm > 16 || c->tn > 16) return bad_choice(why, why_len, "tiled: tm, tn <= 16");
        if (c->kb < 1 || c->kb > 128) return bad_choice(why, why_len, "kb must be in [1, 128]");
        uint64_t local = 2 * (uint64_t)c->kb * /* two slices of each: double buffering */
                         ((uint64_t)c->wgm * (uint64_t)c->tm + (uint64_t)c->wgn * (uint64_t)c->tn +
                          2) *
                         sizeof(float);
        if (dev && dev->local_mem > 0 && local > dev->local_mem)
            return bad_choice(why, why_len, "tiles larger than the device's local memory");
    }
    return CLT_OK;
}

void clt_gemm_choice_format(const struct clt_gemm_choice *c, char *dst, size_t n)
{
    switch (c->kernel) {
    case CLT_GEMM_DIRECT:
        if (c->kb > 0)
            snprintf(dst, n, "direct tm%d tn%d vw%d veck%d mdim%d wg%dx%d kb%d bm%d bn%d", c->tm,
                     c->tn, c->vw, c->veck, c->mdim, c->wgm, c->wgn, c->kb, c->bm, c->bn);
        else
            snprintf(dst, n, "direct tm%d tn%d vw%d veck%d mdim%d wg%dx%d", c->tm, c->tn, c->vw,
                     c->veck, c->mdim, c->wgm, c->wgn);
        break;
    case CLT_GEMM_TILED:
        snprintf(dst, n, "tiled wg%dx%d tm%d tn%d kb%d", c->wgm, c->wgn, c->tm, c->tn, c->kb);
        break;
    case CLT_GEMM_PANEL:
        snprintf(dst, n, "panel tm%d tn%d vw%d kb%d bm%d bn%d%s", c->tm, c->tn, c->vw, c->kb,
                 c->bm, c->bn, c->ia ? " ia1" : "");
        break;
    default:
        snprintf(dst, n, "%s", clt_gemm_kernel_name(c->kernel));
        break;
    }
}

clt_status clt_gemm_choice_parse(const char *s, struct clt_gemm_choice *out)
{
    struct clt_gemm_choice c = {.kernel = CLT_GEMM_DIRECT,
                                .tm = 4,
                                .tn = 16,
                                .vw = 4,
                                .veck = 0,
                                .mdim = 0,
                                .wgm = 1,
                                .wgn = 1,
                                .kb = 0,
                                .bm = 1,
                                .bn = 1};
    const char *text = s;
    char word[32];
    int used = 0;
    if (sscanf(s, " %31s%n", word, &used) != 1) goto bad;
    if (strcmp(word, "clblast") == 0)
        c = clblast_choice;
    else if (strcmp(word, "tiled") == 0) {
        c.kernel = CLT_GEMM_TILED;
        c.tm = c.tn = 4;
        c.vw = 1;
        c.wgm = c.wgn = 8;
        c.kb = 16;
    } else if (strcmp(word, "panel") == 0) {
        const struct clt_gemm_choice panel = PANEL(8, 32, 16, 256, 4, 2);
        c = panel;
    } else if (strcmp(word, "direct") != 0)
        goto bad;
    for (s += used; sscanf(s, " %31s%n", word, &used) == 1; s += used) {
        /* key letters, then a number in [0, 4096] by the strict parser ("wg" takes MxN) */
        char *num = word + strcspn(word, "0123456789+-"), *x = strchr(num, 'x');
        int64_t v = 0, v2 = 0;
        size_t klen = (size_t)(num - word);
        if (c.kernel == CLT_GEMM_CLBLAST) goto bad;
        if (klen == 2 && strncmp(word, "wg", 2) == 0 && x) {
            *x = '\0';
            if (!clt__parse_i64(num, 0, 4096, &v) || !clt__parse_i64(x + 1, 0, 4096, &v2))
                goto bad;
            c.wgm = (int)v;
            c.wgn = (int)v2;
            continue;
        }
        if (!clt__parse_i64(num, 0, 4096, &v)) goto bad;
        if (klen == 2 && strncmp(word, "tm", 2) == 0)
            c.tm = (int)v;
        else if (klen == 2 && strncmp(word, "tn", 2) == 0)
            c.tn = (int)v;
        else if (klen == 2 && strncmp(word, "vw", 2) == 0)
            c.vw = (int)v;
        else if (klen == 4 && strncmp(word, "veck", 4) == 0)
            c.veck = (int)v;
        else if (klen == 4 && strncmp(word, "mdim", 4) == 0)
            c.mdim = (int)v;
        else if (klen == 2 && strncmp(word, "kb", 2) == 0)
            c.kb = (int)v;
        else if (klen == 2 && strncmp(word, "bm", 2) == 0)
            c.bm = (int)v;
        else if (klen == 2 && strncmp(word, "bn", 2) == 0)
            c.bn = (int)v;
        else if (klen == 2 && strncmp(word, "ia", 2) == 0)
            c.ia = (int)v;
        else
            goto bad;
    }
    *out = c;
    return CLT_OK;
bad:
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "GEMM choice \"%s\": expected e.g. \"clblast\", \"direct tm4 tn32 vw16 "
                     "veck0 mdim0 wg1x1\", \"panel tm8 tn32 vw16 kb256 bm4 bn2\" or \"tiled "
                     "wg16x16 tm4 tn4 kb16\"",
                     text);
}

/* ---- CLBlast's Xgemm ---------------------------------------------------------------------- */

const char *const clt_xgemm_param_names[CLT_XGEMM_NPARAMS] = {
    "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
    "NDIMC", "NWG",  "SA",  "SB",  "STRM",  "STRN",  "VWM", "VWN"};
enum { XG_GEMMK, XG_KREG, XG_KWG, XG_KWI, XG_MDIMA, XG_MDIMC, XG_MWG, XG_NDIMB, XG_NDIMC, XG_NWG,
       XG_SA, XG_SB, XG_STRM, XG_STRN, XG_VWM, XG_VWN };

clt_status clt_xgemm_params_check(const struct clt_xgemm_params *p, char *why, size_t why_len)
{
    const size_t *v = p->v;
    for (int i = 0; i < CLT_XGEMM_NPARAMS; i++)
        if (v[i] > 1024) return bad_choice(why, why_len, "Xgemm parameters must be at most 1024");
    if (v[XG_GEMMK] != 0 || v[XG_KREG] != 1)
        return bad_choice(why, why_len, "Xgemm: GEMMK 0 and KREG 1 (the 2-D register tiles)");
    for (int i = XG_SA; i <= XG_STRN; i++)
        if (v[i] > 1) return bad_choice(why, why_len, "Xgemm: SA, SB, STRM and STRN are 0 or 1");
    for (int i = XG_VWM; i <= XG_VWN; i++)
        if (v[i] != 1 && v[i] != 2 && v[i] != 4 && v[i] != 8)
            return bad_choice(why, why_len, "Xgemm: VWM and VWN are 1, 2, 4 or 8");
    if (!v[XG_KWG] || !v[XG_KWI] || !v[XG_MDIMA] || !v[XG_MDIMC] || !v[XG_MWG] || !v[XG_NDIMB] ||
        !v[XG_NDIMC] || !v[XG_NWG])
        return bad_choice(why, why_len, "Xgemm: sizes must be positive");
    const size_t wg = v[XG_MDIMC] * v[XG_NDIMC];
    if (v[XG_MWG] % (v[XG_MDIMC] * v[XG_VWM]) || v[XG_MWG] % (v[XG_MDIMA] * v[XG_VWM]) ||
        v[XG_NWG] % (v[XG_NDIMC] * v[XG_VWN]) || v[XG_NWG] % (v[XG_NDIMB] * v[XG_VWN]) ||
        v[XG_KWG] % v[XG_KWI] || wg % v[XG_MDIMA] || wg % v[XG_NDIMB] ||
        v[XG_KWG] % (wg / v[XG_MDIMA]) || v[XG_KWG] % (wg / v[XG_NDIMB]))
        return bad_choice(why, why_len,
                          "Xgemm: MWG, NWG and KWG must divide into the thread and vector "
                          "tiles (CLBlast's constraints)");
    return CLT_OK;
}

/* Xgemm configurations in the range CLBlast's own tuner explores, from small work-groups (CPUs,
 * small GPUs) to 128 x 128 tiles with local memory for both operands (large GPUs). */
static const struct clt_xgemm_params xgemm_candidates[] = {
    /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
    {true, {0, 1, 16, 2, 8, 8, 32, 8, 8, 32, 0, 0, 0, 0, 2, 2}},
    {true, {0, 1, 32, 2, 16, 16, 64, 16, 16, 64, 1, 1, 0, 0, 2, 2}},
    {true, {0, 1, 16, 2, 16, 16, 64, 16, 16, 64, 1, 1, 1, 1, 4, 4}},
    {true, {0, 1, 32, 2, 16, 16, 128, 16, 16, 128, 1, 1, 1, 1, 4, 4}},
    {true, {0, 1, 32, 2, 8, 8, 64, 16, 16, 128, 1, 1, 0, 0, 2, 4}},
    {true, {0, 1, 16, 8, 32, 8, 64, 8, 16, 64, 0, 0, 1, 0, 2, 2}},
};

const struct clt_xgemm_params *clt_xgemm_candidates(int *n)
{
    *n = (int)(sizeof xgemm_candidates / sizeof *xgemm_candidates);
    return xgemm_candidates;
}

/* ---- file --------------------------------------------------------------------------------- */

#define TUNE_FORMAT "cltrain-tune"
#define TUNE_VERSION 1

static bool get_int(const clt__json *obj, const char *key, int lo, int hi, int *out)
{
    const clt__json *v = clt__json_get(obj, key);
    if (!v || v->type != CLT__JSON_NUMBER || !v->is_int || v->integer < lo || v->integer > hi)
        return false;
    *out = (int)v->integer;
    return true;
}

/* One layout's entry: {"kernel": "direct", "tm": 4, ...}. */
static clt_status parse_choice(const clt__json *o, const clt_device_info *dev,
                               struct clt_gemm_choice *c, double *gflops, char *why, size_t n)
{
    const clt__json *k = clt__json_get(o, "kernel");
    memset(c, 0, sizeof *c);
    if (o->type != CLT__JSON_OBJECT || !k || k->type != CLT__JSON_STRING)
        return bad_choice(why, n, "an entry must be an object with a \"kernel\" string");
    if (strcmp(k->str, "clblast") == 0)
        c->kernel = CLT_GEMM_CLBLAST;
    else if (strcmp(k->str, "direct") == 0)
        c->kernel = CLT_GEMM_DIRECT;
    else if (strcmp(k->str, "tiled") == 0)
        c->kernel = CLT_GEMM_TILED;
    else if (strcmp(k->str, "panel") == 0)
        c->kernel = CLT_GEMM_PANEL;
    else
        return bad_choice(why, n, "unknown kernel");
    const clt__json *g = clt__json_get(o, "gflops");
    *gflops = g && g->type == CLT__JSON_NUMBER && g->number >= 0 ? g->number : 0.0;
    if (c->kernel == CLT_GEMM_CLBLAST) return CLT_OK;
    int wide = 1 << 20;
    if (!get_int(o, "tm", 0, wide, &c->tm) || !get_int(o, "tn", 0, wide, &c->tn) ||
        !get_int(o, "vw", 0, wide, &c->vw) || !get_int(o, "veck", 0, wide, &c->veck) ||
        !get_int(o, "mdim", 0, wide, &c->mdim) || !get_int(o, "wgm", 0, wide, &c->wgm) ||
        !get_int(o, "wgn", 0, wide, &c->wgn) || !get_int(o, "kb", 0, wide, &c->kb))
        return bad_choice(why, n,
                          "tm, tn, vw, veck, mdim, wgm, wgn and kb must be small "
                          "non-negative integers");
    c->bm = c->bn = 1; /* optional */
    if ((clt__json_get(o, "bm") && !get_int(o, "bm", 0, wide, &c->bm)) ||
        (clt__json_get(o, "bn") && !get_int(o, "bn", 0, wide, &c->bn)))
        return bad_choice(why, n, "bm and bn must be small non-negative integers");
    if (clt__json_get(o, "ia") && !get_int(o, "ia", 0, wide, &c->ia)) /* optional, 0 */
        return bad_choice(why, n, "ia must be 0 or 1");
    return clt_gemm_choice_check(c, dev, why, n);
}

/* A section of choices per layout and size class ("gemm" or "gemm16": {"NN": {"small":
 * CHOICE, "large": CHOICE}, or one CHOICE for both, ...}) into choices and gflops, entries it
 * does not give left as they are; `given` (if non-NULL) marks the ones it gives. b16: each must
 * take 16-bit operands. The statuses of clt_tune_load. */
static clt_status parse_section(const clt__json *sec, const char *name, const char *path,
                                const clt_device_info *dev, bool b16,
                                struct clt_gemm_choice choices[][CLT_GEMM__SIZES],
                                double gflops[][CLT_GEMM__SIZES],
                                bool given[][CLT_GEMM__SIZES])
{
    clt_status st = CLT_OK;
    char why[128];
    if (sec->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: \"%s\" must be an object", path, name);
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++) {
        const char *lname = clt_gemm_layout_name((clt_gemm_layout)l);
        const clt__json *e = clt__json_get(sec, lname);
        if (!e) continue; /* keep the defaults */
        if (e->type != CLT__JSON_OBJECT)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: %s %s must be an object", path,
                     name, lname);
        for (int z = 0; z < CLT_GEMM__SIZES; z++) {
            /* {"small": CHOICE, "large": CHOICE}, or one CHOICE for both */
            const clt__json *ez = clt__json_get(e, "kernel")
                                      ? e
                                      : clt__json_get(e, clt_gemm_size_name((clt_gemm_size)z));
            if (!ez) continue;
            const char *zname = clt_gemm_size_name((clt_gemm_size)z);
            struct clt_gemm_choice c;
            if (parse_choice(ez, dev, &c, &gflops[l][z], why, sizeof why) != CLT_OK)
                CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: %s %s %s: %s", path, name, lname,
                         zname, why);
            if (b16 && !clt__gemm_takes_16bit(&c))
                CLT_FAIL(NULL, CLT_ERR_FORMAT,
                         "tuning file %s: %s %s %s: not a kernel that takes 16-bit operands",
                         path, name, lname, zname);
            choices[l][z] = c;
            if (given) given[l][z] = true;
        }
    }
fail:
    return st;
}

/* The tuning data of text (a tuning file's content, `path` naming it in messages) over *base:
 * what the file gives replaces base's. The statuses of clt_tune_load. */
static clt_status tune_parse(const char *text, size_t len, const char *path,
                             const clt_device_info *dev, const struct clt_tune *base,
                             struct clt_tune *out)
{
    clt_status st = CLT_OK;
    char why[128];
    clt__json *root = NULL;
    clt__json_error jerr = {0};
    struct clt_tune t = *base;
    st = clt__json_parse(&root, text, len, &jerr);
    if (st == CLT_ERR_HOST_MEMORY) CLT_FAIL(NULL, st, "tuning file %s: out of host memory", path);
    if (st != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: malformed JSON at byte %zu: %s", path,
                 jerr.pos, jerr.msg);
    const clt__json *fmt = clt__json_get(root, "format"), *dname = clt__json_get(root, "device"),
                    *drv = clt__json_get(root, "driver"), *gemm = clt__json_get(root, "gemm");
    int version = 0;
    if (!fmt || fmt->type != CLT__JSON_STRING || strcmp(fmt->str, TUNE_FORMAT) != 0 ||
        !get_int(root, "version", 0, 1 << 20, &version))
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: not a cltrain tuning file", path);
    if (version != TUNE_VERSION)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: version %d, this cltrain reads %d", path,
                 version, TUNE_VERSION);
    if (!dname || dname->type != CLT__JSON_STRING || !drv || drv->type != CLT__JSON_STRING)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: \"device\" and \"driver\" missing", path);
    if (strcmp(dname->str, dev->device_name) != 0 || strcmp(drv->str, dev->driver_version) != 0)
        CLT_FAIL(NULL, CLT_ERR_UNSUPPORTED,
                 "tuning file %s is for \"%s\" (driver %s), not \"%s\" (driver %s)", path,
                 dname->str, drv->str, dev->device_name, dev->driver_version);
    const clt__json *large = clt__json_get(root, "large_macs");
    if (large) {
        if (large->type != CLT__JSON_NUMBER || !large->is_int || large->integer < 1)
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "tuning file %s: \"large_macs\" must be a positive "
                     "integer",
                     path);
        t.gemm_large_macs = (uint64_t)large->integer;
    }
    bool given[CLT_GEMM__LAYOUTS][CLT_GEMM__SIZES] = {{false}};
    if (gemm) CLT_TRY(parse_section(gemm, "gemm", path, dev, false, t.gemm, t.gemm_gflops, given));
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++) /* a file without "gemm16" (older cltrain) */
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            if (given[l][z]) derive16(dev, &t, l, z);
    const clt__json *gemm16 = clt__json_get(root, "gemm16");
    if (gemm16)
        CLT_TRY(parse_section(gemm16, "gemm16", path, dev, true, t.gemm16, t.gemm16_gflops,
                              NULL));
    const clt__json *xg = clt__json_get(root, "clblast_xgemm");
    if (xg) { /* {"GEMMK": 0, "KREG": 1, ...}: every parameter */
        if (xg->type != CLT__JSON_OBJECT)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: \"clblast_xgemm\" must be an object",
                     path);
        for (int i = 0; i < CLT_XGEMM_NPARAMS; i++) {
            int v = 0;
            if (!get_int(xg, clt_xgemm_param_names[i], 0, 1024, &v))
                CLT_FAIL(NULL, CLT_ERR_FORMAT,
                         "tuning file %s: clblast_xgemm: %s must be an integer in [0, 1024]",
                         path, clt_xgemm_param_names[i]);
            t.xgemm.v[i] = (size_t)v;
        }
        t.xgemm.set = true;
        if (clt_xgemm_params_check(&t.xgemm, why, sizeof why) != CLT_OK)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "tuning file %s: clblast_xgemm: %s", path, why);
    }
    snprintf(t.source, sizeof t.source, "%s", path);
    *out = t;
fail:
    clt__json_free(root);
    return st;
}

void clt_tune_defaults(const clt_device_info *dev, struct clt_tune *out)
{
    builtin_defaults(dev, out);
    /* The database's entry for this device and driver, if one was measured: the entries are
     * cltrain-tune's files, so a match contains the two lines it writes for them (checked
     * before parsing, which would record a message for every other device). */
    clt__json_buf key = {0};
    clt__json_buf_puts(&key, "\"device\": ");
    clt__json_buf_string(&key, dev->device_name, strlen(dev->device_name));
    clt__json_buf_puts(&key, ",\n  \"driver\": ");
    clt__json_buf_string(&key, dev->driver_version, strlen(dev->driver_version));
    clt__json_buf_puts(&key, ",");
    for (const struct clt__cl_source *e = clt__tunedb; !key.failed && e->name; e++) {
        struct clt_tune t, base = *out;
        char what[160];
        if (!strstr(e->data, key.data)) continue;
        snprintf(what, sizeof what, "tools/tunedb/%s.json", e->name);
        if (tune_parse(e->data, e->len, what, dev, &base, &t) != CLT_OK) continue;
        *out = t;
        snprintf(out->source, sizeof out->source, "built-in (%s)", what);
        break;
    }
    clt__json_buf_free(&key);
}

clt_status clt_tune_load(const char *path, const clt_device_info *dev, struct clt_tune *out)
{
    clt_status st = CLT_OK;
    size_t len = 0;
    char *text = NULL;
    struct clt_tune base;
    clt_tune_defaults(dev, &base);
    *out = base;
    if (!(text = clt__read_file(path, (size_t)1 << 24, &len)))
        CLT_FAIL(NULL, CLT_ERR_IO, "tuning file %s: cannot read it (%s)", path, strerror(errno));
    st = tune_parse(text, len, path, dev, &base, out);
    if (st != CLT_OK) *out = base;
fail:
    free(text);
    return st;
}

/* ",\n  \"NAME\": {...}": a section of choices per layout and size class. */
static void put_section(clt__json_buf *b, const char *name,
                        const struct clt_gemm_choice choices[][CLT_GEMM__SIZES],
                        const double gflops[][CLT_GEMM__SIZES])
{
    clt__json_buf_printf(b, ",\n  \"%s\": {", name);
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++) {
        clt__json_buf_printf(b, "%s\n    \"%s\": {", l ? "," : "",
                             clt_gemm_layout_name((clt_gemm_layout)l));
        for (int z = 0; z < CLT_GEMM__SIZES; z++) {
            const struct clt_gemm_choice *c = &choices[l][z];
            clt__json_buf_printf(b, "%s\n      \"%s\": {\"kernel\": \"%s\"", z ? "," : "",
                                 clt_gemm_size_name((clt_gemm_size)z),
                                 clt_gemm_kernel_name(c->kernel));
            if (c->kernel != CLT_GEMM_CLBLAST)
                clt__json_buf_printf(b,
                                     ", \"tm\": %d, \"tn\": %d, \"vw\": %d, \"veck\": %d, "
                                     "\"mdim\": %d, \"wgm\": %d, \"wgn\": %d, \"kb\": %d, "
                                     "\"bm\": %d, \"bn\": %d",
                                     c->tm, c->tn, c->vw, c->veck, c->mdim, c->wgm, c->wgn, c->kb,
                                     c->bm, c->bn);
            if (c->kernel == CLT_GEMM_PANEL && c->ia) clt__json_buf_puts(b, ", \"ia\": 1");
            if (gflops[l][z] > 0)
                clt__json_buf_printf(b, ", \"gflops\": %.1f", gflops[l][z]);
            clt__json_buf_puts(b, "}");
        }
        clt__json_buf_puts(b, "\n    }");
    }
    clt__json_buf_puts(b, "\n  }");
}

clt_status clt_tune_save(const char *path, const struct clt_tune *t)
{
    clt_status st = CLT_OK;
    clt__json_buf b = {0};
    clt_outfile *f = NULL;
    clt__json_buf_printf(&b, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"device\": ",
                         TUNE_FORMAT, TUNE_VERSION);
    clt__json_buf_string(&b, t->device_name, strlen(t->device_name));
    clt__json_buf_puts(&b, ",\n  \"driver\": ");
    clt__json_buf_string(&b, t->driver_version, strlen(t->driver_version));
    clt__json_buf_printf(&b, ",\n  \"large_macs\": %llu",
                         (unsigned long long)t->gemm_large_macs);
    put_section(&b, "gemm", t->gemm, t->gemm_gflops);
    put_section(&b, "gemm16", t->gemm16, t->gemm16_gflops);
    if (t->xgemm.set) {
        clt__json_buf_puts(&b, ",\n  \"clblast_xgemm\": {");
        for (int i = 0; i < CLT_XGEMM_NPARAMS; i++)
            clt__json_buf_printf(&b, "%s\"%s\": %zu", i ? ", " : "", clt_xgemm_param_names[i],
                                 t->xgemm.v[i]);
        clt__json_buf_puts(&b, "}");
    }
    clt__json_buf_puts(&b, "\n}\n");
    if (b.failed) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory writing %s", path);
    /* temporary file + rename; symlinks followed, non-regular files refused, writes checked */
    CLT_TRY(clt_outfile_open(&f, path));
    CLT_TRY(clt_outfile_write(f, b.data, b.len));
    st = clt_outfile_commit(f); /* frees f */
    f = NULL;
fail:
    clt_outfile_discard(f);
    clt__json_buf_free(&b);
    return st;
}

static bool tune_path(const clt_ctx *ctx, char *dst, size_t n)
{
    const char *env = getenv("CLTRAIN_TUNE_FILE"), *dir = clt_ctx_cache_dir(ctx);
    if (env && *env) {
        snprintf(dst, n, "%s", env);
        return true;
    }
    if (!dir) {
        if (n) dst[0] = '\0';
        return false;
    }
    const char *parts[] = {"cltrain-tune-v1", ctx->dev.device_name, ctx->dev.driver_version};
    unsigned long long h = CLT__FNV_SEED;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        h = clt__hash(h, parts[i], strlen(parts[i]) + 1);
    snprintf(dst, n, "%s/tune-%016llx.json", dir, h);
    return true;
}

clt_status clt_tune_path(const clt_ctx *ctx, char *dst, size_t n)
{
    if (tune_path(ctx, dst, n)) return CLT_OK;
    return clt__fail((clt_ctx *)ctx, CLT_ERR_IO,
                     "no tuning file: the disk cache is off and CLTRAIN_TUNE_FILE is not set");
}

/* ---- the ctx's copy ----------------------------------------------------------------------- */

static void ops_release(clt_ctx *ctx, void *state)
{
    struct clt__ops_ctx *o = state;
    (void)ctx;
    /* CLBlast keeps the programs it built in a process-wide cache, emptied only by
     * CLBlastClearCache or by its static destructor at exit. Each program holds a reference to
     * our context, so without this the context outlives clReleaseContext and is destroyed by
     * that destructor, when the driver may be torn down already: under Oclgrind one run in two
     * aborted at exit ("corrupted double-linked list": clblast::Cache::~Cache ->
     * clReleaseProgram -> clReleaseContext -> oclgrind::Context::~Context -> ~LLVMContext).
     * The call empties the whole cache (every context's programs, CLBlast's in-memory
     * binaries): another live ctx that uses CLBlast rebuilds its programs at its next GEMM, a
     * one-off cost, and a GEMM in flight keeps its program. Clearing at each such ctx's end,
     * not only at the last one's, keeps no released context alive in CLBlast meanwhile.
     * clt_ctx_free calls this before it releases the context. */
    if (o->used_clblast) CLBlastClearCache();
    clt_tensor_free(o->gemm_ws);
    clt_tensor_free(o->xent_rows);
    free(o->slots);
    free(o);
}

uint64_t clt__gemm_ws_bytes(clt_ctx *ctx)
{
    struct clt__ops_ctx *o = NULL;
    if (clt__ops_ctx(ctx, &o) != CLT_OK) return 0;
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            if (o->tune.gemm[l][z].kernel == CLT_GEMM_PANEL)
                return CLT_GEMM_WS_FLOATS * sizeof(float);
    return 0;
}

uint64_t clt__gemm_ws_held(clt_ctx *ctx)
{
    struct clt__ops_ctx *o = NULL;
    if (clt__ops_ctx(ctx, &o) != CLT_OK || !o->gemm_ws) return 0;
    return clt_tensor_numel(o->gemm_ws) * sizeof(float);
}

/* Gives CLBlast the tuning data's Xgemm parameters for ctx's device (CLBlast keeps them for
 * that device until the process ends: every ctx on it). */
static clt_status apply_xgemm(clt_ctx *ctx, const struct clt_tune *t)
{
    if (!t->xgemm.set || !ctx->dev.device) return CLT_OK;
    CLBlastStatusCode rc =
        CLBlastOverrideParameters(ctx->dev.device, "Xgemm", CLBlastPrecisionSingle,
                                  CLT_XGEMM_NPARAMS, (const char **)clt_xgemm_param_names,
                                  t->xgemm.v);
    if (rc == CLBlastSuccess) return CLT_OK;
    return clt__fail(ctx, CLT_ERR_CLBLAST, "CLBlast refused the Xgemm parameters: %s (%d)",
                     clt_clblast_error_name(rc), (int)rc);
}

/* Fills t: the built-in defaults, then the tuning file, then CLTRAIN_GEMM (which clt_ctx_create
 * has checked; checked again for a value set since). */
static clt_status tune_init(clt_ctx *ctx, struct clt_tune *tune)
{
    char path[4096];
    const char *force = getenv("CLTRAIN_GEMM");
    bool own = false, clblast = false;
    if (force && *force) {
        own = strcasecmp(force, "own") == 0;
        clblast = strcasecmp(force, "clblast") == 0;
        if (!own && !clblast && strcasecmp(force, "auto") != 0)
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "CLTRAIN_GEMM=\"%s\": expected own, clblast or auto", force);
    }
    clt_tune_defaults(&ctx->dev, tune);
    /* Only a file that exists can be ignored with a note; none at all is the usual case. */
    if (tune_path(ctx, path, sizeof path) && access(path, F_OK) == 0) {
        struct clt_tune t;
        if (clt_tune_load(path, &ctx->dev, &t) == CLT_OK && apply_xgemm(ctx, &t) == CLT_OK) {
            *tune = t;
        } else {
            /* Not a failure: record why in the ctx's message and keep the defaults. */
            snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s; using the built-in GEMM choices",
                     clt_last_errmsg());
            snprintf(tune->source, sizeof tune->source, "built-in (%.480s ignored)", path);
        }
    }
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++) {
            struct clt_gemm_choice *c = &tune->gemm[l][z];
            if (clblast)
                *c = clblast_choice;
            else if (own && c->kernel == CLT_GEMM_CLBLAST)
                *c = clt_gemm_own_default(&ctx->dev, (clt_gemm_layout)l, (clt_gemm_size)z);
        }
    if (own || clblast) {
        size_t used = strlen(tune->source);
        snprintf(tune->source + used, sizeof tune->source - used, ", CLTRAIN_GEMM=%s",
                 own ? "own" : "clblast");
    }
    return CLT_OK;
}

clt_status clt__ops_state(clt_ctx *ctx, struct clt__ops_ctx **out)
{
    clt_status st = CLT_OK;
    struct clt__ops_ctx *o = ctx->ops.state;
    if (!o) {
        int n = 0;
        CLT_ALLOC(ctx, o, 1);
        for (int f = 0; f < CLT__OPF__COUNT; f++) {
            o->slot_base[f] = n;
            n += clt__op_families[f]->slots;
        }
        CLT_ALLOC(ctx, o->slots, (size_t)(n > 0 ? n : 1));
        ctx->ops.state = o;
        ctx->ops.release = ops_release;
    }
    *out = o;
    return CLT_OK;
fail:
    if (o) free(o->slots);
    free(o);
    return st;
}

clt_status clt__ops_ctx(clt_ctx *ctx, struct clt__ops_ctx **out)
{
    struct clt__ops_ctx *o = NULL;
    clt_status st = clt__ops_state(ctx, &o);
    if (st == CLT_OK && !o->tuned) {
        st = tune_init(ctx, &o->tune);
        o->tuned = st == CLT_OK;
    }
    if (st == CLT_OK) *out = o;
    return st;
}

const struct clt_tune *clt_ctx_tune(clt_ctx *ctx)
{
    struct clt__ops_ctx *o = NULL;
    return clt__ops_ctx(ctx, &o) == CLT_OK ? &o->tune : NULL;
}

clt_status clt_ctx_set_tune(clt_ctx *ctx, const struct clt_tune *t)
{
    char why[128];
    struct clt__ops_ctx *o = NULL;
    clt_status st = clt__ops_ctx(ctx, &o);
    if (st != CLT_OK) return st;
    if (t->gemm_large_macs < 1)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "tuning data: gemm_large_macs must be >= 1");
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            if (clt_gemm_choice_check(&t->gemm[l][z], &ctx->dev, why, sizeof why) != CLT_OK)
                return clt__fail(ctx, CLT_ERR_INVALID_ARG, "tuning data: gemm %s %s: %s",
                                 clt_gemm_layout_name((clt_gemm_layout)l),
                                 clt_gemm_size_name((clt_gemm_size)z), why);
    if (t->xgemm.set && clt_xgemm_params_check(&t->xgemm, why, sizeof why) != CLT_OK)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "tuning data: clblast_xgemm: %s", why);
    st = apply_xgemm(ctx, t);
    if (st != CLT_OK) return st;
    o->tune = *t;
    return CLT_OK;
}
