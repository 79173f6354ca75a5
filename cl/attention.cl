/* Scaled dot-product attention per head, forward and backward, on the output of a D -> 3D
 * projection: qkv (B, T, 3D) holds q in columns [0, D), k in [D, 2D), v in [2D, 3D), head h
 * in columns h HD .. (h + 1) HD of each (D = NH HD); y (B, T, D) holds the heads' outputs side
 * by side. Per (b, h): S = scale q k^T (scale = 1 / sqrt(HD), passed by the host), with the
 * causal mask (flags & CLT_ATTN_CAUSAL) j > i left out; P = softmax over each row of S; y = P v.
 * The forward saves lse (B, NH, T), each row's log-sum-exp (natural log), from which the backward
 * recomputes P = exp(S - lse). qkv and y are stored as X_DTYPE, dy and dqkv as G_DTYPE (f32, f16
 * or bf16); lse, the workspaces and the arithmetic are f32. The scalars travel as
 * dims = (B, T, NH, HD).
 *
 * Two paths, selected by the host:
 *  - flash, in the style of FlashAttention-2, in two variants that give the same results to
 *    rounding (each deterministic on its own). The rows variant (attention_forward,
 *    attention_backward_dkv, attention_backward_dq; GPUs): a work-group takes one (b, h) and a
 *    tile of rows, one row per work-item (any work-group size: the rows of a group are its
 *    size), whose q (or k and v) and accumulators live in private arrays of CLT_ATTN_HD floats
 *    (the head width's bucket, a power of two at or above HD, at least 16, held as vectors of
 *    16; columns beyond HD are zeros and never stored). The other side's rows come through
 *    local memory in tiles of CLT_ATTN_BK rows, a size the host derives from the device's
 *    local memory. The forward keeps a running maximum and sum (online
 *    softmax), so S never reaches global memory. The backward runs attention_backward_delta
 *    (Delta_i = dy_i . y_i) first, then attention_backward_dkv (a group per tile of key rows,
 *    over every query row: dk, dv) and attention_backward_dq (a group per tile of query rows,
 *    over every key row: dq); each output is one work-item's sum in row order, so there are no
 *    atomics and the bits depend neither on the work-group size nor on CLT_ATTN_BK. Every
 *    kernel computes a score as the same fma chain of (scale q) . k, so the backward's
 *    exp(S - lse) recomputes the forward's P.
 *    The tiled variant (the same names with _tiled, in programs of their own: CLT_ATTN_TILED;
 *    CPUs): a work-item owns CLT_ATTN_R rows, the other side's rows come in blocks of
 *    CLT_ATTN_KB (a vector's lanes: 16, or 8 or 4 where local memory is small), staged both
 *    transposed and as rows; a block's scores for the
 *    work-item's rows are CLT_ATTN_R vectors, each an fma chain over the head's columns of a
 *    broadcast element times a column of the transposed block (register tiles, as a GEMM's, no
 *    horizontal sums), and the products with the block's rows run over HD-wide vectors. The
 *    same backward order (Delta, then dk and dv over blocks of query rows, then dq over blocks
 *    of key rows), sums in row order, the same score arithmetic in all three kernels; the
 *    blocks a work-item computes depend on its own rows only, not on the work-group's size.
 *  - reference (attention_ref_*): S and then P materialised in a workspace ws (B, NH, T, T),
 *    one work-item per element, plain loops: for the tests and for devices the flash kernels do
 *    not fit.
 * And one decode step of generation with a key/value cache (attention_decode): query row pos
 * alone against the keys and values of rows 0 .. pos, which earlier passes left in qkv. */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#ifndef G_DTYPE
#define G_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)
#define G_T CLT_TYPE(G_DTYPE)
#ifndef CLT_ATTN_HD
#define CLT_ATTN_HD 64 /* the flash kernels' private row width: HD's bucket, 16 << k */
#endif
#ifndef CLT_ATTN_BK
#define CLT_ATTN_BK 16 /* rows per tile staged in local memory by the flash kernels */
#endif
#ifndef CLT_ATTN_TILED
#define CLT_ATTN_TILED 0 /* 1: the flash path's kernels of the tiled variant, else of the rows one */
#endif
#ifndef CLT_ATTN_KB
#define CLT_ATTN_KB 16 /* the tiled kernels' block of rows: a vector's lanes, 4, 8 or 16 */
#endif
#ifndef CLT_ATTN_R
#define CLT_ATTN_R 4 /* the tiled kernels' rows per work-item */
#endif

#ifndef CLT_ATTN_DECODE_WG
#define CLT_ATTN_DECODE_WG 64 /* attention_decode's largest work-group */
#endif

#define CLT_ATTN_CAUSAL 1 /* flags: the causal mask */

#define ATT_HD CLT_ATTN_HD
#define ATT_BK CLT_ATTN_BK

/* The element of qkv (B, T, 3D) at row (b, t), part p (0 q, 1 k, 2 v), head h's column 0. */
static inline ulong clt_att_qkv(uint4 dims, ulong b, ulong t, uint p, uint h)
{
    const ulong D = (ulong)dims.s2 * dims.s3;
    return (b * dims.s1 + t) * 3 * D + p * D + (ulong)h * dims.s3;
}

/* The element of y or dy (B, T, D) at row (b, t), head h's column 0. */
static inline ulong clt_att_y(uint4 dims, ulong b, ulong t, uint h)
{
    return (b * dims.s1 + t) * ((ulong)dims.s2 * dims.s3) + (ulong)h * dims.s3;
}

/* ---- flash path ----------------------------------------------------------------------------- */
/* Rows are held as ATT_V vectors of 16 floats (CLT_ATTN_HD is a multiple of 16), so that the
 * arithmetic over a row's columns is vector arithmetic: a CPU compiler vectorises it (the
 * work-item loop around it, holding inner loops, it does not), a GPU's runs it as scalars. */
#define ATT_V (ATT_HD / 16)

/* The (b, h) pair and first row of a flash kernel's work-group: groups are (b, h)-major, then
 * tiles of get_local_size(0) rows over T. */
