/* Report printers: report.json round trip (write -> read -> write is byte-identical, every number
 * exact), the journal line, escaping of hostile dataset strings in HTML/Markdown/CSV, the force
 * flag, and an incomplete report said as such. */
#include <math.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "harness.h"
#include "numerics/recipe.h"
#include "report/report.h"

static const char *const hostile_name = "<img src=x onerror=alert(1)>";
static const char *const hostile_description = "<script>alert(1)</script>";

static char *temp_dir(void) {
  char *dir = precis_strdup("/tmp/precis-test-report-XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

static void add_row(precis_report *r, const char *workload, const char *description, const char *recipe,
                    double rel_fro, double median_ms, precis_row_status status) {
  precis_row row;
  precis_row_init(&row);
  row.workload = precis_strdup(workload);
  row.description = precis_strdup(description);
  row.recipe = precis_strdup(recipe);
  row.spec = precis_strdup(precis_recipe_name_spec(recipe));
  row.recipe_description = precis_strdup("A,B \"quoted\", with comma; compute 32F");
  row.m = 64, row.n = 48, row.k = 1024, row.batch = 3;
  row.status = status;
  if (status != PRECIS_ROW_OK) {
    row.reason = precis_strdup("=cmd|' /C calc'!A0 (hostile reason)");
    precis_report_add_row(r, &row);
    return;
  }
  for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
    row.error[id].present = true;
    row.error[id].worst = rel_fro * (id + 1) / 3.0;     /* values that need 17 digits */
    row.error[id].mean = rel_fro * (id + 1) / 7.0;
  }
  row.error[PRECIS_METRIC_SQNR_DB].present = false;   /* exact: null */
  row.error[PRECIS_METRIC_MEAN_ERR].worst = -1e-300;  /* extreme magnitudes */
  row.error[PRECIS_METRIC_CLIPPED].mean = NAN;        /* present object with a null member */
  CHECK_OK(precis_criterion_parse("rel_fro<=0.01", &row.criteria.items[row.criteria.count++]));
  CHECK_OK(precis_criterion_parse("nonfinite==0", &row.criteria.items[row.criteria.count++]));
  row.verdict = rel_fro <= 0.01 ? PRECIS_VERDICT_PASS : PRECIS_VERDICT_FAIL;
  if (row.verdict == PRECIS_VERDICT_FAIL) row.verdict_detail = precis_asprintf("rel_fro=%g > 0.01", rel_fro);
  row.time.min_ms = median_ms * 0.9;
  row.time.median_ms = median_ms;
  row.time.mean_ms = median_ms * 1.01;
  row.time.p95_ms = median_ms * 1.1;
  row.time.p99_ms = median_ms * 1.2;
  row.time.stdev_ms = median_ms / 30;
  row.time.samples = 5;
  row.time.calls_per_sample = 1;
  row.time.convert_ms = 0.1 + 0.2; /* 0.30000000000000004 */
  row.time.samples_ms = malloc(5 * sizeof(double));
  row.time.n_samples_ms = 5;
  for (int i = 0; i < 5; i++) row.time.samples_ms[i] = median_ms * (0.9 + 0.05 * i) + 1e-15 * i;
  row.tflops = 2.0 * 64 * 48 * 1024 * 3 / (median_ms * 1e-3) / 1e12;
  row.memory.tensor_bytes = 6291456;
  row.memory.tracked_peak_bytes = 9007199254740991LL; /* 2^53 - 1: the largest exact integer */
  row.memory.host_peak_rss_bytes = 123456789;
  precis_kv_set(&row.details, "scales", "per row");
  precis_kv_set_number(&row.details, "clip_fraction", 1.0 / 3.0);
  precis_kv_set(&row.details, "unicode", "µs – ü \t tab");
  precis_report_add_row(r, &row);
}

static void build_report(precis_report *r) {
  precis_report_init(r);
  r->complete = true;
  r->tool_version = precis_strdup("0.1.0");
  r->tool_commit = precis_strdup("abc123");
  precis_kv_set(&r->environment, "backend", "cpu-emulation");
  precis_kv_set(&r->environment, "device", NULL);
  precis_kv_set_int(&r->environment, "cpu_cores", 2);
  precis_kv_set(&r->environment, "command_line", "precis run \"x\\y\" -o out");
  r->dataset_path = precis_strdup("/data/set.h5");
  r->dataset_id = precis_strdup("deadbeef");
  r->n_recipes = 2;
  r->recipes = calloc(2, sizeof(char *));
  r->recipes[0] = precis_strdup("fp32");
  r->recipes[1] = precis_strdup("bf16");
  r->n_criteria = 1;
  r->criteria = calloc(1, sizeof(char *));
  r->criteria[0] = precis_strdup("rel_fro<=0.01");
  precis_kv_set_number(&r->settings, "min_time_s", 0.25);
  precis_kv_set(&r->settings, "int8_act_scale", "row");
  add_row(r, "square-64", "normal(0,1)", "fp32", 1.1e-7, 2.5, PRECIS_ROW_OK);
  add_row(r, "square-64", "normal(0,1)", "bf16", 0.0029, 1.25, PRECIS_ROW_OK);
  add_row(r, hostile_name, hostile_description, "fp32", 0.2 / 3, 0.7, PRECIS_ROW_OK);
  add_row(r, hostile_name, hostile_description, "bf16", 0, 0, PRECIS_ROW_FAILED);
}

static char *read_text(const char *path) {
  char *data = NULL;
  CHECK_OK(precis_read_file(path, &data, NULL));
  return data;
}

TEST(json_round_trip_is_exact) {
  char *dir = temp_dir();
  CHECK(dir != NULL);
  if (!dir) return;
  precis_report report, back;
  build_report(&report);
  char *first = precis_asprintf("%s/a.json", dir), *second = precis_asprintf("%s/b.json", dir);
  CHECK_OK(precis_report_write_json(&report, first, false));
  CHECK_OK(precis_report_read_json(first, &back));
  CHECK_OK(precis_report_write_json(&back, second, false));
  char *a = read_text(first), *b = read_text(second);
  CHECK(a && b && strcmp(a, b) == 0);
  CHECK_EQ_INT(back.n_rows, report.n_rows);
  for (size_t i = 0; i < back.n_rows && i < report.n_rows; i++) {
    const precis_row *x = &report.rows[i], *y = &back.rows[i];
    CHECK_STR(y->workload, x->workload);
    CHECK_STR(y->description, x->description);
    CHECK_EQ_INT(y->status, x->status);
    CHECK_EQ_INT(y->verdict, x->verdict);
    CHECK_EQ_INT(y->criteria.count, x->criteria.count);
    for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
      CHECK_EQ_INT(y->error[id].present, x->error[id].present);
      if (!x->error[id].present) continue;
      CHECK(memcmp(&y->error[id].worst, &x->error[id].worst, sizeof(double)) == 0 ||
            (isnan(x->error[id].worst) && isnan(y->error[id].worst)));
      CHECK(memcmp(&y->error[id].mean, &x->error[id].mean, sizeof(double)) == 0 ||
            (isnan(x->error[id].mean) && isnan(y->error[id].mean)));
    }
    CHECK(y->time.median_ms == x->time.median_ms || (isnan(x->time.median_ms) && isnan(y->time.median_ms)));
    CHECK(y->time.convert_ms == x->time.convert_ms || isnan(x->time.convert_ms));
    CHECK_EQ_INT(y->time.n_samples_ms, x->time.n_samples_ms);
    for (size_t s = 0; s < x->time.n_samples_ms && s < y->time.n_samples_ms; s++)
      CHECK(y->time.samples_ms[s] == x->time.samples_ms[s]);
    CHECK(y->tflops == x->tflops || isnan(x->tflops));
    CHECK_EQ_INT(y->memory.tracked_peak_bytes, x->memory.tracked_peak_bytes);
    CHECK_EQ_INT(y->memory.device_peak_bytes, -1);
    CHECK_EQ_INT(y->details.count, x->details.count);
  }
  CHECK(a && strstr(a, "\"convert_ms\": 0.30000000000000004") != NULL);
  CHECK(a && strstr(a, "\"sqnr_db\": null") != NULL);
  CHECK(a && strstr(a, "\"device\": null") != NULL);
  CHECK(a && strstr(a, "\"device_peak_bytes\": null") != NULL);
  CHECK(a && strstr(a, "\"tracked_peak_bytes\": 9007199254740991") != NULL);
  CHECK(back.complete);
  CHECK_STR(back.dataset_id, "deadbeef");
  CHECK_STR(precis_kv_get(&back.settings, "int8_act_scale"), "row");
  CHECK_EQ_INT(back.n_recipes, 2);
  /* The force flag: an existing file is not replaced without it. */
  CHECK(precis_report_write_json(&report, first, false) == PRECIS_E_EXISTS);
  CHECK_OK(precis_report_write_json(&report, first, true));
  unlink(first);
  unlink(second);
  rmdir(dir);
  free(a), free(b), free(first), free(second), free(dir);
  precis_report_free(&report);
  precis_report_free(&back);
}

