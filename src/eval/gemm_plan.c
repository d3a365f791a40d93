#include "gemm_plan.h"

#include <stdio.h>
#include <string.h>

#include "numerics/format.h"

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

static size_t data_type_bytes(int t) {
  switch (t) {
  case PRECIS_CUDA_R_64F: return 8;
  case PRECIS_CUDA_R_32F:
  case PRECIS_CUDA_R_32I: return 4;
  case PRECIS_CUDA_R_16F:
  case PRECIS_CUDA_R_16BF: return 2;
  default: return 1; /* 8I, E4M3, E5M2 */
  }
}

static const char *data_type_name(int t) {
  switch (t) {
  case PRECIS_CUDA_R_64F: return "CUDA_R_64F";
  case PRECIS_CUDA_R_32F: return "CUDA_R_32F";
  case PRECIS_CUDA_R_32I: return "CUDA_R_32I";
  case PRECIS_CUDA_R_16F: return "CUDA_R_16F";
  case PRECIS_CUDA_R_16BF: return "CUDA_R_16BF";
  case PRECIS_CUDA_R_8I: return "CUDA_R_8I";
  case PRECIS_CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
  case PRECIS_CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
  case PRECIS_CUDA_R_4F_E2M1: return "CUDA_R_4F_E2M1 (two per byte)";
  default: return "unknown";
  }
}

static const char *compute_type_name(int t) {
  switch (t) {
  case PRECIS_LT_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
  case PRECIS_LT_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
  case PRECIS_LT_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
  case PRECIS_LT_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
  case PRECIS_LT_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
  case PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT: return "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT";
  default: return "unknown";
  }
}

const char *precis_plan_batch_mode_str(precis_plan_batch_mode mode) {
  switch (mode) {
  case PRECIS_PLAN_BATCH_NONE: return "single";
  case PRECIS_PLAN_BATCH_FOLDED: return "folded into m (b shared)";
  case PRECIS_PLAN_BATCH_STRIDED: return "strided batched (b per batch element)";
  }
  return "unknown";
}

static void set_matrix(precis_lt_matrix *mat, int data_type, int64_t rows, int64_t cols, int32_t batch_count) {
  mat->data_type = data_type;
  mat->elem_bytes = data_type_bytes(data_type);
  mat->rows = rows;
  mat->cols = cols;
  mat->ld = rows; /* packed columns: the padding is in the dimensions themselves */
  mat->batch_count = batch_count;
  mat->batch_stride = batch_count > 1 ? mat->ld * cols : 0;
  mat->elements = mat->ld * cols * batch_count;
}

/* cudaDataType_t CUDA_R_4F_E2M1 (src/ includes no CUDA header; lt_matmul.c checks the value). */
#define LT_TYPE_4F_E2M1 33

