/* Tests of clt_op_u8_to_f32 (cl/input.cl): y = x * scale[f] + shift[f] against float64, for
 * F in {1, 17, 784} and B in {1, 17, 1000} (B 300 for 1000 under CLTRAIN_TEST_SMALL,
 * tests/small.h), a (B, 28, 28) input, views, and the shape checks.
 * Tolerance: fp32 atol 1e-5, rtol 1e-4 (one multiply and one add, possibly fused). */
#include "ops/nn_testutil.h"
#include "small.h"

START_TEST(test_u8_to_f32)
{
    static const size_t Fs[] = {1, 17, 784}, Bs_full[] = {1, 17, 1000}, Bs_small[] = {1, 17, 300};
    const size_t *Bs = TC_SMALL_OR(Bs_full, Bs_small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t fi = 0; fi < 3; fi++) {
        for (size_t bi = 0; bi < 3; bi++) {
            size_t F = Fs[fi], B = Bs[bi], n = B * F;
            char what[64];
            uint8_t *x = nt_alloc(n, 1);
            float *scale = NT_FLOATS(F), *shift = NT_FLOATS(F), *got = NT_FLOATS(n);
            double *ref = NT_DOUBLES(n);
            tc_fill_bytes(&r, x, n);
            tc_fill_nonzero(&r, scale, F, 0.001f, 0.05f);
            tc_fill_nonzero(&r, shift, F, 0.01f, 3.0f);
            for (size_t i = 0; i < n; i++)
                ref[i] = x[i] * (double)scale[i % F] + shift[i % F];
            const size_t img[3] = {B, 28, 28};
            clt_tensor *xt = F == 784 ? nt_tensor(ctx, CLT_DTYPE_U8, 3, img)
                                      : nt_tensor2(ctx, CLT_DTYPE_U8, B, F),
                       *yt = nt_tensor2(ctx, CLT_DTYPE_F32, B, F),
                       *st = nt_tensor1(ctx, CLT_DTYPE_F32, F),
                       *ht = nt_tensor1(ctx, CLT_DTYPE_F32, F);
            tc_write(xt, x);
            tc_write(st, scale);
            tc_write(ht, shift);
            tc_poison(yt);
            TC_OK(ctx, clt_op_u8_to_f32(yt, xt, st, ht));
            tc_read(yt, got);
            snprintf(what, sizeof what, "u8_to_f32 B=%zu F=%zu", B, F);
            tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r.seed);
            clt_tensor_free(xt);
            clt_tensor_free(yt);
            clt_tensor_free(st);
            clt_tensor_free(ht);
            free(x);
            free(scale);
            free(shift);
            free(got);
            free(ref);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_u8_to_f32_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *x = nt_tensor2(ctx, CLT_DTYPE_U8, 4, 10),
               *y = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 10),
               *y39 = nt_tensor1(ctx, CLT_DTYPE_F32, 39), *s10 = nt_tensor1(ctx, CLT_DTYPE_F32, 10),
               *s3 = nt_tensor1(ctx, CLT_DTYPE_F32, 3), *si = nt_tensor1(ctx, CLT_DTYPE_I32, 10),
               *xf = nt_tensor2(ctx, CLT_DTYPE_F32, 4, 10),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 10);
    ck_assert_int_eq(clt_op_u8_to_f32(y39, x, s10, s10), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_u8_to_f32(y, x, s3, s3), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "u8_to_f32"));
    ck_assert_int_eq(clt_op_u8_to_f32(y, x, s10, s3), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_u8_to_f32(y, x, si, si), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_u8_to_f32(y, xf, s10, s10), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_u8_to_f32(x, x, s10, s10), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_u8_to_f32(y, x, s10, other), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_u8_to_f32(y, x, other, other), CLT_ERR_DEVICE_MISMATCH);
    clt_tensor *e[] = {x, y, y39, s10, s3, si, xf, other};
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        clt_tensor_free(e[i]);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("input");
    TCase *tc = tcase_create("input");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_u8_to_f32);
    tcase_add_test(tc, test_u8_to_f32_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
