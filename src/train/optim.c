/* Optimizers (SGD with momentum/dampening/Nesterov, Adam, AdamW) over one flat f32 parameter
 * tensor, their state on the parameters' ctx, and the learning-rate schedules. The update
 * kernels are cl/optim.cl; everything that depends only on the step count (learning rate, bias
 * corrections, AdamW's decay factor) is computed here in double. */
#include "cltrain/optim.h"

#include "runtime/internal.h"
#include "ops/ops_internal.h"
#include "runtime/program_internal.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

struct clt_optim {
    struct clt_optim_params p;
    clt_tensor *params; /* not owned */
    clt_tensor *state[2];
    int nstate;
    long steps;
    clt_tensor *copy; /* clt_optim_set_copy's 16-bit copy of params, or NULL; not owned */
    /* weight_decay > 0: one ushort (2 U8) per update work-item, bit j set: element
     * CLT__OPTIM_V * item + j takes no decay (clt_optim_set_no_decay); else NULL */
    clt_tensor *no_decay;
    /* clip_grad > 0: f32 [norm, clip factor, one partial sum per norm work-group], written by
     * the norm kernels each step and read by the update kernel; else NULL */
    clt_tensor *gnorm;
};

#define CLT__OPTIM_V 16 /* elements per work-item of the update kernels (cl/optim.cl's OPTIM_V) */
/* elements per work-group of grad_norm_partial: cl/optim.cl's OPTIM_NORM_TILE * OPTIM_NORM_LEAF */
#define CLT__OPTIM_NORM_CHUNK (256 * 16)

static size_t update_items(size_t n) { return (n + CLT__OPTIM_V - 1) / CLT__OPTIM_V; }
static size_t norm_groups(size_t n)
{
    return (n + CLT__OPTIM_NORM_CHUNK - 1) / CLT__OPTIM_NORM_CHUNK;
}

uint64_t clt__optim_mem_bytes(const struct clt_optim_params *p, size_t n)
{
    int nstate = p->kind != CLT_OPTIM_SGD ? 2 : p->momentum != 0.0f ? 1 : 0;
    uint64_t bytes = (uint64_t)nstate * n * sizeof(float);
    if (p->weight_decay > 0.0f) bytes += (uint64_t)update_items(n) * 2;
    if (p->clip_grad > 0.0f) bytes += (uint64_t)(2 + norm_groups(n)) * sizeof(float);
    return bytes;
}

static const char *const kind_names[] = {"sgd", "adam", "adamw"};
static const char *const sched_names[] = {"constant", "step", "cosine"};

struct clt_optim_params clt_optim_default_params(clt_optim_kind kind)
{
    struct clt_optim_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.lr = 1e-3f;
    p.weight_decay = kind == CLT_OPTIM_ADAMW ? 1e-2f : 0.0f;
    p.momentum = 0.0f;
    p.dampening = 0.0f;
    p.nesterov = false;
    p.beta1 = 0.9f;
    p.beta2 = 0.999f;
    p.eps = 1e-8f;
    p.schedule = CLT_SCHED_CONSTANT;
    p.warmup_steps = 0;
    p.step_size = 1;
    p.gamma = 0.1f;
    p.total_steps = 1;
    p.min_lr = 0.0f;
    p.clip_grad = 0.0f;
    return p;
}

const char *clt_optim_kind_name(clt_optim_kind k)
{
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

const char *clt_schedule_name(clt_schedule s)
{
    return (unsigned)s < 3 ? sched_names[s] : "?";
}

clt_status clt_optim_parse_kind(const char *s, clt_optim_kind *out)
{
    CLT_ASSERT(out);
    for (int i = 0; s && i < 3; i++)
        if (strcasecmp(s, kind_names[i]) == 0) {
            *out = (clt_optim_kind)i;
            return CLT_OK;
        }
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "unknown optimizer \"%s\": expected sgd, adam or adamw", s ? s : "(null)");
}

clt_status clt_optim_parse_schedule(const char *s, clt_schedule *out)
{
    CLT_ASSERT(out);
    for (int i = 0; s && i < 3; i++)
        if (strcasecmp(s, sched_names[i]) == 0) {
            *out = (clt_schedule)i;
            return CLT_OK;
        }
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "unknown learning-rate schedule \"%s\": expected constant, step or cosine",
                     s ? s : "(null)");
}

