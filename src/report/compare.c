#include "compare.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "report_util.h"

/* 1 - cosine below this is rounding noise of the cosine itself, not a change in the output. */
#define COSINE_ERROR_FLOOR 1e-12

void precis_compare_options_default(precis_compare_options *options) {
  options->error_factor = 2.0;
  options->time_threshold = 0.10;
  options->memory_threshold = 0.10;
}

const char *precis_change_kind_str(precis_change_kind kind) {
  switch (kind) {
  case PRECIS_CHANGE_STATUS: return "status";
  case PRECIS_CHANGE_VERDICT: return "verdict";
  case PRECIS_CHANGE_ERROR: return "accuracy";
  case PRECIS_CHANGE_SPEED: return "speed";
  case PRECIS_CHANGE_MEMORY: return "memory";
  }
  return "?";
}

static precis_change *add_change(precis_comparison *cmp, const precis_row *row, precis_change_kind kind,
                                 bool regression, const char *what, double base, double now) {
  if (cmp->n_changes == cmp->cap_changes) {
    size_t cap = cmp->cap_changes ? cmp->cap_changes * 2 : 16;
    precis_change *grown = realloc(cmp->changes, cap * sizeof *grown);
    if (!grown) return NULL;
    cmp->changes = grown;
    cmp->cap_changes = cap;
  }
  precis_change *c = &cmp->changes[cmp->n_changes++];
  memset(c, 0, sizeof *c);
  c->workload = row->workload;
  c->recipe = row->recipe;
  c->kind = kind;
  c->regression = regression;
  snprintf(c->what, sizeof c->what, "%s", what);
  c->base = base;
  c->now = now;
  if (regression) cmp->n_regressions++;
  return c;
}

static bool push_string(char ***list, size_t *count, char *s) {
  if (!s) return false;
  char **grown = realloc(*list, (*count + 1) * sizeof *grown);
  if (!grown) {
    free(s);
    return false;
  }
  *list = grown;
  (*list)[(*count)++] = s;
  return true;
}

