/* One image file decoded to 8-bit pixels: PNG through libpng, JPEG through libjpeg(-turbo),
 * recognised by their signatures, not their names. Both libraries report errors by longjmp;
 * each decode runs its setjmp in a small function whose state lives in a job struct owned by
 * the caller, so no local of ours is left indeterminate and the jump never crosses a frame of
 * ours that holds resources. Warnings (a JPEG's premature end, corrupt entropy data) count as
 * errors: a damaged file is refused, never half-grey. Sizes are checked from the header before
 * the pixels are allocated. Also the channel conversion and bilinear resize into (C, H, W). */
#include "data/data_internal.h"
#include "runtime/internal.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const unsigned char jpeg_sig[3] = {0xff, 0xd8, 0xff};

bool clt__image_sniff(const unsigned char *head, size_t n)
{
    return (n >= sizeof png_sig && memcmp(head, png_sig, sizeof png_sig) == 0) ||
           (n >= sizeof jpeg_sig && memcmp(head, jpeg_sig, sizeof jpeg_sig) == 0);
}

bool clt_data_is_image(const char *path)
{
    struct stat sb;
    unsigned char head[8];
    size_t got = 0;
    FILE *f;
    if (!path || stat(path, &sb) != 0) return false;
    if (S_ISDIR(sb.st_mode)) return true;
    if (!S_ISREG(sb.st_mode) || !(f = fopen(path, "rb"))) return false;
    got = fread(head, 1, sizeof head, f);
    fclose(f);
    return clt__image_sniff(head, got);
}

void clt__image_free(struct clt__image *im)
{
    if (!im) return;
    free(im->px);
    memset(im, 0, sizeof *im);
}

/* A declared size cltrain accepts: both sides in [1, MAX_SIDE] and at most MAX_PIXELS. */
static bool size_ok(size_t w, size_t h)
{
    return w >= 1 && h >= 1 && w <= CLT_DATA_IMAGE_MAX_SIDE && h <= CLT_DATA_IMAGE_MAX_SIDE &&
           w * h <= CLT_DATA_IMAGE_MAX_PIXELS;
}

static void size_message(char *msg, size_t n, size_t w, size_t h)
{
    snprintf(msg, n,
             "its header declares %zu x %zu pixels; cltrain reads images of 1 to %u pixels a side "
             "and at most %u pixels in all",
             w, h, (unsigned)CLT_DATA_IMAGE_MAX_SIDE, (unsigned)CLT_DATA_IMAGE_MAX_PIXELS);
}

/* ---- PNG -------------------------------------------------------------------------------- */

struct png_job {
    const unsigned char *data;
    size_t n, at;
    png_structp png;
    png_infop info;
    png_bytep *rows;
    struct clt__image im;
    char msg[256];
};

static void png_read_mem(png_structp png, png_bytep out, size_t len)
{
    struct png_job *j = png_get_io_ptr(png);
    if (len > j->n - j->at) png_error(png, "the file ends early (truncated)");
    memcpy(out, j->data + j->at, len);
    j->at += len;
}

