/* Peak memory of `precis gen` against the tile size (gen --tile-rows, DESIGN §13): one workload
 * generated in core and with several tiles, each in a child process whose peak RSS (wait4's
 * ru_maxrss) is printed with its time. In core the peak grows with m·batch (a, c_ref and ab_abs);
 * tiled it is b (and its float64 copy) plus the tile.
 *
 * The verdict (bench/bench_verdict.h): the smallest tile's peak is at most a quarter of the in-core
 * peak (the tile, not m, sets the memory).
 *
 * usage: bench_gen_tiles [M=32768] [N=512] [K=1024] [DIR=/tmp] [--report-only] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_verdict.h"
#include "data/generate.h"
#include "data/suite.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  bench_verdict verdict;
  bench_verdict_init(&verdict, &argc, argv);
  const long m = argc > 1 ? atol(argv[1]) : 32768, n = argc > 2 ? atol(argv[2]) : 512, k = argc > 3 ? atol(argv[3]) : 1024;
  const char *dir = argc > 4 ? argv[4] : "/tmp";
  if (m <= 0 || n <= 0 || k <= 0) {
    fprintf(stderr, "usage: bench_gen_tiles [M] [N] [K] [DIR]\n");
    return 2;
  }
  char text[256], path[512];
  snprintf(text, sizeof text, "seed: 1\nworkloads:\n  - {name: w, m: %ld, n: %ld, k: %ld, batch: 1}\n", m, n, k);
  snprintf(path, sizeof path, "%s/bench_gen_tiles_%d.h5", dir, (int)getpid());
  const long tiles[] = {0, 8192, 2048, 256};
  printf("bench_gen_tiles: m=%ld n=%ld k=%ld (a %.0f MiB, c_ref + ab_abs %.0f MiB, b %.1f MiB)\n", m, n, k,
         (double)m * (double)k * 4 / 1048576, (double)m * (double)n * 16 / 1048576, (double)k * (double)n * 4 / 1048576);
  printf("  %-10s %14s %10s\n", "tile_rows", "peak RSS MiB", "seconds");
  double in_core_peak = NAN, smallest_tile_peak = NAN;
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    if (tiles[t] >= m) continue;
    double start = now();
    pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      precis_suite suite;
      if (precis_suite_parse(text, strlen(text), "bench.yaml", ".", &suite) != PRECIS_OK) _exit(1);
      precis_gen_options options = {.output = path, .force = true};
      char id[65];
      precis_status st = precis_generate_tiled(&suite, &options, tiles[t], id);
      precis_suite_free(&suite);
      _exit(st == PRECIS_OK ? 0 : 1);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "bench_gen_tiles: generation with tile %ld failed\n", tiles[t]);
      bench_failed(&verdict);
      continue;
    }
    double peak = (double)usage.ru_maxrss / 1024;
    if (tiles[t] == 0) in_core_peak = peak;
    else smallest_tile_peak = peak;
    char label[32];
    if (tiles[t]) snprintf(label, sizeof label, "%ld", tiles[t]);
    else snprintf(label, sizeof label, "in core");
    printf("  %-10s %14.1f %10.2f\n", label, peak, now() - start);
    fflush(stdout);
  }
  unlink(path);
  bool met = bench_goal(&verdict, in_core_peak / smallest_tile_peak, 4.0, NAN);
  printf("in-core peak / smallest tile's peak = %.1f (goal >= 4)%s\n", in_core_peak / smallest_tile_peak,
         met ? "" : " NOT MET");
  return bench_verdict_finish(&verdict);
}
