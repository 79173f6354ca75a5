/* Numeric CSV reader: comma-separated cells, optional double quotes, a header row detected by
 * its non-numeric cells, one label or target column (or none: inputs to predict on), the rest
 * f32 features. Messages give the
 * file, the 1-based line and column and, with a header, the column's name. */
#include "data/data_internal.h"
#include "runtime/internal.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

typedef enum num_kind { NUM_OK, NUM_EMPTY, NUM_NOT_NUMBER, NUM_NOT_FINITE, NUM_RANGE } num_kind;

/* What load_csv carries from line to line. */
struct csv_state {
    const char *path;
    struct clt_data_params prm;
    size_t ncols;      /* cells per row, from the first row */
    size_t label_col;  /* resolved, 0-based */
    size_t first_line; /* 1-based line of the first row */
    char **names;      /* ncols header names, or NULL */
    char **cells;      /* the current row's cells, pointing into the text */
    size_t count, cap; /* cells in the current row, room in `cells` */
    size_t cap_rows;   /* room in the dataset's arrays */
    double max_label;
    clt_dataset *d;
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static num_kind parse_number(const char *s, double *v)
{
    char *end = NULL;
    double x;
    if (!*s) return NUM_EMPTY;
    errno = 0;
    x = strtod(s, &end);
    if (end == s || *end) return NUM_NOT_NUMBER;
    if (!isfinite(x)) return errno == ERANGE ? NUM_RANGE : NUM_NOT_FINITE;
    if (fabs(x) > FLT_MAX) return NUM_RANGE;
    *v = x;
    return NUM_OK;
}

static void describe(char *buf, size_t size, num_kind k, const char *cell)
{
    switch (k) {
    case NUM_EMPTY:
        snprintf(buf, size, "empty cell");
        break;
    case NUM_NOT_NUMBER:
        snprintf(buf, size, "'%.60s' is not a number", cell);
        break;
    case NUM_NOT_FINITE:
        snprintf(buf, size, "'%.60s' is not a finite number", cell);
        break;
    default:
        snprintf(buf, size, "'%.60s' is out of float range", cell);
        break;
    }
}

static clt_status push_cell(struct csv_state *cs, char *cell)
{
    clt_status st = CLT_OK;
    if (cs->count == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 64;
        char **bigger = realloc(cs->cells, cap * sizeof *bigger);
        if (!bigger) CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory", cs->path);
        cs->cells = bigger;
        cs->cap = cap;
    }
    cs->cells[cs->count++] = cell;
fail:
    return st;
}

/* Splits the line [s, end) in place into NUL-terminated, trimmed, unquoted cells; *end (the
 * '\n' or the text's final NUL) is overwritten. */
static clt_status split_line(struct csv_state *cs, size_t lineno, char *s, char *end)
{
    clt_status st = CLT_OK;
    char *p = s;
    *end = '\0';
    if (end > s && end[-1] == '\r') *--end = '\0';
    cs->count = 0;
    for (;;) {
        char *cell, *w;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        cell = p;
        if (p < end && *p == '"') {
            w = cell;
            p++;
            for (;;) {
                if (p >= end) {
                    CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: line %zu, column %zu: unterminated quote",
                             cs->path, lineno, cs->count + 1);
                }
                if (*p == '"') {
                    if (p + 1 < end && p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (p < end && (*p == ' ' || *p == '\t'))
                p++;
            if (p < end && *p != ',') {
                CLT_FAIL(NULL, CLT_ERR_FORMAT,
                         "%s: line %zu, column %zu: text after the closing quote", cs->path, lineno,
                         cs->count + 1);
            }
        } else {
            while (p < end && *p != ',')
                p++;
            w = p;
            while (w > cell && (w[-1] == ' ' || w[-1] == '\t'))
                w--;
        }
        bool last = p >= end;
        *w = '\0';
        CLT_TRY(push_cell(cs, cell));
        if (last) break;
        p++;
    }
fail:
    return st;
}

/* The first row: fixes the column count and the label column, allocates the arrays, and keeps
 * the names when the row is a header. */
static clt_status first_row(struct csv_state *cs, size_t lineno, size_t max_rows)
{
    clt_status st = CLT_OK;
    clt_dataset *d = cs->d;
    bool header = false;
    long long lc = cs->prm.label_column;
    size_t cells = 0;
    cs->ncols = cs->count;
    cs->first_line = lineno;
    if (cs->prm.no_labels) {
        cs->label_col = SIZE_MAX; /* no column is the label: every one is a feature */
        d->features = cs->ncols;
    } else {
        if (cs->ncols < 2) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: line %zu has %zu column; at least 2 are needed (features and a label)",
                     cs->path, lineno, cs->ncols);
        }
        if (lc < 0) lc += (long long)cs->ncols;
        if (lc < 0 || lc >= (long long)cs->ncols) {
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "%s: label column %d is out of range for %zu columns", cs->path,
                     cs->prm.label_column, cs->ncols);
        }
        cs->label_col = (size_t)lc;
        d->features = cs->ncols - 1;
    }
    if (max_rows > SIZE_MAX / sizeof(float) / d->features) {
        CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: too large", cs->path);
    }
    cs->cap_rows = max_rows;
    cells = max_rows * d->features;
    CLT_ALLOC(NULL, d->f32, cells);
    if (cs->prm.no_labels) {
        /* inputs only: neither labels nor targets */
    } else if (cs->prm.task == CLT_TASK_CLASSIFICATION) {
        CLT_ALLOC(NULL, d->labels, max_rows);
    } else {
        CLT_ALLOC(NULL, d->targets, max_rows);
    }
    for (size_t c = 0; c < cs->ncols && !header; c++) {
        double v;
        header = parse_number(cs->cells[c], &v) != NUM_OK;
    }
    if (header) {
        CLT_ALLOC(NULL, cs->names, cs->ncols);
        for (size_t c = 0; c < cs->ncols; c++) {
            cs->names[c] = strdup(cs->cells[c]);
            if (!cs->names[c])
                CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "%s: out of host memory", cs->path);
        }
    }
