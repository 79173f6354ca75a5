/* The data-movement half of a 2-D convolution (the arithmetic is clt_op_gemm, see
 * src/ops/conv.c): im2col, its adjoint col2im (a gather per input element: no atomics, the same
 * bits on every launch), and the permutes between the GEMM's rows (B*OH*OW, OUT) and NCHW
 * (B, OUT, OH, OW), the forward one adding the bias. Source and destination may be f32, f16 or
 * bf16 storage (-DSRC_DTYPE, -DDST_DTYPE; f32 arithmetic, one rounding at the store).
 * Shapes: x (B, C, H, W), cols (B*OH*OW, C*K*K) with row (b, oh, ow) and column (c, kh, kw),
 * zero padding P on each side, stride S.
 * 3-D launches whose dimension 0 runs along the memory the kernel writes (neighbouring
 * work-items write neighbouring elements: coalesced on GPUs, contiguous runs on CPUs); the
 * indices come from the range itself, with at most one 32-bit division per work-item, of an
 * index that a CPU compiler's work-item loops hold constant. Every extent is rounded up to the
 * work-group's, so the kernels check their indices; the host keeps each below 2^32. */
#ifndef SRC_DTYPE
#define SRC_DTYPE CLT_F32
#endif
#ifndef DST_DTYPE
#define DST_DTYPE CLT_F32
#endif

/* t / S for a stride S, without a division in the usual case S = 1. */
static inline uint conv_div_stride(uint t, uint S)
{
    return S == 1 ? t : t / S;
}

/* cols[r, (c, kh, kw)] = x[b, c, oh*S - P + kh, ow*S - P + kw], 0 in the padding, for row
 * r = (b, oh, ow). Range (C, OW, B*OH): work-item (c, ow, (b, oh)) writes the K*K contiguous
 * elements of its channel in row r, so a work-group writes one contiguous run. */
kernel void conv_im2col(global CLT_TYPE(DST_DTYPE) *cols, ulong cols_off,
                        const global CLT_TYPE(SRC_DTYPE) *x, ulong x_off, uint BOH, uint C, uint H,
                        uint W, uint K, uint S, uint P, uint OH, uint OW)
{
    const uint c = (uint)get_global_id(0), ow = (uint)get_global_id(1),
               t = (uint)get_global_id(2); /* b * OH + oh */
    const uint b = t / OH, oh = t - b * OH;
    if (c >= C || ow >= OW || t >= BOH) return;
    const int ih0 = (int)(oh * S) - (int)P, iw0 = (int)(ow * S) - (int)P;
    const ulong plane = x_off + ((ulong)b * C + c) * H * W;
    ulong o = cols_off + (((ulong)t * OW + ow) * C + c) * K * K;
    if (ih0 >= 0 && iw0 >= 0 && ih0 + (int)K <= (int)H && iw0 + (int)K <= (int)W) {
        /* the whole window inside the plane: no padding tests */
        ulong src = plane + (uint)ih0 * W + (uint)iw0;
        for (uint kh = 0; kh < K; kh++, src += W)
            for (uint kw = 0; kw < K; kw++, o++)
                CLT_STORE(DST_DTYPE, cols, o, CLT_LOAD(SRC_DTYPE, x, src + kw));
        return;
    }
    for (uint kh = 0; kh < K; kh++) {
        const int ih = ih0 + (int)kh;
        const bool row_in = ih >= 0 && ih < (int)H;
        const ulong src = plane + (ulong)(row_in ? ih : 0) * W;
        for (uint kw = 0; kw < K; kw++, o++) {
            const int iw = iw0 + (int)kw;
            float v = 0.0f;
            if (row_in && iw >= 0 && iw < (int)W) v = CLT_LOAD(SRC_DTYPE, x, src + (uint)iw);
            CLT_STORE(DST_DTYPE, cols, o, v);
        }
    }
}

