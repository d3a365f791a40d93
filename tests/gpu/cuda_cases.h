/* The cases of gpu_test_cuda_backend's comparison with the cpu backend (its shapes, random and
 * integer workloads) and what the cuda backend must answer for each before the comparison: plain C,
 * so that tests/test_cuda_expectations.c checks the expectations on the CPU (issue 27: an
 * expectation that a GPU run would contradict is found without a GPU). Included by one test each. */
#ifndef PRECIS_TEST_GPU_CUDA_CASES_H
#define PRECIS_TEST_GPU_CUDA_CASES_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "eval/cpu_quantized.h"
#include "kernels/cuda_api.h"
#include "eval/gemm_plan.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct workload {
  precis_workload_info info;
  precis_workload_data data;
  double *ab; /* |a|·|b| per output */
} workload;

static void workload_free(workload *w) {
  free(w->data.a);
  free(w->data.b);
  free(w->data.c_ref);
  free(w->data.ab_abs);
  free(w->data.calib_a);
  memset(w, 0, sizeof *w);
}

/* integers: values in [-4, 4], so every float recipe is exact (|partial sums| <= 16*k <= 2048 for
 * k <= 128, exact even in fp16 accumulation); else uniform in [-1, 1). */
static void workload_make(workload *w, int64_t m, int64_t n, int64_t k, int64_t batch, bool b_batched, bool integers,
                          int64_t calib) {
  memset(w, 0, sizeof *w);
  w->info.name = "gpu-test";
  w->info.kind = "gemm";
  w->info.description = "";
  w->info.a_dist = integers ? "integers" : "uniform";
  w->info.b_dist = w->info.a_dist;
  w->info.m = m;
  w->info.n = n;
  w->info.k = k;
  w->info.batch = batch;
  w->info.b_batched = b_batched;
  w->info.calib_samples = calib;
  int64_t nb = b_batched ? batch : 1;
  w->data.a = malloc(sizeof(float) * (size_t)(batch * m * k));
  w->data.b = malloc(sizeof(float) * (size_t)(nb * k * n));
  w->data.c_ref = calloc((size_t)(batch * m * n), sizeof(double));
  w->data.ab_abs = calloc((size_t)(batch * m * n), sizeof(double));
  for (int64_t i = 0; i < batch * m * k; i++)
    w->data.a[i] = integers ? (float)((int)(uniform() * 9) - 4) : (float)(2 * uniform() - 1);
  for (int64_t i = 0; i < nb * k * n; i++)
    w->data.b[i] = integers ? (float)((int)(uniform() * 9) - 4) : (float)(2 * uniform() - 1);
  if (calib > 0) {
    w->data.calib_a = malloc(sizeof(float) * (size_t)(calib * m * k));
    for (int64_t i = 0; i < calib * m * k; i++) w->data.calib_a[i] = (float)(1.6 * uniform() - 0.8);
  }
  /* The references only where the test compares (the backends never read them). */
  bool references = batch * m * n * k <= ((int64_t)1 << 24);
  for (int64_t b = 0; b < (references ? batch : 0); b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0, t = 0;
        const float *bm = w->data.b + (b_batched ? b : 0) * k * n;
        for (int64_t p = 0; p < k; p++) {
          double x = w->data.a[(b * m + i) * k + p], y = bm[p * n + j];
          s += x * y;
          t += fabs(x) * fabs(y);
        }
        w->data.c_ref[(b * m + i) * n + j] = s;
        w->data.ab_abs[(b * m + i) * n + j] = t;
      }
}

typedef struct shape {
  int64_t m, n, k, batch;
  bool b_batched;
} shape;
static const shape shapes[] = {
    {33, 20, 45, 1, false}, {1, 7, 19, 3, false}, {5, 9, 30, 2, true}, {64, 64, 64, 1, false},
    {17, 1, 8, 1, false},   {2, 33, 17, 4, true}, {128, 96, 128, 2, false},
};


/* What the cuda backend on sm_<cc_major><cc_minor> must answer for this case: NULL when it must
 * run it (then it is compared with the cpu backend), else a part of the reason it must refuse with
 * (written into why):
 *  - a scale-tensor route (fp8-rowwise, fp8-block, native mx/nv) with a b per batch element: the plan
 *    refuses it ("no batch stride": one scale tensor per call);
 *  - a spec the backend emulates by host dequantization (nvfp4 below sm_100) whose dequantized
 *    operands the cpu side refuses: nv with a b per batch element gets one fp32 tensor scale per b,
 *    and one GEMM takes one alpha, so random data (different amax per b) is refused while integer
 *    data with equal amax runs. The refusal is the cpu side's own (precis_cpu_quant_dequantized_
 *    inputs_alpha, the function the backend calls), so the expectation follows the data. */
static const char *cuda_expected_refusal(const precis_spec *spec, const precis_workload_info *info,
                                         const precis_workload_data *data, int cc_major, int cc_minor, char *why,
                                         size_t len) {
  precis_spec sub;
  bool emulated = precis_lt_emulated_on(spec, cc_major, cc_minor, &sub, NULL, 0);
  const precis_lt_route *route = precis_lt_route_find(emulated ? &sub : spec, NULL, 0);
  bool scale_tensors = route && (route->scaling == PRECIS_LT_SCALING_OUTER_VEC ||
                                 route->scaling == PRECIS_LT_SCALING_BLOCK128 ||
                                 route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED);
  if (scale_tensors && info->b_batched && info->batch > 1) {
    snprintf(why, len, "no batch stride");
    return why;
  }
  if (!emulated) return NULL;
  float *a = NULL, *b = NULL, alpha = 1.0f;
  size_t clipped = 0;
  char reason[512] = "";
  precis_status st =
      precis_cpu_quant_dequantized_inputs_alpha(spec, info, data, &a, &b, &alpha, &clipped, reason, sizeof reason);
  free(a);
  free(b);
  if (st != PRECIS_E_UNSUPPORTED) return NULL;
  snprintf(why, len, "%s", reason);
  return why;
}

#endif
