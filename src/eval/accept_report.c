/* Printers of the acceptance result (accept.h): accept.json (the source of truth), a Markdown and an
 * HTML section, and the terminal summary. Every string that came from a dataset or the command line
 * is escaped for its format. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/accept.h"
#include "base/fileio.h"
#include "precis_version.h"
#include "report/report_util.h"

/* ---- JSON ------------------------------------------------------------------------------------- */

static void add_number(cJSON *o, const char *key, double v) {
  if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
  else cJSON_AddNullToObject(o, key);
}

/* Byte counts as exact integers; negative (a view that does not exist) as null. */
static void add_bytes(cJSON *o, const char *key, long long v) {
  if (v < 0) {
    cJSON_AddNullToObject(o, key);
    return;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  cJSON_AddItemToObject(o, key, cJSON_CreateRaw(buf));
}

static void add_signed_bytes(cJSON *o, const char *key, long long v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", v);
  cJSON_AddItemToObject(o, key, cJSON_CreateRaw(buf));
}

/* A signed difference of two byte counts, null when either is missing. */
static void add_difference(cJSON *o, const char *key, long long measured, long long predicted) {
  if (measured < 0 || predicted < 0) {
    cJSON_AddNullToObject(o, key);
    return;
  }
  add_signed_bytes(o, key, measured - predicted);
}

static void add_string(cJSON *o, const char *key, const char *s) {
  if (s) cJSON_AddStringToObject(o, key, s);
  else cJSON_AddNullToObject(o, key);
}

static cJSON *kv_to_json(const precis_kv_list *list) {
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; o && i < list->count; i++) {
    const precis_kv *kv = &list->items[i];
    if (!kv->value) cJSON_AddNullToObject(o, kv->key);
    else if (kv->is_number) cJSON_AddItemToObject(o, kv->key, cJSON_CreateRaw(kv->value));
    else cJSON_AddStringToObject(o, kv->key, kv->value);
  }
  return o;
}

static cJSON *point_to_json(const precis_accept_point *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "batch", (double)p->batch);
  cJSON_AddNumberToObject(o, "workers", p->workers);
  cJSON_AddNumberToObject(o, "repeat", p->repeat);
  cJSON_AddNumberToObject(o, "rows", (double)p->rows);
  cJSON_AddStringToObject(o, "status", precis_row_status_str(p->status));
  add_string(o, "reason", p->reason);
  cJSON *lat = cJSON_AddObjectToObject(o, "latency");
  cJSON_AddNumberToObject(lat, "samples", (double)p->samples);
  add_number(lat, "min_ms", p->min_ms);
  add_number(lat, "median_ms", p->median_ms);
  add_number(lat, "mean_ms", p->mean_ms);
  add_number(lat, "p95_ms", p->p95_ms);
  add_number(lat, "p99_ms", p->p99_ms);
  add_number(lat, "max_ms", p->max_ms);
  cJSON_AddBoolToObject(lat, "meets_target", p->meets_latency);
  add_number(o, "throughput_tflops", p->throughput_tflops);
  add_number(o, "wall_ms", p->wall_ms);
  add_number(o, "overlap", p->overlap);
  cJSON *mem = cJSON_AddObjectToObject(o, "memory");
  cJSON *budget = cJSON_AddObjectToObject(mem, "budget");
  add_bytes(budget, "tensor_bytes_per_worker", p->tensor_bytes);
  add_bytes(budget, "workspace_bytes_per_worker", p->workspace_bytes);
  cJSON_AddNumberToObject(budget, "workers", p->workers);
  add_bytes(budget, "baseline_bytes", p->baseline_bytes);
  add_bytes(budget, "predicted_tracked_bytes", p->predicted_tracked_bytes);
  add_bytes(budget, "predicted_peak_bytes", p->predicted_peak_bytes);
  cJSON *measured = cJSON_AddObjectToObject(mem, "measured");
  add_bytes(measured, "tracked_peak_bytes", p->tracked_peak_bytes);
  add_bytes(measured, "peak_bytes", p->peak_bytes);
  cJSON_AddStringToObject(measured, "peak_view", p->peak_view);
  /* Signed: negative when the point reused memory that was already resident in the baseline. */
  if (p->peak_bytes >= 0 && p->baseline_bytes >= 0 && p->tracked_peak_bytes >= 0)
    add_signed_bytes(measured, "untracked_bytes", p->untracked_bytes);
  else cJSON_AddNullToObject(measured, "untracked_bytes");
  add_bytes(measured, "host_peak_rss_bytes", p->host_peak_rss_bytes);
  add_bytes(measured, "device_baseline_bytes", p->device_baseline_bytes);
  add_bytes(measured, "device_peak_bytes", p->device_peak_bytes);
  cJSON *diff = cJSON_AddObjectToObject(mem, "difference");
  add_difference(diff, "tracked_minus_predicted_bytes", p->tracked_peak_bytes, p->predicted_tracked_bytes);
  add_difference(diff, "peak_minus_predicted_bytes", p->peak_bytes, p->predicted_peak_bytes);
  return o;
}

