/* Tests of clt_op_act_forward/backward (cl/activation.cl) against the float64 references of
 * tests/ref/ref_nn.c: every activation (one line of `acts` each) at sizes 1, 17, 1000, 65537,
 * in place, through views, at extreme inputs, with f16/bf16 storage, and the argument checks.
 * Tolerances: fp32 atol 1e-5, rtol 1e-4. tanh, gelu and sigmoid use the device's exp/tanh
 * (OpenCL allows 3-5 ulp, about 6e-7 relative) and the backward of tanh/sigmoid is computed from
 * the fp32 forward output y, so 1 - y^2 carries y's absolute error (a few 1e-7) times |dy| <= 2:
 * all far inside atol, so the default tolerances hold without exception. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"

/* Every activation: the op, its reference, its name, its parameter alpha, and what its backward
 * reads: 'x' the input, 'y' the output, 'b' either (the in-place test then gives it only y). */
static const struct {
    clt_act a;
    ref_act ref;
    const char *name;
    float alpha;
    char saves;
} acts[] = {
    {CLT_ACT_RELU, REF_ACT_RELU, "relu", 0.0f, 'b'},
    {CLT_ACT_GELU, REF_ACT_GELU, "gelu", 0.0f, 'x'},
    {CLT_ACT_TANH, REF_ACT_TANH, "tanh", 0.0f, 'y'},
    {CLT_ACT_SIGMOID, REF_ACT_SIGMOID, "sigmoid", 0.0f, 'y'},
    {CLT_ACT_SILU, REF_ACT_SILU, "silu", 0.0f, 'x'},
    {CLT_ACT_LEAKYRELU, REF_ACT_LEAKYRELU, "leakyrelu", 0.2f, 'b'},
};
#define NACTS ((int)(sizeof acts / sizeof *acts))

/* Forward and backward of activation ai on x (n), checked against the reference. In place
 * (y = x, dx = dy) when in_place; relu's backward then uses y (x is gone). */
static void check_act(clt_ctx *ctx, tc_rng *r, int ai, const float *x, size_t n, bool in_place)
{
    char what[96];
    clt_act a = acts[ai].a;
    float alpha = acts[ai].alpha;
    float *got = NT_FLOATS(n), *y_host = NT_FLOATS(n), *dy = NT_FLOATS(n);
    double *xd = NT_DOUBLES(n), *ref = NT_DOUBLES(n), *dyd = NT_DOUBLES(n);
    nt_widen(x, xd, n);
    tc_fill_nonzero(r, dy, n, 0.05f, 2.0f);
    nt_widen(dy, dyd, n);

    clt_tensor *xt = nt_tensor1(ctx, CLT_DTYPE_F32, n), *yt = xt, *dyt, *dxt;
    tc_write(xt, x);
    if (!in_place) {
        yt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
        tc_poison(yt);
    }
    TC_OK(ctx, clt_op_act_forward_alpha(a, alpha, yt, xt));
    tc_read(yt, y_host);
    ref_act_forward_alpha(acts[ai].ref, alpha, xd, ref, n);
    snprintf(what, sizeof what, "%s forward n=%zu%s", acts[ai].name, n,
             in_place ? " in place" : "");
    tc_check_close(y_host, ref, n, NT_ATOL, NT_RTOL, what, r->seed);

    /* backward, with x when the forward kept it */
    if (in_place) {
        /* x was overwritten: restore a copy for those that need it (gelu, silu) */
        clt_tensor *x2 = nt_tensor1(ctx, CLT_DTYPE_F32, n);
        tc_write(x2, x);
        dyt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
        tc_write(dyt, dy);
        dxt = dyt;
        const clt_tensor *xs = acts[ai].saves == 'x' ? x2 : NULL;
        TC_OK(ctx, clt_op_act_backward_alpha(a, alpha, dxt, dyt, xs, yt));
        clt_tensor_free(x2);
    } else {
        dyt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
        tc_write(dyt, dy);
        dxt = nt_tensor1(ctx, CLT_DTYPE_F32, n);
        tc_poison(dxt);
        TC_OK(ctx, clt_op_act_backward_alpha(a, alpha, dxt, dyt, xt, yt));
    }
    tc_read(dxt, got);
    ref_act_backward_alpha(acts[ai].ref, alpha, xd, dyd, ref, n);
    snprintf(what, sizeof what, "%s backward n=%zu%s", acts[ai].name, n,
             in_place ? " in place" : "");
    tc_check_close(got, ref, n, NT_ATOL, NT_RTOL, what, r->seed);

    if (!in_place) clt_tensor_free(yt);
    if (dxt != dyt) clt_tensor_free(dxt);
    clt_tensor_free(dyt);
    clt_tensor_free(xt);
    free(got);
    free(y_host);
    free(dy);
    free(xd);
    free(ref);
    free(dyd);
}

