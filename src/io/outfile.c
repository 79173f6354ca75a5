/* Safe output files (cltrain/outfile.h): symlinks resolved by hand so that the real target is
 * replaced in its own folder, anything but a regular file refused, a writability probe before
 * long work, stale "<name>.tmp.<pid>[.<k>]" files of dead processes removed, and temporary
 * file + fsync + rename with every write, flush and close checked. */
#include "cltrain/outfile.h"

#include "runtime/internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_LINKS 40 /* as Linux's own limit on symlinks in one lookup */

struct clt_outfile {
    char *path; /* as the caller gave it, for messages */
    char *real; /* the resolved target: "<real folder>/<name>" */
    char *tmp;  /* the temporary file while it exists, else NULL */
    FILE *fp;
};

static atomic_uint tmp_counter;

/* Follows `path` through symlinks to the file to write: *real = "<folder>/<name>" (malloc'ed;
 * the folder as reached through the links, its last component no longer a link, so a rename in
 * that folder replaces the link's target); *exists and *sb say whether it exists and what it
 * is. Refuses anything that exists and is not a regular file, a missing folder, a link loop. */
static clt_status resolve(const char *path, char **real, struct stat *sb, bool *exists)
{
    clt_status st = CLT_OK;
    char *cur = NULL, *link = NULL, *dir = NULL;
    *real = NULL;
    *exists = false;
    if (!path || !*path) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "an output path is empty");
    CLT_ALLOC(NULL, cur, strlen(path) + 1);
    strcpy(cur, path);
    for (int hops = 0;; hops++) {
        if (lstat(cur, sb) != 0) {
            if (errno != ENOENT) CLT_FAIL(NULL, CLT_ERR_IO, "%s: %s", path, strerror(errno));
            break; /* to be created */
        }
        if (!S_ISLNK(sb->st_mode)) {
            *exists = true;
            break;
        }
        if (hops >= MAX_LINKS)
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: more than %d levels of symbolic links", path,
                     MAX_LINKS);
        size_t cap = sb->st_size > 0 ? (size_t)sb->st_size + 1 : PATH_MAX;
        CLT_ALLOC(NULL, link, cap);
        ssize_t k = readlink(cur, link, cap);
        if (k < 0 || (size_t)k >= cap)
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot read the symbolic link %s: %s", path, cur,
                     k < 0 ? strerror(errno) : "it changed while being read");
        link[k] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = NULL;
        CLT_ALLOC(NULL, next, keep + (size_t)k + 1); /* relative: from the link's folder */
        memcpy(next, cur, keep);
        memcpy(next + keep, link, (size_t)k + 1);
        free(cur);
        cur = next;
        free(link);
        link = NULL;
    }
    bool moved = strcmp(cur, path) != 0;
    if (*exists && !S_ISREG(sb->st_mode))
        CLT_FAIL(NULL, CLT_ERR_IO, "%s%s%s is %s, not a regular file: refusing to write over it",
                 path, moved ? " -> " : "", moved ? cur : "",
                 clt__file_kind_name((unsigned)sb->st_mode));
    const char *slash = strrchr(cur, '/');
    const char *name = slash ? slash + 1 : cur;
    if (!*name) CLT_FAIL(NULL, CLT_ERR_IO, "%s names a folder, not a file", path);
    size_t dlen = !slash ? 0 : slash == cur ? 1 : (size_t)(slash - cur);
    CLT_ALLOC(NULL, dir, dlen + 2);
    if (dlen)
        memcpy(dir, cur, dlen);
    else
        strcpy(dir, ".");
    struct stat ds;
    if (stat(dir, &ds) != 0) {
        if (errno == ENOENT)
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: the folder %s does not exist", path, dir);
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: the folder %s: %s", path, dir, strerror(errno));
    }
    if (!S_ISDIR(ds.st_mode)) CLT_FAIL(NULL, CLT_ERR_IO, "%s: %s is not a folder", path, dir);
    CLT_ALLOC(NULL, *real, dlen + strlen(name) + 3);
    sprintf(*real, "%s%s%s", dir, dlen == 1 && dir[0] == '/' ? "" : "/", name);
fail:
    free(cur);
    free(link);
    free(dir);
    return st;
}

