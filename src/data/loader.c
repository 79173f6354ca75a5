/* Batches onto the device: a split resident on the device (gathered by a kernel), and the
 * streaming loader (a host thread fills a ring of pinned staging buffers and uploads them
 * non-blocking on the transfer queue; the compute queue waits for the uploads' events). Both
 * convert and standardise with the gather_rows kernel, so both give the same bits.
 *
 * The ring, per staging slot i (batches i, i + P, i + 2P, ... with P = prefetch):
 *   loader thread: waits (host condition) until batch k - P has been consumed, i.e. the
 *     training thread has enqueued the kernels reading slot i and a marker after them; waits
 *     for slot i's previous upload to complete (a counted loader wait) before overwriting its
 *     host memory; assembles batch k; enqueues the uploads with the consumer's marker in their
 *     wait list (the device buffer is overwritten only after it has been read); publishes.
 *   training thread: waits (host condition, the "stall") until batch k is published; enqueues
 *     a barrier on its upload events, the conversion into the batch buffers and a marker; hands
 *     the marker to the slot. It never waits for the device here.
 * Every wait list holds events of commands already enqueued and flushed, so nothing the loader
 * enqueues can wait forever: on an error or a stop the thread just stops producing. Only the
 * training thread launches kernels (clSetKernelArg is not thread-safe) or touches the ctx's
 * counters and message; the thread reports through its own fields under the mutex.
 * On Oclgrind, whose runtime is not thread-safe (its queues and event maps have no locks, and
 * clFlush executes commands on the calling thread), there is no thread: clt_loader_next
 * produces the batches up to P - 1 ahead itself, in the same ring with the same events, before
 * taking its batch (evidence in tests/data/test_loader.c). */
#include "cltrain/loader.h"

#include "runtime/internal.h"
#include "runtime/profile_internal.h"

#include "cltrain/alloc.h"
#include "ops/ops_internal.h"
#include "runtime/rng_internal.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define PERM_PENDING 8 /* resident: epochs' orders in flight before the loader waits */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-feature scale and shift on the device: fma(x, scale, shift) = (x * s - mean) / std. The
 * host arrays are returned for the caller to free once the uploads (events appended to ev)
 * have completed. */
static clt_status norm_upload(clt_ctx *ctx, size_t F, const struct clt_input_norm *norm,
                              clt_tensor **scale, clt_tensor **shift, float **hs, float **hh,
                              cl_event *ev, cl_uint *nev)
{
    clt_status st = CLT_OK;
    CLT_TRY(clt_tensor_create(scale, ctx, CLT_DTYPE_F32, 1, &F, CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(shift, ctx, CLT_DTYPE_F32, 1, &F, CLT_MEM_DATA));
    CLT_ALLOC(ctx, *hs, F);
    CLT_ALLOC(ctx, *hh, F);
    for (size_t f = 0; f < F; f++) {
        double sd = norm->std ? norm->std[f] : 1.0, mean = norm->mean ? norm->mean[f] : 0.0;
        (*hs)[f] = (float)(norm->scale / sd);
        (*hh)[f] = (float)(-mean / sd);
    }
    CLT_TRY(clt_tensor_write(*scale, *hs, false, &ev[(*nev)++]));
    CLT_TRY(clt_tensor_write(*shift, *hh, false, &ev[(*nev)++]));
fail:
    return st;
}

/* answers: the split must have labels or targets (training needs them; a resident split for
 * prediction does not) */
static clt_status check_set(clt_ctx *ctx, const clt_dataset *d, const struct clt_input_norm *norm,
                            bool answers)
{
    if (d->n == 0 || d->features == 0 || (!d->u8 && !d->f32))
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: the data set is empty", d->source);
    if (answers && !d->labels && !d->targets)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "%s: the data set has no labels or targets; training needs them",
                         d->source);
    if (norm->features != d->features)
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: %zu features, but the model expects %zu",
                         d->source, d->features, norm->features);
    if (d->n > (size_t)INT32_MAX)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: more than 2^31 samples", d->source);
    return CLT_OK;
}

/* ---- resident splits ---------------------------------------------------------------------- */

struct clt_resident {
    clt_ctx *ctx;
    size_t n, features;
    clt_tensor *x;             /* (n, F) u8 or f32 as stored */
    clt_tensor *y;             /* (n) i32 labels or f32 targets; NULL for a split without */
    clt_tensor *scale, *shift; /* (F) f32 */
    clt_tensor *order;         /* (n) i32: 0 .. n-1, for file order */
};

size_t clt_resident_count(const clt_resident *r) { return r->n; }
size_t clt_resident_features(const clt_resident *r) { return r->features; }
clt_ctx *clt_resident_ctx(const clt_resident *r) { return r->ctx; }
const clt_tensor *clt_resident_labels(const clt_resident *r) { return r->y; }

clt_status clt_resident_create(clt_resident **out, clt_ctx *ctx, const clt_dataset *d,
                               const struct clt_input_norm *norm)
{
    clt_status st = CLT_OK;
    clt_resident *r = NULL;
    float *scale = NULL, *shift = NULL;
    int32_t *order = NULL;
    cl_event ev[5] = {0};
    cl_uint nev = 0;
    *out = NULL;
    CLT_TRY(check_set(ctx, d, norm, false));
    CLT_ALLOC(ctx, r, 1);
    r->ctx = ctx;
    r->n = d->n;
    r->features = d->features;
    size_t xdims[2] = {d->n, d->features}, n = d->n;
    CLT_TRY(clt_tensor_create(&r->x, ctx, d->u8 ? CLT_DTYPE_U8 : CLT_DTYPE_F32, 2, xdims,
                              CLT_MEM_DATA));
    if (d->labels || d->targets)
        CLT_TRY(clt_tensor_create(&r->y, ctx, d->labels ? CLT_DTYPE_I32 : CLT_DTYPE_F32, 1, &n,
                                  CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(&r->order, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_DATA));
    CLT_ALLOC(ctx, order, n);
    for (size_t i = 0; i < n; i++) order[i] = (int32_t)i;
    CLT_TRY(clt_tensor_write(r->x, d->u8 ? (const void *)d->u8 : (const void *)d->f32, false,
                             &ev[nev++]));
    if (r->y)
        CLT_TRY(clt_tensor_write(r->y,
                                 d->labels ? (const void *)d->labels : (const void *)d->targets,
                                 false, &ev[nev++]));
    CLT_TRY(clt_tensor_write(r->order, order, false, &ev[nev++]));
    CLT_TRY(norm_upload(ctx, d->features, norm, &r->scale, &r->shift, &scale, &shift, ev, &nev));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, nev, ev));
    *out = r;
    r = NULL;
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (r && nev) clt_ctx_finish(ctx, CLT_WAIT_SETUP); /* host arrays go: uploads must be done */
    free(scale);
    free(shift);
    free(order);
    clt_resident_free(r);
    return st;
}

