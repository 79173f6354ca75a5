/* The flatten layer: (B, C, H, W) or (B, T, C) -> (B, C*H*W) or (B, T*C), a view of its input
 * (no copy, no memory kept); the identity on a flat (B, features) input. Backward passes the gradient
 * through unchanged (the same elements in the same order). */
#include "nn/layer_internal.h"

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    (void)layer;
    (void)text;
    out->ndim = 1;
    out->d[0] = clt__shape_numel(in);
    return CLT_OK;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    if (L->in.ndim == 1) {
        L->out_t = x; /* already flat */
        goto fail;
    }
    /* L->y is this layer's own view (it keeps no output): refreshed for every input */
    clt_tensor_free(L->y);
    L->y = NULL;
    size_t dims[2] = {p->B, L->out_n};
    CLT_TRY(clt_tensor_view(&L->y, x, 0, 2, dims));
    L->out_t = L->y;
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)L;
    (void)dx;
    (void)dy;
    (void)need_dx;
    (void)p;
    *through = true;
    return CLT_OK;
}

const struct clt__layer_kind clt__layer_flatten = {
    .kind = CLT_LAYER_FLATTEN,
    .name = "flatten",
    .usage = "flatten",
    .help = "(C, H, W) to C*H*W features, (T, C) to T*C; the identity on flat inputs",
    .parse = clt__layer_parse_none,
    .format = clt__layer_format_none,
    .check = clt__layer_check_none,
    .out_shape = out_shape,
    .params = clt__layer_no_params,
    .kept = clt__layer_keeps_nothing,
    .forward = forward,
    .backward = backward,
};
