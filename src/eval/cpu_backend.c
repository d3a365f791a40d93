/* The cpu backend: emulates recipe specs (DESIGN §11) so that the whole pipeline runs without a
 * GPU. The path follows from the spec's fields (cpu_route): integer operands take the exact integer
 * GEMM, fp16 accumulation the rounding loop, fp64 dgemm, the split recipes their own paths
 * (split.h: float terms summed in fp32 in a fixed order; Ozaki int8 slices as exact dgemm calls on
 * integer values, combined in fp64), every other float spec sgemm on the rounded or decoded
 * operands; every other quantized spec (issue 16) runs in cpu_quantized.c. A spec whose parts are
 * not implemented here yet is a row `unsupported`. Inputs are rounded exactly as the GPU path rounds them (src/numerics/format.c, src/numerics/quant.c); products
 * and sums are FP32 (OpenBLAS sgemm on the rounded inputs); int8 is exact integer arithmetic (dgemm
 * on integer-valued doubles: |acc| <= 127^2 k < 2^53); fp16acc16 rounds every partial sum to fp16.
 * Under a --target (sm_90 by default) fp16/bf16/tf32 with fp32 accumulation run the tensor cores'
 * fused dot-add instead (cpu_gemm_mma.c: aligned, truncated to 24/25 bits, D rounded toward zero),
 * as do fp8 FAST_ACCUM and the block-scaled MMAs (cpu_quantized.c); other float recipes are an
 * approximation of the GPU; timings are CPU timings, labelled cpu-emulation. */
#include <cblas.h>
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_gemm_fp16acc.h"
#include "cpu_gemm_mma.h"
#include "cpu_quantized.h"
#include "eval/target_plan.h"
#include "numerics/format.h"
#include "host_memory.h"
#include "numerics/transpose.h"
#include "numerics/quant.h"
#include "numerics/split.h"
#include "timing.h"

/* 127 * 127 * k must stay below 2^31 for the int32 accumulators the GPU path uses. */
#define INT8_MAX_K 133143LL
/* Integer products summed by sgemm are exact while every partial sum is an integer of magnitude at
 * most 2^24 (float32's 24-bit significand): |code| <= 128, so 128 * 128 * 1024 = 2^24 bounds any
 * order of summation over a chunk of 1024 products. The chunks' sums are then added in int32
 * (exact below 2^31, INT8_MAX_K). Twice dgemm's speed, the same integers. */
#define INT8_SGEMM_CHUNK_K 1024

/* How a spec runs here. */
typedef enum cpu_gemm {
  CPU_GEMM_SGEMM,     /* float operands (rounded, or decoded and scaled), fp32 products and sums */
  CPU_GEMM_F16_ACC,   /* every partial sum rounded to fp16 */
  CPU_GEMM_INT_EXACT, /* integer operands: exact integer arithmetic (sgemm on integer values in exact k-chunks) */
  CPU_GEMM_DGEMM,     /* fp64 operands and accumulation (OpenBLAS dgemm) */
  CPU_GEMM_SPLIT_F32, /* tf32x3, bf16x3/x6/x9: split terms, fp32 sums in a fixed order (split.h) */
  CPU_GEMM_OZAKI,     /* int8x<N>: exact slice products (dgemm on integer values), fp64 combination */
  CPU_GEMM_CRT,       /* crt-int8x<N>[-fast]: Ozaki II, one exact int8 product per modulus, CRT (split.h) */
  CPU_GEMM_QUANTIZED, /* every other quantized spec (issue 16): cpu_quantized.c */
  CPU_GEMM_MMA,       /* fp16/bf16/tf32 under a target: the tensor cores' fused dot-adds (cpu_gemm_mma.c) */
} cpu_gemm;

typedef struct cpu_case {
  const precis_spec *spec;
  cpu_gemm gemm;
  const precis_workload_info *w;
  const precis_workload_data *d;
  const precis_case_options *o;
  precis_host_tracker tracker;
  size_t a_count, b_count, c_count, b_matrices, a_rows;
  float *a_in, *b_in;       /* inputs as the GEMM reads them, in float32 (rounded or decoded) */
  float *a_int, *b_int;     /* int8 inputs as integer-valued floats */
  bool b_int_nk;            /* b_int holds each B as [n, k] (quantized from a caller's W: workload data b_nk) */
  int32_t *acc_int;         /* int8 accumulators */
  float *a_scales, *b_scales; /* int8: per row of A (batch*m), per column of B (b_matrices*n) */
  float tensor_scale_a, tensor_scale_b; /* scaled float operands: per-tensor scales (1 when unscaled) */
  size_t clipped;
  size_t clipped_a;         /* int8: of clipped, A's inputs (the column blocks of a wide W count A once) */
  float *c;                 /* output, float32 */
  precis_float_split fsplit;  /* CPU_GEMM_SPLIT_F32 */
  float *a_terms, *b_terms;   /* split terms: fsplit.terms arrays of a_count / b_count */
  double *a_f64, *b_f64;      /* CPU_GEMM_DGEMM: the operands in float64 */
  double *a_slices, *b_slices; /* CPU_GEMM_OZAKI: split_terms slices (split.h layouts) */
  int *a_exps, *b_exps;       /* Ozaki: per row of A (a_rows), per column of each B (b_matrices*n) */
  double *levels;             /* Ozaki: split_terms level sums of one GEMM group */
  double *c64;                /* DGEMM, OZAKI, CRT: the output in float64 */
  /* CRT: a_f64/b_f64 hold the scaled integers A', B' and a_exps/b_exps their shifts; N int8
   * residues of each (modulus l at l * count), the group's residues widened for dgemm, its int32
   * product (as float64) and the N residues of each output. */
  int8_t *a_res, *b_res;
  double *a_mod, *b_mod, *crt_prod;
  uint8_t *crt_r;
  char reason[512];
  precis_row_status status;
  precis_cpu_quant *quant;  /* CPU_GEMM_QUANTIZED */
  precis_kv_list *details;
  precis_target_plan target; /* --target: the way and accumulator of the architecture emulated */
  precis_mma_shape mma;      /* CPU_GEMM_MMA */
} cpu_case;

static void *case_alloc(cpu_case *cc, size_t count, size_t elem) {
  if (count > SIZE_MAX / elem) return NULL;
  return precis_tracked_alloc(&cc->tracker, count * elem);
}

static void case_free(cpu_case *cc, void *p, size_t count, size_t elem) {
  precis_tracked_free(&cc->tracker, p, count * elem);
}

/* Outputs of one GEMM group of run_gemm (with a shared B the batch folds into the rows). */
static size_t ozaki_group_outputs(const cpu_case *cc) {
  const precis_workload_info *w = cc->w;
  return (size_t)(w->b_batched ? w->m : w->m * w->batch) * (size_t)w->n;
}

static void case_release(cpu_case *cc) {
  case_free(cc, cc->a_in, cc->a_count, sizeof(float));
  case_free(cc, cc->b_in, cc->b_count, sizeof(float));
  case_free(cc, cc->a_int, cc->a_count, sizeof(float));
  case_free(cc, cc->b_int, cc->b_count, sizeof(float));
  case_free(cc, cc->acc_int, cc->c_count, sizeof(int32_t));
  case_free(cc, cc->a_scales, cc->a_rows, sizeof(float));
  case_free(cc, cc->b_scales, cc->b_matrices * (size_t)cc->w->n, sizeof(float));
  cc->a_in = cc->b_in = NULL;
  cc->a_int = cc->b_int = NULL;
  cc->acc_int = NULL;
  cc->a_scales = cc->b_scales = NULL;
  size_t terms = (size_t)cc->fsplit.terms, slices = (size_t)cc->spec->split_terms;
  case_free(cc, cc->a_terms, terms * cc->a_count, sizeof(float));
  case_free(cc, cc->b_terms, terms * cc->b_count, sizeof(float));
  case_free(cc, cc->a_f64, cc->a_count, sizeof(double));
  case_free(cc, cc->b_f64, cc->b_count, sizeof(double));
  case_free(cc, cc->a_slices, slices * cc->a_count, sizeof(double));
  case_free(cc, cc->b_slices, slices * cc->b_count, sizeof(double));
  case_free(cc, cc->a_exps, cc->a_rows, sizeof(int));
  case_free(cc, cc->b_exps, cc->b_matrices * (size_t)cc->w->n, sizeof(int));
  case_free(cc, cc->levels, slices * ozaki_group_outputs(cc), sizeof(double));
  case_free(cc, cc->c64, cc->c_count, sizeof(double));
  size_t moduli = precis_split_is_crt(cc->spec->split) ? (size_t)cc->spec->split_terms : 0;
  size_t kn = (size_t)(cc->w->k * cc->w->n);
  case_free(cc, cc->a_res, moduli * cc->a_count, 1);
  case_free(cc, cc->b_res, moduli * cc->b_count, 1);
  case_free(cc, cc->a_mod, moduli ? cc->a_count : 0, sizeof(double));
  case_free(cc, cc->b_mod, moduli ? kn : 0, sizeof(double));
  case_free(cc, cc->crt_prod, moduli ? ozaki_group_outputs(cc) : 0, sizeof(double));
  case_free(cc, cc->crt_r, moduli * ozaki_group_outputs(cc), 1);
  cc->a_res = cc->b_res = NULL;
  cc->a_mod = cc->b_mod = cc->crt_prod = NULL;
  cc->crt_r = NULL;
  cc->a_terms = cc->b_terms = NULL;
  cc->a_f64 = cc->b_f64 = cc->a_slices = cc->b_slices = cc->levels = cc->c64 = NULL;
  cc->a_exps = cc->b_exps = NULL;
  precis_cpu_quant_free(cc->quant);
  cc->quant = NULL;
}

