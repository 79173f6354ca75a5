/* Private to the library (the ops' interface to the layers above, the tuner and the tests).
 * Operations on device tensors, enqueued on the ctx's compute queue (asynchronous: they return
 * once enqueued). Every op checks that its tensors share one ctx (CLT_ERR_DEVICE_MISMATCH
 * otherwise, naming both devices) and have compatible shapes and dtypes (CLT_ERR_SHAPE).
 * Not thread-safe (per ctx). */
#ifndef CLTRAIN_OPS_INTERNAL_H
#define CLTRAIN_OPS_INTERNAL_H

#include "cltrain/opencl.h"
#include "cltrain/tensor.h"

/* x[:] = value, converted to x's dtype (round to nearest even; saturating for i32/u8). */
clt_status clt_op_fill(clt_tensor *x, float value);
/* dst[:] = src[:]: same dtype and element count (shapes may differ). */
clt_status clt_op_copy(clt_tensor *dst, const clt_tensor *src);
/* dst[:] = src[:] converted between f32, f16 and bf16 (round to nearest even); same count. */
clt_status clt_op_cast(clt_tensor *dst, const clt_tensor *src);
/* y[:] = alpha * x[:]; y may be x. Float dtypes; same dtype and count. */
clt_status clt_op_scale(clt_tensor *y, const clt_tensor *x, float alpha);
/* y[:] += alpha * x[:]. Float dtypes; same dtype and count. */
clt_status clt_op_axpy(clt_tensor *y, float alpha, const clt_tensor *x);

/* ---- GEMM (own kernels or CLBlast) ----------------------------------------------------------- */
typedef enum clt_trans { CLT_NO_TRANS = 0, CLT_TRANS = 1 } clt_trans;

/* C = alpha * op(A) * op(B) + beta * C on row-major tensors: op(A) is (M, K), op(B) is
 * (K, N), C is (M, N); A is stored (M, K), or (K, M) when ta is CLT_TRANS; likewise B. Shapes
 * are given explicitly; each tensor must hold at least the elements the shapes imply.
 * Each of A, B and C may be f32, f16 or bf16 independently (mixed precision): 16-bit values
 * are storage only, converted to f32 as they are loaded, summed in f32 and rounded (to nearest
 * even) once when C is stored. With any 16-bit operand the GEMM runs cltrain's own packed
 * direct kernel (CPU) or tiled kernel (GPU): the ctx's choice when it is one of those, else
 * the device's built-in one (never CLBlast, whose half routines need cl_khr_fp16). */
clt_status clt_op_gemm(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K, float alpha,
                       const clt_tensor *A, const clt_tensor *B, float beta, clt_tensor *C);
/* C = op(A) * op(B) + bias, the bias (N elements: f32, f16 or bf16) added to every row: a
 * linear layer's forward. The panel family adds it in its store (the fused epilogue: C is
 * written once); any other kernel is followed by clt_op_bias_add. In f32 both give the same
 * bits; with a 16-bit C the fused form rounds once, not twice. */
clt_status clt_op_gemm_bias(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K,
                            const clt_tensor *A, const clt_tensor *B, const clt_tensor *bias,
                            clt_tensor *C);
/* The fused epilogue of a linear layer's forward: C = act(op(A) op(B) + bias), and z =
 * op(A) op(B) + bias too when z is given (the pre-activation that gelu's and silu's backward
 * read). Or, with `saved`, of its backward through the activation before it: C = op(A) op(B)
 * * act'(.), the input gradient dy W taken on through the activation (act's backward from the
 * tensor it saved, clt_op_act_saved), so that no pass of its own reads it back. The panel
 * family, the tiled kernel and the direct kernel (in layouts NT and NN; with f32 operands an
 * f32 bias, with 16-bit ones its packed form, the CPUs' 16-bit choice, any) apply either in
 * their store (C and z written once, nothing read back); any other kernel, or a panel GEMM that
 * cannot take it, is followed by clt_op_bias_add and clt_op_act_forward_alpha, or
 * clt_op_act_backward_alpha in place. */
struct clt_gemm_epilogue {
    const clt_tensor *bias;  /* N elements, f32, f16 or bf16; NULL: none */
    int act;                 /* a clt_act, or -1: none */
    float slope;             /* leakyrelu's slope (finite) */
    clt_tensor *z;           /* another tensor of C's dtype and at least M x N elements, or NULL;
                                only with an activation */
    const clt_tensor *saved; /* the backward form: what act's backward reads, another tensor of
                                C's dtype and at least M x N elements, laid out as C; only with
                                an activation, and neither a bias nor z. NULL: the forward */
    clt_tensor *sums;        /* set by clt_op_gemm_tn_sums only (alone: none of the above) */
    float sums_beta;
};
/* C = epilogue(op(A) op(B)), with CLT_ERR_SHAPE or CLT_ERR_INVALID_ARG for an epilogue that
 * breaks the rules above. */
clt_status clt_op_gemm_epilogue(clt_trans ta, clt_trans tb, size_t M, size_t N, size_t K,
                                const clt_tensor *A, const clt_tensor *B,
                                const struct clt_gemm_epilogue *e, clt_tensor *C);
/* A linear layer's weight and bias gradients at once: C = alpha * A^T B + beta * C (layout TN:
 * A stored (K, M), B (K, N)) and sums = sums_beta * sums + A's column sums (M elements, f32; 0
 * overwrites, as clt_op_bias_grad). The direct kernel's outer-product forms (f32 unpacked, any
 * dtype packed) add them up, k in order, in the work-items of their first column block (a
 * launch less); any other kernel is followed by clt_op_bias_grad (another order of the same
 * sums). */
clt_status clt_op_gemm_tn_sums(size_t M, size_t N, size_t K, float alpha, const clt_tensor *A,
                               const clt_tensor *B, float beta, clt_tensor *C, clt_tensor *sums,
                               float sums_beta);

