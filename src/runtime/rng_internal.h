/* Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC 2011), the same bits on the host and, through cl/rng.cl, on any OpenCL device.
 * A value is a pure function of (seed, stream, index): no state, any order, any thread.
 * All functions here are thread-safe and cannot fail. */
#ifndef CLTRAIN_RNG_INTERNAL_H
#define CLTRAIN_RNG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* The raw bijection: 10 rounds of Philox4x32 on the 128-bit counter `ctr` under the 64-bit key
 * `key`, as Random123's philox4x32_R(10, ctr, key). Bit-identical to cl/rng.cl. */
void clt_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Element `index` of `stream` under `seed`. One Philox block gives four elements:
 *   key = {seed & 0xffffffff, seed >> 32}
 *   ctr = {block & 0xffffffff, block >> 32, stream & 0xffffffff, stream >> 32},
 *   block = index >> 2,  value = word (index & 3) of philox4x32(ctr, key).
 * So every (stream, index) pair gives an independent value and a stream holds 2^64 of them. */
uint32_t clt_rng_u32(uint64_t seed, uint64_t stream, uint64_t index);

/* Uniform in [0, 1): (clt_rng_u32(...) >> 8) * 2^-24, exact in float, at most 1 - 2^-24. */
float clt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* dst[i] = lo + (hi - lo) * clt_rng_uniform(seed, stream, first + i) for i in [0, n), computed
 * in float (so within [lo, hi], and in [lo, hi) unless rounding reaches hi). */
void clt_rng_fill_uniform(uint64_t seed, uint64_t stream, uint64_t first, float *dst,
                          size_t n, float lo, float hi);

/* A uniformly shuffled permutation of 0 .. n-1 in perm (n), by Fisher-Yates: for i from n-1
 * down to 1, swap perm[i] with perm[j], j = r % (i + 1), where r is the 64-bit value
 * u32(2k) | u32(2k + 1) << 32 of `stream` at step k = n-1-i. The modulo's bias is below
 * (i + 1) / 2^64, less than 2^-32 for every n the call accepts. Deterministic in (seed, stream,
 * n). n <= 2^32 (a programmer error otherwise). */
void clt_rng_permutation(uint64_t seed, uint64_t stream, uint32_t *perm, size_t n);

/* Streams. Keep the users of one seed apart by giving each its own stream; the convention is
 * a purpose in the top 8 bits and the purpose's own number in the low 56:
 *   init of named parameter i     clt_rng_stream(CLT_RNG_INIT, i)
 *   shuffle of epoch e            clt_rng_stream(CLT_RNG_SHUFFLE, e)
 *   dropout at step s, layer i    clt_rng_stream(CLT_RNG_DROPOUT, s * L + i), L = layers in
 *                                 the model spec (src/nn/model.c)
 *   augmentation in epoch e        clt_rng_stream(CLT_RNG_DATA, e), index 8 p + k for the
 *                                 sample at position p of the epoch's order (src/data/loader.c,
 *                                 cl/augment.cl)
 *   text windows at step s         clt_rng_stream(CLT_RNG_TEXT, s), indices 2w and 2w + 1 for
 *                                 window w (src/data/text_sampler.c, cl/textbatch.cl)
 *   generated text                 clt_rng_stream(CLT_RNG_GENERATE, 0), index p for the token at
 *                                  position p of the text (prompt included; cl/sample.cl) */
typedef enum clt_rng_purpose {
    CLT_RNG_INIT = 1,
    CLT_RNG_SHUFFLE = 2,
    CLT_RNG_DROPOUT = 3,
    CLT_RNG_DATA = 4, /* augmentation, sampling of the data */
    CLT_RNG_TEXT = 5, /* the training windows of a text */
    CLT_RNG_GENERATE = 6, /* generated text: element p draws the token at position p */
    CLT_RNG_USER = 255
} clt_rng_purpose;

static inline uint64_t clt_rng_stream(clt_rng_purpose purpose, uint64_t number)
{
    return ((uint64_t)purpose << 56) | (number & 0x00ffffffffffffffull);
}

#endif
