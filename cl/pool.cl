/* Pooling over the (H, W) planes of x (B, C, H, W), forward and backward, over one storage dtype
 * (-DX_DTYPE=code, default f32; arithmetic in fp32): the max or the mean of KH x KW windows
 * with strides SH, SW, no padding, floor mode (OH = (H - KH) / SH + 1, OW likewise), as
 * nn.MaxPool2d / nn.AvgPool2d. Backward is a gather: each input element sums, in a fixed
 * order, the gradients of the windows that contain it (overlapping windows included), so there
 * are no atomics and the bits are the same on every run. Max-pool's backward recomputes each
 * window's maximum from the forward input x.
 * One work-item per row: forward per output row (b, c, oh) looping over ow; backward per input
 * row (b, c, h) looping over w (the windows' ranges kept incrementally, no division in the
 * loop), except max-pool with windows that do not overlap (S >= K), whose backward has one
 * work-item per row of windows (b, c, oh) writing the rows of dx they cover (each input in at
 * most one window: one argmax per window instead of one per element). Max-pool with 2x2
 * windows and stride 2 (nn.MaxPool2d(2)) takes a row's windows 8, 4 and 2 at a time in vector
 * lanes (CLT_POOL_MAX2X2, CLT_POOL_GRAD2X2; the same bits as the scalar scans), which CPUs run
 * several times faster than the scalar loops. Tensors arrive as (buffer, offset in elements); n
 * is the number of rows (work-items). */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* a / d and a % d, in 32 bits when a fits (64-bit division is slow on GPUs). */
static inline ulong clt_pool_div(ulong a, uint d, uint *rem)
{
    if (a <= 0xffffffffu) {
        const uint a32 = (uint)a;
        *rem = a32 % d;
        return a32 / d;
    }
    *rem = (uint)(a % d);
    return a / d;
}

/* The offset in its plane xp of the maximum of the window whose top-left element is (h0, w0):
 * scanned in row-major order, a later element wins only when it is larger, so ties go to the
 * first; a NaN wins over everything (the window's last NaN), as PyTorch's max_pool2d. */
static inline int clt_pool_argmax(const global X_T *xp, int h0, int w0, int W, int KH, int KW)
{
    int best = h0 * W + w0;
    float bv = CLT_LOAD(X_DTYPE, xp, best);
    for (int i = 0; i < KH; i++) {
        const int row = (h0 + i) * W + w0;
        for (int j = 0; j < KW; j++) {
            const float v = CLT_LOAD(X_DTYPE, xp, row + j);
            if (v > bv || isnan(v)) {
                best = row + j;
                bv = v;
            }
        }
    }
    return best;
}

/* The value at clt_pool_argmax, the same bits: the same scan as selects without branches (a
 * branch on random data mispredicts half the time). Without a NaN, clt_pool_argmax is the
 * first element equal to this maximum. */
static inline float clt_pool_max(const global X_T *xp, int h0, int w0, int W, int KH, int KW)
{
    float bv = CLT_LOAD(X_DTYPE, xp, h0 * W + w0);
    for (int i = 0; i < KH; i++) {
        const int row = (h0 + i) * W + w0;
        for (int j = 0; j < KW; j++) {
            const float v = CLT_LOAD(X_DTYPE, xp, row + j);
            bv = (v > bv) | isnan(v) ? v : bv;
        }
    }
    return bv;
}

/* clt_pool_max's step on vectors, lane by lane: v replaces the running maximum m when larger
 * or NaN. */
#define CLT_POOL_TAKE(m, v) select((m), (v), ((v) > (m)) | isnan(v))

/* The n (2, 4 or 8) maxima of 2x2 windows with stride 2 from column 2 * ow of rows r0 and r1 (the
 * window's two rows) into y[ow ..]: clt_pool_max's scan (x00, x01, x10, x11) in vector lanes,
 * the same bits. */
