/* Shared driver of the exhaustive format tests: the 2^32 fp32 bit patterns split into blocks of
 * 2^16, spread over the CPU's cores (at least 2 threads), each block checked by a callback that
 * returns its number of mismatches. Prints "<what>: checked N inputs, M mismatches". */
#ifndef PRECIS_TEST_EXHAUSTIVE_H
#define PRECIS_TEST_EXHAUSTIVE_H

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXHAUSTIVE_BLOCK ((uint32_t)1 << 16)
#define EXHAUSTIVE_MAX_THREADS 16
#define EXHAUSTIVE_MAX_REPORTS 20

/* Checks the inputs first .. first+EXHAUSTIVE_BLOCK-1 (as fp32 bit patterns) and returns the
 * number of mismatches. `in` holds those inputs as floats; `scratch` is per-thread working space
 * of EXHAUSTIVE_BLOCK * 4 bytes, twice. */
typedef uint64_t (*exhaustive_block_fn)(uint32_t first, const float *in, void *scratch_a, void *scratch_b);

static atomic_int exhaustive_reports;

static inline float exhaustive_float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static inline uint32_t exhaustive_bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Prints the first few mismatches of the whole run (they are what one needs to debug). */
static inline void exhaustive_report(const char *what, uint32_t input, uint32_t got, uint32_t want) {
  if (atomic_fetch_add(&exhaustive_reports, 1) < EXHAUSTIVE_MAX_REPORTS)
    fprintf(stderr, "%s: input 0x%08" PRIx32 " (%a): got 0x%08" PRIx32 ", want 0x%08" PRIx32 "\n", what, input,
            (double)exhaustive_float_of(input), got, want);
}

typedef struct exhaustive_job {
  exhaustive_block_fn fn;
  atomic_uint_fast64_t *next_block; /* work queue: index of the next unclaimed block */
  uint64_t checked;
  uint64_t mismatches;
  int failed_alloc;
} exhaustive_job;

static void *exhaustive_worker(void *arg) {
  exhaustive_job *job = arg;
  float *in = malloc(EXHAUSTIVE_BLOCK * sizeof *in);
  void *a = malloc(EXHAUSTIVE_BLOCK * 4u), *b = malloc(EXHAUSTIVE_BLOCK * 4u);
  if (!in || !a || !b) {
    job->failed_alloc = 1;
    goto done;
  }
  const uint64_t blocks = ((uint64_t)1 << 32) / EXHAUSTIVE_BLOCK;
  for (;;) {
    uint64_t block = atomic_fetch_add(job->next_block, 1);
    if (block >= blocks) break;
    uint32_t first = (uint32_t)(block * EXHAUSTIVE_BLOCK);
    for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) in[i] = exhaustive_float_of(first + i);
    job->mismatches += job->fn(first, in, a, b);
    job->checked += EXHAUSTIVE_BLOCK;
  }
done:
  free(in);
  free(a);
  free(b);
  return NULL;
}

/* Runs fn over all 2^32 inputs; returns 0 when every input matched and all were checked. */
static inline int exhaustive_run(const char *what, exhaustive_block_fn fn) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus < 2 ? 2 : (cpus > EXHAUSTIVE_MAX_THREADS ? EXHAUSTIVE_MAX_THREADS : (int)cpus);
  pthread_t tid[EXHAUSTIVE_MAX_THREADS];
  exhaustive_job jobs[EXHAUSTIVE_MAX_THREADS];
  atomic_uint_fast64_t next_block = 0;
  int started = 0;
  for (int t = 0; t < threads; t++) {
    jobs[t] = (exhaustive_job){.fn = fn, .next_block = &next_block};
    if (pthread_create(&tid[t], NULL, exhaustive_worker, &jobs[t]) != 0) break;
    started++;
  }
  int used = started;
  if (started == 0) { /* no thread could start: run inline */
    jobs[0] = (exhaustive_job){.fn = fn, .next_block = &next_block};
    exhaustive_worker(&jobs[0]);
    used = 1;
  }
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  uint64_t checked = 0, mismatches = 0;
  int alloc_failures = 0;
  for (int t = 0; t < used; t++) {
    checked += jobs[t].checked;
    mismatches += jobs[t].mismatches;
    alloc_failures += jobs[t].failed_alloc;
  }
  printf("%s: checked %" PRIu64 " inputs, %" PRIu64 " mismatches (%d threads)\n", what, checked, mismatches, used);
  fflush(stdout);
  if (alloc_failures) fprintf(stderr, "%s: %d worker(s) could not allocate their buffers\n", what, alloc_failures);
  return (mismatches == 0 && checked == ((uint64_t)1 << 32)) ? 0 : 1;
}

/* ---- The independent reference for the generic formats ----
 * A binary floating-point format with p significant bits (implicit bit included), normal exponents
 * emin..emax, subnormals below 2^emin, largest finite value max_finite, written with
 * frexp/ldexp/nearbyint on doubles (no bit manipulation): every fp32 value and every rounding of
 * it is exact in double. Rounding is to nearest, ties to even, with an unbounded exponent above;
 * a result beyond max_finite (or an exponent beyond emax) overflows to ±inf, or to ±max_finite
 * when the format saturates. */
typedef struct generic_format {
  const char *name;
  int p, emin, emax;
  double max_finite;
  bool saturate; /* overflow and ±inf give ±max_finite */
} generic_format;

static inline double generic_round(const generic_format *f, double x) {
  if (isnan(x)) return x;
  double mag = fabs(x);
  if (isinf(x)) return f->saturate ? copysign(f->max_finite, x) : x;
  if (mag == 0.0) return x;
  int e;
  (void)frexp(mag, &e); /* mag = m * 2^e, 0.5 <= m < 1: the leading bit is 2^(e-1) */
  int lead = e - 1;
  if (lead < f->emin) lead = f->emin; /* subnormal: the quantum stops shrinking */
  double units = nearbyint(ldexp(mag, (f->p - 1) - lead)); /* default rounding mode: ties to even */
  double r = ldexp(units, lead - (f->p - 1));
  int overflow = r > f->max_finite || lead > f->emax;
  if (overflow) r = f->saturate ? f->max_finite : INFINITY;
  return copysign(r, x);
}

/* Compares one converted value with the reference: equal values with equal signs (so -0 differs
 * from +0), or both NaN with the input's sign. */
static inline bool generic_matches(float got, double want) {
  if (isnan(want)) return isnan(got) && (signbit(got) != 0) == (signbit(want) != 0);
  return (double)got == want && (signbit(got) != 0) == (signbit(want) != 0);
}

#endif
