/* Activations, forward and backward, elementwise over one storage dtype (-DX_DTYPE=code, default
 * f32; arithmetic in fp32): relu, gelu (tanh approximation), tanh, sigmoid, silu and leakyrelu.
 * Backward kernels take the saved tensor `s` each needs: relu and leakyrelu x or y (the same
 * mask; for leakyrelu only with a slope >= 0), gelu and silu x, tanh and sigmoid y. leakyrelu's
 * kernels take its slope `alpha` as a last argument. Tensors arrive as (buffer, offset in
 * elements); in place (y = x, dx = dy) is allowed. */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#define X_T CLT_TYPE(X_DTYPE)

#define CLT_SQRT_2_OVER_PI 0.7978845608028654f /* sqrt(2 / pi) */
#define CLT_GELU_KAPPA 0.044715f

/* Kernel bodies: i < n, v the loaded input; ACT_FWD/ACT_BWD name the value computed. */
#define CLT_ACT_FORWARD(name, expr) CLT_ACT_FORWARD_ARGS(name, , expr)
#define CLT_ACT_BACKWARD(name, expr) CLT_ACT_BACKWARD_ARGS(name, , expr)
/* The same with extra trailing kernel arguments `extra` (CLT_ACT_COMMA float alpha). */
#define CLT_ACT_COMMA ,
#define CLT_ACT_FORWARD_ARGS(name, extra, expr)                                                    \
    kernel void name(global X_T *y, ulong y_off, const global X_T *x, ulong x_off, ulong n extra)  \
    {                                                                                              \
        ulong i = get_global_id(0);                                                                \
        if (i >= n) return;                                                                        \
        const float v = CLT_LOAD(X_DTYPE, x + x_off, i);                                           \
        CLT_STORE(X_DTYPE, y + y_off, i, (expr));                                                  \
    }
#define CLT_ACT_BACKWARD_ARGS(name, extra, expr)                                                   \
    kernel void name(global X_T *dx, ulong dx_off, const global X_T *dy, ulong dy_off,             \
                     const global X_T *s, ulong s_off, ulong n extra)                              \
    {                                                                                              \
        ulong i = get_global_id(0);                                                                \
        if (i >= n) return;                                                                        \
        const float g = CLT_LOAD(X_DTYPE, dy + dy_off, i);                                         \
        const float v = CLT_LOAD(X_DTYPE, s + s_off, i);                                           \
        CLT_STORE(X_DTYPE, dx + dx_off, i, (expr));                                                \
    }

/* relu: NaN propagates forward (x < 0 is false for NaN); the gradient passes where s > 0. */
CLT_ACT_FORWARD(relu_forward, v < 0.0f ? 0.0f : v)
CLT_ACT_BACKWARD(relu_backward, v > 0.0f ? g : 0.0f)

/* gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as x * sigmoid(2u)
 * (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u))), which keeps full relative accuracy
 * for negative x where 1 + tanh(u) cancels, and saturates cleanly (exp overflow gives x / inf). */
static inline float clt_gelu(float x)
{
    const float u = CLT_SQRT_2_OVER_PI * (x + CLT_GELU_KAPPA * x * x * x);
    return x / (1.0f + exp(-2.0f * u));
}

/* d gelu / dx = sg + 2 x sg (1 - sg) du/dx, sg = sigmoid(2u), du/dx = sqrt(2/pi) (1 + 3 k x^2).
 * Beyond |x| = 10 the derivative is 0 or 1 to far below fp32 resolution (sigmoid(2u) is within
 * 1e-37 of 0 or 1), and taking it as such avoids 0 * inf for huge |x|. */
static inline float clt_gelu_grad(float x)
{
    if (fabs(x) > 10.0f) return x > 0.0f ? 1.0f : 0.0f;
    const float u = CLT_SQRT_2_OVER_PI * (x + CLT_GELU_KAPPA * x * x * x);
    const float du = CLT_SQRT_2_OVER_PI * (1.0f + 3.0f * CLT_GELU_KAPPA * x * x);
    const float sg = 1.0f / (1.0f + exp(-2.0f * u));
    return sg + 2.0f * x * sg * (1.0f - sg) * du;
}

CLT_ACT_FORWARD(gelu_forward, clt_gelu(v))
CLT_ACT_BACKWARD(gelu_backward, g * clt_gelu_grad(v))

/* tanh' = 1 - y^2, as (1 - y)(1 + y): 1 - y is exact for y near 1, so no cancellation. */
CLT_ACT_FORWARD(tanh_forward, tanh(v))
CLT_ACT_BACKWARD(tanh_backward, g * ((1.0f - v) * (1.0f + v)))

/* sigmoid(x) = 1 / (1 + exp(-x)); sigmoid' = y (1 - y). */
CLT_ACT_FORWARD(sigmoid_forward, 1.0f / (1.0f + exp(-v)))
CLT_ACT_BACKWARD(sigmoid_backward, g * (v * (1.0f - v)))

/* silu(x) = x sigmoid(x), as x / (1 + exp(-x)): exp overflow for x < -88 gives x / inf = -0.
 * silu' = sg (1 + x (1 - sg)), sg = sigmoid(x): sg = 0 for very negative x (0 times a finite
 * number) and 1 - sg = 0 for very positive x, so no 0 * inf at either end. */
static inline float clt_silu_grad(float x)
{
    const float sg = 1.0f / (1.0f + exp(-x));
    return sg * (1.0f + x * (1.0f - sg));
}

CLT_ACT_FORWARD(silu_forward, v / (1.0f + exp(-v)))
CLT_ACT_BACKWARD(silu_backward, g * clt_silu_grad(v))

/* leakyrelu: x > 0 ? x : alpha x (NaN propagates: alpha * NaN); the gradient is g where s > 0,
 * alpha g elsewhere (at 0 too, as PyTorch). */
CLT_ACT_FORWARD_ARGS(leakyrelu_forward, CLT_ACT_COMMA float alpha, v > 0.0f ? v : alpha * v)
CLT_ACT_BACKWARD_ARGS(leakyrelu_backward, CLT_ACT_COMMA float alpha, v > 0.0f ? g : alpha * g)
