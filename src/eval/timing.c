#include "timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void precis_case_options_default(precis_case_options *o) {
  memset(o, 0, sizeof *o);
  o->int8_act_scale = PRECIS_ACT_SCALE_ROW;
  o->percentile = 99.99;
  o->warmup_calls = 3;
  o->warmup_ms = 50.0;
  o->min_samples = 10;
  o->max_samples = 2000;
  o->target_rel_spread = 0.02;
  o->max_time_ms = 1000.0;
  o->cold = false;
  o->autotune = 0;
}

double precis_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void precis_sampler_init(precis_sampler *s, const precis_case_options *options) {
  memset(s, 0, sizeof *s);
  s->options = options;
}

static double mean_of(const double *v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += v[i];
  return n ? sum / (double)n : NAN;
}

static double stdev_of(const double *v, size_t n, double mean) {
  if (n < 2) return 0.0;
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
  return sqrt(ss / (double)(n - 1));
}

bool precis_sampler_add(precis_sampler *s, double per_call_ms, double wall_ms) {
  const precis_case_options *o = s->options;
  if (s->count == s->capacity) {
    size_t cap = s->capacity ? s->capacity * 2 : 64;
    double *grown = realloc(s->samples_ms, cap * sizeof *grown);
    if (!grown) {
      s->out_of_memory = true;
      return false;
    }
    s->samples_ms = grown;
    s->capacity = cap;
  }
  s->samples_ms[s->count++] = per_call_ms;
  s->spent_ms += wall_ms;
  size_t min_samples = o->min_samples > 0 ? (size_t)o->min_samples : 1;
  size_t max_samples = o->max_samples > 0 ? (size_t)o->max_samples : 100000;
  if (s->count >= max_samples) return false;
  if (s->count >= min_samples) {
    double m = mean_of(s->samples_ms, s->count);
    double cv = m > 0 ? stdev_of(s->samples_ms, s->count, m) / m : 0.0;
    if (cv <= o->target_rel_spread) return false;
  }
  if (s->spent_ms >= o->max_time_ms) {
    size_t floor_samples = min_samples < 3 ? min_samples : 3;
    if (s->count >= floor_samples) return false;
    /* A single sample longer than the whole budget: one is all we can afford. */
    if (s->count >= 1 && s->spent_ms / (double)s->count > o->max_time_ms) return false;
  }
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

precis_status precis_sampler_finish(precis_sampler *s, long calls_per_sample, precis_timing *out) {
  if (s->out_of_memory) return precis_fail(PRECIS_E_NOMEM, "out of memory recording timing samples");
  if (s->count == 0) return precis_fail(PRECIS_E_RUNTIME, "no timing sample was taken");
  double *sorted = malloc(s->count * sizeof *sorted);
  if (!sorted) return precis_fail(PRECIS_E_NOMEM, "out of memory sorting timing samples");
  memcpy(sorted, s->samples_ms, s->count * sizeof *sorted);
  qsort(sorted, s->count, sizeof *sorted, cmp_double);
  out->min_ms = sorted[0];
  out->median_ms = precis_percentile_sorted(sorted, s->count, 50);
  out->p95_ms = precis_percentile_sorted(sorted, s->count, 95);
  out->p99_ms = precis_percentile_sorted(sorted, s->count, 99);
  out->mean_ms = mean_of(sorted, s->count);
  out->stdev_ms = stdev_of(sorted, s->count, out->mean_ms);
  out->samples = (long)s->count;
  out->calls_per_sample = calls_per_sample;
  free(sorted);
  free(out->samples_ms);
  out->samples_ms = s->samples_ms; /* in the order taken */
  out->n_samples_ms = s->count;
  s->samples_ms = NULL;
  s->count = s->capacity = 0;
  return PRECIS_OK;
}

void precis_sampler_free(precis_sampler *s) {
  free(s->samples_ms);
  memset(s, 0, sizeof *s);
}

long precis_calls_per_sample(double one_call_ms) {
  const double target_ms = 0.020;
  if (!(one_call_ms > 0) || one_call_ms >= target_ms) return 1;
  long calls = (long)ceil(target_ms / one_call_ms);
  return calls > 10000 ? 10000 : calls;
}

bool precis_warmup_done(const precis_case_options *options, long calls, double elapsed_ms) {
  return calls >= options->warmup_calls && elapsed_ms >= options->warmup_ms;
}
