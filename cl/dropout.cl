/* Inverted dropout over one storage dtype (-DX_DTYPE=code, default f32; arithmetic in fp32),
 * compiled after cl/rng.cl (program "rng,dropout"). Element i is kept when
 * clt_rng_uniform(seed, stream, i) >= p and then scaled by `scale` = 1 / (1 - p); the mask is
 * the host's rng.h bit for bit. One work-item per Philox block of four elements, so every
 * generated word is used. In place (y = x, dx = dy) is allowed. */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* y[i] = keep(i) ? scale * x[i] : 0 for the four elements of block get_global_id(0). */
static inline void clt_dropout_block(global X_T *y, const global X_T *x, ulong n, float p, float scale,
                              ulong seed, ulong stream)
{
    const ulong block = get_global_id(0), i0 = block * 4;
    if (i0 >= n) return;
    /* clt_rng_u32(seed, stream, i0 + k) is word k of this block (rng.h's layout) */
    const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
    const uint4 ctr = (uint4)((uint)block, (uint)(block >> 32), (uint)stream, (uint)(stream >> 32));
    const uint4 r = clt_philox4x32(key, ctr);
    const uint w[4] = {r.x, r.y, r.z, r.w};
    for (uint k = 0; k < 4 && i0 + k < n; k++) {
        const float u = (float)(w[k] >> 8) * 0x1.0p-24f; /* clt_rng_uniform */
        const float v = CLT_LOAD(X_DTYPE, x, i0 + k);
        CLT_STORE(X_DTYPE, y, i0 + k, u >= p ? scale * v : 0.0f);
    }
}

/* y = dropout(x); n elements */
kernel void dropout_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                            float p, float scale, ulong seed, ulong stream)
{
    clt_dropout_block(y + y_off, x + x_off, n, p, scale, seed, stream);
}

/* dx = dy through the forward's mask (same seed, stream, p) */
kernel void dropout_backward(global X_T *dx, ulong dx_off, const global X_T *dy, ulong dy_off,
                             ulong n, float p, float scale, ulong seed, ulong stream)
{
    clt_dropout_block(dx + dx_off, dy + dy_off, n, p, scale, seed, stream);
}
