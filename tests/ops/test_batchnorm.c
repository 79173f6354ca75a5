/* Tests of clt_op_batchnorm_* (cl/batchnorm.cl) against the float64 references of
 * tests/ref/ref_nn.c: the training forward (output, running statistics), the evaluation forward
 * and backward (dx, dweight, dbias, with beta 0 and 1) for BatchNorm2d (S = H W) and BatchNorm1d
 * (S = 1) over several shapes, including channels of more than one reduction tile; f16/bf16
 * storage of x, y, dy and dx; the fused relu (against the reference and the unfused pair's
 * bits); bit-identical reruns; the reductions' bits for every local size;
 * finite differences of the reference backward; the argument checks. Fresh random inputs
 * (channels shifted off zero so the mean matters); outputs poisoned (NaN) before each op.
 * Tolerances (fp32): atol 1e-4, rtol 1e-4 for y and the running statistics, whose error is the
 * f32 variance's (sums of up to 10^4 terms, relative ~1e-6) times |xhat| (up to ~4) plus the
 * output's rounding; dx atol 1e-4, rtol 1e-3 (w invstd times a difference of three terms of
 * similar size: cancellation); dweight/dbias are reductions: atol 1e-4, rtol 1e-4 and the
 * normalised mean squared error <= 1e-7. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

#include "runtime/half_internal.h"

#define EPS 1e-5
#define MOMENTUM 0.1

struct bn_case {
    size_t B, C, S;
};

/* x into a tensor of dtype d, and what the tensor holds (rounded) into xd. */
static clt_tensor *upload(clt_ctx *ctx, clt_dtype d, const float *x, double *xd, size_t n)
{
    clt_tensor *t = nt_tensor1(ctx, d, n);
    nt_write_as(t, x, xd, n);
    return t;
}

/* Tolerances by storage: fp32 as the header says; 16-bit outputs add their rounding (f16
 * 2^-11, bf16 2^-8 relative) and an atol near 0. */
static void tol(clt_dtype d, bool grad, double *atol, double *rtol)
{
    if (d == CLT_DTYPE_F32) {
        *atol = 1e-4;
        *rtol = grad ? 1e-3 : 1e-4;
    } else if (d == CLT_DTYPE_F16) {
        *atol = 2e-3;
        *rtol = 2e-3;
    } else {
        *atol = 1e-2;
        *rtol = 1e-2;
    }
}

