/* Tests of the training set-up's memory handling (src/train/train.c, src/data/loader.c): the
 * estimate from the spec's widths against the accountant after creating the set-up, for
 * several layer lists, optimizers, loaders and batch sizes; the dry run's peak; the report's
 * arithmetic (the next larger batch); out-of-memory without and with --auto-batch under a cap
 * (clt_ctx_params.max_memory), the backed-off run against an uncapped run of the same
 * micro-batch and accumulation. Every test creates its own ctx (check forks).
 * CLTRAIN_TEST_SMALL (tests/small.h): the auto-batch runs use narrower inputs and layers. */
#include "common.h"
#include "small.h"

#include "cltrain/loader.h"
#include "cltrain/spec.h"
#include "cltrain/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

/* An in-memory data set: u8 or f32 inputs (n, F), labels (n) in [0, classes). */
struct set {
    clt_dataset d;
    void *x;
    int32_t *y;
};

static void set_make(struct set *s, tc_rng *r, size_t n, size_t F, int classes, bool u8)
{
    memset(s, 0, sizeof *s);
    s->y = malloc(n * sizeof *s->y);
    ck_assert_ptr_nonnull(s->y);
    if (u8) {
        s->x = malloc(n * F);
        ck_assert_ptr_nonnull(s->x);
        tc_fill_bytes(r, s->x, n * F);
        s->d.u8 = s->x;
        s->d.input_scale = 1.0f / 255;
    } else {
        s->x = malloc(n * F * sizeof(float));
        ck_assert_ptr_nonnull(s->x);
        tc_fill_nonzero(r, s->x, n * F, 0.05f, 2.0f);
        s->d.f32 = s->x;
        s->d.input_scale = 1.0f;
    }
    for (size_t i = 0; i < n; i++)
        s->y[i] = i < (size_t)classes ? (int32_t)i : (int32_t)(tc_u32(r) % (uint32_t)classes);
    s->d.n = n;
    s->d.features = F;
    s->d.sample_ndim = 1;
    s->d.sample_shape[0] = F;
    s->d.labels = s->y;
    s->d.classes = classes;
    s->d.task = CLT_TASK_CLASSIFICATION;
    snprintf(s->d.source, sizeof s->d.source, "test data");
}

