/* Training and evaluation on one ctx: the training loop (batches from a clt_loader, resident or
 * streamed, see loader.h; gradient accumulation over micro-batches; loss accumulated on the
 * device and read only at log points; evaluation after each epoch on a resident test split;
 * checkpoints; Ctrl-C through a flag), evaluation and prediction over a resident split, and
 * the training set-up as one object (model, optimizer, loaders, trainer) with its memory
 * estimate, report, dry run and out-of-memory backoff. Not thread-safe (per ctx).
 *
 * Usage:
 *
 *     struct clt_train_params tp = clt_train_default_params();
 *     tp.epochs = 5;
 *     tp.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
 *     clt_trainer *t;
 *     clt_trainer_create(&t, m, loader, test_resident, &tp);
 *     clt_trainer_run(t);                       // then clt_trainer_save(t, "run.safetensors")
 *     clt_trainer_free(t);
 */
#ifndef CLTRAIN_TRAIN_H
#define CLTRAIN_TRAIN_H

#include "cltrain/export.h"

#include "cltrain/alloc.h"
#include "cltrain/data.h"
#include "cltrain/dist.h"
#include "cltrain/loader.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/text.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the loop reports through the callback. */
typedef enum clt_train_event_kind {
    CLT_EVENT_LOG = 0, /* every log_every steps: mean training loss since the last log point */
    CLT_EVENT_EPOCH,   /* end of an epoch: mean training loss of the epoch */
    CLT_EVENT_EVAL,    /* evaluation on the test split after an epoch */
    CLT_EVENT_SAVE,    /* a checkpoint was written */
    CLT_EVENT_BACKOFF  /* clt_train_setup with auto_batch: out of memory, retrying with a
                        * smaller micro-batch (batch_size, accumulate: the new ones) */
} clt_train_event_kind;

struct clt_train_event {
    clt_train_event_kind kind;
    int epoch;              /* 1-based (0: EVAL of the starting weights, eval_start) */
    int epochs;
    long step;              /* optimizer steps taken so far */
    long total_steps;       /* steps the run will take */
    long steps_per_epoch;
    double loss;            /* LOG, EPOCH: training loss; EVAL: test loss */
    double accuracy;        /* EVAL (classification): fraction correct; else NAN */
    double lr;              /* learning rate of the last step */
    double samples_per_s;   /* LOG, EPOCH: since the previous report */
    double elapsed_s;       /* since the start of the run */
    double epoch_s;         /* EPOCH: wall time of the epoch (queues finished) */
    const char *path;       /* SAVE: the file written */
    size_t batch_size;      /* micro-batch (samples per forward pass) */
    int accumulate;         /* micro-batches per optimizer step */
    const char *message;    /* BACKOFF: the out-of-memory message of the failed attempt */
    clt_dtype precision;    /* the model's (mixed precision: f16, bf16) */
    long skipped;           /* f16: optimizer steps skipped on inf/NaN gradients so far, as
                               read at the last log point (0 otherwise) */
    double loss_scale;      /* f16: the loss scale read at the last log point (1 otherwise) */
    /* Clipping (optim.clip_grad > 0): the global L2 norm of the gradients of the last step
     * before the last log point (before clipping, of the unscaled gradients; read in that log
     * point's one wait); NAN without clipping. */
    double grad_norm;
    /* Counters: the ctx's (the training thread's host waits by reason) with the loader
     * thread's waits folded in under CLT_WAIT_LOADER (and in host_waits_total). */
    struct clt_ctx_stats stats;
    struct clt_loader_stats loader; /* the training loader's counters */
    /* Data-parallel (p.comm): seconds this replica spent in gradient reductions so far, from
     * the moment its gradients are on the host (the wait for them is its own step's compute):
     * the sum over the replicas, which includes waiting for the slowest to arrive, and the
     * write back's enqueue; the steps they cover, and the bytes each step's reduction sums
     * per replica (0 without a comm). */
    double reduce_s;
    long reduce_steps;
    size_t reduce_bytes;
};

