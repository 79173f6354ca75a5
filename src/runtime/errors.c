/* Failure messages: every failure is recorded for the calling thread and, when a ctx is
 * involved, in the ctx as well. */
#include "runtime/ctx_internal.h"
#include "runtime/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; whatever is not a
     * regular file is refused after fstat, before a byte is read. The size is checked before
     * anything is allocated, and at most that many bytes are read even if the file grows. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    char *data = NULL;
    struct stat sb;
    size_t size = 0, have = 0;
    int err = 0;
    if (fd < 0) return NULL;
    if (fstat(fd, &sb) != 0) {
        err = errno;
    } else if (S_ISDIR(sb.st_mode)) {
        err = EISDIR;
    } else if (!S_ISREG(sb.st_mode)) {
        err = EINVAL; /* FIFO, socket, device */
    } else if (sb.st_size < 0 || (uintmax_t)sb.st_size > max_bytes ||
               (uintmax_t)sb.st_size >= SIZE_MAX) {
        err = EFBIG;
    } else if (!(data = malloc((size_t)sb.st_size + 1))) {
        err = ENOMEM;
    } else {
        size = (size_t)sb.st_size;
        while (have < size) {
            ssize_t got = read(fd, data + have, size - have);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                err = got < 0 ? errno : EIO; /* an error, or the file shrank */
                break;
            }
            have += (size_t)got;
        }
    }
    if (err) {
        free(data);
        data = NULL;
    } else {
        data[size] = '\0';
        *len = size;
    }
    close(fd);
    if (err) errno = err;
    return data;
}

const char *clt__file_kind_name(unsigned mode)
{
    mode_t m = (mode_t)mode;
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

clt_status clt__open_regular(const char *path, const char *why, int *fd_out, uint64_t *size)
{
    clt_status st = CLT_OK;
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), flags = 0;
    *fd_out = -1;
    if (fd < 0) CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: is %s, not a regular file: %s", path,
                 clt__file_kind_name((unsigned)sb.st_mode), why);
    /* reads of a regular file never return EAGAIN, but the readers (zlib, stdio) expect a
     * descriptor in its ordinary mode */
    if ((flags = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    *size = sb.st_size < 0 ? 0 : (uint64_t)sb.st_size;
    *fd_out = fd;
    fd = -1;
fail:
    if (fd >= 0) close(fd);
    return st;
}

/* Digits only, at least one, into *mag; false on anything else or beyond UINT64_MAX. */
static bool parse_digits(const char *s, uint64_t *mag)
{
    uint64_t v = 0;
    if (!s || !*s) return false;
    for (; *s; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *mag = v;
    return true;
}

bool clt__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    bool neg = s && s[0] == '-';
    uint64_t mag = 0;
    int64_t v = 0;
    if (!parse_digits(neg ? s + 1 : s, &mag)) return false;
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) return false;
    if (neg) v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    else v = (int64_t)mag;
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool clt__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;
    if (!parse_digits(s, &v) || v < lo || v > hi) return false;
    *out = v;
    return true;
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

size_t clt__slice_max(size_t max, uint64_t cum_lo, uint64_t cum_hi, uint64_t total)
{
    size_t best = 0;
    for (size_t n = 1; n <= max; n++) {
        size_t k = clt__slice_boundary(n, cum_hi, total) - clt__slice_boundary(n, cum_lo, total);
        if (k > best) best = k;
    }
    return best;
}
