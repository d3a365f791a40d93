#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "base/output_lock.h"
#include "kernels/cuda_api.h"
#include "report/results.h"

int precis_cli_report_error(const char *command, precis_status status) {
  const char *msg = precis_last_error();
  fprintf(stderr, "precis %s: %s\n", command, msg[0] ? msg : precis_status_str(status));
  return precis_status_exit_code(status);
}

int precis_cli_lock_output(const char *command, struct precis_output_lock *lock, const char *output, bool is_dir) {
  char *taken_over = NULL;
  precis_status st = precis_output_lock_acquire(lock, output, is_dir, command, &taken_over);
  if (taken_over) fprintf(stderr, "precis %s: %s\n", command, taken_over);
  free(taken_over);
  return st == PRECIS_OK ? 0 : precis_cli_report_error(command, st);
}

int precis_cli_not_built(const char *command, const char *what) {
  fprintf(stderr, "precis %s: not built yet in this version (%s)\n", command, what);
  return 2;
}

int precis_cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
  }
  return 0;
}

static const precis_cli_option *find_long(const precis_cli_option *options, const char *name, size_t len) {
  for (const precis_cli_option *o = options; o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
  return NULL;
}

static void list_options(FILE *out, const precis_cli_option *options) {
  fprintf(out, "options of this command:");
  for (const precis_cli_option *o = options; o->name; o++) {
    if (o->short_name) fprintf(out, " -%c,", o->short_name);
    fprintf(out, " --%s%s", o->name, o->takes_value ? " VALUE" : "");
    fputc(o[1].name ? ',' : '\n', out);
  }
  if (!options->name) fputc('\n', out);
}

int precis_cli_check_options(const char *command, int argc, char **argv, const precis_cli_option *options) {
  static char help_long[] = "--help", output_long[] = "--output", quiet_long[] = "--quiet";
  for (int i = 1; i < argc; i++) {
    char *arg = argv[i];
    if (strcmp(arg, "--") == 0) return 0;
    if (arg[0] != '-' || arg[1] == '\0') continue; /* an operand ("-" included) */
    const precis_cli_option *o = NULL;
    if (arg[1] != '-') {
      /* A one-letter option: -h, or the short form of one of the command's options. */
      if (arg[1] == 'h') {
        /* -h, or a cluster that starts with it ("-hx"): help, which every command answers first. */
        if (arg[2] == '\0') argv[i] = help_long;
        continue;
      }
      for (const precis_cli_option *s = options; s->name && !o; s++)
        if (s->short_name == arg[1]) o = s;
      if (!o || (arg[2] != '\0' && !o->takes_value)) {
        fprintf(stderr, "precis %s: unknown option %s\n", command, arg);
        list_options(stderr, options);
        return 2;
      }
      if (arg[2] != '\0') continue; /* -oDIR: the value attached */
      if (o->short_name == 'o' && strcmp(o->name, "output") == 0) argv[i] = output_long;
      else if (o->short_name == 'q' && strcmp(o->name, "quiet") == 0) argv[i] = quiet_long;
      if (o->takes_value) i++;
      continue;
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    if (len == 4 && strncmp(name, "help", 4) == 0) continue;
    o = find_long(options, name, len);
    if (o) {
      if (o->takes_value && !eq) i++;
      continue;
    }
    /* Not an option: say which ones it abbreviates, if any (getopt would have taken a unique one). */
    fprintf(stderr, "precis %s: unknown option --%.*s", command, (int)len, name);
    int prefixed = 0;
    for (const precis_cli_option *p = options; p->name; p++)
      if (len > 0 && strncmp(p->name, name, len) == 0)
        fprintf(stderr, "%s--%s", prefixed++ ? ", " : " (options are spelled in full; did you mean ", p->name);
    fprintf(stderr, "%s\n", prefixed ? "?)" : "");
    list_options(stderr, options);
    return 2;
  }
  return 0;
}

bool precis_cli_parse_number(const char *command, const char *opt, const char *text, double lo, double hi, double *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (!end || end == text || *end || !(v >= lo && v <= hi)) {
    fprintf(stderr, "precis %s: %s: expected a number in [%g, %g], got \"%s\"\n", command, opt, lo, hi, text);
    return false;
  }
  *out = v;
  return true;
}

bool precis_cli_parse_count(const char *command, const char *opt, const char *text, long long lo, long long hi,
                            long long *out) {
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (!end || end == text || *end || v < lo || v > hi) {
    fprintf(stderr, "precis %s: %s: expected an integer in [%lld, %lld], got \"%s\"\n", command, opt, lo, hi, text);
    return false;
  }
  *out = v;
  return true;
}

void precis_cli_require_free(precis_cli_require *r) {
  for (size_t i = 0; i < r->n_texts; i++) free(r->texts[i]);
  free(r->texts);
  memset(r, 0, sizeof *r);
}

static int add_require(const char *command, const char *arg, precis_cli_require *r) {
  if (r->criteria.count == PRECIS_MAX_CRITERIA) {
    fprintf(stderr, "precis %s: at most %d --require criteria\n", command, PRECIS_MAX_CRITERIA);
    return -1;
  }
  precis_status st = precis_criterion_parse(arg, &r->criteria.items[r->criteria.count]);
  if (st != PRECIS_OK) {
    precis_cli_report_error(command, st);
    return -1;
  }
  char **grown = realloc(r->texts, (r->n_texts + 1) * sizeof *grown);
  char *text = precis_strdup(arg);
  if (!grown || !text) {
    free(text);
    if (grown) r->texts = grown;
    fprintf(stderr, "precis %s: out of memory\n", command);
    return -1;
  }
  r->texts = grown;
  r->texts[r->n_texts++] = text;
  r->criteria.count++;
  return 1;
}

int precis_cli_measure_option(const char *command, int opt, const char *arg, precis_case_options *o,
                              precis_cli_require *require) {
  long long count = 0;
  switch (opt) {
  case PRECIS_OPT_REQUIRE: return add_require(command, arg, require);
  case PRECIS_OPT_ACT_SCALE:
    if (strcmp(arg, "row") == 0) o->int8_act_scale = PRECIS_ACT_SCALE_ROW;
    else if (strcmp(arg, "absmax") == 0) o->int8_act_scale = PRECIS_ACT_SCALE_ABSMAX;
    else if (strcmp(arg, "percentile") == 0) o->int8_act_scale = PRECIS_ACT_SCALE_PERCENTILE;
    else if (strcmp(arg, "mse") == 0) o->int8_act_scale = PRECIS_ACT_SCALE_MSE;
    else {
      fprintf(stderr, "precis %s: --int8-act-scale: expected row, absmax, percentile or mse, got \"%s\"\n", command, arg);
      return -1;
    }
    return 1;
  case PRECIS_OPT_PERCENTILE:
    return precis_cli_parse_number(command, "--percentile", arg, 50, 100, &o->percentile) ? 1 : -1;
  case PRECIS_OPT_MIN_SAMPLES:
    if (!precis_cli_parse_count(command, "--min-samples", arg, 1, 1000000, &count)) return -1;
    o->min_samples = (int)count;
    return 1;
  case PRECIS_OPT_MAX_SAMPLES:
    if (!precis_cli_parse_count(command, "--max-samples", arg, 1, 10000000, &count)) return -1;
    o->max_samples = (int)count;
    return 1;
  case PRECIS_OPT_MAX_TIME:
    return precis_cli_parse_number(command, "--max-time-ms", arg, 0, 1e9, &o->max_time_ms) ? 1 : -1;
  case PRECIS_OPT_SPREAD:
    return precis_cli_parse_number(command, "--target-spread", arg, 0, 10, &o->target_rel_spread) ? 1 : -1;
  case PRECIS_OPT_COLD: o->cold = true; return 1;
  case PRECIS_OPT_TARGET:
    if (!precis_target_parse(arg, &o->target)) {
      fprintf(stderr, "precis %s: --target: expected one of " PRECIS_TARGET_NAMES ", got \"%s\"\n", command, arg);
      return -1;
    }
    return 1;
  case PRECIS_OPT_AUTOTUNE:
    if (!precis_cli_parse_count(command, "--autotune", arg, 0, 64, &count)) return -1;
    o->autotune = (int)count;
    return 1;
  default: return 0;
  }
}

void precis_cli_measure_settings(const precis_case_options *o, size_t n_require, precis_kv_list *settings) {
  static const char *act_names[] = {"row", "absmax", "percentile", "mse"};
  precis_kv_set(settings, "int8_act_scale", act_names[o->int8_act_scale]);
  precis_kv_set_number(settings, "percentile", o->percentile);
  precis_kv_set_int(settings, "warmup_calls", o->warmup_calls);
  precis_kv_set_number(settings, "warmup_ms", o->warmup_ms);
  precis_kv_set_int(settings, "min_samples", o->min_samples);
  precis_kv_set_int(settings, "max_samples", o->max_samples);
  precis_kv_set_number(settings, "max_time_ms", o->max_time_ms);
  precis_kv_set_number(settings, "target_rel_spread", o->target_rel_spread);
  precis_kv_set(settings, "cold", o->cold ? "true" : "false");
  if (o->target != PRECIS_TARGET_DEFAULT) precis_kv_set(settings, "target", precis_target_name(o->target));
  precis_kv_set(settings, "criteria_source", n_require ? "--require" : "per-recipe defaults (docs/criteria.md)");
}

bool precis_cli_backend_name_ok(const char *command, const char *name) {
  if (strcmp(name, "cpu") == 0 || strcmp(name, "cuda") == 0 || strcmp(name, "auto") == 0) return true;
  fprintf(stderr, "precis %s: --backend: expected auto, cuda or cpu, got \"%s\"\n", command, name);
  return false;
}

int precis_cli_open_backend(const char *command, const char *name, const precis_case_options *options, bool quiet,
                            const precis_backend **backend, void **ctx) {
  *backend = NULL;
  *ctx = NULL;
  if (!precis_cli_backend_name_ok(command, name)) return 2;
  if (strcmp(name, "cpu") != 0) {
    const precis_backend *cuda = precis_backend_cuda();
    precis_status st = cuda ? cuda->open(ctx, options)
                            : precis_fail(PRECIS_E_NOT_BUILT, "this precis was built without the CUDA backend");
    if (st == PRECIS_OK) {
      *backend = cuda;
      return 0;
    }
    if (strcmp(name, "cuda") == 0) {
      fprintf(stderr, "precis %s: --backend cuda: %s\n", command, precis_last_error());
      return 1;
    }
    if (!quiet)
      fprintf(stderr, "precis: no usable CUDA device (%s); using the cpu backend (emulation)\n", precis_last_error());
  }
  const precis_backend *cpu = precis_backend_cpu();
  precis_status st = cpu->open(ctx, options);
  if (st != PRECIS_OK) return precis_cli_report_error(command, st);
  *backend = cpu;
  return 0;
}

char *precis_cli_command_line(int argc, char **argv) {
  size_t len = sizeof "precis";
  for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
  char *s = malloc(len);
  if (!s) return NULL;
  strcpy(s, "precis");
  for (int i = 0; i < argc; i++) {
    strcat(s, " ");
    strcat(s, argv[i]);
  }
  return s;
}

bool precis_cli_measure_options_check(const char *command, const precis_case_options *o) {
  if (o->max_samples >= o->min_samples) return true;
  fprintf(stderr, "precis %s: --max-samples must be at least --min-samples\n", command);
  return false;
}

bool precis_cli_parse_recipes(const char *command, const char *text, bool skip_duplicates, precis_recipe_list *list) {
  precis_recipe_list parsed;
  precis_status st = precis_recipe_list_parse(text, &parsed);
  for (size_t i = 0; st == PRECIS_OK && i < parsed.count; i++) {
    bool dup = false;
    for (size_t j = 0; skip_duplicates && j < list->count; j++)
      dup = dup || strcmp(list->items[j].canonical, parsed.items[i].canonical) == 0;
    if (!dup) st = precis_recipe_list_add(list, &parsed.items[i]);
  }
  precis_recipe_list_free(&parsed);
  if (st != PRECIS_OK) precis_cli_report_error(command, st);
  return st == PRECIS_OK;
}

void precis_cli_apply_act_scale(const precis_case_options *o, precis_recipe_list *list) {
  static const precis_scale_method methods[] = {
      [PRECIS_ACT_SCALE_ROW] = PRECIS_SCALE_DYNAMIC, [PRECIS_ACT_SCALE_ABSMAX] = PRECIS_SCALE_ABSMAX,
      [PRECIS_ACT_SCALE_PERCENTILE] = PRECIS_SCALE_PERCENTILE, [PRECIS_ACT_SCALE_MSE] = PRECIS_SCALE_MSE};
  for (size_t i = 0; i < list->count; i++)
    precis_recipe_set_static_act_scale(&list->items[i], methods[o->int8_act_scale], o->percentile);
}

bool precis_cli_parse_cc(const char *command, const char *text, int *major, int *minor) {
  const char *p = strncmp(text, "sm_", 3) == 0 ? text + 3 : text;
  char *end = NULL;
  long v = strtol(p, &end, 10);
  bool ok = end != p && v >= 0;
  if (ok && *end == '.') { /* 9.0 */
    char *end2 = NULL;
    long mi = strtol(end + 1, &end2, 10);
    ok = end2 == end + 2 && *end2 == '\0' && mi >= 0 && v >= 1 && v <= 99;
    *major = (int)v, *minor = (int)mi;
  } else if (ok) { /* 90 */
    ok = *end == '\0' && v >= 10 && v <= 999;
    *major = (int)(v / 10), *minor = (int)(v % 10);
  }
  if (!ok) fprintf(stderr, "precis %s: --cc: expected a compute capability such as 90, 8.9 or sm_80, got \"%s\"\n", command, text);
  return ok;
}

/* --cublaslt-version: 13.1.0 or cublasLtGetVersion()'s 130100 (major*10000 + minor*100 + patch). */
static bool parse_lt_version(const char *command, const char *text, int *out) {
  unsigned major = 0, minor = 0, patch = 0;
  char tail = 0;
  bool ok = false;
  if (strchr(text, '.')) {
    int got = sscanf(text, "%u.%u.%u%c", &major, &minor, &patch, &tail);
    ok = (got == 2 || got == 3) && major >= 1 && major <= 99 && minor <= 99 && patch <= 99;
  } else {
    unsigned v = 0;
    ok = sscanf(text, "%u%c", &v, &tail) == 1 && v >= 10000 && v <= 999999;
    major = v / 10000, minor = v / 100 % 100, patch = v % 100;
  }
  if (!ok) {
    fprintf(stderr, "precis %s: --cublaslt-version: expected a version such as 13.1.0 or 130100, got \"%s\"\n", command,
            text);
    return false;
  }
  *out = (int)(major * 10000 + minor * 100 + patch);
  return true;
}

bool precis_cli_logit_criteria_judged(const char *command, const char *what, const precis_report *report,
                                      const precis_criteria *criteria) {
  long unjudged = precis_report_unjudged_logit_criterion(report, criteria);
  if (unjudged < 0) return true;
  char text[96];
  precis_criterion_format(&criteria->items[unjudged], text, sizeof text);
  fprintf(stderr, "precis %s: --require %s judges no row: no workload of %s is a logit workload (an lm_head imported "
                  "with its captured inputs, output_kind \"logits\"; docs/criteria.md), so it would pass everything\n",
          command, text, what);
  return false;
}

bool precis_cli_keep_target_rows(const char *command, const char *path, precis_report *report, precis_target target) {
  const char *name = precis_target_name(target);
  size_t kept = 0;
  for (size_t i = 0; i < report->n_rows; i++) {
    precis_row *row = &report->rows[i];
    const char *t = row->target ? row->target : precis_target_name(PRECIS_TARGET_CPU_DEFAULT);
    if (strcmp(t, name) == 0) report->rows[kept++] = *row;
    else precis_row_free(row);
  }
  report->n_rows = kept;
  if (kept) return true;
  fprintf(stderr, "precis %s: %s: no rows for --target %s (run with --target %s to measure them)\n", command, path,
          name, name);
  return false;
}

int precis_cli_parse_plan_args(const char *command, int argc, char **argv, bool explain_options,
                               void (*usage)(FILE *), precis_cli_plan_args *args) {
  enum { OPT_RECIPES = 256, OPT_WORKLOADS, OPT_CC, OPT_JSON, OPT_LT_VERSION, OPT_ARCH };
  static const struct option long_options[] = {{"help", no_argument, NULL, 'h'},
                                               {"recipes", required_argument, NULL, OPT_RECIPES},
                                               {"workloads", required_argument, NULL, OPT_WORKLOADS},
                                               {"cc", required_argument, NULL, OPT_CC},
                                               {"json", no_argument, NULL, OPT_JSON},
                                               {"cublaslt-version", required_argument, NULL, OPT_LT_VERSION},
                                               {"target", required_argument, NULL, OPT_ARCH},
                                               {NULL, 0, NULL, 0}};
  memset(args, 0, sizeof *args);
  args->cc_major = 9;
  /* `precis recipes` is the catalogue: every preset, the optional ones and the high-precision family
   * included. */
  const char *recipes = strcmp(command, "recipes") == 0 ? "all,fp8-fast,fp8-block-ue8m0,mxfp6-e2m3,mxfp6-e3m2,w4a8,w4afp8,w3a16,w2a16,high-precision"
                                                      : "all";
  optind = 1;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': usage(stdout); return 0;
    case OPT_RECIPES: recipes = optarg; break;
    case OPT_WORKLOADS:
    case OPT_LT_VERSION:
      if (!explain_options) {
        fprintf(stderr, "precis %s: unknown option \"%s\" (see precis %s --help)\n", command,
                opt == OPT_WORKLOADS ? "--workloads" : "--cublaslt-version", command);
        return 2;
      }
      if (opt == OPT_WORKLOADS) args->workloads = optarg;
      else if (!parse_lt_version(command, optarg, &args->lt_version)) return 2;
      else args->lt_version_given = true;
      break;
    case OPT_CC:
      if (!precis_cli_parse_cc(command, optarg, &args->cc_major, &args->cc_minor)) return 2;
      break;
    case OPT_JSON: args->json = true; break;
    case OPT_ARCH:
      if (!precis_target_parse(optarg, &args->target)) {
        fprintf(stderr, "precis %s: --target: expected one of " PRECIS_TARGET_NAMES ", got \"%s\"\n", command, optarg);
        return 2;
      }
      args->cc_major = precis_target_cc(args->target) / 10, args->cc_minor = precis_target_cc(args->target) % 10;
      break;
    case ':': fprintf(stderr, "precis %s: %s needs a value\n", command, argv[optind - 1]); return 2;
    default: goto unknown;
    }
  }
  args->first_operand = optind;
  return precis_cli_parse_recipes(command, recipes, false, &args->recipes) ? -1 : 2;
unknown:
  fprintf(stderr, "precis %s: unknown option \"%s\" (see precis %s --help)\n", command, argv[optind - 1], command);
  return 2;
}
