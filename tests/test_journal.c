/* The run journal (src/report/journal.h): header and rows round trip, a torn last line (a writer
 * killed, or a full disk) is reported and never misread, damaged lines are errors naming the line,
 * the comparison --resume makes names the setting that differs, and a write that hits a file size
 * limit is cut off again so the journal stays whole. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "harness.h"
#include "report/journal.h"
#include "report/report.h"

static char *temp_path(const char *name) {
  char *dir = precis_strdup("/tmp/precis-test-journal-XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  char *path = precis_asprintf("%s/%s", dir, name);
  free(dir);
  return path;
}

static void build_run(precis_report *r) {
  precis_report_init(r);
  r->tool_version = precis_strdup("0.1.0");
  r->dataset_path = precis_strdup("d.h5");
  r->dataset_id = precis_strdup("abc123");
  r->n_recipes = 2;
  r->recipes = calloc(2, sizeof *r->recipes);
  r->recipes[0] = precis_strdup("fp32");
  r->recipes[1] = precis_strdup("bf16");
  precis_kv_set(&r->settings, "backend", "cpu");
  precis_kv_set_int(&r->settings, "min_samples", 3);
  precis_kv_set_number(&r->settings, "max_time_ms", 12.5);
}

static void make_row(precis_row *row, const char *workload, const char *recipe, double rel_fro) {
  precis_row_init(row);
  row->workload = precis_strdup(workload);
  row->recipe = precis_strdup(recipe);
  row->m = row->n = row->k = 16, row->batch = 1;
  row->status = PRECIS_ROW_OK;
  row->verdict = PRECIS_VERDICT_PASS;
  row->error[PRECIS_METRIC_REL_FRO] = (precis_metric_value){rel_fro, rel_fro / 2, true};
  row->time.median_ms = 0.125;
  row->time.samples_ms = malloc(3 * sizeof *row->time.samples_ms);
  for (int i = 0; i < 3; i++) row->time.samples_ms[i] = 0.1 + i * 0.01;
  row->time.n_samples_ms = 3;
}

static long long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static void append_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "a");
  if (fp) {
    fputs(text, fp);
    fclose(fp);
  }
}

/* A journal with a header and the given rows (fp32/bf16 cases of workloads w0, w1, ...). */
static char *write_journal(const precis_report *run_report, int rows) {
  char *path = temp_path("journal.jsonl");
  precis_journal_run run = {run_report, NULL, 0, 0, 1};
  precis_journal_writer w;
  CHECK_OK(precis_journal_create(&w, path, &run));
  for (int i = 0; i < rows; i++) {
    precis_row row;
    char name[16];
    snprintf(name, sizeof name, "w%d", i / 2);
    make_row(&row, name, i % 2 ? "bf16" : "fp32", 1e-3 * (i + 1));
    CHECK_OK(precis_journal_append(&w, &row));
    precis_row_free(&row);
  }
  precis_journal_close(&w);
  return path;
}

TEST(round_trip_and_same_run) {
  precis_report r;
  build_run(&r);
  char *path = write_journal(&r, 3);
  precis_journal j;
  CHECK_OK(precis_journal_read(path, &j));
  CHECK_EQ_INT(j.run.n_rows, 3);
  CHECK_EQ_INT(j.torn_line, 0);
  CHECK_EQ_INT(j.valid_bytes, file_size(path));
  CHECK_STR(j.run.dataset_id, "abc123");
  CHECK(j.run.n_rows == 3 && j.run.rows[2].error[PRECIS_METRIC_REL_FRO].worst == 3e-3);
  CHECK(j.run.n_rows == 3 && j.run.rows[1].time.n_samples_ms == 3);
  precis_journal_run same = {&r, NULL, 0, 0, 1};
  char *diff = precis_journal_difference(&j, &same);
  CHECK_MSG(diff == NULL, "%s", diff);
  free(diff);
  precis_journal_free(&j);
  free(path);
  precis_report_free(&r);
}

