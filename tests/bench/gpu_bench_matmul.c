/* precis's measurement of a GEMM against a plain cublasLtMatmul loop with the same algorithm, side by
 * side in one process: fp32, tf32, fp16, bf16, int8 and fp8 at 4096^3 and 8192^3 by default.
 * The ratio plain/precis says whether precis's timing (CUDA events, warm-up, stopping rule) reports
 * what the hardware does; the goal is 0.99 <= ratio <= 1/0.99, both sides: a precis time shorter than
 * the plain loop's means precis under-measures. Both sides have the same sample structure (warm-up
 * rule, number of samples, calls per sample, device delay before each sample's start event). Prints
 * TFLOPS. Exits 77 without a device.
 *
 * Interleaved (issue 27, bench/bench_interleave.h): each row is --rounds rounds (default 8) in ABBA
 * order, a round being one precis measurement (run_case) and one plain-loop measurement of the
 * same samples x calls; the ratio is that of the means of each side's round medians (at least 50
 * samples a side), so that a linear drift of clocks or temperature cancels.
 *
 * The verdict (bench/bench_verdict.h) is computed from the measured ratios and is never "met" when a
 * row was skipped (unsupported, failed, or not measured by the plain loop). Exit status: 0 met,
 * 1 not met or nothing measured, 2 usage, 77 only when the machine has no CUDA device
 * (tests/gpu/gpu_probe.h); --report-only exits 0 on unmet ratios (skipped rows still exit 1).
 *
 *   gpu_bench_matmul [--sizes 4096,8192] [--recipes fp32,tf32,fp16,bf16,int8,fp8] [--rounds 8 (a multiple of 4)] [--report-only] */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "bench/bench_interleave.h"
#include "bench/bench_verdict.h"
#include "gpu/gpu_probe.h"
#include "kernels/convert.cuh"
#include "eval/gemm_plan.h"
#include "kernels/lt_matmul.h"
#include "kernels/stream_delay.h"
#include "eval/timing.h"
#include "kernels/cuda_api.h"

#define CK(stmt)                                                                                               \
  do {                                                                                                         \
    cudaError_t e_ = (stmt);                                                                                   \
    if (e_ != cudaSuccess) {                                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #stmt, cudaGetErrorString(e_));                   \
      goto done;                                                                                               \
    }                                                                                                          \
  } while (0)

/* The plain loop: the same plan, operands converted the same way, the heuristic's first algorithm
 * (what precis takes without --autotune), and the same sample structure as precis's measurement of
 * the same case (`ours`): the same warm-up rule (options), as many samples of as many calls each,
 * each sample between two events after the same device delay (kernels/stream_delay.h); the median
 * per call, added to `side` as one round. Only the code around the calls differs, so the ratio measures precis's
 * overhead, not a different experiment. Returns false when the loop could not run. */
