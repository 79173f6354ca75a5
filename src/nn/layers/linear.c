/* The linear layer, "linear OUT [nobias]": y (B, OUT) = x (B, IN) W^T + b, with W (OUT, IN) and
 * b (OUT) named "{i}.weight" and "{i}.bias" as nn.Linear's, initialised from fan-in IN and
 * fan-out OUT. The input's shape decides what a row is:
 *   - flat (IN): one row per sample;
 *   - a sequence (T, C): nn.Linear on the last dimension, each position a row: IN = C, output
 *     (T, OUT). The B * T rows are one GEMM of M = B*T (the activations are row-major, so
 *     (B, T, C) is (B*T, C) as it lies: no copy), and the weight and bias gradients sum over
 *     all B * T rows;
 *   - an image (C, H, W): its flattened features (IN = C*H*W), as after a flatten: the same
 *     weights, no copy.
 * "linear V" is as wide as the vocabulary (the model's outputs); "linear V nobias tied", GPT-2's
 * output head, declares its weight tied (clt__param_decl.tie): the model gives it the token
 * embedding's (V, D) matrix, and its backward writes that matrix's gradient first (the embed
 * layer adds its own after it).
 * The bias and the activation after it (absorbs) run in the forward GEMM's store where its
 * kernel can (clt_op_gemm_epilogue); the activation's kernels are element-wise, so the fused
 * paths are the same for rows of samples and rows of positions. */
#include "nn/layer_internal.h"

#include <stdio.h>

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    long long v = 0;
    if (a->n < 1) return clt__spec_args_fail(a, -1, "linear needs a width, e.g. \"linear 128\"");
    if (clt__spec_arg_is(a, 0, "v")) {
        v = CLT_SPEC_WIDTH_V; /* the vocabulary */
    } else if (!clt__spec_arg_digits(a, 0, 0, CLT_SPEC_MAX_WIDTH, &v) || v == 0) {
        return clt__spec_args_fail(a, 0,
                                   "width must be a positive integer, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    } else if (v > CLT_SPEC_MAX_WIDTH) {
        return clt__spec_args_fail(a, 0, "width must be at most %d, got \"%.*s\"",
                                   CLT_SPEC_MAX_WIDTH, CLT__SPEC_ARG(a, 0));
    }
    l->out = (int)v;
    l->bias = true;
    int i = 1;
    if (a->n > i && clt__spec_arg_is(a, i, "nobias")) {
        l->bias = false;
        i++;
    }
    if (a->n > i && clt__spec_arg_is(a, i, "tied")) {
        if (l->bias)
            return clt__spec_args_fail(a, i, "a tied head has no bias: write \"linear %s nobias "
                                             "tied\"", l->out == CLT_SPEC_WIDTH_V ? "V" : "OUT");
        l->tied = true;
        i++;
    }
    if (a->n > i)
        return clt__spec_args_fail(a, i, "unexpected \"%.*s\" after %s; expected %sthe end of "
                                         "the layer", CLT__SPEC_ARG(a, i),
                                   l->tied ? "\"tied\"" : l->bias ? "the width" : "\"nobias\"",
                                   l->tied ? "" : l->bias ? "\"nobias\" or " : "\"tied\" or ");
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    char w[16];
    if (l->out == CLT_SPEC_WIDTH_V) snprintf(w, sizeof w, "V");
    else snprintf(w, sizeof w, "%d", l->out);
    snprintf(buf, size, " %s%s%s", w, l->bias ? "" : " nobias", l->tied ? " tied" : "");
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if ((l->out < 1 || l->out > CLT_SPEC_MAX_WIDTH) && l->out != CLT_SPEC_WIDTH_V)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: linear width must be in [1, %d], got %d", layer,
                         CLT_SPEC_MAX_WIDTH, l->out);
    if (l->tied && l->bias)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: a tied linear layer has no bias", layer);
    return CLT_OK;
}

