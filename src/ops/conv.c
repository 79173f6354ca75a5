/* 2-D convolution (PyTorch's conv2d, NCHW) as im2col + GEMM: the C wrappers of cl/conv.cl and
 * the passes that chain them with clt_op_gemm and the bias ops.
 *
 * Why im2col + one GEMM: the GEMM is the part that is tuned per device (cltrain's packed
 * direct kernel on CPUs, the tiled one on GPUs, CLBlast where chosen), so a convolution
 * written as one large GEMM of (B*OH*OW, C*K*K) x (C*K*K, OUT) runs at the GEMM's speed on both,
 * instead of a direct-convolution kernel that would need its own tiling per device. The cost
 * is memory traffic: the im2col matrix is K*K/S^2 times the input (kept in a workspace shared
 * by the model's layers) and two cheap permutes between the GEMM's row layout and NCHW; for
 * the small kernels of image models these passes are a small part of the GEMM's time.
 *
 * Why the weights are transposed first: the GEMMs are laid out so that their long dimension
 * (B*OH*OW) is never the one a kernel reduces or gathers across in small pieces. The forward
 * product reads W^T (CKK, OUT), a copy made per call (OUT*CKK elements: nothing next to the
 * im2col matrix), so it is NN, whose in-place outer-product kernel runs 3-13x faster than NT
 * over W on PoCL (measured at the CNN preset's shapes: 4.8 ms against 17.6 for conv 64 over
 * 32 channels, 0.5 against 6.5 ms for the first conv, whose K = 9 leaves a dot-product kernel
 * nothing to vectorise). Likewise the weight gradient is computed as (CKK, OUT) = cols^T rows
 * and transposed into dW: with OUT x CKK = 32 x 9 the direct product has 4 work-items for
 * 100k-long sums (11 ms), the transposed one 9 x 32 outputs in vectors (0.8 ms). That product
 * needs an f32 scratch, so with a 16-bit workspace the gradient is the direct product.
 *
 * Forward:  cols = im2col(x); Wt = W^T; rows (B*OH*OW, OUT) = cols Wt; y = NCHW(rows) + bias.
 * Backward: rows = rows-of(dy); cols rebuilt from x unless the caller knows the workspace still
 * holds them (the model's last convolution: 8 % of a cnn preset step on PoCL); f32 workspace:
 * dWt = cols^T rows, dW = beta dW + dWt^T, else dW = beta dW + rows^T cols; db = beta db +
 * column sums of rows; dcols = rows W (into the cols space, after dW has read it);
 * dx = col2im(dcols), a gather per input element (no atomics).
 * Workspace: cols (B*OH*OW, CKK), rows (B*OH*OW, OUT), then Wt or dWt (OUT*CKK).
 *
 * On CPUs, stride 1 and f32, the passes skip the im2col matrix (the implicit forward below
 * says why): y = conv_forward_implicit(pad(x)); dx = the same kernel over pad(dy) with the
 * weights flipped and transposed (the adjoint of a stride-1 convolution is one); for 3x3
 * kernels dW and db = conv_weight_grad_implicit(pad(x), dy), per chunk of samples that stays in
 * a core's L2 cache. The padded copies go where cols and rows would (the workspace is larger
 * per sample only where they are, with few input channels). Measured on PoCL (2 cores,
 * BENCHMARKS.md): CNN-S 18-19 -> 21.5-22.8 steps/s, CNN-M 3.0-3.2 -> 3.5-3.6 (then 4.1-4.9
 * with the later weight-gradient and batch-norm changes). */
#include "ops/nn_internal.h"

#include "runtime/ctx_internal.h"
#include "runtime/profile_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_IM2COL, K_COL2IM, K_FWD_PERMUTE, K_BWD_PERMUTE, K_PAD, K_IMPLICIT, K_FLIP, K_DW };
static const char *const kernel_names[] = {
    "conv_im2col",       "conv_col2im",          "conv_forward_permute",
    "conv_backward_permute", "conv_pad",         "conv_forward_implicit",
    "conv_flip_weights", "conv_weight_grad_implicit"};

