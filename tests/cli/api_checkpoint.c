/* api_checkpoint: trains through the public C API with clt_train_default_params() (only the
 * step count changed), saves with clt_trainer_save and prints the in-process evaluation, so
 * that tests/cli/api_checkpoint.sh can check that `cltrain eval` loads the file and gets the
 * same loss: the trainer must take the spec, task, classes and input scaling from the model
 * and the loader, with nothing repeated by the caller.
 * Usage: api_checkpoint DATA LABEL_COLUMN classification|regression MODEL OUT.safetensors
 * Prints "loss %.4f" (the test split's loss, as cltrain eval prints it). */
#include <cltrain/cltrain.h>

#include <stdio.h>
#include <stdlib.h>

static int failed(clt_status st, const clt_ctx *ctx, const char *call)
{
    if (st == CLT_OK) return 0;
    const char *msg = ctx && clt_ctx_errmsg(ctx)[0] ? clt_ctx_errmsg(ctx) : clt_last_errmsg();
    fprintf(stderr, "api_checkpoint: %s: %s: %s\n", call, clt_status_name(st), msg);
    return 1;
}
#define CHECK(c, call)                                                                             \
    do {                                                                                           \
        if (failed((call), (c), #call)) goto done;                                                 \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: api_checkpoint DATA LABEL_COLUMN classification|regression "
                        "MODEL OUT.safetensors\n");
        return 2;
    }
    int rc = 1;
    clt_ctx *ctx = NULL;
    clt_dataset train = {0}, test = {0};
    clt_spec spec = {0, NULL};
    clt_model *m = NULL;
    clt_loader *loader = NULL;
    clt_resident *test_dev = NULL;
    clt_trainer *t = NULL;
    float *mean = NULL, *std = NULL;
    struct clt_data_params dp = clt_data_default_params();
    dp.label_column = atoi(argv[2]);
    dp.task = argv[3][0] == 'r' ? CLT_TASK_REGRESSION : CLT_TASK_CLASSIFICATION;

    struct clt_ctx_params cp = clt_ctx_default_params();
    CHECK(NULL, clt_ctx_create(&ctx, &cp));
    CHECK(NULL, clt_data_open(argv[1], &dp, &train, &test));
    CHECK(NULL, clt_spec_parse(argv[4], train.classes, &spec));
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = 32;
    CHECK(ctx, clt_model_create(&m, ctx, &spec, train.features, (size_t)train.classes, &mp));
    /* standardised inputs: the statistics live in arrays freed before the save, so the
     * checkpoint holds them only if the loader kept its own copy */
    mean = malloc(train.features * sizeof *mean);
    std = malloc(train.features * sizeof *std);
    if (!mean || !std) goto done;
    CHECK(NULL, clt_dataset_stats(&train, mean, std));
    struct clt_input_norm norm = {
        .features = train.features, .scale = train.input_scale, .mean = mean, .std = std};
    struct clt_loader_params lp = clt_loader_default_params();
    lp.batch_size = mp.max_batch;
    CHECK(ctx, clt_loader_create(&loader, ctx, &train, &norm, &lp));
    CHECK(ctx, clt_resident_create(&test_dev, ctx, &test, &norm));
    for (size_t f = 0; f < train.features; f++) mean[f] = 1e6f, std[f] = 1e-6f;
    free(mean);
    free(std);
    mean = std = NULL;

    struct clt_train_params tp = clt_train_default_params();
    tp.max_steps = 8;
    tp.batch_size = mp.max_batch;
    CHECK(ctx, clt_trainer_create(&t, m, loader, NULL, &tp));
    CHECK(ctx, clt_trainer_run(t));
    CHECK(ctx, clt_trainer_save(t, argv[5]));
    struct clt_eval_result r;
    CHECK(ctx, clt_evaluate(m, test_dev, 1000, dp.task, &r, NULL));
    printf("loss %.4f\n", r.loss);
    rc = 0;
done:
    clt_trainer_free(t);
    clt_resident_free(test_dev);
    clt_loader_free(loader);
    clt_model_free(m);
    clt_spec_free(&spec);
    clt_dataset_free(&train);
    clt_dataset_free(&test);
    clt_ctx_free(ctx);
    free(mean);
    free(std);
    return rc;
}