bool precis_lt_type_is_narrow(int data_type) {
  return data_type == PRECIS_CUDA_R_8F_E4M3 || data_type == PRECIS_CUDA_R_8F_E5M2 || data_type == LT_TYPE_4F_E2M1;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

long long precis_lt_matrix_bytes(const precis_lt_matrix *mat) {
  /* fp4: two elements per byte (elem_bytes says 1, the smallest addressable unit). */
  if (mat->data_type == LT_TYPE_4F_E2M1) return (mat->elements + 1) / 2;
  return mat->elements * (long long)mat->elem_bytes;
}

static bool block_scale_mode(int mode) {
  return mode == PRECIS_LT_SCALE_VEC16_UE4M3 || mode == PRECIS_LT_SCALE_VEC32_UE8M0;
}

long long precis_lt_scale_tensor_bytes(const precis_lt_scale_tensor *t) {
  if (t->mode < 0) return 0;
  return t->elements * (block_scale_mode(t->mode) ? 1LL : 4LL); /* E8M0/UE4M3 bytes, else fp32 */
}

int64_t precis_lt_block_scale_offset(int64_t outer, int64_t inner_block, int64_t inner_blocks) {
  /* cuBLASLt's "1D block scaling factors layout": the outer x inner_blocks grid of scales, padded
   * to multiples of 128 x 4, is cut into 128x4 tiles of 512 bytes each, stored tile by tile with the
   * inner (k) tile index fastest; inside a tile, row r = 32*r_hi + r_lo and column c go to
   * r_lo*16 + r_hi*4 + c (four 32-row slabs interleaved so that one 16-byte load holds rows r_lo,
   * r_lo+32, r_lo+64, r_lo+96 for four k-blocks). Documented example (nvmath-python
   * get_block_scale_offset, NVFP4, M=K=128): (5, 2) -> 82, (5, 5) -> 593. */
  int64_t tiles_inner = ceil_div(inner_blocks, 4);
  int64_t tile = (outer / 128) * tiles_inner + inner_block / 4;
  int64_t r = outer % 128;
  return tile * 512 + (r % 32) * 16 + (r / 32) * 4 + inner_block % 4;
}

static size_t compute_type_bytes(int compute_type) {
  switch (compute_type) {
  case PRECIS_LT_COMPUTE_16F: return 2;
  case PRECIS_LT_COMPUTE_64F:
  case PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT: return 8;
  default: return 4; /* 32F, 32F_FAST_TF32, 32I */
  }
}

bool precis_lt_output_narrower(int d_type, int compute_type) {
  return data_type_bytes(d_type) < compute_type_bytes(compute_type);
}

bool precis_gemm_plan_reduction_allowed(const precis_gemm_plan *plan, int scheme) {
  return scheme == PRECIS_LT_REDUCTION_NONE || (plan->reduction_scheme_mask & (uint32_t)scheme) != 0;
}

const char *precis_lt_reduction_scheme_name(int scheme) {
  switch (scheme) {
  case PRECIS_LT_REDUCTION_NONE: return "NONE";
  case PRECIS_LT_REDUCTION_INPLACE: return "INPLACE";
  case PRECIS_LT_REDUCTION_COMPUTE_TYPE: return "COMPUTE_TYPE";
  case PRECIS_LT_REDUCTION_OUTPUT_TYPE: return "OUTPUT_TYPE";
  default: return "unknown";
  }
}

long long precis_gemm_plan_operand_bytes(const precis_gemm_plan *plan) {
  long long bytes = precis_lt_matrix_bytes(&plan->lt_a) + precis_lt_matrix_bytes(&plan->lt_b) +
                    precis_lt_matrix_bytes(&plan->lt_d);
  if (plan->c_separate) bytes += precis_lt_matrix_bytes(&plan->lt_c);
  return bytes;
}

void precis_plan_describe_l2(long long operand_bytes, long long l2_bytes, const char *l2_source,
                             precis_kv_list *details) {
  precis_kv_set_int(details, "operand_bytes", operand_bytes);
  if (l2_bytes > 0) precis_kv_set_int(details, "l2_bytes", l2_bytes);
  else precis_kv_set(details, "l2_bytes", NULL);
  precis_kv_set(details, "l2_source", l2_source ? l2_source : "unknown");
  precis_kv_set(details, "l2_resident", l2_bytes <= 0 ? "unknown" : operand_bytes <= l2_bytes ? "yes" : "no");
}

long long precis_cc_stated_l2_bytes(int cc_major, int cc_minor, const char **part) {
  /* Only capabilities that name one data-center part: sm_86/sm_89 span parts with 6 to 96 MB. */
  static const struct {
    int cc;
    long long mib;
    const char *part;
  } stated[] = {
      {70, 6, "V100, 6 MiB"},
      {80, 40, "A100, 40 MiB"},
      {90, 50, "H100/H200, 50 MiB: cudaDeviceProp.l2CacheSize 52428800"},
  };
  for (size_t i = 0; i < sizeof stated / sizeof stated[0]; i++)
    if (stated[i].cc == cc_major * 10 + cc_minor) {
      if (part) *part = stated[i].part;
      return stated[i].mib << 20;
    }
  if (part) *part = NULL;
  return 0;
}

/* The largest power of two <= 256 dividing `bytes` (256 for 0). */
static int pow2_alignment(int64_t bytes) {
  int align = 256;
  while (align > 1 && bytes % align != 0) align /= 2;
  return align;
}

/* The scale tensors of the two slots (A_lt = the workload's B, k_pad x n_pad; B_lt = the workload's
 * A, k_pad x rows_pad; both stored k-contiguous in the TN form). Layouts as cuBLASLt reads them
 * (docs/cuda-backend.md, "fp8 scale tensors"):
 *   OUTER_VEC_32F: one fp32 per column of the slot (per output row/column), contiguous;
 *   VEC128_32F (B_lt, the workload's A in 1x128 blocks): ceil(k/128) x rows_pad, the outer
 *     dimension contiguous (scale of k-block t of row i at i + t*rows_pad; rows_pad is a multiple
 *     of 16, so every k-block's column starts 16-byte aligned);
 *   BLK128x128_32F (A_lt, the workload's B in 128x128 blocks): ceil(k/128) x ceil(n/128), the
 *     k-blocks contiguous with their count padded to a multiple of 4 (16 bytes) as the leading
 *     dimension. */
static void plan_scale_tensors(precis_gemm_plan *plan, precis_lt_scaling scaling) {
  precis_lt_scale_tensor *a = &plan->lt_a_scales, *b = &plan->lt_b_scales;
  memset(a, 0, sizeof *a);
  memset(b, 0, sizeof *b);
  a->mode = b->mode = -1;
  a->holds = plan->lt_a_scale;
  b->holds = plan->lt_b_scale;
  int64_t kb = ceil_div(plan->k_pad, 128);
  switch (scaling) {
  case PRECIS_LT_SCALING_TENSOR_POINTERS:
    *a = (precis_lt_scale_tensor){PRECIS_LT_SCALE_SCALAR_32F, a->holds, 1, 1, plan->k_pad, plan->n_pad, 0, 0, 1};
    *b = (precis_lt_scale_tensor){PRECIS_LT_SCALE_SCALAR_32F, b->holds, 1, 1, plan->k_pad, plan->rows_pad, 0, 0, 1};
    break;
  case PRECIS_LT_SCALING_OUTER_VEC:
    *a = (precis_lt_scale_tensor){PRECIS_LT_SCALE_OUTER_VEC_32F, a->holds, 1, plan->n_pad, plan->k_pad, 1, 0, 1,
                                  plan->n_pad};
    *b = (precis_lt_scale_tensor){PRECIS_LT_SCALE_OUTER_VEC_32F, b->holds, 1, plan->rows_pad, plan->k_pad, 1, 0, 1,
                                  plan->rows_pad};
    break;
  case PRECIS_LT_SCALING_BLOCK_SCALED: {
    /* One byte per block of `block` elements along k of each outer index (a column of the slot),
     * grid kb x outer padded to 4 x 128 in the tiled layout (precis_lt_block_scale_offset). */
    bool nv = plan->spec.a.gran == PRECIS_GRAN_NV;
    int mode = nv ? PRECIS_LT_SCALE_VEC16_UE4M3 : PRECIS_LT_SCALE_VEC32_UE8M0;
    int64_t block = nv ? 16 : 32, kbs = ceil_div(plan->k_pad, block);
    *a = (precis_lt_scale_tensor){mode, a->holds, kbs, plan->n_pad, block, 1, 0, 0,
                                  round_up(kbs, 4) * round_up(plan->n_pad, 128)};
    *b = (precis_lt_scale_tensor){mode, b->holds, kbs, plan->rows_pad, block, 1, 0, 0,
                                  round_up(kbs, 4) * round_up(plan->rows_pad, 128)};
    break;
  }
  case PRECIS_LT_SCALING_BLOCK128: {
    int64_t nb = ceil_div(plan->n_pad, 128), ld = round_up(kb, 4);
    *a = (precis_lt_scale_tensor){PRECIS_LT_SCALE_BLK128X128_32F, a->holds, kb, nb, 128, 128, 1, ld, ld * nb};
    *b = (precis_lt_scale_tensor){PRECIS_LT_SCALE_VEC128_32F, b->holds, kb, plan->rows_pad, 128, 1, plan->rows_pad, 1,
                                  kb * plan->rows_pad};
    break;
  }
  default: break;
  }
}

precis_status precis_gemm_plan_make(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                    bool b_batched, precis_gemm_plan *plan) {
  return precis_gemm_plan_make_for(spec, m, n, k, batch, b_batched, 0, plan);
}

precis_status precis_gemm_plan_make_for(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                        bool b_batched, int lt_version, precis_gemm_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (!spec) return precis_fail(PRECIS_E_INPUT, "GEMM plan: no recipe spec given");
  char why[256];
  const precis_lt_route *route = precis_lt_route_find(spec, why, sizeof why);
  if (!route) return precis_fail(PRECIS_E_UNSUPPORTED, "%s", why);
  const char *name = route->name;
  /* A known cuBLASLt older than the route's (scale modes came with 12.9): refused with the need. */
  if (lt_version > 0 && route->min_cublaslt > 0 && lt_version < route->min_cublaslt)
    return precis_fail(PRECIS_E_UNSUPPORTED, "%s; planned for cuBLASLt %d.%d.%d", route->needs, lt_version / 10000,
                       lt_version / 100 % 100, lt_version % 100);
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return precis_fail(PRECIS_E_INPUT, "GEMM plan for %s: dimensions must be positive (m=%lld n=%lld k=%lld batch=%lld)",
                       name, (long long)m, (long long)n, (long long)k, (long long)batch);
  const precis_format *a_fmt = precis_format_get(spec->a.fmt), *b_fmt = precis_format_get(spec->b.fmt);
  const precis_format *compute_fmt = precis_format_get(spec->acc);
  const precis_format *out_fmt = precis_format_get(spec->out);

  bool int8 = route->scaling == PRECIS_LT_SCALING_DEQUANT;
  bool block_scaled = route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED;
  bool scale_tensors = route->scaling == PRECIS_LT_SCALING_OUTER_VEC || route->scaling == PRECIS_LT_SCALING_BLOCK128 ||
                       block_scaled;
  bool fp8 = route->scaling == PRECIS_LT_SCALING_TENSOR_POINTERS || scale_tensors;
  plan->spec = *spec;
  plan->route = route;
  plan->workspace_limit_bytes = PRECIS_LT_WORKSPACE_BYTES;
  plan->m = m;
  plan->n = n;
  plan->k = k;
  plan->batch = batch;
  plan->b_batched = b_batched && batch > 1;
  plan->tn = int8 || fp8;
  plan->fast_accum = route->fast_accum;

  /* cuBLASLt's requirements, in the workload's names (lt_m = n, lt_k = k, lt_n = rows):
   * int8 IMMA with regular ordering: m and k multiples of 4, lda/ldb/ldc multiples of 4, TN.
   * fp8: every dimension and leading dimension 16-byte aligned (16 e4m3 elements), TN.
   * fp32/tf32/fp16/bf16: no requirement (cuBLASLt picks kernels for the alignment it is given). */
  plan->align_rows = fp8 ? 16 : 1;
  plan->align_n = fp8 ? 16 : int8 ? 4 : 1;
  plan->align_k = fp8 ? 16 : int8 ? 4 : 1;
  /* Block-scaled (sm_100): k in whole groups of 4 scale blocks (128 = 4 x 32 for mx, 8 x 16 for
   * nv), so that every k-block of codes has its scale and the scale grid's inner padding to 4
   * covers zeros only; rows and n multiples of 32 (16 bytes of fp4). */
  if (block_scaled) plan->align_rows = 32, plan->align_n = 32, plan->align_k = 128;
  plan->min_rows = int8 ? 32 : 1;
  plan->lt_version = lt_version;
  /* cuBLASLt 13.1.x and int8: see lt_calls in gemm_plan.h. Earlier versions get the workaround too,
   * since the release notes do not say when the limits began; it costs launches, not results. */
  bool int8_limits = int8 && lt_version > 0 && lt_version < PRECIS_LT_VERSION_INT8_FIXED;

  if (batch == 1)
    plan->batch_mode = PRECIS_PLAN_BATCH_NONE;
  else
    plan->batch_mode = plan->b_batched ? PRECIS_PLAN_BATCH_STRIDED : PRECIS_PLAN_BATCH_FOLDED;
  bool strided = plan->batch_mode == PRECIS_PLAN_BATCH_STRIDED;
  int64_t gemms = strided ? batch : 1;
  /* A scale tensor has no batch stride in cuBLASLt (A_SCALE_POINTER is one tensor for the whole
   * call), so per-row/column/block scales of a b per batch element would need one call per batch
   * matrix; not planned. A b shared by the batch is folded into one GEMM and needs none. */
  if (scale_tensors && strided)
    return precis_fail(PRECIS_E_UNSUPPORTED,
                       "GEMM plan for %s: a b per batch element (strided batch, batch %lld) is not planned: cuBLASLt's "
                       "scale tensors (A/B_SCALE_POINTER with %s) have no batch stride; run it on the cpu backend",
                       name, (long long)batch,
                       route->scaling == PRECIS_LT_SCALING_OUTER_VEC ? "OUTER_VEC_32F"
                       : block_scaled                                 ? "VEC32_UE8M0/VEC16_UE4M3"
                                                                      : "VEC128_32F/BLK128x128_32F");

  const int64_t int32_max = 2147483647;
  if (m > int32_max / batch && !strided)
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: batch*m = %lld*%lld exceeds what cuBLASLt takes (int32)",
                       name, (long long)batch, (long long)m);
  plan->rows = strided ? m : m * batch;
  plan->rows_pad = round_up(plan->rows > plan->min_rows ? plan->rows : plan->min_rows, plan->align_rows);
  /* Row chunks of equal size (the last one is not shorter: the rows are padded with zeros to
   * chunks x chunk), so that every call has the same layouts. */
  plan->lt_row_calls = 1;
  if (int8_limits && plan->rows_pad > PRECIS_LT_INT8_MAX_N) {
    plan->lt_row_calls = ceil_div(plan->rows_pad, PRECIS_LT_INT8_MAX_N);
    plan->rows_pad = plan->lt_row_calls * round_up(ceil_div(plan->rows_pad, plan->lt_row_calls), plan->min_rows);
  }
  plan->lt_call_rows = plan->rows_pad / plan->lt_row_calls;
  plan->n_pad = round_up(n, plan->align_n);
  plan->k_pad = round_up(k, plan->align_k);
  if (plan->rows_pad > int32_max || plan->n_pad > int32_max || plan->k_pad > int32_max || batch > int32_max)
    return precis_fail(PRECIS_E_UNSUPPORTED,
                       "GEMM plan for %s: a dimension exceeds what cuBLASLt takes (int32): rows=%lld n=%lld k=%lld batch=%lld",
                       name, (long long)plan->rows_pad, (long long)plan->n_pad, (long long)plan->k_pad,
                       (long long)batch);
  /* Every buffer must be addressable: the largest is at most gemms * 2^31 * 2^31 elements. */
  const int64_t max_elements = (int64_t)1 << 46;
  if ((double)gemms * (double)plan->k_pad * (double)(plan->n_pad > plan->rows_pad ? plan->n_pad : plan->rows_pad) >
          (double)max_elements ||
      (double)gemms * (double)plan->n_pad * (double)plan->rows_pad > (double)max_elements)
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: operands of more than 2^46 elements", name);

  /* The cuBLASLt call. */
  plan->transa = plan->tn ? PRECIS_LT_OP_T : PRECIS_LT_OP_N;
  plan->transb = PRECIS_LT_OP_N;
  plan->lt_m = plan->n_pad;
  plan->lt_n = plan->rows_pad;
  plan->lt_k = plan->k_pad;
  plan->compute_type = route->compute_type;
  /* alpha and beta have the accumulator's type (16F, 32I, 64F, else 32F). */
  plan->scale_type = compute_fmt->id == PRECIS_FMT_F16 || compute_fmt->id == PRECIS_FMT_I32 ||
                             compute_fmt->id == PRECIS_FMT_F64
                         ? compute_fmt->cuda_data_type
                         : PRECIS_CUDA_R_32F;
  /* tf32 is carried as 32F. A_lt holds the workload's B, B_lt its A. */
  int a_lt_type = b_fmt->cuda_data_type, b_lt_type = a_fmt->cuda_data_type;
  /* int8: D holds the int32 accumulators; dequantization gives the recipe's float32 output. */
  int d_type = int8 ? compute_fmt->cuda_data_type : out_fmt->cuda_data_type;

  /* A_lt = the workload's B: op(A_lt) must be lt_m x lt_k (n x k). NN: A_lt is n x k column-major,
   * which is B row-major [k, n]. TN: A_lt is k x n column-major, which is B^T row-major [n, k]. */
  if (plan->tn)
    set_matrix(&plan->lt_a, a_lt_type, plan->lt_k, plan->lt_m, (int32_t)gemms);
  else
    set_matrix(&plan->lt_a, a_lt_type, plan->lt_m, plan->lt_k, (int32_t)gemms);
  plan->lt_a.zero_fill = plan->n_pad != n || plan->k_pad != k;
  /* B_lt = the workload's A: op(B_lt) = B_lt is lt_k x lt_n (k x rows) column-major, which is A
   * row-major [rows, k]. */
  set_matrix(&plan->lt_b, b_lt_type, plan->lt_k, plan->lt_n, (int32_t)gemms);
  plan->lt_b.zero_fill = plan->k_pad != k || plan->rows_pad != plan->rows;
  /* D: lt_m x lt_n column-major = C row-major [rows, n_pad]. cuBLASLt writes all of it. */
  set_matrix(&plan->lt_d, d_type, plan->lt_m, plan->lt_n, (int32_t)gemms);
  plan->lt_c = plan->lt_d;
  if (route->d_scaled) {
    /* cuBLASLt's fp8 type table pairs an e4m3 D with a 16BF (or 16F) C: its own buffer, never read. */
    plan->d_scaled = true;
    plan->c_separate = true;
    set_matrix(&plan->lt_c, PRECIS_CUDA_R_16BF, plan->lt_m, plan->lt_n, (int32_t)gemms);
  }
  plan->reduction_scheme_mask = precis_lt_output_narrower(plan->lt_d.data_type, plan->compute_type)
                                    ? PRECIS_LT_REDUCTION_COMPUTE_TYPE
                                    : PRECIS_LT_REDUCTION_ANY;
  plan->alpha = 1.0;
  plan->beta = 0.0;
  plan->lt_a_holds = PRECIS_PLAN_WORKLOAD_B;
  plan->lt_b_holds = PRECIS_PLAN_WORKLOAD_A;
  plan->lt_a_scale = fp8 ? PRECIS_PLAN_WORKLOAD_B : PRECIS_PLAN_NONE;
  plan->lt_b_scale = fp8 ? PRECIS_PLAN_WORKLOAD_A : PRECIS_PLAN_NONE;
  plan_scale_tensors(plan, route->scaling);
  plan->host_quantized = scale_tensors;
  /* nv: the two fp32 tensor scales are not in the block scales: alpha = fp32(s_a * s_b), set by the
   * backend once the host quantizer has them (the cpu backend multiplies the k-sum by the same
   * fp32 product). */
  plan->alpha_from_tensor_scales = block_scaled && spec->a.gran == PRECIS_GRAN_NV;

  /* Writing B: one launch per distinct b ([k, n] each). */
  plan->write_b = (precis_plan_write){
      .calls = gemms,
      .rows = k,
      .cols = n,
      .src_stride = k * n,
      .dst_stride = plan->lt_a.ld * plan->lt_a.cols,
      .scale_stride = n,
      .ld_out = plan->tn ? plan->k_pad : plan->n_pad,
      .transpose_out = plan->tn,
  };
  /* Writing A: a is [batch*m, k] contiguous; one launch unless padded rows separate the batch
   * elements (strided batches with m padded). */
  if (strided && plan->rows_pad != m)
    plan->write_a = (precis_plan_write){.calls = batch, .rows = m, .cols = k, .src_stride = m * k,
                                        .dst_stride = plan->lt_b.ld * plan->lt_b.cols, .scale_stride = m,
                                        .ld_out = plan->k_pad, .transpose_out = false};
  else
    plan->write_a = (precis_plan_write){.calls = 1, .rows = batch * m, .cols = k, .src_stride = 0, .dst_stride = 0,
                                        .scale_stride = batch * m, .ld_out = plan->k_pad, .transpose_out = false};
  plan->row_scale_count = batch * m;
  plan->col_scale_count = n * (plan->b_batched ? batch : 1);

  if (int8) {
    plan->dequant = true;
    if (strided)
      plan->dequant_step = (precis_plan_dequant){.calls = batch, .rows = m, .cols = n,
                                                 .acc_stride = plan->lt_d.ld * plan->lt_d.cols, .ld_acc = plan->n_pad,
                                                 .row_scale_stride = m, .col_scale_stride = n, .out_stride = m * n,
                                                 .ld_out = n};
    else
      plan->dequant_step = (precis_plan_dequant){.calls = 1, .rows = plan->rows, .cols = n, .ld_acc = plan->n_pad,
                                                 .ld_out = n};
    plan->out_elements = batch * m * n;
    plan->read = (precis_plan_read){.calls = 1, .rows = batch * m, .cols = n, .src_ld = n, .dst_ld = n};
  } else {
    plan->widen = d_type == PRECIS_CUDA_R_16F || d_type == PRECIS_CUDA_R_16BF;
    plan->out_elements = plan->widen || plan->d_scaled ? plan->lt_d.elements : 0; /* e4m3 D: decoded codes */
    if (strided && plan->rows_pad != m)
      plan->read = (precis_plan_read){.calls = batch, .rows = m, .cols = n,
                                      .src_stride = plan->lt_d.ld * plan->lt_d.cols, .src_ld = plan->n_pad,
                                      .dst_stride = m * n, .dst_ld = n};
    else
      plan->read = (precis_plan_read){.calls = 1, .rows = batch * m, .cols = n, .src_ld = plan->n_pad, .dst_ld = n};
  }

  /* The calls. A split keeps the buffers above (their layouts, strides, zero-fill, writes, dequant
   * and read-back) and only cuts the GEMM into calls of batch count 1 and lt_call_rows rows. */
  plan->lt_batch_calls = int8_limits && plan->lt_d.batch_count > 1 ? plan->lt_d.batch_count : 1;
  plan->lt_calls = plan->lt_batch_calls * plan->lt_row_calls;
  plan->call_a = plan->lt_a;
  plan->call_b = plan->lt_b;
  plan->call_d = plan->lt_d;
  if (plan->lt_calls > 1) {
    precis_lt_matrix *calls[] = {&plan->call_a, &plan->call_b, &plan->call_d};
    for (size_t i = 0; i < 3; i++) {
      calls[i]->batch_count = plan->lt_batch_calls > 1 ? 1 : calls[i]->batch_count;
      calls[i]->batch_stride = calls[i]->batch_count > 1 ? calls[i]->batch_stride : 0;
    }
    /* B_lt (k x rows) and D (n x rows) are cut along their columns, cuBLASLt's n. */
    plan->call_b.cols = plan->lt_call_rows;
    plan->call_d.cols = plan->lt_call_rows;
    plan->call_b.elements = plan->call_b.ld * plan->call_b.cols * plan->call_b.batch_count;
    plan->call_d.elements = plan->call_d.ld * plan->call_d.cols * plan->call_d.batch_count;
    plan->call_a.elements = plan->call_a.ld * plan->call_a.cols * plan->call_a.batch_count;
    plan->lt_split = plan->lt_batch_calls > 1 && plan->lt_row_calls > 1
                         ? "cuBLASLt < 13.2 may reject int8 with batch > 1 or n > 65536: one call per batch matrix "
                           "and row chunk"
                     : plan->lt_batch_calls > 1 ? "cuBLASLt < 13.2 may reject int8 with batch > 1: one call per batch matrix"
                                                : "cuBLASLt < 13.2 may reject int8 with n > 65536: rows split into chunks";
  }
  plan->call_align_bytes = 256;
  for (int64_t c = 0; c < plan->lt_calls; c++) {
    int64_t offsets[3];
    precis_gemm_plan_call_offsets(plan, c, &offsets[0], &offsets[1], &offsets[2]);
    const precis_lt_matrix *mats[] = {&plan->lt_a, &plan->lt_b, &plan->lt_d};
    for (size_t i = 0; i < 3; i++) {
      int align = pow2_alignment(offsets[i] * (int64_t)mats[i]->elem_bytes);
      if (align < plan->call_align_bytes) plan->call_align_bytes = align;
    }
  }
  return precis_gemm_plan_check(plan);
}

