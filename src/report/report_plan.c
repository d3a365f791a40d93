/* The plan's printers (DESIGN §12): plan.json (everything, for tools), plan.md (the decision and
 * the sensitivity ranking), plan.html (a layers x recipes heatmap of error, one table row per
 * layer so that 200+ layers stay readable; no script, no network) and the exclusion lists that
 * ModelOpt (quant_cfg entries and hf_quant_config's exclude_modules) and llm-compressor (a recipe's
 * `ignore:` list) read. Every name from the report goes through the escaper of its format. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "numerics/recipe.h"
#include "report/deploy.h"
#include "report/plan.h"
#include "report_util.h"


/* What the objective's number is (issue 41): its units, and that it ranks plans rather than
 * estimating a model-level figure such as KL; `plan --validate` fits the map to measured KL. */
static const char *objective_units(precis_plan_objective o) {
  switch (o) {
  case PRECIS_PLAN_OBJECTIVE_FISHER:
    return "nats of the captured loss (second-order, each layer's change alone, summed over layers); it ranks plans "
           "and is not a KL estimate: plan --validate fits the map from it to measured KL";
  case PRECIS_PLAN_OBJECTIVE_TAYLOR:
    return "nats of the captured loss (first order, summed over layers); it ranks plans and is not a measured loss "
           "change: plan --validate fits the map from it to the measured change";
  default:
    return "dimensionless (relative Frobenius errors of the layers' outputs, summed); it ranks plans and predicts no "
           "model-level figure";
  }
}

static const char *cost_unit(precis_plan_budget kind) {
  switch (kind) {
  case PRECIS_PLAN_NO_BUDGET:
  case PRECIS_PLAN_MEMORY: return "bytes: resident weights + scales, plus the largest transient of one layer";
  case PRECIS_PLAN_BITS: return "effective weight bits (elements + scales + zero points)";
  case PRECIS_PLAN_LATENCY: return "ms (median per call)";
  }
  return "";
}

/* Shown wherever a plan by emulated latency is (--allow-emulated-latency). */
static const char emulated_latency_note[] =
    "latency from cpu-emulation timings: CPU timings of an emulation of each format, not GPU figures";

static void fmt_cost(char *buf, size_t len, precis_plan_budget kind, double v) {
  if (isnan(v)) snprintf(buf, len, "-");
  else if (kind == PRECIS_PLAN_MEMORY || kind == PRECIS_PLAN_NO_BUDGET) precis_fmt_bytes(buf, len, (long long)v);
  else if (kind == PRECIS_PLAN_BITS) snprintf(buf, len, "%.0f bits", v);
  else snprintf(buf, len, "%.4g ms", v);
}

/* A layer needs high precision when the plan gives it something other than the target recipe. */
static bool keeps_high_precision(const precis_plan *p, size_t l) {
  return p->feasible && p->target >= 0 && p->chosen[l] != p->target;
}

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* The deployment target the plan obeyed (plan.h): the engine, the architecture, the fused groups,
 * the tied head's charge, and every (layer, recipe) dropped as not deployable with why and the
 * nearest spec that deploys. */
static void deploy_target_json(cJSON *root, const precis_plan *p) {
  cJSON *d = cJSON_AddObjectToObject(root, "deploy_target");
  cJSON_AddStringToObject(d, "engine", precis_deploy_engine_name(p->deploy));
  cJSON_AddStringToObject(d, "description", precis_deploy_engine_describe(p->deploy));
  cJSON_AddStringToObject(d, "architecture", precis_target_name(p->deploy_arch));
  cJSON_AddStringToObject(d, "fusion_rule", p->fusion_rule);
  cJSON *groups = cJSON_AddArrayToObject(d, "fused_groups");
  for (size_t g = 0; g < p->n_groups; g++) {
    cJSON *members = cJSON_CreateArray();
    for (size_t l = 0; l < p->n_layers; l++)
      if (p->group[l] == (int)g) cJSON_AddItemToArray(members, cJSON_CreateString(p->layers[l]));
    cJSON_AddItemToArray(groups, members);
  }
  if (p->tied_head >= 0) {
    cJSON *tied = cJSON_AddObjectToObject(d, "tied_head");
    cJSON_AddStringToObject(tied, "layer", p->layers[p->tied_head]);
    cJSON_AddBoolToObject(tied, "charged_quantized_copy", p->tied_charged_copy);
    cJSON_AddStringToObject(tied, "rule", p->tied_charged_copy
                                              ? "tied to the input embeddings: unquantized it is the embedding table (cost 0, "
                                                "and its weights are not in a bits budget's average); quantized, the checkpoint "
                                                "stores its copy beside the table, which stays for the lookup, and its "
                                                "config.json must then say tie_word_embeddings: false"
                                              : "tied to the input embeddings, counted as its own matrix (--deploy none or a latency cost)");
  } else {
    cJSON_AddNullToObject(d, "tied_head");
  }
  cJSON *dropped = cJSON_AddArrayToObject(d, "dropped");
  for (size_t l = 0; l < p->n_layers; l++)
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      if (!c->dropped) continue;
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "layer", p->layers[l]);
      cJSON_AddStringToObject(e, "recipe", p->recipes[r]);
      cJSON_AddStringToObject(e, "why", c->dropped_why);
      if (c->nearest[0]) cJSON_AddStringToObject(e, "nearest_deployable", c->nearest);
      else cJSON_AddNullToObject(e, "nearest_deployable");
      cJSON_AddItemToArray(dropped, e);
    }
}

/* --kv-candidates: the KV format the plan chose, every candidate with the weights plan the budget
 * leaves it, and the map that put the weights' objective on KL's scale (docs/kv-cache.md). */
static void kv_decision_json(cJSON *root, const precis_plan *p) {
  const precis_plan_kv_decision *kv = &p->kv;
  cJSON *d = cJSON_AddObjectToObject(root, "kv_decision");
  cJSON_AddStringToObject(d, "rule",
                          "minimize map(weights objective) + KL(KV cache) over the KV candidates, each with the weights "
                          "plan of least objective within the budget less its cache; the two KLs are added, assuming the "
                          "weights' and the cache's errors independent (their KLs add to second order)");
  cJSON_AddStringToObject(d, "candidates_source", kv->source);
  cJSON *map = cJSON_AddObjectToObject(d, "objective_map");
  cJSON_AddStringToObject(map, "source", kv->map_source);
  if (kv->map_identity) {
    cJSON_AddStringToObject(map, "form", "KL = objective (asserted by --objective-map identity)");
  } else {
    cJSON_AddStringToObject(map, "form", "log10(KL) = a + b log10(objective)");
    cJSON_AddNumberToObject(map, "a", kv->map_a);
    cJSON_AddNumberToObject(map, "b", kv->map_b);
  }
  if (kv->chosen >= 0) {
    const precis_plan_kv_candidate *c = &kv->candidates[kv->chosen];
    cJSON *chosen = cJSON_AddObjectToObject(d, "chosen");
    cJSON_AddStringToObject(chosen, "k", c->k);
    cJSON_AddStringToObject(chosen, "v", c->v);
    cJSON_AddItemToObject(chosen, "kv_cache_bytes", num(c->bytes));
    cJSON_AddItemToObject(chosen, "kv_kl", num(c->kl));
    cJSON_AddItemToObject(chosen, "weights_kl", num(c->weights_kl));
    cJSON_AddItemToObject(chosen, "total_kl", num(c->total_kl));
  } else {
    cJSON_AddNullToObject(d, "chosen");
  }
  cJSON *all = cJSON_AddArrayToObject(d, "candidates");
  for (size_t i = 0; i < kv->n; i++) {
    const precis_plan_kv_candidate *c = &kv->candidates[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "k", c->k);
    cJSON_AddStringToObject(e, "v", c->v);
    cJSON_AddItemToObject(e, "bits_per_value", num(c->bits));
    cJSON_AddItemToObject(e, "kv_cache_bytes", num(c->bytes));
    cJSON_AddItemToObject(e, "kv_kl", num(c->kl));
    cJSON_AddBoolToObject(e, "deployable", c->deployable);
    if (!c->deployable) cJSON_AddStringToObject(e, "why", c->why);
    cJSON_AddBoolToObject(e, "feasible", c->feasible);
    cJSON_AddItemToObject(e, "weights_memory_bytes", num(c->weights_memory));
    cJSON_AddItemToObject(e, "weights_objective", num(c->weights_objective));
    cJSON_AddItemToObject(e, "weights_kl", num(c->weights_kl));
    cJSON_AddItemToObject(e, "total_kl", num(c->total_kl));
    cJSON_AddBoolToObject(e, "chosen", (int)i == kv->chosen);
    cJSON_AddItemToArray(all, e);
  }
}

