/* Token embedding (nn.Embedding) and learned positions for sequences: the forward gathers rows
 * of a table (V, D) by token id into out (R, D), R = B * T positions, and optionally adds the
 * position table (T, D) row r % T in the same pass (embed + posembed fused: one read and one
 * write of the activations instead of two of each); embedding_add_positions adds the positions
 * to any input. Tables and activations are X_DTYPE storage, ids ID_DTYPE (i32, u16 or u8), the
 * gradients f32, arithmetic f32.
 *
 * The table's gradient is a scatter-add of dy's rows by token, made deterministic with no
 * atomics at all: the positions are sorted by (token, position) with a bitonic sort on the
 * device (embedding_sort_init, then one embedding_sort_step launch per (k, j) stage), each
 * token's first index in that order is found by a binary search (embedding_offsets), and one
 * work-item per (token, column) adds its positions' dy in position order
 * (embedding_backward_table). The keys are unique (the position breaks ties), so the order,
 * and hence every bit, depends on the ids alone, never on the launch or the scheduling.
 * The position table's gradient sums dy over the batch in batch order, one work-item per
 * (position, column) (embedding_backward_positions). */
#ifndef X_DTYPE
#define X_DTYPE CLT_F32
#endif
#ifndef ID_DTYPE
#define ID_DTYPE CLT_I32
#endif
#define X_T CLT_TYPE(X_DTYPE)
#define ID_T CLT_TYPE(ID_DTYPE)

/* A position with no valid token, and the padding of the sort past the R positions. */
#define CLT_EMB_NONE 0xffffffffu

/* The token id of ids[i] as an unsigned number: a negative i32 id becomes one above any V. */
static inline uint clt_emb_id(const global ID_T *ids, ulong i)
{
    return (uint)ids[i];
}

/* out[r, j] = table[ids[r], j] (+ pos[r % T, j] when has_pos) for r < R, j < D; a row whose id
 * is outside [0, V) is NaN (the caller's data is wrong, and a NaN loss says so). One work-item
 * per element, launched as (columns, rows): no 64-bit division per element. */
kernel void embedding_forward(global X_T *out, ulong o_off, const global X_T *table, ulong t_off,
                              const global ID_T *ids, ulong i_off, const global X_T *pos,
                              ulong p_off, ulong R, uint D, uint T, uint V, int has_pos)
{
    const ulong j = get_global_id(0), r = get_global_id(1);
    if (j >= D || r >= R) return;
    const ulong i = r * D + j;
    const uint id = clt_emb_id(ids + i_off, r);
    float v = id < V ? CLT_LOAD(X_DTYPE, table + t_off, (ulong)id * D + j) : NAN;
    if (has_pos) v += CLT_LOAD(X_DTYPE, pos + p_off, (r % T) * D + j);
    CLT_STORE(X_DTYPE, out + o_off, i, v);
}

/* y[r, j] = x[r, j] + pos[r % T, j] over R rows of D; y may be x (each element is read and
 * written by one work-item). Launched as (columns, rows), as embedding_forward. */
kernel void embedding_add_positions(global X_T *y, ulong y_off, const global X_T *x, ulong x_off,
                                    const global X_T *pos, ulong p_off, ulong R, uint D, uint T)
{
    const ulong j = get_global_id(0), r = get_global_id(1);
    if (j >= D || r >= R) return;
    const ulong i = r * D + j;
    const float v = CLT_LOAD(X_DTYPE, x + x_off, i) + CLT_LOAD(X_DTYPE, pos + p_off, (r % T) * D + j);
    CLT_STORE(X_DTYPE, y + y_off, i, v);
}

/* perm[i] = i for the R positions, CLT_EMB_NONE for the padding up to P (a power of two). */
kernel void embedding_sort_init(global uint *perm, ulong pm_off, uint R, uint P)
{
    const uint i = get_global_id(0);
    if (i < P) perm[pm_off + i] = i < R ? i : CLT_EMB_NONE;
}

