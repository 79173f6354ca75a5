/* Philox4x32-10 counter-based random numbers for kernels (dropout masks), bit for bit the host's
 * src/runtime/rng.c: the same key, counter and element layout (see src/runtime/rng_internal.h).
 * Functions only, no kernels; OpenCL C 1.2. Include it once per program (it guards itself). */
#ifndef CLT_RNG_CL
#define CLT_RNG_CL

/* 10 rounds of Philox4x32 on the counter ctr under the key key (Random123's philox4x32_R). */
static uint4 clt_philox4x32(uint2 key, uint4 ctr)
{
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            key.x += 0x9E3779B9u;
            key.y += 0xBB67AE85u;
        }
        const uint lo0 = 0xD2511F53u * ctr.x;
        const uint hi0 = mul_hi(0xD2511F53u, ctr.x);
        const uint lo1 = 0xCD9E8D57u * ctr.z;
        const uint hi1 = mul_hi(0xCD9E8D57u, ctr.z);
        ctr = (uint4)(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    }
    return ctr;
}

/* Element index of stream under seed: word (index & 3) of the block index >> 2. */
static uint clt_rng_u32(ulong seed, ulong stream, ulong index)
{
    const ulong block = index >> 2;
    const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
    const uint4 ctr = (uint4)((uint)block, (uint)(block >> 32), (uint)stream, (uint)(stream >> 32));
    const uint4 r = clt_philox4x32(key, ctr);
    const uint word = (uint)(index & 3);
    return word == 0 ? r.x : word == 1 ? r.y : word == 2 ? r.z : r.w;
}

/* Uniform in [0, 1): the top 24 bits times 2^-24, exact in float. */
static float clt_rng_uniform(ulong seed, ulong stream, ulong index)
{
    return (float)(clt_rng_u32(seed, stream, index) >> 8) * 0x1.0p-24f;
}

#endif
