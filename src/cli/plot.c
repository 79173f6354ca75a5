/* `cltrain plot`: reads the JSON lines of `train --metrics` (one file per run) into curves and
 * writes them as one SVG (plot_svg.c). The reader is also what `train --plot` feeds with the
 * lines it writes, so that the figure of a run is the figure of its metrics file. */
#include "cli/plot.h"

#include "cli/cli.h"
#include "cli/options.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- one JSON line --------------------------------------------------------------------- */

/* A cursor over the line; err: what was expected where parsing stopped. */
struct jcur {
    const char *start, *p, *end;
    const char *err;
};

static bool jfail(struct jcur *c, const char *expected)
{
    if (!c->err) c->err = expected;
    return false;
}

static void jspace(struct jcur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n'))
        c->p++;
}

static bool jword(struct jcur *c, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* A string; its text (escapes other than \uXXXX decoded, truncated) into out[outn]. */
static bool jstring(struct jcur *c, char *out, size_t outn)
{
    size_t k = 0;
    if (c->p == c->end || *c->p != '"') return jfail(c, "a string");
    c->p++;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if ((unsigned char)ch < 0x20) return jfail(c, "no control character inside a string");
        if (ch == '\\') {
            if (c->p == c->end) break;
            char e = *c->p++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, c->p++)
                    if (c->p == c->end || !is_hex(*c->p)) return jfail(c, "\\u and 4 hex digits");
                ch = '?';
            } else if (e && strchr("\"\\/bfnrt", e)) {
                ch = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'b' || e == 'f' || e == 'r' ? ' ' : e;
            } else {
                return jfail(c, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
            }
        }
        if (out && k + 1 < outn) out[k++] = ch;
    }
    if (c->p == c->end) return jfail(c, "a closing '\"'");
    c->p++;
    if (out && outn) out[k] = '\0';
    return true;
}

/* A number as JSON writes it, or nan, -nan, inf, -inf: what cltrain's "%g" writes for a loss
 * that diverged. */
static bool jnumber(struct jcur *c, double *v)
{
    const char *s = c->p;
    char buf[64];
    if (jword(c, "nan") || jword(c, "-nan")) {
        *v = NAN;
        return true;
    }
    if (jword(c, "inf") || jword(c, "-inf")) {
        *v = s[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    if (c->p < c->end && *c->p == '-') c->p++;
    if (c->p == c->end || *c->p < '0' || *c->p > '9') return jfail(c, "a value");
    if (*c->p == '0') c->p++;
    else
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (c->p == c->end || *c->p < '0' || *c->p > '9') return jfail(c, "a digit after '.'");
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p == c->end || *c->p < '0' || *c->p > '9') return jfail(c, "an exponent's digits");
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    size_t n = (size_t)(c->p - s);
    if (n >= sizeof buf) return jfail(c, "a number of at most 63 characters");
    memcpy(buf, s, n);
    buf[n] = '\0';
    *v = strtod(buf, NULL); /* out of range: +-HUGE_VAL or 0, as any JSON reader */
    return true;
}

enum { JSON_MAX_DEPTH = 32 };

/* Any value, read and dropped (nested objects and arrays of fields added later). */
static bool jskip(struct jcur *c, int depth)
{
    double v;
    if (depth > JSON_MAX_DEPTH) return jfail(c, "at most 32 nested objects or arrays");
    if (c->p == c->end) return jfail(c, "a value");
    if (*c->p == '"') return jstring(c, NULL, 0);
    if (jword(c, "true") || jword(c, "false") || jword(c, "null")) return true;
    if (*c->p != '{' && *c->p != '[') return jnumber(c, &v);
    char close = *c->p == '{' ? '}' : ']';
    c->p++;
    jspace(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return true;
    }
    for (;;) {
        if (close == '}') {
            if (!jstring(c, NULL, 0)) return false;
            jspace(c);
            if (c->p == c->end || *c->p++ != ':') return jfail(c, "':'");
            jspace(c);
        }
        if (!jskip(c, depth + 1)) return false;
        jspace(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            jspace(c);
            continue;
        }
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return true;
        }
        return jfail(c, close == '}' ? "',' or '}'" : "',' or ']'");
    }
}

