/* The model: layers from a spec over one flat parameter tensor and one flat gradient tensor,
 * activations kept on the device for backward, PyTorch-compatible initialisation from the
 * counter-based RNG, and forward/backward passes that call each layer's kind in the layer table
 * (src/nn/layer_internal.h); the plan (shapes, parameters, storage) is shared with the memory
 * estimate, so the two cannot disagree. In mixed precision (f16,
 * bf16) the layers read a flat 16-bit copy of the parameters and keep 16-bit activations and
 * inter-layer gradients from the first layer with weights (a language model: from its token
 * embedding) up to the last linear layer (see model.h). */
#include "cltrain/model.h"

#include "nn/layer_internal.h"
#include "nn/model_internal.h"
#include "runtime/internal.h"
#include "runtime/rng_internal.h"

#include "ops/ops_internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>

struct clt_model {
    clt_ctx *ctx;
    clt_spec spec;
    struct clt__shape in;         /* per-sample input shape */
    struct clt__shape out;        /* per-sample output shape: (outputs), or (T, outputs) */
    size_t in_features, outputs, max_batch, batch;
    size_t out_numel;             /* elements of out */
    struct clt_model_params params_cfg;
    struct clt__plan plan;        /* shapes, parameters, storage */
    int nlayers;
    struct clt__layer *layers;
    clt_tensor *params, *grads;   /* flat (P) */
    int nparams;
    struct clt_param_info *info;  /* (nparams) */
    clt_tensor *g_full[2], *g[2]; /* ping-pong gradient buffers (max_batch, widest) and views */
    clt_tensor *params16;         /* flat (P) 16-bit copy (mixed precision), else NULL */
    clt_tensor *ws; /* max_batch * plan.workspace + plan.workspace_fixed elements in the
                       precision, or NULL */
    const struct clt__layer *ws_owner; /* see struct clt__layer */
    clt_tensor *gb_full[2];       /* blocks: (max_batch, plan.block_widest) gradient buffers for
                                     their children's backward, or NULL */
    clt_tensor *gt_full[2];       /* mixed precision: f32 (max_batch, out_numel) gradient
                                     buffers for the layers after the last linear one, else
                                     NULL */
    const clt_tensor *g_of[2];    /* the buffer g[k] views */
    uint64_t step;                /* of the last forward, for dropout's masks */
    clt_tensor *buffers;          /* flat (plan.buffer_total) f32 buffers, or NULL */
    int64_t *counters;            /* (plan.counters) host int64 buffers, or NULL */
    int nbuffers;                 /* named (persistent) buffers */
    struct clt_buffer_info *binfo; /* (nbuffers) */
    bool decodes;                 /* clt_model_decode takes it (decode_plan) */
    char no_decode[160];          /* else why not */
    size_t cached;                /* decode: positions 0 .. cached - 1 of sample 0 hold the
                                     sequence's rows (T after a batch-1 evaluation forward,
                                     pos + 1 after decoding pos; 0: none) */
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
    else if (strcasecmp(s, "gpt2") == 0) *out = CLT_INIT_GPT2;
    else
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "--init-scheme \"%s\": expected default, pytorch, kaiming, xavier or "
                         "gpt2", s);
    return CLT_OK;
}

clt_ctx *clt_model_ctx(const clt_model *m) { return m->ctx; }
const clt_spec *clt_model_spec(const clt_model *m) { return &m->spec; }
size_t clt_model_in_features(const clt_model *m) { return m->in_features; }

int clt_model_input_shape(const clt_model *m, size_t shape[3])
{
    for (int i = 0; i < 3; i++) shape[i] = i < m->in.ndim ? m->in.d[i] : 0;
    return m->in.ndim;
}
size_t clt_model_outputs(const clt_model *m) { return m->outputs; }

int clt_model_output_shape(const clt_model *m, size_t shape[3])
{
    for (int i = 0; i < 3; i++) shape[i] = i < m->out.ndim ? m->out.d[i] : 0;
    return m->out.ndim;
}
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

int clt_model_buffer_count(const clt_model *m) { return m->nbuffers; }
clt_tensor *clt_model_buffers(const clt_model *m) { return m->buffers; }

const struct clt_buffer_info *clt_model_buffer_info(const clt_model *m, int i)
{
    return i >= 0 && i < m->nbuffers ? &m->binfo[i] : NULL;
}

void clt_model_buffer_sizes(const clt_model *m, size_t *f32, size_t *i64)
{
    if (f32) *f32 = m->plan.buffer_total;
    if (i64) *i64 = m->plan.counters;
}

/* ---- the plan ----------------------------------------------------------------------------- */

void clt__plan_free(struct clt__plan *p)
{
    if (!p) return;
    free(p->layers);
    free(p->params);
    free(p->buffers);
    free(p->children);
    memset(p, 0, sizeof *p);
}

/* Storage of layer i's output: 16-bit from layer `first` (see first_16bit) up to the last
 * weighted one. */
static clt_dtype out_dtype(clt_dtype precision, int first, int last, int i)
{
    return precision != CLT_DTYPE_F32 && i >= first && i < last ? precision : CLT_DTYPE_F32;
}

/* The first layer whose output is 16-bit in mixed precision: the first weighted one, whose
 * GEMM casts the model's f32 input, or a first layer that reads token ids (embed), which
 * gathers rows of the 16-bit copy of its table into 16-bit storage directly: a language
 * model's positions, layer norms and blocks then all run in 16 bits, and there is no f32
 * input to cast. */
static int first_16bit(const clt_spec *spec, int first_weighted)
{
    return clt__layer_kind_of(spec->layers[0].kind)->tokens ? 0 : first_weighted;
}

/* Makes room for n more elements of *arr (count used, *cap allocated). */
static clt_status grow(void **arr, size_t elem, int used, int n, int *cap)
{
    if (used + n <= *cap) return CLT_OK;
    int ncap = *cap ? *cap : 8;
    while (ncap < used + n) ncap *= 2;
    void *a = realloc(*arr, (size_t)ncap * elem);
    if (!a) return clt__fail(NULL, CLT_ERR_HOST_MEMORY, "model plan: out of host memory");
    *arr = a;
    *cap = ncap;
    return CLT_OK;
}

struct plan_caps {
    int params, buffers, children;
};

/* The most elements any count of the plan may reach (a parameter tensor, all parameters
 * together, one sample of a layer's output, what a layer keeps or needs as workspace per
 * sample): 2^48, a petabyte in f32, beyond every device, and far enough from 2^64 that the
 * byte counts of a batch do not wrap either. A spec past it is refused with its layer named,
 * rather than planned with counts that wrapped. */
#define PLAN_MAX_ELEMENTS ((uint64_t)1 << 48)

/* a * b into *out; false when the product passes PLAN_MAX_ELEMENTS (or wraps on the way) */
static bool plan_mul(size_t a, size_t b, size_t *out)
{
    if (b != 0 && a > PLAN_MAX_ELEMENTS / b) return false;
    *out = a * b;
    return true;
}

