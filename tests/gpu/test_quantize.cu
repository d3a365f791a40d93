/* The device quantizer (kernels/quantize.cuh) against its CPU twin precis_quantize, bit for bit:
 * codes, scales, E8M0/E4M3 scale codes, zero points, the nv tensor scale and the clipped count, for
 * every element format x granularity x operand side that tests/venv/test_formats_oracle.py checks,
 * on shapes whose edge groups are cut, with outlier columns, zeros, an all-zero row, a
 * subnormal-range row and inf/NaN. Exits 77 (skipped) without a usable CUDA device. */
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <vector>

extern "C" {
#include "numerics/format.h"
#include "numerics/quantize.h"
}
#include "harness.h"
#include "kernels/quantize.cuh"

#define CUDA_OK(expr)                                                                                 \
  do {                                                                                                \
    cudaError_t err_ = (expr);                                                                        \
    CHECK_MSG(err_ == cudaSuccess, "%s: %s", #expr, cudaGetErrorString(err_));                         \
  } while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float next_normalish(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((float)((rng >> 40) & 0xffffff) * 0x1p-24f - 0.5f) * 4.0f;
}

static std::vector<float> make_input(size_t rows, size_t cols) {
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); i++) x[i] = next_normalish() * ((i % cols) % 17 == 5 ? 60.0f : 1.0f);
  for (size_t j = 0; j < cols; j++) x[(rows / 3) * cols + j] = 0.0f;
  for (size_t j = 0; j < cols; j++) x[(rows / 2) * cols + j] *= 1e-40f;
  x[1] = INFINITY;
  x[cols + 2] = -INFINITY;
  x[2 * cols + 3] = NAN;
  x[(rows - 1) * cols] = 3e38f;
  x[(rows - 1) * cols + 1] = -3e38f;
  return x;
}

struct Case {
  precis_format_id elem;
  precis_quant_gran gran;
  int group, group_cols;
  precis_quant_int ints;
};

template <typename T> static T *device_alloc(size_t n) {
  T *p = nullptr;
  if (cudaMalloc(&p, (n ? n : 1) * sizeof(T)) != cudaSuccess) return nullptr;
  return p;
}

static void compare_one(const Case &c, precis_operand_side side, size_t rows, size_t cols) {
  precis_quant_desc d = {c.elem, c.gran, c.group, c.group_cols, c.ints, side};
  precis_quant_layout l;
  if (precis_quant_layout_of(&d, rows, cols, &l) != PRECIS_OK) {
    CHECK_MSG(false, "layout: %s", precis_last_error());
    return;
  }
  std::vector<float> x = make_input(rows, cols);
  std::vector<uint8_t> codes(rows * cols), scale_codes(l.scale_count, 0), zeros(l.scale_count, 0);
  std::vector<float> scales(l.scale_count);
  precis_quant_tensor q = {codes.data(), scales.data(), scale_codes.data(), zeros.data(), 0.0f, 0};
  CHECK(precis_quantize(&d, x.data(), rows, cols, &q) == PRECIS_OK);

  float *d_x = device_alloc<float>(x.size()), *d_scales = device_alloc<float>(l.scale_count);
  float *d_tensor_scale = device_alloc<float>(1);
  uint8_t *d_codes = device_alloc<uint8_t>(codes.size()), *d_scale_codes = device_alloc<uint8_t>(l.scale_count);
  uint8_t *d_zeros = device_alloc<uint8_t>(l.scale_count);
  unsigned long long *d_clipped = device_alloc<unsigned long long>(1);
  std::vector<uint8_t> got_codes(codes.size()), got_scale_codes(l.scale_count, 0), got_zeros(l.scale_count, 0);
  std::vector<float> got_scales(l.scale_count);
  float got_tensor_scale = 0.0f;
  unsigned long long got_clipped = 0;
  bool ok = d_x && d_scales && d_tensor_scale && d_codes && d_scale_codes && d_zeros && d_clipped;
  CHECK_MSG(ok, "cudaMalloc failed");
  if (ok) {
    CUDA_OK(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_clipped, 0, sizeof *d_clipped));
    CUDA_OK(cudaMemset(d_scale_codes, 0, l.scale_count));
    CUDA_OK(cudaMemset(d_zeros, 0, l.scale_count));
    CUDA_OK(precis_cuda_quantize(&d, d_x, rows, cols, d_codes, d_scales, d_scale_codes, d_zeros, d_tensor_scale,
                                 d_clipped, 0));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got_codes.data(), d_codes, codes.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_scales.data(), d_scales, l.scale_count * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_scale_codes.data(), d_scale_codes, l.scale_count, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_zeros.data(), d_zeros, l.scale_count, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&got_tensor_scale, d_tensor_scale, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&got_clipped, d_clipped, sizeof got_clipped, cudaMemcpyDeviceToHost));
    size_t bad_codes = 0, bad_scales = 0;
    for (size_t i = 0; i < codes.size(); i++) bad_codes += got_codes[i] != codes[i];
    for (size_t g = 0; g < l.scale_count; g++)
      bad_scales += memcmp(&got_scales[g], &scales[g], sizeof(float)) != 0 || got_scale_codes[g] != scale_codes[g] ||
                    got_zeros[g] != zeros[g];
    const char *name = precis_format_get(c.elem)->name;
    CHECK_MSG(bad_codes == 0 && bad_scales == 0, "%s@%s(%d,%d) %s side %c %zux%zu: %zu codes, %zu scales differ", name,
              precis_quant_gran_str(c.gran), c.group, c.group_cols, precis_quant_int_str(c.ints),
              side == PRECIS_OPERAND_A ? 'A' : 'B', rows, cols, bad_codes, bad_scales);
    CHECK_MSG(got_clipped == q.clipped, "%s@%s: clipped %llu, cpu %zu", name, precis_quant_gran_str(c.gran),
              got_clipped, q.clipped);
    CHECK_MSG(memcmp(&got_tensor_scale, &q.tensor_scale, sizeof(float)) == 0, "%s@%s: tensor scale %a, cpu %a", name,
              precis_quant_gran_str(c.gran), (double)got_tensor_scale, (double)q.tensor_scale);
  }
  cudaFree(d_x);
  cudaFree(d_scales);
  cudaFree(d_tensor_scale);
  cudaFree(d_codes);
  cudaFree(d_scale_codes);
  cudaFree(d_zeros);
  cudaFree(d_clipped);
}