TEST(torn_last_line_is_reported_not_misread) {
  precis_report r;
  build_run(&r);
  char *path = write_journal(&r, 2);
  long long whole = file_size(path);
  precis_row row;
  make_row(&row, "w1", "fp32", 0.5);
  char *line = precis_row_to_json_line(&row);
  precis_row_free(&row);
  /* Half a line, as a writer killed in the middle of write() leaves it. */
  char *half = precis_asprintf("%.*s", (int)(strlen(line) / 2), line);
  append_text(path, half);
  precis_journal j;
  CHECK_OK(precis_journal_read(path, &j));
  CHECK_EQ_INT(j.run.n_rows, 2);
  CHECK_EQ_INT(j.torn_line, 4);
  CHECK_EQ_INT(j.torn_bytes, strlen(half));
  CHECK_EQ_INT(j.valid_bytes, whole);
  precis_journal_free(&j);

  /* A whole object without its newline is torn too: a row is journaled when its newline is. */
  truncate(path, whole);
  append_text(path, line);
  CHECK_OK(precis_journal_read(path, &j));
  CHECK_EQ_INT(j.run.n_rows, 2);
  CHECK_EQ_INT(j.torn_line, 4);
  precis_journal_free(&j);

  /* Reopening for a resume cuts the torn tail off, so the next row starts on its own line. */
  precis_journal_writer w;
  CHECK_OK(precis_journal_reopen(&w, path, whole));
  CHECK_EQ_INT(file_size(path), whole);
  make_row(&row, "w1", "fp32", 0.25);
  CHECK_OK(precis_journal_append(&w, &row));
  precis_row_free(&row);
  precis_journal_close(&w);
  CHECK_OK(precis_journal_read(path, &j));
  CHECK_EQ_INT(j.run.n_rows, 3);
  CHECK_EQ_INT(j.torn_line, 0);
  CHECK(j.run.n_rows == 3 && j.run.rows[2].error[PRECIS_METRIC_REL_FRO].worst == 0.25);
  precis_journal_free(&j);
  free(line);
  free(half);
  free(path);
  precis_report_free(&r);
}

TEST(torn_or_missing_header_is_an_error) {
  precis_report r;
  build_run(&r);
  char *path = write_journal(&r, 0);
  long long size = file_size(path);
  truncate(path, size / 2);
  precis_journal j;
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "header line is incomplete") != NULL);
  truncate(path, 0);
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "empty") != NULL);
  free(path);
  precis_report_free(&r);
}

TEST(damaged_lines_are_errors_naming_the_line) {
  precis_report r;
  build_run(&r);
  precis_journal j;
  /* A malformed whole line in the middle is damage, not a torn tail. */
  char *path = write_journal(&r, 1);
  append_text(path, "{\"workload\": \"w1\", \"rec\n");
  append_text(path, "{}\n");
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), "journal.jsonl:3") != NULL, "%s", precis_last_error());
  free(path);

  /* Two rows of one case (two writers on one journal, before locks): refused. */
  path = write_journal(&r, 2);
  precis_row row;
  make_row(&row, "w0", "fp32", 0.5);
  char *line = precis_row_to_json_line(&row);
  precis_row_free(&row);
  append_text(path, line);
  append_text(path, "\n");
  free(line);
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), ":4: a second row for workload \"w0\", recipe \"fp32\"") != NULL, "%s",
            precis_last_error());
  free(path);

  /* A journal of an older precis: rows only, no header. */
  path = temp_path("journal.jsonl");
  make_row(&row, "w0", "fp32", 0.5);
  line = precis_row_to_json_line(&row);
  precis_row_free(&row);
  append_text(path, line);
  append_text(path, "\n");
  free(line);
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), ":1: expected the journal header") != NULL, "%s", precis_last_error());
  free(path);

  /* A NUL byte inside a line. */
  path = write_journal(&r, 0);
  FILE *fp = fopen(path, "ab");
  fwrite("{\"a\0\"}\n", 1, 7, fp);
  fclose(fp);
  CHECK(precis_journal_read(path, &j) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), ":2: a NUL byte") != NULL, "%s", precis_last_error());
  free(path);
  precis_report_free(&r);
}

