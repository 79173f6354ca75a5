/* Inverted dropout over one storage dtype (-DX_DTYPE=code, default f32; arithmetic in fp32),
 * compiled after cl/rng.cl (program "rng,dropout"). Element i is kept when
 * clt_rng_uniform(seed, stream, i) >= p and then scaled by `scale` = 1 / (1 - p); the mask is
 * the host's rng.h bit for bit. One work-item per run of CLT_DROPOUT_RUN elements (eight Philox
 * blocks of four), so every generated word is used. In place (y = x, dx = dy) is allowed. */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* Eight keep masks' values in element order: words (k0 .. k3) of blocks j0 and j1. */
#define CLT_DROPOUT_WORDS(j0, j1)                                                                  \
    (uint8)(x.j0, y.j0, z.j0, w.j0, x.j1, y.j1, z.j1, w.j1)

/* y[i] = keep(i) ? scale * x[i] : 0 for the CLT_DROPOUT_RUN elements of run get_global_id(0):
 * eight Philox blocks drawn in vector lanes (clt_philox4x32_x8), their words put in element
 * order, and the run loaded, masked and stored eight elements at a time. Only the tensor's
 * last run, when shorter, goes element by element. */
#define CLT_DROPOUT_RUN 32
static inline void clt_dropout_run(global X_T *dst, const global X_T *src, ulong n, float p,
                                   float scale, ulong seed, ulong stream)
{
    const ulong i0 = get_global_id(0) * CLT_DROPOUT_RUN;
    if (i0 >= n) return;
    /* blocks b0 .. b0 + 7 (b0 a multiple of 8: the low word does not carry), rng.h's layout */
    const ulong b0 = i0 / 4;
    uint8 x = (uint)b0 + (uint8)(0, 1, 2, 3, 4, 5, 6, 7), y = (uint)(b0 >> 32),
          z = (uint)stream, w = (uint)(stream >> 32);
    clt_philox4x32_x8((uint2)((uint)seed, (uint)(seed >> 32)), &x, &y, &z, &w);
    const uint8 r[4] = {CLT_DROPOUT_WORDS(s0, s1), CLT_DROPOUT_WORDS(s2, s3),
                        CLT_DROPOUT_WORDS(s4, s5), CLT_DROPOUT_WORDS(s6, s7)};
    if (n - i0 >= CLT_DROPOUT_RUN) {
        for (int m = 0; m < 4; m++) {
            const float8 u = convert_float8(r[m] >> 8) * 0x1.0p-24f; /* clt_rng_uniform */
            const float8 v = CLT_VLOAD(X_DTYPE, 8, src, i0 + 8 * m);
            CLT_VSTORE(X_DTYPE, 8, select((float8)0.0f, scale * v, u >= p), dst, i0 + 8 * m);
        }
        return;
    }
    /* the run's words by element index (not clt_rng_u32 per element: a block per element, and
     * oclgrind miscomputes its pick of the block's word) */
    uint words[CLT_DROPOUT_RUN];
    for (int m = 0; m < 4; m++) vstore8(r[m], m, words);
    for (uint k = 0; k < n - i0; k++) {
        const float u = (float)(words[k] >> 8) * 0x1.0p-24f, v = CLT_LOAD(X_DTYPE, src, i0 + k);
        CLT_STORE(X_DTYPE, dst, i0 + k, u >= p ? scale * v : 0.0f);
    }
}

/* y = dropout(x); n elements */
kernel void dropout_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                            float p, float scale, ulong seed, ulong stream)
{
    clt_dropout_run(y + y_off, x + x_off, n, p, scale, seed, stream);
}

/* dx = dy through the forward's mask (same seed, stream, p) */
kernel void dropout_backward(global X_T *dx, ulong dx_off, const global X_T *dy, ulong dy_off,
                             ulong n, float p, float scale, ulong seed, ulong stream)
{
    clt_dropout_run(dx + dx_off, dy + dy_off, n, p, scale, seed, stream);
}