/* ---- neural-network layers (cl/activation.cl, cl/linear.cl, cl/loss.cl, cl/dropout.cl,
 * cl/input.cl; wrappers in src/ops/activation.c, linear.c, loss.c, dropout.c, input.c) -------
 * Tensors are f32 unless stated; a (B, N) tensor may have any number of dimensions, its rows
 * being the last one. Each op checks ctx, dtypes and element counts (CLT_ERR_DEVICE_MISMATCH,
 * CLT_ERR_SHAPE, CLT_ERR_INVALID_ARG for a bad scalar, with a message naming the op and the
 * argument) before enqueueing anything; NULL for a required tensor is a programmer error
 * (CLT_ASSERT). None of them waits for the device. Partially overlapping views are undefined;
 * the exact aliases each op allows are listed. */
typedef enum clt_act {
    CLT_ACT_RELU = 0,
    CLT_ACT_GELU,
    CLT_ACT_TANH,
    CLT_ACT_SIGMOID,
    CLT_ACT_SILU,      /* x * sigmoid(x), as PyTorch's nn.SiLU */
    CLT_ACT_LEAKYRELU, /* x > 0 ? x : alpha * x, as PyTorch's nn.LeakyReLU(alpha) */
    CLT_ACT__COUNT
} clt_act;

/* y = act(x), elementwise over f32, f16 or bf16 (y and x the same dtype and count); y may be x.
 * gelu is the tanh approximation (PyTorch's approximate="tanh"); leakyrelu has the slope 0.01
 * (nn.LeakyReLU's default; clt_op_act_forward_alpha takes another). */
clt_status clt_op_act_forward(clt_act a, clt_tensor *y, const clt_tensor *x);
/* dx = dy * act'(x), given the forward input x and output y, either of which may be NULL when
 * the activation does not need it: relu uses x, or y when x is NULL (after an in-place
 * forward); leakyrelu likewise, y only for a slope >= 0 (whose y has x's sign); gelu and silu
 * need x; tanh and sigmoid need y (CLT_ERR_INVALID_ARG if missing). dx may be dy. */
clt_status clt_op_act_backward(clt_act a, clt_tensor *dx, const clt_tensor *dy, const clt_tensor *x,
                               const clt_tensor *y);
/* clt_op_act_forward and clt_op_act_backward with the activation's parameter `alpha`:
 * leakyrelu's slope for negative inputs (finite, else CLT_ERR_INVALID_ARG); the other
 * activations ignore it. */
clt_status clt_op_act_forward_alpha(clt_act a, float alpha, clt_tensor *y, const clt_tensor *x);
clt_status clt_op_act_backward_alpha(clt_act a, float alpha, clt_tensor *dx, const clt_tensor *dy,
                                     const clt_tensor *x, const clt_tensor *y);
/* Which of the forward's input x and output y act's backward reads (the rules of
 * clt_op_act_backward; a a valid clt_act), or NULL when that one is NULL. */
const clt_tensor *clt_op_act_saved(clt_act a, float alpha, const clt_tensor *x,
                                   const clt_tensor *y);
/* Whether act's backward can take its derivative from the forward's output alone (relu, tanh,
 * sigmoid, leakyrelu with a slope >= 0), so that a layer fusing it may drop its input; gelu and
 * silu read their input. The one place that says so: src/ops/activation.c's table. */
bool clt_op_act_backward_reads_y(clt_act a, float alpha);
/* y (B, OUT) += bias (OUT), broadcast over rows; y's last dimension must be OUT. y and bias
 * may each be f32, f16 or bf16 (f32 arithmetic, y rounded once). */
clt_status clt_op_bias_add(clt_tensor *y, const clt_tensor *bias);
/* db (OUT) f32 = beta * db + sum over rows of dy (B, OUT) (f32, f16 or bf16, summed in f32);
 * beta = 0 overwrites db without reading
 * it, beta = 1 accumulates. Deterministic: the summation order is fixed by the shape alone. */
clt_status clt_op_bias_grad(clt_tensor *db, const clt_tensor *dy, float beta);
/* Softmax cross-entropy on logits (B, N) with i32 labels (B), label smoothing `smoothing` in
 * [0, 1] as PyTorch: row loss = (1 - s) * -log p[label] + s * mean_j(-log p[j]). Adds
 * loss_scale * (sum over rows of the row loss) to loss_acc[0] (f32, 1 element; pass 1/B for a
 * mean) and, if correct_acc (f32, 1 element) is non-NULL, the number of rows whose argmax (as
 * clt_op_argmax) equals the label to correct_acc[0]. If dlogits (B, N) is non-NULL, writes
 * dlogits = grad_scale * (softmax - ((1 - s) * onehot + s / N)); dlogits may be logits.
 * Numerically stable (the row maximum is subtracted). Deterministic: the same bits on every run
 * and for every work-group size (no atomics; one work-group reduces the rows in a fixed order).
 * A label outside [0, N) is not detected on the host: its row's loss and gradient are NaN.
 * B = 0 adds nothing. logits and dlogits are f32, or f16/bf16 (both the same dtype), which go to
 * clt_op_softmax_xent_rows as does N >= CLT__XENT_ROWS_MIN_N; smaller f32 rows go to one
 * work-group for the whole batch, a row per work-item (the kernel of image classifiers). */
clt_status clt_op_softmax_xent(const clt_tensor *logits, const clt_tensor *labels, float smoothing,
                               float loss_scale, float grad_scale, clt_tensor *dlogits,
                               clt_tensor *loss_acc, clt_tensor *correct_acc);
/* The class count from which clt_op_softmax_xent takes the large-vocabulary kernels: byte and
 * character vocabularies and up; a row of 10 classes is better done by one work-item. */
#define CLT__XENT_ROWS_MIN_N 256
/* clt_op_softmax_xent over large vocabularies (V up to 2^31 - 1): one work-group per row reads
 * the row once for its log-sum-exp with a running maximum (online softmax) and its argmax, then
 * writes the gradient in a second pass; each row's loss and hit go to rows (f32, at least 2 B
 * elements: a layer's own, accounted buffer; NULL: the ctx's own, created or grown here and kept
 * until the ctx ends), and one work-group adds them in a fixed order. Logits and dlogits f32, f16
 * or bf16 storage (one dtype), f32 arithmetic. The same results, statuses and guarantees as
 * clt_op_softmax_xent; CLT_ERR_SHAPE for a rows tensor too small or not f32. */
