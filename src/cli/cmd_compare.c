/* precis compare BASE.json NEW.json: accuracy, speed and memory differences with a verdict, for CI
 * (compare.h states the rules). Exit 3 on any regression, 0 otherwise, 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report/compare.h"
#include "base/fileio.h"
#include "report/report.h"

static const char usage_text[] =
    "usage: precis compare BASE.json NEW.json [--error-factor F] [--time-threshold PCT]\n"
    "                      [--memory-threshold PCT] [--json FILE] [--markdown FILE] [--force]\n"
    "\n"
    "Pairs rows by (workload, canonical recipe spec) and reports regressions as Markdown on stdout.\n"
    "\n"
    "  --error-factor F       accuracy regression when an error metric's worst value grows more than F times\n"
    "                         (default 2; sqnr_db: a drop of more than 20*log10(F) dB)\n"
    "  --time-threshold PCT   speed regression when NEW's median is above BASE's p95 and more than PCT\n"
    "                         percent above BASE's median (default 10)\n"
    "  --memory-threshold PCT memory regression when a peak grows more than PCT percent (default 10)\n"
    "  --json FILE            also write the comparison as JSON\n"
    "  --markdown FILE        also write the Markdown to FILE\n"
    "  --force                overwrite FILEs that exist\n"
    "\n"
    "Exit codes: 0 no regression, 3 a regression, 2 bad usage or an unreadable report.\n";

static bool parse_number(const char *option, const char *text, double *out) {
  char *end = NULL;
  double v = text ? strtod(text, &end) : 0;
  if (!text || end == text || *end != '\0' || !(v >= 0)) {
    fprintf(stderr, "precis compare: %s expects a non-negative number, found \"%s\"\n", option, text ? text : "");
    return false;
  }
  *out = v;
  return true;
}

int precis_cmd_compare(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    fputs(usage_text, stdout);
    return 0;
  }
  const char *paths[2] = {NULL, NULL}, *json_path = NULL, *md_path = NULL;
  size_t n_paths = 0;
  bool force = false;
  precis_compare_options options;
  precis_compare_options_default(&options);
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    double pct;
    if (strcmp(arg, "--error-factor") == 0) {
      if (!parse_number(arg, value, &options.error_factor)) return 2;
      if (!(options.error_factor > 1)) {
        fprintf(stderr, "precis compare: --error-factor must be greater than 1, found %s\n", value);
        return 2;
      }
      i++;
    } else if (strcmp(arg, "--time-threshold") == 0) {
      if (!parse_number(arg, value, &pct)) return 2;
      options.time_threshold = pct / 100;
      i++;
    } else if (strcmp(arg, "--memory-threshold") == 0) {
      if (!parse_number(arg, value, &pct)) return 2;
      options.memory_threshold = pct / 100;
      i++;
    } else if (strcmp(arg, "--json") == 0 || strcmp(arg, "--markdown") == 0) {
      if (!value) {
        fprintf(stderr, "precis compare: %s needs a file name\n", arg);
        return 2;
      }
      if (arg[2] == 'j') json_path = value;
      else md_path = value;
      i++;
    } else if (strcmp(arg, "--force") == 0) {
      force = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "precis compare: unknown option \"%s\" (try precis compare --help)\n", arg);
      return 2;
    } else if (n_paths < 2) {
      paths[n_paths++] = arg;
    } else {
      fprintf(stderr, "precis compare: two reports expected (BASE.json NEW.json), found a third: \"%s\"\n", arg);
      return 2;
    }
  }
  if (n_paths != 2) {
    fputs(usage_text, stderr);
    return 2;
  }
  precis_report base, now;
  precis_status st = precis_report_read_json(paths[0], &base);
  if (st != PRECIS_OK) return precis_cli_report_error("compare", st);
  st = precis_report_read_json(paths[1], &now);
  if (st != PRECIS_OK) {
    precis_report_free(&base);
    return precis_cli_report_error("compare", st);
  }
  precis_comparison cmp;
  char *md = NULL, *json = NULL;
  st = precis_compare_reports(&base, &now, &options, &cmp);
  if (st != PRECIS_OK) goto done;
  md = precis_comparison_markdown(&cmp, paths[0], paths[1]);
  json = json_path ? precis_comparison_json(&cmp, paths[0], paths[1]) : NULL;
  if (!md || (json_path && !json)) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory formatting the comparison");
    goto done;
  }
  fputs(md, stdout);
  fflush(stdout);
  if (json_path && (st = precis_atomic_write_text(json_path, json, force)) != PRECIS_OK) goto done;
  if (md_path && (st = precis_atomic_write_text(md_path, md, force)) != PRECIS_OK) goto done;
done:;
  size_t regressions = st == PRECIS_OK ? cmp.n_regressions : 0;
  if (st == PRECIS_OK) precis_comparison_free(&cmp);
  free(md);
  free(json);
  precis_report_free(&base);
  precis_report_free(&now);
  if (st != PRECIS_OK) return precis_cli_report_error("compare", st);
  return regressions ? 3 : 0;
}
