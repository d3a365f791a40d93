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

PRECIS_BITS_FN uint64_t precis_bits_of_f64(double x) {
#if defined(__CUDA_ARCH__)
  return (uint64_t)__double_as_longlong(x);
#else
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

PRECIS_BITS_FN double precis_f64_of_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double x;
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
  /* Both paths computed, then selected (as for e4m3), so that the loops vectorize. */
  uint32_t r = a - 0x38000000u; /* |x| >= 2^-14: normal; rebias 127 -> 15 */
  r += 0xfffffu + ((r >> 21) & 1u);
  uint32_t normal = r >> 21;
  uint32_t subnormal = precis_subnormal_units(a, 16);
  uint32_t mag = a >= 0x38800000u ? normal : subnormal;
  uint32_t overflow = satfinite ? 0x7bu : 0x7cu;
  mag = a >= 0x47700000u ? overflow : mag; /* |x| >= 61440 (and inf) */
  mag = a > PRECIS_F32_INF_BITS ? (0x7eu | ((a >> 21) & 0x3u)) : mag;
  return (uint8_t)(sign | mag);
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

/* ---- OCP MX FP4 E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit; magnitudes {0, 0.5, 1, 1.5, 2, 3,
 * 4, 6}; no inf, no NaN. The code sits in the low 4 bits of the byte.
 * RNE with saturation: |x| >= 7 (7 is the tie between 6 and the missing 8, and ties to the even 8)
 * and ±inf give ±6. NaN gives +6 (code 0x7), as CUDA's __nv_cvt_float_to_fp4 and the PTX
 * cvt.rn.satfinite.e2m1x2 do: the format has no NaN, and the quantizers count it as clipped.
 * A value that rounds to zero keeps its sign (-0 is code 0x8). */
PRECIS_BITS_FN uint8_t precis_bits_f32_to_e2m1(float x) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t sign = (u >> 28) & 0x8u;
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  /* |x| >= 1: normal. Rebias 127 -> 1 and round the fraction to 1 bit (ties to even). */
  uint32_t r = a - 0x3f000000u;
  r += 0x1fffffu + ((r >> 22) & 1u);
  uint32_t normal = r >> 22;
  uint32_t subnormal = precis_subnormal_units(a, 1); /* |x| < 1: units of 0.5; 2 = the smallest normal */
  uint32_t mag = a >= 0x3f800000u ? normal : subnormal;
  mag = a >= 0x40e00000u ? 0x7u : mag; /* |x| >= 7 (inf included) saturates to 6 */
  uint32_t nan = a > PRECIS_F32_INF_BITS;
  sign = nan ? 0u : sign;
  mag = nan ? 0x7u : mag;
  return (uint8_t)(sign | mag);
}

PRECIS_BITS_FN float precis_bits_e2m1_to_f32(uint8_t v) {
  uint32_t sign = ((uint32_t)v & 0x8u) << 28;
  uint32_t e = ((uint32_t)v >> 1) & 0x3u;
  uint32_t m = (uint32_t)v & 0x1u;
  /* Normal codes: 2^(e-1) * (1 + m/2), i.e. fp32 exponent e + 126; subnormal: m * 0.5. */
  uint32_t normal = ((e + 126u) << 23) | (m << 22);
  uint32_t subnormal = m ? 0x3f000000u : 0u;
  return precis_f32_of_bits(sign | (e ? normal : subnormal));
}

/* ---- OCP MX FP6 (OCP Microscaling Formats v1.0 §5.3.2): E2M3 (2 exponent bits, bias 1, 3 mantissa
 * bits; max 7.5, min normal 1, min subnormal 0.125) and E3M2 (3 exponent bits, bias 3, 2 mantissa
 * bits; max 28, min normal 0.25, min subnormal 0.0625); no inf, no NaN. The code sits in the low 6
 * bits (sign at bit 5). RNE with saturation, as e2m1: |x| >= max + half its ulp (7.75, 30; the tie
 * rounds to the even, missing next value) and ±inf give ±max; NaN gives +max (as CUDA's
 * __nv_cvt_float_to_fp6 does with satfinite; the quantizers count it as clipped); a value that
 * rounds to zero keeps its sign. One function for both: mbits mantissa bits, bias, the subnormal
 * unit 2^(1 - bias - mbits), the saturation threshold's fp32 bits. ---- */
