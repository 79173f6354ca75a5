/* Private to the library (the ops' interface to the layers above, the tuner and the tests).
 * Operations on device tensors, enqueued on the ctx's compute queue (asynchronous: they return
 * once enqueued). Every op checks that its tensors share one ctx (CLT_ERR_DEVICE_MISMATCH
 * otherwise, naming both devices) and have compatible shapes and dtypes (CLT_ERR_SHAPE).
 * Not thread-safe (per ctx). */
#ifndef CLTRAIN_OPS_INTERNAL_H
#define CLTRAIN_OPS_INTERNAL_H

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
 * B = 0 adds nothing. */
clt_status clt_op_softmax_xent(const clt_tensor *logits, const clt_tensor *labels, float smoothing,
                               float loss_scale, float grad_scale, clt_tensor *dlogits,
                               clt_tensor *loss_acc, clt_tensor *correct_acc);
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
/* y (B) = x[idx[b]] for i32 or f32 x (N) (labels, targets); idx (B) i32. */
clt_status clt_op_gather(clt_tensor *y, const clt_tensor *x, const clt_tensor *idx);

/* ---- every program the ops may build (src/ops/variants.c) ---------------------------------- */
/* Receives one program: its comma-separated cl/ stems and the options the op passes (the device
 * defines of clt_program_options come on top). */
typedef void (*clt_program_variant_fn)(const char *files, const char *options, void *user);
/* Calls fn for every program the ops may build on dev: each cl/ program with every set of
 * options an op can produce (dtypes, the GEMM choices of the tuner's table and the built-in
 * defaults that fit dev, in every layout). Used by the kernel portability guard
 * (`cltrain kernels --list`). dev may be synthetic (no OpenCL handles). Thread-safe. */
void clt_ops_program_variants(const clt_device_info *dev, clt_program_variant_fn fn, void *user);

/* ---- shared by the ops' C wrappers ---------------------------------------------------- */

#include <stdbool.h>
#include <stddef.h>

/* CLT_OK if a and b share a ctx, a dtype (when same_dtype) and an element count. */
clt_status clt__check_pair(const clt_tensor *a, const clt_tensor *b, bool same_dtype,
                           const char *op);
bool clt__is_float(clt_dtype d);

/* Program options, formatted here for the ops and for clt_ops_program_variants alike
 * (src/ops/variants.c), so the list of programs cannot drift from what the ops build. */
#define CLT__BIAS_COLS 16 /* columns per work-group of linear_backward_bias (CLT_BIAS_COLS) */
void clt__opts_dtype(char *dst, size_t n, clt_dtype x);                  /* -DX_DTYPE */
void clt__opts_cast(char *dst, size_t n, clt_dtype src, clt_dtype dstd); /* cast */
void clt__opts_linear(char *dst, size_t n, clt_dtype y, clt_dtype b, clt_dtype dy);
struct clt_gemm_choice;
void clt__opts_gemm(char *dst, size_t n, const struct clt_gemm_choice *c, clt_trans ta,
                    clt_trans tb, clt_dtype a, clt_dtype b, clt_dtype cd);
/* Whether a GEMM choice's kernel reads and writes 16-bit storage (cl/gemm.cl's GEMM_MIXED): the
 * packed direct kernel and the tiled one. */
bool clt__gemm_takes_16bit(const struct clt_gemm_choice *c);
/* The kernel for 16-bit operands when the chosen one does not take them (CLBlast, an unpacked
 * direct kernel, dot products): the device's built-in packed (CPU) or tiled (GPU) choice,
 * else a small packed block that fits anywhere. No fp32 copy of the operands is made. */
struct clt_gemm_choice clt__gemm_mixed_choice(const clt_device_info *dev);

#endif
