/* C wrappers of cl/loss.cl: softmax cross-entropy (loss, gradient, correct count), mean squared
 * error, softmax and argmax over the rows (last dimension) of f32 tensors, and softmax
 * cross-entropy over large vocabularies (one work-group per row, on CPUs one work-item per row;
 * f32, f16 or bf16 logits). The loss totals are reduced on the device by one work-group in a
 * fixed order (see cl/loss.cl): the same bits on every run and for every work-group size, no host
 * wait. The public losses (cltrain/loss.h) are the first two. */
#include "ops/nn_internal.h"

#include "ops/tune_internal.h"

#include "cltrain/loss.h"

#include <stdio.h>
#include <stdint.h>

/* Rows of x: N = last dimension (>= 1, < 2^31), B = numel / N. */
static clt_status rows_of(const clt_tensor *x, const char *op, const char *what, size_t *B,
                          size_t *N)
{
    size_t n = clt__nn_last_dim(x);
    if (n == 0 || n > INT32_MAX)
        return clt__fail(clt_tensor_ctx(x), CLT_ERR_SHAPE,
                         "%s: %s's last dimension is %zu; it must be in [1, 2^31)", op, what, n);
    *N = n;
    *B = clt_tensor_numel(x) / n;
    return CLT_OK;
}

/* An f32 tensor of exactly one element on x's ctx. */
static clt_status check_acc(const clt_tensor *x, const clt_tensor *acc, const char *op,
                            const char *what)
{
    clt_status st = clt_tensor_same_ctx(x, acc);
    if (st == CLT_OK) st = clt__nn_need_dtype(acc, CLT_DTYPE_F32, op, what);
    if (st == CLT_OK) st = clt__nn_need_numel(acc, 1, op, what);
    return st;
}

enum {
    SOFTMAX_XENT_FORWARD,
    MSE_FORWARD,
    MSE_BACKWARD,
    ARGMAX_ROWS,
    SOFTMAX_FORWARD,
    SOFTMAX_XENT_SUM,
    LOSS__FIXED /* the kernels of the program without options; then softmax_xent_rows by dtype */
};
static const char *const loss_names[LOSS__FIXED] = {
    "softmax_xent_forward", "mse_forward",    "mse_backward",
    "argmax_rows",          "softmax_forward", "softmax_xent_sum"};

/* The most lanes of softmax_xent_rows' row sums (CLT_XENT_LANES in cl/loss.cl; the default). */
#define XENT_LANES 256

/* The ctx's kernel `which` of cl/loss.cl, built on first use. */
static clt_status loss_kernel(clt_ctx *ctx, int which, cl_kernel *k)
{
    return clt__op_kernel_by_index(ctx, CLT__OPF_loss, which, NULL, loss_names, k);
}

/* The ctx's softmax_xent_rows for logits stored as d, or its CPU variant softmax_xent_rows_vec
 * when vec, built on first use. */
static clt_status rows_kernel(clt_ctx *ctx, clt_dtype d, bool vec, cl_kernel *k)
{
    cl_kernel *slot = NULL;
    clt_status st = clt__op_slot(ctx, CLT__OPF_loss,
                                 LOSS__FIXED + (vec ? CLT__FLOAT_DTYPES : 0) + (int)d, &slot);
    if (st == CLT_OK && !*slot) {
        char opts[32];
        clt__opts_loss(opts, sizeof opts, d);
        st = clt__kernel(ctx, "loss", opts, vec ? "softmax_xent_rows_vec" : "softmax_xent_rows",
                         slot);
    }
    if (st == CLT_OK) *k = *slot;
    return st;
}

/* The arguments of softmax cross-entropy: logits (B, N) f32, f16 or bf16, labels (B) i32,
 * dlogits (as logits) or NULL, the accumulators, smoothing in [0, 1]. */