PRECIS_BITS_FN uint8_t precis_bits_f32_to_fp6(float x, uint32_t mbits, uint32_t bias, uint32_t sat_bits) {
  uint32_t u = precis_bits_of_f32(x);
  uint32_t sign = (u >> 26) & 0x20u;
  uint32_t a = u & PRECIS_F32_ABS_MASK;
  uint32_t shift = 23u - mbits;
  /* |x| >= 2^(1 - bias): normal. Rebias 127 -> bias and round the fraction to mbits (ties to even). */
  uint32_t r = a - ((127u - bias) << 23);
  r += ((1u << (shift - 1u)) - 1u) + ((r >> shift) & 1u);
  uint32_t normal = r >> shift;
  uint32_t subnormal = precis_subnormal_units(a, (int)(bias - 1u + mbits));
  uint32_t mag = a >= ((128u - bias) << 23) ? normal : subnormal;
  uint32_t max_mag = 0x1fu;
  mag = a >= sat_bits ? max_mag : mag; /* inf included */
  uint32_t nan = a > PRECIS_F32_INF_BITS;
  sign = nan ? 0u : sign;
  mag = nan ? max_mag : mag;
  return (uint8_t)(sign | mag);
}

PRECIS_BITS_FN float precis_bits_fp6_to_f32(uint8_t v, uint32_t mbits, uint32_t bias) {
  uint32_t sign = ((uint32_t)v & 0x20u) << 26;
  uint32_t e = ((uint32_t)v & 0x1fu) >> mbits;
  uint32_t m = (uint32_t)v & ((1u << mbits) - 1u);
  uint32_t normal = ((e + 127u - bias) << 23) | (m << (23u - mbits));
  /* subnormal: m * 2^(1 - bias - mbits), exact in fp32 */
  float sub = (float)m * precis_f32_of_bits((127u + 1u - bias - mbits) << 23);
  return precis_f32_of_bits(sign | (e ? normal : precis_bits_of_f32(sub)));
}

#define PRECIS_E2M3_SAT_BITS 0x40f80000u /* 7.75 */
#define PRECIS_E3M2_SAT_BITS 0x41f00000u /* 30 */
PRECIS_BITS_FN uint8_t precis_bits_f32_to_e2m3(float x) { return precis_bits_f32_to_fp6(x, 3u, 1u, PRECIS_E2M3_SAT_BITS); }
PRECIS_BITS_FN float precis_bits_e2m3_to_f32(uint8_t v) { return precis_bits_fp6_to_f32(v, 3u, 1u); }
PRECIS_BITS_FN uint8_t precis_bits_f32_to_e3m2(float x) { return precis_bits_f32_to_fp6(x, 2u, 3u, PRECIS_E3M2_SAT_BITS); }
PRECIS_BITS_FN float precis_bits_e3m2_to_f32(uint8_t v) { return precis_bits_fp6_to_f32(v, 2u, 3u); }

/* ---- OCP MX E8M0 scale: unsigned, 8 exponent bits, bias 127, value 2^(code-127); 0xff is NaN; no
 * zero, no sign. The scale rules produce the exponent directly, so encoding is from an integer
 * exponent (clamped to the code range [-127, 127]). ---- */
PRECIS_BITS_FN float precis_bits_e8m0_to_f32(uint8_t v) {
  /* 2^-127 is the fp32 subnormal 0x00400000; every other code is a normal power of two. */
  uint32_t bits = v == 0u ? 0x00400000u : ((uint32_t)v << 23);
  return precis_f32_of_bits(v == 0xffu ? (PRECIS_F32_INF_BITS | PRECIS_F32_QUIET_BIT) : bits);
}

