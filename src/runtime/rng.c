/* Philox4x32-10 on the host, and what is built on it: one value per (seed, stream, index),
 * uniform floats, filled arrays and seeded Fisher-Yates permutations. cl/rng.cl holds the same
 * function for the device; both must change together. */
#include "runtime/rng_internal.h"
#include "runtime/internal.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void clt_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four elements 4*block .. 4*block+3 of `stream`. */
static void rng_block(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4])
{
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream,
                             (uint32_t)(stream >> 32)};
    clt_philox4x32(ctr, key, out);
}

uint32_t clt_rng_u32(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    rng_block(seed, stream, index >> 2, r);
    return r[index & 3];
}

static float to_uniform(uint32_t u)
{
    return (float)(u >> 8) * 0x1.0p-24f;
}

float clt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return to_uniform(clt_rng_u32(seed, stream, index));
}

void clt_rng_fill_uniform(uint64_t seed, uint64_t stream, uint64_t first, float *dst, size_t n,
                          float lo, float hi)
{
    const float range = hi - lo;
    uint32_t r[4];
    uint64_t block = UINT64_MAX;
    CLT_ASSERT(dst || n == 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t index = first + i;
        if (index >> 2 != block) { /* block starts at UINT64_MAX, never a real block */
            block = index >> 2;
            rng_block(seed, stream, block, r);
        }
        dst[i] = lo + range * to_uniform(r[index & 3]);
    }
}

void clt_rng_permutation(uint64_t seed, uint64_t stream, uint32_t *perm, size_t n)
{
    uint32_t r[4];
    CLT_ASSERT(perm || n == 0);
    CLT_ASSERT((uint64_t)n <= (uint64_t)UINT32_MAX + 1);
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    /* Step k uses elements 2k and 2k+1: the block k/2, words 2(k&1) and 2(k&1)+1. */
    for (uint64_t k = 0; k + 1 < n; k++) {
        uint64_t i = n - 1 - k;
        if ((k & 1) == 0) rng_block(seed, stream, k >> 1, r);
        uint64_t x = (uint64_t)r[2 * (k & 1)] | (uint64_t)r[2 * (k & 1) + 1] << 32;
        uint64_t j = x % (i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