/* Rows per sample and the width IN of each row for input shape `in`: a sequence (T, C) has T
 * rows of C, any other shape one row of all its elements (flat, or an image flattened). */
static void rows_of(const struct clt__shape *in, size_t *rows, size_t *IN)
{
    bool seq = in->ndim == 2;
    *rows = seq ? in->d[0] : 1;
    *IN = seq ? in->d[1] : clt__shape_numel(in);
}

/* OUT: the width, or the vocabulary for "linear V" */
static size_t width(const clt_layer_spec *l)
{
    return (size_t)(l->out == CLT_SPEC_WIDTH_V ? l->vocab : l->out);
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    if (width(l) == 0)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s): the width V is the vocabulary, which this "
                         "model does not have", layer, text);
    if (in->ndim == 2) { /* (T, C) -> (T, OUT) */
        *out = (struct clt__shape){2, {in->d[0], width(l)}};
        return CLT_OK;
    }
    out->ndim = 1; /* flat, or an image's flattened features */
    out->d[0] = width(l);
    return CLT_OK;
}

static int params(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl)
{
    size_t rows, IN, OUT = out->d[out->ndim - 1];
    rows_of(in, &rows, &IN);
    decl[0] = (struct clt__param_decl){"weight", 2, {OUT, IN}, true, IN, OUT, true, 0, false, false};
    decl[0].tie = l->tied; /* the token embedding's (V, D) matrix */
    if (!l->bias) return 1;
    decl[1] = (struct clt__param_decl){"bias", 1, {OUT, 0}, false, IN, OUT, false, 0, false, false};
    return 2;
}

/* The GEMM's sizes for a pass over B samples: M rows of IN inputs and OUT outputs. */
static void gemm_sizes(const struct clt__layer *L, size_t B, size_t *M, size_t *IN, size_t *OUT)
{
    size_t rows;
    rows_of(&L->in, &rows, IN);
    *M = B * rows;
    *OUT = L->out_n / rows;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    size_t M, IN, OUT;
    gemm_sizes(L, p->B, &M, &IN, &OUT);
    const clt_tensor *w = clt__layer_weight(L, 0);
    /* the bias and an absorbed activation in the GEMM's store where its kernel can */
    struct clt_gemm_epilogue e = {.bias = L->w[1] ? clt__layer_weight(L, 1) : NULL, .act = -1};
    clt_tensor *y = L->y;
    const struct clt__layer *A = L->next;
    if (A) {
        e.act = (int)A->kind->act;
        e.slope = A->spec.alpha;
        if (A->absorbed == CLT__ABSORB_FORWARD) { /* the activation's backward reads z */
            e.z = L->y;
            y = A->y;
        }
    }
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, M, OUT, IN, x, w, &e, y));
    L->out_t = L->y; /* z when the activation runs its own backward, else its output */
fail:
    return st;
}

/* One position: the forward's GEMM over M = 1 row, into row pos of its output (and of an
 * absorbed activation's, which holds act(z) when that one's backward reads z). */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    const size_t IN = L->in.d[1], OUT = L->out.d[1];
    struct clt_gemm_epilogue e = {.bias = L->w[1] ? clt__layer_weight(L, 1) : NULL, .act = -1};
    struct clt__layer *A = L->next;
    CLT_TRY(clt__layer_row(L, pos));
    clt_tensor *y = L->row;
    if (A) {
        e.act = (int)A->kind->act;
        e.slope = A->spec.alpha;
        if (A->absorbed == CLT__ABSORB_FORWARD) {
            CLT_TRY(clt__layer_row(A, pos));
            e.z = L->row;
            y = A->row;
        }
    }
    CLT_TRY(clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_TRANS, 1, OUT, IN, x, clt__layer_weight(L, 0),
                                 &e, y));
    L->out_t = L->row;
fail:
    return st;
}

