/* Tests of the io module: the strict JSON parser and escaper, safetensors round trips of every
 * dtype with awkward metadata, the header layout, every corrupt-file case, truncated and
 * mutated files, and the atomic writer. Pure C, no OpenCL; each test works in a mkdtemp folder. */
#include "common.h"
#include "cltrain/errors.h"
#include "io/json.h"
#include "io/safetensors_internal.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---- */

static char g_dir[256];
static uint64_t g_rng, g_seed;

static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        struct dirent *e;
        char sub[1024];
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/cltrain_st_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
    g_seed |= 1;
    g_rng = g_seed;
}

static void teardown(void)
{
    rm_rf(g_dir);
}

static const char *in_dir(const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static int count_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    if (d) closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(data, 1, n, fp), n);
    ck_assert_int_eq(fclose(fp), 0);
}

/* A file with a declared header length (strlen(hdr) when declared is UINT64_MAX), the header
 * text and `data_len` random data bytes. */
static void write_raw(const char *path, const char *hdr, uint64_t declared, size_t data_len)
{
    size_t hlen = strlen(hdr), n = 8 + hlen + data_len;
    unsigned char *buf = malloc(n);
    ck_assert_ptr_nonnull(buf);
    if (declared == UINT64_MAX) declared = hlen;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(declared >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + hlen + i] = (unsigned char)rnd();
    spit(path, buf, n);
    free(buf);
}

static void expect_format(const char *hdr, size_t data_len, const char *fact)
{
    const char *path = in_dir("bad.safetensors");
    clt_st_file *f = (clt_st_file *)&f;
    write_raw(path, hdr, UINT64_MAX, data_len);
    clt_status st = clt_st_open(&f, path);
    const char *msg = clt_last_errmsg();
    ck_assert_msg(st == CLT_ERR_FORMAT, "header %s: status %d, message %s", hdr, st, msg);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(msg, fact) != NULL, "header %s: message \"%s\" lacks \"%s\"", hdr, msg,
                  fact);
    ck_assert_msg(strstr(msg, path) != NULL, "message \"%s\" does not name the file", msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "message \"%s\" is not one line", msg);
}

static clt__json *parse_ok(const char *text)
{
    clt__json *v = NULL;
    clt__json_error err = {0, ""};
    clt_status st = clt__json_parse(&v, text, strlen(text), &err);
    ck_assert_msg(st == CLT_OK, "%s: %s at %zu", text, err.msg, err.pos);
    ck_assert_ptr_nonnull(v);
    return v;
}

static void parse_bad(const char *text, size_t len)
{
    clt__json *v = (clt__json *)&v;
    clt__json_error err = {0, ""};
    clt_status st = clt__json_parse(&v, text, len, &err);
    ck_assert_msg(st == CLT_ERR_FORMAT, "accepted: %.60s", text);
    ck_assert_ptr_null(v);
    ck_assert_msg(err.msg[0] != '\0' && err.pos <= len, "no error detail for %.60s", text);
}

/* ---- JSON ---- */

START_TEST(json_nested)
{
    clt__json *v = parse_ok(" {\"a\": [1, 2, {\"b\": null}], \"c\": {\"d\": true, \"e\": false},"
                            " \"f\": \"x\", \"a\": 7, \"g\": [], \"h\": {}}\n");
    ck_assert_int_eq(v->type, CLT__JSON_OBJECT);
    ck_assert_uint_eq(v->n, 6);
    const char *order[] = {"a", "c", "f", "a", "g", "h"};
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(v->keys[i], order[i]);
    const clt__json *a = clt__json_get(v, "a");
    ck_assert_int_eq(a->type, CLT__JSON_ARRAY); /* the first of duplicate keys */
    ck_assert_uint_eq(a->n, 3);
    ck_assert_int_eq(a->items[1].integer, 2);
    ck_assert_int_eq(clt__json_get(&a->items[2], "b")->type, CLT__JSON_NULL);
    const clt__json *c = clt__json_get(v, "c");
    ck_assert(clt__json_get(c, "d")->boolean && !clt__json_get(c, "e")->boolean);
    ck_assert_str_eq(clt__json_get(v, "f")->str, "x");
    ck_assert_uint_eq(clt__json_get(v, "g")->n, 0);
    ck_assert_int_eq(clt__json_get(v, "h")->type, CLT__JSON_OBJECT);
    ck_assert_ptr_null(clt__json_get(v, "zz"));
    ck_assert_ptr_null(clt__json_get(a, "a"));
    ck_assert_str_eq(clt__json_type_name(CLT__JSON_ARRAY), "array");
    clt__json_free(v);
    clt__json_free(NULL);
}
END_TEST

