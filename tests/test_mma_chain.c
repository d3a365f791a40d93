/* The tensor cores' fp32-accumulating MMA on the CPU (src/eval/cpu_gemm_mma.c): every vector kernel
 * (the fp32/int32 one in AVX-512 and in AVX2, the double one, each forced by a cap) gives the same
 * bits as the scalar reference on random shapes (k tails of every block size, odd n for the column
 * tails, odd rows for the row tails, m = 1, n >= 4096, products large enough for threads) and on
 * inputs that reach each rule: exponents spread so that truncation bites, fp16 subnormals (aligned
 * at 2^-14), subnormal A operands as a block's largest product, cancellation to zero (+0), sums in
 * fp32's subnormal range, an int32 block sum plus the accumulator past 2^31 (in both fp32 kernels),
 * and inf operands (the reference's fp64 sum; no kernel is taken). The narrow kinds must take the
 * fp32 kernel (its AVX-512 form where the CPU has it, as the compiler's own CPUID check says, and n
 * > 16), the wide ones (full fp32 significands among them) fall back. Hand-worked cases pin the
 * reference itself to the rule: the 24- and 25-bit widths, the alignment at ea + eb rather than the
 * product's own exponent, the block boundary and the truncation of the accumulator. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/cpu_gemm_mma.h"
#include "numerics/format.h"
#include "harness.h"

static uint64_t state = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
static double uniform(void) { return (double)(next_u64() >> 11) * 0x1p-53; }

typedef enum {
  KIND_BF16,
  KIND_F16,
  KIND_TF32,
  KIND_SPREAD,
  KIND_F16_SUB,
  KIND_CANCEL,
  KIND_F16_SUB_A, /* A all fp16 subnormals, B normal: a subnormal A decides every block's maximum */
  KIND_F32_SUB,   /* beyond the fp32 kernel's exponent range: the double kernel */
  KIND_FP32,      /* full fp32 significands (24 bits): products not exact in fp32, the double kernel */
  KIND_WIDE,      /* bf16 over 2^-60..2^60: beyond the fp32 kernel's spread */
  KIND_COUNT
} kind;
static const char *kind_names[] = {"bf16",     "fp16",          "tf32",           "spread", "fp16-subnormal",
                                   "cancel",   "fp16-subnormal-A", "fp32-subnormal", "fp32", "wide"};
/* 1: the fp32 kernel must take these operands, 0: it must not, -1: either (spread: it depends on the
 * draw's extremes) */
static int narrow_kind(kind what) { return what == KIND_SPREAD ? -1 : what < KIND_F32_SUB; }

static int any_nonzero(const float *x, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (x[i] != 0) return 1;
  return 0;
}

static precis_mma_shape shape_of(kind what, int bits, int block) {
  int emin = what == KIND_F16 || what == KIND_F16_SUB || what == KIND_F16_SUB_A ? -14 : -126;
  return (precis_mma_shape){.fraction_bits = bits, .block = block, .emin_a = emin, .emin_b = emin};
}

static float draw(kind what) {
  double u = (uniform() - 0.5) * 4.0;
  switch (what) {
  case KIND_BF16: return precis_round_bf16((float)u);
  case KIND_F16: return precis_round_f16((float)u);
  case KIND_TF32: return precis_round_tf32((float)u);
  case KIND_SPREAD: return precis_round_bf16(ldexpf((float)u, (int)(next_u64() % 40) - 20));
  case KIND_F16_SUB: return precis_round_f16(ldexpf((float)u, -(int)(next_u64() % 14)));
  case KIND_CANCEL: return (float)((int)(next_u64() % 5) - 2);
  case KIND_F32_SUB: return precis_round_bf16(ldexpf((float)u, -60 - (int)(next_u64() % 10)));
  case KIND_FP32: return (float)u;
  case KIND_WIDE: return precis_round_bf16(ldexpf((float)u, (int)(next_u64() % 121) - 60));
  case KIND_F16_SUB_A: return precis_round_f16((float)u); /* B's; A's: draw_a */
  default: return 0.0f;
  }
}

/* A's operand: an fp16 subnormal (2^-24 .. 2^-14, some bits below the normal grid) for
 * KIND_F16_SUB_A, else as B's. */
