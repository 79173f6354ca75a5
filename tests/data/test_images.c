/* Unit tests of image folders as data sets (images:DIR) and of the images predict reads: PNG
 * files written here by a small encoder of our own (zlib and the PNG chunk layout), JPEG files
 * by libjpeg's encoder; pixels read back exactly (PNG) or closely (JPEG), class names and
 * labels, grey and RGB conversion, the bilinear resize against hand-computed values, the
 * seeded hold-out, the decoded-set cache (hit, invalidation, damage, a read-only folder), and
 * every bad file refused with a message naming it or skipped and counted. No OpenCL. */
#define _XOPEN_SOURCE 700 /* nftw, to remove the nested test folders */
#include "common.h"
#include "cltrain/data.h"

#include <check.h>
#include <ftw.h>
#include <jpeglib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[256];

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    tc_mkdtemp(g_dir, sizeof g_dir);
}

static void teardown(void)
{
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* g_dir/<rel>, its parent folders created. */
static const char *at(const char *rel)
{
    static char path[8][512];
    static int k;
    char *p = path[k++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, rel);
    for (char *s = p + strlen(g_dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(p, 0755);
        *s = '/';
    }
    return p;
}

/* ---- writers ------------------------------------------------------------------------------ */

static void put32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

static void chunk(FILE *f, const char *type, const unsigned char *data, uint32_t n)
{
    put32(f, n);
    fwrite(type, 1, 4, f);
    if (n) fwrite(data, 1, n, f);
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (n) crc = crc32(crc, data, n);
    put32(f, (uint32_t)crc);
}

/* An 8-bit PNG: colour type 0 (grey), 2 (RGB), 4 (grey + alpha) or 6 (RGBA); px interleaved
 * (h, w, c). Declared sizes dw, dh (0: w, h) allow a lying header. */
static void write_png_ex(const char *path, int w, int h, int ctype, const unsigned char *px,
                         uint32_t dw, uint32_t dh)
{
    int c = ctype == 0 ? 1 : ctype == 2 ? 3 : ctype == 4 ? 2 : 4;
    size_t stride = (size_t)w * c + 1, raw_n = stride * h;
    unsigned char *raw = malloc(raw_n);
    uLongf zn = compressBound(raw_n);
    unsigned char *z = malloc(zn);
    for (int y = 0; y < h; y++) {
        raw[y * stride] = 0; /* filter: none */
        memcpy(raw + y * stride + 1, px + (size_t)y * w * c, (size_t)w * c);
    }
    ck_assert_int_eq(compress(z, &zn, raw, raw_n), Z_OK);
    unsigned char ihdr[13];
    uint32_t W = dw ? dw : (uint32_t)w, H = dh ? dh : (uint32_t)h;
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (unsigned char)(W >> (24 - 8 * i));
        ihdr[4 + i] = (unsigned char)(H >> (24 - 8 * i));
    }
    ihdr[8] = 8;
    ihdr[9] = (unsigned char)ctype;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    chunk(f, "IHDR", ihdr, 13);
    chunk(f, "IDAT", z, (uint32_t)zn);
    chunk(f, "IEND", NULL, 0);
    fclose(f);
    free(raw);
    free(z);
}

static void write_png(const char *path, int w, int h, int c, const unsigned char *px)
{
    write_png_ex(path, w, h, c == 1 ? 0 : 2, px, 0, 0);
}

/* A baseline JPEG of quality 95: c 1 (grey), 3 (RGB) or 4 (CMYK). */
static void write_jpeg(const char *path, int w, int h, int c, const unsigned char *px)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : c == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 95, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * w * c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
}

/* A pattern that tells images apart: pixel (y, x, ch) of image id. */
static unsigned char pat(int id, int y, int x, int ch)
{
    return (unsigned char)(id * 37 + y * 11 + x * 5 + ch * 67);
}

static unsigned char *pattern(int id, int w, int h, int c)
{
    unsigned char *px = malloc((size_t)w * h * c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) px[((size_t)y * w + x) * c + ch] = pat(id, y, x, ch);
    return px;
}

static void png_file(const char *rel, int id, int w, int h, int c)
{
    unsigned char *px = pattern(id, w, h, c);
    write_png(at(rel), w, h, c, px);
    free(px);
}

