/* The elementwise activations, one implementation for all of them parameterised by the op they
 * run (clt_act): relu, gelu (tanh approximation), tanh, sigmoid, silu and "leakyrelu [A]" (A the
 * slope for negative inputs, 0.01 when omitted, as nn.LeakyReLU). Each keeps its output y for
 * backward, which reads x or y as the op needs. The layer before may run it (absorbed: see
 * clt__layer_kind.absorbs): a batchnorm its relu and a linear layer any of them in both
 * passes, which are identities here; a linear layer only the forward of those whose backward
 * reads x (gelu, silu, leakyrelu with a negative slope), whose backward then runs here. A
 * linear layer after it may apply its gradient instead (grad_after: the backward is an
 * identity here too). */
#include "nn/layer_internal.h"

#include <math.h>
#include <stdio.h>

#define LEAKYRELU_DEFAULT_ALPHA 0.01f /* nn.LeakyReLU's negative_slope */

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    (void)p;
    if (L->absorbed != CLT__ABSORB_NONE) { /* the layer before has applied it */
        L->out_t = L->absorbed == CLT__ABSORB_BOTH ? x : L->y;
        return CLT_OK;
    }
    CLT_TRY(clt_op_act_forward_alpha(L->kind->act, L->spec.alpha, L->y, x));
    L->out_t = L->y;
fail:
    return st;
}

/* The row: the layer before applied it (its row holds the result), or the op on one row. */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    clt_status st = CLT_OK;
    if (L->absorbed == CLT__ABSORB_BOTH) {
        L->out_t = x;
        return CLT_OK;
    }
    CLT_TRY(clt__layer_row(L, pos));
    if (L->absorbed == CLT__ABSORB_NONE)
        CLT_TRY(clt_op_act_forward_alpha(L->kind->act, L->spec.alpha, L->row, x));
    L->out_t = L->row;
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)need_dx;
    (void)p;
    /* the layer before or the one after applies the gradient */
    *through = L->absorbed == CLT__ABSORB_BOTH || L->grad_after;
    if (*through) return CLT_OK;
    return clt_op_act_backward_alpha(L->kind->act, L->spec.alpha, dx, dy, L->x, L->y);
}

const clt_tensor *clt__layer_act_saved(const struct clt__layer *A)
{
    if (A->absorbed == CLT__ABSORB_BOTH) return A->x;
    return clt_op_act_saved(A->kind->act, A->spec.alpha, A->x, A->y);
}

/* leakyrelu's optional slope. */
static clt_status parse_alpha(const struct clt__spec_args *a, clt_layer_spec *l)
{
    double d = 0.0;
    l->alpha = LEAKYRELU_DEFAULT_ALPHA;
    if (a->n < 1) return CLT_OK;
    if (!clt__spec_arg_number(a, 0, &d))
        return clt__spec_args_fail(a, 0, "leakyrelu slope must be a number, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    /* checked after rounding to float: 1e39 would become inf */
    if (!isfinite((float)d))
        return clt__spec_args_fail(a, 0, "leakyrelu slope must be finite, got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    if (a->n >= 2)
        return clt__spec_args_fail(a, 1,
                                   "unexpected \"%.*s\" after the slope; expected the end of the "
                                   "layer",
                                   CLT__SPEC_ARG(a, 1));
    l->alpha = (float)d + 0.0f; /* "-0" reads as 0 */
    return CLT_OK;
}

static void format_alpha(const clt_layer_spec *l, char *buf, size_t size)
{
    char a[32];
    clt__spec_format_real(l->alpha, a, sizeof a);
    snprintf(buf, size, " %s", a);
}

static clt_status check_alpha(const clt_layer_spec *l, int layer)
{
    if (!isfinite(l->alpha))
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: leakyrelu slope must be finite, got %g", layer,
                         (double)l->alpha);
    return CLT_OK;
}

/* One activation kind: its spec word `stem`, its clt_layer_kind and clt_act suffixes, its
 * grammar, and how its arguments parse, print and check. */
#define CLT__ACTIVATION_KIND(stem, KIND, ACT, use, help_text, parse_fn, format_fn, check_fn)      \
    const struct clt__layer_kind clt__layer_##stem = {                                             \
        .kind = CLT_LAYER_##KIND,                                                                  \
        .name = #stem,                                                                             \
        .usage = use,                                                                              \
        .help = help_text,                                                                         \
        .activation = true,                                                                        \
        .act = CLT_ACT_##ACT,                                                                      \
        .parse = parse_fn,                                                                         \
        .format = format_fn,                                                                       \
        .check = check_fn,                                                                         \
        .out_shape = clt__layer_same_shape,                                                        \
        .params = clt__layer_no_params,                                                            \
        .kept = clt__layer_keeps_output,                                                           \
        .forward = forward,                                                                        \
        .backward = backward,                                                                      \
        .decode = decode,                                                                          \
    }
#define CLT__ACTIVATION(stem, KIND, help_text)                                                    \
    CLT__ACTIVATION_KIND(stem, KIND, KIND, #stem, help_text, clt__layer_parse_none,               \
                         clt__layer_format_none, clt__layer_check_none)

CLT__ACTIVATION(relu, RELU, "max(0, x), as nn.ReLU");
CLT__ACTIVATION(gelu, GELU, "x * Phi(x) in its tanh approximation, as nn.GELU(approximate='tanh')");
CLT__ACTIVATION(tanh, TANH, "tanh(x), as nn.Tanh");
CLT__ACTIVATION(sigmoid, SIGMOID, "1 / (1 + exp(-x)), as nn.Sigmoid");
CLT__ACTIVATION(silu, SILU, "x * sigmoid(x), as nn.SiLU");
CLT__ACTIVATION_KIND(leakyrelu, LEAKYRELU, LEAKYRELU, "leakyrelu [A]",
                     "x > 0 ? x : A * x, as nn.LeakyReLU(A); the slope A defaults to 0.01",
                     parse_alpha, format_alpha, check_alpha);
