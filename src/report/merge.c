#include "merge.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

/* Environment keys that describe the hardware and software a figure was measured with: parts that
 * differ in one of them are merged with a warning (their figures may not be comparable). The
 * host name, the time and the command line differ between parts by nature and are not compared. */
static const char *const MACHINE_KEYS[] = {
    "precis_version", "precis_commit", "backend", "device", "compute_capability", "sm_count", "device_memory_bytes",
    "driver_version", "cuda_driver", "cuda_runtime", "cublas_version", "cublaslt_version", "hdf5_version", "blas",
    "blas_config", "blas_core", "cpu", "cpu_cores", "os", NULL};

typedef struct part_info {
  int index, count;
  cJSON *shard; /* the parsed settings.shard */
} part_info;

static const char *kv_text(const precis_kv_list *list, const char *key, bool *present) {
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].key, key) == 0) {
      *present = true;
      return list->items[i].value ? list->items[i].value : "null";
    }
  *present = false;
  return "(absent)";
}

/* settings.KEY of two parts, shard excluded: NULL when equal, else a message. */
static char *settings_difference(const precis_report *a, const char *an, const precis_report *b, const char *bn) {
  for (int pass = 0; pass < 2; pass++) {
    const precis_report *x = pass ? b : a;
    for (size_t i = 0; i < x->settings.count; i++) {
      const char *key = x->settings.items[i].key;
      if (strcmp(key, "shard") == 0) continue;
      bool pa, pb;
      const char *va = kv_text(&a->settings, key, &pa), *vb = kv_text(&b->settings, key, &pb);
      if (pa != pb || strcmp(va, vb) != 0)
        return precis_asprintf("settings.%s: %s has %s, %s has %s", key, an, va, bn, vb);
    }
  }
  const char *what[] = {"settings.recipes", "settings.criteria"};
  char **lists[2][2] = {{a->recipes, b->recipes}, {a->criteria, b->criteria}};
  size_t counts[2][2] = {{a->n_recipes, b->n_recipes}, {a->n_criteria, b->n_criteria}};
  for (int l = 0; l < 2; l++) {
    bool same = counts[l][0] == counts[l][1];
    for (size_t i = 0; same && i < counts[l][0]; i++) same = strcmp(lists[l][0][i], lists[l][1][i]) == 0;
    if (!same) return precis_asprintf("%s: %s and %s differ", what[l], an, bn);
  }
  return NULL;
}

static bool same_string(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

/* The part a report is, from its settings.shard. */
static precis_status read_part(const precis_report *r, const char *name, part_info *p) {
  const char *text = precis_kv_get(&r->settings, "shard");
  if (!text)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: settings.shard: expected the report of one part of a split run (precis run --shard I/N), "
                       "found none",
                       name);
  p->shard = cJSON_Parse(text);
  const cJSON *index = p->shard ? cJSON_GetObjectItemCaseSensitive(p->shard, "index") : NULL;
  const cJSON *count = p->shard ? cJSON_GetObjectItemCaseSensitive(p->shard, "count") : NULL;
  const cJSON *workloads = p->shard ? cJSON_GetObjectItemCaseSensitive(p->shard, "workloads") : NULL;
  if (!cJSON_IsNumber(index) || !cJSON_IsNumber(count) || !cJSON_IsArray(workloads) || count->valueint < 1 ||
      index->valueint < 1 || index->valueint > count->valueint)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: settings.shard: expected {\"index\": I, \"count\": N, \"workloads\": [...]} with 1 <= I "
                       "<= N, found %s",
                       name, text);
  const cJSON *w;
  cJSON_ArrayForEach(w, workloads) if (!cJSON_IsString(w)) return precis_fail(
      PRECIS_E_INPUT, "%s: settings.shard.workloads: expected workload names, found %s", name, text);
  p->index = index->valueint;
  p->count = count->valueint;
  return PRECIS_OK;
}

/* environment.parts: each part's environment with its part number and source. */
static char *parts_environment(const precis_report *parts, const part_info *info, const char *const *names,
                               size_t n) {
  cJSON *array = cJSON_CreateArray();
  for (size_t i = 0; array && i < n; i++) {
    cJSON *env = cJSON_CreateObject();
    cJSON_AddNumberToObject(env, "part", info[i].index);
    cJSON_AddStringToObject(env, "source", names[i]);
    const precis_kv_list *list = &parts[i].environment;
    for (size_t k = 0; k < list->count; k++) {
      const precis_kv *kv = &list->items[k];
      if (strcmp(kv->key, "parts") == 0) continue;
      cJSON *value = !kv->value ? cJSON_CreateNull() : kv->is_number ? cJSON_Parse(kv->value) : NULL;
      if (!value) value = cJSON_CreateString(kv->value ? kv->value : "");
      cJSON_AddItemToObject(env, kv->key, value);
    }
    cJSON_AddItemToArray(array, env);
  }
  char *text = array ? cJSON_PrintUnformatted(array) : NULL;
  cJSON_Delete(array);
  char *copy = precis_strdup(text);
  cJSON_free(text);
  return copy;
}

