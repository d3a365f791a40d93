/* The `cuda` backend (DESIGN §3, §6): every recipe through cuBLASLt, carrying out the GEMM plan of
 * src/eval/gemm_plan.c; conversions and quantization on the device (kernels/convert.cuh), timed apart as
 * convert_ms; GEMM latency with CUDA events under the shared stopping rule (src/eval/timing.h); the two
 * memory views (tracked allocations, device usage sampled by a background thread).
 *
 * Fail soft: whatever the device or cuBLASLt says about one case becomes that row's status
 * (`unsupported`, `does-not-fit`, `failed` with the reason), never a crash or an abort of the run.
 * docs/cuda-backend.md describes the choices. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "kernels/convert.cuh"
#include "eval/cpu_quantized.h"
#include "kernels/cuda_api.h"
#include "kernels/cuda_check.h"
#include "kernels/cuda_hiprec.h"
#include "numerics/format_bits.h"
#include "kernels/device_memory.h"
#include "eval/gemm_plan.h"
#include "kernels/lt_matmul.h"
#include "kernels/mem_sampler.h"
#include "kernels/nvml_clock.h"
#include "numerics/quant.h"
#include "numerics/quantize.h"
#include "eval/split_plan.h"
#include "kernels/stream_delay.h"
#include "eval/timing.h"

#define MEM_SAMPLER_PERIOD_US 500

/* What one worker runs its cases with: its own stream (workers overlap instead of serializing),
 * its own events (a timed region holds only this worker's work, and no other thread records the
 * events between its record and its elapsed-time query) and its own cuBLASLt handle. The context
 * holds one for callers that run one case at a time; accept --concurrency N opens one per worker
 * (worker_open), before its timed regions. */
typedef struct cuda_worker {
  int index; /* -1: the context's own */
  cublasLtHandle_t lt;
  cudaStream_t stream;
  cudaEvent_t start, stop;
} cuda_worker;

typedef struct cuda_ctx {
  int device;
  char name[256];
  int cc_major, cc_minor, sm_count;
  long long mem_total, l2_bytes;
  int clock_khz, mem_clock_khz;
  int lt_version;   /* cublasLtGetVersion(): the plan works around the limits of the version in use */
  cuda_worker main; /* for callers that pass no options->worker */
  precis_nvml *nvml;
  char nvml_why[192];
  long long baseline_after_open;
  /* The capability probes' cache, filled on first use from whichever worker asks first. */
  pthread_mutex_t probe_mutex;
  bool probe_mutex_ready;
  signed char probed[PRECIS_LT_ROUTE_COUNT]; /* per route: 0 not yet, 1 cuBLASLt has kernels, -1 it has none */
  char probe_reason[PRECIS_LT_ROUTE_COUNT][384];
} cuda_ctx;

/* One (workload, recipe) case: every device buffer and the cuBLASLt call. */
typedef struct cuda_case {
  cuda_ctx *ctx;
  cuda_worker *wk; /* stream, events, handle of the worker running this case */
  const precis_spec *spec;
  const precis_workload_info *w;
  const precis_case_options *o;
  precis_gemm_plan plan;
  precis_dmem mem;
  bool int8, fp8, static_act;
  float static_scale;
  size_t a_count, b_count, c_count;
  float *a32, *b32;        /* the float32 inputs on the device */
  void *lt_a, *lt_b, *d;   /* cuBLASLt's A (the workload's B), B (the workload's A), D */
  float *out;              /* dequantized (int8) or widened (f16/bf16) output; NULL: D is float32 */
  float *row_scales, *col_scales;
  float *amax, *fp8_scales; /* fp8: [0] the workload's A, [1] its B */
  bool host_q;              /* fp8-rowwise/fp8-block: codes and scales from the host quantizer */
  void *lt_a_scales, *lt_b_scales; /* their scale tensors (plan->lt_a_scales/lt_b_scales): fp32, or bytes (block-scaled) */
  void *c_buf;              /* fp8 output: C's own bf16 buffer */
  float *d_fp8;             /* fp8 output: [0] scale_D, [1] amax_D */
  float d_scale;            /* fp8 output: s, D's dequantization scale (scale_D = 1/s) */
  unsigned long long *clipped;
  void *workspace;
  void *flush;
  size_t flush_bytes;
  unsigned flush_value;
  precis_lt_call call;
  bool call_ready;
  cublasLtMatmulAlgo_t algo;
  double delay_us; /* the device delay before each timed region: twice the host's last enqueue time */
  float alpha;     /* nv (NVFP4): fp32(s_a * s_b), the tensor scales; 1 otherwise */
} cuda_case;

/* ---------------------------------------------------------------------------------------------
 * Enqueued steps. Each returns a precis status; PRECIS_TRY records the failing statement. */

static precis_status convert_a(cuda_case *cs) {
  precis_status st = PRECIS_OK;
  const precis_plan_write *w = &cs->plan.write_a;
  cudaStream_t s = cs->wk->stream;
  switch (cs->spec->a.fmt) {
  case PRECIS_FMT_F32: break; /* cuBLASLt reads the float32 input itself */
  case PRECIS_FMT_TF32: PRECIS_TRY(cuda, precis_cuda_f32_to_tf32(cs->a32, cs->lt_b, cs->a_count, s)); break;
  case PRECIS_FMT_F16: PRECIS_TRY(cuda, precis_cuda_f32_to_f16(cs->a32, cs->lt_b, cs->a_count, s)); break;
  case PRECIS_FMT_BF16: PRECIS_TRY(cuda, precis_cuda_f32_to_bf16(cs->a32, cs->lt_b, cs->a_count, s)); break;
  case PRECIS_FMT_I8:
    if (!cs->static_act)
      PRECIS_TRY(cuda, precis_cuda_int8_row_scales(cs->a32, (size_t)(cs->w->batch * cs->w->m), (size_t)cs->w->k,
                                                   cs->row_scales, s));
    for (int64_t c = 0; c < w->calls; c++)
      PRECIS_TRY(cuda, precis_cuda_int8_quantize(cs->a32 + c * w->src_stride, (size_t)w->rows, (size_t)w->cols,
                                                 cs->static_act ? PRECIS_CUDA_SCALE_TENSOR : PRECIS_CUDA_SCALE_ROW,
                                                 cs->row_scales + c * w->scale_stride,
                                                 (int8_t *)cs->lt_b + c * w->dst_stride, (size_t)w->ld_out, false,
                                                 cs->clipped, s));
    break;
  case PRECIS_FMT_E4M3:
    PRECIS_TRY(cuda, precis_cuda_absmax(cs->a32, cs->a_count, cs->amax, s));
    PRECIS_TRY(cuda, precis_cuda_scale_from_amax(cs->amax, (float)precis_format_get(PRECIS_FMT_E4M3)->max_finite,
                                                 cs->fp8_scales, 1, s));
    for (int64_t c = 0; c < w->calls; c++)
      PRECIS_TRY(cuda, precis_cuda_fp8_quantize(cs->a32 + c * w->src_stride, (size_t)w->rows, (size_t)w->cols,
                                                cs->fp8_scales, (uint8_t *)cs->lt_b + c * w->dst_stride,
                                                (size_t)w->ld_out, false, cs->clipped, s));
    break;
  default:
    st = precis_fail(PRECIS_E_UNSUPPORTED, "cuda backend: no conversion for a=%s", precis_format_get(cs->spec->a.fmt)->name);
  }
done:
  return st;
}

static precis_status convert_b(cuda_case *cs) {
  precis_status st = PRECIS_OK;
  const precis_plan_write *w = &cs->plan.write_b;
  cudaStream_t s = cs->wk->stream;
  switch (cs->spec->b.fmt) {
  case PRECIS_FMT_F32: break;
  case PRECIS_FMT_TF32: PRECIS_TRY(cuda, precis_cuda_f32_to_tf32(cs->b32, cs->lt_a, cs->b_count, s)); break;
  case PRECIS_FMT_F16: PRECIS_TRY(cuda, precis_cuda_f32_to_f16(cs->b32, cs->lt_a, cs->b_count, s)); break;
  case PRECIS_FMT_BF16: PRECIS_TRY(cuda, precis_cuda_f32_to_bf16(cs->b32, cs->lt_a, cs->b_count, s)); break;
  case PRECIS_FMT_I8:
    for (int64_t c = 0; c < w->calls; c++) {
      const float *src = cs->b32 + c * w->src_stride;
      float *scales = cs->col_scales + c * w->scale_stride;
      PRECIS_TRY(cuda, precis_cuda_int8_col_scales(src, (size_t)w->rows, (size_t)w->cols, scales, s));
      PRECIS_TRY(cuda, precis_cuda_int8_quantize(src, (size_t)w->rows, (size_t)w->cols, PRECIS_CUDA_SCALE_COL, scales,
                                                 (int8_t *)cs->lt_a + c * w->dst_stride, (size_t)w->ld_out,
                                                 w->transpose_out, cs->clipped, s));
    }
    break;
  case PRECIS_FMT_E4M3:
    PRECIS_TRY(cuda, precis_cuda_absmax(cs->b32, cs->b_count, cs->amax + 1, s));
    PRECIS_TRY(cuda, precis_cuda_scale_from_amax(cs->amax + 1, (float)precis_format_get(PRECIS_FMT_E4M3)->max_finite,
                                                 cs->fp8_scales + 1, 1, s));
    for (int64_t c = 0; c < w->calls; c++)
      PRECIS_TRY(cuda, precis_cuda_fp8_quantize(cs->b32 + c * w->src_stride, (size_t)w->rows, (size_t)w->cols,
                                                cs->fp8_scales + 1, (uint8_t *)cs->lt_a + c * w->dst_stride,
                                                (size_t)w->ld_out, w->transpose_out, cs->clipped, s));
    break;
  default:
    st = precis_fail(PRECIS_E_UNSUPPORTED, "cuda backend: no conversion for b=%s", precis_format_get(cs->spec->b.fmt)->name);
  }
done:
  return st;
}

