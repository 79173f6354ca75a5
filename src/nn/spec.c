/* The model-spec parser: splits the text into entries (commas, newlines, '#' comments), parses
 * each entry into a layer through the layer table (src/nn/layer_internal.h: each kind reads and
 * writes its own words), expands the presets, validates, and writes the canonical text back.
 * Every error names the layer, its text, its line and column and what was expected. */
#include "cltrain/spec.h"
#include "nn/layer_internal.h"
#include "runtime/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPEC_MAX_TOKENS (1 + CLT__SPEC_MAX_ARGS) /* the name and its arguments */
#define SPEC_MAX_LAYERS CLT_SPEC_MAX_LAYERS /* deeper is a mistake (10,000 took 4.8 GB) */
#define SPEC_QUOTE_MAX 60       /* longest text quoted in a message */
#define SPEC_FILE_MAX (1 << 20) /* bytes */
#define SPEC_PIPE_WAIT_MS 5000  /* the longest a FIFO's writer may keep the reader waiting */

/* Presets: a name standing for a whole spec, its text with the word N for the number of
 * classes (a language model's head says V, the vocabulary, resolved as any "linear V" is), one
 * line saying what it is for (cltrain's help and manual print them) and, for a language model,
 * its window T. */
static const clt_spec_preset presets[] = {
    {"mlp", "linear 256, relu, linear 128, relu, linear N",
     "a multi-layer perceptron for flat inputs (the default of cltrain train)", 0, 0},
    {"logreg", "linear N", "multinomial logistic regression (linear regression for one output)",
     0, 0},
    {"cnn",
     "conv 32 k3 p1, batchnorm, relu, maxpool 2, conv 64 k3 p1, batchnorm, relu, maxpool 2, "
     "flatten, dropout 0.25, linear 128, relu, linear N",
     "a small convolutional network for (1, 28, 28)-like images", 0, 0},
#define RESNET_BLOCK(c, s)                                                                         \
    "residual { conv " c " k3" s " p1, batchnorm, relu, conv " c " k3 p1, batchnorm }, relu, "
    {"resnet",
     "conv 32 k3 p1, batchnorm, relu, " RESNET_BLOCK("32", "") RESNET_BLOCK("32", "")
         RESNET_BLOCK("64", " s2") RESNET_BLOCK("64", "") RESNET_BLOCK("128", " s2")
             RESNET_BLOCK("128", "") "globalavgpool, linear N",
     "a residual network of six basic blocks (32, 64, 128 channels) for (C, H, W) images", 0, 0},
#undef RESNET_BLOCK
/* GPT-2-style decoders (tools/torch_gpt.py builds the same text): pre-norm blocks, tied head */
#define GPT_BLOCK(h, d4, d, drop)                                                                  \
    "residual { layernorm, attention " h " causal" drop " }, residual { layernorm, linear " d4  \
    ", gelu, linear " d drop " }, "
#define GPT_HEAD "layernorm, linear V nobias tied"
    {"gpt-mini",
     "embed 128, posembed, " GPT_BLOCK("4", "512", "128", "") GPT_BLOCK("4", "512", "128", "")
         GPT_BLOCK("4", "512", "128", "") GPT_BLOCK("4", "512", "128", "") GPT_HEAD,
     "nanoGPT's CPU configuration: a character-level GPT of 4 layers, 4 heads, 128 dims, no "
     "dropout (text; --block 64 and --batch-size 12 by default)",
     64, 12},
#define GPT_CHAR_BLOCK GPT_BLOCK("6", "1536", "384", ", dropout 0.2")
    {"gpt-char",
     "embed 384, posembed, dropout 0.2, " GPT_CHAR_BLOCK GPT_CHAR_BLOCK GPT_CHAR_BLOCK
         GPT_CHAR_BLOCK GPT_CHAR_BLOCK GPT_CHAR_BLOCK GPT_HEAD,
     "nanoGPT's shakespeare_char: a character-level GPT of 6 layers, 6 heads, 384 dims, "
     "dropout 0.2 (text; --block 256 and --batch-size 64 by default)",
     256, 64},
#undef GPT_CHAR_BLOCK
#undef GPT_HEAD
#undef GPT_BLOCK
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const clt_spec_preset *clt_spec_preset_get(int i)
{
    return i >= 0 && i < NPRESETS ? &presets[i] : NULL;
}

/* The preset's text with its word N replaced by `classes` into buf; false when it does not fit. */
static bool expand_preset(const clt_spec_preset *p, int classes, char *buf, size_t size)
{
    size_t used = 0;
    for (const char *c = p->layers; *c; c++) {
        bool word_n = *c == 'N' && (c == p->layers || c[-1] == ' ') &&
                      (c[1] == '\0' || c[1] == ',' || c[1] == ' ');
        int len = word_n ? snprintf(buf + used, size - used, "%d", classes)
                         : snprintf(buf + used, size - used, "%c", *c);
        if (len < 0 || (size_t)len >= size - used) return false;
        used += (size_t)len;
    }
    return true;
}

/* Where the text came from: messages say "model spec" or `model spec file "<path>"`. */
typedef struct source {
    const char *text;
    const char *path; /* NULL: the text was given directly */
    bool lines;       /* positions say line and column */
} source;

/* One non-blank entry: its trimmed text and its first words. An entry ends at a comma, a newline,
 * a '{' (open: "residual {") or a '}' (close: the last entry of a block, maybe without words). */
typedef struct entry {
    const char *start, *end; /* trimmed text, [start, end) */
    bool open, close;        /* ended by '{' or by '}' */
    const char *brace;       /* that brace */
    const char *line_start;
    int line;
    int ntok; /* number of words; only the first SPEC_MAX_TOKENS are kept */
    const char *tok[SPEC_MAX_TOKENS];
    int len[SPEC_MAX_TOKENS];
} entry;

typedef struct cursor {
    const char *p;
    const char *line_start;
    int line;
} cursor;

/* What a kind's parser reports errors against: the entry, its source and its layer number. */
typedef struct args_where {
    const source *src;
    const entry *e;
    int layer;
} args_where;

const char *clt_layer_kind_name(clt_layer_kind k)
{
    return (unsigned)k < CLT_LAYER__COUNT ? clt__layer_kind_of(k)->name : "unknown";
}

const char *clt_layer_kind_usage(clt_layer_kind k)
{
    return (unsigned)k < CLT_LAYER__COUNT ? clt__layer_kind_of(k)->usage : NULL;
}

const char *clt_layer_kind_help(clt_layer_kind k)
{
    return (unsigned)k < CLT_LAYER__COUNT ? clt__layer_kind_of(k)->help : NULL;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool ends_word(char c)
{
    return c == '\0' || c == ',' || c == '\n' || c == '#' || c == '{' || c == '}' || is_blank(c);
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive: is the word [tok, tok + len) equal to `word`? */
static bool word_is(const char *tok, int len, const char *word)
{
    int i = 0;
    while (i < len && word[i] && lower(tok[i]) == word[i])
        i++;
    return i == len && word[i] == '\0';
}

/* How many characters of a `len`-long text a message quotes. */
static int quote_len(int len)
{
    return len > SPEC_QUOTE_MAX ? SPEC_QUOTE_MAX : len;
}

int clt__spec_quote_len(int len)
{
    return quote_len(len);
}

static void cursor_init(cursor *c, const char *text)
{
    c->p = text;
    c->line_start = text;
    c->line = 1;
}

/* Moves c past the next non-blank entry and describes it in *e; false at the end of the text. */
static bool next_entry(cursor *c, entry *e)
{
    while (*c->p) {
        const char *p = c->p;
        memset(e, 0, sizeof *e);
        e->line = c->line;
        e->line_start = c->line_start;
        while (*p && *p != ',' && *p != '\n' && *p != '#' && *p != '{' && *p != '}') {
            if (is_blank(*p)) {
                p++;
                continue;
            }
            const char *t = p;
            while (!ends_word(*p))
                p++;
            if (e->ntok < SPEC_MAX_TOKENS) {
                e->tok[e->ntok] = t;
                e->len[e->ntok] = (int)(p - t);
            }
            if (!e->start) e->start = t;
            e->end = p;
            if (e->ntok < SPEC_MAX_TOKENS + 1) e->ntok++;
        }
        if (*p == '#')
            while (*p && *p != '\n')
                p++;
        if (*p == '{' || *p == '}') {
            e->open = *p == '{';
            e->close = *p == '}';
            e->brace = p++;
            if (!e->start) {
                e->start = e->brace;
                e->end = e->brace + 1;
            }
            if (e->close) { /* "}, next": the comma separates the block from the next entry */
                while (is_blank(*p))
                    p++;
                if (*p == ',') p++;
            }
        } else if (*p == ',') {
            p++;
        } else if (*p == '\n') {
            p++;
            c->line++;
            c->line_start = p;
        }
        c->p = p;
        if (e->ntok > 0 || e->open || e->close) return true;
        if (*(p - 1) == ',' && p - 1 >= e->line_start) {
            /* Nothing before a comma ("a,,b", ", a"): reported, not skipped. */
            e->start = e->end = p - 1;
            return true;
        }
    }
    return false;
}

/* Records "<source>: layer L ("<entry>") at <position of at>: <detail>" and returns status. */
static clt_status ventry_fail(const source *src, const entry *e, int layer, const char *at,
                              clt_status status, const char *fmt, va_list ap)
    CLT__PRINTF(6, 0);
static clt_status ventry_fail(const source *src, const entry *e, int layer, const char *at,
                              clt_status status, const char *fmt, va_list ap)
{
    char detail[512];
    char where[64];
    int col = (int)(at - e->line_start) + 1;
    int len = (int)(e->end - e->start);
    vsnprintf(detail, sizeof detail, fmt, ap);
    if (src->lines)
        snprintf(where, sizeof where, "line %d, column %d", e->line, col);
    else
        snprintf(where, sizeof where, "column %d", col);
    return clt__fail(NULL, status, "model spec%s%s%s: layer %d (\"%.*s%s\") at %s: %s",
                     src->path ? " file \"" : "", src->path ? src->path : "", src->path ? "\"" : "",
                     layer, quote_len(len), e->start, len > SPEC_QUOTE_MAX ? "..." : "", where,
                     detail);
}

static clt_status entry_fail(const source *src, const entry *e, int layer, const char *at,
                             clt_status status, const char *fmt, ...) CLT__PRINTF(6, 7);
static clt_status entry_fail(const source *src, const entry *e, int layer, const char *at,
                             clt_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    clt_status st = ventry_fail(src, e, layer, at, status, fmt, ap);
    va_end(ap);
    return st;
}

clt_status clt__spec_args_fail(const struct clt__spec_args *a, int i, const char *fmt, ...)
{
    const args_where *w = a->where;
    CLT_ASSERT(i >= -1 && i < CLT__SPEC_MAX_ARGS && i < a->n);
    va_list ap;
    va_start(ap, fmt);
    clt_status st = ventry_fail(w->src, w->e, w->layer, i < 0 ? w->e->end : a->word[i],
                                CLT_ERR_FORMAT, fmt, ap);
    va_end(ap);
    return st;
}

bool clt__spec_arg_is(const struct clt__spec_args *a, int i, const char *w)
{
    CLT_ASSERT(i >= 0 && i < CLT__SPEC_MAX_ARGS && i < a->n);
    return word_is(a->word[i], a->len[i], w);
}

bool clt__spec_arg_digits(const struct clt__spec_args *a, int i, int skip, long long cap,
                          long long *out)
{
    CLT_ASSERT(i >= 0 && i < CLT__SPEC_MAX_ARGS && i < a->n);
    long long v = 0;
    if (a->len[i] <= skip) return false;
    for (int j = skip; j < a->len[i]; j++) {
        char c = a->word[i][j];
        if (c < '0' || c > '9') return false;
        if (v <= cap) v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
}

bool clt__spec_arg_number(const struct clt__spec_args *a, int i, double *out)
{
    char buf[64];
    char *end = NULL;
    CLT_ASSERT(i >= 0 && i < CLT__SPEC_MAX_ARGS && i < a->n);
    if (a->len[i] >= (int)sizeof buf) return false;
    memcpy(buf, a->word[i], (size_t)a->len[i]);
    buf[a->len[i]] = '\0';
    *out = strtod(buf, &end);
    return end == buf + a->len[i];
}

/* Records "<source>: <detail>" for failures that belong to no layer. */
static clt_status source_fail(const source *src, clt_status status, const char *detail)
{
    return clt__fail(NULL, status, "model spec%s%s%s: %s", src->path ? " file \"" : "",
                     src->path ? src->path : "", src->path ? "\"" : "", detail);
}

/* Inside the entry parsers: record a format error at `at` and jump to fail. */
#define SPEC_FAIL(at, ...)                                                                         \
    do {                                                                                           \
        st = entry_fail(src, e, layer, (at), CLT_ERR_FORMAT, __VA_ARGS__);                         \
        goto fail;                                                                                 \
    } while (0)

/* Word i of e, for "%.*s". */
#define SPEC_TOK(e, i) quote_len((e)->len[i]), (e)->tok[i]

/* "linear, relu, ... or leakyrelu": every kind's name, in table order. */
static void kind_list(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < CLT_LAYER__COUNT && used < size; k++) {
        const char *sep = k == 0 ? "" : k == CLT_LAYER__COUNT - 1 ? " or " : ", ";
        int len = snprintf(buf + used, size - used, "%s%s", sep,
                           clt__layer_kind_of((clt_layer_kind)k)->name);
        if (len < 0) break;
        used += (size_t)len;
    }
}

static clt_status parse_layer(const source *src, const entry *e, int layer, clt_layer_spec *out)
{
    clt_status st = CLT_OK;
    clt_layer_spec l = {0};
    int kind = 0;
    while (kind < CLT_LAYER__COUNT &&
           !word_is(e->tok[0], e->len[0], clt__layer_kind_of((clt_layer_kind)kind)->name))
        kind++;
    if (kind == CLT_LAYER__COUNT) {
        char kinds[256];
        for (int i = 0; i < NPRESETS; i++)
            if (word_is(e->tok[0], e->len[0], presets[i].name))
                SPEC_FAIL(e->tok[0], "preset \"%s\" must be the whole spec, not one of its layers",
                          presets[i].name);
        kind_list(kinds, sizeof kinds);
        SPEC_FAIL(e->tok[0], "unknown layer \"%.*s\"; expected %s", SPEC_TOK(e, 0), kinds);
    }
    l.kind = (clt_layer_kind)kind;
    const args_where where = {src, e, layer};
    struct clt__spec_args a = {.n = e->ntok - 1, .where = &where};
    for (int i = 0; i < CLT__SPEC_MAX_ARGS && i < a.n; i++) {
        a.word[i] = e->tok[i + 1];
        a.len[i] = e->len[i + 1];
    }
    CLT_TRY(clt__layer_kind_of(l.kind)->parse(&a, &l));
    *out = l;
fail:
    return st;
}

static void free_layers(clt_layer_spec *layers, int n)
{
    for (int i = 0; layers && i < n; i++) {
        free_layers(layers[i].body, layers[i].body_n);
        free(layers[i].body);
    }
}

static bool is_residual(const entry *e)
{
    return e->ntok > 0 && word_is(e->tok[0], e->len[0], clt__layer_residual.name);
}

/* One layer from entry e; a residual block reads its body's entries from c up to its '}'. */
static clt_status parse_entry(const source *src, cursor *c, const entry *e, int layer,
                              clt_layer_spec *out)
{
    clt_status st = CLT_OK;
    clt_layer_spec l = {0};
    int cap = 0;
    if (e->close)
        SPEC_FAIL(e->brace, "unexpected '}': no residual block is open");
    if (e->open && !is_residual(e))
        SPEC_FAIL(e->brace, "'{' opens the layers of a block and must follow \"residual\"");
    if (!is_residual(e)) return parse_layer(src, e, layer, out);
    if (e->ntok > 1)
        SPEC_FAIL(e->tok[1], "unexpected \"%.*s\"; expected '{' after residual", SPEC_TOK(e, 1));
    if (!e->open)
        SPEC_FAIL(e->end, "expected '{' after residual: its layers go in braces, e.g. "
                          "\"residual { conv 64 k3 p1, batchnorm, relu, conv 64 k3 p1, batchnorm "
                          "}\"");
    l.kind = CLT_LAYER_RESIDUAL;
    for (;;) {
        entry b;
        if (!next_entry(c, &b))
            SPEC_FAIL(e->brace, "missing '}': the residual block opened here is not closed");
        if (b.open) {
            const entry *be = &b;
            if (is_residual(&b))
                st = entry_fail(src, be, layer, b.tok[0], CLT_ERR_FORMAT,
                                "a residual block inside a residual block is not supported");
            else
                st = entry_fail(src, be, layer, b.brace, CLT_ERR_FORMAT,
                                "'{' opens the layers of a block and must follow \"residual\"");
            goto fail;
        }
        if (b.ntok > 0) {
            if (is_residual(&b)) {
                st = entry_fail(src, &b, layer, b.tok[0], CLT_ERR_FORMAT,
                                "a residual block inside a residual block is not supported");
                goto fail;
            }
            if (l.body_n == cap) {
                int ncap = cap ? 2 * cap : 4;
                clt_layer_spec *nb = realloc(l.body, (size_t)ncap * sizeof *nb);
                if (!nb) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "model spec: out of host memory");
                l.body = nb;
                cap = ncap;
            }
            CLT_TRY(parse_layer(src, &b, layer, &l.body[l.body_n]));
            l.body_n++;
        }
        if (b.close) break;
    }
    if (l.body_n == 0)
        SPEC_FAIL(e->brace, "empty residual block; expected its layers between '{' and '}', e.g. "
                            "\"residual { conv 64 k3 p1, batchnorm }\"");
    *out = l;
    l.body = NULL;
    l.body_n = 0;
fail:
    free_layers(l.body, l.body_n);
    free(l.body);
    return st;
}

static clt_status parse_source(const source *src, int classes, clt_spec *out);

/* The whole spec is the one word in e: expand the preset it names, if it is one. */
static clt_status parse_preset(const source *src, const entry *e, int classes, clt_spec *out,
                               bool *found)
{
    clt_status st = CLT_OK;
    const int layer = 1;
    char text[2048]; /* the longest preset (gpt-char, 1 KB) with an 8-digit N */
    *found = false;
    for (int i = 0; i < NPRESETS && !*found; i++) {
        if (!word_is(e->tok[0], e->len[0], presets[i].name)) continue;
        *found = true;
        if (e->ntok > 1)
            SPEC_FAIL(e->tok[1], "preset \"%s\" takes no arguments, got \"%.*s\"", presets[i].name,
                      SPEC_TOK(e, 1));
        if (classes < 1 || classes > CLT_SPEC_MAX_WIDTH) {
            st = entry_fail(src, e, layer, e->tok[0], CLT_ERR_INVALID_ARG,
                            "preset \"%s\" needs the number of classes, in [1, %d], got %d",
                            presets[i].name, CLT_SPEC_MAX_WIDTH, classes);
            goto fail;
        }
        bool fits = expand_preset(&presets[i], classes, text, sizeof text);
        CLT_ASSERT(fits); /* 2048 bytes hold the longest preset with an 8-digit N */
        const source expanded = {text, NULL, false};
        CLT_TRY(parse_source(&expanded, classes, out));
    }
fail:
    return st;
}

static clt_status parse_source(const source *src, int classes, clt_spec *out)
{
    clt_status st = CLT_OK;
    clt_spec s = {0, NULL};
    cursor c;
    entry e;
    int count = 0;
    bool preset = false;
    *out = s;
    cursor_init(&c, src->text);
    while (count <= SPEC_MAX_LAYERS && next_entry(&c, &e)) {
        count++;
        if (e.ntok == 0 && !e.open && !e.close) {
            st = entry_fail(src, &e, count, e.start, CLT_ERR_FORMAT,
                            "empty layer: nothing before this comma (\"a,,b\" or a leading "
                            "comma); remove the extra comma");
            goto fail;
        }
    }
    if (count == 0) {
        char detail[256];
        int used = snprintf(detail, sizeof detail, "no layers; expected e.g. \"linear 128, "
                                                   "relu, linear 10\" or a preset ");
        for (int i = 0; i < NPRESETS && used > 0 && (size_t)used < sizeof detail; i++)
            used += snprintf(detail + used, sizeof detail - (size_t)used, "%s%s%s",
                             i ? ", " : "(", presets[i].name, i == NPRESETS - 1 ? ")" : "");
        st = source_fail(src, CLT_ERR_FORMAT, detail);
        goto fail;
    }
    if (count > SPEC_MAX_LAYERS) {
        st = source_fail(src, CLT_ERR_FORMAT, "more than 1024 layers; a model spec this deep is "
                                              "almost certainly a mistake");
        goto fail;
    }
    cursor_init(&c, src->text);
    next_entry(&c, &e);
    if (count == 1) CLT_TRY(parse_preset(src, &e, classes, &s, &preset));
    if (!preset) {
        CLT_ALLOC(NULL, s.layers, count);
        do {
            CLT_TRY(parse_entry(src, &c, &e, s.n + 1, &s.layers[s.n]));
            s.n++;
        } while (next_entry(&c, &e));
    }
    *out = s;
    s.layers = NULL;
    s.n = 0;
fail:
    free_layers(s.layers, s.n);
    free(s.layers);
    return st;
}

/* Does the text hold a newline before its last non-blank character? */
static bool has_lines(const char *text)
{
    const char *last = NULL;
    const char *first_nl = strchr(text, '\n');
    for (const char *p = text; *p; p++)
        if (!is_blank(*p) && *p != '\n') last = p;
    return first_nl && last && first_nl < last;
}

clt_status clt_spec_parse(const char *text, int classes, clt_spec *out)
{
    CLT_ASSERT(text && out);
    const source src = {text, NULL, has_lines(text)};
    return parse_source(&src, classes, out);
}

/* Reads up to `max` bytes of fd into buf (*n of them). A regular file is read at once. A FIFO
 * (a named pipe, or the shell's <(...)) is read until its writer closes it, each wait for more
 * text bounded by SPEC_PIPE_WAIT_MS: the descriptor is non-blocking, and a FIFO no writer ever
 * opens gives no end of file, only silence, so the wait must end by itself. */
static clt_status read_spec_text(int fd, bool fifo, const char *path, char *buf, size_t max,
                                 size_t *n)
{
    size_t have = 0;
    while (have < max) {
        if (fifo) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int ready = poll(&pfd, 1, SPEC_PIPE_WAIT_MS);
            if (ready < 0 && errno == EINTR) continue;
            if (ready < 0)
                return clt__fail(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot read: %s",
                                 path, strerror(errno));
            if (ready == 0)
                return clt__fail(NULL, CLT_ERR_IO,
                                 "model spec file \"%s\": is a FIFO (named pipe) and nothing "
                                 "was written to it for %d s (no writer?); refused rather than "
                                 "waiting for ever",
                                 path, SPEC_PIPE_WAIT_MS / 1000);
        }
        ssize_t got = read(fd, buf + have, max - have);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got < 0)
            return clt__fail(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot read: %s", path,
                             strerror(errno));
        if (got == 0) break;
        have += (size_t)got;
    }
    *n = have;
    return CLT_OK;
}

