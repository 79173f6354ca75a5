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

#include "cltrain/export.h"

#include "cltrain/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds (or fetches from a cache) the program made of `files` (comma-separated stems, e.g.
 * "rng,dropout") with extra compiler `options` (e.g. "-DX_DTYPE=0"; may be NULL).
 * Returns CLT_ERR_BUILD with the compiler's complete log in clt_ctx_errmsg(ctx), or
 * CLT_ERR_IO when a stem names no source. Not thread-safe. */
CLT_API clt_status clt_program_build(clt_ctx *ctx, const char *files, const char *options);

/* The complete source the library compiles for `files`: cl/common.cl, then each stem, each
 * after a #line directive (from $CLTRAIN_KERNEL_DIR when set, as for a build). *out is
 * malloc'ed; the caller frees it. CLT_ERR_IO when a stem names no source (message in
 * clt_last_errmsg()). Thread-safe. */
CLT_API clt_status clt_program_assemble(const char *files, char **out);

/* The complete compiler options for a program with the op's `options` (may be NULL) on dev:
 * the OpenCL C version and the device defines (CLT_DEVICE_GPU/CPU/OTHER, CLT_HAS_FP16,
 * CLT_HAS_FP64, CLT_WG), then `options`. dev may be synthetic. Thread-safe. */
CLT_API void clt_program_options(const clt_device_info *dev, const char *options, char *dst,
                                 size_t n);

/* The embedded source of cl/<stem>.cl, or NULL. */
CLT_API const char *clt_program_source(const char *stem, size_t *len);

/* The directory of the disk cache in use, or NULL when it is off. */
CLT_API const char *clt_program_cache_dir(const clt_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
