/* Data-parallel training in one process (dist.h, clt_train_setup_run_group): replicas on ctxs
 * of the one test device against a single trainer with the same global batch, their weights
 * bit-identical to each other, the slices of small batches (some empty), batch-norm statistics,
 * and a failing replica that must not leave the others waiting. The group's collectives alone
 * are checked first. */
#include "common.h"

#include "cltrain/cltrain.h"
#include "dist/comm_internal.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the communicator ---------------------------------------------------------------------- */

struct member_run {
    clt_comm *c;
    clt_status st;
    float f[5];
    double d[2];
};

static void *member_main(void *arg)
{
    struct member_run *m = arg;
    int r = clt_comm_rank(m->c);
    for (int i = 0; i < 5; i++) m->f[i] = (float)(r + 1) * 0.1f + (float)i;
    m->d[0] = r;
    m->d[1] = -r;
    m->st = clt_comm_allreduce_f32(m->c, m->f, 5);
    if (m->st == CLT_OK) m->st = clt_comm_allreduce_f64(m->c, m->d, 2, CLT_REDUCE_MAX);
    return NULL;
}

/* Three members: every member gets the same sum (in rank order: fp32 sums checked for the
 * exact bits of that order) and maximum; slices tile every batch size in rank order, by the
 * shares, and never exceed clt__comm_slice_max. */
START_TEST(test_group_collectives)
{
    const int shares[3] = {3, 1, 2};
    clt_comm_group *g = NULL;
    ck_assert_int_eq(clt_comm_group_create(&g, 3, shares), CLT_OK);
    struct member_run m[3];
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        m[r] = (struct member_run){.c = clt_comm_group_member(g, r)};
        ck_assert_int_eq(pthread_create(&th[r], NULL, member_main, &m[r]), 0);
    }
    for (int r = 0; r < 3; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(m[r].st, CLT_OK);
        for (int i = 0; i < 5; i++) {
            float want = ((0.1f + (float)i) + (0.2f + (float)i)) + (0.3f + (float)i);
            ck_assert_msg(memcmp(&m[r].f[i], &want, sizeof want) == 0, "member %d [%d]: %g %g",
                          r, i, (double)m[r].f[i], (double)want);
        }
        ck_assert(m[r].d[0] == 2.0 && m[r].d[1] == 0.0);
    }
    for (size_t n = 0; n <= 40; n++) {
        size_t next = 0;
        for (int r = 0; r < 3; r++) {
            size_t b, e;
            clt_comm_slice(clt_comm_group_member(g, r), r, n, &b, &e);
            ck_assert_uint_eq(b, next);
            ck_assert_uint_le(e - b, clt__comm_slice_max(clt_comm_group_member(g, r), r, 40));
            next = e;
        }
        ck_assert_uint_eq(next, n);
    }
    size_t b, e;
    clt_comm_slice(clt_comm_group_member(g, 0), 0, 60, &b, &e); /* 3 of 6 shares */
    ck_assert(b == 0 && e == 30);
    clt_comm_slice(clt_comm_group_member(g, 1), 1, 60, &b, &e);
    ck_assert(b == 30 && e == 40);
    const int bad[2] = {1, 0};
    clt_comm_group *g2 = NULL;
    ck_assert_int_eq(clt_comm_group_create(&g2, 2, bad), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_last_errmsg(), "--device-shares"));
    ck_assert_int_eq(clt_comm_group_create(&g2, 0, NULL), CLT_ERR_INVALID_ARG);
    clt_comm_group_free(g);
}
END_TEST

/* A member that aborts instead of arriving: the one waiting returns CLT_ERR_ABORTED with the
 * aborting member's message (a hang here is the failure: check's timeout ends it). */
static void *abort_main(void *arg)
{
    struct member_run *m = arg;
    if (clt_comm_rank(m->c) == 1) {
        clt_comm_abort(m->c, "disk on fire");
        m->st = CLT_OK;
    } else {
        m->st = clt_comm_allreduce_f32(m->c, m->f, 5);
    }
    return NULL;
}