TEST(journal_line_round_trip) {
  precis_report report;
  build_report(&report);
  for (size_t i = 0; i < report.n_rows; i++) {
    char *line = precis_row_to_json_line(&report.rows[i]);
    CHECK(line && !strchr(line, '\n'));
    precis_row back;
    CHECK_OK(precis_row_from_json_line(line, &back));
    char *again = precis_row_to_json_line(&back);
    CHECK(line && again && strcmp(line, again) == 0);
    free(line), free(again);
    precis_row_free(&back);
  }
  precis_row bad;
  CHECK(precis_row_from_json_line("{\"workload\": \"x\"}", &bad) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "recipe") != NULL);
  precis_report_free(&report);
}

/* Rows from before specs get their preset's spec; a spec is read in canonical form; a bad one is
 * refused with the row's path. */
TEST(reader_maps_rows_to_canonical_specs) {
  precis_row row;
  CHECK_OK(precis_row_from_json_line("{\"workload\": \"w\", \"recipe\": \"int8\", \"status\": \"ok\"}", &row));
  CHECK_STR(row.spec, "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=none,split=none");
  precis_row_free(&row);
  CHECK_OK(precis_row_from_json_line("{\"workload\": \"w\", \"recipe\": \"mine\", \"status\": \"ok\"}", &row));
  CHECK(row.spec == NULL); /* an unknown name without a spec pairs by name only */
  precis_row_free(&row);
  CHECK_OK(precis_row_from_json_line("{\"workload\": \"w\", \"recipe\": \"mine\", \"spec\": \"a=bf16,out=bf16\", "
                                     "\"status\": \"ok\"}",
                                     &row));
  CHECK_STR(row.spec, "a=bf16,b=bf16,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none");
  precis_row_free(&row);
  CHECK(precis_row_from_json_line("{\"workload\": \"w\", \"recipe\": \"x\", \"spec\": \"a=fp12\", \"status\": \"ok\"}",
                                  &row) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), "spec") && strstr(precis_last_error(), "fp12"), "%s", precis_last_error());
}

