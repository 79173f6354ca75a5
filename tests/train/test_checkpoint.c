/* Tests of checkpoints (src/train/checkpoint.c): a save/open round trip of weights, optimizer state
 * and metadata; the tensor names PyTorch and the loader expect; loading refuses damaged or
 * foreign files (truncated, header past the end, a missing tensor, a wrong shape or dtype, no
 * cltrain metadata) with CLT_ERR_FORMAT and a one-line message; resuming with another
 * optimizer is refused; saves are atomic. No GEMM runs here (optimizer steps are driven with
 * gradients written by hand), so these tests are quick. */
#include "common.h"

#include "cltrain/checkpoint.h"
#include "cltrain/model.h"
#include "cltrain/optim.h"
#include "cltrain/spec.h"
#include "cltrain/train.h"
#include "io/crc32c.h"
#include "io/safetensors_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IN = 4, H = 6, N = 3, P = H * IN + H + N * H + N };
static const char *const SPEC = "linear 6, relu, linear 3";

static clt_model *make_model_out(clt_ctx *ctx, const char *text, size_t in, size_t out,
                                 uint64_t seed)
{
    clt_spec s = {0};
    ck_assert_msg(clt_spec_parse(text, 0, &s) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_model_params p = clt_model_default_params();
    p.seed = seed;
    p.max_batch = 4;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, in, out, &p));
    clt_spec_free(&s);
    return m;
}

static clt_model *make_model(clt_ctx *ctx, const char *text, size_t in, uint64_t seed)
{
    return make_model_out(ctx, text, in, N, seed);
}

/* An optimizer of `kind` on m's parameters after `steps` steps with random gradients. */
static clt_optim *stepped_optim(clt_model *m, tc_rng *r, clt_optim_kind kind, float momentum,
                                int steps)
{
    clt_ctx *ctx = clt_model_ctx(m);
    struct clt_optim_params op = clt_optim_default_params(kind);
    op.momentum = momentum;
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, clt_model_params(m), &op));
    float g[P];
    for (int s = 0; s < steps; s++) {
        tc_fill_nonzero(r, g, P, 0.01f, 1.0f);
        tc_write(clt_model_grads(m), g);
        TC_OK(ctx, clt_optim_step(o, clt_model_grads(m)));
    }
    return o;
}

static float *read_all(const clt_tensor *t)
{
    size_t n = clt_tensor_numel(t);
    float *h = malloc(n * sizeof *h);
    ck_assert_ptr_nonnull(h);
    tc_read(t, h);
    return h;
}

static void one_line(const char *msg)
{
    ck_assert_msg(msg && *msg, "empty message");
    ck_assert_msg(!strchr(msg, '\n'), "message spans several lines: %s", msg);
}

/* ---- round trip --------------------------------------------------------------------------- */

/* Saves model + optimizer + metadata, reopens: every field and every bit comes back; the file
 * holds exactly the expected tensors with PyTorch's names and shapes. */
static void round_trip(clt_ctx *ctx, tc_rng *r, const char *dir, clt_optim_kind kind,
                       float momentum, const char *const *states, int nstates)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    clt_model *m = make_model(ctx, SPEC, IN, 3);
    clt_optim *o = stepped_optim(m, r, kind, momentum, 3);
    ck_assert_int_eq(clt_optim_state_count(o), nstates);
    float mean[IN], sd[IN];
    for (int f = 0; f < IN; f++) {
        mean[f] = (float)tc_uniform(r, -1, 1);
        sd[f] = (float)tc_uniform(r, 0.1, 3);
    }
    struct clt_checkpoint_info info = {
        .model_text = SPEC,
        .norm = {.features = IN, .scale = 1.0f / 255.0f, .mean = mean, .std = sd},
        .classes = N,
        .task = CLT_TASK_CLASSIFICATION,
        .step = 17,
        .epoch = 2,
        .seed = UINT64_MAX, /* every seed the CLI accepts must read back */
    };
    TC_OK(ctx, clt_checkpoint_save(path, m, o, &info));
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1); /* no temporary file left */

    /* the file as a plain safetensors file */
    clt_st_file *f = NULL;
    ck_assert_msg(clt_st_open(&f, path) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_int_eq(clt_st_count(f), 4 * (1 + nstates));
    static const char *const names[] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    static const int64_t shapes[4][2] = {{H, IN}, {H, 0}, {N, H}, {N, 0}};
    float *params = read_all(clt_model_params(m));
    for (int s = -1; s < nstates; s++) {
        float *state = s < 0 ? NULL : read_all(clt_optim_state(o, s, NULL));
        const char *sname = NULL;
        if (s >= 0) {
            clt_optim_state(o, s, &sname);
            ck_assert_str_eq(sname, states[s]);
        }
        size_t off = 0;
        for (int i = 0; i < 4; i++) {
            char name[256];
            if (s < 0)
                snprintf(name, sizeof name, "%s", names[i]);
            else
                snprintf(name, sizeof name, "optim.%s.%s", names[i], states[s]);
            const clt_st_tensor *t = clt_st_find(f, name);
            ck_assert_msg(t != NULL, "no tensor \"%s\"", name);
            ck_assert_int_eq(t->dtype, CLT_DTYPE_F32);
            ck_assert_int_eq(t->ndim, shapes[i][1] ? 2 : 1);
            ck_assert_int_eq(t->shape[0], shapes[i][0]);
            if (shapes[i][1]) ck_assert_int_eq(t->shape[1], shapes[i][1]);
            size_t numel = (size_t)(shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1));
            ck_assert_uint_eq(t->nbytes, numel * sizeof(float));
            const float *want = (s < 0 ? params : state) + off;
            ck_assert_msg(memcmp(t->data, want, t->nbytes) == 0, "\"%s\": other bits", name);
            off += numel;
        }
        free(state);
    }
    ck_assert_str_eq(clt_st_meta(f, "format"), "cltrain-1");
    ck_assert_str_eq(clt_st_meta(f, "features"), "4");
    ck_assert_str_eq(clt_st_meta(f, "task"), "classification");
    ck_assert_str_eq(clt_st_meta(f, "seed"), "18446744073709551615");
    clt_st_close(f);

    /* through the checkpoint API */
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_checkpoint_info got = clt_checkpoint_get_info(ck);
    ck_assert_str_eq(got.model_text, SPEC);
    ck_assert_int_eq(got.classes, N);
    ck_assert_int_eq(got.task, CLT_TASK_CLASSIFICATION);
    ck_assert_int_eq(got.step, 17);
    ck_assert_int_eq(got.epoch, 2);
    ck_assert_uint_eq(got.seed, UINT64_MAX);
    ck_assert_uint_eq(got.norm.features, IN);
    ck_assert(got.norm.scale == 1.0f / 255.0f);
    ck_assert_msg(memcmp(got.norm.mean, mean, sizeof mean) == 0, "input_mean changed");
    ck_assert_msg(memcmp(got.norm.std, sd, sizeof sd) == 0, "input_std changed");
    char *desc = clt_optim_describe(clt_optim_get_params(o));
    ck_assert_ptr_nonnull(desc);
    ck_assert_ptr_nonnull(clt_checkpoint_optimizer(ck));
    ck_assert_str_eq(clt_checkpoint_optimizer(ck), desc);
    free(desc);

    /* into a model and an optimizer born elsewhere */
    clt_model *m2 = make_model(ctx, SPEC, IN, 99);
    clt_optim *o2 = stepped_optim(m2, r, kind, momentum, 0);
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    TC_OK(ctx, clt_checkpoint_load_optim(ck, o2, m2));
    ck_assert_int_eq(clt_optim_steps(o2), 17);
    float *p2 = read_all(clt_model_params(m2));
    ck_assert_msg(memcmp(params, p2, P * sizeof *p2) == 0, "weights: other bits after loading");
    for (int s = 0; s < nstates; s++) {
        float *a = read_all(clt_optim_state(o, s, NULL)),
              *b = read_all(clt_optim_state(o2, s, NULL));
        ck_assert_msg(memcmp(a, b, P * sizeof *a) == 0, "state %s: other bits", states[s]);
        free(a);
        free(b);
    }
    free(p2);
    free(params);
    clt_checkpoint_close(ck);
    clt_optim_free(o);
    clt_optim_free(o2);
    clt_model_free(m);
    clt_model_free(m2);
    remove(path);
}

