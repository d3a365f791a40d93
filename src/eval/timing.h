/* The measurement loop's bookkeeping (DESIGN §6), shared by every backend: the backend times one
 * sample however it can (CPU clock, CUDA events) and this decides when to stop and summarizes.
 *
 * Stopping rule: after the warm-up, keep sampling until at least min_samples are kept and the
 * coefficient of variation (stdev/mean) is at most target_rel_spread, or max_samples are kept, or
 * max_time_ms of sampling has passed with at least min(min_samples, 3) samples (1 if one sample
 * alone is longer than the budget). */
#ifndef PRECIS_TIMING_H
#define PRECIS_TIMING_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "numerics/metrics.h" /* precis_percentile_sorted */
#include "report/results.h"

/* The default sampling budget per case on the cpu backend (precis run), instead of the options'
 * 1000 ms: its timings are CPU timings of an emulation, not GPU figures (docs/decisions.md). */
#define PRECIS_CPU_MAX_TIME_MS 100.0

typedef struct precis_sampler {
  const precis_case_options *options;
  double *samples_ms; /* per call */
  size_t count, capacity;
  double spent_ms;    /* wall time spent sampling */
  bool out_of_memory;
} precis_sampler;

void precis_sampler_init(precis_sampler *s, const precis_case_options *options);
/* Records one sample (already divided by the calls it contained) and the wall time it took.
 * Returns true while more samples are wanted. */
bool precis_sampler_add(precis_sampler *s, double per_call_ms, double wall_ms);
/* Fills the statistics of *out and hands it the samples; the sampler is left empty. */
precis_status precis_sampler_finish(precis_sampler *s, long calls_per_sample, precis_timing *out);
void precis_sampler_free(precis_sampler *s);

/* Several GEMMs per timed sample when one is shorter than ~20 us (DESIGN §6). */
long precis_calls_per_sample(double one_call_ms);

/* Warm-up is complete after >= warmup_calls calls and >= warmup_ms. */
bool precis_warmup_done(const precis_case_options *options, long calls, double elapsed_ms);

/* Monotonic wall clock in milliseconds. */
double precis_now_ms(void);

#endif
