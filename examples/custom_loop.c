/* custom_loop: a training loop of one's own, through the public API only, with no trainer and
 * no host arithmetic on the way to the gradient: clt_model_forward, the public loss
 * (cltrain/loss.h) writing the output gradient on the device, clt_model_backward and an
 * optimizer step. Each step's mean loss lands in its own slot of a device tensor, read once at
 * the end, so the loop itself never waits for the device. The data is made up on the host
 * (3 classes of points in 8 dimensions), so the example needs no data set.
 * Usage: custom_loop [STEPS]   (default 60). Exits 1 unless the loss falls by half.
 * Environment: CLTRAIN_DEVICE (the device). */
#include <cltrain/cltrain.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 96, IN = 8, N = 3, MAX_STEPS = 10000 };

static int failed(clt_status st, const clt_ctx *ctx, const char *call)
{
    if (st == CLT_OK) return 0;
    const char *msg = ctx && clt_ctx_errmsg(ctx)[0] ? clt_ctx_errmsg(ctx) : clt_last_errmsg();
    fprintf(stderr, "custom_loop: %s: %s: %s\n", call, clt_status_name(st), msg);
    return 1;
}
#define CHECK(c, call)                                                                             \
    do {                                                                                           \
        if (failed((call), (c), #call)) goto done;                                                 \
    } while (0)

/* Points in [-1, 1]^IN from a fixed linear congruential generator; the class is which of
 * three linear scores is largest, so a small MLP can learn it. */
static void make_data(float *x, int32_t *y)
{
    uint32_t s = 12345;
    for (int i = 0; i < B; i++) {
        for (int f = 0; f < IN; f++) {
            s = s * 1664525u + 1013904223u;
            x[i * IN + f] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
        }
        const float *r = x + i * IN;
        float a = r[0] + r[1] - r[2], b = r[3] - r[0] + 0.5f * r[4], c = r[5] + r[6] - r[1];
        y[i] = a >= b && a >= c ? 0 : b >= c ? 1 : 2;
    }
}

int main(int argc, char **argv)
{
    int rc = 1;
    char *end = NULL;
    errno = 0;
    long steps = argc > 1 ? strtol(argv[1], &end, 10) : 60;
    if (argc > 2 || (argc > 1 && (*end || end == argv[1] || errno || steps < 2 ||
                                  steps > MAX_STEPS))) {
        fprintf(stderr, "usage: custom_loop [STEPS]  (2 to %d; default 60)\n", MAX_STEPS);
        return 2;
    }
    static float xh[B * IN];
    static int32_t yh[B];
    float *losses = calloc((size_t)steps, sizeof *losses);
    clt_ctx *ctx = NULL;
    clt_spec spec = {0, NULL};
    clt_model *m = NULL;
    clt_optim *opt = NULL;
    clt_tensor *x = NULL, *y = NULL, *dout = NULL, *loss = NULL, *slot = NULL;
    if (!losses) {
        fprintf(stderr, "custom_loop: out of host memory\n");
        return 1;
    }
    make_data(xh, yh);

    /* The device, the model on it, the batch uploaded once, and the buffers the loop writes:
     * the output gradient (B, N) and one loss slot per step (steps). */
    struct clt_ctx_params cp = clt_ctx_default_params();
    CHECK(NULL, clt_ctx_create(&ctx, &cp));
    CHECK(NULL, clt_spec_parse("linear 32, relu, linear 3", N, &spec));
    struct clt_model_params mp = clt_model_default_params();
    mp.max_batch = B;
    CHECK(ctx, clt_model_create(&m, ctx, &spec, IN, N, &mp));
    size_t xd[2] = {B, IN}, b = B, od[2] = {B, N}, ns = (size_t)steps, one = 1;
    CHECK(ctx, clt_tensor_create(&x, ctx, CLT_DTYPE_F32, 2, xd, CLT_MEM_DATA));
    CHECK(ctx, clt_tensor_create(&y, ctx, CLT_DTYPE_I32, 1, &b, CLT_MEM_DATA));
    CHECK(ctx, clt_tensor_write(x, xh, true, NULL));
    CHECK(ctx, clt_tensor_write(y, yh, true, NULL));
    CHECK(ctx, clt_tensor_create(&dout, ctx, CLT_DTYPE_F32, 2, od, CLT_MEM_ACTIVATIONS));
    CHECK(ctx, clt_tensor_zeros(&loss, ctx, CLT_DTYPE_F32, 1, &ns, CLT_MEM_WORKSPACE));
    struct clt_optim_params op = clt_optim_default_params(CLT_OPTIM_ADAM);
    op.lr = 0.01f;
    CHECK(ctx, clt_optim_create(&opt, clt_model_params(m), &op));

    /* The loop: every call only enqueues. The loss kernel adds the batch's mean loss (loss
     * scale 1/B) to this step's slot and writes d(mean loss)/d(output) (gradient scale 1/B)
     * into dout, which backward takes as it is. */
    for (long s = 0; s < steps; s++) {
        clt_tensor *out = NULL;
        CHECK(ctx, clt_tensor_view(&slot, loss, (size_t)s, 1, &one));
        CHECK(ctx, clt_model_forward(m, x, true, (uint64_t)s, &out));
        CHECK(ctx, clt_loss_softmax_xent(out, y, 0.0f, 1.0f / B, 1.0f / B, dout, slot, NULL));
        CHECK(ctx, clt_model_backward(m, dout, false));
        CHECK(ctx, clt_optim_step(opt, clt_model_grads(m)));
        clt_tensor_free(slot);
        slot = NULL;
    }
    CHECK(ctx, clt_tensor_read(loss, losses, true, NULL)); /* the one host wait */
    for (long s = 0; s < steps; s += (steps + 9) / 10)
        printf("step %ld loss %.4f\n", s + 1, (double)losses[s]);
    printf("step %ld loss %.4f\n", steps, (double)losses[steps - 1]);
    if (!(losses[steps - 1] < 0.5f * losses[0])) {
        fprintf(stderr, "custom_loop: the loss did not fall by half: %.4f -> %.4f\n",
                (double)losses[0], (double)losses[steps - 1]);
        goto done;
    }
    rc = 0;
done:
    clt_tensor_free(slot);
    clt_optim_free(opt);
    clt_tensor_free(loss);
    clt_tensor_free(dout);
    clt_tensor_free(y);
    clt_tensor_free(x);
    clt_model_free(m);
    clt_spec_free(&spec);
    clt_ctx_free(ctx);
    free(losses);
    return rc;
}
