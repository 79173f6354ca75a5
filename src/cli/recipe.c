/* --resume and the run's recipe: the model given against the checkpoint's, and every recipe
 * value (optimizer and its parameters, learning rate and schedule, run length under a cosine
 * schedule, precision, batch, label smoothing, shuffling, normalisation, augmentation) taken
 * from the checkpoint when its flag is not given and compared when it is: a difference is
 * refused, every one named, unless --change-recipe, which records them for the header line and
 * --metrics. */
#include "cli/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest "%g" text that reads back as the same float (0.01, not 0.00999999978). */
static void float_text(float v, char *dst, size_t n)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(dst, n, "%.*g", prec, (double)v);
        if (strtof(dst, NULL) == v) return;
    }
}

static void add_change(struct train_run *r, const char *flag, const char *was, const char *now,
                       const char *why, bool fixed)
{
    if (r->nchanges == MAX_RECIPE_CHANGES) return;
    struct recipe_change *c = &r->changes[r->nchanges++];
    snprintf(c->flag, sizeof c->flag, "%s", flag);
    snprintf(c->was, sizeof c->was, "%.*s", (int)sizeof c->was - 1, was); /* cut to fit */
    snprintf(c->now, sizeof c->now, "%.*s", (int)sizeof c->now - 1, now); /* cut to fit */
    snprintf(c->why, sizeof c->why, "%s", why);
    c->fixed = fixed;
}

/* A number: the checkpoint's when its flag is not given; given and `used` (by this optimizer
 * and schedule), a change when it differs. */
static void merge_float(struct train_run *r, const char *flag, bool given, bool used, float *now,
                        float was)
{
    char a[32], b[32];
    if (!given) *now = was;
    if (!given || !used || *now == was) return;
    float_text(was, a, sizeof a);
    float_text(*now, b, sizeof b);
    add_change(r, flag, a, b, "", false);
}

static void merge_long(struct train_run *r, const char *flag, bool given, bool used, long *now,
                       long was)
{
    char a[32], b[32];
    if (!given) *now = was;
    if (!given || !used || *now == was) return;
    snprintf(a, sizeof a, "%ld", was);
    snprintf(b, sizeof b, "%ld", *now);
    add_change(r, flag, a, b, "", false);
}

/* Adam's betas: --betas names both as one change ("0.9,0.99"), --beta1 and --beta2 each. */
static void merge_betas(struct train_args *a, struct train_run *r,
                        const struct clt_optim_params *was, bool used)
{
    struct clt_optim_params *op = &a->op;
    char w1[32], w2[32], n1[32], n2[32], wtext[72], ntext[72];
    if (!a->given.betas) {
        merge_float(r, "--beta1", a->given.beta1, used, &op->beta1, was->beta1);
        merge_float(r, "--beta2", a->given.beta2, used, &op->beta2, was->beta2);
        return;
    }
    if (!used || (op->beta1 == was->beta1 && op->beta2 == was->beta2)) return;
    float_text(was->beta1, w1, sizeof w1);
    float_text(was->beta2, w2, sizeof w2);
    float_text(op->beta1, n1, sizeof n1);
    float_text(op->beta2, n2, sizeof n2);
    snprintf(wtext, sizeof wtext, "%s,%s", w1, w2);
    snprintf(ntext, sizeof ntext, "%s,%s", n1, n2);
    add_change(r, "--betas", wtext, ntext, "", false);
}

/* The optimizer, its parameters and the learning-rate schedule, into a->op (which holds the
 * flags given and the defaults). */
static void merge_optim(struct train_args *a, struct train_run *r, const struct clt_run_recipe *w)
{
    struct clt_optim_params *op = &a->op;
    const struct clt_optim_params *was = &w->optim;
    char why[96];
    if (!a->given.optimizer) op->kind = was->kind;
    snprintf(why, sizeof why, "the checkpoint holds %s's state", clt_optim_kind_name(was->kind));
    if (op->kind != was->kind)
        add_change(r, "--optimizer", clt_optim_kind_name(was->kind),
                   clt_optim_kind_name(op->kind), why, true);
    if (!a->given.schedule) op->schedule = was->schedule;
    if (op->schedule != was->schedule)
        add_change(r, "--schedule", clt_schedule_name(was->schedule),
                   clt_schedule_name(op->schedule), "", false);
    bool sgd = op->kind == CLT_OPTIM_SGD;
    merge_float(r, "--lr", a->lr_seen, true, &op->lr, was->lr);
    merge_float(r, "--weight-decay", a->wd_seen, true, &op->weight_decay, was->weight_decay);
    merge_float(r, "--momentum", a->given.momentum, sgd, &op->momentum, was->momentum);
    merge_float(r, "--dampening", a->given.dampening, sgd, &op->dampening, was->dampening);
    if (!a->nesterov) op->nesterov = was->nesterov;
    else if (sgd && !was->nesterov) add_change(r, "--nesterov", "off", "on", "", false);
    merge_betas(a, r, was, !sgd);
    merge_float(r, "--eps", a->given.eps, !sgd, &op->eps, was->eps);
    merge_long(r, "--warmup", a->given.warmup, true, &op->warmup_steps, was->warmup_steps);
    merge_float(r, "--gamma", a->given.gamma, op->schedule == CLT_SCHED_STEP, &op->gamma,
                was->gamma);
    merge_float(r, "--min-lr", a->given.min_lr, op->schedule == CLT_SCHED_COSINE, &op->min_lr,
                was->min_lr);
    merge_float(r, "--clip-grad", a->given.clip_grad, true, &op->clip_grad, was->clip_grad);
    /* plan_steps takes --step-size when seen, else one epoch: the checkpoint's is the run's */
    merge_long(r, "--step-size", a->step_size_seen, op->schedule == CLT_SCHED_STEP,
               &a->step_size, was->step_size);
    a->step_size_seen = true;
}

