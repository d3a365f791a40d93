/* INT8 / FP8 quantization on hand-worked cases (ties to even, saturation, zero rows, inf/NaN),
 * dequantization order, and the calibration methods on distributions whose answer is known. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/format.h"
#include "harness.h"
#include "numerics/quant.h"
#include "base/status.h"

TEST(int8_rounding_is_ties_to_even) {
  const float s = 1.0f;
  static const struct { float x; int q; } cases[] = {
      {2.5f, 2},   {3.5f, 4},    {-2.5f, -2},  {-3.5f, -4},  {0.5f, 0},     {-0.5f, 0},   {1.5f, 2},
      {0.49f, 0},  {2.51f, 3},   {126.5f, 126}, {127.4f, 127}, {-127.4f, -127}, {0.0f, 0}, {-0.0f, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK_MSG(precis_int8_quantize_one(cases[i].x, s) == cases[i].q, "x = %g: got %d, want %d", (double)cases[i].x,
              precis_int8_quantize_one(cases[i].x, s), cases[i].q);
  /* With a scale that is not 1: x/s is the true IEEE quotient. 0.25/0.1f = 2.4999999 -> 2. */
  CHECK_EQ_INT(precis_int8_quantize_one(0.25f, 0.1f), 2);
  CHECK_EQ_INT(precis_int8_quantize_one(0.75f, 0.5f), 2); /* 1.5 -> 2 */
  CHECK_EQ_INT(precis_int8_quantize_one(1.25f, 0.5f), 2); /* 2.5 -> 2 */
}

TEST(int8_saturation_and_nonfinite) {
  static const float x[] = {127.4f, 127.5f, 128.0f, -127.5f, -1000.0f, 1e30f, INFINITY, -INFINITY, NAN, 3.0f};
  static const int8_t want[] = {127, 127, 127, -127, -127, 127, 127, -127, 0, 3};
  int8_t q[10];
  size_t clipped = precis_int8_quantize_tensor(x, 10, 1.0f, q);
  for (int i = 0; i < 10; i++) CHECK_MSG(q[i] == want[i], "x[%d] = %g: got %d, want %d", i, (double)x[i], q[i], want[i]);
  /* 127.4 is not clipped (rounds to 127); 127.5 rounds to 128 and is; so are the rest but 3. */
  CHECK_EQ_INT(clipped, 8);
  /* A scale so small that x/s overflows to inf is saturation too. */
  CHECK_EQ_INT(precis_int8_quantize_one(1e30f, 1e-30f), 127);
  /* s = 0: every output is 0; only non-finite inputs count as clipped. */
  static const float z[] = {0.0f, 5.0f, INFINITY, NAN};
  int8_t qz[4] = {1, 1, 1, 1};
  CHECK_EQ_INT(precis_int8_quantize_tensor(z, 4, 0.0f, qz), 2);
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(qz[i], 0);
}

