/* Benchmark of the tensor-core MMA chain (fp16/bf16/tf32 recipes on the cpu backend under a
 * --target, src/eval/cpu_gemm_mma.c): for each shape, in one run, side by side (the two calls
 * alternating, medians of the repetitions), OpenBLAS sgemm of the same shape (what these recipes
 * cost without the accumulator model: plain fp32 sums) and the kernel the library takes, and the
 * ratio kernel / sgemm, twice:
 *   - wall: both on every core (sgemm's threads, the kernel's), wall-clock time, the kernel first
 *     after a pause (OpenBLAS's idle workers spin for a while after each threaded call: below) and
 *     an untimed call;
 *   - cpu: the work, CPU time of the process: sgemm on one thread, the kernel as it runs (its
 *     threads do not spin), both timed after the wall-clock pass's OpenBLAS workers have stopped
 *     spinning (a pause of 0.2 s: their spin would count).
 * Goal: the cpu ratio <= 4x for every shape (wide outputs like an lm_head, m = 1, k that is odd or
 * not a multiple of the block, small shapes). The goal is on the work because on a shared,
 * oversubscribed machine the wall clock penalises the longer call (a 1 ms sgemm runs within one
 * time slice, a 20 ms kernel waits between several); on an idle machine the two agree. On a corner
 * of every output (4 rows x 512 columns) the scalar reference runs too: a case whose bits differ
 * fails (exit 1). Where the library takes the AVX-512 fp32 kernel, the AVX2 one (forced by a cap)
 * is timed beside it in the same alternation (cpu time, its ratio to sgemm and its output's bits
 * against the reference's too): the gain of the AVX-512 form, measured side by side.
 *
 *   bench_mma_chain [--report-only] [--quick] [M N K]
 *
 * Without a shape: the list below (about 1.5 minutes here). --quick: the smaller half (about 40 s).
 * The operands are bf16 (and fp16 for one shape) of a seeded uniform draw; sm_90's width (25 bits,
 * 16 products per dot-add) and sm_80's (24 bits, 8). --report-only: an unmet ratio does not set the
 * exit status (tests/bench/bench_verdict.h). */
#include <cblas.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_verdict.h"
#include "eval/cpu_gemm_mma.h"
#include "eval/timing.h"
#include "numerics/format.h"

#define GOAL_RATIO 4.0
#define MAX_REPS 7

typedef struct bench_shape {
  long m, n, k;
  const char *why;
  int quick;
} bench_shape;

static const bench_shape default_shapes[] = {
    {1024, 1024, 1024, "square (the 32x of issue 40)", 0},
    {128, 4096, 4096, "the default run's largest float call", 0},
    {64, 49152, 576, "lm_head, 64 tokens, hidden 576", 0},
    {1536, 49152, 576, "lm_head, 24 windows of 64 tokens", 0},
    {64, 49152, 960, "lm_head, hidden 960", 0},
    {1, 49152, 576, "lm_head, one token", 1},
    {1, 4096, 4096, "m = 1", 1},
    {33, 1000, 999, "odd k, k not a multiple of the block", 1},
    {7, 4097, 577, "odd everything", 1},
    {96, 1536, 576, "an MLP projection (576 -> 1536)", 1},
    {16, 64, 64, "small", 1},
    {4, 8, 8, "tiny", 1},
};

void openblas_set_num_threads(int num_threads);

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void pause_for_openblas_spin(void) {
  nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000}, NULL);
}

static double median(double *t, int count) {
  for (int i = 1; i < count; i++)
    for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[count / 2];
}

static void fill(float *x, size_t count, uint64_t seed, int fp16) {
  uint64_t s = seed;
  for (size_t i = 0; i < count; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 2.0f;
  }
  if (fp16) precis_round_f16_array(x, x, count);
  else precis_round_bf16_array(x, x, count);
}

/* The reference on the corner rows [0, rows) x columns [0, cols) against the kernel's output. */
static int corner_identical(const float *a, const float *b, const float *c, size_t m, size_t n, size_t k,
                            const precis_mma_shape *shape) {
  size_t rows = m < 4 ? m : 4, cols = n < 512 ? n : 512;
  float *bc = malloc(k * cols * sizeof *bc), *ref = malloc(rows * cols * sizeof *ref);
  int same = bc && ref;
  if (same) {
    for (size_t p = 0; p < k; p++) memcpy(bc + p * cols, b + p * n, cols * sizeof *bc);
    precis_gemm_mma_reference(a, bc, ref, rows, cols, k, shape);
    for (size_t i = 0; i < rows && same; i++) same = memcmp(ref + i * cols, c + i * n, cols * sizeof *ref) == 0;
  }
  free(bc);
  free(ref);
  return same;
}