/* Records the message in ctx (may be NULL) and the thread. */
static clt_status validate(clt_ctx *ctx, const struct clt_optim_params *p)
{
    const char *k = clt_optim_kind_name(p->kind);
    if ((unsigned)p->kind > CLT_OPTIM_ADAMW)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "optimizer: unknown kind %d", (int)p->kind);
    if (!(isfinite(p->lr) && p->lr > 0.0f))
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: lr must be finite and > 0, got %g", k,
                         (double)p->lr);
    if (!(isfinite(p->weight_decay) && p->weight_decay >= 0.0f))
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "%s: weight_decay must be finite and >= 0, got %g", k,
                         (double)p->weight_decay);
    if (!(isfinite(p->clip_grad) && p->clip_grad >= 0.0f))
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "%s: clip_grad must be finite and >= 0 (0: no clipping), got %g", k,
                         (double)p->clip_grad);
    if (p->kind == CLT_OPTIM_SGD) {
        if (!(isfinite(p->momentum) && p->momentum >= 0.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "sgd: momentum must be finite and >= 0, got %g", (double)p->momentum);
        if (!isfinite(p->dampening))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG, "sgd: dampening must be finite, got %g",
                             (double)p->dampening);
        if (p->nesterov && !(p->momentum > 0.0f && p->dampening == 0.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "sgd: nesterov needs momentum > 0 and dampening 0 (got momentum %g, "
                             "dampening %g)",
                             (double)p->momentum, (double)p->dampening);
    } else {
        if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: beta1 must be in [0, 1), got %g", k,
                             (double)p->beta1);
        if (!(p->beta2 >= 0.0f && p->beta2 < 1.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: beta2 must be in [0, 1), got %g", k,
                             (double)p->beta2);
        if (!(isfinite(p->eps) && p->eps > 0.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: eps must be finite and > 0, got %g", k,
                             (double)p->eps);
    }
    if (p->warmup_steps < 0)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "schedule: warmup_steps must be >= 0, got %ld",
                         p->warmup_steps);
    switch (p->schedule) {
    case CLT_SCHED_CONSTANT: break;
    case CLT_SCHED_STEP:
        if (p->step_size <= 0)
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "step schedule: step_size must be > 0, got %ld", p->step_size);
        if (!(isfinite(p->gamma) && p->gamma > 0.0f))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "step schedule: gamma must be finite and > 0, got %g",
                             (double)p->gamma);
        break;
    case CLT_SCHED_COSINE:
        if (p->total_steps <= 0)
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "cosine schedule: total_steps must be > 0, got %ld", p->total_steps);
        if (!(p->min_lr >= 0.0f && p->min_lr <= p->lr))
            return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                             "cosine schedule: min_lr must be in [0, lr = %g], got %g",
                             (double)p->lr, (double)p->min_lr);
        break;
    default:
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "schedule: unknown kind %d", (int)p->schedule);
    }
    return CLT_OK;
}

clt_status clt_optim_validate(const struct clt_optim_params *p)
{
    CLT_ASSERT(p);
    return validate(NULL, p);
}

float clt_optim_lr_at(const struct clt_optim_params *p, long step)
{
    CLT_ASSERT(p && step >= 0);
    const double lr = p->lr;
    const long W = p->warmup_steps > 0 ? p->warmup_steps : 0;
    if (step < W) return (float)(lr * (double)(step + 1) / (double)W);
    const long s = step - W;
    switch (p->schedule) {
    case CLT_SCHED_STEP:
        CLT_ASSERT(p->step_size > 0);
        return (float)(lr * pow((double)p->gamma, (double)(s / p->step_size)));
    case CLT_SCHED_COSINE: {
        const long T = p->total_steps - W;
        if (T <= 0) return p->lr;
        const double min_lr = p->min_lr, frac = (double)(s < T ? s : T) / (double)T;
        return (float)(min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(M_PI * frac)));
    }
    default: return p->lr;
    }
}

/* Appends the shortest "%g" text that reads back as the same float, or null. */
static int put_float(char *dst, size_t n, float v)
{
    if (!isfinite(v)) return snprintf(dst, n, "null");
    char tmp[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
        if (strtof(tmp, NULL) == v) break;
    }
    return snprintf(dst, n, "%s", tmp);
}