static clt_status conv_kernel(clt_ctx *ctx, int which, clt_dtype src, clt_dtype dst, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_conv, which * 9 + (int)src * 3 + (int)dst, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[128];
        clt__opts_conv(opts, sizeof opts, src, dst, clt__conv_wide(clt_ctx_device(ctx)));
        st = clt__kernel(ctx, "conv", opts, kernel_names[which], slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* A 3-D launch of n[0] x n[1] x n[2] work-items, each extent rounded up to the work-group's (the
 * kernels check their indices): groups of the kernel's size from the device's limits, filled
 * in powers of two from dimension 0 (along the memory the kernel writes, at most cap0 wide)
 * outwards. Through clt__enqueue_nd (the profiler, --sync-debug, and slices of a long
 * dimension 2 on devices that limit its groups). */
static clt_status launch_3d(clt_ctx *ctx, cl_kernel k, const size_t n[3], size_t cap0,
                            const char *what)
{
    const size_t wg = clt__local_size(ctx, k);
    size_t local[3] = {1, 1, 1}, global[3], used = 1;
    if (n[0] == 0 || n[1] == 0 || n[2] == 0) return CLT_OK;
    for (int d = 0; d < 3; d++) {
        while (local[d] < n[d] && used * 2 <= wg && (d > 0 || local[d] * 2 <= cap0)) {
            local[d] *= 2;
            used *= 2;
        }
        global[d] = (n[d] + local[d] - 1) / local[d] * local[d];
    }
    return clt__enqueue_nd(ctx, k, 3, global, local, what);
}

size_t clt_conv_out_side(size_t n, size_t K, size_t S, size_t P)
{
    if (S == 0 || n + 2 * P < K) return 0;
    return (n + 2 * P - K) / S + 1;
}

static size_t implicit_per_sample(const struct clt_conv_geom *g, size_t OH, size_t OW);

/* Elements of ws per sample before the part that does not grow with the batch (the weights'
 * copy): the im2col matrix and the GEMM's rows, or what the implicit passes keep there when
 * that is more (the padded copies, for few input channels). */
static size_t ws_per_sample(const struct clt_conv_geom *g, size_t OH, size_t OW)
{
    size_t im2col = OH * OW * (g->C * g->K * g->K + g->OUT), impl = implicit_per_sample(g, OH, OW);
    return im2col > impl ? im2col : impl;
}

size_t clt_op_conv2d_workspace(const struct clt_conv_geom *g)
{
    size_t OH = clt_conv_out_side(g->H, g->K, g->S, g->P),
           OW = clt_conv_out_side(g->W, g->K, g->S, g->P);
    return g->B * ws_per_sample(g, OH, OW) + g->OUT * g->C * g->K * g->K;
}

/* The checks both passes share: geometry in range, float tensors of the right sizes. */
static clt_status check_geom(clt_ctx *ctx, const struct clt_conv_geom *g, const char *op,
                             size_t *OH, size_t *OW)
{
    *OH = clt_conv_out_side(g->H, g->K, g->S, g->P);
    *OW = clt_conv_out_side(g->W, g->K, g->S, g->P);
    if (g->B == 0 || g->C == 0 || g->OUT == 0 || g->K == 0 || g->S == 0 || *OH == 0 || *OW == 0 ||
        g->C * g->K * g->K > UINT32_MAX || g->OUT > UINT32_MAX || g->H + 2 * g->P > INT32_MAX ||
        g->W + 2 * g->P > INT32_MAX || *OH * *OW > UINT32_MAX ||
        (g->H > 0 && g->B > UINT32_MAX / g->H) ||
        g->B > UINT32_MAX / *OH)
        return clt__fail(ctx, CLT_ERR_SHAPE,
                         "%s: bad geometry B %zu C %zu H %zu W %zu OUT %zu K %zu S %zu P %zu", op,
                         g->B, g->C, g->H, g->W, g->OUT, g->K, g->S, g->P);
    return CLT_OK;
}

static clt_status check_tensor(const clt_tensor *t, size_t n, const char *op, const char *what)
{
    clt_status st = clt__nn_need_float(t, op, what);
    return st != CLT_OK ? st : clt__nn_need_numel(t, n, op, what);
}

static clt_status check_ws(const clt_tensor *ws, const struct clt_conv_geom *g, const char *op)
{
    clt_status st = clt__nn_need_float(ws, op, "workspace");
    if (st != CLT_OK) return st;
    size_t need = clt_op_conv2d_workspace(g);
    if (clt_tensor_numel(ws) < need)
        return clt__fail(clt_tensor_ctx(ws), CLT_ERR_SHAPE,
                         "%s: the workspace has %zu elements, needs %zu", op, clt_tensor_numel(ws),
                         need);
    return CLT_OK;
}

static clt_status im2col(clt_ctx *ctx, const clt_tensor *cols, const clt_tensor *x,
                         const struct clt_conv_geom *g, size_t OH, size_t OW)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(conv_kernel(ctx, K_IM2COL, clt_tensor_dtype(x), clt_tensor_dtype(cols), &k));
    cl_mem cm = clt_tensor_mem(cols), xm = clt_tensor_mem(x);
    cl_ulong co = clt_tensor_offset(cols), xo = clt_tensor_offset(x);
    cl_uint BOH = (cl_uint)(g->B * OH), C = (cl_uint)g->C, H = (cl_uint)g->H, W = (cl_uint)g->W,
            K = (cl_uint)g->K, S = (cl_uint)g->S, P = (cl_uint)g->P, oh = (cl_uint)OH,
            ow = (cl_uint)OW;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(cm), CLT__ARG(co), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(BOH),
                      CLT__ARG(C), CLT__ARG(H), CLT__ARG(W), CLT__ARG(K), CLT__ARG(S), CLT__ARG(P),
                      CLT__ARG(oh), CLT__ARG(ow)));
    const size_t range[3] = {g->C, OW, BOH};
    CLT_TRY(launch_3d(ctx, k, range, 64, "conv_im2col"));
