/* The GEMM plan: how a row-major precis workload (C[b] = A[b]·B or A[b]·B[b]) becomes one
 * column-major cuBLASLt call, in plain C so that it is tested on the CPU (tests/test_gemm_plan.c
 * executes a plan with a column-major reference GEMM). kernels/ only carries a plan out; every
 * decision about operand order, transposes, leading dimensions, padding, batching, scales and
 * read-back is taken here. Derivation: docs/cuda-backend.md.
 *
 * In short: a row-major [r, c] matrix with leading dimension ld is, to a column-major library, the
 * c x r matrix of its transpose with the same ld. So the workload's C^T = B^T·A^T is computed as
 * cuBLASLt's D = op(A_lt)·op(B_lt) with A_lt holding the workload's B and B_lt the workload's A,
 * lt_m = n, lt_n = m, lt_k = k, and D (n x m column-major, ld n) is C row-major.
 * int8 and fp8 kernels need the "TN" form (transa = T, transb = N): the workload's B is then written
 * transposed, row-major [n, k] (= column-major k x n, read through op T as n x k). */
#ifndef PRECIS_GEMM_PLAN_H
#define PRECIS_GEMM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report/results.h"
#include "numerics/spec.h"
#include "base/status.h"

/* cublasOperation_t and cublasComputeType_t values as plain integers (src/ includes no CUDA
 * header); kernels/ checks them against the CUDA headers at compile time. */
enum { PRECIS_LT_OP_N = 0, PRECIS_LT_OP_T = 1 };
enum {
  PRECIS_LT_COMPUTE_16F = 64,
  PRECIS_LT_COMPUTE_32F = 68,
  PRECIS_LT_COMPUTE_32I = 72,
  PRECIS_LT_COMPUTE_32F_FAST_TF32 = 77,
  PRECIS_LT_COMPUTE_64F = 70,
  PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT = 79, /* cuBLAS 13.1 (CUDA 13.0 Update 2) */
};

/* How a route's scales reach cuBLASLt. */
typedef enum precis_lt_scaling {
  PRECIS_LT_SCALING_NONE,
  PRECIS_LT_SCALING_DEQUANT,        /* int32 accumulators, then a dequant kernel with row and column scale vectors */
  PRECIS_LT_SCALING_TENSOR_POINTERS, /* per-tensor scales through CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER */
  /* Issue 16, sm_90: scale tensors through A/B_SCALE_POINTER with A/B_SCALE_MODE (cuBLASLt >= 12.9).
   * The codes and scales come from the host quantizer (the cpu backend's), see docs/cuda-backend.md. */
  PRECIS_LT_SCALING_OUTER_VEC, /* A per row x B per column: OUTER_VEC_32F on both slots */
  PRECIS_LT_SCALING_BLOCK128,  /* A 1x128 (VEC128_32F) x B 128x128 (BLK128x128_32F) */
  /* Issue 16, sm_100: block scales inside the MMA, one byte each in the 128x4 tiled layout:
   * VEC32_UE8M0 (mx) or VEC16_UE4M3 (nv, whose fp32 tensor scales go into alpha). */
  PRECIS_LT_SCALING_BLOCK_SCALED,
} precis_lt_scaling;

/* cublasLtMatmulMatrixScale_t values as plain integers (kernels/lt_matmul.c checks them). */
enum {
  PRECIS_LT_SCALE_SCALAR_32F = 0,
  PRECIS_LT_SCALE_VEC16_UE4M3 = 1,
  PRECIS_LT_SCALE_VEC32_UE8M0 = 2,
  PRECIS_LT_SCALE_OUTER_VEC_32F = 3,
  PRECIS_LT_SCALE_VEC128_32F = 4,
  PRECIS_LT_SCALE_BLK128X128_32F = 5,
};

/* cuBLASLt 12.9.0 (CUDA 12.9): the first with OUTER_VEC_32F, VEC128_32F and BLK128x128_32F. */
#define PRECIS_LT_VERSION_SCALE_MODES 120900
/* cuBLASLt 12.8.0 (CUDA 12.8): the first with VEC16_UE4M3, VEC32_UE8M0 and CUDA_R_4F_E2M1 (Blackwell). */
#define PRECIS_LT_VERSION_BLOCK_SCALED 120800

