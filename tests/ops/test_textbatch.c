/* Tests of the text windows (cl/textbatch.cl, src/ops/textbatch.c) and the text sampler over
 * them (src/data/text_sampler.c): the training windows start where a host reference of the
 * Philox generator says (seed and step with both 64-bit halves set), for token ids stored in u8,
 * u16 and i32, T from 1 to above a work-group; inputs and targets are the window shifted by one;
 * a step's windows do not depend on the steps before it (resume); the evaluation windows are
 * fixed, spread evenly and the same for any seed; a split shorter than T + 1 is refused naming
 * it; the vocabulary's size picks the token dtype on the device. Outputs are poisoned first. */
#include "ops/nn_testutil.h"
#include "small.h"

#include "cltrain/text.h"
#include "ops/ops_internal.h"

/* The host reference of a training window's start (cltrain/text.h). */
static size_t ref_start(uint64_t seed, uint64_t step, size_t w, size_t count)
{
    const uint64_t stream = clt_rng_stream(CLT_RNG_TEXT, step);
    const uint64_t r = (uint64_t)clt_rng_u32(seed, stream, 2 * w) |
                       (uint64_t)clt_rng_u32(seed, stream, 2 * w + 1) << 32;
    return (size_t)(r % count);
}

/* The host reference of evaluation window j of J. */
static size_t ref_even(size_t j, size_t J, size_t count)
{
    return J > 1 ? (size_t)((uint64_t)j * (count - 1) / (J - 1)) : 0;
}

/* Checks x, y (B, T), read back, against the windows at starts[b] of ids. */
static void check_windows(const int32_t *x, const int32_t *y, const int32_t *ids,
                          const size_t *starts, size_t B, size_t T, const char *what)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const size_t i = b * T + t, o = starts[b];
            ck_assert_msg(x[i] == ids[o + t] && y[i] == ids[o + t + 1],
                          "%s: window %zu (start %zu), position %zu: x %d y %d, expected %d %d",
                          what, b, o, t, x[i], y[i], ids[o + t], ids[o + t + 1]);
        }
}

/* Tokens (n) of dtype d on the device holding ids (< 2^8, 2^16 or 2^31 by d). */
static clt_tensor *upload_ids(clt_ctx *ctx, clt_dtype d, const int32_t *ids, size_t n)
{
    clt_tensor *t = nt_tensor1(ctx, d, n);
    void *h = nt_alloc(n, clt_dtype_size(d));
    for (size_t i = 0; i < n; i++) {
        if (d == CLT_DTYPE_U8) ((uint8_t *)h)[i] = (uint8_t)ids[i];
        else if (d == CLT_DTYPE_U16) ((uint16_t *)h)[i] = (uint16_t)ids[i];
        else ((int32_t *)h)[i] = ids[i];
    }
    tc_write(t, h);
    free(h);
    return t;
}