#define CLT_POOL_MAX2X2(n2, n, r0, r1, yp, ow)                                                     \
    {                                                                                              \
        const CLT__XCAT(float, n2) a = CLT_VLOAD(X_DTYPE, n2, r0, 2 * (ow)),                       \
                                   b = CLT_VLOAD(X_DTYPE, n2, r1, 2 * (ow));                       \
        CLT__XCAT(float, n) m = a.even;                                                            \
        m = CLT_POOL_TAKE(m, a.odd);                                                               \
        m = CLT_POOL_TAKE(m, b.even);                                                              \
        m = CLT_POOL_TAKE(m, b.odd);                                                               \
        CLT_VSTORE(X_DTYPE, n, m, yp, ow);                                                         \
    }

/* Two vectors' lanes interleaved: (a.s0, b.s0, a.s1, b.s1, ...), 2 n lanes for n = 2, 4, 8. */
#define CLT_POOL_ZIP2(a, b) (float4)(a.s0, b.s0, a.s1, b.s1)
#define CLT_POOL_ZIP4(a, b) (float8)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3)
#define CLT_POOL_ZIP8(a, b)                                                                        \
    (float16)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3, a.s4, b.s4, a.s5, b.s5, a.s6, b.s6,  \
              a.s7, b.s7)

/* Max-pool backward for n (2, 4 or 8) 2x2 windows with stride 2 from column 2 * ow of rows r0 and
 * r1 (dx rows d0, d1; dy from dyp[ow]): each window's gradient to the element clt_pool_argmax
 * picks (the first equal to the maximum; with a NaN, the last NaN), 0 to the others; the same
 * bits as the scalar path. The masks are vector comparisons' 0 / -1 lanes, combined with ~, &
 * and | only (oclgrind's ! on a vector does not give -1). */
#define CLT_POOL_GRAD2X2(n2, n, r0, r1, d0, d1, dyp, ow)                                           \
    {                                                                                              \
        const CLT__XCAT(float, n2) a = CLT_VLOAD(X_DTYPE, n2, r0, 2 * (ow)),                       \
                                   b = CLT_VLOAD(X_DTYPE, n2, r1, 2 * (ow));                       \
        CLT__XCAT(float, n) m = a.even;                                                            \
        m = CLT_POOL_TAKE(m, a.odd);                                                               \
        m = CLT_POOL_TAKE(m, b.even);                                                              \
        m = CLT_POOL_TAKE(m, b.odd);                                                               \
        const CLT__XCAT(float, n) g = 0.0f + CLT_VLOAD(X_DTYPE, n, dyp, ow), z = 0.0f;             \
        const CLT__XCAT(int, n) e00 = a.even == m, e01 = ~e00 & (a.odd == m),                      \
                                e10 = ~(e00 | e01) & (b.even == m),                                \
                                e11 = ~(e00 | e01 | e10) & (b.odd == m);                           \
        const CLT__XCAT(int, n) n11 = isnan(b.odd), n10 = ~n11 & isnan(b.even),                    \
                                n01 = ~(n11 | n10) & isnan(a.odd), n00 = ~(n11 | n10 | n01);       \
        const CLT__XCAT(int, n) nan = isnan(m);                                                    \
        const CLT__XCAT(float, n) g00 = select(z, g, select(e00, n00, nan)),                       \
                                  g01 = select(z, g, select(e01, n01, nan)),                       \
                                  g10 = select(z, g, select(e10, n10, nan)),                       \
                                  g11 = select(z, g, select(e11, n11, nan));                       \
        CLT_VSTORE(X_DTYPE, n2, CLT__XCAT(CLT_POOL_ZIP, n)(g00, g01), d0, 2 * (ow));               \
        CLT_VSTORE(X_DTYPE, n2, CLT__XCAT(CLT_POOL_ZIP, n)(g10, g11), d1, 2 * (ow));               \
    }

/* The windows [ow0, ow1] holding column w, kept for w = 0, 1, ... (call with w ascending from
 * ow0 = ow1 = 0): ow0 is the first window not ending at or before w, ow1 the last one starting
 * at or before w. The range is empty (ow0 > ow1) in the columns no window covers. */
static inline void clt_pool_cols_step(int w, int KW, int SW, int OW, int *ow0, int *ow1)
{
    while (*ow0 * SW + KW <= w) (*ow0)++;
    while (*ow1 + 1 < OW && (*ow1 + 1) * SW <= w) (*ow1)++;
}