/* One way the cuda backend runs a family of specs (EXAMPLES E5): which operand formats and
 * granularities, accumulation and output, and what cuBLASLt needs for it. A spec no row matches is
 * `unsupported` on the cuda backend with the reason precis_lt_route_find gives. */
typedef struct precis_lt_route {
  const char *name;               /* the preset it was written for */
  precis_format_id a, b;          /* operand formats (tf32 travels as 32F, read through COMPUTE_32F_FAST_TF32) */
  precis_gran a_gran, b_gran;     /* PRECIS_GRAN_NONE for unscaled operands */
  bool a_static_ok;               /* A may instead be scaled per tensor, statically from the calibration split */
  precis_format_id acc, out;
  int compute_type;               /* PRECIS_LT_COMPUTE_* */
  precis_lt_scaling scaling;
  int a_group;                    /* A's k<G> group (PRECIS_GRAN_K); 0: any */
  int b_block_rows, b_block_cols; /* B's <R>x<C> block (PRECIS_GRAN_BLOCK); 0: any */
  bool d_scaled;                  /* fp8 output: scale_D and amax_D (CUBLASLT_MATMUL_DESC_D_SCALE/AMAX_D_POINTER) */
  bool fast_accum;                /* CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1 (fp8: the k-sum never promoted); matches
                                   * spec->fast_accum */
  int min_cc;                     /* major*10 + minor */
  long long min_cublaslt;         /* cublasLtGetVersion(); 0: any */
  const char *needs;              /* why it cannot run below min_cc */
  precis_split split;             /* PRECIS_SPLIT_NONE, or PRECIS_SPLIT_CUBLAS_EMU: the library splits */
} precis_lt_route;

/* cublasLtReductionScheme_t values as plain integers (kernels/lt_matmul.c checks them): how a
 * split-K algorithm adds its partial sums. NONE (one pass over k, no split) passes every mask. */
enum {
  PRECIS_LT_REDUCTION_NONE = 0,
  PRECIS_LT_REDUCTION_INPLACE = 1,      /* in D itself, in the output type */
  PRECIS_LT_REDUCTION_COMPUTE_TYPE = 2, /* partial sums in the compute type in the workspace */
  PRECIS_LT_REDUCTION_OUTPUT_TYPE = 4,  /* partial sums in the output type in the workspace */
  PRECIS_LT_REDUCTION_ANY = 7,          /* CUBLASLT_REDUCTION_SCHEME_MASK: cuBLASLt's default */
};

/* The workspace handed to cuBLASLt: 32 MiB (cudaMalloc aligns to 256 bytes). */
#define PRECIS_LT_WORKSPACE_BYTES ((size_t)32 << 20)

#define PRECIS_LT_ROUTE_COUNT 17
const precis_lt_route *precis_lt_route_at(size_t index); /* index < PRECIS_LT_ROUTE_COUNT */
size_t precis_lt_route_index(const precis_lt_route *route);
/* The route of a spec, or NULL with the reason (naming the spec field no route covers). */
const precis_lt_route *precis_lt_route_find(const precis_spec *spec, char *why, size_t len);

typedef enum precis_plan_batch_mode {
  PRECIS_PLAN_BATCH_NONE,    /* batch == 1 */
  PRECIS_PLAN_BATCH_FOLDED,  /* b shared across the batch: batch folded into m, one GEMM of batch*m rows */
  PRECIS_PLAN_BATCH_STRIDED, /* b per batch element: strided batched GEMM, batch_count = batch */
} precis_plan_batch_mode;

typedef enum precis_plan_operand {
  PRECIS_PLAN_NONE,
  PRECIS_PLAN_WORKLOAD_A, /* the workload's a [batch, m, k] (activations) */
  PRECIS_PLAN_WORKLOAD_B, /* the workload's b [k, n] or [batch, k, n] (weights) */
} precis_plan_operand;

/* One matrix as cuBLASLt sees it (cublasLtMatrixLayoutCreate + batch attributes): column-major
 * rows x cols, leading dimension ld, batch_count matrices batch_stride elements apart. */
