/* The cpu backend: emulates every recipe of DESIGN §3 so that the whole pipeline runs without a
 * GPU. Inputs are rounded exactly as the GPU path rounds them (src/numerics/format.c, src/numerics/quant.c); products
 * and sums are FP32 (OpenBLAS sgemm on the rounded inputs); int8 is exact integer arithmetic (dgemm
 * on integer-valued doubles: |acc| <= 127^2 k < 2^53); fp16acc16 rounds every partial sum to fp16.
 * Float recipes are an approximation of the GPU (tensor cores align and truncate inside a block
 * instead of rounding each sum); timings are CPU timings, labelled cpu-emulation. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_gemm_fp16acc.h"
#include "format.h"
#include "host_memory.h"
#include "quant.h"
#include "timing.h"

/* 127 * 127 * k must stay below 2^31 for the int32 accumulators the GPU path uses. */
#define INT8_MAX_K 133143LL

typedef struct cpu_case {
  const precis_recipe *recipe;
  const precis_workload_info *w;
  const precis_workload_data *d;
  const precis_case_options *o;
  precis_host_tracker tracker;
  size_t a_count, b_count, c_count, b_matrices, a_rows;
  float *a_in, *b_in;       /* inputs as the GEMM reads them, in float32 (rounded or decoded) */
  double *a_int, *b_int;    /* int8 inputs as integer-valued doubles */
  double *acc_int;          /* int8 accumulators */
  float *a_scales, *b_scales; /* int8: per row of A (batch*m), per column of B (b_matrices*n) */
  float fp8_scale_a, fp8_scale_b;
  size_t clipped;
  float *c;                 /* output, float32 */
  char reason[512];
  precis_row_status status;
} cpu_case;

static void *case_alloc(cpu_case *cc, size_t count, size_t elem) {
  if (count > SIZE_MAX / elem) return NULL;
  return precis_tracked_alloc(&cc->tracker, count * elem);
}

static void case_free(cpu_case *cc, void *p, size_t count, size_t elem) {
  precis_tracked_free(&cc->tracker, p, count * elem);
}

static void case_release(cpu_case *cc) {
  case_free(cc, cc->a_in, cc->a_count, sizeof(float));
  case_free(cc, cc->b_in, cc->b_count, sizeof(float));
  case_free(cc, cc->a_int, cc->a_count, sizeof(double));
  case_free(cc, cc->b_int, cc->b_count, sizeof(double));
  case_free(cc, cc->acc_int, cc->c_count, sizeof(double));
  case_free(cc, cc->a_scales, cc->a_rows, sizeof(float));
  case_free(cc, cc->b_scales, cc->b_matrices * (size_t)cc->w->n, sizeof(float));
  cc->a_in = cc->b_in = NULL;
  cc->a_int = cc->b_int = cc->acc_int = NULL;
  cc->a_scales = cc->b_scales = NULL;
}

static precis_status out_of_memory(cpu_case *cc, const char *what, size_t bytes) {
  cc->status = PRECIS_ROW_DOES_NOT_FIT;
  snprintf(cc->reason, sizeof cc->reason, "host allocation of %zu bytes for %s failed", bytes, what);
  return PRECIS_E_DOES_NOT_FIT;
}

static const float *b_matrix_f(const cpu_case *cc, const float *b, size_t batch_index) {
  return b + (cc->w->b_batched ? batch_index * (size_t)(cc->w->k * cc->w->n) : 0);
}

/* The timed operation: the GEMM in the recipe's arithmetic, writing cc->c (int8: accumulators). */
static void run_gemm(cpu_case *cc, double *f16_acc_row) {
  const precis_workload_info *w = cc->w;
  size_t m = (size_t)w->m, n = (size_t)w->n, k = (size_t)w->k, batch = (size_t)w->batch;
  /* With a shared B the batch folds into the rows of one GEMM. */
  size_t groups = w->b_batched ? batch : 1;
  size_t rows = w->b_batched ? m : m * batch;
  for (size_t g = 0; g < groups; g++) {
    size_t a_off = g * rows * k, c_off = g * rows * n;
    switch (cc->recipe->id) {
    case PRECIS_RECIPE_INT8:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0, cc->a_int + a_off, (int)k,
                  cc->b_int + (w->b_batched ? g * k * n : 0), (int)n, 0.0, cc->acc_int + c_off, (int)n);
      break;
    case PRECIS_RECIPE_FP16ACC16:
      precis_gemm_fp16acc(cc->a_in + a_off, b_matrix_f(cc, cc->b_in, g), cc->c + c_off, rows, n, k, f16_acc_row);
      break;
    default:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, cc->a_in + a_off, (int)k,
                  b_matrix_f(cc, cc->b_in, g), (int)n, 0.0f, cc->c + c_off, (int)n);
      break;
    }
  }
}

