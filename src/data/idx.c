/* IDX reader (the MNIST file format): a big-endian header, magic 0x0000TTDD (element type TT,
 * DD dimensions) and DD u32 sizes, then the data. cltrain reads u8 images (3 dims) and u8
 * labels (1 dim); the data length must match the header exactly. Files may be gzip or raw. */
#include "data_internal.h"
#include "internal.h"

#include <stdint.h>
#include <string.h>

#define CLT__IDX_IMAGES_MAGIC 0x00000803u /* u8, 3 dims: count, rows, cols */
#define CLT__IDX_LABELS_MAGIC 0x00000801u /* u8, 1 dim: count */
#define CLT__IDX_FIRST_CAP                                                                         \
    (64u << 20) /* grow the data buffer from here up to the header's                               \
                 * promise, so a lying header costs no huge malloc */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads one u8 IDX file of `ndims` dimensions into *data (caller frees), its sizes into dims.
 * `desc` describes the magic ("u8 images, 3 dims"), `unit` the data ("pixels"). */
static clt_status read_idx(const char *path, uint32_t magic, int ndims, const char *desc,
                           const char *unit, uint32_t *dims, uint8_t **data, size_t *bytes)
{
    clt_status st = CLT_OK;
    gzFile f = NULL;
    uint8_t *buf = NULL;
    unsigned char head[4 + 4 * 3];
    unsigned char junk[4096];
    size_t head_len = 4 + 4 * (size_t)ndims, got = 0, total = 1, cap = 0, have = 0, extra = 0;
    int zerr = Z_OK;
    CLT_ASSERT(ndims >= 1 && ndims <= 3);
    *data = NULL;
    *bytes = 0;

    CLT_TRY(clt__data_gzopen(path, &f));
    CLT_TRY(clt__data_gzread(f, path, head, head_len, &got));
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
        if (total > SIZE_MAX / dims[d]) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: header sizes overflow the address space", path);
        }
        total *= dims[d];
    }

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
    *bytes = total;
    buf = NULL;
fail:
    if (f) gzclose(f);
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
    memset(&d, 0, sizeof d);
    if (out) memset(out, 0, sizeof *out);
    if (!images_path || !labels_path || !out) {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_data_load_idx: NULL argument");
    }
    CLT_TRY(clt__data_check_params(&prm));
    CLT_TRY(read_idx(images_path, CLT__IDX_IMAGES_MAGIC, 3, "u8 images, 3 dims", "pixels", idims,
                     &d.u8, &ibytes));
    CLT_TRY(read_idx(labels_path, CLT__IDX_LABELS_MAGIC, 1, "u8 labels, 1 dim", "labels", ldims,
                     &raw_labels, &lbytes));
    if (idims[0] != ldims[0]) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %u images, but %s: %u labels", images_path,
                 (unsigned)idims[0], labels_path, (unsigned)ldims[0]);
    }
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
    free(raw_labels);
    clt_dataset_free(&d);
    return st;
}