/* A smooth image (JPEG keeps it within a few levels): a ramp plus the id. */
static void jpeg_file(const char *rel, int id, int w, int h, int c)
{
    unsigned char *px = malloc((size_t)w * h * c);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++)
                px[((size_t)y * w + x) * c + ch] = (unsigned char)(40 + id * 20 + x * 4 + ch * 30);
    write_jpeg(at(rel), w, h, c, px);
    free(px);
}

static void text_file(const char *rel, const char *text)
{
    FILE *f = fopen(at(rel), "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Cuts a file to n bytes. */
static void cut(const char *rel, long n)
{
    ck_assert_int_eq(truncate(at(rel), n), 0);
}

static long file_size(const char *rel)
{
    struct stat sb;
    ck_assert_int_eq(stat(at(rel), &sb), 0);
    return (long)sb.st_size;
}

static char g_spec[600];
static const char *spec(void)
{
    snprintf(g_spec, sizeof g_spec, "images:%s", g_dir);
    return g_spec;
}

static struct clt_data_params params(void)
{
    struct clt_data_params p = clt_data_default_params();
    p.image_cache = false;
    return p;
}

/* Opening fails with `st` and a message holding each of the needles. */
static void expect_fail(const struct clt_data_params *p, clt_status want, const char *n1,
                        const char *n2)
{
    clt_dataset tr, te;
    clt_status st = clt_data_open(spec(), p, &tr, &te);
    ck_assert_msg(st == want, "status %s, expected %s: %s", clt_status_name(st),
                  clt_status_name(want), clt_last_errmsg());
    ck_assert_msg(tc_contains(clt_last_errmsg(), n1), "'%s' lacks '%s'", clt_last_errmsg(), n1);
    if (n2) ck_assert_msg(tc_contains(clt_last_errmsg(), n2), "'%s' lacks '%s'", clt_last_errmsg(), n2);
    ck_assert_uint_eq(tr.n, 0);
    ck_assert_ptr_null(tr.u8);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* train/ and test/ folders: classes sorted by name, labels, exact PNG pixels as (C, H, W). */
START_TEST(png_split_folders)
{
    const char *classes[3] = {"cat", "ant", "bee"}; /* sorted: ant, bee, cat */
    char rel[128];
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 4; i++) {
            snprintf(rel, sizeof rel, "train/%s/%02d.png", classes[c], i);
            png_file(rel, c * 10 + i, 7, 5, 3);
        }
    png_file("test/bee/x.png", 99, 7, 5, 3);
    text_file("train/.hidden", "ignored");
    struct clt_data_params p = params();
    clt_dataset tr, te;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, &te) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.n, 12);
    ck_assert_uint_eq(te.n, 1);
    ck_assert_int_eq(tr.classes, 3);
    ck_assert_int_eq(te.classes, 3);
    ck_assert_str_eq(tr.class_names[0], "ant");
    ck_assert_str_eq(tr.class_names[1], "bee");
    ck_assert_str_eq(tr.class_names[2], "cat");
    ck_assert_int_eq(tr.sample_ndim, 3);
    ck_assert_uint_eq(tr.sample_shape[0], 3);
    ck_assert_uint_eq(tr.sample_shape[1], 5);
    ck_assert_uint_eq(tr.sample_shape[2], 7);
    ck_assert_uint_eq(tr.features, 105);
    ck_assert_float_eq(tr.input_scale, 1.0f / 255.0f);
    /* sample 4 is bee/00.png (id 20): label 1, planes (C, H, W) */
    ck_assert_int_eq(tr.labels[4], 1);
    ck_assert_int_eq(tr.labels[11], 2);
    ck_assert_int_eq(te.labels[0], 1);
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 7; x++) {
                ck_assert_uint_eq(tr.u8[4 * 105 + ch * 35 + y * 7 + x], pat(20, y, x, ch));
                ck_assert_uint_eq(te.u8[ch * 35 + y * 7 + x], pat(99, y, x, ch));
            }
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
}
END_TEST

