/* precis run: evaluate recipes on a dataset and write the reports. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <signal.h>

#include "eval/accept.h"
#include "eval/backend.h"
#include "kernels/cuda_api.h"
#include "cli.h"
#include "data/default_dataset.h"
#include "base/fileio.h"
#include "report/journal.h"
#include "run_resume.h"
#include "base/mpi_world.h"
#include "eval/parts.h"
#include "base/output_lock.h"
#include "report/report.h"
#include "eval/runner.h"
#include "precis_version.h"
#include "eval/sysinfo.h"
#include "eval/timing.h"

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
          "                        (rows of logit workloads, an imported lm_head, also kl_mean kl_p99 kl_max rkl_mean\n"
          "                        rkl_p99 rkl_max top1_agree; those do not apply to other rows)\n"
          "                        and OP one of <= < >= > ==; replaces the per-recipe defaults, and gates the exit code\n"
          "  --gate                exit 3 when a row fails the default criteria too (without --require the\n"
          "                        defaults only inform)\n"
          "  -o, --output DIR      report directory (default reports/latest, replaced on every run)\n"
          "  --resume DIR          finish the interrupted run whose journal is in DIR: the dataset, recipes and\n"
          "                        every option that decides a row are the journal's; an option given again\n"
          "                        must agree (each difference is refused, naming both values); cases in the\n"
          "                        journal are kept, the others run\n"
          "  --force               overwrite existing reports in DIR and an existing --save-outputs file\n"
          "  --save-outputs FILE   write every evaluated output to FILE.h5 (/workloads/<name>/<recipe>/c)\n"
          "  --int8-act-scale S    row (dynamic per row, default) | absmax | percentile | mse (static, from calib/a)\n"
          "  --percentile P        for --int8-act-scale percentile (default 99.99)\n"
          "  --min-samples N       timed samples at least (default 10)\n"
          "  --max-samples N       timed samples at most (default 2000)\n"
          "  --max-time-ms T       sampling budget per case (default 1000; 100 on the cpu backend)\n"
          "  --target-spread F     stop once stdev/mean <= F (default 0.02)\n"
          "  --cold                flush caches between samples\n"
          "  --autotune N          cuda: time the top N cuBLASLt candidates and keep the fastest\n"
          "  --target ARCH         sm_80, sm_89, sm_90, sm_100 or sm_120: the architecture whose accumulators\n"
          "                        and routes the cpu backend emulates (default sm_90; on cuda the device's,\n"
          "                        and a different --target is refused); every row records it\n"
          "  --shard I/N           run only part I of N (1 <= I <= N) of the cases, dealt by estimated cost\n"
          "                        (docs/scale-out.md); DIR gets a normal report of those cases and the journal\n"
          "                        journal.part-IIII-of-NNNN.jsonl; `precis merge` joins the N reports\n"
          "  --devices all|LIST    cuda: one worker process per device (e.g. --devices 0,2), each running the\n"
          "                        cases dealt to it (as --shard) with its own journal; one report. Refused on\n"
          "                        the cpu backend. Under mpirun each rank drives the GPU of its local rank\n"
          "  --reference-block BYTES  hold a workload's references (c_ref, ab_abs: 16 bytes per output) at most\n"
          "                        BYTES at a time, whole samples (default 256M; 1.5G, 500M): a large lm_head is\n"
          "                        read in blocks of samples while its metrics are computed; the rows are the same\n"
          "  --quiet               no progress lines and no table on stdout\n\n"
          "exit codes: 0 ok, 1 runtime failure (incl. a failed row), 2 bad usage or input, 3 criteria not met\n"
          "(with --require or --gate), 130/143 interrupted (a report marked incomplete is still written;\n"
          "continue it with --resume DIR)\n");
}

enum { OPT_RECIPES = 1000, OPT_WORKLOADS, OPT_BACKEND, OPT_GATE, OPT_FORCE, OPT_SAVE, OPT_QUIET, OPT_RESUME, OPT_SHARD,
       OPT_DEVICES, OPT_REFERENCE_BLOCK };

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


/* --devices all|LIST: the cuda device ordinals, one worker each. */
static int probe_device_count(void *arg) {
  (void)arg;
  precis_cuda_inventory inv;
  int count = precis_cuda_inventory_get(&inv) == PRECIS_OK ? inv.device_count : 0;
  precis_cuda_inventory_free(&inv);
  return count > 250 ? 250 : count;
}

