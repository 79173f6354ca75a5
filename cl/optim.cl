/* Optimizer updates over one flat f32 parameter tensor (src/train/optim.c): SGD, SGD with momentum
 * (dampening, Nesterov), Adam/AdamW. Tensors arrive as (buffer, offset in elements); each
 * work-item updates one element. The order of operations follows PyTorch's single-tensor
 * implementations (torch/optim/sgd.py, adam.py); scalars derived from the step count (bias
 * corrections, AdamW's decay factor) are computed on the host in double.
 * The *_amp variants serve fp16 loss scaling (cl/amp.cl's state: [1] found_inf, [3] skipped
 * steps): they change nothing when found_inf is set, and count steps without the skipped ones
 * (SGD's first step, Adam's t), which only the device knows; Adam's bias corrections are then
 * computed on the device in f32 (-expm1(t * log(beta)), accurate to a few ulps).
 * The program is built with -cl-denorms-are-zero (src/ops/ops_internal.h, CLT__OPTS_OPTIM):
 * the moments decay into subnormals where gradients are tiny or zero, and CPUs compute with
 * subnormals through microcode assists (Adam 20 times slower on PoCL when all are). A device
 * may flush them to zero; the values lost are below 1.2e-38. */

/* param (n) -= lr * (grad + wd * param) */
kernel void sgd_step(global float *param, ulong p_off, const global float *grad, ulong g_off,
                     ulong n, float lr, float wd)
{
    ulong i = get_global_id(0);
    if (i >= n) return;
    float p = param[p_off + i], g = grad[g_off + i];
    if (wd != 0.0f) g += wd * p;
    param[p_off + i] = p - lr * g;
}

/* SGD with momentum: g = grad + wd * param; buf = first ? g : momentum * buf + (1 - dampening)
 * * g; param -= lr * (nesterov ? g + momentum * buf : buf). All tensors (n). */
kernel void sgd_momentum_step(global float *param, ulong p_off, const global float *grad,
                              ulong g_off, global float *buf, ulong b_off, ulong n, float lr,
                              float wd, float momentum, float one_minus_dampening, int nesterov,
                              int first)
{
    ulong i = get_global_id(0);
    if (i >= n) return;
    float p = param[p_off + i], g = grad[g_off + i];
    if (wd != 0.0f) g += wd * p;
    float b = first ? g : momentum * buf[b_off + i] + one_minus_dampening * g;
    buf[b_off + i] = b;
    float d = nesterov ? g + momentum * b : b;
    param[p_off + i] = p - lr * d;
}

/* Adam / AdamW on element i: param *= decay (AdamW: 1 - lr * wd, else 1); g = grad + wd * param
 * (Adam's L2, wd = 0 for AdamW); m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
 * param -= step_size * m / (sqrt(v) / bc2_sqrt + eps) with step_size = lr / (1 - beta1^t) and
 * bc2_sqrt = sqrt(1 - beta2^t). */
static inline void adam_update(global float *param, const global float *grad,
                               global float *exp_avg, global float *exp_avg_sq, ulong i,
                               float step_size, float bc2_sqrt, float one_minus_beta1,
                               float beta2, float one_minus_beta2, float eps, float wd,
                               float decay)
{
    float p = param[i], g = grad[i];
    if (decay != 1.0f) p *= decay;
    if (wd != 0.0f) g += wd * p;
    float m = exp_avg[i], v = exp_avg_sq[i];
    /* torch.lerp: start + w * (end - start) for w < 0.5, else end - (end - start) * (1 - w) */
    m = one_minus_beta1 < 0.5f ? m + one_minus_beta1 * (g - m)
                               : g - (g - m) * (1.0f - one_minus_beta1);
    v = beta2 * v + one_minus_beta2 * (g * g);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    float denom = sqrt(v) / bc2_sqrt + eps;
    param[i] = p - step_size * (m / denom);
}

/* Adam / AdamW (adam_update) with the host's step_size and bc2_sqrt. All tensors (n). */
kernel void adam_step(global float *param, ulong p_off, const global float *grad, ulong g_off,
                      global float *exp_avg, ulong m_off, global float *exp_avg_sq, ulong v_off,
                      ulong n, float step_size, float bc2_sqrt, float one_minus_beta1,
                      float beta2, float one_minus_beta2, float eps, float wd, float decay)
{
    ulong i = get_global_id(0);
    if (i >= n) return;
    adam_update(param + p_off, grad + g_off, exp_avg + m_off, exp_avg_sq + v_off, i, step_size,
                bc2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps, wd, decay);
}

/* ---- loss-scaled variants ------------------------------------------------------------------- */
kernel void sgd_step_amp(global float *param, ulong p_off, const global float *grad, ulong g_off,
                         ulong n, float lr, float wd, const global int *amp)
{
    ulong i = get_global_id(0);
    if (i >= n || amp[1] != 0) return;
    float p = param[p_off + i], g = grad[g_off + i];
    if (wd != 0.0f) g += wd * p;
    param[p_off + i] = p - lr * g;
}

/* `steps`: the optimizer steps attempted before this one; the first step taken is the one with
 * steps == skipped. */
kernel void sgd_momentum_step_amp(global float *param, ulong p_off, const global float *grad,
                                  ulong g_off, global float *buf, ulong b_off, ulong n, float lr,
                                  float wd, float momentum, float one_minus_dampening,
                                  int nesterov, long steps, const global int *amp)
{
    ulong i = get_global_id(0);
    if (i >= n || amp[1] != 0) return;
    const int first = steps - (long)amp[3] == 0;
    float p = param[p_off + i], g = grad[g_off + i];
    if (wd != 0.0f) g += wd * p;
    float b = first ? g : momentum * buf[b_off + i] + one_minus_dampening * g;
    buf[b_off + i] = b;
    float d = nesterov ? g + momentum * b : b;
    param[p_off + i] = p - lr * d;
}

/* One item, before adam_step_amp: with t = steps + 1 - skipped, amp[4] = step_size =
 * lr / (1 - beta1^t) and amp[5] = bc2_sqrt = sqrt(1 - beta2^t) (f32 bits), from
 * log_beta1 = log(beta1) and log_beta2 (-inf for beta 0). Once per step, not per element. */
kernel void adam_amp_prepare(global int *amp, float lr, float log_beta1, float log_beta2,
                             long steps)
{
    if (get_global_id(0) != 0) return;
    const float t = (float)(steps + 1 - (long)amp[3]);
    amp[4] = as_int(lr / -expm1(t * log_beta1));
    amp[5] = as_int(sqrt(-expm1(t * log_beta2)));
}

/* As adam_step, with step_size and bc2_sqrt from adam_amp_prepare. */
kernel void adam_step_amp(global float *param, ulong p_off, const global float *grad, ulong g_off,
                          global float *exp_avg, ulong m_off, global float *exp_avg_sq,
                          ulong v_off, ulong n, float one_minus_beta1, float beta2,
                          float one_minus_beta2, float eps, float wd, float decay,
                          const global int *amp)
{
    ulong i = get_global_id(0);
    if (i >= n || amp[1] != 0) return;
    adam_update(param + p_off, grad + g_off, exp_avg + m_off, exp_avg_sq + v_off, i,
                as_float(amp[4]), as_float(amp[5]), one_minus_beta1, beta2, one_minus_beta2, eps,
                wd, decay);
}