START_TEST(test_act_sizes)
{
    static const size_t sizes[] = {1, 17, 1000, 65537};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        float *x = NT_FLOATS(n);
        tc_fill_nonzero(&r, x, n, 0.01f, 6.0f);
        for (int ai = 0; ai < NACTS; ai++)
            check_act(ctx, &r, ai, x, n, false);
        free(x);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_act_in_place)
{
    const size_t n = 1000;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *x = NT_FLOATS(n);
    tc_fill_nonzero(&r, x, n, 0.01f, 6.0f);
    for (int ai = 0; ai < NACTS; ai++)
        check_act(ctx, &r, ai, x, n, true);
    free(x);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Saturation: huge, tiny and overflowing inputs give finite, correct values (no inf - inf,
 * 0 * inf or exp overflow leaking out as NaN). */
START_TEST(test_act_extremes)
{
    static const float xs[] = {0.5f,  -0.5f,  9.99f,   -9.99f,   10.01f, -10.01f,
                               20.0f, -20.0f, 100.0f,  -100.0f,  1e10f,  -1e10f,
                               1e30f, -1e30f, 3.4e38f, -3.4e38f, 1e-30f, -1e-30f};
    const size_t n = sizeof xs / sizeof *xs;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (int ai = 0; ai < NACTS; ai++)
        check_act(ctx, &r, ai, xs, n, false);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* f16 and bf16 storage: the kernels load, compute in fp32 and round once on store. The reference
 * starts from the rounded inputs; the tolerance is the output rounding: half an ulp relative
 * (f16 2^-11, bf16 2^-8) plus an atol for values near 0 (f16 has subnormals below 6e-5). */
START_TEST(test_act_half_storage)
{
    const size_t n = 1000;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (int di = 0; di < 2; di++) {
        clt_dtype d = di == 0 ? CLT_DTYPE_F16 : CLT_DTYPE_BF16;
        double rtol = di == 0 ? 1e-3 : 8e-3, atol = di == 0 ? 1e-4 : 1e-3;
        float *x = NT_FLOATS(n), *dy = NT_FLOATS(n), *got = NT_FLOATS(n);
        double *xd = NT_DOUBLES(n), *dyd = NT_DOUBLES(n), *ref = NT_DOUBLES(n);
        uint16_t *xh = nt_alloc(n, 2), *dyh = nt_alloc(n, 2), *out = nt_alloc(n, 2);
        tc_fill_nonzero(&r, x, n, 0.01f, 5.0f);
        tc_fill_nonzero(&r, dy, n, 0.05f, 2.0f);
        for (size_t i = 0; i < n; i++) {
            xh[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(x[i]) : clt_f32_to_bf16(x[i]);
            dyh[i] = d == CLT_DTYPE_F16 ? clt_f32_to_f16(dy[i]) : clt_f32_to_bf16(dy[i]);
            xd[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(xh[i]) : clt_bf16_to_f32(xh[i]);
            dyd[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(dyh[i]) : clt_bf16_to_f32(dyh[i]);
        }
        clt_tensor *xt = nt_tensor1(ctx, d, n), *yt = nt_tensor1(ctx, d, n),
                   *dyt = nt_tensor1(ctx, d, n), *dxt = nt_tensor1(ctx, d, n);
        tc_write(xt, xh);
        tc_write(dyt, dyh);
        /* those whose backward reads x (tanh/sigmoid's y would add y's rounding) */
        for (int ai = 0; ai < NACTS; ai++) {
            char what[64];
            if (acts[ai].saves == 'y') continue;
            tc_poison(yt);
            tc_poison(dxt);
            TC_OK(ctx, clt_op_act_forward_alpha(acts[ai].a, acts[ai].alpha, yt, xt));
            TC_OK(ctx, clt_op_act_backward_alpha(acts[ai].a, acts[ai].alpha, dxt, dyt, xt, NULL));
            for (int pass = 0; pass < 2; pass++) {
                tc_read(pass == 0 ? yt : dxt, out);
                for (size_t i = 0; i < n; i++)
                    got[i] = d == CLT_DTYPE_F16 ? clt_f16_to_f32(out[i]) : clt_bf16_to_f32(out[i]);
                if (pass == 0)
                    ref_act_forward_alpha(acts[ai].ref, acts[ai].alpha, xd, ref, n);
                else
                    ref_act_backward_alpha(acts[ai].ref, acts[ai].alpha, xd, dyd, ref, n);
                snprintf(what, sizeof what, "%s %s %s", clt_dtype_name(d), acts[ai].name,
                         pass == 0 ? "forward" : "backward");
                tc_check_close(got, ref, n, atol, rtol, what, r.seed);
            }
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
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_act_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *a = nt_tensor1(ctx, CLT_DTYPE_F32, 10), *b = nt_tensor1(ctx, CLT_DTYPE_F32, 11),
               *i32 = nt_tensor1(ctx, CLT_DTYPE_I32, 10), *f16 = nt_tensor1(ctx, CLT_DTYPE_F16, 10),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 10);
    ck_assert_int_eq(clt_op_act_forward(CLT_ACT_RELU, a, b), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "act_forward"));
    ck_assert_int_eq(clt_op_act_forward(CLT_ACT_TANH, i32, i32), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_act_forward(CLT_ACT_TANH, a, f16), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_act_forward((clt_act)7, a, a), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_act_forward(CLT_ACT_GELU, a, other), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_GELU, a, a, NULL, a), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "gelu needs the forward input x"));
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_TANH, a, a, a, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_SIGMOID, a, a, NULL, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_RELU, a, a, NULL, NULL), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_RELU, a, b, a, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_RELU, a, a, b, NULL), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_RELU, a, a, other, NULL), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_act_backward(CLT_ACT_SILU, a, a, NULL, a), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "silu needs the forward input x"));
    /* a negative slope flips y's sign: only x gives the mask */
    ck_assert_int_eq(clt_op_act_backward_alpha(CLT_ACT_LEAKYRELU, -0.5f, a, a, NULL, a),
                     CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "leakyrelu needs the forward input x"));
    ck_assert_int_eq(clt_op_act_forward_alpha(CLT_ACT_LEAKYRELU, NAN, a, a), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "leakyrelu slope must be finite"));
    ck_assert_int_eq(clt_op_act_forward_alpha(CLT_ACT_RELU, NAN, a, a), CLT_OK); /* ignored */
    clt_tensor_free(a);
    clt_tensor_free(b);
    clt_tensor_free(i32);
    clt_tensor_free(f16);
    clt_tensor_free(other);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

