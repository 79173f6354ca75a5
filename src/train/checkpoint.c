/* Checkpoints: the model's parameters named as PyTorch's nn.Sequential state_dict, optimizer
 * state as extra tensors, and the run's metadata (its geometry, a CRC-32C per tensor and one of
 * the metadata), in a safetensors file written atomically; and loading with every checksum
 * verified, the metadata
 * checked against itself, and every name, dtype, shape and value checked against the model.
 * Plain state dicts (PyTorch's save_file) open as weights for --init. */
#include "cltrain/checkpoint.h"
#include "cltrain/text.h"
#include "cltrain/opencl.h"

#include "runtime/internal.h"
#include "io/crc32c.h"
#include "io/json.h"

#include "io/safetensors_internal.h"
#include "train/train_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- saving ------------------------------------------------------------------------------- */

static char *json_floats(const float *v, size_t n)
{
    clt__json_buf b = {0};
    clt__json_buf_puts(&b, "[");
    for (size_t i = 0; i < n; i++) clt__json_buf_printf(&b, "%s%.9g", i ? "," : "", (double)v[i]);
    clt__json_buf_puts(&b, "]");
    if (b.failed) {
        clt__json_buf_free(&b);
        return NULL;
    }
    return b.data;
}

uint32_t clt__checkpoint_data_crc32c(const clt_dataset *d)
{
    uint32_t crc = 0;
    size_t n = d->n, head = (size_t)1 << 20;
    if (d->labels) crc = clt__crc32c(crc, d->labels, n * sizeof *d->labels);
    if (d->targets) crc = clt__crc32c(crc, d->targets, n * sizeof *d->targets);
    if (d->u8) crc = clt__crc32c(crc, d->u8, n * d->features < head ? n * d->features : head);
    if (d->f32) {
        size_t bytes = n * d->features * sizeof *d->f32;
        crc = clt__crc32c(crc, d->f32, bytes < head ? bytes : head);
    }
    return crc;
}

/* The metadata "run": {"batch_size":..,"accumulate":..,"steps_per_epoch":..,"total_steps":..,
 * "epochs":..,"drop_last":..,"dropout_seed":"..","data":{"name":"..","train_samples":..,
 * "crc32c":".."},"replicas":..} (the seed as a string: JSON numbers stop at 2^53). */
static char *json_run(const struct clt_run_geometry *g)
{
    clt__json_buf b = {0};
    size_t len = strnlen(g->data_name, sizeof g->data_name);
    bool utf8 = clt__json_utf8_valid(g->data_name, len);
    clt__json_buf_printf(&b, "{\"batch_size\":%zu,\"accumulate\":%d,\"steps_per_epoch\":%ld,"
                         "\"total_steps\":%ld,\"epochs\":%d,\"drop_last\":%s,"
                         "\"dropout_seed\":\"%" PRIu64 "\",\"data\":{\"name\":",
                         g->batch_size, g->accumulate, g->steps_per_epoch, g->total_steps,
                         g->epochs, g->drop_last ? "true" : "false", g->dropout_seed);
    clt__json_buf_string(&b, utf8 ? g->data_name : "", utf8 ? len : 0);
    clt__json_buf_printf(&b, ",\"train_samples\":%zu,\"crc32c\":\"%08" PRIx32 "\"},"
                         "\"replicas\":%d}", g->data_samples, g->data_crc32c,
                         g->replicas > 0 ? g->replicas : 1);
    if (b.failed) {
        clt__json_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* The shortest "%g" text that reads back as the same float (a recipe's values stay as given:
 * 0.01, not 0.00999999978). */
static void put_float(clt__json_buf *b, float v)
{
    char tmp[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
        if (strtof(tmp, NULL) == v) break;
    }
    clt__json_buf_puts(b, tmp);
}

/* ,"key":value with the value as put_float writes it. */
static void put_key_float(clt__json_buf *b, const char *key, float v)
{
    clt__json_buf_printf(b, ",\"%s\":", key);
    put_float(b, v);
}

/* The metadata "recipe" (see clt_run_recipe in checkpoint.h). */
static char *json_recipe(const struct clt_run_recipe *r)
{
    clt__json_buf b = {0};
    const struct clt_optim_params *o = &r->optim;
    clt__json_buf_printf(&b, "{\"optimizer\":\"%s\"", clt_optim_kind_name(o->kind));
    put_key_float(&b, "lr", o->lr);
    put_key_float(&b, "momentum", o->momentum);
    put_key_float(&b, "dampening", o->dampening);
    clt__json_buf_printf(&b, ",\"nesterov\":%s", o->nesterov ? "true" : "false");
    put_key_float(&b, "beta1", o->beta1);
    put_key_float(&b, "beta2", o->beta2);
    put_key_float(&b, "eps", o->eps);
    put_key_float(&b, "weight_decay", o->weight_decay);
    clt__json_buf_printf(&b, ",\"schedule\":\"%s\",\"warmup_steps\":%ld,\"step_size\":%ld",
                         clt_schedule_name(o->schedule), o->warmup_steps, o->step_size);
    put_key_float(&b, "gamma", o->gamma);
    put_key_float(&b, "min_lr", o->min_lr);
    put_key_float(&b, "clip_grad", o->clip_grad);
    clt__json_buf_printf(&b, ",\"total_steps\":%ld,\"epochs\":%d,\"max_steps\":%ld,"
                         "\"precision\":\"%s\"", o->total_steps, r->epochs, r->max_steps,
                         clt_dtype_name(r->precision));
    put_key_float(&b, "label_smoothing", r->label_smoothing);
    clt__json_buf_printf(&b, ",\"shuffle\":%s,\"normalize\":%s,\"augment\":{\"flip\":%s,"
                         "\"shift\":%d,\"cutout\":%d}}", r->shuffle ? "true" : "false",
                         r->normalize ? "true" : "false", r->augment.flip ? "true" : "false",
                         r->augment.shift, r->augment.cutout);
    if (b.failed) {
        clt__json_buf_free(&b);
        return NULL;
    }
    return b.data;
}

#define META_CRC_KEY "crc32c_metadata"

/* The metadata "class_names": ["name",...], one per class; NULL when a name is not UTF-8
 * (JSON holds only UTF-8: the file then carries no names) or on out of memory. */
static char *json_class_names(const char *const *names, int n)
{
    clt__json_buf b = {0};
    clt__json_buf_puts(&b, "[");
    for (int c = 0; c < n; c++) {
        size_t len = strlen(names[c]);
        if (!clt__json_utf8_valid(names[c], len)) {
            clt__json_buf_free(&b);
            return NULL;
        }
        if (c) clt__json_buf_puts(&b, ",");
        clt__json_buf_string(&b, names[c], len);
    }
    clt__json_buf_puts(&b, "]");
    if (b.failed) {
        clt__json_buf_free(&b);
        return NULL;
    }
    return b.data;
}

typedef struct meta_ref {
    const char *key, *val;
} meta_ref;

static int cmp_meta_ref(const void *a, const void *b)
{
    return strcmp(((const meta_ref *)a)->key, ((const meta_ref *)b)->key);
}

clt_status clt__checkpoint_meta_crc32c(const char *const *keys, const char *const *vals, int n,
                                       uint32_t *out)
{
    meta_ref *refs = malloc((size_t)(n > 0 ? n : 1) * sizeof *refs);
    uint32_t crc = 0;
    int k = 0;
    if (!refs) return clt__fail(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i], META_CRC_KEY) != 0) refs[k++] = (meta_ref){keys[i], vals[i]};
    qsort(refs, (size_t)k, sizeof *refs, cmp_meta_ref);
    for (int i = 0; i < k; i++) {
        crc = clt__crc32c(crc, refs[i].key, strlen(refs[i].key) + 1);
        crc = clt__crc32c(crc, refs[i].val, strlen(refs[i].val) + 1);
    }
    free(refs);
    *out = crc;
    return CLT_OK;
}

