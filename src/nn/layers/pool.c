/* The pooling layers over a (C, H, W) input: "maxpool K [sS]" and "avgpool K [sS]" (K x K
 * windows, stride S (K when omitted), no padding, floor mode: nn.MaxPool2d(K, stride=S) and
 * nn.AvgPool2d(K, stride=S)), (C, H, W) -> (C, OH, OW); and "globalavgpool", the mean of each
 * channel, (C, H, W) -> (C) (nn.AdaptiveAvgPool2d(1) then flatten, so a linear layer can follow).
 * Each keeps only its output (the next layer's input). Max-pool's backward recomputes each
 * window's first maximum from the forward input, which the layer before keeps (or the caller's
 * input, for a first layer), so no indices are kept. */
#include "nn/layer_internal.h"

#include <stdio.h>

/* A positive integer of at most CLT_SPEC_MAX_KERNEL in word i from character `skip` on. */
static bool read_size(const struct clt__spec_args *a, int i, int skip, int *out)
{
    long long v = 0;
    if (!clt__spec_arg_digits(a, i, skip, CLT_SPEC_MAX_KERNEL, &v)) return false;
    if (v < 1 || v > CLT_SPEC_MAX_KERNEL) return false;
    *out = (int)v;
    return true;
}

/* "maxpool K [sS]", "avgpool K [sS]". */
static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    const char *name = clt_layer_kind_name(l->kind);
    if (a->n < 1)
        return clt__spec_args_fail(a, -1, "%s needs a window size, e.g. \"%s 2\"", name, name);
    if (!read_size(a, 0, 0, &l->k))
        return clt__spec_args_fail(a, 0, "%s window size must be an integer in [1, %d], got "
                                   "\"%.*s\"",
                                   name, CLT_SPEC_MAX_KERNEL, CLT__SPEC_ARG(a, 0));
    l->stride = l->k;
    if (a->n >= 2) {
        bool s = a->len[1] >= 1 && (a->word[1][0] == 's' || a->word[1][0] == 'S');
        if (!s)
            return clt__spec_args_fail(a, 1,
                                       "unexpected \"%.*s\" after the window size; expected a "
                                       "stride (\"s2\") or the end of the layer",
                                       CLT__SPEC_ARG(a, 1));
        if (!read_size(a, 1, 1, &l->stride))
            return clt__spec_args_fail(a, 1, "%s stride must be \"s\" and an integer in [1, %d], "
                                       "got \"%.*s\"",
                                       name, CLT_SPEC_MAX_KERNEL, CLT__SPEC_ARG(a, 1));
    }
    if (a->n >= 3)
        return clt__spec_args_fail(a, 2,
                                   "unexpected \"%.*s\" after the stride; expected the end of the "
                                   "layer",
                                   CLT__SPEC_ARG(a, 2));
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    if (l->stride != l->k) snprintf(buf, size, " %d s%d", l->k, l->stride);
    else snprintf(buf, size, " %d", l->k);
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    const char *name = clt_layer_kind_name(l->kind);
    if (l->k < 1 || l->k > CLT_SPEC_MAX_KERNEL)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: %s window size must be in [1, %d], got %d", layer,
                         name, CLT_SPEC_MAX_KERNEL, l->k);
    if (l->stride < 1 || l->stride > CLT_SPEC_MAX_KERNEL)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: %s stride must be in [1, %d], got %d", layer, name,
                         CLT_SPEC_MAX_KERNEL, l->stride);
    return CLT_OK;
}

/* Records "needs a (C,H,W) input" naming the layer, unless `in` is (C, H, W). */
static clt_status need_chw(int layer, const char *text, const struct clt__shape *in)
{
    if (in->ndim == 3) return CLT_OK;
    char got[64];
    clt__shape_format(in, got, sizeof got);
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s) needs a (C,H,W) input, got %s", layer, text, got);
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    clt_status st = need_chw(layer, text, in);
    if (st != CLT_OK) return st;
    if ((size_t)l->k > in->d[1] || (size_t)l->k > in->d[2]) {
        char got[64];
        clt__shape_format(in, got, sizeof got);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s): the %dx%d window is larger than the input "
                         "%s (C x H x W)",
                         layer, text, l->k, l->k, got);
    }
    out->ndim = 3;
    out->d[0] = in->d[0];
    out->d[1] = (in->d[1] - (size_t)l->k) / (size_t)l->stride + 1;
    out->d[2] = (in->d[2] - (size_t)l->k) / (size_t)l->stride + 1;
    return CLT_OK;
}

static clt_status global_out_shape(const clt_layer_spec *l, int layer, const char *text,
                                   const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    clt_status st = need_chw(layer, text, in);
    if (st != CLT_OK) return st;
    out->ndim = 1;
    out->d[0] = in->d[0];
    return CLT_OK;
}

/* The op's geometry of L: its window and stride, or the whole plane for globalavgpool. */
static struct clt_pool_geom geom_of(const struct clt__layer *L)
{
    struct clt_pool_geom g = {L->in.d[0], L->in.d[1], L->in.d[2], L->spec.k, L->spec.k,
                              L->spec.stride, L->spec.stride};
    if (L->kind->kind == CLT_LAYER_GLOBALAVGPOOL) {
        g.kh = g.sh = (int)L->in.d[1];
        g.kw = g.sw = (int)L->in.d[2];
    }
    return g;
}

static clt_pool pool_of(const struct clt__layer *L)
{
    return L->kind->kind == CLT_LAYER_MAXPOOL ? CLT_POOL_MAX : CLT_POOL_AVG;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    (void)p;
    const struct clt_pool_geom g = geom_of(L);
    CLT_TRY(clt_op_pool_forward(pool_of(L), &g, L->y, x));
    L->out_t = L->y;
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)p;
    *through = false;
    if (!need_dx) return CLT_OK; /* no parameters: nothing else to compute */
    const struct clt_pool_geom g = geom_of(L);
    clt_pool kind = pool_of(L);
    return clt_op_pool_backward(kind, &g, dx, dy, kind == CLT_POOL_MAX ? L->x : NULL);
}

#define CLT__POOL_KIND(stem, KIND, use, help_text, parse_fn, format_fn, check_fn, shape_fn)       \
    const struct clt__layer_kind clt__layer_##stem = {                                             \
        .kind = CLT_LAYER_##KIND,                                                                  \
        .name = #stem,                                                                             \
        .usage = use,                                                                              \
        .help = help_text,                                                                         \
        .parse = parse_fn,                                                                         \
        .format = format_fn,                                                                       \
        .check = check_fn,                                                                         \
        .out_shape = shape_fn,                                                                     \
        .params = clt__layer_no_params,                                                            \
        .kept = clt__layer_keeps_output,                                                           \
        .forward = forward,                                                                        \
        .backward = backward,                                                                      \
    }

CLT__POOL_KIND(maxpool, MAXPOOL, "maxpool K [sS]",
               "the maximum of each K x K window of (C, H, W), as nn.MaxPool2d(K, stride=S): no "
               "padding, stride K by default",
               parse, format, check, out_shape);
CLT__POOL_KIND(avgpool, AVGPOOL, "avgpool K [sS]",
               "the mean of each K x K window, likewise, as nn.AvgPool2d(K, stride=S)", parse,
               format, check, out_shape);
CLT__POOL_KIND(globalavgpool, GLOBALAVGPOOL, "globalavgpool",
               "(C, H, W) to C, the mean of each channel, as nn.AdaptiveAvgPool2d(1) then "
               "flatten", clt__layer_parse_none, clt__layer_format_none, clt__layer_check_none,
               global_out_shape);
