/* The layer table: every layer kind at its clt_layer_kind index, the helpers the kinds without
 * arguments or parameters share, and the shape helpers. See src/nn/layer_internal.h for what
 * an entry holds and how to add one. */
#include "nn/layer_internal.h"

#include <stdio.h>

static const struct clt__layer_kind *const kinds[CLT_LAYER__COUNT] = {
    [CLT_LAYER_LINEAR] = &clt__layer_linear,
    [CLT_LAYER_RELU] = &clt__layer_relu,
    [CLT_LAYER_GELU] = &clt__layer_gelu,
    [CLT_LAYER_TANH] = &clt__layer_tanh,
    [CLT_LAYER_SIGMOID] = &clt__layer_sigmoid,
    [CLT_LAYER_DROPOUT] = &clt__layer_dropout,
    [CLT_LAYER_FLATTEN] = &clt__layer_flatten,
    [CLT_LAYER_SILU] = &clt__layer_silu,
    [CLT_LAYER_LEAKYRELU] = &clt__layer_leakyrelu,
    [CLT_LAYER_CONV] = &clt__layer_conv,
    [CLT_LAYER_MAXPOOL] = &clt__layer_maxpool,
    [CLT_LAYER_AVGPOOL] = &clt__layer_avgpool,
    [CLT_LAYER_GLOBALAVGPOOL] = &clt__layer_globalavgpool,
    [CLT_LAYER_BATCHNORM] = &clt__layer_batchnorm,
    [CLT_LAYER_RESIDUAL] = &clt__layer_residual,
    [CLT_LAYER_LAYERNORM] = &clt__layer_layernorm,
    [CLT_LAYER_EMBED] = &clt__layer_embed,
    [CLT_LAYER_POSEMBED] = &clt__layer_posembed,
    [CLT_LAYER_ATTENTION] = &clt__layer_attention,
};

const struct clt__layer_kind *clt__layer_kind_of(clt_layer_kind k)
{
    CLT_ASSERT((unsigned)k < CLT_LAYER__COUNT && kinds[k] && kinds[k]->kind == k);
    return kinds[k];
}

size_t clt__shape_numel(const struct clt__shape *s)
{
    size_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

void clt__shape_format(const struct clt__shape *s, char *buf, size_t size)
{
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < s->ndim && used < size; i++) {
        int len = snprintf(buf + used, size - used, "%s%zu", i ? "x" : "", s->d[i]);
        if (len < 0) break;
        used += (size_t)len;
    }
}

clt_status clt__layer_parse_none(const struct clt__spec_args *a, clt_layer_spec *l)
{
    if (a->n >= 1)
        return clt__spec_args_fail(a, 0, "%s takes no arguments, got \"%.*s\"",
                                   clt_layer_kind_name(l->kind), CLT__SPEC_ARG(a, 0));
    return CLT_OK;
}

void clt__layer_format_none(const clt_layer_spec *l, char *buf, size_t size)
{
    (void)l;
    if (size) buf[0] = '\0';
}

clt_status clt__layer_check_none(const clt_layer_spec *l, int layer)
{
    (void)l;
    (void)layer;
    return CLT_OK;
}

clt_status clt__layer_same_shape(const clt_layer_spec *l, int layer, const char *text,
                                 const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    (void)layer;
    (void)text;
    *out = *in;
    return CLT_OK;
}

int clt__layer_no_params(const clt_layer_spec *l, const struct clt__shape *in,
                         const struct clt__shape *out, struct clt__param_decl *decl)
{
    (void)l;
    (void)in;
    (void)out;
    (void)decl;
    return 0;
}

size_t clt__layer_keeps_output(const clt_layer_spec *l, const struct clt__shape *in,
                               const struct clt__shape *out)
{
    (void)l;
    (void)in;
    return clt__shape_numel(out);
}

size_t clt__layer_keeps_nothing(const clt_layer_spec *l, const struct clt__shape *in,
                                const struct clt__shape *out)
{
    (void)l;
    (void)in;
    (void)out;
    return 0;
}

clt_status clt__layer_row(struct clt__layer *L, size_t pos)
{
    CLT_ASSERT(L->y_full && L->out.ndim == 2 && pos < L->out.d[0]);
    const size_t W = L->out.d[1], dims[2] = {1, W};
    clt_tensor_free(L->row);
    L->row = NULL;
    return clt_tensor_view(&L->row, L->y_full, pos * W, 2, dims);
}
