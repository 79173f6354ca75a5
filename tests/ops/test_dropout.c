/* Tests of inverted dropout (cl/dropout.cl): the device mask is the host Philox of rng.h bit for
 * bit (keep element i when clt_rng_uniform(seed, stream, i) >= p), kept values are scaled by
 * 1 / (1 - p) (checked against float64 with the fp32 tolerance, and bit for bit against the same
 * fp32 product on the host), backward applies the same mask, p = 0 is the identity, the kept
 * fraction is 1 - p, in place works, f16/bf16 storage, and the argument checks. Sizes 1, 17,
 * 1000, 65537 (not multiples of the four elements one work-item handles), through views;
 * 4099 for 65537 under CLTRAIN_TEST_SMALL (tests/small.h). */
#include "ops/nn_testutil.h"
#include "small.h"

/* Runs forward (x -> y) or backward (dy -> dx) and checks the result against the host mask. */
static void check_dropout(clt_ctx *ctx, tc_rng *r, size_t n, float p, uint64_t seed,
                          uint64_t stream, bool backward)
{
    char what[96];
    float *x = NT_FLOATS(n), *got = NT_FLOATS(n);
    double *ref = NT_DOUBLES(n);
    tc_fill_nonzero(r, x, n, 0.01f, 4.0f);
    const float scale = 1.0f / (1.0f - p);
    clt_tensor *xt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *yt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
    tc_write(xt, x);
    tc_poison(yt);
    if (backward)
        TC_OK(ctx, clt_op_dropout_backward(yt, xt, p, seed, stream));
    else
        TC_OK(ctx, clt_op_dropout_forward(yt, xt, p, seed, stream));
    tc_read(yt, got);
    for (size_t i = 0; i < n; i++) {
        bool keep = clt_rng_uniform(seed, stream, i) >= p;
        ref[i] = keep ? (double)x[i] / (1.0 - (double)p) : 0.0;
        float want = keep ? scale * x[i] : 0.0f;
        ck_assert_msg(nt_same_bits(&got[i], &want, 1),
                      "dropout %s n=%zu p=%g: element %zu is %.9g, expected %.9g (%s)",
                      backward ? "backward" : "forward", n, (double)p, i, (double)got[i],
                      (double)want, keep ? "kept" : "dropped");
    }
    snprintf(what, sizeof what, "dropout %s n=%zu p=%g", backward ? "backward" : "forward", n,
             (double)p);
    tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r->seed);
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    free(x);
    free(got);
    free(ref);
}

