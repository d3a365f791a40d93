/* Issue 15, the answers: latencies inside the measured noise tie (decided by the format's memory,
 * then error, and said so), memory on an emulating backend is the format's bytes, nothing is
 * "recommended" without a target, numbers print as people write them, the HTML latency axis turns
 * logarithmic past 10x, and rows timed with fewer samples than --min-samples are flagged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "report/recommend.h"
#include "report/report.h"
#include "report_fixture.h"
#include "report/report_util.h"

static const char *chosen(const precis_recommendation *rec) {
  return rec->chosen >= 0 ? rec->outcomes[rec->chosen].recipe : "(none)";
}

static const precis_recipe_outcome *outcome(const precis_recommendation *rec, const char *recipe) {
  for (size_t i = 0; i < rec->n_outcomes; i++)
    if (strcmp(rec->outcomes[i].recipe, recipe) == 0) return &rec->outcomes[i];
  return NULL;
}

static precis_row *find_row(precis_report *r, const char *workload, const char *recipe) {
  for (size_t i = 0; i < r->n_rows; i++)
    if (!strcmp(r->rows[i].workload, workload) && !strcmp(r->rows[i].recipe, recipe)) return &r->rows[i];
  return NULL;
}

static void set_target(precis_report *r, const char *expr) {
  r->criteria = realloc(r->criteria, (r->n_criteria + 1) * sizeof *r->criteria);
  r->criteria[r->n_criteria++] = precis_strdup(expr);
}

/* Samples around `median` with a relative spread of +-`spread`. */
static void set_samples(precis_row *row, double median, double spread, size_t n) {
  free(row->time.samples_ms);
  row->time.samples_ms = malloc(n * sizeof(double));
  row->time.n_samples_ms = n;
  row->time.samples = (long)n;
  for (size_t i = 0; i < n; i++) row->time.samples_ms[i] = median * (1 + spread * (2.0 * (double)i / (double)(n - 1) - 1));
  row->time.median_ms = median;
}

static char *printed(const precis_report *r, const precis_recommendation *rec) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  precis_recommendation_print(r, rec, mem);
  fclose(mem);
  return text;
}

static char *html_of(const precis_report *r, char *dir) {
  char *path = precis_asprintf("%s/one.html", dir), *text = NULL;
  size_t len = 0;
  if (precis_report_write_html(r, path, true) == PRECIS_OK) {
    FILE *f = fopen(path, "r");
    if (f) getdelim(&text, &len, '\0', f), fclose(f);
  }
  unlink(path);
  free(path);
  return text;
}

/* bf16 is 1% faster than fp16, well inside both rows' spread of +-5%: a tie, which fp16 wins on
 * memory (its format bytes are smaller here) or, with equal bytes, on error. */
TEST(latency_within_noise_is_a_tie) {
  precis_report r;
  fixture_report(&r);
  set_target(&r, "rel_fro<=0.01");
  set_samples(fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2), 4.0, 0.05, 21);
  set_samples(fixture_row(&r, "w", "fp16", 4e-4, 2.02, 400000, 1e-2), 2.02, 0.05, 21);
  set_samples(fixture_row(&r, "w", "bf16", 3e-3, 2.00, 400000, 1e-2), 2.00, 0.05, 21);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  CHECK(rec.tie_broken && rec.tie_within_noise);
  CHECK_STR(rec.tie_decided_by, "error");
  const precis_recipe_outcome *bf16 = outcome(&rec, "bf16"), *fp32 = outcome(&rec, "fp32");
  CHECK(bf16 && bf16->tied && bf16->latency_lo_ms < 2.0 && bf16->latency_hi_ms > 2.0);
  CHECK(fp32 && !fp32->tied);
  char *text = printed(&r, &rec);
  CHECK(text && strstr(text, "recommendation: fp16") != NULL);
  CHECK(text && strstr(text, "tied with bf16 on latency within the measured noise; decided by error") != NULL);
  free(text);
  char *json = precis_recommendation_json(&rec);
  CHECK(json && strstr(json, "\"tie_within_noise\":\ttrue") != NULL);
  free(json);
  char *headline = precis_recommendation_headline(&rec);
  CHECK(headline && strstr(headline, "recommended: fp16") && strstr(headline, "within the measured noise"));
  free(headline);
  precis_recommendation_free(&rec);
  /* The HTML banner and the stdout answer say it too. */
  char dir[] = "/tmp/precis_answers_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char *html = html_of(&r, dir);
  CHECK(html && strstr(html, "tied with bf16 on latency within the measured noise") != NULL);
  free(html);
  rmdir(dir);
  char *answer = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&answer, &len);
  precis_report_print_answer(&r, "report.json", mem);
  fclose(mem);
  CHECK(answer && strstr(answer, "tied with bf16 on latency within the measured noise") != NULL);
  free(answer);

  /* Smaller format bytes decide before the error: bf16 holding fewer bytes wins the same tie. */
  precis_row *row = find_row(&r, "w", "bf16");
  row->memory.tensor_bytes = 300000;
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "bf16");
  CHECK_STR(rec.tie_decided_by, "memory of the format");
  precis_recommendation_free(&rec);

  /* Far outside the noise (tight samples, 10% apart): no tie, the faster wins. */
  row->memory.tensor_bytes = 400000 - 1024;
  set_samples(row, 1.8, 0.01, 21);
  set_samples(find_row(&r, "w", "fp16"), 2.02, 0.01, 21);
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "bf16");
  CHECK(!rec.tie_broken);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