/* The metadata "crc32c": {"name":"8 hex digits",...} over the tensors to be written. */
static char *json_crcs(const clt_st_tensor *ts, int n)
{
    clt__json_buf b = {0};
    clt__json_buf_puts(&b, "{");
    for (int i = 0; i < n; i++) {
        if (i) clt__json_buf_puts(&b, ",");
        clt__json_buf_string(&b, ts[i].name, strlen(ts[i].name));
        clt__json_buf_printf(&b, ":\"%08" PRIx32 "\"",
                             clt__crc32c(0, ts[i].data, ts[i].nbytes));
    }
    clt__json_buf_puts(&b, "}");
    if (b.failed) {
        clt__json_buf_free(&b);
        return NULL;
    }
    return b.data;
}

clt_status clt_checkpoint_save(const char *path, clt_model *m, const clt_optim *optim,
                               const struct clt_checkpoint_info *info)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    int np = clt_model_param_count(m), ns = optim ? clt_optim_state_count(optim) : 0;
    size_t P = clt_tensor_numel(clt_model_params(m));
    float *host = NULL, *bhost = NULL;
    int64_t *chost = NULL;
    int nb = clt_model_buffer_count(m);
    size_t nbf = 0, nbi = 0;
    clt_st_tensor *ts = NULL;
    cl_event ev[8] = {0};
    cl_uint nev = 0;
    char *mean = NULL, *std = NULL, *opt = NULL, *spec = NULL, *run = NULL, *crcs = NULL,
         *recipe = NULL, *names = NULL;
    char scale[32], classes[16], step[32], epoch[16], seed[32], features[32], shape[96],
        meta_crc[16];

    const clt_tensor *amp = info->scaler_state;
    size_t amp_n = amp ? clt_tensor_numel(amp) : 0;
    int32_t *amp_host = NULL;
    CLT_ALLOC(ctx, host, P * (size_t)(1 + ns));
    CLT_ALLOC(ctx, ts, np * (1 + ns) + nb + 1);
    CLT_ASSERT(ns + 3 <= (int)(sizeof ev / sizeof *ev));
    if (amp) {
        if (clt_tensor_dtype(amp) != CLT_DTYPE_I32)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "checkpoint: the scaler state must be i32");
        CLT_ALLOC(ctx, amp_host, amp_n);
        CLT_TRY(clt_tensor_read(amp, amp_host, false, &ev[nev++]));
    }
    CLT_TRY(clt_tensor_read(clt_model_params(m), host, false, &ev[nev++]));
    if (nb) { /* the model's buffers (batchnorm's running statistics) */
        clt_model_buffer_sizes(m, &nbf, &nbi);
        CLT_ALLOC(ctx, bhost, nbf ? nbf : 1);
        CLT_ALLOC(ctx, chost, nbi ? nbi : 1);
        if (nbf) CLT_TRY(clt_tensor_read(clt_model_buffers(m), bhost, false, &ev[nev++]));
        CLT_TRY(clt_model_read_buffers(m, NULL, chost, CLT_WAIT_SAVE));
    }
    for (int s = 0; s < ns; s++)
        CLT_TRY(clt_tensor_read(clt_optim_state(optim, s, NULL), host + P * (size_t)(1 + s), false,
                                &ev[nev++]));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SAVE, nev, ev));

    int n = 0;
    for (int s = -1; s < ns; s++) {
        const char *state = NULL;
        if (s >= 0) clt_optim_state(optim, s, &state);
        for (int i = 0; i < np; i++) {
            const struct clt_param_info *pi = clt_model_param_info(m, i);
            clt_st_tensor *t = &ts[n++];
            if (s < 0) snprintf(t->name, sizeof t->name, "%s", pi->name);
            else snprintf(t->name, sizeof t->name, "optim.%s.%s", pi->name, state);
            t->dtype = CLT_DTYPE_F32;
            t->ndim = pi->ndim;
            for (int d = 0; d < pi->ndim; d++) t->shape[d] = (int64_t)pi->dims[d];
            t->data = host + P * (size_t)(s + 1) + pi->offset;
            t->nbytes = pi->numel * sizeof(float);
        }
    }
    /* buffers as PyTorch's state_dict: f32 (C), num_batches_tracked I64 [] */
    for (int i = 0; i < nb; i++) {
        const struct clt_buffer_info *bi = clt_model_buffer_info(m, i);
        clt_st_tensor *t = &ts[n++];
        snprintf(t->name, sizeof t->name, "%s", bi->name);
        t->dtype = bi->i64 ? CLT_ST_I64 : CLT_DTYPE_F32;
        t->ndim = bi->ndim;
        for (int d = 0; d < bi->ndim; d++) t->shape[d] = (int64_t)bi->dims[d];
        t->data = bi->i64 ? (const void *)(chost + bi->offset) : (const void *)(bhost + bi->offset);
        t->nbytes = bi->numel * (bi->i64 ? sizeof *chost : sizeof *bhost);
    }
    if (amp) {
        clt_st_tensor *t = &ts[n++];
        snprintf(t->name, sizeof t->name, "amp.scaler_state");
        t->dtype = CLT_DTYPE_I32;
        t->ndim = 1;
        t->shape[0] = (int64_t)amp_n;
        t->data = amp_host;
        t->nbytes = amp_n * sizeof *amp_host;
    }

    const struct clt_input_norm *nm = &info->norm;
    if (nm->mean && !(mean = json_floats(nm->mean, nm->features)))
        CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    if (nm->std && !(std = json_floats(nm->std, nm->features)))
        CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    if (optim && !(opt = clt_optim_describe(clt_optim_get_params(optim))))
        CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    CLT_TRY(clt_spec_to_string(clt_model_spec(m), &spec));
    if (info->run.present && !(run = json_run(&info->run)))
        CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    if (info->recipe.present && !(recipe = json_recipe(&info->recipe)))
        CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    if (!(crcs = json_crcs(ts, n))) CLT_FAIL(ctx, CLT_ERR_HOST_MEMORY, "out of host memory");
    snprintf(scale, sizeof scale, "%.9g", (double)nm->scale);
    snprintf(classes, sizeof classes, "%d", info->classes);
    snprintf(step, sizeof step, "%ld", info->step);
    snprintf(epoch, sizeof epoch, "%d", info->epoch);
    snprintf(seed, sizeof seed, "%" PRIu64, info->seed);
    snprintf(features, sizeof features, "%zu", clt_model_in_features(m));
    size_t in_shape[3];
    int in_ndim = clt_model_input_shape(m, in_shape);
    snprintf(shape, sizeof shape, "%zu,%zu,%zu", in_shape[0], in_shape[1], in_shape[2]);
    if (in_ndim == 2) *strrchr(shape, ',') = '\0';
    const char *keys[24], *vals[24];
    int nmeta = 0;