/* Issue 16 (fp8-rowwise, fp8-block): one operand quantized on the host by the cpu backend's
 * quantizer (src/numerics/quantize.c), so that its codes and scales are the cpu backend's bit for
 * bit; the codes are placed into a host image of cuBLASLt's buffer as write `w` says (A's rows with
 * ld k_pad; B transposed to [n, k] with ld k_pad; padding zero) and the scales into the plan's
 * scale tensor t, both by the plan's code (tested on the CPU), then uploaded. */
static precis_status upload_host_quantized(cuda_case *cs, const precis_operand_spec *op, precis_operand_side side,
                                           const float *x, size_t rows, size_t cols, const precis_plan_write *w,
                                           const precis_lt_matrix *slot, void *dst, const precis_lt_scale_tensor *t,
                                           void *d_scales, float *tensor_scale, size_t *clipped) {
  precis_status st = PRECIS_OK;
  cudaStream_t s = cs->wk->stream;
  precis_quant_desc d = {.elem = op->fmt, .side = side,
                         .ints = precis_operand_scales_ue8m0(op) ? PRECIS_QUANT_FP8_UE8M0 : PRECIS_QUANT_INT_SYMMETRIC};
  switch (op->gran) {
  case PRECIS_GRAN_ROW: d.gran = PRECIS_QUANT_GRAN_ROW; break;
  case PRECIS_GRAN_COL: d.gran = PRECIS_QUANT_GRAN_COL; break;
  case PRECIS_GRAN_K: d.gran = PRECIS_QUANT_GRAN_K, d.group = op->group; break;
  case PRECIS_GRAN_BLOCK: d.gran = PRECIS_QUANT_GRAN_BLOCK, d.group = op->block_rows, d.group_cols = op->block_cols; break;
  case PRECIS_GRAN_MX: d.gran = PRECIS_QUANT_GRAN_MX; break;
  case PRECIS_GRAN_MX_RCEIL: d.gran = PRECIS_QUANT_GRAN_MX_RCEIL; break;
  case PRECIS_GRAN_NV: d.gran = PRECIS_QUANT_GRAN_NV; break;
  default: return precis_fail(PRECIS_E_UNSUPPORTED, "cuda backend: no host quantization for %s", precis_gran_name(op->gran));
  }
  precis_quant_layout l;
  precis_quant_tensor q = {0};
  uint8_t *image = NULL;
  void *tensor = NULL;
  bool block_scaled = t->mode == PRECIS_LT_SCALE_VEC32_UE8M0 || t->mode == PRECIS_LT_SCALE_VEC16_UE4M3;
  size_t image_bytes = (size_t)precis_lt_matrix_bytes(slot);
  size_t tensor_bytes = (size_t)precis_lt_scale_tensor_bytes(t);
  if ((st = precis_quant_layout_of(&d, rows, cols, &l)) != PRECIS_OK) return st;
  q.codes = malloc(rows * cols);
  q.scales = malloc(l.scale_count * sizeof(float));
  q.scale_codes = block_scaled ? malloc(l.scale_count) : NULL;
  tensor = malloc(tensor_bytes);
  image = calloc(image_bytes, 1);
  if (!q.codes || !q.scales || !tensor || !image || (block_scaled && !q.scale_codes)) {
    st = precis_fail(PRECIS_E_DOES_NOT_FIT, "host memory: %zu bytes for the host-quantized %s operand", rows * cols,
                     side == PRECIS_OPERAND_A ? "A" : "B");
    goto done;
  }
  if ((st = precis_quantize(&d, x, rows, cols, &q)) != PRECIS_OK) goto done;
  *clipped += q.clipped;
  if (tensor_scale) *tensor_scale = q.tensor_scale; /* nv's s2; 1 for the other rules */
  if (block_scaled)
    /* Padding scales: 1.0 (E8M0 127, E4M3 0x38); the codes they cover are zeros anyway. */
    precis_gemm_plan_fill_block_scales(t, q.scale_codes, (int64_t)l.scale_cols, (int64_t)l.group_rows,
                                       (int64_t)l.group_cols, (int64_t)rows, (int64_t)cols,
                                       t->mode == PRECIS_LT_SCALE_VEC32_UE8M0 ? 127u : 0x38u, tensor);
  else
    precis_gemm_plan_fill_scales(t, q.scales, (int64_t)l.scale_cols, (int64_t)l.group_rows, (int64_t)l.group_cols,
                                 (int64_t)rows, (int64_t)cols, tensor);
  PRECIS_TRY(cuda, cudaMemcpyAsync(d_scales, tensor, tensor_bytes, cudaMemcpyHostToDevice, s));
  if ((size_t)(w->calls * w->rows * w->cols) != rows * cols) {
    st = precis_fail(PRECIS_E_RUNTIME, "cuda backend: the plan writes %lld codes of %s, the quantizer made %zu",
                     (long long)(w->calls * w->rows * w->cols), side == PRECIS_OPERAND_A ? "A" : "B", rows * cols);
    goto done;
  }
  if (slot->data_type == PRECIS_CUDA_R_4F_E2M1) precis_gemm_plan_place_codes4(w, q.codes, image);
  else precis_gemm_plan_place_codes(w, q.codes, image);
  PRECIS_TRY(cuda, cudaMemcpyAsync(dst, image, image_bytes, cudaMemcpyHostToDevice, s));
  /* The host buffers are freed below: the copies must have read them. */
  PRECIS_TRY(cuda, cudaStreamSynchronize(s));
done:
  free(q.codes);
  free(q.scales);
  free(q.scale_codes);
  free(tensor);
  free(image);
  return st;
}

static precis_status gemm(cuda_case *cs, long calls) {
  precis_status st = PRECIS_OK;
  for (long i = 0; i < calls; i++)
    PRECIS_TRY(cublas, precis_lt_call_run(&cs->call, cs->wk->lt, &cs->algo, cs->wk->stream));
done:
  return st;
}

/* int8: dequantize the accumulators; f16/bf16 outputs: widen D to float32 for the host. */
static precis_status finish_output(cuda_case *cs) {
  precis_status st = PRECIS_OK;
  const precis_gemm_plan *p = &cs->plan;
  cudaStream_t s = cs->wk->stream;
  if (p->dequant) {
    const precis_plan_dequant *q = &p->dequant_step;
    for (int64_t c = 0; c < q->calls; c++)
      PRECIS_TRY(cuda, precis_cuda_int8_dequantize((const int32_t *)cs->d + c * q->acc_stride, (size_t)q->rows,
                                                   (size_t)q->cols, (size_t)q->ld_acc,
                                                   cs->row_scales + c * q->row_scale_stride,
                                                   cs->col_scales + c * q->col_scale_stride, cs->out + c * q->out_stride,
                                                   (size_t)q->ld_out, s));
  } else if (p->d_scaled) {
    /* e4m3 codes to float32; the host multiplies them by s (dequantized output). */
    PRECIS_TRY(cuda, precis_cuda_e4m3_to_f32(cs->d, cs->out, (size_t)p->lt_d.elements, s));
  } else if (p->widen) {
    if (p->lt_d.data_type == PRECIS_CUDA_R_16F)
      PRECIS_TRY(cuda, precis_cuda_widen_f16(cs->d, cs->out, (size_t)p->lt_d.elements, s));
    else
      PRECIS_TRY(cuda, precis_cuda_widen_bf16(cs->d, cs->out, (size_t)p->lt_d.elements, s));
  }
done:
  return st;
}

/* What a deployed quantized layer pays per call: quantize the activations (scales included), the
 * GEMM, the dequantization. The weights (B) are quantized once, as a deployment does offline. */
static precis_status end_to_end(cuda_case *cs, long calls) {
  precis_status st = PRECIS_OK;
  for (long i = 0; i < calls && st == PRECIS_OK; i++) {
    st = convert_a(cs);
    if (st == PRECIS_OK) st = gemm(cs, 1);
    if (st == PRECIS_OK && cs->plan.dequant) st = finish_output(cs);
  }
  return st;
}