/* The elements of one sample of shape s, within PLAN_MAX_ELEMENTS; false past it. */
static bool plan_numel(const struct clt__shape *s, size_t *out)
{
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++)
        if (!plan_mul(n, s->d[d], &n)) return false;
    *out = n;
    return true;
}

static clt_status too_large(int layer, const char *text, const char *what)
{
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s): %s would have more than 2^48 elements; no "
                     "device holds such a model",
                     layer, text, what);
}

/* The parameter a tied declaration shares: the token embedding matrix of the same dims planned
 * before it, into *index; a spec error naming the layer when there is none. */
static clt_status plan_tie(const struct clt__plan *p, const struct clt__param_decl *d, int layer,
                           const char *text, int *index)
{
    for (int i = 0; i < p->nparams; i++) {
        const struct clt__param_decl *e = &p->params[i].decl;
        if (e->embedding && e->ndim == d->ndim && e->dims[0] == d->dims[0] &&
            e->dims[1] == d->dims[1]) {
            *index = i;
            return CLT_OK;
        }
    }
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s) is tied to the token embedding's matrix, but no "
                     "embed layer before it has a (%zu, %zu) table; start the model with "
                     "\"embed %zu\"",
                     layer, text, d->dims[0], d->dims[1], d->dims[1]);
}

/* Plans one layer or child whose pl->kind, pl->spec and pl->in are set: its output shape,
 * parameters and buffers named "{name}.{suffix}", kept output and workspace. */
static clt_status plan_unit(struct clt__plan *p, struct plan_caps *caps, struct clt__plan_layer *pl,
                            int layer, const char *name)
{
    clt_status st = CLT_OK;
    const clt_layer_spec *l = &pl->spec;
    const struct clt__layer_kind *k = pl->kind;
    char text[128], args[96];
    k->format(l, args, sizeof args);
    snprintf(text, sizeof text, "%s%s", k->name, args);
    CLT_TRY(k->out_shape(l, layer, text, &pl->in, &pl->out));
    size_t out_numel = 0;
    if (!plan_numel(&pl->out, &out_numel)) CLT_TRY(too_large(layer, text, "its output"));
    struct clt__param_decl decl[CLT__LAYER_MAX_PARAMS];
    pl->nparams = k->params(l, &pl->in, &pl->out, decl);
    CLT_ASSERT(pl->nparams >= 0 && pl->nparams <= CLT__LAYER_MAX_PARAMS);
    pl->tied = -1;
    if (pl->nparams == 1 && decl[0].tie) {
        CLT_TRY(plan_tie(p, &decl[0], layer, text, &pl->tied));
        pl->nparams = 0;
    }
    CLT_TRY(grow((void **)&p->params, sizeof *p->params, p->nparams, pl->nparams, &caps->params));
    pl->param = pl->nparams ? p->nparams : -1;
    for (int j = 0; j < pl->nparams; j++) {
        struct clt__plan_param *pp = &p->params[p->nparams++];
        struct clt_param_info *pi = &pp->info;
        memset(pp, 0, sizeof *pp);
        pp->decl = decl[j];
        pp->default_bound = k->default_bound ? k->default_bound(l, j, &decl[j])
                                             : 1.0 / sqrt((double)decl[j].fan_in);
        snprintf(pi->name, sizeof pi->name, "%s.%s", name, decl[j].suffix);
        CLT_ASSERT(decl[j].ndim >= 1 && decl[j].ndim <= 4);
        pi->ndim = decl[j].ndim;
        pi->numel = 1;
        for (int d = 0; d < 4; d++) {
            pi->dims[d] = d < decl[j].ndim ? decl[j].dims[d] : 0;
            if (d < decl[j].ndim && !plan_mul(pi->numel, pi->dims[d], &pi->numel))
                CLT_TRY(too_large(layer, text, "a parameter tensor"));
        }
        pi->offset = p->total;
        pi->decays = decl[j].decays;
        p->total += pi->numel; /* both at most 2^48: no wrap */
        if (p->total > PLAN_MAX_ELEMENTS) CLT_TRY(too_large(layer, text, "the model's parameters"));
    }
    struct clt__buffer_decl bdecl[CLT__LAYER_MAX_BUFFERS];
    pl->nbuffers = k->buffers ? k->buffers(l, &pl->in, &pl->out, bdecl) : 0;
    CLT_ASSERT(pl->nbuffers >= 0 && pl->nbuffers <= CLT__LAYER_MAX_BUFFERS);
    CLT_TRY(grow((void **)&p->buffers, sizeof *p->buffers, p->nbuffers, pl->nbuffers,
                 &caps->buffers));
    pl->buffer = pl->nbuffers ? p->nbuffers : -1;
    for (int j = 0; j < pl->nbuffers; j++) {
        struct clt__plan_buffer *pb = &p->buffers[p->nbuffers++];
        struct clt_buffer_info *bi = &pb->info;
        memset(pb, 0, sizeof *pb);
        pb->decl = bdecl[j];
        snprintf(bi->name, sizeof bi->name, "%s.%s", name, bdecl[j].suffix);
        bi->i64 = bdecl[j].i64;
        CLT_ASSERT(!bi->i64 || bdecl[j].numel == 1);
        bi->ndim = bi->i64 ? 0 : 1;
        bi->dims[0] = bi->i64 ? 0 : bdecl[j].numel;
        bi->numel = bdecl[j].numel;
        bi->offset = bi->i64 ? p->counters : p->buffer_total;
        if (bi->i64) p->counters++;
        else p->buffer_total += bi->numel;
    }
    pl->kept = k->kept(l, &pl->in, &pl->out);
    pl->saved = k->saved ? k->saved(l, &pl->in, &pl->out) : 0;
    if (pl->kept > PLAN_MAX_ELEMENTS || pl->saved > PLAN_MAX_ELEMENTS)
        CLT_TRY(too_large(layer, text, "what it keeps for the backward pass"));
    if (k->workspace) {
        size_t fixed = 0, ws = k->workspace(l, &pl->in, &pl->out, &fixed);
        if (ws > PLAN_MAX_ELEMENTS || fixed > PLAN_MAX_ELEMENTS)
            CLT_TRY(too_large(layer, text, "its workspace"));
        if (ws > p->workspace) p->workspace = ws;
        if (fixed > p->workspace_fixed) p->workspace_fixed = fixed;
    }
    pl->child = -1;
    pl->nchildren = 0;
fail:
    return st;
}

/* Plans the children of block i (planned itself, output storage pl->ydt): each as a layer named
 * "{i}.{prefix}", in the block's storage, except that a block reading an f32 input keeps f32
 * outputs in each chain before its first weighted child; the block's own output takes the
 * storage of its first chain's last child (which it adds to). */
