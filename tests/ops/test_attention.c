/* Tests of clt_op_attention_* (cl/attention.cl) against the float64 references of
 * tests/ref/ref_nn.c, on both paths (flash in both its variants, rows and tiled, on any device;
 * reference), with and without the causal mask:
 * y, lse and dqkv at several (B, T, NH, HD) with HD in {16, 24, 32, 64, 128} and T of 1, of less
 * than a tile, and no multiple of the flash kernels' tiles (rows per work-group and per local
 * tile); f16/bf16 storage of qkv, y, dy and dqkv in every combination; bit-identical reruns and
 * the same bits for every local size the flash kernels may be launched with; the causal property
 * (a later token changes no earlier output, and earlier rows' outputs have no gradient with
 * respect to later tokens, exactly); finite differences of the reference backward; the argument
 * checks; one decode step of generation (query row pos alone) against the same reference's row.
 * Fresh random inputs; every output poisoned (NaN) before the op runs, through views at
 * an offset. Under CLTRAIN_TEST_SMALL the longest sequences shrink (tests/small.h); in full mode
 * test_attention_bench prints both paths' GFLOP/s at two GPT shapes.
 * Tolerances (fp32): y atol 1e-5, rtol 1e-4 (a convex combination of v's rows: f32 softmax
 * errors of ~1e-7 relative); lse 1e-5, 1e-5 (|lse| ~ log T + a score); dqkv atol 1e-4, rtol
 * 1e-3 with the normalised MSE <= 1e-7: its elements are sums over T rows of terms that cancel
 * (dS sums to zero over each row), so an element near zero keeps the absolute error of its
 * terms (~1e-6 at T = 100), which rtol alone would not allow. 16-bit storage adds the rounding
 * of the stored outputs and of y, which the backward's Delta = rowsum(dy y) reads (f16: atol,
 * rtol 3e-3; bf16: 2e-2 for y, 3e-2 for dqkv, no MSE check), against a reference computed from
 * the rounded inputs the device holds. */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

#include <time.h>

struct att_case {
    size_t B, T, NH, HD;
};

/* The device tensors of one case. */
struct att_dev {
    clt_tensor *qkv, *y, *lse, *ws, *dy, *dqkv;
};

/* The host side of one case: the inputs as the device holds them, the references, and what the
 * device gave. */
struct att_host {
    size_t n3, ny, nl; /* elements of qkv, y, lse */
    float *qkv, *dy, *y, *lse, *dqkv;
    double *qkvd, *dyd, *yr, *lser, *dqkvr;
};

static const char *path_name(clt_attn_path p)
{
    switch (p) {
    case CLT_ATTN_FLASH: return "flash";
    case CLT_ATTN_FLASH_ROWS: return "flash rows";
    case CLT_ATTN_FLASH_TILED: return "flash tiled";
    case CLT_ATTN_REFERENCE: return "reference";
    default: return "auto";
    }
}

/* The paths every device runs: both flash variants (whichever the device would pick) and the
 * reference one. */
static const clt_attn_path all_paths[] = {CLT_ATTN_FLASH_ROWS, CLT_ATTN_FLASH_TILED,
                                          CLT_ATTN_REFERENCE};
#define N_PATHS (sizeof all_paths / sizeof *all_paths)

static struct clt_attn_geom geom(const struct att_case *c, bool causal, clt_attn_path p)
{
    struct clt_attn_geom g = {c->B, c->T, c->NH, c->HD, causal, p};
    return g;
}

static void host_alloc(struct att_host *h, const struct att_case *c)
{
    const size_t D = c->NH * c->HD;
    h->n3 = c->B * c->T * 3 * D;
    h->ny = c->B * c->T * D;
    h->nl = c->B * c->NH * c->T;
    h->qkv = NT_FLOATS(h->n3);
    h->dy = NT_FLOATS(h->ny);
    h->y = NT_FLOATS(h->ny);
    h->lse = NT_FLOATS(h->nl);
    h->dqkv = NT_FLOATS(h->n3);
    h->qkvd = NT_DOUBLES(h->n3);
    h->dyd = NT_DOUBLES(h->ny);
    h->yr = NT_DOUBLES(h->ny);
    h->lser = NT_DOUBLES(h->nl);
    h->dqkvr = NT_DOUBLES(h->n3);
}

static void host_free(struct att_host *h)
{
    void *ps[] = {h->qkv, h->dy, h->y, h->lse, h->dqkv, h->qkvd, h->dyd, h->yr, h->lser, h->dqkvr};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        free(ps[i]);
}

/* Device tensors for c: qkv and y of dtype xd, dy and dqkv of gd, views at an offset. */
static void dev_alloc(clt_ctx *ctx, struct att_dev *d, const struct att_case *c, clt_dtype xd,
                      clt_dtype gd, size_t ws_len)
{
    const size_t D = c->NH * c->HD, r3[3] = {c->B, c->T, 3 * D}, ry[3] = {c->B, c->T, D},
                 rl[3] = {c->B, c->NH, c->T};
    d->qkv = nt_tensor(ctx, xd, 3, r3);
    d->y = nt_tensor(ctx, xd, 3, ry);
    d->lse = nt_tensor(ctx, CLT_DTYPE_F32, 3, rl);
    d->ws = nt_tensor1(ctx, CLT_DTYPE_F32, ws_len);
    d->dy = nt_tensor(ctx, gd, 3, ry);
    d->dqkv = nt_tensor(ctx, gd, 3, r3);
}