static char *plan_json(const precis_plan *p, const precis_report *report, const char *report_path) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", "precis-plan");
  cJSON_AddNumberToObject(root, "format_version", 1);
  cJSON_AddStringToObject(root, "report", report_path);
  cJSON_AddStringToObject(root, "dataset_id", report->dataset_id ? report->dataset_id : "");
  cJSON_AddStringToObject(root, "criteria", p->criteria_source);
  cJSON_AddStringToObject(root, "error_metric", precis_plan_objective_definition(p->objective));
  cJSON_AddStringToObject(root, "cost", precis_plan_budget_str(p->cost_kind));
  cJSON_AddStringToObject(root, "cost_unit", cost_unit(p->cost_kind));
  if (p->latency_emulated) cJSON_AddStringToObject(root, "cost_basis", emulated_latency_note);
  else cJSON_AddNullToObject(root, "cost_basis");
  cJSON *budget = p->budget == PRECIS_PLAN_NO_BUDGET ? cJSON_CreateNull() : cJSON_CreateObject();
  if (p->budget != PRECIS_PLAN_NO_BUDGET) {
    cJSON_AddStringToObject(budget, "kind", precis_plan_budget_str(p->budget));
    cJSON_AddItemToObject(budget, "value", num(p->budget_value));
    cJSON_AddItemToObject(budget, "capacity", num(p->capacity));
    if (p->budget == PRECIS_PLAN_BITS) cJSON_AddItemToObject(budget, "moe_active", num(p->moe_active));
  }
  cJSON_AddItemToObject(root, "budget", budget);
  char *rule = p->budget == PRECIS_PLAN_NO_BUDGET
                   ? precis_strdup("per layer, the cheapest recipe meeting the criteria")
                   : precis_asprintf("minimize the sum over layers of %s subject to the budget, every layer on a "
                                     "recipe meeting the criteria; ties: lower total cost",
                                     precis_plan_objective_str(p->objective));
  cJSON *objective = cJSON_AddObjectToObject(root, "objective");
  cJSON_AddStringToObject(objective, "kind", precis_plan_objective_str(p->objective));
  cJSON_AddStringToObject(objective, "definition", precis_plan_objective_definition(p->objective));
  cJSON_AddStringToObject(objective, "rule", rule ? rule : "");
  cJSON_AddStringToObject(objective, "units", objective_units(p->objective));
  cJSON_AddBoolToObject(objective, "ranks_plans", true);
  free(rule);
  bool predicts_loss = p->objective != PRECIS_PLAN_OBJECTIVE_REL_FRO;
  /* The plan's predicted loss change: the sum of its cells' (the layers' changes add to first and
   * second order when their errors are independent). */
  cJSON_AddItemToObject(objective, predicts_loss ? "predicted_loss_change" : "total",
                        p->feasible ? num(p->total_error) : cJSON_CreateNull());
  cJSON *single = cJSON_AddArrayToObject(objective, "single_format");
  for (size_t r = 0; r < p->n_recipes; r++) {
    cJSON *alt = cJSON_CreateObject();
    cJSON_AddStringToObject(alt, "recipe", p->recipes[r]);
    cJSON_AddItemToObject(alt, predicts_loss ? "predicted_loss_change" : "total", num(p->single_format[r]));
    cJSON_AddBoolToObject(alt, "passes_every_layer", p->single_passes[r]);
    cJSON_AddItemToArray(single, alt);
  }
  cJSON_AddStringToObject(root, "method", p->method);
  cJSON_AddBoolToObject(root, "exact", p->exact);
  cJSON_AddBoolToObject(root, "feasible", p->feasible);
  if (!p->feasible) cJSON_AddStringToObject(root, "why", p->infeasible_why);
  cJSON_AddItemToObject(root, "total_cost", p->feasible ? num(p->total_cost) : cJSON_CreateNull());
  cJSON_AddItemToObject(root, "total_error", p->feasible ? num(p->total_error) : cJSON_CreateNull());
  cJSON_AddItemToObject(root, "cheapest_total_cost", num(p->cheapest_total_cost));
  cJSON *memory = cJSON_AddObjectToObject(root, "memory");
  cJSON_AddItemToObject(memory, "resident_weights_bytes", p->feasible ? num(p->resident_total) : cJSON_CreateNull());
  cJSON_AddItemToObject(memory, "peak_transient_bytes", p->feasible ? num(p->peak_transient) : cJSON_CreateNull());
  cJSON_AddItemToObject(memory, "peak_transient_layer",
                        p->feasible && p->peak_layer >= 0 ? cJSON_CreateString(p->layers[p->peak_layer]) : cJSON_CreateNull());
  cJSON_AddItemToObject(memory, "total_bytes",
                        p->feasible ? num(p->resident_total + p->peak_transient) : cJSON_CreateNull());
  if (p->serving.requested) {
    const precis_plan_serving *s = &p->serving;
    cJSON *serve = cJSON_AddObjectToObject(root, "serving_estimate");
    cJSON_AddStringToObject(serve, "note", "an estimate until precis accept measures it on a GPU");
    cJSON_AddNumberToObject(serve, "batch", (double)s->batch);
    cJSON_AddNumberToObject(serve, "context", (double)s->context);
    cJSON_AddStringToObject(serve, "kv_format", s->kv_format);
    if (s->available) cJSON_AddNumberToObject(serve, "kv_bits_per_value", s->kv_bits);
    cJSON_AddBoolToObject(serve, "available", s->available);
    if (!s->available) cJSON_AddStringToObject(serve, "why", s->why);
    else {
      cJSON_AddNumberToObject(serve, "num_hidden_layers", (double)s->layers);
      cJSON_AddNumberToObject(serve, "num_key_value_heads", (double)s->kv_heads);
      cJSON_AddNumberToObject(serve, "head_dim", (double)s->head_dim);
      cJSON_AddItemToObject(serve, "weights_bytes", num(s->weights));
      cJSON_AddItemToObject(serve, "kv_cache_bytes", num(s->kv_cache));
      cJSON_AddItemToObject(serve, "peak_transient_bytes", num(s->transient));
      cJSON_AddItemToObject(serve, "peak_transient_layer",
                            s->transient_layer >= 0 ? cJSON_CreateString(p->layers[s->transient_layer]) : cJSON_CreateNull());
      cJSON_AddItemToObject(serve, "workspace_bytes", num(s->workspace));
      cJSON_AddItemToObject(serve, "total_bytes", num(s->total));
    }
  }
  if (p->kv.requested) kv_decision_json(root, p);
  deploy_target_json(root, p);
  cJSON_AddStringToObject(root, "target", p->target >= 0 ? p->recipes[p->target] : "");
  cJSON *recipes = cJSON_AddArrayToObject(root, "recipes");
  for (size_t r = 0; r < p->n_recipes; r++) cJSON_AddItemToArray(recipes, cJSON_CreateString(p->recipes[r]));
  cJSON *blocking = cJSON_AddArrayToObject(root, "blocking");
  for (size_t i = 0; i < p->n_blocking; i++) cJSON_AddItemToArray(blocking, cJSON_CreateString(p->layers[p->blocking[i]]));
  cJSON *keep = cJSON_AddArrayToObject(root, "keep_high_precision");
  for (size_t l = 0; l < p->n_layers; l++)
    if (keeps_high_precision(p, l)) cJSON_AddItemToArray(keep, cJSON_CreateString(p->layers[l]));
  cJSON *ranking = cJSON_AddArrayToObject(root, "sensitivity_ranking");
  for (size_t i = 0; i < p->n_layers; i++) cJSON_AddItemToArray(ranking, cJSON_CreateString(p->layers[p->by_sensitivity[i]]));
  cJSON *layers = cJSON_AddArrayToObject(root, "layers");
  for (size_t l = 0; l < p->n_layers; l++) {
    cJSON *layer = cJSON_CreateObject();
    cJSON_AddItemToArray(layers, layer);
    cJSON_AddStringToObject(layer, "layer", p->layers[l]);
    cJSON_AddItemToObject(layer, "weights", p->weights[l] >= 0 ? cJSON_CreateNumber((double)p->weights[l]) : cJSON_CreateNull());
    cJSON_AddItemToObject(layer, "recipe", p->chosen[l] >= 0 ? cJSON_CreateString(p->recipes[p->chosen[l]]) : cJSON_CreateNull());
    const precis_plan_cell *chosen = p->chosen[l] >= 0 ? &p->cells[l * p->n_recipes + (size_t)p->chosen[l]] : NULL;
    cJSON_AddItemToObject(layer, "cost", chosen ? num(chosen->cost) : cJSON_CreateNull());
    cJSON_AddItemToObject(layer, "error", chosen ? num(chosen->error) : cJSON_CreateNull());
    cJSON_AddItemToObject(layer, "cheapest_passing",
                          p->cheapest[l] >= 0 ? cJSON_CreateString(p->recipes[p->cheapest[l]]) : cJSON_CreateNull());
    cJSON_AddItemToObject(layer, "sensitivity", num(p->sensitivity[l]));
    cJSON_AddBoolToObject(layer, "keep_high_precision", keeps_high_precision(p, l));
    cJSON *cells = cJSON_AddObjectToObject(layer, "recipes");
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      if (!c->present) continue;
      cJSON *cell = cJSON_CreateObject();
      cJSON_AddItemToObject(cells, p->recipes[r], cell);
      cJSON_AddBoolToObject(cell, "passes", c->passes);
      cJSON_AddItemToObject(cell, "error", num(c->error));
      cJSON_AddItemToObject(cell, "rel_fro", num(c->rel_fro));
      cJSON_AddItemToObject(cell, "cost", num(c->cost));
      cJSON_AddItemToObject(cell, "resident_bytes", num(c->resident));
      cJSON_AddItemToObject(cell, "transient_bytes", num(c->transient));
      if (!c->passes) cJSON_AddStringToObject(cell, "why", c->what);
    }
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