/* One case: x and y of dtype xd_t, dy and dx of dtype gd_t. */
static void check_case(clt_ctx *ctx, tc_rng *r, const struct bn_case *c, clt_dtype xdt,
                       clt_dtype gdt)
{
    const size_t B = c->B, C = c->C, S = c->S, nx = B * C * S;
    const int iB = (int)B, iC = (int)C, iS = (int)S;
    const struct clt_bn_geom g = {C, S, (float)EPS, (float)MOMENTUM, false};
    float *x = NT_FLOATS(nx), *dy = NT_FLOATS(nx), *got = NT_FLOATS(nx), *again = NT_FLOATS(nx);
    float *w = NT_FLOATS(C), *b = NT_FLOATS(C), *rm = NT_FLOATS(C), *rv = NT_FLOATS(C),
          *dw0 = NT_FLOATS(C), *db0 = NT_FLOATS(C), *cgot = NT_FLOATS(C);
    double *xd = NT_DOUBLES(nx), *dyd = NT_DOUBLES(nx), *ref = NT_DOUBLES(nx);
    double *wd = NT_DOUBLES(C), *bd = NT_DOUBLES(C), *rmd = NT_DOUBLES(C), *rvd = NT_DOUBLES(C),
           *dwr = NT_DOUBLES(C), *dbr = NT_DOUBLES(C);
    tc_fill_nonzero(r, x, nx, 0.1f, 2.0f);
    for (size_t i = 0; i < nx; i++) x[i] += (float)((i / S) % C) * 0.75f - 1.0f; /* shifts */
    tc_fill_nonzero(r, dy, nx, 0.05f, 2.0f);
    tc_fill_nonzero(r, w, C, 0.2f, 1.5f);
    tc_fill_nonzero(r, b, C, 0.1f, 1.0f);
    tc_fill_nonzero(r, rm, C, 0.1f, 1.0f);
    for (size_t i = 0; i < C; i++) rv[i] = (float)tc_uniform(r, 0.5, 2.0);
    tc_fill_nonzero(r, dw0, C, 0.1f, 1.0f);
    tc_fill_nonzero(r, db0, C, 0.1f, 1.0f);
    nt_widen(w, wd, C);
    nt_widen(b, bd, C);
    nt_widen(rm, rmd, C);
    nt_widen(rv, rvd, C);
    clt_tensor *xt = upload(ctx, xdt, x, xd, nx), *dyt = upload(ctx, gdt, dy, dyd, nx);
    clt_tensor *yt = nt_tensor1(ctx, xdt, nx), *dxt = nt_tensor1(ctx, gdt, nx),
               *wt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *bt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *rmt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *rvt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *st = nt_tensor1(ctx, CLT_DTYPE_F32, 4 * C);
    tc_write(wt, w);
    tc_write(bt, b);
    tc_write(rmt, rm);
    tc_write(rvt, rv);
    char what[128], msg[160];
    snprintf(what, sizeof what, "batchnorm B%zu C%zu S%zu x %s dy %s", B, C, S,
             clt_dtype_name(xdt), clt_dtype_name(gdt));
    double atol, rtol;

    /* training forward */
    tol(xdt, false, &atol, &rtol);
    tc_poison(yt);
    tc_poison(st);
    TC_OK(ctx, clt_op_batchnorm_forward_train(yt, xt, wt, bt, st, rmt, rvt, &g));
    nt_read_as_f32(yt, got, nx);
    ref_batchnorm_forward_train(xd, wd, bd, ref, NULL, NULL, iB, iC, iS, EPS);
    snprintf(msg, sizeof msg, "%s: training forward", what);
    tc_check_close(got, ref, nx, atol, rtol, msg, r->seed);
    ref_batchnorm_update_running(xd, rmd, rvd, iB, iC, iS, MOMENTUM);
    tc_read(rmt, cgot);
    snprintf(msg, sizeof msg, "%s: running_mean", what);
    tc_check_close(cgot, rmd, C, 1e-4, 1e-4, msg, r->seed);
    tc_read(rvt, cgot);
    snprintf(msg, sizeof msg, "%s: running_var", what);
    tc_check_close(cgot, rvd, C, 1e-4, 1e-4, msg, r->seed);

    /* backward, beta 0 (dweight and dbias poisoned: not read), then beta 1 */
    tc_poison(dxt);
    tc_poison(dwt);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_batchnorm_backward(dxt, dwt, dbt, dyt, xt, wt, NULL, st, &g, 0.0f));
    nt_read_as_f32(dxt, got, nx);
    ref_batchnorm_backward(xd, wd, dyd, ref, dwr, dbr, iB, iC, iS, EPS);
    tol(gdt, true, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: dx", what);
    tc_check_close(got, ref, nx, atol, rtol, msg, r->seed);
    /* dweight/dbias: f32 sums of n products whose inputs carry the storage's rounding */
    double ratol = xdt == CLT_DTYPE_F32 && gdt == CLT_DTYPE_F32 ? 1e-4 : 1e-3;
    tc_read(dwt, cgot);
    snprintf(msg, sizeof msg, "%s: dweight", what);
    tc_check_close(cgot, dwr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);
    nt_check_nmse(cgot, dwr, C, msg, r->seed);
    tc_read(dbt, cgot);
    snprintf(msg, sizeof msg, "%s: dbias", what);
    tc_check_close(cgot, dbr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);
    /* deterministic */
    tc_poison(dxt);
    TC_OK(ctx, clt_op_batchnorm_backward(dxt, dwt, dbt, dyt, xt, wt, NULL, st, &g, 0.0f));
    nt_read_as_f32(dxt, again, nx);
    ck_assert_msg(memcmp(got, again, nx * sizeof *got) == 0, "%s: dx not bit-identical", what);
    /* beta 1 accumulates; no dx */
    tc_write(dwt, dw0);
    tc_write(dbt, db0);
    TC_OK(ctx, clt_op_batchnorm_backward(NULL, dwt, dbt, dyt, xt, wt, NULL, st, &g, 1.0f));
    for (size_t i = 0; i < C; i++) {
        dwr[i] += dw0[i];
        dbr[i] += db0[i];
    }
    tc_read(dwt, cgot);
    snprintf(msg, sizeof msg, "%s: dweight (beta 1)", what);
    tc_check_close(cgot, dwr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);
    tc_read(dbt, cgot);
    snprintf(msg, sizeof msg, "%s: dbias (beta 1)", what);
    tc_check_close(cgot, dbr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);

    /* evaluation forward from the running statistics the device holds now */
    float *rmg = NT_FLOATS(C), *rvg = NT_FLOATS(C);
    double *rmgd = NT_DOUBLES(C), *rvgd = NT_DOUBLES(C);
    tc_read(rmt, rmg);
    tc_read(rvt, rvg);
    nt_widen(rmg, rmgd, C);
    nt_widen(rvg, rvgd, C);
    tc_poison(yt);
    TC_OK(ctx, clt_op_batchnorm_forward_eval(yt, xt, wt, bt, rmt, rvt, &g));
    nt_read_as_f32(yt, got, nx);
    ref_batchnorm_forward_eval(xd, wd, bd, rmgd, rvgd, ref, iB, iC, iS, EPS);
    tol(xdt, false, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: evaluation forward", what);
    tc_check_close(got, ref, nx, atol, rtol, msg, r->seed);
    /* the training forward without running statistics leaves them alone */
    TC_OK(ctx, clt_op_batchnorm_forward_train(yt, xt, wt, bt, st, NULL, NULL, &g));
    tc_read(rmt, cgot);
    ck_assert(memcmp(cgot, rmg, C * sizeof *cgot) == 0);

    clt_tensor *ts[] = {xt, dyt, yt, dxt, wt, bt, rmt, rvt, dwt, dbt, st};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) clt_tensor_free(ts[i]);
    void *ps[] = {x,  dy, got, again, w,   b,   rm,  rv,   dw0,  db0,  cgot, xd,
                  dyd, ref, wd, bd,   rmd, rvd, dwr, dbr, rmg, rvg, rmgd, rvgd};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) free(ps[i]);
}

