/* Command-line options: a table per command, values checked as they are parsed so that every
 * bad flag gets one line naming the flag and what was expected. */
#include "cli/options.h"

#include "cli/cli.h"
#include "cli/man.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int bad(const char *name, const char *value, const char *expected)
{
    return cli_usage_error("--%s %s: expected %s", name, value, expected);
}

/* The one strict integer parser of the command line: decimal digits with an optional leading
 * '-', nothing else (no spaces, no '+', no "0x", no trailing text), within [lo, hi]. */
static bool strict_integer(const char *v, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    if (!v || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))) return false;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

int cli_parse_long(const char *name, const char *v, long lo, long hi, long *out)
{
    long long x = 0;
    if (!strict_integer(v, lo, hi, &x))
        return cli_usage_error("--%s %s: expected an integer in [%ld, %ld]", name, v, lo, hi);
    *out = (long)x;
    return CLI_OK;
}

int cli_parse_shape(const char *name, const char *v, size_t shape[3])
{
    int n = 0;
    shape[0] = shape[1] = shape[2] = 0;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[24];
        long long x = 0;
        if (n == 3 || len == 0 || len >= sizeof tok) break;
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (!strict_integer(tok, 1, INT32_MAX, &x)) break;
        shape[n++] = (size_t)x;
        if (!comma) {
            if (n >= 2) return CLI_OK;
            break;
        }
        p = comma + 1;
    }
    shape[0] = shape[1] = shape[2] = 0;
    return cli_usage_error("--%s %s: expected C,H,W or T,C (positive integers), e.g. 1,28,28",
                           name, v);
}

static int set_value(const struct cli_opt *o, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case OPT_STR:
        *(const char **)o->dst = v;
        return CLI_OK;
    case OPT_POS_INT:
    case OPT_NONNEG_INT: {
        long long x = 0;
        if (!strict_integer(v, o->type == OPT_POS_INT ? 1 : 0, INT32_MAX, &x))
            return bad(o->name, v, o->type == OPT_POS_INT ? "a positive integer (at most 2^31-1)"
                                                          : "a non-negative integer (at most "
                                                            "2^31-1)");
        *(long *)o->dst = (long)x;
        return CLI_OK;
    }
    case OPT_U64: {
        unsigned long long x = 0;
        if (v[0] >= '0' && v[0] <= '9') x = strtoull(v, &end, 10);
        if (errno || !end || end == v || *end) return bad(o->name, v, "an integer in [0, 2^64-1]");
        *(uint64_t *)o->dst = (uint64_t)x;
        return CLI_OK;
    }
    case OPT_POS_FLOAT:
    case OPT_NONNEG_FLOAT:
    case OPT_UNIT_FLOAT: {
        /* Strict as the integers: a number and nothing else, no leading space, no hex. */
        bool plain = (v[0] == '-' || v[0] == '.' || (v[0] >= '0' && v[0] <= '9')) &&
                     !strpbrk(v, "xXpP");
        double x = plain ? strtod(v, &end) : 0.0;
        bool ok = plain && !errno && end != v && !*end && isfinite(x);
        if (o->type == OPT_POS_FLOAT) ok = ok && x > 0;
        if (o->type == OPT_NONNEG_FLOAT) ok = ok && x >= 0;
        if (o->type == OPT_UNIT_FLOAT) ok = ok && x >= 0 && x < 1;
        if (!ok)
            return bad(o->name, v, o->type == OPT_POS_FLOAT      ? "a positive number"
                                   : o->type == OPT_NONNEG_FLOAT ? "a number >= 0"
                                                                 : "a number in [0, 1)");
        *(float *)o->dst = (float)x;
        return CLI_OK;
    }
    case OPT_FLAG:
        break;
    }
    return CLI_USAGE;
}

int cli_parse(int argc, char **argv, const struct cli_opt *opts, const char *command)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0)
            return cli_usage_error("%s: unexpected argument \"%s\"; options start with --",
                                   command, a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct cli_opt *o = opts;
        while (o->name && !(strlen(o->name) == len && strncmp(o->name, name, len) == 0)) o++;
        if (!o->name)
            return cli_usage_error("%s: unknown option \"--%.*s\"; see: cltrain %s --help",
                                   command, (int)len, name, command);
        if (o->seen) *o->seen = true;
        if (o->type == OPT_FLAG) {
            if (eq) return cli_usage_error("--%s takes no value", o->name);
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return cli_usage_error("--%s needs a value (%s)", o->name, o->help);
        int rc = set_value(o, v);
        if (rc != CLI_OK) return rc;
    }
    return CLI_OK;
}