void precis_gemm_plan_call_offsets(const precis_gemm_plan *plan, int64_t call, int64_t *a_offset, int64_t *b_offset,
                                   int64_t *d_offset) {
  int64_t row_calls = plan->lt_row_calls > 0 ? plan->lt_row_calls : 1;
  int64_t g = plan->lt_batch_calls > 1 ? call / row_calls : 0, chunk = call % row_calls;
  *a_offset = g * plan->lt_a.batch_stride;
  *b_offset = g * plan->lt_b.batch_stride + chunk * plan->lt_call_rows * plan->lt_b.ld;
  *d_offset = g * plan->lt_d.batch_stride + chunk * plan->lt_call_rows * plan->lt_d.ld;
}

precis_status precis_gemm_plan_check(const precis_gemm_plan *plan) {
  const char *name = plan->route ? plan->route->name : "?";
  if (plan->compute_type == PRECIS_LT_COMPUTE_32I && plan->lt_d.data_type == PRECIS_CUDA_R_32I &&
      ((plan->alpha != 0.0 && plan->alpha != 1.0) || (plan->beta != 0.0 && plan->beta != 1.0)))
    return precis_fail(PRECIS_E_UNSUPPORTED,
                       "GEMM plan for %s: int8 with int32 output takes alpha and beta in {0, 1} only (alpha %g, beta %g)",
                       name, plan->alpha, plan->beta);
  const struct {
    precis_plan_operand scale;
    const precis_lt_matrix *mat;
    const char *slot;
  } slots[] = {{plan->lt_a_scale, &plan->lt_a, "A"}, {plan->lt_b_scale, &plan->lt_b, "B"}};
  for (size_t i = 0; i < 2; i++)
    if (slots[i].scale != PRECIS_PLAN_NONE && !precis_lt_type_is_narrow(slots[i].mat->data_type))
      return precis_fail(PRECIS_E_UNSUPPORTED,
                         "GEMM plan for %s: a scale pointer on cuBLASLt's %s, a %s operand (only fp8/fp4 take one)",
                         name, slots[i].slot, data_type_name(slots[i].mat->data_type));
  const precis_lt_scale_tensor *st[2] = {&plan->lt_a_scales, &plan->lt_b_scales};
  const precis_lt_matrix *slot_mats[2] = {&plan->lt_a, &plan->lt_b};
  /* cuBLASLt pairs BLK128x128_32F only with VEC128_32F on the other operand, never BLK x BLK. */
  bool blk_a = st[0]->mode == PRECIS_LT_SCALE_BLK128X128_32F, blk_b = st[1]->mode == PRECIS_LT_SCALE_BLK128X128_32F;
  bool vec_a = st[0]->mode == PRECIS_LT_SCALE_VEC128_32F, vec_b = st[1]->mode == PRECIS_LT_SCALE_VEC128_32F;
  if ((blk_a || blk_b || vec_a || vec_b) && !((blk_a && vec_b) || (vec_a && blk_b) || (vec_a && vec_b)))
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: scale modes %s x %s: cuBLASLt takes 128-blocks as "
                       "VEC128_32F x BLK128x128_32F (either order) or VEC128_32F x VEC128_32F, never BLK x BLK", name,
                       precis_lt_scale_mode_name(st[0]->mode), precis_lt_scale_mode_name(st[1]->mode));
  for (size_t i = 0; i < 2; i++) {
    int mode = st[i]->mode;
    if (mode > PRECIS_LT_SCALE_SCALAR_32F && !precis_lt_type_is_narrow(slot_mats[i]->data_type))
      return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: a %s scale tensor on cuBLASLt's %s, a %s operand",
                         name, precis_lt_scale_mode_name(mode), slots[i].slot, data_type_name(slot_mats[i]->data_type));
    /* cuBLASLt reads every scale column with 16-byte loads: each must start 16-byte aligned. */
    int64_t col_stride = mode == PRECIS_LT_SCALE_BLK128X128_32F ? st[i]->outer_stride
                         : mode == PRECIS_LT_SCALE_VEC128_32F  ? st[i]->inner_stride
                                                               : 0;
    if ((col_stride * 4) % 16 != 0)
      return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: the %s scale tensor of %s has a leading dimension of "
                         "%lld floats, not a multiple of 16 bytes", name, precis_lt_scale_mode_name(mode), slots[i].slot,
                         (long long)col_stride);
  }
  if (plan->d_scaled && !precis_lt_type_is_narrow(plan->lt_d.data_type))
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: scale_D/amax_D on a %s output (fp8 outputs only)", name,
                       data_type_name(plan->lt_d.data_type));
  if (plan->lt_calls < 1 || plan->lt_calls != plan->lt_batch_calls * plan->lt_row_calls ||
      plan->lt_call_rows * plan->lt_row_calls != plan->lt_n)
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: inconsistent split (%lld calls, %lld x %lld rows)", name,
                       (long long)plan->lt_calls, (long long)plan->lt_row_calls, (long long)plan->lt_call_rows);
  return PRECIS_OK;
}

