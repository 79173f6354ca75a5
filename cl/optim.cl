/* Optimizer updates over one flat f32 parameter tensor (src/train/optim.c): SGD, SGD with momentum
 * (dampening, Nesterov), Adam/AdamW. Tensors arrive as (buffer, offset in elements); each
 * work-item updates OPTIM_V consecutive elements, as one float16 where all of them are there
 * (the last work-item's few one by one). The order of operations follows PyTorch's single-tensor
 * implementations (torch/optim/sgd.py, adam.py); scalars derived from the step count (bias
 * corrections, AdamW's decay factor) are computed on the host in double.
 * The *_amp variants serve fp16 loss scaling (cl/amp.cl's state: [1] found_inf, [3] skipped
 * steps): they change nothing when found_inf is set, and count steps without the skipped ones
 * (SGD's first step, Adam's t), which only the device knows; Adam's bias corrections are then
 * computed on the device in f32 (-expm1(t * log(beta)), accurate to a few ulps).
 * The program is built with -cl-denorms-are-zero (src/ops/ops_internal.h, CLT__OPTS_OPTIM):
 * the moments decay into subnormals where gradients are tiny or zero, and CPUs compute with
 * subnormals through microcode assists (Adam 20 times slower on PoCL when all are). A device
 * may flush them to zero; the values lost are below 1.2e-38.
 * With -DCOPY_DTYPE (common.cl's code of f16 or bf16) every update kernel takes two more
 * arguments, (copy, c_off), and also stores each updated parameter there, rounded as the cast
 * kernel rounds: a 16-bit model's weights, refreshed in the same pass (clt_optim_set_copy).
 * (One element per work-item, PoCL ran Adam with an f16 copy 2.4 times slower than Adam alone:
 * vstore_half_rte one value at a time; by vectors, faster than Adam alone was.)
 * Every update kernel also takes (no_decay, gnorm) before the copy's arguments, each NULL when
 * unused: no_decay holds one ushort per work-item whose bit j set exempts element
 * OPTIM_V * item + j from weight decay (biases and normalisation parameters); gnorm is
 * grad_norm_finish's output, whose [1] scales every gradient (clipping by the global norm).
 * grad_norm_partial and grad_norm_finish compute that norm on the device, so that clipping
 * needs no host read. */
#define OPTIM_V 16 /* src/train/optim.c's CLT__OPTIM_V */
#define OPTIM_NORM_TILE 256 /* leaves per work-group of the norm's reduction; a power of two */
#define OPTIM_NORM_LEAF 16  /* consecutive elements summed sequentially into one leaf */
/* (src/train/optim.c's CLT__OPTIM_NORM_CHUNK is their product, the elements per group) */

#ifdef COPY_DTYPE
#define OPTIM_COPY_ARGS , global CLT_TYPE(COPY_DTYPE) *copy, ulong c_off
#define OPTIM_COPY_V(v) CLT_VSTORE(COPY_DTYPE, OPTIM_V, (v), copy + c_off, i)
#define OPTIM_COPY_1(v) CLT_STORE(COPY_DTYPE, copy + c_off, i, (v))
#else
#define OPTIM_COPY_ARGS
#define OPTIM_COPY_V(v) ((void)0)
#define OPTIM_COPY_1(v) ((void)0)
#endif

/* The arguments every update kernel takes after its own, before OPTIM_COPY_ARGS. */
#define OPTIM_EXTRA_ARGS , const global ushort *no_decay, const global float *gnorm

/* Runs BODY(T, LD, ST, COPY, SEL) over the work-item's elements i: T float16 with vector loads
 * and stores where all OPTIM_V are there, else float, one element at a time. LD(p) is p[i] (p an
 * operand's first element), ST(v, p) stores v there, COPY(v) stores v into the copy, SEL(x, off)
 * is x for an element that decays and `off` for one that does not (no_decay's bit). `clip` is
 * the gradients' scale: gnorm[1], or 1. */
