/* The batch-normalisation layer, "batchnorm": nn.BatchNorm2d(C) on a (C, H, W) input (per
 * channel over B, H, W), nn.BatchNorm1d(F) on a flat (F) input (per feature over B); eps 1e-5,
 * momentum 0.1, affine. Parameters "{i}.weight" (C, ones) and "{i}.bias" (C, zeros) whatever the
 * init scheme; buffers "{i}.running_mean" (C, zeros), "{i}.running_var" (C, ones) and
 * "{i}.num_batches_tracked" (a host int64 counter), as PyTorch's state_dict, plus unnamed
 * scratch (4 C: the training forward's mean and 1/std, backward's sums).
 *
 * A training forward (clt_model_forward with train) normalises with the batch's mean and biased
 * variance, updates the running statistics (running_var from the unbiased variance) and counts
 * itself in num_batches_tracked; an evaluation forward normalises with the running statistics.
 * Backward is the gradient through the batch statistics of the last (training) forward. With
 * gradient accumulation each micro-batch is one training forward: it is normalised with its
 * own statistics and updates the running statistics once, as PyTorch does with the same
 * micro-batches (not as one forward over the whole effective batch).
 *
 * Followed by relu, it absorbs it (L->next, set by the model) and runs the relu too:
 * y = max(bn(x), 0), and backward masks dy where the recomputed bn(x) is not positive; the
 * relu layer is then an identity (src/nn/layers/activation.c). Two fewer passes over the
 * tensor each way.
 *
 * Mixed precision: x, y and the gradients are stored as the neighbouring layers' (16-bit
 * between the first and last weighted layers); the kernels read the f32 master weight and bias
 * (not the 16-bit copy: as under PyTorch's autocast, batch norm runs in f32). */
#include "nn/layer_internal.h"

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

enum { RUNNING_MEAN, RUNNING_VAR, NUM_BATCHES, STATS };

static clt_status out_shape(const clt_layer_spec *l, int layer, const char *text,
                            const struct clt__shape *in, struct clt__shape *out)
{
    (void)l;
    if (in->ndim != 1 && in->ndim != 3) {
        char got[64];
        clt__shape_format(in, got, sizeof got);
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) needs a (C,H,W) input (BatchNorm2d) or flat "
                         "features (BatchNorm1d), got %s",
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
    size_t C = in->d[0];
    decl[0] = (struct clt__param_decl){"weight", 1, {C}, true, 1, 1, false, 0, false, false};
    decl[1] = (struct clt__param_decl){"bias", 1, {C}, false, 1, 1, false, 0, false, false};
    return 2;
}

/* weight 1, bias 0, as nn.BatchNorm's reset_parameters */
static void init(const clt_layer_spec *l, int j, float *dst, size_t n)
{
    (void)l;
    for (size_t i = 0; i < n; i++) dst[i] = j == 0 ? 1.0f : 0.0f;
}

static int buffers(const clt_layer_spec *l, const struct clt__shape *in,
                   const struct clt__shape *out, struct clt__buffer_decl *decl)
{
    (void)l;
    (void)out;
    size_t C = in->d[0];
    decl[RUNNING_MEAN] = (struct clt__buffer_decl){"running_mean", false, C, 0.0f, true};
    decl[RUNNING_VAR] = (struct clt__buffer_decl){"running_var", false, C, 1.0f, true};
    decl[NUM_BATCHES] = (struct clt__buffer_decl){"num_batches_tracked", true, 1, 0.0f, true};
    decl[STATS] = (struct clt__buffer_decl){"stats", false, 4 * C, 0.0f, false};
    return 4;
}

/* The batch statistics need two values per channel: two samples of flat features, one of an
 * image larger than 1x1 (as PyTorch's "expected more than 1 value per channel"). */
static size_t min_batch(const clt_layer_spec *l, const struct clt__shape *in)
{
    (void)l;
    return in->ndim == 3 && in->d[1] * in->d[2] > 1 ? 1 : 2;
}

static struct clt_bn_geom geom_of(const struct clt__layer *L)
{
    size_t S = L->in.ndim == 3 ? L->in.d[1] * L->in.d[2] : 1;
    return (struct clt_bn_geom){L->in.d[0], S, BN_EPS, BN_MOMENTUM, L->next != NULL};
}

static clt_status forward(struct clt__layer *L, const clt_tensor *x, const struct clt__pass *p)
{
    clt_status st = CLT_OK;
    struct clt_bn_geom g = geom_of(L);
    if (p->train) {
        CLT_TRY(clt_op_batchnorm_forward_train(L->y, x, L->w[0], L->w[1], L->buf[STATS],
                                               L->buf[RUNNING_MEAN], L->buf[RUNNING_VAR], &g));
        (*L->counter[NUM_BATCHES])++;
    } else {
        CLT_TRY(clt_op_batchnorm_forward_eval(L->y, x, L->w[0], L->w[1], L->buf[RUNNING_MEAN],
                                              L->buf[RUNNING_VAR], &g));
    }
    L->ran = p->train;
    L->out_t = L->y;
fail:
    return st;
}

static clt_status backward(struct clt__layer *L, clt_tensor *dx, const clt_tensor *dy,
                           bool need_dx, const struct clt__pass *p, bool *through)
{
    clt_status st = CLT_OK;
    struct clt_bn_geom g = geom_of(L);
    *through = false;
    if (!L->ran)
        return clt__fail(clt_tensor_ctx(dy), CLT_ERR_INVALID_ARG,
                         "model backward: layer %d (batchnorm) needs a training forward before "
                         "backward (the last forward used the running statistics)",
                         L->index + 1);
    CLT_TRY(clt_op_batchnorm_backward(need_dx ? dx : NULL, L->dw[0], L->dw[1], dy, L->x, L->w[0],
                                      L->w[1], L->buf[STATS], &g, p->beta));
fail:
    return st;
}

/* The relu after it, on its own output's storage (the kernels store max(y, 0) in it). */
static enum clt__absorb absorbs(const struct clt__layer *L, const struct clt__layer *next)
{
    return next->kind->kind == CLT_LAYER_RELU && next->ydt == L->ydt ? CLT__ABSORB_BOTH
                                                                       : CLT__ABSORB_NONE;
}

const struct clt__layer_kind clt__layer_batchnorm = {
    .kind = CLT_LAYER_BATCHNORM,
    .name = "batchnorm",
    .usage = "batchnorm",
    .help = "batch normalisation per channel of (C, H, W) as nn.BatchNorm2d, per feature of a "
            "flat input as nn.BatchNorm1d: eps 1e-5, momentum 0.1, affine, running statistics",
    .parse = clt__layer_parse_none,
    .format = clt__layer_format_none,
    .check = clt__layer_check_none,
    .out_shape = out_shape,
    .params = params,
    .init = init,
    .buffers = buffers,
    .min_batch = min_batch,
    .kept = clt__layer_keeps_output,
    .forward = forward,
    .backward = backward,
    .absorbs = absorbs,
};
