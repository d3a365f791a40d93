/* One error-checking macro for every CUDA runtime and cuBLAS/cuBLASLt call in kernels/:
 *
 *   PRECIS_TRY(cuda, cudaMalloc(&p, bytes));
 *   PRECIS_TRY(cublas, cublasLtMatmulDescCreate(&desc, compute, scale));
 *
 * On failure it records "kernels/file.c:123: <the statement>: <error name> (<description>)" as the
 * precis error message, sets `st` to the precis status the error maps to and jumps to `done` (the
 * single cleanup label every function here has). */
#ifndef PRECIS_KERNELS_CUDA_CHECK_H
#define PRECIS_KERNELS_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "base/status.h"

#define PRECIS_TRY(lib, stmt)                                                                                  \
  do {                                                                                                         \
    if (!precis_##lib##_ok((stmt), #stmt, __FILE__, __LINE__)) {                                               \
      st = precis_##lib##_last_status();                                                                       \
      goto done;                                                                                               \
    }                                                                                                          \
  } while (0)

/* true on success; otherwise records the message and the status of this thread's last failure.
 * Non-sticky CUDA errors are cleared (cudaGetLastError) so that the next case starts clean. */
bool precis_cuda_ok(cudaError_t err, const char *stmt, const char *file, int line);
bool precis_cublas_ok(cublasStatus_t status, const char *stmt, const char *file, int line);
/* cudaErrorMemoryAllocation -> PRECIS_E_DOES_NOT_FIT; CUBLAS_STATUS_NOT_SUPPORTED and
 * CUBLAS_STATUS_ARCH_MISMATCH -> PRECIS_E_UNSUPPORTED; CUBLAS_STATUS_ALLOC_FAILED ->
 * PRECIS_E_DOES_NOT_FIT; anything else PRECIS_E_RUNTIME. */
precis_status precis_cuda_last_status(void);
precis_status precis_cublas_last_status(void);

/* "kernels/x.c" from a compiler's absolute __FILE__. */
const char *precis_source_name(const char *file);

#endif
