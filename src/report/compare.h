/* precis compare BASE.json NEW.json (DESIGN §7, issue 6): a CI gate after a format change. Rows are
 * paired by (workload, recipe). The rules (docs/reports.md):
 *  - accuracy: a row that ran in BASE and not in NEW; a verdict that flips pass -> fail; an error
 *    metric (worst over samples) of rel_fro, max_abs, max_rel, rmse, max_cw growing by more than
 *    error_factor (an exact BASE becoming inexact counts); sqnr_db dropping by more than
 *    20·log10(error_factor) dB; 1 - cosine growing by more than error_factor (floor 1e-12); any
 *    increase of nonfinite.
 *  - speed, beyond the measured noise: NEW median > BASE p95 and NEW median > BASE median ×
 *    (1 + time_threshold).
 *  - memory: tracked_peak_bytes (and device_peak - device_baseline where both have it) above
 *    BASE × (1 + memory_threshold).
 *  - rows present on one side only are listed, not counted as regressions; differing environments
 *    (backend, device, driver, CUDA/cuBLAS versions, CPU, BLAS, dataset_id) give warnings. */
#ifndef PRECIS_COMPARE_H
#define PRECIS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "results.h"
#include "base/status.h"

typedef struct precis_compare_options {
  double error_factor;     /* default 2 */
  double time_threshold;   /* fraction, default 0.10 */
  double memory_threshold; /* fraction, default 0.10 */
} precis_compare_options;

void precis_compare_options_default(precis_compare_options *options);

typedef enum precis_change_kind {
  PRECIS_CHANGE_STATUS,
  PRECIS_CHANGE_VERDICT,
  PRECIS_CHANGE_ERROR,
  PRECIS_CHANGE_SPEED,
  PRECIS_CHANGE_MEMORY,
} precis_change_kind;
const char *precis_change_kind_str(precis_change_kind kind); /* "status", "verdict", "accuracy", "speed", "memory" */

typedef struct precis_change {
  const char *workload, *recipe; /* point into the NEW report */
  precis_change_kind kind;
  bool regression;               /* false: an improvement beyond the same thresholds */
  char what[64];                 /* the metric or figure: "rel_fro", "median_ms", "tracked_peak_bytes" */
  double base, now;              /* NaN when not a number (status, verdict) */
  char detail[320];              /* one line for people */
} precis_change;

typedef struct precis_comparison {
  precis_compare_options options;
  size_t n_pairs;
  precis_change *changes;
  size_t n_changes, cap_changes;
  size_t n_regressions;
  char **only_in_base, **only_in_new; /* "workload / recipe" */
  size_t n_only_in_base, n_only_in_new;
  char **warnings;
  size_t n_warnings;
} precis_comparison;

precis_status precis_compare_reports(const precis_report *base, const precis_report *now,
                                     const precis_compare_options *options, precis_comparison *out);
void precis_comparison_free(precis_comparison *cmp);

char *precis_comparison_markdown(const precis_comparison *cmp, const char *base_path, const char *new_path);
char *precis_comparison_json(const precis_comparison *cmp, const char *base_path, const char *new_path);

#endif
