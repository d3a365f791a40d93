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
    "usage: precis plan REPORT.json [--require EXPR]... [--budget memory=BYTES|bits=B|latency=MS]\n"
    "                   [--cost memory|bits|latency] [--target RECIPE] [--force] [--allow-emulated-latency] -o DIR\n"
    "\n"
    "A precision per layer (each workload of the report is a layer: precis import --model names them after\n"
    "the model's modules), with the sensitivity of each layer and exclusion lists for quantizers.\n"
    "\n"
    "  --require EXPR    criterion on a metric's worst value over samples (repeatable), e.g. rel_fro<=1e-2;\n"
    "                    without it, each row's recorded verdict\n"
    "  --budget B        a global budget; the plan minimizes the sum over layers of rel_fro within it, exactly:\n"
    "                    memory=BYTES  sum of tensor bytes (suffixes K, M, G, KiB, MiB, GiB)\n"
    "                    bits=B        average bits per weight over the layers (weights in the recipe's format)\n"
    "                    latency=MS    sum of the median latency per call\n"
    "                    without a budget: per layer, the cheapest recipe that meets the criteria\n"
    "  --cost C          the cost dimension without a budget (default memory)\n"
    "  --target RECIPE   the recipe the exclusion lists are relative to (default: the cheapest evaluated)\n"
    "  -o, --output DIR  writes plan.json, plan.md, plan.html, modelopt_exclude.json, llmcompressor_ignore.yaml\n"
    "  --force           replace those files when they exist\n"
    "  --allow-emulated-latency\n"
    "                    plan by latency on a cpu-emulation report (refused without it: those are CPU timings\n"
    "                    of an emulation of each format, not GPU figures); the plan then says so\n"
    "\n"
    "Exit codes: 0 a plan, 3 no plan meets the criteria (blocking layers named), 2 bad usage or input.\n";

static bool parse_kind(const char *text, size_t len, precis_plan_budget *out) {
  if (len == 6 && strncmp(text, "memory", 6) == 0) *out = PRECIS_PLAN_MEMORY;
  else if (len == 4 && strncmp(text, "bits", 4) == 0) *out = PRECIS_PLAN_BITS;
  else if (len == 7 && strncmp(text, "latency", 7) == 0) *out = PRECIS_PLAN_LATENCY;
  else return false;
  return true;
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
  precis_plan_options options = {.budget = PRECIS_PLAN_NO_BUDGET, .cost_kind = PRECIS_PLAN_MEMORY};
  bool force = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes_value = !strcmp(arg, "--require") || !strcmp(arg, "--budget") || !strcmp(arg, "--cost") ||
                       !strcmp(arg, "--target") || !strcmp(arg, "-o") || !strcmp(arg, "--output");
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
    } else if (!strcmp(arg, "--target")) {
      options.target = value;
    } else if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) {
      output = value;
    } else if (!strcmp(arg, "--force")) {
      force = true;
    } else if (!strcmp(arg, "--allow-emulated-latency")) {
      options.allow_emulated_latency = true;
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
  precis_report report;
  precis_status st = precis_report_read_json(path, &report);
  if (st != PRECIS_OK) return precis_cli_report_error("plan", st);
  precis_plan plan;
  st = precis_plan_build(&report, &options, &plan);
  if (st != PRECIS_OK) {
    precis_report_free(&report);
    return precis_cli_report_error("plan", st);
  }
  st = precis_plan_write_all(&plan, &report, path, output, force);
  if (st == PRECIS_OK) {
    precis_plan_print(&plan, stdout);
    printf("wrote %s/plan.json, plan.md, plan.html, modelopt_exclude.json, llmcompressor_ignore.yaml\n", output);
  }
  int code = st != PRECIS_OK ? precis_cli_report_error("plan", st) : plan.feasible ? 0 : 3;
  precis_plan_free(&plan);
  precis_report_free(&report);
  return code;
}