static void png_on_error(png_structp png, png_const_charp m)
{
    struct png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", m);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp m)
{
    (void)png;
    (void)m; /* libpng's warnings are about ancillary chunks, which cltrain ignores */
}

/* The decode proper: every value it sets lives in *j, so it survives libpng's longjmp. Returns
 * 0, or -1 with j->msg set. */
static int png_run(struct png_job *j)
{
    if (setjmp(png_jmpbuf(j->png))) return -1;
    png_set_read_fn(j->png, j, png_read_mem);
    png_read_info(j->png, j->info);
    png_uint_32 w = png_get_image_width(j->png, j->info), h = png_get_image_height(j->png, j->info);
    if (!size_ok(w, h)) {
        size_message(j->msg, sizeof j->msg, w, h);
        return -1;
    }
    /* to 8-bit grey or RGB: palettes expanded, alpha and 16-bit precision dropped */
    png_set_strip_16(j->png);
    png_set_palette_to_rgb(j->png);
    png_set_expand_gray_1_2_4_to_8(j->png);
    png_set_strip_alpha(j->png);
    png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    int c = png_get_channels(j->png, j->info);
    if (c != 1 && c != 3) {
        snprintf(j->msg, sizeof j->msg, "%d channels after conversion: expected grey or RGB", c);
        return -1;
    }
    j->im = (struct clt__image){.w = w, .h = h, .c = c};
    j->im.px = malloc((size_t)w * h * (size_t)c);
    j->rows = malloc((size_t)h * sizeof *j->rows);
    if (!j->im.px || !j->rows) {
        snprintf(j->msg, sizeof j->msg, "out of host memory");
        return -1;
    }
    for (size_t y = 0; y < h; y++) j->rows[y] = j->im.px + y * w * (size_t)c;
    png_read_image(j->png, j->rows);
    png_read_end(j->png, NULL);
    return 0;
}

static clt_status decode_png(const char *path, const unsigned char *data, size_t n,
                             struct clt__image *out)
{
    clt_status st = CLT_OK;
    struct png_job *j = calloc(1, sizeof *j);
    if (!j) return clt__fail(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    j->data = data;
    j->n = n;
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, png_on_error, png_on_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    if (!j->png || !j->info) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory", path);
    png_set_chunk_malloc_max(j->png, 8u << 20); /* no ancillary chunk may cost more */
    if (png_run(j) != 0)
        CLT_FAIL(NULL, strcmp(j->msg, "out of host memory") ? CLT_ERR_FORMAT : CLT_ERR_HOST_MEMORY,
                 "%s: not a readable PNG image: %s", path, j->msg);
    *out = j->im;
    j->im.px = NULL;
fail:
    if (j->png) png_destroy_read_struct(&j->png, j->info ? &j->info : NULL, NULL);
    free(j->rows);
    free(j->im.px);
    free(j);
    return st;
}

/* ---- JPEG ------------------------------------------------------------------------------- */

struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    jmp_buf jump;
    bool created;
    const unsigned char *data;
    size_t n;
    struct clt__image im;
    char msg[JMSG_LENGTH_MAX + 128];
};

static void jpeg_on_error(j_common_ptr ci)
{
    struct jpeg_job *j = (struct jpeg_job *)ci->client_data;
    char text[JMSG_LENGTH_MAX];
    ci->err->format_message(ci, text);
    snprintf(j->msg, sizeof j->msg, "%s", text);
    longjmp(j->jump, 1);
}

/* Level -1 is a warning about corrupt data (a premature end, damaged entropy data): libjpeg
 * would go on with made-up pixels; cltrain refuses the file. Trace messages are dropped. */
static void jpeg_on_message(j_common_ptr ci, int level)
{
    if (level < 0) jpeg_on_error(ci);
}

/* The decode proper; every value it sets lives in *j. Returns 0, or -1 with j->msg set. */
static int jpeg_run(struct jpeg_job *j)
{
    j->cinfo.err = jpeg_std_error(&j->err);
    j->err.error_exit = jpeg_on_error;
    j->err.emit_message = jpeg_on_message;
    j->cinfo.client_data = j;
    if (setjmp(j->jump)) return -1;
    jpeg_create_decompress(&j->cinfo);
    j->created = true;
    jpeg_mem_src(&j->cinfo, j->data, (unsigned long)j->n);
    jpeg_read_header(&j->cinfo, TRUE);
    size_t w = j->cinfo.image_width, h = j->cinfo.image_height;
    if (!size_ok(w, h)) {
        size_message(j->msg, sizeof j->msg, w, h);
        return -1;
    }
    int comps = j->cinfo.num_components;
    if (comps != 1 && comps != 3) {
        snprintf(j->msg, sizeof j->msg,
                 "%d colour components (CMYK?): expected grey (1) or colour (3)", comps);
        return -1;
    }
    j->cinfo.out_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&j->cinfo);
    int c = j->cinfo.output_components;
    j->im = (struct clt__image){.w = w, .h = h, .c = c};
    j->im.px = malloc(w * h * (size_t)c);
    if (!j->im.px) {
        snprintf(j->msg, sizeof j->msg, "out of host memory");
        return -1;
    }
    while (j->cinfo.output_scanline < j->cinfo.output_height) {
        JSAMPROW row = j->im.px + (size_t)j->cinfo.output_scanline * w * (size_t)c;
        jpeg_read_scanlines(&j->cinfo, &row, 1);
    }
    jpeg_finish_decompress(&j->cinfo);
    return 0;
}

