/* Scale-out in one process (DESIGN §13, docs/scale-out.md): the deal of cases to parts, the gatherer
 * that builds a report from the parts' journals (a killed worker's cases become failed rows, an
 * interrupted one's stay absent), and merge's checks. The end-to-end runs are in
 * tests/py/test_shard_merge.py and tests/py/test_mpi.py; here the same code runs under the
 * sanitizers' leak checker, which cannot watch MPI ranks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/backend.h"
#include "eval/deal.h"
#include "base/fileio.h"
#include "data/generate.h"
#include "harness.h"
#include "report/journal.h"
#include "report/merge.h"
#include "eval/parts.h"
#include "numerics/recipe.h"
#include "eval/runner.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
  static char path[4][512];
  static int next;
  char *p = path[next++ % 4];
  snprintf(p, 512, "%s/%s", tmpdir, name);
  return p;
}

static char workload_name[] = "w";

static precis_workload_info workload(int64_t m, int64_t n, int64_t k, int64_t batch) {
  precis_workload_info w;
  memset(&w, 0, sizeof w);
  w.name = workload_name;
  w.m = m, w.n = n, w.k = k, w.batch = batch;
  return w;
}

TEST(deal_identical_cases_go_round_robin) {
  precis_recipe fp32;
  CHECK_OK(precis_recipe_parse("fp32", &fp32));
  precis_workload_info w[5];
  const precis_workload_info *ptrs[5];
  for (int i = 0; i < 5; i++) {
    w[i] = workload(32, 32, 32, 1);
    ptrs[i] = &w[i];
  }
  int part[5];
  CHECK_OK(precis_deal_cases(ptrs, 5, &fp32, 1, 2, part));
  /* Equal costs in dataset order, each to the lightest part (the lowest on a tie). */
  static const int expected[5] = {1, 2, 1, 2, 1};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(part[i], expected[i]);
  CHECK_OK(precis_deal_cases(ptrs, 5, &fp32, 1, 1, part));
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(part[i], 1);
}

TEST(deal_balances_by_cost) {
  precis_recipe recipes[2];
  CHECK_OK(precis_recipe_parse("fp32", &recipes[0]));
  CHECK_OK(precis_recipe_parse("int8", &recipes[1]));
  /* One big case and many small ones: the big one alone in a part, the small ones spread. */
  precis_workload_info w[7];
  const precis_workload_info *ptrs[7];
  w[0] = workload(512, 512, 512, 1);
  for (int i = 1; i < 7; i++) w[i] = workload(16 * i, 16, 64, 1);
  for (int i = 0; i < 7; i++) ptrs[i] = &w[i];
  int part[14], again[14];
  CHECK_OK(precis_deal_cases(ptrs, 7, recipes, 2, 3, part));
  CHECK_OK(precis_deal_cases(ptrs, 7, recipes, 2, 3, again));
  CHECK(memcmp(part, again, sizeof part) == 0);
  uint64_t load[3] = {0, 0, 0}, biggest_small = 0;
  for (int c = 0; c < 14; c++) {
    CHECK(part[c] >= 1 && part[c] <= 3);
    if (part[c] < 1 || part[c] > 3) return;
    uint64_t cost = precis_deal_cost(ptrs[c / 2], &recipes[c % 2]);
    load[part[c] - 1] += cost;
    if (c >= 2 && cost > biggest_small) biggest_small = cost;
  }
  CHECK(part[0] != part[1]); /* the two big cases in different parts */
  /* Greedy on sorted costs: the parts holding only small cases differ by at most one small case. */
  int third = 6 - part[0] - part[1];
  for (int c = 2; c < 14; c++) CHECK_EQ_INT(part[c], third);
  CHECK(precis_deal_cost(&w[0], &recipes[0]) == 2ull * 512 * 512 * 512 +
                                                     PRECIS_DEAL_FLOPS_PER_BYTE *
                                                         (uint64_t)precis_spec_tensor_bytes(&recipes[0].spec, 512, 512,
                                                                                            512, 1, false));
  (void)biggest_small;
}

/* A dataset of three workloads and a cpu run of part `index` of `count` into its journal. */
static const char *make_dataset(void) {
  static char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("d.h5"));
  if (precis_path_exists(path)) return path;
  const char *text = "seed: 9\nworkloads:\n"
                     "  - {name: w0, m: 8, n: 12, k: 16, batch: 2}\n"
                     "  - {name: w1, m: 24, n: 8, k: 32, batch: 1}\n"
                     "  - {name: w2, m: 4, n: 4, k: 8, batch: 1}\n";
  precis_suite suite;
  CHECK_OK(precis_suite_parse(text, strlen(text), "t.yaml", ".", &suite));
  char id[65];
  precis_gen_options opt = {.output = path, .force = true};
  CHECK_OK(precis_generate(&suite, &opt, id));
  precis_suite_free(&suite);
  return path;
}