static float draw_a(kind what) {
  if (what != KIND_F16_SUB_A) return draw(what);
  double u = (uniform() - 0.5) * 2.0;
  return precis_round_f16(ldexpf((float)u, -14 - (int)(next_u64() % 10)));
}

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

#define CAPS 3
static const precis_mma_path caps[CAPS] = {PRECIS_MMA_PATH_AVX512_F32, PRECIS_MMA_PATH_AVX2_F32, PRECIS_MMA_PATH_AVX2};

/* Every vector kernel (each capped) against the reference; `taken` (CAPS entries, or NULL) gets the
 * path each cap took. */
static int same_bits_ab(const float *a, const float *b, size_t rows, size_t n, size_t k, const precis_mma_shape *s,
                        const char *what, precis_mma_path *taken_by_cap) {
  float *fast = malloc(rows * n * sizeof *fast), *ref = malloc(rows * n * sizeof *ref);
  int same = fast && ref;
  if (same) precis_gemm_mma_reference(a, b, ref, rows, n, k, s);
  for (int c = 0; c < CAPS && same; c++) {
    memset(fast, 0xa5, rows * n * sizeof *fast); /* a lane the kernel forgets to write shows */
    precis_mma_path taken = precis_gemm_mma_capped(a, b, fast, rows, n, k, s, caps[c]);
    if (taken_by_cap) taken_by_cap[c] = taken;
    for (size_t i = 0; i < rows * n && same; i++)
      if (bits_of(fast[i]) != bits_of(ref[i])) {
        fprintf(stderr, "%s %zux%zux%zu bits %d block %d, path %s: c[%zu][%zu] = %a, reference %a\n", what, rows, n, k,
                s->fraction_bits, s->block, precis_mma_path_name(taken), i / n, i % n, (double)fast[i], (double)ref[i]);
        same = 0;
      }
  }
  free(fast);
  free(ref);
  return same;
}

/* The fp32 kernel is there on this CPU (else the cap falls to the double kernel: the comparisons
 * still run, the path checks are skipped). */
static int have_f32(void) {
  const float one = 1.0f;
  float c;
  precis_mma_shape s = {.fraction_bits = 24, .block = 8, .emin_a = -126, .emin_b = -126};
  return precis_gemm_mma_capped(&one, &one, &c, 1, 1, 1, &s, PRECIS_MMA_PATH_AVX2_F32) == PRECIS_MMA_PATH_AVX2_F32;
}

/* The CPU has AVX-512 F and BW with the OS saving its state (asked through the compiler's own
 * CPUID code, not the library's): the fp32 kernel's AVX-512 form must then be taken. */
static int have_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && have_f32();
#else
  return 0;
#endif
}

static int same_bits(size_t rows, size_t n, size_t k, kind what, int bits, int block) {
  float *a = malloc(rows * k * sizeof *a), *b = malloc(k * n * sizeof *b);
  int same = 0;
  if (a && b) {
    for (size_t i = 0; i < rows * k; i++) a[i] = draw_a(what);
    for (size_t i = 0; i < k * n; i++) b[i] = draw(what);
    precis_mma_shape s = shape_of(what, bits, block);
    precis_mma_path taken[CAPS] = {PRECIS_MMA_PATH_SCALAR, PRECIS_MMA_PATH_SCALAR, PRECIS_MMA_PATH_SCALAR};
    same = same_bits_ab(a, b, rows, n, k, &s, kind_names[what], taken);
    /* the narrow kinds take the fp32 kernel (in AVX-512 where the CPU has it, in AVX2 under that
     * cap); the wide ones cannot (its exactness conditions fail) */
    /* all zero: either; wide with few values: the draw may stay within the spread */
    int expect = any_nonzero(a, rows * k) && any_nonzero(b, k * n) ? narrow_kind(what) : -1;
    if (what == KIND_WIDE && (rows * k < 64 || k * n < 64)) expect = -1;
    /* AVX-512 for more than 16 columns (narrower: the AVX2 kernel's 16-column tile) */
    precis_mma_path best_f32 = have_avx512() && n > 16 ? PRECIS_MMA_PATH_AVX512_F32 : PRECIS_MMA_PATH_AVX2_F32;
    if (same && have_f32() && expect >= 0 &&
        ((taken[0] == best_f32) != expect || (taken[1] == PRECIS_MMA_PATH_AVX2_F32) != expect)) {
      fprintf(stderr, "%s %zux%zux%zu bits %d block %d: took %s and %s\n", kind_names[what], rows, n, k, bits, block,
              precis_mma_path_name(taken[0]), precis_mma_path_name(taken[1]));
      same = 0;
    }
  }
  free(a);
  free(b);
  return same;
}

