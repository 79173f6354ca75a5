/* Checkpoints: the model's parameters named as PyTorch's nn.Sequential state_dict, optimizer
 * state as extra tensors, and the run's metadata, in a safetensors file written atomically; and
 * loading with every name, dtype and shape checked against the model. */
#include "cltrain/checkpoint.h"

#include "internal.h"
#include "io/json.h"

#include "cltrain/safetensors.h"

#include <errno.h>
#include <inttypes.h>
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

clt_status clt_checkpoint_save(const char *path, clt_model *m, const clt_optim *optim,
                               const struct clt_checkpoint_info *info)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    int np = clt_model_param_count(m), ns = optim ? clt_optim_state_count(optim) : 0;
    size_t P = clt_tensor_numel(clt_model_params(m));
    float *host = NULL;
    clt_st_tensor *ts = NULL;
    cl_event ev[4] = {0};
    cl_uint nev = 0;
    char *mean = NULL, *std = NULL, *opt = NULL, *spec = NULL;
    char scale[32], classes[16], step[32], epoch[16], seed[32], features[32];

    const clt_tensor *amp = info->scaler_state;
    size_t amp_n = amp ? clt_tensor_numel(amp) : 0;
    int32_t *amp_host = NULL;
    CLT_ALLOC(ctx, host, P * (size_t)(1 + ns));
    CLT_ALLOC(ctx, ts, np * (1 + ns) + 1);
    if (amp) {
        if (clt_tensor_dtype(amp) != CLT_DTYPE_I32)
            CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "checkpoint: the scaler state must be i32");
        CLT_ALLOC(ctx, amp_host, amp_n);
        CLT_TRY(clt_tensor_read(amp, amp_host, false, &ev[nev++]));
    }
    CLT_TRY(clt_tensor_read(clt_model_params(m), host, false, &ev[nev++]));
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
    snprintf(scale, sizeof scale, "%.9g", (double)nm->scale);
    snprintf(classes, sizeof classes, "%d", info->classes);
    snprintf(step, sizeof step, "%ld", info->step);
    snprintf(epoch, sizeof epoch, "%d", info->epoch);
    snprintf(seed, sizeof seed, "%" PRIu64, info->seed);
    snprintf(features, sizeof features, "%zu", clt_model_in_features(m));
    const char *keys[12], *vals[12];
    int nmeta = 0;
#define META(k, v) (keys[nmeta] = (k), vals[nmeta++] = (v))
    META("format", "cltrain-1");
    META("model", spec);
    META("task", info->task == CLT_TASK_REGRESSION ? "regression" : "classification");
    META("features", features);
    META("classes", classes);
    META("input_scale", scale);
    META("input_mean", mean ? mean : "0");
    META("input_std", std ? std : "1");
    META("step", step);
    META("epoch", epoch);
    META("seed", seed);
    if (opt) META("optimizer", opt);
#undef META
    st = clt_st_write(path, ts, n, keys, vals, nmeta);
    if (st != CLT_OK) clt__fail(ctx, st, "%s", clt_last_errmsg());