static void md_header(precis_buf *b, const precis_plan *p, const char *report_path) {
  char cost[48], cheapest[48];
  precis_buf_append(b, "# precis plan\n\n- report: ");
  precis_buf_markdown(b, report_path);
  precis_buf_append(b, "\n- criteria: ");
  precis_buf_markdown(b, p->criteria_source);
  precis_buf_appendf(b, "\n- cost: %s (%s)\n", precis_plan_budget_str(p->cost_kind), cost_unit(p->cost_kind));
  if (p->latency_emulated) precis_buf_appendf(b, "- **%s**\n", emulated_latency_note);
  if (p->budget != PRECIS_PLAN_NO_BUDGET) {
    fmt_cost(cost, sizeof cost, p->cost_kind, p->capacity);
    precis_buf_appendf(b, "- budget: %s=%.6g (capacity %s); objective: the lowest sum of %s over layers within it\n",
                       precis_plan_budget_str(p->budget), p->budget_value, cost, precis_plan_objective_str(p->objective));
  }
  precis_buf_appendf(b, "- objective: %s = %s\n", precis_plan_objective_str(p->objective),
                     precis_plan_objective_definition(p->objective));
  precis_buf_appendf(b, "- units: %s\n", objective_units(p->objective));
  precis_buf_append(b, "- method: ");
  precis_buf_markdown(b, p->method);
  precis_buf_append(b, "\n\n");
  if (p->feasible) {
    fmt_cost(cost, sizeof cost, p->cost_kind, p->total_cost);
    fmt_cost(cheapest, sizeof cheapest, p->cost_kind, p->cheapest_total_cost);
    precis_buf_appendf(b, "**Plan:** %zu layers, total cost %s (every layer on its cheapest passing recipe: %s), "
                          "sum of %s %.4g.\n\n", p->n_layers, cost, cheapest, precis_plan_objective_str(p->objective),
                       p->total_error);
    precis_buf_appendf(b, "**Single-format alternatives** (every layer on one recipe; sum of %s):",
                       precis_plan_objective_str(p->objective));
    for (size_t r = 0; r < p->n_recipes; r++) {
      char v[32];
      precis_fmt_sig(v, sizeof v, p->single_format[r], 4);
      precis_buf_append(b, r ? "; " : " ");
      precis_buf_markdown(b, p->recipes[r]);
      precis_buf_appendf(b, " %s%s", v, p->single_passes[r] ? "" : " (fails the criteria on some layer)");
    }
    precis_buf_append(b, ".\n\n");
    char resident[48], peak[48];
    precis_fmt_bytes(resident, sizeof resident, (long long)p->resident_total);
    precis_fmt_bytes(peak, sizeof peak, (long long)p->peak_transient);
    precis_buf_appendf(b, "**Memory:** resident weights + scales %s, plus the largest transient of one layer %s (", resident, peak);
    precis_buf_markdown(b, p->peak_layer >= 0 ? p->layers[p->peak_layer] : "-");
    precis_buf_append(b, ": its input, output and scales at the report's shape).\n\n");
  } else {
    precis_buf_append(b, "**No plan meets the criteria:** ");
    precis_buf_markdown(b, p->infeasible_why);
    precis_buf_append(b, ".\n\n");
    for (size_t i = 0; i < p->n_blocking; i++) {
      size_t l = p->blocking[i];
      precis_buf_append(b, "- blocking: ");
      precis_buf_markdown(b, p->layers[l]);
      /* The closest miss says what it would take. */
      for (size_t r = 0; r < p->n_recipes; r++) {
        const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
        if (!c->present) continue;
        precis_buf_append(b, r ? "; " : " (");
        precis_buf_markdown(b, p->recipes[r]);
        precis_buf_append(b, ": ");
        precis_buf_markdown(b, c->what);
      }
      precis_buf_append(b, ")\n");
    }
    precis_buf_append(b, "\n");
  }
  if (p->serving.requested) {
    const precis_plan_serving *s = &p->serving;
    precis_buf_appendf(b, "**Serving estimate** at batch %lld, context %lld, KV cache in %s (an estimate until `precis accept` "
                          "measures it on a GPU):", s->batch, s->context, s->kv_format);
    if (!s->available) {
      precis_buf_append(b, " not available: ");
      precis_buf_markdown(b, s->why);
      precis_buf_append(b, ".\n\n");
    } else {
      char w[48], kv[48], t[48], ws[48], total[48];
      precis_fmt_bytes(w, sizeof w, (long long)s->weights);
      precis_fmt_bytes(kv, sizeof kv, (long long)s->kv_cache);
      precis_fmt_bytes(t, sizeof t, (long long)s->transient);
      precis_fmt_bytes(ws, sizeof ws, (long long)s->workspace);
      precis_fmt_bytes(total, sizeof total, (long long)s->total);
      precis_buf_appendf(b, "\n\n| term | bytes | how |\n|---|---:|---|\n"
                            "| weights | %s | the planned layers' weights and scales (embeddings and norms not included) |\n"
                            "| KV cache | %s | 2 · %lld tokens · %lld sequences · %lld kv heads · %lld head dim · %lld layers · %.4g bits (scales included) |\n"
                            "| peak transient | %s | the largest input + output of one layer at %lld tokens |\n"
                            "| cuBLASLt workspace | %s | what the cuda backend offers cuBLASLt |\n| **total** | **%s** | |\n\n",
                         w, kv, s->context, s->batch, s->kv_heads, s->head_dim, s->layers, s->kv_bits, t,
                         s->batch * s->context, ws, total);
    }
  }
}