/* Row i of a plane of rows_per_plane rows: its plane pc (b * C + c), the plane's offset in x
 * (planes of H x W elements) and the row's index r in the plane. */
#define CLT_POOL_ROW(rows_per_plane, r)                                                            \
    uint r;                                                                                        \
    const ulong pc = clt_pool_div(i, (uint)(rows_per_plane), &r),                                  \
                xplane = pc * (ulong)H * (ulong)W;

#define CLT_POOL_GEOMETRY int H, int W, int OH, int OW, int KH, int KW, int SH, int SW

/* n = B*C*OH rows of y. */
kernel void maxpool_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                            CLT_POOL_GEOMETRY)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    CLT_POOL_ROW(OH, oh)
    const global X_T *xp = x + x_off + xplane;
    global X_T *yp = y + y_off + i * (ulong)OW;
    const int h0 = (int)oh * SH;
    int ow = 0;
    if (KH == 2 && KW == 2 && SH == 2 && SW == 2) { /* nn.MaxPool2d(2): eight windows at a time */
        const global X_T *r0 = xp + h0 * W, *r1 = r0 + W;
        for (; ow + 8 <= OW; ow += 8) CLT_POOL_MAX2X2(16, 8, r0, r1, yp, ow)
        for (; ow + 4 <= OW; ow += 4) CLT_POOL_MAX2X2(8, 4, r0, r1, yp, ow)
        for (; ow + 2 <= OW; ow += 2) CLT_POOL_MAX2X2(4, 2, r0, r1, yp, ow)
        if (ow < OW && OW >= 2) { /* the last window, with its neighbour again (the same bits) */
            CLT_POOL_MAX2X2(4, 2, r0, r1, yp, OW - 2)
            ow = OW;
        }
    }
    for (; ow < OW; ow++) CLT_STORE(X_DTYPE, yp, ow, clt_pool_max(xp, h0, ow * SW, W, KH, KW));
}

/* Windows that overlap (SH < KH or SW < KW): n = B*C*H rows of dx, each element the sum over
 * the windows (oh, ow ascending) whose maximum it is. Otherwise n = B*C*OH rows of windows:
 * the work-item writes dx's rows [oh*SH, oh*SH + SH) (to H for the last), each element the
 * gradient of its window if it is the window's maximum, else 0. */
