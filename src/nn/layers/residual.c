/* The residual block, "residual { LAYERS }": y = body(x) + shortcut(x), as torchvision's
 * BasicBlock without its final ReLU (a spec writes "residual { ... }, relu"). The block is the
 * PyTorch module
 *
 *     class Residual(nn.Module):
 *         def __init__(self, body, proj=None):
 *             super().__init__()
 *             self.body = nn.Sequential(*body)      # LAYERS
 *             if proj is not None:
 *                 self.proj = nn.Sequential(*proj)  # [Conv2d 1x1 (bias=False), BatchNorm2d]
 *         def forward(self, x):
 *             return self.body(x) + (self.proj(x) if hasattr(self, "proj") else x)
 *
 * so the block at index i names its parameters and buffers "{i}.body.{j}.weight",
 * "{i}.body.{j}.running_mean", ... and, when it projects, "{i}.proj.0.weight" (the 1x1
 * convolution, no bias) and "{i}.proj.1.weight", "{i}.proj.1.bias", "{i}.proj.1.running_mean",
 * ... (its batchnorm). The shortcut is the identity when body(x) has x's shape; otherwise
 * (channels or H, W differ) a 1x1 convolution with the stride S that maps H, W to the body's
 * output size ((H - 1) / S + 1 = OH, likewise W), followed by a batchnorm when the body holds
 * one, as torchvision's downsample. No such stride (or a flat input whose width changes) is a
 * spec error naming the layer.
 *
 * The model plans, names, allocates and counts the children (the body's layers, then the
 * projection's) as layers of their own (kind->children); this file runs them. Forward: the
 * body's layers in turn, the projection's, then y = shortcut + body output (a cast or copy, then
 * clt_op_axpy). Backward: the shortcut's gradient into dx first (dy itself for the identity,
 * else through the batchnorm and the convolution), then the body's layers in reverse through the
 * model's two block gradient buffers, whose result is added to dx. A dropout in the body draws
 * its mask from a stream of its own (rng_index: after the top-level layers').
 *
 * Mixed precision: the block is a weighted layer; its children keep the block's storage, except
 * that in a first weighted block reading the model's f32 values (not in a language model, 16-bit
 * from its embedding on) the body's layers before its first weighted one keep f32 (as
 * they would outside a block; like the model's leading layers, they run no backward unless a
 * layer before them has parameters); y has the body output's storage. */
#include "nn/layer_internal.h"

#include <stdio.h>
#include <string.h>

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    (void)l;
    /* the parser reads a block itself (src/nn/spec.c); here only words it could not take */
    return clt__spec_args_fail(a, a->n > 0 ? 0 : -1,
                               "expected '{' after residual: its layers go in braces, e.g. "
                               "\"residual { conv 64 k3 p1, batchnorm }\"");
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    size_t used = 0;
    if (size == 0) return;
    buf[0] = '\0';
    int len = snprintf(buf, size, " {");
    used = len > 0 ? (size_t)len : 0;
    for (int j = 0; j < l->body_n && used < size; j++) {
        const clt_layer_spec *b = &l->body[j];
        const char *name = clt_layer_kind_name(b->kind);
        char args[64] = "";
        if ((unsigned)b->kind < CLT_LAYER__COUNT && b->kind != CLT_LAYER_RESIDUAL)
            clt__layer_kind_of(b->kind)->format(b, args, sizeof args);
        len = snprintf(buf + used, size - used, "%s %s%s", j ? "," : "", name, args);
        if (len < 0) break;
        used += (size_t)len;
    }
    if (used < size) snprintf(buf + used, size - used, " }");
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if (l->body_n < 1 || !l->body)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: a residual block needs at least one layer, got %d",
                         layer, l->body_n);
    for (int j = 0; j < l->body_n; j++) {
        const clt_layer_spec *b = &l->body[j];
        if ((unsigned)b->kind >= CLT_LAYER__COUNT)
            return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                             "model spec: layer %d: layer %d of its residual block has unknown "
                             "kind %d",
                             layer, j + 1, (int)b->kind);
        if (b->kind == CLT_LAYER_RESIDUAL)
            return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                             "model spec: layer %d: a residual block inside a residual block is "
                             "not supported",
                             layer);
        if (clt__layer_kind_of(b->kind)->tokens)
            return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                             "model spec: layer %d: %s reads token ids and can only be the "
                             "model's first layer, not in a residual block",
                             layer, clt__layer_kind_of(b->kind)->name);
        clt_status st = clt__layer_kind_of(b->kind)->check(b, layer);
        if (st != CLT_OK) return st;
    }
    return CLT_OK;
}

