/* The GEMM plan executed on the CPU: every step kernels/ will take (writing the operands through the
 * convert.cuh launchers' contract, the column-major cuBLASLt call with its transposes, leading
 * dimensions, batch strides and scale pointers, the int8 dequantization, the read-back) is emulated
 * here from the plan's numbers alone, and the result must equal the row-major product exactly.
 *
 * Inputs are x = q * s with small integers q and power-of-two scales s, so every product and sum is
 * exact in double and any misplaced scale, transpose, stride or padding shows as a mismatch (padding
 * that is not zero-filled holds NaN). The last tests break plans on purpose to show the checker can
 * fail. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_api.h"
#include "numerics/format.h"
#include "eval/gemm_plan.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/split.h"
#include "eval/split_plan.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }
static double rng_pow2(void) { return ldexp(1.0, rng_int(-3, 3)); }

/* One workload: x_a = q_a * scale, x_b = q_b * scale, and the exact row-major product. */
typedef struct workload {
  int64_t m, n, k, batch;
  bool b_batched;
  int64_t b_count; /* distinct b matrices */
  double *a, *b;   /* float32-valued inputs as the device receives them */
  double *row_scales, *col_scales; /* int8: per row of a (batch*m), per column of each b */
  double scale_a, scale_b;         /* fp8: per tensor */
  /* Host-quantized fp8 routes (issue 16): the codes, and the scale grids the host quantizer hands
   * over (row-major, groups of group_rows x group_cols of the stored operand). */
  bool host_quantized;
  double *qa, *qb;
  float *a_scales, *b_scales;
  int64_t a_scale_cols, a_group_rows, a_group_cols, b_scale_cols, b_group_rows, b_group_cols;
  double *expected;                /* [batch, m, n] */
} workload;

static void workload_free(workload *w) {
  free(w->a);
  free(w->b);
  free(w->row_scales);
  free(w->col_scales);
  free(w->expected);
  free(w->qa);
  free(w->qb);
  free(w->a_scales);
  free(w->b_scales);
  memset(w, 0, sizeof *w);
}

static void workload_make(workload *w, const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                          bool b_batched) {
  memset(w, 0, sizeof *w);
  w->m = m;
  w->n = n;
  w->k = k;
  w->batch = batch;
  w->b_batched = b_batched && batch > 1;
  w->b_count = w->b_batched ? batch : 1;
  w->a = malloc(sizeof(double) * (size_t)(batch * m * k));
  w->b = malloc(sizeof(double) * (size_t)(w->b_count * k * n));
  w->row_scales = malloc(sizeof(double) * (size_t)(batch * m));
  w->col_scales = malloc(sizeof(double) * (size_t)(w->b_count * n));
  w->expected = malloc(sizeof(double) * (size_t)(batch * m * n));
  bool int8 = spec->acc == PRECIS_FMT_I32, fp8 = spec->a.fmt == PRECIS_FMT_E4M3;
  for (int64_t i = 0; i < batch * m; i++) w->row_scales[i] = int8 ? rng_pow2() : 1.0;
  for (int64_t j = 0; j < w->b_count * n; j++) w->col_scales[j] = int8 ? rng_pow2() : 1.0;
  w->scale_a = fp8 ? rng_pow2() : 1.0;
  w->scale_b = fp8 ? rng_pow2() : 1.0;
  /* fp8-rowwise: one scale per row of a and column of b; fp8-block: per 1x128 of a, 128x128 of b. */
  bool rowwise = fp8 && spec->a.gran == PRECIS_GRAN_ROW, block = fp8 && spec->b.gran == PRECIS_GRAN_BLOCK;
  if (rowwise || block) {
    w->host_quantized = true;
    w->scale_a = w->scale_b = 1.0;
    int64_t kb = (k + 127) / 128, nb = (n + 127) / 128;
    w->a_scale_cols = rowwise ? 1 : kb, w->a_group_rows = 1, w->a_group_cols = rowwise ? k : 128;
    w->b_scale_cols = rowwise ? n : nb, w->b_group_rows = rowwise ? k : 128, w->b_group_cols = rowwise ? 1 : 128;
    int64_t a_cells = batch * m * w->a_scale_cols, b_cells = (rowwise ? 1 : kb) * w->b_scale_cols;
    w->a_scales = malloc(sizeof(float) * (size_t)a_cells);
    w->b_scales = malloc(sizeof(float) * (size_t)b_cells);
    for (int64_t i = 0; i < a_cells; i++) w->a_scales[i] = (float)rng_pow2();
    for (int64_t i = 0; i < b_cells; i++) w->b_scales[i] = (float)rng_pow2();
    w->qa = malloc(sizeof(double) * (size_t)(batch * m * k));
    w->qb = malloc(sizeof(double) * (size_t)(k * n));
  }
  for (int64_t row = 0; row < batch * m; row++)
    for (int64_t p = 0; p < k; p++) {
      int q = rng_int(-7, 7);
      double s = w->row_scales[row] * w->scale_a;
      if (w->host_quantized) {
        w->qa[row * k + p] = q;
        s = w->a_scales[(row / w->a_group_rows) * w->a_scale_cols + p / w->a_group_cols];
      }
      w->a[row * k + p] = q * s;
    }
  for (int64_t bb = 0; bb < w->b_count; bb++)
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) {
        int q = rng_int(-7, 7);
        double s = w->col_scales[bb * n + j] * w->scale_b;
        if (w->host_quantized) {
          w->qb[p * n + j] = q;
          s = w->b_scales[(p / w->b_group_rows) * w->b_scale_cols + j / w->b_group_cols];
        }
        w->b[(bb * k + p) * n + j] = q * s;
      }
  for (int64_t b = 0; b < batch; b++) {
    const double *bm = w->b + (w->b_batched ? b : 0) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++) s += w->a[(b * m + i) * k + p] * bm[p * n + j];
        w->expected[(b * m + i) * n + j] = s;
      }
  }
}

static double *nan_buffer(int64_t elements) {
  double *p = malloc(sizeof(double) * (size_t)(elements > 0 ? elements : 1));
  for (int64_t i = 0; i < elements; i++) p[i] = NAN;
  return p;
}

/* The convert.cuh launchers' contract: read row-major [rows, cols], divide by the scale (int8: per
 * row or column at scale + c*scale_stride; fp8: per tensor), write with ld_out, transposed or not. */
typedef enum { SCALE_NONE, SCALE_ROW, SCALE_COL, SCALE_TENSOR } scale_axis;

static bool emulate_write(const precis_plan_write *w, const double *src, int64_t src_elements, double *dst,
                          int64_t dst_elements, scale_axis axis, const double *scales, char *why, size_t why_len) {
  if (w->ld_out < (w->transpose_out ? w->rows : w->cols)) {
    snprintf(why, why_len, "write: ld_out %lld is smaller than a row of the output", (long long)w->ld_out);
    return false;
  }
  for (int64_t c = 0; c < w->calls; c++)
    for (int64_t r = 0; r < w->rows; r++)
      for (int64_t col = 0; col < w->cols; col++) {
        int64_t s = c * w->src_stride + r * w->cols + col;
        int64_t d = c * w->dst_stride + (w->transpose_out ? col * w->ld_out + r : r * w->ld_out + col);
        if (s < 0 || s >= src_elements || d < 0 || d >= dst_elements) {
          snprintf(why, why_len, "write: call %lld element (%lld,%lld) out of bounds (src %lld of %lld, dst %lld of %lld)",
                   (long long)c, (long long)r, (long long)col, (long long)s, (long long)src_elements, (long long)d,
                   (long long)dst_elements);
          return false;
        }
        double scale = 1.0;
        if (axis == SCALE_ROW) scale = scales[c * w->scale_stride + r];
        if (axis == SCALE_COL) scale = scales[c * w->scale_stride + col];
        if (axis == SCALE_TENSOR) scale = scales[0];
        dst[d] = src[s] / scale;
      }
  return true;
}

/* A call's layout inside its buffer: matrices apart, the last element within the buffer. */
static bool layout_fits(const precis_lt_matrix *mat, int64_t offset, int64_t buffer_elements, const char *name,
                        char *why, size_t why_len) {
  if (mat->ld < mat->rows) {
    snprintf(why, why_len, "%s: ld %lld < rows %lld", name, (long long)mat->ld, (long long)mat->rows);
    return false;
  }
  if (mat->batch_count > 1 && mat->batch_stride < mat->ld * mat->cols) {
    snprintf(why, why_len, "%s: batch stride %lld overlaps matrices of %lld", name, (long long)mat->batch_stride,
             (long long)(mat->ld * mat->cols));
    return false;
  }
  int64_t last = offset + (mat->batch_count - 1) * mat->batch_stride + mat->ld * (mat->cols - 1) + mat->rows;
  if (offset < 0 || last > buffer_elements) {
    snprintf(why, why_len, "%s: needs %lld elements, buffer has %lld", name, (long long)last, (long long)buffer_elements);
    return false;
  }
  return true;
}

/* The scale cuBLASLt applies to element (k index q, outer index j) of a slot whose scale mode is
 * `mode`, read as cuBLASLt lays the tensor out (written here from its documentation and
 * PyTorch's/NVIDIA's samples, independently of the plan's strides): OUTER_VEC_32F one per outer
 * index; VEC128_32F a ceil(k/128) x outer grid with the outer index contiguous; BLK128x128_32F a
 * ceil(k/128) x ceil(outer/128) grid with the k-blocks contiguous, their count padded to 4. */
static double documented_scale(int mode, const float *buf, int64_t q, int64_t j, int64_t lt_k, int64_t outer) {
  switch (mode) {
  case PRECIS_LT_SCALE_OUTER_VEC_32F: return buf[j];
  case PRECIS_LT_SCALE_VEC128_32F: return buf[(q / 128) * outer + j];
  case PRECIS_LT_SCALE_BLK128X128_32F: return buf[q / 128 + (j / 128) * (((lt_k + 127) / 128 + 3) / 4 * 4)];
  default: return buf[0];
  }
}

/* cuBLASLt's cublasLtMatmul as documented: D = alpha * op(A)·op(B) (+ beta*C, C being D's buffer),
 * column-major, strided batches; once per call of the plan, at the call's offsets, with the
 * call layouts. sa/sb: the scale tensors of A_lt/B_lt (NULL: scales folded into alpha). */