char *clt_optim_describe(const struct clt_optim_params *p)
{
    CLT_ASSERT(p);
    enum { CAP = 1024 };
    char *s = malloc(CAP);
    if (!s) return NULL;
    size_t len = 0;
#define PUT(...) (len += (size_t)snprintf(s + len, CAP - len, __VA_ARGS__))
#define PUTF(v) (len += (size_t)put_float(s + len, CAP - len, (v)))
    PUT("{\"name\":\"%s\",\"lr\":", clt_optim_kind_name(p->kind));
    PUTF(p->lr);
    if (p->kind == CLT_OPTIM_SGD) {
        PUT(",\"momentum\":");
        PUTF(p->momentum);
        PUT(",\"dampening\":");
        PUTF(p->dampening);
        PUT(",\"nesterov\":%s", p->nesterov ? "true" : "false");
    } else {
        PUT(",\"betas\":[");
        PUTF(p->beta1);
        PUT(",");
        PUTF(p->beta2);
        PUT("],\"eps\":");
        PUTF(p->eps);
    }
    PUT(",\"weight_decay\":");
    PUTF(p->weight_decay);
    PUT(",\"schedule\":\"%s\",\"warmup_steps\":%ld,\"step_size\":%ld,\"gamma\":",
        clt_schedule_name(p->schedule), p->warmup_steps, p->step_size);
    PUTF(p->gamma);
    PUT(",\"total_steps\":%ld,\"min_lr\":", p->total_steps);
    PUTF(p->min_lr);
    if (p->clip_grad > 0.0f) {
        PUT(",\"clip_grad\":");
        PUTF(p->clip_grad);
    }
    PUT("}");
#undef PUT
#undef PUTF
    CLT_ASSERT(len < CAP); /* the fields above cannot need more */
    return s;
}

clt_status clt_optim_create(clt_optim **out, clt_tensor *params, const struct clt_optim_params *p)
{
    clt_status st = CLT_OK;
    clt_optim *o = NULL;
    CLT_ASSERT(out && params && p);
    *out = NULL;
    clt_ctx *ctx = clt_tensor_ctx(params);
    CLT_TRY(validate(ctx, p));
    if (clt_tensor_dtype(params) != CLT_DTYPE_F32)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: parameters must be f32 (master weights), got %s",
                 clt_optim_kind_name(p->kind), clt_dtype_name(clt_tensor_dtype(params)));
    CLT_ALLOC(ctx, o, 1);
    o->p = *p;
    o->params = params;
    o->nstate = p->kind != CLT_OPTIM_SGD ? 2 : p->momentum != 0.0f ? 1 : 0;
    int ndim = clt_tensor_ndim(params);
    size_t dims[CLT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) dims[i] = clt_tensor_dim(params, i);
    /* Born on the parameters' device: same ctx, zero-filled, ordered before the first step. */
    for (int i = 0; i < o->nstate; i++)
        CLT_TRY(clt_tensor_zeros(&o->state[i], ctx, CLT_DTYPE_F32, ndim, dims, CLT_MEM_OPTIM));
    const size_t n = clt_tensor_numel(params);
    size_t nd_bytes = update_items(n) * 2, gn = 2 + norm_groups(n);
    if (p->weight_decay > 0.0f) /* zero: every element decays */
        CLT_TRY(clt_tensor_zeros(&o->no_decay, ctx, CLT_DTYPE_U8, 1, &nd_bytes, CLT_MEM_OPTIM));
    if (p->clip_grad > 0.0f) /* zero: a norm of 0 until the first step */
        CLT_TRY(clt_tensor_zeros(&o->gnorm, ctx, CLT_DTYPE_F32, 1, &gn, CLT_MEM_OPTIM));
    *out = o;
    o = NULL;
fail:
    clt_optim_free(o);
    return st;
}

void clt_optim_free(clt_optim *o)
{
    if (!o) return;
    for (int i = 0; i < 2; i++) clt_tensor_free(o->state[i]);
    clt_tensor_free(o->no_decay);
    clt_tensor_free(o->gnorm);
    free(o);
}

long clt_optim_steps(const clt_optim *o)
{
    CLT_ASSERT(o);
    return o->steps;
}