static bool same_shape(const struct clt__shape *a, const struct clt__shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->d[d] != b->d[d]) return false;
    return true;
}

/* The stride of the 1x1 projection from in to out, or 0 when none maps H, W to OH, OW. */
static size_t proj_stride(const struct clt__shape *in, const struct clt__shape *out)
{
    if (in->ndim != 3 || out->ndim != 3) return 0;
    for (size_t s = 1; s <= in->d[1] || s <= in->d[2]; s++)
        if ((in->d[1] - 1) / s + 1 == out->d[1] && (in->d[2] - 1) / s + 1 == out->d[2]) return s;
    return 0;
}

static bool has_batchnorm(const clt_layer_spec *l)
{
    for (int j = 0; j < l->body_n; j++)
        if (l->body[j].kind == CLT_LAYER_BATCHNORM) return true;
    return false;
}

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    struct clt__shape s = *in;
    for (int j = 0; j < l->body_n; j++) {
        const clt_layer_spec *b = &l->body[j];
        const struct clt__layer_kind *k = clt__layer_kind_of(b->kind);
        char sub[128], args[64];
        struct clt__shape next;
        k->format(b, args, sizeof args);
        snprintf(sub, sizeof sub, "%s%s, in its residual block", k->name, args);
        clt_status st = k->out_shape(b, layer, sub, &s, &next);
        if (st != CLT_OK) return st;
        s = next;
    }
    if (!same_shape(in, &s) && !proj_stride(in, &s)) {
        char a[64], b[64];
        clt__shape_format(in, a, sizeof a);
        clt__shape_format(&s, b, sizeof b);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s): the block maps its input %s to %s, and "
                         "no shortcut fits: the identity needs the same shape, a 1x1 convolution "
                         "with a stride needs (C,H,W) shapes whose H and W the stride maps to the "
                         "block's",
                         layer, text, a, b);
    }
    *out = s;
    return CLT_OK;
}

static int children(const clt_layer_spec *l, const struct clt__shape *in,
                    const struct clt__shape *out, struct clt__child *child)
{
    bool proj = !same_shape(in, out);
    bool bn = proj && has_batchnorm(l);
    int n = l->body_n + (proj ? 1 : 0) + (bn ? 1 : 0);
    if (!child) return n;
    for (int j = 0; j < l->body_n; j++) {
        memset(&child[j], 0, sizeof child[j]);
        child[j].spec = l->body[j];
        child[j].spec.body = NULL;
        child[j].spec.body_n = 0;
        snprintf(child[j].prefix, sizeof child[j].prefix, "body.%d", j);
        child[j].from_input = j == 0;
    }
    if (proj) {
        struct clt__child *c = &child[l->body_n];
        memset(c, 0, sizeof *c);
        c->spec = (clt_layer_spec){.kind = CLT_LAYER_CONV, .out = (int)out->d[0], .k = 1,
                                   .stride = (int)proj_stride(in, out), .pad = 0, .bias = false};
        snprintf(c->prefix, sizeof c->prefix, "proj.0");
        c->from_input = true;
    }
    if (bn) {
        struct clt__child *c = &child[l->body_n + 1];
        memset(c, 0, sizeof *c);
        c->spec = (clt_layer_spec){.kind = CLT_LAYER_BATCHNORM};
        snprintf(c->prefix, sizeof c->prefix, "proj.1");
    }
    return n;
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    const clt_tensor *h = x, *s = x;
    for (int j = 0; j < L->nchildren; j++) {
        struct clt__layer *C = &L->child[j];
        const clt_tensor *in = j == L->spec.body_n ? x : (j < L->spec.body_n ? h : s);
        C->x = in;
        C->ran = false;
        CLT_TRY(C->kind->forward(C, in, p));
        if (j < L->spec.body_n) h = C->out_t;
        else s = C->out_t;
    }
    /* y = shortcut, then y += body(x) */
    if (clt_tensor_dtype(s) == clt_tensor_dtype(L->y)) CLT_TRY(clt_op_copy(L->y, s));
    else CLT_TRY(clt_op_cast(L->y, s));
    CLT_TRY(clt_op_axpy(L->y, 1.0f, h));
    L->out_t = L->y;
fail:
    return st;
}

