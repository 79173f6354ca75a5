/* C wrappers of cl/batchnorm.cl: batch normalisation over (B, C, S) tensors, the training
 * forward (per-channel statistics, one work-group per channel, then an elementwise normalise),
 * the evaluation forward from the running statistics, and backward (per-channel reductions, then
 * an elementwise dx), over f32, f16 or bf16 storage with f32 statistics and parameters. The
 * reductions' leaf geometry and the elementwise kernels' 3-D ranges are chosen here. */
#include "ops/nn_internal.h"

#include <stdint.h>
#include <stdio.h>

/* The reductions' leaves (cl/batchnorm.cl), from B and S alone so that the bits never depend
 * on the launch. A row longer than BN_LEAF elements is cut into balanced chunks of at most
 * BN_LEAF (multiples of 8, the kernels' vector width, but the last); a shorter row is one chunk.
 * A leaf is one chunk of BN_ROWS consecutive rows (the kernels walk four rows in lockstep), or
 * for short rows of more, a multiple of BN_ROWS near BN_LEAF / S: a few hundred elements or
 * more per leaf, so that a work-item streams, while a GPU's group still has leaves for many of
 * its work-items. */
#define BN_LEAF 256
#define BN_ROWS 4
/* The elementwise kernels' runs: at most BN_RUN consecutive elements per work-item. */
#define BN_RUN 64
/* The most work-groups the elementwise kernels launch along dimension 2 (the batch) at once:
 * some GPUs (NVIDIA's) take at most 65535 in dimensions 1 and 2. */
#define BN_MAX_GROUPS_2 65535

struct bn_leaves {
    cl_uint B, C, S, L, nchunk, rows, nleaf; /* the kernels' CLT_BN_LEAF_ARGS */
};

enum { BN_STATS, BN_FORWARD, BN_REDUCE, BN_DX, BN__KERNELS };
static const char *const bn_names[BN__KERNELS] = {
    "batchnorm_stats", "batchnorm_forward", "batchnorm_backward_reduce", "batchnorm_backward_dx"};

/* The ctx's kernel `which` for x dtype xd and gradient dtype gd (forward kernels pass gd = f32),
 * built on first use. */
