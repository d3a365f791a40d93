/* precis recipes: the presets (or the recipes of --recipes), their canonical specs, and what each
 * backend does with them: the cpu backend's answer from the backend itself, the cuda backend's from
 * the route table for a compute capability (--cc, default 90), without a GPU. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels/cuda_api.h"
#include "eval/gemm_plan.h"
#include "eval/split_plan.h"
#include "report/deploy_target.h"

static void usage(FILE *out) {
  fprintf(out, "usage: precis recipes [--recipes LIST] [--cc 90] [--json] [--deploy vllm|trtllm|none [--target sm_XX]]\n\n"
               "Lists the presets (or the recipes of LIST) with their canonical specs and, per backend, whether\n"
               "the recipe runs natively, emulated, or not at all, and why. The cuda answer is planned for the\n"
               "compute capability --cc (default 90) and needs no GPU; `precis info` asks a real device.\n\n"
               "options:\n"
               "  --recipes LIST        " PRECIS_CLI_RECIPES_HELP
               "  --cc CC               compute capability to plan for: 90, 8.9 or sm_80 (default 90)\n"
               "  --json                machine-readable output\n"
               "  --deploy ENGINE       also say, per recipe, whether the serving engine runs it on --target's\n"
               "                        architecture (default sm_90), as which scheme, and the input widths it\n"
               "                        needs; lists the engine's schemes per architecture (docs/deploy.md)\n"
               "\nspec grammar (DESIGN §11):\n"
               "  FIELD   a=OPERAND b=OPERAND acc=fp64|fp32|fp32fast|fp16|s32 out=FMT scale=dynamic|absmax|\n"
               "          percentile=<P>|mse smooth=<0..1>|auto|none split=none|tf32x3|bf16x3|bf16x6|bf16x9|int8x<N>\n"
               "  OPERAND FMT[@GRAN[:sym|sym-half|asym]]  FMT fp64 fp32 tf32 fp16 bf16 e4m3 e5m2 e2m1 s8 s4 u4 s3 s2\n"
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

/* The engine's answer for a recipe: the scheme it runs it as on arch, or why not, and the input
 * widths it needs. */
static void deploy_answer(precis_deploy_engine engine, precis_target arch, const precis_recipe *r, char *buf, size_t len,
                          bool *deployable, long long *k_multiple) {
  precis_deploy_verdict v;
  *k_multiple = precis_deploy_k_multiple(engine, &r->spec);
  /* A width every rule divides: the answer is about the scheme and the architecture. */
  long long k = *k_multiple * 128, n = 128 * 3;
  precis_deploy_check(engine, arch, &r->spec, k, n, &v);
  *deployable = v.deployable;
  if (!v.deployable) snprintf(buf, len, "%s", v.why);
  else if (!v.scheme) snprintf(buf, len, "unquantized: the checkpoint's dtype");
  else snprintf(buf, len, "%s (%s)%s%s; k a multiple of %lld", v.scheme->name, v.scheme->checkpoint, v.exact ? "" : "; not exact: ",
                v.exact ? "" : v.why, *k_multiple);
}

