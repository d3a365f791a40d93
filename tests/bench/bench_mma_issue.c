/* Where the tensor-core MMA model's time goes on this CPU (src/eval/cpu_gemm_mma.c, its AVX-512
 * kernel), against the floor the CPU's issue rate sets. One thread, time-stamp-counter cycles per
 * step p of a 4-row x 32-column tile (128 products), measured side by side in one run:
 *   - fma:   sgemm's micro-kernel step (8 zmm FMAs): what OpenBLAS runs near its peak;
 *   - model: the kernel's inner step alone (per row and 16 columns: multiply, exponent add,
 *            truncating conversion, int32 add; 32 zmm operations), operands in L1;
 *   - model without the conversion, multiply + add only, adds only: which operations bound it;
 *   - kernel: precis_gemm_mma itself (a 256 x 4096 x 576 bf16 call, sm_90 and sm_80 widths), its
 *            CPU time (all its threads) in counter cycles per 128 products: the inner step plus the
 *            exponent pass, the block ends, the packing and the threads' start.
 * The ratios printed are the floor of kernel / sgemm (model / fma) and the kernel's own overhead
 * over its inner step (kernel / model). Goal (bench_mma_chain's, issue 40): kernel / fma <= 4, the
 * kernel against sgemm where sgemm runs at its peak. x86-64 with AVX-512 only; elsewhere it says so
 * and exits 0.
 *
 *   bench_mma_issue [--report-only] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_verdict.h"
#include "eval/cpu_gemm_mma.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <x86intrin.h>

#define GOAL_RATIO 4.0
#define STEPS 64 /* p per pass: the tile's operands stay in L1 */
#define ROWS 4
#define TARGET_512 __attribute__((target("avx512f,avx512bw,fma")))

static float tile_b[STEPS * 32] __attribute__((aligned(64)));
static float tile_a[STEPS * ROWS] __attribute__((aligned(64)));

typedef enum { STEP_FMA, STEP_MODEL, STEP_NO_CONVERSION, STEP_MULTIPLY_ADD, STEP_ADDS, STEP_KINDS } step_kind;
static const char *const step_names[STEP_KINDS] = {"fma (sgemm's step)", "model's inner step",
                                                   "  without the conversion", "  multiply + add only",
                                                   "  adds only"};
static const int step_ops[STEP_KINDS] = {8, 32, 24, 16, 16};

/* `passes` passes over STEPS steps of one kind; the accumulators folded into the result so that
 * nothing is optimised away. */
static TARGET_512 uint32_t run_steps(step_kind kind, long passes) {
  __m512i s[ROWS][2], shift[ROWS][2];
  __m512 f[ROWS][2];
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < 2; v++) {
      s[r][v] = _mm512_setzero_si512();
      shift[r][v] = _mm512_set1_epi32((r * 2 + v) << 23);
      f[r][v] = _mm512_setzero_ps();
    }
  for (long pass = 0; pass < passes; pass++) {
    for (int p = 0; p < STEPS; p++) {
      __m512 b0 = _mm512_load_ps(tile_b + p * 32), b1 = _mm512_load_ps(tile_b + p * 32 + 16);
#pragma GCC unroll 4
      for (int r = 0; r < ROWS; r++) {
        __m512 a = _mm512_set1_ps(tile_a[p * ROWS + r]);
        switch (kind) {
        case STEP_FMA:
          f[r][0] = _mm512_fmadd_ps(a, b0, f[r][0]);
          f[r][1] = _mm512_fmadd_ps(a, b1, f[r][1]);
          break;
        case STEP_MODEL: {
          __m512i t0 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b0)), shift[r][0]);
          __m512i t1 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b1)), shift[r][1]);
          s[r][0] = _mm512_add_epi32(s[r][0], _mm512_cvttps_epi32(_mm512_castsi512_ps(t0)));
          s[r][1] = _mm512_add_epi32(s[r][1], _mm512_cvttps_epi32(_mm512_castsi512_ps(t1)));
          break;
        }
        case STEP_NO_CONVERSION: {
          __m512i t0 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b0)), shift[r][0]);
          __m512i t1 = _mm512_add_epi32(_mm512_castps_si512(_mm512_mul_ps(a, b1)), shift[r][1]);
          s[r][0] = _mm512_add_epi32(s[r][0], t0);
          s[r][1] = _mm512_add_epi32(s[r][1], t1);
          break;
        }
        case STEP_MULTIPLY_ADD:
          s[r][0] = _mm512_add_epi32(s[r][0], _mm512_castps_si512(_mm512_mul_ps(a, b0)));
          s[r][1] = _mm512_add_epi32(s[r][1], _mm512_castps_si512(_mm512_mul_ps(a, b1)));
          break;
        default: {
          __m512i a_bits = _mm512_castps_si512(a);
          s[r][0] = _mm512_add_epi32(s[r][0], _mm512_add_epi32(_mm512_castps_si512(b0), a_bits));
          s[r][1] = _mm512_add_epi32(s[r][1], _mm512_add_epi32(_mm512_castps_si512(b1), a_bits));
          break;
        }
        }
      }
    }
    __asm__ volatile("" ::: "memory");
  }
  __m512i x = _mm512_setzero_si512();
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < 2; v++) x = _mm512_xor_si512(_mm512_xor_si512(x, s[r][v]), _mm512_castps_si512(f[r][v]));
  return (uint32_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(x));
}

