/* The results model: one in-memory structure for a run; every report format is a printer over it
 * (report_*.c), and report.json can be read back into it (recommend, compare). */
#ifndef PRECIS_RESULTS_H
#define PRECIS_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/escape.h" /* precis_strdup, precis_asprintf */
#include "numerics/criteria.h"
#include "numerics/metrics.h"
#include "base/status.h"

#define PRECIS_REPORT_FORMAT "precis-report"
#define PRECIS_REPORT_FORMAT_VERSION 1

/* An ordered key/value pair. value NULL prints as JSON null; is_number prints the value bare. */
typedef struct precis_kv {
  char *key;
  char *value;
  bool is_number;
} precis_kv;

typedef struct precis_kv_list {
  size_t count, capacity;
  precis_kv *items;
} precis_kv_list;

void precis_kv_set(precis_kv_list *list, const char *key, const char *value);     /* value may be NULL */
void precis_kv_set_number(precis_kv_list *list, const char *key, double value);  /* NaN -> null */
void precis_kv_set_int(precis_kv_list *list, const char *key, long long value);
/* A JSON array or object given as its text, written as it is (the reader keeps such values so). */
void precis_kv_set_json(precis_kv_list *list, const char *key, const char *json);
const char *precis_kv_get(const precis_kv_list *list, const char *key);          /* NULL when absent or null */
void precis_kv_free(precis_kv_list *list);

typedef enum precis_row_status {
  PRECIS_ROW_OK,
  PRECIS_ROW_UNSUPPORTED,
  PRECIS_ROW_DOES_NOT_FIT,
  PRECIS_ROW_FAILED,
} precis_row_status;
const char *precis_row_status_str(precis_row_status s); /* "ok", "unsupported", "does-not-fit", "failed" */
bool precis_row_status_parse(const char *s, precis_row_status *out);

typedef enum precis_verdict { PRECIS_VERDICT_NONE, PRECIS_VERDICT_PASS, PRECIS_VERDICT_FAIL } precis_verdict;
const char *precis_verdict_str(precis_verdict v); /* null (NONE), "pass", "fail" */

/* Latency statistics; every field NaN when absent (a row that did not run). */
typedef struct precis_timing {
  double min_ms, median_ms, mean_ms, p95_ms, p99_ms, stdev_ms;
  long samples;          /* timed samples kept */
  long calls_per_sample; /* GEMM calls per timed sample (the figures are per call) */
  double convert_ms;     /* converting/quantizing the inputs into the recipe's formats */
  double e2e_median_ms;  /* int8/fp8: quantize + GEMM + dequantize; else NaN */
  double *samples_ms;    /* every kept sample (per call), for latency distributions */
  size_t n_samples_ms;
} precis_timing;

/* Bytes; -1 when a view does not exist on the backend. */
typedef struct precis_memory {
  long long tensor_bytes;       /* analytic: inputs, outputs and scales in the recipe's formats */
  long long tracked_peak_bytes; /* the evaluator's own allocations at their peak (incl. workspace) */
  long long device_baseline_bytes;
  long long device_peak_bytes;
  long long untracked_bytes;    /* device_peak - device_baseline - tracked_peak */
  long long host_peak_rss_bytes;
} precis_memory;

/* The loss change a row's error predicts (DESIGN §17, docs/criteria.md), from the dataset's
 * gradients g = dL/dY: per held-out sample s, taylor_s = sum g (C - C_ref) and fisher_s =
 * 1/2 sum (g (C - C_ref))^2; mean over samples, and the worst (taylor: largest magnitude, sign kept;
 * fisher: the largest). present only when the dataset has gradients. */
typedef struct precis_loss_change {
  bool present;
  double taylor_mean, taylor_worst, fisher_mean, fisher_worst;
} precis_loss_change;

typedef struct precis_row {
  char *workload;
  char *description;
  char *layer;              /* the dataset's `layer` attribute (precis import --model); NULL otherwise */
  char *recipe;             /* the name given: a preset's, or the canonical spec */
  char *spec;               /* the canonical spec (DESIGN §11): rows pair across reports by it */
  char *recipe_description; /* precis_recipe.description plus what this run chose */
  long long m, n, k, batch;
  precis_row_status status;
  char *reason;             /* NULL when status is ok */
  precis_verdict verdict;
  char *verdict_detail;     /* e.g. "rel_fro=0.031 > 0.01 (3.1x over)"; NULL when passing */
  precis_criteria criteria; /* the criteria this row was judged against */
  precis_metric_value error[PRECIS_METRIC_ALL]; /* the logit metrics only on logit rows */
  precis_timing time;
  double tflops;            /* 2*m*n*k*batch / median; NaN when absent */
  precis_loss_change loss;  /* predicted loss change (gradients in the dataset); present false otherwise */
  precis_memory memory;
  precis_kv_list details;   /* recipe details: scales granularity, calibration, algorithm, padding */
  /* Where the case ran (DESIGN §13), so that a report gathered from shards, ranks or devices says
   * which machine measured each row: host always; part the 1-based part of a split run (0: a run
   * in one part); rank the MPI rank and device the CUDA device ordinal (-1 where they do not apply:
   * no MPI, the cpu backend). */
  char *host;
  int part, rank, device;
  /* The architecture whose arithmetic the row stands for (DESIGN §19): --target, sm_90 by default
   * on the cpu, the device's on cuda ("sm_90"); NULL in reports from before targets. */
  char *target;
} precis_row;

typedef struct precis_report {
  int format_version;
  bool complete;            /* false when interrupted or when a run ended early */
  char *tool_version;
  char *tool_commit;
  precis_kv_list environment; /* DESIGN §6: backend, device, versions, cpu, utc time, command line */
  char *dataset_path;
  char *dataset_id;    /* the digest of the dataset's contents (precis_dataset_content_id) */
  char *dataset_label; /* the writer's own label (the file's dataset_id attribute), or NULL */
  precis_kv_list settings;    /* scalar settings (backend, timing targets, int8 activation scales) */
  char **recipes; size_t n_recipes;
  char **criteria; size_t n_criteria; /* --require expressions as given (empty: recipe defaults) */
  precis_row *rows;
  size_t n_rows, cap_rows;
} precis_report;

void precis_row_init(precis_row *row);   /* every number NaN / -1, strings NULL, status failed */
void precis_row_free(precis_row *row);
void precis_report_init(precis_report *report);
void precis_report_free(precis_report *report);
/* Moves *row into the report (row is reset). */
precis_status precis_report_add_row(precis_report *report, precis_row *row);
const precis_row *precis_report_find_row(const precis_report *report, const char *workload, const char *recipe);
/* The row of a workload with this canonical spec, or NULL. */
const precis_row *precis_report_find_spec(const precis_report *report, const char *workload, const char *spec);
/* The index of the first criterion on a logit metric (kl_mean, top1_agree, ...) that no row of the
 * report carries, or -1. Such a criterion judges nothing (it applies to logit rows only), so a
 * gate built on it would pass every row without a word: the commands refuse it. */
long precis_report_unjudged_logit_criterion(const precis_report *report, const precis_criteria *criteria);

#endif
