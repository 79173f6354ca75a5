/* The op-family table (ops/family_internal.h): the families by id, their kernel slots in the
 * ops' per-ctx state, and the list of every program the ops may build, walked family by family
 * for the kernel portability guard (`cltrain kernels --list`). */
#include "ops/family_internal.h"

#include "ops/tune_internal.h"
#include "runtime/internal.h"

#include <stdio.h>

const struct clt__op_family *const clt__op_families[CLT__OPF__COUNT] = {
#define CLT__X(f) [CLT__OPF_##f] = &clt__family_##f,
    CLT__OP_FAMILIES(CLT__X)
#undef CLT__X
};

clt_status clt__op_slot(clt_ctx *ctx, clt__op_family_id f, int slot, cl_kernel **out)
{
    CLT_ASSERT((unsigned)f < CLT__OPF__COUNT && slot >= 0 && slot < clt__op_families[f]->slots);
    struct clt__ops_ctx *o = NULL;
    clt_status st = clt__ops_state(ctx, &o);
    if (st != CLT_OK) return st;
    *out = &o->slots[o->slot_base[f] + slot];
    return CLT_OK;
}

clt_status clt__op_kernel_by_index(clt_ctx *ctx, clt__op_family_id f, int which,
                                   const char *options, const char *const *names, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, f, which, &slot);
    if (st == CLT_OK && !*slot)
        st = clt__kernel(ctx, clt__op_families[f]->sources, options, names[which], slot);
    if (st == CLT_OK) *k = *slot;
    return st;
}

void clt_ops_program_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    for (int f = 0; f < CLT__OPF__COUNT; f++)
        clt__op_families[f]->variants(dev, fn, user);
}

void clt__opts_dtype(char *dst, size_t n, clt_dtype x)
{
    snprintf(dst, n, "-DX_DTYPE=%d", (int)x);
}

int clt__mixed_triples(clt_dtype out[][3])
{
    int n = 0;
    out[n][0] = out[n][1] = out[n][2] = CLT_DTYPE_F32;
    n++;
    const clt_dtype half[] = {CLT_DTYPE_F16, CLT_DTYPE_BF16};
    for (size_t h = 0; h < sizeof half / sizeof *half; h++)
        for (int bits = 1; bits < 8; bits++) {
            for (int i = 0; i < 3; i++)
                out[n][i] = (bits >> i) & 1 ? half[h] : CLT_DTYPE_F32;
            n++;
        }
    return n;
}
