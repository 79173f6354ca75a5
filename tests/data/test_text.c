/* Text data on the host (src/data/text.c): the char vocabulary (sorted code points, non-ASCII
 * included) and the byte vocabulary, encode/decode round trips, the vocabulary's JSON round trip
 * and its malformed forms, the nanoGPT split rule, a separate validation file, the token dtype by
 * vocabulary size, and the errors: invalid UTF-8 with its byte offset, a character outside the
 * vocabulary with its line and column, empty and 1-character texts, bad specs. */
#include "common.h"
#include "cltrain/text.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "hé€😀\n" in UTF-8 plus ASCII: 1-, 2-, 3- and 4-byte characters. */
static const char mixed[] = "ba\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\nab\xc3\xa9";

static clt_vocab *vocab_of(clt_text_tokens kind, const char *s, size_t n)
{
    clt_vocab *v = NULL;
    ck_assert_msg(clt_vocab_from_text(&v, kind, s, n, "t.txt") == CLT_OK, "%s", clt_last_errmsg());
    return v;
}

START_TEST(test_char_vocab)
{
    clt_vocab *v = vocab_of(CLT_TEXT_CHAR, mixed, strlen(mixed));
    const uint32_t want[] = {'\n', 'a', 'b', 0xe9, 0x20ac, 0x1f600};
    ck_assert_int_eq(clt_vocab_kind(v), CLT_TEXT_CHAR);
    ck_assert_uint_eq(clt_vocab_size(v), 6);
    for (size_t i = 0; i < 6; i++)
        ck_assert_uint_eq(clt_vocab_symbol(v, i), want[i]);
    ck_assert_int_eq(clt_vocab_dtype(v), CLT_DTYPE_U8);

    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *back = NULL;
    ck_assert_int_eq(clt_vocab_encode(v, mixed, strlen(mixed), "t.txt", &ids, &n), CLT_OK);
    const int32_t want_ids[] = {2, 1, 3, 4, 5, 0, 1, 2, 3};
    ck_assert_uint_eq(n, 9);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], want_ids[i]);
    ck_assert_int_eq(clt_vocab_decode(v, ids, n, &back, &len), CLT_OK);
    ck_assert_uint_eq(len, strlen(mixed));
    ck_assert_mem_eq(back, mixed, len);
    free(back);
    ids[4] = 6; /* outside */
    ck_assert_int_eq(clt_vocab_decode(v, ids, n, &back, &len), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "position 4"), "%s", clt_last_errmsg());
    free(ids);
    clt_vocab_free(v);
}
END_TEST

START_TEST(test_byte_vocab)
{
    /* any bytes, invalid UTF-8 included, round trip through 256 ids */
    const char raw[] = "a\xff\x80\xc3\xa9\0z";
    const size_t rn = sizeof raw - 1;
    clt_vocab *v = vocab_of(CLT_TEXT_BYTE, raw, rn);
    ck_assert_uint_eq(clt_vocab_size(v), 256);
    ck_assert_int_eq(clt_vocab_dtype(v), CLT_DTYPE_U8);
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *back = NULL;
    ck_assert_int_eq(clt_vocab_encode(v, raw, rn, NULL, &ids, &n), CLT_OK);
    ck_assert_uint_eq(n, rn);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], (unsigned char)raw[i]);
    ck_assert_int_eq(clt_vocab_decode(v, ids, n, &back, &len), CLT_OK);
    ck_assert_uint_eq(len, rn);
    ck_assert_mem_eq(back, raw, rn);
    free(back);
    free(ids);
    clt_vocab_free(v);
}
END_TEST

/* A text with `count` distinct code points from U+0100 up (2-, 3- and 4-byte UTF-8). */
static char *many_chars(size_t count, size_t *len)
{
    char *s = malloc(4 * count + 1);
    size_t at = 0;
    ck_assert_ptr_nonnull(s);
    for (uint32_t cp = 0x100; cp < 0x100 + count; cp++) {
        uint32_t c = cp >= 0xd800 ? cp + 0x800 : cp; /* skip the surrogates */
        if (c < 0x800) {
            s[at++] = (char)(0xc0 | c >> 6);
        } else if (c >= 0x10000) {
            s[at++] = (char)(0xf0 | c >> 18);
            s[at++] = (char)(0x80 | (c >> 12 & 0x3f));
            s[at++] = (char)(0x80 | (c >> 6 & 0x3f));
        } else {
            s[at++] = (char)(0xe0 | c >> 12);
            s[at++] = (char)(0x80 | (c >> 6 & 0x3f));
        }
        s[at++] = (char)(0x80 | (c & 0x3f));
    }
    s[at] = '\0';
    *len = at;
    return s;
}

