/* report.md: the environment, the settings, a table per workload with verdicts, and the failures
 * explained. Every string from a dataset or a row goes through precis_buf_markdown. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "report.h"
#include "recommend.h"
#include "report_util.h"

static void md_kv_table(precis_buf *b, const precis_kv_list *list) {
  precis_buf_append(b, "| key | value |\n|---|---|\n");
  for (size_t i = 0; i < list->count; i++) {
    if (strcmp(list->items[i].key, "parts") == 0) continue; /* its own table (md_parts) */
    precis_buf_append(b, "| ");
    precis_buf_markdown(b, list->items[i].key);
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, list->items[i].value ? list->items[i].value : "null");
    precis_buf_append(b, " |\n");
  }
  precis_buf_append(b, "\n");
}

/* A report gathered from parts (docs/scale-out.md): one line per part, where it ran and on what. */
static void md_parts(precis_buf *b, const precis_report *report) {
  const char *text = precis_kv_get(&report->environment, "parts");
  cJSON *parts = text ? cJSON_Parse(text) : NULL;
  if (!cJSON_IsArray(parts)) {
    cJSON_Delete(parts);
    return;
  }
  /* host: the gatherer's name for it, else the part's own hostname (merge); from: how a worker
   * ended (devices, MPI) or the report it came from (merge). */
  static const char *const keys[] = {"part", "host", "rank", "backend", "device", "cpu", "precis_commit", "from"};
  precis_buf_append(b, "### Parts\n\nEach row's `part` says which of these measured it.\n\n| rows |");
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) precis_buf_appendf(b, " %s |", keys[k]);
  precis_buf_append(b, "\n|---|");
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) precis_buf_append(b, "---|");
  precis_buf_append(b, "\n");
  const cJSON *part;
  cJSON_ArrayForEach(part, parts) {
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(part, "part");
    size_t rows = 0;
    for (size_t i = 0; cJSON_IsNumber(index) && i < report->n_rows; i++) rows += report->rows[i].part == index->valueint;
    precis_buf_appendf(b, "| %zu |", rows);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(part, keys[k]);
      if (!v && strcmp(keys[k], "host") == 0) v = cJSON_GetObjectItemCaseSensitive(part, "hostname");
      if (strcmp(keys[k], "from") == 0) {
        v = cJSON_GetObjectItemCaseSensitive(part, "worker");
        if (!v) v = cJSON_GetObjectItemCaseSensitive(part, "source");
      }
      precis_buf_append(b, " ");
      if (cJSON_IsString(v)) precis_buf_markdown(b, v->valuestring);
      else if (cJSON_IsNumber(v)) precis_buf_appendf(b, "%d", v->valueint);
      else precis_buf_append(b, "-");
      precis_buf_append(b, " |");
    }
    precis_buf_append(b, "\n");
  }
  precis_buf_append(b, "\n");
  cJSON_Delete(parts);
}

static void md_sig(precis_buf *b, double v) {
  char num[40];
  precis_fmt_sig(num, sizeof num, v, 3);
  precis_buf_markdown(b, num);
}

static void md_metric(precis_buf *b, const precis_row *row, precis_metric_id id) {
  if (row->status != PRECIS_ROW_OK) precis_buf_append(b, "-");
  else if (!row->error[id].present) precis_buf_append(b, id == PRECIS_METRIC_SQNR_DB ? "exact" : "null");
  else md_sig(b, row->error[id].worst);
}

static void md_criteria(precis_buf *b, const precis_criteria *criteria) {
  for (size_t i = 0; i < criteria->count; i++) {
    char text[96];
    precis_criterion_format(&criteria->items[i], text, sizeof text);
    if (i) precis_buf_append(b, ", ");
    precis_buf_markdown(b, text);
  }
  if (criteria->count == 0) precis_buf_append(b, "-");
}

/* The Ozaki slices sweep: error against slices and time, beside fp64 when it ran. */
static void md_sweep(precis_buf *b, const precis_report *report, const char *workload, bool cpu) {
  precis_sweep_point points[64];
  const precis_row *fp64;
  size_t n = precis_report_slice_sweep(report, workload, points, 64, &fp64);
  if (n < 2) return;
  precis_buf_appendf(b, "Slices sweep (Ozaki scheme, docs/high-precision.md):\n\n"
                        "| slices | int8 GEMMs | recipe | rel_fro | max_cw | median ms%s | verdict |\n"
                        "|---:|---:|---|---:|---:|---:|---|\n",
                     cpu ? " (CPU)" : "");
  for (size_t i = 0; i <= n; i++) {
    const precis_row *row = i < n ? points[i].row : fp64;
    if (!row) break;
    if (i < n) precis_buf_appendf(b, "| %d | %d | ", points[i].slices, points[i].slices * (points[i].slices + 1) / 2);
    else precis_buf_append(b, "| - | - | ");
    precis_buf_markdown(b, row->recipe);
    precis_buf_append(b, " | ");
    md_metric(b, row, PRECIS_METRIC_REL_FRO);
    precis_buf_append(b, " | ");
    md_metric(b, row, PRECIS_METRIC_MAX_CW);
    precis_buf_append(b, " | ");
    md_sig(b, row->time.median_ms);
    precis_buf_append(b, " | ");
    const char *verdict = precis_verdict_str(row->verdict);
    precis_buf_append(b, row->verdict == PRECIS_VERDICT_FAIL ? "**fail**" : verdict ? verdict : "-");
    precis_buf_append(b, " |\n");
  }
  precis_buf_append(b, "\n");
}

