/* Issue 16's block-scaled presets (mxfp8, mxfp4, nvfp4) on the cuda backend against the cpu backend:
 * natively on cc >= 10.0 (VEC32_UE8M0 / VEC16_UE4M3, host-quantized codes and 128x4 tiled scales),
 * else emulated (exact bf16 dequantization, nv's tensor scales in alpha). Both backends multiply the
 * same quantized values q_a, q_b (code x block scale; the host quantizer is shared), so the bound is
 * the accumulation and output rounding only (docs/cuda-backend.md, "Block-scaled formats"):
 *
 *   |gpu - cpu| <= 4 (k + 1) 2^-24 alpha sum|q_a||q_b| + 2 u_bf16 (|gpu| + |cpu|),  u_bf16 = 2^-8
 *
 * (4: two sides, doubled again for tensor cores that truncate; alpha = fp32(s_a s_b) for nv, 1 for
 * mx). Skipped (77) only without a CUDA device (gpu_probe.h). Never run on the machine it was
 * written on (no GPU there). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "eval/cpu_quantized.h"
#include "kernels/cuda_api.h"
#include "gpu_probe.h"
#include "harness.h"
#include "preset_fixture.h"

static const precis_backend *cuda, *cpu;
static void *cuda_ctx, *cpu_ctx;
static int cc_major, cc_minor;

static precis_case_options quick_options(void) {
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 2, o.max_samples = 4, o.max_time_ms = 50;
  return o;
}

static void compare(const char *preset, int64_t m, int64_t n, int64_t k, int64_t batch) {
  const precis_recipe *r = preset_recipe(preset);
  static char name[] = "blockscale", kind[] = "gemm", dist[] = "sin";
  precis_workload_info info = {.name = name, .kind = kind, .description = dist, .a_dist = dist, .b_dist = dist,
                               .reference = dist, .m = m, .n = n, .k = k, .batch = batch};
  float *a = malloc(sizeof(float) * (size_t)(batch * m * k)), *b = malloc(sizeof(float) * (size_t)(k * n));
  double *c_ref = calloc((size_t)(batch * m * n), sizeof(double)), *ab = calloc((size_t)(batch * m * n), sizeof(double));
  for (int64_t i = 0; i < batch * m * k; i++) a[i] = (float)(sin(0.37 * (double)i) * (i % 13 == 0 ? 40.0 : 1.0));
  for (int64_t i = 0; i < k * n; i++) b[i] = (float)(cos(0.23 * (double)i + 0.5) * (i % 7 == 0 ? 0.01 : 3.0));
  precis_workload_data data = {.a = a, .b = b, .c_ref = c_ref, .ab_abs = ab};
  /* The quantized values both backends multiply, and alpha. */
  float *qa = NULL, *qb = NULL, alpha = 1.0f;
  size_t clipped = 0;
  char reason[256] = "";
  CHECK_OK(precis_cpu_quant_dequantized_inputs_alpha(&r->spec, &info, &data, &qa, &qb, &alpha, &clipped, reason,
                                                     sizeof reason));
  precis_case_options o = quick_options();
  precis_case_output g, c;
  precis_case_output_init(&g);
  precis_case_output_init(&c);
  CHECK_OK(cuda->run_case(cuda_ctx, &r->spec, &info, &data, &o, &g));
  CHECK_OK(cpu->run_case(cpu_ctx, &r->spec, &info, &data, &o, &c));
  CHECK_MSG(g.status == PRECIS_ROW_OK, "%s %lldx%lldx%lld on sm_%d%d: %s", preset, (long long)m, (long long)n,
            (long long)k, cc_major, cc_minor, g.reason);
  bool native = cc_major >= 10;
  const char *route = precis_kv_get(&g.details, "lt_route");
  CHECK_MSG(route && strcmp(route, native ? preset : "bf16") == 0, "%s: route %s", preset, route ? route : "null");
  CHECK(native || precis_kv_get(&g.details, "emulation") != NULL);
  if (g.status == PRECIS_ROW_OK && c.status == PRECIS_ROW_OK && g.c && c.c && qa && qb) {
    int beyond = 0;
    double worst = 0;
    for (int64_t bi = 0; bi < batch; bi++)
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double s = 0;
          for (int64_t p = 0; p < k; p++) s += fabs((double)qa[(bi * m + i) * k + p] * qb[p * n + j]);
          int64_t e = (bi * m + i) * n + j;
          double bound = 4.0 * (double)(k + 1) * ldexp(1.0, -24) * alpha * s +
                         2.0 * ldexp(1.0, -8) * (fabs(g.c[e]) + fabs(c.c[e])) + 1e-30;
          double diff = fabs((double)g.c[e] - c.c[e]);
          if (diff > bound) beyond++;
          if (diff / bound > worst) worst = diff / bound;
        }
    CHECK_MSG(beyond == 0, "%s %lldx%lldx%lld batch %lld: %d outputs beyond the bound", preset, (long long)m,
              (long long)n, (long long)k, (long long)batch, beyond);
    printf("  %s %lldx%lldx%lld batch %lld (%s): worst |gpu-cpu|/bound %.3g\n", preset, (long long)m, (long long)n,
           (long long)k, (long long)batch, native ? "native" : "emulated", worst);
  }
  precis_case_output_free(&g);
  precis_case_output_free(&c);
  free(a), free(b), free(c_ref), free(ab), free(qa), free(qb);
}

TEST(block_scaled_presets_match_the_cpu_backend) {
  static const int64_t shapes[][4] = {{17, 40, 200, 1}, {130, 9, 300, 1}, {3, 33, 64, 2}, {128, 128, 256, 1}};
  const char *presets[] = {"nvfp4", "mxfp4", "mxfp8"};
  for (size_t r = 0; r < 3; r++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      compare(presets[r], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
}

int main(void) {
  cuda = precis_backend_cuda();
  cpu = precis_backend_cpu();
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
    printf("the cuda backend's environment lacks compute_capability\n");
    precis_kv_free(&env);
    return 1;
  }
  precis_kv_free(&env);
  if (cpu->open(&cpu_ctx, &o) != PRECIS_OK) {
    printf("cpu backend: %s\n", precis_last_error());
    return 1;
  }
  static const harness_test tests[] = {T(block_scaled_presets_match_the_cpu_backend)};
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  cuda->close(cuda_ctx);
  cpu->close(cpu_ctx);
  return rc;
}
