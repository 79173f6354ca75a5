/* float64 references for linear, the activations, softmax cross-entropy, MSE, pooling,
 * convolution, batch and layer normalisation, written for clarity, not speed: each line follows
 * the formula in ref_nn.h. */
#include "ref_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REF_SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi) */
#define REF_GELU_KAPPA 0.044715

void ref_linear_forward(const double *x, const double *w, const double *b, double *y, int B, int IN,
                        int OUT)
{
    for (int i = 0; i < B; i++) {
        for (int o = 0; o < OUT; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < IN; k++)
                s += x[(size_t)i * IN + k] * w[(size_t)o * IN + k];
            y[(size_t)i * OUT + o] = s;
        }
    }
}

void ref_linear_backward(const double *x, const double *w, const double *dy, double *dx, double *dw,
                         double *db, int B, int IN, int OUT)
{
    if (dx) {
        for (int i = 0; i < B; i++) {
            for (int k = 0; k < IN; k++) {
                double s = 0.0;
                for (int o = 0; o < OUT; o++)
                    s += dy[(size_t)i * OUT + o] * w[(size_t)o * IN + k];
                dx[(size_t)i * IN + k] = s;
            }
        }
    }
    if (dw) {
        for (int o = 0; o < OUT; o++) {
            for (int k = 0; k < IN; k++) {
                double s = 0.0;
                for (int i = 0; i < B; i++)
                    s += dy[(size_t)i * OUT + o] * x[(size_t)i * IN + k];
                dw[(size_t)o * IN + k] = s;
            }
        }
    }
    if (db) {
        for (int o = 0; o < OUT; o++) {
            double s = 0.0;
            for (int i = 0; i < B; i++)
                s += dy[(size_t)i * OUT + o];
            db[o] = s;
        }
    }
}

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

double ref_act_value_alpha(ref_act a, double alpha, double x)
{
    switch (a) {
    case REF_ACT_RELU:
        return x > 0.0 ? x : 0.0;
    case REF_ACT_GELU:
        return 0.5 * x * (1.0 + tanh(REF_SQRT_2_OVER_PI * (x + REF_GELU_KAPPA * x * x * x)));
    case REF_ACT_TANH:
        return tanh(x);
    case REF_ACT_SIGMOID:
        return sigmoid(x);
    case REF_ACT_SILU:
        return x * sigmoid(x);
    case REF_ACT_LEAKYRELU:
        return x > 0.0 ? x : alpha * x;
    }
    return NAN;
}

double ref_act_derivative_alpha(ref_act a, double alpha, double x)
{
    switch (a) {
    case REF_ACT_RELU:
        return x > 0.0 ? 1.0 : 0.0;
    case REF_ACT_GELU: {
        /* d/dx [0.5 x (1 + t)], t = tanh(u), u = sqrt(2/pi) (x + k x^3) */
        double t = tanh(REF_SQRT_2_OVER_PI * (x + REF_GELU_KAPPA * x * x * x));
        double du = REF_SQRT_2_OVER_PI * (1.0 + 3.0 * REF_GELU_KAPPA * x * x);
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
    case REF_ACT_TANH: {
        double t = tanh(x);
        return 1.0 - t * t;
    }
    case REF_ACT_SIGMOID: {
        double s = sigmoid(x);
        return s * (1.0 - s);
    }
    case REF_ACT_SILU: {
        /* d/dx [x s(x)] = s + x s (1 - s) */
        double s = sigmoid(x);
        return s + x * s * (1.0 - s);
    }
    case REF_ACT_LEAKYRELU:
        return x > 0.0 ? 1.0 : alpha;
    }
    return NAN;
}

double ref_act_value(ref_act a, double x)
{
    return ref_act_value_alpha(a, REF_LEAKYRELU_ALPHA, x);
}

double ref_act_derivative(ref_act a, double x)
{
    return ref_act_derivative_alpha(a, REF_LEAKYRELU_ALPHA, x);
}

void ref_act_forward_alpha(ref_act a, double alpha, const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = ref_act_value_alpha(a, alpha, x[i]);
}

void ref_act_backward_alpha(ref_act a, double alpha, const double *x, const double *dy, double *dx,
                            size_t n)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * ref_act_derivative_alpha(a, alpha, x[i]);
}