clt_status clt_spec_parse_file(const char *path, int classes, clt_spec *out)
{
    clt_status st = CLT_OK;
    int fd = -1;
    char *text = NULL;
    size_t n = 0;
    struct stat sb;
    source src = {NULL, path, true};
    CLT_ASSERT(path && out);
    out->n = 0;
    out->layers = NULL;
    /* O_NONBLOCK: a FIFO without a writer must not hold the open (see read_spec_text) */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot open: %s", path,
                 strerror(errno));
    if (fstat(fd, &sb) != 0)
        CLT_FAIL(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot stat: %s", path,
                 strerror(errno));
    if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode))
        CLT_FAIL(NULL, CLT_ERR_IO,
                 "model spec file \"%s\": is %s; a model spec is read from a file or a pipe",
                 path, clt__file_kind_name((unsigned)sb.st_mode));
    CLT_ALLOC(NULL, text, SPEC_FILE_MAX + 2);
    CLT_TRY(read_spec_text(fd, S_ISFIFO(sb.st_mode), path, text, SPEC_FILE_MAX + 1, &n));
    if (n > SPEC_FILE_MAX)
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "model spec file \"%s\": larger than 1 MiB; a model spec is a short text", path);
    if (memchr(text, '\0', n))
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "model spec file \"%s\": holds a NUL byte; a model spec is a short text", path);
    text[n] = '\0';
    src.text = text;
    CLT_TRY(parse_source(&src, classes, out));
