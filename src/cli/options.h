/* Table-driven option parsing for the cltrain subcommands. */
#ifndef CLTRAIN_CLI_OPTIONS_H
#define CLTRAIN_CLI_OPTIONS_H

#include "cltrain/tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cli_opt_type {
    OPT_FLAG,         /* bool */
    OPT_STR,          /* const char * */
    OPT_POS_INT,      /* long, > 0 */
    OPT_NONNEG_INT,   /* long, >= 0 */
    OPT_U64,          /* uint64_t */
    OPT_POS_FLOAT,    /* float, > 0 */
    OPT_NONNEG_FLOAT, /* float, >= 0 */
    OPT_UNIT_FLOAT    /* float, in [0, 1) */
};

struct cli_opt {
    const char *name; /* without "--"; NULL ends the table */
    enum cli_opt_type type;
    void *dst;
    const char *help;
    bool *seen; /* set when the option was given; may be NULL */
};

/* Parses argv[1..] ("--name value" or "--name=value"). Returns CLI_OK or prints one line and
 * returns CLI_USAGE. */
int cli_parse(int argc, char **argv, const struct cli_opt *opts, const char *command);
/* --help of `cltrain COMMAND`: "usage: <usage>" (lines of their own after a newline) and the
 * options, one a line, on stdout. In roff mode (cli_set_help_roff) it writes the manual's
 * ".SS COMMAND" and an entry per option instead: the manual's option lists are this output, the
 * same table that parses them (tools/gen_man.sh). */
/* "  LEFT" and `text` from column 28 on stdout, its lines broken at spaces before column 100
 * (a LEFT too wide for its column puts the text on the next line). */
void cli_print_row(const char *left, const char *text);
bool cli_is_help(int argc, char **argv); /* --help or -h among the arguments */
void cli_print_help(const char *command, const char *usage, const struct cli_opt *opts);
void cli_set_help_roff(bool roff);
/* The placeholder of an option's value in the manual and the usage lines: N for integers, X for
 * other numbers, and for a string a word by its name ("FILE" for --save, "SEL" for --device),
 * "VALUE" when the name is not in its list; NULL for a flag. */
const char *cli_opt_metavar(const struct cli_opt *o);
/* The strict integer parser the table uses, for values checked after parsing: decimal digits
 * with an optional '-', the whole string, within [lo, hi]; else prints "--NAME V: expected an
 * integer in [lo, hi]" and returns CLI_USAGE. */
int cli_parse_long(const char *name, const char *v, long lo, long hi, long *out);
/* The shape of one sample, "C,H,W" or "T,C" (2 or 3 positive integers), into shape[3] (unused
 * entries 0); else prints "--NAME V: expected C,H,W or T,C ..." and returns CLI_USAGE. */
int cli_parse_shape(const char *name, const char *v, size_t shape[3]);
/* --precision: "fp32", "bf16" or "fp16" into *out (CLT_DTYPE_F32, _BF16, _F16); else prints
 * "--precision V: expected fp32, bf16 or fp16" and returns CLI_USAGE. */
int cli_parse_precision(const char *v, clt_dtype *out);
/* The --precision name of a model storage dtype ("fp32", "bf16", "fp16"). */
const char *cli_precision_name(clt_dtype d);

#endif
