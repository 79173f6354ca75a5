/* Losses and row-wise ops on (B, N) f32 rows: softmax cross-entropy (loss, gradient and the
 * count of correct rows in one kernel), mean squared error, softmax and argmax; and softmax
 * cross-entropy over large vocabularies (softmax_xent_rows, then softmax_xent_sum), whose
 * logits and gradient are X_DTYPE storage (f32, f16 or bf16).
 *
 * Loss totals are deterministic and independent of the launch: the reduction kernels run as ONE
 * work-group (of any size) that walks the leaves (rows, or chunks of CLT_MSE_LEAF elements) in
 * tiles of CLT_RED_TILE, sums each tile by a pairwise tree of fixed shape in local memory, adds
 * the tile sums in order, and finally adds the total to the accumulator. Each leaf is computed
 * by one work-item in a fixed order, so no result depends on the work-group size. */

#ifndef CLT_RED_TILE
#define CLT_RED_TILE 256 /* leaves per tile of the reduction tree; a power of two */
#endif
#ifndef CLT_XENT_LANES
#define CLT_XENT_LANES 256 /* the most lanes of softmax_xent_rows' row sums; a power of two */
#endif
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)
#ifndef CLT_MSE_LEAF
#define CLT_MSE_LEAF 16 /* consecutive elements summed sequentially into one MSE leaf */
#endif

/* Pairwise sum of a[0 .. CLT_RED_TILE) into a[0], in a shape that does not depend on the local
 * size. Call with every work-item of the group after a barrier that publishes the leaves; ends
 * with a barrier. */
