/* precis info's view of CUDA: driver, runtime, cuBLAS/cuBLASLt versions and every device. Each
 * query that fails leaves its field empty rather than failing the whole inventory: a machine with
 * the toolkit but no driver still gets a useful answer. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_api.h"

precis_status precis_cuda_inventory_get(precis_cuda_inventory *out) {
  memset(out, 0, sizeof *out);
  out->built = true;
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess) out->driver_version = v;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) out->runtime_version = v;
  int major = 0, minor = 0, patch = 0;
  cublasStatus_t blas = cublasGetProperty(MAJOR_VERSION, &major);
  if (blas == CUBLAS_STATUS_SUCCESS && cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    out->cublas_version = major * 10000 + minor * 100 + patch;
  else if (blas == CUBLAS_STATUS_NOT_INITIALIZED) /* not loaded (cuBLASLt missing too: cuBLAS needs it) */
    snprintf(out->cublas_error, sizeof out->cublas_error, "%s", cublasLtGetStatusString(blas));
  out->cublaslt_version = (long long)cublasLtGetVersion();

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    snprintf(out->error, sizeof out->error, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(err),
             cudaGetErrorString(err));
    (void)cudaGetLastError();
    return PRECIS_OK;
  }
  if (count == 0) {
    snprintf(out->error, sizeof out->error, "cudaGetDeviceCount returned 0 devices");
    return PRECIS_OK;
  }
  out->devices = calloc((size_t)count, sizeof *out->devices);
  if (!out->devices) return precis_fail(PRECIS_E_NOMEM, "out of memory listing CUDA devices");
  for (int d = 0; d < count; d++) {
    precis_device_info *dev = &out->devices[out->device_count];
    struct cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, d);
    if (err != cudaSuccess) {
      snprintf(out->error, sizeof out->error, "cudaGetDeviceProperties(%d): %s (%s)", d, cudaGetErrorName(err),
               cudaGetErrorString(err));
      (void)cudaGetLastError(); /* else the next kernel launch's cudaGetLastError() would report it */
      continue;
    }
    dev->index = d;
    snprintf(dev->name, sizeof dev->name, "%s", prop.name);
    dev->cc_major = prop.major;
    dev->cc_minor = prop.minor;
    dev->sm_count = prop.multiProcessorCount;
    dev->mem_total_bytes = (long long)prop.totalGlobalMem;
    dev->l2_bytes = prop.l2CacheSize;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      dev->mem_free_bytes = (long long)free_b;
    else
      (void)cudaGetLastError();
    for (size_t r = 0; r < precis_recipe_preset_count(); r++) {
      precis_recipe preset;
      dev->recipe_supported[r] = precis_recipe_from_preset(precis_recipe_preset_at(r), &preset) == PRECIS_OK &&
                                 precis_cuda_spec_supported(&preset.spec, prop.major, prop.minor, dev->recipe_reason[r],
                                                            sizeof dev->recipe_reason[r]);
    }
    out->device_count++;
  }
  /* The loop made the last device current; the backend and the GPU tests assume device 0. */
  if (cudaSetDevice(0) != cudaSuccess) (void)cudaGetLastError();
  return PRECIS_OK;
}

void precis_cuda_inventory_free(precis_cuda_inventory *inv) {
  free(inv->devices);
  inv->devices = NULL;
  inv->device_count = 0;
}
