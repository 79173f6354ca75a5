/* The ctx's private layout, shared by the runtime's modules (device, program, tensor, alloc,
 * profile). Nothing above the runtime includes this. */
#ifndef CLTRAIN_CTX_INTERNAL_H
#define CLTRAIN_CTX_INTERNAL_H

#include "cltrain/device.h"
#include "cltrain/profile.h"
#include "cltrain/opencl.h"
#include "cltrain/tensor.h"
#include "runtime/program_internal.h"

#include <stdatomic.h>

#define CLT_ERRMSG_MAX 16384 /* room for a compiler's build log */

struct clt__program_entry; /* program.c */

/* profile.c */
struct clt__pending {
    char name[48];
    int kind; /* clt_profile_kind */
    size_t bytes;
    cl_event ev;
    cl_event after[2]; /* CLT_PROFILE_DATA_WAIT: the uploads the compute queue waited for */
};
struct clt__profile_row {
    struct clt_profile_row r;
};
struct clt__profiler {
    struct clt__pending *pending;
    int npending, cap_pending;
    struct clt__profile_row *rows;
    int nrows, cap_rows;
};
struct clt__kernel_entry;  /* program.c */

/* Per-ctx state of a layer above the runtime (the ops keep their kernel slots and GEMM tuning
 * data here, src/ops/tune.c), held without knowing its layout: its owner creates it on
 * first use and sets `release`, which clt_ctx_free calls first, while the kernel cache, the
 * queues and the context are still alive. */
struct clt__ctx_ext {
    void *state; /* NULL until first use */
    void (*release)(clt_ctx *ctx, void *state);
};

struct clt_ctx {
    clt_device_info dev;
    cl_context context;
    cl_command_queue compute;
    cl_command_queue transfer;
    bool profiling;
    bool sync_debug; /* every launch waits and checks its status (a debugging aid) */
    struct clt__profiler prof;

    /* program cache (program.c) */
    struct clt__program_entry *programs;
    struct clt__kernel_entry *kernels;
    char *cache_dir; /* NULL when the disk cache is off */

    struct clt__ctx_ext ops; /* the ops' state (src/ops/tune.c) */

    /* accountant (alloc.c) */
    uint64_t mem_current[CLT_MEM__COUNT];
    uint64_t mem_total_current;
    uint64_t mem_peak;
    uint64_t mem_peak_by_cat[CLT_MEM__COUNT];
    uint64_t mem_cap; /* 0: none besides the device */
    bool mem_cap_from_user;

    struct clt_ctx_stats stats;
    char errmsg[CLT_ERRMSG_MAX];
};

/* Live-object counters (device.c). */
extern atomic_long clt__live_ctxs, clt__live_buffers, clt__live_tensors, clt__live_pinned,
    clt__live_programs;

#endif