static cJSON *recipe_to_json(const precis_accept_result *r, const precis_accept_recipe_result *rr) {
  cJSON *o = cJSON_CreateObject();
  add_string(o, "recipe", rr->recipe);
  add_string(o, "spec", rr->spec);
  add_string(o, "recipe_description", rr->recipe_description);
  add_string(o, "verdict", precis_verdict_str(rr->verdict));
  cJSON *reasons = cJSON_AddArrayToObject(o, "reasons");
  for (size_t i = 0; i < rr->n_reasons; i++) cJSON_AddItemToArray(reasons, cJSON_CreateString(rr->reasons[i]));

  cJSON *acc = cJSON_AddObjectToObject(o, "acceptance");
  cJSON_AddNumberToObject(acc, "batch", (double)rr->accept_batch);
  cJSON_AddNumberToObject(acc, "workers", rr->accept_workers);
  cJSON_AddNumberToObject(acc, "rows", (double)(r->m * rr->accept_batch));
  cJSON_AddNumberToObject(acc, "runs", rr->runs);
  cJSON *mem = cJSON_AddObjectToObject(acc, "memory");
  add_string(mem, "view", rr->n_points ? rr->points[0].peak_view : NULL);
  add_bytes(mem, "peak_max_bytes", rr->peak_max_bytes);
  add_bytes(mem, "peak_min_bytes", rr->peak_min_bytes);
  add_bytes(mem, "peak_spread_bytes", rr->peak_spread_bytes);
  add_bytes(mem, "limit_bytes", r->memory_limit_bytes);
  add_bytes(mem, "allowed_bytes", rr->allowed_bytes);
  add_bytes(mem, "headroom_bytes", rr->headroom_bytes);
  cJSON_AddBoolToObject(mem, "fits", rr->fits);
  cJSON_AddBoolToObject(mem, "headroom_covers_spread", rr->headroom_covers_spread);
  cJSON *lat = cJSON_AddObjectToObject(acc, "latency");
  add_number(lat, "median_ms", rr->accept_median_ms);
  add_number(lat, "p95_ms", rr->accept_p95_ms);
  add_number(lat, "p99_ms", rr->accept_p99_ms);
  add_number(lat, "target_ms", r->latency_target_ms);
  if (isnan(r->latency_target_ms)) cJSON_AddNullToObject(lat, "meets_target");
  else cJSON_AddBoolToObject(lat, "meets_target", rr->meets_latency);
  cJSON *accuracy = cJSON_AddObjectToObject(acc, "accuracy");
  cJSON_AddBoolToObject(accuracy, "checked", rr->accuracy_ran);
  cJSON_AddBoolToObject(accuracy, "meets_criteria", rr->meets_accuracy);
  cJSON *crit = cJSON_AddArrayToObject(accuracy, "criteria");
  for (size_t i = 0; i < rr->criteria.count; i++) {
    char text[96];
    precis_criterion_format(&rr->criteria.items[i], text, sizeof text);
    cJSON_AddItemToArray(crit, cJSON_CreateString(text));
  }
  add_string(accuracy, "detail", rr->accuracy_detail);
  cJSON *err = cJSON_AddObjectToObject(accuracy, "error");
  for (int m = 0; m < PRECIS_METRIC_COUNT; m++) {
    const precis_metric_value *v = &rr->error[m];
    if (!v->present) {
      cJSON_AddNullToObject(err, precis_metric_get((precis_metric_id)m)->key);
      continue;
    }
    cJSON *mv = cJSON_AddObjectToObject(err, precis_metric_get((precis_metric_id)m)->key);
    add_number(mv, "worst", v->worst);
    add_number(mv, "mean", v->mean);
  }
  cJSON *largest = cJSON_AddObjectToObject(o, "largest_batch_meeting_latency_target");
  for (size_t ci = 0; ci < r->n_concurrency; ci++) {
    char key[16];
    snprintf(key, sizeof key, "%d", r->concurrency[ci]);
    if (rr->largest_batch_meeting_target[ci] > 0)
      cJSON_AddNumberToObject(largest, key, (double)rr->largest_batch_meeting_target[ci]);
    else cJSON_AddNullToObject(largest, key);
  }
  cJSON_AddItemToObject(o, "details", kv_to_json(&rr->details));
  cJSON *points = cJSON_AddArrayToObject(o, "points");
  for (size_t i = 0; i < rr->n_points; i++) cJSON_AddItemToArray(points, point_to_json(&rr->points[i]));
  return o;
}

