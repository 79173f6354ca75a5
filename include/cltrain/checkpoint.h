/* Checkpoints as safetensors files that PyTorch loads without renaming: "{i}.weight" (OUT, IN)
 * and "{i}.bias" (OUT) as nn.Sequential's state_dict for the same layer list, optimizer state
 * as "optim.{i}.weight.exp_avg" etc., and __metadata__ with model (the spec), input_scale,
 * input_mean, input_std, classes, task, features, step, epoch, seed and optimizer (JSON).
 * Written to a temporary file, flushed and renamed. Not thread-safe (per ctx). */
#ifndef CLTRAIN_CHECKPOINT_H
#define CLTRAIN_CHECKPOINT_H

#include "cltrain/train.h"

#ifdef __cplusplus
extern "C" {
#endif

struct clt_checkpoint_info {
    const char *model_text; /* the canonical spec */
    struct clt_input_norm norm;
    int classes;
    clt_task task;
    long step;
    int epoch;              /* epochs completed */
    uint64_t seed;
    /* fp16 runs: the loss scaler's state (i32, see clt_scaler_state), saved as the tensor
     * "amp.scaler_state" so that --resume continues with the same scale, growth tracker and
     * skipped-step count; NULL otherwise. Not filled by clt_checkpoint_get_info. */
    const clt_tensor *scaler_state;
};

/* Saves the model's parameters (a counted host wait, CLT_WAIT_SAVE) and, when optim is not
 * NULL, its state and hyper-parameters. CLT_ERR_IO when the file cannot be written; the final
 * name is then untouched. */
clt_status clt_checkpoint_save(const char *path, clt_model *m, const clt_optim *optim,
                               const struct clt_checkpoint_info *info);

typedef struct clt_checkpoint clt_checkpoint;
/* Opens and validates a checkpoint (format, and the metadata cltrain needs). */
clt_status clt_checkpoint_open(clt_checkpoint **out, const char *path);
void clt_checkpoint_close(clt_checkpoint *ck);
/* The metadata; norm's arrays point into ck. */
struct clt_checkpoint_info clt_checkpoint_get_info(const clt_checkpoint *ck);
/* The optimizer's hyper-parameters as saved (JSON text), or NULL. */
const char *clt_checkpoint_optimizer(const clt_checkpoint *ck);
/* Copies the weights into a model built from the checkpoint's spec: every parameter must be
 * present with the model's shape and dtype F32 (CLT_ERR_FORMAT naming the tensor otherwise). */
clt_status clt_checkpoint_load_model(const clt_checkpoint *ck, clt_model *m);
/* Restores optimizer state tensors and the step count (CLT_ERR_FORMAT if the checkpoint has no
 * state for this optimizer). */
clt_status clt_checkpoint_load_optim(const clt_checkpoint *ck, clt_optim *o, const clt_model *m);

/* Restores the loss scaler's state saved with an fp16 run into `state` (the scaler's i32
 * tensor). CLT_ERR_FORMAT when the checkpoint has none or its shape differs. A counted host
 * wait (setup). */
clt_status clt_checkpoint_load_scaler(const clt_checkpoint *ck, clt_tensor *state);

#ifdef __cplusplus
}
#endif
#endif
