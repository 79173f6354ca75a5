/* Layer normalisation over the last dimension of x (R, D), as nn.LayerNorm(D) / F.layer_norm:
 * per row r, mean and biased variance over its D elements, y = (x - mean) rstd w + b with
 * rstd = 1 / sqrt(var + eps), w and b (D) optional; backward: dx through the row statistics,
 * and the parameter gradients dw = sum over rows of dy xhat, db = sum over rows of dy. x and y
 * are stored as X_DTYPE, dy and dx as G_DTYPE (-D codes, default f32); the saved statistics
 * (mean, rstd: R each), the parameters and the arithmetic are f32.
 *
 * The row kernels (layernorm_forward, layernorm_backward_dx) run one work-group per row, of any
 * size. A row's sums are cut into `lanes` lanes, a power of two the host derives from D alone
 * (the one at or above D, at most CLT_LN_TILE), whatever the work-group's size: lane l adds
 * elements l, l + lanes, ... in order (consecutive lanes read consecutive elements), the lanes
 * are added by a pairwise tree of fixed shape in local memory, and each work-item takes lanes
 * lid, lid + lsz, ... So the bits never depend on the launch. The forward makes three
 * passes over the row (the sum, the centred moments, the store), the dx kernel two; a row is
 * small enough to come back from cache.
 *
 * layernorm_backward_params runs one work-group per CLT_LN_COLS columns: the R rows are cut into
 * CLT_LN_SLICES slices by R alone, each (slice, column) summed in row order by one work-item, the
 * slices added by a pairwise tree. No atomics; the bits do not depend on the work-group size.
 * It reads dy before the dx kernel writes dx, so the host runs it first (dx may then be dy). */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#ifndef G_DTYPE
#define G_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)
#define G_T CLT_TYPE(G_DTYPE)
#ifndef CLT_LN_TILE
#define CLT_LN_TILE 256 /* the most lanes of a row's sums; a power of two */
#endif
#ifndef CLT_LN_COLS
#define CLT_LN_COLS 16 /* columns per work-group of layernorm_backward_params */
#endif
#ifndef CLT_LN_SLICES
#define CLT_LN_SLICES 16 /* row slices of layernorm_backward_params; a power of two */
#endif

/* Flags of layernorm_forward (the host's LN_*): which of w, b, mean and rstd are given. */
#define CLT_LN_W 1
#define CLT_LN_B 2
#define CLT_LN_SAVE 4

/* Pairwise sums of a[0 .. lanes) into a[0], and of b likewise when `two`, in a fixed shape.
 * Call with every work-item after a barrier that publishes the lanes; ends with a barrier (when
 * lanes > 1). */