/* The words that stand for a string option's value, by the option's name. Presentation only:
 * an option missing here still appears everywhere, as "VALUE". */
static const struct {
    const char *name, *metavar;
} string_metavars[] = {
    {"data", "SPEC"},        {"model", "SPEC"},        {"augment", "SPEC"},
    {"device", "SEL"},       {"devices", "SEL,..."},   {"device-shares", "W1,W2,..."},
    {"save", "FILE"},        {"resume", "FILE"},       {"init", "FILE"},
    {"load", "FILE"},        {"metrics", "FILE"},      {"output", "FILE"},
    {"input", "FILE"},       {"label-column", "N"},    {"task", "TASK"},
    {"init-scheme", "SCHEME"}, {"precision", "P"},     {"optimizer", "NAME"},
    {"schedule", "NAME"},    {"loader", "MODE"},       {"input-shape", "C,H,W"},
    {"split", "SPLIT"},      {"profile", "NAME"},      {"source", "FILES"},
    {"plot", "FILE"},        {"title", "TEXT"},
};

const char *cli_opt_metavar(const struct cli_opt *o)
{
    switch (o->type) {
    case OPT_FLAG:
        return NULL;
    case OPT_POS_INT:
    case OPT_NONNEG_INT:
    case OPT_U64:
        return "N";
    case OPT_POS_FLOAT:
    case OPT_NONNEG_FLOAT:
    case OPT_UNIT_FLOAT:
        return "X";
    case OPT_STR:
        break;
    }
    for (size_t i = 0; i < sizeof string_metavars / sizeof string_metavars[0]; i++)
        if (strcmp(string_metavars[i].name, o->name) == 0) return string_metavars[i].metavar;
    return "VALUE";
}

bool cli_is_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

enum { ROW_INDENT = 28, ROW_WIDTH = 100 };

void cli_print_row(const char *left, const char *text)
{
    int col = printf("  %s", left);
    if (col >= ROW_INDENT) {
        putchar('\n');
        col = 0;
    }
    printf("%*s", ROW_INDENT - col, "");
    col = ROW_INDENT;
    while (*text) {
        int len = (int)strcspn(text, " ");
        if (col > ROW_INDENT && col + 1 + len > ROW_WIDTH) {
            printf("\n%*s", ROW_INDENT, "");
            col = ROW_INDENT;
        } else if (col > ROW_INDENT) {
            putchar(' ');
            col++;
        }
        printf("%.*s", len, text);
        col += len;
        text += len;
        while (*text == ' ') text++;
    }
    putchar('\n');
}

static bool help_roff;

void cli_set_help_roff(bool roff)
{
    help_roff = roff;
}

void cli_print_help(const char *command, const char *usage, const struct cli_opt *opts)
{
    if (help_roff) {
        printf(".SS %s\n", command);
        for (const struct cli_opt *o = opts; o->name; o++)
            man_option(stdout, o->name, cli_opt_metavar(o), o->help);
        return;
    }
    printf("usage: %s\n", usage);
    for (const struct cli_opt *o = opts; o->name; o++) {
        char left[64];
        const char *mv = cli_opt_metavar(o);
        snprintf(left, sizeof left, "--%s%s%s", o->name, mv ? " " : "", mv ? mv : "");
        cli_print_row(left, o->help);
    }
}

int cli_parse_precision(const char *v, clt_dtype *out)
{
    if (clt_dtype_parse(v, out) != CLT_OK ||
        (*out != CLT_DTYPE_F32 && *out != CLT_DTYPE_F16 && *out != CLT_DTYPE_BF16))
        return cli_usage_error("--precision %s: expected fp32, bf16 or fp16", v);
    return CLI_OK;
}

const char *cli_precision_name(clt_dtype d)
{
    return d == CLT_DTYPE_F16 ? "fp16" : d == CLT_DTYPE_BF16 ? "bf16" : "fp32";
}
