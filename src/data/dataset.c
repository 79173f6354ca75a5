/* Data sets as a whole: the spec string (fashion-mnist, mnist, idx:DIR, csv:TRAIN[,TEST],
 * images:DIR)
 * that picks a reader and loads both splits consistently, freeing, and the per-feature
 * standardisation statistics. */
#include "data/data_internal.h"
#include "runtime/internal.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

struct clt_data_params clt_data_default_params(void)
{
    struct clt_data_params p = {.label_column = -1, .task = CLT_TASK_CLASSIFICATION, .classes = 0,
                                .image_cache = true};
    return p;
}

void clt_dataset_free(clt_dataset *d)
{
    if (!d) return;
    if (d->feature_names) {
        for (size_t f = 0; f < d->features; f++)
            free(d->feature_names[f]);
    }
    free(d->feature_names);
    if (d->class_names) {
        for (int c = 0; c < d->classes; c++)
            free(d->class_names[c]);
    }
    free(d->class_names);
    if (d->sample_names) {
        for (size_t i = 0; i < d->n; i++)
            free(d->sample_names[i]);
    }
    free(d->sample_names);
    free(d->target_name);
    free(d->u8);
    free(d->f32);
    free(d->labels);
    free(d->targets);
    memset(d, 0, sizeof *d);
}

float clt_dataset_value(const clt_dataset *d, size_t sample, size_t feature)
{
    CLT_ASSERT(d && sample < d->n && feature < d->features && (d->u8 || d->f32));
    size_t i = sample * d->features + feature;
    return d->u8 ? (float)d->u8[i] * d->input_scale : d->f32[i] * d->input_scale;
}

/* One sample's scaled inputs, in double. */
static void scaled_row(const clt_dataset *d, size_t sample, double *row)
{
    size_t base = sample * d->features;
    double scale = d->input_scale;
    if (d->u8) {
        for (size_t f = 0; f < d->features; f++)
            row[f] = d->u8[base + f] * scale;
    } else {
        for (size_t f = 0; f < d->features; f++)
            row[f] = d->f32[base + f] * scale;
    }
}

clt_status clt_dataset_stats(const clt_dataset *d, float *mean, float *std)
{
    clt_status st = CLT_OK;
    double *work = NULL, *sum, *sq, *row;
    size_t F = 0, n_work = 0;
    if (!d || !mean || !std)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_dataset_stats: NULL argument");
    if (d->n == 0 || d->features == 0 || (!d->u8 && !d->f32)) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: no samples to compute statistics on",
                 d->source[0] ? d->source : "data set");
    }
    F = d->features;
    n_work = 3 * F;
    CLT_ALLOC(NULL, work, n_work);
    sum = work;
    sq = work + F;
    row = work + 2 * F;

    /* Two passes (mean, then squared deviations). Sums of float or scaled u8 values are exact
     * in double up to about 2^29 samples, so a constant feature has a deviation of exactly 0. */
    for (size_t i = 0; i < d->n; i++) {
        scaled_row(d, i, row);
        for (size_t f = 0; f < F; f++)
            sum[f] += row[f];
    }
    for (size_t f = 0; f < F; f++)
        sum[f] /= (double)d->n; /* now the mean */
    for (size_t i = 0; i < d->n; i++) {
        scaled_row(d, i, row);
        for (size_t f = 0; f < F; f++) {
            double dev = row[f] - sum[f];
            sq[f] += dev * dev;
        }
    }
    for (size_t f = 0; f < F; f++) {
        float s = (float)sqrt(sq[f] / (double)d->n);
        mean[f] = (float)sum[f];
        std[f] = s >= FLT_MIN ? s : 1.0f; /* 0, or too small to divide by */
    }
fail:
    free(work);
    return st;
}

/* "<dir>/<name>" in a new string. */
static clt_status join_path(const char *dir, const char *name, char **out)
{
    clt_status st = CLT_OK;
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    CLT_ALLOC(NULL, *out, n);
    snprintf(*out, n, "%s/%s", dir, name);
fail:
    return st;
}