fail:
    return st;
}

/* A (rows, cols) view of ws at element `offset`. */
static clt_status ws_view(clt_tensor **out, clt_tensor *ws, size_t offset, size_t rows,
                          size_t cols)
{
    const size_t dims[2] = {rows, cols};
    return clt_tensor_view(out, ws, offset, 2, dims);
}

/* dst[b*HW + s, o] = src[b, o, s] over (B, OUT, HW): dy to the GEMM's rows, or (B = 1) the
 * weights (OUT, CKK) to (CKK, OUT). */
static clt_status to_rows(clt_ctx *ctx, const clt_tensor *dst, const clt_tensor *src, size_t B,
                          size_t OUT, size_t HW, const char *what)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(conv_kernel(ctx, K_BWD_PERMUTE, clt_tensor_dtype(src), clt_tensor_dtype(dst), &k));
    cl_mem dm = clt_tensor_mem(dst), sm = clt_tensor_mem(src);
    cl_ulong dof = clt_tensor_offset(dst), so = clt_tensor_offset(src);
    cl_uint b = (cl_uint)B, out = (cl_uint)OUT, hw = (cl_uint)HW;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dm), CLT__ARG(dof), CLT__ARG(sm), CLT__ARG(so), CLT__ARG(b),
                      CLT__ARG(out), CLT__ARG(hw)));
    const size_t range[3] = {(HW + 7) / 8, (OUT + 7) / 8, B}; /* 8 x 8 tiles (cl/conv.cl) */
    CLT_TRY(launch_3d(ctx, k, range, 32, what));
fail:
    return st;
}

/* dst[b, o, s] = src[b*HW + s, o] (+ bias[o]) + beta dst[b, o, s] over (B, OUT, HW): the GEMM's
 * rows to NCHW, or (B = 1) the weight gradient (CKK, OUT) into dW (OUT, CKK). */
static clt_status from_rows(clt_ctx *ctx, const clt_tensor *dst, const clt_tensor *src,
                            const clt_tensor *bias, size_t B, size_t OUT, size_t HW, float beta,
                            const char *what)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(conv_kernel(ctx, K_FWD_PERMUTE, clt_tensor_dtype(src), clt_tensor_dtype(dst), &k));
    cl_mem dm = clt_tensor_mem(dst), sm = clt_tensor_mem(src),
           bm = bias ? clt_tensor_mem(bias) : sm;
    cl_ulong dof = clt_tensor_offset(dst), so = clt_tensor_offset(src),
             bo = bias ? clt_tensor_offset(bias) : 0;
    cl_uint has_bias = bias != NULL, b = (cl_uint)B, out = (cl_uint)OUT, hw = (cl_uint)HW;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dm), CLT__ARG(dof), CLT__ARG(sm), CLT__ARG(so), CLT__ARG(bm),
                      CLT__ARG(bo), CLT__ARG(has_bias), CLT__ARG(b), CLT__ARG(out), CLT__ARG(hw),
                      CLT__ARG(beta)));
    const size_t range[3] = {(HW + 7) / 8, (OUT + 7) / 8, B}; /* 8 x 8 tiles (cl/conv.cl) */
    CLT_TRY(launch_3d(ctx, k, range, 32, what));
fail:
    return st;
}

/* ---- the implicit passes -------------------------------------------------------------------
 * Why passes without the im2col matrix: on a CPU the GEMM itself runs near the machine's peak
 * (about 145 GFLOP/s of 180 on PoCL, 2 cores), so the im2col matrix (K*K times the input, written
 * and read once more), the weight transpose and the permute to NCHW are what is left to win: with
 * them a CNN-S step spent 24 % in im2col and 8 % in the permute. conv_forward_implicit (cl/conv.cl)
 * reads a zero-padded copy of the input in place and writes NCHW directly. GPUs keep im2col and the
 * tiled GEMM: their GEMM stages tiles in local memory, which this kernel does not, and their memory
 * bandwidth makes the extra passes cheap. Stride 1 only (a vector of neighbouring outputs reads
 * neighbouring inputs), f32 only (16-bit storage keeps the GEMM's conversions).
 * CLTRAIN_CONV=im2col or implicit overrides the choice, CLTRAIN_CONV_V=8 or 16 the vectors'
 * width (tests run every combination on every device). */
bool clt__conv_wide(const clt_device_info *dev)
{
    const char *env = getenv("CLTRAIN_CONV_V"); /* tests: both widths on any device */
    if (env && strcmp(env, "8") == 0) return false;
    if (env && strcmp(env, "16") == 0) return true;
    cl_uint native = 0;
    return dev->type == CLT_DEVICE_CPU && dev->device &&
           clGetDeviceInfo(dev->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof native,
                           &native, NULL) == CL_SUCCESS &&
           native >= 16;
}

/* CONV_V, CONV_TM and CONV_DW_TO of cl/conv.cl for ctx's device (clt__opts_conv's -D). */
struct implicit_block {
    size_t v, tm, to;
};