/* The fields of a metrics line that the curves use. */
enum { F_STEP, F_LOSS, F_LR, F_TEST_LOSS, F_TEST_ACCURACY, F_TRAIN_LOSS, F__COUNT };
static const char *const field_names[F__COUNT] = {"step",      "loss",          "lr",
                                                  "test_loss", "test_accuracy", "train_loss"};

struct record {
    char event[16];
    bool has[F__COUNT];
    double v[F__COUNT];
};

/* One member "key": value of the line's object. */
static bool jmember(struct jcur *c, struct record *r)
{
    char key[32];
    if (!jstring(c, key, sizeof key)) return false;
    jspace(c);
    if (c->p == c->end || *c->p != ':') return jfail(c, "':'");
    c->p++;
    jspace(c);
    if (strcmp(key, "event") == 0 && c->p < c->end && *c->p == '"')
        return jstring(c, r->event, sizeof r->event);
    bool null = c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0;
    for (int f = 0; f < F__COUNT; f++) {
        if (strcmp(key, field_names[f]) != 0) continue;
        if (!null && c->p < c->end &&
            (*c->p == '-' || *c->p == 'n' || *c->p == 'i' || (*c->p >= '0' && *c->p <= '9'))) {
            r->has[f] = jnumber(c, &r->v[f]);
            return r->has[f];
        }
        r->has[f] = false; /* not a number: as if absent */
    }
    return jskip(c, 1);
}

/* The line as one JSON object into r. */
static bool jrecord(struct jcur *c, struct record *r)
{
    jspace(c);
    if (c->p == c->end || *c->p != '{') return jfail(c, "'{' (a JSON object)");
    c->p++;
    jspace(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            if (!jmember(c, r)) return false;
            jspace(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                jspace(c);
                continue;
            }
            if (c->p < c->end && *c->p == '}') {
                c->p++;
                break;
            }
            return jfail(c, "',' or '}'");
        }
    }
    jspace(c);
    return c->p == c->end || jfail(c, "the end of the line after the object");
}

/* ---- curves ---------------------------------------------------------------------------- */

static int series_add(struct plot_series *s, double step, double value)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *a = realloc(s->step, cap * sizeof *a);
        if (!a) return -2;
        s->step = a;
        double *b = realloc(s->value, cap * sizeof *b);
        if (!b) return -2;
        s->value = b;
        s->cap = cap;
    }
    s->step[s->n] = step;
    s->value[s->n++] = value;
    return 0;
}

/* The points of a log, eval or epoch record; -2 when memory ran out. */
static int add_record(struct plot_run *run, const struct record *r)
{
    double step = r->v[F_STEP];
    int rc = 0;
    if (strcmp(r->event, "log") == 0) {
        if (r->has[F_LOSS]) rc = series_add(&run->s[PLOT_TRAIN_LOSS], step, r->v[F_LOSS]);
        if (!rc && r->has[F_LR]) rc = series_add(&run->s[PLOT_LR], step, r->v[F_LR]);
    } else if (strcmp(r->event, "eval") == 0) {
        if (r->has[F_TEST_LOSS]) rc = series_add(&run->s[PLOT_TEST_LOSS], step, r->v[F_TEST_LOSS]);
        /* -1: no accuracy (regression) */
        if (!rc && r->has[F_TEST_ACCURACY] && r->v[F_TEST_ACCURACY] >= 0)
            rc = series_add(&run->s[PLOT_TEST_ACCURACY], step, 100.0 * r->v[F_TEST_ACCURACY]);
    } else {
        if (r->has[F_TRAIN_LOSS])
            rc = series_add(&run->s[PLOT_EPOCH_LOSS], step, r->v[F_TRAIN_LOSS]);
    }
    if (!rc) run->records++;
    return rc;
}

int plot_read_line(struct plot_run *run, const char *line, size_t len, char *err, size_t errn)
{
    struct record r;
    memset(&r, 0, sizeof r);
    struct jcur c = {line, line, line + len, NULL};
    if (!jrecord(&c, &r)) {
        snprintf(err, errn, "not a JSON object: expected %s at column %ld", c.err,
                 (long)(c.p - c.start) + 1);
        return -1;
    }
    bool curve = strcmp(r.event, "log") == 0 || strcmp(r.event, "eval") == 0 ||
                 strcmp(r.event, "epoch") == 0;
    if (!curve) return 0; /* another kind of line: not a curve's */
    if (!r.has[F_STEP] || !isfinite(r.v[F_STEP])) {
        snprintf(err, errn, "the \"%s\" record has no numeric \"step\"", r.event);
        return -1;
    }
    return add_record(run, &r);
}

