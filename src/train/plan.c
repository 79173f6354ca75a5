/* What a training run's plan can tell before its first step: every batch it will take (the last
 * partial one, each replica's slice) against the smallest batch the model trains on, and the
 * augmentation against the images (clt_train_plan_check); and, for data-parallel members in
 * separate processes, that they all run the same thing (clt_train_setup_agree: one exchange of
 * a fixed-size record of the run, compared field by field with member 0's). */
#include "cltrain/train.h"

#include "dist/comm_internal.h"
#include "io/crc32c.h"
#include "nn/model_internal.h"
#include "runtime/internal.h"
#include "train/train_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan's batches ------------------------------------------------------------------- */

/* "replica" or, for members that are processes, "rank" */
static const char *member_word(const clt_comm *c)
{
    return strcmp(clt_comm_kind(c), "mpi") == 0 ? "rank" : "replica";
}

/* Member r's share of a batch of m samples (m alone without a comm). */
static size_t slice_of(const clt_comm *c, int r, size_t m)
{
    if (!c) return m;
    size_t b = 0, e = 0;
    clt_comm_slice(c, r, m, &b, &e);
    return e - b;
}

/* The micro-batch sizes an epoch takes at micro-batch B, accumulate A over n samples: sizes[0]
 * the full one (0 when the epoch has none), sizes[1] the last partial one (0: none). */
static void micro_sizes(size_t n, size_t B, size_t A, bool drop_last, size_t sizes[2])
{
    size_t E = B * A;
    bool drop = drop_last && n >= E; /* an epoch without a full step trains on nothing */
    sizes[0] = n >= B ? B : 0;
    sizes[1] = drop ? 0 : n % B;
}

/* Whether micro-batch B trains: every member's slice of a full batch has a sample, and every
 * non-empty slice of any batch holds at least `min` (an empty slice of a partial batch is
 * skipped). When not, *member and *size say which slice and which batch (0 or 1 as above). */
static bool batch_trains(const struct clt_train_setup_params *p, size_t B, size_t A, size_t min,
                         int *member, int *which)
{
    const clt_comm *c = p->train.comm;
    size_t sizes[2];
    micro_sizes(p->train_set->n, B, A, p->train.drop_last, sizes);
    int members = c ? c->size : 1;
    for (int k = 0; k < 2; k++) {
        if (sizes[k] == 0) continue;
        for (int r = 0; r < members; r++) {
            size_t s = slice_of(c, r, sizes[k]);
            if ((s == 0 && k == 0) || (s > 0 && s < min)) {
                *member = r;
                *which = k;
                return false;
            }
        }
    }
    return true;
}

/* The nearest micro-batch to B that trains (either side, at most NEAREST_SPAN away), or 0. */
#define NEAREST_SPAN ((size_t)1 << 20)
static size_t nearest_batch(const struct clt_train_setup_params *p, size_t B, size_t A,
                            size_t min)
{
    int member, which;
    for (size_t d = 1; d <= NEAREST_SPAN; d++) {
        if (B > d && batch_trains(p, B - d, A, min, &member, &which)) return B - d;
        if (batch_trains(p, B + d, A, min, &member, &which)) return B + d;
    }
    return 0;
}

/* "4 split 1+1+1+1+0+0+0+0" (the first 16 slices) into dst */
static void format_split(const clt_comm *c, size_t m, char *dst, size_t n)
{
    size_t len = 0;
    int w = snprintf(dst, n, "%zu split ", m);
    len = w > 0 ? (size_t)w : 0;
    for (int r = 0; r < c->size && len < n; r++) {
        w = r == 16 ? snprintf(dst + len, n - len, "+...")
                    : snprintf(dst + len, n - len, "%s%zu", r ? "+" : "", slice_of(c, r, m));
        if (w < 0 || r == 16) break;
        len += (size_t)w;
    }
}