static clt_status plan_children(struct clt__plan *p, struct plan_caps *caps, int i,
                                clt_dtype precision, bool f32_input)
{
    clt_status st = CLT_OK;
    struct clt__child *ch = NULL;
    struct clt__plan_layer *pl = &p->layers[i];
    const clt_layer_spec *l = &pl->spec;
    int n = pl->kind->children(l, &pl->in, &pl->out, NULL);
    CLT_ALLOC(NULL, ch, n ? (size_t)n : 1);
    int filled = pl->kind->children(l, &pl->in, &pl->out, ch);
    CLT_ASSERT(filled == n && n > 0 && ch[0].from_input);
    CLT_TRY(grow((void **)&p->children, sizeof *p->children, p->nchildren, n, &caps->children));
    pl = &p->layers[i];
    pl->child = p->nchildren;
    pl->nchildren = n;
    bool weighted_seen = false;
    int chain0_end = n - 1;
    for (int j = 0; j < n; j++) {
        struct clt__plan_layer *c = &p->children[p->nchildren++];
        char name[48];
        memset(c, 0, sizeof *c);
        c->kind = clt__layer_kind_of(ch[j].spec.kind);
        c->spec = ch[j].spec;
        c->spec.vocab = pl->spec.vocab;
        c->from_input = ch[j].from_input;
        c->in = c->from_input ? pl->in : p->children[p->nchildren - 2].out;
        if (c->from_input) weighted_seen = false;
        if (c->from_input && j > 0 && chain0_end == n - 1) chain0_end = j - 1;
        snprintf(name, sizeof name, "%d.%s", i, ch[j].prefix);
        CLT_TRY(plan_unit(p, caps, c, i + 1, name));
        if (c->kind->weighted) weighted_seen = true;
        c->ydt = pl->ydt;
        if (precision != CLT_DTYPE_F32 && pl->ydt != CLT_DTYPE_F32 && f32_input && !weighted_seen)
            c->ydt = CLT_DTYPE_F32;
        size_t w = clt__shape_numel(&c->in);
        if (w > p->block_widest) p->block_widest = w;
    }
    pl->ydt = p->children[pl->child + chain0_end].ydt;
    if (clt__shape_numel(&pl->out) > p->block_widest) p->block_widest = clt__shape_numel(&pl->out);
fail:
    free(ch);
    return st;
}

clt_status clt__model_plan(const clt_spec *spec, const struct clt__shape *in, size_t outputs,
                           clt_dtype precision, struct clt__plan *out)
{
    clt_status st = CLT_OK;
    struct clt__plan p;
    struct plan_caps caps = {0, 0, 0};
    memset(&p, 0, sizeof p);
    memset(out, 0, sizeof *out);
    if (in->ndim < 1 || in->ndim > CLT__SHAPE_MAX_DIMS)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model input: a sample must have 1 to %d dimensions, got %d",
                 CLT__SHAPE_MAX_DIMS, in->ndim);
    CLT_TRY(clt_spec_validate(spec, (int)clt__shape_numel(in), (int)outputs));
    p.n = spec->n;
    p.first_weighted = p.last_weighted = -1;
    for (int i = 0; i < spec->n; i++)
        if (clt__layer_kind_of(spec->layers[i].kind)->weighted) {
            if (p.first_weighted < 0) p.first_weighted = i;
            p.last_weighted = i;
        }
    const int first16 = first_16bit(spec, p.first_weighted);
    CLT_ALLOC(NULL, p.layers, spec->n);
    int early_param = -1; /* a layer with parameters before the first weighted one */
    struct clt__shape shape = *in;
    p.widest = clt__shape_numel(in);
    for (int i = 0; i < spec->n; i++) {
        struct clt__plan_layer *pl = &p.layers[i];
        char name[16];
        pl->kind = clt__layer_kind_of(spec->layers[i].kind);
        pl->spec = spec->layers[i];
        pl->spec.vocab = (int)outputs; /* the vocabulary of embed and "linear V" */
        pl->in = shape;
        if (pl->kind->tokens && i > 0)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s) reads token ids and can only be the model's "
                     "first layer", i + 1, pl->kind->name);
        snprintf(name, sizeof name, "%d", i);
        CLT_TRY(plan_unit(&p, &caps, pl, i + 1, name));
        /* 16-bit storage starts at the first weighted layer (on values), so a layer that
         * keeps an f32 output between a layer with parameters (a batchnorm on the raw input)
         * and the first weighted layer would get its gradient in 16 bits: not supported yet */
        if (precision != CLT_DTYPE_F32 && i < first16) {
            if (pl->nparams > 0 && early_param < 0) {
                early_param = i;
            } else if (early_param >= 0 && pl->kept > 0) {
                CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d (%s) between layer %d (%s) and the first conv or "
                         "linear layer is not supported in mixed precision (%s) yet; train in "
                         "fp32 or move it after the first conv or linear layer",
                         i + 1, pl->kind->name, early_param + 1,
                         p.layers[early_param].kind->name, clt_dtype_name(precision));
            }
        }
        pl->ydt = out_dtype(precision, first16, p.last_weighted, i);
        if (pl->kind->children) /* a block reads an f32 input up to the first 16-bit layer */
            CLT_TRY(plan_children(&p, &caps, i, precision, i <= first16));
        if (precision != CLT_DTYPE_F32 && i > p.last_weighted && pl->kept) p.tail = true;
        shape = pl->out;
        if (clt__shape_numel(&shape) > p.widest) p.widest = clt__shape_numel(&shape);
    }
    *out = p;
    memset(&p, 0, sizeof p);
fail:
    clt__plan_free(&p);
    return st;
}

/* The model's output per sample: its last layer's (a spec validates only with at least one). */
static const struct clt__shape *plan_output(const struct clt__plan *p)
{
    return &p->layers[p->n - 1].out;
}

/* a * b, saturating at UINT64_MAX: an estimate past 16 EiB reads as "too much", not wrapped */
static uint64_t est_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* a + b, saturating likewise */
static uint64_t est_sum(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static void est_add(uint64_t *by_category, clt_mem_category c, uint64_t bytes)
{
    by_category[c] = est_sum(by_category[c], bytes ? bytes : 4); /* the allocator: no empty
                                                                     buffers */
}

/* The per-sample input shape params ask for (see clt_model_params.input_shape). */
static clt_status input_shape(const struct clt_model_params *params, size_t in_features,
                              struct clt__shape *out)
{
    *out = (struct clt__shape){1, {in_features}};
    if (!params || params->input_shape[0] == 0) return CLT_OK;
    struct clt__shape s = {0, {0}};
    while (s.ndim < CLT__SHAPE_MAX_DIMS && params->input_shape[s.ndim]) {
        s.d[s.ndim] = params->input_shape[s.ndim];
        s.ndim++;
    }
    for (int i = s.ndim; i < CLT__SHAPE_MAX_DIMS; i++)
        if (params->input_shape[i])
            return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                             "model input shape: a zero dimension before a non-zero one");
    char got[64];
    clt__shape_format(&s, got, sizeof got);
    if (clt__shape_numel(&s) != in_features)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "model input shape %s has %zu elements, but the model has %zu inputs",
                         got, clt__shape_numel(&s), in_features);
    *out = s;
    return CLT_OK;
}

