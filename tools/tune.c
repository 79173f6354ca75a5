/* cltrain-tune: times CLBlast and cltrain's own GEMM variants (cl/gemm.cl) on the shapes of the
 * MLP and CNN presets, for the three layouts linear and conv layers use, checks every variant's
 * result against CLBlast's, prints GFLOP/s per variant and shape, and writes the fastest choice per
 * layout (least total time over the shapes) to the device's tuning file, which ctxs read at
 * creation. With --clblast it also tunes CLBlast's Xgemm kernel parameters
 * (CLBlastOverrideParameters).
 * With --openblas it also times OpenBLAS's cblas_sgemm on the host beside them, in the same
 * rounds (tools/gemm_vs_openblas.py reads that row). With --shape it times the shapes given
 * instead of the presets' (a model's own, or 4096^3 for a device's peak). With --dtype bf16 or
 * f16 it tunes the choices for 16-bit operands (mixed precision) instead, among the variants
 * that take them, and keeps the f32 choices of the existing file.
 * Its flags are the table tune_opts below (--help, docs/cltrain-tune.1). */
#include "ops/tune_internal.h"
#include "cltrain/cltrain.h"
#include "cli/man.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct shape {
    clt_gemm_layout layout;
    size_t M, N, K;
};

#define MAX_SHAPES 32 /* per layout */

