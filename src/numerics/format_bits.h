/* The bit-exact conversion and quantization rules, written once and compiled twice: as C for the
 * CPU twins in src/numerics/format.c and src/numerics/quant.c, and as CUDA for the kernels in kernels/convert.cu.
 * Sharing the text (rather than using cuda_fp16.h / cuda_fp8.h intrinsics on the device) is what
 * makes the GPU path bit-identical to the CPU path, NaN payloads included: CUDA's intrinsics
 * return one canonical NaN (0x7fff for fp16/bf16, 0x7f for e4m3) and drop the sign, while these
 * rules keep the sign and the top payload bits, as x86 F16C does. docs/formats.md states every rule.
 *
 * This header includes no CUDA header; under nvcc the functions become __host__ __device__. */
#ifndef PRECIS_FORMAT_BITS_H
#define PRECIS_FORMAT_BITS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define PRECIS_BITS_FN static __host__ __device__ __forceinline__
#else
#define PRECIS_BITS_FN static inline
#endif

PRECIS_BITS_FN uint32_t precis_bits_of_f32(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PRECIS_BITS_FN float precis_f32_of_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/* IEEE operations spelled so that nvcc can neither contract nor approximate them. */
PRECIS_BITS_FN float precis_div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

PRECIS_BITS_FN float precis_mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

PRECIS_BITS_FN float precis_i32_to_f32_rn(int32_t v) {
#if defined(__CUDA_ARCH__)
  return __int2float_rn(v);
#else
  return (float)v; /* RNE in the default rounding mode */
#endif
}

#define PRECIS_F32_ABS_MASK 0x7fffffffu
#define PRECIS_F32_INF_BITS 0x7f800000u
#define PRECIS_F32_QUIET_BIT 0x00400000u

/* Subnormal target: |x| = m * 2^(e-150) with m the 24-bit significand of a normal fp32 whose biased
 * exponent is e; the result counts units of 2^-unit_exp, rounded to nearest, ties to even. Inputs
 * below half a unit (fp32 subnormals included) give 0. Without branches, so that loops vectorize. */
PRECIS_BITS_FN uint32_t precis_subnormal_units(uint32_t a, int unit_exp) {
  uint32_t e = a >> 23;
  uint32_t shift = (uint32_t)(150 - unit_exp) - e; /* m * 2^(e-150) / 2^-unit_exp = m / 2^shift */
  shift = shift > 31u ? 31u : shift;               /* far below half a unit (or wrapped): gives 0 */
  shift = shift < 1u ? 1u : shift;                 /* normal range: the caller ignores the result */
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  /* Adding half an output unit less one, plus the output's lowest bit, then truncating, rounds
   * to nearest with ties to even. No overflow: m < 2^24, half <= 2^30. */
  uint32_t half = 1u << (shift - 1u);
  uint32_t lowest = (m >> shift) & 1u;
  return (m + (half - 1u) + lowest) >> shift;
}

/* ---- fp16 (IEEE binary16): 5 exponent bits, 10 fraction bits ---- */
PRECIS_BITS_FN uint16_t precis_bits_f32_to_f16(float x) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  if (a > PRECIS_F32_INF_BITS) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet, top payload */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* |x| >= 65520 (and inf) -> inf */
  if (a >= 0x38800000u) {                                   /* |x| >= 2^-14: normal */
    uint32_t r = a - 0x38000000u;                           /* rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
  }
  return (uint16_t)(sign | precis_subnormal_units(a, 24));
}

PRECIS_BITS_FN float precis_bits_f16_to_f32(uint16_t h) {
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
  uint32_t m = (uint32_t)h & 0x3ffu;
  if (e == 0x1fu) return precis_f32_of_bits(sign | PRECIS_F32_INF_BITS | (m << 13) | (m ? PRECIS_F32_QUIET_BIT : 0u));
  if (e == 0u) {
    float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
    return precis_f32_of_bits(sign | precis_bits_of_f32(v));
  }
  return precis_f32_of_bits(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- bf16: fp32 with 7 fraction bits ---- */
PRECIS_BITS_FN uint16_t precis_bits_f32_to_bf16(float x) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* overflow carries into inf */
  uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return (uint16_t)(((u & PRECIS_F32_ABS_MASK) > PRECIS_F32_INF_BITS) ? quiet_nan : rounded);
}

PRECIS_BITS_FN float precis_bits_bf16_to_f32(uint16_t h) { return precis_f32_of_bits((uint32_t)h << 16); }

/* ---- tf32: fp32 with 10 fraction bits, carried in an fp32 whose low 13 bits are zero ---- */
PRECIS_BITS_FN float precis_bits_round_tf32(float x) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  uint32_t rounded = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u; /* overflow carries into inf */
  uint32_t quiet_nan = (u | PRECIS_F32_QUIET_BIT) & 0xffffe000u;
  uint32_t r = (a > PRECIS_F32_INF_BITS) ? quiet_nan : (a == PRECIS_F32_INF_BITS ? u : rounded);
  return precis_f32_of_bits(r);
}

