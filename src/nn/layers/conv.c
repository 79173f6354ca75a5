/* The 2-D convolution layer, "conv OUT kK [sS] [pP] [nobias]": y (B, OUT, OH, OW) = conv2d of
 * x (B, C, H, W) with W (OUT, C, K, K), stride S, zero padding P, plus b (OUT), as nn.Conv2d;
 * parameters "{i}.weight" and "{i}.bias" initialised from fan-in C*K*K and fan-out OUT*K*K.
 * The passes are clt_op_conv2d_forward/backward (im2col + GEMM, src/ops/conv.c) in the model's
 * shared workspace. Its input must be shaped (C, H, W). */
#include "nn/layer_internal.h"

#include <stdio.h>

/* Argument i as "<letter><digits>" (the letter in either case): the number into *v (capped just
 * above CLT_SPEC_MAX_WIDTH); false when the word is not the letter followed by digits. */
static bool prefixed(const struct clt__spec_args *a, int i, char letter, long long *v)
{
    return a->len[i] >= 2 && (a->word[i][0] | 0x20) == letter &&
           clt__spec_arg_digits(a, i, 1, CLT_SPEC_MAX_WIDTH, v);
}

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    long long v = 0;
    if (a->n < 1)
        return clt__spec_args_fail(a, -1, "conv needs a channel count and a kernel size, e.g. "
                                          "\"conv 32 k3\"");
    if (!clt__spec_arg_digits(a, 0, 0, CLT_SPEC_MAX_WIDTH, &v) || v == 0)
        return clt__spec_args_fail(a, 0, "channel count must be a positive integer, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    if (v > CLT_SPEC_MAX_WIDTH)
        return clt__spec_args_fail(a, 0, "channel count must be at most %d, got \"%.*s\"",
                                   CLT_SPEC_MAX_WIDTH, CLT__SPEC_ARG(a, 0));
    l->out = (int)v;
    if (a->n < 2)
        return clt__spec_args_fail(a, -1, "conv needs a kernel size after the channel count, e.g. "
                                          "\"conv %d k3\"",
                                   l->out);
    if (!prefixed(a, 1, 'k', &v))
        return clt__spec_args_fail(a, 1,
                                   "expected the kernel size \"k<K>\" (e.g. \"k3\") after the "
                                   "channel count, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 1));
    if (v < 1 || v > CLT_SPEC_MAX_KERNEL)
        return clt__spec_args_fail(a, 1, "kernel size must be in [1, %d], got \"%.*s\"",
                                   CLT_SPEC_MAX_KERNEL, CLT__SPEC_ARG(a, 1));
    l->k = (int)v;
    l->stride = 1;
    l->pad = 0;
    l->bias = true;
    /* then, each at most once and in this order: sS, pP, nobias */
    int stage = 0;
    for (int i = 2; i < a->n; i++) {
        if (i >= CLT__SPEC_MAX_ARGS) break; /* not reached: word 5 is always unexpected */
        if (stage < 1 && prefixed(a, i, 's', &v)) {
            if (v < 1 || v > CLT_SPEC_MAX_KERNEL)
                return clt__spec_args_fail(a, i, "stride must be in [1, %d], got \"%.*s\"",
                                           CLT_SPEC_MAX_KERNEL, CLT__SPEC_ARG(a, i));
            l->stride = (int)v;
            stage = 1;
        } else if (stage < 2 && prefixed(a, i, 'p', &v)) {
            if (v > CLT_SPEC_MAX_KERNEL)
                return clt__spec_args_fail(a, i, "padding must be in [0, %d], got \"%.*s\"",
                                           CLT_SPEC_MAX_KERNEL, CLT__SPEC_ARG(a, i));
            l->pad = (int)v;
            stage = 2;
        } else if (stage < 3 && clt__spec_arg_is(a, i, "nobias")) {
            l->bias = false;
            stage = 3;
        } else {
            static const char *const expect[] = {
                "\"s<S>\", \"p<P>\", \"nobias\" or the end of the layer",
                "\"p<P>\", \"nobias\" or the end of the layer",
                "\"nobias\" or the end of the layer", "the end of the layer"};
            return clt__spec_args_fail(a, i, "unexpected \"%.*s\"; expected %s (in that order)",
                                       CLT__SPEC_ARG(a, i), expect[stage]);
        }
    }
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    char s[16] = "", p[16] = "";
    if (l->stride != 1) snprintf(s, sizeof s, " s%d", l->stride);
    if (l->pad != 0) snprintf(p, sizeof p, " p%d", l->pad);
    snprintf(buf, size, " %d k%d%s%s%s", l->out, l->k, s, p, l->bias ? "" : " nobias");
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if (l->out < 1 || l->out > CLT_SPEC_MAX_WIDTH)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: conv channel count must be in [1, %d], got %d",
                         layer, CLT_SPEC_MAX_WIDTH, l->out);
    if (l->k < 1 || l->k > CLT_SPEC_MAX_KERNEL || l->stride < 1 ||
        l->stride > CLT_SPEC_MAX_KERNEL || l->pad < 0 || l->pad > CLT_SPEC_MAX_KERNEL)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: conv kernel size and stride must be in [1, %d] and "
                         "padding in [0, %d], got k%d s%d p%d",
                         layer, CLT_SPEC_MAX_KERNEL, CLT_SPEC_MAX_KERNEL, l->k, l->stride, l->pad);
    return CLT_OK;
}