cJSON *precis_accept_to_json(const precis_accept_result *r) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", PRECIS_ACCEPT_FORMAT);
  cJSON_AddNumberToObject(root, "format_version", PRECIS_ACCEPT_FORMAT_VERSION);
  cJSON_AddBoolToObject(root, "complete", r->complete);
  add_string(root, "verdict", precis_verdict_str(r->verdict));
  cJSON *tool = cJSON_AddObjectToObject(root, "tool");
  cJSON_AddStringToObject(tool, "name", "precis");
  add_string(tool, "version", r->tool_version);
  add_string(tool, "commit", precis_kv_get(&r->environment, "precis_commit"));
  cJSON_AddItemToObject(root, "environment", kv_to_json(&r->environment));
  cJSON *ds = cJSON_AddObjectToObject(root, "dataset");
  add_string(ds, "path", r->dataset_path);
  add_string(ds, "dataset_id", r->dataset_id);
  cJSON *w = cJSON_AddObjectToObject(root, "workload");
  add_string(w, "name", r->workload);
  cJSON_AddNumberToObject(w, "m", (double)r->m);
  cJSON_AddNumberToObject(w, "n", (double)r->n);
  cJSON_AddNumberToObject(w, "k", (double)r->k);
  cJSON_AddNumberToObject(w, "batch", (double)r->batch);
  cJSON_AddBoolToObject(w, "b_batched", r->b_batched);
  cJSON *s = kv_to_json(&r->settings);
  cJSON_AddItemToObject(root, "settings", s);
  cJSON *batches = cJSON_AddArrayToObject(s, "batches");
  for (size_t i = 0; i < r->n_batches; i++) cJSON_AddItemToArray(batches, cJSON_CreateNumber((double)r->batches[i]));
  cJSON *conc = cJSON_AddArrayToObject(s, "concurrency");
  for (size_t i = 0; i < r->n_concurrency; i++) cJSON_AddItemToArray(conc, cJSON_CreateNumber(r->concurrency[i]));
  add_number(s, "latency_target_ms", r->latency_target_ms);
  cJSON_AddNumberToObject(s, "headroom_pct", r->headroom * 100);
  add_bytes(s, "memory_limit_bytes", r->memory_limit_bytes);
  add_string(s, "memory_limit_source", r->memory_limit_source);
  cJSON_AddNumberToObject(s, "repeats", r->repeats);
  cJSON *crit = cJSON_AddArrayToObject(s, "criteria");
  for (size_t i = 0; i < r->n_criteria_text; i++) cJSON_AddItemToArray(crit, cJSON_CreateString(r->criteria_text[i]));
  cJSON *recipes = cJSON_AddArrayToObject(root, "recipes");
  for (size_t i = 0; i < r->n_recipes; i++) cJSON_AddItemToArray(recipes, recipe_to_json(r, &r->recipes[i]));
  return root;
}

/* ---- shared text helpers ---------------------------------------------------------------------- */

static void md_escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (strchr("\\`*_[]<>|", *s)) fputc('\\', out);
    if (*s == '\n' || *s == '\r') fputc(' ', out);
    else fputc(*s, out);
  }
}

static void html_escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    default: fputc(*s, out);
    }
  }
}

static const char *bytes_str(long long v, char *buf, size_t len) {
  precis_accept_format_bytes(v, buf, len);
  return buf;
}

/* measured - predicted with its sign; "n/a" when either is unknown (negative). The untracked bytes
 * (already a difference, possibly negative) are printed with predicted = 0 and measured >= 0
 * checked by the caller. */
static const char *signed_bytes_str(long long measured, long long predicted, char *buf, size_t len) {
  if ((measured < 0 && predicted != 0) || predicted < 0) {
    snprintf(buf, len, "n/a");
    return buf;
  }
  long long d = measured - predicted;
  char tmp[48];
  precis_accept_format_bytes(d < 0 ? -d : d, tmp, sizeof tmp);
  snprintf(buf, len, "%s%s", d < 0 ? "-" : "+", tmp);
  return buf;
}

