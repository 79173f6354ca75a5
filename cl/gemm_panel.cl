/* The panel GEMM, cltrain's CPU family (src/ops/gemm.c drives it): C = alpha * op(A) op(B) +
 * beta * C as BLAS libraries do it on CPUs. Two pack kernels copy op(A) and op(B), whatever
 * their layout and storage dtype, into f32 panels in a workspace laid out for the micro-kernel:
 *     ap[p][k][r] = op(A)[m0 + p * PANEL_MR + r, k0 + k]   (panels of PANEL_MR rows)
 *     bp[q][k][j] = op(B)[k0 + k, n0 + q * PANEL_NR + j]   (panels of PANEL_NR columns)
 * zero past the matrices' edges; then `gemm_panel` gives each work-item a block of
 * GEMM_BM x GEMM_BN micro-tiles of PANEL_MR x PANEL_NR and runs the register-blocked micro-
 * kernel over them: per k, GEMM_VW-float vectors of one B panel row and broadcasts of one A
 * panel column, every load contiguous and free of edge tests, whatever M, N, K, the leading
 * dimensions (power-of-two strides no longer thrash the caches) and the layout. The K range is
 * cut into GEMM_KB-deep blocks (cache blocking: one B micro-panel of GEMM_KB x PANEL_NR stays
 * in L1 while the work-item's A micro-panels stream past it from L2), and C holds the partial
 * sums between blocks: the first block of the first chunk applies beta, the later ones add.
 * With a 16-bit C the host makes the whole K range one block (no partial sums rounded to 16
 * bits). The last block of the last chunk runs the epilogue of a linear layer's forward as it
 * stores the complete sums: with GEMM_BIAS it adds a bias per column, and with act >= 0 (an
 * activation code of act_fn.cl, a run-time argument: the store is outside the K loop) it also
 * stores the pre-activation in z (zmode CLT_EPI_Z_STORE) and then act(sum) in C; or, in the
 * backward through an activation (zmode CLT_EPI_Z_GRAD), it stores sum * act'(.) in C, the
 * derivative from the tensor the activation saved, read from z. Edges: rows and columns past
 * C's edge are zero in the panels, computed and never stored. The summation order depends only
 * on the defines and the host's K chunks, so results are deterministic. */

