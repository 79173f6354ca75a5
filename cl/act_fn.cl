/* The activations' formulas, one copy for every program that applies them: the activation
 * kernels (activation.cl) and the fused epilogues of a linear layer (gemm_panel.cl's store,
 * linear.cl's bias gradient). CLT_ACT_DEFINE(T) defines, for T float or a float vector,
 *     T clt_act_fwd_T(int act, T v, float alpha)          act(v)
 *     T clt_act_bwd_T(int act, T g, T s, float alpha)     g * act'(.) from the saved s
 * with act a code below (as clt_act in src/ops/ops_internal.h) and alpha leakyrelu's slope.
 * s is what each backward reads: relu and leakyrelu x or y (the same mask; for leakyrelu only
 * with a slope >= 0), gelu and silu x, tanh and sigmoid y. Written with ?: and built-ins, which
 * act per lane on vectors; a constant act folds the switch away. */
#define CLT_ACT_RELU 0
#define CLT_ACT_GELU 1
#define CLT_ACT_TANH 2
#define CLT_ACT_SIGMOID 3
#define CLT_ACT_SILU 4
#define CLT_ACT_LEAKYRELU 5

/* What a GEMM's fused epilogue does with its z argument (zmode; gemm.cl, gemm_panel.cl): keep
 * the pre-activation there (a linear layer's forward), or read what the activation's backward
 * needs from it (its input gradient through the activation before it); 0: no z. */
#define CLT_EPI_Z_STORE 1
#define CLT_EPI_Z_GRAD 2

#define CLT_SQRT_2_OVER_PI 0.7978845608028654f /* sqrt(2 / pi) */
#define CLT_GELU_KAPPA 0.044715f

#define CLT_ACT_DEFINE(T) CLT__ACT_DEFINE(T)
#define CLT__ACT_DEFINE(T)                                                                         \
    static inline T clt_act_fwd_##T(const int act, const T v, const float alpha)                   \
    {                                                                                              \
        switch (act) {                                                                             \
        case CLT_ACT_RELU: /* NaN propagates (NaN < 0 is false) */                                 \
            return v < 0.0f ? (T)(0.0f) : v;                                                       \
        case CLT_ACT_GELU: { /* gelu(x) = 0.5 x (1 + tanh(u)) written as x sigmoid(2u): full   \
                                relative accuracy for negative x, where 1 + tanh(u) cancels,  \
                                and exp overflow gives x / inf = -0 */                        \
            const T u = CLT_SQRT_2_OVER_PI * (v + CLT_GELU_KAPPA * v * v * v);                     \
            return v / (1.0f + exp(-2.0f * u));                                                    \
        }                                                                                          \
        case CLT_ACT_TANH:                                                                         \
            return tanh(v);                                                                        \
        case CLT_ACT_SIGMOID:                                                                      \
            return 1.0f / (1.0f + exp(-v));                                                        \
        case CLT_ACT_SILU: /* x / (1 + exp(-x)): exp overflow for x < -88 gives -0 */             \
            return v / (1.0f + exp(-v));                                                           \
        default: /* CLT_ACT_LEAKYRELU; NaN propagates through alpha * NaN */                       \
            return v > 0.0f ? v : alpha * v;                                                       \
        }                                                                                          \
    }                                                                                              \
    static inline T clt_act_bwd_##T(const int act, const T g, const T s, const float alpha)        \
    {                                                                                              \
        switch (act) {                                                                             \
        case CLT_ACT_RELU: /* the gradient passes where s > 0 */                                   \
            return s > 0.0f ? g : (T)(0.0f);                                                       \
        case CLT_ACT_GELU: { /* sg + 2 x sg (1 - sg) du/dx, sg = sigmoid(2u); beyond |x| = 10 */  \
                             /* it is 0 or 1 far below fp32 resolution, and taken as such   */  \
                             /* (no 0 * inf for huge |x|) */                                    \
            const T u = CLT_SQRT_2_OVER_PI * (s + CLT_GELU_KAPPA * s * s * s);                     \
            const T du = CLT_SQRT_2_OVER_PI * (1.0f + 3.0f * CLT_GELU_KAPPA * s * s);              \
            const T sg = 1.0f / (1.0f + exp(-2.0f * u));                                           \
            const T d = sg + 2.0f * s * sg * (1.0f - sg) * du;                                     \
            return g * (fabs(s) > 10.0f ? (s > 0.0f ? (T)(1.0f) : (T)(0.0f)) : d);                 \
        }                                                                                          \
        case CLT_ACT_TANH: /* 1 - y^2 as (1 - y)(1 + y): exact 1 - y near 1 */                     \
            return g * ((1.0f - s) * (1.0f + s));                                                  \
        case CLT_ACT_SIGMOID: /* y (1 - y) */                                                      \
            return g * (s * (1.0f - s));                                                           \
        case CLT_ACT_SILU: { /* sg (1 + x (1 - sg)), sg = sigmoid(x): no 0 * inf at either end */ \
            const T sg = 1.0f / (1.0f + exp(-s));                                                  \
            return g * (sg * (1.0f + s * (1.0f - sg)));                                            \
        }                                                                                          \
        default: /* CLT_ACT_LEAKYRELU: g where s > 0, alpha g elsewhere (at 0 too, as PyTorch) */  \
            return s > 0.0f ? g : alpha * g;                                                       \
        }                                                                                          \
    }
