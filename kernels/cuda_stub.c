/* Stands in for kernels/ when this binary is built without CUDA: then the only source of the
 * kernels library (kernels/CMakeLists.txt), so that cli/ links the same API either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_api.h"
#include "data/generate.h"

#if !PRECIS_HAVE_CUDA
precis_status precis_cuda_inventory_get(precis_cuda_inventory *out) {
  memset(out, 0, sizeof *out);
  out->built = false;
  snprintf(out->error, sizeof out->error,
           "this precis was built without the CUDA backend (PRECIS_CUDA=OFF, or nvcc/cuBLASLt not found at build time)");
  return PRECIS_OK;
}

void precis_cuda_inventory_free(precis_cuda_inventory *inv) {
  free(inv->devices);
  inv->devices = NULL;
}

const precis_backend *precis_backend_cuda(void) { return NULL; }

precis_status precis_cuda_reference_compute(int device, const float *a, const float *b, int64_t batch, int64_t m,
                                            int64_t n, int64_t k, bool b_batched, double *c_ref, double *ab_abs) {
  (void)device, (void)a, (void)b, (void)batch, (void)m, (void)n, (void)k, (void)b_batched, (void)c_ref, (void)ab_abs;
  return precis_fail(PRECIS_E_NOT_BUILT, "--reference-device cuda: this precis was built without the CUDA backend "
                                         "(PRECIS_CUDA=OFF, or nvcc/cuBLAS not found at build time)");
}

precis_status precis_cuda_reference_describe(int device, char *text, size_t len) {
  (void)device, (void)text, (void)len;
  return precis_cuda_reference_compute(device, NULL, NULL, 0, 0, 0, 0, false, NULL, NULL);
}

#define NOT_BUILT_DEVICE_ARRAYS                                                                                        \
  "CUDA device arrays: this libprecis was built without CUDA (PRECIS_CUDA=OFF, or nvcc/cuBLASLt not found at build "   \
  "time); rebuild with -DPRECIS_CUDA=ON, or pass host arrays"

precis_status precis_cuda_device_gemm(int device, uintptr_t stream, const precis_spec *spec,
                                      const precis_workload_info *w, const precis_device_io *io,
                                      precis_case_output *out) {
  (void)device, (void)stream, (void)spec, (void)w, (void)io, (void)out;
  return precis_fail(PRECIS_E_NOT_BUILT, NOT_BUILT_DEVICE_ARRAYS);
}

precis_status precis_cuda_device_alloc(int device, size_t bytes, void **out) {
  (void)device, (void)bytes;
  *out = NULL;
  return precis_fail(PRECIS_E_NOT_BUILT, NOT_BUILT_DEVICE_ARRAYS);
}

void precis_cuda_device_free(int device, void *p) { (void)device, (void)p; }

const precis_reference_device *precis_cuda_reference_device(void) {
  static const precis_reference_device device = {precis_cuda_reference_describe, precis_cuda_reference_compute};
  return &device;
}
#endif