static const char *ms_str(double v, char *buf, size_t len) {
  if (isfinite(v)) precis_fmt_sig(buf, len, v, 4);
  else snprintf(buf, len, "n/a");
  return buf;
}

static const char *verdict_upper(precis_verdict v) {
  return v == PRECIS_VERDICT_PASS ? "PASS" : v == PRECIS_VERDICT_FAIL ? "FAIL" : "INCOMPLETE";
}

static const char *accuracy_str(const precis_accept_recipe_result *rr, char *buf, size_t len) {
  if (!rr->accuracy_ran) snprintf(buf, len, "not checked");
  else if (rr->meets_accuracy) {
    const precis_metric_value *v = &rr->error[PRECIS_METRIC_REL_FRO];
    if (v->present) snprintf(buf, len, "pass (rel_fro %.3g)", v->worst);
    else snprintf(buf, len, "pass");
  } else snprintf(buf, len, "fail: %s", rr->accuracy_detail ? rr->accuracy_detail : "criteria not met");
  return buf;
}

static const char *largest_str(const precis_accept_result *r, const precis_accept_recipe_result *rr, char *buf,
                               size_t len) {
  long long v = r->n_concurrency ? rr->largest_batch_meeting_target[r->n_concurrency - 1] : -1;
  if (isnan(r->latency_target_ms)) snprintf(buf, len, "no target");
  else if (v > 0) snprintf(buf, len, "%lld", v);
  else snprintf(buf, len, "none");
  return buf;
}

static void settings_line(const precis_accept_result *r, char *buf, size_t len) {
  char limit[48], target[48];
  if (isnan(r->latency_target_ms)) snprintf(target, sizeof target, "none");
  else snprintf(target, sizeof target, "%.4g ms (p95 per request)", r->latency_target_ms);
  snprintf(buf, len, "memory limit %s (%s), headroom %.4g%%, latency target %s, %d runs of the acceptance point",
           bytes_str(r->memory_limit_bytes, limit, sizeof limit), r->memory_limit_source ? r->memory_limit_source : "",
           r->headroom * 100, target, r->repeats);
}

/* ---- Markdown --------------------------------------------------------------------------------- */

void precis_accept_write_markdown_section(const precis_accept_result *r, FILE *out) {
  char a[64], b[64], c[64], d[64], e[64], f[64], line[512];
  fprintf(out, "## Acceptance: %s\n\n", verdict_upper(r->verdict));
  fprintf(out, "Workload `");
  md_escaped(out, r->workload);
  fprintf(out, "` (m=%lld, n=%lld, k=%lld, batch=%lld), backend ", r->m, r->n, r->k, r->batch);
  md_escaped(out, precis_kv_get(&r->environment, "backend"));
  fprintf(out, ". Acceptance point: the largest batch and concurrency of the sweep.\n\n");
  settings_line(r, line, sizeof line);
  md_escaped(out, line);
  fprintf(out, ".\n\n");
  fprintf(out, "| recipe | verdict | batch x workers | peak (max of runs) | allowed | spread | p95 ms | accuracy | "
               "largest batch meeting target |\n|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    fprintf(out, "| ");
    md_escaped(out, rr->recipe);
    fprintf(out, " | **%s** | %lld x %d | %s | %s | %s | %s | ", verdict_upper(rr->verdict), rr->accept_batch,
            rr->accept_workers, bytes_str(rr->peak_max_bytes, a, sizeof a), bytes_str(rr->allowed_bytes, b, sizeof b),
            bytes_str(rr->peak_spread_bytes, c, sizeof c), ms_str(rr->accept_p95_ms, d, sizeof d));
    md_escaped(out, accuracy_str(rr, line, sizeof line));
    fprintf(out, " | %s |\n", largest_str(r, rr, e, sizeof e));
  }
  fputc('\n', out);
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    for (size_t j = 0; j < rr->n_reasons; j++) {
      fprintf(out, "- ");
      md_escaped(out, rr->recipe);
      fprintf(out, ": ");
      md_escaped(out, rr->reasons[j]);
      fputc('\n', out);
    }
  }
  fprintf(out, "\n### Sweep\n\nLatency per request, every worker's samples pooled; throughput = sum over workers of "
               "2·rows·n·k·batch / that worker's median. Memory budget: predicted = baseline + workers × (tensors + "
               "workspace); tracked = sum of the workers' own allocation peaks; peak = the %s view.\n\n",
          r->n_recipes && r->recipes[0].n_points ? r->recipes[0].points[0].peak_view : "host_peak_rss");
  fprintf(out, "| recipe | batch | workers | run | rows | status | p50 ms | p95 ms | p99 ms | TFLOP/s | overlap | "
               "tensors x workers | tracked | tracked - predicted | baseline | predicted peak | measured peak | "
               "peak - predicted | untracked |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    for (size_t j = 0; j < rr->n_points; j++) {
      const precis_accept_point *p = &rr->points[j];
      fprintf(out, "| ");
      md_escaped(out, rr->recipe);
      fprintf(out, " | %lld | %d | %d | %lld | ", p->batch, p->workers, p->repeat + 1, p->rows);
      md_escaped(out, precis_row_status_str(p->status));
      fprintf(out, " | %s | %s | %s | ", ms_str(p->median_ms, a, sizeof a), ms_str(p->p95_ms, b, sizeof b),
              ms_str(p->p99_ms, c, sizeof c));
      fprintf(out, "%s | %s | ", ms_str(p->throughput_tflops, d, sizeof d), ms_str(p->overlap, e, sizeof e));
      fprintf(out, "%s | ", bytes_str(p->predicted_tracked_bytes, a, sizeof a));
      fprintf(out, "%s | %s | ", bytes_str(p->tracked_peak_bytes, b, sizeof b),
              signed_bytes_str(p->tracked_peak_bytes, p->predicted_tracked_bytes, c, sizeof c));
      fprintf(out, "%s | %s | %s | ", bytes_str(p->baseline_bytes, d, sizeof d),
              bytes_str(p->predicted_peak_bytes, e, sizeof e), bytes_str(p->peak_bytes, f, sizeof f));
      bool untracked_known = p->peak_bytes >= 0 && p->baseline_bytes >= 0 && p->tracked_peak_bytes >= 0;
      fprintf(out, "%s | %s |\n", signed_bytes_str(p->peak_bytes, p->predicted_peak_bytes, a, sizeof a),
              untracked_known ? signed_bytes_str(p->untracked_bytes, 0, b, sizeof b) : "n/a");
    }
  }
  fputc('\n', out);
}

