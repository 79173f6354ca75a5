/* safetensors files: the atomic writer (through cltrain/outfile.h: temporary file, fsync,
 * rename, symlinks followed, non-regular files refused) and the reader, which reads the header,
 * validates it, its entries and offsets against the file's size, and only then reads the data
 * section (never more bytes than the header accounts for) before handing out tensors.
 * Failures carry a one-line message naming the file (clt_last_errmsg). */
#include "io/safetensors_internal.h"

#include "cltrain/outfile.h"
#include "runtime/internal.h"
#include "io/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_KEY "__metadata__"
#define CLT_ST_HEADER_MAX 100000000 /* bytes of header JSON, as the safetensors package */

static const struct {
    const char *name;
    clt_dtype dtype;
    size_t size;
} dtypes[] = {{"F32", CLT_DTYPE_F32, 4},
              {"F16", CLT_DTYPE_F16, 2},
              {"BF16", CLT_DTYPE_BF16, 2},
              {"I32", CLT_DTYPE_I32, 4},
              {"U8", CLT_DTYPE_U8, 1},
              {"I64", CLT_ST_I64, 8}};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

typedef struct meta_pair {
    char *key, *value;
} meta_pair;

struct clt_st_file {
    unsigned char *data; /* the data section (malloc'ed: 8-byte aligned) */
    clt_st_tensor *tensors;
    const clt_st_tensor **by_name; /* sorted by name */
    int count;
    meta_pair *meta;
    const meta_pair **meta_by_key; /* sorted by key */
    int nmeta;
};

const char *clt_st_dtype_name(clt_dtype d)
{
    return d == CLT_ST_I64 ? "i64" : clt_dtype_name(d);
}

static bool little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static int dtype_index(clt_dtype d)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (dtypes[i].dtype == d) return (int)i;
    return -1;
}

/* s made printable for a one-line message: control bytes become '?', long text is cut. */
static const char *shown(const char *s, size_t len, char buf[80])
{
    size_t k = 0;
    for (size_t i = 0; i < len && k < 72; i++)
        buf[k++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (k < len) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

static int cmp_tensor_ptr(const void *a, const void *b)
{
    return strcmp((*(const clt_st_tensor *const *)a)->name,
                  (*(const clt_st_tensor *const *)b)->name);
}

static int cmp_meta_ptr(const void *a, const void *b)
{
    return strcmp((*(const meta_pair *const *)a)->key, (*(const meta_pair *const *)b)->key);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* numel * element size of a shape, false on overflow. */
static bool shape_bytes(const int64_t *shape, int ndim, size_t elem, uint64_t *out)
{
    uint64_t total = elem;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && total > UINT64_MAX / d) return false;
        total *= d;
    }
    *out = total;
    return true;
}

static void shape_text(const int64_t *shape, int ndim, char buf[96])
{
    size_t k = 0;
    buf[k++] = '[';
    for (int i = 0; i < ndim; i++)
        k += (size_t)snprintf(buf + k, 96 - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + k, 96 - k, "]");
}

/* ---- writing ---- */

static clt_status check_write_args(const char *path, const clt_st_tensor *tensors, int n,
                                   const char *const *meta_keys, const char *const *meta_values,
                                   int nmeta)
{
    clt_status st = CLT_OK;
    char buf[80];
    if (!path || n < 0 || nmeta < 0 || (n > 0 && !tensors) ||
        (nmeta > 0 && (!meta_keys || !meta_values)))
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_st_write: NULL path/arrays or negative count");
    if (!little_endian())
        CLT_FAIL(NULL, CLT_ERR_UNSUPPORTED, "%s: safetensors needs a little-endian host", path);
    for (int i = 0; i < n; i++) {
        const clt_st_tensor *t = &tensors[i];
        const char *end = memchr(t->name, '\0', sizeof t->name);
        uint64_t bytes = 0;
        if (!end)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor %d: name not NUL-terminated", path, i);
        const char *nm = shown(t->name, (size_t)(end - t->name), buf);
        if (!clt__json_utf8_valid(t->name, (size_t)(end - t->name)))
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor \"%s\": name is not UTF-8", path, nm);
        if (strcmp(t->name, META_KEY) == 0)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: \"%s\" cannot name a tensor", path, META_KEY);
        int d = dtype_index(t->dtype);
        if (d < 0)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor \"%s\": unknown dtype %d", path, nm,
                     (int)t->dtype);
        if (t->ndim < 0 || t->ndim > CLT_MAX_DIMS)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor \"%s\": ndim %d outside 0..%d", path,
                     nm, t->ndim, CLT_MAX_DIMS);
        for (int k = 0; k < t->ndim; k++)
            if (t->shape[k] < 0)
                CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor \"%s\": negative dimension %lld",
                         path, nm, (long long)t->shape[k]);
        if (!shape_bytes(t->shape, t->ndim, dtypes[d].size, &bytes) || bytes != t->nbytes)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "%s: tensor \"%s\": nbytes %zu does not match its shape and dtype", path, nm,
                     t->nbytes);
        if (t->nbytes > 0 && !t->data)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: tensor \"%s\": NULL data", path, nm);
    }
    for (int i = 0; i < nmeta; i++) {
        if (!meta_keys[i] || !meta_values[i])
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: metadata pair %d has a NULL string", path, i);
        if (!clt__json_utf8_valid(meta_keys[i], strlen(meta_keys[i])) ||
            !clt__json_utf8_valid(meta_values[i], strlen(meta_values[i])))
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: metadata \"%s\" is not UTF-8", path,
                     shown(meta_keys[i], strlen(meta_keys[i]), buf));
    }
