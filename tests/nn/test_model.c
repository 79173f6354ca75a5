/* Tests of the model (src/nn/model.c): parameter names, shapes and offsets as PyTorch's
 * nn.Sequential state_dict, initialisation schemes, forward and backward passes against a
 * float64 host model built in this file from the weights read back (and central finite
 * differences), dropout masks from the host Philox, argument checks and memory accounting.
 * Tests that run GEMMs are few and grouped: CLBlast compiles its kernels once per process. */
#include "common.h"
#include "nn/layer_internal.h" /* clt__model_create_shaped, the plan */
#include "ops/tune_internal.h"   /* the panel family for the fused epilogue */
#include "ref/ref_nn.h"
#include "small.h"

#include "cltrain/model.h"
#include "runtime/rng_internal.h"
#include "cltrain/spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static clt_spec parse_spec(const char *text)
{
    clt_spec s = {0};
    clt_status st = clt_spec_parse(text, 0, &s);
    ck_assert_msg(st == CLT_OK, "clt_spec_parse(\"%s\"): %s", text, clt_last_errmsg());
    return s;
}

/* The ctx's device memory without the GEMM workspace the ctx holds itself (the panel kernels'
 * packed operands, created at the first panel GEMM: which products take it depends on the
 * device's tuning data), so that the models' own allocations meet their estimates. */
static struct clt_mem_stats model_mem_stats(clt_ctx *ctx)
{
    struct clt_mem_stats ms = clt_ctx_mem_stats(ctx);
    uint64_t ws = clt__gemm_ws_held(ctx);
    ms.current -= ws;
    ms.by_category[CLT_MEM_WORKSPACE] -= ws;
    return ms;
}

static clt_model *make_model(clt_ctx *ctx, const char *text, size_t in, size_t out, clt_init init,
                             uint64_t seed, size_t max_batch)
{
    clt_spec s = parse_spec(text);
    struct clt_model_params p = clt_model_default_params();
    p.init = init;
    p.seed = seed;
    p.max_batch = max_batch;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, in, out, &p));
    clt_spec_free(&s);
    return m;
}

static float *read_params(clt_model *m)
{
    size_t P = clt_tensor_numel(clt_model_params(m));
    float *h = malloc(P * sizeof *h);
    ck_assert_ptr_nonnull(h);
    TC_OK(clt_model_ctx(m), clt_model_read_params(m, h, CLT_WAIT_READ));
    return h;
}

/* ---- a float64 host model ----------------------------------------------------------------- */

#define MAXL 24

/* What an op of the host model is: a layer, or the start or the end of a residual block (whose
 * output is its body's output plus the block's input: the identity shortcut). */
enum host_op { OP_LAYER, OP_RES_BEGIN, OP_RES_END };

/* The model as a list of ops over rows: a flat input is one row per sample, a sequence (T, C)
 * input T rows of C (linear, layernorm act on each row). */
struct host_net {
    int n;                          /* ops */
    enum host_op op[MAXL];
    clt_layer_spec layer[MAXL];     /* OP_LAYER: the layer */
    int rng[MAXL];                  /* its random stream (the model's rng_index) */
    int begin[MAXL];                /* OP_RES_END: its block's OP_RES_BEGIN */
    size_t rows[MAXL], in[MAXL];    /* rows per sample of the op's input and their width */
    size_t orows[MAXL], out[MAXL];  /* ... of its output */
    long woff[MAXL], boff[MAXL];    /* offsets into the flat parameters; -1 when absent
                                       (attention: its input projection's) */
    long woff2[MAXL], boff2[MAXL];  /* attention: its output projection's */
    size_t P;
    int nrng;   /* layers and blocks' children: the dropout streams per step */
    uint64_t seed; /* the model's seed (dropout masks) */
};

/* Appends op (layer l when OP_LAYER) to h on rows x w inputs, reading its parameters' offsets
 * from m's parameter k on; rows and w become its output's. */
static void host_add(struct host_net *h, const clt_model *m, enum host_op op,
                     const clt_layer_spec *l, int rng, int *k, size_t *rows, size_t *w)
{
    ck_assert_int_lt(h->n, MAXL);
    int i = h->n++;
    h->op[i] = op;
    if (l) h->layer[i] = *l;
    h->rng[i] = rng;
    h->rows[i] = *rows;
    h->in[i] = *w;
    h->woff[i] = h->boff[i] = h->woff2[i] = h->boff2[i] = -1;
    if (op == OP_LAYER && l->kind == CLT_LAYER_LINEAR) {
        *w = (size_t)l->out; /* per row: each position of a sequence */
        h->woff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
        if (l->bias) h->boff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
    }
    if (op == OP_LAYER && l->kind == CLT_LAYER_LAYERNORM) {
        h->woff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
        h->boff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
    }
    if (op == OP_LAYER && l->kind == CLT_LAYER_ATTENTION) { /* (T, D) -> (T, D) */
        h->woff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
        if (l->bias) h->boff[i] = (long)clt_model_param_info(m, (*k)++)->offset;
        h->woff2[i] = (long)clt_model_param_info(m, (*k)++)->offset;
        if (l->bias) h->boff2[i] = (long)clt_model_param_info(m, (*k)++)->offset;
    }
    if (op == OP_LAYER && l->kind == CLT_LAYER_FLATTEN) {
        *w *= *rows;
        *rows = 1;
    }
    h->orows[i] = *rows;
    h->out[i] = *w;
}

static struct host_net host_net_of(const clt_model *m, uint64_t seed)
{
    struct host_net h;
    memset(&h, 0, sizeof h);
    const clt_spec *s = clt_model_spec(m);
    h.seed = seed;
    h.P = clt_tensor_numel(clt_model_params(m));
    size_t shape[3], rows = 1, w = clt_model_in_features(m);
    if (clt_model_input_shape(m, shape) == 2) {
        rows = shape[0];
        w = shape[1];
    }
    int k = 0, child = s->n;
    for (int i = 0; i < s->n; i++) {
        const clt_layer_spec *l = &s->layers[i];
        if (l->kind != CLT_LAYER_RESIDUAL) {
            host_add(&h, m, OP_LAYER, l, i, &k, &rows, &w);
            continue;
        }
        int b = h.n;
        host_add(&h, m, OP_RES_BEGIN, NULL, i, &k, &rows, &w);
        for (int j = 0; j < l->body_n; j++)
            host_add(&h, m, OP_LAYER, &l->body[j], child++, &k, &rows, &w);
        ck_assert_msg(rows == h.rows[b] && w == h.in[b], "host model: identity shortcuts only");
        host_add(&h, m, OP_RES_END, NULL, i, &k, &rows, &w);
        h.begin[h.n - 1] = b;
    }
    h.nrng = child;
    ck_assert_int_eq(k, clt_model_param_count(m));
    return h;
}

/* Elements per sample of op i's input and output. */
static size_t host_in_n(const struct host_net *h, int i) { return h->rows[i] * h->in[i]; }
static size_t host_out_n(const struct host_net *h, int i) { return h->orows[i] * h->out[i]; }

static ref_act ref_of(clt_layer_kind k)
{
    switch (k) {
    case CLT_LAYER_GELU:
        return REF_ACT_GELU;
    case CLT_LAYER_TANH:
        return REF_ACT_TANH;
    case CLT_LAYER_SIGMOID:
        return REF_ACT_SIGMOID;
    case CLT_LAYER_SILU:
        return REF_ACT_SILU;
    case CLT_LAYER_LEAKYRELU:
        return REF_ACT_LEAKYRELU;
    default:
        return REF_ACT_RELU;
    }
}

/* The dropout multiplier of element idx of the op with stream index rng at `step`: the model's
 * stream (src/nn/model.c: stream number step * (layers + children) + rng_index), kept when
 * u >= p, scaled by 1 / (1 - p). */
static double dropout_mult(const struct host_net *h, int i, uint64_t step, size_t idx)
{
    float p = h->layer[i].p;
    uint64_t stream =
        clt_rng_stream(CLT_RNG_DROPOUT, step * (uint64_t)h->nrng + (uint64_t)h->rng[i]);
    return clt_rng_uniform(h->seed, stream, idx) >= p ? 1.0 / (1.0 - (double)p) : 0.0;
}

/* Attention op i on x (B, T, D): qkv (B, T, 3D) = x Win^T + bin, ya (B, T, D) the heads'
 * output, y = ya Wout^T + bout (y NULL: only qkv and ya). */
static void host_attention_forward(const struct host_net *h, int i, const double *w,
                                   const double *x, double *qkv, double *ya, double *y, int B)
{
    const int T = (int)h->rows[i], D = (int)h->in[i], NH = h->layer[i].heads;
    const double *bin = h->boff[i] >= 0 ? w + h->boff[i] : NULL;
    const double *bout = h->boff2[i] >= 0 ? w + h->boff2[i] : NULL;
    ref_linear_forward(x, w + h->woff[i], bin, qkv, B * T, D, 3 * D);
    ref_attention_forward(qkv, ya, NULL, B, T, NH, D / NH, h->layer[i].causal);
    if (y) ref_linear_forward(ya, w + h->woff2[i], bout, y, B * T, D, D);
}

/* Its gradients from dy (B, T, D): dx and the four parameters' (overwritten). */
static void host_attention_backward(const struct host_net *h, int i, const double *w,
                                    const double *x, const double *dy, double *dx, double *g,
                                    int B)
{
    const int T = (int)h->rows[i], D = (int)h->in[i], NH = h->layer[i].heads;
    const size_t R = (size_t)B * T;
    double *qkv = malloc(R * 3 * D * sizeof *qkv), *ya = malloc(R * D * sizeof *ya);
    double *dya = malloc(R * D * sizeof *dya), *dqkv = malloc(R * 3 * D * sizeof *dqkv);
    ck_assert(qkv && ya && dya && dqkv);
    host_attention_forward(h, i, w, x, qkv, ya, NULL, B);
    ref_linear_backward(ya, w + h->woff2[i], dy, dya, g + h->woff2[i],
                        h->boff2[i] >= 0 ? g + h->boff2[i] : NULL, (int)R, D, D);
    ref_attention_backward(qkv, dya, dqkv, B, T, NH, D / NH, h->layer[i].causal);
    ref_linear_backward(x, w + h->woff[i], dqkv, dx, g + h->woff[i],
                        h->boff[i] >= 0 ? g + h->boff[i] : NULL, (int)R, D, 3 * D);
    free(qkv);
    free(ya);
    free(dya);
    free(dqkv);
}

/* acts[0] = x (B, in); acts[i + 1] = op i of acts[i]. Each acts[i] holds B x (the widest
 * per-sample count) doubles. */
static void host_forward(const struct host_net *h, const double *w, double **acts, int B,
                         bool train, uint64_t step)
{
    for (int i = 0; i < h->n; i++) {
        const double *x = acts[i];
        double *y = acts[i + 1];
        size_t n = (size_t)B * host_out_n(h, i);
        int R = B * (int)h->rows[i]; /* rows of the pass */
        if (h->op[i] != OP_LAYER) {
            for (size_t j = 0; j < n; j++)
                y[j] = x[j] + (h->op[i] == OP_RES_END ? acts[h->begin[i]][j] : 0.0);
            continue;
        }
        switch (h->layer[i].kind) {
        case CLT_LAYER_LINEAR:
            ref_linear_forward(x, w + h->woff[i], h->boff[i] >= 0 ? w + h->boff[i] : NULL, y, R,
                               (int)h->in[i], (int)h->out[i]);
            break;
        case CLT_LAYER_RELU:
        case CLT_LAYER_GELU:
        case CLT_LAYER_TANH:
        case CLT_LAYER_SIGMOID:
        case CLT_LAYER_SILU:
        case CLT_LAYER_LEAKYRELU:
            ref_act_forward_alpha(ref_of(h->layer[i].kind), h->layer[i].alpha, x, y, n);
            break;
        case CLT_LAYER_LAYERNORM:
            ref_layernorm_forward(x, w + h->woff[i], w + h->boff[i], y, NULL, NULL, R,
                                  (int)h->in[i], 1e-5);
            break;
        case CLT_LAYER_DROPOUT:
            for (size_t j = 0; j < n; j++)
                y[j] = train && h->layer[i].p > 0 ? x[j] * dropout_mult(h, i, step, j) : x[j];
            break;
        case CLT_LAYER_ATTENTION: {
            double *qkv = malloc(3 * n * sizeof *qkv), *ya = malloc(n * sizeof *ya);
            ck_assert(qkv && ya);
            host_attention_forward(h, i, w, x, qkv, ya, y, B);
            free(qkv);
            free(ya);
            break;
        }
        default:
            memcpy(y, x, n * sizeof *y);
            break;
        }
    }
}

/* Gradients (P) of sum(out * dout) for the forward in acts; dx scratch of widest * B. */
static void host_backward(const struct host_net *h, const double *w, double **acts,
                          const double *dout, int B, bool train, uint64_t step, double *grads,
                          double *s0, double *s1)
{
    memset(grads, 0, h->P * sizeof *grads);
    memcpy(s0, dout, (size_t)B * host_out_n(h, h->n - 1) * sizeof *s0);
    double *dy = s0, *dx = s1, *dres = NULL; /* dres: a block's output gradient (shortcut) */
    for (int i = h->n - 1; i >= 0; i--) {
        size_t n = (size_t)B * host_in_n(h, i);
        int R = B * (int)h->rows[i];
        if (h->op[i] == OP_RES_END) {
            dres = malloc(n * sizeof *dres);
            ck_assert_ptr_nonnull(dres);
            memcpy(dres, dy, n * sizeof *dres);
        }
        if (h->op[i] != OP_LAYER) {
            for (size_t j = 0; j < n; j++) dx[j] = dy[j] + (h->op[i] == OP_RES_BEGIN ? dres[j] : 0);
            if (h->op[i] == OP_RES_BEGIN) {
                free(dres);
                dres = NULL;
            }
        } else {
            switch (h->layer[i].kind) {
            case CLT_LAYER_LINEAR:
                ref_linear_backward(acts[i], w + h->woff[i], dy, dx, grads + h->woff[i],
                                    h->boff[i] >= 0 ? grads + h->boff[i] : NULL, R,
                                    (int)h->in[i], (int)h->out[i]);
                break;
            case CLT_LAYER_RELU:
            case CLT_LAYER_GELU:
            case CLT_LAYER_TANH:
            case CLT_LAYER_SIGMOID:
            case CLT_LAYER_SILU:
            case CLT_LAYER_LEAKYRELU:
                ref_act_backward_alpha(ref_of(h->layer[i].kind), h->layer[i].alpha, acts[i], dy,
                                       dx, n);
                break;
            case CLT_LAYER_LAYERNORM:
                ref_layernorm_backward(acts[i], w + h->woff[i], dy, dx, grads + h->woff[i],
                                       grads + h->boff[i], R, (int)h->in[i], 1e-5);
                break;
            case CLT_LAYER_DROPOUT:
                for (size_t j = 0; j < n; j++)
                    dx[j] = train && h->layer[i].p > 0 ? dy[j] * dropout_mult(h, i, step, j)
                                                       : dy[j];
                break;
            case CLT_LAYER_ATTENTION:
                host_attention_backward(h, i, w, acts[i], dy, dx, grads, B);
                break;
            default:
                memcpy(dx, dy, n * sizeof *dx);
                break;
            }
        }
        double *t = dy;
        dy = dx;
        dx = t;
    }
    free(dres);
}

static double host_objective(const struct host_net *h, const double *w, double **acts,
                             const double *dout, int B, bool train, uint64_t step)
{
    host_forward(h, w, acts, B, train, step);
    double s = 0;
    size_t n = (size_t)B * host_out_n(h, h->n - 1);
    for (size_t j = 0; j < n; j++)
        s += acts[h->n][j] * dout[j];
    return s;
}

/* Runs forward and backward on the device for one spec on inputs of per-sample shape T x IN
 * (T 0: flat (IN); else a sequence (T, IN)) and checks them against the host: output (its
 * shape too), gradients against the host backward and (fd_check) against central finite
 * differences, overwrite (poisoned gradients) and accumulation. */
