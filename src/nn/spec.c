/* The model-spec parser: splits the text into entries (commas, newlines, '#' comments), parses
 * each entry into a layer, expands the presets, and writes the canonical text back. Every error
 * names the layer, its text, its line and column and what was expected. */
#include "cltrain/spec.h"
#include "runtime/internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define SPEC_MAX_TOKENS 4 /* "linear 128 nobias" and one word too many */
#define SPEC_MAX_LAYERS CLT_SPEC_MAX_LAYERS /* deeper is a mistake (10,000 took 4.8 GB) */
#define SPEC_QUOTE_MAX 60       /* longest text quoted in a message */
#define SPEC_FILE_MAX (1 << 20) /* bytes */

static const char *const kind_names[CLT_LAYER__COUNT] = {
    [CLT_LAYER_LINEAR] = "linear",   [CLT_LAYER_RELU] = "relu",
    [CLT_LAYER_GELU] = "gelu",       [CLT_LAYER_TANH] = "tanh",
    [CLT_LAYER_SIGMOID] = "sigmoid", [CLT_LAYER_DROPOUT] = "dropout",
    [CLT_LAYER_FLATTEN] = "flatten",
};

/* Presets: a name and its text, with %d for the number of classes. */
static const struct {
    const char *name;
    const char *text;
} presets[] = {
    {"mlp", "linear 256, relu, linear 128, relu, linear %d"},
    {"logreg", "linear %d"},
};

/* Where the text came from: messages say "model spec" or `model spec file "<path>"`. */
typedef struct source {
    const char *text;
    const char *path; /* NULL: the text was given directly */
    bool lines;       /* positions say line and column */
} source;