static bool parse_devices(const char *text, const char *backend_arg, int **devices, size_t *count) {
  *devices = NULL;
  *count = 0;
  if (strcmp(backend_arg, "cpu") == 0 || !precis_backend_cuda()) {
    fprintf(stderr, "precis run: --devices %s: %s; the cpu backend runs on this machine's cores and has no "
                    "devices to spread over (leave --devices out, or split the run with --shard I/N or MPI)\n",
            text, strcmp(backend_arg, "cpu") == 0 ? "--backend cpu was asked for" : "this precis was built without the "
                                                                                "CUDA backend");
    return false;
  }
  int available = -1;
  if (strcmp(text, "all") == 0) {
    /* Counted in a child process: CUDA initialized here would be unusable in the workers. */
    long pid = 0;
    precis_part_end end = {.started = true};
    if (precis_part_spawn(probe_device_count, NULL, &pid) == PRECIS_OK) precis_part_wait(pid, &end);
    available = end.signal ? 0 : end.exit_code;
    if (available <= 0) {
      fprintf(stderr, "precis run: --devices all: no usable CUDA device (precis info says why)\n");
      return false;
    }
    *devices = calloc((size_t)available, sizeof **devices);
    if (!*devices) return false;
    for (int d = 0; d < available; d++) (*devices)[(*count)++] = d;
    return true;
  }
  size_t n = 0;
  char **items = split_list(text, &n);
  *devices = calloc(n ? n : 1, sizeof **devices);
  bool ok = items && *devices && n > 0;
  for (size_t i = 0; ok && i < n; i++) {
    char *end = NULL;
    long d = strtol(items[i], &end, 10);
    ok = end != items[i] && *end == '\0' && d >= 0 && d < 1024;
    for (size_t j = 0; ok && j < *count; j++) ok = (*devices)[j] != (int)d;
    if (ok) (*devices)[(*count)++] = (int)d;
  }
  free_list(items, n);
  if (!ok) {
    fprintf(stderr, "precis run: --devices %s: expected all or distinct device ordinals, e.g. --devices 0,2\n", text);
    free(*devices);
    *devices = NULL;
    *count = 0;
  }
  return ok;
}

/* Nothing of an earlier run in DIR: its reports and the journals of its parts. */
static bool output_free(const char *out_dir, int n_parts, int only_part) {
  const char *reports[] = {"report.json", "report.csv", "report.md", "report.html"};
  for (int i = 0; i < 4 + n_parts; i++) {
    int part = i - 3;
    if (i >= 4 && only_part > 0 && part != only_part) continue;
    char *name = i < 4 ? precis_strdup(reports[i]) : precis_journal_name(part, n_parts);
    char *p = name ? precis_asprintf("%s/%s", out_dir, name) : NULL;
    free(name);
    bool exists = p && precis_path_exists(p);
    /* A journal alone is a run killed before it wrote its reports: it can still be resumed. */
    if (exists)
      fprintf(stderr, "precis run: %s already exists (use --force to overwrite, or another -o%s)\n", p,
              i >= 4 ? ", or --resume to continue that run" : "");
    free(p);
    if (exists) return false;
  }
  return true;
}

/* One part of a run, measured by this process (a run in one part, a shard) or by a worker process
 * (a device or an MPI rank, parts.h). */
typedef struct part_run {
  precis_run_config cfg;
  const char *backend_arg;
  precis_cli_require *require;
  bool gate;
  const char *command_line;
  const char *out_dir;
  char host[256];
  char *journal_path; /* a worker's own (cfg.journal_path points to it) */
  bool max_time_given; /* --max-time-ms; else the backend's default budget */
  int local_rank; /* >= 0 under MPI: the cuda device is the local rank modulo the devices seen */
  const precis_backend *backend;
  void *backend_ctx;
  precis_report report;
} part_run;

/* Opens the backend, fills the report's header and runs the part. Returns an exit code when the
 * backend cannot be opened (said already), else 0 with *run_st the runner's status. */