clt_status clt_op_softmax_xent_rows(const clt_tensor *logits, const clt_tensor *labels,
                                    float smoothing, float loss_scale, float grad_scale,
                                    clt_tensor *dlogits, clt_tensor *loss_acc,
                                    clt_tensor *correct_acc, clt_tensor *rows);
/* Squared error between pred and target (f32, the same element count): adds
 * loss_scale * sum of squared differences to loss_acc[0] (f32, 1 element; pass 1/numel for
 * PyTorch's mean) and, if dpred is non-NULL, writes dpred = grad_scale * 2 * (pred - target);
 * dpred may be pred (the loss is computed first). Deterministic like softmax_xent. */
clt_status clt_op_mse(const clt_tensor *pred, const clt_tensor *target, float loss_scale,
                      float grad_scale, clt_tensor *dpred, clt_tensor *loss_acc);
/* Inverted dropout over f32, f16 or bf16: y = keep ? x / (1 - p) : 0 where element i is kept
 * when clt_rng_uniform(seed, stream, i) >= p (rng.h's Philox; the same mask on every device and
 * on the host; i counts from the tensor's first element). p in [0, 1) (CLT_ERR_INVALID_ARG
 * otherwise); p = 0 is the identity. Backward applies the same mask and scale to dy (pass the
 * forward's p, seed and stream). y may be x; dx may be dy. A dropped NaN becomes 0. */
clt_status clt_op_dropout_forward(clt_tensor *y, const clt_tensor *x, float p, uint64_t seed,
                                  uint64_t stream);
clt_status clt_op_dropout_backward(clt_tensor *dx, const clt_tensor *dy, float p, uint64_t seed,
                                   uint64_t stream);
/* out (B) i32 = index of the maximum of each row of x (B, N). The first maximum wins (ties go to
 * the lowest index) and NaN counts as larger than every number, so a row with a NaN gives the
 * index of its first NaN, as torch.argmax. */
clt_status clt_op_argmax(clt_tensor *out, const clt_tensor *x);
/* out (B, N) = softmax of the rows of x (B, N), the row maximum subtracted; out may be x. */
clt_status clt_op_softmax(clt_tensor *out, const clt_tensor *x);
/* y (B, F) f32 = x_u8 (B, F) * scale[f] + shift[f] with scale, shift f32 (F): converts raw
 * bytes (pixels) and standardises them on the device, e.g. scale = 1 / (255 std),
 * shift = -mean / std. x and y have the same element count, a multiple of F; x's shape may be
 * any (e.g. (B, 28, 28) with F = 784). */
clt_status clt_op_u8_to_f32(clt_tensor *y, const clt_tensor *x_u8, const clt_tensor *scale,
                            const clt_tensor *shift);

/* ---- data augmentation (cl/augment.cl, src/ops/augment.c) ---------------------------------- */
/* Per sample of an image batch: a horizontal flip (p = 1/2, when flip), a translation by dy, dx
 * uniform in [-shift, shift] with zero fill, and the zeroing of one cutout x cutout square
 * (centre uniform over the image, clipped), in that order; 0 turns a part off. Sample b draws
 * clt_rng_u32(seed, stream, (first + b) * 8 + k) (rng.h), k = 0: flip if the top bit is set;
 * 1, 2: dy, dx = u % (2 shift + 1) - shift; 3, 4: the centre row u % H, column u % W, the
 * square's first row centre - cutout / 2 (likewise columns). */
struct clt_augment_geom {
    size_t C, H, W; /* each sample is (C, H, W) */
    int flip;       /* 0 or 1 */
    int shift;      /* N >= 0 pixels */
    int cutout;     /* S >= 0 pixels */
};
/* y (B, C, H, W) f32 = the augmentation of x (B, C, H, W) f32 (same count, a multiple of
 * C H W, else CLT_ERR_SHAPE); y must not overlap x. CLT_ERR_INVALID_ARG for a negative shift
 * or cutout, shift above 2^20, or H, W >= 2^31. Data movement only: bit-exact. */
clt_status clt_op_augment(clt_tensor *y, const clt_tensor *x, const struct clt_augment_geom *g,
                          uint64_t seed, uint64_t stream, uint64_t first);

/* ---- pooling (cl/pool.cl, src/ops/pool.c) -------------------------------------------------- */
typedef enum clt_pool {
    CLT_POOL_MAX = 0, /* nn.MaxPool2d: the first maximum of each window in row-major order (a
                         NaN wins, as PyTorch); backward routes each gradient to it */
    CLT_POOL_AVG,     /* nn.AvgPool2d: the mean of each window */
    CLT_POOL__COUNT
} clt_pool;
/* Windows of kh x kw over the (H, W) planes of a (B, C, H, W) tensor with strides sh, sw, no
 * padding, floor mode: OH = (H - kh) / sh + 1, OW = (W - kw) / sw + 1 (a global average pool
 * is kh = H, kw = W). */
struct clt_pool_geom {
    size_t C, H, W;
    int kh, kw, sh, sw;
};
/* y (B, C, OH, OW) = the max or mean of each window of x (B, C, H, W); B is numel(x) / (C H W)
 * (a whole number, else CLT_ERR_SHAPE), y must have B C OH OW elements; x and y f32, f16 or
 * bf16, the same dtype (fp32 arithmetic). y must not overlap x. CLT_ERR_INVALID_ARG for a window
 * that does not fit the planes or a stride < 1; CLT_ERR_SHAPE for H W >= 2^31. */
clt_status clt_op_pool_forward(clt_pool p, const struct clt_pool_geom *g, clt_tensor *y,
                               const clt_tensor *x);
/* dx (B, C, H, W) = the gradient of the forward given dy (B, C, OH, OW): each input element
 * sums, in a fixed order, the gradients of the windows that contain it (the windows whose
 * maximum it is, for max, which recomputes them from the forward input x; dy / (kh kw) for
 * avg, which ignores x: pass NULL). Elements in no window get 0. Deterministic, no atomics. dx,
 * dy (and x) the same float dtype; dx must not overlap dy or x. */
clt_status clt_op_pool_backward(clt_pool p, const struct clt_pool_geom *g, clt_tensor *dx,
                                const clt_tensor *dy, const clt_tensor *x);

