/* Text data on the host (cltrain/text.h): UTF-8 decoding, the char and byte vocabularies, their
 * JSON form for checkpoints, encoding and decoding, and text files opened into training and
 * validation splits of token ids. No ctx: failures go to the calling thread's message. */
#include "cltrain/text.h"
#include "data/data_internal.h"

#include "io/json.h"
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define UNICODE_END 0x110000u /* one past the largest code point */

struct clt_vocab {
    clt_text_tokens kind;
    size_t n;          /* V */
    uint32_t *sym;     /* (V) code points or byte values, strictly increasing */
    int32_t ascii[128]; /* id of each ASCII code point, -1 when absent: the common case, no search */
};

const char *clt_text_tokens_name(clt_text_tokens t)
{
    return t == CLT_TEXT_CHAR ? "char" : t == CLT_TEXT_BYTE ? "byte" : "unknown";
}

clt_status clt_text_tokens_parse(const char *s, clt_text_tokens *out)
{
    if (s && strcmp(s, "char") == 0) *out = CLT_TEXT_CHAR;
    else if (s && strcmp(s, "byte") == 0) *out = CLT_TEXT_BYTE;
    else
        return clt__fail(NULL, CLT_ERR_INVALID_ARG, "unknown tokens \"%s\": expected char or byte",
                         s ? s : "");
    return CLT_OK;
}

/* ---- UTF-8 ----------------------------------------------------------------------------------- */

/* The code point starting at s[0] (n > 0 bytes left) and its length in *cp and the return
 * value; 0 for an invalid sequence: a stray continuation byte, an overlong form, a surrogate,
 * above U+10FFFF, or cut short. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    const unsigned char c = s[0];
    uint32_t v;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) len = 2, v = c & 0x1fu;
    else if (c >= 0xe0 && c <= 0xef) len = 3, v = c & 0x0fu;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, v = c & 0x07u;
    else return 0;
    if (c == 0xe0) lo = 0xa0;      /* overlong */
    else if (c == 0xed) hi = 0x9f; /* surrogates */
    else if (c == 0xf0) lo = 0x90; /* overlong */
    else if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0u) != 0x80u) return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return len;
}

