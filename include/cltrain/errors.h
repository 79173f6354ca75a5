/* Where failure messages live. Calls that take a ctx record their message in it
 * (clt_ctx_errmsg); every failure is also recorded for the calling thread, which is how calls
 * without a ctx (data readers, checkpoints, the model-spec parser) report theirs.
 *
 * Usage:
 *
 *     if (clt_data_open("mnist", NULL, &train, &test) != CLT_OK)
 *         fprintf(stderr, "%s\n", clt_last_errmsg());  // a ctx's call: clt_ctx_errmsg(ctx)
 */
#ifndef CLTRAIN_ERRORS_H
#define CLTRAIN_ERRORS_H

#include "cltrain/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the calling thread's last failure ("" if none). Valid until the thread's next
 * failing call. Thread-safe (thread-local storage). */
CLT_API const char *clt_last_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif
