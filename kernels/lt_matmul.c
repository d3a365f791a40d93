#include "kernels/lt_matmul.h"

#include <cublas_api.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_check.h"

/* src/ carries cuBLAS enum values as plain integers: they must be the real ones. */
#define SAME_VALUE(ours, theirs) ((int)(ours) == (int)(theirs))
_Static_assert(SAME_VALUE(PRECIS_LT_OP_N, CUBLAS_OP_N) && SAME_VALUE(PRECIS_LT_OP_T, CUBLAS_OP_T),
               "cublasOperation_t values");
_Static_assert(SAME_VALUE(PRECIS_LT_COMPUTE_16F, CUBLAS_COMPUTE_16F) && SAME_VALUE(PRECIS_LT_COMPUTE_32F, CUBLAS_COMPUTE_32F) &&
                   SAME_VALUE(PRECIS_LT_COMPUTE_32I, CUBLAS_COMPUTE_32I) &&
                   SAME_VALUE(PRECIS_LT_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_TF32),
               "cublasComputeType_t values");
_Static_assert(SAME_VALUE(PRECIS_CUDA_R_32F, CUDA_R_32F) && SAME_VALUE(PRECIS_CUDA_R_64F, CUDA_R_64F) &&
                   SAME_VALUE(PRECIS_CUDA_R_16F, CUDA_R_16F) && SAME_VALUE(PRECIS_CUDA_R_8I, CUDA_R_8I) &&
                   SAME_VALUE(PRECIS_CUDA_R_32I, CUDA_R_32I) && SAME_VALUE(PRECIS_CUDA_R_16BF, CUDA_R_16BF) &&
                   SAME_VALUE(PRECIS_CUDA_R_8F_E4M3, CUDA_R_8F_E4M3) && SAME_VALUE(PRECIS_CUDA_R_8F_E5M2, CUDA_R_8F_E5M2),
               "cudaDataType_t values");
_Static_assert(CUDA_R_4F_E2M1 == 33, "gemm_plan.c's fp4 type value");
_Static_assert(SAME_VALUE(PRECIS_LT_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) &&
                   SAME_VALUE(PRECIS_LT_SCALE_VEC16_UE4M3, CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3) &&
                   SAME_VALUE(PRECIS_LT_SCALE_VEC32_UE8M0, CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) &&
                   SAME_VALUE(PRECIS_LT_SCALE_OUTER_VEC_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) &&
                   SAME_VALUE(PRECIS_LT_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) &&
                   SAME_VALUE(PRECIS_LT_SCALE_BLK128X128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F),
               "cublasLtMatmulMatrixScale_t values");
_Static_assert(SAME_VALUE(PRECIS_LT_COMPUTE_64F, CUBLAS_COMPUTE_64F), "cublasComputeType_t 64F");
_Static_assert(SAME_VALUE(PRECIS_LT_REDUCTION_NONE, CUBLASLT_REDUCTION_SCHEME_NONE) &&
                   SAME_VALUE(PRECIS_LT_REDUCTION_INPLACE, CUBLASLT_REDUCTION_SCHEME_INPLACE) &&
                   SAME_VALUE(PRECIS_LT_REDUCTION_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) &&
                   SAME_VALUE(PRECIS_LT_REDUCTION_OUTPUT_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) &&
                   SAME_VALUE(PRECIS_LT_REDUCTION_ANY, CUBLASLT_REDUCTION_SCHEME_MASK),
               "cublasLtReductionScheme_t values");
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 130100
_Static_assert(SAME_VALUE(PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT, CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT),
               "cublasComputeType_t 64F emulated");
#endif

static long long algo_attr(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, bool *ok);

static precis_status make_layout(cublasLtMatrixLayout_t *out, const precis_lt_matrix *m) {
  precis_status st = PRECIS_OK;
  PRECIS_TRY(cublas, cublasLtMatrixLayoutCreate(out, (cudaDataType_t)m->data_type, (uint64_t)m->rows,
                                                (uint64_t)m->cols, (int64_t)m->ld));
  if (m->batch_count > 1) {
    int32_t count = m->batch_count;
    int64_t stride = m->batch_stride;
    PRECIS_TRY(cublas, cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    PRECIS_TRY(cublas, cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof stride));
  }
done:
  return st;
}