/* ---- HTML ------------------------------------------------------------------------------------- */

static const char *chart_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

/* p95 per request against batch, one line per (recipe, workers), the target dashed. Inline SVG. */
static void html_latency_chart(const precis_accept_result *r, FILE *out) {
  const double width = 640, height = 320, left = 60, right = 160, top = 20, bottom = 40;
  double ymax = isnan(r->latency_target_ms) ? 0 : r->latency_target_ms;
  for (size_t i = 0; i < r->n_recipes; i++)
    for (size_t j = 0; j < r->recipes[i].n_points; j++) {
      const precis_accept_point *p = &r->recipes[i].points[j];
      if (p->repeat == 0 && isfinite(p->p95_ms) && p->p95_ms > ymax) ymax = p->p95_ms;
    }
  if (!(ymax > 0) || r->n_batches == 0) return;
  ymax *= 1.1;
  double plot_w = width - left - right, plot_h = height - top - bottom;
  fprintf(out, "<svg class=\"chart\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
               "aria-label=\"p95 latency per request against batch\">\n",
          width, height, width, height);
  fprintf(out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#333\"/>\n", left, top + plot_h,
          left + plot_w, top + plot_h);
  fprintf(out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#333\"/>\n", left, top, left, top + plot_h);
  for (int t = 0; t <= 4; t++) {
    double v = ymax * t / 4, y = top + plot_h - plot_h * t / 4;
    fprintf(out, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\">%.3g</text>\n", left - 4, y + 4, v);
  }
  for (size_t bi = 0; bi < r->n_batches; bi++) {
    double x = left + (r->n_batches > 1 ? plot_w * (double)bi / (double)(r->n_batches - 1) : plot_w / 2);
    fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"11\">%lld</text>\n", x,
            top + plot_h + 16, r->batches[bi]);
  }
  fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"12\">batch</text>\n", left + plot_w / 2,
          height - 4);
  fprintf(out, "<text x=\"12\" y=\"%.0f\" font-size=\"12\" transform=\"rotate(-90 12 %.0f)\" text-anchor=\"middle\">"
               "p95 ms</text>\n",
          top + plot_h / 2, top + plot_h / 2);
  if (!isnan(r->latency_target_ms)) {
    double y = top + plot_h - plot_h * r->latency_target_ms / ymax;
    fprintf(out, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>"
                 "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">target</text>\n",
            left, y, left + plot_w, y, left + plot_w + 4, y + 4);
  }
  size_t series = 0;
  for (size_t i = 0; i < r->n_recipes; i++)
    for (size_t ci = 0; ci < r->n_concurrency; ci++) {
      const char *color = chart_colors[series % (sizeof chart_colors / sizeof chart_colors[0])];
      bool any = false;
      fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", color,
              ci % 2 ? " stroke-dasharray=\"3 2\"" : "");
      for (size_t bi = 0; bi < r->n_batches; bi++)
        for (size_t j = 0; j < r->recipes[i].n_points; j++) {
          const precis_accept_point *p = &r->recipes[i].points[j];
          if (p->repeat || p->batch != r->batches[bi] || p->workers != r->concurrency[ci] || !isfinite(p->p95_ms))
            continue;
          double x = left + (r->n_batches > 1 ? plot_w * (double)bi / (double)(r->n_batches - 1) : plot_w / 2);
          double y = top + plot_h - plot_h * p->p95_ms / ymax;
          fprintf(out, "%.1f,%.1f ", x, y);
          any = true;
        }
      fprintf(out, "\"/>\n");
      if (any) {
        fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"%s\">", left + plot_w + 8,
                top + 14 + 14 * (double)series, color);
        html_escaped(out, r->recipes[i].recipe);
        fprintf(out, " x%d</text>\n", r->concurrency[ci]);
      }
      series++;
    }
  fprintf(out, "</svg>\n");
}