static void check_spec_seq_fd(clt_ctx *ctx, tc_rng *r, const char *text, size_t T, size_t IN,
                              size_t OUT, size_t max_batch, int B, bool train, uint64_t step,
                              bool fd_check)
{
    uint64_t seed = tc_u64(r);
    clt_spec spec = parse_spec(text);
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = seed;
    mp.max_batch = max_batch;
    mp.input_shape[0] = T ? T : IN;
    mp.input_shape[1] = T ? IN : 0;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, (T ? T : 1) * IN, OUT, &mp));
    clt_spec_free(&spec);
    struct host_net h = host_net_of(m, seed);
    size_t P = h.P, widest = (T ? T : 1) * IN;
    for (int i = 0; i < h.n; i++)
        if (host_out_n(&h, i) > widest) widest = host_out_n(&h, i);
    /* the output per sample: (OUT), or (T, OUT) when the last linear layer acts per position */
    size_t oshape[3], orows = h.orows[h.n - 1];
    ck_assert_uint_eq(h.out[h.n - 1], OUT);
    ck_assert_int_eq(clt_model_output_shape(m, oshape), (orows > 1 ? 2 : 1));
    ck_assert_uint_eq(oshape[0], (orows > 1 ? orows : OUT));
    ck_assert_uint_eq(oshape[1], (orows > 1 ? OUT : 0));

    float *pf = read_params(m);
    /* layernorm weights and biases off their 1 and 0, so that they matter */
    bool moved = false;
    for (int i = 0; i < h.n; i++)
        if (h.layer[i].kind == CLT_LAYER_LAYERNORM) {
            tc_fill_nonzero(r, pf + h.woff[i], h.in[i], 0.5f, 1.5f);
            tc_fill_nonzero(r, pf + h.boff[i], h.in[i], 0.1f, 1.0f);
            moved = true;
        }
    /* attention's biases off their zeros, so that the forward checks them too */
    for (int i = 0; i < h.n; i++)
        if (h.layer[i].kind == CLT_LAYER_ATTENTION && h.boff[i] >= 0) {
            tc_fill_nonzero(r, pf + h.boff[i], 3 * h.in[i], 0.1f, 0.5f);
            tc_fill_nonzero(r, pf + h.boff2[i], h.in[i], 0.1f, 0.5f);
            moved = true;
        }
    if (moved) TC_OK(ctx, clt_model_write_params(m, pf));
    double *w = malloc(P * sizeof *w);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < P; i++)
        w[i] = pf[i];

    /* inputs and two output gradients, random non-zero */
    size_t nx = (size_t)B * (T ? T : 1) * IN, no = (size_t)B * orows * OUT;
    float *xf = malloc(nx * sizeof *xf), *d1f = malloc(no * sizeof *d1f),
          *d2f = malloc(no * sizeof *d2f), *got = malloc((no > P ? no : P) * sizeof *got);
    ck_assert(xf && d1f && d2f && got);
    tc_fill_nonzero(r, xf, nx, 0.1f, 1.5f);
    tc_fill_nonzero(r, d1f, no, 0.1f, 1.0f);
    tc_fill_nonzero(r, d2f, no, 0.1f, 1.0f);
    double *acts[MAXL + 1] = {0}, *d1 = malloc(no * sizeof *d1), *d2 = malloc(no * sizeof *d2);
    double *g1 = malloc(P * sizeof *g1), *g2 = malloc(P * sizeof *g2), *fd = malloc(P * sizeof *fd);
    double *s0 = malloc((size_t)B * widest * sizeof *s0),
           *s1 = malloc((size_t)B * widest * sizeof *s1);
    ck_assert(d1 && d2 && g1 && g2 && fd && s0 && s1);
    for (int i = 0; i <= h.n; i++) {
        acts[i] = malloc((size_t)B * widest * sizeof *acts[i]);
        ck_assert_ptr_nonnull(acts[i]);
    }
    for (size_t i = 0; i < nx; i++)
        acts[0][i] = xf[i];
    for (size_t i = 0; i < no; i++) {
        d1[i] = d1f[i];
        d2[i] = d2f[i];
    }

    /* (B, IN) or (B, T, IN) in; (B, OUT) or (B, T, OUT) out */
    size_t xd[3] = {(size_t)B, T ? T : IN, IN}, dd[3] = {(size_t)B, orows > 1 ? orows : OUT, OUT};
    int xnd = T ? 3 : 2, ond = orows > 1 ? 3 : 2;
    clt_tensor *x = NULL, *dout1 = NULL, *dout2 = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, xnd, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout1, ctx, CLT_DTYPE_F32, ond, dd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout2, ctx, CLT_DTYPE_F32, ond, dd, CLT_MEM_OTHER));
    tc_write(x, xf);
    tc_write(dout1, d1f);
    tc_write(dout2, d2f);

    /* forward: fp32 kernels against float64 (tolerance: atol 1e-5, rtol 1e-4, the project's) */
    char what[256];
    TC_OK(ctx, clt_model_forward(m, x, train, step, &out));
    ck_assert_uint_eq(clt_tensor_numel(out), no);
    ck_assert_int_eq(clt_tensor_ndim(out), ond);
    for (int d = 0; d < ond; d++) ck_assert_uint_eq(clt_tensor_dim(out, d), dd[d]);
    tc_read(out, got);
    host_forward(&h, w, acts, B, train, step);
    snprintf(what, sizeof what, "%s: forward (B %d, train %d)", text, B, (int)train);
    tc_check_close(got, acts[h.n], no, 1e-5, 1e-4, what, r->seed);

    /* backward overwrites poisoned (NaN) gradients */
    tc_poison(clt_model_grads(m));
    TC_OK(ctx, clt_model_backward(m, dout1, false));
    tc_read(clt_model_grads(m), got);
    host_backward(&h, w, acts, d1, B, train, step, g1, s0, s1);
    snprintf(what, sizeof what, "%s: gradients vs host backward", text);
    tc_check_close(got, g1, P, 1e-5, 1e-4, what, r->seed);

    /* central finite differences of f(w) = sum(out * dout) in double, h = 1e-5: truncation
     * and rounding errors are ~1e-10, so the host backward must match to 1e-7 and the device's
     * fp32 gradients to the fp32 tolerance */
    double *wp = malloc(P * sizeof *wp);
    ck_assert_ptr_nonnull(wp);
    memcpy(wp, w, P * sizeof *wp);
    for (size_t i = 0; fd_check && i < P; i++) {
        const double eps = 1e-5;
        wp[i] = w[i] + eps;
        double fp = host_objective(&h, wp, acts, d1, B, train, step);
        wp[i] = w[i] - eps;
        double fm = host_objective(&h, wp, acts, d1, B, train, step);
        wp[i] = w[i];
        fd[i] = (fp - fm) / (2 * eps);
    }
    float *g1f = malloc(P * sizeof *g1f);
    ck_assert_ptr_nonnull(g1f);
    for (size_t i = 0; i < P; i++)
        g1f[i] = (float)g1[i];
    if (fd_check) {
        snprintf(what, sizeof what, "%s: host backward vs finite differences", text);
        tc_check_close(g1f, fd, P, 1e-6, 1e-5, what, r->seed); /* g1 rounded to float */
        snprintf(what, sizeof what, "%s: device gradients vs finite differences", text);
        tc_check_close(got, fd, P, 1e-5, 1e-4, what, r->seed);
    }

    /* accumulate = true adds the gradients of a second backward of the same forward */
    TC_OK(ctx, clt_model_backward(m, dout2, true));
    tc_read(clt_model_grads(m), got);
    host_forward(&h, w, acts, B, train, step);
    host_backward(&h, w, acts, d2, B, train, step, g2, s0, s1);
    for (size_t i = 0; i < P; i++)
        g2[i] += g1[i];
    snprintf(what, sizeof what, "%s: accumulated gradients", text);
    tc_check_close(got, g2, P, 2e-5, 1e-4, what, r->seed);

    clt_tensor_free(x);
    clt_tensor_free(dout1);
    clt_tensor_free(dout2);
    clt_model_free(m);
    for (int i = 0; i <= h.n; i++)
        free(acts[i]);
    free(pf);
    free(w);
    free(wp);
    free(xf);
    free(d1f);
    free(d2f);
    free(got);
    free(d1);
    free(d2);
    free(g1);
    free(g1f);
    free(g2);
    free(fd);
    free(s0);
    free(s1);
}

/* check_spec_seq_fd with the finite differences. */
static void check_spec_seq(clt_ctx *ctx, tc_rng *r, const char *text, size_t T, size_t IN,
                           size_t OUT, size_t max_batch, int B, bool train, uint64_t step)
{
    check_spec_seq_fd(ctx, r, text, T, IN, OUT, max_batch, B, train, step, true);
}

/* check_spec_seq on flat (IN) inputs. */
static void check_spec(clt_ctx *ctx, tc_rng *r, const char *text, size_t IN, size_t OUT,
                       size_t max_batch, int B, bool train, uint64_t step)
{
    check_spec_seq(ctx, r, text, 0, IN, OUT, max_batch, B, train, step);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* Names, shapes and offsets as nn.Sequential's state_dict: activations and dropout count as
 * layers; parameters laid out in order, weight then bias. No GEMM runs here. */
START_TEST(test_names_shapes_offsets)
{
    clt_ctx *ctx = tc_ctx();
    clt_model *m = make_model(ctx, "linear 7, relu, dropout 0.5, linear 3 nobias, tanh, linear 2",
                              5, 2, CLT_INIT_DEFAULT, 1, 4);
    static const struct {
        const char *name;
        int ndim;
        size_t d0, d1, offset;
    } want[] = {
        {"0.weight", 2, 7, 5, 0},  {"0.bias", 1, 7, 0, 35}, {"3.weight", 2, 3, 7, 42},
        {"5.weight", 2, 2, 3, 63}, {"5.bias", 1, 2, 0, 69},
    };
    ck_assert_int_eq(clt_model_param_count(m), 5);
    for (int i = 0; i < 5; i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        ck_assert_ptr_nonnull(pi);
        ck_assert_str_eq(pi->name, want[i].name);
        ck_assert_int_eq(pi->ndim, want[i].ndim);
        ck_assert_uint_eq(pi->dims[0], want[i].d0);
        if (pi->ndim == 2) ck_assert_uint_eq(pi->dims[1], want[i].d1);
        ck_assert_uint_eq(pi->offset, want[i].offset);
        ck_assert_uint_eq(pi->numel, want[i].ndim == 2 ? want[i].d0 * want[i].d1 : want[i].d0);
        ck_assert_int_eq(pi->decays, want[i].ndim == 2); /* weight decay: matrices only */
    }
    ck_assert_ptr_null(clt_model_param_info(m, 5));
    ck_assert_ptr_null(clt_model_param_info(m, -1));
    ck_assert_uint_eq(clt_tensor_numel(clt_model_params(m)), 71);
    ck_assert_uint_eq(clt_tensor_numel(clt_model_grads(m)), 71);
    ck_assert_int_eq(clt_tensor_dtype(clt_model_params(m)), CLT_DTYPE_F32);
    ck_assert_uint_eq(clt_model_in_features(m), 5);
    ck_assert_uint_eq(clt_model_outputs(m), 2);
    ck_assert_uint_eq(clt_model_max_batch(m), 4);
    ck_assert_ptr_eq(clt_model_ctx(m), ctx);
    ck_assert_int_eq(clt_model_spec(m)->n, 6);
    ck_assert_int_eq(clt_model_spec(m)->layers[3].bias, 0);

    /* gradients start at zero */
    float g[71];
    tc_read(clt_model_grads(m), g);
    for (int i = 0; i < 71; i++)
        ck_assert_msg(g[i] == 0.0f, "grad %d = %g", i, (double)g[i]);

    /* accounting: parameters and gradients exactly P floats, activations non-zero */
    struct clt_mem_stats ms = model_mem_stats(ctx);
    ck_assert_uint_eq(ms.by_category[CLT_MEM_PARAMS], 71 * sizeof(float));
    ck_assert_uint_eq(ms.by_category[CLT_MEM_GRADS], 71 * sizeof(float));
    ck_assert_uint_gt(ms.by_category[CLT_MEM_ACTIVATIONS], 0);
    clt_model_free(m);
    ms = model_mem_stats(ctx);
    ck_assert_uint_eq(ms.by_category[CLT_MEM_PARAMS], 0);
    ck_assert_uint_eq(ms.by_category[CLT_MEM_GRADS], 0);
    ck_assert_uint_eq(ms.by_category[CLT_MEM_ACTIVATIONS], 0);
    ck_assert_uint_eq(ms.current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* GPT-2's scheme on a language model: every weight matrix and embedding (the attention's
 * projections, the MLP's linears, the token and position tables) drawn from normal(0, 0.02):
 * mean within 4 standard errors of 0 and standard deviation within 6 % of 0.02 over its
 * elements; every bias 0, layer norm's weight 1 and bias 0; the same bits for the same seed. */
START_TEST(test_init_gpt2)
{
    clt_ctx *ctx = tc_ctx();
    const size_t T = 8, V = 20;
    const char *text = "embed 32, posembed, residual { layernorm, attention 4 causal }, "
                       "residual { layernorm, linear 64, gelu, linear 32 }, layernorm, "
                       "linear V nobias tied";
    clt_model *m = make_model(ctx, text, T, V, CLT_INIT_GPT2, 9, 2);
    clt_model *same = make_model(ctx, text, T, V, CLT_INIT_GPT2, 9, 2);
    float *a = read_params(m), *b = read_params(same);
    size_t P = clt_tensor_numel(clt_model_params(m));
    ck_assert_msg(memcmp(a, b, P * sizeof *a) == 0, "gpt2 init: same seed, different bits");
    int matrices = 0;
    for (int i = 0; i < clt_model_param_count(m); i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        const float *v = a + pi->offset;
        bool norm = strstr(pi->name, "body.0.") || strcmp(pi->name, "4.weight") == 0 ||
                    strcmp(pi->name, "4.bias") == 0;
        if (pi->ndim == 2) {
            double sum = 0, sq = 0;
            for (size_t e = 0; e < pi->numel; e++) sum += v[e];
            double mean = sum / (double)pi->numel;
            for (size_t e = 0; e < pi->numel; e++) sq += (v[e] - mean) * (v[e] - mean);
            double sd = sqrt(sq / (double)(pi->numel - 1));
            ck_assert_msg(fabs(mean) < 4 * 0.02 / sqrt((double)pi->numel) &&
                              fabs(sd - 0.02) < 0.06 * 0.02,
                          "%s: mean %g, standard deviation %g over %zu", pi->name, mean, sd,
                          pi->numel);
            matrices++;
        } else {
            float want = norm && strstr(pi->name, "weight") ? 1.0f : 0.0f;
            for (size_t e = 0; e < pi->numel; e++)
                ck_assert_msg(v[e] == want, "%s[%zu] = %g, expected %g", pi->name, e,
                              (double)v[e], (double)want);
        }
    }
    /* embed, posembed, in_proj_weight, out_proj.weight, the two linears' weights */
    ck_assert_int_eq(matrices, 6);
    clt_init ik;
    ck_assert_int_eq(clt_init_parse("GPT2", &ik), CLT_OK);
    ck_assert_int_eq(ik, CLT_INIT_GPT2);
    free(a);
    free(b);
    clt_model_free(m);
    clt_model_free(same);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Bounds of each scheme, bias zero for kaiming/xavier, spread, and the seed's effect. */
START_TEST(test_init)
{
    clt_ctx *ctx = tc_ctx();
    const size_t IN = 37, H = 29, OUT = 5;
    const char *text = "linear 29, relu, linear 5";
    static const clt_init kinds[] = {CLT_INIT_DEFAULT, CLT_INIT_KAIMING, CLT_INIT_XAVIER};
    for (int k = 0; k < 3; k++) {
        clt_model *m = make_model(ctx, text, IN, OUT, kinds[k], 42, 8);
        clt_model *same = make_model(ctx, text, IN, OUT, kinds[k], 42, 3);
        clt_model *other = make_model(ctx, text, IN, OUT, kinds[k], 43, 8);
        size_t P = clt_tensor_numel(clt_model_params(m));
        ck_assert_uint_eq(P, H * IN + H + OUT * H + OUT);
        float *a = read_params(m), *b = read_params(same), *c = read_params(other);
        ck_assert_msg(memcmp(a, b, P * sizeof *a) == 0, "init %d: same seed, different bits", k);
        size_t differ = 0;
        for (size_t i = 0; i < P; i++)
            differ += a[i] != c[i];
        for (int pi_i = 0; pi_i < clt_model_param_count(m); pi_i++) {
            const struct clt_param_info *pi = clt_model_param_info(m, pi_i);
            bool weight = pi->ndim == 2;
            size_t fan_in = weight ? pi->dims[1] : clt_model_param_info(m, pi_i - 1)->dims[1];
            size_t fan_out = weight ? pi->dims[0] : clt_model_param_info(m, pi_i - 1)->dims[0];
            double bound = 1.0 / sqrt((double)fan_in);
            if (kinds[k] == CLT_INIT_KAIMING) bound = weight ? sqrt(6.0 / (double)fan_in) : 0;
            if (kinds[k] == CLT_INIT_XAVIER)
                bound = weight ? sqrt(6.0 / (double)(fan_in + fan_out)) : 0;
            const float *v = a + pi->offset;
            double lo = INFINITY, hi = -INFINITY;
            for (size_t i = 0; i < pi->numel; i++) {
                /* float rounding of the bound: allow one part in 1e6 */
                ck_assert_msg(fabs(v[i]) <= bound * (1 + 1e-6),
                              "init %d %s[%zu] = %g outside "
                              "+-%g",
                              k, pi->name, i, (double)v[i], bound);
                if (v[i] < lo) lo = v[i];
                if (v[i] > hi) hi = v[i];
            }
            if (bound == 0) {
                ck_assert_msg(lo == 0 && hi == 0, "init %d: %s not zero", k, pi->name);
            } else {
                /* uniform over the interval: with >= 5 draws the range covers a good part of
                 * it and the values are not all equal */
                ck_assert_msg(lo < hi, "init %d: %s all equal", k, pi->name);
                ck_assert_msg(hi - lo > (pi->numel >= 100 ? 1.6 : 0.3) * bound,
                              "init %d: %s spans only [%g, %g] of +-%g", k, pi->name, lo, hi,
                              bound);
            }
        }
        /* the weights differ for another seed (biases of kaiming/xavier are zero in both) */
        ck_assert_msg(differ >= H * IN + OUT * H, "init %d: seed 43 changed only %zu of %zu", k,
                      differ, P);
        free(a);
        free(b);
        free(c);
        clt_model_free(m);
        clt_model_free(same);
        clt_model_free(other);
    }
    clt_init ik;
    ck_assert_int_eq(clt_init_parse("kaiming", &ik), CLT_OK);
    ck_assert_int_eq(ik, CLT_INIT_KAIMING);
    ck_assert_int_eq(clt_init_parse("Xavier", &ik), CLT_OK);
    ck_assert_int_eq(ik, CLT_INIT_XAVIER);
    ck_assert_int_eq(clt_init_parse("default", &ik), CLT_OK);
    ck_assert_int_eq(ik, CLT_INIT_DEFAULT);
    ck_assert_int_ne(clt_init_parse("he", &ik), CLT_OK);
    ck_assert(tc_contains(clt_last_errmsg(), "he"));
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Forward and backward of several small models against the float64 host model and finite
 * differences (every activation, nobias, activations after the last linear layer, flatten, a
 * batch smaller than max_batch, dropout in eval mode). */
START_TEST(test_forward_backward)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    check_spec(ctx, &r, "linear 7, relu, linear 3", 5, 3, 4, 4, false, 0);
    check_spec(ctx, &r, "linear 6, tanh, linear 5 nobias, sigmoid, linear 3, gelu", 4, 3, 9, 9,
               true, 0);
    check_spec(ctx, &r, "flatten, linear 4 nobias, gelu, linear 2, tanh", 3, 2, 9, 5, true, 0);
    check_spec(ctx, &r, "linear 9, sigmoid, dropout 0.5, linear 1, relu", 17, 1, 6, 3, false, 3);
    check_spec(ctx, &r, "linear 8, silu, linear 6, leakyrelu 0.2, linear 4, leakyrelu, linear 3",
               5, 3, 7, 7, true, 0);
    check_spec(ctx, &r, "silu, linear 5, leakyrelu -0.5, linear 2", 6, 2, 4, 3, false, 0);
    check_spec(ctx, &r, "linear 17, layernorm, relu, linear 3, layernorm", 6, 3, 5, 5, true, 0);
    check_spec(ctx, &r, "layernorm, linear 8, gelu, layernorm, linear 1", 33, 1, 4, 3, false, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Shaped inputs: flatten reshapes (C, H, W) to (C*H*W), and the model on (1, 4, 5) inputs is the
 * model on 20 features (the same parameters from the same seed, the same outputs and
 * gradients); a linear layer takes a shaped input as its flattened features. */
START_TEST(test_shaped_input)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    clt_spec s = parse_spec("relu, flatten, linear 6, silu, linear 3");
    struct clt_model_params p = clt_model_default_params();
    p.seed = 5;
    p.max_batch = 4;
    const struct clt__shape chw = {3, {1, 4, 5}};
    clt_model *flat = NULL, *shaped = NULL;
    TC_OK(ctx, clt_model_create(&flat, ctx, &s, 20, 3, &p));
    TC_OK(ctx, clt__model_create_shaped(&shaped, ctx, &s, &chw, 3, &p));
    ck_assert_uint_eq(clt_model_in_features(shaped), 20);
    ck_assert_int_eq(clt_model_param_count(shaped), clt_model_param_count(flat));
    float *pa = read_params(flat), *pb = read_params(shaped);
    size_t P = clt_tensor_numel(clt_model_params(flat));
    ck_assert_uint_eq(clt_tensor_numel(clt_model_params(shaped)), P);
    ck_assert(memcmp(pa, pb, P * sizeof *pa) == 0);

    const size_t B = 3;
    float xf[3 * 20], df[3 * 3], ya[3 * 3], yb[3 * 3];
    float *ga = malloc(P * sizeof *ga), *gb = malloc(P * sizeof *gb);
    ck_assert(ga && gb);
    tc_fill_nonzero(&r, xf, B * 20, 0.1f, 1.5f);
    tc_fill_nonzero(&r, df, B * 3, 0.1f, 1.0f);
    size_t xdims_flat[2] = {B, 20}, xdims_chw[4] = {B, 1, 4, 5}, ddims[2] = {B, 3};
    clt_tensor *xa = NULL, *xb = NULL, *dout = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xa, ctx, CLT_DTYPE_F32, 2, xdims_flat, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&xb, ctx, CLT_DTYPE_F32, 4, xdims_chw, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, ddims, CLT_MEM_OTHER));
    tc_write(xa, xf);
    tc_write(xb, xf);
    tc_write(dout, df);
    TC_OK(ctx, clt_model_forward(flat, xa, true, 0, &out));
    tc_read(out, ya);
    TC_OK(ctx, clt_model_backward(flat, dout, false));
    tc_read(clt_model_grads(flat), ga);
    TC_OK(ctx, clt_model_forward(shaped, xb, true, 0, &out));
    ck_assert_int_eq(clt_tensor_ndim(out), 2);
    tc_read(out, yb);
    TC_OK(ctx, clt_model_backward(shaped, dout, false));
    tc_read(clt_model_grads(shaped), gb);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    ck_assert(memcmp(ga, gb, P * sizeof *ga) == 0);
    clt_tensor_free(xa);
    clt_tensor_free(xb);
    clt_tensor_free(dout);
    clt_model_free(flat);
    clt_model_free(shaped);
    clt_spec_free(&s);
    free(pa);
    free(pb);
    free(ga);
    free(gb);

    /* through the public API (clt_model_params.input_shape), and a linear layer takes a
     * shaped input as its flattened features: no flatten needed, the same results */
    s = parse_spec("relu, linear 6, silu, linear 3");
    struct clt_model_params ps = p;
    ps.input_shape[0] = 1;
    ps.input_shape[1] = 4;
    ps.input_shape[2] = 5;
    TC_OK(ctx, clt_model_create(&flat, ctx, &s, 20, 3, &p));
    TC_OK(ctx, clt_model_create(&shaped, ctx, &s, 20, 3, &ps));
    size_t dims[3];
    ck_assert_int_eq(clt_model_input_shape(shaped, dims), 3);
    ck_assert(dims[0] == 1 && dims[1] == 4 && dims[2] == 5);
    ck_assert_int_eq(clt_model_input_shape(flat, dims), 1);
    ck_assert(dims[0] == 20 && dims[1] == 0);
    TC_OK(ctx, clt_tensor_create(&xa, ctx, CLT_DTYPE_F32, 2, xdims_flat, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&xb, ctx, CLT_DTYPE_F32, 4, xdims_chw, CLT_MEM_OTHER));
    tc_write(xa, xf);
    tc_write(xb, xf);
    TC_OK(ctx, clt_model_forward(flat, xa, false, 0, &out));
    tc_read(out, ya);
    TC_OK(ctx, clt_model_forward(shaped, xb, false, 0, &out));
    tc_read(out, yb);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    clt_tensor_free(xa);
    clt_tensor_free(xb);
    clt_model_free(flat);
    clt_model_free(shaped);
    /* a shape that is not the model's inputs */
    ps.input_shape[2] = 6;
    clt_model *m = NULL;
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 20, 3, &ps), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(clt_ctx_errmsg(ctx),
                     "model input shape 1x4x6 has 24 elements, but the model has 20 inputs");
    clt_spec_free(&s);
    struct clt_mem_stats ms = model_mem_stats(ctx);
    ck_assert_uint_eq(ms.current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* layernorm on a (T, C) input normalises each position over C (R = B T rows of D = C), the
 * model's input handed over flat: "layernorm, flatten, linear 3" on (5, 4) against the float64
 * host layers, forward and every gradient, with weights and biases off 1 and 0. */
START_TEST(test_layernorm_sequence)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    enum { B = 3, T = 5, C = 4, OUT = 3 };
    clt_spec s = parse_spec("layernorm, flatten, linear 3");
    struct clt_model_params p = clt_model_default_params();
    p.seed = 11;
    p.max_batch = 4;
    p.input_shape[0] = T;
    p.input_shape[1] = C;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, T * C, OUT, &p));
    size_t P = clt_tensor_numel(clt_model_params(m));
    ck_assert_uint_eq(P, 2 * C + T * C * OUT + OUT);
    ck_assert_str_eq(clt_model_param_info(m, 0)->name, "0.weight");
    ck_assert_uint_eq(clt_model_param_info(m, 0)->dims[0], C);
    ck_assert_str_eq(clt_model_param_info(m, 1)->name, "0.bias");
    float *pf = read_params(m);
    tc_fill_nonzero(&r, pf, 2 * C, 0.5f, 1.5f);
    TC_OK(ctx, clt_model_write_params(m, pf));
    double w[2 * C + T * C * OUT + OUT], g[2 * C + T * C * OUT + OUT];
    for (size_t i = 0; i < P; i++)
        w[i] = pf[i];
    float xf[B * T * C], df[B * OUT], got[B * T * C * OUT + 64];
    tc_fill_nonzero(&r, xf, B * T * C, 0.1f, 1.5f);
    tc_fill_nonzero(&r, df, B * OUT, 0.1f, 1.0f);
    double x[B * T * C], h[B * T * C], y[B * OUT], d[B * OUT], dh[B * T * C];
    for (int i = 0; i < B * T * C; i++)
        x[i] = xf[i];
    for (int i = 0; i < B * OUT; i++)
        d[i] = df[i];
    size_t xd[2] = {B, T * C}, dd[2] = {B, OUT};
    clt_tensor *xt = NULL, *dout = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
    tc_write(xt, xf);
    tc_write(dout, df);
    TC_OK(ctx, clt_model_forward(m, xt, true, 0, &out));
    tc_read(out, got);
    ref_layernorm_forward(x, w, w + C, h, NULL, NULL, B * T, C, 1e-5);
    ref_linear_forward(h, w + 2 * C, w + 2 * C + T * C * OUT, y, B, T * C, OUT);
    tc_check_close(got, y, B * OUT, 1e-5, 1e-4, "layernorm (T, C): forward", r.seed);
    tc_poison(clt_model_grads(m));
    TC_OK(ctx, clt_model_backward(m, dout, false));
    tc_read(clt_model_grads(m), got);
    ref_linear_backward(h, w + 2 * C, d, dh, g + 2 * C, g + 2 * C + T * C * OUT, B, T * C, OUT);
    ref_layernorm_backward(x, w, dh, NULL, g, g + C, B * T, C, 1e-5);
    tc_check_close(got, g, P, 1e-5, 1e-4, "layernorm (T, C): gradients", r.seed);
    clt_tensor_free(xt);
    clt_tensor_free(dout);
    clt_model_free(m);
    clt_spec_free(&s);
    free(pf);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Layers on sequences (T, C): linear acts on each position (nn.Linear on the last dimension,
 * one GEMM over the B*T rows, weight and bias gradients summed over them), the element-wise
 * kinds and dropout keep the shape, layernorm normalises each position, flatten makes it flat,
 * and residual { layernorm, linear 4C, gelu, linear C } (the pre-norm block's non-attention
 * half) adds its body to its input; each against the float64 host model, forward and gradients
 * (host backward and finite differences), with the fused linear+activation paths and apart. */
START_TEST(test_sequence_layers)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    /* linear alone: (5, 4) -> (5, 6); nobias; odd sizes */
    check_spec_seq(ctx, &r, "linear 6", 5, 4, 6, 4, 3, false, 0);
    check_spec_seq(ctx, &r, "linear 7 nobias, relu, linear 3", 3, 5, 3, 5, 5, true, 0);
    /* element-wise kinds and dropout on (T, C); flatten to one row per sample */
    check_spec_seq(ctx, &r, "gelu, linear 6, silu, dropout 0.3, linear 5, tanh, linear 3", 7, 3,
                   3, 4, 4, true, 2);
    check_spec_seq(ctx, &r, "linear 5, sigmoid, flatten, linear 2", 3, 4, 2, 3, 3, true, 0);
    /* the example of the model's documentation: layernorm, linear 64, gelu, linear 32 on (8, 32) */
    check_spec_seq(ctx, &r, "layernorm, linear 64, gelu, linear 32", 8, 32, 32, 2, 2, true, 0);
    /* the pre-norm block (C = 8, T = 5), then a final layernorm and a head, as GPT's; two blocks
     * with a dropout in the second (its own stream) */
    const char *block = "residual { layernorm, linear 32, gelu, linear 8 }, layernorm, linear 5";
    check_spec_seq(ctx, &r, block, 5, 8, 5, 3, 3, true, 0);
    check_spec_seq(ctx, &r,
                   "residual { layernorm, linear 12, gelu, linear 3 }, residual { layernorm, "
                   "linear 12, gelu, dropout 0.25, linear 3 }, layernorm, linear 4",
                   6, 3, 4, 2, 2, true, 1);
    setenv("CLTRAIN_FUSE", "0", 1); /* the same, every layer apart */
    check_spec_seq(ctx, &r, block, 5, 8, 5, 3, 3, true, 0);
    check_spec_seq(ctx, &r, "linear 7 nobias, relu, linear 3", 3, 5, 3, 5, 5, true, 0);
    unsetenv("CLTRAIN_FUSE");
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The model's output shape on sequences, before creating and after; what does not fit a
 * sequence is refused with the layer and the shapes named. */
START_TEST(test_sequence_shapes)
{
    clt_ctx *ctx = tc_ctx();
    struct clt_model_params p = clt_model_default_params();
    p.max_batch = 2;
    p.input_shape[0] = 5;
    p.input_shape[1] = 8;
    size_t o[3];
    int nd = -1;
    /* (T, OUT) after a per-position linear layer; flat after a flatten; (OUT) on flat inputs */
    clt_spec s = parse_spec("residual { layernorm, linear 32, gelu, linear 8 }, linear 3");
    TC_OK(ctx, clt_model_output_shape_of(&s, 40, 3, &p, o, &nd));
    ck_assert(nd == 2 && o[0] == 5 && o[1] == 3 && o[2] == 0);
    uint64_t P = 0;
    TC_OK(ctx, clt_model_param_elements(&s, 40, 3, &p, &P));
    ck_assert_uint_eq(P, 2 * 8 + 32 * 8 + 32 + 8 * 32 + 8 + 3 * 8 + 3); /* weights per row */
    clt_spec_free(&s);
    s = parse_spec("layernorm, linear 6, gelu, linear 3");
    TC_OK(ctx, clt_model_output_shape_of(&s, 40, 3, NULL, o, &nd)); /* flat (40) */
    ck_assert(nd == 1 && o[0] == 3 && o[1] == 0);
    clt_spec_free(&s);
    s = parse_spec("layernorm, flatten, linear 3");
    TC_OK(ctx, clt_model_output_shape_of(&s, 40, 3, &p, o, &nd));
    ck_assert(nd == 1 && o[0] == 3 && o[1] == 0);
    clt_spec_free(&s);
    /* the block's body must give back its input's shape */
    s = parse_spec("residual { layernorm, linear 32, gelu, linear 16 }, linear 3");
    ck_assert_int_eq(clt_model_output_shape_of(&s, 40, 3, &p, o, &nd), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(nd, 0);
    clt_model *m = NULL;
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 40, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "layer 1 (residual") &&
                      tc_contains(clt_ctx_errmsg(ctx), "maps its input 5x8 to 5x16") &&
                      tc_contains(clt_ctx_errmsg(ctx), "the identity needs the same shape"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_spec_free(&s);
    /* a convolution takes (C, H, W), not (T, C) */
    s = parse_spec("conv 4 k1, linear 3");
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 40, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "layer 1") &&
                      tc_contains(clt_ctx_errmsg(ctx), "5x8"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_spec_free(&s);
    /* forward takes (B, T, C) or its B*T*C elements flat; backward (B, T, OUT)'s count */
    s = parse_spec("linear 6, relu, linear 3");
    TC_OK(ctx, clt_model_create(&m, ctx, &s, 40, 3, &p));
    ck_assert_int_eq(clt_model_output_shape(m, o), 2);
    ck_assert(o[0] == 5 && o[1] == 3 && o[2] == 0);
    ck_assert_uint_eq(clt_model_outputs(m), 3);
    ck_assert_uint_eq(clt_model_param_info(m, 0)->dims[0], 6);
    ck_assert_uint_eq(clt_model_param_info(m, 0)->dims[1], 8);
    size_t xd[2] = {2, 40}, bad[2] = {2, 3};
    clt_tensor *x = NULL, *d = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_zeros(&x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&d, ctx, CLT_DTYPE_F32, 2, bad, CLT_MEM_OTHER));
    TC_OK(ctx, clt_model_forward(m, x, false, 0, &out));
    ck_assert(clt_tensor_ndim(out) == 3 && clt_tensor_dim(out, 1) == 5 &&
              clt_tensor_dim(out, 2) == 3);
    ck_assert_int_eq(clt_model_backward(m, d, false), CLT_ERR_SHAPE);
    ck_assert_str_eq(clt_ctx_errmsg(ctx),
                     "model backward: gradient has 6 elements, expected (2, 5x3)");
    clt_tensor_free(x);
    clt_tensor_free(d);
    clt_model_free(m);
    clt_spec_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The memory estimate is what the model allocates, per category, for every layer kind, in
 * every precision; the parameter count is the flat tensors' length. */
START_TEST(test_estimate_every_kind)
{
    clt_ctx *ctx = tc_ctx();
    const char *specs[] = {
        "flatten, linear 9, relu, linear 7 nobias, gelu, dropout 0.3, linear 5, tanh, sigmoid, "
        "silu, leakyrelu 0.1, flatten",
        "silu, linear 6, leakyrelu, linear 5, flatten",
        "linear 5, dropout 0.1", "layernorm, linear 6, layernorm, relu, linear 5, layernorm"};
    /* on sequences (3, 4) of 12 inputs: per-position layers, a layer after the last linear one
     * (mixed precision: its gradient buffers as wide as the (3, 5) output) */
    const char *seq_specs[] = {
        "residual { layernorm, linear 8, gelu, linear 4 }, layernorm, linear 5, dropout 0.1",
        "linear 6, relu, dropout 0.2, linear 5", "layernorm, flatten, linear 5, dropout 0.3",
        "residual { layernorm, attention 2 causal }, layernorm, linear 5",
        "attention 4 nobias, linear 6, attention 3, flatten, linear 5, dropout 0.1",
        "linear 4, attention 1 causal, linear 5"};
    const size_t nflat = sizeof specs / sizeof *specs, nseq = sizeof seq_specs / sizeof *seq_specs;
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t si = 0; si < nflat + nseq; si++)
        for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
            bool seq = si >= nflat;
            const char *text = seq ? seq_specs[si - nflat] : specs[si];
            size_t F = seq ? 12 : 11;
            clt_spec s = parse_spec(text);
            struct clt_model_params p = clt_model_default_params();
            p.max_batch = 13;
            p.precision = precs[pi];
            p.input_shape[0] = seq ? 3 : 0;
            p.input_shape[1] = seq ? 4 : 0;
            uint64_t est[CLT_MEM__COUNT] = {0}, P = 0;
            TC_OK(ctx, clt_model_mem_estimate(&s, F, 5, &p, est));
            TC_OK(ctx, clt_model_param_elements(&s, F, 5, &p, &P));
            clt_model *m = NULL;
            TC_OK(ctx, clt_model_create(&m, ctx, &s, F, 5, &p));
            ck_assert_uint_eq(P, clt_tensor_numel(clt_model_params(m)));
            struct clt_mem_stats ms = model_mem_stats(ctx);
            for (int c = 0; c < CLT_MEM__COUNT; c++)
                ck_assert_msg(est[c] == ms.by_category[c], "%s (%s) category %d: estimate %llu, "
                              "allocated %llu", text, clt_dtype_name(precs[pi]), c,
                              (unsigned long long)est[c],
                              (unsigned long long)ms.by_category[c]);
            clt_model_free(m);
            clt_spec_free(&s);
        }
    clt_spec bad = parse_spec("linear 4");
    uint64_t P = 7;
    ck_assert_int_eq(clt_model_param_elements(&bad, 11, 5, NULL, &P), CLT_ERR_INVALID_ARG);
    ck_assert_uint_eq(P, 0);
    clt_spec_free(&bad);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Dropout in train mode: the mask of the host Philox for (seed, step, layer), the same in
 * backward; a different step gives a different mask; eval mode is the identity. */
START_TEST(test_dropout)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    /* forward/backward checks with the mask, at two steps */
    check_spec(ctx, &r, "linear 12, dropout 0.4, relu, linear 3", 6, 3, 8, 8, true, 0);
    check_spec(ctx, &r, "linear 12, dropout 0.4, relu, linear 3", 6, 3, 8, 8, true, 5);

    /* the mask itself: "linear 40 nobias, dropout 0.3" with identity-like weights makes the
     * output the dropped input */
    const size_t F = 40, B = 5;
    clt_model *m = make_model(ctx, "linear 40 nobias, dropout 0.3", F, F, CLT_INIT_DEFAULT, 99, B);
    float *w = calloc(F * F, sizeof *w), *xf = malloc(B * F * sizeof *xf),
          *y0 = malloc(B * F * sizeof *y0), *y1 = malloc(B * F * sizeof *y1);
    ck_assert(w && xf && y0 && y1);
    for (size_t i = 0; i < F; i++)
        w[i * F + i] = 1.0f;
    TC_OK(ctx, clt_model_write_params(m, w));
    tc_fill_nonzero(&r, xf, B * F, 0.5f, 2.0f);
    size_t xd[2] = {B, F};
    clt_tensor *x = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    tc_write(x, xf);
    TC_OK(ctx, clt_model_forward(m, x, true, 7, &out));
    tc_read(out, y0);
    size_t dropped = 0;
    uint64_t stream = clt_rng_stream(CLT_RNG_DROPOUT, 7 * 2 + 1); /* step 7, 2 layers, layer 1 */
    for (size_t i = 0; i < B * F; i++) {
        bool keep = clt_rng_uniform(99, stream, i) >= 0.3f;
        double want = keep ? xf[i] / (1.0 - 0.3f) : 0.0;
        ck_assert_msg(fabs(y0[i] - want) <= 1e-5 + 1e-5 * fabs(want),
                      "dropout element %zu: got %g, want %g (keep %d)", i, (double)y0[i], want,
                      (int)keep);
        dropped += !keep;
    }
    /* 200 draws at p = 0.3: 60 expected; [30, 90] is more than 6 standard deviations wide */
    ck_assert_msg(dropped >= 30 && dropped <= 90, "dropped %zu of %zu", dropped, B * F);
    TC_OK(ctx, clt_model_forward(m, x, true, 8, &out));
    tc_read(out, y1);
    ck_assert_msg(memcmp(y0, y1, B * F * sizeof *y0) != 0, "step 8 gave step 7's mask");
    TC_OK(ctx, clt_model_forward(m, x, false, 7, &out));
    tc_read(out, y1);
    for (size_t i = 0; i < B * F; i++)
        ck_assert_msg(y1[i] == xf[i], "eval mode element %zu: %g != %g", i, (double)y1[i],
                      (double)xf[i]);
    clt_tensor_free(x);
    clt_model_free(m);
    free(w);
    free(xf);
    free(y0);
    free(y1);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Dropouts inside a residual block draw streams of their own, after the top-level layers'
 * (rng_index): "linear 40 nobias, residual { dropout 0.3, dropout 0.5 }, linear 40 nobias" with
 * identity weights gives y = x + x m1 m2 / (0.7 * 0.5), m1 from stream step * 5 + 3 and m2 from
 * step * 5 + 4 (3 layers and 2 children). Two dropouts sharing one stream would keep the same
 * elements. */
START_TEST(test_dropout_in_block)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t F = 40, B = 5;
    const uint64_t seed = 31, step = 3;
    clt_model *m = make_model(ctx,
                              "linear 40 nobias, residual { dropout 0.3, dropout 0.5 }, "
                              "linear 40 nobias",
                              F, F, CLT_INIT_DEFAULT, seed, B);
    float *w = calloc(2 * F * F, sizeof *w), *xf = malloc(B * F * sizeof *xf),
          *y = malloc(B * F * sizeof *y);
    ck_assert(w && xf && y);
    for (size_t i = 0; i < 2 * F; i++)
        w[i * F + i % F] = 1.0f;
    TC_OK(ctx, clt_model_write_params(m, w));
    tc_fill_nonzero(&r, xf, B * F, 0.5f, 2.0f);
    size_t xd[2] = {B, F};
    clt_tensor *x = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    tc_write(x, xf);
    TC_OK(ctx, clt_model_forward(m, x, true, step, &out));
    tc_read(out, y);
    const uint64_t s1 = clt_rng_stream(CLT_RNG_DROPOUT, step * 5 + 3),
                   s2 = clt_rng_stream(CLT_RNG_DROPOUT, step * 5 + 4);
    size_t differ = 0;
    for (size_t i = 0; i < B * F; i++) {
        bool k1 = clt_rng_uniform(seed, s1, i) >= 0.3f, k2 = clt_rng_uniform(seed, s2, i) >= 0.5f;
        double want = xf[i] + (k1 && k2 ? xf[i] / (0.7 * 0.5) : 0.0);
        ck_assert_msg(fabs(y[i] - want) <= 1e-5 + 1e-5 * fabs(want),
                      "element %zu: got %g, want %g (keep %d %d)", i, (double)y[i], want, (int)k1,
                      (int)k2);
        differ += k1 != k2;
    }
    ck_assert_msg(differ > 20, "the two masks differ in only %zu of %zu elements", differ, B * F);
    clt_tensor_free(x);
    clt_model_free(m);
    free(w);
    free(xf);
    free(y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Bad specs, shapes, dtypes, batch sizes and ctxs are refused before anything is enqueued. */
START_TEST(test_rejects)
{
    clt_ctx *ctx = tc_ctx(), *other = tc_ctx();
    clt_spec s = parse_spec("linear 4, relu, linear 3");
    struct clt_model_params p = clt_model_default_params();
    p.max_batch = 4;
    clt_model *m = NULL;
    /* last linear layer 3 wide, data with 2 classes */
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 5, 2, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "3") && tc_contains(clt_last_errmsg(), "2"),
                  "message: %s", clt_last_errmsg());
    p.max_batch = 0;
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 5, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    p.max_batch = 4;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, 5, 3, &p));
    clt_spec_free(&s);

    size_t good[2] = {4, 5}, wide[2] = {4, 6}, big[2] = {5, 5}, dd[2] = {4, 3}, bad_d[2] = {4, 2};
    clt_tensor *x = NULL, *xw = NULL, *xb = NULL, *xi = NULL, *xo = NULL, *out = NULL, *dbad = NULL,
               *dother = NULL;
    TC_OK(ctx, clt_tensor_zeros(&x, ctx, CLT_DTYPE_F32, 2, good, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&xw, ctx, CLT_DTYPE_F32, 2, wide, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&xb, ctx, CLT_DTYPE_F32, 2, big, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&xi, ctx, CLT_DTYPE_I32, 2, good, CLT_MEM_OTHER));
    TC_OK(other, clt_tensor_zeros(&xo, other, CLT_DTYPE_F32, 2, good, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_zeros(&dbad, ctx, CLT_DTYPE_F32, 2, bad_d, CLT_MEM_OTHER));
    TC_OK(other, clt_tensor_zeros(&dother, other, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));

    ck_assert_int_eq(clt_model_forward(m, xw, true, 0, &out), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "5"), "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(clt_model_forward(m, xb, true, 0, &out), CLT_ERR_SHAPE); /* B > max_batch */
    ck_assert_int_eq(clt_model_forward(m, xi, true, 0, &out), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_model_forward(m, xo, true, 0, &out), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_model_backward(m, dbad, false), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_model_backward(m, dother, false), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_ptr_null(out);
    (void)x;

    clt_tensor_free(x);
    clt_tensor_free(xw);
    clt_tensor_free(xb);
    clt_tensor_free(xi);
    clt_tensor_free(xo);
    clt_tensor_free(dbad);
    clt_tensor_free(dother);
    clt_model_free(m);
    struct clt_mem_stats ms = model_mem_stats(ctx);
    ck_assert_uint_eq(ms.current, 0);
    clt_ctx_free(ctx);
    clt_ctx_free(other);
    tc_assert_no_live();
}
END_TEST

/* ---- pooling on shaped inputs ------------------------------------------------------------- */

/* The float64 host model of a spec of pooling layers, relu, flatten and (k = 1) convolutions
 * ending in one linear layer, on inputs (B, in): y (B, OUT) from the weights w read back, and
 * with dout the gradients (P) of sum(y * dout). Scratch is allocated here. */
static void pool_host(const clt_model *m, const struct clt__shape *in, const double *x, int B,
                      const double *w, const double *dout, double *y, double *grads)
{
    const clt_spec *s = clt_model_spec(m);
    ck_assert_int_le(s->n, MAXL);
    size_t widest = 8 * (size_t)B * clt__shape_numel(in); /* checked below */
    double *acts[MAXL + 1];
    struct clt__shape shp[MAXL + 1];
    int param[MAXL];
    shp[0] = *in;
    acts[0] = malloc(widest * sizeof(double));
    ck_assert_ptr_nonnull(acts[0]);
    memcpy(acts[0], x, (size_t)B * clt__shape_numel(in) * sizeof(double));
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        const clt_layer_spec *l = &s->layers[i];
        const struct clt__shape *si = &shp[i];
        struct clt__shape *so = &shp[i + 1];
        *so = *si;
        param[i] = k;
        acts[i + 1] = malloc(widest * sizeof(double));
        ck_assert_ptr_nonnull(acts[i + 1]);
        const double *a = acts[i];
        double *b = acts[i + 1];
        int BC = B * (int)si->d[0], H = (int)si->d[1], W = (int)si->d[2];
        switch (l->kind) {
        case CLT_LAYER_MAXPOOL:
        case CLT_LAYER_AVGPOOL:
            so->d[1] = (si->d[1] - (size_t)l->k) / (size_t)l->stride + 1;
            so->d[2] = (si->d[2] - (size_t)l->k) / (size_t)l->stride + 1;
            ref_pool_forward(l->kind == CLT_LAYER_MAXPOOL, a, b, BC, H, W, l->k, l->k, l->stride,
                             l->stride);
            break;
        case CLT_LAYER_GLOBALAVGPOOL:
            so->ndim = 1;
            ref_pool_forward(0, a, b, BC, H, W, H, W, H, W);
            break;
        case CLT_LAYER_RELU:
            ref_act_forward(REF_ACT_RELU, a, b, (size_t)B * clt__shape_numel(si));
            break;
        case CLT_LAYER_FLATTEN:
            so->ndim = 1;
            so->d[0] = clt__shape_numel(si);
            memcpy(b, a, (size_t)B * so->d[0] * sizeof *b);
            break;
        case CLT_LAYER_LINEAR: {
            so->ndim = 1;
            so->d[0] = (size_t)l->out;
            const struct clt_param_info *wi = clt_model_param_info(m, k++);
            const struct clt_param_info *bi = l->bias ? clt_model_param_info(m, k++) : NULL;
            ref_linear_forward(a, w + wi->offset, bi ? w + bi->offset : NULL, b, B,
                               (int)si->d[0], l->out);
            break;
        }
        default: /* a conv 1x1: per pixel, out[o] = sum_c W[o][c] in[c] + bias[o] */
            ck_assert_int_eq(l->kind, CLT_LAYER_CONV);
            ck_assert_int_eq(l->k, 1);
            so->d[0] = (size_t)l->out;
            const struct clt_param_info *wi = clt_model_param_info(m, k++);
            const struct clt_param_info *bi = l->bias ? clt_model_param_info(m, k++) : NULL;
            size_t C = si->d[0], HW = si->d[1] * si->d[2];
            for (int bb = 0; bb < B; bb++)
                for (size_t o = 0; o < (size_t)l->out; o++)
                    for (size_t p = 0; p < HW; p++) {
                        double acc = bi ? w[bi->offset + o] : 0.0;
                        for (size_t c = 0; c < C; c++)
                            acc += w[wi->offset + o * C + c] * a[((size_t)bb * C + c) * HW + p];
                        b[((size_t)bb * (size_t)l->out + o) * HW + p] = acc;
                    }
            break;
        }
        ck_assert_uint_le((size_t)B * clt__shape_numel(so), widest);
    }
    size_t OUT = clt__shape_numel(&shp[s->n]);
    memcpy(y, acts[s->n], (size_t)B * OUT * sizeof *y);

    /* backward: dy into dx, layer by layer */
    size_t P = clt_tensor_numel(clt_model_params(m));
    memset(grads, 0, P * sizeof *grads);
    double *dy = malloc(widest * sizeof *dy), *dx = malloc(widest * sizeof *dx);
    ck_assert(dy && dx);
    memcpy(dy, dout, (size_t)B * OUT * sizeof *dy);
    for (int i = s->n - 1; i >= 0; i--) {
        const clt_layer_spec *l = &s->layers[i];
        const struct clt__shape *si = &shp[i];
        int BC = B * (int)si->d[0], H = (int)si->d[1], W = (int)si->d[2];
        switch (l->kind) {
        case CLT_LAYER_MAXPOOL:
        case CLT_LAYER_AVGPOOL:
            ref_pool_backward(l->kind == CLT_LAYER_MAXPOOL, acts[i], dy, dx, BC, H, W, l->k, l->k,
                              l->stride, l->stride);
            break;
        case CLT_LAYER_GLOBALAVGPOOL:
            ref_pool_backward(0, NULL, dy, dx, BC, H, W, H, W, H, W);
            break;
        case CLT_LAYER_RELU:
            ref_act_backward(REF_ACT_RELU, acts[i], dy, dx, (size_t)B * clt__shape_numel(si));
            break;
        case CLT_LAYER_FLATTEN:
            memcpy(dx, dy, (size_t)B * clt__shape_numel(si) * sizeof *dx);
            break;
        case CLT_LAYER_LINEAR: {
            const struct clt_param_info *wi = clt_model_param_info(m, param[i]);
            const struct clt_param_info *bi =
                l->bias ? clt_model_param_info(m, param[i] + 1) : NULL;
            ref_linear_backward(acts[i], w + wi->offset, dy, dx, grads + wi->offset,
                                bi ? grads + bi->offset : NULL, B, (int)si->d[0], l->out);
            break;
        }
        default: { /* the conv 1x1 */
            const struct clt_param_info *wi = clt_model_param_info(m, param[i]);
            const struct clt_param_info *bi =
                l->bias ? clt_model_param_info(m, param[i] + 1) : NULL;
            size_t C = si->d[0], HW = si->d[1] * si->d[2], O = (size_t)l->out;
            memset(dx, 0, (size_t)B * C * HW * sizeof *dx);
            for (int bb = 0; bb < B; bb++)
                for (size_t o = 0; o < O; o++)
                    for (size_t p = 0; p < HW; p++) {
                        double g = dy[((size_t)bb * O + o) * HW + p];
                        if (bi) grads[bi->offset + o] += g;
                        for (size_t c = 0; c < C; c++) {
                            size_t xi = ((size_t)bb * C + c) * HW + p;
                            grads[wi->offset + o * C + c] += g * acts[i][xi];
                            dx[xi] += g * w[wi->offset + o * C + c];
                        }
                    }
            break;
        }
        }
        double *t = dy;
        dy = dx;
        dx = t;
    }
    for (int i = 0; i <= s->n; i++)
        free(acts[i]);
    free(dy);
    free(dx);
}

