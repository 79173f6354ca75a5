/* C wrappers of cl/attention.cl: scaled dot-product attention per head on the output of a
 * D -> 3D projection, forward (saving each row's log-sum-exp) and backward, by the flash kernels
 * (tiles in local memory, online softmax, no T x T matrix in global memory; a program per head
 * width bucket, its tile sizes derived from the device's local memory; a row per work-item on
 * GPUs, register tiles of rows by a vector of keys on CPUs) or by the reference kernels (scores
 * materialised in a workspace), over f32, f16 or bf16 storage. */
#include "ops/nn_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

/* The flash kernels' head width buckets (CLT_ATTN_HD): program 1 + b holds the rows variant's
 * kernels for HD up to 16 << b, program 1 + ATTN_BUCKETS + b the tiled variant's (each with
 * Delta's); program 0 is the reference one. A variant's programs hold only its kernels: their
 * local arrays are sized for the device's local memory one kernel at a time (Oclgrind counts a
 * program's together). */
#define ATTN_BUCKETS 4
#define ATTN_PROGRAMS (1 + 2 * ATTN_BUCKETS)
_Static_assert((16u << (ATTN_BUCKETS - 1)) == CLT_ATTN_FLASH_MAX_HD, "buckets up to the max");
/* The most rows per tile staged in local memory (CLT_ATTN_BK), and per work-group of the flash
 * kernels (one row per work-item in the rows variant, CLT_ATTN_TILED_R in the tiled one). */
#define ATTN_MAX_BK 32
#define ATTN_MAX_ROWS 64
/* attention_decode's largest work-group (its CLT_ATTN_DECODE_WG: the size of its local array) */
#define ATTN_DECODE_WG 64
/* The tiled variant's rows per work-group: a block staged in local memory serves them all (a
 * block's transpose cost about as much as its products with 64 rows); the rows per work-item
 * are CLT_ATTN_TILED_R (ops_internal.h). */
#define ATTN_TILED_ROWS 256
/* Local memory the flash kernels leave unused, for what a compiler adds. */
#define ATTN_LOCAL_SLACK 1024

enum { ATTN_CAUSAL = 1 }; /* the kernels' flags (CLT_ATTN_CAUSAL) */

enum {
    K_FORWARD,
    K_DKV,
    K_DQ,
    K_FORWARD_TILED,
    K_DKV_TILED,
    K_DQ_TILED,
    K_DELTA,
    K_REF_SCORES,
    K_REF_SOFTMAX,
    K_REF_OUT,
    K_REF_PROBS,
    K_REF_DV,
    K_REF_DSCORES,
    K_REF_DQK,
    K_DECODE,
    K__COUNT
};
static const char *const k_names[K__COUNT] = {
    "attention_forward",     "attention_backward_dkv", "attention_backward_dq",
    "attention_forward_tiled", "attention_backward_dkv_tiled", "attention_backward_dq_tiled",
    "attention_backward_delta", "attention_ref_scores", "attention_ref_softmax",
    "attention_ref_out",     "attention_ref_probs",    "attention_ref_dv",
    "attention_ref_dscores", "attention_ref_dqk",     "attention_decode"};

/* The bucket of head width hd (<= CLT_ATTN_FLASH_MAX_HD): 0 for up to 16, 1 up to 32, ... */
static int attn_bucket(size_t hd)
{
    int b = 0;
    while ((16u << b) < hd)
        b++;
    return b;
}

unsigned clt__attention_tile_rows(const clt_device_info *dev, unsigned hd)
{
    /* attention_backward_dkv takes the most: two tiles of bk x hd floats, bk lse and Delta */
    const uint64_t have = dev && dev->local_mem ? dev->local_mem : 16384;
    unsigned bk = ATTN_MAX_BK;
    while (bk > 1 && (2ull * bk * hd + 2ull * bk) * sizeof(float) + ATTN_LOCAL_SLACK > have)
        bk /= 2;
    return bk;
}