/* Environment keys whose difference makes figures incomparable (or at least worth a look). */
static bool env_key_matters(const char *key) {
  static const char *const parts[] = {"backend", "device", "driver", "cuda", "cublas", "compute_capability",
                                      "cpu", "blas", "gpu", "sm_count"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    if (strstr(key, parts[i])) return true;
  return false;
}

static bool same_text(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static bool env_warnings(const precis_report *base, const precis_report *now, precis_comparison *cmp) {
  for (int side = 0; side < 2; side++) {
    const precis_kv_list *list = side == 0 ? &base->environment : &now->environment;
    const precis_kv_list *other = side == 0 ? &now->environment : &base->environment;
    for (size_t i = 0; i < list->count; i++) {
      const char *key = list->items[i].key;
      if (!env_key_matters(key)) continue;
      bool in_other = false;
      for (size_t j = 0; j < other->count && !in_other; j++) in_other = strcmp(other->items[j].key, key) == 0;
      if (side == 1 && in_other) continue; /* already compared from BASE's side */
      const char *a = precis_kv_get(&base->environment, key), *b = precis_kv_get(&now->environment, key);
      if (same_text(a, b)) continue;
      if (!push_string(&cmp->warnings, &cmp->n_warnings,
                       precis_asprintf("environment differs: %s is \"%s\" in BASE, \"%s\" in NEW", key, a ? a : "null",
                                       b ? b : "null")))
        return false;
    }
  }
  if (!same_text(base->dataset_id, now->dataset_id) &&
      !push_string(&cmp->warnings, &cmp->n_warnings,
                   precis_asprintf("dataset differs: dataset_id \"%s\" in BASE, \"%s\" in NEW (errors are measured on "
                                   "different data)",
                                   base->dataset_id ? base->dataset_id : "null", now->dataset_id ? now->dataset_id : "null")))
    return false;
  if (!same_text(precis_report_backend(base), precis_report_backend(now)) &&
      !push_string(&cmp->warnings, &cmp->n_warnings,
                   precis_asprintf("timings come from different backends (%s vs %s): speed changes are not comparable",
                                   precis_report_backend(base), precis_report_backend(now))))
    return false;
  for (int side = 0; side < 2; side++) {
    const precis_report *r = side ? now : base;
    if (!r->complete && !push_string(&cmp->warnings, &cmp->n_warnings,
                                     precis_asprintf("%s is an INCOMPLETE report (the run ended early)", side ? "NEW" : "BASE")))
      return false;
  }
  return true;
}

static const precis_metric_id growth_metrics[] = {PRECIS_METRIC_REL_FRO, PRECIS_METRIC_MAX_ABS, PRECIS_METRIC_MAX_REL,
                                                  PRECIS_METRIC_RMSE, PRECIS_METRIC_MAX_CW,
                                                  /* rows of logit workloads only (absent elsewhere) */
                                                  PRECIS_METRIC_KL_MEAN, PRECIS_METRIC_RKL_MEAN};

static bool compare_errors(const precis_row *b, const precis_row *n, const precis_compare_options *opt,
                           precis_comparison *cmp) {
  double f = opt->error_factor;
  for (size_t i = 0; i < sizeof growth_metrics / sizeof growth_metrics[0]; i++) {
    precis_metric_id id = growth_metrics[i];
    const char *key = precis_metric_get(id)->key;
    if (!b->error[id].present || !n->error[id].present) continue;
    double x = b->error[id].worst, y = n->error[id].worst;
    if (isnan(x) || isnan(y)) continue;
    precis_change *c = NULL;
    if ((x > 0 && y > f * x) || (x == 0 && y > 0)) {
      c = add_change(cmp, n, PRECIS_CHANGE_ERROR, true, key, x, y);
      if (!c) return false;
      char tx[40], ty[40], tr[40], tf[40];
      precis_fmt_sig(tx, sizeof tx, x, 3), precis_fmt_sig(ty, sizeof ty, y, 3);
      precis_fmt_sig(tr, sizeof tr, x > 0 ? y / x : NAN, 3), precis_fmt_sig(tf, sizeof tf, f, 6);
      if (x > 0)
        snprintf(c->detail, sizeof c->detail, "%s worst %s → %s (%sx, limit %sx)", key, tx, ty, tr, tf);
      else
        snprintf(c->detail, sizeof c->detail, "%s worst 0 (exact) → %s", key, ty);
    } else if (y < x / f) {
      c = add_change(cmp, n, PRECIS_CHANGE_ERROR, false, key, x, y);
      if (!c) return false;
      char tx[40], ty[40], tr[40];
      precis_fmt_sig(tx, sizeof tx, x, 3), precis_fmt_sig(ty, sizeof ty, y, 3), precis_fmt_sig(tr, sizeof tr, y / x, 3);
      snprintf(c->detail, sizeof c->detail, "%s worst %s → %s (%sx)", key, tx, ty, tr);
    }
  }
  const precis_metric_value *bs = &b->error[PRECIS_METRIC_SQNR_DB], *ns = &n->error[PRECIS_METRIC_SQNR_DB];
  double drop = 20.0 * log10(f);
  if (bs->present && ns->present && !isnan(bs->worst) && !isnan(ns->worst) && ns->worst < bs->worst - drop) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_ERROR, true, "sqnr_db", bs->worst, ns->worst);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "sqnr_db worst %.4g → %.4g dB (down %.3g dB, limit %.3g dB)", bs->worst,
             ns->worst, bs->worst - ns->worst, drop);
  }
  const precis_metric_value *bc = &b->error[PRECIS_METRIC_COSINE], *nc = &n->error[PRECIS_METRIC_COSINE];
  if (bc->present && nc->present && !isnan(bc->worst) && !isnan(nc->worst)) {
    double x = fmax(1 - bc->worst, COSINE_ERROR_FLOOR), y = 1 - nc->worst;
    if (y > f * x) {
      precis_change *c = add_change(cmp, n, PRECIS_CHANGE_ERROR, true, "cosine", bc->worst, nc->worst);
      if (!c) return false;
      snprintf(c->detail, sizeof c->detail, "cosine worst %.10g → %.10g (1-cosine %.3gx, limit %gx)", bc->worst,
               nc->worst, y / x, f);
    }
  }
  /* top1_agree falls as the output worsens: its disagreement 1 - top1 is judged like an error,
   * with one token of a sample (1/m) as the floor, the smallest change it can show. */
  const precis_metric_value *bt = &b->error[PRECIS_METRIC_TOP1_AGREE], *nt = &n->error[PRECIS_METRIC_TOP1_AGREE];
  if (bt->present && nt->present && !isnan(bt->worst) && !isnan(nt->worst) && n->m > 0) {
    double x = fmax(1 - bt->worst, 1.0 / (double)n->m), y = 1 - nt->worst;
    if (y > f * x) {
      precis_change *c = add_change(cmp, n, PRECIS_CHANGE_ERROR, true, "top1_agree", bt->worst, nt->worst);
      if (!c) return false;
      snprintf(c->detail, sizeof c->detail, "top1_agree worst %.4g → %.4g (disagreement %.3gx, limit %gx)", bt->worst,
               nt->worst, y / x, f);
    }
  }
  const precis_metric_value *bn = &b->error[PRECIS_METRIC_NONFINITE], *nn = &n->error[PRECIS_METRIC_NONFINITE];
  if (nn->present && !isnan(nn->worst) && nn->worst > (bn->present && !isnan(bn->worst) ? bn->worst : 0)) {
    double was = bn->present ? bn->worst : 0;
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_ERROR, true, "nonfinite", was, nn->worst);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "nonfinite worst %g → %g (NaN/inf in the output)", was, nn->worst);
  }
  return true;
}