static void md_kv_decision(precis_buf *b, const precis_plan *p) {
  const precis_plan_kv_decision *kv = &p->kv;
  if (!kv->requested) return;
  precis_buf_append(b, "\n## KV cache format (a decision of the budget)\n\nThe budget covers the weights and the KV cache; "
                       "for each KV format the weights get the plan of least objective in what the cache leaves, and the "
                       "plan is the pair of least estimated KL = map(weights objective) + KL of the cache alone (measured, ");
  precis_buf_markdown(b, kv->source);
  precis_buf_append(b, "). The two are added: the weights' and the cache's errors are taken as independent, so their KLs add "
                       "to second order. Map: ");
  if (kv->map_identity) precis_buf_append(b, "KL = objective (identity, as given)");
  else precis_buf_appendf(b, "log10 KL = %.6g + %.6g log10 objective", kv->map_a, kv->map_b);
  precis_buf_append(b, " (");
  precis_buf_markdown(b, kv->map_source);
  precis_buf_append(b, ").\n\n| K | V | bits/value | KV cache | KV KL | weights memory | weights objective | weights KL | "
                       "total KL | |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (size_t i = 0; i < kv->n; i++) {
    const precis_plan_kv_candidate *c = &kv->candidates[i];
    char bytes[48], wmem[48];
    precis_fmt_bytes(bytes, sizeof bytes, (long long)c->bytes);
    precis_buf_append(b, "| `");
    precis_buf_markdown(b, c->k);
    precis_buf_append(b, "` | `");
    precis_buf_markdown(b, c->v);
    precis_buf_appendf(b, "` | %.4g | %s | %.4g | ", c->bits, bytes, c->kl);
    if (!c->deployable) {
      precis_buf_append(b, "— | — | — | — | not deployable: ");
      precis_buf_markdown(b, c->why);
      precis_buf_append(b, " |\n");
      continue;
    }
    if (!c->feasible) {
      precis_buf_append(b, "— | — | — | — | no weights plan fits |\n");
      continue;
    }
    precis_fmt_bytes(wmem, sizeof wmem, (long long)c->weights_memory);
    precis_buf_appendf(b, "%s | %.4g | %.4g | %.4g | %s |\n", wmem, c->weights_objective, c->weights_kl, c->total_kl,
                       (int)i == kv->chosen ? "**chosen**" : "");
  }
  precis_buf_append(b, "\n");
}

static void md_deploy(precis_buf *b, const precis_plan *p) {
  precis_buf_appendf(b, "\n## Deployment target\n\n- engine: %s; architecture %s\n- fused groups (one recipe each): %zu; ",
                     precis_deploy_engine_describe(p->deploy), precis_target_name(p->deploy_arch), p->n_groups);
  precis_buf_markdown(b, p->fusion_rule);
  precis_buf_append(b, "\n");
  if (p->tied_head >= 0) {
    precis_buf_append(b, "- tied head: ");
    precis_buf_markdown(b, p->layers[p->tied_head]);
    precis_buf_append(b, p->tied_charged_copy ? " is tied to the input embeddings: kept unquantized it costs nothing (it is the "
                                                "table), quantized it costs its copy (the table stays for the lookup)\n"
                                              : " is tied to the input embeddings; counted as its own matrix here\n");
  }
  if (p->n_dropped == 0) {
    precis_buf_append(b, "- dropped recipes: none\n");
    return;
  }
  precis_buf_appendf(b, "- dropped recipes (not candidates: the engine cannot run them there): %zu\n\n"
                        "| layer | recipe | why | nearest that deploys |\n|---|---|---|---|\n", p->n_dropped);
  for (size_t l = 0; l < p->n_layers; l++)
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      if (!c->dropped) continue;
      precis_buf_append(b, "| ");
      precis_buf_markdown(b, p->layers[l]);
      precis_buf_append(b, " | ");
      precis_buf_markdown(b, p->recipes[r]);
      precis_buf_append(b, " | ");
      precis_buf_markdown(b, c->dropped_why);
      precis_buf_append(b, " | ");
      if (c->nearest[0]) {
        precis_buf_append(b, "`");
        precis_buf_append(b, c->nearest);
        precis_buf_append(b, "`");
      } else {
        precis_buf_append(b, "-");
      }
      precis_buf_append(b, " |\n");
    }
}

static char *plan_markdown(const precis_plan *p, const char *report_path) {
  precis_buf b;
  precis_buf_init(&b);
  md_header(&b, p, report_path);
  char cost[48], err[32], sens[32];
  precis_buf_appendf(&b, "## Per layer\n\n| layer | plan | cost | %s | cheapest passing | sensitivity | rank |\n",
                     precis_plan_objective_str(p->objective));
  precis_buf_append(&b, ""
                        "|---|---|---:|---:|---|---:|---:|\n");
  size_t *rank = malloc((p->n_layers ? p->n_layers : 1) * sizeof *rank);
  if (rank)
    for (size_t i = 0; i < p->n_layers; i++) rank[p->by_sensitivity[i]] = i + 1;
  for (size_t l = 0; l < p->n_layers; l++) {
    const precis_plan_cell *c = p->chosen[l] >= 0 ? &p->cells[l * p->n_recipes + (size_t)p->chosen[l]] : NULL;
    fmt_cost(cost, sizeof cost, p->cost_kind, c ? c->cost : NAN);
    precis_fmt_sig(err, sizeof err, c ? c->error : NAN, 3);
    precis_fmt_sig(sens, sizeof sens, p->sensitivity[l], 3);
    precis_buf_append(&b, "| ");
    precis_buf_markdown(&b, p->layers[l]);
    precis_buf_append(&b, " | ");
    precis_buf_markdown(&b, c ? p->recipes[p->chosen[l]] : "-");
    precis_buf_appendf(&b, " | %s | %s | ", cost, err);
    precis_buf_markdown(&b, p->cheapest[l] >= 0 ? p->recipes[p->cheapest[l]] : "none");
    precis_buf_appendf(&b, " | %s | %zu |\n", sens, rank ? rank[l] : 0);
  }
  free(rank);
  md_kv_decision(&b, p);
  md_deploy(&b, p);
  precis_buf_append(&b, "\n## Sensitivity ranking (most sensitive first)\n\n"
                        "Sensitivity = mean over recipes of log2(layer's value / the recipe's median value over layers) of the objective; "
                        "+1 = twice the typical error. A value marked * fails the criteria.\n\n| rank | layer | sensitivity |");
  for (size_t r = 0; r < p->n_recipes; r++) {
    precis_buf_append(&b, " ");
    precis_buf_markdown(&b, p->recipes[r]);
    precis_buf_append(&b, " |");
  }
  precis_buf_append(&b, "\n|---:|---|---:|");
  for (size_t r = 0; r < p->n_recipes; r++) precis_buf_append(&b, "---:|");
  precis_buf_append(&b, "\n");
  for (size_t i = 0; i < p->n_layers; i++) {
    size_t l = p->by_sensitivity[i];
    precis_fmt_sig(sens, sizeof sens, p->sensitivity[l], 3);
    precis_buf_appendf(&b, "| %zu | ", i + 1);
    precis_buf_markdown(&b, p->layers[l]);
    precis_buf_appendf(&b, " | %s |", sens);
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      precis_fmt_sig(err, sizeof err, c->error, 3);
      precis_buf_appendf(&b, " %s%s |", err, c->present && !c->passes ? "\\*" : "");
    }
    precis_buf_append(&b, "\n");
  }
  precis_buf_append(&b, "\n## Keep in high precision\n\n");
  if (!p->feasible) precis_buf_append(&b, "No plan, so no list.\n");
  else {
    precis_buf_append(&b, "Layers the plan does not put on ");
    precis_buf_markdown(&b, p->target >= 0 ? p->recipes[p->target] : "-");
    precis_buf_append(&b, " (the exclusion lists: `modelopt_exclude.json`, `llmcompressor_ignore.yaml`):\n\n");
    size_t n = 0;
    for (size_t l = 0; l < p->n_layers; l++)
      if (keeps_high_precision(p, l)) {
        precis_buf_append(&b, "- ");
        precis_buf_markdown(&b, p->layers[l]);
        precis_buf_append(&b, " → ");
        precis_buf_markdown(&b, p->recipes[p->chosen[l]]);
        precis_buf_append(&b, "\n");
        n++;
      }
    if (n == 0) precis_buf_append(&b, "(none: every layer takes the target recipe)\n");
  }
  return precis_buf_take(&b);
}