unsigned clt__attention_tile_keys(const clt_device_info *dev, unsigned hd)
{
    /* attention_backward_dkv_tiled takes the most: four blocks of kb x hd floats (q and dy,
     * each transposed and as rows), kb lse and Delta */
    const uint64_t have = dev && dev->local_mem ? dev->local_mem : 16384;
    unsigned kb = 16;
    while (kb > 4 && (4ull * kb * hd + 2ull * kb) * sizeof(float) + ATTN_LOCAL_SLACK > have)
        kb /= 2;
    return kb;
}

void clt__opts_attention(char *dst, size_t n, const clt_device_info *dev, clt_dtype x,
                         clt_dtype g, unsigned hd, bool tiled)
{
    if (hd == 0)
        snprintf(dst, n, "-DX_DTYPE=%d -DG_DTYPE=%d", (int)x, (int)g);
    else if (!tiled)
        snprintf(dst, n, "-DX_DTYPE=%d -DG_DTYPE=%d -DCLT_ATTN_HD=%u -DCLT_ATTN_BK=%u", (int)x,
                 (int)g, hd, clt__attention_tile_rows(dev, hd));
    else
        snprintf(dst, n,
                 "-DX_DTYPE=%d -DG_DTYPE=%d -DCLT_ATTN_HD=%u -DCLT_ATTN_TILED=1 "
                 "-DCLT_ATTN_KB=%u -DCLT_ATTN_R=%u",
                 (int)x, (int)g, hd, clt__attention_tile_keys(dev, hd), CLT_ATTN_TILED_R);
}

/* A program's head width bucket (0: the reference program) and variant. */
static unsigned attn_prog_hd(int prog)
{
    return prog == 0 ? 0 : 16u << ((prog - 1) % ATTN_BUCKETS);
}

static bool attn_prog_tiled(int prog)
{
    return prog > ATTN_BUCKETS;
}

/* The flash program of g's head width in the rows or the tiled variant. */
static int attn_prog(const struct clt_attn_geom *g, bool tiled)
{
    return 1 + (tiled ? ATTN_BUCKETS : 0) + attn_bucket(g->HD);
}

/* The ctx's kernel `which` of program `prog` (0 reference, 1 + bucket flash) for dtypes xd (qkv,
 * y) and gd (dy, dqkv), built on first use. */
