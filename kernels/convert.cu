/* Device conversions, quantization and dequantization: the GPU twins of src/numerics/format.c and
 * src/numerics/quant.c. Every per-element rule is the __host__ __device__ code of src/numerics/format_bits.h, the
 * same text the CPU twins compile, so the results are bit-identical by construction (and
 * tests/gpu/test_convert.cu checks it). cuda_fp16.h / cuda_fp8.h intrinsics are deliberately not
 * used: their NaN results (one canonical NaN, sign dropped) differ from the documented rule.
 *
 * Grid-stride loops with 256-thread blocks; every launcher checks its arguments, returns the first
 * CUDA error, and ends with cudaGetLastError() after its launches. */
#include "kernels/convert.cuh"

#include <stdint.h>

#include "numerics/format_bits.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 65535; /* grid-stride loops cover the rest */
constexpr unsigned kTile = 32;       /* transposed quantization: 32x32 tiles, 32x8 threads */
constexpr unsigned kTileRows = 8;

unsigned blocks_for(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  return (unsigned)(blocks > kMaxBlocks ? kMaxBlocks : (blocks == 0 ? 1 : blocks));
}

__device__ __forceinline__ size_t global_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t global_stride() { return (size_t)gridDim.x * blockDim.x; }

/* ---- element-wise conversions ---- */
struct ToF16 {
  __device__ uint16_t operator()(float x) const { return precis_bits_f32_to_f16(x); }
};
struct ToBF16 {
  __device__ uint16_t operator()(float x) const { return precis_bits_f32_to_bf16(x); }
};
struct ToTF32 {
  __device__ float operator()(float x) const { return precis_bits_round_tf32(x); }
};
struct ToE4M3 {
  __device__ uint8_t operator()(float x) const { return precis_bits_f32_to_e4m3(x); }
};
struct ToE5M2 {
  int satfinite;
  __device__ uint8_t operator()(float x) const { return precis_bits_f32_to_e5m2(x, satfinite); }
};
struct FromF16 {
  __device__ float operator()(uint16_t h) const { return precis_bits_f16_to_f32(h); }
};
struct FromBF16 {
  __device__ float operator()(uint16_t h) const { return precis_bits_bf16_to_f32(h); }
};
struct FromE4M3 {
  __device__ float operator()(uint8_t v) const { return precis_bits_e4m3_to_f32(v); }
};

template <typename In, typename Out, typename Op>
__global__ void map_kernel(const In *__restrict__ in, Out *__restrict__ out, size_t n, Op op) {
  for (size_t i = global_index(); i < n; i += global_stride()) out[i] = op(in[i]);
}

template <typename In, typename Out, typename Op>
cudaError_t launch_map(const In *in, Out *out, size_t n, Op op, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!in || !out) return cudaErrorInvalidValue;
  map_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, out, n, op);
  return cudaGetLastError();
}

/* ---- reductions ---- */
__device__ __forceinline__ unsigned warp_max_u32(unsigned v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    unsigned other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

/* Max over the block of a non-negative float's bit pattern (which orders like the value). Every
 * thread of the block must call it; the result is valid in thread 0. blockDim.x % 32 == 0. */
__device__ unsigned block_max_u32(unsigned v) {
  __shared__ unsigned warp_max[kThreads / 32];
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_max_u32(v);
  __syncthreads(); /* the shared array may still be read by a previous call */
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  unsigned warps = blockDim.x / 32;
  v = threadIdx.x < warps ? warp_max[threadIdx.x] : 0u;
  if (warp == 0) v = warp_max_u32(v);
  return v;
}

/* Adds each warp's count to *counter (NULL: counting is off). */
__device__ __forceinline__ void count_clipped(unsigned long long local, unsigned long long *counter) {
  if (!counter) return;
  local = warp_sum_u64(local);
  if (threadIdx.x % 32 == 0 && local != 0) atomicAdd(counter, local);
}

__global__ void absmax_kernel(const float *__restrict__ x, size_t n, unsigned *__restrict__ amax_bits) {
  unsigned m = 0;
  for (size_t i = global_index(); i < n; i += global_stride()) {
    unsigned a = precis_bits_of_f32(precis_bits_finite_abs(x[i]));
    m = a > m ? a : m;
  }
  m = block_max_u32(m);
  if (threadIdx.x == 0 && m != 0) atomicMax(amax_bits, m);
}

__global__ void scale_kernel(const float *__restrict__ amax, float divisor, float *__restrict__ scale, size_t count) {
  for (size_t i = global_index(); i < count; i += global_stride()) scale[i] = precis_div_rn(amax[i], divisor);
}

/* One block per row (grid-stride over rows). */
__global__ void row_scales_kernel(const float *__restrict__ x, size_t rows, size_t cols, float *__restrict__ scales) {
  for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *row = x + r * cols;
    unsigned m = 0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      unsigned a = precis_bits_of_f32(precis_bits_finite_abs(row[j]));
      m = a > m ? a : m;
    }
    m = block_max_u32(m);
    if (threadIdx.x == 0) scales[r] = precis_div_rn(precis_f32_of_bits(m), 127.0f);
  }
}

