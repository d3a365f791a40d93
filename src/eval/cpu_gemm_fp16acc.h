/* GEMM with every partial sum rounded to fp16 (recipe fp16acc16 on the cpu backend): the scalar
 * reference and vectorized kernels (AVX-512F, or AVX2 + F16C; threads over rows) that give
 * bit-identical results, chosen at run time by the CPU's features. */
#ifndef PRECIS_CPU_GEMM_FP16ACC_H
#define PRECIS_CPU_GEMM_FP16ACC_H

#include <stdbool.h>
#include <stddef.h>

/* C[rows,n] = A[rows,k] · B[k,n] (row-major, contiguous) where each output starts at +0 and, for
 * p = 0..k-1 in order, acc = fp16_rne(acc + a[i,p]·b[p,j]) with overflow to ±inf; a result of
 * zero is +0. A and B must hold fp16 values (what the recipe rounds its inputs to; ±inf and NaN
 * included): then every product is exact and the result does not depend on the path taken, but for
 * one thing: where two NaNs meet (two NaN operands, or a NaN product and a NaN sum), which one's
 * payload and sign the result carries depends on the path (x86 returns the first operand's, and the
 * compiler orders the operands); a NaN stays a NaN on every path. Datasets refuse NaN inputs.
 * `scratch` holds n doubles; only the scalar path uses it. */
void precis_gemm_fp16acc(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k, double *scratch);

/* The scalar reference (the cpu backend's original loop, in double). */
void precis_gemm_fp16acc_reference(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                                   double *scratch);

/* The paths, slowest first. The fastest the CPU has is taken (AVX-512F, else AVX2 + F16C, else the
 * reference); PRECIS_FP16ACC_PATH=scalar|avx2|avx512 in the environment caps it, so that tests and
 * benchmarks can compare them. */
typedef enum { PRECIS_FP16ACC_SCALAR, PRECIS_FP16ACC_AVX2, PRECIS_FP16ACC_AVX512 } precis_fp16acc_path;
precis_fp16acc_path precis_gemm_fp16acc_path(void);
const char *precis_fp16acc_path_name(precis_fp16acc_path path);

#endif
