/* The acceptance test's library (src/eval/accept.c) on the cpu backend, with workloads built in memory:
 * latency grows with batch, a memory limit that cannot be met fails and says why, concurrency 2
 * holds exactly twice the tracked memory of concurrency 1, the budget and the measurement are both
 * present and consistent, the tiles of a scaled output are checked against the right references,
 * and concurrent workers each run with their own backend state (worker_open), opened before any
 * case and never shared by overlapping cases. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/accept.h"
#include "eval/backend.h"
#include "harness.h"
#include "preset_fixture.h"

/* ---- an in-memory workload ---------------------------------------------------------------------- */

typedef struct test_workload {
  precis_workload_info info;
  precis_workload_data data;
} test_workload;

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double next_uniform(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}
static double next_normal(void) {
  double u = next_uniform(), v = next_uniform();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* a [batch, m, k], b [k, n] shared; integer values when `integers` (every float recipe exact). */
static void make_workload(test_workload *t, long long m, long long n, long long k, long long batch, bool integers) {
  memset(t, 0, sizeof *t);
  t->info.name = "test-proj";
  t->info.kind = "gemm";
  t->info.description = "";
  t->info.a_dist = t->info.b_dist = integers ? "integers" : "normal";
  t->info.reference = "";
  t->info.m = m, t->info.n = n, t->info.k = k, t->info.batch = batch;
  size_t a_count = (size_t)(batch * m * k), b_count = (size_t)(k * n), c_count = (size_t)(batch * m * n);
  t->data.a = malloc(a_count * sizeof(float));
  t->data.b = malloc(b_count * sizeof(float));
  t->data.c_ref = malloc(c_count * sizeof(double));
  t->data.ab_abs = malloc(c_count * sizeof(double));
  double *a64 = malloc(a_count * sizeof(double)), *b64 = malloc(b_count * sizeof(double));
  double *aa = malloc(a_count * sizeof(double)), *ba = malloc(b_count * sizeof(double));
  for (size_t i = 0; i < a_count; i++) {
    t->data.a[i] = integers ? (float)floor(next_uniform() * 9 - 4) : (float)next_normal();
    a64[i] = t->data.a[i], aa[i] = fabs(a64[i]);
  }
  for (size_t i = 0; i < b_count; i++) {
    t->data.b[i] = integers ? (float)floor(next_uniform() * 9 - 4) : (float)(next_normal() * 0.1);
    b64[i] = t->data.b[i], ba[i] = fabs(b64[i]);
  }
  /* The batch shares b: one GEMM over batch*m rows. */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(batch * m), (int)n, (int)k, 1.0, a64, (int)k, b64, (int)n,
              0.0, t->data.c_ref, (int)n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(batch * m), (int)n, (int)k, 1.0, aa, (int)k, ba, (int)n,
              0.0, t->data.ab_abs, (int)n);
  free(a64), free(b64), free(aa), free(ba);
}

static void free_workload(test_workload *t) {
  free(t->data.a), free(t->data.b), free(t->data.c_ref), free(t->data.ab_abs), free(t->data.calib_a);
  memset(t, 0, sizeof *t);
}

/* The recipes of a test's configuration (precis_accept_config points at them). */
static precis_recipe chosen_recipes[8];
static void use_recipes(precis_accept_config *cfg, const char *list) {
  precis_recipe_list parsed;
  if (precis_recipe_list_parse(list, &parsed) != PRECIS_OK || parsed.count > 8) abort();
  for (size_t i = 0; i < parsed.count; i++) chosen_recipes[i] = parsed.items[i];
  cfg->recipes = chosen_recipes;
  cfg->n_recipes = parsed.count;
  precis_recipe_list_free(&parsed);
}

static void quick_config(precis_accept_config *cfg) {
  precis_accept_config_default(cfg);
  cfg->backend = precis_backend_cpu();
  cfg->case_options.warmup_calls = 1;
  cfg->case_options.warmup_ms = 1;
  cfg->case_options.min_samples = 5;
  cfg->case_options.max_samples = 60;
  cfg->case_options.max_time_ms = 20;
  use_recipes(cfg, "fp32");
  cfg->memory_limit_bytes = 64LL << 30;
  cfg->memory_limit_source = "test";
  cfg->headroom = 0.10;
  cfg->repeats = 2;
}

static const precis_accept_point *find_point(const precis_accept_recipe_result *rr, long long batch, int workers,
                                             int repeat) {
  for (size_t i = 0; i < rr->n_points; i++)
    if (rr->points[i].batch == batch && rr->points[i].workers == workers && rr->points[i].repeat == repeat)
      return &rr->points[i];
  return NULL;
}

