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
    const clt_dataset *d; /* the split evaluated: &train or &test */
    clt_resident *data;
    clt_spec spec;
    struct clt_checkpoint_info info;
};

/* Whether a CSV split has a label column (predict): --no-labels says none; else the checkpoint
 * decides from the column count: as many columns as it has input features, no label; one
 * more, a label at --label-column. */
enum labels { LABELS_YES, LABELS_NO, LABELS_DETECT };

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

/* After a failed read with labels: whether the CSV files read as inputs alone have the
 * checkpoint's F features, i.e. they have no label column (the read then failed on a cell of
 * the features taken for a label). */
static bool inputs_alone(const char *data, const struct clt_data_params *dp, size_t F)
{
    struct clt_data_params all = *dp;
    clt_dataset tr = {0}, te = {0};
    all.no_labels = true;
    bool fits = clt_data_open(data, &all, &tr, &te) == CLT_OK && tr.features == F;
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    return fits;
}

/* LABELS_DETECT on CSV data: reads the split with every column an input and keeps it that way
 * when that is the checkpoint's feature count; one column more means a label, read again
 * with labels. Anything else is an error naming both counts. */
static int open_data(struct loaded *l, const char *load, const char *data,
                     struct clt_data_params *dp, enum labels labels)
{
    bool csv = strncmp(data, "csv:", 4) == 0;
    size_t F = l->info.norm.features;
    dp->no_labels = csv && labels != LABELS_YES;
    clt_status st = clt_data_open(data, dp, &l->train, &l->test);
    if (st != CLT_OK) {
        if (csv && labels == LABELS_YES && inputs_alone(data, dp, F))
            return cli_error("%s: the checkpoint expects %zu input features and %s has %zu "
                             "columns: inputs without a label column; eval needs labels "
                             "(cltrain predict takes inputs alone)", load, F, data, F);
        return cli_fail_data(st);
    }
    if (!csv || labels != LABELS_DETECT) return CLI_OK;
    size_t cols = l->train.features; /* the splits agree (clt_data_open) */
    if (cols == F) return CLI_OK;
    if (cols != F + 1)
        return cli_error("%s: the checkpoint expects %zu input features; %s has %zu columns, "
                         "expected %zu (inputs alone) or %zu (inputs and a label at "
                         "--label-column)", load, F, data, cols, F, F + 1);
    clt_dataset_free(&l->train);
    clt_dataset_free(&l->test);
    dp->no_labels = false;
    st = clt_data_open(data, dp, &l->train, &l->test);
    return st == CLT_OK ? CLI_OK : cli_fail_data(st);
}

/* Images are read in the checkpoint's input shape (C, H, W); a model on flat inputs takes
 * none. */
static int image_params(const struct loaded *l, const char *load, struct clt_data_params *dp)
{
    const size_t *shape = l->info.input_shape;
    if (!shape[2] || (shape[0] != 1 && shape[0] != 3))
        return cli_error("%s: the checkpoint's model does not take images (its input shape is "
                         "not 1 or 3 channels x H x W): images need a model trained on images",
                         load);
    dp->channels = (int)shape[0];
    dp->image_h = shape[1];
    dp->image_w = shape[2];
    return CLI_OK;
}

