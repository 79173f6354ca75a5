/* The layer-normalisation layer, "layernorm": nn.LayerNorm(D) over the last dimension of its
 * input, each sample of a flat (F) input over its D = F features, each position of a (T, C)
 * sequence over its D = C; eps 1e-5, elementwise affine. Parameters "{i}.weight" (D, ones) and
 * "{i}.bias" (D, zeros) whatever the init scheme, as PyTorch's state_dict; no buffers (the same
 * normalisation in training and evaluation). A (C, H, W) input is refused: PyTorch's
 * LayerNorm(W) over an image's rows is rarely what is meant; flatten first.
 *
 * Forward keeps the row statistics (mean and 1/std of each of the B * T rows, f32) in L->saved
 * for backward, which reads them with the input x (the layer before keeps it). Backward gives
 * dx and adds (beta) or writes the gradients of weight and bias.
 *
 * Mixed precision: x, y and the gradients are stored as the neighbouring layers' (16-bit
 * from the first weighted layer, or a language model's embedding, to the last weighted one);
 * the kernels read the f32 master weight and bias and keep f32 statistics (as under PyTorch's
 * autocast, layer norm runs in f32). */
#include "nn/layer_internal.h"

#define LN_EPS 1e-5f

/* Rows of one sample and their width D. */
static void rows_of(const struct clt__shape *in, size_t *rows, size_t *D)
{
    *rows = in->ndim == 2 ? in->d[0] : 1;
    *D = in->d[in->ndim - 1];
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    if (in->ndim != 1 && in->ndim != 2) {
        char got[64];
        clt__shape_format(in, got, sizeof got);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) normalises the last dimension of flat (F) or "
                         "sequence (T,C) inputs, got %s; put a flatten before it",
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
    size_t rows, D;
    rows_of(in, &rows, &D);
    decl[0] = (struct clt__param_decl){"weight", 1, {D}, true, 1, 1, false, 0, false, false};
    decl[1] = (struct clt__param_decl){"bias", 1, {D}, false, 1, 1, false, 0, false, false};
    return 2;
}

/* weight 1, bias 0, as nn.LayerNorm's reset_parameters */
static void init(const clt_layer_spec *l, int j, float *dst, size_t n)
{
    (void)l;
    for (size_t i = 0; i < n; i++) dst[i] = j == 0 ? 1.0f : 0.0f;
}

/* mean and rstd of each row */
static size_t saved(const clt_layer_spec *l, const struct clt__shape *in,
                    const struct clt__shape *out)
{
    (void)l;
    (void)out;
    size_t rows, D;
    rows_of(in, &rows, &D);
    return 2 * rows;
}

/* Views for a pass over B samples: x as (R, D) (the tensor handed over may be shaped otherwise,
 * as the model's flat input), and the statistics mean (R) and rstd (R) in L->saved. */
static clt_status views(const struct clt__layer *L, const clt_tensor *x, size_t B, clt_tensor **xv,
                        clt_tensor **mean, clt_tensor **rstd)
{
    clt_status st = CLT_OK;
    size_t rows, D;
    rows_of(&L->in, &rows, &D);
    size_t R = B * rows, xd[2] = {R, D};
    CLT_TRY(clt_tensor_view(xv, x, 0, 2, xd));
    CLT_TRY(clt_tensor_view(mean, L->saved, 0, 1, &R));
    CLT_TRY(clt_tensor_view(rstd, L->saved, R, 1, &R));
fail:
    return st;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    clt_tensor *xv = NULL, *mean = NULL, *rstd = NULL;
    CLT_TRY(views(L, x, p->B, &xv, &mean, &rstd));
    CLT_TRY(clt_op_layernorm_forward(L->y, mean, rstd, xv, L->w[0], L->w[1], LN_EPS));
    L->ran = true;
    L->out_t = L->y;
fail:
    clt_tensor_free(xv);
    clt_tensor_free(mean);
    clt_tensor_free(rstd);
    return st;
}

/* One position's row; its statistics where a batch-1 forward keeps row pos's (mean at pos,
 * rstd at T + pos of L->saved). */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    clt_tensor *mean = NULL, *rstd = NULL;
    const size_t T = L->in.d[0], one = 1;
    CLT_TRY(clt__layer_row(L, pos));
    CLT_TRY(clt_tensor_view(&mean, L->saved, pos, 1, &one));
    CLT_TRY(clt_tensor_view(&rstd, L->saved, T + pos, 1, &one));
    CLT_TRY(clt_op_layernorm_forward(L->row, mean, rstd, x, L->w[0], L->w[1], LN_EPS));
    L->out_t = L->row;
fail:
    clt_tensor_free(mean);
    clt_tensor_free(rstd);
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    clt_tensor *xv = NULL, *mean = NULL, *rstd = NULL;
    *through = false;
    CLT_TRY(views(L, L->x, p->B, &xv, &mean, &rstd));
    CLT_TRY(clt_op_layernorm_backward(need_dx ? dx : NULL, L->dw[0], L->dw[1], dy, xv, mean, rstd,
                                      L->w[0], p->beta));
fail:
    clt_tensor_free(xv);
    clt_tensor_free(mean);
    clt_tensor_free(rstd);
    return st;
}

const struct clt__layer_kind clt__layer_layernorm = {
    .kind = CLT_LAYER_LAYERNORM,
    .name = "layernorm",
    .usage = "layernorm",
    .help = "layer normalisation over the last dimension, as nn.LayerNorm: each sample of a flat "
            "input over its features, each position of (T, C) over C; eps 1e-5, weight 1 and "
            "bias 0 at init; an image input needs a flatten first",
    .parse = clt__layer_parse_none,
    .format = clt__layer_format_none,
    .check = clt__layer_check_none,
    .out_shape = out_shape,
    .params = params,
    .init = init,
    .kept = clt__layer_keeps_output,
    .saved = saved,
    .forward = forward,
    .backward = backward,
    .decode = decode,
};
