/* Runtime-compiled OpenCL programs. Sources are cl/<stem>.cl embedded in the library at build
 * time (or read from $CLTRAIN_KERNEL_DIR/<stem>.cl while developing kernels); a program is one
 * or more stems compiled after cl/common.cl with device-specific -D defines. Built programs are
 * cached per ctx in memory and on disk as device binaries, keyed by a hash of the source, the
 * options, the device name, the driver version and the platform version.
 *
 * Disk cache: $CLTRAIN_CACHE_DIR, else $XDG_CACHE_HOME/cltrain, else ~/.cache/cltrain;
 * CLTRAIN_CACHE=0 turns it off. Files are written atomically (temp file + rename); a truncated,
 * corrupt or foreign file is detected by its header and checksum, ignored and rewritten. */
#ifndef CLTRAIN_PROGRAM_H
#define CLTRAIN_PROGRAM_H

#include "cltrain/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds (or fetches from a cache) the program made of `files` (comma-separated stems, e.g.
 * "rng,dropout") with extra compiler `options` (e.g. "-DX_DTYPE=0"; may be NULL).
 * Returns CLT_ERR_BUILD with the compiler's complete log in clt_ctx_errmsg(ctx), or
 * CLT_ERR_IO when a stem names no source. Not thread-safe. */
clt_status clt_program_build(clt_ctx *ctx, const char *files, const char *options);

/* The embedded source of cl/<stem>.cl, or NULL. */
const char *clt_program_source(const char *stem, size_t *len);

/* The directory of the disk cache in use, or NULL when it is off. */
const char *clt_program_cache_dir(const clt_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
