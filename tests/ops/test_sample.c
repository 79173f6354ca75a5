/* Tests of the next-token draw of generated text (cl/sample.cl, src/ops/sample.c, through
 * clt_text_sample): each draw is where a float64 host reference of the rule puts the Philox
 * uniform of (seed, position) along the cumulative softmax(logits / temperature) of the top k
 * (ties with the k-th kept), for V from 1 to 1000, several temperatures and k; top-k 1 is the
 * argmax of a language model's logits from a forward pass, whatever the seed; the same seed and
 * position give the same token and other positions other tokens; logits that are no numbers
 * give -1; a bad temperature or a row outside the logits is refused. Outputs are poisoned. */
#include "ops/nn_testutil.h"
#include "small.h"

#include "cltrain/model.h"
#include "cltrain/spec.h"
#include "cltrain/text.h"
#include "ops/ops_internal.h"
#include "runtime/rng_internal.h"

#include <math.h>

/* Checks that token `got` is a correct draw from row (V) under (temp, k) for the uniform u:
 * kept (at least the k-th largest), and u * sum between the cumulative weights before and
 * after it, up to float rounding of the device's sums. */
static void check_draw(const float *row, size_t V, double temp, size_t k, double u, int got,
                       const char *what)
{
    ck_assert_msg(got >= 0 && (size_t)got < V, "%s: token %d outside [0, %zu)", what, got, V);
    double thr = -INFINITY, m = -INFINITY, sum = 0, before = 0;
    if (k > 0 && k < V) { /* the k-th largest, repeats counted */
        thr = INFINITY; /* the least value with fewer than k values above it */
        for (size_t i = 0; i < V; i++) {
            size_t above = 0;
            for (size_t j = 0; j < V; j++) above += row[j] > row[i];
            if (above < k && row[i] < thr) thr = row[i];
        }
    }
    for (size_t i = 0; i < V; i++)
        if (row[i] >= thr) m = fmax(m, row[i]);
    for (size_t i = 0; i < V; i++)
        if (row[i] >= thr) sum += exp((row[i] - m) / temp);
    ck_assert_msg(row[got] >= thr, "%s: token %d (logit %g) is not among the top %zu (>= %g)",
                  what, got, (double)row[got], k, thr);
    for (int i = 0; i < got; i++)
        if (row[i] >= thr) before += exp((row[i] - m) / temp);
    const double after = before + exp((row[got] - m) / temp), x = u * sum, eps = 1e-5 * sum;
    ck_assert_msg(x >= before - eps && (x < after + eps || got == (int)V - 1),
                  "%s: token %d covers [%g, %g) of %g, the draw is at %g", what, got, before,
                  after, sum, x);
}

START_TEST(test_draws_follow_the_rule)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t Vs[] = {1, 17, 65, 1000}, ks[] = {0, 1, 3, 17, 2000};
    const float temps[] = {0.5f, 1.0f, 2.0f};
    clt_tensor *id = nt_tensor1(ctx, CLT_DTYPE_I32, 1);
    for (size_t vi = 0; vi < sizeof Vs / sizeof *Vs; vi++) {
        const size_t V = Vs[vi], R = 3;
        float *h = nt_alloc(R * V, sizeof *h);
        tc_fill_nonzero(&r, h, R * V, 0.01f, 4.0f);
        if (V > 4) h[V + 1] = h[V + 2] = h[V + 3]; /* ties in row 1 */
        clt_tensor *logits = nt_tensor1(ctx, CLT_DTYPE_F32, R * V);
        tc_write(logits, h);
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
            for (size_t ti = 0; ti < 3; ti++)
                for (size_t row = 0; row < R; row++) {
                    struct clt_text_sample_params p = clt_text_sample_default_params();
                    p.temperature = temps[ti];
                    p.top_k = ks[ki];
                    p.seed = tc_u64(&r);
                    const uint64_t pos = tc_u64(&r) >> 1;
                    int32_t got;
                    char what[96];
                    snprintf(what, sizeof what, "V %zu, k %zu, temperature %g, row %zu", V,
                             ks[ki], (double)temps[ti], row);
                    tc_poison(id);
                    TC_OK(ctx, clt_text_sample(id, logits, row, V, pos, &p));
                    tc_read(id, &got);
                    const double u = clt_rng_uniform(p.seed, clt_rng_stream(CLT_RNG_GENERATE, 0),
                                                     pos);
                    check_draw(h + row * V, V, temps[ti], ks[ki], u, got, what);
                }
        clt_tensor_free(logits);
        free(h);
    }
    clt_tensor_free(id);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A language model's logits (1, T, V) from a forward pass over random ids. */
