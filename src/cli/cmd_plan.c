/* precis plan REPORT.json: a per-layer precision plan (plan.h states the rule). Exit 0 with a
 * plan, 3 when no plan meets the criteria (the blocking layers are named), 2 on bad input. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report/plan.h"
#include "report/report.h"

static const char usage_text[] =
    "usage: precis plan REPORT.json [--require EXPR]... [--objective fisher|taylor|rel_fro] [--budget memory=BYTES|bits=B|latency=MS]\n"
    "                   [--cost memory|bits|latency] [--exclusions-for RECIPE] [--target ARCH]\n"
    "                   [--serve batch=B,context=T[,kv=FMT]] [--kv-candidates FILE|LIST --objective-map MAP]\n"
    "                   [--deploy vllm|trtllm|none]\n"
    "                   [--force] [--allow-emulated-latency] [--validate (python -m precis plan)] -o DIR\n"
    "\n"
    "A precision per layer (each workload of the report is a layer: precis import --model names them after\n"
    "the model's modules), with the sensitivity of each layer and exclusion lists for quantizers.\n"
    "\n"
    "  --require EXPR    criterion on a metric's worst value over samples (repeatable), e.g. rel_fro<=1e-2;\n"
    "                    without it, each row's recorded verdict\n"
    "  --objective O     what the plan minimizes, summed over layers: fisher (the loss change the rows predict\n"
    "                    from the dataset's gradients, Fisher term), taylor (its first-order term, in magnitude) or\n"
    "                    rel_fro (worst over samples); default fisher when the report has loss_change, else rel_fro\n"
    "  --budget B        a global budget; the plan minimizes the objective's sum within it, exactly:\n"
    "                    memory=BYTES  the resident weights (+ scales) summed over layers plus the largest\n"
    "                                  transient of one layer (input, output, workspace) (suffixes K, M, G, KiB, MiB, GiB)\n"
    "                    bits=B        average effective bits per weight over the layers (elements + scales + zero\n"
    "                                  points, as precis recipes states per recipe)\n"
    "                    latency=MS    sum of the median latency per call\n"
    "                    without a budget: per layer, the cheapest recipe that meets the criteria\n"
    "  --cost C          the cost dimension without a budget (default memory)\n"
    "  --exclusions-for RECIPE\n"
    "                    the recipe the exclusion lists are relative to (default: the cheapest evaluated);\n"
    "                    the older form --target RECIPE is still read so, with a note\n"
    "  --moe-active K/E  a token reads top_k=K of E experts: a bits budget weighs each expert layer (a name\n"
    "                    containing \".experts.\") by K/E in its cost and in the average's weights\n"
    "  --serve S         prints the serving estimate of the plan at batch=B, context=T tokens: weights + KV cache\n"
    "                    (2*T*B*kv_heads*head_dim per layer in kv=FMT, default bf16, from the model's config.json\n"
    "                    recorded by import --model) + the peak transient + the cuBLASLt workspace; an estimate\n"
    "  --kv-candidates C the KV cache format as a decision (with --serve batch=B,context=T and --budget memory=):\n"
    "                    C is verify --kv-sweep's kv-sweep.json or a list K[,V]=KL;... of formats with their measured\n"
    "                    KL; the budget then covers the weights + the KV cache, and the plan is the pair (weights\n"
    "                    plan, KV format) of least estimated KL = map(weights objective) + KL(KV) (docs/kv-cache.md)\n"
    "  --objective-map M how the weights' objective becomes KL for --kv-candidates: the plan.json of python -m\n"
    "                    precis plan --validate (its fitted log10 KL = a + b log10 objective), a=A,b=B, or identity\n"
    "  --target ARCH     sm_80, sm_89, sm_90, sm_100 or sm_120: plan from the rows recorded for that\n"
    "                    architecture only (rows from before targets count as sm_90), as run --target\n"
    "  --deploy E        the serving engine the plan must deploy on (docs/deploy.md): vllm (default; a\n"
    "                    compressed-tensors checkpoint), trtllm (TensorRT-LLM, a ModelOpt checkpoint) or none\n"
    "                    (exploration: every evaluated recipe). With an engine, recipes it cannot run on a layer's\n"
    "                    shape or on the architecture (--target sm_XX, default sm_90) are dropped (plan.md says\n"
    "                    which, why, and the nearest that deploys), the layers it fuses into one GEMM (q/k/v,\n"
    "                    gate/up, a MoE block's experts) get one recipe, and a tied lm_head is charged its\n"
    "                    quantized copy (unquantized it is the embedding table: 0); precis recipes --deploy E lists it\n"
    "  -o, --output DIR  writes plan.json, plan.md, plan.html, modelopt_exclude.json, llmcompressor_ignore.yaml\n"
    "  --force           replace those files when they exist\n"
    "  --allow-emulated-latency\n"
    "                    plan by latency on a cpu-emulation report (refused without it: those are CPU timings\n"
    "                    of an emulation of each format, not GPU figures); the plan then says so\n"
    "  --validate        checks the plan against the model: runs verify on the plan and on plans at several\n"
    "                    budgets and reports predicted against measured loss change (rank correlation, scatter\n"
    "                    plot). It runs the model, so it is the Python package's: python -m precis plan\n"
    "                    REPORT.json --validate --model DIR --inputs FILE [these options] -o DIR (with\n"
    "                    --validate-budgets, --validate-against, --validate-measure; docs/verify.md); this\n"
    "                    command refuses it and says so\n"
    "\n"
    "Exit codes: 0 a plan, 3 no plan meets the criteria (blocking layers named), 2 bad usage or input.\n";

static bool parse_kind(const char *text, size_t len, precis_plan_budget *out) {
  if (len == 6 && strncmp(text, "memory", 6) == 0) *out = PRECIS_PLAN_MEMORY;
  else if (len == 4 && strncmp(text, "bits", 4) == 0) *out = PRECIS_PLAN_BITS;
  else if (len == 7 && strncmp(text, "latency", 7) == 0) *out = PRECIS_PLAN_LATENCY;
  else return false;
  return true;
}

/* batch=B,context=T[,kv=FMT] */
static bool parse_serve(char *text, precis_plan_options *options) {
  options->serve_batch = options->serve_context = 0;
  for (char *save = NULL, *item = strtok_r(text, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) return false;
    *eq = '\0';
    const char *key = item, *value = eq + 1;
    if (!strcmp(key, "kv")) {
      options->serve_kv = value;
      continue;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (end == value || *end || errno || v < 1) return false;
    if (!strcmp(key, "batch")) options->serve_batch = v;
    else if (!strcmp(key, "context")) options->serve_context = v;
    else return false;
  }
  return options->serve_batch > 0 && options->serve_context > 0;
}

static bool parse_budget(const char *text, precis_plan_budget *kind, double *value) {
  const char *eq = strchr(text, '=');
  if (!eq || !parse_kind(text, (size_t)(eq - text), kind)) return false;
  char *end = NULL;
  errno = 0;
  double v = strtod(eq + 1, &end);
  if (end == eq + 1 || errno || !isfinite(v) || v < 0) return false;
  if (*kind == PRECIS_PLAN_MEMORY) {
    static const struct {
      const char *suffix;
      double factor;
    } units[] = {{"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"M", 1e6}, {"MB", 1e6}, {"G", 1e9}, {"GB", 1e9},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
    bool known = false;
    for (size_t i = 0; i < sizeof units / sizeof units[0] && !known; i++)
      if (strcmp(end, units[i].suffix) == 0) {
        v *= units[i].factor;
        known = true;
      }
    if (!known) return false;
  } else if (*end) {
    return false;
  }
  *value = v;
  return true;
}

int precis_cmd_plan(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    fputs(usage_text, stdout);
    return 0;
  }
  const char *path = NULL, *output = NULL;
  precis_criteria require = {0};
  precis_plan_options options = {.budget = PRECIS_PLAN_NO_BUDGET, .cost_kind = PRECIS_PLAN_MEMORY,
                                 .deploy = PRECIS_DEPLOY_ENGINE_DEFAULT};
  bool force = false;
  precis_target arch = PRECIS_TARGET_DEFAULT;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes_value = !strcmp(arg, "--require") || !strcmp(arg, "--budget") || !strcmp(arg, "--cost") ||
                       !strcmp(arg, "--target") || !strcmp(arg, "--exclusions-for") || !strcmp(arg, "--serve") ||
                       !strcmp(arg, "--objective") || !strcmp(arg, "--moe-active") || !strcmp(arg, "--deploy") ||
                       !strcmp(arg, "--kv-candidates") || !strcmp(arg, "--objective-map") || !strcmp(arg, "-o") || !strcmp(arg, "--output") ||
                       !strcmp(arg, "--model") || !strcmp(arg, "--inputs") || !strncmp(arg, "--validate-", 11);
    if (takes_value && !value) {
      fprintf(stderr, "precis plan: %s needs a value (see precis plan --help)\n", arg);
      return 2;
    }
    if (takes_value) i++;
    if (!strcmp(arg, "--require")) {
      if (require.count == PRECIS_MAX_CRITERIA) {
        fprintf(stderr, "precis plan: at most %d --require expressions\n", PRECIS_MAX_CRITERIA);
        return 2;
      }
      precis_status st = precis_criterion_parse(value, &require.items[require.count]);
      if (st != PRECIS_OK) return precis_cli_report_error("plan", st);
      require.count++;
    } else if (!strcmp(arg, "--budget")) {
      if (!parse_budget(value, &options.budget, &options.budget_value)) {
        fprintf(stderr,
                "precis plan: --budget: expected memory=BYTES (e.g. 64MiB), bits=B or latency=MS with a non-negative "
                "number, found \"%s\"\n",
                value);
        return 2;
      }
    } else if (!strcmp(arg, "--cost")) {
      if (!parse_kind(value, strlen(value), &options.cost_kind)) {
        fprintf(stderr, "precis plan: --cost: expected memory, bits or latency, found \"%s\"\n", value);
        return 2;
      }
    } else if (!strcmp(arg, "--moe-active")) {
      long long top_k = 0, experts = 0;
      char tail = 0;
      if (sscanf(value, "%lld/%lld%c", &top_k, &experts, &tail) != 2 || top_k < 1 || experts < top_k) {
        fprintf(stderr, "precis plan: --moe-active: expected TOP_K/NUM_EXPERTS with 1 <= TOP_K <= NUM_EXPERTS, found \"%s\"\n",
                value);
        return 2;
      }
      options.moe_active = (double)top_k / (double)experts;
    } else if (!strcmp(arg, "--deploy")) {
      if (!precis_deploy_engine_parse(value, &options.deploy)) {
        fprintf(stderr, "precis plan: --deploy: expected vllm, trtllm or none, found \"%s\"\n", value);
        return 2;
      }
    } else if (!strcmp(arg, "--objective")) {
      if (!strcmp(value, "fisher")) options.objective = PRECIS_PLAN_OBJECTIVE_FISHER;
      else if (!strcmp(value, "taylor")) options.objective = PRECIS_PLAN_OBJECTIVE_TAYLOR;
      else if (!strcmp(value, "rel_fro")) options.objective = PRECIS_PLAN_OBJECTIVE_REL_FRO;
      else {
        fprintf(stderr, "precis plan: --objective: expected fisher, taylor or rel_fro, found \"%s\"\n", value);
        return 2;
      }
    } else if (!strcmp(arg, "--kv-candidates")) {
      options.kv_candidates = value;
    } else if (!strcmp(arg, "--objective-map")) {
      options.objective_map = value;
    } else if (!strcmp(arg, "--serve")) {
      char given[256];
      snprintf(given, sizeof given, "%s", value);
      if (!parse_serve(argv[i], &options)) {
        fprintf(stderr, "precis plan: --serve: expected batch=B,context=T[,kv=FMT] with positive integers, found \"%s\"\n",
                given);
        return 2;
      }
    } else if (!strcmp(arg, "--exclusions-for")) {
      if (precis_target_parse(value, &arch)) {
        fprintf(stderr, "precis plan: --exclusions-for %s: a recipe expected, found an architecture (that is --target %s)\n",
                value, value);
        return 2;
      }
      if (options.target && strcmp(options.target, value)) {
        fprintf(stderr, "precis plan: the exclusion lists' recipe given twice: %s and %s\n", options.target, value);
        return 2;
      }
      options.target = value;
    } else if (!strcmp(arg, "--target")) {
      /* An architecture (sm_100) selects rows. A recipe was --target's meaning before architectures
       * came (issue 33): such command lines keep working, and are told the option's name now. */
      if (!precis_target_parse(value, &arch)) {
        fprintf(stderr, "precis plan: note: --target %s names a recipe: read as --exclusions-for %s (--target is the "
                        "architecture, as in run and recommend)\n", value, value);
        if (options.target && strcmp(options.target, value)) {
          fprintf(stderr, "precis plan: the exclusion lists' recipe given twice: %s and %s\n", options.target, value);
          return 2;
        }
        options.target = value;
      }
    } else if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) {
      output = value;
    } else if (!strcmp(arg, "--force")) {
      force = true;
    } else if (!strcmp(arg, "--allow-emulated-latency")) {
      options.allow_emulated_latency = true;
    } else if (!strcmp(arg, "--validate") || !strcmp(arg, "--model") || !strcmp(arg, "--inputs") ||
               !strncmp(arg, "--validate-", 11)) {
      /* Validation runs the model (torch, transformers): the Python package does it, calling this
       * very command for each plan. The library behind this CLI neither execs nor imports Python. */
      fprintf(stderr,
              "precis plan: %s: plan --validate runs the model through verify, which needs Python with torch and\n"
              "transformers: run it as\n"
              "  python -m precis plan REPORT.json --validate --model DIR --inputs FILE [plan options] -o DIR\n"
              "(the precis Python package, pip install precis-eval; docs/verify.md, \"Checking a plan\")\n",
              arg);
      return 2;
    } else if (arg[0] == '-' && arg[1]) {
      fprintf(stderr, "precis plan: unknown option \"%s\" (see precis plan --help)\n", arg);
      return 2;
    } else if (!path) {
      path = arg;
    } else {
      fprintf(stderr, "precis plan: one report expected, found a second: \"%s\"\n", arg);
      return 2;
    }
  }
  if (!path || !output) {
    fprintf(stderr, "precis plan: REPORT.json and -o DIR are required\n\n%s", usage_text);
    return 2;
  }
  if (options.budget != PRECIS_PLAN_NO_BUDGET && options.cost_kind != options.budget &&
      options.cost_kind != PRECIS_PLAN_MEMORY) {
    fprintf(stderr, "precis plan: --cost %s contradicts --budget %s (a budget sets the cost dimension)\n",
            precis_plan_budget_str(options.cost_kind), precis_plan_budget_str(options.budget));
    return 2;
  }
  options.require = &require;
  options.deploy_arch = arch;
  precis_report report;
  precis_status st = precis_report_read_json(path, &report);
  if (st != PRECIS_OK) return precis_cli_report_error("plan", st);
  if ((arch != PRECIS_TARGET_DEFAULT && !precis_cli_keep_target_rows("plan", path, &report, arch)) ||
      !precis_cli_logit_criteria_judged("plan", path, &report, &require)) {
    precis_report_free(&report);
    return 2;
  }
  precis_plan plan;
  st = precis_plan_build(&report, &options, &plan);
  if (st != PRECIS_OK) {
    precis_report_free(&report);
    return precis_cli_report_error("plan", st);
  }
  st = precis_plan_write_all(&plan, &report, path, output, force);
  if (st == PRECIS_OK) {
    precis_plan_print(&plan, stdout);
    printf("wrote %s/plan.json, plan.md, plan.html, modelopt_exclude.json, llmcompressor_ignore.yaml, compressed_tensors_config.json, modelopt_hf_quant_config.json\n", output);
  }
  int code = st != PRECIS_OK ? precis_cli_report_error("plan", st) : plan.feasible ? 0 : 3;
  precis_plan_free(&plan);
  precis_report_free(&report);
  return code;
}
