/* libprecis: quantize an operand and emulate one (batched) GEMM exactly as a recipe does on the cpu
 * backend: the same functions, so the same bits, as `precis run --backend cpu --save-outputs`
 * (DESIGN §11, §15). Arrays are dense and row-major (C order); nothing is kept between calls. */
#ifndef PRECIS_PUBLIC_EMULATE_H
#define PRECIS_PUBLIC_EMULATE_H

#include <stddef.h>
#include <stdint.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C[s, m, n] = A[s, m, k] · B[k, n] (one B shared by the batch) or · B[s, k, n] (b_batched), as in
 * a dataset's workload (DESIGN §4). Float64 inputs are what a dataset stores as float64: recipes
 * with narrower operands read their float32 rounding (RNE), fp64 recipes the values themselves. */
typedef struct precis_gemm {
  int64_t batch, m, n, k; /* each >= 1 */
  int b_batched;
  const void *a;          /* [batch, m, k] */
  precis_dtype a_dtype;
  const void *b;          /* [k, n] or [batch, k, n] */
  precis_dtype b_dtype;
  /* Optional [calib_samples, m, k] float32 calibration inputs, as a workload's calib/a: recipes
   * with static activation scales (scale=absmax|percentile|mse) need them, and SmoothQuant
   * (smooth=) takes its scales from them (without, from A itself, as for a workload without a
   * calibration split). NULL/0 when none. */
  const float *calib_a;
  int64_t calib_samples;
  /* Nonzero: b holds B's transpose, [n, k] (or [batch, n, k]), as a linear layer holds its weights W
   * (C = A·Wᵀ): the same output bits as b = Wᵀ made dense, without that copy. The integer recipes
   * quantize W's rows in place; the others transpose it into a block of their own first. */
  int b_transposed;
} precis_gemm;

typedef struct precis_emulate_info {
  precis_dtype out_dtype;     /* F64 for out=fp64 recipes (their exact output), else F32 */
  double clipped_fraction;    /* quantized recipes: inputs that saturated; NaN otherwise */
  char canonical[256];        /* the recipe's canonical spec */
  char emulation[200];        /* how the cpu backend computed it */
} precis_emulate_info;

/* The output's natural dtype for a recipe (F64 for out=fp64, else F32), without computing. */
precis_status precis_emulate_out_dtype(const char *recipe, precis_dtype *out);

/* Computes C (batch*m*n elements of c_dtype, caller-allocated). c_dtype F32 gets the bits the cpu
 * backend's float32 output holds (what --save-outputs writes for every recipe but out=fp64); F64
 * gets the float64 output of an out=fp64 recipe, else the float32 output widened. info may be NULL.
 * Errors: PRECIS_E_USAGE (no recipe, bad shape or dtype, a static-scale recipe without calib_a),
 * PRECIS_E_UNSUPPORTED (the cpu backend does not run this recipe; the message says why),
 * PRECIS_E_DOES_NOT_FIT (host memory), PRECIS_E_RUNTIME. */
precis_status precis_emulate(const char *recipe, const precis_gemm *gemm, void *c, precis_dtype c_dtype,
                             precis_emulate_info *info);
/* precis_emulate under a target architecture's arithmetic (`--target`, DESIGN §19): "sm_80",
 * "sm_89", "sm_90", "sm_100", "sm_120", or NULL for the cpu backend's default (sm_90). A spec the
 * target cannot run (fp8 on sm_80) is PRECIS_E_UNSUPPORTED with the route's reason; an unknown
 * name PRECIS_E_USAGE. */
precis_status precis_emulate_target(const char *recipe, const precis_gemm *gemm, void *c, precis_dtype c_dtype,
                                    const char *target, precis_emulate_info *info);

