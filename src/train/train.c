/* The training loop and evaluation: batches from a clt_loader (resident or streamed), forward,
 * loss and backward per micro-batch (gradients accumulated on the device), one optimizer
 * launch per step, the loss read only at log points (each read a counted host wait),
 * evaluation after each epoch on a resident split, checkpoints, and a stop at a step boundary
 * when the interrupt flag is raised. Then the set-up object: the memory estimate (from the
 * spec's widths), the report, the dry run and the out-of-memory backoff. */
#include "cltrain/train.h"

#include "runtime/internal.h"

#include "cltrain/checkpoint.h"
#include "dist/comm_internal.h"
#include "io/crc32c.h"
#include "ops/ops_internal.h"
#include "ops/tune_internal.h"
#include "runtime/rng_internal.h"
#include "train/train_internal.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Training steps the host may queue ahead of the device (pace_step). */
#define CLT_QUEUED_STEPS 2

/* ---- batches ------------------------------------------------------------------------------ */

/* Views of one evaluation batch: samples [start, start+B) of a resident split in file order. */
struct batch {
    clt_tensor *x, *y;
};

static void batch_free(struct batch *b)
{
    clt_tensor_free(b->x);
    clt_tensor_free(b->y);
    memset(b, 0, sizeof *b);
}

static clt_status batch_gather(struct batch *b, clt_resident *r, size_t start, size_t B,
                               clt_tensor *xbuf, clt_tensor *ybuf)
{
    clt_status st = CLT_OK;
    size_t xd[2] = {B, clt_resident_features(r)};
    CLT_TRY(clt_tensor_view(&b->x, xbuf, 0, 2, xd));
    if (ybuf) CLT_TRY(clt_tensor_view(&b->y, ybuf, 0, 1, &B)); /* NULL: inputs only */
    CLT_TRY(clt_resident_gather(r, NULL, start, B, b->x, b->y));
fail:
    return st;
}

/* Loss of a batch: adds the summed loss to acc[0] (and, classification, the number correct to
 * acc[1]); writes the gradient of the mean loss times grad_scale into dout when non-NULL. */
static clt_status batch_loss(clt_task task, const clt_tensor *out, const clt_tensor *y,
                             float smoothing, float grad_scale, clt_tensor *dout,
                             clt_tensor *loss_acc, clt_tensor *correct_acc)
{
    if (task == CLT_TASK_CLASSIFICATION)
        return clt_op_softmax_xent(out, y, smoothing, 1.0f, grad_scale, dout, loss_acc,
                                   correct_acc);
    /* MSE as PyTorch's default: mean over all B x N elements */
    size_t N = clt_tensor_dim(out, 1);
    return clt_op_mse(out, y, 1.0f / (float)N, grad_scale / (float)N, dout, loss_acc);
}

/* ---- evaluation and prediction ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The buffers an evaluation in batches of bs needs: inputs (bs, F), labels (bs), the two sums
 * (the trainer makes them at creation, so that a run cannot run out of memory at its first
 * evaluation). */
struct eval_bufs {
    clt_tensor *x, *y, *acc;
};

static void eval_bufs_free(struct eval_bufs *e)
{
    clt_tensor_free(e->x);
    clt_tensor_free(e->y);
    clt_tensor_free(e->acc);
    memset(e, 0, sizeof *e);
}

static clt_status eval_bufs_create(struct eval_bufs *e, clt_model *m, clt_resident *data,
                                   size_t bs)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    size_t xd[2] = {bs, clt_resident_features(data)}, two = 2;
    CLT_TRY(clt_tensor_create(&e->x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&e->y, ctx, clt_tensor_dtype(clt_resident_labels(data)), 1, &bs,
                              CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_zeros(&e->acc, ctx, CLT_DTYPE_F32, 1, &two, CLT_MEM_WORKSPACE));
fail:
    return st;
}

/* clt_evaluate with the buffers of `bufs` (sums reset first), or its own when bufs is NULL.
 * With a comm: this replica evaluates its slice of the split, and the sums are summed over the
 * replicas (confusion must then be NULL). */
static clt_status evaluate(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                           struct clt_eval_result *res, long *confusion,
                           const struct eval_bufs *bufs, clt_comm *comm)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    struct eval_bufs own = {0};
    clt_tensor *xbuf = NULL, *ybuf = NULL, *acc = NULL, *loss_acc = NULL, *correct_acc = NULL,
               *pred = NULL, *pred_view = NULL;
    int32_t *pred_host = NULL, *labels_host = NULL;
    struct batch b = {0};
    cl_event ev[3] = {0};
    cl_uint nev = 0;
    float sums[2] = {0, 0};
    size_t n = clt_resident_count(data), N = clt_model_outputs(m), one = 1, from = 0, to = n;
    size_t bs = batch_size < clt_model_max_batch(m) ? batch_size : clt_model_max_batch(m);
    bool classify = task == CLT_TASK_CLASSIFICATION;
    const clt_tensor *labels = clt_resident_labels(data);
    CLT_ASSERT(!comm || !confusion);
    if (comm) clt_comm_slice(comm, comm->rank, n, &from, &to);
    if (!labels)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "evaluation needs labels or targets; the split has "
                                           "none (clt_predict takes inputs alone)");
    CLT_TRY(clt_tensor_same_ctx(clt_model_params(m), labels));
    if (!bufs) {
        CLT_TRY(eval_bufs_create(&own, m, data, bs));
        bufs = &own;
    } else {
        CLT_ASSERT(clt_tensor_dim(bufs->x, 0) >= bs);
        CLT_TRY(clt_op_fill(bufs->acc, 0.0f));
    }
    xbuf = bufs->x;
    ybuf = bufs->y;
    acc = bufs->acc;
    CLT_TRY(clt_tensor_view(&loss_acc, acc, 0, 1, &one));
    CLT_TRY(clt_tensor_view(&correct_acc, acc, 1, 1, &one));
    if (confusion && classify) {
        CLT_TRY(clt_tensor_create(&pred, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_WORKSPACE));
        CLT_ALLOC(ctx, pred_host, n);
        CLT_ALLOC(ctx, labels_host, n);
    }
    for (size_t start = from; start < to; start += bs) {
        size_t B = to - start < bs ? to - start : bs;
        clt_tensor *out = NULL;
        CLT_TRY(batch_gather(&b, data, start, B, xbuf, ybuf));
        CLT_TRY(clt_model_forward(m, b.x, false, 0, &out));
        CLT_TRY(batch_loss(task, out, b.y, 0.0f, 0.0f, NULL, loss_acc,
                           classify ? correct_acc : NULL));
        if (pred) {
            CLT_TRY(clt_tensor_view(&pred_view, pred, start, 1, &B));
            CLT_TRY(clt_op_argmax(pred_view, out));
            clt_tensor_free(pred_view);
            pred_view = NULL;
        }
        batch_free(&b);
    }
    CLT_TRY(clt_tensor_read(acc, sums, false, &ev[nev++]));
    if (pred) {
        CLT_TRY(clt_tensor_read(pred, pred_host, false, &ev[nev++]));
        CLT_TRY(clt_tensor_read(labels, labels_host, false, &ev[nev++]));
    }
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_EVAL, nev, ev));
    double total[2] = {sums[0], sums[1]};
    if (comm) CLT_TRY(clt_comm_allreduce_f64(comm, total, 2, CLT_REDUCE_SUM));
    res->count = n;
    res->loss = total[0] / (double)n; /* both losses are sums of per-sample means (batch_loss) */
    res->accuracy = classify ? total[1] / (double)n : NAN;
    if (pred) {
        memset(confusion, 0, N * N * sizeof *confusion);
        for (size_t i = 0; i < n; i++)
            if (labels_host[i] >= 0 && (size_t)labels_host[i] < N && pred_host[i] >= 0 &&
                (size_t)pred_host[i] < N)
                confusion[(size_t)labels_host[i] * N + (size_t)pred_host[i]]++;
    }
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (st != CLT_OK && nev) clt_ctx_finish(ctx, CLT_WAIT_EVAL); /* reads into host arrays */
    batch_free(&b);
    clt_tensor_free(pred_view);
    clt_tensor_free(pred);
    clt_tensor_free(loss_acc);
    clt_tensor_free(correct_acc);
    eval_bufs_free(&own);
    free(pred_host);
    free(labels_host);
    return st;
}

clt_status clt_evaluate(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                        struct clt_eval_result *res, long *confusion)
{
    return evaluate(m, data, batch_size, task, res, confusion, NULL, NULL);
}

clt_status clt_predict(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                       int32_t *classes, float *probs)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    clt_tensor *xbuf = NULL, *ybuf = NULL, *pred = NULL, *prob = NULL, *pv = NULL, *qv = NULL;
    struct batch b = {0};
    cl_event ev[2] = {0};
    cl_uint nev = 0;
    size_t n = clt_resident_count(data), F = clt_resident_features(data),
           N = clt_model_outputs(m);
    size_t bs = batch_size < clt_model_max_batch(m) ? batch_size : clt_model_max_batch(m);
    size_t xd[2] = {bs, F}, pd[2] = {n, N};
    bool classify = task == CLT_TASK_CLASSIFICATION;
    if (clt_resident_ctx(data) != ctx)
        CLT_FAIL(ctx, CLT_ERR_DEVICE_MISMATCH, "device mismatch: the model and the data to "
                 "predict on live on different ctxs; create both from one ctx");
    CLT_TRY(clt_tensor_create(&xbuf, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&pred, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_WORKSPACE));
    CLT_TRY(clt_tensor_create(&prob, ctx, CLT_DTYPE_F32, 2, pd, CLT_MEM_WORKSPACE));
    for (size_t start = 0; start < n; start += bs) {
        size_t B = n - start < bs ? n - start : bs, qd[2] = {B, N};
        clt_tensor *out = NULL;
        CLT_TRY(batch_gather(&b, data, start, B, xbuf, ybuf));
        CLT_TRY(clt_model_forward(m, b.x, false, 0, &out));
        CLT_TRY(clt_tensor_view(&qv, prob, start * N, 2, qd));
        if (classify) {
            CLT_TRY(clt_tensor_view(&pv, pred, start, 1, &B));
            CLT_TRY(clt_op_argmax(pv, out));
            CLT_TRY(clt_op_softmax(qv, out));
        } else {
            CLT_TRY(clt_op_copy(qv, out));
        }
        clt_tensor_free(pv);
        clt_tensor_free(qv);
        pv = qv = NULL;
        batch_free(&b);
    }
    if (classes && classify) CLT_TRY(clt_tensor_read(pred, classes, false, &ev[nev++]));
    if (probs) CLT_TRY(clt_tensor_read(prob, probs, false, &ev[nev++]));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_EVAL, nev, ev));
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (st != CLT_OK && nev) clt_ctx_finish(ctx, CLT_WAIT_EVAL);
    batch_free(&b);
    clt_tensor_free(pv);
    clt_tensor_free(qv);
    clt_tensor_free(pred);
    clt_tensor_free(prob);
    clt_tensor_free(xbuf);
    clt_tensor_free(ybuf);
    return st;
}