struct clt_train_params {
    int epochs;              /* default 10 */
    long max_steps;          /* stop after this many optimizer steps in all (0: no limit) */
    size_t batch_size;       /* samples per forward pass, the micro-batch (default 128) */
    /* Micro-batches per optimizer step (default 1; 0 counts as 1). Their gradients are summed
     * on the device (clt_model_backward with accumulate) and every micro-batch's loss gradient
     * is scaled by 1 / (the samples of the whole step), so a step's gradient is the gradient
     * of the mean loss over all its samples, as one batch of batch_size * accumulate would
     * give (within fp32 summation order). The effective batch E = batch_size * accumulate:
     * optimizer step k of an epoch takes samples [k E, (k+1) E) of the epoch's order, in
     * micro-batches of batch_size; a last partial step has fewer (its last one partial) and
     * is scaled by its own sample count; drop_last drops a last partial *step*. Steps,
     * log_every, save_every, max_steps and the schedules count optimizer steps. Dropout
     * draws a mask per micro-batch, and batchnorm normalises each micro-batch by its own
     * statistics and updates its running statistics once per micro-batch (as PyTorch does
     * with gradient accumulation), so a batchnorm model's step is not exactly one batch of E. */
    int accumulate;
    bool shuffle;            /* default true: a new permutation each epoch from the seed */
    bool drop_last;          /* drop a last partial batch (default false) */
    uint64_t seed;           /* shuffling (and the model's dropout, through the model) */
    long log_every;          /* steps between log points (default 100; 0: only at epoch ends) */
    /* Evaluate the starting weights before the first step (default false): a run starting at
     * step 0 (not a resume) with a test split or text emits CLT_EVENT_EVAL with epoch 0 and
     * step 0 first, as nanoGPT's "step 0" line (the loss of an --init's weights). */
    bool eval_start;
    float label_smoothing;   /* classification */
    struct clt_optim_params optim;
    const char *save_path;   /* write a checkpoint at the end (NULL: none) */
    long save_every;         /* also every N steps (0: never) */
    /* What checkpoints need to rebuild the model is not repeated here: the trainer takes it
     * from what it was given. The spec from the model, the task from the training loader's
     * labels (i32 labels: classification; f32 targets: regression, whose model must have one
     * output), the classes from the model's outputs (1 for regression), the input scaling
     * from the loader (clt_loader_norm). So a checkpoint saved with these defaults loads in
     * `cltrain eval` and `cltrain predict`. */
    /* The class names stored in checkpoints (one per class of the model), or NULL (default):
     * what the model and loader cannot know, e.g. an image folder's class folders
     * (clt_dataset.class_names). */
    const char *const *class_names;
    /* The training data's identity, stored in checkpoints with the run's geometry and compared
     * by clt_trainer_resume: its name (--data; NULL: "") and the split's CRC-32C (see
     * clt_run_geometry; clt_train_setup_create fills it from train_set when 0). */
    const char *data_name;
    uint32_t data_crc32c;
    void (*on_event)(const struct clt_train_event *e, void *user);
    void *user;
    /* Checked before every step (NULL: never): when it reads non-zero the run stops at a step
     * boundary, writes a checkpoint to save_path if one is set, and returns
     * CLT_ERR_INTERRUPTED. Set it from a SIGINT handler (the library installs none). */
    const volatile sig_atomic_t *interrupt;
    /* Data-parallel training (dist.h; NULL: this trainer alone). This replica's end: batch_size
     * is then the *global* micro-batch, of which the replica takes its slice
     * (clt_comm_slice, rank order: slices of one batch are consecutive in the epoch's order);
     * the model's and the loader's largest batch need only hold the largest slice
     * (clt_train_setup sizes them so). After backward the flat gradients are summed over the
     * replicas (read into pinned host memory, one counted host wait CLT_WAIT_REDUCE per step,
     * the sum, written back) and every replica takes the same step; the loss and the evaluation (each
     * replica evaluates its slice of the test split) are summed at the points where they are
     * read; batch-norm running statistics are averaged over the replicas before every
     * evaluation and checkpoint; dropout draws stream (micro-batch, rank). Replica 0 alone
     * calls on_event and writes checkpoints; every replica checks at the start and at each
     * checkpoint that all parameters are bit-identical (CLT_ERR_STATE otherwise). A stop
     * (interrupt) seen by any replica stops all at the same step boundary. */
    clt_comm *comm;
    /* A language model's data (NULL: the loader's batches): a model whose first layer is
     * embed (clt_spec_takes_tokens) trains on this sampler's windows instead, and
     * clt_trainer_create then takes no loader (NULL) and no test split. Micro-batch j of
     * optimizer step s is the sampler's training batch s * accumulate + j (drawn on the device
     * from the seed and that number: no upload, and a resumed run continues the same
     * sequence); its B must be batch_size and its T the model's input length. The loss is
     * cross-entropy at every position, the mean over the step's B * T * accumulate tokens
     * (logs and events report it per token, in nats); max_steps gives the run's length
     * (epochs is ignored) and an "epoch" is the steps whose tokens reach the training split's
     * size: evaluation on the sampler's fixed validation batches follows each, and the run's
     * end. Not with a comm or label smoothing. The sampler must outlive the trainer. */
    clt_text_sampler *text;
    /* Text: the training split's tokens (for the epoch's length and the checkpoint's
     * geometry); set with `text`. */
    size_t text_tokens;
    /* Text: the vocabulary as clt_vocab_to_json writes it, stored in checkpoints ("vocab"), so
     * that eval, generate and --resume encode text as this run did (NULL: none). */
    const char *vocab;
};
CLT_API struct clt_train_params clt_train_default_params(void);