typedef struct precis_lt_matrix {
  int data_type;         /* PRECIS_CUDA_R_* */
  size_t elem_bytes;
  int64_t rows, cols, ld;
  int32_t batch_count;
  int64_t batch_stride;  /* elements; 0 when batch_count == 1 */
  int64_t elements;      /* size of the device buffer in elements, padding included */
  bool zero_fill;        /* holds padding: zero the buffer once before the conversion writes it */
} precis_lt_matrix;

/* A scale tensor of one cuBLASLt slot (A_lt or B_lt, a stored column-major inner x outer matrix:
 * inner = k for the TN routes): a grid_rows x grid_cols grid of fp32 scales, scale (r, c) covering
 * the block_inner x block_outer elements from (r*block_inner, c*block_outer) of the slot's matrix
 * and stored at element r*inner_stride + c*outer_stride of a buffer of `elements` floats
 * (entries for padding hold 1). mode is PRECIS_LT_SCALE_*; SCALAR_32F: one value, no grid. */
typedef struct precis_lt_scale_tensor {
  int mode;
  precis_plan_operand holds; /* the workload operand whose scales these are */
  int64_t grid_rows, grid_cols;
  int64_t block_inner, block_outer;
  int64_t inner_stride, outer_stride;
  int64_t elements;
} precis_lt_scale_tensor;

/* How one workload operand is written into its cuBLASLt buffer: `calls` launches of a
 * kernels/convert.cuh launcher; call c reads the float32 row-major [rows, cols] at
 * src + c*src_stride and writes at dst + c*dst_stride, row-major with leading dimension ld_out
 * ([cols, rows] when transpose_out). int8 scales of call c start at scale + c*scale_stride (row
 * scales for the workload's A: one per row; column scales for B: one per column). */
typedef struct precis_plan_write {
  int64_t calls, rows, cols;
  int64_t src_stride, dst_stride, scale_stride;
  int64_t ld_out;
  bool transpose_out;
} precis_plan_write;

/* int8: calls of precis_cuda_int8_dequantize: accumulators at acc + c*acc_stride (rows x cols, ld
 * ld_acc), row scales at c*row_scale_stride, column scales at c*col_scale_stride, float32 output at
 * out + c*out_stride with leading dimension ld_out. */
typedef struct precis_plan_dequant {
  int64_t calls, rows, cols;
  int64_t acc_stride, ld_acc, row_scale_stride, col_scale_stride, out_stride, ld_out;
} precis_plan_dequant;

/* Read-back into the host's row-major [batch, m, n]: calls 2-D copies of rows x cols from
 * src + c*src_stride (leading dimension src_ld) to dst + c*dst_stride (leading dimension dst_ld). */
typedef struct precis_plan_read {
  int64_t calls, rows, cols;
  int64_t src_stride, src_ld, dst_stride, dst_ld;
} precis_plan_read;