static float one_dot(const float *a, const float *b, size_t k, int bits, int block, int emin) {
  precis_mma_shape s = {.fraction_bits = bits, .block = block, .emin_a = emin, .emin_b = emin};
  float c = -1.0f;
  precis_gemm_mma_reference(a, b, &c, 1, 1, k, &s);
  return c;
}

TEST(the_reference_follows_the_rule) {
  /* 1 + 4 x 2^-25: 25 bits keep each 2^-25 next to 1 (the sum 1 + 2^-23 is an fp32), 24 bits drop
   * them all. */
  const float a[5] = {1.0f, 0x1p-25f, 0x1p-25f, 0x1p-25f, 0x1p-25f}, ones[5] = {1, 1, 1, 1, 1};
  CHECK(one_dot(a, ones, 5, 25, 8, -126) == 1.0f + 0x1p-23f);
  CHECK(one_dot(a, ones, 5, 24, 8, -126) == 1.0f);
  /* The same terms in blocks of 1: the fp32 accumulator (RZ) absorbs nothing below 2^-23. */
  CHECK(one_dot(a, ones, 5, 25, 1, -126) == 1.0f);
  /* Blocks of 4: 1 + 3 x 2^-25 truncates to 1 in fp32, then 1 + 2^-25 again. */
  CHECK(one_dot(a, ones, 5, 25, 4, -126) == 1.0f);
  /* Alignment at ea + eb: 1.5 x 1.5 = 2.25 aligns at 2^0, so with 2 fraction bits 2^-2 survives next
   * to it (0.25 = 1 quantum); aligned at the product's own exponent 2^1 it would not. */
  const float x[2] = {1.5f, 0.25f}, y[2] = {1.5f, 1.0f};
  CHECK(one_dot(x, y, 2, 2, 2, -126) == 2.5f);
  /* Truncation toward zero, negative terms too: -1 - 2^-26 keeps -1 at 25 bits. */
  const float m[2] = {-1.0f, -0x1p-26f};
  CHECK(one_dot(m, ones, 2, 25, 2, -126) == -1.0f);
  /* An fp16 subnormal aligns at 2^-14: 2^-20 x 2^-20 next to nothing else keeps its bits. */
  const float s1[1] = {0x1p-20f};
  CHECK(one_dot(s1, s1, 1, 24, 1, -14) == 0x1p-40f);
  /* Cancellation gives +0. */
  const float p[2] = {1.0f, -1.0f};
  float z = one_dot(p, ones, 2, 25, 2, -126);
  CHECK(z == 0.0f && !signbit(z));
}