/* The sort key of position p: (token, position), the padding last. */
static inline ulong clt_emb_key(const global ID_T *ids, uint p)
{
    return p == CLT_EMB_NONE ? ULONG_MAX : ((ulong)clt_emb_id(ids, p) << 32) | p;
}

/* One compare-exchange stage (k, j) of the bitonic sort of perm[0 .. P) by clt_emb_key: work-item
 * i (< P / 2) orders the pair (a, a + j), a = the i-th index whose bit j is clear, ascending
 * where bit k of a is clear. The pairs are disjoint, so a stage has no race. */
kernel void embedding_sort_step(global uint *perm, ulong pm_off, const global ID_T *ids,
                                ulong i_off, uint P, uint k, uint j)
{
    const uint i = get_global_id(0);
    if (i >= P / 2) return;
    const uint a = (i / j) * 2 * j + i % j, b = a + j;
    global uint *pm = perm + pm_off;
    const global ID_T *id = ids + i_off;
    const uint pa = pm[a], pb = pm[b];
    const ulong ka = clt_emb_key(id, pa), kb = clt_emb_key(id, pb);
    const bool up = (a & k) == 0;
    if (up ? ka > kb : ka < kb) {
        pm[a] = pb;
        pm[b] = pa;
    }
}

/* offs[v] = the first index of the sorted perm[0 .. R) whose token is v or above, for v <= V:
 * token v's positions are perm[offs[v] .. offs[v + 1]); ids outside [0, V) sort after
 * offs[V] and are never read. A binary search per work-item. */
kernel void embedding_offsets(global uint *offs, ulong of_off, const global uint *perm,
                              ulong pm_off, const global ID_T *ids, ulong i_off, uint R, uint V)
{
    const uint v = get_global_id(0);
    if (v > V) return;
    const global uint *pm = perm + pm_off;
    const global ID_T *id = ids + i_off;
    uint lo = 0, hi = R; /* the answer is in [lo, hi] */
    while (lo < hi) {
        const uint mid = lo + (hi - lo) / 2;
        if (clt_emb_id(id, pm[mid]) < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    offs[of_off + v] = lo;
}

/* dtable[v, j] = beta dtable[v, j] + sum of dy[p, j] over token v's positions p in increasing
 * order (beta 0: not read), for v < V, j < D. One work-item per element, consecutive items
 * along a row. */
kernel void embedding_backward_table(global float *dtable, ulong dt_off, const global X_T *dy,
                                     ulong dy_off, const global uint *perm, ulong pm_off,
                                     const global uint *offs, ulong of_off, uint V, uint D,
                                     float beta)
{
    const ulong i = get_global_id(0);
    if (i >= (ulong)V * D) return;
    const ulong v = i / D, j = i % D;
    const uint k0 = offs[of_off + v], k1 = offs[of_off + v + 1];
    float s = 0.0f;
    for (uint k = k0; k < k1; k++)
        s += CLT_LOAD(X_DTYPE, dy + dy_off, (ulong)perm[pm_off + k] * D + j);
    dtable[dt_off + i] = beta == 0.0f ? s : beta * dtable[dt_off + i] + s;
}

/* dpos[t, j] = beta dpos[t, j] + sum over b < R / T of dy[b T + t, j], b in order (beta 0: not
 * read). One work-item per element. */
kernel void embedding_backward_positions(global float *dpos, ulong dp_off, const global X_T *dy,
                                         ulong dy_off, ulong R, uint D, uint T, float beta)
{
    const ulong i = get_global_id(0);
    if (i >= (ulong)T * D) return;
    const ulong nb = R / T;
    float s = 0.0f;
    for (ulong b = 0; b < nb; b++)
        s += CLT_LOAD(X_DTYPE, dy + dy_off, b * T * D + i);
    dpos[dp_off + i] = beta == 0.0f ? s : beta * dpos[dp_off + i] + s;
}