/* dx[b, c, ih, iw] = the sum of dcols[(b, oh, ow), (c, kh, kw)] over the windows that cover
 * (ih, iw): oh*S + kh = ih + P with 0 <= kh < K and 0 <= oh < OH, likewise ow; the ranges of
 * oh and ow are computed (divisions by S only when S > 1) instead of tested per (kh, kw), and
 * the terms are summed in the fixed order kh, kw ascending (oh, ow descending).
 * Range (C, W, B*H): work-item (c, iw, (b, ih)); neighbouring work-items read neighbouring
 * column groups of the same dcols rows (the rows are long, the channels' groups adjacent). */
kernel void conv_col2im(global CLT_TYPE(DST_DTYPE) *dx, ulong dx_off,
                        const global CLT_TYPE(SRC_DTYPE) *dcols, ulong dcols_off, uint BH, uint C,
                        uint H, uint W, uint K, uint S, uint P, uint OH, uint OW)
{
    const uint c = (uint)get_global_id(0), iw = (uint)get_global_id(1),
               t = (uint)get_global_id(2); /* b * H + ih */
    const uint b = t / H, ih = t - b * H;
    if (iw >= W || c >= C || t >= BH) return;
    /* oh covers ih when oh*S <= ih + P < oh*S + K */
    const uint th = ih + P, tw = iw + P;
    const int oh_hi = (int)min(conv_div_stride(th, S), OH - 1),
              oh_lo = th < K ? 0 : (int)conv_div_stride(th - K, S) + 1,
              ow_hi = (int)min(conv_div_stride(tw, S), OW - 1),
              ow_lo = tw < K ? 0 : (int)conv_div_stride(tw - K, S) + 1;
    const uint CKK = C * K * K;
    const ulong base = dcols_off + (ulong)c * K * K;
    float acc = 0.0f;
    for (int oh = oh_hi; oh >= oh_lo; oh--) {
        const uint kh = th - (uint)oh * S;
        const ulong rbase = ((ulong)b * OH + (uint)oh) * OW;
        for (int ow = ow_hi; ow >= ow_lo; ow--) {
            const uint kw = tw - (uint)ow * S;
            acc += CLT_LOAD(SRC_DTYPE, dcols, base + (rbase + (uint)ow) * CKK + kh * K + kw);
        }
    }
    CLT_STORE(DST_DTYPE, dx, dx_off + (((ulong)b * C + c) * H + ih) * W + iw, acc);
}

/* The permutes between the GEMM's rows (b*HW + s, o) and NCHW (b, o, s) move 8 x 8 tiles: a
 * work-item reads 8 runs of 8 consecutive elements on one side and writes 8 runs on the other,
 * transposing in private memory. One work-item per element (the plain form) leaves one side
 * strided across neighbouring work-items: gathers or scatters when a CPU compiler vectorises
 * over them, 2-3x slower than the tiles on PoCL. Partial tiles at the edges go element by
 * element. Range (ceil(HW / 8), ceil(OUT / 8), B) for both. */
#define CONV_T 8

/* y[b, o, s] = rows[b*HW + s, o] (+ bias[o] when has_bias; bias has SRC_DTYPE) + beta y[b, o, s]
 * (y not read when beta is 0), over the tile at s0 = 8 * id(0), o0 = 8 * id(1), b = id(2). With
 * B = 1 it is a transpose: the weight gradient's (CKK, OUT) product back to (OUT, CKK). */