static inline void clt_att_group(uint4 dims, ulong *b, uint *h, uint *r0)
{
    const uint lsz = get_local_size(0), tiles = (dims.s1 + lsz - 1) / lsz;
    const ulong g = get_group_id(0), bh = g / tiles;
    *b = bh / dims.s2;
    *h = (uint)(bh % dims.s2);
    *r0 = (uint)(g % tiles) * lsz;
}

/* The HD elements of qkv from element e on, times sa, into dst (zeros beyond HD, and everywhere
 * when !in); likewise of dy. */
static inline void clt_att_row_x(float16 *dst, const global X_T *x, ulong e, uint HD, bool in,
                                 float sa)
{
    float t[ATT_HD];
    for (uint c = 0; c < ATT_HD; c++)
        t[c] = in && c < HD ? CLT_LOAD(X_DTYPE, x, e + c) * sa : 0.0f;
    for (uint v = 0; v < ATT_V; v++)
        dst[v] = vload16(v, t);
}

static inline void clt_att_row_g(float16 *dst, const global G_T *g, ulong e, uint HD, bool in)
{
    float t[ATT_HD];
    for (uint c = 0; c < ATT_HD; c++)
        t[c] = in && c < HD ? CLT_LOAD(G_DTYPE, g, e + c) : 0.0f;
    for (uint v = 0; v < ATT_V; v++)
        dst[v] = vload16(v, t);
}

/* The inverse of the two above: src times s into the HD elements from e on, of x (X_DTYPE) or
 * of g (G_DTYPE); the bucket's columns beyond HD are not stored. */
static inline void clt_att_put_x(global X_T *x, ulong e, const float16 *src, uint HD, float s)
{
    float t[ATT_HD];
    for (uint v = 0; v < ATT_V; v++)
        vstore16(src[v] * s, v, t);
    for (uint c = 0; c < ATT_HD; c++)
        if (c < HD) CLT_STORE(X_DTYPE, x, e + c, t[c]);
}

static inline void clt_att_put_g(global G_T *g, ulong e, const float16 *src, uint HD, float s)
{
    float t[ATT_HD];
    for (uint v = 0; v < ATT_V; v++)
        vstore16(src[v] * s, v, t);
    for (uint c = 0; c < ATT_HD; c++)
        if (c < HD) CLT_STORE(G_DTYPE, g, e + c, t[c]);
}

/* Stages rows [j0, j0 + n) of parts pa and pb (q, k, v: 0, 1, 2) of head h of sample b into
 * ta and tb (CLT_ATTN_BK rows of ATT_V vectors, zeros beyond n rows and HD columns), pa's scaled
 * by sa. Called by every work-item; the caller puts the barriers around it. */
static inline void clt_att_stage(local float16 *ta, local float16 *tb, const global X_T *qkv,
                                 ulong q_off, uint4 dims, ulong b, uint h, uint j0, uint n,
                                 uint pa, uint pb, float sa)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0), HD = dims.s3;
    local float *fa = (local float *)ta, *fb = (local float *)tb;
    for (uint x = lid; x < ATT_BK * ATT_HD; x += lsz) {
        const uint r = x / ATT_HD, c = x % ATT_HD;
        float a = 0.0f, v = 0.0f;
        if (r < n && c < HD) {
            a = CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, j0 + r, pa, h) + c) * sa;
            v = CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, j0 + r, pb, h) + c);
        }
        fa[x] = a;
        fb[x] = v;
    }
}

/* a . b over a row: a vector fma chain in column order, then the 16 lanes added by a fixed
 * tree. Every flash kernel computes a score this way (fma is symmetric in its factors). */
static inline float clt_att_dot(const float16 *a, const local float16 *b)
{
    float16 acc = a[0] * b[0];
    for (uint v = 1; v < ATT_V; v++)
        acc = fma(a[v], b[v], acc);
    const float8 s8 = acc.lo + acc.hi;
    const float4 s4 = s8.lo + s8.hi;
    const float2 s2 = s4.lo + s4.hi;
    return s2.x + s2.y;
}

#if !CLT_ATTN_TILED /* the rows variant's kernels */
/* One work-item per query row i (rows >= T idle but take part in the barriers): the online
 * softmax over key tiles j0 = 0, BK, ... (up to the group's last row with the mask), then
 * y_i = o / l and lse_i = m + log l. */