/* ---- dynamic loss scaling (cl/amp.cl, src/ops/amp.c) ----------------------------------------
 * The device half of fp16 loss scaling (the scaler object, clt_scaler in optim.h, drives it).
 * `state` is an i32 tensor of CLT_AMP_STATE_LEN elements, not a view: [0] the scale (the bits
 * of an f32), [1] found_inf (non-zero after an unscale saw inf or NaN), [2] the growth tracker
 * (clean steps since the scale last changed), [3] the number of skipped steps, [4] and [5]
 * scratch for the optimizer (Adam's bias corrections of the step, f32 bits). None of these
 * waits for the device. */
#define CLT_AMP_STATE_LEN 6
/* x (f32) *= scale, in place: the loss gradient before backward. */
clt_status clt_op_amp_scale(clt_tensor *x, const clt_tensor *state);
/* grads (f32) *= 1 / scale, in place, and found_inf = 1 if any result is inf or NaN. */
clt_status clt_op_amp_unscale(clt_tensor *grads, clt_tensor *state);
/* PyTorch's GradScaler.update: found_inf ? (scale *= backoff, tracker = 0, skipped += 1)
 * : (tracker += 1; at growth_interval: scale *= growth unless that overflows, tracker = 0);
 * then found_inf = 0. growth >= 1, backoff in (0, 1], growth_interval >= 1
 * (CLT_ERR_INVALID_ARG otherwise). One work-item. */
clt_status clt_op_amp_update(clt_tensor *state, float growth, float backoff, int growth_interval);

/* ---- batch assembly from resident data (cl/gather.cl) -------------------------------------- */
/* y (B, F) f32 = x[idx[b], :] * scale[f] + shift[f] for the rows idx (B) i32 of x (N, F) u8 or
 * f32; scale and shift are f32 (F) and not views. Indices must be in [0, N) (not checked on the
 * device). */
clt_status clt_op_gather_rows(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx,
                              const clt_tensor *scale, const clt_tensor *shift);
/* The same with `items` work-items per row, each converting every items-th block of 16 features
 * (0: the device's choice, one on a CPU and one per block elsewhere). Tests take each form. */
clt_status clt__op_gather_rows_items(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx,
                                     const clt_tensor *scale, const clt_tensor *shift,
                                     size_t items);
/* y (B) = x[idx[b]] for i32 or f32 x (N) (labels, targets); idx (B) i32. */
clt_status clt_op_gather(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx);

/* ---- 2-D convolution (cl/conv.cl, src/ops/conv.c) -------------------------------------------
 * As PyTorch's conv2d: x (B, C, H, W), w (OUT, C, K, K), bias (OUT) or NULL, y (B, OUT, OH, OW)
 * with OH = (H + 2P - K) / S + 1 (likewise OW), zero padding P, stride S. Computed as im2col
 * into the workspace, one GEMM and a permute to NCHW (see src/ops/conv.c for why). */
struct clt_conv_geom {
    size_t B, C, H, W; /* the input */
    size_t OUT, K, S, P;
};
/* OH or OW for an input side of `n` (0 when the kernel does not fit the padded input). */
size_t clt_conv_out_side(size_t n, size_t K, size_t S, size_t P);
/* Elements of the workspace the passes need: B*OH*OW*(C*K*K + OUT) + OUT*C*K*K (the im2col
 * matrix, the GEMM's (B*OH*OW, OUT) rows, then the transposed weights or weight gradient), or
 * more per sample where the implicit passes' padded copies are larger (few input channels);
 * linear in B, and with B = 0 the part that does not grow with the batch. */
size_t clt_op_conv2d_workspace(const struct clt_conv_geom *g);
/* y = conv2d(x, w) + bias. x, w, bias, y and ws may each be f32, f16 or bf16, except that bias
 * has ws's dtype (f32 sums, one rounding per store; 16-bit ws stores the im2col matrix and the
 * rows in 16 bits). ws holds at least clt_op_conv2d_workspace elements. */
clt_status clt_op_conv2d_forward(clt_tensor *y, const clt_tensor *x, const clt_tensor *w,
                                 const clt_tensor *bias, clt_tensor *ws,
                                 const struct clt_conv_geom *g);
/* Whether clt_op_conv2d_forward with these operands leaves in ws what the backward can reuse
 * (its cols_ready): x's im2col matrix, or the implicit forward's padded x, which the implicit
 * 3x3 weight gradient reads in place (src/ops/conv.c). */
bool clt_op_conv2d_leaves_cols(const clt_tensor *y, const clt_tensor *x, const clt_tensor *w,
                               const clt_tensor *ws, const struct clt_conv_geom *g);
/* The same for clt_op_conv2d_backward without dx: whether ws still holds it afterwards. */
bool clt_op_conv2d_backward_leaves_cols(const clt_tensor *dw, const clt_tensor *dy,
                                        const clt_tensor *x, const clt_tensor *w,
                                        const clt_tensor *ws, const struct clt_conv_geom *g);
/* From dy (B, OUT, OH, OW): dw (f32, OUT*C*K*K) = beta * dw + the weight gradient, db (f32, OUT;
 * NULL without bias) likewise, and dx (B, C, H, W) = the input gradient when dx is not NULL.
 * beta = 0 overwrites dw and db without reading them. Deterministic (no atomics). What the
 * weight gradient reads from x (the im2col matrix, or the padded x) is rebuilt, unless
 * cols_ready says ws still holds it: the last thing to write ws was clt_op_conv2d_forward of
 * this x with this geometry (a pass that reads something else ignores it). With dx, ws holds
 * something else afterwards; without, see clt_op_conv2d_backward_leaves_cols. */
clt_status clt_op_conv2d_backward(clt_tensor *dx, clt_tensor *dw, clt_tensor *db,
                                  const clt_tensor *dy, const clt_tensor *x, const clt_tensor *w,
                                  clt_tensor *ws, const struct clt_conv_geom *g, float beta,
                                  bool cols_ready);

/* ---- batch normalisation (cl/batchnorm.cl, src/ops/batchnorm.c) -----------------------------
 * As nn.BatchNorm2d over x (B, C, H, W) with S = H * W, or nn.BatchNorm1d over x (B, C) with
 * S = 1: per channel c over its n = B * S elements. x, y (one dtype) and dy, dx (one dtype) are
 * f32, f16 or bf16 storage; the statistics, weight, bias and running statistics are f32 (C)
 * (not views of different ctxs), arithmetic is f32. `stats` is f32 (4 C) scratch of the layer:
 * [mean | invstd | sum dy | sum dy xhat], written by the training forward and read by backward.
 * The per-channel reductions are one work-group per channel, deterministic, without atomics. */