static char *plan_html(const precis_plan *p, const char *report_path) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_append(&b,
                    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>precis plan</title>\n<style>\n"
                    "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:20px auto;max-width:1400px;color:#222;"
                    "font-size:14px;padding:0 12px}h1{font-size:24px}h2{font-size:19px;border-bottom:2px solid #ddd}\n"
                    ".banner{padding:8px 12px;margin:8px 0;border-radius:4px}.ok{background:#e7f4e7;border:1px solid #3a3}"
                    ".bad{background:#fde2e2;border:1px solid #c33}\n"
                    "table.heat{border-collapse:collapse;font-size:11px}table.heat td,table.heat th{border:1px solid #ddd;"
                    "padding:0 5px;height:15px;text-align:right;white-space:nowrap}\n"
                    "table.heat th{background:#f3f3f3;position:sticky;top:0}table.heat td.layer{text-align:left;"
                    "max-width:420px;overflow:hidden;text-overflow:ellipsis}\n"
                    "td.fail{background-image:repeating-linear-gradient(45deg,transparent 0 4px,rgba(0,0,0,.18) 4px 5px);"
                    "color:#777}td.missing{color:#bbb}\n"
                    "td.chosen{outline:3px solid #0040ff;outline-offset:-3px;font-weight:bold}\n"
                    "td.dark{color:#fff}td.fail.dark{color:#f4c7c7}table.heat th.t{text-align:left}td.keep{color:#b00;font-weight:bold}.legend span{display:inline-block;padding:1px 8px;margin-right:6px;"
                    "border:1px solid #ccc}\n.muted{color:#666;font-size:12px}\n</style></head><body>\n<h1>precis plan</h1>\n");
  precis_buf_append(&b, "<p class=\"muted\">report ");
  precis_buf_html(&b, report_path);
  precis_buf_append(&b, " &middot; criteria: ");
  precis_buf_html(&b, p->criteria_source);
  precis_buf_appendf(&b, " &middot; cost: %s (%s)", precis_plan_budget_str(p->cost_kind), cost_unit(p->cost_kind));
  precis_buf_append(&b, " &middot; method: ");
  precis_buf_html(&b, p->method);
  precis_buf_append(&b, "</p>\n");
  if (p->latency_emulated) precis_buf_appendf(&b, "<div class=\"banner bad\"><b>%s</b></div>\n", emulated_latency_note);
  char cost[48], cheapest[48], err[32], sens[32], color[16];
  if (p->feasible) {
    fmt_cost(cost, sizeof cost, p->cost_kind, p->total_cost);
    fmt_cost(cheapest, sizeof cheapest, p->cost_kind, p->cheapest_total_cost);
    precis_buf_appendf(&b, "<div class=\"banner ok\"><b>Plan:</b> %zu layers, total cost %s (all cheapest passing: %s), "
                           "sum of %s %.4g.</div>\n", p->n_layers, cost, cheapest,
                       precis_plan_objective_str(p->objective), p->total_error);
  } else {
    precis_buf_append(&b, "<div class=\"banner bad\"><b>No plan meets the criteria:</b> ");
    precis_buf_html(&b, p->infeasible_why);
    if (p->n_blocking) {
      precis_buf_append(&b, ". Blocking layers: ");
      for (size_t i = 0; i < p->n_blocking; i++) {
        if (i) precis_buf_append(&b, ", ");
        precis_buf_html(&b, p->layers[p->blocking[i]]);
      }
    }
    precis_buf_append(&b, "</div>\n");
  }
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < p->n_layers * p->n_recipes; i++) {
    double e = p->cells[i].error;
    if (isfinite(e) && e > 0) {
      lo = fmin(lo, log10(e));
      hi = fmax(hi, log10(e));
    }
  }
  precis_buf_append(&b, "<h2>Per layer and recipe: ");
  precis_buf_html(&b, precis_plan_objective_definition(p->objective));
  precis_buf_append(&b, "</h2>\n<p class=\"legend\">");
  for (int i = 0; i <= 4; i++) {
    double e = isfinite(lo) ? pow(10, lo + (hi - lo) * i / 4.0) : NAN;
    precis_heat_color(e, lo, hi, color, sizeof color);
    precis_fmt_sig(err, sizeof err, e, 2);
    precis_buf_appendf(&b, "<span style=\"background:%s\">%s</span>", color, err);
  }
  precis_buf_append(&b, " <span class=\"fail\" style=\"background-image:repeating-linear-gradient(45deg,transparent 0 4px,"
                        "rgba(0,0,0,.18) 4px 5px)\">fails the criteria</span><span style=\"outline:3px solid #0040ff;"
                        "outline-offset:-3px\">the plan's choice</span> Rows in model order; layer names in red stay in "
                        "higher precision than the exclusion lists' target; hover a cell for its cost and why it fails.</p>\n<table class=\"heat\"><thead><tr><th>#</th><th class=\"t\">layer</th><th>sensitivity</th>");
  for (size_t r = 0; r < p->n_recipes; r++) {
    precis_buf_append(&b, "<th>");
    precis_buf_html(&b, p->recipes[r]);
    precis_buf_append(&b, "</th>");
  }
  precis_buf_append(&b, "</tr></thead><tbody>\n");
  for (size_t l = 0; l < p->n_layers; l++) {
    precis_fmt_sig(sens, sizeof sens, p->sensitivity[l], 2);
    precis_buf_appendf(&b, "<tr><td>%zu</td><td class=\"layer%s\" title=\"", l + 1, keeps_high_precision(p, l) ? " keep" : "");
    precis_buf_html(&b, p->layers[l]);
    precis_buf_append(&b, "\">");
    precis_buf_html(&b, p->layers[l]);
    precis_buf_appendf(&b, "</td><td>%s</td>", sens);
    for (size_t r = 0; r < p->n_recipes; r++) {
      const precis_plan_cell *c = &p->cells[l * p->n_recipes + r];
      if (!c->present) {
        precis_buf_append(&b, "<td class=\"missing\">&middot;</td>");
        continue;
      }
      bool dark = precis_heat_color(c->error, lo, hi, color, sizeof color) > 0.7;
      precis_fmt_sig(err, sizeof err, c->error, 2);
      fmt_cost(cost, sizeof cost, p->cost_kind, c->cost);
      bool chosen = p->chosen[l] == (int)r;
      precis_buf_appendf(&b, "<td class=\"%s%s%s\" style=\"background-color:%s\" title=\"", c->passes ? "pass" : "fail",
                         chosen ? " chosen" : "", dark ? " dark" : "", color);
      precis_buf_html(&b, p->recipes[r]);
      precis_buf_appendf(&b, ": %s %s, cost %s", precis_plan_objective_str(p->objective), err, cost);
      if (!c->passes) {
        precis_buf_append(&b, "; fails: ");
        precis_buf_html(&b, c->what);
      }
      precis_buf_appendf(&b, "\">%s</td>", err);
    }
    precis_buf_append(&b, "</tr>\n");
  }
  precis_buf_append(&b, "</tbody></table>\n</body></html>\n");
  return precis_buf_take(&b);
}

/* ModelOpt: quant_cfg entries that switch off every quantizer of a kept module (its
 * weight_quantizer and input_quantizer), in both the list form of current releases and the dict
 * form of older ones, plus the exclude_modules list that its hf_quant_config.json carries. */