static precis_status out_of_memory(cpu_case *cc, const char *what, size_t bytes) {
  cc->status = PRECIS_ROW_DOES_NOT_FIT;
  snprintf(cc->reason, sizeof cc->reason, "host allocation of %zu bytes for %s failed", bytes, what);
  return PRECIS_E_DOES_NOT_FIT;
}

static const float *b_matrix_f(const cpu_case *cc, const float *b, size_t batch_index) {
  return b + (cc->w->b_batched ? batch_index * (size_t)(cc->w->k * cc->w->n) : 0);
}

/* One GEMM group of the Ozaki scheme: level g = s + t gets every slice product A_s·B_t, summed
 * exactly (integers below 2^53 whatever dgemm's order), then the levels are combined. */
static void run_ozaki_group(cpu_case *cc, size_t group, size_t rows) {
  const precis_workload_info *w = cc->w;
  size_t n = (size_t)w->n, k = (size_t)w->k;
  int slices = cc->spec->split_terms;
  size_t mn = rows * n, row0 = group * rows, mat = w->b_batched ? group : 0;
  const double *b_base = cc->b_slices + mat * (size_t)slices * k * n;
  for (int level = 2; level <= slices + 1; level++) {
    double *sum = cc->levels + (size_t)(level - 2) * mn;
    for (int s = 1; s < level; s++) {
      int t = level - s;
      const double *as = cc->a_slices + ((size_t)(s - 1) * cc->a_rows + row0) * k;
      const double *bt = b_base + (size_t)(t - 1) * k * n;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0, as, (int)k, bt, (int)n,
                  s == 1 ? 0.0 : 1.0, sum, (int)n);
    }
  }
  precis_ozaki_combine(cc->levels, slices, rows, n, cc->a_exps + row0, cc->b_exps + mat * n, cc->c64 + row0 * n);
}

/* One GEMM group of Ozaki scheme II: per modulus, the residues of A' and B' (int8, widened to
 * float64) multiplied by dgemm (exact: |sum| <= 128^2 k < 2^31), each product reduced mod m; then
 * every output rebuilt from its N residues (split.h). */
static void run_crt_group(cpu_case *cc, size_t group, size_t rows) {
  const precis_workload_info *w = cc->w;
  size_t n = (size_t)w->n, k = (size_t)w->k;
  int moduli = cc->spec->split_terms;
  size_t mn = rows * n, row0 = group * rows, mat = w->b_batched ? group : 0;
  for (int l = 0; l < moduli; l++) {
    const int8_t *ar = cc->a_res + (size_t)l * cc->a_count + row0 * k;
    const int8_t *br = cc->b_res + (size_t)l * cc->b_count + mat * k * n;
    for (size_t i = 0; i < rows * k; i++) cc->a_mod[i] = ar[i];
    for (size_t i = 0; i < k * n; i++) cc->b_mod[i] = br[i];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0, cc->a_mod, (int)k, cc->b_mod,
                (int)n, 0.0, cc->crt_prod, (int)n);
    double m = precis_crt_modulus(l);
    uint8_t *r = cc->crt_r + (size_t)l * mn;
    for (size_t i = 0; i < mn; i++) {
      double v = fmod(cc->crt_prod[i], m); /* exact */
      r[i] = (uint8_t)(v < 0 ? v + m : v);
    }
  }
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < n; j++) {
      int sa = cc->a_exps[row0 + i], sb = cc->b_exps[mat * n + j];
      bool nonfinite = sa == PRECIS_CRT_NONFINITE || sb == PRECIS_CRT_NONFINITE; /* an inf or NaN input */
      cc->c64[(row0 + i) * n + j] =
          precis_crt_reconstruct(cc->crt_r + i * n + j, mn, moduli, nonfinite ? PRECIS_CRT_NONFINITE : sa + sb);
    }
}

/* The timed operation: the GEMM in the recipe's arithmetic, writing cc->c (int8: accumulators). */
static void run_gemm(cpu_case *cc, double *f16_acc_row) {
  if (cc->gemm == CPU_GEMM_QUANTIZED) {
    precis_cpu_quant_gemm(cc->quant, cc->c);
    return;
  }
  const precis_workload_info *w = cc->w;
  size_t m = (size_t)w->m, n = (size_t)w->n, k = (size_t)w->k, batch = (size_t)w->batch;
  /* With a shared B the batch folds into the rows of one GEMM. */
  size_t groups = w->b_batched ? batch : 1;
  size_t rows = w->b_batched ? m : m * batch;
  for (size_t g = 0; g < groups; g++) {
    size_t a_off = g * rows * k, c_off = g * rows * n;
    switch (cc->gemm) {
    case CPU_GEMM_INT_EXACT: {
      /* Each chunk's exact sum lands in c (float32, overwritten by the dequantization later), then
       * in the int32 accumulators. */
      const float *b_int = cc->b_int + (w->b_batched ? g * k * n : 0);
      float *chunk = cc->c + c_off;
      int32_t *acc = cc->acc_int ? cc->acc_int + c_off : NULL;
      for (size_t k0 = 0; k0 < k; k0 += INT8_SGEMM_CHUNK_K) {
        size_t len = k - k0 < INT8_SGEMM_CHUNK_K ? k - k0 : INT8_SGEMM_CHUNK_K;
        if (cc->b_int_nk)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)len, 1.0f, cc->a_int + a_off + k0,
                      (int)k, b_int + k0, (int)k, 0.0f, chunk, (int)n);
        else
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)len, 1.0f,
                      cc->a_int + a_off + k0, (int)k, b_int + k0 * n, (int)n, 0.0f, chunk, (int)n);
        if (!acc) break; /* one chunk: c holds the exact sums */
        if (k0 == 0)
          for (size_t i = 0; i < rows * n; i++) acc[i] = (int32_t)chunk[i];
        else
          for (size_t i = 0; i < rows * n; i++) acc[i] += (int32_t)chunk[i];
      }
      break;
    }
    case CPU_GEMM_F16_ACC:
      precis_gemm_fp16acc(cc->a_in + a_off, b_matrix_f(cc, cc->b_in, g), cc->c + c_off, rows, n, k, f16_acc_row);
      break;
    case CPU_GEMM_QUANTIZED: break; /* returned above */
    case CPU_GEMM_MMA:
      precis_gemm_mma(cc->a_in + a_off, b_matrix_f(cc, cc->b_in, g), cc->c + c_off, rows, n, k, &cc->mma);
      break;
    case CPU_GEMM_SGEMM:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, cc->a_in + a_off, (int)k,
                  b_matrix_f(cc, cc->b_in, g), (int)n, 0.0f, cc->c + c_off, (int)n);
      break;
    case CPU_GEMM_DGEMM:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0, cc->a_f64 + a_off, (int)k,
                  cc->b_f64 + (w->b_batched ? g * k * n : 0), (int)n, 0.0, cc->c64 + c_off, (int)n);
      break;
    case CPU_GEMM_SPLIT_F32:
      precis_split_float_gemm(&cc->fsplit, cc->a_terms + a_off, cc->a_count, b_matrix_f(cc, cc->b_terms, g),
                              cc->b_count, rows, n, k, cc->c + c_off);
      break;
    case CPU_GEMM_OZAKI: run_ozaki_group(cc, g, rows); break;
    case CPU_GEMM_CRT: run_crt_group(cc, g, rows); break;
    }
  }
}

static void to_integer_floats(const int8_t *q, float *out, size_t count) {
  for (size_t i = 0; i < count; i++) out[i] = (float)q[i];
}

/* The calibration method behind a static scale spec. */
static precis_calib_method calib_method(precis_scale_method m) {
  return m == PRECIS_SCALE_ABSMAX ? PRECIS_CALIB_ABSMAX : m == PRECIS_SCALE_PERCENTILE ? PRECIS_CALIB_PERCENTILE
                                                                                       : PRECIS_CALIB_MSE;
}

/* A's int8 scales: per row, per tensor from the evaluated A, or per tensor from the calibration
 * split. Every row gets a scale (the dequantization reads one per row). */
