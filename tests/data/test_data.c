/* Unit tests of the data readers: IDX files written here (gzip and raw) read back exactly,
 * every malformed input rejected with a message naming file and fault, CSV header detection,
 * tasks and label columns, the spec string, and statistics against a double reference.
 * Each test writes its files into a fresh temporary folder; no OpenCL is used. The real
 * Fashion-MNIST files are read by test_data_fashion.c, a program of its own that skips when
 * they are missing. */
#include "common.h"
#include "cltrain/data.h"

#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[64];      /* this test's temporary folder */
static char g_path[4][128]; /* scratch paths inside it */
static uint64_t g_rng;
static unsigned g_seed;

/* ---- fixture and helpers ---------------------------------------------------------------- */

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/clt_data_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    g_seed = (unsigned)time(NULL) ^ (unsigned)getpid() << 8;
    g_rng = 0x9e3779b97f4a7c15ull ^ g_seed;
}

static void teardown(void)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[512];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(g_dir);
}

static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

static const char *in_dir(int slot, const char *name)
{
    snprintf(g_path[slot], sizeof g_path[slot], "%s/%s", g_dir, name);
    return g_path[slot];
}

static void write_bytes(const char *path, int gz, const void *buf, size_t len)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        if (len) ck_assert_int_eq(gzwrite(f, buf, (unsigned)len), (int)len);
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
        ck_assert_int_eq(fclose(f), 0);
    }
}

static void write_text(const char *path, const char *text)
{
    write_bytes(path, 0, text, strlen(text));
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* An IDX file: magic, ndims sizes, then `len` bytes of payload (may differ from the header's
 * promise, to make broken files). Returns the malloc'ed bytes; *total gets their count. */
static unsigned char *idx_bytes(uint32_t magic, int ndims, const uint32_t *dims,
                                const uint8_t *payload, size_t len, size_t *total)
{
    size_t head = 4 + 4 * (size_t)ndims;
    unsigned char *b = malloc(head + len + 1);
    ck_assert_ptr_nonnull(b);
    put_be32(b, magic);
    for (int i = 0; i < ndims; i++)
        put_be32(b + 4 + 4 * i, dims[i]);
    if (len) memcpy(b + head, payload, len);
    *total = head + len;
    return b;
}

static void write_idx(const char *path, int gz, uint32_t magic, int ndims, const uint32_t *dims,
                      const uint8_t *payload, size_t len)
{
    size_t total = 0;
    unsigned char *b = idx_bytes(magic, ndims, dims, payload, len, &total);
    write_bytes(path, gz, b, total);
    free(b);
}

/* Random images (values 1..255) and labels (0..max_label, max_label present; every label when
 * n > max_label). */
static void random_set(size_t n, size_t pix, uint8_t *images, uint8_t *labels, int max_label)
{
    for (size_t i = 0; i < n * pix; i++)
        images[i] = (uint8_t)(1 + rnd() % 255);
    for (size_t i = 0; i < n; i++)
        labels[i] = (uint8_t)(rnd() % (unsigned)(max_label + 1));
    labels[rnd() % n] = (uint8_t)max_label;
    for (size_t c = 0; c <= (size_t)max_label && (size_t)max_label < n; c++)
        labels[c] = (uint8_t)c; /* every class present: inferred classes must all appear */
}

/* A matching, valid image/label pair in slots 0 and 1. */
static void write_pair(const char *img, const char *lab, int gz, uint32_t n, uint32_t rows,
                       uint32_t cols, uint8_t *images, uint8_t *labels, int max_label)
{
    uint32_t idims[3] = {n, rows, cols}, ldims[1] = {n};
    random_set(n, (size_t)rows * cols, images, labels, max_label);
    write_idx(img, gz, 0x803, 3, idims, images, (size_t)n * rows * cols);
    write_idx(lab, gz, 0x801, 1, ldims, labels, n);
}

#define ASSERT_MSG_HAS(needle)                                                                     \
    ck_assert_msg(strstr(clt_last_errmsg(), (needle)) != NULL, "message '%s' lacks '%s'",          \
                  clt_last_errmsg(), (needle))

/* ---- IDX ----------------------------------------------------------------------------------- */

START_TEST(idx_roundtrip)
{
    int gz = _i;
    enum { N = 17, R = 5, C = 3 };
    uint8_t images[N * R * C], labels[N];
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, gz, N, R, C, images, labels, 6);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_OK);
    ck_assert_uint_eq(d.n, N);
    ck_assert_uint_eq(d.features, R * C);
    ck_assert_int_eq(d.sample_ndim, 3);
    ck_assert_uint_eq(d.sample_shape[0], 1);
    ck_assert_uint_eq(d.sample_shape[1], R);
    ck_assert_uint_eq(d.sample_shape[2], C);
    ck_assert_int_eq(d.classes, 7);
    ck_assert_int_eq(d.task, CLT_TASK_CLASSIFICATION);
    ck_assert_ptr_nonnull(d.u8);
    ck_assert_ptr_null(d.f32);
    ck_assert_ptr_null(d.targets);
    ck_assert_float_eq(d.input_scale, 1.0f / 255.0f);
    ck_assert_str_eq(d.source, img);
    ck_assert_msg(memcmp(d.u8, images, sizeof images) == 0, "pixels differ (seed %u)", g_seed);
    for (size_t i = 0; i < N; i++)
        ck_assert_int_eq(d.labels[i], labels[i]);
    ck_assert_float_eq(clt_dataset_value(&d, 3, 7), images[3 * R * C + 7] * (1.0f / 255.0f));
    clt_dataset_free(&d);
    ck_assert_ptr_null(d.u8);
    ck_assert_uint_eq(d.n, 0);
    clt_dataset_free(&d); /* a zeroed struct and NULL are fine */
    clt_dataset_free(NULL);
}
END_TEST