kernel void conv_forward_permute(global CLT_TYPE(DST_DTYPE) *y, ulong y_off,
                                 const global CLT_TYPE(SRC_DTYPE) *rows, ulong rows_off,
                                 const global CLT_TYPE(SRC_DTYPE) *bias, ulong b_off,
                                 uint has_bias, uint B, uint OUT, uint HW, float beta)
{
    const uint s0 = (uint)get_global_id(0) * CONV_T, o0 = (uint)get_global_id(1) * CONV_T,
               b = (uint)get_global_id(2);
    if (s0 >= HW || o0 >= OUT || b >= B) return;
    const ulong src = rows_off + ((ulong)b * HW + s0) * OUT + o0,
                dst = y_off + ((ulong)b * OUT + o0) * HW + s0;
    if (s0 + CONV_T <= HW && o0 + CONV_T <= OUT) {
        float t[CONV_T * CONV_T];
#pragma unroll
        for (uint i = 0; i < CONV_T; i++) /* row s0 + i: channels o0 .. o0 + 7 */
            vstore8(CLT_VLOAD(SRC_DTYPE, 8, rows, src + (ulong)i * OUT), 0, t + i * CONV_T);
        const float8 bv = has_bias ? CLT_VLOAD(SRC_DTYPE, 8, bias, b_off + o0) : (float8)(0.0f);
        const float bs[CONV_T] = {bv.s0, bv.s1, bv.s2, bv.s3, bv.s4, bv.s5, bv.s6, bv.s7};
#pragma unroll
        for (uint j = 0; j < CONV_T; j++) { /* channel o0 + j: positions s0 .. s0 + 7 */
            float8 v = (float8)(t[j], t[8 + j], t[16 + j], t[24 + j], t[32 + j], t[40 + j],
                                t[48 + j], t[56 + j]) + bs[j];
            const ulong d = dst + (ulong)j * HW;
            if (beta != 0.0f) v = fma((float8)(beta), CLT_VLOAD(DST_DTYPE, 8, y, d), v);
            CLT_VSTORE(DST_DTYPE, 8, v, y, d);
        }
        return;
    }
    for (uint j = 0; j < CONV_T && o0 + j < OUT; j++)
        for (uint i = 0; i < CONV_T && s0 + i < HW; i++) {
            const ulong d = dst + (ulong)j * HW + i;
            float v = CLT_LOAD(SRC_DTYPE, rows, src + (ulong)i * OUT + j);
            if (has_bias) v += CLT_LOAD(SRC_DTYPE, bias, b_off + o0 + j);
            if (beta != 0.0f) v = fma(beta, CLT_LOAD(DST_DTYPE, y, d), v);
            CLT_STORE(DST_DTYPE, y, d, v);
        }
}

/* rows[b*HW + s, o] = dy[b, o, s] over the tile at s0 = 8 * id(0), o0 = 8 * id(1), b = id(2).
 * With B = 1 it transposes the weights (OUT, CKK) to (CKK, OUT) for the forward GEMM. */
kernel void conv_backward_permute(global CLT_TYPE(DST_DTYPE) *rows, ulong rows_off,
                                  const global CLT_TYPE(SRC_DTYPE) *dy, ulong dy_off, uint B,
                                  uint OUT, uint HW)
{
    const uint s0 = (uint)get_global_id(0) * CONV_T, o0 = (uint)get_global_id(1) * CONV_T,
               b = (uint)get_global_id(2);
    if (s0 >= HW || o0 >= OUT || b >= B) return;
    const ulong src = dy_off + ((ulong)b * OUT + o0) * HW + s0,
                dst = rows_off + ((ulong)b * HW + s0) * OUT + o0;
    if (s0 + CONV_T <= HW && o0 + CONV_T <= OUT) {
        float t[CONV_T * CONV_T];
#pragma unroll
        for (uint j = 0; j < CONV_T; j++) /* channel o0 + j: positions s0 .. s0 + 7 */
            vstore8(CLT_VLOAD(SRC_DTYPE, 8, dy, src + (ulong)j * HW), 0, t + j * CONV_T);
#pragma unroll
        for (uint i = 0; i < CONV_T; i++) /* row s0 + i: channels o0 .. o0 + 7 */
            CLT_VSTORE(DST_DTYPE, 8,
                       (float8)(t[i], t[8 + i], t[16 + i], t[24 + i], t[32 + i], t[40 + i],
                                t[48 + i], t[56 + i]),
                       rows, dst + (ulong)i * OUT);
        return;
    }
    for (uint i = 0; i < CONV_T && s0 + i < HW; i++)
        for (uint j = 0; j < CONV_T && o0 + j < OUT; j++)
            CLT_STORE(DST_DTYPE, rows, dst + (ulong)i * OUT + j,
                      CLT_LOAD(SRC_DTYPE, dy, src + (ulong)j * HW + i));
}