precis_status precis_lt_call_init(precis_lt_call *call, const precis_gemm_plan *plan, const void *A_lt, const void *B_lt,
                                  void *D, const float *d_scale_a_slot, const float *d_scale_b_slot, void *workspace,
                                  size_t workspace_bytes) {
  precis_status st = PRECIS_OK;
  memset(call, 0, sizeof *call);
  call->plan = plan;
  call->A = A_lt;
  call->B = B_lt;
  call->D = D;
  call->workspace = workspace;
  call->workspace_bytes = workspace_bytes;
  /* What cuBLASLt would reject only at call time (int8 alpha/beta, scale pointers on non-narrow
   * operands) is refused here, with the reason. */
  st = precis_gemm_plan_check(plan);
  if (st != PRECIS_OK) return st;
  if ((d_scale_a_slot && plan->lt_a_scale == PRECIS_PLAN_NONE) || (d_scale_b_slot && plan->lt_b_scale == PRECIS_PLAN_NONE))
    return precis_fail(PRECIS_E_UNSUPPORTED, "cuBLASLt call for %s: a scale pointer for an operand that takes none",
                       plan->route ? plan->route->name : "?");
  switch (plan->scale_type) {
  case PRECIS_CUDA_R_16F:
    /* alpha and beta are 0 or 1 (the plan's), exact in binary16 */
    call->alpha.f16_bits = plan->alpha == 1.0 ? 0x3c00 : 0x0000;
    call->beta.f16_bits = plan->beta == 1.0 ? 0x3c00 : 0x0000;
    break;
  case PRECIS_CUDA_R_32I:
    call->alpha.i32 = (int32_t)plan->alpha;
    call->beta.i32 = (int32_t)plan->beta;
    break;
  case PRECIS_CUDA_R_64F:
    call->alpha.f64 = plan->alpha;
    call->beta.f64 = plan->beta;
    break;
  default:
    call->alpha.f32 = (float)plan->alpha;
    call->beta.f32 = (float)plan->beta;
    break;
  }
  cublasOperation_t transa = (cublasOperation_t)plan->transa, transb = (cublasOperation_t)plan->transb;
  PRECIS_TRY(cublas, cublasLtMatmulDescCreate(&call->desc, (cublasComputeType_t)plan->compute_type,
                                              (cudaDataType_t)plan->scale_type));
  PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa));
  PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb));
  if (d_scale_a_slot)
    PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &d_scale_a_slot,
                                                      sizeof d_scale_a_slot));
  if (d_scale_b_slot)
    PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &d_scale_b_slot,
                                                      sizeof d_scale_b_slot));
  /* Scale tensors (issue 16): the mode says how cuBLASLt reads the scale pointer; SCALAR_32F is
   * the default and stays unset, as before. */
  const precis_lt_scale_tensor *modes[2] = {&plan->lt_a_scales, &plan->lt_b_scales};
  const cublasLtMatmulDescAttributes_t mode_attrs[2] = {CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                        CUBLASLT_MATMUL_DESC_B_SCALE_MODE};
  for (int i = 0; i < 2; i++)
    if (modes[i]->mode > PRECIS_LT_SCALE_SCALAR_32F) {
      int32_t mode = modes[i]->mode;
      PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, mode_attrs[i], &mode, sizeof mode));
    }
  if (plan->fast_accum) {
    int8_t fast = 1; /* cublasLt.h: int8_t, default 0 */
    PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }
  /* The layouts of one call (the whole GEMM unless the plan splits it; C is D's buffer). */
  st = make_layout(&call->a, &plan->call_a);
  if (st == PRECIS_OK) st = make_layout(&call->b, &plan->call_b);
  if (st == PRECIS_OK) st = make_layout(&call->c, plan->c_separate ? &plan->lt_c : &plan->call_d);
  if (st == PRECIS_OK) st = make_layout(&call->d, &plan->call_d);
  if (st != PRECIS_OK) goto done;
  PRECIS_TRY(cublas, cublasLtMatmulPreferenceCreate(&call->preference));
  uint64_t limit = workspace_bytes;
  PRECIS_TRY(cublas, cublasLtMatmulPreferenceSetAttribute(call->preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &limit, sizeof limit));
  /* Split-K reductions in the compute type when D is narrower (gemm_plan.h); the default (all
   * schemes) is left unset otherwise. */
  if (plan->reduction_scheme_mask != PRECIS_LT_REDUCTION_ANY) {
    uint32_t mask = plan->reduction_scheme_mask;
    PRECIS_TRY(cublas, cublasLtMatmulPreferenceSetAttribute(call->preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                            &mask, sizeof mask));
  }
  if (plan->call_align_bytes < 256) {
    /* Split calls start inside the buffers: only algorithms that accept that alignment. */
    uint32_t align = (uint32_t)plan->call_align_bytes;
    const cublasLtMatmulPreferenceAttributes_t prefs[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < sizeof prefs / sizeof prefs[0]; i++)
      PRECIS_TRY(cublas, cublasLtMatmulPreferenceSetAttribute(call->preference, prefs[i], &align, sizeof align));
  }
