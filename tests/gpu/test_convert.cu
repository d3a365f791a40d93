/* Every launcher of kernels/convert.cuh against its CPU twin in src/, bit for bit: the element-wise
 * conversions on a set of special values (signed zeros, subnormals, min normals, max finites,
 * rounding midpoints and their neighbours at every exponent, overflow thresholds, infinities, NaNs
 * with payloads) plus 2^25 pseudo-random inputs; every fp16/bf16/e4m3 code widened; absmax,
 * scales, int8 and fp8 quantization (row/column/tensor scales, transposed and padded outputs,
 * clipped counts) and dequantization. Exits 77 (skipped) only on a machine without a CUDA device
 * (tests/gpu/gpu_probe.h); any other device error fails. */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "numerics/format.h"
#include "numerics/quant.h"
}
#include "kernels/convert.cuh"
#include "gpu_probe.h"
#include "harness.h"

#define CUDA_OK(expr)                                                                                 \
  do {                                                                                                \
    cudaError_t err_ = (expr);                                                                        \
    CHECK_MSG(err_ == cudaSuccess, "%s: %s", #expr, cudaGetErrorString(err_));                         \
  } while (0)

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* A device buffer that frees itself. */
template <typename T> struct DeviceBuffer {
  T *ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) {
    cudaError_t err = cudaMalloc(&ptr, (n ? n : 1) * sizeof(T));
    if (err != cudaSuccess) {
      fprintf(stderr, "cudaMalloc(%zu bytes): %s\n", n * sizeof(T), cudaGetErrorString(err));
      ptr = nullptr;
    }
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  cudaError_t upload(const std::vector<T> &host) {
    if (!ptr) return cudaErrorMemoryAllocation;
    return cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t download(std::vector<T> &host) {
    if (!ptr) return cudaErrorMemoryAllocation;
    host.resize(count);
    return cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost);
  }
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* The special values: for every exponent and both signs, significands at and around the rounding
 * points of each format (fp16/tf32 round at bit 13, bf16 at 16, e4m3 at 20, e5m2 at 21), plus
 * named thresholds and NaNs with payloads. */
static std::vector<float> special_inputs(void) {
  std::vector<uint32_t> mantissas = {0u, 1u, 2u, 0x7fffffu, 0x7ffffeu, 0x400000u, 0x3fffffu, 0x400001u, 0x7fe000u};
  for (int r : {13, 16, 20, 21}) {
    uint32_t half = 1u << (r - 1), lsb = 1u << r;
    for (uint32_t base : {0u, lsb, 2 * lsb, 3 * lsb, 0x7fffffu & ~(lsb - 1)}) {
      for (uint32_t m : {base + half, base + half - 1, base + half + 1, base + lsb - 1, base + lsb}) mantissas.push_back(m & 0x7fffffu);
    }
  }
  std::vector<float> v;
  for (uint32_t sign = 0; sign < 2; sign++)
    for (uint32_t e = 0; e < 256; e++)
      for (uint32_t m : mantissas) v.push_back(float_of((sign << 31) | (e << 23) | m));
  static const float named[] = {65504.0f, 65519.996f, 65520.0f, 65536.0f, 448.0f, 464.0f, 465.0f, 480.0f,
                                57344.0f, 61439.996f, 61440.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1p-6f,
                                0x1p-9f,  0x1p-10f,   0x1p-16f, 0x1p-17f, 1.0f, 1.5f, 2.5f, 127.5f, 126.5f};
  for (float x : named) {
    v.push_back(x);
    v.push_back(-x);
  }
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7fa5a5a5u, 0x7fd00000u, 0x7f802000u})
    for (uint32_t sign : {0u, 0x80000000u}) v.push_back(float_of(nan_bits | sign));
  return v;
}

