/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW with PyTorch's
 * update rules and defaults, clipping by the gradients' global norm (computed and applied on the
 * device), parameters exempt from weight decay, and learning-rate schedules (constant, step
 * decay, cosine, each with an optional linear warm-up). A model's parameters live in one flat f32 device tensor and
 * its gradients in another of the same length, so each step is one kernel launch over every
 * element, enqueued without a host wait. The state is born on the parameters' ctx and counted
 * as CLT_MEM_OPTIM.
 *
 * Usage:
 *
 *     struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_ADAMW);
 *     op.lr = 3e-4f;
 *     clt_optim *o;
 *     clt_optim_create(&o, clt_model_params(m), &op);
 *     clt_optim_step(o, clt_model_grads(m));    // after each backward
 */
#ifndef CLTRAIN_OPTIM_H
#define CLTRAIN_OPTIM_H

#include "cltrain/export.h"

#include "cltrain/tensor.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clt_optim_kind { CLT_OPTIM_SGD = 0, CLT_OPTIM_ADAM, CLT_OPTIM_ADAMW } clt_optim_kind;
typedef enum clt_schedule {
    CLT_SCHED_CONSTANT = 0,
    CLT_SCHED_STEP,
    CLT_SCHED_COSINE
} clt_schedule;

/* Fields a kind or schedule does not use are ignored (not validated). */
struct clt_optim_params {
    clt_optim_kind kind;
    float lr;           /* base learning rate, > 0 */
    float weight_decay; /* >= 0; SGD and Adam: L2 added to the gradient; AdamW: decoupled */
    /* SGD */
    float momentum;  /* >= 0; 0 = plain SGD (no state) */
    float dampening; /* finite; ignored on the first step, as PyTorch */
    bool nesterov;   /* needs momentum > 0 and dampening == 0 */
    /* Adam, AdamW */
    float beta1, beta2; /* in [0, 1) */
    float eps;          /* > 0, added to sqrt(v_hat) */
    /* schedule; `step` below is the 0-based index of the optimizer step being taken */
    clt_schedule schedule;
    long warmup_steps; /* W >= 0: steps 0..W-1 use lr * (step + 1) / W */
    long step_size;    /* CLT_SCHED_STEP: lr * gamma^floor((step - W) / step_size); > 0 */
    float gamma;       /* CLT_SCHED_STEP: > 0 */
    long total_steps;  /* CLT_SCHED_COSINE: T > 0; cosine from lr at W to min_lr at T */
    float min_lr;      /* CLT_SCHED_COSINE: in [0, lr] */
    /* Every kind: > 0 clips each step's gradients by their global L2 norm, as
     * torch.nn.utils.clip_grad_norm_(params, clip_grad) (error_if_nonfinite=False) before
     * optimizer.step(): every gradient is scaled by min(1, clip_grad / (norm + 1e-6)), norm the
     * L2 norm of all of them together, computed on the device (two small reduction launches)
     * and applied in the update's own launch, without a host read (clt_optim_read_grad_norm
     * gives the norm). 0: no clipping (the default). Finite, >= 0. */
    float clip_grad;
};

/* PyTorch's defaults for `kind`: lr 1e-3; SGD momentum 0, dampening 0, weight decay 0, no
 * Nesterov; Adam betas (0.9, 0.999), eps 1e-8, weight decay 0; AdamW the same with weight decay
 * 1e-2. Schedule constant, no warm-up; step_size 1, gamma 0.1 (PyTorch's StepLR gamma),
 * total_steps 1, min_lr 0; no clipping. Thread-safe. */
CLT_API struct clt_optim_params clt_optim_default_params(clt_optim_kind kind);

/* "sgd", "adam", "adamw" (case-insensitive) -> kind; "constant", "step", "cosine" -> schedule.
 * CLT_ERR_INVALID_ARG (message listing the accepted names in clt_last_errmsg()) otherwise.
 * Thread-safe. */
