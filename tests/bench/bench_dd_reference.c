/* The cost of double-double references (`reference: double-double`, docs/high-precision.md) as a
 * ratio to the float64 dgemm reference of the same shape, measured in the same run (goal <= 8x).
 * The double-double kernel runs on one thread: compare with OPENBLAS_NUM_THREADS=1 for a per-core
 * ratio (the bench prints OpenBLAS's thread count).
 *
 * usage: bench_dd_reference [N=1024] [repeats=3] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/distributions.h"
#include "data/generate.h"
#include "data/rng.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1024, repeats = argc > 2 ? atoi(argv[2]) : 3;
  if (n <= 0 || repeats <= 0) {
    fprintf(stderr, "usage: bench_dd_reference [N] [repeats]\n");
    return 2;
  }
  const size_t count = (size_t)n * (size_t)n;
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
  double *c = malloc(count * sizeof *c), *hi = malloc(count * sizeof *hi), *lo = malloc(count * sizeof *lo);
  if (!a || !b || !c || !hi || !lo) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  precis_dist d;
  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  precis_rng_key key = precis_rng_key_for(1, "bench");
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, n, n, a);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, 1, n, n, b);
  precis_reference_compute(a, b, 1, n, n, n, false, c, NULL); /* warm-up: threads, page faults */
  precis_reference_compute_dd(a, b, 1, n, n, n, false, hi, lo);

  double f64 = 1e30, dd = 1e30;
  for (int r = 0; r < repeats; r++) {
    double t0 = now();
    precis_reference_compute(a, b, 1, n, n, n, false, c, NULL);
    double t1 = now();
    precis_reference_compute_dd(a, b, 1, n, n, n, false, hi, lo);
    double t2 = now();
    if (t1 - t0 < f64) f64 = t1 - t0;
    if (t2 - t1 < dd) dd = t2 - t1;
  }
  /* The two must agree to float64's accuracy, or the timing compares different work. */
  double worst = 0;
  for (size_t i = 0; i < count; i++) {
    double e = hi[i] - c[i] < 0 ? c[i] - hi[i] : hi[i] - c[i];
    if (e > worst) worst = e;
  }
  const double flops = 2.0 * (double)n * (double)n * (double)n;
  printf("bench_dd_reference: %dx%dx%d, best of %d, OpenBLAS %s, %d thread(s)\n", n, n, n, repeats,
         openblas_get_config(), openblas_get_num_threads());
  printf("  float64 reference (dgemm)          %8.3f s  %7.2f GFLOP/s\n", f64, flops / f64 * 1e-9);
  printf("  double-double reference (Sum2)     %8.3f s  %7.2f GFLOP/s  ratio dd/dgemm = %.2f (goal <= 8)\n", dd,
         flops / dd * 1e-9, dd / f64);
  printf("  max |c_hi - c_dgemm| = %.3g\n", worst);
  free(a);
  free(b);
  free(c);
  free(hi);
  free(lo);
  return 0;
}
