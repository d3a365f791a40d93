/* Numeric hazards on the cpu backend (docs/robustness.md), each case run through the backend's own
 * run_case on data built here: all-zero inputs and all-zero rows (an int8 scale of 0 must give
 * exact zeros, never 0/0), subnormal-only inputs, fp16 overflow (inf counted in nonfinite and
 * failing the default gate), and a reduction long enough to overflow int8's int32 accumulators
 * (refused as unsupported above k = 133143, exact at the limit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "numerics/criteria.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/metrics.h"

typedef struct test_case {
  precis_workload_info info;
  precis_workload_data data;
} test_case;

/* a[b][i][p] = a_value(b, i, p), b[p][j] = b_value(p, j), references in float64. */
static void make_case(test_case *t, int64_t m, int64_t n, int64_t k, int64_t batch,
                      float (*a_value)(int64_t, int64_t, int64_t), float (*b_value)(int64_t, int64_t)) {
  memset(t, 0, sizeof *t);
  static char name[] = "hazard", kind[] = "gemm", empty[] = "";
  t->info.name = name;
  t->info.kind = kind;
  t->info.description = t->info.a_dist = t->info.b_dist = t->info.reference = empty;
  t->info.m = m, t->info.n = n, t->info.k = k, t->info.batch = batch;
  t->data.a = malloc((size_t)(batch * m * k) * sizeof(float));
  t->data.b = malloc((size_t)(k * n) * sizeof(float));
  t->data.c_ref = calloc((size_t)(batch * m * n), sizeof(double));
  t->data.ab_abs = calloc((size_t)(batch * m * n), sizeof(double));
  for (int64_t s = 0; s < batch; s++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++) t->data.a[(s * m + i) * k + p] = a_value(s, i, p);
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) t->data.b[p * n + j] = b_value(p, j);
  for (int64_t s = 0; s < batch; s++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double c = 0, ab = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = t->data.a[(s * m + i) * k + p], y = t->data.b[p * n + j];
          c += x * y;
          ab += fabs(x) * fabs(y);
        }
        t->data.c_ref[(s * m + i) * n + j] = c;
        t->data.ab_abs[(s * m + i) * n + j] = ab;
      }
}

static void free_case(test_case *t) {
  free(t->data.a);
  free(t->data.b);
  free(t->data.c_ref);
  free(t->data.ab_abs);
}

static void *backend_ctx;
static precis_case_options options;

static precis_row_status run_recipe(const test_case *t, const precis_recipe *recipe, precis_case_output *out) {
  precis_case_output_init(out);
  const precis_backend *cpu = precis_backend_cpu();
  precis_status st = cpu->run_case(backend_ctx, &recipe->spec, &t->info, &t->data, &options, out);
  CHECK_MSG(st == PRECIS_OK || out->status != PRECIS_ROW_OK, "%s: run_case returned %s with status ok",
            recipe->name, precis_status_str(st));
  return out->status;
}

static float zero_a(int64_t s, int64_t i, int64_t p) { return (void)s, (void)i, (void)p, 0.0f; }
static float zero_b(int64_t p, int64_t j) { return (void)p, (void)j, 0.0f; }
/* Row 1 of every sample is all zeros; the rest is a small varied pattern. */
static float zero_row_a(int64_t s, int64_t i, int64_t p) { return i == 1 ? 0.0f : (float)((s + 3 * i + 5 * p) % 7) - 3.0f; }
static float varied_b(int64_t p, int64_t j) { return 0.25f * (float)((2 * p + 3 * j) % 9) - 1.0f; }
/* Column 2 of b is all zeros (int8: a per-column scale of 0). */
static float zero_col_b(int64_t p, int64_t j) { return j == 2 ? 0.0f : varied_b(p, j); }
/* Only float32 subnormals (below 2^-126 = 1.18e-38), with signs. */
static float subnormal_a(int64_t s, int64_t i, int64_t p) { return ((s + i + p) % 2 ? -1.0f : 1.0f) * 1e-40f * (float)(1 + (i + p) % 5); }
static float subnormal_b(int64_t p, int64_t j) { return ((p + j) % 3 ? 1.0f : -1.0f) * 2.5e-39f * (float)(1 + (p * j) % 4); }
static float big_a(int64_t s, int64_t i, int64_t p) { return (void)s, (void)i, (void)p, 300.0f; }
static float big_b(int64_t p, int64_t j) { return (void)p, (void)j, 300.0f; }
static float one_a(int64_t s, int64_t i, int64_t p) { return (void)s, (void)i, (void)p, 1.0f; }
static float one_b(int64_t p, int64_t j) { return (void)p, (void)j, 1.0f; }

