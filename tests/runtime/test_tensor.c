/* Tests of tensors and memory accounting: create/zeros/filled/like/view and their shapes,
 * blocking and non-blocking round trips (malloc'ed and pinned host memory) for every dtype,
 * the accountant (current, per category, peak), the memory cap (params and
 * CLTRAIN_MAX_MEMORY), pinned buffers, and tensors of two ctxs mixed in one op. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t sizes[] = {1, 17, 1000, 65537};
#define NSIZES (sizeof sizes / sizeof *sizes)

/* A ctx whose cap is the device's, whatever the caller's environment says. */
static clt_ctx *plain_ctx(void)
{
    unsetenv("CLTRAIN_MAX_MEMORY");
    return tc_ctx();
}

START_TEST(test_shapes)
{
    clt_ctx *ctx = plain_ctx();
    clt_tensor *t = NULL, *l = NULL, *v = NULL, *vv = NULL, *s = NULL;
    const size_t dims[3] = {2, 3, 4};
    TC_OK(ctx, clt_tensor_create(&t, ctx, CLT_DTYPE_F16, 3, dims, CLT_MEM_ACTIVATIONS));
    ck_assert_ptr_eq(clt_tensor_ctx(t), ctx);
    ck_assert_int_eq(clt_tensor_dtype(t), CLT_DTYPE_F16);
    ck_assert_int_eq(clt_tensor_ndim(t), 3);
    ck_assert_uint_eq(clt_tensor_dim(t, 0), 2);
    ck_assert_uint_eq(clt_tensor_dim(t, 1), 3);
    ck_assert_uint_eq(clt_tensor_dim(t, 2), 4);
    ck_assert_uint_eq(clt_tensor_dim(t, 3), 1);
    ck_assert_uint_eq(clt_tensor_numel(t), 24);
    ck_assert_uint_eq(clt_tensor_nbytes(t), 48);
    ck_assert_uint_eq(clt_tensor_offset(t), 0);
    ck_assert_ptr_nonnull(clt_tensor_mem(t));

    TC_OK(ctx, clt_tensor_like(&l, t));
    ck_assert_int_eq(clt_tensor_dtype(l), CLT_DTYPE_F16);
    ck_assert_int_eq(clt_tensor_ndim(l), 3);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(clt_tensor_dim(l, i), clt_tensor_dim(t, i));
    ck_assert(clt_tensor_mem(l) != clt_tensor_mem(t));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_ACTIVATIONS], 96);

    /* Views: offset in elements, accumulated through views of views. */
    const size_t vd[2] = {2, 5};
    TC_OK(ctx, clt_tensor_view(&v, t, 3, 2, vd));
    ck_assert_uint_eq(clt_tensor_offset(v), 3);
    ck_assert_uint_eq(clt_tensor_numel(v), 10);
    ck_assert_int_eq(clt_tensor_dtype(v), CLT_DTYPE_F16);
    ck_assert_ptr_eq(clt_tensor_mem(v), clt_tensor_mem(t));
    const size_t vvd[1] = {11};
    TC_OK(ctx, clt_tensor_view(&vv, v, 10, 1, vvd)); /* elements 13..23 of t: the last fits */
    ck_assert_uint_eq(clt_tensor_offset(vv), 13);
    const size_t one[1] = {12};
    clt_tensor *bad = (clt_tensor *)ctx;
    ck_assert_int_eq(clt_tensor_view(&bad, v, 10, 1, one), CLT_ERR_SHAPE); /* 13 + 12 > 24 */
    ck_assert_ptr_null(bad);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "past"), "%s", clt_ctx_errmsg(ctx));
    const size_t whole[1] = {24};
    ck_assert_int_eq(clt_tensor_view(&bad, t, 1, 1, whole), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_tensor_view(&bad, t, 25, 1, vd), CLT_ERR_SHAPE);
    const size_t five[5] = {1, 1, 1, 1, 1};
    ck_assert_int_eq(clt_tensor_view(&bad, t, 0, 5, five), CLT_ERR_SHAPE);
    ck_assert_int_eq(clt_tensor_create(&bad, ctx, CLT_DTYPE_F32, 5, five, CLT_MEM_OTHER),
                     CLT_ERR_SHAPE);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(clt_tensor_create(&bad, ctx, CLT_DTYPE__COUNT, 1, five, CLT_MEM_OTHER),
                     CLT_ERR_INVALID_ARG);

    /* Zero dimensions: a scalar of one element. */
    TC_OK(ctx, clt_tensor_create(&s, ctx, CLT_DTYPE_I32, 0, NULL, CLT_MEM_OTHER));
    ck_assert_int_eq(clt_tensor_ndim(s), 0);
    ck_assert_uint_eq(clt_tensor_numel(s), 1);
    ck_assert_uint_eq(clt_tensor_dim(s, 0), 1);

    /* Views keep the buffer alive after the base goes. */
    ck_assert_int_eq(clt__live_objects().tensors, 5);
    ck_assert_int_eq(clt__live_objects().buffers, 3);
    clt_tensor_free(t);
    ck_assert_int_eq(clt__live_objects().buffers, 3);
    uint16_t back[11];
    tc_read(vv, back);
    clt_tensor_free(v);
    clt_tensor_free(vv);
    ck_assert_int_eq(clt__live_objects().buffers, 2);
    clt_tensor_free(l);
    clt_tensor_free(s);
    clt_tensor_free(NULL);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* One round trip of random bytes: write (blocking or not) from src, read into dst. */