START_TEST(test_vocab_dtypes)
{
    /* u8 up to 256 ids, u16 up to 65536, i32 above */
    const struct {
        size_t count;
        clt_dtype d;
    } rows[] = {{256, CLT_DTYPE_U8}, {257, CLT_DTYPE_U16}, {65536, CLT_DTYPE_U16},
                {65537, CLT_DTYPE_I32}};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        size_t len;
        char *s = many_chars(rows[r].count, &len);
        clt_vocab *v = vocab_of(CLT_TEXT_CHAR, s, len);
        ck_assert_uint_eq(clt_vocab_size(v), rows[r].count);
        ck_assert_int_eq(clt_vocab_dtype(v), rows[r].d);
        if (r == 3) { /* the largest one survives JSON too */
            char *json = NULL;
            clt_vocab *w = NULL;
            ck_assert_int_eq(clt_vocab_to_json(v, &json), CLT_OK);
            ck_assert_int_eq(clt_vocab_from_json(&w, json, strlen(json)), CLT_OK);
            ck_assert_uint_eq(clt_vocab_size(w), rows[r].count);
            for (size_t i = 0; i < rows[r].count; i++)
                ck_assert_uint_eq(clt_vocab_symbol(w, i), clt_vocab_symbol(v, i));
            free(json);
            clt_vocab_free(w);
        }
        clt_vocab_free(v);
        free(s);
    }
}
END_TEST