static const std::vector<float> &conversion_inputs(void) {
  static std::vector<float> v;
  if (v.empty()) {
    v = special_inputs();
    size_t specials = v.size();
    for (size_t i = 0; i < ((size_t)1 << 24); i++) v.push_back(float_of(next_u32())); /* all exponents */
    for (size_t i = 0; i < ((size_t)1 << 24); i++) { /* exponents 2^-30 .. 2^20: the fp16/fp8 ranges */
      uint32_t u = next_u32();
      uint32_t e = 97u + (u >> 23) % 51u;
      v.push_back(float_of((u & 0x807fffffu) | (e << 23)));
    }
    printf("conversion inputs: %zu special values + %zu random\n", specials, v.size() - specials);
  }
  return v;
}

template <typename T> static size_t count_mismatches(const char *what, const std::vector<T> &got, const std::vector<T> &want,
                                                     const std::vector<float> *inputs) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); i++) {
    if (memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if (bad++ < 10) {
      uint64_t g = 0, w = 0;
      memcpy(&g, &got[i], sizeof(T));
      memcpy(&w, &want[i], sizeof(T));
      fprintf(stderr, "%s[%zu]: input 0x%08x: gpu 0x%llx, cpu 0x%llx\n", what, i,
              inputs ? bits_of((*inputs)[i]) : (unsigned)i, (unsigned long long)g, (unsigned long long)w);
    }
  }
  if (bad) fprintf(stderr, "%s: %zu mismatches of %zu\n", what, bad, want.size());
  return bad;
}

TEST(narrowing_conversions_match_cpu) {
  const std::vector<float> &in = conversion_inputs();
  size_t n = in.size();
  DeviceBuffer<float> d_in(n), d_f32(n);
  DeviceBuffer<uint16_t> d_u16(n);
  DeviceBuffer<uint8_t> d_u8(n);
  CUDA_OK(d_in.upload(in));

  std::vector<uint16_t> got16, want16(n);
  CUDA_OK(precis_cuda_f32_to_f16(d_in.ptr, d_u16.ptr, n, 0));
  CUDA_OK(d_u16.download(got16));
  for (size_t i = 0; i < n; i++) want16[i] = precis_f32_to_f16_bits(in[i]);
  CHECK_EQ_INT(count_mismatches("f32->f16", got16, want16, &in), 0);

  CUDA_OK(precis_cuda_f32_to_bf16(d_in.ptr, d_u16.ptr, n, 0));
  CUDA_OK(d_u16.download(got16));
  for (size_t i = 0; i < n; i++) want16[i] = precis_f32_to_bf16_bits(in[i]);
  CHECK_EQ_INT(count_mismatches("f32->bf16", got16, want16, &in), 0);

  std::vector<float> gotf, wantf(n);
  CUDA_OK(precis_cuda_f32_to_tf32(d_in.ptr, d_f32.ptr, n, 0));
  CUDA_OK(d_f32.download(gotf));
  for (size_t i = 0; i < n; i++) wantf[i] = precis_round_tf32(in[i]);
  CHECK_EQ_INT(count_mismatches("f32->tf32", gotf, wantf, &in), 0);

  std::vector<uint8_t> got8, want8(n);
  CUDA_OK(precis_cuda_f32_to_e4m3(d_in.ptr, d_u8.ptr, n, 0));
  CUDA_OK(d_u8.download(got8));
  for (size_t i = 0; i < n; i++) want8[i] = precis_f32_to_e4m3_bits(in[i]);
  CHECK_EQ_INT(count_mismatches("f32->e4m3", got8, want8, &in), 0);

  for (int sat = 0; sat < 2; sat++) {
    CUDA_OK(precis_cuda_f32_to_e5m2(d_in.ptr, d_u8.ptr, n, sat != 0, 0));
    CUDA_OK(d_u8.download(got8));
    for (size_t i = 0; i < n; i++) want8[i] = precis_f32_to_e5m2_bits(in[i], sat != 0);
    CHECK_EQ_INT(count_mismatches(sat ? "f32->e5m2 satfinite" : "f32->e5m2", got8, want8, &in), 0);
  }
  /* n = 0 launches nothing and succeeds. */
  CUDA_OK(precis_cuda_f32_to_f16(d_in.ptr, d_u16.ptr, 0, 0));
}