precis_status precis_merge_reports(precis_report *parts, const char *const *names, size_t n, precis_report *out,
                                   char **warnings) {
  precis_status st = PRECIS_OK;
  precis_report_init(out);
  *warnings = NULL;
  part_info *info = calloc(n ? n : 1, sizeof *info);
  size_t *order = NULL;
  precis_row **slot = NULL; /* per case: the row found for it */
  size_t *slot_source = NULL;
  size_t n_workloads = 0, n_cases = 0;
  precis_buf warn;
  precis_buf_init(&warn);
  if (!info) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  if (n == 0) {
    st = precis_fail(PRECIS_E_USAGE, "nothing to merge");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    if ((st = read_part(&parts[i], names[i], &info[i])) != PRECIS_OK) goto done;

  /* The same split, every part once. */
  for (size_t i = 1; i < n; i++)
    if (info[i].count != info[0].count) {
      st = precis_fail(PRECIS_E_INPUT, "settings.shard.count: %s is part %d of %d, %s part %d of %d: not one split run",
                       names[0], info[0].index, info[0].count, names[i], info[i].index, info[i].count);
      goto done;
    }
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (info[i].index == info[j].index) {
        st = precis_fail(PRECIS_E_INPUT, "%s and %s are both part %d of %d", names[i], names[j], info[i].index,
                         info[i].count);
        goto done;
      }
  if ((int)n != info[0].count) {
    precis_buf missing;
    precis_buf_init(&missing);
    for (int p = 1; p <= info[0].count; p++) {
      bool found = false;
      for (size_t i = 0; i < n; i++) found = found || info[i].index == p;
      if (!found) precis_buf_appendf(&missing, "%s%d/%d", missing.len ? ", " : "", p, info[0].count);
    }
    char *list = precis_buf_take(&missing);
    st = precis_fail(PRECIS_E_INPUT, "the run was split into %d parts and %zu are given: missing part%s %s",
                     info[0].count, n, strchr(list ? list : "", ',') ? "s" : "", list ? list : "?");
    free(list);
    goto done;
  }

  /* One run: the same dataset, settings and workloads; every part finished. */
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && !same_string(parts[i].dataset_id, parts[0].dataset_id)) {
      st = precis_fail(PRECIS_E_INPUT, "dataset.dataset_id: %s ran on dataset %s, %s on %s: parts of one run share "
                                       "their dataset",
                       names[0], parts[0].dataset_id ? parts[0].dataset_id : "null", names[i],
                       parts[i].dataset_id ? parts[i].dataset_id : "null");
      goto done;
    }
    char *diff = i > 0 ? settings_difference(&parts[0], names[0], &parts[i], names[i]) : NULL;
    if (diff) {
      st = precis_fail(PRECIS_E_INPUT, "%s (parts of one run have the same settings)", diff);
      free(diff);
      goto done;
    }
    if (i > 0 && !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(info[0].shard, "workloads"),
                                cJSON_GetObjectItemCaseSensitive(info[i].shard, "workloads"), true)) {
      st = precis_fail(PRECIS_E_INPUT, "settings.shard.workloads: %s and %s ran different workloads (--workloads)",
                       names[0], names[i]);
      goto done;
    }
    if (!parts[i].complete) {
      st = precis_fail(PRECIS_E_INPUT,
                       "%s: part %d of %d is incomplete (interrupted): finish it with precis run ... --shard %d/%d "
                       "--resume DIR first",
                       names[i], info[i].index, info[i].count, info[i].index, info[i].count);
      goto done;
    }
  }

  /* Cases in dataset order: workloads as the parts list them, recipes in settings order. */
  const cJSON *wl = cJSON_GetObjectItemCaseSensitive(info[0].shard, "workloads");
  n_workloads = (size_t)cJSON_GetArraySize(wl);
  n_cases = n_workloads * parts[0].n_recipes;
  slot = calloc(n_cases ? n_cases : 1, sizeof *slot);
  slot_source = calloc(n_cases ? n_cases : 1, sizeof *slot_source);
  if (!slot || !slot_source) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t r = 0; r < parts[i].n_rows; r++) {
      precis_row *row = &parts[i].rows[r];
      size_t wi = 0, ri = 0;
      const cJSON *name;
      bool found = false;
      cJSON_ArrayForEach(name, wl) {
        if (strcmp(name->valuestring, row->workload) == 0) {
          found = true;
          break;
        }
        wi++;
      }
      while (ri < parts[i].n_recipes && strcmp(parts[i].recipes[ri], row->recipe) != 0) ri++;
      if (!found || ri == parts[i].n_recipes) {
        st = precis_fail(PRECIS_E_INPUT, "%s: rows[%zu]: workload \"%s\", recipe \"%s\" is not a case of the run "
                                         "(settings.shard.workloads, settings.recipes)",
                         names[i], r, row->workload, row->recipe);
        goto done;
      }
      size_t c = wi * parts[0].n_recipes + ri;
      if (slot[c]) {
        st = precis_fail(PRECIS_E_INPUT, "workload \"%s\", recipe \"%s\" is in %s and in %s: a case is run by one part",
                         row->workload, row->recipe, names[slot_source[c]], names[i]);
        goto done;
      }
      slot[c] = row;
      slot_source[c] = i;
    }
  size_t missing = 0;
  precis_buf which;
  precis_buf_init(&which);
  for (size_t c = 0; c < n_cases; c++)
    if (!slot[c]) {
      if (missing++ < 5)
        precis_buf_appendf(&which, "%s%s/%s", which.len ? ", " : "",
                           cJSON_GetArrayItem(wl, (int)(c / parts[0].n_recipes))->valuestring,
                           parts[0].recipes[c % parts[0].n_recipes]);
    }
  if (missing) {
    char *list = precis_buf_take(&which);
    st = precis_fail(PRECIS_E_INPUT, "%zu case%s of the run %s in no part: %s%s", missing, missing == 1 ? "" : "s",
                     missing == 1 ? "is" : "are", list ? list : "", missing > 5 ? ", ..." : "");
    free(list);
    goto done;
  }
  precis_buf_free(&which);

  /* Hardware and software: merged, but said. */
  for (const char *const *key = MACHINE_KEYS; *key; key++) {
    bool differs = false;
    for (size_t i = 1; i < n; i++) {
      bool p0, pi;
      const char *v0 = kv_text(&parts[0].environment, *key, &p0), *vi = kv_text(&parts[i].environment, *key, &pi);
      differs = differs || strcmp(v0, vi) != 0;
    }
    if (!differs) continue;
    precis_buf_appendf(&warn, "environment.%s differs between the parts:", *key);
    for (size_t i = 0; i < n; i++) {
      bool p;
      precis_buf_appendf(&warn, " part %d %s", info[i].index, kv_text(&parts[i].environment, *key, &p));
      precis_buf_append(&warn, i + 1 < n ? ";" : "\n");
    }
  }

  /* The report one run would have written: part 1's header, the settings without the part. */
  size_t first = 0;
  for (size_t i = 0; i < n; i++)
    if (info[i].index == 1) first = i;
  precis_report *base = &parts[first];
  out->complete = true;
  out->tool_version = precis_strdup(base->tool_version);
  out->tool_commit = precis_strdup(base->tool_commit);
  out->dataset_path = precis_strdup(base->dataset_path);
  out->dataset_id = precis_strdup(base->dataset_id);
  out->dataset_label = precis_strdup(base->dataset_label);
  for (size_t k = 0; k < base->environment.count; k++) {
    const precis_kv *kv = &base->environment.items[k];
    if (strcmp(kv->key, "parts") == 0) continue;
    precis_kv_set(&out->environment, kv->key, kv->value);
    out->environment.items[out->environment.count - 1].is_number = kv->is_number;
  }
  for (size_t k = 0; k < base->settings.count; k++) {
    const precis_kv *kv = &base->settings.items[k];
    if (strcmp(kv->key, "shard") == 0) continue;
    precis_kv_set(&out->settings, kv->key, kv->value);
    out->settings.items[out->settings.count - 1].is_number = kv->is_number;
  }
  /* Each part's environment, in part order; a row's part number finds its own. */
  order = calloc(n, sizeof *order);
  if (!order) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) order[info[i].index - 1] = i;
  {
    precis_report *sorted = malloc(n * sizeof *sorted);
    part_info *sorted_info = malloc(n * sizeof *sorted_info);
    const char **sorted_names = malloc(n * sizeof *sorted_names);
    char *envs = NULL;
    if (sorted && sorted_info && sorted_names) {
      for (size_t i = 0; i < n; i++) {
        sorted[i] = parts[order[i]];
        sorted_info[i] = info[order[i]];
        sorted_names[i] = names[order[i]];
      }
      envs = parts_environment(sorted, sorted_info, sorted_names, n);
    }
    free(sorted);
    free(sorted_info);
    free(sorted_names);
    if (!envs) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto done;
    }
    precis_kv_set_json(&out->environment, "parts", envs);
    free(envs);
  }
  precis_kv_set_int(&out->environment, "merged_parts", (long long)n);
  out->n_recipes = base->n_recipes;
  out->recipes = calloc(base->n_recipes ? base->n_recipes : 1, sizeof *out->recipes);
  out->n_criteria = base->n_criteria;
  out->criteria = calloc(base->n_criteria ? base->n_criteria : 1, sizeof *out->criteria);
  if (!out->recipes || !out->criteria) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < base->n_recipes; i++) out->recipes[i] = precis_strdup(base->recipes[i]);
  for (size_t i = 0; i < base->n_criteria; i++) out->criteria[i] = precis_strdup(base->criteria[i]);
  for (size_t c = 0; c < n_cases; c++)
    if ((st = precis_report_add_row(out, slot[c])) != PRECIS_OK) goto done;

done:
  *warnings = warn.len ? precis_buf_take(&warn) : NULL;
  precis_buf_free(&warn);
  for (size_t i = 0; i < n; i++) cJSON_Delete(info[i].shard);
  free(info);
  free(order);
  free(slot);
  free(slot_source);
  if (st != PRECIS_OK) precis_report_free(out);
  return st;
}