static const struct bn_case cases_full[] = {
    {2, 1, 1},  {3, 5, 1},   {17, 8, 1},   {200, 3, 1},  {2, 3, 36},
    {4, 4, 30}, {5, 2, 121}, {8, 3, 200},  {16, 32, 49}, {3, 17, 1000},
};
static const struct bn_case cases_small[] = {
    {2, 1, 1}, {3, 5, 1}, {17, 8, 1}, {60, 3, 1}, {2, 3, 36},
    {4, 4, 30}, {5, 2, 121}, {3, 2, 200}, {4, 6, 25}, {2, 3, 700},
};

START_TEST(test_batchnorm_f32)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const struct bn_case *cases = TC_SMALL_OR(cases_full, cases_small);
    for (size_t i = 0; i < sizeof cases_full / sizeof *cases_full; i++)
        check_case(ctx, &r, &cases[i], CLT_DTYPE_F32, CLT_DTYPE_F32);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_batchnorm_half_storage)
{
    static const struct bn_case cases[] = {{3, 5, 1}, {4, 4, 30}, {3, 2, 700}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype ds[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                if (a || b) check_case(ctx, &r, &cases[i], ds[a], ds[b]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Batch norm with the relu after it fused (clt_bn_geom.relu): the forwards are relu of the
 * reference's within the tolerances above (relu does not grow errors), backward is the
 * reference's with dy masked where the device's own y is 0 (the kernels recompute that mask
 * from x), and in f32 every output has the bits of the unfused pair: the plain ops with relu's
 * forward and mask applied on the host between them. */
static void check_relu_case(clt_ctx *ctx, tc_rng *r, const struct bn_case *c, clt_dtype xdt)
{
    const size_t B = c->B, C = c->C, S = c->S, nx = B * C * S;
    const int iB = (int)B, iC = (int)C, iS = (int)S;
    const struct clt_bn_geom g = {C, S, (float)EPS, (float)MOMENTUM, true},
                             plain = {C, S, (float)EPS, (float)MOMENTUM, false};
    float *x = NT_FLOATS(nx), *dy = NT_FLOATS(nx), *y = NT_FLOATS(nx), *got = NT_FLOATS(nx),
          *w = NT_FLOATS(C), *b = NT_FLOATS(C), *cgot = NT_FLOATS(C), *cplain = NT_FLOATS(C);
    double *xd = NT_DOUBLES(nx), *dyd = NT_DOUBLES(nx), *ref = NT_DOUBLES(nx),
           *wd = NT_DOUBLES(C), *bd = NT_DOUBLES(C), *dwr = NT_DOUBLES(C), *dbr = NT_DOUBLES(C);
    tc_fill_nonzero(r, x, nx, 0.1f, 2.0f);
    tc_fill_nonzero(r, dy, nx, 0.05f, 2.0f);
    tc_fill_nonzero(r, w, C, 0.2f, 1.5f);
    tc_fill_nonzero(r, b, C, 0.1f, 1.0f); /* about half of y below 0 */
    nt_widen(w, wd, C);
    nt_widen(b, bd, C);
    clt_tensor *xt = upload(ctx, xdt, x, xd, nx), *dyt = upload(ctx, CLT_DTYPE_F32, dy, dyd, nx);
    clt_tensor *yt = nt_tensor1(ctx, xdt, nx), *dxt = nt_tensor1(ctx, CLT_DTYPE_F32, nx),
               *wt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *bt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *rmt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *rvt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, C), *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
               *st = nt_tensor1(ctx, CLT_DTYPE_F32, 4 * C);
    tc_write(wt, w);
    tc_write(bt, b);
    tc_fill_nonzero(r, cgot, C, 0.1f, 1.0f);
    tc_write(rmt, cgot);
    for (size_t i = 0; i < C; i++) cgot[i] = (float)tc_uniform(r, 0.5, 2.0);
    tc_write(rvt, cgot);
    char what[128], msg[160];
    snprintf(what, sizeof what, "batchnorm+relu B%zu C%zu S%zu x %s", B, C, S,
             clt_dtype_name(xdt));
    double atol, rtol;
    tol(xdt, false, &atol, &rtol);

    /* training forward: relu of the reference's, about half of it zero */
    tc_poison(yt);
    TC_OK(ctx, clt_op_batchnorm_forward_train(yt, xt, wt, bt, st, NULL, NULL, &g));
    nt_read_as_f32(yt, y, nx);
    ref_batchnorm_forward_train(xd, wd, bd, ref, NULL, NULL, iB, iC, iS, EPS);
    size_t zeros = 0;
    for (size_t i = 0; i < nx; i++) {
        ref[i] = ref[i] < 0 ? 0 : ref[i];
        zeros += y[i] == 0.0f;
    }
    snprintf(msg, sizeof msg, "%s: training forward", what);
    tc_check_close(y, ref, nx, atol, rtol, msg, r->seed);
    ck_assert_msg(zeros > 0 && zeros < nx, "%s: %zu of %zu zeros", what, zeros, nx);

    /* backward: the reference's with dy where the device's y > 0 */
    for (size_t i = 0; i < nx; i++) dyd[i] = y[i] > 0.0f ? dyd[i] : 0.0;
    tc_poison(dxt);
    tc_poison(dwt);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_batchnorm_backward(dxt, dwt, dbt, dyt, xt, wt, bt, st, &g, 0.0f));
    nt_read_as_f32(dxt, got, nx);
    ref_batchnorm_backward(xd, wd, dyd, ref, dwr, dbr, iB, iC, iS, EPS);
    tol(CLT_DTYPE_F32, true, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: dx", what);
    tc_check_close(got, ref, nx, atol, rtol, msg, r->seed);
    double ratol = xdt == CLT_DTYPE_F32 ? 1e-4 : 1e-3;
    tc_read(dwt, cgot);
    snprintf(msg, sizeof msg, "%s: dweight", what);
    tc_check_close(cgot, dwr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);
    tc_read(dbt, cgot);
    snprintf(msg, sizeof msg, "%s: dbias", what);
    tc_check_close(cgot, dbr, C, ratol * (double)B * S / 100 + ratol, 1e-4, msg, r->seed);

    if (xdt == CLT_DTYPE_F32) {
        /* the unfused pair's bits: plain forward, relu on the host, the mask on dy */
        float *yp = NT_FLOATS(nx), *dxp = NT_FLOATS(nx), *dym = NT_FLOATS(nx);
        TC_OK(ctx, clt_op_batchnorm_forward_train(yt, xt, wt, bt, st, NULL, NULL, &plain));
        nt_read_as_f32(yt, yp, nx);
        for (size_t i = 0; i < nx; i++) {
            yp[i] = yp[i] < 0.0f ? 0.0f : yp[i];
            dym[i] = yp[i] > 0.0f ? dy[i] : 0.0f;
        }
        ck_assert_msg(nt_same_bits(y, yp, nx), "%s: forward bits differ from bn then relu", what);
        clt_tensor *dymt = nt_tensor1(ctx, CLT_DTYPE_F32, nx);
        tc_write(dymt, dym);
        TC_OK(ctx, clt_op_batchnorm_backward(dxt, dwt, dbt, dymt, xt, wt, NULL, st, &plain, 0.0f));
        nt_read_as_f32(dxt, dxp, nx);
        ck_assert_msg(nt_same_bits(got, dxp, nx), "%s: dx bits differ from the unfused", what);
        tc_read(dwt, cplain);
        TC_OK(ctx, clt_op_batchnorm_backward(NULL, dwt, dbt, dyt, xt, wt, bt, st, &g, 0.0f));
        tc_read(dwt, cgot);
        ck_assert_msg(nt_same_bits(cgot, cplain, C), "%s: dweight bits differ", what);
        clt_tensor_free(dymt);
        free(yp);
        free(dxp);
        free(dym);
    }

    /* evaluation forward: relu of the reference's from the running statistics */
    float *rm = NT_FLOATS(C), *rv = NT_FLOATS(C);
    double *rmd = NT_DOUBLES(C), *rvd = NT_DOUBLES(C);
    tc_read(rmt, rm);
    tc_read(rvt, rv);
    nt_widen(rm, rmd, C);
    nt_widen(rv, rvd, C);
    tc_poison(yt);
    TC_OK(ctx, clt_op_batchnorm_forward_eval(yt, xt, wt, bt, rmt, rvt, &g));
    nt_read_as_f32(yt, got, nx);
    ref_batchnorm_forward_eval(xd, wd, bd, rmd, rvd, ref, iB, iC, iS, EPS);
    for (size_t i = 0; i < nx; i++) ref[i] = ref[i] < 0 ? 0 : ref[i];
    tol(xdt, false, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: evaluation forward", what);
    tc_check_close(got, ref, nx, atol, rtol, msg, r->seed);

    clt_tensor *ts[] = {xt, dyt, yt, dxt, wt, bt, rmt, rvt, dwt, dbt, st};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) clt_tensor_free(ts[i]);
    void *ps[] = {x, dy, y, got, w, b, cgot, cplain, xd, dyd, ref, wd, bd, dwr, dbr,
                  rm, rv, rmd, rvd};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) free(ps[i]);
}

START_TEST(test_batchnorm_relu)
{
    static const struct bn_case cases[] = {{3, 5, 1}, {17, 8, 1}, {4, 4, 30}, {3, 2, 203}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype ds[] = {CLT_DTYPE_F32, CLT_DTYPE_BF16};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int d = 0; d < 2; d++) check_relu_case(ctx, &r, &cases[i], ds[d]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The reductions' bits for every local size the kernels can take: the statistics and the
 * backward sums of each op, then each kernel relaunched (arguments as the op left them) with
 * the sizes of nt_local_sizes. Shapes whose leaves are rows cut into chunks, whole rows, several
 * rows (S small), with a last leaf of fewer rows, and more than one tile of leaves. */
START_TEST(test_batchnorm_local_size)
{
    static const struct bn_case full[] = {{5, 3, 300}, {70, 2, 1}, {30, 2, 30}, {600, 2, 300}},
                                small[] = {{5, 3, 300}, {70, 2, 1}, {30, 2, 30}, {150, 1, 560}};
    const struct bn_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t ci = 0; ci < sizeof full / sizeof *full; ci++) {
        const struct bn_case *c = &cases[ci];
        const size_t n = c->B * c->C * c->S, C = c->C;
        const struct clt_bn_geom g = {C, c->S, (float)EPS, (float)MOMENTUM, false};
        float *x = NT_FLOATS(n), *w = NT_FLOATS(C), *first = NT_FLOATS(6 * C),
              *got = NT_FLOATS(6 * C);
        tc_fill_nonzero(&r, x, n, 0.1f, 2.0f);
        tc_fill_nonzero(&r, w, C, 0.2f, 1.5f);
        clt_tensor *xt = nt_tensor1(ctx, CLT_DTYPE_F32, n),
                   *dyt = nt_tensor1(ctx, CLT_DTYPE_F32, n),
                   *yt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *wt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
                   *st = nt_tensor1(ctx, CLT_DTYPE_F32, 4 * C),
                   *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, C),
                   *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, C);
        tc_write(xt, x);
        tc_fill_nonzero(&r, x, n, 0.05f, 2.0f);
        tc_write(dyt, x);
        tc_write(wt, w);
        TC_OK(ctx, clt_op_batchnorm_forward_train(yt, xt, wt, wt, st, NULL, NULL, &g));
        TC_OK(ctx, clt_op_batchnorm_backward(NULL, dwt, dbt, dyt, xt, wt, NULL, st, &g, 0.0f));
        tc_read(st, first);
        tc_read(dwt, first + 4 * C);
        tc_read(dbt, first + 5 * C);
        static const char *const names[] = {"batchnorm_stats", "batchnorm_backward_reduce"};
        for (int which = 0; which < 2; which++) {
            cl_kernel k = nt_kernel(ctx, "batchnorm", "-DX_DTYPE=0 -DG_DTYPE=0", names[which]);
            int tried = 0;
            for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
                /* what the kernel writes: stats[0, 2C), or stats[2C, 4C), dweight and dbias */
                if (which) {
                    tc_poison(dwt);
                    tc_poison(dbt);
                } else {
                    tc_poison(st);
                }
                if (!nt_launch_local(ctx, k, C, nt_local_sizes[li])) continue;
                tried++;
                tc_read(st, got);
                tc_read(dwt, got + 4 * C);
                tc_read(dbt, got + 5 * C);
                ck_assert_msg(nt_same_bits(first, got, which ? 6 * C : 2 * C),
                              "%s B%zu C%zu S%zu differs with local size %zu", names[which], c->B,
                              C, c->S, nt_local_sizes[li]);
            }
            ck_assert_int_ge(tried, 4);
            tc_write(st, first); /* the statistics for the backward kernel: a size the kernel
                                  * refused (on a small device) left them poisoned */
        }
        clt_tensor *ts[] = {xt, dyt, yt, wt, st, dwt, dbt};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) clt_tensor_free(ts[i]);
        free(x);
        free(w);
        free(first);
        free(got);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The reference backward against central finite differences of f = sum(y * dy) in double. */
START_TEST(test_batchnorm_ref_finite_differences)
{
    static const struct bn_case cases[] = {{2, 1, 1}, {5, 3, 1}, {3, 2, 6}, {2, 3, 10}};
    tc_rng r = tc_rng_for(__func__);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const struct bn_case *c = &cases[ci];
        const int B = (int)c->B, C = (int)c->C, S = (int)c->S;
        const size_t n = c->B * c->C * c->S;
        double *x = NT_DOUBLES(n), *dy = NT_DOUBLES(n), *y = NT_DOUBLES(n), *dx = NT_DOUBLES(n);
        double *w = NT_DOUBLES(c->C), *b = NT_DOUBLES(c->C), *dw = NT_DOUBLES(c->C),
               *db = NT_DOUBLES(c->C);
        for (size_t i = 0; i < n; i++) {
            x[i] = tc_uniform(&r, -2.0, 2.0);
            dy[i] = tc_uniform(&r, -2.0, 2.0);
        }
        for (int i = 0; i < C; i++) {
            w[i] = tc_uniform(&r, 0.5, 1.5);
            b[i] = tc_uniform(&r, -1.0, 1.0);
        }
        ref_batchnorm_backward(x, w, dy, dx, dw, db, B, C, S, EPS);
        const double h = 1e-6;
        /* f as a function of x[i], w[c] or b[c] */
        for (size_t k = 0; k < n + 2 * c->C; k++) {
            double *v = k < n ? &x[k] : k < n + c->C ? &w[k - n] : &b[k - n - c->C];
            double want = k < n ? dx[k] : k < n + c->C ? dw[k - n] : db[k - n - c->C];
            double f[2], v0 = *v;
            for (int side = 0; side < 2; side++) {
                *v = v0 + (side ? -h : h);
                ref_batchnorm_forward_train(x, w, b, y, NULL, NULL, B, C, S, EPS);
                f[side] = 0.0;
                for (size_t j = 0; j < n; j++) f[side] += y[j] * dy[j];
            }
            *v = v0;
            double fd = (f[0] - f[1]) / (2 * h);
            ck_assert_msg(fabs(fd - want) <= 1e-6 + 1e-5 * fabs(want),
                          "case %zu: gradient %zu = %.9g, finite difference %.9g; seed %llu", ci,
                          k, want, fd, (unsigned long long)r.seed);
        }
        free(x);
        free(dy);
        free(y);
        free(dx);
        free(w);
        free(b);
        free(dw);
        free(db);
    }
}
END_TEST