typedef struct precis_gemm_plan {
  precis_spec spec;
  const precis_lt_route *route;
  size_t workspace_limit_bytes; /* the cuBLASLt workspace the backend allocates and offers */
  /* The workload. */
  int64_t m, n, k, batch;
  bool b_batched;
  /* Padding (zeros; exact for every recipe): per-GEMM rows of A (folded: batch*m) and their padded
   * count, the padded n and k. */
  int64_t rows, rows_pad, n_pad, k_pad;
  int align_rows, align_n, align_k; /* the multiples the recipe's kernels require */
  precis_plan_batch_mode batch_mode;
  bool tn; /* int8/fp8: transa = T, workload B written transposed */

  /* The cuBLASLt call: D = alpha * scale_a*scale_b * op(lt_a)·op(lt_b) + beta*C, column-major. */
  int transa, transb;
  int64_t lt_m, lt_n, lt_k;
  int compute_type; /* PRECIS_LT_COMPUTE_* */
  int scale_type;   /* PRECIS_CUDA_R_*: the type of alpha and beta (host pointers) */
  precis_lt_matrix lt_a, lt_b, lt_c, lt_d; /* C is D's buffer with beta = 0 */
  precis_plan_operand lt_a_holds, lt_b_holds;
  /* fp8 per-tensor scales: which workload operand's scale goes to CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
   * and B_SCALE_POINTER (NONE for the other recipes). */
  precis_plan_operand lt_a_scale, lt_b_scale;
  /* Issue 16: the scale mode and tensor of each slot (mode SCALAR_32F for the per-tensor fp8
   * route; unused, mode -1, without scale pointers). Scale tensors other than SCALAR_32F are filled
   * on the host from the host quantizer's scales and uploaded; the codes are written per
   * write_a/write_b (host-quantized codes, copied with ld_out, transposed when transpose_out). */
  precis_lt_scale_tensor lt_a_scales, lt_b_scales;
  bool host_quantized; /* codes and scales from the host quantizer (OUTER_VEC / BLOCK128 / block-scaled routes) */
  /* nvfp4 (sm_100): alpha is fp32(s_a * s_b), the two fp32 tensor scales, known only after the host
   * quantizer ran; the backend sets plan.alpha before the call descriptor is built. */
  bool alpha_from_tensor_scales;
  /* fp8 output (out=e4m3): D holds e4m3 codes of scale_D * (the f32 result); C is then its own
   * bf16 buffer (cuBLASLt pairs an e4m3 D with a 16BF C; never read, beta = 0). scale_D is chosen
   * from the amax of a first pass (AMAX_D_POINTER): docs/decisions.md. */
  bool d_scaled;
  bool c_separate;
  /* CUBLASLT_MATMUL_DESC_FAST_ACCUM (int8_t, cublasLt.h: default 0): 1 for fp8 fast accumulation. */
  bool fast_accum;
  /* CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK (uint32_t, PRECIS_LT_REDUCTION_* bits): when D's type
   * is narrower than the compute type (fp16/bf16/fp8 out of a 32F GEMM), COMPUTE_TYPE only, so that a
   * split-K algorithm adds its partial sums as the cpu backend models them (in the accumulator's
   * precision, one rounding to the output at the end) and never in fp16/bf16 (INPLACE, OUTPUT_TYPE);
   * else ANY. Every candidate the heuristic offers, autotune's included, obeys it. */
  uint32_t reduction_scheme_mask;

  /* Writing the inputs. */
  precis_plan_write write_a, write_b;
  /* int8 scale vectors: one per row of the workload's A (batch*m, index b*m + i) and one per
   * column of each B (n, or batch*n for a rank-3 b, index b*n + j). */
  int64_t row_scale_count, col_scale_count;
  /* int8 dequantization into a float32 buffer of out_elements. */
  bool dequant;
  precis_plan_dequant dequant_step;
  int64_t out_elements;
  /* D is f16/bf16: widen every element of D to float32 (same layout) before reading back. */
  bool widen;
  precis_plan_read read; /* from D, the widened copy of D, or the dequantized buffer */

  /* int8: the fewest rows one GEMM is given (32; 1 for the other recipes). cuBLAS's int8 kernels
   * are not guaranteed for few rows (PyTorch calls cuBLAS int8 only with more than 16 rows and pads
   * to 32): rows_pad is at least this, through the same zero-padded-row path as fp8's alignment. */
  int64_t min_rows;
  /* alpha and beta of every call, in the plan's scale type (1 and 0: D = op(A)op(B), C unread).
   * int8 with int32 C/D accepts only 0 and 1 (precis_gemm_plan_check). */
  double alpha, beta;

  /* The GEMM as cuBLASLt calls. Normally one call with the layouts above. With cuBLASLt 13.1.x
   * (lt_version < 13.2), int8 with cuBLASLt's n (the workload's rows) above 65,536 or a batch
   * count above 1 may return CUBLAS_STATUS_NOT_SUPPORTED (CUDA 13.0 Update 1/2 release notes,
   * fixed in 13.2): the GEMM is then lt_batch_calls x lt_row_calls calls, each with the layouts
   * call_a/call_b/call_d (batch count 1, lt_call_rows rows), call i at the element offsets of
   * precis_gemm_plan_call_offsets(). */
  int lt_version;          /* the cublasLtGetVersion() planned for (major*10000 + minor*100 + patch); 0: unknown */
  int64_t lt_calls;        /* lt_batch_calls * lt_row_calls; 1 without a split */
  int64_t lt_batch_calls;  /* 1, or batch: a strided batch run as one call per batch matrix */
  int64_t lt_row_calls;    /* 1, or the chunks of at most 65,536 rows that cuBLASLt's n is split into */
  int64_t lt_call_rows;    /* cuBLASLt's n of each call (lt_n / lt_row_calls) */
  precis_lt_matrix call_a, call_b, call_d; /* the layouts each call is given (C is call_d) */
  int call_align_bytes;    /* alignment of every call's A/B/C/D pointer (power of two <= 256): the heuristic's
                            * MIN_ALIGNMENT preferences when below cuBLASLt's default 256 */
  const char *lt_split;    /* why the GEMM is split (for reports), NULL when it is one call */
} precis_gemm_plan;

