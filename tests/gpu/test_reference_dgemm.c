/* gen --reference-device cuda (kernels/reference_dgemm.c) against the CPU references: skipped (77)
 * only on a machine without a CUDA device.
 *
 * - c_ref and ab_abs by cublasDgemm agree with OpenBLAS's within 2·γ_k·ab_abs elementwise (each is
 *   within γ_k·|a|·|b| of the exact a·b, whatever its summation order), and ab_abs >= |c_ref|;
 * - they are not a float32 GEMM widened: on a cancelling workload a float32 accumulation misses by
 *   far more than the bound;
 * - the same call twice gives the same bits, and the rows of a tile (whole 256-row blocks) the
 *   bits of the whole (what gen --tile-rows and gen under MPI rely on);
 * - shared and batched b. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_api.h"
#include "data/distributions.h"
#include "data/generate.h"
#include "gpu_probe.h"
#include "harness.h"
#include "data/rng.h"

typedef struct shape {
  int64_t batch, m, n, k;
  bool b_batched;
} shape;

static void fill(const shape *s, float **a, float **b) {
  uint64_t a_count = (uint64_t)(s->batch * s->m * s->k), b_count = (uint64_t)((s->b_batched ? s->batch : 1) * s->k * s->n);
  *a = malloc(a_count * sizeof **a);
  *b = malloc(b_count * sizeof **b);
  precis_dist d;
  precis_dist_init(&d, PRECIS_DIST_CANCELLATION);
  precis_rng_key key = precis_rng_key_for(7, "gpu-reference");
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, s->batch, s->m, s->k, *a);
  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, s->b_batched ? s->batch : 1, s->k, s->n, *b);
}

static void against_cpu(const shape *s) {
  float *a, *b;
  fill(s, &a, &b);
  uint64_t c_count = (uint64_t)(s->batch * s->m * s->n);
  double *c_cpu = malloc(c_count * 8), *abs_cpu = malloc(c_count * 8), *c_gpu = malloc(c_count * 8),
         *abs_gpu = malloc(c_count * 8), *again = malloc(c_count * 8);
  CHECK_OK(precis_reference_compute(a, b, s->batch, s->m, s->n, s->k, s->b_batched, c_cpu, abs_cpu));
  CHECK_OK(precis_cuda_reference_compute(0, a, b, s->batch, s->m, s->n, s->k, s->b_batched, c_gpu, abs_gpu));
  const double bound = 2 * precis_reference_f64_bound(s->k);
  uint64_t outside = 0, differ = 0;
  double worst = 0;
  for (uint64_t i = 0; i < c_count; i++) {
    double scale = abs_cpu[i] > 0 ? abs_cpu[i] : 1e-300;
    double ratio = fabs(c_gpu[i] - c_cpu[i]) / scale;
    if (ratio > worst) worst = ratio;
    if (ratio > bound || fabs(abs_gpu[i] - abs_cpu[i]) > bound * scale || abs_gpu[i] < fabs(c_gpu[i])) outside++;
    if (c_gpu[i] != c_cpu[i]) differ++;
  }
  printf("  %lldx%lldx%lld batch %lld%s: worst |gpu - cpu| / ab_abs = %.3g (bound 2*gamma_k = %.3g), %llu of %llu "
         "elements differ in bits\n",
         (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch, s->b_batched ? " (b batched)" : "",
         worst, bound, (unsigned long long)differ, (unsigned long long)c_count);
  CHECK(outside == 0);
  /* Deterministic: the same call, the same bits. */
  CHECK_OK(precis_cuda_reference_compute(0, a, b, s->batch, s->m, s->n, s->k, s->b_batched, again, NULL));
  CHECK(memcmp(again, c_gpu, c_count * 8) == 0);
  free(a), free(b), free(c_cpu), free(abs_cpu), free(c_gpu), free(abs_gpu), free(again);
}

TEST(cublas_dgemm_within_the_bound_of_openblas) {
  static const shape shapes[] = {{1, 384, 384, 384, false}, {3, 200, 72, 1000, false}, {2, 300, 40, 520, true},
                                 {1, 7, 5, 3, false}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) against_cpu(&shapes[i]);
}

/* A float32 accumulation, widened, is what the bound must catch: on cancelling inputs it misses by
 * orders of magnitude more than 2·γ_k (so the check above cannot pass by being loose). */
TEST(the_bound_separates_float32_accumulation) {
  shape s = {1, 64, 64, 4096, false};
  float *a, *b;
  fill(&s, &a, &b);
  double *c = malloc(64 * 64 * 8), *ab = malloc(64 * 64 * 8);
  CHECK_OK(precis_cuda_reference_compute(0, a, b, 1, 64, 64, 4096, false, c, ab));
  double worst = 0;
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      float acc = 0;
      for (int p = 0; p < 4096; p++) acc += a[i * 4096 + p] * b[p * 64 + j];
      double r = fabs((double)acc - c[i * 64 + j]) / ab[i * 64 + j];
      if (r > worst) worst = r;
    }
  CHECK(worst > 100 * 2 * precis_reference_f64_bound(4096));
  free(a), free(b), free(c), free(ab);
}

/* Whole blocks of a tile give the bits of the whole: gen --tile-rows 512 = gen in core. */
TEST(tiles_of_whole_blocks_are_the_whole) {
  shape s = {1, 1000, 48, 300, false};
  float *a, *b;
  fill(&s, &a, &b);
  double *whole = malloc(1000 * 48 * 8), *tiled = malloc(1000 * 48 * 8);
  CHECK_OK(precis_cuda_reference_compute(0, a, b, 1, 1000, 48, 300, false, whole, NULL));
  for (int64_t r0 = 0; r0 < 1000; r0 += 512) {
    int64_t rows = 1000 - r0 < 512 ? 1000 - r0 : 512;
    CHECK_OK(precis_cuda_reference_compute(0, a + r0 * 300, b, 1, rows, 48, 300, false, tiled + r0 * 48, NULL));
  }
  CHECK(memcmp(whole, tiled, 1000 * 48 * 8) == 0);
  free(a), free(b), free(whole), free(tiled);
}

TEST(provenance_names_the_device_and_cublas) {
  char text[1024];
  CHECK_OK(precis_cuda_reference_describe(0, text, sizeof text));
  printf("  reference: %s\n", text);
  CHECK(strstr(text, "cublasDgemm") && strstr(text, "cuBLAS ") && strstr(text, "compute capability") &&
        strstr(text, "summation order"));
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  static const harness_test tests[] = {T(cublas_dgemm_within_the_bound_of_openblas),
                                       T(the_bound_separates_float32_accumulation),
                                       T(tiles_of_whole_blocks_are_the_whole), T(provenance_names_the_device_and_cublas)};
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  precis_reference_release();
  return rc;
}
