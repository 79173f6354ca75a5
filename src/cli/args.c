/* The flags of `cltrain train`: the option table, parsing, and the checks and derived values
 * (devices and replicas, optimizer parameters, precision, data options) made before anything
 * is opened. */
#include "cli/run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The table of flags and cli_parse; *help when --help printed it (nothing else to do). */
int cli_parse_train_args(int argc, char **argv, struct train_args *a, bool *help)
{
    const struct cli_opt opts[] = {
        {"data", OPT_STR, &a->data,
         "fashion-mnist, mnist, idx:DIR, csv:TRAIN[,TEST], images:DIR (class folders of PNG "
         "or JPEG files: DIR/train/CLASS/, DIR/test/CLASS/, or DIR/CLASS/ with --val-split), "
         "or a language model's text: text:FILE[,VAL_FILE] or shakespeare",
         NULL},
        {"channels", OPT_POS_INT, &a->img.channels,
         "images: 1 (grey) or 3 (RGB), every image converted (default: the first image's; "
         "another count is then a bad file)", &a->img.channels_seen},
        {"image-size", OPT_STR, &a->img.size,
         "images: H,W, every image resized bilinearly (default: the first image's size; "
         "another size is then a bad file)", NULL},
        {"val-split", OPT_UNIT_FLOAT, &a->img.val_split,
         "images:DIR/CLASS/: the fraction of each class held out as the test split, drawn by "
         "--seed (0)", &a->img.val_seen},
        {"skip-bad-images", OPT_FLAG, &a->img.skip_bad,
         "images: skip unreadable or mismatched files, counted, instead of failing", NULL},
        {"tokens", OPT_STR, &a->tokens,
         "text: char (the sorted characters of the training text) or byte (256 ids) (char)",
         NULL},
        {"block", OPT_POS_INT, &a->block, "text: T, the tokens a window holds, the model's "
         "context (64; gpt-char's 256)", NULL},
        {"eval-batches", OPT_POS_INT, &a->eval_batches,
         "text: the fixed validation batches each evaluation averages over (20)", NULL},
        {"label-column", OPT_STR, &a->label_text, "CSV column of the label (0-based, -1 = last)",
         &a->label_seen},
        {"task", OPT_STR, &a->task, "classification or regression (CSV)", NULL},
        {"classes", OPT_POS_INT, &a->n_classes,
         "classification: the number of classes N, labels 0..N-1 (default: the largest label "
         "+ 1, every class present; give it for 1-based labels or classes absent from the data)",
         NULL},
        {"model", OPT_STR, &a->model, cli_model_help("mlp"), &a->model_seen},
        {"init-scheme", OPT_STR, &a->init_scheme,
         "default (PyTorch's modules'; on text gpt2), pytorch, kaiming, xavier or gpt2 "
         "(normal(0, 0.02) weights)", NULL},
        {"epochs", OPT_POS_INT, &a->epochs, "passes over the training split (10)",
         &a->given.epochs},
        {"steps", OPT_POS_INT, &a->steps, "stop after this many optimizer steps",
         &a->given.steps},
        {"batch-size", OPT_POS_INT, &a->batch, "samples per forward pass, the micro-batch (128; on text, windows: the preset's, "
         "gpt-char 64, else 12)",
         &a->given.batch},
        {"accumulate", OPT_POS_INT, &a->accumulate,
         "micro-batches per optimizer step, gradients summed (1)", &a->given.accumulate},
        {"auto-batch", OPT_FLAG, &a->auto_batch,
         "out of memory: halve the micro-batch, double --accumulate, retry", NULL},
        {"precision", OPT_STR, &a->precision,
         "fp32, bf16 or fp16 (loss-scaled): storage of activations and weights used (fp32)",
         &a->given.precision},
        {"optimizer", OPT_STR, &a->optimizer, "sgd, adam or adamw (adam)", &a->given.optimizer},
        {"lr", OPT_POS_FLOAT, &a->lr, "learning rate (1e-3)", &a->lr_seen},
        {"momentum", OPT_NONNEG_FLOAT, &a->momentum, "SGD momentum (0)", &a->given.momentum},
        {"dampening", OPT_NONNEG_FLOAT, &a->dampening, "SGD dampening (0)",
         &a->given.dampening},
        {"nesterov", OPT_FLAG, &a->nesterov, "SGD with Nesterov momentum", NULL},
        {"beta1", OPT_UNIT_FLOAT, &a->beta1, "Adam beta1 (0.9)", &a->given.beta1},
        {"beta2", OPT_UNIT_FLOAT, &a->beta2, "Adam beta2 (0.999)", &a->given.beta2},
        {"betas", OPT_STR, &a->betas,
         "Adam and AdamW: B1,B2 together, each in [0, 1) (0.9,0.999; GPT-2 and nanoGPT: "
         "0.9,0.95 or 0.9,0.99)", &a->given.betas},
        {"eps", OPT_POS_FLOAT, &a->eps, "Adam epsilon (1e-8)", &a->given.eps},
        {"weight-decay", OPT_NONNEG_FLOAT, &a->weight_decay,
         "L2 (SGD, Adam) or decoupled (AdamW), on weight matrices only: never on biases or "
         "normalisation parameters", &a->wd_seen},
        {"clip-grad", OPT_NONNEG_FLOAT, &a->clip_grad,
         "clip the gradients' global L2 norm to NORM before each step, on the device (0: "
         "off, the default); the norm is reported at log points", &a->given.clip_grad},
        {"schedule", OPT_STR, &a->schedule, "constant, step or cosine (constant)",
         &a->given.schedule},
        {"warmup", OPT_NONNEG_INT, &a->warmup, "linear warm-up steps (0)", &a->given.warmup},
        {"step-size", OPT_POS_INT, &a->step_size,
         "step schedule: steps between decays (1 epoch)", &a->step_size_seen},
        {"gamma", OPT_POS_FLOAT, &a->gamma, "step schedule: decay factor (0.1)",
         &a->given.gamma},
        {"min-lr", OPT_NONNEG_FLOAT, &a->min_lr, "cosine schedule: final learning rate (0)",
         &a->given.min_lr},
        {"label-smoothing", OPT_UNIT_FLOAT, &a->smoothing, "cross-entropy label smoothing (0)",
         &a->given.smoothing},
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
        {"plot", OPT_STR, &a->plot,
         "write the training curves as SVG (cltrain plot's figure of the --metrics lines), "
         "rewritten whole at each evaluation, at log points at most once a second, and at the "
         "end",
         NULL},
        {"save", OPT_STR, &a->save, "write a checkpoint (safetensors) at the end", NULL},
        {"save-every", OPT_POS_INT, &a->save_every, "also every N steps", NULL},
        {"resume", OPT_STR, &a->resume,
         "continue a run from its checkpoint, with its recipe (optimizer, lr, schedule, "
         "precision, batch, ...) unless given; a value given differently is refused",
         NULL},
        {"change-recipe", OPT_FLAG, &a->change_recipe,
         "--resume: train on with the recipe values given where they differ from the "
         "checkpoint's (recorded in the header and --metrics)",
         NULL},
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
        {"quiet", OPT_FLAG, &a->quiet, "print only the final result (the last epoch's summary)",
         NULL},
        {"memory", OPT_FLAG, &a->memory,
         "print the device memory report before and after training", NULL},
        {"dry-run", OPT_FLAG, &a->dry_run,
         "build everything, take one step, report the memory it needs, do not train", NULL},
        {"profile", OPT_FLAG, &a->profile,
         "time every kernel and copy with events; print a table", NULL},
        {"sync-debug", OPT_FLAG, &a->sync_debug,
         "wait after every kernel and check it (slow; to find a failing kernel)", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    *help = cli_is_help(argc, argv);
    if (*help) {
        const char *usage =
            "cltrain train [options]\n"
            "input: --data, a training split and a test split; every sample has a label\n"
            "  (IDX: the labels files; CSV: the column --label-column, a class 0..N-1 or,\n"
            "  --task regression, a number)";
        cli_print_help("train", usage, opts);
        return CLI_OK;
    }
    return cli_parse(argc, argv, opts, "train");
}

int cli_check_outputs(const struct train_args *a)
{
    if (a->save && clt_outfile_check(a->save) != CLT_OK)
        return cli_error("--save %s", clt_last_errmsg());
    if (a->metrics && clt_outfile_check(a->metrics) != CLT_OK)
        return cli_error("--metrics %s", clt_last_errmsg());
    if (a->plot && clt_outfile_check(a->plot) != CLT_OK)
        return cli_error("--plot %s", clt_last_errmsg());
    /* held until the process ends: a second run writing either path fails now */
    if (a->save && cli_lock_output("--save", a->save) != CLI_OK) return CLI_FAIL;
    if (a->metrics && cli_lock_output("--metrics", a->metrics) != CLI_OK) return CLI_FAIL;
    if (a->plot && cli_lock_output("--plot", a->plot) != CLI_OK) return CLI_FAIL;
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
int cli_check_train_args(struct train_args *a)
{
    int rc = check_device_args(a);
    if (rc != CLI_OK) return rc;
    if (a->label_seen &&
        cli_parse_long("label-column", a->label_text, -1, INT32_MAX, &a->label_column))
        return CLI_USAGE;
    if (a->resume && a->init) return cli_usage_error("--resume and --init exclude each other");
    if (a->change_recipe && !a->resume)
        return cli_usage_error("--change-recipe applies to --resume (a run that continues a "
                               "checkpoint's recipe)");
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
    /* an output may not replace an input or share a file with another output (--save may
     * replace --resume's checkpoint: the run continued in place) */
    struct cli_paths ps = {0};
    cli_paths_add_data(&ps, "--data", a->data);
    cli_paths_add(&ps, "--resume", a->resume, false, "--save");
    cli_paths_add(&ps, "--init", a->init, false, NULL);
    if (a->model_seen && access(a->model, R_OK) == 0) /* a file, as cli_parse_model reads it */
        cli_paths_add(&ps, "--model", a->model, false, NULL);
    cli_paths_add(&ps, "--save", a->save, true, NULL);
    cli_paths_add(&ps, "--metrics", a->metrics, true, NULL);
    cli_paths_add(&ps, "--plot", a->plot, true, NULL);
    rc = cli_paths_check(&ps);
    if (rc != CLI_OK) return rc;
    /* outputs that cannot be written are reported now, not after the whole run (under
     * mpirun by rank 0, which alone writes them, once MPI is up: open_mpi) */
    if (!a->mpi && cli_check_outputs(a) != CLI_OK) return CLI_FAIL;

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
    a->dp.split_seed = a->seed;         /* the hold-out of --val-split */
    return cli_apply_image_opts(&a->img, a->data, &a->dp);
}

/* --betas B1,B2 into a->beta1, a->beta2: two numbers, each in [0, 1). */
static int parse_betas(struct train_args *a)
{
    if (a->given.beta1 || a->given.beta2)
        return cli_usage_error("--betas and --%s exclude each other (--betas gives both)",
                               a->given.beta1 ? "beta1" : "beta2");
    const char *v = a->betas, *comma = strchr(v, ',');
    char *end1 = NULL, *end2 = NULL;
    errno = 0;
    float b1 = comma ? strtof(v, &end1) : NAN, b2 = comma ? strtof(comma + 1, &end2) : NAN;
    bool ok = comma && !errno && end1 == comma && end1 != v && end2 && end2 != comma + 1 &&
              !*end2 && b1 >= 0.0f && b1 < 1.0f && b2 >= 0.0f && b2 < 1.0f;
    if (!ok)
        return cli_usage_error("--betas %s: expected B1,B2, two numbers each in [0, 1) (e.g. "
                               "0.9,0.99)", v);
    a->beta1 = b1;
    a->beta2 = b2;
    return CLI_OK;
}

/* The optimizer, schedule, init scheme and precision from their flags. */
int cli_make_optim_params(struct train_args *a)
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
    if (a->given.betas && parse_betas(a) != CLI_OK) return CLI_USAGE;
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
    op->clip_grad = a->clip_grad;
    return CLI_OK;
}