/* Whether the name s (after "<name>.tmp.") is "<pid>" or "<pid>.<k>"; *pid gets the pid. */
static bool parse_tmp_suffix(const char *s, long *pid)
{
    char *end;
    if (!isdigit((unsigned char)*s)) return false;
    errno = 0;
    *pid = strtol(s, &end, 10);
    if (errno != 0 || *pid <= 0 || *pid > INT_MAX) return false;
    if (*end == '.') {
        s = end + 1;
        if (!*s) return false;
        for (; *s; s++)
            if (!isdigit((unsigned char)*s)) return false;
        return true;
    }
    return *end == '\0';
}

/* Removes "<real>.tmp.<pid>[.<k>]" files whose process no longer exists (best effort: a
 * folder that cannot be listed or a file that cannot be removed is left alone). */
static void remove_stale(const char *real)
{
    const char *slash = strrchr(real, '/'); /* real is "<folder>/<name>" */
    size_t dlen = (size_t)(slash - real), nlen = strlen(slash + 1);
    char *dir = malloc(dlen + 2), *victim = NULL;
    DIR *d = NULL;
    if (!dir) return;
    memcpy(dir, real, dlen);
    strcpy(dir + dlen, dlen ? "" : "/");
    if (!(d = opendir(dir))) goto done;
    for (struct dirent *e; (e = readdir(d));) {
        long pid;
        const char *s = e->d_name;
        if (strncmp(s, slash + 1, nlen) != 0 || strncmp(s + nlen, ".tmp.", 5) != 0 ||
            !parse_tmp_suffix(s + nlen + 5, &pid) || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to know */
        if (!(victim = malloc(dlen + strlen(s) + 2))) break;
        sprintf(victim, "%s/%s", dlen ? dir : "", s);
        (void)unlink(victim);
        free(victim);
        victim = NULL;
    }
done:
    if (d) closedir(d);
    free(dir);
}

/* Creates a new "<real>.tmp.<pid>.<k>"; *tmp (malloc'ed) and *fd on success. */
static clt_status create_tmp(const char *path, const char *real, char **tmp, int *fd)
{
    clt_status st = CLT_OK;
    *fd = -1;
    CLT_ALLOC(NULL, *tmp, strlen(real) + 64);
    for (int tries = 0; *fd < 0; tries++) {
        sprintf(*tmp, "%s.tmp.%ld.%u", real, (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
        *fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (*fd < 0 && (errno != EEXIST || tries >= 100)) {
            const char *slash = strrchr(real, '/');
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot create a file in the folder %.*s: %s", path,
                     slash == real ? 1 : (int)(slash - real), real, strerror(errno));
        }
    }
fail:
    if (st != CLT_OK) {
        free(*tmp);
        *tmp = NULL;
    }
    return st;
}

/* Makes a rename durable; best effort (some file systems refuse to sync a folder). */
static void sync_folder(const char *real)
{
    const char *slash = strrchr(real, '/');
    size_t len = slash == real ? 1 : (size_t)(slash - real);
    char *dir = malloc(len + 1);
    if (!dir) return;
    memcpy(dir, real, len);
    dir[len] = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

clt_status clt_outfile_check(const char *path)
{
    clt_status st = CLT_OK;
    char *real = NULL, *tmp = NULL;
    int fd = -1;
    struct stat sb;
    bool exists;
    CLT_TRY(resolve(path, &real, &sb, &exists));
    remove_stale(real);
    CLT_TRY(create_tmp(path, real, &tmp, &fd));
fail:
    if (fd >= 0) close(fd);
    if (tmp) unlink(tmp);
    free(tmp);
    free(real);
    return st;
}

clt_status clt_outfile_open(clt_outfile **out, const char *path)
{
    clt_status st = CLT_OK;
    clt_outfile *f = NULL;
    int fd = -1;
    struct stat sb;
    bool exists;
    CLT_ASSERT(out);
    *out = NULL;
    CLT_ALLOC(NULL, f, 1);
    CLT_TRY(resolve(path, &f->real, &sb, &exists));
    CLT_ALLOC(NULL, f->path, strlen(path) + 1);
    strcpy(f->path, path);
    remove_stale(f->real);
    CLT_TRY(create_tmp(path, f->real, &f->tmp, &fd));
    if (exists) (void)fchmod(fd, sb.st_mode & 0777); /* the replaced file's permissions */
    if (!(f->fp = fdopen(fd, "wb")))
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open a stream: %s", path, strerror(errno));
    fd = -1; /* owned by f->fp */
    *out = f;
    f = NULL;
fail:
    if (fd >= 0) close(fd);
    clt_outfile_discard(f);
    return st;
}

FILE *clt_outfile_stream(clt_outfile *f)
{
    CLT_ASSERT(f && f->fp);
    return f->fp;
}

clt_status clt_outfile_write(clt_outfile *f, const void *data, size_t n)
{
    CLT_ASSERT(f && f->fp);
    if (n == 0 || fwrite(data, 1, n, f->fp) == n) return CLT_OK;
    return clt__fail(NULL, CLT_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
}

clt_status clt_outfile_printf(clt_outfile *f, const char *fmt, ...)
{
    CLT_ASSERT(f && f->fp && fmt);
    va_list ap;
    va_start(ap, fmt);
    int rc = vfprintf(f->fp, fmt, ap);
    va_end(ap);
    if (rc >= 0) return CLT_OK;
    return clt__fail(NULL, CLT_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
}

clt_status clt_outfile_commit(clt_outfile *f)
{
    clt_status st = CLT_OK;
    if (!f || !f->fp) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_outfile_commit: no open file");
    bool failed_before = ferror(f->fp) != 0;
    if (fflush(f->fp) != 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    if (failed_before) CLT_FAIL(NULL, CLT_ERR_IO, "%s: write failed", f->path);
    if (fsync(fileno(f->fp)) != 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: fsync failed: %s", f->path, strerror(errno));
    int rc = fclose(f->fp);
    f->fp = NULL;
    if (rc != 0) CLT_FAIL(NULL, CLT_ERR_IO, "%s: close failed: %s", f->path, strerror(errno));
    if (rename(f->tmp, f->real) != 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot rename %s over %s: %s", f->path, f->tmp, f->real,
                 strerror(errno));
    free(f->tmp);
    f->tmp = NULL; /* it is the file now */
    sync_folder(f->real);
fail:
    clt_outfile_discard(f);
    return st;
}

void clt_outfile_discard(clt_outfile *f)
{
    if (!f) return;
    if (f->fp) fclose(f->fp);
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    free(f->real);
    free(f->path);
    free(f);
}

clt_status clt_outfile_append(FILE **out, const char *path)
{
    clt_status st = CLT_OK;
    char *real = NULL;
    int fd = -1;
    struct stat sb;
    bool exists;
    CLT_ASSERT(out);
    *out = NULL;
    CLT_TRY(resolve(path, &real, &sb, &exists));
    /* O_NONBLOCK: a FIFO swapped in since the check must not block the open */
    fd = open(real, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        CLT_FAIL(NULL, CLT_ERR_IO, "%s is not a regular file: refusing to write to it", path);
    int flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: fcntl failed: %s", path, strerror(errno));
    if (!(*out = fdopen(fd, "a")))
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open a stream: %s", path, strerror(errno));
    fd = -1;
fail:
    if (fd >= 0) close(fd);
    free(real);
    return st;
}

/* ---- the same file, locks ------------------------------------------------------------------ */

/* What a path names: an existing file (name NULL) or a name to create in an existing folder
 * (dev and ino: the folder's); known false when it names neither. */
struct identity {
    bool known;
    dev_t dev;
    ino_t ino;
    char *name;
};

static clt_status identify(const char *path, struct identity *id)
{
    clt_status st = CLT_OK;
    char *real = NULL;
    struct stat sb;
    bool exists;
    memset(id, 0, sizeof *id);
    if (stat(path, &sb) == 0) {
        *id = (struct identity){.known = true, .dev = sb.st_dev, .ino = sb.st_ino};
        return CLT_OK;
    }
    if (errno != ENOENT) return CLT_OK; /* unreadable: the same as nothing */
    st = resolve(path, &real, &sb, &exists);
    if (st != CLT_OK || exists) { /* a missing folder names nothing; exists: it appeared */
        st = st == CLT_ERR_HOST_MEMORY ? st : CLT_OK;
        goto fail;
    }
    const char *slash = strrchr(real, '/'); /* real is "<folder>/<name>" */
    char *dir = NULL;
    CLT_ALLOC(NULL, dir, (size_t)(slash - real) + 2);
    memcpy(dir, real, (size_t)(slash - real));
    strcpy(dir + (slash - real), slash == real ? "/" : "");
    bool ok = stat(dir, &sb) == 0;
    free(dir);
    if (!ok) goto fail;
    CLT_ALLOC(NULL, id->name, strlen(slash + 1) + 1);
    strcpy(id->name, slash + 1);
    id->known = true;
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
fail:
    free(real);
    return st;
}

clt_status clt_outfile_same(const char *a, const char *b, bool *same)
{
    clt_status st = CLT_OK;
    struct identity x = {0}, y = {0};
    CLT_ASSERT(same);
    *same = false;
    if (!a || !*a || !b || !*b)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_outfile_same: a path is NULL or empty");
    CLT_TRY(identify(a, &x));
    CLT_TRY(identify(b, &y));
    *same = x.known && y.known && x.dev == y.dev && x.ino == y.ino &&
            (x.name && y.name ? strcmp(x.name, y.name) == 0 : !x.name && !y.name);
fail:
    free(x.name);
    free(y.name);
    return st;
}

struct clt_outfile_lock {
    char *path; /* the lock file */
    int fd;
};

/* The id of the process holding the lock on fd: from the system, else from the file. */
static long lock_holder(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0)
        return (long)fl.l_pid;
    char buf[32];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    if (k <= 0) return 0;
    buf[k] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

clt_status clt_outfile_lock_acquire(clt_outfile_lock **out, const char *path)
{
    clt_status st = CLT_OK;
    clt_outfile_lock *l = NULL;
    char *real = NULL;
    struct stat sb;
    bool exists;
    CLT_ASSERT(out);
    *out = NULL;
    CLT_TRY(resolve(path, &real, &sb, &exists));
    CLT_ALLOC(NULL, l, 1);
    l->fd = -1;
    CLT_ALLOC(NULL, l->path, strlen(real) + 6);
    sprintf(l->path, "%s.lock", real);
    /* a holder removes the file before it lets go: a lock taken on a removed file is retried */
    for (int tries = 0;; tries++) {
        l->fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
        if (l->fd < 0)
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot create the lock file %s: %s", path, l->path,
                     strerror(errno));
        if (fstat(l->fd, &sb) != 0 || !S_ISREG(sb.st_mode))
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: the lock file %s is not a regular file", path,
                     l->path);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(l->fd, F_SETLK, &fl) != 0) {
            if (errno != EACCES && errno != EAGAIN)
                CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot lock %s: %s", path, l->path,
                         strerror(errno));
            long pid = lock_holder(l->fd);
            char who[48] = "another process";
            if (pid) snprintf(who, sizeof who, "process %ld", pid);
            CLT_FAIL(NULL, CLT_ERR_IO, "%s is being written by %s (it holds %s): wait for it "
                     "to end or write elsewhere", path, who, l->path);
        }
        struct stat now;
        if (stat(l->path, &now) == 0 && now.st_dev == sb.st_dev && now.st_ino == sb.st_ino) break;
        if (tries >= 100)
            CLT_FAIL(NULL, CLT_ERR_IO, "%s: the lock file %s keeps being replaced", path,
                     l->path);
        close(l->fd); /* removed by its holder meanwhile: lock the new one */
        l->fd = -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, pid, (size_t)n, 0) != n)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot write the lock file %s: %s", path, l->path,
                 strerror(errno));
    *out = l;
    l = NULL;
fail:
    if (l && l->fd >= 0) close(l->fd);
    if (l) free(l->path);
    free(l);
    free(real);
    return st;
}

void clt_outfile_lock_release(clt_outfile_lock *l)
{
    if (!l) return;
    (void)unlink(l->path); /* while still locked: the next taker finds no stale file */
    close(l->fd);
    free(l->path);
    free(l);
}