#define OPTIM_LD_V(p) vload16(0, (p) + i)
#define OPTIM_ST_V(v, p) vstore16((v), 0, (p) + i)
#define OPTIM_LD_1(p) ((p)[i])
#define OPTIM_ST_1(v, p) ((p)[i] = (v))
#define OPTIM_SEL_V(x, off) select((float16)(x), (float16)(off), nd_v)
#define OPTIM_SEL_1(x, off) (((nd >> (uint)(i - i0)) & 1u) ? (off) : (x))
#define OPTIM_EACH(BODY)                                                                           \
    do {                                                                                           \
        const ulong i0 = get_global_id(0) * OPTIM_V;                                               \
        if (i0 >= n) return;                                                                       \
        const uint nd = no_decay ? no_decay[get_global_id(0)] : 0u;                                \
        const float clip = gnorm ? gnorm[1] : 1.0f;                                                \
        if (n - i0 >= OPTIM_V) {                                                                   \
            const ulong i = i0;                                                                    \
            /* -1 (all bits set, select's b) where the element does not decay */                  \
            const int16 nd_v =                                                                     \
                -(((int16)((int)nd) >>                                                             \
                   (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) & 1);            \
            BODY(float16, OPTIM_LD_V, OPTIM_ST_V, OPTIM_COPY_V, OPTIM_SEL_V);                      \
        } else {                                                                                   \
            for (ulong i = i0; i < n; i++)                                                         \
                BODY(float, OPTIM_LD_1, OPTIM_ST_1, OPTIM_COPY_1, OPTIM_SEL_1);                    \
        }                                                                                          \
    } while (0)

/* param -= lr * (clip * grad + wd * param) */
#define SGD_BODY(T, LD, ST, COPY, SEL)                                                             \
    do {                                                                                           \
        T p = LD(param + p_off), g = LD(grad + g_off) * clip;                                      \
        if (wd != 0.0f) g += SEL(wd, 0.0f) * p;                                                    \
        p -= lr * g;                                                                               \
        ST(p, param + p_off);                                                                      \
        COPY(p);                                                                                   \
    } while (0)

/* SGD with momentum: g = clip * grad + wd * param; buf = first ? g : momentum * buf +
 * (1 - dampening) * g; param -= lr * (nesterov ? g + momentum * buf : buf). */
#define SGD_MOMENTUM_BODY(T, LD, ST, COPY, SEL)                                                    \
    do {                                                                                           \
        T p = LD(param + p_off), g = LD(grad + g_off) * clip;                                      \
        if (wd != 0.0f) g += SEL(wd, 0.0f) * p;                                                    \
        const T b = first ? g : momentum * LD(buf + b_off) + one_minus_dampening * g;             \
        ST(b, buf + b_off);                                                                        \
        p -= lr * (nesterov ? g + momentum * b : b);                                               \
        ST(p, param + p_off);                                                                      \
        COPY(p);                                                                                   \
    } while (0)

/* Adam / AdamW: param *= decay (AdamW: 1 - lr * wd, else 1); g = clip * grad + wd * param
 * (Adam's L2, wd = 0 for AdamW); m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
 * param -= step_size * m / (sqrt(v) / bc2_sqrt + eps) with step_size = lr / (1 - beta1^t) and
 * bc2_sqrt = sqrt(1 - beta2^t). torch.lerp: start + w * (end - start) for w < 0.5, else
 * end - (end - start) * (1 - w). */
#define ADAM_BODY(T, LD, ST, COPY, SEL)                                                            \
    do {                                                                                           \
        T p = LD(param + p_off), g = LD(grad + g_off) * clip;                                      \
        if (decay != 1.0f) p *= SEL(decay, 1.0f);                                                  \
        if (wd != 0.0f) g += SEL(wd, 0.0f) * p;                                                    \
        T m = LD(exp_avg + m_off), v = LD(exp_avg_sq + v_off);                                     \
        m = one_minus_beta1 < 0.5f ? m + one_minus_beta1 * (g - m)                                 \
                                   : g - (g - m) * (1.0f - one_minus_beta1);                       \
        v = beta2 * v + one_minus_beta2 * (g * g);                                                 \
        ST(m, exp_avg + m_off);                                                                    \
        ST(v, exp_avg_sq + v_off);                                                                 \
        const T denom = sqrt(v) / bc2_sqrt + eps;                                                  \
        p -= step_size * (m / denom);                                                              \
        ST(p, param + p_off);                                                                      \
        COPY(p);                                                                                   \
    } while (0)

kernel void sgd_step(global float *param, ulong p_off, const global float *grad, ulong g_off,
                     ulong n, float lr, float wd OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    OPTIM_EACH(SGD_BODY);
}

kernel void sgd_momentum_step(global float *param, ulong p_off, const global float *grad,
                              ulong g_off, global float *buf, ulong b_off, ulong n, float lr,
                              float wd, float momentum, float one_minus_dampening, int nesterov,
                              int first OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    OPTIM_EACH(SGD_MOMENTUM_BODY);
}

/* Adam / AdamW with the host's step_size and bc2_sqrt. */
kernel void adam_step(global float *param, ulong p_off, const global float *grad, ulong g_off,
                      global float *exp_avg, ulong m_off, global float *exp_avg_sq, ulong v_off,
                      ulong n, float step_size, float bc2_sqrt, float one_minus_beta1,
                      float beta2, float one_minus_beta2, float eps, float wd,
                      float decay OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    OPTIM_EACH(ADAM_BODY);
}

/* ---- loss-scaled variants ------------------------------------------------------------------- */
kernel void sgd_step_amp(global float *param, ulong p_off, const global float *grad, ulong g_off,
                         ulong n, float lr, float wd,
                         const global int *amp OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    if (amp[1] != 0) return;
    OPTIM_EACH(SGD_BODY);
}

/* `steps`: the optimizer steps attempted before this one; the first step taken is the one with
 * steps == skipped. */
kernel void sgd_momentum_step_amp(global float *param, ulong p_off, const global float *grad,
                                  ulong g_off, global float *buf, ulong b_off, ulong n, float lr,
                                  float wd, float momentum, float one_minus_dampening,
                                  int nesterov, long steps,
                                  const global int *amp OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    if (amp[1] != 0) return;
    const int first = steps - (long)amp[3] == 0;
    OPTIM_EACH(SGD_MOMENTUM_BODY);
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
                          const global int *amp OPTIM_EXTRA_ARGS OPTIM_COPY_ARGS)
{
    if (amp[1] != 0) return;
    const float step_size = as_float(amp[4]), bc2_sqrt = as_float(amp[5]);
    OPTIM_EACH(ADAM_BODY);
}

/* ---- the gradients' global L2 norm, for clipping (torch.nn.utils.clip_grad_norm_) ---------- */

/* Pairwise sum of leaf[0 .. OPTIM_NORM_TILE) into leaf[0], in a shape that does not depend on
 * the local size; called by every work-item of the group after a barrier, ends with one. */
static inline void optim_norm_tree(local float *leaf)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    for (uint h = OPTIM_NORM_TILE / 2; h > 0; h >>= 1) {
        for (uint j = lid; j < h; j += lsz) leaf[j] += leaf[j + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Work-group k writes into gnorm[2 + k] the sum of squares of grad's elements
 * [k * CHUNK, (k + 1) * CHUNK), CHUNK = OPTIM_NORM_TILE * OPTIM_NORM_LEAF: each leaf (a
 * work-item's, in order) the sequential sum of OPTIM_NORM_LEAF consecutive squares, the leaves
 * summed by a tree of fixed shape. Launched with ceil(n / CHUNK) groups of any size; no result
 * depends on that size. */
kernel void grad_norm_partial(const global float *grad, ulong g_off, ulong n, global float *gnorm)
{
    local float leaf[OPTIM_NORM_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong t0 = (ulong)get_group_id(0) * OPTIM_NORM_TILE * OPTIM_NORM_LEAF;
    for (uint l = lid; l < OPTIM_NORM_TILE; l += lsz) {
        const ulong i0 = t0 + (ulong)l * OPTIM_NORM_LEAF;
        float s = 0.0f;
        for (ulong i = i0; i < i0 + OPTIM_NORM_LEAF && i < n; i++) {
            const float g = grad[g_off + i];
            s += g * g;
        }
        leaf[l] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    optim_norm_tree(leaf);
    if (lid == 0) gnorm[2 + get_group_id(0)] = leaf[0];
}

/* One work-group: the `groups` partial sums gnorm[2 ..] added as grad_norm_partial adds
 * elements (leaves of OPTIM_NORM_LEAF in order, trees over tiles, the tiles' sums in order);
 * gnorm[0] = the norm, sqrt of that sum, and gnorm[1] = the clip factor
 * min(1, max_norm / (norm + 1e-6)) as torch computes it in f32 (a NaN norm gives NaN, which
 * torch.clamp keeps too). */
kernel void grad_norm_finish(global float *gnorm, ulong groups, float max_norm)
{
    local float leaf[OPTIM_NORM_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    if (get_group_id(0) != 0) return;
    const global float *part = gnorm + 2;
    float total = 0.0f;
    for (ulong t0 = 0; t0 < groups; t0 += (ulong)OPTIM_NORM_TILE * OPTIM_NORM_LEAF) {
        for (uint l = lid; l < OPTIM_NORM_TILE; l += lsz) {
            const ulong i0 = t0 + (ulong)l * OPTIM_NORM_LEAF;
            float s = 0.0f;
            for (ulong i = i0; i < i0 + OPTIM_NORM_LEAF && i < groups; i++) s += part[i];
            leaf[l] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        optim_norm_tree(leaf);
        if (lid == 0) total += leaf[0];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        const float norm = sqrt(total), c = max_norm / (norm + 1e-6f);
        gnorm[0] = norm;
        gnorm[1] = c > 1.0f ? 1.0f : c;
    }
}