START_TEST(idx_wrong_magic)
{
    enum { N = 4 };
    uint8_t images[N * 4], labels[N];
    clt_dataset d;
    uint32_t dims[3] = {N, 2, 2};
    const char *img = in_dir(0, "train-images-idx3-ubyte.gz"), *lab = in_dir(1, "lab");
    write_pair(img, lab, 1, N, 2, 2, images, labels, 3);
    write_idx(img, 1, 0x802, 3, dims, images, sizeof images);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("train-images-idx3-ubyte.gz: wrong magic 0x00000802, expected 0x00000803 "
                   "(u8 images, 3 dims)");
    ck_assert_ptr_null(d.u8);
    /* Images and labels swapped. */
    write_idx(img, 1, 0x803, 3, dims, images, sizeof images);
    ck_assert_int_eq(clt_data_load_idx(lab, img, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("wrong magic 0x00000801, expected 0x00000803");
    ck_assert_int_eq(clt_data_load_idx(img, img, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("wrong magic 0x00000803, expected 0x00000801 (u8 labels, 1 dim)");
}
END_TEST

START_TEST(idx_truncated_pixels)
{
    int gz = _i;
    enum { N = 17, R = 5, C = 3 };
    uint8_t images[N * R * C], labels[N];
    uint32_t dims[3] = {N, R, C};
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, gz, N, R, C, images, labels, 2);
    write_idx(img, gz, 0x803, 3, dims, images, 100);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS(img);
    ASSERT_MSG_HAS(": truncated: header promises 255 bytes of pixels, file has 100");
    /* Labels short by one. */
    write_idx(img, gz, 0x803, 3, dims, images, sizeof images);
    write_idx(lab, gz, 0x801, 1, dims, labels, N - 1);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("truncated: header promises 17 bytes of labels, file has 16");
}
END_TEST

START_TEST(idx_truncated_header)
{
    int gz = _i;
    size_t total = 0;
    uint32_t dims[3] = {3, 2, 2};
    unsigned char *b = idx_bytes(0x803, 3, dims, NULL, 0, &total);
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_bytes(img, gz, b, 10);
    write_idx(lab, gz, 0x801, 1, dims, (const uint8_t *)"\0\1\2", 3);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("truncated header: 10 of 16 bytes");
    write_bytes(img, gz, b, 2); /* too short even for the magic */
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("truncated header: 2 of 16 bytes");
    write_bytes(img, gz, b, 0);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("truncated header: 0 of 16 bytes");
    free(b);
}
END_TEST

START_TEST(idx_trailing_garbage)
{
    int gz = _i;
    enum { N = 6 };
    uint8_t images[N * 4 + 3], labels[N];
    uint32_t dims[3] = {N, 2, 2};
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, gz, N, 2, 2, images, labels, 1);
    write_idx(img, gz, 0x803, 3, dims, images, sizeof images); /* 3 bytes more than promised */
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img: 3 bytes of trailing data after the 24 bytes of pixels");
}
END_TEST

START_TEST(idx_bad_header_sizes)
{
    uint8_t px[4] = {1, 2, 3, 4};
    uint32_t zero[3] = {1, 0, 4}, huge[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu};
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    uint32_t ldims[1] = {1};
    write_idx(lab, 0, 0x801, 1, ldims, px, 1);
    write_idx(img, 0, 0x803, 3, zero, px, 0);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("size 0 in dimension 2");
    /* Headers beyond cltrain's limits are refused from the header alone. */
    write_idx(img, 0, 0x803, 3, huge, px, 4);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img: header declares size 4294967295 in dimension 1 of 3, above cltrain's "
                   "limit of 16777216");
    huge[0] = 100000;
    huge[1] = huge[2] = 1000; /* 1e11 bytes */
    write_idx(img, 0, 0x803, 3, huge, px, 4);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img: header declares 100000 x 1000 x 1000 pixels, more than cltrain's limit "
                   "of 17179869184 bytes");
    /* Each size at most 2^24, whatever the total. */
    huge[0] = 1;
    huge[1] = (1u << 24) + 1;
    huge[2] = 1;
    write_idx(img, 0, 0x803, 3, huge, px, 4);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img: header declares size 16777217 in dimension 2 of 3, above cltrain's limit");
    huge[0] = 0xffffffffu;
    write_idx(lab, 0, 0x801, 1, huge, px, 1);
    write_idx(img, 0, 0x803, 3, (const uint32_t[3]){1, 1, 1}, px, 1);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("lab: header declares size 4294967295 in dimension 1 of 1");
    /* Within the limits, a promise far beyond the data fails as truncated, without trying to
     * allocate it. */
    huge[0] = 1;
    huge[1] = huge[2] = 4096; /* 16 MiB */
    write_idx(lab, 0, 0x801, 1, ldims, px, 1);
    write_idx(img, 0, 0x803, 3, huge, px, 4);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("header promises 16777216 bytes of pixels, file has 4");
}
END_TEST