TEST(int8_scales_rows_cols_and_zero_rows) {
  /* 3 x 4: row 1 all zero, row 2 holds inf and NaN only besides zeros. */
  static const float x[12] = {1.0f, -2.54f, 0.5f, 0.0f, 0.0f, 0.0f, -0.0f, 0.0f, INFINITY, 0.0f, NAN, -0.0f};
  float rs[3], cs[4];
  precis_int8_row_scales(x, 3, 4, rs);
  CHECK(rs[0] == 2.54f / 127.0f);
  CHECK(rs[1] == 0.0f);
  CHECK(rs[2] == 0.0f); /* amax ignores inf/NaN */
  int8_t q[12];
  size_t clipped = precis_int8_quantize_rows(x, 3, 4, rs, q);
  static const int8_t want_rows[12] = {50, -127, 25, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 12; i++) CHECK_MSG(q[i] == want_rows[i], "q[%d] = %d, want %d", i, q[i], want_rows[i]);
  CHECK_EQ_INT(clipped, 2); /* the inf and the NaN */
  precis_int8_col_scales(x, 3, 4, cs);
  CHECK(cs[0] == 1.0f / 127.0f && cs[1] == 2.54f / 127.0f && cs[2] == 0.5f / 127.0f && cs[3] == 0.0f);
  clipped = precis_int8_quantize_cols(x, 3, 4, cs, q);
  static const int8_t want_cols[12] = {127, -127, 127, 0, 0, 0, 0, 0, 127, 0, 0, 0};
  for (int i = 0; i < 12; i++) CHECK_MSG(q[i] == want_cols[i], "q[%d] = %d, want %d", i, q[i], want_cols[i]);
  CHECK_EQ_INT(clipped, 2);
  /* Wider than one column block of the CPU implementation. */
  enum { R = 3, C = 700 };
  static float wide[R * C];
  float wcs[C];
  for (int i = 0; i < R * C; i++) wide[i] = (float)((i * 37) % 101) - 50.0f;
  precis_int8_col_scales(wide, R, C, wcs);
  int bad = 0;
  for (int j = 0; j < C; j++) {
    float m = 0;
    for (int i = 0; i < R; i++) m = fmaxf(m, fabsf(wide[i * C + j]));
    bad += wcs[j] != m / 127.0f;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK(precis_int8_scale_from_amax(127.0f) == 1.0f);
  CHECK(precis_int8_scale_from_amax(0.0f) == 0.0f);
}

/* A layer's W (2^20 elements and more: its rows over the CPUs) gives the scales, codes and clipped
 * count of quantizing each row alone; a row of one tensor scale is precis_int8_quantize_tensor. */
TEST(int8_rows_of_a_large_matrix) {
  enum { R = 2053, C = 577 };
  float *x = malloc(sizeof(float) * R * C), *rs = malloc(sizeof(float) * R);
  int8_t *q = malloc(R * C), *row = malloc(C);
  CHECK(x && rs && q && row);
  if (!(x && rs && q && row)) goto done;
  for (size_t i = 0; i < (size_t)R * C; i++) x[i] = (float)((i * 7919) % 2003) / 7.0f - 143.0f;
  for (size_t i = 0; i < R; i += 97) x[i * C + i % C] = i % 2 ? INFINITY : NAN; /* clipped, and amax ignores them */
  precis_int8_row_scales(x, R, C, rs);
  size_t clipped = precis_int8_quantize_rows(x, R, C, rs, q), want_clipped = 0;
  int bad_scales = 0, bad_codes = 0;
  for (size_t i = 0; i < R; i++) {
    bad_scales += rs[i] != precis_int8_scale_from_amax(precis_absmax(x + i * C, C));
    want_clipped += precis_int8_quantize_tensor(x + i * C, C, rs[i], row);
    bad_codes += memcmp(row, q + i * C, C) != 0;
  }
  CHECK_EQ_INT(bad_scales, 0);
  CHECK_EQ_INT(bad_codes, 0);
  CHECK_MSG(clipped == want_clipped && clipped == (R + 96) / 97, "clipped %zu, want %zu", clipped, want_clipped);
done:
  free(x);
  free(rs);
  free(q);
  free(row);
}

TEST(absmax_ignores_nonfinite) {
  static const float x[] = {-0.0f, -3.0f, NAN, INFINITY, -INFINITY, 2.0f, -FLT_MAX};
  CHECK(precis_absmax(x, 6) == 3.0f);
  CHECK(precis_absmax(x, 7) == FLT_MAX);
  CHECK(precis_absmax(x + 2, 3) == 0.0f);
  CHECK(precis_absmax(x, 0) == 0.0f);
}

TEST(dequantize_order_is_scale_product_first) {
  /* Find inputs where (sa*sb)*acc and sa*(sb*acc) differ in float; the result must be the former. */
  uint32_t state = 7u;
  int checked_differing = 0;
  for (int t = 0; t < 100000 && checked_differing < 20; t++) {
    state = state * 1664525u + 1013904223u;
    float sa = (float)(state >> 8) * 0x1p-24f * 0.05f;
    state = state * 1664525u + 1013904223u;
    float sb = (float)(state >> 8) * 0x1p-24f * 0.05f;
    state = state * 1664525u + 1013904223u;
    int32_t acc = (int32_t)(state >> 4) - (1 << 27);
    volatile float prod = sa * sb;
    float want = prod * (float)acc;
    volatile float other_inner = sb * (float)acc;
    float other = sa * other_inner;
    if (want == other) continue;
    float c;
    precis_int8_dequantize(&acc, 1, 1, &sa, &sb, &c);
    CHECK(c == want);
    checked_differing++;
  }
  CHECK(checked_differing == 20);
  static const int32_t acc[6] = {1, -2, 3, 0, 100000, -7};
  static const float sa[2] = {0.5f, 0.0f}, sb[3] = {2.0f, 0.25f, 3.0f};
  float c[6];
  precis_int8_dequantize(acc, 2, 3, sa, sb, c);
  static const float want[6] = {1.0f, -0.25f, 4.5f, 0.0f, 0.0f, -0.0f};
  for (int i = 0; i < 6; i++) CHECK_MSG(c[i] == want[i], "c[%d] = %g", i, (double)c[i]);
}

TEST(calib_method_names) {
  precis_calib_method m;
  CHECK_OK(precis_calib_method_parse("absmax", &m));
  CHECK(m == PRECIS_CALIB_ABSMAX);
  CHECK_OK(precis_calib_method_parse("percentile", &m));
  CHECK(m == PRECIS_CALIB_PERCENTILE);
  CHECK_OK(precis_calib_method_parse("mse", &m));
  CHECK(m == PRECIS_CALIB_MSE);
  CHECK_STR(precis_calib_method_str(PRECIS_CALIB_MSE), "mse");
  CHECK(precis_calib_method_parse("entropy", &m) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "entropy") != NULL);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform01(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}

TEST(percentile_nearest_rank) {
  /* |x| = 1..N (scaled), signs alternating, shuffled order: the rank is known exactly. */
  enum { N = 100000 };
  float *x = malloc(N * sizeof *x);
  CHECK(x != NULL);
  if (!x) return;
  for (int i = 0; i < N; i++) x[i] = (float)(i + 1) * ((i & 1) ? -1.0f : 1.0f);
  for (int i = N - 1; i > 0; i--) {
    int j = (int)(uniform01() * (i + 1));
    float t = x[i];
    x[i] = x[j];
    x[j] = t;
  }
  float amax = 0;
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 99.99, &amax));
  CHECK(amax == 99990.0f); /* ceil(0.9999 * 100000) */
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 50.0, &amax));
  CHECK(amax == 50000.0f);
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 100.0, &amax));
  CHECK(amax == 100000.0f);
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 1e-9, &amax));
  CHECK(amax == 1.0f);
  /* p*N/100 exact (99.99% of 10000 = 9999): the rank must not move to 10000. */
  CHECK_OK(precis_calib_amax(x, 10000, PRECIS_CALIB_PERCENTILE, 99.99, &amax));
  /* The 9999th smallest of 10000 is the second largest. */
  float largest = 0, second = 0;
  for (int i = 0; i < 10000; i++) {
    float a = fabsf(x[i]);
    if (a > largest) {
      second = largest;
      largest = a;
    } else if (a > second) {
      second = a;
    }
  }
  CHECK(amax == second);
  /* Non-finite values are not counted. */
  float with_nonfinite[4] = {NAN, 1.0f, -2.0f, INFINITY};
  CHECK_OK(precis_calib_amax(with_nonfinite, 4, PRECIS_CALIB_PERCENTILE, 50.0, &amax));
  CHECK(amax == 1.0f);
  CHECK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 0.0, &amax) == PRECIS_E_USAGE);
  CHECK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 100.5, &amax) == PRECIS_E_USAGE);
  CHECK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, NAN, &amax) == PRECIS_E_USAGE);
  CHECK(precis_calib_amax(x, 0, PRECIS_CALIB_ABSMAX, 99.99, &amax) == PRECIS_E_INPUT);
  free(x);
}

