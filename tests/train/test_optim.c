/* Tests of the optim module: every optimizer variant against a float64 reference of PyTorch's
 * update rules (written here, in plain loops) over awkward sizes, with parameters exempt from
 * weight decay and with clipping by the global gradient norm (the norm the device reports
 * against the reference's), hand-computed 1-element
 * cases, the learning-rate schedules at chosen steps, parameter validation, device mismatch,
 * memory accounting, resume, the absence of host waits in a step, and the JSON description. */
#include "common.h"
#include "small.h"

#include "cltrain/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After 5 steps of a few fp32 roundings each, the device agrees with the float64 reference far
 * better than the house default (atol 1e-5, rtol 1e-4): hold it to atol 1e-6, rtol 1e-5. */
#define ATOL 1e-6
#define RTOL 1e-5
#define NSTEPS 5
#define P_OFF 3 /* params and grads are views at these offsets into larger buffers */
#define G_OFF 1

/* CLTRAIN_TEST_SMALL (tests/small.h): 4099 for 65537 */
static const size_t sizes_full[] = {1, 17, 1000, 65537}, sizes_small[] = {1, 17, 1000, 4099};

/* ---- float64 reference -------------------------------------------------------------------- */

/* The schedule, written independently of the library's. */
static double ref_lr(const struct clt_optim_params *p, long step)
{
    double lr = p->lr;
    long W = p->warmup_steps;
    if (step < W) return lr * (double)(step + 1) / (double)W;
    long s = step - W;
    if (p->schedule == CLT_SCHED_STEP) return lr * pow(p->gamma, (double)(s / p->step_size));
    if (p->schedule == CLT_SCHED_COSINE) {
        long T = p->total_steps - W;
        if (T <= 0) return lr;
        double c = (double)(s < T ? s : T) / (double)T;
        return p->min_lr + (lr - p->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * c));
    }
    return lr;
}

struct ref {
    double *p, *s0, *s1; /* params, momentum_buffer or exp_avg, exp_avg_sq */
    long steps;
    const unsigned char *no_decay; /* per element: 1 exempt from weight decay; NULL: none */
    double norm;                   /* clipping: the last step's gradient norm */
};

/* One step of torch.nn.utils.clip_grad_norm_ (when hp->clip_grad > 0) and torch.optim.SGD /
 * Adam / AdamW (documented algorithms) in double, the elements marked in r->no_decay in a
 * parameter group of weight_decay 0. */