fail:
    if (fd >= 0) close(fd);
    free(text);
    return st;
}

clt_status clt_spec_validate(const clt_spec *s, int in_features, int outputs)
{
    clt_status st = CLT_OK;
    int last = -1;
    CLT_ASSERT(s && s->n >= 0 && (s->n == 0 || s->layers));
    if (in_features < 1)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the data has %d input features; expected at least 1", in_features);
    if (outputs < 1)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the data has %d classes; expected at least 1", outputs);
    for (int i = 0; i < s->n; i++) {
        const clt_layer_spec *l = &s->layers[i];
        if ((unsigned)l->kind >= CLT_LAYER__COUNT)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "model spec: layer %d has unknown kind %d", i + 1,
                     (int)l->kind);
        const struct clt__layer_kind *k = clt__layer_kind_of(l->kind);
        CLT_TRY(k->check(l, i + 1));
        if (k->weighted) last = i;
    }
    if (last < 0)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the model has no linear layer; it needs at least one, e.g. "
                 "\"linear %d\"",
                 outputs);
    if (s->layers[last].kind != CLT_LAYER_LINEAR)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the last layer with weights is layer %d (%s); a model ends with a "
                 "linear layer of %d outputs, e.g. \"flatten, linear %d\" after it",
                 last + 1, clt__layer_kind_of(s->layers[last].kind)->name, outputs, outputs);
    if (s->layers[last].out != outputs && s->layers[last].out != CLT_SPEC_WIDTH_V)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the last linear layer has %d outputs but the data has %d classes",
                 s->layers[last].out, outputs);