static precis_status write_and_read(const char *text, precis_report *out, char **path_out) {
  char *dir = temp_dir();
  char *path = precis_asprintf("%s/bad.json", dir);
  FILE *fp = fopen(path, "w");
  fputs(text, fp);
  fclose(fp);
  precis_status st = precis_report_read_json(path, out);
  unlink(path);
  rmdir(dir);
  free(dir);
  *path_out = path;
  return st;
}

TEST(reader_names_file_and_key) {
  precis_report r;
  char *path;
  CHECK(write_and_read("{\"format\": \"something-else\"}", &r, &path) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), path) && strstr(precis_last_error(), "format"));
  free(path);
  CHECK(write_and_read("{\"format\": \"precis-report\", \"format_version\": 1, \"rows\": [{\"workload\": \"w\", "
                       "\"recipe\": \"fp32\", \"status\": \"ok\", \"time\": {\"median_ms\": \"fast\"}}]}",
                       &r, &path) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), "rows[0].time.median_ms") != NULL, "%s", precis_last_error());
  free(path);
  CHECK(write_and_read("{\"format\": \"precis-report\", \"format_version\": 2, \"rows\": []}", &r, &path) ==
        PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "format_version") != NULL);
  free(path);
  CHECK(write_and_read("{\"format\": \"precis-report\",\n \"format_version\": 1,, }", &r, &path) == PRECIS_E_INPUT);
  CHECK_MSG(strstr(precis_last_error(), ":2:") != NULL, "%s", precis_last_error());
  free(path);
}