static void test_all_zero(void) {
  test_case t;
  make_case(&t, 4, 3, 16, 2, zero_a, zero_b);
  for (int id = 0; id < PRESET_TABLE_COUNT; id++) {
    if (preset_recipe_of_table((size_t)id)->spec.split == PRECIS_SPLIT_CUBLAS_EMU) continue; /* cuda only */
    precis_case_output out;
    if (run_recipe(&t, preset_recipe_of_table((size_t)id), &out) == PRECIS_ROW_OK) {
      size_t count = (size_t)(t.info.batch * t.info.m * t.info.n), nonzero = 0;
      for (size_t i = 0; i < count; i++) nonzero += !(out.c[i] == 0.0f);
      CHECK_MSG(nonzero == 0, "%s: all-zero inputs gave %zu outputs that are not zero (NaN from a zero scale?)",
                preset_recipe_of_table((size_t)id)->name, nonzero);
    } else {
      CHECK_MSG(false, "%s: all-zero inputs: status %d (%s)", preset_recipe_of_table((size_t)id)->name, out.status,
                out.reason);
    }
    precis_case_output_free(&out);
  }
  free_case(&t);
}

static void test_zero_rows_and_columns(void) {
  float (*bs[2])(int64_t, int64_t) = {varied_b, zero_col_b};
  for (int v = 0; v < 2; v++) {
    test_case t;
    make_case(&t, 4, 5, 24, 2, zero_row_a, bs[v]);
    for (int id = 0; id < PRESET_TABLE_COUNT; id++) {
      if (preset_recipe_of_table((size_t)id)->spec.split == PRECIS_SPLIT_CUBLAS_EMU) continue; /* cuda only */
      precis_case_output out;
      const char *name = preset_recipe_of_table((size_t)id)->name;
      if (run_recipe(&t, preset_recipe_of_table((size_t)id), &out) != PRECIS_ROW_OK) {
        CHECK_MSG(false, "%s: status %d (%s)", name, out.status, out.reason);
        precis_case_output_free(&out);
        continue;
      }
      size_t bad = 0, count = (size_t)(t.info.batch * t.info.m * t.info.n);
      for (size_t e = 0; e < count; e++) {
        size_t i = (e / (size_t)t.info.n) % (size_t)t.info.m, j = e % (size_t)t.info.n;
        bool must_be_zero = i == 1 || (v == 1 && j == 2);
        if (!isfinite(out.c[e]) || (must_be_zero && out.c[e] != 0.0f)) bad++;
      }
      CHECK_MSG(bad == 0, "%s: %zu outputs of zero rows/columns are not exact zeros or are not finite", name, bad);
      precis_sample_metrics sm;
      precis_metrics_sample(out.c, t.data.c_ref, t.data.ab_abs, (size_t)(t.info.m * t.info.n), &sm);
      CHECK_MSG(sm.v[PRECIS_METRIC_NONFINITE] == 0, "%s: nonfinite %g", name, sm.v[PRECIS_METRIC_NONFINITE]);
      for (int k = 0; k < PRECIS_METRIC_COUNT; k++)
        CHECK_MSG(!sm.present[k] || !isnan(sm.v[k]), "%s: metric %s is NaN", name, precis_metric_get((precis_metric_id)k)->key);
      precis_case_output_free(&out);
    }
    free_case(&t);
  }
}

static void test_subnormal_only(void) {
  test_case t;
  make_case(&t, 3, 4, 32, 1, subnormal_a, subnormal_b);
  for (size_t i = 0; i < 3 * 32; i++) CHECK(fpclassify(t.data.a[i]) == FP_SUBNORMAL);
  for (size_t i = 0; i < 32 * 4; i++) CHECK(fpclassify(t.data.b[i]) == FP_SUBNORMAL);
  for (int id = 0; id < PRESET_TABLE_COUNT; id++) {
    if (preset_recipe_of_table((size_t)id)->spec.split == PRECIS_SPLIT_CUBLAS_EMU) continue; /* cuda only */
    precis_case_output out;
    const char *name = preset_recipe_of_table((size_t)id)->name;
    if (run_recipe(&t, preset_recipe_of_table((size_t)id), &out) != PRECIS_ROW_OK) {
      CHECK_MSG(false, "%s: subnormal inputs: status %d (%s)", name, out.status, out.reason);
      precis_case_output_free(&out);
      continue;
    }
    /* Products of two subnormals are far below float32's range: every output is a (signed) zero or
     * at most a tiny value, and never NaN or inf. */
    for (size_t i = 0; i < 12; i++) CHECK_MSG(isfinite(out.c[i]) && fabsf(out.c[i]) < 1e-30f, "%s: c[%zu] = %g", name, i, out.c[i]);
    precis_sample_metrics sm;
    precis_metrics_sample(out.c, t.data.c_ref, t.data.ab_abs, 12, &sm);
    CHECK_MSG(sm.v[PRECIS_METRIC_NONFINITE] == 0, "%s: nonfinite %g", name, sm.v[PRECIS_METRIC_NONFINITE]);
    CHECK_MSG(!sm.present[PRECIS_METRIC_REL_FRO] || !isnan(sm.v[PRECIS_METRIC_REL_FRO]), "%s: rel_fro is NaN", name);
    precis_case_output_free(&out);
  }
  free_case(&t);
}