/* Rows measured at different moments shift by a few percent that their own samples cannot show:
 * within the tie threshold (10% on the command line and in the reports) they tie too. */
TEST(tie_threshold) {
  precis_report r;
  fixture_report(&r);
  set_target(&r, "rel_fro<=0.01");
  set_samples(fixture_row(&r, "w", "fp32", 1e-7, 2.00, 800000, 1e-2), 2.00, 0.005, 21);
  set_samples(fixture_row(&r, "w", "fp16", 4e-4, 2.12, 400000, 1e-2), 2.12, 0.005, 21); /* 6% slower */
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp32"); /* the measured noise alone: no tie */
  precis_recommendation_free(&rec);
  opt.tie_threshold = PRECIS_TIE_THRESHOLD_DEFAULT;
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  CHECK_STR(rec.tie_decided_by, "memory of the format");
  char *text = printed(&r, &rec);
  CHECK(text && strstr(text, "tied with fp32 on latency within the measured noise or 10%; decided by memory") != NULL);
  free(text);
  precis_recommendation_free(&rec);
  set_samples(find_row(&r, "w", "fp16"), 2.3, 0.005, 21); /* 15% slower: no tie */
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp32");
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

/* The same tie per workload. */
TEST(per_workload_ties) {
  precis_report r;
  fixture_report(&r);
  set_target(&r, "rel_fro<=0.01");
  for (int w = 0; w < 2; w++) {
    const char *name = w ? "b" : "a";
    set_samples(fixture_row(&r, name, "fp16", 4e-4, 2.0, 400000, 1e-2), w ? 2.0 : 1.99, 0.05, 15);
    set_samples(fixture_row(&r, name, "bf16", 3e-3, 2.0, 400000, 1e-2), w ? 1.98 : 2.0, 0.05, 15);
  }
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY, .workload = "b"};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  CHECK(rec.tie_within_noise);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

/* On an emulation the tracked peak holds float32 copies (16-bit recipes equal fp32, int8 larger):
 * memory is what the formats hold, and the output says so. On cuda the tracked peak stays. */
TEST(memory_objective_uses_format_bytes_on_emulation) {
  precis_report r;
  fixture_report(&r);
  set_target(&r, "rel_fro<=0.05");
  precis_row *fp32 = fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 5e-2);
  precis_row *fp16 = fixture_row(&r, "w", "fp16", 4e-4, 2.0, 800000, 5e-2);
  precis_row *int8 = fixture_row(&r, "w", "int8", 1e-2, 1.0, 2000000, 5e-2);
  fp32->memory.tensor_bytes = 786432;
  fp16->memory.tensor_bytes = 393216;
  int8->memory.tensor_bytes = 262144;
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_MEMORY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK(rec.memory_by_format);
  CHECK_STR(chosen(&rec), "int8");
  const precis_recipe_outcome *o = outcome(&rec, "fp16");
  CHECK(o && o->memory_bytes == 393216);
  CHECK_NEAR(o ? o->memory_vs_fp32 : 0, 0.5, 1e-12);
  char *text = printed(&r, &rec);
  CHECK(text && strstr(text, "memory on the device (the format's bytes") != NULL);
  CHECK(text && strstr(text, "memory of the format 256 KiB") != NULL);
  free(text);
  precis_recommendation_free(&rec);
  precis_kv_set(&r.environment, "backend", "cuda");
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK(!rec.memory_by_format);
  CHECK_STR(chosen(&rec), "fp16"); /* tied with fp32 at 800000 tracked bytes: the smaller format wins */
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

/* Without a target nothing is recommended: the frontier and how to ask instead. */
TEST(no_target_no_recommendation) {
  precis_report r;
  fixture_report(&r);
  fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2);
  fixture_row(&r, "w", "fp8", 3e-2, 1.0, 200000, 5e-2); /* passes its default gate at 3% error */
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY, .report_path = "out/report.json"};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK(!rec.has_target);
  char *text = printed(&r, &rec);
  CHECK(text && strstr(text, "recommendation:") == NULL && strstr(text, "BEST") == NULL);
  CHECK(text && strstr(text, "Pareto frontier") != NULL);
  CHECK(text && strstr(text, "precis recommend out/report.json --require rel_fro<=1e-2") != NULL);
  free(text);
  char *json = precis_recommendation_json(&rec);
  CHECK(json && strstr(json, "\"recommended\":\tnull") != NULL && strstr(json, "\"target\":\tfalse") != NULL);
  free(json);
  precis_recommendation_free(&rec);

  /* The report printers: no "recommended" anywhere, the frontier and --require instead. */
  char dir[] = "/tmp/precis_answers_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(precis_report_write_all(&r, dir, true));
  char *md_path = precis_asprintf("%s/report.md", dir), *html_path = precis_asprintf("%s/report.html", dir);
  char *md = NULL, *html = NULL;
  size_t len = 0;
  FILE *f = fopen(md_path, "r");
  if (f) getdelim(&md, &len, '\0', f), fclose(f);
  f = fopen(html_path, "r");
  len = 0;
  if (f) getdelim(&html, &len, '\0', f), fclose(f);
  CHECK(md && strstr(md, "## Answer") && strstr(md, "--require") && !strstr(md, "recommended:"));
  CHECK(html && strstr(html, "No target given, so nothing is recommended") && strstr(html, "--require"));
  CHECK(html && !strstr(html, "<b>Recommended") && !strstr(html, "class=\"recommended-ring\""));
  char *table = NULL;
  FILE *mem = open_memstream(&table, &len);
  precis_report_print_answer(&r, "out/report.json", mem);
  fclose(mem);
  CHECK(table && strstr(table, "Pareto frontier") && strstr(table, "--require") && !strstr(table, "recommended:"));
  free(table);
  free(md), free(html);
  /* With the run's --require (recorded in every row), they name the answer. */
  set_target(&r, "rel_fro<=0.01");
  precis_row *fp8 = find_row(&r, "w", "fp8");
  fp8->criteria.items[0].value = 0.01;
  fp8->verdict = PRECIS_VERDICT_FAIL;
  CHECK_OK(precis_report_write_all(&r, dir, true));
  f = fopen(md_path, "r");
  md = NULL, len = 0;
  if (f) getdelim(&md, &len, '\0', f), fclose(f);
  CHECK(md && strstr(md, "recommended: fp32") != NULL);
  f = fopen(html_path, "r");
  html = NULL, len = 0;
  if (f) getdelim(&html, &len, '\0', f), fclose(f);
  CHECK(html && strstr(html, "<b>Recommended</b>") && strstr(html, "class=\"recommended-ring\""));
  table = NULL;
  mem = open_memstream(&table, &len);
  precis_report_print_answer(&r, "out/report.json", mem);
  fclose(mem);
  CHECK(table && strstr(table, "recommended: fp32") != NULL);
  free(table), free(md), free(html);
  static const char *const files[] = {"report.json", "report.csv", "report.md", "report.html"};
  for (size_t i = 0; i < 4; i++) {
    char *p = precis_asprintf("%s/%s", dir, files[i]);
    unlink(p);
    free(p);
  }
  rmdir(dir);
  free(md_path), free(html_path);
  precis_report_free(&r);
}