static clt_status attn_kernel(clt_ctx *ctx, int which, int prog, clt_dtype xd, clt_dtype gd,
                              cl_kernel *k)
{
    cl_kernel *slot = NULL;
    const int idx = ((which * ATTN_PROGRAMS + prog) * 3 + (int)xd) * 3 + (int)gd;
    clt_status st = clt__op_slot(ctx, CLT__OPF_attention, idx, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[128];
        clt__opts_attention(opts, sizeof opts, clt_ctx_device(ctx), xd, gd, attn_prog_hd(prog),
                            attn_prog_tiled(prog));
        st = clt__kernel(ctx, "attention", opts, k_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

clt_attn_path clt_op_attention_resolve(const struct clt_attn_geom *g)
{
    if (g->path != CLT_ATTN_AUTO) return g->path;
    return g->HD <= CLT_ATTN_FLASH_MAX_HD ? CLT_ATTN_FLASH : CLT_ATTN_REFERENCE;
}

/* Whether g takes a flash variant. */
static bool attn_flash(const struct clt_attn_geom *g)
{
    const clt_attn_path p = clt_op_attention_resolve(g);
    return p == CLT_ATTN_FLASH || p == CLT_ATTN_FLASH_ROWS || p == CLT_ATTN_FLASH_TILED;
}

/* The tiled variant on CPUs: a CPU runs a work-item's vectors in its vector registers, and
 * one row per work-item leaves each score to a dot product with a horizontal sum (4.5-9.7
 * GFLOP/s against the GEMM's 480 on PoCL, EPYC with AVX-512). A GPU runs the vectors as
 * scalars, and CLT_ATTN_TILED_R rows of private accumulators per work-item would crowd its
 * registers: there the rows variant. */
clt_attn_path clt__attention_variant(const clt_device_info *dev, const struct clt_attn_geom *g)
{
    const clt_attn_path p = clt_op_attention_resolve(g);
    if (p != CLT_ATTN_FLASH) return p;
    return dev && dev->type == CLT_DEVICE_CPU ? CLT_ATTN_FLASH_TILED : CLT_ATTN_FLASH_ROWS;
}

size_t clt_op_attention_workspace(const struct clt_attn_geom *g)
{
    const size_t rows = g->B * g->NH * g->T; /* Delta */
    return attn_flash(g) ? rows : rows * g->T + rows;
}

/* The geometry's checks: every size in [1, 2^32), HD within the flash kernels' buckets on that
 * path, and the workspace's element count representable. */
static clt_status check_geom(clt_ctx *ctx, const struct clt_attn_geom *g, const char *op)
{
    const size_t dims[4] = {g->B, g->T, g->NH, g->HD};
    static const char *const names[4] = {"B", "T", "NH", "HD"};
    for (int i = 0; i < 4; i++)
        if (dims[i] < 1 || dims[i] > UINT32_MAX)
            return clt__fail(ctx, CLT_ERR_SHAPE, "%s: %s = %zu must be in [1, 2^32)", op, names[i],
                             dims[i]);
    if (g->path != CLT_ATTN_AUTO && g->path != CLT_ATTN_FLASH && g->path != CLT_ATTN_REFERENCE &&
        g->path != CLT_ATTN_FLASH_ROWS && g->path != CLT_ATTN_FLASH_TILED)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: unknown path %d", op, (int)g->path);
    if (attn_flash(g) && g->HD > CLT_ATTN_FLASH_MAX_HD)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "%s: the flash path takes head widths up to %d, got HD = %zu (the "
                         "reference path takes any)",
                         op, CLT_ATTN_FLASH_MAX_HD, g->HD);
    /* B T 3D and B NH T T (+ B NH T) elements without overflow */
    const double rows = (double)g->B * (double)g->T;
    if (rows * 3.0 * (double)g->NH * (double)g->HD > (double)(SIZE_MAX / 4) ||
        rows * (double)g->NH * ((double)g->T + 1.0) > (double)(SIZE_MAX / 4))
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: B %zu x T %zu x NH %zu x HD %zu is too large",
                         op, g->B, g->T, g->NH, g->HD);
    return CLT_OK;
}

/* t is of x's ctx, a float dtype (d, when d >= 0), n elements and, when last > 0, a last
 * dimension of `last`. */
static clt_status need(const clt_tensor *x, const clt_tensor *t, int d, size_t n, size_t last,
                       const char *op, const char *what)
{
    clt_status st = clt_tensor_same_ctx(x, t);
    if (st != CLT_OK) return st;
    st = d >= 0 ? clt__nn_need_dtype(t, (clt_dtype)d, op, what) : clt__nn_need_float(t, op, what);
    if (st != CLT_OK) return st;
    st = clt__nn_need_numel(t, n, op, what);
    if (st != CLT_OK) return st;
    if (last > 0 && clt__nn_last_dim(t) != last)
        return clt__fail(clt_tensor_ctx(t), CLT_ERR_SHAPE,
                         "%s: %s's last dimension is %zu, expected %zu", op, what,
                         clt__nn_last_dim(t), last);
    return CLT_OK;
}

/* The workspace's checks: f32 with at least the elements the path needs. */
static clt_status need_ws(const clt_tensor *x, const clt_tensor *ws, size_t len, const char *op)
{
    if (!ws)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_INVALID_ARG,
                         "%s: a workspace of %zu f32 elements is needed, got none", op, len);
    clt_status st = clt_tensor_same_ctx(x, ws);
    if (st != CLT_OK) return st;
    st = clt__nn_need_dtype(ws, CLT_DTYPE_F32, op, "workspace");
    if (st != CLT_OK) return st;
    if (clt_tensor_numel(ws) < len)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE,
                         "%s: the workspace has %zu elements, %zu needed", op,
                         clt_tensor_numel(ws), len);
    return CLT_OK;
}

/* The kernels' scalars. */
struct attn_args {
    cl_uint4 dims; /* B, T, NH, HD */
    float scale;   /* 1 / sqrt(HD) */
    cl_int flags;
};

