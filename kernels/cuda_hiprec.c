#include "kernels/cuda_hiprec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_check.h"
#include "numerics/format.h"
#include "eval/gemm_plan.h"
#include "kernels/hiprec.cuh"
#include "kernels/lt_matmul.h"
#include "eval/split_plan.h"
#include "kernels/stream_delay.h"
#include "eval/timing.h"

typedef enum hp_kind { HP_FP64, HP_FP64_EMU, HP_FLOAT_SPLIT, HP_OZAKI } hp_kind;

typedef struct hp_case {
  const precis_cuda_hiprec_env *env;
  const precis_spec *spec;
  const precis_workload_info *w;
  hp_kind kind;
  precis_gemm_plan single;      /* fp64, fp64-emu */
  precis_split_plan split;      /* float splits, Ozaki */
  precis_gemm_plan accumulate;  /* float splits: the product plan with beta = 1 */
  const precis_gemm_plan *gemm; /* the plan of every call */
  size_t a_count, b_count, c_count, b_mats;
  float *a32, *b32;
  double *a64, *b64;
  void *a_lt, *b_lt;            /* cuBLASLt's B_lt (the workload's A or its terms) and A_lt (B or its terms) */
  int *row_exps, *col_exps;
  void *d;
  double *level, *sum, *c64;
  int *mantissa_bits;
  void *workspace;
  precis_lt_call first, rest;   /* beta 0 and (float splits) beta 1 */
  bool first_ready, rest_ready;
  cublasLtMatmulAlgo_t algo_first, algo_rest;
  double delay_us;
} hp_case;

bool precis_cuda_hiprec_handles(const precis_spec *spec) {
  return spec->split != PRECIS_SPLIT_NONE ||
         (spec->a.fmt == PRECIS_FMT_F64 && spec->b.fmt == PRECIS_FMT_F64 && spec->acc == PRECIS_FMT_F64);
}

static precis_status alloc(hp_case *hc, size_t bytes, const char *what, void **out) {
  return precis_dmem_alloc(hc->env->mem, bytes, what, out);
}

static precis_status run_call(hp_case *hc, precis_lt_call *call, const cublasLtMatmulAlgo_t *algo, const void *A,
                              const void *B) {
  precis_status st = PRECIS_OK;
  call->A = A;
  call->B = B;
  PRECIS_TRY(cublas, precis_lt_call_run(call, hc->env->lt, algo, hc->env->stream));
done:
  return st;
}