/* ---- training ----------------------------------------------------------------------------- */

struct clt_train_params clt_train_default_params(void)
{
    struct clt_train_params p;
    memset(&p, 0, sizeof p);
    p.epochs = 10;
    p.batch_size = 128;
    p.accumulate = 1;
    p.shuffle = true;
    p.log_every = 100;
    p.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    return p;
}

struct clt_trainer {
    clt_ctx *ctx;
    clt_model *model;
    clt_optim *optim;
    clt_loader *train;
    clt_resident *test;
    struct clt_train_params p;
    /* what the checkpoints say of the model, taken from the model and the data it was given:
     * the task from the loader's labels (i32: classification, f32 targets: regression), the
     * classes from the model's outputs, the input scaling from the loader */
    clt_task task;
    int classes;
    struct clt_input_norm norm;
    clt_tensor *dbuf;     /* (max_batch, N): the output gradient */
    clt_tensor *loss_acc; /* (1) f32: summed loss since the last read */
    clt_tensor *gemm_ws;  /* the GEMM workspace lent to the ctx (clt__gemm_ws_reserve), or NULL */
    clt_scaler *scaler;   /* fp16 mixed precision: dynamic loss scaling, else NULL */
    struct clt_scaler_values scaled; /* as read at the last log point */
    float grad_norm;      /* clipping: the gradients' norm of the last step, read at the last log
                             point */
    struct eval_bufs eval; /* for the test split, made at creation */
    long step;            /* optimizer steps taken */
    int epoch;            /* epochs completed */
    long steps_per_epoch, total_steps;
    int accumulate;        /* micro-batches per full step (N) */
    long micro_per_epoch;  /* loader batches per epoch (M) */
    size_t used_per_epoch; /* samples an epoch trains on (n, or S E with drop_last) */
    double t0;
    /* data-parallel (p.comm): the reduction's pinned host buffer (the P gradients, then the
     * stop flag), the event of its last write back to the device, and what it cost */
    clt_comm *comm;
    clt_pinned *red;
    cl_event red_written;
    double reduce_s;
    long reduce_steps;
    bool stop; /* a replica was interrupted: agreed by the last reduction */
    const char *from; /* the checkpoint the run started from (resume, init), else NULL */
    long first_step;  /* t->step when this process's run began */
    bool saving; /* in clt_trainer_save from the loop: its failure is not saved again */
    /* a language model (p.text): its windows' sampler, the (B, T) i32 inputs and targets it
     * gathers into, the loss's per-row buffer (2 B T f32: each row's loss and hit), T */
    clt_text_sampler *text;
    clt_tensor *tx, *ty, *rows;
    size_t T;
    /* the end of each of the last CLT_QUEUED_STEPS steps (a marker on the compute queue):
     * step s is queued only once step s - CLT_QUEUED_STEPS has run (pace_step) */
    cl_event queued[CLT_QUEUED_STEPS];
};

clt_optim *clt_trainer_optim(clt_trainer *t)
{
    return t->optim;
}

void clt_trainer_free(clt_trainer *t)
{
    if (!t) return;
    if (t->ctx) clt_ctx_finish(t->ctx, CLT_WAIT_SETUP); /* kernels may still use dbuf */
    if (t->red_written) clReleaseEvent(t->red_written);
    for (int i = 0; i < CLT_QUEUED_STEPS; i++)
        if (t->queued[i]) clReleaseEvent(t->queued[i]);
    clt_pinned_free(t->red);
    clt_optim_free(t->optim);
    clt_scaler_free(t->scaler);
    clt_tensor_free(t->dbuf);
    clt_tensor_free(t->loss_acc);
    clt_tensor_free(t->tx);
    clt_tensor_free(t->ty);
    clt_tensor_free(t->rows);
    clt__gemm_ws_return(t->ctx, t->gemm_ws);
    eval_bufs_free(&t->eval);
    free(t);
}

/* The model's parameters that take no weight decay (biases, normalisation parameters: their
 * layers' declarations), exempted in the optimizer. */
static clt_status exempt_from_decay(clt_optim *o, const clt_model *m)
{
    const int n = clt_model_param_count(m);
    size_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    size_t *cnt = malloc((size_t)(n ? n : 1) * sizeof *cnt);
    int k = 0;
    clt_status st = off && cnt ? CLT_OK
                               : clt__fail(clt_tensor_ctx(clt_model_params(m)),
                                           CLT_ERR_HOST_MEMORY, "out of host memory");
    for (int i = 0; st == CLT_OK && i < n; i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        if (pi->decays) continue;
        off[k] = pi->offset;
        cnt[k++] = pi->numel;
    }
    if (st == CLT_OK) st = clt_optim_set_no_decay(o, k, off, cnt);
    free(off);
    free(cnt);
    return st;
}

/* The objects every trainer has: the optimizer (weight decay's exemptions, the 16-bit copy),
 * the loss scaler, the output gradient (max_batch, out) and the loss accumulator, the GEMM
 * workspace. */
static clt_status create_common(clt_trainer *t, size_t out)
{
    clt_status st = CLT_OK;
    clt_model *model = t->model;
    const struct clt_train_params *p = &t->p;
    size_t one = 1, dd[2] = {clt_model_max_batch(model), out};
    CLT_TRY(clt_optim_create(&t->optim, clt_model_params(model), &p->optim));
    if (clt_model_weights(model) != clt_model_params(model)) /* mixed precision */
        CLT_TRY(clt_optim_set_copy(t->optim, clt_model_weights(model)));
    if (p->optim.weight_decay > 0.0f) CLT_TRY(exempt_from_decay(t->optim, model));
    if (clt_model_precision(model) == CLT_DTYPE_F16)
        CLT_TRY(clt_scaler_create(&t->scaler, t->ctx, NULL));
    CLT_TRY(clt_tensor_create(&t->dbuf, t->ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_zeros(&t->loss_acc, t->ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_WORKSPACE));
    CLT_TRY(clt__gemm_ws_reserve(t->ctx, &t->gemm_ws)); /* the steps' GEMMs allocate nothing */
fail:
    return st;
}

/* clt_trainer_create for a language model on p->text's windows (see clt_train_params.text). */
static clt_status create_text(clt_trainer **out, clt_model *model,
                              const struct clt_train_params *p)
{
    clt_status st = CLT_OK;
    clt_trainer *t = NULL;
    clt_ctx *ctx = clt_model_ctx(model);
    struct clt_text_sampler_params sp = clt_text_sampler_params(p->text);
    size_t oshape[3], V = clt_model_outputs(model), T = clt_model_in_features(model);
    if (!clt_spec_takes_tokens(clt_model_spec(model)))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text data trains a language model, whose first layer "
                 "is an embed layer (e.g. \"embed 128, posembed, ..., linear V nobias tied\"); "
                 "this model reads values");
    if (clt_model_output_shape(model, oshape) != 2 || oshape[0] != T || oshape[1] != V)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "a language model gives %zu logits at each of its %zu "
                 "positions (its last layer \"linear V\"); this one's output per sample is "
                 "%zux%zu", V, T, oshape[0], oshape[1]);
    if (sp.batch != p->batch_size || sp.block != T || p->batch_size > clt_model_max_batch(model))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text: the sampler's batches are %zu windows of %zu "
                 "tokens; the trainer's batch is %zu (model up to %zu) of %zu", sp.batch,
                 sp.block, p->batch_size, clt_model_max_batch(model), T);
    if (p->comm || p->label_smoothing != 0.0f)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text: not with several replicas or label smoothing "
                 "yet");
    if (p->max_steps <= 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "text: --steps %ld: expected at least 1",
                 p->max_steps);
    if (p->accumulate < 0 || p->accumulate > 1 << 20)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--accumulate %d: expected 1 to %d", p->accumulate,
                 1 << 20);
    CLT_ALLOC(ctx, t, 1);
    t->ctx = ctx;
    t->model = model;
    t->p = *p;
    t->text = p->text;
    t->T = T;
    t->task = CLT_TASK_CLASSIFICATION;
    t->classes = (int)V;
    CLT_TRY(create_common(t, T * V));
    size_t xd[2] = {p->batch_size, T}, two = 2, rn = 2 * p->batch_size * T;
    CLT_TRY(clt_tensor_create(&t->tx, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&t->ty, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&t->rows, ctx, CLT_DTYPE_F32, 1, &rn, CLT_MEM_WORKSPACE));
    CLT_TRY(clt_tensor_zeros(&t->eval.acc, ctx, CLT_DTYPE_F32, 1, &two, CLT_MEM_WORKSPACE));
    t->accumulate = p->accumulate > 1 ? p->accumulate : 1;
    /* an "epoch": the steps whose tokens reach the training split's size */
    size_t per_step = p->batch_size * T * (size_t)t->accumulate;
    t->steps_per_epoch = (long)((p->text_tokens + per_step - 1) / per_step);
    if (t->steps_per_epoch < 1) t->steps_per_epoch = 1;
    t->micro_per_epoch = t->steps_per_epoch * t->accumulate;
    t->used_per_epoch = (size_t)t->steps_per_epoch * p->batch_size * (size_t)t->accumulate;
    t->total_steps = p->max_steps;
    *out = t;
    t = NULL;