/* cuBLASLt 13.2.0: the first version without the int8 limits above. */
#define PRECIS_LT_VERSION_INT8_FIXED 130200
/* cuBLASLt's n above which 13.1.x may reject int8. */
#define PRECIS_LT_INT8_MAX_N 65536

/* Plans one case. Fails with PRECIS_E_UNSUPPORTED when no route runs the spec or a dimension
 * cannot be expressed (cuBLASLt takes int32 batch counts and, in practice, int32 dimensions) and
 * PRECIS_E_INPUT for non-positive dimensions. */
precis_status precis_gemm_plan_make(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                    bool b_batched, precis_gemm_plan *plan);
/* The same for a known cuBLASLt version (cublasLtGetVersion(); 0: unknown, no version workaround):
 * precis_gemm_plan_make is this with 0. */
precis_status precis_gemm_plan_make_for(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                        bool b_batched, int lt_version, precis_gemm_plan *plan);

/* Checks what cuBLASLt rejects at call time and the plan alone decides: int8 with int32 output
 * needs alpha and beta in {0, 1}; a scale pointer (fp8) only on a narrow (fp8/fp4) operand.
 * PRECIS_E_UNSUPPORTED with the reason. Called by precis_gemm_plan_make_for and before every
 * descriptor is built (kernels/lt_matmul.c). */
precis_status precis_gemm_plan_check(const precis_gemm_plan *plan);

/* Fills a slot's scale tensor (t->elements floats at out) from the host quantizer's scales of the
 * workload operand it holds (t->holds): `scales` is their row-major grid with scale_cols columns,
 * one per group_rows x group_cols group of the operand's stored operand_rows x operand_cols matrix
 * (A: rows x k, B: k x n). Entries for padding, and gaps in the layout, hold 1. */
void precis_gemm_plan_fill_scales(const precis_lt_scale_tensor *t, const float *scales, int64_t scale_cols,
                                  int64_t group_rows, int64_t group_cols, int64_t operand_rows, int64_t operand_cols,
                                  float *out);

/* Places host-quantized codes (one byte each, row-major [w->rows, w->cols] per call, call c at
 * codes + c*src_stride) into a host image of the slot's buffer (dst, zeroed by the caller, the
 * slot's elements bytes) as the write says: element (r, col) of call c at c*dst_stride +
 * r*ld_out + col, or c*dst_stride + col*ld_out + r when transpose_out. The cuda backend uploads
 * the image as it is (fp8-rowwise, fp8-block). */
void precis_gemm_plan_place_codes(const precis_plan_write *w, const uint8_t *codes, uint8_t *dst);

/* Block-scaled routes (VEC32_UE8M0 / VEC16_UE4M3, sm_100): fills the slot's scale tensor
 * (t->elements bytes at out) from the host quantizer's scale codes (E8M0 for mx, E4M3 for nv), a
 * row-major grid with scale_cols columns, one per group_rows x group_cols group of the operand's
 * stored operand_rows x operand_cols matrix (A: rows x k, B: k x n), in cuBLASLt's 128x4 tiled
 * layout (precis_lt_block_scale_offset); padding holds pad_code. */
void precis_gemm_plan_fill_block_scales(const precis_lt_scale_tensor *t, const uint8_t *scale_codes,
                                        int64_t scale_cols, int64_t group_rows, int64_t group_cols,
                                        int64_t operand_rows, int64_t operand_cols, uint8_t pad_code, uint8_t *out);