static void ref_step(const struct clt_optim_params *hp, struct ref *r, const float *grad, size_t n)
{
    double lr = ref_lr(hp, r->steps);
    double t = (double)(r->steps + 1), b1 = hp->beta1, b2 = hp->beta2, clip = 1.0;
    if (hp->clip_grad > 0) {
        double sq = 0;
        for (size_t i = 0; i < n; i++) sq += (double)grad[i] * grad[i];
        r->norm = sqrt(sq);
        clip = fmin(1.0, hp->clip_grad / (r->norm + 1e-6));
    }
    for (size_t i = 0; i < n; i++) {
        double p = r->p[i], g = grad[i] * clip;
        double wd = r->no_decay && r->no_decay[i] ? 0.0 : hp->weight_decay;
        if (hp->kind == CLT_OPTIM_SGD) {
            g += wd * p;
            if (hp->momentum != 0.0f) {
                double mu = hp->momentum;
                r->s0[i] = r->steps == 0 ? g : mu * r->s0[i] + (1.0 - hp->dampening) * g;
                g = hp->nesterov ? g + mu * r->s0[i] : r->s0[i];
            }
            p -= lr * g;
        } else {
            if (hp->kind == CLT_OPTIM_ADAMW) p *= 1.0 - lr * wd;
            else g += wd * p;
            r->s0[i] = b1 * r->s0[i] + (1.0 - b1) * g;
            r->s1[i] = b2 * r->s1[i] + (1.0 - b2) * g * g;
            double mhat = r->s0[i] / (1.0 - pow(b1, t)), vhat = r->s1[i] / (1.0 - pow(b2, t));
            p -= lr * mhat / (sqrt(vhat) + hp->eps);
        }
        r->p[i] = p;
    }
    r->steps++;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static clt_tensor *make_1d(clt_ctx *ctx, size_t n, clt_mem_category cat)
{
    clt_tensor *t = NULL;
    TC_OK(ctx, clt_tensor_create(&t, ctx, CLT_DTYPE_F32, 1, &n, cat));
    return t;
}

static clt_tensor *view_1d(clt_ctx *ctx, clt_tensor *base, size_t off, size_t n)
{
    clt_tensor *t = NULL;
    TC_OK(ctx, clt_tensor_view(&t, base, off, 1, &n));
    return t;
}

/* The no-decay ranges of a parameter tensor of n elements: a third at the start, and a fifth
 * from the middle on (crossing update work-items' boundaries at every size above 16). */
static int no_decay_ranges(size_t n, size_t *off, size_t *cnt)
{
    off[0] = 0;
    cnt[0] = n / 3;
    off[1] = n / 2;
    cnt[1] = n / 5 + 1 < n - n / 2 ? n / 5 + 1 : n - n / 2;
    return 2;
}

/* Runs NSTEPS steps of `hp` on random params/grads of each size, checking params and state
 * against the reference after every step and the guard elements around the views at the end.
 * With `exempt`, no_decay_ranges are exempt from weight decay. With hp->clip_grad > 0, the
 * threshold is hp->clip_grad * sqrt(n) (the gradients' norm grows so), and the norm the device
 * reports is checked after every step. */
static void run_with(const struct clt_optim_params *hp0, bool exempt, const char *name)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng rng = tc_rng_for(name);
    const size_t *sizes = TC_SMALL_OR(sizes_full, sizes_small);
    for (size_t si = 0; si < sizeof sizes_full / sizeof sizes_full[0]; si++) {
        size_t n = sizes[si];
        clt_tensor *pbase = make_1d(ctx, n + P_OFF + 2, CLT_MEM_PARAMS);
        clt_tensor *gbase = make_1d(ctx, n + G_OFF + 2, CLT_MEM_GRADS);
        clt_tensor *params = view_1d(ctx, pbase, P_OFF, n), *grads = view_1d(ctx, gbase, G_OFF, n);
        float *hp_base = malloc((n + P_OFF + 2) * sizeof *hp_base);
        float *hg = malloc(n * sizeof *hg), *got = malloc((n + P_OFF + 2) * sizeof *got);
        struct ref r = {calloc(n, sizeof(double)), calloc(n, sizeof(double)),
                        calloc(n, sizeof(double)), 0, NULL, 0};
        unsigned char *nd = calloc(n, 1);
        ck_assert(hp_base && hg && got && r.p && r.s0 && r.s1 && nd);
        struct clt_optim_params hpn = *hp0;
        const struct clt_optim_params *hp = &hpn;
        hpn.clip_grad = hp0->clip_grad * (float)sqrt((double)n);
        tc_fill_nonzero(&rng, hp_base, n + P_OFF + 2, 0.1f, 2.0f);
        for (size_t i = 0; i < n; i++) r.p[i] = hp_base[P_OFF + i];
        tc_write(pbase, hp_base);

        clt_optim *o = NULL;
        TC_OK(ctx, clt_optim_create(&o, params, hp));
        if (exempt) {
            size_t off[2], cnt[2];
            int nr = no_decay_ranges(n, off, cnt);
            TC_OK(ctx, clt_optim_set_no_decay(o, nr, off, cnt));
            for (int k = 0; k < nr; k++) memset(nd + off[k], 1, cnt[k]);
            r.no_decay = nd;
        }
        int nstate = clt_optim_state_count(o);
        ck_assert_int_eq(nstate, hp->kind != CLT_OPTIM_SGD ? 2 : hp->momentum != 0.0f ? 1 : 0);
        for (int step = 0; step < NSTEPS; step++) {
            char what[96];
            tc_fill_nonzero(&rng, hg, n, 0.01f, 2.0f); /* different grads every step */
            tc_write(grads, hg);
            TC_OK(ctx, clt_optim_step(o, grads));
            ref_step(hp, &r, hg, n);
            ck_assert_int_eq(clt_optim_steps(o), step + 1);
            tc_read(params, got);
            snprintf(what, sizeof what, "%s n=%zu step %d: param", name, n, step);
            tc_check_close(got, r.p, n, ATOL, RTOL, what, rng.seed);
            if (hp->clip_grad > 0) {
                float norm = 0;
                TC_OK(ctx, clt_optim_read_grad_norm(o, &norm, true, NULL));
                snprintf(what, sizeof what, "%s n=%zu step %d: gradient norm", name, n, step);
                tc_check_close(&norm, &r.norm, 1, ATOL, RTOL, what, rng.seed);
            }
            for (int s = 0; s < nstate; s++) {
                const char *sname = NULL;
                clt_tensor *st = clt_optim_state(o, s, &sname);
                ck_assert_uint_eq(clt_tensor_numel(st), n);
                ck_assert_ptr_eq(clt_tensor_ctx(st), ctx);
                tc_read(st, got);
                snprintf(what, sizeof what, "%s n=%zu step %d: %s", name, n, step, sname);
                tc_check_close(got, s == 0 ? r.s0 : r.s1, n, ATOL, RTOL, what, rng.seed);
            }
        }
        /* Elements outside the parameter view are untouched. */
        tc_read(pbase, got);
        for (size_t i = 0; i < n + P_OFF + 2; i++)
            if (i < P_OFF || i >= P_OFF + n) ck_assert_float_eq(got[i], hp_base[i]);
        clt_optim_free(o);
        clt_tensor_free(params);
        clt_tensor_free(grads);
        clt_tensor_free(pbase);
        clt_tensor_free(gbase);
        free(hp_base);
        free(hg);
        free(got);
        free(r.p);
        free(r.s0);
        free(r.s1);
        free(nd);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

static void run_against_reference(const struct clt_optim_params *hp, const char *name)
{
    run_with(hp, false, name);
}

/* 1-element optimizer: param p0, then `steps` steps with gradient values g[k]; returns param
 * and state 0/1 (if present). */
static void run_one(const struct clt_optim_params *hp, float p0, const float *g, int steps,
                    float *p_out, float *s0_out, float *s1_out)
{
    clt_ctx *ctx = tc_ctx();
    clt_tensor *params = make_1d(ctx, 1, CLT_MEM_PARAMS), *grads = make_1d(ctx, 1, CLT_MEM_GRADS);
    tc_write(params, &p0);
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, hp));
    for (int k = 0; k < steps; k++) {
        tc_write(grads, &g[k]);
        TC_OK(ctx, clt_optim_step(o, grads));
    }
    tc_read(params, p_out);
    if (s0_out) tc_read(clt_optim_state(o, 0, NULL), s0_out);
    if (s1_out) tc_read(clt_optim_state(o, 1, NULL), s1_out);
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_tensor_free(grads);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

/* ---- against the reference ------------------------------------------------------------------ */

START_TEST(test_sgd_plain)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.1f;
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_sgd_momentum)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.05f;
    p.momentum = 0.9f;
    /* with a step-decay schedule, so that the lr changes between steps */
    p.schedule = CLT_SCHED_STEP;
    p.step_size = 2;
    p.gamma = 0.5f;
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_sgd_nesterov_wd)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.05f;
    p.momentum = 0.9f;
    p.nesterov = true;
    p.weight_decay = 0.05f;
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_sgd_dampening)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.05f;
    p.momentum = 0.8f;
    p.dampening = 0.3f;
    p.weight_decay = 0.01f;
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_adam)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_ADAM);
    p.lr = 0.01f;
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_adam_wd)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_ADAM);
    p.lr = 0.01f;
    p.weight_decay = 0.1f;
    p.beta1 = 0.8f;
    p.beta2 = 0.99f;
    p.eps = 1e-3f; /* large enough that a misplaced eps shows */
    run_against_reference(&p, __func__);
}
END_TEST

START_TEST(test_adamw)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_ADAMW);
    p.lr = 0.05f;
    p.weight_decay = 0.2f;
    /* cosine with warm-up: steps 0, 1 warm up, 2..4 anneal towards min_lr */
    p.schedule = CLT_SCHED_COSINE;
    p.warmup_steps = 2;
    p.total_steps = 5;
    p.min_lr = 0.001f;
    run_against_reference(&p, __func__);
}
END_TEST

/* ---- weight-decay exemptions and clipping against the reference ----------------------------- */

START_TEST(test_no_decay)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.05f;
    p.momentum = 0.9f;
    p.weight_decay = 0.3f;
    run_with(&p, true, "no_decay sgd");
    p = clt_optim_default_params(CLT_OPTIM_ADAM);
    p.lr = 0.01f;
    p.weight_decay = 0.3f;
    run_with(&p, true, "no_decay adam");
    p = clt_optim_default_params(CLT_OPTIM_ADAMW);
    p.lr = 0.05f;
    p.weight_decay = 0.5f;
    run_with(&p, true, "no_decay adamw");
}
END_TEST

