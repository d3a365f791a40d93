/* Crafted reports for the recommend and compare tests: rows with a chosen rel_fro, latency and
 * peak, the other metrics consistent with them, and a verdict against the recorded criterion. */
#ifndef PRECIS_TEST_REPORT_FIXTURE_H
#define PRECIS_TEST_REPORT_FIXTURE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static inline void fixture_report(precis_report *r) {
  precis_report_init(r);
  r->complete = true;
  r->tool_version = precis_strdup("0.1.0");
  precis_kv_set(&r->environment, "backend", "cpu-emulation");
  precis_kv_set(&r->environment, "device", NULL);
  precis_kv_set(&r->environment, "cpu", "Test CPU");
  r->dataset_id = precis_strdup("0123abcd");
}

/* Adds an "ok" row judged against rel_fro<=limit (limit <= 0: no recorded criteria, no verdict). */
static inline precis_row *fixture_row(precis_report *r, const char *workload, const char *recipe, double rel_fro,
                                      double median_ms, long long peak_bytes, double limit) {
  precis_row row;
  precis_row_init(&row);
  row.workload = precis_strdup(workload);
  row.recipe = precis_strdup(recipe);
  row.m = row.n = row.k = 256;
  row.batch = 1;
  row.status = PRECIS_ROW_OK;
  for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
    row.error[id].present = true;
    row.error[id].worst = row.error[id].mean = 0;
  }
  row.error[PRECIS_METRIC_REL_FRO].worst = rel_fro;
  row.error[PRECIS_METRIC_MAX_ABS].worst = rel_fro * 10;
  row.error[PRECIS_METRIC_MAX_REL].worst = rel_fro * 30;
  row.error[PRECIS_METRIC_RMSE].worst = rel_fro * 2;
  row.error[PRECIS_METRIC_MAX_CW].worst = rel_fro / 2;
  row.error[PRECIS_METRIC_COSINE].worst = 1 - rel_fro * rel_fro / 2;
  if (rel_fro > 0) row.error[PRECIS_METRIC_SQNR_DB].worst = -20 * log10(rel_fro);
  else row.error[PRECIS_METRIC_SQNR_DB].present = false;
  if (limit > 0) {
    row.criteria.count = 1;
    row.criteria.items[0] = (precis_criterion){.metric = PRECIS_METRIC_REL_FRO, .op = PRECIS_CMP_LE, .value = limit};
    row.verdict = rel_fro <= limit ? PRECIS_VERDICT_PASS : PRECIS_VERDICT_FAIL;
    if (row.verdict == PRECIS_VERDICT_FAIL) row.verdict_detail = precis_asprintf("rel_fro=%g > %g", rel_fro, limit);
  }
  row.time.median_ms = median_ms;
  row.time.min_ms = median_ms * 0.97;
  row.time.mean_ms = median_ms * 1.01;
  row.time.p95_ms = median_ms * 1.05;
  row.time.p99_ms = median_ms * 1.08;
  row.time.stdev_ms = median_ms * 0.02;
  row.time.samples = 3;
  row.time.calls_per_sample = 1;
  row.time.samples_ms = malloc(3 * sizeof(double));
  row.time.n_samples_ms = 3;
  row.time.samples_ms[0] = median_ms * 0.98;
  row.time.samples_ms[1] = median_ms;
  row.time.samples_ms[2] = median_ms * 1.05;
  row.tflops = 2.0 * 256 * 256 * 256 / (median_ms * 1e-3) / 1e12;
  row.memory.tensor_bytes = peak_bytes - 1024;
  row.memory.tracked_peak_bytes = peak_bytes;
  precis_report_add_row(r, &row);
  return &r->rows[r->n_rows - 1];
}

static inline precis_row *fixture_failed_row(precis_report *r, const char *workload, const char *recipe,
                                             const char *reason) {
  precis_row row;
  precis_row_init(&row);
  row.workload = precis_strdup(workload);
  row.recipe = precis_strdup(recipe);
  row.status = PRECIS_ROW_FAILED;
  row.reason = precis_strdup(reason);
  precis_report_add_row(r, &row);
  return &r->rows[r->n_rows - 1];
}

static inline precis_row *fixture_find(precis_report *r, const char *workload, const char *recipe) {
  for (size_t i = 0; i < r->n_rows; i++)
    if (strcmp(r->rows[i].workload, workload) == 0 && strcmp(r->rows[i].recipe, recipe) == 0) return &r->rows[i];
  return NULL;
}

#endif
