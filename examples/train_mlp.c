/* train_mlp: the whole lesson in one file, through the public API only. Pick the device once,
 * load Fashion-MNIST, build an MLP on the device (then its optimizer there), stream batches
 * with no host wait per step, evaluate, save a checkpoint, report host waits and peak memory.
 * Usage: train_mlp [STEPS [CHECKPOINT]]   (STEPS 0 or absent: one epoch)
 * Environment: CLTRAIN_DEVICE (the device), CLTRAIN_DATA_DIR (where fashion-mnist/ is). */
#include <cltrain/cltrain.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Every call returns a clt_status; on failure print the call and its message and clean up.
 * Calls on a ctx leave their message in it; host-only calls (data, spec) in the thread's. */
static int failed(clt_status st, const clt_ctx *ctx, const char *call)
{
    if (st == CLT_OK) return 0;
    const char *msg = ctx && clt_ctx_errmsg(ctx)[0] ? clt_ctx_errmsg(ctx) : clt_last_errmsg();
    fprintf(stderr, "train_mlp: %s: %s: %s\n", call, clt_status_name(st), msg);
    return 1;
}
#define CHECK(c, call)                                                                             \
    do {                                                                                           \
        if (failed((call), (c), #call)) goto done;                                                 \
    } while (0)

/* Called by the training loop at log points and epoch ends (it has read the loss anyway). */
static void on_event(const struct clt_train_event *e, void *user)
{
    (void)user;
    if (e->kind == CLT_EVENT_LOG)
        printf("step %ld/%ld loss %.4f lr %.3g %.0f samples/s\n", e->step, e->total_steps, e->loss,
               e->lr, e->samples_per_s);
    else if (e->kind == CLT_EVENT_EPOCH)
        printf("epoch %d/%d: train loss %.4f, %.2f s\n", e->epoch, e->epochs, e->loss, e->epoch_s);
}

int main(int argc, char **argv)
{
    int rc = 1;
    char *end = NULL;
    errno = 0;
    long steps = argc > 1 ? strtol(argv[1], &end, 10) : 0;
    if (argc > 3 || (argc > 1 && (*end || end == argv[1] || errno || steps < 0))) {
        fprintf(stderr, "usage: train_mlp [STEPS [CHECKPOINT]]  (STEPS >= 0; 0: one epoch)\n");
        return 2;
    }
    const char *path = argc > 2 ? argv[2] : "train_mlp.safetensors";
    clt_ctx *ctx = NULL;
    clt_dataset train = {0}, test = {0};
    clt_spec spec = {0, NULL};
    char *spec_text = NULL, mem[32];
    clt_model *model = NULL;
    clt_loader *loader = NULL;
    clt_resident *test_dev = NULL;
    clt_trainer *trainer = NULL;

    /* 1. The device, once: $CLTRAIN_DEVICE or "auto". Everything below is created from ctx. */
    struct clt_ctx_params cp = clt_ctx_default_params();
    CHECK(NULL, clt_ctx_create(&ctx, &cp));
    const clt_device_info *dev = clt_ctx_device(ctx);
    printf("device [%d] %s (%s)\n", dev->index, dev->device_name, clt_device_type_name(dev->type));

    /* 2. The data, in host memory ($CLTRAIN_DATA_DIR/fashion-mnist), and the model on the
     *    device: parameters, gradients and activations for batches of up to 128 rows. */
    CHECK(NULL, clt_data_open("fashion-mnist", NULL, &train, &test));
    const char *model_text = "linear 256, relu, linear 128, relu, linear 10";
    CHECK(NULL, clt_spec_parse(model_text, train.classes, &spec));
    CHECK(NULL, clt_spec_to_string(&spec, &spec_text));
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 128;
    CHECK(ctx, clt_model_create(&model, ctx, &spec, train.features, (size_t)train.classes, &mp));

    /* 3. Batches: a host thread fills pinned staging buffers and uploads them non-blocking;
     *    the compute queue waits on the upload's event, never the host. The test split is
     *    copied to the device once. Pixels are scaled by 1/255 on the device. */
    struct clt_input_norm norm = {.features = train.features, .scale = train.input_scale};
    struct clt_loader_params lp = clt_loader_default_params();
    lp.mode = CLT_LOADER_STREAMING;
    lp.batch_size = mp.max_batch;
    CHECK(ctx, clt_loader_create(&loader, ctx, &train, &norm, &lp));
    CHECK(ctx, clt_resident_create(&test_dev, ctx, &test, &norm));
    printf("data: %zu train, %zu test; %s\nmodel: %s\n", train.n, test.n,
           clt_loader_describe(loader), spec_text);

    /* 4. The trainer creates the optimizer (Adam) on the model's device, then runs. */
    struct clt_train_params tp = clt_train_default_params();
    long per_epoch = clt_loader_steps_per_epoch(train.n, mp.max_batch, false);
    tp.epochs = 1;
    tp.max_steps = steps;
    tp.batch_size = mp.max_batch;
    tp.log_every = ((steps > 0 && steps < per_epoch ? steps : per_epoch) + 9) / 10;
    tp.optim = clt_optim_default_params(CLT_OPTIM_ADAM);
    tp.data_name = "fashion-mnist";
    tp.on_event = on_event;
    CHECK(ctx, clt_trainer_create(&trainer, model, loader, NULL, &tp));
    struct clt_ctx_stats before = clt_ctx_stats(ctx);
    CHECK(ctx, clt_trainer_run(trainer));
    struct clt_ctx_stats after = clt_ctx_stats(ctx);
    struct clt_loader_stats ls = clt_loader_stats(loader);

    /* 5. Evaluate on the resident test split (one host wait), save (one host wait). */
    struct clt_eval_result ev;
    CHECK(ctx, clt_evaluate(model, test_dev, 1000, CLT_TASK_CLASSIFICATION, &ev, NULL));
    printf("test loss %.4f, test accuracy %.2f%% (%zu samples)\n", ev.loss, 100 * ev.accuracy,
           ev.count);
    CHECK(ctx, clt_trainer_save(trainer, path));
    printf("saved %s (step %ld)\n", path, clt_optim_steps(clt_trainer_optim(trainer)));

    /* 6. Host waits while training, by reason (a step makes none), and peak device memory. */
    printf("host waits while training: %ld (", after.host_waits_total - before.host_waits_total);
    for (int r = 0, first = 1; r < CLT_WAIT__COUNT; r++) {
        long n = after.host_waits[r] - before.host_waits[r];
        if (n) printf("%s%s %ld", first ? "" : ", ", clt_wait_reason_name((clt_wait_reason)r), n);
        if (n) first = 0;
    }
    printf("); loader thread waits %ld (%.2f s), batch stall %.2f s\n", ls.waits, ls.wait_s,
           ls.stall_s);
    clt_format_bytes(clt_ctx_mem_stats(ctx).peak, mem, sizeof mem);
    printf("peak device memory %s\n", mem);
    rc = 0;
done:
    clt_trainer_free(trainer); /* and its optimizer */
    clt_resident_free(test_dev);
    clt_loader_free(loader);
    clt_model_free(model);
    free(spec_text);
    clt_spec_free(&spec);
    clt_dataset_free(&test);
    clt_dataset_free(&train);
    clt_ctx_free(ctx);
    return rc;
}