static bool emulate_lt_matmul(const precis_gemm_plan *p, const double *A, const double *B, double *D, double alpha,
                              const float *sa, const float *sb, char *why, size_t why_len) {
  const precis_lt_matrix *la = &p->call_a, *lb = &p->call_b, *ld = &p->call_d;
  int64_t call_n = p->lt_call_rows;
  bool a_ok = p->transa == PRECIS_LT_OP_N ? (la->rows == p->lt_m && la->cols == p->lt_k)
                                          : (la->rows == p->lt_k && la->cols == p->lt_m);
  bool b_ok = p->transb == PRECIS_LT_OP_N ? (lb->rows == p->lt_k && lb->cols == call_n)
                                          : (lb->rows == call_n && lb->cols == p->lt_k);
  if (!a_ok || !b_ok || ld->rows != p->lt_m || ld->cols != call_n) {
    snprintf(why, why_len, "matmul: layouts do not match op(A) %lldx%lld, op(B) %lldx%lld, D %lldx%lld",
             (long long)p->lt_m, (long long)p->lt_k, (long long)p->lt_k, (long long)call_n, (long long)p->lt_m,
             (long long)call_n);
    return false;
  }
  if (!p->c_separate && memcmp(&p->lt_c, &p->lt_d, sizeof p->lt_c) != 0) {
    snprintf(why, why_len, "matmul: C and D layouts differ while C is D's buffer");
    return false;
  }
  if (la->batch_count != ld->batch_count || lb->batch_count != ld->batch_count) {
    snprintf(why, why_len, "matmul: batch counts differ");
    return false;
  }
  if (p->lt_calls < 1 || p->lt_calls * ld->batch_count * call_n != p->lt_d.batch_count * p->lt_n) {
    snprintf(why, why_len, "matmul: %lld calls of %d x %lld rows do not cover %d x %lld", (long long)p->lt_calls,
             (int)ld->batch_count, (long long)call_n, (int)p->lt_d.batch_count, (long long)p->lt_n);
    return false;
  }
  for (int64_t c = 0; c < p->lt_calls; c++) {
    int64_t oa = 0, ob = 0, od = 0;
    precis_gemm_plan_call_offsets(p, c, &oa, &ob, &od);
    if (!layout_fits(la, oa, p->lt_a.elements, "A_lt", why, why_len) ||
        !layout_fits(lb, ob, p->lt_b.elements, "B_lt", why, why_len) ||
        !layout_fits(ld, od, p->lt_d.elements, "D", why, why_len))
      return false;
    for (int32_t g = 0; g < ld->batch_count; g++)
      for (int64_t col = 0; col < call_n; col++)
        for (int64_t r = 0; r < p->lt_m; r++) {
          double s = 0;
          for (int64_t q = 0; q < p->lt_k; q++) {
            double x = p->transa == PRECIS_LT_OP_N ? A[oa + g * la->batch_stride + r + q * la->ld]
                                                   : A[oa + g * la->batch_stride + q + r * la->ld];
            double y = p->transb == PRECIS_LT_OP_N ? B[ob + g * lb->batch_stride + q + col * lb->ld]
                                                   : B[ob + g * lb->batch_stride + col + q * lb->ld];
            if (sa) x *= documented_scale(p->lt_a_scales.mode, sa, q, r, p->lt_k, p->lt_m);
            if (sb) y *= documented_scale(p->lt_b_scales.mode, sb, q, col, p->lt_k, p->lt_n);
            s += x * y;
          }
          double *out = &D[od + g * ld->batch_stride + r + col * ld->ld];
          /* C is D's buffer: with beta = 0 cuBLASLt does not read it (it may hold NaN). */
          *out = p->beta == 0.0 ? p->alpha * alpha * s : p->alpha * alpha * s + p->beta * *out;
        }
  }
  return true;
}

static bool emulate_dequant(const precis_plan_dequant *q, const double *acc, int64_t acc_elements, const double *rs,
                            int64_t rs_count, const double *cs, int64_t cs_count, double *out, int64_t out_elements,
                            char *why, size_t why_len) {
  for (int64_t c = 0; c < q->calls; c++)
    for (int64_t i = 0; i < q->rows; i++)
      for (int64_t j = 0; j < q->cols; j++) {
        int64_t a = c * q->acc_stride + i * q->ld_acc + j, o = c * q->out_stride + i * q->ld_out + j;
        int64_t ri = c * q->row_scale_stride + i, ci = c * q->col_scale_stride + j;
        if (a >= acc_elements || o >= out_elements || ri >= rs_count || ci >= cs_count) {
          snprintf(why, why_len, "dequant: call %lld (%lld,%lld) out of bounds", (long long)c, (long long)i, (long long)j);
          return false;
        }
        out[o] = rs[ri] * cs[ci] * acc[a];
      }
  return true;
}

static bool emulate_read(const precis_plan_read *rd, const double *src, int64_t src_elements, double *host,
                         int64_t host_elements, char *why, size_t why_len) {
  for (int64_t c = 0; c < rd->calls; c++)
    for (int64_t i = 0; i < rd->rows; i++)
      for (int64_t j = 0; j < rd->cols; j++) {
        int64_t s = c * rd->src_stride + i * rd->src_ld + j, d = c * rd->dst_stride + i * rd->dst_ld + j;
        if (s >= src_elements || d >= host_elements) {
          snprintf(why, why_len, "read: call %lld (%lld,%lld) out of bounds", (long long)c, (long long)i, (long long)j);
          return false;
        }
        host[d] = src[s];
      }
  return true;
}

/* Executes the plan on workload w; true when the host output equals the exact product. */
static bool execute_plan(const precis_gemm_plan *p, const workload *w, char *why, size_t why_len) {
  bool ok = false;
  bool int8 = p->spec.acc == PRECIS_FMT_I32, fp8 = p->spec.a.fmt == PRECIS_FMT_E4M3;
  double *lt_a = nan_buffer(p->lt_a.elements), *lt_b = nan_buffer(p->lt_b.elements);
  double *d = nan_buffer(p->lt_d.elements), *out = nan_buffer(p->out_elements);
  float *sa = NULL, *sb = NULL;
  int64_t host_elements = w->batch * w->m * w->n;
  double *host = nan_buffer(host_elements);
  if (p->lt_a.zero_fill) memset(lt_a, 0, sizeof(double) * (size_t)p->lt_a.elements);
  if (p->lt_b.zero_fill) memset(lt_b, 0, sizeof(double) * (size_t)p->lt_b.elements);

  /* Which workload operand each cuBLASLt slot receives, and with which scales. */
  const precis_plan_write *writes[2] = {&p->write_a, &p->write_b};
  precis_plan_operand holds[2] = {p->lt_a_holds, p->lt_b_holds};
  double *slots[2] = {lt_a, lt_b};
  int64_t slot_elements[2] = {p->lt_a.elements, p->lt_b.elements};
  for (int s = 0; s < 2; s++) {
    bool is_a = holds[s] == PRECIS_PLAN_WORKLOAD_A;
    if (holds[s] != PRECIS_PLAN_WORKLOAD_A && holds[s] != PRECIS_PLAN_WORKLOAD_B) {
      snprintf(why, why_len, "cuBLASLt slot %d holds no workload operand", s);
      goto done;
    }
    const precis_plan_write *wr = is_a ? writes[0] : writes[1];
    scale_axis axis = int8 ? (is_a ? SCALE_ROW : SCALE_COL) : fp8 ? SCALE_TENSOR : SCALE_NONE;
    const double *scales = int8 ? (is_a ? w->row_scales : w->col_scales) : is_a ? &w->scale_a : &w->scale_b;
    int64_t src_count = is_a ? w->batch * w->m * w->k : w->b_count * w->k * w->n;
    if (w->host_quantized) {
      /* The host quantizer's codes (small integers here, stored as int8 bytes), placed by the
       * plan's own code as the cuda backend places them, then read back as values. */
      const double *q = is_a ? w->qa : w->qb;
      uint8_t *codes = malloc((size_t)src_count), *image = calloc((size_t)slot_elements[s], 1);
      for (int64_t i = 0; i < src_count; i++) codes[i] = (uint8_t)(int8_t)q[i];
      bool fits = wr->calls * wr->rows * wr->cols == src_count &&
                  layout_fits(&(precis_lt_matrix){.rows = wr->transpose_out ? wr->rows : wr->cols,
                                                  .cols = wr->transpose_out ? wr->cols : wr->rows, .ld = wr->ld_out,
                                                  .batch_count = 1},
                              0, slot_elements[s], "codes", why, why_len);
      if (fits) {
        precis_gemm_plan_place_codes(wr, codes, image);
        for (int64_t i = 0; i < slot_elements[s]; i++) slots[s][i] = (double)(int8_t)image[i];
      }
      free(codes);
      free(image);
      if (!fits) goto done;
      continue;
    }
    if (!emulate_write(wr, is_a ? w->a : w->b, src_count, slots[s], slot_elements[s], axis, scales, why, why_len))
      goto done;
  }
  double alpha = 1.0;
  if (w->host_quantized != p->host_quantized) {
    snprintf(why, why_len, "the plan %s host-quantized codes", p->host_quantized ? "expects" : "does not take");
    goto done;
  }
  if (w->host_quantized) {
    /* The scale tensors, filled as the cuda backend fills them (from the plan), read as cuBLASLt
     * reads them (documented_scale). */
    const precis_lt_scale_tensor *ts[2] = {&p->lt_a_scales, &p->lt_b_scales};
    float **bufs[2] = {&sa, &sb};
    for (int s = 0; s < 2; s++) {
      if (ts[s]->holds != holds[s]) {
        snprintf(why, why_len, "the scale tensor of slot %d is not the scales of the operand it holds", s);
        goto done;
      }
      bool is_a = holds[s] == PRECIS_PLAN_WORKLOAD_A;
      *bufs[s] = malloc(sizeof(float) * (size_t)ts[s]->elements);
      if (is_a)
        precis_gemm_plan_fill_scales(ts[s], w->a_scales, w->a_scale_cols, w->a_group_rows, w->a_group_cols,
                                     w->batch * w->m, w->k, *bufs[s]);
      else
        precis_gemm_plan_fill_scales(ts[s], w->b_scales, w->b_scale_cols, w->b_group_rows, w->b_group_cols, w->k,
                                     w->n, *bufs[s]);
    }
  } else if (fp8) {
    precis_plan_operand sc[2] = {p->lt_a_scale, p->lt_b_scale};
    for (int s = 0; s < 2; s++) {
      if (sc[s] != holds[s]) {
        snprintf(why, why_len, "fp8: the scale pointer of slot %d is not the scale of the operand it holds", s);
        goto done;
      }
      alpha *= sc[s] == PRECIS_PLAN_WORKLOAD_A ? w->scale_a : w->scale_b;
    }
  }
  if (!emulate_lt_matmul(p, lt_a, lt_b, d, alpha, sa, sb, why, why_len)) goto done;
  const double *src = d;
  int64_t src_elements = p->lt_d.elements;
  if (p->dequant) {
    if (!emulate_dequant(&p->dequant_step, d, p->lt_d.elements, w->row_scales, p->row_scale_count, w->col_scales,
                         p->col_scale_count, out, p->out_elements, why, why_len))
      goto done;
    src = out;
    src_elements = p->out_elements;
  }
  if (!emulate_read(&p->read, src, src_elements, host, host_elements, why, why_len)) goto done;
  for (int64_t i = 0; i < host_elements; i++)
    if (!(host[i] == w->expected[i])) {
      snprintf(why, why_len, "output element %lld (batch %lld, row %lld, col %lld) = %g, expected %g", (long long)i,
               (long long)(i / (w->m * w->n)), (long long)(i / w->n % w->m), (long long)(i % w->n), host[i],
               w->expected[i]);
      goto done;
    }
  ok = true;
done:
  free(lt_a);
  free(lt_b);
  free(d);
  free(out);
  free(host);
  free(sa);
  free(sb);
  return ok;
}

