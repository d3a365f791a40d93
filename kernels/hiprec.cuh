/* Device kernels of the split recipes (issue 19, src/eval/split_plan.h): the operand splitting rules
 * of src/numerics/split.c on the device (the same operations, so the same terms and slices) and the
 * exact float64 combination of the Ozaki slice products. Launchers are asynchronous on `stream` and
 * callable from C. */
#ifndef PRECIS_KERNELS_HIPREC_CUH
#define PRECIS_KERNELS_HIPREC_CUH

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Float split of n contiguous values: term t of x[i] at out + t*term_stride + i (elements,
 * term_stride >= n: the split plan's 256-byte strides), as float (tf32 terms) or as bf16 bits
 * (uint16_t); t0 = RNE(x), t1 = RNE(x - t0), t2 = RNE(x - t0 - t1). */
cudaError_t precis_cuda_split_f32_terms(const float *x, size_t n, bool bf16, int terms, size_t term_stride, void *out,
                                        cudaStream_t stream);

/* Ozaki exponents: e with amax < 2^e (frexp; 0 for an all-zero row/column) of each row of a
 * row-major [rows, k], and of each column of `mats` row-major [k, n] matrices (exps[g*n + j]). */
cudaError_t precis_cuda_ozaki_row_exps(const double *a, size_t rows, size_t k, int *exps, cudaStream_t stream);
cudaError_t precis_cuda_ozaki_col_exps(const double *b, size_t mats, size_t k, size_t n, int *exps, cudaStream_t stream);

/* Ozaki slices of x through a plan write (src/eval/gemm_plan.h precis_plan_write): for call c and
 * element (r, col) of a row-major [rows, cols] at x + c*src_stride, the value scaled by 2^-e (e =
 * exps[c*exp_stride + (per_row ? r : col)]) is cut into n_slices base-2^7 digits by truncation;
 * digit t goes to out + t*slice_stride + c*dst_stride + (transpose_out ? col*ld_out + r : r*ld_out + col). */
cudaError_t precis_cuda_ozaki_slices(const double *x, size_t calls, size_t rows, size_t cols, size_t src_stride,
                                     size_t dst_stride, size_t ld_out, bool transpose_out, bool per_row,
                                     const int *exps, size_t exp_stride, int n_slices, int8_t *out,
                                     size_t slice_stride, cudaStream_t stream);

/* level[c*out_stride + i*ld_out + j] += d[c*acc_stride + i*ld_acc + j] (exact: integers below 2^53),
 * the mapping of the int8 plan's dequant step. */
cudaError_t precis_cuda_ozaki_accumulate(const int32_t *d, size_t calls, size_t rows, size_t cols, size_t acc_stride,
                                         size_t ld_acc, size_t out_stride, size_t ld_out, double *level,
                                         cudaStream_t stream);
/* A complete level g: sum[i] += ldexp(level[i], -7g), level[i] = 0. */
cudaError_t precis_cuda_ozaki_fold_level(double *level, double *sum, size_t n, int g, cudaStream_t stream);
/* c[r*n + j] = ldexp(sum[r*n + j], row_exps[r] + col_exps[(b_batched ? r / m : 0)*n + j]) for rows
 * r of the whole batch. */
cudaError_t precis_cuda_ozaki_finish(const double *sum, size_t rows, size_t n, size_t m, bool b_batched,
                                     const int *row_exps, const int *col_exps, double *c, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
