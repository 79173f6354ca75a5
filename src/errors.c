/* Failure messages: every failure is recorded for the calling thread and, when a ctx is
 * involved, in the ctx as well. */
#include "ctx_internal.h"
#include "internal.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char tls_errmsg[CLT_ERRMSG_MAX];

const char *clt_last_errmsg(void)
{
    return tls_errmsg;
}

static void record(struct clt_ctx *ctx, const char *msg)
{
    if (msg != tls_errmsg) snprintf(tls_errmsg, sizeof tls_errmsg, "%s", msg);
    if (ctx) snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", msg);
}

clt_status clt__fail(struct clt_ctx *ctx, clt_status status, const char *fmt, ...)
{
    char *msg = malloc(CLT_ERRMSG_MAX);
    va_list ap;
    va_start(ap, fmt);
    /* Formatting may read the current message (e.g. to prefix it): format into a copy. */
    if (msg) {
        vsnprintf(msg, CLT_ERRMSG_MAX, fmt, ap);
        record(ctx, msg);
        free(msg);
    } else {
        vsnprintf(tls_errmsg, sizeof tls_errmsg, fmt, ap);
        record(ctx, tls_errmsg);
    }
    va_end(ap);
    return status;
}

clt_status clt__fail_cl(struct clt_ctx *ctx, int cl_error, const char *what)
{
    bool oom = cl_error == CL_MEM_OBJECT_ALLOCATION_FAILURE || cl_error == CL_OUT_OF_RESOURCES ||
               cl_error == CL_OUT_OF_HOST_MEMORY;
    return clt__fail(ctx, oom ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_OPENCL, "%s: %s (%d)", what,
                     clt_cl_error_name(cl_error), cl_error);
}

char *clt__read_file(const char *path, size_t max_bytes, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size >= 0 && (unsigned long)size <= max_bytes && fseek(f, 0, SEEK_SET) == 0 &&
            (data = malloc((size_t)size + 1))) {
            if (fread(data, 1, (size_t)size, f) != (size_t)size) {
                free(data);
                data = NULL;
            } else {
                data[size] = '\0';
                *len = (size_t)size;
            }
        }
    }
    fclose(f);
    return data;
}

unsigned long long clt__hash(unsigned long long h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