/* One spec on inputs of shape `in`: the output and the gradients against the host model (at
 * batch B and at a smaller batch), and the memory estimate against the accountant in every
 * precision. */
static void check_pool_spec(clt_ctx *ctx, tc_rng *r, const char *text, struct clt__shape in,
                            size_t OUT, int max_batch)
{
    clt_spec s = parse_spec(text);
    struct clt_model_params p = clt_model_default_params();
    p.seed = tc_u64(r);
    p.max_batch = (size_t)max_batch;
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
        p.precision = precs[pi];
        uint64_t est[CLT_MEM__COUNT] = {0};
        TC_OK(ctx, clt__model_mem_estimate_shaped(&s, &in, OUT, &p, est));
        clt_model *m = NULL;
        TC_OK(ctx, clt__model_create_shaped(&m, ctx, &s, &in, OUT, &p));
        struct clt_mem_stats ms = model_mem_stats(ctx);
        for (int c = 0; c < CLT_MEM__COUNT; c++)
            ck_assert_msg(est[c] == ms.by_category[c],
                          "%s (%s) category %d: estimate %llu, allocated %llu", text,
                          clt_dtype_name(precs[pi]), c, (unsigned long long)est[c],
                          (unsigned long long)ms.by_category[c]);
        clt_model_free(m);
    }
    p.precision = CLT_DTYPE_F32;
    clt_model *m = NULL;
    TC_OK(ctx, clt__model_create_shaped(&m, ctx, &s, &in, OUT, &p));
    size_t F = clt__shape_numel(&in), P = clt_tensor_numel(clt_model_params(m));
    float *pf = read_params(m);
    double *w = malloc(P * sizeof *w), *g = malloc(P * sizeof *g);
    ck_assert(w && g);
    for (size_t i = 0; i < P; i++)
        w[i] = pf[i];
    for (int B = max_batch; B >= 1; B -= max_batch - 1 > 0 ? max_batch - 1 : 1) {
        size_t nx = (size_t)B * F, no = (size_t)B * OUT;
        float *xf = malloc(nx * sizeof *xf), *df = malloc(no * sizeof *df),
              *got = malloc((no > P ? no : P) * sizeof *got);
        double *xd = malloc(nx * sizeof *xd), *dd = malloc(no * sizeof *dd),
               *y = malloc(no * sizeof *y);
        ck_assert(xf && df && got && xd && dd && y);
        tc_fill_nonzero(r, xf, nx, 0.1f, 1.5f);
        tc_fill_nonzero(r, df, no, 0.1f, 1.0f);
        for (size_t i = 0; i < nx; i++)
            xd[i] = xf[i];
        for (size_t i = 0; i < no; i++)
            dd[i] = df[i];
        size_t xdims[4] = {(size_t)B, in.d[0], in.d[1], in.d[2]}, ddims[2] = {(size_t)B, OUT};
        clt_tensor *x = NULL, *dout = NULL, *out = NULL;
        TC_OK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 1 + in.ndim, xdims, CLT_MEM_OTHER));
        TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, ddims, CLT_MEM_OTHER));
        tc_write(x, xf);
        tc_write(dout, df);
        TC_OK(ctx, clt_model_forward(m, x, true, 0, &out));
        ck_assert_uint_eq(clt_tensor_numel(out), no);
        tc_read(out, got);
        pool_host(m, &in, xd, B, w, dd, y, g);
        char what[256];
        snprintf(what, sizeof what, "%s: forward (B %d)", text, B);
        tc_check_close(got, y, no, 1e-5, 1e-4, what, r->seed);
        tc_poison(clt_model_grads(m));
        TC_OK(ctx, clt_model_backward(m, dout, false));
        tc_read(clt_model_grads(m), got);
        snprintf(what, sizeof what, "%s: gradients (B %d)", text, B);
        tc_check_close(got, g, P, 1e-5, 1e-4, what, r->seed);
        clt_tensor_free(x);
        clt_tensor_free(dout);
        free(xf);
        free(df);
        free(got);
        free(xd);
        free(dd);
        free(y);
        if (B == 1) break;
    }
    clt_model_free(m);
    clt_spec_free(&s);
    free(pf);
    free(w);
    free(g);
}

/* maxpool, avgpool and globalavgpool in models on (C, H, W) inputs: outputs and gradients
 * against the host model, the estimate against the accountant; a flat input or a window larger
 * than the input is refused with a message naming the layer. */