static struct implicit_block implicit_block(clt_ctx *ctx)
{
    bool wide = clt__conv_wide(clt_ctx_device(ctx));
    return wide ? (struct implicit_block){16, 12, 8} : (struct implicit_block){8, 6, 3};
}

/* The padded row: room for the vectors of either block (8 or 16 floats, two per work-item:
 * one row of 2V columns, or two rows of at most V), the same on every device so that the
 * model's workspace does not depend on it. */
static size_t implicit_wp(const struct clt_conv_geom *g, size_t OW)
{
    size_t w8 = (OW + 15) / 16 * 16, w16 = OW <= 16 ? 16 : (OW + 31) / 32 * 32;
    return (w8 > w16 ? w8 : w16) + g->K - 1;
}

/* The rows the weight gradient reads dy in: dy's own (OW), or a copy padded to whole vectors.
 * A row's last OW % 8 columns cost the kernel a vector assembled from pieces: cheaper than
 * the copy when they are a small part of the row or when the input has few channels (the
 * copy is then most of the pass), dearer otherwise. PoCL, per weight gradient and bias: 1 -> 64
 * channels on 28x28 at batch 256, 21 ms with the copy (and db apart) -> 9 ms reading dy; 32 -> 32
 * on 28x28, batch 128: 24.5 -> 21.8 ms; 128 -> 128 on 7x7: 25.6 with the copy, 31.5 without. */
static size_t dw_dy_row(const struct clt_conv_geom *g, size_t OW)
{
    return OW % 8 == 0 || OW >= 24 || g->C < 8 ? OW : (OW + 7) / 8 * 8;
}

/* Whether a pass of g takes the implicit path: wanted on this device, stride 1, every operand
 * f32 (the workspace has room for the padded copies: ws_per_sample). */
static bool implicit_wanted(const clt_tensor *const *ts, int n, const struct clt_conv_geom *g)
{
    const char *env = getenv("CLTRAIN_CONV");
    bool want = clt_ctx_device(clt_tensor_ctx(ts[0]))->type == CLT_DEVICE_CPU;
    if (env && strcmp(env, "im2col") == 0) want = false;
    if (env && strcmp(env, "implicit") == 0) want = true;
    if (!want || g->S != 1) return false;
    for (int i = 0; i < n; i++)
        if (clt_tensor_dtype(ts[i]) != CLT_DTYPE_F32) return false;
    return true;
}

/* The adjoint's geometry: a stride-1 convolution of dy (B, OUT, OH, OW) with C outputs and
 * padding K - 1 - P, whose output is x's shape. */
static struct clt_conv_geom adjoint_geom(const struct clt_conv_geom *g, size_t OH, size_t OW)
{
    return (struct clt_conv_geom){g->B, g->OUT, OH, OW, g->C, g->K, 1, g->K - 1 - g->P};
}

static bool implicit_applies(const clt_tensor *y, const clt_tensor *x, const clt_tensor *w,
                             const clt_tensor *ws, const struct clt_conv_geom *g)
{
    const clt_tensor *ts[] = {y, x, w, ws};
    return implicit_wanted(ts, 4, g);
}

/* The adjoint pass: its padded dy goes where the im2col matrix and rows were (free once dW has
 * been computed), its flipped weights where the transposed ones were. */
static bool implicit_dx_applies(const clt_tensor *dx, const clt_tensor *dy, const clt_tensor *w,
                                const clt_tensor *ws, const struct clt_conv_geom *g)
{
    const clt_tensor *ts[] = {dx, dy, w, ws};
    return implicit_wanted(ts, 4, g) && g->P <= g->K - 1;
}

/* What the implicit passes of g keep in ws per sample (0 when none applies): the padded input
 * of the forward and of the 3x3 weight gradient, the padded dy of the adjoint. */
static size_t implicit_per_sample(const struct clt_conv_geom *g, size_t OH, size_t OW)
{
    if (g->S != 1 || OH == 0 || OW == 0) return 0;
    size_t fwd = g->C * (g->H + 2 * g->P) * implicit_wp(g, OW), need = fwd;
    if (g->P <= g->K - 1) {
        struct clt_conv_geom a = adjoint_geom(g, OH, OW);
        size_t adj = a.C * (a.H + 2 * a.P) * implicit_wp(&a, g->W);
        if (adj > need) need = adj;
    }
    size_t dy_row = dw_dy_row(g, OW);
    if (g->K == 3 && dy_row != OW && fwd + g->OUT * OH * dy_row > need)
        need = fwd + g->OUT * OH * dy_row;
    return need;
}

