/* report.csv: tidy, one line per workload × recipe with every metric (worst and mean), the timing,
 * throughput, memory, status and verdict, so that pandas.read_csv gives an analysis-ready frame.
 * Empty cells are absent values. Text cells follow RFC 4180 and are neutralized against
 * spreadsheet formula injection (escape.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "report.h"

static void csv_sep(precis_buf *b, bool *first) {
  if (!*first) precis_buf_append(b, ",");
  *first = false;
}

static void csv_text(precis_buf *b, bool *first, const char *s) {
  csv_sep(b, first);
  precis_buf_csv(b, s, true);
}

static void csv_num(precis_buf *b, bool *first, double v) {
  csv_sep(b, first);
  char num[40];
  precis_format_double(num, sizeof num, v);
  if (strcmp(num, "null") != 0) precis_buf_append(b, num);
}

static void csv_int(precis_buf *b, bool *first, long long v, bool negative_is_absent) {
  csv_sep(b, first);
  if (!(negative_is_absent && v < 0)) precis_buf_appendf(b, "%lld", v);
}

static const char *const memory_columns[] = {"tensor_bytes",      "tracked_peak_bytes", "device_baseline_bytes",
                                             "device_peak_bytes", "untracked_bytes",    "host_peak_rss_bytes"};

static void header(precis_buf *b) {
  bool first = true;
  static const char *const leading[] = {"workload", "layer", "recipe", "spec", "backend", "dataset_id", "description",
                                        "recipe_description", "m", "n", "k", "batch", "status", "reason",
                                        "verdict", "verdict_detail", "criteria"};
  for (size_t i = 0; i < sizeof leading / sizeof leading[0]; i++) csv_text(b, &first, leading[i]);
  for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
    const char *key = precis_metric_get((precis_metric_id)id)->key;
    csv_sep(b, &first);
    precis_buf_appendf(b, "%s_worst,%s_mean", key, key);
  }
  static const char *const timing[] = {"min_ms", "median_ms", "mean_ms", "p95_ms", "p99_ms", "stdev_ms",
                                       "samples", "calls_per_sample", "convert_ms", "e2e_median_ms", "tflops"};
  for (size_t i = 0; i < sizeof timing / sizeof timing[0]; i++) csv_text(b, &first, timing[i]);
  for (size_t i = 0; i < sizeof memory_columns / sizeof memory_columns[0]; i++) csv_text(b, &first, memory_columns[i]);
  static const char *const placement[] = {"host", "part", "rank", "device"};
  for (size_t i = 0; i < sizeof placement / sizeof placement[0]; i++) csv_text(b, &first, placement[i]);
  static const char *const loss[] = {"taylor_mean", "taylor_worst", "fisher_mean", "fisher_worst"};
  for (size_t i = 0; i < sizeof loss / sizeof loss[0]; i++) csv_text(b, &first, loss[i]);
  csv_text(b, &first, "target");
  for (int id = PRECIS_LOGIT_METRIC_FIRST; id < PRECIS_METRIC_ALL; id++) {
    const char *key = precis_metric_get((precis_metric_id)id)->key;
    csv_sep(b, &first);
    precis_buf_appendf(b, "%s_worst,%s_mean", key, key);
  }
  precis_buf_append(b, "\r\n");
}

static void row_line(precis_buf *b, const precis_report *report, const precis_row *row) {
  bool first = true;
  csv_text(b, &first, row->workload);
  csv_text(b, &first, row->layer ? row->layer : "");
  csv_text(b, &first, row->recipe);
  csv_text(b, &first, row->spec);
  csv_text(b, &first, precis_kv_get(&report->environment, "backend"));
  csv_text(b, &first, report->dataset_id);
  csv_text(b, &first, row->description);
  csv_text(b, &first, row->recipe_description);
  csv_int(b, &first, row->m, false);
  csv_int(b, &first, row->n, false);
  csv_int(b, &first, row->k, false);
  csv_int(b, &first, row->batch, false);
  csv_text(b, &first, precis_row_status_str(row->status));
  csv_text(b, &first, row->reason);
  csv_text(b, &first, precis_verdict_str(row->verdict));
  csv_text(b, &first, row->verdict_detail);
  precis_buf criteria;
  precis_buf_init(&criteria);
  for (size_t i = 0; i < row->criteria.count; i++) {
    char text[96];
    precis_criterion_format(&row->criteria.items[i], text, sizeof text);
    if (i) precis_buf_append(&criteria, ";");
    precis_buf_append(&criteria, text);
  }
  csv_text(b, &first, criteria.data ? criteria.data : "");
  precis_buf_free(&criteria);
  for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
    bool present = row->error[id].present;
    csv_num(b, &first, present ? row->error[id].worst : NAN);
    csv_num(b, &first, present ? row->error[id].mean : NAN);
  }
  const precis_timing *t = &row->time;
  csv_num(b, &first, t->min_ms);
  csv_num(b, &first, t->median_ms);
  csv_num(b, &first, t->mean_ms);
  csv_num(b, &first, t->p95_ms);
  csv_num(b, &first, t->p99_ms);
  csv_num(b, &first, t->stdev_ms);
  csv_int(b, &first, t->samples, false);
  csv_int(b, &first, t->calls_per_sample, false);
  csv_num(b, &first, t->convert_ms);
  csv_num(b, &first, t->e2e_median_ms);
  csv_num(b, &first, row->tflops);
  const precis_memory *mem = &row->memory;
  long long bytes[] = {mem->tensor_bytes,      mem->tracked_peak_bytes, mem->device_baseline_bytes,
                       mem->device_peak_bytes, mem->untracked_bytes,    mem->host_peak_rss_bytes};
  for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) csv_int(b, &first, bytes[i], true);
  /* Rows of a merged or MPI report came from different machines; rank and device are absent
   * (empty) where they do not apply, as in report.json's null. */
  csv_text(b, &first, row->host ? row->host : "");
  csv_int(b, &first, row->part, false);
  csv_int(b, &first, row->rank, true);
  csv_int(b, &first, row->device, true);
  /* Empty without gradients in the dataset. */
  double loss[] = {row->loss.taylor_mean, row->loss.taylor_worst, row->loss.fisher_mean, row->loss.fisher_worst};
  for (size_t i = 0; i < sizeof loss / sizeof loss[0]; i++) csv_num(b, &first, row->loss.present ? loss[i] : NAN);
  csv_text(b, &first, row->target ? row->target : "");
  /* Empty unless the workload's output is logits. */
  for (int id = PRECIS_LOGIT_METRIC_FIRST; id < PRECIS_METRIC_ALL; id++) {
    bool present = row->error[id].present;
    csv_num(b, &first, present ? row->error[id].worst : NAN);
    csv_num(b, &first, present ? row->error[id].mean : NAN);
  }
  precis_buf_append(b, "\r\n");
}

precis_status precis_report_write_csv(const precis_report *report, const char *path, bool force) {
  precis_buf b;
  precis_buf_init(&b);
  header(&b);
  for (size_t i = 0; i < report->n_rows; i++) row_line(&b, report, &report->rows[i]);
  char *text = precis_buf_take(&b);
  if (!text) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory formatting the CSV", path);
  precis_status st = precis_atomic_write_text(path, text, force);
  free(text);
  return st;
}
