/* The device twin of precis_quantize (src/numerics/quantize.h): the same groups, the same scale
 * rules (precis_bits_group_scale) and element rules of src/numerics/format_bits.h, so codes, scales,
 * zero points and clipped counts are bit-identical to the CPU (tests/gpu/test_quantize.cu).
 *
 * One block per group: a reduction of the group's amax (or min/max), the scale by thread 0, then
 * the group's codes. Correct for every granularity; a `tensor` group is one block, so that case is
 * a reference, not a fast path. */
#ifndef PRECIS_KERNELS_QUANTIZE_CUH
#define PRECIS_KERNELS_QUANTIZE_CUH

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "numerics/quantize.h"

/* x: device rows x cols row-major. Outputs are device arrays sized from precis_quant_layout_of:
 * codes (rows*cols), scales (scale_count), scale_codes (scale_count; mx and nv, may be NULL
 * otherwise), zero_points (scale_count; asymmetric only), d_tensor_scale (one float: nv's s2, 1
 * otherwise). *d_clipped (device counter) is incremented, not overwritten. cudaErrorInvalidValue
 * when the description is not valid for the shape (precis_quant_layout_of's message says why). */
cudaError_t precis_cuda_quantize(const precis_quant_desc *desc, const float *x, size_t rows, size_t cols,
                                 uint8_t *codes, float *scales, uint8_t *scale_codes, uint8_t *zero_points,
                                 float *d_tensor_scale, unsigned long long *d_clipped, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