/* conv_pad's launch: xp (B*C, Hp, Wp) at ws's start + at from x (B*C, H, W) padded by P. */
static clt_status pad(clt_ctx *ctx, clt_tensor *ws, size_t at, const clt_tensor *x, size_t BC,
                      size_t H, size_t W, size_t P, size_t Hp, size_t Wp)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    CLT_TRY(conv_kernel(ctx, K_PAD, CLT_DTYPE_F32, CLT_DTYPE_F32, &k));
    cl_mem xpm = clt_tensor_mem(ws), xm = clt_tensor_mem(x);
    cl_ulong xpo = clt_tensor_offset(ws) + at, xo = clt_tensor_offset(x);
    cl_uint bc = (cl_uint)BC, h = (cl_uint)H, w = (cl_uint)W, p = (cl_uint)P, hp = (cl_uint)Hp,
            wp = (cl_uint)Wp;
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(xpm), CLT__ARG(xpo), CLT__ARG(xm), CLT__ARG(xo),
                      CLT__ARG(bc), CLT__ARG(h), CLT__ARG(w), CLT__ARG(p), CLT__ARG(hp),
                      CLT__ARG(wp)));
    const size_t range[3] = {Hp, BC, 1};
    CLT_TRY(launch_3d(ctx, k, range, 64, "conv_pad"));
fail:
    return st;
}

/* The weight gradient without the im2col matrix: 3x3 kernels (the kernel's sums are unrolled
 * for them), with the input gradient (if any) also implicit. */
static bool implicit_dw_applies(const clt_tensor *dx, const clt_tensor *dw, const clt_tensor *dy,
                                const clt_tensor *x, const clt_tensor *w, const clt_tensor *ws,
                                const struct clt_conv_geom *g)
{
    const clt_tensor *ts[] = {dw, dy, x, ws};
    if (g->K != 3 || !implicit_wanted(ts, 4, g)) return false;
    return !dx || implicit_dx_applies(dx, dy, w, ws, g);
}

/* Samples per launch: their dy and x within this many bytes per float of the kernel's vectors
 * (512 KiB with 8, 1 MiB with 16: the 16-float kernel does a chunk in half the time, and with
 * 512 KiB chunks CNN-M's 128 launches per weight gradient took 10 % longer on PoCL, AVX-512). */
#define DW_CHUNK_BYTES_PER_LANE (64 * 1024)

static clt_status weight_grad_implicit(clt_ctx *ctx, clt_tensor *dw, clt_tensor *db,
                                       const clt_tensor *dy, const clt_tensor *x, clt_tensor *ws,
                                       const struct clt_conv_geom *g, size_t OH, size_t OW,
                                       float beta, bool x_ready)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    size_t Hp = g->H + 2 * g->P, Wp = implicit_wp(g, OW), row = dw_dy_row(g, OW),
           xpn = g->B * g->C * Hp * Wp;
    if (!x_ready) CLT_TRY(pad(ctx, ws, 0, x, g->B * g->C, g->H, g->W, g->P, Hp, Wp));
    if (row != OW) CLT_TRY(pad(ctx, ws, xpn, dy, g->B * g->OUT, OH, OW, 0, OH, row));
    CLT_TRY(conv_kernel(ctx, K_DW, CLT_DTYPE_F32, CLT_DTYPE_F32, &k));
    cl_mem dwm = clt_tensor_mem(dw), wsm = clt_tensor_mem(ws),
           dym = row != OW ? wsm : clt_tensor_mem(dy), dbm = db ? clt_tensor_mem(db) : dwm;
    cl_ulong dwo = clt_tensor_offset(dw), xpo = clt_tensor_offset(ws),
             dyo = row != OW ? xpo + xpn : clt_tensor_offset(dy),
             dbo = db ? clt_tensor_offset(db) : 0;
    cl_uint has_db = db != NULL, C = (cl_uint)g->C, OUT = (cl_uint)g->OUT, oh = (cl_uint)OH,
            ow = (cl_uint)row, hp = (cl_uint)Hp, wp = (cl_uint)Wp;
    const struct implicit_block blk = implicit_block(ctx);
    size_t per_sample = (g->C * Hp * Wp + g->OUT * OH * row) * sizeof(float),
           chunk = DW_CHUNK_BYTES_PER_LANE * blk.v / per_sample;
    if (chunk < 1) chunk = 1;
    /* a work-group of 3 kh by up to 4 channels: they read the same dy rows (PoCL, CNN-M's 64 ->
     * 128 channels on 14x14: 70 ms per weight gradient with one work-item per group, 58-61) */
    const size_t lc = g->C < 4 ? g->C : 4,
                 global[3] = {(g->OUT + blk.to - 1) / blk.to, (g->C + lc - 1) / lc * lc, 3},
                 local[3] = {1, lc, 3};
    for (size_t b = 0; b < g->B; b += chunk) {
        cl_uint b0 = (cl_uint)b, b1 = (cl_uint)(b + chunk < g->B ? b + chunk : g->B);
        float bet = b == 0 ? beta : 1.0f; /* later chunks add to the first's sums */
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dwm), CLT__ARG(dwo), CLT__ARG(dbm), CLT__ARG(dbo),
                          CLT__ARG(has_db), CLT__ARG(dym), CLT__ARG(dyo), CLT__ARG(wsm),
                          CLT__ARG(xpo), CLT__ARG(bet), CLT__ARG(b0), CLT__ARG(b1),
                          CLT__ARG(C), CLT__ARG(OUT), CLT__ARG(oh), CLT__ARG(ow), CLT__ARG(hp),
                          CLT__ARG(wp)));
        CLT_TRY(clt__enqueue_nd(ctx, k, 3, global, local, "conv_weight_grad_implicit"));
    }