/* One non-blank entry: its trimmed text and its first words. */
typedef struct entry {
    const char *start, *end; /* trimmed text, [start, end) */
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

const char *clt_layer_kind_name(clt_layer_kind k)
{
    return (unsigned)k < CLT_LAYER__COUNT ? kind_names[k] : "unknown";
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static bool ends_word(char c)
{
    return c == '\0' || c == ',' || c == '\n' || c == '#' || is_blank(c);
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
        while (*p && *p != ',' && *p != '\n' && *p != '#') {
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
        if (*p == ',') {
            p++;
        } else if (*p == '\n') {
            p++;
            c->line++;
            c->line_start = p;
        }
        c->p = p;
        if (e->ntok > 0) return true;
        if (*(p - 1) == ',' && p - 1 >= e->line_start) {
            /* Nothing before a comma ("a,,b", ", a"): reported, not skipped. */
            e->start = e->end = p - 1;
            return true;
        }
    }
    return false;
}

/* Records "<source>: layer L ("<entry>") at <position of at>: <detail>" and returns status. */
static clt_status entry_fail(const source *src, const entry *e, int layer, const char *at,
                             clt_status status, const char *fmt, ...) CLT__PRINTF(6, 7);
static clt_status entry_fail(const source *src, const entry *e, int layer, const char *at,
                             clt_status status, const char *fmt, ...)
{
    char detail[512];
    char where[64];
    int col = (int)(at - e->line_start) + 1;
    int len = (int)(e->end - e->start);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (src->lines)
        snprintf(where, sizeof where, "line %d, column %d", e->line, col);
    else
        snprintf(where, sizeof where, "column %d", col);
    return clt__fail(NULL, status, "model spec%s%s%s: layer %d (\"%.*s%s\") at %s: %s",
                     src->path ? " file \"" : "", src->path ? src->path : "", src->path ? "\"" : "",
                     layer, quote_len(len), e->start, len > SPEC_QUOTE_MAX ? "..." : "", where,
                     detail);
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

static clt_status parse_width(const source *src, const entry *e, int layer, int *out)
{
    clt_status st = CLT_OK;
    long long v = 0;
    bool digits = e->len[1] > 0;
    for (int i = 0; i < e->len[1] && digits; i++) {
        char c = e->tok[1][i];
        digits = c >= '0' && c <= '9';
        if (digits && v <= CLT_SPEC_MAX_WIDTH) v = v * 10 + (c - '0');
    }
    if (!digits || v == 0)
        SPEC_FAIL(e->tok[1], "width must be a positive integer, got \"%.*s\"", SPEC_TOK(e, 1));
    if (v > CLT_SPEC_MAX_WIDTH)
        SPEC_FAIL(e->tok[1], "width must be at most %d, got \"%.*s\"", CLT_SPEC_MAX_WIDTH,
                  SPEC_TOK(e, 1));
    *out = (int)v;
fail:
    return st;
}

static clt_status parse_probability(const source *src, const entry *e, int layer, float *out)
{
    clt_status st = CLT_OK;
    char buf[64];
    char *end = NULL;
    double d = 0.0;
    bool number = e->len[1] < (int)sizeof buf;
    if (number) {
        memcpy(buf, e->tok[1], (size_t)e->len[1]);
        buf[e->len[1]] = '\0';
        d = strtod(buf, &end);
        number = end == buf + e->len[1];
    }
    if (!number)
        SPEC_FAIL(e->tok[1], "dropout probability must be a number in [0, 1), got \"%.*s\"",
                  SPEC_TOK(e, 1));
    /* Checked after rounding to float: 0.999999999 would become 1. */
    if (!(d >= 0.0 && (float)d < 1.0f))
        SPEC_FAIL(e->tok[1], "dropout probability must be in [0, 1), got %s", buf);
    *out = (float)d + 0.0f; /* "-0" reads as 0 */
fail:
    return st;
}

static clt_status parse_layer(const source *src, const entry *e, int layer, clt_layer_spec *out)
{
    clt_status st = CLT_OK;
    clt_layer_spec l = {0};
    int kind = 0;
    while (kind < CLT_LAYER__COUNT && !word_is(e->tok[0], e->len[0], kind_names[kind]))
        kind++;
    if (kind == CLT_LAYER__COUNT) {
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
            if (word_is(e->tok[0], e->len[0], presets[i].name))
                SPEC_FAIL(e->tok[0], "preset \"%s\" must be the whole spec, not one of its layers",
                          presets[i].name);
        SPEC_FAIL(e->tok[0],
                  "unknown layer \"%.*s\"; expected linear, relu, gelu, tanh, sigmoid, dropout "
                  "or flatten",
                  SPEC_TOK(e, 0));
    }
    l.kind = (clt_layer_kind)kind;
    switch (l.kind) {
    case CLT_LAYER_LINEAR:
        if (e->ntok < 2) SPEC_FAIL(e->end, "linear needs a width, e.g. \"linear 128\"");
        CLT_TRY(parse_width(src, e, layer, &l.out));
        l.bias = true;
        if (e->ntok >= 3) {
            if (!word_is(e->tok[2], e->len[2], "nobias"))
                SPEC_FAIL(e->tok[2],
                          "unexpected \"%.*s\" after the width; expected \"nobias\" or the end of "
                          "the layer",
                          SPEC_TOK(e, 2));
            l.bias = false;
        }
        if (e->ntok >= 4)
            SPEC_FAIL(e->tok[3],
                      "unexpected \"%.*s\" after \"nobias\"; expected the end of the layer",
                      SPEC_TOK(e, 3));
        break;
    case CLT_LAYER_DROPOUT:
        if (e->ntok < 2) SPEC_FAIL(e->end, "dropout needs a probability, e.g. \"dropout 0.1\"");
        CLT_TRY(parse_probability(src, e, layer, &l.p));
        if (e->ntok >= 3)
            SPEC_FAIL(e->tok[2],
                      "unexpected \"%.*s\" after the probability; expected the end of the layer",
                      SPEC_TOK(e, 2));
        break;
    default:
        if (e->ntok >= 2)
            SPEC_FAIL(e->tok[1], "%s takes no arguments, got \"%.*s\"", kind_names[l.kind],
                      SPEC_TOK(e, 1));
        break;
    }
    *out = l;
fail:
    return st;
}

static clt_status parse_source(const source *src, int classes, clt_spec *out);

/* The whole spec is the one word in e: expand the preset it names, if it is one. */
static clt_status parse_preset(const source *src, const entry *e, int classes, clt_spec *out,
                               bool *found)
{
    clt_status st = CLT_OK;
    const int layer = 1;
    char text[128];
    *found = false;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0] && !*found; i++) {
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
        snprintf(text, sizeof text, presets[i].text, classes);
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
        if (e.ntok == 0) {
            st = entry_fail(src, &e, count, e.start, CLT_ERR_FORMAT,
                            "empty layer: nothing before this comma (\"a,,b\" or a leading "
                            "comma); remove the extra comma");
            goto fail;
        }
    }
    if (count == 0) {
        st = source_fail(src, CLT_ERR_FORMAT,
                         "no layers; expected e.g. \"linear 128, relu, linear 10\" or a preset "
                         "(mlp, logreg)");
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
            CLT_TRY(parse_layer(src, &e, s.n + 1, &s.layers[s.n]));
            s.n++;
        } while (next_entry(&c, &e));
    }
    *out = s;
    s.layers = NULL;
fail:
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

clt_status clt_spec_parse_file(const char *path, int classes, clt_spec *out)
{
    clt_status st = CLT_OK;
    FILE *f = NULL;
    char *text = NULL;
    size_t n = 0;
    source src = {NULL, path, true};
    CLT_ASSERT(path && out);
    out->n = 0;
    out->layers = NULL;
    f = fopen(path, "rb");
    if (!f)
        CLT_FAIL(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot open: %s", path,
                 strerror(errno));
    CLT_ALLOC(NULL, text, SPEC_FILE_MAX + 2);
    n = fread(text, 1, SPEC_FILE_MAX + 1, f);
    if (ferror(f))
        CLT_FAIL(NULL, CLT_ERR_IO, "model spec file \"%s\": cannot read: %s", path,
                 strerror(errno));
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
    if (f) fclose(f);
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
        if (l->kind == CLT_LAYER_LINEAR) {
            if (l->out < 1 || l->out > CLT_SPEC_MAX_WIDTH)
                CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                         "model spec: layer %d: linear width must be in [1, %d], got %d", i + 1,
                         CLT_SPEC_MAX_WIDTH, l->out);
            last = i;
        }
        if (l->kind == CLT_LAYER_DROPOUT && !(l->p >= 0.0f && l->p < 1.0f))
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d: dropout probability must be in [0, 1), got %g", i + 1,
                     (double)l->p);
    }
    if (last < 0)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the model has no linear layer; it needs at least one, e.g. "
                 "\"linear %d\"",
                 outputs);
    if (s->layers[last].out != outputs)
        CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                 "model spec: the last linear layer has %d outputs but the data has %d classes",
                 s->layers[last].out, outputs);