/* One shape: sgemm and the kernel alternating; prints a line per width, returns 0 or -1 (no memory). */
static int bench_one(bench_verdict *v, long m, long n, long k, const char *why, int fp16) {
  size_t mk = (size_t)(m * k), kn = (size_t)(k * n), mn = (size_t)(m * n);
  float *a = malloc(mk * sizeof *a), *b = malloc(kn * sizeof *b), *c = malloc(mn * sizeof *c),
        *c32 = malloc(mn * sizeof *c32);
  if (!a || !b || !c || !c32) {
    free(a), free(b), free(c), free(c32);
    printf("%ldx%ldx%ld: out of memory\n", m, n, k);
    bench_failed(v);
    return -1;
  }
  fill(a, mk, 12345, fp16);
  fill(b, kn, 67890, fp16);
  int emin = fp16 ? -14 : -126;
  const precis_mma_shape widths[2] = {{25, 16, emin, emin}, {24, 8, emin, emin}};
  const char *const names[2] = {"sm_90 25b/16", "sm_80 24b/8"};
  /* repetitions: as many as fit in about 1 s of sgemm-equivalent work, 3 to MAX_REPS; tiny shapes
   * time a batch of calls */
  double flops = 2.0 * (double)m * (double)n * (double)k;
  int batch = flops < 1e7 ? (int)(1e7 / flops) : 1;
  const int second = precis_gemm_mma_path() == PRECIS_MMA_PATH_AVX512_F32;
  for (int w = 0; w < 2; w++) {
    double ts[MAX_REPS], tk[MAX_REPS], cs[MAX_REPS], ck[MAX_REPS], c2[MAX_REPS];
    int same2 = 1;
    int reps = flops > 5e10 ? 1 : flops > 2e10 ? 3 : MAX_REPS;
    /* OpenBLAS's workers spin (sched_yield) for about 2^28 time-stamp cycles after a threaded call
     * before they sleep: on the cores the kernel's threads want, and in the process's CPU time (it
     * once doubled a single-threaded sgemm's). So the kernel runs first in each wall-clock pair,
     * after a pause that outlasts the spin, and the CPU-time pass, one OpenBLAS thread, after one. */
    openblas_set_num_threads(0); /* every core */
    for (int r = 0; r < reps; r++) {
      pause_for_openblas_spin();
      /* once untimed: the first call after an idle pause ran at half speed (cores idle, caches cold) */
      precis_gemm_mma(a, b, c, (size_t)m, (size_t)n, (size_t)k, &widths[w]);
      double t0 = precis_now_ms();
      for (int i = 0; i < batch; i++) precis_gemm_mma(a, b, c, (size_t)m, (size_t)n, (size_t)k, &widths[w]);
      tk[r] = (precis_now_ms() - t0) / batch;
      t0 = precis_now_ms();
      for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n, 0.0f,
                    c32, (int)n);
      ts[r] = (precis_now_ms() - t0) / batch;
    }
    openblas_set_num_threads(1);
    pause_for_openblas_spin();
    for (int r = 0; r < reps; r++) {
      double t0 = cpu_ms();
      for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n, 0.0f,
                    c32, (int)n);
      cs[r] = (cpu_ms() - t0) / batch;
      t0 = cpu_ms();
      for (int i = 0; i < batch; i++) precis_gemm_mma(a, b, c, (size_t)m, (size_t)n, (size_t)k, &widths[w]);
      ck[r] = (cpu_ms() - t0) / batch;
      if (second) {
        t0 = cpu_ms();
        for (int i = 0; i < batch; i++)
          precis_gemm_mma_capped(a, b, c32, (size_t)m, (size_t)n, (size_t)k, &widths[w], PRECIS_MMA_PATH_AVX2_F32);
        c2[r] = (cpu_ms() - t0) / batch;
      }
    }
    if (second) same2 = corner_identical(a, b, c32, (size_t)m, (size_t)n, (size_t)k, &widths[w]);
    openblas_set_num_threads(0);
    double sgemm_ms = median(ts, reps), kernel_ms = median(tk, reps);
    double sgemm_cpu = median(cs, reps), kernel_cpu = median(ck, reps), ratio = kernel_cpu / sgemm_cpu;
    int same = corner_identical(a, b, c, (size_t)m, (size_t)n, (size_t)k, &widths[w]);
    bool met = bench_goal(v, ratio, NAN, GOAL_RATIO);
    if (!same || !same2) bench_failed(v);
    char avx2[64] = "";
    if (second) snprintf(avx2, sizeof avx2, " | avx2-f32 %9.3f ms %5.2fx", median(c2, reps), median(c2, reps) / sgemm_cpu);
    printf("%5ldx%6ldx%5ld %-4s %-12s wall: sgemm %9.3f ms kernel %9.3f ms %5.2fx | cpu: sgemm %9.3f ms kernel %9.3f "
           "ms %5.2fx %s%s | bits %s  (%s)\n",
           m, n, k, fp16 ? "fp16" : "bf16", names[w], sgemm_ms, kernel_ms, kernel_ms / sgemm_ms, sgemm_cpu, kernel_cpu,
           ratio, met ? "ok  " : "SLOW", avx2, same && same2 ? "= reference" : "DIFFER from the reference", why);
    fflush(stdout);
  }
  free(a), free(b), free(c), free(c32);
  return 0;
}

int main(int argc, char **argv) {
  bench_verdict v;
  bench_verdict_init(&v, &argc, argv);
  int quick = 0, out = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else argv[out++] = argv[i];
  }
  argc = out;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  printf("MMA chain (src/eval/cpu_gemm_mma.c, path %s) vs OpenBLAS sgemm, alternating, medians; goal: cpu ratio <= "
         "%.0fx; load average %.2f\n",
         precis_mma_path_name(precis_gemm_mma_path()), GOAL_RATIO, load[0]);
  if (argc == 4) {
    long m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
    if (m < 1 || n < 1 || k < 1 || m > 65536 || n > 65536 || k > 65536) {
      fprintf(stderr, "bench_mma_chain: M, N, K must lie in 1..65536\n");
      return 2;
    }
    bench_one(&v, m, n, k, "given", 0);
  } else if (argc == 1) {
    for (size_t s = 0; s < sizeof default_shapes / sizeof default_shapes[0]; s++)
      if (!quick || default_shapes[s].quick)
        bench_one(&v, default_shapes[s].m, default_shapes[s].n, default_shapes[s].k, default_shapes[s].why, 0);
    bench_one(&v, 128, 1536, 576, "fp16 operands (emin -14)", 1);
  } else {
    fprintf(stderr, "usage: bench_mma_chain [--report-only] [--quick] [M N K]\n");
    return 2;
  }
  return bench_verdict_finish(&v);
}