clt_status clt_model_mem_estimate(const clt_spec *spec, size_t in_features, size_t outputs,
                                  const struct clt_model_params *params, uint64_t *by_category)
{
    struct clt__shape in;
    clt_status st = input_shape(params, in_features, &in);
    if (st != CLT_OK) return st;
    return clt__model_mem_estimate_shaped(spec, &in, outputs, params, by_category);
}

clt_status clt__model_mem_estimate_shaped(const clt_spec *spec, const struct clt__shape *in,
                                          size_t outputs, const struct clt_model_params *params,
                                          uint64_t *by_category)
{
    struct clt_model_params p = params ? *params : clt_model_default_params();
    struct clt__plan plan;
    clt_status st = clt__model_plan(spec, in, outputs, p.precision, &plan);
    if (st != CLT_OK) return st;
    /* what clt__model_create_shaped allocates, in its order (saturating: see est_mul) */
    uint64_t B = p.max_batch, P = plan.total;
    const clt_mem_category A = CLT_MEM_ACTIVATIONS;
    size_t prec = clt_dtype_size(p.precision);
    est_add(by_category, CLT_MEM_PARAMS, est_mul(P, 4));
    est_add(by_category, CLT_MEM_GRADS, est_mul(P, 4));
    if (p.precision != CLT_DTYPE_F32) est_add(by_category, CLT_MEM_PARAMS, est_mul(P, prec));
    if (plan.buffer_total) est_add(by_category, CLT_MEM_PARAMS, est_mul(plan.buffer_total, 4));
    for (int i = 0; i < plan.n; i++) {
        const struct clt__plan_layer *pl = &plan.layers[i];
        if (pl->kept)
            est_add(by_category, A, est_mul(est_mul(B, pl->kept), clt_dtype_size(pl->ydt)));
        if (pl->saved) est_add(by_category, A, est_mul(est_mul(B, pl->saved), 4));
        for (int j = 0; j < pl->nchildren; j++) {
            const struct clt__plan_layer *c = &plan.children[pl->child + j];
            if (c->kept)
                est_add(by_category, A, est_mul(est_mul(B, c->kept), clt_dtype_size(c->ydt)));
            if (c->saved) est_add(by_category, A, est_mul(est_mul(B, c->saved), 4));
        }
    }
    for (int k = 0; k < 2; k++) est_add(by_category, A, est_mul(est_mul(B, plan.widest), prec));
    for (int k = 0; plan.block_widest && k < 2; k++)
        est_add(by_category, A, est_mul(est_mul(B, plan.block_widest), prec));
    /* layers after the last linear one keep its output's element count */
    for (int k = 0; plan.tail && k < 2; k++)
        est_add(by_category, A, est_mul(est_mul(B, clt__shape_numel(plan_output(&plan))), 4));
    if (plan.workspace)
        est_add(by_category, CLT_MEM_WORKSPACE,
                est_mul(est_sum(est_mul(B, plan.workspace), plan.workspace_fixed), prec));
    clt__plan_free(&plan);
    return CLT_OK;
}

clt_status clt_model_param_elements(const clt_spec *spec, size_t in_features, size_t outputs,
                                    const struct clt_model_params *params, uint64_t *count)
{
    struct clt__shape in;
    struct clt__plan plan;
    *count = 0;
    clt_status st = input_shape(params, in_features, &in);
    if (st != CLT_OK) return st;
    st = clt__model_plan(spec, &in, outputs, CLT_DTYPE_F32, &plan);
    if (st == CLT_OK) *count = plan.total;
    clt__plan_free(&plan);
    return st;
}

clt_status clt_model_output_shape_of(const clt_spec *spec, size_t in_features, size_t outputs,
                                     const struct clt_model_params *params, size_t shape[3],
                                     int *ndim)
{
    struct clt__shape in;
    struct clt__plan plan;
    memset(shape, 0, 3 * sizeof *shape);
    *ndim = 0;
    clt_status st = input_shape(params, in_features, &in);
    if (st != CLT_OK) return st;
    st = clt__model_plan(spec, &in, outputs, CLT_DTYPE_F32, &plan);
    if (st == CLT_OK) {
        const struct clt__shape *o = plan_output(&plan);
        for (int i = 0; i < o->ndim; i++) shape[i] = o->d[i];
        *ndim = o->ndim;
    }
    clt__plan_free(&plan);
    return st;
}

/* ---- the model ---------------------------------------------------------------------------- */