/* The delay for the next timed region, so that the start event executes only once the whole
 * sample is queued (kernels/stream_delay.h). */
static double next_delay_us(double enqueue_ms) { return precis_cuda_delay_after_enqueue_us(enqueue_ms); }

/* Times `calls` of fn between two CUDA events. The L2 flush (cold) and the device delay are
 * enqueued before the start event, outside the timed region. */
static precis_status time_calls(cuda_case *cs, precis_status (*fn)(cuda_case *, long), long calls, bool flush,
                                double *ms) {
  precis_status st = PRECIS_OK;
  cuda_worker *wk = cs->wk;
  if (flush && cs->flush)
    PRECIS_TRY(cuda, cudaMemsetAsync(cs->flush, (int)(++cs->flush_value & 0xffu), cs->flush_bytes, wk->stream));
  PRECIS_TRY(cuda, precis_cuda_delay(cs->delay_us, wk->stream));
  double enqueue_start = precis_now_ms();
  PRECIS_TRY(cuda, cudaEventRecord(wk->start, wk->stream));
  st = fn(cs, calls);
  if (st != PRECIS_OK) goto done;
  PRECIS_TRY(cuda, cudaEventRecord(wk->stop, wk->stream));
  cs->delay_us = next_delay_us(precis_now_ms() - enqueue_start);
  PRECIS_TRY(cuda, cudaEventSynchronize(wk->stop));
  float elapsed = 0;
  PRECIS_TRY(cuda, cudaEventElapsedTime(&elapsed, wk->start, wk->stop));
  *ms = elapsed;
done:
  return st;
}

/* DESIGN §6: warm-up (>= warmup_calls and >= warmup_ms), then samples of calls_per_sample calls
 * until the shared stopping rule is met. */
static precis_status measure(cuda_case *cs, precis_status (*fn)(cuda_case *, long), precis_timing *timing) {
  precis_status st = PRECIS_OK;
  const precis_case_options *o = cs->o;
  precis_sampler sampler;
  precis_sampler_init(&sampler, o);
  double t0 = precis_now_ms(), one_call_ms = INFINITY;
  long warm = 0;
  while (!precis_warmup_done(o, warm, precis_now_ms() - t0) && !precis_interrupt_signal && warm < 1000000) {
    double ms = 0;
    st = time_calls(cs, fn, 1, false, &ms);
    if (st != PRECIS_OK) goto done;
    /* The first call may include lazy loading: it only counts when it is the only one. */
    one_call_ms = warm <= 1 ? ms : fmin(one_call_ms, ms);
    warm++;
  }
  /* Cold samples are one call each: calls after the first would find the cache warm again. */
  long calls = o->cold ? 1 : precis_calls_per_sample(one_call_ms);
  bool more = true;
  while (more) {
    double w0 = precis_now_ms(), ms = 0;
    st = time_calls(cs, fn, calls, o->cold, &ms);
    if (st != PRECIS_OK) goto done;
    more = precis_sampler_add(&sampler, ms / (double)calls, precis_now_ms() - w0);
    if (precis_interrupt_signal) break;
  }
  st = precis_sampler_finish(&sampler, calls, timing);
done:
  precis_sampler_free(&sampler);
  return st;
}

/* --autotune N: time each candidate briefly and keep the fastest. */
static precis_status autotune(cuda_case *cs, const cublasLtMatmulHeuristicResult_t *cands, int count, int *chosen,
                              precis_kv_list *details) {
  precis_status st = PRECIS_OK;
  char list[1024] = "";
  size_t used = 0;
  double best = INFINITY;
  *chosen = -1;
  for (int i = 0; i < count; i++) {
    cs->algo = cands[i].algo;
    double ms = INFINITY, t = 0;
    precis_status trial = time_calls(cs, gemm, 1, false, &t); /* first call: loading, not timed */
    if (trial == PRECIS_OK) {
      long calls = precis_calls_per_sample(t);
      for (int r = 0; r < 5 && trial == PRECIS_OK; r++) {
        trial = time_calls(cs, gemm, calls, false, &t);
        if (trial == PRECIS_OK) ms = fmin(ms, t / (double)calls);
      }
    }
    if (trial != PRECIS_OK) {
      /* This candidate cannot run here: skipped. A launch failure leaves its CUDA error pending,
       * and the next launcher's cudaGetLastError() would report it as its own: drain the stream
       * and clear it. (A sticky error survives this and fails the case where it next shows.) */
      (void)cudaStreamSynchronize(cs->wk->stream);
      (void)cudaGetLastError();
      precis_clear_error();
      ms = NAN;
    }
    used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0, "%s%.6g", i ? "," : "", ms);
    if (ms < best) {
      best = ms;
      *chosen = i;
    }
  }
  precis_kv_set_int(details, "autotune_candidates", count);
  precis_kv_set(details, "autotune_ms_per_call", list);
  if (*chosen < 0) {
    st = precis_fail(PRECIS_E_RUNTIME, "autotune: none of the %d cuBLASLt candidates for %s ran", count,
                     cs->plan.route->name);
    goto done;
  }
  precis_kv_set_int(details, "autotune_choice", *chosen);
  cs->algo = cands[*chosen].algo;
done:
  return st;
}

/* ---------------------------------------------------------------------------------------------
 * One case. */

static precis_status alloc(cuda_case *cs, size_t bytes, const char *what, void **out) {
  return precis_dmem_alloc(&cs->mem, bytes, what, out);
}

static void set_clock(cuda_ctx *ctx, precis_kv_list *details, const char *key) {
  unsigned mhz = 0;
  if (precis_nvml_sm_clock_mhz(ctx->nvml, &mhz))
    precis_kv_set_int(details, key, mhz);
  else
    precis_kv_set(details, key, NULL);
}

/* The float recipes' launchers write contiguous arrays: the plan must say so. */
static bool plan_fits_launchers(const precis_gemm_plan *p) {
  if (p->tn) return true;
  const precis_plan_write *a = &p->write_a, *b = &p->write_b;
  return !p->lt_a.zero_fill && !p->lt_b.zero_fill && !b->transpose_out && a->ld_out == a->cols &&
         b->ld_out == b->cols && (a->calls == 1 || a->dst_stride == a->src_stride) &&
         (b->calls == 1 || b->dst_stride == b->src_stride);
}