void clt_optim_set_steps(clt_optim *o, long steps)
{
    CLT_ASSERT(o && steps >= 0);
    o->steps = steps;
}

int clt_optim_state_count(const clt_optim *o)
{
    CLT_ASSERT(o);
    return o->nstate;
}

clt_tensor *clt_optim_state(const clt_optim *o, int i, const char **name)
{
    CLT_ASSERT(o && i >= 0 && i < o->nstate);
    if (name)
        *name = o->p.kind == CLT_OPTIM_SGD ? "momentum_buffer" : i == 0 ? "exp_avg" : "exp_avg_sq";
    return o->state[i];
}

const struct clt_optim_params *clt_optim_get_params(const clt_optim *o)
{
    CLT_ASSERT(o);
    return &o->p;
}

clt_tensor *clt_optim_params_tensor(const clt_optim *o)
{
    CLT_ASSERT(o);
    return o->params;
}

clt_status clt_optim_set_copy(clt_optim *o, clt_tensor *copy)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(o);
    clt_ctx *ctx = clt_tensor_ctx(o->params);
    if (copy) {
        CLT_TRY(clt_tensor_same_ctx(o->params, copy));
        const clt_dtype d = clt_tensor_dtype(copy);
        if (d != CLT_DTYPE_F16 && d != CLT_DTYPE_BF16)
            CLT_FAIL(ctx, CLT_ERR_SHAPE,
                     "optimizer: the parameters' copy must be f16 or bf16, got %s",
                     clt_dtype_name(d));
        if (clt_tensor_numel(copy) != clt_tensor_numel(o->params))
            CLT_FAIL(ctx, CLT_ERR_SHAPE,
                     "optimizer: the parameters' copy has %zu elements, the parameters %zu",
                     clt_tensor_numel(copy), clt_tensor_numel(o->params));
    }
    o->copy = copy;
fail:
    return st;
}

clt_status clt_optim_set_no_decay(clt_optim *o, int n, const size_t *offset, const size_t *count)
{
    clt_status st = CLT_OK;
    uint16_t *bits = NULL;
    cl_event ev = NULL;
    CLT_ASSERT(o && n >= 0 && (n == 0 || (offset && count)));
    clt_ctx *ctx = clt_tensor_ctx(o->params);
    const size_t numel = clt_tensor_numel(o->params), items = update_items(numel);
    for (int r = 0; r < n; r++)
        if (offset[r] > numel || count[r] > numel - offset[r])
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                     "optimizer: no-decay range %d [%zu, %zu + %zu) is beyond the %zu "
                     "parameters", r, offset[r], offset[r], count[r], numel);
    if (!o->no_decay) goto fail; /* no weight decay: nothing to exempt from */
    CLT_ALLOC(ctx, bits, items ? items : 1);
    memset(bits, 0, items * sizeof *bits);
    for (int r = 0; r < n; r++)
        for (size_t i = offset[r]; i < offset[r] + count[r]; i++)
            bits[i / CLT__OPTIM_V] |= (uint16_t)(1u << (i % CLT__OPTIM_V));
    /* waited for here (the host array is freed on return), counted as setup */
    CLT_TRY(clt_tensor_write(o->no_decay, bits, false, &ev));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, 1, &ev));
fail:
    if (ev) clReleaseEvent(ev);
    free(bits);
    return st;
}

clt_status clt_optim_read_grad_norm(const clt_optim *o, float *norm, bool blocking,
                                    cl_event *done)
{
    CLT_ASSERT(o && norm);
    clt_tensor *first = NULL;
    if (!o->gnorm)
        return clt__fail(clt_tensor_ctx(o->params), CLT_ERR_INVALID_ARG,
                         "optimizer: no gradient norm without clipping (clip_grad 0)");
    size_t one = 1;
    clt_status st = clt_tensor_view(&first, o->gnorm, 0, 1, &one);
    if (st == CLT_OK) st = clt_tensor_read(first, norm, blocking, done);
    clt_tensor_free(first);
    return st;
}

/* Enqueues the two launches that write the global L2 norm of grads and the clip factor into
 * o->gnorm (cl/optim.cl: grad_norm_partial, grad_norm_finish). */