long long precis_gemm_plan_device_bytes(const precis_gemm_plan *plan) {
  long long bytes = precis_lt_matrix_bytes(&plan->lt_a) + precis_lt_matrix_bytes(&plan->lt_b) +
                    precis_lt_matrix_bytes(&plan->lt_d) + plan->out_elements * 4LL;
  if (plan->dequant) bytes += (plan->row_scale_count + plan->col_scale_count) * 4LL;
  /* Every scale at its real size (one float per tensor scale, the whole padded tensor otherwise). */
  if (plan->lt_a_scale != PRECIS_PLAN_NONE)
    bytes += precis_lt_scale_tensor_bytes(&plan->lt_a_scales) + precis_lt_scale_tensor_bytes(&plan->lt_b_scales);
  if (plan->d_scaled) bytes += 2 * 4; /* scale_D and amax_D */
  if (plan->c_separate) bytes += plan->lt_c.elements * (long long)plan->lt_c.elem_bytes;
  return bytes;
}

static const char *operand_name(precis_plan_operand o) {
  return o == PRECIS_PLAN_WORKLOAD_A ? "workload a" : o == PRECIS_PLAN_WORKLOAD_B ? "workload b" : "none";
}

static const char *scaling_name(precis_lt_scaling s) {
  switch (s) {
  case PRECIS_LT_SCALING_NONE: return "none";
  case PRECIS_LT_SCALING_DEQUANT: return "int32 accumulators, then dequant c = s_a[i]*s_b[j]*acc (row/column vectors)";
  case PRECIS_LT_SCALING_TENSOR_POINTERS: return "per-tensor scales through A_SCALE_POINTER/B_SCALE_POINTER";
  case PRECIS_LT_SCALING_OUTER_VEC:
    return "A per row x B per column (OUTER_VEC_32F vectors through A/B_SCALE_POINTER), codes and scales from the host "
           "quantizer";
  case PRECIS_LT_SCALING_BLOCK128:
    return "A 1x128 (VEC128_32F) x B 128x128 (BLK128x128_32F) scale tensors through A/B_SCALE_POINTER, codes and scales "
           "from the host quantizer";
  case PRECIS_LT_SCALING_BLOCK_SCALED:
    return "block scales inside the MMA (VEC32_UE8M0 for mx, VEC16_UE4M3 for nv) through A/B_SCALE_POINTER in the "
           "128x4 tiled layout, codes (fp4 two per byte) and scales from the host quantizer";
  }
  return "unknown";
}

