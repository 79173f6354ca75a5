/* Tests of clt_op_embedding_forward, clt_op_add_positions and clt_op_embedding_backward
 * (cl/embedding.cl) against the float64 references of tests/ref/ref_nn.c: random ids, every
 * position a copy of one token, all ids distinct, V = 1, V and D no multiple of any work-group
 * (V up to 65536; 50257, the GPT-2 vocabulary), i32, u16 and u8 ids, f16/bf16 storage; the forward with and
 * without the position table; the backward with beta 0 (gradients poisoned, so not read) and
 * beta 1; ids outside [0, V) (NaN rows, no gradient); bit-identical reruns, and the whole
 * backward sequence replayed with every local size of nt_local_sizes; finite differences of the
 * reference backward; the argument checks. Every output poisoned (NaN) before the op runs,
 * through views at an offset.
 * Tolerances: the forward is one f32 addition (fp32: atol 1e-5, rtol 1e-4; a 16-bit output adds
 * its rounding: f16 2e-3, bf16 1e-2). A gradient element sums n terms in f32 in a fixed order:
 * it passes within atol 1e-5 + rtol 1e-4 |ref| + (n - 1) 2^-24 sum |terms| (the f32 summation
 * bound, so many copies of one token cannot fail it spuriously, while one term lost or added, of
 * magnitude at least 0.05 here, always exceeds it), and the whole gradient keeps the normalised
 * MSE <= 1e-7. The references use the values the device holds (rounded 16-bit inputs). */
#include "ops/nn_testutil.h"
#include "ref/ref_nn.h"
#include "small.h"

#include <stdint.h>

/* How the ids are drawn. */
enum ids_kind { IDS_RANDOM, IDS_REPEATED, IDS_DISTINCT };

struct emb_case {
    size_t B, T, V, D;
    enum ids_kind kind;
    clt_dtype id_dtype, x_dtype;
};

/* R ids in [0, V) as `kind` says (IDS_DISTINCT needs R <= V). */
static void draw_ids(tc_rng *r, int32_t *ids, size_t R, size_t V, enum ids_kind kind)
{
    const int32_t one = (int32_t)(tc_u64(r) % V);
    for (size_t i = 0; i < R; i++)
        ids[i] = kind == IDS_REPEATED ? one : (int32_t)(tc_u64(r) % V);
    if (kind == IDS_DISTINCT) { /* a random permutation's first R entries */
        int32_t *all = nt_alloc(V, sizeof *all);
        for (size_t i = 0; i < V; i++)
            all[i] = (int32_t)i;
        for (size_t i = 0; i < R; i++) {
            size_t j = i + tc_u64(r) % (V - i);
            int32_t t = all[i];
            all[i] = all[j];
            all[j] = t;
            ids[i] = all[i];
        }
        free(all);
    }
}

/* The ids into a tensor of dtype d (i32, u16 or u8). */
static clt_tensor *upload_ids(clt_ctx *ctx, clt_dtype d, const int32_t *ids, size_t R)
{
    clt_tensor *t = nt_tensor1(ctx, d, R);
    if (d == CLT_DTYPE_I32) {
        tc_write(t, ids);
    } else if (d == CLT_DTYPE_U16) {
        uint16_t *u = nt_alloc(R, sizeof *u);
        for (size_t i = 0; i < R; i++)
            u[i] = (uint16_t)ids[i];
        tc_write(t, u);
        free(u);
    } else {
        uint8_t *u = nt_alloc(R, 1);
        for (size_t i = 0; i < R; i++)
            u[i] = (uint8_t)ids[i];
        tc_write(t, u);
        free(u);
    }
    return t;
}

static void tol(clt_dtype d, double *atol, double *rtol)
{
    *atol = d == CLT_DTYPE_F32 ? NT_ATOL : d == CLT_DTYPE_F16 ? 2e-3 : 1e-2;
    *rtol = d == CLT_DTYPE_F32 ? NT_RTOL : *atol;
}

/* A gradient against its reference (see the header): bound[i] = (n - 1) 2^-24 sum |terms|. */
static void check_grad(const float *got, const double *ref, const double *bound, size_t n,
                       const char *what, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        ck_assert_msg(err <= NT_ATOL + NT_RTOL * fabs(ref[i]) + bound[i],
                      "%s[%zu] = %.9g, reference %.9g (bound %.3g); seed %llu", what, i,
                      (double)got[i], ref[i], bound[i], (unsigned long long)seed);
    }
    nt_check_nmse(got, ref, n, what, seed);
}