struct clt_bn_geom {
    size_t C, S;    /* channels, elements per channel and sample (H * W, or 1) */
    float eps;      /* 1e-5 */
    float momentum; /* 0.1 */
    bool relu;      /* batch norm then relu in one (the forwards store max(y, 0); backward
                       takes dy where the recomputed y > 0, and needs the bias) */
};
/* Training forward: mean and biased variance of x per channel into stats (mean, 1 / sqrt(var +
 * eps)), y = (x - mean) invstd weight + bias, and running_mean and running_var updated with
 * momentum (running_var from the unbiased variance, n / (n - 1)) when both are given (NULL:
 * not updated). CLT_ERR_INVALID_ARG when n = B S is 1 (as PyTorch: "expected more than 1 value
 * per channel when training"). y may be x. */
clt_status clt_op_batchnorm_forward_train(clt_tensor *y, const clt_tensor *x,
                                          const clt_tensor *weight, const clt_tensor *bias,
                                          clt_tensor *stats, clt_tensor *running_mean,
                                          clt_tensor *running_var, const struct clt_bn_geom *g);
/* Evaluation forward: y = (x - running_mean) / sqrt(running_var + eps) weight + bias. y may
 * be x. */
clt_status clt_op_batchnorm_forward_eval(clt_tensor *y, const clt_tensor *x,
                                         const clt_tensor *weight, const clt_tensor *bias,
                                         const clt_tensor *running_mean,
                                         const clt_tensor *running_var,
                                         const struct clt_bn_geom *g);
/* Backward of the training forward whose stats are given, from dy and the forward's input x:
 * dweight = beta dweight + sum dy xhat, dbias = beta dbias + sum dy (beta 0 does not read them),
 * and, when dx is not NULL, dx = weight invstd (dy - mean(dy) - xhat mean(dy xhat)) (dx the dtype
 * of dy, not overlapping dy or x); with g->relu, dy is first masked by the forward's y > 0
 * (recomputed from x, weight and bias; bias may be NULL otherwise). */
clt_status clt_op_batchnorm_backward(clt_tensor *dx, clt_tensor *dweight, clt_tensor *dbias,
                                     const clt_tensor *dy, const clt_tensor *x,
                                     const clt_tensor *weight, const clt_tensor *bias,
                                     clt_tensor *stats, const struct clt_bn_geom *g, float beta);

/* ---- layer normalisation (cl/layernorm.cl, src/ops/layernorm.c) -----------------------------
 * As nn.LayerNorm(D, eps) / F.layer_norm over the last dimension: x is (R, D) (any shape, D its
 * last dimension, R = numel / D rows: every position of every sample), each row normalised by
 * its own mean and biased variance over D. x, y (one dtype) and dy, dx (one dtype) are f32, f16
 * or bf16 storage; weight, bias, their gradients and the saved statistics mean and rstd (R) are
 * f32, arithmetic is f32. Rows are reduced by one work-group each, the parameter gradients by
 * one work-group per 16 columns over every row, all in an order fixed by (R, D) alone: the same
 * bits on every run and for every work-group size, no atomics. CLT_ERR_SHAPE for a D of 0 or
 * 2^31 and more, or more than 2^32 - 1 rows. */
/* y (R, D) = (x - mean) rstd weight + bias per row of x (R, D), rstd = 1 / sqrt(var + eps)
 * (var biased, eps > 0 and finite, else CLT_ERR_INVALID_ARG); weight (D) and bias (D) may each
 * be NULL (1 and 0: elementwise_affine=False, or bias=False). When mean and rstd (R) are given
 * (both, or neither) the row statistics are stored there for the backward. y may be x. */
clt_status clt_op_layernorm_forward(clt_tensor *y, clt_tensor *mean, clt_tensor *rstd,
                                    const clt_tensor *x, const clt_tensor *weight,
                                    const clt_tensor *bias, float eps);
/* Backward of the forward that gave mean and rstd (R) for x (R, D), from dy (R, D):
 * dweight (D) = beta dweight + sum over rows of dy xhat, dbias (D) = beta dbias + sum over rows
 * of dy (xhat = (x - mean) rstd; beta 0 overwrites without reading them, 1 accumulates; finite,
 * else CLT_ERR_INVALID_ARG), and dx (R, D) = rstd (g - mean(g) - xhat mean(g xhat)) with
 * g = dy weight (weight NULL: 1) over each row. dx, dweight and dbias may each be NULL (not
 * computed). dx has dy's dtype and may be dy; it must not overlap x. */
clt_status clt_op_layernorm_backward(clt_tensor *dx, clt_tensor *dweight, clt_tensor *dbias,
                                     const clt_tensor *dy, const clt_tensor *x,
                                     const clt_tensor *mean, const clt_tensor *rstd,
                                     const clt_tensor *weight, float beta);

/* ---- text windows (cl/textbatch.cl, src/ops/textbatch.c) --------------------------------------------
 * Where the B windows of one batch start in a split of token ids (cltrain/text.h says why). */
struct clt_textbatch_windows {
    uint64_t seed, stream; /* random: Philox (seed, stream), window w from elements 2w, 2w + 1 */
    size_t count;          /* possible starts: the split's length less T (1 .. 2^32 - 1) */
    bool even;             /* evenly spread instead: window first + w of total */
    size_t first, total;
};
/* x (B, T) i32 = the tokens at o_w + t, y (B, T) i32 = at o_w + t + 1, for the windows w of
 * `w`, from tokens (n) u8, u16 or i32 (n >= count - 1 + T + 1). CLT_ERR_SHAPE for wrong dtypes,
 * counts or windows outside tokens; CLT_ERR_INVALID_ARG for an even window range outside
 * [0, total). One work-group per window. */
clt_status clt_op_textbatch_gather(clt_tensor *x, clt_tensor *y, const clt_tensor *tokens, size_t B,
                               size_t T, const struct clt_textbatch_windows *w);
