/* C wrappers of cl/gather.cl: batch assembly from a data set resident on the device. */
#include "ops/family_internal.h"

#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include <stdio.h>

/* gather_rows on a CPU: one work-item per row (PoCL's loop over a work-group's items costs more
 * than the kernel's loop over a row's blocks), this many rows per work-group. MLP-S's batches
 * (128 random rows of Fashion-MNIST's 784 u8 features), PoCL on 2 cores: 63-76 us with an item
 * per block of 16 features and a group per row, 44-48 us this way (BENCHMARKS.md). */
#define GATHER_CPU_GROUP_ROWS 16

clt_status clt_op_gather_rows(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx,
                              const clt_tensor *scale, const clt_tensor *shift)
{
    return clt__op_gather_rows_items(y, x, idx, scale, shift, 0);
}

clt_status clt__op_gather_rows_items(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx,
                                     const clt_tensor *scale, const clt_tensor *shift, size_t items)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    char opts[32];
    CLT_TRY(clt_tensor_same_ctx(y, x));
    CLT_TRY(clt_tensor_same_ctx(y, idx));
    CLT_TRY(clt_tensor_same_ctx(y, scale));
    CLT_TRY(clt_tensor_same_ctx(y, shift));
    cl_ulong B = clt_tensor_numel(idx), F = clt_tensor_dim(x, 1);
    clt_dtype xd = clt_tensor_dtype(x);
    if ((xd != CLT_DTYPE_U8 && xd != CLT_DTYPE_F32) || clt_tensor_dtype(y) != CLT_DTYPE_F32 ||
        clt_tensor_dtype(idx) != CLT_DTYPE_I32 || clt_tensor_numel(y) != B * F ||
        clt_tensor_numel(scale) != F || clt_tensor_numel(shift) != F)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "gather_rows: expected y f32 (B, F), x u8/f32 (N, F), idx "
                                     "i32 (B), scale and shift f32 (F)");
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(ctx, CLT__OPF_gather, (int)xd, &slot));
    if (!*slot) {
        clt__opts_dtype(opts, sizeof opts, xd);
        CLT_TRY(clt__kernel(ctx, "gather", opts, "gather_rows", slot));
    }
    k = *slot;
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x), im = clt_tensor_mem(idx),
           sm = clt_tensor_mem(scale), hm = clt_tensor_mem(shift);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), io = clt_tensor_offset(idx);
    /* scale and shift are read from their buffers' start: views need an offset-free buffer */
    if (clt_tensor_offset(scale) || clt_tensor_offset(shift))
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "gather_rows: scale and shift must not be views");
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(im),
                      CLT__ARG(io), CLT__ARG(B), CLT__ARG(F), CLT__ARG(sm), CLT__ARG(hm)));
    const size_t blocks = (size_t)(F + 15) / 16;
    if (items == 0) items = clt_ctx_device(ctx)->type == CLT_DEVICE_CPU ? 1 : blocks;
    if (items >= blocks) { /* an item per block of 16 features (cl/gather.cl) */
        CLT_TRY(clt__launch_rows(ctx, k, blocks, (size_t)B, "gather_rows"));
    } else {
        const size_t rows = items == 1 ? GATHER_CPU_GROUP_ROWS : 1,
                     global[2] = {items, ((size_t)B + rows - 1) / rows * rows},
                     local[2] = {items, rows};
        CLT_TRY(clt__enqueue_nd(ctx, k, 2, global, local, "gather_rows"));
    }
fail:
    return st;
}

clt_status clt_op_gather(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(y);
    cl_kernel k;
    char opts[32];
    CLT_TRY(clt_tensor_same_ctx(y, x));
    CLT_TRY(clt_tensor_same_ctx(y, idx));
    clt_dtype d = clt_tensor_dtype(x);
    cl_ulong B = clt_tensor_numel(idx);
    if ((d != CLT_DTYPE_I32 && d != CLT_DTYPE_F32) || clt_tensor_dtype(y) != d ||
        clt_tensor_dtype(idx) != CLT_DTYPE_I32 || clt_tensor_numel(y) != B)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "gather: expected y (B) and x (N) of one dtype (i32 or f32) "
                                     "and idx i32 (B)");
    cl_kernel *slot = NULL;
    CLT_TRY(clt__op_slot(ctx, CLT__OPF_gather, CLT_DTYPE__COUNT + (int)d, &slot));
    if (!*slot) {
        clt__opts_dtype(opts, sizeof opts, d);
        CLT_TRY(clt__kernel(ctx, "gather", opts, "gather", slot));
    }
    k = *slot;
    cl_mem ym = clt_tensor_mem(y), xm = clt_tensor_mem(x), im = clt_tensor_mem(idx);
    cl_ulong yo = clt_tensor_offset(y), xo = clt_tensor_offset(x), io = clt_tensor_offset(idx);
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(ym), CLT__ARG(yo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(im),
                      CLT__ARG(io), CLT__ARG(B)));
    CLT_TRY(clt__launch_1d(ctx, k, (size_t)B, "gather"));
fail:
    return st;
}

static void gather_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    const clt_dtype gathered[] = {CLT_DTYPE_U8, CLT_DTYPE_F32, CLT_DTYPE_I32};
    char o[32];
    for (size_t i = 0; i < sizeof gathered / sizeof *gathered; i++) {
        clt__opts_dtype(o, sizeof o, gathered[i]);
        fn("gather", o, user);
    }
}

const struct clt__op_family clt__family_gather = {
    .name = "gather",
    .sources = "gather",
    .slots = 2 * CLT_DTYPE__COUNT, /* gather_rows, then gather, by the source's dtype */
    .variants = gather_variants,
};