static clt_status bn_kernel(clt_ctx *ctx, int which, clt_dtype xd, clt_dtype gd, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st =
        clt__op_slot(ctx, CLT__OPF_batchnorm, (which * 3 + (int)xd) * 3 + (int)gd, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[48];
        clt__opts_batchnorm(opts, sizeof opts, xd, gd);
        st = clt__kernel(ctx, "batchnorm", opts, bn_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* Checks an f32 (len) tensor of x's ctx. */
static clt_status need_vec(const clt_tensor *x, const clt_tensor *v, size_t len, const char *op,
                           const char *what)
{
    clt_status st = clt_tensor_same_ctx(x, v);
    if (st != CLT_OK) return st;
    st = clt__nn_need_dtype(v, CLT_DTYPE_F32, op, what);
    if (st != CLT_OK) return st;
    return clt__nn_need_numel(v, len, op, what);
}

/* x's checks: a float dtype, a positive whole number B of (C, S) samples, and the geometry. */
static clt_status bn_batch(const clt_tensor *x, const struct clt_bn_geom *g, const char *op,
                           size_t *B)
{
    clt_ctx *ctx = clt_tensor_ctx(x);
    size_t n = clt_tensor_numel(x), per = g->C * g->S;
    if (g->C < 1 || g->S < 1 || g->C > UINT32_MAX || g->S > UINT32_MAX)
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: C = %zu and S = %zu must be positive (each "
                         "below 2^32)", op, g->C, g->S);
    if (!(g->eps > 0) || !(g->momentum >= 0 && g->momentum <= 1))
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: eps must be positive and momentum in "
                         "[0, 1], got %g and %g", op, (double)g->eps, (double)g->momentum);
    clt_status st = clt__nn_need_float(x, op, "x");
    if (st != CLT_OK) return st;
    if (n == 0 || n % per != 0)
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: x has %zu elements, not a whole number of "
                         "(C, S) = (%zu, %zu) samples", op, n, g->C, g->S);
    *B = n / per;
    if (*B > UINT32_MAX)
        return clt__fail(ctx, CLT_ERR_SHAPE, "%s: a batch of %zu samples is above 2^32 - 1", op,
                         *B);
    return CLT_OK;
}

/* Balanced runs of at most `most` elements covering S: multiples of 8 (the kernels' vector
 * width) but the last; their length in *len and count in *count. */
static void bn_runs(size_t S, size_t most, size_t *len, size_t *count)
{
    size_t even = (S + most - 1) / most;
    *len = ((S + even - 1) / even + 7) / 8 * 8;
    *count = (S + *len - 1) / *len;
}

/* The leaf geometry for a batch of B samples (see BN_LEAF). With B and S below 2^32 (bn_batch),
 * the counts fit 32 bits: there are at most B / 4 + 1 leaves per chunk of a row, and at most
 * S / 128 + 1 chunks (below 2^32 leaves for channels below 2^38 elements, 1 TiB of f32). */
static struct bn_leaves bn_leaves(size_t B, const struct clt_bn_geom *g)
{
    size_t S = g->S, L = S, nchunk = 1, rows = BN_ROWS;
    if (S > BN_LEAF) bn_runs(S, BN_LEAF, &L, &nchunk);
    else rows = (BN_LEAF / S + BN_ROWS - 1) / BN_ROWS * BN_ROWS;
    struct bn_leaves lv = {(cl_uint)B, (cl_uint)g->C, (cl_uint)S, (cl_uint)L, (cl_uint)nchunk,
                           (cl_uint)rows, (cl_uint)((B + rows - 1) / rows * nchunk)};
    return lv;
}

/* Launches an elementwise kernel over the 3-D range (k, c, b - b0) of runs of up to BN_RUN
 * elements: its arguments from `first` on are (B, C, S, run, b0). Groups take a row's runs,
 * then channels; the batch goes in launches of at most BN_MAX_GROUPS_2 samples. */
static clt_status launch_elementwise(clt_ctx *ctx, cl_kernel k, cl_uint first, size_t B,
                                     const struct clt_bn_geom *g, const char *what)
{
    clt_status st = CLT_OK;
    size_t wg = clt__local_size(ctx, k), run, runs, local[3] = {1, 1, 1}, global[3];
    bn_runs(g->S, BN_RUN, &run, &runs);
    local[0] = runs < wg ? runs : wg;
    local[1] = wg / local[0] < g->C ? wg / local[0] : g->C;
    global[0] = (runs + local[0] - 1) / local[0] * local[0];
    global[1] = (g->C + local[1] - 1) / local[1] * local[1];
    cl_uint b = (cl_uint)B, C = (cl_uint)g->C, S = (cl_uint)g->S, r = (cl_uint)run;
    CLT_TRY(CLT__ARGS_AT(ctx, k, first, CLT__ARG(b), CLT__ARG(C), CLT__ARG(S), CLT__ARG(r)));
    for (size_t b0 = 0; b0 < B; b0 += BN_MAX_GROUPS_2) {
        cl_uint from = (cl_uint)b0;
        global[2] = B - b0 < BN_MAX_GROUPS_2 ? B - b0 : BN_MAX_GROUPS_2;
        CLT_TRY(CLT__ARGS_AT(ctx, k, first + 4, CLT__ARG(from)));
        CLT_TRY(clt__enqueue_nd(ctx, k, 3, global, local, what));
    }
fail:
    return st;
}

/* The elementwise normalise: train (stats) or eval (running statistics). */
static clt_status normalise(clt_tensor *y, const clt_tensor *x, const clt_tensor *weight,
                            const clt_tensor *bias, const clt_tensor *mean,
                            const clt_tensor *second, cl_ulong m_off, cl_ulong s_off,
                            int from_var, size_t B, const struct clt_bn_geom *g)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    CLT_TRY(bn_kernel(ctx, BN_FORWARD, clt_tensor_dtype(x), CLT_DTYPE_F32, &k));
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x), mm = clt_tensor_mem(mean),
           sm = clt_tensor_mem(second), wm = clt_tensor_mem(weight), bm = clt_tensor_mem(bias);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x),
             wo = clt_tensor_offset(weight), bo = clt_tensor_offset(bias);
    cl_int fv = from_var, relu = g->relu;
    float eps = g->eps;
    /* arguments 4 to 8, the range's, are launch_elementwise's */
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo)));
    CLT_TRY(CLT__ARGS_AT(ctx, k, 9, CLT__ARG(mm), CLT__ARG(m_off), CLT__ARG(sm), CLT__ARG(s_off),
                         CLT__ARG(fv), CLT__ARG(eps), CLT__ARG(wm), CLT__ARG(wo), CLT__ARG(bm),
                         CLT__ARG(bo), CLT__ARG(relu)));
    CLT_TRY(launch_elementwise(ctx, k, 4, B, g, "batchnorm_forward"));