/* n draws of normal(0, std) by Box-Muller from uniform pairs (2e, 2e + 1) of the stream */
static void init_normal(uint64_t seed, uint64_t stream, float *dst, size_t n, float std)
{
    for (size_t e = 0; e < n; e++) {
        double u1 = 1.0 - (double)clt_rng_uniform(seed, stream, 2 * (uint64_t)e); /* (0, 1] */
        double u2 = (double)clt_rng_uniform(seed, stream, 2 * (uint64_t)e + 1);
        dst[e] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* PyTorch's nn.Linear reset_parameters (kaiming_uniform_ with a = sqrt(5) gives the bound
 * 1/sqrt(IN)) or the module's own where its kind says (kind->default_bound), or the
 * Kaiming/Xavier uniform schemes, or GPT-2's normal(0, 0.02) for every weight, drawn from Philox stream (INIT, param
 * index) so that every device starts from the same weights. The fans come from the layer's
 * declaration (a bias has its weight's). */
static void init_params(const clt_model *m, float *host)
{
    for (int i = 0; i < m->nparams; i++) {
        const struct clt__plan_param *pp = &m->plan.params[i];
        bool weight = pp->decl.weight;
        size_t fan_in = pp->decl.fan_in, fan_out = pp->decl.fan_out;
        double bound = pp->default_bound;
        if (m->params_cfg.init == CLT_INIT_KAIMING) bound = weight ? sqrt(6.0 / fan_in) : 0;
        if (m->params_cfg.init == CLT_INIT_XAVIER)
            bound = weight ? sqrt(6.0 / (double)(fan_in + fan_out)) : 0;
        double std = pp->decl.std;
        if (m->params_cfg.init == CLT_INIT_GPT2) {
            if (weight) std = 0.02;
            bound = 0;
        }
        float *dst = host + pp->info.offset;
        if (std > 0)
            init_normal(m->params_cfg.seed, clt_rng_stream(CLT_RNG_INIT, (uint64_t)i), dst,
                        pp->info.numel, (float)std);
        else if (bound == 0) memset(dst, 0, pp->info.numel * sizeof *dst);
        else
            clt_rng_fill_uniform(m->params_cfg.seed, clt_rng_stream(CLT_RNG_INIT, (uint64_t)i), 0,
                                 dst, pp->info.numel, (float)-bound, (float)bound);
    }
    /* kinds that fill their parameters themselves */
    for (int i = 0; i < m->nlayers; i++)
        for (int c = -1; c < m->plan.layers[i].nchildren; c++) {
            const struct clt__plan_layer *pl =
                c < 0 ? &m->plan.layers[i] : &m->plan.children[m->plan.layers[i].child + c];
            for (int j = 0; pl->kind->init && j < pl->nparams; j++) {
                const struct clt_param_info *pi = &m->plan.params[pl->param + j].info;
                pl->kind->init(&pl->spec, j, host + pi->offset, pi->numel);
            }
        }
}

static clt_status make_view(struct clt__layer *L, size_t B)
{
    clt_status st = CLT_OK;
    for (int c = 0; c < L->nchildren; c++) CLT_TRY(make_view(&L->child[c], B));
    if (L->y_full) {
        clt_tensor_free(L->y);
        L->y = NULL;
        /* (B, the output's shape) when the layer keeps its whole output, else (B, kept) */
        size_t dims[1 + CLT__SHAPE_MAX_DIMS] = {B, clt_tensor_dim(L->y_full, 1)};
        int ndim = 2;
        if (dims[1] == L->out_n) {
            ndim = 1 + L->out.ndim;
            for (int d = 0; d < L->out.ndim; d++) dims[1 + d] = L->out.d[d];
        }
        CLT_TRY(clt_tensor_view(&L->y, L->y_full, 0, ndim, dims));
    }
fail:
    return st;
}

static clt_status make_views(clt_model *m, size_t B)
{
    clt_status st = CLT_OK;
    for (int i = 0; i < m->nlayers; i++) CLT_TRY(make_view(&m->layers[i], B));
    for (int k = 0; k < 2; k++) {
        clt_tensor_free(m->g[k]);
        m->g[k] = NULL;
        m->g_of[k] = NULL;
    }
    m->batch = B;
fail:
    return st;
}

/* In the chain of n layers L (the model's, or a block's children, planned as pl): a layer
 * whose kind absorbs the next one (kind->absorbs) runs it, and one whose kind can
 * (grads_act_before) applies the gradient of the activation before it. CLTRAIN_FUSE=0 keeps
 * every layer apart (the tests compare both). */
static void fuse_layers(struct clt__layer *L, int n, const struct clt__plan_layer *pl)
{
    const char *env = getenv("CLTRAIN_FUSE");
    if (env && strcmp(env, "0") == 0) return;
    for (int i = 0; i + 1 < n; i++) {
        if (!L[i].kind->absorbs || pl[i + 1].from_input || L[i].absorbed) continue;
        enum clt__absorb how = L[i].kind->absorbs(&L[i], &L[i + 1]);
        if (how == CLT__ABSORB_NONE) continue;
        L[i].next = &L[i + 1];
        L[i + 1].absorbed = how;
    }
    /* a layer that can takes its input gradient on through the activation before it, whose
     * input gradient is then its own (when the layer before runs that activation in both
     * passes, it must leave its gradient out: kind->grads_act_before too) */
    for (int i = 1; i < n; i++) {
        struct clt__layer *A = &L[i - 1];
        if (!L[i].kind->grads_act_before || !A->kind->activation || pl[i].from_input) continue;
        if (A->absorbed == CLT__ABSORB_BOTH && !L[i - 2].kind->grads_act_before) continue;
        L[i].act_before = A;
        A->grad_after = true;
    }
}

/* Whether layer L (or a block's child) of a model on sequences of T positions computes one
 * position by itself (kind->decode, kind->decodes) with a (T, C) input and output; else a
 * reason naming it into why. */
static bool layer_decodes(const struct clt__layer *L, size_t T, char *why, size_t n)
{
    char reason[96] = "";
    const bool seq = L->in.ndim == 2 && L->in.d[0] == T && L->out.ndim == 2 && L->out.d[0] == T;
    if (!L->kind->decode) snprintf(reason, sizeof reason, "%s", L->kind->name);
    else if (!seq && !L->kind->tokens)
        snprintf(reason, sizeof reason, "%s on an input that is not a sequence of T positions",
                 L->kind->name);
    else if (L->kind->decodes && !L->kind->decodes(L, reason, sizeof reason)) (void)0;
    else return true;
    snprintf(why, n, "layer %d (%s) cannot compute one position alone", L->index + 1, reason);
    return false;
}

/* Whether clt_model_decode takes m (see clt_model_can_decode); else why. */
static bool decode_plan(const clt_model *m, char *why, size_t n)
{
    if (!clt_spec_takes_tokens(&m->spec)) {
        snprintf(why, n, "not a language model (its first layer is not embed)");
        return false;
    }
    if (m->params_cfg.precision != CLT_DTYPE_F32) {
        snprintf(why, n, "a %s model (decoding runs in f32)",
                 clt_dtype_name(m->params_cfg.precision));
        return false;
    }
    for (int i = 0; i < m->nlayers; i++)
        if (!layer_decodes(&m->layers[i], m->in.d[0], why, n)) return false;
    return true;
}

/* Layer L (a top-level layer, or a block's child) from its plan: views of its parameters and
 * buffers, and the output it keeps. */
static clt_status setup_layer(clt_model *m, struct clt__layer *L, const struct clt__plan_layer *pl,
                          const clt_layer_spec *spec, int index, int rng_index)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = m->ctx;
    L->kind = pl->kind;
    L->spec = *spec;
    L->spec.vocab = pl->spec.vocab;
    L->index = index;
    L->rng_index = rng_index;
    L->in = pl->in;
    L->out = pl->out;
    L->in_n = clt__shape_numel(&pl->in);
    L->out_n = clt__shape_numel(&pl->out);
    L->param = pl->param;
    L->nparams = pl->nparams;
    for (int j = 0; j < L->nparams; j++) {
        const struct clt_param_info *pi = &m->info[L->param + j];
        CLT_TRY(clt_tensor_view(&L->w[j], m->params, pi->offset, pi->ndim, pi->dims));
        CLT_TRY(clt_tensor_view(&L->dw[j], m->grads, pi->offset, pi->ndim, pi->dims));
        if (m->params16)
            CLT_TRY(clt_tensor_view(&L->w16[j], m->params16, pi->offset, pi->ndim, pi->dims));
    }
    if (pl->tied >= 0) { /* the token embedding's matrix, as its own weight */
        const struct clt_param_info *pi = &m->info[pl->tied];
        CLT_TRY(clt_tensor_view(&L->w[0], m->params, pi->offset, pi->ndim, pi->dims));
        CLT_TRY(clt_tensor_view(&L->dw[0], m->grads, pi->offset, pi->ndim, pi->dims));
        if (m->params16)
            CLT_TRY(clt_tensor_view(&L->w16[0], m->params16, pi->offset, pi->ndim, pi->dims));
    }
    L->nbuffers = pl->nbuffers;
    for (int j = 0; j < L->nbuffers; j++) {
        const struct clt_buffer_info *bi = &m->plan.buffers[pl->buffer + j].info;
        if (bi->i64) L->counter[j] = &m->counters[bi->offset];
        else CLT_TRY(clt_tensor_view(&L->buf[j], m->buffers, bi->offset, 1, &bi->numel));
    }
    L->ydt = pl->ydt;
    if (pl->kept) {
        size_t dims[2] = {m->max_batch, pl->kept};
        CLT_TRY(clt_tensor_create(&L->y_full, ctx, L->ydt, 2, dims, CLT_MEM_ACTIVATIONS));
    }
    if (pl->saved) {
        size_t dims[2] = {m->max_batch, pl->saved};
        CLT_TRY(clt_tensor_create(&L->saved, ctx, CLT_DTYPE_F32, 2, dims, CLT_MEM_ACTIVATIONS));
    }
fail:
    return st;
}