static clt_status xent_check(const clt_tensor *logits, const clt_tensor *labels, float smoothing,
                             const clt_tensor *dlogits, const clt_tensor *loss_acc,
                             const clt_tensor *correct_acc, const char *op, size_t *B, size_t *N)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(logits);
    CLT_TRY(clt_tensor_same_ctx(logits, labels));
    CLT_TRY(clt__nn_need_float(logits, op, "logits"));
    CLT_TRY(clt__nn_need_dtype(labels, CLT_DTYPE_I32, op, "labels"));
    CLT_TRY(rows_of(logits, op, "logits", B, N));
    CLT_TRY(clt__nn_need_numel(labels, *B, op, "labels (one per row of logits)"));
    if (dlogits) {
        CLT_TRY(clt_tensor_same_ctx(logits, dlogits));
        CLT_TRY(clt__nn_need_dtype(dlogits, clt_tensor_dtype(logits), op, "dlogits (as logits)"));
        CLT_TRY(clt__nn_need_numel(dlogits, *B * *N, op, "dlogits (as logits)"));
    }
    CLT_TRY(check_acc(logits, loss_acc, op, "loss_acc"));
    if (correct_acc) CLT_TRY(check_acc(logits, correct_acc, op, "correct_acc"));
    if (!(smoothing >= 0.0f && smoothing <= 1.0f))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: label smoothing %g is outside [0, 1]", op,
                 (double)smoothing);
fail:
    return st;
}

/* The small-vocabulary kernel: one work-group for the whole batch, a row per work-item. */
static clt_status xent_small(const clt_tensor *logits, const clt_tensor *labels, size_t B,
                             size_t N, float smoothing, float loss_scale, float grad_scale,
                             clt_tensor *dlogits, clt_tensor *loss_acc, clt_tensor *correct_acc)
{
    static const char op[] = "softmax_xent";
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(logits);
    cl_kernel k;
    /* Unused outputs get a harmless stand-in buffer; the flags keep the kernel off them. */
    cl_mem lgm = clt_tensor_mem(logits), lbm = clt_tensor_mem(labels),
           dlm = dlogits ? clt_tensor_mem(dlogits) : lgm, lam = clt_tensor_mem(loss_acc),
           cam = correct_acc ? clt_tensor_mem(correct_acc) : lam;
    cl_ulong lgo = clt_tensor_offset(logits), lbo = clt_tensor_offset(labels),
             dlo = dlogits ? clt_tensor_offset(dlogits) : 0, lao = clt_tensor_offset(loss_acc),
             cao = correct_acc ? clt_tensor_offset(correct_acc) : 0, b = B;
    cl_uint n = (cl_uint)N;
    cl_int want_grad = dlogits != NULL, want_correct = correct_acc != NULL;
    CLT_TRY(loss_kernel(ctx, SOFTMAX_XENT_FORWARD, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(lgm), CLT__ARG(lgo), CLT__ARG(lbm), CLT__ARG(lbo),
                      CLT__ARG(b), CLT__ARG(n), CLT__ARG(smoothing), CLT__ARG(loss_scale),
                      CLT__ARG(grad_scale), CLT__ARG(dlm), CLT__ARG(dlo), CLT__ARG(want_grad),
                      CLT__ARG(lam), CLT__ARG(lao), CLT__ARG(cam), CLT__ARG(cao),
                      CLT__ARG(want_correct)));
    CLT_TRY(clt__nn_launch_groups(ctx, k, 1, op));
fail:
    return st;
}

/* The lanes of a row's sums in softmax_xent_rows: the power of two at or above N, at most
 * XENT_LANES; from N alone, so that the bits never depend on the launch. */
static cl_uint xent_lanes(size_t N)
{
    cl_uint lanes = 1;
    while (lanes < N && lanes < XENT_LANES)
        lanes *= 2;
    return lanes;
}

/* The ctx's own per-row buffer for B rows (2 B floats), created or grown on demand. */
static clt_status ctx_rows(clt_ctx *ctx, size_t B, clt_tensor **out)
{
    struct clt__ops_ctx *o = NULL;
    clt_status st = clt__ops_state(ctx, &o);
    if (st != CLT_OK) return st;
    const size_t n = 2 * B;
    if (!o->xent_rows || clt_tensor_numel(o->xent_rows) < n) {
        clt_tensor *t = NULL;
        st = clt_tensor_create(&t, ctx, CLT_DTYPE_F32, 1, &n, CLT_MEM_WORKSPACE);
        if (st != CLT_OK) return st;
        clt_tensor_free(o->xent_rows); /* kernels in flight keep its buffer alive */
        o->xent_rows = t;
    }
    *out = o->xent_rows;
    return CLT_OK;
}

