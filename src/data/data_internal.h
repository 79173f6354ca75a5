/* Private helpers shared by the data readers (idx.c, csv.c, dataset.c): reading a file through
 * zlib, which handles gzip-compressed and raw files alike, and parameter checks. */
#ifndef CLTRAIN_DATA_INTERNAL_H
#define CLTRAIN_DATA_INTERNAL_H

#include "cltrain/data.h"

#include <zlib.h>

/* Opens `path` for reading (gzip or raw) with a large buffer. CLT_ERR_IO naming the path. */
clt_status clt__data_gzopen(const char *path, gzFile *out);

/* Reads up to `want` bytes, fewer only at the end of the data; *got says how many. CLT_ERR_IO
 * (with zlib's reason) on a read error or corrupt compressed data. */
clt_status clt__data_gzread(gzFile f, const char *path, void *buf, size_t want, size_t *got);

/* The whole (decompressed) contents of `path`, NUL-terminated; *len excludes the NUL. The
 * caller frees *out. */
clt_status clt__data_read_all(const char *path, char **out, size_t *len);

/* CLT_ERR_INVALID_ARG unless p's task is known and 0 <= classes <= CLT_DATA_MAX_CLASSES. */
clt_status clt__data_check_params(const struct clt_data_params *p);

#endif
