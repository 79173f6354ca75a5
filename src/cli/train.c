/* `cltrain train`, `cltrain eval` and `cltrain predict`: data, model and optimizer from flags,
 * progress on a terminal or plain log lines, metrics as JSON lines, checkpoints. */
#include "cli/cli.h"
#include "cli/options.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ctrl-C (SIGINT), SIGTERM (preemption on clusters) and SIGHUP (the terminal went away): the
 * first one raises the flag the training loop checks before every step (it stops at a step
 * boundary, saves a checkpoint if --save was given, and returns CLT_ERR_INTERRUPTED); the exit
 * code is then the shell's for a death by that signal, 128 + its number (130, 143, 129).
 * SA_RESETHAND makes a second one of the same kind kill the program as usual. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP_SIGNALS (int)(sizeof stop_signals / sizeof stop_signals[0])
static volatile sig_atomic_t interrupt_flag = 0; /* the signal's number once one came */

static void on_stop_signal(int sig)
{
    interrupt_flag = sig;
}

static const char *stop_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
}

static void catch_stop_signals(struct sigaction old[NSTOP_SIGNALS])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    interrupt_flag = 0;
    for (int i = 0; i < NSTOP_SIGNALS; i++)
        sigaction(stop_signals[i], &sa, &old[i]);
}

static void restore_stop_signals(const struct sigaction old[NSTOP_SIGNALS])
{
    for (int i = 0; i < NSTOP_SIGNALS; i++)
        sigaction(stop_signals[i], &old[i], NULL);
}

/* ---- shared set-up ------------------------------------------------------------------------ */

static int fail_status(clt_ctx *ctx)
{
    /* never an empty line: a failure recorded for the thread only still has its message */
    const char *msg = ctx ? clt_ctx_errmsg(ctx) : "";
    if (!msg[0]) msg = clt_last_errmsg();
    return cli_error("%s", msg[0] ? msg : "failed without a message (a bug: please report it)");
}

/* The one-line note for a checkpoint without checksums, once it has loaded. */
static void note_unverified(const clt_checkpoint *ck, const char *path)
{
    if (!clt_checkpoint_has_checksums(ck))
        fprintf(stderr, "cltrain: note: %s has no checksums (written by another tool or an older "
                        "cltrain): its tensors were loaded unverified\n", path);
}

/* A failure during set-up or training: the message, and on out-of-memory the memory report
 * (with the estimates for the micro-batch that failed and the next larger one) and the
 * remedies in the order to try them. */
static int fail_train(clt_ctx *ctx, clt_status st, const struct clt_train_setup_params *sp,
                      size_t batch)
{
    int rc = fail_status(ctx);
    if (st == CLT_ERR_OUT_OF_MEMORY && ctx) {
        char report[4096];
        clt_train_mem_report(ctx, sp, batch, report, sizeof report);
        /* Staging is the streaming loader's ring: --prefetch buffers of a batch each. */
        bool staging = strstr(clt_ctx_errmsg(ctx), "requested for staging") != NULL;
        char first[96] = "";
        if (staging && sp->loader.mode != CLT_LOADER_RESIDENT)
            snprintf(first, sizeof first, "fewer staging buffers (--prefetch 2 or 3, now %d); ",
                     sp->loader.prefetch);
        fprintf(stderr,
                "%sremedies, in this order: %sa smaller --batch-size; then mixed precision "
                "(--precision bf16, or fp16); then --accumulate N with a smaller --batch-size to "
                "keep the effective batch (--auto-batch does both for you)\n",
                report, first);
    }
    return rc;
}

static bool is_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

/* A spec given as a file's path or as text. */
static clt_status parse_model(const char *text, int classes, clt_spec *spec)
{
    if (access(text, R_OK) == 0) return clt_spec_parse_file(text, classes, spec);
    return clt_spec_parse(text, classes, spec);
}

static int open_ctx(const char *device, bool profiling, bool sync_debug, clt_ctx **ctx)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    p.device = device;
    p.profiling = profiling;
    p.sync_debug = sync_debug;
    if (clt_ctx_create(ctx, &p) != CLT_OK) return fail_status(NULL);
    /* The GEMM choices (tuning file, CLTRAIN_GEMM) are read at the first GEMM; read them now
     * so that a bad CLTRAIN_GEMM stops the run before the data is loaded. */
    if (!clt_ctx_tune(*ctx)) {
        int rc = fail_status(*ctx);
        clt_ctx_free(*ctx);
        *ctx = NULL;
        return rc;
    }
    return CLI_OK;
}

/* ---- progress and metrics ----------------------------------------------------------------- */

struct reporter {
    FILE *metrics;
    bool metrics_failed; /* a write to it failed (metrics_errno: why, 0 if unknown) */
    int metrics_errno;
    bool tty, quiet;
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
};