/* The large-vocabulary kernels: one work-group per row (on CPU devices one work-item per row,
 * agreeing to the rounding of exp: cl/loss.cl says why; CLTRAIN_XENT=group|vec forces either)
 * writes its loss and hit into rows, then one work-group adds them to the accumulators. */
static clt_status xent_rows(const clt_tensor *logits, const clt_tensor *labels, size_t B,
                            size_t N, float smoothing, float loss_scale, float grad_scale,
                            clt_tensor *dlogits, clt_tensor *loss_acc, clt_tensor *correct_acc,
                            clt_tensor *rows)
{
    clt_status st = CLT_OK;
    clt_ctx *ctx = clt_tensor_ctx(logits);
    cl_kernel k;
    cl_mem lgm = clt_tensor_mem(logits), lbm = clt_tensor_mem(labels),
           dlm = dlogits ? clt_tensor_mem(dlogits) : lgm, rwm = clt_tensor_mem(rows),
           lam = clt_tensor_mem(loss_acc), cam = correct_acc ? clt_tensor_mem(correct_acc) : lam;
    cl_ulong lgo = clt_tensor_offset(logits), lbo = clt_tensor_offset(labels),
             dlo = dlogits ? clt_tensor_offset(dlogits) : 0, rwo = clt_tensor_offset(rows),
             lao = clt_tensor_offset(loss_acc),
             cao = correct_acc ? clt_tensor_offset(correct_acc) : 0, b = B;
    cl_uint n = (cl_uint)N, lanes = xent_lanes(N);
    cl_int want_grad = dlogits != NULL, want_correct = correct_acc != NULL;
    const bool vec = clt__nn_rows_vec(ctx, "CLTRAIN_XENT");
    CLT_TRY(rows_kernel(ctx, clt_tensor_dtype(logits), vec, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(lgm), CLT__ARG(lgo), CLT__ARG(lbm), CLT__ARG(lbo),
                      CLT__ARG(b), CLT__ARG(n), CLT__ARG(lanes), CLT__ARG(smoothing),
                      CLT__ARG(grad_scale), CLT__ARG(dlm), CLT__ARG(dlo), CLT__ARG(want_grad),
                      CLT__ARG(rwm), CLT__ARG(rwo)));
    if (vec) {
        CLT_TRY(clt__nn_launch_items(ctx, k, B, "softmax_xent_rows_vec"));
    } else {
        size_t local = clt__local_size(ctx, k);
        if (local > lanes) local = lanes; /* more would idle */
        CLT_TRY(clt__enqueue(ctx, k, B * local, local, "softmax_xent_rows"));
    }
    CLT_TRY(loss_kernel(ctx, SOFTMAX_XENT_SUM, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(rwm), CLT__ARG(rwo), CLT__ARG(b), CLT__ARG(loss_scale),
                      CLT__ARG(lam), CLT__ARG(lao), CLT__ARG(cam), CLT__ARG(cao),
                      CLT__ARG(want_correct)));
    CLT_TRY(clt__nn_launch_groups(ctx, k, 1, "softmax_xent_sum"));
fail:
    return st;
}

clt_status clt_op_softmax_xent(const clt_tensor *logits, const clt_tensor *labels, float smoothing,
                               float loss_scale, float grad_scale, clt_tensor *dlogits,
                               clt_tensor *loss_acc, clt_tensor *correct_acc)
{
    clt_status st = CLT_OK;
    CLT_ASSERT(logits && labels && loss_acc);
    size_t B = 0, N = 0;
    clt_tensor *rows = NULL;
    CLT_TRY(xent_check(logits, labels, smoothing, dlogits, loss_acc, correct_acc, "softmax_xent",
                       &B, &N));
    if (B == 0) goto fail; /* nothing to add */
    if (N < CLT__XENT_ROWS_MIN_N && clt_tensor_dtype(logits) == CLT_DTYPE_F32) {
        CLT_TRY(xent_small(logits, labels, B, N, smoothing, loss_scale, grad_scale, dlogits,
                           loss_acc, correct_acc));
    } else {
        CLT_TRY(ctx_rows(clt_tensor_ctx(logits), B, &rows));
        CLT_TRY(xent_rows(logits, labels, B, N, smoothing, loss_scale, grad_scale, dlogits,
                          loss_acc, correct_acc, rows));
    }
fail:
    return st;
}

