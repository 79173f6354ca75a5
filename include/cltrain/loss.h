/* Losses for a training loop of one's own over clt_model_forward and clt_model_backward: the
 * loss of a batch summed into a device accumulator and its gradient with respect to the model's
 * output written on the device, ready for clt_model_backward, with no host wait. The trainer
 * (train.h) uses the same kernels. Not thread-safe (per ctx, like every call on its tensors).
 *
 * Usage:
 *
 *     // logits (B, N) from clt_model_forward, labels (B) i32, dlogits (B, N) f32,
 *     // loss (1) f32 zeroed once: after the step it holds the batch's mean loss
 *     clt_loss_softmax_xent(logits, labels, 0.0f, 1.0f / B, 1.0f / B, dlogits, loss, NULL);
 *     clt_model_backward(m, dlogits, false);
 *     clt_tensor_read(loss, &mean, true, NULL);  // a host wait: do it only to print
 */
#ifndef CLTRAIN_LOSS_H
#define CLTRAIN_LOSS_H

#include "cltrain/export.h"

#include "cltrain/status.h"
#include "cltrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax cross-entropy of logits (B, N) against labels (B) i32 in [0, N), with label
 * smoothing `smoothing` in [0, 1] as PyTorch's CrossEntropyLoss: a row's loss is
 * (1 - s) * -log p[label] + s * mean_j(-log p[j]), p = softmax of the row.
 * Adds loss_scale * (the sum of the rows' losses) to loss_acc[0] (f32, one element; 1/B gives
 * the mean) and, when correct_acc (f32, one element) is non-NULL, the number of rows whose
 * largest logit (the first, on ties) is the label's to correct_acc[0]. When dlogits (B, N) is
 * non-NULL, writes dlogits = grad_scale * (p - ((1 - s) * onehot + s / N)), the gradient of
 * grad_scale times the summed loss (1/B: of the mean loss; times a loss scale in fp16 training);
 * dlogits may be logits itself. Numerically stable at any logit size; deterministic (the same
 * bits on every run, whatever the work-group size). A label outside [0, N) is not detected: its
 * row's loss and gradient are NaN. B = 0 adds nothing.
 * logits and dlogits are f32, or both f16 or both bf16 (storage; the arithmetic is f32). From
 * 256 classes on (language models' vocabularies, tested up to 65,536), and for 16-bit logits,
 * each row is one work-group that reads it once with a running maximum (online log-sum-exp)
 * and writes the gradient in a second pass; the ctx then keeps a buffer of 2 B floats for the
 * rows' losses (memory category workspace), grown as B grows and freed with the ctx. Fewer f32
 * classes take one work-group for the batch, a row per work-item.
 * Enqueued only, no host wait. All tensors on one ctx (CLT_ERR_DEVICE_MISMATCH); CLT_ERR_SHAPE
 * for a wrong dtype or element count, CLT_ERR_INVALID_ARG for smoothing outside [0, 1];
 * CLT_ERR_BUILD or CLT_ERR_OPENCL from the kernel; messages in the ctx (clt_ctx_errmsg).
 * logits, labels and loss_acc must not be NULL. */
CLT_API clt_status clt_loss_softmax_xent(const clt_tensor *logits, const clt_tensor *labels,
                                         float smoothing, float loss_scale, float grad_scale,
                                         clt_tensor *dlogits, clt_tensor *loss_acc,
                                         clt_tensor *correct_acc);

/* Squared error of pred against target (f32, the same element count, any shapes): adds
 * loss_scale * (the sum of the squared differences) to loss_acc[0] (f32, one element; 1/numel
 * gives PyTorch's MSELoss) and, when dpred (f32, as pred) is non-NULL, writes
 * dpred = grad_scale * 2 * (pred - target); dpred may be pred (the loss is taken first).
 * Deterministic, enqueued only, and the same statuses as clt_loss_softmax_xent (no smoothing).
 * pred, target and loss_acc must not be NULL. */
CLT_API clt_status clt_loss_mse(const clt_tensor *pred, const clt_tensor *target, float loss_scale,
                                float grad_scale, clt_tensor *dpred, clt_tensor *loss_acc);

#ifdef __cplusplus
}
#endif
#endif
