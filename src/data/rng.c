#include "rng.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline void mulhilo32(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

void precis_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(M0, c0, &hi0, &lo0);
    mulhilo32(M1, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += W0;
    k1 += W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

precis_rng_key precis_rng_key_for(uint64_t seed, const char *name) {
  uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a over the name's bytes */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    h ^= *p;
    h *= 0x100000001B3ull;
  }
  uint64_t k = splitmix64(splitmix64(seed) ^ splitmix64(h));
  precis_rng_key key = {{(uint32_t)k, (uint32_t)(k >> 32)}};
  return key;
}

double precis_rng_log(double x) {
  /* x = f * 2^e with f in [sqrt(1/2), sqrt(2)); log f = 2 atanh(s), s = (f-1)/(f+1), |s| < 0.172. */
  int e;
  double f = frexp(x, &e); /* f in [0.5, 1) */
  if (f < 0.70710678118654752440) {
    f *= 2.0;
    e -= 1;
  }
  double s = (f - 1.0) / (f + 1.0);
  double s2 = s * s;
  /* atanh series to s^23: the first omitted term is below 2e-18 relative. */
  double poly = 1.0 / 23.0;
  static const double inv_odd[] = {1.0 / 21.0, 1.0 / 19.0, 1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0, 1.0 / 11.0,
                                   1.0 / 9.0,  1.0 / 7.0,  1.0 / 5.0,  1.0 / 3.0,  1.0};
  for (size_t i = 0; i < sizeof inv_odd / sizeof inv_odd[0]; i++) poly = poly * s2 + inv_odd[i];
  const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
  return ((double)e * LN2_LO + 2.0 * s * poly) + (double)e * LN2_HI;
}

double precis_rng_exp(double x) {
  if (x > 709.0) return HUGE_VAL;
  if (x < -745.0) return 0.0;
  /* x = j ln2 + r, |r| <= ln2/2; LN2_HI has 32 trailing zero bits so j*LN2_HI is exact. */
  const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
  double j = nearbyint(x * 1.44269504088896338700);
  double r = (x - j * LN2_HI) - j * LN2_LO;
  /* Taylor series to r^14/14!: the omitted term is below 3e-18 for |r| <= 0.347. */
  double poly = 1.0;
  for (int i = 14; i >= 1; i--) poly = 1.0 + poly * r / (double)i;
  return ldexp(poly, (int)j);
}

void precis_rng_normal_pair(precis_rng_key key, uint32_t stream, uint64_t index, double out[2]) {
  for (uint32_t attempt = 0;; attempt++) {
    uint32_t w[4];
    precis_rng_block(key, stream, index, attempt, w);
    double u = 2.0 * precis_u53(w[0], w[1]) - 1.0;
    double v = 2.0 * precis_u53(w[2], w[3]) - 1.0;
    double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue; /* accepted with probability pi/4 */
    double f = sqrt(-2.0 * precis_rng_log(s) / s);
    out[0] = u * f;
    out[1] = v * f;
    return;
  }
}
