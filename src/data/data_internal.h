/* Private helpers shared by the data readers (idx.c, csv.c, images.c, dataset.c): reading a
 * file through zlib, which handles gzip-compressed and raw files alike, parameter checks, and
 * one image file decoded (image.c). */
#ifndef CLTRAIN_DATA_INTERNAL_H
#define CLTRAIN_DATA_INTERNAL_H

#include "cltrain/data.h"

#include <stdbool.h>
#include <zlib.h>

/* Where the named data sets (fashion-mnist, mnist, shakespeare) live; CLTRAIN_DATA_DIR
 * overrides it. */
#define CLT__DATASETS_DIR "/usr/share/datasets"

/* What a data file must be, for the message refusing another kind of file. */
#define CLT__DATA_REGULAR_WHY                                                                      \
    "data is read from a regular file (gzip-compressed or not, read as it is)"

/* Opens `path` for reading (gzip or raw) with a large buffer. Only a regular file: a FIFO (which
 * could block the open or the first read forever), a device, a socket or a directory is refused
 * without blocking, before a byte is read. CLT_ERR_IO naming the path. */
clt_status clt__data_gzopen(const char *path, gzFile *out);

/* Reads up to `want` bytes, fewer only at the end of the data; *got says how many. CLT_ERR_IO
 * (with zlib's reason) on a read error or corrupt compressed data. */
clt_status clt__data_gzread(gzFile f, const char *path, void *buf, size_t want, size_t *got);

/* The whole (decompressed) contents of `path`, NUL-terminated; *len excludes the NUL. The
 * caller frees *out. */
clt_status clt__data_read_all(const char *path, char **out, size_t *len);

/* CLT_ERR_INVALID_ARG unless p's task is known and 0 <= classes <= CLT_DATA_MAX_CLASSES. */
clt_status clt__data_check_params(const struct clt_data_params *p);

/* One decoded image: (h, w, c) interleaved 8-bit pixels, c 1 (grey) or 3 (RGB). */
struct clt__image {
    size_t h, w;
    int c;
    unsigned char *px;
};

/* True when the first bytes are a PNG or JPEG signature. */
bool clt__image_sniff(const unsigned char *head, size_t n);
/* Decodes a PNG or JPEG file (recognised by its signature) into *out (the caller frees it with
 * clt__image_free): palettes expanded, alpha and 16-bit precision dropped. CLT_ERR_FORMAT
 * naming the path for anything not a readable image of at most CLT_DATA_IMAGE_MAX_SIDE a side
 * (checked before the pixels are allocated), CLT_ERR_IO, CLT_ERR_HOST_MEMORY. Thread-safe. */
clt_status clt__image_decode(const char *path, struct clt__image *out);
void clt__image_free(struct clt__image *im);
/* Writes im as (C, H, W) u8 planes into dst: channels converted (grey repeated into RGB; RGB
 * to grey by PIL's luma) and, when the size differs, resized bilinearly with half-pixel
 * centres and edge clamping (PyTorch's interpolate, align_corners=False, no antialias),
 * rounded half up. */
void clt__image_to_chw(const struct clt__image *im, int C, size_t H, size_t W, unsigned char *dst);

/* images:DIR (images.c): both splits of a folder of class folders. */
clt_status clt__data_open_images(const char *dir, const struct clt_data_params *p,
                                 clt_dataset *train, clt_dataset *test);

#endif