void ref_act_forward(ref_act a, const double *x, double *y, size_t n)
{
    ref_act_forward_alpha(a, REF_LEAKYRELU_ALPHA, x, y, n);
}

void ref_act_backward(ref_act a, const double *x, const double *dy, double *dx, size_t n)
{
    ref_act_backward_alpha(a, REF_LEAKYRELU_ALPHA, x, dy, dx, n);
}

double ref_softmax_xent(const double *logits, const int32_t *labels, int B, int N, double eps,
                        double *dlogits)
{
    double total = 0.0;
    for (int i = 0; i < B; i++) {
        const double *z = logits + (size_t)i * N;
        double m = z[0];
        for (int c = 1; c < N; c++)
            m = z[c] > m ? z[c] : m;
        double sum = 0.0;
        for (int c = 0; c < N; c++)
            sum += exp(z[c] - m);
        const double lse = m + log(sum); /* log sum exp z; -log p[c] = lse - z[c] */
        double mean_nll = 0.0;
        for (int c = 0; c < N; c++)
            mean_nll += lse - z[c];
        mean_nll /= N;
        total += (1.0 - eps) * (lse - z[labels[i]]) + eps * mean_nll;
        if (dlogits) {
            for (int c = 0; c < N; c++) {
                double q = eps / N + (c == labels[i] ? 1.0 - eps : 0.0);
                dlogits[(size_t)i * N + c] = (exp(z[c] - lse) - q) / B;
            }
        }
    }
    return total / B;
}

double ref_mse(const double *pred, const double *target, size_t n, double *dpred)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = pred[i] - target[i];
        total += d * d;
        if (dpred) dpred[i] = 2.0 * d / (double)n;
    }
    return total / (double)n;
}

/* Scatter formulation (each window adds to its inputs), the opposite of the kernels' gather. */
void ref_pool_forward(int max, const double *x, double *y, int BC, int H, int W, int kh, int kw,
                      int sh, int sw)
{
    int OH = (H - kh) / sh + 1, OW = (W - kw) / sw + 1;
    for (int p = 0; p < BC; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                const double *xp = x + (size_t)p * H * W;
                double acc = max ? xp[(size_t)oh * sh * W + (size_t)ow * sw] : 0.0;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        double v = xp[(size_t)(oh * sh + i) * W + (size_t)(ow * sw + j)];
                        if (!max) acc += v;
                        else if (v > acc) acc = v;
                    }
                y[((size_t)p * OH + oh) * OW + ow] = max ? acc : acc / (kh * kw);
            }
}

void ref_pool_backward(int max, const double *x, const double *dy, double *dx, int BC, int H,
                       int W, int kh, int kw, int sh, int sw)
{
    int OH = (H - kh) / sh + 1, OW = (W - kw) / sw + 1;
    for (size_t i = 0; i < (size_t)BC * H * W; i++) dx[i] = 0.0;
    for (int p = 0; p < BC; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                const double *xp = x ? x + (size_t)p * H * W : NULL;
                double *dxp = dx + (size_t)p * H * W;
                double g = dy[((size_t)p * OH + oh) * OW + ow];
                size_t best = (size_t)oh * sh * W + (size_t)ow * sw;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        size_t o = (size_t)(oh * sh + i) * W + (size_t)(ow * sw + j);
                        if (!max) dxp[o] += g / (kh * kw);
                        else if (xp[o] > xp[best]) best = o; /* strictly: the first maximum */
                    }
                if (max) dxp[best] += g;
            }
}