/* A model with batchnorm: its running statistics and num_batches_tracked are saved with
 * PyTorch's names and dtypes (F32 (C); I64 with shape []) and restored exactly by
 * clt_checkpoint_load_model; a state dict without them is refused naming the tensor, and a plain
 * state dict with them loads. */
START_TEST(test_batchnorm_buffers)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], path[4096], plain[4096], bare[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/bn.safetensors", dir);
    snprintf(plain, sizeof plain, "%s/plain.safetensors", dir);
    snprintf(bare, sizeof bare, "%s/bare.safetensors", dir);
    const char *spec = "linear 5, batchnorm, relu, linear 3";
    clt_model *m = make_model(ctx, spec, IN, 1);
    size_t xd[2] = {4, IN};
    clt_tensor *xt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER));
    float x[4 * IN];
    for (int step = 0; step < 3; step++) {
        tc_fill_nonzero(&r, x, 4 * IN, 0.1f, 2.0f);
        tc_write(xt, x);
        TC_OK(ctx, clt_model_forward(m, xt, true, (uint64_t)step, &out));
    }
    ck_assert_int_eq(clt_model_buffer_count(m), 3);
    size_t nbf = 0, nbi = 0;
    clt_model_buffer_sizes(m, &nbf, &nbi);
    float *b1 = calloc(nbf, sizeof *b1), *b2 = calloc(nbf, sizeof *b2);
    int64_t c1 = 0, c2 = 0;
    ck_assert(b1 && b2 && nbi == 1);
    TC_OK(ctx, clt_model_read_buffers(m, b1, &c1, CLT_WAIT_READ));
    ck_assert_int_eq(c1, 3);
    struct clt_checkpoint_info info = {
        .norm = {.features = IN, .scale = 1.0f}, .classes = N, .task = CLT_TASK_CLASSIFICATION};
    TC_OK(ctx, clt_checkpoint_save(path, m, NULL, &info));

    /* the file: PyTorch's names, dtypes and shapes */
    clt_st_file *f = NULL;
    TC_OK(NULL, clt_st_open(&f, path));
    const clt_st_tensor *t = clt_st_find(f, "1.num_batches_tracked");
    ck_assert_ptr_nonnull(t);
    ck_assert(t->dtype == CLT_ST_I64 && t->ndim == 0 && t->nbytes == 8);
    int64_t v = 0;
    memcpy(&v, t->data, 8);
    ck_assert_int_eq(v, 3);
    t = clt_st_find(f, "1.running_var");
    ck_assert(t && t->dtype == CLT_DTYPE_F32 && t->ndim == 1 && t->shape[0] == 5);
    ck_assert_ptr_nonnull(clt_st_find(f, "1.running_mean"));
    ck_assert_ptr_null(clt_st_find(f, "1.stats")); /* scratch is not saved */
    /* the same tensors without cltrain's metadata (a PyTorch state dict), and without buffers */
    clt_st_tensor ts[16];
    int nt = 0, nbare = 0;
    for (int i = 0; i < clt_st_count(f); i++) {
        const clt_st_tensor *e = clt_st_get(f, i);
        ts[nt++] = *e;
    }
    clt_st_tensor tb[16];
    for (int i = 0; i < nt; i++)
        if (!strstr(ts[i].name, "running") && !strstr(ts[i].name, "num_batches"))
            tb[nbare++] = ts[i];
    TC_OK(NULL, clt_st_write(plain, ts, nt, NULL, NULL, 0));
    TC_OK(NULL, clt_st_write(bare, tb, nbare, NULL, NULL, 0));
    clt_st_close(f);

    /* restored exactly */
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    clt_model *m2 = make_model(ctx, spec, IN, 2);
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    TC_OK(ctx, clt_model_read_buffers(m2, b2, &c2, CLT_WAIT_READ));
    ck_assert_int_eq(c2, 3);
    for (int i = 0; i < 3; i++) {
        const struct clt_buffer_info *bi = clt_model_buffer_info(m2, i);
        if (!bi->i64)
            ck_assert(memcmp(b1 + bi->offset, b2 + bi->offset, bi->numel * sizeof *b1) == 0);
    }
    float *pa = read_all(clt_model_params(m)), *pb = read_all(clt_model_params(m2));
    ck_assert(memcmp(pa, pb, clt_tensor_nbytes(clt_model_params(m))) == 0);
    free(pa);
    free(pb);
    /* evaluation outputs agree */
    float ya[4 * N], yb[4 * N];
    TC_OK(ctx, clt_model_forward(m, xt, false, 0, &out));
    tc_read(out, ya);
    TC_OK(ctx, clt_model_forward(m2, xt, false, 0, &out));
    tc_read(out, yb);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    clt_checkpoint_close(ck);
    clt_model_free(m2);

    /* a plain state dict with the buffers loads; one without them is refused by name */
    ck_assert_int_eq(clt_checkpoint_open_weights(&ck, plain), CLT_OK);
    m2 = make_model(ctx, spec, IN, 3);
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    c2 = 0;
    TC_OK(ctx, clt_model_read_buffers(m2, b2, &c2, CLT_WAIT_READ));
    ck_assert_int_eq(c2, 3);
    clt_checkpoint_close(ck);
    ck_assert_int_eq(clt_checkpoint_open_weights(&ck, bare), CLT_OK);
    ck_assert_int_eq(clt_checkpoint_load_model(ck, m2), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "no tensor \"1.running_mean\""), "%s",
                  clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    clt_model_free(m2);
    clt_model_free(m);
    clt_tensor_free(xt);
    free(b1);
    free(b2);
    remove(path);
    remove(plain);
    remove(bare);
    rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* A model on sequences (T, C) = (5, 4): "input_shape" "5,4" in the metadata, its per-position
 * linear layers' weights (OUT, C) under their nn.Sequential names, restored exactly into a model
 * of the same shape (the same outputs), refused by one of another (T, C) naming both. */
