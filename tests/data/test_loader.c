/* Tests of the data loader (src/data/loader.c) in both modes: every sample of an epoch exactly
 * once in the seed's order (shuffled or not, a last partial batch or drop_last, a run starting
 * mid-epoch), inputs and labels paired, prefetch 2 and 4, pinned and pageable staging; the
 * same weights, bit for bit, from resident and streaming training; a loader failure (the
 * fail_at hook and CLTRAIN_LOADER_FAIL_AT) surfacing as a status without a hang; the exact
 * host-wait count of a 3-epoch streaming run; Ctrl-C through the interrupt flag; the auto
 * choice; a fresh loader's first batches (ordered after its buffers' zero fill); the batch
 * assembly kernel (clt_op_gather_rows) against the host, bit for bit. Data sets are tiny and
 * made in memory; each test creates its own ctx (check forks).
 *
 * Under Oclgrind (CLTRAIN_DEVICE=gpu oclgrind --data-races build/tests/test_loader, 21 s) this
 * program once failed twice. Both were looked into with gdb, the Oclgrind 21.10 sources and
 * reduced reproductions:
 * - test_same_bits, "streaming prefetch 2 pinned: losses differ from resident (step 1:
 *   1.51097608 vs 1.57650423)": a cltrain bug. clt__buffer_alloc zero-fills every new buffer on
 *   the compute queue; a staging slot's first upload went on the transfer queue with no event
 *   after that fill, so the fill could run after the upload and zero the batch (Oclgrind runs a
 *   queue's commands at its clFlush, so there always; on PoCL one fresh loader in about 20,
 *   whenever the fill was late). The same numbers came with every OpenCL call serialised, and
 *   the first batch read back as x = 0 (its values were the shifts -mean/sd). Fixed in
 *   src/data/loader.c (a marker after the fills is each slot's first "consumed" event);
 *   test_first_batches is the regression test, and failed before the fix on both devices.
 * - test_order_u8 (or _f32, by timing), SIGSEGV: an Oclgrind limitation. Its runtime is not
 *   thread-safe, which OpenCL 1.2 requires (all calls but clSetKernelArg on one kernel): in
 *   src/runtime/async_queue.cpp the command, event and wait-list maps are unlocked globals,
 *   Queue::enqueue pushes onto an unlocked std::list, and clFlush is clFinish, executing the
 *   queue, and the commands its wait lists name on other queues, on the calling thread. The
 *   backtraces: the loader thread in clFlush -> clFinish -> asyncQueueRelease (SIGSEGV) or in
 *   clEnqueueWriteBuffer -> asyncEnqueue -> operator new ("malloc(): unaligned tcache chunk
 *   detected"), while the training thread is in clFlush -> clFinish -> Queue::finish ->
 *   Queue::execute. A standalone program without cltrain (two threads, one in-order queue each,
 *   one context; A uploads with B's latest marker in its wait list and flushes, B launches a
 *   kernel, enqueues a marker and flushes; 5000 rounds) crashed 3 of 20 runs under Oclgrind
 *   and 0 of 20 on PoCL; with every cl* call behind one process-wide mutex (an LD_PRELOAD shim
 *   over Oclgrind: the behaviour a thread-safe runtime must have) 0 of 20, and this program's
 *   SIGSEGV disappeared too. So on Oclgrind the loader produces the batches on the training
 *   thread (same ring, events and waits; test_first_batches checks the loader says so); on
 *   every other platform the thread runs and nothing here is checked less. */
#include "common.h"

#include "cltrain/checkpoint.h"
#include "cltrain/loader.h"
#include "cltrain/model.h"
#include "cltrain/spec.h"
#include "cltrain/train.h"
#include "ops/ops_internal.h"
#include "runtime/rng_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data sets ---------------------------------------------------------------------------- */

enum { F = 6, CLASSES = 5 };

/* The label is a function of the pixels, so a batch whose labels and inputs come from
 * different samples fails the check. */
static int32_t label_of(const uint8_t *px)
{
    return (int32_t)((px[0] + 3 * px[1] + px[2] + px[5]) % CLASSES);
}

/* u8 images: pixels 0 and 1 hold the sample's index (little-endian), the others random. */
struct u8set {
    clt_dataset d;
    uint8_t *x;
    int32_t *y;
};

static void u8set_make(struct u8set *s, tc_rng *r, size_t n)
{
    memset(s, 0, sizeof *s);
    s->x = malloc(n * F);
    s->y = malloc(n * sizeof *s->y);
    ck_assert(s->x && s->y && n < 65536);
    tc_fill_bytes(r, s->x, n * F);
    for (size_t i = 0; i < n; i++) {
        s->x[i * F] = (uint8_t)(i & 0xff);
        s->x[i * F + 1] = (uint8_t)(i >> 8);
        s->y[i] = label_of(s->x + i * F);
    }
    s->d.n = n;
    s->d.features = F;
    s->d.sample_ndim = 3;
    s->d.sample_shape[0] = 1;
    s->d.sample_shape[1] = 2;
    s->d.sample_shape[2] = 3;
    s->d.u8 = s->x;
    s->d.labels = s->y;
    s->d.classes = CLASSES;
    s->d.task = CLT_TASK_CLASSIFICATION;
    s->d.input_scale = 1.0f / 255.0f;
    snprintf(s->d.source, sizeof s->d.source, "u8 test data");
}

/* f32 values: feature 0 holds the index, the target is a function of the features. */
struct f32set {
    clt_dataset d;
    float *x, *t;
};

static float target_of(const float *x)
{
    return x[1] - 2.0f * x[2] + x[0];
}

static void f32set_make(struct f32set *s, tc_rng *r, size_t n)
{
    memset(s, 0, sizeof *s);
    s->x = malloc(n * F * sizeof *s->x);
    s->t = malloc(n * sizeof *s->t);
    ck_assert(s->x && s->t);
    tc_fill_nonzero(r, s->x, n * F, 0.1f, 2.0f);
    for (size_t i = 0; i < n; i++) {
        s->x[i * F] = (float)i;
        s->t[i] = target_of(s->x + i * F);
    }
    s->d.n = n;
    s->d.features = F;
    s->d.sample_ndim = 1;
    s->d.sample_shape[0] = F;
    s->d.f32 = s->x;
    s->d.targets = s->t;
    s->d.classes = 1;
    s->d.task = CLT_TASK_REGRESSION;
    s->d.input_scale = 1.0f;
    snprintf(s->d.source, sizeof s->d.source, "f32 test data");
}