/* Writes cp as UTF-8 into dst (4 bytes of room); returns the length. */
static size_t utf8_put(uint32_t cp, char *dst)
{
    unsigned char *d = (unsigned char *)dst;
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xc0 | cp >> 6);
        d[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xe0 | cp >> 12);
        d[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        d[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    d[0] = (unsigned char)(0xf0 | cp >> 18);
    d[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    d[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    d[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

static clt_status bad_utf8(const char *source, const unsigned char *s, size_t at)
{
    return clt__fail(NULL, CLT_ERR_FORMAT,
                     "%s: invalid UTF-8 at byte offset %zu (byte 0x%02x); use --tokens byte for "
                     "text that is not UTF-8",
                     source, at, s[at]);
}

/* ---- the vocabulary ---------------------------------------------------------------------- */

static clt_status vocab_alloc(clt_vocab **out, clt_text_tokens kind, size_t n)
{
    clt_status st = CLT_OK;
    clt_vocab *v = NULL;
    CLT_ALLOC(NULL, v, 1);
    CLT_ALLOC(NULL, v->sym, n);
    v->kind = kind;
    v->n = n;
    *out = v;
    v = NULL;
fail:
    clt_vocab_free(v);
    return st;
}

/* Fills the ASCII table from sym. */
static void vocab_index(clt_vocab *v)
{
    for (int c = 0; c < 128; c++)
        v->ascii[c] = -1;
    for (size_t i = 0; i < v->n && v->sym[i] < 128; i++)
        v->ascii[v->sym[i]] = (int32_t)i;
}

/* The id of symbol cp, or -1. */
static int32_t vocab_find(const clt_vocab *v, uint32_t cp)
{
    if (cp < 128) return v->ascii[cp];
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->sym[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n && v->sym[lo] == cp ? (int32_t)lo : -1;
}

static clt_status vocab_bytes(clt_vocab **out)
{
    clt_status st = vocab_alloc(out, CLT_TEXT_BYTE, 256);
    if (st != CLT_OK) return st;
    for (uint32_t b = 0; b < 256; b++)
        (*out)->sym[b] = b;
    vocab_index(*out);
    return CLT_OK;
}

clt_status clt_vocab_from_text(clt_vocab **out, clt_text_tokens kind, const char *text,
                               size_t len, const char *source)
{
    clt_status st = CLT_OK;
    const unsigned char *s = (const unsigned char *)text;
    uint8_t *seen = NULL; /* one bit per code point */
    size_t n = 0;
    CLT_ASSERT(out && (text || len == 0));
    *out = NULL;
    if (!source) source = "text";
    if (kind == CLT_TEXT_BYTE) return vocab_bytes(out);
    if (kind != CLT_TEXT_CHAR)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "%s: unknown tokens %d", source, (int)kind);
    CLT_ALLOC(NULL, seen, UNICODE_END / 8);
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = utf8_next(s + i, len - i, &cp);
        if (k == 0) CLT_TRY(bad_utf8(source, s, i));
        if (!(seen[cp >> 3] & (1u << (cp & 7)))) n++;
        seen[cp >> 3] |= (uint8_t)(1u << (cp & 7));
        i += k;
    }
    CLT_TRY(vocab_alloc(out, CLT_TEXT_CHAR, n));
    for (uint32_t cp = 0, i = 0; cp < UNICODE_END; cp++)
        if (seen[cp >> 3] & (1u << (cp & 7))) (*out)->sym[i++] = cp;
    vocab_index(*out);
fail:
    free(seen);
    return st;
}

void clt_vocab_free(clt_vocab *v)
{
    if (!v) return;
    free(v->sym);
    free(v);
}

clt_text_tokens clt_vocab_kind(const clt_vocab *v) { return v->kind; }
size_t clt_vocab_size(const clt_vocab *v) { return v->n; }

uint32_t clt_vocab_symbol(const clt_vocab *v, size_t id)
{
    CLT_ASSERT(id < v->n);
    return v->sym[id];
}

clt_dtype clt_vocab_dtype(const clt_vocab *v)
{
    return v->n <= 256 ? CLT_DTYPE_U8 : v->n <= 65536 ? CLT_DTYPE_U16 : CLT_DTYPE_I32;
}

static clt_status vocab_copy(const clt_vocab *src, clt_vocab **out)
{
    clt_status st = vocab_alloc(out, src->kind, src->n);
    if (st != CLT_OK) return st;
    memcpy((*out)->sym, src->sym, src->n * sizeof *src->sym);
    vocab_index(*out);
    return CLT_OK;
}

clt_status clt_vocab_to_json(const clt_vocab *v, char **out)
{
    clt__json_buf b = {0};
    CLT_ASSERT(v && out);
    *out = NULL;
    if (v->kind == CLT_TEXT_BYTE) {
        clt__json_buf_printf(&b, "{\"tokens\":\"byte\",\"size\":%zu}", v->n);
    } else {
        clt__json_buf_puts(&b, "{\"tokens\":\"char\",\"symbols\":[");
        for (size_t i = 0; i < v->n; i++) {
            char u[4];
            if (i) clt__json_buf_puts(&b, ",");
            clt__json_buf_string(&b, u, utf8_put(v->sym[i], u));
        }
        clt__json_buf_puts(&b, "]}");
    }
    if (b.failed) {
        clt__json_buf_free(&b);
        return clt__fail(NULL, CLT_ERR_HOST_MEMORY, "out of host memory (vocabulary JSON)");
    }
    *out = b.data;
    return CLT_OK;
}

/* The char vocabulary of a JSON array of one-character strings in increasing order. */
static clt_status vocab_from_symbols(const clt__json *arr, clt_vocab **out)
{
    clt_status st = CLT_OK;
    const char *what = "vocabulary JSON: \"symbols\"";
    if (!arr || arr->type != CLT__JSON_ARRAY || arr->n == 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s must be a non-empty array of characters", what);
    CLT_TRY(vocab_alloc(out, CLT_TEXT_CHAR, arr->n));
    for (size_t i = 0; i < arr->n; i++) {
        const clt__json *it = &arr->items[i];
        uint32_t cp = 0;
        if (it->type != CLT__JSON_STRING || it->len == 0 ||
            utf8_next((const unsigned char *)it->str, it->len, &cp) != it->len)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: item %zu is not a string of one character", what,
                     i);
        if (i > 0 && cp <= (*out)->sym[i - 1])
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: item %zu (U+%04X) does not follow item %zu (U+%04X): the characters "
                     "must be in increasing order, each once",
                     what, i, (unsigned)cp, i - 1, (unsigned)(*out)->sym[i - 1]);
        (*out)->sym[i] = cp;
    }
    vocab_index(*out);
fail:
    if (st != CLT_OK) {
        clt_vocab_free(*out);
        *out = NULL;
    }
    return st;
}

clt_status clt_vocab_from_json(clt_vocab **out, const char *json, size_t len)
{
    clt_status st = CLT_OK;
    clt__json *doc = NULL;
    clt__json_error err;
    CLT_ASSERT(out && (json || len == 0));
    *out = NULL;
    st = clt__json_parse(&doc, json ? json : "", len, &err);
    if (st == CLT_ERR_FORMAT)
        CLT_FAIL(NULL, st, "vocabulary JSON: %s at byte %zu", err.msg, err.pos);
    if (st != CLT_OK) CLT_FAIL(NULL, st, "out of host memory (vocabulary JSON)");
    const clt__json *kind = clt__json_get(doc, "tokens");
    if (!kind || kind->type != CLT__JSON_STRING)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "vocabulary JSON: expected an object with \"tokens\": \"char\" or \"byte\"");
    if (strcmp(kind->str, "byte") == 0) {
        const clt__json *size = clt__json_get(doc, "size");
        if (!size || size->type != CLT__JSON_NUMBER || !size->int_literal || size->integer != 256)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "vocabulary JSON: a byte vocabulary has \"size\": 256");
        CLT_TRY(vocab_bytes(out));
    } else if (strcmp(kind->str, "char") == 0) {
        CLT_TRY(vocab_from_symbols(clt__json_get(doc, "symbols"), out));
    } else {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "vocabulary JSON: unknown \"tokens\" \"%.40s\": expected char or byte",
                 kind->str);
    }
fail:
    clt__json_free(doc);
    return st;
}

