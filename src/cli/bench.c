/* `cltrain bench`: training steps per second of a model on synthetic data resident on the
 * device (forward, cross-entropy, backward, optimizer), timed after a warm-up with the queues
 * finished before each clock read. The figures compared with PyTorch's. A language model (a
 * spec starting with embed: gpt-mini, gpt-char) trains on random token ids of a 65-token
 * vocabulary (tiny-shakespeare's, as tools/torch_gpt.py --bench), with the recipe's AdamW and
 * clipping, and reports tokens/s as well.
 * `cltrain bench --data SPEC`: the data loaders instead: epoch time of real training with the
 * split resident on the device, streamed from pinned staging and from pageable staging; host
 * waits per epoch against the goal; the loader's upload bandwidth against raw
 * clEnqueueWriteBuffer copies of the same sizes (event times on a profiling ctx). */
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/run.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The synthetic data's generator (SplitMix64): any fixed sequence will do, the figures do not
 * depend on the values. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- bench --data: the loaders ------------------------------------------------------------ */

struct data_bench {
    const char *data, *model, *device, *loader;
    long epochs, batch, warmup, log_every, prefetch;
    bool no_pin;
};

struct epoch_capture {
    int epochs;
    double epoch_s;                      /* summed over the timed epochs */
    struct clt_ctx_stats first, last;    /* counters at the run's start and its last epoch */
    struct clt_loader_stats lfirst, llast;
};

static void on_epoch(const struct clt_train_event *e, void *user)
{
    struct epoch_capture *c = user;
    if (e->kind != CLT_EVENT_EPOCH) return;
    c->epochs++;
    c->epoch_s += e->epoch_s;
    c->last = e->stats;
    c->llast = e->loader;
}

/* One training run of `steps` steps (0: `epochs` epochs) from a fresh model with batches from l. */
static clt_status train_with(clt_ctx *ctx, const clt_spec *spec, const clt_dataset *d,
                             clt_loader *l, const struct data_bench *o, long steps,
                             struct epoch_capture *cap)
{
    clt_status st = CLT_OK;
    clt_model *m = NULL;
    clt_trainer *t = NULL;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = (size_t)o->batch;
    if (d->sample_shape[1]) memcpy(mp.input_shape, d->sample_shape, sizeof mp.input_shape);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = (int)o->epochs;
    tp.max_steps = steps;
    tp.batch_size = (size_t)o->batch;
    tp.log_every = o->log_every;
    tp.on_event = on_epoch;
    tp.user = cap;
    st = clt_model_create(&m, ctx, spec, d->features, (size_t)d->classes, &mp);
    if (st == CLT_OK) st = clt_trainer_create(&t, m, l, NULL, &tp);
    if (st == CLT_OK) {
        memset(cap, 0, sizeof *cap);
        cap->first = cap->last = clt_ctx_stats(ctx);
        cap->lfirst = cap->llast = clt_loader_stats(l);
        cap->first.host_waits[CLT_WAIT_LOADER] += cap->lfirst.waits; /* as the events fold it */
        cap->first.host_waits_total += cap->lfirst.waits;
        st = clt_trainer_run(t);
    }
    clt_trainer_free(t);
    clt_model_free(m);
    return st;
}

/* Loss reads of a run of `total` steps: one per log point and per epoch end (not also a log
 * point): with no evaluation and no checkpoint, the only host waits a run may make. */
static long expected_waits(long total, long spe, long log_every)
{
    long n = 0;
    for (long k = 1; k <= total; k++)
        n += (log_every > 0 && k % log_every == 0) || k % spe == 0 || k == total;
    return n;
}

/* Event-timed copies of `count` batches (inputs then labels) from host memory `src` (pinned or
 * not) into device buffers, back to back on the transfer queue: the raw bandwidth the loader is
 * compared with. *gbs = bytes / summed device time. */