done:
  if (st != PRECIS_OK) precis_lt_call_destroy(call);
  return st;
}

precis_status precis_lt_call_set_fp8_output(precis_lt_call *call, void *C, const float *d_scale_d, float *d_amax_d) {
  precis_status st = PRECIS_OK;
  const precis_gemm_plan *plan = call->plan;
  if (!plan->d_scaled)
    return precis_fail(PRECIS_E_UNSUPPORTED, "cuBLASLt call for %s: scale_D/amax_D on an output that takes none",
                       plan->route ? plan->route->name : "?");
  call->C = C;
  PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &d_scale_d,
                                                    sizeof d_scale_d));
  PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &d_amax_d,
                                                    sizeof d_amax_d));
done:
  return st;
}

precis_status precis_lt_call_set_emulation(precis_lt_call *call, int *d_mantissa_bits) {
  precis_status st = PRECIS_OK;
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 130100
  cublasLtEmulationDesc_t emu = NULL;
  PRECIS_TRY(cublas, cublasLtEmulationDescCreate(&emu));
  call->emulation = emu;
  int32_t strategy = CUBLAS_EMULATION_STRATEGY_EAGER;
  PRECIS_TRY(cublas, cublasLtEmulationDescSetAttribute(emu, CUBLASLT_EMULATION_DESC_STRATEGY, &strategy, sizeof strategy));
  PRECIS_TRY(cublas, cublasLtEmulationDescSetAttribute(emu, CUBLASLT_EMULATION_DESC_FIXEDPOINT_MANTISSA_BIT_COUNT_POINTER,
                                                       &d_mantissa_bits, sizeof d_mantissa_bits));
  PRECIS_TRY(cublas, cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, &emu,
                                                    sizeof emu));
done:
#else
  (void)call;
  (void)d_mantissa_bits;
  st = precis_fail(PRECIS_E_UNSUPPORTED, "precis was built against cuBLAS %d, before FP64 emulation (13.1)",
                   (int)CUBLAS_VERSION);
#endif
  return st;
}

void precis_lt_call_destroy(precis_lt_call *call) {
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 130100
  if (call->emulation) cublasLtEmulationDescDestroy((cublasLtEmulationDesc_t)call->emulation);
#endif
  call->emulation = NULL;
  if (call->preference) cublasLtMatmulPreferenceDestroy(call->preference);
  if (call->d) cublasLtMatrixLayoutDestroy(call->d);
  if (call->c) cublasLtMatrixLayoutDestroy(call->c);
  if (call->b) cublasLtMatrixLayoutDestroy(call->b);
  if (call->a) cublasLtMatrixLayoutDestroy(call->a);
  if (call->desc) cublasLtMatmulDescDestroy(call->desc);
  call->preference = NULL;
  call->a = call->b = call->c = call->d = NULL;
  call->desc = NULL;
}

precis_status precis_lt_call_candidates(precis_lt_call *call, cublasLtHandle_t handle, int max,
                                        cublasLtMatmulHeuristicResult_t *results, int *count) {
  *count = 0;
  if (max < 1) max = 1;
  if (max > PRECIS_LT_MAX_CANDIDATES) max = PRECIS_LT_MAX_CANDIDATES;
  const precis_gemm_plan *p = call->plan;
  cublasLtMatmulHeuristicResult_t found[PRECIS_LT_MAX_CANDIDATES];
  memset(found, 0, sizeof found);
  int returned = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, call->desc, call->a, call->b, call->c, call->d,
                                                         call->preference, max, found, &returned);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0)
    return precis_fail(PRECIS_E_UNSUPPORTED,
                       "cuBLASLt has no algorithm for %s (%s, m=%lld n=%lld k=%lld batch %d, workspace <= %zu bytes): "
                       "cublasLtMatmulAlgoGetHeuristic returned %s (%s) with %d candidates",
                       p->route->name, p->tn ? "TN" : "NN", (long long)p->lt_m, (long long)p->lt_n, (long long)p->lt_k,
                       (int)p->lt_d.batch_count, call->workspace_bytes, cublasLtGetStatusName(status),
                       cublasLtGetStatusString(status), returned);
  /* The mask is cuBLASLt's filter; a candidate that still reduces in the output type would change
   * the numbers the row reports, so it is dropped here too (and counted in the message). */
  int wrong_reduction = 0;
  for (int i = 0; i < returned; i++) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    bool ok = false;
    long long scheme = algo_attr(&found[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &ok);
    if (ok && !precis_gemm_plan_reduction_allowed(p, (int)scheme)) {
      wrong_reduction++;
      continue;
    }
    results[(*count)++] = found[i];
  }
  if (*count == 0)
    return precis_fail(PRECIS_E_UNSUPPORTED,
                       "cuBLASLt returned %d candidates for %s, none usable (first state %s; %d with a reduction scheme "
                       "outside the mask 0x%x)",
                       returned, p->route->name, cublasLtGetStatusName(found[0].state), wrong_reduction,
                       (unsigned)p->reduction_scheme_mask);
  return PRECIS_OK;
}

