/* Training and evaluation on one ctx: a data set resident on the device (inputs as stored, u8
 * or f32, converted and standardised while each batch is gathered), the training loop (shuffled
 * batches, loss accumulated on the device and read only at log points, evaluation after each
 * epoch, checkpoints), and evaluation and prediction. Not thread-safe (per ctx). */
#ifndef CLTRAIN_TRAIN_H
#define CLTRAIN_TRAIN_H

#include "cltrain/data.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How raw inputs become model inputs: x * scale / std[f] - mean[f] / std[f], i.e.
 * (x * scale - mean) / std, with mean and std of the scaled training inputs (NULL: 0 and 1). */
struct clt_input_norm {
    size_t features;
    float scale;       /* 1/255 for IDX pixels, 1 for CSV */
    const float *mean; /* (features) or NULL */
    const float *std;  /* (features) or NULL */
};

/* A split (inputs and labels/targets) copied once to the device. */
typedef struct clt_resident clt_resident;
clt_status clt_resident_create(clt_resident **out, clt_ctx *ctx, const clt_dataset *d,
                               const struct clt_input_norm *norm);
void clt_resident_free(clt_resident *r);
size_t clt_resident_count(const clt_resident *r);

/* What the loop reports through the callback. */
typedef enum clt_train_event_kind {
    CLT_EVENT_LOG = 0, /* every log_every steps: mean training loss since the last log point */
    CLT_EVENT_EPOCH,   /* end of an epoch: mean training loss of the epoch */
    CLT_EVENT_EVAL,    /* evaluation on the test split after an epoch */
    CLT_EVENT_SAVE     /* a checkpoint was written */
} clt_train_event_kind;

struct clt_train_event {
    clt_train_event_kind kind;
    int epoch;              /* 1-based */
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
    struct clt_ctx_stats stats; /* counters, host waits included */
};

struct clt_train_params {
    int epochs;              /* default 10 */
    long max_steps;          /* stop after this many optimizer steps in all (0: no limit) */
    size_t batch_size;       /* default 128 */
    bool shuffle;            /* default true: a new permutation each epoch from the seed */
    bool drop_last;          /* drop a last partial batch (default false) */
    uint64_t seed;           /* shuffling (and the model's dropout, through the model) */
    long log_every;          /* steps between log points (default 100; 0: only at epoch ends) */
    float label_smoothing;   /* classification */
    clt_task task;
    struct clt_optim_params optim;
    const char *save_path;   /* write a checkpoint at the end (NULL: none) */
    long save_every;         /* also every N steps (0: never) */
    const char *model_text;  /* the spec as given, stored in checkpoints */
    struct clt_input_norm norm; /* stored in checkpoints */
    int classes;
    void (*on_event)(const struct clt_train_event *e, void *user);
    void *user;
};
struct clt_train_params clt_train_default_params(void);

typedef struct clt_trainer clt_trainer;

/* Creates the optimizer for the model (the model exists, so its state is born on the model's
 * device) and a trainer over the resident splits (test may be NULL). */
clt_status clt_trainer_create(clt_trainer **out, clt_model *model, clt_resident *train,
                              clt_resident *test, const struct clt_train_params *p);
void clt_trainer_free(clt_trainer *t);
clt_optim *clt_trainer_optim(clt_trainer *t);
/* Restores optimizer state, step and epoch from a checkpoint written by this trainer's
 * clt_trainer_save (the model's weights are restored by the caller). */
clt_status clt_trainer_resume(clt_trainer *t, const char *path);
/* Runs until the epochs are done or max_steps reached. CLT_ERR_NUMERIC when the training loss
 * becomes NaN or infinite (message: the step range). */
clt_status clt_trainer_run(clt_trainer *t);
/* Writes model, optimizer state and metadata to a safetensors file (atomically). */
clt_status clt_trainer_save(clt_trainer *t, const char *path);

/* Mean loss and accuracy of the model over a resident split, in batches of batch_size; one
 * counted host wait (CLT_WAIT_EVAL). confusion (classes x classes, row = true label, column =
 * predicted) is filled when non-NULL. accuracy is NAN for regression. */
struct clt_eval_result {
    double loss, accuracy;
    size_t count;
};
clt_status clt_evaluate(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                        struct clt_eval_result *out, long *confusion);
/* Predicted class (or value, regression) and class probabilities for every sample:
 * classes (n) and probs (n, N), either may be NULL. */
clt_status clt_predict(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                       int32_t *classes, float *probs);

#ifdef __cplusplus
}
#endif
#endif