static int measure_part(part_run *p, precis_status *run_st) {
  precis_case_options *o = &p->cfg.case_options;
  if (p->local_rank >= 0 && strcmp(p->backend_arg, "cpu") != 0) {
    precis_cuda_inventory inv;
    if (precis_cuda_inventory_get(&inv) == PRECIS_OK && inv.device_count > 0) o->device = p->local_rank % inv.device_count;
    precis_cuda_inventory_free(&inv);
    precis_clear_error();
  }
  int rc = precis_cli_open_backend("run", p->backend_arg, o, false, &p->backend, &p->backend_ctx);
  if (rc != 0) return rc;
  /* The cpu backend's timings are CPU timings of an emulation, not GPU figures: a long sampling
   * budget buys precision nobody needs, so it samples each case for PRECIS_CPU_MAX_TIME_MS unless
   * --max-time-ms says otherwise (docs/decisions.md). */
  bool cpu_budget = !p->max_time_given && strcmp(p->backend->name, "cpu") == 0;
  if (cpu_budget) o->max_time_ms = PRECIS_CPU_MAX_TIME_MS;
  precis_report *report = &p->report;
  report->tool_version = precis_strdup(PRECIS_VERSION);
  precis_sysinfo_collect(&report->environment);
  report->tool_commit = precis_strdup(precis_kv_get(&report->environment, "precis_commit"));
  p->backend->environment(p->backend_ctx, &report->environment);
  precis_kv_set(&report->environment, "command_line", p->command_line);
  report->n_recipes = p->cfg.n_recipes;
  report->recipes = calloc(p->cfg.n_recipes, sizeof *report->recipes);
  for (size_t i = 0; report->recipes && i < p->cfg.n_recipes; i++)
    report->recipes[i] = precis_strdup(p->cfg.recipes[i].name);
  size_t n_require = p->require->n_texts;
  report->criteria = p->require->texts;
  report->n_criteria = p->require->n_texts;
  p->require->texts = NULL;
  p->require->n_texts = 0;
  precis_kv_set(&report->settings, "backend", p->backend->name);
  precis_cli_measure_settings(o, n_require, &report->settings);
  precis_kv_set_int(&report->settings, "autotune", o->autotune);
  precis_kv_set(&report->settings, "timing_policy",
                cpu_budget ? "cpu backend: timings of an emulation, not GPU figures; each case is sampled for at most "
                             "max_time_ms (the cpu default; --max-time-ms changes it), at least one sample"
                           : "max_time_ms of sampling per case (DESIGN section 6)");
  precis_kv_set(&report->settings, "gate", (n_require || p->gate) ? "true" : "false");
  /* The rows' target: the device's on cuda (a --target naming another is refused: the device runs its
   * own arithmetic), --target or sm_90 on the cpu. */
  precis_target target = o->target == PRECIS_TARGET_DEFAULT ? PRECIS_TARGET_CPU_DEFAULT : o->target;
  const char *cc = precis_kv_get(&report->environment, "compute_capability");
  int cc_major = 0, cc_minor = 0;
  if (strcmp(p->backend->name, "cuda") == 0 && cc && sscanf(cc, "%d.%d", &cc_major, &cc_minor) == 2) {
    precis_target device_target = precis_target_of_cc(cc_major, cc_minor);
    if (o->target != PRECIS_TARGET_DEFAULT && o->target != device_target) {
      fprintf(stderr, "precis run: --target %s: the cuda backend runs on its device (compute capability %s, %s); "
                      "emulate %s with --backend cpu\n",
              precis_target_name(o->target), cc, precis_target_name(device_target), precis_target_name(o->target));
      return 2;
    }
    target = device_target;
  }
  p->cfg.target = target == PRECIS_TARGET_DEFAULT ? NULL : precis_target_name(target);
  p->cfg.backend = p->backend;
  p->cfg.backend_ctx = p->backend_ctx;
  /* Rows record the cuda device ordinal they ran on; the cpu backend has none. */
  p->cfg.device = strcmp(p->backend->name, "cuda") == 0 ? o->device : -1;
  *run_st = precis_run_workloads(&p->cfg, report);
  return 0;
}

/* Writes the reports of a run (also an interrupted or failed one: every row measured is kept)
 * and returns its exit code. */