static void md_workload(precis_buf *b, const precis_report *report, const char *workload, bool cpu) {
  long min_samples = precis_report_min_samples(report);
  const precis_row *first = NULL;
  for (size_t i = 0; i < report->n_rows && !first; i++)
    if (strcmp(report->rows[i].workload, workload) == 0) first = &report->rows[i];
  precis_buf_append(b, "### ");
  precis_buf_markdown(b, workload);
  precis_buf_appendf(b, " (m=%lld, n=%lld, k=%lld, batch=%lld)\n\n", first->m, first->n, first->k, first->batch);
  if (first->description && first->description[0]) {
    precis_buf_markdown(b, first->description);
    precis_buf_append(b, "\n\n");
  }
  precis_buf_appendf(b,
                     "| recipe | status | verdict | rel_fro | max_abs | max_rel | max_cw | sqnr_db | nonfinite | "
                     "median ms%s | p95 ms | TFLOP/s | tensor | peak | criteria |\n"
                     "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
                     cpu ? " (CPU)" : "");
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0) continue;
    char bytes[32];
    precis_buf_append(b, "| ");
    precis_buf_markdown(b, row->recipe);
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, precis_row_status_str(row->status));
    precis_buf_append(b, " | ");
    const char *verdict = precis_verdict_str(row->verdict);
    precis_buf_append(b, row->verdict == PRECIS_VERDICT_FAIL ? "**fail**" : verdict ? verdict : "-");
    static const precis_metric_id shown[] = {PRECIS_METRIC_REL_FRO, PRECIS_METRIC_MAX_ABS, PRECIS_METRIC_MAX_REL,
                                             PRECIS_METRIC_MAX_CW, PRECIS_METRIC_SQNR_DB, PRECIS_METRIC_NONFINITE};
    for (size_t j = 0; j < sizeof shown / sizeof shown[0]; j++) {
      precis_buf_append(b, " | ");
      md_metric(b, row, shown[j]);
    }
    precis_buf_append(b, " | ");
    md_sig(b, row->time.median_ms);
    if (precis_row_few_samples(row, min_samples))
      precis_buf_appendf(b, " **(%ld samples < --min-samples %ld)**", row->time.samples, min_samples);
    precis_buf_append(b, " | ");
    md_sig(b, row->time.p95_ms);
    precis_buf_append(b, " | ");
    md_sig(b, row->tflops);
    precis_buf_append(b, " | ");
    precis_fmt_bytes(bytes, sizeof bytes, row->memory.tensor_bytes);
    precis_buf_append(b, bytes);
    precis_buf_append(b, " | ");
    precis_fmt_bytes(bytes, sizeof bytes, precis_row_peak_bytes(row));
    precis_buf_append(b, bytes);
    precis_buf_append(b, " | ");
    md_criteria(b, &row->criteria);
    precis_buf_append(b, " |\n");
  }
  precis_buf_append(b, "\n");
  md_sweep(b, report, workload, cpu);
}

static void md_failures(precis_buf *b, const precis_report *report) {
  size_t count = 0;
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (row->status == PRECIS_ROW_OK && row->verdict != PRECIS_VERDICT_FAIL) continue;
    if (count++ == 0) precis_buf_append(b, "## Failures\n\n");
    precis_buf_append(b, "- **");
    precis_buf_markdown(b, row->workload);
    precis_buf_append(b, " / ");
    precis_buf_markdown(b, row->recipe);
    precis_buf_append(b, "**: ");
    if (row->status != PRECIS_ROW_OK) {
      precis_buf_markdown(b, precis_row_status_str(row->status));
      precis_buf_append(b, " - ");
      precis_buf_markdown(b, row->reason ? row->reason : "(no reason recorded)");
    } else {
      precis_buf_append(b, "criteria not met: ");
      precis_buf_markdown(b, row->verdict_detail ? row->verdict_detail : "(no detail recorded)");
    }
    precis_buf_append(b, "\n");
  }
  if (count) precis_buf_append(b, "\n");
}

