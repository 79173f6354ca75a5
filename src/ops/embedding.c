/* C wrappers of cl/embedding.cl: token embedding with optional learned positions (forward: a
 * gather of table rows by id, the position rows added in the same pass; backward: the table's
 * gradient by a deterministic sorted scatter-add, the positions' as a sum over the batch), and
 * positions added to any input. Tables and activations f32, f16 or bf16; ids i32, u16 or u8;
 * gradients f32. */
#include "ops/nn_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

enum {
    EMB_FORWARD,
    EMB_ADD_POS,
    EMB_SORT_INIT,
    EMB_SORT_STEP,
    EMB_OFFSETS,
    EMB_BACKWARD_TABLE,
    EMB_BACKWARD_POS,
    EMB__KERNELS
};
static const char *const emb_names[EMB__KERNELS] = {
    "embedding_forward", "embedding_add_positions",  "embedding_sort_init",
    "embedding_sort_step", "embedding_offsets",      "embedding_backward_table",
    "embedding_backward_positions"};

/* The id dtypes, numbered for the slots: i32 (any vocabulary), u8 (up to 256 tokens), u16 (up
 * to 65,536), as the text data keeps them. */
#define EMB_ID_DTYPES 3
static const clt_dtype emb_ids[EMB_ID_DTYPES] = {CLT_DTYPE_I32, CLT_DTYPE_U8, CLT_DTYPE_U16};
static int id_index(clt_dtype d)
{
    return d == CLT_DTYPE_U8 ? 1 : d == CLT_DTYPE_U16 ? 2 : 0;
}

/* The ctx's kernel `which` for float dtype xd and id dtype idd, built on first use. */
static clt_status emb_kernel(clt_ctx *ctx, int which, clt_dtype xd, clt_dtype idd, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_embedding,
                                 (which * CLT__FLOAT_DTYPES + (int)xd) * EMB_ID_DTYPES +
                                     id_index(idd),
                                 &slot);
    if (st == CLT_OK && !*slot) {
        char opts[48];
        clt__opts_embedding(opts, sizeof opts, xd, idd);
        st = clt__kernel(ctx, "embedding", opts, emb_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* A table (rows, D) of a float dtype: D = its last dimension in [1, 2^31), rows = numel / D
 * in [1, 2^31). */
static clt_status table_rows(const clt_tensor *t, const char *op, const char *what, size_t *rows,
                             size_t *D)
{
    clt_status st = clt__nn_need_float(t, op, what);
    if (st != CLT_OK) return st;
    *D = clt__nn_last_dim(t);
    *rows = *D ? clt_tensor_numel(t) / *D : 0;
    if (*D < 1 || *D > INT32_MAX || *rows < 1 || *rows > INT32_MAX)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "%s: %s is (%zu, %zu); both dimensions must be in [1, 2^31)", op, what,
                         *rows, *D);
    return CLT_OK;
}

/* ids: i32 or u8 on t's ctx, n elements (R, below 2^32 - 1). */
static clt_status check_ids(const clt_tensor *t, const clt_tensor *ids, size_t n, const char *op)
{
    clt_status st = clt_tensor_same_ctx(t, ids);
    if (st != CLT_OK) return st;
    clt_dtype d = clt_tensor_dtype(ids);
    if (d != CLT_DTYPE_I32 && d != CLT_DTYPE_U8 && d != CLT_DTYPE_U16)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "%s: ids are %s; expected i32, u16 or u8", op, clt_dtype_name(d));
    return clt__nn_need_numel(ids, n, op, "ids (one per row)");
}

/* R rows of D (a float tensor on t's ctx with `dtype`) whose row count is a multiple of the T
 * rows of the position table pos, which must be (T, D) of the same dtype. */
