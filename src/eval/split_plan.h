/* The split recipes on the cuda backend (issue 19, docs/high-precision.md): one cuBLASLt GEMM per
 * partial product, planned here in plain C so that `precis explain` prints it and
 * tests/test_gemm_plan.c checks it without a GPU. kernels/cuda_hiprec.c carries it out.
 *
 * Float splits (tf32x3, bf16x3/x6/x9): each operand split into terms on the device (the rule of
 * src/numerics/split.h), then one GEMM per kept pair (i, j) into one float32 D, the first with
 * beta = 0 and every later one with beta = 1, in the cpu backend's order of levels (smallest level
 * first, big·big last). Within one call the tensor cores sum over k in their own order, so the
 * result agrees with the cpu backend's (sequential over k) within a bound, not bit for bit.
 *
 * Ozaki (int8x<N>): the slices of A (per row) and B (per column) made on the device as the cpu
 * backend makes them, one int8 GEMM with int32 output per slice product A_s·B_t (s + t <= N + 1;
 * exact while 127²·k < 2^31) through the int8 route's layouts (TN, padding), each added exactly into
 * the float64 sum of its level; the levels, complete one after another from g = N + 1 down to 2,
 * are added into a float64 sum scaled by 2^-7g and the result by 2^(e_i + f_j): the cpu backend's
 * operations in its order, so the output is the cpu backend's bit for bit.
 *
 * Timing counts one whole evaluation: splitting both operands, every product GEMM, the combination. */
#ifndef PRECIS_SPLIT_PLAN_H
#define PRECIS_SPLIT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm_plan.h"
#include "report/results.h"
#include "numerics/spec.h"
#include "base/status.h"

/* int8x16: 16·17/2 slice products. */
#define PRECIS_SPLIT_MAX_PRODUCTS 136

typedef struct precis_split_plan {
  precis_spec spec;
  bool ozaki;             /* int8x<N>; else a float split */
  int terms;              /* terms (float) or slices (Ozaki) per operand */
  int products;           /* partial products, one GEMM each, in the order below */
  int term_a[PRECIS_SPLIT_MAX_PRODUCTS]; /* term of the workload's A in product q */
  int term_b[PRECIS_SPLIT_MAX_PRODUCTS]; /* term of the workload's B in product q */
  int level[PRECIS_SPLIT_MAX_PRODUCTS];  /* i + j (float) or s + t with 1-based slices (Ozaki) */
  precis_spec term_spec;  /* the spec each partial product runs as (a tf32, bf16 or int8 route) */
  precis_gemm_plan gemm;  /* its plan: layouts, padding, calls; alpha 1 and beta 0 */
  int64_t lt_calls;       /* cublasLtMatmul calls per evaluation: products * gemm.lt_calls */
  /* Term t of an operand starts t * stride elements into its slot's buffer (A_lt: the workload's B,
   * B_lt: its A): the slot's elements rounded up to a multiple of 256 bytes, so that every product's
   * A and B pointers are as aligned as the buffer (cudaMalloc: 256) and the heuristic offers its
   * full-alignment kernels on odd shapes too. */
  int64_t lt_a_term_stride, lt_b_term_stride;
} precis_split_plan;

/* true when the spec is a split that runs as several cuBLASLt GEMMs (float splits, Ozaki); then
 * *term is the spec of one partial product. false with the reason when it is such a split whose
 * other fields the splits do not take, and false with why[0] == '\0' when it is no such split. */
bool precis_split_term_spec(const precis_spec *spec, precis_spec *term, char *why, size_t len);

/* Plans one case (PRECIS_E_UNSUPPORTED with the reason when the spec is not such a split, its
 * product GEMM has no plan, or k is too large for exact int32 slice products). */
precis_status precis_split_plan_make(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                     bool b_batched, int lt_version, precis_split_plan *plan);

/* The calls as key/value pairs (split_* keys, then the product GEMM's plan as
 * precis_gemm_plan_describe gives it): the row details of a cuda run and `precis explain`. */
void precis_split_plan_describe(const precis_split_plan *plan, precis_kv_list *details);

/* Bytes one evaluation's product GEMMs touch: every term of both operands (at their strides) and D;
 * set against the L2 (precis_plan_describe_l2). */
long long precis_split_plan_operand_bytes(const precis_split_plan *plan);

/* Device bytes beyond the product GEMM's own buffers: the terms/slices of both operands, the
 * exponents and (Ozaki) the float64 level and sum buffers and the float64 output. */
long long precis_split_plan_device_bytes(const precis_split_plan *plan);

#endif