/* The summation bounds of the table's (by token) and the positions' (by position) gradients. */
static void grad_bounds(const int32_t *ids, const double *dy, double *bt, double *bp, size_t R,
                        size_t V, size_t T, size_t D)
{
    double *cnt_t = NT_DOUBLES(V), *cnt_p = NT_DOUBLES(T);
    for (size_t i = 0; i < V * D; i++)
        bt[i] = 0.0;
    for (size_t i = 0; i < T * D; i++)
        bp[i] = 0.0;
    for (size_t r = 0; r < R; r++) {
        if (ids[r] >= 0 && (size_t)ids[r] < V) cnt_t[ids[r]] += 1.0;
        cnt_p[r % T] += 1.0;
        for (size_t j = 0; j < D; j++) {
            if (ids[r] >= 0 && (size_t)ids[r] < V) bt[ids[r] * D + j] += fabs(dy[r * D + j]);
            bp[(r % T) * D + j] += fabs(dy[r * D + j]);
        }
    }
    const double u = ldexp(1.0, -24);
    for (size_t i = 0; i < V * D; i++)
        bt[i] *= u * (cnt_t[i / D] > 1.0 ? cnt_t[i / D] - 1.0 : 0.0);
    for (size_t i = 0; i < T * D; i++)
        bp[i] *= u * (cnt_p[i / D] - 1.0);
    free(cnt_t);
    free(cnt_p);
}