/* --epochs and --steps: the checkpoint's when not given. The run's length is part of the recipe
 * only under a cosine schedule (the checkpoint's or this run's), whose curve spans it; otherwise
 * a run may be extended. */
static int merge_length(struct train_args *a, struct train_run *r, const struct clt_run_recipe *w)
{
    long eff = 0, spe = 0, total = 0;
    char was[32], now[32], why[96];
    if (!a->given.epochs) a->epochs = w->epochs;
    if (!a->given.steps) a->steps = w->max_steps;
    if (a->op.schedule != CLT_SCHED_COSINE && w->optim.schedule != CLT_SCHED_COSINE)
        return CLI_OK;
    if (cli_plan_total(a, r->train.n, &eff, &spe, &total) != CLI_OK) return CLI_USAGE;
    if ((total > 0 ? total : 1) == w->optim.total_steps) return CLI_OK;
    snprintf(why, sizeof why, "the cosine schedule spans %ld steps, this run %ld",
             w->optim.total_steps, total);
    if (a->given.epochs && a->epochs != w->epochs) {
        snprintf(was, sizeof was, "%d", w->epochs);
        snprintf(now, sizeof now, "%ld", a->epochs);
        add_change(r, "--epochs", was, now, why, false);
    }
    if (a->given.steps && a->steps != w->max_steps) {
        snprintf(was, sizeof was, w->max_steps ? "%ld" : "none", w->max_steps);
        snprintf(now, sizeof now, "%ld", a->steps);
        add_change(r, "--steps", was, now, why, false);
    }
    return CLI_OK;
}

/* "flip,shift=2,cutout=4", or "none". */
static void augment_text(const struct clt_augment *g, char *dst, size_t n)
{
    size_t len = 0;
    dst[0] = '\0';
    if (g->flip) len += (size_t)snprintf(dst + len, n - len, "flip");
    if (g->shift && len < n)
        len += (size_t)snprintf(dst + len, n - len, "%sshift=%d", len ? "," : "", g->shift);
    if (g->cutout && len < n)
        snprintf(dst + len, n - len, "%scutout=%d", len ? "," : "", g->cutout);
    if (!dst[0]) snprintf(dst, n, "none");
}

/* Precision, label smoothing, shuffling, normalisation and augmentation. */
static void merge_data(struct train_args *a, struct train_run *r, const struct clt_run_recipe *w)
{
    char was[64], now[64];
    if (!a->given.precision) a->prec = w->precision;
    if (a->prec != w->precision) {
        bool fp16 = a->prec == CLT_DTYPE_F16 || w->precision == CLT_DTYPE_F16;
        add_change(r, "--precision", cli_precision_name(w->precision), cli_precision_name(a->prec),
                   fp16 ? "an fp16 run's loss scaler state is in its checkpoint, other runs' is "
                          "not" : "", fp16);
    }
    merge_float(r, "--label-smoothing", a->given.smoothing, true, &a->smoothing,
                w->label_smoothing);
    if (!a->no_shuffle) a->no_shuffle = !w->shuffle;
    else if (w->shuffle) add_change(r, "--no-shuffle", "shuffled", "file order", "", false);
    if (a->normalize && !w->normalize) add_change(r, "--normalize", "off", "on", "", false);
    augment_text(&w->augment, was, sizeof was);
    if (!a->augment) {
        a->aug = w->augment;
        snprintf(r->augment_text, sizeof r->augment_text, "%s", was);
        if (clt_augment_enabled(&a->aug)) a->augment = r->augment_text;
    } else if (a->aug.flip != w->augment.flip || a->aug.shift != w->augment.shift ||
               a->aug.cutout != w->augment.cutout) {
        augment_text(&a->aug, now, sizeof now);
        add_change(r, "--augment", was, now, "", false);
    }
}

