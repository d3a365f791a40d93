/* precis accept: the acceptance test at the largest input and concurrency (accept.h,
 * docs/accept.md). Exit 0 PASS, 3 FAIL, 2 bad usage or input, 1 runtime failure. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/accept.h"
#include "eval/backend.h"
#include "cli.h"
#include "kernels/cuda_api.h"
#include "data/dataset.h"
#include "data/default_dataset.h"
#include "base/fileio.h"
#include "base/output_lock.h"
#include "precis_version.h"
#include "eval/sysinfo.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: precis accept [DATASET.h5] [options]\n\n"
          "The acceptance test: sweeps batch size and concurrency for each recipe, sets a memory budget\n"
          "(tensors x workers + workspace + the measured baseline) against the measured peaks, then runs the\n"
          "largest point --repeats times and answers PASS or FAIL: fits in memory with the headroom (also\n"
          "against the peak's run-to-run spread), p95 latency per request within the target, outputs within\n"
          "the accuracy criteria. Without DATASET.h5 it uses the built-in default dataset.\n\n"
          "options:\n"
          "  --workload NAME        the workload to accept (default: the dataset's largest, by m*n*k*batch)\n"
          "  --recipe R             recipe to accept, repeatable or a comma list of presets and specs as for\n"
          "                         precis run --recipes (default fp32); each is judged\n"
          "  --max-batch B          sweep batch sizes 1, 2, 4, ... up to B (B included; default 4)\n"
          "  --batches LIST         or exactly these batch sizes, e.g. 1,8,32 (a batch B stacks B copies of each\n"
          "                         held-out sample's m rows of a: B*m rows)\n"
          "  --concurrency N        sweep 1, 2, 4, ... up to N workers (N included; default 1)\n"
          "  --concurrency-list L   or exactly these worker counts, e.g. 1,3\n"
          "  --latency-target MS    p95 latency per request at the acceptance point must be <= MS (default: none)\n"
          "  --headroom PCT         keep PCT%% of the memory limit free (default 10)\n"
          "  --memory-limit BYTES   the budget to judge against, e.g. 8G, 512MiB (default: cpu: MemAvailable plus\n"
          "                         this process's resident set; cuda: the device's total memory)\n"
          "  --require EXPR         accuracy criterion, repeatable (default: each recipe's default gate)\n"
          "  --repeats R            runs of the acceptance point for the peak's spread (default 3)\n"
          "  --backend B            auto (cuda when a device is usable, else cpu), cuda, cpu (default auto)\n"
          "  -o, --output DIR       accept.json, accept.md, accept.html (default reports/accept, replaced)\n"
          "  --force                overwrite existing files in an explicit -o DIR\n"
          "  --int8-act-scale S     row | absmax | percentile | mse (as precis run)\n"
          "  --percentile P         for --int8-act-scale percentile (default 99.99)\n"
          "  --min-samples N        timed samples per worker at least (default 10)\n"
          "  --max-samples N        at most (default 2000)\n"
          "  --max-time-ms T        sampling budget per worker and point (default 1000)\n"
          "  --target-spread F      stop sampling once stdev/mean <= F (default 0.02)\n"
          "  --cold                 flush caches between samples\n"
          "  --quiet                no progress lines and no summary on stdout\n\n"
          "exit codes: 0 PASS, 3 FAIL (reasons printed and in accept.json), 2 bad usage or input, 1 runtime failure\n");
}

enum {
  OPT_WORKLOAD = 1000, OPT_RECIPE, OPT_MAX_BATCH, OPT_BATCHES, OPT_CONCURRENCY, OPT_CONCURRENCY_LIST, OPT_LATENCY,
  OPT_HEADROOM, OPT_MEMORY_LIMIT, OPT_REPEATS, OPT_BACKEND, OPT_FORCE, OPT_QUIET,
};

static bool parse_number(const char *opt, const char *text, double lo, double hi, double *out) {
  return precis_cli_parse_number("accept", opt, text, lo, hi, out);
}

static bool parse_count(const char *opt, const char *text, long long lo, long long hi, long long *out) {
  return precis_cli_parse_count("accept", opt, text, lo, hi, out);
}

/* "1,2,8": strictly ascending integers in [lo, hi]. */
static bool parse_int_list(const char *opt, const char *text, long long lo, long long hi, long long *values,
                           size_t *count) {
  *count = 0;
  char *copy = precis_strdup(text);
  if (!copy) return false;
  bool ok = true;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && ok; tok = strtok_r(NULL, ",", &save)) {
    if (*count == PRECIS_ACCEPT_MAX_SWEEP) {
      fprintf(stderr, "precis accept: %s: at most %d values\n", opt, PRECIS_ACCEPT_MAX_SWEEP);
      ok = false;
      break;
    }
    long long v = 0;
    ok = parse_count(opt, tok, lo, hi, &v);
    if (ok && *count && v <= values[*count - 1]) {
      fprintf(stderr, "precis accept: %s: values must be strictly ascending (\"%s\")\n", opt, text);
      ok = false;
    }
    if (ok) values[(*count)++] = v;
  }
  free(copy);
  if (ok && *count == 0) {
    fprintf(stderr, "precis accept: %s: expected a comma-separated list, got \"%s\"\n", opt, text);
    ok = false;
  }
  return ok;
}

