/* precis_emulate_device, libprecis's entry for arrays already on a CUDA device (DLPack's path from
 * torch CUDA tensors; include/precis/emulate.h, kernels/cuda_device_gemm.c). WRITTEN ON A MACHINE
 * WITHOUT A GPU AND NOT YET RUN ON ONE (issue 40): this is the test that says whether it works.
 *
 * On device 0, for fp32, tf32, bf16, fp16, int8 and fp8 on a shared and a batched b (odd shapes):
 * - the device path's output equals, bit for bit, the cuda backend's own run of the same case from
 *   host arrays (run_case with the workload in host memory, `precis run --backend cuda`'s path);
 * - no host copy: the backend allocated exactly the two float32 input buffers fewer (tracked device
 *   bytes, the staging buffers host arrays are copied into) and read nothing back (out.c NULL);
 * - a c allocated by precis, the caller's stream waited for (a memset queued on it), host memory
 *   posing as device memory refused, the recipes that go through the host refused naming why.
 * Skipped (77) on a machine without a CUDA device (gpu_probe.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "gpu_probe.h"
#include "harness.h"
#include "kernels/cuda_api.h"
#include "numerics/recipe.h"
#include "precis/emulate.h"

static const precis_backend *cuda;
static void *ctx;
static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static float uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)(2.0 * ((double)(rng >> 11) / 9007199254740992.0) - 1.0);
}

typedef struct shape {
  int64_t batch, m, n, k;
  bool b_batched;
} shape;

static void workload_info(const shape *s, precis_workload_info *w) {
  memset(w, 0, sizeof *w);
  w->name = (char *)"device-gemm";
  w->kind = (char *)"gemm";
  w->description = w->a_dist = w->b_dist = w->reference = (char *)"";
  w->reference_precision = (char *)"float64";
  w->m = s->m, w->n = s->n, w->k = s->k, w->batch = s->batch, w->b_batched = s->b_batched;
}

static void one_case(const char *recipe_name, const shape *s) {
  precis_recipe recipe;
  CHECK_OK(precis_recipe_parse(recipe_name, &recipe));
  size_t na = (size_t)(s->batch * s->m * s->k), nb = (size_t)((s->b_batched ? s->batch : 1) * s->k * s->n),
         nc = (size_t)(s->batch * s->m * s->n);
  float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *c2 = malloc(nc * 4);
  for (size_t i = 0; i < na; i++) a[i] = 3 * uniform();
  for (size_t i = 0; i < nb; i++) b[i] = uniform();
  precis_workload_info w;
  workload_info(s, &w);
  precis_workload_data d;
  memset(&d, 0, sizeof d);
  d.a = a, d.b = b;

  /* The host path: the backend copies a and b to the device itself. */
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 1, o.max_samples = 2, o.max_time_ms = 1;
  precis_case_output host;
  precis_case_output_init(&host);
  CHECK_OK(cuda->run_case(ctx, &recipe.spec, &w, &d, &o, &host));
  if (host.status != PRECIS_ROW_OK) {
    printf("  %s: %s on this device: %s (not compared)\n", recipe_name, precis_row_status_str(host.status), host.reason);
    precis_case_output_free(&host);
    free(a), free(b), free(c), free(c2);
    return;
  }

  float *da = NULL, *db = NULL, *dc = NULL;
  CHECK(cudaMalloc((void **)&da, na * 4) == cudaSuccess && cudaMalloc((void **)&db, nb * 4) == cudaSuccess &&
        cudaMalloc((void **)&dc, nc * 4) == cudaSuccess);
  CHECK(cudaMemcpy(da, a, na * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(db, b, nb * 4, cudaMemcpyHostToDevice) == cudaSuccess);

  /* The public entry: bits equal to the host path's. */
  precis_device_gemm g = {.device = 0, .batch = s->batch, .m = s->m, .n = s->n, .k = s->k,
                          .b_batched = s->b_batched, .a = da, .b = db, .c = dc};
  precis_emulate_info info;
  precis_status st = precis_emulate_device(recipe_name, &g, NULL, &info);
  CHECK_MSG(st == PRECIS_OK, "%s: %s", recipe_name, precis_last_error());
  CHECK(cudaMemcpy(c, dc, nc * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK_MSG(st != PRECIS_OK || memcmp(c, host.c, nc * 4) == 0, "%s [%lld,%lld,%lld,%lld%s]: device path differs from "
            "the host path", recipe_name, (long long)s->batch, (long long)s->m, (long long)s->n, (long long)s->k,
            s->b_batched ? ", b batched" : "");
  CHECK(st != PRECIS_OK || strstr(info.emulation, "device arrays in place") != NULL);

  /* No host copy: the backend's tracked allocations are the host path's minus the two staging
   * buffers, and nothing was read back to the host. */
  precis_device_io io = {.a = da, .b = db, .c = dc};
  precis_case_output dev;
  precis_case_output_init(&dev);
  CHECK_OK(precis_cuda_device_gemm(0, 0, &recipe.spec, &w, &io, &dev));
  CHECK_MSG(dev.status == PRECIS_ROW_OK, "%s: %s", recipe_name, dev.reason);
  CHECK(dev.c == NULL);
  CHECK_MSG(host.memory.tracked_peak_bytes - dev.memory.tracked_peak_bytes == (long long)((na + nb) * 4),
            "%s: tracked device bytes %lld (host arrays) vs %lld (device arrays): expected a difference of %zu",
            recipe_name, host.memory.tracked_peak_bytes, dev.memory.tracked_peak_bytes, (na + nb) * 4);
  CHECK(precis_kv_get(&dev.details, "inputs") != NULL);
  precis_case_output_free(&dev);

  /* c allocated by precis. */
  float *allocated = NULL;
  g.c = NULL;
  CHECK_OK(precis_emulate_device(recipe_name, &g, &allocated, NULL));
  CHECK(allocated != NULL && cudaMemcpy(c2, allocated, nc * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(c2, host.c, nc * 4) == 0);
  precis_device_free(0, allocated);

  cudaFree(da), cudaFree(db), cudaFree(dc);
  precis_case_output_free(&host);
  free(a), free(b), free(c), free(c2);
}

TEST(device_path_equals_host_path) {
  static const char *const recipes[] = {"fp32", "tf32", "bf16", "fp16", "int8", "fp8"};
  static const shape shapes[] = {{3, 33, 17, 65, false}, {2, 7, 19, 96, true}, {1, 1, 49, 200, false}};
  for (size_t r = 0; r < sizeof recipes / sizeof *recipes; r++)
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) one_case(recipes[r], &shapes[i]);
}

TEST(device_path_refusals_and_stream) {
  const int64_t m = 8, n = 8, k = 32;
  float *da = NULL, *db = NULL, *dc = NULL, host_a[8 * 32] = {0}, c[64];
  CHECK(cudaMalloc((void **)&da, m * k * 4) == cudaSuccess && cudaMalloc((void **)&db, k * n * 4) == cudaSuccess &&
        cudaMalloc((void **)&dc, m * n * 4) == cudaSuccess);
  CHECK(cudaMemset(db, 0x3f, k * n * 4) == cudaSuccess); /* ~0.75 everywhere */
  precis_device_gemm g = {.device = 0, .batch = 1, .m = m, .n = n, .k = k, .a = da, .b = db, .c = dc};
  /* The caller's stream: a memset of a queued there comes before the GEMM, so C is all zeros. */
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMemset(da, 0x3f, m * k * 4) == cudaSuccess);
  CHECK(cudaMemsetAsync(da, 0, m * k * 4, s) == cudaSuccess);
  g.stream = (uintptr_t)s;
  CHECK_OK(precis_emulate_device("bf16", &g, NULL, NULL));
  CHECK(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost) == cudaSuccess);
  bool zeros = true;
  for (int i = 0; i < 64; i++) zeros = zeros && c[i] == 0.0f;
  CHECK(zeros);
  cudaStreamDestroy(s);
  g.stream = 0;
  /* fp32 hands the caller's arrays to cuBLASLt itself: a view 4 bytes into its buffer must run. */
  float *da_odd = NULL;
  CHECK(cudaMalloc((void **)&da_odd, (m * k + 1) * 4) == cudaSuccess);
  CHECK(cudaMemset(da_odd + 1, 0x3f, m * k * 4) == cudaSuccess);
  g.a = da_odd + 1;
  CHECK_OK(precis_emulate_device("fp32", &g, NULL, NULL));
  CHECK(cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost) == cudaSuccess);
  /* 0x3f3f3f3f = 0.7470... : every output is k * that squared, summed in fp32. */
  float v = 0.0f, x = 0x1.7e7e7ep-1f;
  for (int i = 0; i < k; i++) v += x * x;
  CHECK_MSG(fabsf(c[0] - v) <= 1e-5f * v && fabsf(c[63] - v) <= 1e-5f * v, "%g %g vs %g", c[0], c[63], v);
  cudaFree(da_odd);
  g.a = da;
  /* Host memory posing as device memory. */
  g.a = host_a;
  CHECK_EQ_INT(precis_emulate_device("bf16", &g, NULL, NULL), PRECIS_E_USAGE);
  CHECK_MSG(strstr(precis_last_error(), "a: ") && strstr(precis_last_error(), "host memory"), "%s", precis_last_error());
  g.a = da;
  /* Recipes that read their inputs on the host. */
  static const char *const host_side[] = {"fp8-rowwise", "w4a16", "fp64", "bf16x3"};
  for (size_t i = 0; i < sizeof host_side / sizeof *host_side; i++) {
    precis_status st = precis_emulate_device(host_side[i], &g, NULL, NULL);
    CHECK_MSG(st == PRECIS_E_UNSUPPORTED && strstr(precis_last_error(), "device arrays"), "%s: %d %s", host_side[i],
              (int)st, precis_last_error());
  }
  int count = 0;
  CHECK(cudaGetDeviceCount(&count) == cudaSuccess);
  g.device = count;
  CHECK_EQ_INT(precis_emulate_device("bf16", &g, NULL, NULL), PRECIS_E_USAGE);
  cudaFree(da), cudaFree(db), cudaFree(dc);
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe) return probe;
  cuda = precis_backend_cuda();
  precis_case_options o;
  precis_case_options_default(&o);
  if (cuda->open(&ctx, &o) != PRECIS_OK) {
    printf("FAIL: the cuda backend does not open: %s\n", precis_last_error());
    return 1;
  }
  static const harness_test tests[] = {T(device_path_equals_host_path), T(device_path_refusals_and_stream)};
  int rc = harness_run(tests, sizeof tests / sizeof *tests);
  cuda->close(ctx);
  return rc;
}