static precis_status quantize_int8_a(cpu_case *cc, int8_t *a_q, precis_kv_list *details) {
  const precis_spec *s = cc->spec;
  const precis_workload_info *w = cc->w;
  const precis_workload_data *d = cc->d;
  size_t k = (size_t)w->k;
  if (s->a.gran == PRECIS_GRAN_ROW) {
    precis_int8_row_scales(d->a, cc->a_rows, k, cc->a_scales);
    cc->clipped += precis_int8_quantize_rows(d->a, cc->a_rows, k, cc->a_scales, a_q);
    precis_kv_set(details, "a_scales", "per row, dynamic (amax/127 of each evaluated row)");
    return PRECIS_OK;
  }
  float amax = 0;
  char buf[160];
  if (s->scale == PRECIS_SCALE_DYNAMIC) {
    amax = precis_absmax(d->a, cc->a_count);
    snprintf(buf, sizeof buf, "per tensor, dynamic (amax/127 of the evaluated A)");
  } else {
    if (!d->calib_a || w->calib_samples <= 0) {
      cc->status = PRECIS_ROW_FAILED;
      snprintf(cc->reason, sizeof cc->reason,
               "static int8 activation scales need the workload's calibration split (calib/a), which it lacks");
      return PRECIS_E_INPUT;
    }
    precis_calib_method method = calib_method(s->scale);
    precis_status st = precis_calib_amax(d->calib_a, (size_t)(w->calib_samples * w->m * w->k), method, s->percentile,
                                         &amax);
    if (st != PRECIS_OK) {
      cc->status = PRECIS_ROW_FAILED;
      snprintf(cc->reason, sizeof cc->reason, "calibration failed: %s", precis_last_error());
      return st;
    }
    snprintf(buf, sizeof buf, "per tensor, static from %lld calibration samples (%s)", (long long)w->calib_samples,
             precis_calib_method_str(method));
  }
  float scale = precis_int8_scale_from_amax(amax);
  for (size_t i = 0; i < cc->a_rows; i++) cc->a_scales[i] = scale;
  cc->clipped += precis_int8_quantize_tensor(d->a, cc->a_count, scale, a_q);
  precis_kv_set(details, "a_scales", buf);
  if (s->scale != PRECIS_SCALE_DYNAMIC) precis_kv_set_number(details, "a_amax_static", amax);
  return PRECIS_OK;
}

/* Integer operands: s8 codes as integer-valued floats, with their scales. */
static precis_status prepare_int8(cpu_case *cc, precis_kv_list *details) {
  const precis_workload_info *w = cc->w;
  const precis_workload_data *d = cc->d;
  size_t k = (size_t)w->k, n = (size_t)w->n;
  precis_status st = PRECIS_OK;
  if (w->k > INT8_MAX_K) {
    cc->status = PRECIS_ROW_UNSUPPORTED;
    snprintf(cc->reason, sizeof cc->reason,
             "k=%lld: int32 accumulation could overflow (127*127*k > 2^31-1 for k > %lld); split the reduction",
             (long long)w->k, INT8_MAX_K);
    return PRECIS_E_UNSUPPORTED;
  }
  int8_t *a_q = case_alloc(cc, cc->a_count, 1);
  int8_t *b_q = case_alloc(cc, cc->b_count, 1);
  cc->a_scales = case_alloc(cc, cc->a_rows, sizeof(float));
  cc->b_scales = case_alloc(cc, cc->b_matrices * n, sizeof(float));
  cc->a_int = case_alloc(cc, cc->a_count, sizeof(float));
  cc->b_int = case_alloc(cc, cc->b_count, sizeof(float));
  /* With k in one chunk the sgemm's float sums are the exact accumulators (below 2^24): dequantized
   * from c in place, no int32 copy (a head's [rows, vocab] accumulators were a fifth of verify's peak). */
  const bool chunked = k > INT8_SGEMM_CHUNK_K;
  cc->acc_int = chunked ? case_alloc(cc, cc->c_count, sizeof(int32_t)) : NULL;
  if (!a_q || !b_q || !cc->a_scales || !cc->b_scales || !cc->a_int || !cc->b_int || (chunked && !cc->acc_int)) {
    st = out_of_memory(cc, "the int8 operands", (cc->a_count + cc->b_count) * 5 + cc->c_count * 4);
    goto done;
  }
  st = quantize_int8_a(cc, a_q, details);
  if (st != PRECIS_OK) goto done;
  cc->clipped_a = cc->clipped;
  for (size_t g = 0; g < cc->b_matrices; g++) {
    const float *b = d->b + g * k * n;
    if (d->b_nk) {
      /* W [n, k]: B's columns are W's rows, quantized where they lie (the same values and scales:
       * quant.h's row and column quantizers are one per-element operation); the GEMM reads the
       * codes transposed, and its sums of integers are exact in any order. */
      precis_int8_row_scales(b, n, k, cc->b_scales + g * n);
      cc->clipped += precis_int8_quantize_rows(b, n, k, cc->b_scales + g * n, b_q + g * k * n);
    } else {
      precis_int8_col_scales(b, k, n, cc->b_scales + g * n);
      cc->clipped += precis_int8_quantize_cols(b, k, n, cc->b_scales + g * n, b_q + g * k * n);
    }
  }
  cc->b_int_nk = d->b_nk != 0;
  precis_kv_set(details, "b_scales", "per column (amax/127)");
  to_integer_floats(a_q, cc->a_int, cc->a_count);
  to_integer_floats(b_q, cc->b_int, cc->b_count);
done:
  case_free(cc, a_q, cc->a_count, 1);
  case_free(cc, b_q, cc->b_count, 1);
  return st;
}

/* One float operand as the GEMM reads it: rounded to its format, or (e4m3 per tensor) quantized
 * with s = amax/448 and decoded, the scale applied after the GEMM. */
static precis_status prepare_float(cpu_case *cc, const precis_operand_spec *op, const char *which, const float *x,
                                   size_t count, float *in, float *scale, precis_kv_list *details) {
  *scale = 1.0f;
  if (!precis_operand_is_scaled(op)) {
    const precis_format *f = precis_format_get(op->fmt);
    if (f->round_array) f->round_array(x, in, count);
    else if (in != x) memcpy(in, x, count * sizeof(float));
    return PRECIS_OK;
  }
  uint8_t *q = case_alloc(cc, count, 1);
  if (!q) return out_of_memory(cc, "the fp8 operands", count);
  *scale = precis_fp8_scale_from_amax(precis_absmax(x, count));
  cc->clipped += precis_fp8_quantize_tensor(x, count, *scale, q);
  precis_e4m3_to_f32_array(q, in, count);
  case_free(cc, q, count, 1);
  char key[32];
  snprintf(key, sizeof key, "%s_scales", which);
  precis_kv_set(details, key, which[0] == 'a' ? "per tensor (amax/448 over the whole A)" : "per tensor (amax/448)");
  snprintf(key, sizeof key, "fp8_scale_%s", which);
  precis_kv_set_number(details, key, *scale);
  return PRECIS_OK;
}

/* tf32x3, bf16x3/x6/x9: the terms of each operand (split.h). */
static precis_status prepare_float_split(cpu_case *cc, precis_kv_list *details) {
  size_t terms = (size_t)cc->fsplit.terms;
  cc->a_terms = case_alloc(cc, terms * cc->a_count, sizeof(float));
  cc->b_terms = case_alloc(cc, terms * cc->b_count, sizeof(float));
  if (!cc->a_terms || !cc->b_terms)
    return out_of_memory(cc, "the split terms", terms * (cc->a_count + cc->b_count) * sizeof(float));
  precis_split_float_terms(&cc->fsplit, cc->d->a, cc->a_count, cc->a_terms);
  precis_split_float_terms(&cc->fsplit, cc->d->b, cc->b_count, cc->b_terms);
  char text[128];
  snprintf(text, sizeof text, "%d %s terms per operand (RNE, exact fp32 residuals), %d products", cc->fsplit.terms,
           precis_format_get(cc->fsplit.term_fmt)->name, cc->fsplit.products);
  precis_kv_set(details, "split", text);
  return PRECIS_OK;
}

/* The accurate variant's shifts of one GEMM group: Â, B̂ (integers <= 64 bounding |A|, |B| by rows
 * and columns), their exact product, its row and column maxima (split.h). */
static precis_status crt_accurate_shifts(cpu_case *cc, size_t group, size_t rows) {
  const precis_workload_info *w = cc->w;
  size_t n = (size_t)w->n, k = (size_t)w->k, row0 = group * rows, mat = w->b_batched ? group : 0;
  const double *a = cc->a_f64 + row0 * k, *b = cc->b_f64 + mat * k * n;
  double *ahat = case_alloc(cc, rows * k, sizeof(double)), *bhat = case_alloc(cc, k * n, sizeof(double));
  double *chat = case_alloc(cc, rows * n, sizeof(double));
  int *ea = case_alloc(cc, rows, sizeof(int)), *eb = case_alloc(cc, n, sizeof(int));
  precis_status st = PRECIS_OK;
  if (!ahat || !bhat || !chat || !ea || !eb) {
    st = out_of_memory(cc, "the Ozaki II bound product", (rows * k + k * n + rows * n) * sizeof(double));
    goto done;
  }
  for (size_t i = 0; i < rows; i++) ea[i] = precis_crt_bound_ints(a + i * k, k, 1, ahat + i * k);
  for (size_t j = 0; j < n; j++) eb[j] = precis_crt_bound_ints(b + j, k, n, bhat + j);
  /* Exact: integers <= 64^2 k < 2^53. */
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0, ahat, (int)k, bhat, (int)n, 0.0,
              chat, (int)n);
  int moduli = cc->spec->split_terms;
  for (size_t i = 0; i < rows; i++) {
    double cmax = 0;
    for (size_t j = 0; j < n; j++) cmax = fmax(cmax, chat[i * n + j]);
    cc->a_exps[row0 + i] = precis_crt_accurate_shift(ea[i], cmax, moduli);
  }
  for (size_t j = 0; j < n; j++) {
    double cmax = 0;
    for (size_t i = 0; i < rows; i++) cmax = fmax(cmax, chat[i * n + j]);
    cc->b_exps[mat * n + j] = precis_crt_accurate_shift(eb[j], cmax, moduli);
  }