static void set_free(struct set *s)
{
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static struct clt_train_setup_params setup_params(const clt_spec *spec, const struct set *tr,
                                                  const struct set *te, size_t batch)
{
    struct clt_train_setup_params p = clt_train_setup_default_params();
    p.spec = spec;
    p.in_features = tr->d.features;
    p.outputs = (size_t)tr->d.classes;
    p.train_set = &tr->d;
    p.test_set = te ? &te->d : NULL;
    p.norm.features = tr->d.features;
    p.norm.scale = tr->d.input_scale;
    p.loader.mode = CLT_LOADER_RESIDENT;
    p.train.batch_size = batch;
    p.train.epochs = 1;
    p.train.log_every = 0;
    return p;
}

/* ---- the estimate against the accountant -------------------------------------------------- */

struct config {
    const char *spec;
    clt_optim_kind optim;
    float momentum;
    clt_loader_mode mode;
    bool pinned, u8, test;
    size_t batch;
    int accumulate;
};

/* Creates the set-up of c on a fresh ctx: every category's bytes (accountant now minus before)
 * must equal the estimate exactly; then the dry run (one step of all micro-batches and an
 * evaluation) must not raise the peak above it. The data has 13 features, or T > 0 sequences
 * of T positions of D values. */
static void check_config_seq(const struct config *c, bool augment, size_t T, size_t D,
                             tc_rng *r)
{
    clt_ctx *ctx = tc_ctx();
    struct set tr, te;
    const size_t F = T ? T * D : 13;
    set_make(&tr, r, 203, F, 4, c->u8);
    set_make(&te, r, 37, F, 4, c->u8);
    for (int k = 0; T && k < 2; k++) {
        clt_dataset *d = k ? &te.d : &tr.d;
        d->sample_ndim = 2;
        d->sample_shape[0] = T;
        d->sample_shape[1] = D;
    }
    clt_spec spec = {0};
    ck_assert_msg(clt_spec_parse(c->spec, 0, &spec) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_train_setup_params p = setup_params(&spec, &tr, c->test ? &te : NULL, c->batch);
    p.loader.mode = c->mode;
    p.loader.pinned = c->pinned;
    p.train.accumulate = c->accumulate;
    if (augment) { /* --augment flip,cutout=1 on 13 features as (1, 1, 13) images (a shift
                    * would move a 1-pixel-high image out of view: refused by the plan) */
        p.loader.augment = (struct clt_augment){.flip = true, .cutout = 1};
        tr.d.sample_ndim = 3;
        tr.d.sample_shape[0] = tr.d.sample_shape[1] = 1;
        tr.d.sample_shape[2] = tr.d.features;
    }
    p.train.optim = clt_optim_default_params(c->optim);
    p.train.optim.momentum = c->momentum;
    /* AdamW (weight decay 0.01: the exemptions' bits) also clips: the norm's buffer */
    if (c->optim == CLT_OPTIM_ADAMW) p.train.optim.clip_grad = 1.0f;
    char what[256];
    snprintf(what, sizeof what, "%s, %s%s, %s%s, %s, %s, batch %zu x %d%s", c->spec,
             clt_optim_kind_name(c->optim), c->momentum != 0 ? " with momentum" : "",
             clt_loader_mode_name(c->mode),
             c->mode == CLT_LOADER_STREAMING ? (c->pinned ? " pinned" : " pageable") : "",
             c->u8 ? "u8" : "f32", c->test ? "test split" : "no test split", c->batch,
             c->accumulate, augment ? ", augmented" : "");

    struct clt_mem_estimate est;
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, c->batch, &est));
    struct clt_mem_stats before = clt_ctx_mem_stats(ctx);
    clt_ctx_mem_reset_peak(ctx);
    clt_train_setup *s = NULL;
    TC_OK(ctx, clt_train_setup_create(&s, ctx, &p));
    struct clt_mem_stats after = clt_ctx_mem_stats(ctx);
    uint64_t sum = 0;
    for (int k = 0; k < CLT_MEM__COUNT; k++) {
        uint64_t got = after.by_category[k] - before.by_category[k];
        ck_assert_msg(got == est.by_category[k], "%s: %s: accountant %llu bytes, estimate %llu",
                      what, clt_mem_category_name((clt_mem_category)k), (unsigned long long)got,
                      (unsigned long long)est.by_category[k]);
        sum += est.by_category[k];
    }
    ck_assert_uint_eq(sum, est.total);
    ck_assert_uint_eq(after.current - before.current, est.total);
    ck_assert_msg(est.by_category[CLT_MEM_ACTIVATIONS] > 0 && est.by_category[CLT_MEM_PARAMS] > 0,
                  "%s: an empty estimate", what);

    struct clt_mem_stats probe;
    TC_OK(ctx, clt_train_setup_probe(s, &probe));
    ck_assert_msg(probe.peak == before.current + est.total,
                  "%s: the dry run's peak %llu, the set-up %llu: a step allocates", what,
                  (unsigned long long)probe.peak, (unsigned long long)(before.current + est.total));
    clt_train_setup_free(s);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, before.current);
    clt_spec_free(&spec);
    set_free(&tr);
    set_free(&te);
    clt_ctx_free(ctx);
}

static void check_config(const struct config *c, bool augment, tc_rng *r)
{
    check_config_seq(c, augment, 0, 0, r);
}

