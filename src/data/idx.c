/* IDX reader (the MNIST file format): a big-endian header, magic 0x0000TTDD (element type TT,
 * DD dimensions) and DD u32 sizes, then the data. cltrain reads u8 images (3 dims) and u8
 * labels (1 dim); the data length must match the header exactly. Files may be gzip or raw.
 * Declared sizes are bounded and checked (label count, gzip trailer) before the images are
 * decompressed, so a lying header costs no large allocation. */
#include "data/data_internal.h"
#include "runtime/internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CLT__IDX_IMAGES_MAGIC 0x00000803u /* u8, 3 dims: count, rows, cols */
#define CLT__IDX_LABELS_MAGIC 0x00000801u /* u8, 1 dim: count */
#define CLT__IDX_FIRST_CAP                                                                         \
    (64u << 20) /* grow the data buffer from here up to the header's                               \
                 * promise, so a lying header costs no huge malloc */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Opens one u8 IDX file of `ndims` dimensions and reads its header: *f is left positioned at
 * the data, dims and *total (the data bytes the header promises) filled. Each size must be in
 * [1, CLT_DATA_IDX_MAX_DIM] and the total at most CLT_DATA_IDX_MAX_BYTES, so a lying header
 * is refused before anything is decompressed. `desc` describes the magic ("u8 images, 3
 * dims"), `unit` the data ("pixels"). */
static clt_status open_idx(const char *path, uint32_t magic, int ndims, const char *desc,
                           const char *unit, gzFile *f, uint32_t *dims, size_t *total)
{
    clt_status st = CLT_OK;
    unsigned char head[4 + 4 * 3];
    size_t head_len = 4 + 4 * (size_t)ndims, got = 0;
    uint64_t bytes = 1;
    CLT_ASSERT(ndims >= 1 && ndims <= 3);
    *total = 0;
    CLT_TRY(clt__data_gzopen(path, f));
    CLT_TRY(clt__data_gzread(*f, path, head, head_len, &got));
    if (got >= 4 && be32(head) != magic) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: wrong magic 0x%08x, expected 0x%08x (%s)", path,
                 (unsigned)be32(head), (unsigned)magic, desc);
    }
    if (got < head_len) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: truncated header: %zu of %zu bytes", path, got,
                 head_len);
    }
    for (int d = 0; d < ndims; d++) {
        dims[d] = be32(head + 4 + 4 * d);
        if (dims[d] == 0) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: header declares size 0 in dimension %d of %d", path,
                     d + 1, ndims);
        }
        if (dims[d] > CLT_DATA_IDX_MAX_DIM) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: header declares size %u in dimension %d of %d, above cltrain's limit "
                     "of %u (a damaged header?)",
                     path, (unsigned)dims[d], d + 1, ndims, (unsigned)CLT_DATA_IDX_MAX_DIM);
        }
        bytes *= dims[d]; /* <= 2^34 * 2^24 before the check: no overflow */
        if (bytes > CLT_DATA_IDX_MAX_BYTES || (uintmax_t)bytes >= SIZE_MAX) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: header declares %u x %u x %u %s, more than cltrain's limit of %llu "
                     "bytes (%llu GiB) for one IDX file (a damaged header?)",
                     path, (unsigned)dims[0], ndims > 1 ? (unsigned)dims[1] : 1u,
                     ndims > 2 ? (unsigned)dims[2] : 1u, unit,
                     (unsigned long long)CLT_DATA_IDX_MAX_BYTES,
                     (unsigned long long)(CLT_DATA_IDX_MAX_BYTES >> 30));
        }
    }
    *total = (size_t)bytes;
fail:
    return st;
}

/* Whether the gzip file `g` (compressed bytes) may hold another member after the first: a
 * member header (1f 8b 08, reserved flag bits clear, a known XFL) anywhere after the first.
 * A false "maybe" only skips the early check below; the exact check while reading stays. */