static void describe_matrix(precis_kv_list *details, const char *key, const precis_lt_matrix *mat) {
  char buf[200];
  snprintf(buf, sizeof buf, "%s %lldx%lld col-major, ld %lld, batch %d (stride %lld), %lld elements%s",
           data_type_name(mat->data_type), (long long)mat->rows, (long long)mat->cols, (long long)mat->ld,
           (int)mat->batch_count, (long long)mat->batch_stride, (long long)mat->elements,
           mat->zero_fill ? ", zeroed (padding)" : "");
  precis_kv_set(details, key, buf);
}

void precis_gemm_plan_fill_scales(const precis_lt_scale_tensor *t, const float *scales, int64_t scale_cols,
                                  int64_t group_rows, int64_t group_cols, int64_t operand_rows, int64_t operand_cols,
                                  float *out) {
  for (int64_t i = 0; i < t->elements; i++) out[i] = 1.0f;
  bool holds_a = t->holds == PRECIS_PLAN_WORKLOAD_A;
  for (int64_t r = 0; r < t->grid_rows; r++)
    for (int64_t c = 0; c < t->grid_cols; c++) {
      /* The cell's first element of the slot: k index p, outer index j; in the operand, A is
       * [rows, k] (row j, column p) and B is [k, n] (row p, column j). */
      int64_t p = r * t->block_inner, j = c * t->block_outer;
      int64_t row = holds_a ? j : p, col = holds_a ? p : j;
      if (row >= operand_rows || col >= operand_cols) continue; /* padding */
      out[r * t->inner_stride + c * t->outer_stride] = scales[(row / group_rows) * scale_cols + col / group_cols];
    }
}