fail:
    clt_trainer_free(t);
    return st;
}

clt_status clt_trainer_create(clt_trainer **out, clt_model *model, clt_loader *train,
                              clt_resident *test, const struct clt_train_params *p)
{
    clt_status st = CLT_OK;
    clt_trainer *t = NULL;
    clt_ctx *ctx = clt_model_ctx(model);
    *out = NULL;
    if (p->text) return create_text(out, model, p);
    if (clt_spec_takes_tokens(clt_model_spec(model)))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "the model starts with an embed layer, which reads "
                 "token ids: it trains on text data (--data text:FILE), not on this data set");
    size_t mb = clt_model_max_batch(model);
    if (clt_loader_max_batch(train) < mb) mb = clt_loader_max_batch(train);
    size_t slice = p->comm && p->batch_size
                       ? clt__comm_slice_max(p->comm, p->comm->rank, p->batch_size)
                       : p->batch_size;
    if (p->batch_size == 0 || slice > mb)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG,
                 "--batch-size %zu: expected 1 to %zu (the model's and the loader's largest)%s",
                 p->batch_size, mb, p->comm ? " for this replica's slice" : "");
    if (p->accumulate < 0 || p->accumulate > 1 << 20)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--accumulate %d: expected 1 to %d", p->accumulate,
                 1 << 20);
    if (p->epochs <= 0 && p->max_steps <= 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--epochs %d: expected at least 1", p->epochs);
    if (clt_loader_ctx(train) != ctx) {
        const clt_device_info *a = clt_ctx_device(ctx), *b = clt_ctx_device(clt_loader_ctx(train));
        CLT_FAIL(ctx, CLT_ERR_DEVICE_MISMATCH,
                 "device mismatch: the model lives on device %d (%s, ctx %p), the training "
                 "data's loader on device %d (%s, ctx %p); create both from one ctx",
                 a->index, a->device_name, (void *)ctx, b->index, b->device_name,
                 (void *)clt_loader_ctx(train));
    }
    if (test && !clt_resident_labels(test))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "the test split has no labels or targets to evaluate "
                                           "on");
    if (test) CLT_TRY(clt_tensor_same_ctx(clt_model_params(model), clt_resident_labels(test)));
    if (clt_loader_features(train) != clt_model_in_features(model))
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "the data has %zu features, the model expects %zu",
                 clt_loader_features(train), clt_model_in_features(model));
    bool regression = clt_loader_label_dtype(train) == CLT_DTYPE_F32;
    if (regression && clt_model_outputs(model) != 1)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "the data has regression targets, but the model has %zu "
                 "outputs; a regression model ends with one (\"linear 1\")",
                 clt_model_outputs(model));
    /* the losses and the evaluation take one row of outputs per sample */
    size_t oshape[3];
    if (clt_model_output_shape(model, oshape) != 1)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "the model's output per sample is %zux%zu (its last linear "
                 "layer acts on each of %zu positions of its (T, C) input); training takes one "
                 "row of %zu outputs per sample: put a flatten before the last linear layer",
                 oshape[0], oshape[1], oshape[0], oshape[1]);
    CLT_ALLOC(ctx, t, 1);
    t->ctx = ctx;
    t->model = model;
    t->train = train;
    t->test = test;
    t->p = *p;
    t->task = regression ? CLT_TASK_REGRESSION : CLT_TASK_CLASSIFICATION;
    t->classes = regression ? 1 : (int)clt_model_outputs(model);
    t->norm = clt_loader_norm(train);
    /* The model lives on its device already: the optimizer's state is born there. */
    CLT_TRY(create_common(t, clt_model_outputs(model)));
    size_t n = clt_loader_count(train);
    if (test) CLT_TRY(eval_bufs_create(&t->eval, model, test, slice));
    if (p->comm) {
        t->comm = p->comm;
        CLT_TRY(clt_pinned_create(&t->red, ctx, (clt_tensor_numel(clt_model_params(model)) + 1) *
                                                    sizeof(float)));
    }
    size_t bs = p->batch_size;
    t->accumulate = p->accumulate > 1 ? p->accumulate : 1;
    size_t E = bs * (size_t)t->accumulate; /* the effective batch */
    t->steps_per_epoch = clt_loader_steps_per_epoch(n, E, p->drop_last);
    if (t->steps_per_epoch == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--drop-last with an effective batch of %zu leaves no "
                                           "batch of %zu samples", E, n);
    /* Micro-batches per epoch: all of the epoch's (the last partial one included), or with
     * drop_last only those of the full steps. */
    t->micro_per_epoch = p->drop_last ? t->steps_per_epoch * t->accumulate
                                      : clt_loader_steps_per_epoch(n, bs, false);
    t->used_per_epoch = p->drop_last ? (size_t)t->steps_per_epoch * E : n;
    long by_epochs = p->epochs > 0 ? (long)p->epochs * t->steps_per_epoch : 0;
    t->total_steps = p->max_steps > 0 && (by_epochs == 0 || p->max_steps < by_epochs)
                         ? p->max_steps
                         : by_epochs;
    *out = t;
    t = NULL;
fail:
    clt_trainer_free(t);
    return st;
}

static void emit(clt_trainer *t, struct clt_train_event *e)
{
    e->epochs = (int)((t->total_steps + t->steps_per_epoch - 1) / t->steps_per_epoch);
    e->step = t->step;
    e->total_steps = t->total_steps;
    e->steps_per_epoch = t->steps_per_epoch;
    e->batch_size = t->p.batch_size;
    e->accumulate = t->accumulate;
    e->elapsed_s = now_s() - t->t0;
    e->lr = clt_optim_lr_at(&t->p.optim, t->step > 0 ? t->step - 1 : 0);
    e->stats = clt_ctx_stats(t->ctx);
    if (t->train) e->loader = clt_loader_stats(t->train);
    e->precision = clt_model_precision(t->model);
    e->skipped = t->scaler ? t->scaled.skipped : 0;
    e->loss_scale = t->scaler ? t->scaled.scale : 1.0;
    e->grad_norm = t->p.optim.clip_grad > 0.0f ? t->grad_norm : NAN;
    e->stats.host_waits[CLT_WAIT_LOADER] += e->loader.waits;
    e->stats.host_waits_total += e->loader.waits;
    e->reduce_s = t->reduce_s;
    e->reduce_steps = t->reduce_steps;
    e->reduce_bytes = t->red ? clt_pinned_size(t->red) : 0;
    if (t->comm && t->comm->rank != 0) return; /* replica 0 speaks for the run */
    if (t->p.on_event) t->p.on_event(e, t->p.user);
}

/* Reads and resets the loss accumulator: one counted host wait. */
static clt_status read_loss(clt_trainer *t, double *sum)
{
    clt_status st = CLT_OK;
    float v = 0;
    int32_t raw[CLT_SCALER_STATE_LEN];
    cl_event ev[3] = {NULL, NULL, NULL};
    cl_uint nev = 1;
    CLT_TRY(clt_tensor_read(t->loss_acc, &v, false, &ev[0]));
    if (t->scaler) CLT_TRY(clt_scaler_read(t->scaler, raw, false, &ev[nev++])); /* the same wait */
    if (t->p.optim.clip_grad > 0.0f) /* and the last step's gradient norm */
        CLT_TRY(clt_optim_read_grad_norm(t->optim, &t->grad_norm, false, &ev[nev++]));
    CLT_TRY(clt_ctx_wait(t->ctx, CLT_WAIT_LOG, nev, ev));
    CLT_TRY(clt_op_fill(t->loss_acc, 0.0f));
    if (t->scaler) t->scaled = clt_scaler_decode(raw); /* the same on every replica */
    *sum = v;
    if (t->comm) CLT_TRY(clt_comm_allreduce_f64(t->comm, sum, 1, CLT_REDUCE_SUM));
fail:
    for (int k = 0; k < 3; k++)
        if (ev[k]) clReleaseEvent(ev[k]);
    return st;
}

/* The run's geometry, as checkpoints store it. */
static struct clt_run_geometry run_geometry(const clt_trainer *t)
{
    struct clt_run_geometry g = {
        .present = true,
        .batch_size = t->p.batch_size,
        .accumulate = t->accumulate,
        .steps_per_epoch = t->steps_per_epoch,
        .total_steps = t->total_steps,
        .epochs = (int)((t->total_steps + t->steps_per_epoch - 1) / t->steps_per_epoch),
        .drop_last = t->p.drop_last,
        .dropout_seed = t->p.seed,
        .data_samples = t->text ? t->p.text_tokens : clt_loader_count(t->train),
        .data_crc32c = t->p.data_crc32c,
        .replicas = t->comm ? t->comm->size : 1,
    };
    snprintf(g.data_name, sizeof g.data_name, "%s", t->p.data_name ? t->p.data_name : "");
    return g;
}

/* Whether the inputs are standardised: statistics other than mean 0, std 1 (a checkpoint's
 * norm arrays exist either way). */
static bool standardised(const struct clt_input_norm *n)
{
    for (size_t i = 0; n->mean && n->std && i < n->features; i++)
        if (n->mean[i] != 0.0f || n->std[i] != 1.0f) return true;
    return false;
}

/* The run's recipe, as checkpoints store it: what this trainer trains with. */
static struct clt_run_recipe run_recipe(const clt_trainer *t)
{
    return (struct clt_run_recipe){
        .present = true,
        .optim = *clt_optim_get_params(t->optim),
        .epochs = t->p.epochs,
        .max_steps = t->p.max_steps,
        .precision = clt_model_precision(t->model),
        .label_smoothing = t->p.label_smoothing,
        .shuffle = t->p.shuffle,
        .normalize = standardised(&t->norm),
        .augment = t->train ? clt_loader_augment(t->train) : (struct clt_augment){0},
    };
}

