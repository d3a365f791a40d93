/* The device twin of precis_quantize: see quantize.cuh. Every rule is the __host__ __device__ text
 * of src/numerics/format_bits.h, as in convert.cu. */
#include "kernels/quantize.cuh"

#include <stdint.h>

#include "numerics/format_bits.h"

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;

enum ElemKind { kE4M3, kE5M2, kE2M1, kInt };

struct Params {
  size_t rows, cols, group_rows, group_cols, scale_cols;
  int rule, emax_elem;
  ElemKind kind;
  float max_elem, qmin, qmax;
  bool nv, asym;
};

__device__ __forceinline__ unsigned warp_max_u32(unsigned v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    unsigned other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

__device__ __forceinline__ float warp_min_f32(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other < v ? other : v; /* the CPU's comparison, so that -0 and +0 resolve the same way */
  }
  return v;
}

__device__ __forceinline__ float warp_max_f32(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

/* Largest finite |x| of all n values, as a bit pattern, into *amax_bits (zeroed by the caller). */
__global__ void tensor_absmax_kernel(const float *__restrict__ x, size_t n, unsigned *__restrict__ amax_bits) {
  __shared__ unsigned warp_best[kWarps];
  unsigned m = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned a = precis_bits_finite_abs_bits(x[i]);
    m = a > m ? a : m;
  }
  m = warp_max_u32(m);
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < kWarps ? warp_best[threadIdx.x] : 0u;
    m = warp_max_u32(m);
    if (threadIdx.x == 0 && m != 0) atomicMax(amax_bits, m);
  }
}

__device__ __forceinline__ uint8_t encode(const Params &p, float x, float d, float zero, int *clipped) {
  switch (p.kind) {
  case kE4M3: return precis_bits_fp8_quantize(x, d, clipped);
  case kE5M2: return precis_bits_e5m2_quantize(x, d, clipped);
  case kE2M1: return precis_bits_e2m1_quantize(x, d, clipped);
  default: return (uint8_t)precis_bits_int_quantize(x, d, zero, p.qmin, p.qmax, clipped);
  }
}

/* One block per group (grid-stride over groups). */
__global__ void group_quantize_kernel(const float *__restrict__ x, Params p, const unsigned *__restrict__ tensor_amax,
                                      uint8_t *__restrict__ codes, float *__restrict__ scales,
                                      uint8_t *__restrict__ scale_codes, uint8_t *__restrict__ zero_points,
                                      float *__restrict__ tensor_scale_out, unsigned long long *__restrict__ clipped) {
  __shared__ unsigned warp_amax[kWarps];
  __shared__ float warp_lo[kWarps], warp_hi[kWarps];
  __shared__ float divisor_s, zero_s;
  float tensor_scale = 1.0f;
  if (p.nv) {
    float s2 = precis_div_rn(precis_f32_of_bits(*tensor_amax), 2688.0f);
    tensor_scale = s2 > 0.0f ? s2 : 1.0f;
    if (blockIdx.x == 0 && threadIdx.x == 0) *tensor_scale_out = tensor_scale;
  } else if (blockIdx.x == 0 && threadIdx.x == 0) {
    *tensor_scale_out = 1.0f;
  }
  size_t scale_rows = (p.rows + p.group_rows - 1) / p.group_rows;
  size_t groups = scale_rows * p.scale_cols;
  for (size_t g = blockIdx.x; g < groups; g += gridDim.x) {
    size_t gi = g / p.scale_cols, gj = g % p.scale_cols;
    size_t r0 = gi * p.group_rows, c0 = gj * p.group_cols;
    size_t h = p.rows - r0 < p.group_rows ? p.rows - r0 : p.group_rows;
    size_t w = p.cols - c0 < p.group_cols ? p.cols - c0 : p.group_cols;
    size_t count = h * w;
    unsigned m = 0;
    float lo = 0.0f, hi = 0.0f; /* the range always includes 0 */
    for (size_t t = threadIdx.x; t < count; t += blockDim.x) {
      float v = x[(r0 + t / w) * p.cols + c0 + t % w];
      unsigned a = precis_bits_finite_abs_bits(v);
      m = a > m ? a : m;
      float f = precis_bits_is_finite(v) ? v : 0.0f;
      lo = f < lo ? f : lo;
      hi = f > hi ? f : hi;
    }
    m = warp_max_u32(m);
    lo = warp_min_f32(lo);
    hi = warp_max_f32(hi);
    if (threadIdx.x % 32 == 0) {
      warp_amax[threadIdx.x / 32] = m;
      warp_lo[threadIdx.x / 32] = lo;
      warp_hi[threadIdx.x / 32] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (unsigned k = 1; k < kWarps; k++) {
        m = warp_amax[k] > m ? warp_amax[k] : m;
        lo = warp_lo[k] < lo ? warp_lo[k] : lo;
        hi = warp_hi[k] > hi ? warp_hi[k] : hi;
      }
      precis_bits_scale s = precis_bits_group_scale(p.rule, precis_f32_of_bits(m), lo, hi, p.max_elem, p.emax_elem,
                                                    tensor_scale);
      scales[g] = s.scale;
      if (scale_codes && (p.rule == PRECIS_SCALE_RULE_MX_FLOOR || p.rule == PRECIS_SCALE_RULE_MX_RCEIL || p.nv))
        scale_codes[g] = (uint8_t)s.code;
      if (p.asym) zero_points[g] = (uint8_t)s.zero;
      divisor_s = s.divisor;
      zero_s = s.zero;
    }
    __syncthreads();
    float d = divisor_s, zero = zero_s;
    unsigned long long local = 0;
    for (size_t t = threadIdx.x; t < count; t += blockDim.x) {
      size_t idx = (r0 + t / w) * p.cols + c0 + t % w;
      int c;
      codes[idx] = encode(p, x[idx], d, zero, &c);
      local += (unsigned long long)c;
    }
    local = warp_sum_u64(local);
    if (threadIdx.x % 32 == 0 && local != 0) atomicAdd(clipped, local);
    __syncthreads(); /* the shared scalars are rewritten by the next group */
  }
}

}  // namespace

