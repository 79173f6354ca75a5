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

/* A spec given as a file's path or as text. */
clt_status cli_parse_model(const char *text, int classes, clt_spec *spec)
{
    if (access(text, R_OK) == 0) return clt_spec_parse_file(text, classes, spec);
    return clt_spec_parse(text, classes, spec);
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