static clt_status raw_uploads(clt_ctx *ctx, const void *src, size_t xbytes, size_t ybytes,
                              long count, double *gbs)
{
    clt_status st = CLT_OK;
    clt_tensor *dx = NULL, *dy = NULL;
    cl_event *ev = calloc((size_t)count * 2, sizeof *ev);
    long nev = 0;
    double ns = 0, bytes = 0;
    cl_command_queue q = clt_ctx_transfer_queue(ctx);
    if (!ev) return CLT_ERR_HOST_MEMORY;
    st = clt_tensor_create(&dx, ctx, CLT_DTYPE_U8, 1, &xbytes, CLT_MEM_STAGING);
    if (st == CLT_OK) st = clt_tensor_create(&dy, ctx, CLT_DTYPE_U8, 1, &ybytes, CLT_MEM_STAGING);
    if (st == CLT_OK) st = clt_ctx_finish(ctx, CLT_WAIT_TIMING);
    for (long i = 0; st == CLT_OK && i < count; i++) {
        cl_int err = clEnqueueWriteBuffer(q, clt_tensor_mem(dx), CL_FALSE, 0, xbytes, src, 0,
                                          NULL, &ev[nev]);
        if (err == CL_SUCCESS) nev++;
        if (err == CL_SUCCESS)
            err = clEnqueueWriteBuffer(q, clt_tensor_mem(dy), CL_FALSE, 0, ybytes,
                                       (const char *)src + xbytes, 0, NULL, &ev[nev]);
        if (err == CL_SUCCESS) nev++;
        if (err != CL_SUCCESS) st = CLT_ERR_OPENCL;
        bytes += (double)(xbytes + ybytes);
    }
    clFlush(q);
    if (nev) {
        clt_status w = clt_ctx_wait(ctx, CLT_WAIT_TIMING, (cl_uint)nev, ev);
        if (st == CLT_OK) st = w;
    }
    for (long i = 0; i < nev; i++) {
        cl_ulong a = 0, b = 0;
        clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        ns += b > a ? (double)(b - a) : 0.0;
        clReleaseEvent(ev[i]);
    }
    *gbs = ns > 0 ? bytes / ns : 0;
    free(ev);
    clt_tensor_free(dx);
    clt_tensor_free(dy);
    return st;
}

/* The loaders bench_data compares, in the order of its table. */
static const struct loader_variant {
    const char *name;
    clt_loader_mode mode;
    bool pinned;
} loader_variants[3] = {{"resident", CLT_LOADER_RESIDENT, true},
                        {"streaming, pinned", CLT_LOADER_STREAMING, true},
                        {"streaming, pageable", CLT_LOADER_STREAMING, false}};

/* --loader and --no-pin as the range first..last of loader_variants; --prefetch checked. */
static int choose_variants(const struct data_bench *o, int *first, int *last)
{
    clt_loader_mode want;
    if (clt_loader_mode_parse(o->loader, &want) != CLT_OK && strcmp(o->loader, "all") != 0)
        return cli_usage_error("--loader %s: expected all, resident or streaming", o->loader);
    if (strcmp(o->loader, "all") == 0 || want == CLT_LOADER_AUTO) *first = 0, *last = 2;
    else if (want == CLT_LOADER_RESIDENT) *first = *last = 0;
    else *first = *last = o->no_pin ? 2 : 1;
    if (o->prefetch < 2 || o->prefetch > CLT_LOADER_MAX_PREFETCH)
        return cli_usage_error("--prefetch %ld: expected 2 to %d staging buffers", o->prefetch,
                               CLT_LOADER_MAX_PREFETCH);
    return CLI_OK;
}

/* The training thread's host waits per epoch, by reason: "1.0 (log 0.5, epoch 0.5)". */
static void format_waits(const struct epoch_capture *cap, char *waits, size_t size)
{
    double ne = (double)cap->epochs;
    long tot = cap->last.host_waits_total - cap->first.host_waits_total -
               (cap->llast.waits - cap->lfirst.waits);
    int k = snprintf(waits, size, "%.1f (", (double)tot / ne);
    bool firstr = true;
    for (int r = 0; r < CLT_WAIT__COUNT; r++) {
        long n = cap->last.host_waits[r] - cap->first.host_waits[r];
        if (!n || r == CLT_WAIT_LOADER || k >= (int)size) continue;
        k += snprintf(waits + k, size - (size_t)k, "%s%s %.1f", firstr ? "" : ", ",
                      clt_wait_reason_name((clt_wait_reason)r), (double)n / ne);
        firstr = false;
    }
    if (k < (int)size) snprintf(waits + k, size - (size_t)k, ")");
}