PRECIS_BITS_FN uint8_t precis_bits_e8m0_of_exponent(int e) {
  e = e < -127 ? -127 : e;
  e = e > 127 ? 127 : e;
  return (uint8_t)(e + 127);
}

/* floor(log2(a)) for a finite a > 0, exact on the bit pattern (subnormals included). */
PRECIS_BITS_FN int precis_bits_floor_log2(float a) {
  uint32_t u = precis_bits_of_f32(a) & PRECIS_F32_ABS_MASK;
  int e = (int)(u >> 23);
  if (e) return e - 127;
  int top = 31;
  while (top > 0 && !((u >> top) & 1u)) top--;
  return top - 149;
}

/* ceil(log2(a)) for a finite a > 0: floor, plus one unless a is a power of two. */
PRECIS_BITS_FN int precis_bits_ceil_log2(float a) {
  uint32_t u = precis_bits_of_f32(a) & PRECIS_F32_ABS_MASK;
  int f = precis_bits_floor_log2(a);
  uint32_t rest = (u >> 23) ? (u & 0x7fffffu) : (u & ~(1u << (f + 149)));
  return f + (rest != 0u);
}

/* OCP MX v1.0 (section 6.3) shared scale: 2^(floor(log2(amax)) - emax_elem), as an E8M0 code.
 * amax = 0 (or not finite: the callers pass a finite-only amax) gives code 127 = 2^0. */
PRECIS_BITS_FN uint8_t precis_bits_mx_scale_floor(float amax, int emax_elem) {
  int finite_positive = amax > 0.0f && precis_bits_of_f32(amax) < PRECIS_F32_INF_BITS;
  return finite_positive ? precis_bits_e8m0_of_exponent(precis_bits_floor_log2(amax) - emax_elem) : (uint8_t)127u;
}

/* NVIDIA's "RCEIL" rule: amax / max_elem (the IEEE quotient) rounded up to a power of two, as an
 * E8M0 code; so every element fits without saturating. amax = 0 gives code 127 = 2^0. */
PRECIS_BITS_FN uint8_t precis_bits_mx_scale_rceil(float amax, float max_elem) {
  int finite_positive = amax > 0.0f && precis_bits_of_f32(amax) < PRECIS_F32_INF_BITS;
  if (!finite_positive) return (uint8_t)127u;
  float q = precis_div_rn(amax, max_elem);
  return q > 0.0f ? precis_bits_e8m0_of_exponent(precis_bits_ceil_log2(q)) : (uint8_t)0u;
}

/* ---- 4-bit integers, two per byte: element 2i in the low nibble, 2i+1 in the high nibble (the
 * order of CUDA's __nv_fp4x2 types and of cuBLASLt's packed 4-bit operands, docs/formats.md). s4
 * codes are two's complement -8..7, u4 codes 0..15; e2m1 codes pack the same way. ---- */
PRECIS_BITS_FN uint8_t precis_bits_pack_nibbles(uint8_t even, uint8_t odd) {
  return (uint8_t)((even & 0xfu) | ((odd & 0xfu) << 4));
}

PRECIS_BITS_FN int8_t precis_bits_s4_of_nibble(uint8_t nibble) {
  return (int8_t)((int)(nibble & 0xfu) - ((nibble & 0x8u) ? 16 : 0));
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
   * (the input NaN, or a negative default NaN) and the GPU (0x7fffffff). The selects are on 32-bit
   * integers (a NaN test on the bits, not v != v) so that GCC vectorizes the loops. */
  uint32_t v_abs = precis_bits_of_f32(v) & PRECIS_F32_ABS_MASK;
  uint32_t x_sign = (precis_bits_of_f32(x) >> 24) & 0x80u;
  uint32_t code = v_abs > PRECIS_F32_INF_BITS ? (x_sign | 0x7fu) : (uint32_t)precis_bits_f32_to_e4m3(v);
  int zero_scale = s == 0.0f;
  int saturated = v_abs > 0x43e80000u; /* NaN included */
  *clipped = (zero_scale & !precis_bits_is_finite(x)) | ((zero_scale ^ 1) & saturated); /* no branch: vectorizes */
  return (uint8_t)(zero_scale ? 0u : code);
}

