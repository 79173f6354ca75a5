/* Data augmentation of an image batch (f32, (B, C, H, W)), compiled after cl/rng.cl (program
 * "rng,augment"): per sample a random horizontal flip, a random translation with zero fill and
 * a random cutout square, in that order, drawn from the host's Philox (rng.h) bit for bit. Pure
 * data movement: every output is an input element or 0. Out of place (y must not overlap x).
 * Sample b's draws are word k of clt_rng_u32(seed, stream, (first + b) * 8 + k):
 *   k = 0: flip when the top bit is set;  k = 1, 2: dy, dx = u % (2 shift + 1) - shift;
 *   k = 3, 4: the cutout's centre row u % H and column u % W; its rows
 *   [cy - cutout / 2, cy - cutout / 2 + cutout) (likewise columns), clipped to the image. */

/* The five draws of sample `pos`: two Philox blocks (words 0..3 and word 4). */
static inline void clt_augment_draws(ulong seed, ulong stream, ulong pos, uint *u)
{
    const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
    const ulong block = pos * 2; /* index pos * 8 >> 2 */
    const uint4 a = clt_philox4x32(key, (uint4)((uint)block, (uint)(block >> 32), (uint)stream,
                                                (uint)(stream >> 32)));
    const uint4 b = clt_philox4x32(key, (uint4)((uint)(block + 1), (uint)((block + 1) >> 32),
                                                (uint)stream, (uint)(stream >> 32)));
    u[0] = a.x;
    u[1] = a.y;
    u[2] = a.z;
    u[3] = a.w;
    u[4] = b.x;
}

/* y[b, c, i, j] for every element of a (B, C, H, W) batch; n = B C H W. flip, shift and cutout
 * as the host's struct (0: off). */
kernel void augment_forward(global float *y, ulong y_off, const global float *x, ulong x_off,
                            ulong n, ulong C, ulong H, ulong W, int flip, int shift, int cutout,
                            ulong seed, ulong stream, ulong first)
{
    const ulong e = get_global_id(0);
    if (e >= n) return;
    const ulong plane = H * W, b = e / (C * plane), r = e % plane;
    const long i = (long)(r / W), j = (long)(r % W);
    uint u[5];
    clt_augment_draws(seed, stream, first + b, u);
    float v = 0.0f;
    bool cut = false;
    if (cutout > 0) {
        const long top = (long)(u[3] % (uint)H) - cutout / 2;
        const long left = (long)(u[4] % (uint)W) - cutout / 2;
        cut = i >= top && i < top + cutout && j >= left && j < left + cutout;
    }
    if (!cut) {
        const uint span = 2u * (uint)shift + 1u;
        const long dy = shift > 0 ? (long)(u[1] % span) - shift : 0;
        const long dx = shift > 0 ? (long)(u[2] % span) - shift : 0;
        const long si = i - dy;
        long sj = j - dx;
        if (si >= 0 && si < (long)H && sj >= 0 && sj < (long)W) {
            if (flip && (u[0] >> 31)) sj = (long)W - 1 - sj;
            v = x[x_off + (e - r) + (ulong)si * W + (ulong)sj];
        }
    }
    y[y_off + e] = v;
}
