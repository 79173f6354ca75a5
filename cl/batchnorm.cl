/* Batch normalisation over x (B, C, S) (S = H * W for nn.BatchNorm2d, 1 for nn.BatchNorm1d),
 * per channel c over its n = B * S elements: the statistics (mean, biased variance, running
 * averages), the normalisation, and backward (dweight, dbias and dx through the batch
 * statistics). x and y are stored as X_DTYPE, dy and dx as G_DTYPE (-D codes, default f32);
 * statistics, parameters and arithmetic are f32.
 *
 * The reductions run one work-group per channel (of any size): the channel's elements are
 * walked in tiles of CLT_BN_TILE leaves of CLT_BN_LEAF consecutive elements, each leaf summed
 * in order by one work-item, each tile by a pairwise tree of fixed shape in local memory, and
 * the tile sums added in order. No atomics; the bits do not depend on the work-group size.
 * Local memory: 2 * CLT_BN_TILE floats (2 KiB by default). */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#ifndef G_DTYPE
#define G_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)
#define G_T CLT_TYPE(G_DTYPE)
#ifndef CLT_BN_TILE
#define CLT_BN_TILE 256 /* leaves per tile; a power of two */
#endif
#ifndef CLT_BN_LEAF
#define CLT_BN_LEAF 4 /* consecutive elements summed sequentially into one leaf */
#endif

/* The index in (B, C, S) of element e (0 <= e < B * S) of channel c. */
static inline ulong clt_bn_index(ulong e, uint c, uint C, ulong S)
{
    const ulong b = e / S;
    return (b * C + c) * S + (e - b * S);
}

/* Pairwise sums of a[0 .. CLT_BN_TILE) into a[0] and of b likewise, in a fixed shape. Call with
 * every work-item after a barrier that publishes the leaves; ends with a barrier. */