/* The message for batch `which` of member r failing at micro-batch B. */
static clt_status batch_error(clt_ctx *ctx, const struct clt_train_setup_params *p, size_t B,
                              size_t A, size_t min, const char *why, int r, int which)
{
    const clt_comm *c = p->train.comm;
    size_t n = p->train_set->n, sizes[2], alt = nearest_batch(p, B, A, min);
    micro_sizes(n, B, A, p->train.drop_last, sizes);
    size_t m = sizes[which], s = slice_of(c, r, m);
    char where[160] = "", split[160] = "", remedy[160] = "", last[96] = "";
    if (c) {
        format_split(c, m, split, sizeof split);
        snprintf(where, sizeof where, " over %d %ss (%s)", c->size, member_word(c), split);
    }
    if (alt)
        snprintf(remedy, sizeof remedy, "another --batch-size (e.g. %zu)%s%s%s", alt,
                 c && which == 0 ? " or fewer " : "", c && which == 0 ? member_word(c) : "",
                 c && which == 0 ? "s" : "");
    else
        snprintf(remedy, sizeof remedy, "a larger --batch-size%s%s%s", c ? " or fewer " : "",
                 c ? member_word(c) : "", c ? "s" : "");
    if (which == 1)
        snprintf(last, sizeof last, " (%zu = %zu x %zu + %zu)", n, n / B, B, m);
    const char *batch = which == 0 ? "every batch" : "the last batch of each epoch";
    char whose[64] = "";
    if (c) snprintf(whose, sizeof whose, "%s %d's slice of ", member_word(c), r);
    if (s == 0) /* a full batch that leaves a member without a sample */
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "--batch-size %zu%s: %s%s is empty, and every %s needs a sample of "
                         "every full batch; use %s", B, where, whose, batch, member_word(c),
                         remedy);
    return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                     "--batch-size %zu%s: %s%s%s has %zu sample%s, but %s needs at least %zu in "
                     "training; use %s%s", B, where, whose, batch, last, s, s == 1 ? "" : "s",
                     why, min, which == 1 ? "--drop-last or " : "", remedy);
}

/* --augment against the images: a shift must leave some of the image in view, a cutout must
 * fit in it. */
static clt_status check_augment(clt_ctx *ctx, const struct clt_train_setup_params *p)
{
    const struct clt_augment *au = &p->loader.augment;
    const clt_dataset *d = p->train_set;
    if (!clt_augment_enabled(au) || d->sample_ndim != 3) return CLT_OK;
    size_t H = d->sample_shape[1], W = d->sample_shape[2], side = H < W ? H : W;
    if (au->shift > 0 && (size_t)au->shift >= side)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "--augment shift=%d: the images are %zux%zu, and a shift of %zu or more "
                         "pixels can move a whole image out of view; expected shift=0 to %zu",
                         au->shift, H, W, side, side - 1);
    if ((size_t)au->cutout > side)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG,
                         "--augment cutout=%d: the images are %zux%zu, and the square must fit "
                         "in them; expected cutout=0 to %zu", au->cutout, H, W, side);
    return CLT_OK;
}

clt_status clt__train_plan_check(clt_ctx *ctx, const struct clt_train_setup_params *p,
                                 size_t batch, int accumulate)
{
    if (p->text && !p->train_set) /* a text's windows: any batch trains */
        return clt_spec_validate(p->spec, (int)p->in_features, (int)p->outputs);
    if (!p->spec || !p->train_set || batch == 0)
        return clt__fail(ctx, CLT_ERR_INVALID_ARG, "training plan: no spec, data or batch");
    clt_status st = check_augment(ctx, p);
    if (st != CLT_OK || p->train_set->n == 0) return st;
    size_t min = 1, A = accumulate > 1 ? (size_t)accumulate : 1;
    char why[160];
    struct clt_model_params mp = p->model;
    if (mp.input_shape[0] == 0 && p->train_set->sample_shape[1] != 0)
        memcpy(mp.input_shape, p->train_set->sample_shape, sizeof mp.input_shape);
    st = clt__model_min_batch(p->spec, p->in_features, p->outputs, &mp, &min, why, sizeof why);
    if (st != CLT_OK) return clt__fail(ctx, st, "%s", clt_last_errmsg());
    int member = 0, which = 0;
    if (batch_trains(p, batch, A, min, &member, &which)) return CLT_OK;
    return batch_error(ctx, p, batch, A, min, why, member, which);
}

clt_status clt_train_plan_check(const struct clt_train_setup_params *p)
{
    return clt__train_plan_check(NULL, p, p->train.batch_size, p->train.accumulate);
}

/* ---- the members agree -------------------------------------------------------------------- */

/* One field of the record: a digest of the value and its text (truncated). */
#define AGREE_TEXT 56
struct agree_field {
    uint64_t digest;
    char text[AGREE_TEXT];
};

/* The fields, in the order they are compared (the first difference is the one named). A new
 * field goes before F__COUNT; AGREE_SLOTS keeps the record's size fixed across versions. */
