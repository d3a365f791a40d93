/* precis compare on crafted reports: a report against itself has no regression; rel_fro 10x worse
 * is an accuracy regression naming the row; a timing change inside the noise is not a regression,
 * one beyond it is; memory; verdict and status flips; missing rows; environment warnings. */
#include "compare.h"
#include "harness.h"
#include "report_fixture.h"

static void standard(precis_report *r) {
  fixture_report(r);
  const char *workloads[] = {"square", "tall"};
  const char *recipes[] = {"fp32", "fp16", "bf16", "int8"};
  const double errors[] = {1e-7, 4e-4, 3e-3, 8e-3};
  const double times[] = {4.0, 2.2, 2.0, 1.0};
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 4; i++) fixture_row(r, workloads[w], recipes[i], errors[i], times[i], 400000 + i, 1e-2);
}

static size_t count_regressions(const precis_comparison *cmp, precis_change_kind kind, const char *recipe) {
  size_t n = 0;
  for (size_t i = 0; i < cmp->n_changes; i++)
    if (cmp->changes[i].regression && cmp->changes[i].kind == kind && (!recipe || strcmp(cmp->changes[i].recipe, recipe) == 0))
      n++;
  return n;
}

static precis_compare_options defaults(void) {
  precis_compare_options o;
  precis_compare_options_default(&o);
  return o;
}

TEST(report_against_itself) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  CHECK_EQ_INT(cmp.n_changes, 0);
  CHECK_EQ_INT(cmp.n_pairs, 8);
  CHECK_EQ_INT(cmp.n_warnings, 0);
  char *md = precis_comparison_markdown(&cmp, "a.json", "b.json");
  CHECK(md && strstr(md, "No regression") != NULL);
  free(md);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

TEST(rel_fro_ten_times_worse) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  fixture_find(&b, "tall", "bf16")->error[PRECIS_METRIC_REL_FRO].worst *= 10;
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_ERROR, "bf16"), 1);
  if (cmp.n_changes) {
    CHECK_STR(cmp.changes[0].workload, "tall");
    CHECK_STR(cmp.changes[0].what, "rel_fro");
  }
  char *md = precis_comparison_markdown(&cmp, "a.json", "b.json");
  CHECK(md && strstr(md, "REGRESSION") && strstr(md, "| tall | bf16 | accuracy | rel\\_fro worst 0.003 → 0.03"));
  free(md);
  char *json = precis_comparison_json(&cmp, "a.json", "b.json");
  CHECK(json && strstr(json, "\"regression\":\ttrue") != NULL);
  free(json);
  precis_comparison_free(&cmp);
  /* 1.9x is inside the default factor 2; a factor 1.5 catches it. */
  fixture_find(&b, "tall", "bf16")->error[PRECIS_METRIC_REL_FRO].worst = 3e-3 * 1.9;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  precis_comparison_free(&cmp);
  opt.error_factor = 1.5;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 1);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

TEST(exact_becoming_inexact_and_sqnr_and_nonfinite) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  fixture_find(&a, "square", "fp32")->error[PRECIS_METRIC_MAX_ABS].worst = 0;
  fixture_find(&b, "square", "fp32")->error[PRECIS_METRIC_MAX_ABS].worst = 1e-9;
  fixture_find(&b, "square", "int8")->error[PRECIS_METRIC_SQNR_DB].worst -= 7; /* > 6.02 dB */
  fixture_find(&b, "tall", "fp16")->error[PRECIS_METRIC_NONFINITE].worst = 3;
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 3);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_ERROR, "fp32"), 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_ERROR, "int8"), 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_ERROR, "fp16"), 1);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

TEST(timing_inside_noise_is_not_a_regression) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  /* +4%: inside BASE's p95 (+5%) and under the 10% threshold. */
  fixture_find(&b, "square", "bf16")->time.median_ms = 2.0 * 1.04;
  /* +8% and above p95: still under the 10% threshold. */
  fixture_find(&b, "tall", "bf16")->time.median_ms = 2.0 * 1.08;
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  precis_comparison_free(&cmp);
  /* +30% with a wide BASE spread (p95 at +40%): inside the noise, not a regression. */
  fixture_find(&a, "square", "fp16")->time.p95_ms = 2.2 * 1.4;
  fixture_find(&b, "square", "fp16")->time.median_ms = 2.2 * 1.3;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  precis_comparison_free(&cmp);
  /* +25% beyond p95: a speed regression. */
  fixture_find(&b, "tall", "int8")->time.median_ms = 1.25;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_SPEED, "int8"), 1);
  precis_comparison_free(&cmp);
  /* A higher threshold accepts it. */
  opt.time_threshold = 0.30;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

TEST(memory_verdict_status_and_missing_rows) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  fixture_find(&b, "square", "fp32")->memory.tracked_peak_bytes = 400000 * 2;
  precis_row *flip = fixture_find(&b, "tall", "int8");
  flip->verdict = PRECIS_VERDICT_FAIL;
  flip->verdict_detail = precis_strdup("rel_fro=0.011 > 0.01");
  precis_row *dead = fixture_find(&b, "square", "fp16");
  dead->status = PRECIS_ROW_FAILED;
  dead->reason = precis_strdup("cuBLAS error");
  fixture_row(&a, "square", "tf32", 1e-4, 3.0, 1000, 1e-2); /* only in BASE */
  fixture_row(&b, "wide", "fp32", 1e-7, 3.0, 1000, 1e-2);   /* only in NEW */
  precis_kv_set(&b.environment, "cpu", "Other CPU");
  free(b.dataset_id);
  b.dataset_id = precis_strdup("ffff");
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_MEMORY, "fp32"), 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_VERDICT, "int8"), 1);
  CHECK_EQ_INT(count_regressions(&cmp, PRECIS_CHANGE_STATUS, "fp16"), 1);
  CHECK_EQ_INT(cmp.n_regressions, 3);
  CHECK_EQ_INT(cmp.n_only_in_base, 1);
  CHECK_EQ_INT(cmp.n_only_in_new, 1);
  CHECK_EQ_INT(cmp.n_warnings, 2);
  char *md = precis_comparison_markdown(&cmp, "a.json", "b.json");
  CHECK(md && strstr(md, "only in BASE: square / tf32") != NULL);
  CHECK(md && strstr(md, "dataset\\_id") != NULL);
  CHECK(md && strstr(md, "cpu is") != NULL);
  free(md);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

RUN_TESTS(T(report_against_itself), T(rel_fro_ten_times_worse), T(exact_becoming_inexact_and_sqnr_and_nonfinite),
          T(timing_inside_noise_is_not_a_regression), T(memory_verdict_status_and_missing_rows))