fail:
    return st;
}

bool clt_spec_takes_tokens(const clt_spec *s)
{
    return s && s->n > 0 && clt__layer_kind_of(s->layers[0].kind)->tokens;
}

clt_status clt_spec_check_output(const clt_spec *s)
{
    clt_status st = CLT_OK;
    int last = -1;
    CLT_ASSERT(s && s->n >= 0 && (s->n == 0 || s->layers));
    for (int i = 0; i < s->n; i++)
        if ((unsigned)s->layers[i].kind < CLT_LAYER__COUNT &&
            clt__layer_kind_of(s->layers[i].kind)->weighted)
            last = i;
    for (int i = last + 1; i < s->n; i++) {
        if ((unsigned)s->layers[i].kind >= CLT_LAYER__COUNT) continue;
        const struct clt__layer_kind *k = clt__layer_kind_of(s->layers[i].kind);
        if (k->activation)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s) comes after the last linear layer; the loss reads "
                     "that layer's outputs as they are (logits for classification, where softmax "
                     "is part of the loss; the predictions for regression), and an activation "
                     "there clips or squashes them. Remove it, or put a linear layer after it",
                     i + 1, k->name);
    }
fail:
    return st;
}

void clt__spec_format_real(float v, char *buf, size_t size)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, size, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    /* "10", not "1e+01": whole numbers below 1e16 without an exponent (P < 1 never has one) */
    if (strstr(buf, "e+") && fabsf(v) < 1e16f && v == truncf(v))
        snprintf(buf, size, "%.0f", (double)v);
}

