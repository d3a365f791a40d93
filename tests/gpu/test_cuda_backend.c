/* The cuda backend against the cpu backend (the CPU twins of every conversion) on workloads built
 * here: int8 bit-exact (exact int32 accumulators, the same dequantization), integer-valued inputs
 * exact for every float recipe, random inputs within the componentwise bound of
 * tests/backend_agreement.h (|gpu - cpu| <= 4*gamma_k*|a|·|b| + 2*u_out*(|gpu| + |cpu|), gamma_k of
 * the recipe's accumulation model, fp8's own; both approximate the same rounded-input product). Then the measurements, --cold and --autotune,
 * and an out-of-memory case that must become does-not-fit with the run going on.
 * Skipped (77) only on a machine without a CUDA device (gpu_probe.h); a device that does not open fails. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "backend_agreement.h"
#include "kernels/cuda_api.h"
#include "numerics/format.h"
#include "eval/gemm_plan.h"
#include "cuda_cases.h"
#include "gpu_probe.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/quant.h"

static const precis_backend *cuda, *cpu;
static void *cuda_ctx, *cpu_ctx;
static int cc_major, cc_minor; /* device 0's compute capability, from the backend's environment */

/* A recipe the compute-capability rule allows must also pass the backend's cuBLASLt probe: a probe
 * that fails there (descriptors cuBLASLt rejects, no heuristic result) is a bug in the backend, not
 * a missing feature, and must fail the test rather than skip the recipe. */
static bool recipe_runs_here(const precis_recipe *r) {
  char reason[512] = "";
  bool cc_ok = precis_cuda_spec_supported(&r->spec, cc_major, cc_minor, NULL, 0);
  bool probed = cuda->supports(cuda_ctx, &r->spec, reason, sizeof reason);
  if (!probed) printf("  %s unsupported here: %s\n", r->name, reason);
  CHECK_MSG(probed || !cc_ok, "%s: sm_%d%d should run it, but the backend says: %s", r->name, cc_major, cc_minor,
            reason);
  return probed;
}

static precis_case_options quick_options(void) {
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1;
  o.warmup_ms = 0;
  o.min_samples = 2;
  o.max_samples = 4;
  o.max_time_ms = 50;
  return o;
}

static bool run(const precis_backend *be, void *ctx, const precis_recipe *r, const workload *w,
                const precis_case_options *o, precis_case_output *out) {
  precis_case_output_init(out);
  precis_status st = be->run_case(ctx, &r->spec, &w->info, &w->data, o, out);
  if (st != PRECIS_OK || out->status != PRECIS_ROW_OK || !out->c) {
    fprintf(stderr, "  %s backend, %s: status %s: %s %s\n", be->name, r->name, precis_row_status_str(out->status),
            out->reason, st != PRECIS_OK ? precis_last_error() : "");
    return false;
  }
  return true;
}