static precis_status run_case_body(cuda_case *cs, const precis_workload_data *data, precis_case_output *out) {
  precis_status st = PRECIS_OK;
  cuda_ctx *ctx = cs->ctx;
  const precis_workload_info *w = cs->w;
  const precis_case_options *o = cs->o;
  precis_kv_list *details = &out->details;
  cuda_worker *wk = cs->wk;
  cudaStream_t s = wk->stream;
  precis_mem_sampler sampler;
  bool sampling = false;
  float *host_scales = NULL;

  st = precis_gemm_plan_make_for(cs->spec, w->m, w->n, w->k, w->batch, w->b_batched, ctx->lt_version, &cs->plan);
  if (st != PRECIS_OK) goto done;
  const precis_gemm_plan *p = &cs->plan;
  precis_gemm_plan_describe(p, details);
  precis_plan_describe_l2(precis_gemm_plan_operand_bytes(p), ctx->l2_bytes, "device (cudaDeviceProp.l2CacheSize)",
                          details);
  /* Device-resident inputs (precis_emulate_device) are read in place; the host rescales an fp8
   * output after reading it back, which a device output never is. */
  if (o->device_io && p->d_scaled) {
    st = precis_fail(PRECIS_E_UNSUPPORTED, "cuda backend, device arrays: an out=e4m3 output is rescaled on the host "
                                           "after its copy back; device-resident outputs take out=fp32, bf16 or fp16");
    goto done;
  }
  if (!plan_fits_launchers(p)) {
    st = precis_fail(PRECIS_E_RUNTIME, "cuda backend: the plan for %s needs a strided float conversion the kernels lack",
                     p->route->name);
    goto done;
  }
  cs->a_count = (size_t)(w->batch * w->m * w->k);
  cs->b_count = (size_t)((p->b_batched ? w->batch : 1) * w->k * w->n);
  cs->c_count = (size_t)(w->batch * w->m * w->n);

  /* int8 static activation scales: the amax of the calibration split, on the host, as the cpu
   * backend computes it (precis_calib_amax), so that both backends quantize with the same scale. */
  if (cs->int8) {
    if (cs->spec->scale == PRECIS_SCALE_DYNAMIC) {
      precis_kv_set(details, "a_scales", "per row, dynamic (amax/127 of each evaluated row, on the device)");
    } else {
      if (!data->calib_a || w->calib_samples <= 0) {
        st = precis_fail(PRECIS_E_INPUT, "static int8 activation scales need the workload's calibration split "
                                         "(calib/a), which it lacks");
        goto done;
      }
      precis_calib_method method = cs->spec->scale == PRECIS_SCALE_ABSMAX       ? PRECIS_CALIB_ABSMAX
                                   : cs->spec->scale == PRECIS_SCALE_PERCENTILE ? PRECIS_CALIB_PERCENTILE
                                                                                : PRECIS_CALIB_MSE;
      float amax = 0;
      st = precis_calib_amax(data->calib_a, (size_t)(w->calib_samples * w->m * w->k), method, cs->spec->percentile,
                             &amax);
      if (st != PRECIS_OK) goto done;
      cs->static_act = true;
      cs->static_scale = precis_int8_scale_from_amax(amax);
      char buf[160];
      snprintf(buf, sizeof buf, "per tensor, static from %lld calibration samples (%s)", (long long)w->calib_samples,
               precis_calib_method_str(method));
      precis_kv_set(details, "a_scales", buf);
      precis_kv_set_number(details, "a_amax_static", amax);
    }
    precis_kv_set(details, "b_scales", "per column (amax/127, on the device)");
  } else if (cs->fp8) {
    precis_kv_set(details, "a_scales", "per tensor (amax/448 over the whole A, on the device)");
    precis_kv_set(details, "b_scales", "per tensor (amax/448, on the device)");
  }

  /* Memory views: the baseline now (context, handle, nothing of this case), then the sampler. */
  out->memory.device_baseline_bytes = precis_device_used_bytes();
  st = precis_mem_sampler_start(&sampler, ctx->device, MEM_SAMPLER_PERIOD_US);
  if (st != PRECIS_OK) goto done;
  sampling = true;

  if (o->device_io) {
    /* The caller's device arrays are the float32 inputs: no copy (the kernels only read a32 and b32). */
    cs->a32 = (float *)(uintptr_t)o->device_io->a;
    cs->b32 = (float *)(uintptr_t)o->device_io->b;
  } else if (!cs->host_q) {
    st = alloc(cs, cs->a_count * sizeof(float), "a (float32 input)", (void **)&cs->a32);
    if (st == PRECIS_OK) st = alloc(cs, cs->b_count * sizeof(float), "b (float32 input)", (void **)&cs->b32);
  } else {
    st = alloc(cs, (size_t)precis_lt_scale_tensor_bytes(&p->lt_a_scales), "scale tensor of cuBLASLt A (b's scales)",
               &cs->lt_a_scales);
    if (st == PRECIS_OK)
      st = alloc(cs, (size_t)precis_lt_scale_tensor_bytes(&p->lt_b_scales), "scale tensor of cuBLASLt B (a's scales)",
                 &cs->lt_b_scales);
  }
  if (st == PRECIS_OK && p->d_scaled) {
    st = alloc(cs, (size_t)p->lt_c.elements * p->lt_c.elem_bytes, "C (bf16, fp8 output; never read)", &cs->c_buf);
    if (st == PRECIS_OK) st = alloc(cs, 2 * sizeof(float), "scale_D and amax_D", (void **)&cs->d_fp8);
  }
  if (st != PRECIS_OK) goto done;
  if ((cs->spec->a.fmt == PRECIS_FMT_F32 && cs->spec->b.fmt == PRECIS_FMT_F32)) {
    cs->lt_a = cs->b32; /* no conversion, no padding: the layouts are the inputs' own */
    cs->lt_b = cs->a32;
    if (o->device_io) {
      /* The caller's arrays are cuBLASLt's operands then, at whatever alignment they have (a torch
       * view may start 4 bytes into its storage): only algorithms that accept it. */
      uintptr_t addresses = (uintptr_t)cs->a32 | (uintptr_t)cs->b32;
      int align = 256;
      while (align > 4 && addresses % (uintptr_t)align != 0) align /= 2;
      if (align < cs->plan.call_align_bytes) cs->plan.call_align_bytes = align;
    }
  } else {
    st = alloc(cs, (size_t)precis_lt_matrix_bytes(&p->lt_a), "b converted (cuBLASLt A)", &cs->lt_a);
    if (st == PRECIS_OK) st = alloc(cs, (size_t)precis_lt_matrix_bytes(&p->lt_b), "a converted (cuBLASLt B)", &cs->lt_b);
    if (st != PRECIS_OK) goto done;
  }
  st = alloc(cs, (size_t)p->lt_d.elements * p->lt_d.elem_bytes, "D (GEMM output)", &cs->d);
  if (st == PRECIS_OK && p->out_elements > 0)
    st = alloc(cs, (size_t)p->out_elements * sizeof(float), p->dequant ? "dequantized output" : "widened output",
               (void **)&cs->out);
  if (st == PRECIS_OK && cs->int8) {
    st = alloc(cs, (size_t)p->row_scale_count * sizeof(float), "int8 row scales of a", (void **)&cs->row_scales);
    if (st == PRECIS_OK)
      st = alloc(cs, (size_t)p->col_scale_count * sizeof(float), "int8 column scales of b", (void **)&cs->col_scales);
  }
  if (st == PRECIS_OK && cs->fp8) {
    st = alloc(cs, 2 * sizeof(float), "fp8 amax", (void **)&cs->amax);
    if (st == PRECIS_OK) st = alloc(cs, 2 * sizeof(float), "fp8 scales", (void **)&cs->fp8_scales);
  }
  if (st == PRECIS_OK && (cs->int8 || cs->fp8))
    st = alloc(cs, sizeof(unsigned long long), "clipped counter", (void **)&cs->clipped);
  if (st == PRECIS_OK) st = alloc(cs, PRECIS_LT_WORKSPACE_BYTES, "cuBLASLt workspace", &cs->workspace);
  if (st == PRECIS_OK && o->cold) {
    /* At least twice the L2 so that nothing of the GEMM's operands survives the flush. */
    cs->flush_bytes = (size_t)(ctx->l2_bytes > 0 ? 2 * ctx->l2_bytes : 256LL << 20);
    st = alloc(cs, cs->flush_bytes, "L2 flush buffer", &cs->flush);
    if (st == PRECIS_OK) {
      precis_kv_set(details, "cold", "L2 flushed before every sample (cudaMemsetAsync, outside the timed region)");
      precis_kv_set_int(details, "l2_flush_bytes", (long long)cs->flush_bytes);
    }
  }
  if (st != PRECIS_OK) goto done;

  /* Inputs, padding, static scales. */
  if (!cs->host_q && !o->device_io) {
    PRECIS_TRY(cuda, cudaMemcpyAsync(cs->a32, data->a, cs->a_count * sizeof(float), cudaMemcpyHostToDevice, s));
    PRECIS_TRY(cuda, cudaMemcpyAsync(cs->b32, data->b, cs->b_count * sizeof(float), cudaMemcpyHostToDevice, s));
  }
  if (p->lt_a.zero_fill) PRECIS_TRY(cuda, cudaMemsetAsync(cs->lt_a, 0, (size_t)precis_lt_matrix_bytes(&p->lt_a), s));
  if (p->lt_b.zero_fill) PRECIS_TRY(cuda, cudaMemsetAsync(cs->lt_b, 0, (size_t)precis_lt_matrix_bytes(&p->lt_b), s));
  if (cs->static_act) {
    host_scales = malloc((size_t)p->row_scale_count * sizeof(float));
    if (!host_scales) {
      st = precis_fail(PRECIS_E_DOES_NOT_FIT, "host memory: %lld bytes for the static int8 scales",
                       (long long)p->row_scale_count * 4);
      goto done;
    }
    for (int64_t i = 0; i < p->row_scale_count; i++) host_scales[i] = cs->static_scale;
    PRECIS_TRY(cuda, cudaMemcpyAsync(cs->row_scales, host_scales, (size_t)p->row_scale_count * sizeof(float),
                                     cudaMemcpyHostToDevice, s));
  }
  /* Conversion, timed apart. It runs once untimed first: with lazy module loading (the default
   * since CUDA 12.2) the first launch of each kernel in the process loads it, and that cost would
   * otherwise land in the first case's convert_ms. Running it twice writes the same values; the
   * clipped counter is cleared after the untimed run. */
  if (cs->host_q) {
    /* Host quantization and upload, timed on the host as convert_ms (it includes the copies). */
    size_t clipped = 0;
    float s_a = 1.0f, s_b = 1.0f;
    double h0 = precis_now_ms();
    st = upload_host_quantized(cs, &cs->spec->a, PRECIS_OPERAND_A, data->a, (size_t)(w->batch * w->m), (size_t)w->k,
                               &p->write_a, &p->lt_b, cs->lt_b, &p->lt_b_scales, cs->lt_b_scales, &s_a, &clipped);
    if (st == PRECIS_OK)
      st = upload_host_quantized(cs, &cs->spec->b, PRECIS_OPERAND_B, data->b, (size_t)w->k, (size_t)w->n, &p->write_b,
                                 &p->lt_a, cs->lt_a, &p->lt_a_scales, cs->lt_a_scales, &s_b, &clipped);
    if (st != PRECIS_OK) goto done;
    /* nvfp4 on sm_100: the fp32 tensor scales as alpha, the product rounded once to fp32 as the cpu
     * backend rounds it (the plan strides a b per batch element off this route). */
    if (p->alpha_from_tensor_scales) {
      cs->alpha = precis_mul_rn(s_a, s_b);
      precis_kv_set_number(details, "alpha_tensor_scales", cs->alpha);
    }
    out->time.convert_ms = precis_now_ms() - h0;
    out->clipped_fraction = (double)clipped / (double)(cs->a_count + cs->b_count);
    precis_kv_set(details, "convert", "host: the cpu backend's quantizer (codes and scales bit for bit), then copies "
                                      "of codes and scale tensors to the device");
    goto converted;
  }
  double enqueue_start = precis_now_ms();
  st = convert_a(cs);
  if (st == PRECIS_OK) st = convert_b(cs);
  if (st != PRECIS_OK) goto done;
  double enqueue_ms = precis_now_ms() - enqueue_start;
  if (cs->clipped) PRECIS_TRY(cuda, cudaMemsetAsync(cs->clipped, 0, sizeof(unsigned long long), s));
  PRECIS_TRY(cuda, cudaStreamSynchronize(s));
  PRECIS_TRY(cuda, precis_cuda_delay(next_delay_us(enqueue_ms), s));
  PRECIS_TRY(cuda, cudaEventRecord(wk->start, s));
  st = convert_a(cs);
  if (st == PRECIS_OK) st = convert_b(cs);
  if (st != PRECIS_OK) goto done;
  PRECIS_TRY(cuda, cudaEventRecord(wk->stop, s));
  PRECIS_TRY(cuda, cudaEventSynchronize(wk->stop));
  float convert_ms = 0;
  PRECIS_TRY(cuda, cudaEventElapsedTime(&convert_ms, wk->start, wk->stop));
  out->time.convert_ms = (cs->spec->a.fmt == PRECIS_FMT_F32 && cs->spec->b.fmt == PRECIS_FMT_F32) ? 0.0 : convert_ms;
  if (cs->clipped) {
    unsigned long long clipped = 0;
    PRECIS_TRY(cuda, cudaMemcpy(&clipped, cs->clipped, sizeof clipped, cudaMemcpyDeviceToHost));
    out->clipped_fraction = (double)clipped / (double)(cs->a_count + cs->b_count);
  }
  if (cs->fp8) {
    float scales[2];
    PRECIS_TRY(cuda, cudaMemcpy(scales, cs->fp8_scales, sizeof scales, cudaMemcpyDeviceToHost));
    precis_kv_set_number(details, "fp8_scale_a", scales[0]);
    precis_kv_set_number(details, "fp8_scale_b", scales[1]);
  }

converted:;
  /* An emulated nv spec (or the native nvfp4 route, alpha set by the host quantization above): the
   * tensor scales as alpha. The plan's own alpha is 1. */
  if (cs->alpha != 1.0f) cs->plan.alpha = (double)cs->alpha;
  /* The cuBLASLt call and its algorithm. The fp8 scale pointers follow the operands: A_lt holds
   * the workload's B, so A_SCALE_POINTER gets B's scale (the plan says which). */
  const float *scale_slot_a = NULL, *scale_slot_b = NULL;
  if (cs->fp8) {
    scale_slot_a = p->lt_a_scale == PRECIS_PLAN_WORKLOAD_A ? cs->fp8_scales : cs->fp8_scales + 1;
    scale_slot_b = p->lt_b_scale == PRECIS_PLAN_WORKLOAD_A ? cs->fp8_scales : cs->fp8_scales + 1;
  } else if (cs->host_q) {
    scale_slot_a = cs->lt_a_scales; /* the plan's lt_a_scales: the scales of the operand A_lt holds */
    scale_slot_b = cs->lt_b_scales;
  }
  st = precis_lt_call_init(&cs->call, p, cs->lt_a, cs->lt_b, cs->d, scale_slot_a, scale_slot_b, cs->workspace,
                           PRECIS_LT_WORKSPACE_BYTES);
  if (st != PRECIS_OK) goto done;
  cs->call_ready = true;
  if (p->d_scaled) {
    const float one[2] = {1.0f, 0.0f};
    PRECIS_TRY(cuda, cudaMemcpyAsync(cs->d_fp8, one, sizeof one, cudaMemcpyHostToDevice, s));
    PRECIS_TRY(cuda, cudaStreamSynchronize(s));
    st = precis_lt_call_set_fp8_output(&cs->call, cs->c_buf, cs->d_fp8, cs->d_fp8 + 1);
    if (st != PRECIS_OK) goto done;
  }
  cublasLtMatmulHeuristicResult_t cands[PRECIS_LT_MAX_CANDIDATES];
  int count = 0, chosen = 0;
  st = precis_lt_call_candidates(&cs->call, wk->lt, o->autotune > 1 ? o->autotune : 1, cands, &count);
  if (st != PRECIS_OK) goto done;
  cs->algo = cands[0].algo;
  if (count > 1) {
    st = autotune(cs, cands, count, &chosen, details);
    if (st != PRECIS_OK) goto done;
  }
  precis_lt_algo_describe(&cands[chosen], PRECIS_LT_WORKSPACE_BYTES, details);
  precis_kv_set(details, "algo_from", count > 1 ? "autotune over cublasLtMatmulAlgoGetHeuristic candidates"
                                                : "cublasLtMatmulAlgoGetHeuristic, first candidate");

  /* fp8 output: a first pass with scale_D = 1 reads amax_D back; D's scale is then chosen as the
   * cpu backend chooses it (s = amax/448, current scaling; docs/decisions.md) and scale_D = 1/s
   * is used by the evaluated call and every timed one. */
  if (p->d_scaled) {
    st = gemm(cs, 1);
    if (st != PRECIS_OK) goto done;
    float fp8_pair[2];
    PRECIS_TRY(cuda, cudaMemcpyAsync(fp8_pair, cs->d_fp8, sizeof fp8_pair, cudaMemcpyDeviceToHost, s));
    PRECIS_TRY(cuda, cudaStreamSynchronize(s));
    float amax = fp8_pair[1];
    cs->d_scale = isfinite(amax) && amax > 0.0f ? precis_fp8_scale_from_amax(amax) : 1.0f;
    if (!(cs->d_scale > 0.0f)) cs->d_scale = 1.0f; /* an amax that underflows: the quantizer's rule */
    fp8_pair[0] = 1.0f / cs->d_scale;
    PRECIS_TRY(cuda, cudaMemcpyAsync(cs->d_fp8, fp8_pair, sizeof(float), cudaMemcpyHostToDevice, s));
    PRECIS_TRY(cuda, cudaStreamSynchronize(s));
    precis_kv_set_number(details, "amax_d", amax);
    precis_kv_set_number(details, "d_scale", cs->d_scale);
    precis_kv_set(details, "d_scaling", "fp8 output: s = amax_D/448 from a first pass (AMAX_D_POINTER), scale_D = 1/s; "
                                        "D dequantized as code x s");
  }
  /* The evaluated output: one GEMM, then dequantize or widen, then read back. */
  st = gemm(cs, 1);
  if (st == PRECIS_OK) st = finish_output(cs);
  if (st != PRECIS_OK) goto done;
  const float *src = cs->out ? cs->out : (const float *)cs->d;
  const precis_plan_read *rd = &p->read;
  if (o->device_io) {
    /* The same read as below, device to device into the caller's output; nothing is timed. */
    for (int64_t c = 0; c < rd->calls; c++)
      PRECIS_TRY(cuda, cudaMemcpy2DAsync(o->device_io->c + c * rd->dst_stride, (size_t)rd->dst_ld * sizeof(float),
                                         src + c * rd->src_stride, (size_t)rd->src_ld * sizeof(float),
                                         (size_t)rd->cols * sizeof(float), (size_t)rd->rows, cudaMemcpyDeviceToDevice,
                                         s));
    PRECIS_TRY(cuda, cudaStreamSynchronize(s));
    out->memory.tracked_peak_bytes = cs->mem.peak_bytes;
    precis_kv_set(details, "inputs", "device arrays read in place (precis_emulate_device); output written on the device");
    precis_kv_set(details, "timing", "not measured: computed once (precis_emulate_device)");
    goto done;
  }
  out->c = malloc(cs->c_count * sizeof(float));
  if (!out->c) {
    st = precis_fail(PRECIS_E_DOES_NOT_FIT, "host memory: %zu bytes for the output", cs->c_count * sizeof(float));
    goto done;
  }
  /* cs->out exists for every D that is not float32 (int8 dequantized, f16/bf16 widened, e4m3 decoded). */
  for (int64_t c = 0; c < rd->calls; c++)
    PRECIS_TRY(cuda, cudaMemcpy2DAsync(out->c + c * rd->dst_stride, (size_t)rd->dst_ld * sizeof(float),
                                       src + c * rd->src_stride, (size_t)rd->src_ld * sizeof(float),
                                       (size_t)rd->cols * sizeof(float), (size_t)rd->rows, cudaMemcpyDeviceToHost, s));
  PRECIS_TRY(cuda, cudaStreamSynchronize(s));
  if (p->d_scaled)
    for (size_t i = 0; i < cs->c_count; i++) out->c[i] *= cs->d_scale;

  /* Memory views: every buffer is allocated and the GEMM has run. */
  long long nvml_used = 0;
  if (precis_nvml_process_used_bytes(ctx->nvml, &nvml_used))
    precis_kv_set_int(details, "nvml_process_used_bytes", nvml_used);
  else
    precis_kv_set(details, "nvml_process_used_bytes", NULL);
  long long peak = precis_mem_sampler_stop(&sampler);
  sampling = false;
  precis_kv_set_int(details, "device_memory_samples", (long long)atomic_load(&sampler.samples));
  precis_kv_set_int(details, "device_memory_sample_period_us", MEM_SAMPLER_PERIOD_US);
  out->memory.device_peak_bytes = peak;
  out->memory.tracked_peak_bytes = cs->mem.peak_bytes;
  if (peak >= 0 && out->memory.device_baseline_bytes >= 0)
    out->memory.untracked_bytes = peak - out->memory.device_baseline_bytes - cs->mem.peak_bytes;

  /* Latency: the GEMM alone, then (int8/fp8) end to end. */
  set_clock(ctx, details, "sm_clock_mhz_before");
  st = measure(cs, gemm, &out->time);
  set_clock(ctx, details, "sm_clock_mhz_after");
  if (st != PRECIS_OK) goto done;
  precis_kv_set(details, "timing", "CUDA events around calls_per_sample cublasLtMatmul calls on a non-blocking stream");
  if (cs->int8 || cs->fp8) {
    precis_timing e2e;
    memset(&e2e, 0, sizeof e2e);
    st = measure(cs, end_to_end, &e2e);
    out->time.e2e_median_ms = e2e.median_ms;
    free(e2e.samples_ms);
    if (st != PRECIS_OK) goto done;
    precis_kv_set(details, "e2e", cs->int8 ? "cuda: quantize A (scales + quantize) + GEMM + dequantize, CUDA events; "
                                             "B (weights) quantized once"
                                           : "cuda: quantize A (amax + scale + quantize) + GEMM (scales applied by "
                                             "cuBLASLt), CUDA events; B (weights) quantized once");
  } else if (cs->host_q) {
    precis_kv_set(details, "e2e", "not measured: the operands are quantized on the host (convert_ms), not by a device "
                                  "kernel a deployment would time");
  }

done:
  if (sampling) {
    long long peak_now = precis_mem_sampler_stop(&sampler);
    if (out->memory.device_peak_bytes < 0) out->memory.device_peak_bytes = peak_now;
  }
  if (out->memory.tracked_peak_bytes < 0) out->memory.tracked_peak_bytes = cs->mem.peak_bytes;
  free(host_scales);
  return st;
}

