/* float64 references for linear, the activations, softmax cross-entropy and MSE, written for
 * clarity, not speed: each line follows the formula in ref_nn.h. */
#include "ref_nn.h"

#include <math.h>

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
