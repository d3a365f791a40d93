/* GEMM in the tensor cores' fp32-accumulating MMA arithmetic (fp16/bf16/tf32 recipes on the cpu
 * backend under a --target, DESIGN §19, docs/formats.md "Target architectures"): the scalar
 * reference, two AVX2 kernels and an AVX-512 one (threads over columns) that give bit-identical
 * results, chosen at run time by the CPU's features and the operands. */
#ifndef PRECIS_CPU_GEMM_MMA_H
#define PRECIS_CPU_GEMM_MMA_H

#include <stddef.h>

/* One fused dot-add of the MMA (MMA-Sim, Xie et al., arXiv 2511.10909, `nv_fused_dot_add`):
 * `block` products a·b and the fp32 accumulator d; each term's exponent is the operands' exponent
 * sum ea + eb (the product's significand, in [1, 4), is not normalised first; a subnormal operand
 * counts at its format's smallest normal exponent `emin`) and d's own (at least -126); every term
 * is truncated toward zero to a multiple of 2^(emax - fraction_bits), emax the largest of those
 * exponents, the truncated terms are summed exactly, and the sum is written to d as an fp32
 * rounded toward zero (subnormals on fp32's 2^-149 grid). A k that is not a multiple of `block`
 * ends with a shorter dot-add (the hardware pads with zeros: the same result). A sum that is not
 * finite (inf or NaN operands) is d's fp64 sum, as in MMA-Sim. */
typedef struct precis_mma_shape {
  int fraction_bits; /* 24 (sm_80, sm_89) or 25 (sm_90, sm_100, sm_120); 1..30 */
  int block;         /* products per fused dot-add: 4, 8 or 16; 1..64 */
  int emin_a, emin_b; /* smallest normal exponent of A's and B's format: fp16 -14, bf16 and tf32 -126 */
} precis_mma_shape;

/* C[rows,n] = A[rows,k] · B[k,n] (row-major, contiguous), each output's chain starting at d = +0 and
 * running over k in order, block by block. A and B hold values of their formats (a product is exact
 * in double). */
void precis_gemm_mma(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                     const precis_mma_shape *shape);

/* The scalar reference (one output at a time, in double). */
void precis_gemm_mma_reference(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                               const precis_mma_shape *shape);

/* The paths, slowest first: the scalar reference; the AVX2 kernel in doubles (any finite operands
 * whose partial sums cannot overflow fp32); the AVX2+FMA kernel in fp32 and int32 lanes (operands
 * of at most 12 significant bits, fp16/bf16/tf32 values, within the exponent spread that keeps its
 * arithmetic exact: cpu_gemm_mma.c); the same fp32 kernel in AVX-512 (F, BW: 32 columns a tile, the
 * roundings embedded), the same conditions, for n > 16 (narrower: the AVX2 one). Each call takes
 * the fastest whose conditions hold, up to what the CPU has (CPUID, asked once);
 * PRECIS_MMA_PATH=scalar, =avx2 or =avx2-f32 in the environment caps it, so that tests and
 * benchmarks can compare them. */
typedef enum {
  PRECIS_MMA_PATH_SCALAR,
  PRECIS_MMA_PATH_AVX2,
  PRECIS_MMA_PATH_AVX2_F32,
  PRECIS_MMA_PATH_AVX512_F32
} precis_mma_path;
precis_mma_path precis_gemm_mma_path(void);
const char *precis_mma_path_name(precis_mma_path path);

/* precis_gemm_mma with the path capped at `cap` (the environment is not read); returns the path
 * that ran. */
precis_mma_path precis_gemm_mma_capped(const float *a, const float *b, float *c, size_t rows, size_t n, size_t k,
                                       const precis_mma_shape *shape, precis_mma_path cap);

#endif
