#include "report_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
#include "spec.h"

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
  if (isnan(v)) snprintf(buf, len, "-");
  else if (isinf(v)) snprintf(buf, len, v > 0 ? "inf" : "-inf");
  else snprintf(buf, len, "%.*g", digits, v);
}

void precis_fmt_bytes(char *buf, size_t len, long long bytes) {
  if (bytes < 0) snprintf(buf, len, "-");
  else if (bytes >= 1024LL * 1024 * 1024) snprintf(buf, len, "%.3g GiB", (double)bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024LL * 1024) snprintf(buf, len, "%.3g MiB", (double)bytes / (1024.0 * 1024));
  else if (bytes >= 1024) snprintf(buf, len, "%.3g KiB", (double)bytes / 1024.0);
  else snprintf(buf, len, "%lld B", bytes);
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

int precis_recipe_rank(const char *name) { return (int)precis_recipe_preset_index(name); }

long long precis_row_peak_bytes(const precis_row *row) {
  if (row->memory.tracked_peak_bytes >= 0) return row->memory.tracked_peak_bytes;
  return row->memory.tensor_bytes;
}