fail:
    return st;
}

static clt_status data_row(struct csv_state *cs, size_t lineno)
{
    clt_status st = CLT_OK;
    clt_dataset *d = cs->d;
    float *dst = d->f32 + d->n * d->features;
    size_t f = 0;
    char why[160];
    if (cs->count != cs->ncols) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: line %zu has %zu columns, expected %zu as on line %zu",
                 cs->path, lineno, cs->count, cs->ncols, cs->first_line);
    }
    CLT_ASSERT(d->n < cs->cap_rows);
    for (size_t c = 0; c < cs->ncols; c++) {
        const char *cell = cs->cells[c];
        double v = 0;
        num_kind k = parse_number(cell, &v);
        why[0] = '\0';
        if (k != NUM_OK) {
            describe(why, sizeof why, k, cell);
        } else if (c != cs->label_col) {
            dst[f++] = (float)v;
        } else if (cs->prm.task == CLT_TASK_REGRESSION) {
            d->targets[d->n] = (float)v;
        } else if (v < 0 || v != floor(v)) {
            snprintf(why, sizeof why, "label '%.60s' is not a non-negative integer", cell);
        } else if (cs->prm.classes > 0 && v >= cs->prm.classes) {
            snprintf(why, sizeof why, "label %.60s is not below the %d classes", cell,
                     cs->prm.classes);
        } else if (v >= CLT_DATA_MAX_CLASSES) {
            snprintf(why, sizeof why,
                     "label %.60s is not below CLT_DATA_MAX_CLASSES (%d); for a numeric target "
                     "use the regression task",
                     cell, CLT_DATA_MAX_CLASSES);
        } else {
            d->labels[d->n] = (int32_t)v;
            if (v > cs->max_label) cs->max_label = v;
        }
        if (why[0]) {
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: line %zu, column %zu%s%s%s: %s", cs->path, lineno,
                     c + 1, cs->names ? " (" : "", cs->names ? cs->names[c] : "",
                     cs->names ? ")" : "", why);
        }
    }
    d->n++;
