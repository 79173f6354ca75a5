/* Batch assembly on the device from a resident data set: gather the rows of a shuffled batch,
 * converting u8 or f32 inputs to f32 with a per-feature scale and shift (scaling to [0, 1] and
 * standardisation in one pass), and gather their labels or targets. */
#ifndef X_DTYPE
#define X_DTYPE CLT_U8
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* y (B, F) = x[idx[b], :] * scale + shift; x (N, F); idx (B) i32. Range (W, B): work-item
 * (i, b) converts the blocks i, i + W, i + 2 W, ... of 16 features of row b, each as one vector
 * (a last partial block element by element). The host picks W: a work-item per block on a GPU
 * (neighbouring items read neighbouring bytes), one per row on a CPU, where PoCL's loop over the
 * items of a work-group costs more than the loop here. */
#if X_DTYPE == CLT_F32
#define GATHER_VLOAD16(p, i) vload16(0, (p) + (i))
#else /* u8 (the program is also built for the i32 labels' gather) */
#define GATHER_VLOAD16(p, i) convert_float16(vload16(0, (p) + (i)))
#endif
kernel void gather_rows(global float *y, ulong y_off, const global X_T *x, ulong x_off,
                        const global int *idx, ulong idx_off, ulong B, ulong F,
                        const global float *scale, const global float *shift)
{
    const ulong b = get_global_id(1), step = get_global_size(0) * 16;
    if (b >= B) return;
    const global X_T *src = x + x_off + (ulong)idx[idx_off + b] * F;
    global float *dst = y + y_off + b * F;
    ulong f0 = get_global_id(0) * 16;
    for (; f0 + 16 <= F; f0 += step)
        vstore16(fma(GATHER_VLOAD16(src, f0), vload16(0, scale + f0), vload16(0, shift + f0)), 0,
                 dst + f0);
    for (ulong f = f0; f < F && f < f0 + 16; f++)
        dst[f] = fma(CLT_LOAD(X_DTYPE, src, f), scale[f], shift[f]);
}

/* y (B) = x[idx[b]] for i32 or f32 values (labels, targets) */
kernel void gather(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                   const global int *idx, ulong idx_off, ulong B)
{
    ulong b = get_global_id(0);
    if (b < B) y[y_off + b] = x[x_off + (ulong)idx[idx_off + b]];
}
