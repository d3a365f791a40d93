/* A device-side delay enqueued before a timed region's start event.
 *
 * Timing with CUDA events on an idle stream charges the host's enqueue time to the GPU: the start
 * event executes at once, and the GPU then waits for the host to finish submitting the timed work
 * (cublasLtMatmul's host side alone takes microseconds), so a single short GEMM per sample reads
 * too slow. A kernel that keeps the stream busy for longer than the host takes to enqueue the
 * sample makes the start event execute only when the timed work is already queued. It ends by
 * itself (no host flag to wait for, so it cannot deadlock on a full launch queue). */
#ifndef PRECIS_KERNELS_STREAM_DELAY_H
#define PRECIS_KERNELS_STREAM_DELAY_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One single-thread block that spins for `microseconds` of the GPU's global timer. */
cudaError_t precis_cuda_delay(double microseconds, cudaStream_t stream);

/* The delay for the next timed region: twice what the host took to enqueue the last one (plus
 * 20 us), at most 5 ms, so that a sample of thousands of tiny calls, which the host cannot enqueue
 * faster than the GPU runs them anyway, does not spin for long. Shared by the cuda backend and the
 * benchmark's plain loop, so that both time the same way. */
static inline double precis_cuda_delay_after_enqueue_us(double enqueue_ms) {
  double us = 2000.0 * enqueue_ms + 20.0;
  return us < 20.0 ? 20.0 : us > 5000.0 ? 5000.0 : us;
}

#ifdef __cplusplus
}
#endif
#endif