static void dev_free(struct att_dev *d)
{
    clt_tensor *ts[] = {d->qkv, d->y, d->lse, d->ws, d->dy, d->dqkv};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
}

/* Random inputs: entries of magnitude [0.1, 2) with random signs (scores of a few units, so the
 * softmax is neither flat nor one-hot), uploaded; the rounded values kept in qkvd and dyd. */
static void fill_inputs(tc_rng *r, struct att_host *h, struct att_dev *d)
{
    tc_fill_nonzero(r, h->qkv, h->n3, 0.1f, 2.0f);
    tc_fill_nonzero(r, h->dy, h->ny, 0.05f, 2.0f);
    nt_write_as(d->qkv, h->qkv, h->qkvd, h->n3);
    nt_write_as(d->dy, h->dy, h->dyd, h->ny);
}

/* Forward then backward on the device, every output poisoned first; results into h. */
static void run_device(clt_ctx *ctx, struct att_dev *d, struct att_host *h,
                       const struct clt_attn_geom *g)
{
    tc_poison(d->y);
    tc_poison(d->lse);
    tc_poison(d->ws);
    tc_poison(d->dqkv);
    TC_OK(ctx, clt_op_attention_forward(d->y, d->lse, d->ws, d->qkv, g));
    TC_OK(ctx, clt_op_attention_backward(d->dqkv, d->ws, d->dy, d->qkv, d->y, d->lse, g));
    nt_read_as_f32(d->y, h->y, h->ny);
    tc_read(d->lse, h->lse);
    nt_read_as_f32(d->dqkv, h->dqkv, h->n3);
}

/* The tolerances of y and dqkv stored as xd and gd (see the header). */
static void tols(clt_dtype xd, clt_dtype gd, double *ya, double *yr, double *ga, double *gr)
{
    *ya = NT_ATOL;
    *yr = NT_RTOL;
    if (xd == CLT_DTYPE_F16) *ya = *yr = 3e-3;
    if (xd == CLT_DTYPE_BF16) *ya = *yr = 2e-2;
    *ga = 1e-4;
    *gr = 1e-3;
    if (xd == CLT_DTYPE_F16 || gd == CLT_DTYPE_F16) *ga = *gr = 3e-3;
    if (xd == CLT_DTYPE_BF16 || gd == CLT_DTYPE_BF16) *ga = *gr = 3e-2;
}

/* One case on one path: y, lse and dqkv against the references, then a rerun bit for bit. */
static void check_case(clt_ctx *ctx, tc_rng *r, const struct att_case *c, bool causal,
                       clt_attn_path path, clt_dtype xd, clt_dtype gd)
{
    const struct clt_attn_geom g = geom(c, causal, path);
    struct att_host h;
    struct att_dev d;
    host_alloc(&h, c);
    dev_alloc(ctx, &d, c, xd, gd, clt_op_attention_workspace(&g));
    fill_inputs(r, &h, &d);
    const int B = (int)c->B, T = (int)c->T, NH = (int)c->NH, HD = (int)c->HD;
    ref_attention_forward(h.qkvd, h.yr, h.lser, B, T, NH, HD, causal);
    ref_attention_backward(h.qkvd, h.dyd, h.dqkvr, B, T, NH, HD, causal);
    run_device(ctx, &d, &h, &g);

    char what[160], msg[200];
    snprintf(what, sizeof what, "attention B%zu T%zu NH%zu HD%zu %s%s qkv %s dy %s", c->B, c->T,
             c->NH, c->HD, path_name(path), causal ? " causal" : "", clt_dtype_name(xd),
             clt_dtype_name(gd));
    double ya, yr, ga, gr;
    tols(xd, gd, &ya, &yr, &ga, &gr);
    snprintf(msg, sizeof msg, "%s: y", what);
    tc_check_close(h.y, h.yr, h.ny, ya, yr, msg, r->seed);
    snprintf(msg, sizeof msg, "%s: lse", what);
    tc_check_close(h.lse, h.lser, h.nl, 1e-5, 1e-5, msg, r->seed);
    snprintf(msg, sizeof msg, "%s: dqkv", what);
    tc_check_close(h.dqkv, h.dqkvr, h.n3, ga, gr, msg, r->seed);
    if (xd == CLT_DTYPE_F32 && gd == CLT_DTYPE_F32) nt_check_nmse(h.dqkv, h.dqkvr, h.n3, msg, r->seed);

    /* deterministic: the same bits again */
    float *y1 = NT_FLOATS(h.ny), *l1 = NT_FLOATS(h.nl), *g1 = NT_FLOATS(h.n3);
    memcpy(y1, h.y, h.ny * sizeof *y1);
    memcpy(l1, h.lse, h.nl * sizeof *l1);
    memcpy(g1, h.dqkv, h.n3 * sizeof *g1);
    run_device(ctx, &d, &h, &g);
    ck_assert_msg(nt_same_bits(y1, h.y, h.ny), "%s: y not bit-identical", what);
    ck_assert_msg(nt_same_bits(l1, h.lse, h.nl), "%s: lse not bit-identical", what);
    ck_assert_msg(nt_same_bits(g1, h.dqkv, h.n3), "%s: dqkv not bit-identical", what);
    free(y1);
    free(l1);
    free(g1);
    dev_free(&d);
    host_free(&h);
}

