/* The attention layer, "attention H [causal] [nobias]": multi-head self-attention on a sequence
 * (T, D), as nn.MultiheadAttention(D, H, batch_first=True) called as mha(x, x, x) (with
 * `causal`, the mask that leaves out key j > query i):
 *   qkv (B, T, 3D) = x in_proj_weight^T + in_proj_bias      one GEMM over the B*T rows
 *   y   (B, T, D)  = softmax(q k^T / sqrt(HD)) v per head    clt_op_attention_forward
 *   out (B, T, D)  = y out_proj.weight^T + out_proj.bias     one GEMM over the B*T rows
 * with HD = D / H, head h on columns h HD .. (h + 1) HD - 1 of q, k and v. Parameters
 * "{i}.in_proj_weight" (3D, D), "{i}.in_proj_bias" (3D), "{i}.out_proj.weight" (D, D),
 * "{i}.out_proj.bias" (D), nn.MultiheadAttention's names (nobias drops both biases); the
 * matrices take weight decay, the biases not. --init-scheme default is the module's own
 * _reset_parameters: in_proj_weight xavier_uniform_ (bound sqrt(6 / 4D)), out_proj.weight
 * nn.Linear's (bound 1/sqrt(D)), both biases zero; kaiming and xavier draw from the fans
 * (in D, out 3D and D) as for linear.
 *
 * Kept for backward, in the layer's output storage (16-bit in mixed precision): its output, qkv
 * and y, as three regions of L->y_full for the current batch B (out at 0, qkv at B T D, y at
 * 4 B T D: 5 T D per sample); in L->saved (f32 whatever the precision, as the op's arithmetic):
 * each row's log-sum-exp lse (B, H, T), then the op's f32 workspace (Delta on the flash path,
 * also the scores on the reference path, clt_op_attention_workspace). The backward's products
 * dy', the gradient of y (B, T, D), and dqkv (B, T, 3D) go into the model's shared workspace
 * (4 T D per sample, in the model's precision). The op takes the flash path where it can
 * (head widths up to CLT_ATTN_FLASH_MAX_HD), else the reference one. */
#include "nn/layer_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    long long v = 0;
    if (a->n < 1)
        return clt__spec_args_fail(a, -1,
                                   "attention needs a number of heads, e.g. \"attention 4 causal\"");
    if (!clt__spec_arg_digits(a, 0, 0, CLT_SPEC_MAX_WIDTH, &v) || v == 0)
        return clt__spec_args_fail(a, 0, "heads must be a positive integer, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    if (v > CLT_SPEC_MAX_WIDTH)
        return clt__spec_args_fail(a, 0, "heads must be at most %d, got \"%.*s\"",
                                   CLT_SPEC_MAX_WIDTH, CLT__SPEC_ARG(a, 0));
    l->heads = (int)v;
    l->bias = true;
    for (int i = 1; i < a->n; i++) {
        if (i >= 3)
            return clt__spec_args_fail(a, i,
                                       "unexpected \"%.*s\"; attention takes at most \"causal\" "
                                       "and \"nobias\" after the heads",
                                       CLT__SPEC_ARG(a, i));
        if (clt__spec_arg_is(a, i, "causal") && !l->causal) {
            l->causal = true;
        } else if (clt__spec_arg_is(a, i, "nobias") && l->bias) {
            l->bias = false;
        } else {
            return clt__spec_args_fail(a, i,
                                       "unexpected \"%.*s\" after the heads; expected \"causal\", "
                                       "\"nobias\" (each at most once) or the end of the layer",
                                       CLT__SPEC_ARG(a, i));
        }
    }
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    snprintf(buf, size, " %d%s%s", l->heads, l->causal ? " causal" : "", l->bias ? "" : " nobias");
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if (l->heads < 1 || l->heads > CLT_SPEC_MAX_WIDTH)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: attention heads must be in [1, %d], got %d", layer,
                         CLT_SPEC_MAX_WIDTH, l->heads);
    return CLT_OK;
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    char got[64];
    clt__shape_format(in, got, sizeof got);
    if (in->ndim != 2)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) attends over a sequence of T positions of D "
                         "values, (T, D), got %s (give the data a shape with --input-shape T,D, "
                         "or put it after a layer that outputs one)",
                         layer, text, got);
    if (in->d[1] % (size_t)l->heads != 0)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s): %d heads do not divide the width D = %zu of "
                         "its input %s; the number of heads H must divide D",
                         layer, text, l->heads, in->d[1], got);
    *out = *in;
    return CLT_OK;
}

