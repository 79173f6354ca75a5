/* What the train, eval and predict commands share: opening the ctx, reading a model spec given
 * as text or a file, and failure messages (with the memory report and its remedies on out of
 * memory). */
#include "cli/run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail_status(clt_ctx *ctx)
{
    /* never an empty line: a failure recorded for the thread only still has its message */
    const char *msg = ctx ? clt_ctx_errmsg(ctx) : "";
    if (!msg[0]) msg = clt_last_errmsg();
    return cli_error("%s", msg[0] ? msg : "failed without a message (a bug: please report it)");
}

/* A --data spec that clt_data_open refused: a spec it cannot read as a data set (an unknown
 * name, "idx:" without a folder, a --label-column outside the file) is a usage error
 * (CLT_ERR_INVALID_ARG), a file that cannot be read or parsed a failure. */
int cli_fail_data(clt_status st)
{
    return st == CLT_ERR_INVALID_ARG ? cli_usage_error("%s", clt_last_errmsg())
                                     : cli_fail_status(NULL);
}

/* The one-line note for a checkpoint without checksums, once it has loaded. */
void cli_note_unverified(const clt_checkpoint *ck, const char *path)
{
    if (!clt_checkpoint_has_checksums(ck))
        fprintf(stderr, "cltrain: note: %s has no checksums (written by another tool or an older "
                        "cltrain): its tensors were loaded unverified\n", path);
}

/* A failure during set-up or training: the message, and on out-of-memory the memory report
 * (with the estimates for the micro-batch that failed and the next larger one) and the
 * remedies in the order to try them. */
int cli_fail_train(clt_ctx *ctx, clt_status st, const struct clt_train_setup_params *sp,
                    size_t batch)
{
    int rc = cli_fail_status(ctx);
    if (st == CLT_ERR_OUT_OF_MEMORY && ctx) {
        char report[4096];
        clt_train_mem_report(ctx, sp, batch, report, sizeof report);
        /* Staging is the streaming loader's ring: --prefetch buffers of a batch each. */
        bool staging = strstr(clt_ctx_errmsg(ctx), "requested for staging") != NULL;
        char first[96] = "";
        if (staging && sp->loader.mode != CLT_LOADER_RESIDENT)
            snprintf(first, sizeof first, "fewer staging buffers (--prefetch 2 or 3, now %d); ",
                     sp->loader.prefetch);
        fprintf(stderr,
                "%sremedies, in this order: %sa smaller --batch-size; then mixed precision "
                "(--precision bf16, or fp16); then --accumulate N with a smaller --batch-size to "
                "keep the effective batch (--auto-batch does both for you)\n",
                report, first);
    }
    return rc;
}

/* Whether a --model argument names a file rather than spelling a spec: it contains a '/', or
 * it is one word (no blank, no comma) with a dot ("net.txt", "model.spec"). No spec text has
 * either: layer kinds are words, and a number with a dot ("dropout 0.5") follows a blank. */
bool cli_spec_is_path(const char *text)
{
    if (strchr(text, '/')) return true;
    return strchr(text, '.') && !strpbrk(text, " \t\n,");
}

/* A spec given as a file's path or as text: a readable file is read; an argument that looks
 * like a path (cli_spec_is_path) and names no file is "no such file", not a spec error. A spec
 * that does not parse is a usage error; a file that cannot be read, a failure. */
int cli_parse_model(const char *flag, const char *text, int classes, clt_spec *spec)
{
    clt_status st;
    if (access(text, R_OK) == 0) {
        st = clt_spec_parse_file(text, classes, spec);
    } else if (cli_spec_is_path(text)) {
        int err = errno;
        return cli_usage_error("%s %s: %s (an argument with a '/', or one word with a dot, is "
                               "read as a spec file)", flag, text,
                               err == ENOENT ? "no such file" : strerror(err));
    } else {
        st = clt_spec_parse(text, classes, spec);
    }
    if (st == CLT_OK) return CLI_OK;
    if (st == CLT_ERR_IO || st == CLT_ERR_HOST_MEMORY) return cli_fail_status(NULL);
    return cli_usage_error("%s", clt_last_errmsg());
}

