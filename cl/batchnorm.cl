/* Batch normalisation over x (B, C, S) (S = H * W for nn.BatchNorm2d, 1 for nn.BatchNorm1d),
 * per channel c over its n = B * S elements: the statistics (mean, biased variance, running
 * averages), the normalisation, and backward (dweight, dbias and dx through the batch
 * statistics). x and y are stored as X_DTYPE, dy and dx as G_DTYPE (-D codes, default f32);
 * statistics, parameters and arithmetic are f32.
 *
 * The elementwise kernels run a 3-D range (k, c, b - b0), a work-item per run of up to `run`
 * consecutive elements of a row (b, c), walked in vector lanes: the channel is a work-item
 * index, so no element divides its index (64-bit division is slow everywhere), and the
 * channel's parameters are loaded once per run.
 *
 * The reductions run one work-group per channel (of any size). The channel's B rows of S
 * elements are cut into leaves by a geometry the host derives from B and S only (never from the
 * work-group size): a leaf is `rows` consecutive rows times one chunk of at most L consecutive
 * elements of each row (a run); its elements are summed in a fixed order into vector lanes
 * (CLT_BN_LEAF_BODY), the lanes then added pairwise. The leaves are walked in tiles of
 * CLT_BN_TILE, each work-item summing whole leaves, each tile added by a pairwise tree of fixed
 * shape in local memory, and the tile sums added in order. No atomics; the bits do not depend
 * on the work-group size. Local memory: 2 * CLT_BN_TILE floats (2 KiB by default).
 * Two passes over x for the variance (the second mostly from cache: a channel is small).
 *
 * With `relu` the layer is batch norm followed by relu (the model fuses the pair): forward
 * stores max(z, 0) with z = fma(x - mean, invstd w, bias), and backward takes dy where z > 0,
 * else 0, z recomputed from x in the same way (the same bits as the forward's, so the same
 * mask as relu's backward on the stored output), saving relu's passes over the tensor. */
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

/* The leaf geometry the host chose (see the header): chunks of at most L elements, nchunk per
 * row, `rows` rows per leaf; nleaf leaves per channel. */
#define CLT_BN_LEAF_ARGS uint B, uint C, uint S, uint L, uint nchunk, uint rows, uint nleaf

static inline float clt_bn_hsum8(float8 v)
{
    const float4 h = v.lo + v.hi;
    const float2 q = h.lo + h.hi;
    return q.x + q.y;
}

/* The first element of leaf e of channel c (its first row's run) in *base, the elements per
 * run in *len and its rows in *nrows; runs of successive rows are C * S apart. */
static inline void clt_bn_leaf(uint e, uint c, CLT_BN_LEAF_ARGS, ulong *base, uint *len,
                               uint *nrows)
{
    const uint g = e / nchunk, k = e - g * nchunk, b0 = g * rows, s0 = k * L;
    *base = ((ulong)b0 * C + c) * S + s0;
    *len = min(L, S - s0);
    *nrows = min(rows, B - b0);
}

/* n (8 or 1) elements of a float dtype from index i, as a float8 or a float. */
#define CLT_BN_T_8 float8
#define CLT_BN_T_1 float
#define CLT_BN_LOAD_8(code, p, i) CLT_VLOAD(code, 8, p, i)
#define CLT_BN_LOAD_1(code, p, i) CLT_LOAD(code, p, i)
#define CLT_BN_T(n) CLT__XCAT(CLT_BN_T_, n)
#define CLT_BN_LOADN(code, n, p, i) CLT__XCAT(CLT_BN_LOAD_, n)(code, p, i)

/* The body of a leaf function: returns the leaf's two sums (a float2) of the terms that
 * STEP(n, a, q, i) adds into the accumulators a and q for the n (8 or 1) elements from index
 * i. Row r of the leaf goes to accumulator r % 4 (lane j % 8 of its run's element j, the last
 * len % 8 into a scalar); four rows are walked in lockstep (four streams, which CPUs prefetch
 * far better than one), and the accumulators added pairwise at the end. Uses base, stride, len
 * and nrows. */