fail:
    return st;
}

/* Sorts copies of the n names and fails on the first duplicate. */
static clt_status check_unique(const char *path, const char **names, int n, const char *what)
{
    clt_status st = CLT_OK;
    char buf[80];
    qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: duplicate %s \"%s\"", path, what,
                     shown(names[i], strlen(names[i]), buf));
fail:
    return st;
}

static clt_status build_header(clt__json_buf *h, const char *path, const clt_st_tensor *tensors,
                               int n, const char *const *meta_keys, const char *const *meta_values,
                               int nmeta)
{
    clt_status st = CLT_OK;
    uint64_t offset = 0;
    clt__json_buf_puts(h, "{");
    if (nmeta > 0) {
        clt__json_buf_puts(h, "\"" META_KEY "\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) clt__json_buf_puts(h, ",");
            clt__json_buf_string(h, meta_keys[i], strlen(meta_keys[i]));
            clt__json_buf_puts(h, ":");
            clt__json_buf_string(h, meta_values[i], strlen(meta_values[i]));
        }
        clt__json_buf_puts(h, "}");
    }
    for (int i = 0; i < n; i++) {
        const clt_st_tensor *t = &tensors[i];
        if (i || nmeta > 0) clt__json_buf_puts(h, ",");
        clt__json_buf_string(h, t->name, strlen(t->name));
        clt__json_buf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[",
                             dtypes[dtype_index(t->dtype)].name);
        for (int k = 0; k < t->ndim; k++)
            clt__json_buf_printf(h, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        clt__json_buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                             (unsigned long long)(offset + t->nbytes));
        offset += t->nbytes;
    }
    clt__json_buf_puts(h, "}");
    while ((8 + h->len) % 8 != 0)
        clt__json_buf_puts(h, " ");
    if (h->failed)
        CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory for the header", path);
fail:
    return st;
}

clt_status clt_st_write(const char *path, const clt_st_tensor *tensors, int n,
                        const char *const *meta_keys, const char *const *meta_values, int nmeta)
{
    clt_status st = CLT_OK;
    clt__json_buf h = {0};
    const char **names = NULL;
    clt_outfile *f = NULL;
    unsigned char len8[8];

    CLT_TRY(check_write_args(path, tensors, n, meta_keys, meta_values, nmeta));
    CLT_ALLOC(NULL, names, (size_t)(n > nmeta ? n : nmeta));
    for (int i = 0; i < n; i++)
        names[i] = tensors[i].name;
    CLT_TRY(check_unique(path, names, n, "tensor name"));
    for (int i = 0; i < nmeta; i++)
        names[i] = meta_keys[i];
    CLT_TRY(check_unique(path, names, nmeta, "metadata key"));
    CLT_TRY(build_header(&h, path, tensors, n, meta_keys, meta_values, nmeta));
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));

    CLT_TRY(clt_outfile_open(&f, path)); /* refuses non-regular files, follows symlinks */
    CLT_TRY(clt_outfile_write(f, len8, 8));
    CLT_TRY(clt_outfile_write(f, h.data, h.len));
    for (int i = 0; i < n; i++)
        CLT_TRY(clt_outfile_write(f, tensors[i].data, tensors[i].nbytes));
    st = clt_outfile_commit(f); /* frees f */
    f = NULL;
fail:
    clt_outfile_discard(f);
    free(names);
    clt__json_buf_free(&h);
    return st;
}

/* ---- reading ---- */

/* Opens `path` for reading: without blocking (a FIFO without a writer cannot hold the open),
 * and anything but a regular file refused before a byte is read. */
