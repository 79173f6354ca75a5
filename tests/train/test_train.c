/* Tests of the training loop (src/train/train.c) through the public API: one SGD step against a
 * float64 host computation, bit-for-bit determinism from a seed, resume from a checkpoint
 * written mid-run, a golden loss trajectory, the exact count of host waits, and NaN detection.
 * Data sets are made in memory by each test; every test creates its own ctx (check forks).
 * CLTRAIN_TEST_SMALL (tests/small.h) makes the accumulation tests' samples and batches a
 * quarter or half of their size, with the same step counts. */
#include "common.h"
#include "ref/ref_nn.h"
#include "small.h"

#include "cltrain/checkpoint.h"
#include "cltrain/model.h"
#include "cltrain/spec.h"
#include "cltrain/train.h"
#include "runtime/rng_internal.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* A data set filled by hand: f32 inputs (n, F), labels (n); owns x and y (not through
 * clt_dataset_free). */
struct set {
    clt_dataset d;
    float *x;
    int32_t *y;
};

static void set_alloc(struct set *s, size_t n, size_t F, int classes)
{
    memset(s, 0, sizeof *s);
    s->x = malloc(n * F * sizeof *s->x);
    s->y = malloc(n * sizeof *s->y);
    ck_assert(s->x && s->y);
    s->d.n = n;
    s->d.features = F;
    s->d.sample_ndim = 1;
    s->d.sample_shape[0] = F;
    s->d.f32 = s->x;
    s->d.labels = s->y;
    s->d.classes = classes;
    s->d.task = CLT_TASK_CLASSIFICATION;
    s->d.input_scale = 1.0f;
    snprintf(s->d.source, sizeof s->d.source, "test data");
}

/* Random inputs, random labels (every class present for n >= classes). */
static void set_random(struct set *s, tc_rng *r, size_t n, size_t F, int classes)
{
    set_alloc(s, n, F, classes);
    tc_fill_nonzero(r, s->x, n * F, 0.05f, 2.0f);
    for (size_t i = 0; i < n; i++)
        s->y[i] = i < (size_t)classes ? (int32_t)i : (int32_t)(tc_u32(r) % (uint32_t)classes);
}

static void set_free(struct set *s)
{
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

/* What the callback saw. */
#define MAXEV 256
struct capture {
    int nlog, nepoch, neval, nsave, nbackoff;
    size_t backoff_batch; /* the last backoff's micro-batch and accumulation */
    int backoff_acc;
    double loss[MAXEV];
    long log_step[MAXEV];
    long save_step[MAXEV];
    long log_waits[MAXEV]; /* host_waits_total at each log event */
    double grad_norm[MAXEV]; /* at each log event */
    double epoch_loss[MAXEV];
    double eval_acc[MAXEV];
    double eval_loss[MAXEV];
    int eval_epoch[MAXEV];
    long eval_step[MAXEV];
    /* copy the checkpoint written at copy_step to copy_to */
    long copy_step;
    const char *copy_to;
    bool copied;
};

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    ck_assert_msg(a && b, "copy %s -> %s", from, to);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, k, b), k);
    fclose(a);
    ck_assert_int_eq(fclose(b), 0);
}

static void on_event(const struct clt_train_event *e, void *user)
{
    struct capture *c = user;
    switch (e->kind) {
    case CLT_EVENT_LOG:
        ck_assert_int_lt(c->nlog, MAXEV);
        c->loss[c->nlog] = e->loss;
        c->log_step[c->nlog] = e->step;
        c->log_waits[c->nlog] = e->stats.host_waits_total;
        c->grad_norm[c->nlog] = e->grad_norm;
        c->nlog++;
        break;
    case CLT_EVENT_EPOCH:
        ck_assert_int_lt(c->nepoch, MAXEV);
        c->epoch_loss[c->nepoch++] = e->loss;
        break;
    case CLT_EVENT_EVAL:
        ck_assert_int_lt(c->neval, MAXEV);
        c->eval_loss[c->neval] = e->loss;
        c->eval_epoch[c->neval] = e->epoch;
        c->eval_step[c->neval] = e->step;
        c->eval_acc[c->neval++] = e->accuracy;
        break;
    case CLT_EVENT_SAVE:
        ck_assert_int_lt(c->nsave, MAXEV);
        c->save_step[c->nsave++] = e->step;
        if (c->copy_to && e->step == c->copy_step) {
            copy_file(e->path, c->copy_to);
            c->copied = true;
        }
        break;
    case CLT_EVENT_BACKOFF:
        c->nbackoff++;
        c->backoff_batch = e->batch_size;
        c->backoff_acc = e->accumulate;
        break;
    }
}

/* One training run on ctx: a fresh model of `spec` (seed `seed`, max batch = batch size),
 * optionally its weights and the trainer's state from checkpoint `resume`; returns the final
 * parameters (malloc'ed, *P of them) and the run's status. */
struct run_out {
    float *params;
    size_t P;
    clt_status st;
    char msg[512];
    struct clt_ctx_stats before, after;
};

/* The loader mode train_once uses (the golden test runs in both). */
static clt_loader_mode train_mode = CLT_LOADER_RESIDENT;

static clt_loader *make_loader(clt_ctx *ctx, const clt_dataset *d,
                               const struct clt_input_norm *norm, size_t batch)
{
    struct clt_loader_params lp = clt_loader_default_params();
    lp.mode = train_mode;
    lp.batch_size = batch;
    clt_loader *l = NULL;
    TC_OK(ctx, clt_loader_create(&l, ctx, d, norm, &lp));
    return l;
}

static struct run_out train_once(clt_ctx *ctx, const char *spec_text, const struct set *tr,
                                 const struct set *te, uint64_t seed,
                                 const struct clt_train_params *tp_in, const char *resume,
                                 struct capture *cap)
{
    struct run_out o;
    memset(&o, 0, sizeof o);
    clt_spec spec = {0};
    ck_assert_msg(clt_spec_parse(spec_text, 0, &spec) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_model_params mp = clt_model_default_params();
    mp.seed = seed;
    mp.max_batch = tp_in->batch_size;
    clt_model *m = NULL;
    clt_loader *rtr = NULL;
    clt_resident *rte = NULL;
    clt_trainer *t = NULL;
    struct clt_input_norm norm = {.features = tr->d.features, .scale = 1.0f};
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, tr->d.features, (size_t)tr->d.classes, &mp));
    rtr = make_loader(ctx, &tr->d, &norm, tp_in->batch_size);
    if (te) TC_OK(ctx, clt_resident_create(&rte, ctx, &te->d, &norm));
    if (resume) {
        clt_checkpoint *ck = NULL;
        ck_assert_msg(clt_checkpoint_open(&ck, resume) == CLT_OK, "%s", clt_last_errmsg());
        TC_OK(ctx, clt_checkpoint_load_model(ck, m));
        clt_checkpoint_close(ck);
    }
    struct clt_train_params tp = *tp_in;
    tp.seed = seed;
    tp.on_event = on_event;
    tp.user = cap;
    TC_OK(ctx, clt_trainer_create(&t, m, rtr, rte, &tp));
    if (resume) TC_OK(ctx, clt_trainer_resume(t, resume));
    o.before = clt_ctx_stats(ctx);
    o.st = clt_trainer_run(t);
    o.after = clt_ctx_stats(ctx);
    snprintf(o.msg, sizeof o.msg, "%s", clt_ctx_errmsg(ctx));
    o.P = clt_tensor_numel(clt_model_params(m));
    o.params = malloc(o.P * sizeof *o.params);
    ck_assert_ptr_nonnull(o.params);
    TC_OK(ctx, clt_model_read_params(m, o.params, CLT_WAIT_READ));
    clt_trainer_free(t);
    clt_loader_free(rtr);
    clt_resident_free(rte);
    clt_model_free(m);
    clt_spec_free(&spec);
    return o;
}