#define META(k, v) (keys[nmeta] = (k), vals[nmeta++] = (v))
    META("format", "cltrain-1");
    META("model", spec);
    META("task", info->task == CLT_TASK_REGRESSION ? "regression" : "classification");
    META("features", features);
    if (in_ndim > 1) META("input_shape", shape);
    META("classes", classes);
    if (info->class_names && info->task == CLT_TASK_CLASSIFICATION &&
        (names = json_class_names(info->class_names, info->classes)))
        META("class_names", names);
    if (info->vocab) META("vocab", info->vocab);
    META("input_scale", scale);
    META("input_mean", mean ? mean : "0");
    META("input_std", std ? std : "1");
    META("step", step);
    META("epoch", epoch);
    META("seed", seed);
    if (opt) META("optimizer", opt);
    if (run) META("run", run);
    if (recipe) META("recipe", recipe);
    META("crc32c", crcs);
    uint32_t mcrc = 0;
    CLT_TRY(clt__checkpoint_meta_crc32c(keys, vals, nmeta, &mcrc));
    snprintf(meta_crc, sizeof meta_crc, "%08" PRIx32, mcrc);
    META(META_CRC_KEY, meta_crc); /* last: it covers every key above */
#undef META
    st = clt_st_write(path, ts, n, keys, vals, nmeta);
    if (st != CLT_OK) clt__fail(ctx, st, "%s", clt_last_errmsg());
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (st != CLT_OK && nev) clt_ctx_finish(ctx, CLT_WAIT_SAVE); /* reads into `host` */
    free(host);
    free(bhost);
    free(chost);
    free(amp_host);
    free(ts);
    free(mean);
    free(std);
    free(opt);
    free(spec);
    free(run);
    free(recipe);
    free(crcs);
    free(names);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

struct clt_checkpoint {
    clt_st_file *file;
    char path[1024];
    struct clt_checkpoint_info info;
    float *mean, *std;
    char **class_names; /* (classes) from "class_names", or NULL */
    size_t features;
    bool plain;     /* a state dict without cltrain's metadata (clt_checkpoint_open_weights) */
    bool checksums; /* "crc32c" present and every tensor matched it */
};

/* The optional "input_shape" ("C,H,W" or "T,C", written for models with a shaped input):
 * into info.input_shape, its product checked against "features". */
static clt_status parse_input_shape(clt_checkpoint *ck)
{
    const char *text = clt_st_meta(ck->file, "input_shape");
    if (!text) return CLT_OK;
    size_t prod = 1;
    int n = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char tok[24];
        uint64_t d = 0;
        if (n < 3 && len > 0 && len < sizeof tok) {
            memcpy(tok, p, len);
            tok[len] = '\0';
        } else {
            tok[0] = '\0';
        }
        if (!clt__parse_u64(tok, 1, INT32_MAX, &d)) {
            n = 0;
            break;
        }
        ck->info.input_shape[n++] = (size_t)d;
        prod *= (size_t)d;
        if (!comma) break;
        p = comma + 1;
    }
    if (n < 2 || prod != ck->features)
        return clt__fail(NULL, CLT_ERR_FORMAT,
                         "%s: metadata \"input_shape\" is \"%s\", expected 2 or 3 positive "
                         "integers whose product is the %zu features, e.g. \"1,28,28\"",
                         ck->path, text, ck->features);
    return CLT_OK;
}

void clt_checkpoint_close(clt_checkpoint *ck)
{
    if (!ck) return;
    clt_st_close(ck->file);
    for (int c = 0; ck->class_names && c < ck->info.classes; c++) free(ck->class_names[c]);
    free(ck->class_names);
    free(ck->mean);
    free(ck->std);
    free(ck);
}

static clt_status need_meta(const clt_checkpoint *ck, const char *key, const char **out)
{
    *out = clt_st_meta(ck->file, key);
    if (*out) return CLT_OK;
    return clt__fail(NULL, CLT_ERR_FORMAT,
                     "%s: not a cltrain checkpoint: __metadata__ has no \"%s\"", ck->path, key);
}

static clt_status parse_long(const clt_checkpoint *ck, const char *key, long long lo,
                             long long hi, long long *out)
{
    const char *s = NULL;
    int64_t v = 0;
    clt_status st = need_meta(ck, key, &s);
    if (st != CLT_OK) return st;
    if (!clt__parse_i64(s, lo, hi, &v))
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"%s\" is \"%s\", expected an integer "
                                               "in [%lld, %lld]", ck->path, key, s, lo, hi);
    *out = v;
    return CLT_OK;
}

/* A number (every feature gets it) or an array of `features` numbers. */
static clt_status parse_floats(const clt_checkpoint *ck, const char *key, size_t features,
                               float **out)
{
    clt_status st = CLT_OK;
    const char *s = NULL;
    clt__json *v = NULL;
    clt__json_error err;
    float *vals = NULL;
    CLT_TRY(need_meta(ck, key, &s));
    if (clt__json_parse(&v, s, strlen(s), &err) != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"%s\" is not JSON", ck->path, key);
    CLT_ALLOC(NULL, vals, features);
    if (v->type == CLT__JSON_NUMBER) {
        for (size_t i = 0; i < features; i++) vals[i] = (float)v->number;
    } else if (v->type == CLT__JSON_ARRAY && v->n == features) {
        for (size_t i = 0; i < features; i++) {
            if (v->items[i].type != CLT__JSON_NUMBER)
                CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"%s\"[%zu] is not a number",
                         ck->path, key, i);
            vals[i] = (float)v->items[i].number;
        }
    } else {
        CLT_FAIL(NULL, CLT_ERR_FORMAT,
                 "%s: metadata \"%s\" must be a number or an array of %zu numbers", ck->path, key,
                 features);
    }
    *out = vals;
    vals = NULL;
fail:
    clt__json_free(v);
    free(vals);
    return st;
}

/* Verifies the metadata against "crc32c_metadata" when present (files of other tools and of
 * cltrain before it have none: they open as before). */
static clt_status verify_meta_crc(const clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    const char *s = clt_st_meta(ck->file, META_CRC_KEY);
    int n = clt_st_meta_count(ck->file);
    const char **keys = NULL, **vals = NULL;
    if (!s) return CLT_OK;
    if (strlen(s) != 8 || strspn(s, "0123456789abcdefABCDEF") != 8)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"" META_CRC_KEY "\" is \"%.40s\", not 8 hex "
                 "digits: the file's metadata was changed after it was written", ck->path, s);
    CLT_ALLOC(NULL, keys, (size_t)n);
    CLT_ALLOC(NULL, vals, (size_t)n);
    for (int i = 0; i < n; i++) {
        keys[i] = clt_st_meta_key(ck->file, i);
        vals[i] = clt_st_meta(ck->file, keys[i]);
    }
    uint32_t want = (uint32_t)strtoul(s, NULL, 16), got = 0;
    CLT_TRY(clt__checkpoint_meta_crc32c(keys, vals, n, &got));
    if (got != want)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: its metadata was changed after it was written: the "
                 "CRC-32C of __metadata__ is %08" PRIx32 ", its \"" META_CRC_KEY "\" says %08"
                 PRIx32 "; the file was edited or corrupted", ck->path, got, want);