kernel void attention_forward(global X_T *y, ulong y_off, global float *lse, ulong l_off,
                              const global X_T *qkv, ulong q_off, uint4 dims, float scale,
                              int flags)
{
    local float16 kt[ATT_BK * ATT_V], vt[ATT_BK * ATT_V];
    const uint T = dims.s1, HD = dims.s3, lid = get_local_id(0), lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, i0;
    clt_att_group(dims, &b, &h, &i0);
    const uint i = i0 + lid;
    const bool row = i < T;
    float16 q[ATT_V], o[ATT_V];
    clt_att_row_x(q, qkv, q_off + clt_att_qkv(dims, b, i, 0, h), HD, row, scale);
    for (uint v = 0; v < ATT_V; v++)
        o[v] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const uint jend = causal ? min(T, i0 + lsz) : T; /* the key rows any row of the group sees */
    for (uint j0 = 0; j0 < jend; j0 += ATT_BK) {
        const uint n = min((uint)ATT_BK, jend - j0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile's reads are done */
        clt_att_stage(kt, vt, qkv, q_off, dims, b, h, j0, n, 1, 2, 1.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!row) continue; /* past T: only the barriers */
        float s[ATT_BK], mt = m;
        for (uint r = 0; r < n; r++) {
            /* masked scores are -inf: they add exp(-inf) = 0 below */
            s[r] = causal && j0 + r > i ? -INFINITY : clt_att_dot(q, kt + r * ATT_V);
            mt = fmax(mt, s[r]);
        }
        /* the first tile always holds key 0, which no row masks: mt is finite from there on */
        const float a = m == -INFINITY ? 0.0f : exp(m - mt);
        l *= a;
        for (uint v = 0; v < ATT_V; v++)
            o[v] *= a;
        for (uint r = 0; r < n; r++) {
            const float p = exp(s[r] - mt);
            l += p;
            for (uint v = 0; v < ATT_V; v++)
                o[v] = fma((float16)p, vt[r * ATT_V + v], o[v]);
        }
        m = mt;
    }
    if (row) {
        const float inv = 1.0f / l;
        clt_att_put_x(y, y_off + clt_att_y(dims, b, i, h), o, HD, inv);
        lse[l_off + ((b * dims.s2 + h) * T + i)] = m + log(l);
    }
}

#endif

/* Delta (B, NH, T): Delta_i = sum over head h's columns of dy_i y_i, one work-item per row
 * (b, h, i), n = B NH T of them. Both paths' backward starts here. */
kernel void attention_backward_delta(global float *delta, ulong d_off, const global G_T *dy,
                                     ulong dy_off, const global X_T *y, ulong y_off, uint4 dims)
{
    const ulong r = get_global_id(0), T = dims.s1, n = (ulong)dims.s0 * dims.s2 * T;
    if (r >= n) return;
    const ulong i = r % T, bh = r / T, b = bh / dims.s2;
    const uint h = (uint)(bh % dims.s2);
    const ulong e = clt_att_y(dims, b, i, h);
    float s = 0.0f;
    for (uint c = 0; c < dims.s3; c++)
        s = fma(CLT_LOAD(G_DTYPE, dy, dy_off + e + c), CLT_LOAD(X_DTYPE, y, y_off + e + c), s);
    delta[d_off + r] = s;
}

#if !CLT_ATTN_TILED
/* One work-item per key row j: dv_j = sum_i P_ij dy_i and dk_j = scale sum_i dS_ij q_i with
 * dS_ij = P_ij (dy_i . v_j - Delta_i), over the query tiles (from j's tile on with the mask),
 * staged as scale q and dy with their lse and Delta; written into dqkv's k and v columns. */
kernel void attention_backward_dkv(global G_T *dqkv, ulong dq_off, const global G_T *dy,
                                   ulong dy_off, const global X_T *qkv, ulong q_off,
                                   const global float *lse, ulong l_off,
                                   const global float *delta, ulong d_off, uint4 dims,
                                   float scale, int flags)
{
    local float16 qt[ATT_BK * ATT_V], gt[ATT_BK * ATT_V];
    local float lt[ATT_BK], dt[ATT_BK];
    const uint T = dims.s1, HD = dims.s3, lid = get_local_id(0), lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, j0g;
    clt_att_group(dims, &b, &h, &j0g);
    const uint j = j0g + lid;
    const bool row = j < T;
    const ulong bh = b * dims.s2 + h;
    float16 k[ATT_V], v[ATT_V], dk[ATT_V], dv[ATT_V];
    clt_att_row_x(k, qkv, q_off + clt_att_qkv(dims, b, j, 1, h), HD, row, 1.0f);
    clt_att_row_x(v, qkv, q_off + clt_att_qkv(dims, b, j, 2, h), HD, row, 1.0f);
    for (uint w = 0; w < ATT_V; w++) {
        dk[w] = 0.0f;
        dv[w] = 0.0f;
    }
    local float *fq = (local float *)qt, *fg = (local float *)gt;
    /* with the mask, query rows before the group's first key row see none of its keys */
    for (uint i0 = causal ? j0g / ATT_BK * ATT_BK : 0; i0 < T; i0 += ATT_BK) {
        const uint n = min((uint)ATT_BK, T - i0);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint x = lid; x < ATT_BK * ATT_HD; x += lsz) {
            const uint r = x / ATT_HD, c = x % ATT_HD;
            float a = 0.0f, g = 0.0f;
            if (r < n && c < HD) {
                a = CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, i0 + r, 0, h) + c) * scale;
                g = CLT_LOAD(G_DTYPE, dy, dy_off + clt_att_y(dims, b, i0 + r, h) + c);
            }
            fq[x] = a;
            fg[x] = g;
        }
        for (uint r = lid; r < ATT_BK; r += lsz) {
            lt[r] = r < n ? lse[l_off + bh * T + i0 + r] : 0.0f;
            dt[r] = r < n ? delta[d_off + bh * T + i0 + r] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint r = 0; row && r < n; r++) {
            const local float16 *qr = qt + r * ATT_V, *gr = gt + r * ATT_V;
            const float s = clt_att_dot(k, qr);
            const float p = causal && j > i0 + r ? 0.0f : exp(s - lt[r]);
            const float ds = p * (clt_att_dot(v, gr) - dt[r]);
            for (uint w = 0; w < ATT_V; w++) {
                dv[w] = fma((float16)p, gr[w], dv[w]);
                dk[w] = fma((float16)ds, qr[w], dk[w]);
            }
        }
    }
    if (row) {
        const ulong e = dq_off + clt_att_qkv(dims, b, j, 1, h), D = (ulong)dims.s2 * HD;
        clt_att_put_g(dqkv, e, dk, HD, 1.0f);
        clt_att_put_g(dqkv, e + D, dv, HD, 1.0f);
    }
}

/* One work-item per query row i: dq_i = scale sum_j dS_ij k_j over the key tiles (up to the
 * group's last row with the mask); written into dqkv's q columns. */
kernel void attention_backward_dq(global G_T *dqkv, ulong dq_off, const global G_T *dy,
                                  ulong dy_off, const global X_T *qkv, ulong q_off,
                                  const global float *lse, ulong l_off, const global float *delta,
                                  ulong d_off, uint4 dims, float scale, int flags)
{
    local float16 kt[ATT_BK * ATT_V], vt[ATT_BK * ATT_V];
    const uint T = dims.s1, HD = dims.s3, lid = get_local_id(0), lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, i0;
    clt_att_group(dims, &b, &h, &i0);
    const uint i = i0 + lid;
    const bool row = i < T;
    const ulong bh = b * dims.s2 + h;
    float16 q[ATT_V], g[ATT_V], dq[ATT_V];
    clt_att_row_x(q, qkv, q_off + clt_att_qkv(dims, b, i, 0, h), HD, row, scale);
    clt_att_row_g(g, dy, dy_off + clt_att_y(dims, b, i, h), HD, row);
    for (uint v = 0; v < ATT_V; v++)
        dq[v] = 0.0f;
    const float li = row ? lse[l_off + bh * T + i] : 0.0f,
                di = row ? delta[d_off + bh * T + i] : 0.0f;
    const uint jend = causal ? min(T, i0 + lsz) : T;
    for (uint j0 = 0; j0 < jend; j0 += ATT_BK) {
        const uint n = min((uint)ATT_BK, jend - j0);
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_att_stage(kt, vt, qkv, q_off, dims, b, h, j0, n, 1, 2, 1.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint r = 0; row && r < n; r++) {
            const local float16 *kr = kt + r * ATT_V;
            const float s = clt_att_dot(q, kr);
            const float p = causal && j0 + r > i ? 0.0f : exp(s - li);
            const float ds = p * (clt_att_dot(g, vt + r * ATT_V) - di);
            for (uint v = 0; v < ATT_V; v++)
                dq[v] = fma((float16)ds, kr[v], dq[v]);
        }
    }
    if (row) {
        clt_att_put_g(dqkv, dq_off + clt_att_qkv(dims, b, i, 0, h), dq, HD, scale);
    }
}

