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

/* The storage as unsigned bits of the same width, for copy: a half may not be dereferenced
 * without cl_khr_fp16, and moving floats as integers keeps every NaN payload. */
#if X_DTYPE == CLT_F32
#define X_RAW uint
#elif X_DTYPE == CLT_F16
#define X_RAW ushort
#else
#define X_RAW X_T
#endif

/* y[i] = x[i] (raw storage copy, any dtype) */
kernel void copy(global X_RAW *y, ulong y_off, const global X_RAW *x, ulong x_off, ulong n)
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
