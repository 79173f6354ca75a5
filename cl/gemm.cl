/* cltrain's own GEMM on row-major f32: C (M, N) = alpha * op(A) * op(B) + beta * C, with
 * op(A) (M, K) and op(B) (K, N), each operand a (buffer, element offset, leading dimension).
 * Two kernel families, chosen by the host per device and layout (src/ops/gemm.c, src/ops/tune.c):
 *  - direct (GEMM_TILED 0): no local memory. Each work-item computes a GEMM_TM x GEMM_TN block
 *    of C over the whole K loop in registers, with explicit vectors of GEMM_VW floats either
 *    along N (GEMM_VECK 0: outer products, for op(B) rows contiguous: layouts NN and TN) or
 *    along K (GEMM_VECK 1: dot products, for A and B both contiguous in K: layout NT). With
 *    GEMM_KB > 0 (outer products only) each work-item computes GEMM_BM x GEMM_BN such blocks
 *    and first copies GEMM_KB-deep slices of its rows of op(A) and columns of op(B) into
 *    private arrays, which makes the operands' leading dimensions (and layouts) irrelevant.
 *    The CPU (PoCL) kernel: it compiles to a register-blocked AVX/AVX-512 micro-kernel.
 *  - tiled (GEMM_TILED 1): a work-group of GEMM_WGN x GEMM_WGM items stages GEMM_KB-deep
 *    slices of A and B in local memory (vector loads along each layout's contiguous direction,
 *    two slices at a time: the next one is loaded while the current one is multiplied) and
 *    each item computes GEMM_TM x GEMM_TN elements of the group's (GEMM_WGM * GEMM_TM) x
 *    (GEMM_WGN * GEMM_TN) tile in registers. The GPU kernel.
 * Any M, N >= 1 and K >= 1 (edges: loads are clamped or zero-filled, stores masked; K = 0 works
 * too except in the packed form, which then stores nothing: the host runs another choice).
 * beta == 0 never reads C. The summation order depends only on the defines and the shape, so
 * results are deterministic.
 * Mixed precision: GEMM_A_DTYPE, GEMM_B_DTYPE and GEMM_C_DTYPE (common.cl's codes, f32 by
 * default) make each operand f32, f16 or bf16 storage, loaded and stored through CLT_LOAD and
 * CLT_STORE; arithmetic stays f32. Only the packed direct kernel (it converts while packing
 * and keeps its partial sums in a private f32 array rather than in C) and the tiled kernel
 * (it converts while staging) take 16-bit operands; the host picks one of them. With every
 * dtype f32 the code is the same as before.
 * Fused epilogue (GEMM_EPI 1: the tiled kernel and the direct kernel's packed form, any dtypes,
 * and the direct kernel's f32 outer- and dot-product forms): the kernels take the
 * epilogue's buffers after C's (its scalars in GEMM_ARGS' vectors) and apply it as they store,
 * as cl/gemm_panel.cl's store does: the bias per column (GEMM_BIAS, stored as GEMM_BIAS_DTYPE;
 * f32 in the direct kernel with f32 operands), then with act >= 0 (act_fn.cl's codes, a run-time argument) either
 * act(v), keeping v in z first (zmode CLT_EPI_Z_STORE: a linear layer's forward), or
 * v * act'(.) from z's values (zmode CLT_EPI_Z_GRAD: its input gradient through the activation
 * before it). The outer-product forms also sum the rows of op(A) (sums_on, a run-time argument;
 * the work-items of the first column block, k in order): in layout TN, with A = dy, a linear
 * layer's bias gradient beside its weight gradient. */

#ifndef GEMM_TILED
#define GEMM_TILED 0 /* 0: direct kernel, 1: local-memory tiled kernel */
#endif
#ifndef GEMM_TM
#define GEMM_TM 4 /* rows of C per work-item */
#endif
#ifndef GEMM_TN
#define GEMM_TN 16 /* columns of C per work-item (direct, GEMM_VECK 0: a multiple of GEMM_VW) */
#endif
#ifndef GEMM_VW
#define GEMM_VW 4 /* direct: floats per vector, 1, 2, 4, 8 or 16 */
#endif
#ifndef GEMM_VECK
#define GEMM_VECK 0 /* direct: 0 vectors along N, 1 vectors along K */
#endif
#ifndef GEMM_MDIM
#define GEMM_MDIM 0 /* direct: the NDRange dimension (0 or 1) that walks row blocks */
#endif
#ifndef GEMM_WGM
#define GEMM_WGM 8 /* tiled: work-group rows (local dimension 1) */
#endif
#ifndef GEMM_WGN
#define GEMM_WGN 8 /* tiled: work-group columns (local dimension 0) */
#endif
#ifndef GEMM_KB
#define GEMM_KB 16 /* tiled: depth of the K slice staged in local memory; direct: of the K slice
                      packed in private memory (0: none, operands read in place) */
#endif
#ifndef GEMM_BM
#define GEMM_BM 1 /* direct, packed: register blocks per work-item along M */
#endif
#ifndef GEMM_BN
#define GEMM_BN 1 /* direct, packed: register blocks per work-item along N */
#endif
#ifndef GEMM_PAD
#define GEMM_PAD 1 /* tiled: padding of each local row, against bank conflicts */
#endif
#ifndef GEMM_A_DTYPE
#define GEMM_A_DTYPE CLT_F32 /* storage of A, B and C: CLT_F32, CLT_F16 or CLT_BF16 */
#endif
#ifndef GEMM_B_DTYPE
#define GEMM_B_DTYPE CLT_F32
#endif
#ifndef GEMM_C_DTYPE
#define GEMM_C_DTYPE CLT_F32
#endif
#define GEMM_MIXED (GEMM_A_DTYPE != CLT_F32 || GEMM_B_DTYPE != CLT_F32 || GEMM_C_DTYPE != CLT_F32)
#define GEMM_LA(p, i) CLT_LOAD(GEMM_A_DTYPE, p, i)
#define GEMM_LB(p, i) CLT_LOAD(GEMM_B_DTYPE, p, i)
#define GEMM_LC(p, i) CLT_LOAD(GEMM_C_DTYPE, p, i)
#define GEMM_SC(p, i, v) CLT_STORE(GEMM_C_DTYPE, p, i, v)
typedef CLT_TYPE(GEMM_A_DTYPE) gemm_a_t;
typedef CLT_TYPE(GEMM_B_DTYPE) gemm_b_t;
typedef CLT_TYPE(GEMM_C_DTYPE) gemm_c_t;

/* GEMM_TA and GEMM_TB (0 or 1), when defined, keep only that layout's kernel in the program:
 * some drivers (PoCL) compile every kernel of a program when its binary is fetched. */