START_TEST(test_group_abort)
{
    clt_comm_group *g = NULL;
    ck_assert_int_eq(clt_comm_group_create(&g, 2, NULL), CLT_OK);
    struct member_run m[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        m[r] = (struct member_run){.c = clt_comm_group_member(g, r)};
        ck_assert_int_eq(pthread_create(&th[r], NULL, abort_main, &m[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    ck_assert_int_eq(m[0].st, CLT_ERR_ABORTED);
    ck_assert(clt_comm_aborted(clt_comm_group_member(g, 0)));
    clt_comm_group_free(g);
}
END_TEST

/* ---- training ----------------------------------------------------------------------------- */

struct set {
    clt_dataset d;
    float *x;
    int32_t *y;
};

static void set_random(struct set *s, tc_rng *r, size_t n, size_t F, int classes)
{
    memset(s, 0, sizeof *s);
    s->x = malloc(n * F * sizeof *s->x);
    s->y = malloc(n * sizeof *s->y);
    ck_assert(s->x && s->y);
    tc_fill_nonzero(r, s->x, n * F, 0.05f, 2.0f);
    for (size_t i = 0; i < n; i++) s->y[i] = (int32_t)(tc_u32(r) % (uint32_t)classes);
    s->d.n = n;
    s->d.features = F;
    s->d.sample_ndim = 1;
    s->d.sample_shape[0] = F;
    s->d.f32 = s->x;
    s->d.labels = s->y;
    s->d.classes = classes;
    s->d.task = CLT_TASK_CLASSIFICATION;
    s->d.input_scale = 1.0f;
}

static void set_free(struct set *s)
{
    free(s->x);
    free(s->y);
}

struct eval_seen {
    int nevents;
    double last_acc, last_loss;
    double last_norm; /* the gradient norm at the last log point (clipping) */
};

static void on_event(const struct clt_train_event *e, void *user)
{
    struct eval_seen *v = user;
    v->nevents++;
    if (e->kind == CLT_EVENT_EVAL) {
        v->last_acc = e->accuracy;
        v->last_loss = e->loss;
    }
    if (e->kind == CLT_EVENT_LOG) v->last_norm = e->grad_norm;
}

struct run_cfg {
    const char *spec;
    int replicas;        /* 0: one trainer without a comm */
    const int *shares;
    clt_dtype precision;
    clt_loader_mode mode;
    size_t batch;
    long steps;
    long fail_at1;       /* replica 1's loader fails at this batch (-1: never) */
    bool drop_last;
    const char *save; /* checkpoint path (NULL: none) */
    float clip;       /* clip_grad (0: none) */
};

struct run_result {
    clt_status st;
    int failed;
    char msg[512];
    float *params[4]; /* per replica */
    size_t P;
    struct eval_seen seen;
    double reduce_bytes;
};

/* Trains cfg on ctxs of the test device (one per replica) from the same seed: 97 training
 * samples (the last batch of an epoch is 1 sample: empty for some replicas), 45 test
 * samples. */
static struct run_result run(const struct run_cfg *cfg)
{
    struct run_result out;
    memset(&out, 0, sizeof out);
    tc_rng r = tc_rng_for("replicas");
    struct set tr, te;
    set_random(&tr, &r, 97, 6, 3);
    set_random(&te, &r, 45, 6, 3);
    int n = cfg->replicas ? cfg->replicas : 1;
    clt_ctx *ctx[4] = {0};
    clt_train_setup *s[4] = {0};
    clt_comm_group *g = NULL;
    clt_spec spec = {0};
    ck_assert_msg(clt_spec_parse(cfg->spec, 0, &spec) == CLT_OK, "%s", clt_last_errmsg());
    if (cfg->replicas) ck_assert_int_eq(clt_comm_group_create(&g, n, cfg->shares), CLT_OK);
    for (int i = 0; i < n; i++) {
        ctx[i] = tc_ctx();
        struct clt_train_setup_params p = clt_train_setup_default_params();
        p.spec = &spec;
        p.in_features = 6;
        p.outputs = 3;
        p.train_set = &tr.d;
        p.test_set = &te.d;
        p.norm = (struct clt_input_norm){.features = 6, .scale = 1.0f};
        p.model.seed = 5;
        p.model.precision = cfg->precision;
        p.loader.mode = cfg->mode;
        p.loader.fail_at = i == 1 ? cfg->fail_at1 : -1;
        p.train.epochs = 3;
        p.train.max_steps = cfg->steps;
        p.train.drop_last = cfg->drop_last;
        p.train.save_path = cfg->save;
        p.train.save_every = cfg->save ? 7 : 0;
        p.train.batch_size = cfg->batch;
        p.train.seed = 9;
        p.train.log_every = 4;
        p.train.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
        p.train.optim.lr = 0.01f;
        p.train.optim.clip_grad = cfg->clip;
        p.train.on_event = on_event;
        p.train.user = &out.seen;
        p.train.comm = g ? clt_comm_group_member(g, i) : NULL;
        TC_OK(ctx[i], clt_train_setup_create(&s[i], ctx[i], &p));
        /* the estimate holds per replica: its slice, and the reduction's pinned buffer */
        struct clt_mem_estimate est;
        TC_OK(ctx[i], clt_train_mem_estimate(ctx[i], &p, cfg->batch, &est));
        ck_assert_uint_eq(est.total, clt_ctx_mem_stats(ctx[i]).current);
    }
    if (g) {
        out.st = clt_train_setup_run_group(s, n, &out.failed);
    } else {
        out.st = clt_train_setup_run(s[0]);
        out.failed = out.st == CLT_OK ? -1 : 0;
    }
    snprintf(out.msg, sizeof out.msg, "%s", clt_last_errmsg());
    clt_model *m0 = clt_train_setup_model(s[0]);
    out.P = clt_tensor_numel(clt_model_params(m0));
    for (int i = 0; i < n; i++) {
        out.params[i] = malloc(out.P * sizeof(float));
        TC_OK(ctx[i], clt_model_read_params(clt_train_setup_model(s[i]), out.params[i],
                                            CLT_WAIT_READ));
        clt_train_setup_free(s[i]);
        clt_ctx_free(ctx[i]);
    }
    clt_comm_group_free(g);
    clt_spec_free(&spec);
    set_free(&tr);
    set_free(&te);
    return out;
}

static void result_free(struct run_result *o)
{
    for (int i = 0; i < 4; i++) free(o->params[i]);
}

/* |a - b| <= tol * max|b| for every weight: the replicas sum the same per-sample gradients
 * in another order than one trainer does, so fp32 weights agree to rounding, not bits. */
static void check_close(const float *a, const float *b, size_t n, double tol, const char *what)
{
    double mx = 0, worst = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
    ck_assert_msg(worst <= tol * mx, "%s: max |diff| %g > %g x max |w| %g", what, worst, tol, mx);
}

static void check_equivalent(clt_dtype precision, clt_loader_mode mode, const int *shares,
                             int replicas, double tol)
{
    const char *spec = "linear 16, relu, linear 3";
    struct run_cfg one = {spec, 0, NULL, precision, mode, 16, 20, -1, false, NULL, 0};
    struct run_cfg many = {spec, replicas, shares, precision, mode, 16, 20, -1, false, NULL,
                          0};
    struct run_result a = run(&one), b = run(&many);
    ck_assert_msg(a.st == CLT_OK, "%s", a.msg);
    ck_assert_msg(b.st == CLT_OK, "%s", b.msg);
    for (int i = 1; i < replicas; i++)
        ck_assert_msg(memcmp(b.params[0], b.params[i], b.P * sizeof(float)) == 0,
                      "replica %d's weights differ from replica 0's", i);
    check_close(b.params[0], a.params[0], a.P, tol, "replicas against one trainer");
    /* evaluation: the slices' sums are the whole split's */
    ck_assert(fabs(b.seen.last_acc - a.seen.last_acc) <= 1.0 / 45 + 1e-9);
    ck_assert(fabs(b.seen.last_loss - a.seen.last_loss) <= 1e-3 * fabs(a.seen.last_loss));
    result_free(&a);
    result_free(&b);
}

/* 20 Adam steps at global batch 16 over 97 samples (steps 7 and 14 are 1-sample batches: an
 * empty slice for replica 0 of 2 and for two of 3): fp32 weights within 1e-5 of max |w|. */
START_TEST(test_equivalent_fp32)
{
    check_equivalent(CLT_DTYPE_F32, CLT_LOADER_RESIDENT, NULL, 2, 1e-5);
    const int shares[3] = {3, 1, 2};
    check_equivalent(CLT_DTYPE_F32, CLT_LOADER_STREAMING, shares, 3, 1e-5);
}
END_TEST

/* Clipping by the global norm of the summed gradients (after the replicas' reduction, not of
 * each replica's share): 20 Adam steps clipped to 0.05 on 2 replicas end where one trainer
 * does, within fp32 rounding, and report the same norm. */
START_TEST(test_equivalent_clip)
{
    const char *spec = "linear 16, relu, linear 3";
    struct run_cfg one = {spec, 0, NULL, CLT_DTYPE_F32, CLT_LOADER_RESIDENT, 16, 20, -1, false,
                          NULL, 0.05f};
    struct run_cfg many = one;
    many.replicas = 2;
    struct run_result a = run(&one), b = run(&many);
    ck_assert_msg(a.st == CLT_OK, "%s", a.msg);
    ck_assert_msg(b.st == CLT_OK, "%s", b.msg);
    check_close(b.params[0], a.params[0], a.P, 1e-5, "clipped replicas against one trainer");
    ck_assert_msg(a.seen.last_norm > 0.05, "the norm %g does not clip: a weak test",
                  a.seen.last_norm);
    ck_assert_msg(fabs(b.seen.last_norm - a.seen.last_norm) <= 1e-5 * a.seen.last_norm,
                  "grad norm: replicas %.9g, one trainer %.9g", b.seen.last_norm,
                  a.seen.last_norm);
    result_free(&a);
    result_free(&b);
}
END_TEST

/* bf16 storage: activations and the 16-bit weight copy round to 8 bits of mantissa, and a
 * sum in another order can round the other way: within 2e-2 of max |w| after 20 steps. */
START_TEST(test_equivalent_bf16)
{
    check_equivalent(CLT_DTYPE_BF16, CLT_LOADER_RESIDENT, NULL, 2, 2e-2);
}
END_TEST

/* Batch statistics differ per replica (as DDP without SyncBatchNorm): no equivalence, but the
 * parameters stay bit-identical, the running statistics are averaged before evaluation and
 * checkpoints, and evaluation runs. drop_last: batch norm refuses the 1-sample slices of the
 * last batch, as it refuses a 1-sample batch. */
START_TEST(test_batchnorm_replicas)
{
    char dir[256], path[300];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/bn.safetensors", dir);
    struct run_cfg cfg = {"linear 16, batchnorm, relu, linear 3", 2, NULL, CLT_DTYPE_F32,
                          CLT_LOADER_RESIDENT, 16, 20, -1, true, path, 0};
    struct run_result b = run(&cfg);
    ck_assert_msg(b.st == CLT_OK, "%s", b.msg);
    ck_assert(memcmp(b.params[0], b.params[1], b.P * sizeof(float)) == 0);
    ck_assert(isfinite(b.seen.last_acc));
    /* replica 0 wrote it (one file), with the number of replicas in its run */
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    ck_assert_int_eq(info.run.replicas, 2);
    ck_assert_int_eq(info.step, 18); /* 3 epochs of 6 full batches */
    clt_checkpoint_close(ck);
    tc_rmdir(dir);
    result_free(&b);
}
END_TEST

/* Replica 1's loader fails at its 6th batch: the run returns its status and message, and
 * replica 0, waiting for it in a reduction, is released (CLT_ERR_ABORTED) instead of hanging. */
START_TEST(test_failing_replica)
{
    struct run_cfg cfg = {"linear 16, relu, linear 3", 2, NULL, CLT_DTYPE_F32,
                          CLT_LOADER_STREAMING, 16, 20, 5, false, NULL, 0};
    struct run_result b = run(&cfg);
    ck_assert_int_eq(b.st, CLT_ERR_IO);
    ck_assert_int_eq(b.failed, 1);
    ck_assert_msg(tc_contains(b.msg, "injected failure"), "%s", b.msg);
    result_free(&b);
}
END_TEST

static Suite *replicas_suite(void)
{
    Suite *s = suite_create("replicas");
    TCase *tc = tc_tcase("replicas");
    tcase_add_test(tc, test_group_collectives);
    tcase_add_test(tc, test_group_abort);
    tcase_add_test(tc, test_equivalent_fp32);
    tcase_add_test(tc, test_equivalent_clip);
    tcase_add_test(tc, test_equivalent_bf16);
    tcase_add_test(tc, test_batchnorm_replicas);
    tcase_add_test(tc, test_failing_replica);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tc_run(replicas_suite());
}