static void to_integer_doubles(const int8_t *q, double *out, size_t count) {
  for (size_t i = 0; i < count; i++) out[i] = (double)q[i];
}

/* Converts or quantizes A and B into the recipe's input format (the part timed as convert_ms). */
static precis_status prepare_inputs(cpu_case *cc, precis_kv_list *details) {
  const precis_recipe *r = cc->recipe;
  const precis_workload_info *w = cc->w;
  const precis_workload_data *d = cc->d;
  size_t k = (size_t)w->k, n = (size_t)w->n;
  precis_status st = PRECIS_OK;
  int8_t *a_q = NULL, *b_q = NULL;
  uint8_t *a_f8 = NULL, *b_f8 = NULL;

  if (r->scaling == PRECIS_SCALING_INT8_SYMMETRIC) {
    if (w->k > INT8_MAX_K) {
      cc->status = PRECIS_ROW_UNSUPPORTED;
      snprintf(cc->reason, sizeof cc->reason,
               "k=%lld: int32 accumulation could overflow (127*127*k > 2^31-1 for k > %lld); split the reduction",
               (long long)w->k, INT8_MAX_K);
      return PRECIS_E_UNSUPPORTED;
    }
    a_q = case_alloc(cc, cc->a_count, 1);
    b_q = case_alloc(cc, cc->b_count, 1);
    cc->a_scales = case_alloc(cc, cc->a_rows, sizeof(float));
    cc->b_scales = case_alloc(cc, cc->b_matrices * n, sizeof(float));
    cc->a_int = case_alloc(cc, cc->a_count, sizeof(double));
    cc->b_int = case_alloc(cc, cc->b_count, sizeof(double));
    cc->acc_int = case_alloc(cc, cc->c_count, sizeof(double));
    if (!a_q || !b_q || !cc->a_scales || !cc->b_scales || !cc->a_int || !cc->b_int || !cc->acc_int) {
      st = out_of_memory(cc, "the int8 operands", (cc->a_count + cc->b_count) * 9 + cc->c_count * 8);
      goto done;
    }
    if (cc->o->int8_act_scale == PRECIS_ACT_SCALE_ROW) {
      precis_int8_row_scales(d->a, cc->a_rows, k, cc->a_scales);
      cc->clipped += precis_int8_quantize_rows(d->a, cc->a_rows, k, cc->a_scales, a_q);
      precis_kv_set(details, "a_scales", "per row, dynamic (amax/127 of each evaluated row)");
    } else {
      if (!d->calib_a || w->calib_samples <= 0) {
        cc->status = PRECIS_ROW_FAILED;
        snprintf(cc->reason, sizeof cc->reason,
                 "static int8 activation scales need the workload's calibration split (calib/a), which it lacks");
        st = PRECIS_E_INPUT;
        goto done;
      }
      precis_calib_method method = cc->o->int8_act_scale == PRECIS_ACT_SCALE_ABSMAX       ? PRECIS_CALIB_ABSMAX
                                   : cc->o->int8_act_scale == PRECIS_ACT_SCALE_PERCENTILE ? PRECIS_CALIB_PERCENTILE
                                                                                          : PRECIS_CALIB_MSE;
      float amax = 0;
      st = precis_calib_amax(d->calib_a, (size_t)(w->calib_samples * w->m * w->k), method, cc->o->percentile, &amax);
      if (st != PRECIS_OK) {
        cc->status = PRECIS_ROW_FAILED;
        snprintf(cc->reason, sizeof cc->reason, "calibration failed: %s", precis_last_error());
        goto done;
      }
      float scale = precis_int8_scale_from_amax(amax);
      for (size_t i = 0; i < cc->a_rows; i++) cc->a_scales[i] = scale;
      cc->clipped += precis_int8_quantize_tensor(d->a, cc->a_count, scale, a_q);
      char buf[160];
      snprintf(buf, sizeof buf, "per tensor, static from %lld calibration samples (%s)", (long long)w->calib_samples,
               precis_calib_method_str(method));
      precis_kv_set(details, "a_scales", buf);
      precis_kv_set_number(details, "a_amax_static", amax);
    }
    for (size_t g = 0; g < cc->b_matrices; g++) {
      const float *b = d->b + g * k * n;
      precis_int8_col_scales(b, k, n, cc->b_scales + g * n);
      cc->clipped += precis_int8_quantize_cols(b, k, n, cc->b_scales + g * n, b_q + g * k * n);
    }
    precis_kv_set(details, "b_scales", "per column (amax/127)");
    to_integer_doubles(a_q, cc->a_int, cc->a_count);
    to_integer_doubles(b_q, cc->b_int, cc->b_count);
    goto done;
  }

  cc->a_in = case_alloc(cc, cc->a_count, sizeof(float));
  cc->b_in = case_alloc(cc, cc->b_count, sizeof(float));
  if (!cc->a_in || !cc->b_in) {
    st = out_of_memory(cc, "the rounded operands", (cc->a_count + cc->b_count) * sizeof(float));
    goto done;
  }
  if (r->scaling == PRECIS_SCALING_FP8_TENSOR) {
    a_f8 = case_alloc(cc, cc->a_count, 1);
    b_f8 = case_alloc(cc, cc->b_count, 1);
    if (!a_f8 || !b_f8) {
      st = out_of_memory(cc, "the fp8 operands", cc->a_count + cc->b_count);
      goto done;
    }
    cc->fp8_scale_a = precis_fp8_scale_from_amax(precis_absmax(d->a, cc->a_count));
    cc->fp8_scale_b = precis_fp8_scale_from_amax(precis_absmax(d->b, cc->b_count));
    cc->clipped += precis_fp8_quantize_tensor(d->a, cc->a_count, cc->fp8_scale_a, a_f8);
    cc->clipped += precis_fp8_quantize_tensor(d->b, cc->b_count, cc->fp8_scale_b, b_f8);
    precis_e4m3_to_f32_array(a_f8, cc->a_in, cc->a_count);
    precis_e4m3_to_f32_array(b_f8, cc->b_in, cc->b_count);
    precis_kv_set(details, "a_scales", "per tensor (amax/448 over the whole A)");
    precis_kv_set(details, "b_scales", "per tensor (amax/448)");
    precis_kv_set_number(details, "fp8_scale_a", cc->fp8_scale_a);
    precis_kv_set_number(details, "fp8_scale_b", cc->fp8_scale_b);
    goto done;
  }
  const precis_format *in = precis_format_get(r->input_format);
  if (in->round_array) {
    in->round_array(d->a, cc->a_in, cc->a_count);
    in->round_array(d->b, cc->b_in, cc->b_count);
  } else {
    memcpy(cc->a_in, d->a, cc->a_count * sizeof(float));
    memcpy(cc->b_in, d->b, cc->b_count * sizeof(float));
  }
done:
  case_free(cc, a_q, cc->a_count, 1);
  case_free(cc, b_q, cc->b_count, 1);
  case_free(cc, a_f8, cc->a_count, 1);
  case_free(cc, b_f8, cc->b_count, 1);
  return st;
}

