/* Tests of the counter-based RNG: Philox4x32-10 against Random123's known-answer vectors, the
 * (seed, stream, index) layout, uniform floats and fills, and seeded permutations. */
#include "common.h"
#include "runtime/rng_internal.h"

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_philox_known_answers)
{
    /* Random123 1.14, tests/kat_vectors: philox4x32 10 rounds. */
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint32_t out[4];
        clt_philox4x32(kat[i].ctr, kat[i].key, out);
        for (int w = 0; w < 4; w++)
            ck_assert_msg(out[w] == kat[i].out[w], "vector %zu word %d: 0x%08x, expected 0x%08x", i,
                          w, out[w], kat[i].out[w]);
    }
}
END_TEST

START_TEST(test_layout)
{
    const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
    const uint32_t key[2] = {0x89abcdef, 0x01234567};
    for (uint64_t block = 0; block < 5; block++) {
        uint64_t b = block == 4 ? 0x123456789ull : block;
        const uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0x76543210, 0xfedcba98};
        uint32_t r[4];
        clt_philox4x32(ctr, key, r);
        for (int w = 0; w < 4; w++)
            ck_assert_uint_eq(clt_rng_u32(seed, stream, 4 * b + w), r[w]);
    }
    /* Neighbouring seeds, streams and indices give different values. */
    uint32_t a = clt_rng_u32(1, 2, 3);
    ck_assert_uint_ne(a, clt_rng_u32(0, 2, 3));
    ck_assert_uint_ne(a, clt_rng_u32(1, 3, 3));
    ck_assert_uint_ne(a, clt_rng_u32(1, 2, 4));
    ck_assert_uint_ne(a, clt_rng_u32(1ull << 32 | 1, 2, 3));
    ck_assert_uint_ne(a, clt_rng_u32(1, 2ull << 32 | 2, 3));
    ck_assert_uint_eq(a, clt_rng_u32(1, 2, 3));
    /* Streams by purpose keep the purpose in the top byte. */
    ck_assert_uint_eq(clt_rng_stream(CLT_RNG_DROPOUT, 7), 3ull << 56 | 7);
    ck_assert_uint_eq(clt_rng_stream(CLT_RNG_INIT, ~0ull), 1ull << 56 | 0x00ffffffffffffffull);
}
END_TEST

START_TEST(test_uniform)
{
    const int n = 1 << 18;
    double sum = 0.0;
    float lo = 1.0f, hi = 0.0f;
    int bins[16] = {0};
    int bad = 0; /* counted, not asserted per element: each check assertion is a system call */
    for (int i = 0; i < n; i++) {
        float u = clt_rng_uniform(42, 7, (uint64_t)i);
        bad += !(u >= 0.0f && u < 1.0f);
        bad += u != (float)(clt_rng_u32(42, 7, (uint64_t)i) >> 8) * 0x1.0p-24f;
        if (bad) break;
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
        bins[(int)(u * 16.0f)]++;
    }
    ck_assert_int_eq(bad, 0);
    /* Mean of 2^18 uniforms: standard deviation 5.6e-4; bins: 16384 +- 124. */
    ck_assert_msg(sum / n > 0.497 && sum / n < 0.503, "mean %g", sum / n);
    ck_assert(lo < 1e-4f && hi > 1.0f - 1e-4f);
    for (int b = 0; b < 16; b++)
        ck_assert_msg(abs(bins[b] - n / 16) < 800, "bin %d: %d", b, bins[b]);
    /* The extremes of the mapping. */
    ck_assert((float)(0xffffffffu >> 8) * 0x1.0p-24f == 1.0f - 0x1.0p-24f);
}
END_TEST

START_TEST(test_fill_uniform)
{
    enum { N = 1001 };
    float *a = malloc(N * sizeof *a);
    int bad = 0;
    ck_assert_ptr_nonnull(a);
    for (uint64_t first = 0; first < 6; first++) {
        clt_rng_fill_uniform(9, 3, first, a, N, -0.5f, 2.0f);
        for (size_t i = 0; i < N; i++) {
            float expect = -0.5f + 2.5f * clt_rng_uniform(9, 3, first + i);
            bad += a[i] != expect || !(a[i] >= -0.5f && a[i] < 2.0f);
        }
    }
    ck_assert_int_eq(bad, 0);
    clt_rng_fill_uniform(9, 3, 0, NULL, 0, 0.0f, 1.0f);
    free(a);
}
END_TEST

static bool is_permutation(const uint32_t *perm, size_t n)
{
    unsigned char *seen = calloc(n ? n : 1, 1);
    bool ok = seen != NULL;
    for (size_t i = 0; i < n && ok; i++) {
        ok = perm[i] < n && !seen[perm[i]];
        if (ok) seen[perm[i]] = 1;
    }
    free(seen);
    return ok;
}

START_TEST(test_permutation)
{
    static const size_t sizes[] = {0, 1, 2, 3, 17, 1000, 65537};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        uint32_t *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
        ck_assert(a && b);
        clt_rng_permutation(5, 1, a, n);
        ck_assert_msg(is_permutation(a, n), "n %zu", n);
        clt_rng_permutation(5, 1, b, n);
        ck_assert(n == 0 || memcmp(a, b, n * sizeof *a) == 0);
        if (n >= 17) {
            clt_rng_permutation(6, 1, b, n);
            ck_assert_msg(is_permutation(b, n) && memcmp(a, b, n * sizeof *a) != 0, "seed, n %zu",
                          n);
            clt_rng_permutation(5, 2, b, n);
            ck_assert_msg(is_permutation(b, n) && memcmp(a, b, n * sizeof *a) != 0, "stream, n %zu",
                          n);
            size_t fixed = 0;
            for (size_t i = 0; i < n; i++)
                fixed += a[i] == i;
            ck_assert_msg(fixed < 8, "n %zu: %zu fixed points", n, fixed);
        }
        free(a);
        free(b);
    }
}
END_TEST

START_TEST(test_permutation_uniform)
{
    /* All 24 orders of 4 elements over 48000 seeds: 2000 each, standard deviation 44. */
    int count[256] = {0}, bad = 0;
    for (uint64_t seed = 0; seed < 48000 && !bad; seed++) {
        uint32_t p[4];
        clt_rng_permutation(seed, 0, p, 4);
        bad += !is_permutation(p, 4);
        count[p[0] * 64 + p[1] * 16 + p[2] * 4 + p[3]]++;
    }
    int orders = 0;
    ck_assert_int_eq(bad, 0);
    for (int c = 0; c < 256; c++) {
        if (!count[c]) continue;
        orders++;
        ck_assert_msg(abs(count[c] - 2000) < 300, "order %d seen %d times", c, count[c]);
    }
    ck_assert_int_eq(orders, 24);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, test_philox_known_answers);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_uniform);
    tcase_add_test(tc, test_fill_uniform);
    tcase_add_test(tc, test_permutation);
    tcase_add_test(tc, test_permutation_uniform);
    suite_add_tcase(suite, tc);
    return tc_run(suite);
}
