/* Which spec runs on which compute capability: the route table of the cuda backend (EXAMPLES E5),
 * plain C, shared by `precis info`, `precis recipes`, `precis explain`, the GEMM plan and the cuda
 * backend, and tested on the CPU. A new cuBLASLt path is a new row. */
#include <stdio.h>
#include <string.h>

#include "capability.h"
#include "gemm_plan.h"
#include "split_plan.h"

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
    /* Issue 16: cuBLASLt's scale modes (cublasLtMatmulMatrixScale_t). OUTER_VEC_32F, VEC128_32F and
     * BLK128x128_32F came with cuBLAS 12.9 and are documented for sm_90 only (NVIDIA's answer in
     * CUDALibrarySamples issues 270 and 310); other devices answer through the capability probe. */
    {.name = "fp8-rowwise", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_ROW,
     .b_gran = PRECIS_GRAN_COL, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_OUTER_VEC, .min_cc = 90, .min_cublaslt = PRECIS_LT_VERSION_SCALE_MODES,
     .needs = "fp8 outer-vector scales (OUTER_VEC_32F) need sm_90 (Hopper) and cuBLASLt 12.9 or newer"},
    {.name = "fp8-block", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_K, .a_group = 128,
     .b_gran = PRECIS_GRAN_BLOCK, .b_block_rows = 128, .b_block_cols = 128, .acc = PRECIS_FMT_F32,
     .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F, .scaling = PRECIS_LT_SCALING_BLOCK128,
     .min_cc = 90, .min_cublaslt = PRECIS_LT_VERSION_SCALE_MODES,
     .needs = "fp8 128-block scales (VEC128_32F x BLK128x128_32F) need sm_90 (Hopper) and cuBLASLt 12.9 or newer"},
    {.name = "fp8-e4m3out", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_TENSOR,
     .b_gran = PRECIS_GRAN_TENSOR, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_E4M3, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_TENSOR_POINTERS, .d_scaled = true, .min_cc = 89, .min_cublaslt = 111100,
     .needs = "FP8 (e4m3) matmul with an e4m3 output needs sm_89 (Ada) or sm_90 (Hopper) or newer"},
    /* Issue 19: FP64 (DGEMM through cuBLASLt) and cuBLAS's own FP64 fixed-point emulation, which
     * the library offers on Blackwell and later; the backend still asks it at run time (its
     * mantissa-bit-count pointer reads -1 when it ran native FP64 instead). */
    {.name = "fp64", .a = PRECIS_FMT_F64, .b = PRECIS_FMT_F64, .acc = PRECIS_FMT_F64, .out = PRECIS_FMT_F64,
     .compute_type = PRECIS_LT_COMPUTE_64F, .min_cc = 50, .needs = "needs sm_50 or newer"},
    {.name = "fp64-emu", .a = PRECIS_FMT_F64, .b = PRECIS_FMT_F64, .acc = PRECIS_FMT_F64, .out = PRECIS_FMT_F64,
     .compute_type = PRECIS_LT_COMPUTE_64F_EMULATED_FIXEDPOINT, .min_cc = 100, .min_cublaslt = 130100,
     .split = PRECIS_SPLIT_CUBLAS_EMU,
     .needs = "cuBLAS's FP64 fixed-point emulation needs sm_100 (Blackwell) or newer"},
    /* The partial products of the bf16 splits: bf16 terms, products summed into a float32 D. */
    {.name = "bf16-f32out", .a = PRECIS_FMT_BF16, .b = PRECIS_FMT_BF16, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_F32,
     .compute_type = PRECIS_LT_COMPUTE_32F, .min_cc = 80, .needs = "BF16 needs sm_80 (Ampere) or newer"},
    /* fp8 with the k-sum left in the tensor core's accumulator: the fp8 route plus FAST_ACCUM. */
    {.name = "fp8-fast", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_TENSOR,
     .b_gran = PRECIS_GRAN_TENSOR, .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_TENSOR_POINTERS, .fast_accum = true, .min_cc = 89, .min_cublaslt = 111100,
     .needs = "FP8 (e4m3) matmul needs sm_89 (Ada) or sm_90 (Hopper) or newer"},
    /* Issue 16, Blackwell: the block-scaled MMA through cuBLASLt's VEC32_UE8M0 (MX: 32 elements
     * per E8M0 scale along k) and VEC16_UE4M3 (NVFP4: 16 per E4M3 scale, the fp32 tensor scales in
     * alpha) scale modes, TN, with the scales in the 128x4 tiled layout (gemm_plan.c). Below cc
     * 10.0 these specs are emulated (precis_lt_emulated_on). mx-rceil takes the same route (its
     * scales are E8M0 too). */
    {.name = "mxfp8", .a = PRECIS_FMT_E4M3, .b = PRECIS_FMT_E4M3, .a_gran = PRECIS_GRAN_MX, .b_gran = PRECIS_GRAN_MX,
     .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_BLOCK_SCALED, .min_cc = 100, .min_cublaslt = PRECIS_LT_VERSION_BLOCK_SCALED,
     .needs = "MXFP8 block scales (VEC32_UE8M0) need sm_100 (Blackwell) and cuBLASLt 12.8 or newer"},
    {.name = "mxfp4", .a = PRECIS_FMT_E2M1, .b = PRECIS_FMT_E2M1, .a_gran = PRECIS_GRAN_MX, .b_gran = PRECIS_GRAN_MX,
     .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_BLOCK_SCALED, .min_cc = 100, .min_cublaslt = PRECIS_LT_VERSION_BLOCK_SCALED,
     .needs = "MXFP4 block scales (VEC32_UE8M0) need sm_100 (Blackwell) and cuBLASLt 12.8 or newer"},
    {.name = "nvfp4", .a = PRECIS_FMT_E2M1, .b = PRECIS_FMT_E2M1, .a_gran = PRECIS_GRAN_NV, .b_gran = PRECIS_GRAN_NV,
     .acc = PRECIS_FMT_F32, .out = PRECIS_FMT_BF16, .compute_type = PRECIS_LT_COMPUTE_32F,
     .scaling = PRECIS_LT_SCALING_BLOCK_SCALED, .min_cc = 100, .min_cublaslt = PRECIS_LT_VERSION_BLOCK_SCALED,
     .needs = "NVFP4 block scales (VEC16_UE4M3) need sm_100 (Blackwell) and cuBLASLt 12.8 or newer"},
};
_Static_assert(sizeof routes / sizeof routes[0] == PRECIS_LT_ROUTE_COUNT, "PRECIS_LT_ROUTE_COUNT is the table's size");