/* 32 columns per block, 8 thread rows striding down the matrix, then a reduction over the 8. */
__global__ void col_scales_kernel(const float *__restrict__ x, size_t rows, size_t cols, float *__restrict__ scales) {
  __shared__ unsigned partial[kTileRows][kTile + 1];
  for (size_t j0 = (size_t)blockIdx.x * kTile; j0 < cols; j0 += (size_t)gridDim.x * kTile) {
    size_t j = j0 + threadIdx.x;
    unsigned m = 0;
    if (j < cols) {
      for (size_t r = threadIdx.y; r < rows; r += kTileRows) {
        unsigned a = precis_bits_of_f32(precis_bits_finite_abs(x[r * cols + j]));
        m = a > m ? a : m;
      }
    }
    partial[threadIdx.y][threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.y == 0) {
      for (unsigned k = 1; k < kTileRows; k++) m = partial[k][threadIdx.x] > m ? partial[k][threadIdx.x] : m;
      if (j < cols) scales[j] = precis_div_rn(precis_f32_of_bits(m), 127.0f);
    }
    __syncthreads();
  }
}

/* ---- quantization ---- */
struct Int8Quantizer {
  precis_cuda_scale_axis axis;
  const float *scales;
  __device__ int8_t operator()(float x, size_t i, size_t j, int *clipped) const {
    float s = axis == PRECIS_CUDA_SCALE_ROW ? scales[i] : (axis == PRECIS_CUDA_SCALE_COL ? scales[j] : scales[0]);
    return precis_bits_int8_quantize(x, s, clipped);
  }
};

struct Fp8Quantizer {
  const float *scale;
  __device__ uint8_t operator()(float x, size_t, size_t, int *clipped) const {
    return precis_bits_fp8_quantize(x, scale[0], clipped);
  }
};

/* Row-major [rows, cols] in, row-major [rows, ld_out] out. */
template <typename Out, typename Quant>
__global__ void quantize_kernel(const float *__restrict__ x, size_t rows, size_t cols, Quant quant, Out *__restrict__ q,
                                size_t ld_out, unsigned long long *clipped_count) {
  unsigned long long local = 0;
  size_t n = rows * cols;
  for (size_t idx = global_index(); idx < n; idx += global_stride()) {
    size_t i = idx / cols, j = idx % cols;
    int clipped;
    q[i * ld_out + j] = quant(x[idx], i, j, &clipped);
    local += (unsigned long long)clipped;
  }
  count_clipped(local, clipped_count);
}

/* Row-major [rows, cols] in, row-major [cols, ld_out] out (the transpose), through 32x32 tiles in
 * shared memory so that both the reads and the writes are coalesced. Block = 32 x 8 threads. */
template <typename Out, typename Quant>
__global__ void quantize_transpose_kernel(const float *__restrict__ x, size_t rows, size_t cols, Quant quant,
                                          Out *__restrict__ q, size_t ld_out, unsigned long long *clipped_count) {
  __shared__ Out tile[kTile][kTile + 1];
  unsigned long long local = 0;
  size_t tiles_c = (cols + kTile - 1) / kTile, tiles_r = (rows + kTile - 1) / kTile;
  for (size_t t = blockIdx.x; t < tiles_r * tiles_c; t += gridDim.x) {
    size_t i0 = (t / tiles_c) * kTile, j0 = (t % tiles_c) * kTile;
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      size_t i = i0 + k, j = j0 + threadIdx.x;
      if (i < rows && j < cols) {
        int clipped;
        tile[k][threadIdx.x] = quant(x[i * cols + j], i, j, &clipped);
        local += (unsigned long long)clipped;
      }
    }
    __syncthreads();
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      size_t out_row = j0 + k, out_col = i0 + threadIdx.x; /* out[j][i] = in[i][j] */
      if (out_row < cols && out_col < rows) q[out_row * ld_out + out_col] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
  count_clipped(local, clipped_count);
}

template <typename Out, typename Quant>
cudaError_t launch_quantize(const float *x, size_t rows, size_t cols, Quant quant, Out *q, size_t ld_out,
                            bool transpose_out, unsigned long long *d_clipped, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!x || !q) return cudaErrorInvalidValue;
  if (ld_out < (transpose_out ? rows : cols)) return cudaErrorInvalidValue;
  if (!transpose_out) {
    quantize_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, rows, cols, quant, q, ld_out, d_clipped);
  } else {
    size_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
    unsigned grid = (unsigned)(tiles > kMaxBlocks ? kMaxBlocks : tiles);
    quantize_transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(x, rows, cols, quant, q, ld_out, d_clipped);
  }
  return cudaGetLastError();
}

__global__ void dequantize_kernel(const int32_t *__restrict__ acc, size_t rows, size_t cols, size_t ld_acc,
                                  const float *__restrict__ row_scales, const float *__restrict__ col_scales,
                                  float *__restrict__ c, size_t ld_c) {
  size_t n = rows * cols;
  for (size_t idx = global_index(); idx < n; idx += global_stride()) {
    size_t i = idx / cols, j = idx % cols;
    c[i * ld_c + j] = precis_bits_dequantize(acc[i * ld_acc + j], row_scales[i], col_scales[j]);
  }
}

} // namespace

