/* The model: layers from a spec over one flat parameter tensor and one flat gradient tensor,
 * activations kept on the device for backward, PyTorch-compatible initialisation from the
 * counter-based RNG, and forward/backward passes built from the ops. In mixed precision (f16,
 * bf16) the layers read a flat 16-bit copy of the parameters and keep 16-bit activations and
 * inter-layer gradients between the first and the last linear layer (see model.h). */
#include "cltrain/model.h"

#include "runtime/internal.h"

#include "cltrain/ops.h"
#include "cltrain/rng.h"

#include <math.h>
#include <string.h>
#include <strings.h>

struct layer {
    clt_layer_spec spec;
    size_t in, out;           /* features in and out */
    int param;                /* index of its weight in params[] (linear), else -1 */
    clt_tensor *w, *b, *dw, *db; /* views of the flat tensors (linear) */
    clt_tensor *w16, *b16;    /* views of the 16-bit copy (linear, mixed precision) */
    clt_dtype ydt;            /* storage of y */
    clt_tensor *y_full;       /* (max_batch, out) output, NULL for identity layers */
    clt_tensor *y;            /* view (B, out) of y_full for the current batch */
    const clt_tensor *x;      /* input of the last forward (B, in) */
    const clt_tensor *out_t;  /* output of the last forward (B, out): y or x */
    bool dropped;             /* dropout applied in the last forward */
};

struct clt_model {
    clt_ctx *ctx;
    clt_spec spec;
    size_t in_features, outputs, max_batch, batch;
    struct clt_model_params params_cfg;
    int nlayers;
    struct layer *layers;
    clt_tensor *params, *grads;   /* flat (P) */
    int nparams;
    struct clt_param_info *info;  /* (nparams) */
    clt_tensor *g_full[2], *g[2]; /* ping-pong gradient buffers (max_batch, widest) and views */
    clt_tensor *params16;         /* flat (P) 16-bit copy (mixed precision), else NULL */
    clt_tensor *gt_full[2];       /* mixed precision: f32 (max_batch, outputs) gradient buffers
                                     for the layers after the last linear one, else NULL */
    const clt_tensor *g_of[2];    /* the buffer g[k] views */
    uint64_t step;                /* of the last forward, for dropout's masks */
};

struct clt_model_params clt_model_default_params(void)
{
    struct clt_model_params p = {
        .init = CLT_INIT_DEFAULT, .seed = 0, .max_batch = 128, .precision = CLT_DTYPE_F32};
    return p;
}

clt_status clt_init_parse(const char *s, clt_init *out)
{
    if (strcasecmp(s, "default") == 0 || strcasecmp(s, "pytorch") == 0) *out = CLT_INIT_DEFAULT;
    else if (strcasecmp(s, "kaiming") == 0) *out = CLT_INIT_KAIMING;
    else if (strcasecmp(s, "xavier") == 0) *out = CLT_INIT_XAVIER;
    else
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "--init-scheme \"%s\": expected default, kaiming or xavier", s);
    return CLT_OK;
}

clt_ctx *clt_model_ctx(const clt_model *m) { return m->ctx; }
const clt_spec *clt_model_spec(const clt_model *m) { return &m->spec; }
size_t clt_model_in_features(const clt_model *m) { return m->in_features; }
size_t clt_model_outputs(const clt_model *m) { return m->outputs; }
size_t clt_model_max_batch(const clt_model *m) { return m->max_batch; }
clt_tensor *clt_model_params(const clt_model *m) { return m->params; }
clt_tensor *clt_model_grads(const clt_model *m) { return m->grads; }
clt_dtype clt_model_precision(const clt_model *m) { return m->params_cfg.precision; }
clt_tensor *clt_model_weights(const clt_model *m) { return m->params16 ? m->params16 : m->params; }
int clt_model_param_count(const clt_model *m) { return m->nparams; }

const struct clt_param_info *clt_model_param_info(const clt_model *m, int i)
{
    return i >= 0 && i < m->nparams ? &m->info[i] : NULL;
}

static bool is_identity(clt_layer_kind k)
{
    return k == CLT_LAYER_FLATTEN;
}

static bool is_identity_kind(clt_layer_kind k)
{
    return is_identity(k);
}

static void add_param(clt_model *m, int layer, const char *what, size_t d0, size_t d1,
                      size_t *offset)
{
    struct clt_param_info *pi = &m->info[m->nparams++];
    snprintf(pi->name, sizeof pi->name, "%d.%s", layer, what);
    pi->ndim = d1 ? 2 : 1;
    pi->dims[0] = d0;
    pi->dims[1] = d1;
    pi->numel = d1 ? d0 * d1 : d0;
    pi->offset = *offset;
    *offset += pi->numel;
}

