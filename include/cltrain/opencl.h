/* Raw OpenCL access, kept apart from the rest of the API (which needs no OpenCL headers): a
 * ctx's OpenCL context and queues, a tensor's buffer, counted waits on events, and for
 * developers the build of cltrain's kernel programs (what `cltrain kernels` prints). Include
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

#ifdef __cplusplus
}
#endif
#endif
