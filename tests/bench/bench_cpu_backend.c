/* Benchmark of the cpu backend against the raw BLAS calls it is built on, measured side by side in
 * one run (issue 5): emulated fp16 and bf16 at 1024^3 against a raw sgemm of the same shape (goal: at
 * most 1.3x its time), int8 against dgemm (goal: at most 1.3x), and optionally the wall time of a
 * whole `precis run` of the default preset.
 *
 *   bench_cpu_backend [N] [--default-run PATH_TO_PRECIS] [--report-only]
 *
 * The verdict (bench/bench_verdict.h) is computed from the measured ratios: exit 0 when every goal
 * is met, 1 when one is not (or nothing was measured); --report-only keeps the verdict printed but
 * exits 0 on unmet timing goals (.ci/run's short report mode).
 *
 * Each figure is the median of the backend's own timing loop (the GEMM in the recipe's arithmetic)
 * and, separately, that plus the one-off input conversion, so that both views are visible. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "bench/bench_verdict.h"
#include "numerics/recipe.h"
#include "eval/timing.h"

static double median_of(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double raw_sgemm_ms(const float *a, const float *b, float *c, int n, int reps) {
  double t[64];
  for (int r = 0; r < reps; r++) {
    double t0 = precis_now_ms();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    t[r] = precis_now_ms() - t0;
  }
  return median_of(t, reps);
}

static double raw_dgemm_ms(const double *a, const double *b, double *c, int n, int reps) {
  double t[64];
  for (int r = 0; r < reps; r++) {
    double t0 = precis_now_ms();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
    t[r] = precis_now_ms() - t0;
  }
  return median_of(t, reps);
}

int main(int argc, char **argv) {
  bench_verdict verdict;
  bench_verdict_init(&verdict, &argc, argv);
  int n = 1024;
  const char *precis_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--default-run") == 0 && i + 1 < argc) precis_path = argv[++i];
    else n = atoi(argv[i]);
  }
  if (n < 16 || n > 8192) {
    fprintf(stderr, "usage: bench_cpu_backend [N (16..8192)] [--default-run PATH_TO_PRECIS] [--report-only]\n");
    return 2;
  }
  size_t count = (size_t)n * (size_t)n;
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b), *c = malloc(count * sizeof *c);
  double *ad = malloc(count * sizeof *ad), *bd = malloc(count * sizeof *bd), *cd = malloc(count * sizeof *cd);
  if (!a || !b || !c || !ad || !bd || !cd) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  unsigned s = 12345;
  for (size_t i = 0; i < count; i++) {
    s = s * 1664525u + 1013904223u;
    a[i] = (float)((double)(s >> 8) / 16777216.0 - 0.5);
    s = s * 1664525u + 1013904223u;
    b[i] = (float)((double)(s >> 8) / 16777216.0 - 0.5);
    ad[i] = (double)(int)(a[i] * 254);
    bd[i] = (double)(int)(b[i] * 254);
  }
  precis_workload_info w = {.name = "bench", .kind = "gemm", .description = "", .a_dist = "uniform",
                            .b_dist = "uniform", .m = n, .n = n, .k = n, .batch = 1};
  precis_workload_data d = {.a = a, .b = b};
  precis_case_options o;
  precis_case_options_default(&o);
  o.min_samples = 7;
  o.max_samples = 15;
  o.max_time_ms = 3000;
  const precis_backend *cpu = precis_backend_cpu();
  void *ctx = NULL;
  if (cpu->open(&ctx, &o) != PRECIS_OK) {
    fprintf(stderr, "cpu backend: %s\n", precis_last_error());
    return 1;
  }

  const int reps = 9;
  raw_sgemm_ms(a, b, c, n, 2); /* warm-up: OpenBLAS threads and page faults */
  printf("cpu backend vs raw BLAS at %d^3 (median of the backend's timing loop; +conv adds the one-off conversion)\n", n);
  printf("%-10s %12s %12s %12s %10s %10s\n", "recipe", "backend ms", "+conv ms", "raw ms", "ratio", "goal");
  const char *names[] = {"fp32", "fp16", "bf16", "int8"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    precis_recipe recipe;
    if (precis_recipe_parse(names[i], &recipe) != PRECIS_OK) return 2;
    const precis_recipe *r = &recipe;
    bool integer = r->spec.acc == PRECIS_FMT_I32;
    precis_case_output out;
    precis_case_output_init(&out);
    if (cpu->run_case(ctx, &r->spec, &w, &d, &o, &out) != PRECIS_OK || out.status != PRECIS_ROW_OK) {
      fprintf(stderr, "%s: %s\n", r->name, out.reason);
      bench_failed(&verdict);
      precis_case_output_free(&out);
      continue;
    }
    /* The raw reference right after, so that both see the same machine state. */
    double raw = integer ? raw_dgemm_ms(ad, bd, cd, n, reps) : raw_sgemm_ms(a, b, c, n, reps);
    double ratio = out.time.median_ms / raw;
    /* fp32 is the plain sgemm itself: its ratio is shown, not judged. */
    bool judged = !r->preset->baseline;
    bool met = !judged || bench_goal(&verdict, ratio, NAN, 1.3);
    printf("%-10s %12.3f %12.3f %12.3f %10.3f %10s %s\n", r->name, out.time.median_ms,
           out.time.median_ms + out.time.convert_ms, raw, ratio, judged ? "<= 1.3" : "-",
           judged ? (met ? "met" : "NOT met") : "");
    precis_case_output_free(&out);
  }
  cpu->close(ctx);
  if (precis_path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s run -o /tmp/precis-bench-default-run --quiet > /dev/null", precis_path);
    double t0 = precis_now_ms();
    int rc = system(cmd);
    printf("whole default run (%s run, all recipes): %.1f s wall, exit %d\n", precis_path, (precis_now_ms() - t0) / 1e3,
           rc);
    if (rc != 0) bench_failed(&verdict);
  }
  free(a), free(b), free(c), free(ad), free(bd), free(cd);
  return bench_verdict_finish(&verdict);
}