START_TEST(test_batchnorm_errors)
{
    clt_ctx *ctx = tc_ctx();
    const struct clt_bn_geom g = {3, 2, 1e-5f, 0.1f, false}, g1 = {3, 1, 1e-5f, 0.1f, false};
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_F32, 12), *y = nt_tensor1(ctx, CLT_DTYPE_F32, 12),
               *y5 = nt_tensor1(ctx, CLT_DTYPE_F32, 11), *x3 = nt_tensor1(ctx, CLT_DTYPE_F32, 3),
               *y3 = nt_tensor1(ctx, CLT_DTYPE_F32, 3), *v = nt_tensor1(ctx, CLT_DTYPE_F32, 3),
               *v2 = nt_tensor1(ctx, CLT_DTYPE_F32, 2), *st = nt_tensor1(ctx, CLT_DTYPE_F32, 12),
               *i32 = nt_tensor1(ctx, CLT_DTYPE_I32, 12);
    const float ones[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    tc_write(x, ones);
    tc_write(v, ones);
    tc_write(st, ones);
    TC_OK(ctx, clt_op_batchnorm_forward_train(y, x, v, v, st, v, v, &g));
    ck_assert_int_eq(clt_op_batchnorm_forward_train(y5, x, v, v, st, NULL, NULL, &g),
                     CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_batchnorm_forward_train(y, x, v2, v, st, NULL, NULL, &g),
                     CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_batchnorm_forward_train(y, i32, v, v, st, NULL, NULL, &g),
                     CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_batchnorm_forward_eval(y5, x, v, v, v, v, &g), CLT_ERR_SHAPE);
    /* one value per channel: refused in training, fine in evaluation */
    ck_assert_int_eq(clt_op_batchnorm_forward_train(y3, x3, v, v, st, v, v, &g1),
                     CLT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(clt_ctx_errmsg(ctx), "more than 1 value per channel"));
    TC_OK(ctx, clt_op_batchnorm_forward_eval(y3, x3, v, v, v, v, &g1));
    ck_assert_int_eq(clt_op_batchnorm_backward(NULL, v, v2, x, x, v, NULL, st, &g, 0.0f),
                     CLT_ERR_SHAPE);
    clt_tensor *ts[] = {x, y, y5, x3, y3, v, v2, st, i32};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) clt_tensor_free(ts[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batchnorm");
    TCase *tc = tcase_create("batchnorm");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_batchnorm_f32);
    tcase_add_test(tc, test_batchnorm_half_storage);
    tcase_add_test(tc, test_batchnorm_relu);
    tcase_add_test(tc, test_batchnorm_local_size);
    tcase_add_test(tc, test_batchnorm_ref_finite_differences);
    tcase_add_test(tc, test_batchnorm_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
