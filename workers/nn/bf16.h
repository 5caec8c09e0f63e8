/* bf16.h — bfloat16 and TF32 roundings, the one copy (CPU math, gradient
 * buckets, tests; .cu files include it too).
 *
 * bf16 is the top half of an IEEE float: 8 exponent bits, 7 mantissa bits.
 * Conversion from float rounds to nearest, ties to even, as torch's
 * c10::BFloat16 (round_to_nearest_even) and CUDA's __float2bfloat16_rn do;
 * a NaN stays a (quiet) NaN, infinities and signed zeros stay what they
 * are. TF32 keeps 10 mantissa bits of a float (the tensor cores' input
 * format), rounded the same way. Header-only, pure.
 */
#ifndef DDPTOP_BF16_H
#define DDPTOP_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t bf16_bits_(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bf16_float_(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float -> bf16 bits, round to nearest even; NaN -> quiet NaN. */
static inline uint16_t bf16_from_f32(float f)
{
    uint32_t u = bf16_bits_(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* bf16 bits -> float (exact). */
static inline float bf16_to_f32(uint16_t h) { return bf16_float_((uint32_t)h << 16); }

/* The float nearest to f that bf16 holds. */
static inline float bf16_round(float f) { return bf16_to_f32(bf16_from_f32(f)); }

/* The float nearest to f that TF32 holds (10 mantissa bits, ties to even);
 * NaN and infinities pass through. */
static inline float tf32_round(float f)
{
    uint32_t u = bf16_bits_(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return f;
    u += 0xfffu + ((u >> 13) & 1u);
    return bf16_float_(u & 0xffffe000u);
}

#endif