/* T: 1; below a tile; above one and no multiple of the flash kernels' 32-row tiles, of the
 * tiled variant's 16-row blocks and 8 rows per work-item, or of a work-group's rows (64); HD at
 * every bucket and one between (24); B NH above 1 */
static const struct att_case cases_full[] = {{1, 1, 1, 16},  {2, 17, 2, 16}, {1, 33, 3, 32},
                                             {2, 100, 2, 64}, {3, 7, 2, 24},  {1, 70, 1, 128}},
                             cases_small[] = {{1, 1, 1, 16}, {2, 17, 1, 16}, {1, 33, 1, 32},
                                              {1, 20, 1, 64}, {2, 7, 2, 24}, {1, 11, 1, 128}};
#define N_CASES (sizeof cases_full / sizeof *cases_full)

static void check_all(clt_attn_path path)
{
    tc_rng r = tc_rng_for(path_name(path));
    clt_ctx *ctx = tc_ctx();
    const struct att_case *cases = TC_SMALL_OR(cases_full, cases_small);
    for (size_t i = 0; i < N_CASES; i++)
        for (int causal = 0; causal < 2; causal++)
            check_case(ctx, &r, &cases[i], causal, path, CLT_DTYPE_F32, CLT_DTYPE_F32);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}

START_TEST(test_attention_flash_rows)
{
    check_all(CLT_ATTN_FLASH_ROWS);
}
END_TEST

START_TEST(test_attention_flash_tiled)
{
    check_all(CLT_ATTN_FLASH_TILED);
}
END_TEST

START_TEST(test_attention_reference)
{
    check_all(CLT_ATTN_REFERENCE);
}
END_TEST

/* 16-bit storage of qkv and y, of dy and dqkv, in every combination, on every path (under
 * CLTRAIN_TEST_SMALL six of them, which still load and store each dtype as each operand on
 * each path: Oclgrind builds every program anew). */