/* ---- OCP FP8 E4M3 (satfinite: no inf; max 448; NaN only S.1111.111) ----
 * Written without branches (both paths computed, then selected) so that the CPU array loop
 * vectorizes; the device compiles the same selects. */
PRECIS_BITS_FN uint8_t precis_bits_f32_to_e4m3(float x) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  /* |x| >= 2^-6: normal. Rebias 127 -> 7 and round the fraction to 3 bits. */
  uint32_t r = a - 0x3c000000u;
  r += 0x7ffffu + ((r >> 20) & 1u);
  uint32_t normal = r >> 20;
  uint32_t subnormal = precis_subnormal_units(a, 9); /* |x| < 2^-6; 8 = the smallest normal */
  uint32_t mag = a >= 0x3c800000u ? normal : subnormal;
  mag = a > 0x43e80000u ? 0x7eu : mag; /* |x| > 464 (inf included) saturates to 448 */
  mag = a > PRECIS_F32_INF_BITS ? 0x7fu : mag;
  return (uint8_t)(sign | mag);
}

PRECIS_BITS_FN float precis_bits_e4m3_to_f32(uint8_t v) {
  uint32_t sign = ((uint32_t)v & 0x80u) << 24;
  uint32_t e = ((uint32_t)v >> 3) & 0xfu;
  uint32_t m = (uint32_t)v & 0x7u;
  if (e == 0xfu && m == 0x7u) return precis_f32_of_bits(sign | PRECIS_F32_INF_BITS | PRECIS_F32_QUIET_BIT | (m << 20));
  if (e == 0u) {
    float w = (float)m * 0x1p-9f;
    return precis_f32_of_bits(sign | precis_bits_of_f32(w));
  }
  return precis_f32_of_bits(sign | ((e + 120u) << 23) | (m << 20));
}

/* ---- OCP FP8 E5M2 (IEEE-like: inf and NaN; max 57344) ---- */
PRECIS_BITS_FN uint8_t precis_bits_f32_to_e5m2(float x, int satfinite) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  if (a > PRECIS_F32_INF_BITS) return (uint8_t)(sign | 0x7eu | ((a >> 21) & 0x3u));
  if (a >= 0x47700000u) return (uint8_t)(sign | (satfinite ? 0x7bu : 0x7cu)); /* |x| >= 61440 (and inf) */
  if (a >= 0x38800000u) {                                                    /* |x| >= 2^-14: normal */
    uint32_t r = a - 0x38000000u;                                            /* rebias 127 -> 15 */
    r += 0xfffffu + ((r >> 21) & 1u);
    return (uint8_t)(sign | (r >> 21));
  }
  return (uint8_t)(sign | precis_subnormal_units(a, 16));
}