static int finish_report(precis_report *report, const char *out_dir, precis_status run_st, bool quiet, bool gate) {
  char run_error[2048];
  snprintf(run_error, sizeof run_error, "%s", precis_last_error());
  precis_status st = precis_report_write_all(report, out_dir, true);
  if (st != PRECIS_OK) {
    if (run_st != PRECIS_OK) fprintf(stderr, "precis run: %s\n", run_error);
    return precis_cli_report_error("run", st);
  }
  if (!quiet) {
    precis_report_print_table(report, stdout);
    char *json_path = precis_asprintf("%s/report.json", out_dir);
    precis_report_print_answer(report, json_path ? json_path : "report.json", stdout);
    free(json_path);
  }
  fprintf(stderr, "precis: reports written to %s/ (report.json, report.csv, report.md, report.html)%s\n", out_dir,
          report->complete ? "" : "; the report is marked incomplete");
  if (run_st != PRECIS_OK) {
    fprintf(stderr, "precis run: %s\n", run_error);
    return precis_status_exit_code(run_st);
  }
  bool any_failed = false, any_fail_verdict = false;
  for (size_t i = 0; i < report->n_rows; i++) {
    any_failed = any_failed || report->rows[i].status == PRECIS_ROW_FAILED;
    any_fail_verdict = any_fail_verdict || report->rows[i].verdict == PRECIS_VERDICT_FAIL;
  }
  if (any_failed) {
    fprintf(stderr, "precis run: some cases failed (status failed in the report)\n");
    return 1;
  }
  if (any_fail_verdict && (report->n_criteria || gate)) {
    fprintf(stderr, "precis run: criteria not met (see verdicts)\n");
    return 3;
  }
  /* A gate on kl_mean or top1_agree over a dataset without logit workloads measured nothing: not a
   * pass. (The reports are written; the exit says the requirement was not judged.) */
  precis_criteria asked = {0};
  for (size_t i = 0; i < report->n_criteria && asked.count < PRECIS_MAX_CRITERIA; i++)
    if (precis_criterion_parse(report->criteria[i], &asked.items[asked.count]) == PRECIS_OK) asked.count++;
  if (report->n_rows > 0 && !precis_cli_logit_criteria_judged("run", "the dataset", report, &asked)) return 3;
  return 0;
}

/* A worker process: measures its part into its journal and ends with a run's exit status. */
static int part_worker(void *arg) {
  part_run *p = arg;
  precis_status run_st = PRECIS_OK;
  /* A part that had not started when the run was stopped has no journal to resume: it starts. */
  if (p->cfg.resume && !precis_path_exists(p->cfg.journal_path)) p->cfg.resume = false;
  int rc = measure_part(p, &run_st);
  if (rc == 0 && run_st != PRECIS_OK) {
    if (run_st != PRECIS_E_INTERRUPTED)
      fprintf(stderr, "precis run: part %d of %d: %s\n", p->cfg.part_index, p->cfg.part_count, precis_last_error());
    rc = precis_status_exit_code(run_st);
  }
  if (p->backend) p->backend->close(p->backend_ctx);
  precis_report_free(&p->report);
  return rc;
}

/* How a rank's worker ended, as text for MPI: "exit_code signal pid host". */
static void end_to_text(const precis_part_end *end, char *buf, size_t len) {
  snprintf(buf, len, "%d %d %ld %s", end->exit_code, end->signal, end->pid, end->host);
}

static void end_from_text(const char *text, int rank, precis_part_end *end) {
  memset(end, 0, sizeof *end);
  end->rank = rank;
  end->device = -1;
  int used = 0;
  if (text && sscanf(text, "%d %d %ld %n", &end->exit_code, &end->signal, &end->pid, &used) >= 3) {
    end->started = true;
    snprintf(end->host, sizeof end->host, "%s", text + used);
  }
}

/* The run split over devices (one worker process each) or MPI ranks (one worker per rank), then
 * gathered into one report by this process or rank 0. Returns the exit code. */