static bool compare_speed(const precis_row *b, const precis_row *n, const precis_compare_options *opt,
                          precis_comparison *cmp) {
  double bm = b->time.median_ms, bp = b->time.p95_ms, nm = n->time.median_ms, np = n->time.p95_ms;
  if (isnan(bm) || isnan(nm) || bm <= 0) return true;
  if (isnan(bp)) bp = bm;
  if (nm > bp && nm > bm * (1 + opt->time_threshold)) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_SPEED, true, "median_ms", bm, nm);
    if (!c) return false;
    char tb[40], tn[40], tp[40];
    precis_fmt_sig(tb, sizeof tb, bm, 4), precis_fmt_sig(tn, sizeof tn, nm, 4), precis_fmt_sig(tp, sizeof tp, bp, 4);
    snprintf(c->detail, sizeof c->detail, "median %s → %s ms (+%.1f%%, above BASE p95 %s ms and the %.0f%% threshold)", tb,
             tn, 100 * (nm / bm - 1), tp, 100 * opt->time_threshold);
  } else if (nm < bm * (1 - opt->time_threshold) && (isnan(np) || np < bm)) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_SPEED, false, "median_ms", bm, nm);
    if (!c) return false;
    char tb[40], tn[40];
    precis_fmt_sig(tb, sizeof tb, bm, 4), precis_fmt_sig(tn, sizeof tn, nm, 4);
    snprintf(c->detail, sizeof c->detail, "median %s → %s ms (%.1f%%)", tb, tn, 100 * (nm / bm - 1));
  }
  return true;
}

static bool compare_bytes(const precis_row *n, const char *what, long long x, long long y,
                          const precis_compare_options *opt, precis_comparison *cmp) {
  if (x < 0 || y < 0) return true;
  char bx[32], by[32];
  precis_fmt_bytes(bx, sizeof bx, x);
  precis_fmt_bytes(by, sizeof by, y);
  if ((double)y > (double)x * (1 + opt->memory_threshold) && y > x) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_MEMORY, true, what, (double)x, (double)y);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "%s %s → %s (+%.1f%%, threshold %.0f%%)", what, bx, by,
             x > 0 ? 100.0 * ((double)y / (double)x - 1) : 100.0, 100 * opt->memory_threshold);
  } else if ((double)y < (double)x * (1 - opt->memory_threshold)) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_MEMORY, false, what, (double)x, (double)y);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "%s %s → %s (%.1f%%)", what, bx, by, 100.0 * ((double)y / (double)x - 1));
  }
  return true;
}

static bool compare_pair(const precis_row *b, const precis_row *n, const precis_compare_options *opt,
                         precis_comparison *cmp) {
  bool base_ok = b->status == PRECIS_ROW_OK, new_ok = n->status == PRECIS_ROW_OK;
  if (base_ok != new_ok) {
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_STATUS, base_ok, "status", NAN, NAN);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "status %s → %s%s%s", precis_row_status_str(b->status),
             precis_row_status_str(n->status), new_ok ? "" : ": ", new_ok ? "" : (n->reason ? n->reason : "(no reason)"));
    return true;
  }
  if (!new_ok) return true;
  if (b->verdict != n->verdict && b->verdict != PRECIS_VERDICT_NONE && n->verdict != PRECIS_VERDICT_NONE) {
    bool worse = n->verdict == PRECIS_VERDICT_FAIL;
    precis_change *c = add_change(cmp, n, PRECIS_CHANGE_VERDICT, worse, "verdict", NAN, NAN);
    if (!c) return false;
    snprintf(c->detail, sizeof c->detail, "verdict %s → %s%s%s", precis_verdict_str(b->verdict),
             precis_verdict_str(n->verdict), worse && n->verdict_detail ? ": " : "",
             worse && n->verdict_detail ? n->verdict_detail : "");
  }
  if (!compare_errors(b, n, opt, cmp) || !compare_speed(b, n, opt, cmp)) return false;
  if (!compare_bytes(n, "tracked_peak_bytes", b->memory.tracked_peak_bytes, n->memory.tracked_peak_bytes, opt, cmp))
    return false;
  const precis_memory *bm = &b->memory, *nm = &n->memory;
  if (bm->device_peak_bytes >= 0 && bm->device_baseline_bytes >= 0 && nm->device_peak_bytes >= 0 &&
      nm->device_baseline_bytes >= 0 &&
      !compare_bytes(n, "device_peak_bytes-device_baseline_bytes", bm->device_peak_bytes - bm->device_baseline_bytes,
                     nm->device_peak_bytes - nm->device_baseline_bytes, opt, cmp))
    return false;
  return true;
}