TEST(percentile_of_uniform_data) {
  /* x ~ U(-1, 1): |x| ~ U(0, 1), so the p-th percentile of |x| is p/100 (up to sampling error,
   * about sqrt(p(1-p)/N) = 1e-5 here). */
  enum { N = 1000000 };
  float *x = malloc(N * sizeof *x);
  CHECK(x != NULL);
  if (!x) return;
  for (int i = 0; i < N; i++) x[i] = (float)(2.0 * uniform01() - 1.0);
  float amax = 0;
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 99.99, &amax));
  CHECK_NEAR(amax, 0.9999, 1e-4);
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_PERCENTILE, 90.0, &amax));
  CHECK_NEAR(amax, 0.9, 2e-3);
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_ABSMAX, 0.0, &amax));
  CHECK(amax == precis_absmax(x, N));
  free(x);
}

/* Mean squared int8 quantization error with clip value c, computed here independently. */
static double quant_mse(const float *x, size_t n, float clip) {
  double s = (double)(clip / 127.0f), sum = 0;
  for (size_t i = 0; i < n; i++) {
    double v = x[i] / (float)s;
    double q = fmin(127.0, fmax(-127.0, nearbyint(v)));
    double e = q * s - x[i];
    sum += e * e;
  }
  return sum / (double)n;
}