void precis_accept_write_html_section(const precis_accept_result *r, FILE *out) {
  char a[64], b[64], c[64], d[64], e[64], f[64], line[512];
  fprintf(out, "<section class=\"accept\">\n<h2>Acceptance: <span class=\"%s\">%s</span></h2>\n",
          r->verdict == PRECIS_VERDICT_PASS ? "pass" : "fail", verdict_upper(r->verdict));
  fprintf(out, "<p>Workload <code>");
  html_escaped(out, r->workload);
  fprintf(out, "</code> (m=%lld, n=%lld, k=%lld, batch=%lld), backend ", r->m, r->n, r->k, r->batch);
  html_escaped(out, precis_kv_get(&r->environment, "backend"));
  fprintf(out, ". ");
  settings_line(r, line, sizeof line);
  html_escaped(out, line);
  fprintf(out, ".</p>\n<table>\n<tr><th>recipe</th><th>verdict</th><th>batch x workers</th><th>peak (max of runs)</th>"
               "<th>allowed</th><th>spread</th><th>p95 ms</th><th>accuracy</th><th>largest batch meeting target</th></tr>\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    fprintf(out, "<tr><td>");
    html_escaped(out, rr->recipe);
    fprintf(out, "</td><td class=\"%s\">%s</td><td>%lld x %d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>",
            rr->verdict == PRECIS_VERDICT_PASS ? "pass" : "fail", verdict_upper(rr->verdict), rr->accept_batch,
            rr->accept_workers, bytes_str(rr->peak_max_bytes, a, sizeof a), bytes_str(rr->allowed_bytes, b, sizeof b),
            bytes_str(rr->peak_spread_bytes, c, sizeof c), ms_str(rr->accept_p95_ms, d, sizeof d));
    html_escaped(out, accuracy_str(rr, line, sizeof line));
    fprintf(out, "</td><td>%s</td></tr>\n", largest_str(r, rr, e, sizeof e));
  }
  fprintf(out, "</table>\n");
  bool any_reason = false;
  for (size_t i = 0; i < r->n_recipes; i++) any_reason = any_reason || r->recipes[i].n_reasons;
  if (any_reason) {
    fprintf(out, "<ul class=\"reasons\">\n");
    for (size_t i = 0; i < r->n_recipes; i++)
      for (size_t j = 0; j < r->recipes[i].n_reasons; j++) {
        fprintf(out, "<li><b>");
        html_escaped(out, r->recipes[i].recipe);
        fprintf(out, "</b>: ");
        html_escaped(out, r->recipes[i].reasons[j]);
        fprintf(out, "</li>\n");
      }
    fprintf(out, "</ul>\n");
  }
  fprintf(out, "<h3>p95 latency per request against batch</h3>\n");
  html_latency_chart(r, out);
  fprintf(out, "<h3>Sweep: latency, throughput and the memory budget against measurement</h3>\n<p>Predicted peak = "
               "baseline + workers &times; (tensors + workspace); tracked = sum of the workers' own allocation peaks; the "
               "difference is what a model of sizes alone misses.</p>\n<table>\n<tr><th>recipe</th><th>batch</th>"
               "<th>workers</th><th>run</th><th>rows</th><th>status</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th>"
               "<th>TFLOP/s</th><th>overlap</th><th>tensors x workers</th><th>tracked</th><th>tracked &minus; predicted</th>"
               "<th>baseline</th><th>predicted peak</th><th>measured peak</th><th>peak &minus; predicted</th></tr>\n");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    for (size_t j = 0; j < rr->n_points; j++) {
      const precis_accept_point *p = &rr->points[j];
      fprintf(out, "<tr><td>");
      html_escaped(out, rr->recipe);
      fprintf(out, "</td><td>%lld</td><td>%d</td><td>%d</td><td>%lld</td><td>", p->batch, p->workers, p->repeat + 1,
              p->rows);
      html_escaped(out, precis_row_status_str(p->status));
      if (p->reason) {
        fprintf(out, ": ");
        html_escaped(out, p->reason);
      }
      fprintf(out, "</td><td>%s</td><td>%s</td><td>%s</td>", ms_str(p->median_ms, a, sizeof a),
              ms_str(p->p95_ms, b, sizeof b), ms_str(p->p99_ms, c, sizeof c));
      fprintf(out, "<td>%s</td><td>%s</td>", ms_str(p->throughput_tflops, d, sizeof d), ms_str(p->overlap, e, sizeof e));
      fprintf(out, "<td>%s</td><td>%s</td>", bytes_str(p->predicted_tracked_bytes, a, sizeof a),
              bytes_str(p->tracked_peak_bytes, b, sizeof b));
      fprintf(out, "<td>%s</td><td>%s</td>", signed_bytes_str(p->tracked_peak_bytes, p->predicted_tracked_bytes, c, sizeof c),
              bytes_str(p->baseline_bytes, d, sizeof d));
      fprintf(out, "<td>%s</td><td>%s</td><td>%s</td></tr>\n", bytes_str(p->predicted_peak_bytes, e, sizeof e),
              bytes_str(p->peak_bytes, f, sizeof f), signed_bytes_str(p->peak_bytes, p->predicted_peak_bytes, a, sizeof a));
    }
  }
  fprintf(out, "</table>\n</section>\n");
}