static clt_model *make_seq_model(clt_ctx *ctx, const char *text, size_t T, size_t C,
                                 uint64_t seed)
{
    clt_spec s = {0};
    ck_assert_msg(clt_spec_parse(text, 0, &s) == CLT_OK, "%s", clt_last_errmsg());
    struct clt_model_params p = clt_model_default_params();
    p.seed = seed;
    p.max_batch = 4;
    p.input_shape[0] = T;
    p.input_shape[1] = C;
    clt_model *m = NULL;
    TC_OK(ctx, clt_model_create(&m, ctx, &s, T * C, N, &p));
    clt_spec_free(&s);
    return m;
}

START_TEST(test_sequence_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], path[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/seq.safetensors", dir);
    const char *spec =
        "residual { layernorm, linear 16, gelu, linear 4 }, layernorm, flatten, linear 3";
    clt_model *m = make_seq_model(ctx, spec, 5, 4, 1);
    struct clt_checkpoint_info info = {
        .norm = {.features = 20, .scale = 1.0f}, .classes = N, .task = CLT_TASK_CLASSIFICATION};
    TC_OK(ctx, clt_checkpoint_save(path, m, NULL, &info));
    clt_st_file *f = NULL;
    TC_OK(NULL, clt_st_open(&f, path));
    ck_assert_str_eq(clt_st_meta(f, "input_shape"), "5,4");
    const clt_st_tensor *t = clt_st_find(f, "0.body.1.weight");
    ck_assert(t && t->ndim == 2 && t->shape[0] == 16 && t->shape[1] == 4);
    t = clt_st_find(f, "0.body.3.weight");
    ck_assert(t && t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 16);
    t = clt_st_find(f, "3.weight");
    ck_assert(t && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 20);
    clt_st_close(f);

    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    const struct clt_checkpoint_info got = clt_checkpoint_get_info(ck);
    ck_assert(got.input_shape[0] == 5 && got.input_shape[1] == 4 && got.input_shape[2] == 0);
    clt_model *m2 = make_seq_model(ctx, spec, 5, 4, 2);
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    float x[4 * 20], ya[4 * N], yb[4 * N];
    tc_fill_nonzero(&r, x, 4 * 20, 0.1f, 2.0f);
    size_t xd[3] = {4, 5, 4};
    clt_tensor *xt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 3, xd, CLT_MEM_OTHER));
    tc_write(xt, x);
    TC_OK(ctx, clt_model_forward(m, xt, false, 0, &out));
    tc_read(out, ya);
    TC_OK(ctx, clt_model_forward(m2, xt, false, 0, &out));
    tc_read(out, yb);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    clt_model *other = make_seq_model(ctx, "flatten, linear 3", 10, 2, 3); /* 20 inputs too */
    ck_assert_int_eq(clt_checkpoint_load_model(ck, other), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "saved for inputs of shape 5x4, the model "
                                                   "has 10x2"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    clt_tensor_free(xt);
    clt_model_free(other);
    clt_model_free(m2);
    clt_model_free(m);
    remove(path);
    rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* Attention's parameters under nn.MultiheadAttention's names ("{i}.in_proj_weight" (3D, D),
 * "{i}.in_proj_bias" (3D), "{i}.out_proj.weight" (D, D), "{i}.out_proj.bias" (D), inside a
 * block "{i}.body.{j}.", nobias without the biases), their AdamW state beside them
 * ("optim.{name}.exp_avg"), restored bit for bit into a model and optimizer born elsewhere (the
 * same outputs); a checkpoint of a nobias layer is refused by a model with biases there,
 * naming the tensor it lacks. */
START_TEST(test_attention_model)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], path[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/attn.safetensors", dir);
    const char *spec = "residual { layernorm, attention 2 causal }, attention 1 nobias, layernorm, "
                       "flatten, linear 3";
    clt_model *m = make_seq_model(ctx, spec, 5, 4, 1);
    const size_t Pn = clt_tensor_numel(clt_model_params(m));
    struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_ADAMW);
    clt_optim *o = NULL;
    TC_OK(ctx, clt_optim_create(&o, clt_model_params(m), &op));
    float *g = malloc(Pn * sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (int step = 0; step < 2; step++) {
        tc_fill_nonzero(&r, g, Pn, 0.01f, 1.0f);
        tc_write(clt_model_grads(m), g);
        TC_OK(ctx, clt_optim_step(o, clt_model_grads(m)));
    }
    struct clt_checkpoint_info info = {.model_text = spec,
                                       .norm = {.features = 20, .scale = 1.0f},
                                       .classes = N,
                                       .task = CLT_TASK_CLASSIFICATION,
                                       .step = 2};
    TC_OK(ctx, clt_checkpoint_save(path, m, o, &info));

    static const struct {
        const char *name;
        int64_t d0, d1;
    } want[] = {{"0.body.1.in_proj_weight", 12, 4}, {"0.body.1.in_proj_bias", 12, 0},
                {"0.body.1.out_proj.weight", 4, 4}, {"0.body.1.out_proj.bias", 4, 0},
                {"1.in_proj_weight", 12, 4},        {"1.out_proj.weight", 4, 4}};
    clt_st_file *f = NULL;
    TC_OK(NULL, clt_st_open(&f, path));
    float *params = read_all(clt_model_params(m));
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        for (int st = 0; st < 3; st++) {
            char name[128];
            snprintf(name, sizeof name, st == 0 ? "%s" : st == 1 ? "optim.%s.exp_avg"
                                                               : "optim.%s.exp_avg_sq",
                     want[i].name);
            const clt_st_tensor *t = clt_st_find(f, name);
            ck_assert_msg(t != NULL, "no tensor \"%s\"", name);
            ck_assert_int_eq(t->ndim, want[i].d1 ? 2 : 1);
            ck_assert_int_eq(t->shape[0], want[i].d0);
            if (want[i].d1) ck_assert_int_eq(t->shape[1], want[i].d1);
        }
        int k = 0;
        while (strcmp(clt_model_param_info(m, k)->name, want[i].name) != 0) k++;
        const clt_st_tensor *t = clt_st_find(f, want[i].name);
        ck_assert_msg(memcmp(t->data, params + clt_model_param_info(m, k)->offset, t->nbytes) == 0,
                      "\"%s\": other bits", want[i].name);
    }
    ck_assert_ptr_null(clt_st_find(f, "1.in_proj_bias"));
    ck_assert_ptr_null(clt_st_find(f, "1.out_proj.bias"));
    clt_st_close(f);

    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    clt_model *m2 = make_seq_model(ctx, spec, 5, 4, 2);
    clt_optim *o2 = NULL;
    TC_OK(ctx, clt_optim_create(&o2, clt_model_params(m2), &op));
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    TC_OK(ctx, clt_checkpoint_load_optim(ck, o2, m2));
    float *p2 = read_all(clt_model_params(m2));
    ck_assert_msg(memcmp(params, p2, Pn * sizeof *p2) == 0, "weights: other bits after loading");
    for (int s = 0; s < clt_optim_state_count(o); s++) {
        float *a = read_all(clt_optim_state(o, s, NULL)), *b = read_all(clt_optim_state(o2, s, NULL));
        ck_assert_msg(memcmp(a, b, Pn * sizeof *a) == 0, "optimizer state %d: other bits", s);
        free(a);
        free(b);
    }
    float x[4 * 20], ya[4 * N], yb[4 * N];
    tc_fill_nonzero(&r, x, 4 * 20, 0.1f, 2.0f);
    size_t xd[3] = {4, 5, 4};
    clt_tensor *xt = NULL, *out = NULL;
    TC_OK(ctx, clt_tensor_create(&xt, ctx, CLT_DTYPE_F32, 3, xd, CLT_MEM_OTHER));
    tc_write(xt, x);
    TC_OK(ctx, clt_model_forward(m, xt, false, 0, &out));
    tc_read(out, ya);
    TC_OK(ctx, clt_model_forward(m2, xt, false, 0, &out));
    tc_read(out, yb);
    ck_assert(memcmp(ya, yb, sizeof ya) == 0);
    clt_model *biased = make_seq_model(ctx,
                                       "residual { layernorm, attention 2 causal }, "
                                       "attention 1, layernorm, flatten, linear 3",
                                       5, 4, 3);
    ck_assert_int_eq(clt_checkpoint_load_model(ck, biased), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "no tensor \"1.in_proj_bias\""), "%s",
                  clt_ctx_errmsg(ctx));
    one_line(clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    clt_tensor_free(xt);
    clt_model_free(biased);
    clt_optim_free(o);
    clt_optim_free(o2);
    clt_model_free(m2);
    clt_model_free(m);
    free(params);
    free(p2);
    free(g);
    remove(path);
    rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

START_TEST(test_round_trip)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024];
    tc_mkdtemp(dir, sizeof dir);
    static const char *const adam[] = {"exp_avg", "exp_avg_sq"};
    static const char *const sgdm[] = {"momentum_buffer"};
    round_trip(ctx, &r, dir, CLT_OPTIM_ADAM, 0, adam, 2);
    round_trip(ctx, &r, dir, CLT_OPTIM_ADAMW, 0, adam, 2);
    round_trip(ctx, &r, dir, CLT_OPTIM_SGD, 0.9f, sgdm, 1);
    round_trip(ctx, &r, dir, CLT_OPTIM_SGD, 0, NULL, 0);

    /* no optimizer: weights and metadata only; regression; no mean/std (0 and 1) */
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    clt_model *m = make_model_out(ctx, "linear 5 nobias, tanh, dropout 0.25, linear 1", 7, 1, 1);
    struct clt_checkpoint_info info = {
        .norm = {.features = 7, .scale = 1.0f}, .classes = 1, .task = CLT_TASK_REGRESSION};
    TC_OK(ctx, clt_checkpoint_save(path, m, NULL, &info));
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert_ptr_null(clt_checkpoint_optimizer(ck));
    struct clt_checkpoint_info got = clt_checkpoint_get_info(ck);
    ck_assert_str_eq(got.model_text, "linear 5 nobias, tanh, dropout 0.25, linear 1");
    ck_assert_int_eq(got.task, CLT_TASK_REGRESSION);
    ck_assert_int_eq(got.step, 0);
    for (int i = 0; i < 7; i++) {
        ck_assert(got.norm.mean[i] == 0.0f);
        ck_assert(got.norm.std[i] == 1.0f);
    }
    clt_model *m2 = make_model_out(ctx, "linear 5 nobias, tanh, dropout 0.25, linear 1", 7, 1, 2);
    TC_OK(ctx, clt_checkpoint_load_model(ck, m2));
    float *a = read_all(clt_model_params(m)), *b = read_all(clt_model_params(m2));
    ck_assert_msg(memcmp(a, b, clt_tensor_nbytes(clt_model_params(m))) == 0, "other bits");
    free(a);
    free(b);
    /* a model with other input features is refused */
    clt_model *m3 = make_model_out(ctx, "linear 5 nobias, tanh, dropout 0.25, linear 1", 8, 1, 2);
    ck_assert_int_eq(clt_checkpoint_load_model(ck, m3), CLT_ERR_FORMAT);
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "7") && tc_contains(clt_ctx_errmsg(ctx), "8"),
                  "%s", clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    clt_model_free(m);
    clt_model_free(m2);
    clt_model_free(m3);
    remove(path);
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 0);
    tc_rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- damaged and foreign files ------------------------------------------------------------ */

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Opening fails with CLT_ERR_FORMAT and a one-line message naming the file (and `what`). */
static void expect_open_fails(const char *path, const char *what, const char *label)
{
    clt_checkpoint *ck = NULL;
    clt_status st = clt_checkpoint_open(&ck, path);
    ck_assert_msg(st == CLT_ERR_FORMAT, "%s: %s (%s)", label, clt_status_name(st),
                  clt_last_errmsg());
    ck_assert_ptr_null(ck);
    one_line(clt_last_errmsg());
    ck_assert_msg(tc_contains(clt_last_errmsg(), path), "%s: message does not name the file: %s",
                  label, clt_last_errmsg());
    if (what)
        ck_assert_msg(tc_contains(clt_last_errmsg(), what), "%s: message lacks \"%s\": %s", label,
                      what, clt_last_errmsg());
}