static double best_cycles_per_step(step_kind kind) {
  const long passes = 100000;
  volatile uint32_t sink = run_steps(kind, 1000);
  double best = 1e30;
  for (int rep = 0; rep < 7; rep++) {
    uint64_t t0 = __rdtsc();
    sink ^= run_steps(kind, passes);
    uint64_t t1 = __rdtsc();
    double c = (double)(t1 - t0) / ((double)passes * STEPS);
    if (c < best) best = c;
  }
  (void)sink;
  return best;
}

static double now_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Time-stamp-counter ticks per nanosecond, over 50 ms of the monotonic clock. */
static double tsc_per_ns(void) {
  double t0 = now_ns(CLOCK_MONOTONIC);
  uint64_t c0 = __rdtsc();
  while (now_ns(CLOCK_MONOTONIC) - t0 < 5e7) {
  }
  return (double)(__rdtsc() - c0) / (now_ns(CLOCK_MONOTONIC) - t0);
}

/* The kernel itself, a 256 x 4096 x 576 bf16 call: its CPU time (every thread it runs: the work)
 * in time-stamp-counter cycles per 128 products, the best of 5. */
static double kernel_cycles_per_step(const precis_mma_shape *shape, double ticks_per_ns) {
  const size_t m = 256, n = 4096, k = 576;
  float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b), *c = malloc(m * n * sizeof *c);
  double best = -1;
  if (a && b && c) {
    uint64_t s = 7; /* values of 12 bits or fewer: bf16's, the fp32 kernel's condition */
    for (size_t i = 0; i < m * k; i++) a[i] = (float)((s = s * 6364136223846793005ull + 1) >> 56) / 256.0f - 0.5f;
    for (size_t i = 0; i < k * n; i++) b[i] = (float)((s = s * 6364136223846793005ull + 1) >> 56) / 256.0f - 0.5f;
    precis_gemm_mma(a, b, c, m, n, k, shape);
    best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
      precis_gemm_mma(a, b, c, m, n, k, shape);
      double per = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0) * ticks_per_ns / ((double)m * (double)n * (double)k / 128.0);
      if (per < best) best = per;
    }
  }
  free(a), free(b), free(c);
  return best;
}

int main(int argc, char **argv) {
  bench_verdict v;
  bench_verdict_init(&v, &argc, argv);
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) {
    printf("bench_mma_issue: this CPU has no AVX-512 (F, BW): nothing to measure\n");
    return 0;
  }
  for (int i = 0; i < STEPS * 32; i++) tile_b[i] = 1.0f + (float)i * 1e-3f;
  for (int i = 0; i < STEPS * ROWS; i++) tile_a[i] = 0.5f + (float)i * 1e-3f;
  printf("one thread, time-stamp-counter cycles per step of a 4 x 32 tile (128 products); kernel path %s\n",
         precis_mma_path_name(precis_gemm_mma_path()));
  double cycles[STEP_KINDS];
  for (int kind = 0; kind < STEP_KINDS; kind++) {
    cycles[kind] = best_cycles_per_step((step_kind)kind);
    printf("  %-28s %6.2f cycles  (%2d zmm operations: %.2f a cycle)\n", step_names[kind], cycles[kind],
           step_ops[kind], step_ops[kind] / cycles[kind]);
  }
  const precis_mma_shape widths[2] = {{25, 16, -126, -126}, {24, 8, -126, -126}};
  const char *const width_names[2] = {"sm_90 25b/16", "sm_80 24b/8"};
  printf("floor of kernel / sgemm where sgemm runs at its peak: model / fma = %.2fx\n",
         cycles[STEP_MODEL] / cycles[STEP_FMA]);
  const double ticks_per_ns = tsc_per_ns();
  for (int w = 0; w < 2; w++) {
    double k = kernel_cycles_per_step(&widths[w], ticks_per_ns);
    if (k < 0) {
      printf("  kernel %s: out of memory\n", width_names[w]);
      bench_failed(&v);
      continue;
    }
    bool met = bench_goal(&v, k / cycles[STEP_FMA], NAN, GOAL_RATIO);
    printf("  kernel %s, 256 x 4096 x 576, its CPU time: %6.2f cycles: %.2fx its inner step, %.2fx the fma step %s\n",
           width_names[w], k, k / cycles[STEP_MODEL], k / cycles[STEP_FMA], met ? "ok" : "SLOW");
  }
  return bench_verdict_finish(&v);
}
#else
int main(int argc, char **argv) {
  (void)argc, (void)argv;
  printf("bench_mma_issue: x86-64 only: nothing to measure here\n");
  return 0;
}
#endif