START_TEST(test_train_windows)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype dtypes[] = {CLT_DTYPE_U8, CLT_DTYPE_U16, CLT_DTYPE_I32};
    const int32_t top[] = {256, 65536, INT32_MAX};
    const size_t Ts[] = {1, 17, 64, 300}, Bs[] = {1, 5, 12, 3};
    const size_t n = TC_SMALL_OR((size_t)65537, (size_t)4099);
    int32_t *ids = nt_alloc(n, sizeof *ids);
    for (size_t di = 0; di < 3; di++) {
        for (size_t i = 0; i < n; i++)
            ids[i] = (int32_t)(tc_u64(&r) % (uint64_t)top[di]);
        clt_tensor *tok = upload_ids(ctx, dtypes[di], ids, n);
        for (size_t k = 0; k < 4; k++) {
            const size_t B = Bs[k], T = Ts[k], count = n - T;
            clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_I32, B * T),
                       *y = nt_tensor1(ctx, CLT_DTYPE_I32, B * T);
            int32_t *gx = nt_alloc(B * T, 4), *gy = nt_alloc(B * T, 4);
            size_t *starts = nt_alloc(B, sizeof *starts);
            /* both halves of the seed and of the step reach the kernel */
            const uint64_t seed = tc_u64(&r), step = (tc_u64(&r) >> 8) | (1ull << 40);
            struct clt_textbatch_windows w = {
                .seed = seed, .stream = clt_rng_stream(CLT_RNG_TEXT, step), .count = count};
            tc_poison(x);
            tc_poison(y);
            TC_OK(ctx, clt_op_textbatch_gather(x, y, tok, B, T, &w));
            tc_read(x, gx);
            tc_read(y, gy);
            for (size_t b = 0; b < B; b++)
                starts[b] = ref_start(seed, step, b, count);
            char what[64];
            snprintf(what, sizeof what, "%s B=%zu T=%zu", clt_dtype_name(dtypes[di]), B, T);
            check_windows(gx, gy, ids, starts, B, T, what);
            clt_tensor_free(x);
            clt_tensor_free(y);
            free(gx);
            free(gy);
            free(starts);
        }
        clt_tensor_free(tok);
    }
    free(ids);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_windows_cover_every_start)
{
    /* count 5 possible starts, 64 windows: every start drawn, the last one included (the window
     * ending at the split's last token) */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    enum { N = 12, T = 7, B = 64 };
    int32_t ids[N], gx[B * T], gy[B * T];
    for (int i = 0; i < N; i++)
        ids[i] = 100 + i;
    clt_tensor *tok = upload_ids(ctx, CLT_DTYPE_U8, ids, N);
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_I32, B * T), *y = nt_tensor1(ctx, CLT_DTYPE_I32, B * T);
    struct clt_textbatch_windows w = {
        .seed = tc_u64(&r), .stream = clt_rng_stream(CLT_RNG_TEXT, 3), .count = N - T};
    TC_OK(ctx, clt_op_textbatch_gather(x, y, tok, B, T, &w));
    tc_read(x, gx);
    tc_read(y, gy);
    bool seen[N - T] = {false};
    for (int b = 0; b < B; b++) {
        const int o = gx[b * T] - 100;
        ck_assert(o >= 0 && o < N - T);
        seen[o] = true;
        ck_assert_int_eq(gy[b * T + T - 1], 100 + o + T);
    }
    for (int o = 0; o < N - T; o++)
        ck_assert_msg(seen[o], "start %d never drawn in %d windows", o, B);
    /* windows that would leave the tokens are refused */
    w.count = N - T + 1;
    ck_assert_int_eq(clt_op_textbatch_gather(x, y, tok, B, T, &w), CLT_ERR_SHAPE);
    w.count = N - T;
    ck_assert_int_eq(clt_op_textbatch_gather(x, y, tok, B, T + 1, &w), CLT_ERR_SHAPE);
    clt_tensor_free(tok);
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A text of n characters from an alphabet of `alphabet` code points (from U+0041, then U+0100
 * up when it exceeds 62), with the characters in random order; *len its bytes. */
