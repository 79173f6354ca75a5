/* The strict recursive-descent JSON parser behind the safetensors header (and any other JSON
 * the library reads), and the buffer/escaper used to write JSON. Parsing never aborts: bad
 * input gives CLT_ERR_FORMAT with the byte position. */
#include "io/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const unsigned char *s;
    size_t n, pos;
    int depth;
    clt__json_error *err;
} parser;

static clt_status perr(parser *p, size_t pos, const char *msg)
{
    if (p->err) {
        p->err->pos = pos;
        snprintf(p->err->msg, sizeof p->err->msg, "%s", msg);
    }
    return CLT_ERR_FORMAT;
}

static clt_status oom(parser *p)
{
    if (p->err) {
        p->err->pos = p->pos;
        snprintf(p->err->msg, sizeof p->err->msg, "out of host memory");
    }
    return CLT_ERR_HOST_MEMORY;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                             p->s[p->pos] == '\r'))
        p->pos++;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 if there is none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

bool clt__json_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

static int hex4(const unsigned char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->s[p->pos] is the opening quote. Decoded text never outgrows its escaped form, so one
 * allocation of the raw span suffices. */
static clt_status parse_string(parser *p, char **out, size_t *out_len)
{
    clt_status st = CLT_OK;
    size_t start = ++p->pos, end = start;
    char *o = NULL;
    size_t k = 0;

    while (end < p->n && p->s[end] != '"')
        end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->n) {
        st = perr(p, start - 1, "unterminated string");
        goto fail;
    }
    o = malloc(end - start + 1);
    if (!o) {
        st = oom(p);
        goto fail;
    }
    while (p->pos < end) {
        const unsigned char *c = p->s + p->pos;
        if (*c < 0x20) {
            st = perr(p, p->pos, "raw control character in string");
            goto fail;
        }
        if (*c != '\\') {
            size_t len = utf8_seq(c, end - p->pos);
            if (len == 0) {
                st = perr(p, p->pos, "invalid UTF-8 in string");
                goto fail;
            }
            memcpy(o + k, c, len);
            k += len;
            p->pos += len;
            continue;
        }
        static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
        const char *e = c[1] ? strchr(esc_in, c[1]) : NULL;
        if (e) {
            o[k++] = esc_out[e - esc_in];
            p->pos += 2;
            continue;
        }
        if (c[1] != 'u') {
            st = perr(p, p->pos, "invalid escape in string");
            goto fail;
        }
        long cp = (p->pos + 6 <= end) ? hex4(c + 2) : -1;
        if (cp < 0) {
            st = perr(p, p->pos, "\\u needs four hex digits");
            goto fail;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            st = perr(p, p->pos, "unpaired low surrogate");
            goto fail;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long lo = (p->pos + 12 <= end && c[6] == '\\' && c[7] == 'u') ? hex4(c + 8) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                st = perr(p, p->pos, "unpaired high surrogate");
                goto fail;
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p->pos += 6;
        }
        k += put_utf8(o + k, (unsigned long)cp);
        p->pos += 6;
    }
    o[k] = '\0';
    p->pos = end + 1;
    *out = o;
    *out_len = k;
    return CLT_OK;
fail:
    free(o);
    return st;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static clt_status parse_number(parser *p, clt__json *v)
{
    clt_status st = CLT_OK;
    size_t start = p->pos, i = p->pos;
    bool neg = false, integral = true, fits = true;
    unsigned long long mag = 0;
    char small[64], *copy = small, *endp = NULL;

    if (i < p->n && p->s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= p->n || !is_digit(p->s[i])) {
        st = perr(p, start, "invalid number");
        goto fail;
    }
    if (p->s[i] == '0') {
        i++;
        if (i < p->n && is_digit(p->s[i])) {
            st = perr(p, start, "leading zero in number");
            goto fail;
        }
    } else {
        for (; i < p->n && is_digit(p->s[i]); i++) {
            unsigned d = p->s[i] - '0';
            if (mag > (~0ull - d) / 10)
                fits = false;
            else
                mag = mag * 10 + d;
        }
    }
    if (i < p->n && p->s[i] == '.') {
        integral = false;
        if (++i >= p->n || !is_digit(p->s[i])) {
            st = perr(p, i, "digit expected after '.'");
            goto fail;
        }
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = false;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->n || !is_digit(p->s[i])) {
            st = perr(p, i, "digit expected in exponent");
            goto fail;
        }
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i - start >= sizeof small) {
        copy = malloc(i - start + 1);
        if (!copy) {
            st = oom(p);
            goto fail;
        }
    }
    memcpy(copy, p->s + start, i - start);
    copy[i - start] = '\0';
    errno = 0;
    v->number = strtod(copy, &endp);
    if (endp != copy + (i - start)) {
        st = perr(p, start, "number not convertible (is a non-C locale set?)");
        goto fail;
    }
    if (!isfinite(v->number)) {
        st = perr(p, start, "number out of range");
        goto fail;
    }
    v->type = CLT__JSON_NUMBER;
    if (integral) {
        fits = fits && (neg ? mag <= 9223372036854775808ull : mag <= 9223372036854775807ull);
        if (fits) {
            v->is_int = true;
            v->int_literal = true;
            v->integer = neg ? (int64_t)(0 - mag) : (int64_t)mag;
        }
    } else if (v->number == floor(v->number) && v->number >= -9223372036854775808.0 &&
               v->number < 9223372036854775808.0) {
        v->is_int = true;
        v->integer = (int64_t)v->number;
    }
    p->pos = i;
fail:
    if (copy != small) free(copy);
    return st;
}