TEST(mse_clips_outliers) {
  enum { N = 1000000 };
  float *x = malloc(N * sizeof *x);
  CHECK(x != NULL);
  if (!x) return;
  for (int i = 0; i < N; i++) x[i] = (float)(2.0 * uniform01() - 1.0);
  float amax = 0, absmax_amax = 0;
  /* Uniform data without outliers: clipping only hurts, so mse keeps (nearly) the full range. */
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_MSE, 0.0, &amax));
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_ABSMAX, 0.0, &absmax_amax));
  CHECK_MSG(amax >= 0.95f * absmax_amax && amax <= absmax_amax, "uniform: mse clip %g, absmax %g", (double)amax,
            (double)absmax_amax);
  /* Two outliers at ±20. Keeping them costs the bulk a step of 20/127 (MSE ~ 2.1e-3); clipping at
   * c costs 2(20-c)^2/N + (c/127)^2/12, smallest near c = 5.6 (~5.8e-4). */
  x[12345] = 20.0f;
  x[543210] = -20.0f;
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_MSE, 0.0, &amax));
  CHECK_OK(precis_calib_amax(x, N, PRECIS_CALIB_ABSMAX, 0.0, &absmax_amax));
  CHECK(absmax_amax == 20.0f);
  CHECK_MSG(amax > 4.0f && amax < 7.5f, "outliers: mse clip %g", (double)amax);
  CHECK(quant_mse(x, N, amax) < 0.5 * quant_mse(x, N, absmax_amax));
  /* The choice is the best candidate on the documented grid amax*k/128. */
  double best = quant_mse(x, N, amax);
  for (int k = 1; k <= 128; k++) {
    float c = (float)(20.0 * k / 128);
    CHECK_MSG(quant_mse(x, N, c) >= best * (1 - 1e-9), "candidate %d beats the chosen clip", k);
  }
  float zeros[8] = {0};
  CHECK_OK(precis_calib_amax(zeros, 8, PRECIS_CALIB_MSE, 0.0, &amax));
  CHECK(amax == 0.0f);
  free(x);
}

TEST(fp8_per_tensor) {
  float s = precis_fp8_scale_from_amax(896.0f);
  CHECK(s == 2.0f);
  static const float x[] = {896.0f, -896.0f, 928.0f, 930.0f, 1.0f, INFINITY, NAN, -0.0f, 3.0f, -NAN};
  uint8_t q[10];
  size_t clipped = precis_fp8_quantize_tensor(x, 10, s, q);
  CHECK_EQ_INT(q[0], 0x7e);
  CHECK_EQ_INT(q[1], 0xfe);
  CHECK_EQ_INT(q[2], 0x7e); /* 464: rounds to 448 without saturating */
  CHECK_EQ_INT(q[3], 0x7e); /* 465: saturates */
  CHECK_EQ_INT(q[4], 0x30); /* 0.5 */
  CHECK_EQ_INT(q[5], 0x7e);
  CHECK_EQ_INT(q[6], 0x7f);
  CHECK_EQ_INT(q[7], 0x80);
  CHECK_EQ_INT(q[8], 0x3c); /* 1.5 = 0.0111.100 */
  CHECK_EQ_INT(q[9], 0xff); /* NaN keeps its sign */
  CHECK_EQ_INT(clipped, 4);
  uint8_t z[3] = {1, 1, 1};
  static const float zx[3] = {5.0f, NAN, -1.0f};
  CHECK_EQ_INT(precis_fp8_quantize_tensor(zx, 3, precis_fp8_scale_from_amax(0.0f), z), 1);
  CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
}