#if defined(GEMM_TA) && defined(GEMM_TB)
#define GEMM_HAS(ta, tb) (GEMM_TA == (ta) && GEMM_TB == (tb))
#else
#define GEMM_HAS(ta, tb) 1
#endif

#if GEMM_VW != 1 && GEMM_VW != 2 && GEMM_VW != 4 && GEMM_VW != 8 && GEMM_VW != 16
#error "GEMM_VW must be 1, 2, 4, 8 or 16"
#endif
#if !GEMM_TILED && !GEMM_VECK && (GEMM_TN % GEMM_VW) != 0
#error "GEMM_TN must be a multiple of GEMM_VW when vectors run along N"
#endif
#if GEMM_TM < 1 || GEMM_TN < 1 || GEMM_BM < 1 || GEMM_BN < 1
#error "GEMM_TM, GEMM_TN, GEMM_BM and GEMM_BN must be positive"
#endif
#if !GEMM_TILED && GEMM_VECK && GEMM_KB > 0
#error "packing (GEMM_KB > 0) is for vectors along N (GEMM_VECK 0)"
#endif
#if GEMM_MIXED && !GEMM_TILED && (GEMM_VECK || GEMM_KB == 0)
#error "16-bit operands need the packed direct kernel (GEMM_KB > 0) or the tiled kernel"
#endif
#ifndef GEMM_EPI
#define GEMM_EPI 0
#endif
#ifndef GEMM_BIAS
#define GEMM_BIAS 0 /* GEMM_EPI: add bias[n] (storage GEMM_BIAS_DTYPE) to column n */
#endif
#ifndef GEMM_BIAS_DTYPE
#define GEMM_BIAS_DTYPE CLT_F32
#endif
#if GEMM_EPI && !GEMM_TILED && !GEMM_MIXED && GEMM_BIAS_DTYPE != CLT_F32
#error "the direct kernel's epilogue takes a 16-bit bias with 16-bit operands only (packed form)"
#endif

/* The kernels' pointers are `restrict`; the helpers' parameters are not: once a helper with
 * restrict parameters is inlined, clang emits llvm.experimental.noalias.scope.decl, which
 * Oclgrind 21.10 cannot run (every direct GEMM kernel failed to be created there), and the
 * pointers the helpers get are the kernels' own, so nothing is lost (PoCL GFLOP/s unchanged). */
/* The scalars travel in three vectors, the same in every kernel of this file: a launch on PoCL
 * costs about 0.1 us per argument, a vector counting as one (14 ints: 1.5 us; one int16: 0.1).
 *   gd (int16): M, N, K, lda, ldb, ldc, then the epilogue's act, zmode, sums_on
 *   gs (float4): alpha, beta, then the epilogue's slope, sums_beta
 *   go (ulong8): the element offsets of a, b, c, then of the epilogue's bias, z, sums
 * Without GEMM_EPI the epilogue's slots are unused. src/ops/gemm.c's run_own fills them. */
#define GEMM_ARGS                                                                                 \
    const int16 gd, const float4 gs, const ulong8 go, global const gemm_a_t *restrict a,         \
        global const gemm_b_t *restrict b, global gemm_c_t *restrict c
#define GEMM_PASS                                                                                 \
    gd.s0, gd.s1, gd.s2, gs.s0, a + go.s0, gd.s3, b + go.s1, gd.s4, gs.s1, c + go.s2, gd.s5

/* The fused epilogue's buffers (GEMM_EPI), after C's, and what the helpers get of them. */
typedef CLT_TYPE(GEMM_BIAS_DTYPE) gemm_bias_t;
struct gemm_epi {
    global const gemm_bias_t *bias; /* GEMM_BIAS */
    global gemm_c_t *z;             /* laid out as C, and stored as C; zmode 0: unused */
    int act, zmode;
    float slope;
    global float *sums; /* sums_on: sums[m] = sums_beta * sums[m] + sum_k op(A)[m, k] */
    float sums_beta;
    int sums_on;
};
#if GEMM_EPI
#define GEMM_EPI_ARGS                                                                             \
    , global const gemm_bias_t *restrict bias, global gemm_c_t *restrict z,                      \
        global float *restrict sums
#define GEMM_EPI_PASS                                                                             \
    , (struct gemm_epi){bias + go.s3, z + go.s4, gd.s6, gd.s7, gs.s2, sums + go.s5, gs.s3, gd.s8}
#else
#define GEMM_EPI_ARGS
#define GEMM_EPI_PASS , (struct gemm_epi){0, 0, -1, 0, 0.0f, 0, 0.0f, 0}
#endif

/* Element (m, k) of op(A) and (k, n) of op(B) for a layout known at compile time. */
#define GEMM_A(ta, m, k)                                                                          \
    ((ta) ? GEMM_LA(a, (size_t)(k) * lda + (m)) : GEMM_LA(a, (size_t)(m) * lda + (k)))
#define GEMM_B(tb, k, n)                                                                          \
    ((tb) ? GEMM_LB(b, (size_t)(n) * ldb + (k)) : GEMM_LB(b, (size_t)(k) * ldb + (n)))

#if GEMM_EPI
CLT_ACT_DEFINE(float)
/* v, C[m, n]'s complete value, through the epilogue e (C's leading dimension ldc). */
static inline float gemm_epi1(float v, const int m, const int n, const int ldc,
                              const struct gemm_epi *e)
{
#if GEMM_BIAS
    v += CLT_LOAD(GEMM_BIAS_DTYPE, e->bias, n);
#endif
    if (e->act < 0) return v;
    const size_t i = (size_t)m * ldc + n;
    if (e->zmode == CLT_EPI_Z_GRAD)
        return clt_act_bwd_float(e->act, v, GEMM_LC(e->z, i), e->slope);
    if (e->zmode == CLT_EPI_Z_STORE) GEMM_SC(e->z, i, v);
    return clt_act_fwd_float(e->act, v, e->slope);
}
#endif

/* C[m, n] = alpha * v + beta * C[m, n], without reading C when beta == 0 (then through the
 * epilogue e, with GEMM_EPI). */
#if GEMM_EPI
#define GEMM_EPI1(m, n, v) gemm_epi1((v), (m), (n), ldc, &e)
#else
#define GEMM_EPI1(m, n, v) (v)
#endif
#define GEMM_STORE1(m, n, v)                                                                      \
    do {                                                                                          \
        const size_t i_ = (size_t)(m) * ldc + (n);                                               \
        GEMM_SC(c, i_,                                                                            \
                GEMM_EPI1(m, n, beta == 0.0f ? alpha * (v)                                        \
                                             : fma(beta, GEMM_LC(c, i_), alpha * (v))));          \
    } while (0)