START_TEST(test_attention_half_storage)
{
    static const struct att_case full = {2, 40, 2, 32}, small = {1, 21, 1, 32};
    const struct att_case *c = tc_small() ? &small : &full;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    const clt_dtype ds[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    /* (path, qkv dtype, dy dtype) */
    static const int few[][3] = {{0, 1, 0}, {0, 2, 2}, {1, 0, 1}, {1, 2, 2}, {1, 1, 0},
                                 {2, 2, 1}};
    for (int p = 0; p < (int)N_PATHS; p++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                bool take = a || b;
                if (tc_small()) {
                    take = false;
                    for (size_t i = 0; i < sizeof few / sizeof *few; i++)
                        take |= few[i][0] == p && few[i][1] == a && few[i][2] == b;
                }
                if (take)
                    check_case(ctx, &r, c, (a + b) % 2 == 1, all_paths[p], ds[a], ds[b]);
            }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* CLT_ATTN_AUTO takes the flash path up to CLT_ATTN_FLASH_MAX_HD (its bits), the reference one
 * above it; the workspace follows. CLT_ATTN_FLASH is the tiled variant on CPUs, the rows one
 * elsewhere (its bits); an explicit variant stays as asked. */
START_TEST(test_attention_auto)
{
    struct att_case c = {1, 9, 2, 16};
    struct clt_attn_geom g = geom(&c, true, CLT_ATTN_AUTO);
    ck_assert_int_eq(clt_op_attention_resolve(&g), CLT_ATTN_FLASH);
    ck_assert_uint_eq(clt_op_attention_workspace(&g), 2 * 9);
    g.HD = CLT_ATTN_FLASH_MAX_HD + 1;
    ck_assert_int_eq(clt_op_attention_resolve(&g), CLT_ATTN_REFERENCE);
    ck_assert_uint_eq(clt_op_attention_workspace(&g), 2 * 9 * 9 + 2 * 9);
    g.path = CLT_ATTN_FLASH;
    ck_assert_int_eq(clt_op_attention_resolve(&g), CLT_ATTN_FLASH);
    clt_device_info cpu = {.type = CLT_DEVICE_CPU}, gpu = {.type = CLT_DEVICE_GPU};
    ck_assert_int_eq(clt__attention_variant(&cpu, &g), CLT_ATTN_FLASH_TILED);
    ck_assert_int_eq(clt__attention_variant(&gpu, &g), CLT_ATTN_FLASH_ROWS);
    g.path = CLT_ATTN_FLASH_ROWS;
    ck_assert_int_eq(clt__attention_variant(&cpu, &g), CLT_ATTN_FLASH_ROWS);
    ck_assert_uint_eq(clt_op_attention_workspace(&g), 2 * 9);
    g.path = CLT_ATTN_FLASH_TILED;
    ck_assert_int_eq(clt__attention_variant(&gpu, &g), CLT_ATTN_FLASH_TILED);
    ck_assert_uint_eq(clt_op_attention_workspace(&g), 2 * 9);
    g.path = CLT_ATTN_AUTO;
    g.HD = 16;
    ck_assert_int_eq(clt__attention_variant(&cpu, &g), CLT_ATTN_FLASH_TILED);
    g.HD = CLT_ATTN_FLASH_MAX_HD + 1;
    ck_assert_int_eq(clt__attention_variant(&cpu, &g), CLT_ATTN_REFERENCE);

    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    struct att_host h;
    struct att_dev d;
    host_alloc(&h, &c);
    g = geom(&c, true, CLT_ATTN_REFERENCE);
    dev_alloc(ctx, &d, &c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
    fill_inputs(&r, &h, &d);
    g.path = CLT_ATTN_FLASH;
    g.path = clt__attention_variant(clt_ctx_device(ctx), &g); /* the device's variant, named */
    run_device(ctx, &d, &h, &g);
    float *y1 = NT_FLOATS(h.ny), *g1 = NT_FLOATS(h.n3);
    memcpy(y1, h.y, h.ny * sizeof *y1);
    memcpy(g1, h.dqkv, h.n3 * sizeof *g1);
    for (int p = 0; p < 2; p++) {
        g.path = p ? CLT_ATTN_AUTO : CLT_ATTN_FLASH;
        run_device(ctx, &d, &h, &g);
        ck_assert_msg(nt_same_bits(y1, h.y, h.ny), "%s: y differs from the device's variant's",
                      path_name(g.path));
        ck_assert_msg(nt_same_bits(g1, h.dqkv, h.n3),
                      "%s: dqkv differs from the device's variant's", path_name(g.path));
    }
    /* and above the flash path's widths, the reference path */
    struct att_case wide = {1, 5, 1, CLT_ATTN_FLASH_MAX_HD + 8};
    struct att_host hw;
    struct att_dev dw;
    host_alloc(&hw, &wide);
    g = geom(&wide, false, CLT_ATTN_AUTO);
    dev_alloc(ctx, &dw, &wide, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
    fill_inputs(&r, &hw, &dw);
    run_device(ctx, &dw, &hw, &g);
    ref_attention_forward(hw.qkvd, hw.yr, NULL, 1, 5, 1, (int)wide.HD, 0);
    tc_check_close(hw.y, hw.yr, hw.ny, NT_ATOL, NT_RTOL, "auto, HD 136: y", r.seed);
    free(y1);
    free(g1);
    dev_free(&d);
    dev_free(&dw);
    host_free(&h);
    host_free(&hw);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The causal mask, exactly: changing token t's q, k and v changes no output (y, lse) of an
 * earlier row, bit for bit, and changes some later one; a dy that is zero from row t on gives
 * dqkv rows from t on that are exactly zero (earlier outputs have no gradient with respect to
 * later tokens). Without the mask, the earlier rows do change (the check can fail). */
START_TEST(test_attention_causal)
{
    static const struct att_case full = {2, 45, 2, 32}, small = {2, 21, 2, 16};
    const struct att_case *c = tc_small() ? &small : &full;
    const size_t t = c->T * 2 / 3, D = c->NH * c->HD;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t p = 0; p < N_PATHS; p++)
        for (int causal = 1; causal >= 0; causal--) {
            const clt_attn_path path = all_paths[p];
            const struct clt_attn_geom g = geom(c, causal, path);
            struct att_host h;
            struct att_dev d;
            host_alloc(&h, c);
            dev_alloc(ctx, &d, c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
            fill_inputs(&r, &h, &d);
            /* dy zero from row t on, in every sample */
            for (size_t b = 0; b < c->B; b++)
                memset(h.dy + (b * c->T + t) * D, 0, (c->T - t) * D * sizeof *h.dy);
            tc_write(d.dy, h.dy);
            run_device(ctx, &d, &h, &g);
            float *y1 = NT_FLOATS(h.ny), *l1 = NT_FLOATS(h.nl);
            memcpy(y1, h.y, h.ny * sizeof *y1);
            memcpy(l1, h.lse, h.nl * sizeof *l1);
            size_t earlier_grad = 0;
            for (size_t b = 0; b < c->B; b++)
                for (size_t i = 0; i < c->T; i++)
                    for (size_t e = 0; e < 3 * D; e++) {
                        const float v = h.dqkv[(b * c->T + i) * 3 * D + e];
                        if (i < t) earlier_grad += v != 0.0f;
                        else if (causal)
                            ck_assert_msg(v == 0.0f,
                                          "%s causal: dqkv[b %zu, t %zu, %zu] = %g from a dy "
                                          "that is zero from t %zu on",
                                          path_name(path), b, i, e, v, t);
                    }
            ck_assert_msg(earlier_grad > 0, "%s: no gradient before t", path_name(path));
            /* token t changed in every sample */
            for (size_t b = 0; b < c->B; b++)
                for (size_t e = 0; e < 3 * D; e++)
                    h.qkv[(b * c->T + t) * 3 * D + e] += 0.5f;
            tc_write(d.qkv, h.qkv);
            run_device(ctx, &d, &h, &g);
            size_t changed_before = 0, changed_after = 0;
            for (size_t b = 0; b < c->B; b++)
                for (size_t i = 0; i < c->T; i++) {
                    const size_t at = (b * c->T + i) * D;
                    const bool same = nt_same_bits(y1 + at, h.y + at, D);
                    if (i < t) changed_before += !same;
                    else changed_after += !same;
                    for (size_t hh = 0; hh < c->NH; hh++) {
                        const size_t li = (b * c->NH + hh) * c->T + i;
                        if (i < t) changed_before += memcmp(&l1[li], &h.lse[li], sizeof *l1) != 0;
                    }
                }
            ck_assert_msg(changed_after > 0, "%s: token %zu changed nothing", path_name(path), t);
            if (causal)
                ck_assert_msg(changed_before == 0,
                              "%s causal: token %zu changed %zu outputs of earlier rows",
                              path_name(path), t, changed_before);
            else
                ck_assert_msg(changed_before > 0, "%s: without the mask, earlier rows unchanged",
                              path_name(path));
            free(y1);
            free(l1);
            dev_free(&d);
            host_free(&h);
        }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Each flash kernel of both variants relaunched (arguments as the op left them) with every local
 * size of nt_local_sizes that it takes, up to the 64 work-items per work-group the op launches
 * at most: the bits of the op's own launch. */
START_TEST(test_attention_local_size)
{
    static const struct att_case full[] = {{2, 100, 2, 32}, {1, 7, 1, 64}},
                                 small[] = {{1, 35, 1, 16}, {1, 7, 1, 64}};
    const struct att_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t ci = 0; ci < sizeof full / sizeof *full; ci++)
        for (int vc = 0; vc < 4; vc++) {
            const int causal = vc % 2, tiled = vc / 2;
            const struct att_case *c = &cases[ci];
            const size_t D = c->NH * c->HD, per = tiled ? CLT_ATTN_TILED_R : 1;
            const struct clt_attn_geom g =
                geom(c, causal, tiled ? CLT_ATTN_FLASH_TILED : CLT_ATTN_FLASH_ROWS);
            struct att_host h;
            struct att_dev d;
            host_alloc(&h, c);
            dev_alloc(ctx, &d, c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
            fill_inputs(&r, &h, &d);
            run_device(ctx, &d, &h, &g);
            float *y1 = NT_FLOATS(h.ny), *l1 = NT_FLOATS(h.nl), *g1 = NT_FLOATS(h.n3);
            memcpy(y1, h.y, h.ny * sizeof *y1);
            memcpy(l1, h.lse, h.nl * sizeof *l1);
            memcpy(g1, h.dqkv, h.n3 * sizeof *g1);
            const unsigned hd = c->HD <= 16 ? 16 : c->HD <= 32 ? 32 : c->HD <= 64 ? 64 : 128;
            char opts[128];
            clt__opts_attention(opts, sizeof opts, clt_ctx_device(ctx), CLT_DTYPE_F32,
                                CLT_DTYPE_F32, hd, tiled);
            static const char *const names[2][3] = {
                {"attention_forward", "attention_backward_dkv", "attention_backward_dq"},
                {"attention_forward_tiled", "attention_backward_dkv_tiled",
                 "attention_backward_dq_tiled"}};
            for (int which = 0; which < 3; which++) {
                const char *name = names[tiled][which];
                cl_kernel k = nt_kernel(ctx, "attention", opts, name);
                int tried = 0;
                for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
                    const size_t local = nt_local_sizes[li];
                    if (local > 64) continue; /* the op's launches take at most 64 rows */
                    const size_t items = (c->T + per - 1) / per,
                                 groups = c->B * c->NH * ((items + local - 1) / local);
                    if (which == 0) {
                        tc_poison(d.y);
                        tc_poison(d.lse);
                    } else {
                        /* the other kernel's part as it was, this kernel's part poisoned */
                        for (size_t i = 0; i < h.n3; i++)
                            h.dqkv[i] = (i % (3 * D) < D) == (which == 2) ? NAN : g1[i];
                        tc_write(d.dqkv, h.dqkv);
                    }
                    if (!nt_launch_local(ctx, k, groups, local)) continue;
                    tried++;
                    if (which == 0) {
                        tc_read(d.y, h.y);
                        tc_read(d.lse, h.lse);
                        ck_assert_msg(nt_same_bits(y1, h.y, h.ny) &&
                                          nt_same_bits(l1, h.lse, h.nl),
                                      "%s T%zu differs with local size %zu", name, c->T, local);
                    } else {
                        tc_read(d.dqkv, h.dqkv);
                        ck_assert_msg(nt_same_bits(g1, h.dqkv, h.n3),
                                      "%s T%zu differs with local size %zu", name, c->T, local);
                    }
                }
                ck_assert_int_ge(tried, 4);
            }
            free(y1);
            free(l1);
            free(g1);
            dev_free(&d);
            host_free(&h);
        }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The reference backward against central finite differences of f = sum(y dy) in double. */
START_TEST(test_attention_ref_finite_differences)
{
    static const struct att_case cases[] = {{1, 1, 1, 2}, {1, 3, 1, 2}, {2, 4, 2, 3}, {1, 5, 3, 1}};
    tc_rng r = tc_rng_for(__func__);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int causal = 0; causal < 2; causal++) {
            const struct att_case *c = &cases[ci];
            const int B = (int)c->B, T = (int)c->T, NH = (int)c->NH, HD = (int)c->HD;
            const size_t n3 = c->B * c->T * 3 * c->NH * c->HD, ny = n3 / 3;
            double *qkv = NT_DOUBLES(n3), *dy = NT_DOUBLES(ny), *y = NT_DOUBLES(ny),
                   *dqkv = NT_DOUBLES(n3);
            for (size_t i = 0; i < n3; i++)
                qkv[i] = tc_uniform(&r, -2.0, 2.0);
            for (size_t i = 0; i < ny; i++)
                dy[i] = tc_uniform(&r, -2.0, 2.0);
            ref_attention_backward(qkv, dy, dqkv, B, T, NH, HD, causal);
            const double h = 1e-6;
            for (size_t k = 0; k < n3; k++) {
                double f[2], v0 = qkv[k];
                for (int side = 0; side < 2; side++) {
                    qkv[k] = v0 + (side ? -h : h);
                    ref_attention_forward(qkv, y, NULL, B, T, NH, HD, causal);
                    f[side] = 0.0;
                    for (size_t j = 0; j < ny; j++)
                        f[side] += y[j] * dy[j];
                }
                qkv[k] = v0;
                const double fd = (f[0] - f[1]) / (2 * h);
                ck_assert_msg(fabs(fd - dqkv[k]) <= 1e-6 + 1e-5 * fabs(dqkv[k]),
                              "case %zu%s: gradient %zu = %.9g, finite difference %.9g; seed %llu",
                              ci, causal ? " causal" : "", k, dqkv[k], fd,
                              (unsigned long long)r.seed);
            }
            free(qkv);
            free(dy);
            free(y);
            free(dqkv);
        }
}
END_TEST

/* Each bad argument: its status, a message naming the op, and nothing enqueued (y and dqkv
 * stay poisoned). */
#define BAD(want, expr, opname)                                                                    \
    do {                                                                                           \
        ck_assert_int_eq((expr), (want));                                                          \
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), opname) ||                                  \
                          (want) == CLT_ERR_DEVICE_MISMATCH,                                       \
                      "%s: message \"%s\"", #expr, clt_ctx_errmsg(ctx));                           \
    } while (0)

START_TEST(test_attention_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    const struct att_case c = {2, 3, 2, 4};
    struct clt_attn_geom g = geom(&c, true, CLT_ATTN_REFERENCE);
    struct att_dev d, o;
    dev_alloc(ctx, &d, &c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
    dev_alloc(ctx2, &o, &c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
    const size_t flat = 2 * 3 * 3 * 8, r3[3] = {2, 3, 24}, sh[3] = {2, 6, 12};
    clt_tensor *qkv_flat = nt_tensor1(ctx, CLT_DTYPE_F32, flat),
               *qkv_short = nt_tensor(ctx, CLT_DTYPE_F32, 3, sh),
               *qkv_i = nt_tensor(ctx, CLT_DTYPE_I32, 3, r3),
               *y_h = nt_tensor(ctx, CLT_DTYPE_F16, 3, (size_t[]){2, 3, 8}),
               *lse_h = nt_tensor1(ctx, CLT_DTYPE_F16, 12),
               *lse_short = nt_tensor1(ctx, CLT_DTYPE_F32, 11),
               *ws_short = nt_tensor1(ctx, CLT_DTYPE_F32, clt_op_attention_workspace(&g) - 1),
               *dqkv_h = nt_tensor(ctx, CLT_DTYPE_F16, 3, r3);
    tc_poison(d.y);
    tc_poison(d.dqkv);
    const char *fw = "attention_forward", *bw = "attention_backward";
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, d.lse, d.ws, qkv_flat, &g), fw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, d.lse, d.ws, qkv_short, &g), fw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, d.lse, d.ws, qkv_i, &g), fw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(y_h, d.lse, d.ws, d.qkv, &g), fw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, lse_h, d.ws, d.qkv, &g), fw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, lse_short, d.ws, d.qkv, &g), fw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_attention_forward(d.y, d.lse, NULL, d.qkv, &g), fw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_attention_forward(d.y, d.lse, d.ws, o.qkv, &g), fw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_attention_forward(d.y, o.lse, d.ws, d.qkv, &g), fw);
    struct clt_attn_geom bad = g;
    bad.T = 0;
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, d.lse, d.ws, d.qkv, &bad), fw);
    bad = g;
    bad.NH = 4; /* D = 16, not qkv's */
    BAD(CLT_ERR_SHAPE, clt_op_attention_forward(d.y, d.lse, d.ws, d.qkv, &bad), fw);
    bad = g;
    bad.path = (clt_attn_path)7;
    BAD(CLT_ERR_INVALID_ARG, clt_op_attention_forward(d.y, d.lse, d.ws, d.qkv, &bad), fw);
    bad = g;
    bad.path = CLT_ATTN_FLASH;
    bad.HD = CLT_ATTN_FLASH_MAX_HD + 1;
    BAD(CLT_ERR_INVALID_ARG, clt_op_attention_forward(d.y, d.lse, d.ws, d.qkv, &bad), fw);
    /* backward */
    BAD(CLT_ERR_SHAPE, clt_op_attention_backward(dqkv_h, d.ws, d.dy, d.qkv, d.y, d.lse, &g), bw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_backward(d.dqkv, d.ws, d.y, qkv_short, d.y, d.lse, &g),
        bw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_backward(d.dqkv, d.ws, d.qkv, d.qkv, d.y, d.lse, &g), bw);
    BAD(CLT_ERR_SHAPE, clt_op_attention_backward(d.dqkv, ws_short, d.dy, d.qkv, d.y, d.lse, &g),
        bw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_attention_backward(d.dqkv, NULL, d.dy, d.qkv, d.y, d.lse, &g),
        bw);
    BAD(CLT_ERR_DEVICE_MISMATCH,
        clt_op_attention_backward(d.dqkv, d.ws, o.dy, d.qkv, d.y, d.lse, &g), bw);
    /* nothing ran: y and dqkv still hold the poison */
    float got[2 * 3 * 24];
    tc_read(d.y, got);
    for (int i = 0; i < 2 * 3 * 8; i++)
        ck_assert_msg(isnan(got[i]), "y[%d] = %g was written", i, got[i]);
    tc_read(d.dqkv, got);
    for (int i = 0; i < 2 * 3 * 24; i++)
        ck_assert_msg(isnan(got[i]), "dqkv[%d] = %g was written", i, got[i]);
    clt_tensor *ts[] = {qkv_flat, qkv_short, qkv_i, y_h, lse_h, lse_short, ws_short, dqkv_h};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    dev_free(&d);
    dev_free(&o);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds per call of forward (which 0) or forward + backward (1), the best of 3 rounds. */
