/* Tests of the bias half of linear (cl/linear.cl): clt_op_bias_add and clt_op_bias_grad against
 * float64 references (ref_linear_backward's db), at B in {1, 17, 1000} x OUT in {1, 10, 17,
 * 1000} (B 300 and OUT 100 for 1000 under CLTRAIN_TEST_SMALL, tests/small.h), through views,
 * with beta 0 (poisoned db) and 1 (accumulation), bit-identical results across runs and across
 * every work-group size, and the argument checks. Tolerances: fp32 atol 1e-5, rtol 1e-4; the
 * column sums also keep the normalized MSE <= 1e-7. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

/* Small: B still spans more than the 32 row slices, OUT several groups of 64 columns. */
static const size_t Bs_full[] = {1, 17, 1000}, Bs_small[] = {1, 17, 300};
static const size_t OUTs_full[] = {1, 10, 17, 1000}, OUTs_small[] = {1, 10, 17, 100};

START_TEST(test_bias_add)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t *Bs = TC_SMALL_OR(Bs_full, Bs_small), *OUTs = TC_SMALL_OR(OUTs_full, OUTs_small);
    for (size_t bi = 0; bi < 3; bi++) {
        for (size_t oi = 0; oi < 4; oi++) {
            size_t B = Bs[bi], OUT = OUTs[oi], n = B * OUT;
            char what[64];
            float *y = NT_FLOATS(n), *bias = NT_FLOATS(OUT), *got = NT_FLOATS(n);
            double *ref = NT_DOUBLES(n);
            tc_fill_nonzero(&r, y, n, 0.01f, 4.0f);
            tc_fill_nonzero(&r, bias, OUT, 0.01f, 4.0f);
            for (size_t i = 0; i < n; i++)
                ref[i] = (double)y[i] + bias[i % OUT];
            clt_tensor *yt = nt_tensor2(ctx, CLT_DTYPE_F32, B, OUT),
                       *bt = nt_tensor1(ctx, CLT_DTYPE_F32, OUT);
            tc_write(yt, y);
            tc_write(bt, bias);
            TC_OK(ctx, clt_op_bias_add(yt, bt));
            tc_read(yt, got);
            snprintf(what, sizeof what, "bias_add B=%zu OUT=%zu", B, OUT);
            tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r.seed);
            clt_tensor_free(yt);
            clt_tensor_free(bt);
            free(y);
            free(bias);
            free(got);
            free(ref);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_bias_grad)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t *Bs = TC_SMALL_OR(Bs_full, Bs_small), *OUTs = TC_SMALL_OR(OUTs_full, OUTs_small);
    for (size_t bi = 0; bi < 3; bi++) {
        for (size_t oi = 0; oi < 4; oi++) {
            size_t B = Bs[bi], OUT = OUTs[oi], n = B * OUT;
            char what[80];
            float *dy = NT_FLOATS(n), *db0 = NT_FLOATS(OUT), *got = NT_FLOATS(OUT);
            double *dyd = NT_DOUBLES(n), *ref = NT_DOUBLES(OUT), *ref1 = NT_DOUBLES(OUT);
            tc_fill_nonzero(&r, dy, n, 0.01f, 2.0f);
            tc_fill_nonzero(&r, db0, OUT, 0.01f, 2.0f);
            nt_widen(dy, dyd, n);
            ref_linear_backward(NULL, NULL, dyd, NULL, NULL, ref, (int)B, 1, (int)OUT);
            for (size_t o = 0; o < OUT; o++)
                ref1[o] = db0[o] + ref[o];
            clt_tensor *dyt = nt_tensor2(ctx, CLT_DTYPE_F32, B, OUT),
                       *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, OUT);
            tc_write(dyt, dy);

            tc_poison(dbt); /* beta = 0 must not read db */
            TC_OK(ctx, clt_op_bias_grad(dbt, dyt, 0.0f));
            tc_read(dbt, got);
            snprintf(what, sizeof what, "bias_grad beta=0 B=%zu OUT=%zu", B, OUT);
            nt_check_reduction(got, ref, OUT, what, r.seed);

            tc_write(dbt, db0);
            TC_OK(ctx, clt_op_bias_grad(dbt, dyt, 1.0f));
            tc_read(dbt, got);
            snprintf(what, sizeof what, "bias_grad beta=1 B=%zu OUT=%zu", B, OUT);
            nt_check_reduction(got, ref1, OUT, what, r.seed);

            clt_tensor_free(dyt);
            clt_tensor_free(dbt);
            free(dy);
            free(db0);
            free(got);
            free(dyd);
            free(ref);
            free(ref1);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Rows are the last dimension: a (4, 5, 17) dy sums over 20 rows. */
START_TEST(test_bias_grad_3d)
{
    const size_t dims[3] = {4, 5, 17}, n = 4 * 5 * 17;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *dy = NT_FLOATS(n), got[17];
    double *dyd = NT_DOUBLES(n), ref[17];
    tc_fill_nonzero(&r, dy, n, 0.01f, 2.0f);
    nt_widen(dy, dyd, n);
    ref_linear_backward(NULL, NULL, dyd, NULL, NULL, ref, 20, 1, 17);
    clt_tensor *dyt = nt_tensor(ctx, CLT_DTYPE_F32, 3, dims),
               *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, 17);
    tc_write(dyt, dy);
    tc_poison(dbt);
    TC_OK(ctx, clt_op_bias_grad(dbt, dyt, 0.0f));
    tc_read(dbt, got);
    nt_check_reduction(got, ref, 17, "bias_grad (4, 5, 17)", r.seed);
    clt_tensor_free(dyt);
    clt_tensor_free(dbt);
    free(dy);
    free(dyd);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The same bits on every run and for every local size the kernel can take. */
START_TEST(test_bias_grad_deterministic)
{
    static const size_t full[][2] = {{1000, 17}, {1000, 1000}, {17, 10}},
                        small[][2] = {{300, 17}, {300, 100}, {17, 10}};
    const size_t(*shapes)[2] = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < 3; si++) {
        size_t B = shapes[si][0], OUT = shapes[si][1], n = B * OUT;
        float *dy = NT_FLOATS(n), *first = NT_FLOATS(OUT), *got = NT_FLOATS(OUT);
        tc_fill_nonzero(&r, dy, n, 0.01f, 2.0f);
        clt_tensor *dyt = nt_tensor2(ctx, CLT_DTYPE_F32, B, OUT),
                   *dbt = nt_tensor1(ctx, CLT_DTYPE_F32, OUT);
        tc_write(dyt, dy);
        TC_OK(ctx, clt_op_bias_grad(dbt, dyt, 0.0f));
        tc_read(dbt, first);
        tc_poison(dbt);
        TC_OK(ctx, clt_op_bias_grad(dbt, dyt, 0.0f));
        tc_read(dbt, got);
        ck_assert_msg(nt_same_bits(first, got, OUT), "bias_grad differs between runs");
        /* the op left its arguments on the cached kernel: re-launch it with other local sizes */
        char opts[96];
        clt__opts_linear(opts, sizeof opts, CLT_DTYPE_F32, CLT_DTYPE_F32, CLT_DTYPE_F32);
        cl_kernel k = nt_kernel(ctx, "linear", opts, "linear_backward_bias");
        int tried = 0;
        for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
            tc_poison(dbt);
            if (!nt_launch_local(ctx, k, (OUT + CLT__BIAS_TILE - 1) / CLT__BIAS_TILE,
                                 nt_local_sizes[li]))
                continue;
            tried++;
            tc_read(dbt, got);
            ck_assert_msg(nt_same_bits(first, got, OUT),
                          "bias_grad B=%zu OUT=%zu differs with local size %zu", B, OUT,
                          nt_local_sizes[li]);
        }
        ck_assert_int_ge(tried, 4);
        clt_tensor_free(dyt);
        clt_tensor_free(dbt);
        free(dy);
        free(first);
        free(got);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_linear_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *y = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 10),
               *b10 = nt_tensor1(ctx, CLT_DTYPE_F32, 10), *b4 = nt_tensor1(ctx, CLT_DTYPE_F32, 4),
               *b40 = nt_tensor1(ctx, CLT_DTYPE_F32, 40), *bi = nt_tensor1(ctx, CLT_DTYPE_I32, 10),
               *yh = nt_tensor2(ctx, CLT_DTYPE_I32, 4, 10), /* 16-bit y is allowed; i32 is not */
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 10);
    ck_assert_int_eq(clt_op_bias_add(y, b4), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "bias_add"));
    ck_assert_int_eq(clt_op_bias_add(y, b40), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_bias_add(y, bi), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_bias_add(yh, b10), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_bias_add(y, other), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_bias_grad(b4, y, 0.0f), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "bias_grad"));
    ck_assert_int_eq(clt_op_bias_grad(bi, y, 0.0f), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_bias_grad(b10, yh, 0.0f), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_bias_grad(other, y, 0.0f), CLT_ERR_DEVICE_MISMATCH);
    TC_OK(ctx, clt_op_bias_add(y, b10));
    TC_OK(ctx, clt_op_bias_grad(b10, y, 1.0f));
    clt_tensor_free(y);
    clt_tensor_free(b10);
    clt_tensor_free(b4);
    clt_tensor_free(b40);
    clt_tensor_free(bi);
    clt_tensor_free(yh);
    clt_tensor_free(other);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linear_ops");
    TCase *tc = tcase_create("linear_ops");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_bias_add);
    tcase_add_test(tc, test_bias_grad);
    tcase_add_test(tc, test_bias_grad_3d);
    tcase_add_test(tc, test_bias_grad_deterministic);
    tcase_add_test(tc, test_linear_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