/* Peak resident set of this process, in bytes. */
static uint64_t peak_rss(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return (uint64_t)ru.ru_maxrss * 1024; /* KiB on Linux */
}

/* A gzip member appended to `path` ("wb1" or "ab1"): an IDX header of `ndims` sizes (when
 * dims is non-NULL) then `zeros` zero bytes, written in 1 MiB pieces (fast at level 1 and
 * tiny once compressed: 128 MiB of zeros is about 128 KB). */
static void write_gz_zeros(const char *path, const char *mode, uint32_t magic, int ndims,
                           const uint32_t *dims, size_t zeros)
{
    static const unsigned char mib[1 << 20];
    gzFile f = gzopen(path, mode);
    ck_assert_ptr_nonnull(f);
    if (dims) {
        size_t total = 0;
        unsigned char *h = idx_bytes(magic, ndims, dims, NULL, 0, &total);
        ck_assert_int_eq(gzwrite(f, h, (unsigned)total), (int)total);
        free(h);
    }
    for (size_t done = 0; done < zeros;) {
        size_t n = zeros - done < sizeof mib ? zeros - done : sizeof mib;
        ck_assert_int_eq(gzwrite(f, mib, (unsigned)n), (int)n);
        done += n;
    }
    ck_assert_int_eq(gzclose(f), Z_OK);
}

#define HUGE_ZEROS (128u << 20) /* what the lying images file really inflates to */
#define RSS_BUDGET (64u << 20)  /* what refusing it may cost */

/* Issue 12: an IDX gzip whose header promises 512 x 2048 x 2048 images (2 GiB) allocated
 * gigabytes before failing. With 10 labels the count mismatch is found from the labels file
 * and the images header alone, before the images are decompressed (before the fix: 128 MiB
 * inflated and held, then "truncated"). */
START_TEST(idx_huge_promise_count_first)
{
    uint32_t idims[3] = {512, 2048, 2048}, ldims[1] = {10};
    uint8_t labels[10] = {0};
    clt_dataset d;
    const char *img = in_dir(0, "img.gz"), *lab = in_dir(1, "lab.gz");
    write_gz_zeros(img, "wb1", 0x803, 3, idims, HUGE_ZEROS);
    write_idx(lab, 1, 0x801, 1, ldims, labels, sizeof labels);
    uint64_t before = peak_rss();
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    uint64_t grew = peak_rss() - before;
    ASSERT_MSG_HAS("img.gz: 512 images, but ");
    ASSERT_MSG_HAS("lab.gz: 10 labels");
    ck_assert_msg(grew < RSS_BUDGET, "refusing it raised the peak RSS by %llu MiB",
                  (unsigned long long)(grew >> 20));
    ck_assert_ptr_null(d.u8);
}
END_TEST

/* The same lying file with a matching label count: the gzip trailer (ISIZE: 128 MiB + 16, not
 * 2 GiB + 16) refuses it before decompressing. */
START_TEST(idx_huge_promise_gzip_trailer)
{
    uint32_t idims[3] = {512, 2048, 2048}, ldims[1] = {512};
    uint8_t labels[512] = {0};
    clt_dataset d;
    const char *img = in_dir(0, "img.gz"), *lab = in_dir(1, "lab.gz");
    write_gz_zeros(img, "wb1", 0x803, 3, idims, HUGE_ZEROS);
    write_idx(lab, 1, 0x801, 1, ldims, labels, sizeof labels);
    uint64_t before = peak_rss();
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    uint64_t grew = peak_rss() - before;
    ASSERT_MSG_HAS("img.gz: truncated or damaged: the header promises 2147483648 bytes of pixels");
    ASSERT_MSG_HAS("the gzip trailer says the file decompresses to 134217744 bytes");
    ck_assert_msg(grew < RSS_BUDGET, "refusing it raised the peak RSS by %llu MiB",
                  (unsigned long long)(grew >> 20));
    /* A trailer that matches only mod 2^32 (4 GiB promised, nothing there) still fails exactly
     * while reading, as truncated. */
    idims[0] = 1;
    idims[1] = idims[2] = 65536;
    ldims[0] = 1;
    write_gz_zeros(img, "wb1", 0x803, 3, idims, 0);
    write_idx(lab, 1, 0x801, 1, ldims, labels, 1);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img.gz: truncated: header promises 4294967296 bytes of pixels, file has 0");
}
END_TEST

/* A valid file in two gzip members (as bgzip or `cat a.gz b.gz` make) has the last member's
 * length in its trailer; the early check must not refuse it. 70 MiB, above the 64 MiB from
 * which the trailer is checked. */
START_TEST(idx_gzip_multi_member)
{
    uint32_t idims[3] = {1, 8192, 8960}, ldims[1] = {1};
    uint8_t labels[1] = {0};
    clt_dataset d;
    const char *img = in_dir(0, "img.gz"), *lab = in_dir(1, "lab.gz");
    write_gz_zeros(img, "wb1", 0x803, 3, idims, 40u << 20);
    write_gz_zeros(img, "ab1", 0, 0, NULL, (size_t)8192 * 8960 - (40u << 20));
    write_idx(lab, 1, 0x801, 1, ldims, labels, 1);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_OK);
    ck_assert_uint_eq(d.n, 1);
    ck_assert_uint_eq(d.features, (size_t)8192 * 8960);
    clt_dataset_free(&d);
}
END_TEST