/* ---- implicit GEMM: the forward of a stride-1 f32 convolution without the im2col matrix -----
 * On CPUs (src/ops/conv.c says when it is used) the forward reads the input where it lies: a
 * work-item computes CONV_TM output channels x CONV_VN neighbouring columns of one output row,
 * y[b, o0 .. o0+TM, oh, ow0 .. ow0+VN], as outer products of a weight (broadcast) and VN
 * consecutive input elements (one vector load) for every (c, kh, kw), and stores it straight
 * into NCHW with the bias added. No im2col matrix, no permute (only the small weights are
 * transposed). The loads need no padding tests because they read a zero-padded copy of the
 * input, xp (B*C, Hp, Wp) with Hp = H + 2P and Wp >= ceil(OW / VN) * VN + K - 1 (implicit_wp in
 * src/ops/conv.c), made by conv_pad: a vector of the
 * last column block may run past OW (those lanes are computed and never stored), never past a
 * row of xp. 6 x 16 (two vectors of 8) keeps the accumulators in 12 AVX2 registers (15 with
 * the operands) and loads 2 vectors and 6 broadcast weights per 12 multiply-adds, so the
 * multiply-adds, not the loads, set the pace (8 x 8 loaded 9 per 8: about 125 of 180
 * GFLOP/s on 2 Zen 3 cores). With AVX-512 (CONV_V 16, chosen by the host from the device's
 * native vector width) the block is 12 x 32: 24 of 32 registers, 2 vectors and 12 weights per
 * 24 multiply-adds (8-float vectors ran at half the machine's rate there). */
#ifndef CONV_V
#define CONV_V 8 /* floats per vector: 8 (AVX2) or 16 (AVX-512, 6 x 32 blocks: -DCONV_V=16) */
#endif
#ifndef CONV_TM
#define CONV_TM 6 /* output channels per work-item: 6, or 12 with 16-float vectors */
#endif
#define CONV_VN (2 * CONV_V)
#define floatV CLT__XCAT(float, CONV_V)
#define VLOADV CLT__XCAT(vload, CONV_V)
#define VSTOREV CLT__XCAT(vstore, CONV_V)

/* xp[bc, i, j] = x[bc, i - P, j - P], 0 outside x (Wp >= W + P). Range (Hp, B*C): a
 * work-item per padded row, copied in vectors (one element per work-item moved about 12 GB/s
 * on PoCL, a row per work-item more). */
kernel void conv_pad(global float *xp, ulong xp_off, const global float *x, ulong x_off, uint BC,
                     uint H, uint W, uint P, uint Hp, uint Wp)
{
    const uint i = (uint)get_global_id(0), bc = (uint)get_global_id(1);
    if (i >= Hp || bc >= BC) return;
    global float *dst = xp + xp_off + ((ulong)bc * Hp + i) * Wp;
    const int ih = (int)i - (int)P;
    uint j = 0;
    if (ih >= 0 && ih < (int)H) {
        const global float *src = x + x_off + ((ulong)bc * H + (uint)ih) * W;
        for (; j < P; j++) dst[j] = 0.0f;
        uint k = 0;
        for (; k + 8 <= W; k += 8) vstore8(vload8(0, src + k), 0, dst + P + k);
        for (; k < W; k++) dst[P + k] = src[k];
        j = P + W;
    }
    for (; j + 8 <= Wp; j += 8) vstore8((float8)(0.0f), 0, dst + j);
    for (; j < Wp; j++) dst[j] = 0.0f;
}