/* AdamW with zero gradients: an exempt element (a bias, a norm parameter) keeps its value, bit
 * for bit, while a decaying one (a weight) shrinks by exactly (1 - lr * wd), at each size. Fails
 * when the exemption is lost in the vector path, the tail, or at a work-item's boundary. */
START_TEST(test_no_decay_exact)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng rng = tc_rng_for(__func__);
    const size_t sizes[] = {1, 17, 37, 1000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const size_t n = sizes[si];
        float *p0 = malloc(n * sizeof *p0), *got = malloc(n * sizeof *got);
        float *zero = calloc(n, sizeof *zero);
        ck_assert(p0 && got && zero);
        tc_fill_nonzero(&rng, p0, n, 0.1f, 2.0f);
        clt_tensor *params = make_1d(ctx, n, CLT_MEM_PARAMS);
        clt_tensor *grads = make_1d(ctx, n, CLT_MEM_GRADS);
        tc_write(params, p0);
        tc_write(grads, zero);
        struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_ADAMW);
        q.lr = 0.1f;
        q.weight_decay = 0.5f;
        clt_optim *o = NULL;
        TC_OK(ctx, clt_optim_create(&o, params, &q));
        size_t off[2], cnt[2];
        int nr = no_decay_ranges(n, off, cnt);
        TC_OK(ctx, clt_optim_set_no_decay(o, nr, off, cnt));
        TC_OK(ctx, clt_optim_step(o, grads));
        tc_read(params, got);
        const float decay = (float)(1.0 - (double)q.lr * (double)q.weight_decay);
        for (size_t i = 0; i < n; i++) {
            bool exempt = false;
            for (int k = 0; k < nr; k++) exempt = exempt || (i >= off[k] && i < off[k] + cnt[k]);
            const float want = exempt ? p0[i] : p0[i] * decay;
            if (got[i] != want)
                ck_abort_msg("n=%zu element %zu (%s): got %.9g, want %.9g", n, i,
                             exempt ? "exempt" : "decays", (double)got[i], (double)want);
        }
        /* n 0 makes every element decay again */
        TC_OK(ctx, clt_optim_set_no_decay(o, 0, NULL, NULL));
        TC_OK(ctx, clt_optim_step(o, grads));
        float *again = malloc(n * sizeof *again);
        ck_assert(again);
        tc_read(params, again);
        for (size_t i = 0; i < n; i++) ck_assert_float_eq(again[i], got[i] * decay);
        clt_optim_free(o);
        clt_tensor_free(params);
        clt_tensor_free(grads);
        free(p0);
        free(got);
        free(zero);
        free(again);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A range beyond the parameters is refused, naming it, and changes nothing. */
START_TEST(test_no_decay_bad_range)
{
    clt_ctx *ctx = tc_ctx();
    clt_tensor *params = make_1d(ctx, 10, CLT_MEM_PARAMS);
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_ADAMW);
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, &q));
    size_t off[] = {2, 8}, cnt[] = {3, 3};
    ck_assert_int_eq(clt_optim_set_no_decay(o, 2, off, cnt), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "beyond the 10 parameters"), "%s",
                  clt_ctx_errmsg(ctx));
    float norm;
    ck_assert_int_eq(clt_optim_read_grad_norm(o, &norm, true, NULL), CLT_ERR_INVALID_ARG);
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Clipping by the global norm, the norm above the threshold (clipped: 0.3 sqrt(n) against a
 * norm of about 1.2 sqrt(n)) and below it (untouched: 5 sqrt(n)), for each kind, with and
 * without exemptions from weight decay. */
START_TEST(test_clip_grad)
{
    const float thresholds[] = {0.3f, 5.0f};
    for (int c = 0; c < 2; c++) {
        struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
        p.lr = 0.05f;
        p.momentum = 0.9f;
        p.clip_grad = thresholds[c];
        run_with(&p, false, c ? "clip sgd below" : "clip sgd above");
        p = clt_optim_default_params(CLT_OPTIM_ADAM);
        p.lr = 0.01f;
        p.weight_decay = 0.1f;
        p.clip_grad = thresholds[c];
        run_with(&p, true, c ? "clip adam below" : "clip adam above");
        p = clt_optim_default_params(CLT_OPTIM_ADAMW);
        p.lr = 0.05f;
        p.weight_decay = 0.2f;
        p.beta2 = 0.99f;
        p.clip_grad = thresholds[c];
        run_with(&p, true, c ? "clip adamw below" : "clip adamw above");
    }
}
END_TEST

/* Clipping with loss scaling: the norm of the unscaled gradients, the update that of the
 * unscaled, clipped ones; a step with an inf gradient stays skipped (parameters unchanged)
 * and reports a norm that is not finite. */
START_TEST(test_clip_grad_scaled)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng rng = tc_rng_for(__func__);
    const size_t n = 1000;
    float *p0 = malloc(n * sizeof *p0), *hg = malloc(n * sizeof *hg);
    float *scaled = malloc(n * sizeof *scaled), *got = malloc(n * sizeof *got);
    double *want = malloc(n * sizeof *want);
    ck_assert(p0 && hg && scaled && got && want);
    tc_fill_nonzero(&rng, p0, n, 0.1f, 2.0f);
    tc_fill_nonzero(&rng, hg, n, 0.01f, 2.0f);
    struct clt_scaler_params sp = clt_scaler_default_params();
    sp.init_scale = 1024.0f; /* a power of two: scaling and unscaling are exact */
    for (size_t i = 0; i < n; i++) scaled[i] = hg[i] * sp.init_scale;
    clt_tensor *params = make_1d(ctx, n, CLT_MEM_PARAMS), *grads = make_1d(ctx, n, CLT_MEM_GRADS);
    tc_write(params, p0);
    tc_write(grads, scaled);
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_SGD);
    q.lr = 0.1f;
    q.clip_grad = 2.0f;
    clt_optim *o = NULL;
    clt_scaler *s = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, &q));
    TC_OK(ctx, clt_scaler_create(&s, ctx, &sp));
    TC_OK(ctx, clt_optim_step_scaled(o, grads, s));
    struct ref r = {want, NULL, NULL, 0, NULL, 0};
    for (size_t i = 0; i < n; i++) want[i] = p0[i];
    ref_step(&q, &r, hg, n);
    float norm = 0;
    TC_OK(ctx, clt_optim_read_grad_norm(o, &norm, true, NULL));
    tc_check_close(&norm, &r.norm, 1, ATOL, RTOL, "scaled: gradient norm", rng.seed);
    ck_assert(r.norm > 2 * q.clip_grad); /* the case clips */
    tc_read(params, got);
    tc_check_close(got, want, n, ATOL, RTOL, "scaled: param", rng.seed);
    scaled[7] = INFINITY;
    tc_write(grads, scaled);
    TC_OK(ctx, clt_optim_step_scaled(o, grads, s));
    float after[1000];
    tc_read(params, after);
    ck_assert_mem_eq(after, got, n * sizeof(float)); /* skipped */
    TC_OK(ctx, clt_optim_read_grad_norm(o, &norm, true, NULL));
    ck_assert(!isfinite(norm));
    clt_scaler_free(s);
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_tensor_free(grads);
    free(p0);
    free(hg);
    free(scaled);
    free(got);
    free(want);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- hand-computed 1-element cases --------------------------------------------------------- */

