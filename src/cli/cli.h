/* Shared pieces of the cltrain command-line program: subcommands and small helpers. The program
 * is the public API's first user: its files include only the installed headers (cltrain/...),
 * system headers and its own, and it builds against an installed copy alone (tests/layering.sh,
 * tools/install_check.sh). */
#ifndef CLTRAIN_CLI_H
#define CLTRAIN_CLI_H

#include "cltrain/cltrain.h"
#include "cltrain/opencl.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 a runtime failure (device, data, memory), 2 a usage error. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints "cltrain: <message>" on stderr (one line; multi-line messages such as build logs are
 * kept) and returns CLI_FAIL. */
int cli_error(const char *fmt, ...);
int cli_usage_error(const char *fmt, ...);
/* Printed after "cltrain: " by both from now on ("rank 1: "; NULL or "" for none). */
void cli_set_error_prefix(const char *prefix);

/* ---- setup.c (shared by train, eval, predict and bench) ---- */
/* clt_data_open's failure st: the message, and CLI_USAGE for a bad --data spec (an unknown
 * data set, CLT_ERR_INVALID_ARG), else CLI_FAIL. */
int cli_fail_data(clt_status st);
/* A spec given as a file's path or as text, for the flag `flag` ("--model"): CLI_OK, else the
 * message printed and CLI_USAGE (a spec that does not parse, a path-like argument naming no
 * file) or CLI_FAIL (a file that cannot be read). cli_spec_is_path: the rule for "path-like",
 * a '/' or a single word with a dot. */
int cli_parse_model(const char *flag, const char *text, int classes, clt_spec *spec);
bool cli_spec_is_path(const char *text);
/* Whether the model of spec on inputs of input_shape (the data's sample shape; all 0: flat)
 * gives one row of outputs per sample, as training and evaluation take; else false with the
 * reason (a linear layer acting on each position of a (T, C) input) in why. */
bool cli_spec_one_row(const clt_spec *spec, size_t features, int outputs,
                      const size_t input_shape[3], char *why, size_t size);

/* ---- outputs.c ---- */
/* A file a command reads or writes: the flag that names it ("--save", "--data"), its path, and
 * whether the command writes it. replaced_by: an input that the output of this flag may replace
 * (--resume's checkpoint by --save: a run continued in place), else NULL. */
struct cli_path {
    const char *flag, *path;
    bool output;
    const char *replaced_by;
};
enum { CLI_MAX_PATHS = 32 };
struct cli_paths {
    int n, nowned;
    struct cli_path p[CLI_MAX_PATHS];
    char *owned[CLI_MAX_PATHS];
};
/* Adds one path (NULL or "": nothing); the string must outlive cli_paths_check. */
void cli_paths_add(struct cli_paths *ps, const char *flag, const char *path, bool output,
                   const char *replaced_by);
/* Adds the files a --data spec reads (csv:TRAIN[,TEST], the IDX files of idx:DIR or of a named
 * set's folder) as inputs. */
void cli_paths_add_data(struct cli_paths *ps, const char *flag, const char *spec);
/* Refuses an output that is the same file as an input (unless its replaced_by names the
 * output's flag) or as another output: one line naming both flags and paths, CLI_USAGE. Empties
 * ps. Touches no device. */
int cli_paths_check(struct cli_paths *ps);
/* Locks an output for the life of the process (clt_outfile_lock_acquire); a lock held by
 * another process is one line naming it and CLI_FAIL. cli_release_locks, called once the
 * command has returned, releases them all. */
int cli_lock_output(const char *flag, const char *path);
void cli_release_locks(void);

/* ---- help.c ---- */
/* `cltrain --help`: the commands and the device selectors. */
void cli_usage(FILE *f);
/* `cltrain help [spec | --man-sections]`: the commands, the model spec's layer kinds and presets,
 * or the manual's generated regions (tools/gen_man.sh). */
int cli_help(int argc, char **argv);
/* --model's help: a spec, a file or a preset, the presets named from their table, and the
 * default. Static storage. */
const char *cli_model_help(const char *default_model);

int cli_devices(int argc, char **argv);
int cli_selfcheck(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_predict(int argc, char **argv);
int cli_generate(int argc, char **argv); /* generate.c: text from a language model */
int cli_bench(int argc, char **argv);
int cli_kernels(int argc, char **argv);
int cli_plot(int argc, char **argv); /* plot.c: training curves as SVG; no device */

#endif