/* Compares one recipe's outputs; exact when `exact`, else within tests/backend_agreement.h's bound. */
static void compare(const precis_recipe *r, const workload *w, const float *gpu, const float *ref, bool exact,
                    const char *label) {
  int64_t count = w->info.batch * w->info.m * w->info.n, bad = 0, first = -1;
  bool int8 = r->spec.acc == PRECIS_FMT_I32;
  agreement bound = agreement_for(&r->spec, w->info.k);
  /* The worst |gpu - cpu| / bound (above 1 fails), and the worst part of |gpu - cpu| that output
   * rounding does not explain, in units of the accumulation term: the figure to tune the
   * accumulation model from (docs/cuda-backend.md, "To verify"); output-rounding flips alone
   * would dominate the raw difference and mislead. */
  double worst_ratio = 0, worst_excess = 0;
  for (int64_t i = 0; i < count; i++) {
    double g = gpu[i], c = ref[i];
    bool ok;
    if (exact || int8) {
      ok = memcmp(&gpu[i], &ref[i], sizeof(float)) == 0;
    } else {
      double limit = agreement_bound(&bound, w->data.ab_abs[i], g, c);
      worst_ratio = fmax(worst_ratio, fabs(g - c) / limit);
      worst_excess = fmax(worst_excess, agreement_excess(&bound, w->data.ab_abs[i], g, c));
      ok = fabs(g - c) <= limit;
    }
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (!exact && !int8)
    printf("  %s %s m=%lld n=%lld k=%lld: worst |gpu-cpu|/bound = %.3g, accumulation excess (beyond output "
           "rounding, in units of the bound's accumulation term) = %.3g\n",
           r->name, label, (long long)w->info.m, (long long)w->info.n, (long long)w->info.k, worst_ratio, worst_excess);
  CHECK_MSG(bad == 0, "%s %s m=%lld n=%lld k=%lld batch=%lld b_batched=%d: %lld of %lld differ; first at %lld: gpu %.9g cpu %.9g",
            r->name, label, (long long)w->info.m, (long long)w->info.n, (long long)w->info.k, (long long)w->info.batch,
            w->info.b_batched, (long long)bad, (long long)count, (long long)first, first >= 0 ? gpu[first] : 0.0,
            first >= 0 ? ref[first] : 0.0);
}

static void against_cpu(bool integers) {
  precis_case_options o = quick_options();
  /* The presets of `all`, then fp8-fast (optional: FAST_ACCUM against the cpu backend's model of
   * the unpromoted accumulator, within its bound k*2^-13). */
  for (int id = 0; id <= PRESET_COUNT; id++) {
    const precis_recipe *r = id < PRESET_COUNT ? preset_recipe_at((size_t)id) : preset_recipe("fp8-fast");
    if (!recipe_runs_here(r)) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      workload w;
      workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, integers, 0);
      precis_case_output g, c;
      char why[512];
      /* Refusals the plan or the emulation must give (cuda_cases.h; checked on the CPU by
       * tests/test_cuda_expectations.c): nvfp4's per-b tensor scales on random data, scale tensors
       * with a b per batch element. */
      if (cuda_expected_refusal(&r->spec, &w.info, &w.data, cc_major, cc_minor, why, sizeof why)) {
        precis_case_output_init(&g);
        CHECK_OK(cuda->run_case(cuda_ctx, &r->spec, &w.info, &w.data, &o, &g));
        CHECK_MSG(g.status == PRECIS_ROW_UNSUPPORTED && strstr(g.reason, why), "%s shape %zu: %s: %s (expected: %s)",
                  r->name, s, precis_row_status_str(g.status), g.reason, why);
        printf("  %s shape %zu refused as expected: %s\n", r->name, s, g.reason);
        precis_case_output_free(&g);
        workload_free(&w);
        continue;
      }
      bool ok_g = run(cuda, cuda_ctx, r, &w, &o, &g), ok_c = run(cpu, cpu_ctx, r, &w, &o, &c);
      CHECK_MSG(ok_g && ok_c, "%s shape %zu ran on both backends", r->name, s);
      /* fp8 rescales the integers (s = amax/448), and issue 16's scaled formats likewise, so they are
       * exact only up to the summation; unscaled floats and int8's integer GEMM are exact. */
      bool exact = integers && (r->spec.acc == PRECIS_FMT_I32 ||
                                (!precis_operand_is_scaled(&r->spec.a) && !precis_operand_is_scaled(&r->spec.b)));
      if (ok_g && ok_c) compare(r, &w, g.c, c.c, exact, integers ? "integers" : "uniform");
      if (ok_g && ok_c && r->spec.a.gran != PRECIS_GRAN_NONE)
        CHECK_MSG(g.clipped_fraction == c.clipped_fraction, "%s clipped %g vs cpu %g", r->name, g.clipped_fraction,
                  c.clipped_fraction);
      precis_case_output_free(&g);
      precis_case_output_free(&c);
      workload_free(&w);
    }
  }
}