START_TEST(test_hand_sgd)
{
    float p, b;
    const float g[2] = {0.5f, 0.5f};
    struct clt_optim_params hp = clt_optim_default_params(CLT_OPTIM_SGD);
    hp.lr = 0.25f;
    run_one(&hp, 1.0f, g, 1, &p, NULL, NULL);
    ck_assert_float_eq(p, 0.875f); /* 1 - 0.25 * 0.5 */
    hp.weight_decay = 0.5f;        /* 1 - 0.25 * (0.5 + 0.5 * 1) */
    run_one(&hp, 1.0f, g, 1, &p, NULL, NULL);
    ck_assert_float_eq(p, 0.75f);
    hp.weight_decay = 0.0f;

    hp.momentum = 0.5f; /* buf 0.5, p 0.875; buf 0.5*0.5 + 0.5 = 0.75, p 0.875 - 0.1875 */
    run_one(&hp, 1.0f, g, 2, &p, &b, NULL);
    ck_assert_float_eq(p, 0.6875f);
    ck_assert_float_eq(b, 0.75f);

    hp.dampening = 0.5f; /* first step undamped: buf 0.5; then 0.25 + 0.5*0.5 = 0.5 */
    run_one(&hp, 1.0f, g, 2, &p, &b, NULL);
    ck_assert_float_eq(p, 0.75f);
    ck_assert_float_eq(b, 0.5f);

    /* Nesterov, wd 0.5: g' = 0.5 + 0.5*1 = 1, buf 1, d = 1 + 0.5 = 1.5, p = 0.625;
     * g' = 0.5 + 0.3125 = 0.8125, buf 0.5 + 0.8125 = 1.3125, d = 0.8125 + 0.65625 = 1.46875,
     * p = 0.625 - 0.3671875 = 0.2578125 */
    hp.dampening = 0.0f;
    hp.nesterov = true;
    hp.weight_decay = 0.5f;
    run_one(&hp, 1.0f, g, 2, &p, &b, NULL);
    ck_assert_float_eq(p, 0.2578125f);
    ck_assert_float_eq(b, 1.3125f);
}
END_TEST

START_TEST(test_hand_adam)
{
    float p, m, v;
    struct clt_optim_params hp = clt_optim_default_params(CLT_OPTIM_ADAM);
    const double b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, eps = hp.eps;
    /* First step: m_hat = g, v_hat = g^2, so p moves by lr * g / (|g| + eps) ~ lr * sign(g). */
    const float g1[1] = {-2.0f};
    run_one(&hp, 1.0f, g1, 1, &p, &m, &v);
    ck_assert_double_eq_tol(p, 1.0 + lr * 2.0 / (2.0 + eps), 1.2e-7); /* 1.001 */
    ck_assert_double_eq_tol(m, (1.0 - b1) * -2.0, 1e-7);                /* -0.2 */
    ck_assert_double_eq_tol(v, (1.0 - b2) * 4.0, 1e-9);                 /* 0.004 */
    /* A constant gradient keeps m_hat = g and v_hat = g^2 exactly: 3 steps move 3 lr. */
    const float g3[3] = {0.5f, 0.5f, 0.5f};
    run_one(&hp, 1.0f, g3, 3, &p, &m, &v);
    ck_assert_double_eq_tol(p, 1.0 - 3.0 * lr * 0.5 / (0.5 + eps), 3e-7); /* 0.997 */
    ck_assert_double_eq_tol(m, (1.0 - b1 * b1 * b1) * 0.5, 1e-7);         /* 0.1355 */
    ck_assert_double_eq_tol(v, (1.0 - b2 * b2 * b2) * 0.25, 1e-9);        /* 0.00074925 */
    /* AdamW, lr 1e-3, wd 1e-2: p = 1 * (1 - 1e-5) - 1e-3 * 0.5 / (0.5 + 1e-8) = 0.99899 */
    hp = clt_optim_default_params(CLT_OPTIM_ADAMW);
    run_one(&hp, 1.0f, g3, 1, &p, &m, &v);
    ck_assert_double_eq_tol(p, (1.0 - lr * (double)hp.weight_decay) - lr * 0.5 / (0.5 + eps),
                            1.2e-7);
    ck_assert_double_eq_tol(p, 0.99899, 1.2e-7);
    /* Adam with L2 wd 0.5 on p = 1: the gradient seen is 0.5 + 0.5 = 1, the step lr. */
    hp = clt_optim_default_params(CLT_OPTIM_ADAM);
    hp.weight_decay = 0.5f;
    run_one(&hp, 1.0f, g3, 1, &p, &m, &v);
    ck_assert_double_eq_tol(p, 1.0 - lr / (1.0 + eps), 1.2e-7);
    ck_assert_double_eq_tol(m, (1.0 - b1) * 1.0, 1e-8);
    /* eps 0.5 is added to sqrt(v_hat) = |g| = 0.5: the step is lr / 2 */
    hp = clt_optim_default_params(CLT_OPTIM_ADAM);
    hp.eps = 0.5f;
    run_one(&hp, 1.0f, g3, 1, &p, &m, &v);
    ck_assert_double_eq_tol(p, 1.0 - lr / 2.0, 1.2e-7);
}
END_TEST

/* ---- schedules ------------------------------------------------------------------------------ */