static char *modelopt_json(const precis_plan *p) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "comment",
                          "precis plan: modules to keep in high precision. Merge quant_cfg into your ModelOpt config "
                          "after the format's entries (later entries win); exclude_modules is the hf_quant_config.json form.");
  cJSON_AddStringToObject(root, "target_recipe", p->target >= 0 ? p->recipes[p->target] : "");
  cJSON *exclude = cJSON_AddArrayToObject(root, "exclude_modules");
  cJSON *list = cJSON_AddArrayToObject(root, "quant_cfg");
  cJSON *dict = cJSON_AddObjectToObject(root, "quant_cfg_dict");
  for (size_t l = 0; l < p->n_layers; l++) {
    if (!keeps_high_precision(p, l)) continue;
    cJSON_AddItemToArray(exclude, cJSON_CreateString(p->layers[l]));
    char *pattern = precis_asprintf("*%s.*", p->layers[l]);
    if (!pattern) continue;
    cJSON *entry = cJSON_CreateObject();
    cJSON_AddStringToObject(entry, "quantizer_name", pattern);
    cJSON_AddBoolToObject(entry, "enable", false);
    cJSON_AddItemToArray(list, entry);
    cJSON *off = cJSON_CreateObject();
    cJSON_AddBoolToObject(off, "enable", false);
    cJSON_AddItemToObject(dict, pattern, off);
    free(pattern);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

/* llm-compressor: the `ignore:` list of a QuantizationModifier (exact module names; names are
 * double-quoted YAML scalars so that no module name can change the document's structure). */
static char *llmcompressor_yaml(const precis_plan *p) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_append(&b, "# precis plan: modules to keep in high precision (layers not planned for ");
  precis_buf_append(&b, p->target >= 0 ? p->recipes[p->target] : "-");
  /* The llm-compressor preset scheme closest to the target recipe, for the example line. */
  const char *target = p->target >= 0 ? p->recipes[p->target] : "";
  const char *scheme = !strcmp(target, "int8") ? "W8A8" : !strcmp(target, "fp8") ? "FP8_DYNAMIC" : "<your scheme>";
  precis_buf_appendf(&b, ").\n# Paste under your recipe's QuantizationModifier, e.g.\n"
                         "#   QuantizationModifier: {targets: [Linear], scheme: %s, ignore: [...]}\nignore:", scheme);
  size_t n = 0;
  for (size_t l = 0; l < p->n_layers; l++) {
    if (!keeps_high_precision(p, l)) continue;
    precis_buf_append(&b, "\n  - \"");
    for (const unsigned char *c = (const unsigned char *)p->layers[l]; *c; c++) {
      if (*c == '"' || *c == '\\') precis_buf_appendf(&b, "\\%c", *c);
      else if (*c < 0x20 || *c == 0x7f) precis_buf_appendf(&b, "\\x%02x", *c);
      else precis_buf_appendf(&b, "%c", *c);
    }
    precis_buf_append(&b, "\"");
    n++;
  }
  precis_buf_append(&b, n ? "\n" : " []\n");
  return precis_buf_take(&b);
}

/* The spec of a plan recipe, from the report's row (the canonical spec) or the preset. */
static bool recipe_spec(const precis_plan *p, const precis_report *report, size_t r, precis_spec *spec) {
  for (size_t l = 0; l < p->n_layers; l++) {
    const precis_row *row = precis_report_find_row(report, p->layers[l], p->recipes[r]);
    const char *text = row && row->spec ? row->spec : precis_recipe_name_spec(p->recipes[r]);
    if (text && precis_spec_parse(text, spec) == PRECIS_OK) return true;
    precis_clear_error();
  }
  return false;
}

typedef enum deploy_target { DEPLOY_COMPRESSED_TENSORS, DEPLOY_MODELOPT } deploy_target;

/* Per recipe of the plan: its mapping in a framework (maps[r]); layers on a recipe without one are
 * counted in *unmapped. */
static void deploy_maps(const precis_plan *p, const precis_report *report, deploy_target target, precis_deploy_map *maps) {
  for (size_t r = 0; r < p->n_recipes; r++) {
    precis_spec spec;
    memset(&maps[r], 0, sizeof maps[r]);
    if (!recipe_spec(p, report, r, &spec)) {
      maps[r].kind = PRECIS_DEPLOY_NONE;
      snprintf(maps[r].note, sizeof maps[r].note, "the report does not say this recipe's spec");
    } else if (target == DEPLOY_COMPRESSED_TENSORS) {
      precis_deploy_compressed_tensors(&spec, &maps[r]);
    } else {
      precis_deploy_modelopt(&spec, &maps[r]);
    }
  }
}

/* What the library would refuse of a plan's layers (plan.json's deployment section): rejected[l]
 * when the layer's recipe maps to a scheme whose groups or blocks its input width cannot take
 * (compressed-tensors raises in compress_model; TensorRT-LLM's kernels need the same), with why. */
typedef struct deploy_refusals {
  bool *rejected;
  char **why;
  /* Fused groups under the framework's engine whose members the plan put on different schemes:
   * mixed[l] for each member (vLLM refuses to load them: fused shards must share a scheme). */
  bool *mixed;
} deploy_refusals;

static void refusals_free(deploy_refusals *d, size_t n_layers) {
  for (size_t l = 0; d->why && l < n_layers; l++) free(d->why[l]);
  free(d->why);
  free(d->rejected);
  free(d->mixed);
  memset(d, 0, sizeof *d);
}

static precis_status find_refusals(const precis_plan *p, const precis_report *report, const precis_deploy_map *maps,
                                   precis_deploy_engine engine, deploy_refusals *d) {
  size_t n = p->n_layers ? p->n_layers : 1;
  d->rejected = calloc(n, sizeof *d->rejected);
  d->why = calloc(n, sizeof *d->why);
  d->mixed = calloc(n, sizeof *d->mixed);
  const char **names = calloc(n, sizeof *names);
  long long *k = calloc(n, sizeof *k);
  int *group = calloc(n, sizeof *group);
  precis_status st = PRECIS_OK;
  if (!d->rejected || !d->why || !d->mixed || !names || !k || !group) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t l = 0; p->feasible && l < p->n_layers; l++) {
    names[l] = p->layers[l];
    const precis_row *row = precis_report_find_row(report, p->layers[l], p->recipes[p->chosen[l]]);
    k[l] = row ? row->k : -1;
    precis_spec spec;
    const char *text = row && row->spec ? row->spec : precis_recipe_name_spec(p->recipes[p->chosen[l]]);
    if (!row || maps[p->chosen[l]].kind != PRECIS_DEPLOY_SCHEME || !text || precis_spec_parse(text, &spec) != PRECIS_OK) {
      precis_clear_error();
      continue;
    }
    char why[320];
    if (!precis_deploy_ct_shape_ok(&spec, row->k, row->n, why, sizeof why)) {
      d->rejected[l] = true;
      d->why[l] = precis_strdup(why);
    }
  }
  if (!p->feasible) goto done;
  const char *config = precis_kv_get(&report->settings, "model_config");
  cJSON *doc = config ? cJSON_Parse(config) : NULL;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
  char rule[300];
  size_t n_groups = 0;
  st = precis_deploy_fused_groups(engine, cJSON_IsString(type) ? type->valuestring : NULL, names, k, p->n_layers, group,
                                  &n_groups, rule, sizeof rule);
  cJSON_Delete(doc);
  for (size_t l = 0; st == PRECIS_OK && l < p->n_layers; l++)
    for (size_t m = 0; group[l] >= 0 && m < p->n_layers; m++)
      if (group[m] == group[l] && p->chosen[m] != p->chosen[l]) {
        const precis_deploy_map *a = &maps[p->chosen[l]], *b = &maps[p->chosen[m]];
        bool same = a->kind == b->kind && (a->kind != PRECIS_DEPLOY_SCHEME || (strcmp(a->scheme, b->scheme) == 0 &&
                                                                               cJSON_Compare(a->weights, b->weights, true) &&
                                                                               cJSON_Compare(a->input_activations, b->input_activations, true)));
        if (!same) d->mixed[l] = true;
      }
done:
  free(names);
  free(k);
  free(group);
  return st;
}

/* The deployment section of plan.json: per framework, each used recipe's mapping and the layers
 * the emitted config cannot carry. complete only when the framework's library accepts every layer:
 * a mapping, a shape its groups divide, and fused layers on one scheme. */
