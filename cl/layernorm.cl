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

/* ---- the CPU variant ------------------------------------------------------------------------
 * On a CPU device (PoCL) a work-group's barriers become loops over its work-items, which for a
 * row of 128 elements cost far more than the row's arithmetic (650 us per 768 x 128 forward on 2
 * cores, for 0.4 MB of data). These kernels give a row (or, for the parameter gradients, 16
 * columns) to ONE work-item and hold its lanes in float16 vectors: lane l is element l % 16 of
 * vector l / 16, vector k of a chunk reads elements [16 k, 16 k + 16) of it, and the pairwise tree
 * adds vector k + h to vector k, then the halves of the last vector. These are the lanes, the
 * order within each lane and the tree of the work-group kernels above, written as the same
 * expressions (so contracted into the same fma), and sqrt and division are correctly rounded in
 * vectors as in scalars: on one device both variants give the same bits (the tests check it),
 * in about 50 us per 768 x 128 forward where the work-group kernel took 650 to 1,500 (2 cores,
 * AVX-512; BENCHMARKS.md). A row of D <= 8 takes 16 lanes instead of
 * the work-group kernels' 1 .. 8: the extra lanes hold zeros, and adding a zero (to a sum that
 * started at +0, so never -0) changes no bit. */
#define CLT_LN_V (CLT_LN_TILE / 16) /* the most vectors of lanes */

/* The 16 elements p[j .. j + 16) of a row of n elements as floats, zeros at and past n. */
#define CLT_LN_LOADER(name, code)                                                                  \
    static inline float16 name(const global CLT_TYPE(code) *p, uint j, uint n)                     \
    {                                                                                              \
        if (j + 16 <= n) return CLT_VLOAD(code, 16, p, j);                                         \
        float t[16];                                                                               \
        for (uint c = 0; c < 16; c++)                                                              \
            t[c] = j + c < n ? CLT_LOAD(code, p, j + c) : 0.0f;                                    \
        return vload16(0, t);                                                                      \
    }
CLT_LN_LOADER(clt_ln_x16, X_DTYPE)
CLT_LN_LOADER(clt_ln_g16, G_DTYPE)
CLT_LN_LOADER(clt_ln_f16, CLT_F32)