static bool plain_loop_samples(cublasLtHandle_t lt, cudaStream_t stream, const precis_recipe *r, const float *host_a,
                               const float *host_b, long n, const precis_case_options *o, long samples, long calls,
                               bench_side *side, char *algo, size_t algo_len) {
  bool result = false;
  precis_gemm_plan plan;
  precis_lt_call call;
  bool call_ready = false;
  void *a32 = NULL, *b32 = NULL, *lt_a = NULL, *lt_b = NULL, *d = NULL, *ws = NULL;
  float *scale = NULL;
  unsigned long long *clipped = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  double *per_call = NULL;
  if (precis_gemm_plan_make_for(&r->spec, n, n, n, 1, false, (int)cublasLtGetVersion(), &plan) != PRECIS_OK) return false;
  /* The plain loop passes one per-tensor scale: the scale-tensor routes and the fp8 output (issue
   * 16) need buffers it does not build, so they have no plain-loop figure. */
  if (plan.host_quantized || plan.d_scaled) {
    snprintf(algo, algo_len, "no plain loop for %s (scale tensors or scale_D)", plan.route->name);
    return false;
  }
  size_t count = (size_t)n * (size_t)n;
  CK(cudaMalloc(&a32, count * 4));
  CK(cudaMalloc(&b32, count * 4));
  CK(cudaMalloc(&lt_a, (size_t)plan.lt_a.elements * plan.lt_a.elem_bytes));
  CK(cudaMalloc(&lt_b, (size_t)plan.lt_b.elements * plan.lt_b.elem_bytes));
  CK(cudaMalloc(&d, (size_t)plan.lt_d.elements * plan.lt_d.elem_bytes));
  CK(cudaMalloc(&ws, PRECIS_LT_WORKSPACE_BYTES));
  CK(cudaMalloc((void **)&scale, sizeof(float)));
  CK(cudaMalloc((void **)&clipped, sizeof *clipped));
  /* Every setup step on `stream`, the non-blocking stream the conversions and GEMMs run on: a
   * cudaMemset or device-to-device cudaMemcpy on the legacy default stream returns before it is done
   * and is not ordered with a non-blocking stream (nor is the DMA of a pageable cudaMemcpy), so the
   * zero-fill could land after the quantized operands and the GEMMs would time zeros. */
  float s = 1.0f / (float)precis_format_get(r->spec.a.fmt)->max_finite;
  CK(cudaMemcpyAsync(a32, host_a, count * 4, cudaMemcpyHostToDevice, stream));
  CK(cudaMemcpyAsync(b32, host_b, count * 4, cudaMemcpyHostToDevice, stream));
  CK(cudaMemsetAsync(lt_a, 0, (size_t)plan.lt_a.elements * plan.lt_a.elem_bytes, stream));
  CK(cudaMemsetAsync(lt_b, 0, (size_t)plan.lt_b.elements * plan.lt_b.elem_bytes, stream));
  CK(cudaMemcpyAsync(scale, &s, sizeof s, cudaMemcpyHostToDevice, stream));
  switch (r->spec.a.fmt) {
  case PRECIS_FMT_F32:
    CK(cudaMemcpyAsync(lt_a, b32, count * 4, cudaMemcpyDeviceToDevice, stream));
    CK(cudaMemcpyAsync(lt_b, a32, count * 4, cudaMemcpyDeviceToDevice, stream));
    break;
  case PRECIS_FMT_TF32:
    CK(precis_cuda_f32_to_tf32(b32, lt_a, count, stream));
    CK(precis_cuda_f32_to_tf32(a32, lt_b, count, stream));
    break;
  case PRECIS_FMT_F16:
    CK(precis_cuda_f32_to_f16(b32, lt_a, count, stream));
    CK(precis_cuda_f32_to_f16(a32, lt_b, count, stream));
    break;
  case PRECIS_FMT_BF16:
    CK(precis_cuda_f32_to_bf16(b32, lt_a, count, stream));
    CK(precis_cuda_f32_to_bf16(a32, lt_b, count, stream));
    break;
  case PRECIS_FMT_I8:
    CK(precis_cuda_int8_quantize(b32, (size_t)n, (size_t)n, PRECIS_CUDA_SCALE_TENSOR, scale, lt_a,
                                 (size_t)plan.write_b.ld_out, plan.write_b.transpose_out, clipped, stream));
    CK(precis_cuda_int8_quantize(a32, (size_t)n, (size_t)n, PRECIS_CUDA_SCALE_TENSOR, scale, lt_b,
                                 (size_t)plan.write_a.ld_out, false, clipped, stream));
    break;
  case PRECIS_FMT_E4M3:
    CK(precis_cuda_fp8_quantize(b32, (size_t)n, (size_t)n, scale, lt_a, (size_t)plan.write_b.ld_out,
                                plan.write_b.transpose_out, clipped, stream));
    CK(precis_cuda_fp8_quantize(a32, (size_t)n, (size_t)n, scale, lt_b, (size_t)plan.write_a.ld_out, false, clipped,
                                stream));
    break;
  default: goto done;
  }
  CK(cudaStreamSynchronize(stream));
  bool fp8 = r->spec.a.fmt == PRECIS_FMT_E4M3;
  if (precis_lt_call_init(&call, &plan, lt_a, lt_b, d, fp8 ? scale : NULL, fp8 ? scale : NULL, ws,
                          PRECIS_LT_WORKSPACE_BYTES) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    goto done;
  }
  call_ready = true;
  cublasLtMatmulHeuristicResult_t cand;
  int got = 0;
  if (precis_lt_call_candidates(&call, lt, 1, &cand, &got) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    goto done;
  }
  precis_lt_algo_summary(&cand.algo, algo, algo_len);
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  /* Warm-up as precis does it: single timed calls until warmup_calls and warmup_ms are both met. */
  double delay_us = 50, t0 = precis_now_ms();
  for (long warm = 0; !precis_warmup_done(o, warm, precis_now_ms() - t0) && warm < 1000000; warm++) {
    CK(precis_cuda_delay(delay_us, stream));
    double enqueue_start = precis_now_ms();
    CK(cudaEventRecord(e0, stream));
    if (precis_lt_call_run(&call, lt, &cand.algo, stream) != CUBLAS_STATUS_SUCCESS) goto done;
    CK(cudaEventRecord(e1, stream));
    delay_us = precis_cuda_delay_after_enqueue_us(precis_now_ms() - enqueue_start);
    CK(cudaEventSynchronize(e1));
  }
  if (samples < 1) samples = 1;
  if (calls < 1) calls = 1;
  per_call = malloc(sizeof *per_call * (size_t)samples);
  if (!per_call) goto done;
  for (long rep = 0; rep < samples; rep++) {
    CK(precis_cuda_delay(delay_us, stream));
    double enqueue_start = precis_now_ms();
    CK(cudaEventRecord(e0, stream));
    for (long i = 0; i < calls; i++)
      if (precis_lt_call_run(&call, lt, &cand.algo, stream) != CUBLAS_STATUS_SUCCESS) goto done;
    CK(cudaEventRecord(e1, stream));
    delay_us = precis_cuda_delay_after_enqueue_us(precis_now_ms() - enqueue_start);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    per_call[rep] = ms / (double)calls;
  }
  result = bench_side_add_round(side, per_call, (size_t)samples);
done:
  free(per_call);
  if (call_ready) precis_lt_call_destroy(&call);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(a32);
  cudaFree(b32);
  cudaFree(lt_a);
  cudaFree(lt_b);
  cudaFree(d);
  cudaFree(ws);
  cudaFree(scale);
  cudaFree(clipped);
  (void)cudaGetLastError();
  return result;
}

