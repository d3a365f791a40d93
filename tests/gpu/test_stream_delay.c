/* kernels/stream_delay.h on a real device: the delay lasts what it is asked (the global timer counts
 * nanoseconds), and it does what the backend's timing relies on: a host-side gap between recording
 * the start and the stop event is charged to an idle stream's elapsed time, but not when a delay
 * longer than the gap was enqueued before the start event. Skipped (77) only without a device (gpu_probe.h). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <time.h>

#include "gpu_probe.h"
#include "harness.h"
#include "kernels/stream_delay.h"

static cudaStream_t stream;
static cudaEvent_t start, stop;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Elapsed ms between start and stop, with `delay_us` enqueued before start and the host sleeping
 * `gap_ms` between the two records. */
static float timed_gap(double delay_us, long gap_ms) {
  float ms = -1;
  CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(precis_cuda_delay(delay_us, stream) == cudaSuccess);
  CHECK(cudaEventRecord(start, stream) == cudaSuccess);
  sleep_ms(gap_ms);
  CHECK(cudaEventRecord(stop, stream) == cudaSuccess);
  CHECK(cudaEventSynchronize(stop) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  return ms;
}

TEST(delay_lasts_what_is_asked) {
  for (int i = 0; i < 2; i++) { /* the first launch loads the module */
    CHECK(cudaEventRecord(start, stream) == cudaSuccess);
    CHECK(precis_cuda_delay(2000.0, stream) == cudaSuccess);
    CHECK(cudaEventRecord(stop, stream) == cudaSuccess);
    CHECK(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
    printf("  2000 us delay: %.3f ms between events\n", (double)ms);
    if (i == 1) CHECK_MSG(ms >= 1.95f && ms < 4.0f, "a 2 ms delay took %.3f ms", (double)ms);
  }
  CHECK(precis_cuda_delay(0, stream) == cudaSuccess); /* nothing to do */
  CHECK(precis_cuda_delay(-1, stream) == cudaSuccess);
}

TEST(delay_keeps_the_host_gap_out_of_the_timed_region) {
  float idle = timed_gap(0, 5);
  float delayed = timed_gap(20000.0, 5);
  printf("  5 ms host gap: %.3f ms on an idle stream, %.3f ms after a 20 ms delay\n", (double)idle, (double)delayed);
  CHECK_MSG(idle >= 4.5f, "the gap should be charged on an idle stream: %.3f ms", (double)idle);
  CHECK_MSG(delayed < 0.5f, "the delay should keep the gap out: %.3f ms", (double)delayed);
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  cudaError_t err = cudaSetDevice(0);
  if (err == cudaSuccess) err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess) err = cudaEventCreate(&start);
  if (err == cudaSuccess) err = cudaEventCreate(&stop);
  if (err != cudaSuccess) {
    printf("FAIL: cannot create a stream and events on device 0: %s\n", cudaGetErrorName(err));
    return 1;
  }
  static const harness_test tests[] = {T(delay_lasts_what_is_asked),
                                       T(delay_keeps_the_host_gap_out_of_the_timed_region)};
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return rc;
}