static bool has_reason(const precis_accept_recipe_result *rr, const char *prefix, const char *contains) {
  for (size_t i = 0; i < rr->n_reasons; i++)
    if (strncmp(rr->reasons[i], prefix, strlen(prefix)) == 0 && (!contains || strstr(rr->reasons[i], contains)))
      return true;
  return false;
}

/* The result holds exactly `n` recipes; a different count is a failed check (so that the checks
 * guarded by it cannot be skipped silently). */
static bool expect_recipes(const precis_accept_result *r, size_t n) {
  CHECK_EQ_INT(r->n_recipes, n);
  return r->n_recipes == n;
}

/* The tensor bytes of DESIGN §6 for one recipe, written out here rather than taken from
 * precis_recipe_tensor_bytes: A [batch,m,k] and B [k,n] in the input format, C [batch,m,n] in the
 * output format; int8 adds its int32 accumulators and float32 row and column scales, fp8 its two
 * float32 tensor scales. */
static long long expected_tensor_bytes(const char *preset, long long m, long long n, long long k, long long batch) {
  long long a = batch * m * k, b = k * n, c = batch * m * n;
  if (strcmp(preset, "fp32") == 0) return 4 * (a + b + c);
  if (strcmp(preset, "bf16") == 0 || strcmp(preset, "fp16") == 0) return 2 * (a + b + c);
  if (strcmp(preset, "int8") == 0) return (a + b) + 4 * c + 4 * c + 4 * (batch * m + n);
  if (strcmp(preset, "fp8") == 0) return (a + b) + 2 * c + 2 * 4;
  return -1;
}

/* ---- tests ---------------------------------------------------------------------------------------- */

TEST(scaled_input_tiles_each_sample) {
  test_workload t;
  make_workload(&t, 3, 4, 5, 2, false);
  t.info.calib_samples = 1;
  t.data.calib_a = malloc(3 * 5 * sizeof(float));
  for (int i = 0; i < 15; i++) t.data.calib_a[i] = (float)i;
  precis_accept_input in;
  CHECK_OK(precis_accept_input_build(&t.info, &t.data, 4, true, &in));
  CHECK_EQ_INT(in.info.m, 12);
  CHECK_EQ_INT(in.info.batch, 2);
  CHECK_EQ_INT(in.info.calib_samples, 1);
  CHECK(in.data.b == t.data.b);
  bool same = true;
  for (long long s = 0; s < 2; s++)
    for (long long row = 0; row < 12; row++)
      for (long long c = 0; c < 5; c++)
        same = same && in.data.a[(s * 12 + row) * 5 + c] == t.data.a[(s * 3 + row % 3) * 5 + c];
  CHECK(same);
  for (long long row = 0; row < 12; row++) CHECK(in.data.calib_a[row * 5 + 2] == t.data.calib_a[(row % 3) * 5 + 2]);
  precis_accept_input_free(&in);

  /* Without static scales the calibration split is not copied. */
  CHECK_OK(precis_accept_input_build(&t.info, &t.data, 2, false, &in));
  CHECK(in.data.calib_a == NULL);
  CHECK_EQ_INT(in.info.calib_samples, 0);
  precis_accept_input_free(&in);
  CHECK(precis_accept_input_build(&t.info, &t.data, 0, false, &in) == PRECIS_E_USAGE);
  free_workload(&t);
}

TEST(tile_metrics_compare_each_tile_with_its_reference) {
  test_workload t;
  make_workload(&t, 4, 6, 16, 2, true);
  const long long factor = 3;
  precis_accept_config cfg;
  quick_config(&cfg);
  precis_accept_input in;
  CHECK_OK(precis_accept_input_build(&t.info, &t.data, factor, false, &in));
  precis_accept_point p;
  float *c = NULL;
  double clipped = 0;
  CHECK_OK(precis_accept_run_point(&cfg, NULL, preset_recipe("fp32"), &in, 1, &p, &c, NULL, &clipped, NULL));
  CHECK(p.status == PRECIS_ROW_OK);
  CHECK(c != NULL);
  CHECK(isnan(clipped));
  precis_metric_value err[PRECIS_METRIC_ALL];
  if (c) {
    /* Integer inputs: fp32 is exact on every tile. */
    CHECK_OK(precis_accept_tile_metrics(&t.info, &t.data, factor, c, NULL, clipped, err));
    CHECK(err[PRECIS_METRIC_MAX_ABS].present && err[PRECIS_METRIC_MAX_ABS].worst == 0.0);
    /* One element of sample 1, tile 2 off by 0.5: the worst is exactly that, the mean over the six
     * tiles a sixth of it, so the tile->reference mapping is the one described. */
    size_t tile = (size_t)(t.info.m * t.info.n);
    c[(1 * factor + 2) * tile + 5] += 0.5f;
    CHECK_OK(precis_accept_tile_metrics(&t.info, &t.data, factor, c, NULL, clipped, err));
    CHECK_NEAR(err[PRECIS_METRIC_MAX_ABS].worst, 0.5, 0);
    CHECK_NEAR(err[PRECIS_METRIC_MAX_ABS].mean, 0.5 / 6, 1e-15);
  }
  free(c);
  precis_accept_point_free(&p);
  precis_accept_input_free(&in);
  free_workload(&t);
}

