/* Memory accounting: every device buffer cltrain allocates is counted by category, with the
 * current total and the peak, against a cap (the device's global memory, or less with
 * CLTRAIN_MAX_MEMORY=512M, which makes an allocation past it fail exactly like a real
 * out-of-memory on a smaller device). Host bookkeeping: nothing here waits for the device.
 * Not thread-safe (per ctx) unless a function says otherwise.
 *
 * Usage:
 *
 *     struct clt_mem_stats ms = clt_ctx_mem_stats(ctx);
 *     char peak[32];
 *     clt_format_bytes(ms.peak, peak, sizeof peak);   // "21.6 MiB"
 */
#ifndef CLTRAIN_ALLOC_H
#define CLTRAIN_ALLOC_H

#include "cltrain/export.h"

#include "cltrain/device.h"
#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct clt_mem_stats {
    uint64_t current;                      /* bytes allocated now */
    uint64_t peak;                         /* most bytes allocated at once */
    uint64_t by_category[CLT_MEM__COUNT];  /* bytes allocated now, per category */
    uint64_t peak_by_category[CLT_MEM__COUNT]; /* per-category peaks (not simultaneous) */
    uint64_t cap;                          /* allocations beyond this fail */
    bool cap_from_user;                    /* cap set by CLTRAIN_MAX_MEMORY or params */
    uint64_t device_total;                 /* CL_DEVICE_GLOBAL_MEM_SIZE */
};
CLT_API struct clt_mem_stats clt_ctx_mem_stats(const clt_ctx *ctx);

/* Resets the peaks to the current values (e.g. between benchmark phases). */
CLT_API void clt_ctx_mem_reset_peak(clt_ctx *ctx);

/* Parses "512M", "1.5G", "64k", "1048576" (binary units: K = 1024) into bytes. Grammar:
 * digits, an optional "." and digits, an optional unit K, M, G or T (any case, optionally
 * followed by "i"), an optional "B"; a fraction needs a unit and is rounded to the nearest byte.
 * Nothing else: no sign, spaces, hex, exponent, or a value beyond 2^64-1. CLT_ERR_INVALID_ARG (and
 * *out untouched) otherwise. Thread-safe. */
CLT_API clt_status clt_parse_size(const char *s, uint64_t *out);

/* Writes the memory report into dst (several lines): device total, cap, current and peak
 * bytes, and current and peak per category. Thread-safe for distinct ctxs. */
CLT_API void clt_mem_report(const clt_ctx *ctx, char *dst, size_t n);

/* "1.5 GiB", "300.0 MiB", "12 B". Thread-safe. */
CLT_API void clt_format_bytes(uint64_t bytes, char *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