extern "C" {

cudaError_t precis_cuda_f32_to_f16(const float *in, uint16_t *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, ToF16{}, stream);
}

cudaError_t precis_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, ToBF16{}, stream);
}

cudaError_t precis_cuda_f32_to_tf32(const float *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, ToTF32{}, stream);
}

cudaError_t precis_cuda_f32_to_e4m3(const float *in, uint8_t *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, ToE4M3{}, stream);
}

cudaError_t precis_cuda_f32_to_e5m2(const float *in, uint8_t *out, size_t n, bool satfinite, cudaStream_t stream) {
  return launch_map(in, out, n, ToE5M2{satfinite ? 1 : 0}, stream);
}

cudaError_t precis_cuda_f16_to_f32(const uint16_t *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, FromF16{}, stream);
}

cudaError_t precis_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, FromBF16{}, stream);
}

cudaError_t precis_cuda_e4m3_to_f32(const uint8_t *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, FromE4M3{}, stream);
}

cudaError_t precis_cuda_absmax(const float *x, size_t n, float *d_amax, cudaStream_t stream) {
  if (!d_amax || (n > 0 && !x)) return cudaErrorInvalidValue;
  cudaError_t err = cudaMemsetAsync(d_amax, 0, sizeof *d_amax, stream); /* +0.0f: the max of nothing */
  if (err != cudaSuccess) return err;
  if (n == 0) return cudaSuccess;
  absmax_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, reinterpret_cast<unsigned *>(d_amax));
  return cudaGetLastError();
}

cudaError_t precis_cuda_scale_from_amax(const float *d_amax, float divisor, float *d_scale, size_t count,
                                        cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!d_amax || !d_scale) return cudaErrorInvalidValue;
  scale_kernel<<<blocks_for(count), kThreads, 0, stream>>>(d_amax, divisor, d_scale, count);
  return cudaGetLastError();
}

cudaError_t precis_cuda_int8_row_scales(const float *x, size_t rows, size_t cols, float *d_scales, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (!d_scales || (cols > 0 && !x)) return cudaErrorInvalidValue;
  unsigned grid = (unsigned)(rows > kMaxBlocks ? kMaxBlocks : rows);
  row_scales_kernel<<<grid, kThreads, 0, stream>>>(x, rows, cols, d_scales);
  return cudaGetLastError();
}

cudaError_t precis_cuda_int8_col_scales(const float *x, size_t rows, size_t cols, float *d_scales, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  if (!d_scales || (rows > 0 && !x)) return cudaErrorInvalidValue;
  size_t tiles = (cols + kTile - 1) / kTile;
  unsigned grid = (unsigned)(tiles > kMaxBlocks ? kMaxBlocks : tiles);
  col_scales_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(x, rows, cols, d_scales);
  return cudaGetLastError();
}

cudaError_t precis_cuda_int8_quantize(const float *x, size_t rows, size_t cols, precis_cuda_scale_axis axis,
                                      const float *d_scales, int8_t *q, size_t ld_out, bool transpose_out,
                                      unsigned long long *d_clipped, cudaStream_t stream) {
  if (axis != PRECIS_CUDA_SCALE_ROW && axis != PRECIS_CUDA_SCALE_COL && axis != PRECIS_CUDA_SCALE_TENSOR)
    return cudaErrorInvalidValue;
  if (rows > 0 && cols > 0 && !d_scales) return cudaErrorInvalidValue;
  return launch_quantize(x, rows, cols, Int8Quantizer{axis, d_scales}, q, ld_out, transpose_out, d_clipped, stream);
}

cudaError_t precis_cuda_fp8_quantize(const float *x, size_t rows, size_t cols, const float *d_scale, uint8_t *q,
                                     size_t ld_out, bool transpose_out, unsigned long long *d_clipped,
                                     cudaStream_t stream) {
  if (rows > 0 && cols > 0 && !d_scale) return cudaErrorInvalidValue;
  return launch_quantize(x, rows, cols, Fp8Quantizer{d_scale}, q, ld_out, transpose_out, d_clipped, stream);
}

cudaError_t precis_cuda_int8_dequantize(const int32_t *acc, size_t rows, size_t cols, size_t ld_acc,
                                        const float *d_row_scales, const float *d_col_scales, float *c, size_t ld_c,
                                        cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!acc || !d_row_scales || !d_col_scales || !c || ld_acc < cols || ld_c < cols) return cudaErrorInvalidValue;
  dequantize_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(acc, rows, cols, ld_acc, d_row_scales,
                                                                        d_col_scales, c, ld_c);
  return cudaGetLastError();
}

cudaError_t precis_cuda_widen_f16(const uint16_t *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, FromF16{}, stream);
}

cudaError_t precis_cuda_widen_bf16(const uint16_t *in, float *out, size_t n, cudaStream_t stream) {
  return launch_map(in, out, n, FromBF16{}, stream);
}

} /* extern "C" */