void ref_conv2d_forward(const double *x, const double *w, const double *b, double *y, int B, int C,
                        int H, int W, int OUT, int K, int S, int P)
{
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    for (int n = 0; n < B; n++)
        for (int o = 0; o < OUT; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = b ? b[o] : 0.0;
                    for (int c = 0; c < C; c++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int ih = oh * S - P + kh, iw = ow * S - P + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += x[(((size_t)n * C + c) * H + ih) * W + iw] *
                                       w[(((size_t)o * C + c) * K + kh) * K + kw];
                            }
                    y[(((size_t)n * OUT + o) * OH + oh) * OW + ow] = acc;
                }
}

void ref_conv2d_backward(const double *x, const double *w, const double *dy, double *dx,
                         double *dw, double *db, int B, int C, int H, int W, int OUT, int K, int S,
                         int P)
{
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    if (dx) memset(dx, 0, (size_t)B * C * H * W * sizeof *dx);
    if (dw) memset(dw, 0, (size_t)OUT * C * K * K * sizeof *dw);
    if (db) memset(db, 0, (size_t)OUT * sizeof *db);
    for (int n = 0; n < B; n++)
        for (int o = 0; o < OUT; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double g = dy[(((size_t)n * OUT + o) * OH + oh) * OW + ow];
                    if (db) db[o] += g;
                    for (int c = 0; c < C; c++)
                        for (int kh = 0; kh < K; kh++)
                            for (int kw = 0; kw < K; kw++) {
                                int ih = oh * S - P + kh, iw = ow * S - P + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                size_t xi = (((size_t)n * C + c) * H + ih) * W + iw,
                                       wi = (((size_t)o * C + c) * K + kh) * K + kw;
                                if (dw) dw[wi] += g * x[xi];
                                if (dx) dx[xi] += g * w[wi];
                            }
                }
}

/* ---- batch normalisation ------------------------------------------------------------------- */

void ref_batchnorm_forward_train(const double *x, const double *w, const double *b, double *y,
                                 double *mean, double *var, int B, int C, int S, double eps)
{
    const double n = (double)B * S;
    for (int c = 0; c < C; c++) {
        double mu = 0, v = 0;
        for (int bi = 0; bi < B; bi++)
            for (int s = 0; s < S; s++) mu += x[((size_t)bi * C + c) * S + s];
        mu /= n;
        for (int bi = 0; bi < B; bi++)
            for (int s = 0; s < S; s++) {
                double d = x[((size_t)bi * C + c) * S + s] - mu;
                v += d * d;
            }
        v /= n;
        if (mean) mean[c] = mu;
        if (var) var[c] = v;
        if (!y) continue;
        double inv = 1.0 / sqrt(v + eps);
        for (int bi = 0; bi < B; bi++)
            for (int s = 0; s < S; s++) {
                size_t i = ((size_t)bi * C + c) * S + s;
                y[i] = (x[i] - mu) * inv * w[c] + b[c];
            }
    }
}

void ref_batchnorm_forward_eval(const double *x, const double *w, const double *b,
                                const double *rmean, const double *rvar, double *y, int B, int C,
                                int S, double eps)
{
    for (int bi = 0; bi < B; bi++)
        for (int c = 0; c < C; c++)
            for (int s = 0; s < S; s++) {
                size_t i = ((size_t)bi * C + c) * S + s;
                y[i] = (x[i] - rmean[c]) / sqrt(rvar[c] + eps) * w[c] + b[c];
            }
}

void ref_batchnorm_update_running(const double *x, double *rmean, double *rvar, int B, int C,
                                  int S, double momentum)
{
    const double n = (double)B * S;
    double *mean = malloc((size_t)C * sizeof *mean), *var = malloc((size_t)C * sizeof *var);
    if (!mean || !var) abort();
    ref_batchnorm_forward_train(x, NULL, NULL, NULL, mean, var, B, C, S, 0);
    for (int c = 0; c < C; c++) {
        rmean[c] = (1 - momentum) * rmean[c] + momentum * mean[c];
        rvar[c] = (1 - momentum) * rvar[c] + momentum * var[c] * n / (n - 1);
    }
    free(mean);
    free(var);
}

