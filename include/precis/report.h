/* libprecis: run a dataset and read a report back (the results model, DESIGN §8). A run is `precis
 * run` itself: the same code, options and files (report.json, .csv, .md, .html in the output
 * directory), then its report.json read back as any report is. */
#ifndef PRECIS_PUBLIC_REPORT_H
#define PRECIS_PUBLIC_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct precis_results precis_results; /* a report, read back and validated */

/* Reads and validates report.json (PRECIS_E_INPUT naming the file and the field otherwise). */
precis_status precis_results_read(const char *path, precis_results **out);
void precis_results_free(precis_results *r);

/* The document as the file holds it (JSON text; the memory belongs to r). */
const char *precis_results_json(const precis_results *r);
int precis_results_complete(const precis_results *r);     /* false when the run was interrupted */
const char *precis_results_dataset_id(const precis_results *r);
size_t precis_results_row_count(const precis_results *r);

/* The fields of a row a client most often needs (the rest is in the JSON); strings belong to r
 * (NULL when the row has none), numbers NaN when absent. */
typedef struct precis_result_row {
  const char *workload, *recipe, *spec, *status, *reason, *verdict, *verdict_detail;
  int64_t m, n, k, batch;
  double median_ms, tflops;
  double rel_fro_worst, max_abs_worst;
} precis_result_row;
precis_status precis_results_row(const precis_results *r, size_t index, precis_result_row *out);

/* What precis_run runs: `precis run DATASET --quiet` with these options (NULL / 0: the command's
 * default). */
typedef struct precis_run_options {
  const char *dataset;       /* NULL: the built-in default dataset */
  const char *output_dir;    /* required: where the reports go */
  const char *recipes;       /* --recipes (NULL: all) */
  const char *const *require; /* --require, n_require times */
  size_t n_require;
  const char *backend;       /* --backend auto|cpu|cuda (NULL: auto) */
  const char *workloads;     /* --workloads */
  const char *save_outputs;  /* --save-outputs FILE */
  int force;                 /* --force */
  int gate;                  /* --gate */
  /* Further `precis run` options as on its command line ("--max-time-ms", "50", ...). */
  const char *const *extra_args;
  size_t n_extra_args;
} precis_run_options;

/* Runs, then reads output_dir/report.json into *out when the run wrote one (also when a row failed
 * or the criteria were not met: the report says which). *exit_code gets the command's exit code, and
 * the status follows it: 0 PRECIS_OK, 3 PRECIS_E_CRITERIA, 2 PRECIS_E_USAGE, 1 PRECIS_E_RUNTIME,
 * 130/143 PRECIS_E_INTERRUPTED. What the command printed on stderr is captured (the process's
 * file descriptor 2 is redirected for the duration of the call) and, when messages is not NULL,
 * handed over (free with precis_free); its last line is precis_last_error() on failure. */
precis_status precis_run(const precis_run_options *options, precis_results **out, int *exit_code, char **messages);

#ifdef __cplusplus
}
#endif

#endif