START_TEST(test_schedules)
{
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.lr = 0.1f;
    /* constant */
    ck_assert_float_eq(clt_optim_lr_at(&p, 0), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 123456), 0.1f);
    p.warmup_steps = 4; /* 0.025, 0.05, 0.075, 0.1, then 0.1 */
    ck_assert_float_eq(clt_optim_lr_at(&p, 0), (float)(0.1f * 0.25));
    ck_assert_float_eq(clt_optim_lr_at(&p, 1), (float)(0.1f * 0.5));
    ck_assert_float_eq(clt_optim_lr_at(&p, 2), (float)(0.1f * 0.75));
    ck_assert_float_eq(clt_optim_lr_at(&p, 3), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 4), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 1000), 0.1f);

    /* step decay: step_size 10, gamma 0.5 */
    p.schedule = CLT_SCHED_STEP;
    p.step_size = 10;
    p.gamma = 0.5f;
    p.warmup_steps = 0;
    ck_assert_float_eq(clt_optim_lr_at(&p, 0), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 9), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 10), 0.05f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 19), 0.05f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 25), 0.025f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 100), (float)(0.1f / 1024.0));
    p.warmup_steps = 5; /* decay counted from the end of warm-up */
    ck_assert_float_eq(clt_optim_lr_at(&p, 0), 0.02f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 4), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 5), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 14), 0.1f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 15), 0.05f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 35), 0.0125f);

    /* cosine: lr 1 -> 0 over 100 steps */
    p.schedule = CLT_SCHED_COSINE;
    p.lr = 1.0f;
    p.min_lr = 0.0f;
    p.total_steps = 100;
    p.warmup_steps = 0;
    ck_assert_float_eq(clt_optim_lr_at(&p, 0), 1.0f);
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 25), 0.85355339f, 1e-7f); /* (1+cos(pi/4))/2 */
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 50), 0.5f, 1e-7f);
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 75), 0.14644661f, 1e-7f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 100), 0.0f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 500), 0.0f); /* stays at min_lr past T */
    p.min_lr = 0.1f;
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 50), 0.55f, 1e-7f);
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 100), 0.1f, 1e-7f);
    /* with warm-up 10, T 110: 0.1, ..., 1.0 at step 9, then cosine over 100 steps */
    p.min_lr = 0.0f;
    p.warmup_steps = 10;
    p.total_steps = 110;
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 0), 0.1f, 1e-8f);
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 4), 0.5f, 1e-8f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 9), 1.0f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 10), 1.0f);
    ck_assert_float_eq_tol(clt_optim_lr_at(&p, 60), 0.5f, 1e-7f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 110), 0.0f);
    /* T <= W: lr after the warm-up */
    p.total_steps = 10;
    ck_assert_float_eq(clt_optim_lr_at(&p, 10), 1.0f);
    ck_assert_float_eq(clt_optim_lr_at(&p, 1000), 1.0f);
    ck_assert_int_eq(clt_optim_validate(&p), CLT_OK);
}
END_TEST

/* ---- validation, parsing, description -------------------------------------------------------- */

