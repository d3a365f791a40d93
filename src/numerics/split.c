#include "split.h"

#include <math.h>
#include <string.h>

bool precis_float_split_of(precis_split split, precis_float_split *out) {
  switch (split) {
  case PRECIS_SPLIT_TF32X3: *out = (precis_float_split){PRECIS_FMT_TF32, 2, 1, 3}; return true;
  case PRECIS_SPLIT_BF16X3: *out = (precis_float_split){PRECIS_FMT_BF16, 2, 1, 3}; return true;
  case PRECIS_SPLIT_BF16X6: *out = (precis_float_split){PRECIS_FMT_BF16, 3, 2, 6}; return true;
  case PRECIS_SPLIT_BF16X9: *out = (precis_float_split){PRECIS_FMT_BF16, 3, 4, 9}; return true;
  default: return false;
  }
}

static float round_term(precis_format_id fmt, float x) {
  return fmt == PRECIS_FMT_TF32 ? precis_round_tf32(x) : precis_round_bf16(x);
}

void precis_split_float_terms(const precis_float_split *split, const float *x, size_t count, float *terms) {
  for (size_t i = 0; i < count; i++) {
    float rest = x[i];
    for (int t = 0; t < split->terms; t++) {
      float term = round_term(split->term_fmt, rest);
      terms[(size_t)t * count + i] = term;
      /* Exact: term is rest rounded to fewer bits, so their difference fits in fp32. */
      rest -= term;
    }
  }
}

void precis_split_float_gemm(const precis_float_split *split, const float *a_terms, size_t a_count,
                             const float *b_terms, size_t b_count, size_t rows, size_t n, size_t k, float *c) {
  int pair_a[9], pair_b[9], pairs = 0;
  for (int level = split->max_level; level >= 0; level--)
    for (int i = 0; i < split->terms; i++) {
      int j = level - i;
      if (j < 0 || j >= split->terms) continue;
      pair_a[pairs] = i;
      pair_b[pairs] = j;
      pairs++;
    }
  for (size_t r = 0; r < rows; r++) {
    float *acc = c + r * n;
    for (size_t j = 0; j < n; j++) acc[j] = 0.0f;
    for (size_t p = 0; p < k; p++)
      for (int q = 0; q < pairs; q++) {
        float aip = a_terms[(size_t)pair_a[q] * a_count + r * k + p];
        const float *brow = b_terms + (size_t)pair_b[q] * b_count + p * n;
        /* The product of two terms is exact in fp32 (at most 2 x 11 bits), so this is one RNE
         * addition per product whether or not the compiler fuses it. */
        for (size_t j = 0; j < n; j++) acc[j] += aip * brow[j];
      }
  }
}

int precis_ozaki_exponent(double amax) {
  if (!(amax > 0)) return 0;
  int e;
  frexp(amax, &e); /* amax = f 2^e with f in [0.5, 1): amax < 2^e */
  return e;
}

/* One value's digits: x in (-1, 1), digits[t] = trunc of the t-th base-2^7 digit, all exact. */
static void ozaki_digits(double x, int n_slices, double *digits, size_t stride) {
  for (int t = 0; t < n_slices; t++) {
    x = ldexp(x, PRECIS_OZAKI_SLICE_BITS);
    double d = trunc(x);
    digits[(size_t)t * stride] = d;
    x -= d;
  }
}

void precis_ozaki_split_rows(const double *a, size_t rows, size_t k, int n_slices, int *exps, double *slices) {
  for (size_t i = 0; i < rows; i++) {
    double amax = 0;
    for (size_t p = 0; p < k; p++) amax = fmax(amax, fabs(a[i * k + p]));
    exps[i] = precis_ozaki_exponent(amax);
    for (size_t p = 0; p < k; p++) ozaki_digits(ldexp(a[i * k + p], -exps[i]), n_slices, slices + i * k + p, rows * k);
  }
}

void precis_ozaki_split_cols(const double *b, size_t k, size_t n, int n_slices, int *exps, double *slices) {
  for (size_t j = 0; j < n; j++) {
    double amax = 0;
    for (size_t p = 0; p < k; p++) amax = fmax(amax, fabs(b[p * n + j]));
    exps[j] = precis_ozaki_exponent(amax);
  }
  for (size_t p = 0; p < k; p++)
    for (size_t j = 0; j < n; j++) ozaki_digits(ldexp(b[p * n + j], -exps[j]), n_slices, slices + p * n + j, k * n);
}