extern "C" cudaError_t precis_cuda_quantize(const precis_quant_desc *desc, const float *x, size_t rows, size_t cols,
                                            uint8_t *codes, float *scales, uint8_t *scale_codes,
                                            uint8_t *zero_points, float *d_tensor_scale,
                                            unsigned long long *d_clipped, cudaStream_t stream) {
  precis_quant_layout l;
  if (!desc || precis_quant_layout_of(desc, rows, cols, &l) != PRECIS_OK) return cudaErrorInvalidValue;
  if (!x || !codes || !scales || !d_tensor_scale || !d_clipped || (l.has_zero_points && !zero_points))
    return cudaErrorInvalidValue;
  Params p;
  p.rows = rows, p.cols = cols, p.group_rows = l.group_rows, p.group_cols = l.group_cols, p.scale_cols = l.scale_cols;
  p.nv = desc->gran == PRECIS_QUANT_GRAN_NV;
  p.asym = l.has_zero_points;
  p.rule = desc->gran == PRECIS_QUANT_GRAN_MX         ? PRECIS_SCALE_RULE_MX_FLOOR
           : desc->gran == PRECIS_QUANT_GRAN_MX_RCEIL ? PRECIS_SCALE_RULE_MX_RCEIL
           : p.nv                                      ? PRECIS_SCALE_RULE_NV
           : p.asym                                    ? PRECIS_SCALE_RULE_ASYM
           : desc->ints == PRECIS_QUANT_FP8_UE8M0      ? PRECIS_SCALE_RULE_MX_RCEIL /* UE8M0: rounded up */
                                                       : PRECIS_SCALE_RULE_DIVIDE;
  p.emax_elem = desc->elem == PRECIS_FMT_E4M3 ? 8 : desc->elem == PRECIS_FMT_E5M2 ? 15 : 2;
  p.qmin = p.qmax = 0.0f;
  switch (desc->elem) {
  case PRECIS_FMT_E4M3: p.kind = kE4M3, p.max_elem = 448.0f; break;
  case PRECIS_FMT_E5M2: p.kind = kE5M2, p.max_elem = 57344.0f; break;
  case PRECIS_FMT_E2M1: p.kind = kE2M1, p.max_elem = 6.0f; break;
  case PRECIS_FMT_E2M3:
  case PRECIS_FMT_E3M2: return cudaErrorNotSupported; /* FP6: the host quantizer only (issue 33) */
  case PRECIS_FMT_S3:
  case PRECIS_FMT_S2: return cudaErrorNotSupported; /* W3A16 / W2A16: the host quantizer only (issue 39) */
  default: {
    float qmax = desc->elem == PRECIS_FMT_I8 ? 127.0f : desc->elem == PRECIS_FMT_S4 ? 7.0f : 15.0f;
    p.kind = kInt, p.qmax = qmax, p.qmin = -qmax, p.max_elem = qmax;
    if (desc->ints == PRECIS_QUANT_INT_SYMMETRIC_HALF) p.qmin = -qmax - 1.0f, p.max_elem = qmax + 0.5f;
    if (p.asym) p.qmin = 0.0f;
    break;
  }
  }
  unsigned *d_amax = nullptr;
  cudaError_t err = cudaSuccess;
  if (p.nv) {
    if ((err = cudaMallocAsync(&d_amax, sizeof *d_amax, stream)) != cudaSuccess) return err;
    if ((err = cudaMemsetAsync(d_amax, 0, sizeof *d_amax, stream)) != cudaSuccess) goto done;
    size_t n = rows * cols, blocks = (n + kThreads - 1) / kThreads;
    tensor_absmax_kernel<<<(unsigned)(blocks > 65535 ? 65535 : blocks), kThreads, 0, stream>>>(x, n, d_amax);
    if ((err = cudaGetLastError()) != cudaSuccess) goto done;
  }
  {
    size_t groups = l.scale_count;
    unsigned grid = (unsigned)(groups > 65535 * 8 ? 65535 * 8 : groups);
    group_quantize_kernel<<<grid, kThreads, 0, stream>>>(x, p, d_amax, codes, scales, scale_codes, zero_points,
                                                         d_tensor_scale, d_clipped);
    err = cudaGetLastError();
  }
done:
  if (d_amax) {
    cudaError_t free_err = cudaFreeAsync(d_amax, stream);
    if (err == cudaSuccess) err = free_err;
  }
  return err;
}