int main(int argc, char **argv) {
  bench_verdict verdict;
  bench_verdict_init(&verdict, &argc, argv);
  const char *sizes_arg = "4096,8192", *recipes_arg = "fp32,tf32,fp16,bf16,int8,fp8";
  int rounds = BENCH_DEFAULT_ROUNDS;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
      sizes_arg = argv[++i];
    else if (strcmp(argv[i], "--recipes") == 0 && i + 1 < argc)
      recipes_arg = argv[++i];
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) >= 4 && atoi(argv[i + 1]) % 4 == 0)
      rounds = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--sizes 4096,8192] [--recipes fp32,tf32,fp16,bf16,int8,fp8] [--rounds 4|8|12...] [--report-only]\n",
              argv[0]);
      return 2;
    }
  }
  /* Built only with the CUDA backend: its absence is a defect, not a skip. */
  const precis_backend *be = precis_backend_cuda();
  if (!be) {
    printf("FAIL: precis_backend_cuda() is NULL in a build with the CUDA backend\n");
    return 1;
  }
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  precis_case_options o;
  precis_case_options_default(&o);
  void *ctx = NULL;
  if (be->open(&ctx, &o) != PRECIS_OK) {
    printf("FAIL: the cuda backend does not open on a machine with a device: %s\n", precis_last_error());
    return 1;
  }
  precis_recipe_list recipes;
  if (precis_recipe_list_parse(recipes_arg, &recipes) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    return 2;
  }
  cublasLtHandle_t lt = NULL;
  cudaStream_t stream = NULL;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS || cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != 0) {
    fprintf(stderr, "cannot create a cuBLASLt handle or a stream\n");
    return 1;
  }
  precis_kv_list env = {0};
  be->environment(ctx, &env);
  printf("device: %s (sm %s), cuBLASLt %s, driver %s\n", precis_kv_get(&env, "device"),
         precis_kv_get(&env, "compute_capability"), precis_kv_get(&env, "cublaslt_version"),
         precis_kv_get(&env, "driver_version") ? precis_kv_get(&env, "driver_version") : "?");
  precis_kv_free(&env);
  printf("%6s %-6s %12s %12s %7s %10s %10s  %s\n", "size", "recipe", "precis_ms", "plain_ms", "ratio", "precis_TF",
         "plain_TF", "algorithm (precis | plain)");
  const char *p = sizes_arg;
  while (*p) {
    char *end = NULL;
    long n = strtol(p, &end, 10);
    p = end;
    if (*p == ',') p++;
    if (n <= 0) break;
    size_t count = (size_t)n * (size_t)n;
    float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float));
    if (!a || !b) {
      fprintf(stderr, "out of host memory for %ld^2\n", n);
      return 1;
    }
    unsigned long long x = 88172645463325252ULL;
    for (size_t i = 0; i < count; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      a[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
    }
    precis_workload_info info = {.name = "bench", .kind = "gemm", .description = "", .a_dist = "uniform",
                                 .b_dist = "uniform", .m = n, .n = n, .k = n, .batch = 1};
    precis_workload_data data = {.a = a, .b = b};
    double flops = 2.0 * (double)n * (double)n * (double)n;
    for (size_t r = 0; r < recipes.count; r++) {
      const precis_recipe *recipe = &recipes.items[r];
      char reason[512];
      if (!be->supports(ctx, &recipe->spec, reason, sizeof reason)) {
        printf("%6ld %-6s unsupported: %s\n", n, recipe->name, reason);
        bench_failed(&verdict);
        continue;
      }
      /* ABBA rounds of precis (A) and the plain loop (B), each side the same samples x calls per
       * round; the means of the round medians give the ratio (bench/bench_interleave.h). Round 0
       * starts with precis, so the plain loop always knows precis's calls per sample. */
      precis_case_options ro = o;
      ro.min_samples = ro.max_samples = bench_samples_per_round(rounds);
      ro.max_time_ms = 60000; /* the sample count decides, not the time budget */
      precis_case_output out;
      precis_case_output_init(&out);
      bench_side ours_side = {0}, plain_side = {0};
      char plain_algo[128] = "?";
      bool ran = true, plain_ran = true;
      long calls = 1;
      for (int round = 0; round < rounds && ran && plain_ran; round++)
        for (int turn = 0; turn < 2 && ran && plain_ran; turn++) {
          if ((turn == 0) == bench_round_a_first(round)) {
            precis_case_output_free(&out);
            precis_case_output_init(&out);
            ran = be->run_case(ctx, &recipe->spec, &info, &data, &ro, &out) == PRECIS_OK && out.status == PRECIS_ROW_OK &&
                  bench_side_add_round(&ours_side, out.time.samples_ms, out.time.n_samples_ms);
            calls = out.time.calls_per_sample > 0 ? out.time.calls_per_sample : 1;
          } else {
            plain_ran = plain_loop_samples(lt, stream, recipe, a, b, n, &o, ro.min_samples, calls, &plain_side,
                                           plain_algo, sizeof plain_algo);
          }
        }
      if (!ran) {
        printf("%6ld %-6s %s: %s\n", n, recipe->name, precis_row_status_str(out.status), out.reason);
        precis_case_output_free(&out);
        bench_side_free(&ours_side), bench_side_free(&plain_side);
        bench_failed(&verdict);
        continue;
      }
      char precis_algo[160];
      snprintf(precis_algo, sizeof precis_algo, "algo %s tile %s stages %s splitK %s reduction %s",
               precis_kv_get(&out.details, "algo_id"), precis_kv_get(&out.details, "algo_tile"),
               precis_kv_get(&out.details, "algo_stages"), precis_kv_get(&out.details, "algo_splitk"),
               precis_kv_get(&out.details, "algo_reduction_scheme"));
      size_t ours_n = ours_side.all.count, plain_n = plain_side.all.count;
      /* Fewer than 50 samples a side (or no plain loop): NAN, a missed goal, not a met one. */
      double ratio = bench_interleaved_ratio(&ours_side, &plain_side);
      double ours = bench_side_estimate(&ours_side), plain = bench_side_estimate(&plain_side);
      bool met = bench_goal(&verdict, ratio, 0.99, 1 / 0.99);
      printf("%6ld %-6s %12.5f %12.5f %7.4f %10.1f %10.1f  %s%s%s%s\n", n, recipe->name, ours, plain, ratio,
             flops / (ours * 1e-3) / 1e12, flops / (plain * 1e-3) / 1e12, precis_algo,
             strcmp(precis_algo, plain_algo) == 0 ? " | same" : " | ", strcmp(precis_algo, plain_algo) == 0 ? "" : plain_algo,
             met ? "" : "  [ratio outside 0.99..1.0101]");
      printf("       %-6s %d ABBA rounds: %zu precis and %zu plain samples (mean of round medians per call), reduction %s\n",
             "", rounds, ours_n, plain_n,
             precis_kv_get(&out.details, "algo_reduction") ? precis_kv_get(&out.details, "algo_reduction") : "null");
      bench_side_free(&ours_side), bench_side_free(&plain_side);
      printf("       %-6s samples %ld x %ld calls, p95 %.5f ms, convert %.4f ms, e2e %.5f ms, tracked %lld B, device peak "
             "%lld B, untracked %lld B, clock %s->%s MHz\n",
             "", out.time.samples, out.time.calls_per_sample, out.time.p95_ms, out.time.convert_ms, out.time.e2e_median_ms,
             out.memory.tracked_peak_bytes, out.memory.device_peak_bytes, out.memory.untracked_bytes,
             precis_kv_get(&out.details, "sm_clock_mhz_before") ? precis_kv_get(&out.details, "sm_clock_mhz_before") : "null",
             precis_kv_get(&out.details, "sm_clock_mhz_after") ? precis_kv_get(&out.details, "sm_clock_mhz_after") : "null");
      fflush(stdout);
      precis_case_output_free(&out);
    }
    free(a);
    free(b);
  }
  printf("goal 0.99 <= ratio <= 1/0.99 on every row:\n");
  cudaStreamDestroy(stream);
  cublasLtDestroy(lt);
  precis_recipe_list_free(&recipes);
  be->close(ctx);
  return bench_verdict_finish(&verdict);
}
