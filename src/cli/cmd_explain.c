/* precis explain (DESIGN §14): for each (workload, recipe) of a dataset, the cuBLASLt call the cuda
 * backend would make, from the same plan code it runs (src/eval/gemm_plan.c), for a compute
 * capability chosen with --cc; or why the recipe is unsupported there. Needs no GPU: it reads the
 * dataset's shapes only. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels/cuda_api.h"
#include "data/dataset.h"
#include "data/default_dataset.h"
#include "eval/gemm_plan.h"
#include "eval/split_plan.h"
#include "eval/target_plan.h"

static void usage(FILE *out) {
  fprintf(out, "usage: precis explain [FILE.h5] [--recipes LIST] [--workloads LIST] [--cc 90 | --target sm_100]\n"
               "                      [--cublaslt-version 13.1.0] [--json]\n\n"
               "Prints, for each workload and recipe, the cuBLASLt call the cuda backend would make: A/B/C/D\n"
               "types, compute and scale types, transposes, lda/ldb/ldc, padding, scale modes and pointers,\n"
               "batch handling, conversion and read-back steps, the split-K reduction scheme mask, device bytes,\n"
               "workspace and whether the operands fit the L2 stated for --cc (l2_resident); or why the recipe\n"
               "is unsupported for that device. Planned on this machine, no GPU needed. Without FILE.h5 it\n"
               "uses the built-in default dataset.\n\n"
               "options:\n"
               "  --recipes LIST        " PRECIS_CLI_RECIPES_HELP
               "  --workloads LIST      only these workloads (comma-separated)\n"
               "  --cc CC               compute capability to plan for: 90, 8.9 or sm_80 (default 90)\n"
               "  --target ARCH         sm_80, sm_89, sm_90, sm_100 or sm_120: plan for that architecture (its\n"
               "                        compute capability) and print, per recipe, whether it runs native,\n"
               "                        emulated or is refused there, and the accumulator its tensor cores use\n"
               "                        (the table of docs/formats.md, \"Target architectures\")\n"
               "  --cublaslt-version V  the cuBLASLt to plan for, 13.1.0 or 130100 (default: the one this\n"
               "                        precis is linked with; none without CUDA). Below 13.2 int8 GEMMs\n"
               "                        with a batch or more than 65536 rows are split into several calls\n"
               "  --json                machine-readable output\n");
}

static bool selected(const char *list, const char *name) {
  if (!list) return true;
  size_t len = strlen(name);
  for (const char *p = list; p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && strncmp(p, name, len) == 0) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* The L2 view of a case planned for --cc: the L2 NVIDIA states for that capability's part. */
static void describe_stated_l2(long long operand_bytes, int major, int minor, precis_kv_list *plan_kv) {
  const char *part = NULL;
  long long l2 = precis_cc_stated_l2_bytes(major, minor, &part);
  char source[160];
  if (part) snprintf(source, sizeof source, "stated for sm_%d%d (%s)", major, minor, part);
  else snprintf(source, sizeof source, "no stated L2 for sm_%d%d (no single part)", major, minor);
  precis_plan_describe_l2(operand_bytes, l2, source, plan_kv);
}

/* One case: the plan as key/value pairs, or the reason it has none. */
static bool explain_case(const precis_recipe *r, const precis_workload_info *w, int major, int minor, int lt_version,
                         precis_kv_list *plan_kv, char *reason, size_t len) {
  if (!precis_cuda_spec_supported(&r->spec, major, minor, reason, len)) return false;
  /* Splits (issue 19): one GEMM per partial product. */
  precis_spec sub;
  if (precis_split_term_spec(&r->spec, &sub, NULL, 0)) {
    precis_split_plan split;
    if (precis_split_plan_make(&r->spec, w->m, w->n, w->k, w->batch, w->b_batched, lt_version, &split) != PRECIS_OK) {
      snprintf(reason, len, "%s", precis_last_error());
      return false;
    }
    precis_split_plan_describe(&split, plan_kv);
    describe_stated_l2(precis_split_plan_operand_bytes(&split), major, minor, plan_kv);
    return true;
  }
  /* Specs emulated by host dequantization plan the GEMM that then runs. */
  char how[256] = "";
  const precis_spec *spec = &r->spec;
  if (precis_lt_emulated_on(spec, major, minor, &sub, how, sizeof how)) spec = &sub;
  precis_gemm_plan plan;
  if (precis_gemm_plan_make_for(spec, w->m, w->n, w->k, w->batch, w->b_batched, lt_version, &plan) != PRECIS_OK) {
    snprintf(reason, len, "%s", precis_last_error());
    return false;
  }
  if (how[0]) precis_kv_set(plan_kv, "emulation", how);
  precis_gemm_plan_describe(&plan, plan_kv);
  describe_stated_l2(precis_gemm_plan_operand_bytes(&plan), major, minor, plan_kv);
  return true;
}

static void kv_to_json(cJSON *obj, const precis_kv_list *kv) {
  for (size_t i = 0; i < kv->count; i++) {
    const precis_kv *item = &kv->items[i];
    if (!item->value) cJSON_AddNullToObject(obj, item->key);
    else if (item->is_number) cJSON_AddNumberToObject(obj, item->key, strtod(item->value, NULL));
    else cJSON_AddStringToObject(obj, item->key, item->value);
  }
}