/* Rewrites the tensors of `src` to `dst` with tensor `name` dropped (drop) or changed: its dtype
 * set to `dtype` and its shape to (d0, d1); metadata copied unless no_meta. */
static void rewrite(const char *src, const char *dst, const char *name, bool drop, clt_dtype dtype,
                    int64_t d0, int64_t d1, bool no_meta)
{
    clt_st_file *f = NULL;
    ck_assert_msg(clt_st_open(&f, src) == CLT_OK, "%s", clt_last_errmsg());
    int n = clt_st_count(f), k = 0, nm = clt_st_meta_count(f);
    clt_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    const char **keys = calloc((size_t)nm + 1, sizeof *keys),
               **vals = calloc((size_t)nm + 1, sizeof *vals);
    ck_assert(ts && keys && vals);
    for (int i = 0; i < n; i++) {
        const clt_st_tensor *t = clt_st_get(f, i);
        if (name && strcmp(t->name, name) == 0) {
            if (drop) continue;
            ts[k] = *t;
            ts[k].dtype = dtype;
            ts[k].ndim = d1 ? 2 : 1;
            ts[k].shape[0] = d0;
            ts[k].shape[1] = d1 ? d1 : 1;
            k++;
            continue;
        }
        ts[k++] = *t;
    }
    int kept = 0;
    for (int i = 0; i < nm; i++) {
        /* a changed tensor set drops the checksums, as another tool's edit would */
        if (name && (strcmp(clt_st_meta_key(f, i), "crc32c") == 0 ||
                     strcmp(clt_st_meta_key(f, i), "crc32c_metadata") == 0))
            continue;
        keys[kept] = clt_st_meta_key(f, i);
        vals[kept] = clt_st_meta(f, keys[kept]);
        kept++;
    }
    clt_status st = clt_st_write(dst, ts, k, keys, vals, no_meta ? 0 : kept);
    ck_assert_msg(st == CLT_OK, "rewrite: %s", clt_last_errmsg());
    free(ts);
    free(keys);
    free(vals);
    clt_st_close(f);
}

