/* Private interface of the tuning data (src/ops/tune.c): the constructors of GEMM choices that the
 * tuning table and the GEMM dispatch's fixed fallbacks share, and the call in clt_ctx_create
 * that fills the ctx's copy. */
#ifndef CLTRAIN_TUNE_INTERNAL_H
#define CLTRAIN_TUNE_INTERNAL_H

#include "cltrain/tune.h"

/* Initialisers of a struct clt_gemm_choice, every field set (the fields: cltrain/tune.h).
 * Direct: tm x tn of C per work-item, vw-wide vectors along N (veck 0, outer products) or K
 * (veck 1, dot products), operands read in place, wgm x wgn work-items per group. Packed: the
 * direct kernel over K slices of kb packed in private memory, bm x bn register blocks per
 * work-item. Tiled: the GPU family, wgm x wgn work-items of tm x tn, K tiles of kb staged in
 * local memory. */
#define CLT_GEMM_CHOICE_DIRECT(tm_, tn_, vw_, veck_, wgm_, wgn_)                                   \
    {                                                                                              \
        .kernel = CLT_GEMM_DIRECT, .tm = tm_, .tn = tn_, .vw = vw_, .veck = veck_, .mdim = 0,      \
        .wgm = wgm_, .wgn = wgn_, .kb = 0, .bm = 1, .bn = 1                                        \
    }
#define CLT_GEMM_CHOICE_PACKED(tm_, tn_, vw_, kb_, bm_, bn_)                                       \
    {                                                                                              \
        .kernel = CLT_GEMM_DIRECT, .tm = tm_, .tn = tn_, .vw = vw_, .veck = 0, .mdim = 0,          \
        .wgm = 1, .wgn = 1, .kb = kb_, .bm = bm_, .bn = bn_                                        \
    }
#define CLT_GEMM_CHOICE_TILED(wgm_, wgn_, tm_, tn_, kb_)                                           \
    {                                                                                              \
        .kernel = CLT_GEMM_TILED, .tm = tm_, .tn = tn_, .vw = 1, .veck = 0, .mdim = 0,             \
        .wgm = wgm_, .wgn = wgn_, .kb = kb_, .bm = 1, .bn = 1                                      \
    }

/* Fills ctx->tune: the built-in defaults, then the tuning file if one exists and is valid
 * (an invalid one is ignored, its reason left in the ctx's message), then CLTRAIN_GEMM.
 * Needs the program cache initialised. Fails only for a bad CLTRAIN_GEMM value
 * (CLT_ERR_INVALID_ARG). */
clt_status clt__tune_init(clt_ctx *ctx);

#endif