TEST(every_recipe_matches_the_cpu_backend_exactly_on_integers) { against_cpu(true); }
TEST(every_recipe_matches_the_cpu_backend_within_the_bound_on_random_data) { against_cpu(false); }

/* Issue 16 on sm_90: the cuBLASLt scale modes on shapes that are not multiples of 128 or 16 (partial
 * k-blocks and n-blocks, padded rows), against the cpu backend within the bound; the codes and
 * scales are the host quantizer's, so the clipped fractions are equal. */
TEST(fp8_scale_modes_match_the_cpu_backend_on_odd_shapes) {
  static const shape odd[] = {{17, 200, 300, 1, false}, {3, 130, 129, 2, false}, {1, 257, 385, 1, false},
                              {33, 16, 128, 1, false}};
  precis_case_options o = quick_options();
  const char *names[] = {"fp8-rowwise", "fp8-block"};
  for (size_t r = 0; r < 2; r++) {
    const precis_recipe *recipe = preset_recipe(names[r]);
    if (!recipe_runs_here(recipe)) continue;
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
      workload w;
      workload_make(&w, odd[i].m, odd[i].n, odd[i].k, odd[i].batch, false, false, 0);
      precis_case_output g, c;
      bool ok_g = run(cuda, cuda_ctx, recipe, &w, &o, &g), ok_c = run(cpu, cpu_ctx, recipe, &w, &o, &c);
      CHECK_MSG(ok_g && ok_c, "%s odd shape %zu ran on both backends", names[r], i);
      if (ok_g && ok_c) {
        compare(recipe, &w, g.c, c.c, false, "odd");
        CHECK_MSG(g.clipped_fraction == c.clipped_fraction, "%s clipped %g vs cpu %g", names[r], g.clipped_fraction,
                  c.clipped_fraction);
        const char *mode = precis_kv_get(&g.details, "a_scale_mode");
        CHECK(mode && strstr(mode, r == 0 ? "OUTER_VEC_32F" : "BLK128x128_32F"));
      }
      precis_case_output_free(&g);
      precis_case_output_free(&c);
      workload_free(&w);
    }
  }
}

/* fp8 output (out=e4m3): both backends choose s = amax(D)/448 (the cuda backend from amax_D of a
 * first pass), so the dequantized outputs agree to an e4m3 rounding of each other: within 2^-3
 * relative plus one step of the smallest subnormal (2^-9 s), and the scales within 2^-10. */
TEST(fp8_output_with_scale_d_and_amax_matches_the_cpu_backend) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=e4m3", &r));
  if (!recipe_runs_here(&r)) return;
  precis_case_options o = quick_options();
  workload w;
  workload_make(&w, 33, 40, 96, 2, false, false, 0);
  precis_case_output g, c;
  bool ok_g = run(cuda, cuda_ctx, &r, &w, &o, &g), ok_c = run(cpu, cpu_ctx, &r, &w, &o, &c);
  CHECK(ok_g && ok_c);
  if (ok_g && ok_c) {
    const char *sg = precis_kv_get(&g.details, "d_scale"), *sc = precis_kv_get(&c.details, "d_scale");
    CHECK(sg && sc && precis_kv_get(&g.details, "amax_d"));
    double s_g = sg ? atof(sg) : 0, s_c = sc ? atof(sc) : 0;
    CHECK_MSG(s_g > 0 && fabs(s_g - s_c) <= 0x1p-10 * s_c, "scale_D: cuda s %g, cpu s %g", s_g, s_c);
    int64_t count = w.info.batch * w.info.m * w.info.n, bad = 0;
    for (int64_t i = 0; i < count; i++)
      if (!(fabs((double)g.c[i] - c.c[i]) <= 0x1p-3 * fmax(fabs(g.c[i]), fabs(c.c[i])) + 0x1p-9 * s_c)) bad++;
    CHECK_MSG(bad == 0, "fp8 output: %lld of %lld outputs differ by more than an e4m3 step", (long long)bad,
              (long long)count);
  }
  precis_case_output_free(&g);
  precis_case_output_free(&c);
  workload_free(&w);
}