CLT_API clt_status clt_optim_parse_kind(const char *s, clt_optim_kind *out);
CLT_API clt_status clt_optim_parse_schedule(const char *s, clt_schedule *out);
CLT_API const char *clt_optim_kind_name(clt_optim_kind k);  /* "sgd", "adam", "adamw", "?" */
CLT_API const char *clt_schedule_name(clt_schedule s);      /* "constant", "step", "cosine", "?" */

/* CLT_OK, or CLT_ERR_INVALID_ARG with a message naming the field and its value (in
 * clt_last_errmsg()): lr > 0 and finite; weight_decay >= 0; clip_grad >= 0 and finite; SGD: momentum >= 0, dampening
 * finite, Nesterov only with momentum > 0 and dampening 0; Adam/AdamW: betas in [0, 1), eps > 0;
 * warmup_steps >= 0; step decay: step_size > 0, gamma > 0; cosine: total_steps > 0,
 * 0 <= min_lr <= lr. Thread-safe. */
CLT_API clt_status clt_optim_validate(const struct clt_optim_params *p);

/* The learning rate of the optimizer step with 0-based index `step` (>= 0) under p's schedule
 * (W = warmup_steps, T = total_steps): step < W: lr * (step + 1) / W; else constant: lr;
 * step decay: lr * gamma^floor((step - W) / step_size); cosine: T <= W: lr, else
 * min_lr + (lr - min_lr) * (1 + cos(pi * min(step - W, T - W) / (T - W))) / 2. Computed in
 * double, rounded to float. p must be valid. Pure and thread-safe. */
CLT_API float clt_optim_lr_at(const struct clt_optim_params *p, long step);

/* A JSON object (malloc'ed; free with free()) describing p for checkpoint metadata, e.g.
 * {"name":"adam","lr":0.001,"betas":[0.9,0.999],"eps":1e-08,"weight_decay":0,
 *  "schedule":"constant","warmup_steps":0,"step_size":1,"gamma":0.1,"total_steps":1,
 *  "min_lr":0}. SGD gives "momentum", "dampening", "nesterov" instead of "betas", "eps".
 * With clipping, "clip_grad" follows "min_lr".
 * Floats are written with the fewest digits that read back as the same float; a non-finite
 * value as null. NULL when out of host memory. Thread-safe. */
CLT_API char *clt_optim_describe(const struct clt_optim_params *p);

typedef struct clt_optim clt_optim;

/* Creates an optimizer for `params`, the model's flat f32 parameter tensor (a view is fine).
 * The optimizer keeps a pointer to params but does not own it: params must outlive it. The
 * state (clt_optim_state) is zero-filled f32 tensors of params' shape on params' ctx, counted as
 * CLT_MEM_OPTIM. *p is copied. Statuses: CLT_ERR_INVALID_ARG (see clt_optim_validate; message
 * also in params' ctx), CLT_ERR_SHAPE (params not f32), CLT_ERR_OUT_OF_MEMORY,
 * CLT_ERR_HOST_MEMORY, CLT_ERR_OPENCL. On failure *out is NULL. Not thread-safe (per ctx). */
CLT_API clt_status clt_optim_create(clt_optim **out, clt_tensor *params,
                                    const struct clt_optim_params *p);

/* Takes one step: updates params and the state in place from `grads` (f32, as many elements as
 * params, same ctx) with the learning rate clt_optim_lr_at(p, clt_optim_steps(o)), then counts
 * the step. One kernel launch on the compute queue, ordered after the work already enqueued
 * there; returns without waiting for it. The first step of SGD with momentum (the one taken
 * when clt_optim_steps is 0) sets momentum_buffer = gradient, as PyTorch; Adam's bias
 * corrections use t = clt_optim_steps + 1, computed on the host in double.
 * Statuses: CLT_ERR_DEVICE_MISMATCH (grads on another ctx), CLT_ERR_SHAPE (dtype or length),
 * CLT_ERR_BUILD, CLT_ERR_OPENCL; on failure nothing is enqueued and the step is not counted.
 * Not thread-safe (per ctx). */