const precis_lt_route *precis_lt_route_at(size_t index) { return index < PRECIS_LT_ROUTE_COUNT ? &routes[index] : NULL; }

size_t precis_lt_route_index(const precis_lt_route *route) { return (size_t)(route - routes); }

static bool operand_matches(const precis_operand_spec *op, precis_format_id fmt, precis_gran gran) {
  return op->fmt == fmt && op->gran == gran && (!precis_operand_is_integer(op) || op->conv == PRECIS_QCONV_SYM);
}

/* The route's group sizes: A's k<G> (or the same groups spelled 1xG) and B's <R>x<C>. */
static bool groups_match(const precis_lt_route *r, const precis_spec *s) {
  const precis_operand_spec *a = &s->a, *b = &s->b;
  if (r->a_group && !(a->gran == PRECIS_GRAN_K && a->group == r->a_group) &&
      !(a->gran == PRECIS_GRAN_BLOCK && a->block_rows == 1 && a->block_cols == r->a_group))
    return false;
  return !r->b_block_rows || (b->block_rows == r->b_block_rows && b->block_cols == r->b_block_cols);
}

static bool route_matches(const precis_lt_route *r, const precis_spec *s) {
  precis_operand_spec a = s->a, b = s->b;
  if (r->a_group && a.gran == PRECIS_GRAN_BLOCK && a.block_rows == 1) a.gran = PRECIS_GRAN_K; /* 1xG is k<G> on A */
  if (r->scaling == PRECIS_LT_SCALING_BLOCK_SCALED) { /* mx-rceil: E8M0 scales as mx, another rounding rule */
    if (a.gran == PRECIS_GRAN_MX_RCEIL) a.gran = PRECIS_GRAN_MX;
    if (b.gran == PRECIS_GRAN_MX_RCEIL) b.gran = PRECIS_GRAN_MX;
  }
  bool a_ok = s->scale == PRECIS_SCALE_DYNAMIC ? operand_matches(&a, r->a, r->a_gran)
                                               : r->a_static_ok && operand_matches(&a, r->a, PRECIS_GRAN_TENSOR);
  /* UE8M0 scales come from the host quantizer, which only the outer-vector and 128-block routes use
   * (their fp32 scale tensors then hold the powers of two); the per-tensor fp8 route scales on the
   * device with fp32 scales. */
  bool ue8m0 = precis_operand_scales_ue8m0(&a) || precis_operand_scales_ue8m0(&b);
  if (ue8m0 && r->scaling != PRECIS_LT_SCALING_OUTER_VEC && r->scaling != PRECIS_LT_SCALING_BLOCK128) return false;
  return a_ok && operand_matches(&b, r->b, r->b_gran) && groups_match(r, s) && s->acc == r->acc &&
         s->out == r->out && s->split == r->split && s->fast_accum == r->fast_accum;
}