/* Like rewrite, with one metadata value replaced (NULL: the key dropped); the metadata checksum
 * is dropped too (a file of an older cltrain, whose metadata only the parser checks) unless
 * keep_crc (an edit after cltrain wrote it). */
static void rewrite_meta_crc(const char *src, const char *dst, const char *key, const char *value,
                             bool keep_crc)
{
    clt_st_file *f = NULL;
    ck_assert_msg(clt_st_open(&f, src) == CLT_OK, "%s", clt_last_errmsg());
    int n = clt_st_count(f), nm = clt_st_meta_count(f), k = 0;
    clt_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    const char **keys = calloc((size_t)nm, sizeof *keys), **vals = calloc((size_t)nm, sizeof *vals);
    ck_assert(ts && keys && vals);
    for (int i = 0; i < n; i++)
        ts[i] = *clt_st_get(f, i);
    for (int i = 0; i < nm; i++) {
        const char *kk = clt_st_meta_key(f, i);
        if (!keep_crc && strcmp(kk, "crc32c_metadata") == 0) continue;
        if (strcmp(kk, key) == 0 && !value) continue;
        keys[k] = kk;
        vals[k++] = strcmp(kk, key) == 0 ? value : clt_st_meta(f, kk);
    }
    ck_assert_msg(clt_st_write(dst, ts, n, keys, vals, k) == CLT_OK, "%s", clt_last_errmsg());
    free(ts);
    free(keys);
    free(vals);
    clt_st_close(f);
}

static void rewrite_meta(const char *src, const char *dst, const char *key, const char *value)
{
    rewrite_meta_crc(src, dst, key, value, false);
}