CLT_API clt_status clt_optim_step(clt_optim *o, const clt_tensor *grads);

/* Steps taken so far. set_steps replaces the count, for resuming from a checkpoint together
 * with the state tensors (load those with clt_tensor_write): a count > 0 means
 * momentum_buffer is already initialised. steps >= 0. Not thread-safe. */
CLT_API long clt_optim_steps(const clt_optim *o);
CLT_API void clt_optim_set_steps(clt_optim *o, long steps);

/* The state tensors: 0 (plain SGD), 1 ("momentum_buffer": SGD with momentum) or 2 ("exp_avg",
 * "exp_avg_sq": Adam, AdamW), named as PyTorch's state keys. Index i in [0, count). The tensor
 * is owned by the optimizer (valid until clt_optim_free); the caller may read and write its
 * contents. *name (if name is non-NULL) is a static string. */
CLT_API int clt_optim_state_count(const clt_optim *o);
CLT_API clt_tensor *clt_optim_state(const clt_optim *o, int i, const char **name);

/* The parameters the optimizer was created with (owned by it). */
CLT_API const struct clt_optim_params *clt_optim_get_params(const clt_optim *o);
/* The parameter tensor given to clt_optim_create (not owned). */
CLT_API clt_tensor *clt_optim_params_tensor(const clt_optim *o);
/* Makes every later step also store the updated parameters into `copy` (f16 or bf16, as many
 * elements as the parameters, same ctx; not owned: it must outlive the optimizer or be
 * replaced first), rounded to nearest even, in the update's own launch: a mixed-precision
 * model's 16-bit weights (clt_model_weights) kept current without a cast pass after each step,
 * which a hand-written loop over such a model needs (the trainer does it itself). A skipped
 * loss-scaled step leaves it unchanged, as the parameters. It is refreshed only by steps:
 * write the parameters otherwise with clt_model_write_params, which refreshes it too. NULL:
 * no copy (the default). Statuses: CLT_ERR_DEVICE_MISMATCH, CLT_ERR_SHAPE
 * (dtype or length; the copy is then unchanged). Not thread-safe (per ctx). */
CLT_API clt_status clt_optim_set_copy(clt_optim *o, clt_tensor *copy);

/* Exempts elements of the parameters from weight decay: the n ranges [offset[i], offset[i] +
 * count[i]) (in elements of the parameter tensor) take no decay, every other element does
 * (the state after create: every element decays, as one PyTorch parameter group). Replaces the
 * ranges of an earlier call; n 0 makes every element decay again. The trainer exempts a model's
 * biases and normalisation parameters (clt_param_info.decays false): PyTorch users get that
 * with two parameter groups, one with weight_decay 0. Applies to SGD's and Adam's L2 term and
 * AdamW's decoupled decay alike. With weight_decay 0 nothing is stored (there is no decay to
 * exempt from). The exemptions live on the device, one bit per element (CLT_MEM_OPTIM,
 * allocated by create when weight_decay > 0), uploaded here: a counted host wait (setup).
 * Statuses: CLT_ERR_INVALID_ARG (a range beyond the parameters; nothing changes),
 * CLT_ERR_HOST_MEMORY, CLT_ERR_OPENCL. Not thread-safe (per ctx). */
CLT_API clt_status clt_optim_set_no_decay(clt_optim *o, int n, const size_t *offset,
                                          const size_t *count);

/* With clip_grad > 0: the global L2 norm of the gradients of the last step taken (before
 * clipping; with loss scaling, of the unscaled gradients, inf or NaN for a skipped step), 0
 * before the first, copied to *norm as clt_tensor_read (blocking: a counted wait, CLT_WAIT_READ;
 * or non-blocking with an event to wait on, so that a log point reads it in the same wait as
 * the loss). CLT_ERR_INVALID_ARG without clipping. Not thread-safe (per ctx). */