TEST(vector_path_matches_the_reference) {
  if (precis_gemm_mma_path() == PRECIS_MMA_PATH_SCALAR)
    printf("note: no AVX2 here: both sides are the reference, the comparisons below are trivial\n");
  else if (!have_f32())
    printf("note: no FMA here: the fp32 kernel's cap runs the double kernel\n");
  else if (!have_avx512())
    printf("note: no AVX-512 here: its cap runs the AVX2 fp32 kernel\n");
  static const size_t shapes[][3] = {{1, 1, 1}, {1, 7, 3},  {2, 8, 16},  {3, 9, 17},  {5, 15, 33},
                                     {4, 16, 5}, {7, 17, 64}, {9, 31, 100}, {1, 33, 7}, {2, 1, 200},
                                     {3, 48, 40}, {5, 65, 19}, {6, 32, 24}};
  static const int widths[][2] = {{25, 16}, {24, 8}, {25, 8}, {24, 4}};
  for (int what = 0; what < KIND_COUNT; what++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        CHECK_MSG(same_bits(shapes[s][0], shapes[s][1], shapes[s][2], (kind)what, widths[w][0], widths[w][1]),
                  "kind %s", kind_names[what]);
}

TEST(random_shapes_and_threads) {
  for (int t = 0; t < 80; t++) {
    size_t rows = 1 + next_u64() % 11, n = 1 + next_u64() % 40, k = 1 + next_u64() % 150;
    kind what = (kind)(next_u64() % KIND_COUNT);
    int bits = next_u64() % 2 ? 25 : 24, block = 4 << (next_u64() % 3);
    CHECK_MSG(same_bits(rows, n, k, what, bits, block), "trial %d", t);
  }
  /* 67 x 333 x 400 = 8.9M products: above the work that starts a second thread. */
  CHECK(same_bits(67, 333, 400, KIND_BF16, 25, 16));
  CHECK(same_bits(67, 333, 400, KIND_SPREAD, 24, 8));
  /* wide outputs (several column groups, threads), m = 1, odd k and k not a multiple of the block;
   * more than F32_MC rows (two row chunks) */
  CHECK(same_bits(1, 4100, 37, KIND_BF16, 25, 16));
  CHECK(same_bits(3, 4096, 33, KIND_F16_SUB_A, 24, 8));
  CHECK(same_bits(1, 5000, 77, KIND_TF32, 24, 4));
  CHECK(same_bits(2, 4099, 45, KIND_SPREAD, 25, 8));
  CHECK(same_bits(131, 40, 21, KIND_F16, 25, 16));
}

TEST(subnormal_a_decides_the_block) {
  /* Issue 38: a = [2^-20, 2^-20] (fp16 subnormals: aligned at 2^-14), b = [1, 2^-20]: emax is
   * -14 + 0, the grid 2^-38 at 24 bits, so the second product (2^-40) truncates away. Aligned at
   * its own exponent -20 instead, the grid would be 2^-44 and keep it: 0x1.00001p-20. */
  const float a[2] = {0x1p-20f, 0x1p-20f}, b[2] = {1.0f, 0x1p-20f};
  precis_mma_shape s = {.fraction_bits = 24, .block = 8, .emin_a = -14, .emin_b = -14};
  for (int c = 0; c < CAPS; c++) {
    float out = -1.0f;
    precis_mma_path taken = precis_gemm_mma_capped(a, b, &out, 1, 1, 2, &s, caps[c]);
    CHECK_MSG(out == 0x1p-20f, "path %s: %a", precis_mma_path_name(taken), (double)out);
  }
  CHECK(one_dot(a, b, 2, 24, 8, -14) == 0x1p-20f);
  /* every kind of width, the subnormal A operands deciding every block */
  static const int widths[][2] = {{25, 16}, {24, 8}, {24, 4}};
  for (size_t w = 0; w < 3; w++)
    for (int t = 0; t < 6; t++)
      CHECK(same_bits(1 + next_u64() % 9, 1 + next_u64() % 40, 1 + next_u64() % 70, KIND_F16_SUB_A, widths[w][0],
                      widths[w][1]));
}

TEST(block_sum_and_accumulator_past_two_to_the_31) {
  /* sm_90's width: 16 products of (2 - 2^-7)^2 ~ 3.97, each ~2^27 at the block's grid, their sum
   * just below 2^31, plus an accumulator 1.99 at the same exponent (~2^26): 33 bits, exact only if
   * the kernel does not add them in int32. */
  enum { COLS = 33 }; /* one column and 33 equal ones: the AVX2 and the AVX-512 kernel (n > 16) */
  float a[32] = {0}, b[32 * COLS] = {0};
  a[0] = 1.9921875f; /* bf16 */
  for (int j = 0; j < COLS; j++) b[j] = 1.0f;
  for (int p = 16; p < 32; p++) {
    a[p] = 2.0f - 0x1p-7f;
    for (int j = 0; j < COLS; j++) b[p * COLS + j] = 2.0f - 0x1p-7f;
  }
  precis_mma_shape s = {.fraction_bits = 25, .block = 16, .emin_a = -126, .emin_b = -126};
  for (int neg = 0; neg < 2; neg++) {
    if (neg) { /* and negative: the sum just above -2^31 */
      for (int p = 16; p < 32; p++) a[p] = -a[p];
      a[0] = -a[0];
    }
    float col[32];
    for (int p = 0; p < 32; p++) col[p] = b[p * COLS];
    CHECK_MSG(same_bits_ab(a, col, 1, 1, 32, &s, "2^31", NULL), "negative %d", neg);
    precis_mma_path taken[CAPS];
    CHECK_MSG(same_bits_ab(a, b, 1, COLS, 32, &s, "2^31", taken), "negative %d", neg);
    if (have_avx512()) CHECK_EQ_INT(taken[0], PRECIS_MMA_PATH_AVX512_F32);
  }
}

TEST(zeros_next_to_a_wide_spread) {
  /* The AVX-512 kernel keeps exponents as int8 (EA' + 63, EB' + 64, a zero -128, added with
   * saturation): B spread over 2^-72 .. 2^0 puts its smallest EB' + 64 near -10, and a zero in A
   * next to it must stay below every real sum (a wrapping add would give +118, above them all, and
   * its 2^(E - fb) grid would truncate the block's products to nothing). A with zeros every few
   * values, rows odd (a pair with a missing row), n > 32 (two AVX-512 tiles and a tail). */
  enum { ROWS = 7, N = 70, K = 45 };
  float a[ROWS * K], b[K * N];
  for (size_t i = 0; i < ROWS * K; i++) /* within [1, 2): the spread is B's */
    a[i] = next_u64() % 3 == 0 ? 0.0f : precis_round_bf16((next_u64() % 2 ? -1.0f : 1.0f) * (1.0f + (float)uniform()));
  for (size_t i = 0; i < K * N; i++) b[i] = precis_round_bf16(ldexpf(1.0f + (float)uniform(), -(int)(next_u64() % 73)));
  b[0] = 1.5f;        /* the spread's ends present whatever the draw */
  b[1] = 0x1.8p-72f;
  static const int widths[][2] = {{25, 16}, {24, 8}, {24, 4}};
  for (size_t w = 0; w < 3; w++) {
    precis_mma_shape s = {.fraction_bits = widths[w][0], .block = widths[w][1], .emin_a = -126, .emin_b = -126};
    precis_mma_path taken[CAPS];
    CHECK(same_bits_ab(a, b, ROWS, N, K, &s, "zeros and spread", taken));
    if (have_avx512()) CHECK_EQ_INT(taken[0], PRECIS_MMA_PATH_AVX512_F32);
  }
}

TEST(cancellation_then_a_block_of_zeros) {
  /* A block whose products cancel to far below its own grid's top leaves d' with a small exponent
   * field (here 2^-7 of the products, their exponents at the bottom of the fp32 kernel's range: one
   * 2^97 product in the other column sets the scale); the next block's products are all zero, so
   * its maximum exponent is d's and the result's power of two, 2^(emax - fb), lies below fp32's
   * normal range although the result does not. The AVX2 fp32 kernel once clamped that power to
   * 2^-126 and returned 2^-1 for 2^-7. Two columns (the AVX2 kernel) and 35 (AVX-512 too). */
  enum { K = 16, COLS = 35 };
  static const int widths[][2] = {{24, 8}, {25, 8}, {24, 4}};
  for (size_t w = 0; w < 3; w++)
    for (int cols = 2; cols <= COLS; cols += COLS - 2)
      for (int neg = 0; neg < 2; neg++) {
        float a[K] = {0}, b[K * COLS] = {0};
        a[0] = neg ? -1.0f : 1.0f;
        a[1] = -a[0];
        a[2] = 1.0f;
        for (int j = 0; j + 1 < cols; j++) {
          b[0 * cols + j] = 1.0f + 0x1p-7f;
          b[1 * cols + j] = 1.0f;
        }
        b[2 * cols + cols - 1] = 0x1p97f;
        precis_mma_shape s = {.fraction_bits = widths[w][0], .block = widths[w][1], .emin_a = -126, .emin_b = -126};
        float ref[COLS];
        precis_gemm_mma_reference(a, b, ref, 1, (size_t)cols, K, &s);
        CHECK_MSG(ref[0] == (neg ? -0x1p-7f : 0x1p-7f), "reference %a", (double)ref[0]);
        precis_mma_path taken[CAPS] = {PRECIS_MMA_PATH_SCALAR, PRECIS_MMA_PATH_SCALAR, PRECIS_MMA_PATH_SCALAR};
        CHECK_MSG(same_bits_ab(a, b, 1, (size_t)cols, K, &s, "cancellation", taken), "%d columns", cols);
        if (have_f32()) CHECK_EQ_INT(taken[1], PRECIS_MMA_PATH_AVX2_F32);
      }
}

TEST(a_sum_below_fp32s_range_keeps_its_sign) {
  /* A product below fp32's smallest subnormal truncates toward zero to a zero of its own sign (the
   * reference, as IEEE's round toward zero); a sum that is exactly zero is +0. The fp32 kernel
   * declines these operands (f32_safe); the double kernel once turned every zero into +0. Then a
   * block of zero products after it: +0. */
  const float a[3] = {-0x1.8p-50f, 0x1p-50f, 0.0f}, b[3] = {0x1p-103f, 0x1p-103f, 1.0f};
  precis_mma_shape s = {.fraction_bits = 24, .block = 1, .emin_a = -126, .emin_b = -126};
  for (size_t k = 1; k <= 3; k++) {
    float ref = 1.0f;
    precis_gemm_mma_reference(a, b, &ref, 1, 1, k, &s);
    CHECK_MSG(ref == 0.0f && (signbit(ref) != 0) == (k == 1), "k %zu: reference %a", k, (double)ref);
    CHECK_MSG(same_bits_ab(a, b, 1, 1, k, &s, "underflow", NULL), "k %zu", k);
  }
  /* the same within one block of 8 (the products' sum underflows): negative, and +0 when it is 0 */
  const float a2[2] = {-0x1.8p-50f, 0x1.8p-50f};
  precis_mma_shape s8 = {.fraction_bits = 24, .block = 8, .emin_a = -126, .emin_b = -126};
  CHECK(same_bits_ab(a2, b, 1, 1, 1, &s8, "underflow", NULL));
  CHECK(same_bits_ab(a2, b, 1, 1, 2, &s8, "cancelled", NULL));
  /* -0 from the first block, then a block whose only product is -1·0 = -0: every term a -0, the
   * reference's +0 */
  const float a3[2] = {-0x1.8p-50f, -1.0f}, b3[2] = {0x1p-103f, 0.0f};
  float ref = -1.0f;
  precis_gemm_mma_reference(a3, b3, &ref, 1, 1, 2, &s);
  CHECK_MSG(ref == 0.0f && !signbit(ref), "reference %a", (double)ref);
  CHECK(same_bits_ab(a3, b3, 1, 1, 2, &s, "negative zeros", NULL));
}

TEST(random_cancellations_and_blocks_of_zeros) {
  /* Random small calls built to reach the corners above: operands with zeros in runs, an A value
   * often the negation of the one before it and B's rows often a copy of the row before (scaled by
   * 1 or 1 + 2^-7), so that blocks cancel to small accumulators and whole blocks are zero; half
   * the calls with one large B value that puts the rest near the bottom of the fp32 kernel's
   * exponent range, some with sums below fp32's subnormals. Before the two fixes above, 8 of these
   * 10,000 calls differed from the reference. */
  size_t calls = 0, differ = 0;
  for (int trial = 0; trial < 10000; trial++) {
    size_t m = 1 + next_u64() % 6, n = 1 + next_u64() % 40, k = 1 + next_u64() % 40;
    float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b);
    if (!a || !b) {
      free(a), free(b);
      CHECK(0);
      return;
    }
    int spread = (int)(next_u64() % 110), zeros = (int)(next_u64() % 90);
    for (size_t i = 0; i < m * k; i++)
      a[i] = (int)(next_u64() % 100) < zeros ? 0.0f : ldexpf((float)(uniform() - 0.5), -(int)(next_u64() % (spread / 2 + 1)));
    for (size_t i = 0; i < k * n; i++)
      b[i] = (int)(next_u64() % 100) < zeros ? 0.0f : ldexpf((float)(uniform() - 0.5), -(int)(next_u64() % (spread / 2 + 1)));
    for (size_t i = 1; i < m * k; i++)
      if (next_u64() % 5 == 0) a[i] = -a[i - 1];
    if (next_u64() % 2)
      for (size_t p = 1; p < k; p++)
        if (next_u64() % 2)
          for (size_t j = 0; j < n; j++) b[p * n + j] = b[(p - 1) * n + j] * (next_u64() % 2 ? 1.0f + 0x1p-7f : 1.0f);
    if (next_u64() % 2) {
      int big = 70 + (int)(next_u64() % 30);
      for (size_t i = 0; i < k * n; i++) b[i] = ldexpf(b[i], -big / 2);
      b[next_u64() % (k * n)] = ldexpf(1.0f, big / 2);
      for (size_t i = 0; i < m * k; i++)
        if (next_u64() % 2) a[i] = 0.0f;
    }
    for (size_t i = 0; i < m * k; i++) a[i] = precis_round_bf16(a[i]);
    for (size_t i = 0; i < k * n; i++) b[i] = precis_round_bf16(b[i]);
    static const int widths[][2] = {{25, 16}, {24, 8}, {24, 4}};
    const int *w = widths[next_u64() % 3];
    precis_mma_shape s = {.fraction_bits = w[0], .block = w[1], .emin_a = -126, .emin_b = -126};
    calls++;
    if (!same_bits_ab(a, b, m, n, k, &s, "random cancellations", NULL)) differ++;
    free(a);
    free(b);
  }
  CHECK_MSG(differ == 0, "%zu of %zu calls differ from the reference", differ, calls);
}

