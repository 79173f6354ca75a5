/* The training layer's private side, shared by the trainer, the checkpoints and the tests:
 * the identity of a training split that a run's geometry records, and the plan's check at a
 * given micro-batch. */
#ifndef CLTRAIN_TRAIN_INTERNAL_H
#define CLTRAIN_TRAIN_INTERNAL_H

#include "cltrain/data.h"
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

#endif