typedef struct run_fixture {
  precis_recipe recipes[2];
  precis_run_config cfg;
  void *ctx;
} run_fixture;

static void fixture_init(run_fixture *f) {
  memset(f, 0, sizeof *f);
  CHECK_OK(precis_recipe_parse("fp32", &f->recipes[0]));
  CHECK_OK(precis_recipe_parse("bf16", &f->recipes[1]));
  precis_case_options_default(&f->cfg.case_options);
  f->cfg.case_options.min_samples = 1;
  f->cfg.case_options.max_samples = 1;
  f->cfg.case_options.warmup_calls = 0;
  f->cfg.case_options.max_time_ms = 50;
  f->cfg.dataset_path = make_dataset();
  f->cfg.recipes = f->recipes;
  f->cfg.n_recipes = 2;
  f->cfg.backend = precis_backend_cpu();
  CHECK_OK(f->cfg.backend->open(&f->ctx, &f->cfg.case_options));
  f->cfg.backend_ctx = f->ctx;
  f->cfg.progress_quiet = true;
  f->cfg.host = "testhost";
  f->cfg.rank = -1;
  f->cfg.device = -1;
}

static void fixture_free(run_fixture *f) { f->cfg.backend->close(f->ctx); }

/* Runs part `index` of `count`, journaled; returns the part's report. */
static void run_part(run_fixture *f, int index, int count, const char *journal, precis_report *report) {
  precis_report_init(report);
  report->tool_version = precis_strdup("test");
  precis_kv_set(&report->settings, "backend", "cpu");
  precis_kv_set(&report->environment, "cpu", index == 2 ? "other cpu" : "test cpu");
  report->n_recipes = 2;
  report->recipes = calloc(2, sizeof *report->recipes);
  report->recipes[0] = precis_strdup("fp32");
  report->recipes[1] = precis_strdup("bf16");
  f->cfg.part_index = index;
  f->cfg.part_count = count;
  f->cfg.journal_path = journal;
  CHECK_OK(precis_run_workloads(&f->cfg, report));
}