/* p[0 .. n) = the first n lanes of v (n < 8, or n < CONV_V for the V form) in pieces of 4, 2
 * and 1: at most 3 stores (element by element, a row's last 12 columns of 12 channels were
 * most of the first layer's forward on PoCL). */
static void conv_store_head8(float8 v, global float *p, uint n)
{
    float4 q = v.lo;
    if (n >= 4) {
        vstore4(v.lo, 0, p);
        q = v.hi;
        p += 4;
        n -= 4;
    }
    float2 d = q.lo;
    if (n >= 2) {
        vstore2(q.lo, 0, p);
        d = q.hi;
        p += 2;
        n -= 2;
    }
    if (n) *p = d.x;
}

static void conv_store_headV(floatV v, global float *p, uint n)
{
#if CONV_V == 16
    if (n >= 8) {
        vstore8(v.lo, 0, p);
        if (n > 8) conv_store_head8(v.hi, p + 8, n - 8);
        return;
    }
    conv_store_head8(v.lo, p, n);
#else
    conv_store_head8(v, p, n);
#endif
}

/* y = conv(x, w) + bias for stride 1 from xp (conv_pad's), the weights transposed: w (C*K*K,
 * OUT), as conv_weight_transpose writes them. Range (ceil(OUT / TM),
 * ceil(OW / VN), B*OH): work-item (ob, cb, (b, oh)). With `pair` (rows of at most 8 columns,
 * where 16 would leave most lanes idle), VN / 2 columns of two rows instead: range
 * (ceil(OUT / TM), 1, B*ceil(OH / 2)); an odd last row's partner is computed again, never
 * stored. Channels past OUT repeat the last weight row (computed, never stored). The sum runs
 * over c, kh, kw in that order. */