static clt_status parse_value(parser *p, clt__json *v);

/* Arrays and objects: p->s[p->pos] is '[' or '{'. */
static clt_status parse_container(parser *p, clt__json *v, bool object)
{
    clt_status st = CLT_OK;
    size_t cap = 0;
    const unsigned char close = object ? '}' : ']';

    v->type = object ? CLT__JSON_OBJECT : CLT__JSON_ARRAY;
    if (++p->depth > CLT__JSON_MAX_DEPTH) {
        st = perr(p, p->pos, "nesting deeper than 64");
        goto fail;
    }
    p->pos++;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        goto done;
    }
    for (;;) {
        if (v->n == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            clt__json *items = realloc(v->items, ncap * sizeof *items);
            if (!items) goto no_memory;
            v->items = items;
            if (object) {
                char **keys = realloc(v->keys, ncap * sizeof *keys);
                if (!keys) goto no_memory;
                v->keys = keys;
                size_t *lens = realloc(v->key_lens, ncap * sizeof *lens);
                if (!lens) goto no_memory;
                v->key_lens = lens;
            }
            cap = ncap;
        }
        if (object) {
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != '"') {
                st = perr(p, p->pos, "object key (a string) expected");
                goto fail;
            }
            CLT_TRY(parse_string(p, &v->keys[v->n], &v->key_lens[v->n]));
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') {
                free(v->keys[v->n]);
                st = perr(p, p->pos, "':' expected after object key");
                goto fail;
            }
            p->pos++;
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        st = parse_value(p, &v->items[v->n]);
        v->n++; /* counted even on failure so that the partial item is freed */
        if (st != CLT_OK) goto fail;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        st = perr(p, p->pos, object ? "',' or '}' expected" : "',' or ']' expected");
        goto fail;
    }
done:
    p->depth--;
    return CLT_OK;
no_memory:
    st = oom(p);
fail:
    return st;
}

static clt_status parse_value(parser *p, clt__json *v)
{
    static const struct {
        const char *word;
        clt__json_type type;
        bool value;
    } literals[] = {{"null", CLT__JSON_NULL, false},
                    {"true", CLT__JSON_BOOL, true},
                    {"false", CLT__JSON_BOOL, false}};
    skip_ws(p);
    if (p->pos >= p->n) return perr(p, p->pos, "value expected, found end of text");
    unsigned char c = p->s[p->pos];
    if (c == '{' || c == '[') return parse_container(p, v, c == '{');
    if (c == '"') {
        v->type = CLT__JSON_STRING;
        return parse_string(p, &v->str, &v->len);
    }
    if (c == '-' || is_digit(c)) return parse_number(p, v);
    for (size_t i = 0; i < sizeof literals / sizeof literals[0]; i++) {
        size_t len = strlen(literals[i].word);
        if (p->n - p->pos >= len && memcmp(p->s + p->pos, literals[i].word, len) == 0) {
            v->type = literals[i].type;
            v->boolean = literals[i].value;
            p->pos += len;
            return CLT_OK;
        }
    }
    return perr(p, p->pos, "value expected");
}

static void free_children(clt__json *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        free_children(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
}

void clt__json_free(clt__json *v)
{
    if (!v) return;
    free_children(v);
    free(v);
}

clt_status clt__json_parse(clt__json **out, const char *text, size_t len, clt__json_error *err)
{
    clt_status st = CLT_OK;
    parser p = {(const unsigned char *)text, len, 0, 0, err};
    clt__json *v = calloc(1, sizeof *v);

    *out = NULL;
    if (!v) {
        st = oom(&p);
        goto fail;
    }
    CLT_TRY(parse_value(&p, v));
    skip_ws(&p);
    if (p.pos != p.n) {
        st = perr(&p, p.pos, "unexpected characters after the JSON value");
        goto fail;
    }
    *out = v;
    return CLT_OK;
fail:
    clt__json_free(v);
    return st;
}

const clt__json *clt__json_get(const clt__json *obj, const char *key)
{
    size_t len = strlen(key);
    if (!obj || obj->type != CLT__JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == len && memcmp(obj->keys[i], key, len) == 0) return &obj->items[i];
    return NULL;
}

const char *clt__json_type_name(clt__json_type t)
{
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

void clt__json_buf_append(clt__json_buf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void clt__json_buf_puts(clt__json_buf *b, const char *s)
{
    clt__json_buf_append(b, s, strlen(s));
}

void clt__json_buf_printf(clt__json_buf *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
    } else if ((size_t)n < sizeof small) {
        clt__json_buf_append(b, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big) {
            b->failed = true;
            return;
        }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        clt__json_buf_append(b, big, (size_t)n);
        free(big);
    }
}

void clt__json_buf_string(clt__json_buf *b, const char *s, size_t n)
{
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    clt__json_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        clt__json_buf_append(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"':
            clt__json_buf_puts(b, "\\\"");
            break;
        case '\\':
            clt__json_buf_puts(b, "\\\\");
            break;
        case '\n':
            clt__json_buf_puts(b, "\\n");
            break;
        case '\r':
            clt__json_buf_puts(b, "\\r");
            break;
        case '\t':
            clt__json_buf_puts(b, "\\t");
            break;
        case '\b':
            clt__json_buf_puts(b, "\\b");
            break;
        case '\f':
            clt__json_buf_puts(b, "\\f");
            break;
        default:
            clt__json_buf_printf(b, "\\u%04x", c);
            break;
        }
    }
    clt__json_buf_append(b, s + run, n - run);
    clt__json_buf_append(b, "\"", 1);
}

void clt__json_buf_free(clt__json_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