fail:
    return st;
}

/* Moves the header names into the dataset: features in file order, then the target. */
static clt_status take_names(struct csv_state *cs)
{
    clt_status st = CLT_OK;
    clt_dataset *d = cs->d;
    size_t f = 0;
    if (cs->names) {
        CLT_ALLOC(NULL, d->feature_names, d->features);
        for (size_t c = 0; c < cs->ncols; c++) {
            if (c == cs->label_col) {
                d->target_name = cs->names[c];
            } else {
                d->feature_names[f++] = cs->names[c];
            }
            cs->names[c] = NULL;
        }
    }
fail:
    return st;
}

/* Gives back the rows reserved but not used; keeps the old block if realloc fails. */
static void *shrink(void *p, size_t bytes)
{
    void *smaller = p ? realloc(p, bytes ? bytes : 1) : NULL;
    return smaller ? smaller : p;
}

clt_status clt_data_load_csv(const char *path, const struct clt_data_params *p, clt_dataset *out)
{
    clt_status st = CLT_OK;
    struct csv_state cs;
    clt_dataset d;
    char *text = NULL, *s = NULL;
    size_t len = 0, max_rows = 1, lineno = 0;
    memset(&cs, 0, sizeof cs);
    memset(&d, 0, sizeof d);
    if (out) memset(out, 0, sizeof *out);
    if (!path || !out) CLT_FAIL(NULL, CLT_ERR_INVALID_ARG, "clt_data_load_csv: NULL argument");
    cs.path = path;
    cs.prm = p ? *p : clt_data_default_params();
    cs.d = &d;
    CLT_TRY(clt__data_check_params(&cs.prm));
    CLT_TRY(clt__data_read_all(path, &text, &len));
    if (memchr(text, '\0', len)) {
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: contains NUL bytes; not a text file", path);
    }
    for (size_t i = 0; i < len; i++)
        max_rows += text[i] == '\n';

    s = text;
    for (;;) {
        char *nl = memchr(s, '\n', (size_t)(text + len - s));
        char *end = nl ? nl : text + len;
        bool blank = true;
        lineno++;
        for (const char *q = s; q < end && blank; q++)
            blank = is_blank(*q);
        if (!blank) {
            CLT_TRY(split_line(&cs, lineno, s, end));
            if (cs.ncols == 0) {
                CLT_TRY(first_row(&cs, lineno, max_rows));
                if (!cs.names) CLT_TRY(data_row(&cs, lineno));
            } else {
                CLT_TRY(data_row(&cs, lineno));
            }
        }
        if (!nl) break;
        s = nl + 1;
    }
    if (cs.ncols == 0) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: no rows (empty file)", path);
    if (d.n == 0) CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: no data rows, only a header", path);

    CLT_TRY(take_names(&cs));
    d.f32 = shrink(d.f32, d.n * d.features * sizeof *d.f32);
    d.labels = shrink(d.labels, d.n * sizeof *d.labels);
    d.targets = shrink(d.targets, d.n * sizeof *d.targets);
    d.sample_ndim = 1;
    d.sample_shape[0] = d.features;
    d.task = cs.prm.task;
    if (d.task == CLT_TASK_REGRESSION) {
        d.classes = 1;
    } else if (cs.prm.no_labels) {
        d.classes = cs.prm.classes; /* no labels to count them from: as given, or 0 */
    } else {
        d.classes = cs.prm.classes > 0 ? cs.prm.classes : (int)cs.max_label + 1;
    }
    d.input_scale = 1.0f;
    snprintf(d.source, sizeof d.source, "%s", path);
    *out = d;
    memset(&d, 0, sizeof d);
fail:
    if (cs.names) {
        for (size_t c = 0; c < cs.ncols; c++)
            free(cs.names[c]);
        free(cs.names);
    }
    free(cs.cells);
    free(text);
    clt_dataset_free(&d);
    return st;
}
