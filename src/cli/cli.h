/* The command line (DESIGN §7). Each command lives in cmd_<name>.c and returns a process exit
 * code; library code below it returns statuses. */
#ifndef PRECIS_CLI_H
#define PRECIS_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "eval/backend.h"
#include "numerics/criteria.h"
#include "numerics/recipe.h"
#include "base/status.h"

/* `precis COMMAND ...` (argv[0] the program name): dispatches to a command and returns its exit code
 * (cli_main.c). The executable's main and the public precis_main call it. */
int precis_cli_main(int argc, char **argv);

int precis_cmd_info(int argc, char **argv);
int precis_cmd_gen(int argc, char **argv);
int precis_cmd_inspect(int argc, char **argv);
int precis_cmd_import(int argc, char **argv);
int precis_cmd_import_model(int argc, char **argv); /* precis import --model (cmd_import_model.c) */
int precis_cmd_run(int argc, char **argv);
int precis_cmd_recommend(int argc, char **argv);
int precis_cmd_compare(int argc, char **argv);
int precis_cmd_merge(int argc, char **argv);
int precis_cmd_accept(int argc, char **argv);
int precis_cmd_recipes(int argc, char **argv);
int precis_cmd_explain(int argc, char **argv);
int precis_cmd_plan(int argc, char **argv);
int precis_cmd_conform(int argc, char **argv);
int precis_cmd_grade(int argc, char **argv);

/* Prints "precis <command>: <message>" (the last error) to stderr and returns the exit code. */
int precis_cli_report_error(const char *command, precis_status status);

/* Takes the lock of one output (output_lock.h) for `command`, printing a take-over of a dead
 * process's lock. Returns 0, or the exit code after printing the refusal (2 when another writer
 * holds it). */
struct precis_output_lock;
int precis_cli_lock_output(const char *command, struct precis_output_lock *lock, const char *output, bool is_dir);
/* "precis COMMAND: not built yet in this version (...)" and exit code 2. */
int precis_cli_not_built(const char *command, const char *what);
/* True when argv holds -h or --help (before any "--"). */
int precis_cli_wants_help(int argc, char **argv);

/* One option of a command, for precis_cli_check_options: its long name without "--", whether it
 * takes a value (the next argument, or after "="), and its one-letter form (0: none). */
typedef struct precis_cli_option {
  const char *name;
  bool takes_value;
  char short_name;
} precis_cli_option;

/* Every command's arguments pass through here before the command parses them (cli_main.c), so that
 * all commands read options alike:
 *   - a long option is its exact name: an abbreviation (--target for --target-spread) or an unknown
 *     name is refused, naming the options it could have meant and listing the command's options;
 *   - the one-letter forms are the same everywhere: -h is --help, -o is --output and -q is --quiet
 *     on every command that has those options (rewritten in argv to the long form);
 *   - "--" ends the options; "-" alone is an operand; -h and a cluster that starts with it are help.
 * `options` ends with a {NULL} entry; --help is implied. Returns 0, or 2 after a message. */
int precis_cli_check_options(const char *command, int argc, char **argv, const precis_cli_option *options);

/* Options shared by the commands that measure (run, accept): the int8 activation scales, the
 * timing loop and the accuracy criteria. A command puts PRECIS_CLI_MEASURE_OPTIONS in its long-option
 * table, keeps its own option values below PRECIS_CLI_MEASURE_OPTION_BASE, and hands every option it
 * does not know to precis_cli_measure_option. */
enum {
  PRECIS_CLI_MEASURE_OPTION_BASE = 3000,
  PRECIS_OPT_REQUIRE = PRECIS_CLI_MEASURE_OPTION_BASE,
  PRECIS_OPT_ACT_SCALE,
  PRECIS_OPT_PERCENTILE,
  PRECIS_OPT_MIN_SAMPLES,
  PRECIS_OPT_MAX_SAMPLES,
  PRECIS_OPT_MAX_TIME,
  PRECIS_OPT_SPREAD,
  PRECIS_OPT_COLD,
  PRECIS_OPT_AUTOTUNE,
  PRECIS_OPT_TARGET,
};

#define PRECIS_CLI_MEASURE_OPTIONS                                                                          \
  {"require", required_argument, 0, PRECIS_OPT_REQUIRE},                                                   \
      {"int8-act-scale", required_argument, 0, PRECIS_OPT_ACT_SCALE},                                      \
      {"percentile", required_argument, 0, PRECIS_OPT_PERCENTILE},                                         \
      {"min-samples", required_argument, 0, PRECIS_OPT_MIN_SAMPLES},                                       \
      {"max-samples", required_argument, 0, PRECIS_OPT_MAX_SAMPLES},                                       \
      {"max-time-ms", required_argument, 0, PRECIS_OPT_MAX_TIME},                                          \
      {"target-spread", required_argument, 0, PRECIS_OPT_SPREAD}, {"cold", no_argument, 0, PRECIS_OPT_COLD}, \
      {"autotune", required_argument, 0, PRECIS_OPT_AUTOTUNE}, {"target", required_argument, 0, PRECIS_OPT_TARGET}