void precis_gemm_plan_fill_block_scales(const precis_lt_scale_tensor *t, const uint8_t *scale_codes,
                                        int64_t scale_cols, int64_t group_rows, int64_t group_cols,
                                        int64_t operand_rows, int64_t operand_cols, uint8_t pad_code, uint8_t *out) {
  for (int64_t i = 0; i < t->elements; i++) out[i] = pad_code;
  bool holds_a = t->holds == PRECIS_PLAN_WORKLOAD_A;
  for (int64_t kb = 0; kb < t->grid_rows; kb++)
    for (int64_t j = 0; j < t->grid_cols; j++) {
      int64_t p = kb * t->block_inner; /* first k of the block; A is [rows, k], B is [k, n] */
      int64_t row = holds_a ? j : p, col = holds_a ? p : j;
      if (row >= operand_rows || col >= operand_cols) continue; /* padding */
      out[precis_lt_block_scale_offset(j, kb, t->grid_rows)] =
          scale_codes[(row / group_rows) * scale_cols + col / group_cols];
    }
}

void precis_gemm_plan_place_codes4(const precis_plan_write *w, const uint8_t *codes, uint8_t *dst) {
  for (int64_t c = 0; c < w->calls; c++) {
    const uint8_t *src = codes + c * w->src_stride;
    int64_t base = c * w->dst_stride; /* in elements: two per byte */
    for (int64_t r = 0; r < w->rows; r++)
      for (int64_t col = 0; col < w->cols; col++) {
        int64_t e = base + (w->transpose_out ? col * w->ld_out + r : r * w->ld_out + col);
        uint8_t code = src[r * w->cols + col] & 0x0fu;
        /* Element 2i in the low nibble, 2i+1 in the high one (cuda_fp4.h __nv_fp4x2_storage_t:
         * __nv_cvt_float2_to_fp4x2 puts .x low, .y high). */
        dst[e / 2] = (uint8_t)(e % 2 ? (dst[e / 2] & 0x0fu) | (code << 4) : (dst[e / 2] & 0xf0u) | code);
      }
  }
}

