/* Carries out a GEMM plan (src/eval/gemm_plan.h) with cuBLASLt: descriptors, heuristic candidates, the
 * call itself and the record of the algorithm chosen. Used by the cuda backend and, with the same
 * descriptors, by the plain cublasLtMatmul loop of tests/bench/gpu_bench_matmul.c. */
#ifndef PRECIS_KERNELS_LT_MATMUL_H
#define PRECIS_KERNELS_LT_MATMUL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "eval/gemm_plan.h"
#include "report/results.h"
#include "base/status.h"

/* PRECIS_LT_WORKSPACE_BYTES: in gemm_plan.h, so that `precis explain` prints it without CUDA. */
/* Heuristic candidates asked for at most (--autotune N is clamped to it). */
#define PRECIS_LT_MAX_CANDIDATES 16

typedef union precis_lt_scalar {
  float f32;
  int32_t i32;
  uint16_t f16_bits;
  double f64; /* the 64F compute types (issue 19) */
} precis_lt_scalar;

typedef struct precis_lt_call {
  const precis_gemm_plan *plan;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c, d;
  cublasLtMatmulPreference_t preference;
  precis_lt_scalar alpha, beta; /* in the plan's scale type; host pointer mode */
  const void *A, *B;
  void *D;
  void *C; /* NULL: C is D's buffer; else its own (plan->c_separate) */
  void *workspace;
  size_t workspace_bytes;
  void *emulation; /* cublasLtEmulationDesc_t of an emulated compute type (precis_lt_call_set_emulation), or NULL */
} precis_lt_call;

/* Builds the descriptors. A_lt/B_lt/D may be NULL when only the heuristic is asked (capability
 * probes); the fp8 scale pointers are device pointers to float (NULL: not set). */
precis_status precis_lt_call_init(precis_lt_call *call, const precis_gemm_plan *plan, const void *A_lt, const void *B_lt,
                                  void *D, const float *d_scale_a_slot, const float *d_scale_b_slot, void *workspace,
                                  size_t workspace_bytes);
void precis_lt_call_destroy(precis_lt_call *call);

/* fp8 output (plan->d_scaled): C's own buffer (NULL in capability probes), scale_D and amax_D
 * device floats (CUBLASLT_MATMUL_DESC_D_SCALE_POINTER / AMAX_D_POINTER). After precis_lt_call_init. */
precis_status precis_lt_call_set_fp8_output(precis_lt_call *call, void *C, const float *d_scale_d, float *d_amax_d);

/* cuBLAS's FP64 fixed-point emulation (compute type CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, cuBLAS
 * 13.1+): an emulation descriptor with the EAGER strategy (emulate whenever possible) whose
 * mantissa-bit-count pointer is d_mantissa_bits (a device int: the bits retained, -1 when the call
 * ran without emulation). PRECIS_E_UNSUPPORTED when this cuBLASLt (or the one built against) has no
 * emulation descriptor. */
precis_status precis_lt_call_set_emulation(precis_lt_call *call, int *d_mantissa_bits);

/* Up to `max` candidates (those with state CUBLAS_STATUS_SUCCESS). None: PRECIS_E_UNSUPPORTED
 * with the cuBLASLt status string and the problem in the message. */
precis_status precis_lt_call_candidates(precis_lt_call *call, cublasLtHandle_t handle, int max,
                                        cublasLtMatmulHeuristicResult_t *results, int *count);

/* Enqueues the GEMM on `stream` (no synchronization). */
cublasStatus_t precis_lt_call_run(const precis_lt_call *call, cublasLtHandle_t handle, const cublasLtMatmulAlgo_t *algo,
                                  cudaStream_t stream);

/* The algorithm as details: algo_id, algo_tile, algo_stages, algo_splitk, algo_reduction_scheme,
 * algo_swizzle, algo_custom_option, algo_reduction (the scheme by name and the split-K count),
 * workspace_bytes (what it uses), workspace_limit_bytes, waves. */
void precis_lt_algo_describe(const cublasLtMatmulHeuristicResult_t *result, size_t workspace_limit,
                             precis_kv_list *details);
/* One line for logs and the benchmark: "algo 21 tile 20 stages 16 splitK 1 reduction 0". */
void precis_lt_algo_summary(const cublasLtMatmulAlgo_t *algo, char *buf, size_t len);

#endif
