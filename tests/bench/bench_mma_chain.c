/* Benchmark of the tensor-core MMA chain (fp16/bf16/tf32 recipes on the cpu backend under a
 * --target, src/eval/cpu_gemm_mma.c), in one run, side by side: OpenBLAS sgemm of the same shape
 * (what these recipes cost before: plain fp32 sums), the AVX2 kernel (the ratio chain / sgemm) and,
 * on a slice of the rows, the scalar reference (bit identity of the two paths checked there).
 *
 *   bench_mma_chain [M N K]        default 128 4096 4096, the largest float call of the default run
 *
 * Medians of 3 for sgemm and the kernel; bf16 inputs, sm_90's width (25 bits, 16 products per
 * dot-add) and sm_80's (24 bits, 8). */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/cpu_gemm_mma.h"
#include "eval/timing.h"
#include "numerics/format.h"

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
    fprintf(stderr, "usage: bench_mma_chain [M N K]\n");
    return 2;
  }
  if (m < 1 || n < 1 || k < 1 || m > 65536 || n > 65536 || k > 65536) {
    fprintf(stderr, "bench_mma_chain: M, N, K must lie in 1..65536\n");
    return 2;
  }
  size_t mk = (size_t)(m * k), kn = (size_t)(k * n), mn = (size_t)(m * n);
  float *a = malloc(mk * sizeof *a), *b = malloc(kn * sizeof *b);
  float *fast = malloc(mn * sizeof *fast), *ref = malloc(mn * sizeof *ref), *c32 = malloc(mn * sizeof *c32);
  if (!a || !b || !fast || !ref || !c32) {
    fprintf(stderr, "bench_mma_chain: out of memory\n");
    return 1;
  }
  uint64_t s = 12345;
  for (size_t i = 0; i < mk + kn; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float x = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5) * 2.0f;
    if (i < mk) a[i] = x;
    else b[i - mk] = x;
  }
  precis_round_bf16_array(a, a, mk);
  precis_round_bf16_array(b, b, kn);

  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = precis_now_ms();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n, 0.0f, c32,
                (int)n);
    t[r] = precis_now_ms() - t0;
  }
  double sgemm_ms = median3(t);
  printf("bf16 %ldx%ldx%ld (fastest path here: %s; threads over columns)\n", m, n, k,
         precis_mma_path_name(precis_gemm_mma_path()));
  printf("  OpenBLAS sgemm (plain fp32 sums, before): %10.1f ms\n", sgemm_ms);
  static const precis_mma_shape shapes[2] = {{25, 16, -126, -126}, {24, 8, -126, -126}};
  static const char *const names[2] = {"sm_90 (25 bits, k 16)", "sm_80 (24 bits, k 8) "};
  int identical = 1;
  size_t slice = m < 8 ? (size_t)m : 8; /* the reference on 8 rows: ~1 s at the default shape */
  for (int v = 0; v < 2; v++) {
    for (int r = 0; r < REPS; r++) {
      double t0 = precis_now_ms();
      precis_gemm_mma(a, b, fast, (size_t)m, (size_t)n, (size_t)k, &shapes[v]);
      t[r] = precis_now_ms() - t0;
    }
    double chain_ms = median3(t);
    double t0 = precis_now_ms();
    precis_gemm_mma_reference(a, b, ref, slice, (size_t)n, (size_t)k, &shapes[v]);
    double ref_ms = (precis_now_ms() - t0) * (double)m / (double)slice;
    int same = memcmp(fast, ref, slice * (size_t)n * sizeof *fast) == 0;
    identical &= same;
    size_t differ = 0;
    for (size_t i = 0; i < mn; i++) differ += memcmp(&fast[i], &c32[i], sizeof *fast) != 0;
    printf("  MMA chain %s:       %10.1f ms   %5.1fx the sgemm time; scalar reference %8.1f ms (%zu rows, "
           "scaled) %5.1fx; bit-identical: %s; %.1f%% of outputs differ from sgemm's\n",
           names[v], chain_ms, chain_ms / sgemm_ms, ref_ms, slice, ref_ms / chain_ms, same ? "yes" : "NO",
           100.0 * (double)differ / (double)mn);
  }
  free(a);
  free(b);
  free(fast);
  free(ref);
  free(c32);
  return identical ? 0 : 1;
}