static void round_trip(clt_tensor *t, void *src, void *dst, bool blocking, tc_rng *rng,
                       const char *what)
{
    clt_ctx *ctx = clt_tensor_ctx(t);
    size_t bytes = clt_tensor_nbytes(t);
    tc_fill_bytes(rng, src, bytes);
    memset(dst, 0xa5, bytes);
    if (blocking) {
        TC_OK(ctx, clt_tensor_write(t, src, true, NULL));
        TC_OK(ctx, clt_tensor_read(t, dst, true, NULL));
    } else {
        cl_event w = NULL, r = NULL;
        TC_OK(ctx, clt_tensor_write(t, src, false, &w));
        TC_OK(ctx, clt_tensor_read(t, dst, false, &r));
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(r);
        TC_OK(ctx, clt_ctx_wait(ctx, CLT_WAIT_READ, 1, &r));
        cl_int status = 0;
        clGetEventInfo(w, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        ck_assert_int_eq(status, CL_COMPLETE); /* the read was ordered after the write */
        clReleaseEvent(w);
        clReleaseEvent(r);
    }
    for (size_t i = 0; i < bytes; i++)
        if (((unsigned char *)src)[i] != ((unsigned char *)dst)[i])
            ck_abort_msg("%s: byte %zu of %zu differs (0x%02x, sent 0x%02x); seed %llu", what, i,
                         bytes, ((unsigned char *)dst)[i], ((unsigned char *)src)[i],
                         (unsigned long long)rng->seed);
}

START_TEST(test_round_trips)
{
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = plain_ctx();
    for (int d = 0; d < CLT_DTYPE__COUNT; d++) {
        for (size_t s = 0; s < NSIZES; s++) {
            char what[96];
            clt_tensor *t = tc_tensor(ctx, (clt_dtype)d, sizes[s]);
            size_t bytes = clt_tensor_nbytes(t);
            unsigned char *src = malloc(bytes), *dst = malloc(bytes);
            ck_assert(src && dst);
            snprintf(what, sizeof what, "%s x %zu, malloc, blocking", clt_dtype_name(d), sizes[s]);
            round_trip(t, src, dst, true, &rng, what);
            snprintf(what, sizeof what, "%s x %zu, malloc, non-blocking", clt_dtype_name(d),
                     sizes[s]);
            round_trip(t, src, dst, false, &rng, what);
            free(src);
            free(dst);

            clt_pinned *ps = NULL, *pd = NULL;
            TC_OK(ctx, clt_pinned_create(&ps, ctx, bytes));
            TC_OK(ctx, clt_pinned_create(&pd, ctx, bytes));
            ck_assert_uint_eq(clt_pinned_size(ps), bytes);
            snprintf(what, sizeof what, "%s x %zu, pinned, blocking", clt_dtype_name(d), sizes[s]);
            round_trip(t, clt_pinned_ptr(ps), clt_pinned_ptr(pd), true, &rng, what);
            snprintf(what, sizeof what, "%s x %zu, pinned, non-blocking", clt_dtype_name(d),
                     sizes[s]);
            round_trip(t, clt_pinned_ptr(ps), clt_pinned_ptr(pd), false, &rng, what);
            clt_pinned_free(ps);
            clt_pinned_free(pd);
            clt_tensor_free(t);
        }
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_view_round_trip)
{
    /* Writes through a view land at its offset and nowhere else; reads see them. */
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = plain_ctx();
    enum { N = 1000, OFF = 123, M = 617 };
    clt_tensor *base = tc_tensor(ctx, CLT_DTYPE_F32, N), *v = NULL;
    const size_t md[1] = {M};
    TC_OK(ctx, clt_tensor_view(&v, base, OFF, 1, md));
    uint32_t *all = malloc(N * 4), *part = malloc(M * 4), *back = malloc(N * 4);
    ck_assert(all && part && back);
    tc_fill_bytes(&rng, all, N * 4);
    tc_write(base, all);
    round_trip(v, part, back, false, &rng, "view");
    tc_read(base, back);
    for (size_t i = 0; i < N; i++) {
        uint32_t want = i >= OFF && i < OFF + M ? part[i - OFF] : all[i];
        ck_assert_msg(back[i] == want, "element %zu: 0x%08x, expected 0x%08x", i, back[i], want);
    }
    free(all);
    free(part);
    free(back);
    clt_tensor_free(v);
    clt_tensor_free(base);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_zeros)
{
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *ctx = plain_ctx();
    const size_t n = 65537;
    unsigned char *junk = malloc(n * 4), *back = malloc(n * 4);
    ck_assert(junk && back);
    for (int d = 0; d < CLT_DTYPE__COUNT; d++) {
        /* Leave garbage in device memory first, so that "zero" is not luck. */
        clt_tensor *g = tc_tensor(ctx, (clt_dtype)d, n), *z = NULL;
        tc_fill_bytes(&rng, junk, clt_tensor_nbytes(g));
        tc_write(g, junk);
        clt_tensor_free(g);
        TC_OK(ctx, clt_tensor_zeros(&z, ctx, (clt_dtype)d, 1, &n, CLT_MEM_OTHER));
        memset(back, 0x5a, n * 4);
        tc_read(z, back);
        for (size_t i = 0; i < clt_tensor_nbytes(z); i++)
            ck_assert_msg(back[i] == 0, "%s: byte %zu is 0x%02x", clt_dtype_name(d), i, back[i]);
        clt_tensor_free(z);
    }
    free(junk);
    free(back);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_filled)
{
    clt_ctx *ctx = plain_ctx();
    /* Hand-computed bit patterns of 0.1: f32 0x3dcccccd; f16 0x2e66 (0.0999755859375);
     * bf16 0x3dcd (0.10009765625, rounded up from 0x3dcc_cccd). */
    ck_assert_uint_eq(clt_f32_to_f16(0.1f), 0x2e66);
    ck_assert_uint_eq(clt_f32_to_bf16(0.1f), 0x3dcd);
    for (size_t s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        void *back = malloc(n * 4);
        ck_assert_ptr_nonnull(back);
        clt_tensor *t = NULL;

        TC_OK(ctx, clt_tensor_filled(&t, ctx, CLT_DTYPE_F32, 1, &n, 0.1, CLT_MEM_OTHER));
        tc_read(t, back);
        for (size_t i = 0; i < n; i++)
            ck_assert(((uint32_t *)back)[i] == 0x3dcccccdu);
        clt_tensor_free(t);

        TC_OK(ctx, clt_tensor_filled(&t, ctx, CLT_DTYPE_F16, 1, &n, 0.1, CLT_MEM_OTHER));
        tc_read(t, back);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(((uint16_t *)back)[i] == clt_f32_to_f16(0.1f), "f16 %zu: 0x%04x", i,
                          ((uint16_t *)back)[i]);
        clt_tensor_free(t);

        TC_OK(ctx, clt_tensor_filled(&t, ctx, CLT_DTYPE_BF16, 1, &n, 0.1, CLT_MEM_OTHER));
        tc_read(t, back);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(((uint16_t *)back)[i] == clt_f32_to_bf16(0.1f), "bf16 %zu: 0x%04x", i,
                          ((uint16_t *)back)[i]);
        clt_tensor_free(t);

        TC_OK(ctx, clt_tensor_filled(&t, ctx, CLT_DTYPE_I32, 1, &n, -7.0, CLT_MEM_OTHER));
        tc_read(t, back);
        for (size_t i = 0; i < n; i++)
            ck_assert_int_eq(((int32_t *)back)[i], -7);
        clt_tensor_free(t);

        TC_OK(ctx, clt_tensor_filled(&t, ctx, CLT_DTYPE_U8, 1, &n, 200.0, CLT_MEM_OTHER));
        tc_read(t, back);
        for (size_t i = 0; i < n; i++)
            ck_assert_uint_eq(((uint8_t *)back)[i], 200);
        clt_tensor_free(t);
        free(back);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_accounting)
{
    clt_ctx *ctx = plain_ctx();
    struct clt_mem_stats m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.current, 0);
    ck_assert_uint_eq(m.peak, 0);
    for (int c = 0; c < CLT_MEM__COUNT; c++)
        ck_assert_uint_eq(m.by_category[c], 0);
    ck_assert_uint_eq(m.device_total, clt_ctx_device(ctx)->global_mem);
    ck_assert_uint_eq(m.cap, m.device_total);
    ck_assert(!m.cap_from_user);

    clt_tensor *p = NULL, *g = NULL, *a = NULL, *v = NULL;
    const size_t pd[2] = {10, 100}, gd[1] = {17}, ad[1] = {65537};
    TC_OK(ctx, clt_tensor_create(&p, ctx, CLT_DTYPE_F32, 2, pd, CLT_MEM_PARAMS));
    TC_OK(ctx, clt_tensor_zeros(&g, ctx, CLT_DTYPE_F16, 1, gd, CLT_MEM_GRADS));
    TC_OK(ctx, clt_tensor_filled(&a, ctx, CLT_DTYPE_U8, 1, ad, 3.0, CLT_MEM_ACTIVATIONS));
    m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.by_category[CLT_MEM_PARAMS], 4000);
    ck_assert_uint_eq(m.by_category[CLT_MEM_GRADS], 34);
    ck_assert_uint_eq(m.by_category[CLT_MEM_ACTIVATIONS], 65537);
    ck_assert_uint_eq(m.by_category[CLT_MEM_OTHER], 0);
    ck_assert_uint_eq(m.current, 4000 + 34 + 65537);
    ck_assert_uint_eq(m.peak, m.current);

    /* Views add nothing; a view keeps its buffer's bytes counted. */
    const size_t vd[1] = {500};
    TC_OK(ctx, clt_tensor_view(&v, p, 250, 1, vd));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 4000 + 34 + 65537);
    clt_tensor_free(p);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_PARAMS], 4000);
    clt_tensor_free(v);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_PARAMS], 0);

    clt_tensor_free(a);
    m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.current, 34);
    ck_assert_uint_eq(m.peak, 4000 + 34 + 65537);
    ck_assert_uint_eq(m.peak_by_category[CLT_MEM_PARAMS], 4000);
    ck_assert_uint_eq(m.peak_by_category[CLT_MEM_ACTIVATIONS], 65537);

    /* like: same category. */
    clt_tensor *g2 = NULL;
    TC_OK(ctx, clt_tensor_like(&g2, g));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_GRADS], 68);

    clt_ctx_mem_reset_peak(ctx);
    m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.peak, 68);
    ck_assert_uint_eq(m.peak_by_category[CLT_MEM_PARAMS], 0);
    ck_assert_uint_eq(m.peak_by_category[CLT_MEM_GRADS], 68);

    clt_tensor_free(g);
    clt_tensor_free(g2);
    m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.current, 0);
    for (int c = 0; c < CLT_MEM__COUNT; c++)
        ck_assert_uint_eq(m.by_category[c], 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_pinned_accounting)
{
    clt_ctx *ctx = plain_ctx();
    clt_pinned *a = NULL, *b = NULL;
    TC_OK(ctx, clt_pinned_create(&a, ctx, 1000));
    TC_OK(ctx, clt_pinned_create(&b, ctx, 65537));
    ck_assert_int_eq(clt__live_objects().pinned, 2);
    struct clt_mem_stats m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.by_category[CLT_MEM_STAGING], 1000 + 65537);
    ck_assert_uint_eq(m.current, 1000 + 65537);
    ck_assert_uint_eq(clt_pinned_size(a), 1000);
    ck_assert_ptr_nonnull(clt_pinned_ptr(a));
    memset(clt_pinned_ptr(a), 0x11, 1000); /* the mapping is writable host memory */
    memset(clt_pinned_ptr(b), 0x22, 65537);
    ck_assert(clt_pinned_ptr(a) != clt_pinned_ptr(b));
    clt_pinned_free(a);
    m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.by_category[CLT_MEM_STAGING], 65537);
    ck_assert_uint_eq(m.peak_by_category[CLT_MEM_STAGING], 1000 + 65537);
    clt_pinned_free(b);
    clt_pinned_free(NULL);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The cap of 1 MiB: 2 MiB fails with the full message, smaller fits, nothing leaks. */
