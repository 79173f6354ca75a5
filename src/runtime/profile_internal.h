/* The profiler's private state (one per ctx) and the recording calls used by the launch and
 * copy paths. */
#ifndef CLTRAIN_PROFILE_INTERNAL_H
#define CLTRAIN_PROFILE_INTERNAL_H

#include "runtime/ctx_internal.h"

#include "cltrain/profile.h"

/* Records an enqueued command's event (ownership passes to the profiler). */
void clt__profile_event(clt_ctx *ctx, const char *name, clt_profile_kind kind, size_t bytes,
                        cl_event ev);
/* Records how long the compute queue waited for data: `ready` is a marker enqueued on the
 * compute queue just before a barrier on the n (<= 2) `uploads`; the wait is the time from the
 * marker's end to the last upload's end, if positive. Takes `ready`, retains the uploads. */
void clt__profile_data_wait(clt_ctx *ctx, const char *name, cl_event ready, cl_uint n,
                            const cl_event *uploads);
/* Adds a wall-clock measurement (ms) under name. */
void clt__profile_wall(clt_ctx *ctx, const char *name, double ms);
void clt__profile_free(clt_ctx *ctx);

#endif
