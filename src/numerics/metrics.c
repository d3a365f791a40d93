#include "metrics.h"

#include <math.h>
#include <string.h>

static const precis_metric_def metric_defs[PRECIS_METRIC_COUNT] = {
    [PRECIS_METRIC_MAX_ABS] = {PRECIS_METRIC_MAX_ABS, "max_abs", PRECIS_LOWER_IS_BETTER, "max |c-r|"},
    [PRECIS_METRIC_MAX_REL] = {PRECIS_METRIC_MAX_REL, "max_rel", PRECIS_LOWER_IS_BETTER,
                               "max |c-r| / max(|r|, 1e-3*rms(r))"},
    [PRECIS_METRIC_REL_FRO] = {PRECIS_METRIC_REL_FRO, "rel_fro", PRECIS_LOWER_IS_BETTER, "||c-r||_F / ||r||_F"},
    [PRECIS_METRIC_RMSE] = {PRECIS_METRIC_RMSE, "rmse", PRECIS_LOWER_IS_BETTER, "sqrt(mean((c-r)^2))"},
    [PRECIS_METRIC_SQNR_DB] = {PRECIS_METRIC_SQNR_DB, "sqnr_db", PRECIS_HIGHER_IS_BETTER,
                               "-20*log10(rel_fro), null when exact"},
    [PRECIS_METRIC_COSINE] = {PRECIS_METRIC_COSINE, "cosine", PRECIS_HIGHER_IS_BETTER, "<c,r> / (||c|| ||r||)"},
    [PRECIS_METRIC_MEAN_ERR] = {PRECIS_METRIC_MEAN_ERR, "mean_err", PRECIS_NEARER_ZERO, "mean(c-r), signed"},
    [PRECIS_METRIC_MAX_CW] = {PRECIS_METRIC_MAX_CW, "max_cw", PRECIS_LOWER_IS_BETTER,
                              "max |c-r| / (|a|.|b|); elements with |a|.|b| = 0 must be exact"},
    [PRECIS_METRIC_NONFINITE] = {PRECIS_METRIC_NONFINITE, "nonfinite", PRECIS_LOWER_IS_BETTER,
                                 "count of NaN/inf in c"},
    [PRECIS_METRIC_CLIPPED] = {PRECIS_METRIC_CLIPPED, "clipped", PRECIS_LOWER_IS_BETTER,
                               "fraction of quantized inputs that saturated (int8, fp8)"},
};

const precis_metric_def *precis_metric_get(precis_metric_id id) {
  if ((unsigned)id >= PRECIS_METRIC_COUNT) return NULL;
  return &metric_defs[id];
}

const precis_metric_def *precis_metric_by_key(const char *key) {
  for (int i = 0; i < PRECIS_METRIC_COUNT; i++)
    if (strcmp(metric_defs[i].key, key) == 0) return &metric_defs[i];
  return NULL;
}

void precis_metrics_sample(const float *c, const double *r, const double *ab, size_t count,
                           precis_sample_metrics *out) {
  precis_metrics_sample_wide(c, NULL, r, NULL, ab, count, out);
}