/* ---- (a) one SGD step against float64 ----------------------------------------------------- */

/* Model linear 7, relu, linear 3 on 5 standardised features, batch = the 4 samples, known
 * weights, plain SGD lr 0.1: the new weights and the reported loss against the same step in
 * double (forward, mean softmax cross-entropy, backward, update). */
START_TEST(test_sgd_step)
{
    enum { IN = 5, H = 7, N = 3, B = 4, P = H * IN + H + N * H + N };
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, B, IN, N);
    float mean[IN], sd[IN];
    for (int f = 0; f < IN; f++) {
        mean[f] = (float)tc_uniform(&r, -0.5, 0.5);
        sd[f] = (float)tc_uniform(&r, 0.5, 2.0);
    }
    struct clt_input_norm norm = {.features = IN, .scale = 0.5f, .mean = mean, .std = sd};

    clt_spec spec = {0};
    ck_assert_int_eq(clt_spec_parse("linear 7, relu, linear 3", 0, &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    clt_model *m = NULL;
    clt_loader *rtr = NULL;
    clt_trainer *t = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, IN, N, &mp));
    ck_assert_uint_eq(clt_tensor_numel(clt_model_params(m)), P);
    float w0[P], w1[P];
    for (size_t i = 0; i < P; i++)
        w0[i] = (float)tc_uniform(&r, -0.6, 0.6);
    TC_OK(ctx, clt_model_write_params(m, w0));
    rtr = make_loader(ctx, &s.d, &norm, B);

    struct capture cap;
    memset(&cap, 0, sizeof cap);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 1;
    tp.max_steps = 1;
    tp.batch_size = B;
    tp.shuffle = false;
    tp.log_every = 1;
    tp.optim = clt_optim_default_params(CLT_OPTIM_SGD);
    tp.optim.lr = 0.1f;
    tp.on_event = on_event;
    tp.user = &cap;
    TC_OK(ctx, clt_trainer_create(&t, m, rtr, NULL, &tp));
    TC_OK(ctx, clt_trainer_run(t));
    TC_OK(ctx, clt_model_read_params(m, w1, CLT_WAIT_READ));
    ck_assert_int_eq(clt_optim_steps(clt_trainer_optim(t)), 1);

    /* the same step in double; parameters laid out 0.weight (H, IN), 0.bias, 2.weight (N, H),
     * 2.bias */
    double x[B * IN], w[P], h[B * H], a[B * H], logits[B * N], dl[B * N], da[B * H], dh[B * H],
        g[P];
    for (int i = 0; i < B * IN; i++) {
        int f = i % IN;
        x[i] = ((double)s.x[i] * 0.5 - mean[f]) / sd[f];
    }
    for (size_t i = 0; i < P; i++)
        w[i] = w0[i];
    const double *W1 = w, *b1 = w + H * IN, *W2 = b1 + H, *b2 = W2 + N * H;
    ref_linear_forward(x, W1, b1, h, B, IN, H);
    ref_act_forward(REF_ACT_RELU, h, a, B * H);
    ref_linear_forward(a, W2, b2, logits, B, H, N);
    double loss = ref_softmax_xent(logits, s.y, B, N, 0.0, dl);
    ref_linear_backward(a, W2, dl, da, g + H * IN + H, g + H * IN + H + N * H, B, H, N);
    ref_act_backward(REF_ACT_RELU, h, da, dh, B * H);
    ref_linear_backward(x, W1, dh, NULL, g, g + H * IN, B, IN, H);

    /* the update w1 - w0 = -0.1 g: fp32 gradients (rel. 1e-4 at most for these sizes) and
     * the rounding of w1 (|w| < 1: 6e-8 absolute), so atol 1e-6, rtol 1e-4 */
    double want[P];
    float delta[P];
    for (size_t i = 0; i < P; i++) {
        want[i] = -0.1 * g[i];
        delta[i] = (float)((double)w1[i] - (double)w0[i]);
    }
    tc_check_close(delta, want, P, 1e-6, 1e-4, "SGD step: w1 - w0 against -lr * grad", r.seed);
    size_t moved = 0;
    for (size_t i = 0; i < P; i++)
        moved += fabs(want[i]) > 1e-4;
    ck_assert_msg(moved > P / 2, "only %zu of %d parameters move: a weak test", moved, (int)P);
    /* the logged loss is the batch's mean cross-entropy (fp32 sums: rtol 1e-5) */
    ck_assert_int_eq(cap.nlog, 1);
    ck_assert_int_eq(cap.log_step[0], 1);
    ck_assert_msg(fabs(cap.loss[0] - loss) <= 1e-6 + 1e-5 * loss, "loss %.9g, reference %.9g",
                  cap.loss[0], loss);
    ck_assert_int_eq(cap.nepoch, 1);
    ck_assert_msg(fabs(cap.epoch_loss[0] - loss) <= 1e-6 + 1e-5 * loss, "epoch loss %.9g vs %.9g",
                  cap.epoch_loss[0], loss);

    clt_trainer_free(t);
    clt_loader_free(rtr);
    clt_model_free(m);
    clt_spec_free(&spec);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (b) determinism ---------------------------------------------------------------------- */

/* 30 samples in batches of 8 (4 steps per epoch, the last one of 6), shuffled, a dropout
 * layer: 10 steps twice from one seed give the same bits; another seed, other weights. */
static const char *const DET_SPEC = "linear 16, relu, dropout 0.2, linear 3";

static struct clt_train_params det_params(clt_optim_kind kind)
{
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 3;
    tp.max_steps = 10;
    tp.batch_size = 8;
    tp.shuffle = true;
    tp.log_every = 1;
    tp.optim = clt_optim_default_params(kind);
    if (kind == CLT_OPTIM_SGD) {
        tp.optim.lr = 0.05f;
        tp.optim.momentum = 0.9f;
    } else {
        tp.optim.lr = 0.01f;
    }
    return tp;
}

