/* Benchmark of the fp16-accumulation emulation (recipe fp16acc16 on the cpu backend), in one run:
 * each vectorized path this CPU has (AVX-512, AVX2) against the scalar reference it replaced (goal:
 * at least 10x faster) and against a raw OpenBLAS sgemm of the same shape (what every other float
 * recipe costs).
 *
 *   bench_fp16acc [M N K]        default 128 4096 4096, the largest fp16acc16 call of the default run
 *
 * The kernel's and sgemm's figures are medians of 3; the reference runs once (3.6 s at the default
 * shape). The outputs of the two fp16acc paths are compared bit for bit. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/cpu_gemm_fp16acc.h"
#include "numerics/format.h"
#include "eval/timing.h"

#define REPS 3

static double median3(double *t) {
  for (int i = 1; i < REPS; i++)
    for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
      double x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[REPS / 2];
}

int main(int argc, char **argv) {
  long m = 128, n = 4096, k = 4096;
  if (argc == 4) {
    m = atol(argv[1]);
    n = atol(argv[2]);
    k = atol(argv[3]);
  } else if (argc != 1) {
    fprintf(stderr, "usage: bench_fp16acc [M N K]\n");
    return 2;
  }
  if (m < 1 || n < 1 || k < 1 || m > 65536 || n > 65536 || k > 65536) {
    fprintf(stderr, "bench_fp16acc: M, N, K must lie in 1..65536\n");
    return 2;
  }
  size_t mk = (size_t)(m * k), kn = (size_t)(k * n), mn = (size_t)(m * n);
  float *a = malloc(mk * sizeof *a), *b = malloc(kn * sizeof *b);
  float *fast = malloc(mn * sizeof *fast), *ref = malloc(mn * sizeof *ref), *c32 = malloc(mn * sizeof *c32);
  double *scratch = malloc((size_t)n * sizeof *scratch);
  if (!a || !b || !fast || !ref || !c32 || !scratch) {
    fprintf(stderr, "bench_fp16acc: out of memory\n");
    return 1;
  }
  uint64_t s = 12345;
  for (size_t i = 0; i < mk + kn; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float x = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 2.0f;
    if (i < mk) a[i] = x;
    else b[i - mk] = x;
  }
  precis_round_f16_array(a, a, mk);
  precis_round_f16_array(b, b, kn);

  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = precis_now_ms();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n, 0.0f, c32,
                (int)n);
    t[r] = precis_now_ms() - t0;
  }
  double sgemm_ms = median3(t);
  double t0 = precis_now_ms();
  precis_gemm_fp16acc_reference(a, b, ref, (size_t)m, (size_t)n, (size_t)k, scratch);
  double ref_ms = precis_now_ms() - t0;

  unsetenv("PRECIS_FP16ACC_PATH");
  precis_fp16acc_path best = precis_gemm_fp16acc_path();
  printf("fp16acc16 %ldx%ldx%ld (fastest path here: %s; threads over rows)\n", m, n, k, precis_fp16acc_path_name(best));
  printf("  scalar reference (before):   %10.1f ms\n", ref_ms);
  int identical = 1;
  for (int path = best; path >= PRECIS_FP16ACC_AVX2; path--) {
    setenv("PRECIS_FP16ACC_PATH", precis_fp16acc_path_name((precis_fp16acc_path)path), 1);
    for (int r = 0; r < REPS; r++) {
      t0 = precis_now_ms();
      precis_gemm_fp16acc(a, b, fast, (size_t)m, (size_t)n, (size_t)k, scratch);
      t[r] = precis_now_ms() - t0;
    }
    double fast_ms = median3(t);
    int same = memcmp(fast, ref, mn * sizeof *fast) == 0;
    identical &= same;
    printf("  fp16acc16 kernel, %-7s %10.1f ms   %5.1fx faster than before%s, %5.1fx the sgemm time; bit-identical: %s\n",
           precis_fp16acc_path_name((precis_fp16acc_path)path), fast_ms, ref_ms / fast_ms,
           path == (int)best ? " (goal >= 10x)" : "", fast_ms / sgemm_ms, same ? "yes" : "NO");
  }
  unsetenv("PRECIS_FP16ACC_PATH");
  printf("  OpenBLAS sgemm:              %10.1f ms\n", sgemm_ms);
  free(a);
  free(b);
  free(fast);
  free(ref);
  free(c32);
  free(scratch);
  return identical ? 0 : 1;
}
