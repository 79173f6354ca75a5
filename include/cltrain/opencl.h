/* Raw OpenCL access, kept apart from the rest of the API (which needs no OpenCL headers): a
 * ctx's OpenCL context and queues, a tensor's buffer, counted waits on events, and for
 * developers cltrain's kernel programs: which it may build on a device, with which options,
 * from which source (what `cltrain kernels` prints). Include
 * it only where you enqueue your own OpenCL work next to cltrain's; it includes <CL/cl.h>.
 *
 * Usage:
 *
 *     #include <cltrain/opencl.h>
 *     cl_event ev;
 *     clt_tensor_write(t, pinned_ptr, false, &ev);              // on the transfer queue
 *     clEnqueueReadBuffer(clt_ctx_compute_queue(ctx), clt_tensor_mem(t), ...);
 *     clt_ctx_wait(ctx, CLT_WAIT_READ, 1, &ev);                 // a counted host wait
 *     clReleaseEvent(ev);
 */
#ifndef CLTRAIN_OPENCL_H
#define CLTRAIN_OPENCL_H

#include "cltrain/export.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "cltrain/device.h"
#include "cltrain/status.h"
#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ctx's OpenCL context and queues, owned by the ctx and valid until clt_ctx_free (retain
 * an OpenCL handle to keep it longer). Work enqueued on the queues directly is ordered with
 * cltrain's own (compute queue: kernels and fills; transfer queue: copies) but not counted. */
CLT_API cl_context clt_ctx_cl_context(const clt_ctx *ctx);
CLT_API cl_command_queue clt_ctx_compute_queue(const clt_ctx *ctx);
CLT_API cl_command_queue clt_ctx_transfer_queue(const clt_ctx *ctx);

/* Waits for the events (a counted host wait, reason `why`). CLT_ERR_OPENCL when the wait or
 * one of the events failed. */
CLT_API clt_status clt_ctx_wait(clt_ctx *ctx, clt_wait_reason why, cl_uint n,
                                const cl_event *events);

/* The tensor's underlying buffer (not owned: retain it to keep it past clt_tensor_free); the
 * tensor starts clt_tensor_offset elements into it. */
CLT_API cl_mem clt_tensor_mem(const clt_tensor *t);

/* ---- for developers: cltrain's kernel programs (`cltrain kernels`) ------------------------- */
/* Receives one program: its comma-separated cl/ stems and the options the op passes (the device
 * defines of clt_program_options come on top). */
typedef void (*clt_program_variant_fn)(const char *files, const char *options, void *user);
/* Calls fn for every program the ops may build on dev: each cl/ program with every set of
 * options an op can produce (dtypes, the GEMM choices of the tuner's table and the built-in
 * defaults that fit dev, in every layout). Used by the kernel portability guard
 * (`cltrain kernels --list`). dev may be synthetic (no OpenCL handles). Thread-safe. */
CLT_API void clt_ops_program_variants(const clt_device_info *dev, clt_program_variant_fn fn,
                                      void *user);

/* The complete source the library compiles for `files`: cl/common.cl, then each stem, each
 * after a #line directive (from $CLTRAIN_KERNEL_DIR when set, as for a build). *out is
 * malloc'ed; the caller frees it. CLT_ERR_IO when a stem names no source (message in
 * clt_last_errmsg()). Thread-safe. */
CLT_API clt_status clt_program_assemble(const char *files, char **out);

/* The complete compiler options for a program with the op's `options` (may be NULL) on dev:
 * the OpenCL C version and the device defines (CLT_DEVICE_GPU/CPU/OTHER, CLT_HAS_FP16,
 * CLT_HAS_FP64, CLT_WG), then `options`. dev may be synthetic. Thread-safe. */
CLT_API void clt_program_options(const clt_device_info *dev, const char *options, char *dst,
                                 size_t n);

#ifdef __cplusplus
}
#endif
#endif
