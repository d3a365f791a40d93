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