/* "'c' (U+XXXX)" for a printable character, "U+XXXX" for a control character, into dst. */
static void describe_char(uint32_t cp, char *dst, size_t n)
{
    char u[5] = {0};
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
        snprintf(dst, n, "U+%04X", (unsigned)cp);
        return;
    }
    u[utf8_put(cp, u)] = '\0';
    snprintf(dst, n, "'%s' (U+%04X)", u, (unsigned)cp);
}

clt_status clt_vocab_encode(const clt_vocab *v, const char *text, size_t len, const char *source,
                            int32_t **ids, size_t *n)
{
    clt_status st = CLT_OK;
    const unsigned char *s = (const unsigned char *)text;
    int32_t *out = NULL;
    size_t count = 0, line = 1, col = 1;
    CLT_ASSERT(v && ids && n && (text || len == 0));
    *ids = NULL;
    *n = 0;
    if (!source) source = "text";
    if (len == 0) return CLT_OK;
    CLT_ALLOC(NULL, out, len); /* at most one id per byte */
    for (size_t i = 0; i < len;) {
        uint32_t cp = s[i];
        size_t k = 1;
        if (v->kind == CLT_TEXT_CHAR && cp >= 0x80) {
            k = utf8_next(s + i, len - i, &cp);
            if (k == 0) CLT_TRY(bad_utf8(source, s, i));
        }
        int32_t id = vocab_find(v, cp);
        if (id < 0) {
            char what[32];
            describe_char(cp, what, sizeof what);
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: line %zu, column %zu: %s is not in the vocabulary (%zu %s)", source,
                     line, col, what, v->n, v->kind == CLT_TEXT_CHAR ? "characters" : "bytes");
        }
        out[count++] = id;
        if (cp == '\n') line++, col = 1;
        else col++;
        i += k;
    }
    *ids = out;
    *n = count;
    out = NULL;