START_TEST(test_estimate)
{
    tc_rng r = tc_rng_for(__func__);
    const struct config configs[] = {
        {"linear 16, relu, linear 4", CLT_OPTIM_ADAM, 0, CLT_LOADER_RESIDENT, true, true, true, 64,
         1},
        {"flatten, linear 40 nobias, gelu, dropout 0.3, linear 7, tanh, linear 4", CLT_OPTIM_SGD, 0,
         CLT_LOADER_RESIDENT, true, false, false, 17, 3},
        {"linear 9, sigmoid, linear 4", CLT_OPTIM_SGD, 0.9f, CLT_LOADER_STREAMING, true, true, true,
         1, 2},
        {"linear 33, relu, linear 4 nobias", CLT_OPTIM_ADAMW, 0, CLT_LOADER_STREAMING, false, false,
         true, 100, 1},
        {"linear 4", CLT_OPTIM_SGD, 0, CLT_LOADER_AUTO, true, false, true, 203, 1},
    };
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++)
        check_config(&configs[i], false, &r);
    /* augmentation's (B, F) buffer of the batch before augmenting, with either loader */
    for (size_t i = 0; i < 3; i += 2) check_config(&configs[i], true, &r);
    tc_assert_no_live();
}
END_TEST

/* A language model's set-up (text: the sampler's token ids, the trainer's (B, T) inputs and
 * targets, the output gradient (B, T, V), the loss's per-row buffer, the embedding's sort
 * workspace; a GPT block's attention): the estimate equals the accountant per category, and a
 * dry-run step and evaluation allocate nothing more; with char (u8 ids) and byte tokens, Adam
 * and AdamW, batches 1 and 5, accumulation, in fp32, bf16 and fp16 (the loss scaler's state). */
START_TEST(test_estimate_text)
{
    static const char text[] = "the cat sat on the mat, and the dog ran to the red hat.\n"
                               "a cat and a dog sat on a red mat; the hat ran to the cat.\n";
    static const struct {
        clt_text_tokens tokens;
        clt_optim_kind optim;
        size_t batch;
        int accumulate;
        clt_dtype precision;
    } cases[] = {{CLT_TEXT_CHAR, CLT_OPTIM_ADAMW, 5, 1, CLT_DTYPE_F32},
                 {CLT_TEXT_BYTE, CLT_OPTIM_ADAM, 1, 3, CLT_DTYPE_F32},
                 {CLT_TEXT_CHAR, CLT_OPTIM_ADAMW, 5, 1, CLT_DTYPE_BF16},
                 {CLT_TEXT_BYTE, CLT_OPTIM_ADAMW, 2, 2, CLT_DTYPE_F16}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        clt_ctx *ctx = tc_ctx();
        clt_text t;
        struct clt_text_params tp = clt_text_default_params();
        tp.tokens = cases[i].tokens;
        TC_OK(ctx, clt_text_from_memory(&t, text, sizeof text - 1, NULL, 0, "text", &tp));
        clt_spec spec = {0};
        ck_assert(clt_spec_parse("embed 8, posembed, residual { layernorm, attention 2 causal }, "
                                 "residual { layernorm, linear 16, gelu, linear 8 }, layernorm, "
                                 "linear V nobias tied", 0, &spec) == CLT_OK);
        struct clt_train_setup_params p = clt_train_setup_default_params();
        p.spec = &spec;
        p.text = &t;
        p.in_features = 6; /* T */
        p.outputs = clt_vocab_size(t.vocab);
        p.eval_batches = 2;
        p.train.batch_size = cases[i].batch;
        p.train.accumulate = cases[i].accumulate;
        p.train.max_steps = 3;
        p.train.optim = clt_optim_default_params(cases[i].optim);
        p.train.optim.clip_grad = 1.0f;
        p.model.precision = cases[i].precision;
        struct clt_mem_estimate est;
        TC_OK(ctx, clt_train_mem_estimate(ctx, &p, cases[i].batch, &est));
        struct clt_mem_stats before = clt_ctx_mem_stats(ctx);
        clt_ctx_mem_reset_peak(ctx);
        clt_train_setup *s = NULL;
        TC_OK(ctx, clt_train_setup_create(&s, ctx, &p));
        struct clt_mem_stats after = clt_ctx_mem_stats(ctx);
        for (int k = 0; k < CLT_MEM__COUNT; k++)
            ck_assert_msg(after.by_category[k] - before.by_category[k] == est.by_category[k],
                          "text case %zu: %s: accountant %llu bytes, estimate %llu", i,
                          clt_mem_category_name((clt_mem_category)k),
                          (unsigned long long)(after.by_category[k] - before.by_category[k]),
                          (unsigned long long)est.by_category[k]);
        ck_assert_uint_eq(after.current - before.current, est.total);
        ck_assert_uint_gt(est.by_category[CLT_MEM_DATA], 0);
        struct clt_mem_stats probe;
        TC_OK(ctx, clt_train_setup_probe(s, &probe));
        ck_assert_uint_eq(probe.peak, before.current + est.total);
        clt_train_setup_free(s);
        ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, before.current);
        clt_spec_free(&spec);
        clt_text_free(&t);
        clt_ctx_free(ctx);
    }
    tc_assert_no_live();
}
END_TEST

