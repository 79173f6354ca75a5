/* Tests of clt_op_pool_forward/backward (cl/pool.cl) against the float64 references of
 * tests/ref/ref_nn.c: max and average pooling and the global average pool (a window of the whole
 * plane) over several batch sizes, channel counts, square and non-square planes, windows with
 * stride = K, overlapping (K3 S2, K3 S1) and with gaps (S > K); maxpool on inputs with planted
 * ties (the gradient goes to the first maximum in row-major order); central finite differences
 * of the references; f16/bf16 storage; bit-identical reruns; 2x2 windows with NaNs against the
 * documented scan (the reference has no NaN); the argument checks. Outputs are
 * poisoned (NaN) before each op. Tolerances: fp32 atol 1e-5, rtol 1e-4 (a max is exact; a mean
 * or a gather of at most K^2 fp32 terms is within a few ulp). */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

struct pool_case {
    size_t B, C, H, W;
    int k, s; /* k = 0: the global average pool (window H x W) */
};

/* The op's geometry of a case. */
static struct clt_pool_geom geom_of(const struct pool_case *c)
{
    struct clt_pool_geom g = {c->C, c->H, c->W, c->k, c->k, c->s, c->s};
    if (c->k == 0) {
        g.kh = g.sh = (int)c->H;
        g.kw = g.sw = (int)c->W;
    }
    return g;
}

/* Random non-zero values, or (ties) values from {+-0.5, +-1, +-1.5} so that most windows hold
 * equal maxima. */
static void fill_input(tc_rng *r, float *x, size_t n, bool ties)
{
    tc_fill_nonzero(r, x, n, 0.1f, 1.5f);
    if (ties)
        for (size_t i = 0; i < n; i++)
            x[i] = (x[i] < 0 ? -0.5f : 0.5f) * (float)(1 + tc_u32(r) % 3);
}

/* Forward and backward of pooling p on case c against the reference. */
static void check_case(clt_ctx *ctx, tc_rng *r, clt_pool p, const struct pool_case *c, bool ties)
{
    const struct clt_pool_geom g = geom_of(c);
    const int max = p == CLT_POOL_MAX;
    const size_t OH = (c->H - (size_t)g.kh) / (size_t)g.sh + 1,
                 OW = (c->W - (size_t)g.kw) / (size_t)g.sw + 1;
    const size_t nx = c->B * c->C * c->H * c->W, ny = c->B * c->C * OH * OW;
    float *x = NT_FLOATS(nx), *dy = NT_FLOATS(ny), *got = NT_FLOATS(nx), *again = NT_FLOATS(nx);
    double *xd = NT_DOUBLES(nx), *dyd = NT_DOUBLES(ny), *ref = NT_DOUBLES(nx);
    fill_input(r, x, nx, ties);
    tc_fill_nonzero(r, dy, ny, 0.05f, 2.0f);
    nt_widen(x, xd, nx);
    nt_widen(dy, dyd, ny);
    const size_t xdims[4] = {c->B, c->C, c->H, c->W}, ydims[4] = {c->B, c->C, OH, OW};
    clt_tensor *xt = nt_tensor(ctx, CLT_DTYPE_F32, 4, xdims),
               *yt = nt_tensor(ctx, CLT_DTYPE_F32, 4, ydims),
               *dyt = nt_tensor(ctx, CLT_DTYPE_F32, 4, ydims),
               *dxt = nt_tensor(ctx, CLT_DTYPE_F32, 4, xdims);
    tc_write(xt, x);
    tc_write(dyt, dy);
    char what[160];
    snprintf(what, sizeof what, "%s B%zu C%zu %zux%zu window %dx%d stride %dx%d%s",
             max ? "maxpool" : "avgpool", c->B, c->C, c->H, c->W, g.kh, g.kw, g.sh, g.sw,
             ties ? " (ties)" : "");

    tc_poison(yt);
    TC_OK(ctx, clt_op_pool_forward(p, &g, yt, xt));
    tc_read(yt, got);
    ref_pool_forward(max, xd, ref, (int)(c->B * c->C), (int)c->H, (int)c->W, g.kh, g.kw, g.sh,
                     g.sw);
    char msg[200];
    snprintf(msg, sizeof msg, "%s forward", what);
    tc_check_close(got, ref, ny, NT_ATOL, NT_RTOL, msg, r->seed);

    tc_poison(dxt);
    TC_OK(ctx, clt_op_pool_backward(p, &g, dxt, dyt, max ? xt : NULL));
    tc_read(dxt, got);
    ref_pool_backward(max, xd, dyd, ref, (int)(c->B * c->C), (int)c->H, (int)c->W, g.kh, g.kw,
                      g.sh, g.sw);
    snprintf(msg, sizeof msg, "%s backward", what);
    tc_check_close(got, ref, nx, NT_ATOL, NT_RTOL, msg, r->seed);
    /* deterministic: a second run gives the same bits */
    tc_poison(dxt);
    TC_OK(ctx, clt_op_pool_backward(p, &g, dxt, dyt, max ? xt : NULL));
    tc_read(dxt, again);
    ck_assert_msg(memcmp(got, again, nx * sizeof *got) == 0, "%s: backward not bit-identical",
                  what);

    clt_tensor_free(xt);
    clt_tensor_free(yt);
    clt_tensor_free(dyt);
    clt_tensor_free(dxt);
    free(x);
    free(dy);
    free(got);
    free(again);
    free(xd);
    free(dyd);
    free(ref);
}