static bool is_fp8_fmt(precis_format_id f) { return f == PRECIS_FMT_E4M3 || f == PRECIS_FMT_E5M2; }

/* Issue 16's formats on the cuda backend: which cuBLASLt scale mode (cublasLtMatmulMatrixScale_t,
 * CUDA 13.1 cublasLt.h) or emulation each would take, and that precis does not drive it yet. true
 * when the spec is one of them. */
static bool why_no_quantized_route(const precis_spec *s, char *why, size_t len) {
  const precis_operand_spec *a = &s->a, *b = &s->b;
  bool a_sc = precis_operand_is_scaled(a), b_sc = precis_operand_is_scaled(b);
  if (!a_sc && !b_sc) return false;
  const char *todo = "not yet run by the cuda backend (issue 16)";
  bool a_8bit = a->fmt == PRECIS_FMT_I8 || a->fmt == PRECIS_FMT_E4M3 || a->fmt == PRECIS_FMT_E5M2;
  bool b_low_int = b->fmt == PRECIS_FMT_S4 || b->fmt == PRECIS_FMT_U4 || b->fmt == PRECIS_FMT_S3 || b->fmt == PRECIS_FMT_S2;
  if (a_8bit && b_low_int) {
    /* W4A8 / W4AFP8 (issue 39): engines run them with CUTLASS mixed-input kernels. */
    snprintf(why, len, "not supported on cuda: %s weights x %s activations is a mixed-input GEMM; cuBLASLt takes "
                       "both operands in one type (no int4 operand), and precis builds no CUTLASS mixed-input kernel "
                       "(vLLM's CutlassW4A8LinearKernel, Machete); the cpu backend emulates it",
             precis_format_get(b->fmt)->name, precis_format_get(a->fmt)->name);
    return true;
  }
  bool block = a->gran == PRECIS_GRAN_MX || a->gran == PRECIS_GRAN_MX_RCEIL || a->gran == PRECIS_GRAN_NV ||
               b->gran == PRECIS_GRAN_MX || b->gran == PRECIS_GRAN_MX_RCEIL || b->gran == PRECIS_GRAN_NV;
  if (a_sc != b_sc) {
    snprintf(why, len, "weight-only: the cuda backend emulates it (host dequantization to bf16/fp16, then that "
                       "GEMM) only with a bf16 or fp16 unscaled operand, acc=fp32, the same out=, dynamic scales and "
                       "no smoothing (a=%s, out=%s)",
             precis_format_get(a_sc ? b->fmt : a->fmt)->name, precis_format_get(s->out)->name);
    return true;
  }
  if (block) {
    snprintf(why, len, "MX/NVFP4 block scales: the native routes (mxfp8, mxfp4, nvfp4: VEC32_UE8M0 / VEC16_UE4M3, "
                       "cc >= 10.0) take e4m3@mx x e4m3@mx, e2m1@mx x e2m1@mx or e2m1@nv x e2m1@nv with acc=fp32, "
                       "out=bf16; the exact bf16 dequantization the cuda backend emulates takes mx/nv on both "
                       "operands with out=bf16 (this spec: a=%s@%s, b=%s@%s, out=%s)",
             precis_format_get(a->fmt)->name, precis_gran_name(a->gran), precis_format_get(b->fmt)->name,
             precis_gran_name(b->gran), precis_format_get(s->out)->name);
    return true;
  }
  if (is_fp8_fmt(a->fmt) && is_fp8_fmt(b->fmt)) {
    if (a->fmt == PRECIS_FMT_E5M2 && b->fmt == PRECIS_FMT_E5M2) {
      snprintf(why, len, "e5m2 x e5m2: cuBLASLt has no FP8 matmul with both operands E5M2 (its FP8 type table: E4M3 "
                         "x E4M3, E4M3 x E5M2, E5M2 x E4M3); make one operand e4m3");
      return true;
    }
    if (a->gran == PRECIS_GRAN_BLOCK && b->gran == PRECIS_GRAN_BLOCK) {
      snprintf(why, len, "fp8 with 2-D blocks on both operands: cuBLASLt's BLK128x128_32F pairs only with "
                         "VEC128_32F (1x128) on the other operand, never BLK x BLK");
      return true;
    }
    if (a->gran == PRECIS_GRAN_ROW && b->gran == PRECIS_GRAN_COL) {
      snprintf(why, len, "fp8 outer-vector scales (A per row, B per column): the fp8-rowwise route "
                       "(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, sm_90) takes e4m3 x e4m3 with acc=fp32, out=bf16, "
                       "dynamic scales only (this spec: a=%s, b=%s, out=%s)",
               precis_format_get(a->fmt)->name, precis_format_get(b->fmt)->name, precis_format_get(s->out)->name);
      return true;
    }
    bool vec128_a = (a->gran == PRECIS_GRAN_K && a->group == 128) ||
                    (a->gran == PRECIS_GRAN_BLOCK && a->block_rows == 1 && a->block_cols == 128);
    bool blk_b = b->gran == PRECIS_GRAN_BLOCK && b->block_rows == 128 && b->block_cols == 128;
    if (vec128_a && blk_b) {
      snprintf(why, len, "fp8 128-blocks (A 1x128, B 128x128): the fp8-block route (CUBLASLT_MATMUL_MATRIX_SCALE_"
                       "VEC128_32F x BLK128x128_32F, sm_90) takes e4m3 x e4m3 with acc=fp32, out=bf16, dynamic "
                       "scales only (this spec: a=%s, b=%s, out=%s)",
               precis_format_get(a->fmt)->name, precis_format_get(b->fmt)->name, precis_format_get(s->out)->name);
      return true;
    }
    if (a->gran == PRECIS_GRAN_BLOCK || b->gran == PRECIS_GRAN_BLOCK || a->gran == PRECIS_GRAN_K ||
        b->gran == PRECIS_GRAN_K) {
      snprintf(why, len, "fp8 with %s/%s scales: cuBLASLt's block scales on sm_90 are A 1x128 (VEC128_32F: "
                       "a=e4m3@k128 or a=e4m3@1x128) with B 128x128 (BLK128x128_32F: b=e4m3@128x128) only",
               precis_gran_name(a->gran), precis_gran_name(b->gran));
      return true;
    }
    if (a->gran == PRECIS_GRAN_TENSOR && b->gran == PRECIS_GRAN_TENSOR && a->fmt != b->fmt) {
      snprintf(why, len, "fp8 %s x %s per tensor: cuBLASLt takes it (SCALAR_32F, sm_89+), but precis's fp8 route is "
                         "e4m3 x e4m3 only; %s",
               precis_format_get(a->fmt)->name, precis_format_get(b->fmt)->name, todo);
      return true;
    }
    if (a->gran == PRECIS_GRAN_TENSOR && b->gran == PRECIS_GRAN_TENSOR && is_fp8_fmt(s->out) &&
        s->out != PRECIS_FMT_E4M3) {
      snprintf(why, len, "fp8 output %s: the fp8-e4m3out route writes e4m3 D only (scale_D, amax_D)",
               precis_format_get(s->out)->name);
      return true;
    }
    if (a->gran == PRECIS_GRAN_TENSOR && b->gran == PRECIS_GRAN_TENSOR) return false; /* the fp8 route's own fields */
    snprintf(why, len, "fp8 with %s/%s scales: cuBLASLt's scale modes are per tensor (SCALAR_32F), outer vector "
                       "(OUTER_VEC_32F: A per row, B per column) and VEC128_32F x BLK128x128_32F; no route for these",
             precis_gran_name(a->gran), precis_gran_name(b->gran));
    return true;
  }
  if (precis_operand_is_integer(a) && precis_operand_is_integer(b)) {
    snprintf(why, len, "integer operands: the int8 route takes s8:sym A per row (or per tensor from calibration) x B "
                       "per column; cuBLASLt's int8 GEMM takes no scales, so other granularities, s4/u4 and sym-half "
                       "have no route; %s", todo);
    return true;
  }
  return false;
}