void precis_gemm_plan_place_codes(const precis_plan_write *w, const uint8_t *codes, uint8_t *dst) {
  for (int64_t c = 0; c < w->calls; c++) {
    const uint8_t *src = codes + c * w->src_stride;
    uint8_t *out = dst + c * w->dst_stride;
    for (int64_t r = 0; r < w->rows; r++)
      for (int64_t col = 0; col < w->cols; col++)
        out[w->transpose_out ? col * w->ld_out + r : r * w->ld_out + col] = src[r * w->cols + col];
  }
}

const char *precis_lt_scale_mode_name(int mode) {
  switch (mode) {
  case PRECIS_LT_SCALE_SCALAR_32F: return "SCALAR_32F";
  case PRECIS_LT_SCALE_VEC16_UE4M3: return "VEC16_UE4M3";
  case PRECIS_LT_SCALE_VEC32_UE8M0: return "VEC32_UE8M0";
  case PRECIS_LT_SCALE_OUTER_VEC_32F: return "OUTER_VEC_32F";
  case PRECIS_LT_SCALE_VEC128_32F: return "VEC128_32F";
  case PRECIS_LT_SCALE_BLK128X128_32F: return "BLK128x128_32F";
  default: return "none";
  }
}

static void describe_scales(precis_kv_list *details, const char *key, const precis_lt_scale_tensor *t) {
  char buf[240];
  if (t->mode < 0) return;
  if (block_scale_mode(t->mode))
    snprintf(buf, sizeof buf,
             "%s: %lld k-blocks of %lld x %lld %s, one %s byte each, padded to %lldx%lld in 128x4 tiles of 512 "
             "bytes (k tiles fastest), %lld bytes",
             precis_lt_scale_mode_name(t->mode), (long long)t->grid_rows, (long long)t->block_inner,
             (long long)t->grid_cols, t->holds == PRECIS_PLAN_WORKLOAD_A ? "rows of a" : "columns of b",
             t->mode == PRECIS_LT_SCALE_VEC16_UE4M3 ? "UE4M3" : "UE8M0", (long long)round_up(t->grid_rows, 4),
             (long long)round_up(t->grid_cols, 128), (long long)precis_lt_scale_tensor_bytes(t));
  else if (t->mode == PRECIS_LT_SCALE_SCALAR_32F)
    snprintf(buf, sizeof buf, "SCALAR_32F: one fp32 (%s), 4 bytes", t->holds == PRECIS_PLAN_WORKLOAD_A ? "a" : "b");
  else if (t->mode == PRECIS_LT_SCALE_OUTER_VEC_32F)
    snprintf(buf, sizeof buf, "OUTER_VEC_32F: %lld fp32 (one per %s, padding 1), contiguous, %lld bytes, 16-byte aligned",
             (long long)t->grid_cols, t->holds == PRECIS_PLAN_WORKLOAD_A ? "row of a" : "column of b",
             (long long)t->elements * 4);
  else
    snprintf(buf, sizeof buf,
             "%s: %lldx%lld fp32 grid of %lldx%lld blocks (k x %s), element (t,u) at t*%lld + u*%lld (%s contiguous), "
             "%lld floats = %lld bytes, columns 16-byte aligned",
             precis_lt_scale_mode_name(t->mode), (long long)t->grid_rows, (long long)t->grid_cols,
             (long long)t->block_inner, (long long)t->block_outer, t->holds == PRECIS_PLAN_WORKLOAD_A ? "rows" : "n",
             (long long)t->inner_stride, (long long)t->outer_stride, t->inner_stride == 1 ? "k-blocks" : "outer index",
             (long long)t->elements, (long long)t->elements * 4);
  precis_kv_set(details, key, buf);
}

static void describe_write(precis_kv_list *details, const char *key, const precis_plan_write *w) {
  char buf[200];
  snprintf(buf, sizeof buf, "%lld call(s) of %lldx%lld, src stride %lld, dst stride %lld, scale stride %lld, ld_out %lld%s",
           (long long)w->calls, (long long)w->rows, (long long)w->cols, (long long)w->src_stride,
           (long long)w->dst_stride, (long long)w->scale_stride, (long long)w->ld_out,
           w->transpose_out ? ", written transposed" : "");
  precis_kv_set(details, key, buf);
}

