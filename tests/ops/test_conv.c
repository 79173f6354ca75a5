/* Tests of the 2-D convolution (cl/conv.cl, src/ops/conv.c): clt_op_conv2d_forward and
 * clt_op_conv2d_backward against the float64 reference (tests/ref/ref_nn.c, itself checked by
 * finite differences in tests/nn/test_ref.c) on fresh random inputs for kernel sizes 1, 3, 5,
 * strides 1, 2, paddings 0, 1, 2, non-square inputs, 1, 2, 3 and 9 input channels, rows that
 * are and are not whole vectors of the implicit kernels, batch 1 and more,
 * with and without bias, through views; outputs and the workspace poisoned (NaN) first. f16 and
 * bf16 storage with a looser tolerance, the argument checks.
 *
 * Tolerance: every output is a sum of products, checked as |got - ref| <= tol * (1 + A), A the
 * same sum over absolute values (the reference run on |x|, |w|, |dy|): fp32 tol 1e-5 (the GEMM
 * sums up to ~10^4 terms in fp32, whose rounding grows with the magnitude of the terms, not of
 * the result); 16-bit storage tol 8 u (u = 2^-11 for f16, 2^-8 for bf16: the GEMM's output rows
 * and the stored results are rounded to 16 bits, the inputs are rounded before the reference
 * sees them). The fp32 results also keep the normalized MSE <= 1e-7. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "runtime/half_internal.h"
#include "small.h"

#include "ops/ops_internal.h"
#include "runtime/program_internal.h"
#include "cltrain/profile.h"

/* B, C, H, W, OUT, K, S, P */
typedef struct {
    int B, C, H, W, OUT, K, S, P;
} shape;

static const shape shapes_full[] = {
    {1, 1, 5, 7, 3, 1, 1, 0},   {3, 3, 9, 6, 4, 3, 1, 1},  {2, 1, 11, 8, 5, 5, 2, 2},
    {4, 3, 7, 10, 2, 3, 2, 0},  {1, 3, 6, 5, 8, 3, 1, 2},  {5, 2, 13, 9, 17, 3, 2, 1},
    {16, 3, 28, 28, 16, 3, 1, 1}, {3, 9, 7, 10, 5, 3, 1, 1},  {2, 2, 8, 16, 4, 3, 1, 1},
};
static const shape shapes_small[] = {
    {1, 1, 5, 7, 3, 1, 1, 0},  {3, 3, 9, 6, 4, 3, 1, 1},  {2, 1, 11, 8, 5, 5, 2, 2},
    {4, 3, 7, 10, 2, 3, 2, 0}, {1, 3, 6, 5, 8, 3, 1, 2},  {5, 2, 13, 9, 17, 3, 2, 1},
    {2, 3, 12, 12, 16, 3, 1, 1}, {3, 9, 7, 10, 5, 3, 1, 1}, {2, 2, 8, 16, 4, 3, 1, 1},
};
#define NSHAPES (sizeof shapes_full / sizeof *shapes_full)

static struct clt_conv_geom geom(const shape *s)
{
    return (struct clt_conv_geom){(size_t)s->B, (size_t)s->C,   (size_t)s->H, (size_t)s->W,
                                  (size_t)s->OUT, (size_t)s->K, (size_t)s->S, (size_t)s->P};
}

/* Writes v (n) to t in dtype d and keeps the values t holds (rounded) in r. */
static void upload(clt_tensor *t, const float *v, size_t n, clt_dtype d, double *r)
{
    if (d == CLT_DTYPE_F32) {
        tc_write(t, v);
        nt_widen(v, r, n);
        return;
    }
    uint16_t *h = nt_alloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(v[i]) : clt_f32_to_bf16(v[i]);
        r[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(h[i]) : clt_bf16_to_f32(h[i]);
    }
    tc_write(t, h);
    free(h);
}