/* `images`: --input's image file or folder (predict), read into the test split; else data. */
static int load_for_inference(struct loaded *l, const char *load, const char *data,
                              const char *split, const char *device, long batch, long label_column,
                              enum labels labels, const struct cli_image_opts *img,
                              const char *images)
{
    struct clt_data_params dp = clt_data_default_params();
    if (clt_checkpoint_open(&l->ck, load) != CLT_OK) return cli_fail_status(NULL);
    l->info = clt_checkpoint_get_info(l->ck);
    dp.task = l->info.task;
    dp.label_column = (int)label_column;
    /* classes: the named sets declare theirs (another count than the checkpoint's is an
     * error); other data is read with the checkpoint's, so a subset that lacks some classes
     * evaluates and a label the model cannot output is an error */
    bool named = !images && (strcmp(data, "mnist") == 0 || strcmp(data, "fashion-mnist") == 0);
    if (!named && l->info.task == CLT_TASK_CLASSIFICATION) dp.classes = l->info.classes;
    if (strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return cli_usage_error("--split %s: expected train or test", split);
    if (cli_apply_image_opts(img, images ? "images:" : data, &dp) != CLI_OK) return CLI_USAGE;
    if (img->channels_seen || img->size)
        return cli_usage_error("%s: --channels and --image-size come from the checkpoint "
                               "(its input shape)", img->channels_seen ? "--channels"
                                                                       : "--image-size");
    dp.split_seed = l->info.seed; /* --val-split's hold-out as the run drew it */
    if ((images || strncmp(data, "images:", 7) == 0) && image_params(l, load, &dp) != CLI_OK)
        return CLI_FAIL;
    if (images) {
        clt_status st = clt_data_load_images(images, &dp, &l->test);
        if (st != CLT_OK) return cli_fail_data(st);
        if (l->test.skipped)
            fprintf(stderr, "cltrain: note: %zu bad image files skipped\n", l->test.skipped);
        free(l->test.labels); /* image files are inputs alone: no accuracy to print */
        l->test.labels = NULL;
        l->train.classes = l->test.classes;
    } else {
        int rc = open_data(l, load, data, &dp, labels);
        if (rc != CLI_OK) return rc;
        if (cli_check_class_names(load, l->info.class_names, l->info.classes, data,
                                  l->train.class_names, l->train.classes) != CLI_OK)
            return CLI_FAIL;
    }
    if (l->info.task == CLT_TASK_CLASSIFICATION &&
        (l->train.classes > l->info.classes || (named && l->train.classes != l->info.classes)))
        return cli_error("%s: the checkpoint's model has %d classes, %s has %d", load,
                         l->info.classes, data, l->train.classes);
    clt_dataset *d = !images && strcmp(split, "train") == 0 ? &l->train : &l->test;
    l->d = d;
    if (d->n == 0) return cli_error("%s: the %s split is empty", images ? images : data, split);
    int outputs = l->info.task == CLT_TASK_CLASSIFICATION ? l->info.classes : 1;
    if (clt_spec_parse(l->info.model_text, outputs, &l->spec) != CLT_OK)
        return cli_error("%s: %s", load, clt_last_errmsg());
    if (d->features != l->info.norm.features && dp.no_labels)
        return cli_error("%s: the checkpoint expects %zu input features; %s has %zu columns, all "
                         "inputs with --no-labels", load, l->info.norm.features, data,
                         d->features);
    /* e.g. pixels 0-255 in every column, one taken for a label */
    if (d->features + 1 == l->info.norm.features && labels == LABELS_YES &&
        strncmp(data, "csv:", 4) == 0)
        return cli_error("%s: the checkpoint expects %zu input features and %s has %zu columns: "
                         "inputs without a label column; eval needs labels (cltrain predict "
                         "takes inputs alone)", load, l->info.norm.features, data,
                         l->info.norm.features);
    if (d->features != l->info.norm.features)
        return cli_error("%s: the checkpoint expects %zu input features, %s has %zu", load,
                         l->info.norm.features, images ? images : data, d->features);
    char why[400];
    if (!cli_spec_one_row(&l->spec, d->features, outputs, l->info.input_shape, why, sizeof why))
        return cli_error("%s: %s", load, why);
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

/* The confusion matrix; with class names (image folders) they label the rows and columns,
 * cut to 12 characters. */
static void print_confusion(const long *matrix, size_t N, const char *const *names)
{
    int w = 6;
    for (size_t j = 0; names && j < N; j++) {
        int len = (int)strlen(names[j]);
        if (len > w) w = len > 12 ? 12 : len;
    }
    printf("confusion matrix (rows: true class, columns: predicted)\n%*s", w, "");
    for (size_t j = 0; j < N; j++) {
        if (names) printf(" %*.*s", w, w, names[j]);
        else printf(" %*zu", w, j);
    }
    printf("\n");
    for (size_t i = 0; i < N; i++) {
        if (names) printf("%-*.*s", w, w, names[i]);
        else printf("%*zu", w, i);
        for (size_t j = 0; j < N; j++) printf(" %*ld", w, matrix[i * N + j]);
        printf("\n");
    }
}

/* eval on text: the checkpoint's language model over --data's validation split, encoded with
 * the checkpoint's vocabulary (a character outside it is the error), on eval_batches fixed
 * batches of the run's batch size: nats per token, bits per character (or byte), perplexity. */
static int eval_text(const char *load, const char *data, const char *device, long eval_batches)
{
    clt_checkpoint *ck = NULL;
    clt_ctx *ctx = NULL;
    clt_model *m = NULL;
    clt_text_sampler *s = NULL;
    clt_text text = {0};
    clt_spec spec = {0};
    int rc = CLI_OK;
    if (clt_checkpoint_open(&ck, load) != CLT_OK) return cli_fail_status(NULL);
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    size_t T = info.norm.features, B = info.run.present ? info.run.batch_size : 12;
    if (!info.vocab) {
        rc = cli_usage_error("eval: %s is not a language model's checkpoint (it has no "
                             "vocabulary); --data %s evaluates a model trained on text", load,
                             data);
        goto done;
    }
    rc = cli_open_text(data, NULL, load, false, &text);
    if (rc != CLI_OK) goto done;
    if (text.n_val < T + 1) {
        rc = cli_usage_error("eval: %s's windows hold T + 1 = %zu tokens, but the validation "
                             "split of %s holds %zu", load, T + 1, data, text.n_val);
        goto done;
    }
    if (clt_spec_parse(info.model_text, info.classes, &spec) != CLT_OK) {
        rc = cli_error("%s: %s", load, clt_last_errmsg());
        goto done;
    }
    if ((rc = cli_open_ctx(device, false, false, &ctx)) != CLI_OK) goto done;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    struct clt_text_sampler_params sp = clt_text_sampler_default_params();
    sp.batch = B;
    sp.block = T;
    sp.eval_batches = (size_t)eval_batches;
    struct clt_eval_result r;
    if (clt_model_create(&m, ctx, &spec, T, (size_t)info.classes, &mp) != CLT_OK ||
        clt_checkpoint_load_model(ck, m) != CLT_OK ||
        clt_text_sampler_create(&s, ctx, &text, &sp) != CLT_OK ||
        clt_evaluate_text(m, s, &r) != CLT_OK) {
        rc = cli_fail_status(ctx);
        goto done;
    }
    cli_note_unverified(ck, load);
    if (!isfinite(r.loss)) {
        rc = cli_error("eval: %s: the loss on %s is not finite (%g): the model's outputs "
                       "overflow", load, data, r.loss);
        goto done;
    }
    printf("validation split of %s: loss %.4f nats per token, %.4f bits per %s, perplexity "
           "%.3f, accuracy %.2f%% (%zu tokens in %zu windows of %zu)\n",
           data, r.loss, r.loss / log(2.0),
           clt_vocab_kind(text.vocab) == CLT_TEXT_BYTE ? "byte" : "character", exp(r.loss),
           100.0 * r.accuracy, r.count, r.count / T, T);
done:
    clt_text_sampler_free(s);
    clt_model_free(m);
    clt_ctx_free(ctx);
    clt_text_free(&text);
    clt_spec_free(&spec);
    clt_checkpoint_close(ck);
    return rc;
}

int cli_eval(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *label_text = NULL;
    long batch = 1000, label_column = -1, eval_batches = 20;
    bool confusion = false;
    struct cli_image_opts img = {0};
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint to evaluate (required)", NULL},
        {"data", OPT_STR, &data,
         "fashion-mnist, mnist, idx:DIR, csv:TRAIN[,TEST], images:DIR (read in the "
         "checkpoint's input shape), or a language model's text:FILE[,VAL_FILE] or shakespeare "
         "(its validation split)", NULL},
        {"eval-batches", OPT_POS_INT, &eval_batches,
         "text: the fixed validation batches of the run's batch size (20)", NULL},
        {"val-split", OPT_UNIT_FLOAT, &img.val_split,
         "images:DIR/CLASS/: the fraction held out in training (its test split, drawn by the "
         "checkpoint's seed)", &img.val_seen},
        {"skip-bad-images", OPT_FLAG, &img.skip_bad,
         "images: skip unreadable or mismatched files, counted, instead of failing", NULL},
        {"channels", OPT_POS_INT, &img.channels, "(from the checkpoint: refused)",
         &img.channels_seen},
        {"image-size", OPT_STR, &img.size, "(from the checkpoint: refused)", NULL},

        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text, "CSV column of the label (-1 = last)", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"confusion", OPT_FLAG, &confusion, "print the confusion matrix", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        const char *usage =
            "cltrain eval --load FILE [options]\n"
            "input: --data as for train, the split --split, with labels (CSV: the\n"
            "  checkpoint's input features and a label at --label-column)";
        cli_print_help("eval", usage, opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "eval");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("eval: --load FILE is required");
    if (cli_is_text_data(data)) return eval_text(load, data, device, eval_batches);
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    struct loaded l = {0};
    long *matrix = NULL;
    rc = load_for_inference(&l, load, data, split, device, batch, label_column, LABELS_YES,
                            &img, NULL);
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
            if (matrix) print_confusion(matrix, N, l.info.class_names);
        }
    }
    free(matrix);
    loaded_free(&l);
    return rc;
}