/* The table of epoch times: a warm-up, then o->epochs timed epochs per loader first..last. */
static int time_epochs(clt_ctx *ctx, const clt_spec *spec, const clt_dataset *train,
                       const struct clt_input_norm *norm, const struct data_bench *o, int first,
                       int last)
{
    int rc = CLI_FAIL;
    clt_loader *l = NULL;
    double resident_s = 0;
    for (int v = first; v <= last; v++) {
        struct clt_loader_params lp = clt_loader_default_params();
        struct epoch_capture cap;
        lp.mode = loader_variants[v].mode;
        lp.pinned = loader_variants[v].pinned;
        lp.batch_size = (size_t)o->batch;
        lp.prefetch = (int)o->prefetch;
        clt_status st = clt_loader_create(&l, ctx, train, norm, &lp);
        if (st == CLT_OK && o->warmup > 0) st = train_with(ctx, spec, train, l, o, o->warmup, &cap);
        if (st == CLT_OK) st = train_with(ctx, spec, train, l, o, 0, &cap);
        if (st != CLT_OK) {
            cli_error("%s: %s", loader_variants[v].name, clt_ctx_errmsg(ctx));
            goto done;
        }
        double es = cap.epoch_s / cap.epochs, ne = (double)cap.epochs;
        if (v == 0) resident_s = es;
        char waits[128] = "", vs[16] = "-";
        format_waits(&cap, waits, sizeof waits);
        if (resident_s > 0) snprintf(vs, sizeof vs, "%.3fx", es / resident_s);
        printf("  %-22s %9.3f %10.0f %8s %22s %14.1f %8.3f (%.3f)\n", loader_variants[v].name, es,
               (double)train->n / es, vs, waits, (double)(cap.llast.waits - cap.lfirst.waits) / ne,
               (cap.llast.stall_s - cap.lfirst.stall_s) / ne,
               (cap.llast.wait_s - cap.lfirst.wait_s) / ne);
        clt_loader_free(l);
        l = NULL;
    }
    rc = CLI_OK;
done:
    clt_loader_free(l);
    return rc;
}

/* One streaming variant's upload bandwidth on a profiling ctx: an epoch through the loader,
 * then raw copies of the same batches and one copy of the epoch's bytes from host memory of
 * the same kind. */
static int measure_upload(clt_ctx *ctx, const clt_spec *spec, const clt_dataset *train,
                          const struct clt_input_norm *norm, const struct data_bench *o,
                          const struct loader_variant *var, long spe)
{
    size_t xbytes = (size_t)o->batch * train->features * (train->u8 ? 1 : 4),
           ybytes = (size_t)o->batch * 4;
    struct clt_loader_params lp = clt_loader_default_params();
    struct epoch_capture cap;
    clt_loader *l = NULL;
    clt_pinned *pin = NULL;
    void *heap = NULL, *src = NULL;
    double raw = 0, whole = 0;
    size_t ex = xbytes * (size_t)spe, ey = ybytes * (size_t)spe; /* an epoch's bytes */
    lp.mode = CLT_LOADER_STREAMING;
    lp.pinned = var->pinned;
    lp.batch_size = (size_t)o->batch;
    lp.prefetch = (int)o->prefetch;
    struct data_bench one = *o;
    one.epochs = 1;
    int rc = CLI_FAIL;
    clt_status st = clt_loader_create(&l, ctx, train, norm, &lp);
    if (st == CLT_OK) st = train_with(ctx, spec, train, l, &one, 0, &cap);
    if (st == CLT_OK && var->pinned) {
        st = clt_pinned_create(&pin, ctx, ex + ey);
        if (st == CLT_OK) src = clt_pinned_ptr(pin);
    } else if (st == CLT_OK) {
        src = heap = malloc(ex + ey);
        if (!src) st = CLT_ERR_HOST_MEMORY;
    }
    if (src) memset(src, 1, ex + ey);
    if (st == CLT_OK) st = raw_uploads(ctx, src, xbytes, ybytes, spe, &raw);
    if (st == CLT_OK) st = raw_uploads(ctx, src, ex, ey, 1, &whole);
    clt_pinned_free(pin);
    free(heap);
    if (st != CLT_OK) {
        cli_error("%s bandwidth: %s", var->name, clt_ctx_errmsg(ctx));
        goto done;
    }
    struct clt_loader_stats ls = clt_loader_stats(l);
    double got = ls.upload_ms > 0 ? ls.timed_bytes / (ls.upload_ms * 1e6) : 0;
    printf("  %-20s loader %6.2f GB/s (%.1f ms of copies per epoch); raw "
           "clEnqueueWriteBuffer from %s memory: the same copies %6.2f GB/s (loader "
           "%.0f%%), one copy of the epoch's bytes %6.2f GB/s (loader %.0f%%)\n",
           var->name, got, ls.upload_ms * (double)(xbytes + ybytes) * (double)spe /
                               (ls.timed_bytes > 0 ? ls.timed_bytes : 1),
           var->pinned ? "pinned" : "pageable", raw, raw > 0 ? 100.0 * got / raw : 0.0,
           whole, whole > 0 ? 100.0 * got / whole : 0.0);
    rc = CLI_OK;
done:
    clt_loader_free(l);
    return rc;
}

/* Bandwidth: event times need a profiling ctx (which also times GEMMs with a finish, so its
 * epoch times are not the table's). */