void clt_resident_free(clt_resident *r)
{
    if (!r) return;
    clt_tensor_free(r->x);
    clt_tensor_free(r->y);
    clt_tensor_free(r->scale);
    clt_tensor_free(r->shift);
    clt_tensor_free(r->order);
    free(r);
}

clt_status clt_resident_gather(clt_resident *r, const clt_tensor *order, size_t start, size_t B,
                               clt_tensor *x, clt_tensor *y)
{
    clt_status st = CLT_OK;
    clt_tensor *idx = NULL;
    CLT_TRY(clt_tensor_view(&idx, order ? order : r->order, start, 1, &B));
    CLT_TRY(clt_op_gather_rows(x, r->x, idx, r->scale, r->shift));
    if (y && !r->y)
        CLT_FAIL(r->ctx, CLT_ERR_INVALID_ARG, "the resident split has no labels or targets");
    if (y) CLT_TRY(clt_op_gather(y, r->y, idx));
fail:
    clt_tensor_free(idx);
    return st;
}

/* ---- the loader --------------------------------------------------------------------------- */

struct slot {
    clt_pinned *pin;   /* pinned staging, or */
    void *heap;        /* pageable staging (--no-pin) */
    unsigned char *hx; /* (max_batch, F) raw inputs, as stored */
    unsigned char *hy; /* (max_batch) 4-byte labels or targets */
    clt_tensor *dx;    /* device copies of the same */
    clt_tensor *dy;
    /* Shared with the thread, under the mutex while it runs. */
    cl_event up_x, up_y; /* the last uploads into this slot */
    cl_event consumed;   /* marker after the kernels that read the slot's last batch */
    size_t B;            /* the published batch */
    long step;
    size_t bytes_x, bytes_y; /* of the last uploads (thread-private) */
};

struct clt_loader {
    clt_ctx *ctx;
    const clt_dataset *d;
    clt_loader_mode mode;
    char why[384];
    size_t n, F, mb, xes;
    clt_dtype ydt;
    long fail_at;
    bool pinned, profiling;
    /* the input scaling the batches go through, kept so that a trainer can store it in its
     * checkpoints without the caller repeating it (mean, std: copies owned here, or NULL) */
    struct clt_input_norm norm;
    float *norm_mean, *norm_std;
    clt_tensor *xout, *yout; /* (max_batch, F) f32, (max_batch): the batch handed out */
    clt_tensor *bx, *by;     /* views of the current batch (bx: as assembled) */
    /* augmentation: the batch is assembled into xpre (max_batch, F) f32 and augmented from
     * there into xout (the kernel works out of place); bout is the view handed out */
    bool augment;
    struct clt_augment_geom ageom;
    clt_tensor *xpre, *bout;

    /* resident */
    clt_resident *res;
    clt_tensor *perm; /* (n) i32: this epoch's order */
    long perm_epoch;
    /* host copies of the orders whose uploads may not have completed: freed once they have
     * (checked without waiting at each epoch's start) */
    struct {
        int32_t *host;
        cl_event ev;
    } pending[PERM_PENDING];
    int npending;

    /* streaming */
    clt_tensor *scale, *shift, *iota; /* (F), (F), (max_batch) 0 .. max_batch - 1 */
    int nslots;
    struct slot *slots;
    uint32_t *tperm; /* the thread's order of the current epoch */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_init, thread_running;
    /* false where the OpenCL runtime is not thread-safe (Oclgrind): the training thread
     * produces the batches itself, in clt_loader_next, with the same ring and events */
    bool own_thread;
    long inline_epoch; /* the epoch of tperm when produced inline */

    /* the run (set by clt_loader_start before the thread starts) */
    bool started;
    struct clt_loader_order o;
    long spe, count, next_index;
    /* shared with the thread, under mu */
    long produced, consumed_n;
    bool stop;
    clt_status err;
    char errmsg[1024];
    struct clt_loader_stats stats; /* waits: see below */
    atomic_long waits;
};

const char *clt_loader_mode_name(clt_loader_mode m)
{
    switch (m) {
    case CLT_LOADER_AUTO: return "auto";
    case CLT_LOADER_RESIDENT: return "resident";
    case CLT_LOADER_STREAMING: return "streaming";
    }
    return "unknown";
}

clt_status clt_loader_mode_parse(const char *s, clt_loader_mode *out)
{
    static const struct {
        const char *name;
        clt_loader_mode m;
    } names[] = {{"auto", CLT_LOADER_AUTO},           {"resident", CLT_LOADER_RESIDENT},
                 {"yes", CLT_LOADER_RESIDENT},        {"device", CLT_LOADER_RESIDENT},
                 {"streaming", CLT_LOADER_STREAMING}, {"stream", CLT_LOADER_STREAMING},
                 {"no", CLT_LOADER_STREAMING},        {"host", CLT_LOADER_STREAMING}};
    for (size_t i = 0; s && i < sizeof names / sizeof *names; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].m;
            return CLT_OK;
        }
    return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                     "unknown loader \"%s\"; expected auto, resident (yes) or streaming (no)",
                     s ? s : "");
}

struct clt_loader_params clt_loader_default_params(void)
{
    struct clt_loader_params p = {
        .mode = CLT_LOADER_AUTO,
        .batch_size = 128,
        .prefetch = 3,
        .pinned = true,
        .resident_fraction = 0.25,
        .fail_at = -1,
    };
    return p;
}

/* ---- augmentation ------------------------------------------------------------------------ */

bool clt_augment_enabled(const struct clt_augment *a)
{
    return a && (a->flip || a->shift != 0 || a->cutout != 0);
}

