/* Tests of the elementwise ops (fill, copy, scale, axpy) against a float64 CPU reference, for
 * f32 and for f16/bf16 storage (copy and fill also for i32/u8), at awkward sizes, on views at
 * non-zero offsets inside larger buffers whose other elements must stay untouched, with the
 * outputs poisoned before each kernel runs; the device's self-check built on scale and axpy. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t sizes[] = {1, 17, 1000, 65537};
#define NSIZES (sizeof sizes / sizeof *sizes)
static const clt_dtype float_dtypes[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};

/* fp32: the design's default tolerance. Each result is one fp32 rounding (scale) or one fused
 * rounding (axpy uses fma) of the exact value, so the relative error is <= 2^-24; the bound
 * leaves room for a device that does not fuse. */
#define F32_ATOL 1e-5
#define F32_RTOL 1e-4

/* A view of n elements at offset `off` inside a buffer of off + n + tail elements whose every
 * byte is random (`all`, the host copy), so the guard elements on both sides are known. */
struct padded {
    clt_tensor *base, *view;
    clt_dtype dtype;
    size_t n, off, total, es;
    unsigned char *all; /* host copy of the base as written */
};

static struct padded padded_make(clt_ctx *ctx, clt_dtype d, size_t n, size_t off, tc_rng *rng)
{
    struct padded p;
    p.dtype = d;
    p.n = n;
    p.off = off;
    p.total = off + n + 5;
    p.es = clt_dtype_size(d);
    p.base = tc_tensor(ctx, d, p.total);
    p.all = malloc(p.total * p.es);
    ck_assert_ptr_nonnull(p.all);
    tc_fill_bytes(rng, p.all, p.total * p.es);
    tc_write(p.base, p.all);
    TC_OK(ctx, clt_tensor_view(&p.view, p.base, off, 1, &n));
    return p;
}

/* Writes the view's contents (n elements of raw storage) and updates the host copy. */
static void padded_set(struct padded *p, const void *data)
{
    memcpy(p->all + p->off * p->es, data, p->n * p->es);
    tc_write(p->view, data);
}

static void padded_poison(struct padded *p)
{
    memset(p->all + p->off * p->es, 0xff, p->n * p->es);
    tc_poison(p->view);
}

/* Reads the whole base, fails if a byte outside the view changed, returns the view's bytes
 * (malloc'ed). */
static void *padded_result(struct padded *p, const char *what)
{
    unsigned char *back = malloc(p->total * p->es), *out = malloc(p->n * p->es);
    ck_assert(back && out);
    tc_read(p->base, back);
    size_t lo = p->off * p->es, hi = (p->off + p->n) * p->es;
    for (size_t i = 0; i < p->total * p->es; i++)
        if ((i < lo || i >= hi) && back[i] != p->all[i])
            ck_abort_msg("%s: byte %zu outside the view [%zu, %zu) changed", what, i, lo, hi);
    memcpy(out, back + lo, hi - lo);
    free(back);
    return out;
}

static void padded_free(struct padded *p)
{
    clt_tensor_free(p->view);
    clt_tensor_free(p->base);
    free(p->all);
}

/* Random non-zero values already representable in dtype: `vals` gets the floats, `raw` the
 * storage (n elements of dtype). */
static void random_values(tc_rng *rng, clt_dtype d, size_t n, float *vals, void *raw)
{
    tc_fill_nonzero(rng, vals, n, 0.25f, 4.0f);
    for (size_t i = 0; i < n; i++) {
        if (d == CLT_DTYPE_F16) {
            uint16_t h = clt_f32_to_f16(vals[i]);
            vals[i] = clt_f16_to_f32(h);
            ((uint16_t *)raw)[i] = h;
        } else if (d == CLT_DTYPE_BF16) {
            uint16_t h = clt_f32_to_bf16(vals[i]);
            vals[i] = clt_bf16_to_f32(h);
            ((uint16_t *)raw)[i] = h;
        } else {
            ((float *)raw)[i] = vals[i];
        }
    }
}

static bool is_nan16(clt_dtype d, uint16_t b)
{
    return d == CLT_DTYPE_F16 ? (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)
                              : (b & 0x7f80u) == 0x7f80u && (b & 0x7fu);
}

/* Sign-magnitude bits to a line on which neighbouring values differ by 1 (+0 and -0 meet). */
static long ordered16(uint16_t b)
{
    return b & 0x8000u ? -(long)(b & 0x7fffu) : (long)b;
}