typedef struct clt_trainer clt_trainer;

/* Creates the optimizer for the model (the model exists, so its state is born on the model's
 * device) and a trainer that takes its batches from `train` and evaluates on `test` (may be
 * NULL) after each epoch. Both must live on the model's ctx (CLT_ERR_DEVICE_MISMATCH) and
 * outlive the trainer; p->batch_size must not exceed the model's or the loader's largest
 * batch (CLT_ERR_INVALID_ARG); regression targets with a model of more than one output are
 * CLT_ERR_SHAPE. */
CLT_API clt_status clt_trainer_create(clt_trainer **out, clt_model *model, clt_loader *train,
                                      clt_resident *test, const struct clt_train_params *p);
/* Frees the trainer and its optimizer (not the model or the loaders) after finishing the
 * queues (a counted host wait, setup). Accepts NULL. */
CLT_API void clt_trainer_free(clt_trainer *t);
/* The trainer's optimizer, owned by the trainer. */
CLT_API clt_optim *clt_trainer_optim(clt_trainer *t);
/* Restores optimizer state, step and epoch from a checkpoint written by this trainer's
 * clt_trainer_save (the model's weights are restored by the caller). Refused (the checkpoint's
 * statuses and messages): a checkpoint of another run geometry (clt_checkpoint_check_run:
 * effective batch, steps per epoch, seed, data), of another task or number of classes, or
 * with a loss-scaler state when this run has no loss scaling (or none when it has). */
CLT_API clt_status clt_trainer_resume(clt_trainer *t, const char *path);
/* Runs until the epochs are done or max_steps reached. A step makes no blocking call: host
 * waits happen at log points, epoch ends (the loss is read), evaluations and checkpoints only
 * (streaming: the loop may wait for the loader thread to have a batch ready, a host-side wait
 * reported as loader.stall_s). CLT_ERR_NUMERIC when the training loss becomes NaN or infinite
 * (message: the step range); CLT_ERR_INTERRUPTED when p->interrupt was set; a loader failure's
 * status (e.g. CLT_ERR_IO) with its message. The loader's thread is stopped and joined on
 * every path. */
CLT_API clt_status clt_trainer_run(clt_trainer *t);
/* Writes model, optimizer state and metadata to a safetensors file (atomically): a counted
 * host wait (CLT_WAIT_SAVE), as clt_checkpoint_save. */
CLT_API clt_status clt_trainer_save(clt_trainer *t, const char *path);

/* Mean loss and accuracy of the model over a resident split, in batches of batch_size; one
 * counted host wait (CLT_WAIT_EVAL). confusion (classes x classes, row = true label, column =
 * predicted) is filled when non-NULL. accuracy is NAN for regression. A split without labels
 * or targets (clt_data_params.no_labels) is CLT_ERR_INVALID_ARG. */
struct clt_eval_result {
    double loss, accuracy;
    size_t count;
};
CLT_API clt_status clt_evaluate(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                                struct clt_eval_result *out, long *confusion);
/* A language model's validation loss: the mean cross-entropy over every position of the
 * sampler's fixed evaluation batches (nats per token; bits per character is loss / ln 2 for
 * char tokens) and the fraction of positions whose most likely token is the target, count the
 * positions. The model takes the sampler's windows (its first layer embed, T its input length,
 * B at most its largest batch: CLT_ERR_SHAPE otherwise). Its buffers are made and freed here;
 * one counted host wait (CLT_WAIT_EVAL). */
CLT_API clt_status clt_evaluate_text(clt_model *m, clt_text_sampler *s,
                                     struct clt_eval_result *out);
