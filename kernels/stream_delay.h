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

#ifdef __cplusplus
}
#endif
#endif
