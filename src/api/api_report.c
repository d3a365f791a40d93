/* libprecis: read a report back and run a dataset (include/precis/report.h). A report is read by
 * the results model's own reader (report/report.h), which validates every field; a run is the CLI's
 * `precis run` itself (cli/cmd_run.c), so that its options, files and exit codes are the
 * command's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/status.h"
#include "precis/cli.h"
#include "precis/report.h"
#include "report/report.h"
#include "report/results.h"

struct precis_results {
  precis_report model;
  char *json;
};

precis_status precis_results_read(const char *path, precis_results **out) {
  if (!out) return precis_fail(PRECIS_E_USAGE, "precis_results_read: no output");
  *out = NULL;
  if (!path) return precis_fail(PRECIS_E_USAGE, "report path: NULL");
  precis_results *r = calloc(1, sizeof *r);
  if (!r) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_report_init(&r->model);
  size_t len = 0;
  precis_status st = precis_report_read_json(path, &r->model);
  if (st == PRECIS_OK) st = precis_read_file(path, &r->json, &len);
  if (st != PRECIS_OK) {
    precis_results_free(r);
    return st;
  }
  *out = r;
  return PRECIS_OK;
}

void precis_results_free(precis_results *r) {
  if (!r) return;
  precis_report_free(&r->model);
  free(r->json);
  free(r);
}

const char *precis_results_json(const precis_results *r) { return r ? r->json : NULL; }
int precis_results_complete(const precis_results *r) { return r && r->model.complete; }
const char *precis_results_dataset_id(const precis_results *r) { return r ? r->model.dataset_id : NULL; }
size_t precis_results_row_count(const precis_results *r) { return r ? r->model.n_rows : 0; }

static double worst(const precis_row *row, precis_metric_id id) {
  return row->error[id].present ? row->error[id].worst : NAN;
}

precis_status precis_results_row(const precis_results *r, size_t index, precis_result_row *out) {
  if (!r || !out) return precis_fail(PRECIS_E_USAGE, "precis_results_row: NULL argument");
  if (index >= r->model.n_rows)
    return precis_fail(PRECIS_E_USAGE, "row %zu: the report has %zu rows", index, r->model.n_rows);
  const precis_row *row = &r->model.rows[index];
  memset(out, 0, sizeof *out);
  out->workload = row->workload;
  out->recipe = row->recipe;
  out->spec = row->spec;
  out->status = precis_row_status_str(row->status);
  out->reason = row->reason;
  out->verdict = precis_verdict_str(row->verdict);
  out->verdict_detail = row->verdict_detail;
  out->m = row->m, out->n = row->n, out->k = row->k, out->batch = row->batch;
  out->median_ms = row->time.median_ms;
  out->tflops = row->tflops;
  out->rel_fro_worst = worst(row, PRECIS_METRIC_REL_FRO);
  out->max_abs_worst = worst(row, PRECIS_METRIC_MAX_ABS);
  return PRECIS_OK;
}

/* ---------------------------------------------------------------- run */

static precis_status status_of_exit(int code) {
  switch (code) {
  case 0: return PRECIS_OK;
  case 2: return PRECIS_E_USAGE;
  case 3: return PRECIS_E_CRITERIA;
  case 130:
  case 143: return PRECIS_E_INTERRUPTED;
  default: return PRECIS_E_RUNTIME;
  }
}

/* The last non-empty line of text (the command's final word on stderr). */
static void last_line(const char *text, char *buf, size_t len) {
  buf[0] = '\0';
  if (!text) return;
  const char *end = text + strlen(text);
  while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) end--;
  const char *start = end;
  while (start > text && start[-1] != '\n') start--;
  size_t n = (size_t)(end - start);
  if (n >= len) n = len - 1;
  memcpy(buf, start, n);
  buf[n] = '\0';
}

/* fd 2 redirected into an unlinked temporary file for the duration of the command. */
typedef struct stderr_capture {
  int saved;
  FILE *file;
} stderr_capture;