/* Applies what follows the GEMM: int8 dequantization, fp8 scaling, rounding to the output format. */
static bool finish_output(cpu_case *cc) {
  const precis_workload_info *w = cc->w;
  size_t m = (size_t)w->m, n = (size_t)w->n;
  switch (cc->recipe->scaling) {
  case PRECIS_SCALING_INT8_SYMMETRIC: {
    /* The accumulators are exact integers below 2^31: convert, then dequantize as the GPU does. */
    int32_t *acc = case_alloc(cc, m * n, sizeof *acc);
    if (!acc) return false;
    for (size_t b = 0; b < (size_t)w->batch; b++) {
      const double *src = cc->acc_int + b * m * n;
      const float *col_scales = cc->b_scales + (w->b_batched ? b * n : 0);
      for (size_t i = 0; i < m * n; i++) acc[i] = (int32_t)src[i];
      precis_int8_dequantize(acc, m, n, cc->a_scales + b * m, col_scales, cc->c + b * m * n);
    }
    case_free(cc, acc, m * n, sizeof *acc);
    return true;
  }
  case PRECIS_SCALING_FP8_TENSOR: {
    float s = cc->fp8_scale_a * cc->fp8_scale_b;
    for (size_t i = 0; i < cc->c_count; i++) cc->c[i] *= s;
    break;
  }
  case PRECIS_SCALING_NONE: break;
  }
  const precis_format *out = precis_format_get(cc->recipe->output_format);
  if (cc->recipe->id != PRECIS_RECIPE_FP16ACC16 && out->round_array) out->round_array(cc->c, cc->c, cc->c_count);
  return true;
}

/* Evicts the caches by streaming through a buffer larger than any last-level cache. The buffer is
 * the case's own (concurrent workers of precis accept each have theirs) and is not tracked: it is
 * measurement apparatus, not part of the workload. */
enum { FLUSH_BYTES = 64u << 20 };
static void flush_caches(unsigned char *scratch) {
  for (size_t i = 0; i < FLUSH_BYTES; i += 64) scratch[i] = (unsigned char)(scratch[i] + 1);
}