void openblas_set_num_threads(int num_threads);

TEST(latency_grows_with_batch) {
  /* One BLAS thread: with two, OpenBLAS's threads wait on a core that parallel tests keep busy, and
   * a 16x smaller GEMM can then take longer than the larger one. */
  openblas_set_num_threads(1);
  test_workload t;
  make_workload(&t, 8, 128, 128, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.case_options.min_samples = 15;
  /* A budget that a loaded (or sanitized) CI machine still fits 3 samples of batch 128 into. */
  cfg.case_options.max_time_ms = 1000;
  cfg.batches[0] = 1, cfg.batches[1] = 16, cfg.batches[2] = 128;
  cfg.n_batches = 3;
  cfg.repeats = 1;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  if (expect_recipes(&r, 1)) {
    const precis_accept_point *p1 = find_point(&r.recipes[0], 1, 1, 0), *p16 = find_point(&r.recipes[0], 16, 1, 0),
                              *p128 = find_point(&r.recipes[0], 128, 1, 0);
    CHECK(p1 && p16 && p128);
    if (p1 && p16 && p128) {
      /* The fastest sample is the figure least disturbed by other processes (CI runs tests in
       * parallel, sometimes under sanitizers); 16x the work per step must show in it. */
      CHECK_MSG(p1->min_ms < p16->min_ms && p16->min_ms < p128->min_ms, "min %g, %g, %g ms", p1->min_ms,
                p16->min_ms, p128->min_ms);
      CHECK_MSG(p1->median_ms < p128->median_ms, "median %g, %g ms", p1->median_ms, p128->median_ms);
      CHECK_EQ_INT(p128->rows, 8 * 128);
      CHECK(p128->samples >= 3);
      CHECK(p1->min_ms <= p1->median_ms && p1->median_ms <= p1->p95_ms && p1->p95_ms <= p1->p99_ms &&
            p1->p99_ms <= p1->max_ms);
      CHECK(p128->throughput_tflops > 0);
    }
    CHECK(r.recipes[0].verdict == PRECIS_VERDICT_PASS);
    CHECK(r.verdict == PRECIS_VERDICT_PASS);
    CHECK(r.recipes[0].accuracy_ran && r.recipes[0].meets_accuracy);
  }
  precis_accept_result_free(&r);
  free_workload(&t);
  openblas_set_num_threads(0);
}

TEST(concurrency_two_holds_twice_the_tracked_memory) {
  test_workload t;
  make_workload(&t, 16, 64, 64, 2, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  use_recipes(&cfg, "fp32,int8");
  cfg.batches[0] = 2;
  cfg.n_batches = 1;
  cfg.concurrency[0] = 1, cfg.concurrency[1] = 2;
  cfg.n_concurrency = 2;
  cfg.case_options.max_time_ms = 60;
  cfg.case_options.max_samples = 1000000; /* the time budget ends the sampling */
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK_EQ_INT(r.n_recipes, 2);
  for (size_t i = 0; i < r.n_recipes; i++) {
    const precis_accept_point *one = find_point(&r.recipes[i], 2, 1, 0), *two = find_point(&r.recipes[i], 2, 2, 0);
    CHECK(one && two);
    if (!one || !two) continue;
    /* Each worker allocates exactly what a lone worker does; nothing is shared between them, so
     * the sum of the tracked peaks is exactly twice. */
    CHECK_MSG(two->tracked_peak_bytes == 2 * one->tracked_peak_bytes, "%s: %lld vs 2 x %lld", r.recipes[i].recipe,
              two->tracked_peak_bytes, one->tracked_peak_bytes);
    CHECK(one->tracked_peak_bytes > 0);
    CHECK_EQ_INT(two->predicted_tracked_bytes, 2 * one->predicted_tracked_bytes);
    /* Both workers' samples are pooled, and they ran at the same time: one after the other would
     * give an overlap of 0. (Not near 1 with such tiny GEMMs: the per-sample bookkeeping outside
     * the timed region differs between workers, so one ends later.) */
    CHECK(two->samples >= 2 * cfg.case_options.min_samples);
    CHECK_MSG(two->overlap > 0.25, "overlap %g", two->overlap);
  }
  precis_accept_result_free(&r);
  free_workload(&t);
}

TEST(budget_and_measurement_are_consistent) {
  test_workload t;
  make_workload(&t, 16, 64, 64, 2, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  use_recipes(&cfg, "fp32,bf16,fp16,int8,fp8");
  cfg.batches[0] = 1, cfg.batches[1] = 4;
  cfg.n_batches = 2;
  cfg.concurrency[0] = 2;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK_EQ_INT(r.n_recipes, 5);
  for (size_t i = 0; i < r.n_recipes; i++) {
    const precis_accept_recipe_result *rr = &r.recipes[i];
    const char *expected_order[] = {"fp32", "bf16", "fp16", "int8", "fp8"};
    CHECK_MSG(rr->recipe && strcmp(rr->recipe, expected_order[i]) == 0, "recipe %zu is %s", i,
              rr->recipe ? rr->recipe : "(null)");
    CHECK(rr->n_points == 3); /* two batches, then one repeat of the acceptance point */
    for (size_t j = 0; j < rr->n_points; j++) {
      const precis_accept_point *p = &rr->points[j];
      CHECK(p->status == PRECIS_ROW_OK);
      const precis_recipe *recipe = preset_recipe(rr->recipe);
      /* The workload is [2, 16, 64] x [64, 64]; a point of batch B tiles each sample's rows B times. */
      CHECK_MSG(p->tensor_bytes == expected_tensor_bytes(rr->recipe, 16 * p->batch, 64, 64, 2),
                "%s batch %lld: tensor_bytes %lld, expected %lld", rr->recipe, p->batch, p->tensor_bytes,
                expected_tensor_bytes(rr->recipe, 16 * p->batch, 64, 64, 2));
      CHECK_EQ_INT(p->workspace_bytes, 0);
      CHECK_EQ_INT(p->predicted_tracked_bytes, 2 * p->tensor_bytes);
      /* The analytic tensors are a lower bound of what the emulation holds: it keeps rounded inputs
       * in float32 (2x the bf16/fp16 bytes, 4x the int8/fp8 bytes) plus int8's integer-valued
       * doubles; fp32 holds exactly the tensors. */
      CHECK_MSG(p->predicted_tracked_bytes <= p->tracked_peak_bytes, "%s: predicted %lld > tracked %lld", rr->recipe,
                p->predicted_tracked_bytes, p->tracked_peak_bytes);
      if (recipe->preset->baseline) CHECK_EQ_INT(p->tracked_peak_bytes, p->predicted_tracked_bytes);
      CHECK(p->baseline_bytes > 0);
      CHECK(p->host_peak_rss_bytes > 0);
      CHECK_STR(p->peak_view, "host_peak_rss");
      CHECK_EQ_INT(p->peak_bytes, p->host_peak_rss_bytes);
      CHECK_EQ_INT(p->predicted_peak_bytes, p->baseline_bytes + p->predicted_tracked_bytes);
      CHECK_EQ_INT(p->untracked_bytes, p->peak_bytes - p->baseline_bytes - p->tracked_peak_bytes);
      CHECK(p->device_peak_bytes == -1 && p->device_baseline_bytes == -1);
      /* The peak is at least the baseline (RSS sampled before the workers allocated). */
      CHECK(p->peak_bytes >= p->baseline_bytes - (1 << 20));
    }
    CHECK(rr->runs == 2);
    CHECK(rr->peak_max_bytes >= rr->peak_min_bytes && rr->peak_spread_bytes == rr->peak_max_bytes - rr->peak_min_bytes);
    CHECK(rr->fits && rr->headroom_covers_spread);
  }
  precis_accept_result_free(&r);
  free_workload(&t);
}

TEST(memory_limit_that_cannot_be_met_fails_with_the_reason) {
  test_workload t;
  make_workload(&t, 8, 32, 32, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.batches[0] = 1;
  cfg.n_batches = 1;
  cfg.memory_limit_bytes = 1000000; /* 1 MB: the process alone holds more */
  cfg.memory_limit_source = "--memory-limit";
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  if (expect_recipes(&r, 1)) {
    const precis_accept_recipe_result *rr = &r.recipes[0];
    CHECK(rr->verdict == PRECIS_VERDICT_FAIL);
    CHECK(!rr->fits);
    CHECK_EQ_INT(rr->allowed_bytes, 900000);
    CHECK(has_reason(rr, "memory:", "exceeds"));
    CHECK(has_reason(rr, "memory:", "--memory-limit"));
    /* Latency and accuracy were fine: only memory is named. */
    CHECK(rr->meets_accuracy);
    CHECK_EQ_INT(rr->n_reasons, 1);
  }
  precis_accept_result_free(&r);
  free_workload(&t);
}

TEST(latency_target_and_largest_batch_meeting_it) {
  test_workload t;
  make_workload(&t, 8, 64, 64, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.batches[0] = 1, cfg.batches[1] = 4;
  cfg.n_batches = 2;
  cfg.repeats = 1;
  cfg.latency_target_ms = 1e6; /* any machine meets it */
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_PASS);
  if (expect_recipes(&r, 1)) CHECK_EQ_INT(r.recipes[0].largest_batch_meeting_target[0], 4);
  precis_accept_result_free(&r);

  cfg.latency_target_ms = 1e-9; /* no machine meets it */
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  if (expect_recipes(&r, 1)) {
    CHECK(!r.recipes[0].meets_latency);
    CHECK(has_reason(&r.recipes[0], "latency:", "exceeds the target"));
    CHECK_EQ_INT(r.recipes[0].largest_batch_meeting_target[0], -1);
    CHECK(r.recipes[0].fits);
  }
  precis_accept_result_free(&r);
  free_workload(&t);
}

TEST(accuracy_criteria_gate_the_verdict) {
  test_workload t;
  make_workload(&t, 8, 64, 64, 2, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  use_recipes(&cfg, "bf16");
  cfg.batches[0] = 2;
  cfg.n_batches = 1;
  cfg.repeats = 1;
  precis_criteria strict = {0};
  CHECK_OK(precis_criterion_parse("rel_fro<=1e-9", &strict.items[0]));
  strict.count = 1;
  cfg.require = &strict;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  if (expect_recipes(&r, 1)) {
    CHECK(r.recipes[0].accuracy_ran && !r.recipes[0].meets_accuracy);
    CHECK(has_reason(&r.recipes[0], "accuracy:", "rel_fro"));
    CHECK(r.recipes[0].error[PRECIS_METRIC_REL_FRO].worst > 1e-4);
  }
  precis_accept_result_free(&r);

  cfg.require = NULL; /* bf16's default gate */
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_PASS);
  precis_accept_result_free(&r);
  free_workload(&t);
}

TEST(memory_judgement_against_limit_and_spread) {
  precis_accept_recipe_result rr;
  memset(&rr, 0, sizeof rr);
  const long long peaks[] = {100, 150, 120};
  precis_accept_judge_memory(peaks, 3, 1000, 0.01, &rr);
  CHECK_EQ_INT(rr.peak_max_bytes, 150);
  CHECK_EQ_INT(rr.peak_min_bytes, 100);
  CHECK_EQ_INT(rr.peak_spread_bytes, 50);
  CHECK_EQ_INT(rr.allowed_bytes, 990);
  CHECK_EQ_INT(rr.headroom_bytes, 10);
  CHECK(rr.fits);
  CHECK(!rr.headroom_covers_spread); /* 10 B of headroom, 50 B of run-to-run variation */
  precis_accept_judge_memory(peaks, 3, 1000, 0.10, &rr);
  CHECK(rr.fits && rr.headroom_covers_spread);
  precis_accept_judge_memory(peaks, 3, 160, 0.10, &rr);
  CHECK_EQ_INT(rr.allowed_bytes, 144);
  CHECK(!rr.fits);
  const long long none[] = {-1};
  precis_accept_judge_memory(none, 1, 1000, 0.1, &rr);
  CHECK(!rr.fits && rr.peak_max_bytes == -1);
}

TEST(memory_sizes_parse) {
  long long v = 0;
  CHECK_OK(precis_accept_parse_bytes("1048576", &v));
  CHECK_EQ_INT(v, 1048576);
  CHECK_OK(precis_accept_parse_bytes("512M", &v));
  CHECK_EQ_INT(v, 512LL << 20);
  CHECK_OK(precis_accept_parse_bytes("2GiB", &v));
  CHECK_EQ_INT(v, 2LL << 30);
  CHECK_OK(precis_accept_parse_bytes("1.5K", &v));
  CHECK_EQ_INT(v, 1536);
  CHECK_OK(precis_accept_parse_bytes("100B", &v));
  CHECK_EQ_INT(v, 100);
  CHECK(precis_accept_parse_bytes("12X", &v) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "12X") != NULL);
  CHECK(precis_accept_parse_bytes("-5", &v) == PRECIS_E_USAGE);
  CHECK(precis_accept_parse_bytes("", &v) == PRECIS_E_USAGE);
  CHECK(precis_accept_parse_bytes("4Gb", &v) == PRECIS_E_USAGE);
  long long limit = 0;
  CHECK_OK(precis_accept_host_memory_limit(&limit));
  CHECK(limit > precis_accept_current_rss_bytes());
}

/* ---- a backend that reports device views, and one that runs out of memory ---------------------- */

static long long fake_max_rows = 1LL << 40;

static precis_status fake_run_case(void *ctx, const precis_spec *spec, const precis_workload_info *w,
                                   const precis_workload_data *d, const precis_case_options *o, precis_case_output *out) {
  if (w->m > fake_max_rows) {
    out->status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(out->reason, sizeof out->reason, "device allocation of %lld bytes failed (fake)", (long long)(w->m * w->k * 4));
    return PRECIS_OK;
  }
  precis_status st = precis_backend_cpu()->run_case(ctx, spec, w, d, o, out);
  /* What a device backend reports: the context baseline, a peak that also holds an untracked
   * library buffer, and the workspace it handed over. */
  out->memory.device_baseline_bytes = 500LL << 20;
  out->memory.device_peak_bytes = (500LL << 20) + out->memory.tracked_peak_bytes + (32LL << 20) + 4096;
  precis_kv_set_int(&out->details, "workspace_bytes", 32LL << 20);
  return st;
}

TEST(device_views_and_a_point_that_does_not_fit) {
  precis_backend fake = *precis_backend_cpu();
  fake.name = "fake-device";
  fake.run_case = fake_run_case;
  test_workload t;
  make_workload(&t, 8, 32, 32, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.backend = &fake;
  cfg.batches[0] = 1, cfg.batches[1] = 2;
  cfg.n_batches = 2;
  cfg.repeats = 1;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(expect_recipes(&r, 1) && r.recipes[0].n_points == 2);
  if (r.n_recipes == 1 && r.recipes[0].n_points == 2) {
    const precis_accept_point *p = &r.recipes[0].points[1];
    CHECK_STR(p->peak_view, "device_peak");
    CHECK_EQ_INT(p->baseline_bytes, 500LL << 20);
    CHECK_EQ_INT(p->workspace_bytes, 32LL << 20);
    CHECK_EQ_INT(p->predicted_peak_bytes, (500LL << 20) + p->tensor_bytes + (32LL << 20));
    CHECK_EQ_INT(p->untracked_bytes, (32LL << 20) + 4096);
    CHECK(p->host_peak_rss_bytes > 0);
  }
  precis_accept_result_free(&r);

  fake_max_rows = 8; /* batch 2 (16 rows) does not fit */
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  if (expect_recipes(&r, 1)) {
    CHECK(!r.recipes[0].fits);
    CHECK(has_reason(&r.recipes[0], "memory:", "did not complete"));
    CHECK(has_reason(&r.recipes[0], "memory:", "fake"));
    CHECK(r.recipes[0].points[1].status == PRECIS_ROW_DOES_NOT_FIT);
  }
  precis_accept_result_free(&r);
  fake_max_rows = 1LL << 40;
  free_workload(&t);
}

/* ---- per-worker backend state under concurrency (issue 14.1) ----------------------------------- */

/* An instrumented backend: the cpu backend's cases, with per-worker state that records who uses
 * it. Each worker's state must be opened before any case runs (outside every timed region), used
 * by one case at a time, and the two workers of a point must hold different states while their
 * cases overlap. */
typedef struct probe_worker {
  int index;
  atomic_int busy; /* cases using this state right now */
} probe_worker;

static struct {
  pthread_mutex_t mutex;
  atomic_int in_flight;     /* cases running now, all workers */
  atomic_int opened, closed, violations;
  atomic_int arrivals;      /* cases of 2-worker points started so far */
  atomic_int overlapped;    /* cases of 2-worker points that met their partner inside run_case */
  const void *seen[8]; /* the distinct states run_case received (compared, never dereferenced) */
  int seen_index[8];
  int n_seen;
} probe = {.mutex = PTHREAD_MUTEX_INITIALIZER};

static precis_status probe_worker_open(void *ctx, int index, void **worker) {
  (void)ctx;
  if (atomic_load(&probe.in_flight) != 0) atomic_fetch_add(&probe.violations, 1); /* opened during a case */
  probe_worker *w = calloc(1, sizeof *w);
  if (!w) return PRECIS_E_NOMEM;
  w->index = index;
  atomic_init(&w->busy, 0);
  atomic_fetch_add(&probe.opened, 1);
  *worker = w;
  return PRECIS_OK;
}

static void probe_worker_close(void *ctx, void *worker) {
  (void)ctx;
  probe_worker *w = worker;
  if (atomic_load(&w->busy) != 0) atomic_fetch_add(&probe.violations, 1);
  atomic_fetch_add(&probe.closed, 1);
  free(w);
}

static precis_status probe_run_case(void *ctx, const precis_spec *spec, const precis_workload_info *w,
                                    const precis_workload_data *d, const precis_case_options *o,
                                    precis_case_output *out) {
  probe_worker *self = o->worker;
  if (!self) {
    atomic_fetch_add(&probe.violations, 1);
    return precis_backend_cpu()->run_case(ctx, spec, w, d, o, out);
  }
  if (atomic_fetch_add(&self->busy, 1) != 0) atomic_fetch_add(&probe.violations, 1); /* shared state */
  atomic_fetch_add(&probe.in_flight, 1);
  pthread_mutex_lock(&probe.mutex);
  bool known = false;
  for (int i = 0; i < probe.n_seen; i++) known = known || probe.seen[i] == self;
  if (!known && probe.n_seen < 8) {
    probe.seen_index[probe.n_seen] = self->index;
    probe.seen[probe.n_seen++] = self;
  }
  pthread_mutex_unlock(&probe.mutex);
  /* A 2-worker point (the spread rule is off only there): a rendezvous with the other worker. The
   * points run one after another, so cases 2p and 2p+1 of this mode are one point's pair; each waits
   * (up to 30 s, for a loaded machine) until both have arrived, so both are inside run_case at
   * once. A pool that ran its workers one after the other would never complete the pair. */
  if (o->target_rel_spread == 0) {
    int ticket = atomic_fetch_add(&probe.arrivals, 1), pair_complete = (ticket | 1) + 1;
    for (int i = 0; i < 30000 && atomic_load(&probe.arrivals) < pair_complete; i++) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    if (atomic_load(&probe.arrivals) >= pair_complete) atomic_fetch_add(&probe.overlapped, 1);
  }
  precis_status st = precis_backend_cpu()->run_case(ctx, spec, w, d, o, out);
  atomic_fetch_sub(&probe.in_flight, 1);
  atomic_fetch_sub(&self->busy, 1);
  return st;
}

TEST(concurrent_workers_each_get_their_own_backend_state) {
  precis_backend probe_backend = *precis_backend_cpu();
  probe_backend.name = "probe";
  probe_backend.run_case = probe_run_case;
  probe_backend.worker_open = probe_worker_open;
  probe_backend.worker_close = probe_worker_close;
  test_workload t;
  make_workload(&t, 8, 32, 32, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.backend = &probe_backend;
  cfg.batches[0] = 1, cfg.batches[1] = 2;
  cfg.n_batches = 2;
  cfg.concurrency[0] = 1, cfg.concurrency[1] = 2;
  cfg.n_concurrency = 2;
  cfg.repeats = 2;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.n_recipes == 1 && r.recipes[0].n_points == 5); /* 2 batches x 2 levels + 1 repeat */
  for (size_t i = 0; i < r.recipes[0].n_points; i++) CHECK_EQ_INT(r.recipes[0].points[i].status, PRECIS_ROW_OK);
  precis_accept_result_free(&r);
  CHECK_EQ_INT(atomic_load(&probe.violations), 0);
  /* One state per worker for the whole test (not per point, not per case), all closed. */
  CHECK_EQ_INT(atomic_load(&probe.opened), 2);
  CHECK_EQ_INT(atomic_load(&probe.closed), 2);
  CHECK_EQ_INT(probe.n_seen, 2);
  if (probe.n_seen == 2) CHECK(probe.seen_index[0] != probe.seen_index[1]);
  /* The 2-worker points (3 of them, 2 cases each) really overlapped, each with its own state. */
  CHECK_MSG(atomic_load(&probe.overlapped) >= 6, "%d cases overlapped", atomic_load(&probe.overlapped));
  free_workload(&t);
}

TEST(bad_configuration_is_refused) {
  test_workload t;
  make_workload(&t, 4, 8, 8, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  precis_accept_result r;
  cfg.batches[0] = 4, cfg.batches[1] = 2;
  cfg.n_batches = 2;
  precis_accept_result_init(&r);
  CHECK(precis_accept_run(&cfg, &t.info, &t.data, &r) == PRECIS_E_USAGE);
  precis_accept_result_free(&r);
  quick_config(&cfg);
  cfg.headroom = 1.0;
  precis_accept_result_init(&r);
  CHECK(precis_accept_run(&cfg, &t.info, &t.data, &r) == PRECIS_E_USAGE);
  precis_accept_result_free(&r);
  quick_config(&cfg);
  cfg.memory_limit_bytes = 0;
  precis_accept_result_init(&r);
  CHECK(precis_accept_run(&cfg, &t.info, &t.data, &r) == PRECIS_E_USAGE);
  precis_accept_result_free(&r);
  free_workload(&t);
}

/* ---- a backend whose latency distribution is known: median 1 ms, p95 5 ms ------------------------ */

static precis_status skewed_run_case(void *ctx, const precis_spec *spec, const precis_workload_info *w,
                                     const precis_workload_data *d, const precis_case_options *o,
                                     precis_case_output *out) {
  precis_status st = precis_backend_cpu()->run_case(ctx, spec, w, d, o, out);
  if (st != PRECIS_OK || out->status != PRECIS_ROW_OK) return st;
  /* 20 samples: 16 of 1 ms, 4 of 5 ms. Median 1 ms; p95 (any interpolation) 5 ms. */
  enum { N = 20 };
  double *s = malloc(N * sizeof *s);
  if (!s) return PRECIS_E_NOMEM;
  for (int i = 0; i < N; i++) s[i] = i % 5 == 4 ? 5.0 : 1.0;
  free(out->time.samples_ms);
  out->time.samples_ms = s;
  out->time.n_samples_ms = N;
  out->time.samples = N;
  out->time.min_ms = 1.0, out->time.median_ms = 1.0, out->time.mean_ms = 1.8;
  out->time.p95_ms = out->time.p99_ms = 5.0;
  return st;
}

TEST(latency_target_judges_the_p95_not_the_median) {
  precis_backend skewed = *precis_backend_cpu();
  skewed.name = "skewed";
  skewed.run_case = skewed_run_case;
  test_workload t;
  make_workload(&t, 8, 32, 32, 1, false);
  precis_accept_config cfg;
  quick_config(&cfg);
  cfg.backend = &skewed;
  cfg.batches[0] = 1, cfg.batches[1] = 2;
  cfg.n_batches = 2;
  cfg.repeats = 1;
  /* Between the median and the p95: a median-based judgement would pass. */
  cfg.latency_target_ms = 3.0;
  precis_accept_result r;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  if (expect_recipes(&r, 1)) {
    const precis_accept_recipe_result *rr = &r.recipes[0];
    CHECK_NEAR(rr->accept_median_ms, 1.0, 1e-12);
    CHECK_NEAR(rr->accept_p95_ms, 5.0, 1e-12);
    CHECK(!rr->meets_latency);
    CHECK(has_reason(rr, "latency:", "exceeds the target"));
    CHECK_EQ_INT(rr->largest_batch_meeting_target[0], -1);
    CHECK_EQ_INT(rr->n_points, 2);
    for (size_t i = 0; i < rr->n_points; i++) CHECK(!rr->points[i].meets_latency);
  }
  precis_accept_result_free(&r);
  /* Just above the p95 (and below the p99 of a longer tail, were it judged): pass. */
  cfg.latency_target_ms = 5.01;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_PASS);
  if (expect_recipes(&r, 1)) {
    CHECK(r.recipes[0].meets_latency);
    CHECK_EQ_INT(r.recipes[0].largest_batch_meeting_target[0], 2);
  }
  precis_accept_result_free(&r);
  /* Just below it: fail. */
  cfg.latency_target_ms = 4.99;
  precis_accept_result_init(&r);
  CHECK_OK(precis_accept_run(&cfg, &t.info, &t.data, &r));
  CHECK(r.verdict == PRECIS_VERDICT_FAIL);
  precis_accept_result_free(&r);
  free_workload(&t);
}

RUN_TESTS(T(scaled_input_tiles_each_sample), T(tile_metrics_compare_each_tile_with_its_reference),
          T(latency_grows_with_batch), T(concurrency_two_holds_twice_the_tracked_memory),
          T(budget_and_measurement_are_consistent), T(memory_limit_that_cannot_be_met_fails_with_the_reason),
          T(latency_target_and_largest_batch_meeting_it), T(accuracy_criteria_gate_the_verdict),
          T(memory_judgement_against_limit_and_spread), T(memory_sizes_parse),
          T(device_views_and_a_point_that_does_not_fit), T(concurrent_workers_each_get_their_own_backend_state),
          T(latency_target_judges_the_p95_not_the_median), T(bad_configuration_is_refused))