TEST(numbers_as_people_write_them) {
  char buf[64];
  precis_fmt_sig(buf, sizeof buf, 50, 3);
  CHECK_STR(buf, "50");
  precis_fmt_sig(buf, sizeof buf, 1000, 3);
  CHECK_STR(buf, "1000");
  precis_fmt_sig(buf, sizeof buf, 12690.4, 4);
  CHECK_STR(buf, "12690");
  precis_fmt_sig(buf, sizeof buf, 0.0123456, 3);
  CHECK_STR(buf, "0.0123");
  precis_fmt_sig(buf, sizeof buf, 2.5, 4);
  CHECK_STR(buf, "2.5");
  precis_fmt_sig(buf, sizeof buf, 9999.7, 4);
  CHECK_STR(buf, "10000");
  precis_fmt_sig(buf, sizeof buf, 3e-8, 3);
  CHECK_STR(buf, "3e-08");
  precis_fmt_ms(buf, sizeof buf, 12690.4);
  CHECK_STR(buf, "12.7 s");
  precis_fmt_ms(buf, sizeof buf, 812.34);
  CHECK_STR(buf, "812.3 ms");
  precis_fmt_bytes(buf, sizeof buf, 1023 * 1024 + 600);
  CHECK_STR(buf, "1020 KiB");
  /* Settings as stored for every report format: 50 and 1000, not 5e+01 and 1e+03. */
  precis_kv_list kv = {0};
  precis_kv_set_number(&kv, "warmup_ms", 50);
  precis_kv_set_number(&kv, "max_time_ms", 1000);
  precis_kv_set_number(&kv, "target_rel_spread", 0.02);
  CHECK_STR(precis_kv_get(&kv, "warmup_ms"), "50");
  CHECK_STR(precis_kv_get(&kv, "max_time_ms"), "1000");
  CHECK_STR(precis_kv_get(&kv, "target_rel_spread"), "0.02");
  precis_kv_free(&kv);
  /* recommend's latency: 12.7 s, not 1.269e+04 ms. */
  precis_report r;
  fixture_report(&r);
  set_target(&r, "rel_fro<=0.01");
  fixture_row(&r, "w", "fp32", 1e-7, 12690.4, 800000, 1e-2);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  char *text = printed(&r, &rec);
  CHECK(text && strstr(text, "12.7 s") != NULL && strstr(text, "e+0") == NULL);
  free(text);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(html_latency_axis_is_log_past_10x) {
  char dir[] = "/tmp/precis_answers_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  precis_report r;
  fixture_report(&r);
  fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2);
  fixture_row(&r, "w", "fp16", 4e-4, 2.0, 400000, 1e-2);
  char *html = html_of(&r, dir);
  CHECK(html && strstr(html, "latency per call, ms (CPU") != NULL && strstr(html, "(log scale) (CPU") == NULL);
  free(html);
  fixture_row(&r, "w", "fp8", 1e-2, 400.0, 200000, 5e-2); /* 200x the fastest */
  html = html_of(&r, dir);
  CHECK(html && strstr(html, "latency per call, ms (log scale)") != NULL);
  /* The decade ticks are labelled 1, 10, 100, 1000. */
  CHECK(html && strstr(html, ">1000</text>") != NULL && strstr(html, ">1</text>") != NULL);
  free(html);
  rmdir(dir);
  precis_report_free(&r);
}