#endif

/* ---- flash path, tiled variant (CPUs) ------------------------------------------------------ */
/* A work-item owns ATT_R consecutive rows (query rows; key rows in attention_backward_dkv_tiled)
 * and meets the other side's rows in blocks of ATT_KB, a vector's lanes: a block of scores is
 * ATT_R vectors, each an fma chain over the head's columns of a broadcast element of its row
 * times a row of the other side's block transposed in local memory (xT[c] holds column c of
 * the block's ATT_KB rows): GEMM-like register tiles, no horizontal sums. The products with
 * the block's rows (P v, dS q, ...) run over HD-wide vectors of the rows tile. Which blocks a
 * work-item computes depends only on its own rows, never on the work-group's size. */
#if CLT_ATTN_TILED
#define ATT_KB CLT_ATTN_KB
#define ATT_R CLT_ATTN_R
#define ATT_KV CLT__XCAT(float, ATT_KB)  /* a block's lanes */
#define ATT_KU CLT__XCAT(uint, ATT_KB)
#define ATT_KI CLT__XCAT(int, ATT_KB) /* a comparison's lanes */
#define ATT_KLOAD CLT__XCAT(vload, ATT_KB)
#define ATT_KSTORE CLT__XCAT(vstore, ATT_KB)

constant uint clt_att_iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* The (b, h) pair and first row of a tiled kernel's work-group: groups are (b, h)-major, then
 * tiles of get_local_size(0) ATT_R rows over T. */
static inline void clt_att_tgroup(uint4 dims, ulong *b, uint *h, uint *r0)
{
    const uint rows = get_local_size(0) * ATT_R, tiles = (dims.s1 + rows - 1) / rows;
    const ulong g = get_group_id(0), bh = g / tiles;
    *b = bh / dims.s2;
    *h = (uint)(bh % dims.s2);
    *r0 = (uint)(g % tiles) * rows;
}

/* Rows r0 .. r0 + ATT_R of part p of qkv (head h of sample b) times sa into dst, zeros beyond
 * HD columns and T rows. */
static inline void clt_att_trows_x(float dst[ATT_R][ATT_HD], const global X_T *qkv, ulong q_off,
                                   uint4 dims, ulong b, uint h, uint r0, uint p, float sa)
{
    for (uint r = 0; r < ATT_R; r++) {
        const bool in = r0 + r < dims.s1;
        const ulong e = q_off + (in ? clt_att_qkv(dims, b, r0 + r, p, h) : 0);
        for (uint c = 0; c < ATT_HD; c++)
            dst[r][c] = in && c < dims.s3 ? CLT_LOAD(X_DTYPE, qkv, e + c) * sa : 0.0f;
    }
}

static inline void clt_att_trows_g(float dst[ATT_R][ATT_HD], const global G_T *dy, ulong dy_off,
                                   uint4 dims, ulong b, uint h, uint r0)
{
    for (uint r = 0; r < ATT_R; r++) {
        const bool in = r0 + r < dims.s1;
        const ulong e = dy_off + (in ? clt_att_y(dims, b, r0 + r, h) : 0);
        for (uint c = 0; c < ATT_HD; c++)
            dst[r][c] = in && c < dims.s3 ? CLT_LOAD(G_DTYPE, dy, e + c) : 0.0f;
    }
}

/* Stages rows [j0, j0 + n) of part p of qkv (times sa) into a block, zeros beyond n rows and HD
 * columns: transposed into ft (ATT_HD columns of ATT_KB lanes) when `tr`, as rows into fr
 * (ATT_KB rows of ATT_HD) when `rw`. A work-item takes whole rows: one address computation per
 * row, a plain loop over its columns. Called by every work-item; the caller puts the barriers
 * around it. */
static inline void clt_att_tstage_x(local float *ft, local float *fr, bool tr, bool rw,
                                    const global X_T *qkv, ulong q_off, uint4 dims, ulong b,
                                    uint h, uint j0, uint n, uint p, float sa)
{
    const uint HD = dims.s3;
    for (uint r = get_local_id(0); r < ATT_KB; r += get_local_size(0)) {
        const global X_T *x = qkv + q_off + (r < n ? clt_att_qkv(dims, b, j0 + r, p, h) : 0);
        for (uint c = 0; c < ATT_HD; c++) {
            const float a = r < n && c < HD ? CLT_LOAD(X_DTYPE, x, c) * sa : 0.0f;
            if (tr) ft[c * ATT_KB + r] = a;
            if (rw) fr[r * ATT_HD + c] = a;
        }
    }
}

static inline void clt_att_tstage_g(local float *ft, local float *fr, const global G_T *dy,
                                    ulong dy_off, uint4 dims, ulong b, uint h, uint j0, uint n)
{
    const uint HD = dims.s3;
    for (uint r = get_local_id(0); r < ATT_KB; r += get_local_size(0)) {
        const global G_T *g = dy + dy_off + (r < n ? clt_att_y(dims, b, j0 + r, h) : 0);
        for (uint c = 0; c < ATT_HD; c++) {
            const float a = r < n && c < HD ? CLT_LOAD(G_DTYPE, g, c) : 0.0f;
            ft[c * ATT_KB + r] = a;
            fr[r * ATT_HD + c] = a;
        }
    }
}