TEST(widening_conversions_match_cpu) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t h = 0; h < 65536; h++) codes[h] = (uint16_t)h;
  DeviceBuffer<uint16_t> d_codes(65536);
  DeviceBuffer<float> d_out(65536);
  CUDA_OK(d_codes.upload(codes));
  std::vector<float> got, want(65536);

  for (size_t h = 0; h < 65536; h++) want[h] = precis_f16_bits_to_f32((uint16_t)h);
  CUDA_OK(precis_cuda_f16_to_f32(d_codes.ptr, d_out.ptr, 65536, 0));
  CUDA_OK(d_out.download(got));
  CHECK_EQ_INT(count_mismatches<float>("f16->f32", got, want, nullptr), 0);
  CUDA_OK(precis_cuda_widen_f16(d_codes.ptr, d_out.ptr, 65536, 0));
  CUDA_OK(d_out.download(got));
  CHECK_EQ_INT(count_mismatches<float>("widen f16", got, want, nullptr), 0);

  for (size_t h = 0; h < 65536; h++) want[h] = precis_bf16_bits_to_f32((uint16_t)h);
  CUDA_OK(precis_cuda_bf16_to_f32(d_codes.ptr, d_out.ptr, 65536, 0));
  CUDA_OK(d_out.download(got));
  CHECK_EQ_INT(count_mismatches<float>("bf16->f32", got, want, nullptr), 0);
  CUDA_OK(precis_cuda_widen_bf16(d_codes.ptr, d_out.ptr, 65536, 0));
  CUDA_OK(d_out.download(got));
  CHECK_EQ_INT(count_mismatches<float>("widen bf16", got, want, nullptr), 0);

  std::vector<uint8_t> codes8(256);
  for (int v = 0; v < 256; v++) codes8[v] = (uint8_t)v;
  DeviceBuffer<uint8_t> d_codes8(256);
  DeviceBuffer<float> d_out8(256);
  CUDA_OK(d_codes8.upload(codes8));
  CUDA_OK(precis_cuda_e4m3_to_f32(d_codes8.ptr, d_out8.ptr, 256, 0));
  std::vector<float> got8, want8(256);
  CUDA_OK(d_out8.download(got8));
  for (int v = 0; v < 256; v++) want8[v] = precis_e4m3_bits_to_f32((uint8_t)v);
  CHECK_EQ_INT(count_mismatches<float>("e4m3->f32", got8, want8, nullptr), 0);
}

/* Values for the quantization tests: mostly ordinary magnitudes, with ties, zeros and non-finite
 * values sprinkled in. */
static std::vector<float> matrix_values(size_t n, uint32_t seed) {
  rng = 0x9e3779b97f4a7c15ull ^ seed;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) {
    uint32_t u = next_u32();
    switch (u % 64) {
    case 0: v[i] = INFINITY; break;
    case 1: v[i] = -INFINITY; break;
    case 2: v[i] = float_of(0x7fc00000u | (u & 0x803fffffu)); break;
    case 3: v[i] = 0.0f; break;
    case 4: v[i] = -0.0f; break;
    case 5: v[i] = (float)((int)(u >> 8) % 512 - 256) + 0.5f; break; /* ties at scale 1 or 2^k */
    case 6: v[i] = float_of((u & 0x80000000u) | (1u + (u >> 9) % 0x7fffffu)); break; /* subnormal */
    default: v[i] = ((float)(u >> 8) * 0x1p-24f - 0.5f) * 8.0f; break;
    }
  }
  return v;
}