static char *difference_after(void (*change)(precis_report *, precis_journal_run *)) {
  precis_report r;
  build_run(&r);
  char *path = write_journal(&r, 1);
  precis_journal j;
  CHECK_OK(precis_journal_read(path, &j));
  precis_journal_run now = {&r, NULL, 0, 0, 1};
  change(&r, &now);
  char *diff = precis_journal_difference(&j, &now);
  precis_journal_free(&j);
  free(path);
  precis_report_free(&r);
  return diff;
}

static char *const selected[] = {"w0"};
static void change_min_samples(precis_report *r, precis_journal_run *run) {
  (void)run;
  precis_kv_set_int(&r->settings, "min_samples", 10);
}
static void change_time(precis_report *r, precis_journal_run *run) {
  (void)run;
  precis_kv_set_number(&r->settings, "max_time_ms", 1000);
}
static void change_dataset(precis_report *r, precis_journal_run *run) {
  (void)run;
  free(r->dataset_id);
  r->dataset_id = precis_strdup("def456");
}
static void change_recipes(precis_report *r, precis_journal_run *run) {
  (void)run;
  free(r->recipes[1]);
  r->recipes[1] = precis_strdup("int8");
}
static void change_criteria(precis_report *r, precis_journal_run *run) {
  (void)run;
  r->n_criteria = 1;
  r->criteria = calloc(1, sizeof *r->criteria);
  r->criteria[0] = precis_strdup("rel_fro<=1e-2");
}
static void change_backend(precis_report *r, precis_journal_run *run) {
  (void)run;
  precis_kv_set(&r->settings, "backend", "cuda");
}
static void add_setting(precis_report *r, precis_journal_run *run) {
  (void)run;
  precis_kv_set(&r->settings, "cold", "true");
}
static void change_workloads(precis_report *r, precis_journal_run *run) {
  (void)r;
  run->workloads = selected;
  run->n_workloads = 1;
}
static void change_part(precis_report *r, precis_journal_run *run) {
  (void)r;
  run->part_index = 1;
  run->part_count = 4;
}
static void change_dataset_path_only(precis_report *r, precis_journal_run *run) {
  (void)run;
  free(r->dataset_path);
  r->dataset_path = precis_strdup("moved/d.h5");
}