/* Predicted class (or value, regression) and class probabilities for every sample:
 * classes (n) and probs (n, N), caller-owned arrays, either may be NULL. The split's labels,
 * if it has any, are not read: inputs alone (clt_data_params.no_labels) will do. One counted
 * host wait (CLT_WAIT_EVAL). */
CLT_API clt_status clt_predict(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                               int32_t *classes, float *probs);

/* ---- the training set-up, its memory, and out-of-memory backoff --------------------------- */

/* Everything a training run allocates, described without allocating: the model of `spec`,
 * its optimizer, the training loader over `train_set`, the test split resident on the device,
 * and the trainer. */
struct clt_train_setup_params {
    const clt_spec *spec;
    size_t in_features, outputs;
    const clt_dataset *train_set;    /* must outlive the set-up (the streaming loader reads it) */
    const clt_dataset *test_set;     /* evaluated after each epoch; NULL: none */
    struct clt_input_norm norm;
    struct clt_model_params model;   /* max_batch is set to the micro-batch */
    struct clt_loader_params loader; /* batch_size is set to the micro-batch */
    struct clt_train_params train;   /* batch_size (micro-batch) and accumulate as asked */
    /* start from this checkpoint's weights (fresh optimizer; a plain safetensors state dict
     * is accepted, see clt_checkpoint_open_weights) or */
    const char *init_path;
    const char *resume_path; /* continue this checkpoint's run (weights, optimizer, step) */
    /* On CLT_ERR_OUT_OF_MEMORY during create or before the run's first optimizer step
     * completes: free everything of the failed attempt, take the largest divisor of the
     * effective batch E = batch_size * accumulate that is at most half the micro-batch (for a
     * power of two, half), as micro-batch, with accumulate = E / micro-batch, and retry, down
     * to a micro-batch of 1. Off by default. */
    bool auto_batch;
    /* A language model's text instead of train_set and test_set (both NULL): the set-up makes
     * its device sampler (clt_text_sampler_create: B the micro-batch, T = in_features, the
     * seed train.seed, eval_batches) and the trainer trains on it (clt_train_params.text).
     * outputs must be the vocabulary's size. Must outlive the set-up. */
    const clt_text *text;
    size_t eval_batches; /* text: fixed validation batches (0: the sampler's default, 20) */
};
CLT_API struct clt_train_setup_params clt_train_setup_default_params(void);

/* Bytes a set-up allocates on the device, per category (index clt_mem_category). */
struct clt_mem_estimate {
    uint64_t by_category[CLT_MEM__COUNT];
    uint64_t total; /* their sum: allocated from create until free */
};
/* The set-up of p with micro-batch `batch`, predicted from the spec's layer widths, the
 * optimizer's kind and the data sets' sizes, without allocating anything (the loader's
 * `auto` mode resolves against ctx's cap). It equals what the accountant shows after
 * clt_train_setup_create at that micro-batch (tests/train/test_memory.c checks this), and a step or
 * an evaluation allocates nothing more (the trainer makes the evaluation's buffers at
 * creation), so it is also the run's peak. CLT_ERR_INVALID_ARG for a
 * spec that does not validate. Thread-safe. */
CLT_API clt_status clt_train_mem_estimate(const clt_ctx *ctx,
                                          const struct clt_train_setup_params *p, size_t batch,
                                          struct clt_mem_estimate *out);
/* The accountant's report (clt_mem_report: device total, cap, current and peak by category)
 * followed by the estimates for micro-batch `batch` and for the next larger one (2 x batch),
 * each with its categories and whether it fits under the cap. Thread-safe for distinct ctxs. */
CLT_API void clt_train_mem_report(const clt_ctx *ctx, const struct clt_train_setup_params *p,
                                  size_t batch, char *dst, size_t n);

typedef struct clt_train_setup clt_train_setup;

/* Builds model, optimizer, loaders and trainer on ctx at p->train.batch_size (with
 * auto_batch, at the first micro-batch that fits). Returns CLT_OK, CLT_ERR_OUT_OF_MEMORY (no
 * micro-batch fits, or auto_batch off: the message is the failed allocation's; everything is
 * freed and clt_train_mem_report can explain), CLT_ERR_INVALID_ARG for a spec with an
 * activation after its last linear layer (clt_spec_check_output) or a plan that
 * clt_train_plan_check refuses at the micro-batch tried (both checked before anything is
 * allocated), or the statuses of the create functions and of reading the checkpoints. The set-up
 * copies *p; what p points to (spec, data sets, the norm's arrays, paths and the strings in
 * p->train) must stay valid until clt_train_setup_free (a backoff rebuilds from them). */
