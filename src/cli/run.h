/* What the training, evaluation and prediction commands share: the flags of a training run
 * (args.c), the run's state (run.c), its progress and stop signals (progress.c), and the
 * set-up helpers (setup.c). */
#ifndef CLTRAIN_CLI_RUN_H
#define CLTRAIN_CLI_RUN_H

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/plot.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

struct reporter {
    FILE *metrics;
    bool metrics_failed; /* a write to it failed (metrics_errno: why, 0 if unknown) */
    int metrics_errno;
    bool tty;    /* stdout is a terminal and no MPI launcher sits between: one updating line */
    bool quiet;  /* --quiet: the final epoch's summary only */
    bool silent; /* an MPI rank other than 0: nothing (rank 0 speaks for all) */
    bool line_open, has_test;
    double epoch_loss, epoch_s, epoch_rate; /* of the epoch whose evaluation comes next */
    struct clt_ctx_stats last;             /* counters at the previous epoch's summary */
    struct clt_loader_stats last_loader;
    size_t backoff_batch; /* the micro-batch of the last auto-batch retry (0: none) */
    struct clt_train_event last_event; /* the last one (its reduce fields end the run) */
    bool have_event;
    long eta_step;  /* the ETA's rate runs from the first report (a resumed run's first step */
    double eta_t;   /* is not this process's): its step and elapsed time, once eta_set */
    bool eta_set;
    long builds; /* programs compiled or loaded from the disk cache before the run */
    /* --plot: the run's curves, fed the metrics lines as they are made, and the SVG rewritten
     * from them (NULL: none) */
    struct plot_run *plot;
    const char *plot_path;
    double plot_t;     /* elapsed_s at the last rewrite */
    bool plot_written; /* a rewrite was tried */
    bool plot_oom;     /* memory ran out for a point: the figure is not finished */
};

/* The flags of `cltrain train` as given, then what check_train_args derives from them. */
struct train_args {
    const char *data, *model, *device, *optimizer, *schedule, *task, *init_scheme, *metrics,
        *save, *resume, *init, *loader, *label_text, *precision, *augment, *input_shape, *plot;
    long epochs, steps, batch, log_every, save_every, warmup, step_size, label_column, prefetch,
        n_classes, accumulate;
    uint64_t seed;
    float lr, momentum, weight_decay, dampening, gamma, min_lr, smoothing, beta1, beta2, eps;
    bool profile, sync_debug, memory, seed_seen, dry_run, auto_batch;
    bool no_shuffle, drop_last, normalize, nesterov, quiet, lr_seen, wd_seen, model_seen,
        label_seen, step_size_seen, on_device, no_pin, loader_seen, prefetch_seen;
    const char *devices, *device_shares; /* several replicas in this process */
    bool share_devices;                  /* mpirun: ranks may share a device */
    /* derived */
    bool mpi;  /* started by mpirun: one replica per rank */
    int ndev;  /* --devices: the selectors (0 for all-gpus, resolved when listing) */
    char dev_sel[CLT_COMM_MAX_MEMBERS][256];
    int nshares; /* --device-shares */
    int shares[CLT_COMM_MAX_MEMBERS];
    clt_loader_mode lmode;
    struct clt_data_params dp;
    struct clt_optim_params op;
    clt_init init_kind;
    clt_dtype prec;
    struct clt_augment aug; /* --augment, parsed */
};

/* What a run holds from opening the data to the end; train_run_close releases it. */
struct train_run {
    clt_dataset train, test;
    clt_spec spec;
    clt_ctx *ctx;            /* replica 0's (this rank's): ctxs[0] */
    clt_train_setup *setup;  /* replica 0's: setups[0] */
    /* the replicas in this process: one, or --devices' n in a group; under mpirun this rank's
     * one, with the MPI comm */
    int n;
    clt_ctx *ctxs[CLT_COMM_MAX_MEMBERS];
    clt_train_setup *setups[CLT_COMM_MAX_MEMBERS];
    clt_comm_group *group;
    clt_comm *mpi;
    int shares[CLT_COMM_MAX_MEMBERS]; /* the group's */
    int rank, size;          /* MPI: this rank and the ranks; else 0 and 1 */
    struct clt_train_setup_params sp; /* replica 0's (train.comm: its member) */
    clt_checkpoint *ck;
    const char *from; /* --resume or --init: the checkpoint's path, else NULL */
    float *mean, *std;
    struct clt_input_norm norm;
    int classes;
    char *spec_text;
    long eff;                  /* the effective batch, kept by --auto-batch */
    struct clt_mem_stats ms;   /* the accountant once the set-up is built */
    FILE *mf;
    struct plot_run plot; /* --plot's curves (rep.plot points here) */
    bool trained;         /* the training loop ran: --plot's figure is due */
    struct reporter rep;
};

/* ---- args.c ---- */
/* The table of flags and cli_parse; *help when --help printed it (nothing else to do). */
int cli_parse_train_args(int argc, char **argv, struct train_args *a, bool *help);
/* The flags that must agree with each other, the loader and the outputs (checked before any
 * data is read), and the data parameters; cli_check_outputs: the output files' folders. */
int cli_check_train_args(struct train_args *a);
int cli_check_outputs(const struct train_args *a);
/* The optimizer, schedule, init scheme and precision from their flags. */
int cli_make_optim_params(struct train_args *a);

/* ---- setup.c ---- */
/* Prints the ctx's message (else the thread's) and returns CLI_FAIL. */
int cli_fail_status(clt_ctx *ctx);
/* A failure during set-up or training: the message, and on out-of-memory the memory report
 * and the remedies in the order to try them. */
int cli_fail_train(clt_ctx *ctx, clt_status st, const struct clt_train_setup_params *sp,
                   size_t batch);
/* The one-line note for a checkpoint without checksums, once it has loaded. */
void cli_note_unverified(const clt_checkpoint *ck, const char *path);
/* The ctx on the selected device (a bad CLTRAIN_GEMM or CLTRAIN_MAX_MEMORY fails here). */
int cli_open_ctx(const char *device, bool profiling, bool sync_debug, clt_ctx **ctx);

/* ---- progress.c ---- */
/* The trainer's event callback (user: the struct reporter), and the end of an open progress
 * line. */
void cli_on_event(const struct clt_train_event *e, void *user);
void cli_end_line(struct reporter *r);
/* The flag the trainer checks (clt_train_params.interrupt): the stop signal's number once one
 * came. catch installs the handlers (and clears the flag), restore puts back the old ones. */
const volatile sig_atomic_t *cli_stop_flag(void);
void cli_catch_stop_signals(void);
void cli_restore_stop_signals(void);
const char *cli_stop_signal_name(int sig); /* "SIGINT", "SIGTERM", "SIGHUP" */

#endif
