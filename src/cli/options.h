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
void cli_print_options(FILE *f, const struct cli_opt *opts);
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