CLT_API clt_status clt_train_setup_create(clt_train_setup **out, clt_ctx *ctx,
                                          const struct clt_train_setup_params *p);
CLT_API void clt_train_setup_free(clt_train_setup *s); /* accepts NULL */
/* The set-up's objects, owned by it (see clt_train_setup_run for when they are replaced). */
CLT_API clt_model *clt_train_setup_model(const clt_train_setup *s);
CLT_API clt_loader *clt_train_setup_loader(const clt_train_setup *s);
CLT_API clt_trainer *clt_train_setup_trainer(const clt_train_setup *s);
/* The micro-batch in use, micro-batches per step in use, retries taken so far. */
CLT_API size_t clt_train_setup_batch(const clt_train_setup *s);
CLT_API int clt_train_setup_accumulate(const clt_train_setup *s);
CLT_API int clt_train_setup_backoffs(const clt_train_setup *s);
/* clt_trainer_run on the set-up's trainer; with auto_batch, an out-of-memory failure before
 * the first optimizer step completes rebuilds the set-up with a smaller micro-batch
 * (CLT_EVENT_BACKOFF through p->train.on_event) and runs again. The accessors' objects are
 * replaced by a rebuild. Statuses as clt_trainer_run. */
CLT_API clt_status clt_train_setup_run(clt_train_setup *s);
/* Data-parallel in one process: runs clt_train_setup_run on the n set-ups, each built with
 * member i of one clt_comm_group as train.comm (in rank order), each in a thread of its own
 * (n == 1: on the calling thread). When one fails, it aborts the group, so the others stop
 * with CLT_ERR_ABORTED instead of waiting for it. Returns CLT_OK or the status of the first
 * replica to fail for its own reason (*failed: its index, -1 when all succeeded; its message
 * in its ctx, clt_ctx_errmsg, and in clt_last_errmsg() of the calling thread).
 * CLT_ERR_UNSUPPORTED if a thread cannot be created. */
CLT_API clt_status clt_train_setup_run_group(clt_train_setup *const *s, int n, int *failed);
/* Checks what the plan of p tells before anything is allocated, so that a run does not fail
 * at a late step: every micro-batch an epoch takes (the full one and the last partial one,
 * with p->train.comm each member's slice of them) against the smallest batch the model
 * trains on (batchnorm needs more than one value per channel), a member whose slice of a full
 * batch is empty, and p->loader.augment against the images (a shift that can move a whole
 * image out of view, a cutout larger than it). CLT_ERR_INVALID_ARG with a message naming the
 * flag (--batch-size, --augment), the numbers and a remedy (--drop-last, another batch size);
 * a spec's own failures (clt_spec_validate). clt_train_setup_create calls it itself (at each
 * micro-batch it tries). Records for the calling thread; thread-safe. */
CLT_API clt_status clt_train_plan_check(const struct clt_train_setup_params *p);
/* Data-parallel: a collective over p->train.comm (every member calls it, before
 * clt_train_setup_create). Each member makes a fixed-size record of its run: the spec, task
 * and outputs, both data splits (size and CRC-32C of all values and labels), input shape,
 * normalisation (scale and a digest of the statistics), augmentation, micro-batch,
 * accumulation, epochs, steps, drop-last, shuffling, seeds, initialisation, precision, the
 * optimizer and its schedule, label smoothing, and the points where members meet (log
 * interval, checkpoints); one clt_comm_allgather exchanges them. Members that differ would
 * pass other sizes to the reductions or train diverging replicas, so every member returns
 * CLT_ERR_INVALID_ARG with the same message naming the first difference (in the order
 * above, the lowest member): "the ranks do not run the same thing: --lr is "0.01" on rank 0,
 * "0.02" on rank 2; ...". Member statuses of the exchange otherwise. Records for the calling
 * thread. */
CLT_API clt_status clt_train_setup_agree(const struct clt_train_setup_params *p);
/* The dry run: one optimizer step (all its micro-batches: forward, loss, backward, update) on
 * the run's first batch, then one evaluation of the test split if there is one, and finishes
 * the queues; *out is the accountant's state afterwards (its peak is what a step and an
 * evaluation need). It changes the weights and the optimizer state by that step: free the
 * set-up afterwards rather than training on. */
CLT_API clt_status clt_train_setup_probe(clt_train_setup *s, struct clt_mem_stats *out);

#ifdef __cplusplus
}
#endif
#endif