/* PyTorch's nn.Linear reset_parameters (kaiming_uniform_ with a = sqrt(5) gives the bound
 * 1/sqrt(IN)), or the Kaiming/Xavier uniform schemes, drawn from Philox stream (INIT, param
 * index) so that every device starts from the same weights. */
static void init_params(const clt_model *m, float *host)
{
    for (int i = 0; i < m->nparams; i++) {
        const struct clt_param_info *pi = &m->info[i];
        bool weight = pi->ndim == 2;
        /* a bias belongs to the weight before it: fan-in of that weight */
        size_t fan_in = weight ? pi->dims[1] : m->info[i - 1].dims[1];
        size_t fan_out = weight ? pi->dims[0] : m->info[i - 1].dims[0];
        double bound = 1.0 / sqrt((double)fan_in);
        if (m->params_cfg.init == CLT_INIT_KAIMING) bound = weight ? sqrt(6.0 / fan_in) : 0;
        if (m->params_cfg.init == CLT_INIT_XAVIER)
            bound = weight ? sqrt(6.0 / (double)(fan_in + fan_out)) : 0;
        float *dst = host + pi->offset;
        if (bound == 0) memset(dst, 0, pi->numel * sizeof *dst);
        else
            clt_rng_fill_uniform(m->params_cfg.seed, clt_rng_stream(CLT_RNG_INIT, (uint64_t)i), 0,
                                 dst, pi->numel, (float)-bound, (float)bound);
    }
}

/* The first and last linear layers (-1 when there is none). */
static void linear_range(const clt_spec *spec, int *first, int *last)
{
    *first = *last = -1;
    for (int i = 0; i < spec->n; i++)
        if (spec->layers[i].kind == CLT_LAYER_LINEAR) {
            if (*first < 0) *first = i;
            *last = i;
        }
}

/* Storage of layer i's output: 16-bit from the first linear layer up to the last one. */
static clt_dtype out_dtype(clt_dtype precision, int first, int last, int i)
{
    return precision != CLT_DTYPE_F32 && i >= first && i < last ? precision : CLT_DTYPE_F32;
}

static bool is_identity_kind(clt_layer_kind k);

/* Whether the f32 tail gradient buffers are needed: mixed precision with a layer that has a
 * backward after the last linear one. */
static bool needs_tail(const clt_spec *spec, clt_dtype precision, int last)
{
    if (precision == CLT_DTYPE_F32) return false;
    for (int i = last + 1; i < spec->n; i++)
        if (!is_identity_kind(spec->layers[i].kind)) return true;
    return false;
}

static void est_add(uint64_t *by_category, clt_mem_category c, uint64_t bytes)
{
    by_category[c] += bytes ? bytes : 4; /* as the allocator: no empty buffers */
}

clt_status clt_model_mem_estimate(const clt_spec *spec, size_t in_features, size_t outputs,
                                  const struct clt_model_params *params, uint64_t *by_category)
{
    clt_status st = clt_spec_validate(spec, (int)in_features, (int)outputs);
    if (st != CLT_OK) return st;
    struct clt_model_params p = params ? *params : clt_model_default_params();
    uint64_t B = p.max_batch, P = 0;
    int first, last;
    linear_range(spec, &first, &last);
    size_t width = in_features, widest = in_features;
    for (int i = 0; i < spec->n; i++) {
        const clt_layer_spec *L = &spec->layers[i];
        size_t w = L->kind == CLT_LAYER_LINEAR ? (size_t)L->out : width;
        if (L->kind == CLT_LAYER_LINEAR) P += (uint64_t)w * width + (L->bias ? w : 0);
        if (!is_identity_kind(L->kind))
            est_add(by_category, CLT_MEM_ACTIVATIONS,
                    B * w * clt_dtype_size(out_dtype(p.precision, first, last, i)));
        width = w;
        if (width > widest) widest = width;
    }
    est_add(by_category, CLT_MEM_PARAMS, P * 4);
    est_add(by_category, CLT_MEM_GRADS, P * 4);
    if (p.precision != CLT_DTYPE_F32) est_add(by_category, CLT_MEM_PARAMS, P * 2);
    for (int k = 0; k < 2; k++)
        est_add(by_category, CLT_MEM_ACTIVATIONS, B * widest * clt_dtype_size(p.precision));
    if (needs_tail(spec, p.precision, last))
        for (int k = 0; k < 2; k++) est_add(by_category, CLT_MEM_ACTIVATIONS, B * outputs * 4);
    return CLT_OK;
}

