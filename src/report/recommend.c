#include "recommend.h"

#include "numerics/recipe.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "numerics/recipe.h"
#include "report_util.h"

typedef struct row_eval {
  bool passes;
  double margin;
  char what[256];
  char metric[24];
} row_eval;

static const char *negated(precis_cmp op) {
  switch (op) {
  case PRECIS_CMP_LE: return ">";
  case PRECIS_CMP_LT: return ">=";
  case PRECIS_CMP_GE: return "<";
  case PRECIS_CMP_GT: return "<=";
  case PRECIS_CMP_EQ: return "!=";
  }
  return "!";
}

static void describe_miss(const precis_criterion *c, const precis_metric_value *v, double margin, char *buf,
                          size_t len) {
  const char *key = precis_metric_get(c->metric)->key;
  char value[40], limit[40];
  if (v->present) precis_fmt_sig(value, sizeof value, v->worst, 3);
  else snprintf(value, sizeof value, "null");
  precis_format_double(limit, sizeof limit, c->value);
  char times[40];
  precis_fmt_sig(times, sizeof times, margin, 3);
  if (isfinite(margin))
    snprintf(buf, len, "%s=%s %s %s (%sx the limit)", key, value, negated(c->op), limit, times);
  else
    snprintf(buf, len, "%s=%s %s %s", key, value, negated(c->op), limit);
}

/* Judges one row: the worst miss over its criteria, so that "by how much" is what it would take
 * to make the row pass. */