START_TEST(test_determinism)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, 30, 6, 3);
    struct clt_train_params tp = det_params(CLT_OPTIM_ADAM);
    struct capture c1, c2, c3, c4;
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    memset(&c3, 0, sizeof c3);
    memset(&c4, 0, sizeof c4);
    struct run_out a = train_once(ctx, DET_SPEC, &s, NULL, 5, &tp, NULL, &c1);
    struct run_out b = train_once(ctx, DET_SPEC, &s, NULL, 5, &tp, NULL, &c2);
    struct run_out c = train_once(ctx, DET_SPEC, &s, NULL, 6, &tp, NULL, &c3);
    ck_assert_int_eq(a.st, CLT_OK);
    ck_assert_int_eq(b.st, CLT_OK);
    ck_assert_int_eq(c.st, CLT_OK);
    ck_assert_int_eq(c1.nlog, 10);
    ck_assert_int_eq(c1.log_step[9], 10);
    ck_assert_msg(memcmp(a.params, b.params, a.P * sizeof *a.params) == 0,
                  "same seed, different weights after 10 steps");
    ck_assert_msg(memcmp(c1.loss, c2.loss, sizeof c1.loss) == 0, "same seed, other losses");
    size_t differ = 0;
    for (size_t i = 0; i < a.P; i++)
        differ += a.params[i] != c.params[i];
    ck_assert_msg(differ > a.P / 2, "seed 6 changed only %zu of %zu weights", differ, a.P);

    /* a fresh ctx gives the same bits too */
    clt_ctx *ctx2 = tc_ctx();
    struct run_out d = train_once(ctx2, DET_SPEC, &s, NULL, 5, &tp, NULL, &c4);
    ck_assert_msg(memcmp(a.params, d.params, a.P * sizeof *a.params) == 0,
                  "same seed on a new ctx, different weights");
    clt_ctx_free(ctx2);

    free(a.params);
    free(b.params);
    free(c.params);
    free(d.params);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (c) resume --------------------------------------------------------------------------- */

/* 10 steps uninterrupted, saving every 5 (the step-5 file is copied aside when it is written,
 * since the end of the run overwrites it); then a new ctx and model, weights from the step-5
 * checkpoint, clt_trainer_resume and 5 more steps: the same bits as the uninterrupted run.
 * Step 5 lies in the middle of epoch 2, so the shuffle and the position in it must resume too. */
static void check_resume(clt_optim_kind kind, const struct set *s, const char *dir)
{
    char path[4096], path5[4096];
    snprintf(path, sizeof path, "%s/run.safetensors", dir);
    snprintf(path5, sizeof path5, "%s/step5.safetensors", dir);
    struct clt_train_params tp = det_params(kind);
    struct capture full, rest;
    memset(&full, 0, sizeof full);
    memset(&rest, 0, sizeof rest);
    full.copy_step = 5;
    full.copy_to = path5;
    tp.save_path = path;
    tp.save_every = 5;
    clt_ctx *ctx = tc_ctx();
    struct run_out a = train_once(ctx, DET_SPEC, s, NULL, 11, &tp, NULL, &full);
    clt_ctx_free(ctx);
    ck_assert_msg(a.st == CLT_OK, "%s", a.msg);
    ck_assert_msg(full.copied, "%s: no checkpoint at step 5", clt_optim_kind_name(kind));
    ck_assert_int_eq(full.nsave, 2); /* step 5 and the end */
    ck_assert_int_eq(full.save_step[1], 10);

    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path5) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    ck_assert_int_eq(info.step, 5);
    ck_assert_int_eq(info.epoch, 1); /* 4 steps per epoch: one epoch completed */
    ck_assert_uint_eq(info.seed, 11);
    clt_checkpoint_close(ck);

    struct clt_train_params tp2 = det_params(kind);
    clt_ctx *ctx2 = tc_ctx();
    struct run_out b = train_once(ctx2, DET_SPEC, s, NULL, 11, &tp2, path5, &rest);
    clt_ctx_free(ctx2);
    ck_assert_msg(b.st == CLT_OK, "%s", b.msg);
    ck_assert_int_eq(rest.nlog, 5);
    ck_assert_int_eq(rest.log_step[0], 6);
    ck_assert_int_eq(rest.log_step[4], 10);
    ck_assert_msg(memcmp(rest.loss, full.loss + 5, 5 * sizeof *rest.loss) == 0,
                  "%s: resumed losses differ from the uninterrupted run's (%.9g vs %.9g first)",
                  clt_optim_kind_name(kind), rest.loss[0], full.loss[5]);
    size_t differ = 0;
    for (size_t i = 0; i < a.P; i++)
        differ += a.params[i] != b.params[i];
    ck_assert_msg(differ == 0, "%s: %zu of %zu weights differ after resuming",
                  clt_optim_kind_name(kind), differ, a.P);
    free(a.params);
    free(b.params);
    remove(path);
    remove(path5);
}

START_TEST(test_resume)
{
    tc_rng r = tc_rng_for(__func__);
    char dir[4096];
    tc_mkdtemp(dir, sizeof dir);
    struct set s;
    set_random(&s, &r, 30, 6, 3);
    check_resume(CLT_OPTIM_ADAM, &s, dir);
    check_resume(CLT_OPTIM_SGD, &s, dir);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 0);
    tc_rmdir(dir);
    set_free(&s);
    tc_assert_no_live();
}
END_TEST

/* ---- (d) golden loss trajectory ----------------------------------------------------------- */

/* 64 samples of 8 features uniform in [-1, 1) from Philox (seed 2024, USER stream 0), label a
 * fixed function of the features; linear 16, relu, linear 3 from seed 7; Adam lr 0.01, batch
 * 16 shuffled: 20 steps (5 epochs), the loss logged at every step.
 * The golden values were recorded once on PoCL 3.1 (CPU) with CLTRAIN_PRINT_GOLDEN=1, which
 * prints a run's values. Relative tolerance 1e-4: another device's fp32 rounding (other
 * summation orders in GEMM and the reductions) should move these losses by ~1e-6 relative (not
 * yet checked on a GPU), while a real change fails (a learning rate 1% higher
 * already moves step 2's loss by 3e-4; a change of the update rule, the loss, the shuffle or
 * the initialisation moves them far more). */
/* clang-format off */
static const double GOLDEN[20] = {
    1.12103534, 1.11828589,  1.15844703,  1.07473063,  /* epoch 1 */
    1.06323552, 1.01990783,  1.04431021,  0.973317266, /* epoch 2 */
    1.02053905, 0.994184315, 0.961113572, 0.870398164, /* epoch 3 */
    0.948022664, 0.973730087, 0.894897938, 0.782813668, /* epoch 4 */
    0.87646842, 0.872394502, 0.732301652, 0.898522258,  /* epoch 5 */
};
/* clang-format on */

static void golden_set(struct set *s)
{
    enum { n = 64, F = 8 };
    set_alloc(s, n, F, 3);
    clt_rng_fill_uniform(2024, clt_rng_stream(CLT_RNG_USER, 0), 0, s->x, n * F, -1.0f, 1.0f);
    for (int i = 0; i < n; i++) {
        const float *x = s->x + i * F;
        float a = x[0] + x[1] - x[2], b = x[3] * x[4] + x[5];
        s->y[i] = a > 0.3f ? 0 : (b > 0.0f ? 1 : 2);
    }
}

