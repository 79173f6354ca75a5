/* Private interface of the tuning data (src/tune.c): the call in clt_ctx_create that fills the
 * ctx's copy. */
#ifndef CLTRAIN_TUNE_INTERNAL_H
#define CLTRAIN_TUNE_INTERNAL_H

#include "cltrain/tune.h"

/* Fills ctx->tune: the built-in defaults, then the tuning file if one exists and is valid
 * (an invalid one is ignored, its reason left in the ctx's message), then CLTRAIN_GEMM.
 * Needs the program cache initialised. Fails only for a bad CLTRAIN_GEMM value
 * (CLT_ERR_INVALID_ARG). */
clt_status clt__tune_init(clt_ctx *ctx);

#endif