clt_status clt_trainer_save(clt_trainer *t, const char *path)
{
    struct clt_checkpoint_info info = {
        .norm = t->norm,
        .classes = t->classes,
        .task = t->task,
        .class_names = t->p.class_names,
        .vocab = t->p.vocab,
        .step = t->step,
        .epoch = t->epoch,
        .seed = t->p.seed,
        .scaler_state = t->scaler ? clt_scaler_state(t->scaler) : NULL,
        .run = run_geometry(t),
        .recipe = run_recipe(t),
    };
    return clt_checkpoint_save(path, t->model, t->optim, &info);
}

clt_status clt_trainer_resume(clt_trainer *t, const char *path)
{
    clt_status st = CLT_OK;
    clt_checkpoint *ck = NULL;
    struct clt_run_geometry now = run_geometry(t);
    CLT_TRY(clt_checkpoint_open(&ck, path));
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    CLT_TRY(clt_checkpoint_check_run(ck, &now));
    if (info.task != t->task || info.classes != t->classes)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "--resume %s: the checkpoint is a %s model with %d "
                 "output%s, this run's data asks for %s with %d", path,
                 info.task == CLT_TASK_REGRESSION ? "regression" : "classification", info.classes,
                 info.classes == 1 ? "" : "s",
                 t->task == CLT_TASK_REGRESSION ? "regression" : "classification", t->classes);
    CLT_TRY(clt_checkpoint_load_optim(ck, t->optim, t->model));
    CLT_TRY(clt_checkpoint_load_scaler(ck, t->scaler ? clt_scaler_state(t->scaler) : NULL));
    t->step = info.step;
    t->epoch = (int)(info.step / t->steps_per_epoch);
    clt_optim_set_steps(t->optim, info.step);
fail:
    if (st != CLT_OK) clt__fail(t->ctx, st, "%s", clt_last_errmsg());
    clt_checkpoint_close(ck);
    return st;
}

/* A loss that is not finite. In the first interval of a run started from a checkpoint the
 * likelier cause is the file (its weights overflow the forward pass: loading refuses only
 * values beyond 1e30) rather than the learning rate, which has had few steps to act. */
static clt_status numeric_failure(clt_trainer *t, double loss, long from)
{
    if (t->from && from == t->first_step)
        return clt__fail(t->ctx, CLT_ERR_NUMERIC,
                         "the training loss became %s between steps %ld and %ld (epoch %d), the "
                         "first of this run, which started from %s: its weights likely overflow "
                         "the forward pass (very large values); check that file's tensors, or "
                         "lower --lr", isnan(loss) ? "NaN" : "infinite", from + 1, t->step,
                         t->epoch + 1, t->from);
    return clt__fail(t->ctx, CLT_ERR_NUMERIC,
                     "the training loss became %s between steps %ld and %ld (epoch %d); lower "
                     "--lr, or check the data for non-finite values",
                     isnan(loss) ? "NaN" : "infinite", from + 1, t->step, t->epoch + 1);
}

/* ---- data-parallel: what the replicas agree on -------------------------------------------- */

/* Sums this step's gradients over the replicas: read into the pinned buffer (one counted wait;
 * it also orders after the previous step's write from the buffer, on the in-order transfer
 * queue), summed with the stop flag appended, written back without waiting. A replica whose
 * slices of the step were all empty (have_grad false) contributes zeros. */
static clt_status reduce_grads(clt_trainer *t, bool have_grad)
{
    clt_status st = CLT_OK;
    clt_tensor *g = clt_model_grads(t->model);
    size_t P = clt_tensor_numel(g);
    float *h = clt_pinned_ptr(t->red);
    cl_event ev = NULL;
    if (have_grad) {
        CLT_TRY(clt_tensor_read(g, h, false, &ev));
        CLT_TRY(clt_ctx_wait(t->ctx, CLT_WAIT_REDUCE, 1, &ev));
    } else {
        if (t->red_written) CLT_TRY(clt_ctx_wait(t->ctx, CLT_WAIT_REDUCE, 1, &t->red_written));
        memset(h, 0, P * sizeof *h);
    }
    /* timed from here: the wait above is for this replica's own step to finish */
    double t0 = now_s();
    h[P] = t->p.interrupt && *t->p.interrupt ? 1.0f : 0.0f;
    CLT_TRY(clt_comm_allreduce_f32(t->comm, h, P + 1));
    t->stop = h[P] > 0.0f;
    if (t->red_written) clReleaseEvent(t->red_written);
    t->red_written = NULL;
    CLT_TRY(clt_tensor_write(g, h, false, &t->red_written));
    t->reduce_s += now_s() - t0;
    t->reduce_steps++;
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}

/* Batch-norm running statistics: each replica normalised its own slices, so their running
 * statistics differ; before an evaluation or a checkpoint all take the mean over the replicas
 * (the counters agree already). Two counted waits when the model has any. */
static clt_status average_buffers(clt_trainer *t, clt_wait_reason why)
{
    clt_status st = CLT_OK;
    size_t nf = 0, ni = 0;
    float *f = NULL;
    clt_model_buffer_sizes(t->model, &nf, &ni);
    if (nf == 0) return CLT_OK;
    CLT_ALLOC(t->ctx, f, nf);
    CLT_TRY(clt_model_read_buffers(t->model, f, NULL, why));
    CLT_TRY(clt_comm_allreduce_f32(t->comm, f, nf));
    for (size_t i = 0; i < nf; i++) f[i] /= (float)t->comm->size;
    CLT_TRY(clt_model_write_buffers(t->model, f, NULL));
fail:
    free(f);
    return st;
}

/* Every replica's parameters must be the same bits: they started from the same weights and
 * took the same steps from bit-identical sums. Compared through their CRC-32C (one counted
 * wait); a difference is a bug or a broken device, and training on would average diverging
 * models, so the run stops. */
static clt_status check_replicas(clt_trainer *t, const char *when, clt_wait_reason why)
{
    clt_status st = CLT_OK;
    clt_tensor *w = clt_model_params(t->model);
    size_t P = clt_tensor_numel(w);
    float *h = NULL;
    cl_event ev = NULL;
    CLT_ALLOC(t->ctx, h, P);
    CLT_TRY(clt_tensor_read(w, h, false, &ev));
    CLT_TRY(clt_ctx_wait(t->ctx, why, 1, &ev));
    uint32_t crc = clt__crc32c(0, h, P * sizeof *h);
    double mx[2] = {(double)crc, -(double)crc};
    CLT_TRY(clt_comm_allreduce_f64(t->comm, mx, 2, CLT_REDUCE_MAX));
    if (mx[0] != -mx[1])
        CLT_FAIL(t->ctx, CLT_ERR_STATE, "the replicas' parameters differ %s (step %ld; "
                 "CRC-32C of this replica %08x, others up to %08x): they no longer train one "
                 "model", when, t->step, crc, (uint32_t)mx[0]);
fail:
    if (ev) clReleaseEvent(ev);
    free(h);
    return st;
}

/* A checkpoint: the replicas agree first (statistics averaged, parameters compared), then
 * replica 0 alone writes it. */
static clt_status save_event(clt_trainer *t, int epoch)
{
    clt_status st = CLT_OK;
    if (t->comm) {
        CLT_TRY(average_buffers(t, CLT_WAIT_SAVE));
        CLT_TRY(check_replicas(t, "at a checkpoint", CLT_WAIT_SAVE));
        if (t->comm->rank != 0) return CLT_OK;
    }
    t->saving = true; /* a failure here is the checkpoint's: no second try */
    st = clt_trainer_save(t, t->p.save_path);
    if (st != CLT_OK) return st;
    t->saving = false;
    struct clt_train_event e = {.kind = CLT_EVENT_SAVE, .epoch = epoch};
    e.path = t->p.save_path;
    e.loss = e.accuracy = NAN;
    emit(t, &e);
fail:
    return st;
}

/* Ctrl-C: stop at a step boundary, with a checkpoint when the run has somewhere to write it. */
static clt_status interrupted(clt_trainer *t, int epoch)
{
    clt_status st = t->train ? clt_loader_stop(t->train) : CLT_OK;
    bool saved = false;
    if (st == CLT_OK && t->p.save_path) {
        st = save_event(t, epoch);
        saved = st == CLT_OK;
    }
    if (st != CLT_OK) return st;
    return clt__fail(t->ctx, CLT_ERR_INTERRUPTED,
                     "interrupted after step %ld of %ld (epoch %d)%s%s", t->step, t->total_steps,
                     epoch, saved ? "; checkpoint written to " : "", saved ? t->p.save_path : "");
}

/* A run that failed during training (a loader's read, a kernel, a device) keeps what it has
 * done: the weights and optimizer state of its last complete step go to save_path, and the
 * message says so. Not after an interruption (it saved already), a non-finite loss (the
 * weights are damaged), a failure in the checkpoint itself, before this run's first step
 * (nothing new to keep), or with a comm (the other replicas are gone: the agreement a
 * checkpoint needs cannot be had). A failed step's forward may have updated batchnorm's
 * running statistics. */
static clt_status save_after_failure(clt_trainer *t, clt_status st)
{
    if (!t->p.save_path || t->comm || t->step == t->first_step || st == CLT_ERR_INTERRUPTED ||
        st == CLT_ERR_NUMERIC || t->saving)
        return st;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", clt_ctx_errmsg(t->ctx));
    if (clt_trainer_save(t, t->p.save_path) != CLT_OK)
        return clt__fail(t->ctx, st, "%s; the checkpoint of step %ld could not be written "
                         "either: %s", msg, t->step, clt_ctx_errmsg(t->ctx));
    return clt__fail(t->ctx, st, "%s; the checkpoint of step %ld, the last complete one, was "
                     "written to %s", msg, t->step, t->p.save_path);
}