/* Issue 19's recipes (fp64, fp64-emu, the splits: kernels/cuda_hiprec.c) with this case's worker
 * and allocator. */
static precis_status run_hiprec(cuda_case *cs, const precis_workload_data *data, precis_case_output *out) {
  precis_cuda_hiprec_env env = {cs->wk->lt,          cs->wk->stream,      cs->wk->start,        cs->wk->stop,
                                cs->ctx->cc_major, cs->ctx->cc_minor, cs->ctx->lt_version, &cs->mem,
                                cs->ctx->l2_bytes};
  return precis_cuda_hiprec_run(&env, cs->spec, cs->w, data, cs->o, out);
}

static bool cuda_supports(void *vctx, const precis_spec *spec, char *reason, size_t len);
static precis_status cuda_run_case(void *vctx, const precis_spec *spec, const precis_workload_info *w,
                                   const precis_workload_data *data, const precis_case_options *o,
                                   precis_case_output *out);
static precis_status run_case_alpha(void *vctx, const precis_spec *spec, const precis_workload_info *w,
                                    const precis_workload_data *data, const precis_case_options *o, float alpha,
                                    precis_case_output *out);

/* Weight-only and MX specs (issue 16, precis_lt_dequant_emulation): the operands dequantized on the
 * host exactly as the cpu backend multiplies them (bf16 or fp16 values), then the plain GEMM of
 * `sub` on them. The row keeps the spec's tensor bytes and clipped fraction and says how it ran. */
