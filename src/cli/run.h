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
    bool clipping; /* --clip-grad: log points report the gradients' norm */
    bool text;     /* a language model: evaluations in nats per token and bits per character */
    bool bytes;    /* ... whose tokens are bytes (bits per byte) */
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

/* The image-folder flags that train, eval and predict share (images:DIR). */
struct cli_image_opts {
    long channels;      /* --channels: 0 (the first image's), 1 or 3 */
    const char *size;   /* --image-size H,W, or NULL */
    float val_split;    /* --val-split */
    bool skip_bad;      /* --skip-bad-images */
    bool channels_seen, val_seen;
};

/* The flags of `cltrain train` as given, then what check_train_args derives from them. */
struct train_args {
    const char *data, *model, *device, *optimizer, *schedule, *task, *init_scheme, *metrics,
        *save, *resume, *init, *loader, *label_text, *precision, *augment, *input_shape, *plot,
        *betas, *tokens;
    long block, eval_batches; /* text data */
    long epochs, steps, batch, log_every, save_every, warmup, step_size, label_column, prefetch,
        n_classes, accumulate;
    uint64_t seed;
    float lr, momentum, weight_decay, dampening, gamma, min_lr, smoothing, beta1, beta2, eps,
        clip_grad;
    bool profile, sync_debug, memory, seed_seen, dry_run, auto_batch;
    bool no_shuffle, drop_last, normalize, nesterov, quiet, lr_seen, wd_seen, model_seen,
        label_seen, step_size_seen, on_device, no_pin, loader_seen, prefetch_seen;
    bool change_recipe; /* --resume: values given may differ from the checkpoint's recipe */
    /* the recipe's flags given on the command line (--resume takes the others from the
     * checkpoint; lr_seen, wd_seen, step_size_seen and the flags' own values say the rest) */
    struct {
        bool epochs, steps, batch, accumulate, precision, optimizer, momentum, dampening, beta1,
            beta2, betas, eps, schedule, warmup, gamma, min_lr, smoothing, clip_grad;
    } given;
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
    struct cli_image_opts img;
};

/* --resume: one recipe value given that differs from the checkpoint's: the flag, both values as
 * the flag takes them, and whether --change-recipe may override it (not the optimizer, whose
 * state the checkpoint holds, nor a change to or from fp16, whose loss scaler it holds). */
struct recipe_change {
    char flag[24], was[64], now[64], why[96];
    bool fixed;
};
enum { MAX_RECIPE_CHANGES = 24 };

/* Whether --data names text (text:FILE[,VAL_FILE] or shakespeare): a language model's data. */
bool cli_is_text_data(const char *data);
/* The preset a one-word spec names (blanks around it, any case), else NULL. */
const clt_spec_preset *cli_preset_of(const char *model);
/* A language model's default window and batch of windows for `model`: a preset's, else
 * nanoGPT's CPU configuration's (64 and 12). Either pointer may be NULL. */
void cli_lm_defaults(const char *model, long *block, long *batch);
/* Opens the text of --data into *out, tokenised by --tokens (NULL: char) or, with `from` (a
 * checkpoint; plain_ok: a plain state dict too), by that checkpoint's vocabulary, whose first
 * character outside it is the error. Prints the error; returns CLI_OK, CLI_USAGE or CLI_FAIL. */
int cli_open_text(const char *data, const char *tokens, const char *from, bool plain_ok,
                  clt_text *out);

/* What a run holds from opening the data to the end; train_run_close releases it. */
struct train_run {
    clt_dataset train, test;
    bool is_text;  /* --data text:FILE or shakespeare: a language model's run */
    clt_text text; /* its tokens and vocabulary */
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
    bool together;           /* MPI: every rank failed alike (rank 0 printed it): no abort */
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
    /* --resume with --change-recipe: the values that differ from the checkpoint's recipe */
    struct recipe_change changes[MAX_RECIPE_CHANGES];
    int nchanges;
    char augment_text[64]; /* --augment as taken from the checkpoint */
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

/* ---- run.c ---- */
/* The effective batch, steps per epoch and total optimizer steps of a run over n samples with
 * the flags' batch, accumulate, --drop-last, --epochs and --steps; a product too large is a
 * usage error. */
int cli_plan_total(const struct train_args *a, size_t n, long *eff, long *spe, long *total);
/* The augmentation against the data: --augment needs images (C, H, W). */
int cli_check_augment_data(const struct train_args *a, const clt_dataset *train);

/* ---- recipe.c ---- */
/* --resume: the model given must be the checkpoint's (refused otherwise, both specs named);
 * each recipe value not given is taken from the checkpoint, each given differently is refused
 * (all named, one line, CLI_USAGE) unless --change-recipe, which records them in r->changes.
 * A checkpoint without a recipe keeps the flags as given (run.c notes it once the set-up has
 * loaded the checkpoint). Before plan_steps. */
int cli_resume_recipe(struct train_args *a, struct train_run *r);
/* The recipe changes as "; recipe changed: --lr 0.02 (the checkpoint's: 0.01), ..." ("" for
 * none), for the header line. */
void cli_describe_recipe_changes(const struct train_run *r, char *dst, size_t n);
/* The recipe changes as one --metrics JSON line {"event":"recipe_change","step":..,
 * "changes":{"lr":{"checkpoint":"0.01","run":"0.02"},...}} (nothing for none). */
void cli_write_recipe_changes(const struct train_run *r, FILE *f);

/* ---- setup.c ---- */
/* Prints the ctx's message (else the thread's) and returns CLI_FAIL. */
int cli_fail_status(clt_ctx *ctx);
/* A failure during set-up or training: the message, and on out-of-memory the memory report
 * and the remedies in the order to try them. */
int cli_fail_train(clt_ctx *ctx, clt_status st, const struct clt_train_setup_params *sp,
                   size_t batch);
/* The one-line note for a checkpoint without checksums, once it has loaded. */
void cli_note_unverified(const clt_checkpoint *ck, const char *path);
/* The image flags into dp (only with images:DIR data; else a usage error naming the flag). */
int cli_apply_image_opts(const struct cli_image_opts *o, const char *data,
                         struct clt_data_params *dp);
/* "a, b, c" (at most about 200 characters, then "...") of a data set's class names. */
void cli_class_list(char *const *names, int n, char *buf, size_t size);
/* Refuses data whose class names (image folders) differ from the checkpoint's. */
int cli_check_class_names(const char *ckpt, const char *const *ck_names, int ck_n,
                          const char *data, char *const *names, int n);

/* The ctx on the selected device (a bad CLTRAIN_GEMM or CLTRAIN_MAX_MEMORY fails here). */
int cli_open_ctx(const char *device, bool profiling, bool sync_debug, clt_ctx **ctx);

/* ---- progress.c ---- */
/* The trainer's event callback (user: the struct reporter), and the end of an open progress
 * line. */
void cli_on_event(const struct clt_train_event *e, void *user);
void cli_end_line(struct reporter *r);
/* The flag the trainer checks (clt_train_params.interrupt): the stop signal's number once one
 * came. catch installs the handlers (and clears the flag), restore puts back the old ones.
 * `repeated`: a second signal of a kind is caught too (under mpirun, where one signal often
 * comes twice: from the launcher to every process, and forwarded by mpirun); else it kills
 * the program as usual (a second Ctrl-C). */
const volatile sig_atomic_t *cli_stop_flag(void);
void cli_catch_stop_signals(bool repeated);
void cli_restore_stop_signals(void);
const char *cli_stop_signal_name(int sig); /* "SIGINT", "SIGTERM", "SIGHUP" */

#endif