void precis_gemm_plan_describe(const precis_gemm_plan *plan, precis_kv_list *details) {
  char buf[200];
  precis_kv_set(details, "lt_route", plan->route ? plan->route->name : "none");
  precis_kv_set(details, "lt_op", plan->tn ? "TN" : "NN");
  precis_kv_set(details, "lt_operands", "D = op(A_lt)*op(B_lt) column-major with A_lt = workload b, B_lt = workload a "
                                        "(C^T = B^T*A^T)");
  precis_kv_set(details, "transa", plan->transa == PRECIS_LT_OP_T ? "CUBLAS_OP_T" : "CUBLAS_OP_N");
  precis_kv_set(details, "transb", plan->transb == PRECIS_LT_OP_T ? "CUBLAS_OP_T" : "CUBLAS_OP_N");
  precis_kv_set_int(details, "lt_m", plan->lt_m);
  precis_kv_set_int(details, "lt_n", plan->lt_n);
  precis_kv_set_int(details, "lt_k", plan->lt_k);
  precis_kv_set_int(details, "lda", plan->lt_a.ld);
  precis_kv_set_int(details, "ldb", plan->lt_b.ld);
  precis_kv_set_int(details, "ldc", plan->lt_c.ld);
  precis_kv_set_int(details, "ldd", plan->lt_d.ld);
  if (plan->c_separate)
    snprintf(buf, sizeof buf, "A %s, B %s, C %s, D %s, scale %s", data_type_name(plan->lt_a.data_type),
             data_type_name(plan->lt_b.data_type), data_type_name(plan->lt_c.data_type),
             data_type_name(plan->lt_d.data_type), data_type_name(plan->scale_type));
  else
    snprintf(buf, sizeof buf, "A %s, B %s, C/D %s, scale %s", data_type_name(plan->lt_a.data_type),
             data_type_name(plan->lt_b.data_type), data_type_name(plan->lt_d.data_type),
             data_type_name(plan->scale_type));
  precis_kv_set(details, "lt_types", buf);
  precis_kv_set(details, "lt_compute_type", compute_type_name(plan->compute_type));
  precis_kv_set(details, "lt_scale_type", data_type_name(plan->scale_type));
  if (plan->reduction_scheme_mask == PRECIS_LT_REDUCTION_COMPUTE_TYPE)
    snprintf(buf, sizeof buf,
             "0x%x COMPUTE_TYPE: split-K partial sums added in %s, not in the narrower %s output (INPLACE and "
             "OUTPUT_TYPE excluded)",
             (unsigned)plan->reduction_scheme_mask, compute_type_name(plan->compute_type),
             data_type_name(plan->lt_d.data_type));
  else
    snprintf(buf, sizeof buf, "0x%x any: %s output is as wide as %s", (unsigned)plan->reduction_scheme_mask,
             data_type_name(plan->lt_d.data_type), compute_type_name(plan->compute_type));
  precis_kv_set(details, "lt_reduction_scheme_mask", buf);
  precis_kv_set(details, "fast_accum",
                plan->fast_accum ? "CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1: the k-sum stays in the fp8 tensor core's "
                                   "accumulator, never promoted to fp32"
                                 : "0 (cuBLASLt default)");
  describe_matrix(details, "lt_a", &plan->lt_a);
  describe_matrix(details, "lt_b", &plan->lt_b);
  describe_matrix(details, "lt_c", &plan->lt_c);
  describe_matrix(details, "lt_d", &plan->lt_d);
  precis_kv_set(details, "scaling", scaling_name(plan->route ? plan->route->scaling : PRECIS_LT_SCALING_NONE));
  precis_kv_set(details, "a_scale_pointer", operand_name(plan->lt_a_scale));
  precis_kv_set(details, "b_scale_pointer", operand_name(plan->lt_b_scale));
  describe_scales(details, "a_scale_mode", &plan->lt_a_scales);
  describe_scales(details, "b_scale_mode", &plan->lt_b_scales);
  if (plan->alpha_from_tensor_scales)
    precis_kv_set(details, "alpha", "fp32(s_a * s_b): the nv fp32 tensor scales of a and b (the block scales hold the "
                                    "rest), set once the host quantizer has them");
  if (plan->host_quantized)
    precis_kv_set(details, "quantize", "on the host (the cpu backend's quantizer): codes copied per write_a/write_b, "
                                       "scale tensors uploaded");
  if (plan->d_scaled)
    precis_kv_set(details, "d_scale", "e4m3 D = fp8(scale_D * result) with scale_D = 1/s, s = amax_D/448 from a first "
                                      "pass (AMAX_D_POINTER); C is its own bf16 buffer (never read)");
  precis_kv_set(details, "batch_mode", precis_plan_batch_mode_str(plan->batch_mode));
  precis_kv_set_int(details, "lt_batch_count", plan->lt_d.batch_count);
  snprintf(buf, sizeof buf, "rows %lld->%lld, n %lld->%lld, k %lld->%lld (zeros)", (long long)plan->rows,
           (long long)plan->rows_pad, (long long)plan->n, (long long)plan->n_pad, (long long)plan->k,
           (long long)plan->k_pad);
  precis_kv_set(details, "padding", buf);
  if (plan->min_rows > 1) precis_kv_set_int(details, "min_rows", plan->min_rows);
  precis_kv_set_int(details, "lt_calls", plan->lt_calls);
  if (plan->lt_split) precis_kv_set(details, "lt_split", plan->lt_split);
  if (plan->call_align_bytes < 256) precis_kv_set_int(details, "lt_call_align_bytes", plan->call_align_bytes);
  snprintf(buf, sizeof buf, "rows %d, n %d, k %d", plan->align_rows, plan->align_n, plan->align_k);
  precis_kv_set(details, "alignment", buf);
  describe_write(details, "write_a", &plan->write_a);
  describe_write(details, "write_b", &plan->write_b);
  precis_kv_set_int(details, "row_scale_count", plan->row_scale_count);
  precis_kv_set_int(details, "col_scale_count", plan->col_scale_count);
  if (plan->dequant) {
    const precis_plan_dequant *q = &plan->dequant_step;
    snprintf(buf, sizeof buf,
             "%lld call(s) of %lldx%lld, acc stride %lld, ld_acc %lld, row/col scale strides %lld/%lld, out stride %lld, "
             "ld_out %lld",
             (long long)q->calls, (long long)q->rows, (long long)q->cols, (long long)q->acc_stride,
             (long long)q->ld_acc, (long long)q->row_scale_stride, (long long)q->col_scale_stride,
             (long long)q->out_stride, (long long)q->ld_out);
    precis_kv_set(details, "dequant", buf);
  } else {
    precis_kv_set(details, "dequant", "none");
  }
  precis_kv_set(details, "widen", plan->widen ? "D widened to float32 before read-back" : "none");
  precis_kv_set_int(details, "out_elements", plan->out_elements);
  snprintf(buf, sizeof buf, "%lld copy(ies) of %lldx%lld, src stride %lld, src ld %lld, dst stride %lld, dst ld %lld",
           (long long)plan->read.calls, (long long)plan->read.rows, (long long)plan->read.cols,
           (long long)plan->read.src_stride, (long long)plan->read.src_ld, (long long)plan->read.dst_stride,
           (long long)plan->read.dst_ld);
  precis_kv_set(details, "read", buf);
  precis_kv_set_int(details, "device_bytes", precis_gemm_plan_device_bytes(plan));
  precis_kv_set_int(details, "workspace_limit_bytes", (long long)plan->workspace_limit_bytes);
}
