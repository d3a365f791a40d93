/* Throughput of each quantizer of quantize.h (scales and codes, one call of precis_quantize) on a
 * 4096-column fp32 matrix, as a ratio to a memcpy of the same input bytes in the same run:
 * ratio = t(memcpy of the input) / t(quantize). Best of several repetitions. The goal (issue 16)
 * is a ratio >= 0.3 for every quantizer; the verdict line says whether each met it. Exit 0 when
 * every quantizer was measured (whatever the verdict), 1 when nothing could be measured.
 * The verdict uses wall-clock times. A second ratio from the thread's CPU time is printed too: on a
 * shared machine the wall clock also counts the time the thread waited for a core, and the CPU
 * time ratio is then the better estimate of what a quiet machine would show.
 *
 * usage: bench_quantize [MiB] [repetitions]     (defaults 64 and 3) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numerics/quantize.h"
#include "base/status.h"

#define GOAL 0.3

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 64;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  if (mib == 0 || reps <= 0) {
    fprintf(stderr, "usage: %s [MiB > 0] [repetitions > 0]\n", argv[0]);
    return 2;
  }
  const size_t cols = 4096;
  size_t rows = mib * 1024 * 1024 / sizeof(float) / cols;
  if (rows < 128) rows = 128;
  size_t n = rows * cols;
  float *in = malloc(n * sizeof *in), *copy = malloc(n * sizeof *copy);
  uint8_t *codes = malloc(n);
  float *scales = malloc(n * sizeof *scales); /* the most scales any granularity needs */
  uint8_t *scale_codes = malloc(n), *zeros = malloc(n);
  if (!in || !copy || !codes || !scales || !scale_codes || !zeros) {
    fprintf(stderr, "bench_quantize: cannot allocate buffers for %zu MiB of input\n", mib);
    return 1;
  }
  uint32_t state = 1;
  for (size_t i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    in[i] = ((float)(state >> 8) * 0x1p-24f - 0.5f) * ((i % cols) % 512 == 7 ? 100.0f : 4.0f);
  }
  memset(copy, 0, n * sizeof *copy); /* fault the pages in before timing */
  memset(codes, 0, n);
  double t_copy = 1e30, c_copy = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s(), c0 = cpu_s();
    memcpy(copy, in, n * sizeof *in);
    double t = now_s() - t0, c = cpu_s() - c0;
    t_copy = t < t_copy ? t : t_copy;
    c_copy = c < c_copy ? c : c_copy;
  }
  printf("input: %zu x %zu fp32 (%.0f MiB), best of %d; memcpy %.2f ms (%.2f GB/s read, %.2f ms CPU)\n", rows,
         cols, (double)n * 4 / 1048576.0, reps, t_copy * 1e3, (double)n * 4 / t_copy / 1e9, c_copy * 1e3);
  printf("%-34s %9s %10s %8s %9s %s\n", "quantizer", "ms", "input GB/s", "ratio", "cpu ratio", "goal");

  static const struct {
    const char *name;
    precis_quant_desc d;
  } cases[] = {
      {"a=e4m3@tensor", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A}},
      {"a=e4m3@row", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A}},
      {"b=e4m3@col", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_COL, 0, 0, 0, PRECIS_OPERAND_B}},
      {"a=e4m3@k128", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 128, 0, 0, PRECIS_OPERAND_A}},
      {"b=e4m3@128x128", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_BLOCK, 128, 128, 0, PRECIS_OPERAND_B}},
      {"a=e5m2@row", {PRECIS_FMT_E5M2, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A}},
      {"a=e4m3@mx", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A}},
      {"b=e4m3@mx", {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_B}},
      {"a=e2m1@mx", {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A}},
      {"a=e2m1@mx-rceil", {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_MX_RCEIL, 0, 0, 0, PRECIS_OPERAND_A}},
      {"a=e2m1@nv", {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_A}},
      {"b=e2m1@nv", {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_B}},
      {"a=s8@row (symmetric 127)", {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_ROW, 0, 0, PRECIS_QUANT_INT_SYMMETRIC,
                                    PRECIS_OPERAND_A}},
      {"b=s8@col (symmetric 127.5)", {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_COL, 0, 0, PRECIS_QUANT_INT_SYMMETRIC_HALF,
                                      PRECIS_OPERAND_B}},
      {"b=s4@k128", {PRECIS_FMT_S4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_B}},
      {"b=u4@k128 (GPTQ asymmetric)", {PRECIS_FMT_U4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_ASYMMETRIC,
                                       PRECIS_OPERAND_B}},
  };
  size_t measured = 0, met = 0, total = sizeof cases / sizeof cases[0];
  double worst = 1e30;
  const char *worst_name = "";
  for (size_t c = 0; c < total; c++) {
    precis_quant_tensor q = {.codes = codes, .scales = scales, .scale_codes = scale_codes, .zero_points = zeros};
    double best = 1e30, best_cpu = 1e30;
    precis_status st = PRECIS_OK;
    for (int r = 0; r < reps && st == PRECIS_OK; r++) {
      double t0 = now_s(), c0 = cpu_s();
      st = precis_quantize(&cases[c].d, in, rows, cols, &q);
      double t = now_s() - t0, ct = cpu_s() - c0;
      best = t < best ? t : best;
      best_cpu = ct < best_cpu ? ct : best_cpu;
    }
    if (st != PRECIS_OK) {
      printf("%-34s failed: %s\n", cases[c].name, precis_last_error());
      continue;
    }
    double ratio = t_copy / best;
    measured++;
    met += ratio >= GOAL;
    if (ratio < worst) worst = ratio, worst_name = cases[c].name;
    printf("%-34s %9.2f %10.2f %8.2f %9.2f %s\n", cases[c].name, best * 1e3, (double)n * 4 / best / 1e9, ratio,
           c_copy / best_cpu, ratio >= GOAL ? "met" : "BELOW");
  }
  if (measured == 0) {
    printf("verdict: nothing measured\n");
    return 1;
  }
  printf("verdict: %zu of %zu quantizers at >= %.1f x memcpy; slowest %s at %.2f x%s\n", met, measured, GOAL,
         worst_name, worst, measured < total ? " (some failed to run)" : "");
  free(in);
  free(copy);
  free(codes);
  free(scales);
  free(scale_codes);
  free(zeros);
  return measured == total ? 0 : 1;
}
