/* Losses and row-wise ops on (B, N) f32 rows: softmax cross-entropy (loss, gradient and the
 * count of correct rows in one kernel), mean squared error, softmax and argmax.
 *
 * Loss totals are deterministic and independent of the launch: the reduction kernels run as ONE
 * work-group (of any size) that walks the leaves (rows, or chunks of CLT_MSE_LEAF elements) in
 * tiles of CLT_RED_TILE, sums each tile by a pairwise tree of fixed shape in local memory, adds
 * the tile sums in order, and finally adds the total to the accumulator. Each leaf is computed
 * by one work-item in a fixed order, so no result depends on the work-group size. */

#ifndef CLT_RED_TILE
#define CLT_RED_TILE 256 /* leaves per tile of the reduction tree; a power of two */
#endif
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