static void deploy_json(cJSON *root, const precis_plan *p, const precis_deploy_map *maps, const deploy_refusals *refusals,
                        const char *name, const char *file) {
  cJSON *d = cJSON_AddObjectToObject(root, name);
  cJSON_AddStringToObject(d, "file", file);
  cJSON *recipes = cJSON_AddObjectToObject(d, "recipes");
  cJSON *missing = cJSON_CreateArray(), *rejected = cJSON_CreateArray(), *mixed = cJSON_CreateArray();
  for (size_t r = 0; r < p->n_recipes; r++) {
    bool used = false, shape_ok = true;
    for (size_t l = 0; l < p->n_layers; l++)
      if (p->chosen[l] == (int)r) {
        used = true;
        shape_ok = shape_ok && !refusals->rejected[l];
      }
    if (!used) continue;
    cJSON *m = cJSON_AddObjectToObject(recipes, p->recipes[r]);
    cJSON_AddStringToObject(m, "mapping", precis_deploy_kind_str(maps[r].kind));
    if (maps[r].scheme[0]) cJSON_AddStringToObject(m, "scheme", maps[r].scheme);
    cJSON_AddBoolToObject(m, "exact", maps[r].exact && shape_ok);
    if (maps[r].note[0]) cJSON_AddStringToObject(m, "note", maps[r].note);
    if (!shape_ok) cJSON_AddStringToObject(m, "shape", "some of its layers' input widths are not multiples of its groups "
                                                        "(layers_rejected_by_shape): those layers are left out of the file");
  }
  for (size_t l = 0; l < p->n_layers; l++) {
    if (p->chosen[l] < 0) continue;
    if (maps[p->chosen[l]].kind == PRECIS_DEPLOY_NONE) cJSON_AddItemToArray(missing, cJSON_CreateString(p->layers[l]));
    if (refusals->rejected[l]) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "layer", p->layers[l]);
      cJSON_AddStringToObject(e, "why", refusals->why[l] ? refusals->why[l] : "");
      cJSON_AddItemToArray(rejected, e);
    }
    if (refusals->mixed[l]) cJSON_AddItemToArray(mixed, cJSON_CreateString(p->layers[l]));
  }
  cJSON_AddBoolToObject(d, "complete", cJSON_GetArraySize(missing) == 0 && cJSON_GetArraySize(rejected) == 0 &&
                                           cJSON_GetArraySize(mixed) == 0);
  cJSON_AddItemToObject(d, "layers_without_equivalent", missing);
  cJSON_AddItemToObject(d, "layers_rejected_by_shape", rejected);
  cJSON_AddItemToObject(d, "fused_layers_on_different_schemes", mixed);
}

/* compressed-tensors: a quantization_config (the object under config.json's "quantization_config",
 * what compressed_tensors.QuantizationConfig parses): one config group per scheme used, targets the
 * exact module names; ignore the unquantized layers. Layers on a recipe without an equivalent are
 * in neither (plan.json names them). */
static char *compressed_tensors_json(const precis_plan *p, const precis_deploy_map *maps, const bool *rejected) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "quant_method", "compressed-tensors");
  cJSON *groups = cJSON_AddObjectToObject(root, "config_groups");
  const char *format = NULL;
  int n_groups = 0;
  bool mixed = false;
  for (size_t r = 0; p->feasible && r < p->n_recipes; r++) {
    if (maps[r].kind != PRECIS_DEPLOY_SCHEME) continue;
    cJSON *targets = cJSON_CreateArray();
    for (size_t l = 0; l < p->n_layers; l++)
      if (p->chosen[l] == (int)r && !rejected[l]) cJSON_AddItemToArray(targets, cJSON_CreateString(p->layers[l]));
    if (cJSON_GetArraySize(targets) == 0) {
      cJSON_Delete(targets);
      continue;
    }
    char name[32];
    snprintf(name, sizeof name, "group_%d", n_groups++);
    cJSON *g = cJSON_AddObjectToObject(groups, name);
    cJSON_AddItemToObject(g, "targets", targets);
    cJSON_AddItemToObject(g, "weights", cJSON_Duplicate(maps[r].weights, true));
    if (maps[r].input_activations) cJSON_AddItemToObject(g, "input_activations", cJSON_Duplicate(maps[r].input_activations, true));
    cJSON_AddStringToObject(g, "format", maps[r].scheme);
    if (format && strcmp(format, maps[r].scheme) != 0) mixed = true;
    format = maps[r].scheme;
  }
  cJSON_AddStringToObject(root, "format", mixed ? "mixed-precision" : format ? format : "dense");
  /* The KV cache of --serve kv= (docs/kv-cache.md): llm-compressor's kv_cache_scheme, static fp8 scales. */
  if (p->serving.requested && p->serving.kv_ct_strategy) {
    cJSON *kv = cJSON_AddObjectToObject(root, "kv_cache_scheme");
    cJSON_AddNumberToObject(kv, "num_bits", 8);
    cJSON_AddStringToObject(kv, "type", "float");
    cJSON_AddStringToObject(kv, "strategy", p->serving.kv_ct_strategy);
    cJSON_AddBoolToObject(kv, "dynamic", false);
    cJSON_AddBoolToObject(kv, "symmetric", true);
  }
  cJSON *ignore = cJSON_AddArrayToObject(root, "ignore");
  for (size_t l = 0; p->feasible && l < p->n_layers; l++)
    if (maps[p->chosen[l]].kind == PRECIS_DEPLOY_UNQUANTIZED) cJSON_AddItemToArray(ignore, cJSON_CreateString(p->layers[l]));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

/* ModelOpt: hf_quant_config.json as ModelOpt's own export writes it (modelopt/torch/export/
 * quant_utils.py, process_layer_quant_config): several formats give quant_algo MIXED_PRECISION and a
 * quant_algo per quantized layer (layers not listed are unquantized); one format is written flat
 * (its quant_algo, group_size, and the unquantized layers in exclude_modules) unless some layer has no
 * equivalent (it would fall under that quant_algo); none, quant_algo null. */
/* The KV cache's format rides along in ModelOpt's file (null when plan --serve names none or one
 * ModelOpt has no algo for). */
static void add_modelopt_kv(cJSON *q, const precis_plan *p) {
  if (p->serving.requested && p->serving.kv_modelopt) cJSON_AddStringToObject(q, "kv_cache_quant_algo", p->serving.kv_modelopt);
  else cJSON_AddNullToObject(q, "kv_cache_quant_algo");
}

