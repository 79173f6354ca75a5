/* C wrapper of cl/sample.cl (compiled after cl/rng.cl): the next token of generated text drawn
 * on the device from one row of logits (temperature, top-k, a Philox draw). */
#include "ops/nn_internal.h"

#include <math.h>
#include <stdint.h>

static clt_status sample_kernel(clt_ctx *ctx, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_sample, 0, &slot);
    if (st == CLT_OK && !*slot) st = clt__kernel(ctx, "rng,sample", "", "sample_forward", slot);
    if (st == CLT_OK) *k = *slot;
    return st;
}

clt_status clt_op_sample(clt_tensor *out, const clt_tensor *logits, size_t row, size_t V,
                         const struct clt_sample_params *p)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(out && logits && p);
    clt_ctx *ctx = clt_tensor_ctx(logits);
    const char *op = "sample_forward";
    cl_kernel k;
    CLT_TRY(clt_tensor_same_ctx(logits, out));
    CLT_TRY(clt__nn_need_dtype(logits, CLT_DTYPE_F32, op, "logits"));
    CLT_TRY(clt__nn_need_dtype(out, CLT_DTYPE_I32, op, "out"));
    if (V < 1 || V > INT32_MAX || (row + 1) * V > clt_tensor_numel(logits))
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: row %zu of V = %zu does not fit %zu logits", op, row, V,
                 clt_tensor_numel(logits));
    if (clt_tensor_numel(out) < 1) CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: out is empty", op);
    if (!(p->temperature > 0.0f) || !isfinite(p->temperature))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: temperature %g must be finite and above 0", op,
                 (double)p->temperature);
    CLT_TRY(sample_kernel(ctx, &k));
    {
        cl_mem lm = clt_tensor_mem(logits), om = clt_tensor_mem(out);
        cl_ulong lo = clt_tensor_offset(logits) + row * V, oo = clt_tensor_offset(out);
        cl_float temp = p->temperature;
        cl_ulong4 a = {{p->seed, p->stream, p->index, 0}};
        cl_uint top_k = p->top_k < V ? (cl_uint)p->top_k : 0;
        cl_uint4 b = {{(cl_uint)V, top_k, 0, 0}};
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(lm), CLT__ARG(lo), CLT__ARG(om), CLT__ARG(oo),
                          CLT__ARG(temp), CLT__ARG(a), CLT__ARG(b)));
        CLT_TRY(clt__enqueue(ctx, k, 1, 1, op));
    }
fail:
    return st;
}

static void sample_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    fn("rng,sample", "", user);
}

const struct clt__op_family clt__family_sample = {
    .name = "sample",
    .sources = "rng,sample",
    .slots = 1,
    .variants = sample_variants,
};