/* The per-element rules of the generic quantizer (quantize.c): the input is divided by the group's
 * divisor d (its scale; for nv the product block scale * tensor scale), and d == 0 marks a group
 * whose amax is 0: every code is then 0 and only a non-finite x counts as clipped, as in the int8
 * and fp8 rules above. A NaN x gives the format's NaN with x's sign, set explicitly (see
 * precis_bits_fp8_quantize). */

/* e5m2 with satfinite: clipped when |x/d| >= 61440 (it would round to inf; ±inf included) or NaN. */
PRECIS_BITS_FN uint8_t precis_bits_e5m2_quantize(float x, float d, int *clipped) {
  float v = precis_div_rn(x, d);
  uint32_t x_sign = (precis_bits_of_f32(x) >> 24) & 0x80u;
  uint8_t code = v != v ? (uint8_t)(x_sign | 0x7eu) : precis_bits_f32_to_e5m2(v, 1);
  int zero_scale = d == 0.0f;
  int saturated = (precis_bits_of_f32(v) & PRECIS_F32_ABS_MASK) >= 0x47700000u;
  *clipped = (zero_scale & !precis_bits_is_finite(x)) | ((zero_scale ^ 1) & saturated); /* no branch: vectorizes */
  return zero_scale ? (uint8_t)0 : code;
}

/* FP6 (no NaN code): clipped when |x/d| reaches the saturation threshold (±inf included) or is NaN. */
PRECIS_BITS_FN uint8_t precis_bits_fp6_quantize(float x, float d, int *clipped, int e3m2) {
  float v = precis_div_rn(x, d);
  uint8_t code = e3m2 ? precis_bits_f32_to_e3m2(v) : precis_bits_f32_to_e2m3(v);
  int zero_scale = d == 0.0f;
  int saturated = (precis_bits_of_f32(v) & PRECIS_F32_ABS_MASK) >= (e3m2 ? PRECIS_E3M2_SAT_BITS : PRECIS_E2M3_SAT_BITS);
  *clipped = (zero_scale & !precis_bits_is_finite(x)) | ((zero_scale ^ 1) & saturated);
  return zero_scale ? (uint8_t)0 : code;
}

/* e2m1 (no NaN code): clipped when |x/d| >= 7 (saturated to ±6; ±inf included) or NaN (-> +6). */
PRECIS_BITS_FN uint8_t precis_bits_e2m1_quantize(float x, float d, int *clipped) {
  float v = precis_div_rn(x, d);
  uint8_t code = precis_bits_f32_to_e2m1(v);
  int zero_scale = d == 0.0f;
  int saturated = (precis_bits_of_f32(v) & PRECIS_F32_ABS_MASK) >= 0x40e00000u;
  *clipped = (zero_scale & !precis_bits_is_finite(x)) | ((zero_scale ^ 1) & saturated); /* no branch: vectorizes */
  return zero_scale ? (uint8_t)0 : code;
}

/* Integers: q = clamp(rne(x/d) + zero, qmin, qmax), NaN -> the zero point (dequantizes to 0).
 * Clipped when the clamp changed the value or x/d is NaN. With zero = 0, qmin = -127, qmax = 127
 * this is precis_bits_int8_quantize for d != 0. */
PRECIS_BITS_FN int32_t precis_bits_int_quantize(float x, float d, float zero, float qmin, float qmax, int *clipped) {
  float v = precis_div_rn(x, d);
  float r = nearbyintf(v) + zero; /* exact: both are integers far below 2^24 unless r saturates */
  int is_nan = v != v;
  int over = r > qmax, under = r < qmin;
  float t = over ? qmax : r;
  t = under ? qmin : t;
  t = is_nan ? zero : t;
  int zero_scale = d == 0.0f;
  *clipped = (zero_scale & !precis_bits_is_finite(x)) | ((zero_scale ^ 1) & (over | under | is_nan));
  return zero_scale ? 0 : (int32_t)t;
}