START_TEST(idx_count_mismatch)
{
    enum { N = 17 };
    uint8_t images[N * 4], labels[N];
    uint32_t ldims[1] = {N - 1};
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, 1, N, 2, 2, images, labels, 4);
    write_idx(lab, 1, 0x801, 1, ldims, labels, N - 1);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img: 17 images, but ");
    ASSERT_MSG_HAS("lab: 16 labels");
    ck_assert_ptr_null(d.u8);
    ck_assert_ptr_null(d.labels);
}
END_TEST

START_TEST(idx_label_out_of_range)
{
    enum { N = 9 };
    uint8_t images[N * 4], labels[N];
    struct clt_data_params p = clt_data_default_params();
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, 0, N, 2, 2, images, labels, 6);
    p.classes = 6;
    ck_assert_int_eq(clt_data_load_idx(img, lab, &p, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("lab: label 6 at index");
    ASSERT_MSG_HAS("is not below the 6 classes");
    p.classes = 10;
    ck_assert_int_eq(clt_data_load_idx(img, lab, &p, &d), CLT_OK);
    ck_assert_int_eq(d.classes, 10);
    clt_dataset_free(&d);
    p.classes = -1;
    ck_assert_int_eq(clt_data_load_idx(img, lab, &p, &d), CLT_ERR_INVALID_ARG);
}
END_TEST

START_TEST(idx_gzip_damaged)
{
    enum { N = 50 };
    uint8_t images[N * 64], labels[N];
    clt_dataset d;
    struct stat sb;
    const char *img = in_dir(0, "img.gz"), *lab = in_dir(1, "lab.gz");
    FILE *f;
    write_pair(img, lab, 1, N, 8, 8, images, labels, 9);
    ck_assert_int_eq(stat(img, &sb), 0);
    /* Cut the compressed stream in the middle. */
    ck_assert_int_eq(truncate(img, sb.st_size / 2), 0);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img.gz: truncated");
    /* Cut only the 8-byte gzip trailer: all data present, checksum missing. */
    write_pair(img, lab, 1, N, 8, 8, images, labels, 9);
    ck_assert_int_eq(stat(img, &sb), 0);
    ck_assert_int_eq(truncate(img, sb.st_size - 4), 0);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("img.gz: truncated");
    /* Flip bytes inside the deflate data. */
    write_pair(img, lab, 1, N, 8, 8, images, labels, 9);
    ck_assert_int_eq(stat(img, &sb), 0);
    f = fopen(img, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 20, SEEK_SET);
    for (int i = 0; i < 64; i++)
        fputc(0xff, f);
    fclose(f);
    ck_assert_int_ne(clt_data_load_idx(img, lab, NULL, &d), CLT_OK);
    ASSERT_MSG_HAS("img.gz: ");
    ck_assert_ptr_null(d.u8);
}
END_TEST

START_TEST(idx_missing_file)
{
    clt_dataset d;
    const char *img = in_dir(0, "nope"), *lab = in_dir(1, "lab");
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_ERR_IO);
    ASSERT_MSG_HAS(img);
    ASSERT_MSG_HAS("cannot open");
}
END_TEST

/* ---- the spec string ------------------------------------------------------------------------ */

static void write_idx_folder(int gz, uint32_t test_rows)
{
    enum { NTR = 20, NTE = 7 };
    uint8_t images[NTR * 16], labels[NTR];
    const char *sfx = gz ? ".gz" : "";
    char a[64], b[64];
    snprintf(a, sizeof a, "train-images-idx3-ubyte%s", sfx);
    snprintf(b, sizeof b, "train-labels-idx1-ubyte%s", sfx);
    write_pair(in_dir(0, a), in_dir(1, b), gz, NTR, 4, 4, images, labels, 4);
    snprintf(a, sizeof a, "t10k-images-idx3-ubyte%s", sfx);
    snprintf(b, sizeof b, "t10k-labels-idx1-ubyte%s", sfx);
    write_pair(in_dir(0, a), in_dir(1, b), gz, NTE, test_rows, 16 / test_rows, images, labels, 8);
}

START_TEST(open_idx_folder)
{
    int gz = _i;
    char spec[128];
    clt_dataset tr, te;
    write_idx_folder(gz, 4);
    snprintf(spec, sizeof spec, "idx:%s", g_dir);
    /* Train labels reach 4, test labels 8: inferred classes 9, but 5-8 never appear in the
     * training split, an error (issue 12); with the classes given, 9 for both. */
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("train-images-idx3-ubyte");
    ASSERT_MSG_HAS("4 of them never appear in the training split (5, 6, 7, 8)");
    struct clt_data_params dp = clt_data_default_params();
    dp.classes = 9;
    ck_assert_int_eq(clt_data_open(spec, &dp, &tr, &te), CLT_OK);
    ck_assert_uint_eq(tr.n, 20);
    ck_assert_uint_eq(te.n, 7);
    ck_assert_uint_eq(tr.features, 16);
    ck_assert_uint_eq(te.features, 16);
    ck_assert_int_eq(tr.classes, 9);
    ck_assert_int_eq(te.classes, 9);
    ck_assert_ptr_nonnull(strstr(tr.source, "train-images-idx3-ubyte"));
    ck_assert_ptr_nonnull(strstr(te.source, "t10k-images-idx3-ubyte"));
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    /* Training split only. */
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, NULL), CLT_OK);
    ck_assert_int_eq(tr.classes, 5);
    clt_dataset_free(&tr);
}
END_TEST