static clt_status grad_norm(clt_optim *o, const clt_tensor *grads)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(o->params);
    cl_kernel k;
    cl_mem gm = clt_tensor_mem(grads), nm = clt_tensor_mem(o->gnorm);
    cl_ulong go = clt_tensor_offset(grads), n = clt_tensor_numel(grads);
    cl_ulong groups = norm_groups((size_t)n);
    float max_norm = o->p.clip_grad;
    CLT_TRY(clt__optim_kernel(ctx, CLT__OPTIM_GRAD_NORM_PARTIAL, CLT_DTYPE_F32, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(gm), CLT__ARG(go), CLT__ARG(n), CLT__ARG(nm)));
    size_t wg = clt__local_size(ctx, k);
    CLT_TRY(clt__enqueue(ctx, k, (size_t)groups * wg, wg, "grad norm"));
    CLT_TRY(clt__optim_kernel(ctx, CLT__OPTIM_GRAD_NORM_FINISH, CLT_DTYPE_F32, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(nm), CLT__ARG(groups), CLT__ARG(max_norm)));
    wg = clt__local_size(ctx, k);
    CLT_TRY(clt__enqueue(ctx, k, wg, wg, "grad norm"));
fail:
    return st;
}

/* Sets the arguments every update kernel starts with: the parameters, the gradients and each
 * state tensor as (buffer, offset), then the element count; *next is the index after them,
 * where the kernel's hyper-parameters begin. */
static clt_status set_tensor_args(clt_ctx *ctx, cl_kernel k, const clt_optim *o,
                                  const clt_tensor *grads, cl_uint *next)
{
    clt_status st = CLT_OK;
    cl_mem pm = clt_tensor_mem(o->params), gm = clt_tensor_mem(grads);
    cl_ulong po = clt_tensor_offset(o->params), go = clt_tensor_offset(grads);
    cl_ulong n = clt_tensor_numel(o->params);
    cl_uint i = 4;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(pm), CLT__ARG(po), CLT__ARG(gm), CLT__ARG(go)));
    for (int s = 0; s < o->nstate; s++, i += 2) {
        cl_mem sm = clt_tensor_mem(o->state[s]);
        cl_ulong so = clt_tensor_offset(o->state[s]);
        CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(sm), CLT__ARG(so)));
    }
    CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(n)));
    *next = i + 1;
fail:
    return st;
}