TEST(specials_take_the_reference) {
  float a[3] = {1.0f, INFINITY, 2.0f}, b[3] = {1.0f, 1.0f, 1.0f};
  precis_mma_shape s = {.fraction_bits = 25, .block = 2, .emin_a = -126, .emin_b = -126};
  float c = 0;
  precis_gemm_mma(a, b, &c, 1, 1, 3, &s);
  CHECK(isinf(c) && c > 0);
  CHECK(same_bits_ab(a, b, 1, 1, 3, &s, "inf", NULL));
  setenv("PRECIS_MMA_PATH", "scalar", 1);
  CHECK_EQ_INT(precis_gemm_mma_path(), PRECIS_MMA_PATH_SCALAR);
  if (have_f32()) { /* the AVX2 fp32 kernel can be asked for over the AVX-512 one */
    setenv("PRECIS_MMA_PATH", "avx2-f32", 1);
    CHECK_EQ_INT(precis_gemm_mma_path(), PRECIS_MMA_PATH_AVX2_F32);
  }
  unsetenv("PRECIS_MMA_PATH");
  CHECK_EQ_INT(precis_gemm_mma_path(), have_avx512() ? PRECIS_MMA_PATH_AVX512_F32 : precis_gemm_mma_path());
}

TEST(the_widths_differ_from_fp32_sums_and_each_other) {
  size_t rows = 8, n = 8, k = 256, diff2425 = 0, diff_sgemm = 0;
  float a[8 * 256], b[256 * 8], c24[64], c25[64];
  for (size_t i = 0; i < rows * k; i++) a[i] = draw(KIND_SPREAD);
  for (size_t i = 0; i < k * n; i++) b[i] = draw(KIND_SPREAD);
  precis_mma_shape s24 = shape_of(KIND_SPREAD, 24, 8), s25 = shape_of(KIND_SPREAD, 25, 16);
  precis_gemm_mma(a, b, c24, rows, n, k, &s24);
  precis_gemm_mma(a, b, c25, rows, n, k, &s25);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < n; j++) {
      float f = 0;
      for (size_t p = 0; p < k; p++) f += a[i * k + p] * b[p * n + j];
      diff2425 += bits_of(c24[i * n + j]) != bits_of(c25[i * n + j]);
      diff_sgemm += bits_of(f) != bits_of(c25[i * n + j]);
    }
  printf("24-bit/8 vs 25-bit/16: %zu of 64 differ; fp32 sequential sums vs 25-bit: %zu\n", diff2425, diff_sgemm);
  CHECK(diff2425 > 0 && diff_sgemm > 0);
}

RUN_TESTS(T(the_reference_follows_the_rule), T(vector_path_matches_the_reference), T(random_shapes_and_threads),
          T(subnormal_a_decides_the_block), T(block_sum_and_accumulator_past_two_to_the_31), T(zeros_next_to_a_wide_spread),
          T(cancellation_then_a_block_of_zeros), T(a_sum_below_fp32s_range_keeps_its_sign),
          T(random_cancellations_and_blocks_of_zeros),
          T(specials_take_the_reference), T(the_widths_differ_from_fp32_sums_and_each_other))
