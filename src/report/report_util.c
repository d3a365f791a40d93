#include "report_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/recipe.h"
#include "numerics/spec.h"

size_t precis_report_slice_sweep(const precis_report *report, const char *workload, precis_sweep_point *points,
                                 size_t max, const precis_row **fp64) {
  size_t n = 0;
  *fp64 = NULL;
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0 || row->status != PRECIS_ROW_OK) continue;
    const char *text = row->spec ? row->spec : precis_recipe_name_spec(row->recipe);
    precis_spec spec;
    if (!text || precis_spec_parse(text, &spec) != PRECIS_OK) continue;
    if (spec.split == PRECIS_SPLIT_NONE && spec.a.fmt == PRECIS_FMT_F64 && spec.b.fmt == PRECIS_FMT_F64 &&
        spec.acc == PRECIS_FMT_F64 && !*fp64)
      *fp64 = row;
    if (spec.split != PRECIS_SPLIT_INT8XN || n == max) continue;
    size_t at = n++;
    while (at > 0 && points[at - 1].slices > spec.split_terms) {
      points[at] = points[at - 1];
      at--;
    }
    points[at] = (precis_sweep_point){row, spec.split_terms};
  }
  return n;
}

void precis_fmt_sig(char *buf, size_t len, double v, int digits) {
  if (digits < 1) digits = 1;
  if (digits > 17) digits = 17;
  double mag = v != 0 && isfinite(v) ? fabs(v) : 1;
  if (isnan(v)) snprintf(buf, len, "-");
  else if (isinf(v)) snprintf(buf, len, v > 0 ? "inf" : "-inf");
  else if (v == 0) snprintf(buf, len, "0");
  else if (mag < 1e-4 || mag >= 1e15) snprintf(buf, len, "%.*g", digits, v); /* only here: 3e-08 */
  else {
    /* Round to `digits` significant digits first, then print positionally: 12690, not 1.269e+04. */
    char sci[40];
    snprintf(sci, sizeof sci, "%.*e", digits - 1, v);
    double rounded = strtod(sci, NULL);
    int exponent = (int)floor(log10(fabs(rounded)));
    int decimals = digits - 1 - exponent;
    if (decimals < 0) decimals = 0;
    snprintf(buf, len, "%.*f", decimals, rounded);
    if (decimals > 0 && strchr(buf, '.')) {
      size_t n = strlen(buf);
      while (n > 0 && buf[n - 1] == '0') buf[--n] = '\0';
      if (n > 0 && buf[n - 1] == '.') buf[--n] = '\0';
    }
  }
}

void precis_fmt_ms(char *buf, size_t len, double ms) {
  char num[40];
  if (isfinite(ms) && fabs(ms) >= 1000) {
    precis_fmt_sig(num, sizeof num, ms / 1000, 3);
    snprintf(buf, len, "%s s", num);
  } else if (isfinite(ms)) {
    precis_fmt_sig(num, sizeof num, ms, 4);
    snprintf(buf, len, "%s ms", num);
  } else {
    snprintf(buf, len, "-");
  }
}

void precis_fmt_bytes(char *buf, size_t len, long long bytes) {
  if (bytes < 0) snprintf(buf, len, "-");
  else {
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    double scale = 1024.0 * 1024 * 1024;
    for (int u = 0; u < 3; u++, scale /= 1024)
      if ((double)bytes >= scale) {
        char num[40];
        precis_fmt_sig(num, sizeof num, (double)bytes / scale, 3);
        snprintf(buf, len, "%s %s", num, units[u]);
        return;
      }
    snprintf(buf, len, "%lld B", bytes);
  }
}

const char *precis_report_backend(const precis_report *report) {
  const char *backend = precis_kv_get(&report->environment, "backend");
  return backend ? backend : "unknown";
}

bool precis_report_is_cpu_emulation(const precis_report *report) {
  const char *backend = precis_report_backend(report);
  return strcmp(backend, "cuda") != 0;
}

static const char **distinct(const precis_report *report, bool workloads, size_t *count) {
  *count = 0;
  const char **names = calloc(report->n_rows ? report->n_rows : 1, sizeof *names);
  if (!names) return NULL;
  for (size_t i = 0; i < report->n_rows; i++) {
    const char *name = workloads ? report->rows[i].workload : report->rows[i].recipe;
    if (!name) continue;
    bool seen = false;
    for (size_t j = 0; j < *count && !seen; j++) seen = strcmp(names[j], name) == 0;
    if (!seen) names[(*count)++] = name;
  }
  return names;
}

const char **precis_report_workloads(const precis_report *report, size_t *count) {
  return distinct(report, true, count);
}

const char **precis_report_recipe_names(const precis_report *report, size_t *count) {
  return distinct(report, false, count);
}

const char **precis_report_layer_workloads(const precis_report *report, size_t *count) {
  size_t n_all = 0, n = 0;
  const char **all = precis_report_workloads(report, &n_all);
  for (size_t i = 0; all && i < n_all; i++)
    if (precis_report_layer_of(report, all[i])) all[n++] = all[i];
  *count = n;
  if (n == 0) {
    free(all);
    return NULL;
  }
  return all;
}

const char *precis_report_layer_of(const precis_report *report, const char *workload) {
  for (size_t i = 0; i < report->n_rows; i++)
    if (report->rows[i].layer && strcmp(report->rows[i].workload, workload) == 0) return report->rows[i].layer;
  return NULL;
}

double precis_heat_color(double error, double lo, double hi, char *buf, size_t len) {
  if (!isfinite(error)) {
    snprintf(buf, len, "#ffffff");
    return 0;
  }
  double t = error <= 0 || !(hi > lo) ? 0 : (log10(error) - lo) / (hi - lo);
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  /* #fffbe6 (t=0) -> #fdae61 (t=0.5) -> #b2182b (t=1) */
  double r0, g0, b0, r1, g1, b1, u;
  if (t < 0.5) r0 = 255, g0 = 251, b0 = 230, r1 = 253, g1 = 174, b1 = 97, u = t / 0.5;
  else r0 = 253, g0 = 174, b0 = 97, r1 = 178, g1 = 24, b1 = 43, u = (t - 0.5) / 0.5;
  snprintf(buf, len, "#%02x%02x%02x", (int)(r0 + (r1 - r0) * u), (int)(g0 + (g1 - g0) * u), (int)(b0 + (b1 - b0) * u));
  return t;
}

int precis_recipe_rank(const char *name) { return (int)precis_recipe_preset_index(name); }

long long precis_row_peak_bytes(const precis_row *row) {
  if (row->memory.tracked_peak_bytes >= 0) return row->memory.tracked_peak_bytes;
  return row->memory.tensor_bytes;
}

long precis_report_min_samples(const precis_report *report) {
  const char *text = precis_kv_get(&report->settings, "min_samples");
  if (!text) return 0;
  char *end = NULL;
  double v = strtod(text, &end);
  return end != text && isfinite(v) && v > 0 && v < 1e9 ? (long)v : 0;
}

bool precis_row_few_samples(const precis_row *row, long min_samples) {
  return min_samples > 0 && row->status == PRECIS_ROW_OK && isfinite(row->time.median_ms) &&
         row->time.samples < min_samples;
}
