/* Tests of cl/loss.cl: softmax cross-entropy (loss accumulation, gradient, correct count, label
 * smoothing 0 and 0.1; the large-vocabulary kernels in both variants, the work-group kernel and
 * the CPU variant softmax_xent_rows_vec, forced by CLTRAIN_XENT=group|vec on any device, which
 * must also give the same bits as each other), MSE, softmax and argmax, against float64
 * references (ref_nn.c for the
 * losses; softmax and argmax here), with central finite differences of the reference loss for
 * the gradient, awkward shapes (B in {1, 17, 1000}, N in {1, 10, 17, 1000}), views, poisoned
 * outputs, accumulators that start non-zero, numerical stability at huge logits, determinism
 * (bit-identical across runs and across every work-group size) and the argument checks; the
 * public losses (cltrain/loss.h) the same way.
 * CLTRAIN_TEST_SMALL (tests/small.h) makes 1000 300 and 65537 4099: still more than one tile of
 * the reduction tree (256 rows, or 256 leaves of 16 elements).
 * Tolerances: fp32 atol 1e-5, rtol 1e-4 everywhere (exp/log come from the device's math
 * library, 3-4 ulp, far inside rtol); losses and gradients also keep normalized MSE <= 1e-7. */
#include "ops/nn_testutil.h"
#include "ops/tune_internal.h"
#include "cltrain/loss.h"
#include "ref/ref_nn.h"
#include "small.h"

/* Logits (B, N) in +-[0.01, 8), labels in [0, N): for about half of the rows the label is the
 * row's argmax (so the correct count is neither 0 nor B). */
static void make_xent_inputs(tc_rng *r, float *logits, int32_t *labels, size_t B, size_t N)
{
    tc_fill_nonzero(r, logits, B * N, 0.01f, 8.0f);
    for (size_t b = 0; b < B; b++) {
        labels[b] = (int32_t)(tc_u32(r) % N);
        if (tc_u32(r) & 1) {
            size_t best = 0;
            for (size_t j = 1; j < N; j++)
                if (logits[b * N + j] > logits[b * N + best]) best = j;
            labels[b] = (int32_t)best;
        }
    }
}

/* Host argmax: first maximum wins, the first NaN beats any number. */
static int32_t host_argmax(const float *z, size_t N)
{
    size_t best = 0;
    for (size_t j = 1; j < N; j++) {
        if (z[j] > z[best] || (isnan(z[j]) && !isnan(z[best]))) best = j;
    }
    return (int32_t)best;
}

struct xent_out {
    float loss, correct;
    float *dlogits; /* (B, N) */
};

/* The function under test: the op, or the public clt_loss_softmax_xent (cltrain/loss.h) in
 * test_public_losses (each test runs in its own process). */
static clt_status (*xent_fn)(const clt_tensor *, const clt_tensor *, float, float, float,
                             clt_tensor *, clt_tensor *, clt_tensor *) = clt_op_softmax_xent;

/* clt_op_softmax_xent_rows with the ctx's own per-row buffer, in xent_fn's signature. */
static clt_status xent_rows_ctx(const clt_tensor *lg, const clt_tensor *lb, float eps, float ls,
                                float gs, clt_tensor *dl, clt_tensor *la, clt_tensor *ca)
{
    return clt_op_softmax_xent_rows(lg, lb, eps, ls, gs, dl, la, ca, NULL);
}

/* The large-vocabulary kernels' variants (CLTRAIN_XENT), by a loop test's _i. */
static const char *const variants[] = {"group", "vec"};
#define N_VARIANTS 2

/* Makes the ops take variant v from now on (the ops read the variable at each call). */
static void use_variant(int v)
{
    ck_assert_int_eq(setenv("CLTRAIN_XENT", variants[v], 1), 0);
}

/* Runs xent_fn with loss_acc = v0, correct_acc = c0 and dlogits poisoned. */
static void run_xent(clt_ctx *ctx, const float *logits, const int32_t *labels, size_t B, size_t N,
                     float eps, float loss_scale, float grad_scale, float v0, float c0,
                     struct xent_out *out)
{
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
               *dl = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *ca = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
    tc_write(lg, logits);
    tc_write(lb, labels);
    tc_poison(dl);
    tc_write(la, &v0);
    tc_write(ca, &c0);
    TC_OK(ctx, xent_fn(lg, lb, eps, loss_scale, grad_scale, dl, la, ca));
    tc_read(la, &out->loss);
    tc_read(ca, &out->correct);
    tc_read(dl, out->dlogits);
    clt_tensor_free(lg);
    clt_tensor_free(lb);
    clt_tensor_free(dl);
    clt_tensor_free(la);
    clt_tensor_free(ca);
}

/* Checks one call against the reference: loss_acc = v0 + loss_scale * sum of row losses,
 * correct_acc = c0 + count, dlogits = grad_scale * B * (reference mean-loss gradient). */
static void check_xent(clt_ctx *ctx, tc_rng *r, const float *logits, const int32_t *labels,
                       size_t B, size_t N, float eps)
{
    char what[96];
    const float v0 = 2.5f, c0 = 3.0f, loss_scale = 1.0f / (float)B, grad_scale = 1.0f / (float)B;
    const size_t n = B * N;
    struct xent_out out = {0, 0, NT_FLOATS(n)};
    double *lgd = NT_DOUBLES(n), *dref = NT_DOUBLES(n);
    nt_widen(logits, lgd, n);
    run_xent(ctx, logits, labels, B, N, eps, loss_scale, grad_scale, v0, c0, &out);

    double sum = ref_softmax_xent(lgd, labels, (int)B, (int)N, eps, dref) * (double)B;
    double loss_ref = v0 + (double)loss_scale * sum;
    for (size_t i = 0; i < n; i++)
        dref[i] *= (double)grad_scale * (double)B;
    int32_t correct = 0;
    for (size_t b = 0; b < B; b++)
        correct += host_argmax(logits + b * N, N) == labels[b];

    snprintf(what, sizeof what, "softmax_xent loss B=%zu N=%zu eps=%g", B, N, (double)eps);
    nt_check_reduction(&out.loss, &loss_ref, 1, what, r->seed);
    ck_assert_msg(out.correct == c0 + (float)correct, "B=%zu N=%zu: correct %g, expected %g + %d",
                  B, N, (double)out.correct, (double)c0, correct);
    snprintf(what, sizeof what, "softmax_xent dlogits B=%zu N=%zu eps=%g", B, N, (double)eps);
    nt_check_reduction(out.dlogits, dref, n, what, r->seed);
    free(out.dlogits);
    free(lgd);
    free(dref);
}

