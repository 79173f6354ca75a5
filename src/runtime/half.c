/* fp32 <-> f16/bf16 on the host, bit-exact with the kernels' vstore_half_rte and bf16 bit
 * operations (cl/common.cl); the tests use these as the CPU reference. */
#include "runtime/half_internal.h"

#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t clt_f32_to_f16(float f)
{
    uint32_t x = bits_of(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xffu) /* inf or NaN: keep the top mantissa bits, force a quiet NaN */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to infinity */
    if (e <= 0) {
        /* subnormal half (or zero): shift the full significand, round to nearest even */
        if (e < -10) return sign;
        uint32_t sig = mant | 0x800000u;
        int shift = 14 - e; /* 13 + (1 - e) */
        uint32_t h = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into inf: correct */
    return (uint16_t)(sign | h);
}

float clt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu) return float_of(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return float_of(sign);
        int e = -1;
        do { /* normalise the subnormal */
            mant <<= 1;
            e++;
        } while (!(mant & 0x400u));
        return float_of(sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13));
    }
    return float_of(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint16_t clt_f32_to_bf16(float f)
{
    uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float clt_bf16_to_f32(uint16_t b)
{
    return float_of((uint32_t)b << 16);
}