static clt_status check_pos(const clt_tensor *x, const clt_tensor *pos, size_t R, size_t D,
                            clt_dtype dtype, const char *op, const char *what, size_t *T)
{
    size_t t = 0, d = 0;
    clt_status st = clt_tensor_same_ctx(x, pos);
    if (st == CLT_OK) st = table_rows(pos, op, what, &t, &d);
    if (st == CLT_OK) st = clt__nn_need_dtype(pos, dtype, op, what);
    if (st != CLT_OK) return st;
    if (d != D || R % t != 0)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE,
                         "%s: %s is (%zu, %zu); expected (T, %zu) with T dividing the %zu rows",
                         op, what, t, d, D, R);
    *T = t;
    return CLT_OK;
}

clt_status clt_op_embedding_forward(clt_tensor *out, const clt_tensor *ids,
                                    const clt_tensor *table, const clt_tensor *pos)
{
    static const char op[] = "embedding_forward";
    clt_status st = CLT_OK;
    CLT_ASSERT(out && ids && table);
    clt_ctx *ctx = clt_tensor_ctx(table);
    size_t V = 0, D = 0, T = 1, R = 0;
    cl_kernel k;
    CLT_TRY(table_rows(table, op, "table", &V, &D));
    R = clt_tensor_numel(ids);
    if (R >= UINT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: %zu ids are above 2^32 - 2", op, R);
    CLT_TRY(check_ids(table, ids, R, op));
    CLT_TRY(clt_tensor_same_ctx(table, out));
    CLT_TRY(clt__nn_need_dtype(out, clt_tensor_dtype(table), op, "out (as the table)"));
    CLT_TRY(clt__nn_need_numel(out, R * D, op, "out (ids x D)"));
    if (pos) CLT_TRY(check_pos(table, pos, R, D, clt_tensor_dtype(table), op, "pos", &T));
    if (R == 0) goto fail;
    CLT_TRY(emb_kernel(ctx, EMB_FORWARD, clt_tensor_dtype(table), clt_tensor_dtype(ids), &k));
    {
        const clt_tensor *p = pos ? pos : table; /* never read without pos */
        cl_mem om = clt_tensor_mem(out), tm = clt_tensor_mem(table), im = clt_tensor_mem(ids),
               pm = clt_tensor_mem(p);
        cl_ulong oo = clt_tensor_offset(out), to = clt_tensor_offset(table),
                 io = clt_tensor_offset(ids), po = clt_tensor_offset(p), r = R;
        cl_uint d = (cl_uint)D, t = (cl_uint)T, v = (cl_uint)V;
        cl_int has_pos = pos != NULL;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(om), CLT__ARG(oo), CLT__ARG(tm), CLT__ARG(to),
                          CLT__ARG(im), CLT__ARG(io), CLT__ARG(pm), CLT__ARG(po), CLT__ARG(r),
                          CLT__ARG(d), CLT__ARG(t), CLT__ARG(v), CLT__ARG(has_pos)));
        CLT_TRY(clt__launch_rows(ctx, k, D, R, op));
    }
fail:
    return st;
}

clt_status clt_op_add_positions(clt_tensor *y, const clt_tensor *x, const clt_tensor *pos)
{
    static const char op[] = "add_positions";
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x && pos);
    clt_ctx *ctx = clt_tensor_ctx(x);
    size_t R = 0, D = 0, T = 0;
    cl_kernel k;
    CLT_TRY(clt__nn_need_float(x, op, "x"));
    CLT_TRY(clt__check_pair(y, x, true, op));
    D = clt__nn_last_dim(x);
    if (D < 1 || D > INT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: x's last dimension D = %zu must be in [1, 2^31)", op,
                 D);
    R = clt_tensor_numel(x) / D;
    CLT_TRY(check_pos(x, pos, R, D, clt_tensor_dtype(x), op, "pos", &T));
    if (R == 0) goto fail;
    CLT_TRY(emb_kernel(ctx, EMB_ADD_POS, clt_tensor_dtype(x), CLT_DTYPE_I32, &k));
    {
        cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x), pm = clt_tensor_mem(pos);
        cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), po = clt_tensor_offset(pos),
                 r = R;
        cl_uint d = (cl_uint)D, t = (cl_uint)T;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo),
                          CLT__ARG(pm), CLT__ARG(po), CLT__ARG(r), CLT__ARG(d), CLT__ARG(t)));
        CLT_TRY(clt__launch_rows(ctx, k, D, R, op));
    }