/* Rows pair by (workload, canonical spec), so that a preset and the same spec written out pair;
 * rows without a spec (hand-made reports) pair by recipe name. */
static const precis_row *find_pair(const precis_report *in, const precis_row *row) {
  return row->spec ? precis_report_find_spec(in, row->workload, row->spec)
                   : precis_report_find_row(in, row->workload, row->recipe);
}

precis_status precis_compare_reports(const precis_report *base, const precis_report *now,
                                     const precis_compare_options *options, precis_comparison *out) {
  memset(out, 0, sizeof *out);
  out->options = *options;
  if (!(options->error_factor > 1) || !(options->time_threshold >= 0) || !(options->memory_threshold >= 0))
    return precis_fail(PRECIS_E_USAGE, "thresholds: expected an error factor > 1 and thresholds >= 0");
  bool ok = env_warnings(base, now, out);
  for (size_t i = 0; ok && i < base->n_rows; i++) {
    const precis_row *b = &base->rows[i];
    const precis_row *n = find_pair(now, b);
    if (!n) {
      ok = push_string(&out->only_in_base, &out->n_only_in_base, precis_asprintf("%s / %s", b->workload, b->recipe));
      continue;
    }
    out->n_pairs++;
    ok = compare_pair(b, n, options, out);
  }
  for (size_t i = 0; ok && i < now->n_rows; i++) {
    const precis_row *n = &now->rows[i];
    if (!find_pair(base, n))
      ok = push_string(&out->only_in_new, &out->n_only_in_new, precis_asprintf("%s / %s", n->workload, n->recipe));
  }
  if (!ok) {
    precis_comparison_free(out);
    return precis_fail(PRECIS_E_NOMEM, "out of memory comparing reports");
  }
  return PRECIS_OK;
}

static void free_strings(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

void precis_comparison_free(precis_comparison *cmp) {
  free(cmp->changes);
  free_strings(cmp->only_in_base, cmp->n_only_in_base);
  free_strings(cmp->only_in_new, cmp->n_only_in_new);
  free_strings(cmp->warnings, cmp->n_warnings);
  memset(cmp, 0, sizeof *cmp);
}

static void md_changes(precis_buf *b, const precis_comparison *cmp, bool regressions) {
  size_t count = 0;
  for (size_t i = 0; i < cmp->n_changes; i++)
    if (cmp->changes[i].regression == regressions) count++;
  precis_buf_appendf(b, "## %s (%zu)\n\n", regressions ? "Regressions" : "Improvements", count);
  if (count == 0) {
    precis_buf_append(b, "None.\n\n");
    return;
  }
  precis_buf_append(b, "| workload | recipe | kind | change |\n|---|---|---|---|\n");
  for (size_t i = 0; i < cmp->n_changes; i++) {
    const precis_change *c = &cmp->changes[i];
    if (c->regression != regressions) continue;
    precis_buf_append(b, "| ");
    precis_buf_markdown(b, c->workload);
    precis_buf_append(b, " | ");
    precis_buf_markdown(b, c->recipe);
    precis_buf_appendf(b, " | %s | ", precis_change_kind_str(c->kind));
    precis_buf_markdown(b, c->detail);
    precis_buf_append(b, " |\n");
  }
  precis_buf_append(b, "\n");
}

char *precis_comparison_markdown(const precis_comparison *cmp, const char *base_path, const char *new_path) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_append(&b, "# precis compare\n\n- BASE: ");
  precis_buf_markdown(&b, base_path);
  precis_buf_append(&b, "\n- NEW: ");
  precis_buf_markdown(&b, new_path);
  precis_buf_appendf(&b, "\n\n**%s**: %zu regression%s in %zu paired rows (workload × recipe).\n\n",
                     cmp->n_regressions ? "REGRESSION" : "No regression", cmp->n_regressions,
                     cmp->n_regressions == 1 ? "" : "s", cmp->n_pairs);
  if (cmp->n_warnings) {
    precis_buf_append(&b, "## Warnings\n\n");
    for (size_t i = 0; i < cmp->n_warnings; i++) {
      precis_buf_append(&b, "- ");
      precis_buf_markdown(&b, cmp->warnings[i]);
      precis_buf_append(&b, "\n");
    }
    precis_buf_append(&b, "\n");
  }
  md_changes(&b, cmp, true);
  md_changes(&b, cmp, false);
  if (cmp->n_only_in_base || cmp->n_only_in_new) {
    precis_buf_append(&b, "## Not compared\n\n");
    for (size_t i = 0; i < cmp->n_only_in_base; i++) {
      precis_buf_append(&b, "- only in BASE: ");
      precis_buf_markdown(&b, cmp->only_in_base[i]);
      precis_buf_append(&b, "\n");
    }
    for (size_t i = 0; i < cmp->n_only_in_new; i++) {
      precis_buf_append(&b, "- only in NEW: ");
      precis_buf_markdown(&b, cmp->only_in_new[i]);
      precis_buf_append(&b, "\n");
    }
    precis_buf_append(&b, "\n");
  }
  precis_buf_appendf(&b,
                     "Thresholds: accuracy - an error metric (worst over samples) growing more than %gx, sqnr_db "
                     "dropping more than %.3g dB, a verdict pass → fail, a row that no longer runs; speed - NEW median "
                     "above BASE p95 and more than %g%% above BASE median; memory - more than %g%% above BASE.\n",
                     cmp->options.error_factor, 20 * log10(cmp->options.error_factor),
                     100 * cmp->options.time_threshold, 100 * cmp->options.memory_threshold);
  return precis_buf_take(&b);
}