TEST(hostile_strings_are_escaped_everywhere) {
  char *dir = temp_dir();
  precis_report report;
  build_report(&report);
  CHECK_OK(precis_report_write_all(&report, dir, false));
  char *html_path = precis_asprintf("%s/report.html", dir), *md_path = precis_asprintf("%s/report.md", dir),
       *csv_path = precis_asprintf("%s/report.csv", dir), *json_path = precis_asprintf("%s/report.json", dir);
  char *html = read_text(html_path), *md = read_text(md_path), *csv = read_text(csv_path);
  CHECK(html && !strstr(html, "<script") && !strstr(html, "<img"));
  CHECK(html && strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;") != NULL);
  CHECK(html && strstr(html, "&lt;img src=x onerror=alert(1)&gt;") != NULL);
  CHECK(md && !strstr(md, "<script") && !strstr(md, "<img"));
  CHECK(md && strstr(md, "&lt;script&gt;alert(1)&lt;/script&gt;") != NULL);
  /* The CSV keeps the text as data: quoted where RFC 4180 needs it, formula cells neutralized. */
  CHECK(csv && strstr(csv, "\n<img src=x onerror=alert(1)>,,fp32,") != NULL);
  CHECK(csv && strstr(csv, ",<script>alert(1)</script>,") != NULL);
  CHECK(csv && strstr(csv, "\"A,B \"\"quoted\"\", with comma; compute 32F\"") != NULL);
  CHECK(csv && strstr(csv, "\"'=cmd|' /C calc'!A0 (hostile reason)\"") != NULL);
  CHECK(csv && strstr(csv, ",=cmd") == NULL);
  /* Every CSV line has as many fields as the header (a quote-aware count). */
  size_t expected = 0, fields = 1, lines = 0;
  bool quoted = false;
  for (const char *p = csv; p && *p; p++) {
    if (*p == '"') quoted = !quoted;
    else if (!quoted && *p == ',') fields++;
    else if (!quoted && *p == '\n') {
      if (lines == 0) expected = fields;
      CHECK_EQ_INT(fields, expected);
      lines++;
      fields = 1;
    }
  }
  CHECK_EQ_INT(lines, 1 + report.n_rows);
  /* write_all refuses to overwrite any of the four files without force. */
  CHECK(precis_report_write_all(&report, dir, false) == PRECIS_E_EXISTS);
  CHECK_OK(precis_report_write_all(&report, dir, true));
  unlink(html_path), unlink(md_path), unlink(csv_path), unlink(json_path);
  rmdir(dir);
  free(html), free(md), free(csv);
  free(html_path), free(md_path), free(csv_path), free(json_path), free(dir);
  precis_report_free(&report);
}

TEST(incomplete_report_says_so) {
  char *dir = temp_dir();
  precis_report report;
  build_report(&report);
  report.complete = false;
  CHECK_OK(precis_report_write_all(&report, dir, false));
  char *html_path = precis_asprintf("%s/report.html", dir), *md_path = precis_asprintf("%s/report.md", dir),
       *csv_path = precis_asprintf("%s/report.csv", dir), *json_path = precis_asprintf("%s/report.json", dir);
  char *html = read_text(html_path), *md = read_text(md_path), *json = read_text(json_path);
  CHECK(html && strstr(html, "INCOMPLETE") != NULL);
  CHECK(md && strstr(md, "INCOMPLETE") != NULL);
  CHECK(json && strstr(json, "\"complete\": false") != NULL);
  char *table = NULL;
  size_t table_len = 0;
  FILE *mem = open_memstream(&table, &table_len);
  precis_report_print_table(&report, mem);
  fclose(mem);
  CHECK(table && strstr(table, "INCOMPLETE") != NULL);
  CHECK(table && strstr(table, "CPU timings") != NULL);
  CHECK(table && strstr(table, "bf16") != NULL);
  unlink(html_path), unlink(md_path), unlink(csv_path), unlink(json_path);
  rmdir(dir);
  free(html), free(md), free(json), free(table);
  free(html_path), free(md_path), free(csv_path), free(json_path), free(dir);
  precis_report_free(&report);
}

TEST(escapers) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_csv(&b, "-2+3", true);
  precis_buf_append(&b, "|");
  precis_buf_csv(&b, "-2.5", false);
  precis_buf_append(&b, "|");
  precis_buf_csv(&b, "@SUM(A1)", true);
  precis_buf_append(&b, "|");
  precis_buf_csv(&b, "plain", true);
  CHECK_STR(b.data, "\"'-2+3\"|-2.5|\"'@SUM(A1)\"|plain");
  precis_buf_free(&b);
  char *md = precis_markdown_escape("a|b`c`*d*_e_\n<x>&");
  CHECK_STR(md, "a\\|b\\`c\\`\\*d\\*\\_e\\_ &lt;x&gt;&amp;");
  free(md);
  char *html = precis_html_escape("\"'<>&");
  CHECK_STR(html, "&quot;&#39;&lt;&gt;&amp;");
  free(html);
  precis_buf_init(&b);
  precis_buf_terminal(&b, "a\x1b[2Jb", 0);
  CHECK_STR(b.data, "a?[2Jb");
  precis_buf_free(&b);
  char num[40];
  precis_format_double(num, sizeof num, 0.1);
  CHECK_STR(num, "0.1");
  precis_format_double(num, sizeof num, 1e-300);
  CHECK_STR(num, "1e-300");
  precis_format_double(num, sizeof num, NAN);
  CHECK_STR(num, "null");
}