static clt_status make_views(clt_model *m, size_t B)
{
    clt_status st = CLT_OK;
    for (int i = 0; i < m->nlayers; i++) {
        struct layer *L = &m->layers[i];
        if (!L->y_full) continue;
        clt_tensor_free(L->y);
        L->y = NULL;
        size_t dims[2] = {B, L->out};
        CLT_TRY(clt_tensor_view(&L->y, L->y_full, 0, 2, dims));
    }
    for (int k = 0; k < 2; k++) {
        clt_tensor_free(m->g[k]);
        m->g[k] = NULL;
        m->g_of[k] = NULL;
    }
    m->batch = B;
fail:
    return st;
}

clt_status clt_model_create(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                            size_t in_features, size_t outputs,
                            const struct clt_model_params *params)
{
    clt_status st = CLT_OK;
    clt_model *m = NULL;
    float *host = NULL;
    *out = NULL;
    /* the spec module records for the thread only; callers read the ctx's message */
    if (clt_spec_validate(spec, (int)in_features, (int)outputs) != CLT_OK)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s", clt_last_errmsg());
    CLT_ALLOC(ctx, m, 1);
    m->ctx = ctx;
    m->params_cfg = params ? *params : clt_model_default_params();
    if (m->params_cfg.max_batch == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "the model's batch size must be at least 1");
    clt_dtype prec = m->params_cfg.precision;
    if (prec != CLT_DTYPE_F32 && prec != CLT_DTYPE_F16 && prec != CLT_DTYPE_BF16)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "model precision must be f32, f16 or bf16, got %s",
                 clt_dtype_name(prec));
    int first_lin, last_lin;
    linear_range(spec, &first_lin, &last_lin);
    m->in_features = in_features;
    m->outputs = outputs;
    m->max_batch = m->params_cfg.max_batch;
    m->nlayers = spec->n;
    CLT_ALLOC(ctx, m->spec.layers, spec->n);
    memcpy(m->spec.layers, spec->layers, (size_t)spec->n * sizeof *spec->layers);
    m->spec.n = spec->n;
    CLT_ALLOC(ctx, m->layers, spec->n);
    CLT_ALLOC(ctx, m->info, 2 * spec->n);

    /* shapes and parameter offsets */
    size_t width = in_features, widest = in_features, total = 0;
    for (int i = 0; i < spec->n; i++) {
        struct layer *L = &m->layers[i];
        L->spec = spec->layers[i];
        L->in = width;
        L->out = L->spec.kind == CLT_LAYER_LINEAR ? (size_t)L->spec.out : width;
        L->param = -1;
        if (L->spec.kind == CLT_LAYER_LINEAR) {
            L->param = m->nparams;
            add_param(m, i, "weight", L->out, L->in, &total);
            if (L->spec.bias) add_param(m, i, "bias", L->out, 0, &total);
        }
        width = L->out;
        if (width > widest) widest = width;
    }

    /* flat parameters (initialised on the host, uploaded) and gradients */
    size_t pdim = total;
    CLT_TRY(clt_tensor_create(&m->params, ctx, CLT_DTYPE_F32, 1, &pdim, CLT_MEM_PARAMS));
    CLT_TRY(clt_tensor_zeros(&m->grads, ctx, CLT_DTYPE_F32, 1, &pdim, CLT_MEM_GRADS));
    if (prec != CLT_DTYPE_F32)
        CLT_TRY(clt_tensor_create(&m->params16, ctx, prec, 1, &pdim, CLT_MEM_PARAMS));
    CLT_ALLOC(ctx, host, total);
    init_params(m, host);
    CLT_TRY(clt_model_write_params(m, host)); /* and the 16-bit copy */

    for (int i = 0; i < m->nlayers; i++) {
        struct layer *L = &m->layers[i];
        if (L->param >= 0) {
            const struct clt_param_info *w = &m->info[L->param];
            CLT_TRY(clt_tensor_view(&L->w, m->params, w->offset, 2, w->dims));
            CLT_TRY(clt_tensor_view(&L->dw, m->grads, w->offset, 2, w->dims));
            if (m->params16) CLT_TRY(clt_tensor_view(&L->w16, m->params16, w->offset, 2, w->dims));
            if (L->spec.bias) {
                const struct clt_param_info *b = &m->info[L->param + 1];
                CLT_TRY(clt_tensor_view(&L->b, m->params, b->offset, 1, b->dims));
                CLT_TRY(clt_tensor_view(&L->db, m->grads, b->offset, 1, b->dims));
                if (m->params16)
                    CLT_TRY(clt_tensor_view(&L->b16, m->params16, b->offset, 1, b->dims));
            }
        }
        L->ydt = out_dtype(prec, first_lin, last_lin, i);
        if (!is_identity(L->spec.kind)) {
            size_t dims[2] = {m->max_batch, L->out};
            CLT_TRY(clt_tensor_create(&L->y_full, ctx, L->ydt, 2, dims, CLT_MEM_ACTIVATIONS));
        }
    }
    size_t gdims[2] = {m->max_batch, widest};
    for (int k = 0; k < 2; k++)
        CLT_TRY(clt_tensor_create(&m->g_full[k], ctx, prec, 2, gdims, CLT_MEM_ACTIVATIONS));
    if (needs_tail(spec, prec, last_lin)) {
        size_t tdims[2] = {m->max_batch, outputs};
        for (int k = 0; k < 2; k++)
            CLT_TRY(clt_tensor_create(&m->gt_full[k], ctx, CLT_DTYPE_F32, 2, tdims,
                                      CLT_MEM_ACTIVATIONS));
    }
    CLT_TRY(make_views(m, m->max_batch));
    *out = m;
    m = NULL;
