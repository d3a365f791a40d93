#include "plan.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "numerics/format.h"
#include "numerics/recipe.h"
#include "report/report_util.h"

const char *precis_plan_budget_str(precis_plan_budget b) {
  switch (b) {
  case PRECIS_PLAN_NO_BUDGET: return "none";
  case PRECIS_PLAN_MEMORY: return "memory";
  case PRECIS_PLAN_BITS: return "bits";
  case PRECIS_PLAN_LATENCY: return "latency";
  }
  return "?";
}

const char *precis_plan_objective_str(precis_plan_objective o) {
  switch (o) {
  case PRECIS_PLAN_OBJECTIVE_AUTO: return "auto";
  case PRECIS_PLAN_OBJECTIVE_REL_FRO: return "rel_fro";
  case PRECIS_PLAN_OBJECTIVE_FISHER: return "fisher";
  case PRECIS_PLAN_OBJECTIVE_TAYLOR: return "taylor";
  }
  return "?";
}

const char *precis_plan_objective_definition(precis_plan_objective o) {
  switch (o) {
  case PRECIS_PLAN_OBJECTIVE_AUTO:
  case PRECIS_PLAN_OBJECTIVE_REL_FRO: return "rel_fro (worst over samples)";
  case PRECIS_PLAN_OBJECTIVE_FISHER:
    return "predicted loss change, Fisher term 1/2 sum (g*(C - C_ref))^2 (loss_change.fisher, mean over samples)";
  case PRECIS_PLAN_OBJECTIVE_TAYLOR:
    return "predicted loss change, first-order term |sum g*(C - C_ref)| (|loss_change.taylor mean| over samples)";
  }
  return "?";
}

/* ------------------------------------------------------------------ the solver */

typedef struct state {
  double cost, error;
  uint32_t parent; /* index in the previous layer's frontier */
  int32_t recipe;
} state;

static int state_order(const void *pa, const void *pb) {
  const state *a = pa, *b = pb;
  if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
  if (a->error != b->error) return a->error < b->error ? -1 : 1;
  /* Equal partial sums: keep the one reached with earlier recipes, so the plan is deterministic. */
  if (a->parent != b->parent) return a->parent < b->parent ? -1 : 1;
  return a->recipe < b->recipe ? -1 : a->recipe > b->recipe;
}

bool precis_plan_solve(size_t n_layers, size_t n_recipes, const double *cost, const double *error, const bool *allowed,
                       double capacity, size_t state_limit, int *choice, double *total_cost, double *total_error,
                       bool *exact, size_t *states_out) {
  if (state_limit == 0) state_limit = (size_t)1 << 20;
  *exact = true;
  *states_out = 0;
  bool found = false;
  /* The cheapest completion of layers l.. lets a partial sum that cannot fit be dropped early. */
  double *min_rest = calloc(n_layers + 1, sizeof *min_rest);
  state **frontier = calloc(n_layers + 1, sizeof *frontier);
  size_t *size = calloc(n_layers + 1, sizeof *size);
  state *candidates = NULL;
  if (!min_rest || !frontier || !size) goto done;
  for (size_t l = n_layers; l-- > 0;) {
    double best = INFINITY;
    for (size_t r = 0; r < n_recipes; r++)
      if (allowed[l * n_recipes + r] && cost[l * n_recipes + r] < best) best = cost[l * n_recipes + r];
    if (!isfinite(best)) goto done; /* a layer with nothing allowed */
    min_rest[l] = min_rest[l + 1] + best;
  }
  const double slack = fabs(capacity) * 1e-12;
  frontier[0] = malloc(sizeof(state));
  if (!frontier[0]) goto done;
  frontier[0][0] = (state){0, 0, 0, -1};
  size[0] = 1;
  for (size_t l = 0; l < n_layers; l++) {
    size_t n_cand = 0, cap = size[l] * n_recipes;
    candidates = malloc((cap ? cap : 1) * sizeof *candidates);
    if (!candidates) goto done;
    for (size_t s = 0; s < size[l]; s++) {
      const state *prev = &frontier[l][s];
      for (size_t r = 0; r < n_recipes; r++) {
        if (!allowed[l * n_recipes + r]) continue;
        double c = prev->cost + cost[l * n_recipes + r];
        /* Early pruning sums in another order than the final total, so it keeps a margin for
         * rounding; the last layer compares the total itself. */
        if (l + 1 < n_layers ? c + min_rest[l + 1] > capacity + slack : c > capacity) continue;
        candidates[n_cand++] = (state){c, prev->error + error[l * n_recipes + r], (uint32_t)s, (int32_t)r};
      }
    }
    qsort(candidates, n_cand, sizeof *candidates, state_order);
    /* Pareto sweep: in order of cost, keep a state only when it is strictly more accurate than
     * every cheaper (or equally cheap) one. */
    size_t kept = 0;
    double best_error = INFINITY;
    for (size_t i = 0; i < n_cand; i++)
      if (candidates[i].error < best_error) {
        best_error = candidates[i].error;
        candidates[kept++] = candidates[i];
      }
    if (kept == 0) goto done;
    if (kept > state_limit) {
      /* Thinning keeps both ends and evenly spaced states between: no longer exact. */
      *exact = false;
      for (size_t i = 0; i < state_limit; i++) candidates[i] = candidates[i * (kept - 1) / (state_limit - 1 ? state_limit - 1 : 1)];
      kept = state_limit;
    }
    *states_out += kept;
    frontier[l + 1] = realloc(candidates, kept * sizeof *candidates);
    if (!frontier[l + 1]) goto done;
    candidates = NULL;
    size[l + 1] = kept;
  }
  /* The frontier is sorted by cost with strictly falling error: its last state is the most
   * accurate, and the cheapest of those equally accurate. */
  size_t s = size[n_layers] - 1;
  *total_cost = frontier[n_layers][s].cost;
  *total_error = frontier[n_layers][s].error;
  for (size_t l = n_layers; l-- > 0;) {
    choice[l] = frontier[l + 1][s].recipe;
    s = frontier[l + 1][s].parent;
  }
  found = true;
done:
  if (frontier)
    for (size_t l = 0; l <= n_layers; l++) free(frontier[l]);
  free(frontier);
  free(size);
  free(min_rest);
  free(candidates);
  return found;
}

/* ------------------------------------------------------------------ cells */

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

static void judge(const precis_row *row, const precis_criteria *require, precis_plan_cell *cell) {
  cell->passes = false;
  if (row->status != PRECIS_ROW_OK) {
    snprintf(cell->what, sizeof cell->what, "status %s: %s", precis_row_status_str(row->status),
             row->reason ? row->reason : "(no reason recorded)");
    return;
  }
  if (!require || require->count == 0) {
    cell->passes = row->verdict == PRECIS_VERDICT_PASS;
    if (!cell->passes)
      snprintf(cell->what, sizeof cell->what, "%s",
               row->verdict == PRECIS_VERDICT_FAIL && row->verdict_detail ? row->verdict_detail
                                                                           : "no criteria recorded (give --require)");
    return;
  }
  size_t failed = 0;
  double margin = NAN;
  if (precis_criteria_check(require, row->error, &failed, &margin)) {
    cell->passes = true;
    return;
  }
  const precis_criterion *c = &require->items[failed];
  const precis_metric_value *v = &row->error[c->metric];
  char value[40], limit[40];
  if (v->present) snprintf(value, sizeof value, "%.3g", v->worst);
  else snprintf(value, sizeof value, "null");
  precis_format_double(limit, sizeof limit, c->value);
  snprintf(cell->what, sizeof cell->what, "%s=%s %s %s", precis_metric_get(c->metric)->key, value, negated(c->op), limit);
}