/* Attention on sequences: its kept qkv and heads' output (in the layer's storage), its f32
 * row statistics and the op's f32 workspace (the flash path's; the reference path's scores at
 * a head width above 128), the model's workspace for its backward, counted to the byte. */
START_TEST(test_estimate_attention)
{
    tc_rng r = tc_rng_for(__func__);
    const struct config gpt = {"residual { layernorm, attention 2 causal }, residual { layernorm, "
                               "linear 16, gelu, linear 4 }, layernorm, flatten, linear 4",
                               CLT_OPTIM_ADAMW, 0, CLT_LOADER_RESIDENT, true, false, true, 17, 2};
    check_config_seq(&gpt, false, 5, 4, &r);
    const struct config wide = {"attention 1 nobias, flatten, linear 4", CLT_OPTIM_SGD, 0,
                                CLT_LOADER_STREAMING, true, false, true, 9, 1};
    check_config_seq(&wide, false, 3, 130, &r);
    tc_assert_no_live();
}
END_TEST

/* ---- the report --------------------------------------------------------------------------- */

/* Activations scale with the batch, nothing else does (resident data): the estimate at 2B
 * has exactly twice B's activations and the same other categories; the report prints the
 * accountant's lines and both estimates with their totals, and says whether each fits. */
START_TEST(test_report)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    struct set tr, te;
    set_make(&tr, &r, 300, 24, 5, true);
    set_make(&te, &r, 50, 24, 5, true);
    clt_spec spec = {0};
    ck_assert_int_eq(clt_spec_parse("linear 48, relu, dropout 0.1, linear 5", 0, &spec), CLT_OK);
    struct clt_train_setup_params p = setup_params(&spec, &tr, &te, 32);
    struct clt_mem_estimate e1, e2;
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, 32, &e1));
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, 64, &e2));
    for (int k = 0; k < CLT_MEM__COUNT; k++) {
        uint64_t want = k == CLT_MEM_ACTIVATIONS ? 2 * e1.by_category[k] : e1.by_category[k];
        ck_assert_msg(e2.by_category[k] == want, "%s at batch 64: %llu, expected %llu",
                      clt_mem_category_name((clt_mem_category)k),
                      (unsigned long long)e2.by_category[k], (unsigned long long)want);
    }
    /* activations per sample from the widths: outputs of linear 48, relu, dropout, linear 5
     * (48 + 48 + 48 + 5), two gradient buffers of the widest (48), the output gradient (5),
     * the loader's batch (24 + 1 label) and the evaluation's batch (24 + 1), 4 bytes each */
    uint64_t per_sample = 4 * (48 + 48 + 48 + 5 + 2 * 48 + 5 + 25 + 25);
    ck_assert_uint_eq(e1.by_category[CLT_MEM_ACTIVATIONS], 32 * per_sample);

    clt_train_setup *s = NULL;
    TC_OK(ctx, clt_train_setup_create(&s, ctx, &p));
    char report[4096], a[32], b[32], line[128];
    clt_train_mem_report(ctx, &p, 32, report, sizeof report);
    clt_format_bytes(e1.total, a, sizeof a);
    clt_format_bytes(e2.total, b, sizeof b);
    snprintf(line, sizeof line, "estimate at micro-batch 32: %s (fits under", a);
    ck_assert_msg(tc_contains(report, line), "no \"%s\" in:\n%s", line, report);
    snprintf(line, sizeof line, "estimate at micro-batch 64, the next larger: %s (fits", b);
    ck_assert_msg(tc_contains(report, line), "no \"%s\" in:\n%s", line, report);
    ck_assert_msg(tc_contains(report, "device memory on") && tc_contains(report, "activations") &&
                      tc_contains(report, "optimizer state") && tc_contains(report, "data"),
                  "report:\n%s", report);
    clt_train_setup_free(s);

    /* under a cap between the two: the larger one exceeds it */
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.max_memory = (e1.total + e2.total) / 2;
    clt_ctx *capped = tc_ctx_with(&cp);
    clt_train_mem_report(capped, &p, 32, report, sizeof report);
    ck_assert_msg(tc_contains(report, "the next larger") && tc_contains(report, "(exceeds the"),
                  "report:\n%s", report);
    clt_ctx_free(capped);
    clt_spec_free(&spec);
    set_free(&tr);
    set_free(&te);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- out of memory and auto-batch --------------------------------------------------------- */

