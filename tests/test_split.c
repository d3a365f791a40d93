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


/* ---- Ozaki scheme II (CRT) ---- */

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

TEST(crt_moduli_are_gemmul8s_and_garners_constants_hold) {
  static const int want[PRECIS_CRT_MAX_MODULI] = {256, 255, 253, 251, 247, 241, 239, 233, 229, 227,
                                                  223, 217, 211, 199, 197, 193, 191, 181, 179, 173};
  for (int l = 0; l < PRECIS_CRT_MAX_MODULI; l++) {
    CHECK_EQ_INT(precis_crt_modulus(l), want[l]);
    for (int j = 0; j < l; j++) CHECK_EQ_INT(gcd64(want[l], want[j]), 1);
    if (l == 0) continue;
    int m = want[l], w = 1;
    for (int j = 0; j < l; j++) w = w * (want[j] % m) % m;
    CHECK_MSG(w * precis_crt_inverse(l) % m == 1, "inverse %d of modulus %d", precis_crt_inverse(l), m);
  }
  /* GEMMul8's table.hpp: fast log2P = log2(P - 1)/2 - 1.5, e.g. 6.4971657 for 2 moduli, 76.18568
   * for 20 (float rounded); accurate 1 more. */
  CHECK(fabs(precis_crt_log2p(2, true) - 6.49716520) < 1e-6);
  CHECK(fabs(precis_crt_log2p(20, true) - 76.1856765) < 1e-5);
  CHECK(fabs(precis_crt_log2p(16, false) - 62.1878180) < 1e-5);
}

TEST(crt_residues_are_symmetric_and_exact) {
  uint64_t seed = 33;
  for (int trial = 0; trial < 20000; trial++) {
    /* q 2^s with |q| < 2^40 and s in [0, 38]: integers up to 2^78, as A' reaches with 20 moduli. */
    int64_t q = (int64_t)(lcg(&seed) & ((1ULL << 40) - 1)) * (lcg(&seed) & 1 ? -1 : 1);
    int s = (int)(lcg(&seed) % 39);
    double x = ldexp((double)q, s);
    int l = (int)(lcg(&seed) % PRECIS_CRT_MAX_MODULI), m = precis_crt_modulus(l);
    int r = precis_crt_residue(x, m);
    int64_t pow2 = 1;
    for (int i = 0; i < s; i++) pow2 = pow2 * 2 % m;
    int64_t want = ((q % m + m) % m) * pow2 % m;
    bool in_range = m == 256 ? r >= -128 && r <= 127 : r >= -(m - 1) / 2 && r <= (m - 1) / 2;
    CHECK_MSG(in_range && ((r - want) % m + m) % m == 0, "%.17g mod %d: %d (want %lld mod m)", x, m, r,
              (long long)want);
    if (!in_range) break;
  }
}

/* X mod m in [0, m) for a signed 128-bit X. */
static uint8_t mod128(__int128 x, int m) {
  __int128 r = x % m;
  return (uint8_t)(r < 0 ? r + m : r);
}

static __int128 random128(uint64_t *s, __int128 half) {
  unsigned __int128 u = ((unsigned __int128)lcg(s) << 106) ^ ((unsigned __int128)lcg(s) << 53) ^ lcg(s);
  __int128 x = (__int128)(u % (unsigned __int128)(2 * half));
  return x - half; /* in [-half, half) */
}