static bool may_be_multi_member(FILE *g)
{
    unsigned char buf[65536 + 10];
    size_t keep = 0, n = 0;
    bool first = true;
    rewind(g);
    while ((n = fread(buf + keep, 1, sizeof buf - keep, g)) > 0) {
        size_t have = keep + n;
        for (size_t i = first ? 10 : 0; i + 10 <= have; i++) {
            if (buf[i] == 0x1f && buf[i + 1] == 0x8b && buf[i + 2] == 8 &&
                (buf[i + 3] & 0xe0) == 0 && (buf[i + 8] == 0 || buf[i + 8] == 2 || buf[i + 8] == 4))
                return true;
        }
        first = false;
        keep = have < 9 ? have : 9; /* a header may straddle two reads */
        memmove(buf, buf + have - keep, keep);
    }
    return false;
}

/* For a gzip file whose header promises more than CLT__IDX_FIRST_CAP bytes: its trailer's
 * ISIZE (the uncompressed length mod 2^32, the last 4 bytes of a single-member file) must equal
 * the promise mod 2^32, checked before anything is decompressed, so a gzip of a few MB that
 * expands to less (or more) than its header claims is refused without inflating gigabytes.
 * Smaller files, raw files and possibly multi-member files are checked exactly while read. */
static clt_status check_gzip_isize(const char *path, size_t head_len, size_t total,
                                   const char *unit)
{
    clt_status st = CLT_OK;
    FILE *g = NULL;
    unsigned char magic[2], tail[4];
    uint32_t isize = 0, want = (uint32_t)((uint64_t)head_len + total); /* mod 2^32 */
    int fd = -1;
    uint64_t size = 0;
    if (total <= CLT__IDX_FIRST_CAP) goto fail;
    /* the gz reader opened it as a regular file; any error will show there (a FIFO swapped in
     * since then is refused again here, not waited on) */
    if (clt__open_regular(path, CLT__DATA_REGULAR_WHY, &fd, &size) != CLT_OK) goto fail;
    g = fdopen(fd, "rb");
    if (!g) {
        close(fd);
        goto fail;
    }
    if (fread(magic, 1, 2, g) != 2 || magic[0] != 0x1f || magic[1] != 0x8b) goto fail;
    if (fseek(g, -4, SEEK_END) != 0 || fread(tail, 1, 4, g) != 4) goto fail;
    isize = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 | (uint32_t)tail[2] << 16 |
            (uint32_t)tail[3] << 24;
    if (isize != want && !may_be_multi_member(g)) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: truncated or damaged: the header promises %zu bytes of %s (%zu with the "
                 "header), but the gzip trailer says the file decompresses to %u bytes (mod "
                 "2^32); refused before decompressing",
                 path, total, unit, head_len + total, (unsigned)isize);
    }
fail:
    if (g) fclose(g);
    return st;
}

/* Reads the `total` data bytes of an IDX file opened by open_idx into *data (caller frees).
 * The buffer grows as data arrives, so a short file costs only what it holds; the data must
 * be exactly `total` bytes (no short data, no trailing bytes, no cut gzip stream). */
static clt_status read_idx_data(gzFile f, const char *path, const char *unit, size_t total,
                                uint8_t **data)
{
    clt_status st = CLT_OK;
    uint8_t *buf = NULL;
    unsigned char junk[4096];
    size_t got = 0, cap = 0, have = 0, extra = 0;
    int zerr = Z_OK;
    *data = NULL;
    cap = total < CLT__IDX_FIRST_CAP ? total : CLT__IDX_FIRST_CAP;
    CLT_ALLOC(NULL, buf, cap);
    for (;;) {
        CLT_TRY(clt__data_gzread(f, path, buf + have, cap - have, &got));
        have += got;
        if (have < cap || cap == total) break;
        size_t bigger_cap = cap > total / 2 ? total : cap * 2;
        uint8_t *bigger = realloc(buf, bigger_cap);
        if (!bigger) {
            CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory for %zu bytes of %s", path,
                     total, unit);
        }
        buf = bigger;
        cap = bigger_cap;
    }
    if (have < total) {
        gzerror(f, &zerr);
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: truncated: header promises %zu bytes of %s, file has %zu%s", path, total,
                 unit, have, zerr == Z_BUF_ERROR ? " (gzip stream cut short)" : "");
    }
    for (;;) {
        CLT_TRY(clt__data_gzread(f, path, junk, sizeof junk, &got));
        if (got == 0) break;
        extra += got;
    }
    if (extra) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: %zu bytes of trailing data after the %zu bytes of %s the header promises",
                 path, extra, total, unit);
    }
    gzerror(f, &zerr);
    if (zerr == Z_BUF_ERROR) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: truncated: the gzip stream is cut short after its "
                 "%zu bytes of %s (checksum missing)",
                 path, total, unit);
    }
    *data = buf;
    buf = NULL;