START_TEST(test_invalid_params)
{
    int n = 0;
    /* CASE(kind, word expected in the message, edit of the defaults) */
#define CASE(k, f, body)                                                                           \
    do {                                                                                           \
        struct clt_optim_params q = clt_optim_default_params(k);                                   \
        body;                                                                                      \
        ck_assert_msg(clt_optim_validate(&q) == CLT_ERR_INVALID_ARG, "accepted: %s", #body);       \
        ck_assert_msg(tc_contains(clt_last_errmsg(), f), "message \"%s\" lacks \"%s\"",           \
                      clt_last_errmsg(), f);                                                       \
        clt_optim *o_ = (clt_optim *)(uintptr_t)1;                                         \
        ck_assert_int_eq(clt_optim_create(&o_, params, &q), CLT_ERR_INVALID_ARG);                  \
        ck_assert_ptr_null(o_);                                                                    \
        ck_assert(tc_contains(clt_ctx_errmsg(ctx), f));                                            \
        n++;                                                                                       \
    } while (0)
    clt_ctx *ctx = tc_ctx();
    clt_tensor *params = make_1d(ctx, 8, CLT_MEM_PARAMS);
    CASE(CLT_OPTIM_SGD, "lr", q.lr = 0.0f);
    CASE(CLT_OPTIM_SGD, "lr", q.lr = -1.0f);
    CASE(CLT_OPTIM_ADAM, "lr", q.lr = INFINITY);
    CASE(CLT_OPTIM_ADAM, "lr", q.lr = NAN);
    CASE(CLT_OPTIM_SGD, "momentum", q.momentum = -0.1f);
    CASE(CLT_OPTIM_SGD, "nesterov", q.nesterov = true);
    CASE(CLT_OPTIM_SGD, "nesterov", (q.nesterov = true, q.momentum = 0.9f, q.dampening = 0.1f));
    CASE(CLT_OPTIM_SGD, "weight_decay", q.weight_decay = -1e-3f);
    CASE(CLT_OPTIM_ADAM, "beta1", q.beta1 = 1.0f);
    CASE(CLT_OPTIM_ADAMW, "beta1", q.beta1 = -0.1f);
    CASE(CLT_OPTIM_ADAM, "beta2", q.beta2 = 1.0f);
    CASE(CLT_OPTIM_ADAM, "eps", q.eps = 0.0f);
    CASE(CLT_OPTIM_ADAM, "warmup_steps", q.warmup_steps = -1);
    CASE(CLT_OPTIM_SGD, "step_size", (q.schedule = CLT_SCHED_STEP, q.step_size = 0));
    CASE(CLT_OPTIM_SGD, "gamma", (q.schedule = CLT_SCHED_STEP, q.gamma = 0.0f));
    CASE(CLT_OPTIM_ADAM, "total_steps", (q.schedule = CLT_SCHED_COSINE, q.total_steps = 0));
    CASE(CLT_OPTIM_ADAM, "min_lr", (q.schedule = CLT_SCHED_COSINE, q.min_lr = 1.0f));
    CASE(CLT_OPTIM_ADAM, "kind", q.kind = (clt_optim_kind)7);
    CASE(CLT_OPTIM_ADAM, "schedule", q.schedule = (clt_schedule)9);
#undef CASE
    ck_assert_int_eq(n, 19);
    /* The fields of another kind are not checked. */
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_SGD);
    q.beta1 = 5.0f;
    q.eps = 0.0f;
    ck_assert_int_eq(clt_optim_validate(&q), CLT_OK);
    q = clt_optim_default_params(CLT_OPTIM_ADAM);
    q.momentum = -1.0f;
    q.nesterov = true;
    ck_assert_int_eq(clt_optim_validate(&q), CLT_OK);
    for (int k = CLT_OPTIM_SGD; k <= CLT_OPTIM_ADAMW; k++) {
        q = clt_optim_default_params((clt_optim_kind)k);
        ck_assert_int_eq(clt_optim_validate(&q), CLT_OK);
    }

    /* Parameters must be f32; grads f32 with the same length. */
    clt_optim *o = NULL;
    size_t eight = 8;
    clt_tensor *half = NULL, *short_g = make_1d(ctx, 7, CLT_MEM_GRADS), *half_g = NULL;
    TC_OK(ctx, clt_tensor_create(&half, ctx, CLT_DTYPE_F16, 1, &eight, CLT_MEM_PARAMS));
    TC_OK(ctx, clt_tensor_create(&half_g, ctx, CLT_DTYPE_F16, 1, &eight, CLT_MEM_GRADS));
    q = clt_optim_default_params(CLT_OPTIM_ADAM);
    ck_assert_int_eq(clt_optim_create(&o, half, &q), CLT_ERR_SHAPE);
    ck_assert_ptr_null(o);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "f32"));
    TC_OK(ctx, clt_optim_create(&o, params, &q));
    ck_assert_int_eq(clt_optim_step(o, short_g), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_optim_step(o, half_g), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_optim_steps(o), 0);
    clt_optim_free(o);
    clt_tensor_free(half);
    clt_tensor_free(half_g);
    clt_tensor_free(short_g);
    clt_tensor_free(params);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_parse_defaults_describe)
{
    clt_optim_kind k;
    clt_schedule s;
    ck_assert_int_eq(clt_optim_parse_kind("sgd", &k), CLT_OK);
    ck_assert_int_eq(k, CLT_OPTIM_SGD);
    ck_assert_int_eq(clt_optim_parse_kind("Adam", &k), CLT_OK);
    ck_assert_int_eq(k, CLT_OPTIM_ADAM);
    ck_assert_int_eq(clt_optim_parse_kind("adamw", &k), CLT_OK);
    ck_assert_int_eq(k, CLT_OPTIM_ADAMW);
    ck_assert_int_eq(clt_optim_parse_kind("rmsprop", &k), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_last_errmsg(), "rmsprop"));
    ck_assert_int_eq(clt_optim_parse_kind("", &k), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_optim_parse_schedule("constant", &s), CLT_OK);
    ck_assert_int_eq(s, CLT_SCHED_CONSTANT);
    ck_assert_int_eq(clt_optim_parse_schedule("step", &s), CLT_OK);
    ck_assert_int_eq(s, CLT_SCHED_STEP);
    ck_assert_int_eq(clt_optim_parse_schedule("COSINE", &s), CLT_OK);
    ck_assert_int_eq(s, CLT_SCHED_COSINE);
    ck_assert_int_eq(clt_optim_parse_schedule("linear", &s), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_last_errmsg(), "cosine"));
    ck_assert_str_eq(clt_optim_kind_name(CLT_OPTIM_ADAMW), "adamw");
    ck_assert_str_eq(clt_schedule_name(CLT_SCHED_STEP), "step");

    /* PyTorch's defaults */
    struct clt_optim_params p = clt_optim_default_params(CLT_OPTIM_SGD);
    ck_assert(p.lr == 1e-3f && p.momentum == 0.0f && p.dampening == 0.0f &&
              p.weight_decay == 0.0f && !p.nesterov && p.schedule == CLT_SCHED_CONSTANT &&
              p.warmup_steps == 0);
    p = clt_optim_default_params(CLT_OPTIM_ADAM);
    ck_assert(p.lr == 1e-3f && p.beta1 == 0.9f && p.beta2 == 0.999f && p.eps == 1e-8f &&
              p.weight_decay == 0.0f);
    char *d = clt_optim_describe(&p);
    ck_assert_ptr_nonnull(d);
    ck_assert_str_eq(d, "{\"name\":\"adam\",\"lr\":0.001,\"betas\":[0.9,0.999],\"eps\":1e-08,"
                        "\"weight_decay\":0,\"schedule\":\"constant\",\"warmup_steps\":0,"
                        "\"step_size\":1,\"gamma\":0.1,\"total_steps\":1,\"min_lr\":0}");
    free(d);
    p = clt_optim_default_params(CLT_OPTIM_ADAMW);
    ck_assert(p.lr == 1e-3f && p.beta1 == 0.9f && p.beta2 == 0.999f && p.eps == 1e-8f &&
              p.weight_decay == 1e-2f);
    p.schedule = CLT_SCHED_COSINE;
    p.total_steps = 1000;
    p.warmup_steps = 50;
    p.min_lr = 1e-5f;
    d = clt_optim_describe(&p);
    ck_assert(tc_contains(d, "\"name\":\"adamw\"") && tc_contains(d, "\"weight_decay\":0.01") &&
              tc_contains(d, "\"schedule\":\"cosine\"") && tc_contains(d, "\"warmup_steps\":50") &&
              tc_contains(d, "\"total_steps\":1000") && tc_contains(d, "\"min_lr\":1e-05"));
    free(d);
    p = clt_optim_default_params(CLT_OPTIM_SGD);
    p.momentum = 0.9f;
    p.nesterov = true;
    p.lr = 0.1f;
    d = clt_optim_describe(&p);
    ck_assert_str_eq(d, "{\"name\":\"sgd\",\"lr\":0.1,\"momentum\":0.9,\"dampening\":0,"
                        "\"nesterov\":true,\"weight_decay\":0,\"schedule\":\"constant\","
                        "\"warmup_steps\":0,\"step_size\":1,\"gamma\":0.1,\"total_steps\":1,"
                        "\"min_lr\":0}");
    free(d);
    p.lr = 1.0f / 3.0f; /* shortest text that reads back as the same float */
    d = clt_optim_describe(&p);
    ck_assert(tc_contains(d, "\"lr\":0.33333334,"));
    free(d);
}
END_TEST

/* ---- device, accounting, resume, waits ------------------------------------------------------- */

START_TEST(test_device_mismatch)
{
    clt_ctx *a = tc_ctx(), *b = tc_ctx();
    clt_tensor *params = make_1d(a, 17, CLT_MEM_PARAMS), *grads = make_1d(b, 17, CLT_MEM_GRADS);
    float hp[17], got[17];
    tc_rng rng = tc_rng_for(__func__);
    tc_fill_nonzero(&rng, hp, 17, 0.1f, 1.0f);
    tc_write(params, hp);
    tc_write(grads, hp);
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_ADAM);
    clt_optim *o = NULL;
    TC_OK(a, clt_optim_create(&o, params, &q));
    for (int i = 0; i < clt_optim_state_count(o); i++)
        ck_assert_ptr_eq(clt_tensor_ctx(clt_optim_state(o, i, NULL)), a); /* born on a */
    ck_assert_int_eq(clt_optim_step(o, grads), CLT_ERR_DEVICE_MISMATCH);
    ck_assert(tc_contains(clt_ctx_errmsg(a), "device"));
    ck_assert_int_eq(clt_optim_steps(o), 0);
    tc_read(params, got);
    ck_assert_mem_eq(got, hp, sizeof hp); /* untouched */
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_tensor_free(grads);
    clt_ctx_free(a);
    clt_ctx_free(b);
    tc_assert_no_live();
}
END_TEST