/* ---- order and pairing -------------------------------------------------------------------- */

struct cfg {
    clt_loader_mode mode;
    int prefetch;
    bool pinned;
};
static const struct cfg CFGS[] = {
    {CLT_LOADER_RESIDENT, 3, true},
    {CLT_LOADER_STREAMING, 2, true},
    {CLT_LOADER_STREAMING, 4, true},
    {CLT_LOADER_STREAMING, 3, false},
};
enum { NCFG = sizeof CFGS / sizeof *CFGS };

static const char *cfg_name(const struct cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s prefetch %d %s", clt_loader_mode_name(c->mode), c->prefetch,
             c->pinned ? "pinned" : "pageable");
    return buf;
}

/* Runs the loader over `epochs` epochs from global step `first`, copying every batch on the
 * device into one record (no host wait until the end, so the ring runs at full speed), then
 * checks each batch against the seed's order, the pairing of inputs and labels, and that each
 * epoch holds every sample exactly once (at most once with drop_last). */
static void check_order(clt_ctx *ctx, const clt_dataset *d, const struct cfg *c, size_t bs,
                        bool shuffle, bool drop_last, int epochs, long first, uint64_t seed)
{
    char name[96], what[1024];
    cfg_name(c, name, sizeof name);
    snprintf(what, sizeof what, "%s, %s, n %zu, batch %zu, %s%s, first step %ld", d->source, name,
             d->n, bs, shuffle ? "shuffled" : "file order", drop_last ? ", drop_last" : "", first);
    const size_t n = d->n;
    const bool u8 = d->u8 != NULL;
    struct clt_loader_params lp = clt_loader_default_params();
    lp.mode = c->mode;
    lp.prefetch = c->prefetch;
    lp.pinned = c->pinned;
    lp.batch_size = bs + 3; /* batches smaller than the largest */
    struct clt_input_norm norm = {.features = F, .scale = 1.0f};
    clt_loader *l = NULL;
    TC_OK(ctx, clt_loader_create(&l, ctx, d, &norm, &lp));
    ck_assert_int_eq(clt_loader_mode_of(l), c->mode);
    long spe = clt_loader_steps_per_epoch(n, bs, drop_last), total = epochs * spe;
    ck_assert_int_eq(spe, drop_last ? (long)(n / bs) : (long)((n + bs - 1) / bs));

    size_t rows = (size_t)total * bs, xd[2] = {rows, F};
    clt_tensor *xr = NULL, *yr = NULL, *iota = NULL;
    TC_OK(ctx, clt_tensor_create(&xr, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&yr, ctx, clt_loader_label_dtype(l), 1, &rows, CLT_MEM_OTHER));
    TC_OK(ctx, clt_tensor_create(&iota, ctx, CLT_DTYPE_I32, 1, &bs, CLT_MEM_OTHER));
    tc_poison(xr);
    tc_poison(yr);
    int32_t *io = malloc(bs * sizeof *io);
    for (size_t i = 0; i < bs; i++) io[i] = (int32_t)i;
    tc_write(iota, io);
    free(io);
    size_t *sizes = calloc((size_t)total, sizeof *sizes);

    struct clt_loader_order o = {bs, shuffle, drop_last, seed, first, total, 0, 0, 0, 0};
    TC_OK(ctx, clt_loader_start(l, &o));
    for (long g = first; g < total; g++) {
        struct clt_batch b;
        TC_OK(ctx, clt_loader_next(l, &b));
        ck_assert_int_eq(b.step, g);
        ck_assert_int_eq(b.epoch, g / spe);
        size_t start = (size_t)(g % spe) * bs, want = n - start < bs ? n - start : bs;
        ck_assert_msg(b.size == want, "%s: step %ld has %zu samples, expected %zu", what, g,
                      b.size, want);
        ck_assert_uint_eq(clt_tensor_dim(b.x, 0), b.size);
        ck_assert_uint_eq(clt_tensor_dim(b.x, 1), F);
        sizes[g] = b.size;
        clt_tensor *xv = NULL, *yv = NULL, *iv = NULL;
        size_t vd[2] = {b.size, F};
        TC_OK(ctx, clt_tensor_view(&xv, xr, (size_t)g * bs * F, 2, vd));
        TC_OK(ctx, clt_tensor_view(&yv, yr, (size_t)g * bs, 1, &b.size));
        TC_OK(ctx, clt_tensor_view(&iv, iota, 0, 1, &b.size));
        TC_OK(ctx, clt_op_copy(xv, b.x));
        TC_OK(ctx, clt_op_gather(yv, b.y, iv));
        clt_tensor_free(xv);
        clt_tensor_free(yv);
        clt_tensor_free(iv);
    }
    struct clt_batch extra;
    ck_assert_int_eq(clt_loader_next(l, &extra), CLT_ERR_STATE); /* the run is used up */
    TC_OK(ctx, clt_loader_stop(l));

    float *x = malloc(rows * F * sizeof *x);
    float *y = malloc(rows * sizeof *y); /* i32 or f32, 4 bytes each */
    uint32_t *perm = malloc(n * sizeof *perm);
    int *seen = malloc(n * sizeof *seen);
    ck_assert(x && y && perm && seen);
    tc_read(xr, x);
    tc_read(yr, y);
    for (long e = first / spe; e < epochs; e++) {
        if (shuffle)
            clt_rng_permutation(seed, clt_rng_stream(CLT_RNG_SHUFFLE, (uint64_t)e), perm, n);
        else
            for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
        memset(seen, 0, n * sizeof *seen);
        size_t count = 0;
        for (long s = e == first / spe ? first % spe : 0; s < spe; s++) {
            long g = e * spe + s;
            for (size_t j = 0; j < sizes[g]; j++) {
                const float *row = x + ((size_t)g * bs + j) * F;
                size_t want = perm[(size_t)s * bs + j];
                size_t got = u8 ? (size_t)row[0] + 256 * (size_t)row[1] : (size_t)row[0];
                ck_assert_msg(got == want, "%s: epoch %ld step %ld row %zu is sample %zu, the "
                              "seed's order says %zu", what, e, s, j, got, want);
                for (int f = 0; f < F; f++) {
                    float v =
                        u8 ? (float)d->u8[want * F + (size_t)f] : d->f32[want * F + (size_t)f];
                    ck_assert_msg(row[f] == v, "%s: sample %zu feature %d: %g, stored %g", what,
                                  want, f, (double)row[f], (double)v);
                }
                const float *yy = y + (size_t)g * bs + j;
                if (u8) {
                    uint8_t px[F];
                    for (int f = 0; f < F; f++) px[f] = (uint8_t)row[f];
                    int32_t lab;
                    memcpy(&lab, yy, 4);
                    ck_assert_msg(lab == label_of(px) && lab == d->labels[want],
                                  "%s: sample %zu has label %d, its pixels say %d", what, want,
                                  lab, label_of(px));
                } else {
                    ck_assert_msg(*yy == target_of(row) && *yy == d->targets[want],
                                  "%s: sample %zu has target %g, its features say %g", what, want,
                                  (double)*yy, (double)target_of(row));
                }
                seen[want]++;
                count++;
            }
        }
        if (e > first / spe || first % spe == 0) {
            size_t expect = drop_last ? (size_t)spe * bs : n, once = 0;
            for (size_t i = 0; i < n; i++) {
                ck_assert_msg(seen[i] <= 1, "%s: epoch %ld has sample %zu %d times", what, e, i,
                              seen[i]);
                once += seen[i] == 1;
            }
            ck_assert_msg(count == expect && once == expect,
                          "%s: epoch %ld has %zu samples (%zu distinct), expected %zu", what, e,
                          count, once, expect);
        }
    }
    struct clt_loader_stats ls = clt_loader_stats(l);
    ck_assert_int_eq(ls.batches, total - first);
    if (c->mode == CLT_LOADER_STREAMING) {
        ck_assert_int_eq(ls.uploads, total - first);
        long reuse = total - first - c->prefetch;
        ck_assert_int_eq(ls.waits, reuse > 0 ? reuse : 0);
    } else {
        ck_assert_int_eq(ls.uploads, 0);
        ck_assert_int_eq(ls.waits, 0);
    }
    free(x);
    free(y);
    free(perm);
    free(seen);
    free(sizes);
    clt_tensor_free(xr);
    clt_tensor_free(yr);
    clt_tensor_free(iota);
    clt_loader_free(l);
}