START_TEST(test_pool_layers)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const struct clt__shape s266 = {3, {2, 6, 6}}, s379 = {3, {3, 7, 9}};
    check_pool_spec(ctx, &r, "maxpool 2, flatten, linear 3", s266, 3, 4);
    check_pool_spec(ctx, &r, "avgpool 2 s1, globalavgpool, linear 3", s266, 3, 4);
    check_pool_spec(ctx, &r, "maxpool 3 s2, relu, avgpool 2, flatten, linear 4 nobias", s379, 4,
                    5);
    check_pool_spec(ctx, &r, "globalavgpool, linear 2", s379, 2, 3);
    /* after a layer with weights the pools' backward runs too (a 1x1 conv: per-pixel linear) */
    check_pool_spec(ctx, &r, "conv 3 k1, maxpool 3 s2, relu, avgpool 2 s1, flatten, linear 4",
                    s379, 4, 5);
    check_pool_spec(ctx, &r, "conv 4 k1 nobias, maxpool 2, globalavgpool, linear 3", s266, 3, 4);

    clt_spec s = parse_spec("maxpool 2, flatten, linear 3");
    struct clt_model_params p = clt_model_default_params();
    p.max_batch = 4;
    clt_model *m = NULL;
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, 20, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(clt_ctx_errmsg(ctx),
                     "model spec: layer 1 (maxpool 2) needs a (C,H,W) input, got 20");
    uint64_t est[CLT_MEM__COUNT] = {0};
    ck_assert_int_eq(clt_model_mem_estimate(&s, 20, 3, &p, est), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1 (maxpool 2) needs a (C,H,W) input, got 20");
    clt_spec_free(&s);
    s = parse_spec("avgpool 3 s2, flatten, linear 3");
    const struct clt__shape thin = {3, {1, 2, 5}};
    ck_assert_int_eq(clt__model_create_shaped(&m, ctx, &s, &thin, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_ctx_errmsg(ctx), "model spec: layer 1 (avgpool 3 s2): the 3x3 window is "
                                          "larger than the input 1x2x5 (C x H x W)");
    clt_spec_free(&s);
    s = parse_spec("flatten, globalavgpool, linear 3");
    ck_assert_int_eq(clt__model_create_shaped(&m, ctx, &s, &s266, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_ctx_errmsg(ctx),
                     "model spec: layer 2 (globalavgpool) needs a (C,H,W) input, got 72");
    clt_spec_free(&s);
    struct clt_mem_stats ms = model_mem_stats(ctx);
    ck_assert_uint_eq(ms.current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- convolution ------------------------------------------------------------------------- */

/* "conv 4 k3 p1, relu, flatten, linear 3" (optionally with s2 and nobias) on (B, 2, 6, 5)
 * inputs against a float64 host forward and backward (ref_conv2d_*, itself checked by finite
 * differences in tests/nn/test_ref.c): output, gradients overwriting poison, accumulation.
 * fp32 tolerance atol 1e-5, rtol 1e-4 (sums of at most 120 products of values below 1.5). */
static void check_conv_model(clt_ctx *ctx, tc_rng *r, const char *text, int S, bool bias)
{
    const int B = 3, C = 2, H = 6, W = 5, OUT = 4, K = 3, P = 1, N = 3;
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1, F = OUT * OH * OW;
    const struct clt__shape in = {3, {(size_t)C, (size_t)H, (size_t)W}};
    clt_spec s = parse_spec(text);
    struct clt_model_params p = clt_model_default_params();
    p.seed = tc_u64(r);
    p.max_batch = 4;
    clt_model *m = NULL;
    TC_OK(ctx, clt__model_create_shaped(&m, ctx, &s, &in, (size_t)N, &p));
    clt_spec_free(&s);
    /* parameters as nn.Conv2d's and nn.Linear's state_dict */
    ck_assert_int_eq(clt_model_param_count(m), bias ? 4 : 3);
    const struct clt_param_info *cw = clt_model_param_info(m, 0);
    ck_assert_str_eq(cw->name, "0.weight");
    ck_assert_int_eq(cw->ndim, 4);
    ck_assert_uint_eq(cw->dims[0], OUT);
    ck_assert_uint_eq(cw->dims[1], C);
    ck_assert_uint_eq(cw->dims[2], K);
    ck_assert_uint_eq(cw->dims[3], K);
    ck_assert_uint_eq(cw->numel, OUT * C * K * K);
    const struct clt_param_info *lw = clt_model_param_info(m, bias ? 2 : 1);
    ck_assert_str_eq(lw->name, "3.weight");
    ck_assert_uint_eq(lw->dims[1], F);
    const size_t Pn = clt_tensor_numel(clt_model_params(m));
    const size_t woff = cw->offset, boff = bias ? clt_model_param_info(m, 1)->offset : 0,
                 lwoff = lw->offset, lboff = clt_model_param_info(m, bias ? 3 : 2)->offset;

    float *pf = read_params(m);
    /* default init: +-1/sqrt(C K K) for the conv's weight and bias */
    for (size_t i = 0; i < cw->numel; i++)
        ck_assert(fabs(pf[woff + i]) <= 1.0 / sqrt((double)(C * K * K)) * (1 + 1e-6));
    double *w = malloc(Pn * sizeof *w);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < Pn; i++)
        w[i] = pf[i];

    const size_t nx = (size_t)B * C * H * W, nh = (size_t)B * F, no = (size_t)B * N;
    float *xf = malloc(nx * sizeof *xf), *df = malloc(no * sizeof *df),
          *got = malloc((Pn > no ? Pn : no) * sizeof *got);
    double *x = malloc(nx * sizeof *x), *h = malloc(nh * sizeof *h), *a = malloc(nh * sizeof *a),
           *y = malloc(no * sizeof *y), *d = malloc(no * sizeof *d), *da = malloc(nh * sizeof *da),
           *g = calloc(Pn, sizeof *g), *g2 = calloc(Pn, sizeof *g2);
    ck_assert(xf && df && got && x && h && a && y && d && da && g && g2);
    tc_fill_nonzero(r, xf, nx, 0.1f, 1.5f);
    for (size_t i = 0; i < nx; i++)
        x[i] = xf[i];

    size_t xd[4] = {(size_t)B, (size_t)C, (size_t)H, (size_t)W}, dd[2] = {(size_t)B, (size_t)N};
    clt_tensor *xt = NULL, *dt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 4, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
    tc_write(xt, xf);

    /* host forward: conv, relu, (flatten), linear */
    ref_conv2d_forward(x, w + woff, bias ? w + boff : NULL, h, B, C, H, W, OUT, K, S, P);
    ref_act_forward(REF_ACT_RELU, h, a, nh);
    ref_linear_forward(a, w + lwoff, w + lboff, y, B, F, N);
    TC_OK(ctx, clt_model_forward(m, xt, true, 0, &out));
    tc_read(out, got);
    char what[160];
    snprintf(what, sizeof what, "%s: forward", text);
    tc_check_close(got, y, no, 1e-5, 1e-4, what, r->seed);

    for (int pass = 0; pass < 2; pass++) {
        tc_fill_nonzero(r, df, no, 0.1f, 1.0f);
        for (size_t i = 0; i < no; i++)
            d[i] = df[i];
        tc_write(dt, df);
        /* host backward into g (pass 0) or g2 = g + this pass (pass 1) */
        double *gg = pass ? g2 : g;
        double *dconv = malloc(nh * sizeof *dconv);
        ck_assert_ptr_nonnull(dconv);
        ref_linear_backward(a, w + lwoff, d, da, gg + lwoff, gg + lboff, B, F, N);
        ref_act_backward(REF_ACT_RELU, h, da, dconv, nh);
        ref_conv2d_backward(x, w + woff, dconv, NULL, gg + woff, bias ? gg + boff : NULL, B, C, H,
                            W, OUT, K, S, P);
        free(dconv);
        if (pass) {
            for (size_t i = 0; i < Pn; i++)
                g2[i] += g[i];
        } else {
            tc_poison(clt_model_grads(m));
        }
        TC_OK(ctx, clt_model_backward(m, dt, pass == 1));
        tc_read(clt_model_grads(m), got);
        snprintf(what, sizeof what, "%s: gradients%s", text, pass ? " accumulated" : "");
        tc_check_close(got, gg, Pn, 2e-5, 1e-4, what, r->seed);
    }
    clt_tensor_free(xt);
    clt_tensor_free(dt);
    clt_model_free(m);
    void *hs[] = {pf, w, xf, df, got, x, h, a, y, d, da, g, g2};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        free(hs[i]);
}

/* A convolution on a shaped input: forward and backward against the host, in a smaller batch
 * than max_batch too; the estimate is what the model allocates in every precision (the
 * workspace included); 16-bit storage runs close to fp32; the spec errors that need a shape. */
START_TEST(test_conv_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    check_conv_model(ctx, &r, "conv 4 k3 p1, relu, flatten, linear 3", 1, true);
    check_conv_model(ctx, &r, "conv 4 k3 s2 p1 nobias, relu, flatten, linear 3", 2, false);

    const struct clt__shape in = {3, {2, 6, 5}};
    const char *specs[] = {"conv 4 k3 p1, relu, flatten, linear 3",
                           "conv 5 k3 s2 p1, relu, conv 3 k1 nobias, flatten, linear 3"};
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t si = 0; si < 2; si++)
        for (size_t pi = 0; pi < 3; pi++) {
            clt_spec s = parse_spec(specs[si]);
            struct clt_model_params p = clt_model_default_params();
            p.max_batch = 7;
            p.precision = precs[pi];
            uint64_t est[CLT_MEM__COUNT] = {0};
            TC_OK(ctx, clt__model_mem_estimate_shaped(&s, &in, 3, &p, est));
            ck_assert_uint_gt(est[CLT_MEM_WORKSPACE], 0);
            clt_model *m = NULL;
            TC_OK(ctx, clt__model_create_shaped(&m, ctx, &s, &in, 3, &p));
            struct clt_mem_stats ms = model_mem_stats(ctx);
            for (int c = 0; c < CLT_MEM__COUNT; c++)
                ck_assert_msg(est[c] == ms.by_category[c],
                              "%s (%s) category %d: estimate %llu, allocated %llu", specs[si],
                              clt_dtype_name(precs[pi]), c, (unsigned long long)est[c],
                              (unsigned long long)ms.by_category[c]);
            /* a forward and backward run in every precision; 16-bit outputs near fp32's */
            const size_t B = 5, nx = B * 60;
            float xf[5 * 60], df[5 * 3], yo[5 * 3];
            tc_fill_nonzero(&r, xf, nx, 0.1f, 1.5f);
            tc_fill_nonzero(&r, df, B * 3, 0.1f, 1.0f);
            size_t xd[4] = {B, 2, 6, 5}, dd[2] = {B, 3};
            clt_tensor *xt = NULL, *dt = NULL, *out = NULL;
            TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 4, xd, CLT_MEM_OTHER));
            TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
            tc_write(xt, xf);
            tc_write(dt, df);
            TC_OK(ctx, clt_model_forward(m, xt, true, 0, &out));
            tc_read(out, yo);
            tc_poison(clt_model_grads(m));
            TC_OK(ctx, clt_model_backward(m, dt, false));
            size_t Pn = clt_tensor_numel(clt_model_grads(m));
            float *gr = malloc(Pn * sizeof *gr);
            ck_assert_ptr_nonnull(gr);
            tc_read(clt_model_grads(m), gr);
            for (size_t i = 0; i < Pn; i++)
                ck_assert_msg(isfinite(gr[i]), "%s (%s): gradient %zu is %g", specs[si],
                              clt_dtype_name(precs[pi]), i, (double)gr[i]);
            for (size_t i = 0; i < B * 3; i++)
                ck_assert(isfinite(yo[i]));
            free(gr);
            clt_tensor_free(xt);
            clt_tensor_free(dt);
            clt_model_free(m);
            clt_spec_free(&s);
        }

    /* a conv needs a shaped input, a kernel that fits, and a linear layer after it */
    clt_spec s = parse_spec("conv 4 k3, flatten, linear 3");
    uint64_t P = 0, est[CLT_MEM__COUNT] = {0};
    ck_assert_int_eq(clt_model_param_elements(&s, 784, 3, NULL, &P), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1 (conv 4 k3) needs a (C,H,W) input, got 784");
    const struct clt__shape tiny = {3, {1, 2, 9}};
    ck_assert_int_eq(clt__model_mem_estimate_shaped(&s, &tiny, 3, NULL, est), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(), "model spec: layer 1 (conv 4 k3): the 3x3 kernel does not "
                                        "fit the input 1x2x9 padded by 0");
    clt_spec_free(&s);
    s = parse_spec("flatten, linear 3, conv 4 k3");
    clt_model *m = NULL;
    ck_assert_int_eq(clt__model_create_shaped(&m, ctx, &s, &in, 3, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "the last layer with weights is layer 3 (conv)"));
    clt_spec_free(&s);
    ck_assert_uint_eq(model_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- batch normalisation ----------------------------------------------------------------- */

/* "conv 4 k3 p1, batchnorm, relu, flatten, linear 3" on (B, 2, 6, 5) inputs (through
 * clt_model_params.input_shape) against a float64 host model (ref_conv2d_*, ref_batchnorm_*):
 * weight 1 and bias 0 whatever the init scheme, the buffers' names, the training forward and
 * backward, the running statistics and num_batches_tracked after three training forwards, the
 * evaluation forward from the running statistics (and different from the training one), and
 * estimate == accountant in every precision, for BatchNorm2d and BatchNorm1d. Tolerances: fp32
 * atol 1e-4, rtol 1e-4 (normalised values carry the f32 variance's relative error). */
START_TEST(test_batchnorm_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const int B = 3, C = 2, H = 6, W = 5, OUT = 4, K = 3, P = 1, N = 3, HW = H * W;
    const int F = OUT * HW;
    clt_spec s = parse_spec("conv 4 k3 p1, batchnorm, relu, flatten, linear 3");
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = tc_u64(&r);
    mp.max_batch = 4;
    mp.init = CLT_INIT_KAIMING;
    mp.input_shape[0] = (size_t)C;
    mp.input_shape[1] = (size_t)H;
    mp.input_shape[2] = (size_t)W;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, (size_t)(C * H * W), (size_t)N, &mp));
    ck_assert_int_eq(clt_model_param_count(m), 6);
    ck_assert_str_eq(clt_model_param_info(m, 2)->name, "1.weight");
    ck_assert_str_eq(clt_model_param_info(m, 3)->name, "1.bias");
    ck_assert_uint_eq(clt_model_param_info(m, 2)->numel, OUT);
    /* weight decay: conv's and linear's weights take it, biases and batchnorm's weight and
     * bias do not */
    static const bool decays[6] = {true, false, false, false, true, false};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(clt_model_param_info(m, i)->decays == decays[i], "%s: decays %d",
                      clt_model_param_info(m, i)->name, clt_model_param_info(m, i)->decays);
    ck_assert_int_eq(clt_model_buffer_count(m), 3);
    ck_assert_str_eq(clt_model_buffer_info(m, 0)->name, "1.running_mean");
    ck_assert_str_eq(clt_model_buffer_info(m, 1)->name, "1.running_var");
    ck_assert_str_eq(clt_model_buffer_info(m, 2)->name, "1.num_batches_tracked");
    ck_assert(clt_model_buffer_info(m, 2)->i64 && clt_model_buffer_info(m, 2)->ndim == 0);
    ck_assert_uint_eq(clt_model_buffer_info(m, 0)->numel, OUT);
    ck_assert_ptr_null(clt_model_buffer_info(m, 3));
    const size_t Pn = clt_tensor_numel(clt_model_params(m));
    const size_t cwo = clt_model_param_info(m, 0)->offset, cbo = clt_model_param_info(m, 1)->offset,
                 bwo = clt_model_param_info(m, 2)->offset, bbo = clt_model_param_info(m, 3)->offset,
                 lwo = clt_model_param_info(m, 4)->offset, lbo = clt_model_param_info(m, 5)->offset;
    float *pf = read_params(m);
    for (int c = 0; c < OUT; c++) {
        ck_assert(pf[bwo + c] == 1.0f);
        ck_assert(pf[bbo + c] == 0.0f);
    }
    /* give the batchnorm other weights than 1 and 0, so that they matter */
    for (int c = 0; c < OUT; c++) {
        pf[bwo + c] = (float)tc_uniform(&r, 0.5, 1.5);
        pf[bbo + c] = (float)tc_uniform(&r, -0.5, 0.5);
    }
    TC_OK(ctx, clt_model_write_params(m, pf));
    double *w = malloc(Pn * sizeof *w);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < Pn; i++) w[i] = pf[i];

    const size_t nx = (size_t)B * C * H * W, nh = (size_t)B * F, no = (size_t)B * N;
    float xf[3 * 60], df[9], got[64 * 4 + 512];
    double x[3 * 60], h[3 * 120], hn[3 * 120], a[3 * 120], y[9], d[9], da[3 * 120], dh[3 * 120],
        dn[3 * 120];
    double *g = calloc(Pn, sizeof *g), rm[4] = {0, 0, 0, 0}, rv[4] = {1, 1, 1, 1};
    ck_assert_ptr_nonnull(g);
    ck_assert(Pn <= sizeof got / sizeof *got);
    size_t xd[4] = {(size_t)B, (size_t)C, (size_t)H, (size_t)W}, dd[2] = {(size_t)B, (size_t)N};
    clt_tensor *xt = NULL, *dt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 4, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
    for (int step = 0; step < 3; step++) {
        tc_fill_nonzero(&r, xf, nx, 0.1f, 1.5f);
        for (size_t i = 0; i < nx; i++) x[i] = xf[i];
        tc_write(xt, xf);
        ref_conv2d_forward(x, w + cwo, w + cbo, h, B, C, H, W, OUT, K, 1, P);
        ref_batchnorm_forward_train(h, w + bwo, w + bbo, hn, NULL, NULL, B, OUT, HW, 1e-5);
        ref_batchnorm_update_running(h, rm, rv, B, OUT, HW, 0.1);
        ref_act_forward(REF_ACT_RELU, hn, a, nh);
        ref_linear_forward(a, w + lwo, w + lbo, y, B, F, N);
        TC_OK(ctx, clt_model_forward(m, xt, true, (uint64_t)step, &out));
        tc_read(out, got);
        tc_check_close(got, y, no, 1e-4, 1e-4, "batchnorm model: training forward", r.seed);
    }
    /* backward of the last forward */
    tc_fill_nonzero(&r, df, no, 0.1f, 1.0f);
    for (size_t i = 0; i < no; i++) d[i] = df[i];
    tc_write(dt, df);
    ref_linear_backward(a, w + lwo, d, da, g + lwo, g + lbo, B, F, N);
    ref_act_backward(REF_ACT_RELU, hn, da, dn, nh);
    ref_batchnorm_backward(h, w + bwo, dn, dh, g + bwo, g + bbo, B, OUT, HW, 1e-5);
    ref_conv2d_backward(x, w + cwo, dh, NULL, g + cwo, g + cbo, B, C, H, W, OUT, K, 1, P);
    tc_poison(clt_model_grads(m));
    TC_OK(ctx, clt_model_backward(m, dt, false));
    tc_read(clt_model_grads(m), got);
    tc_check_close(got, g, Pn, 1e-4, 1e-3, "batchnorm model: gradients", r.seed);
    /* running statistics and the count */
    float bf[3 * 4 * 5];
    int64_t cnt = -1;
    size_t nbf = 0, nbi = 0;
    clt_model_buffer_sizes(m, &nbf, &nbi);
    ck_assert_uint_eq(nbf, 2 * OUT + 4 * OUT); /* running statistics and the scratch */
    ck_assert_uint_eq(nbi, 1);
    TC_OK(ctx, clt_model_read_buffers(m, bf, &cnt, CLT_WAIT_READ));
    ck_assert_int_eq(cnt, 3);
    tc_check_close(bf + clt_model_buffer_info(m, 0)->offset, rm, OUT, 1e-5, 1e-4,
                   "batchnorm model: running_mean", r.seed);
    tc_check_close(bf + clt_model_buffer_info(m, 1)->offset, rv, OUT, 1e-5, 1e-4,
                   "batchnorm model: running_var", r.seed);
    /* evaluation: the running statistics, not the batch's; no count */
    ref_batchnorm_forward_eval(h, w + bwo, w + bbo, rm, rv, hn, B, OUT, HW, 1e-5);
    ref_act_forward(REF_ACT_RELU, hn, a, nh);
    ref_linear_forward(a, w + lwo, w + lbo, y, B, F, N);
    TC_OK(ctx, clt_model_forward(m, xt, false, 0, &out));
    tc_read(out, got);
    tc_check_close(got, y, no, 1e-4, 1e-4, "batchnorm model: evaluation forward", r.seed);
    ref_batchnorm_forward_train(h, w + bwo, w + bbo, hn, NULL, NULL, B, OUT, HW, 1e-5);
    ref_act_forward(REF_ACT_RELU, hn, a, nh);
    ref_linear_forward(a, w + lwo, w + lbo, y, B, F, N);
    double diff = 0;
    for (size_t i = 0; i < no; i++) diff = fmax(diff, fabs(got[i] - y[i]));
    ck_assert_msg(diff > 1e-3, "evaluation forward equals the training one (%g)", diff);
    TC_OK(ctx, clt_model_read_buffers(m, NULL, &cnt, CLT_WAIT_READ));
    ck_assert_int_eq(cnt, 3);
    /* backward after an evaluation forward is refused */
    ck_assert_int_eq(clt_model_backward(m, dt, false), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "needs a training forward"));
    clt_tensor_free(xt);
    clt_tensor_free(dt);
    clt_model_free(m);
    clt_spec_free(&s);
    free(pf);
    free(w);
    free(g);

    /* estimate == accountant, BatchNorm2d and BatchNorm1d, every precision; a run is finite */
    const char *specs[] = {"conv 4 k3 p1, batchnorm, relu, flatten, linear 3",
                           "batchnorm, flatten, linear 6, batchnorm, relu, linear 3, batchnorm"};
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t si = 0; si < 2; si++)
        for (size_t pi = 0; pi < 3; pi++) {
            clt_spec s2 = parse_spec(specs[si]);
            struct clt_model_params p2 = mp;
            p2.max_batch = 7;
            p2.precision = precs[pi];
            uint64_t est[CLT_MEM__COUNT] = {0};
            TC_OK(ctx, clt_model_mem_estimate(&s2, 60, 3, &p2, est));
            clt_model *m2 = NULL;
            TC_OK(ctx, clt_model_create(&m2, ctx, &s2, 60, 3, &p2));
            struct clt_mem_stats ms = model_mem_stats(ctx);
            for (int c = 0; c < CLT_MEM__COUNT; c++)
                ck_assert_msg(est[c] == ms.by_category[c],
                              "%s (%s) category %d: estimate %llu, allocated %llu", specs[si],
                              clt_dtype_name(precs[pi]), c, (unsigned long long)est[c],
                              (unsigned long long)ms.by_category[c]);
            float xf2[5 * 60], df2[5 * 3], yo[5 * 3];
            tc_fill_nonzero(&r, xf2, 5 * 60, 0.1f, 1.5f);
            tc_fill_nonzero(&r, df2, 5 * 3, 0.1f, 1.0f);
            size_t xd2[2] = {5, 60}, dd2[2] = {5, 3};
            clt_tensor *xt2 = NULL, *dt2 = NULL, *o2 = NULL;
            TC_OK(ctx, clt_tensor_create(&xt2, ctx, CLT_DTYPE_F32, 2, xd2, CLT_MEM_OTHER));
            TC_OK(ctx, clt_tensor_create(&dt2, ctx, CLT_DTYPE_F32, 2, dd2, CLT_MEM_OTHER));
            tc_write(xt2, xf2);
            tc_write(dt2, df2);
            TC_OK(ctx, clt_model_forward(m2, xt2, true, 0, &o2));
            tc_read(o2, yo);
            TC_OK(ctx, clt_model_backward(m2, dt2, false));
            size_t Pn2 = clt_tensor_numel(clt_model_grads(m2));
            float *gr = malloc(Pn2 * sizeof *gr);
            ck_assert_ptr_nonnull(gr);
            tc_read(clt_model_grads(m2), gr);
            for (size_t i = 0; i < Pn2; i++)
                ck_assert_msg(isfinite(gr[i]), "%s (%s): gradient %zu is %g", specs[si],
                              clt_dtype_name(precs[pi]), i, (double)gr[i]);
            for (size_t i = 0; i < 15; i++) ck_assert(isfinite(yo[i]));
            free(gr);
            clt_tensor_free(xt2);
            clt_tensor_free(dt2);
            clt_model_free(m2);
            clt_spec_free(&s2);
        }
    ck_assert_uint_eq(model_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- residual blocks ---------------------------------------------------------------------- */

static size_t param_off(const clt_model *m, const char *name)
{
    for (int i = 0; i < clt_model_param_count(m); i++)
        if (strcmp(clt_model_param_info(m, i)->name, name) == 0)
            return clt_model_param_info(m, i)->offset;
    ck_abort_msg("no parameter \"%s\"", name);
    return 0;
}

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* An identity block (body conv, batchnorm, relu, conv, batchnorm) and a projecting one (stride 2,
 * 4 -> 6 channels, a batchnorm in the body: the shortcut is conv 1x1 s2 then batchnorm) on
 * (B, 2, 6, 5) inputs against a float64 host forward and backward (ref_conv2d_*,
 * ref_batchnorm_*): the names of the parameters and buffers, the training forward, every
 * gradient; then estimate == accountant and finite passes in f32, f16 and bf16 for blocks at
 * the start of the model (an f32 input: the shortcut is cast) and projections without a
 * batchnorm. */
START_TEST(test_residual_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const int B = 3, C = 2, H = 6, W = 5, N = 3, HW = H * W;
    const char *text = "conv 4 k3 p1, residual { conv 4 k3 p1, batchnorm, relu, conv 4 k3 p1, "
                       "batchnorm }, relu, residual { conv 6 k3 s2 p1, batchnorm, relu, "
                       "conv 6 k3 p1 }, relu, globalavgpool, linear 3";
    clt_spec s = parse_spec(text);
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = tc_u64(&r);
    mp.max_batch = 4;
    mp.input_shape[0] = (size_t)C;
    mp.input_shape[1] = (size_t)H;
    mp.input_shape[2] = (size_t)W;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, (size_t)(C * H * W), (size_t)N, &mp));
    const char *names[] = {"0.weight", "0.bias", "1.body.0.weight", "1.body.0.bias",
                           "1.body.1.weight", "1.body.1.bias", "1.body.3.weight", "1.body.3.bias",
                           "1.body.4.weight", "1.body.4.bias", "3.body.0.weight", "3.body.0.bias",
                           "3.body.1.weight", "3.body.1.bias", "3.body.3.weight", "3.body.3.bias",
                           "3.proj.0.weight", "3.proj.1.weight", "3.proj.1.bias", "6.weight",
                           "6.bias"};
    ck_assert_int_eq(clt_model_param_count(m), 21);
    for (int i = 0; i < 21; i++) ck_assert_str_eq(clt_model_param_info(m, i)->name, names[i]);
    ck_assert_int_eq(clt_model_param_info(m, 16)->ndim, 4);
    ck_assert_uint_eq(clt_model_param_info(m, 16)->dims[0], 6);
    ck_assert_uint_eq(clt_model_param_info(m, 16)->dims[1], 4);
    ck_assert_uint_eq(clt_model_param_info(m, 16)->dims[2], 1);
    ck_assert_int_eq(clt_model_buffer_count(m), 12);
    ck_assert_str_eq(clt_model_buffer_info(m, 0)->name, "1.body.1.running_mean");
    ck_assert_str_eq(clt_model_buffer_info(m, 5)->name, "1.body.4.num_batches_tracked");
    ck_assert_str_eq(clt_model_buffer_info(m, 9)->name, "3.proj.1.running_mean");
    const size_t Pn = clt_tensor_numel(clt_model_params(m));
    float *pf = read_params(m);
    /* batchnorm weights other than 1 and 0, so that they matter */
    for (int i = 0; i < 21; i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        if (strstr(pi->name, ".1.") || strstr(pi->name, ".4."))
            for (size_t e = 0; e < pi->numel; e++)
                pf[pi->offset + e] =
                    (float)(strstr(pi->name, "weight") ? tc_uniform(&r, 0.5, 1.5)
                                                       : tc_uniform(&r, -0.5, 0.5));
    }
    TC_OK(ctx, clt_model_write_params(m, pf));
    double *w = dalloc(Pn), *g = dalloc(Pn);
    for (size_t i = 0; i < Pn; i++) w[i] = pf[i];
