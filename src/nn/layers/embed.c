/* The token embedding layer, "embed D": nn.Embedding(V, D) over the model's input of token ids,
 * (B, T) i32 -> (B, T, D), with V the model's vocabulary (its outputs, clt_layer_spec.vocab).
 * It is the model's first layer (kind->tokens). Its table "{i}.weight" (V, D) is drawn from
 * normal(0, 0.02) as GPT-2's and takes weight decay (an embedding); a tied output head
 * ("linear V nobias tied") reads and trains the same tensor, and its gradient is then the sum
 * of both uses: the head's backward runs first and writes it, this layer's adds to it
 * (L->grad_shared[0]).
 *
 * A posembed layer right after it is absorbed in both passes (one kernel gathers the rows and
 * adds the positions: one write of the activations; its backward gives both gradients). The
 * table's gradient is a deterministic sorted scatter-add (clt_op_embedding_backward), whose i32
 * workspace is the model's shared workspace seen as 32-bit words. */
#include "nn/layer_internal.h"

#include <stdio.h>

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    long long v = 0;
    if (a->n < 1) return clt__spec_args_fail(a, -1, "embed needs a width, e.g. \"embed 128\"");
    if (!clt__spec_arg_digits(a, 0, 0, CLT_SPEC_MAX_WIDTH, &v) || v == 0)
        return clt__spec_args_fail(a, 0, "width must be a positive integer, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    if (v > CLT_SPEC_MAX_WIDTH)
        return clt__spec_args_fail(a, 0, "width must be at most %d, got \"%.*s\"",
                                   CLT_SPEC_MAX_WIDTH, CLT__SPEC_ARG(a, 0));
    if (a->n >= 2)
        return clt__spec_args_fail(a, 1, "unexpected \"%.*s\" after the width; expected the end "
                                         "of the layer", CLT__SPEC_ARG(a, 1));
    l->out = (int)v;
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    snprintf(buf, size, " %d", l->out);
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if (l->out < 1 || l->out > CLT_SPEC_MAX_WIDTH)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: embed width must be in [1, %d], got %d", layer,
                         CLT_SPEC_MAX_WIDTH, l->out);
    return CLT_OK;
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    if (in->ndim != 1) {
        char got[64];
        clt__shape_format(in, got, sizeof got);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) reads token ids, a (T) sequence per sample, "
                         "got %s values; an embed layer needs text data (--data text:FILE)",
                         layer, text, got);
    }
    if (l->vocab < 1)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) needs a vocabulary: the model's outputs",
                         layer, text);
    *out = (struct clt__shape){2, {in->d[0], (size_t)l->out}};
    return CLT_OK;
}

static int params(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl)
{
    (void)in;
    size_t V = (size_t)l->vocab, D = out->d[1];
    decl[0] = (struct clt__param_decl){"weight", 2, {V, D}, true, D, V, true, 0, false, false};
    decl[0].std = 0.02f;
    decl[0].embedding = true;
    return 1;
}

/* The i32 words the table's gradient needs for B samples of T tokens: the sorted positions
 * (B T rounded up to a power of two, below 2 B T) and V + 1 offsets, as per-sample and fixed
 * parts; twice that in elements, so that a 16-bit workspace holds them too. */
static size_t workspace(const clt_layer_spec *l, const struct clt__shape *in,
                        const struct clt__shape *out, size_t *fixed)
{
    (void)out;
    *fixed = 2 * ((size_t)l->vocab + 1);
    return 2 * 2 * in->d[0];
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    clt_tensor *ids = NULL;
    size_t R = p->B * L->in.d[0];
    CLT_TRY(clt_tensor_view(&ids, x, 0, 1, &R));
    /* the table in the output's storage: in mixed precision the 16-bit copy, gathered into
     * 16-bit activations (the model's 16-bit storage starts here, see model.c's first_16bit) */
    const clt_tensor *table = L->ydt == CLT_DTYPE_F32 ? L->w[0] : clt__layer_weight(L, 0);
    const clt_tensor *pos = NULL;
    if (L->next)
        pos = L->ydt == CLT_DTYPE_F32 ? L->next->w[0] : clt__layer_weight(L->next, 0);
    CLT_TRY(clt_op_embedding_forward(L->y, ids, table, pos));
    L->out_t = L->y;
fail:
    clt_tensor_free(ids);
    return st;
}

/* One token's row, with row pos of an absorbed posembed's table. */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    clt_tensor *prow = NULL;
    const size_t D = L->out.d[1], pd[2] = {1, D};
    const clt_tensor *table = L->ydt == CLT_DTYPE_F32 ? L->w[0] : clt__layer_weight(L, 0);
    CLT_TRY(clt__layer_row(L, pos));
    if (L->next) {
        const clt_tensor *pt =
            L->ydt == CLT_DTYPE_F32 ? L->next->w[0] : clt__layer_weight(L->next, 0);
        CLT_TRY(clt_tensor_view(&prow, pt, pos * D, 2, pd));
    }
    CLT_TRY(clt_op_embedding_forward(L->row, x, table, prow));
    L->out_t = L->row;
fail:
    clt_tensor_free(prow);
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)dx;
    (void)need_dx; /* ids have no gradient */
    clt_status st = CLT_OK;
    clt_tensor *ids = NULL, *ws = NULL, *dyv = NULL;
    size_t R = p->B * L->in.d[0], D = L->out.d[1], V = (size_t)L->spec.vocab;
    size_t words = clt_op_embedding_workspace(R, V), dd[2] = {R, D};
    *through = false;
    CLT_TRY(clt_tensor_view(&ids, L->x, 0, 1, &R));
    CLT_TRY(clt_tensor_view(&dyv, dy, 0, 2, dd));
    CLT_TRY(clt__tensor_view_as(&ws, L->ws, CLT_DTYPE_I32, 1, &words));
    /* the absorbed positions' gradient with the pass's beta; the table's added to a tied
     * head's when it shares it */
    if (L->next)
        CLT_TRY(clt_op_embedding_backward(NULL, L->next->dw[0], dyv, NULL, NULL, p->beta));
    CLT_TRY(clt_op_embedding_backward(L->dw[0], NULL, dyv, ids, ws,
                                      L->grad_shared[0] ? 1.0f : p->beta));
fail:
    clt_tensor_free(ids);
    clt_tensor_free(ws);
    clt_tensor_free(dyv);
    return st;
}

/* posembed right after it: in both passes (the positions in the gather's kernel) */
static enum clt__absorb absorbs(const struct clt__layer *L, const struct clt__layer *next)
{
    return next->kind->kind == CLT_LAYER_POSEMBED && next->ydt == L->ydt ? CLT__ABSORB_BOTH
                                                                         : CLT__ABSORB_NONE;
}

const struct clt__layer_kind clt__layer_embed = {
    .kind = CLT_LAYER_EMBED,
    .name = "embed",
    .usage = "embed D",
    .help = "token embedding, as nn.Embedding(V, D): token ids (T) -> (T, D), V the "
            "vocabulary; the first layer of a language model (text data)",
    .tokens = true,
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = out_shape,
    .params = params,
    .kept = clt__layer_keeps_output,
    .workspace = workspace,
    .forward = forward,
    .backward = backward,
    .decode = decode,
    .absorbs = absorbs,
};
