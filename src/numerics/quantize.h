/* One quantizer for every granularity of DESIGN §11 (tensor, row, col, k<G>, <R>x<C>, mx, mx-rceil,
 * nv), parameterized by an operand description: the element format, the granularity and, for
 * integers, the scale convention. Every group of the matrix gets a scale (and, for asymmetric
 * integers, a zero point) from its largest finite |x| (or min/max), then every element becomes a
 * code. docs/formats.md states each rule and its source; tests/venv/test_formats_oracle.py checks
 * codes and scales bit for bit against ml_dtypes.
 *
 * Orientation: operand A is m x k row-major and its groups run along k within a row; operand B is
 * k x n row-major and its groups run along k within a column. Everything else (tensor, row, col,
 * <R>x<C>) is the same for both: a grid of rectangular groups over the stored matrix. */
#ifndef PRECIS_QUANTIZE_H
#define PRECIS_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "base/status.h"

typedef enum precis_quant_gran {
  PRECIS_QUANT_GRAN_TENSOR,   /* one scale */
  PRECIS_QUANT_GRAN_ROW,      /* one per row of the stored matrix (per token for A) */
  PRECIS_QUANT_GRAN_COL,      /* one per column (per output channel for B) */
  PRECIS_QUANT_GRAN_K,        /* groups of `group` consecutive k: along a row of A, a column of B */
  PRECIS_QUANT_GRAN_BLOCK,    /* `group` x `group_cols` 2-D blocks of the stored matrix */
  PRECIS_QUANT_GRAN_MX,       /* OCP MX: 32 along k, E8M0 scale 2^(floor(log2 amax) - emax_elem) */
  PRECIS_QUANT_GRAN_MX_RCEIL, /* 32 along k, E8M0 scale = amax / max_elem rounded up to a power of two */
  PRECIS_QUANT_GRAN_NV,       /* NVFP4: 16 along k, E4M3 block scale times an fp32 tensor scale */
} precis_quant_gran;

typedef enum precis_quant_int {
  PRECIS_QUANT_INT_SYMMETRIC,      /* scale = amax / qmax (127, 7); codes -qmax..qmax (precis's int8) */
  PRECIS_QUANT_INT_SYMMETRIC_HALF, /* compressed-tensors: scale = amax / (qmax + 0.5) (127.5, 7.5);
                                      codes -qmax-1..qmax */
  PRECIS_QUANT_INT_ASYMMETRIC,     /* GPTQ: scale = (max - min) / (2^b - 1), zero = rne(-min / scale);
                                      codes 0..2^b-1 (u4) */
  /* Not an integer convention but the scale convention of fp8 elements (e4m3/e5m2) with tensor, row,
   * col, K or BLOCK groups: the scale amax/max rounded UP to a power of two, stored as an E8M0 code
   * (DeepGEMM's UE8M0 scales; mx-rceil's rule on these groups). The spec's `:ue8m0`. */
  PRECIS_QUANT_FP8_UE8M0,
} precis_quant_int;

typedef enum precis_operand_side { PRECIS_OPERAND_A, PRECIS_OPERAND_B } precis_operand_side;

typedef struct precis_quant_desc {
  precis_format_id elem;  /* e4m3, e5m2, e2m1, int8 (s8), s4, u4 */
  precis_quant_gran gran;
  int group;              /* K: G; BLOCK: R (rows of the stored matrix). Unused otherwise. */
  int group_cols;         /* BLOCK: C. Unused otherwise. */
  precis_quant_int ints;  /* integer elements: the convention (u4 needs ASYMMETRIC, s8/s4 a symmetric one) */
  precis_operand_side side;
} precis_quant_desc;

/* The geometry and storage of a quantized rows x cols matrix. */
typedef struct precis_quant_layout {
  size_t group_rows, group_cols; /* extent of one group (the last ones may be cut by the edge) */
  size_t scale_rows, scale_cols; /* the scales form this row-major grid */
  size_t scale_count;
  precis_format_id scale_fmt;    /* F32, E8M0 (mx, mx-rceil) or E4M3 (nv) */
  bool has_zero_points;          /* asymmetric integers */
  bool has_tensor_scale;         /* nv: the fp32 second-level scale */
  size_t code_bytes;             /* packed codes: rows*cols*storage_bits/8, rounded up */
  size_t scale_bytes;            /* every scale at its real size, zero points (4-bit, packed) and the tensor scale */
} precis_quant_layout;

