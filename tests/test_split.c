/* The splitting rules of split.h with integer arithmetic: Ozaki slices are int8 digits that
 * rebuild each value exactly, float split terms rebuild fp32 values, and a double-double metric
 * resolves errors far below float64's unit roundoff. */
#include <stdint.h>

#include "harness.h"
#include "numerics/metrics.h"
#include "numerics/split.h"

static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 11;
}

/* A float32 value with a random sign, 24 random significand bits and an exponent in [-gap, 0]. */
static double random_f32(uint64_t *s, int gap) {
  double mant = (double)(lcg(s) & 0xffffff) / 0x1p24;
  int e = -(int)(lcg(s) % (uint64_t)(gap + 1));
  float v = (float)ldexp(lcg(s) & 1 ? -mant : mant, e);
  return v;
}

TEST(ozaki_slices_are_int8_digits_that_rebuild_each_value) {
  enum { ROWS = 7, K = 33, SLICES = 8 };
  static double a[ROWS * K], slices[SLICES * ROWS * K];
  int exps[ROWS];
  uint64_t seed = 19;
  /* 7*8 = 56 bits below the row's power of two cover 24 bits of a value 31 binades down. */
  for (size_t i = 0; i < ROWS * K; i++) a[i] = random_f32(&seed, 31);
  a[3 * K + 5] = 0.0;
  for (size_t p = 0; p < K; p++) a[6 * K + p] = 0.0; /* a zero row */
  precis_ozaki_split_rows(a, ROWS, K, SLICES, exps, slices);
  CHECK_EQ_INT(exps[6], 0);
  for (size_t i = 0; i < ROWS; i++)
    for (size_t p = 0; p < K; p++) {
      int64_t rebuilt = 0;
      bool in_range = true;
      for (int t = 0; t < SLICES; t++) {
        double d = slices[((size_t)t * ROWS + i) * K + p];
        /* Truncation toward zero: every digit has the value's sign (or is zero). */
        in_range = in_range && d == trunc(d) && fabs(d) <= 127 && d * a[i * K + p] >= 0;
        rebuilt = rebuilt * 128 + (int64_t)d;
      }
      CHECK_MSG(in_range, "row %zu k %zu: a slice outside the int8 digits or of the wrong sign", i, p);
      /* value * 2^(56 - e) is an integer here; the digits must be it exactly. */
      double scaled = ldexp(a[i * K + p], 7 * SLICES - exps[i]);
      CHECK_MSG(scaled == trunc(scaled) && (double)rebuilt == scaled && (int64_t)scaled == rebuilt,
                "row %zu k %zu: %.17g rebuilt as %lld", i, p, scaled, (long long)rebuilt);
    }
  /* The row exponent is the smallest with amax < 2^e. */
  CHECK_EQ_INT(precis_ozaki_exponent(1.0), 1);
  CHECK_EQ_INT(precis_ozaki_exponent(0.99), 0);
  CHECK_EQ_INT(precis_ozaki_exponent(0x1p-140), -139);
}

TEST(ozaki_columns_and_truncation) {
  /* B [2, 2]: column 0 holds 1/3 (no finite binary digits), column 1 the extremes of a digit. */
  double b[4] = {1.0 / 3.0, -127.0 / 128.0, 0.25, 0.5}, slices[3 * 4];
  int exps[2];
  precis_ozaki_split_cols(b, 2, 2, 3, exps, slices);
  CHECK_EQ_INT(exps[0], -1); /* amax 1/3 < 2^-1 */
  CHECK_EQ_INT(exps[1], 0);
  /* 1/3 * 2 = 0.101010...b: digits by truncation toward zero. */
  CHECK(slices[0] == 85 && slices[4] == 42 && slices[8] == 85);
  CHECK(slices[1] == -127 && slices[5] == 0);
  CHECK(slices[2] == 64 && slices[3] == 64);
}

TEST(float_split_terms_rebuild_fp32_values) {
  uint64_t seed = 7;
  precis_float_split s9, s3, tf;
  CHECK(precis_float_split_of(PRECIS_SPLIT_BF16X9, &s9) && s9.terms == 3 && s9.products == 9);
  CHECK(precis_float_split_of(PRECIS_SPLIT_BF16X3, &s3) && s3.terms == 2 && s3.products == 3);
  CHECK(precis_float_split_of(PRECIS_SPLIT_TF32X3, &tf) && tf.term_fmt == PRECIS_FMT_TF32);
  CHECK(!precis_float_split_of(PRECIS_SPLIT_INT8XN, &tf));
  enum { N = 4096 };
  static float x[N], t9[3 * N], t3[2 * N];
  for (size_t i = 0; i < N; i++) x[i] = (float)random_f32(&seed, 60);
  precis_split_float_terms(&s9, x, N, t9);
  precis_split_float_terms(&s3, x, N, t3);
  size_t inexact9 = 0, bad3 = 0;
  for (size_t i = 0; i < N; i++) {
    /* Three bf16 terms hold all 24 bits; two hold 16 and leave at most 2^-16 relative. */
    if ((double)t9[i] + (double)t9[N + i] + (double)t9[2 * N + i] != (double)x[i]) inexact9++;
    double rest = (double)x[i] - (double)t3[i] - (double)t3[N + i];
    if (fabs(rest) > 0x1p-16 * fabs((double)x[i])) bad3++;
  }
  CHECK_EQ_INT(inexact9, 0);
  CHECK_EQ_INT(bad3, 0);
}

TEST(double_double_references_resolve_tiny_errors) {
  /* r + r_lo = 1 + 2^-80: an output of exactly 1 is off by 2^-80, which float64 r alone cannot
   * see, and an output of 1 + 2^-52 is off by 2^-52 - 2^-80. */
  float c32[2] = {1.0f, 1.0f};
  double c64[2] = {1.0, 1.0 + 0x1p-52}, r[2] = {1.0, 1.0}, lo[2] = {0x1p-80, 0x1p-80}, ab[2] = {1.0, 1.0};
  precis_sample_metrics m;
  precis_metrics_sample_wide(c32, c64, r, lo, ab, 1, &m);
  CHECK_MSG(m.v[PRECIS_METRIC_MAX_ABS] == 0x1p-80, "%g", m.v[PRECIS_METRIC_MAX_ABS]);
  CHECK(m.present[PRECIS_METRIC_SQNR_DB] && fabs(m.v[PRECIS_METRIC_SQNR_DB] - 80 * 20 * log10(2.0)) < 1e-9);
  precis_metrics_sample_wide(c32 + 1, c64 + 1, r + 1, lo + 1, ab + 1, 1, &m);
  CHECK(m.v[PRECIS_METRIC_MAX_ABS] == 0x1p-52 - 0x1p-80);
  /* Without the low part, the exact-looking output has no error at all. */
  precis_metrics_sample_wide(c32, c64, r, NULL, ab, 1, &m);
  CHECK(m.v[PRECIS_METRIC_MAX_ABS] == 0 && !m.present[PRECIS_METRIC_SQNR_DB]);
}

RUN_TESTS(T(ozaki_slices_are_int8_digits_that_rebuild_each_value), T(ozaki_columns_and_truncation),
          T(float_split_terms_rebuild_fp32_values), T(double_double_references_resolve_tiny_errors))
