/* Getting a data set's batches onto the device. Two ways behind one interface, clt_loader:
 *   resident  - the whole split is copied once, as stored (u8 pixels or f32 values), and each
 *               shuffled batch is gathered, converted and standardised by a kernel: no per-step
 *               transfer at all;
 *   streaming - a host thread assembles each shuffled batch (rows and their labels) into a ring
 *               of pinned staging buffers and uploads it non-blocking on the transfer queue; the
 *               compute queue waits for the upload's event, never the host, and a kernel
 *               converts and standardises (the same kernel as resident: the same bits).
 * `auto` picks resident when the split fits in a stated fraction of the device memory cap.
 * Batches follow one shuffle, a pure function of (seed, epoch) by counter-based random numbers
 * (Philox4x32-10), in both ways, so training is bit-identical between them. clt_resident (a
 * split resident on the device, read in file order) also serves evaluation and prediction.
 * Not thread-safe: use a loader from one thread (it runs its own thread internally).
 *
 * Usage:
 *
 *     struct clt_input_norm norm = {.features = train.features, .scale = train.input_scale};
 *     struct clt_loader_params lp = clt_loader_default_params();
 *     lp.batch_size = 128;
 *     clt_loader *l;
 *     clt_loader_create(&l, ctx, &train, &norm, &lp);  // then clt_trainer_create(.., l, ..)
 */
#ifndef CLTRAIN_LOADER_H
#define CLTRAIN_LOADER_H

#include "cltrain/export.h"

#include "cltrain/data.h"
#include "cltrain/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How raw inputs become model inputs: x * scale / std[f] - mean[f] / std[f], i.e.
 * (x * scale - mean) / std, with mean and std of the scaled training inputs (NULL: 0 and 1).
 * On the device this is fma(x, scale / std[f], -mean[f] / std[f]) in float. */
struct clt_input_norm {
    size_t features;
    float scale;       /* 1/255 for IDX pixels, 1 for CSV */
    const float *mean; /* (features) or NULL */
    const float *std;  /* (features) or NULL */
};

/* ---- a split resident on the device ------------------------------------------------------- */

/* A split (inputs as stored and its labels or targets, when it has them) copied once to the device, with the per-feature
 * scale and shift of `norm`. Set-up waits are counted as CLT_WAIT_SETUP. Returns
 * CLT_ERR_INVALID_ARG (empty set, more than 2^31 samples), CLT_ERR_SHAPE (norm->features differs
 * from the data's), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_HOST_MEMORY or CLT_ERR_OPENCL. The data set
 * may be freed afterwards. */
typedef struct clt_resident clt_resident;
CLT_API clt_status clt_resident_create(clt_resident **out, clt_ctx *ctx, const clt_dataset *d,
                                       const struct clt_input_norm *norm);
CLT_API void clt_resident_free(clt_resident *r); /* no host wait; accepts NULL */
CLT_API size_t clt_resident_count(const clt_resident *r);
CLT_API size_t clt_resident_features(const clt_resident *r);
CLT_API clt_ctx *clt_resident_ctx(const clt_resident *r);
/* The labels (n) i32 or targets (n) f32 on the device, in file order (owned by r); NULL for a
 * split read without labels (clt_data_params.no_labels), which clt_predict takes but
 * clt_evaluate and the trainer refuse. */
CLT_API const clt_tensor *clt_resident_labels(const clt_resident *r);
/* Enqueues (compute queue, no host wait) the gather of B samples into x (B, F) f32, standardised,
 * and y (B) (the labels' dtype; NULL: inputs only; CLT_ERR_INVALID_ARG when the split has no
 * labels): samples order[start .. start + B) when order ((n) i32) is not NULL, else samples
 * start .. start + B in file order. */
CLT_API clt_status clt_resident_gather(clt_resident *r, const clt_tensor *order, size_t start,
                                       size_t B, clt_tensor *x, clt_tensor *y);

/* ---- the loader --------------------------------------------------------------------------- */