/* s[r] = the ATT_R rows of a times the block xt, lane by lane: an fma chain in column order
 * from 0. Every tiled kernel computes a score this way, a lane of s being q_i . k_j whichever
 * side the row is on (fma is symmetric in its factors), so the backward's exp(S - lse)
 * recomputes the forward's P bit for bit. */
/* The loops over a work-item's rows are unrolled so that their vectors stay in registers (PoCL
 * kept a rolled loop's accumulators in memory: a load and a store around each fma). */
static inline void clt_att_tscores(ATT_KV s[ATT_R], const float a[ATT_R][ATT_HD],
                                   const local ATT_KV *xt, uint HD)
{
    ATT_KV t[ATT_R];
#pragma unroll
    for (uint r = 0; r < ATT_R; r++)
        t[r] = 0.0f;
    for (uint c = 0; c < HD; c++) {
        const ATT_KV x = xt[c];
#pragma unroll
        for (uint r = 0; r < ATT_R; r++)
            t[r] = fma((ATT_KV)a[r][c], x, t[r]);
    }
#pragma unroll
    for (uint r = 0; r < ATT_R; r++)
        s[r] = t[r];
}

/* acc[r] += sum over the block's lanes j of w[r][j] times row j of xr, in lane order. */
static inline void clt_att_tacc(float16 acc[ATT_R][ATT_V], const ATT_KV w[ATT_R],
                                const local float16 *xr)
{
    float f[ATT_R][ATT_KB];
#pragma unroll
    for (uint r = 0; r < ATT_R; r++)
        ATT_KSTORE(w[r], 0, f[r]);
    for (uint v = 0; v < ATT_V; v++) {
        float16 t[ATT_R];
#pragma unroll
        for (uint r = 0; r < ATT_R; r++)
            t[r] = acc[r][v];
#pragma unroll
        for (uint j = 0; j < ATT_KB; j++) {
            const float16 x = xr[j * ATT_V + v];
#pragma unroll
            for (uint r = 0; r < ATT_R; r++)
                t[r] = fma((float16)f[r][j], x, t[r]);
        }
#pragma unroll
        for (uint r = 0; r < ATT_R; r++)
            acc[r][v] = t[r];
    }
}

/* The lanes of a block past `last` (keys past a query row's last visible key, or queries
 * before a key row's first): lane j stands for row j0 + j. */
static inline ATT_KU clt_att_tlanes(uint j0)
{
    return (ATT_KU)j0 + ATT_KLOAD(0, clt_att_iota);
}

static inline float clt_att_thmax(ATT_KV v)
{
#if ATT_KB == 16
    const float8 a = fmax(v.lo, v.hi);
    const float4 c = fmax(a.lo, a.hi);
#elif ATT_KB == 8
    const float4 c = fmax(v.lo, v.hi);
#else
    const float4 c = v;
#endif
    const float2 d = fmax(c.lo, c.hi);
    return fmax(d.x, d.y);
}

static inline float clt_att_thsum(ATT_KV v)
{
#if ATT_KB == 16
    const float8 a = v.lo + v.hi;
    const float4 c = a.lo + a.hi;
#elif ATT_KB == 8
    const float4 c = v.lo + v.hi;
#else
    const float4 c = v;
#endif
    const float2 d = c.lo + c.hi;
    return d.x + d.y;
}

/* Rows i of a work-item's ATT_R: the online softmax over key blocks j0 = 0, KB, ... up to its
 * last row with the mask (the group stages up to its own last row), then y_i = o / l and
 * lse_i = m + log l; l is kept per lane and added by a fixed tree at the end. */