static double time_path(clt_ctx *ctx, struct att_dev *d, const struct clt_attn_geom *g, int which)
{
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        const int reps = 3;
        TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_DEBUG));
        const double t0 = now_s();
        for (int i = 0; i < reps; i++) {
            TC_OK(ctx, clt_op_attention_forward(d->y, d->lse, d->ws, d->qkv, g));
            if (which)
                TC_OK(ctx, clt_op_attention_backward(d->dqkv, d->ws, d->dy, d->qkv, d->y, d->lse,
                                                     g));
        }
        TC_OK(ctx, clt_ctx_finish(ctx, CLT_WAIT_DEBUG));
        const double s = (now_s() - t0) / reps;
        if (s < best) best = s;
    }
    return best;
}

/* Every path at gpt-mini's and gpt-char's attention shapes, causal: their results agree, and
 * their GFLOP/s are printed (4 B NH T^2 HD flops forward, 2.5 times that backward, halved by
 * the mask: the useful work, whatever a path recomputes). */
START_TEST(test_attention_bench)
{
    static const struct att_case shapes[] = {{12, 64, 4, 32}, {4, 256, 6, 64}};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const struct att_case *c = &shapes[si];
        struct clt_attn_geom g = geom(c, true, CLT_ATTN_REFERENCE);
        struct att_host h[N_PATHS];
        struct att_dev d;
        for (size_t p = 0; p < N_PATHS; p++)
            host_alloc(&h[p], c);
        dev_alloc(ctx, &d, c, CLT_DTYPE_F32, CLT_DTYPE_F32, clt_op_attention_workspace(&g));
        fill_inputs(&r, &h[0], &d);
        const double fwd = 4.0 * c->B * c->NH * c->T * c->T * c->HD / 2, both = fwd * 3.5;
        double secs[N_PATHS][2];
        for (size_t p = 0; p < N_PATHS; p++) {
            g.path = all_paths[p];
            run_device(ctx, &d, &h[p], &g); /* builds the programs, and the results */
            for (int which = 0; which < 2; which++)
                secs[p][which] = time_path(ctx, &d, &g, which);
            printf("attention B%zu T%zu NH%zu HD%zu causal, %-11s: forward %7.3f ms %6.2f "
                   "GFLOP/s, forward+backward %7.3f ms %6.2f GFLOP/s\n",
                   c->B, c->T, c->NH, c->HD, path_name(g.path), secs[p][0] * 1e3,
                   fwd / secs[p][0] * 1e-9, secs[p][1] * 1e3, both / secs[p][1] * 1e-9);
        }
        const size_t ref = N_PATHS - 1;
        for (size_t p = 0; p < ref; p++)
            printf("attention B%zu T%zu NH%zu HD%zu causal: %s %.1fx the reference forward, "
                   "%.1fx forward+backward\n",
                   c->B, c->T, c->NH, c->HD, path_name(all_paths[p]), secs[ref][0] / secs[p][0],
                   secs[ref][1] / secs[p][1]);
        double *want = NT_DOUBLES(h[0].n3);
        for (size_t p = 0; p < ref; p++) {
            char msg[96];
            nt_widen(h[ref].y, want, h[0].ny);
            snprintf(msg, sizeof msg, "bench: %s y against reference", path_name(all_paths[p]));
            tc_check_close(h[p].y, want, h[0].ny, NT_ATOL, NT_RTOL, msg, r.seed);
            nt_widen(h[ref].dqkv, want, h[0].n3);
            snprintf(msg, sizeof msg, "bench: %s dqkv against reference",
                     path_name(all_paths[p]));
            tc_check_close(h[p].dqkv, want, h[0].n3, 1e-4, 1e-3, msg, r.seed);
        }
        free(want);
        dev_free(&d);
        for (size_t p = 0; p < N_PATHS; p++)
            host_free(&h[p]);
    }
    fflush(stdout);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* One decode step (clt_op_attention_decode): y_pos of query row pos alone against the float64
 * causal forward's row pos, at positions 0, 1, the middle and T - 1, for (B, T, NH, HD) with
 * T of 1 and of no power of two, head widths below 16, odd and above the flash kernels' 128,
 * in f32 and 16-bit storage. y and the workspace are poisoned first, and the rows of qkv after
 * pos are NaN on the device: the step must not read them. Then a rerun gives the same bits, and
 * the argument checks. */