done:
  case_free(cc, ahat, rows * k, sizeof(double));
  case_free(cc, bhat, k * n, sizeof(double));
  case_free(cc, chat, rows * n, sizeof(double));
  case_free(cc, ea, rows, sizeof(int));
  case_free(cc, eb, n, sizeof(int));
  return st;
}

/* Ozaki scheme II: the shifts (fast: from each row's/column's norm; accurate: from the bound
 * product), A' and B' (in place of the float64 operands) and their int8 residues (split.h). */
static precis_status prepare_crt(cpu_case *cc, precis_kv_list *details) {
  const precis_workload_info *w = cc->w;
  size_t k = (size_t)w->k, n = (size_t)w->n;
  int moduli = cc->spec->split_terms;
  bool fast = cc->spec->split == PRECIS_SPLIT_CRT_INT8XN_FAST;
  if (w->k > PRECIS_CRT_MAX_K) {
    cc->status = PRECIS_ROW_UNSUPPORTED;
    snprintf(cc->reason, sizeof cc->reason,
             "k=%lld: an int8 residue product could overflow int32 (128*128*k >= 2^31 for k > %lld); split the "
             "reduction",
             (long long)w->k, PRECIS_CRT_MAX_K);
    return PRECIS_E_UNSUPPORTED;
  }
  size_t outputs = ozaki_group_outputs(cc), kn = k * n;
  cc->a_exps = case_alloc(cc, cc->a_rows, sizeof(int));
  cc->b_exps = case_alloc(cc, cc->b_matrices * n, sizeof(int));
  cc->a_res = case_alloc(cc, (size_t)moduli * cc->a_count, 1);
  cc->b_res = case_alloc(cc, (size_t)moduli * cc->b_count, 1);
  cc->a_mod = case_alloc(cc, cc->a_count, sizeof(double));
  cc->b_mod = case_alloc(cc, kn, sizeof(double));
  cc->crt_prod = case_alloc(cc, outputs, sizeof(double));
  cc->crt_r = case_alloc(cc, (size_t)moduli * outputs, 1);
  if (!cc->a_exps || !cc->b_exps || !cc->a_res || !cc->b_res || !cc->a_mod || !cc->b_mod || !cc->crt_prod || !cc->crt_r)
    return out_of_memory(cc, "the Ozaki II residues",
                         (size_t)moduli * (cc->a_count + cc->b_count + outputs) +
                             (cc->a_count + kn + outputs) * sizeof(double));
  if (fast) {
    for (size_t i = 0; i < cc->a_rows; i++) cc->a_exps[i] = precis_crt_fast_shift(cc->a_f64 + i * k, k, 1, moduli);
    for (size_t g = 0; g < cc->b_matrices; g++)
      for (size_t j = 0; j < n; j++)
        cc->b_exps[g * n + j] = precis_crt_fast_shift(cc->b_f64 + g * kn + j, k, n, moduli);
  } else {
    size_t groups = w->b_batched ? (size_t)w->batch : 1, rows = w->b_batched ? (size_t)w->m : cc->a_rows;
    for (size_t g = 0; g < groups; g++) {
      precis_status st = crt_accurate_shifts(cc, g, rows);
      if (st != PRECIS_OK) return st;
    }
  }
  for (size_t i = 0; i < cc->a_rows; i++)
    for (size_t p = 0; p < k; p++) cc->a_f64[i * k + p] = precis_crt_scale(cc->a_f64[i * k + p], cc->a_exps[i]);
  for (size_t g = 0; g < cc->b_matrices; g++)
    for (size_t p = 0; p < k; p++)
      for (size_t j = 0; j < n; j++) {
        double *x = cc->b_f64 + g * kn + p * n + j;
        *x = precis_crt_scale(*x, cc->b_exps[g * n + j]);
      }
  for (int l = 0; l < moduli; l++) {
    int m = precis_crt_modulus(l);
    for (size_t i = 0; i < cc->a_count; i++) cc->a_res[(size_t)l * cc->a_count + i] = (int8_t)precis_crt_residue(cc->a_f64[i], m);
    for (size_t i = 0; i < cc->b_count; i++) cc->b_res[(size_t)l * cc->b_count + i] = (int8_t)precis_crt_residue(cc->b_f64[i], m);
  }
  char text[320];
  snprintf(text, sizeof text,
           "Ozaki scheme II (%s): rows of A / columns of B scaled by powers of two and truncated to integers with "
           "sum |A'||B'| < M/2 (%s), %d int8 moduli (256, 255, 253, ...), %d exact int32 products%s, CRT in exact "
           "integer arithmetic",
           fast ? "fast" : "accurate", fast ? "Cauchy-Schwarz from row/column norms" : "from an exact bound product |A|.|B|",
           moduli, moduli, fast ? "" : " plus the bound product");
  precis_kv_set(details, "split", text);
  return PRECIS_OK;
}

/* fp64 and Ozaki: the operands widened to float64 (exact from float32); Ozaki then slices them. */
static precis_status prepare_f64(cpu_case *cc, precis_kv_list *details) {
  const precis_workload_info *w = cc->w;
  size_t k = (size_t)w->k, n = (size_t)w->n;
  cc->a_f64 = case_alloc(cc, cc->a_count, sizeof(double));
  cc->b_f64 = case_alloc(cc, cc->b_count, sizeof(double));
  cc->c64 = case_alloc(cc, cc->c_count, sizeof(double));
  if (!cc->a_f64 || !cc->b_f64 || !cc->c64)
    return out_of_memory(cc, "the float64 operands", (cc->a_count + cc->b_count + cc->c_count) * sizeof(double));
  /* float64 datasets give all 53 bits; float32 ones widen exactly. */
  for (size_t i = 0; i < cc->a_count; i++) cc->a_f64[i] = cc->d->a64 ? cc->d->a64[i] : cc->d->a[i];
  for (size_t i = 0; i < cc->b_count; i++) cc->b_f64[i] = cc->d->b64 ? cc->d->b64[i] : cc->d->b[i];
  if (cc->gemm == CPU_GEMM_CRT) return prepare_crt(cc, details);
  if (cc->gemm != CPU_GEMM_OZAKI) return PRECIS_OK;
  if (w->k > INT8_MAX_K) {
    cc->status = PRECIS_ROW_UNSUPPORTED;
    snprintf(cc->reason, sizeof cc->reason,
             "k=%lld: an int32 slice product could overflow (127*127*k > 2^31-1 for k > %lld); split the reduction",
             (long long)w->k, INT8_MAX_K);
    return PRECIS_E_UNSUPPORTED;
  }
  size_t slices = (size_t)cc->spec->split_terms;
  cc->a_slices = case_alloc(cc, slices * cc->a_count, sizeof(double));
  cc->b_slices = case_alloc(cc, slices * cc->b_count, sizeof(double));
  cc->a_exps = case_alloc(cc, cc->a_rows, sizeof(int));
  cc->b_exps = case_alloc(cc, cc->b_matrices * n, sizeof(int));
  cc->levels = case_alloc(cc, slices * ozaki_group_outputs(cc), sizeof(double));
  if (!cc->a_slices || !cc->b_slices || !cc->a_exps || !cc->b_exps || !cc->levels)
    return out_of_memory(cc, "the Ozaki slices",
                         (slices * (cc->a_count + cc->b_count + ozaki_group_outputs(cc))) * sizeof(double));
  precis_ozaki_split_rows(cc->a_f64, cc->a_rows, k, (int)slices, cc->a_exps, cc->a_slices);
  for (size_t g = 0; g < cc->b_matrices; g++)
    precis_ozaki_split_cols(cc->b_f64 + g * k * n, k, n, (int)slices, cc->b_exps + g * n,
                            cc->b_slices + g * slices * k * n);
  char text[160];
  snprintf(text, sizeof text, "%zu int8 slices per operand (7 bits, truncated), power-of-two scales per row of A and "
           "column of B, %zu exact int32 slice products", slices, slices * (slices + 1) / 2);
  precis_kv_set(details, "split", text);
  return PRECIS_OK;
}

