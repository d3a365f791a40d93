#include "kernels/device_memory.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "kernels/cuda_check.h"

precis_status precis_dmem_alloc(precis_dmem *t, size_t bytes, const char *what, void **out) {
  *out = NULL;
  if (t->count == t->capacity) {
    size_t cap = t->capacity ? t->capacity * 2 : 16;
    precis_dmem_block *grown = realloc(t->blocks, cap * sizeof *grown);
    if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of host memory tracking device allocations");
    t->blocks = grown;
    t->capacity = cap;
  }
  if (bytes == 0) bytes = 1;
  void *ptr = NULL;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation)
      return precis_fail(PRECIS_E_DOES_NOT_FIT,
                         "device memory: cudaMalloc of %zu bytes for %s failed (cudaErrorMemoryAllocation): %zu of %zu "
                         "bytes free, precis already holds %lld bytes for this case",
                         bytes, what, free_b, total_b, t->current_bytes);
    return precis_fail(PRECIS_E_RUNTIME, "device memory: cudaMalloc of %zu bytes for %s failed: %s (%s)", bytes, what,
                       cudaGetErrorName(err), cudaGetErrorString(err));
  }
  t->blocks[t->count++] = (precis_dmem_block){ptr, bytes, what};
  t->current_bytes += (long long)bytes;
  if (t->current_bytes > t->peak_bytes) t->peak_bytes = t->current_bytes;
  *out = ptr;
  return PRECIS_OK;
}

void precis_dmem_free(precis_dmem *t, void *ptr) {
  if (!ptr) return;
  for (size_t i = 0; i < t->count; i++) {
    if (t->blocks[i].ptr != ptr) continue;
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
    t->current_bytes -= (long long)t->blocks[i].bytes;
    t->blocks[i] = t->blocks[--t->count];
    return;
  }
}

void precis_dmem_free_all(precis_dmem *t) {
  for (size_t i = 0; i < t->count; i++)
    if (cudaFree(t->blocks[i].ptr) != cudaSuccess) (void)cudaGetLastError();
  t->count = 0;
  t->current_bytes = 0;
}

void precis_dmem_destroy(precis_dmem *t) {
  precis_dmem_free_all(t);
  free(t->blocks);
  t->blocks = NULL;
  t->capacity = 0;
}