START_TEST(test_order_u8)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set s;
    u8set_make(&s, &r, 300); /* indices above 255: both index bytes matter */
    for (int c = 0; c < NCFG; c++) {
        check_order(ctx, &s.d, &CFGS[c], 16, true, false, 2, 0, 42);  /* last batch of 12 */
        check_order(ctx, &s.d, &CFGS[c], 16, true, true, 2, 0, 42);   /* dropped */
        check_order(ctx, &s.d, &CFGS[c], 16, false, false, 1, 0, 42); /* file order */
        check_order(ctx, &s.d, &CFGS[c], 7, true, false, 3, 50, 9);   /* from mid-epoch 2 */
    }
    free(s.x);
    free(s.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_order_f32)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct f32set s;
    f32set_make(&s, &r, 37);
    for (int c = 0; c < NCFG; c++) {
        check_order(ctx, &s.d, &CFGS[c], 5, true, false, 3, 0, 7); /* last batch of 2 */
        check_order(ctx, &s.d, &CFGS[c], 5, true, true, 2, 3, 7);
        check_order(ctx, &s.d, &CFGS[c], 1, false, false, 1, 0, 7); /* batches of one */
        check_order(ctx, &s.d, &CFGS[c], 37, true, false, 2, 0, 7); /* one batch per epoch */
    }
    free(s.x);
    free(s.t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A fresh streaming loader's first batch in each staging slot, read back at once: its device
 * buffers were zero-filled on the compute queue when created, and the slot's first upload (on
 * the transfer queue) must come after that fill. Without the event between them this test
 * failed on every Oclgrind loader and, on PoCL, on 2, 18, 18 and 5 of 150 loaders in four runs
 * (prefetch 2), hence the many fresh loaders; no pixel is 0, so a zeroed batch fails. On
 * Oclgrind (deterministic there, and slow) a few suffice. */
