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

CLT_ACT_DEFINE(float)

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

/* The formulas are cl/act_fn.cl's; the kernels name them by code. */
#define CLT_ACT_KERNELS(stem, code)                                                                \
    CLT_ACT_FORWARD(stem##_forward, clt_act_fwd_float(code, v, 0.0f))                              \
    CLT_ACT_BACKWARD(stem##_backward, clt_act_bwd_float(code, g, v, 0.0f))
CLT_ACT_KERNELS(relu, CLT_ACT_RELU)
CLT_ACT_KERNELS(gelu, CLT_ACT_GELU)
CLT_ACT_KERNELS(tanh, CLT_ACT_TANH)
CLT_ACT_KERNELS(sigmoid, CLT_ACT_SIGMOID)
CLT_ACT_KERNELS(silu, CLT_ACT_SILU)
CLT_ACT_FORWARD_ARGS(leakyrelu_forward, CLT_ACT_COMMA float alpha,
                     clt_act_fwd_float(CLT_ACT_LEAKYRELU, v, alpha))
CLT_ACT_BACKWARD_ARGS(leakyrelu_backward, CLT_ACT_COMMA float alpha,
                      clt_act_bwd_float(CLT_ACT_LEAKYRELU, g, v, alpha))