static void check_cap(clt_ctx *ctx, bool from_env)
{
    const uint64_t MiB = 1024 * 1024;
    struct clt_mem_stats m = clt_ctx_mem_stats(ctx);
    ck_assert_uint_eq(m.cap, MiB);
    ck_assert(m.cap_from_user);

    clt_tensor *big = (clt_tensor *)ctx, *half1 = NULL, *half2 = NULL, *one = (clt_tensor *)ctx;
    const size_t n2 = 2 * MiB / 4;
    clt_status st = clt_tensor_create(&big, ctx, CLT_DTYPE_F32, 1, &n2, CLT_MEM_ACTIVATIONS);
    const char *msg = clt_ctx_errmsg(ctx);
    ck_assert_msg(st == CLT_ERR_OUT_OF_MEMORY, "got %s", clt_status_name(st));
    ck_assert_ptr_null(big);
    ck_assert_msg(tc_contains(msg, "2097152"), "names the bytes requested: %s", msg);
    ck_assert_msg(tc_contains(msg, "cap"), "names the cap: %s", msg);
    ck_assert_msg(tc_contains(msg, "1.0 MiB"), "says how big the cap is: %s", msg);
    ck_assert_msg(tc_contains(msg, "activations"), "names the category: %s", msg);
    if (from_env) ck_assert_msg(tc_contains(msg, "CLTRAIN_MAX_MEMORY"), "%s", msg);
    ck_assert_int_eq(clt__live_objects().buffers, 0);
    ck_assert_int_eq(clt__live_objects().tensors, 0);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);

    /* Two halves fit exactly; one byte more does not; a pinned buffer counts too. */
    const size_t nh = MiB / 2;
    TC_OK(ctx, clt_tensor_create(&half1, ctx, CLT_DTYPE_U8, 1, &nh, CLT_MEM_PARAMS));
    TC_OK(ctx, clt_tensor_filled(&half2, ctx, CLT_DTYPE_U8, 1, &nh, 1.0, CLT_MEM_GRADS));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, MiB);
    const size_t n1 = 1;
    ck_assert_int_eq(clt_tensor_create(&one, ctx, CLT_DTYPE_U8, 1, &n1, CLT_MEM_OTHER),
                     CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(one);
    clt_pinned *pin = NULL;
    ck_assert_int_eq(clt_pinned_create(&pin, ctx, 100), CLT_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(pin);
    clt_tensor_free(half2);
    TC_OK(ctx, clt_pinned_create(&pin, ctx, 100));
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).by_category[CLT_MEM_STAGING], 100);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).peak, MiB);
    clt_pinned_free(pin);
    clt_tensor_free(half1);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).current, 0);
}

