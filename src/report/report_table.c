/* The compact table on stdout: one line per (workload, recipe), the figures a user reads first.
 * Strings are sanitized for the terminal (no control characters) and cut to a column width. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "numerics/recipe.h"
#include "report.h"
#include "recommend.h"
#include "report_util.h"

enum { WORKLOAD_WIDTH_MAX = 28, RECIPE_WIDTH_MAX = 12 };

static void cell(precis_buf *b, const char *text, size_t width, bool right) {
  precis_buf cut;
  precis_buf_init(&cut);
  precis_buf_terminal(&cut, text, width);
  const char *s = cut.data ? cut.data : "";
  size_t len = strlen(s);
  size_t pad = len < width ? width - len : 0;
  if (right)
    for (size_t i = 0; i < pad; i++) precis_buf_append(b, " ");
  precis_buf_append(b, s);
  if (!right)
    for (size_t i = 0; i < pad; i++) precis_buf_append(b, " ");
  precis_buf_append(b, "  ");
  precis_buf_free(&cut);
}

/* A recipe name too long for its column (a spec given field by field) is shown as specN, and the
 * legend under the table gives the full spec. N is the position among such names. */
static size_t long_name_index(const char **long_names, size_t n_long, const char *name) {
  for (size_t i = 0; i < n_long; i++)
    if (strcmp(long_names[i], name) == 0) return i + 1;
  return 0;
}

static void end_line(precis_buf *b) {
  while (!b->failed && b->len > 0 && b->data[b->len - 1] == ' ') b->data[--b->len] = '\0';
  precis_buf_append(b, "\n");
}

void precis_report_print_table(const precis_report *report, FILE *out) {
  bool cpu = precis_report_is_cpu_emulation(report);
  size_t workload_width = strlen("workload"), recipe_width = strlen("recipe");
  for (size_t i = 0; i < report->n_rows; i++) {
    size_t w = report->rows[i].workload ? strlen(report->rows[i].workload) : 0;
    size_t r = report->rows[i].recipe ? strlen(report->rows[i].recipe) : 0;
    if (w > workload_width) workload_width = w;
    if (r > recipe_width) recipe_width = r;
  }
  if (workload_width > WORKLOAD_WIDTH_MAX) workload_width = WORKLOAD_WIDTH_MAX;
  if (recipe_width > RECIPE_WIDTH_MAX) recipe_width = RECIPE_WIDTH_MAX;
  size_t n_names = 0, n_long = 0;
  const char **long_names = precis_report_recipe_names(report, &n_names);
  for (size_t i = 0; long_names && i < n_names; i++)
    if (strlen(long_names[i]) > RECIPE_WIDTH_MAX) long_names[n_long++] = long_names[i];

  precis_buf b;
  precis_buf_init(&b);
  if (!report->complete) precis_buf_append(&b, "INCOMPLETE: the run ended early; only the rows below were measured.\n");
  precis_buf_append(&b, "backend: ");
  precis_buf_terminal(&b, precis_report_backend(report), 40);
  if (cpu) precis_buf_append(&b, " (CPU timings of an emulation, not GPU figures)");
  precis_buf_append(&b, "\n");
  cell(&b, "workload", workload_width, false);
  cell(&b, "recipe", recipe_width, false);
  cell(&b, "status", 12, false);
  cell(&b, "verdict", 7, false);
  cell(&b, "rel_fro", 9, true);
  cell(&b, "max_cw", 9, true);
  cell(&b, "median_ms", 10, true);
  cell(&b, "p95_ms", 10, true);
  cell(&b, "TFLOP/s", 8, true);
  cell(&b, "peak", 10, true);
  end_line(&b);
  long min_samples = precis_report_min_samples(report);
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    char rel[32], cw[32], median[32], p95[32], tflops[32], peak[32];
    bool few = precis_row_few_samples(row, min_samples);
    bool ok = row->status == PRECIS_ROW_OK;
    precis_fmt_sig(rel, sizeof rel, ok && row->error[PRECIS_METRIC_REL_FRO].present ? row->error[PRECIS_METRIC_REL_FRO].worst : NAN, 3);
    precis_fmt_sig(cw, sizeof cw, ok && row->error[PRECIS_METRIC_MAX_CW].present ? row->error[PRECIS_METRIC_MAX_CW].worst : NAN, 3);
    precis_fmt_sig(median, sizeof median, row->time.median_ms, 4);
    if (few) snprintf(median + strlen(median), sizeof median - strlen(median), "!");
    precis_fmt_sig(p95, sizeof p95, row->time.p95_ms, 4);
    precis_fmt_sig(tflops, sizeof tflops, row->tflops, 3);
    precis_fmt_bytes(peak, sizeof peak, precis_row_peak_bytes(row));
    const char *verdict = precis_verdict_str(row->verdict);
    cell(&b, row->workload, workload_width, false);
    size_t long_index = row->recipe ? long_name_index(long_names, n_long, row->recipe) : 0;
    char label[32];
    snprintf(label, sizeof label, "spec%zu", long_index);
    cell(&b, long_index ? label : row->recipe, recipe_width, false);
    cell(&b, precis_row_status_str(row->status), 12, false);
    cell(&b, verdict ? verdict : "-", 7, false);
    cell(&b, rel, 9, true);
    cell(&b, cw, 9, true);
    cell(&b, median, 10, true);
    cell(&b, p95, 10, true);
    cell(&b, tflops, 8, true);
    cell(&b, peak, 10, true);
    end_line(&b);
    if (!ok || row->verdict == PRECIS_VERDICT_FAIL) {
      precis_buf_append(&b, "    ");
      precis_buf_terminal(&b, ok ? row->verdict_detail : row->reason, 200);
      precis_buf_append(&b, "\n");
    }
    if (few)
      precis_buf_appendf(&b, "    ! only %ld timed sample%s, fewer than --min-samples %ld (--max-time-ms ran out): a rough latency\n",
                         row->time.samples, row->time.samples == 1 ? "" : "s", min_samples);
  }
  for (size_t i = 0; i < n_long; i++) {
    precis_buf_appendf(&b, "spec%zu = ", i + 1);
    precis_buf_terminal(&b, long_names[i], 0);
    precis_buf_append(&b, "\n");
  }
  free(long_names);
  if (!report->complete) precis_buf_append(&b, "INCOMPLETE report (see above).\n");
  char *text = precis_buf_take(&b);
  if (text) fputs(text, out);
  else fputs("precis: out of memory printing the table\n", out);
  free(text);
}

void precis_report_print_answer(const precis_report *report, const char *report_path, FILE *out) {
  precis_recommendation rec;
  precis_recommend_options options = {.objective = PRECIS_OBJECTIVE_LATENCY, .tie_threshold = PRECIS_TIE_THRESHOLD_DEFAULT, .report_path = report_path};
  if (report->n_rows == 0 || precis_recommend(report, &options, &rec) != PRECIS_OK) return;
  char *text = precis_recommendation_headline(&rec);
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_append(&b, "\n");
  /* The headline is already sanitized for a terminal piece by piece; keep its line breaks. */
  precis_buf_append(&b, text ? text : "");
  char *all = precis_buf_take(&b);
  if (all) fputs(all, out);
  free(all);
  free(text);
  precis_recommendation_free(&rec);
}
