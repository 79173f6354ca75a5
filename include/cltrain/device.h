/* Devices and the ctx. Every device, of any vendor, is an OpenCL platform/device pair; the
 * selector grammar and the `auto` choice are written once, here, as pure functions over
 * descriptors. A clt_ctx owns one device, its context, an in-order compute queue, an in-order
 * transfer queue, the program cache, the memory accountant and the last error message.
 * A ctx, and everything made on it, is used from one thread at a time; the functions without a
 * ctx say whether they are thread-safe. Only clt_ctx_finish, clt_ctx_wait and clt_ctx_free wait
 * for the device (and the trainer's pacing, clt__ctx_pace).
 *
 * Usage:
 *
 *     struct clt_ctx_params cp = clt_ctx_default_params();
 *     cp.device = "gpu";                      // NULL: $CLTRAIN_DEVICE, else "auto"
 *     clt_ctx *ctx;
 *     if (clt_ctx_create(&ctx, &cp) == CLT_OK) puts(clt_ctx_device(ctx)->device_name);
 *     clt_ctx_free(ctx);
 */
#ifndef CLTRAIN_DEVICE_H
#define CLTRAIN_DEVICE_H

#include "cltrain/export.h"

#include "cltrain/errors.h"
#include "cltrain/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* OpenCL's handles, declared as <CL/cl.h> declares them (cl_platform_id is
 * `struct _cl_platform_id *`, cl_event `struct _cl_event *`): opaque here, so that no public
 * header needs the OpenCL headers. cltrain/opencl.h is where they are used. */
struct _cl_platform_id;
struct _cl_device_id;
struct _cl_event;

/* An OpenCL event (the same type as cl_event), given by the non-blocking copies to a caller
 * that orders its own OpenCL work after them (cltrain/opencl.h: clt_ctx_wait; release it with
 * clReleaseEvent). Pass NULL where none is wanted. */
typedef struct _cl_event *clt_event;

typedef enum clt_device_type {
    CLT_DEVICE_GPU = 0,
    CLT_DEVICE_ACCELERATOR = 1,
    CLT_DEVICE_CPU = 2,
    CLT_DEVICE_OTHER = 3
} clt_device_type;

/* "gpu", "accelerator", "cpu", "other" */
CLT_API const char *clt_device_type_name(clt_device_type t);

/* What cltrain knows of one device; filled by clt_device_list, or by hand in tests. */
typedef struct clt_device_info {
    int index;          /* position in the listing, 0-based, over all platforms */
    int platform_index; /* P of the P:D selector */
    int device_index;   /* D of the P:D selector, within its platform */
    clt_device_type type;
    char platform_name[128];
    char platform_version[128];
    char device_name[128];
    char vendor[128];
    char driver_version[128];
    char opencl_c_version[64];
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem;    /* bytes */
    uint64_t max_alloc;     /* bytes, largest single buffer */
    uint64_t local_mem;     /* bytes */
    size_t max_work_group;
    bool fp16;              /* cl_khr_fp16 reported */
    bool fp64;              /* cl_khr_fp64 reported, or double config non-zero */
    bool serial_runtime;    /* quirk: the platform's runtime must not be called from two host
                               threads at once, against OpenCL 1.2 (Oclgrind 21.10: the data
                               loader then fills batches on the training thread) */
    struct _cl_platform_id *platform; /* cl_platform_id; NULL in synthetic lists */
    struct _cl_device_id *device;     /* cl_device_id; NULL in synthetic lists */
} clt_device_info;

/* Lists every device of every platform. *out is malloc'ed (free with free()); *n may be 0 when
 * no platform exists, which is not an error here. Thread-safe. */
CLT_API clt_status clt_device_list(clt_device_info **out, int *n);

/* The selector used when the caller gives none: $CLTRAIN_DEVICE if set and non-empty, else
 * "auto". A command-line flag should be passed explicitly and wins over both. */
CLT_API const char *clt_device_default_selector(void);

/* Pure choice over descriptors. Grammar: "auto", "gpu", "cpu", "accelerator", an index "N" as
 * listed, "P:D" (platform, device), or a case-insensitive substring of the device name, the
 * platform name or the platform version, which is where PoCL names itself ("pocl"; the first
 * match in listing order wins). Surrounding blanks are ignored. A selector of decimal digits
 * only is always an index (never a name; one beyond the list, however long, matches nothing),
 * and "P:D" needs digits only on both sides; anything else ("1x", "-1", "1:0junk", "+1") is
 * only ever a name substring, so a stray character never selects a device by number. `auto`: the
 * best GPU, else the best accelerator, else the best CPU; best = most compute units x clock, then
 * most global memory, then first listed. Returns the chosen position in devs through *chosen, or
 * CLT_ERR_NO_DEVICE with a one-line message listing what was found and how to get a CPU
 * device. Thread-safe. */
CLT_API clt_status clt_device_select(const clt_device_info *devs, int n, const char *selector,
                                     int *chosen);
/* Every device the selector matches, for ranks that take one each (MPI: local rank k takes
 * match k): positions in devs through idx (the caller's array of at least n entries) and their
 * number through *count. The grammar is clt_device_select's: "auto" matches every device of the
 * type auto would choose (GPU, else accelerator, else CPU), "gpu"/"cpu"/"accelerator" every
 * device of that type, these best first as clt_device_select ranks them (ties in listing
 * order); an index or "P:D" matches that one device; a name substring every device containing
 * it, in listing order. So idx[0] is always what clt_device_select chooses. CLT_ERR_NO_DEVICE
 * (*count 0) with clt_device_select's message when nothing matches. Thread-safe. */
CLT_API clt_status clt_device_matches(const clt_device_info *devs, int n, const char *selector,
                                      int *idx, int *count);

