/* precis compare on crafted reports: a report against itself has no regression; rel_fro 10x worse
 * is an accuracy regression naming the row; a timing change inside the noise is not a regression,
 * one beyond it is; memory; verdict and status flips; missing rows; environment warnings. */
#include "report/compare.h"
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

/* Compares a fresh standard BASE with NEW after `edit` changed one row of NEW, and says whether the
 * result is exactly one change of the given kind, direction and metric on square/bf16 (expect_change)
 * or no change at all. */
typedef void (*row_edit)(precis_row *base_row, precis_row *new_row, double arg);

static bool compare_one(row_edit edit, double arg, bool expect_change, precis_change_kind kind, bool regression,
                        const char *what) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  edit(fixture_find(&a, "square", "bf16"), fixture_find(&b, "square", "bf16"), arg);
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  bool ok = precis_compare_reports(&a, &b, &opt, &cmp) == PRECIS_OK;
  if (ok && expect_change) {
    ok = cmp.n_changes == 1 && cmp.changes[0].kind == kind && cmp.changes[0].regression == regression &&
         strcmp(cmp.changes[0].what, what) == 0 && strcmp(cmp.changes[0].workload, "square") == 0 &&
         strcmp(cmp.changes[0].recipe, "bf16") == 0 && cmp.n_regressions == (regression ? 1u : 0u);
  } else if (ok) {
    ok = cmp.n_changes == 0 && cmp.n_regressions == 0;
  }
  if (!ok)
    fprintf(stderr, "  compare %s x%.4g: %zu changes (%s %s), expected %s\n", what, arg, cmp.n_changes,
            cmp.n_changes ? cmp.changes[0].what : "-", cmp.n_changes && cmp.changes[0].regression ? "regression" : "",
            expect_change ? (regression ? "one regression" : "one improvement") : "none");
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
  return ok;
}

static precis_metric_id edited_metric;
static void scale_metric(precis_row *base, precis_row *now, double factor) {
  (void)base;
  now->error[edited_metric].worst *= factor;
}

static void sqnr_drop(precis_row *base, precis_row *now, double db) {
  (void)base;
  now->error[PRECIS_METRIC_SQNR_DB].worst -= db;
}

/* 1 - cosine of NEW = factor * (1 - cosine of BASE). */
static void cosine_error_factor(precis_row *base, precis_row *now, double factor) {
  now->error[PRECIS_METRIC_COSINE].worst = 1 - factor * (1 - base->error[PRECIS_METRIC_COSINE].worst);
}

static void median_factor(precis_row *base, precis_row *now, double factor) {
  now->time.median_ms = base->time.median_ms * factor;
  now->time.p95_ms = now->time.median_ms * 1.02;
}

/* BASE's p95 at +20%: a NEW median between +10% and +20% is inside BASE's noise. */
static void median_factor_wide_base(precis_row *base, precis_row *now, double factor) {
  base->time.p95_ms = base->time.median_ms * 1.2;
  median_factor(base, now, factor);
}

/* NEW faster by `factor`, but its own p95 above BASE's median: not a clear improvement. */
static void faster_with_slow_tail(precis_row *base, precis_row *now, double factor) {
  now->time.median_ms = base->time.median_ms * factor;
  now->time.p95_ms = base->time.median_ms * 1.01;
}

static void peak_factor(precis_row *base, precis_row *now, double factor) {
  now->memory.tracked_peak_bytes = llround((double)base->memory.tracked_peak_bytes * factor);
}