TEST(gather_turns_a_dead_part_into_failed_rows) {
  run_fixture f;
  fixture_init(&f);
  precis_journal journals[2];
  precis_report parts[2];
  for (int p = 0; p < 2; p++) {
    char name[64];
    snprintf(name, sizeof name, "g%d.jsonl", p + 1);
    run_part(&f, p + 1, 2, tmp_path(name), &parts[p]);
    CHECK(parts[p].n_rows > 0);
    CHECK_OK(precis_journal_read(tmp_path(name), &journals[p]));
    CHECK_EQ_INT(journals[p].part_index, p + 1);
    CHECK_EQ_INT(journals[p].run.n_rows, parts[p].n_rows);
  }
  size_t part2_rows = journals[1].run.n_rows;
  /* Part 2's worker died after its first case: drop the others from its journal. */
  while (journals[1].run.n_rows > 1) precis_row_free(&journals[1].run.rows[--journals[1].run.n_rows]);
  precis_part_end ends[2] = {{.started = true, .exit_code = 0, .rank = -1, .device = -1, .pid = 11},
                             {.started = true, .exit_code = 137, .signal = 9, .rank = 1, .device = -1, .pid = 12}};
  snprintf(ends[1].host, sizeof ends[1].host, "node2");
  precis_report report;
  precis_report_init(&report);
  CHECK_OK(precis_parts_gather(&f.cfg, journals, ends, 2, &report));
  CHECK_EQ_INT(report.n_rows, 6);
  CHECK(report.complete);
  size_t failed = 0;
  static const char *order[6][2] = {{"w0", "fp32"}, {"w0", "bf16"}, {"w1", "fp32"},
                                    {"w1", "bf16"}, {"w2", "fp32"}, {"w2", "bf16"}};
  for (size_t i = 0; i < report.n_rows && i < 6; i++) {
    const precis_row *r = &report.rows[i];
    CHECK_STR(r->workload, order[i][0]);
    CHECK_STR(r->recipe, order[i][1]);
    if (r->status != PRECIS_ROW_FAILED) continue;
    failed++;
    CHECK_EQ_INT(r->part, 2);
    CHECK_EQ_INT(r->rank, 1);
    CHECK_MSG(r->reason && strstr(r->reason, "the worker of part 2 of 2 (MPI rank 1, host ") &&
                  strstr(r->reason, "killed by signal 9"),
              "reason: %s", r->reason ? r->reason : "(null)");
  }
  CHECK_EQ_INT(failed, part2_rows - 1);
  CHECK(precis_kv_get(&report.environment, "parts") != NULL);
  CHECK(precis_kv_get(&report.settings, "shard") == NULL);
  precis_report_free(&report);
  for (int p = 0; p < 2; p++) precis_journal_free(&journals[p]);

  /* Interrupted instead: its cases are not run yet, not failed, and the report is incomplete. */
  for (int p = 0; p < 2; p++) {
    char name[64];
    snprintf(name, sizeof name, "g%d.jsonl", p + 1);
    CHECK_OK(precis_journal_read(tmp_path(name), &journals[p]));
  }
  while (journals[1].run.n_rows > 1) precis_row_free(&journals[1].run.rows[--journals[1].run.n_rows]);
  ends[1].signal = 0;
  ends[1].exit_code = 130;
  precis_report_init(&report);
  CHECK_OK(precis_parts_gather(&f.cfg, journals, ends, 2, &report));
  CHECK(!report.complete);
  CHECK_EQ_INT(report.n_rows, 6 - (part2_rows - 1));
  for (size_t i = 0; i < report.n_rows; i++) CHECK(report.rows[i].status != PRECIS_ROW_FAILED);
  precis_report_free(&report);

  /* No journal at all: an error naming how each worker ended. */
  precis_journal none[2];
  memset(none, 0, sizeof none);
  precis_report_init(&none[0].run);
  precis_report_init(&none[1].run);
  precis_report_init(&report);
  CHECK(precis_parts_gather(&f.cfg, none, ends, 2, &report) == PRECIS_E_RUNTIME);
  CHECK(strstr(precis_last_error(), "part 2 exited with status 130") != NULL);
  precis_report_free(&report);
  for (int p = 0; p < 2; p++) {
    precis_journal_free(&journals[p]);
    precis_report_free(&parts[p]);
  }
  fixture_free(&f);
}

TEST(merge_restores_order_and_refuses_gaps) {
  run_fixture f;
  fixture_init(&f);
  precis_report parts[3];
  run_part(&f, 1, 2, tmp_path("m1.jsonl"), &parts[0]);
  run_part(&f, 2, 2, tmp_path("m2.jsonl"), &parts[1]);
  run_part(&f, 2, 2, tmp_path("m3.jsonl"), &parts[2]);
  for (int p = 0; p < 3; p++) parts[p].complete = true;
  const char *names[3] = {"p1", "p2", "p2again"};
  /* Given twice. */
  precis_report merged;
  char *warnings = NULL;
  CHECK(precis_merge_reports(parts, names, 3, &merged, &warnings) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "p2 and p2again are both part 2 of 2") != NULL);
  free(warnings);
  /* Missing. */
  CHECK(precis_merge_reports(parts, names, 1, &merged, &warnings) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "missing part 2/2") != NULL);
  free(warnings);
  /* In reverse order: rows back in dataset order, the cpu difference warned about. */
  precis_report two[2];
  two[0] = parts[1];
  two[1] = parts[0];
  const char *two_names[2] = {"p2", "p1"};
  CHECK_OK(precis_merge_reports(two, two_names, 2, &merged, &warnings));
  CHECK_EQ_INT(merged.n_rows, 6);
  for (size_t i = 0; i + 1 < merged.n_rows; i++)
    CHECK(strcmp(merged.rows[i].workload, merged.rows[i + 1].workload) <= 0);
  CHECK(warnings && strstr(warnings, "environment.cpu differs between the parts: part 2 other cpu; part 1 test cpu"));
  free(warnings);
  precis_report_free(&merged);
  precis_report_free(&two[0]);
  precis_report_free(&two[1]);
  precis_report_free(&parts[2]);
  fixture_free(&f);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/precis-scaleout-XXXXXX");
  if (!mkdtemp(tmpdir)) snprintf(tmpdir, sizeof tmpdir, "/tmp");
  static const harness_test tests[] = {T(deal_identical_cases_go_round_robin), T(deal_balances_by_cost),
                                       T(gather_turns_a_dead_part_into_failed_rows),
                                       T(merge_restores_order_and_refuses_gaps)};
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", tmpdir);
  if (strcmp(tmpdir, "/tmp") != 0 && system(command) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
  return rc;
}
