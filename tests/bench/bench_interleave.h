/* Interleaved sampling of two measurements of the same thing (issue 27, gpu_bench_matmul): precis's
 * timing against a plain cublasLtMatmul loop. Measured one after the other, a slow drift (clocks
 * settling, temperature, another process) lands on one side only and a 0.99..1.0101 goal checked on
 * ~10-sample medians says more about the drift than about precis. Here the rounds alternate in an
 * ABBA pattern (A first in rounds 0 and 3 of every 4), and each side's figure is the mean of its
 * rounds' medians: over every 4 rounds the two sides' rounds are centred on the same instant, so a
 * linear drift cancels exactly (a median inside a round keeps outliers out). The rounds are a
 * multiple of 4 and pool at least BENCH_MIN_POOLED_SAMPLES samples a side. Plain C:
 * tests/test_bench_interleave.c checks it on the CPU. */
#ifndef PRECIS_BENCH_INTERLEAVE_H
#define PRECIS_BENCH_INTERLEAVE_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MIN_POOLED_SAMPLES 50
#define BENCH_DEFAULT_ROUNDS 8

typedef struct bench_pool {
  double *values;
  size_t count, capacity;
} bench_pool;

static inline bool bench_pool_add(bench_pool *p, const double *values, size_t n) {
  if (p->count + n > p->capacity) {
    size_t cap = p->capacity ? p->capacity : 64;
    while (cap < p->count + n) cap *= 2;
    double *grown = realloc(p->values, cap * sizeof *grown);
    if (!grown) return false;
    p->values = grown;
    p->capacity = cap;
  }
  memcpy(p->values + p->count, values, n * sizeof *values);
  p->count += n;
  return true;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of the pooled samples (sorts them); NAN when empty. */
static inline double bench_pool_median(bench_pool *p) {
  if (p->count == 0) return NAN;
  qsort(p->values, p->count, sizeof p->values[0], bench_cmp_double);
  size_t h = p->count / 2;
  return p->count % 2 ? p->values[h] : 0.5 * (p->values[h - 1] + p->values[h]);
}

static inline void bench_pool_free(bench_pool *p) {
  free(p->values);
  memset(p, 0, sizeof *p);
}

/* One side: every sample (for the count) and the sum of its rounds' medians. */
typedef struct bench_side {
  bench_pool all;
  double median_sum;
  int rounds;
} bench_side;

/* Adds one round's samples. */
static inline bool bench_side_add_round(bench_side *s, const double *values, size_t n) {
  bench_pool round = {0};
  if (n == 0 || !bench_pool_add(&round, values, n) || !bench_pool_add(&s->all, values, n)) {
    bench_pool_free(&round);
    return false;
  }
  s->median_sum += bench_pool_median(&round);
  s->rounds++;
  bench_pool_free(&round);
  return true;
}

static inline void bench_side_free(bench_side *s) {
  bench_pool_free(&s->all);
  memset(s, 0, sizeof *s);
}

/* The side's figure: the mean of its rounds' medians (NAN without rounds). */
static inline double bench_side_estimate(const bench_side *s) { return s->rounds ? s->median_sum / s->rounds : NAN; }

/* ABBA: side A (precis) goes first in rounds 0 and 3 of every 4, side B in rounds 1 and 2. */
static inline bool bench_round_a_first(int round) { return round % 4 == 0 || round % 4 == 3; }

/* Samples each side takes per round so that `rounds` rounds pool at least the minimum. */
static inline int bench_samples_per_round(int rounds) {
  return (BENCH_MIN_POOLED_SAMPLES + rounds - 1) / rounds;
}

/* The ratio B/A of the two figures; NAN (a missed goal) when either side pooled fewer than the
 * minimum, the sides ran different numbers of rounds or the rounds are not whole ABBA cycles. */
static inline double bench_interleaved_ratio(const bench_side *a, const bench_side *b) {
  if (a->all.count < BENCH_MIN_POOLED_SAMPLES || b->all.count < BENCH_MIN_POOLED_SAMPLES || a->rounds != b->rounds ||
      a->rounds % 4 != 0)
    return NAN;
  return bench_side_estimate(b) / bench_side_estimate(a);
}

#endif