fail:
    free(keys);
    free(vals);
    return st;
}

/* Verifies every tensor against "crc32c" (when present): an object naming each tensor of the
 * file exactly once with 8 hex digits. */
static clt_status verify_crcs(clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    const char *s = clt_st_meta(ck->file, "crc32c");
    clt__json *v = NULL;
    clt__json_error err;
    if (!s) return CLT_OK;
    if (clt__json_parse(&v, s, strlen(s), &err) != CLT_OK || v->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"crc32c\" is not a JSON object", ck->path);
    for (size_t i = 0; i < v->n; i++) {
        const clt__json *h = &v->items[i];
        if (h->type != CLT__JSON_STRING || h->len != 8 ||
            strspn(h->str, "0123456789abcdefABCDEF") != 8)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"crc32c\" of \"%s\" is not 8 hex digits",
                     ck->path, v->keys[i]);
        if (!clt_st_find(ck->file, v->keys[i]))
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"crc32c\" names tensor \"%s\", which the "
                     "file does not hold", ck->path, v->keys[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(v->keys[j], v->keys[i]) == 0)
                CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"crc32c\" names tensor \"%s\" twice",
                         ck->path, v->keys[i]);
    }
    for (int i = 0; i < clt_st_count(ck->file); i++) {
        const clt_st_tensor *t = clt_st_get(ck->file, i);
        const clt__json *h = clt__json_get(v, t->name);
        if (!h)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\" has no checksum in \"crc32c\"",
                     ck->path, t->name);
        uint32_t want = (uint32_t)strtoul(h->str, NULL, 16);
        uint32_t got = clt__crc32c(0, t->data, t->nbytes);
        if (got != want)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\" is damaged: its bytes' CRC-32C is "
                     "%08" PRIx32 ", the file's \"crc32c\" says %08" PRIx32 "; the file was "
                     "changed or corrupted after it was written", ck->path, t->name, got, want);
    }
    ck->checksums = true;
fail:
    clt__json_free(v);
    return st;
}

/* An integer member of a JSON object, written as an integer, in [lo, hi]. */
static clt_status run_int(const clt_checkpoint *ck, const clt__json *obj, const char *where,
                          const char *key, long long lo, long long hi, long long *out)
{
    const clt__json *v = clt__json_get(obj, key);
    if (!v || v->type != CLT__JSON_NUMBER || !v->int_literal || v->integer < lo || v->integer > hi)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"%s\" needs \"%s\", an integer in "
                         "[%lld, %lld]", ck->path, where, key, lo, hi);
    *out = v->integer;
    return CLT_OK;
}

/* The optional "vocab" of a language model: a vocabulary clt_vocab_from_json reads, with one
 * symbol per class. */
static clt_status parse_vocab(clt_checkpoint *ck)
{
    clt_vocab *v = NULL;
    const char *s = clt_st_meta(ck->file, "vocab");
    if (!s) return CLT_OK;
    if (clt_vocab_from_json(&v, s, strlen(s)) != CLT_OK)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"vocab\": %s", ck->path,
                         clt_last_errmsg());
    size_t V = clt_vocab_size(v);
    clt_vocab_free(v);
    if (V != (size_t)ck->info.classes)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"vocab\" has %zu symbols, the "
                         "model %d classes", ck->path, V, ck->info.classes);
    ck->info.vocab = s;
    return CLT_OK;
}

/* The optional "class_names": a JSON array of `classes` strings (image folders' names). */
static clt_status parse_class_names(clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    clt__json *j = NULL;
    const char *s = clt_st_meta(ck->file, "class_names");
    if (!s) return CLT_OK;
    if (clt__json_parse(&j, s, strlen(s), NULL) != CLT_OK || j->type != CLT__JSON_ARRAY ||
        j->n != (size_t)ck->info.classes)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"class_names\" must be a JSON array of "
                 "%d strings (one per class)", ck->path, ck->info.classes);
    CLT_ALLOC(NULL, ck->class_names, j->n);
    for (size_t c = 0; c < j->n; c++) {
        if (j->items[c].type != CLT__JSON_STRING || strlen(j->items[c].str) != j->items[c].len)
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"class_names\"[%zu] is not a string",
                     ck->path, c);
        if (!(ck->class_names[c] = strdup(j->items[c].str)))
            CLT_FAIL(NULL, CLT_ERR_HOST_MEMORY, "out of host memory");
    }
    ck->info.class_names = (const char *const *)ck->class_names;
fail:
    clt__json_free(j);
    return st;
}

/* The metadata "run" (see json_run), when present. */
static clt_status parse_run(clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    struct clt_run_geometry *g = &ck->info.run;
    const char *s = clt_st_meta(ck->file, "run");
    clt__json *v = NULL;
    clt__json_error err;
    long long x = 0;
    if (!s) return CLT_OK;
    if (clt__json_parse(&v, s, strlen(s), &err) != CLT_OK || v->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\" is not a JSON object", ck->path);
    CLT_TRY(run_int(ck, v, "run", "batch_size", 1, INT64_MAX, &x));
    g->batch_size = (size_t)x;
    CLT_TRY(run_int(ck, v, "run", "accumulate", 1, INT32_MAX, &x));
    g->accumulate = (int)x;
    CLT_TRY(run_int(ck, v, "run", "steps_per_epoch", 1, INT64_MAX, &x));
    g->steps_per_epoch = (long)x;
    CLT_TRY(run_int(ck, v, "run", "total_steps", 0, INT64_MAX, &x));
    g->total_steps = (long)x;
    CLT_TRY(run_int(ck, v, "run", "epochs", 0, INT32_MAX, &x));
    g->epochs = (int)x;
    const clt__json *dl = clt__json_get(v, "drop_last"), *seed = clt__json_get(v, "dropout_seed"),
                    *data = clt__json_get(v, "data");
    if (!dl || dl->type != CLT__JSON_BOOL)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\" needs \"drop_last\", true or false",
                 ck->path);
    g->drop_last = dl->boolean;
    {
        uint64_t u = 0;
        if (!seed || seed->type != CLT__JSON_STRING ||
            !clt__parse_u64(seed->str, 0, UINT64_MAX, &u))
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\" needs \"dropout_seed\", a string "
                     "holding an integer in [0, %" PRIu64 "]", ck->path, UINT64_MAX);
        g->dropout_seed = (uint64_t)u;
    }
    if (!data || data->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\" needs \"data\", an object", ck->path);
    const clt__json *name = clt__json_get(data, "name"), *crc = clt__json_get(data, "crc32c");
    if (!name || name->type != CLT__JSON_STRING)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\".data needs \"name\", a string",
                 ck->path);
    snprintf(g->data_name, sizeof g->data_name, "%s", name->str);
    CLT_TRY(run_int(ck, data, "run\".data.\"", "train_samples", 1, INT64_MAX, &x));
    g->data_samples = (size_t)x;
    if (!crc || crc->type != CLT__JSON_STRING || crc->len != 8 ||
        strspn(crc->str, "0123456789abcdefABCDEF") != 8)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"run\".data needs \"crc32c\", 8 hex digits",
                 ck->path);
    g->data_crc32c = (uint32_t)strtoul(crc->str, NULL, 16);
    g->replicas = 1; /* absent in files from before data-parallel training */
    if (clt__json_get(v, "replicas")) {
        CLT_TRY(run_int(ck, v, "run", "replicas", 1, INT32_MAX, &x));
        g->replicas = (int)x;
    }
    g->present = true;