TEST(absmax_and_scales_match_cpu) {
  const size_t sizes[] = {1, 31, 255, 256, 257, 4099, 1000003, 20000000};
  for (size_t n : sizes) {
    std::vector<float> x = matrix_values(n, (uint32_t)n);
    DeviceBuffer<float> d_x(n), d_amax(1);
    CUDA_OK(d_x.upload(x));
    std::vector<float> garbage = {123.0f};
    CUDA_OK(d_amax.upload(garbage)); /* must be overwritten, not accumulated */
    CUDA_OK(precis_cuda_absmax(d_x.ptr, n, d_amax.ptr, 0));
    std::vector<float> got;
    CUDA_OK(d_amax.download(got));
    float want = precis_absmax(x.data(), n);
    CHECK_MSG(bits_of(got[0]) == bits_of(want), "absmax n=%zu: gpu %a, cpu %a", n, (double)got[0], (double)want);
  }
  {
    std::vector<float> only_nonfinite = {NAN, INFINITY, -INFINITY, -0.0f};
    DeviceBuffer<float> d_x(4), d_amax(1);
    CUDA_OK(d_x.upload(only_nonfinite));
    CUDA_OK(precis_cuda_absmax(d_x.ptr, 4, d_amax.ptr, 0));
    std::vector<float> got;
    CUDA_OK(d_amax.download(got));
    CHECK(bits_of(got[0]) == 0u);
    CUDA_OK(precis_cuda_absmax(d_x.ptr, 0, d_amax.ptr, 0)); /* n = 0: amax = 0 */
    CUDA_OK(d_amax.download(got));
    CHECK(bits_of(got[0]) == 0u);
  }
  /* scale_from_amax over awkward amax values, for both divisors. */
  /* amax is finite by construction (absmax and calibration ignore non-finite values); a NaN amax
   * is left out because the NaN a division returns differs between x86 and the GPU. */
  std::vector<float> amax;
  for (float a : special_inputs())
    if (!isnan(a)) amax.push_back(fabsf(a));
  for (int i = 0; i < 100000; i++) amax.push_back(float_of(next_u32() & 0x7f7fffffu));
  size_t n = amax.size();
  DeviceBuffer<float> d_amax(n), d_scale(n);
  CUDA_OK(d_amax.upload(amax));
  std::vector<float> got, want(n);
  CUDA_OK(precis_cuda_scale_from_amax(d_amax.ptr, 127.0f, d_scale.ptr, n, 0));
  CUDA_OK(d_scale.download(got));
  for (size_t i = 0; i < n; i++) want[i] = precis_int8_scale_from_amax(amax[i]);
  CHECK_EQ_INT(count_mismatches("scale /127", got, want, &amax), 0);
  CUDA_OK(precis_cuda_scale_from_amax(d_amax.ptr, 448.0f, d_scale.ptr, n, 0));
  CUDA_OK(d_scale.download(got));
  for (size_t i = 0; i < n; i++) want[i] = precis_fp8_scale_from_amax(amax[i]);
  CHECK_EQ_INT(count_mismatches("scale /448", got, want, &amax), 0);
}

struct Shape {
  size_t rows, cols;
};
static const Shape shapes[] = {{1, 1}, {3, 5}, {37, 1000}, {1000, 37}, {257, 33}, {64, 64}, {4100, 4100}};

TEST(row_and_col_scales_match_cpu) {
  for (const Shape &s : shapes) {
    std::vector<float> x = matrix_values(s.rows * s.cols, (uint32_t)(s.rows * 131 + s.cols));
    if (s.rows > 2) /* an all-zero row */
      for (size_t j = 0; j < s.cols; j++) x[1 * s.cols + j] = 0.0f;
    DeviceBuffer<float> d_x(x.size()), d_rs(s.rows), d_cs(s.cols);
    CUDA_OK(d_x.upload(x));
    std::vector<float> got, want_r(s.rows), want_c(s.cols);
    precis_int8_row_scales(x.data(), s.rows, s.cols, want_r.data());
    precis_int8_col_scales(x.data(), s.rows, s.cols, want_c.data());
    CUDA_OK(precis_cuda_int8_row_scales(d_x.ptr, s.rows, s.cols, d_rs.ptr, 0));
    CUDA_OK(d_rs.download(got));
    CHECK_MSG(count_mismatches<float>("row scales", got, want_r, nullptr) == 0, "%zux%zu", s.rows, s.cols);
    CUDA_OK(precis_cuda_int8_col_scales(d_x.ptr, s.rows, s.cols, d_cs.ptr, 0));
    CUDA_OK(d_cs.download(got));
    CHECK_MSG(count_mismatches<float>("col scales", got, want_c, nullptr) == 0, "%zux%zu", s.rows, s.cols);
  }
}