static void md_recipes(precis_buf *b, const precis_report *report) {
  precis_buf_append(b, "## Recipes\n\n| recipe | spec | what was run |\n|---|---|---|\n");
  size_t n;
  const char **names = precis_report_recipe_names(report, &n);
  for (size_t i = 0; names && i < n; i++) {
    const precis_row *row = NULL;
    for (size_t j = 0; j < report->n_rows && !row; j++)
      if (strcmp(report->rows[j].recipe, names[i]) == 0 && report->rows[j].recipe_description) row = &report->rows[j];
    precis_buf_append(b, "| ");
    precis_buf_markdown(b, names[i]);
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, row && row->spec ? row->spec : "-");
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, row ? row->recipe_description : "-");
    precis_buf_append(b, " |\n");
  }
  free(names);
  precis_buf_append(b, "\n");
}

/* A model's dataset: one line per layer, one column per recipe, so that 200 layers read as one
 * table rather than 200 sections. */
static void md_layers(precis_buf *b, const precis_report *report) {
  size_t n_layers = 0, n_recipes = 0;
  const char **layers = precis_report_layer_workloads(report, &n_layers);
  if (!layers) return;
  const char **recipes = precis_report_recipe_names(report, &n_recipes);
  precis_buf_appendf(b, "\n## Per layer\n\n%zu layers of a model (precis import --model), in model order: rel_fro, worst "
                        "over held-out samples, of each layer under each recipe; ✗ marks a case that fails its "
                        "criteria, a status word one that did not run. Passing layers per recipe:", n_layers);
  for (size_t r = 0; recipes && r < n_recipes; r++) {
    size_t passing = 0;
    for (size_t l = 0; l < n_layers; l++) {
      const precis_row *row = precis_report_find_row(report, layers[l], recipes[r]);
      passing += row && row->status == PRECIS_ROW_OK && row->verdict == PRECIS_VERDICT_PASS;
    }
    precis_buf_append(b, r ? ", " : " ");
    precis_buf_markdown(b, recipes[r]);
    precis_buf_appendf(b, " %zu/%zu", passing, n_layers);
  }
  precis_buf_append(b, ". `precis plan report.json --require ...` picks a recipe per layer.\n\n| # | layer | k x n |");
  for (size_t r = 0; recipes && r < n_recipes; r++) {
    precis_buf_append(b, " ");
    precis_buf_markdown(b, recipes[r]);
    precis_buf_append(b, " |");
  }
  precis_buf_append(b, "\n|---:|---|---:|");
  for (size_t r = 0; r < n_recipes; r++) precis_buf_append(b, "---:|");
  precis_buf_append(b, "\n");
  for (size_t l = 0; l < n_layers; l++) {
    const precis_row *any = NULL;
    for (size_t r = 0; recipes && r < n_recipes && !any; r++) any = precis_report_find_row(report, layers[l], recipes[r]);
    precis_buf_appendf(b, "| %zu | ", l + 1);
    precis_buf_markdown(b, precis_report_layer_of(report, layers[l]));
    if (any) precis_buf_appendf(b, " | %lld x %lld |", any->k, any->n);
    else precis_buf_append(b, " | - |");
    for (size_t r = 0; recipes && r < n_recipes; r++) {
      const precis_row *row = precis_report_find_row(report, layers[l], recipes[r]);
      precis_buf_append(b, " ");
      if (!row) precis_buf_append(b, "-");
      else if (row->status != PRECIS_ROW_OK) precis_buf_append(b, precis_row_status_str(row->status));
      else {
        md_metric(b, row, PRECIS_METRIC_REL_FRO);
        if (row->verdict == PRECIS_VERDICT_FAIL) precis_buf_append(b, " ✗");
      }
      precis_buf_append(b, " |");
    }
    precis_buf_append(b, "\n");
  }
  precis_buf_append(b, "\n");
  free(recipes);
  free(layers);
}

/* Rows of logit workloads (an imported lm_head): the model's output distribution, per recipe. */
static void md_logits(precis_buf *b, const precis_report *report) {
  size_t shown = 0;
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (!row->error[PRECIS_LOGIT_METRIC_FIRST].present) continue;
    if (shown++ == 0)
      precis_buf_append(b, "\n## Logits\n\nWorkloads whose output is the model's logits (each output row one token's): "
                           "KL divergence per token both ways (softmax in float64) and top-1 agreement with the "
                           "reference logits, worst over held-out samples.\n\n| workload | recipe | kl_mean | kl_p99 | "
                           "kl_max | rkl_mean | rkl_max | top1_agree |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    precis_buf_append(b, "| ");
    precis_buf_markdown(b, row->workload);
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, row->recipe);
    static const precis_metric_id ids[] = {PRECIS_METRIC_KL_MEAN, PRECIS_METRIC_KL_P99, PRECIS_METRIC_KL_MAX,
                                           PRECIS_METRIC_RKL_MEAN, PRECIS_METRIC_RKL_MAX, PRECIS_METRIC_TOP1_AGREE};
    for (size_t j = 0; j < sizeof ids / sizeof ids[0]; j++) {
      precis_buf_append(b, " | ");
      md_metric(b, row, ids[j]);
    }
    precis_buf_append(b, " |\n");
  }
}