fail:
    clt__json_free(v);
    return st;
}

/* A boolean member of the metadata "recipe". */
static clt_status recipe_bool(const clt_checkpoint *ck, const clt__json *obj, const char *key,
                              bool *out)
{
    const clt__json *v = clt__json_get(obj, key);
    if (!v || v->type != CLT__JSON_BOOL)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" needs \"%s\", true or "
                         "false", ck->path, key);
    *out = v->boolean;
    return CLT_OK;
}

/* A number member of the metadata "recipe" in [lo, hi) (lo excluded too when `positive`), as
 * the flag that sets it accepts. */
static clt_status recipe_float(const clt_checkpoint *ck, const clt__json *obj, const char *key,
                               double lo, double hi, bool positive, float *out)
{
    const clt__json *v = clt__json_get(obj, key);
    bool ok = v && v->type == CLT__JSON_NUMBER && isfinite(v->number) && v->number >= lo &&
              v->number < hi && !(positive && v->number <= lo);
    if (!ok)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" needs \"%s\", a number "
                         "in %c%g, %g)", ck->path, key, positive ? '(' : '[', lo, hi);
    *out = (float)v->number;
    return CLT_OK;
}

/* A string member of the metadata "recipe" (its caller parses it). */
static clt_status recipe_string(const clt_checkpoint *ck, const clt__json *obj, const char *key,
                                const char **out)
{
    const clt__json *v = clt__json_get(obj, key);
    if (!v || v->type != CLT__JSON_STRING)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" needs \"%s\", a string",
                         ck->path, key);
    *out = v->str;
    return CLT_OK;
}

/* The metadata "recipe" (see json_recipe), when present: every member, each in the range its
 * flag accepts, the optimizer's as clt_optim_validate checks them. */
static clt_status parse_recipe(clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    struct clt_run_recipe *r = &ck->info.recipe;
    struct clt_optim_params *o = &r->optim;
    const char *s = clt_st_meta(ck->file, "recipe"), *name = NULL;
    clt__json *v = NULL;
    clt__json_error err;
    long long x = 0;
    if (!s) return CLT_OK;
    if (clt__json_parse(&v, s, strlen(s), &err) != CLT_OK || v->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" is not a JSON object", ck->path);
    CLT_TRY(recipe_string(ck, v, "optimizer", &name));
    if (clt_optim_parse_kind(name, &o->kind) != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\": %s", ck->path, clt_last_errmsg());
    CLT_TRY(recipe_string(ck, v, "schedule", &name));
    if (clt_optim_parse_schedule(name, &o->schedule) != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\": %s", ck->path, clt_last_errmsg());
    CLT_TRY(recipe_string(ck, v, "precision", &name));
    if (clt_dtype_parse(name, &r->precision) != CLT_OK ||
        (r->precision != CLT_DTYPE_F32 && r->precision != CLT_DTYPE_BF16 &&
         r->precision != CLT_DTYPE_F16))
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" has precision \"%s\", expected "
                 "f32, bf16 or f16", ck->path, name);
    CLT_TRY(recipe_float(ck, v, "lr", 0, INFINITY, true, &o->lr));
    CLT_TRY(recipe_float(ck, v, "momentum", 0, INFINITY, false, &o->momentum));
    CLT_TRY(recipe_float(ck, v, "dampening", 0, INFINITY, false, &o->dampening));
    CLT_TRY(recipe_bool(ck, v, "nesterov", &o->nesterov));
    CLT_TRY(recipe_float(ck, v, "beta1", 0, 1, false, &o->beta1));
    CLT_TRY(recipe_float(ck, v, "beta2", 0, 1, false, &o->beta2));
    CLT_TRY(recipe_float(ck, v, "eps", 0, INFINITY, true, &o->eps));
    CLT_TRY(recipe_float(ck, v, "weight_decay", 0, INFINITY, false, &o->weight_decay));
    CLT_TRY(recipe_float(ck, v, "gamma", 0, INFINITY, true, &o->gamma));
    CLT_TRY(recipe_float(ck, v, "min_lr", 0, INFINITY, false, &o->min_lr));
    /* written since clipping exists: a file without it was trained without */
    o->clip_grad = 0.0f;
    if (clt__json_get(v, "clip_grad"))
        CLT_TRY(recipe_float(ck, v, "clip_grad", 0, INFINITY, false, &o->clip_grad));
    CLT_TRY(recipe_float(ck, v, "label_smoothing", 0, 1, false, &r->label_smoothing));
    CLT_TRY(run_int(ck, v, "recipe", "warmup_steps", 0, INT32_MAX, &x));
    o->warmup_steps = (long)x;
    CLT_TRY(run_int(ck, v, "recipe", "step_size", 1, INT64_MAX, &x));
    o->step_size = (long)x;
    CLT_TRY(run_int(ck, v, "recipe", "total_steps", 1, INT64_MAX, &x));
    o->total_steps = (long)x;
    CLT_TRY(run_int(ck, v, "recipe", "epochs", 1, INT32_MAX, &x));
    r->epochs = (int)x;
    CLT_TRY(run_int(ck, v, "recipe", "max_steps", 0, INT64_MAX, &x));
    r->max_steps = (long)x;
    CLT_TRY(recipe_bool(ck, v, "shuffle", &r->shuffle));
    CLT_TRY(recipe_bool(ck, v, "normalize", &r->normalize));
    const clt__json *aug = clt__json_get(v, "augment");
    if (!aug || aug->type != CLT__JSON_OBJECT)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\" needs \"augment\", an object",
                 ck->path);
    CLT_TRY(recipe_bool(ck, aug, "flip", &r->augment.flip));
    CLT_TRY(run_int(ck, aug, "recipe\".augment.\"", "shift", 0, CLT_AUGMENT_MAX, &x));
    r->augment.shift = (int)x;
    CLT_TRY(run_int(ck, aug, "recipe\".augment.\"", "cutout", 0, CLT_AUGMENT_MAX, &x));
    r->augment.cutout = (int)x;
    if (clt_optim_validate(o) != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"recipe\": %s", ck->path, clt_last_errmsg());
    r->present = true;
fail:
    clt__json_free(v);
    return st;
}

/* The metadata against itself: the spec's last layer gives `classes` outputs (1 for
 * regression) on `features` inputs. */