/* Loading into a fresh model fails with CLT_ERR_FORMAT naming `tensor` and the file. */
static void expect_load_fails(clt_ctx *ctx, const char *path, const char *tensor, const char *label)
{
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, path) == CLT_OK, "%s: open: %s", label,
                  clt_last_errmsg());
    clt_model *m = make_model(ctx, SPEC, IN, 5);
    float before[P], after[P];
    tc_read(clt_model_params(m), before);
    clt_status st = clt_checkpoint_load_model(ck, m);
    ck_assert_msg(st == CLT_ERR_FORMAT, "%s: %s", label, clt_status_name(st));
    const char *msg = clt_ctx_errmsg(ctx);
    one_line(msg);
    ck_assert_msg(tc_contains(msg, tensor) && tc_contains(msg, path), "%s: message: %s", label,
                  msg);
    /* a failed load leaves the model's weights alone */
    tc_read(clt_model_params(m), after);
    ck_assert_msg(memcmp(before, after, sizeof before) == 0, "%s: weights changed", label);
    clt_model_free(m);
    clt_checkpoint_close(ck);
}

START_TEST(test_validation)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], good[4096], bad[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    clt_model *m = make_model(ctx, SPEC, IN, 3);
    clt_optim *o = stepped_optim(m, &r, CLT_OPTIM_ADAM, 0, 1);
    struct clt_checkpoint_info info = {.norm = {.features = IN, .scale = 1.0f}, .classes = N};
    TC_OK(ctx, clt_checkpoint_save(good, m, o, &info));
    clt_optim_free(o);
    clt_model_free(m);

    size_t n = 0;
    unsigned char *bytes = slurp(good, &n);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)bytes[i] << (8 * i);
    ck_assert_uint_lt(hlen + 8, n);

    /* truncated: in the length field, in the header, at its end, in and at the end of data */
    size_t cuts[] = {
        0,    3, 7, 8, 9, 8 + hlen / 2, 8 + hlen - 1, 8 + hlen, 8 + hlen + 5, (8 + hlen + n) / 2,
        n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char label[64];
        snprintf(label, sizeof label, "cut at %zu of %zu bytes", cuts[i], n);
        spit(bad, bytes, cuts[i]);
        expect_open_fails(bad, NULL, label);
    }
    /* header length past the end of the file, slightly and hugely */
    unsigned char *copy = malloc(n);
    ck_assert_ptr_nonnull(copy);
    uint64_t lens[] = {n - 7, UINT64_MAX};
    for (int k = 0; k < 2; k++) {
        memcpy(copy, bytes, n);
        for (int i = 0; i < 8; i++)
            copy[i] = (unsigned char)(lens[k] >> (8 * i));
        spit(bad, copy, n);
        expect_open_fails(bad, "header length", "header length past the end");
    }
    /* a corrupted header (JSON broken) */
    memcpy(copy, bytes, n);
    copy[8] = 'x';
    spit(bad, copy, n);
    expect_open_fails(bad, NULL, "broken header JSON");
    free(copy);

    /* foreign safetensors files: no metadata, or metadata without cltrain's keys */
    rewrite(good, bad, NULL, false, CLT_DTYPE_F32, 0, 0, true);
    expect_open_fails(bad, "not a cltrain checkpoint", "no __metadata__");
    rewrite_meta(good, bad, "step", "five");
    expect_open_fails(bad, "step", "step not an integer");
    rewrite_meta(good, bad, "seed", "-1");
    expect_open_fails(bad, "seed", "negative seed");
    rewrite_meta(good, bad, "seed", "18446744073709551616");
    expect_open_fails(bad, "seed", "seed past 2^64 - 1");
    rewrite_meta(good, bad, "task", "ranking");
    expect_open_fails(bad, "ranking", "unknown task");
    rewrite_meta(good, bad, "input_std", "[1, 1, 0, 1]");
    expect_open_fails(bad, "input_std", "zero std");
    rewrite_meta(good, bad, "input_mean", "[1, 2]");
    expect_open_fails(bad, "input_mean", "mean of the wrong length");

    /* a missing tensor, a wrong shape, a wrong dtype: open succeeds, loading fails naming it */
    rewrite(good, bad, "2.bias", true, CLT_DTYPE_F32, 0, 0, false);
    expect_load_fails(ctx, bad, "\"2.bias\"", "missing 2.bias");
    rewrite(good, bad, "0.weight", false, CLT_DTYPE_F32, IN, H, false); /* transposed */
    expect_load_fails(ctx, bad, "\"0.weight\"", "0.weight (IN, H)");
    rewrite(good, bad, "2.weight", false, CLT_DTYPE_F32, N * H, 0, false); /* flattened */
    expect_load_fails(ctx, bad, "\"2.weight\"", "2.weight flat");
    rewrite(good, bad, "0.bias", false, CLT_DTYPE_I32, H, 0, false);
    expect_load_fails(ctx, bad, "\"0.bias\"", "0.bias as I32");

    /* optimizer state: a missing tensor */
    rewrite(good, bad, "optim.2.weight.exp_avg_sq", true, CLT_DTYPE_F32, 0, 0, false);
    clt_checkpoint *ck = NULL;
    ck_assert_int_eq(clt_checkpoint_open(&ck, bad), CLT_OK);
    m = make_model(ctx, SPEC, IN, 3);
    o = stepped_optim(m, &r, CLT_OPTIM_ADAM, 0, 0);
    ck_assert_int_eq(clt_checkpoint_load_optim(ck, o, m), CLT_ERR_FORMAT);
    one_line(clt_ctx_errmsg(ctx));
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), "optim.2.weight.exp_avg_sq"), "%s",
                  clt_ctx_errmsg(ctx));
    clt_checkpoint_close(ck);
    clt_optim_free(o);
    clt_model_free(m);

    /* a file that is not there */
    clt_checkpoint *none = NULL;
    snprintf(bad, sizeof bad, "%s/missing.safetensors", dir);
    ck_assert_int_eq(clt_checkpoint_open(&none, bad), CLT_ERR_IO);
    ck_assert(tc_contains(clt_last_errmsg(), bad));
    free(bytes);
    tc_rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- the metadata's own checksum ------------------------------------------------------- */