/* ---- terminal --------------------------------------------------------------------------------- */

void precis_accept_print_summary(const precis_accept_result *r, FILE *out) {
  char a[64], b[64], c[64], d[64], e[64], line[512];
  fprintf(out, "precis accept: %s  (workload %s: m=%lld n=%lld k=%lld batch=%lld; backend %s)\n", verdict_upper(r->verdict),
          r->workload ? r->workload : "?", r->m, r->n, r->k, r->batch,
          precis_kv_get(&r->environment, "backend") ? precis_kv_get(&r->environment, "backend") : "?");
  settings_line(r, line, sizeof line);
  fprintf(out, "%s\n\n", line);
  fprintf(out, "%-10s %-7s %-10s %-12s %-12s %-11s %-9s %-8s %s\n", "recipe", "verdict", "batch x N", "peak (max)",
          "allowed", "spread", "p95 ms", "largest", "accuracy");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    char point[32];
    snprintf(point, sizeof point, "%lld x %d", rr->accept_batch, rr->accept_workers);
    fprintf(out, "%-10s %-7s %-10s %-12s %-12s %-11s %-9s %-8s %s\n", rr->recipe, verdict_upper(rr->verdict), point,
            bytes_str(rr->peak_max_bytes, a, sizeof a), bytes_str(rr->allowed_bytes, b, sizeof b),
            bytes_str(rr->peak_spread_bytes, c, sizeof c), ms_str(rr->accept_p95_ms, d, sizeof d),
            largest_str(r, rr, e, sizeof e), accuracy_str(rr, line, sizeof line));
    for (size_t j = 0; j < rr->n_reasons; j++) fprintf(out, "  - %s\n", rr->reasons[j]);
  }
  if (!isnan(r->latency_target_ms) && r->n_concurrency > 1) {
    fprintf(out, "largest batch meeting the latency target, per concurrency:\n");
    for (size_t i = 0; i < r->n_recipes; i++) {
      fprintf(out, "  %-10s", r->recipes[i].recipe);
      for (size_t ci = 0; ci < r->n_concurrency; ci++) {
        long long v = r->recipes[i].largest_batch_meeting_target[ci];
        if (v > 0) fprintf(out, "  %d worker%s: %lld", r->concurrency[ci], r->concurrency[ci] == 1 ? "" : "s", v);
        else fprintf(out, "  %d worker%s: none", r->concurrency[ci], r->concurrency[ci] == 1 ? "" : "s");
      }
      fputc('\n', out);
    }
  }
  fprintf(out, "\n%-10s %6s %4s %3s %9s %9s %9s %9s %11s %11s %11s %11s\n", "sweep", "batch", "N", "run", "p50 ms",
          "p95 ms", "p99 ms", "TFLOP/s", "tracked", "tensors xN", "peak", "predicted");
  for (size_t i = 0; i < r->n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r->recipes[i];
    for (size_t j = 0; j < rr->n_points; j++) {
      const precis_accept_point *p = &rr->points[j];
      char p50[24], p95[24], p99[24], tf[24];
      if (p->status != PRECIS_ROW_OK) {
        fprintf(out, "%-10s %6lld %4d %3d %s: %s\n", rr->recipe, p->batch, p->workers, p->repeat + 1,
                precis_row_status_str(p->status), p->reason ? p->reason : "");
        continue;
      }
      fprintf(out, "%-10s %6lld %4d %3d %9s %9s %9s %9s %11s %11s %11s %11s\n", rr->recipe, p->batch, p->workers,
              p->repeat + 1, ms_str(p->median_ms, p50, sizeof p50), ms_str(p->p95_ms, p95, sizeof p95),
              ms_str(p->p99_ms, p99, sizeof p99), ms_str(p->throughput_tflops, tf, sizeof tf),
              bytes_str(p->tracked_peak_bytes, a, sizeof a), bytes_str(p->predicted_tracked_bytes, b, sizeof b),
              bytes_str(p->peak_bytes, c, sizeof c), bytes_str(p->predicted_peak_bytes, d, sizeof d));
    }
  }
}