static clt_status check_consistent(const clt_checkpoint *ck)
{
    clt_status st = CLT_OK;
    clt_spec spec = {0};
    const struct clt_checkpoint_info *in = &ck->info;
    if (in->task == CLT_TASK_REGRESSION && in->classes != 1)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata contradicts itself: task \"regression\" "
                 "with classes %d (a regression model has 1 output)", ck->path, in->classes);
    if (clt_spec_parse(in->model_text, in->classes, &spec) != CLT_OK ||
        clt_spec_validate(&spec, (int)ck->features, in->classes) != CLT_OK)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata contradicts itself: model \"%s\" with "
                 "features %zu and classes %d: %s", ck->path, in->model_text, ck->features,
                 in->classes, clt_last_errmsg());
fail:
    clt_spec_free(&spec);
    return st;
}

static clt_status open_any(clt_checkpoint **out, const char *path, bool allow_plain)
{
    clt_status st = CLT_OK;
    clt_checkpoint *ck = NULL;
    const char *s = NULL;
    long long v = 0;
    *out = NULL;
    CLT_ALLOC(NULL, ck, 1);
    snprintf(ck->path, sizeof ck->path, "%s", path);
    CLT_TRY(clt_st_open(&ck->file, path));
    CLT_TRY(verify_meta_crc(ck));
    CLT_TRY(verify_crcs(ck));
    const char *format = clt_st_meta(ck->file, "format");
    bool ours = clt_st_meta(ck->file, "model") || (format && strncmp(format, "cltrain", 7) == 0);
    if (!ours && allow_plain) {
        ck->plain = true;
        *out = ck;
        ck = NULL;
        goto fail;
    }
    if (format && strcmp(format, "cltrain-1") != 0)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"format\" is \"%s\": not a format this "
                 "cltrain reads (cltrain-1)%s", path, format,
                 strncmp(format, "cltrain-", 8) == 0 ? "; written by a newer cltrain?" : "");
    CLT_TRY(need_meta(ck, "model", &ck->info.model_text));
    CLT_TRY(parse_long(ck, "features", 1, INT32_MAX, &v));
    ck->features = (size_t)v;
    CLT_TRY(parse_input_shape(ck));
    CLT_TRY(parse_long(ck, "classes", 1, INT32_MAX, &v));
    ck->info.classes = (int)v;
    CLT_TRY(parse_long(ck, "step", 0, INT64_MAX, &v));
    ck->info.step = (long)v;
    CLT_TRY(parse_long(ck, "epoch", 0, INT32_MAX, &v));
    ck->info.epoch = (int)v;
    /* any uint64 (the CLI's --seed takes the full range) */
    CLT_TRY(need_meta(ck, "seed", &s));
    {
        uint64_t seed = 0;
        if (!clt__parse_u64(s, 0, UINT64_MAX, &seed))
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: metadata \"seed\" is \"%s\", expected an "
                     "integer in [0, %" PRIu64 "]", path, s, UINT64_MAX);
        ck->info.seed = (uint64_t)seed;
    }
    CLT_TRY(need_meta(ck, "task", &s));
    if (strcmp(s, "classification") == 0) ck->info.task = CLT_TASK_CLASSIFICATION;
    else if (strcmp(s, "regression") == 0) ck->info.task = CLT_TASK_REGRESSION;
    else CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: unknown task \"%s\"", path, s);
    float *scale = NULL;
    CLT_TRY(parse_floats(ck, "input_scale", 1, &scale));
    ck->info.norm.scale = scale[0];
    free(scale);
    CLT_TRY(parse_floats(ck, "input_mean", ck->features, &ck->mean));
    CLT_TRY(parse_floats(ck, "input_std", ck->features, &ck->std));
    for (size_t i = 0; i < ck->features; i++)
        if (!(ck->std[i] > 0))
            CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: input_std[%zu] is not positive", path, i);
    ck->info.norm.features = ck->features;
    ck->info.norm.mean = ck->mean;
    ck->info.norm.std = ck->std;
    CLT_TRY(check_consistent(ck));
    if (ck->info.task == CLT_TASK_CLASSIFICATION) CLT_TRY(parse_class_names(ck));
    CLT_TRY(parse_vocab(ck));
    CLT_TRY(parse_run(ck));
    CLT_TRY(parse_recipe(ck));
    *out = ck;
    ck = NULL;
fail:
    clt_checkpoint_close(ck);
    return st;
}

clt_status clt_checkpoint_open(clt_checkpoint **out, const char *path)
{
    return open_any(out, path, false);
}

clt_status clt_checkpoint_open_weights(clt_checkpoint **out, const char *path)
{
    return open_any(out, path, true);
}

bool clt_checkpoint_is_plain(const clt_checkpoint *ck)
{
    return ck->plain;
}

bool clt_checkpoint_has_checksums(const clt_checkpoint *ck)
{
    return ck->checksums;
}

clt_status clt_checkpoint_check_run(const clt_checkpoint *ck, const struct clt_run_geometry *now)
{
    const struct clt_run_geometry *was = &ck->info.run;
    char msg[2048];
    size_t k = 0;
    if (!was->present || !now->present) return CLT_OK;
#define DIFF(...)                                                                                  \
    do {                                                                                           \
        if (k < sizeof msg) k += (size_t)snprintf(msg + k, sizeof msg - k, __VA_ARGS__);           \
    } while (0)
    size_t E0 = was->batch_size * (size_t)was->accumulate,
           E1 = now->batch_size * (size_t)now->accumulate;
    if (E0 != E1) {
        if (was->accumulate == 1 && now->accumulate == 1)
            DIFF("; the checkpoint was trained with batch size %zu, this run asks for %zu (resume "
                 "with --batch-size %zu)", was->batch_size, now->batch_size, was->batch_size);
        else
            DIFF("; the checkpoint was trained with an effective batch of %zu (--batch-size %zu "
                 "--accumulate %d), this run asks for %zu (--batch-size %zu --accumulate %d)",
                 E0, was->batch_size, was->accumulate, E1, now->batch_size, now->accumulate);
    }
    if (was->data_samples != now->data_samples || was->data_crc32c != now->data_crc32c)
        DIFF("; the checkpoint was trained on %s (%zu training samples, data CRC-32C %08" PRIx32
             "), this run's data is %s (%zu, %08" PRIx32 ")", was->data_name, was->data_samples,
             was->data_crc32c, now->data_name, now->data_samples, now->data_crc32c);
    else if (E0 == E1 && was->steps_per_epoch != now->steps_per_epoch)
        DIFF("; the checkpoint has %ld steps per epoch%s, this run %ld (resume %s --drop-last)",
             was->steps_per_epoch, was->drop_last ? " (--drop-last)" : "", now->steps_per_epoch,
             was->drop_last ? "with" : "without");
    if (was->dropout_seed != now->dropout_seed)
        DIFF("; the checkpoint was trained with seed %" PRIu64 ", this run asks for %" PRIu64
             " (resume without --seed, or with --seed %" PRIu64 ")", was->dropout_seed,
             now->dropout_seed, was->dropout_seed);
#undef DIFF
    if (k == 0) return CLT_OK;
    return clt__fail(NULL, CLT_ERR_INVALID_ARG, "--resume %s: %s; or start a new run from its "
                     "weights with --init", ck->path, msg + 2);
}

