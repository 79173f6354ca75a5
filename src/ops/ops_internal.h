/* Checks shared by the ops' C wrappers. */
#ifndef CLTRAIN_OPS_INTERNAL_H
#define CLTRAIN_OPS_INTERNAL_H

#include "cltrain/ops.h"

#include <stdbool.h>
#include <stddef.h>

/* CLT_OK if a and b share a ctx, a dtype (when same_dtype) and an element count. */
clt_status clt__check_pair(const clt_tensor *a, const clt_tensor *b, bool same_dtype,
                           const char *op);
bool clt__is_float(clt_dtype d);

/* Program options, formatted here for the ops and for clt_ops_program_variants alike
 * (src/ops/variants.c), so the list of programs cannot drift from what the ops build. */
#define CLT__BIAS_COLS 16 /* columns per work-group of linear_backward_bias (CLT_BIAS_COLS) */
void clt__opts_dtype(char *dst, size_t n, clt_dtype x);                   /* -DX_DTYPE */
void clt__opts_cast(char *dst, size_t n, clt_dtype src, clt_dtype dstd);  /* cast */
void clt__opts_linear(char *dst, size_t n, clt_dtype y, clt_dtype b, clt_dtype dy);
struct clt_gemm_choice;
void clt__opts_gemm(char *dst, size_t n, const struct clt_gemm_choice *c, clt_trans ta,
                    clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd);
/* Whether a GEMM choice's kernel reads and writes 16-bit storage (cl/gemm.cl's GEMM_MIXED): the
 * packed direct kernel and the tiled one. */
bool clt__gemm_takes_16bit(const struct clt_gemm_choice *c);
/* The kernel for 16-bit operands when the chosen one does not take them (CLBlast, an unpacked
 * direct kernel, dot products): the device's built-in packed (CPU) or tiled (GPU) choice,
 * else a small packed block that fits anywhere. No fp32 copy of the operands is made. */
struct clt_gemm_choice clt__gemm_mixed_choice(const clt_device_info *dev);

#endif