fail:
    return st;
}

/* What the forward of g left in ws: x's im2col matrix, or (implicit) x's padded copy, which the
 * implicit weight gradient reads in the same place. The forward's choice, from the backward's
 * operands (dy has y's dtype). */
static bool forward_was_implicit(const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w,
                                 const clt_tensor *ws, const struct clt_conv_geom *g)
{
    return implicit_applies(dy, x, w, ws, g);
}

bool clt_op_conv2d_leaves_cols(const clt_tensor *y, const clt_tensor *x, const clt_tensor *w,
                               const clt_tensor *ws, const struct clt_conv_geom *g)
{
    return !implicit_applies(y, x, w, ws, g) || g->K == 3;
}

bool clt_op_conv2d_backward_leaves_cols(const clt_tensor *dw, const clt_tensor *dy,
                                        const clt_tensor *x, const clt_tensor *w,
                                        const clt_tensor *ws, const struct clt_conv_geom *g)
{
    return implicit_dw_applies(NULL, dw, dy, x, w, ws, g) || !forward_was_implicit(dy, x, w, ws, g);
}

static clt_status forward_implicit(clt_ctx *ctx, clt_tensor *y, const clt_tensor *x,
                                   const clt_tensor *w, const clt_tensor *bias, clt_tensor *ws,
                                   const struct clt_conv_geom *g, size_t OH, size_t OW)
{
    clt_status st = CLT_OK;
    cl_kernel ki;
    CLT_TRY(conv_kernel(ctx, K_IMPLICIT, CLT_DTYPE_F32, CLT_DTYPE_F32, &ki));
    cl_mem xpm = clt_tensor_mem(ws), ym = clt_tensor_mem(y), wm = clt_tensor_mem(w),
           bm = bias ? clt_tensor_mem(bias) : wm;
    cl_ulong xpo = clt_tensor_offset(ws), yo = clt_tensor_offset(y), wo = clt_tensor_offset(w),
             bo = bias ? clt_tensor_offset(bias) : 0;
    const struct implicit_block blk = implicit_block(ctx);
    const size_t Hp = g->H + 2 * g->P, Wp = implicit_wp(g, OW), V = blk.v, TM = blk.tm;
    /* rows of at most V columns: a work-item takes two of them (half its lanes idle otherwise;
     * PoCL, 128 -> 128 channels on 7x7: 81 -> 122 GFLOP/s) */
    const bool two_rows = OW <= V;
    size_t rows = two_rows ? g->B * ((OH + 1) / 2) : g->B * OH;
    cl_uint hp = (cl_uint)Hp, wp = (cl_uint)Wp, has_bias = bias != NULL, BOH = (cl_uint)rows,
            C = (cl_uint)g->C, K = (cl_uint)g->K, OUT = (cl_uint)g->OUT, oh = (cl_uint)OH,
            ow = (cl_uint)OW, pair = two_rows;
    CLT_TRY(pad(ctx, ws, 0, x, g->B * g->C, g->H, g->W, g->P, Hp, Wp));
    CLT_TRY(CLT__ARGS(ctx, ki, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xpm), CLT__ARG(xpo),
                      CLT__ARG(wm), CLT__ARG(wo), CLT__ARG(bm), CLT__ARG(bo), CLT__ARG(has_bias),
                      CLT__ARG(BOH), CLT__ARG(C), CLT__ARG(hp), CLT__ARG(wp), CLT__ARG(K),
                      CLT__ARG(OUT), CLT__ARG(oh), CLT__ARG(ow), CLT__ARG(pair)));
    /* one work-item per group: each is a whole register block (as the direct GEMM's) */
    const size_t global[3] = {(g->OUT + TM - 1) / TM, two_rows ? 1 : (OW + 2 * V - 1) / (2 * V),
                              rows},
                 local[3] = {1, 1, 1};
    CLT_TRY(clt__enqueue_nd(ctx, ki, 3, global, local, "conv_forward_implicit"));
fail:
    return st;
}

