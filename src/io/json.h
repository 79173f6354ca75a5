/* A small strict JSON parser into a DOM (RFC 8259: objects keep key order, strings decoded to
 * UTF-8, numbers as double plus an exact int64 when integral, nesting limited to 64) and a
 * growable buffer with a string escaper for writing JSON. Private to the library. */
#ifndef CLTRAIN_IO_JSON_H
#define CLTRAIN_IO_JSON_H

#include "cltrain/status.h"
#include "runtime/internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLT__JSON_MAX_DEPTH 64

typedef enum clt__json_type {
    CLT__JSON_NULL = 0,
    CLT__JSON_BOOL,
    CLT__JSON_NUMBER,
    CLT__JSON_STRING,
    CLT__JSON_ARRAY,
    CLT__JSON_OBJECT
} clt__json_type;

typedef struct clt__json clt__json;
struct clt__json {
    clt__json_type type;
    bool boolean;     /* BOOL */
    double number;    /* NUMBER */
    bool is_int;      /* NUMBER: integral and within int64; `integer` is then exact */
    int64_t integer;  /* NUMBER, when is_int */
    bool int_literal; /* NUMBER: is_int and written as an integer (no '.', no exponent: not
                         32.0 or 3.2e1), for fields that must be integers */
    char *str;        /* STRING: UTF-8, NUL-terminated; may hold NULs from \u0000 (see len) */
    size_t len;       /* STRING: bytes in str */
    size_t n;         /* ARRAY, OBJECT: number of items */
    clt__json *items; /* ARRAY, OBJECT: n values, in document order */
    char **keys;      /* OBJECT: n keys, NUL-terminated UTF-8 (duplicates are kept) */
    size_t *key_lens; /* OBJECT: bytes in each key */
};

/* Where and why parsing failed. pos is the 0-based byte offset into the text. */
typedef struct clt__json_error {
    size_t pos;
    char msg[96];
} clt__json_error;

/* Parses exactly one JSON value, with optional surrounding whitespace, from text[0..len).
 * Strict: no comments, trailing commas, leading zeros, NaN/Infinity, raw control characters
 * in strings, invalid UTF-8 or unpaired surrogates; numbers must fit a finite double.
 * On success *out owns a tree that clt__json_free releases. Returns CLT_ERR_FORMAT (err, if
 * non-NULL, says where and why) or CLT_ERR_HOST_MEMORY; records nothing for the thread: the
 * caller writes the message. Thread-safe. */
clt_status clt__json_parse(clt__json **out, const char *text, size_t len, clt__json_error *err);
/* Releases a tree from clt__json_parse. Accepts NULL. */
void clt__json_free(clt__json *v);
/* The value of the first member of object `obj` named `key`, or NULL if absent or `obj` is not
 * an object. */
const clt__json *clt__json_get(const clt__json *obj, const char *key);
/* "null", "boolean", "number", "string", "array", "object": for messages. */
const char *clt__json_type_name(clt__json_type t);
/* True if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
bool clt__json_utf8_valid(const char *s, size_t n);

/* A growable text buffer for writing JSON. Zero-initialise it. After an allocation failure
 * `failed` stays true and appends do nothing; check it once at the end. */
typedef struct clt__json_buf {
    char *data; /* NUL-terminated when non-NULL */
    size_t len, cap;
    bool failed;
} clt__json_buf;

void clt__json_buf_append(clt__json_buf *b, const char *s, size_t n);
void clt__json_buf_puts(clt__json_buf *b, const char *s);
void clt__json_buf_printf(clt__json_buf *b, const char *fmt, ...) CLT__PRINTF(2, 3);
/* Appends s[0..n) as a quoted JSON string: '"' and '\\' escaped, control characters as \n, \t,
 * ... or \u00XX, other bytes (UTF-8) as they are. The caller checks UTF-8 validity. */
void clt__json_buf_string(clt__json_buf *b, const char *s, size_t n);
void clt__json_buf_free(clt__json_buf *b);

#endif
