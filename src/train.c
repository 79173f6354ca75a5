/* The training loop and evaluation: resident splits, shuffled batches gathered on the device,
 * forward, loss and backward, one optimizer launch per step, the loss read only at log points
 * (each read a counted host wait), evaluation after each epoch, and checkpoints. */
#include "cltrain/train.h"

#include "internal.h"

#include "cltrain/checkpoint.h"
#include "cltrain/ops.h"
#include "cltrain/rng.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* ---- resident splits ---------------------------------------------------------------------- */

struct clt_resident {
    clt_ctx *ctx;
    size_t n, features;
    clt_task task;
    clt_tensor *x;            /* (n, F) u8 or f32 as stored */
    clt_tensor *y;            /* (n) i32 labels or f32 targets */
    clt_tensor *scale, *shift; /* (F) f32 */
    clt_tensor *order;        /* (n) i32: 0 .. n-1, for evaluation in file order */
};

size_t clt_resident_count(const clt_resident *r)
{
    return r->n;
}

clt_status clt_resident_create(clt_resident **out, clt_ctx *ctx, const clt_dataset *d,
                               const struct clt_input_norm *norm)
{
    clt_status st = CLT_OK;
    clt_resident *r = NULL;
    float *scale = NULL, *shift = NULL;
    int32_t *order = NULL;
    cl_event ev[5] = {0};
    cl_uint nev = 0;
    *out = NULL;
    if (d->n == 0 || d->features == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: the data set is empty", d->source);
    if (norm->features != d->features)
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: %zu features, but the model expects %zu", d->source,
                 d->features, norm->features);
    if (d->n > (size_t)INT32_MAX)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: more than 2^31 samples", d->source);
    CLT_ALLOC(ctx, r, 1);
    r->ctx = ctx;
    r->n = d->n;
    r->features = d->features;
    r->task = d->task;
    size_t xdims[2] = {d->n, d->features}, n = d->n, F = d->features;
    CLT_TRY(clt_tensor_create(&r->x, ctx, d->u8 ? CLT_DTYPE_U8 : CLT_DTYPE_F32, 2, xdims,
                              CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(&r->y, ctx, d->labels ? CLT_DTYPE_I32 : CLT_DTYPE_F32, 1, &n,
                              CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(&r->scale, ctx, CLT_DTYPE_F32, 1, &F, CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(&r->shift, ctx, CLT_DTYPE_F32, 1, &F, CLT_MEM_DATA));
    CLT_TRY(clt_tensor_create(&r->order, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_DATA));
    CLT_ALLOC(ctx, scale, F);
    CLT_ALLOC(ctx, shift, F);
    CLT_ALLOC(ctx, order, n);
    for (size_t f = 0; f < F; f++) {
        double sd = norm->std ? norm->std[f] : 1.0, mean = norm->mean ? norm->mean[f] : 0.0;
        scale[f] = (float)(norm->scale / sd);
        shift[f] = (float)(-mean / sd);
    }
    for (size_t i = 0; i < n; i++) order[i] = (int32_t)i;
    CLT_TRY(clt_tensor_write(r->x, d->u8 ? (const void *)d->u8 : (const void *)d->f32, false,
                             &ev[nev++]));
    CLT_TRY(clt_tensor_write(r->y, d->labels ? (const void *)d->labels : (const void *)d->targets,
                             false, &ev[nev++]));
    CLT_TRY(clt_tensor_write(r->scale, scale, false, &ev[nev++]));
    CLT_TRY(clt_tensor_write(r->shift, shift, false, &ev[nev++]));
    CLT_TRY(clt_tensor_write(r->order, order, false, &ev[nev++]));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, nev, ev));
    *out = r;
    r = NULL;
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (r && nev) clt_ctx_finish(ctx, CLT_WAIT_SETUP); /* host arrays go: uploads must be done */
    free(scale);
    free(shift);
    free(order);
    clt_resident_free(r);
    return st;
}

void clt_resident_free(clt_resident *r)
{
    if (!r) return;
    clt_tensor_free(r->x);
    clt_tensor_free(r->y);
    clt_tensor_free(r->scale);
    clt_tensor_free(r->shift);
    clt_tensor_free(r->order);
    free(r);
}

/* ---- batches ------------------------------------------------------------------------------ */

/* Views of one batch: rows idx[start, start+B) gathered into x (B, F) and y (B). */
struct batch {
    clt_tensor *idx, *x, *y, *dout;
};

static void batch_free(struct batch *b)
{
    clt_tensor_free(b->idx);
    clt_tensor_free(b->x);
    clt_tensor_free(b->y);
    clt_tensor_free(b->dout);
    memset(b, 0, sizeof *b);
}

/* Gathers rows order[start .. start+B) of r into the first B rows of xbuf/ybuf; dbuf (may be
 * NULL) gets a (B, N) view for the output gradient. */
static clt_status batch_gather(struct batch *b, clt_resident *r, clt_tensor *order, size_t start,
                               size_t B, clt_tensor *xbuf, clt_tensor *ybuf, clt_tensor *dbuf,
                               size_t N)
{
    clt_status st = CLT_OK;
    size_t xd[2] = {B, r->features}, dd[2] = {B, N};
    CLT_TRY(clt_tensor_view(&b->idx, order, start, 1, &B));
    CLT_TRY(clt_tensor_view(&b->x, xbuf, 0, 2, xd));
    CLT_TRY(clt_tensor_view(&b->y, ybuf, 0, 1, &B));
    if (dbuf) CLT_TRY(clt_tensor_view(&b->dout, dbuf, 0, 2, dd));
    CLT_TRY(clt_op_gather_rows(b->x, r->x, b->idx, r->scale, r->shift));
    CLT_TRY(clt_op_gather(b->y, r->y, b->idx));
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

clt_status clt_evaluate(clt_model *m, clt_resident *data, size_t batch_size, clt_task task,
                        struct clt_eval_result *res, long *confusion)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    clt_tensor *xbuf = NULL, *ybuf = NULL, *acc = NULL, *loss_acc = NULL, *correct_acc = NULL,
               *pred = NULL, *pred_view = NULL;
    int32_t *pred_host = NULL, *labels_host = NULL;
    struct batch b = {0};
    cl_event ev[3] = {0};
    cl_uint nev = 0;
    float sums[2] = {0, 0};
    size_t n = data->n, F = data->features, N = clt_model_outputs(m), two = 2, one = 1;
    size_t bs = batch_size < clt_model_max_batch(m) ? batch_size : clt_model_max_batch(m);
    size_t xd[2] = {bs, F};
    bool classify = task == CLT_TASK_CLASSIFICATION;
    CLT_TRY(clt_tensor_same_ctx(clt_model_params(m), data->x));
    CLT_TRY(clt_tensor_create(&xbuf, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&ybuf, ctx, clt_tensor_dtype(data->y), 1, &bs, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_zeros(&acc, ctx, CLT_DTYPE_F32, 1, &two, CLT_MEM_WORKSPACE));
    CLT_TRY(clt_tensor_view(&loss_acc, acc, 0, 1, &one));
    CLT_TRY(clt_tensor_view(&correct_acc, acc, 1, 1, &one));
    if (confusion && classify) {
        CLT_TRY(clt_tensor_create(&pred, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_WORKSPACE));
        CLT_ALLOC(ctx, pred_host, n);
        CLT_ALLOC(ctx, labels_host, n);
    }
    for (size_t start = 0; start < n; start += bs) {
        size_t B = n - start < bs ? n - start : bs;
        clt_tensor *out = NULL;
        CLT_TRY(batch_gather(&b, data, data->order, start, B, xbuf, ybuf, NULL, N));
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
        CLT_TRY(clt_tensor_read(data->y, labels_host, false, &ev[nev++]));
    }
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_EVAL, nev, ev));
    res->count = n;
    res->loss = classify ? sums[0] / (double)n : sums[0] / (double)n;
    res->accuracy = classify ? sums[1] / (double)n : NAN;
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
    clt_tensor_free(acc);
    clt_tensor_free(xbuf);
    clt_tensor_free(ybuf);
    free(pred_host);
    free(labels_host);
    return st;
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
    size_t n = data->n, F = data->features, N = clt_model_outputs(m);
    size_t bs = batch_size < clt_model_max_batch(m) ? batch_size : clt_model_max_batch(m);
    size_t xd[2] = {bs, F}, pd[2] = {n, N};
    bool classify = task == CLT_TASK_CLASSIFICATION;
    CLT_TRY(clt_tensor_same_ctx(clt_model_params(m), data->x));
    CLT_TRY(clt_tensor_create(&xbuf, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&ybuf, ctx, clt_tensor_dtype(data->y), 1, &bs, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&pred, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_WORKSPACE));
    CLT_TRY(clt_tensor_create(&prob, ctx, CLT_DTYPE_F32, 2, pd, CLT_MEM_WORKSPACE));
    for (size_t start = 0; start < n; start += bs) {
        size_t B = n - start < bs ? n - start : bs, qd[2] = {B, N};
        clt_tensor *out = NULL;
        CLT_TRY(batch_gather(&b, data, data->order, start, B, xbuf, ybuf, NULL, N));
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
    p.shuffle = true;
    p.log_every = 100;
    p.task = CLT_TASK_CLASSIFICATION;
    p.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    return p;
}

struct clt_trainer {
    clt_ctx *ctx;
    clt_model *model;
    clt_optim *optim;
    clt_resident *train, *test;
    struct clt_train_params p;
    clt_tensor *perm;              /* (n) i32: this epoch's order */
    int32_t *perm_host;
    clt_tensor *xbuf, *ybuf, *dbuf; /* (max_batch, F), (max_batch), (max_batch, N) */
    clt_tensor *loss_acc;          /* (1) f32: summed loss since the last read */
    long step;                     /* optimizer steps taken */
    int epoch;                     /* epochs completed */
    long steps_per_epoch, total_steps;
    double t0;
};

clt_optim *clt_trainer_optim(clt_trainer *t)
{
    return t->optim;
}

void clt_trainer_free(clt_trainer *t)
{
    if (!t) return;
    if (t->ctx) clt_ctx_finish(t->ctx, CLT_WAIT_SETUP); /* perm_host may still be uploading */
    clt_optim_free(t->optim);
    clt_tensor_free(t->perm);
    clt_tensor_free(t->xbuf);
    clt_tensor_free(t->ybuf);
    clt_tensor_free(t->dbuf);
    clt_tensor_free(t->loss_acc);
    free(t->perm_host);
    free(t);
}

clt_status clt_trainer_create(clt_trainer **out, clt_model *model, clt_resident *train,
                              clt_resident *test, const struct clt_train_params *p)
{
    clt_status st = CLT_OK;
    clt_trainer *t = NULL;
    clt_ctx *ctx = clt_model_ctx(model);
    *out = NULL;
    if (p->batch_size == 0 || p->batch_size > clt_model_max_batch(model))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--batch-size %zu: expected 1 to %zu (the model's)",
                 p->batch_size, clt_model_max_batch(model));
    if (p->epochs <= 0 && p->max_steps <= 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--epochs %d: expected at least 1", p->epochs);
    CLT_TRY(clt_tensor_same_ctx(clt_model_params(model), train->x));
    if (test) CLT_TRY(clt_tensor_same_ctx(clt_model_params(model), test->x));
    if (train->features != clt_model_in_features(model))
        CLT_FAIL(ctx, CLT_ERR_SHAPE, "the data has %zu features, the model expects %zu",
                 train->features, clt_model_in_features(model));
    CLT_ALLOC(ctx, t, 1);
    t->ctx = ctx;
    t->model = model;
    t->train = train;
    t->test = test;
    t->p = *p;
    /* The model lives on its device already: the optimizer's state is born there. */
    CLT_TRY(clt_optim_create(&t->optim, clt_model_params(model), &p->optim));
    size_t n = train->n, F = train->features, N = clt_model_outputs(model), one = 1;
    size_t mb = clt_model_max_batch(model), xd[2] = {mb, F}, dd[2] = {mb, N};
    CLT_TRY(clt_tensor_create(&t->perm, ctx, CLT_DTYPE_I32, 1, &n, CLT_MEM_STAGING));
    CLT_TRY(clt_tensor_create(&t->xbuf, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&t->ybuf, ctx, clt_tensor_dtype(train->y), 1, &mb,
                              CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_create(&t->dbuf, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_ACTIVATIONS));
    CLT_TRY(clt_tensor_zeros(&t->loss_acc, ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_WORKSPACE));
    CLT_ALLOC(ctx, t->perm_host, n);
    size_t bs = p->batch_size;
    t->steps_per_epoch = (long)(p->drop_last ? n / bs : (n + bs - 1) / bs);
    if (t->steps_per_epoch == 0)
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "--drop-last with --batch-size %zu leaves no batch of "
                                           "%zu samples", bs, n);
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
    e->elapsed_s = now_s() - t->t0;
    e->lr = clt_optim_lr_at(&t->p.optim, t->step > 0 ? t->step - 1 : 0);
    e->stats = clt_ctx_stats(t->ctx);
    if (t->p.on_event) t->p.on_event(e, t->p.user);
}

/* Reads and resets the loss accumulator: one counted host wait. */
static clt_status read_loss(clt_trainer *t, double *sum)
{
    clt_status st = CLT_OK;
    float v = 0;
    cl_event ev = NULL;
    CLT_TRY(clt_tensor_read(t->loss_acc, &v, false, &ev));
    CLT_TRY(clt_ctx_wait(t->ctx, CLT_WAIT_LOG, 1, &ev));
    CLT_TRY(clt_op_fill(t->loss_acc, 0.0f));
    *sum = v;
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}

clt_status clt_trainer_save(clt_trainer *t, const char *path)
{
    struct clt_checkpoint_info info = {
        .model_text = t->p.model_text,
        .norm = t->p.norm,
        .classes = t->p.classes,
        .task = t->p.task,
        .step = t->step,
        .epoch = t->epoch,
        .seed = t->p.seed,
    };
    return clt_checkpoint_save(path, t->model, t->optim, &info);
}

clt_status clt_trainer_resume(clt_trainer *t, const char *path)
{
    clt_status st = CLT_OK;
    clt_checkpoint *ck = NULL;
    CLT_TRY(clt_checkpoint_open(&ck, path));
    CLT_TRY(clt_checkpoint_load_optim(ck, t->optim, t->model));
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    t->step = info.step;
    t->epoch = (int)(info.step / t->steps_per_epoch);
    clt_optim_set_steps(t->optim, info.step);
fail:
    clt_checkpoint_close(ck);
    return st;
}

static clt_status numeric_failure(clt_trainer *t, double loss, long from)
{
    return clt__fail(t->ctx, CLT_ERR_NUMERIC,
                     "the training loss became %s between steps %ld and %ld (epoch %d); lower "
                     "--lr, or check the data for non-finite values",
                     isnan(loss) ? "NaN" : "infinite", from + 1, t->step, t->epoch + 1);
}

clt_status clt_trainer_run(clt_trainer *t)
{
    clt_status st = CLT_OK;
    struct batch b = {0};
    cl_event perm_ev = NULL;
    const size_t n = t->train->n, bs = t->p.batch_size, N = clt_model_outputs(t->model);
    t->t0 = now_s();
    double log_t = t->t0;
    long log_from = t->step; /* first step of the current log interval */
    size_t log_samples = 0;

    while (t->step < t->total_steps) {
        int epoch = (int)(t->step / t->steps_per_epoch);
        long first = t->step % t->steps_per_epoch;
        double epoch_t0 = now_s(), epoch_loss = 0;
        size_t epoch_samples = 0;
        t->epoch = epoch;
        /* This epoch's order. The host array is rewritten only after the previous epoch's
         * upload has completed: each epoch ends with a blocking read of the loss, ordered
         * after the compute work that waited for that upload. */
        if (t->p.shuffle)
            clt_rng_permutation(t->p.seed, clt_rng_stream(CLT_RNG_SHUFFLE, (uint64_t)epoch),
                                (uint32_t *)t->perm_host, n);
        else
            for (size_t i = 0; i < n; i++) t->perm_host[i] = (int32_t)i;
        CLT_TRY(clt_tensor_write(t->perm, t->perm_host, false, &perm_ev));
        clReleaseEvent(perm_ev);
        perm_ev = NULL;

        for (long s = first; s < t->steps_per_epoch && t->step < t->total_steps; s++) {
            size_t start = (size_t)s * bs, B = n - start < bs ? n - start : bs;
            clt_tensor *out = NULL;
            CLT_TRY(batch_gather(&b, t->train, t->perm, start, B, t->xbuf, t->ybuf, t->dbuf, N));
            CLT_TRY(clt_model_forward(t->model, b.x, true, (uint64_t)t->step, &out));
            CLT_TRY(batch_loss(t->p.task, out, b.y, t->p.label_smoothing, 1.0f / (float)B,
                               b.dout, t->loss_acc, NULL));
            CLT_TRY(clt_model_backward(t->model, b.dout, false));
            CLT_TRY(clt_optim_step(t->optim, clt_model_grads(t->model)));
            batch_free(&b);
            t->step++;
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
                t->step < t->total_steps) {
                CLT_TRY(clt_trainer_save(t, t->p.save_path));
                struct clt_train_event e = {.kind = CLT_EVENT_SAVE, .epoch = epoch + 1};
                e.path = t->p.save_path;
                e.loss = e.accuracy = NAN;
                emit(t, &e);
            }
        }
        bool complete = t->step % t->steps_per_epoch == 0;
        if (complete) t->epoch = epoch + 1;
        struct clt_train_event e = {.kind = CLT_EVENT_EPOCH, .epoch = epoch + 1};
        e.loss = epoch_samples ? epoch_loss / (double)epoch_samples : NAN;
        e.epoch_s = now_s() - epoch_t0;
        e.samples_per_s = (double)epoch_samples / e.epoch_s;
        e.accuracy = NAN;
        emit(t, &e);
        if (t->test) {
            struct clt_eval_result r;
            CLT_TRY(clt_evaluate(t->model, t->test, bs, t->p.task, &r, NULL));
            struct clt_train_event ev = {.kind = CLT_EVENT_EVAL, .epoch = epoch + 1};
            ev.loss = r.loss;
            ev.accuracy = r.accuracy;
            emit(t, &ev);
        }
        log_t = now_s(); /* evaluation time is not training throughput */
    }
    if (t->p.save_path) {
        CLT_TRY(clt_trainer_save(t, t->p.save_path));
        struct clt_train_event e = {.kind = CLT_EVENT_SAVE, .epoch = t->epoch};
        e.path = t->p.save_path;
        e.loss = e.accuracy = NAN;
        emit(t, &e);
    }
fail:
    batch_free(&b);
    return st;
}