/* Grey PNG and JPEG, alpha dropped; JPEG pixels within a few levels. */
START_TEST(grey_jpeg_alpha)
{
    png_file("train/a/1.png", 1, 6, 6, 1);
    jpeg_file("train/a/2.jpg", 2, 6, 6, 1);
    unsigned char *ga = pattern(3, 6, 6, 2);
    write_png_ex(at("train/b/3.png"), 6, 6, 4, ga, 0, 0); /* grey + alpha */
    jpeg_file("train/b/4.jpeg", 4, 6, 6, 1);
    struct clt_data_params p = params();
    clt_dataset tr;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.n, 4);
    ck_assert_uint_eq(tr.features, 36);
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < 6; x++) {
            ck_assert_uint_eq(tr.u8[y * 6 + x], pat(1, y, x, 0));
            ck_assert_uint_eq(tr.u8[2 * 36 + y * 6 + x], ga[(y * 6 + x) * 2]);
            int want = 40 + 2 * 20 + x * 4, got = tr.u8[36 + y * 6 + x];
            ck_assert_msg(abs(got - want) <= 4, "JPEG pixel (%d,%d): %d, expected %d", y, x, got,
                          want);
        }
    free(ga);
    clt_dataset_free(&tr);
}
END_TEST

/* Channel counts: mixed without a count is a bad file named with the first image; with 1,
 * RGB becomes PIL's luma; with 3, grey is repeated. */
START_TEST(channels)
{
    png_file("train/a/1.png", 1, 4, 3, 3);
    png_file("train/b/2.png", 2, 4, 3, 1);
    struct clt_data_params p = params();
    expect_fail(&p, CLT_ERR_FORMAT, "train/b/2.png", "--channels");
    clt_dataset tr;
    p.channels = 1;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.features, 12);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++) {
            unsigned r = pat(1, y, x, 0), g = pat(1, y, x, 1), b = pat(1, y, x, 2);
            unsigned luma = (19595u * r + 38470u * g + 7471u * b + 0x8000u) >> 16;
            ck_assert_uint_eq(tr.u8[y * 4 + x], luma);
            ck_assert_uint_eq(tr.u8[12 + y * 4 + x], pat(2, y, x, 0));
        }
    clt_dataset_free(&tr);
    p.channels = 3;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.features, 36);
    for (int ch = 0; ch < 3; ch++)
        ck_assert_uint_eq(tr.u8[36 + ch * 12 + 5], pat(2, 1, 1, 0));
    clt_dataset_free(&tr);
}
END_TEST

/* Sizes: another size without a target is a bad file; with one, bilinear with half-pixel
 * centres: a 2 x 1 image (0, 255) to 4 x 1 gives 0, 63.75, 191.25, 255 rounded. */
START_TEST(sizes_and_resize)
{
    unsigned char two[2] = {0, 255};
    write_png(at("train/a/1.png"), 2, 1, 1, two);
    png_file("train/b/2.png", 2, 3, 2, 1);
    struct clt_data_params p = params();
    expect_fail(&p, CLT_ERR_FORMAT, "train/b/2.png", "--image-size");
    clt_dataset tr;
    p.image_h = 1;
    p.image_w = 4;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.sample_shape[1], 1);
    ck_assert_uint_eq(tr.sample_shape[2], 4);
    unsigned char want[4] = {0, 64, 191, 255};
    for (int x = 0; x < 4; x++) ck_assert_uint_eq(tr.u8[x], want[x]);
    clt_dataset_free(&tr);
    /* upscaling a 2 x 2 image to 4 x 4 keeps the corners and averages across the middle */
    tc_rmdir(at("train/b"));
    unsigned char sq[4] = {0, 100, 200, 40};
    write_png(at("train/b/2.png"), 2, 2, 1, sq);
    p.image_h = 4;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s", clt_last_errmsg());
    const unsigned char *b = tr.u8 + 16;
    ck_assert_uint_eq(b[0], 0);
    ck_assert_uint_eq(b[3], 100);
    ck_assert_uint_eq(b[12], 200);
    ck_assert_uint_eq(b[15], 40);
    /* (1, 1): source (0.25, 0.25): 0.5625*0 + 0.1875*100 + 0.1875*200 + 0.0625*40 = 58.75 */
    ck_assert_uint_eq(b[5], 59);
    clt_dataset_free(&tr);
}
END_TEST

/* DIR/<class>/FILE with a hold-out: round(f k) per class, the same for the same seed, another
 * draw for another seed, every image in exactly one split. */