START_TEST(json_strings)
{
    clt__json *v =
        parse_ok("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\", \"\\ud83d\\ude00\","
                 " \"a\\u0000b\", \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"\"]");
    ck_assert_str_eq(v->items[0].str, "\"\\/\b\f\n\r\t");
    ck_assert_str_eq(v->items[1].str, "\xc3\xa9\xe2\x82\xac");
    ck_assert_str_eq(v->items[2].str, "\xf0\x9f\x98\x80");
    ck_assert_uint_eq(v->items[3].len, 3);
    ck_assert_mem_eq(v->items[3].str, "a\0b", 3);
    ck_assert_str_eq(v->items[4].str, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    ck_assert_uint_eq(v->items[5].len, 0);
    clt__json_free(v);

    const char *bad[] = {"\"\\ud83d\"",  "\"\\ude00\"",  "\"\\ud83dx\"",     "\"\\ud83d\\u0041\"",
                         "\"\\x\"",      "\"\\u12\"",    "\"\\u12g4\"",      "\"a\nb\"",
                         "\"\xff\"",     "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
                         "\"\xe2\x82\"", "\"abc",        "\"abc\\\"",        "'a'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        parse_bad(bad[i], strlen(bad[i]));
    ck_assert(!clt__json_utf8_valid("\xc3", 1));
    ck_assert(clt__json_utf8_valid("\xf4\x8f\xbf\xbf", 4));
}
END_TEST

START_TEST(json_numbers)
{
    clt__json *v = parse_ok("[0, -0, 123, -45, 1.5, -2.5e3, 1E2, 9223372036854775807,"
                            " -9223372036854775808, 9223372036854775808, 1e-2, 0.0]");
    ck_assert(v->items[0].is_int && v->items[0].integer == 0);
    ck_assert(v->items[1].is_int && v->items[1].integer == 0);
    ck_assert(v->items[2].is_int && v->items[2].integer == 123);
    ck_assert(v->items[3].is_int && v->items[3].integer == -45);
    ck_assert(!v->items[4].is_int && v->items[4].number == 1.5);
    ck_assert(v->items[5].is_int && v->items[5].integer == -2500);
    ck_assert(v->items[6].is_int && v->items[6].integer == 100);
    ck_assert(v->items[7].is_int && v->items[7].integer == INT64_MAX);
    ck_assert(v->items[8].is_int && v->items[8].integer == INT64_MIN);
    ck_assert(!v->items[9].is_int && v->items[9].number == 9223372036854775808.0);
    ck_assert(!v->items[10].is_int && v->items[10].number == 0.01);
    ck_assert(v->items[11].is_int && v->items[11].integer == 0);
    clt__json_free(v);
    const char *bad[] = {"01",  "1.",       ".5",        "-",     "+1",  "1e",   "1e+", "0x10",
                         "NaN", "Infinity", "-Infinity", "1e400", "--1", "1.e3", "tru", "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        parse_bad(bad[i], strlen(bad[i]));
}
END_TEST

START_TEST(json_rejects)
{
    const char *bad[] = {"[1,2,]",
                         "{\"a\":1,}",
                         "{\"a\":\"b",
                         "{} x",
                         "1 2",
                         "",
                         "   ",
                         "{\"a\" 1}",
                         "{a:1}",
                         "[1 2]",
                         "{\"a\":1 \"b\":2}",
                         "[",
                         "{",
                         "/* c */ 1",
                         "[1]]",
                         "{\"a\":}",
                         "[,1]",
                         "\xef\xbb\xbf{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        parse_bad(bad[i], strlen(bad[i]));

    clt__json *v = NULL;
    clt__json_error err = {0, ""};
    ck_assert_int_eq(clt__json_parse(&v, "{\"a\":1,}", 8, &err), CLT_ERR_FORMAT);
    ck_assert_uint_eq(err.pos, 7);
    ck_assert_int_eq(clt__json_parse(&v, "[1]\0", 4, &err), CLT_ERR_FORMAT); /* embedded NUL */
    ck_assert_int_eq(clt__json_parse(&v, "[1] ", 3, NULL), CLT_OK); /* len bounds the text */
    clt__json_free(v);

    /* Depth: 64 nested containers parse, 65 do not, and a deep bomb fails fast. */
    size_t bomb = 200000;
    char *s = malloc(2 * bomb + 1);
    ck_assert_ptr_nonnull(s);
    for (int depth = 64; depth <= 65; depth++) {
        memset(s, '[', (size_t)depth);
        memset(s + depth, ']', (size_t)depth);
        v = NULL;
        clt_status st = clt__json_parse(&v, s, 2 * (size_t)depth, &err);
        ck_assert_int_eq(st, depth == 64 ? CLT_OK : CLT_ERR_FORMAT);
        clt__json_free(v);
    }
    ck_assert(strstr(err.msg, "64") != NULL);
    for (size_t i = 0; i < bomb; i++)
        s[i] = (i % 2) ? '[' : '{';
    parse_bad(s, bomb);
    memset(s, '[', bomb);
    parse_bad(s, bomb);
    free(s);
}
END_TEST

START_TEST(json_writer)
{
    char raw[160];
    size_t n = 0;
    for (int c = 1; c < 128; c++)
        raw[n++] = (char)c;
    memcpy(raw + n, "\xc3\xa9\xf0\x9f\x98\x80\"\\", 8);
    n += 8;
    clt__json_buf b = {0};
    clt__json_buf_puts(&b, "[");
    clt__json_buf_string(&b, raw, n);
    clt__json_buf_printf(&b, ",%d,", 42);
    clt__json_buf_string(&b, "", 0);
    clt__json_buf_append(&b, "]", 1);
    ck_assert(!b.failed);
    ck_assert_uint_eq(strlen(b.data), b.len);
    clt__json *v = parse_ok(b.data);
    ck_assert_uint_eq(v->items[0].len, n);
    ck_assert_mem_eq(v->items[0].str, raw, n);
    ck_assert_int_eq(v->items[1].integer, 42);
    ck_assert_uint_eq(v->items[2].len, 0);
    clt__json_free(v);
    clt__json_buf_free(&b);
    ck_assert_ptr_null(b.data);
}
END_TEST

/* ---- round trip ---- */

#define NT 16

typedef struct sample {
    clt_st_tensor t[NT];
    void *mem[NT];
    int n;
} sample;

static const char *const meta_keys[] = {"spec", "json", "quote", "ctrl", "empty", "uni\xc3\xa9"};
static const char *const meta_values[] = {"linear 256, relu\nlinear 10 # comment",
                                          "[1, 2.5, \"x\\\"y\", {\"k\": \"\\\\\"}, null]",
                                          "he said \"hi\" \\ and left\\",
                                          "\x01\x1f\t\x7f",
                                          "",
                                          "\xe2\x82\xac \\u20ac"};
#define NMETA ((int)(sizeof meta_keys / sizeof meta_keys[0]))

/* Several tensors of every dtype, random shapes (scalars and empty ones included) and
 * random bytes. */
static void make_sample(sample *s)
{
    static const clt_dtype dts[] = {CLT_DTYPE_F32, CLT_DTYPE_F16, CLT_DTYPE_BF16, CLT_DTYPE_I32,
                                    CLT_DTYPE_U8};
    static const size_t sizes[] = {4, 2, 2, 4, 1};
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 15; i++) {
        clt_st_tensor *t = &s->t[i];
        int d = i % 5;
        t->dtype = dts[d];
        t->ndim = i < 5 ? 0 : (int)(rnd() % 4) + 1;
        size_t numel = 1;
        for (int k = 0; k < t->ndim; k++) {
            t->shape[k] = (i == 13 && k == 0) ? 0 : (int64_t)(rnd() % 7) + 1;
            numel *= (size_t)t->shape[k];
        }
        t->nbytes = numel * sizes[d];
        s->mem[i] = malloc(t->nbytes + 1);
        ck_assert_ptr_nonnull(s->mem[i]);
        for (size_t k = 0; k < t->nbytes; k++)
            ((unsigned char *)s->mem[i])[k] = (unsigned char)rnd();
        t->data = s->mem[i];
        snprintf(t->name, sizeof t->name, "layer.%d.weight", i);
    }
    strcpy(s->t[1].name, "quote\"back\\slash\ttab");
    strcpy(s->t[2].name, "poids_\xc3\xa9t\xc3\xa9_\xf0\x9f\x98\x80");
    strcpy(s->t[3].name, "");
    memset(s->t[4].name, 'n', CLT_ST_NAME_MAX - 1);
    s->t[4].name[CLT_ST_NAME_MAX - 1] = '\0';
    s->n = 15;
}

static void free_sample(sample *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->mem[i]);
}

START_TEST(round_trip)
{
    sample s;
    make_sample(&s);
    const char *path = in_dir("model.safetensors");
    ck_assert_msg(clt_st_write(path, s.t, s.n, meta_keys, meta_values, NMETA) == CLT_OK, "%s",
                  clt_last_errmsg());
    ck_assert_int_eq(count_entries(g_dir), 1); /* no temporary file left behind */

    clt_st_file *f = NULL;
    ck_assert_msg(clt_st_open(&f, path) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_int_eq(clt_st_count(f), s.n);
    for (int i = 0; i < s.n; i++) {
        const clt_st_tensor *a = &s.t[i], *b = clt_st_get(f, i);
        ck_assert_str_eq(b->name, a->name);
        ck_assert_ptr_eq(clt_st_find(f, a->name), b);
        ck_assert_int_eq(b->dtype, a->dtype);
        ck_assert_int_eq(b->ndim, a->ndim);
        for (int k = 0; k < CLT_MAX_DIMS; k++)
            ck_assert_int_eq(b->shape[k], k < a->ndim ? a->shape[k] : 1);
        ck_assert_uint_eq(b->nbytes, a->nbytes);
        ck_assert_msg(memcmp(a->data, b->data, a->nbytes) == 0, "tensor %d differs (seed %llu)", i,
                      (unsigned long long)g_seed);
    }
    ck_assert_uint_eq((uintptr_t)clt_st_get(f, 0)->data % 8, 0);
    ck_assert_ptr_null(clt_st_get(f, -1));
    ck_assert_ptr_null(clt_st_get(f, s.n));
    ck_assert_ptr_null(clt_st_find(f, "layer.999.weight"));
    ck_assert_int_eq(clt_st_meta_count(f), NMETA);
    for (int i = 0; i < NMETA; i++) {
        ck_assert_str_eq(clt_st_meta_key(f, i), meta_keys[i]);
        ck_assert_str_eq(clt_st_meta(f, meta_keys[i]), meta_values[i]);
    }
    ck_assert_ptr_null(clt_st_meta(f, "absent"));
    ck_assert_ptr_null(clt_st_meta_key(f, NMETA));
    clt_st_close(f);
    clt_st_close(NULL);

    /* Rewrite without metadata and with no tensors. */
    ck_assert_int_eq(clt_st_write(path, s.t, 2, NULL, NULL, 0), CLT_OK);
    ck_assert_int_eq(clt_st_open(&f, path), CLT_OK);
    ck_assert_int_eq(clt_st_count(f), 2);
    ck_assert_int_eq(clt_st_meta_count(f), 0);
    ck_assert_ptr_null(clt_st_meta(f, "spec"));
    clt_st_close(f);
    ck_assert_int_eq(clt_st_write(path, NULL, 0, NULL, NULL, 0), CLT_OK);
    ck_assert_int_eq(clt_st_open(&f, path), CLT_OK);
    ck_assert_int_eq(clt_st_count(f), 0);
    ck_assert_ptr_null(clt_st_find(f, ""));
    clt_st_close(f);
    free_sample(&s);
}
END_TEST

START_TEST(header_layout)
{
    sample s;
    make_sample(&s);
    const char *path = in_dir("model.safetensors");
    ck_assert_int_eq(clt_st_write(path, s.t, s.n, meta_keys, meta_values, NMETA), CLT_OK);
    size_t size;
    unsigned char *buf = slurp(path, &size);
    uint64_t hlen = 0, total = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)buf[i] << (8 * i);
    ck_assert_uint_eq((8 + hlen) % 8, 0);
    for (int i = 0; i < s.n; i++)
        total += s.t[i].nbytes;
    ck_assert_uint_eq(size, 8 + hlen + total);

    clt__json *h = NULL;
    ck_assert_int_eq(clt__json_parse(&h, (const char *)buf + 8, hlen, NULL), CLT_OK);
    ck_assert_int_eq(h->type, CLT__JSON_OBJECT);
    ck_assert_uint_eq(h->n, (size_t)s.n + 1);
    ck_assert_str_eq(h->keys[0], "__metadata__");
    const clt__json *m = &h->items[0];
    for (int i = 0; i < NMETA; i++)
        ck_assert_str_eq(clt__json_get(m, meta_keys[i])->str, meta_values[i]);
    uint64_t offset = 0;
    for (int i = 0; i < s.n; i++) {
        const clt__json *e = &h->items[i + 1];
        ck_assert_str_eq(h->keys[i + 1], s.t[i].name);
        ck_assert_uint_eq(clt__json_get(e, "shape")->n, (size_t)s.t[i].ndim);
        const clt__json *off = clt__json_get(e, "data_offsets");
        ck_assert_int_eq(off->items[0].integer, (int64_t)offset);
        ck_assert_int_eq(off->items[1].integer, (int64_t)(offset + s.t[i].nbytes));
        ck_assert_mem_eq(buf + 8 + hlen + offset, s.t[i].data, s.t[i].nbytes);
        offset += s.t[i].nbytes;
    }
    ck_assert_str_eq(clt__json_get(&h->items[3], "dtype")->str, "BF16");
    clt__json_free(h);
    /* Padding: spaces after the closing brace, no more than 7. */
    size_t last = 8 + hlen - 1;
    while (buf[last] == ' ')
        last--;
    ck_assert_int_eq(buf[last], '}');
    ck_assert_uint_lt(8 + hlen - 1 - last, 8);
    free(buf);
    free_sample(&s);
}
END_TEST

/* ---- reading bad files ---- */

START_TEST(corrupt_files)
{
    const char *path = in_dir("bad.safetensors");
    clt_st_file *f = NULL;
    char big[400];

    for (size_t n = 0; n < 8; n++) {
        spit(path, "\x02\0\0\0\0\0\0\0", n);
        ck_assert_int_eq(clt_st_open(&f, path), CLT_ERR_FORMAT);
        ck_assert_ptr_null(f);
        ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "shorter than 8"));
    }
    write_raw(path, "{}", 123456, 2000 - 10);
    ck_assert_int_eq(clt_st_open(&f, path), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(
        clt_last_errmsg(), "header length 123456 runs past the end of the file (2000 bytes)"));
    write_raw(path, "{}", UINT64_MAX - 3, 0);
    ck_assert_int_eq(clt_st_open(&f, path), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "past the end"));

    expect_format("{\"a\" 1}", 0, "malformed header JSON at byte 13");
    expect_format("{} x", 0, "malformed");
    expect_format("", 0, "malformed");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],}}", 0, "malformed");
    expect_format("[1,2]", 0, "not an object");
    expect_format("{\"t\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "no \"dtype\"");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no \"shape\"");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "no \"data_offsets\"");
    expect_format("{\"t\":5}", 4, "not an object");
    expect_format("{\"t\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                  "\"dtype\" is a JSON number");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4,
                  "\"shape\" is a JSON string");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
                  "data_offsets");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]}}", 4,
                  "data_offsets");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4,
                  "data_offsets");
    expect_format("{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
                  "unsupported dtype \"F64\"");
    expect_format("{\"t\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                  "unsupported dtype \"f32\"");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
                  "5 dimensions");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
                  "negative");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1,
                  "not a non-negative integer");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[null],\"data_offsets\":[0,1]}}", 1,
                  "not a non-negative integer");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[100],\"data_offsets\":[0,100]}}", 64,
                  "not inside the data section (64 bytes)");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,4]}}", 64,
                  "not inside the data section");
    expect_format("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,-1]}}", 64,
                  "data_offsets");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 64,
                  "needs 12 bytes");
    expect_format("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data_offsets\":[0,8]}}",
                  64, "too large");
    expect_format("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[8,24]}}",
                  64, "overlap");
    expect_format("{\"a\":{\"dtype\":\"U8\",\"shape\":[32],\"data_offsets\":[0,32]},"
                  "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                  64, "overlap");
    expect_format("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                  64, "duplicate tensor name \"a\"");
    expect_format("{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    expect_format("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "duplicate");
    expect_format("{\"__metadata__\":[1]}", 0, "not an object");
    expect_format("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate");
    expect_format("{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, "NUL");
    expect_format("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8,
                  "NUL");
    snprintf(big, sizeof big,
             "{\"%0300d\":{\"dtype\":\"U8\",\"shape\":[1],"
             "\"data_offsets\":[0,1]}}",
             0);
    expect_format(big, 8, "too long");
    expect_format("{\"line\\nbreak\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]}}", 8,
                  "line?break"); /* names are shown on one line */

    ck_assert_int_eq(clt_st_open(&f, in_dir("missing.safetensors")), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "missing.safetensors"));
    ck_assert_int_eq(clt_st_open(&f, g_dir), CLT_ERR_IO);
    ck_assert_int_eq(clt_st_open(NULL, path), CLT_ERR_INVALID_ARG);
}
END_TEST