/* The first field that keeps a spec off every route, for the reason of an `unsupported` row. */
static void why_no_route(const precis_spec *s, char *why, size_t len) {
  char a[48], b[48];
  precis_operand_format(&s->a, a, sizeof a);
  precis_operand_format(&s->b, b, sizeof b);
  if (s->split == PRECIS_SPLIT_CUBLAS_EMU)
    snprintf(why, len, "split=cublas-emu: cuBLAS's FP64 emulation takes a=fp64,b=fp64,acc=fp64,out=fp64 without "
                       "scales or smoothing");
  else if (precis_split_is_crt(s->split))
    snprintf(why, len,
             "split=crt-int8x%d%s: Ozaki scheme II is not built on the cuda backend (it would be %d int8 GEMMs plus "
             "device kernels for the modular reduction and the CRT reconstruction, none written yet); the cpu backend "
             "runs it",
             s->split_terms, s->split == PRECIS_SPLIT_CRT_INT8XN_FAST ? "-fast" : "",
             s->split_terms + (s->split == PRECIS_SPLIT_CRT_INT8XN ? 1 : 0));
  else if (s->split != PRECIS_SPLIT_NONE)
    snprintf(why, len,
             "split=%s%.0d: not one cuBLASLt call: the cuda backend runs it as several (precis_split_plan_make)",
             precis_split_name(s->split), s->split == PRECIS_SPLIT_INT8XN ? s->split_terms : 0);
  else if (precis_spec_smooths(s))
    snprintf(why, len, "smooth: SmoothQuant is not yet implemented on the cuda backend (issue 16)");
  else if (s->a.fmt == PRECIS_FMT_F64 || s->b.fmt == PRECIS_FMT_F64 || s->acc == PRECIS_FMT_F64 ||
           s->out == PRECIS_FMT_F64)
    snprintf(why, len, "fp64: the cuda route is a=fp64,b=fp64,acc=fp64,out=fp64 (cuBLASLt CUDA_R_64F, "
                       "CUBLAS_COMPUTE_64F); a=%s,b=%s,acc=%s,out=%s has none", a, b, precis_format_get(s->acc)->name,
             precis_format_get(s->out)->name);
  else if (why_no_quantized_route(s, why, len))
    return;
  else
    snprintf(why, len, "a=%s,b=%s,acc=%s,out=%s: no cuBLASLt route in precis yet (issue 16); routes: the presets "
                       "fp32, tf32, fp16, fp16acc16, bf16, int8, fp8, fp8-fast, fp8-rowwise, fp8-block, fp8 with "
                       "out=e4m3, mxfp8/mxfp4/nvfp4 (native on sm_100), fp64, fp64-emu and the split recipes",
             a, b, precis_spec_acc_name(s), precis_format_get(s->out)->name);
}