fail:
    return st;
}

/* The power of two at or above n (1 for n <= 1): the sort's length. */
static size_t sort_len(size_t n)
{
    size_t p = 1;
    while (p < n)
        p *= 2;
    return p;
}

size_t clt_op_embedding_workspace(size_t R, size_t V)
{
    return sort_len(R) + V + 1;
}

/* Sorts the R positions by (id, position) into perm (P = sort_len(R) entries) and writes the
 * V + 1 token offsets into offs (embedding_offsets): every stage of a bitonic sort, one launch
 * each (log2(P) (log2(P) + 1) / 2 launches). */
static clt_status sort_positions(clt_ctx *ctx, clt_dtype xd, const clt_tensor *ids, cl_mem wm,
                                 cl_ulong pm_off, cl_ulong of_off, size_t R, size_t V)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    cl_mem im = clt_tensor_mem(ids);
    cl_ulong io = clt_tensor_offset(ids);
    clt_dtype idd = clt_tensor_dtype(ids);
    cl_uint r = (cl_uint)R, p = (cl_uint)sort_len(R), v = (cl_uint)V;
    CLT_TRY(emb_kernel(ctx, EMB_SORT_INIT, xd, idd, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wm), CLT__ARG(pm_off), CLT__ARG(r), CLT__ARG(p)));
    CLT_TRY(clt__launch_1d(ctx, k, p, "embedding_sort_init"));
    CLT_TRY(emb_kernel(ctx, EMB_SORT_STEP, xd, idd, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wm), CLT__ARG(pm_off), CLT__ARG(im), CLT__ARG(io),
                      CLT__ARG(p)));
    for (cl_uint kk = 2; kk <= p; kk *= 2)
        for (cl_uint j = kk / 2; j > 0; j /= 2) {
            CLT_TRY(CLT__ARGS_AT(ctx, k, 5, CLT__ARG(kk), CLT__ARG(j)));
            CLT_TRY(clt__launch_1d(ctx, k, p / 2, "embedding_sort_step"));
        }
    CLT_TRY(emb_kernel(ctx, EMB_OFFSETS, xd, idd, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wm), CLT__ARG(of_off), CLT__ARG(wm), CLT__ARG(pm_off),
                      CLT__ARG(im), CLT__ARG(io), CLT__ARG(r), CLT__ARG(v)));
    CLT_TRY(clt__launch_1d(ctx, k, V + 1, "embedding_offsets"));
fail:
    return st;
}

/* dtable (V, D) from dy (R, D) by token (see embedding_backward_table). */
static clt_status table_grad(clt_ctx *ctx, clt_tensor *dtable, const clt_tensor *dy,
                             const clt_tensor *ids, clt_tensor *ws, size_t R, size_t V, size_t D,
                             float beta)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    clt_dtype xd = clt_tensor_dtype(dy);
    cl_mem wm = clt_tensor_mem(ws);
    cl_ulong pm_off = clt_tensor_offset(ws), of_off = pm_off + sort_len(R);
    CLT_TRY(sort_positions(ctx, xd, ids, wm, pm_off, of_off, R, V));
    CLT_TRY(emb_kernel(ctx, EMB_BACKWARD_TABLE, xd, clt_tensor_dtype(ids), &k));
    {
        cl_mem dtm = clt_tensor_mem(dtable), dym = clt_tensor_mem(dy);
        cl_ulong dto = clt_tensor_offset(dtable), dyo = clt_tensor_offset(dy);
        cl_uint v = (cl_uint)V, d = (cl_uint)D;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dtm), CLT__ARG(dto), CLT__ARG(dym), CLT__ARG(dyo),
                          CLT__ARG(wm), CLT__ARG(pm_off), CLT__ARG(wm), CLT__ARG(of_off),
                          CLT__ARG(v), CLT__ARG(d), CLT__ARG(beta)));
        CLT_TRY(clt__launch_1d(ctx, k, V * D, "embedding_backward_table"));
    }
fail:
    return st;
}

