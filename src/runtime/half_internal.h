/* Host conversions between fp32 and the 16-bit storage formats, rounding to nearest even,
 * with NaN, infinities and subnormals handled as IEEE 754 (and as the kernels do). Pure and
 * thread-safe. */
#ifndef CLTRAIN_HALF_INTERNAL_H
#define CLTRAIN_HALF_INTERNAL_H

#include <stdint.h>

uint16_t clt_f32_to_f16(float f);   /* IEEE binary16, round to nearest even */
float clt_f16_to_f32(uint16_t h);   /* exact */
/* bfloat16, round to nearest even; NaN stays a quiet NaN */
uint16_t clt_f32_to_bf16(float f);
float clt_bf16_to_f32(uint16_t b);  /* exact */

#endif
