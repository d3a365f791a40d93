#include "results.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

static precis_kv *kv_slot(precis_kv_list *list, const char *key) {
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].key, key) == 0) {
      free(list->items[i].value);
      list->items[i].value = NULL;
      return &list->items[i];
    }
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 8;
    precis_kv *grown = realloc(list->items, cap * sizeof *grown);
    if (!grown) return NULL;
    list->items = grown;
    list->capacity = cap;
  }
  precis_kv *kv = &list->items[list->count];
  kv->key = precis_strdup(key);
  if (!kv->key) return NULL;
  kv->value = NULL;
  kv->is_number = false;
  list->count++;
  return kv;
}

void precis_kv_set(precis_kv_list *list, const char *key, const char *value) {
  precis_kv *kv = kv_slot(list, key);
  if (!kv) return;
  kv->value = precis_strdup(value);
  kv->is_number = false;
}

void precis_kv_set_number(precis_kv_list *list, const char *key, double value) {
  precis_kv *kv = kv_slot(list, key);
  if (!kv) return;
  kv->is_number = true;
  /* Shortest round-trip form, integers without an exponent (50, 1000, not 5e+01, 1e+03): the
   * settings are printed as stored, in every report format. */
  char text[64];
  precis_format_double(text, sizeof text, value);
  kv->value = isfinite(value) ? precis_strdup(text) : NULL;
}

void precis_kv_set_int(precis_kv_list *list, const char *key, long long value) {
  precis_kv *kv = kv_slot(list, key);
  if (!kv) return;
  kv->is_number = true;
  kv->value = precis_asprintf("%lld", value);
}

void precis_kv_set_json(precis_kv_list *list, const char *key, const char *json) {
  precis_kv *kv = kv_slot(list, key);
  if (!kv) return;
  kv->is_number = true; /* "bare": jo_kv_value writes parsable JSON as it is */
  kv->value = precis_strdup(json);
}

const char *precis_kv_get(const precis_kv_list *list, const char *key) {
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].key, key) == 0) return list->items[i].value;
  return NULL;
}

void precis_kv_free(precis_kv_list *list) {
  for (size_t i = 0; i < list->count; i++) {
    free(list->items[i].key);
    free(list->items[i].value);
  }
  free(list->items);
  memset(list, 0, sizeof *list);
}

const char *precis_row_status_str(precis_row_status s) {
  switch (s) {
  case PRECIS_ROW_OK: return "ok";
  case PRECIS_ROW_UNSUPPORTED: return "unsupported";
  case PRECIS_ROW_DOES_NOT_FIT: return "does-not-fit";
  case PRECIS_ROW_FAILED: return "failed";
  }
  return "failed";
}

bool precis_row_status_parse(const char *s, precis_row_status *out) {
  for (int i = PRECIS_ROW_OK; i <= PRECIS_ROW_FAILED; i++)
    if (s && strcmp(s, precis_row_status_str((precis_row_status)i)) == 0) {
      *out = (precis_row_status)i;
      return true;
    }
  return false;
}

const char *precis_verdict_str(precis_verdict v) {
  switch (v) {
  case PRECIS_VERDICT_PASS: return "pass";
  case PRECIS_VERDICT_FAIL: return "fail";
  case PRECIS_VERDICT_NONE: return NULL;
  }
  return NULL;
}

static void timing_init(precis_timing *t) {
  t->min_ms = t->median_ms = t->mean_ms = t->p95_ms = t->p99_ms = t->stdev_ms = NAN;
  t->samples = 0;
  t->calls_per_sample = 0;
  t->convert_ms = t->e2e_median_ms = NAN;
  t->samples_ms = NULL;
  t->n_samples_ms = 0;
}

void precis_row_init(precis_row *row) {
  memset(row, 0, sizeof *row);
  row->status = PRECIS_ROW_FAILED;
  row->verdict = PRECIS_VERDICT_NONE;
  for (int i = 0; i < PRECIS_METRIC_ALL; i++) {
    row->error[i].worst = row->error[i].mean = NAN;
    row->error[i].present = false;
  }
  timing_init(&row->time);
  row->tflops = NAN;
  row->loss = (precis_loss_change){false, NAN, NAN, NAN, NAN};
  row->memory = (precis_memory){-1, -1, -1, -1, -1, -1};
  row->rank = row->device = -1;
}

void precis_row_free(precis_row *row) {
  free(row->workload);
  free(row->description);
  free(row->layer);
  free(row->recipe);
  free(row->spec);
  free(row->recipe_description);
  free(row->reason);
  free(row->verdict_detail);
  free(row->time.samples_ms);
  precis_kv_free(&row->details);
  free(row->host);
  free(row->target);
  precis_row_init(row);
}

void precis_report_init(precis_report *report) {
  memset(report, 0, sizeof *report);
  report->format_version = PRECIS_REPORT_FORMAT_VERSION;
}

static void free_strings(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void precis_report_free(precis_report *report) {
  free(report->tool_version);
  free(report->tool_commit);
  precis_kv_free(&report->environment);
  free(report->dataset_path);
  free(report->dataset_id);
  free(report->dataset_label);
  precis_kv_free(&report->settings);
  free_strings(report->recipes, report->n_recipes);
  free_strings(report->criteria, report->n_criteria);
  for (size_t i = 0; i < report->n_rows; i++) precis_row_free(&report->rows[i]);
  free(report->rows);
  precis_report_init(report);
}

precis_status precis_report_add_row(precis_report *report, precis_row *row) {
  if (report->n_rows == report->cap_rows) {
    size_t cap = report->cap_rows ? report->cap_rows * 2 : 16;
    precis_row *grown = realloc(report->rows, cap * sizeof *grown);
    if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory adding a report row");
    report->rows = grown;
    report->cap_rows = cap;
  }
  report->rows[report->n_rows++] = *row;
  precis_row_init(row);
  return PRECIS_OK;
}

long precis_report_unjudged_logit_criterion(const precis_report *report, const precis_criteria *criteria) {
  for (size_t c = 0; criteria && c < criteria->count; c++) {
    precis_metric_id id = criteria->items[c].metric;
    if (!precis_metric_is_logit(id)) continue;
    bool judged = false;
    for (size_t i = 0; i < report->n_rows && !judged; i++) judged = report->rows[i].error[id].present;
    if (!judged) return (long)c;
  }
  return -1;
}

const precis_row *precis_report_find_row(const precis_report *report, const char *workload, const char *recipe) {
  for (size_t i = 0; i < report->n_rows; i++)
    if (report->rows[i].workload && report->rows[i].recipe && strcmp(report->rows[i].workload, workload) == 0 &&
        strcmp(report->rows[i].recipe, recipe) == 0)
      return &report->rows[i];
  return NULL;
}

const precis_row *precis_report_find_spec(const precis_report *report, const char *workload, const char *spec) {
  for (size_t i = 0; i < report->n_rows; i++)
    if (report->rows[i].workload && report->rows[i].spec && strcmp(report->rows[i].workload, workload) == 0 &&
        strcmp(report->rows[i].spec, spec) == 0)
      return &report->rows[i];
  return NULL;
}
