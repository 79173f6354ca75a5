/* Input conversion on the device: raw u8 samples (pixels) to f32 with a per-feature affine
 * map, so that scaling and standardisation cost no host time: y = x * scale[f] + shift[f]. */

/* y[b * F + f] = fma(x[b * F + f], scale[f], shift[f]) (as cl/gather.cl, so both input paths
 * give the same bits); n = B * F elements. */
kernel void input_u8_to_f32(global float *y, ulong y_off, const global uchar *x, ulong x_off,
                            const global float *scale, ulong sc_off, const global float *shift,
                            ulong sh_off, ulong n, uint F)
{
    const ulong i = get_global_id(0);
    if (i >= n) return;
    const uint f = n <= 0xffffffffu ? (uint)i % F : (uint)(i % F); /* 32-bit division if it fits */
    y[y_off + i] = fma((float)x[x_off + i], scale[sc_off + f], shift[sh_off + f]);
}