START_TEST(test_golden)
{
    clt_ctx *ctx = tc_ctx();
    struct set s;
    golden_set(&s);
    int count[3] = {0, 0, 0};
    for (int i = 0; i < 64; i++)
        count[s.y[i]]++;
    ck_assert_msg(count[0] >= 10 && count[1] >= 10 && count[2] >= 10, "classes %d %d %d", count[0],
                  count[1], count[2]);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 5;
    tp.batch_size = 16;
    tp.log_every = 1;
    tp.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    tp.optim.lr = 0.01f;
    struct capture c;
    memset(&c, 0, sizeof c);
    struct run_out o = train_once(ctx, "linear 16, relu, linear 3", &s, NULL, 7, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
    ck_assert_int_eq(c.nlog, 20);
    char all[20 * 24 + 1] = "";
    for (int i = 0; i < 20; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), "%.9g,%s", c.loss[i],
                 i % 4 == 3 ? "\n" : " ");
    if (getenv("CLTRAIN_PRINT_GOLDEN")) fprintf(stderr, "golden losses:\n%s", all);
    for (int i = 0; i < 20; i++)
        ck_assert_msg(fabs(c.loss[i] - GOLDEN[i]) <= 1e-4 * fabs(GOLDEN[i]),
                      "step %d: loss %.9g, golden %.9g (rtol 1e-4); this run:\n%s", i + 1,
                      c.loss[i], GOLDEN[i], all);
    /* it learns: the last epoch's mean loss well below the first's */
    double first = (c.loss[0] + c.loss[1] + c.loss[2] + c.loss[3]) / 4;
    double last = (c.loss[16] + c.loss[17] + c.loss[18] + c.loss[19]) / 4;
    ck_assert_msg(last < 0.8 * first, "loss %g -> %g: not learning", first, last);
    ck_assert_int_eq(c.nepoch, 5);
    ck_assert_msg(c.epoch_loss[4] < c.epoch_loss[0], "epoch losses %g -> %g", c.epoch_loss[0],
                  c.epoch_loss[4]);
    /* the same run with its batches streamed by the loader thread: the same bits */
    struct capture c2;
    memset(&c2, 0, sizeof c2);
    train_mode = CLT_LOADER_STREAMING;
    struct run_out o2 = train_once(ctx, "linear 16, relu, linear 3", &s, NULL, 7, &tp, NULL, &c2);
    train_mode = CLT_LOADER_RESIDENT;
    ck_assert_msg(o2.st == CLT_OK, "streaming: %s", o2.msg);
    ck_assert_int_eq(c2.nlog, 20);
    ck_assert_msg(memcmp(c.loss, c2.loss, 20 * sizeof *c.loss) == 0,
                  "streaming: other losses (step 1: %.9g vs %.9g)", c2.loss[0], c.loss[0]);
    ck_assert_msg(memcmp(o.params, o2.params, o.P * sizeof *o.params) == 0,
                  "streaming: other weights than resident");
    free(o2.params);
    free(o.params);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (e) host waits ----------------------------------------------------------------------- */

/* The loss is read once per log point and once at each epoch end that is not a log point (and
 * at the last step); one evaluation per epoch (and with eval_start one of the starting weights
 * first); nothing else waits: a training step itself performs no host wait. */
static long expected_reads(long total, long spe, long log_every)
{
    long n = 0;
    for (long k = 1; k <= total; k++)
        n += (log_every > 0 && k % log_every == 0) || k % spe == 0 || k == total;
    return n;
}

START_TEST(test_host_waits)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set tr, te;
    set_random(&tr, &r, 30, 6, 3); /* batches of 8: 4 steps per epoch, 12 in 3 epochs */
    set_random(&te, &r, 10, 6, 3);
    struct clt_train_params tp = det_params(CLT_OPTIM_ADAM);
    tp.max_steps = 0;
    tp.epochs = 3;
    tp.log_every = 3; /* log points 3, 6, 9, 12; epoch ends 4, 8, 12 */
    struct capture c;
    memset(&c, 0, sizeof c);
    struct run_out o = train_once(ctx, DET_SPEC, &tr, &te, 3, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
    long reads = expected_reads(12, 4, 3);
    ck_assert_int_eq(reads, 6);
    ck_assert_int_eq(c.nlog, 4);
    ck_assert_int_eq(c.nepoch, 3);
    ck_assert_int_eq(c.neval, 3);
    for (int k = 0; k < CLT_WAIT__COUNT; k++) {
        long d = o.after.host_waits[k] - o.before.host_waits[k];
        long want = k == CLT_WAIT_LOG ? reads : k == CLT_WAIT_EVAL ? 3 : 0;
        ck_assert_msg(d == want, "host waits for %s: %ld, expected %ld",
                      clt_wait_reason_name((clt_wait_reason)k), d, want);
    }
    ck_assert_int_eq(o.after.host_waits_total - o.before.host_waits_total, reads + 3);
    /* between the log points at steps 3 and 6: the read at 4 (epoch end), the evaluation
     * after epoch 1, the read at 6; steps 4, 5 and 6 themselves add nothing */
    ck_assert_int_eq(c.log_waits[1] - c.log_waits[0], 3);
    free(o.params);

    /* no log points, one epoch, no test split: 4 steps and a single read at the epoch end */
    tp.log_every = 0;
    tp.epochs = 1;
    memset(&c, 0, sizeof c);
    o = train_once(ctx, DET_SPEC, &tr, NULL, 3, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
    ck_assert_int_eq(o.after.host_waits_total - o.before.host_waits_total, 1);
    ck_assert_int_eq(o.after.host_waits[CLT_WAIT_LOG] - o.before.host_waits[CLT_WAIT_LOG], 1);
    ck_assert_int_eq(c.nlog, 0);
    ck_assert_int_eq(c.nepoch, 1);
    for (int k = 0; k < c.nlog; k++) ck_assert(isnan(c.grad_norm[k])); /* no clipping */
    free(o.params);

    /* clipping and weight-decay exemptions add no host wait: the norm is read in the log
     * points' own wait, and reported there */
    tp = det_params(CLT_OPTIM_ADAMW);
    tp.max_steps = 0;
    tp.epochs = 3;
    tp.log_every = 3;
    tp.optim.weight_decay = 0.1f;
    tp.optim.clip_grad = 0.5f;
    memset(&c, 0, sizeof c);
    o = train_once(ctx, DET_SPEC, &tr, &te, 3, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
    for (int k = 0; k < CLT_WAIT__COUNT; k++) {
        long d = o.after.host_waits[k] - o.before.host_waits[k];
        long want = k == CLT_WAIT_LOG ? reads : k == CLT_WAIT_EVAL ? 3 : 0;
        ck_assert_msg(d == want, "clipping: host waits for %s: %ld, expected %ld",
                      clt_wait_reason_name((clt_wait_reason)k), d, want);
    }
    ck_assert_int_eq(c.nlog, 4);
    for (int k = 0; k < c.nlog; k++)
        ck_assert_msg(isfinite(c.grad_norm[k]) && c.grad_norm[k] > 0, "log %d: grad norm %g", k,
                      c.grad_norm[k]);
    free(o.params);

    /* eval_start: one evaluation more, of the starting weights, before the first step (epoch
     * 0, step 0), one wait more; the rest of the run is the same (the same final weights, the
     * same evaluations after each epoch) */
    tp = det_params(CLT_OPTIM_ADAM);
    tp.max_steps = 0;
    tp.epochs = 3;
    tp.log_every = 3;
    memset(&c, 0, sizeof c);
    struct run_out plain = train_once(ctx, DET_SPEC, &tr, &te, 3, &tp, NULL, &c);
    ck_assert_msg(plain.st == CLT_OK, "%s", plain.msg);
    struct capture c0;
    memset(&c0, 0, sizeof c0);
    tp.eval_start = true;
    o = train_once(ctx, DET_SPEC, &tr, &te, 3, &tp, NULL, &c0);
    ck_assert_msg(o.st == CLT_OK, "%s", o.msg);
    ck_assert_int_eq(c0.neval, 4);
    ck_assert_int_eq(c0.eval_epoch[0], 0);
    ck_assert_int_eq(c0.eval_step[0], 0);
    ck_assert_msg(isfinite(c0.eval_loss[0]) && c0.eval_loss[0] > 0 &&
                      c0.eval_loss[0] != c0.eval_loss[1],
                  "step 0: loss %g, after epoch 1 %g", c0.eval_loss[0], c0.eval_loss[1]);
    for (int k = 1; k < 4; k++) {
        ck_assert_int_eq(c0.eval_epoch[k], k);
        ck_assert(c0.eval_loss[k] == c.eval_loss[k - 1]);
    }
    ck_assert_int_eq(o.after.host_waits[CLT_WAIT_EVAL] - o.before.host_waits[CLT_WAIT_EVAL], 4);
    ck_assert_mem_eq(o.params, plain.params, o.P * sizeof *o.params);
    free(plain.params);
    free(o.params);

    set_free(&tr);
    set_free(&te);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- back-pressure: a signal stops the run within the queued steps ------------------------ */

struct paced_run {
    clt_trainer *t;
    clt_status st;
};

static void *run_trainer(void *arg)
{
    struct paced_run *r = arg;
    r->st = clt_trainer_run(r->t);
    return NULL;
}

/* The device held back by a user event the test completes later: the host queues steps 0 and
 * 1, then waits for step 0 to end before queueing step 2. The interrupt is set while it waits;
 * once the device runs, the run stops after step 2 of 25. Without the back-pressure the host
 * queued all 25 steps (no log points: nothing to read) and the run ended without stopping.
 * A first run builds the kernels, so that queueing two steps takes milliseconds against the
 * second's 1 s pause. Not on a runtime that must not be called from two threads (Oclgrind,
 * which also runs a queue's commands inside clFlush, on the calling thread): the test
 * completes the user event from its own thread while the trainer's is in OpenCL calls. */
START_TEST(test_paced_interrupt)
{
    clt_ctx *ctx = tc_ctx();
    if (clt_ctx_device(ctx)->serial_runtime) {
        clt_ctx_free(ctx);
        return;
    }
    tc_rng r = tc_rng_for(__func__);
    struct set tr;
    set_random(&tr, &r, 200, 6, 3); /* batches of 8: 25 steps */
    struct clt_train_params tp = det_params(CLT_OPTIM_ADAM);
    tp.max_steps = 0;
    tp.epochs = 1;
    tp.log_every = 0;
    volatile sig_atomic_t flag = 0;
    tp.interrupt = &flag;
    clt_spec spec = {0};
    ck_assert_msg(clt_spec_parse(DET_SPEC, 0, &spec) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = tp.batch_size;
    clt_model *m = NULL;
    struct clt_input_norm norm = {.features = tr.d.features, .scale = 1.0f};
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, tr.d.features, (size_t)tr.d.classes, &mp));
    clt_loader *l = make_loader(ctx, &tr.d, &norm, tp.batch_size);
    struct paced_run run = {NULL, CLT_OK};
    TC_OK(ctx, clt_trainer_create(&run.t, m, l, NULL, &tp));
    TC_OK(ctx, clt_trainer_run(run.t)); /* the kernels built */
    clt_trainer_free(run.t);
    run.t = NULL;
    TC_OK(ctx, clt_trainer_create(&run.t, m, l, NULL, &tp));
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_SETUP));

    cl_int err = CL_SUCCESS;
    cl_event gate = clCreateUserEvent(clt_ctx_cl_context(ctx), &err);
    ck_assert_int_eq(err, CL_SUCCESS);
    ck_assert_int_eq(clEnqueueMarkerWithWaitList(clt_ctx_compute_queue(ctx), 1, &gate, NULL),
                     CL_SUCCESS);
    long paced0 = clt_ctx_stats(ctx).paced;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, run_trainer, &run), 0);
    struct timespec pause = {1, 0};
    nanosleep(&pause, NULL); /* the host reaches step 2's wait */
    flag = 1;
    ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    pthread_join(th, NULL);
    clReleaseEvent(gate);
    ck_assert_msg(run.st == CLT_ERR_INTERRUPTED, "status %d: %s", run.st, clt_ctx_errmsg(ctx));
    ck_assert_msg(strstr(clt_ctx_errmsg(ctx), "interrupted after step 2 of 25"), "%s",
                  clt_ctx_errmsg(ctx));
    ck_assert_int_ge(clt_ctx_stats(ctx).paced - paced0, 1);
    clt_trainer_free(run.t);
    clt_loader_free(l);
    clt_model_free(m);
    clt_spec_free(&spec);
    set_free(&tr);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- weight decay: matrices only ---------------------------------------------------------- */