/* The layer (or child) whose own parameter `param` is, or NULL. */
static struct clt__layer *owner_of(clt_model *m, int param)
{
    for (int i = 0; i < m->nlayers; i++)
        for (int c = -1; c < m->layers[i].nchildren; c++) {
            struct clt__layer *L = c < 0 ? &m->layers[i] : &m->layers[i].child[c];
            if (L->nparams && param >= L->param && param < L->param + L->nparams) return L;
        }
    return NULL;
}

/* A tied layer's matrix belongs to an earlier layer, whose backward runs after the tied one's
 * (which writes the gradient): that one adds its own (grad_shared). */
static void mark_shared(clt_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        for (int c = -1; c < m->layers[i].nchildren; c++) {
            const struct clt__plan_layer *pl =
                c < 0 ? &m->plan.layers[i] : &m->plan.children[m->plan.layers[i].child + c];
            if (pl->tied < 0) continue;
            struct clt__layer *E = owner_of(m, pl->tied);
            CLT_ASSERT(E);
            E->grad_shared[pl->tied - E->param] = true;
        }
}

/* Raises *min to layer pl's kind->min_batch, noting it in why when it is the first to ask. */
static void layer_min_batch(const struct clt__plan_layer *pl, const char *where, size_t *min,
                            char *why, size_t n)
{
    size_t m = pl->kind->min_batch ? pl->kind->min_batch(&pl->spec, &pl->in) : 1;
    if (m <= *min) return;
    char shape[64];
    clt__shape_format(&pl->in, shape, sizeof shape);
    snprintf(why, n, "%s (%s) on %s %s per sample", where, pl->kind->name, shape,
             pl->in.ndim == 1 ? "features" : "values");
    *min = m;
}

clt_status clt__model_min_batch(const clt_spec *spec, size_t in_features, size_t outputs,
                                const struct clt_model_params *params, size_t *min, char *why,
                                size_t n)
{
    struct clt__shape in;
    struct clt__plan plan;
    memset(&plan, 0, sizeof plan);
    *min = 1;
    if (n) why[0] = '\0';
    clt_status st = input_shape(params, in_features, &in);
    if (st == CLT_OK) st = clt__model_plan(spec, &in, outputs, CLT_DTYPE_F32, &plan);
    for (int i = 0; st == CLT_OK && i < plan.n; i++) {
        const struct clt__plan_layer *pl = &plan.layers[i];
        char where[48];
        snprintf(where, sizeof where, "layer %d", i + 1);
        layer_min_batch(pl, where, min, why, n);
        for (int c = 0; c < pl->nchildren; c++) {
            snprintf(where, sizeof where, "layer %d's child %d", i + 1, c + 1);
            layer_min_batch(&plan.children[pl->child + c], where, min, why, n);
        }
    }
    clt__plan_free(&plan);
    return st;
}

clt_status clt_model_create(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                            size_t in_features, size_t outputs,
                            const struct clt_model_params *params)
{
    struct clt__shape in;
    *out = NULL;
    clt_status st = input_shape(params, in_features, &in);
    if (st != CLT_OK) return clt__fail(ctx, st, "%s", clt_last_errmsg());
    return clt__model_create_shaped(out, ctx, spec, &in, outputs, params);
}

