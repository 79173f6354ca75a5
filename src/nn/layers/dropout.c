/* The dropout layer, "dropout P": in training, zeroes each element with probability P and
 * scales the others by 1 / (1 - P), the mask drawn from Philox stream (DROPOUT, step * layers +
 * rng_index; layer_internal.h) in forward and drawn again in backward; the identity in evaluation
 * and for P = 0. */
#include "nn/layer_internal.h"

#include "runtime/rng_internal.h"

#include <stdio.h>

static clt_status parse(const struct clt__spec_args *a, clt_layer_spec *l)
{
    double d = 0.0;
    if (a->n < 1)
        return clt__spec_args_fail(a, -1, "dropout needs a probability, e.g. \"dropout 0.1\"");
    if (!clt__spec_arg_number(a, 0, &d))
        return clt__spec_args_fail(a, 0,
                                   "dropout probability must be a number in [0, 1), got \"%.*s\"",
                                   CLT__SPEC_ARG(a, 0));
    /* Checked after rounding to float: 0.999999999 would become 1. */
    if (!(d >= 0.0 && (float)d < 1.0f))
        return clt__spec_args_fail(a, 0, "dropout probability must be in [0, 1), got %.*s",
                                   a->len[0], a->word[0]);
    if (a->n >= 2)
        return clt__spec_args_fail(a, 1,
                                   "unexpected \"%.*s\" after the probability; expected the end "
                                   "of the layer",
                                   CLT__SPEC_ARG(a, 1));
    l->p = (float)d + 0.0f; /* "-0" reads as 0 */
    return CLT_OK;
}

static void format(const clt_layer_spec *l, char *buf, size_t size)
{
    char p[32];
    clt__spec_format_real(l->p, p, sizeof p);
    snprintf(buf, size, " %s", p);
}

static clt_status check(const clt_layer_spec *l, int layer)
{
    if (!(l->p >= 0.0f && l->p < 1.0f))
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: dropout probability must be in [0, 1), got %g",
                         layer, (double)l->p);
    return CLT_OK;
}

static uint64_t stream(const struct clt__layer *L, const struct clt__pass *p)
{
    return clt_rng_stream(CLT_RNG_DROPOUT, p->step * (uint64_t)p->nlayers + (uint64_t)L->rng_index);
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    if (p->train && L->spec.p > 0) {
        CLT_TRY(clt_op_dropout_forward(L->y, x, L->spec.p, p->seed, stream(L, p)));
        L->ran = true;
        L->out_t = L->y;
    } else {
        L->out_t = x;
    }
fail:
    return st;
}

/* Generation evaluates: the identity. */
static clt_status decode(struct clt__layer *L, const clt_tensor *x, size_t pos)
{
    (void)pos;
    L->out_t = x;
    return CLT_OK;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    (void)need_dx;
    *through = !L->ran; /* not applied: dy passes through */
    if (*through) return CLT_OK;
    return clt_op_dropout_backward(dx, dy, L->spec.p, p->seed, stream(L, p));
}

const struct clt__layer_kind clt__layer_dropout = {
    .kind = CLT_LAYER_DROPOUT,
    .name = "dropout",
    .usage = "dropout P",
    .help = "in training, zeroes each element with probability P (0 <= P < 1) and scales the "
            "others by 1/(1-P), as nn.Dropout; the identity in evaluation",
    .parse = parse,
    .format = format,
    .check = check,
    .out_shape = clt__layer_same_shape,
    .params = clt__layer_no_params,
    .kept = clt__layer_keeps_output,
    .forward = forward,
    .backward = backward,
    .decode = decode,
};