#ifndef PANEL_MR
#define PANEL_MR 8 /* rows of a micro-tile (GEMM_TM of the choice) */
#endif
#ifndef PANEL_NR
#define PANEL_NR 32 /* columns of a micro-tile (GEMM_TN), a multiple of GEMM_VW */
#endif
#ifndef GEMM_VW
#define GEMM_VW 16 /* floats per vector: 4, 8 or 16 */
#endif
#ifndef GEMM_KB
#define GEMM_KB 256 /* depth of a cache block of K */
#endif
#ifndef GEMM_BM
#define GEMM_BM 4 /* micro-tiles per work-item along M */
#endif
#ifndef GEMM_BN
#define GEMM_BN 2 /* micro-tiles per work-item along N */
#endif
#ifndef PANEL_IA
#define PANEL_IA 0 /* 1: op(A) read in place by the micro-kernel (only op(B) packed) */
#endif
#ifndef GEMM_TA
#define GEMM_TA 0 /* op(A) = A^T */
#endif
#ifndef GEMM_TB
#define GEMM_TB 0 /* op(B) = B^T */
#endif
#ifndef GEMM_A_DTYPE
#define GEMM_A_DTYPE CLT_F32
#endif
#ifndef GEMM_B_DTYPE
#define GEMM_B_DTYPE CLT_F32
#endif
#ifndef GEMM_C_DTYPE
#define GEMM_C_DTYPE CLT_F32
#endif
#ifndef GEMM_BIAS
#define GEMM_BIAS 0 /* epilogue: 1 adds bias[n] (storage GEMM_BIAS_DTYPE) to column n of C once
                       its sums are complete (a linear layer's forward) */
#endif
#ifndef GEMM_BIAS_DTYPE
#define GEMM_BIAS_DTYPE CLT_F32
#endif
#if GEMM_VW != 4 && GEMM_VW != 8 && GEMM_VW != 16
#error "GEMM_VW must be 4, 8 or 16"
#endif
#if PANEL_NR % GEMM_VW != 0
#error "PANEL_NR must be a multiple of GEMM_VW"
#endif
typedef CLT_TYPE(GEMM_A_DTYPE) gemm_a_t;
typedef CLT_TYPE(GEMM_B_DTYPE) gemm_b_t;
typedef CLT_TYPE(GEMM_C_DTYPE) gemm_c_t;
#define floatv CLT__XCAT(float, GEMM_VW)
CLT_ACT_DEFINE(float)
CLT_ACT_DEFINE(floatv)
#define ACT_FWDV CLT__XCAT(clt_act_fwd_, floatv)
#define ACT_BWDV CLT__XCAT(clt_act_bwd_, floatv)
#define VLOADF(p) CLT__XCAT(vload, GEMM_VW)(0, (p))
#define NV (PANEL_NR / GEMM_VW)

/* The pack kernels: a work-item per PACK_KT consecutive k of one panel, launched over
 * (ceil(kc / PACK_KT), panels), but (panels, ceil(kc / PACK_KT)) for op(A) = A^T; it writes the
 * panel's rows k .. k + kn (kn = PACK_KT but at the end of the chunk), one contiguous run of kn
 * * width floats. (A^T's panels are 6-12 floats of each of A's rows: items one after another
 * along M share the rows' cache lines, along K they left 40-60 of each 64 bytes for another
 * item later, TN 1024x784x512's pack 173 -> 144 us on PoCL.) Where the source holds a panel
 * row side by side (op(A) = A^T, op(B) = B), each k is a contiguous copy; where it holds the
 * panel's k side by side (op(A) = A, op(B) = B^T: the panel is the source transposed), each of
 * the panel's rows or columns is read PACK_KT at a time in one vector and the block is
 * transposed in private memory before the contiguous store. One item per (k, panel) read or
 * wrote across items with a stride (gathers and scatters once PoCL vectorised over k): MLP-M's
 * packs took 10 % of a step on PoCL. */
#ifndef PACK_KT
#define PACK_KT 16 /* the host's CLT__PANEL_PACK_KT, which launches the packs */
#endif
#if PACK_KT != 16
#error "PACK_KT must be 16: the transposing packs move 8 x 16 tiles"
#endif

/* dst[kk * W + j] = src[(o + j) * ld + kk] for kk < kn, j < W, 0 where o + j >= olim: W rows of
 * the source (PACK_KT values each, side by side) into kn panel rows of W, in 8 x 16 tiles: 8
 * rows read as vectors of 16, transposed in private memory, stored as 16 vectors of 8 (as
 * cl/conv.cl's permutes; storing lane by lane took 1.6x as long on PoCL); partial tiles element
 * by element. */
#define PANEL_PACK_T(DT, W, src, ld, o, olim, kn, dst)                                            \
    do {                                                                                          \
        _Pragma("unroll 1") for (int j = 0; j < (W); j += 8) {                                    \
            if (j + 8 <= (W) && (o) + j + 8 <= (olim) && (kn) == PACK_KT) {                       \
                float t[8 * PACK_KT];                                                             \
                _Pragma("unroll") for (int r = 0; r < 8; r++) vstore16(                           \
                    CLT_VLOAD(DT, 16, (src) + (size_t)((o) + j + r) * (ld), 0), 0, t + r * 16);   \
                _Pragma("unroll") for (int kk = 0; kk < PACK_KT; kk++) vstore8(                   \
                    (float8)(t[kk], t[16 + kk], t[32 + kk], t[48 + kk], t[64 + kk], t[80 + kk],   \
                             t[96 + kk], t[112 + kk]),                                            \
                    0, (dst) + kk * (W) + j);                                                     \
                continue;                                                                         \
            }                                                                                     \
            _Pragma("unroll 1") for (int r = j; r < j + 8 && r < (W); r++) {                      \
                global const CLT_TYPE(DT) *row = (src) + (size_t)((o) + r) * (ld);                \
                _Pragma("unroll 1") for (int kk = 0; kk < (kn); kk++)                             \
                    (dst)[kk * (W) + r] = (o) + r < (olim) ? CLT_LOAD(DT, row, kk) : 0.0f;        \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* ap[p][k][r] = op(A)[m0 + p * PANEL_MR + r, k0 + k] for the item's k, 0 past mlim. */
kernel void gemm_pack_a(global const gemm_a_t *restrict a, const ulong a_off, const int lda,
                        const int m0, const int mlim, const int k0, const int kc,
                        global float *restrict ap, const ulong ap_off)
{
    const int kt = (int)get_global_id(GEMM_TA ? 1 : 0) * PACK_KT,
              p = (int)get_global_id(GEMM_TA ? 0 : 1);
    if (kt >= kc) return;
    const int mb = m0 + p * PANEL_MR, kn = min(PACK_KT, kc - kt);
    global float *dst = ap + ap_off + ((size_t)p * kc + kt) * PANEL_MR;
    a += a_off;
#if GEMM_TA
    global const gemm_a_t *src = a + (size_t)(k0 + kt) * lda + mb; /* A's row k: op(A)'s column */
    if (mb + PANEL_MR <= mlim) {
        for (int kk = 0; kk < kn; kk++, src += lda, dst += PANEL_MR)
#pragma unroll
            for (int r = 0; r < PANEL_MR; r++) dst[r] = CLT_LOAD(GEMM_A_DTYPE, src, r);
    } else {
        for (int kk = 0; kk < kn; kk++, src += lda, dst += PANEL_MR)
            for (int r = 0; r < PANEL_MR; r++)
                dst[r] = mb + r < mlim ? CLT_LOAD(GEMM_A_DTYPE, src, r) : 0.0f;
    }
#else
    PANEL_PACK_T(GEMM_A_DTYPE, PANEL_MR, a + k0 + kt, lda, mb, mlim, kn, dst);
#endif
}

/* bp[q][k][j] = op(B)[k0 + k, n0 + q * PANEL_NR + j] for the item's k, 0 past nlim. */
kernel void gemm_pack_b(global const gemm_b_t *restrict b, const ulong b_off, const int ldb,
                        const int n0, const int nlim, const int k0, const int kc,
                        global float *restrict bp, const ulong bp_off)
{
    const int kt = (int)get_global_id(0) * PACK_KT, q = (int)get_global_id(1);
    if (kt >= kc) return;
    const int nb = n0 + q * PANEL_NR, kn = min(PACK_KT, kc - kt);
    global float *dst = bp + bp_off + ((size_t)q * kc + kt) * PANEL_NR;
    b += b_off;
#if GEMM_TB
    PANEL_PACK_T(GEMM_B_DTYPE, PANEL_NR, b + k0 + kt, ldb, nb, nlim, kn, dst);
#else
    global const gemm_b_t *src = b + (size_t)(k0 + kt) * ldb + nb; /* row k of op(B) */
    if (nb + PANEL_NR <= nlim) {
        for (int kk = 0; kk < kn; kk++, src += ldb, dst += PANEL_NR)
#pragma unroll
            for (int j = 0; j < PANEL_NR; j += GEMM_VW)
                CLT__XCAT(vstore, GEMM_VW)(CLT_VLOAD(GEMM_B_DTYPE, GEMM_VW, src, j), 0, dst + j);
    } else {
        for (int kk = 0; kk < kn; kk++, src += ldb, dst += PANEL_NR)
            for (int j = 0; j < PANEL_NR; j++)
                dst[j] = nb + j < nlim ? CLT_LOAD(GEMM_B_DTYPE, src, j) : 0.0f;
    }
#endif
}

/* What the store does once the sums are complete (epi): the bias, the activation (act >= 0,
 * with leakyrelu's slope) forward or backward, and z (zmode: 0 or act_fn.cl's CLT_EPI_Z_*). */
struct panel_epi {
    global const CLT_TYPE(GEMM_BIAS_DTYPE) *bias;
    global gemm_c_t *z;
    int act, zmode;
    float slope;
};

/* alpha * v + bet * C[m, n .. n + GEMM_VW), plus the bias when epi (the sums are complete);
 * crow is row m of C. */
static inline floatv panel_value(global gemm_c_t *crow, const int n, const floatv v,
                                 const float alpha, const float bet, const bool epi,
                                 const struct panel_epi *e)
{
    floatv r = alpha * v;
    if (bet != 0.0f) r = fma((floatv)(bet), CLT_VLOAD(GEMM_C_DTYPE, GEMM_VW, crow, n), r);
#if GEMM_BIAS
    if (epi) r += CLT_VLOAD(GEMM_BIAS_DTYPE, GEMM_VW, e->bias, n);
#endif
    return r;
}

/* The complete sums r of a whole vector through the activation: z first when it keeps the
 * pre-activation; the gradient r * act'(.) from z's values in the backward. */
static inline void panel_store_act(global gemm_c_t *crow, global gemm_c_t *zrow, const int n,
                                   const floatv r, const struct panel_epi *e)
{
    if (e->zmode == CLT_EPI_Z_GRAD) {
        const floatv s = CLT_VLOAD(GEMM_C_DTYPE, GEMM_VW, zrow, n);
        CLT_VSTORE(GEMM_C_DTYPE, GEMM_VW, ACT_BWDV(e->act, r, s, e->slope), crow, n);
        return;
    }
    if (e->zmode == CLT_EPI_Z_STORE) CLT_VSTORE(GEMM_C_DTYPE, GEMM_VW, r, zrow, n);
    CLT_VSTORE(GEMM_C_DTYPE, GEMM_VW, ACT_FWDV(e->act, r, e->slope), crow, n);
}

/* Launched over (ceil(nq / GEMM_BN), ceil(np / GEMM_BM)) items, or (ceil(np / GEMM_BM),
 * ceil(nq / GEMM_BN)) when mfirst: item (j, i) computes rows [m0 + i * GEMM_BM * PANEL_MR, ...)
 * and columns [n0 + j * GEMM_BN * PANEL_NR, ...) of C below (mlim, nlim), from kc-deep panels
 * in ws (np of A from ap_off, nq of B from bp_off). Devices run items in the order of their
 * linear ids, dimension 0 fastest: mfirst makes consecutive items share B's panels (each
 * reads op(A)'s rows anew), else op(A)'s rows (each reads B's panels anew).
 * first: this is the first K chunk (beta applies; later chunks add); last: the last one (the
 * epilogue applies). z (ldc like C) is any buffer when zmode is 0, bias any when !GEMM_BIAS. */
kernel void gemm_panel(const int mlim, const int nlim, const int kc, const float alpha,
                       global const float *restrict ws, const ulong ap_off, const ulong bp_off,
                       const float beta, global gemm_c_t *restrict c, const ulong c_off,
                       const int ldc, const int m0, const int n0, const int np, const int nq,
                       const int mfirst, const int first, const int last,
                       global const CLT_TYPE(GEMM_BIAS_DTYPE) *restrict bias, const ulong bias_off,
                       global const gemm_a_t *restrict a, const ulong a_off, const int lda,
                       const int k0, const int act, const float slope,
                       global gemm_c_t *restrict z, const ulong z_off, const int zmode)
{
    const struct panel_epi e = {bias + bias_off, z + z_off, act, zmode, slope};
    global const float *bp = ws + bp_off;
#if PANEL_IA
    a += a_off; /* op(A) in place; ap_off unused */
#else
    global const float *ap = ws + ap_off; /* packed op(A); a, lda and k0 unused */
#endif
    const int gm = (int)get_global_id(mfirst ? 0 : 1), gn = (int)get_global_id(mfirst ? 1 : 0);
    const int pi = gm * GEMM_BM, qj = gn * GEMM_BN;
    if (pi >= np || qj >= nq) return;
    c += c_off;
#if GEMM_C_DTYPE != CLT_F32
    const int kblock = kc; /* no partial sums in a 16-bit C */
#else
    const int kblock = GEMM_KB;
#endif
    for (int kb0 = 0; kb0 < kc; kb0 += kblock) {
        const int kn = min(kblock, kc - kb0);
        const float bet = first && kb0 == 0 ? beta : 1.0f;
        const bool epi = last && kb0 + kn == kc; /* the sums are complete */
        for (int sj = 0; sj < GEMM_BN && qj + sj < nq; sj++) {
            const int q = qj + sj, nb = n0 + q * PANEL_NR;
            global const float *bpan = bp + ((size_t)q * kc + kb0) * PANEL_NR;
            for (int si = 0; si < GEMM_BM && pi + si < np; si++) {
                const int p = pi + si, mb = m0 + p * PANEL_MR;
                floatv acc[PANEL_MR][NV];
#pragma unroll
                for (int r = 0; r < PANEL_MR; r++)
#pragma unroll
                    for (int v = 0; v < NV; v++) acc[r][v] = (floatv)(0.0f);
                global const float *bk = bpan;
#if PANEL_IA
                /* op(A)'s rows mb .. mb + PANEL_MR (the last valid one repeated past mlim:
                 * computed, never stored) from column k0 + kb0 on */
#if GEMM_TA
                global const gemm_a_t *ak = a + (size_t)(k0 + kb0) * lda;
                int mr[PANEL_MR];
#pragma unroll
                for (int r = 0; r < PANEL_MR; r++) mr[r] = min(mb + r, mlim - 1);
#define PANEL_A(r) CLT_LOAD(GEMM_A_DTYPE, ak, mr[r])
#define PANEL_A_NEXT ak += lda
#else
                global const gemm_a_t *arow[PANEL_MR];
#pragma unroll
                for (int r = 0; r < PANEL_MR; r++)
                    arow[r] = a + (size_t)min(mb + r, mlim - 1) * lda + k0 + kb0;
                int ak = 0;
#define PANEL_A(r) CLT_LOAD(GEMM_A_DTYPE, arow[r], ak)
#define PANEL_A_NEXT ak++
#endif
#else
                global const float *ak = ap + ((size_t)p * kc + kb0) * PANEL_MR;
#define PANEL_A(r) ak[r]
#define PANEL_A_NEXT ak += PANEL_MR
#endif
                for (int k = 0; k < kn; k++, bk += PANEL_NR, PANEL_A_NEXT) {
                    floatv bv[NV];
#pragma unroll
                    for (int v = 0; v < NV; v++) bv[v] = VLOADF(bk + v * GEMM_VW);
#pragma unroll
                    for (int r = 0; r < PANEL_MR; r++) {
                        const floatv av = (floatv)(PANEL_A(r));
#pragma unroll
                        for (int v = 0; v < NV; v++) acc[r][v] = fma(av, bv[v], acc[r][v]);
                    }
                }
#undef PANEL_A
#undef PANEL_A_NEXT
                const bool inner = mb + PANEL_MR <= mlim && nb + PANEL_NR <= nlim;
                const bool with_act = epi && act >= 0;
                if (inner && !with_act) {
#pragma unroll
                    for (int r = 0; r < PANEL_MR; r++) {
                        global gemm_c_t *crow = c + (size_t)(mb + r) * ldc;
#pragma unroll
                        for (int v = 0; v < NV; v++)
                            CLT_VSTORE(GEMM_C_DTYPE, GEMM_VW,
                                       panel_value(crow, nb + v * GEMM_VW, acc[r][v], alpha, bet,
                                                   epi, &e),
                                       crow, nb + v * GEMM_VW);
                    }
                    continue;
                }
                /* Through private memory: an activation by vectors in loops that are not
                 * unrolled (its code once: unrolled, exp and tanh in every lane of every vector
                 * outgrow what GPU compilers unroll), the edge element by element. */
                float t[PANEL_MR * PANEL_NR];
#pragma unroll
                for (int r = 0; r < PANEL_MR; r++)
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        CLT__XCAT(vstore, GEMM_VW)(acc[r][v], 0, t + r * PANEL_NR + v * GEMM_VW);
                if (inner) {
#pragma unroll 1
                    for (int r = 0; r < PANEL_MR; r++) {
                        global gemm_c_t *crow = c + (size_t)(mb + r) * ldc;
                        global gemm_c_t *zrow = e.z + (size_t)(mb + r) * ldc;
#pragma unroll 1
                        for (int v = 0; v < NV; v++) {
                            const int n = nb + v * GEMM_VW;
                            const floatv x = VLOADF(t + r * PANEL_NR + v * GEMM_VW);
                            panel_store_act(crow, zrow, n, panel_value(crow, n, x, alpha, bet,
                                                                       epi, &e), &e);
                        }
                    }
                } else {
#pragma unroll 1
                    for (int r = 0; r < PANEL_MR && mb + r < mlim; r++) {
                        global gemm_c_t *crow = c + (size_t)(mb + r) * ldc;
                        global gemm_c_t *zrow = e.z + (size_t)(mb + r) * ldc;
#pragma unroll 1
                        for (int j = 0; j < PANEL_NR && nb + j < nlim; j++) {
                            float x = alpha * t[r * PANEL_NR + j];
                            if (bet != 0.0f) x = fma(bet, CLT_LOAD(GEMM_C_DTYPE, crow, nb + j), x);
                            if (GEMM_BIAS && epi) x += CLT_LOAD(GEMM_BIAS_DTYPE, e.bias, nb + j);
                            if (with_act && zmode == CLT_EPI_Z_GRAD) {
                                const float s = CLT_LOAD(GEMM_C_DTYPE, zrow, nb + j);
                                x = clt_act_bwd_float(act, x, s, slope);
                            } else if (with_act) {
                                if (zmode) CLT_STORE(GEMM_C_DTYPE, zrow, nb + j, x);
                                x = clt_act_fwd_float(act, x, slope);
                            }
                            CLT_STORE(GEMM_C_DTYPE, crow, nb + j, x);
                        }
                    }
                }
            }
        }
    }
}