size_t clt__spec_layer_text_size(const clt_layer_spec *l)
{
    /* ", linear 16777216 nobias" or ", leakyrelu <%.9g>" fit in 48; a block: its layers, braces */
    return 48 + (l->kind == CLT_LAYER_RESIDUAL && l->body_n > 0 ? (size_t)l->body_n * 48 + 8 : 0);
}

clt_status clt_spec_to_string(const clt_spec *s, char **out)
{
    clt_status st = CLT_OK;
    char *text = NULL, *args = NULL;
    size_t used = 0, cap = 1, widest = 0;
    CLT_ASSERT(s && out && s->n >= 0 && (s->n == 0 || s->layers));
    *out = NULL;
    for (int i = 0; i < s->n; i++) {
        size_t n = clt__spec_layer_text_size(&s->layers[i]);
        cap += n;
        if (n > widest) widest = n;
    }
    CLT_ALLOC(NULL, text, cap);
    CLT_ALLOC(NULL, args, widest + 1);
    text[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        const clt_layer_spec *l = &s->layers[i];
        const char *sep = i ? ", " : "";
        if ((unsigned)l->kind >= CLT_LAYER__COUNT)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "model spec: layer %d has unknown kind %d", i + 1,
                     (int)l->kind);
        const struct clt__layer_kind *k = clt__layer_kind_of(l->kind);
        k->format(l, args, widest + 1);
        int len = snprintf(text + used, cap - used, "%s%s%s", sep, k->name, args);
        if (len > 0) used += (size_t)len;
        if (used >= cap) used = cap - 1;
    }
    *out = text;
    text = NULL;
fail:
    free(args);
    free(text);
    return st;
}

void clt_spec_free(clt_spec *s)
{
    if (!s) return;
    free_layers(s->layers, s->n);
    free(s->layers);
    s->layers = NULL;
    s->n = 0;
}

clt_status clt__spec_copy(clt_spec *dst, const clt_spec *src)
{
    clt_status st = CLT_OK;
    clt_spec d = {0, NULL};
    *dst = d;
    if (src->n == 0) return CLT_OK;
    CLT_ALLOC(NULL, d.layers, src->n);
    for (; d.n < src->n; d.n++) {
        const clt_layer_spec *l = &src->layers[d.n];
        d.layers[d.n] = *l;
        d.layers[d.n].body = NULL;
        d.layers[d.n].body_n = 0;
        if (l->body_n > 0 && l->body) {
            clt_spec sub = {l->body_n, l->body}, copy;
            CLT_TRY(clt__spec_copy(&copy, &sub));
            d.layers[d.n].body = copy.layers;
            d.layers[d.n].body_n = copy.n;
        }
    }
    *dst = d;
    d.layers = NULL;
    d.n = 0;
fail:
    clt_spec_free(&d);
    return st;
}