/* The path of `stem`.gz in dir, or of `stem` uncompressed; CLT_ERR_IO when neither exists. */
static clt_status find_idx(const char *dir, const char *stem, char **out)
{
    clt_status st = CLT_OK;
    char *gz_name = NULL, *gz_path = NULL, *raw_path = NULL;
    struct stat sb;
    size_t n = strlen(stem) + 4;
    *out = NULL;
    CLT_ALLOC(NULL, gz_name, n);
    snprintf(gz_name, n, "%s.gz", stem);
    CLT_TRY(join_path(dir, gz_name, &gz_path));
    CLT_TRY(join_path(dir, stem, &raw_path));
    if (stat(gz_path, &sb) == 0) {
        *out = gz_path;
        gz_path = NULL;
    } else if (stat(raw_path, &sb) == 0) {
        *out = raw_path;
        raw_path = NULL;
    } else {
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: neither %s nor %s found", dir, gz_name, stem);
    }
fail:
    free(gz_name);
    free(gz_path);
    free(raw_path);
    return st;
}

/* The test split when there is no test file: no samples, the training split's description. */
static void empty_like(const clt_dataset *train, clt_dataset *test)
{
    memset(test, 0, sizeof *test);
    test->features = train->features;
    test->sample_ndim = train->sample_ndim;
    memcpy(test->sample_shape, train->sample_shape, sizeof test->sample_shape);
    test->classes = train->classes;
    test->task = train->task;
    test->input_scale = train->input_scale;
}

static void shape_text(const clt_dataset *d, char *buf, size_t size)
{
    if (d->sample_ndim == 3) {
        snprintf(buf, size, "(%zu, %zu, %zu)", d->sample_shape[0], d->sample_shape[1],
                 d->sample_shape[2]);
    } else {
        snprintf(buf, size, "(%zu)", d->sample_shape[0]);
    }
}

/* Same features and sample shape in both splits; classes = the larger unless fixed. */
static clt_status reconcile(clt_dataset *train, clt_dataset *test, const struct clt_data_params *p)
{
    clt_status st = CLT_OK;
    char a[96], b[96];
    shape_text(train, a, sizeof a);
    shape_text(test, b, sizeof b);
    if (train->features != test->features || strcmp(a, b) != 0) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: samples of shape %s, but %s: shape %s", train->source,
                 a, test->source, b);
    }
    if (train->task == CLT_TASK_CLASSIFICATION && p->classes == 0) {
        int classes = train->classes > test->classes ? train->classes : test->classes;
        train->classes = classes;
        test->classes = classes;
    }
fail:
    return st;
}

/* Classes inferred from the labels (classes 0) must all be present in the training split: a
 * class in [0, classes) with no training sample means a gap in the labels (a stray 200 among
 * 0-9 widened the model to 201 classes without a word) or 1-based labels. An error naming the
 * missing classes and the largest label; fixing classes in the parameters skips the check. */
static clt_status check_classes_present(const clt_dataset *train)
{
    clt_status st = CLT_OK;
    bool *seen = NULL;
    size_t missing = 0, at = 0;
    int32_t max = -1;
    char list[160] = "";
    if (train->task != CLT_TASK_CLASSIFICATION || !train->labels || train->n == 0) goto fail;
    CLT_ALLOC(NULL, seen, (size_t)train->classes);
    for (size_t i = 0; i < train->n; i++) {
        int32_t y = train->labels[i];
        if (y >= 0 && y < train->classes) seen[y] = true;
        if (y > max) {
            max = y;
            at = i;
        }
    }
    for (int c = 0; c < train->classes; c++) {
        if (seen[c]) continue;
        size_t used = strlen(list);
        if (missing < 8) snprintf(list + used, sizeof list - used, "%s%d", missing ? ", " : "", c);
        else if (missing == 8) snprintf(list + used, sizeof list - used, ", ...");
        missing++;
    }
    if (missing)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: the labels make %d classes (0 to %d), but %zu of them never appear in the "
                 "training split (%s); the largest label, %d, is at sample %zu. Labels must be "
                 "0 .. N-1 with every class present: a stray label or 1-based labels?",
                 train->source, train->classes, train->classes - 1, missing, list, (int)max, at);
fail:
    free(seen);
    return st;
}