START_TEST(test_attention_decode)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    static const struct att_case cases[] = {
        {1, 1, 1, 16}, {2, 17, 3, 24}, {3, 33, 4, 5}, {1, 70, 2, 136}, {1, 100, 4, 32}};
    static const clt_dtype dts[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (size_t di = 0; di < sizeof dts / sizeof *dts; di++) {
            const struct att_case *c = &cases[ci];
            const clt_dtype xd = dts[di];
            const size_t D = c->NH * c->HD, yd[2] = {c->B, D};
            const size_t poss[4] = {0, 1, c->T / 2, c->T - 1};
            struct att_host h;
            host_alloc(&h, c);
            clt_tensor *qkv = nt_tensor(ctx, xd, 3, (size_t[3]){c->B, c->T, 3 * D});
            clt_tensor *y = nt_tensor(ctx, xd, 2, yd);
            clt_tensor *ws = nt_tensor1(ctx, CLT_DTYPE_F32, c->B * c->NH * c->T);
            float *yg = NT_FLOATS(c->B * D), *y2 = NT_FLOATS(c->B * D);
            double *yr = NT_DOUBLES(c->B * D);
            double ya, yrt, ga, gr;
            tols(xd, CLT_DTYPE_F32, &ya, &yrt, &ga, &gr);
            const struct clt_attn_geom g = geom(c, true, CLT_ATTN_AUTO);
            for (int pi = 0; pi < 4; pi++) {
                const size_t pos = poss[pi];
                if (pos >= c->T) continue;
                tc_fill_nonzero(&r, h.qkv, h.n3, 0.1f, 2.0f);
                nt_write_as(qkv, h.qkv, h.qkvd, h.n3);
                ref_attention_forward(h.qkvd, h.yr, NULL, (int)c->B, (int)c->T, (int)c->NH,
                                      (int)c->HD, 1);
                for (size_t b = 0; b < c->B; b++) {
                    memcpy(yr + b * D, h.yr + (b * c->T + pos) * D, D * sizeof *yr);
                    for (size_t t = pos + 1; t < c->T; t++)
                        for (size_t e = 0; e < 3 * D; e++)
                            h.qkv[(b * c->T + t) * 3 * D + e] = NAN;
                }
                nt_write_as(qkv, h.qkv, h.qkvd, h.n3);
                tc_poison(y);
                tc_poison(ws);
                TC_OK(ctx, clt_op_attention_decode(y, ws, qkv, &g, pos));
                nt_read_as_f32(y, yg, c->B * D);
                char what[96];
                snprintf(what, sizeof what, "decode (%zu, %zu, %zu, %zu) %s pos %zu", c->B, c->T,
                         c->NH, c->HD, clt_dtype_name(xd), pos);
                tc_check_close(yg, yr, c->B * D, ya, yrt, what, r.seed);
                tc_poison(y);
                TC_OK(ctx, clt_op_attention_decode(y, ws, qkv, &g, pos));
                nt_read_as_f32(y, y2, c->B * D);
                ck_assert_msg(memcmp(yg, y2, c->B * D * sizeof *yg) == 0, "%s: rerun differs",
                              what);
            }
            if (ci == 1 && di == 0) { /* the checks */
                ck_assert_int_eq(clt_op_attention_decode(y, ws, qkv, &g, c->T), CLT_ERR_SHAPE);
                ck_assert(tc_contains(clt_ctx_errmsg(ctx), "position 17 is past the T = 17"));
                ck_assert_int_eq(clt_op_attention_decode(y, NULL, qkv, &g, 0),
                                 CLT_ERR_INVALID_ARG);
                ck_assert_int_eq(clt_op_attention_decode(qkv, ws, qkv, &g, 0), CLT_ERR_SHAPE);
            }
            clt_tensor_free(qkv);
            clt_tensor_free(y);
            clt_tensor_free(ws);
            free(yg);
            free(y2);
            free(yr);
            host_free(&h);
        }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tc_tcase("attention");
    tcase_add_test(tc, test_attention_reference);
    tcase_add_test(tc, test_attention_flash_rows);
    tcase_add_test(tc, test_attention_flash_tiled);
    tcase_add_test(tc, test_attention_half_storage);
    tcase_add_test(tc, test_attention_auto);
    tcase_add_test(tc, test_attention_causal);
    tcase_add_test(tc, test_attention_local_size);
    tcase_add_test(tc, test_attention_ref_finite_differences);
    tcase_add_test(tc, test_attention_errors);
    if (tc_small())
        tc_skip_case("test_attention_bench", "GPT shapes at full size only (CLTRAIN_TEST_SMALL)");
    else
        tcase_add_test(tc, test_attention_bench);
    suite_add_tcase(s, tc);
    TCase *dec = tc_tcase("decode"); /* CK_RUN_CASE=decode runs it alone */
    tcase_add_test(dec, test_attention_decode);
    suite_add_tcase(s, dec);
    return tc_run(s);
}