static int compare_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return a < b ? -1 : a > b;
}

/* The row's spec: row->spec, or the preset's spec for a report written before specs. */
static bool row_spec(const precis_row *row, precis_spec *spec) {
  const char *text = row->spec ? row->spec : precis_recipe_name_spec(row->recipe);
  if (!text || row->k <= 0 || row->n <= 0 || precis_spec_parse(text, spec) != PRECIS_OK) {
    precis_clear_error();
    return false;
  }
  return true;
}

/* Bytes a layer holds only while it runs, at m tokens (times batch): what its tensor_bytes holds
 * beyond the weights (tensor_bytes at m = 0): the input, the output, accumulators and their scales. */
static double transient_bytes(const precis_spec *spec, long long m, long long n, long long k, long long batch) {
  return (double)(precis_spec_tensor_bytes(spec, m, n, k, batch, false) - precis_spec_tensor_bytes(spec, 0, n, k, batch, false));
}

/* The weights are the workload's b (B = W^T, k x n). Effective bits: elements, scales and zero
 * points as a checkpoint stores them (spec.h); exact, an integer below 2^53 for any real layer. */
static void cell_costs(const precis_row *row, precis_plan_budget kind, precis_plan_cell *cell) {
  cell->cost = cell->resident = cell->transient = NAN;
  precis_spec spec;
  bool known = row_spec(row, &spec);
  double bits = known ? precis_operand_weight_total_bits(&spec.b, row->k, row->n) : NAN;
  if (known) {
    cell->resident = ceil(bits / 8);
    long long m = row->m > 0 ? row->m : 0, batch = row->batch > 0 ? row->batch : 1;
    const char *workspace = precis_kv_get(&row->details, "workspace_limit_bytes");
    cell->transient = transient_bytes(&spec, m, row->n, row->k, batch) + (workspace ? strtod(workspace, NULL) : 0);
  }
  switch (kind) {
  case PRECIS_PLAN_NO_BUDGET:
  case PRECIS_PLAN_MEMORY: cell->cost = cell->resident; break;
  case PRECIS_PLAN_LATENCY: cell->cost = row->time.median_ms; break;
  case PRECIS_PLAN_BITS: cell->cost = bits; break;
  }
}

/* The memory budget (plan.h): the sum of resident bytes plus the largest transient of the chosen
 * cells. For each candidate peak T, ascending, the sum is solved over the cells of transient <= T
 * within budget - T; the most accurate of those plans wins (ties: the lower memory). Exact: the
 * optimum has some peak T*, and the solve at T* finds a plan no less accurate that fits. */
static bool solve_memory(size_t n_units, size_t n_recipes, const double *cost, const double *error, const bool *allowed,
                         const double *transient, double budget, size_t state_limit, int *choice, double *total_cost,
                         double *total_error, bool *exact, size_t *states) {
  size_t n_cells = n_units * n_recipes, n_peaks = 0;
  double *peaks = malloc((n_cells ? n_cells : 1) * sizeof *peaks);
  bool *allowed_t = malloc((n_cells ? n_cells : 1) * sizeof *allowed_t);
  int *trial = malloc((n_units ? n_units : 1) * sizeof *trial);
  bool found = false;
  *exact = true;
  *states = 0;
  if (!peaks || !allowed_t || !trial) goto done;
  for (size_t i = 0; i < n_cells; i++)
    if (allowed[i]) peaks[n_peaks++] = transient[i];
  qsort(peaks, n_peaks, sizeof *peaks, compare_double);
  double best_error = INFINITY, best_memory = INFINITY;
  for (size_t t = 0; t < n_peaks; t++) {
    if (t > 0 && peaks[t] == peaks[t - 1]) continue;
    double peak = peaks[t];
    if (peak > budget) break; /* ascending: no later peak fits either */
    for (size_t i = 0; i < n_cells; i++) allowed_t[i] = allowed[i] && transient[i] <= peak;
    double c = 0, e = 0;
    bool ex = true;
    size_t st = 0;
    bool ok = precis_plan_solve(n_units, n_recipes, cost, error, allowed_t, budget - peak, state_limit, trial, &c, &e,
                                &ex, &st);
    *states += st;
    *exact = *exact && ex;
    if (!ok) continue;
    double actual_peak = 0;
    for (size_t u = 0; u < n_units; u++) actual_peak = fmax(actual_peak, transient[u * n_recipes + (size_t)trial[u]]);
    double memory = c + actual_peak;
    if (e < best_error || (e == best_error && memory < best_memory)) {
      best_error = e;
      best_memory = memory;
      memcpy(choice, trial, n_units * sizeof *choice);
      *total_cost = memory;
      *total_error = e;
      found = true;
    }
  }
done:
  free(peaks);
  free(allowed_t);
  free(trial);
  return found;
}

typedef struct ranked {
  double sensitivity;
  size_t layer;
} ranked;

/* Most sensitive first; layers without any error last; then by layer order. */
static int by_sensitivity(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  bool na = isnan(a->sensitivity), nb = isnan(b->sensitivity);
  if (na != nb) return na ? 1 : -1;
  if (!na && a->sensitivity != b->sensitivity) return a->sensitivity > b->sensitivity ? -1 : 1;
  return a->layer < b->layer ? -1 : a->layer > b->layer;
}

/* Sensitivity of a layer: the mean over recipes of log2(its error / the recipe's median error over
 * layers). 0 is a typical layer; +1 means errors twice the typical ones under every recipe. */