/* dx = dy W, taken on through the activation before it (act_before) when there is one: its
 * gradient in the GEMM's store (one pass: the product is not written and read back), by its
 * own kernel in place where the saved tensor's storage differs from dx's. */
static clt_status input_grad(const struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                             const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    size_t M, IN, OUT;
    gemm_sizes(L, p->B, &M, &IN, &OUT);
    const clt_tensor *w = clt__layer_weight(L, 0);
    const struct clt__layer *A = L->act_before;
    const clt_tensor *s = A ? clt__layer_act_saved(A) : NULL;
    if (s && clt_tensor_dtype(s) == clt_tensor_dtype(dx)) {
        const struct clt_gemm_epilogue e = {.act = (int)A->kind->act, .slope = A->spec.alpha,
                                            .saved = s};
        return clt_op_gemm_epilogue(CLT_NO_TRANS, CLT_NO_TRANS, M, IN, OUT, dy, w, &e, dx);
    }
    CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, IN, OUT, 1.0f, dy, w, 0.0f, dx));
    if (s) CLT_TRY(clt_op_act_backward_alpha(A->kind->act, A->spec.alpha, dx, dx, s, s));
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    size_t M, IN, OUT;
    gemm_sizes(L, p->B, &M, &IN, &OUT);
    *through = false;
    const struct clt__layer *A = L->next;
    if (A && A->absorbed == CLT__ABSORB_BOTH && !A->grad_after) {
        /* dy is the activation's output gradient: its gradient dz = dy * act'(y) goes into the
         * activation's own output buffer (unused: its output is ours), and dz is the gradient
         * below. (The bias gradient's pass computing dz as it sums took 1.4-2x the time of
         * this elementwise pass and the sums apart on PoCL: measured, not kept.) */
        CLT_TRY(clt_op_act_backward_alpha(A->kind->act, A->spec.alpha, A->y, dy, NULL, L->y));
        dy = A->y;
    }
    /* dW (OUT, IN) = dy^T x over all M rows (samples, or every position of every sample), and
     * the bias gradient (dy's column sums) in the same GEMM where it can */
    if (L->dw[1])
        CLT_TRY(clt_op_gemm_tn_sums(OUT, IN, M, 1.0f, dy, L->x, p->beta, L->dw[0], L->dw[1],
                                    p->beta));
    else
        CLT_TRY(clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, OUT, IN, M, 1.0f, dy, L->x, p->beta,
                            L->dw[0]));
    if (need_dx) CLT_TRY(input_grad(L, dx, dy, p));
fail:
    return st;
}

/* The activation after it: in both passes when its backward reads its output y (which is then
 * ours: y = act(x W^T + b) in the GEMM's store, and dz = dy * act'(y) into its buffer), in
 * the forward only when it reads its input (gelu, silu, leakyrelu with a negative slope: the
 * store writes both z = x W^T + b, our output, and act(z), its). Same storage only. */
static enum clt__absorb absorbs(const struct clt__layer *L, const struct clt__layer *next)
{
    if (!next->kind->activation || next->ydt != L->ydt) return CLT__ABSORB_NONE;
    return clt_op_act_backward_reads_y(next->kind->act, next->spec.alpha) ? CLT__ABSORB_BOTH
                                                                          : CLT__ABSORB_FORWARD;
}

const struct clt__layer_kind clt__layer_linear = {
    .kind = CLT_LAYER_LINEAR,
    .name = "linear",
    .usage = "linear OUT [nobias] [tied]",
    .help = "fully connected, as nn.Linear(IN, OUT); on an image input it takes the flattened "
            "features, on a (T, C) input it acts per position; bias on by default; OUT may be V "
            "(the vocabulary); tied (after nobias) shares the embed layer's (V, D) matrix",
    .weighted = true,
    .grads_act_before = true,
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = out_shape,
    .params = params,
    .kept = clt__layer_keeps_output,
    .forward = forward,
    .backward = backward,
    .decode = decode,
    .absorbs = absorbs,
};