static clt_status open_regular(const char *path, int *fd_out, size_t *size_out)
{
    clt_status st = CLT_OK;
    uint64_t size = 0;
    int fd = -1;
    CLT_TRY(clt__open_regular(path, "a checkpoint is read from a file", &fd, &size));
    if (size > SIZE_MAX / 2)
        CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: file too large to load", path);
    *size_out = (size_t)size;
    *fd_out = fd;
    fd = -1;
fail:
    if (fd >= 0) close(fd);
    return st;
}

/* Reads exactly n bytes at offset `at`. */
static clt_status read_at(int fd, const char *path, void *buf, size_t n, uint64_t at)
{
    unsigned char *p = buf;
    size_t have = 0;
    while (have < n) {
        size_t ask = n - have < ((size_t)1 << 30) ? n - have : ((size_t)1 << 30);
        ssize_t got = pread(fd, p + have, ask, (off_t)(at + have));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return clt__fail(NULL, CLT_ERR_IO, "%s: read failed: %s", path,
                                      strerror(errno));
        if (got == 0)
            return clt__fail(NULL, CLT_ERR_IO, "%s: the file shrank while it was read", path);
        have += (size_t)got;
    }
    return CLT_OK;
}

/* The integer at arr->items[i], if it is a non-negative integer written as one (not 32.0). */
static bool get_uint(const clt__json *arr, size_t i, int64_t *out)
{
    const clt__json *v = &arr->items[i];
    if (v->type != CLT__JSON_NUMBER || !v->int_literal || v->integer < 0) return false;
    *out = v->integer;
    return true;
}

static clt_status parse_entry(clt_st_tensor *t, const char *path, const clt__json *e,
                              const char *key, size_t key_len, size_t data_len,
                              uint64_t *begin_out)
{
    clt_status st = CLT_OK;
    char nm[80], buf[80], shp[96];
    const clt__json *dt = clt__json_get(e, "dtype"), *sh = clt__json_get(e, "shape"),
                    *off = clt__json_get(e, "data_offsets");
    int d = -1;
    int64_t b = 0, end = 0;
    uint64_t need = 0;

    shown(key, key_len, nm);
    if (key_len >= CLT_ST_NAME_MAX)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: tensor \"%s\": name of %zu bytes is too long (at most %d)", path, nm, key_len,
                 CLT_ST_NAME_MAX - 1);
    if (strlen(key) != key_len)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": name contains a NUL character", path,
                 nm);
    memcpy(t->name, key, key_len + 1);
    if (e->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": entry is a JSON %s, not an object", path,
                 nm, clt__json_type_name(e->type));
    if (!dt || !sh || !off) {
        const char *missing = !dt ? "dtype" : !sh ? "shape" : "data_offsets";
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": entry has no \"%s\"", path, nm, missing);
    }
    if (dt->type != CLT__JSON_STRING)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": \"dtype\" is a JSON %s, not a string",
                 path, nm, clt__json_type_name(dt->type));
    for (size_t i = 0; i < NDTYPES; i++)
        if (strlen(dtypes[i].name) == dt->len && memcmp(dtypes[i].name, dt->str, dt->len) == 0)
            d = (int)i;
    if (d < 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: tensor \"%s\": unsupported dtype \"%s\" (cltrain reads F32, F16, BF16, "
                 "I32, U8, I64)",
                 path, nm, shown(dt->str, dt->len, buf));
    t->dtype = dtypes[d].dtype;
    if (sh->type != CLT__JSON_ARRAY)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": \"shape\" is a JSON %s, not an array",
                 path, nm, clt__json_type_name(sh->type));
    if (sh->n > CLT_MAX_DIMS)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: tensor \"%s\": shape has %zu dimensions, at most %d are supported", path, nm,
                 sh->n, CLT_MAX_DIMS);
    t->ndim = (int)sh->n;
    for (int i = 0; i < CLT_MAX_DIMS; i++)
        t->shape[i] = 1;
    for (size_t i = 0; i < sh->n; i++) {
        const clt__json *v = &sh->items[i];
        if (v->type == CLT__JSON_NUMBER && v->is_int && v->integer < 0)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": shape[%zu] is negative (%lld)", path,
                     nm, i, (long long)v->integer);
        if (!get_uint(sh, i, &t->shape[i]))
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: tensor \"%s\": shape[%zu] is not a non-negative integer", path, nm, i);
    }
    if (off->type != CLT__JSON_ARRAY || off->n != 2 || !get_uint(off, 0, &b) ||
        !get_uint(off, 1, &end))
        CLT_FAIL(
            NULL, CLT_ERR_FORMAT,
            "%s: tensor \"%s\": \"data_offsets\" must be [begin, end] of non-negative integers",
            path, nm);
    if (b > end || (uint64_t)end > data_len)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: tensor \"%s\": data_offsets [%lld, %lld] are not inside the data section "
                 "(%zu bytes)",
                 path, nm, (long long)b, (long long)end, data_len);
    shape_text(t->shape, t->ndim, shp);
    if (!shape_bytes(t->shape, t->ndim, dtypes[d].size, &need))
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\": %s shape %s is too large", path, nm,
                 dtypes[d].name, shp);
    if (need != (uint64_t)(end - b))
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: tensor \"%s\": data_offsets span %lld bytes but %s shape %s needs %llu bytes",
                 path, nm, (long long)(end - b), dtypes[d].name, shp, (unsigned long long)need);
    t->data = NULL; /* set once the data section is read */
    t->nbytes = (size_t)(end - b);
    *begin_out = (uint64_t)b;
