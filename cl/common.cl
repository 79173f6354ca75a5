/* Shared by every program: storage types and fp32 load/store for each dtype (f16 through
 * vload_half/vstore_half_rte, which need no cl_khr_fp16; bf16 by bit operations, rounding to
 * nearest even), and the defaults of the defines the host passes. */
#ifndef CLT_WG
#define CLT_WG 256
#endif

/* dtype codes, as clt_dtype in include/cltrain/tensor.h */
#define CLT_F32 0
#define CLT_F16 1
#define CLT_BF16 2
#define CLT_I32 3
#define CLT_U8 4
#define CLT_U16 5

static inline float clt_bf16_load(const global ushort *p, ulong i)
{
    return as_float((uint)p[i] << 16);
}

static inline void clt_bf16_store(global ushort *p, ulong i, float v)
{
    uint x = as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) p[i] = (ushort)((x >> 16) | 0x40u); /* quiet NaN */
    else p[i] = (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* CLT_DEFINE_DTYPE(X, code) gives X_T (the storage type), X_LOAD(p, i) -> float and
 * X_STORE(p, i, v) for the dtype `code` (a -D define such as -DX_DTYPE=1). */
#define CLT__T_0 float
#define CLT__T_1 half
#define CLT__T_2 ushort
#define CLT__T_3 int
#define CLT__T_4 uchar
#define CLT__T_5 ushort
#define CLT__LOAD_0(p, i) ((p)[i])
#define CLT__LOAD_1(p, i) vload_half((i), (p))
#define CLT__LOAD_2(p, i) clt_bf16_load((p), (i))
#define CLT__LOAD_3(p, i) ((float)(p)[i])
#define CLT__LOAD_4(p, i) ((float)(p)[i])
#define CLT__LOAD_5(p, i) ((float)(p)[i])
#define CLT__STORE_0(p, i, v) ((p)[i] = (v))
#define CLT__STORE_1(p, i, v) vstore_half_rte((v), (i), (p))
#define CLT__STORE_2(p, i, v) clt_bf16_store((p), (i), (v))
#define CLT__STORE_3(p, i, v) ((p)[i] = convert_int_sat_rte(v))
#define CLT__STORE_4(p, i, v) ((p)[i] = convert_uchar_sat_rte(v))
#define CLT__STORE_5(p, i, v) ((p)[i] = convert_ushort_sat_rte(v))
#define CLT__CAT(a, b) a##b
#define CLT__XCAT(a, b) CLT__CAT(a, b)
#define CLT_TYPE(code) CLT__XCAT(CLT__T_, code)
#define CLT_LOAD(code, p, i) CLT__XCAT(CLT__LOAD_, code)(p, i)
#define CLT_STORE(code, p, i, v) CLT__XCAT(CLT__STORE_, code)(p, i, v)

/* CLT_VLOAD(code, n, p, i): the n (2, 4, 8 or 16) consecutive elements p[i .. i + n) of a float
 * dtype as a floatn, and CLT_VSTORE(code, n, v, p, i) the reverse, rounded as CLT_STORE rounds
 * each element; by vloadn / vload_halfn and their stores, which need element alignment only.
 * For kernels that walk runs of elements in vector lanes. */
#define CLT__BF16_ROUND(n)                                                                         \
    static inline CLT__XCAT(ushort, n) CLT__XCAT(clt_bf16_round, n)(CLT__XCAT(float, n) v)         \
    {                                                                                              \
        const CLT__XCAT(uint, n) x = CLT__XCAT(as_uint, n)(v);                                    \
        const CLT__XCAT(uint, n) r = select((x + 0x7fffu + ((x >> 16) & 1u)) >> 16,               \
                                            (x >> 16) | 0x40u, (x & 0x7fffffffu) > 0x7f800000u);   \
        return CLT__XCAT(convert_ushort, n)(r);                                                    \
    }                                                                                              \
    /* v rounded at p[0 .. n): one vector store where p is aligned for it (PoCL ran a vstoren    \
     * of computed ushorts element by element: a bf16 cast 1.5 times slower) */                  \
    static inline void CLT__XCAT(clt_bf16_vstore, n)(CLT__XCAT(float, n) v, global ushort *p)    \
    {                                                                                              \
        const CLT__XCAT(ushort, n) r = CLT__XCAT(clt_bf16_round, n)(v);                          \
        if ((size_t)p % sizeof r == 0)                                                             \
            *(global CLT__XCAT(ushort, n) *)p = r;                                                 \
        else                                                                                       \
            CLT__XCAT(vstore, n)(r, 0, p);                                                         \
    }
CLT__BF16_ROUND(2)
CLT__BF16_ROUND(4)
CLT__BF16_ROUND(8)
CLT__BF16_ROUND(16)
#define CLT__VLOAD_0(n, p, i) CLT__XCAT(vload, n)(0, (p) + (i))
#define CLT__VLOAD_1(n, p, i) CLT__XCAT(vload_half, n)(0, (p) + (i))
#define CLT__VLOAD_2(n, p, i)                                                                      \
    CLT__XCAT(as_float, n)(CLT__XCAT(convert_uint, n)(CLT__XCAT(vload, n)(0, (p) + (i))) << 16)
#define CLT__VSTORE_0(n, v, p, i) CLT__XCAT(vstore, n)((v), 0, (p) + (i))
#define CLT__VSTORE_1(n, v, p, i) CLT__XCAT(CLT__XCAT(vstore_half, n), _rte)((v), 0, (p) + (i))
#define CLT__VSTORE_2(n, v, p, i) CLT__XCAT(clt_bf16_vstore, n)((v), (p) + (i))
#define CLT_VLOAD(code, n, p, i) CLT__XCAT(CLT__VLOAD_, code)(n, p, i)
#define CLT_VSTORE(code, n, v, p, i) CLT__XCAT(CLT__VSTORE_, code)(n, v, p, i)