struct clt_checkpoint_info clt_checkpoint_get_info(const clt_checkpoint *ck)
{
    return ck->info;
}

const char *clt_checkpoint_optimizer(const clt_checkpoint *ck)
{
    return clt_st_meta(ck->file, "optimizer");
}

/* A tensor that holds variances or second moments (batchnorm's running_var, Adam's exp_avg_sq),
 * which cannot be negative. */
static bool nonnegative_tensor(const char *name)
{
    static const char *const suffixes[] = {".running_var", ".exp_avg_sq"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && strcmp(name + n - k, suffixes[i]) == 0) return true;
    }
    return false;
}

/* The largest magnitude a loaded weight or statistic may have. float32 ends at 3.4e38: a
 * weight beyond 1e30 overflows as soon as it meets an activation of 3.4e8 or is summed with a
 * few such products, so the first forward pass turns it into inf and the loss into NaN; no
 * trained network holds one (PyTorch's initialisations give |w| < 1, training rarely 1e3). The
 * file is refused naming the tensor, not trained into a NaN blamed on the learning rate.
 * Optimizer state (Adam's second moments are squared gradients) is only checked finite. */
#define WEIGHT_MAX 1e30f

/* The values of tensor `name`: finite everywhere, at most `bound` in magnitude and, for a
 * variance or second moment, not negative. CLT_ERR_NUMERIC naming the tensor, the first bad
 * element and its value. */
static clt_status check_domain(const clt_checkpoint *ck, const char *name, const float *v,
                               size_t n, const char *what, float bound)
{
    bool nonneg = nonnegative_tensor(name);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return clt__fail(NULL, CLT_ERR_NUMERIC, "%s: tensor \"%s\" holds %s at element %zu "
                             "(of %zu): the %s not usable", ck->path, name,
                             isnan(v[i]) ? "NaN" : "an infinity", i, n, what);
        if (fabsf(v[i]) > bound)
            return clt__fail(NULL, CLT_ERR_NUMERIC, "%s: tensor \"%s\" holds %g at element %zu "
                             "(of %zu): beyond %g, a value overflows float32 in the forward "
                             "pass (the loss would become NaN); the %s not usable", ck->path,
                             name, (double)v[i], i, n, (double)bound, what);
        if (nonneg && v[i] < 0)
            return clt__fail(NULL, CLT_ERR_NUMERIC, "%s: tensor \"%s\" holds %g at element %zu "
                             "(of %zu): a variance cannot be negative; the %s not usable",
                             ck->path, name, (double)v[i], i, n, what);
    }
    return CLT_OK;
}

/* Copies tensor `name`, which must be F32 with the parameter's shape, finite, at most `bound`
 * in magnitude (and not negative for a second moment), into dst. */
static clt_status take(const clt_checkpoint *ck, const char *name,
                       const struct clt_param_info *pi, float *dst, float bound)
{
    const clt_st_tensor *t = clt_st_find(ck->file, name);
    if (!t) return clt__fail(NULL, CLT_ERR_FORMAT, "%s: no tensor \"%s\"", ck->path, name);
    bool same = t->dtype == CLT_DTYPE_F32 && t->ndim == pi->ndim;
    for (int d = 0; same && d < pi->ndim; d++) same = t->shape[d] == (int64_t)pi->dims[d];
    if (!same) {
        char want[96] = "[", got[64] = "";
        size_t used = 0, wused = 1;
        for (int d = 0; d < pi->ndim && wused < sizeof want; d++)
            wused += (size_t)snprintf(want + wused, sizeof want - wused, "%s%zu%s", d ? ", " : "",
                                      pi->dims[d], d + 1 == pi->ndim ? "]" : "");
        for (int d = 0; d < t->ndim && used < sizeof got; d++)
            used += (size_t)snprintf(got + used, sizeof got - used, "%s%" PRId64, d ? ", " : "",
                                     t->shape[d]);
        return clt__fail(NULL, CLT_ERR_FORMAT,
                         "%s: tensor \"%s\" is %s [%s], the model needs f32 %s", ck->path, name,
                         clt_st_dtype_name(t->dtype), got, want);
    }
    memcpy(dst, t->data, t->nbytes);
    return check_domain(ck, name, dst, pi->numel, bound < INFINITY ? "weights are" : "state is",
                        bound);
}

/* Copies buffer bi's tensor into its place in f32 or i64: F32 (C) with finite values, or I64
 * with shape [] (PyTorch's num_batches_tracked) and a non-negative count. */
static clt_status take_buffer(const clt_checkpoint *ck, const struct clt_buffer_info *bi,
                              float *f32, int64_t *i64)
{
    const clt_st_tensor *t = clt_st_find(ck->file, bi->name);
    if (!t)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: no tensor \"%s\" (a buffer of the model's "
                         "batchnorm layer, as in PyTorch's state_dict); the file was written for "
                         "a model without it", ck->path, bi->name);
    if (bi->i64) {
        int64_t v = 0;
        if (t->dtype != CLT_ST_I64 || t->ndim != 0 || t->nbytes != sizeof v)
            return clt__fail(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\" is %s with %d "
                             "dimension%s, the model needs i64 with shape [] (PyTorch's "
                             "num_batches_tracked)", ck->path, bi->name,
                             clt_st_dtype_name(t->dtype), t->ndim, t->ndim == 1 ? "" : "s");
        memcpy(&v, t->data, sizeof v);
        if (v < 0)
            return clt__fail(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\" is %" PRId64 ", a count "
                             "cannot be negative", ck->path, bi->name, v);
        i64[bi->offset] = v;
        return CLT_OK;
    }
    if (t->dtype != CLT_DTYPE_F32 || t->ndim != 1 || t->shape[0] != (int64_t)bi->numel)
        return clt__fail(NULL, CLT_ERR_FORMAT, "%s: tensor \"%s\" is %s with %d dimension%s, "
                         "the model needs f32 [%zu]", ck->path, bi->name,
                         clt_st_dtype_name(t->dtype), t->ndim, t->ndim == 1 ? "" : "s",
                         bi->numel);
    float *dst = f32 + bi->offset;
    memcpy(dst, t->data, t->nbytes);
    return check_domain(ck, bi->name, dst, bi->numel, "statistics are", WEIGHT_MAX);
}

clt_status clt__checkpoint_read_model(const clt_checkpoint *ck,
                                      const struct clt_param_info *params, int nparams,
                                      const struct clt_buffer_info *buffers, int nbuffers,
                                      float *host, float *bhost, int64_t *chost)
{
    clt_status st = CLT_OK;
    for (int i = 0; i < nparams; i++)
        CLT_TRY(take(ck, params[i].name, &params[i], host + params[i].offset, WEIGHT_MAX));
    for (int i = 0; i < nbuffers; i++) CLT_TRY(take_buffer(ck, &buffers[i], bhost, chost));
    /* a state dict is the model's, whole: a tensor the model lacks means another model */
    for (int k = 0; ck->plain && k < clt_st_count(ck->file); k++) {
        const char *name = clt_st_get(ck->file, k)->name;
        bool known = false;
        for (int i = 0; !known && i < nparams; i++) known = strcmp(params[i].name, name) == 0;
        for (int i = 0; !known && i < nbuffers; i++) known = strcmp(buffers[i].name, name) == 0;
        if (!known)
            CLT_FAIL(NULL, CLT_ERR_FORMAT,
                     "%s: tensor \"%s\" is not a parameter of the model (%d parameter tensors, "
                     "named as nn.Sequential's state_dict: \"%s\", ...); check --model against "
                     "the network that wrote the file",
                     ck->path, name, nparams, nparams ? params[0].name : "");
    }
fail:
    return st;
}