START_TEST(tolerated_files)
{
    const char *path = in_dir("ok.safetensors");
    clt_st_file *f = NULL;
    /* Unaligned header, gaps, zero-size tensors sharing an offset, extra keys, padding and
     * whitespace. */
    write_raw(path,
              " {\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]},"
              "\"y\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[4,8],\"extra\":[1]},"
              "\"e\":{\"dtype\":\"F16\",\"shape\":[2,0],\"data_offsets\":[4,4]},"
              "\"x\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]},"
              "\"__metadata__\":{\"format\":\"pt\"}}   ",
              UINT64_MAX, 8);
    ck_assert_msg(clt_st_open(&f, path) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_int_eq(clt_st_count(f), 4);
    ck_assert_str_eq(clt_st_get(f, 0)->name, "z");
    ck_assert_str_eq(clt_st_meta(f, "format"), "pt");
    ck_assert_uint_eq((uintptr_t)clt_st_find(f, "x")->data % 8, 0); /* data section aligned */
    ck_assert_int_eq(clt_st_find(f, "y")->ndim, 0);
    ck_assert_int_eq(clt_st_find(f, "y")->dtype, CLT_DTYPE_I32);
    ck_assert_uint_eq(clt_st_find(f, "e")->nbytes, 0);
    ck_assert_int_eq(clt_st_find(f, "e")->shape[1], 0);
    clt_st_close(f);
}
END_TEST

/* Bytes after the last tensor are refused, naming the file's size and the header's end, before
 * the data section is read (a padded file is not loaded whole); a FIFO (no writer) or a
 * directory is refused without blocking. */
START_TEST(trailing_and_special_files)
{
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t hlen = strlen(hdr);
    char size_text[64], end_text[64];
    write_raw(in_dir("exact.safetensors"), hdr, UINT64_MAX, 8);
    clt_st_file *f = NULL;
    ck_assert_msg(clt_st_open(&f, in_dir("exact.safetensors")) == CLT_OK, "%s",
                  clt_last_errmsg());
    clt_st_close(f);
    size_t pads[] = {1, 3, 4096};
    for (size_t i = 0; i < sizeof pads / sizeof *pads; i++) {
        snprintf(size_text, sizeof size_text, "%zu bytes", 8 + hlen + 8 + pads[i]);
        snprintf(end_text, sizeof end_text, "%zu", 8 + hlen + 8);
        expect_format(hdr, 8 + pads[i], size_text);
        expect_format(hdr, 8 + pads[i], end_text);
    }
    /* no tensors: nothing may follow the header */
    expect_format("{}", 1, "11 bytes");

    const char *fifo = in_dir("fifo.safetensors");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    f = (clt_st_file *)&f;
    ck_assert_int_eq(clt_st_open(&f, fifo), CLT_ERR_IO); /* would block before the check */
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(clt_last_errmsg(), fifo) && strstr(clt_last_errmsg(), "FIFO"), "%s",
                  clt_last_errmsg());
    ck_assert_int_eq(unlink(fifo), 0);
    ck_assert_int_eq(clt_st_open(&f, g_dir), CLT_ERR_IO);
    ck_assert_msg(strstr(clt_last_errmsg(), "directory"), "%s", clt_last_errmsg());
}
END_TEST