/* Scales that make the quantizer clip (half the absmax scale), with a zero scale and a power of two
 * (exact ties) mixed in. */
static std::vector<float> test_scales(const std::vector<float> &amax_scales) {
  std::vector<float> s(amax_scales);
  for (size_t i = 0; i < s.size(); i++) {
    if (i % 7 == 3) s[i] = 0.0f;
    else if (i % 7 == 5) s[i] = 1.0f;
    else if (i % 2) s[i] *= 0.5f;
  }
  return s;
}

static const uint8_t kSentinel = 0xa5;

/* Checks a (possibly transposed, padded) GPU output against the compact CPU result, and that the
 * padding still holds the sentinel. */
template <typename T>
static size_t compare_layout(const char *what, const std::vector<T> &gpu, const std::vector<T> &cpu, size_t rows,
                             size_t cols, size_t ld, bool transposed) {
  size_t bad = 0, out_rows = transposed ? cols : rows, out_cols = transposed ? rows : cols;
  for (size_t r = 0; r < out_rows; r++) {
    for (size_t c = 0; c < ld; c++) {
      T g = gpu[r * ld + c];
      bool ok;
      if (c < out_cols) {
        T w = transposed ? cpu[c * cols + r] : cpu[r * cols + c];
        ok = memcmp(&g, &w, sizeof(T)) == 0;
      } else {
        uint8_t b;
        memcpy(&b, &g, 1);
        ok = b == kSentinel;
      }
      if (!ok && bad++ < 10) fprintf(stderr, "%s: out[%zu][%zu] differs\n", what, r, c);
    }
  }
  return bad;
}