static clt_status augment_error(const char *text, const char *fmt, const char *a, const char *b)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b);
    return clt__fail(NULL, CLT_ERR_INVALID_ARG, "--augment \"%s\": %s", text, msg);
}

clt_status clt_augment_parse(const char *text, struct clt_augment *out)
{
    static const char expected[] = "expected flip, shift=N or cutout=S, comma-separated%s%s";
    struct clt_augment a = {0};
    bool seen[3] = {false, false, false};
    const char *t = text ? text : "", *p = t;
    if (!*t) return augment_error(t, expected, "", "");
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[48];
        if (len == 0) return augment_error(t, "an empty item; %s", "expected flip, shift=N or "
                                           "cutout=S, comma-separated", "");
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
        char *eq = strchr(item, '=');
        if (eq) *eq = '\0';
        int which = strcmp(item, "flip") == 0     ? 0
                    : strcmp(item, "shift") == 0  ? 1
                    : strcmp(item, "cutout") == 0 ? 2
                                                  : -1;
        if (which < 0 || len >= sizeof item)
            return augment_error(t, "unknown augmentation \"%s\"; expected flip, shift=N or "
                                 "cutout=S", item, "");
        if (seen[which]) return augment_error(t, "%s is given twice", item, "");
        seen[which] = true;
        if (which == 0) {
            if (eq) return augment_error(t, "flip takes no value", "", "");
            a.flip = true;
        } else {
            int64_t v = 0;
            if (!eq || !clt__parse_i64(eq + 1, INT64_MIN, INT64_MAX, &v))
                return augment_error(t, "%s needs a whole number of pixels, e.g. %s=2", item, item);
            if (v < 0 || v > CLT_AUGMENT_MAX) {
                char range[64];
                snprintf(range, sizeof range, "%s=%s", item, eq + 1);
                return augment_error(t, "%s: expected 0 to 65536 pixels", range, "");
            }
            if (which == 1) a.shift = (int)v;
            else a.cutout = (int)v;
        }
        if (!end) break;
        p = end + 1;
    }
    *out = a;
    return CLT_OK;
}

long clt_loader_steps_per_epoch(size_t n, size_t batch_size, bool drop_last)
{
    if (batch_size == 0) return 0;
    return (long)(drop_last ? n / batch_size : (n + batch_size - 1) / batch_size);
}

clt_ctx *clt_loader_ctx(const clt_loader *l) { return l->ctx; }
clt_loader_mode clt_loader_mode_of(const clt_loader *l) { return l->mode; }
const char *clt_loader_describe(const clt_loader *l) { return l->why; }
size_t clt_loader_count(const clt_loader *l) { return l->n; }
size_t clt_loader_features(const clt_loader *l) { return l->F; }
size_t clt_loader_max_batch(const clt_loader *l) { return l->mb; }
clt_dtype clt_loader_label_dtype(const clt_loader *l) { return l->ydt; }
struct clt_input_norm clt_loader_norm(const clt_loader *l) { return l->norm; }

/* Keeps a copy of the caller's scaling (its arrays need not outlive the call). */
static clt_status keep_norm(clt_loader *l, const struct clt_input_norm *norm)
{
    clt_status st = CLT_OK;
    l->norm = *norm;
    if (norm->mean) {
        CLT_ALLOC(l->ctx, l->norm_mean, norm->features);
        memcpy(l->norm_mean, norm->mean, norm->features * sizeof *l->norm_mean);
    }
    if (norm->std) {
        CLT_ALLOC(l->ctx, l->norm_std, norm->features);
        memcpy(l->norm_std, norm->std, norm->features * sizeof *l->norm_std);
    }
    l->norm.mean = l->norm_mean;
    l->norm.std = l->norm_std;
fail:
    return st;
}

struct clt_augment clt_loader_augment(const clt_loader *l)
{
    struct clt_augment a = {0};
    if (l->augment)
        a = (struct clt_augment){.flip = l->ageom.flip != 0, .shift = l->ageom.shift,
                                 .cutout = l->ageom.cutout};
    return a;
}

/* The order of epoch e: a permutation from the seed, or file order. */
static void epoch_order(const struct clt_loader_order *o, long epoch, uint32_t *perm, size_t n)
{
    if (o->shuffle)
        clt_rng_permutation(o->seed, clt_rng_stream(CLT_RNG_SHUFFLE, (uint64_t)epoch), perm, n);
    else
        for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
}

/* Global step g -> epoch, first sample of the batch (this replica's slice of it) in the
 * epoch's order, its size. */
static void locate(const clt_loader *l, long g, long *epoch, size_t *start, size_t *B)
{
    size_t bs = l->o.batch_size;
    *epoch = g / l->spe;
    *start = (size_t)(g % l->spe) * bs;
    *B = l->n - *start < bs ? l->n - *start : bs;
    if (l->o.shard_total) {
        size_t lo = clt__slice_boundary(*B, l->o.shard_lo, l->o.shard_total),
               hi = clt__slice_boundary(*B, l->o.shard_hi, l->o.shard_total);
        *start += lo;
        *B = hi - lo;
    }
}

/* Auto: resident when inputs as stored and labels fit in resident_fraction of the cap. */
static bool resident_fits(const clt_ctx *ctx, size_t n, size_t F, size_t xes,
                          const struct clt_loader_params *p, uint64_t *bytes)
{
    struct clt_mem_stats ms = clt_ctx_mem_stats(ctx);
    *bytes = (uint64_t)n * F * xes + (uint64_t)n * 4;
    return (double)*bytes <= p->resident_fraction * (double)ms.cap;
}

static void choose_mode(clt_loader *l, const struct clt_loader_params *p)
{
    struct clt_mem_stats ms = clt_ctx_mem_stats(l->ctx);
    uint64_t bytes = 0;
    bool fits = resident_fits(l->ctx, l->n, l->F, l->xes, p, &bytes);
    char size[32], cap[32], how[128], reason[192];
    clt_format_bytes(bytes, size, sizeof size);
    clt_format_bytes(ms.cap, cap, sizeof cap);
    if (p->mode == CLT_LOADER_AUTO) {
        l->mode = fits ? CLT_LOADER_RESIDENT : CLT_LOADER_STREAMING;
        snprintf(reason, sizeof reason, "auto: %s %s %g%% of the %s %s", size,
                 fits ? "is within" : "exceeds", 100.0 * p->resident_fraction, cap,
                 ms.cap_from_user ? "memory cap" : "of device memory");
    } else {
        l->mode = p->mode;
        snprintf(reason, sizeof reason, "requested; %s", size);
    }
    if (l->mode == CLT_LOADER_RESIDENT)
        snprintf(how, sizeof how, "data resident on the device");
    else
        snprintf(how, sizeof how, "data streamed through %d %s staging buffers%s", p->prefetch,
                 p->pinned ? "pinned" : "pageable",
                 l->own_thread
                     ? ""
                     : ", filled on the training thread (the runtime is not thread-safe)");
    snprintf(l->why, sizeof l->why, "%s (%s)", how, reason);
}