START_TEST(truncated_files)
{
    sample s;
    make_sample(&s);
    const char *path = in_dir("model.safetensors"), *cut = in_dir("cut.safetensors");
    /* Last tensor non-empty so that every cut loses data. */
    ck_assert_int_eq(clt_st_write(path, s.t + 5, 6, meta_keys, meta_values, NMETA), CLT_OK);
    size_t size;
    unsigned char *buf = slurp(path, &size);
    for (size_t n = 0; n < size; n++) {
        clt_st_file *f = (clt_st_file *)&f;
        spit(cut, buf, n);
        clt_status st = clt_st_open(&f, cut);
        ck_assert_msg(st == CLT_ERR_FORMAT, "cut at %zu of %zu: status %d", n, size, st);
        ck_assert_ptr_null(f);
    }
    free(buf);
    free_sample(&s);
}
END_TEST

START_TEST(mutated_files)
{
    sample s;
    make_sample(&s);
    const char *path = in_dir("model.safetensors"), *bad = in_dir("mutant.safetensors");
    ck_assert_int_eq(clt_st_write(path, s.t, s.n, meta_keys, meta_values, NMETA), CLT_OK);
    size_t size, hlen;
    unsigned char *buf = slurp(path, &size), *m = malloc(size);
    ck_assert_ptr_nonnull(m);
    hlen = buf[0] | (size_t)buf[1] << 8;
    int ok = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(m, buf, size);
        int flips = 1 + (int)(rnd() % 3);
        for (int k = 0; k < flips; k++) {
            size_t at = (rnd() % 8 == 0) ? rnd() % 8 : 8 + rnd() % hlen;
            static const char pick[] = "{}[]\",:0-9 \\u";
            m[at] =
                (rnd() % 2) ? (unsigned char)rnd() : (unsigned char)pick[rnd() % (sizeof pick - 1)];
        }
        spit(bad, m, size);
        clt_st_file *f = NULL;
        clt_status st = clt_st_open(&f, bad);
        ck_assert_msg(st == CLT_OK || st == CLT_ERR_FORMAT, "iter %d: %d %s (seed %llu)", iter, st,
                      clt_last_errmsg(), (unsigned long long)g_seed);
        if (st != CLT_OK) continue;
        ok++;
        unsigned sum = 0; /* touch every byte handed out */
        for (int i = 0; i < clt_st_count(f); i++) {
            const clt_st_tensor *t = clt_st_get(f, i);
            for (size_t b = 0; b < t->nbytes; b++)
                sum += ((const unsigned char *)t->data)[b];
            ck_assert_ptr_eq(clt_st_find(f, t->name), t);
        }
        for (int i = 0; i < clt_st_meta_count(f); i++)
            sum += (unsigned)strlen(clt_st_meta_key(f, i));
        (void)sum;
        clt_st_close(f);
    }
    ck_assert_int_lt(ok, 1500);
    free(m);
    free(buf);
    free_sample(&s);
}
END_TEST

