/* CPU conversion throughput over 256 MiB of fp32 input: fp32 -> fp16 (dispatched F16C and
 * portable), bf16, e4m3, and int8 with per-row scales (quantize alone, and scales + quantize),
 * each as GB/s and as a ratio to a memcpy of the same 256 MiB measured in the same run. Best of
 * several repetitions. GB/s counts bytes read plus bytes written, for memcpy too, so the ratio
 * compares memory traffic rates.
 *
 * Goals (floors on the ratio to memcpy; the portable f16 loop is shown, not judged): they sit about a
 * third below what a shared 2-core CI machine measures (f16 0.97, bf16 0.71, e4m3 0.31, int8 0.57),
 * so that a path that stops vectorizing, or an F16C dispatch that stops being taken, misses them.
 * The verdict (bench/bench_verdict.h) is computed from the measured ratios: exit 0 when all are met,
 * 1 when one is not (or nothing was measured); --report-only exits 0 on unmet goals (.ci/run).
 *
 * usage: bench_convert [MiB] [repetitions] [--report-only]     (defaults 256 and 5) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_verdict.h"
#include "numerics/format.h"
#include "numerics/quant.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct bench_ctx {
  const float *in;
  size_t n, rows, cols;
  void *out;
  float *scales;
  void *copy_dst;
} bench_ctx;

static void run_memcpy(bench_ctx *c) { memcpy(c->copy_dst, c->in, c->n * sizeof(float)); }
static void run_f16(bench_ctx *c) { precis_f32_to_f16_array(c->in, c->out, c->n); }
static void run_f16_portable(bench_ctx *c) { precis_f32_to_f16_array_portable(c->in, c->out, c->n); }
static void run_bf16(bench_ctx *c) { precis_f32_to_bf16_array(c->in, c->out, c->n); }
static void run_e4m3(bench_ctx *c) { precis_f32_to_e4m3_array(c->in, c->out, c->n); }
static void run_int8_quantize(bench_ctx *c) { (void)precis_int8_quantize_rows(c->in, c->rows, c->cols, c->scales, c->out); }
static void run_int8_scales_quantize(bench_ctx *c) {
  precis_int8_row_scales(c->in, c->rows, c->cols, c->scales);
  (void)precis_int8_quantize_rows(c->in, c->rows, c->cols, c->scales, c->out);
}

static double best_time(void (*fn)(bench_ctx *), bench_ctx *c, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    fn(c);
    double t = now_s() - t0;
    if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  bench_verdict verdict;
  bench_verdict_init(&verdict, &argc, argv);
  size_t mib = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (mib == 0 || reps <= 0) {
    fprintf(stderr, "usage: %s [MiB > 0] [repetitions > 0] [--report-only]\n", argv[0]);
    return 2;
  }
  size_t n = mib * 1024 * 1024 / sizeof(float);
  size_t cols = 8192, rows = n / cols;
  n = rows * cols;
  float *in = malloc(n * sizeof *in);
  void *out = malloc(n * sizeof(uint16_t));
  void *copy_dst = malloc(n * sizeof(float));
  float *scales = malloc(rows * sizeof *scales);
  if (!in || !out || !copy_dst || !scales) {
    fprintf(stderr, "bench_convert: cannot allocate %zu MiB of buffers\n", mib * 7 / 2);
    return 1;
  }
  uint32_t state = 1;
  for (size_t i = 0; i < n; i++) {
    state = state * 1664525u + 1013904223u;
    in[i] = ((float)(state >> 8) * 0x1p-24f - 0.5f) * 8.0f;
  }
  memset(out, 0, n * sizeof(uint16_t)); /* fault the pages in before timing */
  memset(copy_dst, 0, n * sizeof(float));
  precis_int8_row_scales(in, rows, cols, scales);

  bench_ctx ctx = {.in = in, .n = n, .rows = rows, .cols = cols, .out = out, .scales = scales, .copy_dst = copy_dst};
  double in_bytes = (double)n * sizeof(float);
  double t_copy = best_time(run_memcpy, &ctx, reps);
  double copy_gbs = 2.0 * in_bytes / t_copy / 1e9;
  printf("input: %zu fp32 values (%zu MiB), best of %d\n", n, mib, reps);
  printf("%-28s %9s %10s %12s %8s %8s\n", "operation", "ms", "GB/s", "input GB/s", "ratio", "goal");
  printf("%-28s %9.2f %10.2f %12.2f %8.2f\n", "memcpy", t_copy * 1e3, copy_gbs, in_bytes / t_copy / 1e9, 1.0);

  static const struct {
    const char *name;
    void (*fn)(bench_ctx *);
    double out_bytes_per_value;
    double min_ratio; /* NAN: not judged */
  } ops[] = {
      {"f32->f16 (dispatched)", run_f16, 2, 0.6},
      {"f32->f16 (portable)", run_f16_portable, 2, NAN},
      {"f32->bf16", run_bf16, 2, 0.45},
      {"f32->e4m3", run_e4m3, 1, 0.2},
      {"int8 quantize (row scales)", run_int8_quantize, 1, 0.35},
      {"int8 row scales + quantize", run_int8_scales_quantize, 1, 0.35},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    double t = best_time(ops[i].fn, &ctx, reps);
    /* scales + quantize reads the input twice */
    double reads = ops[i].fn == run_int8_scales_quantize ? 2.0 : 1.0;
    double traffic = reads * in_bytes + (double)n * ops[i].out_bytes_per_value;
    double gbs = traffic / t / 1e9;
    double ratio = gbs / copy_gbs;
    char goal[32] = "-";
    if (!isnan(ops[i].min_ratio))
      snprintf(goal, sizeof goal, ">= %.2f %s", ops[i].min_ratio,
               bench_goal(&verdict, ratio, ops[i].min_ratio, NAN) ? "met" : "NOT met");
    printf("%-28s %9.2f %10.2f %12.2f %8.2f %s\n", ops[i].name, t * 1e3, gbs, in_bytes / t / 1e9, ratio, goal);
  }
  free(in);
  free(out);
  free(copy_dst);
  free(scales);
  return bench_verdict_finish(&verdict);
}