/* ---- memory estimates (mirror the allocations of the create functions) --------------------- */

static void est_add(uint64_t *by_category, clt_mem_category c, uint64_t bytes)
{
    by_category[c] += bytes ? bytes : 4; /* as clt__buffer_alloc: no empty buffers */
}

void clt_resident_mem_estimate(const clt_dataset *d, uint64_t *by_category)
{
    uint64_t n = d->n, F = d->features;
    est_add(by_category, CLT_MEM_DATA, n * F * (d->u8 ? 1 : 4)); /* x */
    if (d->labels || d->targets) est_add(by_category, CLT_MEM_DATA, n * 4); /* y */
    est_add(by_category, CLT_MEM_DATA, n * 4);                                /* order */
    est_add(by_category, CLT_MEM_DATA, F * 4);                   /* scale */
    est_add(by_category, CLT_MEM_DATA, F * 4);                   /* shift */
}

void clt_loader_mem_estimate(const clt_ctx *ctx, const clt_dataset *d,
                             const struct clt_loader_params *p, uint64_t *by_category)
{
    uint64_t mb = p->batch_size, F = d->features, xes = d->u8 ? 1 : 4, bytes = 0;
    clt_loader_mode mode = p->mode;
    if (mode == CLT_LOADER_AUTO)
        mode = resident_fits(ctx, d->n, d->features, xes, p, &bytes) ? CLT_LOADER_RESIDENT
                                                                      : CLT_LOADER_STREAMING;
    est_add(by_category, CLT_MEM_ACTIVATIONS, mb * F * 4); /* xout */
    est_add(by_category, CLT_MEM_ACTIVATIONS, mb * 4);     /* yout */
    if (clt_augment_enabled(&p->augment))
        est_add(by_category, CLT_MEM_ACTIVATIONS, mb * F * 4); /* xpre */
    if (mode == CLT_LOADER_RESIDENT) {
        clt_resident_mem_estimate(d, by_category);
        est_add(by_category, CLT_MEM_STAGING, (uint64_t)d->n * 4); /* perm */
        return;
    }
    est_add(by_category, CLT_MEM_DATA, F * 4);     /* scale */
    est_add(by_category, CLT_MEM_DATA, F * 4);     /* shift */
    est_add(by_category, CLT_MEM_STAGING, mb * 4); /* iota */
    uint64_t xbytes = mb * F * xes, xpad = (xbytes + 63) / 64 * 64;
    for (int i = 0; i < p->prefetch; i++) {
        if (p->pinned) est_add(by_category, CLT_MEM_STAGING, xpad + mb * 4);
        est_add(by_category, CLT_MEM_STAGING, xbytes); /* dx */
        est_add(by_category, CLT_MEM_STAGING, mb * 4); /* dy */
    }
}

static clt_status create_streaming(clt_loader *l, const struct clt_input_norm *norm)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = l->ctx;
    float *hs = NULL, *hh = NULL;
    int32_t *iota = NULL;
    cl_event ev[3] = {0};
    cl_uint nev = 0;
    size_t xbytes = l->mb * l->F * l->xes, xpad = (xbytes + 63) / 64 * 64, ybytes = l->mb * 4;
    size_t xd[2] = {l->mb, l->F};
    CLT_TRY(norm_upload(ctx, l->F, norm, &l->scale, &l->shift, &hs, &hh, ev, &nev));
    CLT_TRY(clt_tensor_create(&l->iota, ctx, CLT_DTYPE_I32, 1, &l->mb, CLT_MEM_STAGING));
    CLT_ALLOC(ctx, iota, l->mb);
    for (size_t i = 0; i < l->mb; i++) iota[i] = (int32_t)i;
    CLT_TRY(clt_tensor_write(l->iota, iota, false, &ev[nev++]));
    CLT_ALLOC(ctx, l->tperm, l->n);
    CLT_ALLOC(ctx, l->slots, l->nslots);
    for (int i = 0; i < l->nslots; i++) {
        struct slot *s = &l->slots[i];
        unsigned char *base;
        if (l->pinned) {
            CLT_TRY(clt_pinned_create(&s->pin, ctx, xpad + ybytes));
            base = clt_pinned_ptr(s->pin);
        } else {
            CLT_ALLOC(ctx, base, xpad + ybytes);
            s->heap = base;
        }
        s->hx = base;
        s->hy = base + xpad;
        CLT_TRY(clt_tensor_create(&s->dx, ctx, l->xes == 1 ? CLT_DTYPE_U8 : CLT_DTYPE_F32, 2, xd,
                                  CLT_MEM_STAGING));
        CLT_TRY(clt_tensor_create(&s->dy, ctx, l->ydt, 1, &l->mb, CLT_MEM_STAGING));
    }
    /* A new buffer is zero-filled on the compute queue (clt__buffer_alloc), while a slot's
     * uploads go on the transfer queue: without an event between them, the fill may run after
     * the slot's first upload and zero that batch (seen on Oclgrind every time, on PoCL about
     * one fresh loader in 20; tests/data/test_loader.c test_first_batches). A marker after the
     * fills stands in for each slot's "consumed" event until its first batch has been read. */
    cl_event fills = NULL;
    cl_command_queue cq = clt_ctx_compute_queue(ctx);
    CLT_CHECK_CL(ctx, clEnqueueMarkerWithWaitList(cq, 0, NULL, &fills),
                 "marker after the staging buffers' fills");
    for (int i = 0; i < l->nslots; i++) {
        if (i > 0) clRetainEvent(fills);
        l->slots[i].consumed = fills; /* each slot owns one reference */
    }
    CLT_CHECK_CL(ctx, clFlush(cq), "clFlush"); /* the uploads will wait for the marker */
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        CLT_FAIL(ctx, CLT_ERR_UNSUPPORTED, "pthread_mutex_init failed");
    if (pthread_cond_init(&l->cv, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        CLT_FAIL(ctx, CLT_ERR_UNSUPPORTED, "pthread_cond_init failed");
    }
    l->sync_init = true;
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, nev, ev));
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (st != CLT_OK && nev) clt_ctx_finish(ctx, CLT_WAIT_SETUP);
    free(hs);
    free(hh);
    free(iota);
    return st;
}

