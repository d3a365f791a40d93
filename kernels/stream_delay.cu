/* kernels/stream_delay.h: a kernel that keeps a stream busy for a given time. */
#include "kernels/stream_delay.h"

namespace {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void delay_kernel(unsigned long long ns) {
  unsigned long long t0 = global_timer_ns();
  while (global_timer_ns() - t0 < ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(500);
#endif
  }
}

} // namespace

extern "C" cudaError_t precis_cuda_delay(double microseconds, cudaStream_t stream) {
  if (!(microseconds > 0)) return cudaSuccess;
  if (microseconds > 1e6) microseconds = 1e6; /* a bound, whatever the caller computed */
  delay_kernel<<<1, 1, 0, stream>>>((unsigned long long)(microseconds * 1000.0));
  return cudaGetLastError();
}