static inline void clt_tile_tree(local float *a)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    for (uint h = CLT_RED_TILE / 2; h > 0; h >>= 1) {
        for (uint i = lid; i < h; i += lsz) a[i] += a[i + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* The same for two arrays at once (one set of barriers). */
static inline void clt_tile_tree2(local float *a, local float *b)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    for (uint h = CLT_RED_TILE / 2; h > 0; h >>= 1) {
        for (uint i = lid; i < h; i += lsz) {
            a[i] += a[i + h];
            b[i] += b[i + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Index of the row's maximum; the first maximum wins, and NaN counts as larger than any number
 * (the first NaN wins), as torch.argmax. */
static inline uint clt_row_argmax(const global float *z, uint N)
{
    uint best = 0;
    float bv = z[0];
    for (uint j = 1; j < N; j++) {
        const float v = z[j];
        if (v > bv || (isnan(v) && !isnan(bv))) {
            best = j;
            bv = v;
        }
    }
    return best;
}

/* Softmax cross-entropy with label smoothing eps over rows of logits (B, N), labels (B) i32.
 * With d_j = z_j - max z and lse = log sum_j exp(d_j) (so -log p_j = lse - d_j), a row's loss is
 *   (1 - eps) (lse - d_label) + eps mean_j (lse - d_j) = lse - (1 - eps) d_label - eps mean_j d_j
 * (three non-negative terms: no cancellation). loss_acc[0] += loss_scale * sum of row losses;
 * if want_correct, correct_acc[0] += the number of rows with argmax == label; if want_grad,
 * dlogits = grad_scale * (softmax - ((1 - eps) onehot + eps / N)) (dlogits may be logits).
 * A label outside [0, N) makes its row's loss and gradient NaN. One work-group, any size. */
kernel void softmax_xent_forward(const global float *logits, ulong lg_off,
                                 const global int *labels, ulong lb_off, ulong B, uint N,
                                 float eps, float loss_scale, float grad_scale,
                                 global float *dlogits, ulong dl_off, int want_grad,
                                 global float *loss_acc, ulong la_off,
                                 global float *correct_acc, ulong ca_off, int want_correct)
{
    local float loss_leaf[CLT_RED_TILE], corr_leaf[CLT_RED_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    if (get_group_id(0) != 0) return;
    float total = 0.0f, total_correct = 0.0f; /* kept by work-item 0 */

    for (ulong t0 = 0; t0 < B; t0 += CLT_RED_TILE) {
        for (uint l = lid; l < CLT_RED_TILE; l += lsz) {
            const ulong b = t0 + l;
            float loss = 0.0f, correct = 0.0f;
            if (b < B) {
                const global float *z = logits + lg_off + b * N;
                const int lab = labels[lb_off + b];
                const bool ok = lab >= 0 && (uint)lab < N;
                float m = z[0];
                for (uint j = 1; j < N; j++) m = fmax(m, z[j]);
                /* what reads z comes first: the exponentials go to g, which may be z */
                const float dl = ok ? z[lab] - m : NAN;
                if (want_correct) correct = ok && clt_row_argmax(z, N) == (uint)lab ? 1.0f : 0.0f;
                global float *g = dlogits + dl_off + b * N;
                float s = 0.0f, dsum = 0.0f;
                for (uint j = 0; j < N; j++) {
                    const float d = z[j] - m, e = exp(d);
                    s += e;
                    dsum += d;
                    if (want_grad) g[j] = e;
                }
                const float lse = log(s);
                loss = lse - (1.0f - eps) * dl - eps * (dsum / (float)N);
                if (want_grad) {
                    const float q_off = eps / (float)N, q_on = q_off + (1.0f - eps);
                    const float inv_s = 1.0f / s;
                    for (uint j = 0; j < N; j++) {
                        const float q = (int)j == lab ? q_on : q_off;
                        g[j] = ok ? grad_scale * (g[j] * inv_s - q) : NAN;
                    }
                }
            }
            loss_leaf[l] = loss;
            corr_leaf[l] = correct;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_tile_tree2(loss_leaf, corr_leaf);
        if (lid == 0) {
            total += loss_leaf[0];
            total_correct += corr_leaf[0]; /* integers below 2^24: exact */
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        loss_acc[la_off] += loss_scale * total;
        if (want_correct) correct_acc[ca_off] += total_correct;
    }
}

/* loss_acc[0] += loss_scale * sum_i (pred[i] - target[i])^2 over n elements. One work-group. */
kernel void mse_forward(const global float *pred, ulong p_off, const global float *target,
                        ulong t_off, ulong n, float loss_scale, global float *loss_acc,
                        ulong la_off)
{
    local float leaf[CLT_RED_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    if (get_group_id(0) != 0) return;
    float total = 0.0f;
    const ulong per_tile = (ulong)CLT_RED_TILE * CLT_MSE_LEAF;
    for (ulong t0 = 0; t0 < n; t0 += per_tile) {
        for (uint l = lid; l < CLT_RED_TILE; l += lsz) {
            const ulong i0 = t0 + (ulong)l * CLT_MSE_LEAF;
            float s = 0.0f;
            for (ulong i = i0; i < i0 + CLT_MSE_LEAF && i < n; i++) {
                const float d = pred[p_off + i] - target[t_off + i];
                s += d * d;
            }
            leaf[l] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_tile_tree(leaf);
        if (lid == 0) total += leaf[0];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) loss_acc[la_off] += loss_scale * total;
}

/* dpred[i] = g2 * (pred[i] - target[i]), g2 = 2 * grad_scale; dpred may be pred. */
kernel void mse_backward(global float *dpred, ulong d_off, const global float *pred, ulong p_off,
                         const global float *target, ulong t_off, ulong n, float g2)
{
    const ulong i = get_global_id(0);
    if (i < n) dpred[d_off + i] = g2 * (pred[p_off + i] - target[t_off + i]);
}

/* out = softmax of each row of x (B, N), one work-item per row; out may be x. */
kernel void softmax_forward(global float *out, ulong o_off, const global float *x, ulong x_off,
                            ulong B, uint N)
{
    const ulong b = get_global_id(0);
    if (b >= B) return;
    const global float *z = x + x_off + b * N;
    global float *y = out + o_off + b * N;
    float m = z[0];
    for (uint j = 1; j < N; j++) m = fmax(m, z[j]);
    float s = 0.0f;
    for (uint j = 0; j < N; j++) s += exp(z[j] - m);
    const float inv_s = 1.0f / s;
    for (uint j = 0; j < N; j++) y[j] = exp(z[j] - m) * inv_s;
}

/* out[b] = argmax of row b of x (B, N) as i32 (see clt_row_argmax). */
kernel void argmax_rows(global int *out, ulong o_off, const global float *x, ulong x_off, ulong B,
                        uint N)
{
    const ulong b = get_global_id(0);
    if (b < B) out[o_off + b] = (int)clt_row_argmax(x + x_off + b * N, N);
}

/* Whether (v2 at index i2) beats (v1 at i1) as a row's argmax: NaN above any number, then the
 * larger value, then the smaller index (the first maximum wins, as clt_row_argmax). i1 ==
 * UINT_MAX: no candidate yet. */
static inline bool clt_argmax_better(float v2, uint i2, float v1, uint i1)
{
    if (i1 == UINT_MAX) return true;
    if (isnan(v2) != isnan(v1)) return isnan(v2);
    if (!isnan(v2) && v2 != v1) return v2 > v1;
    return i2 < i1;
}

/* Softmax cross-entropy over rows of a large vocabulary: logits (B, N) as X_DTYPE, labels (B)
 * i32, label smoothing eps; one work-group per row (the group's index b; any size). The row is
 * read once for its statistics: `lanes` lanes (a power of two the host derives from N alone, at
 * most CLT_XENT_LANES), lane l taking elements l, l + lanes, ... in order, each with a running
 * maximum m and sum s = sum exp(z - m) (online log-sum-exp: a larger element rescales s), the
 * sum of z - z[0] (for smoothing) and the argmax; the lanes are combined by a pairwise tree of
 * fixed shape, so the bits never depend on the launch. Then, when want_grad, a second pass
 * writes dlogits = grad_scale * (softmax - ((1 - eps) onehot + eps / N)) in X_DTYPE (dlogits
 * may be logits: a global barrier parts the reads of the row from the writes). rows[b] = the row's
 * loss lse - (1 - eps) (z[label] - m) - eps mean_j (z_j - m), with lse = log s, and rows[B + b]
 * = 1 when the argmax is the label, else 0. A label outside [0, N) makes the row's loss and
 * gradient NaN. */
kernel void softmax_xent_rows(const global X_T *logits, ulong lg_off, const global int *labels,
                              ulong lb_off, ulong B, uint N, uint lanes, float eps,
                              float grad_scale, global X_T *dlogits, ulong dl_off, int want_grad,
                              global float *rows, ulong rw_off)
{
    local float lm[CLT_XENT_LANES], ls[CLT_XENT_LANES], lz[CLT_XENT_LANES], lv[CLT_XENT_LANES];
    local uint li[CLT_XENT_LANES];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong b = get_group_id(0);
    const global X_T *z = logits + lg_off + b * N;
    const int lab = labels[lb_off + b];
    const bool ok = lab >= 0 && (uint)lab < N;
    const float z0 = CLT_LOAD(X_DTYPE, z, 0), zl = ok ? CLT_LOAD(X_DTYPE, z, lab) : NAN;

    for (uint l = lid; l < lanes; l += lsz) {
        float m = -INFINITY, s = 0.0f, sz = 0.0f, bv = 0.0f;
        uint bi = UINT_MAX;
        for (uint j = l; j < N; j += lanes) {
            const float v = CLT_LOAD(X_DTYPE, z, j);
            sz += v - z0;
            if (v > m) {
                s = s * exp(m - v) + 1.0f;
                m = v;
            } else if (v != -INFINITY) { /* -inf adds nothing; NaN makes s NaN */
                s += exp(v - m);
            }
            if (clt_argmax_better(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        lm[l] = m;
        ls[l] = s;
        lz[l] = sz;
        lv[l] = bv;
        li[l] = bi;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = lanes / 2; h > 0; h >>= 1) {
        for (uint i = lid; i < h; i += lsz) {
            const float m1 = lm[i], m2 = lm[i + h], s1 = ls[i], s2 = ls[i + h], m = fmax(m1, m2);
            /* an empty lane (s = 0, m = -inf) adds nothing */
            ls[i] = (s1 == 0.0f ? 0.0f : s1 * exp(m1 - m)) + (s2 == 0.0f ? 0.0f : s2 * exp(m2 - m));
            lm[i] = m;
            lz[i] += lz[i + h];
            if (li[i + h] != UINT_MAX && clt_argmax_better(lv[i + h], li[i + h], lv[i], li[i])) {
                lv[i] = lv[i + h];
                li[i] = li[i + h];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float m = lm[0], s = ls[0];
    if (lid == 0) {
        const float smooth = eps == 0.0f ? 0.0f : eps * (lz[0] / (float)N + (z0 - m));
        rows[rw_off + b] = log(s) - (1.0f - eps) * (zl - m) - smooth;
        rows[rw_off + B + b] = ok && li[0] == (uint)lab ? 1.0f : 0.0f;
    }
    /* dlogits may be logits: every work-item's reads of the row (global memory, which the tree's
     * local fences do not order) come before any write. Unconditional: PoCL miscompiled the
     * kernel with this barrier after a (uniform) early return. */
    barrier(CLK_GLOBAL_MEM_FENCE);
    global X_T *g = dlogits + dl_off + b * N;
    const float inv_s = 1.0f / s, q_off = eps / (float)N, q_on = q_off + (1.0f - eps);
    for (uint j = lid; want_grad && j < N; j += lsz) {
        const float p = exp(CLT_LOAD(X_DTYPE, z, j) - m) * inv_s;
        const float q = (int)j == lab ? q_on : q_off;
        CLT_STORE(X_DTYPE, g, j, ok ? grad_scale * (p - q) : NAN);
    }
}

/* ---- the CPU variant of softmax_xent_rows ---------------------------------------------------
 * On a CPU device (PoCL) the work-group kernel's barriers become loops over its work-items,
 * which for a row of 84 classes cost far more than the row itself. softmax_xent_rows_vec gives a
 * row to ONE work-item and holds its lanes in float16 vectors: lane l is element l % 16 of vector
 * l / 16, vector k of a chunk of 16 nv lanes reads elements [16 k, 16 k + 16) of it; the tree
 * combines vector k + h into vector k, then the halves of the last vector (float8, float4,
 * float2, float). These are the lanes, the order within each lane and the tree of the work-group
 * kernel, with its expressions, so the bits would be the work-group kernel's but for exp: this
 * kernel takes it on float16 vectors, and PoCL's vector exp rounds about 1 % of its results 1 ulp
 * away from its scalar exp (a scalar exp here would cost most of the speed). So the two variants
 * agree to the rounding of exp, not to the bit; each is deterministic by itself (the bits never
 * depend on the launch). A row of N <= 8 takes 16 lanes instead of the work-group kernel's
 * 1 .. 8: the extra lanes stay empty (m = -inf, s = 0, no argmax), and combining an empty lane
 * changes nothing. */
#define CLT_XENT_V (CLT_XENT_LANES / 16) /* the most vectors of lanes */

/* Whether (v2 at i2) beats (v1 at i1), as clt_argmax_better, for scalars or vectors of any width
 * (comparisons give 1 or, in vectors, -1 for true; select and the bitwise operators take both).
 * By select, not by ?: and && on vectors: Oclgrind 21.10 (its clang) picked the wrong operand of
 * a vector ?: whose operands are comparisons. */
#define CLT_XENT_BETTER(v2, i2, v1, i1)                                                            \
    (((i1) == UINT_MAX) |                                                                          \
     select(select((i2) < (i1), (v2) > (v1), (isnan(v2) == 0) & ((v2) != (v1))), isnan(v2),       \
            isnan(v2) != isnan(v1)))

/* Lanes (m, s, z, v, i) := their combination with (m2, s2, z2, v2, i2), as the work-group
 * kernel's tree step, for floatn FT (or float) and the matching int type IT (select's masks). */
#define CLT_XENT_COMBINE(FT, IT, m, s, z, v, i, m2, s2, z2, v2, i2)                                \
    do {                                                                                           \
        const FT mx_ = fmax(m, m2);                                                                \
        s = select((s) * exp((m) - mx_), (FT)0.0f, (s) == 0.0f) +                                 \
            select((s2) * exp((m2) - mx_), (FT)0.0f, (s2) == 0.0f);                                \
        m = mx_;                                                                                   \
        z += z2;                                                                                   \
        const IT take_ = ((i2) != UINT_MAX) & CLT_XENT_BETTER(v2, i2, v, i);                        \
        v = select(v, v2, take_);                                                                  \
        i = select(i, i2, take_);                                                                  \
    } while (0)

/* The low half of a vector of lanes combined with its high half, into new variables
 * (hm, hs, hz, hv, hx) of the half width (floats FT, indices UT, masks IT). */
#define CLT_XENT_HALVE(FT, UT, IT, m, s, z, v, i, hm, hs, hz, hv, hx)                              \
    FT hm = (m).lo, hs = (s).lo, hz = (z).lo, hv = (v).lo;                                         \
    UT hx = (i).lo;                                                                                \
    CLT_XENT_COMBINE(FT, IT, hm, hs, hz, hv, hx, (m).hi, (s).hi, (z).hi, (v).hi, (i).hi)

/* The 16 logits z[j .. j + 16) of a row of N as floats; zeros at and past N. */
static inline float16 clt_xent_load16(const global X_T *z, uint j, uint N)
{
    if (j + 16 <= N) return CLT_VLOAD(X_DTYPE, 16, z, j);
    float t[16];
    for (uint c = 0; c < 16; c++)
        t[c] = j + c < N ? CLT_LOAD(X_DTYPE, z, j + c) : 0.0f;
    return vload16(0, t);
}

/* softmax_xent_rows (the same arguments and results) with row b = the work-item's global index
 * (the host launches at least B work-items). */
kernel void softmax_xent_rows_vec(const global X_T *logits, ulong lg_off,
                                  const global int *labels, ulong lb_off, ulong B, uint N,
                                  uint lanes, float eps, float grad_scale, global X_T *dlogits,
                                  ulong dl_off, int want_grad, global float *rows, ulong rw_off)
{
    const ulong b = get_global_id(0);
    if (b >= B) return;
    const global X_T *z = logits + lg_off + b * N;
    const int lab = labels[lb_off + b];
    const bool ok = lab >= 0 && (uint)lab < N;
    const float z0 = CLT_LOAD(X_DTYPE, z, 0), zl = ok ? CLT_LOAD(X_DTYPE, z, lab) : NAN;
    const uint nv = max(lanes, 16u) / 16, chunk = 16 * nv;
    const uint16 iota = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float16 lm[CLT_XENT_V], ls[CLT_XENT_V], lz[CLT_XENT_V], lv[CLT_XENT_V];
    uint16 li[CLT_XENT_V];

    for (uint k = 0; k < nv; k++) {
        lm[k] = -INFINITY;
        ls[k] = lz[k] = lv[k] = 0.0f;
        li[k] = UINT_MAX;
    }
    for (uint c = 0; c < N; c += chunk)
        for (uint k = 0; k < nv; k++) {
            const uint16 j = (uint16)(c + 16 * k) + iota;
            const int16 in = j < (uint16)N;
            const float16 v = clt_xent_load16(z, c + 16 * k, N), m = lm[k], s = ls[k];
            const int16 up = v > m;
            const float16 e = exp(select(v - m, m - v, up));
            /* v > m: s exp(m - v) + 1; else -inf adds nothing and NaN makes s NaN */
            const float16 s_up = s * e + 1.0f, s_on = select(s + e, s, v == -INFINITY);
            ls[k] = select(s, select(s_on, s_up, up), in);
            lm[k] = select(m, v, in & up);
            lz[k] = select(lz[k], lz[k] + (v - z0), in);
            const int16 take = in & CLT_XENT_BETTER(v, j, lv[k], li[k]);
            lv[k] = select(lv[k], v, take);
            li[k] = select(li[k], j, take);
        }
    for (uint h = nv / 2; h > 0; h >>= 1)
        for (uint k = 0; k < h; k++)
            CLT_XENT_COMBINE(float16, int16, lm[k], ls[k], lz[k], lv[k], li[k], lm[k + h],
                             ls[k + h], lz[k + h], lv[k + h], li[k + h]);
    CLT_XENT_HALVE(float8, uint8, int8, lm[0], ls[0], lz[0], lv[0], li[0], m8, s8, z8, v8, i8);
    CLT_XENT_HALVE(float4, uint4, int4, m8, s8, z8, v8, i8, m4, s4, z4, v4, i4);
    CLT_XENT_HALVE(float2, uint2, int2, m4, s4, z4, v4, i4, m2, s2, z2, v2, i2);
    float m = m2.x, s = s2.x, sz = z2.x, bv = v2.x;
    uint bi = i2.x;
    CLT_XENT_COMBINE(float, int, m, s, sz, bv, bi, m2.y, s2.y, z2.y, v2.y, i2.y);

    const float smooth = eps == 0.0f ? 0.0f : eps * (sz / (float)N + (z0 - m));
    rows[rw_off + b] = log(s) - (1.0f - eps) * (zl - m) - smooth;
    rows[rw_off + B + b] = ok && bi == (uint)lab ? 1.0f : 0.0f;
    if (!want_grad) return;
    /* dlogits may be logits: this work-item has read its whole row */
    global X_T *g = dlogits + dl_off + b * N;
    const float inv_s = 1.0f / s, q_off = eps / (float)N, q_on = q_off + (1.0f - eps);
    for (uint j = 0; j < N; j += 16) {
        const float16 p = exp(clt_xent_load16(z, j, N) - m) * inv_s;
        const float16 q = select((float16)q_off, (float16)q_on, (uint16)(j) + iota == (uint)lab);
        const float16 d = ok ? grad_scale * (p - q) : (float16)NAN;
        if (j + 16 <= N) {
            CLT_VSTORE(X_DTYPE, 16, d, g, j);
        } else {
            float t[16];
            vstore16(d, 0, t);
            for (uint c = 0; j + c < N; c++)
                CLT_STORE(X_DTYPE, g, j + c, t[c]);
        }
    }
}

/* loss_acc[0] += loss_scale * sum of rows[0 .. B) and, when want_correct, correct_acc[0] += sum of
 * rows[B .. 2B) (softmax_xent_rows' per-row losses and hits), in the fixed order of
 * softmax_xent_forward's sums. One work-group, any size. */
kernel void softmax_xent_sum(const global float *rows, ulong rw_off, ulong B, float loss_scale,
                             global float *loss_acc, ulong la_off, global float *correct_acc,
                             ulong ca_off, int want_correct)
{
    local float loss_leaf[CLT_RED_TILE], corr_leaf[CLT_RED_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    if (get_group_id(0) != 0) return;
    float total = 0.0f, total_correct = 0.0f; /* kept by work-item 0 */
    for (ulong t0 = 0; t0 < B; t0 += CLT_RED_TILE) {
        for (uint l = lid; l < CLT_RED_TILE; l += lsz) {
            const ulong b = t0 + l;
            loss_leaf[l] = b < B ? rows[rw_off + b] : 0.0f;
            corr_leaf[l] = b < B ? rows[rw_off + B + b] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_tile_tree2(loss_leaf, corr_leaf);
        if (lid == 0) {
            total += loss_leaf[0];
            total_correct += corr_leaf[0];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        loss_acc[la_off] += loss_scale * total;
        if (want_correct) correct_acc[ca_off] += total_correct;
    }
}
