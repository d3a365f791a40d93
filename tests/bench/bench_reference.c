/* Reference generation (precis gen's c_ref and ab_abs path) against a raw OpenBLAS dgemm of the
 * same shape, measured in the same run. The ratio raw/reference is the fraction of dgemm speed the
 * reference path keeps (goal >= 0.9 for c_ref): the float32 -> float64 widening must stay cheap
 * next to the O(n^3) product.
 *
 * usage: bench_reference [N=2048] [repeats=3] [--report-only]
 *
 * The verdict (bench/bench_verdict.h) is computed from the measured ratio: exit 0 when it is met, 1
 * when not (or nothing was measured); --report-only exits 0 on an unmet ratio (.ci/run). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/bench_verdict.h"
#include "data/distributions.h"
#include "data/generate.h"
#include "data/rng.h"

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of every thread of the process: on a machine shared with other jobs it is less
 * disturbed than the wall clock, which waits for the cores. */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv) {
  bench_verdict verdict;
  bench_verdict_init(&verdict, &argc, argv);
  const int n = argc > 1 ? atoi(argv[1]) : 2048, repeats = argc > 2 ? atoi(argv[2]) : 3;
  if (n <= 0 || repeats <= 0) {
    fprintf(stderr, "usage: bench_reference [N] [repeats] [--report-only]\n");
    return 2;
  }
  const size_t count = (size_t)n * (size_t)n;
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
  double *a64 = malloc(count * sizeof *a64), *b64 = malloc(count * sizeof *b64), *c = malloc(count * sizeof *c),
         *ab = malloc(count * sizeof *ab);
  if (!a || !b || !a64 || !b64 || !c || !ab) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  precis_dist d;
  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  precis_rng_key key = precis_rng_key_for(1, "bench");
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, n, n, a);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, 1, n, n, b);
  for (size_t i = 0; i < count; i++) {
    a64[i] = a[i];
    b64[i] = b[i];
  }
  /* warm-up: OpenBLAS threads, page faults */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a64, n, b64, n, 0.0, c, n);
  precis_reference_compute(a, b, 1, n, n, n, false, c, NULL);

  double raw = 1e30, ref_c = 1e30, ref_both = 1e30, raw_cpu = 1e30, ref_c_cpu = 1e30;
  for (int r = 0; r < repeats; r++) {
    double u0 = cpu_now(), t0 = now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a64, n, b64, n, 0.0, c, n);
    double t1 = now(), u1 = cpu_now();
    precis_reference_compute(a, b, 1, n, n, n, false, c, NULL);
    double t2 = now(), u2 = cpu_now();
    precis_reference_compute(a, b, 1, n, n, n, false, c, ab);
    double t3 = now();
    if (t1 - t0 < raw) raw = t1 - t0;
    if (t2 - t1 < ref_c) ref_c = t2 - t1;
    if (t3 - t2 < ref_both) ref_both = t3 - t2;
    if (u1 - u0 < raw_cpu) raw_cpu = u1 - u0;
    if (u2 - u1 < ref_c_cpu) ref_c_cpu = u2 - u1;
  }
  const double flops = 2.0 * (double)n * (double)n * (double)n;
  printf("bench_reference: %dx%dx%d, best of %d, %s\n", n, n, n, repeats, openblas_get_config());
  printf("  raw cblas_dgemm (float64 inputs)   %8.3f s  %7.1f GFLOP/s\n", raw, flops / raw * 1e-9);
  bool met = bench_goal(&verdict, raw / ref_c, 0.9, NAN);
  printf("  reference c_ref (widen + dgemm)    %8.3f s  %7.1f GFLOP/s  ratio raw/ref = %.3f (goal >= 0.9: %s)\n", ref_c,
         flops / ref_c * 1e-9, raw / ref_c, met ? "met" : "NOT met");
  printf("  cpu time (all threads): raw %.3f s, c_ref %.3f s, ratio raw/ref = %.3f (not judged)\n", raw_cpu, ref_c_cpu,
         raw_cpu / ref_c_cpu);
  printf("  reference c_ref + ab_abs           %8.3f s  %7.1f GFLOP/s  ratio 2*raw/ref = %.3f (two GEMMs)\n", ref_both,
         2 * flops / ref_both * 1e-9, 2 * raw / ref_both);
  free(a);
  free(b);
  free(a64);
  free(b64);
  free(c);
  free(ab);
  precis_reference_release();
  return bench_verdict_finish(&verdict);
}