kernel void attention_forward_tiled(global X_T *y, ulong y_off, global float *lse, ulong l_off,
                                    const global X_T *qkv, ulong q_off, uint4 dims, float scale,
                                    int flags)
{
    local ATT_KV kt[ATT_HD];
    local float16 vr[ATT_KB * ATT_V];
    local float *fk = (local float *)kt, *fv = (local float *)vr;
    const uint T = dims.s1, HD = dims.s3, lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, i0;
    clt_att_tgroup(dims, &b, &h, &i0);
    const uint ir = i0 + get_local_id(0) * ATT_R; /* this work-item's first row */
    float q[ATT_R][ATT_HD], m[ATT_R];
    float16 o[ATT_R][ATT_V];
    ATT_KV l[ATT_R];
    clt_att_trows_x(q, qkv, q_off, dims, b, h, ir, 0, scale);
    for (uint r = 0; r < ATT_R; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        for (uint v = 0; v < ATT_V; v++)
            o[r][v] = 0.0f;
    }
    const uint jend = causal ? min(T, i0 + lsz * ATT_R) : T; /* the keys any row of the group sees */
    const uint jown = causal ? min(T, ir + ATT_R) : T;      /* those this work-item's rows see */
    for (uint j0 = 0; j0 < jend; j0 += ATT_KB) {
        const uint n = min((uint)ATT_KB, jend - j0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block's reads are done */
        clt_att_tstage_x(fk, fv, true, false, qkv, q_off, dims, b, h, j0, n, 1, 1.0f);
        clt_att_tstage_x(fk, fv, false, true, qkv, q_off, dims, b, h, j0, n, 2, 1.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (ir >= T || j0 >= jown) continue; /* only the barriers */
        ATT_KV s[ATT_R];
        clt_att_tscores(s, q, kt, HD);
        const ATT_KU keys = clt_att_tlanes(j0);
        for (uint r = 0; r < ATT_R; r++) {
            /* keys past T, or after row i with the mask, are -inf: exp(-inf) = 0 below */
            const uint last = causal ? min(ir + r, T - 1) : T - 1;
            s[r] = select(s[r], (ATT_KV)(-INFINITY), keys > (ATT_KU)last);
            /* the first block holds key 0, which no row masks: mt is finite from there on */
            const float mt = fmax(m[r], clt_att_thmax(s[r]));
            const float a = m[r] == -INFINITY ? 0.0f : exp(m[r] - mt);
            s[r] = exp(s[r] - mt);
            l[r] = fma(l[r], (ATT_KV)a, s[r]);
            for (uint v = 0; v < ATT_V; v++)
                o[r][v] *= a;
            m[r] = mt;
        }
        clt_att_tacc(o, s, vr);
    }
    for (uint r = 0; r < ATT_R; r++) {
        const uint i = ir + r;
        if (i >= T) break;
        const float ls = clt_att_thsum(l[r]), inv = 1.0f / ls;
        clt_att_put_x(y, y_off + clt_att_y(dims, b, i, h), o[r], HD, inv);
        lse[l_off + ((b * dims.s2 + h) * T + i)] = m[r] + log(ls);
    }
}

/* Key rows j of a work-item's ATT_R: dv_j = sum_i P_ij dy_i and dk_j = scale sum_i dS_ij q_i,
 * dS_ij = P_ij (dy_i . v_j - Delta_i), over the query blocks from the one holding its first
 * row on with the mask (the group stages from its own first row's block), staged as scale q and
 * dy (transposed for S^T and dP^T, as rows for the sums) with their lse and Delta. */
kernel void attention_backward_dkv_tiled(global G_T *dqkv, ulong dq_off, const global G_T *dy,
                                         ulong dy_off, const global X_T *qkv, ulong q_off,
                                         const global float *lse, ulong l_off,
                                         const global float *delta, ulong d_off, uint4 dims,
                                         float scale, int flags)
{
    local ATT_KV qt[ATT_HD], gt[ATT_HD];
    local float16 qr[ATT_KB * ATT_V], gr[ATT_KB * ATT_V];
    local float lt[ATT_KB], dt[ATT_KB];
    const uint T = dims.s1, HD = dims.s3, lid = get_local_id(0), lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, j0g;
    clt_att_tgroup(dims, &b, &h, &j0g);
    const uint jr = j0g + lid * ATT_R;
    const ulong bh = b * dims.s2 + h;
    float k[ATT_R][ATT_HD], v[ATT_R][ATT_HD];
    float16 dk[ATT_R][ATT_V], dv[ATT_R][ATT_V];
    clt_att_trows_x(k, qkv, q_off, dims, b, h, jr, 1, 1.0f);
    clt_att_trows_x(v, qkv, q_off, dims, b, h, jr, 2, 1.0f);
    for (uint r = 0; r < ATT_R; r++)
        for (uint w = 0; w < ATT_V; w++) {
            dk[r][w] = 0.0f;
            dv[r][w] = 0.0f;
        }
    for (uint i0 = causal ? j0g / ATT_KB * ATT_KB : 0; i0 < T; i0 += ATT_KB) {
        const uint n = min((uint)ATT_KB, T - i0);
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_att_tstage_x((local float *)qt, (local float *)qr, true, true, qkv, q_off, dims, b,
                         h, i0, n, 0, scale);
        clt_att_tstage_g((local float *)gt, (local float *)gr, dy, dy_off, dims, b, h, i0, n);
        for (uint r = lid; r < ATT_KB; r += lsz) {
            lt[r] = r < n ? lse[l_off + bh * T + i0 + r] : 0.0f;
            dt[r] = r < n ? delta[d_off + bh * T + i0 + r] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (jr >= T || (causal && i0 + ATT_KB <= jr)) continue; /* masked for all its rows */
        ATT_KV s[ATT_R], dp[ATT_R];
        clt_att_tscores(s, k, qt, HD);
        clt_att_tscores(dp, v, gt, HD);
        const ATT_KV lv = ATT_KLOAD(0, lt), dl = ATT_KLOAD(0, dt);
        const ATT_KU rows = clt_att_tlanes(i0);
        for (uint r = 0; r < ATT_R; r++) {
            /* queries past T, or before key row j with the mask, have P = 0 */
            const ATT_KI out = rows >= (ATT_KU)T;
            const ATT_KI hid = causal ? rows < (ATT_KU)(jr + r) : (ATT_KI)0;
            s[r] = select(exp(s[r] - lv), (ATT_KV)0.0f, out | hid);
            dp[r] = s[r] * (dp[r] - dl);
        }
        clt_att_tacc(dv, s, gr);
        clt_att_tacc(dk, dp, qr);
    }
    const ulong D = (ulong)dims.s2 * HD;
    for (uint r = 0; r < ATT_R; r++) {
        const uint j = jr + r;
        if (j >= T) break;
        const ulong e = dq_off + clt_att_qkv(dims, b, j, 1, h);
        clt_att_put_g(dqkv, e, dk[r], HD, 1.0f);
        clt_att_put_g(dqkv, e + D, dv[r], HD, 1.0f);
    }
}

/* Query rows i of a work-item's ATT_R: dq_i = scale sum_j dS_ij k_j over the key blocks up to
 * its last row with the mask, staged as k (transposed for S, as rows for the sum) and v
 * (transposed for dP). */
kernel void attention_backward_dq_tiled(global G_T *dqkv, ulong dq_off, const global G_T *dy,
                                        ulong dy_off, const global X_T *qkv, ulong q_off,
                                        const global float *lse, ulong l_off,
                                        const global float *delta, ulong d_off, uint4 dims,
                                        float scale, int flags)
{
    local ATT_KV kt[ATT_HD], vt[ATT_HD];
    local float16 kr[ATT_KB * ATT_V];
    const uint T = dims.s1, HD = dims.s3, lsz = get_local_size(0);
    const bool causal = (flags & CLT_ATTN_CAUSAL) != 0;
    ulong b;
    uint h, i0;
    clt_att_tgroup(dims, &b, &h, &i0);
    const uint ir = i0 + get_local_id(0) * ATT_R;
    const ulong bh = b * dims.s2 + h;
    float q[ATT_R][ATT_HD], g[ATT_R][ATT_HD], li[ATT_R], di[ATT_R];
    float16 dq[ATT_R][ATT_V];
    clt_att_trows_x(q, qkv, q_off, dims, b, h, ir, 0, scale);
    clt_att_trows_g(g, dy, dy_off, dims, b, h, ir);
    for (uint r = 0; r < ATT_R; r++) {
        const bool in = ir + r < T;
        li[r] = in ? lse[l_off + bh * T + ir + r] : 0.0f;
        di[r] = in ? delta[d_off + bh * T + ir + r] : 0.0f;
        for (uint w = 0; w < ATT_V; w++)
            dq[r][w] = 0.0f;
    }
    const uint jend = causal ? min(T, i0 + lsz * ATT_R) : T;
    const uint jown = causal ? min(T, ir + ATT_R) : T;
    for (uint j0 = 0; j0 < jend; j0 += ATT_KB) {
        const uint n = min((uint)ATT_KB, jend - j0);
        barrier(CLK_LOCAL_MEM_FENCE);
        clt_att_tstage_x((local float *)kt, (local float *)kr, true, true, qkv, q_off, dims, b,
                         h, j0, n, 1, 1.0f);
        clt_att_tstage_x((local float *)vt, (local float *)kr, true, false, qkv, q_off, dims, b,
                         h, j0, n, 2, 1.0f);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (ir >= T || j0 >= jown) continue;
        ATT_KV s[ATT_R], dp[ATT_R];
        clt_att_tscores(s, q, kt, HD);
        clt_att_tscores(dp, g, vt, HD);
        const ATT_KU keys = clt_att_tlanes(j0);
        for (uint r = 0; r < ATT_R; r++) {
            const uint last = causal ? min(ir + r, T - 1) : T - 1;
            s[r] = select(exp(s[r] - li[r]), (ATT_KV)0.0f, keys > (ATT_KU)last);
            dp[r] = s[r] * (dp[r] - di[r]);
        }
        clt_att_tacc(dq, dp, kr);
    }
    for (uint r = 0; r < ATT_R; r++) {
        const uint i = ir + r;
        if (i >= T) break;
        clt_att_put_g(dqkv, dq_off + clt_att_qkv(dims, b, i, 0, h), dq[r], HD, scale);
    }
}

#endif /* CLT_ATTN_TILED */

/* ---- reference path: ws (B, NH, T, T) holds S, then P, then dS -------------------------- */

/* q_i . k_j of head h (plain sum in column order), from the two rows' first elements. */
static inline float clt_att_ref_dot(const global X_T *qkv, ulong qi, ulong kj, uint HD)
{
    float s = 0.0f;
    for (uint c = 0; c < HD; c++)
        s += CLT_LOAD(X_DTYPE, qkv, qi + c) * CLT_LOAD(X_DTYPE, qkv, kj + c);
    return s;
}

/* The (b, h, i, j) of ws's element e. */
static inline void clt_att_ref_ij(uint4 dims, ulong e, ulong *b, uint *h, ulong *i, ulong *j)
{
    const ulong T = dims.s1, bh = e / (T * T);
    *j = e % T;
    *i = e / T % T;
    *b = bh / dims.s2;
    *h = (uint)(bh % dims.s2);
}

/* ws = S: scale q_i . k_j, or -inf where masked; one work-item per element (B NH T T). */
kernel void attention_ref_scores(global float *ws, ulong w_off, const global X_T *qkv,
                                 ulong q_off, uint4 dims, float scale, int flags)
{
    const ulong e = get_global_id(0), T = dims.s1;
    if (e >= (ulong)dims.s0 * dims.s2 * T * T) return;
    ulong b, i, j;
    uint h;
    clt_att_ref_ij(dims, e, &b, &h, &i, &j);
    float s = -INFINITY;
    if (!(flags & CLT_ATTN_CAUSAL) || j <= i)
        s = scale * clt_att_ref_dot(qkv, q_off + clt_att_qkv(dims, b, i, 0, h),
                                    q_off + clt_att_qkv(dims, b, j, 1, h), dims.s3);
    ws[w_off + e] = s;
}

/* Each row of ws (one work-item per row, B NH T): P = exp(S - m) / l in place, lse = m + log l
 * with m the row's maximum and l = sum exp(S - m). */
kernel void attention_ref_softmax(global float *ws, ulong w_off, global float *lse, ulong l_off,
                                  uint4 dims)
{
    const ulong r = get_global_id(0), T = dims.s1;
    if (r >= (ulong)dims.s0 * dims.s2 * T) return;
    global float *s = ws + w_off + r * T;
    float m = -INFINITY, l = 0.0f;
    for (ulong j = 0; j < T; j++)
        m = fmax(m, s[j]);
    for (ulong j = 0; j < T; j++)
        l += exp(s[j] - m);
    for (ulong j = 0; j < T; j++)
        s[j] = exp(s[j] - m) / l;
    lse[l_off + r] = m + log(l);
}

/* y = P v: one work-item per element of y (B, T, D). */
kernel void attention_ref_out(global X_T *y, ulong y_off, const global float *ws, ulong w_off,
                              const global X_T *qkv, ulong q_off, uint4 dims)
{
    const ulong e = get_global_id(0), T = dims.s1, HD = dims.s3, D = (ulong)dims.s2 * HD;
    if (e >= (ulong)dims.s0 * T * D) return;
    const ulong c = e % HD, i = e / D % T, b = e / (T * D);
    const uint h = (uint)(e % D / HD);
    const global float *p = ws + w_off + ((b * dims.s2 + h) * T + i) * T;
    float s = 0.0f;
    for (ulong j = 0; j < T; j++)
        s += p[j] * CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, j, 2, h) + c);
    CLT_STORE(X_DTYPE, y, y_off + e, s);
}

/* ws = P recomputed from the saved lse: exp(scale q_i . k_j - lse_i), 0 where masked. */
kernel void attention_ref_probs(global float *ws, ulong w_off, const global X_T *qkv,
                                ulong q_off, const global float *lse, ulong l_off, uint4 dims,
                                float scale, int flags)
{
    const ulong e = get_global_id(0), T = dims.s1;
    if (e >= (ulong)dims.s0 * dims.s2 * T * T) return;
    ulong b, i, j;
    uint h;
    clt_att_ref_ij(dims, e, &b, &h, &i, &j);
    float p = 0.0f;
    if (!(flags & CLT_ATTN_CAUSAL) || j <= i)
        p = exp(scale * clt_att_ref_dot(qkv, q_off + clt_att_qkv(dims, b, i, 0, h),
                                        q_off + clt_att_qkv(dims, b, j, 1, h), dims.s3) -
                lse[l_off + e / T]);
    ws[w_off + e] = p;
}

/* dv_j = sum_i P_ij dy_i into dqkv's v columns: one work-item per element (B, T, D). */
kernel void attention_ref_dv(global G_T *dqkv, ulong dq_off, const global float *ws, ulong w_off,
                             const global G_T *dy, ulong dy_off, uint4 dims)
{
    const ulong e = get_global_id(0), T = dims.s1, HD = dims.s3, D = (ulong)dims.s2 * HD;
    if (e >= (ulong)dims.s0 * T * D) return;
    const ulong c = e % HD, j = e / D % T, b = e / (T * D);
    const uint h = (uint)(e % D / HD);
    const global float *p = ws + w_off + (b * dims.s2 + h) * T * T + j;
    float s = 0.0f;
    for (ulong i = 0; i < T; i++)
        s += p[i * T] * CLT_LOAD(G_DTYPE, dy, dy_off + clt_att_y(dims, b, i, h) + c);
    CLT_STORE(G_DTYPE, dqkv, dq_off + clt_att_qkv(dims, b, j, 2, h) + c, s);
}

/* ws = scale dS = scale P (dy_i . v_j - Delta_i) in place (P = 0 where masked). */
kernel void attention_ref_dscores(global float *ws, ulong w_off, const global float *delta,
                                  ulong d_off, const global G_T *dy, ulong dy_off,
                                  const global X_T *qkv, ulong q_off, uint4 dims, float scale)
{
    const ulong e = get_global_id(0), T = dims.s1;
    if (e >= (ulong)dims.s0 * dims.s2 * T * T) return;
    ulong b, i, j;
    uint h;
    clt_att_ref_ij(dims, e, &b, &h, &i, &j);
    const ulong gi = dy_off + clt_att_y(dims, b, i, h), vj = q_off + clt_att_qkv(dims, b, j, 2, h);
    float dp = 0.0f;
    for (uint c = 0; c < dims.s3; c++)
        dp += CLT_LOAD(G_DTYPE, dy, gi + c) * CLT_LOAD(X_DTYPE, qkv, vj + c);
    ws[w_off + e] = scale * ws[w_off + e] * (dp - delta[d_off + e / T]);
}

/* dq_i = sum_j ws_ij k_j and dk_j = sum_i ws_ij q_i (ws = scale dS) into dqkv's q and k
 * columns: one work-item per element of each, 2 B T D, the dq elements first. */
kernel void attention_ref_dqk(global G_T *dqkv, ulong dq_off, const global float *ws, ulong w_off,
                              const global X_T *qkv, ulong q_off, uint4 dims)
{
    const ulong e2 = get_global_id(0), T = dims.s1, HD = dims.s3, D = (ulong)dims.s2 * HD,
                n = (ulong)dims.s0 * T * D;
    if (e2 >= 2 * n) return;
    const uint part = e2 < n ? 0 : 1; /* the gradient of q or of k */
    const ulong e = e2 - part * n, c = e % HD, t = e / D % T, b = e / (T * D);
    const uint h = (uint)(e % D / HD);
    const global float *w = ws + w_off + (b * dims.s2 + h) * T * T;
    float s = 0.0f;
    for (ulong u = 0; u < T; u++) {
        /* dq: row t of ws times k_u; dk: column t of ws times q_u */
        const float wv = part == 0 ? w[t * T + u] : w[u * T + t];
        s += wv * CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, u, 1 - part, h) + c);
    }
    CLT_STORE(G_DTYPE, dqkv, dq_off + clt_att_qkv(dims, b, t, part, h) + c, s);
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* One work-group per (b, h), at most CLT_ATTN_DECODE_WG work-items: y_pos = softmax(s) v with
 * s_j = (scale q_pos) . k_j over the keys j <= pos (n = pos + 1 of them), the scores kept in
 * ws (B, NH, T) between the three phases: the scores and each work-item's maximum (keys
 * strided over the work-items), exp(s_j - max) and each one's sum (the same keys: no other
 * work-item touches them), then the output columns strided over the work-items, each a sum in
 * key order. The group's maximum and sum are its work-items' partials added in lid order: the
 * same bits for a given work-group size. */