fail:
    free(out);
    return st;
}

clt_status clt_vocab_decode(const clt_vocab *v, const int32_t *ids, size_t n, char **out,
                            size_t *len)
{
    clt_status st = CLT_OK;
    char *s = NULL;
    size_t at = 0;
    CLT_ASSERT(v && out && len && (ids || n == 0));
    *out = NULL;
    *len = 0;
    if (n > (SIZE_MAX - 1) / 4) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "decode: %zu ids", n);
    CLT_ALLOC(NULL, s, 4 * n + 1);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= v->n)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "decode: id %ld at position %zu is outside the vocabulary (0 .. %zu)",
                     (long)ids[i], i, v->n - 1);
        if (v->kind == CLT_TEXT_BYTE) s[at++] = (char)v->sym[ids[i]];
        else at += utf8_put(v->sym[ids[i]], s + at);
    }
    s[at] = '\0';
    *out = s;
    *len = at;
    s = NULL;
fail:
    free(s);
    return st;
}

/* ---- text data sets ------------------------------------------------------------------------ */

struct clt_text_params clt_text_default_params(void)
{
    struct clt_text_params p = {.tokens = CLT_TEXT_CHAR, .vocab = NULL};
    return p;
}

/* CLT_ERR_FORMAT unless a text of n tokens can train a language model at all. */
static clt_status check_tokens(const char *source, const clt_vocab *v, size_t n, const char *what)
{
    const char *unit = v->kind == CLT_TEXT_CHAR ? "character" : "byte";
    if (n == 0)
        return clt__fail(NULL, CLT_ERR_FORMAT,
                         "%s: %s is empty; a language model needs at least 2 %ss", source, what,
                         unit);
    if (n == 1)
        return clt__fail(NULL, CLT_ERR_FORMAT,
                         "%s: %s holds 1 %s; a language model needs at least 2", source, what,
                         unit);
    if (n > CLT_TEXT_MAX_TOKENS)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: %s holds %zu %ss, more than %u", source, what,
                         n, unit, CLT_TEXT_MAX_TOKENS);
    return CLT_OK;
}

/* The vocabulary (p's, or the training text's) and the training text's ids into *t; with
 * `split`, its last 10 % become the validation split (nanoGPT: n = len(data);
 * train = data[:int(n * 0.9)], val = the rest; 0.9 in double is just above 9/10, so int(n * 0.9)
 * is floor(9 n / 10) for every n a text can have). */
static clt_status text_train(clt_text *t, const char *text, size_t len, const char *source,
                             const struct clt_text_params *p, bool split)
{
    clt_status st = CLT_OK;
    snprintf(t->source, sizeof t->source, "%s", source);
    snprintf(t->val_source, sizeof t->val_source, "%s", source);
    if (p->vocab) CLT_TRY(vocab_copy(p->vocab, &t->vocab));
    else CLT_TRY(clt_vocab_from_text(&t->vocab, p->tokens, text, len, source));
    CLT_TRY(clt_vocab_encode(t->vocab, text, len, source, &t->train, &t->n_train));
    CLT_TRY(check_tokens(source, t->vocab, t->n_train, "the text"));
    if (split) {
        size_t n = t->n_train, nt = n / 10 * 9 + n % 10 * 9 / 10;
        t->n_val = n - nt;
        CLT_ALLOC(NULL, t->val, t->n_val);
        memcpy(t->val, t->train + nt, t->n_val * sizeof *t->val);
        t->n_train = nt;
    }
fail:
    return st;
}

/* The validation text's ids into *t, with t's vocabulary. */
static clt_status text_val(clt_text *t, const char *val, size_t len, const char *source)
{
    clt_status st = CLT_OK;
    t->val_from_file = true;
    snprintf(t->val_source, sizeof t->val_source, "%s", source);
    CLT_TRY(clt_vocab_encode(t->vocab, val, len, source, &t->val, &t->n_val));
    CLT_TRY(check_tokens(source, t->vocab, t->n_val, "the validation text"));
fail:
    return st;
}

