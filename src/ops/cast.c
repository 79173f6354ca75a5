/* C wrapper of cl/cast.cl, its op family: casts between f32, f16 and bf16. */
#include "ops/family_internal.h"

#include "runtime/internal.h"

#include <stdio.h>

void clt__opts_cast(char *dst, size_t n, clt_dtype src, clt_dtype dstd)
{
    snprintf(dst, n, "-DSRC_DTYPE=%d -DDST_DTYPE=%d", (int)src, (int)dstd);
}

static void cast_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[64];
    for (int s = 0; s < 3; s++) /* the float dtypes, numbered 0-2 */
        for (int d = 0; d < 3; d++) {
            clt__opts_cast(o, sizeof o, (clt_dtype)s, (clt_dtype)d);
            fn("cast", o, user);
        }
}

const struct clt__op_family clt__family_cast = {
    .name = "cast",
    .sources = "cast",
    .slots = 3 * 3, /* by source and destination float dtype */
    .variants = cast_variants,
};

#define CLT__CAST_V 16 /* elements per work-item of cl/cast.cl (CAST_V) */

clt_status clt_op_cast(clt_tensor *dst, const clt_tensor *src)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    char opts[48];
    CLT_TRY(clt__check_pair(dst, src, false, "cast"));
    CLT_TRY(clt__need_float(dst, "cast"));
    CLT_TRY(clt__need_float(src, "cast"));
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(clt_tensor_ctx(dst), CLT__OPF_cast,
                         (int)clt_tensor_dtype(src) * 3 + (int)clt_tensor_dtype(dst), &slot));
    if (!*slot) {
        clt__opts_cast(opts, sizeof opts, clt_tensor_dtype(src), clt_tensor_dtype(dst));
        CLT_TRY(clt__kernel(clt_tensor_ctx(dst), "cast", opts, "cast", slot));
    }
    k = *slot;
    CLT_TRY(clt__launch_yx(k, dst, src, NULL, CLT__CAST_V, "cast"));
fail:
    return st;
}
