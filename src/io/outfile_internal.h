/* Safe output files, shared by every file cltrain writes for the user (checkpoints, metrics,
 * predictions, tuning files): a path that exists and is not a regular file is refused, a
 * symlink is followed and its target replaced atomically in the target's own folder (the link
 * survives), the folder is checked for writability before any long work, stale temporary files
 * of dead runs are removed, and every write, flush and close is checked. */
#ifndef CLTRAIN_OUTFILE_INTERNAL_H
#define CLTRAIN_OUTFILE_INTERNAL_H

#include "cltrain/status.h"

#include <stddef.h>
#include <stdio.h>

/* Checks, before any long work, that `path` can be written by clt_outfile_open or
 * clt_outfile_append: symlinks are followed (up to 40; a dangling link names the file to
 * create); the resolved path must be a regular file or not exist (a directory, FIFO, device
 * node or socket is refused); its folder must exist and accept a new file (a temporary
 * "<path>.tmp.<pid>.<k>" is created and removed). Also removes stale temporaries (see
 * clt_outfile_open). Returns CLT_ERR_IO with a message naming the path and what is wrong
 * (clt_last_errmsg()), or CLT_ERR_HOST_MEMORY. Thread-safe. */
clt_status clt_outfile_check(const char *path);

typedef struct clt_outfile clt_outfile;

/* Starts replacing the file at `path`: resolves it as clt_outfile_check does (same refusals),
 * removes "<real>.tmp.<pid>[.<k>]" files in the target's folder whose process no longer exists
 * (kill(pid, 0) fails with ESRCH; temporaries of live processes and of this one stay), and
 * creates a new temporary "<real>.tmp.<pid>.<k>" there, with the mode of the file it replaces
 * when there is one. Write through clt_outfile_write or clt_outfile_stream, then
 * clt_outfile_commit (or clt_outfile_discard). `path` itself is untouched until the commit.
 * Returns CLT_ERR_IO (message naming the path) or CLT_ERR_HOST_MEMORY; *out is NULL then.
 * One clt_outfile is used by one thread at a time. */
clt_status clt_outfile_open(clt_outfile **out, const char *path);

/* The temporary file's stream, for fprintf and the like; its errors are caught by
 * clt_outfile_commit (stdio's error flag and the final flush). Owned by f: do not close it. */
FILE *clt_outfile_stream(clt_outfile *f);

/* Writes n bytes (n may be 0). Returns CLT_ERR_IO naming the path and the system's reason. */
clt_status clt_outfile_write(clt_outfile *f, const void *data, size_t n);

/* Finishes: checks the stream's error flag, flushes, fsyncs and closes the temporary file,
 * renames it over the resolved target and syncs the folder (best effort). On any failure the
 * temporary file is removed, the target is left as it was, and CLT_ERR_IO names the path and
 * the system's reason. Frees f in every case (NULL: returns CLT_ERR_INVALID_ARG). */
clt_status clt_outfile_commit(clt_outfile *f);

/* Abandons the file: closes and removes the temporary file, frees f. Accepts NULL. */
void clt_outfile_discard(clt_outfile *f);

/* Opens `path` for appending (a log such as --metrics), after the checks of clt_outfile_check
 * but without the writability probe: a symlink is followed by the system; a path that is not
 * a regular file is refused, also when it changed since the check (a FIFO is never blocked
 * on). The caller checks its writes and the final fclose. Returns CLT_ERR_IO (message naming
 * the path) or CLT_ERR_HOST_MEMORY; *out is NULL then. Thread-safe. */
clt_status clt_outfile_append(FILE **out, const char *path);

#endif
