/* precis run: evaluate recipes on a dataset and write the reports. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "default_dataset.h"
#include "fileio.h"
#include "journal.h"
#include "output_lock.h"
#include "report.h"
#include "runner.h"
#include "precis_version.h"
#include "sysinfo.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: precis run [FILE.h5] [options]\n\n"
          "Evaluates each recipe on each workload of the dataset against its held-out FP64 references and\n"
          "writes report.json, report.csv, report.md and report.html. Without FILE.h5 it runs the built-in\n"
          "`default` preset (generated once into a cache directory and reused).\n\n"
          "options:\n"
          "  --recipes LIST        " PRECIS_CLI_RECIPES_HELP
          "  --workloads LIST      only these workloads\n"
          "  --backend B           auto (cuda when a device is usable, else cpu), cuda, cpu (default auto)\n"
          "  --require EXPR        accuracy criterion on the worst sample, repeatable: KEY OP NUMBER with KEY one of\n"
          "                        max_abs max_rel rel_fro rmse sqnr_db cosine mean_err max_cw nonfinite clipped\n"
          "                        and OP one of <= < >= > ==; replaces the per-recipe defaults, and gates the exit code\n"
          "  --gate                exit 3 when a row fails the default criteria too (without --require the\n"
          "                        defaults only inform)\n"
          "  -o, --output DIR      report directory (default reports/latest, replaced on every run)\n"
          "  --resume DIR          continue the interrupted run whose reports and journal are in DIR: give the\n"
          "                        same dataset and options as that run; cases in its journal are kept, the\n"
          "                        others run; a different dataset or setting is refused, naming it\n"
          "  --force               overwrite existing reports in DIR and an existing --save-outputs file\n"
          "  --save-outputs FILE   write every evaluated output to FILE.h5 (/workloads/<name>/<recipe>/c)\n"
          "  --int8-act-scale S    row (dynamic per row, default) | absmax | percentile | mse (static, from calib/a)\n"
          "  --percentile P        for --int8-act-scale percentile (default 99.99)\n"
          "  --min-samples N       timed samples at least (default 10)\n"
          "  --max-samples N       timed samples at most (default 2000)\n"
          "  --max-time-ms T       sampling budget per case (default 1000)\n"
          "  --target-spread F     stop once stdev/mean <= F (default 0.02)\n"
          "  --cold                flush caches between samples\n"
          "  --autotune N          cuda: time the top N cuBLASLt candidates and keep the fastest\n"
          "  --shard I/N           run only part I of N (1 <= I <= N) of the cases, dealt by estimated cost\n"
          "                        (docs/scale-out.md); DIR gets a normal report of those cases and the journal\n"
          "                        journal.part-IIII-of-NNNN.jsonl; `precis merge` joins the N reports\n"
          "  --quiet               no progress lines and no table on stdout\n\n"
          "exit codes: 0 ok, 1 runtime failure (incl. a failed row), 2 bad usage or input, 3 criteria not met\n"
          "(with --require or --gate), 130/143 interrupted (a report marked incomplete is still written;\n"
          "continue it with --resume DIR)\n");
}

enum { OPT_RECIPES = 1000, OPT_WORKLOADS, OPT_BACKEND, OPT_GATE, OPT_FORCE, OPT_SAVE, OPT_QUIET, OPT_RESUME, OPT_SHARD };

/* "I/N" with 1 <= I <= N. */
static bool parse_shard(const char *text, int *index, int *count) {
  char *end = NULL;
  long i = strtol(text, &end, 10);
  if (end == text || *end != '/') goto bad;
  const char *rest = end + 1;
  long n = strtol(rest, &end, 10);
  if (end == rest || *end != '\0' || n < 1 || n > 9999 || i < 1 || i > n) goto bad;
  *index = (int)i;
  *count = (int)n;
  return true;
bad:
  fprintf(stderr, "precis run: --shard %s: expected I/N with 1 <= I <= N <= 9999 (e.g. --shard 2/8)\n", text);
  return false;
}