static int measure_uploads(struct clt_ctx_params cp, const clt_spec *spec,
                           const clt_dataset *train, const struct clt_input_norm *norm,
                           const struct data_bench *o, long spe, int first, int last)
{
    int rc = CLI_FAIL;
    clt_ctx *ctx = NULL;
    size_t xbytes = (size_t)o->batch * train->features * (train->u8 ? 1 : 4),
           ybytes = (size_t)o->batch * 4;
    cp.profiling = true;
    if (clt_ctx_create(&ctx, &cp) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    printf("upload bandwidth (a profiling ctx; device time of each copy from its events; "
           "an epoch is %ld batches of up to %zu + %zu bytes):\n", spe, xbytes, ybytes);
    for (int v = first < 1 ? 1 : first; v <= last; v++)
        if (measure_upload(ctx, spec, train, norm, o, &loader_variants[v], spe) != CLI_OK)
            goto done;
    printf("  goal: the loader's pinned uploads >= 90%% of the raw pinned copies\n");
    rc = CLI_OK;
done:
    clt_ctx_free(ctx);
    return rc;
}

static int bench_data(const struct data_bench *o)
{
    int first = 0, last = 2;
    int rc = choose_variants(o, &first, &last);
    if (rc != CLI_OK) return rc;

    clt_dataset train = {0};
    clt_spec spec = {0};
    clt_ctx *ctx = NULL;
    char *text = NULL;
    rc = CLI_FAIL;
    struct clt_data_params dp = clt_data_default_params();
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.device = o->device;
    clt_status st = clt_data_open(o->data, &dp, &train, NULL);
    if (st != CLT_OK) {
        rc = cli_fail_data(st);
        goto done;
    }
    rc = cli_parse_model("--model", o->model, train.classes, &spec);
    if (rc != CLI_OK) goto done;
    rc = CLI_FAIL;
    if (clt_spec_to_string(&spec, &text) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    struct clt_input_norm norm = {.features = train.features, .scale = train.input_scale};
    long spe = clt_loader_steps_per_epoch(train.n, (size_t)o->batch, false);
    long total = spe * o->epochs, goal = expected_waits(total, spe, o->log_every);
    if (clt_ctx_create(&ctx, &cp) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    const clt_device_info *dev = clt_ctx_device(ctx);
    printf("bench --data %s on [%d] %s (%s): model %zu-%s, batch %ld, %ld epoch(s) of %ld steps "
           "after %ld warm-up steps, log every %ld; wall clock after finished queues\n",
           o->data, dev->index, dev->device_name, clt_device_type_name(dev->type), train.features,
           text, o->batch, o->epochs, spe, o->warmup, o->log_every);
    printf("  %-22s %9s %10s %8s %22s %14s %16s\n", "loader", "epoch s", "samples/s",
           "vs res.", "host waits/epoch", "loader waits", "stall s (wait s)");
    if (time_epochs(ctx, &spec, &train, &norm, o, first, last) != CLI_OK) goto done;
    printf("  goal: streaming <= 1.05x resident; host waits per epoch = log points + epoch-end "
           "reads + evaluations + checkpoints = %.1f here\n", (double)goal / (double)o->epochs);
    clt_ctx_free(ctx);
    ctx = NULL;
    if (last >= 1 &&
        measure_uploads(cp, &spec, &train, &norm, o, spe, first, last) != CLI_OK)
        goto done;
    rc = CLI_OK;
done:
    clt_ctx_free(ctx);
    clt_spec_free(&spec);
    clt_dataset_free(&train);
    free(text);
    return rc;
}

/* `cltrain bench` without --data: the flags that matter to the step benchmark. */
struct step_bench {
    const char *model, *device;
    clt_optim_kind kind;
    long batch, steps, warmup, features, classes, repeats;
    size_t shape[3]; /* one input sample's shape; all 0: flat (features) */
    clt_dtype precision; /* the model's storage: f32, or bf16 / f16 (mixed precision) */
    long block; /* a language model's window T (features = T, classes = V); 0: not one */
};

enum { NBATCH = 8 }; /* distinct batches the timed steps cycle through */

/* The model, its optimizer, NBATCH batches of random inputs (x) and labels (y) on the device,
 * the gradient of the output and the loss sum, and with f16 the loss scaler: what
 * step_bench_run uses. */
struct step_state {
    clt_ctx *ctx;
    clt_spec spec;
    clt_model *m;
    clt_optim *opt;
    clt_scaler *scaler;
    clt_tensor *x, *y, *dout, *loss;
};

static void step_state_free(struct step_state *s)
{
    clt_tensor_free(s->x);
    clt_tensor_free(s->y);
    clt_tensor_free(s->dout);
    clt_tensor_free(s->loss);
    clt_scaler_free(s->scaler);
    clt_optim_free(s->opt);
    clt_model_free(s->m);
    clt_spec_free(&s->spec);
    clt_ctx_free(s->ctx);
}

/* The model's biases and normalisation parameters take no weight decay, as in training. */
static clt_status exempt_from_decay(clt_optim *o, const clt_model *m)
{
    const int n = clt_model_param_count(m);
    size_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    size_t *cnt = malloc((size_t)(n ? n : 1) * sizeof *cnt);
    int k = 0;
    clt_status st = off && cnt ? CLT_OK : CLT_ERR_HOST_MEMORY;
    for (int i = 0; st == CLT_OK && i < n; i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        if (pi->decays) continue;
        off[k] = pi->offset;
        cnt[k++] = pi->numel;
    }
    if (st == CLT_OK) st = clt_optim_set_no_decay(o, k, off, cnt);
    free(off);
    free(cnt);
    return st;
}

/* The spec parsed, checked against the data's shape: one row of N outputs per sample, or for
 * a language model V logits at each of its T positions. */
static int parse_bench_model(struct step_state *s, const struct step_bench *o)
{
    size_t F = (size_t)o->features, N = (size_t)o->classes;
    int rc = cli_parse_model("--model", o->model, (int)o->classes, &s->spec);
    if (rc != CLI_OK) return rc;
    if (o->block) {
        uint64_t P = 0;
        if (clt_spec_validate(&s->spec, (int)o->block, (int)o->classes) != CLT_OK ||
            clt_model_param_elements(&s->spec, F, N, NULL, &P) != CLT_OK)
            return cli_usage_error("%s", clt_last_errmsg());
        return CLI_OK;
    }
    char why[400];
    if (!cli_spec_one_row(&s->spec, F, (int)N, o->shape, why, sizeof why))
        return cli_usage_error("--model: %s", why);
    return CLI_OK;
}

/* NBATCH batches on the host: inputs uniform in [0, 1) (f32), or a language model's token ids
 * (i32, written over the same bytes), and labels in [0, N); *hx and *hy malloc'd. */
static bool synthetic_batches(const struct step_bench *o, void **hx, int32_t **hy)
{
    size_t nx = NBATCH * (size_t)o->batch * (size_t)o->features;
    size_t ny = o->block ? nx : NBATCH * (size_t)o->batch;
    uint64_t rng = 1, N = (uint64_t)o->classes;
    *hx = malloc(nx * sizeof(float)); /* f32 and i32 alike */
    *hy = malloc(ny * sizeof **hy);
    if (!*hx || !*hy) return false;
    for (size_t i = 0; i < nx; i++) {
        if (o->block) ((int32_t *)*hx)[i] = (int32_t)(splitmix64(&rng) % N);
        else ((float *)*hx)[i] = (float)(splitmix64(&rng) >> 40) * 0x1p-24f;
    }
    for (size_t i = 0; i < ny; i++) (*hy)[i] = (int32_t)(splitmix64(&rng) % N);
    return true;
}

/* The optimizer: --optimizer's defaults, or for a language model (the optimizer not given)
 * tools/torch_gpt.py's recipe: AdamW, betas 0.9 and 0.99, weight decay 0.1 on matrices and
 * embeddings, the gradients clipped to global norm 1. */
static struct clt_optim_params bench_optim(const struct step_bench *o, bool lm_recipe)
{
    struct clt_optim_params op = clt_optim_default_params(lm_recipe ? CLT_OPTIM_ADAMW : o->kind);
    if (lm_recipe) {
        op.beta2 = 0.99f;
        op.weight_decay = 0.1f;
        op.clip_grad = 1.0f;
    }
    return op;
}

static int step_state_create(struct step_state *s, const struct step_bench *o, bool lm_recipe)
{
    int rc = CLI_FAIL;
    void *hx = NULL;
    int32_t *hy = NULL;
    size_t B = (size_t)o->batch, F = (size_t)o->features, N = (size_t)o->classes, one = 1;
    size_t T = (size_t)o->block;
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.device = o->device;
    if (clt_ctx_create(&s->ctx, &cp) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    rc = parse_bench_model(s, o);
    if (rc != CLI_OK) goto done;
    rc = CLI_FAIL;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    mp.precision = o->precision;
    memcpy(mp.input_shape, o->shape, sizeof mp.input_shape);
    struct clt_optim_params op = bench_optim(o, lm_recipe);
    /* labels: one per sample, or a language model's next token at each position (B T) */
    size_t xd[2] = {NBATCH * B, F}, yd = NBATCH * B * (T ? T : 1), dd[3] = {B, T ? T : N, N};
    if (!synthetic_batches(o, &hx, &hy)) {
        cli_error("out of host memory");
        goto done;
    }
    if (clt_model_create(&s->m, s->ctx, &s->spec, F, N, &mp) != CLT_OK ||
        clt_optim_create(&s->opt, clt_model_params(s->m), &op) != CLT_OK ||
        (op.weight_decay > 0.0f && exempt_from_decay(s->opt, s->m) != CLT_OK) ||
        clt_tensor_create(&s->x, s->ctx, T ? CLT_DTYPE_I32 : CLT_DTYPE_F32, 2, xd,
                          CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&s->y, s->ctx, CLT_DTYPE_I32, 1, &yd, CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&s->dout, s->ctx, CLT_DTYPE_F32, T ? 3 : 2, dd, CLT_MEM_ACTIVATIONS) !=
            CLT_OK ||
        clt_tensor_zeros(&s->loss, s->ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_WORKSPACE) != CLT_OK ||
        clt_tensor_write(s->x, hx, true, NULL) != CLT_OK ||
        clt_tensor_write(s->y, hy, true, NULL) != CLT_OK ||
        (o->precision == CLT_DTYPE_F16 && clt_scaler_create(&s->scaler, s->ctx, NULL) != CLT_OK) ||
        (clt_model_weights(s->m) != clt_model_params(s->m) && /* the 16-bit weights */
         clt_optim_set_copy(s->opt, clt_model_weights(s->m)) != CLT_OK)) {
        cli_error("%s", clt_ctx_errmsg(s->ctx));
        goto done;
    }
    rc = CLI_OK;
done:
    free(hx);
    free(hy);
    return rc;
}

/* n training steps (forward, cross-entropy, backward, optimizer) over the NBATCH batches in
 * turn, enqueued without waiting (a language model's loss through the public
 * clt_loss_softmax_xent: under 256 classes its one-work-group kernel, where `cltrain train`
 * takes the per-row kernel at every vocabulary: either is B T V exponentials, 50,000 at
 * gpt-mini's shapes against its 3.7 GFLOP of matrix products a step); in mixed precision as `cltrain train` steps (f16: the loss
 * scaled, the update skipped on inf/NaN; the update refreshes the 16-bit weights). */
static clt_status step_bench_run(struct step_state *s, const struct step_bench *o, long n)
{
    clt_status st = CLT_OK;
    clt_tensor *xb = NULL, *yb = NULL, *lv = NULL, *dv = NULL;
    /* R rows of N logits: a sample's, or (language model) each of its T positions' */
    size_t B = (size_t)o->batch, F = (size_t)o->features, N = (size_t)o->classes,
           R = B * (o->block ? (size_t)o->block : 1), bd[2] = {B, F}, rd[2] = {R, N};
    st = clt_tensor_view(&dv, s->dout, 0, 2, rd);
    for (long i = 0; i < n && st == CLT_OK; i++) {
        size_t k = (size_t)i % NBATCH;
        clt_tensor *out = NULL;
        st = clt_tensor_view(&xb, s->x, k * B * F, 2, bd);
        if (st == CLT_OK) st = clt_tensor_view(&yb, s->y, k * R, 1, &R);
        if (st == CLT_OK) st = clt_model_forward(s->m, xb, true, (uint64_t)i, &out);
        if (st == CLT_OK) st = clt_tensor_view(&lv, out, 0, 2, rd);
        if (st == CLT_OK)
            st = clt_loss_softmax_xent(lv, yb, 0.0f, 1.0f, 1.0f / (float)R, dv, s->loss, NULL);
        if (st == CLT_OK && s->scaler) st = clt_scaler_scale(s->scaler, s->dout);
        if (st == CLT_OK) st = clt_model_backward(s->m, s->dout, false);
        if (st == CLT_OK) st = clt_optim_step_scaled(s->opt, clt_model_grads(s->m), s->scaler);
        clt_tensor_free(xb);
        clt_tensor_free(yb);
        clt_tensor_free(lv);
        xb = yb = lv = NULL;
    }
    clt_tensor_free(dv);
    return st;
}

/* A warm-up, then nrep timed repeats of o->steps steps, the queue finished before each clock
 * read; rates[] (steps/s) sorted ascending. */
static clt_status step_bench_time(struct step_state *s, const struct step_bench *o, long nrep,
                                  double *rates)
{
    for (long r = -1; r < nrep; r++) {
        long n = r < 0 ? o->warmup : o->steps;
        if (clt_ctx_finish(s->ctx, CLT_WAIT_TIMING) != CLT_OK) return CLT_ERR_OPENCL;
        double t0 = now_s();
        if (step_bench_run(s, o, n) != CLT_OK ||
            clt_ctx_finish(s->ctx, CLT_WAIT_TIMING) != CLT_OK)
            return CLT_ERR_OPENCL;
        if (r >= 0) rates[r] = (double)n / (now_s() - t0);
    }
    /* median of the repeats */
    for (long i = 1; i < nrep; i++)
        for (long j = i; j > 0 && rates[j] < rates[j - 1]; j--) {
            double tmp = rates[j];
            rates[j] = rates[j - 1];
            rates[j - 1] = tmp;
        }
    return CLT_OK;
}

/* Training steps per second on synthetic data resident on the device. */
static int bench_steps(const struct step_bench *o, bool lm_recipe)
{
    struct step_state s = {0};
    double rates[64];
    long nrep = o->repeats < 64 ? o->repeats : 64;
    int rc = step_state_create(&s, o, lm_recipe);
    if (rc == CLI_OK && step_bench_time(&s, o, nrep, rates) != CLT_OK)
        rc = cli_error("%s", clt_ctx_errmsg(s.ctx));
    if (rc == CLI_OK) {
        char *text = NULL;
        clt_spec_to_string(&s.spec, &text);
        struct clt_mem_stats ms = clt_ctx_mem_stats(s.ctx);
        char peak[32];
        clt_format_bytes(ms.peak, peak, sizeof peak);
        const struct clt_optim_params op = bench_optim(o, lm_recipe);
        if (o->block)
            printf("bench on [%d] %s: model %s, batch %zu x block %ld (%ld-token vocabulary, "
                   "random tokens), %s%s, precision %s: %.2f steps/s, %.0f tokens/s (median of "
                   "%ld x %ld steps after %ld warm-up; min %.2f, max %.2f steps/s); peak device "
                   "memory %s\n",
                   clt_ctx_device(s.ctx)->index, clt_ctx_device(s.ctx)->device_name,
                   text ? text : o->model, (size_t)o->batch, o->block, o->classes,
                   clt_optim_kind_name(op.kind), op.clip_grad > 0 ? " clipped to norm 1" : "",
                   cli_precision_name(o->precision), rates[nrep / 2],
                   rates[nrep / 2] * (double)(o->batch * o->block), nrep, o->steps, o->warmup,
                   rates[0], rates[nrep - 1], peak);
        else
            printf("bench on [%d] %s: model %zu-%s, batch %zu, %s, precision %s: %.1f steps/s, "
                   "%.0f samples/s (median of %ld x %ld steps after %ld warm-up; min %.1f, max "
                   "%.1f steps/s); peak device memory %s\n",
                   clt_ctx_device(s.ctx)->index, clt_ctx_device(s.ctx)->device_name,
                   (size_t)o->features, text ? text : o->model, (size_t)o->batch,
                   clt_optim_kind_name(o->kind), cli_precision_name(o->precision),
                   rates[nrep / 2], rates[nrep / 2] * (double)o->batch, nrep, o->steps,
                   o->warmup, rates[0], rates[nrep - 1], peak);
        free(text);
    }
    step_state_free(&s);
    return rc;
}

/* Whether --model reads token ids (a spec file's or text's first layer embed): a language
 * model's bench. A spec that does not parse is not one; its error comes from the real parse. */
static bool is_language_model(const char *model)
{
    clt_spec spec = {0};
    bool lm = (access(model, R_OK) == 0 ? clt_spec_parse_file(model, 65, &spec)
                                        : clt_spec_parse(model, 65, &spec)) == CLT_OK &&
              clt_spec_takes_tokens(&spec);
    clt_spec_free(&spec);
    return lm;
}

/* A language model's defaults for the flags not given: V 65 (tiny-shakespeare's characters), T
 * the preset's window (else 64), nanoGPT's batch (gpt-char 64, else 12), steps as
 * tools/torch_gpt.py --bench times them (3 warm-up). */
static int language_model_defaults(struct step_bench *o, const char *shape_text,
                                   bool features_seen, const bool seen[5])
{
    if (shape_text || features_seen)
        return cli_usage_error("--model %s reads token ids: its input is --block T tokens, not "
                               "--%s", o->model, shape_text ? "input-shape" : "features");
    if (!seen[0]) o->classes = 65;
    cli_lm_defaults(o->model, o->block ? NULL : &o->block, seen[1] ? NULL : &o->batch);
    if (!seen[2]) o->steps = 10;
    if (!seen[3]) o->warmup = 3;
    o->features = o->block;
    return CLI_OK;
}

int cli_bench(int argc, char **argv)
{
    const char *model = "mlp", *device = NULL, *optimizer = "adam", *data = NULL,
               *loader = "all", *shape_text = NULL, *precision = "fp32";
    long batch = 128, steps = 200, warmup = 10, features = 784, classes = 10, repeats = 3,
         epochs = 1, log_every = 100, prefetch = 3;
    bool no_pin = false, features_seen = false;
    bool seen[5] = {false}; /* --classes, --batch-size, --steps, --warmup, --optimizer */
    long block = 0;
    const struct cli_opt opts[] = {
        {"data", OPT_STR, &data,
         "benchmark the data loaders on this data set (fashion-mnist, mnist, idx:, csv:)", NULL},
        {"epochs", OPT_POS_INT, &epochs, "--data: timed epochs per loader (1)", NULL},
        {"loader", OPT_STR, &loader, "--data: all (default), resident or streaming", NULL},
        {"no-pin", OPT_FLAG, &no_pin, "--data --loader streaming: pageable staging", NULL},
        {"prefetch", OPT_POS_INT, &prefetch, "--data: streaming staging buffers (3)", NULL},
        {"log-every", OPT_NONNEG_INT, &log_every, "--data: steps between loss reads (100)",
         NULL},
        {"model", OPT_STR, &model, cli_model_help("mlp"), NULL},
        {"batch-size", OPT_POS_INT, &batch,
         "samples per step (128; a language model's windows: 12, gpt-char 64)", &seen[1]},
        {"block", OPT_POS_INT, &block,
         "a language model's window T (the preset's: gpt-mini 64, gpt-char 256; else 64)", NULL},
        {"steps", OPT_POS_INT, &steps, "timed steps per repeat (200; a language model 10)",
         &seen[2]},
        {"warmup", OPT_NONNEG_INT, &warmup, "untimed steps first (10; a language model 3)",
         &seen[3]},
        {"repeats", OPT_POS_INT, &repeats, "timed repeats; the median is reported (3)", NULL},
        {"features", OPT_POS_INT, &features, "input width (784)", &features_seen},
        {"input-shape", OPT_STR, &shape_text,
         "one sample's shape C,H,W or T,C (1,28,28 unless --features is given)", NULL},
        {"classes", OPT_POS_INT, &classes,
         "output width (10); a language model's vocabulary V (65)", &seen[0]},
        {"optimizer", OPT_STR, &optimizer,
         "sgd, adam or adamw (adam; a language model: AdamW, betas 0.9,0.99, weight decay 0.1, "
         "clipped to norm 1)",
         &seen[4]},
        {"precision", OPT_STR, &precision,
         "fp32 (default), bf16 or fp16 (mixed precision, as cltrain train)", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0) {
            cli_print_help("bench", "cltrain bench [options]", opts);
            return CLI_OK;
        }
    int rc = cli_parse(argc, argv, opts, "bench");
    if (rc != CLI_OK) return rc;
    clt_optim_kind kind;
    if (clt_optim_parse_kind(optimizer, &kind) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    if (data) {
        struct data_bench o = {data, model, device, loader, epochs, batch, warmup, log_every,
                               prefetch, no_pin};
        return bench_data(&o);
    }
    struct step_bench o = {model, device, kind, batch, steps, warmup, features, classes, repeats,
                           {0, 0, 0}, CLT_DTYPE_F32, block};
    if (cli_parse_precision(precision, &o.precision) != CLI_OK) return CLI_USAGE;
    bool lm = is_language_model(model);
    if (lm) {
        rc = language_model_defaults(&o, shape_text, features_seen, seen);
        if (rc != CLI_OK) return rc;
        return bench_steps(&o, !seen[4]);
    }
    if (block) return cli_usage_error("--block %ld: for a language model (a spec starting with "
                                      "embed), not --model %s", block, model);
    if (shape_text) {
        if (cli_parse_shape("input-shape", shape_text, o.shape) != CLI_OK) return CLI_USAGE;
        size_t n = o.shape[0] * o.shape[1] * (o.shape[2] ? o.shape[2] : 1);
        if (features_seen && (size_t)features != n)
            return cli_usage_error("--input-shape %s has %zu elements but --features is %ld",
                                   shape_text, n, features);
        o.features = (long)n;
    } else if (!features_seen) {
        o.shape[0] = 1; /* the default 784 features: a Fashion-MNIST image */
        o.shape[1] = o.shape[2] = 28;
    }
    return bench_steps(&o, false);
}