static const char *compute_name(int t) {
  switch (t) {
  case PRECIS_LT_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
  case PRECIS_LT_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
  case PRECIS_LT_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
  case PRECIS_LT_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
  }
  return "?";
}

/* The documented requirements of the cuBLASLt kernels each recipe needs (DESIGN §3). */
static void check_requirements(const precis_gemm_plan *p) {
  /* DESIGN §3's table, written out here independently of the route table. */
  static const struct {
    const char *preset, *compute;
    int in_type;
  } expected[] = {{"fp32", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_32F},
                  {"tf32", "CUBLAS_COMPUTE_32F_FAST_TF32", PRECIS_CUDA_R_32F},
                  {"fp16", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_16F},
                  {"fp16acc16", "CUBLAS_COMPUTE_16F", PRECIS_CUDA_R_16F},
                  {"bf16", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_16BF},
                  {"int8", "CUBLAS_COMPUTE_32I", PRECIS_CUDA_R_8I},
                  {"fp8", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_8F_E4M3},
                  {"fp8-rowwise", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_8F_E4M3},
                  {"fp8-block", "CUBLAS_COMPUTE_32F", PRECIS_CUDA_R_8F_E4M3}};
  const precis_recipe_preset *preset = precis_recipe_preset_of_spec(&p->spec);
  CHECK(preset != NULL);
  if (!preset) return;
  const char *name = preset->name;
  size_t e = 0;
  while (e < sizeof expected / sizeof expected[0] && strcmp(expected[e].preset, name) != 0) e++;
  CHECK_MSG(e < sizeof expected / sizeof expected[0], "no expectation for preset %s", name);
  if (e == sizeof expected / sizeof expected[0]) return;
  CHECK_STR(compute_name(p->compute_type), expected[e].compute);
  CHECK_EQ_INT(p->lt_a.data_type, expected[e].in_type);
  CHECK_EQ_INT(p->lt_b.data_type, expected[e].in_type);
  CHECK_EQ_INT(p->lt_a_holds, PRECIS_PLAN_WORKLOAD_B);
  CHECK_EQ_INT(p->lt_b_holds, PRECIS_PLAN_WORKLOAD_A);
  CHECK(p->lt_m == p->n_pad && p->lt_n == p->rows_pad && p->lt_k == p->k_pad);
  /* C is D's buffer with beta = 0, so its layout must be D's: same type (cuBLASLt requires
   * Ctype == Dtype for the fp8 bf16 output and for int8's 32I), dimensions, ld and batch. */
  CHECK(p->lt_c.data_type == p->lt_d.data_type && p->lt_c.rows == p->lt_d.rows && p->lt_c.cols == p->lt_d.cols &&
        p->lt_c.ld == p->lt_d.ld && p->lt_c.batch_count == p->lt_d.batch_count &&
        p->lt_c.batch_stride == p->lt_d.batch_stride);
  /* One batch count for all four matrices, and strides that keep the batch matrices apart. */
  const precis_lt_matrix *mats[] = {&p->lt_a, &p->lt_b, &p->lt_d};
  for (size_t i = 0; i < 3; i++) {
    CHECK_EQ_INT(mats[i]->batch_count, p->lt_d.batch_count);
    if (mats[i]->batch_count > 1) CHECK(mats[i]->batch_stride >= mats[i]->ld * mats[i]->cols);
  }
  /* Every matrix of a strided batch starts as aligned as the first (cudaMalloc'ed) one needs to be:
   * fp8 16 bytes, int8 IMMA 4 bytes. */
  bool is_fp8 = strncmp(name, "fp8", 3) == 0, is_int8 = strcmp(name, "int8") == 0;
  size_t align = is_fp8 ? 16 : is_int8 ? 4 : 1;
  for (size_t i = 0; i < 3; i++)
    CHECK((mats[i]->batch_stride * (int64_t)mats[i]->elem_bytes) % (int64_t)align == 0);
  if (is_int8) {
    /* IMMA, regular ordering (the only one on sm_90): TN, m and k multiples of 4, lda/ldb/ldc too,
     * A/B 8I, C/D 32I, compute and scale 32I. */
    CHECK(p->transa == PRECIS_LT_OP_T && p->transb == PRECIS_LT_OP_N);
    CHECK(p->lt_m % 4 == 0 && p->lt_k % 4 == 0);
    CHECK(p->lt_a.ld % 4 == 0 && p->lt_b.ld % 4 == 0 && p->lt_d.ld % 4 == 0);
    CHECK_EQ_INT(p->lt_a.data_type, PRECIS_CUDA_R_8I);
    CHECK_EQ_INT(p->lt_d.data_type, PRECIS_CUDA_R_32I);
    CHECK_EQ_INT(p->scale_type, PRECIS_CUDA_R_32I);
    CHECK(p->dequant && !p->widen);
  } else if (is_fp8) {
    /* TN, 16-byte aligned dimensions and leading dimensions, e4m3 in, bf16 C/D, 32F compute and
     * scale, per-tensor scale pointers. */
    CHECK(p->transa == PRECIS_LT_OP_T && p->transb == PRECIS_LT_OP_N);
    CHECK(p->lt_m % 16 == 0 && p->lt_n % 16 == 0 && p->lt_k % 16 == 0);
    CHECK(p->lt_a.ld % 16 == 0 && p->lt_b.ld % 16 == 0 && (p->lt_d.ld * 2) % 16 == 0);
    CHECK_EQ_INT(p->lt_a.data_type, PRECIS_CUDA_R_8F_E4M3);
    CHECK_EQ_INT(p->lt_d.data_type, PRECIS_CUDA_R_16BF);
    CHECK_EQ_INT(p->scale_type, PRECIS_CUDA_R_32F);
    CHECK(p->lt_a_scale == PRECIS_PLAN_WORKLOAD_B && p->lt_b_scale == PRECIS_PLAN_WORKLOAD_A);
    CHECK(p->widen && !p->dequant);
    /* Scale modes per slot (A_lt holds the workload's B): fp8 SCALAR_32F on both; fp8-rowwise
     * OUTER_VEC_32F on both; fp8-block BLK128x128_32F on A_lt and VEC128_32F on B_lt, never BLK x
     * BLK. Every scale column of a 2-D tensor starts 16-byte aligned (ld a multiple of 4 floats). */
    int mode_a = strcmp(name, "fp8-rowwise") == 0 ? PRECIS_LT_SCALE_OUTER_VEC_32F
                 : strcmp(name, "fp8-block") == 0 ? PRECIS_LT_SCALE_BLK128X128_32F
                                                  : PRECIS_LT_SCALE_SCALAR_32F;
    int mode_b = mode_a == PRECIS_LT_SCALE_BLK128X128_32F ? PRECIS_LT_SCALE_VEC128_32F : mode_a;
    CHECK_EQ_INT(p->lt_a_scales.mode, mode_a);
    CHECK_EQ_INT(p->lt_b_scales.mode, mode_b);
    CHECK_EQ_INT(p->host_quantized, mode_a != PRECIS_LT_SCALE_SCALAR_32F);
    int64_t kb = (p->lt_k + 127) / 128;
    if (mode_a == PRECIS_LT_SCALE_OUTER_VEC_32F) {
      CHECK(p->lt_a_scales.elements == p->lt_m && p->lt_b_scales.elements == p->lt_n);
    } else if (mode_a == PRECIS_LT_SCALE_BLK128X128_32F) {
      CHECK(p->lt_a_scales.elements == (kb + 3) / 4 * 4 * ((p->lt_m + 127) / 128));
      CHECK(p->lt_b_scales.elements == kb * p->lt_n && p->lt_n % 4 == 0);
    }
  } else {
    CHECK(p->transa == PRECIS_LT_OP_N && p->transb == PRECIS_LT_OP_N);
    CHECK_EQ_INT(p->lt_d.data_type, precis_format_get(p->spec.out)->cuda_data_type);
    CHECK_EQ_INT(p->scale_type, p->spec.acc == PRECIS_FMT_F16 ? PRECIS_CUDA_R_16F : PRECIS_CUDA_R_32F);
    /* No padding: the float conversion launchers write contiguous arrays. */
    CHECK(p->n_pad == p->n && p->k_pad == p->k && p->rows_pad == p->rows);
    CHECK(!p->lt_a.zero_fill && !p->lt_b.zero_fill);
    CHECK(p->write_a.ld_out == p->k && p->write_b.ld_out == p->n && !p->write_b.transpose_out);
    CHECK(p->widen == (p->lt_d.data_type != PRECIS_CUDA_R_32F));
    CHECK(p->lt_a_scale == PRECIS_PLAN_NONE && p->lt_b_scale == PRECIS_PLAN_NONE);
  }
}

/* fp8-rowwise and fp8-block: scale tensors, which refuse a b per batch element. */
static bool takes_scale_tensors(const precis_spec *spec) {
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  return route && (route->scaling == PRECIS_LT_SCALING_OUTER_VEC || route->scaling == PRECIS_LT_SCALING_BLOCK128 ||
                   route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED);
}

/* mxfp8/mxfp4/nvfp4 (sm_100): packed fp4 and tiled byte scales, executed by
 * tests/test_blockscale_plan.c against their documented layouts. */
static bool block_scaled(const precis_spec *spec) {
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  return route && route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED;
}

typedef struct shape {
  int64_t m, n, k, batch;
  bool b_batched;
} shape;

static const shape shapes[] = {
    {1, 1, 1, 1, false},   {1, 7, 5, 1, false},   {5, 1, 3, 1, false},  {3, 5, 7, 1, false},  {4, 4, 4, 1, false},
    {16, 16, 16, 1, false}, {17, 15, 33, 1, false}, {1, 9, 18, 1, false}, {3, 17, 33, 2, false}, {3, 17, 33, 2, true},
    {1, 9, 18, 4, true},   {7, 3, 1, 3, false},   {2, 1, 19, 3, true},  {13, 6, 30, 1, true}, {5, 20, 17, 3, true},
    {16, 32, 48, 2, true}, {6, 8, 4, 5, false},   {1, 1, 40, 7, true},  {9, 2, 2, 2, false},
};

/* cuBLASLt versions planned for: unknown (no workaround), 13.1.0 (int8 split), 13.2.0. */
static const int versions[] = {0, 130100, 130200};