int precis_cmd_recipes(int argc, char **argv) {
  precis_cli_plan_args args;
  /* --deploy is this command's own; the shared parser sees the rest. */
  precis_deploy_engine engine = PRECIS_DEPLOY_ENGINE_COUNT;
  char **rest = malloc((size_t)(argc + 1) * sizeof *rest);
  if (!rest) return 1;
  int n_rest = 0;
  bool help = precis_cli_wants_help(argc, argv);
  for (int i = 0; i < argc; i++) {
    bool joined = i > 0 && strncmp(argv[i], "--deploy=", 9) == 0;
    if (i > 0 && (joined || strcmp(argv[i], "--deploy") == 0)) {
      const char *value = joined ? argv[i] + 9 : i + 1 < argc ? argv[i + 1] : NULL;
      if (!joined) i++;
      if ((!value || !precis_deploy_engine_parse(value, &engine)) && !help) {
        fprintf(stderr, "precis recipes: --deploy: expected vllm, trtllm or none, found \"%s\"\n", value ? value : "");
        free(rest);
        return 2;
      }
      continue;
    }
    rest[n_rest++] = argv[i];
  }
  rest[n_rest] = NULL;
  int rc = precis_cli_parse_plan_args("recipes", n_rest, rest, false, usage, &args);
  argc = n_rest;
  argv = rest;
  if (rc >= 0) {
    free(rest);
    return rc;
  }
  precis_target arch = args.target != PRECIS_TARGET_DEFAULT ? args.target : PRECIS_DEPLOY_ARCH_DEFAULT;
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
  const precis_deploy_scheme *schemes = NULL;
  size_t n_schemes = engine < PRECIS_DEPLOY_ENGINE_COUNT ? precis_deploy_schemes(engine, &schemes) : 0;
  if (engine < PRECIS_DEPLOY_ENGINE_COUNT && root) {
    cJSON *d = cJSON_AddObjectToObject(root, "deploy");
    cJSON_AddStringToObject(d, "engine", precis_deploy_engine_name(engine));
    cJSON_AddStringToObject(d, "description", precis_deploy_engine_describe(engine));
    cJSON_AddStringToObject(d, "architecture", precis_target_name(arch));
    cJSON *table = cJSON_AddArrayToObject(d, "schemes");
    for (size_t i = 0; i < n_schemes; i++) {
      char archs[96];
      precis_deploy_archs_describe(schemes[i].archs, archs, sizeof archs);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "scheme", schemes[i].name);
      cJSON_AddStringToObject(o, "checkpoint", schemes[i].checkpoint);
      cJSON_AddStringToObject(o, "architectures", archs);
      cJSON_AddStringToObject(o, "kernel", schemes[i].kernel);
      cJSON_AddStringToObject(o, "source", schemes[i].source);
      cJSON_AddItemToArray(table, o);
    }
  } else if (engine < PRECIS_DEPLOY_ENGINE_COUNT) {
    printf("deploy target %s; architecture %s\n", precis_deploy_engine_describe(engine), precis_target_name(arch));
    for (size_t i = 0; i < n_schemes; i++) {
      char archs[96];
      precis_deploy_archs_describe(schemes[i].archs, archs, sizeof archs);
      printf("  %-28s %-22s on %s: %s\n", schemes[i].name, schemes[i].checkpoint, archs, schemes[i].kernel);
    }
    printf("\n");
  }
  for (size_t i = 0; i < recipes.count; i++) {
    const precis_recipe *r = &recipes.items[i];
    backend_answer cpu, cuda;
    cpu_answer(r, &cpu);
    cuda_answer(r, major, minor, &cuda);
    char weight_bits[200];
    precis_operand_weight_bits_describe(&r->spec.b, weight_bits, sizeof weight_bits);
    if (root) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", r->name);
      cJSON_AddStringToObject(o, "spec", r->canonical);
      cJSON_AddStringToObject(o, "description", r->description);
      cJSON_AddBoolToObject(o, "preset", r->preset != NULL);
      cJSON_AddBoolToObject(o, "baseline", r->preset && r->preset->baseline);
      precis_weight_bits wb;
      precis_operand_weight_bits(&r->spec.b, &wb);
      cJSON *bits = cJSON_AddObjectToObject(o, "weight_bits");
      cJSON_AddNumberToObject(bits, "element", wb.element_bits);
      cJSON_AddNumberToObject(bits, "scale", wb.scale_bits);
      cJSON_AddNumberToObject(bits, "zero_point", wb.zero_point_bits);
      cJSON_AddStringToObject(bits, "scales_per", wb.scale_bits == 0 ? "none"
                                                  : wb.group > 0     ? "k-group"
                                                  : wb.group == 0    ? "output channel"
                                                  : wb.group == -2   ? "block"
                                                                     : "tensor");
      if (wb.group > 0) cJSON_AddNumberToObject(bits, "group", (double)wb.group);
      if (wb.group == -2) {
        cJSON_AddNumberToObject(bits, "block_rows", wb.block_rows);
        cJSON_AddNumberToObject(bits, "block_cols", wb.block_cols);
      }
      cJSON_AddNumberToObject(bits, "tensor_scale", wb.tensor_scale_bits);
      double per_weight = precis_operand_weight_bits_per_weight(&r->spec.b);
      if (isnan(per_weight)) cJSON_AddNullToObject(bits, "per_weight");
      else cJSON_AddNumberToObject(bits, "per_weight", per_weight);
      cJSON_AddStringToObject(bits, "description", weight_bits);
      cJSON *backends = cJSON_AddObjectToObject(o, "backends");
      add_answer(backends, "cpu", &cpu);
      add_answer(backends, "cuda", &cuda);
      if (engine < PRECIS_DEPLOY_ENGINE_COUNT) {
        char how[400];
        bool ok = false;
        long long k_multiple = 1;
        deploy_answer(engine, arch, r, how, sizeof how, &ok, &k_multiple);
        cJSON *d = cJSON_AddObjectToObject(o, "deploy");
        cJSON_AddBoolToObject(d, "deployable", ok);
        cJSON_AddStringToObject(d, ok ? "how" : "reason", how);
        cJSON_AddNumberToObject(d, "k_multiple", (double)k_multiple);
      }
      cJSON_AddItemToArray(list, o);
    } else {
      printf("%s%s\n  spec  %s\n  what  %s\n  bits  weights: %s\n", r->name,
             r->preset && r->preset->baseline ? " (baseline)" : "", r->canonical, r->description, weight_bits);
      printf("  %-12s %s: %s\n  %-12s %s: %s\n", "cpu", cpu.status, cpu.detail, cuda_name, cuda.status, cuda.detail);
      if (engine < PRECIS_DEPLOY_ENGINE_COUNT) {
        char how[400];
        bool ok = false;
        long long k_multiple = 1;
        deploy_answer(engine, arch, r, how, sizeof how, &ok, &k_multiple);
        printf("  %-12s %s: %s\n", precis_deploy_engine_name(engine), ok ? "deploys" : "not deployable", how);
      }
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
  free(rest);
  return rc;
}