static int run_in_parts(part_run *base, const precis_mpi_world *mpi, const int *devices, int n_parts, bool quiet) {
  int first = mpi->active ? mpi->rank : 0, mine = mpi->active ? 1 : n_parts;
  part_run *runs = calloc((size_t)mine, sizeof *runs);
  precis_part_end *ends = calloc((size_t)n_parts, sizeof *ends);
  precis_journal *journals = calloc((size_t)n_parts, sizeof *journals);
  char **texts = calloc((size_t)n_parts, sizeof *texts), **end_texts = calloc((size_t)n_parts, sizeof *end_texts);
  size_t *lens = calloc((size_t)n_parts, sizeof *lens), *end_lens = calloc((size_t)n_parts, sizeof *end_lens);
  char *my_journal = NULL;
  size_t my_journal_len = 0;
  precis_report report;
  precis_report_init(&report);
  int rc = 1;
  if (!runs || !ends || !journals || !texts || !end_texts || !lens || !end_lens) {
    fprintf(stderr, "precis run: out of memory\n");
    goto done;
  }
  for (int p = 0; p < n_parts; p++) {
    precis_report_init(&journals[p].run);
    ends[p].rank = ends[p].device = -1;
  }
  for (int i = 0; i < mine; i++) {
    int p = first + i;
    part_run *r = &runs[i];
    *r = *base;
    precis_report_init(&r->report);
    r->cfg.host = r->host;
    r->cfg.part_index = p + 1;
    r->cfg.part_count = n_parts;
    char *name = precis_journal_name(p + 1, n_parts);
    r->journal_path = name ? precis_asprintf("%s/%s", base->out_dir, name) : NULL;
    r->cfg.journal_path = r->journal_path;
    free(name);
    if (mpi->active) {
      r->cfg.rank = mpi->rank;
      r->local_rank = mpi->local_rank;
    } else {
      r->cfg.case_options.device = devices[p];
    }
    ends[p].rank = r->cfg.rank;
    ends[p].device = mpi->active ? -1 : devices[p];
    snprintf(ends[p].host, sizeof ends[p].host, "%s", r->host);
    if (r->cfg.journal_path && precis_part_spawn(part_worker, r, &ends[p].pid) == PRECIS_OK) ends[p].started = true;
    else fprintf(stderr, "precis run: part %d of %d: %s\n", p + 1, n_parts, precis_last_error());
  }
  for (int i = 0; i < mine; i++)
    if (ends[first + i].started) precis_part_wait(ends[first + i].pid, &ends[first + i]);

  if (mpi->active) {
    /* Rank 0 gathers every rank's journal and how its worker ended; a journal is read back from
     * this rank's own file, so the output directory need not be shared between nodes. */
    char end_text[400];
    end_to_text(&ends[first], end_text, sizeof end_text);
    if (!ends[first].started) end_text[0] = '\0';
    if (!runs[0].cfg.journal_path || precis_read_file(runs[0].cfg.journal_path, &my_journal, &my_journal_len) != PRECIS_OK) {
      my_journal = NULL;
      my_journal_len = 0;
    }
    precis_status a = precis_mpi_gather_text(mpi, end_text, strlen(end_text), end_texts, end_lens);
    precis_status b = precis_mpi_gather_text(mpi, my_journal ? my_journal : "", my_journal_len, texts, lens);
    if (mpi->rank != 0) {
      rc = 0;
      goto done;
    }
    if (a != PRECIS_OK || b != PRECIS_OK) {
      rc = precis_cli_report_error("run", a != PRECIS_OK ? a : b);
      goto done;
    }
    for (int p = 0; p < n_parts; p++) {
      end_from_text(end_texts[p], p, &ends[p]);
      if (lens[p] == 0) continue;
      char *name = precis_asprintf("rank %d's journal", p);
      if (precis_journal_parse(name ? name : "journal", texts[p], lens[p], &journals[p]) != PRECIS_OK)
        fprintf(stderr, "precis run: %s\n", precis_last_error());
      free(name);
    }
  } else {
    for (int p = 0; p < n_parts; p++) {
      if (!runs[p].cfg.journal_path || !precis_path_exists(runs[p].cfg.journal_path)) continue;
      if (precis_journal_read(runs[p].cfg.journal_path, &journals[p]) != PRECIS_OK)
        fprintf(stderr, "precis run: %s\n", precis_last_error());
    }
  }
  precis_status st = precis_parts_gather(&base->cfg, journals, ends, n_parts, &report);
  if (st != PRECIS_OK) {
    rc = precis_cli_report_error("run", st);
    goto done;
  }
  precis_status run_st = PRECIS_OK;
  for (int p = 0; p < n_parts; p++) {
    char how[160];
    precis_part_end_describe(&ends[p], how, sizeof how);
    if (!precis_part_end_normal(&ends[p]))
      fprintf(stderr, "precis run: the worker of part %d of %d %s\n", p + 1, n_parts, how);
    if (precis_part_end_interrupted(&ends[p]) && run_st == PRECIS_OK) {
      if (!precis_interrupt_signal) precis_interrupt_signal = ends[p].exit_code == 143 || ends[p].signal == SIGTERM ? SIGTERM : SIGINT;
      run_st = precis_fail(PRECIS_E_INTERRUPTED, "part %d of %d was interrupted: continue the run with --resume %s",
                           p + 1, n_parts, base->out_dir);
    }
  }
  rc = finish_report(&report, base->out_dir, run_st, quiet, base->gate || base->require->n_texts > 0);

done:
  for (int i = 0; runs && i < mine; i++) free(runs[i].journal_path);
  for (int p = 0; journals && p < n_parts; p++) precis_journal_free(&journals[p]);
  for (int p = 0; texts && p < n_parts; p++) free(texts[p]);
  for (int p = 0; end_texts && p < n_parts; p++) free(end_texts[p]);
  free(runs);
  free(ends);
  free(journals);
  free(texts);
  free(end_texts);
  free(lens);
  free(end_lens);
  free(my_journal);
  precis_report_free(&report);
  return rc;
}