/* clt_optim_set_copy: for plain SGD, SGD with momentum, Adam and AdamW, each through
 * clt_optim_step and through clt_optim_step_scaled (the loss-scaled kernels, a step with an
 * inf gradient among them), with an f16 and a bf16 copy (a view between poisoned guards): after
 * every step the parameters have the bits of an optimizer without a copy, and the copy the bits
 * of clt_op_cast of them (a skipped step changes neither); the guards untouched; then NULL
 * stops the copy. The copy's checks: dtype, length and ctx. */
START_TEST(test_copy)
{
    clt_ctx *ctx = tc_ctx(), *other = tc_ctx();
    tc_rng rng = tc_rng_for(__func__);
    const size_t n = 1000, off = 5, total = n + 2 * off;
    const clt_optim_kind kinds[] = {CLT_OPTIM_SGD, CLT_OPTIM_SGD, CLT_OPTIM_ADAM, CLT_OPTIM_ADAMW};
    float *hp = malloc(n * sizeof *hp), *hg = malloc(n * sizeof *hg);
    float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    uint16_t *c16 = malloc(total * sizeof *c16), *w16 = malloc(n * sizeof *w16);
    ck_assert(hp && hg && got && want && c16 && w16);
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (clt_dtype d = CLT_DTYPE_F16; d <= CLT_DTYPE_BF16; d++)
            for (int scaled = 0; scaled < 2; scaled++) {
                struct clt_optim_params q = clt_optim_default_params(kinds[k]);
                q.lr = 0.01f;
                if (k == 1) q.momentum = 0.9f;
                clt_tensor *pa = make_1d(ctx, n, CLT_MEM_PARAMS),
                           *pb = make_1d(ctx, n, CLT_MEM_PARAMS);
                clt_tensor *g = make_1d(ctx, n, CLT_MEM_GRADS);
                clt_tensor *cbase = tc_tensor(ctx, d, total), *copy = NULL,
                           *ref = tc_tensor(ctx, d, n);
                TC_OK(ctx, clt_tensor_view(&copy, cbase, off, 1, &n));
                tc_poison(cbase);
                tc_fill_nonzero(&rng, hp, n, 0.1f, 2.0f);
                tc_write(pa, hp);
                tc_write(pb, hp);
                clt_optim *a = NULL, *b = NULL;
                clt_scaler *sa = NULL, *sb = NULL;
                TC_OK(ctx, clt_optim_create(&a, pa, &q));
                TC_OK(ctx, clt_optim_create(&b, pb, &q));
                if (scaled) {
                    TC_OK(ctx, clt_scaler_create(&sa, ctx, NULL));
                    TC_OK(ctx, clt_scaler_create(&sb, ctx, NULL));
                }
                TC_OK(ctx, clt_optim_set_copy(a, copy));
                for (int step = 0; step < 4; step++) {
                    const bool skip = scaled && step == 2;
                    tc_fill_nonzero(&rng, hg, n, 0.01f, 2.0f);
                    if (skip) hg[417] = INFINITY;
                    tc_read(copy, w16); /* what a skipped step must leave */
                    tc_write(g, hg);
                    TC_OK(ctx, clt_optim_step_scaled(a, g, sa));
                    tc_write(g, hg);
                    TC_OK(ctx, clt_optim_step_scaled(b, g, sb));
                    tc_read(pa, got);
                    tc_read(pb, want);
                    ck_assert_msg(memcmp(got, want, n * sizeof *got) == 0,
                                  "copy: %s %s scaled %d step %d: the parameters differ from "
                                  "an optimizer's without a copy",
                                  clt_optim_kind_name(kinds[k]), clt_dtype_name(d), scaled, step);
                    if (!skip) {
                        TC_OK(ctx, clt_op_cast(ref, pa));
                        tc_read(ref, w16);
                    }
                    tc_read(cbase, c16);
                    for (size_t i = 0; i < total; i++) {
                        const bool in = i >= off && i < off + n;
                        const unsigned w = in ? w16[i - off] : 0xffffu;
                        ck_assert_msg(c16[i] == w,
                                      "copy: %s %s scaled %d step %d: element %zu = 0x%04x, "
                                      "expected 0x%04x",
                                      clt_optim_kind_name(kinds[k]), clt_dtype_name(d), scaled,
                                      step, i, c16[i], w);
                    }
                }
                /* NULL: the next step leaves the copy as it was */
                TC_OK(ctx, clt_optim_set_copy(a, NULL));
                tc_write(g, hg);
                TC_OK(ctx, clt_optim_step_scaled(a, g, sa));
                uint16_t *after = malloc(total * sizeof *after);
                ck_assert(after);
                tc_read(cbase, after);
                ck_assert_mem_eq(after, c16, total * sizeof *after);
                free(after);
                clt_optim_free(a);
                clt_optim_free(b);
                clt_scaler_free(sa);
                clt_scaler_free(sb);
                clt_tensor_free(copy);
                clt_tensor_free(cbase);
                clt_tensor_free(ref);
                clt_tensor_free(pa);
                clt_tensor_free(pb);
                clt_tensor_free(g);
            }
    /* the copy's checks */
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_ADAM);
    clt_tensor *params = make_1d(ctx, 17, CLT_MEM_PARAMS), *f32 = make_1d(ctx, 17, CLT_MEM_OTHER);
    clt_tensor *short16 = tc_tensor(ctx, CLT_DTYPE_BF16, 16);
    clt_tensor *elsewhere = tc_tensor(other, CLT_DTYPE_BF16, 17),
               *good = tc_tensor(ctx, CLT_DTYPE_F16, 17);
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, &q));
    ck_assert_int_eq(clt_optim_set_copy(o, f32), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "f16 or bf16"));
    ck_assert_int_eq(clt_optim_set_copy(o, short16), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "16 elements"));
    ck_assert_int_eq(clt_optim_set_copy(o, elsewhere), CLT_ERR_DEVICE_MISMATCH);
    TC_OK(ctx, clt_optim_set_copy(o, good));
    clt_optim_free(o);
    clt_tensor_free(params);
    clt_tensor_free(f32);
    clt_tensor_free(short16);
    clt_tensor_free(elsewhere);
    clt_tensor_free(good);
    free(hp);
    free(hg);
    free(got);
    free(want);
    free(c16);
    free(w16);
    clt_ctx_free(ctx);
    clt_ctx_free(other);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_accounting)
{
    clt_ctx *ctx = tc_ctx();
    const size_t n = 1000;
    clt_tensor *params = make_1d(ctx, n, CLT_MEM_PARAMS);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_OPTIM], 0);
    const struct {
        clt_optim_kind kind;
        float momentum;
        int nstate;
    } cases[] = {{CLT_OPTIM_SGD, 0.0f, 0}, {CLT_OPTIM_SGD, 0.9f, 1}, {CLT_OPTIM_ADAM, 0, 2},
                 {CLT_OPTIM_ADAMW, 0, 2}};
    static const char *names[2][2] = {{"momentum_buffer", ""}, {"exp_avg", "exp_avg_sq"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct clt_optim_params q = clt_optim_default_params(cases[c].kind);
        q.momentum = cases[c].momentum;
        clt_optim *o = NULL;
        TC_OK(ctx, clt_optim_create(&o, params, &q));
        ck_assert_ptr_eq(clt_optim_params_tensor(o), params);
        ck_assert_int_eq(clt_optim_get_params(o)->kind, cases[c].kind);
        ck_assert_int_eq(clt_optim_state_count(o), cases[c].nstate);
        /* AdamW's default weight decay: one exemption bit per element, in 16-bit words */
        size_t exempt = q.weight_decay > 0 ? (n + 15) / 16 * 2 : 0;
        ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_OPTIM],
                          cases[c].nstate * n * sizeof(float) + exempt);
        for (int i = 0; i < cases[c].nstate; i++) {
            const char *name = NULL;
            clt_tensor *t = clt_optim_state(o, i, &name);
            ck_assert_str_eq(name, names[cases[c].kind == CLT_OPTIM_SGD ? 0 : 1][i]);
            ck_assert_int_eq(clt_tensor_dtype(t), CLT_DTYPE_F32);
            float got[1000];
            tc_read(t, got);
            for (size_t j = 0; j < n; j++) ck_assert_float_eq(got[j], 0.0f); /* born zero */
        }
        clt_optim_free(o);
        ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_OPTIM], 0);
    }
    /* clipping: the norm, the factor and one partial sum per 4096 elements */
    struct clt_optim_params q = clt_optim_default_params(CLT_OPTIM_SGD);
    q.clip_grad = 1.0f;
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, params, &q));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_OPTIM], 3 * sizeof(float));
    clt_optim_free(o);
    clt_optim_free(NULL);
    clt_tensor_free(params);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A second optimizer given the first's state and step count continues identically, and steps
 * never wait for the device. */
