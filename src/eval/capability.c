/* Which spec runs on which compute capability: the route table of the cuda backend (EXAMPLES E5),
 * plain C, shared by `precis info`, `precis recipes`, `precis explain`, the GEMM plan and the cuda
 * backend, and tested on the CPU. A new cuBLASLt path is a new row. */
#include <stdio.h>
#include <string.h>

#include "cuda_api.h"
#include "gemm_plan.h"

static const precis_lt_route routes[] = {
    {.name = "fp32", .a = PRECIS_FMT_F32, .b = PRECIS_FMT_F32, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_F32,
     .compute_type = PRECIS_LT_COMPUTE_32F, .min_cc = 50, .needs = "needs sm_50 or newer"},
    {.name = "tf32", .a = PRECIS_FMT_TF32, .b = PRECIS_FMT_TF32, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_F32,
     .compute_type = PRECIS_LT_COMPUTE_32F_FAST_TF32, .min_cc = 80,
     .needs = "TF32 tensor cores need sm_80 (Ampere) or newer"},
    {.name = "fp16", .a = PRECIS_FMT_F16, .b = PRECIS_FMT_F16, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_F16,
     .compute_type = PRECIS_LT_COMPUTE_32F, .min_cc = 70, .needs = "FP16 tensor cores need sm_70 (Volta) or newer"},
    {.name = "fp16acc16", .a = PRECIS_FMT_F16, .b = PRECIS_FMT_F16, .acc = PRECIS_FMT_F16, .out = PRECIS_FMT_F16,
     .compute_type = PRECIS_LT_COMPUTE_16F, .min_cc = 70, .needs = "FP16 tensor cores need sm_70 (Volta) or newer"},
    {.name = "bf16", .a = PRECIS_FMT_BF16, .b = PRECIS_FMT_BF16, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16,
     .compute_type = PRECIS_LT_COMPUTE_32F, .min_cc = 80, .needs = "BF16 needs sm_80 (Ampere) or newer"},
    {.name = "int8", .a = PRECIS_FMT_I8, .b = PRECIS_FMT_I8, .a_gran = PRECIS_GRAN_ROW, .b_gran = PRECIS_GRAN_COL,
     .a_static_ok = true, .acc = PRECIS_FMT_I32, .out = PRECIS_FMT_F32, .compute_type = PRECIS_LT_COMPUTE_32I,
     .scaling = PRECIS_LT_SCALING_DEQUANT, .min_cc = 75,
     .needs = "cuBLASLt INT8 IMMA needs sm_75 (Turing) or newer"},
    {.name = "fp8", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_TENSOR,
     .b_gran = PRECIS_GRAN_TENSOR, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_TENSOR_POINTERS, .min_cc = 89, .min_cublaslt = 111100,
     .needs = "FP8 (e4m3) matmul needs sm_89 (Ada) or sm_90 (Hopper) or newer"},
};
_Static_assert(sizeof routes / sizeof routes[0] == PRECIS_LT_ROUTE_COUNT, "PRECIS_LT_ROUTE_COUNT is the table's size");

const precis_lt_route *precis_lt_route_at(size_t index) { return index < PRECIS_LT_ROUTE_COUNT ? &routes[index] : NULL; }

size_t precis_lt_route_index(const precis_lt_route *route) { return (size_t)(route - routes); }

static bool operand_matches(const precis_operand_spec *op, precis_format_id fmt, precis_gran gran) {
  return op->fmt == fmt && op->gran == gran && (!precis_operand_is_integer(op) || op->conv == PRECIS_QCONV_SYM);
}

static bool route_matches(const precis_lt_route *r, const precis_spec *s) {
  bool a_ok = s->scale == PRECIS_SCALE_DYNAMIC ? operand_matches(&s->a, r->a, r->a_gran)
                                               : r->a_static_ok && operand_matches(&s->a, r->a, PRECIS_GRAN_TENSOR);
  return a_ok && operand_matches(&s->b, r->b, r->b_gran) && s->acc == r->acc && s->out == r->out;
}

/* The first field that keeps a spec off every route, for the reason of an `unsupported` row. */
static void why_no_route(const precis_spec *s, char *why, size_t len) {
  char a[48], b[48];
  precis_operand_format(&s->a, a, sizeof a);
  precis_operand_format(&s->b, b, sizeof b);
  if (s->split != PRECIS_SPLIT_NONE)
    snprintf(why, len,
             "split=%s%.0d: not yet implemented on the cuda backend (issue 19): the split terms would run as "
             "separate cuBLASLt GEMMs; run it on the cpu backend",
             precis_split_name(s->split), s->split == PRECIS_SPLIT_INT8XN ? s->split_terms : 0);
  else if (precis_spec_smooths(s))
    snprintf(why, len, "smooth: SmoothQuant is not yet implemented on the cuda backend (issue 16)");
  else if (s->a.fmt == PRECIS_FMT_F64 || s->b.fmt == PRECIS_FMT_F64 || s->acc == PRECIS_FMT_F64 ||
           s->out == PRECIS_FMT_F64)
    snprintf(why, len, "fp64: not yet implemented on the cuda backend (issue 19): cuBLASLt CUDA_R_64F with "
                       "CUBLAS_COMPUTE_64F has no route in precis yet; run it on the cpu backend");
  else
    snprintf(why, len, "a=%s,b=%s,acc=%s,out=%s: no cuBLASLt route in precis yet (issue 16); routes: the presets "
                       "fp32, tf32, fp16, fp16acc16, bf16, int8, fp8",
             a, b, precis_format_get(s->acc)->name, precis_format_get(s->out)->name);
}

const precis_lt_route *precis_lt_route_find(const precis_spec *spec, char *why, size_t len) {
  if (spec->split == PRECIS_SPLIT_NONE && !precis_spec_smooths(spec))
    for (size_t i = 0; i < PRECIS_LT_ROUTE_COUNT; i++)
      if (route_matches(&routes[i], spec)) {
        if (why && len) why[0] = '\0';
        return &routes[i];
      }
  if (why && len) why_no_route(spec, why, len);
  return NULL;
}

bool precis_cuda_spec_supported(const precis_spec *spec, int cc_major, int cc_minor, char *reason, size_t len) {
  const precis_lt_route *route = precis_lt_route_find(spec, reason, len);
  if (!route) return false;
  if (cc_major * 10 + cc_minor >= route->min_cc) return true;
  if (reason && len) snprintf(reason, len, "%s; device is sm_%d%d", route->needs, cc_major, cc_minor);
  return false;
}
