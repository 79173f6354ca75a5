/* Tests of the batch augmentation (cl/augment.cl): flip only, shift only, cutout only and all
 * three, for several shifts, cutout sizes, image sizes and channels 1 and 3, against a host
 * reference drawing the same Philox numbers (rng.h); outputs poisoned, equality exact (data
 * movement). Same key -> the same batch, another stream or position -> another; all parts off
 * is the identity; the flip rate is about 1/2; and the argument checks. */
#include "ops/nn_testutil.h"

/* The op's definition in plain loops (ops_internal.h, clt_op_augment). */
static void ref_augment(float *y, const float *x, size_t B, const struct clt_augment_geom *g,
                        uint64_t seed, uint64_t stream, uint64_t first)
{
    const long H = (long)g->H, W = (long)g->W, S = g->cutout, N = g->shift;
    for (size_t b = 0; b < B; b++) {
        uint32_t u[5];
        for (int k = 0; k < 5; k++) u[k] = clt_rng_u32(seed, stream, (first + b) * 8 + (uint64_t)k);
        bool flip = g->flip && (u[0] >> 31);
        long dy = N ? (long)(u[1] % (uint32_t)(2 * N + 1)) - N : 0;
        long dx = N ? (long)(u[2] % (uint32_t)(2 * N + 1)) - N : 0;
        long top = (long)(u[3] % (uint32_t)H) - S / 2, left = (long)(u[4] % (uint32_t)W) - S / 2;
        for (size_t c = 0; c < g->C; c++) {
            const float *xs = x + (b * g->C + c) * g->H * g->W;
            float *ys = y + (b * g->C + c) * g->H * g->W;
            /* the three steps one after another, as described */
            float *f1 = NT_FLOATS(g->H * g->W), *f2 = NT_FLOATS(g->H * g->W);
            for (long i = 0; i < H; i++)
                for (long j = 0; j < W; j++) f1[i * W + j] = xs[i * W + (flip ? W - 1 - j : j)];
            for (long i = 0; i < H; i++)
                for (long j = 0; j < W; j++) {
                    long si = i - dy, sj = j - dx;
                    f2[i * W + j] = si >= 0 && si < H && sj >= 0 && sj < W ? f1[si * W + sj] : 0.0f;
                }
            for (long i = 0; i < H; i++)
                for (long j = 0; j < W; j++) {
                    bool cut = S > 0 && i >= top && i < top + S && j >= left && j < left + S;
                    ys[i * W + j] = cut ? 0.0f : f2[i * W + j];
                }
            free(f1);
            free(f2);
        }
    }
}

/* Runs the op on a random batch (through views) and compares it with the reference. */
static void check_augment(clt_ctx *ctx, tc_rng *r, size_t B, struct clt_augment_geom g)
{
    size_t n = B * g.C * g.H * g.W;
    float *x = NT_FLOATS(n), *got = NT_FLOATS(n), *want = NT_FLOATS(n);
    tc_fill_nonzero(r, x, n, 0.01f, 4.0f);
    uint64_t seed = tc_u64(r), stream = clt_rng_stream(CLT_RNG_DATA, tc_u32(r)),
             first = tc_u32(r) % 100000;
    clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, B, n / B),
               *yt = nt_tensor2(ctx, CLT_DTYPE_F32, B, n / B);
    tc_write(xt, x);
    tc_poison(yt);
    TC_OK(ctx, clt_op_augment(yt, xt, &g, seed, stream, first));
    tc_read(yt, got);
    ref_augment(want, x, B, &g, seed, stream, first);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(nt_same_bits(&got[i], &want[i], 1),
                      "augment B=%zu (%zu, %zu, %zu) flip %d shift %d cutout %d: element %zu is "
                      "%.9g, expected %.9g; seed %llu",
                      B, g.C, g.H, g.W, g.flip, g.shift, g.cutout, i, (double)got[i],
                      (double)want[i], (unsigned long long)r->seed);
    clt_tensor_free(xt);
    clt_tensor_free(yt);
    free(x);
    free(got);
    free(want);
}