/* The loader's batch index of optimizer step g's first micro-batch. */
static long micro_index(const clt_trainer *t, long g)
{
    return g / t->steps_per_epoch * t->micro_per_epoch + g % t->steps_per_epoch * t->accumulate;
}

/* Samples in step s (0-based) of an epoch: E, or fewer in a last partial step. */
static size_t step_samples(const clt_trainer *t, long s)
{
    size_t E = t->p.batch_size * (size_t)t->accumulate, start = (size_t)s * E;
    return t->used_per_epoch - start < E ? t->used_per_epoch - start : E;
}

static struct clt_loader_order run_order(const clt_trainer *t, long first, long total)
{
    struct clt_loader_order o = {
        .batch_size = t->p.batch_size,
        .shuffle = t->p.shuffle,
        .drop_last = t->p.drop_last,
        .seed = t->p.seed,
        .first_step = micro_index(t, first),
        .total_steps = micro_index(t, total),
        .batches_per_epoch = t->micro_per_epoch,
    };
    if (t->comm) {
        o.shard_lo = t->comm->cum[t->comm->rank];
        o.shard_hi = t->comm->cum[t->comm->rank + 1];
        o.shard_total = t->comm->cum[t->comm->size];
    }
    return o;
}

/* Cross-entropy at every position of a language model's output (B, T, V) against targets y
 * (B, T): the per-row kernel over the B T rows (rows: its 2 B T f32 buffer), adding the summed
 * loss to loss_acc (and the hits to correct_acc); the gradient times grad_scale into dout
 * (B, T, V) when non-NULL. */
static clt_status lm_loss(const clt_tensor *out, const clt_tensor *y, size_t V, float grad_scale,
                          clt_tensor *dout, clt_tensor *loss_acc, clt_tensor *correct_acc,
                          clt_tensor *rows)
{
    clt_status st = CLT_OK;
    clt_tensor *lv = NULL, *yv = NULL, *dv = NULL;
    size_t R = clt_tensor_numel(y), ld[2] = {R, V};
    CLT_TRY(clt_tensor_view(&lv, out, 0, 2, ld));
    CLT_TRY(clt_tensor_view(&yv, y, 0, 1, &R));
    if (dout) CLT_TRY(clt_tensor_view(&dv, dout, 0, 2, ld));
    CLT_TRY(clt_op_softmax_xent_rows(lv, yv, 0.0f, 1.0f, grad_scale, dv, loss_acc, correct_acc,
                                     rows));
fail:
    clt_tensor_free(lv);
    clt_tensor_free(yv);
    clt_tensor_free(dv);
    return st;
}

static clt_status text_loss(clt_trainer *t, const clt_tensor *out, const clt_tensor *y,
                            float grad_scale, clt_tensor *dout, clt_tensor *loss_acc,
                            clt_tensor *correct_acc)
{
    return lm_loss(out, y, clt_model_outputs(t->model), grad_scale, dout, loss_acc, correct_acc,
                   t->rows);
}

/* The mean loss over every position of the sampler's fixed evaluation batches (nats per token)
 * and the fraction of positions whose most likely token is the target, with the buffers given
 * (x, y (B, T) i32; rows 2 B T f32; acc 2 f32); one counted host wait. */
static clt_status lm_evaluate(clt_model *m, clt_text_sampler *s, clt_tensor *x, clt_tensor *y,
                              clt_tensor *rows, clt_tensor *acc, struct clt_eval_result *res)
{
    clt_status st = CLT_OK;
    cl_event ev = NULL;
    float sums[2] = {0, 0};
    clt_tensor *lacc = NULL, *cacc = NULL;
    struct clt_text_sampler_params sp = clt_text_sampler_params(s);
    size_t one = 1, count = sp.eval_batches * sp.batch * sp.block;
    CLT_TRY(clt_op_fill(acc, 0.0f));
    CLT_TRY(clt_tensor_view(&lacc, acc, 0, 1, &one));
    CLT_TRY(clt_tensor_view(&cacc, acc, 1, 1, &one));
    for (size_t k = 0; k < sp.eval_batches; k++) {
        clt_tensor *out = NULL;
        CLT_TRY(clt_text_sampler_eval_batch(s, k, x, y));
        CLT_TRY(clt_model_forward(m, x, false, 0, &out));
        CLT_TRY(lm_loss(out, y, clt_model_outputs(m), 0.0f, NULL, lacc, cacc, rows));
    }
    CLT_TRY(clt_tensor_read(acc, sums, false, &ev));
    CLT_TRY(clt_ctx_wait(clt_model_ctx(m), CLT_WAIT_EVAL, 1, &ev));
    res->loss = (double)sums[0] / (double)count;
    res->accuracy = (double)sums[1] / (double)count;
    res->count = count;
fail:
    if (ev) clReleaseEvent(ev);
    clt_tensor_free(lacc);
    clt_tensor_free(cacc);
    return st;
}

clt_status clt_evaluate_text(clt_model *m, clt_text_sampler *s, struct clt_eval_result *out)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    clt_tensor *x = NULL, *y = NULL, *rows = NULL, *acc = NULL;
    struct clt_text_sampler_params sp = clt_text_sampler_params(s);
    size_t xd[2] = {sp.batch, sp.block}, rn = 2 * sp.batch * sp.block, two = 2, oshape[3];
    if (!clt_spec_takes_tokens(clt_model_spec(m)) || clt_model_output_shape(m, oshape) != 2 ||
        clt_model_in_features(m) != sp.block || sp.batch > clt_model_max_batch(m))
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "text evaluation: the model must be a language model over "
                 "%zu tokens taking batches of %zu (its first layer embed, its output (T, V))",
                 sp.block, sp.batch);
    CLT_TRY(clt_tensor_create(&x, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&y, ctx, CLT_DTYPE_I32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&rows, ctx, CLT_DTYPE_F32, 1, &rn, CLT_MEM_WORKSPACE));
    CLT_TRY(clt_tensor_zeros(&acc, ctx, CLT_DTYPE_F32, 1, &two, CLT_MEM_WORKSPACE));
    CLT_TRY(lm_evaluate(m, s, x, y, rows, acc, out));
fail:
    if (st != CLT_OK) clt_ctx_finish(ctx, CLT_WAIT_EVAL);
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_tensor_free(rows);
    clt_tensor_free(acc);
    return st;
}

/* A language model's optimizer step t->step: each micro-batch j the sampler's training batch
 * step * accumulate + j, drawn on the device; the loss's gradient scaled by 1 / (the step's
 * tokens). *tokens: B T accumulate. Enqueued only. */
static clt_status text_step(clt_trainer *t, size_t *tokens)
{
    clt_status st = CLT_OK;
    clt_tensor *dout = NULL;
    size_t B = t->p.batch_size, T = t->T, V = clt_model_outputs(t->model);
    size_t n = B * T * (size_t)t->accumulate, dd[3] = {B, T, V};
    CLT_TRY(clt_tensor_view(&dout, t->dbuf, 0, 3, dd));
    for (int j = 0; j < t->accumulate; j++) {
        clt_tensor *out = NULL;
        uint64_t micro = (uint64_t)t->step * (uint64_t)t->accumulate + (uint64_t)j;
        CLT_TRY(clt_text_sampler_train_batch(t->text, micro, t->tx, t->ty));
        CLT_TRY(clt_model_forward(t->model, t->tx, true, micro, &out));
        CLT_TRY(text_loss(t, out, t->ty, 1.0f / (float)n, dout, t->loss_acc, NULL));
        if (t->scaler) CLT_TRY(clt_scaler_scale(t->scaler, dout));
        CLT_TRY(clt_model_backward(t->model, dout, j > 0));
    }
    CLT_TRY(clt_optim_step_scaled(t->optim, clt_model_grads(t->model), t->scaler));
    *tokens = n;
fail:
    clt_tensor_free(dout);
    return st;
}

/* A language model's validation loss on the trainer's buffers. */
static clt_status text_evaluate(clt_trainer *t, struct clt_eval_result *res)
{
    return lm_evaluate(t->model, t->text, t->tx, t->ty, t->rows, t->eval.acc, res);
}

/* Optimizer step t->step (step s of epoch `epoch`): forward, loss and backward of each of its
 * micro-batches, the gradients summed on the device and each scaled by 1 / (the step's
 * samples), then the update. Enqueued only: no host wait. */
/* Back-pressure on the host. Between log points nothing makes the host wait (without streamed
 * data or replicas), so it would queue up to --log-every steps ahead of the device, and a
 * signal (checked before each step is queued) would stop the run only after all of them had
 * run: minutes for a large model on a CPU. Before queueing step s the host waits for step
 * s - CLT_QUEUED_STEPS to end; the device still has the steps between queued, so it never
 * idles (clt_ctx_stats().paced counts these waits; they are not host waits). */
static clt_status pace_step(clt_trainer *t)
{
    clt_status st = CLT_OK;
    cl_event *slot = &t->queued[t->step % CLT_QUEUED_STEPS];
    if (!*slot) return CLT_OK;
    st = clt__ctx_pace(t->ctx, *slot);
    clReleaseEvent(*slot);
    *slot = NULL;
    return st;
}

/* Records the end of the step just queued, for pace_step. */
static clt_status mark_step(clt_trainer *t)
{
    clt_status st = CLT_OK;
    cl_event *slot = &t->queued[(t->step - 1) % CLT_QUEUED_STEPS];
    CLT_ASSERT(*slot == NULL);
    CLT_CHECK_CL(t->ctx, clEnqueueMarkerWithWaitList(clt_ctx_compute_queue(t->ctx), 0, NULL, slot),
                 "marking the end of a training step");
fail:
    return st;
}