kernel void attention_decode(global X_T *y, ulong y_off, global float *ws, ulong w_off,
                             const global X_T *qkv, ulong q_off, uint4 dims, uint pos,
                             float scale)
{
    local float part[CLT_ATTN_DECODE_WG];
    const uint lid = get_local_id(0), lsz = get_local_size(0), HD = dims.s3, n = pos + 1;
    const ulong bh = get_group_id(0), b = bh / dims.s2;
    const uint h = (uint)(bh % dims.s2);
    global float *s = ws + w_off + bh * dims.s1;
    const ulong qo = q_off + clt_att_qkv(dims, b, pos, 0, h);
    float m = -INFINITY;
    for (uint j = lid; j < n; j += lsz) {
        const ulong ko = q_off + clt_att_qkv(dims, b, j, 1, h);
        float d = 0.0f;
        for (uint c = 0; c < HD; c++)
            d = fma(CLT_LOAD(X_DTYPE, qkv, qo + c) * scale, CLT_LOAD(X_DTYPE, qkv, ko + c), d);
        s[j] = d;
        m = fmax(m, d);
    }
    part[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    float mx = -INFINITY;
    for (uint i = 0; i < lsz; i++)
        mx = fmax(mx, part[i]);
    barrier(CLK_LOCAL_MEM_FENCE); /* every read of part is done before it is written again */
    float l = 0.0f;
    for (uint j = lid; j < n; j += lsz) {
        const float e = exp(s[j] - mx);
        s[j] = e;
        l += e;
    }
    part[lid] = l;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE); /* part and every s_j written */
    float sum = 0.0f;
    for (uint i = 0; i < lsz; i++)
        sum += part[i];
    const float inv = 1.0f / sum;
    for (uint c = lid; c < HD; c += lsz) {
        float o = 0.0f;
        for (uint j = 0; j < n; j++)
            o = fma(s[j], CLT_LOAD(X_DTYPE, qkv, q_off + clt_att_qkv(dims, b, j, 2, h) + c), o);
        CLT_STORE(X_DTYPE, y, y_off + b * ((ulong)dims.s2 * HD) + (ulong)h * HD + c, o * inv);
    }
}
