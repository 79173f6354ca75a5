/* The cltrain program: dispatches subcommands, turns statuses into one-line messages and
 * exit codes, and fails when stdout could not be written. */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* "rank 1: " or "replica 1: " when one of several processes or replicas speaks */
static char error_prefix[64];

void cli_set_error_prefix(const char *prefix)
{
    snprintf(error_prefix, sizeof error_prefix, "%s", prefix ? prefix : "");
}

static int vreport(int code, const char *fmt, va_list ap)
{
    fprintf(stderr, "cltrain: %s", error_prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    return code;
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = vreport(CLI_FAIL, fmt, ap);
    va_end(ap);
    return code;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int code = vreport(CLI_USAGE, fmt, ap);
    va_end(ap);
    return code;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        cli_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "help") == 0) return cli_help(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0) return cli_devices(argc - 1, argv + 1);
    if (strcmp(cmd, "selfcheck") == 0) return cli_selfcheck(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0) return cli_train(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return cli_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "predict") == 0) return cli_predict(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0) return cli_generate(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return cli_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0) return cli_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "kernels") == 0) return cli_kernels(argc - 1, argv + 1);
    return cli_usage_error("unknown command \"%s\"; try: cltrain --help", cmd);
}

/* Runs the command, then makes sure what it printed reached stdout: a full disk or /dev/full
 * behind `> FILE` is a failure naming stdout, never a silent exit 0. */
int main(int argc, char **argv)
{
    int rc = run_command(argc, argv);
    cli_release_locks(); /* the outputs are written */
    errno = 0;
    bool flush_failed = fflush(stdout) != 0;
    int err = errno;
    if (flush_failed || ferror(stdout)) {
        cli_error("writing stdout failed%s%s", flush_failed && err ? ": " : "",
                  flush_failed && err ? strerror(err) : "");
        if (rc == CLI_OK) rc = CLI_FAIL;
    }
    return rc;
}