typedef struct clt_ctx clt_ctx;

struct clt_ctx_params {
    const char *device;  /* selector; NULL means clt_device_default_selector() */
    bool profiling;      /* queue profiling on both queues; see profile.h */
    bool sync_debug;     /* every launch waits and checks its status: slow, to localise a
                          * failing kernel (--sync-debug) */
    const char *cache_dir; /* NULL: $CLTRAIN_CACHE_DIR, $XDG_CACHE_HOME/cltrain, ~/.cache/cltrain */
    int disk_cache;      /* 1 on, 0 off, -1: on unless CLTRAIN_CACHE=0 */
    uint64_t max_memory; /* cap in bytes; 0: $CLTRAIN_MAX_MEMORY if set, else the device's */
};
CLT_API struct clt_ctx_params clt_ctx_default_params(void);

/* Creates a ctx on the selected device. On failure *out is NULL and the message is available
 * from clt_last_errmsg(): CLT_ERR_NO_DEVICE (the selector matches nothing), CLT_ERR_INVALID_ARG
 * for a bad environment variable (CLTRAIN_MAX_MEMORY, or CLTRAIN_GEMM other than own, clblast
 * or auto: checked here, though the GEMM reads it later), CLT_ERR_OPENCL, CLT_ERR_HOST_MEMORY. */
CLT_API clt_status clt_ctx_create(clt_ctx **out, const struct clt_ctx_params *p);
/* Finishes outstanding work (a host wait) and releases everything the ctx owns. Free every
 * object made on the ctx first (tensors, models, loaders, ...). Accepts NULL. */
CLT_API void clt_ctx_free(clt_ctx *ctx);

/* The last failure message on this ctx ("" if none); owned by the ctx, valid until its next
 * failing call. */
CLT_API const char *clt_ctx_errmsg(const clt_ctx *ctx);
/* The ctx's device, owned by the ctx and valid until clt_ctx_free. (Its OpenCL context and
 * queues: cltrain/opencl.h.) */
CLT_API const clt_device_info *clt_ctx_device(const clt_ctx *ctx);
CLT_API bool clt_ctx_profiling(const clt_ctx *ctx);
/* The folder of the ctx's on-disk cache of compiled kernel programs (clt_ctx_params.cache_dir,
 * else $CLTRAIN_CACHE_DIR, $XDG_CACHE_HOME/cltrain, ~/.cache/cltrain), or NULL when the cache is
 * off (disk_cache 0, CLTRAIN_CACHE=0, no folder to use, or one that cannot be created). Owned by
 * the ctx, valid until clt_ctx_free. Cannot fail. */
CLT_API const char *clt_ctx_cache_dir(const clt_ctx *ctx);

/* Checks that the device computes what cltrain asks: builds the elementwise kernels (or loads
 * them from the disk cache), uploads 1000 floats, computes b = 2a, then b += -1 a on the device
 * (exact in fp32), reads b back and compares it with a bit for bit. Leaves nothing allocated
 * and waits for the device (a counted host wait, CLT_WAIT_SETUP). The build and the cache show
 * in clt_ctx_stats. Returns CLT_OK; CLT_ERR_UNSUPPORTED when the values came back changed (the
 * message names the first differing element); CLT_ERR_BUILD (with the compiler's log),
 * CLT_ERR_OPENCL, CLT_ERR_OUT_OF_MEMORY or CLT_ERR_HOST_MEMORY from the steps, each with the
 * message in the ctx. `cltrain selfcheck` is this call. Not thread-safe (per ctx). */
CLT_API clt_status clt_ctx_selfcheck(clt_ctx *ctx);

/* Why the host waits for the device. Every blocking call in cltrain goes through
 * clt_ctx_wait/clt_ctx_finish with one of these and is counted. */
typedef enum clt_wait_reason {
    CLT_WAIT_LOG = 0,  /* reading a loss to print */
    CLT_WAIT_EVAL,     /* evaluation */
    CLT_WAIT_SAVE,     /* checkpoint */
    CLT_WAIT_READ,     /* an explicit blocking read or write */
    CLT_WAIT_TIMING,   /* finish before reading a clock */
    CLT_WAIT_DEBUG,    /* --sync-debug */
    CLT_WAIT_SETUP,    /* set-up and tear-down */
    CLT_WAIT_LOADER,   /* the streaming loader's thread, before reusing a staging buffer
                        * (counted by the loader, see loader.h; folded into the training
                        * loop's reports, never into clt_ctx_stats) */
    CLT_WAIT_REDUCE,   /* data-parallel: reading a step's gradients to sum them over the
                        * replicas (one per step), and the loss and evaluation sums */
    CLT_WAIT__COUNT
} clt_wait_reason;
CLT_API const char *clt_wait_reason_name(clt_wait_reason r);

/* Finishes both queues (a counted host wait). */
CLT_API clt_status clt_ctx_finish(clt_ctx *ctx, clt_wait_reason why);

/* Counters of one ctx: programs built and loaded, host waits by reason (--profile). */
struct clt_ctx_stats {
    long compiles;        /* programs compiled from source */
    long disk_cache_hits; /* programs loaded from the on-disk binary cache */
    long disk_cache_rejects; /* cache files found but ignored (truncated, corrupt, foreign) */
    long host_waits[CLT_WAIT__COUNT];
    long host_waits_total;
    /* Waits that kept the host from queueing more than a few training steps ahead of the
     * device (so that a signal stops a run within those steps): the device still had a step
     * queued, so these stall nothing and are not host waits. Counted when the step was not
     * done yet. */
    long paced;
};
CLT_API struct clt_ctx_stats clt_ctx_stats(const clt_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
