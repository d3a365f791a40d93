/* fp8 fast accumulation (acc=fp32fast with fp8 operands, cuBLASLt FAST_ACCUM) on the cpu backend:
 * the k-sum stays in a truncating 13-fraction-bit accumulator with no promotion (docs/formats.md),
 * so its error grows with k, while plain fp8 (promoted, emulated with fp32 sums) stays at fp32's.
 *
 * The operands are e4m3 values with amax 448 in every row of A and column of B, so the quantizer
 * is exact (scale 1) and the only error left is the accumulation's: against the float64 product,
 * fp8-fast must be far worse than fp8 at long k, its error must grow with k, and it must stay
 * inside the accumulation bound precis uses for it (precis_accumulation_gamma: k * 2^-13 of
 * sum |a||b|). A fast_accum field that the backend ignored gives fp8's error and fails. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "numerics/criteria.h"
#include "numerics/format.h"
#include "cpu_case.h"
#include "harness.h"
#include "numerics/spec.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 32);
}

/* A random finite e4m3 value (codes 0..126 of either sign). */
static float random_e4m3(void) {
  uint32_t r = next_u32();
  uint8_t code = (uint8_t)((r % 127u) | (r & 0x80000000u ? 0x80u : 0u));
  return precis_e4m3_bits_to_f32(code);
}

typedef struct errors {
  double rel_fro;   /* ||c - ref||_F / ||ref||_F */
  double worst_gap; /* max over elements of |c - ref| / (gamma_k * sum |a||b|): <= 1 inside the bound */
} errors;

/* Runs spec on the cpu backend and measures it against the float64 product. */
static bool measure(const char *spec_text, float *a, float *b, size_t m, size_t n, size_t k,
                    errors *out) {
  precis_spec spec;
  cpu_case_result res;
  if (precis_spec_parse(spec_text, &spec) != PRECIS_OK ||
      !cpu_case_run(spec_text, PRECIS_TARGET_DEFAULT, "fp8-fast-accumulation", a, b, m, n, k, &res))
    return false;
  bool ok = res.status == PRECIS_ROW_OK && res.c;
  double gamma = precis_accumulation_gamma(&spec, (long long)k);
  double num = 0, den = 0;
  out->worst_gap = 0;
  for (size_t i = 0; ok && i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double ref = 0, abs_sum = 0;
      for (size_t p = 0; p < k; p++) {
        double t = (double)a[i * k + p] * (double)b[p * n + j]; /* exact */
        ref += t;
        abs_sum += fabs(t);
      }
      double e = (double)res.c[i * n + j] - ref;
      num += e * e;
      den += ref * ref;
      out->worst_gap = fmax(out->worst_gap, fabs(e) / (gamma * abs_sum));
    }
  out->rel_fro = den > 0 ? sqrt(num / den) : 0;
  free(res.c);
  return ok;
}

/* A [m, k] and B [k, n] of exact e4m3 values, with +-448 at A[i][0] and B[0][j]. */
static void make_operands(float *a, float *b, size_t m, size_t n, size_t k) {
  for (size_t i = 0; i < m * k; i++) a[i] = random_e4m3();
  for (size_t i = 0; i < k * n; i++) b[i] = random_e4m3();
  for (size_t i = 0; i < m; i++) a[i * k] = (next_u32() & 1) ? 448.0f : -448.0f;
  for (size_t j = 0; j < n; j++) b[j] = (next_u32() & 1) ? 448.0f : -448.0f;
}

static const char *const plain_specs[] = {"a=e4m3@tensor,b=e4m3@tensor,out=fp32", "a=e4m3@row,b=e4m3@col,out=fp32"};
static const char *const fast_specs[] = {"a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=fp32",
                                         "a=e4m3@row,b=e4m3@col,acc=fp32fast,out=fp32"};

TEST(fast_accumulation_error_exceeds_fp8_and_grows_with_k) {
  enum { M = 8, N = 8 };
  static const size_t ks[] = {64, 4096};
  for (size_t s = 0; s < 2; s++) {
    errors plain[2], fast[2];
    for (size_t t = 0; t < 2; t++) {
      size_t k = ks[t];
      float *a = malloc(sizeof(float) * M * k), *b = malloc(sizeof(float) * k * N);
      make_operands(a, b, M, N, k);
      CHECK_MSG(measure(plain_specs[s], a, b, M, N, k, &plain[t]), "%s: the cpu backend failed", plain_specs[s]);
      CHECK_MSG(measure(fast_specs[s], a, b, M, N, k, &fast[t]), "%s: the cpu backend failed", fast_specs[s]);
      printf("  %s, k=%zu: rel_fro fp8 %.3g, fp8-fast %.3g (worst |err| / bound %.3g)\n", fast_specs[s], k,
             plain[t].rel_fro, fast[t].rel_fro, fast[t].worst_gap);
      free(a), free(b);
    }
    /* At long k the unpromoted 13-bit sum is orders of magnitude worse than fp32 sums... */
    CHECK_MSG(fast[1].rel_fro > 100 * plain[1].rel_fro, "%s: k=4096 fp8-fast %g vs fp8 %g", fast_specs[s],
              fast[1].rel_fro, plain[1].rel_fro);
    /* ...and worse the longer k is (about linearly: every block of 32 loses up to 2^-13 of the sum). */
    CHECK_MSG(fast[1].rel_fro > 4 * fast[0].rel_fro, "%s: k=64 %g, k=4096 %g", fast_specs[s], fast[0].rel_fro,
              fast[1].rel_fro);
    /* The default gate's accumulation term holds it. */
    CHECK_MSG(fast[0].worst_gap <= 1 && fast[1].worst_gap <= 1, "%s: outside k*2^-13 (%g, %g)", fast_specs[s],
              fast[0].worst_gap, fast[1].worst_gap);
  }
}