/* One step; with `amp` (a scaler's state) the *_amp kernels, which skip on found_inf. */
static clt_status step(clt_optim *o, const clt_tensor *grads, const clt_tensor *amp)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(o && grads);
    cl_mem am = amp ? clt_tensor_mem(amp) : NULL;
    const cl_long steps_l = o->steps;
    const struct clt_optim_params *p = &o->p;
    clt_ctx *ctx = clt_tensor_ctx(o->params);
    cl_kernel k;
    cl_uint i, end; /* the first hyper-parameter's index, and the index after the last */
    const clt_dtype copy = o->copy ? clt_tensor_dtype(o->copy) : CLT_DTYPE_F32;
    const char *what = p->kind == CLT_OPTIM_SGD ? "sgd step" : "adam step";
    CLT_TRY(clt__check_pair(o->params, grads, true, what));

    const size_t n = clt_tensor_numel(o->params);
    const double lr = clt_optim_lr_at(p, o->steps);
    const float lr_f = (float)lr, wd = p->weight_decay;

    if (p->kind == CLT_OPTIM_SGD && o->nstate == 0) {
        CLT_TRY(clt__optim_kernel(ctx, amp ? CLT__OPTIM_SGD_AMP : CLT__OPTIM_SGD, copy, &k));
        CLT_TRY(set_tensor_args(ctx, k, o, grads, &i));
        CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(lr_f), CLT__ARG(wd)));
        if (amp) CLT_TRY(CLT__ARGS_AT(ctx, k, i + 2, CLT__ARG(am)));
        end = i + (amp ? 3 : 2);
    } else if (p->kind == CLT_OPTIM_SGD) {
        const float mom = p->momentum, one_minus_damp = (float)(1.0 - (double)p->dampening);
        const cl_int nesterov = p->nesterov, first = o->steps == 0;
        CLT_TRY(clt__optim_kernel(ctx, amp ? CLT__OPTIM_SGD_MOMENTUM_AMP : CLT__OPTIM_SGD_MOMENTUM,
                                  copy, &k));
        CLT_TRY(set_tensor_args(ctx, k, o, grads, &i));
        CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(lr_f), CLT__ARG(wd), CLT__ARG(mom),
                             CLT__ARG(one_minus_damp), CLT__ARG(nesterov)));
        if (amp) CLT_TRY(CLT__ARGS_AT(ctx, k, i + 5, CLT__ARG(steps_l), CLT__ARG(am)));
        else CLT_TRY(CLT__ARGS_AT(ctx, k, i + 5, CLT__ARG(first)));
        end = i + (amp ? 7 : 6);
    } else if (amp) {
        const bool adamw = p->kind == CLT_OPTIM_ADAMW;
        const float log_b1 = p->beta1 > 0 ? (float)log((double)p->beta1) : -INFINITY,
                    log_b2 = p->beta2 > 0 ? (float)log((double)p->beta2) : -INFINITY;
        const float one_minus_b1 = (float)(1.0 - p->beta1), beta2 = p->beta2,
                    one_minus_b2 = (float)(1.0 - p->beta2), eps = p->eps;
        const float l2 = adamw ? 0.0f : wd;
        const float decay = adamw ? (float)(1.0 - lr * (double)wd) : 1.0f;
        CLT_TRY(clt__optim_kernel(ctx, CLT__OPTIM_ADAM_AMP_PREPARE, CLT_DTYPE_F32, &k));
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(am), CLT__ARG(lr_f), CLT__ARG(log_b1),
                          CLT__ARG(log_b2), CLT__ARG(steps_l)));
        CLT_TRY(clt__launch_1d(ctx, k, 1, "adam prepare"));
        CLT_TRY(clt__optim_kernel(ctx, CLT__OPTIM_ADAM_AMP, copy, &k));
        CLT_TRY(set_tensor_args(ctx, k, o, grads, &i));
        CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(one_minus_b1), CLT__ARG(beta2),
                             CLT__ARG(one_minus_b2), CLT__ARG(eps), CLT__ARG(l2),
                             CLT__ARG(decay), CLT__ARG(am)));
        end = i + 7;
    } else {
        const double t = (double)o->steps + 1.0, b1 = p->beta1, b2 = p->beta2;
        const bool adamw = p->kind == CLT_OPTIM_ADAMW;
        const float step_size = (float)(lr / (1.0 - pow(b1, t)));
        const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
        const float one_minus_b1 = (float)(1.0 - b1), beta2 = p->beta2,
                    one_minus_b2 = (float)(1.0 - b2), eps = p->eps;
        const float l2 = adamw ? 0.0f : wd;
        const float decay = adamw ? (float)(1.0 - lr * (double)wd) : 1.0f;
        CLT_TRY(clt__optim_kernel(ctx, CLT__OPTIM_ADAM, copy, &k));
        CLT_TRY(set_tensor_args(ctx, k, o, grads, &i));
        CLT_TRY(CLT__ARGS_AT(ctx, k, i, CLT__ARG(step_size), CLT__ARG(bc2_sqrt),
                             CLT__ARG(one_minus_b1), CLT__ARG(beta2), CLT__ARG(one_minus_b2),
                             CLT__ARG(eps), CLT__ARG(l2), CLT__ARG(decay)));
        end = i + 8;
    }
    { /* cl/optim.cl's OPTIM_EXTRA_ARGS, after the kernel's own; NULL when unused */
        cl_mem ndm = o->no_decay ? clt_tensor_mem(o->no_decay) : NULL;
        cl_mem gnm = o->gnorm ? clt_tensor_mem(o->gnorm) : NULL;
        CLT_TRY(CLT__ARGS_AT(ctx, k, end, CLT__ARG(ndm), CLT__ARG(gnm)));
        end += 2;
    }
    if (o->copy) { /* cl/optim.cl's OPTIM_COPY_ARGS, after those */
        cl_mem cm = clt_tensor_mem(o->copy);
        cl_ulong co = clt_tensor_offset(o->copy);
        CLT_TRY(CLT__ARGS_AT(ctx, k, end, CLT__ARG(cm), CLT__ARG(co)));
    }
    if (o->gnorm) CLT_TRY(grad_norm(o, grads)); /* before the update that reads it */
    CLT_TRY(clt__launch_1d(ctx, k, update_items(n), what));
    o->steps++;
