/* The bias half of a linear layer (the GEMM half is clt_op_gemm): y (B, OUT) += bias (OUT), and
 * the bias gradient db (OUT) = beta * db + column sums of dy (B, OUT). y, bias and dy may be f32,
 * f16 or bf16 storage (-DY_DTYPE, -DB_DTYPE, -DDY_DTYPE; f32 arithmetic); db is f32. The column
 * sums run in an order fixed by the constants below and B, never by the work-group size or the
 * number of groups, so the bits are the same on every launch configuration and every run. */

#ifndef CLT_BIAS_COLS
#define CLT_BIAS_COLS 16 /* columns per vector: 4, 8 or 16 */
#endif
#ifndef Y_DTYPE
#define Y_DTYPE CLT_F32
#endif
#ifndef B_DTYPE
#define B_DTYPE CLT_F32
#endif
#ifndef DY_DTYPE
#define DY_DTYPE CLT_F32
#endif
#ifndef CLT_BIAS_VECS
#define CLT_BIAS_VECS 4 /* vectors of CLT_BIAS_COLS per row of a work-group's tile */
#endif
#define CLT_BIAS_TILE (CLT_BIAS_COLS * CLT_BIAS_VECS) /* columns per work-group */
#ifndef CLT_BIAS_SLICES
#define CLT_BIAS_SLICES 32 /* row slices per column tile, a power of two */
#endif

/* y[b * OUT + o] += bias[o] for b < rows. Range (ceil(OUT / C), rows), C = CLT_BIAS_COLS:
 * work-item (ob, b) adds columns C ob .. C ob + C - 1 of row b as one vector (a row's last
 * OUT % C element by element). One work-item per element, with a division for its column,
 * took 45 us for MLP-S's 128 x 256 on PoCL (1137 calls: 5 % of its step's kernel time). */
kernel void linear_forward_bias(global CLT_TYPE(Y_DTYPE) *y, ulong y_off,
                                const global CLT_TYPE(B_DTYPE) *bias, ulong b_off, ulong rows,
                                uint OUT)
{
    const uint o0 = (uint)get_global_id(0) * CLT_BIAS_COLS;
    const ulong b = get_global_id(1);
    if (o0 >= OUT || b >= rows) return;
    const ulong at = y_off + b * OUT + o0;
    if (o0 + CLT_BIAS_COLS <= OUT) {
        CLT_VSTORE(Y_DTYPE, CLT_BIAS_COLS,
                   CLT_VLOAD(Y_DTYPE, CLT_BIAS_COLS, y, at) +
                       CLT_VLOAD(B_DTYPE, CLT_BIAS_COLS, bias, b_off + o0),
                   y, at);
        return;
    }
    for (uint o = 0; o0 + o < OUT; o++)
        CLT_STORE(Y_DTYPE, y, at + o,
                  CLT_LOAD(Y_DTYPE, y, at + o) + CLT_LOAD(B_DTYPE, bias, b_off + o0 + o));
}

/* db[o] = beta * db[o] + sum_b dy[b, o]; beta == 0 overwrites (db is not read, so NaN or garbage
 * in it does not leak through). Launched with ceil(OUT / CLT_BIAS_TILE) work-groups of any size.
 * Each group sums a tile of CLT_BIAS_TILE columns: the rows are cut into CLT_BIAS_SLICES slices
 * of ceil(B / SLICES) consecutive rows, and a work-item adds slice s's rows in order, each row's
 * tile as CLT_BIAS_VECS vectors of CLT_BIAS_COLS consecutive elements side by side (the last
 * tile column by column, the same sums); the SLICES partial sums are then added by a fixed
 * pairwise tree. A work-item streams whole row segments (256 bytes in f32): with one vector per
 * group the same sums took twice as long on PoCL (every group walked all rows for 64 bytes
 * each). */
#define CLT_BIAS_T CLT__XCAT(float, CLT_BIAS_COLS)
kernel void linear_backward_bias(global float *db, ulong db_off,
                                 const global CLT_TYPE(DY_DTYPE) *dy, ulong dy_off, ulong B,
                                 uint OUT, float beta)
{
    local float part[CLT_BIAS_SLICES][CLT_BIAS_TILE];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const ulong col0 = (ulong)get_group_id(0) * CLT_BIAS_TILE;
    const ulong per = (B + CLT_BIAS_SLICES - 1) / CLT_BIAS_SLICES; /* rows per slice */
    const uint ncol = (uint)min((ulong)CLT_BIAS_TILE, OUT - col0);
    const global CLT_TYPE(DY_DTYPE) *p = dy + dy_off + col0;

    for (uint sl = lid; sl < CLT_BIAS_SLICES; sl += lsz) {
        const ulong b0 = min(B, sl * per), b1 = min(B, b0 + per);
        if (ncol == CLT_BIAS_TILE) {
            CLT_BIAS_T acc[CLT_BIAS_VECS];
            for (uint v = 0; v < CLT_BIAS_VECS; v++) acc[v] = 0.0f;
            for (ulong b = b0; b < b1; b++)
                for (uint v = 0; v < CLT_BIAS_VECS; v++)
                    acc[v] += CLT_VLOAD(DY_DTYPE, CLT_BIAS_COLS, p, b * OUT + v * CLT_BIAS_COLS);
            for (uint v = 0; v < CLT_BIAS_VECS; v++)
                CLT__XCAT(vstore, CLT_BIAS_COLS)(acc[v], 0, part[sl] + v * CLT_BIAS_COLS);
        } else {
            for (uint c = 0; c < CLT_BIAS_TILE; c++) {
                float acc = 0.0f;
                for (ulong b = b0; c < ncol && b < b1; b++)
                    acc += CLT_LOAD(DY_DTYPE, p, b * OUT + c);
                part[sl][c] = acc;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = CLT_BIAS_SLICES / 2; h > 0; h >>= 1) {
        for (uint q = lid; q < h * CLT_BIAS_TILE; q += lsz) {
            const uint c = q % CLT_BIAS_TILE, sl = q / CLT_BIAS_TILE;
            part[sl][c] += part[sl + h][c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (uint c = lid; c < ncol; c += lsz) {
        const float sum = part[0][c];
        db[db_off + col0 + c] = beta == 0.0f ? sum : beta * db[db_off + col0 + c] + sum;
    }
}