#define MAXBACK 16
struct backoffs {
    int n;
    size_t batch[MAXBACK];
    int acc[MAXBACK];
    bool oom_message;
    int nlog;
};

static void on_event(const struct clt_train_event *e, void *user)
{
    struct backoffs *b = user;
    if (e->kind == CLT_EVENT_LOG) b->nlog++;
    if (e->kind != CLT_EVENT_BACKOFF) return;
    ck_assert_int_lt(b->n, MAXBACK);
    b->batch[b->n] = e->batch_size;
    b->acc[b->n++] = e->accumulate;
    b->oom_message = e->message && tc_contains(e->message, "out of device memory");
}

/* 512 samples, an effective batch of 256 (2 steps an epoch), 2 epochs of Adam; returns the
 * final weights (malloc'ed) and the micro-batch and accumulation the set-up ended with. */
struct run {
    clt_status st;
    float *params;
    size_t P, batch;
    int acc;
    struct backoffs b;
    char msg[512];
};

static struct run run_capped(uint64_t cap, size_t batch, int acc, bool auto_batch,
                             const struct set *tr, const struct set *te, const clt_spec *spec)
{
    struct run o;
    memset(&o, 0, sizeof o);
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.max_memory = cap;
    clt_ctx *ctx = tc_ctx_with(&cp);
    struct clt_train_setup_params p = setup_params(spec, tr, te, batch);
    p.train.accumulate = acc;
    p.train.epochs = 2;
    p.train.log_every = 1;
    p.train.seed = 3;
    p.model.seed = 3;
    p.train.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    p.train.optim.lr = 0.01f;
    p.train.on_event = on_event;
    p.train.user = &o.b;
    p.auto_batch = auto_batch;
    clt_train_setup *s = NULL;
    o.st = clt_train_setup_create(&s, ctx, &p);
    if (o.st == CLT_OK) {
        o.batch = clt_train_setup_batch(s);
        o.acc = clt_train_setup_accumulate(s);
        o.st = clt_train_setup_run(s);
    }
    snprintf(o.msg, sizeof o.msg, "%s", clt_ctx_errmsg(ctx));
    if (o.st == CLT_OK) {
        clt_model *m = clt_train_setup_model(s);
        o.P = clt_tensor_numel(clt_model_params(m));
        o.params = malloc(o.P * sizeof *o.params);
        ck_assert_ptr_nonnull(o.params);
        TC_OK(ctx, clt_model_read_params(m, o.params, CLT_WAIT_READ));
    }
    clt_train_setup_free(s);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0); /* a failed attempt leaves nothing */
    clt_ctx_free(ctx);
    return o;
}

/* A cap that fits micro-batch 64 but not 128 (so not 256): without auto_batch the set-up
 * fails with CLT_ERR_OUT_OF_MEMORY and the failed allocation's message; with it, batch 256
 * backs off to 128 x 2, then 64 x 4, and trains to the same bits as an uncapped run of 64 x 4
 * (tolerance 0: the same kernels on the same shapes in the same order). A cap below micro-batch
 * 1 fails after backing off all the way. */
