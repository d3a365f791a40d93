/* The vectorized fp16-accumulation GEMM (src/eval/cpu_gemm_fp16acc.c) gives the same bits as the
 * scalar reference: random shapes (k = 1, odd n for every column tail, row counts around the block
 * of 4, a product large enough for threads) and inputs chosen to reach each rule of the rounding:
 * ties of fp16 (integer sums past 2048), sums inexact in float32 (tiny terms next to large ones),
 * fp16 subnormals and sums that round to zero (+0, never -0), overflow to inf, inf inputs (and the
 * NaNs of inf*0 and inf-inf). NaN inputs are not drawn: datasets refuse them, and which operand's
 * NaN an x86 add or multiply returns depends on the compiler's operand order, not on the algorithm. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/cpu_gemm_fp16acc.h"
#include "numerics/format.h"
#include "harness.h"

static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
static double uniform(void) { return (double)(next_u64() >> 11) * 0x1p-53; }
static int small_int(int bound) { return (int)(next_u64() % (uint64_t)(2 * bound + 1)) - bound; }

typedef enum { KIND_TYPICAL, KIND_TIES, KIND_INEXACT, KIND_SUBNORMAL, KIND_TINY, KIND_WIDE, KIND_SPECIAL, KIND_COUNT } kind;
static const char *kind_names[] = {"typical", "ties", "inexact", "subnormal", "tiny", "wide", "special"};

/* One fp16 value (stored as float) drawn for the kind of test. */
static float draw(kind what) {
  switch (what) {
  case KIND_TYPICAL:
    return precis_round_f16((float)((uniform() - 0.5) * 8.0));
  case KIND_TIES: /* integers: products up to 4096, sums past 2048 where fp16 steps by 2, 4, ... */
    return (float)small_int(64);
  case KIND_INEXACT: /* mostly integers, sometimes a tiny term that float32 cannot add exactly */
    return next_u64() % 4 ? (float)small_int(64) : ldexpf((float)small_int(1000), -24);
  case KIND_SUBNORMAL: /* sums in fp16's subnormal range; products below 2^-25 round to zero */
    return precis_round_f16(ldexpf((float)small_int(1023), -12 - (int)(next_u64() % 10)));
  case KIND_TINY: /* every product is below 2^-25 in magnitude and rounds to zero: +0, also when negative */
    return (float)small_int(3) * 0x1p-15f;
  case KIND_WIDE: { /* any finite fp16 bit pattern: subnormals to 65504, overflow within a few terms */
    uint16_t h = (uint16_t)next_u64();
    if ((h & 0x7c00) == 0x7c00) h &= 0xfbff;
    return precis_f16_bits_to_f32(h);
  }
  case KIND_SPECIAL: {
    uint64_t r = next_u64() % 16;
    if (r == 0) return INFINITY;
    if (r == 1) return -INFINITY;
    if (r == 3) return -0.0f;
    if (r == 4) return 0.0f;
    return precis_round_f16((float)((uniform() - 0.5) * 200.0));
  }
  default:
    return 0.0f;
  }
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Runs both paths on one random product and reports the first output whose bits differ. */
static int same_bits(size_t rows, size_t n, size_t k, kind what) {
  float *a = malloc(rows * k * sizeof *a), *b = malloc(k * n * sizeof *b);
  float *fast = malloc(rows * n * sizeof *fast), *ref = malloc(rows * n * sizeof *ref);
  double *scratch = malloc(n * sizeof *scratch);
  int same = 1;
  if (!a || !b || !fast || !ref || !scratch) {
    fprintf(stderr, "out of memory\n");
    same = 0;
    goto done;
  }
  for (size_t i = 0; i < rows * k; i++) a[i] = draw(what);
  for (size_t i = 0; i < k * n; i++) b[i] = draw(what);
  memset(fast, 0xa5, rows * n * sizeof *fast); /* a lane the kernel forgets to write shows */
  precis_gemm_fp16acc(a, b, fast, rows, n, k, scratch);
  precis_gemm_fp16acc_reference(a, b, ref, rows, n, k, scratch);
  for (size_t i = 0; i < rows * n && same; i++) {
    if (bits_of(fast[i]) != bits_of(ref[i])) {
      fprintf(stderr, "%s %zux%zux%zu: c[%zu][%zu] = %a (0x%08x), reference %a (0x%08x)\n", kind_names[what], rows, n,
              k, i / n, i % n, (double)fast[i], bits_of(fast[i]), (double)ref[i], bits_of(ref[i]));
      same = 0;
    }
  }
done:
  free(a);
  free(b);
  free(fast);
  free(ref);
  free(scratch);
  return same;
}

/* Every test runs once per path this CPU has (PRECIS_FP16ACC_PATH caps the choice). */
static precis_fp16acc_path best_path;
static void use_path(precis_fp16acc_path path) {
  setenv("PRECIS_FP16ACC_PATH", precis_fp16acc_path_name(path), 1);
}

TEST(each_path_is_taken_where_the_cpu_has_it) {
  unsetenv("PRECIS_FP16ACC_PATH");
  best_path = precis_gemm_fp16acc_path();
  printf("fastest path here: %s\n", precis_fp16acc_path_name(best_path));
  if (best_path == PRECIS_FP16ACC_SCALAR)
    printf("note: no AVX2/AVX-512 here: both sides are the reference, the comparisons below are trivial\n");
  for (int p = PRECIS_FP16ACC_SCALAR; p <= (int)best_path; p++) {
    use_path((precis_fp16acc_path)p);
    CHECK_EQ_INT(precis_gemm_fp16acc_path(), p);
  }
  use_path(PRECIS_FP16ACC_SCALAR);
  CHECK_EQ_INT(precis_gemm_fp16acc_path(), PRECIS_FP16ACC_SCALAR);
}

TEST(edge_shapes_every_kind) {
  static const size_t shapes[][3] = {{1, 1, 1},  {1, 7, 1},   {4, 8, 1},   {5, 9, 3},   {3, 15, 2},  {4, 16, 5},
                                     {7, 17, 4}, {9, 31, 33}, {1, 33, 64}, {8, 40, 17}, {2, 1, 200}, {6, 5, 1000}};
  for (int path = PRECIS_FP16ACC_AVX2; path <= (int)best_path; path++) {
    use_path((precis_fp16acc_path)path);
    for (int what = 0; what < KIND_COUNT; what++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        CHECK_MSG(same_bits(shapes[s][0], shapes[s][1], shapes[s][2], (kind)what), "%s, kind %s",
                  precis_fp16acc_path_name((precis_fp16acc_path)path), kind_names[what]);
  }
}

TEST(random_shapes) {
  for (int path = PRECIS_FP16ACC_AVX2; path <= (int)best_path; path++) {
    use_path((precis_fp16acc_path)path);
    for (int t = 0; t < 120; t++) {
      size_t rows = 1 + next_u64() % 13, n = 1 + next_u64() % 70, k = 1 + next_u64() % 300;
      kind what = (kind)(next_u64() % KIND_COUNT);
      CHECK_MSG(same_bits(rows, n, k, what), "%s, trial %d", precis_fp16acc_path_name((precis_fp16acc_path)path), t);
    }
  }
}

TEST(threaded_product) {
  /* 67 x 333 x 400 = 8.9M updates: above the work that starts a second thread. */
  for (int path = PRECIS_FP16ACC_AVX2; path <= (int)best_path; path++) {
    use_path((precis_fp16acc_path)path);
    CHECK(same_bits(67, 333, 400, KIND_TYPICAL));
    CHECK(same_bits(67, 333, 400, KIND_INEXACT));
  }
}

TEST(an_overflowed_sum_stays_infinite) {
  /* 300 * 300 overflows fp16 at the first step; adding 1 must keep inf (the original loop made it NaN:
   * Veltkamp's split of inf is inf - inf). */
  const float a[2] = {300.0f, 1.0f}, b[2] = {-300.0f, 1.0f};
  float ref = 0;
  double scratch[1];
  precis_gemm_fp16acc_reference(a, b, &ref, 1, 1, 2, scratch);
  CHECK(isinf(ref) && ref < 0);
  for (int path = PRECIS_FP16ACC_AVX2; path <= (int)best_path; path++) {
    use_path((precis_fp16acc_path)path);
    float fast = 0;
    precis_gemm_fp16acc(a, b, &fast, 1, 1, 2, scratch);
    CHECK(isinf(fast) && fast < 0);
  }
}

TEST(the_fallback_is_the_reference) {
  use_path(PRECIS_FP16ACC_SCALAR);
  CHECK(same_bits(5, 19, 23, KIND_WIDE));
}

RUN_TESTS(T(each_path_is_taken_where_the_cpu_has_it), T(edge_shapes_every_kind), T(random_shapes),
          T(threaded_product), T(an_overflowed_sum_stays_infinite),
          T(the_fallback_is_the_reference))
