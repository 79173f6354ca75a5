/* Op families: the table of the ops' kernel families. A family is one stem everywhere
 * (cl/<stem>.cl, src/ops/<stem>.c, tests/ops/test_<stem>.c); its file defines the family's
 * descriptor (the cl/ sources of its programs, its number of kernel slots, and every program it
 * may build, for the portability list), and the ops keep the families' kernel handles in their
 * per-ctx state, so the runtime below names no family. Adding a family: its files, one line in
 * CLT__OP_FAMILIES below, and its tests (docs/architecture.md, "Where to add", "A kernel family"). */
#ifndef CLTRAIN_FAMILY_INTERNAL_H
#define CLTRAIN_FAMILY_INTERNAL_H

#include "ops/ops_internal.h"
#include "runtime/program_internal.h"

struct clt__op_family {
    const char *name;    /* the family's stem: "elementwise" */
    const char *sources; /* the cl/ stems its programs are made of: "act_fn,activation" */
    int slots;           /* kernel handles kept per ctx, numbered by the family's own code */
    /* Calls fn for every program (stems, options) the family may build on dev, each set of
     * options formatted by the same function the family's ops use. dev may be synthetic. */
    void (*variants)(const clt_device_info *dev, clt_program_variant_fn fn, void *user);
};

/* The table: one line per family. */
#define CLT__OP_FAMILIES(X)                                                                        \
    X(elementwise)                                                                                 \
    X(cast)                                                                                        \
    X(activation)                                                                                  \
    X(dropout)                                                                                     \
    X(gather)                                                                                      \
    X(linear)                                                                                      \
    X(loss)                                                                                        \
    X(input)                                                                                       \
    X(amp)                                                                                         \
    X(optim)                                                                                       \
    X(conv)                                                                                        \
    X(pool)                                                                                        \
    X(augment)                                                                                     \
    X(batchnorm)                                                                                   \
    X(layernorm)                                                                                   \
    X(textbatch)                                                                                   \
    X(sample)                                                                                      \
    X(embedding)                                                                                   \
    X(attention)                                                                                   \
    X(gemm)

typedef enum {
#define CLT__X(f) CLT__OPF_##f,
    CLT__OP_FAMILIES(CLT__X)
#undef CLT__X
    CLT__OPF__COUNT
} clt__op_family_id;

#define CLT__X(f) extern const struct clt__op_family clt__family_##f;
CLT__OP_FAMILIES(CLT__X)
#undef CLT__X

/* The float dtypes are numbered 0 to 2, so families index their slots by them. */
#define CLT__FLOAT_DTYPES 3
_Static_assert(CLT_DTYPE_F32 == 0 && CLT_DTYPE_F16 == 1 && CLT_DTYPE_BF16 == 2,
               "the float dtypes index kernel slots");

/* The families, indexed by clt__op_family_id. */
extern const struct clt__op_family *const clt__op_families[CLT__OPF__COUNT];

/* The ctx's kernel slot `slot` of family f: NULL until the family's code fills it through
 * clt__kernel, so a launch finds its kernel in O(1), without formatting options:
 *     cl_kernel *k;
 *     CLT_TRY(clt__op_slot(ctx, CLT__OPF_elementwise, dtype, &k));
 *     if (!*k) CLT_TRY(clt__kernel(ctx, "elementwise", opts, "fill", k));
 * The handles belong to the ctx's kernel cache (the slots only borrow them). slot is asserted
 * below the family's count. Fails only out of host memory, at the ctx's first op. */
clt_status clt__op_slot(clt_ctx *ctx, clt__op_family_id f, int slot, cl_kernel **out);

/* For a family whose programs take fixed options (NULL: none) and whose kernels are numbered
 * by a name table: kernel names[which] of the family's program, from slot `which`. */
clt_status clt__op_kernel_by_index(clt_ctx *ctx, clt__op_family_id f, int which,
                                   const char *options, const char *const *names, cl_kernel *k);

/* The operand dtypes a 16-bit-storage model may pass to a three-operand op (linear, GEMM): each
 * operand f32 or the precision's 16-bit type, for fp16 and bf16; out[0] is all-f32. Returns
 * the count (at most 15). */
int clt__mixed_triples(clt_dtype out[][3]);

#endif