/* The refusal: every difference, and what to do. */
static int refuse_changes(const struct train_args *a, const struct train_run *r)
{
    char list[4096], fixed[256];
    size_t len = 0, flen = 0;
    list[0] = fixed[0] = '\0';
    for (int i = 0; i < r->nchanges && len < sizeof list; i++) {
        const struct recipe_change *c = &r->changes[i];
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s: given %s, the checkpoint's "
                                "%s%s%s%s", i ? "; " : "", c->flag, c->now, c->was,
                                c->why[0] ? " (" : "", c->why, c->why[0] ? ")" : "");
        if (c->fixed && flen < sizeof fixed)
            flen += (size_t)snprintf(fixed + flen, sizeof fixed - flen, "%s%s",
                                     flen ? " or " : "", c->flag);
    }
    if (flen)
        return cli_usage_error("--resume %s: the options differ from the checkpoint's recipe: "
                               "%s. %s cannot change on resume, not even with --change-recipe: "
                               "resume without that option, or start a new run from its weights with "
                               "--init", a->resume, list, fixed);
    return cli_usage_error("--resume %s: the options differ from the checkpoint's recipe: %s. "
                           "Resume without them to continue its recipe, give --change-recipe to "
                           "train on with the values given, or start a new run from its weights "
                           "with --init", a->resume, list);
}

/* --model given: it must be the checkpoint's (the same canonical spec). Another task or number
 * of outputs is left to the set-up, whose message names that difference. */
static int check_model(const struct train_args *a, const struct train_run *r)
{
    struct clt_checkpoint_info info = clt_checkpoint_get_info(r->ck);
    const char *saved = info.model_text;
    clt_spec spec = {0};
    char *canon = NULL;
    if (!a->model_seen || info.task != r->train.task || info.classes != r->classes) return CLI_OK;
    bool same = clt_spec_parse(saved, r->classes, &spec) == CLT_OK &&
                clt_spec_to_string(&spec, &canon) == CLT_OK && strcmp(canon, r->spec_text) == 0;
    clt_spec_free(&spec);
    free(canon);
    if (same) return CLI_OK;
    return cli_usage_error("--resume %s: the checkpoint's model is \"%s\", --model gives \"%s\": "
                           "its weights and optimizer state are that model's; resume without "
                           "--model, or start a new run from its weights with --init --model",
                           a->resume, saved, r->spec_text);
}

/* --normalize given over a checkpoint trained without it (--change-recipe): the statistics of
 * this run's training split from now on. */
static int take_new_statistics(struct train_run *r)
{
    r->mean = malloc(r->train.features * sizeof *r->mean);
    r->std = malloc(r->train.features * sizeof *r->std);
    if (!r->mean || !r->std || clt_dataset_stats(&r->train, r->mean, r->std) != CLT_OK)
        return cli_error("computing feature statistics: %s", clt_last_errmsg());
    r->norm.mean = r->mean;
    r->norm.std = r->std;
    return CLI_OK;
}

int cli_resume_recipe(struct train_args *a, struct train_run *r)
{
    struct clt_checkpoint_info info = clt_checkpoint_get_info(r->ck);
    const struct clt_run_recipe *w = &info.recipe;
    int rc = check_model(a, r);
    if (rc != CLI_OK) return rc;
    if (!w->present) return CLI_OK; /* an older file: the flags as given (note_resume_plan) */
    /* the batch: the existing geometry check (clt_checkpoint_check_run) compares what is given */
    if (info.run.present && !a->given.batch) a->batch = (long)info.run.batch_size;
    if (info.run.present && !a->given.accumulate) a->accumulate = info.run.accumulate;
    merge_optim(a, r, w);
    merge_data(a, r, w);
    rc = merge_length(a, r, w);
    if (rc != CLI_OK) return rc;
    bool fixed = false;
    for (int i = 0; i < r->nchanges; i++) fixed = fixed || r->changes[i].fixed;
    if (r->nchanges && (fixed || !a->change_recipe)) return refuse_changes(a, r);
    rc = cli_check_augment_data(a, &r->train);
    if (rc == CLI_OK && a->normalize && !w->normalize) rc = take_new_statistics(r);
    return rc;
}

void cli_describe_recipe_changes(const struct train_run *r, char *dst, size_t n)
{
    size_t len = 0;
    dst[0] = '\0';
    for (int i = 0; i < r->nchanges && len < n; i++) {
        const struct recipe_change *c = &r->changes[i];
        len += (size_t)snprintf(dst + len, n - len, "%s%s %s (the checkpoint's: %s)",
                                i ? ", " : "; recipe changed: ", c->flag, c->now, c->was);
    }
}

/* A JSON string of s, which holds no control characters (flag values, names). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void cli_write_recipe_changes(const struct train_run *r, FILE *f)
{
    if (!f || !r->nchanges) return;
    fprintf(f, "{\"event\":\"recipe_change\",\"step\":%ld,\"changes\":{",
            clt_checkpoint_get_info(r->ck).step);
    for (int i = 0; i < r->nchanges; i++) {
        const struct recipe_change *c = &r->changes[i];
        fprintf(f, "%s", i ? "," : "");
        json_string(f, c->flag + 2); /* without "--" */
        fprintf(f, ":{\"checkpoint\":");
        json_string(f, c->was);
        fprintf(f, ",\"run\":");
        json_string(f, c->now);
        fprintf(f, "}");
    }
    fprintf(f, "}}\n");
}