CLT_API clt_status clt_optim_read_grad_norm(const clt_optim *o, float *norm, bool blocking,
                                            clt_event *done);

/* Frees the optimizer and its state (not params), without a host wait: the device keeps what
 * enqueued work still uses. Accepts NULL. */
CLT_API void clt_optim_free(clt_optim *o);

/* ---- dynamic loss scaling (fp16 mixed precision), as PyTorch's GradScaler -------------------
 * Every decision happens on the device, so a training step needs no host wait: the loss
 * gradient is multiplied by the scale before backward (clt_scaler_scale), and
 * clt_optim_step_scaled unscales the flat gradients, skips the update (parameters and state
 * untouched) when any of them is inf or NaN, and updates the scale. The scale and the count of
 * skipped steps are read at log points (clt_scaler_read: one counted wait, or none when joined
 * to another read). bf16 needs no loss scaling. Not thread-safe (per ctx). */
struct clt_scaler_params {
    float init_scale;     /* default 2^16; finite, > 0 */
    float growth_factor;  /* default 2; >= 1 */
    float backoff_factor; /* default 0.5; in (0, 1] */
    int growth_interval;  /* clean steps between growths, default 2000; >= 1 */
};
CLT_API struct clt_scaler_params clt_scaler_default_params(void);

typedef struct clt_scaler clt_scaler;
/* The length of the scaler's raw state: clt_scaler_state's i32 elements, and the int32 array
 * clt_scaler_read fills. Its layout is private; clt_scaler_decode gives its fields. */
#define CLT_SCALER_STATE_LEN 6
/* Its state is a CLT_SCALER_STATE_LEN i32 tensor on ctx, counted as CLT_MEM_OPTIM.
 * p NULL: the defaults. CLT_ERR_INVALID_ARG for a bad field, CLT_ERR_OUT_OF_MEMORY,
 * CLT_ERR_OPENCL. The initial write is a counted host wait (setup). */
CLT_API clt_status clt_scaler_create(clt_scaler **out, clt_ctx *ctx,
                                     const struct clt_scaler_params *p);
CLT_API void clt_scaler_free(clt_scaler *s); /* its state too, without a host wait; accepts NULL */
CLT_API const struct clt_scaler_params *clt_scaler_get_params(const clt_scaler *s);
CLT_API clt_tensor *clt_scaler_state(const clt_scaler *s); /* owned by the scaler */
/* dloss (f32) *= the current scale, in place (enqueued). */
CLT_API clt_status clt_scaler_scale(clt_scaler *s, clt_tensor *dloss);
/* With s NULL, clt_optim_step. Otherwise three launches: grads *= 1 / scale (in place) while
 * checking for inf/NaN; the optimizer's update unless one was found (the skipped step leaves
 * parameters and state unchanged, and the steps that count for SGD's first step and Adam's
 * bias corrections exclude the skipped ones; the learning-rate schedule follows
 * clt_optim_steps, which counts every attempted step, as PyTorch's schedulers); the scale's
 * update (backoff and a skipped step counted on inf/NaN, growth after growth_interval clean
 * steps). Statuses as clt_optim_step. */
CLT_API clt_status clt_optim_step_scaled(clt_optim *o, const clt_tensor *grads, clt_scaler *s);
/* Copies the raw state (CLT_SCALER_STATE_LEN int32) to raw, as clt_tensor_read (blocking, or
 * non-blocking with an event to wait on); decode gives its fields. */
CLT_API clt_status clt_scaler_read(const clt_scaler *s, int32_t *raw, bool blocking,
                                   clt_event *done);
struct clt_scaler_values {
    float scale;
    bool found_inf; /* false between steps */
    int tracker;    /* clean steps since the scale last changed */
    long skipped;   /* steps skipped so far */
};
CLT_API struct clt_scaler_values clt_scaler_decode(const int32_t *raw);

#ifdef __cplusplus
}
#endif
#endif