kernel void maxpool_backward(global X_T *dx, ulong dx_off, const global X_T *dy, ulong dy_off,
                             const global X_T *x, ulong x_off, ulong n, CLT_POOL_GEOMETRY)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    if (SH >= KH && SW >= KW) {
        CLT_POOL_ROW(OH, oh)
        const global X_T *xp = x + x_off + xplane;
        global X_T *dxp = dx + dx_off + xplane;
        const global X_T *dyp = dy + dy_off + i * (ulong)OW;
        const int h0 = (int)oh * SH, h1 = (int)oh == OH - 1 ? H : h0 + SH;
        int ow = 0;
        if (KH == 2 && KW == 2 && SH == 2 && SW == 2) { /* eight windows at a time */
            /* the windows before the last, which also covers an odd W's last column */
            const int inner = 2 * OW == W ? OW : OW - 1;
            const global X_T *r0 = xp + h0 * W, *r1 = r0 + W;
            global X_T *d0 = dxp + h0 * W, *d1 = d0 + W;
            for (; ow + 8 <= inner; ow += 8) CLT_POOL_GRAD2X2(16, 8, r0, r1, d0, d1, dyp, ow)
            for (; ow + 4 <= inner; ow += 4) CLT_POOL_GRAD2X2(8, 4, r0, r1, d0, d1, dyp, ow)
            for (; ow + 2 <= inner; ow += 2) CLT_POOL_GRAD2X2(4, 2, r0, r1, d0, d1, dyp, ow)
            if (ow < inner && inner >= 2) { /* the last, with its neighbour again */
                CLT_POOL_GRAD2X2(4, 2, r0, r1, d0, d1, dyp, inner - 2)
                ow = inner;
            }
            for (int w = 0; h1 > h0 + 2 && w < 2 * ow; w++) /* an odd H's last row: no window */
                CLT_STORE(X_DTYPE, d1 + W, w, 0.0f);
        }
        for (; ow < OW; ow++) {
            const int w0 = ow * SW, w1 = ow == OW - 1 ? W : w0 + SW;
            const float m = clt_pool_max(xp, h0, w0, W, KH, KW);
            const float g = 0.0f + CLT_LOAD(X_DTYPE, dyp, ow); /* as the gather's sum */
            /* the window's maximum: the first element equal to m, or with a NaN (rare) the
             * position clt_pool_argmax finds */
            const int nan_best = isnan(m) ? clt_pool_argmax(xp, h0, w0, W, KH, KW) : -1;
            int found = 0;
            for (int h = h0; h < h1; h++)
                for (int w = w0; w < w1; w++) {
                    const int o = h * W + w;
                    const int first = !found & (h - h0 < KH) & (w - w0 < KW) &
                                      (CLT_LOAD(X_DTYPE, xp, o) == m);
                    found |= first;
                    CLT_STORE(X_DTYPE, dxp, o, (nan_best < 0 ? first : o == nan_best) ? g : 0.0f);
                }
        }
        return;
    }
    CLT_POOL_ROW(H, h)
    const global X_T *xp = x + x_off + xplane;
    global X_T *dxp = dx + dx_off + i * (ulong)W;
    const global X_T *dyp = dy + dy_off + pc * (ulong)OH * (ulong)OW;
    const int oh0 = (int)h < KH ? 0 : ((int)h - KH) / SH + 1, oh1 = min((int)h / SH, OH - 1);
    int ow0 = 0, ow1 = 0;
    for (int w = 0; w < W; w++) {
        clt_pool_cols_step(w, KW, SW, OW, &ow0, &ow1);
        const int self = (int)h * W + w;
        float g = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++)
                if (clt_pool_argmax(xp, oh * SH, ow * SW, W, KH, KW) == self)
                    g += CLT_LOAD(X_DTYPE, dyp, oh * OW + ow);
        CLT_STORE(X_DTYPE, dxp, w, g);
    }
}

/* The mean: the window's sum (row-major) divided by KH * KW. n = B*C*OH rows of y. */
kernel void avgpool_forward(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                            CLT_POOL_GEOMETRY)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    CLT_POOL_ROW(OH, oh)
    const global X_T *xp = x + x_off + xplane;
    global X_T *yp = y + y_off + i * (ulong)OW;
    const float area = (float)(KH * KW);
    for (int ow = 0; ow < OW; ow++) {
        float s = 0.0f;
        for (int a = 0; a < KH; a++) {
            const int row = ((int)oh * SH + a) * W + ow * SW;
            for (int b = 0; b < KW; b++)
                s += CLT_LOAD(X_DTYPE, xp, row + b);
        }
        CLT_STORE(X_DTYPE, yp, ow, s / area);
    }
}

/* dx = the sum of the gradients of the windows holding the element (oh, ow ascending), divided
 * by KH * KW. n = B*C*H rows of dx. */
kernel void avgpool_backward(global X_T *dx, ulong dx_off, const global X_T *dy, ulong dy_off,
                             ulong n, CLT_POOL_GEOMETRY)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    CLT_POOL_ROW(H, h)
    (void)xplane;
    global X_T *dxp = dx + dx_off + i * (ulong)W;
    const global X_T *dyp = dy + dy_off + pc * (ulong)OH * (ulong)OW;
    const int oh0 = (int)h < KH ? 0 : ((int)h - KH) / SH + 1, oh1 = min((int)h / SH, OH - 1);
    const float area = (float)(KH * KW);
    int ow0 = 0, ow1 = 0;
    for (int w = 0; w < W; w++) {
        clt_pool_cols_step(w, KW, SW, OW, &ow0, &ow1);
        float g = 0.0f;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++)
                g += CLT_LOAD(X_DTYPE, dyp, oh * OW + ow);
        CLT_STORE(X_DTYPE, dxp, w, g / area);
    }
}