static void check_resume(clt_optim_kind kind)
{
    clt_ctx *ctx = tc_ctx();
    const size_t n = 1000;
    tc_rng rng = tc_rng_for(__func__);
    float *hp = malloc(n * sizeof *hp), *hg = malloc(n * sizeof *hg);
    float *a_got = malloc(n * sizeof *a_got), *b_got = malloc(n * sizeof *b_got);
    ck_assert(hp && hg && a_got && b_got);
    tc_fill_nonzero(&rng, hp, n, 0.1f, 2.0f);
    clt_tensor *pa = make_1d(ctx, n, CLT_MEM_PARAMS), *pb = make_1d(ctx, n, CLT_MEM_PARAMS);
    clt_tensor *g = make_1d(ctx, n, CLT_MEM_GRADS);
    tc_write(pa, hp);
    struct clt_optim_params q = clt_optim_default_params(kind);
    q.momentum = 0.9f;
    q.lr = 0.01f;
    q.schedule = CLT_SCHED_COSINE;
    q.total_steps = 10;
    q.clip_grad = 5.0f; /* below the gradients' norm (about 36): every step clips */
    q.weight_decay = 0.01f;
    size_t off = 100, cnt = 50; /* and exempts some from weight decay */
    clt_optim *a = NULL, *b = NULL;
    TC_OK(ctx, clt_optim_create(&a, pa, &q));
    TC_OK(ctx, clt_optim_set_no_decay(a, 1, &off, &cnt));
    for (int s = 0; s < 3; s++) {
        tc_fill_nonzero(&rng, hg, n, 0.01f, 2.0f);
        tc_write(g, hg);
        TC_OK(ctx, clt_optim_step(a, g));
    }
    /* No host wait while steps are enqueued (the programs are built by now), clipping
     * included. */
    long waits = clt_ctx_stats(ctx).host_waits_total;
    for (int s = 0; s < 3; s++) TC_OK(ctx, clt_optim_step(a, g));
    ck_assert_int_eq(clt_ctx_stats(ctx).host_waits_total, waits);
    /* resume: copy params and state, set the count */
    TC_OK(ctx, clt_optim_create(&b, pb, &q));
    TC_OK(ctx, clt_optim_set_no_decay(b, 1, &off, &cnt));
    TC_OK(ctx, clt_op_copy(pb, pa));
    for (int i = 0; i < clt_optim_state_count(a); i++)
        TC_OK(ctx, clt_op_copy(clt_optim_state(b, i, NULL), clt_optim_state(a, i, NULL)));
    clt_optim_set_steps(b, clt_optim_steps(a));
    ck_assert_int_eq(clt_optim_steps(b), 6);
    for (int s = 0; s < 2; s++) {
        tc_fill_nonzero(&rng, hg, n, 0.01f, 2.0f);
        tc_write(g, hg);
        TC_OK(ctx, clt_optim_step(a, g));
        TC_OK(ctx, clt_optim_step(b, g));
    }
    tc_read(pa, a_got);
    tc_read(pb, b_got);
    ck_assert_mem_eq(a_got, b_got, n * sizeof(float));
    clt_optim_free(a);
    clt_optim_free(b);
    clt_tensor_free(pa);
    clt_tensor_free(pb);
    clt_tensor_free(g);
    free(hp);
    free(hg);
    free(a_got);
    free(b_got);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

START_TEST(test_resume_and_no_waits)
{
    check_resume(CLT_OPTIM_SGD);
    check_resume(CLT_OPTIM_ADAMW);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_sgd_nesterov_wd);
    tcase_add_test(tc, test_sgd_dampening);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_adam_wd);
    tcase_add_test(tc, test_adamw);
    tcase_add_test(tc, test_no_decay);
    tcase_add_test(tc, test_no_decay_exact);
    tcase_add_test(tc, test_no_decay_bad_range);
    tcase_add_test(tc, test_clip_grad);
    tcase_add_test(tc, test_clip_grad_scaled);
    tcase_add_test(tc, test_hand_sgd);
    tcase_add_test(tc, test_hand_adam);
    tcase_add_test(tc, test_schedules);
    tcase_add_test(tc, test_invalid_params);
    tcase_add_test(tc, test_parse_defaults_describe);
    tcase_add_test(tc, test_device_mismatch);
    tcase_add_test(tc, test_copy);
    tcase_add_test(tc, test_accounting);
    tcase_add_test(tc, test_resume_and_no_waits);
    suite_add_tcase(suite, tc);
    return tc_run(suite);
}