fail:
    return st;
}

clt_status clt_spec_check_output(const clt_spec *s)
{
    clt_status st = CLT_OK;
    int last = -1;
    CLT_ASSERT(s && s->n >= 0 && (s->n == 0 || s->layers));
    for (int i = 0; i < s->n; i++)
        if (s->layers[i].kind == CLT_LAYER_LINEAR) last = i;
    for (int i = last + 1; i < s->n; i++) {
        clt_layer_kind k = s->layers[i].kind;
        if (k == CLT_LAYER_RELU || k == CLT_LAYER_GELU || k == CLT_LAYER_TANH ||
            k == CLT_LAYER_SIGMOID)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "model spec: layer %d (%s) comes after the last linear layer; the loss reads "
                     "that layer's outputs as they are (logits for classification, where softmax "
                     "is part of the loss; the predictions for regression), and an activation "
                     "there clips or squashes them. Remove it, or put a linear layer after it",
                     i + 1, kind_names[k]);
    }
fail:
    return st;
}

/* The shortest "%g" text of p that strtof reads back as p. */
static void format_probability(float p, char *buf, size_t size)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, size, "%.*g", prec, (double)p);
        if (strtof(buf, NULL) == p) break;
    }
}

clt_status clt_spec_to_string(const clt_spec *s, char **out)
{
    clt_status st = CLT_OK;
    char *text = NULL;
    size_t used = 0;
    const size_t per_layer = 48; /* ", linear 16777216 nobias" or ", dropout <%.9g>" fit */
    CLT_ASSERT(s && out && s->n >= 0 && (s->n == 0 || s->layers));
    *out = NULL;
    CLT_ALLOC(NULL, text, (size_t)s->n * per_layer + 1);
    for (int i = 0; i < s->n; i++) {
        const clt_layer_spec *l = &s->layers[i];
        const char *sep = i ? ", " : "";
        char prob[32];
        size_t room = (size_t)s->n * per_layer + 1 - used;
        if ((unsigned)l->kind >= CLT_LAYER__COUNT)
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "model spec: layer %d has unknown kind %d", i + 1,
                     (int)l->kind);
        switch (l->kind) {
        case CLT_LAYER_LINEAR:
            used += (size_t)snprintf(text + used, room, "%slinear %d%s", sep, l->out,
                                     l->bias ? "" : " nobias");
            break;
        case CLT_LAYER_DROPOUT:
            format_probability(l->p, prob, sizeof prob);
            used += (size_t)snprintf(text + used, room, "%sdropout %s", sep, prob);
            break;
        default:
            used += (size_t)snprintf(text + used, room, "%s%s", sep, kind_names[l->kind]);
            break;
        }
    }
    *out = text;
    text = NULL;
fail:
    free(text);
    return st;
}

void clt_spec_free(clt_spec *s)
{
    if (!s) return;
    free(s->layers);
    s->layers = NULL;
    s->n = 0;
}