static cJSON *number_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

char *precis_comparison_json(const precis_comparison *cmp, const char *base_path, const char *new_path) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", "precis-compare");
  cJSON_AddNumberToObject(root, "format_version", 1);
  cJSON_AddStringToObject(root, "base", base_path);
  cJSON_AddStringToObject(root, "new", new_path);
  cJSON_AddBoolToObject(root, "regression", cmp->n_regressions > 0);
  cJSON_AddNumberToObject(root, "regressions", (double)cmp->n_regressions);
  cJSON_AddNumberToObject(root, "pairs", (double)cmp->n_pairs);
  cJSON *thresholds = cJSON_AddObjectToObject(root, "thresholds");
  cJSON_AddNumberToObject(thresholds, "error_factor", cmp->options.error_factor);
  cJSON_AddNumberToObject(thresholds, "time_threshold", cmp->options.time_threshold);
  cJSON_AddNumberToObject(thresholds, "memory_threshold", cmp->options.memory_threshold);
  cJSON *changes = cJSON_AddArrayToObject(root, "changes");
  for (size_t i = 0; i < cmp->n_changes; i++) {
    const precis_change *c = &cmp->changes[i];
    cJSON *item = cJSON_CreateObject();
    cJSON_AddStringToObject(item, "workload", c->workload);
    cJSON_AddStringToObject(item, "recipe", c->recipe);
    cJSON_AddStringToObject(item, "kind", precis_change_kind_str(c->kind));
    cJSON_AddBoolToObject(item, "regression", c->regression);
    cJSON_AddStringToObject(item, "what", c->what);
    cJSON_AddItemToObject(item, "base", number_or_null(c->base));
    cJSON_AddItemToObject(item, "new", number_or_null(c->now));
    cJSON_AddStringToObject(item, "detail", c->detail);
    cJSON_AddItemToArray(changes, item);
  }
  cJSON *base_only = cJSON_AddArrayToObject(root, "only_in_base");
  for (size_t i = 0; i < cmp->n_only_in_base; i++) cJSON_AddItemToArray(base_only, cJSON_CreateString(cmp->only_in_base[i]));
  cJSON *new_only = cJSON_AddArrayToObject(root, "only_in_new");
  for (size_t i = 0; i < cmp->n_only_in_new; i++) cJSON_AddItemToArray(new_only, cJSON_CreateString(cmp->only_in_new[i]));
  cJSON *warnings = cJSON_AddArrayToObject(root, "warnings");
  for (size_t i = 0; i < cmp->n_warnings; i++) cJSON_AddItemToArray(warnings, cJSON_CreateString(cmp->warnings[i]));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