TEST(every_recipe_every_shape_equals_the_row_major_product) {
  for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++)
    for (int r = 0; r < PRESET_COUNT; r++) {
      const precis_recipe *recipe = preset_recipe_at((size_t)r);
      if (!precis_lt_route_find(&recipe->spec, NULL, 0)) continue; /* issue 16's presets: no cuda route yet */
      if (block_scaled(&recipe->spec)) continue;
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        precis_gemm_plan plan;
        if (takes_scale_tensors(&recipe->spec) && sh->b_batched && sh->batch > 1) {
          /* Scale tensors have no batch stride: refused with the reason. */
          CHECK(precis_gemm_plan_make_for(&recipe->spec, sh->m, sh->n, sh->k, sh->batch, true, versions[v], &plan) ==
                    PRECIS_E_UNSUPPORTED &&
                strstr(precis_last_error(), "no batch stride"));
          precis_clear_error();
          continue;
        }
        CHECK_OK(precis_gemm_plan_make_for(&recipe->spec, sh->m, sh->n, sh->k, sh->batch, sh->b_batched, versions[v], &plan));
        check_requirements(&plan);
        workload w;
        workload_make(&w, &recipe->spec, sh->m, sh->n, sh->k, sh->batch, sh->b_batched);
        char why[256] = "";
        bool ok = execute_plan(&plan, &w, why, sizeof why);
        CHECK_MSG(ok, "%s m=%lld n=%lld k=%lld batch=%lld b_batched=%d cuBLASLt %d: %s", recipe->name,
                  (long long)sh->m, (long long)sh->n, (long long)sh->k, (long long)sh->batch, sh->b_batched,
                  versions[v], why);
        workload_free(&w);
      }
    }
}

static bool executes(const precis_gemm_plan *p, int64_t m, int64_t n, int64_t k, int64_t batch, bool b_batched) {
  workload w;
  workload_make(&w, &p->spec, m, n, k, batch, b_batched);
  char why[256] = "";
  bool ok = execute_plan(p, &w, why, sizeof why);
  if (!ok) printf("  %s m=%lld n=%lld k=%lld batch=%lld: %s\n", p->route->name, (long long)m, (long long)n,
                  (long long)k, (long long)batch, why);
  workload_free(&w);
  return ok;
}

/* Issue 14.4: cuBLAS int8 is not guaranteed for few rows (PyTorch guards it with > 16 rows and pads
 * to 32): decode-like workloads (4 rows) are padded to 32 zero rows; larger ones are not. */
TEST(int8_few_rows_are_padded_to_32) {
  const precis_recipe *int8 = preset_recipe("int8");
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 4, 4096, 4096, 1, false, &p)); /* decode-m1's shape */
  CHECK_EQ_INT(p.min_rows, 32);
  CHECK_EQ_INT(p.rows, 4);
  CHECK_EQ_INT(p.rows_pad, 32);
  CHECK_EQ_INT(p.lt_n, 32);
  CHECK(p.lt_b.zero_fill);
  precis_kv_list details = {0};
  precis_gemm_plan_describe(&p, &details);
  CHECK(strstr(precis_kv_get(&details, "padding"), "rows 4->32") != NULL);
  CHECK_STR(precis_kv_get(&details, "min_rows"), "32");
  precis_kv_free(&details);
  /* The padded rows are zeros that never reach the output: executed exactly, folded and strided. */
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 4, 12, 20, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 32);
  CHECK(executes(&p, 4, 12, 20, 1, false));
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 3, 8, 8, 2, true, &p));
  CHECK_EQ_INT(p.rows_pad, 32);
  CHECK_EQ_INT(p.write_a.calls, 2);
  CHECK(executes(&p, 3, 8, 8, 2, true));
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 5, 8, 8, 3, false, &p)); /* folded: 15 rows */
  CHECK_EQ_INT(p.rows_pad, 32);
  CHECK(executes(&p, 5, 8, 8, 3, false));
  /* 32 rows and more: untouched. */
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 32, 8, 8, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 32);
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 33, 8, 8, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 33);
  CHECK(!p.lt_b.zero_fill);
  CHECK_OK(precis_gemm_plan_make(&int8->spec, 512, 4096, 4096, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 512);
  /* Only int8: fp8 keeps its 16-row alignment, the float recipes their rows. */
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp8")->spec, 4, 16, 16, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 16);
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("bf16")->spec, 4, 16, 16, 1, false, &p));
  CHECK_EQ_INT(p.rows_pad, 4);
  CHECK_EQ_INT(p.min_rows, 1);
}

/* Issue 14.5: cuBLASLt 13.1.x may reject int8 with batch > 1: one call per batch matrix, recorded;
 * 13.2 and an unknown version keep the strided batched call. */
TEST(cublaslt_13_1_int8_strided_batch_is_one_call_per_matrix) {
  const precis_recipe *int8 = preset_recipe("int8");
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 33, 5, 7, 3, true, 130100, &p));
  CHECK_EQ_INT(p.lt_batch_calls, 3);
  CHECK_EQ_INT(p.lt_row_calls, 1);
  CHECK_EQ_INT(p.lt_calls, 3);
  CHECK_EQ_INT(p.lt_d.batch_count, 3); /* the buffers are the strided batch's */
  CHECK_EQ_INT(p.call_a.batch_count, 1);
  CHECK_EQ_INT(p.call_b.batch_count, 1);
  CHECK_EQ_INT(p.call_d.batch_count, 1);
  CHECK(p.lt_split && strstr(p.lt_split, "batch") != NULL);
  /* Calls start inside the buffers: int8 A_lt matrices are 8x8 bytes apart, so 64-byte aligned. */
  CHECK(p.call_align_bytes < 256 && p.call_align_bytes >= 4);
  int64_t a = 0, b = 0, d = 0;
  precis_gemm_plan_call_offsets(&p, 2, &a, &b, &d);
  CHECK_EQ_INT(a, 2 * p.lt_a.batch_stride);
  CHECK_EQ_INT(b, 2 * p.lt_b.batch_stride);
  CHECK_EQ_INT(d, 2 * p.lt_d.batch_stride);
  CHECK(executes(&p, 33, 5, 7, 3, true));
  precis_kv_list details = {0};
  precis_gemm_plan_describe(&p, &details);
  CHECK_STR(precis_kv_get(&details, "lt_calls"), "3");
  CHECK(precis_kv_get(&details, "lt_split") != NULL);
  precis_kv_free(&details);
  const int unaffected[] = {0, 130200, 130301};
  for (size_t i = 0; i < 3; i++) {
    CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 33, 5, 7, 3, true, unaffected[i], &p));
    CHECK_EQ_INT(p.lt_calls, 1);
    CHECK_EQ_INT(p.call_d.batch_count, 3);
    CHECK(p.lt_split == NULL);
  }
  /* Folded batches are one GEMM of batch count 1 already; other recipes are not affected. */
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 33, 5, 7, 3, false, 130100, &p));
  CHECK_EQ_INT(p.lt_calls, 1);
  for (int r = 0; r < PRESET_COUNT; r++) {
    if (strcmp(preset_recipe_at((size_t)r)->name, "int8") == 0) continue;
    if (!precis_lt_route_find(&preset_recipe_at((size_t)r)->spec, NULL, 0)) continue;
    if (takes_scale_tensors(&preset_recipe_at((size_t)r)->spec)) continue;
    CHECK_OK(precis_gemm_plan_make_for(&preset_recipe_at((size_t)r)->spec, 33, 5, 7, 3, true, 130100, &p));
    CHECK_EQ_INT(p.lt_calls, 1);
  }
}

/* Issue 14.5: ... and int8 with cuBLASLt's n (the workload's rows) above 65,536: the rows are split
 * into equal chunks of at most 65,536 (zero rows added so that every call has the same shape). */
TEST(cublaslt_13_1_int8_more_than_65536_rows_are_split) {
  const precis_recipe *int8 = preset_recipe("int8");
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 70001, 4, 4, 1, false, 130100, &p));
  CHECK_EQ_INT(p.lt_row_calls, 2);
  CHECK_EQ_INT(p.lt_calls, 2);
  CHECK(p.lt_call_rows <= PRECIS_LT_INT8_MAX_N && p.lt_call_rows % 32 == 0);
  CHECK_EQ_INT(p.rows_pad, 2 * p.lt_call_rows);
  CHECK_EQ_INT(p.call_b.cols, p.lt_call_rows);
  CHECK_EQ_INT(p.call_d.cols, p.lt_call_rows);
  CHECK(p.lt_split && strstr(p.lt_split, "65536") != NULL);
  CHECK(executes(&p, 70001, 4, 4, 1, false));
  /* Folded batch rows count as rows; a strided batch is split both ways. */
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 40000, 4, 4, 2, false, 130100, &p));
  CHECK_EQ_INT(p.lt_row_calls, 2);
  CHECK(executes(&p, 40000, 4, 4, 2, false));
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 65540, 4, 4, 2, true, 130100, &p));
  CHECK_EQ_INT(p.lt_batch_calls, 2);
  CHECK_EQ_INT(p.lt_row_calls, 2);
  CHECK_EQ_INT(p.lt_calls, 4);
  CHECK(executes(&p, 65540, 4, 4, 2, true));
  /* 65,536 rows exactly, or a fixed cuBLASLt: one call. */
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 65536, 4, 4, 1, false, 130100, &p));
  CHECK_EQ_INT(p.lt_calls, 1);
  CHECK_OK(precis_gemm_plan_make_for(&int8->spec, 70001, 4, 4, 1, false, 130200, &p));
  CHECK_EQ_INT(p.lt_calls, 1);
  CHECK_EQ_INT(p.rows_pad, 70001);
}

/* Issue 14.5: int8 with int32 output takes alpha/beta in {0, 1}; scale pointers only on fp8/fp4. */
TEST(plan_check_rejects_what_cublaslt_rejects_at_call_time) {
  precis_gemm_plan p;
  for (int r = 0; r < PRESET_COUNT; r++) {
    const precis_recipe *recipe = preset_recipe_at((size_t)r);
    if (!precis_lt_route_find(&recipe->spec, NULL, 0)) continue;
    CHECK_OK(precis_gemm_plan_make(&recipe->spec, 8, 8, 8, 1, false, &p));
    CHECK(p.alpha == 1.0 && p.beta == 0.0);
    /* A scale pointer exactly where the operand is narrow (fp8), nowhere else. */
    CHECK_EQ_INT(p.lt_a_scale != PRECIS_PLAN_NONE, precis_lt_type_is_narrow(p.lt_a.data_type));
    CHECK_EQ_INT(p.lt_b_scale != PRECIS_PLAN_NONE, precis_lt_type_is_narrow(p.lt_b.data_type));
  }
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("int8")->spec, 8, 8, 8, 1, false, &p));
  p.alpha = 2.0;
  CHECK(precis_gemm_plan_check(&p) == PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "{0, 1}") != NULL);
  p.alpha = 1.0;
  p.beta = 0.5;
  CHECK(precis_gemm_plan_check(&p) == PRECIS_E_UNSUPPORTED);
  p.beta = 1.0;
  CHECK_OK(precis_gemm_plan_check(&p));
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp32")->spec, 8, 8, 8, 1, false, &p));
  p.alpha = 2.0; /* float recipes take any alpha */
  CHECK_OK(precis_gemm_plan_check(&p));
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("bf16")->spec, 8, 8, 8, 1, false, &p));
  p.lt_a_scale = PRECIS_PLAN_WORKLOAD_B;
  CHECK(precis_gemm_plan_check(&p) == PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "CUDA_R_16BF") != NULL);
  CHECK(precis_lt_type_is_narrow(PRECIS_CUDA_R_8F_E4M3) && precis_lt_type_is_narrow(PRECIS_CUDA_R_8F_E5M2));
  CHECK(!precis_lt_type_is_narrow(PRECIS_CUDA_R_8I) && !precis_lt_type_is_narrow(PRECIS_CUDA_R_16F));
}

