/* Philox4x32-10 counter-based random numbers for kernels (dropout masks), bit for bit the host's
 * src/runtime/rng.c: the same key, counter and element layout (see src/runtime/rng_internal.h).
 * Functions only, no kernels; OpenCL C 1.2. Include it once per program (it guards itself). */
#ifndef CLT_RNG_CL
#define CLT_RNG_CL

/* One Philox4x32 round. The products are taken in 64 bits rather than by mul_hi: the same bits,
 * one multiply each on CPUs and GPUs alike, where PoCL's mul_hi assembles them from 16-bit
 * pieces. */
static inline uint4 clt_philox_round(uint4 ctr, uint2 key)
{
    const ulong p0 = (ulong)0xD2511F53u * ctr.x, p1 = (ulong)0xCD9E8D57u * ctr.z;
    return (uint4)((uint)(p1 >> 32) ^ ctr.y ^ key.x, (uint)p1, (uint)(p0 >> 32) ^ ctr.w ^ key.y,
                   (uint)p0);
}

/* 10 rounds of Philox4x32 on the counter ctr under the key key (Random123's philox4x32_R). */
static uint4 clt_philox4x32(uint2 key, uint4 ctr)
{
    for (int round = 0; round < 10; round++) {
        if (round > 0) key += (uint2)(0x9E3779B9u, 0xBB67AE85u);
        ctr = clt_philox_round(ctr, key);
    }
    return ctr;
}

/* Philox4x32-10 on eight counters at once, stored by word: lane j of *x, *y, *z, *w is word 0,
 * 1, 2, 3 of counter j, in and out; the same bits as clt_philox4x32 on each counter. For
 * kernels that draw runs of blocks in vector lanes (a loop over blocks, or one block per
 * work-item, stays scalar on CPUs: vector types keep PoCL from vectorising across items). */
static inline void clt_philox4x32_x8(uint2 key, uint8 *x, uint8 *y, uint8 *z, uint8 *w)
{
    for (int round = 0; round < 10; round++) {
        const ulong8 p0 = convert_ulong8(*x) * 0xD2511F53ul, p1 = convert_ulong8(*z) * 0xCD9E8D57ul;
        const uint8 hi1 = convert_uint8(p1 >> 32), hi0 = convert_uint8(p0 >> 32);
        *x = hi1 ^ *y ^ key.x;
        *y = convert_uint8(p1 & 0xfffffffful);
        *z = hi0 ^ *w ^ key.y;
        *w = convert_uint8(p0 & 0xfffffffful);
        key += (uint2)(0x9E3779B9u, 0xBB67AE85u);
    }
}

/* Element index of stream under seed: word (index & 3) of the block index >> 2. */
static uint clt_rng_u32(ulong seed, ulong stream, ulong index)
{
    const ulong block = index >> 2;
    const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
    const uint4 ctr = (uint4)((uint)block, (uint)(block >> 32), (uint)stream, (uint)(stream >> 32));
    const uint4 r = clt_philox4x32(key, ctr);
    /* plain ifs: oclgrind 21.10 returned word 0 for every index above 3 through a chained
     * conditional here (the simulated GPU drew other numbers than the host's reference) */
    const uint word = (uint)index & 3u;
    uint bits = r.x;
    if (word == 1) bits = r.y;
    if (word == 2) bits = r.z;
    if (word == 3) bits = r.w;
    return bits;
}

/* Uniform in [0, 1): the top 24 bits times 2^-24, exact in float. */
static float clt_rng_uniform(ulong seed, ulong stream, ulong index)
{
    return (float)(clt_rng_u32(seed, stream, index) >> 8) * 0x1.0p-24f;
}

#endif