static int params(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl)
{
    (void)out;
    const size_t D = in->d[1];
    int n = 0;
    decl[n++] = (struct clt__param_decl){"in_proj_weight", 2, {3 * D, D}, true, D, 3 * D, true,
                                         0, false, false};
    if (l->bias)
        decl[n++] = (struct clt__param_decl){"in_proj_bias", 1, {3 * D}, false, D, 3 * D, false,
                                             0, false, false};
    decl[n++] = (struct clt__param_decl){"out_proj.weight", 2, {D, D}, true, D, D, true, 0, false,
                                         false};
    if (l->bias)
        decl[n++] = (struct clt__param_decl){"out_proj.bias", 1, {D}, false, D, D, false, 0, false,
                                             false};
    return n;
}

/* nn.MultiheadAttention's _reset_parameters: xavier_uniform_ for in_proj_weight (fans D and
 * 3D), nn.Linear's kaiming_uniform_(a = sqrt(5)) for out_proj.weight (1/sqrt(D)), zero biases */
static double default_bound(const clt_layer_spec *l, int j, const struct clt__param_decl *d)
{
    (void)l;
    if (!d->weight) return 0.0;
    if (j == 0) return sqrt(6.0 / (double)(d->fan_in + d->fan_out));
    return 1.0 / sqrt((double)d->fan_in);
}

/* The op's geometry for a batch of B samples of input shape `in`. */
static struct clt_attn_geom geom_of(const clt_layer_spec *l, const struct clt__shape *in, size_t B)
{
    const size_t NH = (size_t)l->heads;
    return (struct clt_attn_geom){.B = B, .T = in->d[0], .NH = NH, .HD = in->d[1] / NH,
                                  .causal = l->causal, .path = CLT_ATTN_AUTO};
}

/* the output, qkv and y */
static size_t kept(const clt_layer_spec *l, const struct clt__shape *in,
                   const struct clt__shape *out)
{
    (void)l;
    (void)out;
    return 5 * in->d[0] * in->d[1];
}

/* lse, then the op's f32 workspace: per sample, as both grow with the batch (the reference
 * path's NH T T scores stay below 2^64: a sample has fewer than 2^31 values, so T T NH <
 * 2^62 / HD with HD > 128 there, and the plan refuses what passes 2^48) */
static size_t saved(const clt_layer_spec *l, const struct clt__shape *in,
                    const struct clt__shape *out)
{
    (void)out;
    const struct clt_attn_geom g = geom_of(l, in, 1);
    return g.NH * g.T + clt_op_attention_workspace(&g);
}

/* the backward's gradient of y and dqkv */
static size_t workspace(const clt_layer_spec *l, const struct clt__shape *in,
                        const struct clt__shape *out, size_t *fixed)
{
    (void)l;
    (void)out;
    *fixed = 0;
    return 4 * in->d[0] * in->d[1];
}

/* The index of the output projection's weight among L's parameters (the input projection's
 * is 0; each weight's bias, when there is one, follows it). */
static int out_proj(const struct clt__layer *L) { return L->spec.bias ? 2 : 1; }

/* The pass's views: what it keeps (out, qkv and y in y_full; lse and the op's workspace in
 * saved) for B samples, and x as (B, T, D) (the tensor handed over may be shaped otherwise, as
 * the model's flat input). */
struct views {
    clt_tensor *out, *qkv, *y, *lse, *ws, *x;
};