typedef enum clt_loader_mode {
    CLT_LOADER_AUTO = 0,  /* resident when it fits in resident_fraction of the memory cap */
    CLT_LOADER_RESIDENT,  /* whole split on the device, batches gathered by a kernel */
    CLT_LOADER_STREAMING  /* a host thread, pinned staging ring, non-blocking uploads */
} clt_loader_mode;
CLT_API const char *clt_loader_mode_name(clt_loader_mode m); /* "auto", "resident", "streaming" */
/* "auto", "resident" (or "yes", "device"), "streaming" (or "no", "stream", "host").
 * CLT_ERR_INVALID_ARG otherwise (message in clt_last_errmsg). Thread-safe. */
CLT_API clt_status clt_loader_mode_parse(const char *s, clt_loader_mode *out);

/* The most staging buffers a streaming loader may have: the ring only has to cover the
 * upload of the next batches while one is read, and each buffer costs a batch of device and
 * pinned host memory (1,000,000 allocated 7 GiB before failing). */
#define CLT_LOADER_MAX_PREFETCH 64

/* Augmentation of the training batches of an image data set (sample shape (C, H, W)), applied
 * per sample on the device by one kernel after the batch has been converted and standardised,
 * in this order: a horizontal flip with probability 1/2 (flip); a translation by dy, dx, each
 * a uniform integer in [-shift, shift], the uncovered pixels set to 0; the zeroing of one
 * cutout x cutout square whose centre is uniform over the image (clipped at the borders). The
 * fill value 0 is in the standardised space: raw 0 without feature standardisation, the
 * feature's training mean with it (--normalize). The draws are Philox numbers of
 * (seed, clt_rng_stream(CLT_RNG_DATA, epoch), position in the epoch's order): the same batches
 * on every device, with either loader, for any batch size, and a resumed run continues them.
 * All zero (the default): none. */
struct clt_augment {
    bool flip;
    int shift;  /* N: 0 .. CLT_AUGMENT_MAX pixels */
    int cutout; /* S: 0 .. CLT_AUGMENT_MAX pixels */
};
#define CLT_AUGMENT_MAX 65536
/* Parses "flip", "shift=N", "cutout=S", comma-separated, in any order, each at most once (e.g.
 * "shift=2,flip") into *out. CLT_ERR_INVALID_ARG with a one-line message in clt_last_errmsg
 * naming --augment and the text otherwise, e.g.
 *   --augment "flip,shift=x": shift needs a whole number of pixels, e.g. shift=2
 * Thread-safe. */
CLT_API clt_status clt_augment_parse(const char *text, struct clt_augment *out);
/* Whether a augments anything (flip, or a shift or cutout above 0). */
CLT_API bool clt_augment_enabled(const struct clt_augment *a);

struct clt_loader_params {
    clt_loader_mode mode;     /* default CLT_LOADER_AUTO */
    size_t batch_size;        /* the largest batch that will be asked for (default 128) */
    int prefetch;             /* streaming: staging buffers in the ring, 2 ..
                               * CLT_LOADER_MAX_PREFETCH (default 3) */
    bool pinned;              /* streaming: pinned (CL_MEM_ALLOC_HOST_PTR, mapped once) staging
                               * (default); false: pageable malloc'ed staging, for comparison */
    double resident_fraction; /* auto: resident when inputs + labels take at most this fraction
                               * of the ctx's memory cap (clt_ctx_mem_stats().cap); default 0.25 */
    long fail_at;             /* test hook: fail (CLT_ERR_IO) when batch fail_at (0-based, counted
                               * from clt_loader_start) is assembled; negative: never (default).
                               * The environment variable CLTRAIN_LOADER_FAIL_AT=N, read by
                               * clt_loader_create, overrides it. */
    struct clt_augment augment; /* of the batches clt_loader_next hands out (default none);
                                 * needs a data set with 3-D samples (C, H, W). Costs one more
                                 * (batch_size, F) f32 buffer: the batch before augmentation */
};
CLT_API struct clt_loader_params clt_loader_default_params(void);

