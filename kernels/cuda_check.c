#include "kernels/cuda_check.h"

#include <string.h>

static _Thread_local precis_status last_status = PRECIS_OK;

const char *precis_source_name(const char *file) {
  const char *k = strstr(file, "kernels/");
  if (k) return k;
  const char *slash = strrchr(file, '/');
  return slash ? slash + 1 : file;
}

bool precis_cuda_ok(cudaError_t err, const char *stmt, const char *file, int line) {
  if (err == cudaSuccess) return true;
  last_status = err == cudaErrorMemoryAllocation ? PRECIS_E_DOES_NOT_FIT : PRECIS_E_RUNTIME;
  precis_fail(last_status, "%s:%d: %s: %s (%s)", precis_source_name(file), line, stmt, cudaGetErrorName(err),
              cudaGetErrorString(err));
  (void)cudaGetLastError();
  return false;
}

bool precis_cublas_ok(cublasStatus_t status, const char *stmt, const char *file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  switch (status) {
  case CUBLAS_STATUS_NOT_SUPPORTED:
  case CUBLAS_STATUS_ARCH_MISMATCH: last_status = PRECIS_E_UNSUPPORTED; break;
  case CUBLAS_STATUS_ALLOC_FAILED: last_status = PRECIS_E_DOES_NOT_FIT; break;
  default: last_status = PRECIS_E_RUNTIME; break;
  }
  precis_fail(last_status, "%s:%d: %s: %s (%s)", precis_source_name(file), line, stmt, cublasLtGetStatusName(status),
              cublasLtGetStatusString(status));
  return false;
}

precis_status precis_cuda_last_status(void) { return last_status; }
precis_status precis_cublas_last_status(void) { return last_status; }