TEST(few_samples_are_flagged) {
  precis_report r;
  fixture_report(&r);
  precis_kv_set_int(&r.settings, "min_samples", 10);
  precis_row *slow = fixture_row(&r, "w", "fp8", 1e-2, 400.0, 200000, 5e-2); /* the fixture keeps 3 samples */
  set_samples(fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2), 4.0, 0.01, 12);
  (void)slow;
  CHECK(precis_row_few_samples(&r.rows[0], precis_report_min_samples(&r)));
  CHECK(!precis_row_few_samples(&r.rows[1], precis_report_min_samples(&r)));
  char *table = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&table, &len);
  precis_report_print_table(&r, mem);
  fclose(mem);
  CHECK(table && strstr(table, "only 3 timed samples, fewer than --min-samples 10") != NULL);
  CHECK(table && strstr(table, "400!") != NULL);
  free(table);
  char dir[] = "/tmp/precis_answers_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(precis_report_write_all(&r, dir, true));
  static const char *const files[] = {"report.json", "report.csv", "report.md", "report.html"};
  char *text[4] = {NULL};
  for (size_t i = 0; i < 4; i++) {
    char *p = precis_asprintf("%s/%s", dir, files[i]);
    FILE *f = fopen(p, "r");
    len = 0;
    if (f) getdelim(&text[i], &len, '\0', f), fclose(f);
    unlink(p);
    free(p);
  }
  rmdir(dir);
  CHECK(text[0] && strstr(text[0], "\"below_min_samples\": true") != NULL && strstr(text[0], "\"below_min_samples\": false"));
  CHECK(text[2] && strstr(text[2], "(3 samples < --min-samples 10)") != NULL);
  CHECK(text[3] && strstr(text[3], "few-samples") != NULL);
  for (size_t i = 0; i < 4; i++) free(text[i]);
  /* It survives the round trip through report.json (min_samples is in the settings). */
  precis_report_free(&r);
}

RUN_TESTS(T(latency_within_noise_is_a_tie), T(tie_threshold), T(per_workload_ties), T(memory_objective_uses_format_bytes_on_emulation),
          T(no_target_no_recommendation), T(numbers_as_people_write_them), T(html_latency_axis_is_log_past_10x),
          T(few_samples_are_flagged))