START_TEST(test_vocab_json)
{
    const char text[] = "\"q\\\x01\t\xc3\xa9 \xf0\x9f\x98\x80";
    clt_vocab *v = vocab_of(CLT_TEXT_CHAR, text, sizeof text - 1), *w = NULL;
    char *json = NULL;
    ck_assert_int_eq(clt_vocab_to_json(v, &json), CLT_OK);
    ck_assert_str_eq(json, "{\"tokens\":\"char\",\"symbols\":[\"\\u0001\",\"\\t\",\" \",\"\\\"\","
                           "\"\\\\\",\"q\",\"\xc3\xa9\",\"\xf0\x9f\x98\x80\"]}");
    ck_assert_int_eq(clt_vocab_from_json(&w, json, strlen(json)), CLT_OK);
    ck_assert_int_eq(clt_vocab_kind(w), CLT_TEXT_CHAR);
    ck_assert_uint_eq(clt_vocab_size(w), clt_vocab_size(v));
    for (size_t i = 0; i < clt_vocab_size(v); i++)
        ck_assert_uint_eq(clt_vocab_symbol(w, i), clt_vocab_symbol(v, i));
    free(json);
    clt_vocab_free(w);
    clt_vocab_free(v);

    v = vocab_of(CLT_TEXT_BYTE, "", 0);
    ck_assert_int_eq(clt_vocab_to_json(v, &json), CLT_OK);
    ck_assert_str_eq(json, "{\"tokens\":\"byte\",\"size\":256}");
    ck_assert_int_eq(clt_vocab_from_json(&w, json, strlen(json)), CLT_OK);
    ck_assert_int_eq(clt_vocab_kind(w), CLT_TEXT_BYTE);
    ck_assert_uint_eq(clt_vocab_size(w), 256);
    free(json);
    clt_vocab_free(w);
    clt_vocab_free(v);

    /* malformed: each refused with a message naming the fault */
    const struct {
        const char *json, *says;
    } bad[] = {
        {"", "vocabulary JSON"},
        {"[\"a\",\"b\"]", "\"tokens\""},
        {"{\"tokens\":\"word\"}", "unknown \"tokens\" \"word\""},
        {"{\"tokens\":\"byte\",\"size\":255}", "256"},
        {"{\"tokens\":\"char\"}", "non-empty array"},
        {"{\"tokens\":\"char\",\"symbols\":[]}", "non-empty array"},
        {"{\"tokens\":\"char\",\"symbols\":[\"ab\"]}", "item 0 is not a string of one character"},
        {"{\"tokens\":\"char\",\"symbols\":[\"a\",\"\"]}", "item 1 is not"},
        {"{\"tokens\":\"char\",\"symbols\":[\"a\",3]}", "item 1 is not"},
        {"{\"tokens\":\"char\",\"symbols\":[\"b\",\"a\"]}", "increasing order"},
        {"{\"tokens\":\"char\",\"symbols\":[\"a\",\"a\"]}", "increasing order"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        w = (clt_vocab *)1;
        ck_assert_int_eq(clt_vocab_from_json(&w, bad[i].json, strlen(bad[i].json)),
                         CLT_ERR_FORMAT);
        ck_assert_ptr_null(w);
        ck_assert_msg(tc_contains(clt_last_errmsg(), bad[i].says), "%s: \"%s\", expected \"%s\"",
                      bad[i].json, clt_last_errmsg(), bad[i].says);
    }
}
END_TEST

START_TEST(test_invalid_utf8)
{
    /* the byte offset of the first bad sequence, in vocabulary building and in encoding */
    const struct {
        const char *s;
        size_t at;
    } bad[] = {
        {"ab\x80", 2},               /* stray continuation */
        {"abc\xc3", 3},              /* cut short */
        {"a\xc0\xaf", 1},            /* overlong '/' */
        {"ab\xe0\x80\xaf", 2},       /* overlong, 3 bytes */
        {"\xed\xa0\x80", 0},         /* a surrogate */
        {"xy\xf4\x90\x80\x80z", 2},  /* above U+10FFFF */
        {"\xc3\xa9\xff", 2},         /* 0xff never occurs */
        {"\xe2\x82", 0},             /* cut short, 3 bytes */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        clt_vocab *v = (clt_vocab *)1;
        char want[64];
        snprintf(want, sizeof want, "bad.txt: invalid UTF-8 at byte offset %zu", bad[i].at);
        ck_assert_int_eq(clt_vocab_from_text(&v, CLT_TEXT_CHAR, bad[i].s, strlen(bad[i].s),
                                             "bad.txt"),
                         CLT_ERR_FORMAT);
        ck_assert_ptr_null(v);
        ck_assert_msg(tc_contains(clt_last_errmsg(), want), "case %zu: \"%s\"", i,
                      clt_last_errmsg());
        clt_text t;
        ck_assert_int_eq(clt_text_from_memory(&t, bad[i].s, strlen(bad[i].s), NULL, 0, "bad.txt",
                                              NULL),
                         CLT_ERR_FORMAT);
        ck_assert_msg(tc_contains(clt_last_errmsg(), want), "case %zu: \"%s\"", i,
                      clt_last_errmsg());
        /* byte tokens take them */
        struct clt_text_params p = clt_text_default_params();
        p.tokens = CLT_TEXT_BYTE;
        if (strlen(bad[i].s) >= 2) {
            ck_assert_int_eq(clt_text_from_memory(&t, bad[i].s, strlen(bad[i].s), NULL, 0,
                                                  "bad.txt", &p),
                             CLT_OK);
            clt_text_free(&t);
        }
    }
}
END_TEST

START_TEST(test_outside_vocab)
{
    clt_vocab *v = vocab_of(CLT_TEXT_CHAR, "abc\n", 4);
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    const struct {
        const char *s, *says;
    } bad[] = {
        {"abc\nab\xc3\xa9", "val.txt: line 2, column 3: '\xc3\xa9' (U+00E9) is not in the "
                            "vocabulary (4 characters)"},
        {"ab\xe2\x82\xac\nz", "line 1, column 3: '\xe2\x82\xac' (U+20AC)"},
        {"a\n\nb\tc", "line 3, column 2: U+0009 is not in the vocabulary"},
        {"Z", "line 1, column 1: 'Z' (U+005A)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(clt_vocab_encode(v, bad[i].s, strlen(bad[i].s), "val.txt", &ids, &n),
                         CLT_ERR_FORMAT);
        ck_assert_ptr_null(ids);
        ck_assert_uint_eq(n, 0);
        ck_assert_msg(tc_contains(clt_last_errmsg(), bad[i].says), "\"%s\", expected \"%s\"",
                      clt_last_errmsg(), bad[i].says);
    }
    /* the same through a text opened with a given vocabulary (a checkpoint's) */
    struct clt_text_params p = clt_text_default_params();
    clt_text t;
    p.vocab = v;
    ck_assert_int_eq(clt_text_from_memory(&t, "abcab", 5, "ab\nbd", 5, "x.txt", &p),
                     CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "line 2, column 2: 'd'"), "%s",
                  clt_last_errmsg());
    ck_assert_int_eq(clt_text_from_memory(&t, "abcab", 5, "ab\nbc", 5, "x.txt", &p), CLT_OK);
    ck_assert_uint_eq(clt_vocab_size(t.vocab), 4);
    ck_assert_uint_eq(t.n_train, 5);
    ck_assert_uint_eq(t.n_val, 5);
    ck_assert_int_eq(t.val[2], 0); /* '\n' */
    clt_text_free(&t);
    clt_vocab_free(v);
}
END_TEST