static clt_status decode_jpeg(const char *path, const unsigned char *data, size_t n,
                              struct clt__image *out)
{
    clt_status st = CLT_OK;
    struct jpeg_job *j = calloc(1, sizeof *j);
    if (!j) return clt__fail(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    j->data = data;
    j->n = n;
    if (jpeg_run(j) != 0)
        CLT_FAIL(NULL, strcmp(j->msg, "out of host memory") ? CLT_ERR_FORMAT : CLT_ERR_HOST_MEMORY,
                 "%s: not a readable JPEG image: %s", path, j->msg);
    *out = j->im;
    j->im.px = NULL;
fail:
    if (j->created) jpeg_destroy_decompress(&j->cinfo);
    free(j->im.px);
    free(j);
    return st;
}

/* ---- a file ----------------------------------------------------------------------------- */

/* The whole file, at most CLT_DATA_IMAGE_MAX_FILE bytes. */
static clt_status read_file(const char *path, unsigned char **out, size_t *len)
{
    clt_status st = CLT_OK;
    FILE *f = NULL;
    uint64_t size = 0;
    int fd = -1;
    *out = NULL;
    /* not fopen: a FIFO must be refused before the open can block on it */
    CLT_TRY(clt__open_regular(path, CLT__DATA_REGULAR_WHY, &fd, &size));
    errno = 0;
    if (!(f = fdopen(fd, "rb"))) {
        close(fd);
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    if (size > CLT_DATA_IMAGE_MAX_FILE)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: %llu bytes, more than the %llu an image file may have",
                 path, (unsigned long long)size, (unsigned long long)CLT_DATA_IMAGE_MAX_FILE);
    *len = (size_t)size;
    CLT_ALLOC(NULL, *out, *len);
    if (*len && fread(*out, 1, *len, f) != *len)
        CLT_FAIL(NULL, CLT_ERR_IO, "%s: read failed: %s", path,
                 ferror(f) ? strerror(errno) : "the file shrank while being read");
fail:
    if (f) fclose(f);
    if (st != CLT_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

clt_status clt__image_decode(const char *path, struct clt__image *out)
{
    clt_status st = CLT_OK;
    unsigned char *data = NULL;
    size_t n = 0;
    memset(out, 0, sizeof *out);
    CLT_TRY(read_file(path, &data, &n));
    if (n >= sizeof png_sig && memcmp(data, png_sig, sizeof png_sig) == 0)
        CLT_TRY(decode_png(path, data, n, out));
    else if (n >= sizeof jpeg_sig && memcmp(data, jpeg_sig, sizeof jpeg_sig) == 0)
        CLT_TRY(decode_jpeg(path, data, n, out));
    else
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: not an image: neither a PNG nor a JPEG signature%s",
                 path, n == 0 ? " (the file is empty)" : "");
fail:
    free(data);
    return st;
}

/* ---- conversion and resize -------------------------------------------------------------- */

/* The source pixel (x, y)'s value in output channel `ch`: grey to RGB repeats the grey value;
 * RGB to grey is ITU-R 601-2 luma in PIL's fixed point (L = (19595 R + 38470 G + 7471 B +
 * 0x8000) >> 16, as Image.convert("L")). */
static unsigned src_value(const struct clt__image *im, int C, size_t x, size_t y, int ch)
{
    const unsigned char *p = im->px + (y * im->w + x) * (size_t)im->c;
    if (im->c == C) return p[ch];
    if (im->c == 1) return p[0];
    return (19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16;
}

/* Where output index i of n samples the input of m: half-pixel centres, (i + 0.5) m / n - 0.5,
 * clamped at 0 (PyTorch's bilinear with align_corners=False); lo, hi and the weight of hi. */
static void source_pos(size_t i, size_t n, size_t m, size_t *lo, size_t *hi, double *t)
{
    double s = ((double)i + 0.5) * (double)m / (double)n - 0.5;
    if (s < 0) s = 0;
    *lo = (size_t)s;
    if (*lo > m - 1) *lo = m - 1;
    *hi = *lo + 1 < m ? *lo + 1 : m - 1;
    *t = s - (double)*lo;
}

void clt__image_to_chw(const struct clt__image *im, int C, size_t H, size_t W, unsigned char *dst)
{
    bool same = im->h == H && im->w == W;
    for (int ch = 0; ch < C; ch++) {
        unsigned char *plane = dst + (size_t)ch * H * W;
        for (size_t y = 0; y < H; y++) {
            size_t y0 = y, y1 = y;
            double ty = 0;
            if (!same) source_pos(y, H, im->h, &y0, &y1, &ty);
            for (size_t x = 0; x < W; x++) {
                if (same) {
                    plane[y * W + x] = (unsigned char)src_value(im, C, x, y, ch);
                    continue;
                }
                size_t x0, x1;
                double tx;
                source_pos(x, W, im->w, &x0, &x1, &tx);
                double top = (1 - tx) * src_value(im, C, x0, y0, ch) +
                             tx * src_value(im, C, x1, y0, ch);
                double bot = (1 - tx) * src_value(im, C, x0, y1, ch) +
                             tx * src_value(im, C, x1, y1, ch);
                double v = floor((1 - ty) * top + ty * bot + 0.5);
                plane[y * W + x] = (unsigned char)(v > 255 ? 255 : v < 0 ? 0 : v);
            }
        }
    }
}