#if !GEMM_TILED
/* ---- direct kernel ------------------------------------------------------------------------ */
#if GEMM_VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#define HSUM(v) (v)
#else
#define floatv CLT__XCAT(float, GEMM_VW)
#define VLOAD(p) CLT__XCAT(vload, GEMM_VW)(0, (p))
#define VSTORE(v, p) CLT__XCAT(vstore, GEMM_VW)((v), 0, (p))
#if GEMM_VW == 2
#define HSUM(v) ((v).s0 + (v).s1)
#elif GEMM_VW == 4
#define HSUM(v) (((v).s0 + (v).s2) + ((v).s1 + (v).s3))
#elif GEMM_VW == 8
#define HSUM4_(v) (((v).s0 + (v).s2) + ((v).s1 + (v).s3))
#define HSUM(v) HSUM4_((v).lo + (v).hi)
#else
#define HSUM4_(v) (((v).s0 + (v).s2) + ((v).s1 + (v).s3))
#define HSUM(v) HSUM4_(((v).lo + (v).hi).lo + ((v).lo + (v).hi).hi)
#endif
#endif
#define NV (GEMM_TN / GEMM_VW) /* vectors per row of the block (GEMM_VECK 0) */

#if GEMM_VECK && (GEMM_VW == 16 || GEMM_VW == 8)
/* The dot-product form's sums of GEMM_HTREE vectors at once: HSUM of each x[i] (the same
 * additions in the same order), lane 4 b + j of the result holding x[b + GEMM_HTREE / 4 * j]'s.
 * A tree of pairs, each level adding two shuffles of two vectors: halves, then 128-bit blocks
 * (16 wide), then pairs and single lanes within the blocks, one shuffle instruction each on
 * AVX-512 and AVX2: 45 operations for 16 sums (21 for 8), where reducing each vector alone
 * takes 8 (6), and more to gather the results into a row. */
#define GEMM_HTREE GEMM_VW
#if GEMM_VW == 16
static inline float16 gemm_htree(const float16 x[16])
{
    float16 y[8], z[4], w[2];
#pragma unroll
    for (int p = 0; p < 8; p++) /* halves: x[2p]'s 8 partial sums, then x[2p + 1]'s */
        y[p] = (float16)(x[2 * p].lo, x[2 * p + 1].lo) + (float16)(x[2 * p].hi, x[2 * p + 1].hi);
#pragma unroll
    for (int q = 0; q < 4; q++) { /* blocks: 4 partial sums each of x[4q] .. x[4q + 3] */
        const float16 a = y[2 * q], b = y[2 * q + 1];
        z[q] = (float16)(a.s0123, a.s89ab, b.s0123, b.s89ab) +
               (float16)(a.s4567, a.scdef, b.s4567, b.scdef);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) { /* block b: 2 partial sums of x[8r + b], then of x[8r + 4 + b] */
        const float16 a = z[2 * r], b = z[2 * r + 1];
        w[r] = (float16)(a.s01, b.s01, a.s45, b.s45, a.s89, b.s89, a.scd, b.scd) +
               (float16)(a.s23, b.s23, a.s67, b.s67, a.sab, b.sab, a.sef, b.sef);
    }
    const float16 u = w[0], v = w[1];
    return (float16)(u.s0, u.s2, v.s0, v.s2, u.s4, u.s6, v.s4, v.s6, u.s8, u.sa, v.s8, v.sa, u.sc,
                     u.se, v.sc, v.se) +
           (float16)(u.s1, u.s3, v.s1, v.s3, u.s5, u.s7, v.s5, v.s7, u.s9, u.sb, v.s9, v.sb, u.sd,
                     u.sf, v.sd, v.sf);
}
#else
static inline float8 gemm_htree(const float8 x[8])
{
    float8 y[4], z[2];
#pragma unroll
    for (int p = 0; p < 4; p++) /* halves: x[2p]'s 4 partial sums, then x[2p + 1]'s */
        y[p] = (float8)(x[2 * p].lo, x[2 * p + 1].lo) + (float8)(x[2 * p].hi, x[2 * p + 1].hi);
#pragma unroll
    for (int q = 0; q < 2; q++) { /* block b: 2 partial sums of x[4q + b], then of x[4q + 2 + b] */
        const float8 a = y[2 * q], b = y[2 * q + 1];
        z[q] = (float8)(a.s01, b.s01, a.s45, b.s45) + (float8)(a.s23, b.s23, a.s67, b.s67);
    }
    const float8 u = z[0], v = z[1];
    return (float8)(u.s0, u.s2, v.s0, v.s2, u.s4, u.s6, v.s4, v.s6) +
           (float8)(u.s1, u.s3, v.s1, v.s3, u.s5, u.s7, v.s5, v.s7);
}
#endif
#else
#define GEMM_HTREE 0
#endif

#if GEMM_EPI
/* The same for C[m, n .. n + EPI_W): the outer-product form stores vectors of GEMM_VW, the
 * dot-product form pieces of its rows of 4 or 2 (an activation's code per piece, not per
 * element). */
#if !GEMM_VECK
#define EPI_W GEMM_VW
#elif GEMM_TN % 4 == 0
#define EPI_W 4
#elif GEMM_TN % 2 == 0
#define EPI_W 2
#else
#define EPI_W 1
#endif
#if EPI_W > 1
#define floate CLT__XCAT(float, EPI_W)
#define ELOAD(p) CLT__XCAT(vload, EPI_W)(0, (p))
#define ESTORE(v, p) CLT__XCAT(vstore, EPI_W)((v), 0, (p))
CLT_ACT_DEFINE(floate)
static inline floate gemm_epiv(floate v, const int m, const int n, const int ldc,
                               const struct gemm_epi *e)
{
#if GEMM_BIAS
    v += CLT_VLOAD(GEMM_BIAS_DTYPE, EPI_W, e->bias, n);
#endif
    if (e->act < 0) return v;
    const size_t i = (size_t)m * ldc + n;
    if (e->zmode == CLT_EPI_Z_GRAD)
        return CLT__XCAT(clt_act_bwd_, floate)(e->act, v, CLT_VLOAD(GEMM_C_DTYPE, EPI_W, e->z, i),
                                               e->slope);
    if (e->zmode == CLT_EPI_Z_STORE) CLT_VSTORE(GEMM_C_DTYPE, EPI_W, v, e->z, i);
    return CLT__XCAT(clt_act_fwd_, floate)(e->act, v, e->slope);
}
#else
#define gemm_epiv gemm_epi1
#endif
#endif