/* The quantizers' vectorized loops against a plainly written reference, on a million values
 * spread over all magnitudes, with ties, zeros and non-finite values. */
static int8_t reference_int8(float x, float s, int *clipped) {
  if (s == 0.0f) {
    *clipped = !isfinite(x);
    return 0;
  }
  float v = x / s;
  if (isnan(v)) {
    *clipped = 1;
    return 0;
  }
  double r = nearbyint((double)v);
  *clipped = fabs(r) > 127.0;
  return (int8_t)(r > 127.0 ? 127 : (r < -127.0 ? -127 : (int)r));
}

TEST(quantizers_match_reference) {
  enum { N = 1 << 20, COLS = 1024, ROWS = N / COLS };
  float *x = malloc(N * sizeof *x), *rs = malloc(ROWS * sizeof *rs), *cs = malloc(COLS * sizeof *cs);
  int8_t *q = malloc(N);
  uint8_t *q8 = malloc(N);
  CHECK(x && rs && cs && q && q8);
  if (!x || !rs || !cs || !q || !q8) goto done;
  for (int i = 0; i < N; i++) {
    uint64_t r = (uint64_t)(uniform01() * 0x1p32);
    uint32_t u = (uint32_t)r;
    if (i % 5 == 0) { /* ordinary magnitudes and exact ties */
      x[i] = (float)((int)(u % 1001) - 500) * 0.5f;
    } else {
      memcpy(&x[i], &u, sizeof u);
    }
  }
  for (int i = 0; i < ROWS; i++) rs[i] = i % 9 == 0 ? 0.0f : (i % 3 == 0 ? 1.0f : (float)(uniform01() * 4.0));
  for (int j = 0; j < COLS; j++) cs[j] = j % 11 == 0 ? 0.0f : (float)ldexp(uniform01() + 0.5, (j % 200) - 100);
  size_t want_clipped = 0;
  int bad = 0;
  size_t clipped = precis_int8_quantize_rows(x, ROWS, COLS, rs, q);
  for (int i = 0; i < N; i++) {
    int c;
    bad += q[i] != reference_int8(x[i], rs[i / COLS], &c);
    want_clipped += (size_t)c;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(clipped, want_clipped);
  bad = 0;
  want_clipped = 0;
  clipped = precis_int8_quantize_cols(x, ROWS, COLS, cs, q);
  for (int i = 0; i < N; i++) {
    int c;
    bad += q[i] != reference_int8(x[i], cs[i % COLS], &c);
    want_clipped += (size_t)c;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(clipped, want_clipped);
  bad = 0;
  want_clipped = 0;
  clipped = precis_fp8_quantize_tensor(x, N, 0.37f, q8);
  for (int i = 0; i < N; i++) {
    float v = x[i] / 0.37f;
    uint8_t want = isnan(v) ? (uint8_t)(signbit(x[i]) ? 0xff : 0x7f) : precis_f32_to_e4m3_bits(v);
    bad += q8[i] != want;
    want_clipped += isnan(v) || fabsf(v) > 464.0f;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(clipped, want_clipped);
done:
  free(x);
  free(rs);
  free(cs);
  free(q);
  free(q8);
}

RUN_TESTS(T(int8_rounding_is_ties_to_even), T(int8_saturation_and_nonfinite), T(int8_scales_rows_cols_and_zero_rows),
          T(int8_rows_of_a_large_matrix), T(absmax_ignores_nonfinite), T(dequantize_order_is_scale_product_first), T(calib_method_names),
          T(percentile_nearest_rank), T(percentile_of_uniform_data), T(mse_clips_outliers), T(fp8_per_tensor),
          T(quantizers_match_reference))