static char *modelopt_layers_json(const precis_plan *p, const precis_deploy_map *maps, const bool *rejected) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON *producer = cJSON_AddObjectToObject(root, "producer");
  cJSON_AddStringToObject(producer, "name", "precis plan");
  cJSON *q = cJSON_AddObjectToObject(root, "quantization");
  cJSON *layers = cJSON_CreateObject(), *exclude = cJSON_CreateArray();
  const precis_deploy_map *first = NULL;
  bool mixed = false;
  for (size_t l = 0; p->feasible && l < p->n_layers; l++) {
    const precis_deploy_map *m = &maps[p->chosen[l]];
    if (m->kind == PRECIS_DEPLOY_UNQUANTIZED) cJSON_AddItemToArray(exclude, cJSON_CreateString(p->layers[l]));
    /* A layer the file cannot carry must not fall under a flat file's one quant_algo: list per layer. */
    if (m->kind == PRECIS_DEPLOY_NONE || (m->kind == PRECIS_DEPLOY_SCHEME && rejected[l])) mixed = true;
    if (m->kind != PRECIS_DEPLOY_SCHEME || rejected[l]) continue;
    cJSON *e = cJSON_AddObjectToObject(layers, p->layers[l]);
    cJSON_AddStringToObject(e, "quant_algo", m->scheme);
    if (m->group_size) cJSON_AddNumberToObject(e, "group_size", m->group_size);
    if (first && (strcmp(first->scheme, m->scheme) != 0 || first->group_size != m->group_size)) mixed = true;
    if (!first) first = m;
  }
  if (mixed) {
    cJSON_AddStringToObject(q, "quant_algo", "MIXED_PRECISION");
    add_modelopt_kv(q, p);
    cJSON_AddItemToObject(q, "quantized_layers", layers);
    cJSON_Delete(exclude);
  } else {
    if (first) cJSON_AddStringToObject(q, "quant_algo", first->scheme);
    else cJSON_AddNullToObject(q, "quant_algo");
    add_modelopt_kv(q, p);
    if (first && first->group_size) cJSON_AddNumberToObject(q, "group_size", first->group_size);
    cJSON_AddItemToObject(q, "exclude_modules", exclude);
    cJSON_Delete(layers);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

precis_status precis_plan_write_all(const precis_plan *p, const precis_report *report, const char *report_path,
                                    const char *dir, bool force) {
  precis_status st = precis_mkdirs(dir);
  if (st != PRECIS_OK) return st;
  precis_deploy_map *ct = calloc(p->n_recipes ? p->n_recipes : 1, sizeof *ct);
  precis_deploy_map *mo = calloc(p->n_recipes ? p->n_recipes : 1, sizeof *mo);
  if (!ct || !mo) {
    free(ct);
    free(mo);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  deploy_maps(p, report, DEPLOY_COMPRESSED_TENSORS, ct);
  deploy_maps(p, report, DEPLOY_MODELOPT, mo);
  deploy_refusals ct_refusals = {0}, mo_refusals = {0};
  if ((st = find_refusals(p, report, ct, PRECIS_DEPLOY_ENGINE_VLLM, &ct_refusals)) == PRECIS_OK)
    st = find_refusals(p, report, mo, PRECIS_DEPLOY_ENGINE_TRTLLM, &mo_refusals);
  char *json = NULL;
  char *texts[7] = {0};
  if (st == PRECIS_OK) {
    json = plan_json(p, report, report_path);
    cJSON *doc = json ? cJSON_Parse(json) : NULL;
    free(json);
    json = NULL;
    if (doc) {
      cJSON *deployment = cJSON_AddObjectToObject(doc, "deployment");
      deploy_json(deployment, p, ct, &ct_refusals, "compressed_tensors", "compressed_tensors_config.json");
      deploy_json(deployment, p, mo, &mo_refusals, "modelopt", "modelopt_hf_quant_config.json");
      json = cJSON_Print(doc);
      cJSON_Delete(doc);
    }
    texts[0] = json;
    texts[1] = plan_markdown(p, report_path);
    texts[2] = plan_html(p, report_path);
    texts[3] = modelopt_json(p);
    texts[4] = llmcompressor_yaml(p);
    texts[5] = compressed_tensors_json(p, ct, ct_refusals.rejected);
    texts[6] = modelopt_layers_json(p, mo, mo_refusals.rejected);
  }
  refusals_free(&ct_refusals, p->n_layers);
  refusals_free(&mo_refusals, p->n_layers);
  static const char *const names[7] = {"plan.json", "plan.md", "plan.html", "modelopt_exclude.json",
                                       "llmcompressor_ignore.yaml", "compressed_tensors_config.json",
                                       "modelopt_hf_quant_config.json"};
  for (size_t r = 0; r < p->n_recipes; r++) {
    precis_deploy_map_free(&ct[r]);
    precis_deploy_map_free(&mo[r]);
  }
  free(ct);
  free(mo);
  for (int i = 0; i < 7 && st == PRECIS_OK; i++) {
    if (!texts[i]) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory writing %s", names[i]);
      break;
    }
    char *path = precis_asprintf("%s/%s", dir, names[i]);
    st = path ? precis_atomic_write_text(path, texts[i], force) : precis_fail(PRECIS_E_NOMEM, "out of memory");
    free(path);
  }
  for (int i = 0; i < 7; i++) free(texts[i]);
  return st;
}

/* Names come from the dataset: a terminal sees no control characters. */
static const char *term(precis_buf *b, const char *s) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
  precis_buf_terminal(b, s, 0);
  return b->data && !b->failed ? b->data : "?";
}

void precis_plan_print(const precis_plan *p, FILE *out) {
  precis_buf b;
  precis_buf_init(&b);
  char cost[48], err[32];
  if (p->latency_emulated) fprintf(out, "note: %s\n", emulated_latency_note);
  if (!p->feasible) {
    fprintf(out, "no plan meets the criteria (%s): %s\n", p->criteria_source, p->infeasible_why);
    for (size_t i = 0; i < p->n_blocking; i++) {
      size_t l = p->blocking[i];
      fprintf(out, "  blocking: %s", term(&b, p->layers[l]));
      for (size_t r = 0; r < p->n_recipes; r++)
        if (p->cells[l * p->n_recipes + r].present)
          fprintf(out, "%s%s %s", r ? "; " : " (", p->recipes[r], p->cells[l * p->n_recipes + r].what);
      fprintf(out, ")\n");
    }
    precis_buf_free(&b);
    return;
  }
  fmt_cost(cost, sizeof cost, p->cost_kind, p->total_cost);
  fprintf(out, "plan: %zu layers, total cost %s (%s), sum of %s %.4g (%s)\n", p->n_layers, cost,
          precis_plan_budget_str(p->cost_kind), precis_plan_objective_str(p->objective), p->total_error, p->method);
  size_t *count = calloc(p->n_recipes ? p->n_recipes : 1, sizeof *count);
  if (count) {
    for (size_t l = 0; l < p->n_layers; l++) count[p->chosen[l]]++;
    fprintf(out, "  layers per recipe:");
    for (size_t r = 0; r < p->n_recipes; r++)
      if (count[r]) fprintf(out, " %s %zu", p->recipes[r], count[r]);
    fprintf(out, "\n");
    free(count);
  }
  fprintf(out, "  deploy target %s on %s: %zu fused groups (one recipe each), %zu (layer, recipe) cells dropped as not "
               "deployable%s%s\n", precis_deploy_engine_name(p->deploy), precis_target_name(p->deploy_arch), p->n_groups,
          p->n_dropped, p->n_dropped ? " (plan.md says why and the nearest that deploys)" : "",
          p->tied_charged_copy ? "; the tied head charged its quantized copy" : "");
  fprintf(out, "  most sensitive:");
  for (size_t i = 0; i < p->n_layers && i < 5; i++) {
    precis_fmt_sig(err, sizeof err, p->sensitivity[p->by_sensitivity[i]], 3);
    fprintf(out, "%s %s (%s)", i ? "," : "", term(&b, p->layers[p->by_sensitivity[i]]), err);
  }
  fprintf(out, "\n");
  char resident[48], peak[48];
  precis_fmt_bytes(resident, sizeof resident, (long long)p->resident_total);
  precis_fmt_bytes(peak, sizeof peak, (long long)p->peak_transient);
  fprintf(out, "  memory: resident weights + scales %s, largest transient %s (%s)\n", resident, peak,
          p->peak_layer >= 0 ? term(&b, p->layers[p->peak_layer]) : "-");
  if (p->kv.requested && p->kv.chosen >= 0) {
    const precis_plan_kv_candidate *c = &p->kv.candidates[p->kv.chosen];
    char bytes[48];
    precis_fmt_bytes(bytes, sizeof bytes, (long long)c->bytes);
    fprintf(out, "  KV cache: K %s, V %s chosen of %zu candidates (%s; KL %.4g alone): estimated KL %.4g = weights %.4g + KV "
                 "%.4g (plan.md lists the alternatives)\n", c->k, c->v, p->kv.n, bytes, c->kl, c->total_kl, c->weights_kl, c->kl);
  }
  const precis_plan_serving *s = &p->serving;
  if (s->requested && !s->available)
    fprintf(out, "  serving estimate (batch %lld, context %lld): not available: %s\n", s->batch, s->context, s->why);
  else if (s->requested) {
    char w[48], kv[48], t[48], ws[48], total[48];
    precis_fmt_bytes(w, sizeof w, (long long)s->weights);
    precis_fmt_bytes(kv, sizeof kv, (long long)s->kv_cache);
    precis_fmt_bytes(t, sizeof t, (long long)s->transient);
    precis_fmt_bytes(ws, sizeof ws, (long long)s->workspace);
    precis_fmt_bytes(total, sizeof total, (long long)s->total);
    fprintf(out, "  serving estimate (batch %lld, context %lld, KV in %s; an estimate until precis accept measures it):\n"
                 "    weights %s + KV cache %s + peak transient %s + cuBLASLt workspace %s = %s\n",
            s->batch, s->context, s->kv_format, w, kv, t, ws, total);
  }
  precis_buf_free(&b);
}