#define CLT_BN_LEAF_BODY(STEP)                                                                     \
    float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, q0 = 0.0f, q1 = 0.0f, q2 = 0.0f, q3 = 0.0f; \
    float ta0 = 0.0f, ta1 = 0.0f, ta2 = 0.0f, ta3 = 0.0f;                                          \
    float tq0 = 0.0f, tq1 = 0.0f, tq2 = 0.0f, tq3 = 0.0f;                                          \
    const uint len8 = len & ~7u;                                                                   \
    uint r = 0;                                                                                    \
    for (; r + 4 <= nrows; r += 4, base += 4 * stride) {                                           \
        for (uint j = 0; j < len8; j += 8) {                                                       \
            STEP(8, a0, q0, base + j)                                                              \
            STEP(8, a1, q1, base + stride + j)                                                     \
            STEP(8, a2, q2, base + 2 * stride + j)                                                 \
            STEP(8, a3, q3, base + 3 * stride + j)                                                 \
        }                                                                                          \
        for (uint j = len8; j < len; j++) {                                                        \
            STEP(1, ta0, tq0, base + j)                                                            \
            STEP(1, ta1, tq1, base + stride + j)                                                   \
            STEP(1, ta2, tq2, base + 2 * stride + j)                                               \
            STEP(1, ta3, tq3, base + 3 * stride + j)                                               \
        }                                                                                          \
    }                                                                                              \
    const uint rem = nrows - r; /* 0 to 3 rows left, to accumulators 0 .. rem - 1 */              \
    for (uint j = 0; rem > 0 && j < len8; j += 8) {                                                \
        STEP(8, a0, q0, base + j)                                                                  \
        if (rem > 1) STEP(8, a1, q1, base + stride + j)                                            \
        if (rem > 2) STEP(8, a2, q2, base + 2 * stride + j)                                        \
    }                                                                                              \
    for (uint j = len8; rem > 0 && j < len; j++) {                                                 \
        STEP(1, ta0, tq0, base + j)                                                                \
        if (rem > 1) STEP(1, ta1, tq1, base + stride + j)                                          \
        if (rem > 2) STEP(1, ta2, tq2, base + 2 * stride + j)                                      \
    }                                                                                              \
    return (float2)(clt_bn_hsum8((a0 + a1) + (a2 + a3)) + ((ta0 + ta1) + (ta2 + ta3)),             \
                    clt_bn_hsum8((q0 + q1) + (q2 + q3)) + ((tq0 + tq1) + (tq2 + tq3)));

/* Over one leaf of x: (sum of x, 0). */
#define CLT_BN_SUM_STEP(n, a, q, i) a += CLT_BN_LOADN(X_DTYPE, n, x, i);
static inline float2 clt_bn_leaf_sum(const global X_T *x, ulong base, ulong stride, uint len,
                                     uint nrows)
{
    CLT_BN_LEAF_BODY(CLT_BN_SUM_STEP)
}

/* Over one leaf of x: (sum of (x - shift), sum of (x - shift)^2). */
#define CLT_BN_MOMENTS_STEP(n, a, q, i)                                                            \
    {                                                                                              \
        const CLT_BN_T(n) v = CLT_BN_LOADN(X_DTYPE, n, x, i) - shift;                              \
        a += v;                                                                                    \
        q += v * v;                                                                                \
    }
static inline float2 clt_bn_leaf_moments(const global X_T *x, ulong base, ulong stride, uint len,
                                         uint nrows, float shift)
{
    CLT_BN_LEAF_BODY(CLT_BN_MOMENTS_STEP)
}

/* Over one leaf: (sum of dy, sum of dy * xhat), xhat = (x - mean) * invstd. */
#define CLT_BN_GRADS_STEP(n, a, q, i)                                                              \
    {                                                                                              \
        const CLT_BN_T(n) g = CLT_BN_LOADN(G_DTYPE, n, dy, i);                                     \
        a += g;                                                                                    \
        q += g * ((CLT_BN_LOADN(X_DTYPE, n, x, i) - mean) * invstd);                               \
    }
static inline float2 clt_bn_leaf_grads(const global G_T *dy, const global X_T *x, ulong base,
                                       ulong stride, uint len, uint nrows, float mean,
                                       float invstd)
{
    CLT_BN_LEAF_BODY(CLT_BN_GRADS_STEP)
}

/* The same with the gradient of a fused relu: dy where fma(x - mean, scale, shift) > 0. */
#define CLT_BN_GRADS_RELU_STEP(n, a, q, i)                                                         \
    {                                                                                              \
        const CLT_BN_T(n) d = CLT_BN_LOADN(X_DTYPE, n, x, i) - mean;                               \
        const CLT_BN_T(n) z = fma(d, (CLT_BN_T(n))scale, (CLT_BN_T(n))shift);                      \
        const CLT_BN_T(n) g = z > 0.0f ? CLT_BN_LOADN(G_DTYPE, n, dy, i) : (CLT_BN_T(n))0.0f;      \
        a += g;                                                                                    \
        q += g * (d * invstd);                                                                     \
    }