TEST(difference_names_what_differs) {
  static const struct {
    void (*change)(precis_report *, precis_journal_run *);
    const char *expected;
  } cases[] = {
      {change_min_samples, "settings.min_samples: the journal has 3, this run 10"},
      {change_time, "settings.max_time_ms: the journal has 12.5, this run 1000"},
      {change_dataset, "dataset_id: the journal has \"abc123\", this run \"def456\""},
      {change_recipes, "settings.recipes: the journal has [\"fp32\",\"bf16\"], this run [\"fp32\",\"int8\"]"},
      {change_criteria, "settings.criteria: the journal has [], this run [\"rel_fro<=1e-2\"]"},
      {change_backend, "settings.backend: the journal has \"cpu\", this run \"cuda\""},
      {add_setting, "settings.cold: the journal has nothing, this run \"true\""},
      {change_workloads, "workloads (--workloads): the journal has null, this run [\"w0\"]"},
      {change_part, "part: the journal has {\"index\":0,\"count\":1}, this run {\"index\":1,\"count\":4}"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *diff = difference_after(cases[i].change);
    CHECK_MSG(diff && strcmp(diff, cases[i].expected) == 0, "expected \"%s\", got \"%s\"", cases[i].expected,
              diff ? diff : "(same)");
    free(diff);
  }
  /* Where the dataset lies is not what it is: a moved file resumes. */
  char *diff = difference_after(change_dataset_path_only);
  CHECK_MSG(diff == NULL, "%s", diff);
  free(diff);
}

TEST(case_key_and_part_names) {
  precis_row a, b, c;
  make_row(&a, "w0", "fp32", 1);
  make_row(&b, "w0", "fp32", 2);
  make_row(&c, "w0", "bf16", 1);
  char *ka = precis_journal_case_key(&a), *kb = precis_journal_case_key(&b), *kc = precis_journal_case_key(&c);
  CHECK(ka && kb && strcmp(ka, kb) == 0);
  CHECK(ka && kc && strcmp(ka, kc) != 0);
  free(ka), free(kb), free(kc);
  precis_row_free(&a), precis_row_free(&b), precis_row_free(&c);
  char *one = precis_journal_name(0, 1), *part = precis_journal_name(3, 16);
  CHECK_STR(one, "journal.jsonl");
  CHECK_STR(part, "journal.part-0003-of-0016.jsonl");
  free(one), free(part);
}

/* A case is its canonical spec, not the name it was run under: two specs given one name (a preset
 * name reused by --recipes spellings, or a name kept across a change of its meaning) are two cases,
 * and one spec under two names is one. Keyed by name, a resume would keep one spec's row for the
 * other, and a journal with both would be refused as damaged. */
TEST(case_key_is_the_canonical_spec) {
  static const char *spec_a = "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=none,split=none";
  static const char *spec_b = "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=none,split=none";
  precis_row a, b, c;
  make_row(&a, "w0", "int8", 1);
  make_row(&b, "w0", "int8", 2);
  make_row(&c, "w0", "my-int8", 3);
  a.spec = precis_strdup(spec_a);
  b.spec = precis_strdup(spec_b);
  c.spec = precis_strdup(spec_a);
  char *ka = precis_journal_case_key(&a), *kb = precis_journal_case_key(&b), *kc = precis_journal_case_key(&c);
  CHECK_MSG(ka && kb && strcmp(ka, kb) != 0, "two specs named int8 share the key");
  CHECK_MSG(ka && kc && strcmp(ka, kc) == 0, "one spec under two names has two keys");
  free(ka), free(kb), free(kc);
  /* Both int8 rows in one journal read back as two cases. */
  precis_report r;
  build_run(&r);
  char *path = temp_path("journal-specs.jsonl");
  precis_journal_run run = {&r, NULL, 0, 0, 1};
  precis_journal_writer w;
  CHECK_OK(precis_journal_create(&w, path, &run));
  CHECK_OK(precis_journal_append(&w, &a));
  CHECK_OK(precis_journal_append(&w, &b));
  precis_journal_close(&w);
  precis_journal j;
  precis_status st = precis_journal_read(path, &j);
  CHECK_MSG(st == PRECIS_OK, "%s", precis_last_error());
  if (st == PRECIS_OK) {
    CHECK_EQ_INT(j.rows_lines, 2);
    precis_journal_free(&j);
  }
  unlink(path);
  free(path);
  precis_report_free(&r);
  precis_row_free(&a), precis_row_free(&b), precis_row_free(&c);
}

/* Under a file size limit the line that crosses it is written in part; the writer cuts it off. */
TEST(write_past_a_file_size_limit_leaves_the_journal_whole) {
  precis_report r;
  build_run(&r);
  char *path = write_journal(&r, 1);
  long long before = file_size(path);
  pid_t child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {(rlim_t)before + 100, (rlim_t)before + 100};
    setrlimit(RLIMIT_FSIZE, &limit);
    precis_journal_writer w;
    if (precis_journal_reopen(&w, path, before) != PRECIS_OK) _exit(3);
    precis_row row;
    make_row(&row, "w0", "bf16", 0.5);
    precis_status st = precis_journal_append(&w, &row);
    _exit(st == PRECIS_E_IO && strstr(precis_last_error(), "File too large") ? 0 : 4);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  CHECK_EQ_INT(file_size(path), before);
  precis_journal j;
  CHECK_OK(precis_journal_read(path, &j));
  CHECK_EQ_INT(j.torn_line, 0);
  CHECK_EQ_INT(j.run.n_rows, 1);
  precis_journal_free(&j);
  free(path);
  precis_report_free(&r);
}

RUN_TESTS(T(round_trip_and_same_run), T(torn_last_line_is_reported_not_misread), T(torn_or_missing_header_is_an_error),
          T(damaged_lines_are_errors_naming_the_line), T(difference_names_what_differs), T(case_key_and_part_names),
          T(case_key_is_the_canonical_spec),
          T(write_past_a_file_size_limit_leaves_the_journal_whole))