START_TEST(test_first_batches)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set s;
    u8set_make(&s, &r, 40);
    for (size_t i = 0; i < 40; i++) {
        for (size_t f = 0; f < F; f++)
            if (s.x[i * F + f] == 0) s.x[i * F + f] = 1;
        s.y[i] = label_of(s.x + i * F);
    }
    const bool oclgrind = tc_contains(clt_ctx_device(ctx)->platform_name, "Oclgrind");
    const int runs = oclgrind ? 3 : 150;
    const size_t bs = 8;
    struct clt_input_norm norm = {.features = F, .scale = 1.0f};
    float got[8 * F];
    int32_t lab[8];
    for (int c = 1; c < NCFG; c++) {
        char name[96];
        cfg_name(&CFGS[c], name, sizeof name);
        int bad_runs = 0;
        for (int run = 0; run < runs; run++) {
            struct clt_loader_params lp = clt_loader_default_params();
            lp.mode = CFGS[c].mode;
            lp.prefetch = CFGS[c].prefetch;
            lp.pinned = CFGS[c].pinned;
            lp.batch_size = bs;
            clt_loader *l = NULL;
            TC_OK(ctx, clt_loader_create(&l, ctx, &s.d, &norm, &lp));
            if (run == 0)
                ck_assert_msg(tc_contains(clt_loader_describe(l), "on the training thread") ==
                                  oclgrind,
                              "%s", clt_loader_describe(l));
            struct clt_loader_order o = {bs, false, false, 1, 0, CFGS[c].prefetch, 0, 0, 0, 0};
            TC_OK(ctx, clt_loader_start(l, &o));
            bool bad = false;
            for (int k = 0; k < CFGS[c].prefetch; k++) {
                struct clt_batch b;
                TC_OK(ctx, clt_loader_next(l, &b));
                ck_assert_uint_eq(b.size, bs);
                tc_read(b.x, got);
                tc_read(b.y, lab);
                for (size_t i = 0; i < bs * F; i++)
                    bad |= got[i] != (float)s.x[(size_t)k * bs * F + i];
                for (size_t i = 0; i < bs; i++) bad |= lab[i] != s.y[(size_t)k * bs + i];
            }
            bad_runs += bad;
            TC_OK(ctx, clt_loader_stop(l));
            clt_loader_free(l);
        }
        ck_assert_msg(bad_runs == 0,
                      "%s: %d of %d fresh loaders handed out first batches that are not the "
                      "stored samples", name, bad_runs, runs);
    }
    free(s.x);
    free(s.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- training through the loader ---------------------------------------------------------- */

#define MAXLOG 64
struct capture {
    int nlog, nepoch, neval, nsave;
    double loss[MAXLOG];
    long log_step[MAXLOG];
    struct clt_train_event last_epoch;
    volatile sig_atomic_t *raise_flag; /* raised at step raise_at */
    long raise_at;
};

static void on_event(const struct clt_train_event *e, void *user)
{
    struct capture *c = user;
    switch (e->kind) {
    case CLT_EVENT_LOG:
        ck_assert_int_lt(c->nlog, MAXLOG);
        c->loss[c->nlog] = e->loss;
        c->log_step[c->nlog++] = e->step;
        if (c->raise_flag && e->step == c->raise_at) *c->raise_flag = 1;
        break;
    case CLT_EVENT_EPOCH:
        c->nepoch++;
        c->last_epoch = *e;
        break;
    case CLT_EVENT_EVAL: c->neval++; break;
    case CLT_EVENT_SAVE: c->nsave++; break;
    case CLT_EVENT_BACKOFF: ck_abort_msg("no backoff without auto_batch"); break;
    }
}

struct run {
    clt_status st;
    char msg[1024];
    float *params;
    size_t P;
    struct clt_ctx_stats before, after;
    struct clt_loader_stats loader;
    long step;
};

/* Trains a fresh "linear 12, relu, dropout 0.1, linear 5" (seed 3) on u8 data standardised
 * with per-feature statistics, batches from a loader of the given configuration. */
static struct run train_run(clt_ctx *ctx, const struct u8set *tr, const struct u8set *te,
                            const struct cfg *c, const struct clt_train_params *tp_in,
                            long fail_at, const char *resume, struct capture *cap)
{
    struct run o;
    memset(&o, 0, sizeof o);
    float mean[F], sd[F];
    ck_assert_int_eq(clt_dataset_stats(&tr->d, mean, sd), CLT_OK);
    struct clt_input_norm norm = {.features = F, .scale = tr->d.input_scale, .mean = mean,
                                  .std = sd};
    clt_spec spec = {0};
    const char *text = "linear 12, relu, dropout 0.1, linear 5";
    ck_assert_int_eq(clt_spec_parse(text, 0, &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = 3;
    mp.max_batch = tp_in->batch_size;
    clt_model *m = NULL;
    clt_loader *l = NULL;
    clt_resident *rte = NULL;
    clt_trainer *t = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, F, CLASSES, &mp));
    struct clt_loader_params lp = clt_loader_default_params();
    lp.mode = c->mode;
    lp.prefetch = c->prefetch;
    lp.pinned = c->pinned;
    lp.batch_size = tp_in->batch_size;
    lp.fail_at = fail_at;
    TC_OK(ctx, clt_loader_create(&l, ctx, &tr->d, &norm, &lp));
    if (te) TC_OK(ctx, clt_resident_create(&rte, ctx, &te->d, &norm));
    if (resume) {
        clt_checkpoint *ck = NULL;
        ck_assert_msg(clt_checkpoint_open(&ck, resume) == CLT_OK, "%s", clt_last_errmsg());
        TC_OK(ctx, clt_checkpoint_load_model(ck, m));
        clt_checkpoint_close(ck);
    }
    struct clt_train_params tp = *tp_in;
    tp.on_event = on_event;
    tp.user = cap;
    TC_OK(ctx, clt_trainer_create(&t, m, l, rte, &tp));
    if (resume) TC_OK(ctx, clt_trainer_resume(t, resume));
    o.before = clt_ctx_stats(ctx);
    o.st = clt_trainer_run(t);
    o.after = clt_ctx_stats(ctx);
    o.loader = clt_loader_stats(l);
    o.step = clt_optim_steps(clt_trainer_optim(t));
    snprintf(o.msg, sizeof o.msg, "%s", clt_ctx_errmsg(ctx));
    /* nothing waits forever on the queues after a failure: this returns */
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_SETUP));
    o.P = clt_tensor_numel(clt_model_params(m));
    o.params = malloc(o.P * sizeof *o.params);
    TC_OK(ctx, clt_model_read_params(m, o.params, CLT_WAIT_READ));
    clt_trainer_free(t);
    clt_loader_free(l);
    clt_resident_free(rte);
    clt_model_free(m);
    clt_spec_free(&spec);
    return o;
}

static struct clt_train_params params(int epochs, size_t bs, long log_every)
{
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = epochs;
    tp.batch_size = bs;
    tp.log_every = log_every;
    tp.seed = 21;
    tp.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    tp.optim.lr = 0.01f;
    return tp;
}

/* Resident, streaming with prefetch 2, 3 (pageable) and 4: the same losses and the same
 * weights, bit for bit, after 2 shuffled epochs with a partial last batch and dropout. (Under
 * Oclgrind this is what first showed the zeroed first batches: see the top of the file.) */