fail:
    for (cl_uint i = 0; i < nev; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    if (st != CLT_OK && nev) clt_ctx_finish(ctx, CLT_WAIT_SAVE); /* reads into `host` */
    free(host);
    free(amp_host);
    free(ts);
    free(mean);
    free(std);
    free(opt);
    free(spec);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

struct clt_checkpoint {
    clt_st_file *file;
    char path[1024];
    struct clt_checkpoint_info info;
    float *mean, *std;
    size_t features;
};

void clt_checkpoint_close(clt_checkpoint *ck)
{
    if (!ck) return;
    clt_st_close(ck->file);
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
    char *end = NULL;
    clt_status st = need_meta(ck, key, &s);
    if (st != CLT_OK) return st;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
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

clt_status clt_checkpoint_open(clt_checkpoint **out, const char *path)
{
    clt_status st = CLT_OK;
    clt_checkpoint *ck = NULL;
    const char *s = NULL;
    long long v = 0;
    *out = NULL;
    CLT_ALLOC(NULL, ck, 1);
    snprintf(ck->path, sizeof ck->path, "%s", path);
    CLT_TRY(clt_st_open(&ck->file, path));
    CLT_TRY(need_meta(ck, "model", &ck->info.model_text));
    CLT_TRY(parse_long(ck, "features", 1, INT32_MAX, &v));
    ck->features = (size_t)v;
    CLT_TRY(parse_long(ck, "classes", 1, INT32_MAX, &v));
    ck->info.classes = (int)v;
    CLT_TRY(parse_long(ck, "step", 0, INT64_MAX, &v));
    ck->info.step = (long)v;
    CLT_TRY(parse_long(ck, "epoch", 0, INT32_MAX, &v));
    ck->info.epoch = (int)v;
    /* any uint64 (the CLI's --seed takes the full range) */
    CLT_TRY(need_meta(ck, "seed", &s));
    {
        char *end = NULL;
        errno = 0;
        unsigned long long seed = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] < '0' || s[0] > '9')
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
    *out = ck;
    ck = NULL;
fail:
    clt_checkpoint_close(ck);
    return st;
}

struct clt_checkpoint_info clt_checkpoint_get_info(const clt_checkpoint *ck)
{
    return ck->info;
}

const char *clt_checkpoint_optimizer(const clt_checkpoint *ck)
{
    return clt_st_meta(ck->file, "optimizer");
}

/* Copies tensor `name`, which must be F32 with the parameter's shape, into dst. */
static clt_status take(const clt_checkpoint *ck, const char *name,
                       const struct clt_param_info *pi, float *dst)
{
    const clt_st_tensor *t = clt_st_find(ck->file, name);
    if (!t) return clt__fail(NULL, CLT_ERR_FORMAT, "%s: no tensor \"%s\"", ck->path, name);
    bool same = t->dtype == CLT_DTYPE_F32 && t->ndim == pi->ndim;
    for (int d = 0; same && d < pi->ndim; d++) same = t->shape[d] == (int64_t)pi->dims[d];
    if (!same) {
        char want[64], got[64] = "";
        size_t used = 0;
        if (pi->ndim == 2) snprintf(want, sizeof want, "[%zu, %zu]", pi->dims[0], pi->dims[1]);
        else snprintf(want, sizeof want, "[%zu]", pi->dims[0]);
        for (int d = 0; d < t->ndim && used < sizeof got; d++)
            used += (size_t)snprintf(got + used, sizeof got - used, "%s%" PRId64, d ? ", " : "",
                                     t->shape[d]);
        return clt__fail(NULL, CLT_ERR_FORMAT,
                         "%s: tensor \"%s\" is %s [%s], the model needs f32 %s", ck->path, name,
                         clt_dtype_name(t->dtype), got, want);
    }
    memcpy(dst, t->data, t->nbytes);
    return CLT_OK;
}

clt_status clt_checkpoint_load_model(const clt_checkpoint *ck, clt_model *m)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_model_ctx(m);
    float *host = NULL;
    if (ck->features != clt_model_in_features(m))
        CLT_FAIL(ctx, CLT_ERR_FORMAT, "%s: saved for %zu input features, the model has %zu",
                 ck->path, ck->features, clt_model_in_features(m));
    CLT_ALLOC(ctx, host, clt_tensor_numel(clt_model_params(m)));
    for (int i = 0; i < clt_model_param_count(m); i++) {
        const struct clt_param_info *pi = clt_model_param_info(m, i);
        CLT_TRY(take(ck, pi->name, pi, host + pi->offset));
    }
    CLT_TRY(clt_model_write_params(m, host));
fail:
    if (st != CLT_OK) clt__fail(ctx, st, "%s", clt_last_errmsg());
    free(host);
    return st;
}

clt_status clt_checkpoint_load_optim(const clt_checkpoint *ck, clt_optim *o, const clt_model *m)
{
    clt_status st = CLT_OK;
    float *host = NULL;
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
    for (int s = 0; s < clt_optim_state_count(o); s++) {
        const char *state = NULL;
        clt_tensor *t = clt_optim_state(o, s, &state);
        for (int i = 0; i < clt_model_param_count(m); i++) {
            const struct clt_param_info *pi = clt_model_param_info(m, i);
            char tname[CLT_ST_NAME_MAX];
            snprintf(tname, sizeof tname, "optim.%s.%s", pi->name, state);
            CLT_TRY(take(ck, tname, pi, host + pi->offset));
        }
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
    return st;
}

clt_status clt_checkpoint_load_scaler(const clt_checkpoint *ck, clt_tensor *state)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(state);
    cl_event ev = NULL;
    const clt_st_tensor *t = clt_st_find(ck->file, "amp.scaler_state");
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
