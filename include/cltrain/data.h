/* Host-side data sets: readers for IDX files (MNIST and Fashion-MNIST, gzip or raw), numeric
 * CSV and folders of PNG and JPEG images (one folder per class), the data-set spec string that names them, and per-feature standardisation statistics.
 * Everything here works in host memory and takes no ctx: failures are reported through the
 * status and the calling thread's message (clt_last_errmsg).
 *
 * Usage:
 *
 *     clt_dataset train = {0}, test = {0};
 *     if (clt_data_open("csv:train.csv,test.csv", NULL, &train, &test) != CLT_OK)
 *         puts(clt_last_errmsg());
 *     // train.n samples of train.features values; train.labels or train.targets
 *     clt_dataset_free(&train);
 *     clt_dataset_free(&test);
 */
#ifndef CLTRAIN_DATA_H
#define CLTRAIN_DATA_H

#include "cltrain/export.h"

#include "cltrain/errors.h"
#include "cltrain/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of classes a classification data set may have (labels 0 .. this - 1). */
#define CLT_DATA_MAX_CLASSES 65536

/* Limits on what an IDX header may declare, checked before anything is read: each size (count,
 * rows, cols) at most 2^24, and at most 16 GiB of data in one file. */
#define CLT_DATA_IDX_MAX_DIM (1u << 24)
#define CLT_DATA_IDX_MAX_BYTES (16ull << 30)

/* Limits on one image file, checked from its header before its pixels are allocated: each side
 * at most CLT_DATA_IMAGE_MAX_SIDE, at most CLT_DATA_IMAGE_MAX_PIXELS pixels, the file at most
 * CLT_DATA_IMAGE_MAX_FILE bytes. A decoded image set holds at most CLT_DATA_IDX_MAX_BYTES. */
#define CLT_DATA_IMAGE_MAX_SIDE 16384u
#define CLT_DATA_IMAGE_MAX_PIXELS (64u << 20)
#define CLT_DATA_IMAGE_MAX_FILE (256ull << 20)

typedef enum clt_task {
    CLT_TASK_CLASSIFICATION = 0, /* integer labels 0 .. classes - 1 */
    CLT_TASK_REGRESSION = 1      /* one float target per sample */
} clt_task;

/* One split of a data set, all in host memory, samples in file order. Exactly one of u8 and
 * f32 holds the inputs, row-major (n, features); exactly one of labels and targets holds the
 * answers, except in a split read without labels (clt_data_params.no_labels), where both are
 * NULL. Both may be NULL when n == 0. The struct owns every pointer in it; release them
 * with clt_dataset_free. */
typedef struct clt_dataset {
    size_t n;               /* samples */
    size_t features;        /* values per sample (IN), e.g. 784 */
    int sample_ndim;        /* 3 for IDX images, 1 for CSV (the CLI's --input-shape: 2 or 3) */
    size_t sample_shape[3]; /* (1, H, W) for IDX images, (features) for CSV; product = features */
    uint8_t *u8;            /* (n, features) raw pixels (IDX), or NULL */
    float *f32;             /* (n, features) values (CSV), or NULL */
    int32_t *labels;        /* (n) class labels (classification), or NULL */
    float *targets;         /* (n) regression targets, or NULL */
    int classes;            /* N, number of classes (classification); 1 for regression */
    clt_task task;          /* classification (labels) or regression (targets) */
    float input_scale;      /* multiply raw inputs by this: 1/255 for IDX, 1 for CSV */
    char **feature_names;   /* features names from a CSV header row, or NULL */
    char *target_name;      /* the label column's header name, or NULL */
    char source[512];       /* the file the inputs came from, for messages ("" if n == 0) */
    char **class_names;     /* images: (classes) the class folders' names, sorted; else NULL */
    char **sample_names;    /* clt_data_load_images: (n) each sample's file; else NULL */
    size_t skipped;         /* images: bad files skipped in the whole folder (skip_bad_images) */
    bool cached;            /* images: read from the decoded-set cache, not decoded */
} clt_dataset;

struct clt_data_params {
    /* CSV only: the column holding the label or target, 0-based; negative counts from the end
     * (-1, the default, is the last column). */
    int label_column;
    /* CSV: classification (labels must be non-negative integers) or regression (any finite
     * number). IDX data sets are classification only. Default classification. */
    clt_task task; /* classification (labels) or regression (targets) */
    /* Classification: 0 (default) sets classes to the largest label + 1 over both splits; a
     * positive value fixes it, and a label >= classes is then an error. The named sets
     * "mnist" and "fashion-mnist" use 10 when this is 0. */
    int classes;
    /* CSV only: the files have no label column (inputs to predict on): every column is a
     * feature, label_column is ignored, and the splits hold neither labels nor targets (both
     * NULL); classes is then p->classes as given (classification) or 1 (regression). Such a
     * split can be made resident for clt_predict but not evaluated or trained on. Default
     * false. IDX data sets always have labels: ignored there. */
    bool no_labels;

