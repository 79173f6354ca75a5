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