static char *random_text(tc_rng *r, size_t n, size_t alphabet, size_t *len)
{
    char *s = nt_alloc(4 * n + 1, 1);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        /* the first `alphabet` characters once each, so that the vocabulary is all of them */
        uint32_t k = (uint32_t)(i < alphabet ? i : tc_u64(r) % alphabet);
        uint32_t cp = k < 62 ? 0x41 + k : 0x100 + k;
        if (cp >= 0xd800) cp += 0x800;
        if (cp < 0x80) {
            s[at++] = (char)cp;
        } else if (cp < 0x800) {
            s[at++] = (char)(0xc0 | cp >> 6);
            s[at++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            s[at++] = (char)(0xe0 | cp >> 12);
            s[at++] = (char)(0x80 | (cp >> 6 & 0x3f));
            s[at++] = (char)(0x80 | (cp & 0x3f));
        } else {
            s[at++] = (char)(0xf0 | cp >> 18);
            s[at++] = (char)(0x80 | (cp >> 12 & 0x3f));
            s[at++] = (char)(0x80 | (cp >> 6 & 0x3f));
            s[at++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    *len = at;
    return s;
}

static clt_text make_text(tc_rng *r, size_t n, size_t alphabet)
{
    size_t len;
    char *s = random_text(r, n, alphabet, &len);
    clt_text t;
    ck_assert_msg(clt_text_from_memory(&t, s, len, NULL, 0, "mem.txt", NULL) == CLT_OK, "%s",
                  clt_last_errmsg());
    free(s);
    return t;
}

/* One batch read back: step's training batch, or evaluation batch k when eval. */
static void sample(clt_ctx *ctx, clt_text_sampler *s, bool eval, uint64_t step, int32_t *gx,
                   int32_t *gy)
{
    const struct clt_text_sampler_params p = clt_text_sampler_params(s);
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_I32, p.batch * p.block),
               *y = nt_tensor1(ctx, CLT_DTYPE_I32, p.batch * p.block);
    tc_poison(x);
    tc_poison(y);
    if (eval) TC_OK(ctx, clt_text_sampler_eval_batch(s, (size_t)step, x, y));
    else TC_OK(ctx, clt_text_sampler_train_batch(s, step, x, y));
    tc_read(x, gx);
    tc_read(y, gy);
    clt_tensor_free(x);
    clt_tensor_free(y);
}

START_TEST(test_sampler_dtypes)
{
    /* vocabularies of 70, 300 and 70,000 characters: u8, u16 and i32 on the device, the batches
     * the host's ids at the reference's windows */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t alphabets[] = {70, 300, 70000};
    const clt_dtype want[] = {CLT_DTYPE_U8, CLT_DTYPE_U16, CLT_DTYPE_I32};
    for (size_t k = 0; k < 3; k++) {
        clt_text t = make_text(&r, alphabets[k] + 5000, alphabets[k]);
        ck_assert_uint_eq(clt_vocab_size(t.vocab), alphabets[k]);
        struct clt_text_sampler_params p = clt_text_sampler_default_params();
        p.batch = 4;
        p.block = 33;
        p.seed = tc_u64(&r);
        clt_text_sampler *s = NULL;
        TC_OK(ctx, clt_text_sampler_create(&s, ctx, &t, &p));
        ck_assert_int_eq(clt_tensor_dtype(clt_text_sampler_tokens(s, false)), want[k]);
        ck_assert_int_eq(clt_tensor_dtype(clt_text_sampler_tokens(s, true)), want[k]);
        ck_assert_uint_eq(clt_tensor_numel(clt_text_sampler_tokens(s, false)), t.n_train);
        ck_assert_uint_eq(clt_tensor_numel(clt_text_sampler_tokens(s, true)), t.n_val);
        int32_t gx[4 * 33], gy[4 * 33];
        size_t starts[4];
        for (uint64_t step = 0; step < 3; step++) {
            sample(ctx, s, false, step, gx, gy);
            for (size_t b = 0; b < 4; b++)
                starts[b] = ref_start(p.seed, step, b, t.n_train - 33);
            check_windows(gx, gy, t.train, starts, 4, 33, clt_dtype_name(want[k]));
        }
        clt_text_sampler_free(s);
        clt_text_free(&t);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_sampler_resume)
{
    /* step s's windows depend on (seed, s) alone: a sampler that starts at step 5 (a resumed
     * run) gives the uninterrupted run's batch 5; steps and seeds give other windows */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    clt_text t = make_text(&r, 20000, 65);
    struct clt_text_sampler_params p = clt_text_sampler_default_params();
    p.seed = 1234;
    enum { BT = 12 * 64, STEPS = 8 };
    int32_t(*run_x)[BT] = nt_alloc(STEPS, sizeof *run_x), (*run_y)[BT] = nt_alloc(STEPS, sizeof *run_y);
    int32_t gx[BT], gy[BT];
    clt_text_sampler *s = NULL, *resumed = NULL, *other = NULL;
    TC_OK(ctx, clt_text_sampler_create(&s, ctx, &t, &p));
    for (uint64_t step = 0; step < STEPS; step++)
        sample(ctx, s, false, step, run_x[step], run_y[step]);
    TC_OK(ctx, clt_text_sampler_create(&resumed, ctx, &t, &p));
    for (uint64_t step = 5; step < STEPS; step++) {
        sample(ctx, resumed, false, step, gx, gy);
        ck_assert_msg(memcmp(gx, run_x[step], sizeof gx) == 0 &&
                          memcmp(gy, run_y[step], sizeof gy) == 0,
                      "step %d differs after a resume", (int)step);
    }
    ck_assert(memcmp(run_x[3], run_x[4], sizeof gx) != 0);
    p.seed = 1235;
    TC_OK(ctx, clt_text_sampler_create(&other, ctx, &t, &p));
    sample(ctx, other, false, 5, gx, gy);
    ck_assert(memcmp(gx, run_x[5], sizeof gx) != 0);
    clt_text_sampler_free(s);
    clt_text_sampler_free(resumed);
    clt_text_sampler_free(other);
    free(run_x);
    free(run_y);
    clt_text_free(&t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_sampler_eval)
{
    /* evaluation batch k: windows k B .. k B + B - 1 of J = eval_batches B, spread evenly from
     * the validation split's first start to its last; the same for any seed and call */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    clt_text t = make_text(&r, 9000, 80);
    struct clt_text_sampler_params p = clt_text_sampler_default_params();
    p.batch = 5;
    p.block = 31;
    p.eval_batches = 3;
    p.seed = tc_u64(&r);
    clt_text_sampler *s = NULL, *other = NULL;
    TC_OK(ctx, clt_text_sampler_create(&s, ctx, &t, &p));
    p.seed++;
    TC_OK(ctx, clt_text_sampler_create(&other, ctx, &t, &p));
    int32_t gx[5 * 31], gy[5 * 31], ox[5 * 31], oy[5 * 31];
    size_t starts[5];
    const size_t count = t.n_val - 31, J = 15;
    for (size_t k = 0; k < 3; k++) {
        sample(ctx, s, true, k, gx, gy);
        for (size_t b = 0; b < 5; b++)
            starts[b] = ref_even(k * 5 + b, J, count);
        check_windows(gx, gy, t.val, starts, 5, 31, "eval");
        sample(ctx, other, true, k, ox, oy);
        ck_assert(memcmp(gx, ox, sizeof gx) == 0 && memcmp(gy, oy, sizeof gy) == 0);
    }
    ck_assert_uint_eq(ref_even(0, J, count), 0);
    ck_assert_uint_eq(ref_even(J - 1, J, count), count - 1); /* ends at the last token */
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_I32, 5 * 31), *y = nt_tensor1(ctx, CLT_DTYPE_I32, 5 * 31);
    ck_assert_int_eq(clt_text_sampler_eval_batch(s, 3, x, y), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "evaluation batch 3 of 3"), "%s",
                  clt_ctx_errmsg(ctx));
    /* one window in all: it starts at 0 */
    clt_text_sampler_free(other);
    p.batch = 1;
    p.eval_batches = 1;
    TC_OK(ctx, clt_text_sampler_create(&other, ctx, &t, &p));
    sample(ctx, other, true, 0, ox, oy);
    starts[0] = 0;
    check_windows(ox, oy, t.val, starts, 1, 31, "eval J=1");
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_text_sampler_free(s);
    clt_text_sampler_free(other);
    clt_text_free(&t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_sampler_errors)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    clt_text t = make_text(&r, 1000, 40); /* 900 / 100 */
    struct clt_text_sampler_params p = clt_text_sampler_default_params();
    clt_text_sampler *s = NULL;
    p.block = 100; /* the validation split's 100 tokens are one short */
    ck_assert_int_eq(clt_text_sampler_create(&s, ctx, &t, &p), CLT_ERR_SHAPE);
    ck_assert_ptr_null(s);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx),
                              "mem.txt: the validation split holds 100 tokens, fewer than a "
                              "window of block 100 + 1 = 101"),
                  "%s", clt_ctx_errmsg(ctx));
    p.block = 99;
    TC_OK(ctx, clt_text_sampler_create(&s, ctx, &t, &p));
    clt_text_sampler_free(s);
    s = NULL;
    p.block = 900;
    ck_assert_int_eq(clt_text_sampler_create(&s, ctx, &t, &p), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "the training split holds 900 tokens"), "%s",
                  clt_ctx_errmsg(ctx));
    p.block = 10;
    p.batch = 0;
    ck_assert_int_eq(clt_text_sampler_create(&s, ctx, &t, &p), CLT_ERR_INVALID_ARG);
    p.batch = 4;
    p.eval_batches = 0;
    ck_assert_int_eq(clt_text_sampler_create(&s, ctx, &t, &p), CLT_ERR_INVALID_ARG);
    p.eval_batches = 2;
    TC_OK(ctx, clt_text_sampler_create(&s, ctx, &t, &p));
    /* batch tensors of the wrong size or dtype */
    clt_tensor *x = nt_tensor1(ctx, CLT_DTYPE_I32, 40), *y = nt_tensor1(ctx, CLT_DTYPE_I32, 39),
               *f = nt_tensor1(ctx, CLT_DTYPE_F32, 40);
    ck_assert_int_eq(clt_text_sampler_train_batch(s, 0, x, y), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_text_sampler_train_batch(s, 0, x, f), CLT_ERR_SHAPE);
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_tensor_free(f);
    clt_text_sampler_free(s);
    clt_text_free(&t);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("textbatch");
    TCase *tc = tc_tcase("textbatch");
    tcase_add_test(tc, test_train_windows);
    tcase_add_test(tc, test_windows_cover_every_start);
    tcase_add_test(tc, test_sampler_dtypes);
    tcase_add_test(tc, test_sampler_resume);
    tcase_add_test(tc, test_sampler_eval);
    tcase_add_test(tc, test_sampler_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
