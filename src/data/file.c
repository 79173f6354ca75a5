/* File access for the data readers: every file goes through zlib's gz* calls, which read
 * gzip-compressed and raw files alike, so any reader accepts either without looking at the
 * name. Only regular files are read: a FIFO, device or directory is refused at once (it could
 * block the open, or be read only once while a data set may be read twice). Messages name the
 * path and zlib's or the system's reason. */
#include "data/data_internal.h"
#include "runtime/internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define CLT__GZ_BUFFER (256u * 1024u)  /* zlib's input buffer: fewer, larger reads */
#define CLT__GZ_CHUNK (1u << 30)       /* gzread takes an unsigned length */
#define CLT__READ_ALL_START (1u << 20) /* first buffer of clt__data_read_all */

clt_status clt__data_gzopen(const char *path, gzFile *out)
{
    clt_status st = CLT_OK;
    uint64_t size = 0;
    int fd = -1;
    gzFile f = NULL;
    *out = NULL;
    CLT_TRY(clt__open_regular(path, CLT__DATA_REGULAR_WHY, &fd, &size));
    errno = 0;
    f = gzdopen(fd, "rb"); /* owns fd once it succeeds (gzclose closes it) */
    if (!f) {
        CLT_FAIL(NULL, errno ? CLT_ERR_IO : CLT_ERR_HOST_MEMORY, "%s: cannot open: %s", path,
                 errno ? strerror(errno) : "out of host memory");
    }
    fd = -1;
    gzbuffer(f, CLT__GZ_BUFFER);
    *out = f;
fail:
    if (fd >= 0) close(fd);
    return st;
}

clt_status clt__data_gzread(gzFile f, const char *path, void *buf, size_t want, size_t *got)
{
    clt_status st = CLT_OK;
    unsigned char *p = buf;
    size_t have = 0;
    while (have < want) {
        size_t ask = want - have < CLT__GZ_CHUNK ? want - have : CLT__GZ_CHUNK;
        int r = gzread(f, p + have, (unsigned)ask);
        if (r < 0) {
            int zerr = Z_OK;
            const char *why = gzerror(f, &zerr);
            size_t plen = strlen(path);
            /* zlib's message already starts with "<path>: ". */
            if (strncmp(why, path, plen) == 0 && strncmp(why + plen, ": ", 2) == 0) why += plen + 2;
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: read failed: %s%s", path, why,
                     zerr == Z_DATA_ERROR ? " (corrupt gzip data)" : "");
        }
        if (r == 0) break;
        have += (size_t)r;
    }
fail:
    *got = have;
    return st;
}

clt_status clt__data_read_all(const char *path, char **out, size_t *len)
{
    clt_status st = CLT_OK;
    gzFile f = NULL;
    char *buf = NULL;
    size_t cap = CLT__READ_ALL_START, have = 0;
    int zerr = Z_OK;
    *out = NULL;
    *len = 0;
    CLT_TRY(clt__data_gzopen(path, &f));
    CLT_ALLOC(NULL, buf, cap + 1);
    for (;;) {
        size_t got = 0;
        CLT_TRY(clt__data_gzread(f, path, buf + have, cap - have, &got));
        have += got;
        if (have < cap) break;
        if (cap > (SIZE_MAX - 1) / 2) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: too large", path);
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger) {
            CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory reading %zu bytes", path,
                     cap * 2);
        }
        buf = bigger;
        cap *= 2;
    }
    gzerror(f, &zerr);
    if (zerr == Z_BUF_ERROR) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: truncated: the gzip stream is cut short after %zu bytes", path, have);
    }
    buf[have] = '\0';
    *out = buf;
    *len = have;
    buf = NULL;
fail:
    if (f) gzclose(f);
    free(buf);
    return st;
}

clt_status clt__data_check_params(const struct clt_data_params *p)
{
    clt_status st = CLT_OK;
    if (p->task != CLT_TASK_CLASSIFICATION && p->task != CLT_TASK_REGRESSION) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "data params: unknown task %d", (int)p->task);
    }
    if (p->classes < 0 || p->classes > CLT_DATA_MAX_CLASSES) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "data params: classes %d is outside 0..%d", p->classes,
                 CLT_DATA_MAX_CLASSES);
    }
fail:
    return st;
}
