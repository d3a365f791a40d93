/* The fp8 accumulation model of the error bound (issue 14.2), checked on the CPU: Hopper's fp8
 * tensor cores keep about 13 fraction bits between promotions (DeepSeek-V3 §3.3.2; Khattak &
 * Mikaitis, arXiv 2512.07004). A dot product simulated that way (blocks of 4, 16 or 32 products
 * aligned to their largest exponent and truncated to 13 fraction bits, the block sum truncated to
 * 13 bits, promoted into a float32 accumulator every 128 products), scaled and rounded to bf16 as cuBLASLt
 * does, must agree with the cpu backend within tests/backend_agreement.h's bound in every trial,
 * while a layout error (B read untransposed) or a scale error (A's scale for B) must fail it with a
 * wide margin: the bound is loose enough for the hardware and still tight enough to catch bugs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "backend_agreement.h"
#include "numerics/format.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/quant.h"

#define FRACTION_BITS 13
#define PROMOTION_INTERVAL 128
/* Products added to the running sum at once, each aligned to the block's largest exponent. The
 * sources give the accumulator width, not the hardware's block: trials cycle through 4, 16 and 32
 * (Hopper's fp8 wgmma has k = 32), and the bound must hold for each. */
static const size_t blocks[] = {4, 16, 32};
#define MAX_BLOCK 32

static uint64_t rng = 0x853c49e6748fea9bULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* x toward zero to a multiple of 2^(e - FRACTION_BITS): FRACTION_BITS fraction bits below 2^e. */
static double truncate_below(double x, int e) {
  double quantum = ldexp(1.0, e - FRACTION_BITS);
  return trunc(x / quantum) * quantum;
}

/* One dot product of fp8 values (exact products), as modelled for Hopper. */
static float hopper_fp8_dot(const float *a, const float *b, size_t b_stride, size_t k, size_t block) {
  float acc = 0.0f;
  for (size_t p0 = 0; p0 < k; p0 += PROMOTION_INTERVAL) {
    size_t p1 = p0 + PROMOTION_INTERVAL < k ? p0 + PROMOTION_INTERVAL : k;
    double chunk = 0;
    for (size_t q0 = p0; q0 < p1; q0 += block) {
      size_t q1 = q0 + block < p1 ? q0 + block : p1;
      double terms[MAX_BLOCK + 1];
      size_t n = 0;
      terms[n++] = chunk;
      for (size_t q = q0; q < q1; q++) terms[n++] = (double)a[q] * (double)b[q * b_stride];
      int emax = INT32_MIN;
      for (size_t i = 0; i < n; i++)
        if (terms[i] != 0 && ilogb(terms[i]) > emax) emax = ilogb(terms[i]);
      if (emax == INT32_MIN) continue; /* all zero */
      double sum = 0;
      for (size_t i = 0; i < n; i++) sum += truncate_below(terms[i], emax);
      chunk = sum == 0 ? 0 : truncate_below(sum, ilogb(sum));
    }
    acc = (float)((double)acc + chunk);
  }
  return acc;
}

typedef enum { SIM_CORRECT, SIM_UNTRANSPOSED_B, SIM_WRONG_SCALE } sim_kind;

/* The simulated GPU output [m, n] from the fp8 operands and their scales. */
static void simulate(sim_kind kind, const float *qa, const float *qb, size_t m, size_t n, size_t k, float sa, float sb,
                     size_t block, float *out) {
  float *b_used = malloc(sizeof(float) * k * n);
  for (size_t p = 0; p < k; p++)
    for (size_t j = 0; j < n; j++)
      /* untransposed: the [k, n] buffer read as if it held B^T [n, k] */
      b_used[p * n + j] = kind == SIM_UNTRANSPOSED_B ? qb[j * k + p] : qb[p * n + j];
  float scale = kind == SIM_WRONG_SCALE ? sa * sa : sa * sb;
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) out[i * n + j] = precis_round_bf16(hopper_fp8_dot(qa + i * k, b_used + j, n, k, block) * scale);
  free(b_used);
}

typedef struct trial_result {
  double worst_ratio; /* max |sim - cpu| / bound */
  double worst_excess;
} trial_result;

static bool trial(const precis_backend *cpu, void *cpu_ctx, size_t block, size_t m, size_t n, size_t k,
                  trial_result results[3]) {
  const precis_recipe *r = preset_recipe("fp8");
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  info.name = "fp8-accumulation";
  info.kind = "gemm";
  info.m = (int64_t)m, info.n = (int64_t)n, info.k = (int64_t)k, info.batch = 1;
  precis_workload_data data;
  memset(&data, 0, sizeof data);
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
  /* As the GPU test's random workloads; b on a smaller range so that A's and B's scales differ. */
  for (size_t i = 0; i < m * k; i++) a[i] = (float)(2 * uniform() - 1);
  for (size_t i = 0; i < k * n; i++) b[i] = (float)(0.25 * (2 * uniform() - 1));
  data.a = a;
  data.b = b;
  double *ab = calloc(m * n, sizeof(double));
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++)
      for (size_t p = 0; p < k; p++) ab[i * n + j] += fabs((double)a[i * k + p]) * fabs((double)b[p * n + j]);

  /* The cpu backend's output (the GPU test's reference side). */
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 1, o.max_samples = 1, o.max_time_ms = 1;
  precis_case_output out;
  precis_case_output_init(&out);
  bool ok = cpu->run_case(cpu_ctx, &r->spec, &info, &data, &o, &out) == PRECIS_OK && out.status == PRECIS_ROW_OK && out.c;

  /* The fp8 operands exactly as both backends quantize them. */
  float sa = precis_fp8_scale_from_amax(precis_absmax(a, m * k)), sb = precis_fp8_scale_from_amax(precis_absmax(b, k * n));
  uint8_t *a8 = malloc(m * k), *b8 = malloc(k * n);
  float *qa = malloc(sizeof(float) * m * k), *qb = malloc(sizeof(float) * k * n), *sim = malloc(sizeof(float) * m * n);
  precis_fp8_quantize_tensor(a, m * k, sa, a8);
  precis_fp8_quantize_tensor(b, k * n, sb, b8);
  precis_e4m3_to_f32_array(a8, qa, m * k);
  precis_e4m3_to_f32_array(b8, qb, k * n);
  agreement bound = agreement_for(&r->spec, (long long)k);
  for (int kind = 0; ok && kind < 3; kind++) {
    simulate((sim_kind)kind, qa, qb, m, n, k, sa, sb, block, sim);
    results[kind] = (trial_result){0, 0};
    for (size_t i = 0; i < m * n; i++) {
      double g = sim[i], c = out.c[i];
      results[kind].worst_ratio = fmax(results[kind].worst_ratio, fabs(g - c) / agreement_bound(&bound, ab[i], g, c));
      results[kind].worst_excess = fmax(results[kind].worst_excess, agreement_excess(&bound, ab[i], g, c));
    }
  }
  precis_case_output_free(&out);
  free(a), free(b), free(ab), free(a8), free(b8), free(qa), free(qb), free(sim);
  return ok;
}