clt_status clt_loader_create(clt_loader **out, clt_ctx *ctx, const clt_dataset *d,
                             const struct clt_input_norm *norm, const struct clt_loader_params *p)
{
    clt_status st = CLT_OK;
    clt_loader *l = NULL;
    struct clt_loader_params dp = clt_loader_default_params();
    CLT_ASSERT(out && ctx && d && norm);
    *out = NULL;
    if (!p) p = &dp;
    CLT_TRY(check_set(ctx, d, norm, true));
    if (p->batch_size == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: batch size 0; expected at least 1");
    if (p->prefetch < 2 || p->prefetch > CLT_LOADER_MAX_PREFETCH)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "--prefetch %d: expected 2 to %d staging buffers (at least one uploading while "
                 "one is read; each costs a batch of memory)",
                 p->prefetch, CLT_LOADER_MAX_PREFETCH);
    if (!(p->resident_fraction > 0 && p->resident_fraction <= 1))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: resident fraction %g outside (0, 1]",
                 p->resident_fraction);
    if ((unsigned)p->mode > CLT_LOADER_STREAMING)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: invalid mode %d", (int)p->mode);
    const struct clt_augment *au = &p->augment;
    if (au->shift < 0 || au->shift > CLT_AUGMENT_MAX || au->cutout < 0 ||
        au->cutout > CLT_AUGMENT_MAX)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--augment: shift %d, cutout %d; expected 0 to %d",
                 au->shift, au->cutout, CLT_AUGMENT_MAX);
    if (clt_augment_enabled(au) &&
        (d->sample_ndim != 3 ||
         d->sample_shape[0] * d->sample_shape[1] * d->sample_shape[2] != d->features))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "--augment: %s has flat samples of %zu features; augmentation needs images "
                 "(C, H, W), e.g. IDX data", d->source, d->features);
    CLT_ALLOC(ctx, l, 1);
    atomic_init(&l->waits, 0);
    l->ctx = ctx;
    l->d = d;
    l->n = d->n;
    l->F = d->features;
    l->mb = p->batch_size;
    l->xes = d->u8 ? 1 : 4;
    l->ydt = d->labels ? CLT_DTYPE_I32 : CLT_DTYPE_F32;
    l->pinned = p->pinned;
    l->profiling = clt_ctx_profiling(ctx);
    l->nslots = p->prefetch;
    l->fail_at = p->fail_at;
    l->perm_epoch = -1;
    CLT_TRY(keep_norm(l, norm));
    l->own_thread = !clt_ctx_device(ctx)->serial_runtime;
    const char *env = getenv("CLTRAIN_LOADER_FAIL_AT");
    if (env && *env) {
        int64_t v = 0;
        if (!clt__parse_i64(env, 0, LONG_MAX, &v))
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                     "CLTRAIN_LOADER_FAIL_AT=%s: expected a batch number (an integer in [0, %ld])",
                     env, LONG_MAX);
        l->fail_at = (long)v;
    }
    choose_mode(l, p);
    size_t xd[2] = {l->mb, l->F};
    CLT_TRY(clt_tensor_create(&l->xout, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&l->yout, ctx, l->ydt, 1, &l->mb, CLT_MEM_ACTIVATIONS));
    if (clt_augment_enabled(au)) {
        l->augment = true;
        l->ageom = (struct clt_augment_geom){.C = d->sample_shape[0],
                                             .H = d->sample_shape[1],
                                             .W = d->sample_shape[2],
                                             .flip = au->flip ? 1 : 0,
                                             .shift = au->shift,
                                             .cutout = au->cutout};
        CLT_TRY(clt_tensor_create(&l->xpre, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    }
    if (l->mode == CLT_LOADER_RESIDENT) {
        CLT_TRY(clt_resident_create(&l->res, ctx, d, norm));
        CLT_TRY(clt_tensor_create(&l->perm, ctx, CLT_DTYPE_I32, 1, &l->n, CLT_MEM_STAGING));
    } else {
        CLT_TRY(create_streaming(l, norm));
    }
    *out = l;
    l = NULL;
fail:
    clt_loader_free(l);
    return st;
}

/* ---- the thread --------------------------------------------------------------------------- */

static double event_ms(cl_event e)
{
    cl_ulong a = 0, b = 0;
    if (clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) != CL_SUCCESS)
        return -1;
    return b > a ? (double)(b - a) * 1e-6 : 0.0;
}

/* Fills and uploads batch k into its slot. Runs on the loader thread: reports failures through
 * the thread's message (clt__fail with no ctx), never the ctx's. */