clt_status clt_op_softmax_xent_rows(const clt_tensor *logits, const clt_tensor *labels,
                                    float smoothing, float loss_scale, float grad_scale,
                                    clt_tensor *dlogits, clt_tensor *loss_acc,
                                    clt_tensor *correct_acc, clt_tensor *rows)
{
    static const char op[] = "softmax_xent_rows";
    clt_status st = CLT_OK;
    CLT_ASSERT(logits && labels && loss_acc);
    clt_ctx *ctx = clt_tensor_ctx(logits);
    size_t B = 0, N = 0;
    CLT_TRY(xent_check(logits, labels, smoothing, dlogits, loss_acc, correct_acc, op, &B, &N));
    if (rows) {
        CLT_TRY(clt_tensor_same_ctx(logits, rows));
        CLT_TRY(clt__nn_need_dtype(rows, CLT_DTYPE_F32, op, "rows"));
        if (clt_tensor_numel(rows) < 2 * B)
            CLT_FAIL(ctx, CLT_ERR_SHAPE, "%s: rows has %zu elements; 2 per row (%zu) needed", op,
                     clt_tensor_numel(rows), 2 * B);
    }
    if (B == 0) goto fail;
    if (!rows) CLT_TRY(ctx_rows(ctx, B, &rows));
    CLT_TRY(xent_rows(logits, labels, B, N, smoothing, loss_scale, grad_scale, dlogits, loss_acc,
                      correct_acc, rows));
fail:
    return st;
}

clt_status clt_op_mse(const clt_tensor *pred, const clt_tensor *target, float loss_scale,
                      float grad_scale, clt_tensor *dpred, clt_tensor *loss_acc)
{
    static const char op[] = "mse";
    clt_status st = CLT_OK;
    CLT_ASSERT(pred && target && loss_acc);
    clt_ctx *ctx = clt_tensor_ctx(pred);
    cl_kernel k;
    CLT_TRY(clt__check_pair(pred, target, true, op));
    CLT_TRY(clt__nn_need_dtype(pred, CLT_DTYPE_F32, op, "pred"));
    if (dpred) {
        CLT_TRY(clt__check_pair(pred, dpred, true, op));
    }
    CLT_TRY(check_acc(pred, loss_acc, op, "loss_acc"));
    cl_mem pm = clt_tensor_mem(pred), tm = clt_tensor_mem(target), lam = clt_tensor_mem(loss_acc);
    cl_ulong po = clt_tensor_offset(pred), to = clt_tensor_offset(target),
             lao = clt_tensor_offset(loss_acc), n = clt_tensor_numel(pred);
    if (n == 0) goto fail;
    /* the loss first: dpred may be pred */
    CLT_TRY(loss_kernel(ctx, MSE_FORWARD, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(pm), CLT__ARG(po), CLT__ARG(tm), CLT__ARG(to), CLT__ARG(n),
                      CLT__ARG(loss_scale), CLT__ARG(lam), CLT__ARG(lao)));
    CLT_TRY(clt__nn_launch_groups(ctx, k, 1, op));
    if (dpred) {
        cl_mem dm = clt_tensor_mem(dpred);
        cl_ulong dof = clt_tensor_offset(dpred);
        float g2 = 2.0f * grad_scale;
        CLT_TRY(loss_kernel(ctx, MSE_BACKWARD, &k));
        CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(dm), CLT__ARG(dof), CLT__ARG(pm), CLT__ARG(po),
                          CLT__ARG(tm), CLT__ARG(to), CLT__ARG(n), CLT__ARG(g2)));
        CLT_TRY(clt__launch_1d(ctx, k, (size_t)n, op));
    }
fail:
    return st;
}

