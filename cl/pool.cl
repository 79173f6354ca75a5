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
 * most one window: one argmax per window instead of one per element). Tensors arrive as
 * (buffer, offset in elements); n is the number of rows (work-items). */
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
    for (int ow = 0; ow < OW; ow++) {
        CLT_STORE(X_DTYPE, yp, ow, clt_pool_max(xp, h0, ow * SW, W, KH, KW));
    }
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
        for (int ow = 0; ow < OW; ow++) {
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