int precis_cmd_run(int argc, char **argv) {
  static const struct option long_options[] = {
      {"recipes", required_argument, 0, OPT_RECIPES}, {"workloads", required_argument, 0, OPT_WORKLOADS},
      {"backend", required_argument, 0, OPT_BACKEND}, {"gate", no_argument, 0, OPT_GATE},
      {"output", required_argument, 0, 'o'}, {"force", no_argument, 0, OPT_FORCE},
      {"save-outputs", required_argument, 0, OPT_SAVE}, {"quiet", no_argument, 0, OPT_QUIET},
      {"resume", required_argument, 0, OPT_RESUME}, {"shard", required_argument, 0, OPT_SHARD},
      {"devices", required_argument, 0, OPT_DEVICES}, {"reference-block", required_argument, 0, OPT_REFERENCE_BLOCK},
      {"help", no_argument, 0, 'h'}, PRECIS_CLI_MEASURE_OPTIONS, {0, 0, 0, 0}};
  precis_run_config cfg;
  precis_recipe_list recipes = {0};
  memset(&cfg, 0, sizeof cfg);
  precis_case_options_default(&cfg.case_options);
  /* Negative until --max-time-ms gives it: the default depends on the backend (below). */
  cfg.case_options.max_time_ms = -1.0;
  precis_cli_require require = {0};
  char **workloads = NULL;
  size_t n_workloads = 0;
  const char *recipes_arg = "all", *backend_arg = "auto", *out_dir = NULL, *resume_dir = NULL;
  /* What was given, for a resume, which takes the rest from the journal (run_resume.h). */
  precis_run_request asked;
  memset(&asked, 0, sizeof asked);
  precis_journal resumed;
  memset(&resumed, 0, sizeof resumed);
  precis_report_init(&resumed.run);
  char *resumed_path = NULL;
  precis_output_lock dir_lock, saved_lock;
  precis_output_lock_init(&dir_lock);
  precis_output_lock_init(&saved_lock);
  bool gate = false, quiet = false, created_dir = false;
  int shard_index = 1, shard_count = 1;
  const char *devices_arg = NULL;
  int *devices = NULL;
  size_t n_devices = 0;
  precis_mpi_world mpi;
  memset(&mpi, 0, sizeof mpi);
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
    case OPT_RECIPES:
      recipes_arg = optarg;
      asked.recipes_given = true;
      break;
    case OPT_WORKLOADS:
      free_list(workloads, n_workloads);
      workloads = split_list(optarg, &n_workloads);
      asked.workloads_given = true;
      break;
    case OPT_BACKEND:
      backend_arg = optarg;
      asked.backend_given = true;
      break;
    case OPT_GATE: gate = asked.gate_given = true; break;
    case OPT_FORCE: cfg.force = true; break;
    case OPT_SAVE: cfg.save_outputs = optarg; break;
    case OPT_QUIET: quiet = true; break;
    case OPT_RESUME: resume_dir = optarg; break;
    case OPT_DEVICES: devices_arg = optarg; break;
    case OPT_REFERENCE_BLOCK: {
      long long bytes = 0;
      precis_status bytes_st = precis_accept_parse_bytes(optarg, &bytes);
      if (bytes_st != PRECIS_OK) {
        precis_error_prefix("--reference-block");
        rc = precis_cli_report_error("run", bytes_st);
        goto done;
      }
      cfg.reference_block_bytes = (uint64_t)bytes;
      break;
    }
    case OPT_SHARD:
      if (!parse_shard(optarg, &shard_index, &shard_count)) goto done;
      asked.shard_given = true;
      break;
    case ':': fprintf(stderr, "precis run: %s needs a value\n", argv[optind - 1]); goto done;
    default: {
      int handled = precis_cli_measure_option("run", opt, optarg, &cfg.case_options, &require);
      if (handled < 0) goto done;
      if (handled == 0) {
        fprintf(stderr, "precis run: unknown option \"%s\" (see precis run --help)\n", argv[optind - 1]);
        goto done;
      }
      if (opt >= PRECIS_CLI_MEASURE_OPTION_BASE && opt - PRECIS_CLI_MEASURE_OPTION_BASE < PRECIS_RUN_MEASURE_OPTIONS)
        asked.measure_given[opt - PRECIS_CLI_MEASURE_OPTION_BASE] = true;
    }
    }
  }
  bool max_time_given = cfg.case_options.max_time_ms >= 0;
  if (!max_time_given) {
    precis_case_options defaults;
    precis_case_options_default(&defaults);
    cfg.case_options.max_time_ms = defaults.max_time_ms;
  }
  /* A resume checks them once it has taken the rest from the journal (below). */
  if (!resume_dir && !precis_cli_measure_options_check("run", &cfg.case_options)) goto done;
  if (optind < argc - 1) {
    fprintf(stderr, "precis run: expected at most one dataset, got \"%s\" and \"%s\"\n", argv[optind], argv[optind + 1]);
    goto done;
  }
  if (!precis_cli_backend_name_ok("run", backend_arg)) goto done;
  /* A resume parses its recipes once it has read the journal (below). */
  if (!resume_dir && !precis_cli_parse_recipes("run", recipes_arg, false, &recipes)) goto done;
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

  /* Parts at once: one worker process per device, or per MPI rank (parts.h). */
  int launcher_ranks = precis_mpi_launcher_size();
  if (launcher_ranks > 1 && !precis_mpi_built()) {
    fprintf(stderr, "precis run: started by an MPI launcher as one of %d ranks, but this precis was built without "
                    "MPI (configure with -DPRECIS_MPI=ON; docs/scale-out.md): every rank would run the whole run\n",
            launcher_ranks);
    goto done;
  }
  if (devices_arg && !parse_devices(devices_arg, backend_arg, &devices, &n_devices)) goto done;
  /* Devices are GPUs: a worker whose device cannot be opened fails, never falls back to the cpu. */
  if (devices) {
    backend_arg = "cuda";
    asked.backend_given = true;
  }
  if ((devices || launcher_ranks > 1) && shard_count > 1) {
    fprintf(stderr, "precis run: --shard splits a run over separate jobs; %s splits it already (use one or the "
                    "other)\n",
            devices ? "--devices" : "an MPI launch");
    goto done;
  }
  if ((devices || launcher_ranks > 1) && cfg.save_outputs) {
    fprintf(stderr, "precis run: --save-outputs cannot be combined with %s (one file, several writers)\n",
            devices ? "--devices" : "an MPI launch");
    goto done;
  }
  if (devices && launcher_ranks > 1) {
    fprintf(stderr, "precis run: under MPI each rank drives the GPU of its local rank: leave --devices out\n");
    goto done;
  }
  if ((st = precis_mpi_join(&mpi)) != PRECIS_OK) {
    rc = precis_cli_report_error("run", st);
    goto done;
  }
  int n_parts = mpi.active ? mpi.size : devices ? (int)n_devices : shard_count;
  bool in_parts = mpi.active || devices;
  bool gatherer = !mpi.active || mpi.rank == 0;

  /* The report directory is checked before any work, so that a refusal costs nothing. Under MPI
   * rank 0 checks and locks it; the other ranks only write their part's journal there (or into a
   * directory of that name on their node). */
  bool default_out = out_dir == NULL;
  if (default_out) out_dir = "reports/latest";
  if (gatherer) {
    /* One writer per output: taken before anything is written into them (and before looking at
     * what is there, which a live writer may be changing), held to the end. */
    created_dir = !precis_path_exists(out_dir);
    st = precis_mkdirs(out_dir);
    if (st != PRECIS_OK) rc = precis_cli_report_error("run", st);
    else if ((rc = precis_cli_lock_output("run", &dir_lock, out_dir, true)) == 0 && cfg.save_outputs)
      rc = precis_cli_lock_output("run", &saved_lock, cfg.save_outputs, false);
    if (rc == 0 && !default_out && !cfg.force && !output_free(out_dir, in_parts ? n_parts : shard_count,
                                                             in_parts ? 0 : shard_index))
      rc = 2;
    if (rc == 0 && cfg.save_outputs && !cfg.force && precis_path_exists(cfg.save_outputs)) {
      fprintf(stderr, "precis run: %s already exists (use --force to overwrite)\n", cfg.save_outputs);
      rc = 2;
    }
  }
  rc = precis_mpi_bcast_int(&mpi, rc);
  if (rc != 0) goto done;
  rc = 2;
  if (!gatherer && (st = precis_mkdirs(out_dir)) != PRECIS_OK) {
    rc = precis_cli_report_error("run", st);
    goto done;
  }

  if (cfg.resume) {
    /* Resume finishes the run that was started: what was not given again is the journal's, and
     * what was must agree with it. */
    asked.recipes_arg = recipes_arg;
    asked.workloads = workloads;
    asked.n_workloads = n_workloads;
    workloads = NULL;
    n_workloads = 0;
    asked.backend_arg = backend_arg;
    asked.gate = gate;
    asked.options = &cfg.case_options;
    asked.require = &require;
    asked.max_time_given = &max_time_given;
    asked.shard_index = shard_index;
    asked.shard_count = shard_count;
    if ((rc = precis_run_resume_read(out_dir, in_parts ? n_parts : shard_count,
                                     in_parts ? (mpi.active ? mpi.rank + 1 : 1) : shard_index,
                                     !in_parts && !asked.shard_given, &asked, &resumed, &resumed_path)) != 0 ||
        (rc = precis_run_resume_adopt(&resumed, resumed_path, &asked)) != 0)
      goto done;
    rc = 2;
    recipes_arg = asked.recipes_arg;
    backend_arg = asked.backend_arg;
    gate = asked.gate;
    shard_index = asked.shard_index;
    shard_count = asked.shard_count;
    workloads = asked.workloads;
    n_workloads = asked.n_workloads;
    asked.workloads = NULL;
    asked.n_workloads = 0;
    if (!max_time_given) {
      precis_case_options defaults;
      precis_case_options_default(&defaults);
      cfg.case_options.max_time_ms = defaults.max_time_ms;
    }
    if (!precis_cli_measure_options_check("run", &cfg.case_options)) goto done;
    if (!precis_cli_parse_recipes("run", recipes_arg, false, &recipes)) goto done;
  }
  precis_cli_apply_act_scale(&cfg.case_options, &recipes);
  cfg.recipes = recipes.items;
  cfg.n_recipes = recipes.count;

  if (optind < argc) dataset_path = precis_strdup(argv[optind]);
  else if (cfg.resume) {
    /* Without FILE.h5 a resume continues on the dataset its journal names, not on the default one. */
    if (!resumed.run.dataset_path || !precis_path_exists(resumed.run.dataset_path)) {
      fprintf(stderr, "precis run: --resume %s: the dataset its journal %s names (%s) is not there: give FILE.h5\n",
              out_dir, resumed_path, resumed.run.dataset_path ? resumed.run.dataset_path : "none");
      goto done;
    }
    dataset_path = precis_strdup(resumed.run.dataset_path);
  } else {
    st = precis_default_dataset_path(&dataset_path);
    if (st != PRECIS_OK) {
      rc = precis_cli_report_error("run", st);
      goto done;
    }
  }

  part_run part;
  memset(&part, 0, sizeof part);
  precis_report_init(&part.report);
  part.cfg = cfg;
  part.cfg.dataset_path = dataset_path;
  part.cfg.workloads = workloads;
  part.cfg.n_workloads = n_workloads;
  part.cfg.require = require.criteria.count ? &require.criteria : NULL;
  part.cfg.progress_live = !quiet && isatty(STDERR_FILENO) && !in_parts;
  part.cfg.progress_quiet = quiet;
  part.cfg.fault_inject = getenv("PRECIS_FAULT_INJECT");
  part.cfg.part_index = shard_index;
  part.cfg.part_count = shard_count;
  if (gethostname(part.host, sizeof part.host) != 0) part.host[0] = '\0';
  part.host[sizeof part.host - 1] = '\0';
  part.cfg.host = part.host;
  part.cfg.rank = -1;
  part.local_rank = -1;
  part.backend_arg = backend_arg;
  part.require = &require;
  part.gate = gate;
  part.command_line = command_line;
  part.out_dir = out_dir;
  part.max_time_given = max_time_given;

  precis_install_signal_handlers();
  if (in_parts) {
    rc = run_in_parts(&part, &mpi, devices, n_parts, quiet);
    goto done;
  }

  /* A run in one part writes journal.jsonl; a shard its part's journal (journal.h). */
  char *journal_name = precis_journal_name(shard_index, shard_count);
  journal_path = journal_name ? precis_asprintf("%s/%s", out_dir, journal_name) : NULL;
  free(journal_name);
  if (!journal_path) {
    fprintf(stderr, "precis run: out of memory\n");
    rc = 1;
    goto done;
  }
  part.cfg.journal_path = journal_path;
  precis_status run_st = PRECIS_OK;
  rc = measure_part(&part, &run_st);
  backend = part.backend;
  backend_ctx = part.backend_ctx;
  report = part.report;
  if (rc != 0) goto done;
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
  rc = finish_report(&report, out_dir, run_st, quiet, gate);

done:
  precis_output_lock_release(&saved_lock);
  precis_output_lock_release(&dir_lock);
  precis_mpi_leave(&mpi);
  free(devices);
  if (created_dir) rmdir(out_dir); /* only when this run wrote nothing into it */
  if (backend) backend->close(backend_ctx);
  precis_recipe_list_free(&recipes);
  precis_report_free(&report);
  precis_cli_require_free(&require);
  free_list(workloads, n_workloads);
  precis_run_request_free(&asked);
  precis_journal_free(&resumed);
  free(resumed_path);
  free(dataset_path);
  free(journal_path);
  free(command_line);
  return rc;
}