typedef struct clt_loader clt_loader;

/* Creates a loader over d (which must stay valid and unchanged until clt_loader_free: the
 * streaming thread reads it) on ctx: chooses the mode, allocates the batch buffers and, for
 * resident, the split on the device; streaming allocates `prefetch` pinned staging buffers
 * and their device buffers. Set-up waits count as CLT_WAIT_SETUP. Returns CLT_OK,
 * CLT_ERR_INVALID_ARG (empty set, batch_size 0, prefetch outside 2 ..
 * CLT_LOADER_MAX_PREFETCH, fraction outside (0, 1], augmentation of flat samples or with a
 * shift or cutout outside 0 .. CLT_AUGMENT_MAX),
 * CLT_ERR_SHAPE (norm), CLT_ERR_OUT_OF_MEMORY, CLT_ERR_HOST_MEMORY or CLT_ERR_OPENCL. */
CLT_API clt_status clt_loader_create(clt_loader **out, clt_ctx *ctx, const clt_dataset *d,
                                     const struct clt_input_norm *norm,
                                     const struct clt_loader_params *p);
/* Stops the thread if it runs (clt_loader_stop), waits for the loader's outstanding copies and
 * consumers (one counted CLT_WAIT_SETUP wait when there are any) and frees everything.
 * Accepts NULL. */
CLT_API void clt_loader_free(clt_loader *l);

CLT_API clt_ctx *clt_loader_ctx(const clt_loader *l);
/* resident or streaming, never auto */
CLT_API clt_loader_mode clt_loader_mode_of(const clt_loader *l);
/* One phrase saying how batches reach the device and why, for a run's header line, e.g.
 * "data resident on the device (auto: 47.2 MiB is within 25% of the 139.8 GiB cap)". Owned by
 * the loader. */
CLT_API const char *clt_loader_describe(const clt_loader *l);
CLT_API size_t clt_loader_count(const clt_loader *l);     /* samples in the split (n) */
CLT_API size_t clt_loader_features(const clt_loader *l);  /* F */
CLT_API size_t clt_loader_max_batch(const clt_loader *l); /* params.batch_size */
CLT_API clt_dtype clt_loader_label_dtype(const clt_loader *l); /* i32 labels or f32 targets */
/* The input scaling the loader was created with (a copy: mean and std, when not NULL, are
 * owned by the loader and valid until clt_loader_free). The trainer stores it in checkpoints. */
CLT_API struct clt_input_norm clt_loader_norm(const clt_loader *l);
/* The augmentation of the batches it hands out (params.augment; all zero for none). */
CLT_API struct clt_augment clt_loader_augment(const clt_loader *l);

/* Which batches a run takes: epoch e is the shuffle of (seed, e) (or file order without
 * shuffle) cut into batches of batch_size, the last one partial unless
 * drop_last; global step g is batch g % steps_per_epoch of epoch g / steps_per_epoch. A run
 * yields steps first_step .. total_steps - 1. */
struct clt_loader_order {
    size_t batch_size; /* <= clt_loader_max_batch */
    bool shuffle;
    bool drop_last;
    uint64_t seed;
    long first_step;
    long total_steps;
    long batches_per_epoch; /* 0: from n, batch_size and drop_last; else at most that many,
                             * and each epoch uses only its first batches_per_epoch batches
                             * (the trainer's gradient accumulation with drop_last drops the
                             * micro-batches of a last partial optimizer step) */
    /* Data-parallel (dist.h): batch_size is the global batch, and this loader yields only its
     * replica's slice of each batch of B samples: [floor(B shard_lo / shard_total),
     * floor(B shard_hi / shard_total)), shard_lo and shard_hi the prefix sums of the
     * replicas' shares before and after it (clt_comm_slice). The slice may be empty (size 0,
     * x and y NULL) when B is small. shard_total 0: the whole batch. batch_size must then
     * not exceed what this slice of it can hold: its largest slice <= clt_loader_max_batch. */
    uint64_t shard_lo, shard_hi, shard_total;
};
/* Steps per epoch for n samples: n / B with drop_last, else ceil(n / B). Thread-safe. */
CLT_API long clt_loader_steps_per_epoch(size_t n, size_t batch_size, bool drop_last);