static inline void clt_ln_tree(local float *a, local float *b, uint lanes, int two)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    for (uint h = lanes / 2; h > 0; h >>= 1) {
        for (uint i = lid; i < h; i += lsz) {
            a[i] += a[i + h];
            if (two) b[i] += b[i + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* y = (x - mean) rstd w + b over row r = the group's index (the host launches exactly R groups);
 * w = 1 without CLT_LN_W, b = 0 without CLT_LN_B; with CLT_LN_SAVE, mean[r] and rstd[r] are
 * stored for the backward. mean = sum x / D, var = sum (x - mean)^2 / D less the square of the
 * mean's rounding residue (sum (x - mean) / D). y may be x: each element is read by the same
 * work-item that writes it, after every other read of the row (a barrier). */
kernel void layernorm_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                              const global float *w, ulong w_off, const global float *b,
                              ulong b_off, global float *mean, ulong m_off, global float *rstd,
                              ulong r_off, uint D, uint lanes, float eps, int flags)
{
    local float l1[CLT_LN_TILE], l2[CLT_LN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong r = get_group_id(0);
    const global X_T *xp = x + x_off + r * D;
    global X_T *yp = y + y_off + r * D;
    const float n = (float)D;

    for (uint l = lid; l < lanes; l += lsz) {
        float s = 0.0f;
        for (uint j = l; j < D; j += lanes)
            s += CLT_LOAD(X_DTYPE, xp, j);
        l1[l] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    clt_ln_tree(l1, l2, lanes, 0);
    const float mu = l1[0] / n;
    barrier(CLK_LOCAL_MEM_FENCE); /* every work-item has read l1[0] */

    for (uint l = lid; l < lanes; l += lsz) {
        float s = 0.0f, q = 0.0f;
        for (uint j = l; j < D; j += lanes) {
            const float d = CLT_LOAD(X_DTYPE, xp, j) - mu;
            s += d;
            q += d * d;
        }
        l1[l] = s;
        l2[l] = q;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    clt_ln_tree(l1, l2, lanes, 1);
    const float res = l1[0] / n, var = fmax(l2[0] / n - res * res, 0.0f);
    const float rs = 1.0f / sqrt(var + eps);

    for (uint j = lid; j < D; j += lsz) {
        float v = (CLT_LOAD(X_DTYPE, xp, j) - mu) * rs;
        if (flags & CLT_LN_W) v *= w[w_off + j];
        if (flags & CLT_LN_B) v += b[b_off + j];
        CLT_STORE(X_DTYPE, yp, j, v);
    }
    if (lid == 0 && (flags & CLT_LN_SAVE)) {
        mean[m_off + r] = mu;
        rstd[r_off + r] = rs;
    }
}

/* dx = rstd (g - sum g / D - xhat sum (g xhat) / D) over row r = the group's index, with
 * g = dy w (w = 1 without has_w) and xhat = (x - mean[r]) rstd[r] from the forward's saved
 * statistics. dx may be dy (each element read and written by one work-item, after the row's
 * sums). */
kernel void layernorm_backward_dx(global G_T *dx, ulong dx_off, const global G_T *dy, ulong dy_off,
                                  const global X_T *x, ulong x_off, const global float *mean,
                                  ulong m_off, const global float *rstd, ulong r_off,
                                  const global float *w, ulong w_off, uint D, uint lanes, int has_w)
{
    local float l1[CLT_LN_TILE], l2[CLT_LN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong r = get_group_id(0);
    const global X_T *xp = x + x_off + r * D;
    const global G_T *dyp = dy + dy_off + r * D;
    global G_T *dxp = dx + dx_off + r * D;
    const float mu = mean[m_off + r], rs = rstd[r_off + r], inv_n = 1.0f / (float)D;

    for (uint l = lid; l < lanes; l += lsz) {
        float s = 0.0f, q = 0.0f;
        for (uint j = l; j < D; j += lanes) {
            float g = CLT_LOAD(G_DTYPE, dyp, j);
            if (has_w) g *= w[w_off + j];
            s += g;
            q += g * ((CLT_LOAD(X_DTYPE, xp, j) - mu) * rs);
        }
        l1[l] = s;
        l2[l] = q;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    clt_ln_tree(l1, l2, lanes, 1);
    const float sg = l1[0] * inv_n, sgx = l2[0] * inv_n;

    for (uint j = lid; j < D; j += lsz) {
        float g = CLT_LOAD(G_DTYPE, dyp, j);
        if (has_w) g *= w[w_off + j];
        const float xhat = (CLT_LOAD(X_DTYPE, xp, j) - mu) * rs;
        CLT_STORE(G_DTYPE, dxp, j, rs * (g - sg - xhat * sgx));
    }
}

/* Flags of layernorm_backward_params (the host's LN_DW, LN_DB): which of dw and db to write. */
#define CLT_LN_DW 1
#define CLT_LN_DB 2

/* Over columns [c0, c0 + CLT_LN_COLS) (c0 = the group's index times CLT_LN_COLS) of D, all R
 * rows: dw[c] = beta dw[c] + sum dy xhat, db[c] = beta db[c] + sum dy (beta 0: not read), each
 * written when its flag is set; xhat from the forward's saved mean and rstd. */
kernel void layernorm_backward_params(global float *dw, ulong dw_off, global float *db,
                                      ulong db_off, const global G_T *dy, ulong dy_off,
                                      const global X_T *x, ulong x_off, const global float *mean,
                                      ulong m_off, const global float *rstd, ulong r_off, uint R,
                                      uint D, float beta, int flags)
{
    local float pw[CLT_LN_SLICES * CLT_LN_COLS], pb[CLT_LN_SLICES * CLT_LN_COLS];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong c0 = (ulong)get_group_id(0) * CLT_LN_COLS;
    const ulong per = ((ulong)R + CLT_LN_SLICES - 1) / CLT_LN_SLICES; /* rows per slice */
    const global G_T *dyp = dy + dy_off;
    const global X_T *xp = x + x_off;

    for (uint q = lid; q < CLT_LN_SLICES * CLT_LN_COLS; q += lsz) {
        const uint sl = q / CLT_LN_COLS;
        const ulong c = c0 + q % CLT_LN_COLS, r0 = min((ulong)R, sl * per),
                    r1 = min((ulong)R, r0 + per);
        float sw = 0.0f, sb = 0.0f;
        for (ulong r = r0; c < D && r < r1; r++) {
            const float g = CLT_LOAD(G_DTYPE, dyp, r * D + c);
            sb += g;
            sw += g * ((CLT_LOAD(X_DTYPE, xp, r * D + c) - mean[m_off + r]) * rstd[r_off + r]);
        }
        pw[q] = sw;
        pb[q] = sb;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = CLT_LN_SLICES / 2; h > 0; h >>= 1) {
        for (uint q = lid; q < h * CLT_LN_COLS; q += lsz) {
            pw[q] += pw[q + h * CLT_LN_COLS];
            pb[q] += pb[q + h * CLT_LN_COLS];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (uint k = lid; k < CLT_LN_COLS && c0 + k < D; k += lsz) {
        const ulong c = c0 + k;
        if (flags & CLT_LN_DW)
            dw[dw_off + c] = beta == 0.0f ? pw[k] : beta * dw[dw_off + c] + pw[k];
        if (flags & CLT_LN_DB)
            db[db_off + c] = beta == 0.0f ? pb[k] : beta * db[db_off + c] + pb[k];
    }
}