/* Byte offset of the scale of outer index `outer` (a row of A, a column of B) and k-block
 * `inner_block` in the 128x4 tiled layout of a grid with inner_blocks k-blocks per outer index. */
int64_t precis_lt_block_scale_offset(int64_t outer, int64_t inner_block, int64_t inner_blocks);
/* precis_gemm_plan_place_codes for fp4 (e2m1 codes in the low nibble of each byte): element e of
 * the slot (offsets as there, in elements) goes to byte e/2, the low nibble when e is even. dst is
 * zeroed by the caller (precis_lt_matrix_bytes bytes). */
void precis_gemm_plan_place_codes4(const precis_plan_write *w, const uint8_t *codes, uint8_t *dst);
/* Bytes of a cuBLASLt matrix (fp4 counts half a byte per element) and of a scale tensor. */
long long precis_lt_matrix_bytes(const precis_lt_matrix *mat);
long long precis_lt_scale_tensor_bytes(const precis_lt_scale_tensor *t);

/* "OUTER_VEC_32F", "VEC128_32F", ... for a PRECIS_LT_SCALE_* value ("none" for -1). */
const char *precis_lt_scale_mode_name(int mode);

/* true for the data types that take a cuBLASLt scale pointer: fp8 (E4M3, E5M2) and fp4 (E2M1). */
bool precis_lt_type_is_narrow(int data_type);

/* Element offsets of call `call` (0 .. lt_calls-1) into A_lt, B_lt and D (C is D). */
void precis_gemm_plan_call_offsets(const precis_gemm_plan *plan, int64_t call, int64_t *a_offset, int64_t *b_offset,
                                   int64_t *d_offset);

/* Device bytes of the plan's buffers (A_lt, B_lt, D, scales, dequantized output or widened D). */
long long precis_gemm_plan_device_bytes(const precis_gemm_plan *plan);

/* true when D's data type holds fewer bytes than the compute type's accumulator (CUDA_R_16BF out of
 * CUBLAS_COMPUTE_32F): a reduction in the output type would round every partial sum. */
bool precis_lt_output_narrower(int d_type, int compute_type);
/* Whether an algorithm with this reduction scheme (cublasLtReductionScheme_t value, as
 * CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME reads) obeys the plan's mask; NONE always does. */
bool precis_gemm_plan_reduction_allowed(const precis_gemm_plan *plan, int scheme);
/* "NONE", "INPLACE", "COMPUTE_TYPE", "OUTPUT_TYPE" ("unknown" otherwise). */
const char *precis_lt_reduction_scheme_name(int scheme);

/* Bytes one evaluation's GEMM calls touch: A_lt, B_lt, D and a separate C (the operands as cuBLASLt
 * reads and writes them, padding included). */
long long precis_gemm_plan_operand_bytes(const precis_gemm_plan *plan);
/* The L2 view of a row (docs/cuda-backend.md, "L2 residency"): operand_bytes, l2_bytes, l2_source
 * and l2_resident = "yes" when operand_bytes fit in l2_bytes (then warm samples re-read the
 * operands from L2, not from HBM, and the row's time is an L2 time; --cold flushes it), "no" when
 * they do not, "unknown" when l2_bytes <= 0. */
void precis_plan_describe_l2(long long operand_bytes, long long l2_bytes, const char *l2_source,
                             precis_kv_list *details);
/* The L2 NVIDIA states for the data-center part of a compute capability (sm_70 V100 6 MiB, sm_80
 * A100 40 MiB, sm_90 H100/H200 50 MiB), for `precis explain --cc`; 0 when the capability does not
 * name one part. *part names it. */
long long precis_cc_stated_l2_bytes(int cc_major, int cc_minor, const char **part);

/* Every field of the plan as key/value pairs, in one place: the row details of a cuda run and
 * `precis explain` both print this list. A field added to the plan is added here. */
void precis_gemm_plan_describe(const precis_gemm_plan *plan, precis_kv_list *details);

const char *precis_plan_batch_mode_str(precis_plan_batch_mode mode);

#endif