const precis_lt_route *precis_lt_route_find(const precis_spec *spec, char *why, size_t len) {
  if ((spec->split == PRECIS_SPLIT_NONE || spec->split == PRECIS_SPLIT_CUBLAS_EMU) && !precis_spec_smooths(spec))
    for (size_t i = 0; i < PRECIS_LT_ROUTE_COUNT; i++)
      if (route_matches(&routes[i], spec)) {
        if (why && len) why[0] = '\0';
        return &routes[i];
      }
  if (why && len) why_no_route(spec, why, len);
  return NULL;
}

static bool is_mx(const precis_operand_spec *op) {
  return op->gran == PRECIS_GRAN_MX || op->gran == PRECIS_GRAN_MX_RCEIL;
}

/* Block-scaled operands whose dequantized values (code x block scale) are exact in bf16: MX
 * (e2m1/e4m3/e5m2 codes x 2^e) and NVFP4 (e2m1 x an E4M3 block scale; the fp32 tensor scale is
 * left out of the values and folded into alpha). Exactness of e2m1 x e4m3: a nonzero e2m1 value is
 * m x 2^e with m in {1, 3} (at most 2 significant bits) and 2^e in [2^-1, 2^2]; a nonzero e4m3
 * value has at most 4 significant bits and lies in [2^-9 (its smallest subnormal), 448]; so the
 * product has at most 2 + 4 = 6 significant bits (bf16 holds 8) and magnitude in
 * [2^-1 * 2^-9, 6 * 448] = [2^-10, 2688], inside bf16's normal range [2^-126, 3.4e38]: no rounding,
 * no subnormal, no overflow. tests/test_gemm_plan.c checks all 16 x 256 code pairs. */
