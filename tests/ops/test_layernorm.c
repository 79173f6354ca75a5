/* Tests of clt_op_layernorm_* (cl/layernorm.cl) against the float64 references of
 * tests/ref/ref_nn.c, each for both kernel variants (the work-group kernels and the CPU
 * variant's `_vec` kernels, forced by CLTRAIN_LAYERNORM=group|vec on any device), which must also
 * give the same bits as each other: the forward (y and the saved mean and rstd) and backward
 * (dx, dweight, dbias with beta 0, then beta 1 accumulating) at every R in {1, 3, 65} x D in {1,
 * 7, 17, 129, 384, 768, 1000} (D 300 and 520 for the last two under CLTRAIN_TEST_SMALL,
 * tests/small.h: still more than the kernels' 256 lanes and 16-column tiles, and no multiple of
 * either); the device's default variant (the `_vec` kernels on CPUs); f16/bf16 storage of x,
 * y, dy and dx in every combination; without weight and bias (and with a weight alone); y = x
 * and dx = dy in place; bit-identical reruns and the same bits for every local size; finite
 * differences of the reference backward; the argument checks. Fresh random inputs, each row
 * shifted and scaled differently (so the mean and the variance matter); every output poisoned
 * (NaN) before the op runs, through views at an offset.
 * Tolerances: fp32 atol 1e-5, rtol 1e-4 for every output (rows of at most 1000 elements: the
 * f32 statistics are good to ~1e-7 relative, xhat is at most ~2 here); the parameter gradients,
 * sums over rows, also keep the normalised MSE <= 1e-7. A 16-bit output adds its rounding
 * (f16: atol, rtol 2e-3; bf16: 1e-2); the outputs kept in f32 (mean, rstd, dweight, dbias) keep
 * fp32's, the reference being computed from the rounded inputs the device holds. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

#include "runtime/half_internal.h"

#define EPS 1e-5

/* The kernel variants (CLTRAIN_LAYERNORM), by a loop test's _i. */
static const char *const variants[] = {"group", "vec"};
#define N_VARIANTS 2

/* Makes the ops take variant v from now on (the ops read the variable at each call). */
static void use_variant(int v)
{
    ck_assert_int_eq(setenv("CLTRAIN_LAYERNORM", variants[v], 1), 0);
}

struct ln_case {
    size_t R, D;
};

/* Which parameters the forward takes: weight and bias, neither, or a weight alone. */
enum ln_affine { LN_AFFINE, LN_PLAIN, LN_WEIGHT_ONLY };

/* x (R, D) into a tensor of dtype d, and what the tensor holds (rounded) into xd. */
static clt_tensor *upload(clt_ctx *ctx, clt_dtype d, const float *x, double *xd, size_t R, size_t D)
{
    clt_tensor *t = nt_tensor2(ctx, d, R, D);
    nt_write_as(t, x, xd, R * D);
    return t;
}

/* The tolerances of an output stored as d (see the header). */
static void tol(clt_dtype d, double *atol, double *rtol)
{
    if (d == CLT_DTYPE_F32) {
        *atol = NT_ATOL;
        *rtol = NT_RTOL;
    } else if (d == CLT_DTYPE_F16) {
        *atol = *rtol = 2e-3;
    } else {
        *atol = *rtol = 1e-2;
    }
}

/* Random rows: values of magnitude [0.1, 2) with random signs, row r scaled by 0.5 .. 2 and
 * shifted by -1.5 .. 1.5. */
static void fill_rows(tc_rng *r, float *x, size_t R, size_t D)
{
    tc_fill_nonzero(r, x, R * D, 0.1f, 2.0f);
    for (size_t i = 0; i < R; i++) {
        const float scale = (float)tc_uniform(r, 0.5, 2.0), shift = (float)tc_uniform(r, -1.5, 1.5);
        for (size_t j = 0; j < D; j++)
            x[i * D + j] = x[i * D + j] * scale + shift;
    }
}