/* Converts or quantizes A and B into the spec's operand formats (the part timed as convert_ms). */
static precis_status prepare_inputs(cpu_case *cc, precis_kv_list *details) {
  if (cc->gemm == CPU_GEMM_INT_EXACT) return prepare_int8(cc, details);
  if (cc->gemm == CPU_GEMM_DGEMM || cc->gemm == CPU_GEMM_OZAKI || cc->gemm == CPU_GEMM_CRT)
    return prepare_f64(cc, details);
  if (cc->gemm == CPU_GEMM_SPLIT_F32) return prepare_float_split(cc, details);
  if (cc->gemm == CPU_GEMM_QUANTIZED)
    return precis_cpu_quant_prepare(cc->spec, cc->w, cc->d, &cc->target.model, &cc->tracker, details, &cc->quant,
                                    &cc->clipped, &cc->status, cc->reason, sizeof cc->reason);
  cc->a_in = case_alloc(cc, cc->a_count, sizeof(float));
  cc->b_in = case_alloc(cc, cc->b_count, sizeof(float));
  if (!cc->a_in || !cc->b_in)
    return out_of_memory(cc, "the rounded operands", (cc->a_count + cc->b_count) * sizeof(float));
  precis_status st = prepare_float(cc, &cc->spec->a, "a", cc->d->a, cc->a_count, cc->a_in, &cc->tensor_scale_a, details);
  if (st != PRECIS_OK) return st;
  const float *b = cc->d->b;
  if (cc->d->b_nk) {
    /* W [n, k]: transposed into b_in, then rounded (or quantized) there: no second copy of B. */
    const size_t k = (size_t)cc->w->k, n = (size_t)cc->w->n;
    for (size_t g = 0; g < cc->b_matrices; g++) precis_transpose_f32(b + g * k * n, k, n, k, cc->b_in + g * k * n, n);
    b = cc->b_in;
  }
  return prepare_float(cc, &cc->spec->b, "b", b, cc->b_count, cc->b_in, &cc->tensor_scale_b, details);
}

static bool spec_is_scaled(const precis_spec *s) {
  return precis_operand_is_scaled(&s->a) || precis_operand_is_scaled(&s->b);
}

/* Applies what follows the GEMM: integer dequantization or per-tensor scales, then rounding to the
 * output format (an accumulator already in the output format is not rounded again). */
static bool finish_output(cpu_case *cc) {
  const precis_workload_info *w = cc->w;
  size_t m = (size_t)w->m, n = (size_t)w->n;
  if (cc->gemm == CPU_GEMM_QUANTIZED) return precis_cpu_quant_finish(cc->quant, cc->c, cc->details);
  if (cc->gemm == CPU_GEMM_INT_EXACT) {
    /* The accumulators are exact int32 sums: dequantize as the GPU does. */
    for (size_t b = 0; b < (size_t)w->batch; b++) {
      const float *col_scales = cc->b_scales + (w->b_batched ? b * n : 0);
      if (cc->acc_int)
        precis_int8_dequantize(cc->acc_int + b * m * n, m, n, cc->a_scales + b * m, col_scales, cc->c + b * m * n);
      else
        precis_int8_dequantize_sums(cc->c + b * m * n, m, n, cc->a_scales + b * m, col_scales, cc->c + b * m * n);
    }
  } else if (spec_is_scaled(cc->spec)) {
    float s = cc->tensor_scale_a * cc->tensor_scale_b;
    for (size_t i = 0; i < cc->c_count; i++) cc->c[i] *= s;
  } else if (cc->c64) {
    /* A float64 result: out=fp64 hands it over as it is; c is its float32 rounding (then rounded
     * to a narrower output format below). */
    for (size_t i = 0; i < cc->c_count; i++) cc->c[i] = (float)cc->c64[i];
    if (cc->spec->out == PRECIS_FMT_F64) return true;
  }
  const precis_format *out = precis_format_get(cc->spec->out);
  if (cc->spec->out != cc->spec->acc && out->round_array) out->round_array(cc->c, cc->c, cc->c_count);
  return true;
}

/* The split recipes: float splits read fp32 operands and sum in fp32; Ozaki reads fp64 (or fp32)
 * operands and sums in fp64. Scales and SmoothQuant belong to quantized recipes, not to these. */
static bool cpu_route_split(const precis_spec *s, cpu_gemm *gemm, char *why, size_t len) {
  const char *name = precis_split_name(s->split);
  if (s->split == PRECIS_SPLIT_CUBLAS_EMU) {
    snprintf(why, len, "split=cublas-emu: cuBLAS's own FP64 emulation runs on the cuda backend only (its split is "
                       "the library's, not emulated here); ozaki-int8-N is the cpu's FP64 emulation");
    return false;
  }
  bool float_ops = (s->a.fmt == PRECIS_FMT_F32 || s->a.fmt == PRECIS_FMT_F64) &&
                   (s->b.fmt == PRECIS_FMT_F32 || s->b.fmt == PRECIS_FMT_F64);
  if (!float_ops || s->scale != PRECIS_SCALE_DYNAMIC || precis_spec_smooths(s)) {
    snprintf(why, len, "split=%s%s: splits take fp32 or fp64 operands without static scales or SmoothQuant", name,
             s->split == PRECIS_SPLIT_INT8XN ? "<N>" : "");
    return false;
  }
  if (precis_split_is_crt(s->split)) {
    if (s->acc != PRECIS_FMT_F64) {
      snprintf(why, len, "split=%s: Ozaki scheme II rebuilds the result in fp64 (acc=fp64), not %s", name,
               precis_format_get(s->acc)->name);
      return false;
    }
    *gemm = CPU_GEMM_CRT;
    return true;
  }
  if (s->split == PRECIS_SPLIT_INT8XN) {
    if (s->acc != PRECIS_FMT_F64) {
      snprintf(why, len, "split=int8x%d: the Ozaki slice products are summed in fp64 (acc=fp64), not %s",
               s->split_terms, precis_format_get(s->acc)->name);
      return false;
    }
    *gemm = CPU_GEMM_OZAKI;
    return true;
  }
  if (s->a.fmt != PRECIS_FMT_F32 || s->b.fmt != PRECIS_FMT_F32 || s->acc != PRECIS_FMT_F32 ||
      s->out == PRECIS_FMT_F64) {
    snprintf(why, len, "split=%s: emulates fp32: a=fp32, b=fp32, acc=fp32 and an output no wider than fp32", name);
    return false;
  }
  *gemm = CPU_GEMM_SPLIT_F32;
  return true;
}

/* Which GEMM runs a spec here, or why none does. Every check names the field it refuses. */
static bool cpu_route(const precis_spec *s, cpu_gemm *gemm, char *why, size_t len) {
  const precis_operand_spec *ops[2] = {&s->a, &s->b};
  char text[48];
  if (precis_cpu_quant_claims(s)) {
    *gemm = CPU_GEMM_QUANTIZED;
    return precis_cpu_quant_route(s, why, len);
  }
  if (s->split != PRECIS_SPLIT_NONE) return cpu_route_split(s, gemm, why, len);
  if (precis_spec_smooths(s)) {
    snprintf(why, len, "smooth: SmoothQuant is not yet implemented on the cpu backend (issue 16)");
    return false;
  }
  for (int i = 0; i < 2; i++) {
    const precis_operand_spec *op = ops[i];
    const char *field = i ? "b" : "a";
    precis_operand_format(op, text, sizeof text);
    bool int8 = op->fmt == PRECIS_FMT_I8 && op->conv == PRECIS_QCONV_SYM &&
                (i ? op->gran == PRECIS_GRAN_COL : op->gran == PRECIS_GRAN_ROW || op->gran == PRECIS_GRAN_TENSOR);
    bool fp8 = op->fmt == PRECIS_FMT_E4M3 && op->gran == PRECIS_GRAN_TENSOR;
    bool plain = !precis_operand_is_scaled(op);
    if (!int8 && !fp8 && !plain) {
      snprintf(why, len, "%s=%s: not yet implemented on the cpu backend (issue %d)", field, text,
               op->fmt == PRECIS_FMT_F64 ? 19 : 16);
      return false;
    }
  }
  bool a_int = precis_operand_is_integer(&s->a), b_int = precis_operand_is_integer(&s->b);
  if (a_int != b_int) {
    snprintf(why, len, "integer and float operands together (weight-only): not yet implemented on the cpu backend "
                       "(issue 16)");
    return false;
  }
  if (a_int && s->acc != PRECIS_FMT_I32) {
    snprintf(why, len, "s8 operands with acc=%s: the cpu backend accumulates integers exactly (acc=s32)",
             precis_format_get(s->acc)->name);
    return false;
  }
  if (s->scale != PRECIS_SCALE_DYNAMIC && !a_int) {
    snprintf(why, len, "scale=%s with float operands: not yet implemented on the cpu backend (issue 16)",
             precis_scale_method_name(s->scale));
    return false;
  }
  bool a64 = s->a.fmt == PRECIS_FMT_F64, b64 = s->b.fmt == PRECIS_FMT_F64;
  if (a64 || b64 || s->acc == PRECIS_FMT_F64) {
    if (!(a64 && b64 && s->acc == PRECIS_FMT_F64)) {
      snprintf(why, len, "fp64 runs with a=fp64, b=fp64 and acc=fp64 together on the cpu backend (a=%s, b=%s, acc=%s)",
               precis_format_get(s->a.fmt)->name, precis_format_get(s->b.fmt)->name, precis_format_get(s->acc)->name);
      return false;
    }
    *gemm = CPU_GEMM_DGEMM;
    return true;
  }
  if (s->out == PRECIS_FMT_F64) {
    snprintf(why, len, "out=fp64 needs acc=fp64 (an fp32 accumulator has nothing more to give)");
    return false;
  }
  *gemm = a_int ? CPU_GEMM_INT_EXACT : s->acc == PRECIS_FMT_F16 ? CPU_GEMM_F16_ACC : CPU_GEMM_SGEMM;
  return true;
}