static clt_status produce(clt_loader *l, long k, long *cur_epoch, bool *stopped)
{
    clt_status st = CLT_OK;
    struct slot *s = &l->slots[k % l->nslots];
    cl_command_queue q = clt_ctx_transfer_queue(l->ctx);
    cl_event c = NULL, ux = NULL, uy = NULL, ex = NULL, ey = NULL;
    cl_int err;
    long g = l->o.first_step + k, epoch = 0;
    size_t start = 0, B = 0;
    *stopped = false;

    /* the slot is free once batch k - P has been consumed */
    pthread_mutex_lock(&l->mu);
    while (!l->stop && l->consumed_n <= k - l->nslots) pthread_cond_wait(&l->cv, &l->mu);
    *stopped = l->stop;
    if (!*stopped) {
        c = s->consumed;
        ux = s->up_x;
        uy = s->up_y;
        s->consumed = s->up_x = s->up_y = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    if (*stopped) return CLT_OK;

    /* its host memory is overwritten only after its previous upload has completed */
    if (ux || uy) {
        cl_event w[2];
        cl_uint nw = 0;
        if (ux) w[nw++] = ux;
        if (uy) w[nw++] = uy;
        atomic_fetch_add(&l->waits, 1);
        double t0 = now_s();
        err = clWaitForEvents(nw, w);
        double waited = now_s() - t0;
        if (err != CL_SUCCESS) {
            st = clt__fail_cl(NULL, err, "loader thread: waiting for an upload");
            goto fail;
        }
        double mx = l->profiling && ux ? event_ms(ux) : 0,
               my = l->profiling && uy ? event_ms(uy) : 0;
        pthread_mutex_lock(&l->mu);
        l->stats.wait_s += waited;
        if (l->profiling && mx >= 0 && my >= 0) {
            l->stats.upload_ms += mx + my;
            l->stats.timed_bytes += (double)(s->bytes_x + s->bytes_y);
        }
        pthread_mutex_unlock(&l->mu);
    }

    locate(l, g, &epoch, &start, &B);
    if (epoch != *cur_epoch) {
        epoch_order(&l->o, epoch, l->tperm, l->n);
        *cur_epoch = epoch;
    }
    if (k == l->fail_at) {
        st = clt__fail(NULL, CLT_ERR_IO,
                       "injected failure while assembling batch %ld (step %ld; "
                       "CLTRAIN_LOADER_FAIL_AT / clt_loader_params.fail_at)",
                       k, g + 1);
        goto fail;
    }
    const clt_dataset *d = l->d;
    size_t row = l->F * l->xes;
    const unsigned char *xs = d->u8 ? d->u8 : (const unsigned char *)d->f32;
    const unsigned char *ys = d->labels ? (const unsigned char *)d->labels
                                        : (const unsigned char *)d->targets;
    for (size_t b = 0; b < B; b++) {
        size_t i = l->tperm[start + b];
        memcpy(s->hx + b * row, xs + i * row, row);
        memcpy(s->hy + b * 4, ys + i * 4, 4);
    }
    s->bytes_x = B * row;
    s->bytes_y = B * 4;
    if (B == 0) goto fail; /* an empty slice: nothing to upload, the slot's marker goes back */
    err = clEnqueueWriteBuffer(q, clt_tensor_mem(s->dx), CL_FALSE, 0, s->bytes_x, s->hx, c ? 1 : 0,
                               c ? &c : NULL, &ex);
    if (err == CL_SUCCESS)
        err = clEnqueueWriteBuffer(q, clt_tensor_mem(s->dy), CL_FALSE, 0, s->bytes_y, s->hy,
                                   c ? 1 : 0, c ? &c : NULL, &ey);
    if (err == CL_SUCCESS) err = clFlush(q); /* the compute queue will wait for these */
    if (err != CL_SUCCESS) {
        st = clt__fail_cl(NULL, err, "loader thread: clEnqueueWriteBuffer (staging to device)");
        goto fail;
    }
fail:
    if (ux) clReleaseEvent(ux);
    if (uy) clReleaseEvent(uy);
    pthread_mutex_lock(&l->mu);
    /* What was enqueued stays in the slot for the next user (or clt_loader_free) to wait on;
     * the consumer's marker goes back if no upload depends on it. */
    s->up_x = ex;
    s->up_y = ey;
    if (ex || ey) {
        if (c) clReleaseEvent(c);
    } else {
        s->consumed = c;
    }
    if (st == CLT_OK) {
        s->B = B;
        s->step = g;
        l->produced = k + 1;
        l->stats.uploads++;
        l->stats.bytes += (double)(s->bytes_x + s->bytes_y);
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

/* Produces batch k; false when production ends there (a stop, or a failure recorded for the
 * consumer). On the loader thread, or on the training thread where there is none. */
static bool produce_next(clt_loader *l, long k, long *cur_epoch)
{
    bool stopped = false;
    clt_status st = produce(l, k, cur_epoch, &stopped);
    if (stopped) return false;
    if (st != CLT_OK) {
        pthread_mutex_lock(&l->mu);
        l->err = st;
        snprintf(l->errmsg, sizeof l->errmsg, "%s", clt_last_errmsg());
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    return true;
}

static void *loader_main(void *arg)
{
    clt_loader *l = arg;
    long cur_epoch = -1;
    for (long k = 0; k < l->count && produce_next(l, k, &cur_epoch); k++) {
    }
    return NULL;
}

/* ---- runs --------------------------------------------------------------------------------- */

clt_status clt_loader_start(clt_loader *l, const struct clt_loader_order *o)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = l->ctx;
    if (l->started) CLT_FAIL(ctx, CLT_ERR_STATE, "loader: a run is already started");
    if (o->shard_total && !(o->shard_lo < o->shard_hi && o->shard_hi <= o->shard_total))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: slice [%llu, %llu) of %llu shares",
                 (unsigned long long)o->shard_lo, (unsigned long long)o->shard_hi,
                 (unsigned long long)o->shard_total);
    size_t most = o->shard_total ? clt__slice_max(o->batch_size, o->shard_lo, o->shard_hi,
                                                  o->shard_total)
                                 : o->batch_size;
    if (o->batch_size == 0 || most > l->mb)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: batch size %zu (%zu of it here); expected "
                 "1 to %zu", o->batch_size, most, l->mb);
    long spe = clt_loader_steps_per_epoch(l->n, o->batch_size, o->drop_last);
    if (spe == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "--drop-last with --batch-size %zu leaves no batch of %zu samples",
                 o->batch_size, l->n);
    if (o->batches_per_epoch < 0 || o->batches_per_epoch > spe)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: %ld batches per epoch; expected 0 to %ld",
                 o->batches_per_epoch, spe);
    if (o->batches_per_epoch > 0) spe = o->batches_per_epoch;
    if (o->first_step < 0 || o->total_steps < o->first_step)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "loader: steps %ld to %ld", o->first_step,
                 o->total_steps);
    l->o = *o;
    l->spe = spe;
    l->count = o->total_steps - o->first_step;
    l->next_index = 0;
    l->perm_epoch = -1; /* the order may differ from the last run's (seed, shuffle) */
    if (l->mode == CLT_LOADER_STREAMING) {
        l->produced = l->consumed_n = 0;
        l->stop = false;
        l->err = CLT_OK;
        l->errmsg[0] = '\0';
        l->inline_epoch = -1;
        if (l->count > 0 && l->own_thread) {
            /* The thread takes no signals: Ctrl-C goes to the training thread's handler. */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            int rc = pthread_create(&l->thread, NULL, loader_main, l);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (rc != 0)
                CLT_FAIL(ctx, CLT_ERR_UNSUPPORTED, "loader: pthread_create failed (%s)",
                         strerror(rc));
            l->thread_running = true;
        }
    }
    l->started = true;