clt_status clt__model_create_shaped(clt_model **out, clt_ctx *ctx, const clt_spec *spec,
                                    const struct clt__shape *in, size_t outputs,
                                    const struct clt_model_params *params)
{
    clt_status st = CLT_OK;
    clt_model *m = NULL;
    float *host = NULL;
    struct clt__plan plan;
    memset(&plan, 0, sizeof plan);
    *out = NULL;
    struct clt_model_params cfg = params ? *params : clt_model_default_params();
    /* the spec module records for the thread only; callers read the ctx's message */
    clt_status ps = clt__model_plan(spec, in, outputs, cfg.precision, &plan);
    if (ps != CLT_OK) CLT_FAIL(ctx, ps, "%s", clt_last_errmsg());
    CLT_ALLOC(ctx, m, 1);
    m->ctx = ctx;
    m->plan = plan;
    memset(&plan, 0, sizeof plan);
    m->params_cfg = cfg;
    if (m->params_cfg.max_batch == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "the model's batch size must be at least 1");
    clt_dtype prec = m->params_cfg.precision;
    if (prec != CLT_DTYPE_F32 && prec != CLT_DTYPE_F16 && prec != CLT_DTYPE_BF16)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "model precision must be f32, f16 or bf16, got %s",
                 clt_dtype_name(prec));
    m->in = *in;
    m->in_features = clt__shape_numel(in);
    m->outputs = outputs;
    m->out = *plan_output(&m->plan);
    m->out_numel = clt__shape_numel(&m->out);
    m->max_batch = m->params_cfg.max_batch;
    m->nlayers = spec->n;
    CLT_TRY(clt__spec_copy(&m->spec, spec));
    CLT_ALLOC(ctx, m->layers, spec->n);
    m->nparams = m->plan.nparams;
    CLT_ALLOC(ctx, m->info, m->nparams ? (size_t)m->nparams : 1);
    for (int i = 0; i < m->nparams; i++) m->info[i] = m->plan.params[i].info;

    /* flat parameters (initialised on the host, uploaded) and gradients */
    size_t pdim = m->plan.total;
    CLT_TRY(clt_tensor_create(&m->params, ctx, CLT_DTYPE_F32, 1, &pdim, CLT_MEM_PARAMS));
    CLT_TRY(clt_tensor_zeros(&m->grads, ctx, CLT_DTYPE_F32, 1, &pdim, CLT_MEM_GRADS));
    if (prec != CLT_DTYPE_F32)
        CLT_TRY(clt_tensor_create(&m->params16, ctx, prec, 1, &pdim, CLT_MEM_PARAMS));
    CLT_ALLOC(ctx, host, pdim);
    init_params(m, host);
    CLT_TRY(clt_model_write_params(m, host)); /* and the 16-bit copy */

    /* buffers: the flat f32 ones (initialised on the host, uploaded) and the host counters */
    for (int i = 0; i < m->plan.nbuffers; i++) m->nbuffers += m->plan.buffers[i].decl.persistent;
    CLT_ALLOC(ctx, m->binfo, m->nbuffers ? (size_t)m->nbuffers : 1);
    CLT_ALLOC(ctx, m->counters, m->plan.counters ? m->plan.counters : 1);
    for (int i = 0, k = 0; i < m->plan.nbuffers; i++)
        if (m->plan.buffers[i].decl.persistent) m->binfo[k++] = m->plan.buffers[i].info;
    if (m->plan.buffer_total) {
        size_t bdim = m->plan.buffer_total;
        float *binit = NULL;
        CLT_TRY(clt_tensor_create(&m->buffers, ctx, CLT_DTYPE_F32, 1, &bdim, CLT_MEM_PARAMS));
        CLT_ALLOC(ctx, binit, bdim);
        for (int i = 0; i < m->plan.nbuffers; i++) {
            const struct clt__plan_buffer *pb = &m->plan.buffers[i];
            for (size_t e = 0; !pb->info.i64 && e < pb->info.numel; e++)
                binit[pb->info.offset + e] = pb->decl.init;
        }
        st = clt_model_write_buffers(m, binit, NULL);
        free(binit);
        if (st != CLT_OK) goto fail;
    }
    for (int i = 0; i < m->plan.nbuffers; i++) {
        const struct clt__plan_buffer *pb = &m->plan.buffers[i];
        if (pb->info.i64) m->counters[pb->info.offset] = (int64_t)pb->decl.init;
    }

    /* each layer (and each block's children): views of its parameters, the output it keeps */
    for (int i = 0; i < m->nlayers; i++) {
        struct clt__layer *L = &m->layers[i];
        const struct clt__plan_layer *pl = &m->plan.layers[i];
        CLT_TRY(setup_layer(m, L, pl, &m->spec.layers[i], i, i));
        if (pl->nchildren) {
            CLT_ALLOC(ctx, L->child, pl->nchildren);
            L->nchildren = pl->nchildren;
            for (int c = 0; c < pl->nchildren; c++) {
                const struct clt__plan_layer *cp = &m->plan.children[pl->child + c];
                CLT_TRY(setup_layer(m, &L->child[c], cp, &cp->spec, i,
                                    m->nlayers + pl->child + c));
            }
        }
    }
    mark_shared(m);
    fuse_layers(m->layers, m->nlayers, m->plan.layers);
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].nchildren) /* else plan child is -1 (and children may be NULL) */
            fuse_layers(m->layers[i].child, m->layers[i].nchildren,
                        &m->plan.children[m->plan.layers[i].child]);
    m->decodes = decode_plan(m, m->no_decode, sizeof m->no_decode);
    size_t gdims[2] = {m->max_batch, m->plan.widest};
    for (int k = 0; k < 2; k++)
        CLT_TRY(clt_tensor_create(&m->g_full[k], ctx, prec, 2, gdims, CLT_MEM_ACTIVATIONS));
    if (m->plan.tail) {
        size_t tdims[2] = {m->max_batch, m->out_numel};
        for (int k = 0; k < 2; k++)
            CLT_TRY(clt_tensor_create(&m->gt_full[k], ctx, CLT_DTYPE_F32, 2, tdims,
                                      CLT_MEM_ACTIVATIONS));
    }
    if (m->plan.block_widest) {
        size_t bdims[2] = {m->max_batch, m->plan.block_widest};
        for (int k = 0; k < 2; k++)
            CLT_TRY(clt_tensor_create(&m->gb_full[k], ctx, prec, 2, bdims, CLT_MEM_ACTIVATIONS));
        for (int i = 0; i < m->nlayers; i++)
            for (int k = 0; m->layers[i].nchildren && k < 2; k++)
                m->layers[i].gb[k] = m->gb_full[k];
    }
    if (m->plan.workspace) {
        if (m->max_batch > (SIZE_MAX - m->plan.workspace_fixed) / m->plan.workspace)
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "model: the workspace of %zu samples overflows size_t",
                     m->max_batch);
        size_t wn = m->max_batch * m->plan.workspace + m->plan.workspace_fixed;
        CLT_TRY(clt_tensor_create(&m->ws, ctx, prec, 1, &wn, CLT_MEM_WORKSPACE));
        for (int i = 0; i < m->nlayers; i++) {
            struct clt__layer *L = &m->layers[i];
            L->ws_owner = &m->ws_owner;
            if (L->kind->workspace) L->ws = m->ws;
            for (int c = 0; c < L->nchildren; c++) {
                L->child[c].ws_owner = &m->ws_owner;
                if (L->child[c].kind->workspace) L->child[c].ws = m->ws;
            }
        }
    }
    CLT_TRY(make_views(m, m->max_batch));
    *out = m;
    m = NULL;
fail:
    free(host);
    clt__plan_free(&plan);
    clt_model_free(m);
    return st;
}

static void free_layer(struct clt__layer *L)
{
    for (int c = 0; L->child && c < L->nchildren; c++) free_layer(&L->child[c]);
    free(L->child);
    for (int j = 0; j < CLT__LAYER_MAX_PARAMS; j++) {
        clt_tensor_free(L->w[j]);
        clt_tensor_free(L->dw[j]);
        clt_tensor_free(L->w16[j]);
    }
    for (int j = 0; j < CLT__LAYER_MAX_BUFFERS; j++) clt_tensor_free(L->buf[j]);
    clt_tensor_free(L->y);
    clt_tensor_free(L->row);
    clt_tensor_free(L->y_full);
    clt_tensor_free(L->saved);
}

void clt_model_free(clt_model *m)
{
    if (!m) return;
    for (int i = 0; m->layers && i < m->nlayers; i++) free_layer(&m->layers[i]);
    for (int k = 0; k < 2; k++) {
        clt_tensor_free(m->gb_full[k]);
        clt_tensor_free(m->g[k]);
        clt_tensor_free(m->g_full[k]);
        clt_tensor_free(m->gt_full[k]);
    }
    clt_tensor_free(m->params16);
    clt_tensor_free(m->ws);
    clt_tensor_free(m->params);
    clt_tensor_free(m->grads);
    clt_tensor_free(m->buffers);
    clt__plan_free(&m->plan);
    free(m->layers);
    free(m->info);
    free(m->binfo);
    free(m->counters);
    clt_spec_free(&m->spec);
    free(m);
}

