/* The memory views' building blocks on a real device: the sampler thread catches a transient
 * allocation between the backend's own observations; the tracking allocator counts what precis
 * holds and turns an allocation larger than free memory into does-not-fit, after which the device
 * is still usable; PRECIS_TRY records the failing statement. Skipped (77) only without a device (gpu_probe.h). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda_check.h"
#include "kernels/device_memory.h"
#include "gpu_probe.h"
#include "harness.h"
#include "kernels/mem_sampler.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

TEST(sampler_catches_a_transient_allocation) {
  const size_t transient = (size_t)512 << 20;
  long long before = precis_device_used_bytes();
  CHECK(before > 0);
  precis_mem_sampler s;
  CHECK_OK(precis_mem_sampler_start(&s, 0, 500));
  sleep_ms(5);
  void *p = NULL;
  CHECK(cudaMalloc(&p, transient) == cudaSuccess);
  CHECK(cudaMemset(p, 1, transient) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  sleep_ms(20);
  CHECK(cudaFree(p) == cudaSuccess);
  sleep_ms(10);
  long long after_free = precis_device_used_bytes();
  long long peak = precis_mem_sampler_stop(&s);
  long long samples = atomic_load(&s.samples);
  printf("  baseline %lld, peak %lld, after free %lld, %lld samples\n", before, peak, after_free, samples);
  /* The allocation is gone before the sampler is stopped: only the thread can have seen it. */
  CHECK(after_free < before + (long long)transient / 2);
  CHECK(peak >= before + (long long)transient);
  CHECK(samples >= 10); /* >= 35 ms at 0.5 ms */
  CHECK_EQ_INT(atomic_load(&s.failures), 0);
}

TEST(tracking_allocator_counts_and_frees) {
  precis_dmem t = {0};
  void *a = NULL, *b = NULL;
  CHECK_OK(precis_dmem_alloc(&t, 1000, "a", &a));
  CHECK_OK(precis_dmem_alloc(&t, 3000, "b", &b));
  CHECK_EQ_INT(t.current_bytes, 4000);
  precis_dmem_free(&t, a);
  CHECK_EQ_INT(t.current_bytes, 3000);
  CHECK_EQ_INT(t.peak_bytes, 4000);
  precis_dmem_destroy(&t);
  CHECK_EQ_INT(t.current_bytes, 0);
}

TEST(allocation_larger_than_free_is_does_not_fit_and_the_device_goes_on) {
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
  precis_dmem t = {0};
  void *p = NULL;
  precis_status st = precis_dmem_alloc(&t, free_b + ((size_t)1 << 30), "the deliberately oversized buffer", &p);
  CHECK_EQ_INT(st, PRECIS_E_DOES_NOT_FIT);
  CHECK(p == NULL);
  printf("  %s\n", precis_last_error());
  CHECK(strstr(precis_last_error(), "cudaErrorMemoryAllocation") != NULL);
  CHECK(strstr(precis_last_error(), "free") != NULL);
  CHECK(strstr(precis_last_error(), "deliberately oversized") != NULL);
  CHECK_EQ_INT(t.current_bytes, 0);
  CHECK(cudaGetLastError() == cudaSuccess); /* cleared: the next case starts clean */
  CHECK_OK(precis_dmem_alloc(&t, (size_t)64 << 20, "a normal buffer afterwards", &p));
  CHECK(cudaMemset(p, 0, (size_t)64 << 20) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  precis_dmem_destroy(&t);
}

static precis_status failing_call(void) {
  precis_status st = PRECIS_OK;
  PRECIS_TRY(cuda, cudaSetDevice(987654));
done:
  return st;
}

TEST(try_macro_records_the_statement) {
  CHECK(failing_call() != PRECIS_OK);
  printf("  %s\n", precis_last_error());
  CHECK(strstr(precis_last_error(), "cudaSetDevice(987654)") != NULL);
  CHECK(strstr(precis_last_error(), "test_device_memory.c") != NULL);
  CHECK(strstr(precis_last_error(), "cudaErrorInvalidDevice") != NULL);
  CHECK(cudaSetDevice(0) == cudaSuccess);
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  cudaError_t err = cudaSetDevice(0);
  if (err == cudaSuccess) err = cudaFree(NULL);
  if (err != cudaSuccess) {
    printf("FAIL: cannot create a context on device 0: %s\n", cudaGetErrorName(err));
    return 1;
  }
  static const harness_test tests[] = {T(sampler_catches_a_transient_allocation), T(tracking_allocator_counts_and_frees),
                                       T(allocation_larger_than_free_is_does_not_fit_and_the_device_goes_on),
                                       T(try_macro_records_the_statement)};
  return harness_run(tests, sizeof tests / sizeof tests[0]);
}