/* ---- one group's scale (quantize.c and the device quantizer): docs/formats.md, "The generic
 * quantizer". amax is the group's largest finite |x|; lo/hi its min/max with non-finite values read
 * as 0 (asymmetric only). The result is the scale stored, its E8M0/E4M3 code (mx, nv), the zero
 * point, and the divisor of the elements: 0 for a group that quantizes to all zeros. ---- */
enum {
  PRECIS_SCALE_RULE_DIVIDE,   /* s = amax / max_elem (fp8, e2m1, symmetric integers) */
  PRECIS_SCALE_RULE_ASYM,     /* s = (hi - lo) / max_elem, zero = clamp(rne(-lo / s), 0, max_elem) */
  PRECIS_SCALE_RULE_MX_FLOOR, /* E8M0 2^(floor(log2 amax) - emax_elem) */
  PRECIS_SCALE_RULE_MX_RCEIL, /* E8M0 amax / max_elem rounded up to a power of two */
  PRECIS_SCALE_RULE_NV,       /* E4M3 amax / (6 * tensor_scale), 0 -> 1.0; divisor block * tensor_scale */
};

typedef struct precis_bits_scale {
  float scale, divisor, zero;
  uint32_t code;
} precis_bits_scale;

PRECIS_BITS_FN precis_bits_scale precis_bits_group_scale(int rule, float amax, float lo, float hi, float max_elem,
                                                         int emax_elem, float tensor_scale) {
  precis_bits_scale g;
  g.scale = 1.0f, g.divisor = 0.0f, g.zero = 0.0f, g.code = 0u;
  if (rule == PRECIS_SCALE_RULE_MX_FLOOR || rule == PRECIS_SCALE_RULE_MX_RCEIL) {
    g.code = rule == PRECIS_SCALE_RULE_MX_FLOOR ? precis_bits_mx_scale_floor(amax, emax_elem)
                                                : precis_bits_mx_scale_rceil(amax, max_elem);
    g.scale = precis_bits_e8m0_to_f32((uint8_t)g.code);
    g.divisor = amax > 0.0f ? g.scale : 0.0f;
  } else if (rule == PRECIS_SCALE_RULE_NV) {
    float q = precis_div_rn(amax, precis_mul_rn(6.0f, tensor_scale));
    g.code = precis_bits_f32_to_e4m3(q);
    g.code = g.code == 0u ? 0x38u : g.code; /* a block scale that rounds to 0 becomes 1.0 */
    g.scale = precis_bits_e4m3_to_f32((uint8_t)g.code);
    g.divisor = amax > 0.0f ? precis_mul_rn(g.scale, tensor_scale) : 0.0f;
  } else if (rule == PRECIS_SCALE_RULE_ASYM) {
    float s = precis_div_rn(hi - lo, max_elem);
    /* A range wider than FLT_MAX (values near ±3.4e38 of both signs): split the division. */
    if (!precis_bits_is_finite(s)) s = precis_div_rn(hi, max_elem) - precis_div_rn(lo, max_elem);
    if (s > 0.0f && precis_bits_is_finite(s)) {
      float z = nearbyintf(precis_div_rn(-lo, s));
      g.zero = z < 0.0f ? 0.0f : (z > max_elem ? max_elem : z);
      g.scale = g.divisor = s;
    }
  } else {
    float s = precis_div_rn(amax, max_elem);
    if (s > 0.0f) g.scale = g.divisor = s;
  }
  return g;
}

/* c = (sa * sb) * (float)acc, in this order, each step rounded to nearest even. */
PRECIS_BITS_FN float precis_bits_dequantize(int32_t acc, float sa, float sb) {
  return precis_mul_rn(precis_mul_rn(sa, sb), precis_i32_to_f32_rn(acc));
}

#endif
