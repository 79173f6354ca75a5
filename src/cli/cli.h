/* Shared pieces of the cltrain command-line program: subcommands and small helpers. The program
 * links the static library, so besides the public API it may use the library's private headers:
 * the ops (the self-check, bench), the GEMM tuning (train), the program cache (devices,
 * kernels), safe output files (train's metrics and predictions) and the host random numbers
 * (bench). */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H

#include "cltrain/cltrain.h"
#include "cltrain/opencl.h"
#include "ops/ops_internal.h"
#include "ops/tune_internal.h"
#include "io/outfile_internal.h"
#include "runtime/program_internal.h"
#include "runtime/rng_internal.h"

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