static struct attn_args attn_args(const struct clt_attn_geom *g)
{
    struct attn_args a;
    a.dims.s[0] = (cl_uint)g->B;
    a.dims.s[1] = (cl_uint)g->T;
    a.dims.s[2] = (cl_uint)g->NH;
    a.dims.s[3] = (cl_uint)g->HD;
    a.scale = (float)(1.0 / sqrt((double)g->HD));
    a.flags = g->causal ? ATTN_CAUSAL : 0;
    return a;
}

/* Launches a flash kernel: per (b, h), tiles of `items` work-items of `per` rows each (1 in the
 * rows variant, CLT_ATTN_TILED_R in the tiled one): at most ATTN_MAX_ROWS rows (ATTN_TILED_ROWS
 * tiled) and what the kernel takes, and no more than T needs (a power of two). */
static clt_status launch_flash(clt_ctx *ctx, cl_kernel k, const struct clt_attn_geom *g,
                               size_t per, const char *what)
{
    const size_t need = (g->T + per - 1) / per;
    size_t items = clt__local_size(ctx, k), fit = 1;
    const size_t most = per > 1 ? ATTN_TILED_ROWS : ATTN_MAX_ROWS;
    while (fit < need && fit * per < most)
        fit *= 2;
    if (items > fit) items = fit;
    const size_t tiles = (need + items - 1) / items;
    return clt__enqueue(ctx, k, g->B * g->NH * tiles * items, items, what);
}

#define MEM(t) cl_mem t##m = clt_tensor_mem(t); cl_ulong t##o = clt_tensor_offset(t)

clt_status clt_op_attention_forward(clt_tensor *y, clt_tensor *lse, clt_tensor *ws,
                                    const clt_tensor *qkv, const struct clt_attn_geom *g)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && lse && qkv && g);
    clt_ctx *ctx = clt_tensor_ctx(qkv);
    const char *op = "attention_forward";
    cl_kernel k;
    CLT_TRY(check_geom(ctx, g, op));
    const size_t D = g->NH * g->HD, rows = g->B * g->NH * g->T;
    const bool flash = attn_flash(g),
               tiled = clt__attention_variant(clt_ctx_device(ctx), g) == CLT_ATTN_FLASH_TILED;
    CLT_TRY(need(qkv, qkv, -1, g->B * g->T * 3 * D, 3 * D, op, "qkv"));
    const clt_dtype xd = clt_tensor_dtype(qkv);
    CLT_TRY(need(qkv, y, (int)xd, g->B * g->T * D, D, op, "y"));
    CLT_TRY(need(qkv, lse, CLT_DTYPE_F32, rows, 0, op, "lse"));
    if (!flash) CLT_TRY(need_ws(qkv, ws, rows * g->T, op));
    {
        struct attn_args a = attn_args(g);
        MEM(y);
        MEM(lse);
        MEM(qkv);
        if (flash) {
            CLT_TRY(attn_kernel(ctx, tiled ? K_FORWARD_TILED : K_FORWARD, attn_prog(g, tiled), xd,
                                CLT_DTYPE_F32, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(lsem), CLT__ARG(lseo),
                              CLT__ARG(qkvm), CLT__ARG(qkvo), CLT__ARG(a.dims),
                              CLT__ARG(a.scale), CLT__ARG(a.flags)));
            CLT_TRY(launch_flash(ctx, k, g, tiled ? CLT_ATTN_TILED_R : 1,
                                 tiled ? k_names[K_FORWARD_TILED] : op));
        } else {
            MEM(ws);
            CLT_TRY(attn_kernel(ctx, K_REF_SCORES, 0, xd, CLT_DTYPE_F32, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wsm), CLT__ARG(wso), CLT__ARG(qkvm),
                              CLT__ARG(qkvo), CLT__ARG(a.dims), CLT__ARG(a.scale),
                              CLT__ARG(a.flags)));
            CLT_TRY(clt__launch_1d(ctx, k, rows * g->T, "attention_ref_scores"));
            CLT_TRY(attn_kernel(ctx, K_REF_SOFTMAX, 0, xd, CLT_DTYPE_F32, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wsm), CLT__ARG(wso), CLT__ARG(lsem),
                              CLT__ARG(lseo), CLT__ARG(a.dims)));
            CLT_TRY(clt__launch_1d(ctx, k, rows, "attention_ref_softmax"));
            CLT_TRY(attn_kernel(ctx, K_REF_OUT, 0, xd, CLT_DTYPE_F32, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(wsm), CLT__ARG(wso),
                              CLT__ARG(qkvm), CLT__ARG(qkvo), CLT__ARG(a.dims)));
            CLT_TRY(clt__launch_1d(ctx, k, g->B * g->T * D, "attention_ref_out"));
        }
    }