TEST(each_threshold_just_above_and_just_below_its_limit) {
  /* Error growth: the factor 2 on each growth metric, both directions (1/2 is an improvement). */
  const precis_metric_id growth[] = {PRECIS_METRIC_REL_FRO, PRECIS_METRIC_MAX_ABS, PRECIS_METRIC_MAX_REL,
                                     PRECIS_METRIC_RMSE, PRECIS_METRIC_MAX_CW};
  for (size_t i = 0; i < sizeof growth / sizeof growth[0]; i++) {
    edited_metric = growth[i];
    const char *key = precis_metric_get(growth[i])->key;
    CHECK_MSG(compare_one(scale_metric, 2.02, true, PRECIS_CHANGE_ERROR, true, key), "%s x2.02", key);
    CHECK_MSG(compare_one(scale_metric, 1.98, false, PRECIS_CHANGE_ERROR, true, key), "%s x1.98", key);
    CHECK_MSG(compare_one(scale_metric, 0.49, true, PRECIS_CHANGE_ERROR, false, key), "%s x0.49", key);
    CHECK_MSG(compare_one(scale_metric, 0.51, false, PRECIS_CHANGE_ERROR, false, key), "%s x0.51", key);
  }
  /* sqnr_db: a drop of 20*log10(2) = 6.02 dB. */
  CHECK(compare_one(sqnr_drop, 6.08, true, PRECIS_CHANGE_ERROR, true, "sqnr_db"));
  CHECK(compare_one(sqnr_drop, 5.96, false, PRECIS_CHANGE_ERROR, true, "sqnr_db"));
  /* cosine: 1 - cosine growing by the factor 2 (nothing else changes: a cosine-only regression). */
  CHECK(compare_one(cosine_error_factor, 2.02, true, PRECIS_CHANGE_ERROR, true, "cosine"));
  CHECK(compare_one(cosine_error_factor, 1.98, false, PRECIS_CHANGE_ERROR, true, "cosine"));
  /* Speed: +10% and above BASE's p95 (+5%) is a regression; +9% is not. */
  CHECK(compare_one(median_factor, 1.11, true, PRECIS_CHANGE_SPEED, true, "median_ms"));
  CHECK(compare_one(median_factor, 1.09, false, PRECIS_CHANGE_SPEED, true, "median_ms"));
  /* ... and with BASE's p95 at +20%, +19% is inside the noise while +21% is beyond it. */
  CHECK(compare_one(median_factor_wide_base, 1.19, false, PRECIS_CHANGE_SPEED, true, "median_ms"));
  CHECK(compare_one(median_factor_wide_base, 1.21, true, PRECIS_CHANGE_SPEED, true, "median_ms"));
  /* Faster: -11% (NEW's p95 below BASE's median) is an improvement, -9% is not, nor -11% with a
   * NEW p95 above BASE's median. */
  CHECK(compare_one(median_factor, 0.89, true, PRECIS_CHANGE_SPEED, false, "median_ms"));
  CHECK(compare_one(median_factor, 0.91, false, PRECIS_CHANGE_SPEED, false, "median_ms"));
  CHECK(compare_one(faster_with_slow_tail, 0.89, false, PRECIS_CHANGE_SPEED, false, "median_ms"));
  /* Memory: +10% either way. */
  CHECK(compare_one(peak_factor, 1.11, true, PRECIS_CHANGE_MEMORY, true, "tracked_peak_bytes"));
  CHECK(compare_one(peak_factor, 1.09, false, PRECIS_CHANGE_MEMORY, true, "tracked_peak_bytes"));
  CHECK(compare_one(peak_factor, 0.89, true, PRECIS_CHANGE_MEMORY, false, "tracked_peak_bytes"));
  CHECK(compare_one(peak_factor, 0.91, false, PRECIS_CHANGE_MEMORY, false, "tracked_peak_bytes"));
}

TEST(improvements_are_listed) {
  precis_report a, b;
  standard(&a);
  standard(&b);
  fixture_find(&b, "tall", "int8")->error[PRECIS_METRIC_REL_FRO].worst = 8e-3 / 4; /* 4x better */
  precis_row *faster = fixture_find(&b, "square", "fp16");
  faster->time.median_ms = 2.2 * 0.5;
  faster->time.p95_ms = 2.2 * 0.52;
  fixture_find(&b, "tall", "fp32")->memory.tracked_peak_bytes = 400000 / 2;
  precis_compare_options opt = defaults();
  precis_comparison cmp;
  CHECK_OK(precis_compare_reports(&a, &b, &opt, &cmp));
  CHECK_EQ_INT(cmp.n_regressions, 0);
  CHECK_EQ_INT(cmp.n_changes, 3);
  struct {
    const char *workload, *recipe, *what;
    precis_change_kind kind;
  } expected[] = {{"tall", "int8", "rel_fro", PRECIS_CHANGE_ERROR},
                  {"square", "fp16", "median_ms", PRECIS_CHANGE_SPEED},
                  {"tall", "fp32", "tracked_peak_bytes", PRECIS_CHANGE_MEMORY}};
  for (size_t e = 0; e < 3; e++) {
    size_t found = 0;
    for (size_t i = 0; i < cmp.n_changes; i++) {
      const precis_change *c = &cmp.changes[i];
      if (!c->regression && c->kind == expected[e].kind && strcmp(c->workload, expected[e].workload) == 0 &&
          strcmp(c->recipe, expected[e].recipe) == 0 && strcmp(c->what, expected[e].what) == 0)
        found++;
    }
    CHECK_MSG(found == 1, "improvement %s/%s %s listed %zu times", expected[e].workload, expected[e].recipe,
              expected[e].what, found);
  }
  char *md = precis_comparison_markdown(&cmp, "a.json", "b.json");
  CHECK(md && strstr(md, "## Improvements (3)") && strstr(md, "## Regressions (0)"));
  CHECK(md && strstr(md, "| tall | int8 | accuracy | rel\\_fro worst 0.008 → 0.002"));
  CHECK(md && strstr(md, "| square | fp16 | speed |"));
  CHECK(md && strstr(md, "| tall | fp32 | memory |"));
  free(md);
  precis_comparison_free(&cmp);
  precis_report_free(&a);
  precis_report_free(&b);
}

RUN_TESTS(T(report_against_itself), T(rel_fro_ten_times_worse), T(exact_becoming_inexact_and_sqnr_and_nonfinite),
          T(timing_inside_noise_is_not_a_regression), T(memory_verdict_status_and_missing_rows),
          T(each_threshold_just_above_and_just_below_its_limit), T(improvements_are_listed))