/* The named sets are looked for under $CLTRAIN_DATA_DIR: here g_dir/mnist is a link to g_dir.
 * A missing folder is named in the error together with the variable. */
START_TEST(open_named_data_dir)
{
    char dir[160], saved[4096];
    const char *prev = getenv("CLTRAIN_DATA_DIR"); /* restored at the end (CK_FORK=no) */
    bool had = prev != NULL;
    clt_dataset tr, te;
    if (had) snprintf(saved, sizeof saved, "%s", prev);
    write_idx_folder(1, 4);
    ck_assert_int_eq(symlink(g_dir, in_dir(0, "mnist")), 0);
    ck_assert_int_eq(setenv("CLTRAIN_DATA_DIR", g_dir, 1), 0);
    ck_assert_int_eq(clt_data_open("mnist", NULL, &tr, &te), CLT_OK);
    ck_assert_uint_eq(tr.n, 20);
    ck_assert_uint_eq(te.n, 7);
    ck_assert_int_eq(tr.classes, 10);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    snprintf(dir, sizeof dir, "%s/absent", g_dir);
    ck_assert_int_eq(setenv("CLTRAIN_DATA_DIR", dir, 1), 0);
    ck_assert_int_eq(clt_data_open("fashion-mnist", NULL, &tr, &te), CLT_ERR_IO);
    snprintf(dir, sizeof dir, "%s/absent/fashion-mnist: no such folder", g_dir);
    ASSERT_MSG_HAS(dir);
    ASSERT_MSG_HAS("CLTRAIN_DATA_DIR");
    ck_assert_int_eq(had ? setenv("CLTRAIN_DATA_DIR", saved, 1) : unsetenv("CLTRAIN_DATA_DIR"), 0);
}
END_TEST

START_TEST(open_idx_errors)
{
    char spec[160];
    clt_dataset tr, te;
    struct clt_data_params p = clt_data_default_params();
    /* Missing folder. */
    snprintf(spec, sizeof spec, "idx:%s/absent", g_dir);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_IO);
    ASSERT_MSG_HAS(spec + 4);
    ASSERT_MSG_HAS("no such folder");
    /* Test images of another shape (2x8 instead of 4x4, same feature count). */
    write_idx_folder(1, 2);
    snprintf(spec, sizeof spec, "idx:%s", g_dir);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("(1, 4, 4)");
    ASSERT_MSG_HAS("(1, 2, 8)");
    ck_assert_ptr_null(tr.u8);
    ck_assert_ptr_null(te.u8);
    /* A missing file is named. */
    unlink(in_dir(0, "t10k-labels-idx1-ubyte.gz"));
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_IO);
    ASSERT_MSG_HAS("t10k-labels-idx1-ubyte");
    ASSERT_MSG_HAS(g_dir);
    /* Regression on IDX, unknown specs. */
    p.task = CLT_TASK_REGRESSION;
    ck_assert_int_eq(clt_data_open(spec, &p, &tr, &te), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_data_open("imagenet", NULL, &tr, &te), CLT_ERR_INVALID_ARG);
    ASSERT_MSG_HAS("unknown data set 'imagenet'");
    ck_assert_int_eq(clt_data_open("idx:", NULL, &tr, &te), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_data_open("csv:", NULL, &tr, &te), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_data_open(NULL, NULL, &tr, &te), CLT_ERR_INVALID_ARG);
}
END_TEST

/* ---- CSV ------------------------------------------------------------------------------------ */

START_TEST(csv_header)
{
    clt_dataset d;
    const char *p = in_dir(0, "h.csv");
    write_text(p, "sepal length, \"width, in cm\" ,label\n1,2,0\n3.5,-4e-1,2\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_uint_eq(d.features, 2);
    ck_assert_int_eq(d.sample_ndim, 1);
    ck_assert_uint_eq(d.sample_shape[0], 2);
    ck_assert_ptr_null(d.u8);
    ck_assert_float_eq(d.input_scale, 1.0f);
    ck_assert_float_eq(d.f32[0], 1.0f);
    ck_assert_float_eq(d.f32[1], 2.0f);
    ck_assert_float_eq(d.f32[2], 3.5f);
    ck_assert_float_eq(d.f32[3], -0.4f);
    ck_assert_int_eq(d.labels[0], 0);
    ck_assert_int_eq(d.labels[1], 2);
    ck_assert_int_eq(d.classes, 3);
    ck_assert_ptr_nonnull(d.feature_names);
    ck_assert_str_eq(d.feature_names[0], "sepal length");
    ck_assert_str_eq(d.feature_names[1], "width, in cm");
    ck_assert_str_eq(d.target_name, "label");
    ck_assert_str_eq(d.source, p);
    clt_dataset_free(&d);
}
END_TEST

START_TEST(csv_no_header)
{
    clt_dataset d;
    struct stat sb;
    const char *p = in_dir(0, "n.csv");
    /* CRLF line ends, blank lines, spaces, a quoted number, no final newline, gzip too. */
    const char *text = "1,2,1\r\n\r\n  4 , 5,0\r\n   \n\"7\",8.25,3";
    for (int gz = 0; gz < 2; gz++) {
        write_bytes(p, gz, text, strlen(text));
        ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_OK);
        ck_assert_uint_eq(d.n, 3);
        ck_assert_uint_eq(d.features, 2);
        ck_assert_ptr_null(d.feature_names);
        ck_assert_ptr_null(d.target_name);
        ck_assert_float_eq(d.f32[0], 1.0f);
        ck_assert_float_eq(d.f32[2], 4.0f);
        ck_assert_float_eq(d.f32[4], 7.0f);
        ck_assert_float_eq(d.f32[5], 8.25f);
        ck_assert_int_eq(d.labels[2], 3);
        ck_assert_int_eq(d.classes, 4);
        ck_assert_float_eq(clt_dataset_value(&d, 2, 1), 8.25f);
        clt_dataset_free(&d);
    }
    /* A gzip-compressed file cut short is an error, not a shorter table. */
    write_bytes(p, 1, text, strlen(text));
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(truncate(p, sb.st_size - 3), 0);
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("n.csv: truncated");
}
END_TEST