static const struct pool_case cases_full[] = {
    {1, 1, 1, 1, 1, 1},   {2, 3, 6, 6, 2, 2},   {3, 2, 7, 5, 3, 2},  {5, 4, 9, 11, 3, 1},
    {2, 17, 13, 10, 2, 3}, {4, 3, 8, 6, 4, 4},  {1, 2, 5, 9, 1, 2},  {7, 5, 12, 12, 3, 2},
    {16, 32, 28, 28, 2, 2},
};
static const struct pool_case cases_small[] = {
    {1, 1, 1, 1, 1, 1},   {2, 3, 6, 6, 2, 2},   {3, 2, 7, 5, 3, 2},  {5, 4, 9, 11, 3, 1},
    {2, 17, 13, 10, 2, 3}, {4, 3, 8, 6, 4, 4},  {1, 2, 5, 9, 1, 2},  {7, 5, 12, 12, 3, 2},
    {2, 3, 14, 14, 2, 2},
};

START_TEST(test_pool_max_avg)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const struct pool_case *cases = TC_SMALL_OR(cases_full, cases_small);
    for (size_t i = 0; i < sizeof cases_full / sizeof *cases_full; i++) {
        check_case(ctx, &r, CLT_POOL_MAX, &cases[i], false);
        check_case(ctx, &r, CLT_POOL_MAX, &cases[i], true);
        check_case(ctx, &r, CLT_POOL_AVG, &cases[i], false);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_pool_global)
{
    static const struct pool_case cases[] = {
        {1, 1, 1, 1, 0, 0}, {3, 4, 6, 6, 0, 0}, {2, 5, 7, 3, 0, 0}, {9, 17, 8, 8, 0, 0}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(ctx, &r, CLT_POOL_AVG, &cases[i], false);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Planted ties in one 3x4 plane, K2 S1 (overlapping): the gradient of each window goes to its
 * first maximum in row-major order, as PyTorch (checked by hand, not only by the reference). */
START_TEST(test_pool_max_first_tie)
{
    clt_ctx *ctx = tc_ctx();
    const float x[12] = {1, 2, 2, 0.5f, /* */ 2, 1, 2, 2, /* */ 0.5f, 2, 1, 3};
    const float dy[6] = {1, 10, 100, 1000, 10000, 100000};
    /* the first maximum of each window (oh, ow), whose top-left is (oh, ow): (0,0) = {1,2;2,1}
     * -> (0,1);
     * (0,1) = {2,2;1,2} -> (0,1); (0,2) = {2,0.5;2,2} -> (0,2); (1,0) = {2,1;0.5,2} -> (1,0);
     * (1,1) = {1,2;2,1} -> (1,2); (1,2) = {2,2;1,3} -> (2,3) */
    const float want[12] = {0, 11, 100, 0, /* */ 1000, 0, 10000, 0, /* */ 0, 0, 0, 100000};
    const struct clt_pool_geom g = {1, 3, 4, 2, 2, 1, 1};
    const size_t xdims[4] = {1, 1, 3, 4}, ydims[4] = {1, 1, 2, 3};
    clt_tensor *xt = nt_tensor(ctx, CLT_DTYPE_F32, 4, xdims),
               *yt = nt_tensor(ctx, CLT_DTYPE_F32, 4, ydims),
               *dyt = nt_tensor(ctx, CLT_DTYPE_F32, 4, ydims),
               *dxt = nt_tensor(ctx, CLT_DTYPE_F32, 4, xdims);
    float y[6], dx[12];
    tc_write(xt, x);
    tc_write(dyt, dy);
    tc_poison(yt);
    tc_poison(dxt);
    TC_OK(ctx, clt_op_pool_forward(CLT_POOL_MAX, &g, yt, xt));
    TC_OK(ctx, clt_op_pool_backward(CLT_POOL_MAX, &g, dxt, dyt, xt));
    tc_read(yt, y);
    tc_read(dxt, dx);
    const float ywant[6] = {2, 2, 2, 2, 2, 3};
    for (int i = 0; i < 6; i++) ck_assert_msg(y[i] == ywant[i], "y[%d] = %g", i, (double)y[i]);
    for (int i = 0; i < 12; i++)
        ck_assert_msg(dx[i] == want[i], "dx[%d] = %g, expected %g", i, (double)dx[i],
                      (double)want[i]);
    double xd[12], dyd[6], ref[12];
    nt_widen(x, xd, 12);
    nt_widen(dy, dyd, 6);
    ref_pool_backward(1, xd, dyd, ref, 1, 3, 4, 2, 2, 1, 1);
    for (int i = 0; i < 12; i++) ck_assert(ref[i] == want[i]);
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    clt_tensor_free(dyt);
    clt_tensor_free(dxt);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The references' backward against central finite differences of f(x) = sum(y * dy) in double,
 * on inputs whose values are all distinct (at least 1/n apart, so no maximum changes within
 * the step): max and avg are piecewise linear, so the differences are exact up to rounding. */
START_TEST(test_pool_ref_finite_differences)
{
    static const struct pool_case cases[] = {
        {2, 2, 5, 6, 2, 2}, {1, 3, 7, 5, 3, 2}, {2, 1, 6, 6, 3, 1}, {2, 3, 4, 5, 0, 0}};
    tc_rng r = tc_rng_for(__func__);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int max = 0; max < 2; max++) {
            const struct pool_case *c = &cases[ci];
            if (c->k == 0 && max) continue;
            const struct clt_pool_geom g = geom_of(c);
            const int BC = (int)(c->B * c->C), H = (int)c->H, W = (int)c->W;
            const size_t OH = (c->H - (size_t)g.kh) / (size_t)g.sh + 1,
                         OW = (c->W - (size_t)g.kw) / (size_t)g.sw + 1;
            const size_t nx = (size_t)BC * c->H * c->W, ny = (size_t)BC * OH * OW;
            double *x = NT_DOUBLES(nx), *dy = NT_DOUBLES(ny), *y = NT_DOUBLES(ny),
                   *dx = NT_DOUBLES(nx);
            /* distinct magnitudes 0.1 + j / n in a random order, random signs */
            for (size_t i = 0; i < nx; i++) x[i] = 0.1 + (double)i / (double)nx;
            for (size_t i = nx - 1; i > 0; i--) {
                size_t j = tc_u32(&r) % (i + 1);
                double t = x[i];
                x[i] = x[j];
                x[j] = t;
            }
            for (size_t i = 0; i < nx; i++)
                if (tc_u32(&r) & 1) x[i] = -x[i];
            for (size_t i = 0; i < ny; i++) dy[i] = tc_uniform(&r, -2.0, 2.0);
            ref_pool_backward(max, x, dy, dx, BC, H, W, g.kh, g.kw, g.sh, g.sw);
            const double eps = 1e-6 / (double)nx; /* below half the smallest gap */
            for (size_t i = 0; i < nx; i++) {
                double f[2], x0 = x[i];
                for (int side = 0; side < 2; side++) {
                    x[i] = x0 + (side ? -eps : eps);
                    ref_pool_forward(max, x, y, BC, H, W, g.kh, g.kw, g.sh, g.sw);
                    f[side] = 0.0;
                    for (size_t j = 0; j < ny; j++) f[side] += y[j] * dy[j];
                }
                x[i] = x0;
                double fd = (f[0] - f[1]) / (2 * eps);
                ck_assert_msg(fabs(fd - dx[i]) <= 1e-6 + 1e-6 * fabs(dx[i]),
                              "case %zu %s: dx[%zu] = %.9g, finite difference %.9g; seed %llu",
                              ci, max ? "max" : "avg", i, dx[i], fd,
                              (unsigned long long)r.seed);
            }
            free(x);
            free(dy);
            free(y);
            free(dx);
        }
}
END_TEST

/* f16 and bf16 storage: loads to fp32, one rounding on store. The reference starts from the
 * rounded inputs; the tolerance is the output rounding (half an ulp: f16 2^-11, bf16 2^-8) plus
 * an atol near 0. */
START_TEST(test_pool_half_storage)
{
    static const struct pool_case cases[] = {
        {3, 2, 7, 5, 3, 2}, {2, 4, 8, 8, 2, 2}, {2, 3, 6, 5, 0, 0}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (int di = 0; di < 2; di++) {
        clt_dtype d = di == 0 ? CLT_DTYPE_F16 : CLT_DTYPE_BF16;
        double rtol = di == 0 ? 1e-3 : 8e-3, atol = di == 0 ? 1e-4 : 1e-3;
        for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
            for (int max = 0; max < 2; max++) {
                const struct pool_case *c = &cases[ci];
                if (c->k == 0 && max) continue;
                clt_pool p = max ? CLT_POOL_MAX : CLT_POOL_AVG;
                const struct clt_pool_geom g = geom_of(c);
                const size_t OH = (c->H - (size_t)g.kh) / (size_t)g.sh + 1,
                             OW = (c->W - (size_t)g.kw) / (size_t)g.sw + 1;
                const size_t nx = c->B * c->C * c->H * c->W, ny = c->B * c->C * OH * OW;
                const int BC = (int)(c->B * c->C);
                float *x = NT_FLOATS(nx), *dy = NT_FLOATS(ny), *got = NT_FLOATS(nx);
                double *xd = NT_DOUBLES(nx), *dyd = NT_DOUBLES(ny), *ref = NT_DOUBLES(nx);
                uint16_t *xh = nt_alloc(nx, 2), *dyh = nt_alloc(ny, 2), *out = nt_alloc(nx, 2);
                fill_input(&r, x, nx, max && ci == 1); /* ties survive rounding exactly */
                tc_fill_nonzero(&r, dy, ny, 0.05f, 2.0f);
                for (size_t i = 0; i < nx; i++) {
                    xh[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(x[i]) : clt_f32_to_bf16(x[i]);
                    xd[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(xh[i]) : clt_bf16_to_f32(xh[i]);
                }
                for (size_t i = 0; i < ny; i++) {
                    dyh[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(dy[i]) : clt_f32_to_bf16(dy[i]);
                    dyd[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(dyh[i]) : clt_bf16_to_f32(dyh[i]);
                }
                clt_tensor *xt = nt_tensor1(ctx, d, nx), *yt = nt_tensor1(ctx, d, ny),
                           *dyt = nt_tensor1(ctx, d, ny), *dxt = nt_tensor1(ctx, d, nx);
                tc_write(xt, xh);
                tc_write(dyt, dyh);
                tc_poison(yt);
                tc_poison(dxt);
                TC_OK(ctx, clt_op_pool_forward(p, &g, yt, xt));
                TC_OK(ctx, clt_op_pool_backward(p, &g, dxt, dyt, max ? xt : NULL));
                for (int pass = 0; pass < 2; pass++) {
                    size_t n = pass == 0 ? ny : nx;
                    tc_read(pass == 0 ? yt : dxt, out);
                    for (size_t i = 0; i < n; i++)
                        got[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(out[i])
                                                    : clt_bf16_to_f32(out[i]);
                    if (pass == 0)
                        ref_pool_forward(max, xd, ref, BC, (int)c->H, (int)c->W, g.kh, g.kw,
                                         g.sh, g.sw);
                    else
                        ref_pool_backward(max, xd, dyd, ref, BC, (int)c->H, (int)c->W, g.kh,
                                          g.kw, g.sh, g.sw);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s case %zu %s", clt_dtype_name(d),
                             max ? "maxpool" : "avgpool", ci, pass == 0 ? "forward" : "backward");
                    tc_check_close(got, ref, n, atol, rtol, what, r.seed);
                }
                clt_tensor_free(xt);
                clt_tensor_free(yt);
                clt_tensor_free(dyt);
                clt_tensor_free(dxt);
                free(x);
                free(dy);
                free(got);
                free(xd);
                free(dyd);
                free(ref);
                free(xh);
                free(dyh);
                free(out);
            }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* nn.MaxPool2d(2) (the kernels' vector path: 8, 4 and 2 windows at a time, the last window
 * again with its neighbour) against the documented scan, bit for bit, on inputs with ties and
 * planted NaNs, which the reference does not model: a window's maximum is x00, then each of x01,
 * x10, x11 that is larger or NaN; its gradient goes to the first element equal to the maximum,
 * or with a NaN to the last NaN; the rows and columns no window covers (odd H, odd W) get 0.
 * Widths with every remainder of the chunks, odd and even. */
START_TEST(test_pool_max_2x2_nan)
{
    static const int widths[] = {2, 3, 4, 5, 6, 7, 9, 10, 11, 14, 15, 16, 17, 28, 29, 31, 33};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++)
        for (int H = 4; H <= 5; H++) {
            const int W = widths[wi], OH = H / 2, OW = W / 2, P = 3; /* planes */
            const size_t nx = (size_t)P * H * W, ny = (size_t)P * OH * OW;
            const struct clt_pool_geom g = {P, (size_t)H, (size_t)W, 2, 2, 2, 2};
            float *x = NT_FLOATS(nx), *dy = NT_FLOATS(ny), *y = NT_FLOATS(ny), *dx = NT_FLOATS(nx);
            for (size_t i = 0; i < nx; i++) {
                uint32_t u = tc_u32(&r) % 16;
                x[i] = u == 0 ? NAN : (float)(u % 4) - 1.5f; /* ties, and NaN one time in 16 */
            }
            tc_fill_nonzero(&r, dy, ny, 0.05f, 2.0f);
            const size_t dims[1] = {nx}, ydims[1] = {ny};
            clt_tensor *xt = nt_tensor(ctx, CLT_DTYPE_F32, 1, dims),
                       *yt = nt_tensor(ctx, CLT_DTYPE_F32, 1, ydims),
                       *dyt = nt_tensor(ctx, CLT_DTYPE_F32, 1, ydims),
                       *dxt = nt_tensor(ctx, CLT_DTYPE_F32, 1, dims);
            tc_write(xt, x);
            tc_write(dyt, dy);
            tc_poison(yt);
            tc_poison(dxt);
            TC_OK(ctx, clt_op_pool_forward(CLT_POOL_MAX, &g, yt, xt));
            TC_OK(ctx, clt_op_pool_backward(CLT_POOL_MAX, &g, dxt, dyt, xt));
            tc_read(yt, y);
            tc_read(dxt, dx);
            float *want = NT_FLOATS(nx);
            for (size_t i = 0; i < nx; i++) want[i] = 0.0f;
            for (int p = 0; p < P; p++)
                for (int oh = 0; oh < OH; oh++)
                    for (int ow = 0; ow < OW; ow++) {
                        const size_t o[4] = {((size_t)p * H + 2 * oh) * W + 2 * ow,
                                             ((size_t)p * H + 2 * oh) * W + 2 * ow + 1,
                                             ((size_t)p * H + 2 * oh + 1) * W + 2 * ow,
                                             ((size_t)p * H + 2 * oh + 1) * W + 2 * ow + 1};
                        float m = x[o[0]];
                        int best = -1;
                        for (int k = 0; k < 4; k++)
                            if (x[o[k]] > m || isnan(x[o[k]])) m = x[o[k]];
                        for (int k = 0; k < 4; k++)
                            if (isnan(m) ? isnan(x[o[k]]) : best < 0 && x[o[k]] == m) best = k;
                        const size_t yi = ((size_t)p * OH + oh) * OW + ow;
                        ck_assert_msg(isnan(m) ? isnan(y[yi]) : nt_same_bits(&y[yi], &m, 1),
                                      "maxpool 2x2 %dx%d: window %zu is %g, expected %g", H, W,
                                      yi, (double)y[yi], (double)m);
                        want[o[best]] = 0.0f + dy[yi];
                    }
            ck_assert_msg(nt_same_bits(dx, want, nx), "maxpool 2x2 %dx%d: backward differs", H,
                          W);
            clt_tensor *ts[] = {xt, yt, dyt, dxt};
            for (size_t i = 0; i < 4; i++) clt_tensor_free(ts[i]);
            free(x);
            free(dy);
            free(y);
            free(dx);
            free(want);
        }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_pool_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    const struct clt_pool_geom g = {2, 4, 4, 2, 2, 2, 2};
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_F32, 64), *y = nt_tensor1(ctx, CLT_DTYPE_F32, 16),
               *y5 = nt_tensor1(ctx, CLT_DTYPE_F32, 15), *x16 = nt_tensor1(ctx, CLT_DTYPE_F16, 64),
               *i32 = nt_tensor1(ctx, CLT_DTYPE_I32, 16), *x33 = nt_tensor1(ctx, CLT_DTYPE_F32, 33),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 64);
    TC_OK(ctx, clt_op_pool_forward(CLT_POOL_MAX, &g, y, x));
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_MAX, &g, y5, x), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "pool_forward: y must have 16 elements"));
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_AVG, &g, y, x33), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "not a whole number of (C, H, W) samples"));
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_AVG, &g, y, x16), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_AVG, &g, i32, x), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_AVG, &g, y, other), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_pool_forward((clt_pool)2, &g, y, x), CLT_ERR_INVALID_ARG);
    struct clt_pool_geom bad = g;
    bad.kh = 5;
    ck_assert_int_eq(clt_op_pool_forward(CLT_POOL_MAX, &bad, y, x), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "window 5x2 with stride 2x2 does not fit"));
    bad = g;
    bad.sw = 0;
    ck_assert_int_eq(clt_op_pool_backward(CLT_POOL_AVG, &bad, x, y, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_pool_backward(CLT_POOL_MAX, &g, x, y, NULL), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "maxpool needs the forward input x"));
    ck_assert_int_eq(clt_op_pool_backward(CLT_POOL_MAX, &g, x, y, x33), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_pool_backward(CLT_POOL_MAX, &g, x, y, x16), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_pool_backward(CLT_POOL_AVG, &g, x, y5, NULL), CLT_ERR_SHAPE);
    TC_OK(ctx, clt_op_pool_backward(CLT_POOL_MAX, &g, x, y, x));
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_tensor_free(y5);
    clt_tensor_free(x16);
    clt_tensor_free(i32);
    clt_tensor_free(x33);
    clt_tensor_free(other);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_pool_max_avg);
    tcase_add_test(tc, test_pool_global);
    tcase_add_test(tc, test_pool_max_first_tie);
    tcase_add_test(tc, test_pool_ref_finite_differences);
    tcase_add_test(tc, test_pool_half_storage);
    tcase_add_test(tc, test_pool_max_2x2_nan);
    tcase_add_test(tc, test_pool_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
