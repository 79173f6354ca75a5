/* Batch assembly on the device from a resident data set: gather the rows of a shuffled batch,
 * converting u8 or f32 inputs to f32 with a per-feature scale and shift (scaling to [0, 1] and
 * standardisation in one pass), and gather their labels or targets. */
#ifndef X_DTYPE
#define X_DTYPE CLT_U8
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* y (B, F) = x[idx[b], :] * scale + shift; x (N, F); idx (B) i32; one work-item per element */
kernel void gather_rows(global float *y, ulong y_off, const global X_T *x, ulong x_off,
                        const global int *idx, ulong idx_off, ulong B, ulong F,
                        const global float *scale, const global float *shift)
{
    ulong i = get_global_id(0);
    if (i >= B * F) return;
    ulong b = i / F, f = i - b * F;
    ulong row = (ulong)idx[idx_off + b];
    y[y_off + i] = fma(CLT_LOAD(X_DTYPE, x + x_off, row * F + f), scale[f], shift[f]);
}

/* y (B) = x[idx[b]] for i32 or f32 values (labels, targets) */
kernel void gather(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                   const global int *idx, ulong idx_off, ulong B)
{
    ulong b = get_global_id(0);
    if (b < B) y[y_off + b] = x[x_off + (ulong)idx[idx_off + b]];
}
