/* `cltrain bench`: training steps per second of a model on synthetic data resident on the
 * device (forward, cross-entropy, backward, optimizer), timed after a warm-up with the queues
 * finished before each clock read. The figures compared with PyTorch's. */
#include "cli.h"
#include "options.h"

#include "cltrain/rng.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_bench(int argc, char **argv)
{
    const char *model = "mlp", *device = NULL, *optimizer = "adam";
    long batch = 128, steps = 200, warmup = 10, features = 784, classes = 10, repeats = 3;
    const struct cli_opt opts[] = {
        {"model", OPT_STR, &model, "a model spec or preset (mlp)", NULL},
        {"batch-size", OPT_POS_INT, &batch, "samples per step (128)", NULL},
        {"steps", OPT_POS_INT, &steps, "timed steps per repeat (200)", NULL},
        {"warmup", OPT_NONNEG_INT, &warmup, "untimed steps first (10)", NULL},
        {"repeats", OPT_POS_INT, &repeats, "timed repeats; the median is reported (3)", NULL},
        {"features", OPT_POS_INT, &features, "input width (784)", NULL},
        {"classes", OPT_POS_INT, &classes, "output width (10)", NULL},
        {"optimizer", OPT_STR, &optimizer, "sgd, adam or adamw (adam)", NULL},
        {"device", OPT_STR, &device, "auto, gpu, cpu, accelerator, N, P:D or a name", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0) {
            printf("usage: cltrain bench [options]\n");
            cli_print_options(stdout, opts);
            return CLI_OK;
        }
    int rc = cli_parse(argc, argv, opts, "bench");
    if (rc != CLI_OK) return rc;
    clt_optim_kind kind;
    if (clt_optim_parse_kind(optimizer, &kind) != CLT_OK)
        return cli_usage_error("%s", clt_last_errmsg());

    enum { NBATCH = 8 };
    clt_ctx *ctx = NULL;
    clt_spec spec = {0};
    clt_model *m = NULL;
    clt_optim *opt = NULL;
    clt_tensor *x = NULL, *y = NULL, *dout = NULL, *loss = NULL, *xb = NULL, *yb = NULL;
    float *hx = NULL;
    int32_t *hy = NULL;
    size_t B = (size_t)batch, F = (size_t)features, N = (size_t)classes, one = 1;
    rc = CLI_FAIL;
    struct clt_ctx_params cp = clt_ctx_default_params();
    cp.device = device;
    if (clt_ctx_create(&ctx, &cp) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    if (clt_spec_parse(model, (int)classes, &spec) != CLT_OK) {
        cli_error("%s", clt_last_errmsg());
        goto done;
    }
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    struct clt_optim_params op = clt_optim_default_params(kind);
    size_t xd[2] = {NBATCH * B, F}, yd = NBATCH * B, dd[2] = {B, N}, bd[2] = {B, F};
    hx = malloc(xd[0] * F * sizeof *hx);
    hy = malloc(yd * sizeof *hy);
    if (!hx || !hy) {
        cli_error("out of host memory");
        goto done;
    }
    clt_rng_fill_uniform(1, clt_rng_stream(CLT_RNG_USER, 0), 0, hx, xd[0] * F, 0.0f, 1.0f);
    for (size_t i = 0; i < yd; i++) hy[i] = (int32_t)(clt_rng_u32(1, 1, i) % (uint32_t)N);
    if (clt_model_create(&m, ctx, &spec, F, N, &mp) != CLT_OK ||
        clt_optim_create(&opt, clt_model_params(m), &op) != CLT_OK ||
        clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&y, ctx, CLT_DTYPE_I32, 1, &yd, CLT_MEM_OTHER) != CLT_OK ||
        clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, dd, CLT_MEM_ACTIVATIONS) != CLT_OK ||
        clt_tensor_zeros(&loss, ctx, CLT_DTYPE_F32, 1, &one, CLT_MEM_WORKSPACE) != CLT_OK ||
        clt_tensor_write(x, hx, true, NULL) != CLT_OK ||
        clt_tensor_write(y, hy, true, NULL) != CLT_OK) {
        cli_error("%s", clt_ctx_errmsg(ctx));
        goto done;
    }
    double rates[64];
    long nrep = repeats < 64 ? repeats : 64;
    for (long r = -1; r < nrep; r++) {
        long n = r < 0 ? warmup : steps;
        if (clt_ctx_finish(ctx, CLT_WAIT_TIMING) != CLT_OK) goto fail;
        double t0 = now_s();
        for (long s = 0; s < n; s++) {
            size_t k = (size_t)s % NBATCH;
            clt_tensor *out = NULL;
            if (clt_tensor_view(&xb, x, k * B * F, 2, bd) != CLT_OK ||
                clt_tensor_view(&yb, y, k * B, 1, &B) != CLT_OK ||
                clt_model_forward(m, xb, true, (uint64_t)s, &out) != CLT_OK ||
                clt_op_softmax_xent(out, yb, 0.0f, 1.0f, 1.0f / (float)B, dout, loss, NULL) !=
                    CLT_OK ||
                clt_model_backward(m, dout, false) != CLT_OK ||
                clt_optim_step(opt, clt_model_grads(m)) != CLT_OK)
                goto fail;
            clt_tensor_free(xb);
            clt_tensor_free(yb);
            xb = yb = NULL;
        }
        if (clt_ctx_finish(ctx, CLT_WAIT_TIMING) != CLT_OK) goto fail;
        if (r >= 0) rates[r] = (double)n / (now_s() - t0);
    }
    /* median of the repeats */
    for (long i = 1; i < nrep; i++)
        for (long j = i; j > 0 && rates[j] < rates[j - 1]; j--) {
            double tmp = rates[j];
            rates[j] = rates[j - 1];
            rates[j - 1] = tmp;
        }
    char *text = NULL;
    clt_spec_to_string(&spec, &text);
    struct clt_mem_stats ms = clt_ctx_mem_stats(ctx);
    char peak[32];
    clt_format_bytes(ms.peak, peak, sizeof peak);
    printf("bench on [%d] %s: model %zu-%s, batch %zu, %s: %.1f steps/s, %.0f samples/s "
           "(median of %ld x %ld steps after %ld warm-up; min %.1f, max %.1f steps/s); peak "
           "device memory %s\n",
           clt_ctx_device(ctx)->index, clt_ctx_device(ctx)->device_name, F, text ? text : model, B,
           clt_optim_kind_name(kind), rates[nrep / 2], rates[nrep / 2] * (double)B, nrep, steps,
           warmup, rates[0], rates[nrep - 1], peak);
    free(text);
    rc = CLI_OK;
    goto done;
fail:
    cli_error("%s", clt_ctx_errmsg(ctx));
done:
    clt_tensor_free(xb);
    clt_tensor_free(yb);
    clt_tensor_free(x);
    clt_tensor_free(y);
    clt_tensor_free(dout);
    clt_tensor_free(loss);
    clt_optim_free(opt);
    clt_model_free(m);
    clt_spec_free(&spec);
    clt_ctx_free(ctx);
    free(hx);
    free(hy);
    return rc;
}
