/* The next token of generated text drawn on the device (src/ops/sample.c): from one row of V
 * logits, softmax(logits / temperature) restricted to the top_k largest (ties with the k-th
 * kept, as torch.topk's threshold; 0 or k >= V: all), then one draw u = uniform(seed, stream,
 * index) from cl/rng.cl walked along the cumulative weights. One work-item: a row is one
 * token's worth of work, and a single walk keeps the draw the same bits on every device. Needs
 * cl/rng.cl in the same program ("rng,sample").
 * a = (seed, stream, index, 0), b = (V, top_k, 0, 0). */

/* The k-th largest value of row (with repeats counted), by descending through the distinct
 * values: O(V k), small next to the forward pass that produced the row. */
static float sample_threshold(const global float *row, uint V, uint k)
{
    float thr = INFINITY;
    uint seen = 0;
    while (seen < k) {
        float next = -INFINITY;
        for (uint i = 0; i < V; i++)
            if (row[i] < thr && row[i] > next) next = row[i];
        uint n = 0;
        for (uint i = 0; i < V; i++) n += row[i] == next;
        if (n == 0) break; /* only -inf left */
        thr = next;
        seen += n;
    }
    return thr;
}

kernel void sample_forward(const global float *logits, ulong l_off, global int *out, ulong o_off,
                           float temperature, ulong4 a, uint4 b)
{
    const global float *row = logits + l_off;
    const uint V = b.x, k = b.y;
    const float thr = k > 0 && k < V ? sample_threshold(row, V, k) : -INFINITY;
    float m = -INFINITY;
    for (uint i = 0; i < V; i++)
        if (row[i] >= thr) m = fmax(m, row[i]);
    float sum = 0.0f;
    for (uint i = 0; i < V; i++)
        if (row[i] >= thr) sum += exp((row[i] - m) / temperature);
    const float u = clt_rng_uniform(a.x, a.y, a.z) * sum;
    int pick = -1;
    float cum = 0.0f;
    for (uint i = 0; i < V; i++) {
        if (!(row[i] >= thr)) continue;
        cum += exp((row[i] - m) / temperature);
        pick = (int)i; /* the last kept one if rounding leaves u at the sum */
        if (u < cum) break;
    }
    out[o_off] = pick;
}