static precis_status run_dequant_emulation(void *vctx, const precis_spec *spec, const precis_spec *sub,
                                           const char *how, const precis_workload_info *w,
                                           const precis_workload_data *data, const precis_case_options *o,
                                           precis_case_output *out) {
  float *a = NULL, *b = NULL;
  size_t clipped = 0;
  double t0 = precis_now_ms();
  float alpha = 1.0f;
  precis_status st = precis_cpu_quant_dequantized_inputs_alpha(spec, w, data, &a, &b, &alpha, &clipped, out->reason,
                                                               sizeof out->reason);
  double host_ms = precis_now_ms() - t0;
  if (st != PRECIS_OK) {
    out->status = st == PRECIS_E_DOES_NOT_FIT   ? PRECIS_ROW_DOES_NOT_FIT
                  : st == PRECIS_E_UNSUPPORTED ? PRECIS_ROW_UNSUPPORTED
                                               : PRECIS_ROW_FAILED;
    out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
    return PRECIS_OK;
  }
  precis_workload_data dequantized = *data;
  dequantized.a = a;
  dequantized.b = b;
  /* nv: D = alpha * (code x block scale products), alpha = fp32(s_a * s_b) as the cpu backend
   * multiplies its k-sum (docs/cuda-backend.md states what differs). */
  st = run_case_alpha(vctx, sub, w, &dequantized, o, alpha, out);
  free(a);
  free(b);
  out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
  if (out->status == PRECIS_ROW_OK) {
    long long inputs = w->batch * w->m * w->k + (w->b_batched ? w->batch : 1) * w->k * w->n;
    out->clipped_fraction = (double)clipped / (double)inputs;
    precis_kv_set(&out->details, "emulation", how);
    precis_kv_set_number(&out->details, "host_dequantize_ms", host_ms);
    if (alpha != 1.0f) precis_kv_set_number(&out->details, "alpha_tensor_scales", alpha);
  }
  return st;
}

/* Device-resident arrays (options->device_io) reach only the routes whose conversions run on the
 * device from the float32 inputs; the others read the inputs on the host: true with the reason then. */
static bool device_io_refusal(cuda_ctx *ctx, const precis_spec *spec, char *why, size_t len) {
  const char *host_step = NULL;
  precis_spec sub;
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  if (precis_lt_emulated_on(spec, ctx->cc_major, ctx->cc_minor, &sub, NULL, 0))
    host_step = "its operands are dequantized on the host (weight-only, MX or NV emulated)";
  else if (precis_cuda_hiprec_handles(spec))
    host_step = "fp64 and split recipes read their inputs on the host";
  else if (route && (route->scaling == PRECIS_LT_SCALING_OUTER_VEC || route->scaling == PRECIS_LT_SCALING_BLOCK128 ||
                     route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED))
    host_step = "its codes and scales come from the cpu backend's quantizer, on the host";
  if (!host_step) return false;
  snprintf(why, len, "cuda backend, device arrays: %s, which would copy them to the host; with device arrays it takes "
                     "the recipes converted on the device (fp32, tf32, bf16, fp16, int8 per row, fp8 per tensor)",
           host_step);
  return true;
}

static precis_status cuda_run_case(void *vctx, const precis_spec *spec, const precis_workload_info *w,
                                   const precis_workload_data *data, const precis_case_options *o,
                                   precis_case_output *out) {
  return run_case_alpha(vctx, spec, w, data, o, 1.0f, out);
}