/* The device bytes clt_loader_create(ctx, d, norm, p) would allocate, added per category into
 * by_category (index clt_mem_category), without allocating anything; p->mode auto is resolved
 * against ctx's cap as clt_loader_create does. clt_resident_mem_estimate: the same for
 * clt_resident_create. Thread-safe for distinct ctxs. */
CLT_API void clt_loader_mem_estimate(const clt_ctx *ctx, const clt_dataset *d,
                                     const struct clt_loader_params *p, uint64_t *by_category);
CLT_API void clt_resident_mem_estimate(const clt_dataset *d, uint64_t *by_category);

/* Starts a run (streaming: starts the thread, which begins filling the ring at once). No host
 * wait. CLT_ERR_INVALID_ARG for a bad order, CLT_ERR_STATE if a run is already started,
 * CLT_ERR_HOST_MEMORY, or CLT_ERR_UNSUPPORTED if the thread cannot be created. */
CLT_API clt_status clt_loader_start(clt_loader *l, const struct clt_loader_order *o);

/* One batch on the device. x and y are views owned by the loader, valid until the next call of
 * clt_loader_next or clt_loader_stop. */
struct clt_batch {
    clt_tensor *x; /* (B, F) f32, standardised, then augmented (params.augment) */
    clt_tensor *y; /* (B) i32 labels or f32 targets */
    size_t size;   /* B */
    int epoch;     /* 0-based */
    long step;     /* global step g */
};
/* Enqueues on the compute queue what makes the next batch of the run available there: resident,
 * the gather from the split (and, at an epoch's first batch, the non-blocking upload of its
 * order); streaming, a barrier on the batch's upload events, then the conversion kernel and a
 * marker that lets the ring reuse the staging buffer; then, in both, the augmentation kernel
 * when params.augment asks for one. Never waits for the device; streaming
 * may wait for the loader thread to have the batch ready (host-side, measured as the stall
 * time). A failure of the loader thread (injected with fail_at, or an OpenCL or memory error)
 * is returned here with its message in the ctx. CLT_ERR_STATE when no run is started or the
 * run's batches are exhausted. */
CLT_API clt_status clt_loader_next(clt_loader *l, struct clt_batch *out);

/* Ends the run: the thread is told to stop, is joined, and every copy it enqueued refers only
 * to events that complete. No device wait. Idempotent; CLT_OK when no run is started. */
CLT_API clt_status clt_loader_stop(clt_loader *l);

/* Counters since creation. */
struct clt_loader_stats {
    long batches;         /* batches handed out by clt_loader_next */
    long uploads;         /* streaming: batches uploaded by the thread */
    double bytes;         /* streaming: bytes uploaded (inputs and labels) */
    long waits;           /* host waits made by the loader thread (CLT_WAIT_LOADER): before
                           * reusing a staging buffer it waits for its previous upload */
    double wait_s;        /* time the loader thread spent in those waits. The ring holds the
                           * training thread at most about 2 x prefetch batches ahead of the
                           * device, so when the device is the bottleneck both this and
                           * stall_s grow (back-pressure); stall_s well above wait_s means
                           * the host-side assembly is too slow */
    double stall_s;       /* time clt_loader_next waited for the thread to have a batch ready */
    double timed_bytes;   /* profiling ctx only: bytes of the uploads whose events were read */
    double upload_ms;     /* profiling ctx only: device time (START to END) of those uploads */
};
/* Thread-safe with respect to the loader's own thread. */
CLT_API struct clt_loader_stats clt_loader_stats(clt_loader *l);

#ifdef __cplusplus
}
#endif
#endif