TEST(device_quantizer_matches_cpu) {
  std::vector<Case> cases;
  const precis_format_id floats[] = {PRECIS_FMT_E4M3, PRECIS_FMT_E5M2, PRECIS_FMT_E2M1};
  for (precis_format_id f : floats) {
    cases.push_back({f, PRECIS_QUANT_GRAN_TENSOR, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_ROW, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_COL, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_BLOCK, 128, 128, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_MX, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
    cases.push_back({f, PRECIS_QUANT_GRAN_MX_RCEIL, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
  }
  cases.push_back({PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, PRECIS_QUANT_INT_SYMMETRIC});
  const struct {
    precis_format_id f;
    precis_quant_int ints;
  } ints[] = {{PRECIS_FMT_I8, PRECIS_QUANT_INT_SYMMETRIC},
              {PRECIS_FMT_I8, PRECIS_QUANT_INT_SYMMETRIC_HALF},
              {PRECIS_FMT_S4, PRECIS_QUANT_INT_SYMMETRIC},
              {PRECIS_FMT_U4, PRECIS_QUANT_INT_ASYMMETRIC}};
  for (const auto &i : ints) {
    cases.push_back({i.f, PRECIS_QUANT_GRAN_ROW, 0, 0, i.ints});
    cases.push_back({i.f, PRECIS_QUANT_GRAN_COL, 0, 0, i.ints});
    cases.push_back({i.f, PRECIS_QUANT_GRAN_K, 128, 0, i.ints});
    cases.push_back({i.f, PRECIS_QUANT_GRAN_BLOCK, 16, 8, i.ints});
  }
  const size_t shapes[][2] = {{256, 384}, {77, 300}};
  for (const Case &c : cases)
    for (const auto &s : shapes)
      for (precis_operand_side side : {PRECIS_OPERAND_A, PRECIS_OPERAND_B}) compare_one(c, side, s[0], s[1]);
}

TEST(invalid_description_is_rejected) {
  precis_quant_desc d = {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_NV, 0, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_A};
  CHECK(precis_cuda_quantize(&d, nullptr, 16, 16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0) ==
        cudaErrorInvalidValue);
}

int main(void) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    printf("skipped: cudaGetDeviceCount failed: %s\n", cudaGetErrorString(err));
    return PRECIS_TEST_SKIP;
  }
  if (devices == 0) {
    printf("skipped: no CUDA device\n");
    return PRECIS_TEST_SKIP;
  }
  static const harness_test tests[] = {T(device_quantizer_matches_cpu), T(invalid_description_is_rejected)};
  return harness_run(tests, sizeof tests / sizeof tests[0]);
}
