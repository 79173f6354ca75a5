/* Private helpers shared by the library's modules: error recording with the single-exit
 * pattern, the always-on assertion for programmer errors, and small utilities. */
#ifndef CLTRAIN_INTERNAL_H
#define CLTRAIN_INTERNAL_H

#include "cltrain/status.h"
#include "cltrain/opencl.h"
#include "cltrain/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct clt_ctx;

/* Live library objects across all ctxs (ctxs, tensors, buffers, pinned buffers, programs):
 * returns to zero when everything has been freed (the tests' leak check). Thread-safe. */
struct clt__live_objects {
    long ctxs, buffers, tensors, pinned, programs;
};
struct clt__live_objects clt__live_objects(void);

/* Programmer errors (NULL handles, impossible internal shapes): print file:line and abort.
 * User-caused conditions never come here; they return a status. */
#define CLT_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "cltrain: internal error at %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#if defined(__GNUC__)
#define CLT__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLT__PRINTF(f, a)
#endif

/* Records a failure message for ctx (may be NULL) and for the calling thread, and returns
 * status so that callers can write `st = clt__fail(ctx, CLT_ERR_IO, "...", ...)`. */
clt_status clt__fail(struct clt_ctx *ctx, clt_status status, const char *fmt, ...)
    CLT__PRINTF(3, 4);

/* Records an OpenCL failure: "<what>: CL_INVALID_VALUE (-30)". Returns CLT_ERR_OPENCL, or
 * CLT_ERR_OUT_OF_MEMORY for the allocation failures. */
clt_status clt__fail_cl(struct clt_ctx *ctx, int cl_error, const char *what);

/* Check macros for the single-exit style: record and jump to `fail:`. `st` must be in scope. */
#define CLT_TRY(expr)                                                                              \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != CLT_OK) goto fail;                                                               \
    } while (0)
#define CLT_CHECK_CL(ctx, err, what)                                                               \
    do {                                                                                           \
        if ((err) != CL_SUCCESS) {                                                                 \
            st = clt__fail_cl((ctx), (err), (what));                                               \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
#define CLT_FAIL(ctx, status, ...)                                                                 \
    do {                                                                                           \
        st = clt__fail((ctx), (status), __VA_ARGS__);                                              \
        goto fail;                                                                                 \
    } while (0)

/* malloc/calloc that record CLT_ERR_HOST_MEMORY on failure. */
#define CLT_ALLOC(ctx, ptr, count)                                                                 \
    do {                                                                                           \
        (ptr) = calloc((count) != 0 ? (size_t)(count) : 1u, sizeof *(ptr));                        \
        if (!(ptr)) CLT_FAIL((ctx), CLT_ERR_HOST_MEMORY, "out of host memory (%s)", #ptr);         \
    } while (0)

/* The whole file as a NUL-terminated malloc'ed buffer (length in *len), or NULL (errno set)
 * when it cannot be opened or read, is not a regular file (a directory: EISDIR; a FIFO, socket
 * or device: EINVAL, opened without blocking and never read) or is larger than max_bytes
 * (EFBIG, checked before anything is allocated). */
char *clt__read_file(const char *path, size_t max_bytes, size_t *len);

/* "a directory", "a FIFO (named pipe)", "a character device", "a block device", "a socket" or
 * "not a regular file": what a stat mode (st_mode) names, for messages about a file that is not
 * a regular one. */
const char *clt__file_kind_name(unsigned mode);

/* Opens `path` read-only for a reader that needs a regular file. The open does not block (a FIFO
 * without a writer cannot hold it: O_NONBLOCK, cleared again before returning) and anything but
 * a regular file is refused after fstat, before a byte is read, with the message
 *   <path>: is a FIFO (named pipe), not a regular file: <why>
 * (`why` says what the reader reads, e.g. "data is read from a file"). On success *fd is the
 * descriptor (the caller closes it) and *size the file's size. CLT_ERR_IO otherwise, *fd -1. */
clt_status clt__open_regular(const char *path, const char *why, int *fd, uint64_t *size);

/* The library's one strict integer parser (every integer it reads from text: selectors,
 * environment variables, tuning choices, sizes, checkpoint metadata). The whole string must be
 * decimal digits with an optional leading '-' (clt__parse_i64 only): no spaces, no '+', no
 * "0x", no trailing text, not empty; the value must lie in [lo, hi] (no silent saturation).
 * Returns true and sets *out, or false leaving *out unchanged. Records no message: the caller
 * knows what the number was for. Thread-safe. */
/* The folder of cltrain's disk caches (kernel programs, decoded image sets): `given` when not
 * NULL or empty, else $CLTRAIN_CACHE_DIR, $XDG_CACHE_HOME/cltrain, ~/.cache/cltrain; created
 * if missing. False when there is none (no HOME) or it cannot be created. Thread-safe. */
bool clt__cache_dir_resolve(const char *given, char *dir, size_t n);

bool clt__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool clt__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* 64-bit FNV-1a, continued from `h` (start with CLT__FNV_SEED). */
#define CLT__FNV_SEED 0xcbf29ce484222325ull
unsigned long long clt__hash(unsigned long long h, const void *data, size_t n);

/* Data-parallel slices (dist.h, clt_comm_slice): where the slice whose shares' prefix sum is
 * `cum` begins in a batch of n, with all shares totalling `total`: floor(n cum / total). The
 * communicator and the loader both cut batches with it, so their slices agree. Pure. */
static inline size_t clt__slice_boundary(size_t n, uint64_t cum, uint64_t total)
{
    if (cum >= total) return n;
    return (size_t)((double)n * (double)cum / (double)total);
}
/* The largest slice [cum_lo, cum_hi) of total takes of any batch of 1 to max items (rounding
 * can give a smaller batch one more item than `max` gets). A loop over the batch sizes: for
 * set-up, not per batch. */
size_t clt__slice_max(size_t max, uint64_t cum_lo, uint64_t cum_hi, uint64_t total);

/* A view of base's storage as another dtype: numel(dims) elements of `dtype` from base's first
 * byte (which must fall on a `dtype` element), e.g. a scratch buffer of the model's precision
 * seen as i32 words. CLT_ERR_SHAPE when they run past the buffer. */
clt_status clt__tensor_view_as(clt_tensor **out, const clt_tensor *base,
                               clt_dtype dtype, int ndim, const size_t *dims);

/* Back-pressure: waits for `ev` (the end of an earlier training step) so that the host queues
 * only a few steps ahead of the device. Not a host wait (the device has the steps after `ev`
 * queued): counted in clt_ctx_stats().paced when `ev` had not completed. */
clt_status clt__ctx_pace(struct clt_ctx *ctx, cl_event ev);

#endif