    /* images:DIR only. channels: 1 (grey) or 3 (RGB), every image converted to it; 0 (default)
     * takes the first image's, and an image with another count is then a bad file. */
    int channels;
    /* image_h, image_w: every image resized to this (bilinear, see clt_data_open); 0, 0
     * (default) takes the first image's size, and an image of another size is a bad file. */
    size_t image_h, image_w;
    /* The fraction of DIR/<class>/FILE held out as the test split, per class, chosen by
     * split_seed (in [0, 1); 0, the default: everything trains). For a folder without train/. */
    float val_split;
    uint64_t split_seed;
    /* Bad image files (not an image, truncated, too large, another channel count or size)
     * skipped and counted in clt_dataset.skipped instead of failing. Default false. */
    bool skip_bad_images;
    /* Where the decoded set is cached when the data's folder cannot be written: NULL (default)
     * for $CLTRAIN_CACHE_DIR, $XDG_CACHE_HOME/cltrain, ~/.cache/cltrain (as clt_ctx_cache_dir).
     * image_cache false (or CLTRAIN_CACHE=0) decodes every time. Default true. */
    const char *cache_dir;
    bool image_cache;
};

/* label_column -1, classification, classes 0 (inferred), labelled. Thread-safe. */
CLT_API struct clt_data_params clt_data_default_params(void);

/* Opens the data set named by `spec` and loads its training and test splits:
 *   "fashion-mnist"           the folder $CLTRAIN_DATA_DIR/fashion-mnist, read as idx:
 *                             (CLTRAIN_DATA_DIR unset or empty: /usr/share/datasets, where
 *                             Debian's package dataset-fashion-mnist puts it)
 *   "mnist"                   the folder $CLTRAIN_DATA_DIR/mnist, read as idx:
 *   "idx:DIR"                 a folder holding train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                             t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each either
 *                             gzip-compressed with a ".gz" suffix (tried first) or raw
 *   "images:DIR"              folders of PNG or JPEG images, one per class, named by the class:
 *                             DIR/train/<class>/FILE and DIR/test/<class>/FILE (test/ optional), or
 *                             DIR/<class>/FILE with p->val_split of each class held out as the test
 *                             split (none without it). Classes are the training folders' names,
 *                             sorted bytewise (class_names), labels their positions; hidden
 *                             entries (".name") are ignored; every class folder must hold a file.
 *                             Files are recognised by their signature (PNG, JPEG), decoded to 8
 *                             bits (palettes expanded, alpha dropped), converted to p->channels
 *                             (grey repeated into RGB; RGB to grey by PIL's luma, L = (19595 R +
 *                             38470 G + 7471 B + 0x8000) >> 16) and resized to image_h x image_w
 *                             (bilinear with half-pixel centres and edge clamping, as PyTorch's
 *                             interpolate with align_corners=False and no antialias, rounded half
 *                             up); u8 samples of shape (C, H, W), input_scale 1/255. The decoded
 *                             set is cached in DIR/.cltrain-images-<key>.cache, or in the cache
 *                             folder when DIR is read-only, keyed by every file's path, size and
 *                             modification time and the options; written to a temporary file and
 *                             renamed, checked by a CRC-32C when read (a damaged cache is decoded
 *                             again). p->classes, when positive, must equal the folders' count.
 *   "csv:TRAIN.csv[,TEST.csv]" numeric CSV files (see clt_data_load_csv); the paths may not
 *                             contain commas. Without TEST.csv the test split is empty: n == 0,
 *                             NULL arrays, but features, sample shape, classes, task and
 *                             input_scale copied from the training split.
 * `p` may be NULL for the defaults. `test` may be NULL to load the training split only.
 * The splits agree on features, sample shape and classes (classification: the largest label
 * + 1 over both splits, or p->classes), else CLT_ERR_FORMAT.
 * *train and *test are overwritten without being freed; on failure both are left zeroed and
 * nothing is leaked. Returns CLT_OK, CLT_ERR_INVALID_ARG (unknown spec, bad params),
 * CLT_ERR_IO (missing folder or file, read error), CLT_ERR_FORMAT (malformed or inconsistent
 * contents) or CLT_ERR_HOST_MEMORY; the message names the file and what was wrong.
 * Thread-safe (distinct outputs per thread). */
CLT_API clt_status clt_data_open(const char *spec, const struct clt_data_params *p,
                                 clt_dataset *train, clt_dataset *test);

