/* cltrain: a portable neural-network trainer on OpenCL. Includes every public header: the ctx
 * and devices, statuses and errors, tensors, the model and its spec, optimizers, data and the
 * loader, losses for a loop of one's own, training and evaluation, checkpoints, and safe
 * output files; none of them needs the OpenCL headers. Raw OpenCL access (a ctx's queues, a
 * tensor's buffer, waits on events) is cltrain/opencl.h, included separately. Everything else
 * is private to the library.
 *
 * Usage:
 *
 *     #include <cltrain/cltrain.h>   // cc prog.c $(pkg-config --cflags --libs cltrain)
 *     clt_ctx *ctx;
 *     struct clt_ctx_params cp = clt_ctx_default_params();
 *     if (clt_ctx_create(&ctx, &cp) != CLT_OK) puts(clt_last_errmsg());
 */
#ifndef CLTRAIN_H
#define CLTRAIN_H

#include "cltrain/alloc.h"
#include "cltrain/checkpoint.h"
#include "cltrain/data.h"
#include "cltrain/device.h"
#include "cltrain/dist.h"
#include "cltrain/errors.h"
#include "cltrain/export.h"
#include "cltrain/loader.h"
#include "cltrain/loss.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/outfile.h"
#include "cltrain/profile.h"
#include "cltrain/spec.h"
#include "cltrain/status.h"
#include "cltrain/tensor.h"
#include "cltrain/text.h"
#include "cltrain/train.h"

#endif