/* cl/act_fn.cl numbers the activations as clt_act does (its kernels and the GEMM epilogue's
 * switch take the host's code); and which backward can work from the output alone, the rule a
 * linear layer's fusion asks (src/nn/layers/linear.c). Pure host code: no device. */
START_TEST(test_act_codes_and_saved)
{
    static const struct {
        const char *define;
        clt_act act;
        bool reads_y, reads_y_negative_slope;
    } rows[] = {
        {"CLT_ACT_RELU", CLT_ACT_RELU, true, true},
        {"CLT_ACT_GELU", CLT_ACT_GELU, false, false},
        {"CLT_ACT_TANH", CLT_ACT_TANH, true, true},
        {"CLT_ACT_SIGMOID", CLT_ACT_SIGMOID, true, true},
        {"CLT_ACT_SILU", CLT_ACT_SILU, false, false},
        {"CLT_ACT_LEAKYRELU", CLT_ACT_LEAKYRELU, true, false},
    };
    _Static_assert(sizeof rows / sizeof *rows == CLT_ACT__COUNT, "a row per activation");
    size_t len = 0;
    const char *src = clt_program_source("act_fn", &len);
    ck_assert_ptr_nonnull(src);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char want[64];
        snprintf(want, sizeof want, "#define %s %d\n", rows[i].define, (int)rows[i].act);
        ck_assert_msg(strstr(src, want), "cl/act_fn.cl lacks \"%s\"", want);
        ck_assert_int_eq(clt_op_act_backward_reads_y(rows[i].act, 0.01f), rows[i].reads_y);
        ck_assert_int_eq(clt_op_act_backward_reads_y(rows[i].act, -0.5f),
                         rows[i].reads_y_negative_slope);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("activation");
    TCase *tc = tcase_create("activation");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_act_sizes);
    tcase_add_test(tc, test_act_in_place);
    tcase_add_test(tc, test_act_extremes);
    tcase_add_test(tc, test_act_half_storage);
    tcase_add_test(tc, test_act_errors);
    tcase_add_test(tc, test_act_codes_and_saved);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