void precis_metrics_sample_wide(const float *c, const double *c64, const double *r, const double *r_lo,
                                const double *ab, size_t count, precis_sample_metrics *out) {
  double max_abs = 0, sum_sq_err = 0, sum_sq_r = 0, sum_sq_c = 0, dot = 0, sum_err = 0, max_cw = 0;
  long long nonfinite = 0;
  for (size_t i = 0; i < count; i++) {
    double ri = r[i];
    sum_sq_r += ri * ri;
  }
  double rms_r = count ? sqrt(sum_sq_r / (double)count) : 0.0;
  double rel_floor = 1e-3 * rms_r;
  double max_rel = 0;
  for (size_t i = 0; i < count; i++) {
    double ci = c64 ? c64[i] : (double)c[i], ri = r[i];
    if (!isfinite(ci)) {
      /* A non-finite output is infinitely wrong: every error metric says so. */
      nonfinite++;
      max_abs = max_rel = max_cw = INFINITY;
      sum_sq_err = INFINITY;
      sum_err = isnan(ci) ? NAN : sum_err + (ci - ri);
      continue;
    }
    /* c - r is exact when c is near r (Sterbenz), so the low part of the reference still counts. */
    double d = r_lo ? (ci - ri) - r_lo[i] : ci - ri, ad = fabs(d);
    if (ad > max_abs) max_abs = ad;
    double denom = fmax(fabs(ri), rel_floor);
    double rel = denom > 0 ? ad / denom : (ad > 0 ? INFINITY : 0.0);
    if (rel > max_rel) max_rel = rel;
    double cw = ab[i] > 0 ? ad / ab[i] : (ad > 0 ? INFINITY : 0.0);
    if (cw > max_cw) max_cw = cw;
    sum_sq_err += d * d;
    sum_sq_c += ci * ci;
    dot += ci * ri;
    sum_err += d;
  }
  memset(out, 0, sizeof *out);
  double n = count ? (double)count : 1.0;
  double norm_err = sqrt(sum_sq_err), norm_r = sqrt(sum_sq_r), norm_c = sqrt(sum_sq_c);
  double rel_fro = norm_r > 0 ? norm_err / norm_r : (norm_err > 0 ? INFINITY : 0.0);
  out->v[PRECIS_METRIC_MAX_ABS] = max_abs;
  out->v[PRECIS_METRIC_MAX_REL] = max_rel;
  out->v[PRECIS_METRIC_REL_FRO] = rel_fro;
  out->v[PRECIS_METRIC_RMSE] = sqrt(sum_sq_err / n);
  out->v[PRECIS_METRIC_SQNR_DB] = rel_fro > 0 ? -20.0 * log10(rel_fro) : NAN;
  out->present[PRECIS_METRIC_SQNR_DB] = rel_fro > 0; /* null when exact */
  if (nonfinite) out->v[PRECIS_METRIC_COSINE] = NAN;
  else if (norm_c > 0 && norm_r > 0) out->v[PRECIS_METRIC_COSINE] = dot / (norm_c * norm_r);
  else out->v[PRECIS_METRIC_COSINE] = (norm_c == 0 && norm_r == 0) ? 1.0 : 0.0;
  out->v[PRECIS_METRIC_MEAN_ERR] = sum_err / n;
  out->v[PRECIS_METRIC_MAX_CW] = max_cw;
  out->v[PRECIS_METRIC_NONFINITE] = (double)nonfinite;
  out->v[PRECIS_METRIC_CLIPPED] = NAN;
  for (int m = 0; m < PRECIS_METRIC_COUNT; m++)
    if (m != PRECIS_METRIC_SQNR_DB && m != PRECIS_METRIC_CLIPPED) out->present[m] = !isnan(out->v[m]);
}

void precis_metrics_aggregate(const precis_sample_metrics *samples, size_t n_samples,
                              precis_metric_value out[PRECIS_METRIC_COUNT]) {
  for (int m = 0; m < PRECIS_METRIC_COUNT; m++) {
    precis_metric_sense sense = metric_defs[m].sense;
    double worst = NAN, sum = 0;
    size_t present = 0;
    for (size_t s = 0; s < n_samples; s++) {
      if (!samples[s].present[m]) continue;
      double v = samples[s].v[m];
      if (present == 0) worst = v;
      else if (sense == PRECIS_LOWER_IS_BETTER && v > worst) worst = v;
      else if (sense == PRECIS_HIGHER_IS_BETTER && v < worst) worst = v;
      else if (sense == PRECIS_NEARER_ZERO && fabs(v) > fabs(worst)) worst = v;
      sum += v;
      present++;
    }
    /* sqnr_db: a sample without a value was exact, the best possible. Worst and mean are over the
     * inexact samples; all exact leaves it null. */
    out[m].present = present > 0;
    out[m].worst = present ? worst : NAN;
    out[m].mean = present ? sum / (double)present : NAN;
  }
}

double precis_percentile_sorted(const double *sorted, size_t n, double pct) {
  if (n == 0) return NAN;
  double pos = pct / 100.0 * (double)(n - 1);
  size_t lo = (size_t)floor(pos);
  size_t hi = lo + 1 < n ? lo + 1 : lo;
  double frac = pos - (double)lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
