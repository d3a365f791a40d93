/* precis recommend REPORT.json: the cheapest recipe that meets the criteria, with the evidence
 * (recommend.h states the rule). Exit 0 with a recommendation, 3 when none passes, 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report/recommend.h"
#include "report/report.h"
#include "report/report_util.h"

static const char usage_text[] =
    "usage: precis recommend REPORT.json [--require EXPR]... [--objective latency|memory] [--tie-threshold PCT]\n"
    "                        [--per-workload] [--target ARCH] [--json]\n"
    "\n"
    "The cheapest recipe that meets the accuracy criteria on every workload of a report.\n"
    "\n"
    "  --require EXPR      criterion on a metric's worst value over samples, e.g. rel_fro<=1e-2,\n"
    "                      sqnr_db>=40, nonfinite==0 (repeatable; replaces each row's recorded criteria)\n"
    "  --objective O       latency (default): lowest sum over workloads of the median latency per call;\n"
    "                      memory: lowest bytes on the device, largest over workloads: tracked_peak_bytes\n"
    "                      on cuda, the format's bytes (tensor_bytes) on an emulating backend (cpu)\n"
    "  --tie-threshold PCT latencies within PCT% of the fastest passing one tie as well as those\n"
    "                      inside the measured noise (default 10, compare's speed threshold; 0: the\n"
    "                      measured noise alone)\n"
    "  --per-workload      answer for each workload separately\n"
    "  --target ARCH       only the rows recorded for sm_80, sm_89, sm_90, sm_100 or sm_120 (rows from\n"
    "                      before targets count as sm_90)\n"
    "  --json              print the decision as JSON\n"
    "\n"
    "A recipe passes when each workload has an \"ok\" row for it that meets the criteria. Latencies\n"
    "inside the measured noise (overlapping interquartile ranges / 95% intervals of the medians) or\n"
    "within --tie-threshold of the fastest are ties, as are equal costs: they go to the lower memory\n"
    "of the format, then the lower error (rel_fro), then the earlier recipe in the recipe table, and\n"
    "the output says so. When none passes, the closest miss is named with its margin.\n"
    "Without a target (--require here, or given to the run) nothing is recommended: the default gates\n"
    "say whether a format behaved as it should, not what accuracy you need; the frontier is shown.\n"
    "Exit codes: 0 a recommendation or the frontier without a target, 3 no recipe meets the target,\n"
    "2 bad usage or an unreadable report.\n";

int precis_cmd_recommend(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    fputs(usage_text, stdout);
    return 0;
  }
  const char *path = NULL;
  precis_criteria require = {0};
  precis_recommend_options options = {.objective = PRECIS_OBJECTIVE_LATENCY, .tie_threshold = PRECIS_TIE_THRESHOLD_DEFAULT};
  bool per_workload = false, json = false;
  precis_target target = PRECIS_TARGET_DEFAULT;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--require") == 0 || strncmp(arg, "--require=", 10) == 0) {
      const char *expr = arg[9] == '=' ? arg + 10 : (i + 1 < argc ? argv[++i] : NULL);
      if (!expr) {
        fprintf(stderr, "precis recommend: --require needs an expression such as rel_fro<=1e-2\n");
        return 2;
      }
      if (require.count == PRECIS_MAX_CRITERIA) {
        fprintf(stderr, "precis recommend: at most %d --require expressions\n", PRECIS_MAX_CRITERIA);
        return 2;
      }
      precis_status st = precis_criterion_parse(expr, &require.items[require.count]);
      if (st != PRECIS_OK) return precis_cli_report_error("recommend", st);
      require.count++;
    } else if (strcmp(arg, "--objective") == 0 || strncmp(arg, "--objective=", 12) == 0) {
      const char *value = arg[11] == '=' ? arg + 12 : (i + 1 < argc ? argv[++i] : NULL);
      if (value && strcmp(value, "latency") == 0) options.objective = PRECIS_OBJECTIVE_LATENCY;
      else if (value && strcmp(value, "memory") == 0) options.objective = PRECIS_OBJECTIVE_MEMORY;
      else {
        fprintf(stderr, "precis recommend: --objective expects latency or memory, found \"%s\"\n", value ? value : "");
        return 2;
      }
    } else if (strcmp(arg, "--tie-threshold") == 0 || strncmp(arg, "--tie-threshold=", 16) == 0) {
      const char *value = arg[15] == '=' ? arg + 16 : (i + 1 < argc ? argv[++i] : NULL);
      double pct = 0;
      if (!value || !precis_cli_parse_number("recommend", "--tie-threshold", value, 0, 100, &pct)) {
        if (!value) fprintf(stderr, "precis recommend: --tie-threshold needs a percentage such as 10\n");
        return 2;
      }
      options.tie_threshold = pct / 100;
    } else if (strcmp(arg, "--target") == 0 || strncmp(arg, "--target=", 9) == 0) {
      const char *value = arg[8] == '=' ? arg + 9 : (i + 1 < argc ? argv[++i] : NULL);
      if (!value || !precis_target_parse(value, &target)) {
        fprintf(stderr, "precis recommend: --target expects one of " PRECIS_TARGET_NAMES ", found \"%s\"\n",
                value ? value : "");
        return 2;
      }
    } else if (strcmp(arg, "--per-workload") == 0) {
      per_workload = true;
    } else if (strcmp(arg, "--json") == 0) {
      json = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "precis recommend: unknown option \"%s\" (try precis recommend --help)\n", arg);
      return 2;
    } else if (!path) {
      path = arg;
    } else {
      fprintf(stderr, "precis recommend: one report expected, found a second: \"%s\"\n", arg);
      return 2;
    }
  }
  if (!path) {
    fputs(usage_text, stderr);
    return 2;
  }
  options.require = &require;
  options.report_path = path;

  precis_report report;
  precis_status st = precis_report_read_json(path, &report);
  if (st != PRECIS_OK) return precis_cli_report_error("recommend", st);
  if ((target != PRECIS_TARGET_DEFAULT && !precis_cli_keep_target_rows("recommend", path, &report, target)) ||
      !precis_cli_logit_criteria_judged("recommend", path, &report, &require)) {
    precis_report_free(&report);
    return 2;
  }
  size_t n_workloads = 1;
  const char **workloads = NULL;
  if (per_workload) {
    workloads = precis_report_workloads(&report, &n_workloads);
    if (!workloads) {
      precis_report_free(&report);
      return precis_cli_report_error("recommend", precis_fail(PRECIS_E_NOMEM, "out of memory"));
    }
  }
  bool all_recommended = true;
  if (json && per_workload) printf("{\"per_workload\": [\n");
  for (size_t w = 0; w < n_workloads && st == PRECIS_OK; w++) {
    options.workload = per_workload ? workloads[w] : NULL;
    precis_recommendation rec;
    st = precis_recommend(&report, &options, &rec);
    if (st != PRECIS_OK) break;
    if (rec.chosen < 0 && rec.has_target) all_recommended = false;
    if (json) {
      char *text = precis_recommendation_json(&rec);
      printf("%s%s\n", text ? text : "null", per_workload && w + 1 < n_workloads ? "," : "");
      free(text);
    } else {
      if (w) printf("\n");
      precis_recommendation_print(&report, &rec, stdout);
    }
    precis_recommendation_free(&rec);
  }
  if (json && per_workload && st == PRECIS_OK) printf("]}\n");
  free(workloads);
  precis_report_free(&report);
  if (st != PRECIS_OK) return precis_cli_report_error("recommend", st);
  return all_recommended ? 0 : 3;
}