/* Inputs alone (no_labels): every column a feature, one column too, fractions and negatives
 * where a label would be; neither labels nor targets; classes as given. */
START_TEST(csv_no_labels)
{
    clt_dataset d, tr, te;
    struct clt_data_params p = clt_data_default_params();
    const char *path = in_dir(0, "in.csv");
    const char *text = "a,b,c\n-1.1,2,0.5\n3,-4,6\n";
    write_bytes(path, 0, text, strlen(text));
    p.no_labels = true;
    p.label_column = 0; /* ignored */
    p.classes = 7;
    ck_assert_int_eq(clt_data_load_csv(path, &p, &d), CLT_OK);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_uint_eq(d.features, 3);
    ck_assert_ptr_null(d.labels);
    ck_assert_ptr_null(d.targets);
    ck_assert_ptr_null(d.target_name);
    ck_assert_str_eq(d.feature_names[0], "a");
    ck_assert_float_eq(d.f32[0], -1.1f);
    ck_assert_float_eq(d.f32[5], 6.0f);
    ck_assert_int_eq(d.classes, 7);
    clt_dataset_free(&d);
    /* the same file with labels: the first column is no label */
    p.no_labels = false;
    ck_assert_int_eq(clt_data_load_csv(path, &p, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("is not a non-negative integer");
    /* one column is enough, through clt_data_open too; regression has 1 "class" */
    text = "0.5\n-2\n";
    write_bytes(path, 0, text, strlen(text));
    p.no_labels = true;
    p.task = CLT_TASK_REGRESSION;
    char spec[600];
    snprintf(spec, sizeof spec, "csv:%s,%s", path, path);
    ck_assert_int_eq(clt_data_open(spec, &p, &tr, &te), CLT_OK);
    ck_assert_uint_eq(tr.features, 1);
    ck_assert_uint_eq(te.n, 2);
    ck_assert_ptr_null(te.targets);
    ck_assert_int_eq(te.classes, 1);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
}
END_TEST

START_TEST(csv_non_numeric)
{
    clt_dataset d;
    const char *p = in_dir(0, "bad.csv");
    write_text(p, "a,b,y\n1,2,0\n1,x,1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS(p);
    ASSERT_MSG_HAS("line 3, column 2 (b): 'x' is not a number");
    ck_assert_ptr_null(d.f32);
    write_text(p, "1,2,0\n\n1,2,3\n1,,1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 4, column 2: empty cell");
    write_text(p, "1,2,0\n1,nan,1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 2, column 2: 'nan' is not a finite number");
    write_text(p, "1,2,0\n1e39,2,1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 2, column 1: '1e39' is out of float range");
    write_text(p, "1,2,0\n1,\"2,1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 2, column 2: unterminated quote");
    /* Labels must be non-negative integers. */
    write_text(p, "1,2,0\n1,2,1.5\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 2, column 3: label '1.5' is not a non-negative integer");
    write_text(p, "1,2,0\n1,2,-1\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("label '-1' is not a non-negative integer");
    write_text(p, "1,2,0\n1,2,1e9\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("regression");
}
END_TEST

START_TEST(csv_ragged)
{
    clt_dataset d;
    const char *p = in_dir(0, "r.csv");
    write_text(p, "a,b,y\n1,2,0\n1,2\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("r.csv: line 3 has 2 columns, expected 3 as on line 1");
    write_text(p, "1,2,0\n1,2,0,4\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("line 2 has 4 columns, expected 3");
    write_text(p, "");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("no rows");
    write_text(p, "a,b\n\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("no data rows");
    write_text(p, "1\n2\n");
    ck_assert_int_eq(clt_data_load_csv(p, NULL, &d), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("at least 2");
    ck_assert_int_eq(clt_data_load_csv(in_dir(1, "absent.csv"), NULL, &d), CLT_ERR_IO);
    ASSERT_MSG_HAS("absent.csv: cannot open");
}
END_TEST

START_TEST(csv_regression_and_label_column)
{
    clt_dataset d;
    struct clt_data_params prm = clt_data_default_params();
    const char *p = in_dir(0, "g.csv");
    write_text(p, "y,x1,x2\n0.5,1,2\n-2.25,3,4\n");
    prm.task = CLT_TASK_REGRESSION;
    prm.label_column = 0;
    ck_assert_int_eq(clt_data_load_csv(p, &prm, &d), CLT_OK);
    ck_assert_int_eq(d.task, CLT_TASK_REGRESSION);
    ck_assert_ptr_null(d.labels);
    ck_assert_ptr_nonnull(d.targets);
    ck_assert_int_eq(d.classes, 1);
    ck_assert_float_eq(d.targets[0], 0.5f);
    ck_assert_float_eq(d.targets[1], -2.25f);
    ck_assert_float_eq(d.f32[0], 1.0f);
    ck_assert_float_eq(d.f32[3], 4.0f);
    ck_assert_str_eq(d.target_name, "y");
    ck_assert_str_eq(d.feature_names[1], "x2");
    clt_dataset_free(&d);
    /* -3 of 3 columns is column 0 again. */
    prm.label_column = -3;
    ck_assert_int_eq(clt_data_load_csv(p, &prm, &d), CLT_OK);
    ck_assert_float_eq(d.targets[1], -2.25f);
    ck_assert_str_eq(d.target_name, "y");
    clt_dataset_free(&d);
    /* Middle column as a class label. */
    prm.task = CLT_TASK_CLASSIFICATION;
    prm.label_column = -2;
    ck_assert_int_eq(clt_data_load_csv(p, &prm, &d), CLT_OK);
    ck_assert_int_eq(d.labels[1], 3);
    ck_assert_float_eq(d.f32[2], -2.25f);
    ck_assert_float_eq(d.f32[3], 4.0f);
    ck_assert_str_eq(d.target_name, "x1");
    clt_dataset_free(&d);
    prm.label_column = -4;
    ck_assert_int_eq(clt_data_load_csv(p, &prm, &d), CLT_ERR_INVALID_ARG);
    ASSERT_MSG_HAS("label column -4 is out of range for 3 columns");
    prm.label_column = 3;
    ck_assert_int_eq(clt_data_load_csv(p, &prm, &d), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(d.f32);
}
END_TEST

START_TEST(open_csv_splits)
{
    char spec[300];
    clt_dataset tr, te;
    write_text(in_dir(0, "train.csv"), "a,b,y\n1,2,0\n3,4,1\n5,6,1\n");
    write_text(in_dir(1, "test.csv"), "7,8,1\n");
    snprintf(spec, sizeof spec, "csv:%s,%s", g_path[0], g_path[1]);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_OK);
    ck_assert_uint_eq(tr.n, 3);
    ck_assert_uint_eq(te.n, 1);
    ck_assert_int_eq(tr.classes, 2);
    ck_assert_int_eq(te.classes, 2);
    ck_assert_float_eq(te.f32[1], 8.0f);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    /* Inferred classes must all appear in the training split (issue 12: a label 4 in the test
     * file used to widen the model to 5 classes without a word)... */
    write_text(in_dir(1, "test.csv"), "7,8,4\n");
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("the labels make 5 classes (0 to 4), but 3 of them never appear in the "
                   "training split (2, 3, 4)");
    ck_assert_ptr_null(tr.f32);
    /* ... as a stray label in the training file does (200 among 0-1: 201 classes)... */
    write_text(in_dir(2, "stray.csv"), "1,2,0\n3,4,1\n5,6,200\n7,8,1\n");
    snprintf(spec, sizeof spec, "csv:%s", g_path[2]);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("198 of them never appear in the training split (2, 3, 4, 5, 6, 7, 8, 9, "
                   "...); the largest label, 200, is at sample 2");
    /* ... unless the number of classes is given. */
    struct clt_data_params dp = clt_data_default_params();
    dp.classes = 201;
    ck_assert_int_eq(clt_data_open(spec, &dp, &tr, &te), CLT_OK);
    ck_assert_int_eq(tr.classes, 201);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    snprintf(spec, sizeof spec, "csv:%s,%s", g_path[0], g_path[1]);
    /* No test file: an empty test split shaped like the training split. */
    snprintf(spec, sizeof spec, "csv:%s", g_path[0]);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_OK);
    ck_assert_uint_eq(te.n, 0);
    ck_assert_uint_eq(te.features, 2);
    ck_assert_int_eq(te.classes, 2);
    ck_assert_ptr_null(te.f32);
    ck_assert_float_eq(te.input_scale, 1.0f);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    /* Feature counts differ. */
    write_text(in_dir(1, "test.csv"), "7,8,9,1\n");
    snprintf(spec, sizeof spec, "csv:%s,%s", g_path[0], g_path[1]);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_FORMAT);
    ASSERT_MSG_HAS("test.csv: shape (3)");
    ck_assert_ptr_null(tr.f32);
    snprintf(spec, sizeof spec, "csv:%s,", g_path[0]);
    ck_assert_int_eq(clt_data_open(spec, NULL, &tr, &te), CLT_ERR_INVALID_ARG);
}
END_TEST

/* ---- statistics ----------------------------------------------------------------------------- */

static void check_stats(const clt_dataset *d)
{
    size_t F = d->features, n = d->n;
    float *mean = malloc(F * sizeof *mean), *std = malloc(F * sizeof *std);
    ck_assert_ptr_nonnull(mean);
    ck_assert_ptr_nonnull(std);
    for (size_t f = 0; f < F; f++)
        mean[f] = std[f] = NAN; /* poison */
    ck_assert_int_eq(clt_dataset_stats(d, mean, std), CLT_OK);
    for (size_t f = 0; f < F; f++) {
        double s = 0, q = 0, m, sd, x0 = 0;
        int constant = 1;
        for (size_t i = 0; i < n; i++) {
            size_t k = i * F + f;
            double x = (d->u8 ? (double)d->u8[k] : (double)d->f32[k]) * d->input_scale;
            if (i == 0) x0 = x;
            constant &= x == x0;
            s += x;
        }
        m = s / (double)n;
        for (size_t i = 0; i < n; i++) {
            size_t k = i * F + f;
            double x = (d->u8 ? (double)d->u8[k] : (double)d->f32[k]) * d->input_scale;
            q += (x - m) * (x - m);
        }
        sd = sqrt(q / (double)n);
        if (constant) sd = 1;
        ck_assert_msg(fabs(mean[f] - m) <= 1e-6 + 1e-6 * fabs(m),
                      "mean[%zu] %.9g vs %.9g (seed %u)", f, mean[f], m, g_seed);
        ck_assert_msg(fabs(std[f] - sd) <= 1e-6 + 1e-6 * sd, "std[%zu] %.9g vs %.9g (seed %u)", f,
                      std[f], sd, g_seed);
    }
    free(mean);
    free(std);
}

START_TEST(stats_f32)
{
    enum { N = 1000, F = 17 };
    clt_dataset d;
    memset(&d, 0, sizeof d);
    d.n = N;
    d.features = F;
    d.input_scale = 1.0f;
    d.f32 = malloc(N * F * sizeof *d.f32);
    ck_assert_ptr_nonnull(d.f32);
    for (size_t i = 0; i < N; i++) {
        for (size_t f = 0; f < F; f++) {
            /* Offsets make single-pass float accumulation visibly wrong. */
            d.f32[i * F + f] = 1000.0f * (float)f + (float)(rnd() % 20001) / 1000.0f - 10.0f;
        }
        /* A constant feature gets std 1, even where rounding makes its mean inexact. */
        d.f32[i * F + 5] = 0.1f;
    }
    check_stats(&d);
    {
        float mean[F], std[F];
        ck_assert_int_eq(clt_dataset_stats(&d, mean, std), CLT_OK);
        ck_assert_float_eq(std[5], 1.0f);
        ck_assert_float_eq(mean[5], 0.1f);
    }
    clt_dataset_free(&d);
}
END_TEST

START_TEST(stats_u8_scaled)
{
    enum { N = 65, R = 3, C = 7 };
    uint8_t images[N * R * C], labels[N];
    float mean[R * C], std[R * C];
    clt_dataset d;
    const char *img = in_dir(0, "img"), *lab = in_dir(1, "lab");
    write_pair(img, lab, 0, N, R, C, images, labels, 3);
    ck_assert_int_eq(clt_data_load_idx(img, lab, NULL, &d), CLT_OK);
    check_stats(&d);
    ck_assert_int_eq(clt_dataset_stats(&d, mean, std), CLT_OK);
    ck_assert_float_le(mean[0], 1.0f); /* scaled to [0, 1] */
    clt_dataset_free(&d);
    ck_assert_int_eq(clt_dataset_stats(&d, mean, std), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_dataset_stats(NULL, mean, std), CLT_ERR_INVALID_ARG);
}
END_TEST

/* ---- runner --------------------------------------------------------------------------------- */

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *idx = tcase_create("idx"), *spec = tcase_create("spec"), *csv = tcase_create("csv"),
          *stats = tcase_create("stats");
    TCase *all[] = {idx, spec, csv, stats};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        tcase_add_checked_fixture(all[i], setup, teardown);
        suite_add_tcase(s, all[i]);
    }
    tcase_add_loop_test(idx, idx_roundtrip, 0, 2); /* _i: 0 raw, 1 gzip */
    tcase_add_test(idx, idx_wrong_magic);
    tcase_add_loop_test(idx, idx_truncated_pixels, 0, 2);
    tcase_add_loop_test(idx, idx_truncated_header, 0, 2);
    tcase_add_loop_test(idx, idx_trailing_garbage, 0, 2);
    tcase_add_test(idx, idx_bad_header_sizes);
    tcase_add_test(idx, idx_huge_promise_count_first);
    tcase_add_test(idx, idx_huge_promise_gzip_trailer);
    tcase_add_test(idx, idx_gzip_multi_member);
    tcase_add_test(idx, idx_count_mismatch);
    tcase_add_test(idx, idx_label_out_of_range);
    tcase_add_test(idx, idx_gzip_damaged);
    tcase_add_test(idx, idx_missing_file);
    tcase_add_loop_test(spec, open_idx_folder, 0, 2);
    tcase_add_test(spec, open_idx_errors);
    tcase_add_test(spec, open_named_data_dir);
    tcase_add_test(spec, open_csv_splits);
    tcase_add_test(csv, csv_header);
    tcase_add_test(csv, csv_no_header);
    tcase_add_test(csv, csv_no_labels);
    tcase_add_test(csv, csv_non_numeric);
    tcase_add_test(csv, csv_ragged);
    tcase_add_test(csv, csv_regression_and_label_column);
    tcase_add_test(stats, stats_f32);
    tcase_add_test(stats, stats_u8_scaled);
    return s;
}

int main(void)
{
    return tc_run(data_suite());
}