static inline float2 clt_bn_leaf_grads_relu(const global G_T *dy, const global X_T *x,
                                            ulong base, ulong stride, uint len, uint nrows,
                                            float mean, float invstd, float scale, float shift)
{
    CLT_BN_LEAF_BODY(CLT_BN_GRADS_RELU_STEP)
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

/* t1 += the channel's sum of LEAF.x and t2 += its sum of LEAF.y (floats declared by the
 * caller), the same in every work-item of the group; LEAF is an expression in base, len and
 * nrows (one leaf's float2). A macro, not a function: the barriers stay in the kernel's body,
 * with no pointers to private variables across them. */
#define CLT_BN_REDUCE(LEAF, t1, t2)                                                                \
    for (uint t0 = 0; t0 < nleaf; t0 += CLT_BN_TILE) {                                             \
        for (uint l = lid; l < CLT_BN_TILE; l += lsz) {                                            \
            float2 v = 0.0f;                                                                       \
            if (l < nleaf - t0) {                                                                  \
                ulong base;                                                                        \
                uint len, nrows;                                                                   \
                clt_bn_leaf(t0 + l, c, B, C, S, L, nchunk, rows, nleaf, &base, &len, &nrows);      \
                v = (LEAF);                                                                        \
            }                                                                                      \
            l1[l] = v.x;                                                                           \
            l2[l] = v.y;                                                                           \
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
 * + m var n / (n - 1) (n = B * S >= 2, the host's check), as PyTorch. */
kernel void batchnorm_stats(const global X_T *x, ulong x_off, CLT_BN_LEAF_ARGS,
                            global float *stats, ulong st_off, global float *rmean, ulong rm_off,
                            global float *rvar, ulong rv_off, float momentum, float eps,
                            int update)
{
    local float l1[CLT_BN_TILE], l2[CLT_BN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint c = (uint)get_group_id(0); /* the host launches exactly C groups */
    const global X_T *xp = x + x_off;
    const ulong stride = (ulong)C * S;
    const ulong count = (ulong)B * S;
    const float n = (float)count;
    float s0 = 0.0f, zero = 0.0f, s1 = 0.0f, s2 = 0.0f;
    CLT_BN_REDUCE(clt_bn_leaf_sum(xp, base, stride, len, nrows), s0, zero)
    (void)zero; /* the first pass has no second sum */
    const float mean = s0 / n;
    CLT_BN_REDUCE(clt_bn_leaf_moments(xp, base, stride, len, nrows, mean), s1, s2)
    /* s1 is the rounding residue of the mean: subtracting its square keeps var exact-ish */
    const float var = fmax(s2 / n - (s1 / n) * (s1 / n), 0.0f);
    if (lid == 0) {
        stats[st_off + c] = mean;
        stats[st_off + C + c] = 1.0f / sqrt(var + eps);
        if (update) {
            const float unbiased = var * (n / (float)(count - 1));
            rmean[rm_off + c] = (1.0f - momentum) * rmean[rm_off + c] + momentum * mean;
            rvar[rv_off + c] = (1.0f - momentum) * rvar[rv_off + c] + momentum * unbiased;
        }
    }
}

/* The work-item of the 3-D range (k, c, b - b0) of the elementwise kernels: run k of `run`
 * elements (the last of a row shorter) of row (b, c); returns outside the tensor, else i is
 * the run's first element in (B, C, S) and len its length. */
#define CLT_BN_RUN(i, len)                                                                         \
    const uint k = (uint)get_global_id(0), c = (uint)get_global_id(1),                            \
               b = b0 + (uint)get_global_id(2);                                                    \
    if (c >= C || b >= B || (ulong)k * run >= S) return;                                           \
    const uint len = min(run, S - k * run);                                                        \
    const ulong i = ((ulong)b * C + c) * S + (ulong)k * run;

/* y = fma(x - mean[c], invstd[c] * w[c], b[c]) over the batch's rows b0 onwards (with relu,
 * max of that and 0; NaN propagates, as relu's). from_var = 0: mean and invstd are stats[c],
 * stats[C + c] (training); from_var = 1: mean[c] and var[c] are the running statistics and
 * invstd = 1 / sqrt(var + eps) (evaluation). */
kernel void batchnorm_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                              uint B, uint C, uint S, uint run, uint b0, const global float *mean,
                              ulong m_off, const global float *second, ulong s_off,
                              int from_var, float eps, const global float *w, ulong w_off,
                              const global float *bias, ulong b_off, int relu)
{
    CLT_BN_RUN(i, len)
    const float mu = mean[m_off + c], v = second[s_off + c];
    const float invstd = from_var ? 1.0f / sqrt(v + eps) : v;
    const float scale = invstd * w[w_off + c], shift = bias[b_off + c];
    global X_T *yp = y + y_off + i;
    const global X_T *xp = x + x_off + i;
    uint j = 0;
    for (; j + 8 <= len; j += 8) {
        float8 z = fma(CLT_VLOAD(X_DTYPE, 8, xp, j) - mu, (float8)scale, (float8)shift);
        if (relu) z = z < 0.0f ? (float8)0.0f : z; /* relu's: NaN < 0 is false */
        CLT_VSTORE(X_DTYPE, 8, z, yp, j);
    }
    for (; j < len; j++) {
        float z = fma(CLT_LOAD(X_DTYPE, xp, j) - mu, scale, shift);
        if (relu) z = z < 0.0f ? 0.0f : z;
        CLT_STORE(X_DTYPE, yp, j, z);
    }
}

/* Backward reductions, one work-group per channel c, with xhat = (x - mean) invstd from the
 * training forward's stats: sdy = sum dy, sdx = sum dy xhat (dy masked by a fused relu);
 * dw[c] = beta dw[c] + sdx, db[c] = beta db[c] + sdy (beta 0: not read); stats[2C + c] = sdy,
 * stats[3C + c] = sdx for batchnorm_backward_dx. */
kernel void batchnorm_backward_reduce(const global G_T *dy, ulong dy_off, const global X_T *x,
                                      ulong x_off, CLT_BN_LEAF_ARGS, global float *stats,
                                      ulong st_off, global float *dw, ulong dw_off,
                                      global float *db, ulong db_off, float beta,
                                      const global float *w, ulong w_off,
                                      const global float *bias, ulong b_off, int relu)
{
    local float l1[CLT_BN_TILE], l2[CLT_BN_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint c = (uint)get_group_id(0); /* the host launches exactly C groups */
    const global G_T *dyp = dy + dy_off;
    const global X_T *xp = x + x_off;
    const ulong stride = (ulong)C * S;
    const float mean = stats[st_off + c], invstd = stats[st_off + C + c];
    float sdy = 0.0f, sdx = 0.0f;
    if (relu) {
        const float scale = invstd * w[w_off + c], shift = bias[b_off + c];
        CLT_BN_REDUCE(clt_bn_leaf_grads_relu(dyp, xp, base, stride, len, nrows, mean, invstd,
                                             scale, shift),
                      sdy, sdx)
    } else {
        CLT_BN_REDUCE(clt_bn_leaf_grads(dyp, xp, base, stride, len, nrows, mean, invstd), sdy,
                      sdx)
    }
    if (lid == 0) {
        dw[dw_off + c] = beta == 0.0f ? sdx : beta * dw[dw_off + c] + sdx;
        db[db_off + c] = beta == 0.0f ? sdy : beta * db[db_off + c] + sdy;
        stats[st_off + 2 * C + c] = sdy;
        stats[st_off + 3 * C + c] = sdx;
    }
}

/* dx = w[c] invstd[c] (dy - sdy[c] / n - xhat sdx[c] / n) over the batch's rows b0 onwards (the
 * gradient through the batch statistics; dy masked by a fused relu), n = B * S. */
kernel void batchnorm_backward_dx(global G_T *dx, ulong dx_off, const global G_T *dy,
                                  ulong dy_off, const global X_T *x, ulong x_off, uint B, uint C,
                                  uint S, uint run, uint b0, const global float *stats,
                                  ulong st_off, const global float *w, ulong w_off,
                                  const global float *bias, ulong b_off, int relu)
{
    CLT_BN_RUN(i, len)
    const float mean = stats[st_off + c], invstd = stats[st_off + C + c];
    const float inv_n = 1.0f / (float)((ulong)B * S);
    const float sdy = stats[st_off + 2 * C + c] * inv_n, sdx = stats[st_off + 3 * C + c] * inv_n;
    /* also the forward's z scale (invstd * w: the same bits), for a fused relu's mask */
    const float scale = w[w_off + c] * invstd, shift = bias[b_off + c];
    global G_T *dxp = dx + dx_off + i;
    const global G_T *dyp = dy + dy_off + i;
    const global X_T *xp = x + x_off + i;
    uint j = 0;
    for (; j + 8 <= len; j += 8) {
        const float8 d = CLT_VLOAD(X_DTYPE, 8, xp, j) - mean, xhat = d * invstd;
        float8 g = CLT_VLOAD(G_DTYPE, 8, dyp, j);
        if (relu) g = fma(d, (float8)scale, (float8)shift) > 0.0f ? g : (float8)0.0f;
        CLT_VSTORE(G_DTYPE, 8, scale * (g - sdy - xhat * sdx), dxp, j);
    }
    for (; j < len; j++) {
        const float d = CLT_LOAD(X_DTYPE, xp, j) - mean, xhat = d * invstd;
        float g = CLT_LOAD(G_DTYPE, dyp, j);
        if (relu) g = fma(d, scale, shift) > 0.0f ? g : 0.0f;
        CLT_STORE(G_DTYPE, dxp, j, scale * (g - sdy - xhat * sdx));
    }
}