/* One case: forward with and without positions, backward with beta 0 and 1, reruns. */
static void check_case(clt_ctx *ctx, tc_rng *r, const struct emb_case *c)
{
    const size_t R = c->B * c->T, V = c->V, T = c->T, D = c->D;
    const clt_dtype xd = c->x_dtype;
    int32_t *ids = nt_alloc(R, sizeof *ids);
    float *table = NT_FLOATS(V * D), *pos = NT_FLOATS(T * D), *dy = NT_FLOATS(R * D),
          *got = NT_FLOATS(R * D), *gt = NT_FLOATS(V * D), *gt2 = NT_FLOATS(V * D),
          *gp = NT_FLOATS(T * D), *gp2 = NT_FLOATS(T * D), *old_t = NT_FLOATS(V * D),
          *old_p = NT_FLOATS(T * D);
    double *tabled = NT_DOUBLES(V * D), *posd = NT_DOUBLES(T * D), *dyd = NT_DOUBLES(R * D),
           *ref = NT_DOUBLES(R * D), *rt = NT_DOUBLES(V * D), *rp = NT_DOUBLES(T * D),
           *bt = NT_DOUBLES(V * D), *bp = NT_DOUBLES(T * D);
    draw_ids(r, ids, R, V, c->kind);
    tc_fill_nonzero(r, table, V * D, 0.1f, 2.0f);
    tc_fill_nonzero(r, pos, T * D, 0.1f, 2.0f);
    tc_fill_nonzero(r, dy, R * D, 0.05f, 2.0f);
    tc_fill_nonzero(r, old_t, V * D, 0.1f, 1.0f);
    tc_fill_nonzero(r, old_p, T * D, 0.1f, 1.0f);
    clt_tensor *idt = upload_ids(ctx, c->id_dtype, ids, R),
               *tt = nt_tensor2(ctx, xd, V, D), *pt = nt_tensor2(ctx, xd, T, D),
               *dyt = nt_tensor2(ctx, xd, R, D), *out = nt_tensor2(ctx, xd, R, D),
               *dtt = nt_tensor2(ctx, CLT_DTYPE_F32, V, D),
               *dpt = nt_tensor2(ctx, CLT_DTYPE_F32, T, D),
               *ws = nt_tensor1(ctx, CLT_DTYPE_I32, clt_op_embedding_workspace(R, V));
    nt_write_as(tt, table, tabled, V * D);
    nt_write_as(pt, pos, posd, T * D);
    nt_write_as(dyt, dy, dyd, R * D);
    char what[160], msg[200];
    static const char *const kinds[] = {"random", "repeated", "distinct"};
    snprintf(what, sizeof what, "embedding B%zu T%zu V%zu D%zu %s ids %s, %s", c->B, T, V, D,
             kinds[c->kind], clt_dtype_name(c->id_dtype), clt_dtype_name(xd));
    double atol, rtol;
    tol(xd, &atol, &rtol);

    /* forward, with the positions and without */
    for (int with_pos = 1; with_pos >= 0; with_pos--) {
        tc_poison(out);
        TC_OK(ctx, clt_op_embedding_forward(out, idt, tt, with_pos ? pt : NULL));
        ref_embedding_forward(ids, tabled, with_pos ? posd : NULL, ref, (int)R, (int)V, (int)T,
                              (int)D);
        nt_read_as_f32(out, got, R * D);
        snprintf(msg, sizeof msg, "%s: out%s", what, with_pos ? " + pos" : "");
        tc_check_close(got, ref, R * D, atol, rtol, msg, r->seed);
    }

    /* backward, beta 0: both gradients poisoned, so a read of them would show */
    ref_embedding_backward(ids, dyd, rt, rp, (int)R, (int)V, (int)T, (int)D);
    grad_bounds(ids, dyd, bt, bp, R, V, T, D);
    tc_poison(dtt);
    tc_poison(dpt);
    tc_poison(ws);
    TC_OK(ctx, clt_op_embedding_backward(dtt, dpt, dyt, idt, ws, 0.0f));
    tc_read(dtt, gt);
    tc_read(dpt, gp);
    snprintf(msg, sizeof msg, "%s: dtable", what);
    check_grad(gt, rt, bt, V * D, msg, r->seed);
    snprintf(msg, sizeof msg, "%s: dpos", what);
    check_grad(gp, rp, bp, T * D, msg, r->seed);

    /* the same bits again (workspace poisoned), and for each gradient alone */
    tc_poison(dtt);
    tc_poison(ws);
    TC_OK(ctx, clt_op_embedding_backward(dtt, NULL, dyt, idt, ws, 0.0f));
    tc_read(dtt, gt2);
    ck_assert_msg(nt_same_bits(gt, gt2, V * D), "%s: dtable not bit-identical", what);
    tc_poison(dpt);
    TC_OK(ctx, clt_op_embedding_backward(NULL, dpt, dyt, NULL, NULL, 0.0f));
    tc_read(dpt, gp2);
    ck_assert_msg(nt_same_bits(gp, gp2, T * D), "%s: dpos not bit-identical", what);

    /* beta 1 accumulates into the previous gradients */
    tc_write(dtt, old_t);
    tc_write(dpt, old_p);
    TC_OK(ctx, clt_op_embedding_backward(dtt, dpt, dyt, idt, ws, 1.0f));
    for (size_t i = 0; i < V * D; i++)
        rt[i] += old_t[i];
    for (size_t i = 0; i < T * D; i++)
        rp[i] += old_p[i];
    tc_read(dtt, gt);
    tc_read(dpt, gp);
    snprintf(msg, sizeof msg, "%s: dtable (beta 1)", what);
    check_grad(gt, rt, bt, V * D, msg, r->seed);
    snprintf(msg, sizeof msg, "%s: dpos (beta 1)", what);
    check_grad(gp, rp, bp, T * D, msg, r->seed);

    clt_tensor *ts[] = {idt, tt, pt, dyt, out, dtt, dpt, ws};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    void *ps[] = {ids, table, pos, dy, got, gt, gt2, gp, gp2, old_t, old_p,
                  tabled, posd, dyd, ref, rt, rp, bt, bp};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        free(ps[i]);
}

#define I32 CLT_DTYPE_I32
#define U8 CLT_DTYPE_U8
#define U16 CLT_DTYPE_U16
#define F32 CLT_DTYPE_F32