bool cli_spec_one_row(const clt_spec *spec, size_t features, int outputs,
                      const size_t input_shape[3], char *why, size_t size)
{
    struct clt_model_params mp = clt_model_default_params();
    memcpy(mp.input_shape, input_shape, sizeof mp.input_shape);
    size_t o[3];
    int ndim = 0;
    if (clt_model_output_shape_of(spec, features, (size_t)outputs, &mp, o, &ndim) != CLT_OK ||
        ndim == 1)
        return true; /* a spec that does not fit is reported where it is validated */
    snprintf(why, size, "the model's output per sample is %zux%zu: on its (T, C) = (%zu, %zu) "
             "input the last linear layer acts on each of the %zu positions, and the loss takes "
             "one row of %d outputs per sample; put a flatten before the last linear layer",
             o[0], o[1], input_shape[0], input_shape[1], o[0], outputs);
    return false;
}

int cli_open_ctx(const char *device, bool profiling, bool sync_debug, clt_ctx **ctx)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.device = device;
    p.profiling = profiling;
    p.sync_debug = sync_debug;
    /* a bad CLTRAIN_GEMM or CLTRAIN_MAX_MEMORY fails here, before the data is loaded */
    if (clt_ctx_create(ctx, &p) != CLT_OK) return cli_fail_status(NULL);
    return CLI_OK;
}

int cli_apply_image_opts(const struct cli_image_opts *o, const char *data,
                         struct clt_data_params *dp)
{
    bool images = strncmp(data, "images:", 7) == 0;
    const char *flag = o->channels_seen ? "--channels" : o->size ? "--image-size"
                       : o->val_seen ? "--val-split" : o->skip_bad ? "--skip-bad-images" : NULL;
    if (!images && flag)
        return cli_usage_error("%s applies to image folders (--data images:DIR), not %s", flag,
                               data);
    if (o->channels_seen && o->channels != 1 && o->channels != 3)
        return cli_usage_error("--channels %ld: expected 1 (grey) or 3 (RGB)", o->channels);
    dp->channels = (int)o->channels;
    if (o->size) {
        /* H,W: two integers in [1, the largest side] */
        char h[24] = "", *end = NULL;
        const char *comma = strchr(o->size, ',');
        size_t hl = comma ? (size_t)(comma - o->size) : 0;
        long H = 0, W = 0;
        if (comma && hl > 0 && hl < sizeof h) {
            memcpy(h, o->size, hl);
            H = h[0] >= '0' && h[0] <= '9' ? strtol(h, &end, 10) : 0;
            if (!end || *end) H = 0;
            end = NULL;
            W = comma[1] >= '0' && comma[1] <= '9' ? strtol(comma + 1, &end, 10) : 0;
            if (!end || *end) W = 0;
        }
        size_t shape[2] = {(size_t)H, (size_t)W};
        if (H < 1 || W < 1 || shape[0] > CLT_DATA_IMAGE_MAX_SIDE || shape[1] > CLT_DATA_IMAGE_MAX_SIDE)
            return cli_usage_error("--image-size %s: expected H,W (two positive integers up to "
                                   "%u), e.g. 28,28", o->size, (unsigned)CLT_DATA_IMAGE_MAX_SIDE);
        dp->image_h = shape[0];
        dp->image_w = shape[1];
    }
    dp->val_split = o->val_split;
    dp->skip_bad_images = o->skip_bad;
    return CLI_OK;
}

void cli_class_list(char *const *names, int n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < n && used + 1 < size; c++) {
        if (used > 200) {
            snprintf(buf + used, size - used, ", ...");
            return;
        }
        int k = snprintf(buf + used, size - used, "%s%s", c ? ", " : "", names[c]);
        if (k < 0) return;
        used += (size_t)k;
    }
}

int cli_check_class_names(const char *ckpt, const char *const *ck_names, int ck_n,
                          const char *data, char *const *names, int n)
{
    if (!ck_names || !names || ck_n != n) return CLI_OK; /* a count differing: said elsewhere */
    for (int c = 0; c < n; c++)
        if (strcmp(ck_names[c], names[c]) != 0)
            return cli_error("%s: class %d is '%s' in the checkpoint but '%s' in %s: the data's "
                             "class folders must be the ones the model was trained on", ckpt, c,
                             ck_names[c], names[c], data);
    return CLI_OK;
}