/* Every metadata value is covered by "crc32c_metadata": one changed byte of input_mean, another
 * activation in the spec, a scaled input_scale, another input_shape or step is refused by both
 * opens, naming the file; a file without the key (an older cltrain) opens as before; a key that
 * is not 8 hex digits is refused. */
START_TEST(test_metadata_checksum)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], good[4096], bad[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    clt_model *m = make_model(ctx, SPEC, IN, 3);
    clt_optim *o = stepped_optim(m, &r, CLT_OPTIM_ADAM, 0, 1);
    float mean[IN] = {0}, std[IN];
    for (int i = 0; i < IN; i++) std[i] = 1.0f;
    struct clt_checkpoint_info info = {
        .norm = {.features = IN, .scale = 1.0f, .mean = mean, .std = std},
        .classes = N,
        .step = 20};
    TC_OK(ctx, clt_checkpoint_save(good, m, o, &info));
    clt_optim_free(o);
    clt_model_free(m);

    clt_st_file *f = NULL;
    ck_assert_int_eq(clt_st_open(&f, good), CLT_OK);
    const char *stored = clt_st_meta(f, "crc32c_metadata");
    ck_assert_msg(stored && strlen(stored) == 8, "no crc32c_metadata: %s", stored ? stored : "-");
    char mean_text[256], spec_text[256];
    snprintf(mean_text, sizeof mean_text, "%s", clt_st_meta(f, "input_mean"));
    snprintf(spec_text, sizeof spec_text, "%s", clt_st_meta(f, "model"));
    clt_st_close(f);
    ck_assert_msg(mean_text[0] == '[' && mean_text[1] == '0', "input_mean %s", mean_text);
    mean_text[1] = '9';
    char *relu = strstr(spec_text, "relu");
    ck_assert_ptr_nonnull(relu);
    memcpy(relu, "tanh", 4);
    const char *edits[][2] = {{"input_mean", mean_text}, {"model", spec_text},
                              {"input_scale", "10"},     {"step", "5"},
                              {"seed", "7"},             {"format", NULL},
                              {"crc32c", NULL},          {"epoch", "3"}};
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        char label[128];
        snprintf(label, sizeof label, "%s %s, checksum kept", edits[i][0],
                 edits[i][1] ? edits[i][1] : "dropped");
        rewrite_meta_crc(good, bad, edits[i][0], edits[i][1], true);
        expect_open_fails(bad, "metadata was changed", label);
        clt_checkpoint *ck = NULL;
        ck_assert_int_eq(clt_checkpoint_open_weights(&ck, bad), CLT_ERR_FORMAT);
        ck_assert_ptr_null(ck);
    }
    rewrite_meta_crc(good, bad, "crc32c_metadata", "12345678", true);
    expect_open_fails(bad, "metadata was changed", "another checksum");
    rewrite_meta_crc(good, bad, "crc32c_metadata", "xyz", true);
    expect_open_fails(bad, "crc32c_metadata", "a checksum that is not hex");
    /* the key removed: an older cltrain's file, verified as before */
    rewrite_meta(good, bad, "step", "20");
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, bad) == CLT_OK, "%s", clt_last_errmsg());
    ck_assert(clt_checkpoint_has_checksums(ck));
    ck_assert_int_eq(clt_checkpoint_get_info(ck).step, 20);
    clt_checkpoint_close(ck);
    /* the unchanged file, and one whose metadata is rewritten in another order, open */
    ck_assert_msg(clt_checkpoint_open(&ck, good) == CLT_OK, "%s", clt_last_errmsg());
    clt_checkpoint_close(ck);
    rewrite_meta_crc(good, bad, "step", "20", true);
    ck_assert_msg(clt_checkpoint_open(&ck, bad) == CLT_OK, "%s", clt_last_errmsg());
    clt_checkpoint_close(ck);
    tc_rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- resuming with another optimizer ------------------------------------------------------ */

