/* float64 CPU references for the layers and losses, in plain loops: what the kernels' tests
 * compare against (|got - ref| <= atol + rtol * |ref|). Conventions follow PyTorch: W is
 * (OUT, IN) row-major, losses are means. Outputs are overwritten, never accumulated; output
 * pointers may be NULL when that result is not wanted. Thread-safe, no allocation. */
#ifndef CLTRAIN_REF_NN_H
#define CLTRAIN_REF_NN_H

#include <stddef.h>
#include <stdint.h>

/* y = x W^T + b.  x (B, IN), w (OUT, IN), b (OUT) or NULL for no bias, y (B, OUT). */
void ref_linear_forward(const double *x, const double *w, const double *b, double *y, int B, int IN,
                        int OUT);

/* Gradients of linear given dy (B, OUT): dx = dy W (B, IN), dw = dy^T x (OUT, IN),
 * db = sum over the batch of dy (OUT). Any of dx, dw, db may be NULL. */
void ref_linear_backward(const double *x, const double *w, const double *dy, double *dx, double *dw,
                         double *db, int B, int IN, int OUT);

/* Elementwise activations. */
typedef enum ref_act {
    REF_ACT_RELU, /* max(x, 0); derivative 0 at x = 0, as PyTorch */
    REF_ACT_GELU, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GELU(approximate='tanh') */
    REF_ACT_TANH,
    REF_ACT_SIGMOID,  /* 1 / (1 + exp(-x)) */
    REF_ACT_SILU,     /* x sigmoid(x), nn.SiLU */
    REF_ACT_LEAKYRELU /* x > 0 ? x : alpha x, nn.LeakyReLU(alpha); derivative alpha at x = 0 */
} ref_act;

#define REF_LEAKYRELU_ALPHA 0.01 /* the slope the functions without `alpha` give leakyrelu */

double ref_act_value(ref_act a, double x);
double ref_act_derivative(ref_act a, double x); /* d act / dx at x */

/* y = act(x); x, y (n). */
void ref_act_forward(ref_act a, const double *x, double *y, size_t n);
/* dx = dy * act'(x); x, dy, dx (n). dx may alias dy. */
void ref_act_backward(ref_act a, const double *x, const double *dy, double *dx, size_t n);

/* The same with the activation's parameter alpha (leakyrelu's slope; ignored by the others). */
double ref_act_value_alpha(ref_act a, double alpha, double x);
double ref_act_derivative_alpha(ref_act a, double alpha, double x);
void ref_act_forward_alpha(ref_act a, double alpha, const double *x, double *y, size_t n);
void ref_act_backward_alpha(ref_act a, double alpha, const double *x, const double *dy, double *dx,
                            size_t n);

/* Softmax cross-entropy with label smoothing eps, as PyTorch's
 * cross_entropy(logits, labels, label_smoothing=eps), mean over the batch:
 *   loss = mean_b [ (1 - eps) * -log p[b][labels[b]] + eps * mean_c (-log p[b][c]) ],
 *   p = softmax(logits[b]).
 * logits (B, N), labels (B) in [0, N). Returns the loss; dlogits (B, N), if not NULL, receives
 * d loss / d logits = (p - q) / B with q = (1 - eps) onehot(label) + eps / N. */
double ref_softmax_xent(const double *logits, const int32_t *labels, int B, int N, double eps,
                        double *dlogits);

/* Mean squared error over all n elements, as PyTorch's mse_loss(pred, target):
 * loss = mean (pred - target)^2. Returns the loss; dpred (n), if not NULL, receives
 * d loss / d pred = 2 (pred - target) / n. */
double ref_mse(const double *pred, const double *target, size_t n, double *dpred);

/* Pooling of the BC planes (B * C) of x (BC, H, W) into y (BC, OH, OW), as nn.MaxPool2d /
 * nn.AvgPool2d((kh, kw), stride=(sh, sw)): no padding, floor mode, OH = (H - kh) / sh + 1
 * (OW likewise). max != 0: the window's maximum; else its mean. */
void ref_pool_forward(int max, const double *x, double *y, int BC, int H, int W, int kh, int kw,
                      int sh, int sw);
/* dx (BC, H, W) from dy (BC, OH, OW): max routes each window's gradient to the window's first
 * maximum in row-major order (as PyTorch; reads x), avg adds dy / (kh kw) to every element of
 * the window (x may be NULL); elements in no window get 0. */
void ref_pool_backward(int max, const double *x, const double *dy, double *dx, int BC, int H,
                       int W, int kh, int kw, int sh, int sw);