static precis_status compute_sensitivity(precis_plan *p) {
  double *column = malloc((p->n_layers ? p->n_layers : 1) * sizeof *column);
  double *median = malloc((p->n_recipes ? p->n_recipes : 1) * sizeof *median);
  if (!column || !median) {
    free(column);
    free(median);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  for (size_t r = 0; r < p->n_recipes; r++) {
    size_t n = 0;
    for (size_t l = 0; l < p->n_layers; l++) {
      double e = p->cells[l * p->n_recipes + r].error;
      if (isfinite(e) && e > 0) column[n++] = e;
    }
    qsort(column, n, sizeof *column, compare_double);
    median[r] = n == 0 ? NAN : n % 2 ? column[n / 2] : 0.5 * (column[n / 2 - 1] + column[n / 2]);
  }
  for (size_t l = 0; l < p->n_layers; l++) {
    double sum = 0;
    size_t n = 0;
    for (size_t r = 0; r < p->n_recipes; r++) {
      double e = p->cells[l * p->n_recipes + r].error;
      if (isfinite(e) && e > 0 && isfinite(median[r]) && median[r] > 0) {
        sum += log2(e / median[r]);
        n++;
      }
    }
    p->sensitivity[l] = n ? sum / (double)n : NAN;
  }
  ranked *order = malloc((p->n_layers ? p->n_layers : 1) * sizeof *order);
  if (!order) {
    free(column);
    free(median);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  for (size_t l = 0; l < p->n_layers; l++) order[l] = (ranked){p->sensitivity[l], l};
  qsort(order, p->n_layers, sizeof *order, by_sensitivity);
  for (size_t l = 0; l < p->n_layers; l++) p->by_sensitivity[l] = order[l].layer;
  free(order);
  free(column);
  free(median);
  return PRECIS_OK;
}

/* docs/kv-cache.md gives each format's source; group scales are counted at the size precis stores
 * them (fp32, one byte for nv/mx), static per-tensor/per-head scales as free. */
static const precis_kv_format kv_formats[] = {
    {"fp32", NULL, 32, 0, 0, NULL, NULL},
    {"bf16", NULL, 16, 0, 0, NULL, NULL},
    {"fp16", NULL, 16, 0, 0, NULL, NULL},
    {"e4m3", "fp8", 8, 0, 0, NULL, "FP8"},
    {"e5m2", "fp8-e5m2", 8, 0, 0, NULL, NULL},
    {"e4m3@tensor", "fp8-tensor", 8, 0, 0, "tensor", "FP8"},
    {"e4m3@head", "fp8-head", 8, 0, 0, "attn_head", NULL},
    {"e5m2@tensor", NULL, 8, 0, 0, NULL, NULL},
    {"e5m2@head", NULL, 8, 0, 0, NULL, NULL},
    {"s8@row:sym", "int8", 8, -1, 32, NULL, NULL},
    {"e2m1@nv", "nvfp4", 4, 16, 8, NULL, "NVFP4"},
    {"e2m1@nv:static", "nvfp4-static", 4, 16, 8, NULL, "NVFP4"},
    {"e2m1@mx", "mxfp4", 4, 32, 8, NULL, NULL},
    {"s4@k32:sym", "int4", 4, 32, 32, NULL, NULL},
    {"s4@k32:sym+had", "int4-had", 4, 32, 32, NULL, NULL},
    {"s3@k32:sym", NULL, 3, 32, 32, NULL, NULL},
    {"s3@k32:sym+had", NULL, 3, 32, 32, NULL, NULL},
    {"s2@k32:sym", "int2", 2, 32, 32, NULL, NULL},
    {"s2@k32:sym+had", "int2-had", 2, 32, 32, NULL, NULL},
};

const precis_kv_format *precis_kv_format_find(const char *text) {
  if (!text) return NULL;
  for (size_t i = 0; i < sizeof kv_formats / sizeof kv_formats[0]; i++)
    if (strcmp(text, kv_formats[i].name) == 0 || (kv_formats[i].alias && strcmp(text, kv_formats[i].alias) == 0))
      return &kv_formats[i];
  const precis_format *f = precis_format_by_name(text);
  if (!f) return NULL;
  for (size_t i = 0; i < sizeof kv_formats / sizeof kv_formats[0]; i++)
    if (strcmp(f->name, kv_formats[i].name) == 0) return &kv_formats[i];
  return NULL;
}

double precis_kv_format_bits(const precis_kv_format *f, long long head_dim) {
  if (f->group == 0 || head_dim <= 0) return f->elem_bits;
  long long group = f->group < 0 ? head_dim : f->group;
  long long groups = (head_dim + group - 1) / group;
  return f->elem_bits + (double)(groups * f->scale_bits) / (double)head_dim;
}

static long long config_int(const cJSON *config, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);
  return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9 ? (long long)v->valuedouble : 0;
}

double precis_kv_cache_bytes(double bits_per_value, long long batch, long long context, long long kv_heads,
                             long long head_dim, long long layers) {
  return ceil(2.0 * (double)context * (double)batch * (double)kv_heads * (double)head_dim * (double)layers *
              bits_per_value / 8);
}

/* The attention shape of the model's config.json in brief (settings.model_config); false with why. */
static bool serving_shape(const precis_report *report, long long *layers, long long *kv_heads, long long *head_dim,
                          char *why, size_t why_len) {
  *layers = *kv_heads = *head_dim = 0;
  const char *text = precis_kv_get(&report->settings, "model_config");
  cJSON *config = text ? cJSON_Parse(text) : NULL;
  if (!config) {
    snprintf(why, why_len,
             "the report has no settings.model_config (import the model with precis import --model from a directory "
             "holding its config.json, then run)");
    return false;
  }
  long long heads = config_int(config, "num_attention_heads"), hidden = config_int(config, "hidden_size");
  *layers = config_int(config, "num_hidden_layers");
  *kv_heads = config_int(config, "num_key_value_heads");
  if (!*kv_heads) *kv_heads = heads;
  *head_dim = config_int(config, "head_dim");
  if (!*head_dim && heads && hidden % heads == 0) *head_dim = hidden / heads;
  cJSON_Delete(config);
  if (!*layers || !*kv_heads || !*head_dim) {
    snprintf(why, why_len,
             "settings.model_config lacks num_hidden_layers, num_key_value_heads (or num_attention_heads) or head_dim "
             "(or hidden_size / num_attention_heads)");
    return false;
  }
  return true;
}

/* --objective-map: identity, a=A,b=B, or a validated plan.json's validation.fit (plan.h). */
static precis_status parse_objective_map(precis_plan *p, const char *text) {
  precis_plan_kv_decision *kv = &p->kv;
  snprintf(kv->map_source, sizeof kv->map_source, "%s", text);
  if (strcmp(text, "identity") == 0) {
    kv->map_identity = true;
    return PRECIS_OK;
  }
  if (strncmp(text, "a=", 2) == 0) {
    char *end = NULL;
    kv->map_a = strtod(text + 2, &end);
    if (end == text + 2 || strncmp(end, ",b=", 3) != 0)
      return precis_fail(PRECIS_E_USAGE, "--objective-map %s: expected identity, a=A,b=B or a validated plan.json", text);
    const char *b_text = end + 3;
    kv->map_b = strtod(b_text, &end);
    if (end == b_text || *end || !isfinite(kv->map_a) || !isfinite(kv->map_b))
      return precis_fail(PRECIS_E_USAGE, "--objective-map %s: expected identity, a=A,b=B or a validated plan.json", text);
  } else {
    char *data = NULL;
    size_t size = 0;
    precis_status st = precis_read_file(text, &data, &size);
    if (st != PRECIS_OK)
      return precis_fail(PRECIS_E_USAGE, "--objective-map %s: not identity, a=A,b=B, nor a readable plan.json", text);
    cJSON *plan = cJSON_Parse(data);
    free(data);
    const cJSON *validation = cJSON_GetObjectItemCaseSensitive(plan, "validation");
    const cJSON *fit = cJSON_GetObjectItemCaseSensitive(validation, "fit");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(fit, "a"), *b = cJSON_GetObjectItemCaseSensitive(fit, "b");
    const cJSON *objective = cJSON_GetObjectItemCaseSensitive(validation, "objective");
    const cJSON *measure = cJSON_GetObjectItemCaseSensitive(validation, "measure");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || !cJSON_IsString(objective) || !cJSON_IsString(measure)) {
      cJSON_Delete(plan);
      return precis_fail(PRECIS_E_INPUT,
                         "--objective-map %s: no validation.fit {a, b} with validation.objective and .measure (make it with "
                         "python -m precis plan REPORT.json --validate ...; docs/verify.md)", text);
    }
    bool same_objective = strcmp(objective->valuestring, precis_plan_objective_str(p->objective)) == 0;
    bool kl = strcmp(measure->valuestring, "kl_mean") == 0;
    char their_objective[32], their_measure[32];
    snprintf(their_objective, sizeof their_objective, "%s", objective->valuestring);
    snprintf(their_measure, sizeof their_measure, "%s", measure->valuestring);
    kv->map_a = a->valuedouble;
    kv->map_b = b->valuedouble;
    cJSON_Delete(plan);
    if (!same_objective)
      return precis_fail(PRECIS_E_INPUT, "--objective-map %s: its fit maps the %s objective, this plan's is %s", text,
                         their_objective, precis_plan_objective_str(p->objective));
    if (!kl)
      return precis_fail(PRECIS_E_INPUT, "--objective-map %s: its fit maps to %s, the KV candidates' KL needs kl_mean", text,
                         their_measure);
  }
  /* A falling map would make the least objective the largest KL, and the weights' subproblem wrong. */
  if (!(kv->map_b > 0))
    return precis_fail(PRECIS_E_INPUT, "--objective-map %s: slope b = %g; a map from objective to KL must increase", text,
                       kv->map_b);
  return PRECIS_OK;
}