START_TEST(test_embedding_f32)
{
    /* B, T, V, D: one of everything; random ids; every position one token; all distinct; V and
     * D no multiple of any work-group; the GPT-2 vocabulary (its table 50257 x 8) */
    static const struct emb_case full[] = {
        {1, 1, 1, 1, IDS_RANDOM, I32, F32},        {3, 17, 50, 7, IDS_RANDOM, I32, F32},
        {5, 64, 300, 33, IDS_REPEATED, I32, F32},  {4, 16, 1000, 17, IDS_DISTINCT, I32, F32},
        {2, 100, 1000, 768, IDS_RANDOM, I32, F32}, {3, 64, 50257, 8, IDS_RANDOM, I32, F32},
        {6, 40, 256, 5, IDS_RANDOM, U8, F32},      {2, 9, 256, 3, IDS_DISTINCT, U8, F32},
        {4, 31, 65, 2, IDS_REPEATED, U8, F32},     {3, 64, 50257, 3, IDS_RANDOM, U16, F32},
        {2, 50, 65536, 2, IDS_DISTINCT, U16, F32},
    };
    static const struct emb_case small[] = {
        {1, 1, 1, 1, IDS_RANDOM, I32, F32},        {3, 17, 50, 7, IDS_RANDOM, I32, F32},
        {3, 40, 300, 9, IDS_REPEATED, I32, F32},   {4, 16, 1000, 3, IDS_DISTINCT, I32, F32},
        {2, 20, 100, 300, IDS_RANDOM, I32, F32},   {1, 33, 50257, 1, IDS_RANDOM, I32, F32},
        {6, 40, 256, 5, IDS_RANDOM, U8, F32},      {2, 9, 256, 3, IDS_DISTINCT, U8, F32},
        {4, 31, 65, 2, IDS_REPEATED, U8, F32},     {2, 17, 1000, 1, IDS_RANDOM, U16, F32},
        {2, 9, 65536, 1, IDS_DISTINCT, U16, F32},
    };
    const struct emb_case *cases = TC_SMALL_OR(full, small);
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t i = 0; i < sizeof full / sizeof *full; i++)
        check_case(ctx, &r, &cases[i]);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_embedding_half_storage)
{
    static const clt_dtype ds[] = {CLT_DTYPE_F16, CLT_DTYPE_BF16};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t i = 0; i < 2; i++) {
        const struct emb_case c1 = {3, 17, 50, 7, IDS_RANDOM, I32, ds[i]},
                              c2 = {2, 21, 256, 5, IDS_REPEATED, U8, ds[i]};
        check_case(ctx, &r, &c1);
        check_case(ctx, &r, &c2);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Ids outside [0, V): a NaN row in the forward, nothing added to the table's gradient (i32:
 * negative and V and above; u8: V and above). */