void precis_ozaki_combine(const double *levels, int n_slices, size_t rows, size_t n, const int *a_exps,
                          const int *b_exps, double *c) {
  size_t mn = rows * n;
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < n; j++) {
      double sum = 0;
      for (int g = n_slices + 1; g >= 2; g--)
        sum += ldexp(levels[(size_t)(g - 2) * mn + i * n + j], -PRECIS_OZAKI_SLICE_BITS * g);
      c[i * n + j] = ldexp(sum, a_exps[i] + b_exps[j]);
    }
}

/* ---------------------------------------------------------------- Ozaki scheme II (CRT) */

/* GEMMul8's moduli (its table.hpp): 256, then odd numbers below 256, pairwise coprime (255 = 3·5·17,
 * 253 = 11·23, 247 = 13·19, 217 = 7·31, the rest primes). */
static const int crt_moduli[PRECIS_CRT_MAX_MODULI] = {256, 255, 253, 251, 247, 241, 239, 233, 229, 227,
                                                      223, 217, 211, 199, 197, 193, 191, 181, 179, 173};

/* GEMMul8's rounding margin on log2 of a norm: round_up(0.5 / (1 - 4 * 2^-24)). */
static const double crt_half_up = 0x1.0000060000000p-1;

int precis_crt_modulus(int l) { return crt_moduli[l]; }

double precis_crt_log2p(int n_moduli, bool fast) {
  double log2m = 0, inv_m = 1;
  for (int l = 0; l < n_moduli; l++) {
    log2m += log2((double)crt_moduli[l]);
    inv_m /= crt_moduli[l];
  }
  log2m += log1p(-inv_m) / log(2.0); /* log2(M - 1) */
  /* A nudge down so that rounding in the sum never raises the bound. */
  return log2m / 2 - (fast ? 1.5 : 0.5) - 1e-9;
}

/* ilogb with ilogb(0) = 0 (GEMMul8's Tilogb). */
static int crt_ilogb(double x) { return x == 0 ? 0 : ilogb(x); }

int precis_crt_fast_shift(const double *x, size_t count, size_t stride, int n_moduli) {
  double amax = 0;
  for (size_t p = 0; p < count; p++) {
    if (!isfinite(x[p * stride])) return PRECIS_CRT_NONFINITE;
    amax = fmax(amax, fabs(x[p * stride]));
  }
  int e = crt_ilogb(amax);
  double L = precis_crt_log2p(n_moduli, true);
  double cap = floor(L - 1) - e; /* every |x'| < 2^L */
  if (amax == 0) return (int)cap;
  /* The sum of squares of x 2^-e (no overflow or underflow), log2 of the true one by adding 2e. */
  double ss = 0;
  for (size_t p = 0; p < count; p++) {
    double v = ldexp(x[p * stride], -e);
    ss += v * v;
  }
  /* Cauchy-Schwarz: ||x 2^s||_2 <= 2^L, so sum |a'||b'| <= 2^2L = (M - 1)/8. GEMMul8 (commit 46b5771,
   * which made the published numbers) subtracts e from this term as well, one bit more margin per
   * operand when amax >= 2; we follow it there so that the error levels match, and keep the plain
   * bound for amax < 1, where subtracting a negative e would break it. */
  double norm_term = floor(L - crt_half_up * (log2(ss) + 2.0 * e)) - (e > 0 ? e : 0);
  return (int)fmin(cap, norm_term);
}

int precis_crt_bound_ints(const double *x, size_t count, size_t stride, double *hat) {
  double amax = 0;
  for (size_t p = 0; p < count; p++) {
    if (!isfinite(x[p * stride])) {
      for (size_t q = 0; q < count; q++) hat[q * stride] = 0;
      return PRECIS_CRT_NONFINITE;
    }
    amax = fmax(amax, fabs(x[p * stride]));
  }
  int e = 5 - crt_ilogb(amax); /* |x| 2^e < 64 */
  for (size_t p = 0; p < count; p++) hat[p * stride] = ceil(ldexp(fabs(x[p * stride]), e));
  return e;
}

