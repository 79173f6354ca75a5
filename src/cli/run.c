/* `cltrain train`: one training run from checked flags. Opens the data and the start checkpoint,
 * chooses the devices (one, several replicas in this process, or one per MPI rank), builds the
 * set-up, prints the plan, runs it (or the dry run), and reports the end. */
#include "cli/run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int cli_check_augment_data(const struct train_args *a, const clt_dataset *train)
{
    if (clt_augment_enabled(&a->aug) && train->sample_ndim != 3)
        return cli_usage_error("--augment %s: %s has flat samples (%zu features); augmentation "
                               "needs images (C, H, W), e.g. IDX data",
                               a->augment, a->data, train->features);
    return CLI_OK;
}

bool cli_is_text_data(const char *data)
{
    return strncmp(data, "text:", 5) == 0 || strcmp(data, "shakespeare") == 0;
}

const clt_spec_preset *cli_preset_of(const char *model)
{
    /* the spec parser's reading of a one-word spec: blanks around it, any case */
    while (*model == ' ' || *model == '\t' || *model == '\n') model++;
    size_t n = strcspn(model, " \t\n");
    if (model[n + strspn(model + n, " \t\n")] != '\0') return NULL;
    for (int i = 0; clt_spec_preset_get(i); i++) {
        const clt_spec_preset *p = clt_spec_preset_get(i);
        if (strlen(p->name) == n && strncasecmp(p->name, model, n) == 0) return p;
    }
    return NULL;
}

void cli_lm_defaults(const char *model, long *block, long *batch)
{
    const clt_spec_preset *p = cli_preset_of(model);
    if (block) *block = p && p->block ? p->block : 64;
    if (batch) *batch = p && p->batch ? p->batch : 12;
}

int cli_open_text(const char *data, const char *tokens, const char *from, bool plain_ok,
                  clt_text *out)
{
    struct clt_text_params tp = clt_text_default_params();
    clt_vocab *v = NULL;
    int rc = CLI_OK;
    if (tokens && clt_text_tokens_parse(tokens, &tp.tokens) != CLT_OK)
        return cli_usage_error("--tokens %s: expected char or byte", tokens);
    if (from) { /* the checkpoint's vocabulary encodes the text as its run did */
        clt_checkpoint *ck = NULL;
        clt_status st = plain_ok ? clt_checkpoint_open_weights(&ck, from)
                                 : clt_checkpoint_open(&ck, from);
        if (st != CLT_OK) return cli_fail_status(NULL);
        const char *json = clt_checkpoint_get_info(ck).vocab;
        if (json && clt_vocab_from_json(&v, json, strlen(json)) != CLT_OK)
            rc = cli_error("%s: %s", from, clt_last_errmsg());
        clt_checkpoint_close(ck);
        if (rc != CLI_OK) return rc;
        if (v && tokens && clt_vocab_kind(v) != tp.tokens)
            rc = cli_usage_error("--tokens %s: %s was trained on %s tokens", tokens, from,
                                 clt_text_tokens_name(clt_vocab_kind(v)));
        tp.vocab = v;
    }
    clt_status st = rc == CLI_OK ? clt_text_open_spec(out, data, &tp) : CLT_OK;
    if (st != CLT_OK) rc = cli_fail_data(st);
    clt_vocab_free(v);
    return rc;
}

/* A language model's text: its splits and vocabulary (the checkpoint's on --resume and
 * --init), checked against --block. */
static int open_text_data(const struct train_args *a, struct train_run *r)
{
    if (clt_augment_enabled(&a->aug))
        return cli_usage_error("--augment %s: text data has no images to augment", a->augment);
    int rc = cli_open_text(a->data, a->tokens, a->resume ? a->resume : a->init, !a->resume,
                           &r->text);
    if (rc != CLI_OK) return rc;
    r->is_text = true;
    size_t T = (size_t)a->block;
    const clt_text *t = &r->text;
    if (t->n_train < T + 1 || t->n_val < T + 1)
        return cli_usage_error("--block %ld: a window holds T + 1 = %zu tokens, but the %s split "
                               "of %s holds %zu; give a smaller --block or more text",
                               a->block, T + 1, t->n_train < T + 1 ? "training" : "validation",
                               t->n_train < T + 1 ? t->source : t->val_source,
                               t->n_train < T + 1 ? t->n_train : t->n_val);
    r->classes = (int)clt_vocab_size(t->vocab);
    /* the run's "samples" are windows of T tokens: an epoch's steps reach the split's size */
    r->train.features = T;
    r->train.n = (t->n_train + T - 1) / T;
    r->train.task = CLT_TASK_CLASSIFICATION;
    if (!a->quiet)
        printf("data: %s: %zu training and %zu validation tokens (%s), vocabulary of %d %s\n",
               a->data, t->n_train, t->n_val,
               t->val_from_file ? t->val_source : "the text's last 10 %", r->classes,
               clt_vocab_kind(t->vocab) == CLT_TEXT_BYTE ? "bytes" : "characters");
    return CLI_OK;
}