START_TEST(test_cap_params)
{
    unsetenv("CLTRAIN_MAX_MEMORY");
    struct clt_ctx_params p = clt_ctx_default_params();
    p.max_memory = 1024 * 1024;
    clt_ctx *ctx = tc_ctx_with(&p);
    check_cap(ctx, false);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_cap_env)
{
    setenv("CLTRAIN_MAX_MEMORY", "1M", 1);
    clt_ctx *ctx = tc_ctx();
    check_cap(ctx, true);
    clt_ctx_free(ctx);
    tc_assert_no_live();

    /* The caller's max_memory wins over the variable. */
    struct clt_ctx_params p = clt_ctx_default_params();
    p.max_memory = 2 * 1024 * 1024;
    ctx = tc_ctx_with(&p);
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).cap, 2 * 1024 * 1024);
    clt_ctx_free(ctx);

    /* A cap above the device's memory is the device's memory. */
    setenv("CLTRAIN_MAX_MEMORY", "1000000T", 1);
    ctx = tc_ctx();
    ck_assert_uint_eq(clt_ctx_mem_stats(ctx).cap, clt_ctx_device(ctx)->global_mem);
    clt_ctx_free(ctx);

    const char *bad[] = {"lots", "0", "-1M", "1Q"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("CLTRAIN_MAX_MEMORY", bad[i], 1);
        ctx = (clt_ctx *)&p;
        clt_status st = clt_ctx_create(&ctx, NULL);
        const char *msg = clt_last_errmsg();
        ck_assert_msg(st == CLT_ERR_INVALID_ARG, "CLTRAIN_MAX_MEMORY=%s: %s", bad[i],
                      clt_status_name(st));
        ck_assert_ptr_null(ctx);
        ck_assert_msg(tc_contains(msg, "CLTRAIN_MAX_MEMORY"), "names the variable: %s", msg);
        ck_assert_msg(tc_contains(msg, bad[i]), "quotes the value: %s", msg);
        tc_assert_no_live();
    }
    unsetenv("CLTRAIN_MAX_MEMORY");
}
END_TEST