START_TEST(val_split)
{
    char rel[64];
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 20; i++) {
            snprintf(rel, sizeof rel, "%s/%02d.png", c ? "dog" : "cat", i);
            png_file(rel, c * 20 + i, 3, 3, 1);
        }
    struct clt_data_params p = params();
    clt_dataset tr, te, tr2, te2;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, &te) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.n, 40); /* no hold-out: everything trains */
    ck_assert_uint_eq(te.n, 0);
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    p.val_split = 0.25f;
    p.split_seed = 7;
    ck_assert_msg(clt_data_open(spec(), &p, &tr, &te) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(tr.n, 30);
    ck_assert_uint_eq(te.n, 10);
    int per_class[2] = {0, 0};
    for (size_t i = 0; i < te.n; i++) per_class[te.labels[i]]++;
    ck_assert_int_eq(per_class[0], 5);
    ck_assert_int_eq(per_class[1], 5);
    ck_assert_msg(clt_data_open(spec(), &p, &tr2, &te2) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_mem_eq(te.u8, te2.u8, te.n * 9);
    clt_dataset_free(&tr2);
    clt_dataset_free(&te2);
    p.split_seed = 8;
    ck_assert_msg(clt_data_open(spec(), &p, &tr2, &te2) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(te2.n, 10);
    ck_assert_msg(memcmp(te.u8, te2.u8, te.n * 9) != 0, "another seed drew the same hold-out");
    clt_dataset_free(&tr2);
    clt_dataset_free(&te2);
    /* every image once: the first pixel pat(id, 0, 0, 0) = 37 id mod 256 tells them apart */
    bool in[40] = {false};
    for (int pass = 0; pass < 2; pass++) {
        clt_dataset *d = pass ? &te : &tr;
        for (size_t i = 0; i < d->n; i++) {
            int id = -1;
            for (int k = 0; k < 40; k++)
                if (pat(k, 0, 0, 0) == d->u8[i * 9]) id = k;
            ck_assert_int_ge(id, 0);
            ck_assert_msg(!in[id], "image %d in both splits", id);
            in[id] = true;
        }
    }
    clt_dataset_free(&tr);
    clt_dataset_free(&te);
    /* a hold-out with train/ folders is refused */
    png_file("train/a/1.png", 1, 3, 3, 1);
    expect_fail(&p, CLT_ERR_INVALID_ARG, "train/", "--val-split");
}
END_TEST

/* The decoded set is cached beside the data: a second open reads it; a changed file, another
 * option or a damaged cache decodes again; a folder that cannot take the cache uses the cache
 * folder. */
START_TEST(cache)
{
    char cdir[300], name[600], rel[64];
    snprintf(cdir, sizeof cdir, "%s/cache", g_dir);
    for (int i = 0; i < 6; i++) {
        snprintf(rel, sizeof rel, "data/train/%c/%d.png", 'a' + i % 2, i);
        png_file(rel, i, 5, 4, 3);
    }
    struct clt_data_params p = clt_data_default_params();
    p.cache_dir = cdir;
    clt_dataset a, b;
    char sp[600];
    snprintf(sp, sizeof sp, "images:%s/data", g_dir);
    ck_assert_msg(clt_data_open(sp, &p, &a, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(!a.cached);
    ck_assert_int_eq(tc_count_files(at("data"), name, sizeof name), 1);
    ck_assert_msg(tc_contains(name, "/.cltrain-images-"), "cache file %s", name);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(b.cached);
    ck_assert_uint_eq(a.n, b.n);
    ck_assert_mem_eq(a.u8, b.u8, a.n * a.features);
    ck_assert_mem_eq(a.labels, b.labels, a.n * sizeof *a.labels);
    ck_assert_str_eq(b.class_names[1], "b");
    clt_dataset_free(&b);
    /* another option: another key */
    p.channels = 1;
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(!b.cached);
    clt_dataset_free(&b);
    p.channels = 0;
    /* a damaged cache is decoded again, correctly */
    FILE *f = fopen(name, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, -3, SEEK_END);
    fputc(0x5a, f);
    fclose(f);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(!b.cached);
    ck_assert_mem_eq(a.u8, b.u8, a.n * a.features);
    clt_dataset_free(&b);
    /* a changed file (content and time) is decoded again */
    sleep(1);
    png_file("data/train/a/0.png", 50, 5, 4, 3);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(!b.cached);
    ck_assert_uint_eq(b.u8[0], pat(50, 0, 0, 0));
    clt_dataset_free(&b);
    /* the cache cannot be written beside the data (its name taken by a folder): the cache
     * folder takes it, and the next open reads it from there */
    tc_rmdir(at("data")); /* the cache files only: train/ is not empty */
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    clt_dataset_free(&b);
    ck_assert_int_eq(tc_count_files(at("data"), name, sizeof name), 1);
    ck_assert_int_eq(remove(name), 0);
    ck_assert_int_eq(mkdir(name, 0755), 0);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(!b.cached);
    clt_dataset_free(&b);
    ck_assert_int_eq(tc_count_files(cdir, NULL, 0), 1);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(b.cached);
    clt_dataset_free(&b);
    rmdir(name);
    clt_dataset_free(&a);
}
END_TEST

/* A FIFO where the decoded set's cache file is (nothing ever writes to it) is a cache miss:
 * the set is decoded, not waited on (alarm: a regression fails rather than hangs). */
START_TEST(cache_fifo)
{
    char cdir[300], name[600], sp[600], rel[64];
    snprintf(cdir, sizeof cdir, "%s/cache", g_dir);
    for (int i = 0; i < 4; i++) {
        snprintf(rel, sizeof rel, "data/train/%c/%d.png", 'a' + i % 2, i);
        png_file(rel, i, 5, 4, 3);
    }
    struct clt_data_params p = clt_data_default_params();
    p.cache_dir = cdir;
    clt_dataset a, b;
    snprintf(sp, sizeof sp, "images:%s/data", g_dir);
    ck_assert_msg(clt_data_open(sp, &p, &a, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_int_eq(tc_count_files(at("data"), name, sizeof name), 1);
    ck_assert_int_eq(remove(name), 0);
    ck_assert_int_eq(mkfifo(name, 0644), 0);
    alarm(20);
    ck_assert_msg(clt_data_open(sp, &p, &b, NULL) == CLT_OK, "%s", clt_last_errmsg());
    alarm(0);
    ck_assert(!b.cached);
    ck_assert_mem_eq(a.u8, b.u8, a.n * a.features);
    clt_dataset_free(&b);
    clt_dataset_free(&a);
}
END_TEST

/* A 30000 x 30000 header is refused from the header: under a 512 MiB address-space limit
 * (the pixels would take 2.5 GiB) the message is the size, not out of memory. */
static void write_huge_png(const char *rel)
{
    unsigned char px[4] = {1, 2, 3, 4};
    write_png_ex(at(rel), 2, 2, 0, px, 30000, 30000);
}

/* Each bad file: one error naming it; with skip_bad_images skipped and counted. */
START_TEST(bad_files)
{
    static const struct {
        const char *name, *needle;
    } cases[] = {
        {"train/b/trunc.png", "truncated"}, {"train/b/trunc.jpg", "JPEG"},
        {"train/b/notes.txt", "not an image"}, {"train/b/huge.png", "30000 x 30000"},
        {"train/b/cmyk.jpg", "colour components"}, {"train/b/empty.png", "empty"},
        {"train/b/grey.png", "grey"},
    };
    struct clt_data_params p = params();
    for (int i = 0; i < 4; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "train/%c/%d.png", 'a' + i % 2, i);
        png_file(rel, i, 8, 8, 3);
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *rel = cases[k].name;
        if (strstr(rel, "trunc.png")) {
            png_file(rel, 9, 8, 8, 3);
            cut(rel, file_size(rel) - 20);
        } else if (strstr(rel, "trunc.jpg")) {
            jpeg_file(rel, 9, 32, 32, 3);
            cut(rel, file_size(rel) / 2);
        } else if (strstr(rel, "notes")) {
            text_file(rel, "label,pixel\n1,2\n");
        } else if (strstr(rel, "huge")) {
            write_huge_png(rel);
        } else if (strstr(rel, "cmyk")) {
            jpeg_file(rel, 9, 8, 8, 4);
        } else if (strstr(rel, "empty")) {
            text_file(rel, "");
        } else {
            png_file(rel, 9, 8, 8, 1);
        }
        expect_fail(&p, CLT_ERR_FORMAT, rel, cases[k].needle);
        p.skip_bad_images = true;
        clt_dataset tr;
        ck_assert_msg(clt_data_open(spec(), &p, &tr, NULL) == CLT_OK, "%s: %s", rel,
                      clt_last_errmsg());
        ck_assert_uint_eq(tr.n, 4);
        ck_assert_uint_eq(tr.skipped, 1);
        clt_dataset_free(&tr);
        p.skip_bad_images = false;
        ck_assert_int_eq(remove(at(rel)), 0);
    }
}
END_TEST

START_TEST(huge_header_before_allocating)
{
    png_file("train/a/1.png", 1, 8, 8, 1);
    write_huge_png("train/a/2.png");
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit lim = {512u << 20, 512u << 20};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
#endif
    struct clt_data_params p = params();
    expect_fail(&p, CLT_ERR_FORMAT, "train/a/2.png", "30000 x 30000");
}
END_TEST

/* Folder faults: no classes, an empty class folder, a test class unknown to training, all of
 * a class's images bad, no folder. */
START_TEST(folder_faults)
{
    struct clt_data_params p = params();
    mkdir(at("train"), 0755);
    expect_fail(&p, CLT_ERR_FORMAT, "train", "no class folders");
    png_file("train/a/1.png", 1, 4, 4, 1);
    mkdir(at("train/b"), 0755);
    expect_fail(&p, CLT_ERR_FORMAT, "train/b", "empty class folder");
    png_file("train/b/1.png", 2, 4, 4, 1);
    png_file("test/zebra/1.png", 3, 4, 4, 1);
    expect_fail(&p, CLT_ERR_FORMAT, "test/zebra", "test class");
    tc_rmdir(at("test/zebra"));
    text_file("train/b/1.png", "not a png");
    p.skip_bad_images = true;
    expect_fail(&p, CLT_ERR_FORMAT, "train/b", "no readable image");
    p.classes = 5;
    png_file("train/b/1.png", 2, 4, 4, 1);
    expect_fail(&p, CLT_ERR_FORMAT, "2 class folders", "5 classes");
    clt_dataset tr;
    ck_assert_int_eq(clt_data_open("images:/nonexistent/cltrain-images", NULL, &tr, NULL),
                     CLT_ERR_IO);
    ck_assert(tc_contains(clt_last_errmsg(), "/nonexistent/cltrain-images"));
}
END_TEST

/* Images for prediction: a folder (sorted, named) or one file, converted and resized to the
 * given shape; a bad file named. */
START_TEST(predict_images)
{
    png_file("in/b.png", 2, 4, 4, 3);
    png_file("in/a.png", 1, 8, 8, 1);
    jpeg_file("in/c.jpg", 3, 4, 4, 3);
    struct clt_data_params p = params();
    clt_dataset d;
    ck_assert_int_eq(clt_data_load_images(at("in"), &p, &d), CLT_ERR_INVALID_ARG);
    p.channels = 1;
    p.image_h = p.image_w = 4;
    p.classes = 10;
    ck_assert_msg(clt_data_load_images(at("in"), &p, &d) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(d.n, 3);
    ck_assert_uint_eq(d.features, 16);
    ck_assert_int_eq(d.classes, 10);
    ck_assert(tc_contains(d.sample_names[0], "in/a.png"));
    ck_assert(tc_contains(d.sample_names[2], "in/c.jpg"));
    clt_dataset_free(&d);
    ck_assert_msg(clt_data_load_images(at("in/b.png"), &p, &d) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(d.n, 1);
    clt_dataset_free(&d);
    ck_assert(clt_data_is_image(at("in/b.png")));
    ck_assert(clt_data_is_image(at("in/c.jpg")));
    ck_assert(clt_data_is_image(at("in")));
    text_file("in/d.csv", "1,2,3\n");
    ck_assert(!clt_data_is_image(at("in/d.csv")));
    ck_assert_int_eq(clt_data_load_images(at("in"), &p, &d), CLT_ERR_FORMAT);
    ck_assert(tc_contains(clt_last_errmsg(), "in/d.csv"));
    p.skip_bad_images = true;
    ck_assert_msg(clt_data_load_images(at("in"), &p, &d) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_uint_eq(d.n, 3);
    ck_assert_uint_eq(d.skipped, 1);
    clt_dataset_free(&d);
}
END_TEST

static Suite *images_suite(void)
{
    Suite *s = suite_create("images");
    TCase *t = tc_tcase("images");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, png_split_folders);
    tcase_add_test(t, grey_jpeg_alpha);
    tcase_add_test(t, channels);
    tcase_add_test(t, sizes_and_resize);
    tcase_add_test(t, val_split);
    tcase_add_test(t, cache);
    tcase_add_test(t, cache_fifo);
    tcase_add_test(t, bad_files);
    tcase_add_test(t, huge_header_before_allocating);
    tcase_add_test(t, folder_faults);
    tcase_add_test(t, predict_images);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tc_run(images_suite());
}