/* Not a check by itself: with PRECIS_RENDER_REPORT=in.json and PRECIS_RENDER_DIR=dir it renders a
 * crafted report.json into every format, for tests/py/test_html_render.py (which has no other way
 * to call the printers without `precis run`). */
TEST(render_report_from_environment) {
  const char *in = getenv("PRECIS_RENDER_REPORT"), *dir = getenv("PRECIS_RENDER_DIR");
  if (!in || !dir) return;
  precis_report report;
  CHECK_OK(precis_report_read_json(in, &report));
  CHECK_OK(precis_report_write_all(&report, dir, true));
  precis_report_print_table(&report, stdout);
  precis_report_free(&report);
}

/* Non-finite and degenerate figures (an overflowed output: rel_fro inf; zero or infinite
 * throughput; no samples) must not stall or break any printer. */
TEST(non_finite_figures_are_printed) {
  char *dir = temp_dir();
  precis_report report;
  build_report(&report);
  report.rows[0].error[PRECIS_METRIC_REL_FRO].worst = INFINITY;
  report.rows[0].error[PRECIS_METRIC_MAX_ABS].worst = INFINITY;
  report.rows[1].tflops = INFINITY;
  report.rows[1].time.median_ms = 0;
  report.rows[2].error[PRECIS_METRIC_REL_FRO].worst = 1e-320;
  CHECK_OK(precis_report_write_all(&report, dir, false));
  char *html_path = precis_asprintf("%s/report.html", dir), *md_path = precis_asprintf("%s/report.md", dir),
       *csv_path = precis_asprintf("%s/report.csv", dir), *json_path = precis_asprintf("%s/report.json", dir);
  char *html = read_text(html_path);
  CHECK(html && strstr(html, "rel_fro infinite") != NULL);
  CHECK(html && strstr(html, "</html>") != NULL);
  precis_report back;
  CHECK_OK(precis_report_read_json(json_path, &back));
  if (back.n_rows) CHECK(back.rows[0].error[PRECIS_METRIC_REL_FRO].present && isnan(back.rows[0].error[PRECIS_METRIC_REL_FRO].worst));
  precis_report_free(&back);
  unlink(html_path), unlink(md_path), unlink(csv_path), unlink(json_path);
  rmdir(dir);
  free(html), free(html_path), free(md_path), free(csv_path), free(json_path), free(dir);
  precis_report_free(&report);
}

RUN_TESTS(T(render_report_from_environment), T(non_finite_figures_are_printed), T(json_round_trip_is_exact), T(journal_line_round_trip), T(reader_maps_rows_to_canonical_specs), T(reader_names_file_and_key),
          T(hostile_strings_are_escaped_everywhere), T(incomplete_report_says_so), T(escapers))
