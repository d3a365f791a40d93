/* precis recipes: the presets (or the recipes of --recipes), their canonical specs, and what each
 * backend does with them: the cpu backend's answer from the backend itself, the cuda backend's from
 * the route table for a compute capability (--cc, default 90), without a GPU. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels/cuda_api.h"
#include "eval/gemm_plan.h"
#include "eval/split_plan.h"

static void usage(FILE *out) {
  fprintf(out, "usage: precis recipes [--recipes LIST] [--cc 90] [--json]\n\n"
               "Lists the presets (or the recipes of LIST) with their canonical specs and, per backend, whether\n"
               "the recipe runs natively, emulated, or not at all, and why. The cuda answer is planned for the\n"
               "compute capability --cc (default 90) and needs no GPU; `precis info` asks a real device.\n\n"
               "options:\n"
               "  --recipes LIST        " PRECIS_CLI_RECIPES_HELP
               "  --cc CC               compute capability to plan for: 90, 8.9 or sm_80 (default 90)\n"
               "  --json                machine-readable output\n"
               "\nspec grammar (DESIGN §11):\n"
               "  FIELD   a=OPERAND b=OPERAND acc=fp64|fp32|fp32fast|fp16|s32 out=FMT scale=dynamic|absmax|\n"
               "          percentile=<P>|mse smooth=<0..1>|auto|none split=none|tf32x3|bf16x3|bf16x6|bf16x9|int8x<N>\n"
               "  OPERAND FMT[@GRAN[:sym|sym-half|asym]]  FMT fp64 fp32 tf32 fp16 bf16 e4m3 e5m2 e2m1 s8 s4 u4\n"
               "  GRAN    tensor row col k<G> <R>x<C> mx mx-rceil nv\n");
}

typedef struct backend_answer {
  const char *status; /* "native", "emulated", "unsupported" */
  char detail[320];   /* the route, the emulation, or why not */
} backend_answer;

static void cpu_answer(const precis_recipe *r, backend_answer *a) {
  const precis_backend *cpu = precis_backend_cpu();
  if (cpu->supports(NULL, &r->spec, a->detail, sizeof a->detail)) {
    a->status = "emulated";
    snprintf(a->detail, sizeof a->detail, "cpu-emulation: operands rounded or quantized exactly as the GPU path does");
  } else {
    a->status = "unsupported";
  }
}

static void cuda_answer(const precis_recipe *r, int major, int minor, backend_answer *a) {
  if (!precis_cuda_spec_supported(&r->spec, major, minor, a->detail, sizeof a->detail)) {
    a->status = "unsupported";
    return;
  }
  const precis_lt_route *route = precis_lt_route_find(&r->spec, NULL, 0);
  precis_spec sub;
  char how[256];
  if (!route && precis_split_term_spec(&r->spec, &sub, NULL, 0)) { /* issue 19: one GEMM per partial product */
    route = precis_lt_route_find(&sub, NULL, 0);
    precis_split_plan plan;
    int products = precis_split_plan_make(&r->spec, 64, 64, 64, 1, false, 0, &plan) == PRECIS_OK ? plan.products : 0;
    precis_clear_error();
    a->status = "native";
    snprintf(a->detail, sizeof a->detail, "%d cuBLASLt GEMMs (one per partial product) of route %s (sm_%d+)", products,
             route->name, route->min_cc);
    return;
  }
  if (precis_lt_emulated_on(&r->spec, major, minor, &sub, how, sizeof how)) {
    route = precis_lt_route_find(&sub, NULL, 0);
    a->status = "emulated";
    snprintf(a->detail, sizeof a->detail, "%s; cuBLASLt route %s (sm_%d+)", how, route->name, route->min_cc);
    return;
  }
  a->status = "native";
  snprintf(a->detail, sizeof a->detail, "cuBLASLt route %s (sm_%d+)", route->name, route->min_cc);
}

static void add_answer(cJSON *backends, const char *name, const backend_answer *a) {
  cJSON *o = cJSON_AddObjectToObject(backends, name);
  cJSON_AddStringToObject(o, "status", a->status);
  cJSON_AddStringToObject(o, strcmp(a->status, "unsupported") == 0 ? "reason" : "how", a->detail);
}

int precis_cmd_recipes(int argc, char **argv) {
  precis_cli_plan_args args;
  int rc = precis_cli_parse_plan_args("recipes", argc, argv, false, usage, &args);
  if (rc >= 0) return rc;
  const precis_recipe_list recipes = args.recipes;
  int major = args.cc_major, minor = args.cc_minor;
  bool json = args.json;
  rc = 2;
  if (args.first_operand < argc) {
    fprintf(stderr, "precis recipes: unexpected argument \"%s\"\n", argv[args.first_operand]);
    goto done;
  }
  char cuda_name[32];
  snprintf(cuda_name, sizeof cuda_name, "cuda sm_%d%d", major, minor);
  cJSON *root = json ? cJSON_CreateObject() : NULL, *list = NULL;
  if (root) {
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", major, minor);
    cJSON_AddStringToObject(root, "compute_capability", cc);
    list = cJSON_AddArrayToObject(root, "recipes");
  }
  for (size_t i = 0; i < recipes.count; i++) {
    const precis_recipe *r = &recipes.items[i];
    backend_answer cpu, cuda;
    cpu_answer(r, &cpu);
    cuda_answer(r, major, minor, &cuda);
    if (root) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", r->name);
      cJSON_AddStringToObject(o, "spec", r->canonical);
      cJSON_AddStringToObject(o, "description", r->description);
      cJSON_AddBoolToObject(o, "preset", r->preset != NULL);
      cJSON_AddBoolToObject(o, "baseline", r->preset && r->preset->baseline);
      cJSON *backends = cJSON_AddObjectToObject(o, "backends");
      add_answer(backends, "cpu", &cpu);
      add_answer(backends, "cuda", &cuda);
      cJSON_AddItemToArray(list, o);
    } else {
      printf("%s%s\n  spec  %s\n  what  %s\n", r->name, r->preset && r->preset->baseline ? " (baseline)" : "",
             r->canonical, r->description);
      printf("  %-12s %s: %s\n  %-12s %s: %s\n", "cpu", cpu.status, cpu.detail, cuda_name, cuda.status, cuda.detail);
    }
  }
  rc = 0;
  if (root) {
    char *text = cJSON_Print(root);
    if (!text || printf("%s\n", text) < 0) rc = 1;
    free(text);
    cJSON_Delete(root);
  }
done:
  precis_recipe_list_free(&args.recipes);
  return rc;
}
