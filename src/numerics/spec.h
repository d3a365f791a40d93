/* Recipe specs (DESIGN §11): a recipe is how each operand is quantized, how products are
 * accumulated and what the output is. A spec is data with exactly one canonical spelling (all
 * fields, fixed order), so two reports compare by spec, not by a name. Presets (recipe.h) are names
 * for specs.
 *
 *   recipe  := PRESET | FIELD ("," FIELD)*
 *   FIELD   := a=OPERAND | b=OPERAND | acc=ACC | out=FMT | scale=SCALE | smooth=ALPHA | split=SPLIT
 *   OPERAND := FMT ["@" GRAN [":" CONV]]
 *
 * Parsing checks the grammar and the combinations that mean nothing (a per-column scale of A, a
 * granularity on an unscaled format); whether a backend runs a valid spec is the backend's answer. */
#ifndef PRECIS_SPEC_H
#define PRECIS_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "format.h"
#include "base/status.h"

/* Longest canonical spec plus room: seven fields with their longest values. */
#define PRECIS_SPEC_TEXT_MAX 256

typedef enum precis_gran {
  PRECIS_GRAN_NONE,     /* an unscaled float operand: a plain RNE cast (fp64, fp32, tf32, fp16, bf16) */
  PRECIS_GRAN_TENSOR,   /* one scale */
  PRECIS_GRAN_ROW,      /* A: one scale per row (token) */
  PRECIS_GRAN_COL,      /* B: one scale per column (output channel) */
  PRECIS_GRAN_K,        /* groups of `group` consecutive k per row of A / per column of B */
  PRECIS_GRAN_BLOCK,    /* block_rows x block_cols 2-D blocks */
  PRECIS_GRAN_MX,       /* OCP MX: 32 along k, E8M0 scale, FLOOR rule */
  PRECIS_GRAN_MX_RCEIL, /* MX with NVIDIA's round-up scale rule */
  PRECIS_GRAN_NV,       /* NVFP4: 16 along k, E4M3 block scale plus an f32 tensor scale */
} precis_gran;

/* How an integer operand maps to its codes (written out for integer formats). */
typedef enum precis_qconv {
  PRECIS_QCONV_NONE,     /* float formats */
  PRECIS_QCONV_SYM,      /* s = amax/qmax, q = clamp(rne(x/s), -qmax, qmax) (qmax 127 for s8, 7 for s4) */
  PRECIS_QCONV_SYM_HALF, /* s = amax/(qmax + 0.5): the full code range, -128..127 for s8 */
  PRECIS_QCONV_ASYM,     /* min/max with a zero point, codes 0..2^bits-1 (u4, GPTQ style) */
  /* fp8 (e4m3/e5m2) with tensor/row/col/k<G>/<R>x<C> scales encoded as UE8M0: s = amax/max rounded
   * UP to a power of two (DeepGEMM's ceil_to_ue8m0), one byte per scale. Written ":ue8m0"; plain
   * fp8 operands keep QCONV_NONE (fp32 scales), so their canonical forms do not change. */
  PRECIS_QCONV_UE8M0,
} precis_qconv;

typedef struct precis_operand_spec {
  precis_format_id fmt;
  precis_gran gran;
  int group;                  /* PRECIS_GRAN_K: G of k<G> */
  int block_rows, block_cols; /* PRECIS_GRAN_BLOCK */
  precis_qconv conv;
} precis_operand_spec;

/* fp8 scales encoded as UE8M0 powers of two (`:ue8m0`). */
bool precis_operand_scales_ue8m0(const precis_operand_spec *op);

/* How A's scales are found: from the evaluated input, or static from the calibration split. */
typedef enum precis_scale_method {
  PRECIS_SCALE_DYNAMIC,
  PRECIS_SCALE_ABSMAX,
  PRECIS_SCALE_PERCENTILE,
  PRECIS_SCALE_MSE,
} precis_scale_method;

typedef enum precis_split {
  PRECIS_SPLIT_NONE,
  PRECIS_SPLIT_TF32X3,
  PRECIS_SPLIT_BF16X3,
  PRECIS_SPLIT_BF16X6,
  PRECIS_SPLIT_BF16X9,
  PRECIS_SPLIT_INT8XN, /* Ozaki: split_terms int8 slices per operand */
  /* cuBLAS's own FP64 fixed-point emulation (CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, CUDA 13): the
   * split is the library's, so only the cuda backend runs it, where it finds it at run time. */
  PRECIS_SPLIT_CUBLAS_EMU,
  /* Ozaki scheme II (Ozaki, Uchino & Imamura 2025; GEMMul8): split_terms pairwise coprime int8
   * moduli, one exact int8 GEMM per modulus, the result rebuilt by the Chinese remainder theorem
   * (docs/high-precision.md). CRT_INT8XN ("crt-int8x<N>") is the accurate variant, whose scaling
   * bound comes from one extra small-integer product |A|·|B|; CRT_INT8XN_FAST ("crt-int8x<N>-fast")
   * bounds it by Cauchy-Schwarz from the row and column norms. */
  PRECIS_SPLIT_CRT_INT8XN,
  PRECIS_SPLIT_CRT_INT8XN_FAST,
} precis_split;