static clt_model *lm_forward(clt_ctx *ctx, tc_rng *r, size_t T, size_t V, clt_tensor **logits)
{
    clt_spec spec;
    clt_model *m = NULL;
    ck_assert_int_eq(clt_spec_parse("embed 16, posembed, attention 2 causal, linear V", (int)V,
                                    &spec), CLT_OK);
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 1;
    TC_OK(ctx, clt_model_create(&m, ctx, &spec, T, V, &mp));
    clt_spec_free(&spec);
    int32_t *ids = nt_alloc(T, sizeof *ids);
    for (size_t t = 0; t < T; t++) ids[t] = (int32_t)(tc_u32(r) % V);
    clt_tensor *x = nt_tensor2(ctx, CLT_DTYPE_I32, 1, T);
    tc_write(x, ids);
    TC_OK(ctx, clt_model_forward(m, x, false, 0, logits));
    clt_ctx_finish(ctx, CLT_WAIT_EVAL);
    clt_tensor_free(x);
    free(ids);
    return m;
}

START_TEST(test_top1_is_the_argmax)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t T = 9, V = 23;
    clt_tensor *logits = NULL, *id = nt_tensor1(ctx, CLT_DTYPE_I32, 1);
    clt_model *m = lm_forward(ctx, &r, T, V, &logits);
    float *h = nt_alloc(T * V, sizeof *h);
    tc_read(logits, h);
    for (size_t t = 0; t < T; t++) {
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (h[t * V + v] > h[t * V + best]) best = v;
        for (int s = 0; s < 3; s++) {
            struct clt_text_sample_params p = clt_text_sample_default_params();
            p.top_k = 1;
            p.temperature = s == 0 ? 1.0f : s == 1 ? 0.3f : 5.0f;
            p.seed = tc_u64(&r);
            int32_t got;
            tc_poison(id);
            TC_OK(ctx, clt_text_sample(id, logits, t, V, t, &p));
            tc_read(id, &got);
            ck_assert_msg(got == (int32_t)best, "position %zu, seed %llu: top-1 drew %d, the "
                          "argmax is %zu", t, (unsigned long long)p.seed, got, best);
        }
    }
    free(h);
    clt_tensor_free(id);
    clt_model_free(m);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_same_seed_same_token)
{
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const size_t V = 50;
    float h[50];
    for (size_t i = 0; i < V; i++) h[i] = 0.001f * (float)(tc_u32(&r) % 100); /* nearly flat */
    clt_tensor *logits = nt_tensor1(ctx, CLT_DTYPE_F32, V), *id = nt_tensor1(ctx, CLT_DTYPE_I32, 1);
    tc_write(logits, h);
    struct clt_text_sample_params p = clt_text_sample_default_params();
    int32_t a[64], b[64];
    size_t differ = 0;
    for (size_t pos = 0; pos < 64; pos++) {
        TC_OK(ctx, clt_text_sample(id, logits, 0, V, pos, &p));
        tc_read(id, &a[pos]);
        tc_poison(id);
        TC_OK(ctx, clt_text_sample(id, logits, 0, V, pos, &p));
        tc_read(id, &b[pos]);
        ck_assert_msg(a[pos] == b[pos], "position %zu: %d then %d", pos, a[pos], b[pos]);
        differ += pos > 0 && a[pos] != a[pos - 1];
    }
    ck_assert_msg(differ > 32, "only %zu of 63 draws differ from the one before", differ);
    clt_tensor_free(logits);
    clt_tensor_free(id);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_errors)
{
    clt_ctx *ctx = tc_ctx();
    const size_t V = 5;
    const float nan_row[5] = {NAN, NAN, NAN, NAN, NAN};
    clt_tensor *logits = nt_tensor1(ctx, CLT_DTYPE_F32, V), *id = nt_tensor1(ctx, CLT_DTYPE_I32, 1),
               *fid = nt_tensor1(ctx, CLT_DTYPE_F32, 1);
    tc_write(logits, nan_row);
    struct clt_text_sample_params p = clt_text_sample_default_params();
    const int32_t seven = 7;
    int32_t got;
    tc_write(id, &seven);
    TC_OK(ctx, clt_text_sample(id, logits, 0, V, 0, &p));
    tc_read(id, &got);
    ck_assert_int_eq(got, -1);
    ck_assert_int_eq(clt_text_sample(id, logits, 1, V, 0, &p), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_text_sample(fid, logits, 0, V, 0, &p), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_text_sample(id, id, 0, 1, 0, &p), CLT_ERR_SHAPE);
    p.temperature = 0.0f;
    ck_assert_int_eq(clt_text_sample(id, logits, 0, V, 0, &p), CLT_ERR_INVALID_ARG);
    ck_assert(tc_contains(clt_ctx_errmsg(ctx), "temperature"));
    p.temperature = NAN;
    ck_assert_int_eq(clt_text_sample(id, logits, 0, V, 0, &p), CLT_ERR_INVALID_ARG);
    clt_tensor_free(logits);
    clt_tensor_free(id);
    clt_tensor_free(fid);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sample");
    TCase *tc = tc_tcase("sample");
    tcase_add_test(tc, test_draws_follow_the_rule);
    tcase_add_test(tc, test_top1_is_the_argmax);
    tcase_add_test(tc, test_same_seed_same_token);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
