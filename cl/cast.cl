/* Conversion between storage dtypes (-DSRC_DTYPE, -DDST_DTYPE): through fp32, rounding to
 * nearest even on the way down (vstore_half_rte for f16, bit operations for bf16). */
#ifndef SRC_DTYPE
#define SRC_DTYPE CLT_F32
#endif
#ifndef DST_DTYPE
#define DST_DTYPE CLT_F16
#endif

kernel void cast(global CLT_TYPE(DST_DTYPE) *y, ulong y_off,
                 const global CLT_TYPE(SRC_DTYPE) *x, ulong x_off, ulong n)
{
    ulong i = get_global_id(0);
    if (i < n) CLT_STORE(DST_DTYPE, y + y_off, i, CLT_LOAD(SRC_DTYPE, x + x_off, i));
}