START_TEST(test_device_mismatch)
{
    tc_rng rng = tc_rng_for(__func__);
    clt_ctx *c1 = plain_ctx(), *c2 = tc_ctx();
    enum { N = 17 };
    clt_tensor *y = tc_tensor(c1, CLT_DTYPE_F32, N), *x = tc_tensor(c2, CLT_DTYPE_F32, N);
    float yv[N], back[N];
    tc_fill_nonzero(&rng, yv, N, 0.5f, 2.0f);
    tc_write(y, yv);
    tc_poison(x);

    clt_status st = clt_op_axpy(y, 1.0f, x);
    ck_assert_msg(st == CLT_ERR_DEVICE_MISMATCH, "got %s", clt_status_name(st));
    const char *msg = clt_ctx_errmsg(c1);
    const char *name = clt_ctx_device(c1)->device_name;
    ck_assert_msg(tc_contains(msg, "device"), "%s", msg);
    /* Both devices named (here the same hardware in two ctxs, so both ctxs are named too). */
    const char *first = strstr(msg, name);
    ck_assert_msg(first && strstr(first + strlen(name), clt_ctx_device(c2)->device_name),
                  "names both devices: %s", msg);
    char p1[32], p2[32];
    snprintf(p1, sizeof p1, "%p", (void *)c1);
    snprintf(p2, sizeof p2, "%p", (void *)c2);
    ck_assert_msg(tc_contains(msg, p1) && tc_contains(msg, p2), "names both ctxs: %s", msg);
    ck_assert_str_eq(clt_ctx_errmsg(c2), msg); /* reported in both */

    ck_assert_int_eq(clt_op_copy(y, x), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_scale(y, x, 2.0f), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_op_cast(y, x), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_tensor_same_ctx(x, y), CLT_ERR_DEVICE_MISMATCH);
    ck_assert_int_eq(clt_tensor_same_ctx(y, y), CLT_OK);
    /* Nothing ran: y is as written. */
    tc_read(y, back);
    ck_assert_mem_eq(back, yv, sizeof yv);
    ck_assert_int_eq(clt_ctx_stats(c1).compiles + clt_ctx_stats(c1).disk_cache_hits, 0);

    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_ctx_free(c2);
    clt_ctx_free(c1);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tc_tcase("tensor");
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_view_round_trip);
    tcase_add_test(tc, test_zeros);
    tcase_add_test(tc, test_filled);
    tcase_add_test(tc, test_device_mismatch);
    suite_add_tcase(s, tc);
    TCase *mem = tc_tcase("memory");
    tcase_add_test(mem, test_accounting);
    tcase_add_test(mem, test_pinned_accounting);
    tcase_add_test(mem, test_cap_params);
    tcase_add_test(mem, test_cap_env);
    suite_add_tcase(s, mem);
    return tc_run(s);
}