fail:
    return st;
}

clt_status clt_op_attention_backward(clt_tensor *dqkv, clt_tensor *ws, const clt_tensor *dy,
                                     const clt_tensor *qkv, const clt_tensor *y,
                                     const clt_tensor *lse, const struct clt_attn_geom *g)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(dqkv && dy && qkv && y && lse && g);
    clt_ctx *ctx = clt_tensor_ctx(qkv);
    const char *op = "attention_backward";
    cl_kernel k;
    CLT_TRY(check_geom(ctx, g, op));
    const size_t D = g->NH * g->HD, rows = g->B * g->NH * g->T, tt = rows * g->T;
    const bool flash = attn_flash(g),
               tiled = clt__attention_variant(clt_ctx_device(ctx), g) == CLT_ATTN_FLASH_TILED;
    CLT_TRY(need(qkv, qkv, -1, g->B * g->T * 3 * D, 3 * D, op, "qkv"));
    const clt_dtype xd = clt_tensor_dtype(qkv);
    CLT_TRY(need(qkv, y, (int)xd, g->B * g->T * D, D, op, "y"));
    CLT_TRY(need(qkv, lse, CLT_DTYPE_F32, rows, 0, op, "lse"));
    CLT_TRY(need(qkv, dy, -1, g->B * g->T * D, D, op, "dy"));
    const clt_dtype gd = clt_tensor_dtype(dy);
    CLT_TRY(need(qkv, dqkv, (int)gd, g->B * g->T * 3 * D, 3 * D, op, "dqkv"));
    CLT_TRY(need_ws(qkv, ws, clt_op_attention_workspace(g), op));
    {
        const int prog = flash ? attn_prog(g, tiled) : 0;
        struct attn_args a = attn_args(g);
        MEM(dqkv);
        MEM(ws);
        MEM(dy);
        MEM(qkv);
        MEM(y);
        MEM(lse);
        /* Delta after the reference path's B NH T T scores */
        cl_ulong delo = wso + (flash ? 0 : tt);
        CLT_TRY(attn_kernel(ctx, K_DELTA, prog, xd, gd, &k));
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wsm), CLT__ARG(delo), CLT__ARG(dym), CLT__ARG(dyo),
                          CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(a.dims)));
        CLT_TRY(clt__launch_1d(ctx, k, rows, "attention_backward_delta"));
        if (flash) {
            const int kk[2] = {tiled ? K_DKV_TILED : K_DKV, tiled ? K_DQ_TILED : K_DQ};
            for (int i = 0; i < 2; i++) {
                CLT_TRY(attn_kernel(ctx, kk[i], prog, xd, gd, &k));
                CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dqkvm), CLT__ARG(dqkvo), CLT__ARG(dym),
                                  CLT__ARG(dyo), CLT__ARG(qkvm), CLT__ARG(qkvo), CLT__ARG(lsem),
                                  CLT__ARG(lseo), CLT__ARG(wsm), CLT__ARG(delo),
                                  CLT__ARG(a.dims), CLT__ARG(a.scale), CLT__ARG(a.flags)));
                CLT_TRY(launch_flash(ctx, k, g, tiled ? CLT_ATTN_TILED_R : 1, k_names[kk[i]]));
            }
        } else {
            CLT_TRY(attn_kernel(ctx, K_REF_PROBS, 0, xd, gd, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wsm), CLT__ARG(wso), CLT__ARG(qkvm),
                              CLT__ARG(qkvo), CLT__ARG(lsem), CLT__ARG(lseo), CLT__ARG(a.dims),
                              CLT__ARG(a.scale), CLT__ARG(a.flags)));
            CLT_TRY(clt__launch_1d(ctx, k, tt, "attention_ref_probs"));
            CLT_TRY(attn_kernel(ctx, K_REF_DV, 0, xd, gd, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dqkvm), CLT__ARG(dqkvo), CLT__ARG(wsm),
                              CLT__ARG(wso), CLT__ARG(dym), CLT__ARG(dyo), CLT__ARG(a.dims)));
            CLT_TRY(clt__launch_1d(ctx, k, g->B * g->T * D, "attention_ref_dv"));
            CLT_TRY(attn_kernel(ctx, K_REF_DSCORES, 0, xd, gd, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(wsm), CLT__ARG(wso), CLT__ARG(wsm),
                              CLT__ARG(delo), CLT__ARG(dym), CLT__ARG(dyo), CLT__ARG(qkvm),
                              CLT__ARG(qkvo), CLT__ARG(a.dims), CLT__ARG(a.scale)));
            CLT_TRY(clt__launch_1d(ctx, k, tt, "attention_ref_dscores"));
            CLT_TRY(attn_kernel(ctx, K_REF_DQK, 0, xd, gd, &k));
            CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dqkvm), CLT__ARG(dqkvo), CLT__ARG(wsm),
                              CLT__ARG(wso), CLT__ARG(qkvm), CLT__ARG(qkvo), CLT__ARG(a.dims)));
            CLT_TRY(clt__launch_1d(ctx, k, 2 * g->B * g->T * D, "attention_ref_dqk"));
        }
    }