/* One position: the body's children in turn on the row, then y_pos = x_pos + body's row.
 * Only with the identity shortcut (a projection exists for images alone: decodes says so). */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    const clt_tensor *h = x;
    for (int j = 0; j < L->nchildren; j++) {
        struct clt__layer *C = &L->child[j];
        CLT_TRY(C->kind->decode(C, h, pos));
        h = C->out_t;
    }
    CLT_TRY(clt__layer_row(L, pos));
    if (clt_tensor_dtype(x) == clt_tensor_dtype(L->row)) CLT_TRY(clt_op_copy(L->row, x));
    else CLT_TRY(clt_op_cast(L->row, x));
    CLT_TRY(clt_op_axpy(L->row, 1.0f, h));
    L->out_t = L->row;
fail:
    return st;
}

/* The identity shortcut and children that all decode. */
static bool decodes(const struct clt__layer *L, char *why, size_t n)
{
    if (L->nchildren != L->spec.body_n) {
        snprintf(why, n, "a residual block with a projection shortcut");
        return false;
    }
    for (int j = 0; j < L->nchildren; j++) {
        const struct clt__layer *C = &L->child[j];
        if (!C->kind->decode) {
            snprintf(why, n, "%s in a residual block", C->kind->name);
            return false;
        }
        if (C->kind->decodes && !C->kind->decodes(C, why, n)) return false;
    }
    return true;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    clt_tensor *view[2] = {NULL, NULL};
    *through = false;
    int nb = L->spec.body_n;
    size_t B = p->B;
    /* a (B, n) view of block buffer k */
#define BLOCK_VIEW(k, n)                                                                           \
    do {                                                                                           \
        clt_tensor_free(view[k]);                                                                  \
        view[k] = NULL;                                                                            \
        size_t dims_[2] = {B, (n)};                                                                \
        CLT_TRY(clt_tensor_view(&view[k], L->gb[k], 0, 2, dims_));                                 \
    } while (0)

    /* the shortcut, into dx */
    if (L->nchildren == nb) {
        if (need_dx) CLT_TRY(clt_op_copy(dx, dy));
    } else {
        const clt_tensor *g = dy;
        for (int j = L->nchildren - 1; j >= nb; j--) {
            struct clt__layer *C = &L->child[j];
            bool first = j == nb;
            clt_tensor *to = dx;
            bool thr = false;
            if (!first) {
                BLOCK_VIEW(0, C->in_n);
                to = view[0];
            }
            CLT_TRY(C->kind->backward(C, to, g, first ? need_dx : true, p, &thr));
            if (!thr) g = to;
            else if (first && need_dx) CLT_TRY(clt_op_copy(dx, g));
        }
    }
    /* the body, through the block buffers; its input gradient is added to dx */
    const clt_tensor *g = dy;
    int k = 0, firstp = 0; /* without need_dx, the body's layers before its first with
                              parameters need no backward (as the model's leading layers) */
    while (firstp < nb && L->child[firstp].nparams == 0) firstp++;
    for (int j = nb - 1; j >= (need_dx ? 0 : firstp); j--) {
        struct clt__layer *C = &L->child[j];
        bool thr = false;
        BLOCK_VIEW(k, C->in_n);
        CLT_TRY(C->kind->backward(C, view[k], g, j > firstp || need_dx, p, &thr));
        if (thr) continue;
        g = view[k];
        k ^= 1;
    }
    if (need_dx) CLT_TRY(clt_op_axpy(dx, 1.0f, g));
#undef BLOCK_VIEW
fail:
    clt_tensor_free(view[0]);
    clt_tensor_free(view[1]);
    return st;
}

const struct clt__layer_kind clt__layer_residual = {
    .kind = CLT_LAYER_RESIDUAL,
    .name = "residual",
    .usage = "residual { LAYERS }",
    .help = "body(x) + shortcut(x), as torchvision's BasicBlock without its final ReLU: LAYERS "
            "(no residual among them) is the body; the shortcut is the identity, or a 1x1 "
            "convolution (and a batchnorm when the body has one) where the shape changes",
    .weighted = true,
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = out_shape,
    .params = clt__layer_no_params,
    .kept = clt__layer_keeps_output,
    .forward = forward,
    .backward = backward,
    .decode = decode,
    .decodes = decodes,
    .children = children,
};