TEST(crt_reconstruction_is_exact_and_rounds_once) {
  uint64_t seed = 7;
  uint8_t r[PRECIS_CRT_MAX_MODULI];
  /* N <= 16: M/2 < 2^127, so X fits __int128 and (double)X is the correctly rounded reference. */
  for (int n = 2; n <= 16; n++) {
    __int128 M = 1;
    for (int l = 0; l < n; l++) M *= precis_crt_modulus(l);
    __int128 half = M / 2;
    for (int trial = 0; trial < 3000; trial++) {
      __int128 x = trial == 0 ? -half : trial == 1 ? half - 1 : trial == 2 ? 0 : trial == 3 ? -1 : random128(&seed, half);
      if (trial >= 4 && trial % 3 == 0) x >>= (int)(lcg(&seed) % 120); /* small values too */
      for (int l = 0; l < n; l++) r[l] = mod128(x, precis_crt_modulus(l));
      int shift = (int)(lcg(&seed) % 200) - 100;
      double got = precis_crt_reconstruct(r, 1, n, shift), want = ldexp((double)x, -shift);
      CHECK_MSG(got == want, "N %d: %.17g, want %.17g", n, got, want);
      if (got != want) return;
    }
  }
  /* N = 17..20 (M up to 2^155): small values exactly, and the ends of the range. */
  for (int n = 17; n <= 20; n++) {
    long double M = 1;
    for (int l = 0; l < n; l++) M *= precis_crt_modulus(l);
    for (int trial = 0; trial < 2000; trial++) {
      __int128 x = random128(&seed, (__int128)1 << 100);
      for (int l = 0; l < n; l++) r[l] = mod128(x, precis_crt_modulus(l));
      CHECK(precis_crt_reconstruct(r, 1, n, 0) == (double)x);
    }
    /* -M/2 = M/2 mod M: residues of M/2 (256/2 times the odd moduli). */
    for (int l = 0; l < n; l++) {
      int m = precis_crt_modulus(l), v = 128 % m;
      for (int j = 1; j < n; j++) v = v * (precis_crt_modulus(j) % m) % m;
      r[l] = (uint8_t)v;
    }
    double lo = precis_crt_reconstruct(r, 1, n, 0);
    CHECK_MSG(lo < 0 && fabsl(lo + M / 2) <= M * 0x1p-54L, "N %d: -M/2 read as %.17g", n, lo);
    for (int l = 0; l < n; l++) r[l] = (uint8_t)((r[l] + precis_crt_modulus(l) - 1) % precis_crt_modulus(l));
    double hi = precis_crt_reconstruct(r, 1, n, 0); /* M/2 - 1 */
    CHECK_MSG(hi > 0 && fabsl(hi - M / 2) <= M * 0x1p-54L, "N %d: M/2 - 1 read as %.17g", n, hi);
  }
}

/* The whole chain on small matrices: shifts (both variants), A' and B', the int8 products of the
 * residues mod each modulus, the reconstruction; against the exact integer product A'B' (__int128)
 * and the bound sum |A'||B'| < M/2 that makes it exact. Values over 600 binades, zero rows. */