fail:
    return st;
}

clt_status clt_loader_stop(clt_loader *l)
{
    if (!l || !l->started) return CLT_OK;
    if (l->thread_running) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        l->thread_running = false;
    }
    clt_tensor_free(l->bx);
    clt_tensor_free(l->by);
    clt_tensor_free(l->bout);
    l->bx = l->by = l->bout = NULL;
    l->started = false;
    return CLT_OK;
}

static clt_status next_resident(clt_loader *l, long g, long epoch, size_t start, size_t B)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = l->ctx;
    int32_t *host = NULL;
    if (epoch != l->perm_epoch) {
        /* Each epoch's order is uploaded non-blocking from its own host array, freed once the
         * upload has completed (checked without waiting). Only with PERM_PENDING uploads still
         * in flight would this wait, counted as the loader's. */
        int kept = 0;
        for (int i = 0; i < l->npending; i++) {
            cl_int status = CL_QUEUED;
            clGetEventInfo(l->pending[i].ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                           &status, NULL);
            bool wait = status > CL_COMPLETE && i == 0 && l->npending == PERM_PENDING;
            if (wait) {
                atomic_fetch_add(&l->waits, 1);
                CLT_CHECK_CL(ctx, clWaitForEvents(1, &l->pending[i].ev), "waiting for an upload");
            }
            if (wait || status <= CL_COMPLETE) {
                clReleaseEvent(l->pending[i].ev);
                free(l->pending[i].host);
            } else {
                l->pending[kept++] = l->pending[i];
            }
        }
        l->npending = kept;
        CLT_ALLOC(ctx, host, l->n);
        epoch_order(&l->o, epoch, (uint32_t *)host, l->n);
        cl_event ev = NULL;
        CLT_TRY(clt_tensor_write(l->perm, host, false, &ev));
        l->pending[l->npending].host = host;
        l->pending[l->npending++].ev = ev;
        host = NULL;
        l->perm_epoch = epoch;
    }
    (void)g;
    CLT_TRY(clt_resident_gather(l->res, l->perm, start, B, l->bx, l->by));
fail:
    if (host) clt_ctx_finish(ctx, CLT_WAIT_SETUP); /* a failed write may still read it */
    free(host);
    return st;
}

static clt_status next_streaming(clt_loader *l, long idx, size_t *Bout, long *gout)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = l->ctx;
    struct slot *s = &l->slots[idx % l->nslots];
    clt_tensor *xv = NULL, *yv = NULL, *iv = NULL;
    cl_event up[2] = {NULL, NULL}, marker = NULL;
    bool enqueued = false;
    size_t B = 0;

    if (!l->own_thread) {
        /* No loader thread: fill the ring up to batch idx + P - 1 as the thread would, only
         * into slots already handed back (so produce() never waits for this thread). */
        double t0 = now_s();
        long upto = idx + l->nslots < l->count ? idx + l->nslots : l->count;
        while (l->produced < upto && l->err == CLT_OK && l->consumed_n > l->produced - l->nslots &&
               produce_next(l, l->produced, &l->inline_epoch)) {
        }
        l->stats.stall_s += now_s() - t0;
    }
    pthread_mutex_lock(&l->mu);
    if (l->own_thread && l->produced <= idx && l->err == CLT_OK) {
        double t0 = now_s();
        while (l->produced <= idx && l->err == CLT_OK) pthread_cond_wait(&l->cv, &l->mu);
        l->stats.stall_s += now_s() - t0;
    }
    bool ready = l->produced > idx;
    if (ready) {
        up[0] = s->up_x;
        up[1] = s->up_y;
        B = s->B;
        *gout = s->step;
    }
    clt_status lerr = l->err;
    char msg[sizeof l->errmsg];
    snprintf(msg, sizeof msg, "%s", l->errmsg);
    pthread_mutex_unlock(&l->mu);
    if (!ready && lerr == CLT_OK) /* inline, with batch idx's slot never handed back */
        CLT_FAIL(ctx, CLT_ERR_STATE, "data loader: batch %ld's staging buffer is still in use",
                 idx);
    if (!ready) CLT_FAIL(ctx, lerr, "data loader: %s", msg);
    if (B == 0) {
        /* an empty slice: nothing was uploaded; the slot keeps its last marker */
        pthread_mutex_lock(&l->mu);
        l->consumed_n = idx + 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        *Bout = 0;
        return CLT_OK;
    }

    /* The slot's events are stable until this thread marks it consumed. */
    cl_command_queue q = clt_ctx_compute_queue(ctx);
    size_t xd[2] = {B, l->F};
    if (l->profiling) {
        /* the marker ends when the compute work before this batch is done: from then until
         * the uploads end, the compute queue waits for data */
        cl_event ready = NULL;
        if (clEnqueueMarkerWithWaitList(q, 0, NULL, &ready) == CL_SUCCESS)
            clt__profile_data_wait(ctx, "waiting for data", ready, 2, up);
    }
    CLT_CHECK_CL(ctx, clEnqueueBarrierWithWaitList(q, 2, up, NULL),
                 "barrier on the loader's upload");
    enqueued = true;
    if (l->profiling) {
        if (clRetainEvent(up[0]) == CL_SUCCESS)
            clt__profile_event(ctx, "loader upload (inputs)", CLT_PROFILE_UPLOAD, s->bytes_x,
                               up[0]);
        if (clRetainEvent(up[1]) == CL_SUCCESS)
            clt__profile_event(ctx, "loader upload (labels)", CLT_PROFILE_UPLOAD, s->bytes_y,
                               up[1]);
    }
    CLT_TRY(clt_tensor_view(&xv, s->dx, 0, 2, xd));
    CLT_TRY(clt_tensor_view(&yv, s->dy, 0, 1, &B));
    CLT_TRY(clt_tensor_view(&iv, l->iota, 0, 1, &B));
    /* Both kernels compute fma((float)x, scale[f], shift[f]): the resident path's bits. */
    if (l->xes == 1) CLT_TRY(clt_op_u8_to_f32(l->bx, xv, l->scale, l->shift));
    else CLT_TRY(clt_op_gather_rows(l->bx, xv, iv, l->scale, l->shift));
    CLT_TRY(clt_op_gather(l->by, yv, iv));
    *Bout = B;
