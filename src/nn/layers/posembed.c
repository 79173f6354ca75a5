/* The learned-position layer, "posembed": y = x + P for x (T, D), P "{i}.weight" (T, D) (GPT-2's
 * wpe; T from the input, i.e. --block), drawn from normal(0, 0.02) and decayed as an
 * embedding. Right after an embed layer it is absorbed (that layer adds the positions in its
 * gather and gives their gradient); elsewhere clt_op_add_positions adds them, and its backward
 * passes dy on unchanged (dx = dy) with dP the sum of dy over the batch. */
#include "nn/layer_internal.h"

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    if (in->ndim != 2) {
        char got[64];
        clt__shape_format(in, got, sizeof got);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) adds positions to a (T, D) sequence, got %s; "
                         "put it after an embed layer",
                         layer, text, got);
    }
    *out = *in;
    return CLT_OK;
}

static int params(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl)
{
    (void)l;
    (void)out;
    size_t T = in->d[0], D = in->d[1];
    decl[0] = (struct clt__param_decl){"weight", 2, {T, D}, true, D, T, true, 0, false, false};
    decl[0].std = 0.02f;
    return 1;
}

/* (R, D) views of a (B, T, D) tensor */
static clt_status rows(const struct clt__layer *L, const clt_tensor *t, size_t B, clt_tensor **v)
{
    size_t d[2] = {B * L->in.d[0], L->in.d[1]};
    return clt_tensor_view(v, t, 0, 2, d);
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    clt_tensor *xv = NULL, *yv = NULL;
    if (L->absorbed != CLT__ABSORB_NONE) { /* the embed layer before added them */
        L->out_t = x;
        return CLT_OK;
    }
    CLT_TRY(rows(L, x, p->B, &xv));
    CLT_TRY(rows(L, L->y, p->B, &yv));
    CLT_TRY(clt_op_add_positions(yv, xv, clt__layer_weight(L, 0)));
    L->out_t = L->y;
fail:
    clt_tensor_free(xv);
    clt_tensor_free(yv);
    return st;
}

/* Row pos of the table added to the row (nothing when the embed layer before added it). */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    clt_tensor *prow = NULL;
    const size_t D = L->in.d[1], pd[2] = {1, D};
    if (L->absorbed != CLT__ABSORB_NONE) {
        L->out_t = x;
        return CLT_OK;
    }
    CLT_TRY(clt__layer_row(L, pos));
    CLT_TRY(clt_tensor_view(&prow, clt__layer_weight(L, 0), pos * D, 2, pd));
    CLT_TRY(clt_op_add_positions(L->row, x, prow));
    L->out_t = L->row;
fail:
    clt_tensor_free(prow);
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)dx;
    (void)need_dx;
    clt_status st = CLT_OK;
    clt_tensor *dyv = NULL;
    *through = true; /* dx = dy */
    if (L->absorbed != CLT__ABSORB_NONE) return CLT_OK; /* the embed layer gives dP */
    CLT_TRY(rows(L, dy, p->B, &dyv));
    CLT_TRY(clt_op_embedding_backward(NULL, L->dw[0], dyv, NULL, NULL, p->beta));
fail:
    clt_tensor_free(dyv);
    return st;
}

const struct clt__layer_kind clt__layer_posembed = {
    .kind = CLT_LAYER_POSEMBED,
    .name = "posembed",
    .usage = "posembed",
    .help = "learned positions, as GPT-2's wpe: adds a (T, D) table to a (T, D) input (T from "
            "--block); fused into the embed layer just before it",
    .parse = clt__layer_parse_none,
    .format = clt__layer_format_none,
    .check = clt__layer_check_none,
    .out_shape = out_shape,
    .params = params,
    .kept = clt__layer_keeps_output,
    .forward = forward,
    .backward = backward,
    .decode = decode,
};