TEST(crt_gemm_equals_the_exact_scaled_product) {
  enum { ROWS = 5, K = 9, N = 6 };
  uint64_t seed = 2025;
  double a[ROWS * K], b[K * N], ap[ROWS * K], bp[K * N], ahat[ROWS * K], bhat[K * N];
  int sa[ROWS], sb[N];
  for (int trial = 0; trial < 60; trial++) {
    int moduli = 2 + trial % 15; /* 2..16: |A'B'| < M/2 < 2^127 */
    bool fast = trial % 2;
    int scale_a = (int)(lcg(&seed) % 600) - 300, scale_b = (int)(lcg(&seed) % 600) - 300;
    for (int i = 0; i < ROWS * K; i++) a[i] = ldexp(random_f32(&seed, 20) + 0x1p-30 * random_f32(&seed, 5), scale_a);
    for (int i = 0; i < K * N; i++) b[i] = ldexp(random_f32(&seed, 20), scale_b);
    if (trial % 5 == 0)
      for (int p = 0; p < K; p++) a[2 * K + p] = 0; /* a zero row */
    if (fast) {
      for (int i = 0; i < ROWS; i++) sa[i] = precis_crt_fast_shift(a + i * K, K, 1, moduli);
      for (int j = 0; j < N; j++) sb[j] = precis_crt_fast_shift(b + j, K, N, moduli);
    } else {
      int ea[ROWS], eb[N];
      for (int i = 0; i < ROWS; i++) ea[i] = precis_crt_bound_ints(a + i * K, K, 1, ahat + i * K);
      for (int j = 0; j < N; j++) eb[j] = precis_crt_bound_ints(b + j, K, N, bhat + j);
      for (int i = 0; i < ROWS * K; i++) CHECK(ahat[i] >= 0 && ahat[i] <= 64 && ahat[i] == ceil(ahat[i]));
      double row_max[ROWS] = {0}, col_max[N] = {0};
      for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < N; j++) {
          double c = 0;
          for (int p = 0; p < K; p++) c += ahat[i * K + p] * bhat[p * N + j];
          row_max[i] = fmax(row_max[i], c);
          col_max[j] = fmax(col_max[j], c);
        }
      for (int i = 0; i < ROWS; i++) sa[i] = precis_crt_accurate_shift(ea[i], row_max[i], moduli);
      for (int j = 0; j < N; j++) sb[j] = precis_crt_accurate_shift(eb[j], col_max[j], moduli);
    }
    for (int i = 0; i < ROWS * K; i++) ap[i] = precis_crt_scale(a[i], sa[i / K]);
    for (int i = 0; i < K * N; i++) bp[i] = precis_crt_scale(b[i], sb[i % N]);
    __int128 M = 1;
    for (int l = 0; l < moduli; l++) M *= precis_crt_modulus(l);
    for (int i = 0; i < ROWS; i++)
      for (int j = 0; j < N; j++) {
        __int128 exact = 0, bound = 0;
        uint8_t r[PRECIS_CRT_MAX_MODULI];
        for (int p = 0; p < K; p++) {
          /* |A'|, |B'| < 2^64 for N <= 16 */
          __int128 x = (__int128)ap[i * K + p], y = (__int128)bp[p * N + j];
          exact += x * y;
          bound += (x < 0 ? -x : x) * (y < 0 ? -y : y);
        }
        CHECK_MSG(2 * bound < M, "trial %d (N %d, %s): sum |A'||B'| >= M/2", trial, moduli, fast ? "fast" : "accurate");
        for (int l = 0; l < moduli; l++) {
          int m = precis_crt_modulus(l);
          int64_t acc = 0; /* the int8 GEMM's int32 sum */
          for (int p = 0; p < K; p++) acc += precis_crt_residue(ap[i * K + p], m) * precis_crt_residue(bp[p * N + j], m);
          CHECK(acc > INT32_MIN && acc < INT32_MAX);
          r[l] = (uint8_t)((acc % m + m) % m);
        }
        double got = precis_crt_reconstruct(r, 1, moduli, sa[i] + sb[j]);
        double want = ldexp((double)exact, -(sa[i] + sb[j]));
        CHECK_MSG(got == want, "trial %d (%d, %d): %.17g want %.17g", trial, i, j, got, want);
      }
  }
}

/* An inf or NaN in a row or column: its shift is PRECIS_CRT_NONFINITE in both variants, its
 * scaled values 0, its outputs NaN; the other rows keep finite shifts. */
TEST(crt_nonfinite_rows_give_nan) {
  double row[4] = {1.5, INFINITY, -2.0, 0.25}, nan_row[4] = {1.0, NAN, 0, 0}, ok_row[4] = {1.5, 3.0, -2.0, 0.25};
  double hat[4];
  CHECK_EQ_INT(precis_crt_fast_shift(row, 4, 1, 16), PRECIS_CRT_NONFINITE);
  CHECK_EQ_INT(precis_crt_fast_shift(nan_row, 4, 1, 16), PRECIS_CRT_NONFINITE);
  CHECK_EQ_INT(precis_crt_bound_ints(row, 4, 1, hat), PRECIS_CRT_NONFINITE);
  CHECK(hat[0] == 0 && hat[3] == 0);
  CHECK_EQ_INT(precis_crt_accurate_shift(PRECIS_CRT_NONFINITE, 100.0, 16), PRECIS_CRT_NONFINITE);
  CHECK(precis_crt_scale(1.5, PRECIS_CRT_NONFINITE) == 0);
  uint8_t r[16] = {0};
  CHECK(isnan(precis_crt_reconstruct(r, 1, 16, PRECIS_CRT_NONFINITE)));
  int s = precis_crt_fast_shift(ok_row, 4, 1, 16);
  CHECK(s != PRECIS_CRT_NONFINITE && s > 0 && s < 70);
}

RUN_TESTS(T(ozaki_slices_are_int8_digits_that_rebuild_each_value), T(ozaki_columns_and_truncation),
          T(float_split_terms_rebuild_fp32_values), T(double_double_references_resolve_tiny_errors),
          T(crt_moduli_are_gemmul8s_and_garners_constants_hold), T(crt_residues_are_symmetric_and_exact),
          T(crt_reconstruction_is_exact_and_rounds_once), T(crt_gemm_equals_the_exact_scaled_product),
          T(crt_nonfinite_rows_give_nan))