static void views_free(struct views *v)
{
    clt_tensor_free(v->out);
    clt_tensor_free(v->qkv);
    clt_tensor_free(v->y);
    clt_tensor_free(v->lse);
    clt_tensor_free(v->ws);
    clt_tensor_free(v->x);
}

static clt_status views_of(const struct clt__layer *L, const clt_tensor *x,
                           const struct clt_attn_geom *g, struct views *v)
{
    clt_status st = CLT_OK;
    const size_t B = g->B, T = g->T, D = g->NH * g->HD, BTD = B * T * D;
    const size_t d1[3] = {B, T, D}, d3[3] = {B, T, 3 * D}, rows = B * g->NH * T;
    const size_t wsn = clt_op_attention_workspace(g);
    memset(v, 0, sizeof *v);
    CLT_TRY(clt_tensor_view(&v->out, L->y_full, 0, 3, d1));
    CLT_TRY(clt_tensor_view(&v->qkv, L->y_full, BTD, 3, d3));
    CLT_TRY(clt_tensor_view(&v->y, L->y_full, 4 * BTD, 3, d1));
    CLT_TRY(clt_tensor_view(&v->lse, L->saved, 0, 1, &rows));
    CLT_TRY(clt_tensor_view(&v->ws, L->saved, rows, 1, &wsn));
    CLT_TRY(clt_tensor_view(&v->x, x, 0, 3, d1));
fail:
    return st;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    struct views v;
    const struct clt_attn_geom g = geom_of(&L->spec, &L->in, p->B);
    const size_t M = g.B * g.T, D = g.NH * g.HD;
    const int wi = 0, wo = out_proj(L);
    CLT_TRY(views_of(L, x, &g, &v));
    struct clt_gemm_epilogue e = {.bias = L->spec.bias ? clt__layer_weight(L, wi + 1) : NULL,
                                  .act = -1};
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, M, 3 * D, D, v.x,
                                 clt__layer_weight(L, wi), &e, v.qkv));
    CLT_TRY(clt_op_attention_forward(v.y, v.lse, v.ws, v.qkv, &g));
    e.bias = L->spec.bias ? clt__layer_weight(L, wo + 1) : NULL;
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, M, D, D, v.y, clt__layer_weight(L, wo),
                                 &e, v.out));
    /* L->y is this layer's own view of its output, (B, T, D) (the model made it (B, kept)):
     * what the next layer reads and its backward's input */
    clt_tensor_free(L->y);
    L->y = v.out;
    v.out = NULL;
    L->out_t = L->y;
fail:
    views_free(&v);
    return st;
}

/* One position: its q, k and v into row pos of qkv (the rows before it are the cache of keys
 * and values the last forward and decode steps left there), the attention of q_pos over keys
 * 0 .. pos into row pos of y (the step's scores in lse's place: generation runs no backward),
 * and the output projection into row pos of the output. */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    clt_tensor *qkv = NULL, *qrow = NULL, *yrow = NULL, *scores = NULL;
    const struct clt_attn_geom g = geom_of(&L->spec, &L->in, 1);
    const size_t T = g.T, D = g.NH * g.HD, sn = g.NH * T;
    const size_t d1[2] = {1, D}, d3[2] = {1, 3 * D}, dq[3] = {1, T, 3 * D};
    const int wi = 0, wo = out_proj(L);
    /* the batch-1 forward's regions of y_full (see views_of): qkv at T D, y at 4 T D */
    CLT_TRY(clt_tensor_view(&qkv, L->y_full, T * D, 3, dq));
    CLT_TRY(clt_tensor_view(&qrow, L->y_full, T * D + pos * 3 * D, 2, d3));
    CLT_TRY(clt_tensor_view(&yrow, L->y_full, 4 * T * D + pos * D, 2, d1));
    CLT_TRY(clt_tensor_view(&scores, L->saved, 0, 1, &sn));
    CLT_TRY(clt__layer_row(L, pos));
    struct clt_gemm_epilogue e = {.bias = L->spec.bias ? clt__layer_weight(L, wi + 1) : NULL,
                                  .act = -1};
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, 1, 3 * D, D, x,
                                 clt__layer_weight(L, wi), &e, qrow));
    CLT_TRY(clt_op_attention_decode(yrow, scores, qkv, &g, pos));
    e.bias = L->spec.bias ? clt__layer_weight(L, wo + 1) : NULL;
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, 1, D, D, yrow, clt__layer_weight(L, wo),
                                 &e, L->row));
    L->out_t = L->row;