fail:
    return st;
}

clt_status clt_op_attention_decode(clt_tensor *y, clt_tensor *ws, const clt_tensor *qkv,
                                   const struct clt_attn_geom *g, size_t pos)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && qkv && g);
    clt_ctx *ctx = clt_tensor_ctx(qkv);
    const char *op = "attention_decode";
    cl_kernel k;
    struct clt_attn_geom rg = *g;
    rg.path = CLT_ATTN_REFERENCE; /* the sizes' checks, whatever the head width */
    CLT_TRY(check_geom(ctx, &rg, op));
    if (pos >= g->T)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: position %zu is past the T = %zu rows of qkv", op, pos,
                 g->T);
    const size_t D = g->NH * g->HD;
    CLT_TRY(need(qkv, qkv, -1, g->B * g->T * 3 * D, 3 * D, op, "qkv"));
    const clt_dtype xd = clt_tensor_dtype(qkv);
    CLT_TRY(need(qkv, y, (int)xd, g->B * D, D, op, "y"));
    CLT_TRY(need_ws(qkv, ws, g->B * g->NH * g->T, op));
    CLT_TRY(attn_kernel(ctx, K_DECODE, 0, xd, CLT_DTYPE_F32, &k));
    {
        struct attn_args a = attn_args(g);
        cl_uint p = (cl_uint)pos;
        MEM(y);
        MEM(ws);
        MEM(qkv);
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(wsm), CLT__ARG(wso),
                          CLT__ARG(qkvm), CLT__ARG(qkvo), CLT__ARG(a.dims), CLT__ARG(p),
                          CLT__ARG(a.scale)));
        size_t wg = clt__local_size(ctx, k);
        if (wg > ATTN_DECODE_WG) wg = ATTN_DECODE_WG;
        CLT_TRY(clt__enqueue(ctx, k, g->B * g->NH * wg, wg, op));
    }
fail:
    return st;
}

static void attention_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    char o[128];
    for (int x = 0; x < CLT__FLOAT_DTYPES; x++)
        for (int g = 0; g < CLT__FLOAT_DTYPES; g++)
            for (int p = 0; p < ATTN_PROGRAMS; p++) {
                clt__opts_attention(o, sizeof o, dev, (clt_dtype)x, (clt_dtype)g, attn_prog_hd(p),
                                    attn_prog_tiled(p));
                fn("attention", o, user);
            }
}

const struct clt__op_family clt__family_attention = {
    .name = "attention",
    .sources = "attention",
    /* kernel, program, then the x and dy dtypes */
    .slots = K__COUNT * ATTN_PROGRAMS * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES,
    .variants = attention_variants,
};