/* --require expressions: the parsed criteria and the text as given (for the report). */
typedef struct precis_cli_require {
  precis_criteria criteria;
  char **texts;
  size_t n_texts;
} precis_cli_require;
void precis_cli_require_free(precis_cli_require *r);

/* Returns 1 when opt was a measurement option and was applied, 0 when it is not one, -1 after
 * printing what was wrong ("precis COMMAND: --option: expected ..."). */
int precis_cli_measure_option(const char *command, int opt, const char *arg, precis_case_options *options,
                              precis_cli_require *require);
/* Checks what single options cannot (--max-samples >= --min-samples); prints and returns false. */
bool precis_cli_measure_options_check(const char *command, const precis_case_options *options);

/* The measurement settings every report records (int8 scales, the timing loop, where the criteria
 * came from). */
void precis_cli_measure_settings(const precis_case_options *options, size_t n_require, precis_kv_list *settings);

/* --backend: "auto", "cuda" or "cpu"; prints what was expected otherwise. */
bool precis_cli_backend_name_ok(const char *command, const char *name);
/* Opens the backend a --backend value asks for: auto picks cuda when a device is usable, else cpu,
 * and says so on stderr (unless quiet); cuda without a device is an error. Returns the exit code
 * (0 when *backend is open). */
int precis_cli_open_backend(const char *command, const char *name, const precis_case_options *options, bool quiet,
                            const precis_backend **backend, void **ctx);

/* "precis ARGS..." for the environment block (malloc'ed). */
char *precis_cli_command_line(int argc, char **argv);

/* The --recipes help text every command shows (one place for the syntax). */
#define PRECIS_CLI_RECIPES_HELP                                                                                  \
  "comma-separated presets and specs (default all): fp32,tf32,fp16,fp16acc16,bf16,\n"                         \
  "                        int8,fp8,fp8-rowwise,fp8-block,w8a16,w4a16,w4a16-asym,mxfp8,mxfp4,nvfp4,\n"        \
  "                        int8-sq, all, fp8-fast, fp8-block-ue8m0, mxfp6-e2m3, mxfp6-e3m2, w4a8, w4afp8\n"   \
  "                        w3a16, w2a16 (not in all),\n"                                                                  \
  "                        high-precision (fp64,3xtf32,bf16x3,bf16x6,\n"                                       \
  "                        bf16x9,ozaki-int8-3..8),\n"                                                         \
  "                        or fields a=FMT[@GRAN],b=...,acc=,out=,scale=,smooth=,split=; the\n"                 \
  "                        fields of one spec run until the next preset name (`precis recipes` lists them)\n"

/* Parses a --recipes list (presets and specs, recipe.h) into *list, appending to what it holds and
 * skipping recipes already there when skip_duplicates (accept's repeatable --recipe), else
 * refusing them. Reports the error and returns false. */
bool precis_cli_parse_recipes(const char *command, const char *text, bool skip_duplicates, precis_recipe_list *list);
/* The options of the planning commands (recipes, explain): --recipes LIST (default all), --cc CC
 * (default 90), --json, and, where `explain_options`, --workloads LIST and --cublaslt-version V. */
typedef struct precis_cli_plan_args {
  precis_recipe_list recipes;
  int cc_major, cc_minor;
  bool json;
  const char *workloads; /* NULL: all */
  int lt_version;        /* --cublaslt-version as cublasLtGetVersion() reports it */
  bool lt_version_given;
  int first_operand;     /* argv index of the first non-option argument */
  precis_target target;  /* --target ARCH (sets cc_major/cc_minor too); DEFAULT when not given */
} precis_cli_plan_args;
/* Returns -1 when parsed (free args->recipes), else the exit code (0 after --help, 2 on an error
 * it has reported). */
int precis_cli_parse_plan_args(const char *command, int argc, char **argv, bool explain_options,
                               void (*usage)(FILE *), precis_cli_plan_args *args);

/* --target ARCH on a report (recommend, plan): keeps only the rows recorded for that architecture
 * (a row without a target, from before targets, counts as sm_90, the cpu default then). Returns
 * false after saying so when none is left. */
bool precis_cli_keep_target_rows(const char *command, const char *path, precis_report *report, precis_target target);

/* false (with the message) when a --require on a logit metric would judge no row of the report:
 * no workload of it is a logit workload (what: "REPORT.json" or "the dataset"). */
bool precis_cli_logit_criteria_judged(const char *command, const char *what, const precis_report *report,
                                      const precis_criteria *criteria);

/* --cc: a compute capability as 90, 9.0 or sm_90 (major 1..99, minor 0..9). Reports the error. */
bool precis_cli_parse_cc(const char *command, const char *text, int *major, int *minor);
/* Writes --int8-act-scale into the specs it concerns (precis_recipe_set_static_act_scale). */
void precis_cli_apply_act_scale(const precis_case_options *options, precis_recipe_list *list);

/* A number in [lo, hi]; prints "precis COMMAND: OPT: expected ..." and returns false otherwise. */
bool precis_cli_parse_number(const char *command, const char *opt, const char *text, double lo, double hi, double *out);
bool precis_cli_parse_count(const char *command, const char *opt, const char *text, long long lo, long long hi,
                            long long *out);

#endif