static double mapped_kl(const precis_plan_kv_decision *kv, double objective) {
  if (kv->map_identity) return objective;
  return objective > 0 ? pow(10.0, kv->map_a + kv->map_b * log10(objective)) : 0;
}

static precis_status add_kv_candidate(precis_plan_kv_decision *kv, const char *where, const char *k_name,
                                      const char *v_name, double kl, long long head_dim) {
  const precis_kv_format *k = precis_kv_format_find(k_name), *v = precis_kv_format_find(v_name);
  if (!k || !v)
    return precis_fail(PRECIS_E_INPUT, "--kv-candidates %s: \"%s\" is not a KV cache format (docs/kv-cache.md)", where,
                       k ? v_name : k_name);
  if (!isfinite(kl) || kl < 0)
    return precis_fail(PRECIS_E_INPUT, "--kv-candidates %s: KL of %s,%s is %g; a finite KL >= 0 expected", where, k_name,
                       v_name, kl);
  for (size_t i = 0; i < kv->n; i++)
    if (strcmp(kv->candidates[i].k, k->name) == 0 && strcmp(kv->candidates[i].v, v->name) == 0)
      return precis_fail(PRECIS_E_INPUT, "--kv-candidates %s: %s,%s given twice", where, k->name, v->name);
  precis_plan_kv_candidate *grown = realloc(kv->candidates, (kv->n + 1) * sizeof *grown);
  if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  kv->candidates = grown;
  precis_plan_kv_candidate *c = &kv->candidates[kv->n++];
  memset(c, 0, sizeof *c);
  snprintf(c->k, sizeof c->k, "%s", k->name);
  snprintf(c->v, sizeof c->v, "%s", v->name);
  c->kl = kl;
  c->bits = (precis_kv_format_bits(k, head_dim) + precis_kv_format_bits(v, head_dim)) / 2;
  if (k == v) {
    c->ct_strategy = k->ct_strategy;
    c->modelopt = k->modelopt;
  }
  return PRECIS_OK;
}

/* --kv-candidates: a kv-sweep.json (its cells' kl_mean) or "K[,V]=KL;..." */
static precis_status load_kv_candidates(precis_plan_kv_decision *kv, const char *text, long long head_dim) {
  precis_status st = PRECIS_OK;
  snprintf(kv->source, sizeof kv->source, "%s", text);
  size_t len = strlen(text);
  bool file = len > 5 && strcmp(text + len - 5, ".json") == 0;
  if (file) {
    char *data = NULL;
    size_t size = 0;
    if ((st = precis_read_file(text, &data, &size)) != PRECIS_OK) {
      precis_error_prefix("--kv-candidates");
      return st;
    }
    cJSON *sweep = cJSON_Parse(data);
    free(data);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(sweep, "kind");
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(sweep, "cells");
    if (!cJSON_IsArray(cells) || !cJSON_IsString(kind) || strcmp(kind->valuestring, "logits") != 0) {
      cJSON_Delete(sweep);
      return precis_fail(PRECIS_E_INPUT,
                         "--kv-candidates %s: expected verify --kv-sweep's kv-sweep.json of a model with logits "
                         "(\"kind\": \"logits\", \"cells\": [{\"k\", \"v\", \"kl_mean\"}])", text);
    }
    const cJSON *cell;
    size_t i = 0;
    cJSON_ArrayForEach(cell, cells) {
      const cJSON *k = cJSON_GetObjectItemCaseSensitive(cell, "k"), *v = cJSON_GetObjectItemCaseSensitive(cell, "v");
      const cJSON *kl = cJSON_GetObjectItemCaseSensitive(cell, "kl_mean");
      if (!cJSON_IsString(k) || !cJSON_IsString(v) || !cJSON_IsNumber(kl)) {
        cJSON_Delete(sweep);
        return precis_fail(PRECIS_E_INPUT, "--kv-candidates %s: cells[%zu] lacks k, v or a numeric kl_mean", text, i);
      }
      if ((st = add_kv_candidate(kv, text, k->valuestring, v->valuestring, kl->valuedouble, head_dim)) != PRECIS_OK) {
        cJSON_Delete(sweep);
        return st;
      }
      i++;
    }
    cJSON_Delete(sweep);
  } else {
    char *copy = precis_strdup(text);
    if (!copy) return precis_fail(PRECIS_E_NOMEM, "out of memory");
    for (char *save = NULL, *item = strtok_r(copy, ";", &save); item && st == PRECIS_OK; item = strtok_r(NULL, ";", &save)) {
      char *eq = strrchr(item, '='), *end = NULL;
      double kl = eq ? strtod(eq + 1, &end) : NAN;
      if (!eq || end == eq + 1 || *end) {
        st = precis_fail(PRECIS_E_USAGE, "--kv-candidates: \"%s\": expected K[,V]=KL (KL measured by verify --kv-sweep), "
                                         "items separated by ';', or a kv-sweep.json", item);
        break;
      }
      *eq = '\0';
      char *comma = strchr(item, ',');
      if (comma) *comma = '\0';
      st = add_kv_candidate(kv, text, item, comma ? comma + 1 : item, kl, head_dim);
    }
    free(copy);
    if (st != PRECIS_OK) return st;
  }
  if (kv->n == 0) return precis_fail(PRECIS_E_INPUT, "--kv-candidates %s: no candidates", text);
  return PRECIS_OK;
}