/* The quantizer's output; the caller allocates the arrays from the layout. */
typedef struct precis_quant_tensor {
  uint8_t *codes;        /* rows*cols, row-major, one code per byte: e4m3/e5m2 bits; e2m1 and u4 in the
                            low nibble; int8 and s4 as two's complement int8 (s4 sign-extended) */
  float *scales;         /* scale_count: each group's scale as a value (mx: 2^e, nv: the e4m3 block scale) */
  uint8_t *scale_codes;  /* mx: the E8M0 codes, nv: the E4M3 codes; may be NULL (ignored otherwise) */
  uint8_t *zero_points;  /* asymmetric: scale_count zero points; ignored otherwise */
  float tensor_scale;    /* written: nv's s2, 1 otherwise */
  size_t clipped;        /* written: inputs that saturated or were NaN (docs/formats.md) */
} precis_quant_tensor;

const char *precis_quant_gran_str(precis_quant_gran g);
const char *precis_quant_int_str(precis_quant_int c);

/* Checks the description against the matrix shape and fills the layout. PRECIS_E_USAGE with a
 * message naming the field when the combination does not exist (e.g. nv with e4m3 elements). */
precis_status precis_quant_layout_of(const precis_quant_desc *d, size_t rows, size_t cols, precis_quant_layout *out);

/* Quantizes x (rows x cols, row-major). Groups whose amax is 0 (or whose scale underflows to 0)
 * get scale 1 (E8M0 code 127, nv block scale 1.0), zero point 0 and all-zero codes. */
precis_status precis_quantize(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                              precis_quant_tensor *q);

/* A static per-tensor scale (DESIGN §11 scale=absmax|percentile|mse): quantizes x with the scale
 * rule of `d` applied to the given amax (from a calibration split) instead of x's own. d must be a
 * `tensor` description with float elements or a symmetric integer convention, or `nv`, whose
 * fp32 tensor scale becomes amax/2688 while its E4M3 block scales stay those of each block
 * (saturating at 448 when a block exceeds amax), as NVFP4 KV caches calibrate it (PRECIS_E_USAGE
 * otherwise). Elements beyond amax saturate and count as clipped, as everywhere. */
precis_status precis_quantize_with_amax(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                                        float amax, precis_quant_tensor *q);

/* y = the value each code stands for: decode(code) * scale ((q - zero) * scale for asymmetric
 * integers; (decode(code) * block scale) * tensor scale for nv), in fp32. */
precis_status precis_dequantize(const precis_quant_desc *d, const precis_quant_tensor *q, size_t rows, size_t cols,
                                float *y);

/* ---- SmoothQuant (Xiao et al. 2023): X (m x k) · W (k x n) = (X diag(s)^-1) · (diag(s) W) ----
 * s_j = max_i |X_ij|^alpha / max_l |W_jl|^(1-alpha), computed in double and rounded to fp32, with
 * finite maxima; a channel whose X or W maximum is 0 gets s_j = 1, and s_j is clamped to
 * [1e-5, 1e5] (the reference implementation clamps its maxima at 1e-5). */
precis_status precis_smooth_scales(const float *x, size_t m, size_t k, const float *w, size_t n, double alpha,
                                   float *s);
/* x[i][j] /= s[j] and w[j][l] *= s[j], in place, in fp32. */
void precis_smooth_apply(float *x, size_t m, size_t k, float *w, size_t n, const float *s);

/* The error of one candidate smoothing; lower is better. */
typedef precis_status (*precis_smooth_error_fn)(const float *s, void *ctx, double *error);

/* The default error: ||Q_a(X/s) · Q_b(s W) - X W||_F / ||X W||_F in double, with the products
 * taken over every ceil(n/64)-th column of W (at most 64 columns) to keep the search cheap; Q is
 * precis_quantize then precis_dequantize with the two descriptions. */
typedef struct precis_smooth_gemm_ctx {
  const float *x, *w;
  size_t m, k, n;
  precis_quant_desc a, b;
} precis_smooth_gemm_ctx;
precis_status precis_smooth_gemm_error(const float *s, void *ctx, double *error);

/* alpha = auto: tries alpha = 0, 0.1, ..., 1.0 on the calibration X and W, keeps the first alpha of
 * least error (ties go to the smaller alpha), writes it and its scales. */
precis_status precis_smooth_search(const float *x, size_t m, size_t k, const float *w, size_t n,
                                   precis_smooth_error_fn error_fn, void *ctx, double *alpha_out, float *s_out);

#endif