TEST(random_shapes) {
  for (int trial = 0; trial < 150; trial++) {
    const precis_recipe *recipe = preset_recipe_at((size_t)(trial % PRESET_COUNT));
    int64_t m = rng_int(1, 21), n = rng_int(1, 21), k = rng_int(1, 37), batch = rng_int(1, 4);
    bool b_batched = rng_int(0, 1);
    if (!precis_lt_route_find(&recipe->spec, NULL, 0)) continue; /* issue 16's presets: no cuda route yet */
    if (block_scaled(&recipe->spec)) continue;
    if (takes_scale_tensors(&recipe->spec)) b_batched = false;
    precis_gemm_plan plan;
    CHECK_OK(precis_gemm_plan_make(&recipe->spec, m, n, k, batch, b_batched, &plan));
    workload w;
    workload_make(&w, &recipe->spec, m, n, k, batch, b_batched);
    char why[256] = "";
    CHECK_MSG(execute_plan(&plan, &w, why, sizeof why), "%s m=%lld n=%lld k=%lld batch=%lld b_batched=%d: %s",
              recipe->name, (long long)m, (long long)n, (long long)k, (long long)batch, b_batched, why);
    workload_free(&w);
  }
}

TEST(padding_and_batching_choices) {
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("int8")->spec, 3, 5, 7, 2, false, &p));
  CHECK_EQ_INT(p.batch_mode, PRECIS_PLAN_BATCH_FOLDED);
  CHECK_EQ_INT(p.rows, 6);
  CHECK_EQ_INT(p.n_pad, 8);
  CHECK_EQ_INT(p.k_pad, 8);
  CHECK_EQ_INT(p.lt_d.batch_count, 1);
  CHECK(p.lt_a.zero_fill && p.lt_b.zero_fill);
  CHECK(p.write_b.transpose_out && p.write_b.ld_out == 8);
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp8")->spec, 3, 5, 7, 2, true, &p));
  CHECK_EQ_INT(p.batch_mode, PRECIS_PLAN_BATCH_STRIDED);
  CHECK_EQ_INT(p.rows_pad, 16);
  CHECK_EQ_INT(p.lt_d.batch_count, 2);
  CHECK_EQ_INT(p.lt_a.batch_stride, 16 * 16);
  CHECK_EQ_INT(p.write_a.calls, 2);
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("bf16")->spec, 64, 32, 16, 1, false, &p));
  CHECK_EQ_INT(p.batch_mode, PRECIS_PLAN_BATCH_NONE);
  CHECK_EQ_INT(p.lt_m, 32);
  CHECK_EQ_INT(p.lt_n, 64);
  CHECK_EQ_INT(p.lt_a.ld, 32);
  CHECK_EQ_INT(p.lt_b.ld, 16);
  CHECK_EQ_INT(p.lt_d.ld, 32);
  precis_kv_list details = {0};
  precis_gemm_plan_describe(&p, &details);
  CHECK_STR(precis_kv_get(&details, "lt_op"), "NN");
  CHECK_STR(precis_kv_get(&details, "lt_m"), "32");
  precis_kv_free(&details);
}

/* Issue 19: the split recipes as several cuBLASLt GEMMs. */
TEST(split_plans_count_order_and_types) {
  const struct {
    const char *preset;
    int products, compute, ab_type;
  } floats[] = {{"3xtf32", 3, PRECIS_LT_COMPUTE_32F_FAST_TF32, PRECIS_CUDA_R_32F},
                {"bf16x3", 3, PRECIS_LT_COMPUTE_32F, PRECIS_CUDA_R_16BF},
                {"bf16x6", 6, PRECIS_LT_COMPUTE_32F, PRECIS_CUDA_R_16BF},
                {"bf16x9", 9, PRECIS_LT_COMPUTE_32F, PRECIS_CUDA_R_16BF}};
  for (size_t f = 0; f < sizeof floats / sizeof floats[0]; f++) {
    precis_split_plan sp;
    CHECK_OK(precis_split_plan_make(&preset_recipe(floats[f].preset)->spec, 5, 6, 7, 2, true, 0, &sp));
    CHECK_MSG(sp.products == floats[f].products && sp.lt_calls == sp.products * sp.gemm.lt_calls, "%s: %d products",
              floats[f].preset, sp.products);
    CHECK(sp.gemm.compute_type == floats[f].compute && sp.gemm.lt_a.data_type == floats[f].ab_type &&
          sp.gemm.lt_b.data_type == floats[f].ab_type && sp.gemm.lt_d.data_type == PRECIS_CUDA_R_32F);
    /* The cpu backend's order: levels never rise, big*big last, every pair once. */
    for (int q = 1; q < sp.products; q++) CHECK(sp.level[q] <= sp.level[q - 1]);
    CHECK(sp.term_a[sp.products - 1] == 0 && sp.term_b[sp.products - 1] == 0);
    for (int q = 0; q < sp.products; q++)
      for (int r = 0; r < q; r++) CHECK(sp.term_a[q] != sp.term_a[r] || sp.term_b[q] != sp.term_b[r]);
  }
  precis_split_plan sp;
  CHECK_OK(precis_split_plan_make(&preset_recipe("3xtf32")->spec, 4, 4, 4, 1, false, 0, &sp));
  CHECK(sp.term_a[0] == 0 && sp.term_b[0] == 1 && sp.term_a[1] == 1 && sp.term_b[1] == 0); /* a0*b1, a1*b0, a0*b0 */
  for (int n_slices = 3; n_slices <= 8; n_slices++) {
    char name[32];
    snprintf(name, sizeof name, "ozaki-int8-%d", n_slices);
    CHECK_OK(precis_split_plan_make(&preset_recipe(name)->spec, 5, 6, 7, 3, true, 0, &sp));
    CHECK_MSG(sp.ozaki && sp.products == n_slices * (n_slices + 1) / 2, "%s: %d products", name, sp.products);
    CHECK(sp.gemm.tn && sp.gemm.lt_a.data_type == PRECIS_CUDA_R_8I && sp.gemm.lt_d.data_type == PRECIS_CUDA_R_32I &&
          sp.gemm.compute_type == PRECIS_LT_COMPUTE_32I);
    for (int q = 0; q < sp.products; q++) {
      CHECK(sp.level[q] == sp.term_a[q] + sp.term_b[q] + 2 && sp.level[q] <= n_slices + 1);
      if (q) CHECK(sp.level[q] <= sp.level[q - 1]);
    }
  }
  /* Terms share one buffer per operand at strides rounded up to 256 bytes (issue 27): on odd shapes
   * every product's pointers stay 256-byte aligned (3xtf32 5x6x7: a's terms hold 5*7 floats = 140
   * bytes, 256 apart; before, 140 apart and 4-byte aligned). */
  CHECK_OK(precis_split_plan_make(&preset_recipe("3xtf32")->spec, 5, 6, 7, 1, false, 0, &sp));
  CHECK_MSG(sp.gemm.call_align_bytes == 256, "3xtf32 5x6x7: call_align_bytes %d", sp.gemm.call_align_bytes);
  CHECK_EQ_INT(sp.lt_b_term_stride * 4, 256);
  CHECK_EQ_INT(sp.lt_a_term_stride * 4, 256); /* b: 6*7 floats = 168 bytes */
  CHECK_EQ_INT(precis_split_plan_device_bytes(&sp), 2 * (256 + 256)); /* two tf32 terms each */
  CHECK_OK(precis_split_plan_make(&preset_recipe("bf16x9")->spec, 64, 64, 64, 1, false, 0, &sp));
  CHECK(sp.gemm.call_align_bytes == 256 && sp.lt_a_term_stride == 64 * 64); /* 8 KiB: already a multiple */
  CHECK_OK(precis_split_plan_make(&preset_recipe("bf16x9")->spec, 33, 20, 45, 1, false, 0, &sp));
  CHECK_MSG(sp.gemm.call_align_bytes == 256 && sp.lt_b_term_stride * 2 == 3072,
            "bf16x9 33x20x45: align %d, a's terms %lld bytes apart (2970 of data)", sp.gemm.call_align_bytes,
            (long long)sp.lt_b_term_stride * 2);
  CHECK_OK(precis_split_plan_make(&preset_recipe("ozaki-int8-3")->spec, 5, 6, 7, 1, false, 0, &sp));
  CHECK_MSG(sp.gemm.call_align_bytes == 256, "ozaki 5x6x7: call_align_bytes %d (8x8 and 8x32 int8 slices, 256 apart)",
            sp.gemm.call_align_bytes);
  CHECK(sp.lt_a_term_stride == 256 && sp.lt_b_term_stride == 256);
  precis_kv_list kv = {0};
  precis_split_plan_describe(&sp, &kv);
  const char *stride_text = precis_kv_get(&kv, "split_term_stride");
  CHECK_MSG(stride_text && strstr(stride_text, "256 bytes apart (64 of data)"), "split_term_stride: %s",
            stride_text ? stride_text : "missing");
  precis_kv_free(&kv);
  /* cuBLASLt 13.1 int8 limits: each product is then several calls, and the total says so. */
  CHECK_OK(precis_split_plan_make(&preset_recipe("ozaki-int8-4")->spec, 5, 6, 7, 3, true, 130100, &sp));
  CHECK(sp.gemm.lt_calls == 3 && sp.lt_calls == 30);
  /* 127^2 k < 2^31: the largest k with exact int32 slice products. */
  CHECK_OK(precis_split_plan_make(&preset_recipe("ozaki-int8-3")->spec, 2, 2, 133143, 1, false, 0, &sp));
  CHECK(precis_split_plan_make(&preset_recipe("ozaki-int8-3")->spec, 2, 2, 133144, 1, false, 0, &sp) ==
        PRECIS_E_UNSUPPORTED);
  CHECK(precis_split_plan_make(&preset_recipe("fp32")->spec, 2, 2, 2, 1, false, 0, &sp) == PRECIS_E_UNSUPPORTED);
  /* fp64 and cuBLAS's emulation are single calls of the route table. */
  precis_gemm_plan gp;
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp64")->spec, 3, 4, 5, 1, false, &gp));
  CHECK(gp.compute_type == PRECIS_LT_COMPUTE_64F && gp.scale_type == PRECIS_CUDA_R_64F &&
        gp.lt_a.data_type == PRECIS_CUDA_R_64F && gp.lt_d.data_type == PRECIS_CUDA_R_64F && gp.lt_calls == 1);
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp64-emu")->spec, 3, 4, 5, 1, false, &gp));
  CHECK(gp.compute_type == PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT && gp.scale_type == PRECIS_CUDA_R_64F);
  char why[256];
  CHECK(!precis_cuda_spec_supported(&preset_recipe("fp64-emu")->spec, 9, 0, why, sizeof why) && strstr(why, "sm_100"));
  CHECK(precis_cuda_spec_supported(&preset_recipe("fp64-emu")->spec, 10, 0, why, sizeof why));
  CHECK(!precis_cuda_spec_supported(&preset_recipe("bf16x9")->spec, 7, 5, why, sizeof why) && strstr(why, "sm_80"));
  CHECK(precis_cuda_spec_supported(&preset_recipe("ozaki-int8-5")->spec, 7, 5, why, sizeof why));
}