/* The serving estimate (plan.h): from the plan's layers and the model's config.json in brief. */
static precis_status estimate_serving(const precis_report *report, const precis_plan_options *options, precis_plan *p) {
  precis_plan_serving *s = &p->serving;
  s->requested = true;
  s->batch = options->serve_batch;
  s->context = options->serve_context;
  s->transient_layer = -1;
  const precis_plan_kv_candidate *decided = p->kv.requested && p->kv.chosen >= 0 ? &p->kv.candidates[p->kv.chosen] : NULL;
  const char *kv_name = decided ? decided->k : options->serve_kv ? options->serve_kv : "bf16";
  const precis_kv_format *kv = precis_kv_format_find(kv_name);
  if (!kv)
    return precis_fail(PRECIS_E_USAGE,
                       "--serve kv=%s: not a KV cache format (bf16, fp16, e4m3, e4m3@tensor, e4m3@head, e5m2, "
                       "s8@row:sym, e2m1@nv, e2m1@nv:static, e2m1@mx, s4@k32:sym, s3@k32:sym, s2@k32:sym, the integer "
                       "groups +had, or the aliases fp8, fp8-tensor, fp8-head, int8, nvfp4, nvfp4-static, mxfp4, int4, "
                       "int4-had, int2, int2-had; docs/kv-cache.md)", kv_name);
  const precis_kv_format *kv_v = decided ? precis_kv_format_find(decided->v) : kv;
  if (kv_v == kv) snprintf(s->kv_format, sizeof s->kv_format, "%s", kv->name);
  else snprintf(s->kv_format, sizeof s->kv_format, "%s,%s", kv->name, kv_v->name);
  s->kv_bits = kv->elem_bits;
  s->kv_ct_strategy = decided ? decided->ct_strategy : kv->ct_strategy;
  s->kv_modelopt = decided ? decided->modelopt : kv->modelopt;
  if (!p->feasible) {
    snprintf(s->why, sizeof s->why, "no plan to estimate");
    return PRECIS_OK;
  }
  if (!serving_shape(report, &s->layers, &s->kv_heads, &s->head_dim, s->why, sizeof s->why)) return PRECIS_OK;
  s->available = true;
  s->kv_bits = (precis_kv_format_bits(kv, s->head_dim) + precis_kv_format_bits(kv_v, s->head_dim)) / 2;
  s->weights = p->resident_total;
  s->kv_cache = precis_kv_cache_bytes(s->kv_bits, s->batch, s->context, s->kv_heads, s->head_dim, s->layers);
  long long tokens = s->batch * s->context;
  s->transient = 0;
  for (size_t l = 0; l < p->n_layers; l++) {
    const precis_row *row = precis_report_find_row(report, p->layers[l], p->recipes[p->chosen[l]]);
    precis_spec spec;
    if (!row || !row_spec(row, &spec)) continue;
    double t = transient_bytes(&spec, tokens, row->n, row->k, 1);
    if (t > s->transient) {
      s->transient = t;
      s->transient_layer = (int)l;
    }
  }
  s->workspace = (double)PRECIS_PLAN_LT_WORKSPACE_BYTES;
  s->total = s->weights + s->kv_cache + s->transient + s->workspace;
  return PRECIS_OK;
}

void precis_plan_free(precis_plan *p) {
  free(p->layers);
  free(p->recipes);
  free(p->weights);
  free(p->cells);
  free(p->cheapest);
  free(p->chosen);
  free(p->sensitivity);
  free(p->by_sensitivity);
  free(p->blocking);
  free(p->single_format);
  free(p->weight_factor);
  free(p->single_passes);
  free(p->group);
  free(p->kv.candidates);
  memset(p, 0, sizeof *p);
}

/* The model's config.json in brief (settings.model_config): model_type, and the output projection
 * tied to the input embeddings when import --model recorded one (tied_output_projection) or the
 * config says tie_word_embeddings. */
static void model_facts(const precis_report *report, char *model_type, size_t len, char *tied, size_t tied_len) {
  model_type[0] = tied[0] = '\0';
  const char *text = precis_kv_get(&report->settings, "model_config");
  cJSON *config = text ? cJSON_Parse(text) : NULL;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(config, "model_type");
  if (cJSON_IsString(type)) snprintf(model_type, len, "%s", type->valuestring);
  const cJSON *head = cJSON_GetObjectItemCaseSensitive(config, "tied_output_projection");
  if (cJSON_IsString(head)) snprintf(tied, tied_len, "%s", head->valuestring);
  else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(config, "tie_word_embeddings"))) snprintf(tied, tied_len, "lm_head");
  cJSON_Delete(config);
}

/* Drops a passing cell the deployment target cannot run on its layer (plan.h). */
static void check_deployable(const precis_plan *p, const precis_row *row, precis_plan_cell *cell) {
  precis_spec spec;
  if (p->deploy == PRECIS_DEPLOY_ENGINE_NONE || !row_spec(row, &spec)) return;
  precis_deploy_verdict v;
  precis_deploy_check(p->deploy, p->deploy_arch, &spec, row->k, row->n, &v);
  if (v.deployable) return;
  cell->dropped = true;
  snprintf(cell->dropped_why, sizeof cell->dropped_why, "%s", v.why);
  snprintf(cell->nearest, sizeof cell->nearest, "%s", v.nearest);
  if (cell->passes) {
    cell->passes = false;
    snprintf(cell->what, sizeof cell->what, "not deployable on %s: %.150s", precis_deploy_engine_name(p->deploy), v.why);
  }
}

/* The KV decision (plan.h, --kv-candidates): the cache's bytes do not depend on the weights plan,
 * so the (weights plan, KV format) pair of least total KL is found exactly by solving the weights
 * plan for each format with the budget less that format's cache (the least objective is the least
 * mapped KL, the map increasing) and keeping the format of least map(objective) + KL. */
