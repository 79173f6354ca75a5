/* Profiling from OpenCL events: with clt_ctx_params.profiling, every kernel cltrain launches and
 * every copy it enqueues carries an event; the events are aggregated per name (calls, device
 * time, bytes) as they complete, without host waits. GEMMs run by CLBlast are timed by wall
 * clock around a finish, in profiling mode only (CLBlast's event was seen to cover only part of
 * its work). Not thread-safe (per ctx).
 *
 * Usage:
 *
 *     struct clt_ctx_params cp = clt_ctx_default_params();
 *     cp.profiling = true;
 *     // ... create the ctx, train ...
 *     clt_profile_print(ctx, stdout);           // calls, ms, share of device time per kernel
 */
#ifndef CLTRAIN_PROFILE_H
#define CLTRAIN_PROFILE_H

#include "cltrain/export.h"

#include "cltrain/device.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clt_profile_kind {
    CLT_PROFILE_KERNEL = 0, /* device time from the event's START to END */
    CLT_PROFILE_UPLOAD,     /* host to device copy: device time and bytes */
    CLT_PROFILE_DOWNLOAD,   /* device to host copy */
    CLT_PROFILE_WALL,       /* wall clock around finished queues (CLBlast GEMMs) */
    CLT_PROFILE_DATA_WAIT   /* the compute queue idle, its earlier work done, waiting for an
                             * upload of data: max(0, upload END - marker END) per batch */
} clt_profile_kind;

struct clt_profile_row {
    char name[48];
    clt_profile_kind kind;
    long calls;
    double total_ms;
    double bytes;
};

/* Waits for every recorded event (one counted host wait, CLT_WAIT_TIMING) and folds them into
 * the table. CLT_OK and nothing to do when profiling is off. */
CLT_API clt_status clt_profile_collect(clt_ctx *ctx);
/* Copies up to max rows (largest total first) and returns the number of rows there are. */
CLT_API int clt_profile_rows(const clt_ctx *ctx, struct clt_profile_row *rows, int max);
/* Collects, then prints the table: a title line naming the device, a header line, then per
 * name calls, total ms, mean us, share of device time, and for copies bytes and GB/s. */
CLT_API clt_status clt_profile_print(clt_ctx *ctx, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