static clt_status train_step(clt_trainer *t, int epoch, long s, size_t *samples)
{
    clt_status st = CLT_OK;
    clt_tensor *dout = NULL;
    if (t->text) return text_step(t, samples);
    size_t bs = t->p.batch_size, n = step_samples(t, s), N = clt_model_outputs(t->model);
    long micros = (long)((n + bs - 1) / bs), first = micro_index(t, t->step);
    float grad_scale = 1.0f / (float)n; /* n: the step's samples over all replicas */
    bool have_grad = false;
    for (long j = 0; j < micros; j++) {
        struct clt_batch b;
        clt_tensor *out = NULL;
        CLT_TRY(clt_loader_next(t->train, &b));
        CLT_ASSERT(b.step == first + j && b.epoch == epoch);
        if (b.size == 0) continue; /* this replica's slice of a small batch is empty */
        size_t dd[2] = {b.size, N};
        CLT_TRY(clt_tensor_view(&dout, t->dbuf, 0, 2, dd));
        /* dropout's masks: one stream per micro-batch (= the step without accumulation), and
         * per replica */
        uint64_t stream = t->comm ? (uint64_t)b.step * (uint64_t)t->comm->size +
                                        (uint64_t)t->comm->rank
                                  : (uint64_t)b.step;
        CLT_TRY(clt_model_forward(t->model, b.x, true, stream, &out));
        CLT_TRY(batch_loss(t->task, out, b.y, t->p.label_smoothing, grad_scale, dout,
                           t->loss_acc, NULL));
        if (t->scaler) CLT_TRY(clt_scaler_scale(t->scaler, dout));
        CLT_TRY(clt_model_backward(t->model, dout, have_grad));
        have_grad = true;
        clt_tensor_free(dout);
        dout = NULL;
    }
    if (t->comm) CLT_TRY(reduce_grads(t, have_grad));
    CLT_ASSERT(have_grad || t->comm); /* alone, every step has samples */
    /* (and the 16-bit weights of mixed precision: the optimizer's copy) */
    CLT_TRY(clt_optim_step_scaled(t->optim, clt_model_grads(t->model), t->scaler));
    *samples = n;
fail:
    clt_tensor_free(dout);
    return st;
}

/* Evaluates the test split or the text's validation windows and emits CLT_EVENT_EVAL for
 * `epoch` (0: the starting weights). */
static clt_status evaluate_and_emit(clt_trainer *t, int epoch)
{
    clt_status st = CLT_OK;
    struct clt_eval_result r;
    if (t->comm) CLT_TRY(average_buffers(t, CLT_WAIT_EVAL));
    if (t->text) CLT_TRY(text_evaluate(t, &r));
    else CLT_TRY(evaluate(t->model, t->test, t->p.batch_size, t->task, &r, NULL, &t->eval,
                          t->comm));
    struct clt_train_event ev = {.kind = CLT_EVENT_EVAL, .epoch = epoch};
    ev.loss = r.loss;
    ev.accuracy = r.accuracy;
    emit(t, &ev);
fail:
    return st;
}

clt_status clt_trainer_run(clt_trainer *t)
{
    clt_status st = CLT_OK;
    struct clt_loader_order order = run_order(t, t->step, t->total_steps);
    t->t0 = now_s();
    double log_t = t->t0;
    long log_from = t->step; /* first step of the current log interval */
    t->first_step = t->step;
    size_t log_samples = 0;
    /* The loader yields this run's batches in order: epoch by epoch, each epoch's order from
     * the seed, starting mid-epoch after a resume. */
    if (t->comm) CLT_TRY(check_replicas(t, "at the start", CLT_WAIT_SETUP));
    /* the starting weights' loss, before the first step (nanoGPT's "step 0") */
    if (t->p.eval_start && t->step == 0 && t->total_steps > 0 && (t->test || t->text)) {
        CLT_TRY(evaluate_and_emit(t, 0));
        log_t = now_s();
    }
    if (t->train) CLT_TRY(clt_loader_start(t->train, &order));

    while (t->step < t->total_steps) {
        int epoch = (int)(t->step / t->steps_per_epoch);
        long first = t->step % t->steps_per_epoch;
        double epoch_t0 = now_s(), epoch_loss = 0;
        size_t epoch_samples = 0;
        t->epoch = epoch;

        for (long s = first; s < t->steps_per_epoch && t->step < t->total_steps; s++) {
            /* (paced first: a signal that came while the host waited stops the run here) */
            CLT_TRY(pace_step(t));
            /* replicas stop where the last reduction agreed to, together */
            if (t->comm ? t->stop : t->p.interrupt && *t->p.interrupt) {
                st = interrupted(t, epoch + 1);
                goto fail;
            }
            size_t B = 0;
            CLT_TRY(train_step(t, epoch, s, &B));
            t->step++;
            CLT_TRY(mark_step(t));
            log_samples += B;

            bool log_now = t->p.log_every > 0 && t->step % t->p.log_every == 0;
            bool epoch_end = s + 1 == t->steps_per_epoch || t->step == t->total_steps;
            if (log_now || epoch_end) {
                double sum = 0;
                CLT_TRY(read_loss(t, &sum));
                double tn = now_s(), loss = sum / (double)log_samples;
                if (!isfinite(loss)) {
                    st = numeric_failure(t, loss, log_from);
                    goto fail;
                }
                epoch_loss += sum;
                epoch_samples += log_samples;
                if (log_now) {
                    struct clt_train_event e = {.kind = CLT_EVENT_LOG, .epoch = epoch + 1};
                    e.loss = loss;
                    e.samples_per_s = (double)log_samples / (tn - log_t);
                    e.accuracy = NAN;
                    emit(t, &e);
                }
                log_t = tn;
                log_from = t->step;
                log_samples = 0;
            }
            if (t->p.save_every > 0 && t->p.save_path && t->step % t->p.save_every == 0 &&
                t->step < t->total_steps)
                CLT_TRY(save_event(t, epoch + 1));
        }
        bool complete = t->step % t->steps_per_epoch == 0;
        if (complete) t->epoch = epoch + 1;
        struct clt_train_event e = {.kind = CLT_EVENT_EPOCH, .epoch = epoch + 1};
        e.loss = epoch_samples ? epoch_loss / (double)epoch_samples : NAN;
        e.epoch_s = now_s() - epoch_t0;
        e.samples_per_s = (double)epoch_samples / e.epoch_s;
        e.accuracy = NAN;
        emit(t, &e);
        if (t->test || t->text) CLT_TRY(evaluate_and_emit(t, epoch + 1));
        log_t = now_s(); /* evaluation time is not training throughput */
    }
    if (t->train) CLT_TRY(clt_loader_stop(t->train));
    if (t->p.save_path) CLT_TRY(save_event(t, t->epoch));
fail:
    if (t->train) clt_loader_stop(t->train); /* joins the thread on every path; no device wait */
    if (st != CLT_OK) st = save_after_failure(t, st);
    return st;
}

/* ---- memory: estimate and report ---------------------------------------------------------- */

struct clt_train_setup_params clt_train_setup_default_params(void)
{
    struct clt_train_setup_params p;
    memset(&p, 0, sizeof p);
    p.model = clt_model_default_params();
    p.loader = clt_loader_default_params();
    p.train = clt_train_default_params();
    return p;
}

static void est_add(uint64_t *by_category, clt_mem_category c, uint64_t bytes)
{
    by_category[c] += bytes ? bytes : 4; /* as the allocator: no empty buffers */
}

/* The largest batch this replica's objects hold at (global) micro-batch `batch`: all of it, or
 * with a comm its largest slice. */
static size_t replica_batch(const struct clt_train_setup_params *p, size_t batch)
{
    const clt_comm *c = p->train.comm;
    return c ? clt__comm_slice_max(c, c->rank, batch) : batch;
}

/* The model's parameters at micro-batch `batch`: the input shape comes from the training
 * data's sample shape (IDX images: (1, H, W)) when the caller left it zero. */
static struct clt_model_params model_params(const struct clt_train_setup_params *p, size_t batch)
{
    struct clt_model_params mp = p->model;
    mp.max_batch = replica_batch(p, batch);
    if (mp.input_shape[0] == 0 && p->train_set && p->train_set->sample_shape[1] != 0)
        memcpy(mp.input_shape, p->train_set->sample_shape, sizeof mp.input_shape);
    return mp;
}

/* Mirrors the allocations of clt_model_create (parameters, gradients, one (B, OUT) output per
 * layer that is not an identity, two (B, widest) gradient buffers: clt_model_mem_estimate,
 * which also knows mixed precision), the loss scaler (fp16), clt_optim_create (0, 1 or
 * 2 state vectors, weight-decay exemptions, the norm's buffer: clt__optim_mem_bytes),
 * clt_trainer_create (the output gradient (B, N), the loss accumulator,
 * the GEMM workspace when the ctx's GEMM choices need one and none is lent already),
 * the loader and the test split. A change there must change this: test_memory checks it. */
/* clt_train_mem_estimate of a language model: the model, optimizer and loss scaler as for any,
 * then the sampler's token ids (both splits, in the vocabulary's dtype), the trainer's output
 * gradient (B, T, V), loss accumulator, (B, T) i32 inputs and targets, the loss's per-row
 * buffer (2 B T f32) and the evaluation's two sums, and the GEMM workspace. */