static void eval_row(const precis_row *row, const precis_criteria *require, row_eval *ev) {
  memset(ev, 0, sizeof *ev);
  ev->passes = true;
  ev->margin = NAN;
  if (row->status != PRECIS_ROW_OK) {
    ev->passes = false;
    ev->margin = INFINITY;
    snprintf(ev->what, sizeof ev->what, "status %s: %s", precis_row_status_str(row->status),
             row->reason ? row->reason : "(no reason recorded)");
    return;
  }
  bool use_require = require && require->count > 0;
  const precis_criteria *criteria = use_require ? require : &row->criteria;
  if (criteria->count == 0) {
    if (row->verdict == PRECIS_VERDICT_PASS) return;
    ev->passes = false;
    ev->margin = INFINITY;
    snprintf(ev->what, sizeof ev->what, "%s",
             row->verdict == PRECIS_VERDICT_FAIL && row->verdict_detail ? row->verdict_detail
                                                                         : "no criteria recorded (give --require)");
    return;
  }
  for (size_t i = 0; i < criteria->count; i++) {
    precis_criteria one = {.count = 1, .items = {criteria->items[i]}};
    size_t failed_index = 0;
    double margin = NAN;
    if (precis_criteria_check(&one, row->error, &failed_index, &margin)) continue;
    if (isnan(margin)) margin = INFINITY;
    if (ev->passes || margin > ev->margin) {
      ev->passes = false;
      ev->margin = margin;
      describe_miss(&criteria->items[i], &row->error[criteria->items[i].metric], margin, ev->what, sizeof ev->what);
      snprintf(ev->metric, sizeof ev->metric, "%s", precis_metric_get(criteria->items[i].metric)->key);
    }
  }
  if (ev->passes && !use_require && row->verdict == PRECIS_VERDICT_FAIL) {
    /* The run judged the row by something the recorded criteria do not show; trust the verdict. */
    ev->passes = false;
    ev->margin = INFINITY;
    snprintf(ev->what, sizeof ev->what, "%s", row->verdict_detail ? row->verdict_detail : "recorded verdict: fail");
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The row's latency noise: the wider of its samples' interquartile range and the distribution-free
 * 95% confidence interval of their median (the order statistics j, k with P(x_j < median < x_k)
 * >= 0.95 by the normal approximation of the binomial: for 3 samples [min, max]). Without the
 * samples, median -/+ 0.6745 stdev (the quartiles of a normal); without either, the median. */
static void noise_interval(const precis_timing *t, double *lo, double *hi) {
  *lo = *hi = t->median_ms;
  if (t->n_samples_ms > 0 && t->samples_ms) {
    size_t n = t->n_samples_ms;
    double *sorted = malloc(n * sizeof *sorted);
    if (sorted) {
      size_t kept = 0;
      for (size_t i = 0; i < n; i++)
        if (isfinite(t->samples_ms[i])) sorted[kept++] = t->samples_ms[i];
      if (kept > 0) {
        qsort(sorted, kept, sizeof *sorted, cmp_double);
        double q1 = precis_percentile_sorted(sorted, kept, 25), q3 = precis_percentile_sorted(sorted, kept, 75);
        double half = 0.98 * sqrt((double)kept); /* 1.96 sqrt(n) / 2 */
        double j = floor((double)kept / 2 - half), k = ceil((double)kept / 2 + 1 + half); /* 1-based */
        double ci_lo = sorted[j < 1 ? 0 : (size_t)j - 1], ci_hi = sorted[k > (double)kept ? kept - 1 : (size_t)k - 1];
        *lo = fmin(q1, ci_lo);
        *hi = fmax(q3, ci_hi);
      }
      free(sorted);
    }
  } else if (isfinite(t->stdev_ms)) {
    *lo = t->median_ms - 0.6745 * t->stdev_ms;
    *hi = t->median_ms + 0.6745 * t->stdev_ms;
  }
  /* The interval holds the median it describes, whatever the samples kept. */
  if (isfinite(t->median_ms)) {
    *lo = fmin(*lo, t->median_ms);
    *hi = fmax(*hi, t->median_ms);
  }
}

static int compare_outcome_order(const void *a, const void *b) {
  const precis_recipe_outcome *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return strcmp(x->recipe, y->recipe);
}

/* Among recipes tied on cost: the format's memory, then error, then the recipe table. NaN and
 * unknown sizes sort last. Sets *decided_by to the first of these that separates x from y. */
static int better_in_tie(const precis_recipe_outcome *x, const precis_recipe_outcome *y, const char **decided_by) {
  double mx = x->format_bytes >= 0 ? (double)x->format_bytes : INFINITY;
  double my = y->format_bytes >= 0 ? (double)y->format_bytes : INFINITY;
  if (mx != my) {
    if (decided_by) *decided_by = "memory of the format";
    return mx < my;
  }
  double ex = isnan(x->error) ? INFINITY : x->error, ey = isnan(y->error) ? INFINITY : y->error;
  if (ex != ey) {
    if (decided_by) *decided_by = "error";
    return ex < ey;
  }
  if (decided_by) *decided_by = "the recipe table";
  if (x->rank != y->rank) return x->rank < y->rank;
  return strcmp(x->recipe, y->recipe) < 0;
}

/* Sorting key for the cheapest: cost, then error, then the recipe table. NaN sorts last. */
static int better(const precis_recipe_outcome *x, const precis_recipe_outcome *y, bool *tied_on_cost) {
  double cx = isnan(x->cost) ? INFINITY : x->cost, cy = isnan(y->cost) ? INFINITY : y->cost;
  if (cx != cy) return cx < cy;
  if (tied_on_cost) *tied_on_cost = true;
  double ex = isnan(x->error) ? INFINITY : x->error, ey = isnan(y->error) ? INFINITY : y->error;
  if (ex != ey) return ex < ey;
  if (x->rank != y->rank) return x->rank < y->rank;
  return strcmp(x->recipe, y->recipe) < 0;
}

precis_status precis_recommend(const precis_report *report, const precis_recommend_options *options,
                               precis_recommendation *out) {
  memset(out, 0, sizeof *out);
  out->chosen = out->closest_miss = -1;
  out->objective = options->objective;
  out->workload = options->workload;
  out->report_path = options->report_path;
  out->tie_threshold = options->tie_threshold > 0 ? options->tie_threshold : 0;
  precis_status st = PRECIS_OK;
  size_t n_workloads = 0, n_recipes = 0;
  const char **workloads = precis_report_workloads(report, &n_workloads);
  const char **recipes = precis_report_recipe_names(report, &n_recipes);
  if (!workloads || !recipes) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (options->workload) {
    bool found = false;
    for (size_t i = 0; i < n_workloads; i++) found = found || strcmp(workloads[i], options->workload) == 0;
    if (!found) {
      st = precis_fail(PRECIS_E_INPUT, "no workload \"%s\" in the report", options->workload);
      goto done;
    }
    workloads[0] = options->workload;
    n_workloads = 1;
  }
  if (n_workloads == 0 || n_recipes == 0) {
    st = precis_fail(PRECIS_E_INPUT, "the report has no rows: nothing to recommend");
    goto done;
  }
  if (options->require && options->require->count > 0) {
    precis_buf b;
    precis_buf_init(&b);
    precis_buf_append(&b, "--require ");
    for (size_t i = 0; i < options->require->count; i++) {
      char text[96];
      precis_criterion_format(&options->require->items[i], text, sizeof text);
      precis_buf_appendf(&b, "%s%s", i ? " " : "", text);
    }
    snprintf(out->criteria_source, sizeof out->criteria_source, "%s", b.data ? b.data : "");
    precis_buf_free(&b);
  } else {
    snprintf(out->criteria_source, sizeof out->criteria_source, "each row's recorded criteria");
  }

  out->has_target = (options->require && options->require->count > 0) || report->n_criteria > 0;
  out->memory_by_format = precis_report_is_cpu_emulation(report);
  if (!(options->require && options->require->count > 0) && report->n_criteria > 0) {
    precis_buf b;
    precis_buf_init(&b);
    precis_buf_append(&b, "the run's --require");
    for (size_t i = 0; i < report->n_criteria; i++) precis_buf_appendf(&b, " %s", report->criteria[i]);
    snprintf(out->criteria_source, sizeof out->criteria_source, "%s", b.data ? b.data : "");
    precis_buf_free(&b);
  } else if (!out->has_target) {
    snprintf(out->criteria_source, sizeof out->criteria_source, "none given (each recipe's default gates)");
  }
  out->outcomes = calloc(n_recipes, sizeof *out->outcomes);
  if (!out->outcomes) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  out->n_outcomes = n_recipes;
  for (size_t r = 0; r < n_recipes; r++) {
    precis_recipe_outcome *o = &out->outcomes[r];
    o->recipe = recipes[r];
    o->rank = precis_recipe_rank(recipes[r]);
    o->passes = true;
    o->n_workloads = n_workloads;
    o->latency_ms = o->latency_lo_ms = o->latency_hi_ms = 0;
    o->peak_bytes = 0;
    o->format_bytes = 0;
    o->error = 0;
    o->margin = NAN;
    for (size_t w = 0; w < n_workloads; w++) {
      const precis_row *row = precis_report_find_row(report, workloads[w], recipes[r]);
      if (row && !o->spec) o->spec = row->spec ? row->spec : precis_recipe_name_spec(row->recipe);
      row_eval ev;
      if (!row) {
        memset(&ev, 0, sizeof ev);
        ev.margin = INFINITY;
        snprintf(ev.what, sizeof ev.what, "no row for this workload in the report");
      } else {
        eval_row(row, options->require, &ev);
        o->latency_ms += row->time.median_ms; /* NaN propagates: unknown */
        double lo, hi;
        noise_interval(&row->time, &lo, &hi);
        o->latency_lo_ms += lo;
        o->latency_hi_ms += hi;
        long long peak = precis_row_peak_bytes(row);
        if (peak < 0 || o->peak_bytes < 0) o->peak_bytes = -1;
        else if (peak > o->peak_bytes) o->peak_bytes = peak;
        long long bytes = row->memory.tensor_bytes;
        if (bytes < 0 || o->format_bytes < 0) o->format_bytes = -1;
        else if (bytes > o->format_bytes) o->format_bytes = bytes;
        const precis_metric_value *rel = &row->error[PRECIS_METRIC_REL_FRO];
        double e = row->status == PRECIS_ROW_OK && rel->present ? rel->worst : NAN;
        if (isnan(e) || isnan(o->error)) o->error = NAN;
        else if (e > o->error) o->error = e;
      }
      if (!row) {
        o->latency_ms = o->latency_lo_ms = o->latency_hi_ms = NAN;
        o->peak_bytes = o->format_bytes = -1;
        o->error = NAN;
      }
      if (!ev.passes && (o->passes || ev.margin > o->margin)) {
        o->passes = false;
        o->margin = ev.margin;
        o->failed_workload = workloads[w];
        snprintf(o->failed_what, sizeof o->failed_what, "%s", ev.what);
        snprintf(o->failed_metric, sizeof o->failed_metric, "%s", ev.metric);
      }
    }
    o->memory_bytes = out->memory_by_format ? o->format_bytes : o->peak_bytes;
    o->cost = options->objective == PRECIS_OBJECTIVE_LATENCY ? o->latency_ms
              : o->memory_bytes >= 0                          ? (double)o->memory_bytes
                                                               : NAN;
  }
  qsort(out->outcomes, out->n_outcomes, sizeof *out->outcomes, compare_outcome_order);

  const precis_recipe_outcome *fp32 = NULL;
  const char *baseline = precis_recipe_preset_baseline()->spec;
  for (size_t i = 0; i < out->n_outcomes; i++)
    if (out->outcomes[i].spec && strcmp(out->outcomes[i].spec, baseline) == 0) fp32 = &out->outcomes[i];
  for (size_t i = 0; i < out->n_outcomes; i++) {
    precis_recipe_outcome *o = &out->outcomes[i];
    o->speedup_vs_fp32 = fp32 ? fp32->latency_ms / o->latency_ms : NAN;
    o->memory_vs_fp32 = fp32 && fp32->memory_bytes > 0 && o->memory_bytes >= 0
                            ? (double)o->memory_bytes / (double)fp32->memory_bytes
                            : NAN;
    o->on_frontier = !isnan(o->cost) && !isnan(o->error);
    for (size_t j = 0; j < out->n_outcomes && o->on_frontier; j++) {
      const precis_recipe_outcome *p = &out->outcomes[j];
      if (j == i || isnan(p->cost) || isnan(p->error)) continue;
      if (p->error <= o->error && p->cost <= o->cost && (p->error < o->error || p->cost < o->cost))
        o->on_frontier = false;
    }
  }
  for (size_t i = 0; i < out->n_outcomes; i++) {
    if (!out->outcomes[i].passes) continue;
    if (out->chosen < 0 || better(&out->outcomes[i], &out->outcomes[out->chosen], NULL)) out->chosen = (int)i;
  }
  if (out->chosen >= 0) {
    /* The cheapest recipe and every passing one tied with it: the same cost, or (latency) noise
     * intervals that overlap. The tie goes to the memory of the format, then the error. */
    const precis_recipe_outcome *cheapest = &out->outcomes[out->chosen];
    bool latency = options->objective == PRECIS_OBJECTIVE_LATENCY;
    for (size_t i = 0; i < out->n_outcomes; i++) {
      precis_recipe_outcome *o = &out->outcomes[i];
      if ((int)i == out->chosen || !o->passes) continue;
      bool same = o->cost == cheapest->cost || (isnan(o->cost) && isnan(cheapest->cost));
      bool overlap = latency && ((o->latency_lo_ms <= cheapest->latency_hi_ms && cheapest->latency_lo_ms <= o->latency_hi_ms) ||
                                 o->latency_ms - cheapest->latency_ms <= out->tie_threshold * cheapest->latency_ms);
      if (same || overlap) {
        o->tied = true;
        out->tie_broken = true;
        out->tie_within_noise = out->tie_within_noise || !same;
      }
    }
    if (out->tie_broken) {
      out->outcomes[out->chosen].tied = true;
      int best = -1;
      for (size_t i = 0; i < out->n_outcomes; i++)
        if (out->outcomes[i].tied && (best < 0 || better_in_tie(&out->outcomes[i], &out->outcomes[best], NULL)))
          best = (int)i;
      /* What separated the winner from each of the others, in the order of the rule. */
      static const char *const keys[] = {"memory of the format", "error", "the recipe table"};
      bool decided[3] = {false, false, false};
      for (size_t i = 0; i < out->n_outcomes; i++) {
        if (!out->outcomes[i].tied || (int)i == best) continue;
        const char *by = NULL;
        better_in_tie(&out->outcomes[best], &out->outcomes[i], &by);
        for (int k = 0; k < 3; k++) decided[k] = decided[k] || (by && strcmp(by, keys[k]) == 0);
      }
      size_t used = 0;
      for (int k = 0; k < 3; k++)
        if (decided[k] && used < sizeof out->tie_decided_by)
          used += (size_t)snprintf(out->tie_decided_by + used, sizeof out->tie_decided_by - used, "%s%s",
                                   used ? ", then " : "", keys[k]);
      out->chosen = best;
    }
  } else {
    for (size_t i = 0; i < out->n_outcomes; i++) {
      const precis_recipe_outcome *o = &out->outcomes[i];
      if (!isfinite(o->margin)) continue;
      if (out->closest_miss < 0 || o->margin < out->outcomes[out->closest_miss].margin) out->closest_miss = (int)i;
    }
  }
done:
  free(workloads);
  free(recipes);
  if (st != PRECIS_OK) precis_recommendation_free(out);
  return st;
}

void precis_recommendation_free(precis_recommendation *rec) {
  free(rec->outcomes);
  memset(rec, 0, sizeof *rec);
  rec->chosen = rec->closest_miss = -1;
}

static void cost_text(const precis_recommendation *rec, const precis_recipe_outcome *o, char *buf, size_t len) {
  if (rec->objective == PRECIS_OBJECTIVE_LATENCY) precis_fmt_ms(buf, len, o->latency_ms);
  else precis_fmt_bytes(buf, len, o->memory_bytes);
}

static void ratio_text(char *buf, size_t len, double ratio) {
  if (isnan(ratio) || isinf(ratio)) snprintf(buf, len, "-");
  else snprintf(buf, len, "%.2fx", ratio);
}

static const char *objective_text(const precis_recommendation *rec) {
  if (rec->objective == PRECIS_OBJECTIVE_LATENCY) return "latency (sum of median ms per call over workloads)";
  return rec->memory_by_format ? "memory on the device (the format's bytes, the tensor column: an emulation's "
                                 "tracked peak holds float32 working copies)"
                               : "memory (largest tracked peak over workloads)";
}

/* The frontier from the most accurate (and most costly) to the cheapest, "fp32 (0, 12.7 s) -> ...". */
static void append_frontier(precis_buf *b, const precis_recommendation *rec) {
  size_t order[64];
  size_t n = 0;
  for (size_t i = 0; i < rec->n_outcomes && n < 64; i++)
    if (rec->outcomes[i].on_frontier) order[n++] = i;
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && rec->outcomes[order[j]].error < rec->outcomes[order[j - 1]].error; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (size_t i = 0; i < n; i++) {
    const precis_recipe_outcome *o = &rec->outcomes[order[i]];
    char cost[48], err[32];
    cost_text(rec, o, cost, sizeof cost);
    precis_fmt_sig(err, sizeof err, o->error, 3);
    if (i) precis_buf_append(b, " -> ");
    precis_buf_terminal(b, o->recipe, 40);
    precis_buf_appendf(b, " (%s, %s)", err, cost);
  }
  if (n == 0) precis_buf_append(b, "(none: no recipe has both an error and a cost)");
}

/* "fp16 tied with bf16, fp32 on latency within the measured noise; decided by memory of the format" */
static void append_tie(precis_buf *b, const precis_recommendation *rec) {
  if (!rec->tie_broken || rec->chosen < 0) return;
  precis_buf_append(b, "tied with ");
  bool first = true;
  for (size_t i = 0; i < rec->n_outcomes; i++) {
    if (!rec->outcomes[i].tied || (int)i == rec->chosen) continue;
    precis_buf_append(b, first ? "" : ", ");
    precis_buf_terminal(b, rec->outcomes[i].recipe, 40);
    first = false;
  }
  precis_buf_appendf(b, " on %s%s", rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory",
                     rec->tie_within_noise ? " within the measured noise" : " (equal cost)");
  if (rec->tie_within_noise && rec->tie_threshold > 0) precis_buf_appendf(b, " or %.0f%%", 100 * rec->tie_threshold);
  precis_buf_appendf(b, "; decided by %s", rec->tie_decided_by[0] ? rec->tie_decided_by : "the recipe table");
}

static void append_ask(precis_buf *b, const char *report_path) {
  precis_buf_append(b, "nothing is recommended without an accuracy target: the default gates say whether each format "
                       "behaved as that format should, not what accuracy you need. Ask with --require, e.g. precis "
                       "recommend ");
  precis_buf_terminal(b, report_path ? report_path : "REPORT.json", 200);
  precis_buf_append(b, " --require rel_fro<=1e-2 (or sqnr_db>=40, max_cw<=0.5, ...)");
}

char *precis_recommendation_headline(const precis_recommendation *rec) {
  precis_buf b;
  precis_buf_init(&b);
  if (!rec->has_target) {
    precis_buf_appendf(&b, "Pareto frontier (error rel_fro vs %s): ",
                       rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory");
    append_frontier(&b, rec);
    precis_buf_append(&b, ".\n");
    append_ask(&b, rec->report_path);
    precis_buf_append(&b, ".\n");
  } else if (rec->chosen >= 0) {
    const precis_recipe_outcome *w = &rec->outcomes[rec->chosen];
    char cost[48];
    cost_text(rec, w, cost, sizeof cost);
    precis_buf_append(&b, "recommended: ");
    precis_buf_terminal(&b, w->recipe, 40);
    precis_buf_append(&b, " - meets ");
    precis_buf_terminal(&b, rec->criteria_source, 0);
    precis_buf_appendf(&b, " on %s with the lowest %s (%s", rec->workload ? "this workload" : "every workload",
                       rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory", cost);
    if (!isnan(w->speedup_vs_fp32) && rec->objective == PRECIS_OBJECTIVE_LATENCY)
      precis_buf_appendf(&b, ", %.2fx the speed of fp32", w->speedup_vs_fp32);
    if (!isnan(w->memory_vs_fp32) && rec->objective == PRECIS_OBJECTIVE_MEMORY)
      precis_buf_appendf(&b, ", %.2fx fp32's", w->memory_vs_fp32);
    precis_buf_append(&b, ")");
    if (rec->tie_broken) {
      precis_buf_append(&b, "; ");
      append_tie(&b, rec);
    }
    precis_buf_append(&b, ".\n");
  } else {
    precis_buf_append(&b, "no recipe meets ");
    precis_buf_terminal(&b, rec->criteria_source, 0);
    precis_buf_append(&b, rec->workload ? " on this workload" : " on every workload");
    if (rec->closest_miss >= 0) {
      const precis_recipe_outcome *c = &rec->outcomes[rec->closest_miss];
      char factor[40];
      precis_fmt_sig(factor, sizeof factor, c->margin, 3);
      precis_buf_append(&b, "; closest miss: ");
      precis_buf_terminal(&b, c->recipe, 40);
      precis_buf_appendf(&b, ", off by a factor %s on ", factor);
      precis_buf_terminal(&b, c->failed_workload, 80);
      precis_buf_append(&b, ": ");
      precis_buf_terminal(&b, c->failed_what, 200);
    }
    precis_buf_append(&b, ".\n");
  }
  return precis_buf_take(&b);
}

void precis_recommendation_print(const precis_report *report, const precis_recommendation *rec, FILE *out) {
  precis_buf b;
  precis_buf_init(&b);
  bool cpu = precis_report_is_cpu_emulation(report);
  size_t n_workloads = rec->n_outcomes ? rec->outcomes[0].n_workloads : 0;
  if (rec->workload) {
    precis_buf_append(&b, "workload ");
    precis_buf_terminal(&b, rec->workload, 80);
  } else {
    precis_buf_appendf(&b, "%zu workload%s", n_workloads, n_workloads == 1 ? "" : "s");
  }
  precis_buf_appendf(&b, "; objective: %s; criteria: ", objective_text(rec));
  precis_buf_terminal(&b, rec->criteria_source, 0);
  precis_buf_append(&b, "\n");
  if (cpu) precis_buf_append(&b, "timings are cpu-emulation: CPU timings of an emulation, not GPU figures\n");
  if (!report->complete) precis_buf_append(&b, "WARNING: the report is INCOMPLETE; recipes without a row for every workload fail\n");
  precis_buf_appendf(&b, "\n%-10s  %-6s  %10s  %19s  %7s  %10s  %10s  %7s  %9s  %8s  %s\n", "recipe",
                     rec->has_target ? "result" : "gates", "latency", "noise (ms)", "speedup", "peak", "format",
                     "memory", "rel_fro", "frontier", "evidence");
  for (size_t i = 0; i < rec->n_outcomes; i++) {
    const precis_recipe_outcome *o = &rec->outcomes[i];
    char latency[48], noise[64], lo[24], hi[24], peak[32], format[32], speed[16], mem[16], err[32];
    precis_fmt_ms(latency, sizeof latency, o->latency_ms);
    precis_fmt_sig(lo, sizeof lo, o->latency_lo_ms, 4);
    precis_fmt_sig(hi, sizeof hi, o->latency_hi_ms, 4);
    snprintf(noise, sizeof noise, "%s..%s", lo, hi);
    precis_fmt_bytes(peak, sizeof peak, o->peak_bytes);
    precis_fmt_bytes(format, sizeof format, o->format_bytes);
    ratio_text(speed, sizeof speed, o->speedup_vs_fp32);
    ratio_text(mem, sizeof mem, o->memory_vs_fp32);
    precis_fmt_sig(err, sizeof err, o->error, 3);
    char name[16];
    precis_buf cut;
    precis_buf_init(&cut);
    precis_buf_terminal(&cut, o->recipe, 10);
    snprintf(name, sizeof name, "%s", cut.data ? cut.data : "");
    precis_buf_free(&cut);
    const char *result = !o->passes                                   ? "FAIL"
                         : rec->has_target && (int)i == rec->chosen ? "BEST"
                         : rec->has_target && o->tied               ? "tied"
                                                                    : "pass";
    precis_buf_appendf(&b, "%-10s  %-6s  %10s  %19s  %7s  %10s  %10s  %7s  %9s  %8s  ", name, result, latency, noise,
                       speed, peak, format, mem, err, o->on_frontier ? "*" : "");
    if (!o->passes) {
      precis_buf_terminal(&b, o->failed_workload, 40);
      precis_buf_append(&b, ": ");
      precis_buf_terminal(&b, o->failed_what, 200);
    }
    while (b.len && b.data[b.len - 1] == ' ') b.data[--b.len] = '\0';
    precis_buf_append(&b, "\n");
  }
  precis_buf_append(&b, "\n");
  if (!rec->has_target) {
    precis_buf_appendf(&b, "Pareto frontier (error rel_fro vs %s, * above): ",
                       rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory");
    append_frontier(&b, rec);
    precis_buf_append(&b, "\n");
    append_ask(&b, rec->report_path);
    precis_buf_append(&b, "\n");
  } else {
    if (rec->chosen >= 0) {
      const precis_recipe_outcome *w = &rec->outcomes[rec->chosen];
      char cost[48];
      cost_text(rec, w, cost, sizeof cost);
      precis_buf_append(&b, "recommendation: ");
      precis_buf_terminal(&b, w->recipe, 40);
      precis_buf_appendf(&b, " - meets the criteria on %s; %s %s", rec->workload ? "this workload" : "every workload",
                         rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency"
                         : rec->memory_by_format                    ? "memory of the format"
                                                                    : "peak memory",
                         cost);
      if (!isnan(w->speedup_vs_fp32) && rec->objective == PRECIS_OBJECTIVE_LATENCY)
        precis_buf_appendf(&b, ", %.2fx the speed of fp32", w->speedup_vs_fp32);
      if (!isnan(w->memory_vs_fp32)) precis_buf_appendf(&b, ", %.2fx fp32's memory", w->memory_vs_fp32);
      precis_buf_append(&b, "\n");
      if (rec->tie_broken) {
        precis_buf_append(&b, "  (");
        append_tie(&b, rec);
        precis_buf_append(&b, ")\n");
      }
    } else {
      precis_buf_append(&b, "no recipe meets the criteria");
      precis_buf_append(&b, rec->workload ? " on this workload.\n" : " on every workload.\n");
      if (rec->closest_miss >= 0) {
        const precis_recipe_outcome *c = &rec->outcomes[rec->closest_miss];
        char factor[40];
        precis_fmt_sig(factor, sizeof factor, c->margin, 3);
        precis_buf_append(&b, "closest miss: ");
        precis_buf_terminal(&b, c->recipe, 40);
        precis_buf_appendf(&b, ", off by a factor %s on ", factor);
        precis_buf_terminal(&b, c->failed_workload, 80);
        precis_buf_append(&b, ": ");
        precis_buf_terminal(&b, c->failed_what, 200);
        precis_buf_append(&b, "\n");
      } else {
        precis_buf_append(&b, "no recipe came close: every failing recipe has a row that did not run or has no criteria.\n");
      }
    }
    precis_buf_appendf(&b, "Pareto frontier (error rel_fro vs %s, * above): ",
                       rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory");
    append_frontier(&b, rec);
    precis_buf_append(&b, "\n");
  }
  char *text = precis_buf_take(&b);
  if (text) fputs(text, out);
  free(text);
}

static cJSON *number_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

char *precis_recommendation_json(const precis_recommendation *rec) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "objective", rec->objective == PRECIS_OBJECTIVE_LATENCY ? "latency" : "memory");
  if (rec->workload) cJSON_AddStringToObject(root, "workload", rec->workload);
  else cJSON_AddNullToObject(root, "workload");
  cJSON_AddStringToObject(root, "criteria", rec->criteria_source);
  cJSON_AddBoolToObject(root, "target", rec->has_target);
  cJSON_AddStringToObject(root, "memory_basis", rec->memory_by_format ? "format bytes (tensor_bytes)" : "tracked peak");
  if (rec->chosen >= 0 && rec->has_target) cJSON_AddStringToObject(root, "recommended", rec->outcomes[rec->chosen].recipe);
  else cJSON_AddNullToObject(root, "recommended");
  cJSON_AddBoolToObject(root, "tie_broken", rec->tie_broken && rec->has_target);
  cJSON_AddBoolToObject(root, "tie_within_noise", rec->tie_within_noise && rec->has_target);
  cJSON_AddNumberToObject(root, "tie_threshold", rec->tie_threshold);
  if (rec->tie_decided_by[0] && rec->has_target) cJSON_AddStringToObject(root, "tie_decided_by", rec->tie_decided_by);
  else cJSON_AddNullToObject(root, "tie_decided_by");
  if (rec->closest_miss >= 0 && rec->has_target) {
    const precis_recipe_outcome *c = &rec->outcomes[rec->closest_miss];
    cJSON *miss = cJSON_AddObjectToObject(root, "closest_miss");
    cJSON_AddStringToObject(miss, "recipe", c->recipe);
    cJSON_AddStringToObject(miss, "workload", c->failed_workload ? c->failed_workload : "");
    cJSON_AddStringToObject(miss, "metric", c->failed_metric);
    cJSON_AddStringToObject(miss, "detail", c->failed_what);
    cJSON_AddItemToObject(miss, "margin", number_or_null(c->margin));
  } else {
    cJSON_AddNullToObject(root, "closest_miss");
  }
  cJSON *list = cJSON_AddArrayToObject(root, "recipes");
  cJSON *frontier = cJSON_CreateArray();
  for (size_t i = 0; i < rec->n_outcomes; i++) {
    const precis_recipe_outcome *o = &rec->outcomes[i];
    cJSON *item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "recipe", o->recipe);
    cJSON_AddBoolToObject(item, "passes", o->passes);
    cJSON_AddItemToObject(item, "latency_ms", number_or_null(o->latency_ms));
    cJSON_AddItemToObject(item, "latency_noise_low_ms", number_or_null(o->latency_lo_ms));
    cJSON_AddItemToObject(item, "latency_noise_high_ms", number_or_null(o->latency_hi_ms));
    cJSON_AddBoolToObject(item, "tied", o->tied && rec->has_target);
    cJSON_AddItemToObject(item, "peak_bytes", o->peak_bytes >= 0 ? cJSON_CreateNumber((double)o->peak_bytes) : cJSON_CreateNull());
    cJSON_AddItemToObject(item, "format_bytes", o->format_bytes >= 0 ? cJSON_CreateNumber((double)o->format_bytes) : cJSON_CreateNull());
    cJSON_AddItemToObject(item, "rel_fro_worst", number_or_null(o->error));
    cJSON_AddItemToObject(item, "speedup_vs_fp32", number_or_null(o->speedup_vs_fp32));
    cJSON_AddItemToObject(item, "memory_vs_fp32", number_or_null(o->memory_vs_fp32));
    cJSON_AddBoolToObject(item, "on_frontier", o->on_frontier);
    if (o->passes) {
      cJSON_AddNullToObject(item, "failure");
    } else {
      cJSON *f = cJSON_AddObjectToObject(item, "failure");
      cJSON_AddStringToObject(f, "workload", o->failed_workload ? o->failed_workload : "");
      cJSON_AddStringToObject(f, "metric", o->failed_metric);
      cJSON_AddStringToObject(f, "detail", o->failed_what);
      cJSON_AddItemToObject(f, "margin", number_or_null(o->margin));
    }
    cJSON_AddItemToArray(list, item);
    if (o->on_frontier) cJSON_AddItemToArray(frontier, cJSON_CreateString(o->recipe));
  }
  cJSON_AddItemToObject(root, "frontier", frontier);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