clt_status clt_op_conv2d_forward(clt_tensor *y, const clt_tensor *x, const clt_tensor *w,
                                 const clt_tensor *bias, clt_tensor *ws,
                                 const struct clt_conv_geom *g)
{
    clt_status st = CLT_OK;
    clt_tensor *cols = NULL, *rows = NULL, *wt = NULL;
    CLT_ASSERT(y && x && w && ws && g);
    clt_ctx *ctx = clt_tensor_ctx(y);
    const char *op = "conv2d_forward";
    size_t OH, OW;
    CLT_TRY(clt_tensor_same_ctx(y, x));
    CLT_TRY(clt_tensor_same_ctx(y, w));
    CLT_TRY(clt_tensor_same_ctx(y, ws));
    if (bias) CLT_TRY(clt_tensor_same_ctx(y, bias));
    CLT_TRY(check_geom(ctx, g, op, &OH, &OW));
    const size_t M = g->B * OH * OW, CKK = g->C * g->K * g->K;
    CLT_TRY(check_tensor(x, g->B * g->C * g->H * g->W, op, "x"));
    CLT_TRY(check_tensor(w, g->OUT * CKK, op, "w"));
    CLT_TRY(check_tensor(y, M * g->OUT, op, "y"));
    CLT_TRY(check_ws(ws, g, op));
    if (bias) {
        CLT_TRY(check_tensor(bias, g->OUT, op, "bias"));
        CLT_TRY(clt__nn_need_dtype(bias, clt_tensor_dtype(ws), op, "bias"));
    }
    CLT_TRY(ws_view(&wt, ws, g->B * ws_per_sample(g, OH, OW), CKK, g->OUT));
    CLT_TRY(to_rows(ctx, wt, w, 1, g->OUT, CKK, "conv_weight_transpose"));
    if (implicit_applies(y, x, w, ws, g)) {
        st = forward_implicit(ctx, y, x, wt, bias, ws, g, OH, OW);
        goto fail;
    }
    CLT_TRY(ws_view(&cols, ws, 0, M, CKK));
    CLT_TRY(ws_view(&rows, ws, M * CKK, M, g->OUT));

    CLT_TRY(im2col(ctx, cols, x, g, OH, OW));
    CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, g->OUT, CKK, 1.0f, cols, wt, 0.0f, rows));
    CLT_TRY(from_rows(ctx, y, rows, bias, g->B, g->OUT, OH * OW, 0.0f, "conv_forward_permute"));
fail:
    clt_tensor_free(cols);
    clt_tensor_free(rows);
    clt_tensor_free(wt);
    return st;
}

clt_status clt_op_conv2d_backward(clt_tensor *dx, clt_tensor *dw, clt_tensor *db,
                                  const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w,
                                  clt_tensor *ws, const struct clt_conv_geom *g, float beta,
                                  bool cols_ready)
{
    clt_status st = CLT_OK;
    clt_tensor *cols = NULL, *rows = NULL, *wt = NULL;
    CLT_ASSERT(dw && dy && x && w && ws && g);
    clt_ctx *ctx = clt_tensor_ctx(dw);
    const char *op = "conv2d_backward";
    size_t OH, OW;
    CLT_TRY(clt_tensor_same_ctx(dw, dy));
    CLT_TRY(clt_tensor_same_ctx(dw, x));
    CLT_TRY(clt_tensor_same_ctx(dw, w));
    CLT_TRY(clt_tensor_same_ctx(dw, ws));
    if (db) CLT_TRY(clt_tensor_same_ctx(dw, db));
    if (dx) CLT_TRY(clt_tensor_same_ctx(dw, dx));
    CLT_TRY(check_geom(ctx, g, op, &OH, &OW));
    const size_t M = g->B * OH * OW, CKK = g->C * g->K * g->K;
    CLT_TRY(check_tensor(x, g->B * g->C * g->H * g->W, op, "x"));
    CLT_TRY(check_tensor(w, g->OUT * CKK, op, "w"));
    CLT_TRY(check_tensor(dy, M * g->OUT, op, "dy"));
    CLT_TRY(clt__nn_need_dtype(dw, CLT_DTYPE_F32, op, "dw"));
    CLT_TRY(clt__nn_need_numel(dw, g->OUT * CKK, op, "dw"));
    if (db) {
        CLT_TRY(clt__nn_need_dtype(db, CLT_DTYPE_F32, op, "db"));
        CLT_TRY(clt__nn_need_numel(db, g->OUT, op, "db"));
    }
    if (dx) CLT_TRY(check_tensor(dx, g->B * g->C * g->H * g->W, op, "dx"));
    CLT_TRY(check_ws(ws, g, op));
    CLT_TRY(ws_view(&cols, ws, 0, M, CKK));
    CLT_TRY(ws_view(&rows, ws, M * CKK, M, g->OUT));

    /* cols_ready: ws holds what the forward left, usable when this pass reads the same thing */
    const bool fwd_implicit = forward_was_implicit(dy, x, w, ws, g);
    if (implicit_dw_applies(dx, dw, dy, x, w, ws, g)) {
        CLT_TRY(weight_grad_implicit(ctx, dw, db, dy, x, ws, g, OH, OW, beta,
                                     cols_ready && fwd_implicit));
        goto input_grad;
    }
    if (fwd_implicit) cols_ready = false;
    CLT_TRY(to_rows(ctx, rows, dy, g->B, g->OUT, OH * OW, "conv_backward_permute"));
    if (!cols_ready) CLT_TRY(im2col(ctx, cols, x, g, OH, OW));
    if (clt_tensor_dtype(ws) == CLT_DTYPE_F32) {
        CLT_TRY(ws_view(&wt, ws, g->B * ws_per_sample(g, OH, OW), CKK, g->OUT));
        CLT_TRY(clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, CKK, g->OUT, M, 1.0f, cols, rows, 0.0f, wt));
        CLT_TRY(from_rows(ctx, dw, wt, NULL, 1, g->OUT, CKK, beta, "conv_weight_grad_transpose"));
    } else {
        CLT_TRY(clt_op_gemm(CLT_TRANS, CLT_NO_TRANS, g->OUT, CKK, M, 1.0f, rows, cols, beta, dw));
    }
    if (db) CLT_TRY(clt_op_bias_grad(db, rows, beta));