/* The Ozaki plan carried out on the CPU with the layouts kernels/cuda_hiprec.c follows (slices
 * written through write_a/write_b, every product through the int8 plan's column-major call, each D
 * read through dequant_step's mapping with unit scales into its level, levels combined from N+1
 * down): equal, bit for bit, to the cpu backend's arithmetic (src/numerics/split.h). */
static bool ozaki_plan_matches_cpu(int n_slices, int64_t m, int64_t n, int64_t k, int64_t batch, bool b_batched,
                                   int lt_version) {
  precis_spec spec = preset_recipe("ozaki-int8-3")->spec;
  spec.split_terms = n_slices;
  precis_split_plan sp;
  if (precis_split_plan_make(&spec, m, n, k, batch, b_batched, lt_version, &sp) != PRECIS_OK) return false;
  const precis_gemm_plan *p = &sp.gemm;
  int64_t b_count = p->b_batched ? batch : 1, rows = batch * m, out_n = batch * m * n;
  double *a = malloc(sizeof(double) * (size_t)(rows * k)), *b = malloc(sizeof(double) * (size_t)(b_count * k * n));
  for (int64_t i = 0; i < rows * k; i++) a[i] = ldexp(rng_int(-1000000, 1000000), rng_int(-40, 0)) / 3.0;
  for (int64_t i = 0; i < b_count * k * n; i++) b[i] = ldexp(rng_int(-1000000, 1000000), rng_int(-20, 20)) / 7.0;
  /* The cpu backend's slices and exponents. */
  int *a_exps = malloc(sizeof(int) * (size_t)rows), *b_exps = malloc(sizeof(int) * (size_t)(b_count * n));
  double *a_sl = malloc(sizeof(double) * (size_t)(n_slices * rows * k));
  double *b_sl = malloc(sizeof(double) * (size_t)(n_slices * b_count * k * n));
  double *tmp = malloc(sizeof(double) * (size_t)(n_slices * k * n));
  precis_ozaki_split_rows(a, (size_t)rows, (size_t)k, n_slices, a_exps, a_sl);
  for (int64_t g = 0; g < b_count; g++) {
    precis_ozaki_split_cols(b + g * k * n, (size_t)k, (size_t)n, n_slices, b_exps + g * n, tmp);
    for (int t = 0; t < n_slices; t++)
      memcpy(b_sl + ((int64_t)t * b_count + g) * k * n, tmp + (int64_t)t * k * n, sizeof(double) * (size_t)(k * n));
  }
  /* Expected: the cpu backend's levels (exact) and combination. */
  double *levels = calloc((size_t)(n_slices * out_n), sizeof(double)), *want = malloc(sizeof(double) * (size_t)out_n);
  for (int s = 1; s <= n_slices; s++)
    for (int t = 1; s + t <= n_slices + 1; t++)
      for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            int64_t g = p->b_batched ? bi : 0;
            for (int64_t q = 0; q < k; q++)
              acc += a_sl[((int64_t)(s - 1) * rows + bi * m + i) * k + q] *
                     b_sl[(((int64_t)(t - 1) * b_count + g) * k + q) * n + j];
            levels[((bi * n_slices + s + t - 2) * m + i) * n + j] += acc; /* per sample, as the cpu backend */
          }
  for (int64_t bi = 0; bi < batch; bi++)
    precis_ozaki_combine(levels + bi * n_slices * m * n, n_slices, (size_t)m, (size_t)n, a_exps + bi * m,
                         b_exps + (p->b_batched ? bi : 0) * n, want + bi * m * n);
  /* The plan's way. */
  bool ok = true;
  double *ones = malloc(sizeof(double) * (size_t)(rows + b_count * n + 1));
  for (int64_t i = 0; i < rows + b_count * n + 1; i++) ones[i] = 1.0;
  /* Slices at the plan's term strides (256-byte multiples), as kernels/cuda_hiprec.c lays them out. */
  const int64_t sa = sp.lt_a_term_stride, sb = sp.lt_b_term_stride;
  CHECK(sa >= p->lt_a.elements && sb >= p->lt_b.elements && sa % 256 == 0 && sb % 256 == 0);
  double *lt_a = calloc((size_t)(n_slices * sa), sizeof(double));
  double *lt_b = calloc((size_t)(n_slices * sb), sizeof(double));
  char why[256] = "";
  for (int t = 0; t < n_slices && ok; t++) {
    ok = emulate_write(&p->write_a, a_sl + (int64_t)t * rows * k, rows * k, lt_b + t * sb, p->lt_b.elements,
                       SCALE_NONE, ones, why, sizeof why) &&
         emulate_write(&p->write_b, b_sl + (int64_t)t * b_count * k * n, b_count * k * n, lt_a + t * sa,
                       p->lt_a.elements, SCALE_NONE, ones, why, sizeof why);
  }
  double *d = malloc(sizeof(double) * (size_t)p->lt_d.elements), *level = calloc((size_t)out_n, sizeof(double));
  double *prod = malloc(sizeof(double) * (size_t)out_n), *sum = calloc((size_t)out_n, sizeof(double));
  for (int q = 0; q < sp.products && ok; q++) {
    ok = emulate_lt_matmul(p, lt_a + sp.term_b[q] * sa, lt_b + sp.term_a[q] * sb, d, 1.0, NULL, NULL, why,
                           sizeof why) &&
         emulate_dequant(&p->dequant_step, d, p->lt_d.elements, ones, p->row_scale_count, ones, p->col_scale_count, prod,
                         out_n, why, sizeof why);
    for (int64_t i = 0; i < out_n && ok; i++) level[i] += prod[i];
    if (q + 1 == sp.products || sp.level[q + 1] != sp.level[q]) { /* level complete */
      for (int64_t i = 0; i < out_n; i++) {
        sum[i] += ldexp(level[i], -PRECIS_OZAKI_SLICE_BITS * sp.level[q]);
        level[i] = 0;
      }
    }
  }
  for (int64_t r = 0; r < rows && ok; r++)
    for (int64_t j = 0; j < n && ok; j++) {
      double got = ldexp(sum[r * n + j], a_exps[r] + b_exps[(p->b_batched ? r / m : 0) * n + j]);
      if (!(got == want[r * n + j])) {
        snprintf(why, sizeof why, "row %lld col %lld: %.17g, cpu %.17g", (long long)r, (long long)j, got, want[r * n + j]);
        ok = false;
      }
    }
  if (!ok) printf("  ozaki-int8-%d m=%lld n=%lld k=%lld batch=%lld: %s\n", n_slices, (long long)m, (long long)n,
                  (long long)k, (long long)batch, why);
  free(a), free(b), free(a_exps), free(b_exps), free(a_sl), free(b_sl), free(tmp), free(levels), free(want);
  free(ones), free(lt_a), free(lt_b), free(d), free(level), free(prod), free(sum);
  return ok;
}

TEST(ozaki_plan_executes_like_the_cpu_backend) {
  CHECK(ozaki_plan_matches_cpu(3, 3, 5, 7, 1, false, 0));
  CHECK(ozaki_plan_matches_cpu(5, 4, 6, 9, 3, false, 0));
  CHECK(ozaki_plan_matches_cpu(4, 5, 3, 8, 2, true, 0));
  CHECK(ozaki_plan_matches_cpu(6, 3, 5, 7, 3, true, 130100));
}

/* The float-split plan carried out on the CPU with kernels/cuda_hiprec.c's layout (term t of every
 * operand at t * count elements, each product's A_lt = b's term_b, B_lt = a's term_a, all summed into
 * one D): bf16x9 keeps every product, so on 20-bit integers (three nonzero bf16 terms each, sums
 * exact in double) it must give the exact product; a term taken from the wrong operand or offset
 * does not. */
static bool bf16x9_plan_is_exact(int64_t m, int64_t n, int64_t k, int64_t batch, bool b_batched) {
  precis_split_plan sp;
  if (precis_split_plan_make(&preset_recipe("bf16x9")->spec, m, n, k, batch, b_batched, 0, &sp) != PRECIS_OK)
    return false;
  const precis_gemm_plan *p = &sp.gemm;
  int64_t b_count = p->b_batched ? batch : 1, na = batch * m * k, nb = b_count * k * n, out_n = batch * m * n;
  float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
  for (int64_t i = 0; i < na; i++) a[i] = (float)rng_int(-(1 << 20), 1 << 20);
  for (int64_t i = 0; i < nb; i++) b[i] = (float)rng_int(-(1 << 20), 1 << 20);
  precis_float_split fs;
  precis_float_split_of(PRECIS_SPLIT_BF16X9, &fs);
  float *at = malloc(sizeof(float) * (size_t)(fs.terms * na)), *bt = malloc(sizeof(float) * (size_t)(fs.terms * nb));
  precis_split_float_terms(&fs, a, (size_t)na, at);
  precis_split_float_terms(&fs, b, (size_t)nb, bt);
  double *lt_a = malloc(sizeof(double) * (size_t)(fs.terms * nb)), *lt_b = malloc(sizeof(double) * (size_t)(fs.terms * na));
  for (int64_t i = 0; i < fs.terms * nb; i++) lt_a[i] = bt[i];
  for (int64_t i = 0; i < fs.terms * na; i++) lt_b[i] = at[i];
  double *d = malloc(sizeof(double) * (size_t)p->lt_d.elements), *sum = calloc((size_t)p->lt_d.elements, sizeof(double));
  double *host = malloc(sizeof(double) * (size_t)out_n);
  char why[256] = "";
  bool ok = p->lt_a.elements == nb && p->lt_b.elements == na && !p->lt_a.zero_fill && !p->lt_b.zero_fill;
  for (int q = 0; q < sp.products && ok; q++) {
    ok = emulate_lt_matmul(p, lt_a + sp.term_b[q] * nb, lt_b + sp.term_a[q] * na, d, 1.0, NULL, NULL, why, sizeof why);
    for (int64_t i = 0; i < p->lt_d.elements && ok; i++) sum[i] += d[i]; /* beta = 1 after the first */
  }
  ok = ok && emulate_read(&p->read, sum, p->lt_d.elements, host, out_n, why, sizeof why);
  for (int64_t s = 0; s < batch && ok; s++)
    for (int64_t i = 0; i < m && ok; i++)
      for (int64_t j = 0; j < n && ok; j++) {
        double e = 0;
        for (int64_t q = 0; q < k; q++)
          e += (double)a[(s * m + i) * k + q] * (double)b[((p->b_batched ? s : 0) * k + q) * n + j];
        if (host[(s * m + i) * n + j] != e) {
          snprintf(why, sizeof why, "(%lld,%lld,%lld): %.17g, exact %.17g", (long long)s, (long long)i, (long long)j,
                   host[(s * m + i) * n + j], e);
          ok = false;
        }
      }
  if (!ok) printf("  bf16x9 m=%lld n=%lld k=%lld batch=%lld: %s\n", (long long)m, (long long)n, (long long)k,
                  (long long)batch, why);
  free(a), free(b), free(at), free(bt), free(lt_a), free(lt_b), free(d), free(sum), free(host);
  return ok;
}