/* C = A.B on the cpu backend for spec (m x n outputs into c); false when the case did not run. */
static bool run_spec(const char *spec_text, float *a, float *b, size_t m, size_t n, size_t k, float *c) {
  cpu_case_result res;
  bool ok = cpu_case_run(spec_text, PRECIS_TARGET_DEFAULT, "fp8-fast-pinned", a, b, m, n, k, &res) && res.c;
  if (ok) memcpy(c, res.c, m * n * sizeof *c);
  free(res.c);
  return ok;
}

/* Small cases pinned bit for bit. Per-tensor scales of exactly 1 (amax 448 in A and in B), so every
 * product is exact; what is left is the accumulator of the sm_90 model (docs/formats.md, the MMA
 * chain): per instruction of 32 products, D and each product are aligned to the largest exponent and
 * truncated toward zero to 13 fraction bits, the first instruction included. At 448 the last kept
 * bit is 2^-5, so a product of 2^-10 is lost whole, of either sign. */
TEST(small_cases_bit_for_bit) {
  static const char *fast = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=fp32";
  static const char *plain = "a=e4m3@tensor,b=e4m3@tensor,out=fp32";
  enum { K = 96 };
  typedef struct pinned {
    size_t k;
    float a1, b1;     /* A[1], B[1]: the small product added to 448 = A[0]*B[0] in the first block */
    float a40, b40;   /* A[40], B[40]: a product in the second block (k > 32) */
    float sign;       /* A[0] = sign * 448 */
    float want_fast, want_plain;
  } pinned;
  static const pinned cases[] = {
      /* one block: the first block's sum is truncated too */
      {32, 0x1p-5f, 0x1p-5f, 0, 0, 1, 448.0f, 448.0f + 0x1p-10f},
      {32, -0x1p-5f, 0x1p-5f, 0, 0, -1, -448.0f, -448.0f - 0x1p-10f},
      {32, -0x1p-5f, 0x1p-5f, 0, 0, 1, 448.0f, 448.0f - 0x1p-10f}, /* -2^-10 aligned to 2^-5: truncated to 0 */
      /* a sum with 13 fraction bits or fewer passes whole */
      {32, 0.25f, 0.125f, 0, 0, 1, 448.03125f, 448.03125f},
      /* two blocks: truncated after each, so two 2^-10 never add up to a kept bit */
      {64, 0x1p-5f, 0x1p-5f, 0x1p-5f, 0x1p-5f, 1, 448.0f, 448.0f + 0x1p-9f},
      /* a second block that is kept: 448 + 2^-10 -> 448, then + 1 = 449 */
      {64, 0x1p-5f, 0x1p-5f, 1.0f, 1.0f, 1, 449.0f, 449.0f + 0x1p-10f},
      /* a partial last block (k = 33) */
      {33, 0x1p-5f, 0x1p-5f, 0, 0, 1, 448.0f, 448.0f + 0x1p-10f},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    const pinned *p = &cases[t];
    float a[K] = {0}, b[K] = {0}, c = 0;
    a[0] = p->sign * 448.0f, b[0] = 1.0f; /* A's amax 448 */
    a[1] = p->a1, b[1] = p->b1;
    b[2] = 448.0f; /* B's amax 448 (a[2] = 0) */
    if (p->k > 40) a[40] = p->a40, b[40] = p->b40;
    CHECK_MSG(run_spec(fast, a, b, 1, 1, p->k, &c), "case %zu: fp8-fast did not run", t);
    CHECK_MSG(memcmp(&c, &p->want_fast, sizeof c) == 0, "case %zu (k=%zu): fp8-fast gives %a, expected %a", t, p->k,
              (double)c, (double)p->want_fast);
    CHECK_MSG(run_spec(plain, a, b, 1, 1, p->k, &c), "case %zu: fp8 did not run", t);
    CHECK_MSG(memcmp(&c, &p->want_plain, sizeof c) == 0, "case %zu (k=%zu): fp8 gives %a, expected %a", t, p->k,
              (double)c, (double)p->want_plain);
  }
}

/* The accumulation model the bounds use: fast accumulation never promotes (interval 0, unit 2^-13),
 * plain fp8 promotes every 128 products. */
TEST(the_bound_model_knows_fast_accumulation) {
  precis_spec plain, fast;
  CHECK_OK(precis_spec_parse(plain_specs[0], &plain));
  CHECK_OK(precis_spec_parse(fast_specs[0], &fast));
  precis_accumulation p = precis_spec_accumulation(&plain), f = precis_spec_accumulation(&fast);
  CHECK(p.interval == 128 && f.interval == 0 && f.unit == 0x1p-13);
  CHECK(precis_accumulation_gamma(&fast, 4096) > 30 * precis_accumulation_gamma(&plain, 4096));
}

RUN_TESTS(T(fast_accumulation_error_exceeds_fp8_and_grows_with_k), T(small_cases_bit_for_bit),
          T(the_bound_model_knows_fast_accumulation))