/* The trainer exempts biases and normalisation parameters from weight decay, as the layers
 * declare them: one AdamW step with weight decay and one without, from the same weights and
 * batch, leave the exempt parameters bit for bit equal (the step's gradients are the same, and
 * AdamW's decay is decoupled from them) and every weight different. Parameters of "linear 8,
 * layernorm, relu, linear 3" on 6 features: 0.weight [0, 48), 0.bias [48, 56), 1.weight
 * [56, 64), 1.bias [64, 72), 3.weight [72, 96), 3.bias [96, 99). */
START_TEST(test_decay_matrices_only)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set tr;
    set_random(&tr, &r, 8, 6, 3);
    struct clt_train_params tp = det_params(CLT_OPTIM_ADAMW);
    tp.max_steps = 1;
    tp.epochs = 1;
    tp.optim.weight_decay = 0.0f;
    struct capture c;
    memset(&c, 0, sizeof c);
    const char *spec = "linear 8, layernorm, relu, linear 3";
    struct run_out plain = train_once(ctx, spec, &tr, NULL, 5, &tp, NULL, &c);
    ck_assert_msg(plain.st == CLT_OK, "%s", plain.msg);
    tp.optim.weight_decay = 0.5f;
    struct run_out wd = train_once(ctx, spec, &tr, NULL, 5, &tp, NULL, &c);
    ck_assert_msg(wd.st == CLT_OK, "%s", wd.msg);
    ck_assert_uint_eq(plain.P, 99);
    for (size_t i = 0; i < plain.P; i++) {
        bool decays = i < 48 || (i >= 72 && i < 96);
        if (decays)
            ck_assert_msg(plain.params[i] != wd.params[i], "weight %zu did not decay (%.9g)", i,
                          (double)wd.params[i]);
        else
            ck_assert_msg(memcmp(&plain.params[i], &wd.params[i], sizeof(float)) == 0,
                          "exempt parameter %zu decayed: %.9g, without decay %.9g", i,
                          (double)wd.params[i], (double)plain.params[i]);
    }
    free(plain.params);
    free(wd.params);
    set_free(&tr);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (f) every sample once per epoch ------------------------------------------------------ */