/* 1, 2, 4, ... below top, then top. */
static void doubling_up_to(long long top, long long *values, size_t *count) {
  *count = 0;
  for (long long v = 1; v < top && *count + 1 < PRECIS_ACCEPT_MAX_SWEEP; v *= 2) values[(*count)++] = v;
  values[(*count)++] = top;
}

/* The cuda limit: the total memory of the device the backend reports (device 0 when it does not say). */
static precis_status cuda_memory_limit(const precis_kv_list *env, long long *bytes) {
  precis_cuda_inventory inv;
  precis_status st = precis_cuda_inventory_get(&inv);
  if (st != PRECIS_OK) return st;
  const char *index_text = precis_kv_get(env, "device_index");
  int index = index_text ? atoi(index_text) : 0;
  *bytes = 0;
  for (int i = 0; i < inv.device_count; i++)
    if (inv.devices[i].index == index) *bytes = inv.devices[i].mem_total_bytes;
  precis_cuda_inventory_free(&inv);
  if (*bytes <= 0)
    return precis_fail(PRECIS_E_RUNTIME, "cannot read the total memory of CUDA device %d; give --memory-limit", index);
  return PRECIS_OK;
}

int precis_cmd_accept(int argc, char **argv) {
  static const struct option long_options[] = {
      {"workload", required_argument, 0, OPT_WORKLOAD}, {"recipe", required_argument, 0, OPT_RECIPE},
      {"recipes", required_argument, 0, OPT_RECIPE}, {"max-batch", required_argument, 0, OPT_MAX_BATCH},
      {"batches", required_argument, 0, OPT_BATCHES}, {"concurrency", required_argument, 0, OPT_CONCURRENCY},
      {"concurrency-list", required_argument, 0, OPT_CONCURRENCY_LIST},
      {"latency-target", required_argument, 0, OPT_LATENCY}, {"headroom", required_argument, 0, OPT_HEADROOM},
      {"memory-limit", required_argument, 0, OPT_MEMORY_LIMIT}, {"repeats", required_argument, 0, OPT_REPEATS},
      {"backend", required_argument, 0, OPT_BACKEND}, {"output", required_argument, 0, 'o'},
      {"force", no_argument, 0, OPT_FORCE}, {"quiet", no_argument, 0, OPT_QUIET}, {"help", no_argument, 0, 'h'},
      PRECIS_CLI_MEASURE_OPTIONS, {0, 0, 0, 0}};
  precis_accept_config cfg;
  precis_recipe_list recipes = {0};
  precis_accept_config_default(&cfg);
  precis_cli_require require = {0};
  const char *workload_arg = NULL, *backend_arg = "auto", *out_dir = NULL;
  long long max_batch = 4, max_concurrency = 1, memory_limit = 0;
  bool batches_given = false, concurrency_given = false, max_batch_given = false, max_concurrency_given = false;
  bool force = false, quiet = false;
  bool created_dir = false;
  precis_output_lock dir_lock;
  precis_output_lock_init(&dir_lock);
  char *dataset_path = NULL, *command_line = precis_cli_command_line(argc, argv), *limit_source = NULL;
  precis_dataset *ds = NULL;
  precis_workload_data data;
  memset(&data, 0, sizeof data);
  precis_accept_result result;
  precis_accept_result_init(&result);
  void *backend_ctx = NULL;
  const precis_backend *backend = NULL;
  int rc = 2;
  double v;
  long long count;
  long long list[PRECIS_ACCEPT_MAX_SWEEP];
  size_t n_list = 0;
  cfg.n_recipes = 0;

  optind = 1;
  opterr = 0;
  int opt;
  while ((opt = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': usage(stdout); rc = 0; goto done;
    case 'o': out_dir = optarg; break;
    case OPT_WORKLOAD: workload_arg = optarg; break;
    case OPT_RECIPE:
      if (!precis_cli_parse_recipes("accept", optarg, true, &recipes)) goto done;
      break;
    case OPT_MAX_BATCH:
      if (!parse_count("--max-batch", optarg, 1, 1 << 20, &max_batch)) goto done;
      max_batch_given = true;
      break;
    case OPT_BATCHES:
      if (!parse_int_list("--batches", optarg, 1, 1 << 20, list, &n_list)) goto done;
      for (size_t i = 0; i < n_list; i++) cfg.batches[i] = list[i];
      cfg.n_batches = n_list;
      batches_given = true;
      break;
    case OPT_CONCURRENCY:
      if (!parse_count("--concurrency", optarg, 1, 1024, &max_concurrency)) goto done;
      max_concurrency_given = true;
      break;
    case OPT_CONCURRENCY_LIST:
      if (!parse_int_list("--concurrency-list", optarg, 1, 1024, list, &n_list)) goto done;
      for (size_t i = 0; i < n_list; i++) cfg.concurrency[i] = (int)list[i];
      cfg.n_concurrency = n_list;
      concurrency_given = true;
      break;
    case OPT_LATENCY:
      if (!parse_number("--latency-target", optarg, 1e-9, 1e9, &cfg.latency_target_ms)) goto done;
      break;
    case OPT_HEADROOM:
      if (!parse_number("--headroom", optarg, 0, 99.999, &v)) goto done;
      cfg.headroom = v / 100.0;
      break;
    case OPT_MEMORY_LIMIT: {
      precis_status st = precis_accept_parse_bytes(optarg, &memory_limit);
      if (st != PRECIS_OK) {
        rc = precis_cli_report_error("accept", st);
        goto done;
      }
      break;
    }
    case OPT_REPEATS:
      if (!parse_count("--repeats", optarg, 1, 100, &count)) goto done;
      cfg.repeats = (int)count;
      break;
    case OPT_BACKEND: backend_arg = optarg; break;
    case OPT_FORCE: force = true; break;
    case OPT_QUIET: quiet = true; break;
    case ':': fprintf(stderr, "precis accept: %s needs a value\n", argv[optind - 1]); goto done;
    default: {
      int handled = precis_cli_measure_option("accept", opt, optarg, &cfg.case_options, &require);
      if (handled < 0) goto done;
      if (handled == 0) {
        fprintf(stderr, "precis accept: unknown option \"%s\" (see precis accept --help)\n", argv[optind - 1]);
        goto done;
      }
    }
    }
  }
  if (batches_given && max_batch_given) {
    fprintf(stderr, "precis accept: give either --max-batch or --batches\n");
    goto done;
  }
  if (concurrency_given && max_concurrency_given) {
    fprintf(stderr, "precis accept: give either --concurrency or --concurrency-list\n");
    goto done;
  }
  if (!precis_cli_measure_options_check("accept", &cfg.case_options)) goto done;
  if (optind < argc - 1) {
    fprintf(stderr, "precis accept: expected at most one dataset, got \"%s\" and \"%s\"\n", argv[optind], argv[optind + 1]);
    goto done;
  }
  if (!precis_cli_backend_name_ok("accept", backend_arg)) goto done;
  if (recipes.count == 0 && !precis_cli_parse_recipes("accept", precis_recipe_preset_baseline()->name, true, &recipes))
    goto done;
  precis_cli_apply_act_scale(&cfg.case_options, &recipes);
  cfg.recipes = recipes.items;
  cfg.n_recipes = recipes.count;
  if (!batches_given) doubling_up_to(max_batch, cfg.batches, &cfg.n_batches);
  if (!concurrency_given) {
    doubling_up_to(max_concurrency, list, &n_list);
    for (size_t i = 0; i < n_list; i++) cfg.concurrency[i] = (int)list[i];
    cfg.n_concurrency = n_list;
  }
  cfg.require = require.criteria.count ? &require.criteria : NULL;
  cfg.progress = !quiet;

  bool default_out = out_dir == NULL;
  if (default_out) out_dir = "reports/accept";
  if (default_out) force = true;
  else if (!force) {
    static const char *names[] = {"accept.json", "accept.md", "accept.html"};
    for (size_t i = 0; i < 3; i++) {
      char *p = precis_asprintf("%s/%s", out_dir, names[i]);
      bool exists = p && precis_path_exists(p);
      if (exists) fprintf(stderr, "precis accept: %s already exists (use --force to overwrite, or another -o)\n", p);
      free(p);
      if (exists) goto done;
    }
  }

  precis_status st;
  if (optind < argc) dataset_path = precis_strdup(argv[optind]);
  else {
    st = precis_default_dataset_path(&dataset_path);
    if (st != PRECIS_OK) {
      rc = precis_cli_report_error("accept", st);
      goto done;
    }
  }
  st = precis_dataset_open(dataset_path, &ds);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  size_t wi = ds->n_workloads;
  if (workload_arg) {
    for (size_t i = 0; i < ds->n_workloads; i++)
      if (strcmp(ds->workloads[i].name, workload_arg) == 0) wi = i;
    if (wi == ds->n_workloads) {
      fprintf(stderr, "precis accept: %s: no workload named \"%s\" (it has:", dataset_path, workload_arg);
      for (size_t i = 0; i < ds->n_workloads; i++) fprintf(stderr, " %s", ds->workloads[i].name);
      fprintf(stderr, ")\n");
      goto done;
    }
  } else {
    double best = -1;
    for (size_t i = 0; i < ds->n_workloads; i++) {
      const precis_workload_info *w = &ds->workloads[i];
      double size = (double)w->m * (double)w->n * (double)w->k * (double)w->batch;
      if (size > best) best = size, wi = i;
    }
    if (wi == ds->n_workloads) {
      fprintf(stderr, "precis accept: %s: the dataset has no workload\n", dataset_path);
      goto done;
    }
    if (!quiet)
      fprintf(stderr, "precis accept: workload %s (the dataset's largest; choose another with --workload)\n",
              ds->workloads[wi].name);
  }

  rc = precis_cli_open_backend("accept", backend_arg, &cfg.case_options, quiet, &backend, &backend_ctx);
  if (rc != 0) goto done;
  rc = 2;
  cfg.backend = backend;
  cfg.backend_ctx = backend_ctx;
  bool on_cuda = strcmp(backend->name, "cuda") == 0;
  cfg.workspace_bytes = on_cuda ? PRECIS_ACCEPT_CUDA_WORKSPACE_BYTES : 0;

  result.tool_version = precis_strdup(PRECIS_VERSION);
  precis_sysinfo_collect(&result.environment);
  backend->environment(backend_ctx, &result.environment);
  precis_kv_set(&result.environment, "command_line", command_line);

  if (memory_limit > 0) limit_source = precis_strdup("--memory-limit");
  else if (on_cuda) {
    st = cuda_memory_limit(&result.environment, &memory_limit);
    limit_source = precis_strdup("the device's total memory");
  } else {
    st = precis_accept_host_memory_limit(&memory_limit);
    limit_source = precis_strdup("MemAvailable + this process's resident set, read at start");
  }
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  cfg.memory_limit_bytes = memory_limit;
  cfg.memory_limit_source = limit_source;

  st = precis_dataset_load(ds, wi, &data);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  result.dataset_path = precis_strdup(dataset_path);
  const char *content_id = NULL;
  if ((st = precis_dataset_content_id(ds, &content_id)) != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  result.dataset_id = precis_strdup(content_id);
  size_t n_require = require.n_texts;
  result.criteria_text = require.texts;
  result.n_criteria_text = require.n_texts;
  require.texts = NULL;
  require.n_texts = 0;
  precis_kv_set(&result.settings, "backend", backend->name);
  precis_cli_measure_settings(&cfg.case_options, n_require, &result.settings);
  precis_kv_set_int(&result.settings, "workspace_bytes_per_worker", cfg.workspace_bytes);

  /* One writer per output directory, from before the first write to the last. */
  created_dir = !precis_path_exists(out_dir);
  st = precis_mkdirs(out_dir);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  if ((rc = precis_cli_lock_output("accept", &dir_lock, out_dir, true)) != 0) goto done;
  rc = 2;
  precis_install_signal_handlers();
  precis_status run_st = precis_accept_run(&cfg, &ds->workloads[wi], &data, &result);
  if (run_st != PRECIS_OK && run_st != PRECIS_E_INTERRUPTED) {
    rc = precis_cli_report_error("accept", run_st);
    goto done;
  }
  char run_error[1024];
  snprintf(run_error, sizeof run_error, "%s", precis_last_error());
  st = precis_accept_write_all(&result, out_dir, force);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("accept", st);
    goto done;
  }
  if (!quiet) precis_accept_print_summary(&result, stdout);
  fprintf(stderr, "precis: acceptance written to %s/ (accept.json, accept.md, accept.html)%s\n", out_dir,
          result.complete ? "" : "; incomplete");
  if (run_st != PRECIS_OK) {
    fprintf(stderr, "precis accept: %s\n", run_error);
    rc = precis_status_exit_code(run_st);
    goto done;
  }
  rc = result.verdict == PRECIS_VERDICT_PASS ? 0 : 3;
  if (rc == 3) fprintf(stderr, "precis accept: FAIL (reasons above and in %s/accept.json)\n", out_dir);

done:
  precis_output_lock_release(&dir_lock);
  if (created_dir) rmdir(out_dir); /* only when nothing was written into it */
  if (backend) backend->close(backend_ctx);
  precis_recipe_list_free(&recipes);
  precis_accept_result_free(&result);
  precis_workload_data_free(&data);
  if (ds) precis_dataset_close(ds);
  precis_cli_require_free(&require);
  free(dataset_path);
  free(command_line);
  free(limit_source);
  return rc;
}
