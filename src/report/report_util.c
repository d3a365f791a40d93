#include "report_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"

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
