/* C wrappers of cl/loss.cl: softmax cross-entropy (loss, gradient, correct count), mean squared
 * error, softmax and argmax over the rows (last dimension) of f32 tensors. The loss totals are
 * reduced on the device by one work-group in a fixed order (see cl/loss.cl): the same bits on
 * every run and for every work-group size, no scratch buffer, no host wait. The public losses
 * (cltrain/loss.h) are the first two. */
#include "ops/nn_internal.h"

#include "cltrain/loss.h"

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

enum { SOFTMAX_XENT_FORWARD, MSE_FORWARD, MSE_BACKWARD, ARGMAX_ROWS, SOFTMAX_FORWARD };
static const char *const loss_names[] = {"softmax_xent_forward", "mse_forward", "mse_backward",
                                         "argmax_rows", "softmax_forward"};

/* The ctx's kernel `which` of cl/loss.cl, built on first use. */
static clt_status loss_kernel(clt_ctx *ctx, int which, cl_kernel *k)
{
    return clt__op_kernel_by_index(ctx, CLT__OPF_loss, which, NULL, loss_names, k);
}

clt_status clt_op_softmax_xent(const clt_tensor *logits, const clt_tensor *labels, float smoothing,
                               float loss_scale, float grad_scale, clt_tensor *dlogits,
                               clt_tensor *loss_acc, clt_tensor *correct_acc)
{
    static const char op[] = "softmax_xent";
    clt_status st = CLT_OK;
    CLT_ASSERT(logits && labels && loss_acc);
    clt_ctx *ctx = clt_tensor_ctx(logits);
    cl_kernel k;
    size_t B = 0, N = 0;
    CLT_TRY(clt_tensor_same_ctx(logits, labels));
    CLT_TRY(clt__nn_need_dtype(logits, CLT_DTYPE_F32, op, "logits"));
    CLT_TRY(clt__nn_need_dtype(labels, CLT_DTYPE_I32, op, "labels"));
    CLT_TRY(rows_of(logits, op, "logits", &B, &N));
    CLT_TRY(clt__nn_need_numel(labels, B, op, "labels (one per row of logits)"));
    if (dlogits) {
        CLT_TRY(clt_tensor_same_ctx(logits, dlogits));
        CLT_TRY(clt__nn_need_dtype(dlogits, CLT_DTYPE_F32, op, "dlogits"));
        CLT_TRY(clt__nn_need_numel(dlogits, B * N, op, "dlogits (as logits)"));
    }
    CLT_TRY(check_acc(logits, loss_acc, op, "loss_acc"));
    if (correct_acc) CLT_TRY(check_acc(logits, correct_acc, op, "correct_acc"));
    if (!(smoothing >= 0.0f && smoothing <= 1.0f))
        CLT_FAIL(ctx, CLT_ERR_INVALID_ARG, "%s: label smoothing %g is outside [0, 1]", op,
                 (double)smoothing);
    if (B == 0) goto fail; /* nothing to add */

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

static void loss_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user)
{
    (void)dev;
    fn("loss", "", user);
}

const struct clt__op_family clt__family_loss = {
    .name = "loss",
    .sources = "loss",
    .slots = (int)(sizeof loss_names / sizeof *loss_names),
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