int precis_crt_accurate_shift(int e, double cmax, int n_moduli) {
  if (e == PRECIS_CRT_NONFINITE || !(cmax > 0)) return e; /* a zero row or column: any shift gives zeros */
  return e + (int)floor(precis_crt_log2p(n_moduli, false) - crt_half_up * log2(cmax));
}

double precis_crt_scale(double x, int shift) { return shift == PRECIS_CRT_NONFINITE ? 0 : trunc(ldexp(x, shift)); }

int precis_crt_residue(double x, int m) {
  int r = (int)fmod(x, (double)m); /* exact, |r| < m, the sign of x */
  int hi = m == 256 ? 127 : (m - 1) / 2, lo = m == 256 ? -128 : -(m - 1) / 2;
  if (r > hi) r -= m;
  if (r < lo) r += m;
  return r;
}

/* Symmetric digit of v in [0, m). */
static int crt_sym(int v, int m) { return v > (m == 256 ? 127 : (m - 1) / 2) ? v - m : v; }

/* (m_0 ... m_{l-1})^-1 mod m_l for l >= 1 (Python's pow(w, -1, m); tests/test_split.c checks them). */
static const int crt_inverse[PRECIS_CRT_MAX_MODULI] = {0,   1,   211, 182, 246, 184, 41,  115, 161, 54,
                                                       163, 149, 46,  142, 91,  116, 149, 164, 37,  94};

int precis_crt_inverse(int l) { return crt_inverse[l]; }

double precis_crt_reconstruct(const uint8_t *r, size_t stride, int n_moduli, int shift) {
  if (shift == PRECIS_CRT_NONFINITE) return NAN;
  /* Garner: X = v_0 + m_0 (v_1 + m_1 (v_2 + ...)) with balanced digits v_l, so that X is the
   * residue in [-M/2, M/2) directly (256 first: v_0 in [-128, 127]). */
  int v[PRECIS_CRT_MAX_MODULI];
  v[0] = crt_sym(r[0], 256);
  for (int l = 1; l < n_moduli; l++) {
    int m = crt_moduli[l], t = 0;
    for (int j = l - 1; j >= 0; j--) t = ((t * crt_moduli[j] + v[j]) % m + m) % m;
    int d = (((int)r[(size_t)l * stride] - t) % m + m) % m * crt_inverse[l] % m;
    v[l] = crt_sym(d, m);
  }
  /* X in 192-bit two's complement (|X| <= M/2 < 2^155), Horner from the top digit. */
  uint64_t x[3];
  int64_t top = v[n_moduli - 1];
  x[0] = (uint64_t)top;
  x[1] = x[2] = top < 0 ? UINT64_MAX : 0;
  for (int l = n_moduli - 2; l >= 0; l--) {
    unsigned __int128 carry = 0;
    for (int w = 0; w < 3; w++) {
      carry += (unsigned __int128)x[w] * (uint64_t)crt_moduli[l];
      x[w] = (uint64_t)carry;
      carry >>= 64;
    }
    uint64_t add[3] = {(uint64_t)(int64_t)v[l], v[l] < 0 ? UINT64_MAX : 0, v[l] < 0 ? UINT64_MAX : 0};
    unsigned __int128 sum = 0;
    for (int w = 0; w < 3; w++) {
      sum += (unsigned __int128)x[w] + add[w];
      x[w] = (uint64_t)sum;
      sum >>= 64;
    }
  }
  bool negative = x[2] >> 63;
  if (negative) { /* magnitude: ~x + 1 */
    unsigned __int128 sum = 1;
    for (int w = 0; w < 3; w++) {
      sum += (uint64_t)~x[w];
      x[w] = (uint64_t)sum;
      sum >>= 64;
    }
  }
  int h = x[2] ? 2 : x[1] ? 1 : 0;
  double mag;
  if (h == 0) {
    mag = (double)x[0]; /* one rounding */
  } else {
    /* The top 64 bits with the rest as a sticky bit: one correct rounding to 53 bits. */
    int lz = __builtin_clzll(x[h]);
    uint64_t window = lz ? (x[h] << lz) | (x[h - 1] >> (64 - lz)) : x[h];
    uint64_t rest = lz ? x[h - 1] << lz : x[h - 1];
    for (int w = 0; w < h - 1; w++) rest |= x[w];
    mag = ldexp((double)(window | (rest != 0)), 64 * h - lz);
  }
  return ldexp(negative ? -mag : mag, -shift);
}