fail:
    if (enqueued) {
        /* Hand the slot back even after a failure: the marker follows whatever was enqueued. */
        cl_int err = clEnqueueMarkerWithWaitList(q, 0, NULL, &marker);
        if (err == CL_SUCCESS) err = clFlush(q); /* the next upload into the slot waits for it */
        if (err != CL_SUCCESS && st == CLT_OK) st = clt__fail_cl(ctx, err, "loader marker");
        pthread_mutex_lock(&l->mu);
        if (marker) {
            if (s->consumed) clReleaseEvent(s->consumed);
            s->consumed = marker;
            l->consumed_n = idx + 1;
            pthread_cond_broadcast(&l->cv);
        }
        pthread_mutex_unlock(&l->mu);
    }
    clt_tensor_free(xv);
    clt_tensor_free(yv);
    clt_tensor_free(iv);
    return st;
}

clt_status clt_loader_next(clt_loader *l, struct clt_batch *out)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = l->ctx;
    long idx = l->next_index, g = l->o.first_step + idx, epoch;
    size_t start, B;
    memset(out, 0, sizeof *out);
    if (!l->started) CLT_FAIL(ctx, CLT_ERR_STATE, "loader: no run started");
    if (idx >= l->count)
        CLT_FAIL(ctx, CLT_ERR_STATE, "loader: the run's %ld batches are used up", l->count);
    locate(l, g, &epoch, &start, &B);
    clt_tensor_free(l->bx);
    clt_tensor_free(l->by);
    clt_tensor_free(l->bout);
    l->bx = l->by = l->bout = NULL;
    if (B == 0) { /* an empty slice of a small batch (data-parallel): nothing to make */
        if (l->mode == CLT_LOADER_STREAMING) {
            size_t Bs = 1;
            long gs = -1;
            CLT_TRY(next_streaming(l, idx, &Bs, &gs));
            CLT_ASSERT(Bs == 0);
        }
        l->next_index++;
        out->epoch = (int)epoch;
        out->step = g;
        goto fail;
    }
    size_t xd[2] = {B, l->F};
    CLT_TRY(clt_tensor_view(&l->bx, l->augment ? l->xpre : l->xout, 0, 2, xd));
    CLT_TRY(clt_tensor_view(&l->by, l->yout, 0, 1, &B));
    if (l->augment) CLT_TRY(clt_tensor_view(&l->bout, l->xout, 0, 2, xd));
    if (l->mode == CLT_LOADER_RESIDENT) {
        if (idx == l->fail_at)
            CLT_FAIL(ctx, CLT_ERR_IO,
                     "data loader: injected failure at batch %ld (step %ld; "
                     "CLTRAIN_LOADER_FAIL_AT / clt_loader_params.fail_at)",
                     idx, g + 1);
        CLT_TRY(next_resident(l, g, epoch, start, B));
    } else {
        size_t Bs = 0;
        long gs = -1;
        CLT_TRY(next_streaming(l, idx, &Bs, &gs));
        CLT_ASSERT(Bs == B && gs == g);
    }
    /* Keyed by the sample's position in the epoch's order: the same draws for any batch size,
     * either loader, and after a resume. */
    if (l->augment)
        CLT_TRY(clt_op_augment(l->bout, l->bx, &l->ageom, l->o.seed,
                               clt_rng_stream(CLT_RNG_DATA, (uint64_t)epoch), (uint64_t)start));
    l->next_index++;
    l->stats.batches++;
    out->x = l->augment ? l->bout : l->bx;
    out->y = l->by;
    out->size = B;
    out->epoch = (int)epoch;
    out->step = g;
fail:
    return st;
}

struct clt_loader_stats clt_loader_stats(clt_loader *l)
{
    struct clt_loader_stats s;
    if (l->sync_init) pthread_mutex_lock(&l->mu);
    s = l->stats;
    if (l->sync_init) pthread_mutex_unlock(&l->mu);
    s.waits = atomic_load(&l->waits);
    return s;
}

void clt_loader_free(clt_loader *l)
{
    if (!l) return;
    clt_loader_stop(l);
    /* Wait for what the loader enqueued, and for the kernels that read its buffers. */
    cl_event *ev = calloc((size_t)l->nslots * 3 + PERM_PENDING, sizeof *ev);
    cl_uint nev = 0;
    for (int i = 0; l->slots && i < l->nslots; i++) {
        struct slot *s = &l->slots[i];
        cl_event e3[3] = {s->up_x, s->up_y, s->consumed};
        for (int j = 0; j < 3; j++)
            if (e3[j] && ev) ev[nev++] = e3[j];
            else if (e3[j]) clWaitForEvents(1, &e3[j]); /* out of host memory: one by one */
    }
    for (int i = 0; i < l->npending; i++)
        if (ev) ev[nev++] = l->pending[i].ev;
        else clWaitForEvents(1, &l->pending[i].ev);
    if (nev) clt_ctx_wait(l->ctx, CLT_WAIT_SETUP, nev, ev);
    for (int i = 0; l->slots && i < l->nslots; i++) {
        struct slot *s = &l->slots[i];
        if (s->up_x) clReleaseEvent(s->up_x);
        if (s->up_y) clReleaseEvent(s->up_y);
        if (s->consumed) clReleaseEvent(s->consumed);
        clt_pinned_free(s->pin);
        free(s->heap);
        clt_tensor_free(s->dx);
        clt_tensor_free(s->dy);
    }
    for (int i = 0; i < l->npending; i++) {
        clReleaseEvent(l->pending[i].ev);
        free(l->pending[i].host);
    }
    free(ev);
    free(l->slots);
    if (l->sync_init) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
    }
    clt_tensor_free(l->xout);
    clt_tensor_free(l->yout);
    clt_tensor_free(l->xpre);
    clt_tensor_free(l->scale);
    clt_tensor_free(l->shift);
    clt_tensor_free(l->iota);
    clt_resident_free(l->res);
    clt_tensor_free(l->perm);
    free(l->tperm);
    free(l->norm_mean);
    free(l->norm_std);
    free(l);
}