input_grad:
    if (dx && implicit_dx_applies(dx, dy, w, ws, g)) {
        /* dW and db have read cols and rows: the adjoint's padded dy and flipped weights take
         * their place (the queue is in order) */
        struct clt_conv_geom a = adjoint_geom(g, OH, OW);
        size_t nwf = g->OUT * CKK;
        clt_tensor *wf = NULL;
        cl_kernel k;
        CLT_TRY(clt_tensor_view(&wf, ws, g->B * ws_per_sample(g, OH, OW), 1, &nwf));
        st = conv_kernel(ctx, K_FLIP, CLT_DTYPE_F32, CLT_DTYPE_F32, &k);
        cl_mem fm = clt_tensor_mem(wf), wm = clt_tensor_mem(w);
        cl_ulong fo = clt_tensor_offset(wf), wo = clt_tensor_offset(w);
        cl_uint OUT = (cl_uint)g->OUT, C = (cl_uint)g->C, K = (cl_uint)g->K;
        if (st == CLT_OK)
            st = CLT__ARGS(ctx, k, CLT__ARG(fm), CLT__ARG(fo), CLT__ARG(wm), CLT__ARG(wo),
                           CLT__ARG(OUT), CLT__ARG(C), CLT__ARG(K));
        if (st == CLT_OK) st = clt__launch_1d(ctx, k, nwf, "conv_flip_weights");
        if (st == CLT_OK) st = forward_implicit(ctx, dx, dy, wf, NULL, ws, &a, g->H, g->W);
        clt_tensor_free(wf);
        if (st != CLT_OK) goto fail;
    } else if (dx) {
        /* dcols overwrite cols: the queue is in order, and dW has read them */
        CLT_TRY(clt_op_gemm(CLT_NO_TRANS, CLT_NO_TRANS, M, CKK, g->OUT, 1.0f, rows, w, 0.0f,
                            cols));
        cl_kernel k;
        CLT_TRY(conv_kernel(ctx, K_COL2IM, clt_tensor_dtype(cols), clt_tensor_dtype(dx), &k));
        cl_mem dxm = clt_tensor_mem(dx), cm = clt_tensor_mem(cols);
        cl_ulong dxo = clt_tensor_offset(dx), co = clt_tensor_offset(cols);
        cl_uint BH = (cl_uint)(g->B * g->H), C = (cl_uint)g->C, H = (cl_uint)g->H,
                W = (cl_uint)g->W, K = (cl_uint)g->K, S = (cl_uint)g->S, P = (cl_uint)g->P,
                oh = (cl_uint)OH, ow = (cl_uint)OW;
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dxm), CLT__ARG(dxo), CLT__ARG(cm), CLT__ARG(co),
                          CLT__ARG(BH), CLT__ARG(C), CLT__ARG(H), CLT__ARG(W), CLT__ARG(K),
                          CLT__ARG(S), CLT__ARG(P), CLT__ARG(oh), CLT__ARG(ow)));
        const size_t range[3] = {C, W, BH};
        CLT_TRY(launch_3d(ctx, k, range, 64, "conv_col2im"));
    }
fail:
    clt_tensor_free(cols);
    clt_tensor_free(rows);
    clt_tensor_free(wt);
    return st;
}

void clt__opts_conv(char *dst, size_t n, clt_dtype src, clt_dtype dstd, bool wide)
{
    int len = snprintf(dst, n, "-DSRC_DTYPE=%d -DDST_DTYPE=%d", (int)src, (int)dstd);
    if (wide && len > 0 && (size_t)len < n) /* the implicit conv's AVX-512 block */
        snprintf(dst + len, n - (size_t)len, " -DCONV_V=16 -DCONV_TM=12 -DCONV_DW_TO=8");
}

static void conv_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[128];
    for (int s = 0; s < CLT__FLOAT_DTYPES; s++)
        for (int d = 0; d < CLT__FLOAT_DTYPES; d++) {
            clt__opts_conv(o, sizeof o, (clt_dtype)s, (clt_dtype)d, false);
            fn("conv", o, user);
        }
    /* the implicit forward (f32 only) with wide vectors */
    clt__opts_conv(o, sizeof o, CLT_DTYPE_F32, CLT_DTYPE_F32, true);
    fn("conv", o, user);
}

const struct clt__op_family clt__family_conv = {
    .name = "conv",
    .sources = "conv",
    /* kernel, then the source and destination float dtypes */
    .slots =
        (int)(sizeof kernel_names / sizeof *kernel_names) * CLT__FLOAT_DTYPES * CLT__FLOAT_DTYPES,
    .variants = conv_variants,
};