/* Regression on one-hot inputs (sample j has x = e_j, target 1) with "linear 1 nobias" from
 * zero weights and plain SGD lr 0.1: weight j moves only in the step whose batch holds sample
 * j, by lr * 2 / B (MSE's gradient 2 (0 - 1) / B). After one shuffled epoch of 10 samples in
 * batches of 4, 4, 2, every weight is 0.05 or 0.1 (seen once; twice or never would give 0.1
 * + ..., or 0), and the 0.1 ones are the last two of the epoch's permutation. */
START_TEST(test_epoch_coverage)
{
    enum { n = 10, B = 4 };
    const uint64_t seed = 77;
    clt_ctx *ctx = tc_ctx();
    float x[n * n] = {0}, targets[n], w[n] = {0};
    for (int i = 0; i < n; i++) {
        x[i * n + i] = 1.0f;
        targets[i] = 1.0f;
    }
    clt_dataset d = {.n = n,
                     .features = n,
                     .sample_ndim = 1,
                     .sample_shape = {n},
                     .f32 = x,
                     .targets = targets,
                     .classes = 1,
                     .task = CLT_TASK_REGRESSION,
                     .input_scale = 1.0f,
                     .source = "one-hot"};
    struct clt_input_norm norm = {.features = n, .scale = 1.0f};
    clt_spec spec = {0};
    ck_assert_int_eq(clt_spec_parse("linear 1 nobias", 0, &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    clt_model *m = NULL;
    clt_loader *r = NULL;
    clt_trainer *t = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, n, 1, &mp));
    TC_OK(ctx, clt_model_write_params(m, w));
    r = make_loader(ctx, &d, &norm, B);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 1;
    tp.batch_size = B;
    tp.seed = seed;
    tp.optim = clt_optim_default_params(CLT_OPTIM_SGD);
    tp.optim.lr = 0.1f;
    TC_OK(ctx, clt_trainer_create(&t, m, r, NULL, &tp));
    TC_OK(ctx, clt_trainer_run(t));
    TC_OK(ctx, clt_model_read_params(m, w, CLT_WAIT_READ));
    uint32_t perm[n];
    clt_rng_permutation(seed, clt_rng_stream(CLT_RNG_SHUFFLE, 0), perm, n);
    for (int k = 0; k < n; k++) {
        int j = (int)perm[k];
        double want = k < 8 ? 0.1 * 2 / 4 : 0.1 * 2 / 2; /* tolerance: fp32 rounding, 1e-6 */
        ck_assert_msg(fabs(w[j] - want) <= 1e-6,
                      "sample %d (position %d of the epoch): weight "
                      "%.9g, expected %.9g (seen once in a batch of %d)",
                      j, k, (double)w[j], want, k < 8 ? 4 : 2);
    }
    /* the order was shuffled: the last batch is not samples 8 and 9 */
    ck_assert_msg(!(perm[8] >= 8 && perm[9] >= 8), "seed %llu does not shuffle; pick another",
                  (unsigned long long)seed);
    clt_trainer_free(t);
    clt_loader_free(r);
    clt_model_free(m);
    clt_spec_free(&spec);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (g) non-finite losses ---------------------------------------------------------------- */

START_TEST(test_numeric)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, 16, 4, 3);
    s.x[5 * 4 + 2] = NAN; /* sample 5: in the first batch of 4 without shuffling */
    struct clt_train_params tp = det_params(CLT_OPTIM_SGD);
    tp.max_steps = 0;
    tp.epochs = 2;
    tp.batch_size = 4;
    tp.shuffle = false;
    tp.log_every = 0;
    struct capture c;
    memset(&c, 0, sizeof c);
    struct run_out o = train_once(ctx, "linear 5, relu, linear 3", &s, NULL, 1, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_ERR_NUMERIC, "NaN input: %s: %s", clt_status_name(o.st), o.msg);
    /* read at the end of epoch 1: steps 1 to 4 */
    ck_assert_msg(tc_contains(o.msg, "NaN") && tc_contains(o.msg, "steps 1 and 4"), "message: %s",
                  o.msg);
    ck_assert_int_eq(c.nepoch, 0);
    free(o.params);

    /* a huge learning rate: finite inputs, the weights blow up */
    s.x[5 * 4 + 2] = 0.5f;
    tp.optim = clt_optim_default_params(CLT_OPTIM_SGD);
    tp.optim.lr = 1e30f;
    tp.epochs = 20;
    tp.log_every = 1;
    memset(&c, 0, sizeof c);
    o = train_once(ctx, "linear 5, relu, linear 3", &s, NULL, 1, &tp, NULL, &c);
    ck_assert_msg(o.st == CLT_ERR_NUMERIC, "lr 1e30: %s: %s", clt_status_name(o.st), o.msg);
    ck_assert_msg(tc_contains(o.msg, "steps") && tc_contains(o.msg, "--lr"), "message: %s", o.msg);
    ck_assert_int_lt(c.nlog, 20 * 4);
    free(o.params);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- (h) gradient accumulation ------------------------------------------------------------ */

/* max |x| over n floats */
static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* got against ref elementwise: |got - ref| <= atol + rtol |ref| */
static void check_near(const float *got, const float *ref, size_t n, double atol, double rtol,
                       const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - ref[i]) <= atol + rtol * fabs((double)ref[i]),
                      "%s: element %zu: %.9g vs %.9g (atol %g, rtol %g)", what, i, (double)got[i],
                      (double)ref[i], atol, rtol);
}

/* One step of plain SGD (lr 1, so the update is the gradient) from the same weights on the
 * same 256 samples: batch 256 in one pass against micro-batches of 64 x 4. The gradients
 * differ only in fp32 summation order (one sum over 256 rows against four sums of 64 added
 * on the device), so the updates agree to atol 1e-6 x max |update| + rtol 1e-4. */