/* One whole evaluation, enqueued: the splitting of both operands, every product GEMM, the combination. */
static precis_status evaluate(hp_case *hc) {
  precis_status st = PRECIS_OK;
  cudaStream_t s = hc->env->stream;
  const precis_gemm_plan *g = hc->gemm;
  const precis_split_plan *sp = &hc->split;
  switch (hc->kind) {
  case HP_FP64:
  case HP_FP64_EMU: st = run_call(hc, &hc->first, &hc->algo_first, hc->b64, hc->a64); break;
  case HP_FLOAT_SPLIT: {
    bool bf16 = hc->split.term_spec.a.fmt == PRECIS_FMT_BF16;
    size_t elem = bf16 ? 2 : 4;
    /* Terms at the plan's 256-byte strides (the float routes have no padding: elements == count). */
    PRECIS_TRY(cuda, precis_cuda_split_f32_terms(hc->a32, hc->a_count, bf16, sp->terms, (size_t)sp->lt_b_term_stride,
                                                 hc->b_lt, s));
    PRECIS_TRY(cuda, precis_cuda_split_f32_terms(hc->b32, hc->b_count, bf16, sp->terms, (size_t)sp->lt_a_term_stride,
                                                 hc->a_lt, s));
    for (int q = 0; q < sp->products && st == PRECIS_OK; q++)
      st = run_call(hc, q ? &hc->rest : &hc->first, q ? &hc->algo_rest : &hc->algo_first,
                    (const char *)hc->a_lt + (size_t)sp->term_b[q] * (size_t)sp->lt_a_term_stride * elem,
                    (const char *)hc->b_lt + (size_t)sp->term_a[q] * (size_t)sp->lt_b_term_stride * elem);
    break;
  }
  case HP_OZAKI: {
    const precis_plan_write *wa = &g->write_a, *wb = &g->write_b;
    const precis_plan_dequant *q = &g->dequant_step;
    PRECIS_TRY(cuda, precis_cuda_ozaki_row_exps(hc->a64, (size_t)(hc->w->batch * hc->w->m), (size_t)hc->w->k,
                                                hc->row_exps, s));
    PRECIS_TRY(cuda, precis_cuda_ozaki_col_exps(hc->b64, hc->b_mats, (size_t)hc->w->k, (size_t)hc->w->n, hc->col_exps, s));
    PRECIS_TRY(cuda, precis_cuda_ozaki_slices(hc->a64, (size_t)wa->calls, (size_t)wa->rows, (size_t)wa->cols,
                                              (size_t)wa->src_stride, (size_t)wa->dst_stride, (size_t)wa->ld_out,
                                              wa->transpose_out, true, hc->row_exps, (size_t)wa->scale_stride,
                                              sp->terms, (int8_t *)hc->b_lt, (size_t)sp->lt_b_term_stride, s));
    PRECIS_TRY(cuda, precis_cuda_ozaki_slices(hc->b64, (size_t)wb->calls, (size_t)wb->rows, (size_t)wb->cols,
                                              (size_t)wb->src_stride, (size_t)wb->dst_stride, (size_t)wb->ld_out,
                                              wb->transpose_out, false, hc->col_exps, (size_t)wb->scale_stride,
                                              sp->terms, (int8_t *)hc->a_lt, (size_t)sp->lt_a_term_stride, s));
    PRECIS_TRY(cuda, cudaMemsetAsync(hc->level, 0, hc->c_count * sizeof(double), s));
    PRECIS_TRY(cuda, cudaMemsetAsync(hc->sum, 0, hc->c_count * sizeof(double), s));
    for (int p = 0; p < sp->products; p++) {
      st = run_call(hc, &hc->first, &hc->algo_first,
                    (const int8_t *)hc->a_lt + (size_t)sp->term_b[p] * (size_t)sp->lt_a_term_stride,
                    (const int8_t *)hc->b_lt + (size_t)sp->term_a[p] * (size_t)sp->lt_b_term_stride);
      if (st != PRECIS_OK) goto done;
      PRECIS_TRY(cuda, precis_cuda_ozaki_accumulate((const int32_t *)hc->d, (size_t)q->calls, (size_t)q->rows,
                                                    (size_t)q->cols, (size_t)q->acc_stride, (size_t)q->ld_acc,
                                                    (size_t)q->out_stride, (size_t)q->ld_out, hc->level, s));
      if (p + 1 == sp->products || sp->level[p + 1] != sp->level[p]) /* the level is complete */
        PRECIS_TRY(cuda, precis_cuda_ozaki_fold_level(hc->level, hc->sum, hc->c_count, sp->level[p], s));
    }
    PRECIS_TRY(cuda, precis_cuda_ozaki_finish(hc->sum, (size_t)(hc->w->batch * hc->w->m), (size_t)hc->w->n,
                                              (size_t)hc->w->m, g->b_batched, hc->row_exps, hc->col_exps, hc->c64, s));
    break;
  }
  }
done:
  return st;
}

static precis_status time_evaluations(hp_case *hc, long calls, double *ms) {
  precis_status st = PRECIS_OK;
  const precis_cuda_hiprec_env *env = hc->env;
  PRECIS_TRY(cuda, precis_cuda_delay(hc->delay_us, env->stream));
  double enqueue_start = precis_now_ms();
  PRECIS_TRY(cuda, cudaEventRecord(env->start, env->stream));
  for (long i = 0; i < calls && st == PRECIS_OK; i++) st = evaluate(hc);
  if (st != PRECIS_OK) goto done;
  PRECIS_TRY(cuda, cudaEventRecord(env->stop, env->stream));
  hc->delay_us = precis_cuda_delay_after_enqueue_us(precis_now_ms() - enqueue_start);
  PRECIS_TRY(cuda, cudaEventSynchronize(env->stop));
  float elapsed = 0;
  PRECIS_TRY(cuda, cudaEventElapsedTime(&elapsed, env->start, env->stop));
  *ms = elapsed;
done:
  return st;
}

/* DESIGN §6's warm-up and stopping rule, each call one whole evaluation. */
static precis_status measure(hp_case *hc, const precis_case_options *o, precis_timing *timing) {
  precis_status st = PRECIS_OK;
  precis_sampler sampler;
  precis_sampler_init(&sampler, o);
  double t0 = precis_now_ms(), one_ms = INFINITY;
  long warm = 0;
  while (!precis_warmup_done(o, warm, precis_now_ms() - t0) && !precis_interrupt_signal && warm < 1000000) {
    double ms = 0;
    if ((st = time_evaluations(hc, 1, &ms)) != PRECIS_OK) goto done;
    one_ms = warm <= 1 ? ms : fmin(one_ms, ms);
    warm++;
  }
  long calls = precis_calls_per_sample(one_ms);
  for (bool more = true; more;) {
    double w0 = precis_now_ms(), ms = 0;
    if ((st = time_evaluations(hc, calls, &ms)) != PRECIS_OK) goto done;
    more = precis_sampler_add(&sampler, ms / (double)calls, precis_now_ms() - w0);
    if (precis_interrupt_signal) break;
  }
  st = precis_sampler_finish(&sampler, calls, timing);
done:
  precis_sampler_free(&sampler);
  return st;
}