static char **split_list(const char *text, size_t *count) {
  size_t n = 1;
  for (const char *p = text; *p; p++) n += *p == ',';
  char **items = calloc(n, sizeof *items);
  char *copy = precis_strdup(text);
  *count = 0;
  if (!items || !copy) {
    free(items);
    free(copy);
    return NULL;
  }
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) items[(*count)++] = precis_strdup(tok);
  free(copy);
  return items;
}

static void free_list(char **items, size_t count) {
  for (size_t i = 0; i < count; i++) free(items[i]);
  free(items);
}

int precis_cmd_run(int argc, char **argv) {
  static const struct option long_options[] = {
      {"recipes", required_argument, 0, OPT_RECIPES}, {"workloads", required_argument, 0, OPT_WORKLOADS},
      {"backend", required_argument, 0, OPT_BACKEND}, {"gate", no_argument, 0, OPT_GATE},
      {"output", required_argument, 0, 'o'}, {"force", no_argument, 0, OPT_FORCE},
      {"save-outputs", required_argument, 0, OPT_SAVE}, {"quiet", no_argument, 0, OPT_QUIET},
      {"resume", required_argument, 0, OPT_RESUME}, {"shard", required_argument, 0, OPT_SHARD},
      {"help", no_argument, 0, 'h'}, PRECIS_CLI_MEASURE_OPTIONS, {0, 0, 0, 0}};
  precis_run_config cfg;
  precis_recipe_list recipes = {0};
  memset(&cfg, 0, sizeof cfg);
  precis_case_options_default(&cfg.case_options);
  precis_cli_require require = {0};
  char **workloads = NULL;
  size_t n_workloads = 0;
  const char *recipes_arg = "all", *backend_arg = "auto", *out_dir = NULL, *resume_dir = NULL;
  precis_output_lock dir_lock, saved_lock;
  precis_output_lock_init(&dir_lock);
  precis_output_lock_init(&saved_lock);
  bool gate = false, quiet = false, created_dir = false;
  int shard_index = 1, shard_count = 1;
  char *dataset_path = NULL, *journal_path = NULL, *command_line = precis_cli_command_line(argc, argv);
  precis_report report;
  precis_report_init(&report);
  void *backend_ctx = NULL;
  const precis_backend *backend = NULL;
  int rc = 2;

  optind = 1;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': usage(stdout); rc = 0; goto done;
    case 'o': out_dir = optarg; break;
    case OPT_RECIPES: recipes_arg = optarg; break;
    case OPT_WORKLOADS:
      free_list(workloads, n_workloads);
      workloads = split_list(optarg, &n_workloads);
      break;
    case OPT_BACKEND: backend_arg = optarg; break;
    case OPT_GATE: gate = true; break;
    case OPT_FORCE: cfg.force = true; break;
    case OPT_SAVE: cfg.save_outputs = optarg; break;
    case OPT_QUIET: quiet = true; break;
    case OPT_RESUME: resume_dir = optarg; break;
    case OPT_SHARD:
      if (!parse_shard(optarg, &shard_index, &shard_count)) goto done;
      break;
    case ':': fprintf(stderr, "precis run: %s needs a value\n", argv[optind - 1]); goto done;
    default: {
      int handled = precis_cli_measure_option("run", opt, optarg, &cfg.case_options, &require);
      if (handled < 0) goto done;
      if (handled == 0) {
        fprintf(stderr, "precis run: unknown option \"%s\" (see precis run --help)\n", argv[optind - 1]);
        goto done;
      }
    }
    }
  }
  if (!precis_cli_measure_options_check("run", &cfg.case_options)) goto done;
  if (optind < argc - 1) {
    fprintf(stderr, "precis run: expected at most one dataset, got \"%s\" and \"%s\"\n", argv[optind], argv[optind + 1]);
    goto done;
  }
  if (!precis_cli_backend_name_ok("run", backend_arg)) goto done;
  if (!precis_cli_parse_recipes("run", recipes_arg, false, &recipes)) goto done;
  precis_cli_apply_act_scale(&cfg.case_options, &recipes);
  cfg.recipes = recipes.items;
  cfg.n_recipes = recipes.count;
  precis_status st = PRECIS_OK;

  if (resume_dir) {
    if (out_dir && strcmp(out_dir, resume_dir) != 0) {
      fprintf(stderr, "precis run: --resume %s writes into %s: -o %s names another directory\n", resume_dir, resume_dir,
              out_dir);
      goto done;
    }
    if (cfg.save_outputs) {
      /* The outputs of the kept cases are not computed again, so the file could not be complete. */
      fprintf(stderr, "precis run: --save-outputs cannot be combined with --resume (kept cases are not run again; "
                      "run without --resume to save every output)\n");
      goto done;
    }
    if (!precis_path_exists(resume_dir)) {
      fprintf(stderr, "precis run: --resume %s: no such directory (nothing to resume)\n", resume_dir);
      goto done;
    }
    out_dir = resume_dir;
    /* The reports there are the interrupted run's own, replaced by the resumed run's. */
    cfg.force = true;
    cfg.resume = true;
  }

  /* The report directory is checked before any work, so that a refusal costs nothing. */
  bool default_out = out_dir == NULL;
  if (default_out) out_dir = "reports/latest";
  /* One writer per output: taken before anything is written into them (and before looking at
   * what is there, which a live writer may be changing), held to the end. */
  created_dir = !precis_path_exists(out_dir);
  st = precis_mkdirs(out_dir);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("run", st);
    goto done;
  }
  if ((rc = precis_cli_lock_output("run", &dir_lock, out_dir, true)) != 0) goto done;
  if (cfg.save_outputs && (rc = precis_cli_lock_output("run", &saved_lock, cfg.save_outputs, false)) != 0) goto done;
  rc = 2;
  /* A run in one part writes journal.jsonl; a shard its part's journal (journal.h). */
  char *journal_name = precis_journal_name(shard_index, shard_count);
  if (!journal_name) {
    fprintf(stderr, "precis run: out of memory\n");
    rc = 1;
    goto done;
  }
  journal_path = precis_asprintf("%s/%s", out_dir, journal_name);
  if (!default_out && !cfg.force) {
    const char *names[] = {"report.json", "report.csv", "report.md", "report.html", journal_name};
    for (size_t i = 0; i < 5; i++) {
      char *p = precis_asprintf("%s/%s", out_dir, names[i]);
      bool exists = p && precis_path_exists(p);
      /* A journal alone is a run killed before it wrote its reports: it can still be resumed. */
      if (exists)
        fprintf(stderr, "precis run: %s already exists (use --force to overwrite, or another -o%s)\n", p,
                i == 4 ? ", or --resume to continue that run" : "");
      free(p);
      if (exists) {
        free(journal_name);
        goto done;
      }
    }
  }
  free(journal_name);
  if (cfg.save_outputs && !cfg.force && precis_path_exists(cfg.save_outputs)) {
    fprintf(stderr, "precis run: %s already exists (use --force to overwrite)\n", cfg.save_outputs);
    goto done;
  }

  if (optind < argc) dataset_path = precis_strdup(argv[optind]);
  else {
    st = precis_default_dataset_path(&dataset_path);
    if (st != PRECIS_OK) {
      rc = precis_cli_report_error("run", st);
      goto done;
    }
  }

  rc = precis_cli_open_backend("run", backend_arg, &cfg.case_options, false, &backend, &backend_ctx);
  if (rc != 0) goto done;
  rc = 2;

  if (!journal_path) {
    fprintf(stderr, "precis run: out of memory\n");
    rc = 1;
    goto done;
  }

  report.tool_version = precis_strdup(PRECIS_VERSION);
  precis_sysinfo_collect(&report.environment);
  report.tool_commit = precis_strdup(precis_kv_get(&report.environment, "precis_commit"));
  backend->environment(backend_ctx, &report.environment);
  precis_kv_set(&report.environment, "command_line", command_line);
  report.n_recipes = cfg.n_recipes;
  report.recipes = calloc(cfg.n_recipes, sizeof *report.recipes);
  for (size_t i = 0; report.recipes && i < cfg.n_recipes; i++)
    report.recipes[i] = precis_strdup(cfg.recipes[i].name);
  size_t n_require = require.n_texts;
  report.criteria = require.texts;
  report.n_criteria = require.n_texts;
  require.texts = NULL;
  require.n_texts = 0;
  precis_kv_set(&report.settings, "backend", backend->name);
  precis_cli_measure_settings(&cfg.case_options, n_require, &report.settings);
  precis_kv_set_int(&report.settings, "autotune", cfg.case_options.autotune);
  precis_kv_set(&report.settings, "gate", (n_require || gate) ? "true" : "false");

  cfg.dataset_path = dataset_path;
  cfg.workloads = workloads;
  cfg.n_workloads = n_workloads;
  cfg.backend = backend;
  cfg.backend_ctx = backend_ctx;
  cfg.require = require.criteria.count ? &require.criteria : NULL;
  cfg.journal_path = journal_path;
  cfg.progress_live = !quiet && isatty(STDERR_FILENO);
  cfg.progress_quiet = quiet;
  cfg.fault_inject = getenv("PRECIS_FAULT_INJECT");
  cfg.part_index = shard_index;
  cfg.part_count = shard_count;
  char host[256] = "";
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  cfg.host = host;
  cfg.rank = -1;
  /* The cuda backend runs on its device 0 (CUDA_VISIBLE_DEVICES chooses which that is). */
  cfg.device = strcmp(backend->name, "cuda") == 0 ? 0 : -1;

  precis_install_signal_handlers();
  precis_status run_st = precis_run_workloads(&cfg, &report);
  if (run_st != PRECIS_OK && run_st != PRECIS_E_INTERRUPTED && report.n_rows == 0) {
    rc = precis_cli_report_error("run", run_st);
    if (!cfg.resume) {
      /* Nothing was measured: leave no journal (nor a directory this run created) behind. A
       * resumed run's journal is the earlier run's, and stays. */
      precis_output_lock_release(&dir_lock);
      unlink(journal_path);
      rmdir(out_dir);
    }
    goto done;
  }
  char run_error[2048];
  snprintf(run_error, sizeof run_error, "%s", precis_last_error());

  /* Every completed row is written, also after an interrupt or a whole-run failure. */
  st = precis_report_write_all(&report, out_dir, true);
  if (st != PRECIS_OK) {
    if (run_st != PRECIS_OK) fprintf(stderr, "precis run: %s\n", run_error);
    rc = precis_cli_report_error("run", st);
    goto done;
  }
  if (!quiet) precis_report_print_table(&report, stdout);
  fprintf(stderr, "precis: reports written to %s/ (report.json, report.csv, report.md, report.html)%s\n", out_dir,
          report.complete ? "" : "; the report is marked incomplete");
  if (run_st != PRECIS_OK) {
    fprintf(stderr, "precis run: %s\n", run_error);
    rc = precis_status_exit_code(run_st);
    goto done;
  }
  bool any_failed = false, any_fail_verdict = false;
  for (size_t i = 0; i < report.n_rows; i++) {
    any_failed = any_failed || report.rows[i].status == PRECIS_ROW_FAILED;
    any_fail_verdict = any_fail_verdict || report.rows[i].verdict == PRECIS_VERDICT_FAIL;
  }
  if (any_failed) {
    fprintf(stderr, "precis run: some cases failed (status failed in the report)\n");
    rc = 1;
  } else if (any_fail_verdict && (n_require || gate)) {
    fprintf(stderr, "precis run: criteria not met (see verdicts)\n");
    rc = 3;
  } else rc = 0;

done:
  precis_output_lock_release(&saved_lock);
  precis_output_lock_release(&dir_lock);
  if (created_dir) rmdir(out_dir); /* only when this run wrote nothing into it */
  if (backend) backend->close(backend_ctx);
  precis_recipe_list_free(&recipes);
  precis_report_free(&report);
  precis_cli_require_free(&require);
  free_list(workloads, n_workloads);
  free(dataset_path);
  free(journal_path);
  free(command_line);
  return rc;
}