/* p[min(start + l, last) * stride] for the GEMM_VW lanes l: a clamped, strided gather. */
static inline floatv gemm_gather(global const float *p, int start, int last, int stride)
{
    float t[GEMM_VW];
#pragma unroll
    for (int l = 0; l < GEMM_VW; l++) t[l] = p[(size_t)min(start + l, last) * stride];
    return VLOAD(t);
}

/* The common start of the direct variants: the work-item's block of C (rows x cols of it)
 * begins at row m0 and column n0, the NDRange dimension GEMM_MDIM walking row blocks. False for
 * a block past C's edge (the NDRange is rounded up to whole work-groups). */
static inline bool gemm_direct_origin(const int M, const int N, const int rows, const int cols,
                                      int *m0, int *n0)
{
    *m0 = (int)get_global_id(GEMM_MDIM) * rows;
    *n0 = (int)get_global_id(1 - GEMM_MDIM) * cols;
    return *m0 < M && *n0 < N;
}

/* The rows of op(A) a GEMM_TM-row block from m0 reads, clamped: edge rows repeat the last one
 * (computed, never stored). */
static inline void gemm_direct_rows(const int m0, const int M, int mrow[GEMM_TM])
{
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++) mrow[i] = min(m0 + i, M - 1);
}

#if !GEMM_VECK && GEMM_KB > 0
#define MB (GEMM_BM * GEMM_TM) /* rows of C per work-item */
#define NB (GEMM_BN * GEMM_TN) /* columns of C per work-item */

/* Outer products over packed operands: for each GEMM_KB-deep slice of K, the work-item copies
 * its MB rows of op(A) and NB columns of op(B) into private arrays (contiguous, so they stay in
 * L1 whatever the leading dimensions, which matters when those are powers of two), then runs
 * the GEMM_TM x GEMM_TN register block over the GEMM_BM x GEMM_BN sub-blocks. Rows and
 * columns past the edge are clamped copies and never stored. C holds the partial sums between
 * slices: the first slice writes alpha * acc + beta * C, the later ones add alpha * acc, and
 * the last one applies the epilogue (GEMM_EPI); with 16-bit operands (GEMM_MIXED) they stay in
 * f32 in private memory and C is stored once, through the epilogue.
 * The rows' sums (sums_on) come from the packed slices of op(A), k in order as in the
 * outer-product form (the same sums, bit for bit). */