static void download(const clt_tensor *t, float *out, size_t n, clt_dtype d)
{
    if (d == CLT_DTYPE_F32) {
        tc_read(t, out);
        return;
    }
    uint16_t *h = nt_alloc(n, sizeof *h);
    tc_read(t, h);
    for (size_t i = 0; i < n; i++)
        out[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(h[i]) : clt_bf16_to_f32(h[i]);
    free(h);
}

/* |got - ref| <= tol (1 + a) for each element; NaN fails. */
static void check_bound(const float *got, const double *ref, const double *a, size_t n,
                        double tol, const char *what, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        ck_assert_msg(err <= tol * (1.0 + a[i]),
                      "%s[%zu]: got %.9g, expected %.9g (|err| %.3g > %.3g); seed %llu", what, i,
                      (double)got[i], ref[i], err, tol * (1.0 + a[i]), (unsigned long long)seed);
    }
}

static void absd(const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fabs(x[i]);
}

/* One shape in storage dtype d (x, w, bias, workspace, y, dy, dx; dw and db are f32). */
static void run_case(clt_ctx *ctx, tc_rng *r, const shape *s, bool bias, clt_dtype d)
{
    const struct clt_conv_geom g = geom(s);
    const size_t OH = clt_conv_out_side(g.H, g.K, g.S, g.P),
                 OW = clt_conv_out_side(g.W, g.K, g.S, g.P);
    const size_t nx = g.B * g.C * g.H * g.W, nw = g.OUT * g.C * g.K * g.K, nb = g.OUT,
                 ny = g.B * g.OUT * OH * OW, nws = clt_op_conv2d_workspace(&g);
    const double tol = d == CLT_DTYPE_F32 ? 1e-5 : 8.0 * (d == CLT_DTYPE_F16 ? 0x1p-11 : 0x1p-8);
    char what[160];
    snprintf(what, sizeof what, "conv %s B%d C%d %dx%d OUT%d k%d s%d p%d%s", clt_dtype_name(d),
             s->B, s->C, s->H, s->W, s->OUT, s->K, s->S, s->P, bias ? "" : " nobias");

    float *x = NT_FLOATS(nx), *w = NT_FLOATS(nw), *b = NT_FLOATS(nb), *dy = NT_FLOATS(ny),
          *dw0 = NT_FLOATS(nw), *db0 = NT_FLOATS(nb);
    size_t most = nx > ny ? nx : ny;
    if (nw > most) most = nw;
    float *got = NT_FLOATS(most);
    double *xd = NT_DOUBLES(nx), *wd = NT_DOUBLES(nw), *bd = NT_DOUBLES(nb), *dyd = NT_DOUBLES(ny),
           *y_ref = NT_DOUBLES(ny), *y_abs = NT_DOUBLES(ny), *dx_ref = NT_DOUBLES(nx),
           *dx_abs = NT_DOUBLES(nx), *dw_ref = NT_DOUBLES(nw), *dw_abs = NT_DOUBLES(nw),
           *db_ref = NT_DOUBLES(nb), *db_abs = NT_DOUBLES(nb), *xa = NT_DOUBLES(nx),
           *wa = NT_DOUBLES(nw), *ba = NT_DOUBLES(nb), *dya = NT_DOUBLES(ny);
    tc_fill_nonzero(r, x, nx, 0.05f, 1.0f);
    tc_fill_nonzero(r, w, nw, 0.05f, 1.0f);
    tc_fill_nonzero(r, b, nb, 0.05f, 1.0f);
    tc_fill_nonzero(r, dy, ny, 0.05f, 1.0f);
    tc_fill_nonzero(r, dw0, nw, 0.05f, 1.0f);
    tc_fill_nonzero(r, db0, nb, 0.05f, 1.0f);

    clt_tensor *xt = nt_tensor1(ctx, d, nx), *wt = nt_tensor1(ctx, d, nw),
               *bt = nt_tensor1(ctx, d, nb), *yt = nt_tensor1(ctx, d, ny),
               *dyt = nt_tensor1(ctx, d, ny), *dxt = nt_tensor1(ctx, d, nx),
               *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, nw), *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, nb),
               *wst = nt_tensor1(ctx, d, nws);
    upload(xt, x, nx, d, xd);
    upload(wt, w, nw, d, wd);
    upload(bt, b, nb, d, bd);
    upload(dyt, dy, ny, d, dyd);
    absd(xd, xa, nx);
    absd(wd, wa, nw);
    absd(bd, ba, nb);
    absd(dyd, dya, ny);
    const double *bref = bias ? bd : NULL, *babs = bias ? ba : NULL;

    /* forward */
    tc_poison(yt);
    tc_poison(wst);
    TC_OK(ctx, clt_op_conv2d_forward(yt, xt, wt, bias ? bt : NULL, wst, &g));
    download(yt, got, ny, d);
    ref_conv2d_forward(xd, wd, bref, y_ref, s->B, s->C, s->H, s->W, s->OUT, s->K, s->S, s->P);
    ref_conv2d_forward(xa, wa, babs, y_abs, s->B, s->C, s->H, s->W, s->OUT, s->K, s->S, s->P);
    char w2[200];
    snprintf(w2, sizeof w2, "%s: y", what);
    check_bound(got, y_ref, y_abs, ny, tol, w2, r->seed);
    if (d == CLT_DTYPE_F32) nt_check_nmse(got, y_ref, ny, w2, r->seed);

    /* backward, beta 0: dx, dw and db overwrite poison */
    ref_conv2d_backward(xd, wd, dyd, dx_ref, dw_ref, db_ref, s->B, s->C, s->H, s->W, s->OUT, s->K,
                        s->S, s->P);
    ref_conv2d_backward(xa, wa, dya, dx_abs, dw_abs, db_abs, s->B, s->C, s->H, s->W, s->OUT, s->K,
                        s->S, s->P);
    tc_poison(dxt);
    tc_poison(dwt);
    tc_poison(dbt);
    tc_poison(wst);
    TC_OK(ctx,
          clt_op_conv2d_backward(dxt, dwt, bias ? dbt : NULL, dyt, xt, wt, wst, &g, 0.0f, false));
    download(dxt, got, nx, d);
    snprintf(w2, sizeof w2, "%s: dx", what);
    check_bound(got, dx_ref, dx_abs, nx, tol, w2, r->seed);
    if (d == CLT_DTYPE_F32) nt_check_nmse(got, dx_ref, nx, w2, r->seed);
    tc_read(dwt, got);
    snprintf(w2, sizeof w2, "%s: dw", what);
    check_bound(got, dw_ref, dw_abs, nw, tol, w2, r->seed);
    if (d == CLT_DTYPE_F32) nt_check_nmse(got, dw_ref, nw, w2, r->seed);
    if (bias) {
        tc_read(dbt, got);
        snprintf(w2, sizeof w2, "%s: db", what);
        check_bound(got, db_ref, db_abs, nb, tol, w2, r->seed);
    }

    /* backward, beta 1, without dx: dw and db accumulate onto dw0 and db0 */
    tc_write(dwt, dw0);
    tc_write(dbt, db0);
    TC_OK(ctx,
          clt_op_conv2d_backward(NULL, dwt, bias ? dbt : NULL, dyt, xt, wt, wst, &g, 1.0f, false));
    for (size_t i = 0; i < nw; i++) {
        dw_ref[i] += dw0[i];
        dw_abs[i] += fabs(dw0[i]);
    }
    for (size_t i = 0; i < nb; i++) {
        db_ref[i] += db0[i];
        db_abs[i] += fabs(db0[i]);
    }
    tc_read(dwt, got);
    snprintf(w2, sizeof w2, "%s: dw accumulated", what);
    check_bound(got, dw_ref, dw_abs, nw, tol, w2, r->seed);
    tc_read(dbt, got);
    if (bias) {
        snprintf(w2, sizeof w2, "%s: db accumulated", what);
        check_bound(got, db_ref, db_abs, nb, tol, w2, r->seed);
    } else {
        ck_assert(nt_same_bits(got, db0, nb)); /* no bias: db not touched */
    }

    /* cols_ready: right after the forward the workspace holds x's im2col matrix or padded copy,
     * and a backward told so gives the bits of one that rebuilds it (one that reads something
     * else ignores it), the rest of the workspace poisoned */
    float *dw_ready = malloc(nw * sizeof *dw_ready);
    ck_assert(dw_ready);
    tc_poison(wst);
    TC_OK(ctx, clt_op_conv2d_forward(yt, xt, wt, bias ? bt : NULL, wst, &g));
    tc_poison(dwt);
    TC_OK(ctx, clt_op_conv2d_backward(NULL, dwt, NULL, dyt, xt, wt, wst, &g, 0.0f, true));
    tc_read(dwt, dw_ready);
    tc_poison(dwt);
    TC_OK(ctx, clt_op_conv2d_backward(NULL, dwt, NULL, dyt, xt, wt, wst, &g, 0.0f, false));
    tc_read(dwt, got);
    ck_assert_msg(nt_same_bits(got, dw_ready, nw), "%s: dw from what the forward kept", what);
    free(dw_ready);

    clt_tensor *ts[] = {xt, wt, bt, yt, dyt, dxt, dwt, dbt, wst};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    void *hs[] = {x, w, b, dy, dw0, db0, got, xd, wd, bd, dyd, y_ref, y_abs, dx_ref, dx_abs,
                  dw_ref, dw_abs, db_ref, db_abs, xa, wa, ba, dya};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        free(hs[i]);
}