START_TEST(test_accumulate_one_step)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    const size_t q = tc_small() ? 4 : 1; /* CLTRAIN_TEST_SMALL: 150 samples, 64 and 16 x 4 */
    set_random(&s, &r, 600 / q, 20, 5);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 1;
    tp.max_steps = 1;
    tp.log_every = 1;
    tp.optim = clt_optim_default_params(CLT_OPTIM_SGD);
    tp.optim.lr = 1.0f;
    struct capture c1, c2, c0;
    memset(&c0, 0, sizeof c0);
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    const char *spec = "linear 32, relu, linear 5";
    /* the starting weights: a run of 0 steps is not possible; read them from a fresh model */
    tp.batch_size = 256 / q;
    tp.optim.lr = 1e-30f; /* a step that moves nothing: the initial weights */
    struct run_out w0 = train_once(ctx, spec, &s, NULL, 9, &tp, NULL, &c0);
    tp.optim.lr = 1.0f;
    struct run_out big = train_once(ctx, spec, &s, NULL, 9, &tp, NULL, &c1);
    tp.batch_size = 64 / q;
    tp.accumulate = 4;
    struct run_out acc = train_once(ctx, spec, &s, NULL, 9, &tp, NULL, &c2);
    ck_assert_msg(big.st == CLT_OK && acc.st == CLT_OK, "%s / %s", big.msg, acc.msg);
    ck_assert_int_eq(c2.nlog, 1);
    ck_assert_int_eq(c2.log_step[0], 1); /* one optimizer step, not four */
    /* the logged loss: the mean over the same 256 samples (rtol 1e-5: fp32 sums) */
    ck_assert_msg(fabs(c1.loss[0] - c2.loss[0]) <= 1e-5 * fabs(c1.loss[0]), "loss %.9g vs %.9g",
                  c1.loss[0], c2.loss[0]);
    size_t P = big.P;
    float *d1 = malloc(P * sizeof *d1), *d2 = malloc(P * sizeof *d2);
    for (size_t i = 0; i < P; i++) {
        d1[i] = big.params[i] - w0.params[i];
        d2[i] = acc.params[i] - w0.params[i];
    }
    double scale = max_abs(d1, P);
    ck_assert_msg(scale > 1e-3, "the step moved nothing (max %g)", scale);
    check_near(d2, d1, P, 1e-6 * scale, 1e-4, "update 64 x 4 against 256");
    /* a wrong scale (1/64 instead of 1/256) would be 4x off: make sure the check sees that */
    size_t moved = 0;
    for (size_t i = 0; i < P; i++) moved += fabs(d1[i]) > 1e-3 * scale;
    ck_assert_msg(moved > P / 2, "only %zu of %zu parameters move", moved, P);
    free(d1);
    free(d2);
    free(w0.params);
    free(big.params);
    free(acc.params);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Whole runs, shuffled, SGD with momentum, 3 epochs of 600 samples with an effective batch of
 * 256 (2 full steps and a last one of 88 = 64 + 24 samples, scaled by 1/88), and with
 * drop_last (2 steps; the micro-batch loader would have 9 of 64, the step uses 8): batch 256
 * against 64 x 4. Same step count, log points at the same steps, losses within rtol 1e-5,
 * weights within atol 1e-5 x max |w| + rtol 1e-4 (9 steps of summation-order differences);
 * each log point the only host wait. CLTRAIN_TEST_SMALL: 300 samples, 128 against 32 x 4 (300 =
 * 9 x 32 + 12 as 600 = 9 x 64 + 24: the same steps; a quarter left too few samples to learn). */
static void check_accumulate_run(bool drop_last)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(drop_last ? "accumulate_run_drop" : "accumulate_run");
    struct set s;
    const size_t q = tc_small() ? 2 : 1;
    set_random(&s, &r, 600 / q, 20, 5);
    struct clt_train_params tp = clt_train_default_params();
    tp.epochs = 3;
    tp.log_every = 1;
    tp.drop_last = drop_last;
    tp.optim = clt_optim_default_params(CLT_OPTIM_SGD);
    tp.optim.lr = 0.2f;
    tp.optim.momentum = 0.9f;
    struct capture c1, c2;
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    const char *spec = "linear 32, relu, linear 5";
    tp.batch_size = 256 / q;
    struct run_out big = train_once(ctx, spec, &s, NULL, 4, &tp, NULL, &c1);
    tp.batch_size = 64 / q;
    tp.accumulate = 4;
    struct run_out acc = train_once(ctx, spec, &s, NULL, 4, &tp, NULL, &c2);
    ck_assert_msg(big.st == CLT_OK && acc.st == CLT_OK, "%s / %s", big.msg, acc.msg);
    int steps = drop_last ? 6 : 9;
    ck_assert_int_eq(c1.nlog, steps);
    ck_assert_int_eq(c2.nlog, steps);
    ck_assert_int_eq(c2.nepoch, 3);
    for (int i = 0; i < steps; i++) {
        ck_assert_int_eq(c2.log_step[i], i + 1);
        ck_assert_msg(fabs(c1.loss[i] - c2.loss[i]) <= 1e-5 * fabs(c1.loss[i]),
                      "step %d: loss %.9g (256) vs %.9g (64 x 4)", i + 1, c1.loss[i], c2.loss[i]);
    }
    /* random labels: it learns slowly, but the weights move (else the comparison is empty) */
    ck_assert_msg(c2.loss[steps - 1] < c2.loss[0] - 0.01, "not learning: %g -> %g", c2.loss[0],
                  c2.loss[steps - 1]);
    check_near(acc.params, big.params, big.P, 1e-5 * max_abs(big.params, big.P), 1e-4,
               drop_last ? "weights after 6 steps (drop_last)" : "weights after 9 steps");
    /* no host wait inside a step: one loss read per step (every step is a log point) */
    ck_assert_int_eq(acc.after.host_waits_total - acc.before.host_waits_total, steps);
    free(big.params);
    free(acc.params);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

START_TEST(test_accumulate_run)
{
    check_accumulate_run(false);
    check_accumulate_run(true);
}
END_TEST