static char *markdown_text(const precis_report *report) {
  precis_buf b;
  precis_buf_init(&b);
  bool cpu = precis_report_is_cpu_emulation(report);
  precis_buf_append(&b, "# precis report\n\n");
  if (!report->complete)
    precis_buf_append(&b, "> **INCOMPLETE REPORT**: the run ended early (interrupted or stopped by an error); only the "
                          "rows below were measured.\n\n");
  precis_buf_append(&b, "Backend: **");
  precis_buf_markdown(&b, precis_report_backend(report));
  precis_buf_append(&b, "**");
  if (cpu)
    precis_buf_append(&b, ". Timings are **CPU timings** of a software emulation of the number formats, not GPU "
                          "figures; fp16/bf16/tf32, fp8 fast accumulation and the block-scaled MMAs follow the target's "
                          "tensor-core accumulator (each row's details name the model), other float recipes use FP32 "
                          "products and sums, INT8 is exact.");
  precis_buf_appendf(&b, "\n\nprecis %s", report->tool_version ? report->tool_version : "?");
  if (report->tool_commit) {
    precis_buf_append(&b, " (commit ");
    precis_buf_markdown(&b, report->tool_commit);
    precis_buf_append(&b, ")");
  }
  precis_buf_append(&b, ". Dataset: ");
  precis_buf_markdown(&b, report->dataset_path ? report->dataset_path : "-");
  precis_buf_append(&b, ", id ");
  precis_buf_markdown(&b, report->dataset_id ? report->dataset_id : "-");
  precis_buf_append(&b, ".\n\n");
  precis_recommendation rec;
  precis_recommend_options options = {.objective = PRECIS_OBJECTIVE_LATENCY, .tie_threshold = PRECIS_TIE_THRESHOLD_DEFAULT, .report_path = "report.json"};
  if (report->n_rows > 0 && precis_recommend(report, &options, &rec) == PRECIS_OK) {
    char *answer = precis_recommendation_headline(&rec);
    precis_buf_append(&b, "## Answer\n\n");
    /* One paragraph per line of the headline. */
    for (char *line = answer, *next; line && *line; line = next) {
      next = strchr(line, '\n');
      if (next) *next++ = '\0';
      precis_buf_markdown(&b, line);
      precis_buf_append(&b, "\n\n");
    }
    free(answer);
    precis_recommendation_free(&rec);
  }
  precis_buf_append(&b, "## Settings\n\n- recipes: ");
  for (size_t i = 0; i < report->n_recipes; i++) {
    if (i) precis_buf_append(&b, ", ");
    precis_buf_markdown(&b, report->recipes[i]);
  }
  precis_buf_append(&b, "\n- criteria: ");
  if (report->n_criteria == 0) precis_buf_append(&b, "the recipe defaults (listed per row)");
  for (size_t i = 0; i < report->n_criteria; i++) {
    if (i) precis_buf_append(&b, ", ");
    precis_buf_markdown(&b, report->criteria[i]);
  }
  precis_buf_append(&b, "\n");
  for (size_t i = 0; i < report->settings.count; i++) {
    precis_buf_append(&b, "- ");
    precis_buf_markdown(&b, report->settings.items[i].key);
    precis_buf_append(&b, ": ");
    precis_buf_markdown(&b, report->settings.items[i].value ? report->settings.items[i].value : "null");
    precis_buf_append(&b, "\n");
  }
  md_layers(&b, report);
  md_logits(&b, report);
  precis_buf_append(&b, "\n## Results\n\nError columns are the worst over held-out samples. ");
  precis_buf_append(&b, "`peak` is the evaluator's tracked peak allocation (tensor bytes when not tracked).\n\n");
  size_t n_workloads;
  const char **workloads = precis_report_workloads(report, &n_workloads);
  for (size_t i = 0; workloads && i < n_workloads; i++) md_workload(&b, report, workloads[i], cpu);
  free(workloads);
  if (report->n_rows == 0) precis_buf_append(&b, "No rows were measured.\n\n");
  md_failures(&b, report);
  md_recipes(&b, report);
  precis_buf_append(&b, "## Environment\n\n");
  md_kv_table(&b, &report->environment);
  md_parts(&b, report);
  return precis_buf_take(&b);
}

precis_status precis_report_write_markdown(const precis_report *report, const char *path, bool force) {
  char *text = markdown_text(report);
  if (!text) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory formatting the Markdown report", path);
  precis_status st = precis_atomic_write_text(path, text, force);
  free(text);
  return st;
}