/* Whether an sgemm route runs as the target's tensor-core fused dot-adds instead (fp16, bf16, tf32
 * under a target whose accumulator truncates: CPU_GEMM_MMA). */
static bool runs_on_mma(cpu_gemm route, const precis_target_plan *plan) {
  return route == CPU_GEMM_SGEMM && plan->model.fraction_bits > 0 &&
         (plan->model.family == PRECIS_MMA_F16 || plan->model.family == PRECIS_MMA_TF32);
}

/* Evicts the caches by streaming through a buffer larger than any last-level cache. The buffer is
 * the case's own (concurrent workers of precis accept each have theirs) and is not tracked: it is
 * measurement apparatus, not part of the workload. */
enum { FLUSH_BYTES = 64u << 20 };
static void flush_caches(unsigned char *scratch) {
  for (size_t i = 0; i < FLUSH_BYTES; i += 64) scratch[i] = (unsigned char)(scratch[i] + 1);
}

/* OpenBLAS's worker threads spin (sched_yield in a loop) for 2^28 cycles, about 0.1 s, after every
 * BLAS call before they sleep. Between a case's GEMMs precis converts, quantizes and measures on
 * one thread for far longer, so on a 2-core machine the spinning worker took the other core from
 * whatever else ran and cost the default run seconds of user and system time (issue 34: 44794
 * sched_yield calls for 10 of its cases). 2^20 cycles (about 0.4 ms) keeps a worker awake across
 * the back-to-back calls of a timed sample and lets it sleep between cases. The timeout is read
 * from OPENBLAS_THREAD_TIMEOUT when the library loads, before main, so it is set here, read again
 * and the thread pool restarted (it starts again with the next parallel call). These are OpenBLAS
 * functions outside cblas.h: weak, so that another BLAS simply leaves this out; a value the user
 * set is kept. */
extern void openblas_read_env(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));
extern int blas_thread_init(void) __attribute__((weak));

static void shorten_blas_spin_once(void) {
  if (!openblas_read_env || !blas_thread_shutdown_ || !blas_thread_init || getenv("OPENBLAS_THREAD_TIMEOUT")) return;
  setenv("OPENBLAS_THREAD_TIMEOUT", "20", 0);
  openblas_read_env();
  blas_thread_shutdown_();
  blas_thread_init();
}

/* Once per process, from the first open (the command line opens the backend once, before any
 * worker thread runs a GEMM). */
static void shorten_blas_spin(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, shorten_blas_spin_once);
}

/* The backend's state: the target it emulates (--target; sm_90 by default). */
typedef struct cpu_ctx {
  precis_target target;
} cpu_ctx;

static precis_status cpu_open(void **ctx, const precis_case_options *options) {
  shorten_blas_spin();
  cpu_ctx *c = calloc(1, sizeof *c);
  if (!c) return precis_fail(PRECIS_E_NOMEM, "out of memory opening the cpu backend");
  c->target = options && options->target != PRECIS_TARGET_DEFAULT ? options->target : PRECIS_TARGET_CPU_DEFAULT;
  *ctx = c;
  return PRECIS_OK;
}

static void cpu_close(void *ctx) { free(ctx); }

static precis_target ctx_target(const void *ctx) {
  return ctx ? ((const cpu_ctx *)ctx)->target : PRECIS_TARGET_CPU_DEFAULT;
}

/* A spec the target cannot run (a route that needs a newer architecture and has no emulation) is
 * refused as the cuda backend would refuse it there. */
static bool target_refuses(const precis_target_plan *plan, char *reason, size_t len) {
  if (plan->way != PRECIS_TARGET_REFUSED) return false;
  if (reason && len) snprintf(reason, len, "target %s", plan->why);
  return true;
}

static void cpu_environment(void *ctx, precis_kv_list *env) {
  (void)ctx;
  precis_kv_set(env, "backend", "cpu-emulation");
  precis_kv_set(env, "device", NULL);
  precis_kv_set(env, "compute_capability", NULL);
  precis_kv_set(env, "emulation",
                "inputs rounded exactly as the GPU path rounds them; fp16/bf16/tf32 in the target's tensor-core MMA "
                "model (MMA-Sim's fused dot-add), other float products and sums in FP32 (OpenBLAS sgemm); int8 exact");
}

static bool cpu_supports(void *ctx, const precis_spec *spec, char *reason, size_t len) {
  cpu_gemm gemm;
  char why[256] = "";
  bool ok = cpu_route(spec, &gemm, why, sizeof why);
  if (reason && len) snprintf(reason, len, "%s", why);
  if (!ok) return false;
  precis_target_plan plan;
  precis_target_plan_of(spec, ctx_target(ctx), &plan);
  return !target_refuses(&plan, reason, len);
}

/* A case's fields, its route and its output buffers, shared by run_case and precis_cpu_emulate so
 * that both compute through the same steps. false when it cannot run (cc->status and reason say). */
static bool case_begin(cpu_case *cc, const precis_spec *spec, const precis_workload_info *w,
                       const precis_workload_data *d, const precis_case_options *o, precis_case_output *out,
                       double **f16_acc_row, precis_target target) {
  memset(cc, 0, sizeof *cc);
  cc->spec = spec;
  cc->w = w;
  cc->d = d;
  cc->o = o;
  cc->status = PRECIS_ROW_OK;
  cc->details = &out->details;
  cc->a_count = (size_t)(w->batch * w->m * w->k);
  cc->b_matrices = w->b_batched ? (size_t)w->batch : 1;
  cc->b_count = cc->b_matrices * (size_t)(w->k * w->n);
  cc->c_count = (size_t)(w->batch * w->m * w->n);
  cc->a_rows = (size_t)(w->batch * w->m);
  *f16_acc_row = NULL;
  precis_target_plan_of(spec, target, &cc->target);
  precis_target_plan_details(&cc->target, &out->details);
  if (!cpu_route(spec, &cc->gemm, cc->reason, sizeof cc->reason) ||
      target_refuses(&cc->target, cc->reason, sizeof cc->reason)) {
    cc->status = PRECIS_ROW_UNSUPPORTED;
    return false;
  }
  if (runs_on_mma(cc->gemm, &cc->target)) {
    cc->gemm = CPU_GEMM_MMA;
    cc->mma = (precis_mma_shape){.fraction_bits = cc->target.model.fraction_bits, .block = cc->target.model.block,
                                 .emin_a = spec->a.fmt == PRECIS_FMT_F16 ? -14 : -126,
                                 .emin_b = spec->b.fmt == PRECIS_FMT_F16 ? -14 : -126};
  }
  precis_float_split_of(spec->split, &cc->fsplit);
  cc->c = case_alloc(cc, cc->c_count, sizeof(float));
  if (!cc->c) {
    out_of_memory(cc, "the output", cc->c_count * sizeof(float));
    return false;
  }
  if (cc->gemm == CPU_GEMM_F16_ACC) {
    *f16_acc_row = case_alloc(cc, (size_t)w->n, sizeof(double));
    if (!*f16_acc_row) {
      out_of_memory(cc, "the fp16 accumulators", (size_t)w->n * sizeof(double));
      return false;
    }
  }
  return true;
}

/* After the GEMM: the output format and the clipped fraction. */
static bool case_finish(cpu_case *cc, precis_case_output *out) {
  if (!finish_output(cc)) {
    out_of_memory(cc, "the int32 accumulators", (size_t)(cc->w->m * cc->w->n) * sizeof(int32_t));
    return false;
  }
  if (spec_is_scaled(cc->spec)) out->clipped_fraction = (double)cc->clipped / (double)(cc->a_count + cc->b_count);
  return true;
}

/* What the emulation was, the last of the case's details (after run_case's e2e). */
static void describe_emulation(const cpu_case *cc, precis_case_output *out) {
  if (cc->gemm == CPU_GEMM_MMA) {
    char text[400];
    snprintf(text, sizeof text,
             "rounded inputs; %s tensor-core MMA model (MMA-Sim): per fused dot-add of %d products, the exact "
             "products and D aligned to the largest exponent (operands' exponent sum) and truncated to %d fraction "
             "bits, summed exactly, D written to fp32 toward zero, k in order",
             precis_target_name(cc->target.target), cc->mma.block, cc->mma.fraction_bits);
    precis_kv_set(&out->details, "emulation", text);
    return;
  }
  precis_kv_set(&out->details, "emulation",
                cc->gemm == CPU_GEMM_QUANTIZED  ? precis_cpu_quant_emulation(cc->quant)
                : cc->gemm == CPU_GEMM_INT_EXACT  ? "exact integer GEMM (sgemm on integer values, k in chunks of 1024: "
                                                  "every partial sum exact below 2^24; int32 sums), dequant in f32"
                : cc->gemm == CPU_GEMM_F16_ACC ? "every partial sum rounded to fp16, sequential k order"
                : cc->gemm == CPU_GEMM_DGEMM   ? "FP64 products and sums (OpenBLAS dgemm)"
                : cc->gemm == CPU_GEMM_SPLIT_F32
                    ? "split terms, exact products, FP32 sums in k order, smallest products first"
                : cc->gemm == CPU_GEMM_OZAKI ? "Ozaki scheme I: exact int8 slice products (dgemm on integer values), "
                                               "levels summed in FP64"
                : cc->gemm == CPU_GEMM_CRT   ? "Ozaki scheme II: one exact int8 product per modulus (dgemm on integer "
                                               "values), CRT reconstruction in exact integer arithmetic, one rounding to FP64"
                                             : "rounded inputs, FP32 products and sums (OpenBLAS sgemm)");
}