clt_status clt_model_forward(clt_model *m, const clt_tensor *x, bool train, uint64_t step,
                             clt_tensor **out)
{
    clt_status st = CLT_OK;
    size_t B = clt_tensor_dim(x, 0);
    CLT_TRY(clt_tensor_same_ctx(m->params, x));
    /* token ids for a model whose first layer reads them (embed), else values */
    clt_dtype xdt = clt_spec_takes_tokens(&m->spec) ? CLT_DTYPE_I32 : CLT_DTYPE_F32;
    if (clt_tensor_dtype(x) != xdt || clt_tensor_numel(x) != B * m->in_features || B == 0 ||
        B > m->max_batch) {
        char shape[64];
        clt__shape_format(&m->in, shape, sizeof shape);
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE,
                 "model input must be %s (B, %s) with 1 <= B <= %zu, got %s with %zu elements",
                 clt_dtype_name(xdt), shape, m->max_batch, clt_dtype_name(clt_tensor_dtype(x)),
                 clt_tensor_numel(x));
    }
    if (B != m->batch) CLT_TRY(make_views(m, B));
    m->step = step;
    m->cached = 0;
    const struct clt__pass pass = {.B = B, .train = train, .seed = m->params_cfg.seed,
                                   .step = step, .nlayers = m->nlayers + m->plan.nchildren};
    const clt_tensor *h = x;
    for (int i = 0; i < m->nlayers; i++) {
        struct clt__layer *L = &m->layers[i];
        L->x = h;
        L->ran = false;
        CLT_TRY(L->kind->forward(L, h, &pass));
        h = L->out_t;
    }
    *out = (clt_tensor *)h;
    /* a batch-1 evaluation leaves every position's rows, the cache clt_model_decode reads */
    if (B == 1 && !train) m->cached = m->in.d[0];
fail:
    return st;
}

bool clt_model_can_decode(const clt_model *m, char *why, size_t n)
{
    if (!m->decodes && why && n) snprintf(why, n, "%s", m->no_decode);
    return m->decodes;
}

clt_status clt_model_decode(clt_model *m, const clt_tensor *token, size_t pos,
                            clt_tensor **logits)
{
    clt_status st = CLT_OK;
    const size_t T = m->in.d[0];
    const size_t cached = m->cached;
    m->cached = 0; /* until this step has enqueued every layer */
    CLT_TRY(clt_tensor_same_ctx(m->params, token));
    if (!m->decodes)
        CLT_FAIL(m->ctx, CLT_ERR_UNSUPPORTED, "model decode: this model cannot compute one "
                                              "position at a time: %s", m->no_decode);
    if (clt_tensor_dtype(token) != CLT_DTYPE_I32 || clt_tensor_numel(token) != 1)
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE, "model decode: the token must be one i32 id, got %s with "
                                        "%zu elements", clt_dtype_name(clt_tensor_dtype(token)),
                 clt_tensor_numel(token));
    if (pos >= T)
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE, "model decode: position %zu is past the block of T = %zu "
                                        "positions", pos, T);
    if (pos > cached)
        CLT_FAIL(m->ctx, CLT_ERR_STATE, "model decode: position %zu needs positions 0 .. %zu in "
                                        "the cache, which holds %zu; run a batch-1 evaluation "
                                        "forward over the context first", pos, pos - 1, cached);
    const clt_tensor *h = token;
    for (int i = 0; i < m->nlayers; i++) {
        struct clt__layer *L = &m->layers[i];
        CLT_TRY(L->kind->decode(L, h, pos));
        h = L->out_t;
    }
    *logits = (clt_tensor *)h;
    m->cached = pos + 1;
fail:
    return st;
}

/* Does L (or one of a block's children) have parameters? */
static bool has_params(const struct clt__layer *L)
{
    for (int c = 0; c < L->nchildren; c++)
        if (has_params(&L->child[c])) return true;
    return L->nparams > 0;
}

clt_status clt_model_backward(clt_model *m, const clt_tensor *dout, bool accumulate)
{
    clt_status st = CLT_OK;
    size_t B = m->batch;
    m->cached = 0; /* a backward may overwrite kept outputs (linear's fused activation) */
    CLT_TRY(clt_tensor_same_ctx(m->params, dout));
    if (clt_tensor_numel(dout) != B * m->out_numel) {
        char shape[64];
        clt__shape_format(&m->out, shape, sizeof shape);
        CLT_FAIL(m->ctx, CLT_ERR_SHAPE, "model backward: gradient has %zu elements, expected "
                                        "(%zu, %s)", clt_tensor_numel(dout), B, shape);
    }
    const struct clt__pass pass = {.B = B, .seed = m->params_cfg.seed, .step = m->step,
                                   .nlayers = m->nlayers + m->plan.nchildren,
                                   .beta = accumulate ? 1.0f : 0.0f};
    int cur = 0;
    const clt_tensor *dy = dout;
    /* the first layer that needs an input gradient: nothing before it has parameters */
    int first = 0;
    while (first < m->nlayers && !has_params(&m->layers[first])) first++;
    for (int i = m->nlayers - 1; i >= first; i--) {
        struct clt__layer *L = &m->layers[i];
        /* dx goes into the ping-pong buffer that does not hold dy; in mixed precision, into an
         * f32 one when the layer before keeps an f32 output (after the last linear layer) */
        const clt_tensor *full = m->g_full[cur];
        if (i > first && m->gt_full[cur] && m->layers[i - 1].ydt == CLT_DTYPE_F32 &&
            i - 1 >= m->plan.last_weighted && m->params_cfg.precision != CLT_DTYPE_F32)
            full = m->gt_full[cur];
        if (!m->g[cur] || m->g_of[cur] != full || clt_tensor_dim(m->g[cur], 1) != L->in_n) {
            clt_tensor_free(m->g[cur]);
            m->g[cur] = NULL;
            size_t dims[2] = {B, L->in_n};
            CLT_TRY(clt_tensor_view(&m->g[cur], full, 0, 2, dims));
            m->g_of[cur] = full;
        }
        clt_tensor *dx = m->g[cur];
        bool through = false;
        CLT_TRY(L->kind->backward(L, dx, dy, i > first, &pass, &through));
        if (through) continue; /* identity: dy passes through */
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

clt_status clt__model_sync_weights(clt_model *m)
{
    return m->params16 ? clt_op_cast(m->params16, m->params) : CLT_OK;
}

clt_status clt_model_write_params(clt_model *m, const float *src)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    m->cached = 0; /* rows of the old weights */
    CLT_TRY(clt_tensor_write(m->params, src, false, &ev));
    CLT_TRY(clt_ctx_wait(m->ctx, CLT_WAIT_SETUP, 1, &ev));
    CLT_TRY(clt__model_sync_weights(m));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}

clt_status clt_model_read_buffers(clt_model *m, float *f32, int64_t *i64, clt_wait_reason why)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    if (i64 && m->plan.counters) memcpy(i64, m->counters, m->plan.counters * sizeof *i64);
    if (!f32 || !m->buffers) return CLT_OK;
    CLT_TRY(clt_tensor_read(m->buffers, f32, false, &ev));
    CLT_TRY(clt_ctx_wait(m->ctx, why, 1, &ev));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}

clt_status clt_model_write_buffers(clt_model *m, const float *f32, const int64_t *i64)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    if (i64 && m->plan.counters) memcpy(m->counters, i64, m->plan.counters * sizeof *i64);
    if (!f32 || !m->buffers) return CLT_OK;
    CLT_TRY(clt_tensor_write(m->buffers, f32, false, &ev));
    CLT_TRY(clt_ctx_wait(m->ctx, CLT_WAIT_SETUP, 1, &ev));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}
