/* Elementwise kernels over one dtype (-DX_DTYPE=code, default f32): fill, copy, scale, axpy.
 * Tensors arrive as (buffer, offset in elements); arithmetic is fp32. */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)

/* x[i] = value, i < n */
kernel void fill(global X_T *x, ulong x_off, ulong n, float value)
{
    ulong i = get_global_id(0);
    if (i < n) CLT_STORE(X_DTYPE, x + x_off, i, value);
}

/* y[i] = x[i] (raw storage copy, any dtype) */
kernel void copy(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n)
{
    ulong i = get_global_id(0);
    if (i < n) y[y_off + i] = x[x_off + i];
}

/* y[i] = alpha * x[i]; y may be x */
kernel void scale(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                  float alpha)
{
    ulong i = get_global_id(0);
    if (i < n) CLT_STORE(X_DTYPE, y + y_off, i, alpha * CLT_LOAD(X_DTYPE, x + x_off, i));
}

/* y[i] += alpha * x[i] */
kernel void axpy(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n,
                 float alpha)
{
    ulong i = get_global_id(0);
    if (i < n) {
        float v = fma(alpha, CLT_LOAD(X_DTYPE, x + x_off, i), CLT_LOAD(X_DTYPE, y + y_off, i));
        CLT_STORE(X_DTYPE, y + y_off, i, v);
    }
}
