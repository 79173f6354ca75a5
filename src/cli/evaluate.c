/* `cltrain eval` and `cltrain predict`: a checkpoint's model on the device, its loss and
 * accuracy (and confusion matrix) on a data split, or its predicted classes and probabilities
 * as CSV. */
#include "cli/run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Opens a checkpoint and builds its model on the device; loads `split` of data with the
 * checkpoint's input scaling. */
struct loaded {
    clt_checkpoint *ck;
    clt_ctx *ctx;
    clt_model *m;
    clt_dataset train, test;
    clt_resident *data;
    clt_spec spec;
    struct clt_checkpoint_info info;
};

static void loaded_free(struct loaded *l)
{
    clt_resident_free(l->data);
    clt_model_free(l->m);
    clt_ctx_free(l->ctx);
    clt_checkpoint_close(l->ck);
    clt_spec_free(&l->spec);
    clt_dataset_free(&l->train);
    clt_dataset_free(&l->test);
}

static int load_for_inference(struct loaded *l, const char *load, const char *data,
                              const char *split, const char *device, long batch, long label_column)
{
    struct clt_data_params dp = clt_data_default_params();
    if (clt_checkpoint_open(&l->ck, load) != CLT_OK) return cli_fail_status(NULL);
    l->info = clt_checkpoint_get_info(l->ck);
    dp.task = l->info.task;
    dp.label_column = (int)label_column;
    /* classes: the named sets declare theirs (another count than the checkpoint's is an
     * error); other data is read with the checkpoint's, so a subset that lacks some classes
     * evaluates and a label the model cannot output is an error */
    bool named = strcmp(data, "mnist") == 0 || strcmp(data, "fashion-mnist") == 0;
    if (!named && l->info.task == CLT_TASK_CLASSIFICATION) dp.classes = l->info.classes;
    clt_status st = clt_data_open(data, &dp, &l->train, &l->test);
    if (st != CLT_OK) return cli_fail_data(st);
    if (l->info.task == CLT_TASK_CLASSIFICATION &&
        (l->train.classes > l->info.classes || (named && l->train.classes != l->info.classes)))
        return cli_error("%s: the checkpoint's model has %d classes, %s has %d", load,
                         l->info.classes, data, l->train.classes);
    clt_dataset *d = strcmp(split, "train") == 0 ? &l->train : &l->test;
    if (strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return cli_usage_error("--split %s: expected train or test", split);
    if (d->n == 0) return cli_error("%s: the %s split is empty", data, split);
    int outputs = l->info.task == CLT_TASK_CLASSIFICATION ? l->info.classes : 1;
    if (clt_spec_parse(l->info.model_text, outputs, &l->spec) != CLT_OK)
        return cli_error("%s: %s", load, clt_last_errmsg());
    if (d->features != l->info.norm.features)
        return cli_error("%s: the checkpoint expects %zu input features, %s has %zu", load,
                         l->info.norm.features, data, d->features);
    if (cli_open_ctx(device, false, false, &l->ctx) != CLI_OK) return CLI_FAIL;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = (size_t)batch;
    memcpy(mp.input_shape, l->info.input_shape, sizeof mp.input_shape); /* 0: flat */
    if (clt_model_create(&l->m, l->ctx, &l->spec, d->features, (size_t)outputs, &mp) != CLT_OK ||
        clt_checkpoint_load_model(l->ck, l->m) != CLT_OK ||
        clt_resident_create(&l->data, l->ctx, d, &l->info.norm) != CLT_OK)
        return cli_fail_status(l->ctx);
    cli_note_unverified(l->ck, load);
    return CLI_OK;
}

int cli_eval(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *label_text = NULL;
    long batch = 1000, label_column = -1;
    bool confusion = false;
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint to evaluate (required)", NULL},
        {"data", OPT_STR, &data, "fashion-mnist, mnist, idx:DIR or csv:TRAIN[,TEST]", NULL},
        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text, "CSV column of the label (-1 = last)", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"confusion", OPT_FLAG, &confusion, "print the confusion matrix", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        cli_print_help("eval", "cltrain eval --load FILE [options]", opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "eval");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("eval: --load FILE is required");
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    struct loaded l = {0};
    long *matrix = NULL;
    rc = load_for_inference(&l, load, data, split, device, batch, label_column);
    if (rc == CLI_OK) {
        struct clt_eval_result r;
        size_t N = (size_t)l.info.classes;
        bool classify = l.info.task == CLT_TASK_CLASSIFICATION;
        if (confusion && classify) matrix = calloc(N * N, sizeof *matrix);
        if (clt_evaluate(l.m, l.data, (size_t)batch, l.info.task, &r, matrix) != CLT_OK) {
            rc = cli_fail_status(l.ctx);
        } else if (!isfinite(r.loss)) {
            /* never a NaN printed as a result: finite weights whose outputs overflow */
            rc = cli_error("eval: %s: the loss on the %s split of %s is not finite (%g): the "
                           "model's outputs overflow on these inputs; the checkpoint's weights "
                           "or input normalisation do not fit this data",
                           load, split, data, r.loss);
        } else {
            if (classify)
                printf("%s split of %s: loss %.4f, accuracy %.2f%% (%zu samples)\n", split, data,
                       r.loss, 100.0 * r.accuracy, r.count);
            else
                printf("%s split of %s: mean squared error %.6g (%zu samples)\n", split, data,
                       r.loss, r.count);
            if (matrix) {
                printf("confusion matrix (rows: true class, columns: predicted)\n      ");
                for (size_t j = 0; j < N; j++) printf(" %6zu", j);
                printf("\n");
                for (size_t i = 0; i < N; i++) {
                    printf("%6zu", i);
                    for (size_t j = 0; j < N; j++) printf(" %6ld", matrix[i * N + j]);
                    printf("\n");
                }
            }
        }
    }
    free(matrix);
    loaded_free(&l);
    return rc;
}

int cli_predict(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *input = NULL, *output = NULL, *label_text = NULL;
    long batch = 1000, label_column = -1;
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint (required)", NULL},
        {"data", OPT_STR, &data, "fashion-mnist, mnist, idx:DIR or csv:TRAIN[,TEST]", NULL},
        {"input", OPT_STR, &input, "a CSV of inputs (same as --data csv:FILE,FILE --split test)",
         NULL},
        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text, "CSV column of the label (-1 = last)", NULL},
        {"output", OPT_STR, &output, "write the predictions here instead of stdout", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        cli_print_help("predict",
                       "cltrain predict --load FILE [options]\n"
                       "writes CSV lines: index,predicted,p0,p1,... (regression: index,value)",
                       opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "predict");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("predict: --load FILE is required");
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    char csv_spec[4200];
    if (input) {
        snprintf(csv_spec, sizeof csv_spec, "csv:%s,%s", input, input);
        data = csv_spec;
        split = "test";
    }
    struct cli_paths ps = {0};
    cli_paths_add(&ps, "--load", load, false, NULL);
    cli_paths_add_data(&ps, input ? "--input" : "--data", data);
    cli_paths_add(&ps, "--output", output, true, NULL);
    rc = cli_paths_check(&ps);
    if (rc != CLI_OK) return rc;
    /* an output that cannot be written is reported before the model runs */
    if (output && clt_outfile_check(output) != CLT_OK)
        return cli_error("--output %s", clt_last_errmsg());
    if (output && cli_lock_output("--output", output) != CLI_OK) return CLI_FAIL;
    struct loaded l = {0};
    int32_t *classes = NULL;
    float *probs = NULL;
    clt_outfile *f = NULL;
    rc = load_for_inference(&l, load, data, split, device, batch, label_column);
    if (rc != CLI_OK) goto done;
    rc = CLI_FAIL;
    size_t n = clt_resident_count(l.data), N = clt_model_outputs(l.m);
    classes = malloc(n * sizeof *classes);
    probs = malloc(n * N * sizeof *probs);
    if (!classes || !probs) {
        cli_error("out of host memory");
        goto done;
    }
    if (clt_predict(l.m, l.data, (size_t)batch, l.info.task, classes, probs) != CLT_OK) {
        cli_fail_status(l.ctx);
        goto done;
    }
    for (size_t i = 0; i < n * N; i++)
        if (!isfinite(probs[i])) {
            cli_error("predict: %s: the model's output for sample %zu of the %s split of %s is "
                      "not finite (%g): its outputs overflow on these inputs; the checkpoint's "
                      "weights or input normalisation do not fit this data",
                      load, i / N, split, data, (double)probs[i]);
            goto done;
        }
    if (output && clt_outfile_open(&f, output) != CLT_OK) {
        cli_error("--output %s", clt_last_errmsg());
        goto done;
    }
    FILE *o = f ? clt_outfile_stream(f) : stdout; /* stdout's errors: checked in main() */
    bool classify = l.info.task == CLT_TASK_CLASSIFICATION;
    fprintf(o, classify ? "index,predicted" : "index,value");
    for (size_t j = 0; classify && j < N; j++) fprintf(o, ",p%zu", j);
    fprintf(o, "\n");
    for (size_t i = 0; i < n; i++) {
        if (classify) fprintf(o, "%zu,%d", i, classes[i]);
        else fprintf(o, "%zu", i);
        for (size_t j = 0; j < N; j++) fprintf(o, ",%.6g", (double)probs[i * N + j]);
        fprintf(o, "\n");
    }
    if (f) {
        clt_status st = clt_outfile_commit(f); /* checks every write; frees f */
        f = NULL;
        if (st != CLT_OK) {
            cli_error("--output %s", clt_last_errmsg());
            goto done;
        }
    }
    rc = CLI_OK;
done:
    clt_outfile_discard(f);
    free(classes);
    free(probs);
    loaded_free(&l);
    return rc;
}