/* Hands the output over when the case is ok, and frees everything else. */
static void case_end(cpu_case *cc, precis_case_output *out, double *f16_acc_row) {
  out->status = cc->status;
  snprintf(out->reason, sizeof out->reason, "%s", cc->reason);
  if (cc->status == PRECIS_ROW_OK) {
    out->c = cc->c; /* handed over; its bytes stay counted in the peak */
    cc->c = NULL;
    if (cc->spec->out == PRECIS_FMT_F64) {
      out->c64 = cc->c64;
      cc->c64 = NULL;
    }
  }
  case_free(cc, f16_acc_row, (size_t)cc->w->n, sizeof(double));
  case_free(cc, cc->c, cc->c_count, sizeof(float));
  case_release(cc);
}

static precis_status cpu_run_case(void *ctx, const precis_spec *spec, const precis_workload_info *w,
                                  const precis_workload_data *d, const precis_case_options *o, precis_case_output *out) {
  if (o->device_io) {
    /* Its arrays are device memory, which this backend cannot read. */
    out->status = PRECIS_ROW_UNSUPPORTED;
    snprintf(out->reason, sizeof out->reason, "the cpu backend reads host memory; these arrays are on a CUDA device");
    return PRECIS_OK;
  }
  cpu_case cc;
  double *f16_acc_row = NULL;
  unsigned char *flush_buffer = NULL;
  precis_sampler sampler;
  precis_sampler_init(&sampler, o);
  precis_status st = PRECIS_OK;

  precis_peak_rss_reset();
  if (!case_begin(&cc, spec, w, d, o, out, &f16_acc_row, ctx ? ctx_target(ctx) : o->target)) goto done;

  if (o->cold && !(flush_buffer = calloc(FLUSH_BYTES, 1))) {
    out_of_memory(&cc, "the cache-flush buffer", FLUSH_BYTES);
    goto done;
  }

  double t0 = precis_now_ms();
  if (prepare_inputs(&cc, &out->details) != PRECIS_OK) goto done;
  out->time.convert_ms = precis_now_ms() - t0;

  /* Warm-up: the call count and time of DESIGN §6, but never more than one call when a single call
   * already exceeds the whole sampling budget (long emulations would otherwise take minutes). */
  long calls = 0;
  double warm_start = precis_now_ms(), elapsed = 0;
  do {
    run_gemm(&cc, f16_acc_row);
    calls++;
    elapsed = precis_now_ms() - warm_start;
    if (elapsed / (double)calls > o->max_time_ms) break;
  } while (!precis_warmup_done(o, calls, elapsed) && !precis_interrupt_signal);
  long per_sample = precis_calls_per_sample(elapsed / (double)calls);

  bool more = true;
  while (more && !precis_interrupt_signal) {
    if (flush_buffer) flush_caches(flush_buffer);
    double s0 = precis_now_ms();
    for (long i = 0; i < per_sample; i++) run_gemm(&cc, f16_acc_row);
    double dt = precis_now_ms() - s0;
    more = precis_sampler_add(&sampler, dt / (double)per_sample, dt);
  }
  if (sampler.count == 0) {
    /* Interrupted before the first sample: the row is abandoned by the runner. */
    cc.status = PRECIS_ROW_FAILED;
    snprintf(cc.reason, sizeof cc.reason, "interrupted before the first timed sample");
    goto done;
  }
  st = precis_sampler_finish(&sampler, per_sample, &out->time);
  if (st != PRECIS_OK) {
    cc.status = PRECIS_ROW_FAILED;
    snprintf(cc.reason, sizeof cc.reason, "%s", precis_last_error());
    st = PRECIS_OK;
    goto done;
  }
  double f0 = precis_now_ms();
  if (!case_finish(&cc, out)) goto done;
  double finish_ms = precis_now_ms() - f0;
  if (spec_is_scaled(spec)) {
    out->time.e2e_median_ms = out->time.convert_ms + out->time.median_ms + finish_ms;
    precis_kv_set(&out->details, "e2e", "cpu: convert_ms + median GEMM + dequantize, each measured once");
  }
  describe_emulation(&cc, out);

done:
  out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
  out->memory.tracked_peak_bytes = cc.tracker.peak;
  out->memory.host_peak_rss_bytes = precis_peak_rss_bytes();
  free(flush_buffer);
  case_end(&cc, out, f16_acc_row);
  precis_sampler_free(&sampler);
  return st;
}

precis_status precis_cpu_emulate(const precis_spec *spec, const precis_workload_info *w,
                                 const precis_workload_data *d, precis_case_output *out) {
  return precis_cpu_emulate_target(spec, w, d, PRECIS_TARGET_DEFAULT, out);
}

/* Whether a route (cpu_route's: the tensor-core model is an sgemm route until case_begin) reads B as
 * [n, k] itself (workload data b_nk): the exact integer GEMM (W's rows quantized in place) and the
 * rounded-float GEMMs (W transposed into their rounded copy, prepare_inputs). */
static bool route_reads_nk(cpu_gemm route) {
  return route == CPU_GEMM_INT_EXACT || route == CPU_GEMM_SGEMM || route == CPU_GEMM_F16_ACC;
}

/* Workload data whose B is [n, k] (b_nk), for the routes that do not read it so: each B transposed
 * to [k, n] (b64 too) into blocks of the tracker's; *kn is d with those. */
static precis_status b_as_kn(const precis_workload_info *w, const precis_workload_data *d, precis_host_tracker *tracker,
                             precis_workload_data *kn, float **b32, double **b64) {
  const size_t k = (size_t)w->k, n = (size_t)w->n, matrices = w->b_batched ? (size_t)w->batch : 1,
               count = matrices * k * n;
  *kn = *d;
  kn->b_nk = 0;
  *b32 = precis_tracked_alloc(tracker, count * sizeof **b32);
  *b64 = d->b64 ? precis_tracked_alloc(tracker, count * sizeof **b64) : NULL;
  if (!*b32 || (d->b64 && !*b64))
    return precis_fail(PRECIS_E_NOMEM, "out of host memory for B as [k, n] (%.3g GiB)",
                       (double)count * (d->b64 ? 12.0 : 4.0) / 1073741824.0);
  for (size_t g = 0; g < matrices; g++) {
    precis_transpose_f32(d->b + g * k * n, k, n, k, *b32 + g * k * n, n);
    if (d->b64) precis_transpose_f64(d->b64 + g * k * n, k, n, k, *b64 + g * k * n, n);
  }
  kn->b = *b32;
  kn->b64 = *b64;
  return PRECIS_OK;
}

/* One emulation (precis_cpu_emulate_target without the column blocks); *clipped_a and *clipped the
 * case's clipped counts (A's, and A's and B's). */
static void emulate_case(const precis_spec *spec, const precis_workload_info *w, const precis_workload_data *d,
                         precis_target target, precis_case_output *out, size_t *clipped_a, size_t *clipped) {
  precis_case_options o;
  precis_case_options_default(&o);
  cpu_case cc;
  double *f16_acc_row = NULL;
  precis_host_tracker layout = {0, 0};
  precis_workload_data kn;
  float *b32_kn = NULL;
  double *b64_kn = NULL;
  const size_t b_count = (w->b_batched ? (size_t)w->batch : 1) * (size_t)w->k * (size_t)w->n;
  cpu_gemm route;
  char why[8];
  if (d->b_nk && !(cpu_route(spec, &route, why, sizeof why) && route_reads_nk(route))) {
    if (b_as_kn(w, d, &layout, &kn, &b32_kn, &b64_kn) != PRECIS_OK) {
      out->status = PRECIS_ROW_DOES_NOT_FIT;
      snprintf(out->reason, sizeof out->reason, "%s", precis_last_error());
      goto done;
    }
    d = &kn;
  }
  if (case_begin(&cc, spec, w, d, &o, out, &f16_acc_row, target)) {
    precis_status st = prepare_inputs(&cc, &out->details);
    if (st != PRECIS_OK && cc.status == PRECIS_ROW_OK) {
      cc.status = PRECIS_ROW_FAILED;
      snprintf(cc.reason, sizeof cc.reason, "%s", precis_last_error()[0] ? precis_last_error() : precis_status_str(st));
    }
    if (cc.status == PRECIS_ROW_OK) {
      run_gemm(&cc, f16_acc_row);
      if (case_finish(&cc, out)) describe_emulation(&cc, out);
    }
  }
  out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
  out->memory.tracked_peak_bytes = cc.tracker.peak + layout.peak;
  *clipped_a = cc.clipped_a;
  *clipped = cc.clipped;
  case_end(&cc, out, f16_acc_row);
done:
  precis_tracked_free(&layout, b32_kn, b_count * sizeof *b32_kn);
  precis_tracked_free(&layout, b64_kn, b_count * sizeof *b64_kn);
}