static clt_status text_mem_estimate(const clt_ctx *ctx, const struct clt_train_setup_params *p,
                                    size_t batch, struct clt_mem_estimate *out)
{
    clt_status st = clt_spec_validate(p->spec, (int)p->in_features, (int)p->outputs);
    if (st != CLT_OK) return st;
    uint64_t *c = out->by_category, B = batch, T = p->in_features, P = 0;
    struct clt_model_params mp = p->model;
    mp.max_batch = batch;
    st = clt_model_param_elements(p->spec, p->in_features, p->outputs, &mp, &P);
    if (st != CLT_OK) return st;
    st = clt_model_mem_estimate(p->spec, p->in_features, p->outputs, &mp, c);
    if (st != CLT_OK) return st;
    if (mp.precision == CLT_DTYPE_F16) est_add(c, CLT_MEM_OPTIM, 4 * CLT_AMP_STATE_LEN);
    const uint64_t optim_bytes = clt__optim_mem_bytes(&p->train.optim, P);
    if (optim_bytes) est_add(c, CLT_MEM_OPTIM, optim_bytes);
    est_add(c, CLT_MEM_ACTIVATIONS, B * T * p->outputs * 4); /* the output gradient */
    est_add(c, CLT_MEM_WORKSPACE, 4);                        /* the loss accumulator */
    uint64_t gemm_ws = clt__gemm_ws_bytes((clt_ctx *)ctx);
    if (gemm_ws) est_add(c, CLT_MEM_WORKSPACE, gemm_ws);
    size_t ds = clt_dtype_size(clt_vocab_dtype(p->text->vocab));
    est_add(c, CLT_MEM_DATA, p->text->n_train * ds); /* the sampler's token ids */
    est_add(c, CLT_MEM_DATA, p->text->n_val * ds);
    est_add(c, CLT_MEM_ACTIVATIONS, B * T * 4); /* inputs */
    est_add(c, CLT_MEM_ACTIVATIONS, B * T * 4); /* targets */
    est_add(c, CLT_MEM_WORKSPACE, 2 * B * T * 4); /* the loss's per-row buffer */
    est_add(c, CLT_MEM_WORKSPACE, 8);             /* the evaluation's sums */
    for (int k = 0; k < CLT_MEM__COUNT; k++) out->total += c[k];
    return CLT_OK;
}

clt_status clt_train_mem_estimate(const clt_ctx *ctx, const struct clt_train_setup_params *p,
                                  size_t batch, struct clt_mem_estimate *out)
{
    memset(out, 0, sizeof *out);
    if (p->spec && p->text && batch) return text_mem_estimate(ctx, p, batch, out);
    if (!p->spec || !p->train_set || batch == 0)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG, "memory estimate: no spec, data or batch");
    clt_status st = clt_spec_validate(p->spec, (int)p->in_features, (int)p->outputs);
    if (st != CLT_OK) return st;
    uint64_t *c = out->by_category, B = replica_batch(p, batch), P = 0;
    struct clt_model_params mp = model_params(p, batch);
    st = clt_model_param_elements(p->spec, p->in_features, p->outputs, &mp, &P);
    if (st != CLT_OK) return st;
    st = clt_model_mem_estimate(p->spec, p->in_features, p->outputs, &mp, c);
    if (st != CLT_OK) return st;
    if (mp.precision == CLT_DTYPE_F16) est_add(c, CLT_MEM_OPTIM, 4 * CLT_AMP_STATE_LEN);
    const struct clt_optim_params *op = &p->train.optim;
    const uint64_t optim_bytes = clt__optim_mem_bytes(op, P); /* state, exemptions, norm */
    if (optim_bytes) est_add(c, CLT_MEM_OPTIM, optim_bytes); /* plain SGD allocates none */
    est_add(c, CLT_MEM_ACTIVATIONS, B * p->outputs * 4); /* the trainer's output gradient */
    est_add(c, CLT_MEM_WORKSPACE, 4);                    /* its loss accumulator */
    uint64_t gemm_ws = clt__gemm_ws_bytes((clt_ctx *)ctx); /* and GEMM workspace (no other) */
    if (gemm_ws) est_add(c, CLT_MEM_WORKSPACE, gemm_ws);
    struct clt_loader_params lp = p->loader;
    lp.batch_size = B;
    clt_loader_mem_estimate(ctx, p->train_set, &lp, c);
    if (p->train.comm) est_add(c, CLT_MEM_STAGING, (P + 1) * 4); /* the reduction's buffer */
    if (p->test_set && p->test_set->n > 0) {
        clt_resident_mem_estimate(p->test_set, c);
        est_add(c, CLT_MEM_ACTIVATIONS, B * p->test_set->features * 4); /* evaluation inputs */
        est_add(c, CLT_MEM_ACTIVATIONS, B * 4);                     /* and labels */
        est_add(c, CLT_MEM_WORKSPACE, 8);                           /* loss and correct sums */
    }
    for (int k = 0; k < CLT_MEM__COUNT; k++) out->total += c[k];
    return CLT_OK;
}

static size_t append(char *dst, size_t n, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *dst, size_t n, size_t used, const char *fmt, ...)
{
    if (used >= n) return used;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(dst + used, n - used, fmt, ap);
    va_end(ap);
    return w > 0 ? used + (size_t)w : used;
}

void clt_train_mem_report(const clt_ctx *ctx, const struct clt_train_setup_params *p,
                          size_t batch, char *dst, size_t n)
{
    if (n == 0) return;
    clt_mem_report(ctx, dst, n);
    size_t used = strlen(dst);
    struct clt_mem_stats ms = clt_ctx_mem_stats(ctx);
    for (int k = 0; k < 2 && batch > 0; k++) {
        size_t B = k == 0 ? batch : 2 * batch;
        struct clt_mem_estimate e;
        if (clt_train_mem_estimate(ctx, p, B, &e) != CLT_OK) break;
        char total[32], cap[32], b[32];
        clt_format_bytes(e.total, total, sizeof total);
        clt_format_bytes(ms.cap, cap, sizeof cap);
        used = append(dst, n, used, "estimate at micro-batch %zu%s: %s (%s the %s cap)\n  ", B,
                      k == 0 ? "" : ", the next larger", total,
                      e.total <= ms.cap ? "fits under" : "exceeds", cap);
        bool first = true;
        for (int c = 0; c < CLT_MEM__COUNT; c++) {
            if (!e.by_category[c]) continue;
            clt_format_bytes(e.by_category[c], b, sizeof b);
            used = append(dst, n, used, "%s%s %s", first ? "" : ", ",
                          clt_mem_category_name((clt_mem_category)c), b);
            first = false;
        }
        used = append(dst, n, used, "\n");
    }
}

/* ---- the set-up and its out-of-memory backoff --------------------------------------------- */

struct clt_train_setup {
    clt_ctx *ctx;
    struct clt_train_setup_params p;
    size_t batch;   /* micro-batch in use */
    int accumulate; /* micro-batches per step in use */
    int backoffs;
    clt_model *model;
    clt_loader *loader;
    clt_resident *test;
    clt_trainer *trainer;
    clt_text_sampler *sampler; /* text: the windows' sampler, else NULL */
    char *vocab;               /* text: the vocabulary's JSON for checkpoints */
};

clt_model *clt_train_setup_model(const clt_train_setup *s) { return s->model; }
clt_loader *clt_train_setup_loader(const clt_train_setup *s) { return s->loader; }
clt_trainer *clt_train_setup_trainer(const clt_train_setup *s) { return s->trainer; }
size_t clt_train_setup_batch(const clt_train_setup *s) { return s->batch; }
int clt_train_setup_accumulate(const clt_train_setup *s) { return s->accumulate; }
int clt_train_setup_backoffs(const clt_train_setup *s) { return s->backoffs; }

/* Frees the objects of one attempt (the trainer finishes the queue first), leaving s. */
static void setup_teardown(clt_train_setup *s)
{
    clt_trainer_free(s->trainer);
    clt_loader_free(s->loader);
    clt_resident_free(s->test);
    clt_model_free(s->model);
    clt_text_sampler_free(s->sampler);
    s->sampler = NULL;
    s->trainer = NULL;
    s->loader = NULL;
    s->test = NULL;
    s->model = NULL;
}

/* A language model's sampler (its windows: B the micro-batch, T the model's input) and trainer. */
static clt_status setup_text(clt_train_setup *s)
{
    clt_status st = CLT_OK;
    const struct clt_train_setup_params *p = &s->p;
    struct clt_text_sampler_params sp = clt_text_sampler_default_params();
    sp.batch = s->batch;
    sp.block = p->in_features;
    sp.seed = p->train.seed;
    if (p->eval_batches) sp.eval_batches = p->eval_batches;
    CLT_TRY(clt_text_sampler_create(&s->sampler, s->ctx, p->text, &sp));
    struct clt_train_params tp = p->train;
    tp.batch_size = s->batch;
    tp.accumulate = s->accumulate;
    tp.text = s->sampler;
    tp.text_tokens = p->text->n_train;
    tp.vocab = s->vocab;
    CLT_TRY(clt_trainer_create(&s->trainer, s->model, NULL, NULL, &tp));
fail:
    return st;
}

/* One attempt at micro-batch s->batch x s->accumulate; on failure frees what it made. */
static clt_status setup_build(clt_train_setup *s)
{
    clt_status st = CLT_OK;
    clt_checkpoint *ck = NULL;
    const struct clt_train_setup_params *p = &s->p;
    struct clt_model_params mp = model_params(p, s->batch);
    /* every batch of the plan and the augmentation, before anything is allocated */
    if (!p->text) CLT_TRY(clt__train_plan_check(s->ctx, p, s->batch, s->accumulate));
    CLT_TRY(clt_model_create(&s->model, s->ctx, p->spec, p->in_features, p->outputs, &mp));
    const char *from = p->resume_path ? p->resume_path : p->init_path;
    if (from) {
        if (p->resume_path) CLT_TRY(clt_checkpoint_open(&ck, from));
        else CLT_TRY(clt_checkpoint_open_weights(&ck, from));
        struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
        clt_task task = p->text ? CLT_TASK_CLASSIFICATION : p->train_set->task;
        if (!clt_checkpoint_is_plain(ck) &&
            (info.task != task || (size_t)info.classes != p->outputs))
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: the checkpoint is a %s model with %d "
                     "output%s, this run's data asks for %s with %zu", from,
                     info.task == CLT_TASK_REGRESSION ? "regression" : "classification",
                     info.classes, info.classes == 1 ? "" : "s",
                     task == CLT_TASK_REGRESSION ? "regression" : "classification",
                     p->outputs);
        CLT_TRY(clt_checkpoint_load_model(ck, s->model));
    }
    if (p->text) {
        CLT_TRY(setup_text(s));
        goto resume;
    }
    struct clt_loader_params lp = p->loader;
    lp.batch_size = replica_batch(p, s->batch);
    CLT_TRY(clt_loader_create(&s->loader, s->ctx, p->train_set, &p->norm, &lp));
    if (p->test_set && p->test_set->n > 0)
        CLT_TRY(clt_resident_create(&s->test, s->ctx, p->test_set, &p->norm));
    struct clt_train_params tp = p->train;
    tp.batch_size = s->batch;
    tp.accumulate = s->accumulate;
    CLT_TRY(clt_trainer_create(&s->trainer, s->model, s->loader, s->test, &tp));