void plot_run_free(struct plot_run *run)
{
    for (int k = 0; k < PLOT__COUNT; k++) {
        free(run->s[k].step);
        free(run->s[k].value);
        run->s[k] = (struct plot_series){0};
    }
    run->records = 0;
}

/* ---- the command ----------------------------------------------------------------------- */

static const char *const expected_text =
    "cltrain plot reads the JSON lines of `cltrain train --metrics`";

/* Reads the metrics file at path into run. A last line without its newline that does not parse
 * (a run killed while writing it) is left out with a note; any other bad line fails, naming
 * the file and the line. */
/* The metrics file opened for reading: a regular file only. The open does not block (a FIFO
 * without a writer would hang a blocking one), and the type is checked before any read. */
static FILE *open_metrics(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        cli_error("plot %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    FILE *f = NULL;
    if (fstat(fd, &sb) != 0)
        cli_error("plot %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        cli_error("plot %s: is %s, not a regular file; %s", path,
                  S_ISFIFO(sb.st_mode) ? "a FIFO (named pipe)"
                  : S_ISDIR(sb.st_mode) ? "a directory" : "a device or socket",
                  expected_text);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
             !(f = fdopen(fd, "r")))
        cli_error("plot %s: %s", path, strerror(errno));
    if (!f) close(fd);
    return f;
}

static int read_metrics(const char *path, struct plot_run *run)
{
    FILE *f = open_metrics(path);
    if (!f) return CLI_FAIL;
    char *line = NULL, err[160];
    size_t cap = 0;
    long lineno = 0;
    int rc = CLI_OK;
    ssize_t got;
    errno = 0;
    while (rc == CLI_OK && (got = getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)got;
        bool newline = len > 0 && line[len - 1] == '\n';
        lineno++;
        if (newline) len--;
        if (strlen(line) < len) {
            rc = cli_error("plot %s:%ld: a NUL byte inside the line; %s", path, lineno,
                           expected_text);
            break;
        }
        if (strspn(line, " \t\r") == len) continue; /* a blank line */
        int st = plot_read_line(run, line, len, err, sizeof err);
        if (st == -2) rc = cli_error("plot %s:%ld: out of memory", path, lineno);
        else if (st == -1 && !newline && run->records > 0)
            fprintf(stderr, "cltrain: note: plot %s:%ld: an incomplete last line (%s), left "
                            "out\n", path, lineno, err);
        else if (st == -1)
            rc = cli_error("plot %s:%ld: %s; %s", path, lineno, err, expected_text);
        errno = 0;
    }
    if (rc == CLI_OK && ferror(f))
        rc = cli_error("plot %s: read failed: %s", path, errno ? strerror(errno) : "I/O error");
    else if (rc == CLI_OK && run->records == 0)
        rc = cli_error("plot %s: no training steps in %ld line%s (no \"log\", \"eval\" or "
                       "\"epoch\" record); %s", path, lineno, lineno == 1 ? "" : "s",
                       expected_text);
    free(line);
    fclose(f);
    return rc;
}

struct plot_args {
    const char *out, *title;
    bool log_loss;
    int n;
    const char **files; /* argc entries */
};

/* Splits argv into the metrics files (every argument that is not an option or an option's
 * value; all after "--") and the options, "-o" spelled "--output", for cli_parse to read with
 * the table; opt_argv has argc + 1 entries. */
static void split_plot_args(int argc, char **argv, const struct cli_opt *opts,
                            struct plot_args *p, char **opt_argv, int *opt_argc)
{
    static char output[] = "--output";
    bool options = true;
    *opt_argc = 0;
    opt_argv[(*opt_argc)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!options || a[0] != '-' || strcmp(a, "-") == 0) {
            p->files[p->n++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options = false;
            continue;
        }
        if (strcmp(a, "-o") == 0) a = output;
        opt_argv[(*opt_argc)++] = a;
        /* the value of "--name VALUE" is the option's, even when it looks like a file name */
        const struct cli_opt *o = opts;
        while (o->name && !(strncmp(a, "--", 2) == 0 && strcmp(a + 2, o->name) == 0)) o++;
        if (o->name && o->type != OPT_FLAG && i + 1 < argc) opt_argv[(*opt_argc)++] = argv[++i];
    }
    opt_argv[*opt_argc] = NULL;
}

