/* Checkpoints as safetensors files that PyTorch loads without renaming: "{i}.weight" (OUT, IN),
 * or (OUT, IN, K, K) for a convolution, and "{i}.bias" (OUT) as nn.Sequential's state_dict for
 * the same layer list, batchnorm's buffers ("{i}.running_mean", "{i}.running_var",
 * "{i}.num_batches_tracked") beside them, a residual block's layers as "{i}.body.{j}.*" and
 * "{i}.proj.{j}.*" (the names of the model's clt_param_info and clt_buffer_info), optimizer state
 * as "optim.{i}.weight.exp_avg" etc., and __metadata__ with format ("cltrain-1"), model (the
 * spec), input_scale, input_mean, input_std, classes, class_names (JSON array of strings,
 * when the data had names: image folders), task, features, input_shape (models with a shaped
 * input: "1,28,28"), step, epoch, seed,
 * optimizer (JSON), run (JSON: the run's geometry, see clt_run_geometry), recipe (JSON: the
 * run's hyper-parameters, see clt_run_recipe), crc32c (JSON:
 * tensor name -> CRC-32C of its bytes, 8 hex digits, verified on every open) and
 * crc32c_metadata (8 hex digits: CRC-32C over every other metadata key and value, keys sorted
 * bytewise, each key and each value followed by a NUL byte; verified on every open). Written to a
 * temporary file, flushed and renamed. Also opens plain safetensors state dicts (PyTorch's
 * save_file(model.state_dict())) as a source of weights. Not thread-safe (per ctx).
 *
 * Usage:
 *
 *     clt_checkpoint *ck;
 *     if (clt_checkpoint_open(&ck, "run.safetensors") == CLT_OK) {
 *         struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
 *         // info.model_text is the spec: clt_model_create from it, then
 *         // clt_checkpoint_load_model(ck, m)
 *         clt_checkpoint_close(ck);
 *     }
 */
#ifndef CLTRAIN_CHECKPOINT_H
#define CLTRAIN_CHECKPOINT_H

#include "cltrain/export.h"

#include "cltrain/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The run a checkpoint belongs to: what --resume must keep for the step count to mean the
 * same samples. Saved as the metadata "run" by clt_checkpoint_save when `present`. */
struct clt_run_geometry {
    bool present;          /* false: the file has none (older cltrain files, other tools) */
    size_t batch_size;     /* the micro-batch */
    int accumulate;        /* micro-batches per optimizer step */
    long steps_per_epoch;  /* optimizer steps */
    long total_steps;      /* of the run as planned */
    int epochs;            /* of the run as planned (total_steps rounded up to epochs) */
    bool drop_last;
    uint64_t dropout_seed; /* the seed of dropout masks and shuffling */
    char data_name[256];   /* the data set as named (--data), for messages */
    size_t data_samples;   /* training samples */
    uint32_t data_crc32c;  /* the training split's identity: CRC-32C of its labels (or
                              targets), then of the first MiB of its inputs as stored */
    /* Replicas that trained it (data-parallel, dist.h; 1 alone; files from before: 1). Not
     * checked on resume: the global batch fixes which samples a step takes, so another number
     * of replicas continues the same run, with other slices per replica (batch statistics,
     * dropout masks and the sums' order differ). */
    int replicas;
};

/* The run's recipe: the hyper-parameters that decide how its steps train, so that a resumed run
 * can continue it (cltrain's --resume takes each value its command line does not give, and
 * refuses one given differently unless told --change-recipe). Saved as the metadata "recipe"
 * by clt_checkpoint_save when `present`: {"optimizer":"adam","lr":0.01,"momentum":0,
 * "dampening":0,"nesterov":false,"beta1":0.9,"beta2":0.999,"eps":1e-08,"weight_decay":0,
 * "schedule":"cosine","warmup_steps":0,"step_size":7,"gamma":0.1,"min_lr":0,"clip_grad":0,
 * "total_steps":14,
 * "epochs":2,"max_steps":0,"precision":"f32","label_smoothing":0,"shuffle":true,
 * "normalize":false,"augment":{"flip":false,"shift":0,"cutout":0}} (floats in the shortest
 * text that reads back as the same float; "clip_grad" may be absent, as in files written before
 * clipping existed: 0). clt_trainer_save fills it from the trainer. */
struct clt_run_recipe {
    bool present;                  /* false: the file has none (older cltrain, other tools) */
    struct clt_optim_params optim; /* every field, whatever the kind; total_steps as planned */
    int epochs;                    /* clt_train_params.epochs */
    long max_steps;                /* clt_train_params.max_steps (0: no limit) */
    clt_dtype precision;           /* the model's storage: f32, bf16 or f16 */
    float label_smoothing;
    bool shuffle;
    bool normalize;                /* inputs standardised by per-feature statistics */
    struct clt_augment augment;    /* of the training batches */
};

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
    struct clt_run_geometry run;
    struct clt_run_recipe recipe; /* open: parsed, checked by clt_optim_validate */
    /* The shape of one input sample ("input_shape", written for a model with a shaped input,
     * e.g. (1, 28, 28) for IDX images; unused entries 0); all 0 when the file has none (a flat
     * model, or a file from before). Filled by open; ignored by save, which asks the model. */
    size_t input_shape[3];
    /* The classes' names ("class_names"; image folders), `classes` of them, or NULL when the
     * file has none. Save writes them when given and every name is UTF-8; open fills them
     * (owned by the checkpoint) after checking there is one string per class. */
    const char *const *class_names;
    /* A language model's vocabulary ("vocab"), as clt_vocab_to_json writes it, or NULL. Save
     * writes it when given; open checks that it reads back (clt_vocab_from_json) with
     * `classes` symbols and fills it (owned by the checkpoint). */
    const char *vocab;
};