static precis_status prepare_call(hp_case *hc, precis_lt_call *call, bool *ready, const precis_gemm_plan *plan,
                                  cublasLtMatmulAlgo_t *algo, precis_kv_list *details, const char *prefix) {
  precis_status st = precis_lt_call_init(call, plan, NULL, NULL, hc->d, NULL, NULL, hc->workspace,
                                         PRECIS_LT_WORKSPACE_BYTES);
  if (st != PRECIS_OK) return st;
  *ready = true;
  if (hc->kind == HP_FP64_EMU && (st = precis_lt_call_set_emulation(call, hc->mantissa_bits)) != PRECIS_OK) return st;
  cublasLtMatmulHeuristicResult_t cand;
  int count = 0;
  if ((st = precis_lt_call_candidates(call, hc->env->lt, 1, &cand, &count)) != PRECIS_OK) return st;
  *algo = cand.algo;
  if (prefix) {
    char summary[160];
    precis_lt_algo_summary(&cand.algo, summary, sizeof summary);
    precis_kv_set(details, prefix, summary);
  } else {
    precis_lt_algo_describe(&cand, PRECIS_LT_WORKSPACE_BYTES, details);
  }
  return PRECIS_OK;
}

static precis_status upload_f64(hp_case *hc, const double *wide, const float *narrow, size_t count, double *dst,
                                cudaStream_t s) {
  precis_status st = PRECIS_OK;
  double *tmp = NULL;
  if (!wide) { /* float32 inputs: their exact float64 values */
    if (!(tmp = malloc(count * sizeof *tmp))) return precis_fail(PRECIS_E_DOES_NOT_FIT, "host memory for a float64 copy");
    for (size_t i = 0; i < count; i++) tmp[i] = narrow[i];
    wide = tmp;
  }
  PRECIS_TRY(cuda, cudaMemcpyAsync(dst, wide, count * sizeof(double), cudaMemcpyHostToDevice, s));
  PRECIS_TRY(cuda, cudaStreamSynchronize(s)); /* tmp is freed below */
done:
  (void)hc;
  free(tmp);
  return st;
}