#define WP(name) (w + param_off(m, name))
#define GP(name) (g + param_off(m, name))
    const size_t nx = (size_t)B * C * HW, n4 = (size_t)B * 4 * HW, n6 = (size_t)B * 6 * 9;
    double *x = dalloc(nx), *h0 = dalloc(n4), *b0 = dalloc(n4), *b1 = dalloc(n4),
           *b2 = dalloc(n4), *b3 = dalloc(n4), *b4 = dalloc(n4), *y1 = dalloc(n4),
           *a2 = dalloc(n4), *c0 = dalloc(n6), *c1 = dalloc(n6), *c2 = dalloc(n6),
           *c3 = dalloc(n6), *p0 = dalloc(n6), *p1 = dalloc(n6), *y3 = dalloc(n6),
           *a4 = dalloc(n6), *g5 = dalloc((size_t)B * 6), *y = dalloc((size_t)B * N),
           *d = dalloc((size_t)B * N), *t4 = dalloc(n4), *u4 = dalloc(n4), *t6 = dalloc(n6),
           *u6 = dalloc(n6), *da2 = dalloc(n4), *dg5 = dalloc((size_t)B * 6);
    float *xf = malloc(nx * sizeof *xf), df[9], got[16];
    ck_assert_ptr_nonnull(xf);
    tc_fill_nonzero(&r, xf, nx, 0.1f, 1.5f);
    for (size_t i = 0; i < nx; i++) x[i] = xf[i];
    ref_conv2d_forward(x, WP("0.weight"), WP("0.bias"), h0, B, C, H, W, 4, 3, 1, 1);
    ref_conv2d_forward(h0, WP("1.body.0.weight"), WP("1.body.0.bias"), b0, B, 4, H, W, 4, 3, 1, 1);
    ref_batchnorm_forward_train(b0, WP("1.body.1.weight"), WP("1.body.1.bias"), b1, NULL, NULL, B,
                                4, HW, 1e-5);
    ref_act_forward(REF_ACT_RELU, b1, b2, n4);
    ref_conv2d_forward(b2, WP("1.body.3.weight"), WP("1.body.3.bias"), b3, B, 4, H, W, 4, 3, 1, 1);
    ref_batchnorm_forward_train(b3, WP("1.body.4.weight"), WP("1.body.4.bias"), b4, NULL, NULL, B,
                                4, HW, 1e-5);
    for (size_t i = 0; i < n4; i++) y1[i] = b4[i] + h0[i];
    ref_act_forward(REF_ACT_RELU, y1, a2, n4);
    ref_conv2d_forward(a2, WP("3.body.0.weight"), WP("3.body.0.bias"), c0, B, 4, H, W, 6, 3, 2, 1);
    ref_batchnorm_forward_train(c0, WP("3.body.1.weight"), WP("3.body.1.bias"), c1, NULL, NULL, B,
                                6, 9, 1e-5);
    ref_act_forward(REF_ACT_RELU, c1, c2, n6);
    ref_conv2d_forward(c2, WP("3.body.3.weight"), WP("3.body.3.bias"), c3, B, 6, 3, 3, 6, 3, 1, 1);
    ref_conv2d_forward(a2, WP("3.proj.0.weight"), NULL, p0, B, 4, H, W, 6, 1, 2, 0);
    ref_batchnorm_forward_train(p0, WP("3.proj.1.weight"), WP("3.proj.1.bias"), p1, NULL, NULL, B,
                                6, 9, 1e-5);
    for (size_t i = 0; i < n6; i++) y3[i] = c3[i] + p1[i];
    ref_act_forward(REF_ACT_RELU, y3, a4, n6);
    for (int b = 0; b < B * 6; b++) {
        double sum = 0;
        for (int e = 0; e < 9; e++) sum += a4[(size_t)b * 9 + (size_t)e];
        g5[b] = sum / 9;
    }
    ref_linear_forward(g5, WP("6.weight"), WP("6.bias"), y, B, 6, N);
    size_t xd[4] = {(size_t)B, (size_t)C, (size_t)H, (size_t)W}, dd[2] = {(size_t)B, (size_t)N};
    clt_tensor *xt = NULL, *dt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 4, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
    tc_write(xt, xf);
    TC_OK(ctx, clt_model_forward(m, xt, true, 0, &out));
    tc_read(out, got);
    tc_check_close(got, y, (size_t)B * N, 1e-4, 1e-4, "residual model: training forward", r.seed);
    /* backward */
    tc_fill_nonzero(&r, df, (size_t)B * N, 0.1f, 1.0f);
    for (int i = 0; i < B * N; i++) d[i] = df[i];
    tc_write(dt, df);
    ref_linear_backward(g5, WP("6.weight"), d, dg5, GP("6.weight"), GP("6.bias"), B, 6, N);
    for (size_t i = 0; i < n6; i++) t6[i] = dg5[i / 9] / 9;
    ref_act_backward(REF_ACT_RELU, y3, t6, u6, n6); /* u6: d y3 */
    /* shortcut: batchnorm, then the 1x1 convolution */
    ref_batchnorm_backward(p0, WP("3.proj.1.weight"), u6, t6, GP("3.proj.1.weight"),
                           GP("3.proj.1.bias"), B, 6, 9, 1e-5);
    ref_conv2d_backward(a2, WP("3.proj.0.weight"), t6, da2, GP("3.proj.0.weight"), NULL, B, 4, H,
                        W, 6, 1, 2, 0);
    /* body */
    double *e6 = dalloc(n6);
    ref_conv2d_backward(c2, WP("3.body.3.weight"), u6, t6, GP("3.body.3.weight"),
                        GP("3.body.3.bias"), B, 6, 3, 3, 6, 3, 1, 1);
    ref_act_backward(REF_ACT_RELU, c1, t6, e6, n6);
    ref_batchnorm_backward(c0, WP("3.body.1.weight"), e6, t6, GP("3.body.1.weight"),
                           GP("3.body.1.bias"), B, 6, 9, 1e-5);
    ref_conv2d_backward(a2, WP("3.body.0.weight"), t6, t4, GP("3.body.0.weight"),
                        GP("3.body.0.bias"), B, 4, H, W, 6, 3, 2, 1);
    for (size_t i = 0; i < n4; i++) da2[i] += t4[i];
    double *dy1 = dalloc(n4);
    ref_act_backward(REF_ACT_RELU, y1, da2, dy1, n4);
    ref_batchnorm_backward(b3, WP("1.body.4.weight"), dy1, t4, GP("1.body.4.weight"),
                           GP("1.body.4.bias"), B, 4, HW, 1e-5);
    ref_conv2d_backward(b2, WP("1.body.3.weight"), t4, u4, GP("1.body.3.weight"),
                        GP("1.body.3.bias"), B, 4, H, W, 4, 3, 1, 1);
    ref_act_backward(REF_ACT_RELU, b1, u4, t4, n4);
    ref_batchnorm_backward(b0, WP("1.body.1.weight"), t4, u4, GP("1.body.1.weight"),
                           GP("1.body.1.bias"), B, 4, HW, 1e-5);
    ref_conv2d_backward(h0, WP("1.body.0.weight"), u4, t4, GP("1.body.0.weight"),
                        GP("1.body.0.bias"), B, 4, H, W, 4, 3, 1, 1);
    for (size_t i = 0; i < n4; i++) t4[i] += dy1[i]; /* the identity shortcut */
    ref_conv2d_backward(x, WP("0.weight"), t4, NULL, GP("0.weight"), GP("0.bias"), B, C, H, W, 4,
                        3, 1, 1);
    float *gf = malloc(Pn * sizeof *gf);
    ck_assert_ptr_nonnull(gf);
    tc_poison(clt_model_grads(m));
    TC_OK(ctx, clt_model_backward(m, dt, false));
    tc_read(clt_model_grads(m), gf);
    for (int i = 0; i < 21; i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        tc_check_close(gf + pi->offset, g + pi->offset, pi->numel, 1e-4, 1e-3, pi->name, r.seed);
    }
#undef WP
#undef GP
    double *all[] = {x, h0, b0, b1, b2, b3, b4, y1, a2, c0, c1, c2, c3, p0, p1, y3, a4, g5, y, d,
                     t4, u4, t6, u6, da2, dg5, e6, dy1, w, g};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    free(xf);
    free(gf);
    free(pf);
    clt_tensor_free(xt);
    clt_tensor_free(dt);
    clt_model_free(m);
    clt_spec_free(&s);

    /* estimate == accountant in every precision; finite passes */
    const char *specs[] = {text, "residual { conv 2 k3 p1, relu }, relu, flatten, linear 3",
                           "residual { relu, conv 3 k3 s2 p1 }, globalavgpool, linear 3",
                           "conv 3 k1, residual { batchnorm, relu, conv 5 k3 p1 }, flatten, "
                           "linear 3"};
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t si = 0; si < sizeof specs / sizeof *specs; si++)
        for (size_t pi = 0; pi < 3; pi++) {
            clt_spec s2 = parse_spec(specs[si]);
            struct clt_model_params p2 = mp;
            p2.max_batch = 7;
            p2.precision = precs[pi];
            uint64_t est[CLT_MEM__COUNT] = {0};
            TC_OK(ctx, clt_model_mem_estimate(&s2, 60, 3, &p2, est));
            clt_model *m2 = NULL;
            TC_OK(ctx, clt_model_create(&m2, ctx, &s2, 60, 3, &p2));
            clt_spec_free(&s2); /* the model keeps its own copy of the blocks */
            struct clt_mem_stats ms = model_mem_stats(ctx);
            for (int c = 0; c < CLT_MEM__COUNT; c++)
                ck_assert_msg(est[c] == ms.by_category[c],
                              "%s (%s) category %d: estimate %llu, allocated %llu", specs[si],
                              clt_dtype_name(precs[pi]), c, (unsigned long long)est[c],
                              (unsigned long long)ms.by_category[c]);
            float xf2[5 * 60], df2[5 * 3], yo[5 * 3];
            tc_fill_nonzero(&r, xf2, 5 * 60, 0.1f, 1.5f);
            tc_fill_nonzero(&r, df2, 5 * 3, 0.1f, 1.0f);
            size_t xd2[2] = {5, 60}, dd2[2] = {5, 3};
            clt_tensor *xt2 = NULL, *dt2 = NULL, *o2 = NULL;
            TC_OK(ctx, clt_tensor_create(&xt2, ctx, CLT_DTYPE_F32, 2, xd2, CLT_MEM_OTHER));
            TC_OK(ctx, clt_tensor_create(&dt2, ctx, CLT_DTYPE_F32, 2, dd2, CLT_MEM_OTHER));
            tc_write(xt2, xf2);
            tc_write(dt2, df2);
            TC_OK(ctx, clt_model_forward(m2, xt2, true, 0, &o2));
            tc_read(o2, yo);
            TC_OK(ctx, clt_model_backward(m2, dt2, false));
            size_t Pn2 = clt_tensor_numel(clt_model_grads(m2));
            float *gr = malloc(Pn2 * sizeof *gr);
            ck_assert_ptr_nonnull(gr);
            tc_read(clt_model_grads(m2), gr);
            size_t nonzero = 0;
            for (size_t i = 0; i < Pn2; i++) {
                ck_assert_msg(isfinite(gr[i]), "%s (%s): gradient %zu is %g", specs[si],
                              clt_dtype_name(precs[pi]), i, (double)gr[i]);
                nonzero += gr[i] != 0;
            }
            ck_assert_msg(nonzero > Pn2 / 2, "%s (%s): %zu of %zu gradients are not 0", specs[si],
                          clt_dtype_name(precs[pi]), nonzero, Pn2);
            for (size_t i = 0; i < 15; i++) ck_assert(isfinite(yo[i]));
            free(gr);
            clt_tensor_free(xt2);
            clt_tensor_free(dt2);
            clt_model_free(m2);
        }
    /* no 1x1 stride fits, a flat input whose width changes */
    const char *bad[] = {"residual { conv 4 k3 }, flatten, linear 3",
                         "flatten, residual { linear 5 }, linear 3"};
    for (size_t i = 0; i < 2; i++) {
        clt_spec s3 = parse_spec(bad[i]);
        clt_model *m3 = NULL;
        ck_assert_int_eq(clt_model_create(&m3, ctx, &s3, 60, 3, &mp), CLT_ERR_INVALID_ARG);
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "layer ") &&
                          tc_contains(clt_ctx_errmsg(ctx), "no shortcut fits"),
                      "%s", clt_ctx_errmsg(ctx));
        clt_spec_free(&s3);
    }
    ck_assert_uint_eq(model_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A batchnorm runs the relu right after it (clt__layer_kind.absorbs): the outputs, gradients
 * and running statistics have the bits of the layers apart (CLTRAIN_FUSE=0), at the top level
 * and in a residual body, in training and evaluation. */
START_TEST(test_fused_batchnorm_relu)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t B = 3, C = 2, H = 6, W = 5, N = 3, IN = C * H * W;
    clt_spec s = parse_spec("conv 4 k3 p1, batchnorm, relu, residual { conv 4 k3 p1, batchnorm, "
                            "relu, conv 4 k3 p1, batchnorm }, relu, flatten, linear 3");
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = tc_u64(&r);
    mp.max_batch = 4;
    mp.input_shape[0] = C;
    mp.input_shape[1] = H;
    mp.input_shape[2] = W;
    float *x = malloc(B * IN * sizeof *x), *d = malloc(B * N * sizeof *d);
    ck_assert(x && d);
    tc_fill_nonzero(&r, x, B * IN, 0.1f, 1.0f);
    tc_fill_nonzero(&r, d, B * N, 0.1f, 1.0f);
    float *out[2][2], *grads[2], *bufs[2];
    size_t Pn = 0, Bn = 0;
    for (int fuse = 0; fuse < 2; fuse++) {
        if (!fuse) setenv("CLTRAIN_FUSE", "0", 1);
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, IN, N, &mp));
        unsetenv("CLTRAIN_FUSE");
        /* batchnorm weights and biases off 1 and 0 (the same in both models) */
        Pn = clt_tensor_numel(clt_model_params(m));
        float *pf = read_params(m);
        for (int i = 0; i < clt_model_param_count(m); i++) {
            const struct clt_param_info *pi = clt_model_param_info(m, i);
            if (pi->ndim == 1)
                for (size_t e = 0; e < pi->numel; e++) pf[pi->offset + e] += 0.3f * (float)e - 0.2f;
        }
        TC_OK(ctx, clt_model_write_params(m, pf));
        free(pf);
        size_t xd[4] = {B, C, H, W}, dd[2] = {B, N};
        clt_tensor *xt = NULL, *dt = NULL, *o = NULL;
        TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 4, xd, CLT_MEM_OTHER));
        TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
        tc_write(xt, x);
        tc_write(dt, d);
        for (int train = 1; train >= 0; train--) {
            out[fuse][train] = malloc(B * N * sizeof(float));
            ck_assert_ptr_nonnull(out[fuse][train]);
            TC_OK(ctx, clt_model_forward(m, xt, train, 0, &o));
            tc_read(o, out[fuse][train]);
            if (!train) continue;
            grads[fuse] = malloc(Pn * sizeof(float));
            ck_assert_ptr_nonnull(grads[fuse]);
            tc_poison(clt_model_grads(m));
            TC_OK(ctx, clt_model_backward(m, dt, false));
            tc_read(clt_model_grads(m), grads[fuse]);
        }
        Bn = clt_tensor_numel(clt_model_buffers(m));
        bufs[fuse] = malloc(Bn * sizeof(float));
        ck_assert_ptr_nonnull(bufs[fuse]);
        tc_read(clt_model_buffers(m), bufs[fuse]);
        clt_tensor_free(xt);
        clt_tensor_free(dt);
        clt_model_free(m);
    }
    ck_assert_msg(!memcmp(out[0][1], out[1][1], B * N * sizeof(float)),
                  "training forward bits differ");
    ck_assert_msg(!memcmp(out[0][0], out[1][0], B * N * sizeof(float)),
                  "evaluation forward bits differ");
    ck_assert_msg(!memcmp(grads[0], grads[1], Pn * sizeof(float)), "gradient bits differ");
    ck_assert_msg(!memcmp(bufs[0], bufs[1], Bn * sizeof(float)), "running statistics differ");
    for (int f = 0; f < 2; f++) {
        free(out[f][0]);
        free(out[f][1]);
        free(grads[f]);
        free(bufs[f]);
    }
    free(x);
    free(d);
    clt_spec_free(&s);
    clt_ctx_free(ctx);
}
END_TEST

