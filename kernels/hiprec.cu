/* The split recipes' kernels (kernels/hiprec.cuh). Each mirrors a loop of src/numerics/split.c
 * with the same float operations in the same order (no contraction can change them: subtractions,
 * ldexp and trunc are exact or single roundings), so terms, slices and the Ozaki output are the
 * cpu backend's bit for bit. */
#include "kernels/hiprec.cuh"

#include <math.h>

#include "numerics/format_bits.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 65535; /* grid-stride loops cover the rest */
constexpr int kSliceBits = 7;        /* PRECIS_OZAKI_SLICE_BITS */

unsigned blocks_for(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return (unsigned)(blocks > kMaxBlocks ? kMaxBlocks : (blocks == 0 ? 1 : blocks));
}

__device__ __forceinline__ size_t global_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t global_stride() { return (size_t)gridDim.x * blockDim.x; }

__global__ void split_terms_kernel(const float *x, size_t n, bool bf16, int terms, size_t term_stride, void *out) {
  for (size_t i = global_index(); i < n; i += global_stride()) {
    float rest = x[i];
    for (int t = 0; t < terms; t++) {
      float term;
      if (bf16) {
        uint16_t bits = precis_bits_f32_to_bf16(rest);
        ((uint16_t *)out)[(size_t)t * term_stride + i] = bits;
        term = precis_bits_bf16_to_f32(bits);
      } else {
        term = precis_bits_round_tf32(rest);
        ((float *)out)[(size_t)t * term_stride + i] = term;
      }
      rest = __fsub_rn(rest, term); /* exact, as on the cpu */
    }
  }
}

__device__ int ozaki_exponent(double amax) {
  if (!(amax > 0)) return 0;
  int e;
  frexp(amax, &e);
  return e;
}

__global__ void row_exps_kernel(const double *a, size_t rows, size_t k, int *exps) {
  for (size_t r = global_index(); r < rows; r += global_stride()) {
    double amax = 0;
    for (size_t p = 0; p < k; p++) amax = fmax(amax, fabs(a[r * k + p]));
    exps[r] = ozaki_exponent(amax);
  }
}

__global__ void col_exps_kernel(const double *b, size_t mats, size_t k, size_t n, int *exps) {
  for (size_t c = global_index(); c < mats * n; c += global_stride()) {
    size_t g = c / n, j = c % n;
    double amax = 0;
    for (size_t p = 0; p < k; p++) amax = fmax(amax, fabs(b[(g * k + p) * n + j]));
    exps[c] = ozaki_exponent(amax);
  }
}

__global__ void slices_kernel(const double *x, size_t calls, size_t rows, size_t cols, size_t src_stride,
                              size_t dst_stride, size_t ld_out, bool transpose_out, bool per_row, const int *exps,
                              size_t exp_stride, int n_slices, int8_t *out, size_t slice_stride) {
  const size_t per_call = rows * cols;
  for (size_t e = global_index(); e < calls * per_call; e += global_stride()) {
    size_t c = e / per_call, r = e % per_call / cols, col = e % cols;
    double v = ldexp(x[c * src_stride + r * cols + col], -exps[c * exp_stride + (per_row ? r : col)]);
    size_t at = c * dst_stride + (transpose_out ? col * ld_out + r : r * ld_out + col);
    for (int t = 0; t < n_slices; t++) {
      v = ldexp(v, kSliceBits);
      double d = trunc(v);
      out[(size_t)t * slice_stride + at] = (int8_t)d;
      v = __dsub_rn(v, d);
    }
  }
}

__global__ void accumulate_kernel(const int32_t *d, size_t calls, size_t rows, size_t cols, size_t acc_stride,
                                  size_t ld_acc, size_t out_stride, size_t ld_out, double *level) {
  const size_t per_call = rows * cols;
  for (size_t e = global_index(); e < calls * per_call; e += global_stride()) {
    size_t c = e / per_call, i = e % per_call / cols, j = e % cols;
    level[c * out_stride + i * ld_out + j] += (double)d[c * acc_stride + i * ld_acc + j];
  }
}

__global__ void fold_level_kernel(double *level, double *sum, size_t n, int g) {
  for (size_t i = global_index(); i < n; i += global_stride()) {
    sum[i] = __dadd_rn(sum[i], ldexp(level[i], -kSliceBits * g));
    level[i] = 0;
  }
}

__global__ void finish_kernel(const double *sum, size_t rows, size_t n, size_t m, bool b_batched, const int *row_exps,
                              const int *col_exps, double *c) {
  for (size_t e = global_index(); e < rows * n; e += global_stride()) {
    size_t r = e / n, j = e % n;
    c[e] = ldexp(sum[e], row_exps[r] + col_exps[(b_batched ? r / m : 0) * n + j]);
  }
}

} // namespace

extern "C" cudaError_t precis_cuda_split_f32_terms(const float *x, size_t n, bool bf16, int terms, size_t term_stride,
                                                   void *out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (term_stride < n) return cudaErrorInvalidValue; /* terms would overlap */
  split_terms_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, bf16, terms, term_stride, out);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_row_exps(const double *a, size_t rows, size_t k, int *exps,
                                                  cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  row_exps_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(a, rows, k, exps);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_col_exps(const double *b, size_t mats, size_t k, size_t n, int *exps,
                                                  cudaStream_t stream) {
  if (mats * n == 0) return cudaSuccess;
  col_exps_kernel<<<blocks_for(mats * n), kThreads, 0, stream>>>(b, mats, k, n, exps);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_slices(const double *x, size_t calls, size_t rows, size_t cols,
                                                size_t src_stride, size_t dst_stride, size_t ld_out, bool transpose_out,
                                                bool per_row, const int *exps, size_t exp_stride, int n_slices,
                                                int8_t *out, size_t slice_stride, cudaStream_t stream) {
  if (calls * rows * cols == 0) return cudaSuccess;
  slices_kernel<<<blocks_for(calls * rows * cols), kThreads, 0, stream>>>(x, calls, rows, cols, src_stride, dst_stride,
                                                                          ld_out, transpose_out, per_row, exps,
                                                                          exp_stride, n_slices, out, slice_stride);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_accumulate(const int32_t *d, size_t calls, size_t rows, size_t cols,
                                                    size_t acc_stride, size_t ld_acc, size_t out_stride, size_t ld_out,
                                                    double *level, cudaStream_t stream) {
  if (calls * rows * cols == 0) return cudaSuccess;
  accumulate_kernel<<<blocks_for(calls * rows * cols), kThreads, 0, stream>>>(d, calls, rows, cols, acc_stride, ld_acc,
                                                                              out_stride, ld_out, level);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_fold_level(double *level, double *sum, size_t n, int g, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fold_level_kernel<<<blocks_for(n), kThreads, 0, stream>>>(level, sum, n, g);
  return cudaGetLastError();
}

extern "C" cudaError_t precis_cuda_ozaki_finish(const double *sum, size_t rows, size_t n, size_t m, bool b_batched,
                                                const int *row_exps, const int *col_exps, double *c,
                                                cudaStream_t stream) {
  if (rows * n == 0) return cudaSuccess;
  finish_kernel<<<blocks_for(rows * n), kThreads, 0, stream>>>(sum, rows, n, m, b_batched, row_exps, col_exps, c);
  return cudaGetLastError();
}