/* check_xent on fresh inputs of one shape, without and with label smoothing. */
static void check_xent_shape(clt_ctx *ctx, tc_rng *r, size_t B, size_t N)
{
    float *logits = NT_FLOATS(B * N);
    int32_t *labels = nt_alloc(B, sizeof *labels);
    make_xent_inputs(r, logits, labels, B, N);
    check_xent(ctx, r, logits, labels, B, N, 0.0f);
    check_xent(ctx, r, logits, labels, B, N, 0.1f);
    free(logits);
    free(labels);
}

START_TEST(test_xent_shapes)
{
    static const size_t full[][2] = {{1, 1},    {1, 10},    {17, 17},   {17, 1000},
                                     {1000, 1}, {1000, 10}, {1000, 17}, {1000, 1000}},
                        small[][2] = {{1, 1},   {1, 10},   {17, 17},  {17, 300},
                                      {300, 1}, {300, 10}, {300, 17}, {300, 300}};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof full / sizeof *full; si++)
        check_xent_shape(ctx, &r, shapes[si][0], shapes[si][1]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The gradient against central differences of the float64 reference loss (mean over rows),
 * with grad_scale = 1/B so that dlogits is d(mean loss)/d logits: the op (10 classes: the
 * one-work-group kernel), then the large-vocabulary kernels in each variant. */
START_TEST(test_xent_finite_differences)
{
    const size_t B = 17, N = 10, n = B * N;
    xent_fn = _i ? xent_rows_ctx : clt_op_softmax_xent;
    if (_i) use_variant(_i - 1);
    const double h = 1e-5;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *logits = NT_FLOATS(n);
    int32_t labels[17];
    double *lgd = NT_DOUBLES(n), *fd = NT_DOUBLES(n);
    make_xent_inputs(&r, logits, labels, B, N);
    nt_widen(logits, lgd, n);
    for (int e = 0; e < 2; e++) {
        float eps = e ? 0.1f : 0.0f;
        struct xent_out out = {0, 0, NT_FLOATS(n)};
        run_xent(ctx, logits, labels, B, N, eps, 1.0f / B, 1.0f / B, 0.0f, 0.0f, &out);
        for (size_t i = 0; i < n; i++) {
            double keep = lgd[i];
            lgd[i] = keep + h;
            double up = ref_softmax_xent(lgd, labels, (int)B, (int)N, eps, NULL);
            lgd[i] = keep - h;
            double down = ref_softmax_xent(lgd, labels, (int)B, (int)N, eps, NULL);
            lgd[i] = keep;
            fd[i] = (up - down) / (2.0 * h);
        }
        tc_check_close(
            out.dlogits, fd, n, NT_ATOL, NT_RTOL,
            e ? "dlogits vs finite differences, eps 0.1" : "dlogits vs finite differences", r.seed);
        free(out.dlogits);
    }
    free(logits);
    free(lgd);
    free(fd);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Logits around +-1e4 and rows spread over +-100 (exp overflows fp32 beyond 88 without the
 * max subtraction): the loss and gradient stay finite and match the reference. */
START_TEST(test_xent_stability)
{
    const size_t B = 17, N = 10, n = B * N;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *logits = NT_FLOATS(n);
    int32_t labels[17];
    make_xent_inputs(&r, logits, labels, B, N);
    for (size_t b = 0; b < B; b++) {
        float shift = b % 3 == 0 ? 1e4f : b % 3 == 1 ? -1e4f : 0.0f;
        for (size_t j = 0; j < N; j++)
            logits[b * N + j] = shift + logits[b * N + j] * 12.0f;
    }
    check_xent(ctx, &r, logits, labels, B, N, 0.0f);
    check_xent(ctx, &r, logits, labels, B, N, 0.1f);
    free(logits);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Bit-identical loss, count and gradient across runs and every local size of the one work-group
 * that reduces the rows. */
START_TEST(test_xent_deterministic)
{
    const size_t B = tc_size(1000, 300), N = 17, n = B * N;
    const float v0 = 0.75f, c0 = 1.0f;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *logits = NT_FLOATS(n), *g1 = NT_FLOATS(n), *g2 = NT_FLOATS(n);
    int32_t *labels = nt_alloc(B, sizeof *labels);
    make_xent_inputs(&r, logits, labels, B, N);
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
               *dl = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *ca = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
    tc_write(lg, logits);
    tc_write(lb, labels);
    float loss1, corr1, loss2, corr2;
    for (int run = 0; run < 2; run++) {
        tc_write(la, &v0);
        tc_write(ca, &c0);
        tc_poison(dl);
        TC_OK(ctx, clt_op_softmax_xent(lg, lb, 0.1f, 1.0f / B, 1.0f / B, dl, la, ca));
        tc_read(la, run ? &loss2 : &loss1);
        tc_read(ca, run ? &corr2 : &corr1);
        tc_read(dl, run ? g2 : g1);
    }
    ck_assert(nt_same_bits(&loss1, &loss2, 1) && corr1 == corr2 && nt_same_bits(g1, g2, n));
    cl_kernel k = nt_kernel(ctx, "loss", NULL, "softmax_xent_forward");
    int tried = 0;
    for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
        tc_write(la, &v0);
        tc_write(ca, &c0);
        tc_poison(dl);
        if (!nt_launch_local(ctx, k, 1, nt_local_sizes[li])) continue;
        tried++;
        tc_read(la, &loss2);
        tc_read(ca, &corr2);
        tc_read(dl, g2);
        ck_assert_msg(nt_same_bits(&loss1, &loss2, 1), "loss %.9g with local size %zu, %.9g before",
                      (double)loss2, nt_local_sizes[li], (double)loss1);
        ck_assert(corr1 == corr2 && nt_same_bits(g1, g2, n));
    }
    ck_assert_int_ge(tried, 4);
    clt_tensor_free(lg);
    clt_tensor_free(lb);
    clt_tensor_free(dl);
    clt_tensor_free(la);
    clt_tensor_free(ca);
    free(logits);
    free(labels);
    free(g1);
    free(g2);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Optional outputs left out, the gradient written over the logits, other scales, and labels
 * outside [0, N) (NaN loss and NaN gradient row; the other rows unaffected). */
START_TEST(test_xent_variants)
{
    const size_t B = 17, N = 10, n = B * N;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *logits = NT_FLOATS(n), *got = NT_FLOATS(n);
    int32_t labels[17];
    double *lgd = NT_DOUBLES(n), *dref = NT_DOUBLES(n);
    make_xent_inputs(&r, logits, labels, B, N);
    nt_widen(logits, lgd, n);
    const double sum = ref_softmax_xent(lgd, labels, (int)B, (int)N, 0.1, dref) * B;
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
               *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
    tc_write(lb, labels);

    /* loss only, scale 0.37, added to -4 */
    float loss = -4.0f;
    tc_write(lg, logits);
    tc_write(la, &loss);
    TC_OK(ctx, clt_op_softmax_xent(lg, lb, 0.1f, 0.37f, 1.0f, NULL, la, NULL));
    tc_read(la, &loss);
    double want = -4.0 + 0.37 * sum;
    nt_check_reduction(&loss, &want, 1, "loss only", r.seed);
    tc_read(lg, got);
    ck_assert_msg(nt_same_bits(got, logits, n), "logits changed without dlogits");

    /* in place: dlogits = logits, grad_scale 2 */
    TC_OK(ctx, clt_op_softmax_xent(lg, lb, 0.1f, 1.0f, 2.0f, lg, la, NULL));
    tc_read(lg, got);
    for (size_t i = 0; i < n; i++)
        dref[i] *= 2.0 * B;
    nt_check_reduction(got, dref, n, "dlogits in place", r.seed);

    /* bad labels: rows 3 (label N) and 5 (label -1) */
    labels[3] = (int32_t)N;
    labels[5] = -1;
    tc_write(lb, labels);
    tc_write(lg, logits);
    clt_tensor *dl = nt_tensor2(ctx, CLT_DTYPE_F32, B, N);
    loss = 0.0f;
    tc_write(la, &loss);
    TC_OK(ctx, clt_op_softmax_xent(lg, lb, 0.0f, 1.0f, 1.0f, dl, la, NULL));
    tc_read(la, &loss);
    tc_read(dl, got);
    ck_assert_msg(isnan(loss), "loss %g with labels outside [0, N)", (double)loss);
    for (size_t j = 0; j < N; j++)
        ck_assert(isnan(got[3 * N + j]) && isnan(got[5 * N + j]));
    for (size_t i = 0; i < n; i++)
        ck_assert(i / N == 3 || i / N == 5 || isfinite(got[i]));

    clt_tensor_free(dl);
    clt_tensor_free(lg);
    clt_tensor_free(lb);
    clt_tensor_free(la);
    free(logits);
    free(got);
    free(lgd);
    free(dref);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_xent_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 10), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, 4),
               *lb5 = nt_tensor1(ctx, CLT_DTYPE_I32, 5), *lbf = nt_tensor1(ctx, CLT_DTYPE_F32, 4),
               *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1), *la2 = nt_tensor1(ctx, CLT_DTYPE_F32, 2),
               *dl = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 9),
               *lg0 = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 0),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 1);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lbf, 0, 1, 1, NULL, la, NULL), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "softmax_xent: labels must be i32"));
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb5, 0, 1, 1, NULL, la, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 0, 1, 1, dl, la, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 0, 1, 1, NULL, la2, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 0, 1, 1, NULL, la, la2), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 0, 1, 1, NULL, lb, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg0, lb, 0, 1, 1, NULL, la, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 1.5f, 1, 1, NULL, la, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, NAN, 1, 1, NULL, la, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_softmax_xent(lg, lb, 0, 1, 1, NULL, other, NULL),
                     CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_mse(lg, dl, 1, 1, NULL, la), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "mse"));
    ck_assert_int_eq(clt_op_mse(lb, lb, 1, 1, NULL, la), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_mse(la, la, 1, 1, NULL, la2), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_mse(la, la, 1, 1, la2, la), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_mse(la, other, 1, 1, NULL, la), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_argmax(lb5, lg), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_argmax(lbf, lg), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_argmax(lb, lg0), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax(dl, lg), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax(lg, other), CLT_ERR_DEVICE_MISMATCH);
    TC_OK(ctx, clt_op_softmax_xent(lg, lb, 0, 1, 1, NULL, la, NULL)); /* still usable */
    clt_tensor *e[] = {lg, lb, lb5, lbf, la, la2, dl, lg0, other};
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        clt_tensor_free(e[i]);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