START_TEST(test_split)
{
    /* nanoGPT: train = data[:int(n * 0.9)], val = data[int(n * 0.9):], in characters */
    const size_t ns[] = {2, 9, 10, 11, 19, 20, 29, 101, 1000, 12345};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const size_t n = ns[k];
        /* two-byte characters, so that characters and bytes differ */
        char *s = malloc(2 * n + 1);
        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < n; i++) {
            s[2 * i] = (char)0xce;
            s[2 * i + 1] = (char)(0x91 + i % 7); /* Greek capitals */
        }
        clt_text t;
        ck_assert_int_eq(clt_text_from_memory(&t, s, 2 * n, NULL, 0, "g.txt", NULL), CLT_OK);
        const size_t want = (size_t)((double)n * 0.9);
        ck_assert_msg(t.n_train == want, "n = %zu: %zu training tokens, expected %zu", n,
                      t.n_train, want);
        ck_assert_uint_eq(t.n_val, n - want);
        ck_assert(!t.val_from_file);
        ck_assert_uint_eq(clt_vocab_size(t.vocab), n < 7 ? n : 7);
        for (size_t i = 0; i < n; i++) {
            const int32_t id = i < t.n_train ? t.train[i] : t.val[i - t.n_train];
            ck_assert_int_eq(id, (int32_t)(i % 7));
        }
        ck_assert_str_eq(t.source, "g.txt");
        ck_assert_str_eq(t.val_source, "g.txt");
        clt_text_free(&t);
        free(s);
    }
}
END_TEST

