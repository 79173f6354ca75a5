/* Tests of the 16-bit formats: half.h against hand-computed values and against an independent
 * round-to-nearest-even reference built from exact decoding, and the device casts among f32,
 * f16 and bf16 in every direction, bit-exact against half.h on special values (NaN, +-inf,
 * +-0, subnormals, ties, overflow), every 16-bit pattern, and 65537 random fp32 patterns. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- independent references --------------------------------------------------------------- */

/* The exact value of a finite f16 pattern, from the definition; 0x7c00 (inf) counts as 2^16,
 * where the rounding of an overflowing value puts it. */
static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    double v = e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return b & 0x8000 ? -v : v;
}

/* Nearest pattern in [0, top] to |x| (value(top) standing for the overflow threshold's upper
 * end), ties to the even pattern; by binary search over the monotonic positive patterns. */
static uint16_t nearest(double a, uint16_t top, double (*value)(uint16_t))
{
    uint16_t lo = 0, hi = top; /* value(lo) <= a < value(hi), or a >= value(top) */
    if (a >= value(top)) return top;
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (value(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dl = a - value(lo), dh = value(hi) - a;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return lo % 2 == 0 ? lo : hi;
}

static uint16_t ref_f16(float x)
{
    uint16_t sign = (uint16_t)((bits(x) >> 16) & 0x8000u);
    return (uint16_t)(sign | nearest(fabs((double)x), 0x7c00, f16_value));
}

static uint16_t ref_bf16(float x)
{
    uint16_t sign = (uint16_t)((bits(x) >> 16) & 0x8000u);
    return (uint16_t)(sign | nearest(fabs((double)x), 0x7f80, bf16_value));
}

static bool nan32(uint32_t b)
{
    return (b & 0x7fffffffu) > 0x7f800000u;
}
static bool nan16(clt_dtype d, uint16_t b)
{
    return d == CLT_DTYPE_F16 ? (b & 0x7fffu) > 0x7c00u : (b & 0x7fffu) > 0x7f80u;
}

/* ---- special values ----------------------------------------------------------------------- */

/* fp32 inputs that exercise every rounding path; each listed with its sign flipped too. */
static const uint32_t special_f32[] = {
    0x00000000u, 0x3f800000u, 0x40000000u, 0x3dcccccdu, /* 0, 1, 2, 0.1 */
    0x7f800000u, 0x7fc00000u, 0x7f800001u, 0x7fbfffffu, /* inf, qNaN, sNaN, sNaN max payload */
    0x7fc02000u, 0x7fffffffu, 0x7f802000u,              /* NaN payloads in f16's kept bits */
    0x477fe000u,                                        /* 65504, f16 max */
    0x477fefffu,                                        /* 65519.996: rounds down to 65504 */
    0x477ff000u,                                        /* 65520: ties to even -> inf */
    0x47800000u,                                        /* 65536 */
    0x33800000u,                                        /* 2^-24, smallest f16 subnormal */
    0x33000000u,                                        /* 2^-25: tie -> 0 (even) */
    0x33000001u,                                        /* just above 2^-25 -> 2^-24 */
    0x32ffffffu,                                        /* just below -> 0 */
    0x33c00000u,                                        /* 1.5 * 2^-24: tie -> 2 * 2^-24 */
    0x34200000u,                                        /* 2.5 * 2^-24: tie -> 2 * 2^-24 */
    0x387fc000u,                                        /* largest f16 subnormal 1023 * 2^-24 */
    0x387fe000u,                                        /* 1023.5 * 2^-24: tie -> 2^-14 */
    0x38800000u,                                        /* 2^-14, smallest normal f16 */
    0x3f801000u,                                        /* 1 + 2^-11: tie -> 1 */
    0x3f803000u,                                        /* 1 + 3 * 2^-11: tie -> 1 + 2^-9 */
    0x3f801001u,                                        /* just above a tie -> up */
    0x45001000u,                                        /* 2049: tie -> 2048 */
    0x45003000u,                                        /* 2051: tie -> 2052 */
    0x3f808000u,                                        /* bf16 tie 1 + 2^-8 -> 1 */
    0x3f818000u,                                        /* bf16 tie -> 0x3f82 */
    0x3f808001u,                                        /* bf16 just above a tie -> up */
    0x3f807fffu,                                        /* bf16 just below a tie -> down */
    0x7f7f8000u,                                        /* bf16 tie at the top -> inf */
    0x7f7f7fffu,                                        /* bf16 max after rounding */
    0x7f7fffffu,                                        /* fp32 max -> inf in both */
    0x00000001u, 0x007fffffu, 0x00800000u,              /* fp32 subnormals, smallest normal */
    0x00008000u, 0x00018000u,                           /* bf16 ties among subnormals */
};
#define NSPECIAL (sizeof special_f32 / sizeof *special_f32)

START_TEST(test_half_known_values)
{
    static const struct {
        float f;
        uint16_t h;
    } f16[] = {
        {1.0f, 0x3c00},          {-2.0f, 0xc000},
        {0.1f, 0x2e66},          {1.0f / 3.0f, 0x3555},
        {65504.0f, 0x7bff},      {65519.99f, 0x7bff},
        {65520.0f, 0x7c00},      {1e10f, 0x7c00},
        {-1e10f, 0xfc00},        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},     {0.0f, 0x0000},
        {-0.0f, 0x8000},         {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000},      {0x1.000002p-25f, 0x0001},
        {0x1.8p-24f, 0x0002},    {0x1.4p-23f, 0x0002},
        {0x1.ff8p-15f, 0x03ff},  {0x1p-14f, 0x0400},
        {2049.0f, 0x6800},       {2051.0f, 0x6802},
        {0x1.002p+0f, 0x3c00},   {0x1.006p+0f, 0x3c02},
        {-0x1p-26f, 0x8000},     {5.9604645e-8f, 0x0001},
        {6.1035156e-5f, 0x0400},
    };
    for (size_t i = 0; i < sizeof f16 / sizeof *f16; i++) {
        ck_assert_msg(clt_f32_to_f16(f16[i].f) == f16[i].h, "f16(%a) = 0x%04x, expected 0x%04x",
                      (double)f16[i].f, clt_f32_to_f16(f16[i].f), f16[i].h);
    }
    ck_assert(clt_f16_to_f32(0x3555) == 0.333251953125f);
    ck_assert(clt_f16_to_f32(0x7bff) == 65504.0f);
    ck_assert(clt_f16_to_f32(0x0001) == 0x1p-24f);
    ck_assert(clt_f16_to_f32(0x03ff) == 0x1.ff8p-15f);
    ck_assert(clt_f16_to_f32(0x7c00) == INFINITY);
    ck_assert(clt_f16_to_f32(0xfc00) == -INFINITY);
    ck_assert_uint_eq(bits(clt_f16_to_f32(0x8000)), 0x80000000u);
    ck_assert(isnan(clt_f16_to_f32(0x7e00)));
    ck_assert(signbit(clt_f16_to_f32(0xfe00)));

    static const struct {
        uint32_t f;
        uint16_t b;
    } bf16[] = {
        {0x3f800000u, 0x3f80}, {0x3dcccccdu, 0x3dcd}, {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82},
        {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80}, {0x7f7fffffu, 0x7f80}, {0x7f7f7fffu, 0x7f7f},
        {0x7f7f8000u, 0x7f80}, {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, {0x80000000u, 0x8000},
        {0x00010000u, 0x0001}, {0x00008000u, 0x0000}, {0x00018000u, 0x0002}, {0x7fc00000u, 0x7fc0},
        {0xffc00000u, 0xffc0}, {0x7f800001u, 0x7fc0}, /* quieted */
        {0x7fa00000u, 0x7fe0},                        /* payload kept, quiet bit set */
    };
    for (size_t i = 0; i < sizeof bf16 / sizeof *bf16; i++) {
        uint16_t got = clt_f32_to_bf16(from_bits(bf16[i].f));
        ck_assert_msg(got == bf16[i].b, "bf16(0x%08x) = 0x%04x, expected 0x%04x", bf16[i].f, got,
                      bf16[i].b);
    }
    ck_assert_uint_eq(bits(clt_bf16_to_f32(0x3dcd)), 0x3dcd0000u);
    ck_assert(clt_bf16_to_f32(0x3dcd) == 0.10009765625f);

    /* f16 NaNs: quiet, sign kept, top payload bits kept. */
    ck_assert_uint_eq(clt_f32_to_f16(from_bits(0x7fc00000u)), 0x7e00);
    ck_assert_uint_eq(clt_f32_to_f16(from_bits(0xffc00000u)), 0xfe00);
    ck_assert_uint_eq(clt_f32_to_f16(from_bits(0x7f800001u)) & 0x7e00, 0x7e00);
    ck_assert_uint_eq(clt_f32_to_f16(from_bits(0x7fbfe000u)), 0x7fff);
}
END_TEST

START_TEST(test_half_against_reference)
{
    /* Every f16 and bf16 pattern decodes to its defined value and re-encodes to itself. */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        bool nan = nan16(CLT_DTYPE_F16, (uint16_t)h);
        float f = clt_f16_to_f32((uint16_t)h);
        if (nan) {
            ck_assert_msg(isnan(f) && !!signbit(f) == !!(h & 0x8000), "f16 0x%04x", h);
            /* payload bits survive the round trip (the quiet bit is forced) */
            ck_assert_uint_eq(clt_f32_to_f16(f), h | 0x200u);
        } else {
            if ((h & 0x7fffu) != 0x7c00u)
                ck_assert_msg((double)f == f16_value((uint16_t)h), "f16 0x%04x -> %a", h,
                              (double)f);
            ck_assert_msg(clt_f32_to_f16(f) == h, "f16 0x%04x does not round-trip", h);
        }
        float g = clt_bf16_to_f32((uint16_t)h);
        if (nan16(CLT_DTYPE_BF16, (uint16_t)h)) {
            ck_assert(isnan(g));
            ck_assert_uint_eq(clt_f32_to_bf16(g), h | 0x40u);
        } else {
            if ((h & 0x7fffu) != 0x7f80u) ck_assert((double)g == bf16_value((uint16_t)h));
            ck_assert_msg(clt_f32_to_bf16(g) == h, "bf16 0x%04x does not round-trip", h);
        }
    }
    /* Encoding: special values and random patterns over the whole range against the
     * independent nearest-even search. */
    tc_rng rng = tc_rng_for(__func__);
    for (size_t i = 0; i < 2 * NSPECIAL + 65537; i++) {
        uint32_t b =
            i < 2 * NSPECIAL ? special_f32[i / 2] ^ (i % 2 ? 0x80000000u : 0) : tc_u32(&rng);
        /* Random patterns are mostly far outside f16's range: every other one gets an
         * exponent byte of 0x30..0x4f (magnitudes 2^-31 .. 2^32). */
        if (i >= 2 * NSPECIAL && (i & 1))
            b = (b & 0x80ffffffu) | (uint32_t)(0x30 + (b >> 24) % 32) << 24;
        if (nan32(b)) continue; /* checked above */
        float x = from_bits(b);
        ck_assert_msg(clt_f32_to_f16(x) == ref_f16(x), "f16(0x%08x) = 0x%04x, reference 0x%04x", b,
                      clt_f32_to_f16(x), ref_f16(x));
        ck_assert_msg(clt_f32_to_bf16(x) == ref_bf16(x), "bf16(0x%08x) = 0x%04x, reference 0x%04x",
                      b, clt_f32_to_bf16(x), ref_bf16(x));
    }
}
END_TEST

/* ---- device casts ------------------------------------------------------------------------- */

/* The host's value of element i of raw storage in dtype d. */
static float load(clt_dtype d, const void *raw, size_t i)
{
    switch (d) {
    case CLT_DTYPE_F16:
        return clt_f16_to_f32(((const uint16_t *)raw)[i]);
    case CLT_DTYPE_BF16:
        return clt_bf16_to_f32(((const uint16_t *)raw)[i]);
    default:
        return ((const float *)raw)[i];
    }
}

static uint32_t store(clt_dtype d, float v)
{
    switch (d) {
    case CLT_DTYPE_F16:
        return clt_f32_to_f16(v);
    case CLT_DTYPE_BF16:
        return clt_f32_to_bf16(v);
    default:
        return bits(v);
    }
}

static uint32_t element(clt_dtype d, const void *raw, size_t i)
{
    return d == CLT_DTYPE_F32 ? ((const uint32_t *)raw)[i] : ((const uint16_t *)raw)[i];
}

/* Casts n elements of raw src storage on the device, through views at odd offsets, and
 * compares every element with half.h bit for bit. NaN: the device may canonicalise the payload
 * (OpenCL does not specify NaN payloads through vload_half/vstore_half or float moves), so a
 * NaN reference needs a NaN of the same sign, and any payload. Returns the number of NaNs whose
 * payload differed (reported, not failed). */
static size_t cast_and_check(clt_ctx *ctx, clt_dtype sd, clt_dtype dd, const void *src, size_t n,
                             const char *set)
{
    const size_t soff = 1, doff = 3, tail = 2;
    size_t ses = clt_dtype_size(sd), des = clt_dtype_size(dd), payload = 0;
    clt_tensor *sb = tc_tensor(ctx, sd, soff + n), *db = tc_tensor(ctx, dd, doff + n + tail);
    clt_tensor *sv = NULL, *dv = NULL;
    TC_OK(ctx, clt_tensor_view(&sv, sb, soff, 1, &n));
    TC_OK(ctx, clt_tensor_view(&dv, db, doff, 1, &n));
    tc_write(sv, src);
    tc_poison(db);
    TC_OK(ctx, clt_op_cast(dv, sv));
    unsigned char *back = malloc((doff + n + tail) * des);
    ck_assert_ptr_nonnull(back);
    tc_read(db, back);
    for (size_t i = 0; i < doff * des; i++)
        ck_assert_msg(back[i] == 0xff, "guard before changed");
    for (size_t i = (doff + n) * des; i < (doff + n + tail) * des; i++)
        ck_assert_msg(back[i] == 0xff, "guard after changed");
    const void *got = back + doff * des;
    for (size_t i = 0; i < n; i++) {
        uint32_t in = element(sd, src, i), want = store(dd, load(sd, src, i)),
                 g = element(dd, got, i);
        if (g == want) continue;
        bool want_nan = dd == CLT_DTYPE_F32 ? nan32(want) : nan16(dd, (uint16_t)want);
        bool got_nan = dd == CLT_DTYPE_F32 ? nan32(g) : nan16(dd, (uint16_t)g);
        uint32_t sign = dd == CLT_DTYPE_F32 ? 0x80000000u : 0x8000u;
        if (want_nan && got_nan && (want & sign) == (g & sign)) {
            payload++;
            continue;
        }
        ck_abort_msg("cast %s -> %s (%s): element %zu: input 0x%0*x, got 0x%0*x, expected 0x%0*x",
                     clt_dtype_name(sd), clt_dtype_name(dd), set, i, (int)ses * 2, in, (int)des * 2,
                     g, (int)des * 2, want);
    }
    free(back);
    clt_tensor_free(sv);
    clt_tensor_free(dv);
    clt_tensor_free(sb);
    clt_tensor_free(db);
    return payload;
}

static const clt_dtype float_dtypes[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};

START_TEST(test_cast_from_f32)
{
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    /* the special values with both signs, then 65537 random patterns over the whole range */
    size_t n = 2 * NSPECIAL + 65537;
    uint32_t *src = malloc(n * 4);
    ck_assert_ptr_nonnull(src);
    for (size_t i = 0; i < 2 * NSPECIAL; i++)
        src[i] = special_f32[i / 2] ^ (i % 2 ? 0x80000000u : 0);
    for (size_t i = 2 * NSPECIAL; i < n; i++)
        src[i] = tc_u32(&rng);
    for (size_t d = 0; d < 3; d++) {
        size_t payload = cast_and_check(ctx, CLT_DTYPE_F32, float_dtypes[d], src, 2 * NSPECIAL,
                                        "special values");
        payload += cast_and_check(ctx, CLT_DTYPE_F32, float_dtypes[d], src, n, "random");
        if (payload)
            printf("note: f32 -> %s: %zu NaNs came back with another payload (allowed)\n",
                   clt_dtype_name(float_dtypes[d]), payload);
    }
    free(src);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Every 16-bit pattern of sd (plus one, so the count is odd), to every float dtype. */
static void cast_all_patterns(clt_dtype sd)
{
    clt_ctx *ctx = tc_ctx();
    size_t n = 65537;
    uint16_t *src = malloc(n * 2);
    ck_assert_ptr_nonnull(src);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint16_t)i;
    for (size_t d = 0; d < 3; d++) {
        size_t payload = cast_and_check(ctx, sd, float_dtypes[d], src, n, "every pattern");
        if (payload)
            printf("note: %s -> %s: %zu NaNs came back with another payload (allowed)\n",
                   clt_dtype_name(sd), clt_dtype_name(float_dtypes[d]), payload);
    }
    free(src);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

START_TEST(test_cast_from_f16)
{
    cast_all_patterns(CLT_DTYPE_F16);
}
END_TEST

START_TEST(test_cast_from_bf16)
{
    cast_all_patterns(CLT_DTYPE_BF16);
}
END_TEST

START_TEST(test_cast_errors)
{
    clt_ctx *ctx = tc_ctx();
    clt_tensor *f = tc_tensor(ctx, CLT_DTYPE_F32, 17), *h = tc_tensor(ctx, CLT_DTYPE_F16, 16),
               *i = tc_tensor(ctx, CLT_DTYPE_I32, 17);
    ck_assert_int_eq(clt_op_cast(h, f), CLT_ERR_SHAPE); /* counts differ */
    ck_assert_int_eq(clt_op_cast(i, f), CLT_ERR_SHAPE); /* not a float dtype */
    ck_assert_int_eq(clt_op_cast(f, i), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_ctx_stats(ctx).compiles + clt_ctx_stats(ctx).disk_cache_hits, 0);
    clt_tensor_free(f);
    clt_tensor_free(h);
    clt_tensor_free(i);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cast");
    TCase *host = tc_tcase("half.h");
    tcase_add_test(host, test_half_known_values);
    tcase_add_test(host, test_half_against_reference);
    suite_add_tcase(s, host);
    TCase *dev = tc_tcase("device");
    tcase_add_test(dev, test_cast_from_f32);
    tcase_add_test(dev, test_cast_from_f16);
    tcase_add_test(dev, test_cast_from_bf16);
    tcase_add_test(dev, test_cast_errors);
    suite_add_tcase(s, dev);
    return tc_run(s);
}
