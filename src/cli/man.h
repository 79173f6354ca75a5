/* Writing the manual pages' roff from the programs' own tables (options, layer kinds, presets),
 * so that docs/cltrain.1 and docs/cltrain-tune.1 cannot lag the code: `cltrain help
 * --man-sections` and `cltrain-tune --man-sections` print the generated regions and
 * tools/gen_man.sh splices them into the pages between their markers. Shared by both programs;
 * stdio only. */
#ifndef CLTRAIN_CLI_MAN_H
#define CLTRAIN_CLI_MAN_H

#include <stdio.h>

/* The marker lines around a generated region named `region` ("options"): tools/gen_man.sh
 * replaces what lies between them, markers included, with the programs' output. */
void man_region_begin(FILE *f, const char *region);
void man_region_end(FILE *f, const char *region);

/* Prose as one roff text line: backslashes and hyphens escaped, a leading '.' or '\'' guarded,
 * "--flag" words in bold, then a newline. */
void man_text(FILE *f, const char *text);

/* A grammar or spec as one roff text line, "conv OUT kK [sS]" marked up as a manual writes it:
 * lower-case words and digits in bold (typed as they stand), upper-case letters in italics
 * (values), brackets, braces and punctuation in roman; then a newline. */
void man_syntax(FILE *f, const char *syntax);

/* One option: ".TP", "--name METAVAR" (metavar NULL: a flag) and its help. */
void man_option(FILE *f, const char *name, const char *metavar, const char *help);

#endif