static void fmt_duration(double s, char *dst, size_t n)
{
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(dst, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(dst, n, "%ld:%02ld", t / 60, t % 60);
}

/* The training thread's host waits since `before`, by reason, then the streaming loader's
 * thread: "host waits 6 (log 5, eval 1); loader thread waits 465 (1.20 s), batch stall 1.25 s"
 * (the loader thread's waits for the device and the time the training thread waited for a
 * batch; both grow together when the device is the bottleneck, see loader.h). */
static void print_waits(const struct clt_train_event *e, const struct clt_ctx_stats *before,
                        const struct clt_loader_stats *lbefore)
{
    const struct clt_ctx_stats *now = &e->stats;
    long loader = now->host_waits[CLT_WAIT_LOADER] - before->host_waits[CLT_WAIT_LOADER];
    printf("host waits %ld (", now->host_waits_total - before->host_waits_total - loader);
    bool first = true;
    for (int r = 0; r < CLT_WAIT__COUNT; r++) {
        long n = now->host_waits[r] - before->host_waits[r];
        if (!n || r == CLT_WAIT_LOADER) continue;
        printf("%s%s %ld", first ? "" : ", ", clt_wait_reason_name((clt_wait_reason)r), n);
        first = false;
    }
    printf(")");
    if (e->loader.uploads > lbefore->uploads || loader)
        printf("; loader thread waits %ld (%.2f s), batch stall %.2f s", loader,
               e->loader.wait_s - lbefore->wait_s, e->loader.stall_s - lbefore->stall_s);
}

static void end_line(struct reporter *r)
{
    if (r->line_open) {
        printf("\n");
        r->line_open = false;
    }
}

/* "epoch 3/10: train loss 0.2840, test loss 0.3554, test accuracy 87.10%, 13.64 s (4398
 * samples/s), host waits 7 (log 6, eval 1)" once an epoch and its evaluation are done. */
static void print_summary(struct reporter *r, const struct clt_train_event *e,
                          const struct clt_train_event *eval)
{
    if (!r->quiet) {
        printf("epoch %d/%d: train loss %.4f", e->epoch, e->epochs, r->epoch_loss);
        if (eval && isnan(eval->accuracy)) printf(", test loss %.4f", eval->loss);
        else if (eval)
            printf(", test loss %.4f, test accuracy %.2f%%", eval->loss, 100.0 * eval->accuracy);
        printf(", %.2f s (%.0f samples/s), ", r->epoch_s, r->epoch_rate);
        print_waits(e, &r->last, &r->last_loader);
        printf("\n");
    }
    r->last = e->stats;
    r->last_loader = e->loader;
}

static void on_event(const struct clt_train_event *e, void *user)
{
    struct reporter *r = user;
    char eta[32], elapsed[32];
    r->last_event = *e;
    r->last_event.path = r->last_event.message = NULL; /* valid during the call only */
    r->have_event = true;
    if (!r->eta_set && (e->kind == CLT_EVENT_LOG || e->kind == CLT_EVENT_EPOCH)) {
        r->eta_set = true;
        r->eta_step = e->step;
        r->eta_t = e->elapsed_s;
    }
    /* seconds per step: since the first report, or at that report its own rate */
    double per_step = e->step > r->eta_step
                          ? (e->elapsed_s - r->eta_t) / (double)(e->step - r->eta_step)
                      : e->samples_per_s > 0
                          ? (double)e->batch_size * (e->accumulate > 1 ? e->accumulate : 1) /
                                e->samples_per_s
                          : 0;
    double left = (double)(e->total_steps - e->step) * per_step;
    fmt_duration(left, eta, sizeof eta);
    fmt_duration(e->elapsed_s, elapsed, sizeof elapsed);
    switch (e->kind) {
    case CLT_EVENT_LOG:
        if (r->metrics)
            fprintf(r->metrics,
                    "{\"event\":\"log\",\"epoch\":%d,\"step\":%ld,\"loss\":%.6g,\"lr\":%.6g,"
                    "\"samples_per_s\":%.1f,\"elapsed_s\":%.3f}\n",
                    e->epoch, e->step, e->loss, e->lr, e->samples_per_s, e->elapsed_s);
        if (r->quiet) break;
        if (r->tty) {
            printf("\r\033[Kepoch %d/%d  step %ld/%ld  loss %.4f  %.0f samples/s  ETA %s", e->epoch,
                   e->epochs, e->step, e->total_steps, e->loss, e->samples_per_s, eta);
            if (e->precision == CLT_DTYPE_F16) printf("  skipped %ld", e->skipped);
            r->line_open = true;
        } else {
            printf("epoch %d/%d step %ld/%ld loss %.4f lr %.3g %.0f samples/s elapsed %s ETA %s",
                   e->epoch, e->epochs, e->step, e->total_steps, e->loss, e->lr, e->samples_per_s,
                   elapsed, eta);
            if (e->precision == CLT_DTYPE_F16) /* loss scaling */
                printf(" skipped %ld scale %g", e->skipped, e->loss_scale);
            printf("\n");
        }
        break;
    case CLT_EVENT_EPOCH:
        end_line(r);
        if (r->metrics)
            fprintf(r->metrics,
                    "{\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,\"train_loss\":%.6g,"
                    "\"epoch_s\":%.3f,\"samples_per_s\":%.1f}\n",
                    e->epoch, e->step, e->loss, e->epoch_s, e->samples_per_s);
        r->epoch_loss = e->loss;
        r->epoch_s = e->epoch_s;
        r->epoch_rate = e->samples_per_s;
        if (!r->has_test) print_summary(r, e, NULL);
        break;
    case CLT_EVENT_EVAL:
        if (r->metrics)
            fprintf(r->metrics,
                    "{\"event\":\"eval\",\"epoch\":%d,\"step\":%ld,\"test_loss\":%.6g,"
                    "\"test_accuracy\":%.6g,\"host_waits\":%ld}\n",
                    e->epoch, e->step, e->loss, isnan(e->accuracy) ? -1.0 : e->accuracy,
                    e->stats.host_waits_total - r->last.host_waits_total);
        print_summary(r, e, e);
        break;
    case CLT_EVENT_SAVE:
        end_line(r);
        if (!r->quiet) printf("saved %s (step %ld)\n", e->path, e->step);
        break;
    case CLT_EVENT_BACKOFF:
        /* printed even with --quiet: the run's batch is not the one asked for */
        end_line(r);
        r->backoff_batch = e->batch_size;
        printf("auto-batch: %s; retrying with micro-batch %zu x accumulate %d (effective batch "
               "%zu)\n",
               e->message, e->batch_size, e->accumulate, e->batch_size * (size_t)e->accumulate);
        break;
    }
    if (r->metrics && !r->metrics_failed) {
        errno = 0;
        if (fflush(r->metrics) != 0 || ferror(r->metrics)) {
            r->metrics_failed = true;
            r->metrics_errno = errno;
        }
    }
    fflush(stdout);
}

/* ---- train -------------------------------------------------------------------------------- */

/* The flags of `cltrain train` as given, then what check_train_args derives from them. */
struct train_args {
    const char *data, *model, *device, *optimizer, *schedule, *task, *init_scheme, *metrics,
        *save, *resume, *init, *loader, *label_text, *precision, *augment, *input_shape;
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
    struct reporter rep;
};

/* The table of flags and cli_parse; *help when --help printed it (nothing else to do). */
static int parse_train_args(int argc, char **argv, struct train_args *a, bool *help)
{
    const struct cli_opt opts[] = {
        {"data", OPT_STR, &a->data, "fashion-mnist, mnist, idx:DIR or csv:TRAIN[,TEST]", NULL},
        {"label-column", OPT_STR, &a->label_text, "CSV column of the label (0-based, -1 = last)",
         &a->label_seen},
        {"task", OPT_STR, &a->task, "classification or regression (CSV)", NULL},
        {"classes", OPT_POS_INT, &a->n_classes,
         "classification: the number of classes N, labels 0..N-1 (default: the largest label "
         "+ 1, every class present; give it for 1-based labels or classes absent from the data)",
         NULL},
        {"model", OPT_STR, &a->model,
         "a spec (\"linear 256, relu, linear 10\"), a file, mlp or logreg", &a->model_seen},
        {"init-scheme", OPT_STR, &a->init_scheme, "default (PyTorch's), kaiming or xavier", NULL},
        {"epochs", OPT_POS_INT, &a->epochs, "passes over the training split (10)", NULL},
        {"steps", OPT_POS_INT, &a->steps, "stop after this many optimizer steps", NULL},
        {"batch-size", OPT_POS_INT, &a->batch, "samples per forward pass, the micro-batch (128)",
         NULL},
        {"accumulate", OPT_POS_INT, &a->accumulate,
         "micro-batches per optimizer step, gradients summed (1)", NULL},
        {"auto-batch", OPT_FLAG, &a->auto_batch,
         "out of memory: halve the micro-batch, double --accumulate, retry", NULL},
        {"precision", OPT_STR, &a->precision,
         "fp32, bf16 or fp16 (loss-scaled): storage of activations and weights used (fp32)",
         NULL},
        {"optimizer", OPT_STR, &a->optimizer, "sgd, adam or adamw (adam)", NULL},
        {"lr", OPT_POS_FLOAT, &a->lr, "learning rate (1e-3)", &a->lr_seen},
        {"momentum", OPT_NONNEG_FLOAT, &a->momentum, "SGD momentum (0)", NULL},
        {"dampening", OPT_NONNEG_FLOAT, &a->dampening, "SGD dampening (0)", NULL},
        {"nesterov", OPT_FLAG, &a->nesterov, "SGD with Nesterov momentum", NULL},
        {"beta1", OPT_UNIT_FLOAT, &a->beta1, "Adam beta1 (0.9)", NULL},
        {"beta2", OPT_UNIT_FLOAT, &a->beta2, "Adam beta2 (0.999)", NULL},
        {"eps", OPT_POS_FLOAT, &a->eps, "Adam epsilon (1e-8)", NULL},
        {"weight-decay", OPT_NONNEG_FLOAT, &a->weight_decay,
         "L2 (SGD, Adam) or decoupled (AdamW)", &a->wd_seen},
        {"schedule", OPT_STR, &a->schedule, "constant, step or cosine (constant)", NULL},
        {"warmup", OPT_NONNEG_INT, &a->warmup, "linear warm-up steps (0)", NULL},
        {"step-size", OPT_POS_INT, &a->step_size,
         "step schedule: steps between decays (1 epoch)", &a->step_size_seen},
        {"gamma", OPT_POS_FLOAT, &a->gamma, "step schedule: decay factor (0.1)", NULL},
        {"min-lr", OPT_NONNEG_FLOAT, &a->min_lr, "cosine schedule: final learning rate (0)",
         NULL},
        {"label-smoothing", OPT_UNIT_FLOAT, &a->smoothing, "cross-entropy label smoothing (0)",
         NULL},
        {"seed", OPT_U64, &a->seed,
         "initial weights, shuffling and dropout (0; --resume: the run's)", &a->seed_seen},
        {"no-shuffle", OPT_FLAG, &a->no_shuffle, "keep the file order", NULL},
        {"drop-last", OPT_FLAG, &a->drop_last, "drop a last partial batch", NULL},
        {"loader", OPT_STR, &a->loader,
         "auto (resident if the split fits in 1/4 of device memory), resident or streaming",
         &a->loader_seen},
        {"data-on-device", OPT_FLAG, &a->on_device,
         "the whole training split on the device (= --loader resident)", NULL},
        {"prefetch", OPT_POS_INT, &a->prefetch,
         "streaming: staging buffers in the ring (3, >= 2)", &a->prefetch_seen},
        {"no-pin", OPT_FLAG, &a->no_pin,
         "streaming: pageable instead of pinned staging memory (for comparison)", NULL},
        {"normalize", OPT_FLAG, &a->normalize, "standardise each feature (training statistics)",
         NULL},
        {"input-shape", OPT_STR, &a->input_shape,
         "one sample's shape C,H,W or T,C for conv and pooling layers (IDX: 1,H,W; CSV: flat)",
         NULL},
        {"augment", OPT_STR, &a->augment,
         "image training batches, on the device: flip, shift=N, cutout=S, comma-separated "
         "(e.g. flip,shift=2); fill 0 after standardising",
         NULL},
        {"log-every", OPT_NONNEG_INT, &a->log_every, "steps between loss reports (100)", NULL},
        {"metrics", OPT_STR, &a->metrics, "append one JSON object per log point and evaluation",
         NULL},
        {"save", OPT_STR, &a->save, "write a checkpoint (safetensors) at the end", NULL},
        {"save-every", OPT_POS_INT, &a->save_every, "also every N steps", NULL},
        {"resume", OPT_STR, &a->resume, "continue a run from its checkpoint", NULL},
        {"init", OPT_STR, &a->init, "start from a checkpoint's weights, fresh optimizer", NULL},
        {"device", OPT_STR, &a->device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {"devices", OPT_STR, &a->devices,
         "data-parallel on several devices: SEL,SEL,... (one replica each) or all-gpus; "
         "--batch-size is the global batch, split across them",
         NULL},
        {"device-shares", OPT_STR, &a->device_shares,
         "--devices: each device's share of every batch, W1,W2,... positive integers (equal)",
         NULL},
        {"share-devices", OPT_FLAG, &a->share_devices,
         "mpirun: more ranks on a machine than matching devices share them (local rank k "
         "takes match k mod count)",
         NULL},
        {"quiet", OPT_FLAG, &a->quiet, "print only the final result", NULL},
        {"memory", OPT_FLAG, &a->memory,
         "print the device memory report before and after training", NULL},
        {"dry-run", OPT_FLAG, &a->dry_run,
         "build everything, take one step, report the memory it needs, do not train", NULL},
        {"profile", OPT_FLAG, &a->profile,
         "time every kernel and copy with events; print a table", NULL},
        {"sync-debug", OPT_FLAG, &a->sync_debug,
         "wait after every kernel and check it (slow; to find a failing kernel)", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    *help = is_help(argc, argv);
    if (*help) {
        printf("usage: cltrain train [options]\n");
        cli_print_options(stdout, opts);
        return CLI_OK;
    }
    return cli_parse(argc, argv, opts, "train");
}

static int check_outputs(const struct train_args *a)
{
    if (a->save && clt_outfile_check(a->save) != CLT_OK)
        return cli_error("--save %s", clt_last_errmsg());
    if (a->metrics && clt_outfile_check(a->metrics) != CLT_OK)
        return cli_error("--metrics %s", clt_last_errmsg());
    return CLI_OK;
}

/* "A,B,C" into at most max items of out (each shorter than 256 bytes); false for an empty
 * item, too many or too long ones. */
static bool split_list(const char *v, char out[][256], int max, int *n)
{
    *n = 0;
    for (const char *p = v;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= 256 || *n == max) return false;
        memcpy(out[*n], p, len);
        out[(*n)++][len] = '\0';
        if (!comma) return true;
        p = comma + 1;
    }
}

/* --devices, --device-shares and --share-devices, against each other, the flags that need one
 * device, and mpirun (which starts one replica per rank). */
static int check_device_args(struct train_args *a)
{
    if (a->mpi) {
        /* one replica per rank: the rank's device comes from --device and its local rank */
        if (a->devices)
            return cli_usage_error("--devices: not under mpirun, which runs one replica per rank "
                                   "(each rank takes one device: --device SEL, local rank k "
                                   "takes SEL's match k)");
        if (a->dry_run)
            return cli_usage_error("--dry-run: not under mpirun (dry-run one device without "
                                   "mpirun: its estimate holds for each rank's slice)");
        if (a->auto_batch)
            return cli_usage_error("--auto-batch: not under mpirun (a retry on one rank would "
                                   "leave the others at another batch); give --batch-size and "
                                   "--accumulate");
    } else if (a->share_devices) {
        return cli_usage_error("--share-devices applies to runs started by mpirun (ranks that "
                               "share devices); --devices may simply name a device twice");
    }
    if (a->device_shares && !a->devices)
        return cli_usage_error("--device-shares needs --devices (one share per device)");
    if (!a->devices) return CLI_OK;
    if (a->device)
        return cli_usage_error("--devices and --device exclude each other (--devices lists "
                               "every replica's device)");
    if (a->dry_run)
        return cli_usage_error("--devices and --dry-run exclude each other (dry-run one device "
                               "with --device: its estimate holds for each replica's slice)");
    if (a->auto_batch)
        return cli_usage_error("--devices and --auto-batch exclude each other (a retry on one "
                               "replica would leave the others at another batch); give "
                               "--batch-size and --accumulate");
    if (strcmp(a->devices, "all-gpus") != 0 &&
        !split_list(a->devices, a->dev_sel, CLT_COMM_MAX_MEMBERS, &a->ndev))
        return cli_usage_error("--devices %s: expected SEL[,SEL...] (at most %d, none empty) or "
                               "all-gpus", a->devices, CLT_COMM_MAX_MEMBERS);
    if (a->device_shares) {
        char items[CLT_COMM_MAX_MEMBERS][256];
        bool ok = split_list(a->device_shares, items, CLT_COMM_MAX_MEMBERS, &a->nshares);
        for (int i = 0; ok && i < a->nshares; i++) {
            char *end = NULL;
            errno = 0;
            long w = items[i][0] >= '0' && items[i][0] <= '9' ? strtol(items[i], &end, 10) : 0;
            ok = !errno && end && !*end && w >= 1 && w <= 1000000;
            a->shares[i] = (int)w;
        }
        if (!ok)
            return cli_usage_error("--device-shares %s: expected W1,W2,... (positive integers "
                                   "up to 1000000, one per device)", a->device_shares);
        if (a->ndev && a->nshares != a->ndev)
            return cli_usage_error("--device-shares %s: %d share%s for %d devices (--devices "
                                   "%s); expected one per device", a->device_shares, a->nshares,
                                   a->nshares == 1 ? "" : "s", a->ndev, a->devices);
    }
    return CLI_OK;
}

/* The flags that must agree with each other, the loader and the outputs (checked before any
 * data is read), and the data parameters. */
static int check_train_args(struct train_args *a)
{
    int rc = check_device_args(a);
    if (rc != CLI_OK) return rc;
    if (a->label_seen &&
        cli_parse_long("label-column", a->label_text, -1, INT32_MAX, &a->label_column))
        return CLI_USAGE;
    if (a->resume && a->init) return cli_usage_error("--resume and --init exclude each other");
    if (clt_loader_mode_parse(a->loader, &a->lmode) != CLT_OK)
        return cli_usage_error("--loader %s: expected auto, resident or streaming", a->loader);
    if (a->on_device) {
        if (a->loader_seen && a->lmode != CLT_LOADER_RESIDENT)
            return cli_usage_error("--data-on-device and --loader %s exclude each other",
                                   a->loader);
        a->lmode = CLT_LOADER_RESIDENT;
    }
    if (a->prefetch < 2 || a->prefetch > CLT_LOADER_MAX_PREFETCH)
        return cli_usage_error("--prefetch %ld: expected 2 to %d staging buffers", a->prefetch,
                               CLT_LOADER_MAX_PREFETCH);
    if (a->lmode == CLT_LOADER_RESIDENT && (a->no_pin || a->prefetch_seen))
        return cli_usage_error("%s applies to the streaming loader, not --loader resident",
                               a->no_pin ? "--no-pin" : "--prefetch");
    if (a->save_every && !a->save) return cli_usage_error("--save-every needs --save FILE");
    if (a->augment && clt_augment_parse(a->augment, &a->aug) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    /* outputs that cannot be written are reported now, not after the whole run (under
     * mpirun by rank 0, which alone writes them, once MPI is up: open_mpi) */
    if (!a->mpi && check_outputs(a) != CLI_OK) return CLI_FAIL;

    a->dp = clt_data_default_params();
    a->dp.label_column = (int)a->label_column;
    if (strcmp(a->task, "classification") == 0) a->dp.task = CLT_TASK_CLASSIFICATION;
    else if (strcmp(a->task, "regression") == 0) a->dp.task = CLT_TASK_REGRESSION;
    else return cli_usage_error("--task %s: expected classification or regression", a->task);
    if (a->n_classes > CLT_DATA_MAX_CLASSES)
        return cli_usage_error("--classes %ld: expected at most %d", a->n_classes,
                               CLT_DATA_MAX_CLASSES);
    if (a->n_classes && a->dp.task != CLT_TASK_CLASSIFICATION)
        return cli_usage_error("--classes applies to classification, not --task %s", a->task);
    a->dp.classes = (int)a->n_classes; /* 0: inferred from the labels, every class present */
    return CLI_OK;
}

/* The optimizer, schedule, init scheme and precision from their flags. */
static int make_optim_params(struct train_args *a)
{
    clt_optim_kind kind;
    if (clt_optim_parse_kind(a->optimizer, &kind) != CLT_OK ||
        clt_init_parse(a->init_scheme, &a->init_kind) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    struct clt_optim_params *op = &a->op;
    *op = clt_optim_default_params(kind);
    if (clt_optim_parse_schedule(a->schedule, &op->schedule) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    if (cli_parse_precision(a->precision, &a->prec) != CLI_OK) return CLI_USAGE;
    if (a->lr_seen) op->lr = a->lr;
    if (a->wd_seen) op->weight_decay = a->weight_decay;
    op->momentum = a->momentum;
    op->dampening = a->dampening;
    op->nesterov = a->nesterov;
    op->beta1 = a->beta1;
    op->beta2 = a->beta2;
    op->eps = a->eps;
    op->warmup_steps = a->warmup;
    op->gamma = a->gamma;
    op->min_lr = a->min_lr;
    return CLI_OK;
}

/* Both splits of --data; a missing class gets the hint to give --classes. */
static int open_train_data(const struct train_args *a, struct train_run *r)
{
    if (clt_data_open(a->data, &a->dp, &r->train, &r->test) != CLT_OK) {
        if (!a->n_classes && strstr(clt_last_errmsg(), "never appear in the training split"))
            cli_error("%s Give the number of classes with --classes N (labels 0..N-1) to train "
                      "anyway", clt_last_errmsg());
        else fail_status(NULL);
        return CLI_FAIL;
    }
    if (a->input_shape) {
        size_t shape[3];
        if (cli_parse_shape("input-shape", a->input_shape, shape) != CLI_OK) return CLI_USAGE;
        size_t n = shape[0] * shape[1] * (shape[2] ? shape[2] : 1);
        if (n != r->train.features)
            return cli_usage_error("--input-shape %s has %zu elements but %s has %zu features",
                                   a->input_shape, n, a->data, r->train.features);
        for (clt_dataset *d = &r->train; d; d = d == &r->train ? &r->test : NULL) {
            d->sample_ndim = shape[2] ? 3 : 2;
            memcpy(d->sample_shape, shape, sizeof d->sample_shape);
        }
    }
    if (clt_augment_enabled(&a->aug) && r->train.sample_ndim != 3)
        return cli_usage_error("--augment %s: %s has flat samples (%zu features); augmentation "
                               "needs images (C, H, W), e.g. IDX data",
                               a->augment, a->data, r->train.features);
    r->classes = r->train.task == CLT_TASK_CLASSIFICATION ? r->train.classes : 1;
    r->norm = (struct clt_input_norm){.features = r->train.features,
                                      .scale = r->train.input_scale};
    return CLI_OK;
}

/* Where the run starts: the checkpoint of --resume or --init (its model, seed and input
 * scaling unless a plain state dict), else the feature statistics of --normalize. */
static int open_start(struct train_args *a, struct train_run *r)
{
    r->from = a->resume ? a->resume : a->init;
    bool plain = false; /* --init from a plain state dict: model, scaling from the flags */
    if (r->from) {
        if ((a->resume ? clt_checkpoint_open(&r->ck, r->from)
                       : clt_checkpoint_open_weights(&r->ck, r->from)) != CLT_OK) {
            fail_status(NULL);
            return CLI_FAIL;
        }
        plain = clt_checkpoint_is_plain(r->ck);
    }
    if (r->from && !plain) {
        struct clt_checkpoint_info info = clt_checkpoint_get_info(r->ck);
        if (!a->model_seen) a->model = info.model_text;
        if (a->resume && !a->seed_seen) a->seed = info.seed; /* same shuffles, dropout masks */
        r->norm = info.norm; /* the weights were trained on inputs scaled this way */
        if (r->norm.features != r->train.features) {
            cli_error("%s: saved for %zu input features, %s has %zu", r->from,
                      r->norm.features, a->data, r->train.features);
            return CLI_FAIL;
        }
    } else if (a->normalize) {
        r->mean = malloc(r->train.features * sizeof *r->mean);
        r->std = malloc(r->train.features * sizeof *r->std);
        if (!r->mean || !r->std || clt_dataset_stats(&r->train, r->mean, r->std) != CLT_OK) {
            cli_error("computing feature statistics: %s", clt_last_errmsg());
            return CLI_FAIL;
        }
        r->norm.mean = r->mean;
        r->norm.std = r->std;
    }
    return CLI_OK;
}

/* The model spec, checked against the data, and its canonical text. */
static int parse_train_spec(const struct train_args *a, struct train_run *r)
{
    if (parse_model(a->model, r->classes, &r->spec) != CLT_OK ||
        clt_spec_validate(&r->spec, (int)r->train.features, r->classes) != CLT_OK ||
        clt_spec_check_output(&r->spec) != CLT_OK ||
        clt_spec_to_string(&r->spec, &r->spec_text) != CLT_OK) {
        fail_status(NULL);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* ---- replicas: devices, the group, MPI ---------------------------------------------------- */

/* The rank mpirun gave this process, read from its environment before MPI is up (for the
 * prefix of usage errors); -1 when none says. */
static int env_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        if (end && !*end && x >= 0 && x < INT32_MAX) return (int)x;
    }
    return -1;
}

static void set_rank_prefix(int rank)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "rank %d: ", rank);
    cli_set_error_prefix(prefix);
}

/* Under mpirun: this rank's end of MPI_COMM_WORLD. Ranks other than 0 print no progress and
 * write no files (the library writes checkpoints from replica 0 only). Rank 0 checks the
 * outputs, which it alone writes. */
static int open_mpi(const struct train_args *a, struct train_run *r)
{
    if (!clt_comm_mpi_available())
        return cli_error("launched by mpirun, but this cltrain was built without MPI: install "
                         "libopenmpi-dev and rebuild (meson setup -Dmpi=enabled), or run "
                         "cltrain without mpirun");
    if (clt_comm_mpi_create(&r->mpi) != CLT_OK) return cli_error("MPI: %s", clt_last_errmsg());
    r->rank = clt_comm_rank(r->mpi);
    r->size = clt_comm_size(r->mpi);
    set_rank_prefix(r->rank);
    if (r->rank != 0) r->rep.quiet = true;
    return r->rank == 0 ? check_outputs(a) : CLI_OK;
}

/* Under mpirun: the selector (--device, $CLTRAIN_DEVICE or auto) may match several devices;
 * local rank k takes match k (match k mod count with --share-devices). */
static int pick_rank_device(const struct train_args *a, const struct train_run *r,
                            const clt_device_info *devs, int n, int *pos)
{
    const char *sel = a->device ? a->device : clt_device_default_selector();
    int *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx), count = 0;
    if (!idx) return cli_error("out of host memory");
    if (clt_device_matches(devs, n, sel, idx, &count) != CLT_OK) {
        free(idx);
        return a->device ? cli_error("--device %s: %s", a->device, clt_last_errmsg())
                         : cli_error("%s", clt_last_errmsg());
    }
    int local = clt_comm_local_rank(r->mpi);
    int rc = CLI_OK;
    if (local >= count && !a->share_devices)
        rc = cli_error("device selector \"%s\" matches %d device%s on this machine, but this is "
                       "local rank %d (%d ranks here): start at most %d rank%s per machine, or "
                       "pass --share-devices to let ranks share devices (local rank k takes match "
                       "k mod %d)", sel, count, count == 1 ? "" : "s", local,
                       clt_comm_local_size(r->mpi), count, count == 1 ? "" : "s", count);
    else
        pos[0] = idx[local % count];
    free(idx);
    return rc;
}

/* --devices: one device per selector, or every GPU for all-gpus (in listing order). A device
 * named twice gets a warning, not an error: two replicas may share one (tests do). */
static int pick_devices(const struct train_args *a, struct train_run *r,
                        const clt_device_info *devs, int n, int *pos)
{
    r->n = 0;
    if (a->ndev == 0) { /* all-gpus */
        for (int i = 0; i < n && r->n < CLT_COMM_MAX_MEMBERS; i++)
            if (devs[i].type == CLT_DEVICE_GPU) pos[r->n++] = i;
        int unused;
        if (r->n == 0 && clt_device_select(devs, n, "gpu", &unused) != CLT_OK)
            return cli_error("--devices all-gpus: %s", clt_last_errmsg());
        if (a->nshares && a->nshares != r->n)
            return cli_usage_error("--device-shares %s: %d share%s for the %d GPUs of --devices "
                                   "all-gpus; expected one per device", a->device_shares,
                                   a->nshares, a->nshares == 1 ? "" : "s", r->n);
        return CLI_OK;
    }
    for (int i = 0; i < a->ndev; i++) {
        if (clt_device_select(devs, n, a->dev_sel[i], &pos[i]) != CLT_OK)
            return cli_error("--devices %s: %s", a->devices, clt_last_errmsg());
        int before = 0; /* warned when the second one comes */
        for (int j = 0; j < i; j++) before += pos[j] == pos[i];
        if (before == 1)
            fprintf(stderr, "cltrain: warning: --devices names device %d twice: two replicas "
                            "share it\n", devs[pos[i]].index);
    }
    r->n = a->ndev;
    return CLI_OK;
}

/* The replicas' ctxs: one (--device), --devices' (with their group), or this rank's. */
static int open_devices(const struct train_args *a, struct train_run *r)
{
    clt_device_info *devs = NULL;
    int n = 0, rc = CLI_OK, pos[CLT_COMM_MAX_MEMBERS];
    if (!a->devices && !r->mpi) {
        r->n = 1;
        rc = open_ctx(a->device, a->profile, a->sync_debug, &r->ctxs[0]);
        r->ctx = r->ctxs[0];
        return rc;
    }
    if (clt_device_list(&devs, &n) != CLT_OK) return fail_status(NULL);
    r->n = 1;
    rc = r->mpi ? pick_rank_device(a, r, devs, n, pos) : pick_devices(a, r, devs, n, pos);
    for (int i = 0; rc == CLI_OK && i < r->n; i++) {
        char sel[24]; /* the device by its index: what the selector resolved to */
        snprintf(sel, sizeof sel, "%d", devs[pos[i]].index);
        rc = open_ctx(sel, a->profile, a->sync_debug, &r->ctxs[i]);
    }
    free(devs);
    r->ctx = r->ctxs[0];
    for (int i = 0; i < r->n; i++) r->shares[i] = a->nshares ? a->shares[i] : 1;
    /* one device from --devices trains alone: a group of one would only add its reductions */
    if (rc == CLI_OK && r->n > 1 &&
        clt_comm_group_create(&r->group, r->n, a->nshares ? a->shares : NULL) != CLT_OK)
        rc = cli_error("--devices %s: %s", a->devices, clt_last_errmsg());
    return rc;
}

/* Replica i's end of the communicator (NULL when training alone). */
static clt_comm *replica_comm(const struct train_run *r, int i)
{
    return r->group ? clt_comm_group_member(r->group, i) : r->mpi;
}

/* The effective batch, steps per epoch and total steps, which the schedule needs. */
static int plan_steps(struct train_args *a, struct train_run *r)
{
    if (a->accumulate > (1L << 20) || a->batch > (1L << 40) / a->accumulate) {
        cli_usage_error("--accumulate %ld with --batch-size %ld: too large", a->accumulate,
                        a->batch);
        return CLI_FAIL;
    }
    r->eff = a->batch * a->accumulate;
    long spe = a->drop_last ? (long)r->train.n / r->eff
                            : ((long)r->train.n + r->eff - 1) / r->eff;
    long total = a->epochs * spe;
    if (a->steps > 0 && a->steps < total) total = a->steps;
    a->op.step_size = a->step_size_seen ? a->step_size : (spe > 0 ? spe : 1);
    a->op.total_steps = total > 0 ? total : 1;
    return CLI_OK;
}

static int open_metrics(const struct train_args *a, struct train_run *r)
{
    /* under mpirun rank 0 writes them; the others ignore --metrics */
    if (a->metrics && r->rank == 0 && clt_outfile_append(&r->mf, a->metrics) != CLT_OK) {
        cli_error("--metrics %s", clt_last_errmsg());
        return CLI_FAIL;
    }
    r->rep.metrics = r->mf;
    r->rep.has_test = r->test.n > 0;
    return CLI_OK;
}

/* The set-up's parameters: data, model, loader and the training loop's. */
static void fill_setup_params(const struct train_args *a, struct train_run *r)
{
    struct clt_train_setup_params *sp = &r->sp;
    sp->spec = &r->spec;
    sp->in_features = r->train.features;
    sp->outputs = (size_t)r->classes;
    sp->train_set = &r->train;
    sp->test_set = r->test.n > 0 ? &r->test : NULL; /* evaluated whole, in file order */
    sp->norm = r->norm;
    sp->model.init = a->init_kind;
    sp->model.seed = a->seed;
    sp->model.precision = a->prec;
    sp->loader.mode = a->lmode;
    sp->loader.prefetch = (int)a->prefetch;
    sp->loader.pinned = !a->no_pin;
    sp->loader.augment = a->aug;
    sp->init_path = a->init;
    sp->resume_path = a->resume;
    sp->auto_batch = a->auto_batch;
    struct clt_train_params *tp = &sp->train;
    tp->epochs = (int)a->epochs;
    tp->max_steps = a->steps;
    tp->batch_size = (size_t)a->batch;
    tp->accumulate = (int)a->accumulate;
    tp->shuffle = !a->no_shuffle;
    tp->drop_last = a->drop_last;
    tp->seed = a->seed;
    tp->log_every = a->log_every;
    tp->label_smoothing = a->smoothing;
    tp->task = r->train.task;
    tp->optim = a->op;
    tp->save_path = a->dry_run ? NULL : a->save;
    tp->save_every = a->dry_run ? 0 : a->save_every;
    tp->model_text = r->spec_text;
    tp->norm = r->norm;
    tp->classes = r->classes;
    tp->data_name = a->data;
    tp->on_event = on_event;
    tp->user = &r->rep;
    tp->interrupt = &interrupt_flag;
}

/* A resumed run: a note when the checkpoint does not record its geometry, a line when the
 * micro-batch and accumulation were re-planned. */
static void note_resume_plan(const struct train_args *a, const struct train_run *r)
{
    struct clt_run_geometry was = clt_checkpoint_get_info(r->ck).run;
    size_t now_micro = clt_train_setup_batch(r->setup);
    int now_acc = clt_train_setup_accumulate(r->setup);
    if (!was.present)
        fprintf(stderr, "cltrain: note: %s does not record its run's geometry (an older "
                        "cltrain): resuming at its step with this run's batch size and data, "
                        "unchecked\n", a->resume);
    else if (was.batch_size != now_micro || was.accumulate != now_acc)
        printf("resume: re-planned as micro-batch %zu x accumulate %d (the checkpoint: %zu x "
               "%d), the same effective batch of %zu: steps keep their meaning, the sums' "
               "order and dropout masks differ\n", now_micro, now_acc, was.batch_size,
               was.accumulate, now_micro * (size_t)now_acc);
    int now_replicas = r->group ? r->n : r->mpi ? r->size : 1;
    if (was.present && was.replicas != now_replicas)
        printf("resume: the checkpoint was trained by %d replica%s, this run has %d: every step "
               "takes the same samples of the global batch, split into other slices per "
               "replica (batch statistics, dropout masks and the sums' order differ)\n",
               was.replicas, was.replicas == 1 ? "" : "s", now_replicas);
}

/* The model, optimizer, loader and evaluation buffers on the device (with --auto-batch's
 * retries). */
static int create_setup(const struct train_args *a, struct train_run *r)
{
    fill_setup_params(a, r);
    for (int i = 0; i < r->n; i++) {
        /* the set-up copies its parameters: each replica gets its own end of the comm */
        struct clt_train_setup_params sp = r->sp;
        sp.train.comm = replica_comm(r, i);
        clt_status st = clt_train_setup_create(&r->setups[i], r->ctxs[i], &sp);
        if (st != CLT_OK) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "replica %d: ", i);
            if (r->group) cli_set_error_prefix(prefix);
            fail_train(r->ctxs[i], st, &sp,
                       r->rep.backoff_batch ? r->rep.backoff_batch : (size_t)a->batch);
            if (r->group) cli_set_error_prefix(NULL);
            return CLI_FAIL;
        }
    }
    r->sp.train.comm = replica_comm(r, 0); /* reports on r->sp speak of replica 0 */
    r->setup = r->setups[0];
    if (r->rank != 0) return CLI_OK; /* rank 0's notes speak for all */
    if (r->ck) note_unverified(r->ck, r->from);
    if (r->ck && a->resume) note_resume_plan(a, r);
    return CLI_OK;
}

/* Appends to dst (of size n) at *len, truncating. */
static void append(char *dst, size_t n, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (*len < n) {
        int w = vsnprintf(dst + *len, n - *len, fmt, ap);
        if (w > 0) *len += (size_t)w;
    }
    va_end(ap);
}

/* Where the run trains: "[0] NAME (cpu)"; several replicas: "2 replicas: [0] NAME (cpu) share
 * 3, [0] NAME (cpu) share 1"; under mpirun: rank 0's device and the number of ranks. */
static void describe_devices(const struct train_run *r, char *dst, size_t n)
{
    size_t len = 0;
    dst[0] = '\0';
    if (r->group) append(dst, n, &len, "%d replicas: ", r->n);
    for (int i = 0; i < r->n; i++) {
        const clt_device_info *d = clt_ctx_device(r->ctxs[i]);
        append(dst, n, &len, "%s[%d] %s (%s)", i ? ", " : "", d->index, d->device_name,
               clt_device_type_name(d->type));
        if (r->group) append(dst, n, &len, " share %d", r->shares[i]);
    }
    if (r->mpi) append(dst, n, &len, ", rank 0 of %d (MPI)", r->size);
}

/* The auto-batch choice and the header line: device, data, model, optimizer, batch, memory. */
static void print_plan(const struct train_args *a, struct train_run *r)
{
    size_t micro = clt_train_setup_batch(r->setup);
    int acc = clt_train_setup_accumulate(r->setup);
    clt_model *m = clt_train_setup_model(r->setup);
    r->ms = clt_ctx_mem_stats(r->ctx);
    char mem[32], batch_text[512], where[CLT_COMM_MAX_MEMBERS * 192];
    size_t len = 0;
    clt_format_bytes(r->ms.current, mem, sizeof mem);
    describe_devices(r, where, sizeof where);
    if (acc > 1)
        append(batch_text, sizeof batch_text, &len, "batch %zu x %d micro-batches (effective %ld)",
               micro, acc, r->eff);
    else
        append(batch_text, sizeof batch_text, &len, "batch %zu", micro);
    int replicas = r->group ? r->n : r->size;
    if (replicas > 8) {
        append(batch_text, sizeof batch_text, &len, " split over %d replicas", replicas);
    } else if (replicas > 1 || r->mpi) { /* the global micro-batch and each replica's slice */
        append(batch_text, sizeof batch_text, &len, " split ");
        for (int i = 0; i < replicas; i++) {
            size_t b = 0, e = 0;
            clt_comm_slice(replica_comm(r, 0), i, micro, &b, &e);
            append(batch_text, sizeof batch_text, &len, "%s%zu", i ? "+" : "", e - b);
        }
    }
    if (a->auto_batch && clt_train_setup_backoffs(r->setup) > 0)
        printf("auto-batch: chose micro-batch %zu x accumulate %d (effective batch %ld) after "
               "%d out-of-memory %s\n",
               micro, acc, r->eff, clt_train_setup_backoffs(r->setup),
               clt_train_setup_backoffs(r->setup) == 1 ? "retry" : "retries");
    if (!r->rep.quiet)
        printf("cltrain: %s on %s; data %s: %zu train, %zu test, %zu features, %s%s%s; "
               "model %s (%zu parameters); %s lr %g; %s; precision %s; %s on the device%s\n",
               a->dry_run ? "dry run" : a->resume ? "resuming" : "training", where, a->data,
               r->train.n,
               r->test.n, r->train.features,
               clt_loader_describe(clt_train_setup_loader(r->setup)),
               clt_augment_enabled(&a->aug) ? ", augmented " : "",
               clt_augment_enabled(&a->aug) ? a->augment : "", r->spec_text,
               clt_tensor_numel(clt_model_params(m)), clt_optim_kind_name(a->op.kind),
               (double)a->op.lr, batch_text,
               cli_precision_name(a->prec),
               mem, r->group ? " of replica 0" : "");
    fflush(stdout);
}

/* --dry-run: the set-up's allocations, then the accountant after one real step and
 * evaluation, against the estimate. */
static int dry_run_report(struct train_run *r)
{
    size_t micro = clt_train_setup_batch(r->setup);
    int acc = clt_train_setup_accumulate(r->setup);
    struct clt_mem_estimate est;
    struct clt_mem_stats after;
    char a[32], b[32], c[32], report[4096];
    clt_status st = clt_train_mem_estimate(r->ctx, &r->sp, micro, &est);
    if (st == CLT_OK) st = clt_train_setup_probe(r->setup, &after);
    if (st != CLT_OK) {
        fail_train(r->ctx, st, &r->sp, micro);
        return CLI_FAIL;
    }
    clt_format_bytes(r->ms.current, a, sizeof a);
    clt_format_bytes(after.peak, b, sizeof b);
    clt_format_bytes(est.total, c, sizeof c);
    clt_train_mem_report(r->ctx, &r->sp, micro, report, sizeof report);
    printf("dry run: set-up allocated %s (%llu bytes); peak %s (%llu bytes) after one "
           "optimizer step (%d micro-batch%s of %zu: forward, loss, backward, update)%s; "
           "estimate %s (%llu bytes)\n%s",
           a, (unsigned long long)r->ms.current, b, (unsigned long long)after.peak, acc,
           acc > 1 ? "es" : "", micro, r->rep.has_test ? " and one evaluation" : "", c,
           (unsigned long long)est.total, report);
    return CLI_OK;
}

static void print_memory(struct train_run *r, size_t batch)
{
    char report[4096];
    clt_train_mem_report(r->ctx, &r->sp, batch, report, sizeof report);
    printf("%s", report);
}

/* The training loop with the stop signals caught, then --memory's and --profile's reports.
 * An interrupted run exits as a death by its signal would: 128 + its number. */
static int run_training(const struct train_args *a, struct train_run *r)
{
    struct sigaction old_signals[NSTOP_SIGNALS];
    bool speaker = r->rank == 0; /* --memory and --profile: replica 0's, rank 0's */
    if (a->memory && speaker) print_memory(r, clt_train_setup_batch(r->setup));
    r->rep.last = clt_ctx_stats(r->ctx); /* epoch summaries count the run's waits, not set-up's */
    catch_stop_signals(old_signals);
    /* a group: every replica reads the same interrupt flag and the library agrees on the
     * step to stop at; the failure reported is the first replica's own */
    int failed = -1;
    clt_status st = r->group ? clt_train_setup_run_group(r->setups, r->n, &failed)
                             : clt_train_setup_run(r->setup);
    restore_stop_signals(old_signals);
    end_line(&r->rep);
    clt_ctx *fctx = failed >= 0 ? r->ctxs[failed] : r->ctx;
    if (st == CLT_ERR_INTERRUPTED) {
        int sig = interrupt_flag;
        /* every rank stopped at the same step: rank 0 says so for all */
        if (r->rank == 0) cli_error("%s: %s", stop_signal_name(sig), clt_ctx_errmsg(fctx));
        return 128 + sig; /* as a shell reports a death by the signal: 130, 143, 129 */
    }
    if (st != CLT_OK) {
        char prefix[32];
        struct clt_train_setup_params sp = r->sp;
        snprintf(prefix, sizeof prefix, "replica %d: ", failed);
        if (r->group && failed >= 0) {
            cli_set_error_prefix(prefix);
            sp.train.comm = replica_comm(r, failed);
        }
        fail_train(fctx, st, &sp, clt_train_setup_batch(r->setup));
        if (r->group) cli_set_error_prefix(NULL);
        return CLI_FAIL;
    }
    /* what the replicas' gradient sums cost, from replica 0's last event */
    const struct clt_train_event *e = &r->rep.last_event;
    if ((r->group || r->mpi) && r->rep.have_event && !r->rep.quiet && e->reduce_steps > 0)
        printf("reduce: %ld steps, %.3f ms per step, %zu bytes per step per replica\n",
               e->reduce_steps, 1e3 * e->reduce_s / (double)e->reduce_steps, e->reduce_bytes);
    if (a->memory && speaker) print_memory(r, clt_train_setup_batch(r->setup));
    end_line(&r->rep);
    if (a->profile && speaker && clt_profile_print(r->ctx, stdout) != CLT_OK) {
        fail_status(r->ctx);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* Releases the run; a metrics file that could not be written fails the run, named. Returns
 * the run's exit code. */
static int train_run_close(const struct train_args *a, struct train_run *r, int rc)
{
    /* Under mpirun a failing rank (its line printed) stops them all: the others may wait for
     * it in a reduction. An interrupted run (128 + signal) stopped on every rank together. */
    if (r->mpi && rc != CLI_OK && rc < 128) clt_comm_abort(r->mpi, "see the failing rank's line");
    for (int i = 0; i < r->n; i++) clt_train_setup_free(r->setups[i]);
    for (int i = 0; i < r->n; i++) clt_ctx_free(r->ctxs[i]);
    clt_comm_group_free(r->group);
    clt_checkpoint_close(r->ck);
    clt_spec_free(&r->spec);
    clt_dataset_free(&r->train);
    clt_dataset_free(&r->test);
    free(r->spec_text);
    free(r->mean);
    free(r->std);
    if (r->mf) {
        int err = r->rep.metrics_errno;
        bool failed = r->rep.metrics_failed;
        if (fclose(r->mf) != 0 && !failed) {
            failed = true;
            err = errno;
        }
        if (failed) {
            cli_error("--metrics %s: write failed%s%s", a->metrics, err ? ": " : "",
                      err ? strerror(err) : "");
            if (rc == CLI_OK) rc = CLI_FAIL;
        }
    }
    if (r->mpi && rc != CLI_OK && rc < 128) clt_comm_abort(r->mpi, "--metrics write failed");
    clt_comm_free(r->mpi); /* finalises MPI */
    return rc;
}

int cli_train(int argc, char **argv)
{
    struct train_args a = {
        .data = "fashion-mnist", .model = "mlp", .optimizer = "adam", .schedule = "constant",
        .task = "classification", .init_scheme = "default", .loader = "auto",
        .precision = "fp32", .epochs = 10, .batch = 128, .log_every = 100, .label_column = -1,
        .prefetch = 3, .accumulate = 1, .lr = 1e-3f, .gamma = 0.1f, .beta1 = 0.9f,
        .beta2 = 0.999f, .eps = 1e-8f};
    bool help = false;
    /* under mpirun every rank parses the same flags: a usage error is printed by each, with
     * its rank, before MPI is up, and each exits with it */
    a.mpi = clt_comm_mpi_launched();
    if (a.mpi && env_rank() >= 0) set_rank_prefix(env_rank());
    int rc = parse_train_args(argc, argv, &a, &help);
    if (rc != CLI_OK || help) return rc;
    rc = check_train_args(&a);
    if (rc != CLI_OK) return rc;
    rc = make_optim_params(&a);
    if (rc != CLI_OK) return rc;

    struct train_run r = {.sp = clt_train_setup_default_params(), .size = 1,
                          .rep = {.tty = isatty(STDOUT_FILENO), .quiet = a.quiet}};
    if (a.mpi) rc = open_mpi(&a, &r);
    if (rc == CLI_OK) rc = open_train_data(&a, &r);
    if (rc == CLI_OK) rc = open_start(&a, &r);
    if (rc == CLI_OK) rc = parse_train_spec(&a, &r);
    if (rc == CLI_OK) rc = open_devices(&a, &r);
    if (rc == CLI_OK) rc = plan_steps(&a, &r);
    if (rc == CLI_OK) rc = open_metrics(&a, &r);
    if (rc == CLI_OK) rc = create_setup(&a, &r);
    if (rc == CLI_OK) {
        print_plan(&a, &r);
        rc = a.dry_run ? dry_run_report(&r) : run_training(&a, &r);
    }
    return train_run_close(&a, &r, rc);
}

/* ---- eval and predict --------------------------------------------------------------------- */

/* Opens a checkpoint and builds its model on the device; loads `split` of data with the
 * checkpoint's input scaling. */
struct loaded {
    clt_checkpoint *ck;
    clt_ctx *ctx;
    clt_model *m;
    clt_dataset train, test;
    clt_resident *data;
    clt_spec spec;
    struct clt_checkpoint_info info;
};

static void loaded_free(struct loaded *l)
{
    clt_resident_free(l->data);
    clt_model_free(l->m);
    clt_ctx_free(l->ctx);
    clt_checkpoint_close(l->ck);
    clt_spec_free(&l->spec);
    clt_dataset_free(&l->train);
    clt_dataset_free(&l->test);
}

static int load_for_inference(struct loaded *l, const char *load, const char *data,
                              const char *split, const char *device, long batch, long label_column)
{
    struct clt_data_params dp = clt_data_default_params();
    if (clt_checkpoint_open(&l->ck, load) != CLT_OK) return fail_status(NULL);
    l->info = clt_checkpoint_get_info(l->ck);
    dp.task = l->info.task;
    dp.label_column = (int)label_column;
    /* classes: the named sets declare theirs (another count than the checkpoint's is an
     * error); other data is read with the checkpoint's, so a subset that lacks some classes
     * evaluates and a label the model cannot output is an error */
    bool named = strcmp(data, "mnist") == 0 || strcmp(data, "fashion-mnist") == 0;
    if (!named && l->info.task == CLT_TASK_CLASSIFICATION) dp.classes = l->info.classes;
    if (clt_data_open(data, &dp, &l->train, &l->test) != CLT_OK) return fail_status(NULL);
    if (l->info.task == CLT_TASK_CLASSIFICATION &&
        (l->train.classes > l->info.classes || (named && l->train.classes != l->info.classes)))
        return cli_error("%s: the checkpoint's model has %d classes, %s has %d", load,
                         l->info.classes, data, l->train.classes);
    clt_dataset *d = strcmp(split, "train") == 0 ? &l->train : &l->test;
    if (strcmp(split, "train") != 0 && strcmp(split, "test") != 0)
        return cli_usage_error("--split %s: expected train or test", split);
    if (d->n == 0) return cli_error("%s: the %s split is empty", data, split);
    int outputs = l->info.task == CLT_TASK_CLASSIFICATION ? l->info.classes : 1;
    if (clt_spec_parse(l->info.model_text, outputs, &l->spec) != CLT_OK)
        return cli_error("%s: %s", load, clt_last_errmsg());
    if (d->features != l->info.norm.features)
        return cli_error("%s: the checkpoint expects %zu input features, %s has %zu", load,
                         l->info.norm.features, data, d->features);
    if (open_ctx(device, false, false, &l->ctx) != CLI_OK) return CLI_FAIL;
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = (size_t)batch;
    memcpy(mp.input_shape, l->info.input_shape, sizeof mp.input_shape); /* 0: flat */
    if (clt_model_create(&l->m, l->ctx, &l->spec, d->features, (size_t)outputs, &mp) != CLT_OK ||
        clt_checkpoint_load_model(l->ck, l->m) != CLT_OK ||
        clt_resident_create(&l->data, l->ctx, d, &l->info.norm) != CLT_OK)
        return fail_status(l->ctx);
    note_unverified(l->ck, load);
    return CLI_OK;
}

int cli_eval(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *label_text = NULL;
    long batch = 1000, label_column = -1;
    bool confusion = false;
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint to evaluate (required)", NULL},
        {"data", OPT_STR, &data, "fashion-mnist, mnist, idx:DIR or csv:TRAIN[,TEST]", NULL},
        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text, "CSV column of the label (-1 = last)", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"confusion", OPT_FLAG, &confusion, "print the confusion matrix", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (is_help(argc, argv)) {
        printf("usage: cltrain eval --load FILE [options]\n");
        cli_print_options(stdout, opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "eval");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("eval: --load FILE is required");
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    struct loaded l = {0};
    long *matrix = NULL;
    rc = load_for_inference(&l, load, data, split, device, batch, label_column);
    if (rc == CLI_OK) {
        struct clt_eval_result r;
        size_t N = (size_t)l.info.classes;
        bool classify = l.info.task == CLT_TASK_CLASSIFICATION;
        if (confusion && classify) matrix = calloc(N * N, sizeof *matrix);
        if (clt_evaluate(l.m, l.data, (size_t)batch, l.info.task, &r, matrix) != CLT_OK) {
            rc = fail_status(l.ctx);
        } else {
            if (classify)
                printf("%s split of %s: loss %.4f, accuracy %.2f%% (%zu samples)\n", split, data,
                       r.loss, 100.0 * r.accuracy, r.count);
            else
                printf("%s split of %s: mean squared error %.6g (%zu samples)\n", split, data,
                       r.loss, r.count);
            if (matrix) {
                printf("confusion matrix (rows: true class, columns: predicted)\n      ");
                for (size_t j = 0; j < N; j++) printf(" %6zu", j);
                printf("\n");
                for (size_t i = 0; i < N; i++) {
                    printf("%6zu", i);
                    for (size_t j = 0; j < N; j++) printf(" %6ld", matrix[i * N + j]);
                    printf("\n");
                }
            }
        }
    }
    free(matrix);
    loaded_free(&l);
    return rc;
}

int cli_predict(int argc, char **argv)
{
    const char *load = NULL, *data = "fashion-mnist", *device = NULL, *split = "test",
               *input = NULL, *output = NULL, *label_text = NULL;
    long batch = 1000, label_column = -1;
    const struct cli_opt opts[] = {
        {"load", OPT_STR, &load, "the checkpoint (required)", NULL},
        {"data", OPT_STR, &data, "fashion-mnist, mnist, idx:DIR or csv:TRAIN[,TEST]", NULL},
        {"input", OPT_STR, &input, "a CSV of inputs (same as --data csv:FILE,FILE --split test)",
         NULL},
        {"split", OPT_STR, &split, "test (default) or train", NULL},
        {"label-column", OPT_STR, &label_text, "CSV column of the label (-1 = last)", NULL},
        {"output", OPT_STR, &output, "write the predictions here instead of stdout", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per forward pass (1000)", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (is_help(argc, argv)) {
        printf("usage: cltrain predict --load FILE [options]\n"
               "writes CSV lines: index,predicted,p0,p1,... (regression: index,value)\n");
        cli_print_options(stdout, opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "predict");
    if (rc != CLI_OK) return rc;
    if (!load) return cli_usage_error("predict: --load FILE is required");
    if (label_text && cli_parse_long("label-column", label_text, -1, INT32_MAX, &label_column))
        return CLI_USAGE;
    char csv_spec[4200];
    if (input) {
        snprintf(csv_spec, sizeof csv_spec, "csv:%s,%s", input, input);
        data = csv_spec;
        split = "test";
    }
    /* an output that cannot be written is reported before the model runs */
    if (output && clt_outfile_check(output) != CLT_OK)
        return cli_error("--output %s", clt_last_errmsg());
    struct loaded l = {0};
    int32_t *classes = NULL;
    float *probs = NULL;
    clt_outfile *f = NULL;
    rc = load_for_inference(&l, load, data, split, device, batch, label_column);
    if (rc != CLI_OK) goto done;
    rc = CLI_FAIL;
    size_t n = clt_resident_count(l.data), N = clt_model_outputs(l.m);
    classes = malloc(n * sizeof *classes);
    probs = malloc(n * N * sizeof *probs);
    if (!classes || !probs) {
        cli_error("out of host memory");
        goto done;
    }
    if (clt_predict(l.m, l.data, (size_t)batch, l.info.task, classes, probs) != CLT_OK) {
        fail_status(l.ctx);
        goto done;
    }
    if (output && clt_outfile_open(&f, output) != CLT_OK) {
        cli_error("--output %s", clt_last_errmsg());
        goto done;
    }
    FILE *o = f ? clt_outfile_stream(f) : stdout; /* stdout's errors: checked in main() */
    bool classify = l.info.task == CLT_TASK_CLASSIFICATION;
    fprintf(o, classify ? "index,predicted" : "index,value");
    for (size_t j = 0; classify && j < N; j++) fprintf(o, ",p%zu", j);
    fprintf(o, "\n");
    for (size_t i = 0; i < n; i++) {
        if (classify) fprintf(o, "%zu,%d", i, classes[i]);
        else fprintf(o, "%zu", i);
        for (size_t j = 0; j < N; j++) fprintf(o, ",%.6g", (double)probs[i * N + j]);
        fprintf(o, "\n");
    }
    if (f) {
        clt_status st = clt_outfile_commit(f); /* checks every write; frees f */
        f = NULL;
        if (st != CLT_OK) {
            cli_error("--output %s", clt_last_errmsg());
            goto done;
        }
    }
    rc = CLI_OK;
done:
    clt_outfile_discard(f);
    free(classes);
    free(probs);
    loaded_free(&l);
    return rc;
}