START_TEST(test_auto_batch)
{
    tc_rng r = tc_rng_for(__func__);
    struct set tr, te;
    const size_t F = tc_size(64, 16); /* the caps below follow from the estimates */
    set_make(&tr, &r, 512, F, 6, true);
    set_make(&te, &r, 40, F, 6, true);
    clt_spec spec = {0};
    const char *text = tc_small() ? "linear 24, relu, linear 6" : "linear 96, relu, linear 6";
    ck_assert_int_eq(clt_spec_parse(text, 0, &spec), CLT_OK);

    clt_ctx *ctx = tc_ctx();
    struct clt_train_setup_params p = setup_params(&spec, &tr, &te, 64);
    struct clt_mem_estimate e64, e128, e1;
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, 64, &e64));
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, 128, &e128));
    TC_OK(ctx, clt_train_mem_estimate(ctx, &p, 1, &e1));
    clt_ctx_free(ctx);
    uint64_t cap = (e64.total + e128.total) / 2;
    ck_assert(cap > e64.total && cap < e128.total);

    struct run plain = run_capped(cap, 256, 1, false, &tr, &te, &spec);
    ck_assert_msg(plain.st == CLT_ERR_OUT_OF_MEMORY, "%s: %s", clt_status_name(plain.st),
                  plain.msg);
    ck_assert_msg(tc_contains(plain.msg, "out of device memory") &&
                      tc_contains(plain.msg, "over the cap"),
                  "message: %s", plain.msg);
    ck_assert_int_eq(plain.b.n, 0);

    struct run backed = run_capped(cap, 256, 1, true, &tr, &te, &spec);
    ck_assert_msg(backed.st == CLT_OK, "%s: %s", clt_status_name(backed.st), backed.msg);
    ck_assert_uint_eq(backed.batch, 64);
    ck_assert_int_eq(backed.acc, 4);
    ck_assert_int_eq(backed.b.n, 2);
    ck_assert_uint_eq(backed.b.batch[0], 128);
    ck_assert_int_eq(backed.b.acc[0], 2);
    ck_assert_uint_eq(backed.b.batch[1], 64);
    ck_assert_int_eq(backed.b.acc[1], 4);
    ck_assert(backed.b.oom_message);
    ck_assert_int_eq(backed.b.nlog, 4); /* 2 epochs of 2 optimizer steps */

    struct run ref = run_capped(0, 64, 4, false, &tr, &te, &spec);
    ck_assert_msg(ref.st == CLT_OK, "%s", ref.msg);
    ck_assert_int_eq(ref.b.nlog, 4);
    ck_assert_uint_eq(ref.P, backed.P);
    ck_assert_msg(memcmp(ref.params, backed.params, ref.P * sizeof *ref.params) == 0,
                  "auto-batch 64 x 4 under the cap and 64 x 4 uncapped differ");

    /* nothing fits: backs off 256 -> 128 -> ... -> 1 and fails */
    struct run none = run_capped(e1.total - 1, 256, 1, true, &tr, &te, &spec);
    ck_assert_msg(none.st == CLT_ERR_OUT_OF_MEMORY, "%s: %s", clt_status_name(none.st), none.msg);
    ck_assert_int_eq(none.b.n, 8);
    ck_assert_uint_eq(none.b.batch[7], 1);
    ck_assert_int_eq(none.b.acc[7], 256);

    /* an effective batch that is not a power of two: 120 x 1 -> 60 x 2 (a divisor) */
    struct run odd = run_capped(cap, 120, 1, true, &tr, &te, &spec);
    ck_assert_msg(odd.st == CLT_OK, "%s", odd.msg);
    ck_assert_uint_eq(odd.batch, 60);
    ck_assert_int_eq(odd.acc, 2);

    free(plain.params);
    free(backed.params);
    free(ref.params);
    free(none.params);
    free(odd.params);
    clt_spec_free(&spec);
    set_free(&tr);
    set_free(&te);
    tc_assert_no_live();
}
END_TEST

static Suite *memory_suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tc_tcase("memory");
    tcase_add_test(tc, test_estimate);
    tcase_add_test(tc, test_estimate_text);
    tcase_add_test(tc, test_estimate_attention);
    tcase_add_test(tc, test_report);
    tcase_add_test(tc, test_auto_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tc_run(memory_suite());
}