void ref_batchnorm_backward(const double *x, const double *w, const double *dy, double *dx,
                            double *dw, double *db, int B, int C, int S, double eps)
{
    const double n = (double)B * S;
    double *mean = malloc((size_t)C * sizeof *mean), *var = malloc((size_t)C * sizeof *var);
    if (!mean || !var) abort();
    ref_batchnorm_forward_train(x, NULL, NULL, NULL, mean, var, B, C, S, eps);
    for (int c = 0; c < C; c++) {
        double inv = 1.0 / sqrt(var[c] + eps), sdy = 0, sdx = 0;
        for (int bi = 0; bi < B; bi++)
            for (int s = 0; s < S; s++) {
                size_t i = ((size_t)bi * C + c) * S + s;
                sdy += dy[i];
                sdx += dy[i] * (x[i] - mean[c]) * inv;
            }
        if (dw) dw[c] = sdx;
        if (db) db[c] = sdy;
        if (!dx) continue;
        for (int bi = 0; bi < B; bi++)
            for (int s = 0; s < S; s++) {
                size_t i = ((size_t)bi * C + c) * S + s;
                double xhat = (x[i] - mean[c]) * inv;
                dx[i] = w[c] * inv * (dy[i] - sdy / n - xhat * sdx / n);
            }
    }
    free(mean);
    free(var);
}

void ref_layernorm_forward(const double *x, const double *w, const double *b, double *y,
                           double *mean, double *rstd, int R, int D, double eps)
{
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * D;
        double mu = 0, v = 0;
        for (int d = 0; d < D; d++) mu += xr[d];
        mu /= D;
        for (int d = 0; d < D; d++) v += (xr[d] - mu) * (xr[d] - mu);
        v /= D;
        double inv = 1.0 / sqrt(v + eps);
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = inv;
        if (!y) continue;
        for (int d = 0; d < D; d++)
            y[(size_t)r * D + d] = (xr[d] - mu) * inv * (w ? w[d] : 1.0) + (b ? b[d] : 0.0);
    }
}

void ref_layernorm_backward(const double *x, const double *w, const double *dy, double *dx,
                            double *dw, double *db, int R, int D, double eps)
{
    if (dw) memset(dw, 0, (size_t)D * sizeof *dw);
    if (db) memset(db, 0, (size_t)D * sizeof *db);
    for (int r = 0; r < R; r++) {
        const double *xr = x + (size_t)r * D, *dyr = dy + (size_t)r * D;
        double mu, inv, sg = 0, sgx = 0;
        ref_layernorm_forward(xr, NULL, NULL, NULL, &mu, &inv, 1, D, eps);
        for (int d = 0; d < D; d++) {
            double xhat = (xr[d] - mu) * inv, g = dyr[d] * (w ? w[d] : 1.0);
            sg += g;
            sgx += g * xhat;
            if (dw) dw[d] += dyr[d] * xhat;
            if (db) db[d] += dyr[d];
        }
        if (!dx) continue;
        for (int d = 0; d < D; d++) {
            double xhat = (xr[d] - mu) * inv, g = dyr[d] * (w ? w[d] : 1.0);
            dx[(size_t)r * D + d] = inv * (g - sg / D - xhat * sgx / D);
        }
    }
}

void ref_embedding_forward(const int32_t *ids, const double *table, const double *pos, double *y,
                           int R, int V, int T, int D)
{
    (void)V;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < D; j++)
            y[(size_t)r * D + j] =
                table[(size_t)ids[r] * D + j] + (pos ? pos[(size_t)(r % T) * D + j] : 0.0);
}

void ref_embedding_backward(const int32_t *ids, const double *dy, double *dtable, double *dpos,
                            int R, int V, int T, int D)
{
    if (dtable)
        for (size_t i = 0; i < (size_t)V * D; i++)
            dtable[i] = 0.0;
    if (dpos)
        for (size_t i = 0; i < (size_t)T * D; i++)
            dpos[i] = 0.0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < D; j++) {
            const double g = dy[(size_t)r * D + j];
            if (dtable) dtable[(size_t)ids[r] * D + j] += g;
            if (dpos) dpos[(size_t)(r % T) * D + j] += g;
        }
}

