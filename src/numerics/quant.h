/* INT8 symmetric and FP8 per-tensor quantization: the CPU twins of kernels/convert.cu.
 *
 * int8: s = amax/127, q = clamp(rne(x/s), -127, 127). amax == 0 gives s = 0 and q = 0 (no division
 * by zero); dequantization then yields exact zeros. Inf/NaN inputs: documented in docs/formats.md
 * (amax ignores non-finite values; +inf -> +127, -inf -> -127, NaN -> 0, all counted as clipped). */
#ifndef PRECIS_QUANT_H
#define PRECIS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum precis_calib_method {
  PRECIS_CALIB_ABSMAX,
  PRECIS_CALIB_PERCENTILE,
  PRECIS_CALIB_MSE,
} precis_calib_method;

const char *precis_calib_method_str(precis_calib_method m);
precis_status precis_calib_method_parse(const char *s, precis_calib_method *out);

/* Largest finite |x| (non-finite values ignored). */
float precis_absmax(const float *x, size_t n);

/* amax chosen from calibration data: absmax; the `percentile`-th percentile of |x| (default
 * 99.99); or the clip value minimizing the int8 quantization MSE over candidates. */
precis_status precis_calib_amax(const float *x, size_t n, precis_calib_method method, double percentile,
                                float *amax_out);

float precis_int8_scale_from_amax(float amax); /* amax/127 */
int8_t precis_int8_quantize_one(float x, float scale); /* scale 0 -> 0 */

/* Scales (amax/127) for each row / column of a row-major rows x cols matrix, or one for all. */
void precis_int8_row_scales(const float *x, size_t rows, size_t cols, float *scales);
void precis_int8_col_scales(const float *x, size_t rows, size_t cols, float *scales);

/* Quantize a row-major matrix with per-row, per-column or per-tensor scales. Return the number of
 * inputs that saturated: clamping changed the value (|rne(x/s)| > 127, x/s = ±inf included), x/s is
 * NaN, or (s == 0) x is non-finite. See docs/formats.md. */
size_t precis_int8_quantize_rows(const float *x, size_t rows, size_t cols, const float *row_scales, int8_t *q);
size_t precis_int8_quantize_cols(const float *x, size_t rows, size_t cols, const float *col_scales, int8_t *q);
size_t precis_int8_quantize_tensor(const float *x, size_t n, float scale, int8_t *q);

/* c[i][j] = sa[i] * sb[j] * acc[i][j], computed in float as the GPU dequant kernel does. */
void precis_int8_dequantize(const int32_t *acc, size_t rows, size_t cols, const float *row_scales,
                            const float *col_scales, float *c);
/* The same from exact integer sums held as floats (|sum| < 2^24, as one sgemm chunk gives them); sums
 * may be c itself (dequantized in place). */
void precis_int8_dequantize_sums(const float *sums, size_t rows, size_t cols, const float *row_scales,
                                 const float *col_scales, float *c);

/* FP8 e4m3 per tensor: s = amax/448 (amax 0 -> s = 0, all zeros), q = e4m3_satfinite(x/s); a NaN x
 * gives the NaN code with its sign (0x7f/0xff).
 * Returns the number of values that saturated. */
float precis_fp8_scale_from_amax(float amax);
size_t precis_fp8_quantize_tensor(const float *x, size_t n, float scale, uint8_t *q);

#endif