static inline void gemm_direct(const int ta, const int tb, const int M, const int N, const int K,
                        const float alpha, global const gemm_a_t *a, const int lda,
                        global const gemm_b_t *b, const int ldb, const float beta,
                        global gemm_c_t *c, const int ldc, const struct gemm_epi e)
{
    (void)e; /* used with GEMM_EPI */
    int m0, n0;
    if (!gemm_direct_origin(M, N, MB, NB, &m0, &n0)) return;
#if GEMM_EPI
    const bool sums = e.sums_on && n0 == 0;
    float rsum[MB];
    for (int mm = 0; mm < MB; mm++) rsum[mm] = 0.0f;
#endif
    float ap[GEMM_KB * MB]; /* ta ? [kk][mm] : [mm][kk] */
    float bp[GEMM_KB * NB]; /* [kk][nn] */
    /* Rows and columns to pack: the valid ones, rounded up to whole register blocks (the
     * extra ones are clamped copies of the last, computed but never stored). */
    const int mrows = min(MB, (M - m0 + GEMM_TM - 1) / GEMM_TM * GEMM_TM);
    const int ncols = min(NB, (N - n0 + GEMM_TN - 1) / GEMM_TN * GEMM_TN);
    const bool mfull = m0 + mrows <= M, nfull = n0 + ncols <= N;
#if GEMM_MIXED
    /* 16-bit C: the partial sums stay in f32 here (not in C) until the end */
    float cacc[MB * NB];
    for (int p = 0; p < MB * NB; p++) cacc[p] = 0.0f;
#endif
    for (int kc = 0; kc < K; kc += GEMM_KB) {
        const int kn = min(GEMM_KB, K - kc);
        if (ta) {
            for (int kk = 0; kk < kn; kk++) {
                global const gemm_a_t *row = a + (size_t)(kc + kk) * lda;
                if (mfull)
                    for (int mm = 0; mm < mrows; mm++) ap[kk * MB + mm] = GEMM_LA(row, m0 + mm);
                else
                    for (int mm = 0; mm < mrows; mm++)
                        ap[kk * MB + mm] = GEMM_LA(row, min(m0 + mm, M - 1));
            }
        } else {
            for (int mm = 0; mm < mrows; mm++) {
                global const gemm_a_t *row = a + (size_t)min(m0 + mm, M - 1) * lda + kc;
                for (int kk = 0; kk < kn; kk++) ap[mm * GEMM_KB + kk] = GEMM_LA(row, kk);
            }
        }
#if GEMM_EPI
        if (sums)
            for (int mm = 0; mm < mrows; mm++)
                for (int kk = 0; kk < kn; kk++)
                    rsum[mm] += ap[ta ? kk * MB + mm : mm * GEMM_KB + kk];
#endif
        if (tb) {
            for (int nn = 0; nn < ncols; nn++) {
                global const gemm_b_t *row = b + (size_t)min(n0 + nn, N - 1) * ldb + kc;
                for (int kk = 0; kk < kn; kk++) bp[kk * NB + nn] = GEMM_LB(row, kk);
            }
        } else {
            for (int kk = 0; kk < kn; kk++) {
                global const gemm_b_t *row = b + (size_t)(kc + kk) * ldb;
                if (nfull)
                    for (int nn = 0; nn < ncols; nn++) bp[kk * NB + nn] = GEMM_LB(row, n0 + nn);
                else
                    for (int nn = 0; nn < ncols; nn++)
                        bp[kk * NB + nn] = GEMM_LB(row, min(n0 + nn, N - 1));
            }
        }
        for (int si = 0; si < GEMM_BM; si++) {
            const int mb = m0 + si * GEMM_TM;
            if (mb >= M) break;
            for (int sj = 0; sj < GEMM_BN; sj++) {
                const int nb = n0 + sj * GEMM_TN;
                if (nb >= N) break;
                floatv acc[GEMM_TM][NV];
#pragma unroll
                for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
                    for (int j = 0; j < NV; j++) acc[i][j] = (floatv)(0.0f);
                /* pointers stepped per k, so that every load has a constant offset */
                const float *bk = bp + sj * GEMM_TN;
                const float *ak = ta ? ap + si * GEMM_TM : ap + si * GEMM_TM * GEMM_KB;
                for (int k = 0; k < kn; k++, bk += NB, ak += ta ? MB : 1) {
                    floatv bv[NV];
#pragma unroll
                    for (int j = 0; j < NV; j++) bv[j] = VLOAD(bk + j * GEMM_VW);
#pragma unroll
                    for (int i = 0; i < GEMM_TM; i++) {
                        const float av = ak[ta ? i : i * GEMM_KB];
#pragma unroll
                        for (int j = 0; j < NV; j++)
                            acc[i][j] = fma((floatv)(av), bv[j], acc[i][j]);
                    }
                }
#if GEMM_MIXED
                float *cp = cacc + si * GEMM_TM * NB + sj * GEMM_TN;
#pragma unroll
                for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
                    for (int j = 0; j < NV; j++)
                        VSTORE(VLOAD(cp + i * NB + j * GEMM_VW) + acc[i][j],
                               cp + i * NB + j * GEMM_VW);
#else
                /* the first slice applies beta (without reading C when it is 0), the later
                 * ones accumulate, the last one through the epilogue */
                const float bet = kc == 0 ? beta : 1.0f;
                const bool epi = GEMM_EPI && kc + GEMM_KB >= K;
                const bool full = mb + GEMM_TM <= M && nb + GEMM_TN <= N;
                if (full && !epi) {
#pragma unroll
                    for (int i = 0; i < GEMM_TM; i++) {
                        global float *crow = c + (size_t)(mb + i) * ldc + nb;
#pragma unroll
                        for (int j = 0; j < NV; j++) {
                            floatv v = alpha * acc[i][j];
                            if (bet != 0.0f)
                                v = fma((floatv)(bet), VLOAD(crow + j * GEMM_VW), v);
                            VSTORE(v, crow + j * GEMM_VW);
                        }
                    }
                } else {
                    float t[GEMM_TM * GEMM_TN];
#pragma unroll
                    for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
                        for (int j = 0; j < NV; j++)
                            VSTORE(acc[i][j], t + i * GEMM_TN + j * GEMM_VW);
#if GEMM_EPI
                    if (full) { /* the last slice: by vectors, in loops kept rolled */
#pragma unroll 1
                        for (int i = 0; i < GEMM_TM; i++) {
                            global float *crow = c + (size_t)(mb + i) * ldc + nb;
#pragma unroll 1
                            for (int j = 0; j < NV; j++) {
                                floatv v = alpha * VLOAD(t + i * GEMM_TN + j * GEMM_VW);
                                if (bet != 0.0f)
                                    v = fma((floatv)(bet), VLOAD(crow + j * GEMM_VW), v);
                                VSTORE(gemm_epiv(v, mb + i, nb + j * GEMM_VW, ldc, &e),
                                       crow + j * GEMM_VW);
                            }
                        }
                        continue;
                    }
#endif
#pragma unroll 1
                    for (int i = 0; i < GEMM_TM && mb + i < M; i++) {
                        global float *crow = c + (size_t)(mb + i) * ldc;
#pragma unroll 1
                        for (int j = 0; j < GEMM_TN && nb + j < N; j++) {
                            float v = alpha * t[i * GEMM_TN + j];
                            v = bet == 0.0f ? v : fma(bet, crow[nb + j], v);
                            crow[nb + j] = epi ? GEMM_EPI1(mb + i, nb + j, v) : v;
                        }
                    }
                }
#endif
            }
        }
    }
#if GEMM_MIXED
    /* C once, through the epilogue: whole vectors as vectors, the edge's by elements (loops
     * kept rolled, as the activation's code is in them) */
#pragma unroll 1
    for (int mm = 0; mm < MB && m0 + mm < M; mm++) {
        const int m = m0 + mm;
#pragma unroll 1
        for (int nn = 0; nn < NB && n0 + nn < N; nn += GEMM_VW) {
            const int n = n0 + nn;
            const float *cp = cacc + mm * NB + nn;
#if GEMM_VW > 1
            if (n + GEMM_VW <= N) {
                const size_t ci = (size_t)m * ldc + n;
                floatv v = alpha * VLOAD(cp);
                if (beta != 0.0f)
                    v = fma((floatv)(beta), CLT_VLOAD(GEMM_C_DTYPE, GEMM_VW, c, ci), v);
#if GEMM_EPI
                v = gemm_epiv(v, m, n, ldc, &e);
#endif
                CLT_VSTORE(GEMM_C_DTYPE, GEMM_VW, v, c, ci);
                continue;
            }
#endif
#pragma unroll 1
            for (int l = 0; l < GEMM_VW && n + l < N; l++) GEMM_STORE1(m, n + l, cp[l]);
        }
    }
#endif
#if GEMM_EPI
    if (sums)
        for (int mm = 0; mm < MB && m0 + mm < M; mm++) {
            global float *s = e.sums + m0 + mm;
            *s = e.sums_beta == 0.0f ? rsum[mm] : e.sums_beta * *s + rsum[mm];
        }
#endif
}

#elif !GEMM_VECK
/* One k step of the outer-product form: acc[i][j] += A[m_i, k] * B[k, cols of vector j].
 * `ncol[j]` is vector j's first column; SMALL: N < GEMM_VW, lanes gathered and clamped. */
#define GEMM_OUTER_STEP(ta, tb, SMALL)                                                            \
    do {                                                                                          \
        floatv bv[NV];                                                                            \
        _Pragma("unroll") for (int j = 0; j < NV; j++) {                                          \
            if (SMALL) bv[j] = (tb) ? gemm_gather(b + k, ncol[j], N - 1, ldb)                     \
                                    : gemm_gather(b + (size_t)k * ldb, ncol[j], N - 1, 1);        \
            else bv[j] = (tb) ? gemm_gather(b + (size_t)ncol[j] * ldb + k, 0, GEMM_VW, ldb)       \
                              : VLOAD(b + (size_t)k * ldb + ncol[j]);                             \
        }                                                                                         \
        _Pragma("unroll") for (int i = 0; i < GEMM_TM; i++) {                                     \
            const float av = (ta) ? a[(size_t)k * lda + mrow[i]] : a[arow[i] + k];                \
            _Pragma("unroll") for (int j = 0; j < NV; j++) acc[i][j] =                            \
                fma((floatv)(av), bv[j], acc[i][j]);                                              \
        }                                                                                         \
    } while (0)