/* The accuracy of the predicted classes (regression: the mean squared error of the values)
 * against the split's labels; nothing for a split without labels. */
static void print_score(FILE *o, const clt_dataset *d, const int32_t *classes, const float *probs,
                        size_t N, const char *split, const char *data)
{
    double sum = 0;
    if (d->labels) {
        for (size_t i = 0; i < d->n; i++) sum += classes[i] == d->labels[i];
        fprintf(o, "%s split of %s: accuracy %.2f%% (%zu samples)\n", split, data,
                100.0 * sum / (double)d->n, d->n);
    } else if (d->targets) {
        for (size_t i = 0; i < d->n; i++) {
            double e = (double)probs[i * N] - (double)d->targets[i];
            sum += e * e;
        }
        fprintf(o, "%s split of %s: mean squared error %.6g (%zu samples)\n", split, data,
                sum / (double)d->n, d->n);
    }
}

/* ",text" as one CSV field: quoted (quotes doubled) when it holds a comma, quote or line end. */
static void csv_field(FILE *o, const char *text)
{
    if (!strpbrk(text, ",\"\r\n")) {
        fprintf(o, ",%s", text);
        return;
    }
    fputs(",\"", o);
    for (const char *c = text; *c; c++) {
        if (*c == '"') fputc('"', o);
        fputc(*c, o);
    }
    fputc('"', o);
}