/* Kernels of the form k(out, out_off, x, x_off, B, N), one work-item per row. */
static clt_status launch_rows(clt_ctx *ctx, int which, clt_tensor *out, const clt_tensor *x,
                              size_t B, size_t N, const char *op)
{
    clt_status st = CLT_OK;
    cl_kernel k;
    cl_mem om = clt_tensor_mem(out), xm = clt_tensor_mem(x);
    cl_ulong oo = clt_tensor_offset(out), xo = clt_tensor_offset(x), b = B;
    cl_uint n = (cl_uint)N;
    CLT_TRY(loss_kernel(ctx, which, &k));
    CLT_TRY(CLT__ARGS(ctx, k, CLT__ARG(om), CLT__ARG(oo), CLT__ARG(xm), CLT__ARG(xo), CLT__ARG(b),
                      CLT__ARG(n)));
    CLT_TRY(clt__launch_1d(ctx, k, B, op));
fail:
    return st;
}

clt_status clt_op_argmax(clt_tensor *out, const clt_tensor *x)
{
    static const char op[] = "argmax";
    clt_status st = CLT_OK;
    CLT_ASSERT(out && x);
    size_t B = 0, N = 0;
    CLT_TRY(clt_tensor_same_ctx(out, x));
    CLT_TRY(clt__nn_need_dtype(out, CLT_DTYPE_I32, op, "out"));
    CLT_TRY(clt__nn_need_dtype(x, CLT_DTYPE_F32, op, "x"));
    CLT_TRY(rows_of(x, op, "x", &B, &N));
    CLT_TRY(clt__nn_need_numel(out, B, op, "out (one per row of x)"));
    CLT_TRY(launch_rows(clt_tensor_ctx(x), ARGMAX_ROWS, out, x, B, N, op));
fail:
    return st;
}

clt_status clt_op_softmax(clt_tensor *out, const clt_tensor *x)
{
    static const char op[] = "softmax";
    clt_status st = CLT_OK;
    CLT_ASSERT(out && x);
    size_t B = 0, N = 0;
    CLT_TRY(clt__check_pair(out, x, true, op));
    CLT_TRY(clt__nn_need_dtype(x, CLT_DTYPE_F32, op, "x"));
    CLT_TRY(rows_of(x, op, "x", &B, &N));
    CLT_TRY(launch_rows(clt_tensor_ctx(x), SOFTMAX_FORWARD, out, x, B, N, op));
fail:
    return st;
}

void clt__opts_loss(char *dst, size_t n, clt_dtype x)
{
    /* f32 is the program without options, which the other kernels come from */
    if (x == CLT_DTYPE_F32)
        snprintf(dst, n, "%s", "");
    else
        snprintf(dst, n, "-DX_DTYPE=%d", (int)x);
}

static void loss_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    char o[32];
    for (int x = 0; x < CLT__FLOAT_DTYPES; x++) {
        clt__opts_loss(o, sizeof o, (clt_dtype)x);
        fn("loss", o, user);
    }
}

const struct clt__op_family clt__family_loss = {
    .name = "loss",
    .sources = "loss",
    /* the fixed kernels, softmax_xent_rows by dtype, softmax_xent_rows_vec by dtype */
    .slots = LOSS__FIXED + 2 * CLT__FLOAT_DTYPES,
    .variants = loss_variants,
};

/* The public losses (cltrain/loss.h): the ops themselves, under the names a user's loop calls. */
clt_status clt_loss_softmax_xent(const clt_tensor *logits, const clt_tensor *labels,
                                 float smoothing, float loss_scale, float grad_scale,
                                 clt_tensor *dlogits, clt_tensor *loss_acc, clt_tensor *correct_acc)
{
    return clt_op_softmax_xent(logits, labels, smoothing, loss_scale, grad_scale, dlogits, loss_acc,
                               correct_acc);
}

clt_status clt_loss_mse(const clt_tensor *pred, const clt_tensor *target, float loss_scale,
                        float grad_scale, clt_tensor *dpred, clt_tensor *loss_acc)
{
    return clt_op_mse(pred, target, loss_scale, grad_scale, dpred, loss_acc);
}