fail:
    return st;
}

clt_status clt_op_batchnorm_forward_train(clt_tensor *y, const clt_tensor *x,
                                          const clt_tensor *weight, const clt_tensor *bias,
                                          clt_tensor *stats, clt_tensor *running_mean,
                                          clt_tensor *running_var, const struct clt_bn_geom *g)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x && weight && bias && stats && g);
    CLT_ASSERT(!running_mean == !running_var);
    clt_ctx *ctx = clt_tensor_ctx(y);
    const char *op = "batchnorm_forward_train";
    size_t B = 0;
    cl_kernel k;
    CLT_TRY(bn_batch(x, g, op, &B));
    CLT_TRY(clt__check_pair(y, x, true, op));
    CLT_TRY(need_vec(x, weight, g->C, op, "weight"));
    CLT_TRY(need_vec(x, bias, g->C, op, "bias"));
    CLT_TRY(need_vec(x, stats, 4 * g->C, op, "stats"));
    if (running_mean) {
        CLT_TRY(need_vec(x, running_mean, g->C, op, "running_mean"));
        CLT_TRY(need_vec(x, running_var, g->C, op, "running_var"));
    }
    if (B * g->S < 2)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "batchnorm: training needs more than 1 value per "
                 "channel, got a batch of %zu with %zu per sample (as PyTorch); use a larger "
                 "batch (or --drop-last for a last batch of 1)", B, g->S);
    CLT_TRY(bn_kernel(ctx, BN_STATS, clt_tensor_dtype(x), CLT_DTYPE_F32, &k));
    {
        cl_mem xm = clt_tensor_mem(x), sm = clt_tensor_mem(stats);
        /* without running statistics the kernel is told not to update; it gets stats twice */
        cl_mem rmm = running_mean ? clt_tensor_mem(running_mean) : sm,
               rvm = running_var ? clt_tensor_mem(running_var) : sm;
        cl_ulong xo = clt_tensor_offset(x), so = clt_tensor_offset(stats),
                 rmo = running_mean ? clt_tensor_offset(running_mean) : so,
                 rvo = running_var ? clt_tensor_offset(running_var) : so;
        struct bn_leaves lv = bn_leaves(B, g);
        float mom = g->momentum, eps = g->eps;
        cl_int update = running_mean != NULL;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(lv.B), CLT__ARG(lv.C),
                          CLT__ARG(lv.S), CLT__ARG(lv.L), CLT__ARG(lv.nchunk), CLT__ARG(lv.rows),
                          CLT__ARG(lv.nleaf), CLT__ARG(sm), CLT__ARG(so), CLT__ARG(rmm),
                          CLT__ARG(rmo), CLT__ARG(rvm), CLT__ARG(rvo), CLT__ARG(mom),
                          CLT__ARG(eps), CLT__ARG(update)));
        CLT_TRY(clt__nn_launch_groups(ctx, k, g->C, "batchnorm_stats"));
        CLT_TRY(normalise(y, x, weight, bias, stats, stats, so, so + g->C, 0, B, g));
    }
fail:
    return st;
}

clt_status clt_op_batchnorm_forward_eval(clt_tensor *y, const clt_tensor *x,
                                         const clt_tensor *weight, const clt_tensor *bias,
                                         const clt_tensor *running_mean,
                                         const clt_tensor *running_var,
                                         const struct clt_bn_geom *g)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(y && x && weight && bias && running_mean && running_var && g);
    const char *op = "batchnorm_forward_eval";
    size_t B = 0;
    CLT_TRY(bn_batch(x, g, op, &B));
    CLT_TRY(clt__check_pair(y, x, true, op));
    CLT_TRY(need_vec(x, weight, g->C, op, "weight"));
    CLT_TRY(need_vec(x, bias, g->C, op, "bias"));
    CLT_TRY(need_vec(x, running_mean, g->C, op, "running_mean"));
    CLT_TRY(need_vec(x, running_var, g->C, op, "running_var"));
    CLT_TRY(normalise(y, x, weight, bias, running_mean, running_var,
                      clt_tensor_offset(running_mean), clt_tensor_offset(running_var), 1, B,
                      g));
fail:
    return st;
}