/* accumulate = 1 is the plain loop (the same bits); a negative count is refused. */
START_TEST(test_accumulate_args)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, 30, 6, 3);
    struct clt_train_params tp = det_params(CLT_OPTIM_ADAM);
    struct capture c1, c2;
    memset(&c1, 0, sizeof c1);
    memset(&c2, 0, sizeof c2);
    tp.accumulate = 0;
    struct run_out a = train_once(ctx, DET_SPEC, &s, NULL, 5, &tp, NULL, &c1);
    tp.accumulate = 1;
    struct run_out b = train_once(ctx, DET_SPEC, &s, NULL, 5, &tp, NULL, &c2);
    ck_assert_msg(a.st == CLT_OK && b.st == CLT_OK, "%s / %s", a.msg, b.msg);
    ck_assert_msg(memcmp(a.params, b.params, a.P * sizeof *a.params) == 0, "0 and 1 differ");
    free(a.params);
    free(b.params);

    clt_spec spec = {0};
    ck_assert_int_eq(clt_spec_parse(DET_SPEC, 0, &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 8;
    clt_model *m = NULL;
    clt_trainer *t = NULL;
    struct clt_input_norm norm = {.features = 6, .scale = 1.0f};
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, 6, 3, &mp));
    clt_loader *l = make_loader(ctx, &s.d, &norm, 8);
    tp.accumulate = -2;
    ck_assert_int_eq(clt_trainer_create(&t, m, l, NULL, &tp), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "--accumulate"));
    /* drop_last with an effective batch larger than the set */
    tp.accumulate = 4;
    tp.drop_last = true;
    ck_assert_int_eq(clt_trainer_create(&t, m, l, NULL, &tp), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    clt_loader_free(l);
    clt_model_free(m);
    clt_spec_free(&spec);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A model on (T, C) inputs whose last linear layer acts on each position gives T rows of
 * outputs per sample: the trainer, whose losses take one row per sample, refuses it with the
 * shapes named; a flatten before the head makes it train. */
START_TEST(test_trainer_sequence_output)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, 30, 6, 3);
    struct clt_train_params tp = det_params(CLT_OPTIM_SGD);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 8;
    mp.input_shape[0] = 3;
    mp.input_shape[1] = 2;
    struct clt_input_norm norm = {.features = 6, .scale = 1.0f};
    clt_loader *l = make_loader(ctx, &s.d, &norm, 8);
    const char *specs[] = {"linear 8, relu, linear 3", "linear 8, relu, flatten, linear 3"};
    for (int k = 0; k < 2; k++) {
        clt_spec spec = {0};
        ck_assert_int_eq(clt_spec_parse(specs[k], 0, &spec), CLT_OK);
        clt_model *m = NULL;
        clt_trainer *t = NULL;
        TC_OK(ctx, clt_model_create(&m, ctx, &spec, 6, 3, &mp));
        clt_status st = clt_trainer_create(&t, m, l, NULL, &tp);
        if (k == 0) {
            ck_assert_int_eq(st, CLT_ERR_SHAPE);
            ck_assert_ptr_null(t);
            ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "output per sample is 3x3") &&
                              tc_contains(clt_ctx_errmsg(ctx), "flatten before the last linear"),
                          "%s", clt_ctx_errmsg(ctx));
        } else {
            TC_OK(ctx, st);
        }
        clt_trainer_free(t);
        clt_model_free(m);
        clt_spec_free(&spec);
    }
    clt_loader_free(l);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The library's set-up refuses an activation after the last linear layer as the CLI does
 * (issue 12), before allocating anything; the same spec with a final linear layer trains. */
START_TEST(test_setup_trailing_activation)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, 30, 6, 3);
    clt_spec spec = {0};
    clt_train_setup *setup = NULL;
    ck_assert_int_eq(clt_spec_parse("linear 8, relu, linear 3, relu", 0, &spec), CLT_OK);
    struct clt_train_setup_params p = clt_train_setup_default_params();
    p.spec = &spec;
    p.in_features = 6;
    p.outputs = 3;
    p.train_set = &s.d;
    p.norm = (struct clt_input_norm){.features = 6, .scale = 1.0f};
    p.train = det_params(CLT_OPTIM_SGD);
    uint64_t before = clt_ctx_mem_stats(ctx).peak;
    ck_assert_int_eq(clt_train_setup_create(&setup, ctx, &p), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(setup);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "layer 4 (relu) comes after the last linear"),
                  "%s", clt_ctx_errmsg(ctx));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).peak, before);
    clt_spec_free(&spec);
    ck_assert_int_eq(clt_spec_parse("linear 8, relu, linear 3", 0, &spec), CLT_OK);
    TC_OK(ctx, clt_train_setup_create(&setup, ctx, &p));
    clt_train_setup_free(setup);
    clt_spec_free(&spec);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A split without labels (clt_data_params.no_labels): resident for clt_predict, which gives
 * what it gives on the same inputs with labels; refused by clt_evaluate, by the trainer as
 * its test split and by the loader, each with CLT_ERR_INVALID_ARG and a message. */
START_TEST(test_predict_without_labels)
{
    enum { IN = 5, N = 3, n = 37 };
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set s;
    set_random(&s, &r, n, IN, N);
    clt_dataset bare = s.d; /* the same inputs, no labels */
    bare.labels = NULL;
    struct clt_input_norm norm = {.features = IN, .scale = 1.0f};
    clt_spec spec = {0};
    ck_assert_int_eq(clt_spec_parse("linear 6, tanh, linear 3", 0, &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 8;
    clt_model *m = NULL;
    clt_resident *with = NULL, *without = NULL;
    clt_loader *l = NULL, *bad = NULL;
    clt_trainer *t = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, IN, N, &mp));
    TC_OK(ctx, clt_resident_create(&with, ctx, &s.d, &norm));
    TC_OK(ctx, clt_resident_create(&without, ctx, &bare, &norm));
    ck_assert_ptr_null(clt_resident_labels(without));
    int32_t c1[n], c2[n];
    float p1[n * N], p2[n * N];
    TC_OK(ctx, clt_predict(m, with, 8, CLT_TASK_CLASSIFICATION, c1, p1));
    TC_OK(ctx, clt_predict(m, without, 8, CLT_TASK_CLASSIFICATION, c2, p2));
    ck_assert_mem_eq(c1, c2, sizeof c1);
    ck_assert_mem_eq(p1, p2, sizeof p1);
    struct clt_eval_result res;
    ck_assert_int_eq(clt_evaluate(m, without, 8, CLT_TASK_CLASSIFICATION, &res, NULL),
                     CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "needs labels"), "%s", clt_ctx_errmsg(ctx));
    l = make_loader(ctx, &s.d, &norm, 8);
    struct clt_train_params tp = clt_train_default_params();
    tp.batch_size = 8;
    ck_assert_int_eq(clt_trainer_create(&t, m, l, without, &tp), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(t);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "test split has no labels"), "%s",
                  clt_ctx_errmsg(ctx));
    struct clt_loader_params lp = clt_loader_default_params();
    lp.batch_size = 8;
    ck_assert_int_eq(clt_loader_create(&bad, ctx, &bare, &norm, &lp), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(bad);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "training needs them"), "%s",
                  clt_ctx_errmsg(ctx));
    clt_loader_free(l);
    clt_resident_free(with);
    clt_resident_free(without);
    clt_model_free(m);
    clt_spec_free(&spec);
    set_free(&s);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

static Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tc_tcase("train");
    tcase_add_test(tc, test_sgd_step);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_resume);
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_host_waits);
    tcase_add_test(tc, test_paced_interrupt);
    tcase_add_test(tc, test_decay_matrices_only);
    tcase_add_test(tc, test_epoch_coverage);
    tcase_add_test(tc, test_numeric);
    tcase_add_test(tc, test_accumulate_one_step);
    tcase_add_test(tc, test_accumulate_run);
    tcase_add_test(tc, test_accumulate_args);
    tcase_add_test(tc, test_setup_trailing_activation);
    tcase_add_test(tc, test_trainer_sequence_output);
    tcase_add_test(tc, test_predict_without_labels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tc_run(train_suite());
}