START_TEST(test_same_bits)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set s;
    u8set_make(&s, &r, 90);
    struct clt_train_params tp = params(2, 16, 1); /* 6 steps per epoch, the last of 10 */
    struct capture c0;
    memset(&c0, 0, sizeof c0);
    struct run base = train_run(ctx, &s, NULL, &CFGS[0], &tp, -1, NULL, &c0);
    ck_assert_msg(base.st == CLT_OK, "%s", base.msg);
    ck_assert_int_eq(c0.nlog, 12);
    for (int c = 1; c < NCFG; c++) {
        char name[96];
        struct capture ci;
        memset(&ci, 0, sizeof ci);
        struct run o = train_run(ctx, &s, NULL, &CFGS[c], &tp, -1, NULL, &ci);
        cfg_name(&CFGS[c], name, sizeof name);
        ck_assert_msg(o.st == CLT_OK, "%s: %s", name, o.msg);
        ck_assert_int_eq(ci.nlog, 12);
        ck_assert_msg(memcmp(c0.loss, ci.loss, sizeof c0.loss) == 0,
                      "%s: losses differ from resident (step 1: %.9g vs %.9g)", name, ci.loss[0],
                      c0.loss[0]);
        size_t differ = 0;
        for (size_t i = 0; i < o.P; i++) differ += base.params[i] != o.params[i];
        ck_assert_msg(differ == 0, "%s: %zu of %zu weights differ from resident", name, differ,
                      o.P);
        ck_assert_int_eq(o.loader.uploads, 12);
        free(o.params);
    }
    free(base.params);
    free(s.x);
    free(s.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------- */

/* The loader fails at batch 5 (hook), at batch 0, through CLTRAIN_LOADER_FAIL_AT, in resident
 * mode; a training-side failure (NaN loss) while the thread runs. Each run returns a status with
 * a message, the queues drain (train_run finishes the ctx), everything is freed. */
START_TEST(test_errors)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set s;
    u8set_make(&s, &r, 90);
    struct clt_train_params tp = params(3, 16, 2);
    const struct cfg stream = {CLT_LOADER_STREAMING, 3, true};
    static const long at[] = {5, 0, 17};
    for (int i = 0; i < 3; i++) {
        struct capture c;
        memset(&c, 0, sizeof c);
        struct run o = train_run(ctx, &s, NULL, &stream, &tp, at[i], NULL, &c);
        ck_assert_msg(o.st == CLT_ERR_IO, "fail_at %ld: %s: %s", at[i], clt_status_name(o.st),
                      o.msg);
        ck_assert_msg(tc_contains(o.msg, "data loader") && tc_contains(o.msg, "injected"),
                      "fail_at %ld: message: %s", at[i], o.msg);
        ck_assert_int_eq(o.step, at[i]); /* the batches before it were trained on */
        free(o.params);
    }
    /* the environment variable, read when the loader is created */
    setenv("CLTRAIN_LOADER_FAIL_AT", "2", 1);
    struct capture c;
    memset(&c, 0, sizeof c);
    struct run o = train_run(ctx, &s, NULL, &stream, &tp, -1, NULL, &c);
    ck_assert_msg(o.st == CLT_ERR_IO && o.step == 2, "env: %s: %s", clt_status_name(o.st), o.msg);
    free(o.params);
    o = train_run(ctx, &s, NULL, &CFGS[0], &tp, -1, NULL, &c); /* resident honours it too */
    ck_assert_msg(o.st == CLT_ERR_IO && o.step == 2, "resident: %s: %s", clt_status_name(o.st),
                  o.msg);
    free(o.params);
    unsetenv("CLTRAIN_LOADER_FAIL_AT");

    /* a NaN input: the training thread fails at the epoch end while the loader runs ahead */
    s.d.u8 = NULL;
    struct f32set fs;
    f32set_make(&fs, &r, 90);
    for (size_t i = 0; i < 90; i++) fs.x[i * F] = (float)(i % 7); /* keep it small */
    fs.x[10 * F + 3] = NAN;
    s.d.f32 = fs.x;
    tp = params(3, 16, 0);
    memset(&c, 0, sizeof c);
    o = train_run(ctx, &s, NULL, &stream, &tp, -1, NULL, &c);
    ck_assert_msg(o.st == CLT_ERR_NUMERIC, "NaN: %s: %s", clt_status_name(o.st), o.msg);
    ck_assert_int_eq(c.nepoch, 0);
    free(o.params);
    s.d.f32 = NULL;
    s.d.u8 = s.x;

    /* bad parameters and calls out of order */
    struct clt_loader_params lp = clt_loader_default_params();
    struct clt_input_norm norm = {.features = F, .scale = 1.0f};
    clt_loader *l = NULL;
    lp.prefetch = 1;
    ck_assert_int_eq(clt_loader_create(&l, ctx, &s.d, &norm, &lp), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "--prefetch 1"));
    lp = clt_loader_default_params();
    lp.batch_size = 0;
    ck_assert_int_eq(clt_loader_create(&l, ctx, &s.d, &norm, &lp), CLT_ERR_INVALID_ARG);
    norm.features = F + 1;
    lp.batch_size = 8;
    ck_assert_int_eq(clt_loader_create(&l, ctx, &s.d, &norm, &lp), CLT_ERR_SHAPE);
    ck_assert_ptr_null(l);
    norm.features = F;
    lp.mode = CLT_LOADER_STREAMING;
    TC_OK(ctx, clt_loader_create(&l, ctx, &s.d, &norm, &lp));
    struct clt_batch b;
    ck_assert_int_eq(clt_loader_next(l, &b), CLT_ERR_STATE); /* not started */
    struct clt_loader_order ord = {9, true, false, 1, 0, 4, 0, 0, 0, 0}; /* batch 9 > 8 */
    ck_assert_int_eq(clt_loader_start(l, &ord), CLT_ERR_INVALID_ARG);
    ord.batch_size = 8;
    ord.batches_per_epoch = 1000; /* more batches than an epoch has */
    ck_assert_int_eq(clt_loader_start(l, &ord), CLT_ERR_INVALID_ARG);
    ord.batches_per_epoch = 0;
    TC_OK(ctx, clt_loader_start(l, &ord));
    ck_assert_int_eq(clt_loader_start(l, &ord), CLT_ERR_STATE);
    TC_OK(ctx, clt_loader_next(l, &b));
    TC_OK(ctx, clt_loader_stop(l)); /* with batches uploaded and never taken */
    TC_OK(ctx, clt_loader_stop(l));
    TC_OK(ctx, clt_loader_start(l, &ord)); /* a second run reuses the ring */
    for (int i = 0; i < 4; i++) TC_OK(ctx, clt_loader_next(l, &b));
    TC_OK(ctx, clt_loader_stop(l));
    clt_loader_free(l);

    free(fs.x);
    free(fs.t);
    free(s.x);
    free(s.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- host waits --------------------------------------------------------------------------- */

/* A 3-epoch streaming run, 90 samples in batches of 16 (6 steps per epoch, 18 in all), log
 * every 4 steps, a test split: the training thread waits once per log point or epoch end (the
 * loss read) and once per evaluation, nothing else; the loader thread waits once per reuse of
 * a staging buffer (18 - prefetch), reported under CLT_WAIT_LOADER in the events only. */
START_TEST(test_host_waits)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set tr, te;
    u8set_make(&tr, &r, 90);
    u8set_make(&te, &r, 20);
    struct clt_train_params tp = params(3, 16, 4);
    for (int prefetch = 2; prefetch <= 4; prefetch += 2) {
        const struct cfg stream = {CLT_LOADER_STREAMING, prefetch, true};
        struct capture c;
        memset(&c, 0, sizeof c);
        struct run o = train_run(ctx, &tr, &te, &stream, &tp, -1, NULL, &c);
        ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
        long reads = 0;
        for (long k = 1; k <= 18; k++) reads += k % 4 == 0 || k % 6 == 0;
        ck_assert_int_eq(reads, 6); /* steps 4, 6, 8, 12, 16, 18 */
        ck_assert_int_eq(c.nlog, 4);
        ck_assert_int_eq(c.neval, 3);
        for (int k = 0; k < CLT_WAIT__COUNT; k++) {
            long d = o.after.host_waits[k] - o.before.host_waits[k];
            long want = k == CLT_WAIT_LOG ? reads : k == CLT_WAIT_EVAL ? 3 : 0;
            ck_assert_msg(d == want, "prefetch %d: host waits for %s: %ld, expected %ld",
                          prefetch, clt_wait_reason_name((clt_wait_reason)k), d, want);
        }
        ck_assert_int_eq(o.after.host_waits_total - o.before.host_waits_total, reads + 3);
        ck_assert_int_eq(o.loader.uploads, 18);
        ck_assert_int_eq(o.loader.waits, 18 - prefetch);
        ck_assert_int_eq(c.last_epoch.loader.waits, 18 - prefetch);
        ck_assert_int_eq(c.last_epoch.stats.host_waits[CLT_WAIT_LOADER], 18 - prefetch);
        ck_assert(o.loader.stall_s >= 0 && o.loader.wait_s >= 0);
        free(o.params);
    }
    free(tr.x);
    free(tr.y);
    free(te.x);
    free(te.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- Ctrl-C ------------------------------------------------------------------------------- */

/* The interrupt flag raised at step 7 (mid-epoch 2) stops a streaming run before step 8 with
 * CLT_ERR_INTERRUPTED and a checkpoint at step 7; resuming from it gives the uninterrupted run's
 * weights bit for bit. */
START_TEST(test_interrupt)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct u8set s;
    u8set_make(&s, &r, 90);
    char dir[4096], path[4200];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    const struct cfg stream = {CLT_LOADER_STREAMING, 3, true};
    struct clt_train_params tp = params(2, 16, 1);
    struct capture c;
    memset(&c, 0, sizeof c);
    struct run full = train_run(ctx, &s, NULL, &stream, &tp, -1, NULL, &c);
    ck_assert_msg(full.st == CLT_OK, "%s", full.msg);

    static volatile sig_atomic_t flag = 0;
    memset(&c, 0, sizeof c);
    c.raise_flag = &flag;
    c.raise_at = 7;
    tp.interrupt = &flag;
    tp.save_path = path;
    struct run cut = train_run(ctx, &s, NULL, &stream, &tp, -1, NULL, &c);
    ck_assert_msg(cut.st == CLT_ERR_INTERRUPTED, "%s: %s", clt_status_name(cut.st), cut.msg);
    ck_assert_msg(tc_contains(cut.msg, "interrupted after step 7") && tc_contains(cut.msg, path),
                  "message: %s", cut.msg);
    ck_assert_int_eq(cut.step, 7);
    ck_assert_int_eq(c.nsave, 1);
    free(cut.params);

    flag = 0;
    tp.interrupt = NULL;
    tp.save_path = NULL;
    memset(&c, 0, sizeof c);
    struct run rest = train_run(ctx, &s, NULL, &stream, &tp, -1, path, &c);
    ck_assert_msg(rest.st == CLT_OK, "%s", rest.msg);
    ck_assert_int_eq(c.nlog, 5);
    ck_assert_int_eq(c.log_step[0], 8);
    size_t differ = 0;
    for (size_t i = 0; i < full.P; i++) differ += full.params[i] != rest.params[i];
    ck_assert_msg(differ == 0, "%zu of %zu weights differ after interrupt and resume", differ,
                  full.P);
    free(full.params);
    free(rest.params);
    remove(path);
    tc_rmdir(dir);
    free(s.x);
    free(s.y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- auto --------------------------------------------------------------------------------- */

/* 1000 samples of 100 u8 features and labels: 101.6 KiB. Under a 256 KiB cap it exceeds a
 * quarter (streaming) and fits whole (resident with fraction 1); with the device's memory it
 * is resident. The description says which and why. */
START_TEST(test_auto)
{
    enum { n = 1000, FF = 100 };
    uint8_t *x = calloc(n * FF, 1);
    int32_t *y = calloc(n, sizeof *y);
    clt_dataset d = {.n = n, .features = FF, .sample_ndim = 1, .sample_shape = {FF}, .u8 = x,
                     .labels = y, .classes = 1, .task = CLT_TASK_CLASSIFICATION,
                     .input_scale = 1.0f, .source = "auto test"};
    struct clt_input_norm norm = {.features = FF, .scale = 1.0f};
    struct clt_loader_params lp = clt_loader_default_params();
    lp.batch_size = 8;
    clt_loader *l = NULL;

    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.max_memory = 256 * 1024;
    clt_ctx *ctx = tc_ctx_with(&cp);
    TC_OK(ctx, clt_loader_create(&l, ctx, &d, &norm, &lp));
    ck_assert_int_eq(clt_loader_mode_of(l), CLT_LOADER_STREAMING);
    ck_assert_msg(tc_contains(clt_loader_describe(l), "streamed") &&
                      tc_contains(clt_loader_describe(l), "auto") &&
                      tc_contains(clt_loader_describe(l), "exceeds 25%"),
                  "%s", clt_loader_describe(l));
    clt_loader_free(l);
    lp.resident_fraction = 1.0;
    TC_OK(ctx, clt_loader_create(&l, ctx, &d, &norm, &lp));
    ck_assert_int_eq(clt_loader_mode_of(l), CLT_LOADER_RESIDENT);
    ck_assert_msg(tc_contains(clt_loader_describe(l), "resident on the device (auto"), "%s",
                  clt_loader_describe(l));
    clt_loader_free(l);
    lp.resident_fraction = 0;
    ck_assert_int_eq(clt_loader_create(&l, ctx, &d, &norm, &lp), CLT_ERR_INVALID_ARG);
    clt_ctx_free(ctx);

    ctx = tc_ctx();
    lp = clt_loader_default_params();
    TC_OK(ctx, clt_loader_create(&l, ctx, &d, &norm, &lp));
    ck_assert_int_eq(clt_loader_mode_of(l), CLT_LOADER_RESIDENT);
    ck_assert_msg(tc_contains(clt_loader_describe(l), "is within 25%"), "%s",
                  clt_loader_describe(l));
    clt_loader_free(l);
    clt_loader_mode m;
    ck_assert_int_eq(clt_loader_mode_parse("yes", &m), CLT_OK);
    ck_assert_int_eq(m, CLT_LOADER_RESIDENT);
    ck_assert_int_eq(clt_loader_mode_parse("streaming", &m), CLT_OK);
    ck_assert_int_eq(m, CLT_LOADER_STREAMING);
    ck_assert_int_eq(clt_loader_mode_parse("sometimes", &m), CLT_ERR_INVALID_ARG);
    clt_ctx_free(ctx);
    free(x);
    free(y);
    tc_assert_no_live();
}
END_TEST

/* ---- augmentation ------------------------------------------------------------------------- */

/* Every batch of a run (epochs x steps of bs) with the augmentation `au`, read back row by row
 * into rows (n_steps * bs, FF) in the order handed out; returns the rows written. */
static size_t augmented_run(clt_ctx *ctx, const clt_dataset *d, const struct cfg *c, size_t bs,
                            const struct clt_augment *au, long first, long total, float *rows)
{
    const size_t FF = d->features;
    struct clt_loader_params lp = clt_loader_default_params();
    lp.mode = c->mode;
    lp.prefetch = c->prefetch;
    lp.pinned = c->pinned;
    lp.batch_size = bs;
    lp.augment = *au;
    struct clt_input_norm norm = {.features = FF, .scale = 1.0f / 255.0f};
    clt_loader *l = NULL;
    struct clt_mem_stats before = clt_ctx_mem_stats(ctx);
    TC_OK(ctx, clt_loader_create(&l, ctx, d, &norm, &lp));
    uint64_t est[CLT_MEM__COUNT] = {0}, sum = 0;
    clt_loader_mem_estimate(ctx, d, &lp, est);
    for (int k = 0; k < CLT_MEM__COUNT; k++) sum += est[k];
    ck_assert_msg(clt_ctx_mem_stats(ctx).current - before.current == sum,
                  "augmenting loader: allocated %llu bytes, estimated %llu",
                  (unsigned long long)(clt_ctx_mem_stats(ctx).current - before.current),
                  (unsigned long long)sum);
    struct clt_loader_order o = {bs, true, false, 11, first, total, 0, 0, 0, 0};
    TC_OK(ctx, clt_loader_start(l, &o));
    size_t at = 0;
    for (long g = first; g < total; g++) {
        struct clt_batch b;
        TC_OK(ctx, clt_loader_next(l, &b));
        tc_read(b.x, rows + at * FF);
        at += b.size;
    }
    TC_OK(ctx, clt_loader_stop(l));
    clt_loader_free(l);
    return at;
}

/* The resident and the streaming loaders hand out the same augmented batches for one seed;
 * the draws follow the sample's position in the epoch, so another batch size or a run resumed
 * mid-epoch gives the same rows; augmentation changes the batches; flat data is refused. */
START_TEST(test_augment_same)
{
    enum { N = 50, C = 3, H = 6, W = 5, FF = C * H * W, EPOCHS = 2 };
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    uint8_t *x = malloc(N * FF);
    int32_t *y = malloc(N * sizeof *y);
    ck_assert(x && y);
    tc_fill_bytes(&r, x, N * FF);
    for (size_t i = 0; i < N; i++) y[i] = (int32_t)(i % CLASSES);
    clt_dataset d = {.n = N, .features = FF, .sample_ndim = 3, .sample_shape = {C, H, W},
                     .u8 = x, .labels = y, .classes = CLASSES,
                     .task = CLT_TASK_CLASSIFICATION, .input_scale = 1.0f / 255.0f};
    snprintf(d.source, sizeof d.source, "augment test images");
    const size_t rows = (size_t)EPOCHS * N;
    float *ref = malloc(rows * FF * sizeof *ref), *got = malloc(rows * FF * sizeof *got);
    ck_assert(ref && got);
    struct clt_augment au = {0};
    TC_OK(NULL, clt_augment_parse("flip,shift=2,cutout=3", &au));
    ck_assert(au.flip && au.shift == 2 && au.cutout == 3);
    const long spe8 = clt_loader_steps_per_epoch(N, 8, false);
    ck_assert_uint_eq(augmented_run(ctx, &d, &CFGS[0], 8, &au, 0, EPOCHS * spe8, ref), rows);
    char name[96];
    for (int c = 1; c < NCFG; c++) {
        memset(got, 0, rows * FF * sizeof *got);
        augmented_run(ctx, &d, &CFGS[c], 8, &au, 0, EPOCHS * spe8, got);
        ck_assert_msg(memcmp(ref, got, rows * FF * sizeof *got) == 0,
                      "%s: other augmented batches than resident", cfg_name(&CFGS[c], name,
                                                                           sizeof name));
    }
    /* batches of 5 instead of 8, both loaders */
    const long spe5 = clt_loader_steps_per_epoch(N, 5, false);
    for (int c = 0; c < 2; c++) {
        memset(got, 0, rows * FF * sizeof *got);
        augmented_run(ctx, &d, &CFGS[c], 5, &au, 0, EPOCHS * spe5, got);
        ck_assert_msg(memcmp(ref, got, rows * FF * sizeof *got) == 0,
                      "batch size 5: other augmented rows than batch size 8");
    }
    /* resumed at step 9 (epoch 1, position 16): the rows from there on */
    memset(got, 0, rows * FF * sizeof *got);
    size_t tail = augmented_run(ctx, &d, &CFGS[1], 8, &au, spe8 + 2, EPOCHS * spe8, got);
    ck_assert_uint_eq(tail, (size_t)N - 16);
    ck_assert_msg(memcmp(ref + ((size_t)N + 16) * FF, got, tail * FF * sizeof *got) == 0,
                  "a resumed run does not continue the augmented sequence");
    /* without augmentation the batches differ */
    struct clt_augment none = {0};
    augmented_run(ctx, &d, &CFGS[0], 8, &none, 0, EPOCHS * spe8, got);
    ck_assert_msg(memcmp(ref, got, rows * FF * sizeof *got) != 0, "augmentation changed nothing");

    /* flat samples: a clear error naming --augment */
    d.sample_ndim = 1;
    d.sample_shape[0] = FF;
    d.sample_shape[1] = d.sample_shape[2] = 0;
    struct clt_loader_params lp = clt_loader_default_params();
    lp.augment = au;
    struct clt_input_norm norm = {.features = FF, .scale = 1.0f};
    clt_loader *l = NULL;
    ck_assert_int_eq(clt_loader_create(&l, ctx, &d, &norm, &lp), CLT_ERR_INVALID_ARG);
    ck_assert(l == NULL);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "--augment") &&
                      tc_contains(clt_ctx_errmsg(ctx), "flat samples"),
                  "message: %s", clt_ctx_errmsg(ctx));
    free(ref);
    free(got);
    free(x);
    free(y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* clt_op_gather_rows, the resident loader's batch assembly, against the host on fresh random
 * rows, indices (repeats included), scales and shifts: u8 and f32 sources, rows that are and are
 * not whole vectors of 16 features, with the device's choice of work-items per row and with 1, 2
 * and one per block of 16 features (a GPU's form); y poisoned first. Exact: y = fma(x, scale,
 * shift) rounds once, as fmaf does. */
START_TEST(test_gather_rows)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t N = 9, B = 6, Fs[] = {5, 16, 37, 48};
    const clt_dtype ds[] = {CLT_DTYPE_U8, CLT_DTYPE_F32};
    for (size_t di = 0; di < 2; di++)
        for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++)
            for (size_t items = 0; items <= 3; items++) { /* 3: one per block */
                const size_t F = Fs[fi], xd[2] = {N, F}, yd[2] = {B, F};
                uint8_t *xu = malloc(N * F);
                float *xf = malloc(N * F * sizeof *xf), *sc = malloc(F * sizeof *sc),
                      *sh = malloc(F * sizeof *sh), *got = malloc(B * F * sizeof *got);
                int32_t idx[6];
                ck_assert(xu && xf && sc && sh && got);
                tc_fill_bytes(&r, xu, N * F);
                tc_fill_nonzero(&r, xf, N * F, 0.05f, 4.0f);
                tc_fill_nonzero(&r, sc, F, 0.01f, 2.0f);
                tc_fill_nonzero(&r, sh, F, 0.01f, 2.0f);
                for (size_t b = 0; b < B; b++) idx[b] = (int32_t)(tc_u32(&r) % N);
                clt_tensor *x = NULL, *y = NULL;
                TC_OK(ctx, clt_tensor_create(&x, ctx, ds[di], 2, xd, CLT_MEM_OTHER));
                TC_OK(ctx, clt_tensor_create(&y, ctx, CLT_DTYPE_F32, 2, yd, CLT_MEM_OTHER));
                clt_tensor *it = tc_tensor(ctx, CLT_DTYPE_I32, B),
                           *st = tc_tensor(ctx, CLT_DTYPE_F32, F),
                           *ht = tc_tensor(ctx, CLT_DTYPE_F32, F);
                tc_write(x, ds[di] == CLT_DTYPE_U8 ? (const void *)xu : (const void *)xf);
                tc_write(it, idx);
                tc_write(st, sc);
                tc_write(ht, sh);
                tc_poison(y);
                const size_t n_items = items < 3 ? items : (F + 15) / 16;
                TC_OK(ctx, clt__op_gather_rows_items(y, x, it, st, ht, n_items));
                tc_read(y, got);
                for (size_t b = 0; b < B; b++)
                    for (size_t f = 0; f < F; f++) {
                        const size_t at = (size_t)idx[b] * F + f;
                        const float v = ds[di] == CLT_DTYPE_U8 ? (float)xu[at] : xf[at],
                                    want = fmaf(v, sc[f], sh[f]), g = got[b * F + f];
                        ck_assert_msg(memcmp(&g, &want, sizeof g) == 0,
                                      "gather_rows %s F %zu items %zu: y[%zu, %zu] = %.9g, "
                                      "expected %.9g; seed %llu",
                                      clt_dtype_name(ds[di]), F, n_items, b, f, (double)g,
                                      (double)want, (unsigned long long)r.seed);
                    }
                clt_tensor_free(x);
                clt_tensor_free(y);
                clt_tensor_free(it);
                clt_tensor_free(st);
                clt_tensor_free(ht);
                free(xu);
                free(xf);
                free(sc);
                free(sh);
                free(got);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* clt_augment_parse: every part, any order, and one-line messages for bad text. */
START_TEST(test_augment_parse)
{
    struct clt_augment a;
    TC_OK(NULL, clt_augment_parse("flip", &a));
    ck_assert(a.flip && a.shift == 0 && a.cutout == 0 && clt_augment_enabled(&a));
    TC_OK(NULL, clt_augment_parse("shift=2,flip", &a));
    ck_assert(a.flip && a.shift == 2 && a.cutout == 0);
    TC_OK(NULL, clt_augment_parse("cutout=8,shift=4", &a));
    ck_assert(!a.flip && a.shift == 4 && a.cutout == 8);
    TC_OK(NULL, clt_augment_parse("shift=0", &a));
    ck_assert(!clt_augment_enabled(&a));
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"flip,shift=x", "--augment \"flip,shift=x\": shift needs a whole number of pixels, "
                         "e.g. shift=2"},
        {"shift", "shift needs a whole number"},
        {"shift=-1", "shift=-1: expected 0 to 65536"},
        {"cutout=2.5", "cutout needs a whole number"},
        {"rotate", "unknown augmentation \"rotate\""},
        {"flip,flip", "flip is given twice"},
        {"flip=1", "flip takes no value"},
        {"flip,", "an empty item"},
        {"", "expected flip, shift=N or cutout=S"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct clt_augment keep = {.shift = 7};
        ck_assert_int_eq(clt_augment_parse(bad[i].text, &keep), CLT_ERR_INVALID_ARG);
        ck_assert_msg(tc_contains(clt_last_errmsg(), bad[i].needle) &&
                          !strchr(clt_last_errmsg(), '\n'),
                      "\"%s\": %s", bad[i].text, clt_last_errmsg());
        ck_assert_int_eq(keep.shift, 7); /* untouched on failure */
    }
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tc_tcase("loader");
    tcase_add_test(tc, test_order_u8);
    tcase_add_test(tc, test_order_f32);
    tcase_add_test(tc, test_first_batches);
    tcase_add_test(tc, test_same_bits);
    tcase_add_test(tc, test_host_waits);
    tcase_add_test(tc, test_interrupt);
    tcase_add_test(tc, test_auto);
    tcase_add_test(tc, test_augment_same);
    tcase_add_test(tc, test_augment_parse);
    tcase_add_test(tc, test_gather_rows);
    suite_add_tcase(s, tc);
    /* a hang in the error paths must fail the test, not stall the suite */
    TCase *te = tcase_create("errors");
    tcase_set_timeout(te, 240);
    tcase_add_test(te, test_errors);
    suite_add_tcase(s, te);
    return s;
}

int main(void)
{
    return tc_run(loader_suite());
}
