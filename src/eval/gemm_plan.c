#include "gemm_plan.h"

#include <stdio.h>
#include <string.h>

#include "format.h"

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
  default: return "unknown";
  }
}

static const char *compute_type_name(int t) {
  switch (t) {
  case PRECIS_LT_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
  case PRECIS_LT_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
  case PRECIS_LT_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
  case PRECIS_LT_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
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

precis_status precis_gemm_plan_make(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                    bool b_batched, precis_gemm_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (!spec) return precis_fail(PRECIS_E_INPUT, "GEMM plan: no recipe spec given");
  char why[256];
  const precis_lt_route *route = precis_lt_route_find(spec, why, sizeof why);
  if (!route) return precis_fail(PRECIS_E_UNSUPPORTED, "%s", why);
  const char *name = route->name;
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return precis_fail(PRECIS_E_INPUT, "GEMM plan for %s: dimensions must be positive (m=%lld n=%lld k=%lld batch=%lld)",
                       name, (long long)m, (long long)n, (long long)k, (long long)batch);
  const precis_format *a_fmt = precis_format_get(spec->a.fmt), *b_fmt = precis_format_get(spec->b.fmt);
  const precis_format *compute_fmt = precis_format_get(spec->acc);
  const precis_format *out_fmt = precis_format_get(spec->out);

  bool int8 = route->scaling == PRECIS_LT_SCALING_DEQUANT;
  bool fp8 = route->scaling == PRECIS_LT_SCALING_TENSOR_POINTERS;
  plan->spec = *spec;
  plan->route = route;
  plan->workspace_limit_bytes = PRECIS_LT_WORKSPACE_BYTES;
  plan->m = m;
  plan->n = n;
  plan->k = k;
  plan->batch = batch;
  plan->b_batched = b_batched && batch > 1;
  plan->tn = int8 || fp8;

  /* cuBLASLt's requirements, in the workload's names (lt_m = n, lt_k = k, lt_n = rows):
   * int8 IMMA with regular ordering: m and k multiples of 4, lda/ldb/ldc multiples of 4, TN.
   * fp8: every dimension and leading dimension 16-byte aligned (16 e4m3 elements), TN.
   * fp32/tf32/fp16/bf16: no requirement (cuBLASLt picks kernels for the alignment it is given). */
  plan->align_rows = fp8 ? 16 : 1;
  plan->align_n = fp8 ? 16 : int8 ? 4 : 1;
  plan->align_k = fp8 ? 16 : int8 ? 4 : 1;

  if (batch == 1)
    plan->batch_mode = PRECIS_PLAN_BATCH_NONE;
  else
    plan->batch_mode = plan->b_batched ? PRECIS_PLAN_BATCH_STRIDED : PRECIS_PLAN_BATCH_FOLDED;
  bool strided = plan->batch_mode == PRECIS_PLAN_BATCH_STRIDED;
  int64_t gemms = strided ? batch : 1;

  const int64_t int32_max = 2147483647;
  if (m > int32_max / batch && !strided)
    return precis_fail(PRECIS_E_UNSUPPORTED, "GEMM plan for %s: batch*m = %lld*%lld exceeds what cuBLASLt takes (int32)",
                       name, (long long)batch, (long long)m);
  plan->rows = strided ? m : m * batch;
  plan->rows_pad = round_up(plan->rows, plan->align_rows);
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
  /* alpha and beta have the accumulator's type (16F, 32I, else 32F). */
  plan->scale_type = compute_fmt->id == PRECIS_FMT_F16 || compute_fmt->id == PRECIS_FMT_I32
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
  plan->lt_a_holds = PRECIS_PLAN_WORKLOAD_B;
  plan->lt_b_holds = PRECIS_PLAN_WORKLOAD_A;
  plan->lt_a_scale = fp8 ? PRECIS_PLAN_WORKLOAD_B : PRECIS_PLAN_NONE;
  plan->lt_b_scale = fp8 ? PRECIS_PLAN_WORKLOAD_A : PRECIS_PLAN_NONE;

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
    plan->out_elements = plan->widen ? plan->lt_d.elements : 0;
    if (strided && plan->rows_pad != m)
      plan->read = (precis_plan_read){.calls = batch, .rows = m, .cols = n,
                                      .src_stride = plan->lt_d.ld * plan->lt_d.cols, .src_ld = plan->n_pad,
                                      .dst_stride = m * n, .dst_ld = n};
    else
      plan->read = (precis_plan_read){.calls = 1, .rows = batch * m, .cols = n, .src_ld = plan->n_pad, .dst_ld = n};
  }
  return PRECIS_OK;
}

long long precis_gemm_plan_device_bytes(const precis_gemm_plan *plan) {
  long long bytes = plan->lt_a.elements * (long long)plan->lt_a.elem_bytes +
                    plan->lt_b.elements * (long long)plan->lt_b.elem_bytes +
                    plan->lt_d.elements * (long long)plan->lt_d.elem_bytes + plan->out_elements * 4LL;
  if (plan->dequant) bytes += (plan->row_scale_count + plan->col_scale_count) * 4LL;
  if (plan->lt_a_scale != PRECIS_PLAN_NONE) bytes += 2 * 4;
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
  snprintf(buf, sizeof buf, "A %s, B %s, C/D %s, scale %s", data_type_name(plan->lt_a.data_type),
           data_type_name(plan->lt_b.data_type), data_type_name(plan->lt_d.data_type), data_type_name(plan->scale_type));
  precis_kv_set(details, "lt_types", buf);
  precis_kv_set(details, "lt_compute_type", compute_type_name(plan->compute_type));
  precis_kv_set(details, "lt_scale_type", data_type_name(plan->scale_type));
  describe_matrix(details, "lt_a", &plan->lt_a);
  describe_matrix(details, "lt_b", &plan->lt_b);
  describe_matrix(details, "lt_c", &plan->lt_c);
  describe_matrix(details, "lt_d", &plan->lt_d);
  precis_kv_set(details, "scaling", scaling_name(plan->route ? plan->route->scaling : PRECIS_LT_SCALING_NONE));
  precis_kv_set(details, "a_scale_pointer", operand_name(plan->lt_a_scale));
  precis_kv_set(details, "b_scale_pointer", operand_name(plan->lt_b_scale));
  precis_kv_set(details, "batch_mode", precis_plan_batch_mode_str(plan->batch_mode));
  precis_kv_set_int(details, "lt_batch_count", plan->lt_d.batch_count);
  snprintf(buf, sizeof buf, "rows %lld->%lld, n %lld->%lld, k %lld->%lld (zeros)", (long long)plan->rows,
           (long long)plan->rows_pad, (long long)plan->n, (long long)plan->n_pad, (long long)plan->k,
           (long long)plan->k_pad);
  precis_kv_set(details, "padding", buf);
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