static precis_status decide_kv(precis_plan *p, size_t n_units, const double *cost, const double *error,
                               const bool *allowed, const double *transient, size_t state_limit, int *choice) {
  precis_plan_kv_decision *kv = &p->kv;
  int *trial = malloc((n_units ? n_units : 1) * sizeof *trial);
  if (!trial) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  p->exact = true;
  p->states = 0;
  p->feasible = false;
  kv->chosen = -1;
  double best_memory = INFINITY;
  for (size_t i = 0; i < kv->n; i++) {
    precis_plan_kv_candidate *c = &kv->candidates[i];
    c->feasible = false;
    c->weights_objective = c->weights_kl = c->weights_memory = c->total_kl = NAN;
    double capacity = p->budget_value - c->bytes;
    if (capacity < 0 || !c->deployable) continue;
    double memory = 0, objective = 0;
    bool exact = true;
    size_t states = 0;
    bool ok = solve_memory(n_units, p->n_recipes, cost, error, allowed, transient, capacity, state_limit, trial, &memory,
                           &objective, &exact, &states);
    p->states += states;
    p->exact = p->exact && exact;
    if (!ok) continue;
    c->feasible = true;
    c->weights_objective = objective;
    c->weights_memory = memory;
    c->weights_kl = mapped_kl(kv, objective);
    c->total_kl = c->weights_kl + c->kl;
    const precis_plan_kv_candidate *best = kv->chosen >= 0 ? &kv->candidates[kv->chosen] : NULL;
    /* Ties (equal estimated KL): the smaller total memory, then the earlier candidate. */
    if (!best || c->total_kl < best->total_kl || (c->total_kl == best->total_kl && memory + c->bytes < best_memory)) {
      kv->chosen = (int)i;
      best_memory = memory + c->bytes;
      memcpy(choice, trial, n_units * sizeof *choice);
      p->total_cost = memory;
      p->total_error = objective;
    }
  }
  free(trial);
  if (kv->chosen >= 0) {
    p->feasible = true;
    p->capacity = p->budget_value - kv->candidates[kv->chosen].bytes;
  }
  return PRECIS_OK;
}