/* One case: x and y of dtype xdt, dy and dx of dtype gdt, the parameters as `affine` says. */
static void check_case(clt_ctx *ctx, tc_rng *r, const struct ln_case *c, clt_dtype xdt,
                       clt_dtype gdt, enum ln_affine affine)
{
    const size_t R = c->R, D = c->D, n = R * D;
    const int iR = (int)R, iD = (int)D;
    float *x = NT_FLOATS(n), *dy = NT_FLOATS(n), *got = NT_FLOATS(n), *again = NT_FLOATS(n);
    float *w = NT_FLOATS(D), *b = NT_FLOATS(D), *dw0 = NT_FLOATS(D), *db0 = NT_FLOATS(D),
          *dgot = NT_FLOATS(D), *dw1 = NT_FLOATS(D), *db1 = NT_FLOATS(D), *rgot = NT_FLOATS(R);
    double *xd = NT_DOUBLES(n), *dyd = NT_DOUBLES(n), *ref = NT_DOUBLES(n), *wd = NT_DOUBLES(D),
           *bd = NT_DOUBLES(D), *dwr = NT_DOUBLES(D), *dbr = NT_DOUBLES(D), *meanr = NT_DOUBLES(R),
           *rstdr = NT_DOUBLES(R);
    fill_rows(r, x, R, D);
    tc_fill_nonzero(r, dy, n, 0.05f, 2.0f);
    tc_fill_nonzero(r, w, D, 0.2f, 1.5f);
    tc_fill_nonzero(r, b, D, 0.1f, 1.0f);
    tc_fill_nonzero(r, dw0, D, 0.1f, 1.0f);
    tc_fill_nonzero(r, db0, D, 0.1f, 1.0f);
    nt_widen(w, wd, D);
    nt_widen(b, bd, D);
    clt_tensor *xt = upload(ctx, xdt, x, xd, R, D), *dyt = upload(ctx, gdt, dy, dyd, R, D);
    clt_tensor *yt = nt_tensor2(ctx, xdt, R, D), *dxt = nt_tensor2(ctx, gdt, R, D),
               *wt = nt_tensor1(ctx, CLT_DTYPE_F32, D), *bt = nt_tensor1(ctx, CLT_DTYPE_F32, D),
               *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, D), *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, D),
               *mt = nt_tensor1(ctx, CLT_DTYPE_F32, R), *rt = nt_tensor1(ctx, CLT_DTYPE_F32, R);
    tc_write(wt, w);
    tc_write(bt, b);
    const clt_tensor *wuse = affine == LN_PLAIN ? NULL : wt,
                     *buse = affine == LN_AFFINE ? bt : NULL;
    const double *wref = wuse ? wd : NULL, *bref = buse ? bd : NULL;
    static const char *const affine_names[] = {"weight and bias", "no parameters", "weight only"};
    char what[128], msg[160];
    snprintf(what, sizeof what, "layernorm R%zu D%zu x %s dy %s, %s", R, D, clt_dtype_name(xdt),
             clt_dtype_name(gdt), affine_names[affine]);
    double atol, rtol;

    /* forward */
    tc_poison(yt);
    tc_poison(mt);
    tc_poison(rt);
    TC_OK(ctx, clt_op_layernorm_forward(yt, mt, rt, xt, wuse, buse, (float)EPS));
    ref_layernorm_forward(xd, wref, bref, ref, meanr, rstdr, iR, iD, EPS);
    nt_read_as_f32(yt, got, n);
    tol(xdt, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: y", what);
    tc_check_close(got, ref, n, atol, rtol, msg, r->seed);
    tc_read(mt, rgot);
    snprintf(msg, sizeof msg, "%s: mean", what);
    tc_check_close(rgot, meanr, R, NT_ATOL, NT_RTOL, msg, r->seed);
    tc_read(rt, rgot);
    snprintf(msg, sizeof msg, "%s: rstd", what);
    tc_check_close(rgot, rstdr, R, NT_ATOL, NT_RTOL, msg, r->seed);
    /* without the statistics: the same y, mean and rstd left alone */
    tc_poison(yt);
    TC_OK(ctx, clt_op_layernorm_forward(yt, NULL, NULL, xt, wuse, buse, (float)EPS));
    nt_read_as_f32(yt, again, n);
    ck_assert_msg(nt_same_bits(got, again, n), "%s: y differs without mean and rstd", what);
    tc_read(rt, again);
    ck_assert_msg(nt_same_bits(rgot, again, R), "%s: rstd written without being given", what);

    /* backward, beta 0: dweight and dbias poisoned (not read) */
    tc_poison(dxt);
    tc_poison(dwt);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_layernorm_backward(dxt, dwt, dbt, dyt, xt, mt, rt, wuse, 0.0f));
    ref_layernorm_backward(xd, wref, dyd, ref, dwr, dbr, iR, iD, EPS);
    nt_read_as_f32(dxt, got, n);
    tol(gdt, &atol, &rtol);
    snprintf(msg, sizeof msg, "%s: dx", what);
    tc_check_close(got, ref, n, atol, rtol, msg, r->seed);
    tc_read(dwt, dw1);
    snprintf(msg, sizeof msg, "%s: dweight", what);
    nt_check_reduction(dw1, dwr, D, msg, r->seed);
    tc_read(dbt, db1);
    snprintf(msg, sizeof msg, "%s: dbias", what);
    nt_check_reduction(db1, dbr, D, msg, r->seed);

    /* deterministic: a second run gives the same bits, and so does each output alone */
    tc_poison(dxt);
    tc_poison(dwt);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_layernorm_backward(dxt, dwt, dbt, dyt, xt, mt, rt, wuse, 0.0f));
    nt_read_as_f32(dxt, again, n);
    ck_assert_msg(nt_same_bits(got, again, n), "%s: dx not bit-identical", what);
    tc_read(dwt, dgot);
    ck_assert_msg(nt_same_bits(dw1, dgot, D), "%s: dweight not bit-identical", what);
    tc_read(dbt, dgot);
    ck_assert_msg(nt_same_bits(db1, dgot, D), "%s: dbias not bit-identical", what);
    tc_poison(dwt);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_layernorm_backward(NULL, dwt, NULL, dyt, xt, mt, rt, wuse, 0.0f));
    tc_read(dwt, dgot);
    ck_assert_msg(nt_same_bits(dw1, dgot, D), "%s: dweight alone differs", what);
    TC_OK(ctx, clt_op_layernorm_backward(NULL, NULL, dbt, dyt, xt, mt, rt, wuse, 0.0f));
    tc_read(dbt, dgot);
    ck_assert_msg(nt_same_bits(db1, dgot, D), "%s: dbias alone differs", what);
    tc_poison(dxt);
    TC_OK(ctx, clt_op_layernorm_backward(dxt, NULL, NULL, dyt, xt, mt, rt, wuse, 0.0f));
    nt_read_as_f32(dxt, again, n);
    ck_assert_msg(nt_same_bits(got, again, n), "%s: dx alone differs", what);

    /* beta 1 accumulates; without dx (left as it was) */
    tc_write(dwt, dw0);
    tc_write(dbt, db0);
    TC_OK(ctx, clt_op_layernorm_backward(NULL, dwt, dbt, dyt, xt, mt, rt, wuse, 1.0f));
    for (size_t i = 0; i < D; i++) {
        dwr[i] += dw0[i];
        dbr[i] += db0[i];
    }
    tc_read(dwt, dgot);
    snprintf(msg, sizeof msg, "%s: dweight (beta 1)", what);
    nt_check_reduction(dgot, dwr, D, msg, r->seed);
    tc_read(dbt, dgot);
    snprintf(msg, sizeof msg, "%s: dbias (beta 1)", what);
    nt_check_reduction(dgot, dbr, D, msg, r->seed);
    nt_read_as_f32(dxt, again, n);
    ck_assert_msg(nt_same_bits(got, again, n), "%s: dx written without being given", what);

    clt_tensor *ts[] = {xt, dyt, yt, dxt, wt, bt, dwt, dbt, mt, rt};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    void *ps[] = {x,    dy, got, again, w,  b,  dw0, db0, dgot,  dw1,  db1,
                  rgot, xd, dyd, ref,   wd, bd, dwr, dbr, meanr, rstdr};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        free(ps[i]);
}