resume:
    if (p->resume_path) CLT_TRY(clt_trainer_resume(s->trainer, p->resume_path));
    s->trainer->from = from; /* p's string: the caller's, which outlives the run */
fail:
    /* checkpoint and spec failures are recorded for the thread only: the caller reads the ctx */
    if (st != CLT_OK && clt_last_errmsg()[0]) clt__fail(s->ctx, st, "%s", clt_last_errmsg());
    clt_checkpoint_close(ck);
    if (st != CLT_OK) setup_teardown(s);
    return st;
}

/* After an out-of-memory failure: the next smaller micro-batch that divides the effective
 * batch (false at a micro-batch of 1), and tells the caller's callback. */
static bool backoff(clt_train_setup *s, clt_status st)
{
    if (st != CLT_ERR_OUT_OF_MEMORY || !s->p.auto_batch || s->batch <= 1) return false;
    size_t E = s->batch * (size_t)s->accumulate, b = s->batch / 2;
    while (b > 1 && E % b != 0) b--;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", clt_ctx_errmsg(s->ctx));
    s->batch = b;
    s->accumulate = (int)(E / b);
    s->backoffs++;
    if (s->p.train.on_event) {
        struct clt_train_event e;
        memset(&e, 0, sizeof e);
        e.kind = CLT_EVENT_BACKOFF;
        e.loss = e.accuracy = NAN;
        e.batch_size = s->batch;
        e.accumulate = s->accumulate;
        e.message = msg;
        e.stats = clt_ctx_stats(s->ctx);
        s->p.train.on_event(&e, s->p.train.user);
    }
    return true;
}

/* A text's identity for --resume: CRC-32C of its training split's token ids. */
static uint32_t text_crc32c(const clt_text *t)
{
    return clt__crc32c(0, t->train, t->n_train * sizeof *t->train);
}

void clt_train_setup_free(clt_train_setup *s)
{
    if (!s) return;
    setup_teardown(s);
    free(s->vocab);
    free(s);
}

clt_status clt_train_setup_create(clt_train_setup **out, clt_ctx *ctx,
                                  const struct clt_train_setup_params *p)
{
    clt_status st = CLT_OK;
    clt_train_setup *s = NULL;
    *out = NULL;
    if (!p->spec || (!p->train_set && !p->text))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "training set-up: no model spec or training data");
    if (p->train.batch_size == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--batch-size 0: expected at least 1");
    if (p->train.accumulate < 0 || (size_t)p->train.accumulate > SIZE_MAX / p->train.batch_size)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--accumulate %d: expected at least 1",
                 p->train.accumulate);
    /* An activation after the last linear layer is refused here as in the CLI, before
     * anything is allocated (clt_model_create alone still builds such a model). */
    if (clt_spec_check_output(p->spec) != CLT_OK)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s", clt_last_errmsg());
    /* a backoff on one replica would leave the others at another batch */
    if (p->train.comm && p->auto_batch)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--auto-batch: not with several replicas; give "
                 "--batch-size and --accumulate");
    CLT_ALLOC(ctx, s, 1);
    s->ctx = ctx;
    s->p = *p;
    s->batch = p->train.batch_size;
    s->accumulate = p->train.accumulate > 1 ? p->train.accumulate : 1;
    if (p->text) {
        if (!s->p.train.data_crc32c) s->p.train.data_crc32c = text_crc32c(p->text);
        CLT_TRY(clt_vocab_to_json(p->text->vocab, &s->vocab));
    } else if (!s->p.train.data_crc32c) {
        s->p.train.data_crc32c = clt__checkpoint_data_crc32c(p->train_set);
    }
    do {
        st = setup_build(s);
    } while (st != CLT_OK && backoff(s, st));
    if (st != CLT_OK) goto fail;
    *out = s;
    s = NULL;
fail:
    clt_train_setup_free(s);
    return st;
}

clt_status clt_train_setup_run(clt_train_setup *s)
{
    clt_status st = CLT_OK;
    if (!s->trainer)
        return clt__fail(s->ctx, CLT_ERR_STATE, "training set-up: a failed rebuild left nothing");
    for (;;) {
        long first = clt_optim_steps(clt_trainer_optim(s->trainer));
        st = clt_trainer_run(s->trainer);
        /* retried only before the first update: the rebuilt set-up starts from the same state */
        if (st != CLT_ERR_OUT_OF_MEMORY || !s->p.auto_batch || s->batch <= 1 ||
            clt_optim_steps(clt_trainer_optim(s->trainer)) != first)
            break;
        setup_teardown(s);
        backoff(s, st);
        while ((st = setup_build(s)) != CLT_OK && backoff(s, st)) {
        }
        if (st != CLT_OK) break;
    }
    return st;
}

clt_status clt_train_setup_probe(clt_train_setup *s, struct clt_mem_stats *out)
{
    clt_status st = CLT_OK;
    clt_trainer *t = s->trainer;
    if (!t)
        return clt__fail(s->ctx, CLT_ERR_STATE, "training set-up: a failed rebuild left nothing");
    if (t->comm)
        return clt__fail(s->ctx, CLT_ERR_INVALID_ARG, "--dry-run: not with several replicas; "
                         "dry-run one device (its estimate holds for each replica's slice)");
    long g = t->step;
    struct clt_loader_order order = run_order(t, g, g + 1);
    size_t samples = 0;
    if (t->text) {
        struct clt_eval_result r;
        CLT_TRY(text_step(t, &samples));
        CLT_TRY(text_evaluate(t, &r));
        CLT_TRY(clt_ctx_finish(s->ctx, CLT_WAIT_SETUP));
        *out = clt_ctx_mem_stats(s->ctx);
        return CLT_OK;
    }
    CLT_TRY(clt_loader_start(t->train, &order));
    CLT_TRY(train_step(t, (int)(g / t->steps_per_epoch), g % t->steps_per_epoch, &samples));
    CLT_TRY(clt_loader_stop(t->train));
    if (s->test) {
        struct clt_eval_result r;
        CLT_TRY(evaluate(s->model, s->test, s->batch, s->p.train_set->task, &r, NULL, &t->eval, NULL));
    }
    CLT_TRY(clt_ctx_finish(s->ctx, CLT_WAIT_SETUP));
    *out = clt_ctx_mem_stats(s->ctx);
fail:
    if (t->train) clt_loader_stop(t->train);
    return st;
}

/* ---- several replicas in one process ------------------------------------------------------- */

struct group_run {
    clt_train_setup *s;
    clt_status st;
    pthread_mutex_t *mu;
    int *first; /* the index of the first replica that failed for its own reason */
    int index;
};

static void *group_main(void *arg)
{
    struct group_run *r = arg;
    r->st = clt_train_setup_run(r->s);
    /* an interruption is agreed by all replicas: each stops on its own */
    if (r->st != CLT_OK && r->st != CLT_ERR_ABORTED && r->st != CLT_ERR_INTERRUPTED) {
        pthread_mutex_lock(r->mu);
        if (*r->first < 0) *r->first = r->index;
        pthread_mutex_unlock(r->mu);
        /* the others may be waiting for this replica in a reduction: let them go */
        clt_comm_abort(r->s->p.train.comm, clt_ctx_errmsg(r->s->ctx));
    }
    return NULL;
}

clt_status clt_train_setup_run_group(clt_train_setup *const *s, int n, int *failed)
{
    clt_status st = CLT_OK;
    struct group_run *runs = NULL;
    pthread_t *threads = NULL;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int first = -1, started = 0;
    *failed = -1;
    if (n < 1) return clt__fail(NULL, CLT_ERR_INVALID_ARG, "run group: %d replicas", n);
    for (int i = 0; i < n; i++)
        if (!s[i]->p.train.comm || clt_comm_rank(s[i]->p.train.comm) != i ||
            clt_comm_size(s[i]->p.train.comm) != n)
            return clt__fail(s[i]->ctx, CLT_ERR_INVALID_ARG, "run group: set-up %d is not "
                             "built with member %d of a group of %d", i, i, n);
    CLT_ALLOC(NULL, runs, (size_t)n);
    CLT_ALLOC(NULL, threads, (size_t)n);
    for (int i = 0; i < n; i++)
        runs[i] = (struct group_run){.s = s[i], .mu = &mu, .first = &first, .index = i};
    /* The replicas' threads take no signals: Ctrl-C goes to the caller's handler, whose flag
     * every replica reads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (; started < n; started++) {
        int rc = pthread_create(&threads[started], NULL, group_main, &runs[started]);
        if (rc != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            clt_comm_abort(s[0]->p.train.comm, "could not start a thread for a replica");
            st = clt__fail(NULL, CLT_ERR_UNSUPPORTED, "run group: pthread_create failed (%s)",
                           strerror(rc));
            break;
        }
    }
    if (st == CLT_OK) pthread_sigmask(SIG_SETMASK, &old, NULL);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    if (st != CLT_OK) goto fail;
    if (first >= 0) {
        *failed = first;
        st = clt__fail(NULL, runs[first].st, "%s", clt_ctx_errmsg(s[first]->ctx));
    } else {
        for (int i = 0; i < n && st == CLT_OK; i++)
            if (runs[i].st != CLT_OK) { /* aborted with no own failure: cannot happen */
                *failed = i;
                st = clt__fail(NULL, runs[i].st, "%s", clt_ctx_errmsg(s[i]->ctx));
            }
    }
fail:
    free(runs);
    free(threads);
    return st;
}