/* The GPU test's reduction lengths (tests/gpu/test_cuda_backend.c), then longer ones. */
static const size_t gpu_test_k[] = {45, 19, 30, 64, 8, 17, 128};
static const size_t long_k[] = {256, 1024, 4096};

TEST(simulated_hopper_fp8_passes_the_bound_and_layout_or_scale_errors_fail_it) {
  const precis_backend *cpu = precis_backend_cpu();
  void *ctx = NULL;
  precis_case_options o;
  precis_case_options_default(&o);
  CHECK_OK(cpu->open(&ctx, &o));
  const int trials = 1000;
  int passed = 0, layout_caught = 0, scale_caught = 0;
  double worst_correct = 0, worst_excess = 0, least_layout = INFINITY, least_scale = INFINITY;
  for (int t = 0; t < trials; t++) {
    size_t k = gpu_test_k[t % 7], m = 16, n = 16;
    trial_result res[3];
    if (!trial(cpu, ctx, blocks[t % 3], m, n, k, res)) {
      CHECK_MSG(false, "trial %d: the cpu backend failed", t);
      break;
    }
    passed += res[SIM_CORRECT].worst_ratio <= 1.0;
    layout_caught += res[SIM_UNTRANSPOSED_B].worst_ratio > 1.0;
    scale_caught += res[SIM_WRONG_SCALE].worst_ratio > 1.0;
    worst_correct = fmax(worst_correct, res[SIM_CORRECT].worst_ratio);
    worst_excess = fmax(worst_excess, res[SIM_CORRECT].worst_excess);
    least_layout = fmin(least_layout, res[SIM_UNTRANSPOSED_B].worst_ratio);
    least_scale = fmin(least_scale, res[SIM_WRONG_SCALE].worst_ratio);
  }
  printf("  k in {8..128}, %d trials: simulated Hopper within the bound in %d (worst |gpu-cpu|/bound %.3g, "
         "accumulation excess %.3g); untransposed B caught in %d (least worst ratio %.3g), wrong scale in %d (%.3g)\n",
         trials, passed, worst_correct, worst_excess, layout_caught, least_layout, scale_caught, least_scale);
  CHECK_EQ_INT(passed, trials);
  CHECK_EQ_INT(layout_caught, trials);
  CHECK_EQ_INT(scale_caught, trials);
  /* A wide margin on both sides: the model's error well inside, the bugs far outside. */
  CHECK_MSG(worst_correct < 0.5, "worst ratio %g", worst_correct);
  CHECK_MSG(least_layout > 4 && least_scale > 4, "least ratios %g %g", least_layout, least_scale);
  cpu->close(ctx);
}

/* Longer reductions: the bound stays valid (the fp8 term stops growing at the promotion interval),
 * and what is left of the margin for a layout error, which shrinks as 1/sqrt(k) (|c| grows as
 * sqrt(k), |a|·|b| as k), is printed: docs/cuda-backend.md says why the GPU test compares at k <= 128. */
TEST(longer_reductions_stay_within_the_bound) {
  const precis_backend *cpu = precis_backend_cpu();
  void *ctx = NULL;
  precis_case_options o;
  precis_case_options_default(&o);
  CHECK_OK(cpu->open(&ctx, &o));
  for (size_t i = 0; i < sizeof long_k / sizeof long_k[0]; i++) {
    double worst = 0, least_layout = INFINITY, least_scale = INFINITY;
    for (int t = 0; t < 20; t++) {
      trial_result res[3];
      if (!trial(cpu, ctx, blocks[t % 3], 8, 8, long_k[i], res)) break;
      worst = fmax(worst, res[SIM_CORRECT].worst_ratio);
      least_layout = fmin(least_layout, res[SIM_UNTRANSPOSED_B].worst_ratio);
      least_scale = fmin(least_scale, res[SIM_WRONG_SCALE].worst_ratio);
    }
    printf("  k=%zu: worst ratio %.3g, untransposed B %.3g, wrong scale %.3g\n", long_k[i], worst, least_layout,
           least_scale);
    CHECK_MSG(worst <= 1.0, "k=%zu: %g", long_k[i], worst);
    CHECK(least_scale > 1.0);
  }
  cpu->close(ctx);
}

RUN_TESTS(T(simulated_hopper_fp8_passes_the_bound_and_layout_or_scale_errors_fail_it),
          T(longer_reductions_stay_within_the_bound))