TEST(float_split_plan_layout_gives_the_exact_product) {
  CHECK(bf16x9_plan_is_exact(3, 5, 7, 1, false));
  CHECK(bf16x9_plan_is_exact(4, 6, 9, 3, false));
  CHECK(bf16x9_plan_is_exact(5, 3, 8, 2, true));
}

TEST(bad_dimensions_are_rejected) {
  precis_gemm_plan p;
  CHECK(precis_gemm_plan_make(&preset_recipe("fp32")->spec, 0, 4, 4, 1, false, &p) == PRECIS_E_INPUT);
  CHECK(precis_gemm_plan_make(&preset_recipe("fp32")->spec, 4, 4, -1, 1, false, &p) == PRECIS_E_INPUT);
  CHECK(precis_gemm_plan_make(&preset_recipe("fp32")->spec, 1LL << 31, 4, 4, 1, false, &p) ==
        PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "int32") != NULL);
}

/* The checker itself must be able to fail: each broken plan must be caught. */
static bool broken_plan_fails(const char *preset, shape sh, void (*breakit)(precis_gemm_plan *)) {
  precis_gemm_plan p;
  if (precis_gemm_plan_make(&preset_recipe(preset)->spec, sh.m, sh.n, sh.k, sh.batch, sh.b_batched, &p) != PRECIS_OK)
    return false;
  workload w;
  workload_make(&w, &preset_recipe(preset)->spec, sh.m, sh.n, sh.k, sh.batch, sh.b_batched);
  char why[256];
  bool intact = execute_plan(&p, &w, why, sizeof why);
  breakit(&p);
  bool broken = execute_plan(&p, &w, why, sizeof why);
  workload_free(&w);
  return intact && !broken;
}
static void flip_transa(precis_gemm_plan *p) { p->transa = p->transa == PRECIS_LT_OP_T ? PRECIS_LT_OP_N : PRECIS_LT_OP_T; }
static void no_zero_fill(precis_gemm_plan *p) { p->lt_a.zero_fill = p->lt_b.zero_fill = false; }
static void untransposed_b(precis_gemm_plan *p) { p->write_b.transpose_out = false; }
static void wrong_read_ld(precis_gemm_plan *p) { p->read.src_ld = p->read.cols; }
static void same_column_scales(precis_gemm_plan *p) { p->dequant_step.col_scale_stride = 0; }
static void same_col_scales_on_write(precis_gemm_plan *p) { p->write_b.scale_stride = 0; }
static void swapped_operands(precis_gemm_plan *p) {
  precis_plan_operand t = p->lt_a_holds;
  p->lt_a_holds = p->lt_b_holds;
  p->lt_b_holds = t;
}
static void swapped_fp8_scales(precis_gemm_plan *p) {
  precis_plan_operand t = p->lt_a_scale;
  p->lt_a_scale = p->lt_b_scale;
  p->lt_b_scale = t;
}
static void batch_stride_zero(precis_gemm_plan *p) { p->lt_a.batch_stride = p->call_a.batch_stride = 0; }
static void split_batch_one_call(precis_gemm_plan *p) { p->lt_calls = p->lt_batch_calls = 1; }
static void split_rows_one_call(precis_gemm_plan *p) { p->lt_calls = p->lt_row_calls = 1; }
static precis_status make_13_1(const precis_recipe *r, shape sh, precis_gemm_plan *p) {
  return precis_gemm_plan_make_for(&r->spec, sh.m, sh.n, sh.k, sh.batch, sh.b_batched, 130100, p);
}
/* As broken_plan_fails, for a plan made for cuBLASLt 13.1.0 (split calls). */
static bool broken_split_plan_fails(shape sh, void (*breakit)(precis_gemm_plan *)) {
  precis_gemm_plan p;
  if (make_13_1(preset_recipe("int8"), sh, &p) != PRECIS_OK || p.lt_calls < 2) return false;
  workload w;
  workload_make(&w, &p.spec, sh.m, sh.n, sh.k, sh.batch, sh.b_batched);
  char why[256];
  bool intact = execute_plan(&p, &w, why, sizeof why);
  breakit(&p);
  bool broken = execute_plan(&p, &w, why, sizeof why);
  workload_free(&w);
  return intact && !broken;
}

TEST(broken_plans_are_caught) {
  CHECK(broken_plan_fails("int8", (shape){3, 5, 7, 1, false}, flip_transa));
  CHECK(broken_plan_fails("fp32", (shape){3, 5, 7, 1, false}, flip_transa));
  CHECK(broken_plan_fails("int8", (shape){3, 5, 7, 1, false}, no_zero_fill));
  CHECK(broken_plan_fails("fp8", (shape){3, 5, 7, 2, true}, no_zero_fill));
  CHECK(broken_plan_fails("fp8", (shape){4, 16, 16, 1, false}, untransposed_b));
  CHECK(broken_plan_fails("int8", (shape){3, 5, 7, 2, false}, wrong_read_ld) ||
        broken_plan_fails("fp8", (shape){3, 5, 7, 2, false}, wrong_read_ld));
  CHECK(broken_plan_fails("int8", (shape){3, 5, 7, 3, true}, same_column_scales));
  CHECK(broken_plan_fails("int8", (shape){3, 5, 7, 3, true}, same_col_scales_on_write));
  CHECK(broken_plan_fails("bf16", (shape){3, 5, 7, 1, false}, swapped_operands));
  CHECK(broken_plan_fails("fp8", (shape){3, 5, 7, 1, false}, swapped_fp8_scales));
  CHECK(broken_plan_fails("fp16", (shape){3, 5, 7, 3, true}, batch_stride_zero));
  CHECK(broken_split_plan_fails((shape){3, 5, 7, 3, true}, split_batch_one_call));
  CHECK(broken_split_plan_fails((shape){70001, 4, 4, 1, false}, split_rows_one_call));
}

/* Issue 16: fp8-rowwise and fp8-block on shapes that are not multiples of 128 (nor of 16): padded
 * with zeros (rows, n, k to 16; the last 128-block of k or n is partial), executed exactly through
 * scale tensors filled from the plan and read as cuBLASLt documents them. */
TEST(fp8_scale_tensors_on_odd_shapes) {
  static const shape odd[] = {{17, 200, 300, 1, false}, {3, 130, 129, 2, false}, {1, 257, 385, 1, false},
                              {33, 16, 128, 1, false},  {5, 7, 257, 3, false}};
  const char *names[] = {"fp8-rowwise", "fp8-block"};
  for (size_t r = 0; r < 2; r++)
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
      const shape *sh = &odd[i];
      precis_gemm_plan p;
      CHECK_OK(precis_gemm_plan_make(&preset_recipe(names[r])->spec, sh->m, sh->n, sh->k, sh->batch, false, &p));
      check_requirements(&p);
      CHECK_EQ_INT(p.k_pad, (sh->k + 15) / 16 * 16);
      CHECK_EQ_INT(p.n_pad, (sh->n + 15) / 16 * 16);
      CHECK(executes(&p, sh->m, sh->n, sh->k, sh->batch, false));
    }
  /* The shapes and the layout explain prints: 17x200x300 fp8-block, k 300 -> 304 (3 k-blocks). */
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp8-block")->spec, 17, 200, 300, 1, false, &p));
  CHECK(p.lt_a_scales.grid_rows == 3 && p.lt_a_scales.grid_cols == 2 && p.lt_a_scales.outer_stride == 4);
  CHECK(p.lt_b_scales.grid_rows == 3 && p.lt_b_scales.grid_cols == 32 && p.lt_b_scales.inner_stride == 32);
  precis_kv_list details = {0};
  precis_gemm_plan_describe(&p, &details);
  CHECK(strstr(precis_kv_get(&details, "a_scale_mode"), "BLK128x128_32F: 3x2 fp32 grid") != NULL);
  CHECK(strstr(precis_kv_get(&details, "b_scale_mode"), "VEC128_32F: 3x32 fp32 grid") != NULL);
  CHECK(strstr(precis_kv_get(&details, "padding"), "k 300->304") != NULL);
  precis_kv_free(&details);
  /* Device bytes: every scale at its real (padded) size, 8 + 96 floats here. */
  long long data = p.lt_a.elements + p.lt_b.elements + p.lt_d.elements * 2 + p.out_elements * 4;
  CHECK_EQ_INT(precis_gemm_plan_device_bytes(&p), data + (8 + 96) * 4);
}

static void blk_strides_swapped(precis_gemm_plan *p) {
  int64_t t = p->lt_a_scales.inner_stride;
  p->lt_a_scales.inner_stride = p->lt_a_scales.outer_stride;
  p->lt_a_scales.outer_stride = t;
}
static void vec128_inner_major(precis_gemm_plan *p) {
  p->lt_b_scales.inner_stride = 1;
  p->lt_b_scales.outer_stride = p->lt_b_scales.grid_rows;
}
static void outer_vec_scales_swapped(precis_gemm_plan *p) {
  p->lt_a_scales.holds = PRECIS_PLAN_WORKLOAD_A;
  p->lt_b_scales.holds = PRECIS_PLAN_WORKLOAD_B;
}
static void blk_unpadded_ld(precis_gemm_plan *p) { p->lt_a_scales.outer_stride = p->lt_a_scales.grid_rows; }

/* The checker of the scale tensors can fail: a wrong layout gives a wrong product, and what
 * cuBLASLt rejects (BLK x BLK, an unaligned scale column) is refused by the plan check. */
TEST(broken_scale_tensors_are_caught) {
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp8-block")->spec, 17, 300, 300, 1, false, &p));
  CHECK(executes(&p, 17, 300, 300, 1, false));
  precis_gemm_plan broken = p;
  blk_strides_swapped(&broken);
  CHECK(!executes(&broken, 17, 300, 300, 1, false));
  broken = p;
  vec128_inner_major(&broken);
  CHECK(!executes(&broken, 17, 300, 300, 1, false));
  /* kb = 3: the padded leading dimension is 4; 3 floats is not 16-byte aligned. */
  broken = p;
  blk_unpadded_ld(&broken);
  CHECK(precis_gemm_plan_check(&broken) == PRECIS_E_UNSUPPORTED && strstr(precis_last_error(), "16 bytes"));
  broken = p;
  broken.lt_b_scales.mode = PRECIS_LT_SCALE_BLK128X128_32F;
  CHECK(precis_gemm_plan_check(&broken) == PRECIS_E_UNSUPPORTED && strstr(precis_last_error(), "never BLK x BLK"));
  precis_clear_error();
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp8-rowwise")->spec, 5, 20, 40, 2, false, &p));
  CHECK(executes(&p, 5, 20, 40, 2, false));
  broken = p;
  outer_vec_scales_swapped(&broken);
  CHECK(!executes(&broken, 5, 20, 40, 2, false));
  /* A scale tensor on a non-narrow slot. */
  broken = p;
  broken.lt_a.data_type = PRECIS_CUDA_R_16BF;
  CHECK(precis_gemm_plan_check(&broken) == PRECIS_E_UNSUPPORTED);
  precis_clear_error();
}