fail:
    return st;
}

clt_status clt_optim_step(clt_optim *o, const clt_tensor *grads)
{
    return step(o, grads, NULL);
}

/* ---- dynamic loss scaling ------------------------------------------------------------------ */
struct clt_scaler {
    struct clt_scaler_params p;
    clt_tensor *state; /* (CLT_AMP_STATE_LEN) i32, laid out as ops/ops_internal.h says */
};
/* optim.h publishes the length of the raw state without its layout. */
_Static_assert(CLT_SCALER_STATE_LEN == CLT_AMP_STATE_LEN, "the scaler's state is the AMP state");

struct clt_scaler_params clt_scaler_default_params(void)
{
    struct clt_scaler_params p = {
        .init_scale = 65536.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
        .growth_interval = 2000};
    return p;
}

clt_status clt_scaler_create(clt_scaler **out, clt_ctx *ctx, const struct clt_scaler_params *p)
{
    clt_status st = CLT_OK;
    clt_scaler *s = NULL;
    CLT_ASSERT(out && ctx);
    *out = NULL;
    struct clt_scaler_params q = p ? *p : clt_scaler_default_params();
    if (!(q.init_scale > 0.0f) || !isfinite(q.init_scale) || !(q.growth_factor >= 1.0f) ||
        !isfinite(q.growth_factor) || !(q.backoff_factor > 0.0f && q.backoff_factor <= 1.0f) ||
        q.growth_interval < 1)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "loss scaler: init_scale %g must be finite and > 0, growth_factor %g >= 1, "
                 "backoff_factor %g in (0, 1], growth_interval %d >= 1",
                 (double)q.init_scale, (double)q.growth_factor, (double)q.backoff_factor,
                 q.growth_interval);
    CLT_ALLOC(ctx, s, 1);
    s->p = q;
    size_t len = CLT_AMP_STATE_LEN;
    CLT_TRY(clt_tensor_create(&s->state, ctx, CLT_DTYPE_I32, 1, &len, CLT_MEM_OPTIM));
    int32_t init[CLT_AMP_STATE_LEN] = {0};
    memcpy(&init[0], &q.init_scale, sizeof init[0]);
    CLT_TRY(clt_tensor_write(s->state, init, true, NULL));
    *out = s;
    s = NULL;
fail:
    clt_scaler_free(s);
    return st;
}

void clt_scaler_free(clt_scaler *s)
{
    if (!s) return;
    clt_tensor_free(s->state);
    free(s);
}

const struct clt_scaler_params *clt_scaler_get_params(const clt_scaler *s)
{
    CLT_ASSERT(s);
    return &s->p;
}

clt_tensor *clt_scaler_state(const clt_scaler *s)
{
    CLT_ASSERT(s);
    return s->state;
}

clt_status clt_scaler_scale(clt_scaler *s, clt_tensor *dloss)
{
    CLT_ASSERT(s && dloss);
    return clt_op_amp_scale(dloss, s->state);
}

clt_status clt_optim_step_scaled(clt_optim *o, const clt_tensor *grads, clt_scaler *s)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(o && grads);
    if (!s) return step(o, grads, NULL);
    CLT_TRY(clt__check_pair(o->params, grads, true, "scaled step"));
    CLT_TRY(clt_tensor_same_ctx(o->params, s->state));
    CLT_TRY(clt_op_amp_unscale((clt_tensor *)grads, s->state));
    CLT_TRY(step(o, grads, s->state));
    CLT_TRY(clt_op_amp_update(s->state, s->p.growth_factor, s->p.backoff_factor,
                              s->p.growth_interval));
fail:
    return st;
}

clt_status clt_scaler_read(const clt_scaler *s, int32_t *raw, bool blocking, cl_event *done)
{
    CLT_ASSERT(s && raw);
    return clt_tensor_read(s->state, raw, blocking, done);
}

struct clt_scaler_values clt_scaler_decode(const int32_t *raw)
{
    struct clt_scaler_values v;
    memcpy(&v.scale, &raw[0], sizeof v.scale);
    v.found_inf = raw[1] != 0;
    v.tracker = raw[2];
    v.skipped = raw[3];
    return v;
}