int precis_cmd_explain(int argc, char **argv) {
  precis_cli_plan_args args;
  int rc = precis_cli_parse_plan_args("explain", argc, argv, true, usage, &args);
  if (rc >= 0) return rc;
  const precis_recipe_list recipes = args.recipes;
  const char *workloads = args.workloads;
  int major = args.cc_major, minor = args.cc_minor, first = args.first_operand;
  bool json = args.json;
  /* The plan depends on the cuBLASLt version (its 13.1 int8 limits): the one given, else the one
   * linked (cublasLtGetVersion needs no device), else unknown (0: no version workaround). */
  int lt_version = args.lt_version;
  if (!args.lt_version_given) {
    precis_cuda_inventory inv;
    if (precis_cuda_inventory_get(&inv) == PRECIS_OK) lt_version = (int)inv.cublaslt_version;
    precis_cuda_inventory_free(&inv);
    precis_clear_error();
  }
  char lt_text[32] = "unknown";
  if (lt_version > 0)
    snprintf(lt_text, sizeof lt_text, "%d.%d.%d", lt_version / 10000, lt_version / 100 % 100, lt_version % 100);
  precis_dataset *ds = NULL;
  char *path = NULL;
  cJSON *root = NULL;
  rc = 2;
  if (first < argc - 1) {
    fprintf(stderr, "precis explain: expected at most one dataset, got \"%s\" and \"%s\"\n", argv[first],
            argv[first + 1]);
    goto done;
  }
  precis_status st = first < argc ? ((path = precis_strdup(argv[first])) ? PRECIS_OK : PRECIS_E_NOMEM)
                                   : precis_default_dataset_path(&path);
  if (st == PRECIS_OK) st = precis_dataset_open(path, &ds);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("explain", st);
    goto done;
  }
  for (const char *p = workloads; p;) { /* every name given must exist */
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    bool found = false;
    for (size_t wi = 0; wi < ds->n_workloads && !found; wi++)
      found = strlen(ds->workloads[wi].name) == n && strncmp(ds->workloads[wi].name, p, n) == 0;
    if (!found) {
      fprintf(stderr, "precis explain: %s: no workload named \"%.*s\"\n", path, (int)n, p);
      goto done;
    }
    p = end ? end + 1 : NULL;
  }
  cJSON *cases = NULL;
  if (json) {
    root = cJSON_CreateObject();
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", major, minor);
    cJSON_AddStringToObject(root, "compute_capability", cc);
    cJSON_AddStringToObject(root, "cublaslt_version", lt_text);
    cJSON_AddStringToObject(root, "dataset", path);
    const char *content_id = NULL;
    if ((st = precis_dataset_content_id(ds, &content_id)) != PRECIS_OK) {
      rc = precis_cli_report_error("explain", st);
      goto done;
    }
    cJSON_AddStringToObject(root, "dataset_id", content_id);
    cases = cJSON_AddArrayToObject(root, "cases");
  } else {
    printf("cuBLASLt calls the cuda backend would make on sm_%d%d with cuBLASLt %s (planned without a GPU), dataset %s\n",
           major, minor, lt_text, path);
  }
  for (size_t wi = 0; wi < ds->n_workloads; wi++) {
    const precis_workload_info *w = &ds->workloads[wi];
    if (!selected(workloads, w->name)) continue;
    if (!json)
      printf("\n%s: m=%lld n=%lld k=%lld batch=%lld%s\n", w->name, (long long)w->m, (long long)w->n, (long long)w->k,
             (long long)w->batch, w->b_batched ? " (b per batch element)" : "");
    for (size_t ri = 0; ri < recipes.count; ri++) {
      const precis_recipe *r = &recipes.items[ri];
      precis_kv_list kv = {0};
      char reason[512] = "";
      bool planned = explain_case(r, w, major, minor, lt_version, &kv, reason, sizeof reason);
      if (args.target != PRECIS_TARGET_DEFAULT) {
        precis_target_plan tp;
        precis_target_plan_of(&r->spec, args.target, &tp);
        precis_target_plan_details(&tp, &kv);
      }
      precis_spec sub;
      const char *status = !planned ? "unsupported"
                           : precis_lt_emulated_on(&r->spec, major, minor, &sub, NULL, 0)
                               ? "emulated"
                               : "native";
      if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "workload", w->name);
        cJSON_AddNumberToObject(o, "m", (double)w->m);
        cJSON_AddNumberToObject(o, "n", (double)w->n);
        cJSON_AddNumberToObject(o, "k", (double)w->k);
        cJSON_AddNumberToObject(o, "batch", (double)w->batch);
        cJSON_AddBoolToObject(o, "b_batched", w->b_batched);
        cJSON_AddStringToObject(o, "recipe", r->name);
        cJSON_AddStringToObject(o, "spec", r->canonical);
        cJSON_AddStringToObject(o, "status", status);
        if (planned) kv_to_json(cJSON_AddObjectToObject(o, "plan"), &kv);
        else cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddItemToArray(cases, o);
      } else {
        if (r->preset) printf("  %s (%s): %s\n", r->name, r->canonical, status);
        else printf("  %s: %s\n", r->canonical, status);
        if (!planned) printf("    reason: %s\n", reason);
        for (size_t i = 0; i < kv.count; i++)
          printf("    %-22s %s\n", kv.items[i].key, kv.items[i].value ? kv.items[i].value : "null");
      }
      precis_kv_free(&kv);
    }
  }
  rc = 0;
  if (root) {
    char *text = cJSON_Print(root);
    if (!text || printf("%s\n", text) < 0) rc = 1;
    free(text);
  }
done:
  cJSON_Delete(root);
  if (ds) precis_dataset_close(ds);
  free(path);
  precis_recipe_list_free(&args.recipes);
  return rc;
}