/* Both forwards on every device: im2col + GEMM, and the implicit one (stride 1; CPUs take it
 * by default, so the switch makes a GPU, or Oclgrind, run it too) in both of its vector widths
 * (8 floats, and 16 where a CPU's native width is 16: each on every device, a ctx each, since a
 * ctx keeps the kernels it built). */
START_TEST(test_conv_f32)
{
    tc_rng r = tc_rng_for(__func__);
    const shape *shapes = TC_SMALL_OR(shapes_full, shapes_small);
    const char *modes[][2] = {{"im2col", NULL}, {"implicit", "8"}, {"implicit", "16"}};
    for (int m = 0; m < 3; m++) {
        setenv("CLTRAIN_CONV", modes[m][0], 1);
        if (modes[m][1]) setenv("CLTRAIN_CONV_V", modes[m][1], 1);
        clt_ctx *ctx = tc_ctx();
        for (size_t i = 0; i < NSHAPES; i++)
            for (int bias = 0; bias < 2; bias++)
                if (bias || i % 2 == 0) run_case(ctx, &r, &shapes[i], bias, CLT_DTYPE_F32);
        clt_ctx_free(ctx);
        unsetenv("CLTRAIN_CONV_V");
    }
    unsetenv("CLTRAIN_CONV");
    tc_assert_no_live();
}
END_TEST