int cli_predict(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *input = NULL, *output = NULL, *label_text = NULL;
    long batch = 1000, label_column = -1;
    bool no_labels = false;
    struct cli_image_opts img = {0};
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint (required)", NULL},
        {"data", OPT_STR, &data,
         "fashion-mnist, mnist, idx:DIR, csv:TRAIN[,TEST] or images:DIR (read in the "
         "checkpoint's input shape)", NULL},
        {"input", OPT_STR, &input,
         "a CSV of inputs (same as --data csv:FILE,FILE --split test), or a PNG or JPEG image "
         "or a folder of them (read in the checkpoint's input shape; a file column names each)",
         NULL},
        {"val-split", OPT_UNIT_FLOAT, &img.val_split,
         "images:DIR/CLASS/: the fraction held out in training (its test split, drawn by the "
         "checkpoint's seed)", &img.val_seen},
        {"skip-bad-images", OPT_FLAG, &img.skip_bad,
         "images: skip unreadable or mismatched files, counted, instead of failing", NULL},
        {"channels", OPT_POS_INT, &img.channels, "(from the checkpoint: refused)",
         &img.channels_seen},
        {"image-size", OPT_STR, &img.size, "(from the checkpoint: refused)", NULL},

        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text,
         "CSV column of the label, if the file has one (-1 = last)", NULL},
        {"no-labels", OPT_FLAG, &no_labels, "CSV: every column is an input, none a label", NULL},
        {"output", OPT_STR, &output, "write the predictions here instead of stdout", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        const char *usage =
            "cltrain predict --load FILE [options]\n"
            "input: --data as for eval, or --input X.csv: rows of the checkpoint's input\n"
            "  features, with or without a label column (as many columns as features: no\n"
            "  label; one more: the label at --label-column; --no-labels: never a label);\n"
            "  or --input IMAGE or FOLDER: images, read in the checkpoint's input shape\n"
            "writes CSV lines: index,predicted,p0,p1,... (regression: index,value); with\n"
            "  class names (a model trained on image folders) index,predicted,class,p0,...;\n"
            "  for --input images index,file,...; with labels it also prints the accuracy\n"
            "  (regression: the mean squared error): on stdout with --output, else on stderr";
        cli_print_help("predict", usage, opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "predict");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("predict: --load FILE is required");
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    char csv_spec[4200];
    const char *images = input && clt_data_is_image(input) ? input : NULL;
    if (input && !images) {
        snprintf(csv_spec, sizeof csv_spec, "csv:%s,%s", input, input);
        data = csv_spec;
        split = "test";
    }
    struct cli_paths ps = {0};
    cli_paths_add(&ps, "--load", load, false, NULL);
    if (images) cli_paths_add(&ps, "--input", images, false, NULL);
    else cli_paths_add_data(&ps, input ? "--input" : "--data", data);
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
    rc = load_for_inference(&l, load, data, split, device, batch, label_column,
                            no_labels ? LABELS_NO : LABELS_DETECT, &img, images);
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
    const char *const *names = classify ? l.info.class_names : NULL;
    char *const *files = l.test.sample_names;
    fprintf(o, "index%s%s", files ? ",file" : "", classify ? ",predicted" : ",value");
    if (names) fprintf(o, ",class");
    for (size_t j = 0; classify && j < N; j++) fprintf(o, ",p%zu", j);
    fprintf(o, "\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(o, "%zu", i);
        if (files) csv_field(o, files[i]);
        if (classify) fprintf(o, ",%d", classes[i]);
        if (names) csv_field(o, names[classes[i]]);
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
    /* with labels, how the predictions fare; stdout stays CSV when the predictions go there */
    print_score(output ? stdout : stderr, l.d, classes, probs, N, split, data);
    rc = CLI_OK;
done:
    clt_outfile_discard(f);
    free(classes);
    free(probs);
    loaded_free(&l);
    return rc;
}