static precis_status run_case_alpha(void *vctx, const precis_spec *spec, const precis_workload_info *w,
                                    const precis_workload_data *data, const precis_case_options *o, float alpha,
                                    precis_case_output *out) {
  cuda_ctx *ctx = vctx;
  char why[512];
  precis_spec sub;
  char how[256];
  if (o->device_io && device_io_refusal(ctx, spec, out->reason, sizeof out->reason)) {
    out->status = PRECIS_ROW_UNSUPPORTED;
    return PRECIS_OK;
  }
  if (precis_lt_emulated_on(spec, ctx->cc_major, ctx->cc_minor, &sub, how, sizeof how))
    return run_dequant_emulation(vctx, spec, &sub, how, w, data, o, out);
  out->memory.tensor_bytes = precis_spec_tensor_bytes(spec, w->m, w->n, w->k, w->batch, w->b_batched);
  /* The calling thread's current device is per thread: a worker thread starts on device 0 of the
   * process whatever the context chose, and the capability probe below may run here first. */
  cudaError_t set = cudaSetDevice(ctx->device);
  if (set != cudaSuccess) {
    (void)cudaGetLastError();
    out->status = PRECIS_ROW_FAILED;
    snprintf(out->reason, sizeof out->reason, "cudaSetDevice(%d) failed with %s (%s)", ctx->device,
             cudaGetErrorName(set), cudaGetErrorString(set));
    return PRECIS_OK;
  }
  if (!cuda_supports(ctx, spec, why, sizeof why)) {
    out->status = PRECIS_ROW_UNSUPPORTED;
    snprintf(out->reason, sizeof out->reason, "%s", why);
    return PRECIS_OK;
  }
  cuda_case cs;
  memset(&cs, 0, sizeof cs);
  cs.ctx = ctx;
  cs.wk = o->worker ? (cuda_worker *)o->worker : &ctx->main;
  cs.spec = spec;
  cs.w = w;
  cs.o = o;
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  cs.int8 = route && route->scaling == PRECIS_LT_SCALING_DEQUANT; /* no single route: a split (issue 19) */
  cs.fp8 = route && route->scaling == PRECIS_LT_SCALING_TENSOR_POINTERS;
  cs.host_q = route && (route->scaling == PRECIS_LT_SCALING_OUTER_VEC || route->scaling == PRECIS_LT_SCALING_BLOCK128 ||
                        route->scaling == PRECIS_LT_SCALING_BLOCK_SCALED);
  cs.delay_us = 50;
  cs.alpha = alpha;
  precis_clear_error();
  precis_status st = precis_cuda_hiprec_handles(spec) ? run_hiprec(&cs, data, out) : run_case_body(&cs, data, out);
  if (st != PRECIS_OK) {
    out->status = st == PRECIS_E_DOES_NOT_FIT    ? PRECIS_ROW_DOES_NOT_FIT
                  : st == PRECIS_E_UNSUPPORTED ? PRECIS_ROW_UNSUPPORTED
                                               : PRECIS_ROW_FAILED;
    snprintf(out->reason, sizeof out->reason, "%s", precis_last_error()[0] ? precis_last_error() : precis_status_str(st));
    free(out->c);
    out->c = NULL;
  }
  /* Whatever happened, the stream is drained and every buffer freed before the next case. A sticky
   * error (e.g. an illegal address) leaves the context unusable: say so in the reason. */
  cudaError_t drained = cudaStreamSynchronize(cs.wk->stream);
  if (drained != cudaSuccess) {
    if (out->status == PRECIS_ROW_OK) out->status = PRECIS_ROW_FAILED;
    size_t used = strlen(out->reason);
    snprintf(out->reason + used, sizeof out->reason - used, "%s%s (%s) while finishing the case",
             used ? "; then " : "", cudaGetErrorName(drained), cudaGetErrorString(drained));
    (void)cudaGetLastError();
  }
  if (cs.call_ready) precis_lt_call_destroy(&cs.call);
  precis_dmem_destroy(&cs.mem);
  (void)cudaGetLastError();
  return PRECIS_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Backend table. */

/* Does cuBLASLt have a kernel for the route's types and layout on this device? Asked once per
 * route with a representative 256^3 problem (descriptors only, no device memory). */
static bool probe_route(cuda_ctx *ctx, const precis_spec *spec, char *why, size_t len) {
  precis_gemm_plan plan;
  precis_lt_call call;
  bool ok = false;
  if (precis_gemm_plan_make_for(spec, 256, 256, 256, 1, false, ctx->lt_version, &plan) != PRECIS_OK) {
    snprintf(why, len, "%s", precis_last_error());
    return false;
  }
  /* Scale modes other than SCALAR_32F and an fp8 output need their pointers set for the heuristic
   * to answer: small device buffers, never read (no call runs). */
  float *probe_scales = NULL;
  bool needs_pointers = plan.host_quantized || plan.d_scaled;
  if (needs_pointers) {
    size_t floats = (size_t)(plan.lt_a_scales.elements + plan.lt_b_scales.elements + 2);
    if (cudaMalloc((void **)&probe_scales, floats * sizeof(float)) != cudaSuccess) {
      (void)cudaGetLastError();
      snprintf(why, len, "capability probe for %s: cannot allocate %zu bytes of scales", plan.route->name,
               floats * sizeof(float));
      return false;
    }
  }
  const float *slot_a = needs_pointers && plan.host_quantized ? probe_scales : NULL;
  const float *slot_b = needs_pointers && plan.host_quantized ? probe_scales + plan.lt_a_scales.elements : NULL;
  if (precis_lt_call_init(&call, &plan, NULL, NULL, NULL, slot_a, slot_b, NULL, PRECIS_LT_WORKSPACE_BYTES) != PRECIS_OK ||
      (plan.d_scaled && precis_lt_call_set_fp8_output(&call, NULL, probe_scales, probe_scales + 1) != PRECIS_OK)) {
    snprintf(why, len, "cuBLASLt rejects the %s descriptors on sm_%d%d: %s", plan.route->name, ctx->cc_major,
             ctx->cc_minor, precis_last_error());
    if (call.desc) precis_lt_call_destroy(&call);
    cudaFree(probe_scales);
    return false;
  }
  cublasLtMatmulHeuristicResult_t result;
  int count = 0;
  if (precis_lt_call_candidates(&call, ctx->main.lt, 1, &result, &count) == PRECIS_OK)
    ok = true;
  else
    snprintf(why, len, "on sm_%d%d: %s", ctx->cc_major, ctx->cc_minor, precis_last_error());
  precis_lt_call_destroy(&call);
  if (probe_scales) cudaFree(probe_scales);
  precis_clear_error();
  return ok;
}

static bool cuda_supports(void *vctx, const precis_spec *spec, char *reason, size_t len) {
  cuda_ctx *ctx = vctx;
  if (!precis_cuda_spec_supported(spec, ctx->cc_major, ctx->cc_minor, reason, len)) return false;
  /* A spec emulated by host dequantization runs the route of its plain GEMM; a split (issue 19) the
   * route of its partial products. */
  precis_spec sub;
  if (precis_split_term_spec(spec, &sub, NULL, 0)) spec = &sub;
  else if (precis_lt_emulated_on(spec, ctx->cc_major, ctx->cc_minor, &sub, NULL, 0)) spec = &sub;
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  size_t r = precis_lt_route_index(route);
  if (route->split == PRECIS_SPLIT_CUBLAS_EMU && cublasLtGetVersion() < (size_t)route->min_cublaslt) {
    snprintf(reason, len, "cuBLAS's FP64 emulation needs cuBLASLt 13.1 (CUDA 13.0 Update 2) or newer; this one is %zu",
             cublasLtGetVersion());
    return false;
  }
  /* cublasLtGetVersion() is major*10000 + minor*100 + patch. FP8 matmul came with CUDA 11.8, whose
   * cuBLAS is 11.11 (111100); 110800 would be cuBLAS 11.8, the library of CUDA 11.6. */
  if (cublasLtGetVersion() < (size_t)route->min_cublaslt) {
    if (route->min_cublaslt >= PRECIS_LT_VERSION_BLOCK_SCALED) /* the scale-mode routes say which version */
      snprintf(reason, len, "%s; this cuBLASLt is %zu", route->needs, cublasLtGetVersion());
    else
      snprintf(reason, len, "FP8 matmul needs cuBLASLt 11.11 (CUDA 11.8) or newer; this one is %zu",
               cublasLtGetVersion());
    return false;
  }
  /* Workers ask concurrently (run_case checks support first): one probe per route, under the lock
   * (which also keeps the context's handle, the probes' only user then, to one thread). */
  pthread_mutex_lock(&ctx->probe_mutex);
  if (ctx->probed[r] == 0)
    ctx->probed[r] = probe_route(ctx, spec, ctx->probe_reason[r], sizeof ctx->probe_reason[r]) ? 1 : -1;
  bool probed_ok = ctx->probed[r] > 0;
  if (!probed_ok) snprintf(reason, len, "%s", ctx->probe_reason[r]);
  pthread_mutex_unlock(&ctx->probe_mutex);
  if (!probed_ok) return false;
  if (reason && len) reason[0] = '\0';
  return true;
}

static void worker_destroy(cuda_worker *wk) {
  if (wk->start) cudaEventDestroy(wk->start);
  if (wk->stop) cudaEventDestroy(wk->stop);
  if (wk->stream) cudaStreamDestroy(wk->stream);
  if (wk->lt) cublasLtDestroy(wk->lt);
  memset(wk, 0, sizeof *wk);
  (void)cudaGetLastError();
}

static precis_status worker_init(cuda_ctx *ctx, int index, cuda_worker *wk) {
  precis_status st = PRECIS_OK;
  memset(wk, 0, sizeof *wk);
  wk->index = index;
  PRECIS_TRY(cuda, cudaSetDevice(ctx->device));
  cublasStatus_t lt_status = cublasLtCreate(&wk->lt);
  if (lt_status != CUBLAS_STATUS_SUCCESS) {
    wk->lt = NULL;
    st = precis_fail(PRECIS_E_NO_DEVICE, "cuBLASLt cannot be used on device %d (%s): cublasLtCreate returned %s (%s)",
                     ctx->device, ctx->name, cublasLtGetStatusName(lt_status), cublasLtGetStatusString(lt_status));
    goto done;
  }
  PRECIS_TRY(cuda, cudaStreamCreateWithFlags(&wk->stream, cudaStreamNonBlocking));
  PRECIS_TRY(cuda, cudaEventCreate(&wk->start));
  PRECIS_TRY(cuda, cudaEventCreate(&wk->stop));
done:
  if (st != PRECIS_OK) worker_destroy(wk);
  return st;
}

static precis_status cuda_worker_open(void *vctx, int index, void **out) {
  cuda_ctx *ctx = vctx;
  *out = NULL;
  cuda_worker *wk = calloc(1, sizeof *wk);
  if (!wk) return precis_fail(PRECIS_E_NOMEM, "out of host memory opening cuda worker %d", index);
  precis_status st = worker_init(ctx, index, wk);
  if (st != PRECIS_OK) {
    free(wk);
    return st;
  }
  *out = wk;
  return PRECIS_OK;
}

static void cuda_worker_close(void *vctx, void *worker) {
  (void)vctx;
  if (!worker) return;
  worker_destroy(worker);
  free(worker);
}

static void cuda_close(void *vctx) {
  cuda_ctx *ctx = vctx;
  if (!ctx) return;
  worker_destroy(&ctx->main);
  if (ctx->probe_mutex_ready) pthread_mutex_destroy(&ctx->probe_mutex);
  precis_nvml_close(ctx->nvml);
  (void)cudaGetLastError();
  free(ctx);
}

static precis_status cuda_open(void **out, const precis_case_options *options) {
  precis_status st = PRECIS_OK;
  *out = NULL;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return precis_fail(PRECIS_E_NO_DEVICE, "no usable CUDA device: cudaGetDeviceCount failed with %s (%s)",
                       cudaGetErrorName(err), cudaGetErrorString(err));
  }
  if (count == 0)
    return precis_fail(PRECIS_E_NO_DEVICE, "no usable CUDA device: cudaGetDeviceCount found none (cudaErrorNoDevice)");
  cuda_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return precis_fail(PRECIS_E_NOMEM, "out of host memory opening the cuda backend");
  /* An ordinal among the devices CUDA_VISIBLE_DEVICES shows (run --devices, MPI ranks). */
  ctx->device = options ? options->device : 0;
  if (ctx->device < 0 || ctx->device >= count) {
    free(ctx);
    return precis_fail(PRECIS_E_NO_DEVICE, "no CUDA device %d: this process sees %d (ordinals 0 to %d)",
                       options ? options->device : 0, count, count - 1);
  }
  err = cudaSetDevice(ctx->device);
  if (err == cudaSuccess) err = cudaFree(NULL); /* creates the primary context now, not in the first case */
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    st = precis_fail(PRECIS_E_NO_DEVICE, "no usable CUDA device: creating a context on device %d failed with %s (%s)",
                     ctx->device, cudaGetErrorName(err), cudaGetErrorString(err));
    goto done;
  }
  struct cudaDeviceProp prop;
  PRECIS_TRY(cuda, cudaGetDeviceProperties(&prop, ctx->device));
  snprintf(ctx->name, sizeof ctx->name, "%s", prop.name);
  ctx->cc_major = prop.major;
  ctx->cc_minor = prop.minor;
  ctx->sm_count = prop.multiProcessorCount;
  ctx->mem_total = (long long)prop.totalGlobalMem;
  ctx->l2_bytes = prop.l2CacheSize;
  if (cudaDeviceGetAttribute(&ctx->clock_khz, cudaDevAttrClockRate, ctx->device) != cudaSuccess) ctx->clock_khz = 0;
  if (cudaDeviceGetAttribute(&ctx->mem_clock_khz, cudaDevAttrMemoryClockRate, ctx->device) != cudaSuccess)
    ctx->mem_clock_khz = 0;
  (void)cudaGetLastError();
  ctx->lt_version = (int)cublasLtGetVersion();
  if (pthread_mutex_init(&ctx->probe_mutex, NULL) != 0) {
    st = precis_fail(PRECIS_E_RUNTIME, "cuda backend: cannot create the capability cache's lock");
    goto done;
  }
  ctx->probe_mutex_ready = true;
  st = worker_init(ctx, -1, &ctx->main);
  if (st != PRECIS_OK) goto done;
  ctx->nvml = precis_nvml_open(ctx->device, ctx->nvml_why, sizeof ctx->nvml_why);
  ctx->baseline_after_open = precis_device_used_bytes();
