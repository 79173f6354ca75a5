/* Windows of text gathered on the device (src/ops/textbatch.c, cltrain/text.h): one work-group per
 * window w of a batch; its first work-item computes where the window starts, and the group
 * copies its T + 1 tokens into the inputs x[w][t] = tok[o + t] and the targets y[w][t] =
 * tok[o + t + 1], both i32, from the token ids stored as TOK_DTYPE (u8, u16 or i32). Needs
 * cl/rng.cl in the same program ("rng,textbatch").
 *
 * Where window w starts (a = (seed, stream, count, total), b = (T, first, even, 0)):
 *   random (b.z == 0): o = (u32(2w) | u32(2w + 1) << 32) mod count, u32(i) element i of the
 *     Philox stream a.y under the seed a.x: the two words of block w >> 1 (clt_rng_u32's
 *     layout), so that the host's src/runtime/rng.c gives the same offsets;
 *   even (b.z != 0): window j = first + w of total, o = j (count - 1) / (total - 1) (0 when
 *     total is 1), spread from the split's first start to its last.
 * count is the number of possible starts, the split's length less T; the host checks that
 * count - 1 + T indexes a token and that j (count - 1) fits 64 bits. */
#ifndef TOK_DTYPE
#define TOK_DTYPE CLT_U16
#endif
#define TOK_T CLT_TYPE(TOK_DTYPE)

static ulong textbatch_start(ulong4 a, uint4 b, uint w)
{
    if (b.z) {
        const ulong j = (ulong)b.y + w;
        return a.w > 1 ? j * (a.z - 1) / (a.w - 1) : 0;
    }
    const ulong block = w >> 1;
    const uint4 r = clt_philox4x32((uint2)((uint)a.x, (uint)(a.x >> 32)),
                                   (uint4)((uint)block, (uint)(block >> 32), (uint)a.y,
                                           (uint)(a.y >> 32)));
    const ulong lo = (w & 1) ? r.z : r.x, hi = (w & 1) ? r.w : r.y;
    return (lo | hi << 32) % a.z;
}

kernel void textbatch_gather(const global TOK_T *tok, ulong tok_off, global int *x, ulong x_off,
                         global int *y, ulong y_off, ulong4 a, uint4 b)
{
    local ulong start[1]; /* an array: clang takes a scalar local for an uninitialised one */
    const uint w = get_group_id(0), lid = get_local_id(0), lsz = get_local_size(0), T = b.x;
    if (lid == 0) start[0] = textbatch_start(a, b, w);
    barrier(CLK_LOCAL_MEM_FENCE);
    const global TOK_T *src = tok + tok_off + start[0];
    global int *xr = x + x_off + (ulong)w * T;
    global int *yr = y + y_off + (ulong)w * T;
    for (uint t = lid; t < T; t += lsz) {
        xr[t] = (int)src[t];
        yr[t] = (int)src[t + 1];
    }
}