/* Checks `got` (n elements of dtype) against the float64 reference `ref`.
 * f32: |got - ref| <= F32_ATOL + F32_RTOL |ref|.
 * f16/bf16: the reference is rounded to the format as the device stores it (clt_f32_to_f16/
 * bf16 of the float nearest to ref) and the result may differ by 1 ulp of the 16-bit format:
 * the device rounds twice (the exact value to fp32, then fp32 to 16 bits) and the reference
 * rounds the double to float and then to 16 bits, and double rounding can land one ulp apart
 * when the first rounding moves a value onto a 16-bit halfway point. */
static void check_result(clt_dtype d, const void *got, const double *ref, size_t n,
                         const char *what, uint64_t seed)
{
    if (d == CLT_DTYPE_F32) {
        tc_check_close(got, ref, n, F32_ATOL, F32_RTOL, what, seed);
        return;
    }
    const uint16_t *g = got;
    for (size_t i = 0; i < n; i++) {
        float r = (float)ref[i];
        uint16_t want = d == CLT_DTYPE_F16 ? clt_f32_to_f16(r) : clt_f32_to_bf16(r);
        long diff = labs(ordered16(g[i]) - ordered16(want));
        if (is_nan16(d, g[i]) || diff > 1)
            ck_abort_msg("%s: element %zu of %zu: got 0x%04x, reference %.9g -> 0x%04x (%ld ulp); "
                         "seed %llu",
                         what, i, n, g[i], ref[i], want, diff, (unsigned long long)seed);
    }
}