START_TEST(test_resume_other_optimizer)
{
    clt_ctx *ctx = tc_ctx();
    tc_rng r = tc_rng_for(__func__);
    char dir[1024], adam_path[4096], sgd_path[4096];
    tc_mkdtemp(dir, sizeof dir);
    snprintf(adam_path, sizeof adam_path, "%s/adam.safetensors", dir);
    snprintf(sgd_path, sizeof sgd_path, "%s/sgd.safetensors", dir);
    struct clt_checkpoint_info info = {
        .norm = {.features = IN, .scale = 1.0f}, .classes = N, .step = 4, .epoch = 1};
    clt_model *m = make_model(ctx, SPEC, IN, 3);
    clt_optim *o = stepped_optim(m, &r, CLT_OPTIM_ADAM, 0, 2);
    TC_OK(ctx, clt_checkpoint_save(adam_path, m, o, &info));
    clt_optim_free(o);
    o = stepped_optim(m, &r, CLT_OPTIM_SGD, 0, 2); /* plain SGD: no state tensors */
    TC_OK(ctx, clt_checkpoint_save(sgd_path, m, o, &info));
    clt_optim_free(o);

    /* a trainer (no step is run: no GEMM) over 8 samples */
    float x[8 * IN];
    int32_t y[8];
    tc_fill_nonzero(&r, x, 8 * IN, 0.1f, 1.0f);
    for (int i = 0; i < 8; i++)
        y[i] = i % N;
    clt_dataset d = {.n = 8,
                     .features = IN,
                     .sample_ndim = 1,
                     .sample_shape = {IN},
                     .f32 = x,
                     .labels = y,
                     .classes = N,
                     .task = CLT_TASK_CLASSIFICATION,
                     .input_scale = 1.0f,
                     .source = "test data"};
    clt_loader *rd = NULL;
    struct clt_loader_params lp = clt_loader_default_params();
    lp.batch_size = 4;
    TC_OK(ctx, clt_loader_create(&rd, ctx, &d, &info.norm, &lp));
    static const struct {
        clt_optim_kind kind;
        float momentum;
        const char *ck, *saved, *now;
    } cases[] = {
        {CLT_OPTIM_SGD, 0.9f, NULL, "adam", "sgd"},     /* adam checkpoint, SGD run */
        {CLT_OPTIM_ADAMW, 0.0f, NULL, "adam", "adamw"}, /* adam checkpoint, AdamW run */
        {CLT_OPTIM_ADAM, 0.0f, NULL, "sgd", "adam"},    /* sgd checkpoint, Adam run */
        {CLT_OPTIM_SGD, 0.9f, NULL, "sgd", NULL},       /* sgd without momentum state */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct clt_train_params tp = clt_train_default_params();
        tp.batch_size = 4;
        tp.optim = clt_optim_default_params(cases[i].kind);
        tp.optim.momentum = cases[i].momentum;
        clt_trainer *t = NULL;
        TC_OK(ctx, clt_trainer_create(&t, m, rd, NULL, &tp));
        const char *path = strcmp(cases[i].saved, "adam") == 0 ? adam_path : sgd_path;
        clt_status st = clt_trainer_resume(t, path);
        const char *msg = clt_ctx_errmsg(ctx);
        ck_assert_msg(st == CLT_ERR_FORMAT, "case %zu: %s", i, clt_status_name(st));
        one_line(msg);
        ck_assert_msg(tc_contains(msg, path), "case %zu: %s", i, msg);
        if (cases[i].now) {
            char saved[64], now[64];
            snprintf(saved, sizeof saved, "\"name\":\"%s\"", cases[i].saved);
            snprintf(now, sizeof now, "uses %s", cases[i].now);
            ck_assert_msg(tc_contains(msg, saved) && tc_contains(msg, now), "case %zu: %s", i, msg);
        } else {
            ck_assert_msg(tc_contains(msg, "optim.0.weight.momentum_buffer"), "case %zu: %s", i,
                          msg);
        }
        ck_assert_int_eq(clt_optim_steps(clt_trainer_optim(t)), 0);
        clt_trainer_free(t);
    }
    /* the matching optimizer resumes: step and epoch from the file */
    struct clt_train_params tp = clt_train_default_params();
    tp.batch_size = 4;
    clt_trainer *t = NULL;
    TC_OK(ctx, clt_trainer_create(&t, m, rd, NULL, &tp));
    TC_OK(ctx, clt_trainer_resume(t, adam_path));
    ck_assert_int_eq(clt_optim_steps(clt_trainer_optim(t)), 4);
    clt_trainer_free(t);

    clt_loader_free(rd);
    clt_model_free(m);
    tc_rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- atomic saves ------------------------------------------------------------------------- */

START_TEST(test_atomic_save)
{
    clt_ctx *ctx = tc_ctx();
    char dir[1024], file[2048], path[4096], sub[2048], good[2048];
    tc_mkdtemp(dir, sizeof dir);
    clt_model *m = make_model(ctx, SPEC, IN, 3);
    struct clt_checkpoint_info info = {.norm = {.features = IN, .scale = 1.0f}, .classes = N};

    /* a path under a regular file: CLT_ERR_IO, nothing written */
    snprintf(file, sizeof file, "%s/plain", dir);
    spit(file, "x", 1);
    snprintf(path, sizeof path, "%s/ck.safetensors", file);
    ck_assert_int_eq(clt_checkpoint_save(path, m, NULL, &info), CLT_ERR_IO);
    one_line(clt_ctx_errmsg(ctx));
    ck_assert_msg(tc_contains(clt_ctx_errmsg(ctx), path), "%s", clt_ctx_errmsg(ctx));
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1); /* "plain" only */

    /* the final name is a directory: the rename fails, the temporary file goes */
    snprintf(sub, sizeof sub, "%s/sub", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(clt_checkpoint_save(sub, m, NULL, &info), CLT_ERR_IO);
    one_line(clt_ctx_errmsg(ctx));
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 1);
    struct stat sb;
    ck_assert(stat(sub, &sb) == 0 && S_ISDIR(sb.st_mode));
    rmdir(sub);

    /* a save over an existing checkpoint replaces it whole, leaving one file */
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    spit(good, "old contents", 12);
    TC_OK(ctx, clt_checkpoint_save(good, m, NULL, &info));
    ck_assert_int_eq(tc_count_files(dir, NULL, 0), 2);
    clt_checkpoint *ck = NULL;
    ck_assert_msg(clt_checkpoint_open(&ck, good) == CLT_OK, "%s", clt_last_errmsg());
    clt_checkpoint_close(ck);

    clt_model_free(m);
    tc_rmdir(dir);
    clt_ctx_free(ctx);
    tc_assert_no_live();
}
END_TEST

/* ---- CRC-32C ------------------------------------------------------------------------------ */

/* Known vectors (RFC 3720 B.4 and the "123456789" check value), every alignment and split. */
START_TEST(test_crc32c)
{
    ck_assert_uint_eq(clt__crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(clt__crc32c(0, "", 0), 0u);
    unsigned char z[48] = {0}, ff[48], inc[48];
    memset(ff, 0xff, sizeof ff);
    for (int i = 0; i < 48; i++) inc[i] = (unsigned char)i;
    ck_assert_uint_eq(clt__crc32c(0, z, 32), 0x8A9136AAu);
    ck_assert_uint_eq(clt__crc32c(0, ff, 32), 0x62A8AB43u);
    ck_assert_uint_eq(clt__crc32c(0, inc, 32), 0x46DD794Eu);
    unsigned char buf[64];
    for (size_t off = 0; off < 8; off++) {
        memcpy(buf + off, "123456789", 9);
        for (size_t k = 0; k <= 9; k++)
            ck_assert_uint_eq(clt__crc32c(clt__crc32c(0, buf + off, k), buf + off + k, 9 - k),
                              0xE3069283u);
    }
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tc_tcase("checkpoint");
    tcase_add_test(tc, test_crc32c);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_sequence_model);
    tcase_add_test(tc, test_attention_model);
    tcase_add_test(tc, test_batchnorm_buffers);
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_metadata_checksum);
    tcase_add_test(tc, test_resume_other_optimizer);
    tcase_add_test(tc, test_atomic_save);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tc_run(checkpoint_suite());
}