PRECIS_BITS_FN float precis_bits_e5m2_to_f32(uint8_t v) {
  uint32_t sign = ((uint32_t)v & 0x80u) << 24;
  uint32_t e = ((uint32_t)v >> 2) & 0x1fu;
  uint32_t m = (uint32_t)v & 0x3u;
  if (e == 0x1fu) return precis_f32_of_bits(sign | PRECIS_F32_INF_BITS | (m << 21) | (m ? PRECIS_F32_QUIET_BIT : 0u));
  if (e == 0u) {
    float w = (float)m * 0x1p-16f;
    return precis_f32_of_bits(sign | precis_bits_of_f32(w));
  }
  return precis_f32_of_bits(sign | ((e + 112u) << 23) | (m << 21));
}

/* ---- quantization ---- */
PRECIS_BITS_FN int precis_bits_is_finite(float x) {
  return (precis_bits_of_f32(x) & PRECIS_F32_INF_BITS) != PRECIS_F32_INF_BITS;
}

/* |x| for finite x, 0 for inf/NaN: the term of an absmax that ignores non-finite values. As a bit
 * pattern (non-negative floats order like their bits) computed with a mask, a form that GCC
 * vectorizes in a max reduction. */
PRECIS_BITS_FN uint32_t precis_bits_finite_abs_bits(float x) {
  uint32_t a = precis_bits_of_f32(x) & PRECIS_F32_ABS_MASK;
  return a & (0u - (uint32_t)(a < PRECIS_F32_INF_BITS));
}

PRECIS_BITS_FN float precis_bits_finite_abs(float x) { return precis_f32_of_bits(precis_bits_finite_abs_bits(x)); }

/* q = clamp(rne(x/s), -127, 127). s == 0 -> 0. x/s NaN -> 0. *clipped = 1 when clamping changed
 * the value (|rne(x/s)| > 127, which includes x/s = ±inf) or x/s is NaN, or (s == 0) x is
 * non-finite. Written as selects without branches so that the CPU loops vectorize. */
PRECIS_BITS_FN int8_t precis_bits_int8_quantize(float x, float s, int *clipped) {
  float v = precis_div_rn(x, s);
  float r = nearbyintf(v); /* default rounding mode: ties to even; rint on the device */
  int is_nan = v != v;
  int over = r > 127.0f, under = r < -127.0f;
  float t = over ? 127.0f : r;
  t = under ? -127.0f : t;
  t = is_nan ? 0.0f : t;
  int zero_scale = s == 0.0f;
  *clipped = zero_scale ? !precis_bits_is_finite(x) : (over | under | is_nan);
  return zero_scale ? (int8_t)0 : (int8_t)(int)t;
}

/* e4m3_satfinite(x/s); a NaN x/s gives the NaN code with x's sign. s == 0 -> +0 code. *clipped = 1 when |x/s| > 464 (the rounding would leave
 * the finite range, so the value saturated to ±448; ±inf included), x/s is NaN (kept as NaN), or
 * (s == 0) x is non-finite. */
PRECIS_BITS_FN uint8_t precis_bits_fp8_quantize(float x, float s, int *clipped) {
  float v = precis_div_rn(x, s);
  /* A NaN quotient takes x's sign explicitly: the NaN that a division returns differs between x86
   * (the input NaN, or a negative default NaN) and the GPU (0x7fffffff). */
  uint32_t x_sign = (precis_bits_of_f32(x) >> 24) & 0x80u;
  uint8_t code = v != v ? (uint8_t)(x_sign | 0x7fu) : precis_bits_f32_to_e4m3(v);
  int zero_scale = s == 0.0f;
  int saturated = (precis_bits_of_f32(v) & PRECIS_F32_ABS_MASK) > 0x43e80000u; /* NaN included */
  *clipped = zero_scale ? !precis_bits_is_finite(x) : saturated;
  return zero_scale ? (uint8_t)0 : code;
}

/* c = (sa * sb) * (float)acc, in this order, each step rounded to nearest even. */
PRECIS_BITS_FN float precis_bits_dequantize(int32_t acc, float sa, float sb) {
  return precis_mul_rn(precis_mul_rn(sa, sb), precis_i32_to_f32_rn(acc));
}

#endif