done:
  if (st != PRECIS_OK) {
    if (st == PRECIS_E_RUNTIME) st = PRECIS_E_NO_DEVICE; /* the device answered but cannot be used */
    cuda_close(ctx);
    return st;
  }
  *out = ctx;
  return PRECIS_OK;
}

static void set_version(precis_kv_list *env, const char *key, int v) {
  /* CUDA encodes 13.0 as 13000 (major*1000 + minor*10). */
  char buf[32];
  if (v <= 0) {
    precis_kv_set(env, key, NULL);
    return;
  }
  snprintf(buf, sizeof buf, "%d.%d", v / 1000, (v % 1000) / 10);
  precis_kv_set(env, key, buf);
}

static void cuda_environment(void *vctx, precis_kv_list *env) {
  cuda_ctx *ctx = vctx;
  char buf[128];
  precis_kv_set(env, "backend", "cuda");
  precis_kv_set(env, "device", ctx->name);
  precis_kv_set_int(env, "device_ordinal", ctx->device);
  snprintf(buf, sizeof buf, "%d.%d", ctx->cc_major, ctx->cc_minor);
  precis_kv_set(env, "compute_capability", buf);
  precis_kv_set_int(env, "sm_count", ctx->sm_count);
  precis_kv_set_int(env, "device_memory_bytes", ctx->mem_total);
  precis_kv_set_int(env, "l2_cache_bytes", ctx->l2_bytes);
  int v = 0;
  set_version(env, "cuda_driver", cudaDriverGetVersion(&v) == cudaSuccess ? v : 0);
  v = 0;
  set_version(env, "cuda_runtime", cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0);
  if (precis_nvml_driver_version(ctx->nvml, buf, sizeof buf))
    precis_kv_set(env, "driver_version", buf);
  else
    precis_kv_set(env, "driver_version", NULL);
  int major = 0, minor = 0, patch = 0;
  if (cublasLtGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasLtGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasLtGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    snprintf(buf, sizeof buf, "%d.%d.%d", major, minor, patch);
    precis_kv_set(env, "cublaslt_version", buf);
  } else {
    precis_kv_set(env, "cublaslt_version", NULL);
  }
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    snprintf(buf, sizeof buf, "%d.%d.%d", major, minor, patch);
    precis_kv_set(env, "cublas_version", buf);
  } else {
    precis_kv_set(env, "cublas_version", NULL);
  }
  if (ctx->clock_khz > 0)
    precis_kv_set_int(env, "sm_clock_peak_mhz", ctx->clock_khz / 1000);
  else
    precis_kv_set(env, "sm_clock_peak_mhz", NULL);
  if (ctx->mem_clock_khz > 0)
    precis_kv_set_int(env, "memory_clock_peak_mhz", ctx->mem_clock_khz / 1000);
  else
    precis_kv_set(env, "memory_clock_peak_mhz", NULL);
  unsigned mhz = 0;
  if (precis_nvml_sm_clock_mhz(ctx->nvml, &mhz))
    precis_kv_set_int(env, "sm_clock_mhz", mhz);
  else
    precis_kv_set(env, "sm_clock_mhz", NULL);
  if (precis_nvml_max_sm_clock_mhz(ctx->nvml, &mhz))
    precis_kv_set_int(env, "sm_clock_max_mhz", mhz);
  else
    precis_kv_set(env, "sm_clock_max_mhz", NULL);
  precis_kv_set(env, "nvml", ctx->nvml ? "available" : ctx->nvml_why);
  if (ctx->baseline_after_open >= 0)
    precis_kv_set_int(env, "device_baseline_after_open_bytes", ctx->baseline_after_open);
  precis_kv_set_int(env, "cublaslt_workspace_bytes", (long long)PRECIS_LT_WORKSPACE_BYTES);
  precis_kv_set(env, "timing", "CUDA events; DESIGN §6 warm-up and stopping rule");
}

static const precis_backend cuda_backend = {
    .name = "cuda",
    .label = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .environment = cuda_environment,
    .supports = cuda_supports,
    .run_case = cuda_run_case,
    .worker_open = cuda_worker_open,
    .worker_close = cuda_worker_close,
};

const precis_backend *precis_backend_cuda(void) { return &cuda_backend; }