/* ---- writing ---- */

START_TEST(atomic_write)
{
    sample s;
    make_sample(&s);
    const char *path = in_dir("ckpt.safetensors");
    clt_st_file *f = NULL;
    size_t size_a, size_b;

    ck_assert_int_eq(clt_st_write(path, s.t, 3, meta_keys, meta_values, 1), CLT_OK);
    unsigned char *a = slurp(path, &size_a);

    /* Invalid arguments: refused before anything is written. */
    clt_st_tensor bad[2];
    memcpy(bad, s.t + 5, sizeof bad);
    bad[1].dtype = (clt_dtype)99;
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    strcpy(bad[1].name, bad[0].name);
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "duplicate"));
    memcpy(bad, s.t + 5, sizeof bad);
    strcpy(bad[0].name, "__metadata__");
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    bad[0].nbytes++;
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    bad[0].ndim = 5;
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    bad[0].shape[0] = -bad[0].shape[0];
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    bad[0].data = NULL;
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    memset(bad[0].name, 'x', sizeof bad[0].name);
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    memcpy(bad, s.t + 5, sizeof bad);
    strcpy(bad[0].name, "bad\xff");
    ck_assert_int_eq(clt_st_write(path, bad, 2, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    const char *dup_keys[] = {"k", "k"}, *vals[] = {"1", "\xc0\x80"}, *nul[] = {NULL, "x"};
    ck_assert_int_eq(clt_st_write(path, s.t, 1, dup_keys, vals, 2), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_st_write(path, s.t, 1, meta_keys, vals, 2), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_st_write(path, s.t, 1, nul, vals, 1), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_st_write(path, s.t, -1, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(clt_st_write(NULL, s.t, 1, NULL, NULL, 0), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(count_entries(g_dir), 1);
    size_t size_now;
    unsigned char *now = slurp(path, &size_now);
    ck_assert_uint_eq(size_now, size_a);
    ck_assert_mem_eq(now, a, size_a);
    free(now);

    /* The final name is a folder: refused before any temporary is made, folder untouched. */
    const char *dir_path = in_dir("is_a_dir.safetensors");
    ck_assert_int_eq(mkdir(dir_path, 0700), 0);
    ck_assert_int_eq(clt_st_write(dir_path, s.t, 3, NULL, NULL, 0), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "is a directory"));
    ck_assert_int_eq(count_entries(g_dir), 2);
    ck_assert_int_eq(count_entries(dir_path), 0);

    /* Missing folder, and a "folder" that is a file: CLT_ERR_IO, nothing created. */
    struct stat sb;
    const char *missing = in_dir("no/such/dir/x.safetensors");
    ck_assert_int_eq(clt_st_write(missing, s.t, 3, NULL, NULL, 0), CLT_ERR_IO);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "does not exist"));
    ck_assert_int_ne(stat(missing, &sb), 0);
    char under_file[1100];
    snprintf(under_file, sizeof under_file, "%s/x.safetensors", path);
    ck_assert_int_eq(clt_st_write(under_file, s.t, 3, NULL, NULL, 0), CLT_ERR_IO);
    ck_assert_int_eq(count_entries(g_dir), 2);

    /* A folder without write permission (root ignores permissions, so only as a user). */
    if (geteuid() != 0) {
        const char *ro = in_dir("ro");
        ck_assert_int_eq(mkdir(ro, 0500), 0);
        char ro_file[1100];
        snprintf(ro_file, sizeof ro_file, "%s/x.safetensors", ro);
        ck_assert_int_eq(clt_st_write(ro_file, s.t, 3, NULL, NULL, 0), CLT_ERR_IO);
        ck_assert_int_eq(count_entries(ro), 0);
        rmdir(ro);
    }

    /* Success replaces the old file. */
    ck_assert_int_eq(clt_st_write(path, s.t + 5, 4, NULL, NULL, 0), CLT_OK);
    unsigned char *b = slurp(path, &size_b);
    ck_assert(size_b != size_a || memcmp(a, b, size_a) != 0);
    ck_assert_int_eq(clt_st_open(&f, path), CLT_OK);
    ck_assert_int_eq(clt_st_count(f), 4);
    ck_assert_str_eq(clt_st_get(f, 0)->name, s.t[5].name);
    clt_st_close(f);
    ck_assert_int_eq(count_entries(g_dir), 2);
    free(a);
    free(b);
    free_sample(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *json = tcase_create("json");
    tcase_add_test(json, json_nested);
    tcase_add_test(json, json_strings);
    tcase_add_test(json, json_numbers);
    tcase_add_test(json, json_rejects);
    tcase_add_test(json, json_writer);
    suite_add_tcase(s, json);
    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, setup, teardown);
    tcase_set_timeout(files, 120);
    tcase_add_test(files, round_trip);
    tcase_add_test(files, header_layout);
    tcase_add_test(files, corrupt_files);
    tcase_add_test(files, tolerated_files);
    tcase_add_test(files, trailing_and_special_files);
    tcase_add_test(files, truncated_files);
    tcase_add_test(files, mutated_files);
    tcase_add_test(files, atomic_write);
    suite_add_tcase(s, files);
    return tc_run(s);
}
