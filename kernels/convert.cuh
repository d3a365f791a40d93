/* Device conversions and quantization: the GPU twins of src/numerics/format.c and src/numerics/quant.c. Each
 * launcher is asynchronous on `stream`, callable from C, and must give bit-identical results to its
 * CPU twin (tests/gpu/test_convert.cu checks every special value and >= 2^24 random inputs).
 *
 * Layout parameters exist for the cuBLASLt plan (src/eval/gemm_plan.h): `ld_out` is the output's leading
 * dimension in elements (>= cols, or >= rows when transposed); padding elements are not written
 * (the caller zero-fills padded buffers once). `transpose_out` writes a row-major [rows, cols]
 * input as row-major [cols, rows] (B for the "TN" int8/fp8 layouts). */
#ifndef PRECIS_KERNELS_CONVERT_CUH
#define PRECIS_KERNELS_CONVERT_CUH

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element-wise, n elements, contiguous. */
cudaError_t precis_cuda_f32_to_f16(const float *in, uint16_t *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_f32_to_bf16(const float *in, uint16_t *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_f32_to_tf32(const float *in, float *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_f32_to_e4m3(const float *in, uint8_t *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_f32_to_e5m2(const float *in, uint8_t *out, size_t n, bool satfinite, cudaStream_t stream);
cudaError_t precis_cuda_f16_to_f32(const uint16_t *in, float *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_bf16_to_f32(const uint16_t *in, float *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_e4m3_to_f32(const uint8_t *in, float *out, size_t n, cudaStream_t stream);

/* Largest finite |x| of n values into *d_amax (device scalar; overwritten, not accumulated). */
cudaError_t precis_cuda_absmax(const float *x, size_t n, float *d_amax, cudaStream_t stream);
/* d_scale[i] = d_amax[i] / divisor for count values (127 for int8, 448 for e4m3). */
cudaError_t precis_cuda_scale_from_amax(const float *d_amax, float divisor, float *d_scale, size_t count,
                                        cudaStream_t stream);

/* int8 scales (amax/127) per row / per column of a row-major [rows, cols] matrix. */
cudaError_t precis_cuda_int8_row_scales(const float *x, size_t rows, size_t cols, float *d_scales, cudaStream_t stream);
cudaError_t precis_cuda_int8_col_scales(const float *x, size_t rows, size_t cols, float *d_scales, cudaStream_t stream);

/* q = clamp(rne(x/s), -127, 127) with s per row, per column, or one per tensor (scales[0]).
 * *d_clipped (device counter) is incremented by the number of saturated or non-finite inputs. */
typedef enum precis_cuda_scale_axis { PRECIS_CUDA_SCALE_ROW, PRECIS_CUDA_SCALE_COL, PRECIS_CUDA_SCALE_TENSOR } precis_cuda_scale_axis;
cudaError_t precis_cuda_int8_quantize(const float *x, size_t rows, size_t cols, precis_cuda_scale_axis axis,
                                      const float *d_scales, int8_t *q, size_t ld_out, bool transpose_out,
                                      unsigned long long *d_clipped, cudaStream_t stream);

/* e4m3 satfinite of x/s with one per-tensor scale d_scale[0] (s = 0 gives zeros). */
cudaError_t precis_cuda_fp8_quantize(const float *x, size_t rows, size_t cols, const float *d_scale, uint8_t *q,
                                     size_t ld_out, bool transpose_out, unsigned long long *d_clipped,
                                     cudaStream_t stream);

/* c[i*ld_c + j] = row_scales[i] * col_scales[j] * (float)acc[i*ld_acc + j], as precis_int8_dequantize. */
cudaError_t precis_cuda_int8_dequantize(const int32_t *acc, size_t rows, size_t cols, size_t ld_acc,
                                        const float *d_row_scales, const float *d_col_scales, float *c, size_t ld_c,
                                        cudaStream_t stream);

/* Widening of a GEMM output to float32 for the host (fp16/bf16 outputs). */
cudaError_t precis_cuda_widen_f16(const uint16_t *in, float *out, size_t n, cudaStream_t stream);
cudaError_t precis_cuda_widen_bf16(const uint16_t *in, float *out, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