/* q_i . k_j of head h of sample b, divided by sqrt(HD). */
static double att_score(const double *qkv, int b, int h, int i, int j, int T, int NH, int HD)
{
    const size_t D = (size_t)NH * HD;
    const double *q = qkv + ((size_t)b * T + i) * 3 * D + (size_t)h * HD;
    const double *k = qkv + ((size_t)b * T + j) * 3 * D + D + (size_t)h * HD;
    double s = 0;
    for (int c = 0; c < HD; c++) s += q[c] * k[c];
    return s / sqrt((double)HD);
}

/* Row i's maximum score m and sum of exp(s - m) over its keys (j <= i when causal). */
static void att_row(const double *qkv, int b, int h, int i, int T, int NH, int HD, int causal,
                    double *m, double *l)
{
    const int jn = causal ? i + 1 : T;
    *m = -INFINITY;
    for (int j = 0; j < jn; j++) *m = fmax(*m, att_score(qkv, b, h, i, j, T, NH, HD));
    *l = 0;
    for (int j = 0; j < jn; j++) *l += exp(att_score(qkv, b, h, i, j, T, NH, HD) - *m);
}

void ref_attention_forward(const double *qkv, double *y, double *lse, int B, int T, int NH, int HD,
                           int causal)
{
    const size_t D = (size_t)NH * HD;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                double m, l;
                att_row(qkv, b, h, i, T, NH, HD, causal, &m, &l);
                if (lse) lse[((size_t)b * NH + h) * T + i] = m + log(l);
                if (!y) continue;
                double *yi = y + ((size_t)b * T + i) * D + (size_t)h * HD;
                for (int c = 0; c < HD; c++) yi[c] = 0;
                for (int j = 0; j < (causal ? i + 1 : T); j++) {
                    const double p = exp(att_score(qkv, b, h, i, j, T, NH, HD) - m) / l;
                    const double *v = qkv + ((size_t)b * T + j) * 3 * D + 2 * D + (size_t)h * HD;
                    for (int c = 0; c < HD; c++) yi[c] += p * v[c];
                }
            }
}

void ref_attention_backward(const double *qkv, const double *dy, double *dqkv, int B, int T, int NH,
                            int HD, int causal)
{
    const size_t D = (size_t)NH * HD;
    const double scale = 1.0 / sqrt((double)HD);
    memset(dqkv, 0, (size_t)B * T * 3 * D * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const size_t ri = ((size_t)b * T + i) * 3 * D + (size_t)h * HD;
                const double *q = qkv + ri, *g = dy + ((size_t)b * T + i) * D + (size_t)h * HD;
                const int jn = causal ? i + 1 : T;
                double m, l, delta = 0;
                att_row(qkv, b, h, i, T, NH, HD, causal, &m, &l);
                /* the row's P (recomputed per pass: no allocation) and dP_ij = dy_i . v_j */
                for (int pass = 0; pass < 2; pass++)
                    for (int j = 0; j < jn; j++) {
                        const size_t rj = ((size_t)b * T + j) * 3 * D + (size_t)h * HD;
                        const double *k = qkv + rj + D, *v = qkv + rj + 2 * D;
                        const double p = exp(att_score(qkv, b, h, i, j, T, NH, HD) - m) / l;
                        double dp = 0;
                        for (int c = 0; c < HD; c++) dp += g[c] * v[c];
                        if (pass == 0) {
                            delta += p * dp;
                            continue;
                        }
                        const double ds = p * (dp - delta) * scale;
                        for (int c = 0; c < HD; c++) {
                            dqkv[ri + c] += ds * k[c];
                            dqkv[rj + D + c] += ds * q[c];
                            dqkv[rj + 2 * D + c] += p * g[c];
                        }
                    }
            }
}