static void test_fp16_overflow(void) {
  /* 300 * 300 * 2 = 180000 > 65504: f16 output is inf. */
  test_case t;
  make_case(&t, 2, 2, 2, 1, big_a, big_b);
  const char *names[2] = {"fp16", "fp16acc16"};
  for (int r = 0; r < 2; r++) {
    precis_case_output out;
    const precis_recipe *recipe = preset_recipe(names[r]);
    CHECK(run_recipe(&t, recipe, &out) == PRECIS_ROW_OK);
    if (out.c) {
      precis_sample_metrics sm;
      precis_metrics_sample(out.c, t.data.c_ref, t.data.ab_abs, 4, &sm);
      CHECK_MSG(sm.v[PRECIS_METRIC_NONFINITE] == 4, "%s: nonfinite %g, expected 4", recipe->name, sm.v[PRECIS_METRIC_NONFINITE]);
      precis_metric_value worst[PRECIS_METRIC_ALL];
      precis_metrics_aggregate(&sm, 1, worst);
      precis_criteria gate;
      precis_default_criteria(&recipe->spec, t.info.k, &gate);
      size_t failed = 0;
      double margin = 0;
      CHECK_MSG(!precis_criteria_check(&gate, worst, &failed, &margin), "%s: the default gate passed an inf output",
                recipe->name);
    }
    precis_case_output_free(&out);
  }
  free_case(&t);
}

static void test_int8_long_reduction(void) {
  /* 127 * 127 * 133143 = 2147463447 <= 2^31 - 1: the last k whose int32 sum cannot overflow. */
  test_case t;
  make_case(&t, 1, 1, 133143, 1, one_a, one_b);
  precis_case_output out;
  CHECK(run_recipe(&t, preset_recipe("int8"), &out) == PRECIS_ROW_OK);
  if (out.c) CHECK_MSG(fabs((double)out.c[0] - 133143.0) <= 133143.0 * 1e-6, "int8 at k=133143: c = %.9g, expected 133143", out.c[0]);
  precis_case_output_free(&out);
  free_case(&t);

  make_case(&t, 1, 2, 140000, 1, one_a, one_b);
  CHECK(run_recipe(&t, preset_recipe("int8"), &out) == PRECIS_ROW_UNSUPPORTED);
  CHECK_MSG(strstr(out.reason, "int32") && strstr(out.reason, "140000"), "reason: %s", out.reason);
  CHECK(out.c == NULL);
  precis_case_output_free(&out);
  /* Ozaki's int8 slice products have the same int32 accumulators, hence the same limit. */
  CHECK(run_recipe(&t, preset_recipe("ozaki-int8-3"), &out) == PRECIS_ROW_UNSUPPORTED);
  CHECK_MSG(strstr(out.reason, "int32") && strstr(out.reason, "140000"), "reason: %s", out.reason);
  precis_case_output_free(&out);
  /* The float recipes have no such limit. */
  CHECK(run_recipe(&t, preset_recipe("fp32"), &out) == PRECIS_ROW_OK);
  if (out.c) CHECK_NEAR((double)out.c[0], 140000.0, 1.0);
  precis_case_output_free(&out);
  free_case(&t);

  make_case(&t, 1, 1, 133143, 1, one_a, one_b);
  CHECK(run_recipe(&t, preset_recipe("ozaki-int8-3"), &out) == PRECIS_ROW_OK);
  CHECK_MSG(out.c64 && out.c64[0] == 133143.0, "ozaki-int8-3 at k=133143: c = %.17g, expected 133143 exactly",
            out.c64 ? out.c64[0] : NAN);
  precis_case_output_free(&out);
  free_case(&t);
}

/* The s32 overflow guard of integer specs (cpu_quantized.c) at the exact k: the largest |unit| of an
 * operand is qmax (s8 127, s4 7), one more for sym-half, whose extra code -qmax-1 is used (s8 -128,
 * s4 -8), and 15 for u4 (q - zero with both in 0..15). A segment of k products runs when
 * unit_a * unit_b * k <= 2^31 - 1 and is refused one past it, naming the segment. */
