/* Shared pieces of the cltrain command-line program: subcommands and small helpers. The program
 * is the public API's first user: its files include only the installed headers (cltrain/...),
 * system headers and its own, and it builds against an installed copy alone (tests/layering.sh,
 * tools/install_check.sh). */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H

#include "cltrain/cltrain.h"
#include "cltrain/opencl.h"

/* Exit codes: 0 success, 1 a runtime failure (device, data, memory), 2 a usage error. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints "cltrain: <message>" on stderr (one line; multi-line messages such as build logs are
 * kept) and returns CLI_FAIL. */
int cli_error(const char *fmt, ...);
int cli_usage_error(const char *fmt, ...);
/* Printed after "cltrain: " by both from now on ("rank 1: "; NULL or "" for none). */
void cli_set_error_prefix(const char *prefix);

int cli_devices(int argc, char **argv);
int cli_selfcheck(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_predict(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_kernels(int argc, char **argv);

#endif