TEST(int8_quantize_matches_cpu) {
  for (const Shape &s : shapes) {
    size_t n = s.rows * s.cols;
    std::vector<float> x = matrix_values(n, (uint32_t)(s.rows * 7 + s.cols));
    std::vector<float> rs(s.rows), cs(s.cols);
    precis_int8_row_scales(x.data(), s.rows, s.cols, rs.data());
    precis_int8_col_scales(x.data(), s.rows, s.cols, cs.data());
    rs = test_scales(rs);
    cs = test_scales(cs);
    std::vector<float> ts = {rs.size() > 2 ? rs[2] : rs[0]};
    DeviceBuffer<float> d_x(n), d_rs(s.rows), d_cs(s.cols), d_ts(1);
    CUDA_OK(d_x.upload(x));
    CUDA_OK(d_rs.upload(rs));
    CUDA_OK(d_cs.upload(cs));
    CUDA_OK(d_ts.upload(ts));
    for (int axis = 0; axis < 3; axis++) {
      std::vector<int8_t> want(n);
      size_t want_clipped = axis == 0   ? precis_int8_quantize_rows(x.data(), s.rows, s.cols, rs.data(), want.data())
                            : axis == 1 ? precis_int8_quantize_cols(x.data(), s.rows, s.cols, cs.data(), want.data())
                                        : precis_int8_quantize_tensor(x.data(), n, ts[0], want.data());
      const float *d_scales = axis == 0 ? d_rs.ptr : axis == 1 ? d_cs.ptr : d_ts.ptr;
      for (int transpose = 0; transpose < 2; transpose++) {
        for (size_t pad : {(size_t)0, (size_t)5}) {
          size_t ld = (transpose ? s.rows : s.cols) + pad;
          size_t out_n = (transpose ? s.cols : s.rows) * ld;
          DeviceBuffer<int8_t> d_q(out_n);
          DeviceBuffer<unsigned long long> d_clipped(1);
          CUDA_OK(cudaMemset(d_q.ptr, kSentinel, out_n));
          CUDA_OK(cudaMemset(d_clipped.ptr, 0, sizeof(unsigned long long)));
          CUDA_OK(precis_cuda_int8_quantize(d_x.ptr, s.rows, s.cols, (precis_cuda_scale_axis)axis, d_scales, d_q.ptr, ld,
                                            transpose != 0, d_clipped.ptr, 0));
          std::vector<int8_t> got;
          std::vector<unsigned long long> clipped;
          CUDA_OK(d_q.download(got));
          CUDA_OK(d_clipped.download(clipped));
          size_t bad = compare_layout("int8 quantize", got, want, s.rows, s.cols, ld, transpose != 0);
          CHECK_MSG(bad == 0, "%zux%zu axis %d transpose %d pad %zu: %zu mismatches", s.rows, s.cols, axis, transpose,
                    pad, bad);
          CHECK_MSG(clipped[0] == want_clipped, "%zux%zu axis %d transpose %d: clipped %llu, cpu %zu", s.rows, s.cols,
                    axis, transpose, clipped[0], want_clipped);
        }
      }
    }
  }
  /* The counter is optional; a too-small ld_out is refused. */
  std::vector<float> x = {1.0f, 2.0f};
  std::vector<float> sc = {1.0f};
  DeviceBuffer<float> d_x(2), d_s(1);
  DeviceBuffer<int8_t> d_q(2);
  CUDA_OK(d_x.upload(x));
  CUDA_OK(d_s.upload(sc));
  CUDA_OK(precis_cuda_int8_quantize(d_x.ptr, 1, 2, PRECIS_CUDA_SCALE_TENSOR, d_s.ptr, d_q.ptr, 2, false, nullptr, 0));
  CHECK(precis_cuda_int8_quantize(d_x.ptr, 1, 2, PRECIS_CUDA_SCALE_TENSOR, d_s.ptr, d_q.ptr, 1, false, nullptr, 0) ==
        cudaErrorInvalidValue);
}

TEST(fp8_quantize_matches_cpu) {
  for (const Shape &s : shapes) {
    size_t n = s.rows * s.cols;
    std::vector<float> x = matrix_values(n, (uint32_t)(s.rows * 3 + s.cols * 5));
    float amax = precis_absmax(x.data(), n);
    for (float scale : {precis_fp8_scale_from_amax(amax), precis_fp8_scale_from_amax(amax) * 0.25f, 0.0f, 1.0f}) {
      std::vector<uint8_t> want(n);
      size_t want_clipped = precis_fp8_quantize_tensor(x.data(), n, scale, want.data());
      std::vector<float> sc = {scale};
      DeviceBuffer<float> d_x(n), d_s(1);
      CUDA_OK(d_x.upload(x));
      CUDA_OK(d_s.upload(sc));
      for (int transpose = 0; transpose < 2; transpose++) {
        for (size_t pad : {(size_t)0, (size_t)3}) {
          size_t ld = (transpose ? s.rows : s.cols) + pad;
          size_t out_n = (transpose ? s.cols : s.rows) * ld;
          DeviceBuffer<uint8_t> d_q(out_n);
          DeviceBuffer<unsigned long long> d_clipped(1);
          CUDA_OK(cudaMemset(d_q.ptr, kSentinel, out_n));
          CUDA_OK(cudaMemset(d_clipped.ptr, 0, sizeof(unsigned long long)));
          CUDA_OK(precis_cuda_fp8_quantize(d_x.ptr, s.rows, s.cols, d_s.ptr, d_q.ptr, ld, transpose != 0, d_clipped.ptr, 0));
          std::vector<uint8_t> got;
          std::vector<unsigned long long> clipped;
          CUDA_OK(d_q.download(got));
          CUDA_OK(d_clipped.download(clipped));
          size_t bad = compare_layout("fp8 quantize", got, want, s.rows, s.cols, ld, transpose != 0);
          CHECK_MSG(bad == 0, "%zux%zu scale %g transpose %d pad %zu: %zu mismatches", s.rows, s.cols, (double)scale,
                    transpose, pad, bad);
          CHECK_MSG(clipped[0] == want_clipped, "%zux%zu scale %g: clipped %llu, cpu %zu", s.rows, s.cols,
                    (double)scale, clipped[0], want_clipped);
        }
      }
    }
  }
}

