#include "deal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "report/results.h"

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t nonneg(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

uint64_t precis_deal_cost(const precis_workload_info *w, const precis_recipe *recipe) {
  uint64_t flops = sat_mul(sat_mul(sat_mul(sat_mul(2, nonneg(w->m)), nonneg(w->n)), nonneg(w->k)), nonneg(w->batch));
  long long bytes = precis_spec_tensor_bytes(&recipe->spec, w->m, w->n, w->k, w->batch, w->b_batched);
  return sat_add(flops, sat_mul(bytes > 0 ? (uint64_t)bytes : 0, PRECIS_DEAL_FLOPS_PER_BYTE));
}

typedef struct dealt_case {
  uint64_t cost;
  size_t index;
} dealt_case;

static int by_cost_then_order(const void *pa, const void *pb) {
  const dealt_case *a = pa, *b = pb;
  if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
  return a->index < b->index ? -1 : a->index > b->index;
}

precis_status precis_deal_cases(const precis_workload_info *const *workloads, size_t n_workloads,
                                const precis_recipe *recipes, size_t n_recipes, int n_parts, int *part) {
  size_t n = n_workloads * n_recipes;
  if (n_parts <= 1) {
    for (size_t i = 0; i < n; i++) part[i] = 1;
    return PRECIS_OK;
  }
  dealt_case *cases = malloc((n ? n : 1) * sizeof *cases);
  uint64_t *load = calloc((size_t)n_parts, sizeof *load);
  if (!cases || !load) {
    free(cases);
    free(load);
    return precis_fail(PRECIS_E_NOMEM, "out of memory dealing %zu cases to %d parts", n, n_parts);
  }
  for (size_t wi = 0; wi < n_workloads; wi++)
    for (size_t ri = 0; ri < n_recipes; ri++) {
      size_t i = wi * n_recipes + ri;
      cases[i] = (dealt_case){precis_deal_cost(workloads[wi], &recipes[ri]), i};
    }
  qsort(cases, n, sizeof *cases, by_cost_then_order);
  for (size_t c = 0; c < n; c++) {
    int lightest = 0;
    for (int p = 1; p < n_parts; p++)
      if (load[p] < load[lightest]) lightest = p;
    load[lightest] = sat_add(load[lightest], cases[c].cost);
    part[cases[c].index] = lightest + 1;
  }
  free(cases);
  free(load);
  return PRECIS_OK;
}

char *precis_deal_describe(int index, int count, size_t cases, const precis_workload_info *const *workloads,
                           size_t n_workloads) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddNumberToObject(root, "index", index);
  cJSON_AddNumberToObject(root, "count", count);
  cJSON_AddStringToObject(root, "deal", "cost-greedy");
  cJSON_AddNumberToObject(root, "cases", (double)cases);
  cJSON *names = cJSON_AddArrayToObject(root, "workloads");
  for (size_t i = 0; names && i < n_workloads; i++) cJSON_AddItemToArray(names, cJSON_CreateString(workloads[i]->name));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  char *copy = precis_strdup(text);
  cJSON_free(text);
  return copy;
}