/* The options (a table, as every command's: its --help and the manual's entries come from
 * it) and the files; *help when --help printed the usage. */
static int parse_plot_args(int argc, char **argv, struct plot_args *p, bool *help)
{
    const struct cli_opt opts[] = {
        {"output", OPT_STR, &p->out, "the SVG to write (curves.svg); -o FILE is the same", NULL},
        {"log-loss", OPT_FLAG, &p->log_loss,
         "the two loss panels on a log scale (values at or below 0 left out there)", NULL},
        {"title", OPT_STR, &p->title, "the figure's title (Training curves)", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    *help = cli_is_help(argc, argv);
    if (*help) {
        cli_print_help("plot",
                       "cltrain plot METRICS.jsonl [MORE.jsonl ...] [options]\n"
                       "the training curves of runs (the JSON lines of train --metrics) as one "
                       "SVG:\ntrain loss, test loss, test accuracy and learning rate against "
                       "steps, a colour a run",
                       opts);
        return CLI_OK;
    }
    char **opt_argv = calloc((size_t)argc + 1, sizeof *opt_argv);
    int opt_argc = 0;
    if (!opt_argv) return cli_error("plot: out of memory");
    split_plot_args(argc, argv, opts, p, opt_argv, &opt_argc);
    int rc = cli_parse(opt_argc, opt_argv, opts, "plot");
    free(opt_argv);
    if (rc != CLI_OK) return rc;
    if (!*p->out) return cli_usage_error("--output: expected a file name");
    if (p->n == 0)
        return cli_usage_error("plot: no metrics file; usage: cltrain plot METRICS.jsonl "
                               "[MORE.jsonl ...] [-o curves.svg]");
    return CLI_OK;
}

/* The output may not replace one of the files it is drawn from; it is checked and locked
 * before any file is read. */
static int check_output(const struct plot_args *p)
{
    for (int i = 0; i < p->n; i++) {
        bool same = false;
        if (strcmp(p->files[i], "-") == 0) continue;
        if (clt_outfile_same(p->out, p->files[i], &same) != CLT_OK)
            return cli_error("%s", clt_last_errmsg());
        if (same)
            return cli_usage_error("plot: --output %s and %s name the same file: the figure "
                                   "must not replace its input", p->out, p->files[i]);
    }
    if (clt_outfile_check(p->out) != CLT_OK) return cli_error("--output %s", clt_last_errmsg());
    return cli_lock_output("--output", p->out);
}

int cli_plot(int argc, char **argv)
{
    struct plot_args p = {.out = "curves.svg"};
    bool help = false;
    p.files = calloc((size_t)argc, sizeof *p.files);
    if (!p.files) return cli_error("plot: out of memory");
    struct plot_run *runs = NULL;
    int rc = parse_plot_args(argc, argv, &p, &help);
    if (rc == CLI_OK && !help) rc = check_output(&p);
    if (rc == CLI_OK && !help && !(runs = calloc((size_t)p.n, sizeof *runs)))
        rc = cli_error("plot: out of memory");
    for (int i = 0; rc == CLI_OK && !help && i < p.n; i++) {
        runs[i].name = p.files[i];
        if (strcmp(p.files[i], "-") == 0)
            rc = cli_usage_error("plot: \"-\": name the metrics file (standard input is not "
                                 "read)");
        else
            rc = read_metrics(p.files[i], &runs[i]);
    }
    if (rc == CLI_OK && !help) {
        struct plot_options o = {.title = p.title, .log_loss = p.log_loss};
        if (plot_svg_save(p.out, runs, p.n, &o) != 0)
            rc = cli_error("--output %s", clt_last_errmsg());
        else
            printf("wrote %s: %d run%s\n", p.out, p.n, p.n == 1 ? "" : "s");
    }
    for (int i = 0; runs && i < p.n; i++) plot_run_free(&runs[i]);
    free(runs);
    free(p.files);
    return rc;
}
