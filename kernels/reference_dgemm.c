/* gen --reference-device cuda: c_ref and ab_abs by cublasDgemm (docs/scale-out.md). The float32
 * values are widened on the host (exact), the products and sums are float64 on the device. The same
 * blocks of rows as the CPU path (PRECIS_REFERENCE_BLOCK_ROWS per call), so that gen --tile-rows and
 * gen under MPI write the in-core file on the same GPU type and cuBLAS: cuBLAS picks its kernel,
 * and with it the summation order, by the shape of the call. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda_api.h"
#include "kernels/cuda_check.h"
#include "data/generate.h"

precis_status precis_cuda_reference_describe(int device, char *text, size_t len) {
  precis_status st = PRECIS_OK;
  struct cudaDeviceProp prop;
  int runtime = 0, major = 0, minor = 0, patch = 0;
  PRECIS_TRY(cuda, cudaGetDeviceProperties(&prop, device));
  PRECIS_TRY(cuda, cudaRuntimeGetVersion(&runtime));
  PRECIS_TRY(cublas, cublasGetProperty(MAJOR_VERSION, &major));
  PRECIS_TRY(cublas, cublasGetProperty(MINOR_VERSION, &minor));
  PRECIS_TRY(cublas, cublasGetProperty(PATCH_LEVEL, &patch));
  snprintf(text, len,
           "float64 cublasDgemm of the stored float32 values (CUBLAS_DEFAULT_MATH: IEEE float64, no emulation) on "
           "%s (compute capability %d.%d, %d SMs), cuBLAS %d.%d.%d, CUDA runtime %d.%d, in calls of %d rows; its "
           "summation order is not the CPU's (OpenBLAS), so the last bits may differ from a CPU gen's, within "
           "reference_error_bound",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, major, minor, patch, runtime / 1000,
           runtime % 1000 / 10, PRECIS_REFERENCE_BLOCK_ROWS);
done:
  return st;
}

static void widen(const float *in, double *out, uint64_t count, bool absolute) {
  if (absolute)
    for (uint64_t i = 0; i < count; i++) out[i] = fabs((double)in[i]);
  else
    for (uint64_t i = 0; i < count; i++) out[i] = (double)in[i];
}

precis_status precis_cuda_reference_compute(int device, const float *a, const float *b, int64_t batch, int64_t m,
                                            int64_t n, int64_t k, bool b_batched, double *c_ref, double *ab_abs) {
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return precis_fail(PRECIS_E_INPUT, "m, n and k must be below 2^31 (cuBLAS's int dimensions)");
  precis_status st = PRECIS_OK;
  cublasHandle_t handle = NULL;
  double *a64 = NULL, *b64 = NULL, *d_a = NULL, *d_b = NULL, *d_c = NULL;
  const int64_t samples = b_batched ? batch : 1, rows_per = b_batched ? m : batch * m;
  const uint64_t a_count = (uint64_t)rows_per * (uint64_t)k, kn = (uint64_t)k * (uint64_t)n,
                 c_count = (uint64_t)rows_per * (uint64_t)n;
  const double one = 1.0, zero = 0.0;
  a64 = malloc(a_count * sizeof *a64);
  b64 = malloc(kn * sizeof *b64);
  if (!a64 || !b64) {
    st = precis_fail(PRECIS_E_NOMEM, "out of host memory for the float64 copies of a and b (%.3g GiB)",
                     (double)(a_count + kn) * 8.0 / 1073741824.0);
    goto done;
  }
  PRECIS_TRY(cuda, cudaSetDevice(device));
  PRECIS_TRY(cuda, cudaMalloc((void **)&d_a, a_count * sizeof *d_a));
  PRECIS_TRY(cuda, cudaMalloc((void **)&d_b, kn * sizeof *d_b));
  PRECIS_TRY(cuda, cudaMalloc((void **)&d_c, c_count * sizeof *d_c));
  PRECIS_TRY(cublas, cublasCreate(&handle));
  /* Named, not left to the default: FP64 emulation (CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH) is a
   * math mode, and a reference must be IEEE float64 arithmetic. */
  PRECIS_TRY(cublas, cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  for (int pass = 0; pass < (ab_abs ? 2 : 1); pass++) {
    const bool absolute = pass == 1; /* |x| of a float32 value is exact in float64 */
    double *c = absolute ? ab_abs : c_ref;
    for (int64_t s = 0; s < samples; s++) {
      widen(a + (uint64_t)s * a_count, a64, a_count, absolute);
      widen(b + (uint64_t)s * kn, b64, kn, absolute);
      PRECIS_TRY(cuda, cudaMemcpy(d_a, a64, a_count * sizeof *a64, cudaMemcpyHostToDevice));
      PRECIS_TRY(cuda, cudaMemcpy(d_b, b64, kn * sizeof *b64, cudaMemcpyHostToDevice));
      for (int64_t r0 = 0; r0 < rows_per; r0 += PRECIS_REFERENCE_BLOCK_ROWS) {
        int64_t rows = rows_per - r0 < PRECIS_REFERENCE_BLOCK_ROWS ? rows_per - r0 : PRECIS_REFERENCE_BLOCK_ROWS;
        /* Row-major C = A.B is column-major C^T = B^T.A^T: cuBLAS sees b as n x k and a as k x rows. */
        PRECIS_TRY(cublas, cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)rows, (int)k, &one, d_b, (int)n,
                                       d_a + (uint64_t)r0 * (uint64_t)k, (int)k, &zero, d_c + (uint64_t)r0 * (uint64_t)n,
                                       (int)n));
      }
      PRECIS_TRY(cuda, cudaMemcpy(c + (uint64_t)s * c_count, d_c, c_count * sizeof *d_c, cudaMemcpyDeviceToHost));
    }
  }
done:
  if (handle) cublasDestroy(handle);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_c);
  free(a64);
  free(b64);
  if (st != PRECIS_OK) precis_error_prefix("--reference-device cuda (device %d)", device);
  return st;
}

const precis_reference_device *precis_cuda_reference_device(void) {
  static const precis_reference_device device = {precis_cuda_reference_describe, precis_cuda_reference_compute};
  return &device;
}