clt_status clt_text_from_memory(clt_text *out, const char *text, size_t len, const char *val,
                                size_t val_len, const char *source,
                                const struct clt_text_params *p)
{
    clt_status st = CLT_OK;
    struct clt_text_params prm = p ? *p : clt_text_default_params();
    clt_text t;
    memset(&t, 0, sizeof t);
    CLT_ASSERT(out && (text || len == 0) && (val || val_len == 0));
    memset(out, 0, sizeof *out);
    if (!source) source = "text";
    CLT_TRY(text_train(&t, text, len, source, &prm, val == NULL));
    if (val) CLT_TRY(text_val(&t, val, val_len, source));
    *out = t;
    memset(&t, 0, sizeof t);
fail:
    clt_text_free(&t);
    return st;
}

clt_status clt_text_open(clt_text *out, const char *path, const char *val_path,
                         const struct clt_text_params *p)
{
    clt_status st = CLT_OK;
    struct clt_text_params prm = p ? *p : clt_text_default_params();
    char *text = NULL, *val = NULL;
    size_t len = 0, val_len = 0;
    clt_text t;
    memset(&t, 0, sizeof t);
    CLT_ASSERT(out);
    memset(out, 0, sizeof *out);
    if (!path) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_text_open: NULL path");
    CLT_TRY(clt__data_read_all(path, &text, &len));
    if (val_path) CLT_TRY(clt__data_read_all(val_path, &val, &val_len));
    CLT_TRY(text_train(&t, text, len, path, &prm, val_path == NULL));
    if (val_path) CLT_TRY(text_val(&t, val, val_len, val_path));
    *out = t;
    memset(&t, 0, sizeof t);
fail:
    free(text);
    free(val);
    clt_text_free(&t);
    return st;
}

clt_status clt_text_open_spec(clt_text *out, const char *spec, const struct clt_text_params *p)
{
    clt_status st = CLT_OK;
    char *path = NULL;
    CLT_ASSERT(out);
    memset(out, 0, sizeof *out);
    if (!spec) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_text_open_spec: NULL spec");
    if (strcmp(spec, "shakespeare") == 0) {
        const char *root = getenv("CLTRAIN_DATA_DIR");
        struct stat sb;
        size_t n;
        if (!root || !*root) root = CLT__DATASETS_DIR;
        n = strlen(root) + sizeof "/shakespeare/shakespeare.txt";
        CLT_ALLOC(NULL, path, n);
        snprintf(path, n, "%s/shakespeare/shakespeare.txt", root);
        if (stat(path, &sb) != 0)
            CLT_FAIL(NULL, CLT_ERR_IO,
                     "%s is missing (data set 'shakespeare', looked for under $CLTRAIN_DATA_DIR, "
                     "default " CLT__DATASETS_DIR
                     ": run tools/get_shakespeare.sh, set CLTRAIN_DATA_DIR to a folder holding "
                     "shakespeare/, or use text:FILE)",
                     path);
        CLT_TRY(clt_text_open(out, path, NULL, p));
    } else if (strncmp(spec, "text:", 5) == 0) {
        const char *files = spec + 5, *comma = strchr(files, ',');
        size_t n = strlen(files) + 1;
        CLT_ALLOC(NULL, path, n);
        memcpy(path, files, n);
        if (comma) path[comma - files] = '\0';
        if (!*path || (comma && (!comma[1] || strchr(comma + 1, ','))))
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "data set '%s': expected text:FILE or text:FILE,VAL_FILE (paths without "
                     "commas)",
                     spec);
        CLT_TRY(clt_text_open(out, path, comma ? comma + 1 : NULL, p));
    } else {
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "unknown text data set '%s': expected shakespeare or text:FILE[,VAL_FILE]", spec);
    }
fail:
    free(path);
    return st;
}

void clt_text_free(clt_text *t)
{
    if (!t) return;
    clt_vocab_free(t->vocab);
    free(t->train);
    free(t->val);
    memset(t, 0, sizeof *t);
}
