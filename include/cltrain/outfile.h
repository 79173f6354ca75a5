/* Safe output files: the way cltrain writes every file it makes for a user (checkpoints, tuning
 * files, metrics, predictions), for a program's own outputs. A file is written to a temporary
 * "<path>.tmp.<pid>.<k>" beside its target and renamed over it only when complete and synced,
 * so a crash or a failed write never leaves a truncated file where the old one was. A symlink is
 * followed and its target replaced in the target's own folder (the link survives); anything
 * that exists and is not a regular file (a directory, FIFO, device, socket) is refused; every
 * write, flush, sync and close is checked. Failures return CLT_ERR_IO (or CLT_ERR_HOST_MEMORY)
 * with a message naming the path and the system's reason in clt_last_errmsg().
 * No ctx and no OpenCL: these calls never touch a device.
 *
 * Usage:
 *
 *     if (clt_outfile_check(path) != CLT_OK) ...     // before long work: fail early
 *     clt_outfile *f;
 *     clt_outfile_open(&f, path);
 *     clt_outfile_printf(f, "%d,%g\n", step, loss);
 *     if (clt_outfile_commit(f) != CLT_OK)            // fsync + rename; frees f either way
 *         fprintf(stderr, "%s\n", clt_last_errmsg()); // path is as it was
 *
 * A program that reads files and writes others checks first that no output is one of its
 * inputs (clt_outfile_same), and holds clt_outfile_lock_acquire's lock on each output while it
 * runs, so that a second process writing the same path fails at once instead of alternating
 * with the first.
 */
#ifndef CLTRAIN_OUTFILE_H
#define CLTRAIN_OUTFILE_H

#include "cltrain/export.h"

#include "cltrain/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CLT_PRINTF_FORMAT(f, a) __attribute__((format(printf, f, a)))
#else
#define CLT_PRINTF_FORMAT(f, a)
#endif

/* Checks, before any long work, that `path` can be written by clt_outfile_open or
 * clt_outfile_append: symlinks are followed (up to 40; a dangling link names the file to
 * create); the resolved path must be a regular file or not exist; its folder must exist and
 * accept a new file (a temporary file is created there and removed). Also removes stale
 * temporaries (see clt_outfile_open). Writes nothing at `path`. Returns CLT_OK, CLT_ERR_IO (the
 * message names the path and what is wrong), CLT_ERR_INVALID_ARG for an empty path, or
 * CLT_ERR_HOST_MEMORY. Thread-safe. */
CLT_API clt_status clt_outfile_check(const char *path);

/* Whether the paths a and b name the same file, as an output written at one would replace or
 * change the other: *same is true when both exist and are one file (the same device and inode,
 * through symlinks and hard links), or when neither exists and both would be created as the
 * same name in the same folder (symlinks followed as clt_outfile_check does). A path whose
 * folder is missing or unreadable names no file and is the same as none. Writes nothing.
 * Returns CLT_OK, CLT_ERR_INVALID_ARG (a NULL or empty path; same must not be NULL) or
 * CLT_ERR_HOST_MEMORY; *same is false then. Thread-safe. */
CLT_API clt_status clt_outfile_same(const char *a, const char *b, bool *same);

/* An advisory lock on an output for the life of a run; owned by the caller until
 * clt_outfile_lock_release. */
typedef struct clt_outfile_lock clt_outfile_lock;

/* Locks the output `path` against other processes: resolves it as clt_outfile_check does (the
 * same refusals), creates or opens "<real>.lock" beside the resolved target, takes a POSIX
 * write lock (fcntl F_SETLK) on it and writes this process's id into it. The lock file is not
 * the output: clt_outfile_commit's rename leaves it alone. The system releases the lock when
 * the process ends in any way (kill -9 included); a lock file left by a dead process is taken
 * over by the next caller, never in its way. Does not wait: when another process holds the
 * lock, returns CLT_ERR_IO with a message naming the path, that process's id and the lock
 * file. Locks of one process do not exclude each other (POSIX record locks): check outputs
 * against each other with clt_outfile_same. Returns CLT_OK, CLT_ERR_IO, CLT_ERR_INVALID_ARG
 * (an empty path) or CLT_ERR_HOST_MEMORY; *out is NULL unless CLT_OK. out must not be NULL.
 * Thread-safe. */
CLT_API clt_status clt_outfile_lock_acquire(clt_outfile_lock **out, const char *path);

/* Removes the lock file and releases the lock; frees l. Accepts NULL. */
CLT_API void clt_outfile_lock_release(clt_outfile_lock *l);

/* A file being written; owned by the caller until clt_outfile_commit or clt_outfile_discard,
 * which free it. Used by one thread at a time (distinct files: from any threads). */
typedef struct clt_outfile clt_outfile;

/* Starts replacing the file at `path`: resolves it as clt_outfile_check does (the same
 * refusals), removes "<real>.tmp.<pid>[.<k>]" files in the target's folder whose process no
 * longer exists (those of live processes and of this one stay), and creates the temporary file
 * there, with the permissions of the file it replaces when there is one. `path` itself is
 * untouched until the commit. Returns CLT_OK, CLT_ERR_IO, CLT_ERR_INVALID_ARG (an empty path) or
 * CLT_ERR_HOST_MEMORY; *out is NULL then. out must not be NULL. Thread-safe. */
CLT_API clt_status clt_outfile_open(clt_outfile **out, const char *path);

/* Writes n bytes (n may be 0). CLT_ERR_IO naming the path and the system's reason. */
CLT_API clt_status clt_outfile_write(clt_outfile *f, const void *data, size_t n);

/* Writes formatted text, as fprintf. CLT_ERR_IO naming the path and the system's reason. */
CLT_API clt_status clt_outfile_printf(clt_outfile *f, const char *fmt, ...)
    CLT_PRINTF_FORMAT(2, 3);

/* The temporary file's stdio stream, for code that writes to a FILE *. Its errors are caught by
 * clt_outfile_commit (the stream's error flag and the final flush). Owned by f: do not close
 * it; valid until the commit or discard. */
CLT_API FILE *clt_outfile_stream(clt_outfile *f);

/* Finishes: checks the stream's error flag, flushes, fsyncs and closes the temporary file,
 * renames it over the resolved target and syncs the folder (best effort: some file systems
 * refuse). On any failure the temporary file is removed, the target is left as it was, and
 * CLT_ERR_IO names the path and the system's reason. Frees f in every case; NULL returns
 * CLT_ERR_INVALID_ARG. */
CLT_API clt_status clt_outfile_commit(clt_outfile *f);

/* Abandons the file: closes and removes the temporary file, leaves the target as it was, frees
 * f. Accepts NULL. */
CLT_API void clt_outfile_discard(clt_outfile *f);

/* Opens `path` for appending (a log, such as cltrain's --metrics), after the checks of
 * clt_outfile_check but without its probe: a symlink is followed; a path that is not a regular
 * file is refused, also when it changed since a check (a FIFO is never blocked on). Appends
 * are not atomic: the caller checks its writes and the final fclose(*out), and owns *out.
 * Returns CLT_OK, CLT_ERR_IO (the message names the path), CLT_ERR_INVALID_ARG (an empty path)
 * or CLT_ERR_HOST_MEMORY; *out is NULL then. Thread-safe. */
CLT_API clt_status clt_outfile_append(FILE **out, const char *path);

#ifdef __cplusplus
}
#endif
#endif