kernel void conv_forward_implicit(global float *y, ulong y_off, const global float *xp,
                                  ulong xp_off, const global float *w, ulong w_off,
                                  const global float *bias, ulong b_off, uint has_bias, uint BOH,
                                  uint C, uint Hp, uint Wp, uint K, uint OUT, uint OH, uint OW,
                                  uint pair)
{
    const uint ob = (uint)get_global_id(0), cb = (uint)get_global_id(1),
               t = (uint)get_global_id(2); /* b * OH + oh, or b * ceil(OH / 2) + oh / 2 */
    const uint o0 = ob * CONV_TM, ow0 = cb * CONV_VN;
    if (o0 >= OUT || ow0 >= OW || t >= BOH) return;
    const uint OHt = pair ? (OH + 1) / 2 : OH, b = t / OHt, oh = (t - b * OHt) << pair;
    /* where the second vector starts: CONV_V columns on, or the next row (this one again past
     * OH) */
    const uint d1 = !pair ? CONV_V : oh + 1 < OH ? Wp : 0;
    floatV lo[CONV_TM], hi[CONV_TM]; /* columns ow0 + [0, V) and ow0 + [V, 2V) */
#pragma unroll
    for (uint i = 0; i < CONV_TM; i++) lo[i] = hi[i] = (floatV)(0.0f);
    const global float *xc = xp + xp_off + ((ulong)b * C * Hp + oh) * Wp + ow0;
    /* wk: the weights of step k = (c, kh, kw), channels o0 on: TM consecutive floats, one
     * pointer for the whole block (12 row pointers spilled registers) */
    const global float *wk = w + w_off + o0;
    /* The steps of the sum, KS x KS per channel; W(i) is the weight of channel o0 + i at the
     * step. */
#define CONV_UNROLLED _Pragma("unroll") /* P below: a constant KS's loops unrolled */
#define CONV_ROLLED                       /* a runtime KS's kept (clang warns otherwise) */
#define CONV_STEPS(W, KS, P)                                                                      \
    for (uint c = 0; c < C; c++, xc += (ulong)Hp * Wp) {                                          \
        const global float *xr = xc;                                                              \
        P for (uint kh = 0; kh < (KS); kh++, xr += Wp) {                                          \
            P for (uint kw = 0; kw < (KS); kw++, wk += OUT) {                                     \
                const floatV x0 = VLOADV(0, xr + kw), x1 = VLOADV(0, xr + kw + d1);               \
                _Pragma("unroll") for (uint i = 0; i < CONV_TM; i++) {                            \
                    const floatV wv = (floatV)(W(i));                                             \
                    lo[i] = fma(wv, x0, lo[i]);                                                   \
                    hi[i] = fma(wv, x1, hi[i]);                                                   \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }
    if (o0 + CONV_TM <= OUT) {
#define CONV_W_FULL(i) wk[i]
        if (K == 3) /* 3 x 3, the common kernel: its 9 steps per channel unrolled */
            CONV_STEPS(CONV_W_FULL, 3u, CONV_UNROLLED)
        else
            CONV_STEPS(CONV_W_FULL, K, CONV_ROLLED)
    } else { /* the last block: channels past OUT repeat the last one */
        uint oi[CONV_TM];
#pragma unroll
        for (uint i = 0; i < CONV_TM; i++) oi[i] = min(i, OUT - 1 - o0);
#define CONV_W_EDGE(i) wk[oi[i]]
        CONV_STEPS(CONV_W_EDGE, K, CONV_ROLLED)
    }
#undef CONV_W_FULL
#undef CONV_W_EDGE
#undef CONV_STEPS
#undef CONV_UNROLLED
#undef CONV_ROLLED
    const ulong HW = (ulong)OH * OW;
    global float *yo = y + y_off + ((ulong)b * OUT + o0) * HW + (ulong)oh * OW + ow0;
#pragma unroll
    for (uint i = 0; i < CONV_TM; i++) {
        if (o0 + i >= OUT) continue;
        const floatV bv = (floatV)(has_bias ? bias[b_off + o0 + i] : 0.0f);
        const floatV v0 = lo[i] + bv, v1 = hi[i] + bv;
        global float *yr = yo + i * HW;
        if (pair) { /* v0 to row oh, v1 to row oh + 1, at most CONV_V columns each */
            for (uint r = 0; r < 2 && oh + r < OH; r++, yr += OW) {
                if (OW == CONV_V)
                    VSTOREV(r ? v1 : v0, 0, yr);
                else
                    conv_store_headV(r ? v1 : v0, yr, OW);
            }
        } else if (ow0 + CONV_VN <= OW) {
            VSTOREV(v0, 0, yr);
            VSTOREV(v1, 0, yr + CONV_V);
        } else { /* the edge: a whole vector while it fits, then the rest in pieces */
            floatV rest = v0;
            uint l0 = 0;
            if (ow0 + CONV_V <= OW) {
                VSTOREV(v0, 0, yr);
                rest = v1;
                l0 = CONV_V;
            }
            if (ow0 + l0 < OW) conv_store_headV(rest, yr + l0, OW - ow0 - l0);
        }
    }
}

/* The input gradient of a stride-1 convolution is itself one (the adjoint of a correlation):
 * dx = conv(dy padded by K - 1 - P, wf) with wf[c, o, kh, kw] = w[o, c, K-1-kh, K-1-kw], so
 * conv_forward_implicit computes it from conv_pad(dy) and these flipped weights, transposed as
 * it reads weights: wft[(o * K*K + kh * K + kw) * C + c] = wf[c, o, kh, kw]. Range
 * (C*OUT*K*K): one element each. */
kernel void conv_flip_weights(global float *wf, ulong wf_off, const global float *w, ulong w_off,
                              uint OUT, uint C, uint K)
{
    const uint i = (uint)get_global_id(0), KK = K * K;
    if (i >= C * OUT * KK) return;
    const uint r = i / C, c = i - r * C, o = r / KK, k = r - o * KK;
    wf[wf_off + i] = w[w_off + ((ulong)o * C + c) * KK + (KK - 1 - k)];
}

/* The sum of v's lanes, in a fixed order. */
static float conv_hsum8(float8 v)
{
    const float4 h = v.lo + v.hi;
    return (h.s0 + h.s2) + (h.s1 + h.s3);
}
#if CONV_V == 16
#define conv_hsumV(v) conv_hsum8((v).lo + (v).hi)
#else
#define conv_hsumV conv_hsum8
#endif

/* The last n (1 <= n < 8) columns of a row of dy as a vector, zeros after them. */
static float8 conv_row_tail(const global float *p, uint n)
{
    switch (n) { /* vector pieces: a private array's stores and reload stall the CPU */
    case 1: return (float8)(p[0], 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
    case 2: return (float8)(vload2(0, p), 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
    case 3: return (float8)(vload3(0, p), 0.0f, 0.0f, 0.0f, 0.0f, 0.0f);
    case 4: return (float8)(vload4(0, p), 0.0f, 0.0f, 0.0f, 0.0f);
    case 5: return (float8)(vload4(0, p), p[4], 0.0f, 0.0f, 0.0f);
    case 6: return (float8)(vload4(0, p), vload2(0, p + 4), 0.0f, 0.0f);
    default: return (float8)(vload4(0, p), vload3(0, p + 4), 0.0f);
    }
}

/* The same for 1 <= n < CONV_V columns. */
static floatV conv_row_tailV(const global float *p, uint n)
{
#if CONV_V == 16
    if (n < 8) return (float16)(conv_row_tail(p, n), (float8)(0.0f));
    return (float16)(vload8(0, p), n == 8 ? (float8)(0.0f) : conv_row_tail(p + 8, n - 8));
#else
    return conv_row_tail(p, n);
#endif
}

/* The weight gradient of a stride-1, 3x3 convolution without the im2col matrix, over samples
 * [b0, b1): dw[o, c, kh, kw] = beta dw + the sum over (b, oh, ow) of dy[b, o, oh, ow]
 * xp[b, c, oh+kh, ow+kw], from dy (rows of OW columns: dy itself, or a copy with rows padded
 * to whole vectors of 8) and xp (conv_forward_implicit's padded input, whose rows reach past
 * the last vector of 16). Work-item (ob, c, kh) keeps CONV_DW_TO x 3 vectors of CONV_V partial
 * sums (output channels o0 .. o0 + TO - 1 by kw), one per lane, over every (b, oh, column
 * block) in that order (a row's last OW % CONV_V columns as a vector with zeros after them),
 * and adds the lanes at the end: a fixed order, so the same bits on every launch. A step loads
 * 3 x vectors (the kw shifts) and TO dy vectors for 3 TO multiply-adds: with 8 floats, TO = 3
 * (13 of AVX2's 16 registers with the operands); with 16 (AVX-512, 32 registers) TO = 8: 28
 * registers, 11 loads per 24 multiply-adds (PoCL, CNN-M's 64 -> 128 channels on 14x14 at batch
 * 256, per weight gradient: TO 3 70-73 ms, 6 62-65, 8 56-60). Rows of exactly one vector (dy
 * padded to 16 on 14x14) run a loop of steps alone (the general loop's per-row set-up cost
 * 20 %). With has_db, work-items (ob, 0, 0) then sum their channels' dy into db (beta
 * likewise) while the chunk is still in the caches. The host launches it per chunk of samples
 * small enough to stay in the caches while every work-item reads it (one launch over the whole
 * batch streams each work-item's rows from memory: 1 flop per byte). Range (ceil(OUT / TO), C,
 * 3). */
#ifndef CONV_DW_TO
#define CONV_DW_TO 3 /* output channels per work-item: 3, or 8 with 16-float vectors */
#endif
kernel void conv_weight_grad_implicit(global float *dw, ulong dw_off, global float *db,
                                      ulong db_off, uint has_db, const global float *dy,
                                      ulong dy_off, const global float *xp, ulong xp_off,
                                      float beta, uint b0, uint b1, uint C, uint OUT, uint OH,
                                      uint OW, uint Hp, uint Wp)
{
    const uint ob = (uint)get_global_id(0), c = (uint)get_global_id(1),
               kh = (uint)get_global_id(2);
    const uint o0 = ob * CONV_DW_TO;
    if (o0 >= OUT || c >= C || kh >= 3) return;
    const uint nblk = OW / CONV_V, tail = OW - nblk * CONV_V;
    ulong dyo[CONV_DW_TO];
    floatV a[CONV_DW_TO][3];
#pragma unroll
    for (uint i = 0; i < CONV_DW_TO; i++) {
        dyo[i] = (ulong)min(o0 + i, OUT - 1) * OH * OW;
        a[i][0] = a[i][1] = a[i][2] = (floatV)(0.0f);
    }
/* One column block: x at the block's 3 kw offsets by the dy vector of each channel (LOAD_Y, a
 * function of i). */
#define CONV_DW_STEP(XC, LOAD_Y)                                                                  \
    do {                                                                                          \
        const global float *xc = (XC);                                                            \
        const floatV x0 = VLOADV(0, xc), x1 = VLOADV(0, xc + 1), x2 = VLOADV(0, xc + 2);          \
        _Pragma("unroll") for (uint i = 0; i < CONV_DW_TO; i++) {                                 \
            const floatV yv = (LOAD_Y);                                                           \
            a[i][0] = fma(yv, x0, a[i][0]);                                                       \
            a[i][1] = fma(yv, x1, a[i][1]);                                                       \
            a[i][2] = fma(yv, x2, a[i][2]);                                                       \
        }                                                                                         \
    } while (0)
    for (uint b = b0; b < b1; b++) {
        const global float *d = dy + dy_off + (ulong)b * OUT * OH * OW;
        const global float *xr = xp + xp_off + ((ulong)b * C + c) * Hp * Wp + (ulong)kh * Wp;
        if (OW == CONV_V) { /* rows of one vector: a loop of steps alone */
            for (uint oh = 0; oh < OH; oh++, xr += Wp) CONV_DW_STEP(xr, VLOADV(oh, d + dyo[i]));
            continue;
        }
        for (uint oh = 0; oh < OH; oh++, d += OW, xr += Wp) {
            for (uint cb = 0; cb < nblk; cb++)
                CONV_DW_STEP(xr + cb * CONV_V, VLOADV(0, d + dyo[i] + cb * CONV_V));
            if (tail)
                CONV_DW_STEP(xr + nblk * CONV_V, conv_row_tailV(d + dyo[i] + nblk * CONV_V, tail));
        }
    }
#undef CONV_DW_STEP
#pragma unroll
    for (uint i = 0; i < 3 * CONV_DW_TO; i++) {
        const uint o = o0 + i / 3, kw = i % 3;
        if (o >= OUT) continue;
        const float s = conv_hsumV(a[i / 3][kw]);
        const ulong at = dw_off + (((ulong)o * C + c) * 3 + kh) * 3 + kw;
        dw[at] = beta == 0.0f ? s : fma(beta, dw[at], s);
    }
    if (!has_db || c != 0 || kh != 0) return;
    const uint n = OH * OW, nv = n / 8, nt = n - nv * 8;
    for (uint i = 0; i < CONV_DW_TO && o0 + i < OUT; i++) {
        float8 s0 = (float8)(0.0f);
        for (uint b = b0; b < b1; b++) {
            const global float *d0 = dy + dy_off + (ulong)b * OUT * n + dyo[i];
            for (uint j = 0; j < nv; j++) s0 += vload8(j, d0);
            if (nt) s0 += conv_row_tail(d0 + nv * 8, nt);
        }
        const float s = conv_hsum8(s0);
        db[db_off + o0 + i] = beta == 0.0f ? s : fma(beta, db[db_off + o0 + i], s);
    }
}