/* A linear layer runs the activation after it (clt__layer_kind.absorbs): in both passes those
 * whose backward reads their output, in the forward only gelu, silu and leakyrelu with a
 * negative slope. The outputs and gradients match the layers apart (CLTRAIN_FUSE=0) within the
 * fp32 tolerances (atol 1e-5, rtol 1e-4: exp in vector lanes may round differently), with the
 * built-in GEMM choice (on a CPU the direct kernels, with the epilogue in their store; on a GPU
 * kernels after the GEMM) and with the panel family for every layout (the epilogue in the
 * GEMM's store), a second backward accumulating included. The layer after an activation takes
 * its gradient on in its input-gradient GEMM (fused) or leaves it to the activation's own
 * backward (apart). */
START_TEST(test_fused_linear_act)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    const size_t B = 7, IN = 19, N = 3;
    clt_spec s = parse_spec("linear 40, relu, linear 33 nobias, tanh, linear 20, gelu, linear 17, "
                            "leakyrelu -0.2, linear 9, sigmoid, linear 12 nobias, silu, "
                            "linear 6, leakyrelu 0.1, linear 3");
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = tc_u64(&r);
    mp.max_batch = 8;
    float *x = malloc(B * IN * sizeof *x), *d = malloc(B * N * sizeof *d);
    ck_assert(x && d);
    tc_fill_nonzero(&r, x, B * IN, 0.1f, 1.0f);
    tc_fill_nonzero(&r, d, B * N, 0.1f, 1.0f);
    struct clt_tune builtin = *clt_ctx_tune(ctx), panel = builtin;
    const struct clt_gemm_choice pc = CLT_GEMM_CHOICE_PANEL(3, 8, 4, 16, 2, 2);
    for (int l = 0; l < CLT_GEMM__LAYOUTS; l++)
        for (int z = 0; z < CLT_GEMM__SIZES; z++) panel.gemm[l][z] = pc;
    float *ref_out = NULL, *ref_grads = NULL;
    double *want = NULL;
    size_t Pn = 0;
    for (int run = 0; run < 4; run++) {
        int fuse = run & 1;
        TC_OK(ctx, clt_ctx_set_tune(ctx, run & 2 ? &panel : &builtin));
        if (!fuse) setenv("CLTRAIN_FUSE", "0", 1);
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, IN, N, &mp));
        unsetenv("CLTRAIN_FUSE");
        Pn = clt_tensor_numel(clt_model_params(m));
        size_t xd[2] = {B, IN}, dd[2] = {B, N};
        clt_tensor *xt = NULL, *dt = NULL, *o = NULL;
        TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
        TC_OK(ctx, clt_tensor_create(&dt, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_OTHER));
        tc_write(xt, x);
        tc_write(dt, d);
        float *out = malloc(B * N * sizeof *out), *grads = malloc(Pn * sizeof *grads);
        ck_assert(out && grads);
        TC_OK(ctx, clt_model_forward(m, xt, true, 0, &o));
        tc_read(o, out);
        tc_poison(clt_model_grads(m));
        TC_OK(ctx, clt_model_backward(m, dt, false));
        TC_OK(ctx, clt_model_backward(m, dt, true)); /* twice the gradients */
        tc_read(clt_model_grads(m), grads);
        char what[96];
        if (run == 0) { /* the layers apart, built-in choice: the reference */
            ref_out = out;
            ref_grads = grads;
            want = malloc((Pn > B * N ? Pn : B * N) * sizeof *want);
            ck_assert_ptr_nonnull(want);
        } else {
            for (size_t i = 0; i < B * N; i++) want[i] = ref_out[i];
            snprintf(what, sizeof what, "fused linear+act (%s, fuse %d): forward",
                     run & 2 ? "panel" : "built-in", fuse);
            tc_check_close(out, want, B * N, 1e-5, 1e-4, what, r.seed);
            for (size_t i = 0; i < Pn; i++) want[i] = ref_grads[i];
            snprintf(what, sizeof what, "fused linear+act (%s, fuse %d): gradients",
                     run & 2 ? "panel" : "built-in", fuse);
            tc_check_close(grads, want, Pn, 1e-5, 1e-4, what, r.seed);
            free(out);
            free(grads);
        }
        clt_tensor_free(xt);
        clt_tensor_free(dt);
        clt_model_free(m);
    }
    free(ref_out);
    free(ref_grads);
    free(want);
    free(x);
    free(d);
    clt_spec_free(&s);
    clt_ctx_free(ctx);
}
END_TEST

/* ---- token embedding, positions and the tied head ------------------------------------------ */

/* The host model of an LM spec "embed D, [layernorm,] posembed, linear V [nobias] [tied]" on
 * ids (B, T): h = E[id] (+ layernorm) + P[t], logits = h W^T (+ b), W = E when tied; returns
 * the objective sum(d * logits) and writes the logits when y is not NULL. */
struct lm_host {
    int B, T, D, V;
    bool ln, tied, bias;
    size_t e, ln_w, ln_b, pos, w, b; /* offsets of the parameters */
};

static double lm_host_forward(const struct lm_host *h, const double *w, const int32_t *ids,
                              const double *d, double *y)
{
    int R = h->B * h->T, D = h->D, V = h->V;
    double *x = dalloc((size_t)R * D), obj = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < D; c++)
            x[r * D + c] = w[h->e + (size_t)ids[r] * D + c];
    if (h->ln) ref_layernorm_forward(x, w + h->ln_w, w + h->ln_b, x, NULL, NULL, R, D, 1e-5);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < D; c++)
            x[r * D + c] += w[h->pos + (size_t)(r % h->T) * D + c];
    const double *W = w + (h->tied ? h->e : h->w);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            double a = h->bias ? w[h->b + v] : 0;
            for (int c = 0; c < D; c++)
                a += x[r * D + c] * W[(size_t)v * D + c];
            if (y) y[(size_t)r * V + v] = a;
            obj += a * d[(size_t)r * V + v];
        }
    free(x);
    return obj;
}

/* The logits (B T V) and the gradients (P), after one backward and after a second that
 * accumulates (P), of a language model m on ids (B, T) with weights pf and output gradient df. */
static void lm_run(clt_model *m, const float *pf, const int32_t *ids, const float *df, int B,
                   int T, int V, float *logits, float *grads, float *grads2)
{
    clt_ctx *ctx = clt_model_ctx(m);
    size_t xd[2] = {(size_t)B, (size_t)T}, dd[3] = {(size_t)B, (size_t)T, (size_t)V};
    clt_tensor *xt = NULL, *dout = NULL, *out = NULL;
    TC_OK(ctx, clt_model_write_params(m, pf));
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 3, dd, CLT_MEM_OTHER));
    tc_write(xt, ids);
    tc_write(dout, df);
    TC_OK(ctx, clt_model_forward(m, xt, true, 0, &out));
    ck_assert_int_eq(clt_tensor_dtype(out), CLT_DTYPE_F32);
    tc_read(out, logits);
    tc_poison(clt_model_grads(m));
    TC_OK(ctx, clt_model_backward(m, dout, false));
    tc_read(clt_model_grads(m), grads);
    TC_OK(ctx, clt_model_backward(m, dout, true)); /* adds the same gradients */
    tc_read(clt_model_grads(m), grads2);
    clt_tensor_free(xt);
    clt_tensor_free(dout);
}

/* 16-bit storage against the float64 reference: the largest error of got (n) is at most tol
 * times the largest magnitude of ref (scale: ref's multiplier, 2 for accumulated gradients) */
static void check_rel(const float *got, const double *ref, size_t n, double scale, double tol,
                      const char *what)
{
    double big = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        big = fmax(big, fabs(scale * ref[i]));
        err = fmax(err, fabs((double)got[i] - scale * ref[i]));
    }
    ck_assert_msg(err <= tol * big, "%s: max error %g > %g * %g", what, err, tol, big);
}

/* embed with repeated tokens, posembed (fused after embed, and apart after a layernorm), "linear
 * V" with and without a bias, and the tied head: names and shapes (the tied head has none), the
 * forward against the float64 host model, every gradient (the tied matrix's the sum of both
 * uses) against central finite differences of the host model in double. In fp32 element by
 * element (atol 1e-5/1e-4, rtol 1e-4); in bf16 and fp16 (the embedding's gather writes 16-bit
 * activations from the 16-bit copy of the table, the layer norm and the positions run on them,
 * the head's input and its gradient are 16-bit) the largest error of the logits and of each
 * parameter's gradient within 1.5e-2 (bf16) and 2e-3 (fp16) of the largest magnitude of the
 * reference: four roundings to 8 or 11 significant bits (2^-9, 2^-12); measured at most 3.6e-3
 * and 6.2e-4. */
START_TEST(test_embed_layers)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    enum { B = 3, T = 5, D = 6, V = 11 };
    static const struct {
        const char *spec;
        bool ln, tied, bias;
    } cases[] = {
        {"embed 6, posembed, linear V nobias tied", false, true, false},
        {"embed 6, layernorm, posembed, linear v nobias TIED", true, true, false},
        {"embed 6, posembed, linear V", false, false, true},
    };
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_F16};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        clt_spec s = parse_spec(cases[ci].spec);
        ck_assert(clt_spec_takes_tokens(&s));
        struct clt_model_params p = clt_model_default_params();
        p.seed = 5;
        p.max_batch = 4;
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, T, V, &p));
        struct lm_host h = {B, T, D, V, cases[ci].ln, cases[ci].tied, cases[ci].bias,
                            0, 0, 0, 0, 0, 0};
        int li = cases[ci].ln ? 2 : 1; /* posembed's index */
        char name[32];
        h.e = param_off(m, "0.weight");
        ck_assert_uint_eq(clt_model_param_info(m, 0)->dims[0], V);
        ck_assert_uint_eq(clt_model_param_info(m, 0)->dims[1], D);
        ck_assert(clt_model_param_info(m, 0)->decays);
        if (h.ln) {
            h.ln_w = param_off(m, "1.weight");
            h.ln_b = param_off(m, "1.bias");
        }
        snprintf(name, sizeof name, "%d.weight", li);
        h.pos = param_off(m, name);
        snprintf(name, sizeof name, "%d.weight", li + 1);
        if (!h.tied) h.w = param_off(m, name);
        snprintf(name, sizeof name, "%d.bias", li + 1);
        if (h.bias) h.b = param_off(m, name);
        /* the tied head stores nothing: embed, (layernorm's two), posembed */
        ck_assert_int_eq(clt_model_param_count(m),
                         2 + (h.ln ? 2 : 0) + (h.tied ? 0 : 1) + (h.bias ? 1 : 0));
        size_t P = clt_tensor_numel(clt_model_params(m));
        float *pf = read_params(m);
        /* GPT-2's init: normal(0, 0.02) for the embeddings */
        double ss = 0;
        for (size_t i = 0; i < (size_t)V * D; i++)
            ss += (double)pf[h.e + i] * pf[h.e + i];
        ck_assert_msg(fabs(sqrt(ss / (V * D)) - 0.02) < 0.006, "embedding std %g",
                      sqrt(ss / (V * D)));
        clt_model_free(m);
        tc_fill_nonzero(&r, pf, P, 0.1f, 1.0f);
        double *w = dalloc(P), *g = dalloc(P), *y = dalloc((size_t)B * T * V),
               *d = dalloc((size_t)B * T * V);
        for (size_t i = 0; i < P; i++)
            w[i] = pf[i];
        int32_t ids[B * T];
        for (int i = 0; i < B * T; i++) /* few distinct tokens: repeats within and across rows */
            ids[i] = (int32_t)(tc_u32(&r) % 4) * 3;
        ids[B * T - 1] = V - 1;
        float *df = malloc((size_t)B * T * V * sizeof *df),
              *logits = malloc((size_t)B * T * V * sizeof *logits),
              *got = malloc(P * sizeof *got), *got2 = malloc(P * sizeof *got2);
        ck_assert(df && logits && got && got2);
        tc_fill_nonzero(&r, df, (size_t)B * T * V, 0.1f, 1.0f);
        for (size_t i = 0; i < (size_t)B * T * V; i++)
            d[i] = df[i];
        lm_host_forward(&h, w, ids, d, y);
        for (size_t i = 0; i < P; i++) { /* central differences of the host model */
            double keep = w[i], eps = 1e-6;
            w[i] = keep + eps;
            double up = lm_host_forward(&h, w, ids, d, NULL);
            w[i] = keep - eps;
            double dn = lm_host_forward(&h, w, ids, d, NULL);
            w[i] = keep;
            g[i] = (up - dn) / (2 * eps);
        }
        for (size_t pi = 0; pi < sizeof precs / sizeof *precs; pi++) {
            const clt_dtype prec = precs[pi];
            char what[160];
            p.precision = prec;
            TC_OK(ctx, clt_model_create(&m, ctx, &s, T, V, &p));
            lm_run(m, pf, ids, df, B, T, V, logits, got, got2);
            if (prec == CLT_DTYPE_F32) {
                tc_check_close(logits, y, (size_t)B * T * V, 1e-5, 1e-4, cases[ci].spec, r.seed);
                tc_check_close(got, g, P, 1e-4, 1e-4, cases[ci].spec, r.seed);
                for (size_t i = 0; i < P; i++) /* accumulated: twice the gradients */
                    g[i] *= 2;
                tc_check_close(got2, g, P, 2e-4, 1e-4, cases[ci].spec, r.seed);
                for (size_t i = 0; i < P; i++)
                    g[i] /= 2;
            } else {
                const double tol = prec == CLT_DTYPE_BF16 ? 1.5e-2 : 2e-3;
                snprintf(what, sizeof what, "%s (%s): logits", cases[ci].spec,
                         clt_dtype_name(prec));
                check_rel(logits, y, (size_t)B * T * V, 1, tol, what);
                for (int j = 0; j < clt_model_param_count(m); j++) {
                    const struct clt_param_info *pi_ = clt_model_param_info(m, j);
                    snprintf(what, sizeof what, "%s (%s): gradient of %s", cases[ci].spec,
                             clt_dtype_name(prec), pi_->name);
                    check_rel(got + pi_->offset, g + pi_->offset, pi_->numel, 1, tol, what);
                    snprintf(what, sizeof what, "%s (%s): accumulated gradient of %s",
                             cases[ci].spec, clt_dtype_name(prec), pi_->name);
                    check_rel(got2 + pi_->offset, g + pi_->offset, pi_->numel, 2, tol, what);
                }
            }
            clt_model_free(m);
        }
        clt_spec_free(&s);
        free(pf);
        free(df);
        free(logits);
        free(got);
        free(got2);
        free(w);
        free(g);
        free(y);
        free(d);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* What the plan refuses: a tied head without an embedding of its shape, an embed layer that is
 * not first, an embed layer on image inputs, posembed on flat inputs; values (f32) given to a
 * token model. And the estimate equals the accountant for language models in every precision,
 * whose 16-bit storage starts at the embedding. */