fail:
    clt_tensor_free(qkv);
    clt_tensor_free(qrow);
    clt_tensor_free(yrow);
    clt_tensor_free(scores);
    return st;
}

/* The causal mask: a position sees none after it, which the cache does not hold yet. */
static bool decodes(const struct clt__layer *L, char *why, size_t n)
{
    if (L->spec.causal) return true;
    snprintf(why, n, "attention without \"causal\": each position sees the later ones");
    return false;
}

/* dW (+ db) = dy^T a over the M rows: a weight's gradient and its bias's. */
static clt_status weight_grad(const struct clt__layer *L, int w, size_t OUT, size_t IN, size_t M,
                              const clt_tensor *dy, const clt_tensor *a, float beta)
{
    if (L->spec.bias)
        return clt_op_gemm_tn_sums(OUT, IN, M, 1.0f, dy, a, beta, L->dw[w], L->dw[w + 1], beta);
    return clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, OUT, IN, M, 1.0f, dy, a, beta, L->dw[w]);
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    struct views v;
    clt_tensor *dyv = NULL, *dya = NULL, *dqkv = NULL;
    const struct clt_attn_geom g = geom_of(&L->spec, &L->in, p->B);
    const size_t M = g.B * g.T, D = g.NH * g.HD;
    const size_t d1[3] = {g.B, g.T, D}, d3[3] = {g.B, g.T, 3 * D};
    const int wi = 0, wo = out_proj(L);
    *through = false;
    CLT_TRY(views_of(L, L->x, &g, &v));
    CLT_TRY(clt_tensor_view(&dyv, dy, 0, 3, d1));
    /* the model's workspace: dy' (the gradient of y) at 0, dqkv after it */
    *L->ws_owner = NULL;
    CLT_TRY(clt_tensor_view(&dya, L->ws, 0, 3, d1));
    CLT_TRY(clt_tensor_view(&dqkv, L->ws, M * D, 3, d3));
    /* the output projection: dy' = dy W_out, dW_out = dy^T y */
    CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, D, D, 1.0f, dyv, clt__layer_weight(L, wo),
                        0.0f, dya));
    CLT_TRY(weight_grad(L, wo, D, D, M, dyv, v.y, p->beta));
    /* the heads, from the saved lse */
    CLT_TRY(clt_op_attention_backward(dqkv, v.ws, dya, v.qkv, v.y, v.lse, &g));
    /* the input projection: dW_in = dqkv^T x, dx = dqkv W_in */
    CLT_TRY(weight_grad(L, wi, 3 * D, D, M, dqkv, v.x, p->beta));
    if (need_dx)
        CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, D, 3 * D, 1.0f, dqkv,
                            clt__layer_weight(L, wi), 0.0f, dx));
fail:
    views_free(&v);
    clt_tensor_free(dyv);
    clt_tensor_free(dya);
    clt_tensor_free(dqkv);
    return st;
}

const struct clt__layer_kind clt__layer_attention = {
    .kind = CLT_LAYER_ATTENTION,
    .name = "attention",
    .usage = "attention H [causal] [nobias]",
    .help = "multi-head self-attention on (T, D), as nn.MultiheadAttention(D, H): a D -> 3D "
            "projection, softmax(q k^T / sqrt(D/H)) v per head (causal: position t sees "
            "positions <= t), a D -> D projection; H divides D",
    .weighted = true,
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = out_shape,
    .params = params,
    .default_bound = default_bound,
    .kept = kept,
    .saved = saved,
    .workspace = workspace,
    .forward = forward,
    .backward = backward,
    .decode = decode,
    .decodes = decodes,
};
