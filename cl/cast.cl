/* Conversion between storage dtypes (-DSRC_DTYPE, -DDST_DTYPE): through fp32, rounding to
 * nearest even on the way down (vstore_half_rte for f16, bit operations for bf16). Each
 * work-item converts CAST_V consecutive elements, by vectors where all are there (CPUs: one
 * element per work-item left PoCL's conversions scalar, 2.5 times slower on AVX-512). */
#ifndef SRC_DTYPE
#define SRC_DTYPE CLT_F32
#endif
#ifndef DST_DTYPE
#define DST_DTYPE CLT_F16
#endif
#define CAST_V 16 /* src/ops/elementwise.c's CLT__CAST_V */

kernel void cast(global CLT_TYPE(DST_DTYPE) *y, ulong y_off,
                 const global CLT_TYPE(SRC_DTYPE) *x, ulong x_off, ulong n)
{
    const ulong i = get_global_id(0) * CAST_V;
    if (i >= n) return;
    global CLT_TYPE(DST_DTYPE) *yp = y + y_off + i;
    const global CLT_TYPE(SRC_DTYPE) *xp = x + x_off + i;
    if (n - i >= CAST_V) {
        CLT_VSTORE(DST_DTYPE, CAST_V, CLT_VLOAD(SRC_DTYPE, CAST_V, xp, 0), yp, 0);
        return;
    }
    for (int j = 0; j < (int)(n - i); j++) CLT_STORE(DST_DTYPE, yp, j, CLT_LOAD(SRC_DTYPE, xp, j));
}
