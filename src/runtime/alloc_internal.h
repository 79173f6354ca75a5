/* Reference-counted device buffers shared by a tensor and its views (alloc.c). */
#ifndef CLTRAIN_ALLOC_INTERNAL_H
#define CLTRAIN_ALLOC_INTERNAL_H

#include "runtime/ctx_internal.h"

struct clt__buffer {
    clt_ctx *ctx;
    cl_mem mem;
    size_t bytes;
    clt_mem_category cat;
    int refs;
};

/* Allocates `bytes` (accounted under `cat`, checked against the cap; CLT_ERR_OUT_OF_MEMORY
 * with the full report otherwise). Device buffers are touched with a fill of zero bytes. */
clt_status clt__buffer_alloc(clt_ctx *ctx, size_t bytes, clt_mem_category cat, cl_mem_flags flags,
                             struct clt__buffer **out);
void clt__buffer_retain(struct clt__buffer *b);
void clt__buffer_release(struct clt__buffer *b);

#endif