START_TEST(test_short_texts)
{
    clt_text t;
    const struct {
        const char *s, *val, *says;
    } bad[] = {
        {"", NULL, "s.txt: the text is empty; a language model needs at least 2 characters"},
        {"\xc3\xa9", NULL, "s.txt: the text holds 1 character; a language model needs at least 2"},
        {"ab", "", "the validation text is empty"},
        {"ab", "a", "the validation text holds 1 character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(clt_text_from_memory(&t, bad[i].s, strlen(bad[i].s), bad[i].val,
                                              bad[i].val ? strlen(bad[i].val) : 0, "s.txt",
                                              NULL),
                         CLT_ERR_FORMAT);
        ck_assert_ptr_null(t.vocab);
        ck_assert_msg(tc_contains(clt_last_errmsg(), bad[i].says), "\"%s\", expected \"%s\"",
                      clt_last_errmsg(), bad[i].says);
    }
    struct clt_text_params p = clt_text_default_params();
    p.tokens = CLT_TEXT_BYTE;
    ck_assert_int_eq(clt_text_from_memory(&t, "a", 1, NULL, 0, "s.txt", &p), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "holds 1 byte"), "%s", clt_last_errmsg());
    /* 2 characters are enough (1 trains, 1 validates) */
    ck_assert_int_eq(clt_text_from_memory(&t, "ab", 2, NULL, 0, "s.txt", NULL), CLT_OK);
    ck_assert_uint_eq(t.n_train, 1);
    ck_assert_uint_eq(t.n_val, 1);
    clt_text_free(&t);
}
END_TEST

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_files_and_specs)
{
    char dir[512], tr[600], va[600], spec[1400];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(tr, sizeof tr, "%s/train.txt", dir);
    snprintf(va, sizeof va, "%s/val.txt", dir);
    write_file(tr, "hello world\n");
    write_file(va, "old\nwhere\n");
    clt_text t;
    snprintf(spec, sizeof spec, "text:%s,%s", tr, va);
    ck_assert_msg(clt_text_open_spec(&t, spec, NULL) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(t.val_from_file);
    ck_assert_uint_eq(t.n_train, 12); /* the whole training file trains */
    ck_assert_uint_eq(t.n_val, 10);
    ck_assert_uint_eq(clt_vocab_size(t.vocab), 9); /* "\n dehlorw" */
    ck_assert_str_eq(t.source, tr);
    ck_assert_str_eq(t.val_source, va);
    clt_text_free(&t);

    snprintf(spec, sizeof spec, "text:%s", tr);
    ck_assert_int_eq(clt_text_open_spec(&t, spec, NULL), CLT_OK);
    ck_assert(!t.val_from_file);
    ck_assert_uint_eq(t.n_train, 10);
    ck_assert_uint_eq(t.n_val, 2);
    clt_text_free(&t);

    /* the validation file's characters outside the training file's vocabulary */
    write_file(va, "hello\nwork\n");
    ck_assert_int_eq(clt_text_open(&t, tr, va, NULL), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "val.txt: line 2, column 4: 'k' (U+006B)"), "%s",
                  clt_last_errmsg());

    /* bad specs and missing files */
    const char *bad[] = {"text:", "text:,b", "text:a,", "text:a,b,c", "words:x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(clt_text_open_spec(&t, bad[i], NULL), CLT_ERR_INVALID_ARG);
        ck_assert_msg(tc_contains(clt_last_errmsg(), bad[i]), "%s: %s", bad[i], clt_last_errmsg());
    }
    snprintf(spec, sizeof spec, "text:%s/missing.txt", dir);
    ck_assert_int_eq(clt_text_open_spec(&t, spec, NULL), CLT_ERR_IO);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "missing.txt"), "%s", clt_last_errmsg());
    /* a FIFO without a writer is refused at once, not waited on (alarm: a regression fails
     * rather than hangs) */
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/fifo.txt", dir);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    snprintf(spec, sizeof spec, "text:%s", fifo);
    alarm(20);
    ck_assert_int_eq(clt_text_open_spec(&t, spec, NULL), CLT_ERR_IO);
    alarm(0);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "fifo.txt: is a FIFO (named pipe), not a regular "
                                                 "file"),
                  "%s", clt_last_errmsg());
    setenv("CLTRAIN_DATA_DIR", dir, 1);
    ck_assert_int_eq(clt_text_open_spec(&t, "shakespeare", NULL), CLT_ERR_IO);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "shakespeare/shakespeare.txt is missing") &&
                      tc_contains(clt_last_errmsg(), "tools/get_shakespeare.sh"),
                  "%s", clt_last_errmsg());
    unsetenv("CLTRAIN_DATA_DIR");
    tc_rmdir(dir);
}
END_TEST

START_TEST(test_tokens_names)
{
    clt_text_tokens k;
    ck_assert_int_eq(clt_text_tokens_parse("byte", &k), CLT_OK);
    ck_assert_int_eq(k, CLT_TEXT_BYTE);
    ck_assert_int_eq(clt_text_tokens_parse("char", &k), CLT_OK);
    ck_assert_int_eq(k, CLT_TEXT_CHAR);
    ck_assert_str_eq(clt_text_tokens_name(CLT_TEXT_BYTE), "byte");
    ck_assert_int_eq(clt_text_tokens_parse("bpe", &k), CLT_ERR_INVALID_ARG);
    ck_assert_msg(tc_contains(clt_last_errmsg(), "\"bpe\": expected char or byte"), "%s",
                  clt_last_errmsg());
}
END_TEST

int main(void)
{
    Suite *s = suite_create("text");
    TCase *tc = tc_tcase("text");
    tcase_add_test(tc, test_char_vocab);
    tcase_add_test(tc, test_byte_vocab);
    tcase_add_test(tc, test_vocab_dtypes);
    tcase_add_test(tc, test_vocab_json);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_outside_vocab);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_short_texts);
    tcase_add_test(tc, test_files_and_specs);
    tcase_add_test(tc, test_tokens_names);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