static precis_status cpu_open(void **ctx, const precis_case_options *options) {
  (void)options;
  *ctx = NULL;
  return PRECIS_OK;
}

static void cpu_close(void *ctx) { (void)ctx; }

static void cpu_environment(void *ctx, precis_kv_list *env) {
  (void)ctx;
  precis_kv_set(env, "backend", "cpu-emulation");
  precis_kv_set(env, "device", NULL);
  precis_kv_set(env, "compute_capability", NULL);
  precis_kv_set(env, "emulation",
                "inputs rounded exactly as the GPU path rounds them; products and sums in FP32 (OpenBLAS sgemm); "
                "int8 exact; an approximation of tensor-core summation for float recipes");
}

static bool cpu_supports(void *ctx, const precis_recipe *recipe, char *reason, size_t len) {
  (void)ctx;
  (void)recipe;
  if (reason && len) reason[0] = '\0';
  return true;
}

static precis_status cpu_run_case(void *ctx, const precis_recipe *recipe, const precis_workload_info *w,
                                  const precis_workload_data *d, const precis_case_options *o, precis_case_output *out) {
  (void)ctx;
  cpu_case cc;
  memset(&cc, 0, sizeof cc);
  cc.recipe = recipe;
  cc.w = w;
  cc.d = d;
  cc.o = o;
  cc.status = PRECIS_ROW_OK;
  cc.a_count = (size_t)(w->batch * w->m * w->k);
  cc.b_matrices = w->b_batched ? (size_t)w->batch : 1;
  cc.b_count = cc.b_matrices * (size_t)(w->k * w->n);
  cc.c_count = (size_t)(w->batch * w->m * w->n);
  cc.a_rows = (size_t)(w->batch * w->m);
  double *f16_acc_row = NULL;
  unsigned char *flush_buffer = NULL;
  precis_sampler sampler;
  precis_sampler_init(&sampler, o);
  precis_status st = PRECIS_OK;

  precis_peak_rss_reset();
  cc.c = case_alloc(&cc, cc.c_count, sizeof(float));
  if (!cc.c) {
    out_of_memory(&cc, "the output", cc.c_count * sizeof(float));
    goto done;
  }
  if (recipe->id == PRECIS_RECIPE_FP16ACC16) {
    f16_acc_row = case_alloc(&cc, (size_t)w->n, sizeof(double));
    if (!f16_acc_row) {
      out_of_memory(&cc, "the fp16 accumulators", (size_t)w->n * sizeof(double));
      goto done;
    }
  }

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
  if (!finish_output(&cc)) {
    out_of_memory(&cc, "the int32 accumulators", (size_t)(w->m * w->n) * sizeof(int32_t));
    goto done;
  }
  double finish_ms = precis_now_ms() - f0;
  if (recipe->scaling != PRECIS_SCALING_NONE) {
    out->time.e2e_median_ms = out->time.convert_ms + out->time.median_ms + finish_ms;
    out->clipped_fraction = (double)cc.clipped / (double)(cc.a_count + cc.b_count);
    precis_kv_set(&out->details, "e2e", "cpu: convert_ms + median GEMM + dequantize, each measured once");
  }
  precis_kv_set(&out->details, "emulation",
                recipe->id == PRECIS_RECIPE_INT8        ? "exact integer GEMM (dgemm on integer values), dequant in f32"
                : recipe->id == PRECIS_RECIPE_FP16ACC16 ? "every partial sum rounded to fp16, sequential k order"
                                                        : "rounded inputs, FP32 products and sums (OpenBLAS sgemm)");

done:
  out->memory.tensor_bytes = precis_recipe_tensor_bytes(recipe, w->m, w->n, w->k, w->batch, w->b_batched);
  out->memory.tracked_peak_bytes = cc.tracker.peak;
  out->memory.host_peak_rss_bytes = precis_peak_rss_bytes();
  out->status = cc.status;
  snprintf(out->reason, sizeof out->reason, "%s", cc.reason);
  if (cc.status == PRECIS_ROW_OK) {
    out->c = cc.c; /* handed over; its bytes stay counted in the peak */
    cc.c = NULL;
  }
  free(flush_buffer);
  case_free(&cc, f16_acc_row, (size_t)w->n, sizeof(double));
  case_free(&cc, cc.c, cc.c_count, sizeof(float));
  case_release(&cc);
  precis_sampler_free(&sampler);
  return st;
}

static const precis_backend cpu_backend = {
    .name = "cpu",
    .label = "cpu-emulation",
    .open = cpu_open,
    .close = cpu_close,
    .environment = cpu_environment,
    .supports = cpu_supports,
    .run_case = cpu_run_case,
};

const precis_backend *precis_backend_cpu(void) { return &cpu_backend; }