static inline void clt_bn_tree2(local float *a, local float *b)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    for (uint h = CLT_BN_TILE / 2; h > 0; h >>= 1) {
        for (uint i = lid; i < h; i += lsz) {
            a[i] += a[i + h];
            b[i] += b[i + h];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Over channel c of x: t1 = sum of (x - shift) and t2 = sum of (x - shift)^2 (floats declared
 * by the caller), the same in every work-item of the group. A macro, not a function: the
 * barriers stay in the kernel's body, with no pointers to private variables across them. */
#define CLT_BN_MOMENTS(xp, shift, t1, t2)                                                          \
    for (ulong t0 = 0; t0 < n; t0 += (ulong)CLT_BN_TILE * CLT_BN_LEAF) {                         \
        for (uint l = lid; l < CLT_BN_TILE; l += lsz) {                                            \
            const ulong e0 = t0 + (ulong)l * CLT_BN_LEAF;                                          \
            float a = 0.0f, q = 0.0f;                                                              \
            for (ulong e = e0; e < e0 + CLT_BN_LEAF && e < n; e++) {                               \
                const float v = CLT_LOAD(X_DTYPE, xp, clt_bn_index(e, c, C, S)) - (shift);         \
                a += v;                                                                            \
                q += v * v;                                                                        \
            }                                                                                      \
            l1[l] = a;                                                                             \
            l2[l] = q;                                                                             \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        clt_bn_tree2(l1, l2);                                                                      \
        t1 += l1[0];                                                                               \
        t2 += l2[0];                                                                               \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }

/* Training statistics, one work-group per channel c: mean = sum x / n, var = sum (x - mean)^2 / n
 * (two passes), stats[c] = mean, stats[C + c] = 1 / sqrt(var + eps); and when update,
 * running_mean = (1 - m) running_mean + m mean, running_var = (1 - m) running_var
 * + m var n / (n - 1) (n >= 2, the host's check), as PyTorch. */
kernel void batchnorm_stats(const global X_T *x, ulong x_off, uint C, ulong S, ulong n,
                            global float *stats, ulong st_off, global float *rmean, ulong rm_off,
                            global float *rvar, ulong rv_off, float momentum, float eps,
                            int update)
{
    local float l1[CLT_BN_TILE], l2[CLT_BN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint c = (uint)get_group_id(0); /* the host launches exactly C groups */
    const global X_T *xp = x + x_off;
    float s0 = 0.0f, q0 = 0.0f, s1 = 0.0f, s2 = 0.0f;
    CLT_BN_MOMENTS(xp, 0.0f, s0, q0)
    (void)q0; /* the first pass's squares are not needed */
    const float mean = s0 / (float)n;
    CLT_BN_MOMENTS(xp, mean, s1, s2)
    /* s1 is the rounding residue of the mean: subtracting its square keeps var exact-ish */
    const float var = fmax(s2 / (float)n - (s1 / (float)n) * (s1 / (float)n), 0.0f);
    if (get_local_id(0) == 0) {
        stats[st_off + c] = mean;
        stats[st_off + C + c] = 1.0f / sqrt(var + eps);
        if (update) {
            const float unbiased = var * ((float)n / (float)(n - 1));
            rmean[rm_off + c] = (1.0f - momentum) * rmean[rm_off + c] + momentum * mean;
            rvar[rv_off + c] = (1.0f - momentum) * rvar[rv_off + c] + momentum * unbiased;
        }
    }
}

/* y = (x - mean[c]) * invstd[c] * w[c] + b[c] over all B * C * S elements, one work-item each.
 * from_var = 0: mean and invstd are stats[c], stats[C + c] (training); from_var = 1: mean[c]
 * and var[c] are the running statistics and invstd = 1 / sqrt(var + eps) (evaluation). */
kernel void batchnorm_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                              ulong total, uint C, ulong S, const global float *mean,
                              ulong m_off, const global float *second, ulong s_off,
                              int from_var, float eps, const global float *w, ulong w_off,
                              const global float *b, ulong b_off)
{
    const ulong i = get_global_id(0);
    if (i >= total) return;
    const uint c = (uint)((i / S) % C);
    const float mu = mean[m_off + c], v = second[s_off + c];
    const float invstd = from_var ? 1.0f / sqrt(v + eps) : v;
    const float xv = CLT_LOAD(X_DTYPE, x + x_off, i);
    CLT_STORE(X_DTYPE, y + y_off, i, (xv - mu) * invstd * w[w_off + c] + b[b_off + c]);
}

/* Backward reductions, one work-group per channel c, with xhat = (x - mean) invstd from the
 * training forward's stats: sdy = sum dy, sdx = sum dy xhat; dw[c] = beta dw[c] + sdx,
 * db[c] = beta db[c] + sdy (beta 0: not read); stats[2C + c] = sdy, stats[3C + c] = sdx for
 * batchnorm_backward_dx. */
kernel void batchnorm_backward_reduce(const global G_T *dy, ulong dy_off, const global X_T *x,
                                      ulong x_off, uint C, ulong S, ulong n, global float *stats,
                                      ulong st_off, global float *dw, ulong dw_off,
                                      global float *db, ulong db_off, float beta)
{
    local float l1[CLT_BN_TILE], l2[CLT_BN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint c = (uint)get_group_id(0); /* the host launches exactly C groups */
    const global G_T *dyp = dy + dy_off;
    const global X_T *xp = x + x_off;
    const float mean = stats[st_off + c], invstd = stats[st_off + C + c];
    const ulong per_tile = (ulong)CLT_BN_TILE * CLT_BN_LEAF;
    float sdy = 0.0f, sdx = 0.0f;
    for (ulong t0 = 0; t0 < n; t0 += per_tile) {
        for (uint l = lid; l < CLT_BN_TILE; l += lsz) {
            const ulong e0 = t0 + (ulong)l * CLT_BN_LEAF;
            float a = 0.0f, q = 0.0f;
            for (ulong e = e0; e < e0 + CLT_BN_LEAF && e < n; e++) {
                const ulong j = clt_bn_index(e, c, C, S);
                const float g = CLT_LOAD(G_DTYPE, dyp, j);
                a += g;
                q += g * ((CLT_LOAD(X_DTYPE, xp, j) - mean) * invstd);
            }
            l1[l] = a;
            l2[l] = q;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_bn_tree2(l1, l2);
        sdy += l1[0];
        sdx += l2[0];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        dw[dw_off + c] = beta == 0.0f ? sdx : beta * dw[dw_off + c] + sdx;
        db[db_off + c] = beta == 0.0f ? sdy : beta * db[db_off + c] + sdy;
        stats[st_off + 2 * C + c] = sdy;
        stats[st_off + 3 * C + c] = sdx;
    }
}

/* dx = w[c] invstd[c] (dy - sdy[c] / n - xhat sdx[c] / n) over all B * C * S elements (the
 * gradient through the batch statistics), one work-item each. */
kernel void batchnorm_backward_dx(global G_T *dx, ulong dx_off, const global G_T *dy,
                                  ulong dy_off, const global X_T *x, ulong x_off, ulong total,
                                  uint C, ulong S, ulong n, const global float *stats,
                                  ulong st_off, const global float *w, ulong w_off)
{
    const ulong i = get_global_id(0);
    if (i >= total) return;
    const uint c = (uint)((i / S) % C);
    const float mean = stats[st_off + c], invstd = stats[st_off + C + c];
    const float inv_n = 1.0f / (float)n;
    const float sdy = stats[st_off + 2 * C + c] * inv_n, sdx = stats[st_off + 3 * C + c] * inv_n;
    const float xhat = (CLT_LOAD(X_DTYPE, x + x_off, i) - mean) * invstd;
    const float g = CLT_LOAD(G_DTYPE, dy + dy_off, i);
    CLT_STORE(G_DTYPE, dx + dx_off, i, w[w_off + c] * invstd * (g - sdy - xhat * sdx));
}