fail:
    return st;
}

typedef struct span {
    uint64_t begin, end;
    int index;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static clt_status parse_meta(clt_st_file *f, const char *path, const clt__json *m)
{
    clt_status st = CLT_OK;
    char nm[80];
    if (m->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: \"" META_KEY "\" is a JSON %s, not an object", path,
                 clt__json_type_name(m->type));
    CLT_ALLOC(NULL, f->meta, m->n);
    CLT_ALLOC(NULL, f->meta_by_key, m->n);
    for (size_t i = 0; i < m->n; i++) {
        const clt__json *v = &m->items[i];
        shown(m->keys[i], m->key_lens[i], nm);
        if (v->type != CLT__JSON_STRING)
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: \"" META_KEY "\" value of \"%s\" is a JSON %s, not a string", path, nm,
                     clt__json_type_name(v->type));
        if (strlen(m->keys[i]) != m->key_lens[i] || strlen(v->str) != v->len)
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: \"" META_KEY "\" entry \"%s\" contains a NUL character", path, nm);
        CLT_ALLOC(NULL, f->meta[i].key, m->key_lens[i] + 1);
        memcpy(f->meta[i].key, m->keys[i], m->key_lens[i] + 1);
        f->nmeta++; /* from here on close() frees the pair */
        CLT_ALLOC(NULL, f->meta[i].value, v->len + 1);
        memcpy(f->meta[i].value, v->str, v->len + 1);
        f->meta_by_key[i] = &f->meta[i];
    }
    qsort(f->meta_by_key, (size_t)f->nmeta, sizeof *f->meta_by_key, cmp_meta_ptr);
    for (int i = 1; i < f->nmeta; i++)
        if (strcmp(f->meta_by_key[i - 1]->key, f->meta_by_key[i]->key) == 0)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: duplicate \"" META_KEY "\" key \"%s\"", path,
                     shown(f->meta_by_key[i]->key, strlen(f->meta_by_key[i]->key), nm));
fail:
    return st;
}