fail:
    free(host);
    clt_model_free(m);
    return st;
}

void clt_model_free(clt_model *m)
{
    if (!m) return;
    for (int i = 0; m->layers && i < m->nlayers; i++) {
        struct layer *L = &m->layers[i];
        clt_tensor_free(L->w);
        clt_tensor_free(L->b);
        clt_tensor_free(L->dw);
        clt_tensor_free(L->db);
        clt_tensor_free(L->w16);
        clt_tensor_free(L->b16);
        clt_tensor_free(L->y);
        clt_tensor_free(L->y_full);
    }
    for (int k = 0; k < 2; k++) {
        clt_tensor_free(m->g[k]);
        clt_tensor_free(m->g_full[k]);
        clt_tensor_free(m->gt_full[k]);
    }
    clt_tensor_free(m->params16);
    clt_tensor_free(m->params);
    clt_tensor_free(m->grads);
    free(m->layers);
    free(m->info);
    free(m->spec.layers);
    free(m);
}

static clt_act act_of(clt_layer_kind k)
{
    switch (k) {
    case CLT_LAYER_GELU: return CLT_ACT_GELU;
    case CLT_LAYER_TANH: return CLT_ACT_TANH;
    case CLT_LAYER_SIGMOID: return CLT_ACT_SIGMOID;
    default: return CLT_ACT_RELU;
    }
}

clt_status clt_model_forward(clt_model *m, const clt_tensor *x, bool train, uint64_t step,
                             clt_tensor **out)
{
    clt_status st = CLT_OK;
    size_t B = clt_tensor_dim(x, 0);
    CLT_TRY(clt_tensor_same_ctx(m->params, x));
    if (clt_tensor_dtype(x) != CLT_DTYPE_F32 || clt_tensor_numel(x) != B * m->in_features ||
        B == 0 || B > m->max_batch)
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE,
                 "model input must be f32 (B, %zu) with 1 <= B <= %zu, got %s with %zu elements",
                 m->in_features, m->max_batch, clt_dtype_name(clt_tensor_dtype(x)),
                 clt_tensor_numel(x));
    if (B != m->batch) CLT_TRY(make_views(m, B));
    m->step = step;
    const clt_tensor *h = x;
    for (int i = 0; i < m->nlayers; i++) {
        struct layer *L = &m->layers[i];
        L->x = h;
        L->dropped = false;
        switch (L->spec.kind) {
        case CLT_LAYER_LINEAR:
            CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_TRANS, B, L->out, L->in, 1.0f, h,
                                L->w16 ? L->w16 : L->w, 0.0f, L->y));
            if (L->b) CLT_TRY(clt_op_bias_add(L->y, L->b16 ? L->b16 : L->b));
            L->out_t = L->y;
            break;
        case CLT_LAYER_RELU:
        case CLT_LAYER_GELU:
        case CLT_LAYER_TANH:
        case CLT_LAYER_SIGMOID:
            CLT_TRY(clt_op_act_forward(act_of(L->spec.kind), L->y, h));
            L->out_t = L->y;
            break;
        case CLT_LAYER_DROPOUT:
            if (train && L->spec.p > 0) {
                CLT_TRY(clt_op_dropout_forward(L->y, h, L->spec.p, m->params_cfg.seed,
                                               clt_rng_stream(CLT_RNG_DROPOUT,
                                                              step * (uint64_t)m->nlayers +
                                                                  (uint64_t)i)));
                L->dropped = true;
                L->out_t = L->y;
            } else {
                L->out_t = h;
            }
            break;
        default: /* flatten: inputs are already (B, features) */
            L->out_t = h;
            break;
        }
        h = L->out_t;
    }
    *out = (clt_tensor *)h;