/* Reads one IDX pair: u8 images (magic 0x00000803: count, rows, cols) and u8 labels (magic
 * 0x00000801: count); each file gzip-compressed or raw, whatever its name. The header's
 * lengths must match the data exactly (no short data, no trailing bytes), both files must hold
 * the same count (at least 1), and labels must be < p->classes when that is positive. Before
 * the images are decompressed: every declared size must be <= CLT_DATA_IDX_MAX_DIM and the
 * data <= CLT_DATA_IDX_MAX_BYTES; the labels file is read and its count compared with the
 * images header; and a gzip file promising more than 64 MiB must carry a trailer (ISIZE)
 * equal to the promise mod 2^32 (skipped for files that may hold several gzip members, which
 * are checked exactly as they are read). A lying header thus fails (CLT_ERR_FORMAT) without
 * a large allocation. Fills
 * *out (overwritten without being freed) with u8 inputs of sample shape (1, rows, cols),
 * input_scale 1/255, classes = p->classes or the largest label + 1. p may be NULL; only
 * p->classes is used. Returns CLT_OK, CLT_ERR_INVALID_ARG, CLT_ERR_IO, CLT_ERR_FORMAT or
 * CLT_ERR_HOST_MEMORY; on failure *out is zeroed. Thread-safe. */
CLT_API clt_status clt_data_load_idx(const char *images_path, const char *labels_path,
                                     const struct clt_data_params *p, clt_dataset *out);

/* Reads a numeric CSV file (gzip-compressed or raw; comma-separated; "\n" or "\r\n" line
 * ends; blank lines skipped; cells may be double-quoted; surrounding spaces ignored). If any
 * cell of the first row is not a number, that row is a header and its cells name the columns.
 * Every other row must have as many cells as the first, each a finite number in float range
 * (parsed with strtod: the C locale's "." decimal point is expected). Messages give 1-based
 * line and column numbers, e.g. "a.csv: line 7, column 3 (petal_width): 'abc' is not a
 * number". The label column (p->label_column) becomes labels (classification: non-negative
 * integers < CLT_DATA_MAX_CLASSES, or < p->classes when that is positive; classes = p->classes
 * or the largest label + 1) or targets (regression; classes = 1); the other columns, in file
 * order, become f32 features with input_scale 1; with p->no_labels every column is a feature.
 * At least one feature column and one data row are required. p may be NULL for the defaults. *out is overwritten without being freed.
 * Returns CLT_OK, CLT_ERR_INVALID_ARG, CLT_ERR_IO, CLT_ERR_FORMAT or CLT_ERR_HOST_MEMORY; on
 * failure *out is zeroed. Thread-safe. */
CLT_API clt_status clt_data_load_csv(const char *path, const struct clt_data_params *p,
                                     clt_dataset *out);

/* Reads images for prediction: `path` is one PNG or JPEG file or a folder of them (its files,
 * not its subfolders, sorted by name; hidden ones ignored), each decoded, converted to
 * p->channels and resized to p->image_h x p->image_w as clt_data_open does (all three must be
 * set). Fills *out with u8 samples (C, H, W), input_scale 1/255, sample_names (each file's
 * path), labels all 0 (unknown) and classes max(1, p->classes). A bad file is an error naming
 * it, or skipped and counted with p->skip_bad_images. Returns CLT_OK, CLT_ERR_INVALID_ARG,
 * CLT_ERR_IO, CLT_ERR_FORMAT or CLT_ERR_HOST_MEMORY; on failure *out is zeroed. Thread-safe. */
CLT_API clt_status clt_data_load_images(const char *path, const struct clt_data_params *p,
                                        clt_dataset *out);

/* True when `path` is a folder or a file that starts with a PNG or JPEG signature (what
 * clt_data_load_images reads). Thread-safe. */
CLT_API bool clt_data_is_image(const char *path);

/* Frees every array and name of *d and zeroes the struct. Accepts NULL and zeroed structs. */
CLT_API void clt_dataset_free(clt_dataset *d);

/* Per-feature standardisation statistics of the scaled inputs (raw * input_scale), accumulated
 * in double: mean[f] and the population standard deviation std[f] (divisor n); a constant
 * feature (or one whose std underflows float) gets std 1 so that dividing by it is safe.
 * Compute them on the training split only. mean and std are caller-owned arrays of
 * d->features floats. Returns CLT_OK, CLT_ERR_INVALID_ARG (NULL pointer, n == 0, no inputs) or
 * CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_dataset_stats(const clt_dataset *d, float *mean, float *std);

/* The scaled input value (raw * input_scale) of one feature of one sample. Indices out of range
 * are a programmer error (CLT_ASSERT). Thread-safe. */
CLT_API float clt_dataset_value(const clt_dataset *d, size_t sample, size_t feature);

#ifdef __cplusplus
}
#endif
#endif