clt_status clt__checkpoint_read_optim_state(const clt_checkpoint *ck, const char *state,
                                            const struct clt_param_info *params, int nparams,
                                            float *host)
{
    clt_status st = CLT_OK;
    for (int i = 0; i < nparams; i++) {
        char tname[CLT_ST_NAME_MAX];
        snprintf(tname, sizeof tname, "optim.%s.%s", params[i].name, state);
        CLT_TRY(take(ck, tname, &params[i], host + params[i].offset, INFINITY));
    }
fail:
    return st;
}

/* The model's parameter and buffer descriptions as arrays (*pis, *bis; the caller frees them). */
static clt_status model_layout(const clt_model *m, struct clt_param_info **pis,
                               struct clt_buffer_info **bis)
{
    clt_status st = CLT_OK;
    int np = clt_model_param_count(m), nb = clt_model_buffer_count(m);
    *bis = NULL;
    CLT_ALLOC(NULL, *pis, np);
    CLT_ALLOC(NULL, *bis, nb);
    for (int i = 0; i < np; i++) (*pis)[i] = *clt_model_param_info(m, i);
    for (int i = 0; i < nb; i++) (*bis)[i] = *clt_model_buffer_info(m, i);
fail:
    return st;
}

clt_status clt_checkpoint_load_model(const clt_checkpoint *ck, clt_model *m)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    float *host = NULL, *bhost = NULL;
    int64_t *chost = NULL;
    struct clt_param_info *pis = NULL;
    struct clt_buffer_info *bis = NULL;
    if (!ck->plain && ck->features != clt_model_in_features(m))
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: saved for %zu input features, the model has %zu",
                 ck->path, ck->features, clt_model_in_features(m));
    size_t shape[3];
    int ndim = clt_model_input_shape(m, shape);
    if (!ck->plain && ck->info.input_shape[0] &&
        memcmp(shape, ck->info.input_shape, sizeof shape) != 0) {
        char want[96], got[96];
        snprintf(want, sizeof want, "%zux%zux%zu", ck->info.input_shape[0],
                 ck->info.input_shape[1], ck->info.input_shape[2]);
        snprintf(got, sizeof got, "%zux%zux%zu", shape[0], shape[1], shape[2]);
        if (!ck->info.input_shape[2]) *strrchr(want, 'x') = '\0';
        for (int i = ndim; i < 3; i++) *strrchr(got, 'x') = '\0';
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: saved for inputs of shape %s, the model has %s",
                 ck->path, want, got);
    }
    int nb = clt_model_buffer_count(m);
    size_t nbf = 0, nbi = 0;
    clt_model_buffer_sizes(m, &nbf, &nbi);
    CLT_TRY(model_layout(m, &pis, &bis));
    CLT_ALLOC(ctx, host, clt_tensor_numel(clt_model_params(m)));
    CLT_ALLOC(ctx, bhost, nbf ? nbf : 1); /* zeroed: the unnamed scratch */
    CLT_ALLOC(ctx, chost, nbi ? nbi : 1);
    CLT_TRY(clt__checkpoint_read_model(ck, pis, clt_model_param_count(m), bis, nb, host, bhost,
                                       chost));
    CLT_TRY(clt_model_write_params(m, host));
    if (nb) CLT_TRY(clt_model_write_buffers(m, bhost, chost));
fail:
    if (st != CLT_OK) clt__fail(ctx, st, "%s", clt_last_errmsg());
    free(host);
    free(bhost);
    free(chost);
    free(pis);
    free(bis);
    return st;
}

clt_status clt_checkpoint_load_optim(const clt_checkpoint *ck, clt_optim *o, const clt_model *m)
{
    clt_status st = CLT_OK;
    float *host = NULL;
    struct clt_param_info *pis = NULL;
    struct clt_buffer_info *bis = NULL;
    cl_event ev = NULL;
    clt_ctx *ctx = clt_model_ctx(m);
    const char *saved = clt_checkpoint_optimizer(ck);
    const char *name = clt_optim_kind_name(clt_optim_get_params(o)->kind);
    char want[64];
    snprintf(want, sizeof want, "\"name\":\"%s\"", name);
    if (!saved || !strstr(saved, want))
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: saved with optimizer %s, this run uses %s; use --init "
                                      "to start from its weights with a fresh optimizer",
                 ck->path, saved ? saved : "(none)", name);
    size_t P = clt_tensor_numel(clt_model_params(m));
    CLT_ALLOC(ctx, host, P);
    CLT_TRY(model_layout(m, &pis, &bis));
    for (int s = 0; s < clt_optim_state_count(o); s++) {
        const char *state = NULL;
        clt_tensor *t = clt_optim_state(o, s, &state);
        CLT_TRY(clt__checkpoint_read_optim_state(ck, state, pis, clt_model_param_count(m), host));
        CLT_TRY(clt_tensor_write(t, host, false, &ev));
        CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, 1, &ev));
        clReleaseEvent(ev);
        ev = NULL;
    }
    clt_optim_set_steps(o, ck->info.step);
fail:
    if (st != CLT_OK) clt__fail(ctx, st, "%s", clt_last_errmsg());
    if (ev) clReleaseEvent(ev);
    free(host);
    free(pis);
    free(bis);
    return st;
}

clt_status clt_checkpoint_load_scaler(const clt_checkpoint *ck, clt_tensor *state)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = state ? clt_tensor_ctx(state) : NULL;
    cl_event ev = NULL;
    const clt_st_tensor *t = clt_st_find(ck->file, "amp.scaler_state");
    if (!state && t)
        CLT_FAIL(NULL, CLT_ERR_FORMAT, "%s: the checkpoint holds a loss-scaler state "
                 "(\"amp.scaler_state\"): it was saved by an fp16 run; resume with --precision "
                 "fp16, or start a new run from its weights with --init", ck->path);
    if (!state) goto fail;
    if (!t)
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: no loss-scaler state (\"amp.scaler_state\"): it was "
                                      "not saved by an fp16 run; use --init to start from its "
                                      "weights", ck->path);
    if (t->dtype != CLT_DTYPE_I32 || t->ndim != 1 || (size_t)t->shape[0] != clt_tensor_numel(state))
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: tensor \"amp.scaler_state\" must be i32 [%zu]",
                 ck->path, clt_tensor_numel(state));
    CLT_TRY(clt_tensor_write(state, t->data, false, &ev));
    CLT_TRY(clt_ctx_wait(ctx, CLT_WAIT_SETUP, 1, &ev));
fail:
    if (ev) clReleaseEvent(ev);
    return st;
}