START_TEST(test_fill)
{
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t di = 0; di < 3; di++) {
        clt_dtype d = float_dtypes[di];
        for (size_t s = 0; s < NSIZES; s++) {
            char what[64];
            snprintf(what, sizeof what, "fill %s x %zu", clt_dtype_name(d), sizes[s]);
            float value = (float)tc_uniform(&rng, -3.0, 3.0);
            struct padded y = padded_make(ctx, d, sizes[s], 3 + s, &rng);
            padded_poison(&y);
            TC_OK(ctx, clt_op_fill(y.view, value));
            void *got = padded_result(&y, what);
            /* Exact: one conversion of the value, as clt_tensor_filled does on the host. */
            for (size_t i = 0; i < sizes[s]; i++) {
                if (d == CLT_DTYPE_F32)
                    ck_assert_msg(((float *)got)[i] == value, "%s: %zu", what, i);
                else
                    ck_assert_msg(
                        ((uint16_t *)got)[i] ==
                            (d == CLT_DTYPE_F16 ? clt_f32_to_f16(value) : clt_f32_to_bf16(value)),
                        "%s: element %zu is 0x%04x", what, i, ((uint16_t *)got)[i]);
            }
            free(got);
            padded_free(&y);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_fill_integer)
{
    /* Round to nearest even, saturating. */
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    static const struct {
        clt_dtype d;
        float value;
        int32_t want;
    } rows[] = {
        {CLT_DTYPE_I32, -3.5f, -4}, {CLT_DTYPE_I32, 2.5f, 2},    {CLT_DTYPE_I32, 1e10f, INT32_MAX},
        {CLT_DTYPE_I32, 7.0f, 7},   {CLT_DTYPE_U8, 300.0f, 255}, {CLT_DTYPE_U8, -5.0f, 0},
        {CLT_DTYPE_U8, 2.5f, 2},    {CLT_DTYPE_U8, 3.5f, 4},     {CLT_DTYPE_U8, 17.0f, 17},
        {CLT_DTYPE_U16, 7e4f, 65535}, {CLT_DTYPE_U16, -1.0f, 0}, {CLT_DTYPE_U16, 300.5f, 300},
        {CLT_DTYPE_U16, 301.5f, 302},
    };
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        struct padded y = padded_make(ctx, rows[r].d, 1000, 9, &rng);
        padded_poison(&y);
        TC_OK(ctx, clt_op_fill(y.view, rows[r].value));
        void *got = padded_result(&y, "fill integer");
        for (size_t i = 0; i < 1000; i++) {
            int32_t v = rows[r].d == CLT_DTYPE_I32   ? ((int32_t *)got)[i]
                        : rows[r].d == CLT_DTYPE_U16 ? ((uint16_t *)got)[i]
                                                     : ((uint8_t *)got)[i];
            ck_assert_msg(v == rows[r].want, "fill %s %g: element %zu is %d, expected %d",
                          clt_dtype_name(rows[r].d), rows[r].value, i, v, rows[r].want);
        }
        free(got);
        padded_free(&y);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_copy)
{
    /* A raw copy of every dtype: bit-exact, random bit patterns (NaNs included) intact. */
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (int d = 0; d < CLT_DTYPE__COUNT; d++) {
        for (size_t s = 0; s < NSIZES; s++) {
            char what[64];
            snprintf(what, sizeof what, "copy %s x %zu", clt_dtype_name(d), sizes[s]);
            struct padded x = padded_make(ctx, (clt_dtype)d, sizes[s], 5, &rng);
            struct padded y = padded_make(ctx, (clt_dtype)d, sizes[s], 2 + s, &rng);
            padded_poison(&y);
            TC_OK(ctx, clt_op_copy(y.view, x.view));
            void *got = padded_result(&y, what), *src = padded_result(&x, what);
            ck_assert_msg(memcmp(got, src, sizes[s] * x.es) == 0, "%s differs", what);
            free(got);
            free(src);
            padded_free(&x);
            padded_free(&y);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* y = alpha * x (or y += alpha * x when axpy), on views, for every float dtype and size;
 * in_place: y is x. */
static void run_scale_axpy(bool axpy, bool in_place, const char *name)
{
    tc_rng rng = tc_rng_for(name);
    clt_ctx *ctx = tc_ctx();
    for (size_t di = 0; di < 3; di++) {
        clt_dtype d = float_dtypes[di];
        for (size_t s = 0; s < NSIZES; s++) {
            size_t n = sizes[s];
            char what[64];
            snprintf(what, sizeof what, "%s %s x %zu", name, clt_dtype_name(d), n);
            float alpha = (float)tc_uniform(&rng, 0.5, 1.5) * ((tc_u64(&rng) & 1) ? -1.0f : 1.0f);
            float *xv = malloc(n * 4), *yv = malloc(n * 4);
            void *xraw = malloc(n * 4), *yraw = malloc(n * 4);
            double *ref = malloc(n * sizeof *ref);
            ck_assert(xv && yv && xraw && yraw && ref);
            random_values(&rng, d, n, xv, xraw);
            random_values(&rng, d, n, yv, yraw);

            struct padded x = padded_make(ctx, d, n, 7, &rng);
            struct padded y = padded_make(ctx, d, n, 1 + 2 * s, &rng);
            padded_set(&x, xraw);
            struct padded *out = in_place ? &x : &y;
            if (axpy)
                padded_set(&y, yraw);
            else if (!in_place)
                padded_poison(&y); /* in place: x is the output and the input */

            for (size_t i = 0; i < n; i++)
                ref[i] = (double)alpha * xv[i] + (axpy ? (double)yv[i] : 0.0);
            if (axpy)
                TC_OK(ctx, clt_op_axpy(y.view, alpha, x.view));
            else
                TC_OK(ctx, clt_op_scale(out->view, x.view, alpha));

            void *got = padded_result(out, what);
            check_result(d, got, ref, n, what, rng.seed);
            if (!in_place) {
                /* The input is untouched. */
                void *xback = padded_result(&x, what);
                ck_assert_msg(memcmp(xback, xraw, n * x.es) == 0, "%s changed its input", what);
                free(xback);
            }
            free(got);
            padded_free(&x);
            padded_free(&y);
            free(xv);
            free(yv);
            free(xraw);
            free(yraw);
            free(ref);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

START_TEST(test_scale)
{
    run_scale_axpy(false, false, "scale");
}
END_TEST

START_TEST(test_scale_in_place)
{
    run_scale_axpy(false, true, "scale in place");
}
END_TEST

START_TEST(test_axpy)
{
    run_scale_axpy(true, false, "axpy");
}
END_TEST

START_TEST(test_f32_exact_cases)
{
    /* Hand-computed: products and fused sums exact in fp32 must come back exact. */
    clt_ctx *ctx = tc_ctx();
    enum { N = 4 };
    const float x[N] = {1.5f, -2.25f, 1024.0f, 0x1p-20f}, y[N] = {0.5f, 4.5f, -1.0f, 1.0f};
    const float want_scale[N] = {-0.75f, 1.125f, -512.0f, -0x1p-21f}; /* alpha = -0.5 */
    const float want_axpy[N] = {-0.25f, 5.625f, -513.0f, 1.0f - 0x1p-21f};
    float back[N];
    clt_tensor *tx = tc_tensor(ctx, CLT_DTYPE_F32, N), *ty = tc_tensor(ctx, CLT_DTYPE_F32, N);
    tc_write(tx, x);
    tc_poison(ty);
    TC_OK(ctx, clt_op_scale(ty, tx, -0.5f));
    tc_read(ty, back);
    ck_assert_mem_eq(back, want_scale, sizeof back);
    tc_write(ty, y);
    TC_OK(ctx, clt_op_axpy(ty, -0.5f, tx));
    tc_read(ty, back);
    ck_assert_mem_eq(back, want_axpy, sizeof back);
    clt_tensor_free(tx);
    clt_tensor_free(ty);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_errors)
{
    clt_ctx *ctx = tc_ctx();
    clt_tensor *a = tc_tensor(ctx, CLT_DTYPE_F32, 17), *b = tc_tensor(ctx, CLT_DTYPE_F32, 16),
               *h = tc_tensor(ctx, CLT_DTYPE_F16, 17), *i = tc_tensor(ctx, CLT_DTYPE_I32, 17);
    ck_assert_int_eq(clt_op_copy(a, b), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "17"), "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(clt_op_copy(a, h), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "f16"), "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(clt_op_scale(a, b, 2.0f), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_axpy(a, 1.0f, h), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_op_scale(i, i, 2.0f), CLT_ERR_SHAPE);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "i32"), "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(clt_op_axpy(i, 1.0f, i), CLT_ERR_SHAPE);
    /* Shapes may differ when the counts agree. */
    clt_tensor *m = NULL;
    const size_t md[2] = {4, 4};
    TC_OK(ctx, clt_tensor_create(&m, ctx, CLT_DTYPE_F32, 2, md, CLT_MEM_OTHER));
    TC_OK(ctx, clt_op_copy(m, b));
    ck_assert_int_eq(clt_ctx_stats(ctx).compiles + clt_ctx_stats(ctx).disk_cache_hits, 1);
    clt_tensor_free(m);
    clt_tensor_free(a);
    clt_tensor_free(b);
    clt_tensor_free(h);
    clt_tensor_free(i);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* clt_ctx_selfcheck (built on scale and axpy): passes, compiling its program once and leaving
 * nothing allocated; with the kernels read from tests/broken it fails with the compiler's log. */
START_TEST(test_selfcheck)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.disk_cache = 0;
    clt_ctx *ctx = tc_ctx_with(&p);
    ck_assert_ptr_null(clt_ctx_cache_dir(ctx));
    TC_OK(ctx, clt_ctx_selfcheck(ctx));
    struct clt_ctx_stats s = clt_ctx_stats(ctx);
    ck_assert_int_ge(s.compiles, 1);
    ck_assert_int_ge(s.host_waits[CLT_WAIT_SETUP], 1);
    TC_OK(ctx, clt_ctx_selfcheck(ctx)); /* again: the program is kept */
    ck_assert_int_eq(clt_ctx_stats(ctx).compiles, s.compiles);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();

    const char *dir = getenv("CLTRAIN_TESTS_DIR");
    ck_assert_msg(dir && *dir, "CLTRAIN_TESTS_DIR is not set (run through meson test)");
    char broken[4096];
    snprintf(broken, sizeof broken, "%s/broken", dir);
    setenv("CLTRAIN_KERNEL_DIR", broken, 1);
    ctx = tc_ctx_with(&p);
    clt_status st = clt_ctx_selfcheck(ctx);
    unsetenv("CLTRAIN_KERNEL_DIR");
    const char *msg = clt_ctx_errmsg(ctx);
    ck_assert_msg(st == CLT_ERR_BUILD, "got %s: %s", clt_status_name(st), msg);
    ck_assert_msg(tc_contains(msg, "clt_no_such_symbol"), "the compiler's log: %s", msg);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("elementwise");
    TCase *tc = tc_tcase("elementwise");
    tcase_add_test(tc, test_fill);
    tcase_add_test(tc, test_fill_integer);
    tcase_add_test(tc, test_copy);
    tcase_add_test(tc, test_scale);
    tcase_add_test(tc, test_scale_in_place);
    tcase_add_test(tc, test_axpy);
    tcase_add_test(tc, test_f32_exact_cases);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_selfcheck);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