/* The public losses (cltrain/loss.h) against the float64 references, and their argument
 * checks: a user's loop gets the ops' results and statuses. */
START_TEST(test_public_losses)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    xent_fn = clt_loss_softmax_xent;
    static const size_t shapes[][2] = {{1, 10}, {17, 17}, {300, 10}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        check_xent_shape(ctx, &r, shapes[si][0], shapes[si][1]);

    /* mse: loss_acc = v0 + 1/n * sum (p - t)^2, dpred = 1/n * 2 (p - t) */
    const size_t n = 17;
    const float v0 = 0.5f, scale = 1.0f / (float)n;
    float p[17], t[17], got[17], loss;
    double pd[17], td[17], dref[17];
    tc_fill_nonzero(&r, p, n, 0.01f, 3.0f);
    tc_fill_nonzero(&r, t, n, 0.01f, 3.0f);
    nt_widen(p, pd, n);
    nt_widen(t, td, n);
    double want = v0 + ref_mse(pd, td, n, dref); /* dref: of the mean, as scale gives */
    clt_tensor *pt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *tt = nt_tensor1(ctx, CLT_DTYPE_F32, n),
               *dt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *lb = nt_tensor1(ctx, CLT_DTYPE_I32, n), *la2 = nt_tensor1(ctx, CLT_DTYPE_F32, 2);
    tc_write(pt, p);
    tc_write(tt, t);
    tc_poison(dt);
    tc_write(la, &v0);
    TC_OK(ctx, clt_loss_mse(pt, tt, scale, scale, dt, la));
    tc_read(la, &loss);
    tc_read(dt, got);
    nt_check_reduction(&loss, &want, 1, "clt_loss_mse loss", r.seed);
    nt_check_reduction(got, dref, n, "clt_loss_mse dpred", r.seed);

    /* errors: the ops' statuses and messages */
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, 17, 1);
    ck_assert_int_eq(clt_loss_softmax_xent(lg, pt, 0, 1, 1, NULL, la, NULL), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "labels must be i32"));
    ck_assert_int_eq(clt_loss_softmax_xent(lg, lb, 1.5f, 1, 1, NULL, la, NULL),
                     CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "smoothing"));
    ck_assert_int_eq(clt_loss_softmax_xent(lg, lb, 0, 1, 1, NULL, la2, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_loss_mse(pt, la2, 1, 1, NULL, la), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "mse"));
    ck_assert_int_eq(clt_loss_mse(lb, lb, 1, 1, NULL, la), CLT_ERR_SHAPE);
    clt_tensor *e[] = {pt, tt, dt, la, lb, la2, lg};
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        clt_tensor_free(e[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The large-vocabulary kernels, each variant, at V = 1, 7, 10, 65, 129, 256, 384 (small
 * vocabularies through them too: lanes left empty, a lane per element), 50257 (GPT-2's BPE) and
 * 65536, against the reference with and without smoothing, and at logits around +-1e4. */
START_TEST(test_xent_rows_vocab)
{
    static const size_t full[][2] = {{17, 1},   {17, 7},   {17, 10},   {17, 65},  {9, 129},
                                     {9, 256},  {5, 384},  {3, 50257}, {2, 65536}},
                        small[][2] = {{17, 1},  {17, 7},   {17, 10},   {17, 65},  {9, 129},
                                      {9, 256}, {5, 384},  {1, 50257}, {1, 65536}};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    use_variant(_i);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    xent_fn = xent_rows_ctx;
    for (size_t si = 0; si < sizeof full / sizeof *full; si++) {
        const size_t B = shapes[si][0], N = shapes[si][1];
        if (N < 50000 || !tc_small()) {
            check_xent_shape(ctx, &r, B, N);
            continue;
        }
        /* the largest under CLTRAIN_TEST_SMALL (Oclgrind): without smoothing only */
        float *logits = NT_FLOATS(B * N);
        int32_t *labels = nt_alloc(B, sizeof *labels);
        make_xent_inputs(&r, logits, labels, B, N);
        check_xent(ctx, &r, logits, labels, B, N, 0.0f);
        free(logits);
        free(labels);
    }
    const size_t B = 17, N = 65;
    float *logits = NT_FLOATS(B * N);
    int32_t labels[17];
    make_xent_inputs(&r, logits, labels, B, N);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < N; j++)
            logits[b * N + j] = (b % 3 == 0 ? 1e4f : b % 3 == 1 ? -1e4f : 0.0f) +
                                logits[b * N + j] * 12.0f;
    check_xent(ctx, &r, logits, labels, B, N, 0.0f);
    check_xent(ctx, &r, logits, labels, B, N, 0.1f);
    free(logits);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The public loss takes the large-vocabulary kernels from 256 classes on (the ctx then holds
 * their per-row buffer; 50257 classes, 256 under CLTRAIN_TEST_SMALL) and the one-work-group
 * kernel below, with the reference's results. */
START_TEST(test_xent_public_large_vocab)
{
    use_variant(_i);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    struct clt__ops_ctx *o = NULL;
    xent_fn = clt_loss_softmax_xent;
    check_xent_shape(ctx, &r, 17, CLT__XENT_ROWS_MIN_N - 1);
    TC_OK(ctx, clt__ops_state(ctx, &o));
    ck_assert_msg(!o->xent_rows, "%d classes went to the large-vocabulary kernels",
                  CLT__XENT_ROWS_MIN_N - 1);
    const size_t N = tc_size(50257, CLT__XENT_ROWS_MIN_N);
    check_xent_shape(ctx, &r, 3, N);
    ck_assert_msg(o->xent_rows && clt_tensor_numel(o->xent_rows) >= 2 * 3,
                  "%zu classes did not go to the large-vocabulary kernels", N);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* f16 and bf16 logits and gradients (the large-vocabulary kernels, each variant; the public loss
 * sends them there at any N), against the reference on the rounded logits. The loss is f32 (fp32
 * tolerances); the gradient, grad_scale 1 so that it is in [-1, 1], adds its rounding (f16:
 * atol, rtol 1e-3; bf16: 8e-3). In place too. */
START_TEST(test_xent_rows_half)
{
    static const size_t full[][2] = {{17, 10}, {5, 1000}}, small[][2] = {{17, 10}, {3, 300}};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    static const clt_dtype ds[] = {CLT_DTYPE_F16, CLT_DTYPE_BF16};
    use_variant(_i);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < 2; si++)
        for (size_t di = 0; di < 2; di++)
            for (int in_place = 0; in_place < 2; in_place++) {
                const size_t B = shapes[si][0], N = shapes[si][1], n = B * N;
                const float eps = in_place ? 0.1f : 0.0f;
                float *logits = NT_FLOATS(n), *got = NT_FLOATS(n), loss = 1.5f, corr = 0.0f;
                int32_t *labels = nt_alloc(B, sizeof *labels);
                double *held = NT_DOUBLES(n), *dref = NT_DOUBLES(n);
                make_xent_inputs(&r, logits, labels, B, N);
                clt_tensor *lg = nt_tensor2(ctx, ds[di], B, N),
                           *dl = in_place ? lg : nt_tensor2(ctx, ds[di], B, N),
                           *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
                           *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
                           *ca = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
                nt_write_as(lg, logits, held, n);
                tc_write(lb, labels);
                tc_write(la, &loss);
                tc_write(ca, &corr);
                if (!in_place) tc_poison(dl);
                TC_OK(ctx, clt_loss_softmax_xent(lg, lb, eps, 1.0f / B, 1.0f, dl, la, ca));
                double want = 1.5 + ref_softmax_xent(held, labels, (int)B, (int)N, eps, dref);
                float hf[1000];
                int32_t hits = 0;
                for (size_t b = 0; b < B; b++) {
                    for (size_t j = 0; j < N; j++)
                        hf[j] = (float)held[b * N + j];
                    hits += host_argmax(hf, N) == labels[b];
                }
                for (size_t i = 0; i < n; i++)
                    dref[i] *= (double)B;
                tc_read(la, &loss);
                tc_read(ca, &corr);
                nt_read_as_f32(dl, got, n);
                char what[96];
                snprintf(what, sizeof what, "xent %s B%zu N%zu%s", clt_dtype_name(ds[di]), B, N,
                         in_place ? " in place, eps 0.1" : "");
                tc_check_close(&loss, &want, 1, NT_ATOL, NT_RTOL, what, r.seed);
                ck_assert_msg(corr == (float)hits, "%s: correct %g, expected %d", what,
                              (double)corr, hits);
                const double t = di ? 8e-3 : 1e-3;
                tc_check_close(got, dref, n, t, t, what, r.seed);
                clt_tensor *ts[] = {lg, lb, la, ca};
                for (size_t i = 0; i < 4; i++)
                    clt_tensor_free(ts[i]);
                if (!in_place) clt_tensor_free(dl);
                void *ps[] = {logits, got, labels, held, dref};
                for (size_t i = 0; i < 5; i++)
                    free(ps[i]);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The large-vocabulary kernels, each variant: bit-identical loss, count and gradient across
 * runs, and with each kernel relaunched at every local size (rows no multiple of any of them:
 * 1000, and 300 under CLTRAIN_TEST_SMALL; a few ties so that the argmax's first-maximum rule
 * counts). */
START_TEST(test_xent_rows_deterministic)
{
    use_variant(_i);
    const size_t B = 5, N = tc_size(1000, 300), n = B * N;
    const float v0 = 0.75f, c0 = 1.0f;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *logits = NT_FLOATS(n), *g1 = NT_FLOATS(n), *g2 = NT_FLOATS(n);
    int32_t labels[5];
    make_xent_inputs(&r, logits, labels, B, N);
    /* a tie for the maximum in every row, the label the first of the two in odd rows (2 hits) */
    for (size_t b = 0; b < B; b++) {
        size_t best = (size_t)host_argmax(logits + b * N, N), other = (best + 7 + b) % N;
        logits[b * N + other] = logits[b * N + best];
        if (b % 2) labels[b] = (int32_t)(best < other ? best : other);
        else labels[b] = (int32_t)(best < other ? other : best);
    }
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
               *dl = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *ca = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *rows = nt_tensor1(ctx, CLT_DTYPE_F32, 2 * B);
    tc_write(lg, logits);
    tc_write(lb, labels);
    float loss1, corr1, loss2, corr2;
    for (int run = 0; run < 2; run++) {
        tc_write(la, &v0);
        tc_write(ca, &c0);
        tc_poison(dl);
        tc_poison(rows);
        TC_OK(ctx, clt_op_softmax_xent_rows(lg, lb, 0.1f, 1.0f / B, 1.0f / B, dl, la, ca, rows));
        tc_read(la, run ? &loss2 : &loss1);
        tc_read(ca, run ? &corr2 : &corr1);
        tc_read(dl, run ? g2 : g1);
    }
    ck_assert(nt_same_bits(&loss1, &loss2, 1) && corr1 == corr2 && nt_same_bits(g1, g2, n));
    ck_assert_msg(corr1 == c0 + 2.0f, "correct %g: the first maximum is the argmax", (double)corr1);
    cl_kernel k_rows = nt_kernel(ctx, "loss", NULL, _i ? "softmax_xent_rows_vec" : "softmax_xent_rows"),
              k_sum = nt_kernel(ctx, "loss", NULL, "softmax_xent_sum");
    int tried = 0;
    for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
        tc_write(la, &v0);
        tc_write(ca, &c0);
        tc_poison(dl);
        tc_poison(rows);
        /* a group per row, or (vec) B work-items at least, a partial last group */
        const size_t local = nt_local_sizes[li], groups = _i ? (B + local - 1) / local : B;
        if (!nt_launch_local(ctx, k_rows, groups, local)) continue;
        ck_assert(nt_launch_local(ctx, k_sum, 1, nt_local_sizes[li]));
        tried++;
        tc_read(la, &loss2);
        tc_read(ca, &corr2);
        tc_read(dl, g2);
        ck_assert_msg(nt_same_bits(&loss1, &loss2, 1), "loss %.9g with local size %zu, %.9g before",
                      (double)loss2, nt_local_sizes[li], (double)loss1);
        ck_assert_msg(corr1 == corr2 && nt_same_bits(g1, g2, n), "local size %zu differs",
                      nt_local_sizes[li]);
    }
    ck_assert_int_ge(tried, 4);
    clt_tensor *ts[] = {lg, lb, dl, la, ca, rows};
    for (size_t i = 0; i < 6; i++)
        clt_tensor_free(ts[i]);
    free(logits);
    free(g1);
    free(g2);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* One variant of the large-vocabulary op on logits lg: the per-row losses and hits, the loss
 * and count accumulated (from 0.5 and 1) and the gradient, into out (2 B + 2 + B N floats). */
static void rows_variant(clt_ctx *ctx, int v, clt_tensor *lg, const clt_tensor *lb, float eps,
                         size_t B, size_t N, float *out)
{
    const float v0 = 0.5f, c0 = 1.0f;
    clt_tensor *dl = nt_tensor2(ctx, clt_tensor_dtype(lg), B, N),
               *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1), *ca = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *rows = nt_tensor1(ctx, CLT_DTYPE_F32, 2 * B);
    use_variant(v);
    tc_write(la, &v0);
    tc_write(ca, &c0);
    tc_poison(dl);
    tc_poison(rows);
    TC_OK(ctx, clt_op_softmax_xent_rows(lg, lb, eps, 1.0f / B, 1.0f / B, dl, la, ca, rows));
    tc_read(rows, out);
    tc_read(la, out + 2 * B);
    tc_read(ca, out + 2 * B + 1);
    nt_read_as_f32(dl, out + 2 * B + 2, B * N);
    clt_tensor *ts[] = {dl, la, ca, rows};
    for (size_t i = 0; i < 4; i++)
        clt_tensor_free(ts[i]);
}

/* Both variants of the large-vocabulary kernels on the same inputs agree: the same hits, count
 * and NaNs, and losses and gradients within the rounding of exp (the CPU variant keeps the
 * work-group kernel's lanes, their order, its tree and its expressions, but its exp works on
 * vectors: PoCL's rounds about 1 % of results 1 ulp away from its scalar exp, so the bits may
 * differ; atol 1e-7 with grad_scale 1/B, rtol 1e-5). V = 1 .. 8 (16 lanes in the CPU variant),
 * 16, 17, 84 (the Shakespeare vocabulary), 129, 256, 257 and 1000 (past the 256 lanes, which
 * then wrap) and 65536; f32, f16 and bf16; with and without smoothing; rows with -inf logits, a
 * tie for the maximum and a label outside [0, N) (NaN loss and gradient). */
START_TEST(test_xent_rows_variants_agree)
{
    static const size_t full[][2] = {{5, 1},   {5, 7},   {9, 16},  {9, 17},   {65, 84},
                                     {9, 129}, {5, 256}, {5, 257}, {5, 1000}, {2, 65536}},
                        small[][2] = {{5, 1},   {5, 7},   {9, 16},  {9, 17},  {65, 84},
                                      {9, 129}, {5, 256}, {5, 257}, {5, 300}, {1, 4099}};
    static const clt_dtype ds[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof full / sizeof *full; si++)
        for (size_t di = 0; di < 3; di++)
            for (int e = 0; e < 2; e++) {
                const size_t B = shapes[si][0], N = shapes[si][1], n = B * N,
                             nout = 2 * B + 2 + n;
                const float eps = e ? 0.1f : 0.0f;
                float *logits = NT_FLOATS(n), *out[N_VARIANTS] = {NT_FLOATS(nout), NT_FLOATS(nout)};
                double *held = NT_DOUBLES(n);
                int32_t *labels = nt_alloc(B, sizeof *labels);
                make_xent_inputs(&r, logits, labels, B, N);
                /* row 0: -inf in every third place, its label kept finite; row 1: its maximum
                 * twice; the last row (B > 2): a label past the end */
                for (size_t j = 1; j < N; j += 3)
                    if ((int32_t)j != labels[0]) logits[j] = -INFINITY;
                if (B > 1 && N > 1) {
                    const size_t best = (size_t)host_argmax(logits + N, N);
                    logits[N + (best + 1) % N] = logits[N + best];
                }
                if (B > 2) labels[B - 1] = (int32_t)N;
                clt_tensor *lg = nt_tensor2(ctx, ds[di], B, N),
                           *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B);
                nt_write_as(lg, logits, held, n);
                tc_write(lb, labels);
                for (int v = 0; v < N_VARIANTS; v++)
                    rows_variant(ctx, v, lg, lb, eps, B, N, out[v]);
                for (size_t i = 0; i < nout; i++) {
                    const double g = out[0][i], v = out[1][i];
                    /* the hits (rows B .. 2B) and the count exactly; NaN where NaN */
                    const double tol = i >= B && i < 2 * B + 2 && i != 2 * B ? 0.0
                                                                           : 1e-7 + 1e-5 * fabs(g);
                    ck_assert_msg(g == v || (isnan(g) ? isnan(v) : fabs(g - v) <= tol),
                                  "B%zu N%zu %s eps %g: output %zu is %.9g (group), %.9g (vec); "
                                  "seed %llu",
                                  B, N, clt_dtype_name(ds[di]), (double)eps, i, g, v,
                                  (unsigned long long)r.seed);
                }
                clt_tensor_free(lg);
                clt_tensor_free(lb);
                void *ps[] = {logits, out[0], out[1], held, labels};
                for (size_t i = 0; i < 5; i++)
                    free(ps[i]);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Without CLTRAIN_XENT each device takes its own variant: softmax_xent_rows_vec on CPUs, the
 * work-group kernel elsewhere. Seen through the kernels' arguments: only the kernel the op
 * launched has them set, and relaunched (a row per group of one work-item, which both variants
 * take) it gives the op's bits. */
START_TEST(test_xent_rows_device_default)
{
    const size_t B = 7, N = 84, n = B * N;
    ck_assert_int_eq(unsetenv("CLTRAIN_XENT"), 0);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const bool cpu = clt_ctx_device(ctx)->type == CLT_DEVICE_CPU;
    const char *name = cpu ? "softmax_xent_rows_vec" : "softmax_xent_rows";
    float *logits = NT_FLOATS(n), *a = NT_FLOATS(n + 2 * B), *b = NT_FLOATS(n + 2 * B);
    int32_t labels[7];
    make_xent_inputs(&r, logits, labels, B, N);
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *lb = nt_tensor1(ctx, CLT_DTYPE_I32, B),
               *dl = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *rows = nt_tensor1(ctx, CLT_DTYPE_F32, 2 * B);
    tc_write(lg, logits);
    tc_write(lb, labels);
    tc_poison(la);
    TC_OK(ctx, clt_op_softmax_xent_rows(lg, lb, 0.0f, 1.0f, 1.0f, dl, la, NULL, rows));
    tc_read(dl, a);
    tc_read(rows, a + n);
    tc_poison(dl);
    tc_poison(rows);
    ck_assert(nt_launch_local(ctx, nt_kernel(ctx, "loss", NULL, name), B, 1));
    tc_read(dl, b);
    tc_read(rows, b + n);
    ck_assert_msg(nt_same_bits(a, b, n + 2 * B), "%s on a %s device: not the op's kernel", name,
                  cpu ? "CPU" : "non-CPU");
    clt_tensor *ts[] = {lg, lb, dl, la, rows};
    for (size_t i = 0; i < 5; i++)
        clt_tensor_free(ts[i]);
    free(logits);
    free(a);
    free(b);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The large-vocabulary op's own checks: its per-row buffer, and 16-bit logits with a gradient of
 * another dtype. */
START_TEST(test_xent_rows_errors)
{
    clt_ctx *ctx = tc_ctx();
    clt_tensor *lg = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 300), *lgh = nt_tensor2(ctx, CLT_DTYPE_F16, 4, 300),
               *lb = nt_tensor1(ctx, CLT_DTYPE_I32, 4), *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1),
               *rows7 = nt_tensor1(ctx, CLT_DTYPE_F32, 7), *rowsi = nt_tensor1(ctx, CLT_DTYPE_I32, 8);
    ck_assert_int_eq(clt_op_softmax_xent_rows(lg, lb, 0, 1, 1, NULL, la, NULL, rows7), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "softmax_xent_rows: rows has 7 elements"));
    ck_assert_int_eq(clt_op_softmax_xent_rows(lg, lb, 0, 1, 1, NULL, la, NULL, rowsi), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_softmax_xent_rows(lgh, lb, 0, 1, 1, lg, la, NULL, NULL), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "dlogits (as logits)"));
    ck_assert_int_eq(clt_loss_softmax_xent(lgh, lb, 0, 1, 1, lg, la, NULL), CLT_ERR_SHAPE);
    clt_tensor *ts[] = {lg, lgh, lb, la, rows7, rowsi};
    for (size_t i = 0; i < 6; i++)
        clt_tensor_free(ts[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_mse)
{
    static const size_t full[] = {1, 17, 1000, 65537}, small[] = {1, 17, 1000, 4099};
    const size_t *sizes = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < 4; si++) {
        size_t n = sizes[si];
        char what[64];
        const float v0 = 1.5f, scale = 1.0f / (float)n;
        float *p = NT_FLOATS(n), *t = NT_FLOATS(n), *got = NT_FLOATS(n), loss;
        double *pd = NT_DOUBLES(n), *td = NT_DOUBLES(n), *dref = NT_DOUBLES(n);
        tc_fill_nonzero(&r, p, n, 0.01f, 3.0f);
        tc_fill_nonzero(&r, t, n, 0.01f, 3.0f);
        nt_widen(p, pd, n);
        nt_widen(t, td, n);
        double mean = ref_mse(pd, td, n, dref);
        double want = v0 + (double)scale * mean * (double)n;
        for (size_t i = 0; i < n; i++)
            dref[i] *= (double)scale * (double)n;
        /* a (B, N)-shaped pred when n allows, flat otherwise */
        clt_tensor *pt = n == 1000 ? nt_tensor2(ctx, CLT_DTYPE_F32, 40, 25)
                                   : nt_tensor1(ctx, CLT_DTYPE_F32, n),
                   *tt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *dt = nt_tensor1(ctx, CLT_DTYPE_F32, n),
                   *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
        tc_write(pt, p);
        tc_write(tt, t);
        tc_poison(dt);
        tc_write(la, &v0);
        TC_OK(ctx, clt_op_mse(pt, tt, scale, scale, dt, la));
        tc_read(la, &loss);
        tc_read(dt, got);
        snprintf(what, sizeof what, "mse loss n=%zu", n);
        nt_check_reduction(&loss, &want, 1, what, r.seed);
        snprintf(what, sizeof what, "mse dpred n=%zu", n);
        nt_check_reduction(got, dref, n, what, r.seed);

        /* no gradient; then the gradient over pred itself */
        tc_write(la, &v0);
        TC_OK(ctx, clt_op_mse(pt, tt, scale, scale, NULL, la));
        tc_read(la, &loss);
        nt_check_reduction(&loss, &want, 1, "mse loss without dpred", r.seed);
        tc_write(la, &v0);
        TC_OK(ctx, clt_op_mse(pt, tt, scale, scale, pt, la));
        tc_read(la, &loss);
        tc_read(pt, got);
        nt_check_reduction(&loss, &want, 1, "mse loss with dpred = pred", r.seed);
        nt_check_reduction(got, dref, n, "mse dpred = pred", r.seed);

        clt_tensor_free(pt);
        clt_tensor_free(tt);
        clt_tensor_free(dt);
        clt_tensor_free(la);
        free(p);
        free(t);
        free(got);
        free(pd);
        free(td);
        free(dref);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_mse_deterministic)
{
    const size_t n = tc_size(65537, 4099);
    const float v0 = 0.25f;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *p = NT_FLOATS(n), *t = NT_FLOATS(n), first, again;
    tc_fill_nonzero(&r, p, n, 0.01f, 3.0f);
    tc_fill_nonzero(&r, t, n, 0.01f, 3.0f);
    clt_tensor *pt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *tt = nt_tensor1(ctx, CLT_DTYPE_F32, n),
               *la = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
    tc_write(pt, p);
    tc_write(tt, t);
    for (int run = 0; run < 2; run++) {
        tc_write(la, &v0);
        TC_OK(ctx, clt_op_mse(pt, tt, 1.0f / n, 1.0f, NULL, la));
        tc_read(la, run ? &again : &first);
    }
    ck_assert(nt_same_bits(&first, &again, 1));
    cl_kernel k = nt_kernel(ctx, "loss", NULL, "mse_forward");
    int tried = 0;
    for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
        tc_write(la, &v0);
        if (!nt_launch_local(ctx, k, 1, nt_local_sizes[li])) continue;
        tried++;
        tc_read(la, &again);
        ck_assert_msg(nt_same_bits(&first, &again, 1), "mse %.9g with local size %zu, %.9g before",
                      (double)again, nt_local_sizes[li], (double)first);
    }
    ck_assert_int_ge(tried, 4);
    clt_tensor_free(pt);
    clt_tensor_free(tt);
    clt_tensor_free(la);
    free(p);
    free(t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

static void ref_softmax(const float *x, double *y, size_t B, size_t N)
{
    for (size_t b = 0; b < B; b++) {
        const float *z = x + b * N;
        double m = z[0], s = 0.0;
        for (size_t j = 1; j < N; j++)
            m = z[j] > m ? z[j] : m;
        for (size_t j = 0; j < N; j++)
            s += exp(z[j] - m);
        for (size_t j = 0; j < N; j++)
            y[b * N + j] = exp(z[j] - m) / s;
    }
}

START_TEST(test_softmax)
{
    static const size_t full[][2] = {{1, 1}, {1, 10}, {17, 17}, {1000, 10}, {17, 1000}},
                        small[][2] = {{1, 1}, {1, 10}, {17, 17}, {300, 10}, {17, 300}};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof full / sizeof *full; si++) {
        size_t B = shapes[si][0], N = shapes[si][1], n = B * N;
        char what[64];
        float *x = NT_FLOATS(n), *got = NT_FLOATS(n);
        double *ref = NT_DOUBLES(n);
        tc_fill_nonzero(&r, x, n, 0.01f, 8.0f);
        for (size_t b = 0; b < B; b += 2) /* every other row far out: the max must come off */
            for (size_t j = 0; j < N; j++)
                x[b * N + j] = x[b * N + j] * 10.0f + (b % 4 ? 1e4f : -1e4f);
        ref_softmax(x, ref, B, N);
        clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, B, N),
                   *yt = nt_tensor2(ctx, CLT_DTYPE_F32, B, N);
        tc_write(xt, x);
        tc_poison(yt);
        TC_OK(ctx, clt_op_softmax(yt, xt));
        tc_read(yt, got);
        snprintf(what, sizeof what, "softmax B=%zu N=%zu", B, N);
        tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r.seed);
        TC_OK(ctx, clt_op_softmax(xt, xt));
        tc_read(xt, got);
        snprintf(what, sizeof what, "softmax in place B=%zu N=%zu", B, N);
        tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r.seed);
        clt_tensor_free(xt);
        clt_tensor_free(yt);
        free(x);
        free(got);
        free(ref);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_argmax)
{
    const size_t B = tc_size(1000, 300), N = 17, n = B * N;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *x = NT_FLOATS(n);
    int32_t *got = nt_alloc(B, sizeof *got);
    tc_fill_nonzero(&r, x, n, 0.01f, 8.0f);
    /* ties: rows 0 mod 5 repeat their maximum at a later position (the first must win) */
    for (size_t b = 0; b < B; b += 5) {
        int32_t m = host_argmax(x + b * N, N);
        size_t later = (size_t)m + 1 + tc_u32(&r) % N;
        if (later < N) x[b * N + later] = x[b * N + m];
        size_t earlier = tc_u32(&r) % N; /* and sometimes an earlier copy, which then wins */
        if (b % 10 == 0 && earlier < (size_t)m) x[b * N + earlier] = x[b * N + m];
    }
    for (size_t j = 0; j < N; j++)
        x[1 * N + j] = 2.0f; /* all equal: 0 */
    for (size_t j = 0; j < N; j++)
        x[2 * N + j] = -INFINITY; /* all -inf: 0 */
    x[3 * N + 4] = NAN;           /* NaN wins: 4 */
    x[3 * N + 9] = NAN;
    x[4 * N + 0] = NAN;       /* first NaN: 0 */
    x[6 * N + 16] = INFINITY; /* inf last: 16 */
    x[7 * N + 5] = INFINITY;  /* inf twice: 5 */
    x[7 * N + 6] = INFINITY;
    clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, B, N), *ot = nt_tensor1(ctx, CLT_DTYPE_I32, B);
    tc_write(xt, x);
    tc_poison(ot);
    TC_OK(ctx, clt_op_argmax(ot, xt));
    tc_read(ot, got);
    for (size_t b = 0; b < B; b++)
        ck_assert_msg(got[b] == host_argmax(x + b * N, N), "row %zu: argmax %d, expected %d", b,
                      got[b], host_argmax(x + b * N, N));
    ck_assert(got[1] == 0 && got[2] == 0 && got[3] == 4 && got[4] == 0 && got[6] == 16 &&
              got[7] == 5);
    /* N = 1 and B = 1 */
    clt_tensor *x1 = nt_tensor2(ctx, CLT_DTYPE_F32, 17, 1),
               *o1 = nt_tensor1(ctx, CLT_DTYPE_I32, 17);
    tc_write(x1, x);
    tc_poison(o1);
    TC_OK(ctx, clt_op_argmax(o1, x1));
    tc_read(o1, got);
    for (size_t b = 0; b < 17; b++)
        ck_assert_int_eq(got[b], 0);
    clt_tensor_free(xt);
    clt_tensor_free(ot);
    clt_tensor_free(x1);
    clt_tensor_free(o1);
    free(x);
    free(got);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("loss");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_xent_shapes);
    tcase_add_loop_test(tc, test_xent_finite_differences, 0, 1 + N_VARIANTS);
    tcase_add_test(tc, test_xent_stability);
    tcase_add_test(tc, test_xent_deterministic);
    tcase_add_test(tc, test_xent_variants);
    tcase_add_test(tc, test_xent_errors);
    tcase_add_test(tc, test_public_losses);
    tcase_add_loop_test(tc, test_xent_rows_vocab, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_xent_public_large_vocab, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_xent_rows_half, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_xent_rows_deterministic, 0, N_VARIANTS);
    tcase_add_test(tc, test_xent_rows_variants_agree);
    tcase_add_test(tc, test_xent_rows_device_default);
    tcase_add_test(tc, test_xent_rows_errors);
    tcase_add_test(tc, test_mse);
    tcase_add_test(tc, test_mse_deterministic);
    tcase_add_test(tc, test_softmax);
    tcase_add_test(tc, test_argmax);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