START_TEST(test_embedding_out_of_range)
{
    enum { R = 6, V = 5, D = 3 };
    const int32_t ids32[R] = {0, -1, 4, 5, 2, 1000};
    const uint8_t ids8[R] = {0, 255, 4, 5, 2, 9};
    const bool bad[R] = {false, true, false, true, false, true};
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    float table[V * D], dy[R * D], out[R * D], dt[V * D];
    double dyd[R * D], rt[V * D];
    tc_fill_nonzero(&r, table, V * D, 0.1f, 2.0f);
    tc_fill_nonzero(&r, dy, R * D, 0.1f, 2.0f);
    nt_widen(dy, dyd, R * D);
    /* the reference over the valid rows only */
    int32_t valid[R];
    for (int i = 0; i < R; i++)
        valid[i] = bad[i] ? 0 : ids32[i];
    double dyv[R * D];
    for (int i = 0; i < R * D; i++)
        dyv[i] = bad[i / D] ? 0.0 : dyd[i];
    ref_embedding_backward(valid, dyv, rt, NULL, R, V, 1, D);
    for (int u8 = 0; u8 < 2; u8++) {
        clt_tensor *idt = nt_tensor1(ctx, u8 ? U8 : I32, R), *tt = nt_tensor2(ctx, F32, V, D),
                   *ot = nt_tensor2(ctx, F32, R, D), *dyt = nt_tensor2(ctx, F32, R, D),
                   *dtt = nt_tensor2(ctx, F32, V, D),
                   *ws = nt_tensor1(ctx, I32, clt_op_embedding_workspace(R, V));
        if (u8)
            tc_write(idt, ids8);
        else
            tc_write(idt, ids32);
        tc_write(tt, table);
        tc_write(dyt, dy);
        tc_poison(ot);
        tc_poison(dtt);
        TC_OK(ctx, clt_op_embedding_forward(ot, idt, tt, NULL));
        TC_OK(ctx, clt_op_embedding_backward(dtt, NULL, dyt, idt, ws, 0.0f));
        tc_read(ot, out);
        tc_read(dtt, dt);
        for (int i = 0; i < R; i++)
            for (int j = 0; j < D; j++) {
                if (bad[i])
                    ck_assert_msg(isnan(out[i * D + j]), "%s row %d: %g, expected NaN",
                                  u8 ? "u8" : "i32", i, out[i * D + j]);
                else
                    ck_assert(out[i * D + j] == table[(u8 ? ids8[i] : ids32[i]) * D + j]);
            }
        tc_check_close(dt, rt, V * D, NT_ATOL, NT_RTOL, u8 ? "u8 dtable" : "i32 dtable", r.seed);
        clt_tensor *ts[] = {idt, tt, ot, dyt, dtt, ws};
        for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
            clt_tensor_free(ts[i]);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* clt_op_add_positions against the reference (x + pos[r % T]), out of place and in place. */
START_TEST(test_embedding_add_positions)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {3, 17, 7}, {2, 64, 300}}; /* B, T, D */
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const size_t B = shapes[si][0], T = shapes[si][1], D = shapes[si][2], R = B * T;
        float *x = NT_FLOATS(R * D), *pos = NT_FLOATS(T * D), *got = NT_FLOATS(R * D);
        double *ref = NT_DOUBLES(R * D);
        tc_fill_nonzero(&r, x, R * D, 0.1f, 2.0f);
        tc_fill_nonzero(&r, pos, T * D, 0.1f, 2.0f);
        for (size_t i = 0; i < R * D; i++)
            ref[i] = (double)x[i] + pos[(i / D % T) * D + i % D];
        clt_tensor *xt = nt_tensor2(ctx, F32, R, D), *yt = nt_tensor2(ctx, F32, R, D),
                   *pt = nt_tensor2(ctx, F32, T, D);
        tc_write(xt, x);
        tc_write(pt, pos);
        tc_poison(yt);
        TC_OK(ctx, clt_op_add_positions(yt, xt, pt));
        tc_read(yt, got);
        tc_check_close(got, ref, R * D, NT_ATOL, NT_RTOL, "add_positions", r.seed);
        TC_OK(ctx, clt_op_add_positions(xt, xt, pt));
        tc_read(xt, got);
        tc_check_close(got, ref, R * D, NT_ATOL, NT_RTOL, "add_positions in place", r.seed);
        clt_tensor_free(xt);
        clt_tensor_free(yt);
        clt_tensor_free(pt);
        free(x);
        free(pos);
        free(got);
        free(ref);
    }
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The whole backward sequence replayed by hand with each local size (the arguments as the op
 * left them, the sort stages' k and j set per launch), workspace and gradient poisoned first:
 * the bits of the op's own launch every time. Repeated tokens (every id one of three) and a
 * length that is no power of two, so the padding sorts too. */
START_TEST(test_embedding_local_size)
{
    const size_t B = 3, T = tc_size(77, 21), V = 1003, D = tc_size(19, 5), R = B * T;
    tc_rng r = tc_rng_for(__func__);
    clt_ctx *ctx = tc_ctx();
    int32_t *ids = nt_alloc(R, sizeof *ids);
    for (size_t i = 0; i < R; i++)
        ids[i] = (int32_t)(tc_u64(&r) % 3) * 401;
    float *dy = NT_FLOATS(R * D), *first = NT_FLOATS(V * D), *got = NT_FLOATS(V * D);
    tc_fill_nonzero(&r, dy, R * D, 0.05f, 2.0f);
    clt_tensor *idt = upload_ids(ctx, I32, ids, R), *dyt = nt_tensor2(ctx, F32, R, D),
               *dtt = nt_tensor2(ctx, F32, V, D),
               *ws = nt_tensor1(ctx, I32, clt_op_embedding_workspace(R, V));
    tc_write(dyt, dy);
    TC_OK(ctx, clt_op_embedding_backward(dtt, NULL, dyt, idt, ws, 0.0f));
    tc_read(dtt, first);
    char opts[48];
    clt__opts_embedding(opts, sizeof opts, F32, I32);
    cl_kernel init = nt_kernel(ctx, "embedding", opts, "embedding_sort_init"),
              step = nt_kernel(ctx, "embedding", opts, "embedding_sort_step"),
              offs = nt_kernel(ctx, "embedding", opts, "embedding_offsets"),
              grad = nt_kernel(ctx, "embedding", opts, "embedding_backward_table");
    size_t P = 1;
    while (P < R)
        P *= 2;
    int tried = 0;
    for (size_t li = 0; li < NT_N_LOCAL_SIZES; li++) {
        const size_t l = nt_local_sizes[li];
        tc_poison(ws);
        tc_poison(dtt);
        if (!nt_launch_local(ctx, init, (P + l - 1) / l, l)) continue;
        for (cl_uint k = 2; k <= P; k *= 2)
            for (cl_uint j = k / 2; j > 0; j /= 2) {
                ck_assert_int_eq(clSetKernelArg(step, 5, sizeof k, &k), CL_SUCCESS);
                ck_assert_int_eq(clSetKernelArg(step, 6, sizeof j, &j), CL_SUCCESS);
                ck_assert(nt_launch_local(ctx, step, (P / 2 + l - 1) / l, l));
            }
        ck_assert(nt_launch_local(ctx, offs, (V + 1 + l - 1) / l, l));
        ck_assert(nt_launch_local(ctx, grad, (V * D + l - 1) / l, l));
        tried++;
        tc_read(dtt, got);
        ck_assert_msg(nt_same_bits(first, got, V * D), "dtable differs with local size %zu", l);
    }
    ck_assert_int_ge(tried, 4);
    clt_tensor *ts[] = {idt, dyt, dtt, ws};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    free(ids);
    free(dy);
    free(first);
    free(got);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* The reference backward against central finite differences of f = sum(y dy) in double, with
 * respect to every table and position entry (repeated tokens included). */
START_TEST(test_embedding_ref_finite_differences)
{
    enum { B = 3, T = 4, V = 5, D = 3, R = B * T };
    tc_rng r = tc_rng_for(__func__);
    int32_t ids[R];
    draw_ids(&r, ids, R, V, IDS_RANDOM);
    ids[0] = ids[5] = ids[7] = 2; /* a token seen three times */
    double table[V * D], pos[T * D], dy[R * D], y[R * D], dt[V * D], dp[T * D];
    for (int i = 0; i < V * D; i++)
        table[i] = tc_uniform(&r, -2.0, 2.0);
    for (int i = 0; i < T * D; i++)
        pos[i] = tc_uniform(&r, -2.0, 2.0);
    for (int i = 0; i < R * D; i++)
        dy[i] = tc_uniform(&r, -2.0, 2.0);
    ref_embedding_backward(ids, dy, dt, dp, R, V, T, D);
    const double h = 1e-6;
    for (int k = 0; k < V * D + T * D; k++) {
        double *v = k < V * D ? &table[k] : &pos[k - V * D];
        const double want = k < V * D ? dt[k] : dp[k - V * D], v0 = *v;
        double f[2];
        for (int side = 0; side < 2; side++) {
            *v = v0 + (side ? -h : h);
            ref_embedding_forward(ids, table, pos, y, R, V, T, D);
            f[side] = 0.0;
            for (int j = 0; j < R * D; j++)
                f[side] += y[j] * dy[j];
        }
        *v = v0;
        const double fd = (f[0] - f[1]) / (2 * h);
        ck_assert_msg(fabs(fd - want) <= 1e-6 + 1e-5 * fabs(want),
                      "gradient %d = %.9g, finite difference %.9g; seed %llu", k, want, fd,
                      (unsigned long long)r.seed);
    }
}
END_TEST

#define BAD(want, expr, opname)                                                                    \
    do {                                                                                           \
        ck_assert_int_eq((expr), (want));                                                          \
        ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), opname) ||                                  \
                          (want) == CLT_ERR_DEVICE_MISMATCH,                                       \
                      "%s: message \"%s\"", #expr, clt_ctx_errmsg(ctx));                           \
    } while (0)