fail:
    return st;
}

clt_status clt_model_backward(clt_model *m, const clt_tensor *dout, bool accumulate)
{
    clt_status st = CLT_OK;
    size_t B = m->batch;
    CLT_TRY(clt_tensor_same_ctx(m->params, dout));
    if (clt_tensor_numel(dout) != B * m->outputs)
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE, "model backward: gradient has %zu elements, expected "
                                        "(%zu, %zu)", clt_tensor_numel(dout), B, m->outputs);
    float beta = accumulate ? 1.0f : 0.0f;
    int cur = 0;
    const clt_tensor *dy = dout;
    /* the first layer that needs an input gradient: nothing before it has parameters */
    int first = 0;
    while (first < m->nlayers && m->layers[first].param < 0) first++;
    for (int i = m->nlayers - 1; i >= first; i--) {
        struct layer *L = &m->layers[i];
        /* dx goes into the ping-pong buffer that does not hold dy; in mixed precision, into an
         * f32 one when the layer before keeps an f32 output (after the last linear layer) */
        const clt_tensor *full = m->g_full[cur];
        if (i > first && m->gt_full[cur] && m->layers[i - 1].ydt == CLT_DTYPE_F32 &&
            m->params_cfg.precision != CLT_DTYPE_F32)
            full = m->gt_full[cur];
        if (!m->g[cur] || m->g_of[cur] != full || clt_tensor_dim(m->g[cur], 1) != L->in) {
            clt_tensor_free(m->g[cur]);
            m->g[cur] = NULL;
            size_t dims[2] = {B, L->in};
            CLT_TRY(clt_tensor_view(&m->g[cur], full, 0, 2, dims));
            m->g_of[cur] = full;
        }
        clt_tensor *dx = m->g[cur];
        bool need_dx = i > first;
        switch (L->spec.kind) {
        case CLT_LAYER_LINEAR:
            CLT_TRY(clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, L->out, L->in, B, 1.0f, dy, L->x, beta,
                                L->dw));
            if (L->db) CLT_TRY(clt_op_bias_grad(L->db, dy, beta));
            if (need_dx)
                CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, B, L->in, L->out, 1.0f, dy,
                                    L->w16 ? L->w16 : L->w, 0.0f, dx));
            break;
        case CLT_LAYER_RELU:
        case CLT_LAYER_GELU:
        case CLT_LAYER_TANH:
        case CLT_LAYER_SIGMOID:
            CLT_TRY(clt_op_act_backward(act_of(L->spec.kind), dx, dy, L->x, L->y));
            break;
        case CLT_LAYER_DROPOUT:
            if (!L->dropped) continue; /* identity: dy passes through */
            CLT_TRY(clt_op_dropout_backward(dx, dy, L->spec.p, m->params_cfg.seed,
                                            clt_rng_stream(CLT_RNG_DROPOUT,
                                                           m->step * (uint64_t)m->nlayers +
                                                               (uint64_t)i)));
            break;
        default:
            continue; /* flatten */
        }
        dy = dx;
        cur ^= 1;
    }
fail:
    return st;
}

clt_status clt_model_read_params(clt_model *m, float *dst, clt_wait_reason why)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    CLT_TRY(clt_tensor_read(m->params, dst, false, &ev));
    CLT_TRY(clt_ctx_wait(m->ctx, why, 1, &ev));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}

clt_status clt_model_sync_weights(clt_model *m)
{
    return m->params16 ? clt_op_cast(m->params16, m->params) : CLT_OK;
}

clt_status clt_model_write_params(clt_model *m, const float *src)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    CLT_TRY(clt_tensor_write(m->params, src, false, &ev));
    CLT_TRY(clt_ctx_wait(m->ctx, CLT_WAIT_SETUP, 1, &ev));
    CLT_TRY(clt_model_sync_weights(m));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}