START_TEST(test_embed_rejects)
{
    clt_ctx *ctx = tc_ctx();
    static const struct {
        const char *spec;
        size_t in, c, h, w;
        const char *msg;
    } bad[] = {
        {"linear 8, linear V nobias tied", 5, 0, 0, 0,
         "layer 2 (linear V nobias tied) is tied to the token embedding's matrix, but no embed "
         "layer before it has a (11, 8) table"},
        {"embed 6, linear 5, linear V nobias tied", 5, 0, 0, 0,
         "no embed layer before it has a (11, 5) table"},
        {"linear 6, embed 6, linear V", 5, 0, 0, 0,
         "layer 2 (embed) reads token ids and can only be the model's first layer"},
        {"residual { embed 6 }, linear V", 5, 0, 0, 0, "can only be the model's first layer"},
        {"embed 6, linear V", 12, 3, 2, 2, "reads token ids, a (T) sequence per sample, got 3x2x2"},
        {"posembed, linear V", 5, 0, 0, 0, "adds positions to a (T, D) sequence, got 5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        clt_spec s = parse_spec(bad[i].spec);
        struct clt_model_params p = clt_model_default_params();
        p.input_shape[0] = bad[i].c;
        p.input_shape[1] = bad[i].h;
        p.input_shape[2] = bad[i].w;
        clt_model *m = NULL;
        ck_assert_int_eq(clt_model_create(&m, ctx, &s, bad[i].in, 11, &p), CLT_ERR_INVALID_ARG);
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), bad[i].msg), "%s: %s", bad[i].spec,
                      clt_ctx_errmsg(ctx));
        ck_assert_ptr_null(m);
        clt_spec_free(&s);
    }
    /* a token model takes i32 ids */
    clt_spec s = parse_spec("embed 4, posembed, linear V nobias tied");
    struct clt_model_params p = clt_model_default_params();
    p.max_batch = 3;
    clt_model *m = NULL;
    clt_tensor *x = tc_tensor(ctx, CLT_DTYPE_F32, 3 * 7), *out = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, 7, 9, &p));
    ck_assert_int_eq(clt_model_forward(m, x, false, 0, &out), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "model input must be i32"));
    clt_model_free(m);
    clt_tensor_free(x);
    clt_spec_free(&s);
    /* estimate == accountant to the byte, the embedding's workspace included, in every
     * precision: in 16 bits the activations from the embedding's output on (the gather writes
     * them) up to the head's input are 16-bit, the logits f32 */
    const char *lms[] = {"embed 4, posembed, linear V nobias tied",
                         "embed 8, posembed, residual { layernorm, attention 2 causal }, residual "
                         "{ layernorm, linear 32, gelu, linear 8 }, layernorm, linear V nobias "
                         "tied"};
    const clt_dtype precs[] = {CLT_DTYPE_F32, CLT_DTYPE_BF16, CLT_DTYPE_F16};
    for (size_t li = 0; li < 2; li++)
        for (size_t pi = 0; pi < 3; pi++)
            for (size_t mb = 1; mb <= 5; mb += 4) {
                s = parse_spec(lms[li]);
                p.max_batch = mb;
                p.precision = precs[pi];
                uint64_t est[CLT_MEM__COUNT] = {0};
                TC_OK(ctx, clt_model_mem_estimate(&s, 7, 9, &p, est));
                TC_OK(ctx, clt_model_create(&m, ctx, &s, 7, 9, &p));
                struct clt_mem_stats ms = model_mem_stats(ctx);
                for (int c = 0; c < CLT_MEM__COUNT; c++)
                    ck_assert_msg(est[c] == ms.by_category[c],
                                  "%s (%s, batch %zu) category %d: estimate %llu, allocated %llu",
                                  lms[li], clt_dtype_name(precs[pi]), mb, c,
                                  (unsigned long long)est[c],
                                  (unsigned long long)ms.by_category[c]);
                clt_model_free(m);
                struct clt__plan plan;
                const struct clt__shape in = {1, {7}};
                TC_OK(ctx, clt__model_plan(&s, &in, 9, precs[pi], &plan));
                ck_assert_int_eq(plan.layers[0].ydt, precs[pi]);
                ck_assert_int_eq(plan.layers[plan.n - 2].ydt, precs[pi]);
                ck_assert_int_eq(plan.layers[plan.n - 1].ydt, CLT_DTYPE_F32);
                clt__plan_free(&plan);
                clt_spec_free(&s);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The attention layer in models on sequences (T, D) against the float64 host model: forward,
 * gradients against the host backward and central finite differences, causal or not, with and
 * without biases (moved off their zero init), T spanning several of the flash kernels' tiles,
 * and the whole pre-norm block (residual { layernorm, attention 4 causal }, residual {
 * layernorm, linear 4D, gelu, linear D }) before a final layernorm and a head, fused and apart;
 * then the reference path (head width 136, above the flash kernels' 128) against the host
 * backward (finite differences over its 74,000 parameters would take minutes). */
START_TEST(test_attention_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    check_spec_seq(ctx, &r, "attention 2 causal, linear 3", 5, 8, 3, 4, 3, true, 0);
    check_spec_seq(ctx, &r, "attention 4 nobias, flatten, linear 3", 6, 8, 3, 2, 2, false, 0);
    check_spec_seq(ctx, &r, "attention 1 causal, gelu, linear 4", tc_size(70, 33), 4, 4, 2, 1,
                   true, 0);
    const char *block = "residual { layernorm, attention 4 causal }, residual { layernorm, "
                        "linear 32, gelu, linear 8 }, layernorm, linear 5";
    check_spec_seq(ctx, &r, block, 5, 8, 5, 3, 3, true, 0);
    setenv("CLTRAIN_FUSE", "0", 1);
    check_spec_seq(ctx, &r, block, 5, 8, 5, 3, 2, true, 0);
    unsetenv("CLTRAIN_FUSE");
    check_spec_seq_fd(ctx, &r, "attention 1 causal, linear 3", 3, 136, 3, 2, 2, true, 0, false);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Copies the device output of m's forward of x (n floats) into got. */
static void forward_into(clt_model *m, clt_tensor *x, const float *xf, float *got)
{
    clt_tensor *out = NULL;
    tc_write(x, xf);
    TC_OK(clt_model_ctx(m), clt_model_forward(m, x, false, 0, &out));
    tc_read(out, got);
}

/* Causality at the model's level: with a causal attention (alone, and inside the pre-norm
 * block), changing the input at position t0 leaves every output before t0 the same to the bit
 * and changes the output at t0; without the mask it changes position 0 too. */
START_TEST(test_attention_causal_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    enum { B = 2, T = 7, D = 4, OUT = 3 };
    const char *specs[] = {"attention 2 causal, linear 3",
                           "residual { layernorm, attention 2 causal }, linear 3",
                           "attention 2, linear 3"};
    for (int si = 0; si < 3; si++) {
        const bool causal = si < 2;
        clt_spec s = parse_spec(specs[si]);
        struct clt_model_params p = clt_model_default_params();
        p.max_batch = B;
        p.input_shape[0] = T;
        p.input_shape[1] = D;
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, T * D, OUT, &p));
        clt_spec_free(&s);
        size_t xd[3] = {B, T, D};
        clt_tensor *x = NULL;
        TC_OK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 3, xd, CLT_MEM_OTHER));
        float xf[B * T * D], x2[B * T * D], y1[B * T * OUT], y2[B * T * OUT];
        tc_fill_nonzero(&r, xf, B * T * D, 0.1f, 1.5f);
        forward_into(m, x, xf, y1);
        for (int t0 = 0; t0 < T; t0 += 3) {
            memcpy(x2, xf, sizeof x2);
            for (int b = 0; b < B; b++)
                for (int c = 0; c < D; c++) x2[(b * T + t0) * D + c] += 0.75f;
            forward_into(m, x, x2, y2);
            for (int b = 0; b < B; b++) {
                const float *a = y1 + b * T * OUT, *c = y2 + b * T * OUT;
                if (causal)
                    ck_assert_msg(memcmp(a, c, (size_t)t0 * OUT * sizeof *a) == 0,
                                  "%s: input at %d changed an earlier output", specs[si], t0);
                else if (t0 > 0)
                    ck_assert_msg(a[0] != c[0], "%s: input at %d left position 0 as it was",
                                  specs[si], t0);
                bool moved = false;
                for (int o = 0; o < OUT; o++) moved |= a[t0 * OUT + o] != c[t0 * OUT + o];
                ck_assert_msg(moved, "%s: input at %d left its own output", specs[si], t0);
            }
        }
        clt_tensor_free(x);
        clt_model_free(m);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* What attention cannot take is refused when the model is built, naming the layer: H not
 * dividing D (both named), a flat input; its parameters are named and shaped as
 * nn.MultiheadAttention's, decay on the matrices only, and --init-scheme default is the
 * module's: in_proj_weight within xavier's bound, out_proj.weight within 1/sqrt(D), zero
 * biases; kaiming and xavier draw from the fans. */
START_TEST(test_attention_params)
{
    clt_ctx *ctx = tc_ctx();
    enum { T = 4, D = 12 };
    struct clt_model_params p = clt_model_default_params();
    p.max_batch = 2;
    p.input_shape[0] = T;
    p.input_shape[1] = D;
    clt_model *m = NULL;
    clt_spec s = parse_spec("residual { layernorm, attention 5 causal }, flatten, linear 3");
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, T * D, 3, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "layer 1 (attention 5 causal") &&
                      tc_contains(clt_ctx_errmsg(ctx), "5 heads do not divide the width D = 12"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_spec_free(&s);
    s = parse_spec("attention 2, linear 3");
    ck_assert_int_eq(clt_model_create(&m, ctx, &s, T * D, 3, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "attends over a sequence") &&
                      tc_contains(clt_ctx_errmsg(ctx), "got 48"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_spec_free(&s);

    static const char *const names[4] = {"0.in_proj_weight", "0.in_proj_bias",
                                         "0.out_proj.weight", "0.out_proj.bias"};
    static const size_t rows[4] = {3 * D, 3 * D, D, D};
    static const clt_init inits[3] = {CLT_INIT_DEFAULT, CLT_INIT_KAIMING, CLT_INIT_XAVIER};
    for (int k = 0; k < 3; k++) {
        s = parse_spec("attention 3 causal, linear 3");
        p.init = inits[k];
        p.seed = 5;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, T * D, 3, &p));
        clt_spec_free(&s);
        ck_assert_int_eq(clt_model_param_count(m), 6);
        float *w = read_params(m);
        for (int j = 0; j < 4; j++) {
            const struct clt_param_info *pi = clt_model_param_info(m, j);
            const bool matrix = j % 2 == 0;
            ck_assert_str_eq(pi->name, names[j]);
            ck_assert_int_eq(pi->ndim, matrix ? 2 : 1);
            ck_assert_uint_eq(pi->dims[0], rows[j]);
            ck_assert_uint_eq(pi->dims[1], matrix ? D : 0);
            ck_assert_int_eq(pi->decays, matrix);
            const double fan_out = (double)rows[j];
            double bound = !matrix ? 0
                           : k == 1 ? sqrt(6.0 / D)
                           : k == 2 || j == 0 ? sqrt(6.0 / (D + fan_out))
                                             : 1.0 / sqrt((double)D);
            double lo = INFINITY, hi = -INFINITY;
            for (size_t e = 0; e < pi->numel; e++) {
                const double v = w[pi->offset + e];
                ck_assert_msg(fabs(v) <= bound * (1 + 1e-6), "init %d: %s[%zu] = %g outside +-%g",
                              k, pi->name, e, v, bound);
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
            if (bound == 0) ck_assert_msg(lo == 0 && hi == 0, "%s not zero", pi->name);
            else ck_assert_msg(hi - lo > 1.6 * bound, "init %d: %s spans [%g, %g] of +-%g", k,
                               pi->name, lo, hi, bound);
        }
        free(w);
        clt_model_free(m);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- generation with a key/value cache ---------------------------------------------------- */

/* Logits (V) of m's batch-1 forward over the window ids[0 .. w) (the rest of the (T) window 0)
 * at position w - 1; *out is the forward's whole output (1, T, V). */
static void window_logits(clt_model *m, clt_tensor *x, const int32_t *ids, size_t w, size_t T,
                          size_t V, float *got, clt_tensor **out)
{
    int32_t win[16] = {0};
    float all[16 * 16];
    ck_assert(T <= 16 && T * V <= 16 * 16);
    memcpy(win, ids, w * sizeof *win);
    tc_write(x, win);
    TC_OK(clt_model_ctx(m), clt_model_forward(m, x, false, 0, out));
    tc_read(*out, all);
    memcpy(got, all + (w - 1) * V, V * sizeof *got);
}

/* A (B, T) i32 tensor of token ids. */
static clt_tensor *ids_tensor(clt_ctx *ctx, size_t B, size_t T)
{
    clt_tensor *t = NULL;
    const size_t d[2] = {B, T};
    TC_OK(ctx, clt_tensor_create(&t, ctx, CLT_DTYPE_I32, 2, d, CLT_MEM_OTHER));
    return t;
}

/* Poisons rows [r0, r1) of a (1, T, V) output. */
static void poison_rows(const clt_tensor *out, size_t r0, size_t r1, size_t V)
{
    if (r1 <= r0) return;
    clt_tensor *v = NULL;
    size_t n = (r1 - r0) * V;
    TC_OK(clt_tensor_ctx(out), clt_tensor_view(&v, out, r0 * V, 1, &n));
    tc_poison(v);
    clt_tensor_free(v);
}

/* Generation's two ways agree: for a small random language model (every parameter random,
 * layernorms' included), each token's logits from clt_model_decode, fed the token before it
 * after a forward over the prompt, equal the logits a forward over the window (the last T
 * tokens) gives at its last position, for every position of the block and past it, where the
 * window slides and generation runs the forward (as cltrain generate does). Fused and apart
 * (CLTRAIN_FUSE=0: gelu's own kernel), with the tied head and the plain one, biased and
 * unbiased attention, posembed absorbed by embed or after a layernorm, relu in a linear's store.
 * The decoded rows are poisoned first, and the tokens are never 0 (the window's padding), so a
 * step that skipped writing its keys and values into the cache would attend to the padding's. */
START_TEST(test_decode_matches_forward)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    enum { T = 7, V = 11, N = T + 6 };
    static const char *const specs[] = {
        "embed 16, posembed, residual { layernorm, attention 2 causal }, residual { layernorm, "
        "linear 32, gelu, linear 16 }, layernorm, linear V nobias tied",
        "embed 16, layernorm, posembed, residual { layernorm, attention 4 causal nobias }, "
        "residual { linear 24, relu, linear 16 }, dropout 0.2, linear 12, tanh, linear V"};
    for (int fuse = 1; fuse >= 0; fuse--)
        for (size_t si = 0; si < sizeof specs / sizeof *specs; si++)
            for (size_t prompt = 1; prompt <= 3; prompt += 2) {
                if (!fuse) setenv("CLTRAIN_FUSE", "0", 1);
                clt_model *m = make_model(ctx, specs[si], T, V, CLT_INIT_DEFAULT, 3, 1);
                clt_model *ref = make_model(ctx, specs[si], T, V, CLT_INIT_DEFAULT, 3, 1);
                unsetenv("CLTRAIN_FUSE");
                char why[160];
                ck_assert_msg(clt_model_can_decode(m, why, sizeof why), "%s: %s", specs[si], why);
                size_t P = clt_tensor_numel(clt_model_params(m));
                float *w = malloc(P * sizeof *w);
                ck_assert_ptr_nonnull(w);
                tc_fill_nonzero(&r, w, P, 0.05f, 0.5f);
                TC_OK(ctx, clt_model_write_params(m, w));
                TC_OK(ctx, clt_model_write_params(ref, w));
                free(w);
                int32_t ids[N];
                for (size_t i = 0; i < N; i++) ids[i] = 1 + (int32_t)(tc_u32(&r) % (V - 1));
                clt_tensor *x = ids_tensor(ctx, 1, T), *xr = ids_tensor(ctx, 1, T);
                clt_tensor *tok = tc_tensor(ctx, CLT_DTYPE_I32, 1), *out = NULL, *rout = NULL;
                size_t start = SIZE_MAX; /* the window the cache holds */
                int decoded = 0;
                for (size_t n = prompt; n < N; n++) {
                    const size_t s = n > T ? n - T : 0, wn = n - s;
                    float got[V], want[V];
                    double want_d[V];
                    char what[96];
                    window_logits(ref, xr, ids + s, wn, T, V, want, &rout);
                    if (s == start) { /* one position from the cache */
                        clt_tensor *lg = NULL;
                        poison_rows(out, wn - 1, T, V);
                        tc_write(tok, &ids[n - 1]);
                        TC_OK(ctx, clt_model_decode(m, tok, wn - 1, &lg));
                        ck_assert_uint_eq(clt_tensor_numel(lg), V);
                        tc_read(lg, got);
                        decoded++;
                    } else { /* the prompt, or a slid window: a forward */
                        window_logits(m, x, ids + s, wn, T, V, got, &out);
                        start = s;
                    }
                    for (int v = 0; v < V; v++) want_d[v] = want[v];
                    snprintf(what, sizeof what, "spec %zu fuse %d prompt %zu: token %zu", si,
                             fuse, prompt, n);
                    tc_check_close(got, want_d, V, 1e-5, 1e-5, what, 0);
                }
                ck_assert_int_eq(decoded, T - (int)prompt);
                clt_tensor_free(x);
                clt_tensor_free(xr);
                clt_tensor_free(tok);
                clt_model_free(m);
                clt_model_free(ref);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* What decode refuses: a model that cannot compute one position by itself (attention without
 * the mask, a flatten, an image model, bf16), with the layer named; a decode past position 0
 * without a batch-1 evaluation forward before it, after a training forward or a backward, or one that skips a
 * position; a position past the block; a token that is not one i32 id. */
START_TEST(test_decode_rejects)
{
    clt_ctx *ctx = tc_ctx();
    enum { T = 5, V = 7 };
    static const struct {
        const char *spec;
        const char *why;
    } no[] = {
        {"embed 8, posembed, attention 2, linear V", "layer 3 (attention without \"causal\""},
        {"embed 8, residual { layernorm, attention 2 }, linear V",
         "layer 2 (attention without \"causal\""},
        {"embed 8, attention 2 causal, flatten, linear V", "layer 3 (flatten)"},
        {"linear 8, linear V", "not a language model"},
    };
    char why[160];
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        clt_model *m = make_model(ctx, no[i].spec, T, V, CLT_INIT_DEFAULT, 1, 1);
        ck_assert(!clt_model_can_decode(m, why, sizeof why));
        ck_assert_msg(tc_contains(why, no[i].why), "%s: %s", no[i].spec, why);
        clt_tensor *tok = tc_tensor(ctx, CLT_DTYPE_I32, 1), *lg = NULL;
        ck_assert_int_eq(clt_model_decode(m, tok, 0, &lg), CLT_ERR_UNSUPPORTED);
        ck_assert(tc_contains(clt_ctx_errmsg(ctx), no[i].why));
        clt_tensor_free(tok);
        clt_model_free(m);
    }
    {
        clt_spec s = parse_spec("embed 8, linear 8, linear V nobias tied");
        struct clt_model_params p = clt_model_default_params();
        p.precision = CLT_DTYPE_BF16;
        clt_model *m = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &s, T, V, &p));
        ck_assert(!clt_model_can_decode(m, why, sizeof why));
        ck_assert_msg(tc_contains(why, "a bf16 model"), "%s", why);
        clt_model_free(m);
        clt_spec_free(&s);
    }
    clt_model *m = make_model(ctx, "embed 8, posembed, attention 2 causal, linear V", T, V,
                              CLT_INIT_DEFAULT, 1, 2);
    clt_tensor *tok = tc_tensor(ctx, CLT_DTYPE_I32, 1), *lg = NULL, *out = NULL;
    clt_tensor *x1 = ids_tensor(ctx, 1, T), *x2 = ids_tensor(ctx, 2, T);
    clt_tensor *f = tc_tensor(ctx, CLT_DTYPE_F32, 1);
    const int32_t one = 1, win[2 * T] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4};
    tc_write(tok, &one);
    tc_write(x1, win);
    tc_write(x2, win);
    ck_assert_int_eq(clt_model_decode(m, tok, 1, &lg), CLT_ERR_STATE); /* position 0 needs none */
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "run a batch-1 evaluation forward"));
    TC_OK(ctx, clt_model_forward(m, x2, false, 0, &out)); /* batch 2: no cache */
    ck_assert_int_eq(clt_model_decode(m, tok, 1, &lg), CLT_ERR_STATE);
    TC_OK(ctx, clt_model_forward(m, x1, true, 0, &out)); /* training */
    ck_assert_int_eq(clt_model_decode(m, tok, 1, &lg), CLT_ERR_STATE);
    TC_OK(ctx, clt_model_forward(m, x1, false, 0, &out));
    ck_assert_int_eq(clt_model_decode(m, tok, T, &lg), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "position 5 is past the block of T = 5"));
    TC_OK(ctx, clt_model_forward(m, x1, false, 0, &out));
    ck_assert_int_eq(clt_model_decode(m, f, 1, &lg), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "the token must be one i32 id"));
    TC_OK(ctx, clt_model_forward(m, x1, false, 0, &out));
    TC_OK(ctx, clt_model_decode(m, tok, 2, &lg));
    ck_assert_int_eq(clt_model_decode(m, tok, 4, &lg), CLT_ERR_STATE); /* 3 skipped */
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "position 4 needs positions 0 .. 3"));
    TC_OK(ctx, clt_model_forward(m, x1, false, 0, &out));
    TC_OK(ctx, clt_model_decode(m, tok, 2, &lg));
    TC_OK(ctx, clt_model_decode(m, tok, 3, &lg));
    clt_tensor_free(tok);
    clt_tensor_free(x1);
    clt_tensor_free(x2);
    clt_tensor_free(f);
    clt_model_free(m);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tc_tcase("model");
    tcase_add_test(tc, test_names_shapes_offsets);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_init_gpt2);
    tcase_add_test(tc, test_rejects);
    tcase_add_test(tc, test_forward_backward);
    tcase_add_test(tc, test_attention_model);
    tcase_add_test(tc, test_attention_causal_model);
    tcase_add_test(tc, test_attention_params);
    tcase_add_test(tc, test_dropout);
    tcase_add_test(tc, test_dropout_in_block);
    tcase_add_test(tc, test_shaped_input);
    tcase_add_test(tc, test_estimate_every_kind);
    tcase_add_test(tc, test_layernorm_sequence);
    tcase_add_test(tc, test_sequence_layers);
    tcase_add_test(tc, test_sequence_shapes);
    tcase_add_test(tc, test_conv_model);
    tcase_add_test(tc, test_batchnorm_model);
    tcase_add_test(tc, test_residual_model);
    tcase_add_test(tc, test_pool_layers);
    tcase_add_test(tc, test_fused_batchnorm_relu);
    tcase_add_test(tc, test_fused_linear_act);
    suite_add_tcase(s, tc);
    TCase *lm = tc_tcase("lm"); /* CK_RUN_CASE=lm runs these alone */
    tcase_add_test(lm, test_embed_layers);
    tcase_add_test(lm, test_embed_rejects);
    tcase_add_test(lm, test_decode_matches_forward);
    tcase_add_test(lm, test_decode_rejects);
    suite_add_tcase(s, lm);
    return s;
}

int main(void)
{
    return tc_run(model_suite());
}