/* ---- drawing the next token (cl/sample.cl, src/ops/sample.c) -------------------------------
 * How one token is drawn from a row of logits (cltrain/text.h's clt_text_sample says the rule). */
struct clt_sample_params {
    float temperature;            /* > 0 */
    size_t top_k;                 /* 0 or >= V: every token */
    uint64_t seed, stream, index; /* the Philox element of the draw */
};
/* out[0] (i32) = the id drawn from logits[row * V .. row * V + V) (f32): softmax of logits /
 * temperature over the top_k largest (ties with the k-th kept), one Philox uniform walked along
 * the cumulative weights; -1 when no logit compares (all NaN). One work-item. CLT_ERR_SHAPE for
 * wrong dtypes or a row outside logits; CLT_ERR_INVALID_ARG for a temperature not above 0. */
clt_status clt_op_sample(clt_tensor *out, const clt_tensor *logits, size_t row, size_t V,
                         const struct clt_sample_params *p);
/* ---- token embedding and learned positions (cl/embedding.cl, src/ops/embedding.c) ----------
 * As nn.Embedding(V, D) and a learned position table (T, D) (GPT-2's wte and wpe) over R = B T
 * positions, row r at position r % T. table, pos, out, x, y and dy share one dtype (f32, f16 or
 * bf16 storage), ids are i32, u16 or u8 (R elements, any shape, below 2^32 - 1), the gradients
 * dtable (V, D) and dpos (T, D) are f32, arithmetic is f32. Every output element is written by
 * one work-item in an order fixed by the inputs alone: the same bits on every run and for every
 * work-group size, with no atomics. CLT_ERR_SHAPE for a wrong dtype or shape (a table
 * dimension of 0 or 2^31 and more, a T that does not divide R); CLT_ERR_DEVICE_MISMATCH for
 * tensors of another ctx. */
/* out (R, D) = table[ids[r]] (+ pos[r % T] when pos is non-NULL: embed and posembed in one pass,
 * one read and one write of the activations); out has the table's dtype. A row whose id is
 * outside [0, V) (a negative i32 id included) is NaN. */
clt_status clt_op_embedding_forward(clt_tensor *out, const clt_tensor *ids,
                                    const clt_tensor *table, const clt_tensor *pos);
/* y (R, D) = x + pos[r % T] for x (R, D) of any float dtype and pos (T, D) of the same: a
 * position embedding after any input. y may be x. Its backward is dx = dy and dpos from
 * clt_op_embedding_backward(NULL, dpos, dy, NULL, NULL, beta). */
clt_status clt_op_add_positions(clt_tensor *y, const clt_tensor *x, const clt_tensor *pos);
/* The i32 elements of the workspace clt_op_embedding_backward needs for R ids and V tokens:
 * the positions sorted by token (R rounded up to a power of two) and V + 1 token offsets. */
size_t clt_op_embedding_workspace(size_t R, size_t V);
/* From dy (R, D): dtable (V, D) = beta dtable + the sum of dy's rows by token (rows whose id is
 * outside [0, V) add nothing), and dpos (T, D) = beta dpos + the sum over the batch of dy's rows
 * at each position (beta 0 overwrites without reading, 1 accumulates, as the other weight
 * gradients; finite, else CLT_ERR_INVALID_ARG). Either may be NULL (not computed); dtable needs
 * ids and an i32 workspace of at least clt_op_embedding_workspace(R, V) elements (its contents
 * are scratch; CLT_ERR_INVALID_ARG without them). The table's gradient sorts the positions by
 * (token, position) on the device and adds each token's rows in position order:
 * log2(P) (log2(P) + 1) / 2 + 3 launches, P = R rounded up to a power of two. */
clt_status clt_op_embedding_backward(clt_tensor *dtable, clt_tensor *dpos, const clt_tensor *dy,
                                     const clt_tensor *ids, clt_tensor *workspace, float beta);
/* ---- attention (cl/attention.cl, src/ops/attention.c) ---------------------------------------
 * Scaled dot-product attention per head on the output of a D -> 3D projection, as
 * F.scaled_dot_product_attention(q, k, v, is_causal) on the heads split out of it: qkv is
 * (B, T, 3D) with q in columns [0, D), k in [D, 2D), v in [2D, 3D), head h at columns
 * h HD .. (h + 1) HD of each (D = NH HD); y (B, T, D) holds the heads' outputs side by side.
 * Per (b, h): P = softmax(scale q k^T) over each row (scale = 1 / sqrt(HD); with `causal`, key
 * j > query i is left out), y = P v. The forward saves lse (B, NH, T, f32), each row's
 * log-sum-exp, from which the backward recomputes P. qkv and y are f32, f16 or bf16 storage
 * (one dtype), dy and dqkv likewise (one dtype, either); lse and the workspace are f32, the
 * arithmetic f32. Two paths give the same results to rounding:
 *  - CLT_ATTN_FLASH: FlashAttention-2's way: tiles of rows in local memory, a running maximum
 *    and sum, the T x T scores never in global memory; the backward computes Delta = rowsum(dy y)
 *    first, then dk and dv over tiles of key rows and dq over tiles of query rows, each a sum
 *    in row order: no atomics, the same bits on every run and for every work-group size. Head
 *    widths up to CLT_ATTN_FLASH_MAX_HD. Two variants, the same results to rounding:
 *    CLT_ATTN_FLASH_ROWS, a row per work-item (GPUs), and CLT_ATTN_FLASH_TILED, a few rows per
 *    work-item against blocks of rows held in vector lanes (CPUs); CLT_ATTN_FLASH is the
 *    device's one. Each is deterministic on its own, not bit-identical to the other.
 *  - CLT_ATTN_REFERENCE: the scores, then the probabilities and their gradients, materialised
 *    in the workspace (B, NH, T, T), one work-item per element: any head width.
 * CLT_ATTN_AUTO is the flash path where it takes HD, else the reference one. */
#define CLT_ATTN_FLASH_MAX_HD 128
/* The tiled variant's rows per work-item (its kernels' CLT_ATTN_R): 8 accumulators of a vector
 * of scores each, plus the block's column, stay in a CPU's vector registers (PoCL, EPYC with
 * AVX-512, gpt-char's shape: with 4 rows the rate was 20-25 % lower). */
