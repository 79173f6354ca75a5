/* Training curves: the points of one or more runs, read from the JSON lines of `train --metrics`
 * (or from the same lines as a run writes them), drawn as one SVG of small panels: train loss,
 * test loss, test accuracy and learning rate against optimizer steps. plot.c reads the lines
 * and holds the `plot` command; plot_svg.c draws. */
#ifndef CLTRAIN_CLI_PLOT_H
#define CLTRAIN_CLI_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The curves of a run: the four panels' series in the order drawn, then the per-epoch train
 * loss, drawn in the train-loss panel when the run has no log points. */
enum plot_kind {
    PLOT_TRAIN_LOSS,    /* "log" lines' loss */
    PLOT_TEST_LOSS,     /* "eval" lines' test_loss */
    PLOT_TEST_ACCURACY, /* "eval" lines' test_accuracy (absent for regression: -1) */
    PLOT_LR,            /* "log" lines' lr */
    PLOT_EPOCH_LOSS,    /* "epoch" lines' train_loss */
    PLOT__COUNT
};
enum { PLOT__PANELS = PLOT_EPOCH_LOSS };

/* Points in file order. A value that is not finite (a diverged loss: "nan") is kept and drawn
 * as a gap; a step lower than the one before (a resumed run that repeats steps, or several
 * runs appended to one file) starts a new stretch of line. */
struct plot_series {
    size_t n, cap;
    double *step, *value;
};

struct plot_run {
    const char *name; /* the legend's (not owned) */
    struct plot_series s[PLOT__COUNT];
    long records; /* log, eval and epoch lines read */
};

/* Reads one JSON line (without its newline; len bytes, no NUL inside) into run. Lines of the
 * kinds "log", "eval" and "epoch" add their points and need a numeric "step"; other JSON
 * objects (other events, fields added later) are accepted and ignored. Returns 0, or -1 with
 * what is wrong in err (a line that is not one JSON object, a record without its step), or -2
 * when memory ran out. */
int plot_read_line(struct plot_run *run, const char *line, size_t len, char *err, size_t errn);

/* Frees the points (not the name); the run is empty after. */
void plot_run_free(struct plot_run *run);

struct plot_options {
    const char *title; /* the figure's; NULL for "Training curves" */
    bool log_loss;     /* the loss panels on a log scale (values <= 0 are left out) */
};

/* Draws the n runs as one SVG document on f, each run in its own colour with its name in the
 * legend; a panel without points says so. Write errors are left on f's error flag. */
void plot_svg_write(FILE *f, const struct plot_run *runs, int n, const struct plot_options *o);

/* Writes the figure to path as a safe output file (replaced whole, never left half-written).
 * Returns 0, or -1 with clt_last_errmsg() naming the path and the reason. */
int plot_svg_save(const char *path, const struct plot_run *runs, int n,
                  const struct plot_options *o);

#endif