START_TEST(test_augment_reference)
{
    static const size_t shapes[][3] = {{1, 5, 7}, {3, 8, 8}, {1, 28, 28}, {3, 17, 4}, {1, 1, 1}};
    /* flip, shift, cutout */
    static const int parts[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 5, 0}, {0, 0, 1},
                                   {0, 0, 3}, {0, 0, 8}, {1, 2, 3}, {1, 4, 16}, {1, 30, 2}};
    static const size_t batches[] = {1, 13};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (size_t pi = 0; pi < sizeof parts / sizeof *parts; pi++)
            for (size_t bi = 0; bi < 2; bi++) {
                struct clt_augment_geom g = {.C = shapes[si][0], .H = shapes[si][1],
                                             .W = shapes[si][2], .flip = parts[pi][0],
                                             .shift = parts[pi][1], .cutout = parts[pi][2]};
                check_augment(ctx, &r, batches[bi], g);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Identity with every part off; one key gives one batch, another step (stream) or position
 * another; about half the samples are flipped. */
START_TEST(test_augment_properties)
{
    const size_t B = 64, C = 3, H = 9, W = 11, n = B * C * H * W;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float *x = NT_FLOATS(n), *y = NT_FLOATS(n), *y2 = NT_FLOATS(n);
    tc_fill_nonzero(&r, x, n, 0.01f, 4.0f);
    clt_tensor *xt = nt_tensor2(ctx, CLT_DTYPE_F32, B, n / B),
               *yt = nt_tensor2(ctx, CLT_DTYPE_F32, B, n / B);
    tc_write(xt, x);
    const uint64_t seed = tc_u64(&r), stream = clt_rng_stream(CLT_RNG_DATA, 3);

    struct clt_augment_geom off = {.C = C, .H = H, .W = W};
    tc_poison(yt);
    TC_OK(ctx, clt_op_augment(yt, xt, &off, seed, stream, 0));
    tc_read(yt, y);
    ck_assert_msg(nt_same_bits(x, y, n), "no flip, shift 0, cutout 0 is not the identity");

    struct clt_augment_geom all = {.C = C, .H = H, .W = W, .flip = 1, .shift = 2, .cutout = 3};
    TC_OK(ctx, clt_op_augment(yt, xt, &all, seed, stream, 0));
    tc_read(yt, y);
    tc_poison(yt);
    TC_OK(ctx, clt_op_augment(yt, xt, &all, seed, stream, 0));
    tc_read(yt, y2);
    ck_assert_msg(nt_same_bits(y, y2, n), "the same key gave another batch");
    for (int v = 0; v < 3; v++) {
        TC_OK(ctx, clt_op_augment(yt, xt, &all, seed + (v == 0), stream + (v == 1), v == 2));
        tc_read(yt, y2);
        ck_assert_msg(!nt_same_bits(y, y2, n), "another %s gave the same batch",
                      v == 0 ? "seed" : v == 1 ? "step" : "position");
    }

    /* flip only: a sample is either itself or its mirror; count the mirrors */
    const size_t many = 2000, m = many * W;
    float *a = NT_FLOATS(m), *fa = NT_FLOATS(m);
    tc_fill_nonzero(&r, a, m, 0.01f, 4.0f);
    clt_tensor *at = nt_tensor2(ctx, CLT_DTYPE_F32, many, W),
               *ft = nt_tensor2(ctx, CLT_DTYPE_F32, many, W);
    tc_write(at, a);
    struct clt_augment_geom flip = {.C = 1, .H = 1, .W = W, .flip = 1};
    TC_OK(ctx, clt_op_augment(ft, at, &flip, seed, stream, 0));
    tc_read(ft, fa);
    size_t flipped = 0;
    for (size_t b = 0; b < many; b++) {
        bool same = true, mirror = true;
        for (size_t j = 0; j < W; j++) {
            same = same && fa[b * W + j] == a[b * W + j];
            mirror = mirror && fa[b * W + j] == a[b * W + W - 1 - j];
        }
        ck_assert_msg(same || mirror, "sample %zu is neither itself nor its mirror", b);
        flipped += mirror;
    }
    double rate = (double)flipped / many, sd = sqrt(0.25 / many);
    ck_assert_msg(fabs(rate - 0.5) <= 5 * sd, "flip rate %.4f, expected 0.5 +- %.4f", rate, 5 * sd);

    clt_tensor_free(xt);
    clt_tensor_free(yt);
    clt_tensor_free(at);
    clt_tensor_free(ft);
    free(x);
    free(y);
    free(y2);
    free(a);
    free(fa);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_augment_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    clt_tensor *a = nt_tensor1(ctx, CLT_DTYPE_F32, 12), *b = nt_tensor1(ctx, CLT_DTYPE_F32, 11),
               *h = nt_tensor1(ctx, CLT_DTYPE_F16, 12),
               *other = nt_tensor1(ctx2, CLT_DTYPE_F32, 12);
    clt_tensor *a2 = nt_tensor1(ctx, CLT_DTYPE_F32, 12);
    struct clt_augment_geom g = {.C = 1, .H = 2, .W = 3, .flip = 1, .shift = 1};
    ck_assert_int_eq(clt_op_augment(a2, a, &g, 1, 2, 0), CLT_OK);
    ck_assert_int_eq(clt_op_augment(a2, b, &g, 1, 2, 0), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_augment(h, h, &g, 1, 2, 0), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_augment(a2, other, &g, 1, 2, 0), CLT_ERR_DEVICE_MISMATCH);
    struct clt_augment_geom bad = g;
    bad.shift = -1;
    ck_assert_int_eq(clt_op_augment(a2, a, &bad, 1, 2, 0), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "augment: flip 1, shift -1"));
    bad = g;
    bad.W = 5; /* 12 is not a whole number of (1, 2, 5) images */
    ck_assert_int_eq(clt_op_augment(a2, a, &bad, 1, 2, 0), CLT_ERR_SHAPE);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "(1, 2, 5) images"));
    bad = g;
    bad.H = 0;
    ck_assert_int_eq(clt_op_augment(a2, a, &bad, 1, 2, 0), CLT_ERR_INVALID_ARG);
    TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_SETUP));
    clt_tensor_free(a);
    clt_tensor_free(a2);
    clt_tensor_free(b);
    clt_tensor_free(h);
    clt_tensor_free(other);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("augment");
    TCase *tc = tcase_create("augment");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_augment_reference);
    tcase_add_test(tc, test_augment_properties);
    tcase_add_test(tc, test_augment_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