START_TEST(test_dropout_mask)
{
    static const size_t full[] = {1, 17, 1000, 65537}, small[] = {1, 17, 1000, 4099};
    const size_t *sizes = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < 4; si++) {
        for (int pi = 0; pi < 2; pi++) {
            /* seeds and streams with high bits set: both 64-bit halves reach the kernel */
            uint64_t seed = tc_u64(&r), stream = clt_rng_stream(CLT_RNG_DROPOUT, tc_u64(&r));
            float p = pi ? 0.5f : 0.1f;
            check_dropout(ctx, &r, sizes[si], p, seed, stream, false);
            check_dropout(ctx, &r, sizes[si], p, seed, stream, true);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* p = 0 returns x bit for bit; the kept fraction is 1 - p within 5 standard deviations; other
 * seeds and streams give other masks; the forward and backward masks agree in place. */
START_TEST(test_dropout_properties)
{
    const size_t n = tc_size(65537, 4099); /* the rate's 5-sigma bound follows n */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *x = NT_FLOATS(n), *y = NT_FLOATS(n), *y2 = NT_FLOATS(n);
    tc_fill_nonzero(&r, x, n, 0.01f, 4.0f);
    clt_tensor *xt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *yt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
    tc_write(xt, x);
    const uint64_t seed = tc_u64(&r), stream = tc_u64(&r);

    tc_poison(yt);
    TC_OK(ctx, clt_op_dropout_forward(yt, xt, 0.0f, seed, stream));
    tc_read(yt, y);
    ck_assert_msg(nt_same_bits(x, y, n), "p = 0 is not the identity");
    TC_OK(ctx, clt_op_dropout_backward(yt, xt, 0.0f, seed, stream));
    tc_read(yt, y);
    ck_assert_msg(nt_same_bits(x, y, n), "p = 0 backward is not the identity");

    static const float ps[] = {0.3f, 0.9f};
    for (int pi = 0; pi < 2; pi++) {
        float p = ps[pi];
        TC_OK(ctx, clt_op_dropout_forward(yt, xt, p, seed, stream));
        tc_read(yt, y);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            kept += y[i] != 0.0f;
        double rate = (double)kept / n, sd = sqrt(p * (1.0 - p) / n);
        ck_assert_msg(fabs(rate - (1.0 - p)) <= 5.0 * sd, "p=%g: kept %.4f, expected %.4f +- %.4f",
                      (double)p, rate, 1.0 - p, 5.0 * sd);
    }

    /* another seed, another stream: different masks */
    TC_OK(ctx, clt_op_dropout_forward(yt, xt, 0.5f, seed, stream));
    tc_read(yt, y);
    for (int v = 0; v < 2; v++) {
        TC_OK(ctx, clt_op_dropout_forward(yt, xt, 0.5f, seed + (v == 0), stream + (v == 1)));
        tc_read(yt, y2);
        size_t same = 0;
        for (size_t i = 0; i < n; i++)
            same += (y[i] != 0.0f) == (y2[i] != 0.0f);
        ck_assert_msg(same < n * 0.55 && same > n * 0.45, "%s change: %zu of %zu agree",
                      v == 0 ? "seed" : "stream", same, n);
    }

    /* in place, forward then backward through the same mask: x * keep * scale^2 */
    TC_OK(ctx, clt_op_dropout_forward(xt, xt, 0.5f, seed, stream));
    TC_OK(ctx, clt_op_dropout_backward(xt, xt, 0.5f, seed, stream));
    tc_read(xt, y2);
    for (size_t i = 0; i < n; i++) {
        float want = y[i] != 0.0f ? 2.0f * (2.0f * x[i]) : 0.0f;
        ck_assert_msg(y2[i] == want, "in place: element %zu", i);
    }
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    free(x);
    free(y);
    free(y2);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* f16 and bf16 storage: the kernel computes scale * x in fp32 and rounds once to nearest even,
 * as the host conversions do, so the results are bit-identical. */
START_TEST(test_dropout_half_storage)
{
    const size_t n = 1001;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    const uint64_t seed = tc_u64(&r), stream = tc_u64(&r);
    float *x = NT_FLOATS(n);
    uint16_t *xh = nt_alloc(n, 2), *got = nt_alloc(n, 2);
    tc_fill_nonzero(&r, x, n, 0.01f, 4.0f);
    for (int di = 0; di < 2; di++) {
        clt_dtype d = di ? CLT_DTYPE_BF16 : CLT_DTYPE_F16;
        for (size_t i = 0; i < n; i++)
            xh[i] = di ? clt_f32_to_bf16(x[i]) : clt_f32_to_f16(x[i]);
        clt_tensor *xt = nt_tensor1(ctx, d, n), *yt = nt_tensor1(ctx, d, n);
        tc_write(xt, xh);
        tc_poison(yt);
        TC_OK(ctx, clt_op_dropout_forward(yt, xt, p, seed, stream));
        tc_read(yt, got);
        for (size_t i = 0; i < n; i++) {
            float v = di ? clt_bf16_to_f32(xh[i]) : clt_f16_to_f32(xh[i]);
            float w = clt_rng_uniform(seed, stream, i) >= p ? scale * v : 0.0f;
            uint16_t want = di ? clt_f32_to_bf16(w) : clt_f32_to_f16(w);
            ck_assert_msg(got[i] == want, "%s element %zu: 0x%04x, expected 0x%04x",
                          clt_dtype_name(d), i, got[i], want);
        }
        clt_tensor_free(xt);
        clt_tensor_free(yt);
    }
    free(x);
    free(xh);
    free(got);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_dropout_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *a = nt_tensor1(ctx, CLT_DTYPE_F32, 10), *b = nt_tensor1(ctx, CLT_DTYPE_F32, 11),
               *i32 = nt_tensor1(ctx, CLT_DTYPE_I32, 10),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 10);
    ck_assert_int_eq(clt_op_dropout_forward(a, a, 1.0f, 1, 2), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "dropout_forward: p = 1"));
    ck_assert_int_eq(clt_op_dropout_forward(a, a, -0.1f, 1, 2), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_dropout_backward(a, a, NAN, 1, 2), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_dropout_forward(a, b, 0.5f, 1, 2), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_dropout_forward(i32, i32, 0.5f, 1, 2), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_dropout_backward(a, other, 0.5f, 1, 2), CLT_ERR_DEVICE_MISMATCH);
    clt_tensor_free(a);
    clt_tensor_free(b);
    clt_tensor_free(i32);
    clt_tensor_free(other);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("dropout");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_dropout_mask);
    tcase_add_test(tc, test_dropout_properties);
    tcase_add_test(tc, test_dropout_half_storage);
    tcase_add_test(tc, test_dropout_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