static bool capture_begin(stderr_capture *c) {
  fflush(stderr);
  c->file = tmpfile();
  c->saved = c->file ? dup(STDERR_FILENO) : -1;
  if (c->saved < 0 || dup2(fileno(c->file), STDERR_FILENO) < 0) {
    if (c->saved >= 0) close(c->saved);
    if (c->file) fclose(c->file);
    c->file = NULL;
    c->saved = -1;
    return false;
  }
  return true;
}

static char *capture_end(stderr_capture *c) {
  fflush(stderr);
  dup2(c->saved, STDERR_FILENO);
  close(c->saved);
  char *text = NULL;
  long len = ftell(c->file);
  if (len >= 0 && fseek(c->file, 0, SEEK_SET) == 0 && (text = malloc((size_t)len + 1))) {
    size_t got = fread(text, 1, (size_t)len, c->file);
    text[got] = '\0';
  }
  fclose(c->file);
  return text;
}

precis_status precis_run(const precis_run_options *o, precis_results **out, int *exit_code, char **messages) {
  if (out) *out = NULL;
  if (exit_code) *exit_code = 2;
  if (messages) *messages = NULL;
  if (!o || !out) return precis_fail(PRECIS_E_USAGE, "precis_run: NULL argument");
  if (!o->output_dir || !o->output_dir[0])
    return precis_fail(PRECIS_E_USAGE, "output_dir: precis_run needs a report directory");
  if (o->n_require && !o->require) return precis_fail(PRECIS_E_USAGE, "require: %zu criteria without texts", o->n_require);
  if (o->n_extra_args && !o->extra_args)
    return precis_fail(PRECIS_E_USAGE, "extra_args: %zu arguments without texts", o->n_extra_args);
  size_t cap = 20 + 2 * o->n_require + o->n_extra_args;
  /* The command's argv, copied: a command may permute it (getopt) and takes char *. */
  char **argv = calloc(cap, sizeof *argv);
  if (!argv) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  int argc = 0;
  const char *fixed[] = {"precis", "run", "--quiet", "-o", o->output_dir};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[argc++] = precis_strdup(fixed[i]);
  const char *const options[][2] = {{"--recipes", o->recipes},
                                    {"--backend", o->backend},
                                    {"--workloads", o->workloads},
                                    {"--save-outputs", o->save_outputs}};
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
    if (options[i][1]) {
      argv[argc++] = precis_strdup(options[i][0]);
      argv[argc++] = precis_strdup(options[i][1]);
    }
  for (size_t i = 0; i < o->n_require; i++) {
    argv[argc++] = precis_strdup("--require");
    argv[argc++] = precis_strdup(o->require[i]);
  }
  if (o->force) argv[argc++] = precis_strdup("--force");
  if (o->gate) argv[argc++] = precis_strdup("--gate");
  for (size_t i = 0; i < o->n_extra_args; i++) argv[argc++] = precis_strdup(o->extra_args[i]);
  /* The dataset after "--", so that a path beginning with '-' is never an option. */
  if (o->dataset) {
    argv[argc++] = precis_strdup("--");
    argv[argc++] = precis_strdup(o->dataset);
  }
  bool copied = true;
  for (int i = 0; i < argc; i++) copied = copied && argv[i];
  if (!copied) {
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }

  stderr_capture cap_err;
  bool captured = capture_begin(&cap_err);
  int code = precis_main(argc, argv);
  char *text = captured ? capture_end(&cap_err) : NULL;
  for (int i = 0; i < argc; i++) free(argv[i]);
  free(argv);
  if (exit_code) *exit_code = code;

  precis_status st = status_of_exit(code);
  char line[1024];
  last_line(text, line, sizeof line);
  char *report_path = precis_asprintf("%s/report.json", o->output_dir);
  /* The report of a run that ended with rows (ok, a failed row, criteria not met, interrupted). */
  if (report_path && code != 2 && precis_path_exists(report_path)) {
    precis_status rs = precis_results_read(report_path, out);
    if (rs != PRECIS_OK && st == PRECIS_OK) st = rs;
  }
  free(report_path);
  if (code != 0) precis_fail(st, "%s", line[0] ? line : "precis run failed (no message)");
  if (messages) *messages = text;
  else free(text);
  return st;
}
