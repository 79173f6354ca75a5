/* The training layer's private side, shared by the trainer, the checkpoints and the tests:
 * the identity of a training split that a run's geometry records, the metadata checksum, the
 * plan's check at a given micro-batch, and the host halves of loading a checkpoint's tensors
 * (no device: the fuzz harness reaches their checks through them). */
#ifndef CLTRAIN_TRAIN_INTERNAL_H
#define CLTRAIN_TRAIN_INTERNAL_H

#include "cltrain/checkpoint.h"
#include "cltrain/data.h"
#include "cltrain/model.h"
#include "cltrain/train.h"
#include "cltrain/optim.h"

#include <stdint.h>

/* The training split's identity for clt_run_geometry: CRC-32C of its labels (or regression
 * targets) followed by the first MiB of its inputs as stored (u8 pixels or f32 values).
 * Thread-safe. */
uint32_t clt__checkpoint_data_crc32c(const clt_dataset *d);

/* The metadata checksum a checkpoint stores as "crc32c_metadata": CRC-32C over every other
 * metadata key and value (keys sorted bytewise, as strcmp), each as its bytes followed by a NUL.
 * The n pairs are not modified; a pair keyed "crc32c_metadata" is skipped. CLT_ERR_HOST_MEMORY
 * (the sort's index). Thread-safe. */
clt_status clt__checkpoint_meta_crc32c(const char *const *keys, const char *const *vals, int n,
                                       uint32_t *out);

/* clt_train_plan_check at micro-batch `batch` x `accumulate` (a set-up's attempt, after an
 * out-of-memory backoff too); the message is recorded in ctx (NULL: the thread's). */
clt_status clt__train_plan_check(clt_ctx *ctx, const struct clt_train_setup_params *p,
                                 size_t batch, int accumulate);
/* Device bytes clt_optim_create allocates for n parameters under p (CLT_MEM_OPTIM): the state
 * vectors, the weight-decay exemptions (weight_decay > 0) and the norm's buffer (clip_grad >
 * 0). The memory estimate and the optimizer share it. Thread-safe. */
uint64_t clt__optim_mem_bytes(const struct clt_optim_params *p, size_t n);

/* The host half of clt_checkpoint_load_model for a model laid out as params (nparams) and
 * buffers (nbuffers), as clt_model_param_info and clt_model_buffer_info describe them: every
 * parameter's tensor (F32, the parameter's shape, finite; a running variance not negative) into
 * host at the parameter's offset, every buffer's into bhost (f32) or chost (i64) at its offset;
 * for a plain state dict, no tensor the model lacks. host, bhost and chost hold what the offsets
 * reach. CLT_ERR_FORMAT or CLT_ERR_NUMERIC naming the tensor; the thread's message only. */
clt_status clt__checkpoint_read_model(const clt_checkpoint *ck,
                                      const struct clt_param_info *params, int nparams,
                                      const struct clt_buffer_info *buffers, int nbuffers,
                                      float *host, float *bhost, int64_t *chost);

/* The host half of clt_checkpoint_load_optim for one optimizer state ("exp_avg", "exp_avg_sq",
 * "momentum_buffer"): each parameter's "optim.{name}.{state}" tensor, checked as above (a second
 * moment not negative), into host at the parameter's offset. */
clt_status clt__checkpoint_read_optim_state(const clt_checkpoint *ck, const char *state,
                                            const struct clt_param_info *params, int nparams,
                                            float *host);

#endif