/* B's float32 bytes from which a GEMM given W [n, k] is emulated a block of columns at a time, and
 * the bytes of W per block. */
#define COLUMN_BLOCKS_FROM_BYTES PRECIS_LARGE_B_BYTES
#define COLUMN_BLOCK_BYTES ((size_t)16 << 20)

/* Columns of B per block: W's rows of COLUMN_BLOCK_BYTES, a multiple of 64 (at least 64). */
static size_t column_block(size_t k) {
  size_t block = COLUMN_BLOCK_BYTES / (k * sizeof(float));
  return block < 64 ? 64 : block - block % 64;
}

/* Whether every output column of this spec's emulation depends only on A and its own column of B
 * (and so a block of columns computes the bits the whole does): the exact integer GEMM (per-column
 * scales of B; A's scales are A's own), and the accumulator models run per output element (the
 * tensor cores' fused dot-adds, fp16 accumulation) on unscaled operands. Not OpenBLAS's sgemm,
 * whose sums may change with the call's shape, nor a B scaled per tensor. */
static bool columns_independent(const precis_spec *spec, precis_target target) {
  cpu_gemm route;
  char why[8];
  if (!cpu_route(spec, &route, why, sizeof why)) return false;
  if (route == CPU_GEMM_INT_EXACT) return true;
  if (precis_operand_is_scaled(&spec->a) || precis_operand_is_scaled(&spec->b)) return false;
  if (route == CPU_GEMM_F16_ACC) return true;
  precis_target_plan plan;
  precis_target_plan_of(spec, target, &plan);
  return runs_on_mma(route, &plan);
}

/* A head-sized GEMM given as W [n, k] (a model's lm_head: 49152 or 128256 outputs), a block of W's
 * rows (B's columns) at a time: the cpu backend's copies of B (its codes or rounded values) are a
 * block's, not the whole head's (at 1B parameters, 1.05 GB of integer-valued floats). A is
 * quantized again per block (the same scales: A's own). The blocks' outputs fill c_dest when given
 * (out->c stays NULL), else out->c. */
static void emulate_column_blocks(const precis_spec *spec, const precis_workload_info *w, const precis_workload_data *d,
                                  precis_target target, precis_case_output *out, float *c_dest) {
  const size_t k = (size_t)w->k, n = (size_t)w->n, rows = (size_t)(w->batch * w->m), block = column_block(k);
  float *c = c_dest ? c_dest : malloc(rows * n * sizeof *c);
  if (!c) {
    out->status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(out->reason, sizeof out->reason, "out of host memory for the output (%.3g GiB)",
             (double)(rows * n * sizeof(float)) / 1073741824.0);
    return;
  }
  size_t clipped_a = 0, clipped_b = 0;
  long long peak = 0;
  for (size_t j0 = 0; j0 < n; j0 += block) {
    const size_t cols = n - j0 < block ? n - j0 : block;
    precis_workload_info part_w = *w;
    part_w.n = (int64_t)cols;
    precis_workload_data part_d = *d;
    part_d.b = d->b + j0 * k;
    part_d.b64 = d->b64 ? d->b64 + j0 * k : NULL;
    precis_case_output part;
    precis_case_output_init(&part);
    size_t part_clipped_a = 0, part_clipped = 0;
    emulate_case(spec, &part_w, &part_d, target, &part, &part_clipped_a, &part_clipped);
    if (part.status != PRECIS_ROW_OK || !part.c) {
      out->status = part.status == PRECIS_ROW_OK ? PRECIS_ROW_FAILED : part.status;
      snprintf(out->reason, sizeof out->reason, "%s", part.reason[0] ? part.reason : "the backend returned no output");
      if (!c_dest) free(c);
      precis_case_output_free(&part);
      return;
    }
    for (size_t i = 0; i < rows; i++) memcpy(c + i * n + j0, part.c + i * cols, cols * sizeof(float));
    clipped_a = part_clipped_a;
    clipped_b += part_clipped - part_clipped_a;
    if (part.memory.tracked_peak_bytes > peak) peak = part.memory.tracked_peak_bytes;
    if (j0 == 0) {
      out->details = part.details;
      memset(&part.details, 0, sizeof part.details);
    }
    precis_case_output_free(&part);
  }
  out->status = PRECIS_ROW_OK;
  out->c = c_dest ? NULL : c;
  if (spec_is_scaled(spec))
    out->clipped_fraction = (double)(clipped_a + clipped_b) / (double)(rows * k + n * k);
  out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
  out->memory.tracked_peak_bytes = peak + (c_dest ? 0 : (long long)(rows * n * sizeof(float)));
}

size_t precis_cpu_emulate_b_bytes(const precis_spec *spec, int64_t k, int64_t n, precis_target target) {
  if (target == PRECIS_TARGET_DEFAULT) target = PRECIS_TARGET_CPU_DEFAULT;
  cpu_gemm route;
  char why[8];
  if (k < 1 || n < 1 || !cpu_route(spec, &route, why, sizeof why)) return 0;
  size_t cols = (size_t)n;
  if ((size_t)k * (size_t)n * sizeof(float) >= COLUMN_BLOCKS_FROM_BYTES && columns_independent(spec, target) &&
      column_block((size_t)k) < cols)
    cols = column_block((size_t)k);
  const size_t e = (size_t)k * cols, split = (size_t)spec->split_terms;
  precis_float_split fsplit;
  precis_float_split_of(spec->split, &fsplit);
  switch (route) {
  case CPU_GEMM_INT_EXACT: return e * 5; /* codes, and the integer-valued floats the sgemm reads */
  case CPU_GEMM_SGEMM:
  case CPU_GEMM_F16_ACC:
  case CPU_GEMM_MMA: return e * (4 + (precis_operand_is_scaled(&spec->b) ? 1 : 0)); /* rounded (or fp8 codes) */
  case CPU_GEMM_SPLIT_F32: return e * 4 * (1 + (size_t)fsplit.terms); /* [k, n] copy, its terms */
  case CPU_GEMM_DGEMM: return e * (4 + 8);
  case CPU_GEMM_OZAKI: return e * (4 + 8 + 8 * split);
  case CPU_GEMM_CRT: return e * (4 + 8 + split + 8);
  case CPU_GEMM_QUANTIZED: return e * (4 + 4 + 1); /* [k, n] copy, decoded values, codes: about */
  }
  return e * 8;
}

precis_status precis_cpu_emulate_target(const precis_spec *spec, const precis_workload_info *w,
                                        const precis_workload_data *d, precis_target target, precis_case_output *out) {
  return precis_cpu_emulate_into(spec, w, d, target, out, NULL);
}

precis_status precis_cpu_emulate_into(const precis_spec *spec, const precis_workload_info *w,
                                      const precis_workload_data *d, precis_target target, precis_case_output *out,
                                      float *c_dest) {
  if (target == PRECIS_TARGET_DEFAULT) target = PRECIS_TARGET_CPU_DEFAULT;
  if (d->b_nk && !w->b_batched && (size_t)w->k * (size_t)w->n * sizeof(float) >= COLUMN_BLOCKS_FROM_BYTES &&
      columns_independent(spec, target)) {
    emulate_column_blocks(spec, w, d, target, out, c_dest);
    return PRECIS_OK;
  }
  size_t clipped_a, clipped;
  emulate_case(spec, w, d, target, out, &clipped_a, &clipped);
  return PRECIS_OK;
}

/* The cpu backend keeps nothing between cases (every buffer, the cache-flush buffer included, is
 * the case's own), so a worker's state is only its index: the hook exists so that the concurrent
 * path is the same for every backend. */
typedef struct cpu_worker {
  int index;
} cpu_worker;

static precis_status cpu_worker_open(void *ctx, int index, void **worker) {
  (void)ctx;
  cpu_worker *w = calloc(1, sizeof *w);
  if (!w) return precis_fail(PRECIS_E_NOMEM, "out of memory opening cpu worker %d", index);
  w->index = index;
  *worker = w;
  return PRECIS_OK;
}

static void cpu_worker_close(void *ctx, void *worker) {
  (void)ctx;
  free(worker);
}

static const precis_backend cpu_backend = {
    .name = "cpu",
    .label = "cpu-emulation",
    .open = cpu_open,
    .close = cpu_close,
    .environment = cpu_environment,
    .supports = cpu_supports,
    .run_case = cpu_run_case,
    .worker_open = cpu_worker_open,
    .worker_close = cpu_worker_close,
};

const precis_backend *precis_backend_cpu(void) { return &cpu_backend; }
