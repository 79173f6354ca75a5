/* The files a command reads and writes, against each other: no output may be one of the run's
 * inputs or another output (checked before any device work), and each output is locked for the
 * life of the process, so that a second run writing the same path fails at once. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_paths_add(struct cli_paths *ps, const char *flag, const char *path, bool output,
                   const char *replaced_by)
{
    if (!path || !*path || ps->n == CLI_MAX_PATHS) return;
    ps->p[ps->n++] = (struct cli_path){flag, path, output, replaced_by};
}

/* Keeps a copy of path (freed by cli_paths_check) and adds it as an input. */
static void add_owned(struct cli_paths *ps, const char *flag, char *path)
{
    if (!path || ps->nowned == CLI_MAX_PATHS) {
        free(path);
        return;
    }
    ps->owned[ps->nowned++] = path;
    cli_paths_add(ps, flag, path, false, NULL);
}

/* The IDX files of a folder that exist: what clt_data_open reads there. */
static void add_idx(struct cli_paths *ps, const char *flag, const char *dir)
{
    static const char *stems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (size_t i = 0; i < sizeof stems / sizeof stems[0]; i++)
        for (int gz = 0; gz < 2; gz++) {
            size_t n = strlen(dir) + strlen(stems[i]) + 5;
            char *p = malloc(n);
            struct stat sb;
            if (!p) return;
            snprintf(p, n, "%s/%s%s", dir, stems[i], gz ? ".gz" : "");
            if (stat(p, &sb) == 0) add_owned(ps, flag, p);
            else free(p);
        }
}

void cli_paths_add_data(struct cli_paths *ps, const char *flag, const char *spec)
{
    if (strncmp(spec, "csv:", 4) == 0) { /* TRAIN[,TEST], split at the first comma */
        const char *files = spec + 4, *comma = strchr(files, ',');
        size_t n = comma ? (size_t)(comma - files) : strlen(files);
        char *train = malloc(n + 1);
        if (train) {
            memcpy(train, files, n);
            train[n] = '\0';
        }
        add_owned(ps, flag, train);
        if (comma) cli_paths_add(ps, flag, comma + 1, false, NULL);
    } else if (strncmp(spec, "idx:", 4) == 0) {
        add_idx(ps, flag, spec + 4);
    } else if (strcmp(spec, "fashion-mnist") == 0 || strcmp(spec, "mnist") == 0) {
        const char *root = getenv("CLTRAIN_DATA_DIR"); /* as clt_data_open looks for them */
        if (!root || !*root) root = "/usr/share/datasets";
        size_t n = strlen(root) + strlen(spec) + 2;
        char *dir = malloc(n);
        if (!dir) return;
        snprintf(dir, n, "%s/%s", root, spec);
        add_idx(ps, flag, dir);
        free(dir);
    }
}

int cli_paths_check(struct cli_paths *ps)
{
    int rc = CLI_OK;
    for (int i = 0; rc == CLI_OK && i < ps->n; i++) {
        const struct cli_path *o = &ps->p[i];
        if (!o->output) continue;
        for (int j = 0; rc == CLI_OK && j < ps->n; j++) {
            const struct cli_path *x = &ps->p[j];
            bool same = false;
            if (j == i || (x->output && j < i)) continue; /* each pair of outputs once */
            if (!x->output && x->replaced_by && strcmp(x->replaced_by, o->flag) == 0) continue;
            if (clt_outfile_same(o->path, x->path, &same) != CLT_OK) {
                rc = cli_error("%s", clt_last_errmsg());
            } else if (same && x->output) {
                rc = cli_usage_error("%s %s and %s %s name the same file: each output needs its "
                                     "own", o->flag, o->path, x->flag, x->path);
            } else if (same) {
                rc = cli_usage_error("%s %s and %s %s name the same file: an output must not "
                                     "replace one of the run's inputs", o->flag, o->path,
                                     x->flag, x->path);
            }
        }
    }
    for (int i = 0; i < ps->nowned; i++) free(ps->owned[i]);
    ps->nowned = 0;
    ps->n = 0;
    return rc;
}

static clt_outfile_lock *locks[CLI_MAX_PATHS];
static int nlocks;

int cli_lock_output(const char *flag, const char *path)
{
    if (nlocks == CLI_MAX_PATHS) return cli_error("%s %s: too many outputs to lock", flag, path);
    if (clt_outfile_lock_acquire(&locks[nlocks], path) != CLT_OK)
        return cli_error("%s %s", flag, clt_last_errmsg());
    nlocks++;
    return CLI_OK;
}

void cli_release_locks(void)
{
    while (nlocks > 0) clt_outfile_lock_release(locks[--nlocks]);
}