/* The scale modes came with cuBLASLt 12.9: a plan for an older one is refused, naming it. */
TEST(scale_modes_need_cublaslt_12_9) {
  precis_gemm_plan p;
  CHECK(precis_gemm_plan_make_for(&preset_recipe("fp8-block")->spec, 16, 16, 16, 1, false, 120800, &p) ==
            PRECIS_E_UNSUPPORTED &&
        strstr(precis_last_error(), "cuBLASLt 12.9") && strstr(precis_last_error(), "12.8.0"));
  precis_clear_error();
  CHECK_OK(precis_gemm_plan_make_for(&preset_recipe("fp8-block")->spec, 16, 16, 16, 1, false, 120900, &p));
  CHECK_OK(precis_gemm_plan_make_for(&preset_recipe("fp8")->spec, 16, 16, 16, 1, false, 120800, &p));
}

/* fp8 output (out=e4m3): D e4m3 with scale_D and amax_D, C its own bf16 buffer (counted). */
TEST(fp8_output_plan) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("a=e4m3@tensor,b=e4m3@tensor,out=e4m3", &r));
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&r.spec, 5, 20, 40, 2, false, &p));
  CHECK_STR(p.route->name, "fp8-e4m3out");
  CHECK(p.d_scaled && p.c_separate && !p.widen && !p.host_quantized);
  CHECK_EQ_INT(p.lt_d.data_type, PRECIS_CUDA_R_8F_E4M3);
  CHECK_EQ_INT(p.lt_c.data_type, PRECIS_CUDA_R_16BF);
  CHECK(p.lt_c.rows == p.lt_d.rows && p.lt_c.cols == p.lt_d.cols && p.lt_c.ld == p.lt_d.ld);
  CHECK_EQ_INT(p.out_elements, p.lt_d.elements);
  long long expect = p.lt_a.elements + p.lt_b.elements + p.lt_d.elements + p.out_elements * 4 + 2 * 4 + 2 * 4 +
                     p.lt_c.elements * 2;
  CHECK_EQ_INT(precis_gemm_plan_device_bytes(&p), expect);
  precis_kv_list details = {0};
  precis_gemm_plan_describe(&p, &details);
  CHECK(strstr(precis_kv_get(&details, "d_scale"), "AMAX_D_POINTER") != NULL);
  CHECK(strstr(precis_kv_get(&details, "lt_types"), "C CUDA_R_16BF, D CUDA_R_8F_E4M3") != NULL);
  precis_kv_free(&details);
  precis_gemm_plan broken = p;
  broken.lt_d.data_type = PRECIS_CUDA_R_16BF;
  CHECK(precis_gemm_plan_check(&broken) == PRECIS_E_UNSUPPORTED && strstr(precis_last_error(), "scale_D"));
  precis_clear_error();
}

/* Issue 27: a split-K algorithm must add its partial sums in the compute type whenever D is
 * narrower (fp16/bf16/fp8 out of a 32F GEMM), as the cpu backend models it; output-wide routes keep
 * cuBLASLt's default. The mask is a plan field, so kernels/lt_matmul.c sets it for every call and
 * autotune candidate, and explain prints it. */
TEST(reduction_scheme_mask_keeps_split_k_in_the_compute_type) {
  static const struct {
    const char *recipe;
    uint32_t mask;
  } cases[] = {
      {"fp32", PRECIS_LT_REDUCTION_ANY},          {"tf32", PRECIS_LT_REDUCTION_ANY},
      {"fp16", PRECIS_LT_REDUCTION_COMPUTE_TYPE}, {"bf16", PRECIS_LT_REDUCTION_COMPUTE_TYPE},
      {"fp16acc16", PRECIS_LT_REDUCTION_ANY},     {"int8", PRECIS_LT_REDUCTION_ANY},
      {"fp8", PRECIS_LT_REDUCTION_COMPUTE_TYPE},  {"fp8-rowwise", PRECIS_LT_REDUCTION_COMPUTE_TYPE},
      {"fp64", PRECIS_LT_REDUCTION_ANY},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    precis_gemm_plan p;
    CHECK_OK(precis_gemm_plan_make(&preset_recipe(cases[i].recipe)->spec, 128, 4096, 16384, 1, false, &p));
    CHECK_MSG(p.reduction_scheme_mask == cases[i].mask, "%s: mask 0x%x, expected 0x%x", cases[i].recipe,
              (unsigned)p.reduction_scheme_mask, (unsigned)cases[i].mask);
    /* No split (NONE) is always allowed; INPLACE and OUTPUT_TYPE add in D's type. */
    CHECK(precis_gemm_plan_reduction_allowed(&p, PRECIS_LT_REDUCTION_NONE));
    CHECK(precis_gemm_plan_reduction_allowed(&p, PRECIS_LT_REDUCTION_COMPUTE_TYPE));
    bool narrow = cases[i].mask == PRECIS_LT_REDUCTION_COMPUTE_TYPE;
    CHECK_MSG(precis_gemm_plan_reduction_allowed(&p, PRECIS_LT_REDUCTION_INPLACE) == !narrow &&
                  precis_gemm_plan_reduction_allowed(&p, PRECIS_LT_REDUCTION_OUTPUT_TYPE) == !narrow,
              "%s: INPLACE/OUTPUT_TYPE allowed must be %d", cases[i].recipe, !narrow);
    precis_kv_list kv = {0};
    precis_gemm_plan_describe(&p, &kv);
    const char *text = precis_kv_get(&kv, "lt_reduction_scheme_mask");
    CHECK_MSG(text && strncmp(text, narrow ? "0x2 COMPUTE_TYPE" : "0x7 any", narrow ? 16 : 7) == 0, "%s: %s",
              cases[i].recipe, text ? text : "missing");
    precis_kv_free(&kv);
  }
  CHECK(precis_lt_output_narrower(PRECIS_CUDA_R_16BF, PRECIS_LT_COMPUTE_32F));
  CHECK(precis_lt_output_narrower(PRECIS_CUDA_R_8F_E4M3, PRECIS_LT_COMPUTE_32F));
  CHECK(!precis_lt_output_narrower(PRECIS_CUDA_R_16F, PRECIS_LT_COMPUTE_16F));
  CHECK(!precis_lt_output_narrower(PRECIS_CUDA_R_32I, PRECIS_LT_COMPUTE_32I));
  CHECK(strcmp(precis_lt_reduction_scheme_name(PRECIS_LT_REDUCTION_COMPUTE_TYPE), "COMPUTE_TYPE") == 0);
  /* fp8 with an e4m3 output: the narrowest D of all. */
  precis_spec e4m3out;
  CHECK_OK(precis_spec_parse("a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=e4m3", &e4m3out));
  precis_gemm_plan p;
  CHECK_OK(precis_gemm_plan_make(&e4m3out, 64, 64, 64, 1, false, &p));
  CHECK(p.reduction_scheme_mask == PRECIS_LT_REDUCTION_COMPUTE_TYPE);
}

/* Issue 27: a row whose operands fit the L2 is timed from L2 on warm samples (decode-m1's 32 MiB of
 * bf16 weights in the H200's 50 MiB): l2_resident says so; explain uses the L2 stated for --cc. */
TEST(l2_residency_of_a_plan) {
  precis_gemm_plan p;
  /* decode-m1: m=1 n=4096 k=4096 batch 4, bf16: B 32 MiB + A 32 KiB + D 32 KiB. */
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("bf16")->spec, 1, 4096, 4096, 4, false, &p));
  long long bytes = precis_gemm_plan_operand_bytes(&p);
  CHECK_EQ_INT(bytes, 4096LL * 4096 * 2 + 4 * 4096 * 2 + 4 * 4096 * 2);
  const char *part = NULL;
  long long h200 = precis_cc_stated_l2_bytes(9, 0, &part);
  CHECK(h200 == 50LL << 20 && part && strstr(part, "H200"));
  CHECK(precis_cc_stated_l2_bytes(8, 9, &part) == 0 && part == NULL); /* L4 to RTX 4090: no single part */
  precis_kv_list kv = {0};
  precis_plan_describe_l2(bytes, h200, "stated", &kv);
  CHECK(strcmp(precis_kv_get(&kv, "l2_resident"), "yes") == 0);
  precis_kv_free(&kv);
  /* fp32 doubles it: 64 MiB no longer fits. */
  CHECK_OK(precis_gemm_plan_make(&preset_recipe("fp32")->spec, 1, 4096, 4096, 4, false, &p));
  memset(&kv, 0, sizeof kv);
  precis_plan_describe_l2(precis_gemm_plan_operand_bytes(&p), h200, "stated", &kv);
  CHECK(strcmp(precis_kv_get(&kv, "l2_resident"), "no") == 0);
  precis_kv_free(&kv);
  memset(&kv, 0, sizeof kv);
  precis_plan_describe_l2(1, 0, NULL, &kv);
  CHECK(strcmp(precis_kv_get(&kv, "l2_resident"), "unknown") == 0 && precis_kv_get(&kv, "l2_bytes") == NULL);
  precis_kv_free(&kv);
  /* A split counts every term at its stride. */
  precis_split_plan sp;
  CHECK_OK(precis_split_plan_make(&preset_recipe("bf16x9")->spec, 33, 20, 45, 1, false, 0, &sp));
  CHECK_EQ_INT(precis_split_plan_operand_bytes(&sp), 3 * (sp.lt_a_term_stride * 2 + sp.lt_b_term_stride * 2) + 33 * 20 * 4);
}

RUN_TESTS(T(every_recipe_every_shape_equals_the_row_major_product), T(random_shapes), T(padding_and_batching_choices),
          T(bad_dimensions_are_rejected), T(broken_plans_are_caught), T(int8_few_rows_are_padded_to_32),
          T(cublaslt_13_1_int8_strided_batch_is_one_call_per_matrix), T(cublaslt_13_1_int8_more_than_65536_rows_are_split),
          T(plan_check_rejects_what_cublaslt_rejects_at_call_time), T(fp8_scale_tensors_on_odd_shapes),
          T(broken_scale_tensors_are_caught), T(fp8_output_plan), T(scale_modes_need_cublaslt_12_9),
          T(split_plans_count_order_and_types), T(ozaki_plan_executes_like_the_cpu_backend),
          T(float_split_plan_layout_gives_the_exact_product), T(reduction_scheme_mask_keeps_split_k_in_the_compute_type),
          T(l2_residency_of_a_plan))
