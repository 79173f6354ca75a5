/* Dynamic loss scaling for fp16 mixed precision (src/ops/amp.c, the scaler in
 * src/train/optim.c), as PyTorch's GradScaler, with every decision on the device: no host wait
 * per step.
 * The scaler's state is an i32 buffer of CLT_AMP_STATE_LEN elements:
 *   [0] the scale (an f32's bits)   [1] found_inf: non-zero when the last unscale saw inf/NaN
 *   [2] growth tracker (clean steps since the last change of scale)   [3] skipped steps
 *   [4], [5] scratch for cl/optim.cl's adam_amp_prepare. */

/* elements per work-item, by float16s where all are there (src/ops/amp.c's CLT__AMP_V) */
#define AMP_V 64

/* x (n) f32 *= scale, in place (the gradient of the loss before backward). */
kernel void amp_scale(global float *x, ulong x_off, ulong n, const global int *state)
{
    const ulong i = get_global_id(0) * AMP_V;
    if (i >= n) return;
    global float *p = x + x_off + i;
    const float s = as_float(state[0]);
    if (n - i >= AMP_V) {
        for (int k = 0; k < AMP_V; k += 16) vstore16(vload16(0, p + k) * s, 0, p + k);
        return;
    }
    for (int j = 0; j < (int)(n - i); j++) p[j] *= s;
}

/* g (n) f32 *= 1 / scale, in place; found_inf = 1 if any result is not finite. Every item that
 * sees one writes the same value, so the race is benign. (PoCL, 235k gradients: one element
 * per work-item 111-123 us, 16 as a float16 89 us, 64 with one branch for them 47 us; the
 * product alone takes 37.) */
kernel void amp_unscale(global float *g, ulong g_off, ulong n, global int *state)
{
    const ulong i = get_global_id(0) * AMP_V;
    if (i >= n) return;
    global float *p = g + g_off + i;
    const float inv = 1.0f / as_float(state[0]);
    bool bad = false;
    if (n - i >= AMP_V) {
        int16 inf = 0;
        for (int k = 0; k < AMP_V; k += 16) {
            const float16 v = vload16(0, p + k) * inv;
            vstore16(v, 0, p + k);
            inf |= !isfinite(v);
        }
        bad = any(inf);
    } else {
        for (int j = 0; j < (int)(n - i); j++) {
            const float v = p[j] * inv;
            p[j] = v;
            bad = bad || !isfinite(v);
        }
    }
    if (bad) state[1] = 1;
}

/* One item, after the optimizer step: GradScaler.update. On found_inf the scale is multiplied
 * by backoff, the tracker reset and the step counted as skipped; otherwise the tracker grows
 * and, on reaching growth_interval, the scale is multiplied by growth (if it stays finite) and
 * the tracker reset. found_inf is cleared for the next step. */
kernel void amp_update(global int *state, float growth, float backoff, int growth_interval)
{
    if (get_global_id(0) != 0) return;
    float scale = as_float(state[0]);
    int tracker = state[2];
    if (state[1] != 0) {
        scale *= backoff;
        tracker = 0;
        state[3] += 1;
    } else {
        tracker += 1;
        if (tracker >= growth_interval) {
            const float grown = scale * growth;
            if (isfinite(grown)) scale = grown;
            tracker = 0;
        }
    }
    state[0] = as_int(scale);
    state[1] = 0;
    state[2] = tracker;
}