#define CLT_ATTN_TILED_R 8
typedef enum clt_attn_path {
    CLT_ATTN_AUTO,
    CLT_ATTN_FLASH,
    CLT_ATTN_REFERENCE,
    CLT_ATTN_FLASH_ROWS,
    CLT_ATTN_FLASH_TILED
} clt_attn_path;
struct clt_attn_geom {
    size_t B, T, NH, HD; /* batch, positions, heads, head width */
    bool causal;         /* key j > query i left out */
    clt_attn_path path;
};
/* The path g->path stands for (AUTO resolved by g->HD; a flash variant stays as asked). */
clt_attn_path clt_op_attention_resolve(const struct clt_attn_geom *g);
/* The f32 elements of the workspace that the forward and backward of g take (the most of the
 * two): the reference path's B NH T T scores and B NH T Delta, the flash path's Delta. */
size_t clt_op_attention_workspace(const struct clt_attn_geom *g);
/* y (B, T, D) and lse (B, NH, T) from qkv (B, T, 3D). ws (f32, at least
 * clt_op_attention_workspace(g) elements) is written by the reference path; the flash path
 * takes none (ws may be NULL). CLT_ERR_SHAPE for a size of 0 or 2^32 and more, or a tensor of
 * another shape or dtype (each tensor's last dimension as above); CLT_ERR_INVALID_ARG for a
 * head width above CLT_ATTN_FLASH_MAX_HD on the flash path, or a missing workspace. */
clt_status clt_op_attention_forward(clt_tensor *y, clt_tensor *lse, clt_tensor *ws,
                                    const clt_tensor *qkv, const struct clt_attn_geom *g);
/* dqkv (B, T, 3D, dy's dtype; overwritten) from dy (B, T, D), the forward's input qkv, output y
 * and lse; ws as for the forward (both paths write it: the flash path's Delta). dqkv must not
 * overlap the inputs. The same errors as the forward. */
clt_status clt_op_attention_backward(clt_tensor *dqkv, clt_tensor *ws, const clt_tensor *dy,
                                     const clt_tensor *qkv, const clt_tensor *y,
                                     const clt_tensor *lse, const struct clt_attn_geom *g);
/* One decode step of generation with a key/value cache: y (B, D) = the attention of query row
 * `pos` alone, y_pos = softmax(scale q_pos k_j^T over keys j <= pos) v, per (b, h), with keys
 * and values rows 0 .. pos of qkv (B, T, 3D) (the cache: rows a forward or earlier steps
 * wrote; rows after pos are not read). The causal mask is implied (g->causal and g->path are
 * not read). ws (f32, at least B NH T elements) takes the step's scores. One work-group per
 * (b, h): the scores strided over its work-items, the maximum and the sum in a fixed order,
 * then the output columns. CLT_ERR_SHAPE for a size of 0 or 2^32 and more, pos >= T or a
 * tensor of another shape or dtype (y has qkv's); CLT_ERR_INVALID_ARG without a workspace. */
clt_status clt_op_attention_decode(clt_tensor *y, clt_tensor *ws, const clt_tensor *qkv,
                                   const struct clt_attn_geom *g, size_t pos);

/* clt_ops_program_variants, every program the ops may build, walking the op-family table
 * (src/ops/families.c), is declared in cltrain/opencl.h for `cltrain kernels`. */

/* ---- optimizer updates (src/ops/optim.c) --------------------------------------------------- */
/* The update kernels of cl/optim.cl over flat (parameters, gradients, states): the optimizers of
 * src/train launch them with their hyper-parameters (cl/optim.cl lists each one's arguments). */
typedef enum clt__optim_kernel_id {
    CLT__OPTIM_SGD,
    CLT__OPTIM_SGD_AMP,
    CLT__OPTIM_SGD_MOMENTUM,
    CLT__OPTIM_SGD_MOMENTUM_AMP,
    CLT__OPTIM_ADAM_AMP_PREPARE,
    CLT__OPTIM_ADAM_AMP,
    CLT__OPTIM_ADAM,
    CLT__OPTIM_GRAD_NORM_PARTIAL, /* the gradients' global norm, for clipping */
    CLT__OPTIM_GRAD_NORM_FINISH,
    CLT__OPTIM__KERNELS
} clt__optim_kernel_id;
/* The ctx's update kernel `which`, storing a copy of the parameters in dtype `copy` too (f16,
 * bf16; f32: none), built on first use (CLT__OPTS_OPTIM: subnormals may flush). */
clt_status clt__optim_kernel(clt_ctx *ctx, clt__optim_kernel_id which, clt_dtype copy,
                             cl_kernel *k);

/* ---- shared by the ops' C wrappers ---------------------------------------------------- */

#include <stdbool.h>
#include <stddef.h>

/* CLT_OK if a and b share a ctx, a dtype (when same_dtype) and an element count. */
clt_status clt__check_pair(const clt_tensor *a, const clt_tensor *b, bool same_dtype,
                           const char *op);
bool clt__is_float(clt_dtype d);
/* CLT_ERR_SHAPE naming op unless t is f32, f16 or bf16. */
clt_status clt__need_float(const clt_tensor *t, const char *op);
/* Enqueues k(y, y_off, x, x_off, n[, *alpha]) over y's n elements, `per` per work-item. */
clt_status clt__launch_yx(cl_kernel k, const clt_tensor *y, const clt_tensor *x, const float *alpha,
                          size_t per, const char *what);

/* Program options, formatted here for the ops and for clt_ops_program_variants alike
 * (each family's `variants`), so the list of programs cannot drift from what the ops build. */
#define CLT__BIAS_TILE 64 /* columns per work-group of linear_backward_bias (CLT_BIAS_TILE) */
#define CLT__BIAS_COLS 16 /* columns per vector of linear.cl's kernels (CLT_BIAS_COLS) */
#define CLT__PANEL_PACK_KT 16 /* k per work-item of gemm_panel.cl's pack kernels (PACK_KT) */
/* Bytes of B's packed chunk that a CPU core's cache is taken to hold beside the rest of the
 * panel GEMM's work: above it the micro-kernel's items run along M first (src/ops/gemm.c).
 * A quarter of a recent Xeon core's 2 MiB L2, all of a Zen 3 core's 512 KiB (where L3 is
 * near); OpenCL reports only the last level's size (PoCL: the L3). */