/* CBLAS's cblas_sgemm and the values of its enums this tool passes */
typedef void blas_sgemm_fn(int order, int ta, int tb, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

struct run {
    clt_ctx *ctx;
    clt_tensor *A, *B, *C;
    /* --dtype bf16 or f16: A and B in that dtype, and C too except in layout TN (a weight
     * gradient, f32 in training); A, B hold the same values in f32 for CLBlast's reference */
    clt_dtype dtype;
    clt_tensor *A16, *B16, *C16;
    double tol; /* near_ref's bound, relative to max |ref|: C's rounding and order */
    float *ref, *got;
    int repeats;
    bool use_min;    /* report the fastest repeat instead of the median */
    double min_time; /* seconds each timed repeat runs at least */
    /* --openblas: cblas_sgemm on host copies of A and B (the tensors' contents), timed in the
     * same rounds as the candidates, seconds per call per shape of the layout (< 0: none) */
    blas_sgemm_fn *sgemm;
    const float *ha, *hb;
    float *hc;
    double blas_time[MAX_SHAPES];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The C a shape's product goes to: 16-bit except a 16-bit run's layout TN. */
static clt_tensor *c_of(const struct run *r, const struct shape *s)
{
    return r->dtype != CLT_DTYPE_F32 && s->layout != CLT_GEMM_TN ? r->C16 : r->C;
}

static clt_status gemm_on(const struct clt_gemm_choice *c, const struct shape *s, float beta,
                          const clt_tensor *A, const clt_tensor *B, clt_tensor *C)
{
    bool ta = s->layout == CLT_GEMM_TN || s->layout == CLT_GEMM_TT;
    bool tb = s->layout == CLT_GEMM_NT || s->layout == CLT_GEMM_TT;
    return clt_op_gemm_with(c, ta ? CLT_TRANS : CLT_NO_TRANS, tb ? CLT_TRANS : CLT_NO_TRANS, s->M,
                            s->N, s->K, 1.0f, A, B, beta, C);
}

/* One product with choice c on the run's operands (16-bit ones with --dtype). */
static clt_status call(struct run *r, const struct clt_gemm_choice *c, const struct shape *s,
                       float beta)
{
    if (r->dtype == CLT_DTYPE_F32) return gemm_on(c, s, beta, r->A, r->B, r->C);
    return gemm_on(c, s, beta, r->A16, r->B16, c_of(r, s));
}

/* How many calls of `one` seconds make a timed batch of at least r->min_time (1 to 1000). */
static int batch_calls(const struct run *r, double one)
{
    int calls = one >= r->min_time ? 1 : (int)ceil(r->min_time / (one > 1e-6 ? one : 1e-6));
    return calls > 1000 ? 1000 : calls;
}

/* A warm-up call (it compiles), then one timed call: how many calls make a timed batch of at
 * least r->min_time. Negative on failure. */
static int calibrate(struct run *r, const struct clt_gemm_choice *c, const struct shape *s)
{
    if (call(r, c, s, 0.0f) != CLT_OK || clt_ctx_finish(r->ctx, CLT_WAIT_TIMING) != CLT_OK)
        return -1;
    double t0 = now_s();
    if (call(r, c, s, 0.0f) != CLT_OK || clt_ctx_finish(r->ctx, CLT_WAIT_TIMING) != CLT_OK)
        return -1;
    return batch_calls(r, now_s() - t0);
}

/* Seconds per call over one batch of `calls`, the queue finished before each clock read.
 * Negative on failure. */
static double time_batch(struct run *r, const struct clt_gemm_choice *c, const struct shape *s,
                         int calls)
{
    if (clt_ctx_finish(r->ctx, CLT_WAIT_TIMING) != CLT_OK) return -1;
    double t0 = now_s();
    for (int j = 0; j < calls; j++)
        if (call(r, c, s, 0.0f) != CLT_OK) return -1;
    if (clt_ctx_finish(r->ctx, CLT_WAIT_TIMING) != CLT_OK) return -1;
    return (now_s() - t0) / calls;
}

/* Whether got[count] is CLBlast's result r->ref: max |got - ref| <= r->tol * max |ref| (1e-4 in
 * f32, where the two differ only in summation order; a 16-bit C's rounding on top); if not,
 * why. */
static bool near_ref(const struct run *r, const float *got, size_t count, char *why, size_t n)
{
    double maxref = 0, maxdiff = 0;
    size_t worst = 0;
    for (size_t i = 0; i < count; i++) {
        double d = fabs((double)got[i] - (double)r->ref[i]);
        if (fabs(r->ref[i]) > maxref) maxref = fabs(r->ref[i]);
        if (!(d <= maxdiff)) { /* NaN counts as the worst */
            maxdiff = isnan(d) ? INFINITY : d;
            worst = i;
        }
    }
    if (maxdiff <= r->tol * maxref) return true;
    snprintf(why, n, "element %zu: got %g, CLBlast %g", worst, got[worst], r->ref[worst]);
    return false;
}

/* Runs c once over a NaN-poisoned C (beta 0) and compares with r->ref. */
static bool check_choice(struct run *r, const struct clt_gemm_choice *c, const struct shape *s,
                         char *why, size_t n)
{
    size_t count = s->M * s->N;
    clt_tensor *C = c_of(r, s); /* a 16-bit C through r->C, cast both ways */
    for (size_t i = 0; i < count; i++)
        r->got[i] = NAN;
    if (clt_tensor_write(r->C, r->got, true, NULL) != CLT_OK ||
        (C != r->C && clt_op_cast(C, r->C) != CLT_OK) || call(r, c, s, 0.0f) != CLT_OK ||
        (C != r->C && clt_op_cast(r->C, C) != CLT_OK) ||
        clt_tensor_read(r->C, r->got, true, NULL) != CLT_OK) {
        snprintf(why, n, "%s", clt_ctx_errmsg(r->ctx));
        return false;
    }
    return near_ref(r, r->got, count, why, n);
}

/* The flags of cltrain-tune, one table for parsing, --help and the manual page (--man-sections:
 * tools/gen_man.sh writes them into docs/cltrain-tune.1). */
enum tune_flag {
    F_DEVICE, F_OUTPUT, F_QUICK, F_ALL, F_LAYOUT, F_REPEATS, F_MIN, F_VARIANT, F_SHAPE, F_DTYPE,
    F_CLBLAST, F_OPENBLAS, F_HELP
};
static const struct tune_opt {
    enum tune_flag id;
    const char *name;    /* without "--" */
    const char *metavar; /* its value's placeholder; NULL: a flag without a value */
    const char *help;
} tune_opts[] = {
    {F_DEVICE, "device", "SEL",
     "the device: auto, gpu, cpu, accelerator, N, P:D or part of a name"},
    {F_OUTPUT, "output", "FILE",
     "where to write (default: $CLTRAIN_TUNE_FILE, else the device's file in the program cache "
     "folder)"},
    {F_QUICK, "quick", NULL, "only the presets' own shapes (mlp, cnn, gpt-mini), fewer repeats"},
    {F_ALL, "all", NULL,
     "also the variants unlikely to win on this device type (local-memory tiles on a CPU, "
     "mismatched vector directions)"},
    {F_LAYOUT, "layout", "L", "only layout L (NT, NN or TN); the others keep the defaults"},
    {F_REPEATS, "repeats", "N", "timed repeats per variant and shape, 1 to 64 (5; 3 with --quick)"},
    {F_MIN, "min", NULL, "rank by the fastest repeat, not the median (noisy machines)"},
    {F_VARIANT, "variant", "SPEC",
     "time SPEC (e.g. \"direct tm8 tn32 vw16 veck0 mdim0 wg4x1\") instead of the built-in "
     "table; repeatable (at most 32)"},
    {F_SHAPE, "shape", "MxNxK",
     "time C (M x N) = op(A) (M x K) op(B) (K x N) in every layout instead of the presets' shapes "
     "(e.g. 4096x4096x4096); the choice written then fits these; repeatable"},
    {F_DTYPE, "dtype", "D",
     "the operands' storage: f32 (default; the 16-bit choices then follow the f32 ones), or bf16 "
     "or f16: the choices for 16-bit operands (mixed precision), among the variants that take "
     "them, beside the f32 choices of the existing file"},
    {F_CLBLAST, "clblast", NULL,
     "also tune CLBlast's Xgemm kernel (its parameters through CLBlastOverrideParameters, each "
     "candidate checked) on the large shapes; the winner goes to the file if it beats CLBlast's "
     "database"},
    {F_OPENBLAS, "openblas", "LIB",
     "also time cblas_sgemm from the OpenBLAS library LIB (e.g. libopenblas.so.0) on the host, "
     "in the same rounds as the variants: a row of the table, never a choice"},
    {F_HELP, "help", NULL, "print this help"},
};
#define NOPTS ((int)(sizeof tune_opts / sizeof tune_opts[0]))

/* "--name METAVAR" of option o into buf. */
static void opt_left(const struct tune_opt *o, char *buf, size_t size)
{
    snprintf(buf, size, "--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
}

/* The usage line, then each option and its help broken at spaces before column 100. */
static int usage(FILE *f, int rc)
{
    enum { INDENT = 20, WIDTH = 100 };
    int col = fprintf(f, "usage: cltrain-tune");
    for (int i = 0; i < NOPTS; i++) {
        char left[64];
        opt_left(&tune_opts[i], left, sizeof left);
        if (col + 3 + (int)strlen(left) > WIDTH) col = fprintf(f, "\n%*s", INDENT - 1, "") - 1;
        col += fprintf(f, " [%s]", left);
    }
    fputc('\n', f);
    for (int i = 0; i < NOPTS; i++) {
        char left[64];
        opt_left(&tune_opts[i], left, sizeof left);
        col = fprintf(f, "  %s", left);
        if (col >= INDENT) col = fprintf(f, "\n") - 1;
        col += fprintf(f, "%*s", INDENT - col, "");
        for (const char *t = tune_opts[i].help; *t;) {
            int len = (int)strcspn(t, " ");
            if (col > INDENT && col + 1 + len > WIDTH) col = fprintf(f, "\n%*s", INDENT, "") - 1;
            else if (col > INDENT) col += fprintf(f, " ");
            col += fprintf(f, "%.*s", len, t);
            t += len;
            t += strspn(t, " ");
        }
        fputc('\n', f);
    }
    return rc;
}

/* The manual's option list (docs/cltrain-tune.1, through tools/gen_man.sh). */
static int man_sections(void)
{
    man_region_begin(stdout, "options");
    for (int i = 0; i < NOPTS; i++)
        man_option(stdout, tune_opts[i].name, tune_opts[i].metavar, tune_opts[i].help);
    man_region_end(stdout, "options");
    return 0;
}

/* The flags of cltrain-tune. */
struct tune_args {
    const char *device, *output, *only, *openblas;
    clt_dtype dtype; /* --dtype: f32 (0) unless given */
    bool quick, all, use_min, clblast;
    int repeats;
    struct clt_gemm_choice given[32];
    int ngiven;
    struct shape shapes[MAX_SHAPES]; /* --shape, layout unset */
    int nshapes;
};

/* "MxNxK" (digits and x only) into *out: each size 1 to 2^20, each operand at most 2^28
 * elements. */
static bool parse_shape(const char *text, struct shape *out)
{
    unsigned long m, n, k;
    int end = 0;
    if (text[strspn(text, "0123456789x")] != '\0' ||
        sscanf(text, "%lux%lux%lu%n", &m, &n, &k, &end) != 3 || text[end] != '\0')
        return false;
    const unsigned long lim = 1ul << 20, elems = 1ul << 28;
    if (m < 1 || n < 1 || k < 1 || m > lim || n > lim || k > lim || m * k > elems ||
        k * n > elems || m * n > elems)
        return false;
    *out = (struct shape){.M = m, .N = n, .K = k};
    return true;
}

/* The option table's entry for argv word `arg` ("--name" or "--name=value"), its value after
 * '=' in *eq (else NULL); NULL when there is none. */
static const struct tune_opt *find_opt(const char *arg, const char **eq)
{
    *eq = NULL;
    if (strncmp(arg, "--", 2) != 0) return NULL;
    const char *name = arg + 2, *e = strchr(name, '=');
    size_t len = e ? (size_t)(e - name) : strlen(name);
    for (int i = 0; i < NOPTS; i++)
        if (strlen(tune_opts[i].name) == len && strncmp(tune_opts[i].name, name, len) == 0) {
            *eq = e ? e + 1 : NULL;
            return &tune_opts[i];
        }
    return NULL;
}

/* --dtype's value into *out; false for another word. */
static bool parse_dtype(const char *v, clt_dtype *out)
{
    if (strcmp(v, "f32") == 0 || strcmp(v, "fp32") == 0) *out = CLT_DTYPE_F32;
    else if (strcmp(v, "bf16") == 0) *out = CLT_DTYPE_BF16;
    else if (strcmp(v, "f16") == 0 || strcmp(v, "fp16") == 0) *out = CLT_DTYPE_F16;
    else return false;
    return true;
}

/* One option with its value v (NULL for a flag) into *a; -1 to go on, else the exit code. */
static int apply_opt(const struct tune_opt *o, const char *v, struct tune_args *a)
{
    switch (o->id) {
    case F_DEVICE: a->device = v; break;
    case F_OUTPUT: a->output = v; break;
    case F_LAYOUT: a->only = v; break;
    case F_OPENBLAS: a->openblas = v; break;
    case F_QUICK: a->quick = true; break;
    case F_ALL: a->all = true; break;
    case F_MIN: a->use_min = true; break;
    case F_CLBLAST: a->clblast = true; break;
    case F_HELP: return usage(stdout, 0);
    case F_REPEATS:
        a->repeats = atoi(v);
        if (a->repeats < 1 || a->repeats > 64 || strspn(v, "0123456789") != strlen(v)) {
            fprintf(stderr, "cltrain-tune: --repeats: expected 1 to 64, got \"%s\"\n", v);
            return 2;
        }
        break;
    case F_VARIANT: {
        struct clt_gemm_choice *g = &a->given[a->ngiven];
        if (a->ngiven == 32 || clt_gemm_choice_parse(v, g) != CLT_OK ||
            g->kernel == CLT_GEMM_CLBLAST) {
            fprintf(stderr, "cltrain-tune: --variant: %s\n",
                    a->ngiven == 32 ? "at most 32" : clt_last_errmsg());
            return 2;
        }
        a->ngiven++;
        break;
    }
    case F_SHAPE:
        if (a->nshapes == MAX_SHAPES || !parse_shape(v, &a->shapes[a->nshapes])) {
            if (a->nshapes == MAX_SHAPES)
                fprintf(stderr, "cltrain-tune: --shape: at most %d\n", MAX_SHAPES);
            else
                fprintf(stderr, "cltrain-tune: --shape: expected MxNxK, sizes 1 to 1048576 and at "
                                "most 2^28 elements per operand (e.g. 4096x4096x4096), got "
                                "\"%s\"\n",
                        v);
            return 2;
        }
        a->nshapes++;
        break;
    case F_DTYPE:
        if (!parse_dtype(v, &a->dtype)) {
            fprintf(stderr, "cltrain-tune: --dtype: expected f32, bf16 or f16, got \"%s\"\n", v);
            return 2;
        }
        break;
    }
    return -1;
}

/* Parses argv into *a through the option table; returns -1 to go on, else the exit code (after
 * --help, --man-sections or an error). */
static int parse_args(int argc, char **argv, struct tune_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *eq = NULL;
        if (strcmp(argv[i], "--man-sections") == 0) return man_sections();
        const struct tune_opt *o = find_opt(argv[i], &eq);
        if (!o) {
            fprintf(stderr, "cltrain-tune: unknown argument \"%s\"\n", argv[i]);
            return usage(stderr, 2);
        }
        if (!o->metavar && eq) {
            fprintf(stderr, "cltrain-tune: --%s takes no value\n", o->name);
            return 2;
        }
        const char *v = o->metavar ? (eq ? eq : i + 1 < argc ? argv[++i] : NULL) : NULL;
        if (o->metavar && !v) {
            fprintf(stderr, "cltrain-tune: --%s needs a value %s\n", o->name, o->metavar);
            return 2;
        }
        int rc = apply_opt(o, v, a);
        if (rc >= 0) return rc;
    }
    return -1;
}

/* The presets' GEMMs per layout (shapes[0]: NT, [1]: NN, [2]: TN) into count[layout]: the MLP
 * presets' linear layers (forward NT, dx NN, dW TN), the convolutions of the cnn preset
 * (CNN-S: 32 and 64 channels at batch 128; without --quick also CNN-M: 64 and 128 at 256) as
 * src/ops/conv.c lays them out: forward NN (B*HW, OUT, C*K*K), input gradient NN
 * (B*HW, C*K*K, OUT), weight gradient TN (C*K*K, OUT, B*HW), plus their linear layer, and the
 * GPT presets' linear layers per position. */
static void make_shapes(bool quick, struct shape shapes[3][MAX_SHAPES], int count[3])
{
    static const size_t pairs[][2] = {{784, 256},  {256, 128},   {128, 10},
                                      {784, 1024}, {1024, 1024}, {1024, 10}};
    static const size_t batches[] = {128, 512};
    count[0] = count[1] = count[2] = 0;
#define ADD(l, m, n, k) (shapes[l][count[l]++] = (struct shape){layouts_of[l], m, n, k})
    static const clt_gemm_layout layouts_of[3] = {CLT_GEMM_NT, CLT_GEMM_NN, CLT_GEMM_TN};
    for (int bi = 0; bi < 2; bi++)
        for (int p = 0; p < 6; p++) {
            size_t B = batches[bi], IN = pairs[p][0], OUT = pairs[p][1];
            if (quick && (bi == 0) != (p < 3)) continue; /* the presets: S at 128, M at 512 */
            ADD(0, B, OUT, IN);
            ADD(1, B, IN, OUT);
            ADD(2, OUT, IN, B);
        }
    /* conv 1 -> c1 k3 p1 on 28x28, maxpool 2, conv c1 -> c2 k3 p1 on 14x14, maxpool 2,
     * linear c2*49 -> 128 */
    static const size_t cnn[][3] = {{32, 64, 128}, {64, 128, 256}};
    for (int v = 0; v < (quick ? 1 : 2); v++) {
        size_t c1 = cnn[v][0], c2 = cnn[v][1], B = cnn[v][2];
        ADD(1, B * 784, c1, 9);
        ADD(1, B * 196, c2, c1 * 9);
        ADD(1, B * 196, c1 * 9, c2);
        ADD(2, 9, c1, B * 784);
        ADD(2, c1 * 9, c2, B * 196);
        ADD(0, B, 128, c2 * 49);
        ADD(1, B, c2 * 49, 128);
        ADD(2, 128, c2 * 49, B);
    }
    /* the GPT presets' linear layers over their B*T rows (gpt-mini: 12 x 64, D 128; without
     * --quick also gpt-char: 64 x 256, D 384): the attention's input and output projections,
     * the MLP's two, and the tied head on an 84-character vocabulary (Shakespeare's) */
    static const size_t gpt[][2] = {{12 * 64, 128}, {64 * 256, 384}};
    for (int v = 0; v < (quick ? 1 : 2); v++) {
        size_t R = gpt[v][0], D = gpt[v][1];
        const size_t io[][2] = {{D, 3 * D}, {D, D}, {D, 4 * D}, {4 * D, D}, {D, 84}};
        for (int j = 0; j < 5; j++) {
            size_t IN = io[j][0], OUT = io[j][1];
            ADD(0, R, OUT, IN);
            ADD(1, R, IN, OUT);
            ADD(2, OUT, IN, R);
        }
    }
#undef ADD
}

static const struct clt_gemm_choice clblast = {.kernel = CLT_GEMM_CLBLAST};

static void blas_call(struct run *r, const struct shape *s)
{
    bool ta = s->layout == CLT_GEMM_TN || s->layout == CLT_GEMM_TT;
    bool tb = s->layout == CLT_GEMM_NT || s->layout == CLT_GEMM_TT;
    r->sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS,
             (int)s->M, (int)s->N, (int)s->K, 1.0f, r->ha, (int)(ta ? s->M : s->K), r->hb,
             (int)(tb ? s->K : s->N), 0.0f, r->hc, (int)s->N);
}

/* OpenBLAS's warm-up call, checked against r->ref (a mismatch is printed: 0 calls), then how
 * many calls make a batch of at least r->min_time. */
static int blas_calibrate(struct run *r, const struct shape *s)
{
    char why[256];
    size_t count = s->M * s->N;
    for (size_t i = 0; i < count; i++)
        r->hc[i] = NAN;
    blas_call(r, s);
    if (!near_ref(r, r->hc, count, why, sizeof why)) {
        fprintf(stderr, "cltrain-tune: OpenBLAS at %s %zux%zux%zu differs: %s\n",
                clt_gemm_layout_name(s->layout), s->M, s->N, s->K, why);
        return 0;
    }
    double t0 = now_s();
    blas_call(r, s);
    return batch_calls(r, now_s() - t0);
}

/* Seconds per OpenBLAS call over one batch of `calls`; then a pause of 0.2 s, in which its
 * threads stop spinning (OpenBLAS's workers busy-wait about 2^28 cycles after a call) and
 * leave the cores to the next candidate. */
static double blas_batch(struct run *r, const struct shape *s, int calls)
{
    double t0 = now_s();
    for (int j = 0; j < calls; j++)
        blas_call(r, s);
    double t = (now_s() - t0) / calls;
    nanosleep(&(struct timespec){.tv_nsec = 200000000}, NULL);
    return t;
}

/* Seconds per call of c on shape s: calibrated batches, the median (or best) of r->repeats.
 * Negative on failure. */
static double time_one(struct run *r, const struct clt_gemm_choice *c, const struct shape *s)
{
    double t[64];
    int calls = calibrate(r, c, s), reps = r->repeats < 64 ? r->repeats : 64;
    if (calls < 0) return -1;
    for (int i = 0; i < reps; i++)
        if ((t[i] = time_batch(r, c, s, calls)) < 0) return -1;
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return r->use_min ? t[0] : t[reps / 2];
}

/* The candidates on one shape: CLBlast's result as the reference, every candidate still ok[]
 * checked against it, then timed in rounds into times[c * MAX_SHAPES + s]. 0, or 1 after an OpenCL
 * failure (r->ctx's message), 2 out of host memory (both printed by the caller). */
static int time_shape(struct run *r, const struct clt_gemm_choice *vars, int nvar,
                      const struct shape *sh, int s, bool *ok, double *times)
{
    char why[512];
    if (gemm_on(&clblast, &sh[s], 0.0f, r->A, r->B, r->C) != CLT_OK ||
        clt_tensor_read(r->C, r->ref, true, NULL) != CLT_OK)
        return 1;
    /* Check every candidate, then time them in rounds (one batch of each per round), so that
     * a burst of load on a shared machine hits all of them alike; the median (or the best,
     * --min) round counts. */
    int *calls = calloc((size_t)nvar + 1, sizeof *calls);
    double *samples = calloc(((size_t)nvar + 1) * 64, sizeof *samples);
    if (!calls || !samples) {
        free(calls);
        free(samples);
        return 2;
    }
    for (int c = 0; c <= nvar; c++) {
        calls[c] = -1;
        if (!ok[c]) continue;
        char name[96];
        if (c > 0 && !check_choice(r, &vars[c - 1], &sh[s], why, sizeof why)) {
            clt_gemm_choice_format(&vars[c - 1], name, sizeof name);
            fprintf(stderr, "cltrain-tune: %s %s at %zux%zux%zu rejected: %s\n",
                    clt_gemm_layout_name(sh[s].layout), name, sh[s].M, sh[s].N, sh[s].K, why);
            ok[c] = false;
            continue;
        }
        calls[c] = calibrate(r, c == 0 ? &clblast : &vars[c - 1], &sh[s]);
        if (calls[c] < 0) ok[c] = c == 0; /* CLBlast stays the reference */
    }
    int reps = r->repeats < 64 ? r->repeats : 64;
    int blas_calls = r->sgemm ? blas_calibrate(r, &sh[s]) : 0;
    double blas[64];
    for (int i = 0; i < reps; i++) {
        for (int c = 0; c <= nvar; c++)
            if (calls[c] > 0)
                samples[c * 64 + i] =
                    time_batch(r, c == 0 ? &clblast : &vars[c - 1], &sh[s], calls[c]);
        if (blas_calls > 0) blas[i] = blas_batch(r, &sh[s], blas_calls); /* last: its pause */
    }
    r->blas_time[s] = -1;
    if (blas_calls > 0) {
        qsort(blas, (size_t)reps, sizeof *blas, cmp_double);
        r->blas_time[s] = r->use_min ? blas[0] : blas[reps / 2];
    }
    for (int c = 0; c <= nvar; c++) {
        if (calls[c] <= 0) continue;
        double *t = samples + c * 64;
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        times[c * MAX_SHAPES + s] = t[0] < 0 ? -1 : r->use_min ? t[0] : t[reps / 2];
        if (times[c * MAX_SHAPES + s] < 0 && c > 0) ok[c] = false;
    }
    free(calls);
    free(samples);
    return 0;
}

/* One row of the table: its name, GFLOP/s per shape ("-" where t[s] <= 0: not run) and the
 * total ms of the shapes that ran. */
static void print_row(const char *name, const double *t, const struct shape *sh, int nshape)
{
    double total = 0;
    printf("%-52s", name);
    for (int s = 0; s < nshape; s++) {
        if (t[s] > 0) {
            printf(" %13.1f", 2e-9 * (double)sh[s].M * (double)sh[s].N * (double)sh[s].K / t[s]);
            total += t[s];
        } else {
            printf(" %13s", "-");
        }
    }
    printf(" %9.2f\n", total * 1e3);
}

/* Whether candidate c (0: CLBlast) ran on every shape. */
static bool timed_all(const bool *ok, const double *times, int c, int nshape)
{
    bool timed = ok[c];
    for (int s = 0; s < nshape && timed; s++)
        timed = times[c * MAX_SHAPES + s] > 0;
    return timed;
}

/* The fastest candidate per size class (the least total time over that class's shapes), written
 * into tune->gemm[l] (b16: gemm16[l]) and printed. */
static void pick_best(const struct clt_gemm_choice *vars, int nvar, clt_gemm_layout l,
                      const struct shape *sh, int nshape, const bool *ok, const double *times,
                      bool b16, struct clt_tune *tune)
{
    int best[CLT_GEMM__SIZES] = {-1, -1};
    double best_total[CLT_GEMM__SIZES] = {0, 0}, flop[CLT_GEMM__SIZES] = {0, 0};
    bool present[CLT_GEMM__SIZES] = {false, false};
    for (int s = 0; s < nshape; s++) {
        double macs = (double)sh[s].M * (double)sh[s].N * (double)sh[s].K;
        int z = macs >= (double)tune->gemm_large_macs ? CLT_GEMM_LARGE : CLT_GEMM_SMALL;
        present[z] = true;
        flop[z] += 2.0 * macs;
    }
    for (int c = 0; c <= nvar; c++) {
        if (!timed_all(ok, times, c, nshape)) continue;
        double total[CLT_GEMM__SIZES] = {0, 0};
        for (int s = 0; s < nshape; s++) {
            double macs = (double)sh[s].M * (double)sh[s].N * (double)sh[s].K;
            total[macs >= (double)tune->gemm_large_macs ? CLT_GEMM_LARGE : CLT_GEMM_SMALL] +=
                times[c * MAX_SHAPES + s];
        }
        for (int z = 0; z < CLT_GEMM__SIZES; z++)
            if (present[z] && (best[z] < 0 || total[z] < best_total[z])) {
                best[z] = c;
                best_total[z] = total[z];
            }
    }
    for (int z = 0; z < CLT_GEMM__SIZES; z++) {
        if (best[z] < 0) continue; /* no shape of this class: keep the default */
        struct clt_gemm_choice *c = b16 ? &tune->gemm16[l][z] : &tune->gemm[l][z];
        double *gflops = b16 ? &tune->gemm16_gflops[l][z] : &tune->gemm_gflops[l][z];
        *c = best[z] == 0 ? clblast : vars[best[z] - 1];
        *gflops = flop[z] / best_total[z] * 1e-9;
        char name[96];
        clt_gemm_choice_format(c, name, sizeof name);
        printf("-> %s %s%s (M*N*K %s %llu): %s, %.1f GFLOP/s over those shapes\n",
               clt_gemm_layout_name(l), clt_gemm_size_name((clt_gemm_size)z), b16 ? " 16-bit" : "",
               z == CLT_GEMM_LARGE ? ">=" : "<", (unsigned long long)tune->gemm_large_macs, name,
               *gflops);
    }
}

/* One layout: its header, every candidate on every shape, the table and the choice. 0, or
 * what time_shape returns on failure. */
static int tune_layout(struct run *r, const struct clt_gemm_choice *vars, int nvar, bool all,
                       clt_gemm_layout l, const struct shape *sh, int nshape, double *times,
                       struct clt_tune *tune)
{
    static const char *roles[] = {"NN: dx = dy W", "NT: y = x W^T", "TN: dW = dy^T x", "TT"};
    const clt_device_info *dev = clt_ctx_device(r->ctx);
    /* candidate 0 is CLBlast, then the variants; times[c * MAX_SHAPES + s], < 0: not run */
    for (int c = 0; c <= nvar; c++)
        for (int s = 0; s < nshape; s++)
            times[c * MAX_SHAPES + s] = -1;
    bool *ok = calloc((size_t)nvar + 1, sizeof *ok);
    if (!ok) return 2;
    /* CLBlast: the reference, and a candidate in f32 only; 16-bit: the variants that take it,
     * each as it runs with a 16-bit A (clt__gemm_for_a: not the forms that never do) */
    const bool b16 = r->dtype != CLT_DTYPE_F32;
    for (int c = 0; c <= nvar; c++)
        ok[c] = c == 0 ? !b16
                       : (!b16 || (clt__gemm_takes_16bit(&vars[c - 1]) &&
                                   clt__gemm_for_a(&vars[c - 1], r->dtype).ia == vars[c - 1].ia)) &&
                             (all ? clt_gemm_choice_check(&vars[c - 1], dev, NULL, 0) == CLT_OK
                                  : clt_gemm_variant_applies(&vars[c - 1], l, dev));
    /* What any shape costs at least: a 1x1x1 product's calls back to back (the launch, the
     * driver's scheduling and an almost empty kernel). tools/gemm_vs_openblas.py reads it. */
    const struct shape one = {.layout = l, .M = 1, .N = 1, .K = 1};
    const struct clt_gemm_choice small = b16 ? clt__gemm_mixed_choice(dev)
                                             : clt_gemm_own_default(dev, l, CLT_GEMM_SMALL);
    double floor_s = time_one(r, &small, &one);
    if (floor_s < 0) {
        free(ok);
        return 1;
    }
    printf("\n%s\nlaunch floor: %.2f us per call (1x1x1 back to back)\n%-52s", roles[l],
           floor_s * 1e6, "variant \\ M x N x K");
    for (int s = 0; s < nshape; s++) {
        char dims[32];
        snprintf(dims, sizeof dims, "%zux%zux%zu", sh[s].M, sh[s].N, sh[s].K);
        printf(" %13s", dims);
    }
    printf(" %9s\n", "total ms");
    fflush(stdout);
    int fail = 0;
    for (int s = 0; s < nshape && !fail; s++)
        fail = time_shape(r, vars, nvar, sh, s, ok, times);
    if (!fail) { /* the table, OpenBLAS's row last, then the choice */
        for (int c = 0; c <= nvar; c++) {
            if (!timed_all(ok, times, c, nshape)) continue;
            char name[96];
            clt_gemm_choice_format(c == 0 ? &clblast : &vars[c - 1], name, sizeof name);
            print_row(name, &times[c * MAX_SHAPES], sh, nshape);
        }
        if (r->sgemm) print_row("openblas cblas_sgemm (host)", r->blas_time, sh, nshape);
        pick_best(vars, nvar, l, sh, nshape, ok, times, b16, tune);
    }
    free(ok);
    fflush(stdout);
    return fail;
}

/* CLBlast's Xgemm (the kernel of its larger GEMMs) over the large shapes of every layout:
 * CLBlast's database first, then each candidate of clt_xgemm_candidates() given to CLBlast
 * through the ctx's tuning data (CLBlastOverrideParameters) and checked on every shape against
 * cltrain's own kernel; the fastest in total goes into *tune if it beats the database. CLBlast
 * keeps the last override for the rest of the process. 0, or 1 after an OpenCL failure. */
static int tune_xgemm(struct run *r, struct shape shapes[3][MAX_SHAPES], const int *nshape,
                      struct clt_tune *tune)
{
    const clt_device_info *dev = clt_ctx_device(r->ctx);
    int ncand = 0, best = -1;
    const struct clt_xgemm_params *cand = clt_xgemm_candidates(&ncand);
    double base = 0, best_total = INFINITY;
    char why[512];
    printf("\nCLBlast Xgemm (large shapes, total ms):\n");
    for (int c = -1; c < ncand; c++) {
        if (c >= 0) {
            struct clt_tune t = *tune;
            t.xgemm = cand[c];
            if (clt_ctx_set_tune(r->ctx, &t) != CLT_OK) {
                printf("  candidate %d: %s\n", c, clt_ctx_errmsg(r->ctx));
                continue;
            }
        }
        double total = 0;
        bool ok = true;
        for (int l = 0; l < 3 && ok; l++)
            for (int i = 0; i < nshape[l] && ok; i++) {
                const struct shape *sh = &shapes[l][i];
                if ((double)sh->M * (double)sh->N * (double)sh->K < (double)tune->gemm_large_macs)
                    continue;
                const struct clt_gemm_choice own =
                    clt_gemm_own_default(dev, sh->layout, CLT_GEMM_LARGE);
                if (call(r, &own, sh, 0.0f) != CLT_OK ||
                    clt_tensor_read(r->C, r->ref, true, NULL) != CLT_OK)
                    return 1;
                if (!check_choice(r, &clblast, sh, why, sizeof why)) {
                    printf("  candidate %d rejected at %s %zux%zux%zu: %s\n", c,
                           clt_gemm_layout_name(sh->layout), sh->M, sh->N, sh->K, why);
                    ok = false;
                    break;
                }
                double t = time_one(r, &clblast, sh);
                if (t < 0) return 1;
                total += t;
            }
        if (!ok) continue;
        if (c < 0) {
            base = total;
            printf("  CLBlast's database: %.2f ms\n", 1e3 * total);
            continue;
        }
        printf("  candidate %d {", c);
        for (int k = 0; k < CLT_XGEMM_NPARAMS; k++)
            printf("%s%s %zu", k ? ", " : "", clt_xgemm_param_names[k], cand[c].v[k]);
        printf("}: %.2f ms\n", 1e3 * total);
        if (total < best_total) {
            best_total = total;
            best = c;
        }
    }
    if (best >= 0 && best_total < base) {
        tune->xgemm = cand[best];
        printf("-> CLBlast Xgemm: candidate %d, %.2f ms against the database's %.2f\n", best,
               1e3 * best_total, 1e3 * base);
    } else {
        printf("-> CLBlast Xgemm: the database's parameters\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct tune_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;

    static const clt_gemm_layout layouts[] = {CLT_GEMM_NT, CLT_GEMM_NN, CLT_GEMM_TN};
    struct shape shapes[3][MAX_SHAPES];
    int nshape[3];
    if (!a.nshapes)
        make_shapes(a.quick, shapes, nshape);
    else /* --shape: these in every layout */
        for (int l = 0; l < 3; l++) {
            nshape[l] = a.nshapes;
            for (int i = 0; i < a.nshapes; i++) {
                shapes[l][i] = a.shapes[i];
                shapes[l][i].layout = layouts[l];
            }
        }
    bool all = a.all;
    int nvar = 0;
    rc = 1;
    const struct clt_gemm_choice *vars = clt_gemm_variants(&nvar);
    if (a.ngiven) {
        vars = a.given;
        nvar = a.ngiven;
        all = true;
    }
    if (a.only && strcmp(a.only, "NT") != 0 && strcmp(a.only, "NN") != 0 &&
        strcmp(a.only, "TN") != 0) {
        fprintf(stderr, "cltrain-tune: --layout: expected NT, NN or TN\n");
        return 2;
    }
    if (a.dtype != CLT_DTYPE_F32 && a.clblast) {
        fprintf(stderr, "cltrain-tune: --clblast tunes f32 products, not with --dtype %s\n",
                clt_dtype_name(a.dtype));
        return 2;
    }
    struct run r = {.repeats = a.repeats ? a.repeats
                               : a.quick ? 3
                                         : 5,
                    .use_min = a.use_min,
                    .min_time = a.quick ? 0.01 : 0.02,
                    .dtype = a.dtype,
                    /* 16-bit C: its rounding (2^-9 and 2^-12 of the value) and the order */
                    .tol = a.dtype == CLT_DTYPE_BF16  ? 0x1p-7
                           : a.dtype == CLT_DTYPE_F16 ? 0x1p-9
                                                      : 1e-4};
    double *times = NULL;
    char path[4096];
    struct clt_tune tune;
    float *host = NULL;
    size_t max_a = 0, max_b = 0, max_c = 0;
    for (int l = 0; l < 3; l++)
        for (int s = 0; s < nshape[l]; s++) {
            const struct shape *sh = &shapes[l][s];
            if (sh->M * sh->K > max_a) max_a = sh->M * sh->K;
            if (sh->K * sh->N > max_b) max_b = sh->K * sh->N;
            if (sh->M * sh->N > max_c) max_c = sh->M * sh->N;
        }

    void *blas_lib = NULL;
    if (a.openblas) {
        blas_lib = dlopen(a.openblas, RTLD_NOW | RTLD_LOCAL);
        void *f = blas_lib ? dlsym(blas_lib, "cblas_sgemm") : NULL;
        if (!f) {
            fprintf(stderr, "cltrain-tune: --openblas %s: %s\n", a.openblas,
                    blas_lib ? "has no cblas_sgemm" : dlerror());
            if (blas_lib) dlclose(blas_lib);
            return 2;
        }
        memcpy(&r.sgemm, &f, sizeof r.sgemm); /* POSIX: a data pointer that holds a function */
    }
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.device = a.device;
    if (clt_ctx_create(&r.ctx, &cp) != CLT_OK) {
        fprintf(stderr, "cltrain-tune: %s\n", clt_last_errmsg());
        if (blas_lib) dlclose(blas_lib);
        return 1;
    }
    const clt_device_info *dev = clt_ctx_device(r.ctx);
    clt_tune_defaults(dev, &tune);
    if (a.output)
        snprintf(path, sizeof path, "%s", a.output);
    else if (clt_tune_path(r.ctx, path, sizeof path) != CLT_OK) {
        fprintf(stderr, "cltrain-tune: %s; pass --output\n", clt_ctx_errmsg(r.ctx));
        goto done;
    }
    if (r.dtype != CLT_DTYPE_F32 && access(path, F_OK) == 0) { /* keep its f32 choices */
        struct clt_tune t;
        if (clt_tune_load(path, dev, &t) == CLT_OK) {
            tune = t;
            printf("keeping the f32 choices of %s\n", path);
        } else {
            printf("%s; the f32 choices written are the built-in ones\n", clt_last_errmsg());
        }
    }
    size_t big = max_a > max_b ? max_a : max_b;
    big = big > max_c ? big : max_c;
    r.ref = malloc(max_c * sizeof *r.ref);
    r.got = malloc(max_c * sizeof *r.got);
    host = malloc(big * sizeof *host);
    times = malloc((size_t)(nvar + 1) * MAX_SHAPES * sizeof *times);
    r.hc = r.sgemm ? malloc(max_c * sizeof *r.hc) : NULL;
    if (!r.ref || !r.got || !host || !times || (r.sgemm && !r.hc)) {
        fprintf(stderr, "cltrain-tune: out of host memory\n");
        goto done;
    }
    if (clt_tensor_create(&r.A, r.ctx, CLT_DTYPE_F32, 1, &max_a, CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&r.B, r.ctx, CLT_DTYPE_F32, 1, &max_b, CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&r.C, r.ctx, CLT_DTYPE_F32, 1, &max_c, CLT_MEM_OTHER) != CLT_OK)
        goto cl_fail;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < big; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        host[i] = (float)((double)(state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
    if (clt_tensor_write(r.A, host, true, NULL) != CLT_OK ||
        clt_tensor_write(r.B, host + (big - max_b) / 2, true, NULL) != CLT_OK)
        goto cl_fail;
    if (r.dtype != CLT_DTYPE_F32) { /* 16-bit operands, and their values in A and B */
        if (clt_tensor_create(&r.A16, r.ctx, r.dtype, 1, &max_a, CLT_MEM_OTHER) != CLT_OK ||
            clt_tensor_create(&r.B16, r.ctx, r.dtype, 1, &max_b, CLT_MEM_OTHER) != CLT_OK ||
            clt_tensor_create(&r.C16, r.ctx, r.dtype, 1, &max_c, CLT_MEM_OTHER) != CLT_OK ||
            clt_op_cast(r.A16, r.A) != CLT_OK || clt_op_cast(r.B16, r.B) != CLT_OK ||
            clt_op_cast(r.A, r.A16) != CLT_OK || clt_op_cast(r.B, r.B16) != CLT_OK ||
            clt_tensor_read(r.A, host, true, NULL) != CLT_OK)
            goto cl_fail;
        /* (OpenBLAS's operands: the rounded values too; B's overlap A's in host[]) */
        if (clt_tensor_read(r.B, host + (big - max_b) / 2, true, NULL) != CLT_OK) goto cl_fail;
    }
    r.ha = host; /* OpenBLAS's operands: the same values */
    r.hb = host + (big - max_b) / 2;

    printf("cltrain-tune on [%d] %s (%s, driver %s): GFLOP/s, %s of %d%s%s\n", dev->index,
           dev->device_name, dev->platform_version, dev->driver_version,
           r.use_min ? "best" : "median", r.repeats, r.dtype != CLT_DTYPE_F32 ? ", operands " : "",
           r.dtype != CLT_DTYPE_F32 ? clt_dtype_name(r.dtype) : "");
    for (int li = 0; li < 3; li++) {
        clt_gemm_layout l = layouts[li];
        if (a.only && strcmp(a.only, clt_gemm_layout_name(l)) != 0) continue;
        int fail = tune_layout(&r, vars, nvar, all, l, shapes[li], nshape[li], times, &tune);
        if (fail == 1) goto cl_fail;
        if (fail == 2) fprintf(stderr, "cltrain-tune: out of host memory\n");
        if (fail) goto done;
    }
    if (a.clblast && tune_xgemm(&r, shapes, nshape, &tune) != 0) goto cl_fail;
    if (r.dtype == CLT_DTYPE_F32) clt_tune_derive16(dev, &tune); /* they follow the new ones */
    if (clt_tune_save(path, &tune) != CLT_OK) {
        fprintf(stderr, "cltrain-tune: %s\n", clt_last_errmsg());
        goto done;
    }
    printf("\nwrote %s\n", path);
    rc = 0;
    goto done;
cl_fail:
    fprintf(stderr, "cltrain-tune: %s\n", clt_ctx_errmsg(r.ctx));
done:
    clt_tensor_free(r.A);
    clt_tensor_free(r.B);
    clt_tensor_free(r.C);
    clt_tensor_free(r.A16);
    clt_tensor_free(r.B16);
    clt_tensor_free(r.C16);
    clt_ctx_free(r.ctx);
    free(r.ref);
    free(r.got);
    free(host);
    free(times);
    free(r.hc);
    if (blas_lib) dlclose(blas_lib);
    return rc;
}