/* 2-D convolution as nn.Conv2d / conv2d: x (B, C, H, W), w (OUT, C, K, K), b (OUT) or NULL,
 * y (B, OUT, OH, OW) with OH = (H + 2P - K) / S + 1 (OW likewise), zero padding P, stride S. */
void ref_conv2d_forward(const double *x, const double *w, const double *b, double *y, int B, int C,
                        int H, int W, int OUT, int K, int S, int P);
/* Its gradients from dy (B, OUT, OH, OW): dx (B, C, H, W), dw (OUT, C, K, K), db (OUT); any of
 * them may be NULL. */
void ref_conv2d_backward(const double *x, const double *w, const double *dy, double *dx,
                         double *dw, double *db, int B, int C, int H, int W, int OUT, int K, int S,
                         int P);

/* Batch normalisation as nn.BatchNorm2d (S = H W) / nn.BatchNorm1d (S = 1) over x (B, C, S),
 * training mode: mean[c] and var[c] (biased) over the channel's B S elements, y = (x - mean) /
 * sqrt(var + eps) w + b. y, mean and var may be NULL. */
void ref_batchnorm_forward_train(const double *x, const double *w, const double *b, double *y,
                                 double *mean, double *var, int B, int C, int S, double eps);
/* Evaluation mode: y = (x - rmean) / sqrt(rvar + eps) w + b. */
void ref_batchnorm_forward_eval(const double *x, const double *w, const double *b,
                                const double *rmean, const double *rvar, double *y, int B, int C,
                                int S, double eps);
/* The running statistics after one training forward: rmean = (1 - m) rmean + m mean,
 * rvar = (1 - m) rvar + m var n / (n - 1) (n = B S), as PyTorch. */
void ref_batchnorm_update_running(const double *x, double *rmean, double *rvar, int B, int C,
                                  int S, double momentum);
/* Gradients of the training forward from dy (B, C, S): dx (B, C, S) through the batch
 * statistics, dw (C) = sum dy xhat, db (C) = sum dy; any of them may be NULL. */
void ref_batchnorm_backward(const double *x, const double *w, const double *dy, double *dx,
                            double *dw, double *db, int B, int C, int S, double eps);

/* Layer normalisation as nn.LayerNorm(D, eps) / F.layer_norm over the rows of x (R, D): per
 * row, mean and rstd = 1 / sqrt(var + eps) (var biased) over its D elements, y = (x - mean) rstd
 * w + b; w, b (D) NULL: 1, 0 (elementwise_affine=False). y, mean (R) and rstd (R) may be NULL. */
void ref_layernorm_forward(const double *x, const double *w, const double *b, double *y,
                           double *mean, double *rstd, int R, int D, double eps);
/* Its gradients from dy (R, D): dx (R, D) through the row statistics, dw (D) = sum over rows of
 * dy xhat, db (D) = sum over rows of dy; any of them may be NULL. w NULL: 1. */
void ref_layernorm_backward(const double *x, const double *w, const double *dy, double *dx,
                            double *dw, double *db, int R, int D, double eps);

/* Token embedding with learned positions over R = B T rows: y[r] = table[ids[r]] + pos[r % T]
 * (pos NULL: no positions) for table (V, D), pos (T, D), y (R, D); ids in [0, V). */
void ref_embedding_forward(const int32_t *ids, const double *table, const double *pos, double *y,
                           int R, int V, int T, int D);
/* Its gradients from dy (R, D): dtable (V, D) = the sum of dy's rows by token, dpos (T, D) = the
 * sum over the batch at each position; either may be NULL. Overwrites them. */
void ref_embedding_backward(const int32_t *ids, const double *dy, double *dtable, double *dpos,
                            int R, int V, int T, int D);
/* Scaled dot-product attention per head, as F.scaled_dot_product_attention on the heads of a
 * D -> 3D projection's output: qkv (B, T, 3D) holds q, k, v in columns [0, D), [D, 2D),
 * [2D, 3D), head h at columns h HD .. of each (D = NH HD); per (b, h), P = softmax(q k^T /
 * sqrt(HD)) over each row, key j > query i left out when causal, and y (B, T, D) = P v, the heads
 * side by side. lse (B, NH, T), each row's log-sum-exp of the scaled scores, may be NULL. */
void ref_attention_forward(const double *qkv, double *y, double *lse, int B, int T, int NH, int HD,
                           int causal);
/* Its gradient dqkv (B, T, 3D) from dy (B, T, D): dv = P^T dy, dS = P (dy v^T - rowsum(P dy
 * v^T)), dq = dS k / sqrt(HD), dk = dS^T q / sqrt(HD). */
void ref_attention_backward(const double *qkv, const double *dy, double *dqkv, int B, int T, int NH,
                            int HD, int causal);

#endif