/* dpos (T, D) = sum over the batch of dy (R, D) (see embedding_backward_positions). */
static clt_status pos_grad(clt_ctx *ctx, clt_tensor *dpos, const clt_tensor *dy, size_t R,
                           size_t T, size_t D, float beta)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(emb_kernel(ctx, EMB_BACKWARD_POS, clt_tensor_dtype(dy), CLT_DTYPE_I32, &k));
    {
        cl_mem dpm = clt_tensor_mem(dpos), dym = clt_tensor_mem(dy);
        cl_ulong dpo = clt_tensor_offset(dpos), dyo = clt_tensor_offset(dy), r = R;
        cl_uint d = (cl_uint)D, t = (cl_uint)T;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dpm), CLT__ARG(dpo), CLT__ARG(dym), CLT__ARG(dyo),
                          CLT__ARG(r), CLT__ARG(d), CLT__ARG(t), CLT__ARG(beta)));
        CLT_TRY(clt__launch_1d(ctx, k, T * D, "embedding_backward_positions"));
    }
fail:
    return st;
}

clt_status clt_op_embedding_backward(clt_tensor *dtable, clt_tensor *dpos, const clt_tensor *dy,
                                     const clt_tensor *ids, clt_tensor *workspace, float beta)
{
    static const char op[] = "embedding_backward";
    clt_status st = CLT_OK;
    CLT_ASSERT(dy);
    clt_ctx *ctx = clt_tensor_ctx(dy);
    size_t R = 0, D = 0, V = 0, T = 0, d = 0;
    CLT_TRY(table_rows(dy, op, "dy", &R, &D));
    if (R >= UINT32_MAX) CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: %zu rows are above 2^32 - 2", op, R);
    if (!isfinite(beta))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: beta must be finite, got %g", op, (double)beta);
    if (dtable) {
        if (!ids || !workspace)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: the table's gradient needs ids and a workspace",
                     op);
        CLT_TRY(clt_tensor_same_ctx(dy, dtable));
        CLT_TRY(clt__nn_need_dtype(dtable, CLT_DTYPE_F32, op, "dtable"));
        CLT_TRY(table_rows(dtable, op, "dtable", &V, &d));
        if (d != D)
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: dtable is (%zu, %zu); expected (V, %zu) as dy", op,
                     V, d, D);
        CLT_TRY(check_ids(dy, ids, R, op));
        CLT_TRY(clt_tensor_same_ctx(dy, workspace));
        CLT_TRY(clt__nn_need_dtype(workspace, CLT_DTYPE_I32, op, "workspace"));
        if (clt_tensor_numel(workspace) < clt_op_embedding_workspace(R, V))
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: the workspace has %zu elements; %zu needed", op,
                     clt_tensor_numel(workspace), clt_op_embedding_workspace(R, V));
    }
    if (dpos) {
        CLT_TRY(check_pos(dy, dpos, R, D, CLT_DTYPE_F32, op, "dpos", &T));
    }
    if (dtable) CLT_TRY(table_grad(ctx, dtable, dy, ids, workspace, R, V, D, beta));
    if (dpos) CLT_TRY(pos_grad(ctx, dpos, dy, R, T, D, beta));
fail:
    return st;
}

void clt__opts_embedding(char *dst, size_t n, clt_dtype x, clt_dtype id)
{
    snprintf(dst, n, "-DX_DTYPE=%d -DID_DTYPE=%d", (int)x, (int)id);
}

static void embedding_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[48];
    for (int x = 0; x < CLT__FLOAT_DTYPES; x++)
        for (int i = 0; i < EMB_ID_DTYPES; i++) {
            clt__opts_embedding(o, sizeof o, (clt_dtype)x, emb_ids[i]);
            fn("embedding", o, user);
        }
}

const struct clt__op_family clt__family_embedding = {
    .name = "embedding",
    .sources = "embedding",
    .slots = EMB__KERNELS * CLT__FLOAT_DTYPES * EMB_ID_DTYPES, /* kernel, float and id dtypes */
    .variants = embedding_variants,
};