/* ---- files ------------------------------------------------------------------------------------ */

static precis_status write_text(const char *path, bool force, const precis_accept_result *r, int kind) {
  precis_atomic_file f;
  precis_status st = precis_atomic_open(&f, path, force);
  if (st != PRECIS_OK) return st;
  if (kind == 0) {
    cJSON *root = precis_accept_to_json(r);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
      precis_atomic_abort(&f);
      return precis_fail(PRECIS_E_NOMEM, "%s: out of memory rendering the acceptance result", path);
    }
    fputs(text, f.fp);
    fputc('\n', f.fp);
    free(text);
  } else if (kind == 1) {
    fprintf(f.fp, "# precis accept\n\n");
    precis_accept_write_markdown_section(r, f.fp);
    const char *cmd = precis_kv_get(&r->environment, "command_line");
    if (cmd) {
      fprintf(f.fp, "Command: `");
      for (const char *s = cmd; *s; s++) fputc(*s == '`' ? '\'' : *s, f.fp);
      fprintf(f.fp, "`\n\n");
    }
    fprintf(f.fp, "Dataset: ");
    md_escaped(f.fp, r->dataset_path ? r->dataset_path : "(in memory)");
    fprintf(f.fp, " (dataset_id ");
    md_escaped(f.fp, r->dataset_id ? r->dataset_id : "n/a");
    fprintf(f.fp, "); precis %s.\n", r->tool_version ? r->tool_version : PRECIS_VERSION);
  } else {
    fprintf(f.fp, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>precis accept</title>\n"
                  "<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
                  "margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
                  "td:first-child,th:first-child{text-align:left}.pass{color:#1a7f37;font-weight:bold}"
                  ".fail{color:#c62828;font-weight:bold}code{background:#f3f3f3;padding:0 3px}</style></head><body>\n"
                  "<h1>precis accept</h1>\n");
    precis_accept_write_html_section(r, f.fp);
    fprintf(f.fp, "<p>Command: <code>");
    html_escaped(f.fp, precis_kv_get(&r->environment, "command_line"));
    fprintf(f.fp, "</code><br>Dataset: ");
    html_escaped(f.fp, r->dataset_path ? r->dataset_path : "(in memory)");
    fprintf(f.fp, " (dataset_id ");
    html_escaped(f.fp, r->dataset_id ? r->dataset_id : "n/a");
    fprintf(f.fp, "); precis ");
    html_escaped(f.fp, r->tool_version ? r->tool_version : PRECIS_VERSION);
    fprintf(f.fp, ".</p>\n</body></html>\n");
  }
  return precis_atomic_commit(&f);
}

precis_status precis_accept_write_all(const precis_accept_result *r, const char *dir, bool force) {
  precis_status st = precis_mkdirs(dir);
  if (st != PRECIS_OK) return st;
  static const char *names[] = {"accept.json", "accept.md", "accept.html"};
  for (int i = 0; i < 3; i++) {
    char *path = precis_asprintf("%s/%s", dir, names[i]);
    if (!path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
    st = write_text(path, force, r, i);
    free(path);
    if (st != PRECIS_OK) return st;
  }
  return PRECIS_OK;
}