static float minus_one_a(int64_t s, int64_t i, int64_t p) { return (void)s, (void)i, (void)p, -1.0f; }
static float minus_one_b(int64_t p, int64_t j) { return (void)p, (void)j, -1.0f; }
static float zero_one_b(int64_t p, int64_t j) { return (void)j, (float)(p & 1); }

static void test_s32_guard_at_the_exact_k(void) {
  /* The data reach every bound: -1 everywhere quantizes to sym-half's extra code (-amax/s = -(qmax+0.5)
   * rounds to -qmax-1), +1 to sym's qmax, and u4's 0/1 columns to codes 0 and 15 around zero point 0. */
  static const struct {
    const char *spec;
    long long unit_a, unit_b;
    float (*a_value)(int64_t, int64_t, int64_t);
    float (*b_value)(int64_t, int64_t);
  } cases[] = {
      {"a=s8@tensor:sym-half,b=s8@tensor:sym,acc=s32", 128, 127, minus_one_a, one_b},
      {"a=s8@tensor:sym-half,b=s8@tensor:sym-half,acc=s32", 128, 128, minus_one_a, minus_one_b},
      {"a=s8@tensor:sym,b=s4@col:sym-half,acc=s32", 127, 8, one_a, minus_one_b},
      {"a=s8@tensor:sym,b=s4@col:sym,acc=s32", 127, 7, one_a, one_b},
      {"a=s8@tensor:sym,b=u4@col:asym,acc=s32", 127, 15, one_a, zero_one_b},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    precis_recipe recipe;
    memset(&recipe, 0, sizeof recipe);
    snprintf(recipe.name, sizeof recipe.name, "%s", cases[c].spec);
    precis_status pst = precis_spec_parse(cases[c].spec, &recipe.spec);
    CHECK_MSG(pst == PRECIS_OK, "%s: %s", cases[c].spec, precis_last_error());
    if (pst != PRECIS_OK) continue;
    const long long k_max = 2147483647LL / (cases[c].unit_a * cases[c].unit_b);
    for (int past = 0; past < 2; past++) {
      test_case t;
      make_case(&t, 1, 1, k_max + past, 1, cases[c].a_value, cases[c].b_value);
      precis_case_output out;
      precis_row_status st = run_recipe(&t, &recipe, &out);
      if (!past) {
        CHECK_MSG(st == PRECIS_ROW_OK, "%s at k=%lld (%lld * %lld * k <= 2^31-1): %s", cases[c].spec, k_max,
                  cases[c].unit_a, cases[c].unit_b, out.reason ? out.reason : "not run");
        /* Within the two scales' rounding of +-1 (sym-half: 8/7.5, 128/127.5) of the exact sum. */
        if (out.c)
          CHECK_MSG(fabs((double)out.c[0] - t.data.c_ref[0]) <= fabs(t.data.c_ref[0]) * 0.15,
                    "%s at k=%lld: c = %.9g, reference %.9g", cases[c].spec, k_max, out.c[0], t.data.c_ref[0]);
      } else {
        char k_text[32];
        snprintf(k_text, sizeof k_text, "%lld", k_max + 1);
        CHECK_MSG(st == PRECIS_ROW_UNSUPPORTED && out.reason && strstr(out.reason, "s32") && strstr(out.reason, k_text),
                  "%s at k=%lld (over 2^31-1 by %lld * %lld * k): status %d, reason %s", cases[c].spec, k_max + 1,
                  cases[c].unit_a, cases[c].unit_b, (int)st, out.reason ? out.reason : "none");
      }
      precis_case_output_free(&out);
      free_case(&t);
    }
  }
}

int main(void) {
  precis_case_options_default(&options);
  options.warmup_calls = 0;
  options.warmup_ms = 0;
  options.min_samples = 1;
  options.max_samples = 1;
  options.max_time_ms = 1;
  if (precis_backend_cpu()->open(&backend_ctx, &options) != PRECIS_OK) {
    printf("cannot open the cpu backend: %s\n", precis_last_error());
    return 1;
  }
  static const harness_test tests[] = {
      {"all-zero inputs give exact zeros in every recipe", test_all_zero},
      {"zero rows and columns (int8 scale 0) give exact zeros, metrics never NaN", test_zero_rows_and_columns},
      {"subnormal-only inputs: finite outputs and metrics", test_subnormal_only},
      {"fp16 overflow: inf counted in nonfinite, default gate fails", test_fp16_overflow},
      {"int8: exact at k=133143, unsupported at k=140000 (int32 accumulation)", test_int8_long_reduction},
      {"integer specs: s32 guard at the exact k (s8/s4 sym-half, u4)", test_s32_guard_at_the_exact_k},
  };
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  precis_backend_cpu()->close(backend_ctx);
  return rc;
}
