/* The device probe of the GPU tests and benchmarks. A skip (exit 77) means "this machine has no
 * CUDA device", nothing else: no device, no driver (or one too old for the runtime), or zero
 * devices. Any other error (a device that is there but cannot be opened, a context, stream or event
 * that cannot be created) is a failure, so that a broken device or driver never reads as skipped. */
#ifndef PRECIS_TEST_GPU_PROBE_H
#define PRECIS_TEST_GPU_PROBE_H

#include <cuda_runtime_api.h>
#include <stdio.h>

#define PRECIS_GPU_SKIP 77

/* 0: a device is there; PRECIS_GPU_SKIP: none on this machine; 1: the probe itself failed. */
static inline int precis_gpu_probe(void) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || (err == cudaSuccess && count == 0)) {
    printf("SKIP: no CUDA device on this machine (%s)\n", err == cudaSuccess ? "0 devices" : cudaGetErrorName(err));
    return PRECIS_GPU_SKIP;
  }
  if (err != cudaSuccess) {
    printf("FAIL: cudaGetDeviceCount: %s: %s\n", cudaGetErrorName(err), cudaGetErrorString(err));
    return 1;
  }
  return 0;
}

#endif