TEST(int8_static_activation_scales_match_the_cpu_backend) {
  precis_scale_method modes[] = {PRECIS_SCALE_ABSMAX, PRECIS_SCALE_PERCENTILE, PRECIS_SCALE_MSE};
  for (size_t i = 0; i < 3; i++) {
    precis_case_options o = quick_options();
    precis_recipe static_int8 = *preset_recipe("int8");
    precis_recipe_set_static_act_scale(&static_int8, modes[i], o.percentile);
    const precis_recipe *r = &static_int8;
    if (!recipe_runs_here(r)) return;
    workload w;
    workload_make(&w, 24, 40, 36, 2, false, false, 3);
    precis_case_output g, c;
    bool ok = run(cuda, cuda_ctx, r, &w, &o, &g) & run(cpu, cpu_ctx, r, &w, &o, &c);
    CHECK(ok);
    if (ok) {
      compare(r, &w, g.c, c.c, true, "static scales");
      CHECK(g.clipped_fraction == c.clipped_fraction);
      CHECK(g.clipped_fraction > 0); /* calibrated on [-0.8, 0.8), evaluated on [-1, 1): some values clip */
    }
    precis_case_output_free(&g);
    precis_case_output_free(&c);
    workload_free(&w);
  }
}

TEST(measurements_are_reported) {
  precis_case_options o;
  precis_case_options_default(&o);
  o.max_time_ms = 200;
  const char *names[] = {"bf16", "int8", "fp8"};
  for (size_t i = 0; i < 3; i++) {
    const precis_recipe *r = preset_recipe(names[i]);
    if (!recipe_runs_here(r)) continue;
    workload w;
    workload_make(&w, 512, 512, 512, 1, false, false, 0);
    precis_case_output g;
    if (run(cuda, cuda_ctx, r, &w, &o, &g)) {
      printf("  %s 512^3: median %.4f ms (%ld samples x %ld calls), convert %.4f ms, e2e %.4f ms, tracked %lld, "
             "device peak %lld, baseline %lld, untracked %lld, algo %s tile %s\n",
             r->name, g.time.median_ms, g.time.samples, g.time.calls_per_sample, g.time.convert_ms,
             g.time.e2e_median_ms, g.memory.tracked_peak_bytes, g.memory.device_peak_bytes,
             g.memory.device_baseline_bytes, g.memory.untracked_bytes, precis_kv_get(&g.details, "algo_id"),
             precis_kv_get(&g.details, "algo_tile"));
      CHECK(g.time.samples >= 1 && g.time.median_ms > 0 && g.time.min_ms <= g.time.median_ms);
      CHECK(g.time.calls_per_sample >= 1);
      CHECK((long)g.time.n_samples_ms == g.time.samples);
      CHECK(g.time.convert_ms > 0);
      CHECK(g.memory.tensor_bytes > 0);
      CHECK(g.memory.tracked_peak_bytes >= g.memory.tensor_bytes);
      CHECK(g.memory.device_baseline_bytes > 0);
      /* The device view holds at least what the case held at once, and never less than before it
       * started. baseline + tracked is not a floor: cudaMemGetInfo may still count memory an
       * earlier case freed in the baseline, and the driver hands it back to this case's
       * allocations (reuse), so the strict relation only gets a tolerance (one workspace). */
      CHECK(g.memory.device_peak_bytes >= g.memory.tracked_peak_bytes);
      CHECK(g.memory.device_peak_bytes >= g.memory.device_baseline_bytes);
      const long long reuse_tolerance = 32LL << 20;
      if (g.memory.device_peak_bytes < g.memory.device_baseline_bytes + g.memory.tracked_peak_bytes)
        printf("  note: device peak %lld < baseline %lld + tracked %lld (driver reuse of %lld bytes)\n",
               g.memory.device_peak_bytes, g.memory.device_baseline_bytes, g.memory.tracked_peak_bytes,
               g.memory.device_baseline_bytes + g.memory.tracked_peak_bytes - g.memory.device_peak_bytes);
      CHECK(g.memory.device_peak_bytes + reuse_tolerance >= g.memory.device_baseline_bytes + g.memory.tracked_peak_bytes);
      CHECK(precis_kv_get(&g.details, "algo_id") != NULL);
      CHECK(precis_kv_get(&g.details, "workspace_bytes") != NULL);
      if (r->spec.a.gran != PRECIS_GRAN_NONE) {
        CHECK(g.time.e2e_median_ms > 0);
        CHECK_STR(precis_kv_get(&g.details, "lt_op"), "TN");
      } else {
        CHECK(isnan(g.time.e2e_median_ms));
        CHECK_STR(precis_kv_get(&g.details, "lt_op"), "NN");
      }
    } else {
      CHECK(false);
    }
    precis_case_output_free(&g);
    workload_free(&w);
  }
}