precis_status precis_cuda_hiprec_run(const precis_cuda_hiprec_env *env, const precis_spec *spec,
                                     const precis_workload_info *w, const precis_workload_data *data,
                                     const precis_case_options *o, precis_case_output *out) {
  precis_status st = PRECIS_OK;
  hp_case hc;
  memset(&hc, 0, sizeof hc);
  hc.env = env;
  hc.spec = spec;
  hc.w = w;
  hc.delay_us = 50;
  cudaStream_t s = env->stream;
  precis_kv_list *details = &out->details;
  double *host64 = NULL;

  if (spec->split == PRECIS_SPLIT_NONE || spec->split == PRECIS_SPLIT_CUBLAS_EMU) {
    hc.kind = spec->split == PRECIS_SPLIT_CUBLAS_EMU ? HP_FP64_EMU : HP_FP64;
    st = precis_gemm_plan_make_for(spec, w->m, w->n, w->k, w->batch, w->b_batched, env->lt_version, &hc.single);
    if (st != PRECIS_OK) goto done;
    hc.gemm = &hc.single;
    precis_gemm_plan_describe(hc.gemm, details);
    precis_plan_describe_l2(precis_gemm_plan_operand_bytes(hc.gemm), env->l2_bytes,
                            "device (cudaDeviceProp.l2CacheSize)", details);
  } else {
    st = precis_split_plan_make(spec, w->m, w->n, w->k, w->batch, w->b_batched, env->lt_version, &hc.split);
    if (st != PRECIS_OK) goto done;
    hc.kind = hc.split.ozaki ? HP_OZAKI : HP_FLOAT_SPLIT;
    hc.gemm = &hc.split.gemm;
    precis_split_plan_describe(&hc.split, details);
    precis_plan_describe_l2(precis_split_plan_operand_bytes(&hc.split), env->l2_bytes,
                            "device (cudaDeviceProp.l2CacheSize)", details);
  }
  const precis_gemm_plan *g = hc.gemm;
  hc.b_mats = g->b_batched ? (size_t)w->batch : 1;
  hc.a_count = (size_t)(w->batch * w->m * w->k);
  hc.b_count = hc.b_mats * (size_t)(w->k * w->n);
  hc.c_count = (size_t)(w->batch * w->m * w->n);
  out->memory.device_baseline_bytes = -1;

  /* Buffers and inputs. */
  st = alloc(&hc, PRECIS_LT_WORKSPACE_BYTES, "cuBLASLt workspace", &hc.workspace);
  if (st != PRECIS_OK) goto done;
  if (hc.kind == HP_FLOAT_SPLIT) {
    const int terms = hc.split.terms;
    st = alloc(&hc, hc.a_count * sizeof(float), "a (float32 input)", (void **)&hc.a32);
    if (st == PRECIS_OK) st = alloc(&hc, hc.b_count * sizeof(float), "b (float32 input)", (void **)&hc.b32);
    if (st == PRECIS_OK)
      st = alloc(&hc, (size_t)terms * (size_t)hc.split.lt_b_term_stride * g->lt_b.elem_bytes, "terms of a (cuBLASLt B)",
                 &hc.b_lt);
    if (st == PRECIS_OK)
      st = alloc(&hc, (size_t)terms * (size_t)hc.split.lt_a_term_stride * g->lt_a.elem_bytes, "terms of b (cuBLASLt A)",
                 &hc.a_lt);
    if (st == PRECIS_OK) st = alloc(&hc, (size_t)g->lt_d.elements * g->lt_d.elem_bytes, "D (float32 sum)", &hc.d);
    if (st != PRECIS_OK) goto done;
    PRECIS_TRY(cuda, cudaMemcpyAsync(hc.a32, data->a, hc.a_count * sizeof(float), cudaMemcpyHostToDevice, s));
    PRECIS_TRY(cuda, cudaMemcpyAsync(hc.b32, data->b, hc.b_count * sizeof(float), cudaMemcpyHostToDevice, s));
  } else {
    st = alloc(&hc, hc.a_count * sizeof(double), "a (float64 input)", (void **)&hc.a64);
    if (st == PRECIS_OK) st = alloc(&hc, hc.b_count * sizeof(double), "b (float64 input)", (void **)&hc.b64);
    if (st == PRECIS_OK) st = alloc(&hc, (size_t)g->lt_d.elements * g->lt_d.elem_bytes, "D", &hc.d);
    if (st != PRECIS_OK) goto done;
    if ((st = upload_f64(&hc, data->a64, data->a, hc.a_count, hc.a64, s)) != PRECIS_OK ||
        (st = upload_f64(&hc, data->b64, data->b, hc.b_count, hc.b64, s)) != PRECIS_OK)
      goto done;
    precis_kv_set(details, "inputs", data->a64 && data->b64 ? "float64 as stored (53 bits)"
                                                           : "the float32 values, exact in float64");
    if (hc.kind == HP_OZAKI) {
      const int slices = hc.split.terms;
      const size_t a_slot = (size_t)hc.split.lt_a_term_stride, b_slot = (size_t)hc.split.lt_b_term_stride;
      st = alloc(&hc, (size_t)slices * b_slot, "int8 slices of a (cuBLASLt B)", &hc.b_lt);
      if (st == PRECIS_OK) st = alloc(&hc, (size_t)slices * a_slot, "int8 slices of b (cuBLASLt A)", &hc.a_lt);
      if (st == PRECIS_OK) st = alloc(&hc, (size_t)g->row_scale_count * sizeof(int), "row exponents", (void **)&hc.row_exps);
      if (st == PRECIS_OK) st = alloc(&hc, (size_t)g->col_scale_count * sizeof(int), "column exponents", (void **)&hc.col_exps);
      if (st == PRECIS_OK) st = alloc(&hc, hc.c_count * sizeof(double), "Ozaki level sum", (void **)&hc.level);
      if (st == PRECIS_OK) st = alloc(&hc, hc.c_count * sizeof(double), "Ozaki running sum", (void **)&hc.sum);
      if (st == PRECIS_OK) st = alloc(&hc, hc.c_count * sizeof(double), "float64 output", (void **)&hc.c64);
      if (st != PRECIS_OK) goto done;
      /* The padding of the int8 layouts stays zero: the slice kernels write only the matrices. */
      PRECIS_TRY(cuda, cudaMemsetAsync(hc.b_lt, 0, (size_t)slices * b_slot, s));
      PRECIS_TRY(cuda, cudaMemsetAsync(hc.a_lt, 0, (size_t)slices * a_slot, s));
    } else if (hc.kind == HP_FP64_EMU) {
      st = alloc(&hc, sizeof(int), "emulation mantissa bit count", (void **)&hc.mantissa_bits);
      if (st != PRECIS_OK) goto done;
      PRECIS_TRY(cuda, cudaMemsetAsync(hc.mantissa_bits, 0xff, sizeof(int), s)); /* -1 until cuBLAS writes it */
    }
  }

  /* The calls: the first product with beta 0; the float splits' later ones with beta 1 (D += A_i B_j). */
  st = prepare_call(&hc, &hc.first, &hc.first_ready, g, &hc.algo_first, details, NULL);
  if (st == PRECIS_OK && hc.kind == HP_FLOAT_SPLIT && hc.split.products > 1) {
    hc.accumulate = *g;
    hc.accumulate.beta = 1.0;
    st = prepare_call(&hc, &hc.rest, &hc.rest_ready, &hc.accumulate, &hc.algo_rest, details, "algo_beta1");
  }
  if (st != PRECIS_OK) goto done;
  precis_kv_set(details, "algo_from", "cublasLtMatmulAlgoGetHeuristic, first candidate (no autotune for these recipes)");

  /* The evaluated output. */
  if ((st = evaluate(&hc)) != PRECIS_OK) goto done;
  PRECIS_TRY(cuda, cudaStreamSynchronize(s));
  if (hc.kind == HP_FP64_EMU) {
    int bits = -1;
    PRECIS_TRY(cuda, cudaMemcpy(&bits, hc.mantissa_bits, sizeof bits, cudaMemcpyDeviceToHost));
    if (bits < 0) {
      st = precis_fail(PRECIS_E_UNSUPPORTED,
                       "cuBLAS ran this GEMM in native FP64, not emulated (its mantissa-bit-count pointer reads %d) on "
                       "sm_%d%d with cuBLASLt %d: the emulation is not available here",
                       bits, env->cc_major, env->cc_minor, env->lt_version);
      goto done;
    }
    precis_kv_set_int(details, "fp64_emulation_mantissa_bits", bits);
  }
  out->c = malloc(hc.c_count * sizeof(float));
  bool wide_out = hc.kind != HP_FLOAT_SPLIT;
  if (wide_out) host64 = malloc(hc.c_count * sizeof(double));
  if (!out->c || (wide_out && !host64)) {
    st = precis_fail(PRECIS_E_DOES_NOT_FIT, "host memory: %zu bytes for the output", hc.c_count * 12);
    goto done;
  }
  if (hc.kind == HP_OZAKI) {
    PRECIS_TRY(cuda, cudaMemcpyAsync(host64, hc.c64, hc.c_count * sizeof(double), cudaMemcpyDeviceToHost, s));
  } else {
    const precis_plan_read *rd = &g->read;
    size_t elem = wide_out ? sizeof(double) : sizeof(float);
    char *dst = wide_out ? (char *)host64 : (char *)out->c;
    for (int64_t c = 0; c < rd->calls; c++)
      PRECIS_TRY(cuda, cudaMemcpy2DAsync(dst + (size_t)(c * rd->dst_stride) * elem, (size_t)rd->dst_ld * elem,
                                         (const char *)hc.d + (size_t)(c * rd->src_stride) * elem,
                                         (size_t)rd->src_ld * elem, (size_t)rd->cols * elem, (size_t)rd->rows,
                                         cudaMemcpyDeviceToHost, s));
  }
  PRECIS_TRY(cuda, cudaStreamSynchronize(s));
  if (wide_out) {
    for (size_t i = 0; i < hc.c_count; i++) out->c[i] = (float)host64[i];
    if (spec->out == PRECIS_FMT_F64) {
      out->c64 = host64;
      host64 = NULL;
    }
  }
  out->memory.tracked_peak_bytes = env->mem->peak_bytes;

  /* Latency: one whole evaluation per call. */
  st = measure(&hc, o, &out->time);
  if (st != PRECIS_OK) goto done;
  precis_kv_set(details, "timing", hc.kind == HP_FP64 || hc.kind == HP_FP64_EMU
                                       ? "CUDA events around calls_per_sample cublasLtMatmul calls"
                                       : "CUDA events around calls_per_sample whole evaluations: splitting of a and b, "
                                         "every product GEMM, the combination");
  if (o->cold) precis_kv_set(details, "cold", "not applied: the split recipes and fp64 are timed warm");

done:
  free(host64);
  if (hc.first_ready) precis_lt_call_destroy(&hc.first);
  if (hc.rest_ready) precis_lt_call_destroy(&hc.rest);
  if (out->memory.tracked_peak_bytes < 0) out->memory.tracked_peak_bytes = env->mem->peak_bytes;
  return st;
}