static const size_t Rs[] = {1, 3, 65};
/* 768: the GPT width; small: still above 256 lanes and two of them */
static const size_t Ds_full[] = {1, 7, 17, 129, 384, 768, 1000},
                    Ds_small[] = {1, 7, 17, 129, 384, 300, 520};
#define N_RS (sizeof Rs / sizeof *Rs)
#define N_DS (sizeof Ds_full / sizeof *Ds_full)

START_TEST(test_layernorm_f32)
{
    use_variant(_i);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t *Ds = TC_SMALL_OR(Ds_full, Ds_small);
    for (size_t ri = 0; ri < N_RS; ri++)
        for (size_t di = 0; di < N_DS; di++) {
            const struct ln_case c = {Rs[ri], Ds[di]};
            check_case(ctx, &r, &c, CLT_DTYPE_F32, CLT_DTYPE_F32, LN_AFFINE);
        }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Without weight and bias (elementwise_affine=False), and with a weight but no bias. */
START_TEST(test_layernorm_no_affine)
{
    use_variant(_i);
    static const struct ln_case cases[] = {{1, 1}, {3, 17}, {65, 7}, {5, 300}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_case(ctx, &r, &cases[i], CLT_DTYPE_F32, CLT_DTYPE_F32, LN_PLAIN);
        check_case(ctx, &r, &cases[i], CLT_DTYPE_F32, CLT_DTYPE_F32, LN_WEIGHT_ONLY);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_layernorm_half_storage)
{
    use_variant(_i);
    static const struct ln_case full[] = {{3, 17}, {65, 768}}, small[] = {{3, 17}, {5, 300}};
    const struct ln_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype ds[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t i = 0; i < sizeof full / sizeof *full; i++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                if (a || b) check_case(ctx, &r, &cases[i], ds[a], ds[b], LN_AFFINE);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* y = x and dx = dy in place: the bits of the out-of-place ops. */
START_TEST(test_layernorm_in_place)
{
    use_variant(_i);
    static const struct ln_case cases[] = {{3, 7}, {65, 300}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const size_t R = cases[ci].R, D = cases[ci].D, n = R * D;
        float *x = NT_FLOATS(n), *dy = NT_FLOATS(n), *w = NT_FLOATS(D), *a = NT_FLOATS(n),
              *b = NT_FLOATS(n);
        fill_rows(&r, x, R, D);
        tc_fill_nonzero(&r, dy, n, 0.05f, 2.0f);
        tc_fill_nonzero(&r, w, D, 0.2f, 1.5f);
        clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *yt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *dyt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *dxt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *wt = nt_tensor1(ctx, CLT_DTYPE_F32, D), *mt = nt_tensor1(ctx, CLT_DTYPE_F32, R),
                   *rt = nt_tensor1(ctx, CLT_DTYPE_F32, R);
        tc_write(xt, x);
        tc_write(dyt, dy);
        tc_write(wt, w);
        TC_OK(ctx, clt_op_layernorm_forward(yt, mt, rt, xt, wt, wt, (float)EPS));
        TC_OK(ctx, clt_op_layernorm_backward(dxt, NULL, NULL, dyt, xt, mt, rt, wt, 0.0f));
        /* dx = dy, then y = x (x is read by the backward first) */
        TC_OK(ctx, clt_op_layernorm_backward(dyt, NULL, NULL, dyt, xt, mt, rt, wt, 0.0f));
        tc_read(dxt, a);
        tc_read(dyt, b);
        ck_assert_msg(nt_same_bits(a, b, n), "R%zu D%zu: dx = dy differs", R, D);
        TC_OK(ctx, clt_op_layernorm_forward(xt, NULL, NULL, xt, wt, wt, (float)EPS));
        tc_read(yt, a);
        tc_read(xt, b);
        ck_assert_msg(nt_same_bits(a, b, n), "R%zu D%zu: y = x differs", R, D);
        clt_tensor *ts[] = {xt, yt, dyt, dxt, wt, mt, rt};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
            clt_tensor_free(ts[i]);
        free(x);
        free(dy);
        free(w);
        free(a);
        free(b);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Each kernel relaunched (arguments as the op left them) with every local size of
 * nt_local_sizes that it takes: the bits of the op's own launch. Rows of one lane element, of
 * several (above 256), a last column tile that is partial, and more row slices than rows. */
START_TEST(test_layernorm_local_size)
{
    use_variant(_i);
    static const struct ln_case full[] = {{3, 1000}, {65, 17}, {10, 1}},
                                small[] = {{3, 520}, {65, 17}, {10, 1}};
    const struct ln_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    char opts[80]; /* the f32 program the ops build */
    clt__opts_layernorm(opts, sizeof opts, CLT_DTYPE_F32, CLT_DTYPE_F32);
    for (size_t ci = 0; ci < sizeof full / sizeof *full; ci++) {
        const size_t R = cases[ci].R, D = cases[ci].D, n = R * D;
        /* what the kernels write: y, mean, rstd; dx; dweight, dbias */
        const size_t nout = n + 2 * R + n + 2 * D;
        float *x = NT_FLOATS(n), *w = NT_FLOATS(D), *first = NT_FLOATS(nout),
              *got = NT_FLOATS(nout);
        fill_rows(&r, x, R, D);
        tc_fill_nonzero(&r, w, D, 0.2f, 1.5f);
        clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *dyt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *yt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *dxt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
                   *wt = nt_tensor1(ctx, CLT_DTYPE_F32, D), *mt = nt_tensor1(ctx, CLT_DTYPE_F32, R),
                   *rt = nt_tensor1(ctx, CLT_DTYPE_F32, R),
                   *dwt = nt_tensor1(ctx, CLT_DTYPE_F32, D),
                   *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, D);
        clt_tensor *outs[] = {yt, mt, rt, dxt, dwt, dbt};
        const size_t lens[] = {n, R, R, n, D, D};
        tc_write(xt, x);
        tc_fill_nonzero(&r, x, n, 0.05f, 2.0f);
        tc_write(dyt, x);
        tc_write(wt, w);
        TC_OK(ctx, clt_op_layernorm_forward(yt, mt, rt, xt, wt, wt, (float)EPS));
        TC_OK(ctx, clt_op_layernorm_backward(dxt, dwt, dbt, dyt, xt, mt, rt, wt, 0.0f));
        for (size_t i = 0, at = 0; i < 6; at += lens[i], i++)
            tc_read(outs[i], first + at);
        /* per kernel: its outputs (first and count in outs) and its number of groups */
        static const char *const names[N_VARIANTS][3] = {
            {"layernorm_forward", "layernorm_backward_dx", "layernorm_backward_params"},
            {"layernorm_forward_vec", "layernorm_backward_dx_vec",
             "layernorm_backward_params_vec"}};
        /* the work-group kernels: a group per row or per 16 columns; the _vec kernels: as many
         * work-items (a partial last group checks its bound) */
        const size_t out0[] = {0, 3, 4}, nouts[] = {3, 1, 2}, units[] = {R, R, (D + 15) / 16};
        for (int which = 0; which < 3; which++) {
            cl_kernel k = nt_kernel(ctx, "layernorm", opts, names[_i][which]);
            int tried = 0;
            for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
                const size_t local = nt_local_sizes[li],
                             groups = _i ? (units[which] + local - 1) / local : units[which];
                for (size_t j = 0; j < nouts[which]; j++)
                    tc_poison(outs[out0[which] + j]);
                if (!nt_launch_local(ctx, k, groups, local)) continue;
                tried++;
                for (size_t i = 0, at = 0; i < 6; at += lens[i], i++)
                    tc_read(outs[i], got + at);
                ck_assert_msg(nt_same_bits(first, got, nout),
                              "%s R%zu D%zu differs with local size %zu", names[_i][which], R, D,
                              local);
            }
            ck_assert_int_ge(tried, 4);
            /* a size the kernel refused (on a small device) may have left outputs poisoned */
            for (size_t i = 0, at = 0; i < 6; at += lens[i], i++)
                tc_write(outs[i], first + at);
        }
        clt_tensor *ts[] = {xt, dyt, yt, dxt, wt, mt, rt, dwt, dbt};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
            clt_tensor_free(ts[i]);
        free(x);
        free(w);
        free(first);
        free(got);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* One variant's outputs: y (as f32), mean, rstd, dx (as f32), dweight, dbias, end to end. */
static void run_variant(clt_ctx *ctx, int v, clt_tensor *const *t, bool affine, const float *dw0,
                        const float *db0, float *out, size_t R, size_t D)
{
    enum { X, DY, Y, DX, W, B, DW, DB, M, RS };
    const size_t n = R * D;
    use_variant(v);
    tc_poison(t[Y]);
    tc_poison(t[DX]);
    tc_poison(t[M]);
    tc_poison(t[RS]);
    tc_write(t[DW], dw0);
    tc_write(t[DB], db0);
    const clt_tensor *w = affine ? t[W] : NULL, *b = affine ? t[B] : NULL;
    TC_OK(ctx, clt_op_layernorm_forward(t[Y], t[M], t[RS], t[X], w, b, (float)EPS));
    TC_OK(ctx, clt_op_layernorm_backward(t[DX], t[DW], t[DB], t[DY], t[X], t[M], t[RS], w, 1.0f));
    nt_read_as_f32(t[Y], out, n);
    tc_read(t[M], out + n);
    tc_read(t[RS], out + n + R);
    nt_read_as_f32(t[DX], out + n + 2 * R, n);
    tc_read(t[DW], out + 2 * n + 2 * R);
    tc_read(t[DB], out + 2 * n + 2 * R + D);
}

/* Both variants on the same inputs give the same bits in every output (the CPU variant keeps the
 * work-group kernels' lanes, their order and their tree): rows of 1 .. 8 (16 lanes in the CPU
 * variant, 1 .. 8 in the work-group kernels), of 16 and 17, 129, 256 and 257 (past the 256
 * lanes, which then wrap), 384 and 1000; more row slices than rows and the reverse; 16-bit
 * storage; with and without the parameters; dweight and dbias accumulating (beta 1). */
START_TEST(test_layernorm_variants_agree)
{
    static const struct ln_case full[] = {{7, 1},   {5, 7},   {3, 16},   {65, 17}, {9, 129},
                                          {4, 256}, {4, 257}, {33, 384}, {3, 1000}},
                                small[] = {{7, 1},   {5, 7},   {3, 16},   {65, 17}, {9, 129},
                                           {4, 256}, {4, 257}, {33, 384}, {3, 520}};
    static const clt_dtype dts[][2] = {{CLT_DTYPE_F32, CLT_DTYPE_F32},
                                       {CLT_DTYPE_F16, CLT_DTYPE_BF16},
                                       {CLT_DTYPE_BF16, CLT_DTYPE_F32}};
    const struct ln_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t ci = 0; ci < sizeof full / sizeof *full; ci++)
        for (size_t di = 0; di < sizeof dts / sizeof *dts; di++)
            for (int affine = 1; affine >= 0; affine--) {
                const size_t R = cases[ci].R, D = cases[ci].D, n = R * D,
                             nout = 2 * n + 2 * R + 2 * D;
                float *x = NT_FLOATS(n), *dy = NT_FLOATS(n), *w = NT_FLOATS(D), *b = NT_FLOATS(D),
                      *dw0 = NT_FLOATS(D), *db0 = NT_FLOATS(D),
                      *out[N_VARIANTS] = {NT_FLOATS(nout), NT_FLOATS(nout)};
                fill_rows(&r, x, R, D);
                tc_fill_nonzero(&r, dy, n, 0.05f, 2.0f);
                tc_fill_nonzero(&r, w, D, 0.2f, 1.5f);
                tc_fill_nonzero(&r, b, D, 0.1f, 1.0f);
                tc_fill_nonzero(&r, dw0, D, 0.1f, 1.0f);
                tc_fill_nonzero(&r, db0, D, 0.1f, 1.0f);
                const clt_dtype xdt = dts[di][0], gdt = dts[di][1];
                clt_tensor *t[] = {
                    nt_tensor2(ctx, xdt, R, D),        nt_tensor2(ctx, gdt, R, D),
                    nt_tensor2(ctx, xdt, R, D),        nt_tensor2(ctx, gdt, R, D),
                    nt_tensor1(ctx, CLT_DTYPE_F32, D), nt_tensor1(ctx, CLT_DTYPE_F32, D),
                    nt_tensor1(ctx, CLT_DTYPE_F32, D), nt_tensor1(ctx, CLT_DTYPE_F32, D),
                    nt_tensor1(ctx, CLT_DTYPE_F32, R), nt_tensor1(ctx, CLT_DTYPE_F32, R)};
                double *held = NT_DOUBLES(n); /* what the tensors hold: unused here */
                nt_write_as(t[0], x, held, n);
                nt_write_as(t[1], dy, held, n);
                free(held);
                tc_write(t[4], w);
                tc_write(t[5], b);
                for (int v = 0; v < N_VARIANTS; v++)
                    run_variant(ctx, v, t, affine, dw0, db0, out[v], R, D);
                for (size_t i = 0; i < nout; i++)
                    ck_assert_msg(nt_same_bits(&out[0][i], &out[1][i], 1),
                                  "R%zu D%zu x %s dy %s%s: output %zu is %.9g (group), %.9g "
                                  "(vec); seed %llu",
                                  R, D, clt_dtype_name(xdt), clt_dtype_name(gdt),
                                  affine ? "" : " (no parameters)", i, (double)out[0][i],
                                  (double)out[1][i], (unsigned long long)r.seed);
                for (size_t i = 0; i < sizeof t / sizeof *t; i++)
                    clt_tensor_free(t[i]);
                void *ps[] = {x, dy, w, b, dw0, db0, out[0], out[1]};
                for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
                    free(ps[i]);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Without CLTRAIN_LAYERNORM each device takes its own variant: the `_vec` kernels on CPUs, the
 * work-group kernels elsewhere. Seen through the kernels' arguments: only the kernel the op
 * launched has them set, and relaunched (a row per group of one work-item, which both variants
 * take) it gives the op's bits. */
START_TEST(test_layernorm_device_default)
{
    const size_t R = 5, D = 129, n = R * D;
    ck_assert_int_eq(unsetenv("CLTRAIN_LAYERNORM"), 0);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const int v = clt_ctx_device(ctx)->type == CLT_DEVICE_CPU;
    static const char *const names[N_VARIANTS][2] = {
        {"layernorm_forward", "layernorm_backward_dx"},
        {"layernorm_forward_vec", "layernorm_backward_dx_vec"}};
    char opts[80];
    clt__opts_layernorm(opts, sizeof opts, CLT_DTYPE_F32, CLT_DTYPE_F32);
    float *x = NT_FLOATS(n), *a = NT_FLOATS(n), *b = NT_FLOATS(n);
    fill_rows(&r, x, R, D);
    clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
               *yt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D),
               *dxt = nt_tensor2(ctx, CLT_DTYPE_F32, R, D), *mt = nt_tensor1(ctx, CLT_DTYPE_F32, R),
               *rt = nt_tensor1(ctx, CLT_DTYPE_F32, R);
    tc_write(xt, x);
    TC_OK(ctx, clt_op_layernorm_forward(yt, mt, rt, xt, NULL, NULL, (float)EPS));
    TC_OK(ctx, clt_op_layernorm_backward(dxt, NULL, NULL, xt, xt, mt, rt, NULL, 0.0f));
    clt_tensor *outs[] = {yt, dxt};
    for (int which = 0; which < 2; which++) {
        tc_read(outs[which], a);
        tc_poison(outs[which]);
        ck_assert(nt_launch_local(ctx, nt_kernel(ctx, "layernorm", opts, names[v][which]), R, 1));
        tc_read(outs[which], b);
        ck_assert_msg(nt_same_bits(a, b, n), "%s on a %s device: not the op's kernel",
                      names[v][which], v ? "CPU" : "non-CPU");
    }
    clt_tensor *ts[] = {xt, yt, dxt, mt, rt};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    free(x);
    free(a);
    free(b);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The reference backward against central finite differences of f = sum(y dy) in double, with
 * and without the parameters. */
START_TEST(test_layernorm_ref_finite_differences)
{
    static const struct ln_case cases[] = {{1, 1}, {1, 2}, {3, 7}, {2, 17}, {4, 5}};
    tc_rng r = tc_rng_for(__func__);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int affine = 1; affine >= 0; affine--) {
            const struct ln_case *c = &cases[ci];
            const int R = (int)c->R, D = (int)c->D;
            const size_t n = c->R * c->D;
            double *x = NT_DOUBLES(n), *dy = NT_DOUBLES(n), *y = NT_DOUBLES(n), *dx = NT_DOUBLES(n);
            double *w = NT_DOUBLES(c->D), *b = NT_DOUBLES(c->D), *dw = NT_DOUBLES(c->D),
                   *db = NT_DOUBLES(c->D);
            for (size_t i = 0; i < n; i++) {
                x[i] = tc_uniform(&r, -2.0, 2.0);
                dy[i] = tc_uniform(&r, -2.0, 2.0);
            }
            for (int i = 0; i < D; i++) {
                w[i] = tc_uniform(&r, 0.5, 1.5);
                b[i] = tc_uniform(&r, -1.0, 1.0);
            }
            const double *wa = affine ? w : NULL, *ba = affine ? b : NULL;
            ref_layernorm_backward(x, wa, dy, dx, dw, db, R, D, EPS);
            const double h = 1e-6;
            /* f as a function of x[i], w[d] or b[d] (the parameters: with affine only) */
            const size_t nvar = affine ? n + 2 * c->D : n;
            for (size_t k = 0; k < nvar; k++) {
                double *v = k < n ? &x[k] : k < n + c->D ? &w[k - n] : &b[k - n - c->D];
                double want = k < n ? dx[k] : k < n + c->D ? dw[k - n] : db[k - n - c->D];
                double f[2], v0 = *v;
                for (int side = 0; side < 2; side++) {
                    *v = v0 + (side ? -h : h);
                    ref_layernorm_forward(x, wa, ba, y, NULL, NULL, R, D, EPS);
                    f[side] = 0.0;
                    for (size_t j = 0; j < n; j++)
                        f[side] += y[j] * dy[j];
                }
                *v = v0;
                double fd = (f[0] - f[1]) / (2 * h);
                ck_assert_msg(fabs(fd - want) <= 1e-6 + 1e-5 * fabs(want),
                              "case %zu%s: gradient %zu = %.9g, finite difference %.9g; seed %llu",
                              ci, affine ? "" : " (no parameters)", k, want, fd,
                              (unsigned long long)r.seed);
            }
            void *ps[] = {x, dy, y, dx, w, b, dw, db};
            for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
                free(ps[i]);
        }
}
END_TEST

/* Each bad argument: its status, a message naming the op, and nothing enqueued (y stays
 * poisoned). */
#define BAD(want, expr, opname)                                                                    \
    do {                                                                                           \
        ck_assert_int_eq((expr), (want));                                                          \
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), opname) ||                                  \
                          (want) == CLT_ERR_DEVICE_MISMATCH,                                       \
                      "%s: message \"%s\"", #expr, clt_ctx_errmsg(ctx));                           \
    } while (0)

START_TEST(test_layernorm_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    const float vals[12] = {1, -2, 3, 4, -5, 6, 7, 8, -9, 10, 11, 12};
    clt_tensor *x = nt_tensor2(ctx, CLT_DTYPE_F32, 3, 4), *y = nt_tensor2(ctx, CLT_DTYPE_F32, 3, 4),
               *y11 = nt_tensor1(ctx, CLT_DTYPE_F32, 11),
               *yh = nt_tensor2(ctx, CLT_DTYPE_F16, 3, 4),
               *xi = nt_tensor2(ctx, CLT_DTYPE_I32, 3, 4), *w = nt_tensor1(ctx, CLT_DTYPE_F32, 4),
               *w3 = nt_tensor1(ctx, CLT_DTYPE_F32, 3), *wh = nt_tensor1(ctx, CLT_DTYPE_F16, 4),
               *m = nt_tensor1(ctx, CLT_DTYPE_F32, 3), *rs = nt_tensor1(ctx, CLT_DTYPE_F32, 3),
               *m4 = nt_tensor1(ctx, CLT_DTYPE_F32, 4), *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 4),
               *xo = nt_tensor2(ctx2, CLT_DTYPE_F32, 3, 4);
    tc_write(x, vals);
    tc_write(w, vals);
    TC_OK(ctx, clt_op_layernorm_forward(y, m, rs, x, w, w, 1e-5f));
    tc_poison(y);
    const char *fw = "layernorm_forward", *bw = "layernorm_backward";
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y11, m, rs, x, w, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(yh, m, rs, x, w, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m, rs, xi, w, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m, rs, x, w3, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m, rs, x, w, w3, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m, rs, x, wh, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m4, rs, x, w, w, 1e-5f), fw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_forward(y, m, m4, x, w, w, 1e-5f), fw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_layernorm_forward(y, m, rs, x, w, w, 0.0f), fw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_layernorm_forward(y, m, rs, x, w, w, -1e-5f), fw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_layernorm_forward(y, m, rs, x, w, w, NAN), fw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_layernorm_forward(y, m, rs, x, other, w, 1e-5f), fw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_layernorm_forward(y, m, rs, xo, w, w, 1e-5f), fw);
    /* backward: x for dy; y as dx */
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y11, w, w, x, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(yh, w, w, x, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w, w, y11, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w, w, xi, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w3, w, x, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w, wh, x, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w, w, x, x, m4, rs, w, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_layernorm_backward(y, w, w, x, x, m, rs, w3, 0.0f), bw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_layernorm_backward(y, w, w, x, x, m, rs, w, NAN), bw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_layernorm_backward(y, w, w, x, x, m, rs, w, INFINITY), bw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_layernorm_backward(y, w, other, x, x, m, rs, w, 0.0f), bw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_layernorm_backward(y, w, w, xo, x, m, rs, w, 0.0f), bw);
    /* nothing ran: y still holds the poison */
    float got[12];
    tc_read(y, got);
    for (int i = 0; i < 12; i++)
        ck_assert_msg(isnan(got[i]), "y[%d] = %g was written", i, got[i]);
    clt_tensor *ts[] = {x, y, y11, yh, xi, w, w3, wh, m, rs, m4, other, xo};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layernorm");
    TCase *tc = tc_tcase("layernorm");
    tcase_add_loop_test(tc, test_layernorm_f32, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_layernorm_no_affine, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_layernorm_half_storage, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_layernorm_in_place, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_layernorm_local_size, 0, N_VARIANTS);
    tcase_add_test(tc, test_layernorm_variants_agree);
    tcase_add_test(tc, test_layernorm_device_default);
    tcase_add_test(tc, test_layernorm_ref_finite_differences);
    tcase_add_test(tc, test_layernorm_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