precis_status precis_plan_build(const precis_report *report, const precis_plan_options *options, precis_plan *out) {
  memset(out, 0, sizeof *out);
  precis_status st = PRECIS_OK;
  double *cost = NULL, *error = NULL, *transient = NULL;
  bool *allowed = NULL;
  int *unit_of = NULL, *unit_choice = NULL;
  long long *k_of = NULL;
  size_t n_units = 0;
  precis_plan *p = out;
  p->budget = options->budget;
  p->budget_value = options->budget_value;
  p->cost_kind = options->budget != PRECIS_PLAN_NO_BUDGET ? options->budget
                 : options->cost_kind != PRECIS_PLAN_NO_BUDGET ? options->cost_kind
                                                               : PRECIS_PLAN_MEMORY;
  p->capacity = NAN;
  p->target = -1;
  p->peak_layer = -1;
  p->tied_head = -1;
  p->resident_total = p->peak_transient = NAN;
  p->exact = true;
  p->deploy = options->deploy;
  p->deploy_arch = options->deploy_arch != PRECIS_TARGET_DEFAULT ? options->deploy_arch : PRECIS_DEPLOY_ARCH_DEFAULT;
  if (p->cost_kind == PRECIS_PLAN_LATENCY && precis_report_is_cpu_emulation(report)) {
    if (!options->allow_emulated_latency) {
      st = precis_fail(PRECIS_E_USAGE,
                       "a latency %s on a %s report: its timings are CPU timings of an emulation of each format "
                       "(the emulation's cost, e.g. fp32 fastest), not the formats' speed on a GPU; plan by memory or "
                       "bits, measure with --backend cuda, or give --allow-emulated-latency to plan by the emulation's "
                       "timings anyway (the plan then says so)",
                       p->budget == PRECIS_PLAN_LATENCY ? "budget" : "cost", precis_report_backend(report));
      goto done;
    }
    p->latency_emulated = true;
  }
  p->objective = options->objective;
  p->moe_active = options->moe_active > 0 && options->moe_active < 1 ? options->moe_active : 1;
  if (p->objective == PRECIS_PLAN_OBJECTIVE_AUTO) {
    p->objective = PRECIS_PLAN_OBJECTIVE_REL_FRO;
    for (size_t i = 0; i < report->n_rows; i++)
      if (report->rows[i].loss.present) p->objective = PRECIS_PLAN_OBJECTIVE_FISHER;
  }
  if (options->kv_candidates || options->objective_map) {
    const char *missing = !options->kv_candidates  ? "--objective-map needs --kv-candidates"
                          : !options->objective_map ? "--kv-candidates needs --objective-map (identity, a=A,b=B, or the "
                                                      "plan.json of python -m precis plan --validate: the map from the "
                                                      "weights' objective to KL, which the KV candidates are measured in)"
                          : options->serve_batch <= 0 ? "--kv-candidates needs --serve batch=B,context=T (the cache's size)"
                          : options->serve_kv         ? "--kv-candidates decides the KV format: give it or --serve kv=, not both"
                          : options->budget != PRECIS_PLAN_MEMORY ? "--kv-candidates needs --budget memory=BYTES (weights + KV cache)"
                                                                  : NULL;
    if (missing) {
      st = precis_fail(PRECIS_E_USAGE, "%s (docs/kv-cache.md)", missing);
      goto done;
    }
    long long layers = 0, kv_heads = 0, head_dim = 0;
    char why[240];
    if (!serving_shape(report, &layers, &kv_heads, &head_dim, why, sizeof why)) {
      st = precis_fail(PRECIS_E_INPUT, "--kv-candidates: the KV cache's size is unknown: %s", why);
      goto done;
    }
    p->kv.requested = true;
    p->kv.chosen = -1;
    if ((st = parse_objective_map(p, options->objective_map)) != PRECIS_OK) goto done;
    if ((st = load_kv_candidates(&p->kv, options->kv_candidates, head_dim)) != PRECIS_OK) goto done;
    for (size_t i = 0; i < p->kv.n; i++) {
      precis_plan_kv_candidate *c = &p->kv.candidates[i];
      c->bytes = precis_kv_cache_bytes(c->bits, options->serve_batch, options->serve_context, kv_heads, head_dim, layers);
      c->deployable = precis_deploy_kv_ok(p->deploy, p->deploy_arch, c->k, c->v, c->why, sizeof c->why);
    }
  }
  p->layers = precis_report_workloads(report, &p->n_layers);
  p->recipes = precis_report_recipe_names(report, &p->n_recipes);
  if (!p->layers || !p->recipes) goto nomem;
  if (p->n_layers == 0 || p->n_recipes == 0) {
    st = precis_fail(PRECIS_E_INPUT, "the report has no rows to plan from");
    goto done;
  }
  char model_type[64], tied_name[128];
  model_facts(report, model_type, sizeof model_type, tied_name, sizeof tied_name);
  for (size_t l = 0; tied_name[0] && l < p->n_layers; l++)
    if (strcmp(p->layers[l], tied_name) == 0) p->tied_head = (int)l;
  /* The tied head's rule (DESIGN §21): a deployed checkpoint keeps the embedding table for the
   * lookup and stores a quantized head as its own copy; kept unquantized it is the table itself. */
  p->tied_charged_copy = p->tied_head >= 0 && precis_deploy_unties_head(p->deploy) && p->cost_kind != PRECIS_PLAN_LATENCY;
  size_t n_cells = p->n_layers * p->n_recipes;
  p->cells = calloc(n_cells, sizeof *p->cells);
  p->weights = malloc(p->n_layers * sizeof *p->weights);
  p->cheapest = malloc(p->n_layers * sizeof *p->cheapest);
  p->chosen = malloc(p->n_layers * sizeof *p->chosen);
  p->sensitivity = malloc(p->n_layers * sizeof *p->sensitivity);
  p->by_sensitivity = malloc(p->n_layers * sizeof *p->by_sensitivity);
  p->blocking = malloc(p->n_layers * sizeof *p->blocking);
  p->single_format = malloc(p->n_recipes * sizeof *p->single_format);
  p->weight_factor = malloc(p->n_layers * sizeof *p->weight_factor);
  p->single_passes = malloc(p->n_recipes * sizeof *p->single_passes);
  p->group = malloc(p->n_layers * sizeof *p->group);
  unit_of = malloc(p->n_layers * sizeof *unit_of);
  unit_choice = malloc(p->n_layers * sizeof *unit_choice);
  k_of = malloc(p->n_layers * sizeof *k_of);
  cost = malloc(n_cells * sizeof *cost);
  error = malloc(n_cells * sizeof *error);
  transient = malloc(n_cells * sizeof *transient);
  allowed = malloc(n_cells * sizeof *allowed);
  if (!p->cells || !p->weights || !p->cheapest || !p->chosen || !p->sensitivity || !p->by_sensitivity || !p->blocking ||
      !p->single_format || !p->single_passes || !p->weight_factor || !p->group || !unit_of || !unit_choice || !k_of ||
      !cost || !error || !transient || !allowed)
    goto nomem;
  bool use_require = options->require && options->require->count > 0;
  if (use_require) {
    size_t len = (size_t)snprintf(p->criteria_source, sizeof p->criteria_source, "--require");
    for (size_t i = 0; i < options->require->count && len < sizeof p->criteria_source; i++) {
      char buf[96];
      precis_criterion_format(&options->require->items[i], buf, sizeof buf);
      len += (size_t)snprintf(p->criteria_source + len, sizeof p->criteria_source - len, " %s", buf);
    }
  } else {
    snprintf(p->criteria_source, sizeof p->criteria_source, "each row's recorded verdict");
  }
  for (size_t l = 0; l < p->n_layers; l++) {
    bool expert = strstr(p->layers[l], ".experts.") != NULL;
    p->weight_factor[l] =
        p->cost_kind == PRECIS_PLAN_BITS && expert && options->moe_active > 0 && options->moe_active < 1 ? options->moe_active : 1;
    p->weights[l] = -1;
    k_of[l] = -1;
    for (size_t r = 0; r < p->n_recipes; r++) {
      precis_plan_cell *cell = &p->cells[l * p->n_recipes + r];
      cell->error = cell->rel_fro = NAN;
      cell->cost = NAN;
      const precis_row *row = precis_report_find_row(report, p->layers[l], p->recipes[r]);
      if (!row) {
        snprintf(cell->what, sizeof cell->what, "not evaluated");
        continue;
      }
      cell->present = true;
      if (row->k > 0 && row->n > 0) {
        p->weights[l] = row->k * row->n;
        k_of[l] = row->k;
      }
      cell->rel_fro = NAN;
      if (row->status == PRECIS_ROW_OK && row->error[PRECIS_METRIC_REL_FRO].present)
        cell->rel_fro = row->error[PRECIS_METRIC_REL_FRO].worst;
      if (row->status == PRECIS_ROW_OK)
        cell->error = p->objective == PRECIS_PLAN_OBJECTIVE_REL_FRO ? cell->rel_fro
                      : !row->loss.present                          ? NAN
                      : p->objective == PRECIS_PLAN_OBJECTIVE_FISHER ? row->loss.fisher_mean
                                                                     : fabs(row->loss.taylor_mean);
      if (row->status == PRECIS_ROW_OK) cell_costs(row, p->cost_kind, cell);
      precis_spec spec;
      if (p->tied_charged_copy && (int)l == p->tied_head && row_spec(row, &spec) && !precis_operand_is_scaled(&spec.b)) {
        /* Unquantized, the tied head is the embedding table the model keeps anyway. */
        cell->resident = 0;
        if (!isnan(cell->cost)) cell->cost = 0;
      }
      cell->cost *= p->weight_factor[l]; /* exact for the power-of-two fractions of real MoEs (top_k/num_experts) */
      judge(row, options->require, cell);
      if (cell->passes && p->cost_kind == PRECIS_PLAN_MEMORY && isnan(cell->transient)) cell->cost = NAN;
      if (cell->passes && isnan(cell->cost)) {
        cell->passes = false;
        snprintf(cell->what, sizeof cell->what, "no %s cost recorded", precis_plan_budget_str(p->cost_kind));
      }
      if (cell->passes && isnan(cell->error)) {
        cell->passes = false;
        snprintf(cell->what, sizeof cell->what, "%s",
                 p->objective == PRECIS_PLAN_OBJECTIVE_REL_FRO
                     ? "no rel_fro recorded"
                     : "no loss_change recorded (import the model with --gradients, or plan --objective rel_fro)");
      }
      if (row->status == PRECIS_ROW_OK) check_deployable(p, row, cell);
      p->n_dropped += cell->dropped;
    }
  }
  /* One decision per fused group (DESIGN §21): the solver sees a unit per group (and per layer on
   * its own), its cost and error the members' sums, allowed only where every member passes. */
  if ((st = precis_deploy_fused_groups(p->deploy, model_type[0] ? model_type : NULL, p->layers, k_of, p->n_layers, p->group,
                                       &p->n_groups, p->fusion_rule, sizeof p->fusion_rule)) != PRECIS_OK)
    goto done;
  {
    int *first_of_group = calloc(p->n_groups ? p->n_groups : 1, sizeof *first_of_group);
    if (!first_of_group) goto nomem;
    for (size_t g = 0; g < p->n_groups; g++) first_of_group[g] = -1;
    for (size_t l = 0; l < p->n_layers; l++) {
      int g = p->group[l];
      if (g >= 0 && first_of_group[g] >= 0) unit_of[l] = first_of_group[g];
      else {
        unit_of[l] = (int)n_units++;
        if (g >= 0) first_of_group[g] = unit_of[l];
      }
    }
    free(first_of_group);
  }
  for (size_t i = 0; i < n_units * p->n_recipes; i++) {
    cost[i] = error[i] = transient[i] = 0;
    allowed[i] = true;
  }
  for (size_t l = 0; l < p->n_layers; l++)
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      size_t u = (size_t)unit_of[l] * p->n_recipes + r;
      allowed[u] = allowed[u] && c->passes;
      cost[u] += c->cost;
      error[u] += c->error;
      transient[u] = fmax(transient[u], c->transient);
    }
  /* Per unit: the cheapest passing recipe (ties: lower error, then the report's recipe order). */
  p->cheapest_total_cost = 0;
  double cheapest_peak = 0;
  for (size_t u = 0; u < n_units; u++) {
    int best = -1;
    for (size_t r = 0; r < p->n_recipes; r++) {
      size_t i = u * p->n_recipes + r;
      if (!allowed[i]) continue;
      size_t b = best >= 0 ? u * p->n_recipes + (size_t)best : 0;
      if (best < 0 || cost[i] < cost[b] || (cost[i] == cost[b] && error[i] < error[b])) best = (int)r;
    }
    unit_choice[u] = best;
    if (best >= 0) {
      p->cheapest_total_cost += cost[u * p->n_recipes + (size_t)best];
      cheapest_peak = fmax(cheapest_peak, transient[u * p->n_recipes + (size_t)best]);
    }
  }
  for (size_t l = 0; l < p->n_layers; l++) {
    p->cheapest[l] = unit_choice[unit_of[l]];
    p->chosen[l] = -1;
    if (p->cheapest[l] < 0) p->blocking[p->n_blocking++] = l;
  }
  if (p->cost_kind == PRECIS_PLAN_MEMORY) p->cheapest_total_cost += cheapest_peak;
  if ((st = compute_sensitivity(p)) != PRECIS_OK) goto done;
  /* The single-format alternatives: every layer on one recipe, summed in layer order. */
  for (size_t r = 0; r < p->n_recipes; r++) {
    p->single_format[r] = 0;
    p->single_passes[r] = true;
    for (size_t l = 0; l < p->n_layers; l++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      p->single_format[r] += c->error;
      p->single_passes[r] = p->single_passes[r] && c->passes;
    }
  }
  if (p->n_blocking > 0) {
    snprintf(p->infeasible_why, sizeof p->infeasible_why, "no recipe %s on %zu layer%s",
             p->n_groups ? "meets the criteria (on every member of its fused group) and deploys" : "meets the criteria",
             p->n_blocking, p->n_blocking == 1 ? "" : "s");
    snprintf(p->method, sizeof p->method, "none: a layer has no passing recipe");
    p->cheapest_total_cost = NAN;
  } else if (p->budget == PRECIS_PLAN_NO_BUDGET) {
    memcpy(p->chosen, p->cheapest, p->n_layers * sizeof *p->chosen);
    p->feasible = true;
    snprintf(p->method, sizeof p->method, "per layer%s, the cheapest passing recipe (%s)",
             p->n_groups ? " (per fused group)" : "", precis_plan_budget_str(p->cost_kind));
  } else {
    if (p->budget == PRECIS_PLAN_BITS) {
      double total_weights = 0;
      for (size_t l = 0; l < p->n_layers; l++)
        if (!(p->tied_charged_copy && (int)l == p->tied_head)) total_weights += (double)p->weights[l] * p->weight_factor[l];
      p->capacity = p->budget_value * total_weights;
    } else {
      p->capacity = p->budget_value;
    }
    if (p->kv.requested) {
      if ((st = decide_kv(p, n_units, cost, error, allowed, transient, options->state_limit, unit_choice)) != PRECIS_OK)
        goto done;
    } else if (p->budget == PRECIS_PLAN_MEMORY)
      p->feasible = solve_memory(n_units, p->n_recipes, cost, error, allowed, transient, p->capacity, options->state_limit,
                                 unit_choice, &p->total_cost, &p->total_error, &p->exact, &p->states);
    else
      p->feasible = precis_plan_solve(n_units, p->n_recipes, cost, error, allowed, p->capacity, options->state_limit,
                                      unit_choice, &p->total_cost, &p->total_error, &p->exact, &p->states);
    if (p->exact && p->kv.requested)
      snprintf(p->method, sizeof p->method,
               "exact: for each of %zu KV formats, dynamic programming over %s on the Pareto frontier of (cost, error) "
               "within the budget less the cache, %zu states", p->kv.n, p->n_groups ? "fused groups and layers" : "layers",
               p->states);
    else if (p->exact)
      snprintf(p->method, sizeof p->method,
               "exact: dynamic programming over %s on the Pareto frontier of (cost, error), %zu states",
               p->n_groups ? "fused groups and layers" : "layers", p->states);
    else
      snprintf(p->method, sizeof p->method,
               "HEURISTIC: a frontier exceeded %zu states and was thinned; the plan fits but may not be optimal",
               options->state_limit ? options->state_limit : (size_t)1 << 20);
    if (!p->feasible) {
      char cheapest[40], cap[40];
      precis_fmt_sig(cheapest, sizeof cheapest, p->cheapest_total_cost, 6);
      precis_fmt_sig(cap, sizeof cap, p->capacity, 6);
      if (p->kv.requested)
        snprintf(p->infeasible_why, sizeof p->infeasible_why,
                 "with every KV candidate the deployment target stores, the budget's %s bytes less the KV cache at "
                 "batch x context leaves no room for the weights (every layer on its smallest passing recipe: %s bytes)",
                 cap, cheapest);
      else if (p->cost_kind == PRECIS_PLAN_MEMORY)
        snprintf(p->infeasible_why, sizeof p->infeasible_why,
                 "every assignment of passing recipes is over the budget's %s bytes (resident weights + the largest "
                 "transient; every layer on its smallest passing recipe: %s)", cap, cheapest);
      else
        snprintf(p->infeasible_why, sizeof p->infeasible_why,
                 "the cheapest passing recipe of every layer costs %s in total (%s), over the budget's %s", cheapest,
                 precis_plan_budget_str(p->cost_kind), cap);
    } else {
      for (size_t l = 0; l < p->n_layers; l++) p->chosen[l] = unit_choice[unit_of[l]];
    }
  }
  if (p->feasible) {
    p->total_cost = 0;
    p->total_error = 0;
    p->resident_total = 0;
    p->peak_transient = 0;
    for (size_t l = 0; l < p->n_layers; l++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + (size_t)p->chosen[l]];
      p->total_cost += c->cost;
      p->total_error += c->error;
      p->resident_total += c->resident;
      if (c->transient > p->peak_transient || p->peak_layer < 0) {
        p->peak_transient = c->transient;
        p->peak_layer = (int)l;
      }
    }
    if (p->cost_kind == PRECIS_PLAN_MEMORY) p->total_cost += p->peak_transient;
  }
  /* The exclusion lists' target: the recipe asked for, else the one of lowest total cost among
   * those that pass on some layer (what a one-scheme quantizer would apply everywhere). */
  double target_cost = INFINITY;
  for (size_t r = 0; r < p->n_recipes; r++) {
    if (options->target) {
      if (strcmp(options->target, p->recipes[r]) == 0) p->target = (int)r;
      continue;
    }
    double sum = 0;
    bool any_pass = false;
    for (size_t l = 0; l < p->n_layers; l++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      sum += isnan(c->cost) ? INFINITY : c->cost;
      any_pass |= c->passes;
    }
    if (any_pass && sum < target_cost) {
      target_cost = sum;
      p->target = (int)r;
    }
  }
  if (options->serve_batch > 0 && (st = estimate_serving(report, options, p)) != PRECIS_OK) goto done;
  if (options->target && p->target < 0) {
    st = precis_fail(PRECIS_E_USAGE, "--exclusions-for %s: the report has no rows for this recipe", options->target);
    goto done;
  }
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "out of memory");
done:
  free(cost);
  free(error);
  free(transient);
  free(allowed);
  free(unit_of);
  free(unit_choice);
  free(k_of);
  if (st != PRECIS_OK) precis_plan_free(p);
  return st;
}