static struct clt_conv_geom geom_of(const clt_layer_spec *l, const struct clt__shape *in,
                                    size_t B)
{
    return (struct clt_conv_geom){B,
                                  in->d[0],
                                  in->d[1],
                                  in->d[2],
                                  (size_t)l->out,
                                  (size_t)l->k,
                                  (size_t)l->stride,
                                  (size_t)l->pad};
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    char got[64];
    clt__shape_format(in, got, sizeof got);
    if (in->ndim != 3)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) needs a (C,H,W) input, got %s", layer, text,
                         got);
    size_t OH = clt_conv_out_side(in->d[1], (size_t)l->k, (size_t)l->stride, (size_t)l->pad),
           OW = clt_conv_out_side(in->d[2], (size_t)l->k, (size_t)l->stride, (size_t)l->pad);
    if (OH == 0 || OW == 0)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s): the %dx%d kernel does not fit the input %s "
                         "padded by %d",
                         layer, text, l->k, l->k, got, l->pad);
    out->ndim = 3;
    out->d[0] = (size_t)l->out;
    out->d[1] = OH;
    out->d[2] = OW;
    return CLT_OK;
}

static int params(const clt_layer_spec *l, const struct clt__shape *in,
                  const struct clt__shape *out, struct clt__param_decl *decl)
{
    size_t C = in->d[0], OUT = out->d[0], K = (size_t)l->k;
    decl[0] = (struct clt__param_decl){"weight", 4, {OUT, C, K, K}, true, C * K * K, OUT * K * K,
                                       true, 0, false, false};
    if (!l->bias) return 1;
    decl[1] = (struct clt__param_decl){"bias", 1, {OUT}, false, C * K * K, OUT * K * K, false, 0,
                                       false, false};
    return 2;
}

/* a * b, saturating at SIZE_MAX */
static size_t sat_mul(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

static size_t workspace(const clt_layer_spec *l, const struct clt__shape *in,
                        const struct clt__shape *out, size_t *fixed)
{
    /* The im2col matrix of one sample, (OH*OW, C*K*K + OUT), bounds what the op asks for; a
     * geometry whose count would wrap reads as SIZE_MAX, which the plan refuses. */
    size_t K = (size_t)l->k, rows = sat_mul(out->d[1], out->d[2]),
           row = sat_mul(sat_mul(in->d[0], K), K);
    if (row >= SIZE_MAX / 8 || sat_mul(rows, row + out->d[0]) >= SIZE_MAX / 8) {
        *fixed = SIZE_MAX;
        return SIZE_MAX;
    }
    struct clt_conv_geom none = geom_of(l, in, 0), one = geom_of(l, in, 1);
    *fixed = clt_op_conv2d_workspace(&none);
    return clt_op_conv2d_workspace(&one) - *fixed;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    struct clt_conv_geom g = geom_of(&L->spec, &L->in, p->B);
    *L->ws_owner = NULL;
    CLT_TRY(clt_op_conv2d_forward(L->y, x, clt__layer_weight(L, 0),
                                  L->w[1] ? clt__layer_weight(L, 1) : NULL, L->ws, &g));
    /* x's im2col matrix or padded copy: the backward need not rebuild it */
    if (clt_op_conv2d_leaves_cols(L->y, x, clt__layer_weight(L, 0), L->ws, &g)) *L->ws_owner = L;
    L->out_t = L->y;
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    struct clt_conv_geom g = geom_of(&L->spec, &L->in, p->B);
    *through = false;
    const bool ready = *L->ws_owner == L;
    *L->ws_owner = NULL;
    CLT_TRY(clt_op_conv2d_backward(need_dx ? dx : NULL, L->dw[0], L->dw[1], dy, L->x,
                                   clt__layer_weight(L, 0), L->ws, &g, p->beta, ready));
    if (!need_dx && clt_op_conv2d_backward_leaves_cols(L->dw[0], dy, L->x, clt__layer_weight(L, 0),
                                                       L->ws, &g))
        *L->ws_owner = L; /* still there */
fail:
    return st;
}

const struct clt__layer_kind clt__layer_conv = {
    .kind = CLT_LAYER_CONV,
    .name = "conv",
    .usage = "conv OUT kK [sS] [pP] [nobias]",
    .help = "2-D convolution of (C, H, W), as nn.Conv2d(C, OUT, K, stride=S, padding=P): "
            "stride 1 and zero padding 0 by default, bias on by default",
    .weighted = true,
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = out_shape,
    .params = params,
    .kept = clt__layer_keeps_output,
    .workspace = workspace,
    .forward = forward,
    .backward = backward,
};