START_TEST(test_conv_half_storage)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype ds[] = {CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t di = 0; di < 2; di++)
        for (size_t i = 0; i < 4; i++)
            run_case(ctx, &r, &shapes_small[i], i != 1, ds[di]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Mixed storage as a model in 16-bit precision runs its first conv: x f32, the rest 16-bit. */
START_TEST(test_conv_mixed_input)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const shape s = {2, 3, 9, 6, 4, 3, 1, 1};
    const struct clt_conv_geom g = geom(&s);
    const size_t nx = 2 * 3 * 9 * 6, nw = 4 * 3 * 9, ny = 2 * 4 * 9 * 6;
    float *x = NT_FLOATS(nx), *w = NT_FLOATS(nw), *got = NT_FLOATS(ny);
    double *xd = NT_DOUBLES(nx), *wd = NT_DOUBLES(nw), *y = NT_DOUBLES(ny), *ya = NT_DOUBLES(ny),
           *xa = NT_DOUBLES(nx), *wa = NT_DOUBLES(nw);
    tc_fill_nonzero(&r, x, nx, 0.05f, 1.0f);
    tc_fill_nonzero(&r, w, nw, 0.05f, 1.0f);
    for (size_t i = 0; i < nx; i++) /* x as the workspace holds it: bf16 */
        x[i] = clt_bf16_to_f32(clt_f32_to_bf16(x[i]));
    clt_tensor *xt = nt_tensor1(ctx, CLT_DTYPE_F32, nx), *wt = nt_tensor1(ctx, CLT_DTYPE_BF16, nw),
               *yt = nt_tensor1(ctx, CLT_DTYPE_BF16, ny),
               *wst = nt_tensor1(ctx, CLT_DTYPE_BF16, clt_op_conv2d_workspace(&g));
    upload(xt, x, nx, CLT_DTYPE_F32, xd);
    upload(wt, w, nw, CLT_DTYPE_BF16, wd);
    tc_poison(yt);
    TC_OK(ctx, clt_op_conv2d_forward(yt, xt, wt, NULL, wst, &g));
    download(yt, got, ny, CLT_DTYPE_BF16);
    absd(xd, xa, nx);
    absd(wd, wa, nw);
    ref_conv2d_forward(xd, wd, NULL, y, 2, 3, 9, 6, 4, 3, 1, 1);
    ref_conv2d_forward(xa, wa, NULL, ya, 2, 3, 9, 6, 4, 3, 1, 1);
    check_bound(got, y, ya, ny, 8 * 0x1p-8, "conv f32 x, bf16 w and y", r.seed);
    clt_tensor_free(xt);
    clt_tensor_free(wt);
    clt_tensor_free(yt);
    clt_tensor_free(wst);
    void *hs[] = {x, w, got, xd, wd, y, ya, xa, wa};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        free(hs[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_conv_errors)
{
    clt_ctx *ctx = tc_ctx();
    const shape s = {2, 3, 5, 4, 2, 3, 1, 1};
    struct clt_conv_geom g = geom(&s);
    const size_t nws = clt_op_conv2d_workspace(&g);
    ck_assert_uint_eq(nws, 2 * 5 * 4 * (27 + 2) + 2 * 27); /* cols, rows, the weights^T */
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_F32, 120), *w = nt_tensor1(ctx, CLT_DTYPE_F32, 54),
               *b = nt_tensor1(ctx, CLT_DTYPE_F32, 2), *y = nt_tensor1(ctx, CLT_DTYPE_F32, 80),
               *ws = nt_tensor1(ctx, CLT_DTYPE_F32, nws),
               *small = nt_tensor1(ctx, CLT_DTYPE_F32, nws - 1),
               *xi = nt_tensor1(ctx, CLT_DTYPE_I32, 120), *bh = nt_tensor1(ctx, CLT_DTYPE_F16, 2),
               *dw16 = nt_tensor1(ctx, CLT_DTYPE_F16, 54);
    ck_assert_int_eq(clt_op_conv2d_forward(y, w, w, b, ws, &g), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "conv2d_forward: x must have 120 elements"),
                  "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(clt_op_conv2d_forward(y, xi, w, b, ws, &g), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_conv2d_forward(y, x, w, b, small, &g), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "workspace"));
    ck_assert_int_eq(clt_op_conv2d_forward(y, x, w, bh, ws, &g), CLT_ERR_SHAPE); /* bias dtype */
    ck_assert_int_eq(clt_op_conv2d_backward(NULL, dw16, NULL, y, x, w, ws, &g, 0.0f, false),
                     CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "conv2d_backward: dw must be f32"));
    g.K = 8; /* larger than the padded 5x4 input */
    ck_assert_int_eq(clt_op_conv2d_forward(y, x, w, b, ws, &g), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "bad geometry"));
    ck_assert_uint_eq(clt_conv_out_side(4, 8, 1, 1), 0);
    ck_assert_uint_eq(clt_conv_out_side(28, 3, 2, 1), 14);
    g.K = 3;
    TC_OK(ctx, clt_op_conv2d_forward(y, x, w, b, ws, &g));
    clt_tensor *ts[] = {x, w, b, y, ws, small, xi, bh, dw16};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* clt__enqueue_nd runs a dimension 2 of more than CLT__MAX_GROUPS_YZ groups (NVIDIA's limit)
 * as several launches at global offsets: conv's NCHW-to-rows permute over B =
 * CLT__MAX_GROUPS_YZ + 3 samples of one partial tile each, in groups of 1 x 1 x 1, so the last
 * samples come from the second launch (the profiler counts two). */
START_TEST(test_conv_sliced_launch)
{
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.profiling = true; /* counts the launches */
    clt_ctx *ctx = tc_ctx_with(&cp);
    const size_t B = CLT__MAX_GROUPS_YZ + 3, OUT = 3, HW = 5, n = B * OUT * HW;
    float *src = malloc(n * sizeof *src), *got = malloc(n * sizeof *got);
    ck_assert(src && got);
    for (size_t i = 0; i < n; i++) src[i] = (float)(i % 1000003); /* exact in f32 */
    clt_tensor *dy = nt_tensor1(ctx, CLT_DTYPE_F32, n), *rows = nt_tensor1(ctx, CLT_DTYPE_F32, n);
    tc_write(dy, src);
    tc_poison(rows);
    char opts[64];
    cl_kernel k;
    clt__opts_conv(opts, sizeof opts, CLT_DTYPE_F32, CLT_DTYPE_F32, false);
    TC_OK(ctx, clt__kernel(ctx, "conv", opts, "conv_backward_permute", &k));
    cl_mem rm = clt_tensor_mem(rows), dm = clt_tensor_mem(dy);
    cl_ulong ro = clt_tensor_offset(rows), dof = clt_tensor_offset(dy);
    cl_uint b = (cl_uint)B, out = (cl_uint)OUT, hw = (cl_uint)HW;
    ck_assert_int_eq(
        clSetKernelArg(k, 0, sizeof rm, &rm) | clSetKernelArg(k, 1, sizeof ro, &ro) |
            clSetKernelArg(k, 2, sizeof dm, &dm) | clSetKernelArg(k, 3, sizeof dof, &dof) |
            clSetKernelArg(k, 4, sizeof b, &b) | clSetKernelArg(k, 5, sizeof out, &out) |
            clSetKernelArg(k, 6, sizeof hw, &hw),
        CL_SUCCESS);
    const size_t global[3] = {1, 1, B}, local[3] = {1, 1, 1};
    TC_OK(ctx, clt__enqueue_nd(ctx, k, 3, global, local, "conv_backward_permute"));
    tc_read(rows, got);
    struct clt_profile_row prow[8];
    TC_OK(ctx, clt_profile_collect(ctx));
    int nrow = clt_profile_rows(ctx, prow, 8);
    long launches = 0;
    for (int i = 0; i < nrow && i < 8; i++)
        if (strcmp(prow[i].name, "conv_backward_permute") == 0) launches = prow[i].calls;
    ck_assert_msg(launches == 2, "%ld launches, want 2", launches);
    for (size_t bb = 0; bb < B; bb++)
        for (size_t s = 0; s < HW; s++)
            for (size_t o = 0; o < OUT; o++) {
                const float want = src[(bb * OUT + o) * HW + s], v = got[(bb * HW + s) * OUT + o];
                ck_assert_msg(v == want, "sample %zu, s %zu, o %zu: got %g, want %g", bb, s, o,
                              (double)v, (double)want);
            }
    clt_tensor_free(dy);
    clt_tensor_free(rows);
    free(src);
    free(got);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tc_tcase("conv");
    tcase_add_test(tc, test_conv_f32);
    tcase_add_test(tc, test_conv_half_storage);
    tcase_add_test(tc, test_conv_mixed_input);
    tcase_add_test(tc, test_conv_errors);
    tcase_add_test(tc, test_conv_sliced_launch);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