TEST(cold_and_autotune) {
  precis_case_options o = quick_options();
  o.cold = true;
  o.autotune = 4;
  const precis_recipe *r = preset_recipe("fp16");
  workload w;
  workload_make(&w, 256, 256, 256, 1, false, true, 0);
  precis_case_output g, c;
  bool ok = run(cuda, cuda_ctx, r, &w, &o, &g) & run(cpu, cpu_ctx, r, &w, &o, &c);
  CHECK(ok);
  if (ok) {
    compare(r, &w, g.c, c.c, true, "cold+autotune");
    CHECK(g.time.calls_per_sample == 1);
    CHECK(precis_kv_get(&g.details, "l2_flush_bytes") != NULL);
    /* The autotune keys exist only when the heuristic returned more than one candidate. */
    const char *cands = precis_kv_get(&g.details, "autotune_candidates");
    const char *times = precis_kv_get(&g.details, "autotune_ms_per_call");
    const char *choice = precis_kv_get(&g.details, "autotune_choice");
    printf("  autotune: %s candidates, times %s, choice %s\n", cands ? cands : "1 (no autotune)", times ? times : "-",
           choice ? choice : "-");
  }
  precis_case_output_free(&g);
  precis_case_output_free(&c);
  workload_free(&w);
}

TEST(out_of_memory_becomes_does_not_fit_and_the_run_goes_on) {
  /* Hold all but ~24 MiB of the device, then ask for a case that needs more (inputs 4 MiB each,
   * output 4 MiB, workspace 32 MiB). */
  void *held[64];
  int n_held = 0;
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  size_t want = free_b > ((size_t)24 << 20) ? free_b - ((size_t)24 << 20) : 0;
  size_t chunk = (size_t)16 << 30;
  while (want > ((size_t)8 << 20) && n_held < 64 && chunk >= ((size_t)8 << 20)) {
    size_t ask = chunk < want ? chunk : want;
    void *p = NULL;
    if (cudaMalloc(&p, ask) == cudaSuccess) {
      held[n_held++] = p;
      want -= ask;
    } else {
      (void)cudaGetLastError();
      chunk /= 2;
    }
  }
  CHECK(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  printf("  holding %d blocks, %zu bytes free\n", n_held, free_b);
  const precis_recipe *r = preset_recipe("fp32");
  workload w;
  workload_make(&w, 1024, 1024, 1024, 1, false, true, 0);
  precis_case_options o = quick_options();
  precis_case_output g;
  precis_case_output_init(&g);
  CHECK_OK(cuda->run_case(cuda_ctx, &r->spec, &w.info, &w.data, &o, &g));
  printf("  %s: %s\n", precis_row_status_str(g.status), g.reason);
  CHECK_EQ_INT(g.status, PRECIS_ROW_DOES_NOT_FIT);
  CHECK(strstr(g.reason, "cudaErrorMemoryAllocation") != NULL);
  CHECK(g.c == NULL);
  precis_case_output_free(&g);
  for (int i = 0; i < n_held; i++) cudaFree(held[i]);
  /* The same case now fits. */
  CHECK(run(cuda, cuda_ctx, r, &w, &o, &g));
  precis_case_output_free(&g);
  workload_free(&w);
}

/* accept --concurrency N on cuda: each worker with its own state (stream, events, handle), cases
 * from two threads at once, both exact against the cpu backend, both timed. */
typedef struct concurrent_job {
  const precis_recipe *recipe;
  const workload *w;
  precis_case_options o;
  precis_case_output out;
  precis_status st;
} concurrent_job;

static void *concurrent_main(void *arg) {
  concurrent_job *job = arg;
  precis_case_output_init(&job->out);
  job->st = cuda->run_case(cuda_ctx, &job->recipe->spec, &job->w->info, &job->w->data, &job->o, &job->out);
  return NULL;
}

TEST(two_workers_run_at_once_each_with_its_own_state) {
  CHECK(cuda->worker_open != NULL && cuda->worker_close != NULL);
  if (!cuda->worker_open) return;
  const char *names[] = {"fp16", "int8"};
  for (size_t r = 0; r < 2; r++) {
    const precis_recipe *recipe = preset_recipe(names[r]);
    if (!recipe_runs_here(recipe)) continue;
    workload w;
    workload_make(&w, 128, 96, 128, 2, true, true, 0);
    void *states[2] = {NULL, NULL};
    CHECK_OK(cuda->worker_open(cuda_ctx, 0, &states[0]));
    CHECK_OK(cuda->worker_open(cuda_ctx, 1, &states[1]));
    CHECK(states[0] && states[1] && states[0] != states[1]);
    concurrent_job jobs[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
      jobs[i] = (concurrent_job){.recipe = recipe, .w = &w, .o = quick_options()};
      jobs[i].o.max_time_ms = 100;
      jobs[i].o.target_rel_spread = 0;
      jobs[i].o.worker = states[i];
      CHECK(pthread_create(&threads[i], NULL, concurrent_main, &jobs[i]) == 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    precis_case_output c;
    precis_case_options o = quick_options();
    bool ok_c = run(cpu, cpu_ctx, recipe, &w, &o, &c);
    CHECK(ok_c);
    for (int i = 0; i < 2; i++) {
      CHECK_MSG(jobs[i].st == PRECIS_OK && jobs[i].out.status == PRECIS_ROW_OK && jobs[i].out.c, "%s worker %d: %s",
                recipe->name, i, jobs[i].out.reason);
      if (ok_c && jobs[i].out.c) compare(recipe, &w, jobs[i].out.c, c.c, true, "concurrent worker");
      CHECK(jobs[i].out.time.samples >= 1 && jobs[i].out.time.median_ms > 0);
      printf("  %s worker %d: median %.4f ms, %ld samples, lt_calls %s\n", recipe->name, i, jobs[i].out.time.median_ms,
             jobs[i].out.time.samples, precis_kv_get(&jobs[i].out.details, "lt_calls"));
      precis_case_output_free(&jobs[i].out);
    }
    if (ok_c) precis_case_output_free(&c);
    cuda->worker_close(cuda_ctx, states[0]);
    cuda->worker_close(cuda_ctx, states[1]);
    workload_free(&w);
  }
}

/* The int8 workarounds of the plan, on the device: few rows padded to 32, and with cuBLASLt < 13.2
 * a strided batch run as one call per batch matrix (issue 14.4, 14.5); exact against the cpu. */
TEST(int8_padding_and_cublaslt_13_1_split_run_exactly) {
  const precis_recipe *r = preset_recipe("int8");
  if (!recipe_runs_here(r)) return;
  precis_kv_list env = {0};
  cuda->environment(cuda_ctx, &env);
  int major = 0, minor = 0, patch = 0;
  const char *v = precis_kv_get(&env, "cublaslt_version");
  bool parsed = v && sscanf(v, "%d.%d.%d", &major, &minor, &patch) == 3;
  CHECK(parsed);
  precis_kv_free(&env);
  bool split = parsed && major * 10000 + minor * 100 + patch < 130200;
  precis_case_options o = quick_options();
  workload w;
  workload_make(&w, 3, 40, 36, 3, true, false, 0);
  precis_case_output g, c;
  bool ok = run(cuda, cuda_ctx, r, &w, &o, &g) & run(cpu, cpu_ctx, r, &w, &o, &c);
  CHECK(ok);
  if (ok) {
    compare(r, &w, g.c, c.c, true, "padded, strided");
    CHECK_STR(precis_kv_get(&g.details, "min_rows"), "32");
    CHECK(strstr(precis_kv_get(&g.details, "padding"), "rows 3->32") != NULL);
    CHECK_STR(precis_kv_get(&g.details, "lt_calls"), split ? "3" : "1");
    printf("  cuBLASLt %s: lt_calls %s (%s)\n", v ? v : "?", precis_kv_get(&g.details, "lt_calls"),
           precis_kv_get(&g.details, "lt_split") ? precis_kv_get(&g.details, "lt_split") : "one call");
  }
  precis_case_output_free(&g);
  precis_case_output_free(&c);
  workload_free(&w);
}

TEST(environment_names_the_device) {
  precis_kv_list env = {0};
  cuda->environment(cuda_ctx, &env);
  CHECK_STR(precis_kv_get(&env, "backend"), "cuda");
  CHECK(precis_kv_get(&env, "device") != NULL);
  CHECK(precis_kv_get(&env, "compute_capability") != NULL);
  CHECK(precis_kv_get(&env, "cublaslt_version") != NULL);
  for (size_t i = 0; i < env.count; i++)
    printf("  %s = %s\n", env.items[i].key, env.items[i].value ? env.items[i].value : "null");
  precis_kv_free(&env);
}

int main(void) {
  cuda = precis_backend_cuda();
  cpu = precis_backend_cpu();
  /* This test is only built with the CUDA backend: its absence is a build defect. */
  if (!cuda) {
    printf("FAIL: precis_backend_cuda() is NULL in a build with the CUDA backend\n");
    return 1;
  }
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  precis_case_options o;
  precis_case_options_default(&o);
  if (cuda->open(&cuda_ctx, &o) != PRECIS_OK) {
    printf("FAIL: the cuda backend does not open on a machine with a device: %s\n", precis_last_error());
    return 1;
  }
  precis_kv_list env = {0};
  cuda->environment(cuda_ctx, &env);
  const char *cc = precis_kv_get(&env, "compute_capability");
  if (!cc || sscanf(cc, "%d.%d", &cc_major, &cc_minor) != 2) {
    printf("the cuda backend's environment lacks compute_capability (\"%s\")\n", cc ? cc : "null");
    precis_kv_free(&env);
    return 1;
  }
  precis_kv_free(&env);
  if (cpu->open(&cpu_ctx, &o) != PRECIS_OK) {
    printf("cpu backend: %s\n", precis_last_error());
    return 1;
  }
  static const harness_test tests[] = {
      T(environment_names_the_device),
      T(every_recipe_matches_the_cpu_backend_exactly_on_integers),
      T(every_recipe_matches_the_cpu_backend_within_the_bound_on_random_data),
      T(int8_static_activation_scales_match_the_cpu_backend),
      T(measurements_are_reported),
      T(cold_and_autotune),
      T(out_of_memory_becomes_does_not_fit_and_the_run_goes_on),
      T(two_workers_run_at_once_each_with_its_own_state),
      T(int8_padding_and_cublaslt_13_1_split_run_exactly),
      T(fp8_scale_modes_match_the_cpu_backend_on_odd_shapes),
      T(fp8_output_with_scale_d_and_amax_matches_the_cpu_backend),
  };
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  cuda->close(cuda_ctx);
  cpu->close(cpu_ctx);
  return rc;
}