/* Saves the model's parameters (a counted host wait, CLT_WAIT_SAVE) and, when optim is not
 * NULL, its state and hyper-parameters, with a CRC-32C of every tensor and, when
 * info->run.present, the run's geometry and, when info->recipe.present, its recipe. CLT_ERR_IO
 * when the file cannot be written; the final name is then untouched. */
CLT_API clt_status clt_checkpoint_save(const char *path, clt_model *m, const clt_optim *optim,
                                       const struct clt_checkpoint_info *info);

typedef struct clt_checkpoint clt_checkpoint;
/* Opens and validates a cltrain checkpoint: the safetensors format; "format" absent or
 * "cltrain-1" (another cltrain-N is refused as an unknown version); the metadata cltrain needs,
 * integers written as integers; the metadata consistent with itself (the spec's last layer
 * has `classes` outputs, 1 for regression; features); the metadata's CRC-32C when the file has
 * "crc32c_metadata" (a mismatch: "its metadata was changed after it was written"; files of
 * other tools and of cltrain before it have none and open as before); every tensor's CRC-32C
 * when the file
 * has "crc32c" (a mismatch names the tensor; a file without checksums opens, see
 * clt_checkpoint_has_checksums); "run" and "recipe" when present (a recipe's values checked as
 * clt_optim_validate and the CLI's flags would). CLT_ERR_IO (cannot read), CLT_ERR_FORMAT
 * (a one-line message naming the file: "not a cltrain checkpoint" for a file without
 * cltrain's metadata), CLT_ERR_HOST_MEMORY. Messages: clt_last_errmsg(). */
CLT_API clt_status clt_checkpoint_open(clt_checkpoint **out, const char *path);
/* As clt_checkpoint_open, but a safetensors file without cltrain's metadata (no "model", and
 * "format" absent or not cltrain's, e.g. PyTorch's save_file of a state_dict, "format":"pt")
 * also opens, as a plain state dict: clt_checkpoint_is_plain is then true, get_info gives
 * zeros (no spec, classes, norm or run), and clt_checkpoint_load_model matches tensors by
 * name and shape only, refusing tensors the model does not have. For --init. */
CLT_API clt_status clt_checkpoint_open_weights(clt_checkpoint **out, const char *path);
/* True for a plain state dict opened by clt_checkpoint_open_weights. */
CLT_API bool clt_checkpoint_is_plain(const clt_checkpoint *ck);
/* True when the file carried "crc32c" and every tensor matched it (files of other tools, and
 * of cltrain before checksums, have none: the caller may say so). */
CLT_API bool clt_checkpoint_has_checksums(const clt_checkpoint *ck);
/* --resume's check: the run about to continue (`now`, present) against the checkpoint's
 * geometry. Refused (CLT_ERR_INVALID_ARG, one line naming every difference and the flag that
 * fixes it, "or start a new run with --init"): another effective batch (batch size x
 * accumulate), steps per epoch (--drop-last), dropout/shuffle seed, training sample count or
 * data CRC. Accepted: a different split of the same effective batch into micro-batch x
 * accumulate (--auto-batch; the step count keeps its meaning), other --epochs/--steps, and a
 * checkpoint without geometry (older files: the caller may note it). */
CLT_API clt_status clt_checkpoint_check_run(const clt_checkpoint *ck,
                                            const struct clt_run_geometry *now);
/* Frees ck and everything obtained from it (strings, norm arrays). Accepts NULL. */
CLT_API void clt_checkpoint_close(clt_checkpoint *ck);
/* The metadata; its strings and norm's arrays point into ck (valid until clt_checkpoint_close).
 * Opening, checking and reading metadata are host-only: no device, no wait. */
CLT_API struct clt_checkpoint_info clt_checkpoint_get_info(const clt_checkpoint *ck);
/* The optimizer's hyper-parameters as saved (JSON text, owned by ck), or NULL. */
CLT_API const char *clt_checkpoint_optimizer(const clt_checkpoint *ck);
/* Copies the weights into a model built from the checkpoint's spec: every parameter must be
 * present with the model's shape and dtype F32 (CLT_ERR_FORMAT naming the tensor otherwise)
 * and finite, a batchnorm running variance also not negative (CLT_ERR_NUMERIC naming the
 * tensor, the first bad element and its value). A plain state dict must hold
 * nothing else (CLT_ERR_FORMAT naming the extra tensor). On failure the model is unchanged.
 * A blocking upload (clt_model_write_params). */
CLT_API clt_status clt_checkpoint_load_model(const clt_checkpoint *ck, clt_model *m);
/* Restores optimizer state tensors and the step count (CLT_ERR_FORMAT if the checkpoint has no
 * state for this optimizer; CLT_ERR_NUMERIC for a non-finite value or a negative second moment
 * "exp_avg_sq", naming the tensor, the element and its value). A
 * counted host wait (setup). */
CLT_API clt_status clt_checkpoint_load_optim(const clt_checkpoint *ck, clt_optim *o,
                                             const clt_model *m);

/* Restores the loss scaler's state saved with an fp16 run into `state` (the scaler's i32
 * tensor). CLT_ERR_FORMAT when the checkpoint has none or its shape differs. A counted host
 * wait (setup). With state NULL (a run without loss scaling, fp32 or bf16): CLT_ERR_FORMAT if
 * the checkpoint has a scaler state (it was saved by an fp16 run), else CLT_OK. */
CLT_API clt_status clt_checkpoint_load_scaler(const clt_checkpoint *ck, clt_tensor *state);

#ifdef __cplusplus
}
#endif
#endif