/* The host bytes precis_emulate(_target) holds for B, beyond the caller's, when B is given as W
 * [n, k] (b_transposed): its copies of B (codes, rounded values; a [k, n] copy where the recipe
 * needs one), a block of columns' only where a head-sized W (64 MiB or more) is emulated a block at
 * a time. For planning memory (verify's estimate); about, for the quantized block formats. */
precis_status precis_emulate_b_bytes(const char *recipe, int64_t k, int64_t n, const char *target, int64_t *bytes);

/* ---- arrays on a CUDA device (DLPack's world) ------------------------------------------------
 * NOT YET RUN ON A GPU: this entry was written, compiled and linked on machines without one; its
 * argument checks are tested there, and tests/gpu/test_device_gemm.c (ctest -L gpu) is what checks
 * it on a device (docs/verify.md, "Beyond one machine").
 *
 * The recipe's GEMM on the arrays where they are, by the cuda backend (the same run path as `precis
 * run --backend cuda`, cuBLASLt on that device, so its arithmetic, not the cpu backend's emulation):
 * a and b are read in place and c written in place, nothing passes through host memory. The device
 * converts and quantizes, so the recipes are those the cuda backend converts on the device: fp32,
 * tf32, bf16, fp16, int8 with dynamic per-row scales, fp8 per tensor (out= fp32, bf16 or fp16).
 * Recipes it runs through the host (weight-only, MX/NV emulated, fp8 row/block scales, fp64 and
 * splits) and static activation scales are PRECIS_E_UNSUPPORTED naming why. */
typedef struct precis_device_gemm {
  int device;             /* the CUDA device ordinal holding a, b and c (as this process numbers them) */
  int64_t batch, m, n, k; /* each >= 1 */
  int b_batched;
  const float *a;         /* float32 [batch, m, k] */
  const float *b;         /* float32 [k, n], or [batch, k, n] when b_batched */
  float *c;               /* float32 [batch, m, n]; NULL: allocated on the device (see c_allocated) */
  /* Strides in elements, [batch, row, column] (b without b_batched: [unused, row, column]); all
   * zero: dense row-major. Only dense row-major arrays are taken (a dimension of size 1 may have any
   * stride): others are PRECIS_E_USAGE naming the array, its strides and those expected. */
  int64_t a_strides[3], b_strides[3], c_strides[3];
  /* The cudaStream_t (as an integer) on which a and b were written: the GEMM starts after its queued
   * work (0: the legacy default stream). c is complete when the call returns. */
  uintptr_t stream;
} precis_device_gemm;

/* c_allocated: where a c allocated for a NULL gemm->c is returned (free it with precis_device_free);
 * may be NULL when gemm->c is given. info may be NULL; info->emulation says how the device ran it.
 * Errors: PRECIS_E_NOT_BUILT (this libprecis has no CUDA), PRECIS_E_NO_DEVICE (no usable device),
 * PRECIS_E_USAGE (shape, strides, a pointer that is not memory of that device, a static-scale recipe),
 * PRECIS_E_UNSUPPORTED (the recipe does not run on device arrays, or not on this device: why),
 * PRECIS_E_DOES_NOT_FIT (device memory), PRECIS_E_RUNTIME. */
precis_status precis_emulate_device(const char *recipe, const precis_device_gemm *gemm, float **c_allocated,
                                    precis_emulate_info *info);
/* Frees device memory that precis_emulate_device allocated (NULL: nothing). */
void precis_device_free(int device, void *p);
/* 1 when this libprecis was built with the CUDA backend (whether a device is present or not), else 0. */
int precis_cuda_built(void);

/* The operands as the cpu backend multiplies them for an fp32-accumulating recipe (acc=fp32, no
 * split=): element formats, scales and their rounding applied, so that C = alpha * A_out . B_out
 * summed in any order is another correct implementation of the recipe, the noise floor's
 * alternatives of verify (docs/verify.md). a_out: batch*m*k floats; b_out: (b_batched ? batch : 1)*k*n;
 * *alpha: 1, or fp32(s_a * s_b) of nv tensor scales. Weight-only recipes give the scaled operand
 * dequantized and rounded to the other's format, as their GEMM reads it. PRECIS_E_UNSUPPORTED
 * (naming why) for recipes whose scales apply after partial k-sums (int8 per row, group-scaled
 * activations), static scales, SmoothQuant, other accumulators, or ones the cpu backend does not run. */