#define CLT__PANEL_B_CACHED ((size_t)512 * 1024)
/* optim: the update kernels may flush subnormal values to zero. Adam's second moment (an
 * average of squared gradients) and SGD's momentum decay into subnormals wherever gradients are
 * tiny or zero, and a CPU computes with those through microcode assists: PoCL, Adam over 235k
 * parameters whose states are all subnormal, 2.8-3.5 ms a step without this option and 0.14-0.16
 * ms with it (BENCHMARKS.md). */
#define CLT__OPTS_OPTIM "-cl-denorms-are-zero"
void clt__opts_dtype(char *dst, size_t n, clt_dtype x);                  /* -DX_DTYPE */
void clt__opts_cast(char *dst, size_t n, clt_dtype src, clt_dtype dstd); /* cast */
void clt__opts_linear(char *dst, size_t n, clt_dtype y, clt_dtype b, clt_dtype dy);
/* conv; wide: the implicit forward's 16-float vectors (CPUs with AVX-512: clt__conv_wide) */
void clt__opts_conv(char *dst, size_t n, clt_dtype src, clt_dtype dstd, bool wide);
bool clt__conv_wide(const clt_device_info *dev);
void clt__opts_batchnorm(char *dst, size_t n, clt_dtype x, clt_dtype g); /* batchnorm */
void clt__opts_layernorm(char *dst, size_t n, clt_dtype x, clt_dtype g); /* layernorm */
void clt__opts_textbatch(char *dst, size_t n, clt_dtype tok);                   /* textbatch */
void clt__opts_embedding(char *dst, size_t n, clt_dtype x, clt_dtype id); /* embedding */
void clt__opts_loss(char *dst, size_t n, clt_dtype x); /* loss: softmax_xent_rows */
/* attention: hd 0 for the reference kernels' program, else the flash kernels' head width bucket
 * (CLT_ATTN_HD) in the rows variant (tile rows CLT_ATTN_BK, clt__attention_tile_rows) or the
 * tiled one (CLT_ATTN_TILED; CLT_ATTN_KB, clt__attention_tile_keys; CLT_ATTN_R), tiles sized
 * for dev's local memory */
void clt__opts_attention(char *dst, size_t n, const clt_device_info *dev, clt_dtype x,
                         clt_dtype g, unsigned hd, bool tiled);
/* The rows per tile the rows variant's kernels of head width bucket hd stage in local memory on
 * dev: the most (a power of two, up to 32) whose tiles fit its local memory. */
unsigned clt__attention_tile_rows(const clt_device_info *dev, unsigned hd);
/* The rows per block (a vector's lanes: 16, 8 or 4) the tiled variant's kernels of head width
 * bucket hd stage in local memory on dev: the most whose blocks fit its local memory. */
unsigned clt__attention_tile_keys(const clt_device_info *dev, unsigned hd);
/* The flash variant a path stands for on dev: CLT_ATTN_FLASH_ROWS or CLT_ATTN_FLASH_TILED as
 * asked, CLT_ATTN_FLASH (and AUTO where it resolves to it) the tiled one on CPUs, the rows one
 * elsewhere; the reference path for a path that resolves to it. */
clt_attn_path clt__attention_variant(const clt_device_info *dev, const struct clt_attn_geom *g);
struct clt_gemm_choice;
/* The program a GEMM choice's kernels live in: "act_fn,gemm_panel" for the panel family (its
 * epilogue applies activations), "act_fn,gemm" for a direct or tiled kernel with the fused
 * epilogue (epi), else "gemm". */
const char *clt__gemm_program(const struct clt_gemm_choice *c, bool epi);
/* bias: the epilogue bias's dtype (panel, tiled: GEMM_BIAS_DTYPE; direct: f32 only), or -1 for
 * none; epi: a direct or tiled kernel with the fused epilogue (GEMM_EPI; the panel family
 * always has it). */
void clt__opts_gemm(char *dst, size_t n, const struct clt_gemm_choice *c, clt_trans ta,
                    clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd, int bias, bool epi);
/* Whether a GEMM choice's kernel applies the fused epilogue in its store for layout (ta, tb):
 * the panel family in every layout; in the layouts linear layers run it in (NT forward, NN input
 * gradient) also the tiled kernel (a bias of any float dtype) and the direct kernel's f32 outer-
 * and dot-product forms (kb 0, an f32 bias). */
bool clt__gemm_fuses_epilogue(const struct clt_gemm_choice *c, clt_trans ta, clt_trans tb);
/* Whether a GEMM choice's kernel sums op(A)'s rows itself, after its product
 * (clt_op_gemm_tn_sums): the direct kernel's f32 outer-product form (kb 0), with the epilogue. */
bool clt__gemm_sums_in_kernel(const struct clt_gemm_choice *c);
/* Whether a GEMM choice's kernel reads and writes 16-bit storage (cl/gemm.cl's GEMM_MIXED): the
 * packed direct kernel, the tiled one and the panel family. */
bool clt__gemm_takes_16bit(const struct clt_gemm_choice *c);
/* The kernel for 16-bit operands when the chosen one does not take them (CLBlast, an unpacked
 * direct kernel, dot products): the device's built-in packed (CPU) or tiled (GPU) choice,
 * else a small packed block that fits anywhere. No fp32 copy of the operands is made. */
struct clt_gemm_choice clt__gemm_mixed_choice(const clt_device_info *dev);
/* The choice that runs for a product N columns wide: an in-place outer-product block at least
 * twice as wide as N is traded for a taller, narrower one with the same registers (tn halved,
 * tm doubled, while tn stays >= vw and tm <= 16); any other choice as it is. */
struct clt_gemm_choice clt__gemm_narrowed(const struct clt_gemm_choice *c, size_t N);
/* The choice that runs for an op(A) stored as dtype a: a panel choice that reads a 16-bit op(A)
 * in place (ia) packs it instead, converting each value once rather than in the micro-kernel's
 * inner loop (in place on PoCL: f16 2.2x and bf16 1.15x as slow); any other choice as it is. */
struct clt_gemm_choice clt__gemm_for_a(const struct clt_gemm_choice *c, clt_dtype a);

#endif