/* Whether each of the 16 elements from j is inside a row of n (for select). */
static inline int16 clt_ln_in16(uint j, uint n)
{
    const uint16 at = (uint16)(j) + (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return at < (uint16)(n);
}

/* Stores v at y[j .. min(j + 16, n)) as X_DTYPE or G_DTYPE. */
#define CLT_LN_STORER(name, code)                                                                  \
    static inline void name(global CLT_TYPE(code) *p, uint j, uint n, float16 v)                   \
    {                                                                                              \
        if (j + 16 <= n) {                                                                         \
            CLT_VSTORE(code, 16, v, p, j);                                                         \
            return;                                                                                \
        }                                                                                          \
        float t[16];                                                                               \
        vstore16(v, 0, t);                                                                         \
        for (uint c = 0; j + c < n; c++)                                                           \
            CLT_STORE(code, p, j + c, t[c]);                                                       \
    }
CLT_LN_STORER(clt_ln_store_x, X_DTYPE)
CLT_LN_STORER(clt_ln_store_g, G_DTYPE)

/* The pairwise tree of the work-group kernels over the lanes a[0 .. 16 nv) (nv a power of two):
 * returns their sum; a is consumed. */
static inline float clt_ln_vsum(float16 *a, uint nv)
{
    for (uint h = nv / 2; h > 0; h >>= 1)
        for (uint k = 0; k < h; k++)
            a[k] += a[k + h];
    const float8 a8 = a[0].lo + a[0].hi;
    const float4 a4 = a8.lo + a8.hi;
    const float2 a2 = a4.lo + a4.hi;
    return a2.x + a2.y;
}

/* The vectors of a row's lanes: max(lanes, 16) / 16 (lanes from the host, as above). */
static inline uint clt_ln_nv(uint lanes)
{
    return max(lanes, 16u) / 16;
}

/* layernorm_forward (the same arguments, then R) with row r = the work-item's global index. */
kernel void layernorm_forward_vec(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                                  const global float *w, ulong w_off, const global float *b,
                                  ulong b_off, global float *mean, ulong m_off,
                                  global float *rstd, ulong r_off, uint D, uint lanes, float eps,
                                  int flags, uint R)
{
    const ulong r = get_global_id(0);
    if (r >= R) return;
    const global X_T *xp = x + x_off + r * D;
    global X_T *yp = y + y_off + r * D;
    const float n = (float)D;
    const uint nv = clt_ln_nv(lanes), chunk = 16 * nv;
    float16 a[CLT_LN_V], q[CLT_LN_V];

    for (uint k = 0; k < nv; k++)
        a[k] = 0.0f;
    for (uint c = 0; c < D; c += chunk)
        for (uint k = 0; k < nv; k++)
            a[k] += clt_ln_x16(xp, c + 16 * k, D);
    const float mu = clt_ln_vsum(a, nv) / n;

    for (uint k = 0; k < nv; k++)
        a[k] = q[k] = 0.0f;
    for (uint c = 0; c < D; c += chunk)
        for (uint k = 0; k < nv; k++) {
            const uint j = c + 16 * k;
            const float16 d = select((float16)0.0f, clt_ln_x16(xp, j, D) - mu, clt_ln_in16(j, D));
            a[k] += d;
            q[k] += d * d;
        }
    const float res = clt_ln_vsum(a, nv) / n, var = fmax(clt_ln_vsum(q, nv) / n - res * res, 0.0f);
    const float rs = 1.0f / sqrt(var + eps);

    for (uint j = 0; j < D; j += 16) {
        float16 v = (clt_ln_x16(xp, j, D) - mu) * rs;
        if (flags & CLT_LN_W) v *= clt_ln_f16(w + w_off, j, D);
        if (flags & CLT_LN_B) v += clt_ln_f16(b + b_off, j, D);
        clt_ln_store_x(yp, j, D, v);
    }
    if (flags & CLT_LN_SAVE) {
        mean[m_off + r] = mu;
        rstd[r_off + r] = rs;
    }
}

/* layernorm_backward_dx (the same arguments, then R) with row r = the work-item's global index. */
kernel void layernorm_backward_dx_vec(global G_T *dx, ulong dx_off, const global G_T *dy,
                                      ulong dy_off, const global X_T *x, ulong x_off,
                                      const global float *mean, ulong m_off,
                                      const global float *rstd, ulong r_off, const global float *w,
                                      ulong w_off, uint D, uint lanes, int has_w, uint R)
{
    const ulong r = get_global_id(0);
    if (r >= R) return;
    const global X_T *xp = x + x_off + r * D;
    const global G_T *dyp = dy + dy_off + r * D;
    global G_T *dxp = dx + dx_off + r * D;
    const float mu = mean[m_off + r], rs = rstd[r_off + r], inv_n = 1.0f / (float)D;
    const uint nv = clt_ln_nv(lanes), chunk = 16 * nv;
    float16 a[CLT_LN_V], q[CLT_LN_V];

    for (uint k = 0; k < nv; k++)
        a[k] = q[k] = 0.0f;
    for (uint c = 0; c < D; c += chunk)
        for (uint k = 0; k < nv; k++) {
            const uint j = c + 16 * k;
            float16 g = clt_ln_g16(dyp, j, D); /* zeros past D: they add nothing */
            if (has_w) g *= clt_ln_f16(w + w_off, j, D);
            a[k] += g;
            q[k] += g * ((clt_ln_x16(xp, j, D) - mu) * rs);
        }
    const float sg = clt_ln_vsum(a, nv) * inv_n, sgx = clt_ln_vsum(q, nv) * inv_n;

    for (uint j = 0; j < D; j += 16) {
        float16 g = clt_ln_g16(dyp, j, D);
        if (has_w) g *= clt_ln_f16(w + w_off, j, D);
        const float16 xhat = (clt_ln_x16(xp, j, D) - mu) * rs;
        clt_ln_store_g(dxp, j, D, rs * (g - sg - xhat * sgx));
    }
}

/* layernorm_backward_params with columns [16 i, 16 i + 16) for i = the work-item's global index
 * (the host launches ceil(D / 16) of them): the same row slices, each summed in row order, and
 * the same tree over the slices, as the work-group kernel. */
kernel void layernorm_backward_params_vec(global float *dw, ulong dw_off, global float *db,
                                          ulong db_off, const global G_T *dy, ulong dy_off,
                                          const global X_T *x, ulong x_off,
                                          const global float *mean, ulong m_off,
                                          const global float *rstd, ulong r_off, uint R, uint D,
                                          float beta, int flags)
{
    const ulong c0 = get_global_id(0) * 16;
    if (c0 >= D) return;
    const ulong per = ((ulong)R + CLT_LN_SLICES - 1) / CLT_LN_SLICES; /* rows per slice */
    float16 pw[CLT_LN_SLICES], pb[CLT_LN_SLICES];

    for (uint sl = 0; sl < CLT_LN_SLICES; sl++) {
        const ulong r0 = min((ulong)R, sl * per), r1 = min((ulong)R, r0 + per);
        float16 sw = 0.0f, sb = 0.0f;
        for (ulong r = r0; r < r1; r++) {
            const float16 g = clt_ln_g16(dy + dy_off + r * D, (uint)c0, D);
            sb += g;
            sw += g * ((clt_ln_x16(x + x_off + r * D, (uint)c0, D) - mean[m_off + r]) *
                       rstd[r_off + r]);
        }
        pw[sl] = sw;
        pb[sl] = sb;
    }
    for (uint h = CLT_LN_SLICES / 2; h > 0; h >>= 1)
        for (uint sl = 0; sl < h; sl++) {
            pw[sl] += pw[sl + h];
            pb[sl] += pb[sl + h];
        }
    float tw[16], tb[16];
    vstore16(pw[0], 0, tw);
    vstore16(pb[0], 0, tb);
    for (uint k = 0; k < 16 && c0 + k < D; k++) {
        const ulong c = c0 + k;
        if (flags & CLT_LN_DW)
            dw[dw_off + c] = beta == 0.0f ? tw[k] : beta * dw[dw_off + c] + tw[k];
        if (flags & CLT_LN_DB)
            db[db_off + c] = beta == 0.0f ? tb[k] : beta * db[db_off + c] + tb[k];
    }
}