enum {
    F_FORMAT, F_MODEL, F_TASK, F_DATA, F_TEST, F_INPUT, F_NORMALIZE, F_AUGMENT, F_BATCH,
    F_ACCUMULATE, F_EPOCHS, F_STEPS, F_DROP_LAST, F_SHUFFLE, F_SEED, F_INIT, F_PRECISION,
    F_OPTIMIZER, F_LR, F_WEIGHT_DECAY, F_MOMENTUM, F_DAMPENING, F_NESTEROV, F_BETAS, F_EPS,
    F_SCHEDULE, F_WARMUP, F_STEP_SIZE, F_GAMMA, F_MIN_LR, F_TOTAL_STEPS, F_SMOOTHING,
    F_LOG_EVERY, F_SAVE, F_SAVE_EVERY, F__COUNT
};
#define AGREE_SLOTS 48
static const char *const field_names[F__COUNT] = {
    "the run record's format", "--model", "--task/--classes", "--data (training split)",
    "--data (test split)", "--input-shape", "--normalize", "--augment", "--batch-size",
    "--accumulate", "--epochs", "--steps", "--drop-last", "--no-shuffle", "--seed",
    "--init-scheme", "--precision", "--optimizer", "--lr", "--weight-decay", "--momentum",
    "--dampening", "--nesterov", "--beta1/--beta2", "--eps", "--schedule", "--warmup",
    "--step-size", "--gamma", "--min-lr", "the schedule's total steps", "--label-smoothing",
    "--log-every", "--save", "--save-every"};

struct agree_record {
    struct agree_field f[AGREE_SLOTS];
};

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_START 0xcbf29ce484222325ULL