static bool is_block_scaled(const precis_operand_spec *op) {
  return is_mx(op) || (op->gran == PRECIS_GRAN_NV && op->fmt == PRECIS_FMT_E2M1);
}

bool precis_lt_dequant_emulation(const precis_spec *s, precis_spec *sub, char *how, size_t len) {
  if (s->split != PRECIS_SPLIT_NONE || precis_spec_smooths(s) || s->scale != PRECIS_SCALE_DYNAMIC ||
      s->acc != PRECIS_FMT_F32)
    return false;
  bool a_sc = precis_operand_is_scaled(&s->a), b_sc = precis_operand_is_scaled(&s->b);
  precis_format_id f;
  const char *what;
  if (a_sc != b_sc) {
    f = a_sc ? s->b.fmt : s->a.fmt; /* weight-only: dequantized to the unscaled operand's format */
    what = a_sc ? "A" : "B";
    if (f != PRECIS_FMT_BF16 && f != PRECIS_FMT_F16) return false;
  } else if (a_sc && is_block_scaled(&s->a) && is_block_scaled(&s->b)) {
    f = PRECIS_FMT_BF16; /* code x block scale: exact in bf16 (is_block_scaled) */
    what = "A and B";
  } else {
    return false;
  }
  if (s->out != f) return false;
  precis_spec t = *s;
  t.a = (precis_operand_spec){.fmt = f, .gran = PRECIS_GRAN_NONE, .conv = PRECIS_QCONV_NONE};
  t.b = t.a;
  *sub = t;
  bool nv = s->a.gran == PRECIS_GRAN_NV || s->b.gran == PRECIS_GRAN_NV;
  if (how && len)
    snprintf(how, len, "%s dequantized on the host to the %s values the cpu backend uses, then the %s "
                       "cuBLASLt GEMM%s (exact inputs, not a fused kernel's speed)",
             what, precis_format_get(f)->name, precis_format_get(f)->name,
             nv ? " with alpha = fp32(s_a * s_b), the nv fp32 tensor scales (code x E4M3 block scale on the host)"
                : "");
  return true;
}

bool precis_lt_emulated_on(const precis_spec *spec, int cc_major, int cc_minor, precis_spec *sub, char *how,
                           size_t len) {
  const precis_lt_route *route = precis_lt_route_find(spec, NULL, 0);
  if (route && cc_major * 10 + cc_minor >= route->min_cc) return false;
  return precis_lt_dequant_emulation(spec, sub, how, len);
}

bool precis_cuda_spec_supported(const precis_spec *spec, int cc_major, int cc_minor, char *reason, size_t len) {
  precis_spec sub;
  char why[256];
  /* A split runs as GEMMs of its partial products: the device needs their route. */
  if (precis_split_term_spec(spec, &sub, why, sizeof why)) spec = &sub;
  else if (why[0]) {
    if (reason && len) snprintf(reason, len, "%s", why);
    return false;
  }
  if (precis_lt_emulated_on(spec, cc_major, cc_minor, &sub, NULL, 0)) spec = &sub;
  const precis_lt_route *route = precis_lt_route_find(spec, reason, len);
  if (!route) return false;
  if (cc_major * 10 + cc_minor >= route->min_cc) return true;
  if (reason && len) snprintf(reason, len, "%s; device is sm_%d%d", route->needs, cc_major, cc_minor);
  return false;
}