static inline void gemm_direct(const int ta, const int tb, const int M, const int N, const int K,
                        const float alpha, global const float *a, const int lda,
                        global const float *b, const int ldb, const float beta,
                        global float *c, const int ldc, const struct gemm_epi e)
{
    (void)e; /* used with GEMM_EPI */
    int m0, n0;
    if (!gemm_direct_origin(M, N, GEMM_TM, GEMM_TN, &m0, &n0)) return;
    const bool small = N < GEMM_VW;
    int mrow[GEMM_TM], ncol[NV];
    size_t arow[GEMM_TM];
    floatv acc[GEMM_TM][NV];
    gemm_direct_rows(m0, M, mrow);
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++) {
        arow[i] = (size_t)mrow[i] * lda;
#pragma unroll
        for (int j = 0; j < NV; j++) acc[i][j] = (floatv)(0.0f);
    }
    /* Each vector covers GEMM_VW valid columns: at the right edge it shifts left, and the
     * store below skips the lanes that belong to the vector before it. */
#pragma unroll
    for (int j = 0; j < NV; j++)
        ncol[j] = small ? n0 + j * GEMM_VW : min(n0 + j * GEMM_VW, N - GEMM_VW);
    if (small) {
        for (int k = 0; k < K; k++) GEMM_OUTER_STEP(ta, tb, 1);
    } else {
        for (int k = 0; k < K; k++) GEMM_OUTER_STEP(ta, tb, 0);
    }
#if GEMM_EPI
    /* The rows' sums: a pass of their own over the same rows, from m0 (mrow[] kept live past
     * the loop above made it 30 % slower on PoCL, for every work-item; the sums in that loop
     * too, 5x for theirs). */
    if (e.sums_on && n0 == 0) {
        float rsum[GEMM_TM];
#pragma unroll
        for (int i = 0; i < GEMM_TM; i++) rsum[i] = 0.0f;
        const int rows = min(GEMM_TM, M - m0);
        if (rows == GEMM_TM) {
            for (int k = 0; k < K; k++)
#pragma unroll
                for (int i = 0; i < GEMM_TM; i++) rsum[i] += GEMM_A(ta, m0 + i, k);
        } else {
            for (int k = 0; k < K; k++)
#pragma unroll 1
                for (int i = 0; i < rows; i++) rsum[i] += GEMM_A(ta, m0 + i, k);
        }
#pragma unroll 1
        for (int i = 0; i < rows; i++) {
            global float *s = e.sums + m0 + i;
            *s = e.sums_beta == 0.0f ? rsum[i] : e.sums_beta * *s + rsum[i];
        }
    }
#endif
    const bool full = m0 + GEMM_TM <= M && n0 + GEMM_TN <= N;
    if (full && (!GEMM_EPI || e.act < 0)) { /* the bias at most: the store unrolled */
#pragma unroll
        for (int i = 0; i < GEMM_TM; i++) {
            global float *crow = c + (size_t)(m0 + i) * ldc;
#pragma unroll
            for (int j = 0; j < NV; j++) {
                floatv v = alpha * acc[i][j];
                if (beta != 0.0f) v = fma((floatv)(beta), VLOAD(crow + ncol[j]), v);
#if GEMM_BIAS
                v += VLOAD(e.bias + ncol[j]);
#endif
                VSTORE(v, crow + ncol[j]);
            }
        }
        return;
    }
    /* Otherwise through private memory, in loops kept rolled: the edge runs once per work-item
     * at most, and an activation's code unrolled (exp and tanh in every vector) outgrows what
     * GPU compilers unroll, as in gemm_panel.cl's store. */
    float t[GEMM_TM * GEMM_TN];
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
        for (int j = 0; j < NV; j++) VSTORE(acc[i][j], t + i * GEMM_TN + j * GEMM_VW);
#if GEMM_EPI
    if (full) { /* an activation: by vectors */
#pragma unroll 1
        for (int i = 0; i < GEMM_TM; i++) {
            global float *crow = c + (size_t)(m0 + i) * ldc;
#pragma unroll 1
            for (int j = 0; j < NV; j++) {
                floatv v = alpha * VLOAD(t + i * GEMM_TN + j * GEMM_VW);
                if (beta != 0.0f) v = fma((floatv)(beta), VLOAD(crow + ncol[j]), v);
                VSTORE(gemm_epiv(v, m0 + i, ncol[j], ldc, &e), crow + ncol[j]);
            }
        }
        return;
    }
#endif
    /* the edge: element by element */
#pragma unroll 1
    for (int i = 0; i < GEMM_TM && m0 + i < M; i++) {
#pragma unroll 1
        for (int j = 0; j < NV; j++) {
            const int first = n0 + j * GEMM_VW;
            const int start = small ? first : min(first, N - GEMM_VW);
#pragma unroll 1
            for (int l = 0; l < GEMM_VW; l++) {
                const int n = start + l;
                if (n >= first && n < N) GEMM_STORE1(m0 + i, n, t[i * GEMM_TN + j * GEMM_VW + l]);
            }
        }
    }
}