clt_status clt_st_open(clt_st_file **out, const char *path)
{
    clt_status st = CLT_OK;
    clt_st_file *f = NULL;
    clt__json *root = NULL;
    clt__json_error jerr = {0, ""};
    span *spans = NULL;
    char *header = NULL;
    unsigned char len8[8];
    int fd = -1;
    size_t size = 0, hlen = 0, data_len;
    uint64_t hlen64 = 0, data_end = 0;
    const clt__json *meta = NULL;
    char nm[80], nm2[80];

    if (!out || !path) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_st_open: NULL out or path");
    *out = NULL;
    if (!little_endian())
        CLT_FAIL(NULL, CLT_ERR_UNSUPPORTED, "%s: safetensors needs a little-endian host", path);
    CLT_ALLOC(NULL, f, 1);
    CLT_TRY(open_regular(path, &fd, &size));
    if (size < 8)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: file is %zu bytes, shorter than 8 bytes (the header length field)", path,
                 size);
    CLT_TRY(read_at(fd, path, len8, 8, 0));
    for (int i = 0; i < 8; i++)
        hlen64 |= (uint64_t)len8[i] << (8 * i);
    if (hlen64 > size - 8)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                 (unsigned long long)hlen64, size);
    if (hlen64 > CLT_ST_HEADER_MAX)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: header length %llu is over the %d bytes cltrain reads",
                 path, (unsigned long long)hlen64, CLT_ST_HEADER_MAX);
    hlen = (size_t)hlen64;
    data_len = size - 8 - hlen;
    CLT_ALLOC(NULL, header, hlen ? hlen : 1);
    CLT_TRY(read_at(fd, path, header, hlen, 8));

    st = clt__json_parse(&root, header, hlen, &jerr);
    if (st == CLT_ERR_HOST_MEMORY)
        CLT_FAIL(NULL, st, "%s: out of host memory parsing the header", path);
    if (st != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: malformed header JSON at byte %zu of the file: %s",
                 path, jerr.pos + 8, jerr.msg);
    if (root->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: header is a JSON %s, not an object", path,
                 clt__json_type_name(root->type));
    if (root->n > INT32_MAX) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: too many tensors", path);

    CLT_ALLOC(NULL, f->tensors, root->n);
    CLT_ALLOC(NULL, f->by_name, root->n);
    CLT_ALLOC(NULL, spans, root->n);
    for (size_t i = 0; i < root->n; i++) {
        if (root->key_lens[i] == strlen(META_KEY) && strcmp(root->keys[i], META_KEY) == 0) {
            if (meta) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: duplicate \"" META_KEY "\"", path);
            meta = &root->items[i];
            continue;
        }
        clt_st_tensor *t = &f->tensors[f->count];
        CLT_TRY(parse_entry(t, path, &root->items[i], root->keys[i], root->key_lens[i], data_len,
                            &spans[f->count].begin));
        spans[f->count].end = spans[f->count].begin + t->nbytes;
        spans[f->count].index = f->count;
        if (spans[f->count].end > data_end) data_end = spans[f->count].end;
        f->by_name[f->count] = t;
        f->count++;
    }
    if (meta) CLT_TRY(parse_meta(f, path, meta));

    qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, cmp_tensor_ptr);
    for (int i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: duplicate tensor name \"%s\"", path,
                     shown(f->by_name[i]->name, strlen(f->by_name[i]->name), nm));
    /* Overlap: after sorting by begin, every non-empty span starts at or after the furthest
     * end seen so far. */
    qsort(spans, (size_t)f->count, sizeof *spans, cmp_span);
    int last = -1; /* index into spans of the non-empty span reaching furthest */
    for (int i = 0; i < f->count; i++) {
        if (spans[i].begin == spans[i].end) continue;
        if (last >= 0 && spans[i].begin < spans[last].end) {
            const clt_st_tensor *a = &f->tensors[spans[last].index],
                                *b = &f->tensors[spans[i].index];
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: tensors \"%s\" and \"%s\" overlap in the data section", path,
                     shown(a->name, strlen(a->name), nm), shown(b->name, strlen(b->name), nm2));
        }
        if (last < 0 || spans[i].end > spans[last].end) last = i;
    }
    /* The data section ends with the last tensor: anything after it is refused before it is
     * read (a file padded to gigabytes is not loaded). */
    if (data_end != data_len)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: the file is %zu bytes, but its header accounts for %llu (8 + %zu header "
                 "bytes + %llu bytes of tensor data): %zu bytes of trailing data",
                 path, size, (unsigned long long)(8 + hlen + data_end), hlen,
                 (unsigned long long)data_end, data_len - (size_t)data_end);
    CLT_ALLOC(NULL, f->data, data_len ? data_len : 1);
    CLT_TRY(read_at(fd, path, f->data, data_len, 8 + (uint64_t)hlen));
    for (int i = 0; i < f->count; i++)
        f->tensors[spans[i].index].data = f->data + spans[i].begin;
    *out = f;
    f = NULL;
fail:
    if (fd >= 0) close(fd);
    free(header);
    free(spans);
    clt__json_free(root);
    clt_st_close(f);
    return st;
}

void clt_st_close(clt_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    free(f->meta_by_key);
    free(f->by_name);
    free(f->tensors);
    free(f->data);
    free(f);
}

int clt_st_count(const clt_st_file *f)
{
    CLT_ASSERT(f);
    return f->count;
}

const clt_st_tensor *clt_st_get(const clt_st_file *f, int i)
{
    CLT_ASSERT(f);
    return (i >= 0 && i < f->count) ? &f->tensors[i] : NULL;
}

const clt_st_tensor *clt_st_find(const clt_st_file *f, const char *name)
{
    CLT_ASSERT(f && name);
    int lo = 0, hi = f->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const char *clt_st_meta(const clt_st_file *f, const char *key)
{
    CLT_ASSERT(f && key);
    int lo = 0, hi = f->nmeta - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->meta_by_key[mid]->key, key);
        if (c == 0) return f->meta_by_key[mid]->value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int clt_st_meta_count(const clt_st_file *f)
{
    CLT_ASSERT(f);
    return f->nmeta;
}

const char *clt_st_meta_key(const clt_st_file *f, int i)
{
    CLT_ASSERT(f);
    return (i >= 0 && i < f->nmeta) ? f->meta[i].key : NULL;
}