/* Both splits of --data; a missing class gets the hint to give --classes. */
static int open_train_data(const struct train_args *a, struct train_run *r)
{
    if (cli_is_text_data(a->data)) return open_text_data(a, r);
    if (a->tokens || a->block || a->eval_batches)
        return cli_usage_error("--%s applies to text data (--data text:FILE or shakespeare), "
                               "not %s", a->tokens ? "tokens" : a->block ? "block"
                               : "eval-batches", a->data);
    clt_status st = clt_data_open(a->data, &a->dp, &r->train, &r->test);
    if (st != CLT_OK) {
        if (!a->n_classes && strstr(clt_last_errmsg(), "never appear in the training split"))
            return cli_error("%s Give the number of classes with --classes N (labels 0..N-1) "
                             "to train anyway", clt_last_errmsg());
        return cli_fail_data(st);
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
    int rc = cli_check_augment_data(a, &r->train);
    if (rc != CLI_OK) return rc;
    r->classes = r->train.task == CLT_TASK_CLASSIFICATION ? r->train.classes : 1;
    if (r->train.class_names && !a->quiet && r->rank == 0) {
        char list[300];
        cli_class_list(r->train.class_names, r->train.classes, list, sizeof list);
        printf("data: %s: %zu training and %zu test images of %zu x %zu x %zu (C x H x W), %d "
               "classes (%s); %s", a->data, r->train.n, r->test.n, r->train.sample_shape[0],
               r->train.sample_shape[1], r->train.sample_shape[2], r->train.classes, list,
               r->train.cached ? "read from the decoded cache" : "decoded");
        if (r->train.skipped) printf("; %zu bad files skipped", r->train.skipped);
        printf("\n");
    }
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
            cli_fail_status(NULL);
            return CLI_FAIL;
        }
        plain = clt_checkpoint_is_plain(r->ck);
    }
    if (r->from && !plain) {
        struct clt_checkpoint_info info = clt_checkpoint_get_info(r->ck);
        if (!a->model_seen) a->model = info.model_text;
        if (a->resume && !a->seed_seen) a->seed = info.seed; /* same shuffles, dropout masks */
        r->norm = info.norm; /* the weights were trained on inputs scaled this way */
        if (r->is_text && r->norm.features != (size_t)a->block)
            return cli_usage_error("--block %ld: %s holds a model of windows of %zu tokens; give "
                                   "--block %zu or leave it out", a->block, r->from,
                                   r->norm.features, r->norm.features);
        if (r->is_text) return CLI_OK;
        if (cli_check_class_names(r->from, info.class_names, info.classes, a->data, r->train.class_names,
                                  r->train.classes) != CLI_OK)
            return CLI_FAIL;
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

/* The model spec, checked against the data, and its canonical text. A spec that does not
 * parse or does not fit the data is a usage error. */
static int parse_train_spec(const struct train_args *a, struct train_run *r)
{
    int rc = cli_parse_model("--model", a->model, r->classes, &r->spec);
    if (rc != CLI_OK) return rc;
    if (r->is_text && !clt_spec_takes_tokens(&r->spec))
        return cli_usage_error("--data %s is text, which trains a language model: the model must "
                               "start with an embed layer (e.g. \"embed 128, posembed, "
                               "layernorm, linear V nobias tied\"), not \"%s\"",
                               a->data, a->model);
    if (!r->is_text && clt_spec_takes_tokens(&r->spec))
        return cli_usage_error("--model starts with an embed layer, which reads token ids: it "
                               "trains on text (--data text:FILE or shakespeare), not on %s",
                               a->data);
    if (clt_spec_validate(&r->spec, (int)r->train.features, r->classes) != CLT_OK ||
        clt_spec_check_output(&r->spec) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    char why[400];
    uint64_t P = 0; /* a text's model planned now: a tied head without its embedding */
    if (r->is_text && clt_model_param_elements(&r->spec, r->train.features, (size_t)r->classes,
                                               NULL, &P) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());
    if (!r->is_text && r->train.sample_shape[1] &&
        !cli_spec_one_row(&r->spec, r->train.features, r->classes, r->train.sample_shape, why,
                          sizeof why))
        return cli_usage_error("--model: %s", why);
    if (clt_spec_to_string(&r->spec, &r->spec_text) != CLT_OK) return cli_fail_status(NULL);
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
    if (r->rank != 0) r->rep.quiet = r->rep.silent = true;
    /* mpirun hands its ranks a pseudo-terminal even when its own output goes to a file: no
     * progress line rewritten in place under it */
    r->rep.tty = false;
    return r->rank == 0 ? cli_check_outputs(a) : CLI_OK;
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
        rc = cli_open_ctx(a->device, a->profile, a->sync_debug, &r->ctxs[0]);
        r->ctx = r->ctxs[0];
        return rc;
    }
    if (clt_device_list(&devs, &n) != CLT_OK) return cli_fail_status(NULL);
    r->n = 1;
    rc = r->mpi ? pick_rank_device(a, r, devs, n, pos) : pick_devices(a, r, devs, n, pos);
    for (int i = 0; rc == CLI_OK && i < r->n; i++) {
        char sel[24]; /* the device by its index: what the selector resolved to */
        snprintf(sel, sizeof sel, "%d", devs[pos[i]].index);
        rc = cli_open_ctx(sel, a->profile, a->sync_debug, &r->ctxs[i]);
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

int cli_plan_total(const struct train_args *a, size_t n, long *eff, long *spe, long *total)
{
    if (a->accumulate > (1L << 20) || a->batch > (1L << 40) / a->accumulate)
        return cli_usage_error("--accumulate %ld with --batch-size %ld: too large",
                               a->accumulate, a->batch);
    *eff = a->batch * a->accumulate;
    *spe = a->drop_last ? (long)n / *eff : ((long)n + *eff - 1) / *eff;
    *total = a->epochs * *spe;
    if (a->steps > 0 && a->steps < *total) *total = a->steps;
    return CLI_OK;
}

/* The effective batch, steps per epoch and total steps, which the schedule needs. */
static int plan_steps(struct train_args *a, struct train_run *r)
{
    long spe = 0, total = 0;
    if (r->is_text) { /* --steps is the run's length; its epochs are what they come to */
        if (a->steps <= 0)
            return cli_usage_error("--data %s: a text run's length is --steps N (optimizer "
                                   "steps)", a->data);
        long per = a->batch * a->accumulate;
        long epoch = ((long)r->train.n + per - 1) / per;
        a->epochs = (a->steps + epoch - 1) / epoch;
        if (!a->quiet && r->rank == 0)
            printf("text: a step takes %ld x %ld = %ld tokens; an epoch (the training split's "
                   "%zu tokens) is %ld steps, so --steps %ld is %.2f epochs\n",
                   per, a->block, per * a->block, r->text.n_train, epoch, a->steps,
                   (double)a->steps / (double)epoch);
    }
    if (cli_plan_total(a, r->train.n, &r->eff, &spe, &total) != CLI_OK) return CLI_FAIL;
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
    r->rep.has_test = r->test.n > 0 || r->is_text;
    r->rep.text = r->is_text;
    r->rep.bytes = r->is_text && clt_vocab_kind(r->text.vocab) == CLT_TEXT_BYTE;
    r->rep.clipping = a->op.clip_grad > 0;
    cli_write_recipe_changes(r, r->mf); /* --change-recipe: the run's record says so */
    /* --plot: drawn from the lines --metrics holds, named as that file (or as the command
     * when there is none), so that `cltrain plot` of the file draws the same figure */
    if (a->plot && r->rank == 0 && !a->dry_run) {
        r->plot.name = a->metrics ? a->metrics : "cltrain train";
        r->rep.plot = &r->plot;
        r->rep.plot_path = a->plot;
    }
    return CLI_OK;
}

/* The set-up's parameters: data, model, loader and the training loop's. */
static void fill_setup_params(const struct train_args *a, struct train_run *r)
{
    struct clt_train_setup_params *sp = &r->sp;
    sp->spec = &r->spec;
    sp->in_features = r->train.features;
    sp->outputs = (size_t)r->classes;
    sp->train_set = r->is_text ? NULL : &r->train;
    sp->test_set = r->test.n > 0 ? &r->test : NULL; /* evaluated whole, in file order */
    sp->text = r->is_text ? &r->text : NULL;
    sp->eval_batches = (size_t)a->eval_batches;
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
    tp->eval_start = r->is_text; /* a language model's loss before training, as nanoGPT's */
    tp->label_smoothing = a->smoothing;
    tp->optim = a->op;
    tp->save_path = a->dry_run ? NULL : a->save;
    tp->save_every = a->dry_run ? 0 : a->save_every;
    tp->class_names = (const char *const *)r->train.class_names;
    tp->data_name = a->data;
    tp->on_event = cli_on_event;
    tp->user = &r->rep;
    tp->interrupt = cli_stop_flag();
}

/* A resumed run: a note when the checkpoint does not record its recipe or its geometry, a line
 * when the micro-batch and accumulation were re-planned. */
static void note_resume_plan(const struct train_args *a, const struct train_run *r)
{
    struct clt_run_geometry was = clt_checkpoint_get_info(r->ck).run;
    size_t now_micro = clt_train_setup_batch(r->setup);
    int now_acc = clt_train_setup_accumulate(r->setup);
    if (!clt_checkpoint_get_info(r->ck).recipe.present)
        fprintf(stderr, "cltrain: note: %s does not record its run's recipe (an older "
                        "cltrain): resuming with the options given and the defaults, "
                        "unchecked\n", a->resume);
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

/* A failure every rank reached the same way (the runs' check, the plan's): rank 0 prints it
 * for all, and no rank aborts the others, which stop by themselves. */
static int fail_together(struct train_run *r, int rc)
{
    if (r->rank == 0) cli_error("%s", clt_last_errmsg());
    r->together = true;
    return rc;
}

/* Before anything is allocated: under mpirun, that every rank runs the same thing (one
 * exchange of a small record, before any collective whose sizes depend on the run); then the
 * plan's batches and augmentation, which every rank checks alike. */
static int check_run(struct train_run *r)
{
    r->sp.train.comm = replica_comm(r, 0);
    if (r->mpi) {
        clt_status st = clt_train_setup_agree(&r->sp);
        if (st == CLT_ERR_INVALID_ARG) return fail_together(r, CLI_USAGE);
        if (st != CLT_OK) return cli_error("%s", clt_last_errmsg());
    }
    if (clt_train_plan_check(&r->sp) != CLT_OK) {
        if (r->mpi) return fail_together(r, CLI_USAGE);
        return cli_usage_error("%s", clt_last_errmsg());
    }
    return CLI_OK;
}

/* The model, optimizer, loader and evaluation buffers on the device (with --auto-batch's
 * retries). */
static int create_setup(const struct train_args *a, struct train_run *r)
{
    for (int i = 0; i < r->n; i++) {
        /* the set-up copies its parameters: each replica gets its own end of the comm */
        struct clt_train_setup_params sp = r->sp;
        sp.train.comm = replica_comm(r, i);
        clt_status st = clt_train_setup_create(&r->setups[i], r->ctxs[i], &sp);
        if (st != CLT_OK) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "replica %d: ", i);
            if (r->group) cli_set_error_prefix(prefix);
            cli_fail_train(r->ctxs[i], st, &sp,
                       r->rep.backoff_batch ? r->rep.backoff_batch : (size_t)a->batch);
            if (r->group) cli_set_error_prefix(NULL);
            return CLI_FAIL;
        }
    }
    r->sp.train.comm = replica_comm(r, 0); /* reports on r->sp speak of replica 0 */
    r->setup = r->setups[0];
    if (r->rank != 0) return CLI_OK; /* rank 0's notes speak for all */
    if (r->ck) cli_note_unverified(r->ck, r->from);
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

/* A batch larger than the data trains, on the whole split per step: legal but most often a
 * slip (a digit too many, or the wrong data set), so it is said once, when the run is set up
 * (drop_last refuses it instead). */
static void warn_batch(const struct train_args *a, const struct train_run *r)
{
    if (r->is_text || r->eff <= (long)r->train.n || r->rank != 0 || a->drop_last) return;
    char what[96];
    if (a->accumulate > 1)
        snprintf(what, sizeof what, "--batch-size %ld x --accumulate %ld (%ld)", a->batch,
                 a->accumulate, r->eff);
    else snprintf(what, sizeof what, "--batch-size %ld", a->batch);
    fprintf(stderr, "cltrain: warning: %s is larger than the training split of %s (%zu "
                    "samples): every step takes the whole split\n", what, a->data, r->train.n);
}

/* The optimizer and its schedule as the run takes them: "adamw lr 0.01, cosine to 0.001 over 14
 * steps, warm-up 2 steps, weight decay 0.1, label smoothing 0.1, betas 0.9,0.95, gradient norm
 * clipped to 1" (what is not at its default). */
static void describe_optim(const struct train_args *a, char *dst, size_t n)
{
    const struct clt_optim_params *op = &a->op;
    size_t len = 0;
    append(dst, n, &len, "%s lr %g", clt_optim_kind_name(op->kind), (double)op->lr);
    if (op->kind == CLT_OPTIM_SGD && op->momentum > 0)
        append(dst, n, &len, ", %smomentum %g", op->nesterov ? "Nesterov " : "",
               (double)op->momentum);
    if (op->schedule == CLT_SCHED_STEP)
        append(dst, n, &len, ", step schedule x%g every %ld steps", (double)op->gamma,
               op->step_size);
    if (op->schedule == CLT_SCHED_COSINE)
        append(dst, n, &len, ", cosine to %g over %ld steps", (double)op->min_lr,
               op->total_steps);
    if (op->warmup_steps > 0) append(dst, n, &len, ", warm-up %ld steps", op->warmup_steps);
    if (op->weight_decay > 0)
        append(dst, n, &len, ", weight decay %g", (double)op->weight_decay);
    if (a->smoothing > 0) append(dst, n, &len, ", label smoothing %g", (double)a->smoothing);
    if (a->no_shuffle) append(dst, n, &len, ", no shuffle");
    if (op->kind != CLT_OPTIM_SGD && (op->beta1 != 0.9f || op->beta2 != 0.999f))
        append(dst, n, &len, ", betas %g,%g", (double)op->beta1, (double)op->beta2);
    if (op->clip_grad > 0)
        append(dst, n, &len, ", gradient norm clipped to %g", (double)op->clip_grad);
}

/* The auto-batch choice and the header line: device, data, model, optimizer, batch, memory. */
static void print_plan(const struct train_args *a, struct train_run *r)
{
    size_t micro = clt_train_setup_batch(r->setup);
    int acc = clt_train_setup_accumulate(r->setup);
    clt_model *m = clt_train_setup_model(r->setup);
    r->ms = clt_ctx_mem_stats(r->ctx);
    char mem[32], batch_text[512], where[CLT_COMM_MAX_MEMBERS * 192], optim[512],
        changed[2048];
    size_t len = 0;
    describe_optim(a, optim, sizeof optim);
    cli_describe_recipe_changes(r, changed, sizeof changed);
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
    if (!r->rep.quiet && r->is_text)
        printf("cltrain: %s on %s; data %s: windows of %zu tokens, %s tokens, %d-token "
               "vocabulary, on the device; model %s (%zu parameters); %s; %s; precision %s; %s "
               "on the device%s\n",
               a->dry_run ? "dry run" : a->resume ? "resuming" : "training", where, a->data,
               r->train.features, clt_text_tokens_name(clt_vocab_kind(r->text.vocab)),
               r->classes, r->spec_text, clt_tensor_numel(clt_model_params(m)), optim,
               batch_text, cli_precision_name(a->prec), mem, changed);
    else if (!r->rep.quiet)
        printf("cltrain: %s on %s; data %s: %zu train, %zu test, %zu features, %s%s%s; "
               "model %s (%zu parameters); %s; %s; precision %s; %s on the device%s%s\n",
               a->dry_run ? "dry run" : a->resume ? "resuming" : "training", where, a->data,
               r->train.n,
               r->test.n, r->train.features,
               clt_loader_describe(clt_train_setup_loader(r->setup)),
               clt_augment_enabled(&a->aug) ? ", augmented " : "",
               clt_augment_enabled(&a->aug) ? a->augment : "", r->spec_text,
               clt_tensor_numel(clt_model_params(m)), optim, batch_text,
               cli_precision_name(a->prec), mem, r->group ? " of replica 0" : "", changed);
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
        cli_fail_train(r->ctx, st, &r->sp, micro);
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

/* The signal that stopped the run. Under mpirun the ranks stop together at the step where any
 * of them saw one (the trainer's reductions carry a stop flag), but a rank may have seen none
 * itself (a signal sent to one rank, or to a node's ranks): one more reduction, made by every
 * rank as each returns here, gives all the largest signal number seen. */
static int agreed_stop_signal(const struct train_run *r)
{
    int sig = *cli_stop_flag();
    if (!r->mpi) return sig;
    double v = sig;
    if (clt_comm_allreduce_f64(r->mpi, &v, 1, CLT_REDUCE_MAX) == CLT_OK && v > 0 && v < 128)
        sig = (int)v;
    return sig;
}

/* The training loop with the stop signals caught, then --memory's and --profile's reports.
 * An interrupted run exits as a death by its signal would: 128 + its number. */
static int run_training(const struct train_args *a, struct train_run *r)
{
    bool speaker = r->rank == 0; /* --memory and --profile: replica 0's, rank 0's */
    if (a->memory && speaker) print_memory(r, clt_train_setup_batch(r->setup));
    r->rep.last = clt_ctx_stats(r->ctx); /* epoch summaries count the run's waits, not set-up's */
    r->rep.builds = r->rep.last.compiles + r->rep.last.disk_cache_hits;
    r->trained = true;
    cli_catch_stop_signals(r->mpi != NULL);
    /* a group: every replica reads the same interrupt flag and the library agrees on the
     * step to stop at; the failure reported is the first replica's own */
    int failed = -1;
    clt_status st = r->group ? clt_train_setup_run_group(r->setups, r->n, &failed)
                             : clt_train_setup_run(r->setup);
    /* under mpirun the ranks still meet (the stop signal's agreement, a failure's abort): a
     * second signal must not kill one of them before; mpirun's SIGKILL is the hard end */
    if (!r->mpi) cli_restore_stop_signals();
    cli_end_line(&r->rep);
    clt_ctx *fctx = failed >= 0 ? r->ctxs[failed] : r->ctx;
    if (st == CLT_ERR_INTERRUPTED) {
        int sig = agreed_stop_signal(r);
        /* every rank stopped at the same step: rank 0 says so for all */
        if (r->rank == 0) cli_error("%s: %s", cli_stop_signal_name(sig), clt_ctx_errmsg(fctx));
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
        cli_fail_train(fctx, st, &sp, clt_train_setup_batch(r->setup));
        if (r->group) cli_set_error_prefix(NULL);
        return CLI_FAIL;
    }
    /* what the replicas' gradient sums cost, from replica 0's last event */
    const struct clt_train_event *e = &r->rep.last_event;
    if ((r->group || r->mpi) && r->rep.have_event && !r->rep.quiet && e->reduce_steps > 0)
        printf("reduce: %ld steps, %.3f ms per step, %zu bytes per step per replica\n",
               e->reduce_steps, 1e3 * e->reduce_s / (double)e->reduce_steps, e->reduce_bytes);
    if (a->memory && speaker) print_memory(r, clt_train_setup_batch(r->setup));
    cli_end_line(&r->rep);
    if (a->profile && speaker && clt_profile_print(r->ctx, stdout) != CLT_OK) {
        cli_fail_status(r->ctx);
        return CLI_FAIL;
    }
    return CLI_OK;
}

/* --plot's last rewrite, once the loop has ended (also when it stopped on a signal or failed:
 * the curves so far); a figure that could not be written fails the run, named. */
static int finish_plot(const struct train_args *a, struct train_run *r, int rc)
{
    bool failed = false;
    if (r->rep.plot_oom) {
        cli_error("--plot %s: out of memory for the curves' points", a->plot);
        failed = true;
    } else {
        struct plot_options o = {0};
        if (plot_svg_save(a->plot, &r->plot, 1, &o) != 0) {
            cli_error("--plot %s", clt_last_errmsg());
            failed = true;
        }
    }
    return failed && rc == CLI_OK ? CLI_FAIL : rc;
}

/* Releases the run; a metrics file that could not be written fails the run, named. Returns
 * the run's exit code. */
static int train_run_close(const struct train_args *a, struct train_run *r, int rc)
{
    /* Under mpirun a failing rank (its line printed) stops them all: the others may wait for
     * it in a reduction. An interrupted run (128 + signal) stopped on every rank together. */
    if (r->mpi && rc != CLI_OK && rc < 128 && !r->together)
        clt_comm_abort(r->mpi, "see the failing rank's line");
    for (int i = 0; i < r->n; i++) clt_train_setup_free(r->setups[i]);
    for (int i = 0; i < r->n; i++) clt_ctx_free(r->ctxs[i]);
    clt_comm_group_free(r->group);
    clt_checkpoint_close(r->ck);
    clt_spec_free(&r->spec);
    clt_dataset_free(&r->train);
    clt_dataset_free(&r->test);
    clt_text_free(&r->text);
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
    if (r->trained && r->rep.plot) rc = finish_plot(a, r, rc);
    plot_run_free(&r->plot);
    if (r->mpi && rc != CLI_OK && rc < 128 && !r->together)
        clt_comm_abort(r->mpi, "an output's write failed");
    clt_comm_free(r->mpi); /* finalises MPI */
    return rc;
}

/* A text run's default window: the --resume or --init checkpoint's (its model's input, T)
 * when it has one, else `fallback`. A file that does not open is left to open_start, which
 * says why. */
static long start_block(const struct train_args *a, long fallback)
{
    const char *from = a->resume ? a->resume : a->init;
    clt_checkpoint *ck = NULL;
    if (!from || (a->resume ? clt_checkpoint_open(&ck, from)
                            : clt_checkpoint_open_weights(&ck, from)) != CLT_OK)
        return fallback;
    long T = fallback;
    if (!clt_checkpoint_is_plain(ck) && clt_checkpoint_get_info(ck).norm.features > 0)
        T = (long)clt_checkpoint_get_info(ck).norm.features;
    clt_checkpoint_close(ck);
    return T;
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
    int rc = cli_parse_train_args(argc, argv, &a, &help);
    if (rc != CLI_OK || help) return rc;
    if (cli_is_text_data(a.data)) { /* the preset's window and batch, else nanoGPT's CPU ones */
        long block, batch;
        cli_lm_defaults(a.model, &block, &batch);
        if (!a.block) a.block = start_block(&a, block);
        if (!a.given.batch) a.batch = batch;
    }
    rc = cli_check_train_args(&a);
    if (rc != CLI_OK) return rc;
    rc = cli_make_optim_params(&a);
    if (rc != CLI_OK) return rc;
    /* a language model starts from GPT-2's weights (as nanoGPT and tools/torch_gpt.py) */
    if (cli_is_text_data(a.data) && strcasecmp(a.init_scheme, "default") == 0)
        a.init_kind = CLT_INIT_GPT2;

    struct train_run r = {.sp = clt_train_setup_default_params(), .size = 1,
                          .rep = {.tty = isatty(STDOUT_FILENO), .quiet = a.quiet}};
    if (a.mpi) rc = open_mpi(&a, &r);
    if (rc == CLI_OK) rc = open_train_data(&a, &r);
    if (rc == CLI_OK) rc = open_start(&a, &r);
    if (rc == CLI_OK) rc = parse_train_spec(&a, &r);
    if (rc == CLI_OK && a.resume) rc = cli_resume_recipe(&a, &r);
    if (rc == CLI_OK) rc = open_devices(&a, &r);
    if (rc == CLI_OK) rc = plan_steps(&a, &r);
    if (rc == CLI_OK) rc = open_metrics(&a, &r);
    if (rc == CLI_OK) {
        fill_setup_params(&a, &r);
        rc = check_run(&r);
    }
    if (rc == CLI_OK) rc = create_setup(&a, &r);
    if (rc == CLI_OK) {
        warn_batch(&a, &r);
        print_plan(&a, &r);
        rc = a.dry_run ? dry_run_report(&r) : run_training(&a, &r);
    }
    return train_run_close(&a, &r, rc);
}