static clt_status open_idx(const char *spec, const char *dir, const struct clt_data_params *p,
                           const char *hint, clt_dataset *train, clt_dataset *test)
{
    static const char *stems[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                   "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    clt_status st = CLT_OK;
    char *paths[4] = {NULL, NULL, NULL, NULL};
    struct stat sb;
    if (p->task != CLT_TASK_CLASSIFICATION) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "%s: IDX data sets hold class labels; the regression task needs csv:", spec);
    }
    if (!*dir) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: no folder given after 'idx:'", spec);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: no such folder%s%s", dir, hint ? " " : "",
                 hint ? hint : "");
    }
    for (int i = 0; i < (test ? 4 : 2); i++)
        CLT_TRY(find_idx(dir, stems[i], &paths[i]));
    CLT_TRY(clt_data_load_idx(paths[0], paths[1], p, train));
    if (test) CLT_TRY(clt_data_load_idx(paths[2], paths[3], p, test));
fail:
    for (int i = 0; i < 4; i++)
        free(paths[i]);
    return st;
}

static clt_status open_csv(const char *files, const struct clt_data_params *p, clt_dataset *train,
                           clt_dataset *test)
{
    clt_status st = CLT_OK;
    char *train_path = NULL;
    const char *comma = strchr(files, ',');
    size_t n = comma ? (size_t)(comma - files) : strlen(files);
    if (n == 0) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "csv:%s: no training file given", files);
    if (comma && !comma[1]) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "csv:%s: no test file after the comma", files);
    }
    CLT_ALLOC(NULL, train_path, n + 1);
    memcpy(train_path, files, n);
    CLT_TRY(clt_data_load_csv(train_path, p, train));
    if (test && comma) {
        CLT_TRY(clt_data_load_csv(comma + 1, p, test));
    } else if (test) {
        empty_like(train, test);
    }
fail:
    free(train_path);
    return st;
}

clt_status clt_data_open(const char *spec, const struct clt_data_params *p, clt_dataset *train,
                         clt_dataset *test)
{
    clt_status st = CLT_OK;
    struct clt_data_params prm = p ? *p : clt_data_default_params();
    clt_dataset tr, te;
    char *dir = NULL;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    if (train) memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (!spec || !train) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_data_open: NULL argument");
    CLT_TRY(clt__data_check_params(&prm));

    if (strcmp(spec, "fashion-mnist") == 0 || strcmp(spec, "mnist") == 0) {
        bool fashion = spec[0] == 'f';
        const char *root = getenv("CLTRAIN_DATA_DIR");
        size_t len;
        if (!root || !*root) root = CLT__DATASETS_DIR;
        len = strlen(root) + strlen(spec) + 2;
        CLT_ALLOC(NULL, dir, len);
        snprintf(dir, len, "%s/%s", root, spec);
        if (prm.classes == 0) prm.classes = 10;
        CLT_TRY(open_idx(
            spec, dir, &prm,
            fashion ? "(data set 'fashion-mnist', looked for under $CLTRAIN_DATA_DIR, "
                      "default " CLT__DATASETS_DIR
                      ": install the Debian package dataset-fashion-mnist, "
                      "set CLTRAIN_DATA_DIR to a folder holding fashion-mnist/, or use idx:DIR)"
                    : "(data set 'mnist', looked for under $CLTRAIN_DATA_DIR, "
                      "default " CLT__DATASETS_DIR
                      ": put the four IDX files there, or use idx:DIR)",
            &tr, test ? &te : NULL));
    } else if (strncmp(spec, "idx:", 4) == 0) {
        CLT_TRY(open_idx(spec, spec + 4, &prm, NULL, &tr, test ? &te : NULL));
    } else if (strncmp(spec, "csv:", 4) == 0) {
        CLT_TRY(open_csv(spec + 4, &prm, &tr, test ? &te : NULL));
    } else if (strncmp(spec, "images:", 7) == 0) {
        CLT_TRY(clt__data_open_images(spec + 7, &prm, &tr, test ? &te : NULL));
    } else {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "unknown data set '%s': expected fashion-mnist, mnist, idx:DIR, "
                 "csv:TRAIN.csv[,TEST.csv] or images:DIR",
                 spec);
    }
    if (test) CLT_TRY(reconcile(&tr, &te, &prm));
    if (prm.classes == 0) CLT_TRY(check_classes_present(&tr));
    *train = tr;
    if (test) *test = te;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
fail:
    free(dir);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    return st;
}