cublasStatus_t precis_lt_call_run(const precis_lt_call *call, cublasLtHandle_t handle, const cublasLtMatmulAlgo_t *algo,
                                  cudaStream_t stream) {
  /* beta = 0 and C is D's buffer: cuBLASLt does not read C. A split plan is several calls of the
   * same descriptors at the plan's offsets. */
  const precis_gemm_plan *p = call->plan;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  for (int64_t c = 0; c < p->lt_calls && status == CUBLAS_STATUS_SUCCESS; c++) {
    int64_t a_off = 0, b_off = 0, d_off = 0;
    precis_gemm_plan_call_offsets(p, c, &a_off, &b_off, &d_off);
    const char *A = (const char *)call->A + a_off * (int64_t)p->lt_a.elem_bytes;
    const char *B = (const char *)call->B + b_off * (int64_t)p->lt_b.elem_bytes;
    char *D = (char *)call->D + d_off * (int64_t)p->lt_d.elem_bytes;
    void *C = call->C ? (char *)call->C + d_off * (int64_t)p->lt_c.elem_bytes : D;
    status = cublasLtMatmul(handle, call->desc, &call->alpha, A, call->a, B, call->b, &call->beta, C, call->c, D,
                            call->d, algo, call->workspace, call->workspace_bytes, stream);
  }
  return status;
}

static long long algo_attr(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, bool *ok) {
  /* Every attribute read here is 4 bytes (int32_t or uint32_t); the size must match exactly. */
  uint32_t value = 0;
  size_t written = 0;
  *ok = cublasLtMatmulAlgoConfigGetAttribute(algo, attr, &value, sizeof value, &written) == CUBLAS_STATUS_SUCCESS &&
        written == sizeof value;
  return (long long)(int32_t)value;
}

void precis_lt_algo_describe(const cublasLtMatmulHeuristicResult_t *result, size_t workspace_limit,
                             precis_kv_list *details) {
  static const struct {
    const char *key;
    cublasLtMatmulAlgoConfigAttributes_t attr;
  } attrs[] = {
      {"algo_id", CUBLASLT_ALGO_CONFIG_ID},
      {"algo_tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
      {"algo_stages", CUBLASLT_ALGO_CONFIG_STAGES_ID},
      {"algo_splitk", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
      {"algo_reduction_scheme", CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME},
      {"algo_swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING},
      {"algo_custom_option", CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    bool ok = false;
    long long v = algo_attr(&result->algo, attrs[i].attr, &ok);
    if (ok)
      precis_kv_set_int(details, attrs[i].key, v);
    else
      precis_kv_set(details, attrs[i].key, NULL);
  }
  /* The chosen reduction by name, with its split: what adds the partial sums of k. */
  bool ok_scheme = false, ok_split = false;
  long long scheme = algo_attr(&result->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &ok_scheme);
  long long splitk = algo_attr(&result->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &ok_split);
  if (ok_scheme) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s (split-K %lld)", precis_lt_reduction_scheme_name((int)scheme), ok_split ? splitk : -1);
    precis_kv_set(details, "algo_reduction", buf);
  } else {
    precis_kv_set(details, "algo_reduction", NULL);
  }
  precis_kv_set_int(details, "workspace_bytes", (long long)result->workspaceSize);
  precis_kv_set_int(details, "workspace_limit_bytes", (long long)workspace_limit);
  precis_kv_set_number(details, "algo_waves", result->wavesCount);
}

void precis_lt_algo_summary(const cublasLtMatmulAlgo_t *algo, char *buf, size_t len) {
  bool ok[5];
  long long id = algo_attr(algo, CUBLASLT_ALGO_CONFIG_ID, &ok[0]);
  long long tile = algo_attr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &ok[1]);
  long long stages = algo_attr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &ok[2]);
  long long splitk = algo_attr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &ok[3]);
  long long red = algo_attr(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &ok[4]);
  snprintf(buf, len, "algo %lld tile %lld stages %lld splitK %lld reduction %lld", id, tile, stages, splitk, red);
}