TEST(dequantize_matches_cpu) {
  for (const Shape &s : shapes) {
    size_t n = s.rows * s.cols;
    std::vector<int32_t> acc(n);
    for (size_t i = 0; i < n; i++) {
      uint32_t u = next_u32();
      acc[i] = u % 17 == 0 ? INT32_MIN : u % 17 == 1 ? INT32_MAX : u % 17 == 2 ? 0 : (int32_t)(u >> (u % 24));
      if (u & 1) acc[i] = acc[i] == INT32_MIN ? INT32_MIN : -acc[i];
    }
    std::vector<float> rs(s.rows), cs(s.cols);
    for (float &v : rs) v = (float)next_u32() * 0x1p-32f * 0.01f;
    for (float &v : cs) v = (float)next_u32() * 0x1p-32f * 0.02f;
    rs[0] = 0.0f;
    if (s.cols > 1) cs[1] = 0x1p-140f; /* subnormal scale */
    std::vector<float> want(n);
    precis_int8_dequantize(acc.data(), s.rows, s.cols, rs.data(), cs.data(), want.data());
    for (size_t pad_acc : {(size_t)0, (size_t)4}) {
      for (size_t pad_c : {(size_t)0, (size_t)3}) {
        size_t ld_acc = s.cols + pad_acc, ld_c = s.cols + pad_c;
        std::vector<int32_t> acc_padded(s.rows * ld_acc, 0x5a5a5a5a);
        for (size_t i = 0; i < s.rows; i++)
          for (size_t j = 0; j < s.cols; j++) acc_padded[i * ld_acc + j] = acc[i * s.cols + j];
        DeviceBuffer<int32_t> d_acc(acc_padded.size());
        DeviceBuffer<float> d_rs(s.rows), d_cs(s.cols), d_c(s.rows * ld_c);
        CUDA_OK(d_acc.upload(acc_padded));
        CUDA_OK(d_rs.upload(rs));
        CUDA_OK(d_cs.upload(cs));
        CUDA_OK(cudaMemset(d_c.ptr, kSentinel, s.rows * ld_c * sizeof(float)));
        CUDA_OK(precis_cuda_int8_dequantize(d_acc.ptr, s.rows, s.cols, ld_acc, d_rs.ptr, d_cs.ptr, d_c.ptr, ld_c, 0));
        std::vector<float> got;
        CUDA_OK(d_c.download(got));
        size_t bad = compare_layout("dequantize", got, want, s.rows, s.cols, ld_c, false);
        CHECK_MSG(bad == 0, "%zux%zu ld_acc %zu ld_c %zu: %zu mismatches", s.rows, s.cols, ld_acc, ld_c, bad);
      }
    }
  }
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  static const harness_test tests[] = {T(narrowing_conversions_match_cpu), T(widening_conversions_match_cpu),
                                       T(absmax_and_scales_match_cpu),     T(row_and_col_scales_match_cpu),
                                       T(int8_quantize_matches_cpu),      T(fp8_quantize_matches_cpu),
                                       T(dequantize_matches_cpu)};
  return harness_run(tests, sizeof tests / sizeof tests[0]);
}