clt_status clt_op_batchnorm_backward(clt_tensor *dx, clt_tensor *dweight, clt_tensor *dbias,
                                     const clt_tensor *dy, const clt_tensor *x,
                                     const clt_tensor *weight, const clt_tensor *bias,
                                     clt_tensor *stats, const struct clt_bn_geom *g, float beta)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(dweight && dbias && dy && x && weight && stats && g);
    clt_ctx *ctx = clt_tensor_ctx(x);
    const char *op = "batchnorm_backward";
    size_t B = 0;
    cl_kernel k;
    CLT_TRY(bn_batch(x, g, op, &B));
    CLT_TRY(clt__check_pair(dy, x, false, op));
    CLT_TRY(clt__nn_need_float(dy, op, "dy"));
    if (dx) CLT_TRY(clt__check_pair(dx, dy, true, op));
    CLT_TRY(need_vec(x, dweight, g->C, op, "dweight"));
    CLT_TRY(need_vec(x, dbias, g->C, op, "dbias"));
    CLT_TRY(need_vec(x, weight, g->C, op, "weight"));
    CLT_TRY(need_vec(x, stats, 4 * g->C, op, "stats"));
    if (g->relu && !bias)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "%s: a fused relu needs the bias", op);
    if (g->relu) CLT_TRY(need_vec(x, bias, g->C, op, "bias"));
    clt_dtype xd = clt_tensor_dtype(x), gd = clt_tensor_dtype(dy);
    cl_mem dym = clt_tensor_mem(dy), xm = clt_tensor_mem(x), sm = clt_tensor_mem(stats),
           dwm = clt_tensor_mem(dweight), dbm = clt_tensor_mem(dbias), wm = clt_tensor_mem(weight),
           bm = bias ? clt_tensor_mem(bias) : wm;
    cl_ulong dyo = clt_tensor_offset(dy), xo = clt_tensor_offset(x), so = clt_tensor_offset(stats),
             dwo = clt_tensor_offset(dweight), dbo = clt_tensor_offset(dbias),
             wo = clt_tensor_offset(weight), bo = bias ? clt_tensor_offset(bias) : 0;
    cl_int relu = g->relu;
    struct bn_leaves lv = bn_leaves(B, g);
    CLT_TRY(bn_kernel(ctx, BN_REDUCE, xd, gd, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dym), CLT__ARG(dyo), CLT__ARG(xm), CLT__ARG(xo),
                      CLT__ARG(lv.B), CLT__ARG(lv.C), CLT__ARG(lv.S), CLT__ARG(lv.L),
                      CLT__ARG(lv.nchunk), CLT__ARG(lv.rows), CLT__ARG(lv.nleaf), CLT__ARG(sm),
                      CLT__ARG(so), CLT__ARG(dwm), CLT__ARG(dwo), CLT__ARG(dbm), CLT__ARG(dbo),
                      CLT__ARG(beta), CLT__ARG(wm), CLT__ARG(wo), CLT__ARG(bm), CLT__ARG(bo),
                      CLT__ARG(relu)));
    CLT_TRY(clt__nn_launch_groups(ctx, k, g->C, "batchnorm_backward_reduce"));
    if (dx) {
        cl_mem dxm = clt_tensor_mem(dx);
        cl_ulong dxo = clt_tensor_offset(dx);
        CLT_TRY(bn_kernel(ctx, BN_DX, xd, gd, &k));
        /* arguments 6 to 10, the range's, are launch_elementwise's */
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(dym), CLT__ARG(dyo),
                          CLT__ARG(xm), CLT__ARG(xo)));
        CLT_TRY(CLT__ARGS_AT(ctx, k, 11, CLT__ARG(sm), CLT__ARG(so), CLT__ARG(wm), CLT__ARG(wo),
                             CLT__ARG(bm), CLT__ARG(bo), CLT__ARG(relu)));
        CLT_TRY(launch_elementwise(ctx, k, 6, B, g, "batchnorm_backward_dx"));
    }
fail:
    return st;
}

void clt__opts_batchnorm(char *dst, size_t n, clt_dtype x, clt_dtype g)
{
    snprintf(dst, n, "-DX_DTYPE=%d -DG_DTYPE=%d", (int)x, (int)g);
}

static void batchnorm_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[64];
    for (int x = 0; x < CLT__FLOAT_DTYPES; x++)
        for (int g = 0; g < CLT__FLOAT_DTYPES; g++) {
            clt__opts_batchnorm(o, sizeof o, (clt_dtype)x, (clt_dtype)g);
            fn("batchnorm", o, user);
        }
}

const struct clt__op_family clt__family_batchnorm = {
    .name = "batchnorm",
    .sources = "batchnorm",
    .slots = BN__KERNELS * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES, /* kernel, x and dy dtypes */
    .variants = batchnorm_variants,
};