START_TEST(test_embedding_errors)
{
    clt_ctx *ctx = tc_ctx(), *ctx2 = tc_ctx();
    /* R = 6 ids, V = 5, D = 3, T = 3 */
    clt_tensor *ids = nt_tensor1(ctx, I32, 6), *idf = nt_tensor1(ctx, F32, 6),
               *id5 = nt_tensor1(ctx, I32, 5), *table = nt_tensor2(ctx, F32, 5, 3),
               *tablei = nt_tensor2(ctx, I32, 5, 3), *out = nt_tensor2(ctx, F32, 6, 3),
               *outh = nt_tensor2(ctx, CLT_DTYPE_F16, 6, 3), *out5 = nt_tensor2(ctx, F32, 5, 3),
               *pos = nt_tensor2(ctx, F32, 3, 3), *pos4 = nt_tensor2(ctx, F32, 4, 3),
               *pos2 = nt_tensor2(ctx, F32, 3, 2), *posh = nt_tensor2(ctx, CLT_DTYPE_F16, 3, 3),
               *dt = nt_tensor2(ctx, F32, 5, 3), *dt2 = nt_tensor2(ctx, F32, 5, 2),
               *dth = nt_tensor2(ctx, CLT_DTYPE_F16, 5, 3),
               *ws = nt_tensor1(ctx, I32, clt_op_embedding_workspace(6, 5)),
               *ws_short = nt_tensor1(ctx, I32, clt_op_embedding_workspace(6, 5) - 1),
               *wsf = nt_tensor1(ctx, F32, 20), *other = nt_tensor2(ctx2, F32, 5, 3);
    const int32_t idv[6] = {0, 1, 2, 3, 4, 0};
    tc_write(ids, idv);
    tc_poison(out);
    const char *fw = "embedding_forward", *bw = "embedding_backward", *ap = "add_positions";
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, idf, table, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, id5, table, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, ids, tablei, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(outh, ids, table, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out5, ids, table, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, ids, table, pos4), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, ids, table, pos2), fw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_forward(out, ids, table, posh), fw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_embedding_forward(out, ids, other, NULL), fw);
    BAD(CLT_ERR_SHAPE, clt_op_add_positions(out, out, pos4), ap);
    BAD(CLT_ERR_SHAPE, clt_op_add_positions(out5, out, pos), ap);
    BAD(CLT_ERR_SHAPE, clt_op_add_positions(out, ids, pos), ap);
    /* backward: out as dy */
    BAD(CLT_ERR_INVALID_ARG, clt_op_embedding_backward(dt, NULL, out, NULL, ws, 0.0f), bw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_embedding_backward(dt, NULL, out, ids, NULL, 0.0f), bw);
    BAD(CLT_ERR_INVALID_ARG, clt_op_embedding_backward(dt, NULL, out, ids, ws, NAN), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(dt, NULL, out, ids, ws_short, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(dt, NULL, out, ids, wsf, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(dt2, NULL, out, ids, ws, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(dth, NULL, out, ids, ws, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(dt, NULL, out, id5, ws, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(NULL, pos4, out, NULL, NULL, 0.0f), bw);
    BAD(CLT_ERR_SHAPE, clt_op_embedding_backward(NULL, posh, out, NULL, NULL, 0.0f), bw);
    BAD(CLT_ERR_DEVICE_MISMATCH, clt_op_embedding_backward(other, NULL, out, ids, ws, 0.0f), bw);
    float got[18];
    tc_read(out, got);
    for (int i = 0; i < 18; i++)
        ck_assert_msg(isnan(got[i]), "out[%d] = %g was written", i, got[i]);
    clt_tensor *ts[] = {ids, idf,  id5, table, tablei, out, outh, out5,     pos, pos4,
                        pos2, posh, dt, dt2,  dth,    ws,  ws_short, wsf, other};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        clt_tensor_free(ts[i]);
    clt_ctx_free(ctx);
    clt_ctx_free(ctx2);
    tc_assert_no_live();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("embedding");
    TCase *tc = tc_tcase("embedding");
    tcase_add_test(tc, test_embedding_f32);
    tcase_add_test(tc, test_embedding_half_storage);
    tcase_add_test(tc, test_embedding_out_of_range);
    tcase_add_test(tc, test_embedding_add_positions);
    tcase_add_test(tc, test_embedding_local_size);
    tcase_add_test(tc, test_embedding_ref_finite_differences);
    tcase_add_test(tc, test_embedding_errors);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