precis_status precis_emulate_operands(const char *recipe, const precis_gemm *gemm, float *a_out, float *b_out,
                                      float *alpha);

/* ---- quantize / dequantize one operand by its spec field ---------------------------------------
 * operand: "a=FMT[@GRAN[:CONV]]" or "b=..." (a bare "FMT@GRAN" is operand A), the syntax of a
 * spec's a= and b= fields. A is [rows, k] (a [batch, m, k] A is the batch*m rows together, as the
 * cpu backend quantizes it); B is [k, cols], and a [batch, k, n] B is quantized matrix by matrix
 * (one tensor scale over all of them with @tensor, again as the backend does). */
typedef struct precis_quantized precis_quantized;

precis_status precis_quantize_operand(const char *operand, const float *x, int64_t batch, int64_t rows, int64_t cols,
                                      precis_quantized **out);
/* The same with a static per-tensor scale: the operand's scale rule applied to a calibrated amax
 * (e4m3: amax / 448; s8@tensor:sym: amax / 127) instead of x's own, as an engine quantizes with a
 * scale computed once from calibration data (amax 448 gives e4m3 the scale 1.0). The operand must
 * be scaled and per tensor, with float elements or a symmetric integer convention, or nv (e2m1@nv:
 * amax sets the fp32 tensor scale amax/2688, the block scales stay dynamic); elements beyond amax
 * saturate and count as clipped. A [batch, k, n] B gets the same scale for every matrix. */
precis_status precis_quantize_operand_static(const char *operand, const float *x, int64_t batch, int64_t rows,
                                             int64_t cols, float amax, precis_quantized **out);
void precis_quantized_free(precis_quantized *q);

/* The canonical operand ("s8@row:sym") and its side ('a' or 'b'). */
const char *precis_quantized_operand(const precis_quantized *q);
char precis_quantized_side(const precis_quantized *q);
/* 1 for scaled formats (e4m3, e5m2, e2m1, s8, s4, u4); 0 for a plain RNE cast (bf16, fp16, tf32,
 * fp32, fp64), which has no codes or scales: only values. */
int precis_quantized_is_scaled(const precis_quantized *q);
/* batch*rows*cols codes, one per byte (e4m3/e5m2 bits, e2m1 and u4 in the low nibble, s8 and s4 as
 * two's complement int8); NULL when unscaled. */
const uint8_t *precis_quantized_codes(const precis_quantized *q);
/* Each group's scale as a float value, for each of the *n_mats matrices a [*rows, *cols] grid
 * (mats x rows x cols floats); NULL when unscaled. */
const float *precis_quantized_scales(const precis_quantized *q, int64_t *n_mats, int64_t *rows, int64_t *cols);
/* mx: the E8M0 scale codes, nv: the E4M3 block-scale codes (same grid); NULL otherwise. */
const uint8_t *precis_quantized_scale_codes(const precis_quantized *q);
/* Asymmetric integers (u4): a zero point per group (same grid); NULL otherwise. */
const uint8_t *precis_quantized_zero_points(const precis_quantized *q);
/* nv: the fp32 second-level scale of each matrix (n_mats values); NULL otherwise. */
const float *precis_quantized_tensor_scales(const precis_quantized *q);
/* The value each element stands for, in float32 (batch*rows*cols). */
const float *precis_quantized_values(const precis_quantized *q);
/* Inputs that saturated or were NaN. */
size_t precis_quantized_clipped(const precis_quantized *q);

#ifdef __cplusplus
}
#endif

#endif
