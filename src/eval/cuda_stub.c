/* Stands in for kernels/ when this binary is built without CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda_api.h"

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
#endif