fail:
    free(buf);
    return st;
}

clt_status clt_data_load_idx(const char *images_path, const char *labels_path,
                             const struct clt_data_params *p, clt_dataset *out)
{
    clt_status st = CLT_OK;
    struct clt_data_params prm = p ? *p : clt_data_default_params();
    clt_dataset d;
    uint32_t idims[3] = {0, 0, 0}, ldims[1] = {0};
    uint8_t *raw_labels = NULL;
    size_t ibytes = 0, lbytes = 0;
    unsigned max_label = 0;
    gzFile fi = NULL, fl = NULL;
    memset(&d, 0, sizeof d);
    if (out) memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_data_load_idx: NULL argument");
    }
    CLT_TRY(clt__data_check_params(&prm));
    /* Headers and the (small: at most CLT_DATA_IDX_MAX_DIM bytes) labels first, so that a
     * count mismatch or a lying gzip is refused before the images are decompressed. */
    CLT_TRY(open_idx(images_path, CLT__IDX_IMAGES_MAGIC, 3, "u8 images, 3 dims", "pixels", &fi,
                     idims, &ibytes));
    CLT_TRY(open_idx(labels_path, CLT__IDX_LABELS_MAGIC, 1, "u8 labels, 1 dim", "labels", &fl,
                     ldims, &lbytes));
    CLT_TRY(check_gzip_isize(labels_path, 4 + 4 * 1, lbytes, "labels"));
    CLT_TRY(read_idx_data(fl, labels_path, "labels", lbytes, &raw_labels));
    if (idims[0] != ldims[0]) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %u images, but %s: %u labels", images_path,
                 (unsigned)idims[0], labels_path, (unsigned)ldims[0]);
    }
    CLT_TRY(check_gzip_isize(images_path, 4 + 4 * 3, ibytes, "pixels"));
    CLT_TRY(read_idx_data(fi, images_path, "pixels", ibytes, &d.u8));
    d.n = idims[0];
    CLT_ALLOC(NULL, d.labels, d.n);
    for (size_t i = 0; i < d.n; i++) {
        if (prm.classes > 0 && raw_labels[i] >= prm.classes) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: label %u at index %zu is not below the %d classes",
                     labels_path, (unsigned)raw_labels[i], i, prm.classes);
        }
        if (raw_labels[i] > max_label) max_label = raw_labels[i];
        d.labels[i] = raw_labels[i];
    }
    d.features = ibytes / d.n;
    d.sample_ndim = 3;
    d.sample_shape[0] = 1;
    d.sample_shape[1] = idims[1];
    d.sample_shape[2] = idims[2];
    d.classes = prm.classes > 0 ? prm.classes : (int)max_label + 1;
    d.task = CLT_TASK_CLASSIFICATION;
    d.input_scale = 1.0f / 255.0f;
    snprintf(d.source, sizeof d.source, "%s", images_path);
    *out = d;
    memset(&d, 0, sizeof d);
fail:
    if (fi) gzclose(fi);
    if (fl) gzclose(fl);
    free(raw_labels);
    clt_dataset_free(&d);
    return st;
}