/* Field k: its text (printf) and the digest of the full text, or of `digest_of` when given. */
static void set_field(struct agree_record *rec, int k, const void *digest_of, size_t n,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void set_field(struct agree_record *rec, int k, const void *digest_of, size_t n,
                      const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    struct agree_field *f = &rec->f[k];
    f->digest = fnv1a(FNV_START, text, strlen(text));
    if (digest_of) f->digest = fnv1a(f->digest, digest_of, n);
    size_t len = strlen(text);
    if (len >= sizeof f->text) { /* truncated: "...", the digest still tells */
        memcpy(f->text, text, sizeof f->text - 4);
        memcpy(f->text + sizeof f->text - 4, "...", 4);
    } else {
        memcpy(f->text, text, len + 1);
    }
}

/* A float field: shown as %g, compared by its bits. */
static void set_float(struct agree_record *rec, int k, float v)
{
    set_field(rec, k, &v, sizeof v, "%g", (double)v);
}

/* A data split's identity: its size and the CRC-32C of all its values and labels. */
static void set_data(struct agree_record *rec, int k, const clt_dataset *d)
{
    if (!d || d->n == 0) {
        set_field(rec, k, NULL, 0, "none");
        return;
    }
    uint32_t crc = 0;
    size_t n = d->n, F = d->features;
    if (d->u8) crc = clt__crc32c(crc, d->u8, n * F);
    if (d->f32) crc = clt__crc32c(crc, d->f32, n * F * sizeof *d->f32);
    if (d->labels) crc = clt__crc32c(crc, d->labels, n * sizeof *d->labels);
    if (d->targets) crc = clt__crc32c(crc, d->targets, n * sizeof *d->targets);
    set_field(rec, k, NULL, 0, "%zu samples of %zu features, CRC-32C %08" PRIx32, n, F, crc);
}

static void fill_record(const struct clt_train_setup_params *p, struct agree_record *rec)
{
    const struct clt_train_params *tp = &p->train;
    const struct clt_optim_params *op = &tp->optim;
    const struct clt_input_norm *nm = &p->norm;
    const struct clt_augment *au = &p->loader.augment;
    memset(rec, 0, sizeof *rec);
    set_field(rec, F_FORMAT, NULL, 0, "1");
    char *spec = NULL;
    if (clt_spec_to_string(p->spec, &spec) == CLT_OK) set_field(rec, F_MODEL, NULL, 0, "%s", spec);
    else set_field(rec, F_MODEL, NULL, 0, "(unprintable)");
    free(spec);
    set_field(rec, F_TASK, NULL, 0, "%s, %zu output%s",
              p->train_set->task == CLT_TASK_REGRESSION ? "regression" : "classification",
              p->outputs,
              p->outputs == 1 ? "" : "s");
    set_data(rec, F_DATA, p->train_set);
    set_data(rec, F_TEST, p->test_set);
    set_field(rec, F_INPUT, NULL, 0, "%zux%zux%zu", p->train_set->sample_shape[0],
              p->train_set->sample_shape[1], p->train_set->sample_shape[2]);
    uint64_t h = FNV_START;
    if (nm->mean) h = fnv1a(h, nm->mean, nm->features * sizeof *nm->mean);
    if (nm->std) h = fnv1a(h, nm->std, nm->features * sizeof *nm->std);
    if (nm->mean || nm->std)
        set_field(rec, F_NORMALIZE, &h, sizeof h, "on (statistics %016" PRIx64 "), scale %g",
                  h, (double)nm->scale);
    else
        set_field(rec, F_NORMALIZE, &nm->scale, sizeof nm->scale, "off, scale %g",
                  (double)nm->scale);
    char aug[64] = "none"; /* as --augment spells it */
    if (clt_augment_enabled(au))
        snprintf(aug, sizeof aug, "%s%s%.0d%s%.0d", au->flip ? "flip" : "",
                 au->shift ? (au->flip ? ",shift=" : "shift=") : "", au->shift,
                 au->cutout ? (au->flip || au->shift ? ",cutout=" : "cutout=") : "", au->cutout);
    set_field(rec, F_AUGMENT, NULL, 0, "%s", aug);
    set_field(rec, F_BATCH, NULL, 0, "%zu", tp->batch_size);
    set_field(rec, F_ACCUMULATE, NULL, 0, "%d", tp->accumulate > 1 ? tp->accumulate : 1);
    set_field(rec, F_EPOCHS, NULL, 0, "%d", tp->epochs);
    set_field(rec, F_STEPS, NULL, 0, "%ld", tp->max_steps);
    set_field(rec, F_DROP_LAST, NULL, 0, "%s", tp->drop_last ? "on" : "off");
    set_field(rec, F_SHUFFLE, NULL, 0, "%s", tp->shuffle ? "shuffled" : "file order");
    set_field(rec, F_SEED, NULL, 0, "%" PRIu64 " (model %" PRIu64 ")", tp->seed, p->model.seed);
    set_field(rec, F_INIT, NULL, 0, "%d", (int)p->model.init);
    set_field(rec, F_PRECISION, NULL, 0, "%s", clt_dtype_name(p->model.precision));
    set_field(rec, F_OPTIMIZER, NULL, 0, "%s", clt_optim_kind_name(op->kind));
    set_float(rec, F_LR, op->lr);
    set_float(rec, F_WEIGHT_DECAY, op->weight_decay);
    set_float(rec, F_MOMENTUM, op->momentum);
    set_float(rec, F_DAMPENING, op->dampening);
    set_field(rec, F_NESTEROV, NULL, 0, "%s", op->nesterov ? "on" : "off");
    float betas[2] = {op->beta1, op->beta2};
    set_field(rec, F_BETAS, betas, sizeof betas, "%g, %g", (double)op->beta1, (double)op->beta2);
    set_float(rec, F_EPS, op->eps);
    set_field(rec, F_SCHEDULE, NULL, 0, "%s", clt_schedule_name(op->schedule));
    set_field(rec, F_WARMUP, NULL, 0, "%ld", op->warmup_steps);
    set_field(rec, F_STEP_SIZE, NULL, 0, "%ld", op->step_size);
    set_float(rec, F_GAMMA, op->gamma);
    set_float(rec, F_MIN_LR, op->min_lr);
    set_field(rec, F_TOTAL_STEPS, NULL, 0, "%ld", op->total_steps);
    set_float(rec, F_SMOOTHING, tp->label_smoothing);
    /* the points where the members meet: log points, checkpoints */
    set_field(rec, F_LOG_EVERY, NULL, 0, "%ld", tp->log_every);
    set_field(rec, F_SAVE, NULL, 0, "%s", tp->save_path ? "given" : "not given");
    set_field(rec, F_SAVE_EVERY, NULL, 0, "%ld", tp->save_every);
}

static bool field_differs(const struct agree_field *a, const struct agree_field *b)
{
    return a->digest != b->digest || memcmp(a->text, b->text, sizeof a->text) != 0;
}

clt_status clt_train_setup_agree(const struct clt_train_setup_params *p)
{
    clt_status st = CLT_OK;
    clt_comm *c = p->train.comm;
    struct agree_record mine, *all = NULL;
    if (!c || !p->spec || !p->train_set)
        return clt__fail(NULL, CLT_ERR_INVALID_ARG,
                         "run check: no communicator, model spec or training data");
    fill_record(p, &mine);
    CLT_ALLOC(NULL, all, (size_t)c->size);
    CLT_TRY(clt_comm_allgather(c, &mine, sizeof mine, all));
    /* every member walks the same records: the same verdict and message everywhere */
    for (int r = 1; r < c->size; r++)
        for (int k = 0; k < F__COUNT; k++) {
            const struct agree_field *a = &all[0].f[k], *b = &all[r].f[k];
            if (!field_differs(a, b)) continue;
            bool same_text = strcmp(a->text, b->text) == 0;
            CLT_FAIL(NULL, CLT_ERR_INVALID_ARG,
                     "the %ss do not run the same thing: %s is \"%s\"%s on %s 0, \"%s\"%s on "
                     "%s %d; start every %s with the same flags and data", member_word(c),
                     field_names[k], a->text, same_text ? " (other digest)" : "",
                     member_word(c), b->text, same_text ? " (other digest)" : "",
                     member_word(c), r, member_word(c));
        }
fail:
    free(all);
    return st;
}