#else /* GEMM_VECK */
static inline void gemm_direct(const int ta, const int tb, const int M, const int N, const int K,
                        const float alpha, global const float *a, const int lda,
                        global const float *b, const int ldb, const float beta,
                        global float *c, const int ldc, const struct gemm_epi e)
{
    (void)e; /* used with GEMM_EPI */
    int m0, n0;
    if (!gemm_direct_origin(M, N, GEMM_TM, GEMM_TN, &m0, &n0)) return;
    int mrow[GEMM_TM], ncol[GEMM_TN];
    floatv acc[GEMM_TM][GEMM_TN];
    gemm_direct_rows(m0, M, mrow);
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = (floatv)(0.0f);
#pragma unroll
    for (int j = 0; j < GEMM_TN; j++) ncol[j] = min(n0 + j, N - 1);
    const int kv = K - K % GEMM_VW;
    /* a whole tile, the bias at most */
    bool full = m0 + GEMM_TM <= M && n0 + GEMM_TN <= N;
#if GEMM_EPI
    full = full && e.act < 0;
#endif
    for (int k = 0; k < kv; k += GEMM_VW) {
        floatv av[GEMM_TM], bv[GEMM_TN];
#pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
            av[i] = ta ? gemm_gather(a + (size_t)k * lda + mrow[i], 0, GEMM_VW, lda)
                       : VLOAD(a + (size_t)mrow[i] * lda + k);
#pragma unroll
        for (int j = 0; j < GEMM_TN; j++)
            bv[j] = tb ? VLOAD(b + (size_t)ncol[j] * ldb + k)
                       : gemm_gather(b + (size_t)k * ldb + ncol[j], 0, GEMM_VW, ldb);
#pragma unroll
        for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
            for (int j = 0; j < GEMM_TN; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    float t[GEMM_TM * GEMM_TN]; /* the sums */
#if GEMM_HTREE /* the first whole groups of GEMM_HTREE sums by trees, any others alone */
    const int ntree = GEMM_TM * GEMM_TN / GEMM_HTREE * GEMM_HTREE;
#pragma unroll
    for (int g = 0; g < ntree; g += GEMM_HTREE) {
        floatv x[GEMM_HTREE]; /* lane 4 b + j of the tree's result is x[b + GEMM_HTREE / 4 * j] */
#pragma unroll
        for (int f = 0; f < GEMM_HTREE; f++)
            x[f / 4 + GEMM_HTREE / 4 * (f % 4)] = acc[(g + f) / GEMM_TN][(g + f) % GEMM_TN];
        VSTORE(gemm_htree(x), t + g);
    }
#else
    const int ntree = 0;
#endif
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++) {
#pragma unroll
        for (int j = 0; j < GEMM_TN; j++)
            if (i * GEMM_TN + j >= ntree) t[i * GEMM_TN + j] = HSUM(acc[i][j]);
        for (int k = kv; k < K; k++) {
            const float av = GEMM_A(ta, mrow[i], k);
#pragma unroll
            for (int j = 0; j < GEMM_TN; j++)
                t[i * GEMM_TN + j] = fma(av, GEMM_B(tb, k, ncol[j]), t[i * GEMM_TN + j]);
        }
    }
    if (full) { /* straight-line: the compiler stores each row as a vector */
#pragma unroll
        for (int i = 0; i < GEMM_TM; i++) {
            global float *crow = c + (size_t)(m0 + i) * ldc + n0;
#pragma unroll
            for (int j = 0; j < GEMM_TN; j++) {
                float v = alpha * t[i * GEMM_TN + j];
                if (beta != 0.0f) v = fma(beta, crow[j], v);
#if GEMM_BIAS
                v += e.bias[n0 + j];
#endif
                crow[j] = v;
            }
        }
        return;
    }
    /* Otherwise (an activation, the edge) in loops kept rolled: the activation's code once, not
     * in every element of an unrolled tile. */
#if GEMM_EPI && EPI_W > 1
    if (m0 + GEMM_TM <= M && n0 + GEMM_TN <= N) { /* a whole tile: by pieces of rows */
#pragma unroll 1
        for (int i = 0; i < GEMM_TM; i++) {
            global float *crow = c + (size_t)(m0 + i) * ldc + n0;
#pragma unroll 1
            for (int q = 0; q < GEMM_TN; q += EPI_W) {
                floate v = alpha * ELOAD(t + i * GEMM_TN + q);
                if (beta != 0.0f) v = fma((floate)(beta), ELOAD(crow + q), v);
                ESTORE(gemm_epiv(v, m0 + i, n0 + q, ldc, &e), crow + q);
            }
        }
        return;
    }
#endif
#pragma unroll 1
    for (int i = 0; i < GEMM_TM && m0 + i < M; i++)
#pragma unroll 1
        for (int j = 0; j < GEMM_TN && n0 + j < N; j++)
            GEMM_STORE1(m0 + i, n0 + j, t[i * GEMM_TN + j]);
}
#endif /* GEMM_VECK */

/* Launched over (ceil(M / GEMM_TM), ceil(N / GEMM_TN)) work-items (dimensions swapped when
 * GEMM_MDIM is 1), rounded up to any work-group size. */
#if GEMM_HAS(0, 0)
kernel void gemm_direct_nn(GEMM_ARGS GEMM_EPI_ARGS)
{
    gemm_direct(0, 0, GEMM_PASS GEMM_EPI_PASS);
}
#endif
#if GEMM_HAS(0, 1)
kernel void gemm_direct_nt(GEMM_ARGS GEMM_EPI_ARGS)
{
    gemm_direct(0, 1, GEMM_PASS GEMM_EPI_PASS);
}
#endif
#if GEMM_HAS(1, 0)
kernel void gemm_direct_tn(GEMM_ARGS GEMM_EPI_ARGS)
{
    gemm_direct(1, 0, GEMM_PASS GEMM_EPI_PASS);
}
#endif
#if GEMM_HAS(1, 1)
kernel void gemm_direct_tt(GEMM_ARGS GEMM_EPI_ARGS)
{
    gemm_direct(1, 1, GEMM_PASS GEMM_EPI_PASS);
}
#endif

#else
/* ---- tiled kernel ------------------------------------------------------------------------- */
#define MT (GEMM_WGM * GEMM_TM) /* rows of the work-group's tile */
#define NT (GEMM_WGN * GEMM_TN) /* columns of the work-group's tile */
#define WG (GEMM_WGM * GEMM_WGN)
#define AS (GEMM_KB * (MT + GEMM_PAD)) /* floats of one A slice in local memory */
#define BS (GEMM_KB * (NT + GEMM_PAD))

/* Elements per staging load: 4 consecutive ones of global memory where the tile and slice
 * sizes allow it, else 1. */
#if GEMM_KB % 4 == 0 && MT % 4 == 0 && NT % 4 == 0
#define GEMM_Q 4
#else
#define GEMM_Q 1
#endif

/* Stages the K slice from k0 of the group's rows of op(A) and columns of op(B) into as and bs
 * (as[kk * (MT + PAD) + mm] = op(A)[mt0 + mm, k0 + kk], zero past the edges; bs likewise),
 * each item taking GEMM_Q consecutive elements of global memory at a time along the layout's
 * contiguous direction (rows of A along K, of A^T along M, ...; one vector load inside the
 * matrices, element by element at their edges), consecutive items consecutive runs for
 * coalescing. */
static inline void gemm_stage(const int ta, const int tb, const int M, const int N, const int K,
                              global const gemm_a_t *a, const int lda, global const gemm_b_t *b,
                              const int ldb, const int mt0, const int nt0, const int k0,
                              const int tid, local float *as, local float *bs)
{
    const int aq = ta ? MT / GEMM_Q : GEMM_KB / GEMM_Q; /* runs per line of memory order */
    for (int p = tid; p < MT * GEMM_KB / GEMM_Q; p += WG) {
        const int line = p / aq, q = (p - line * aq) * GEMM_Q; /* line: mm (ta 0), kk (ta 1) */
        const int mm = ta ? q : line, kk = ta ? line : q, m = mt0 + mm, k = k0 + kk;
        float v[GEMM_Q];
#if GEMM_Q == 4
        if (!ta && m < M && k + 3 < K)
            vstore4(CLT_VLOAD(GEMM_A_DTYPE, 4, a, (size_t)m * lda + k), 0, v);
        else if (ta && k < K && m + 3 < M)
            vstore4(CLT_VLOAD(GEMM_A_DTYPE, 4, a, (size_t)k * lda + m), 0, v);
        else
#endif
            for (int e = 0; e < GEMM_Q; e++) {
                const int me = ta ? m + e : m, ke = ta ? k : k + e;
                v[e] = me < M && ke < K ? GEMM_A(ta, me, ke) : 0.0f;
            }
        local float *d = as + kk * (MT + GEMM_PAD) + mm;
        for (int e = 0; e < GEMM_Q; e++) d[ta ? e : e * (MT + GEMM_PAD)] = v[e];
    }
    const int bq = tb ? GEMM_KB / GEMM_Q : NT / GEMM_Q;
    for (int p = tid; p < NT * GEMM_KB / GEMM_Q; p += WG) {
        const int line = p / bq, q = (p - line * bq) * GEMM_Q; /* line: kk (tb 0), nn (tb 1) */
        const int nn = tb ? line : q, kk = tb ? q : line, n = nt0 + nn, k = k0 + kk;
        float v[GEMM_Q];
#if GEMM_Q == 4
        if (!tb && k < K && n + 3 < N)
            vstore4(CLT_VLOAD(GEMM_B_DTYPE, 4, b, (size_t)k * ldb + n), 0, v);
        else if (tb && n < N && k + 3 < K)
            vstore4(CLT_VLOAD(GEMM_B_DTYPE, 4, b, (size_t)n * ldb + k), 0, v);
        else
#endif
            for (int e = 0; e < GEMM_Q; e++) {
                const int ne = tb ? n : n + e, ke = tb ? k + e : k;
                v[e] = ne < N && ke < K ? GEMM_B(tb, ke, ne) : 0.0f;
            }
        local float *d = bs + kk * (NT + GEMM_PAD) + nn;
        for (int e = 0; e < GEMM_Q; e++) d[tb ? e * (NT + GEMM_PAD) : e] = v[e];
    }
}

/* Double-buffered: while the items multiply the slice in one half of as/bs, they stage the next
 * slice into the other half, so that one barrier per slice separates the two (the global loads
 * of slice t + 1 are in flight during slice t's multiply-adds). */
static inline void gemm_tiled(const int ta, const int tb, const int M, const int N, const int K,
                       const float alpha, global const gemm_a_t *a, const int lda,
                       global const gemm_b_t *b, const int ldb, const float beta,
                       global gemm_c_t *c, const int ldc, const struct gemm_epi e,
                       local float *as, local float *bs)
{
    (void)e; /* used with GEMM_EPI */
    const int ln = (int)get_local_id(0), lm = (int)get_local_id(1), tid = lm * GEMM_WGN + ln;
    const int mt0 = (int)get_group_id(1) * MT, nt0 = (int)get_group_id(0) * NT;
    float acc[GEMM_TM][GEMM_TN];
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
        for (int j = 0; j < GEMM_TN; j++) acc[i][j] = 0.0f;

    const int nslices = (K + GEMM_KB - 1) / GEMM_KB;
    if (nslices > 0) gemm_stage(ta, tb, M, N, K, a, lda, b, ldb, mt0, nt0, 0, tid, as, bs);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < nslices; t++) {
        local const float *ac = as + (t & 1) * AS, *bc = bs + (t & 1) * BS;
        if (t + 1 < nslices)
            gemm_stage(ta, tb, M, N, K, a, lda, b, ldb, mt0, nt0, (t + 1) * GEMM_KB, tid,
                       as + ((t + 1) & 1) * AS, bs + ((t + 1) & 1) * BS);
#pragma unroll 4
        for (int kk = 0; kk < GEMM_KB; kk++) {
            float av[GEMM_TM], bv[GEMM_TN];
#pragma unroll
            for (int i = 0; i < GEMM_TM; i++) av[i] = ac[kk * (MT + GEMM_PAD) + lm + i * GEMM_WGM];
#pragma unroll
            for (int j = 0; j < GEMM_TN; j++) bv[j] = bc[kk * (NT + GEMM_PAD) + ln + j * GEMM_WGN];
#pragma unroll
            for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
                for (int j = 0; j < GEMM_TN; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* Item (ln, lm) holds rows lm + i * WGM and columns ln + j * WGN of the tile. */
#if GEMM_EPI
    /* The epilogue through private memory in loops kept rolled: its activation's code once,
     * not in every element of an unrolled tile (more than GPU compilers unroll). */
    float t[GEMM_TM * GEMM_TN];
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++)
#pragma unroll
        for (int j = 0; j < GEMM_TN; j++) t[i * GEMM_TN + j] = acc[i][j];
#pragma unroll 1
    for (int i = 0; i < GEMM_TM; i++) {
        const int m = mt0 + lm + i * GEMM_WGM;
#pragma unroll 1
        for (int j = 0; j < GEMM_TN && m < M; j++) {
            const int n = nt0 + ln + j * GEMM_WGN;
            if (n < N) GEMM_STORE1(m, n, t[i * GEMM_TN + j]);
        }
    }
    return;
#endif
#pragma unroll
    for (int i = 0; i < GEMM_TM; i++) {
        const int m = mt0 + lm + i * GEMM_WGM;
        if (m < M) {
#pragma unroll
            for (int j = 0; j < GEMM_TN; j++) {
                const int n = nt0 + ln + j * GEMM_WGN;
                if (n < N) GEMM_STORE1(m, n, acc[i][j]);
            }
        }
    }
}

/* Launched over (ceil(N / NT) * GEMM_WGN, ceil(M / MT) * GEMM_WGM) items in work-groups of
 * exactly (GEMM_WGN, GEMM_WGM). */
#define GEMM_TILED_KERNEL(name, ta, tb)                                                           \
    kernel __attribute__((reqd_work_group_size(GEMM_WGN, GEMM_WGM, 1))) void name(              \
        GEMM_ARGS GEMM_EPI_ARGS)                                                                  \
    {                                                                                             \
        local float as[2 * AS], bs[2 * BS]; /* two slices each: double buffering */               \
        gemm_tiled(ta, tb, GEMM_PASS GEMM_EPI_PASS, as, bs);                                      \
    }
#if GEMM_HAS(0, 0)
GEMM_TILED_KERNEL(gemm_tiled_nn, 0, 0)
#endif
#if GEMM_HAS(0, 1)
GEMM_TILED_KERNEL(gemm_tiled_nt, 0, 1)
#endif
#if GEMM_HAS(1, 0)
GEMM_TILED_KERNEL(gemm_tiled_tn, 1, 0)
#endif
#if GEMM_HAS(1, 1)
GEMM_TILED_KERNEL(gemm_tiled_tt, 1, 1)
#endif
#endif
