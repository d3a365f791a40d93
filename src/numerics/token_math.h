/* e^x and log y on the ranges verify's per-token sums need (numerics/metrics.c), as branch-free
 * inline functions that GCC vectorizes in a loop (with -fno-trapping-math, src/CMakeLists.txt).
 * tests/test_metrics.c holds them within 2 ulps of libm over their ranges. */
#ifndef PRECIS_TOKEN_MATH_H
#define PRECIS_TOKEN_MATH_H

#include <stdint.h>

#include "format_bits.h"

/* glibc's exp and log, called per element, were two thirds of these sums' time (a verify computes
 * three per logit of both models). Cody-Waite reduction and a Taylor polynomial of degree 13 for
 * e^x, the atanh series of degree 21 for log. */

/* 1.5 * 2^52: x + TOKEN_ROUNDER - TOKEN_ROUNDER is x rounded to an integer, and the low bits of
 * x + TOKEN_ROUNDER are that integer (two's complement), for |x| < 2^51. */
#define TOKEN_ROUNDER 0x1.8p52

/* 2^n for an integer-valued n in [-1022, 1023]. */
static inline double token_pow2_int(double n) {
  return precis_f64_of_bits((precis_bits_of_f64(n + TOKEN_ROUNDER) - precis_bits_of_f64(TOKEN_ROUNDER) + 1023u) << 52);
}

/* e^x for x <= 0 (x below -1075 gives 0): x = n ln2 + r, |r| <= ln2 / 2, ln2 in two parts so that
 * n ln2_hi is exact; 2^n applied as two factors so that neither leaves the normal range. */
static inline double token_exp_nonpositive(double x) {
  x = x > -1075.0 ? x : -1075.0;
  const double n = (x * 0x1.71547652b82fep0 + TOKEN_ROUNDER) - TOKEN_ROUNDER;
  const double r = (x - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const double half = (n * 0.5 + TOKEN_ROUNDER) - TOKEN_ROUNDER;
  return p * token_pow2_int(half) * token_pow2_int(n - half);
}

/* log y for y in [1/2, 1] (exactly 0 at 1): y or 2y = z in [1/sqrt2, sqrt2), log z = 2 atanh(s),
 * s = (z - 1)/(z + 1), |s| <= 0.172, and ln 2 taken off for 2y. */
static inline double token_log_half_to_one(double y) {
  const double z = y < 0x1.6a09e667f3bcdp-1 ? 2.0 * y : y;
  const double s = (z - 1.0) / (z + 1.0), s2 = s * s;
  double q = 1.0 / 21.0;
  q = q * s2 + 1.0 / 19.0;
  q = q * s2 + 1.0 / 17.0;
  q = q * s2 + 1.0 / 15.0;
  q = q * s2 + 1.0 / 13.0;
  q = q * s2 + 1.0 / 11.0;
  q = q * s2 + 1.0 / 9.0;
  q = q * s2 + 1.0 / 7.0;
  q = q * s2 + 1.0 / 5.0;
  q = q * s2 + 1.0 / 3.0;
  const double log_z = 2.0 * s + 2.0 * s * (s2 * q);
  return y < 0x1.6a09e667f3bcdp-1 ? (log_z - 0x1.a39ef35793c76p-33) - 0x1.62e42fee00000p-1 : log_z;
}

#endif