typedef struct precis_spec {
  precis_operand_spec a, b;
  precis_format_id acc; /* PRECIS_FMT_F64, F32, F16 or I32 (s32) */
  /* acc=fp32fast with fp8 operands: cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM, the whole k summed in
   * the tensor core's narrow accumulator without periodic promotion (acc is then F32; canonical
   * `acc=fp32fast`). With fp32 operands fp32fast means tf32 operands instead (COMPUTE_32F_FAST_TF32)
   * and this stays false, so that each computation has one spelling. */
  bool fast_accum;
  precis_format_id out;
  precis_scale_method scale;
  double percentile;    /* PRECIS_SCALE_PERCENTILE: (0, 100] */
  bool smooth_auto;     /* smooth=auto */
  double smooth;        /* SmoothQuant alpha in [0, 1]; NaN: smooth=none (ignored when smooth_auto) */
  precis_split split;
  int split_terms;      /* PRECIS_SPLIT_INT8XN: N slices; PRECIS_SPLIT_CRT_INT8XN(_FAST): N moduli */
} precis_spec;

/* Parses one spec ("a=e4m3@row,b=e4m3@col,out=bf16"). Missing fields take their defaults: an
 * omitted operand the other's format (with its own default granularity), acc from the operands,
 * out fp32, scale dynamic, smooth none, split none. Errors (PRECIS_E_USAGE) name the field and what
 * is allowed. */
precis_status precis_spec_parse(const char *text, precis_spec *out);

/* The canonical text: every field, in the order a, b, acc, out, scale, smooth, split. Returns
 * false when it does not fit in len (PRECIS_SPEC_TEXT_MAX always does). */
bool precis_spec_format(const precis_spec *spec, char *buf, size_t len);

/* One field of the canonical form ("e4m3@row", "s8@col:sym", "bf16"). */
void precis_operand_format(const precis_operand_spec *op, char *buf, size_t len);

/* The canonical name of the accumulation: the format's ("fp32"), or "fp32fast" for fast_accum. */
const char *precis_spec_acc_name(const precis_spec *spec);

/* One line for reports: "A s8 per row (sym, amax/127), B s8 per column (sym); acc s32; out fp32". */
void precis_spec_describe(const precis_spec *spec, char *buf, size_t len);

bool precis_spec_equal(const precis_spec *x, const precis_spec *y); /* same canonical form */

/* Operand kinds, from the format row: scaled operands (fp8, fp4, integers) carry scales. */
bool precis_operand_is_scaled(const precis_operand_spec *op);
bool precis_operand_is_integer(const precis_operand_spec *op);
bool precis_spec_smooths(const precis_spec *spec); /* smooth= is a number or auto */

const char *precis_gran_name(precis_gran g); /* "row", "k" for k<G>, ... */
const char *precis_scale_method_name(precis_scale_method m);
const char *precis_split_name(precis_split s);
/* Ozaki scheme II (either variant). */
bool precis_split_is_crt(precis_split s);

/* Bytes of the tensors a spec holds for one workload (DESIGN §6 tensor_bytes): A and B in their
 * formats, the output (integer accumulation: the int32 accumulators and the dequantized output),
 * and the scales. Padding added by a backend is not included. */
long long precis_spec_tensor_bytes(const precis_spec *spec, long long m, long long n, long long k, long long batch,
                                   bool b_batched);

/* Effective bits of the weights (DESIGN §17, docs/criteria.md "Effective bits"): what a deployed
 * checkpoint stores for B = W^T of k x n in this operand spec, elements and their scales and zero
 * points. Scales are counted in the width a checkpoint stores them, not the float32 the emulation
 * computes with: per-channel, per-k-group and per-tensor scales of integer and fp8 weights 16 bits
 * (bf16, as compressed-tensors, GPTQ and AWQ checkpoints hold them) except a per-tensor scale and the
 * 2-D block scales (32 bits, float32: FP8 per-tensor and DeepSeek's weight_scale_inv); MX 8 bits
 * (E8M0) per 32 along k; NVFP4 8 bits (E4M3) per 16 along k plus one 32-bit tensor scale. An
 * asymmetric integer adds one zero point per scale at the element width. */
typedef struct precis_weight_bits {
  int element_bits;      /* the format's storage bits */
  int scale_bits;        /* bits of each scale (0: unscaled) */
  int zero_point_bits;   /* bits of each zero point (0: symmetric or unscaled) */
  long long group;       /* weights per scale along k: G for k<G>, 32 mx, 16 nv; 0 one scale per output
                            channel (k weights); -1 one scale per tensor; -2 a 2-D block (block_rows x block_cols) */
  int block_rows, block_cols;
  int tensor_scale_bits; /* an extra per-tensor scale (NVFP4's float32 global scale); else 0 */
} precis_weight_bits;
void precis_operand_weight_bits(const precis_operand_spec *op, precis_weight_bits *out);
/* Total bits of a k x n weight (exact: an integer). */
double precis_operand_weight_total_bits(const precis_operand_spec *op, long long k, long long n);
/* Bits per weight when they do not depend on the shape (groups along k dividing k: element +
 * (scale + zero point) / group); NaN for per-channel, per-tensor and 2-D block scales, whose share
 * depends on k and n (precis_operand_weight_total_bits / (k n) then). */
double precis_operand_weight_bits_per_weight(const precis_operand_spec *op);
/* "4 + 16/128 = 4.125 bits per weight (s4 elements, a 16-bit scale per 128 along k)". */
void precis_operand_weight_bits_describe(const precis_operand_spec *op, char *buf, size_t len);

#endif
