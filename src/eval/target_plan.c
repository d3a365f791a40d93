/* The target's way with a spec (target_plan.h). */
#include "eval/target_plan.h"

#include <stdio.h>
#include <string.h>

#include "eval/capability.h"
#include "eval/gemm_plan.h"
#include "eval/split_plan.h"

const char *precis_target_way_name(precis_target_way w) {
  switch (w) {
  case PRECIS_TARGET_NATIVE: return "native";
  case PRECIS_TARGET_EMULATED: return "emulated";
  case PRECIS_TARGET_REFUSED: return "refused";
  case PRECIS_TARGET_NO_ROUTE: return "cpu-only";
  }
  return "?";
}

static bool is_block_scaled(const precis_operand_spec *op) {
  return op->gran == PRECIS_GRAN_MX || op->gran == PRECIS_GRAN_MX_RCEIL || op->gran == PRECIS_GRAN_NV;
}

/* The MMA family a plain (unsplit, unemulated) spec's route runs on; false for routes that use no
 * tensor core (fp32 and fp64 SIMT, cuBLAS's own fp64 emulation). */
static bool family_of(const precis_spec *s, precis_mma_family *f) {
  const precis_format_id a = s->a.fmt;
  if (s->a.fmt == PRECIS_FMT_F64 || s->split == PRECIS_SPLIT_CUBLAS_EMU) return false;
  if (is_block_scaled(&s->a) && is_block_scaled(&s->b)) {
    *f = a == PRECIS_FMT_E2M1 ? PRECIS_MMA_FP4 : PRECIS_MMA_MXFP8;
    return true;
  }
  switch (a) {
  case PRECIS_FMT_F16:
  case PRECIS_FMT_BF16: *f = PRECIS_MMA_F16; return true;
  case PRECIS_FMT_TF32: *f = PRECIS_MMA_TF32; return true;
  case PRECIS_FMT_E4M3:
  case PRECIS_FMT_E5M2: *f = PRECIS_MMA_FP8; return true;
  case PRECIS_FMT_I8: *f = PRECIS_MMA_INT8; return true;
  default: return false;
  }
}

/* A plain float spec of the fp16/bf16/tf32 MMAs: unscaled operands of one of those formats, fp32
 * accumulation, no split and no SmoothQuant (the cpu backend's sgemm route, which the MMA model
 * replaces). */
static bool plain_float_mma(const precis_spec *s) {
  const precis_format_id ok[] = {PRECIS_FMT_F16, PRECIS_FMT_BF16, PRECIS_FMT_TF32};
  bool a = false, b = false;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) a |= s->a.fmt == ok[i], b |= s->b.fmt == ok[i];
  return a && b && !precis_operand_is_scaled(&s->a) && !precis_operand_is_scaled(&s->b) &&
         s->acc == PRECIS_FMT_F32 && s->split == PRECIS_SPLIT_NONE && !precis_spec_smooths(s) &&
         s->scale == PRECIS_SCALE_DYNAMIC && !s->fast_accum;
}

/* The route whose arithmetic the spec shares: its own, or, when only the output format keeps it off
 * every route (fp8 with out=fp32, say), the route of the same operands and accumulation. *out_aside
 * says which. */
static const precis_lt_route *arithmetic_route(const precis_spec *s, precis_spec *matched, bool *out_aside) {
  *out_aside = false;
  *matched = *s;
  const precis_lt_route *route = precis_lt_route_find(s, NULL, 0);
  static const precis_format_id outs[] = {PRECIS_FMT_BF16, PRECIS_FMT_F32, PRECIS_FMT_F16, PRECIS_FMT_E4M3};
  for (size_t i = 0; !route && i < sizeof outs / sizeof outs[0]; i++) {
    matched->out = outs[i];
    if ((route = precis_lt_route_find(matched, NULL, 0))) *out_aside = true;
  }
  if (!route) *matched = *s;
  return route;
}

void precis_target_plan_of(const precis_spec *spec, precis_target target, precis_target_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (target == PRECIS_TARGET_DEFAULT) target = PRECIS_TARGET_CPU_DEFAULT;
  plan->target = target;
  int cc = precis_target_cc(target);
  const char *name = precis_target_name(target);
  /* A split runs as GEMMs of its partial products: the target needs their route. */
  precis_spec term, sub;
  char why[256] = "";
  const precis_spec *s = spec;
  bool split = precis_split_term_spec(spec, &term, why, sizeof why);
  if (split) s = &term;
  bool out_aside = false;
  precis_spec matched = *s;
  const precis_lt_route *route = why[0] ? NULL : arithmetic_route(s, &matched, &out_aside);
  s = &matched; /* the output format aside, the same way as the route's own spec */
  char how[256] = "";
  bool emulated = !route || cc < route->min_cc ? precis_lt_emulated_on(s, cc / 10, cc % 10, &sub, how, sizeof how) : false;
  precis_mma_family family;
  if (route && cc >= route->min_cc) {
    plan->way = PRECIS_TARGET_NATIVE;
    plan->acc = family_of(s, &family) ? precis_accumulator_row_get(target, family) : NULL;
    snprintf(plan->why, sizeof plan->why, "%s: native, cuBLASLt route %s%s%s", name, route->name,
             out_aside ? " (the output format aside)" : "", split ? " for each partial product of the split" : "");
  } else if (emulated) {
    plan->way = PRECIS_TARGET_EMULATED;
    plan->acc = family_of(&sub, &family) ? precis_accumulator_row_get(target, family) : NULL;
    snprintf(plan->why, sizeof plan->why, "%s: emulated, %s", name, how);
  } else if (route) {
    plan->way = PRECIS_TARGET_REFUSED;
    snprintf(plan->why, sizeof plan->why, "%s: refused as the cuda backend would be there: %s", name, route->needs);
  } else {
    plan->way = PRECIS_TARGET_NO_ROUTE;
    snprintf(plan->why, sizeof plan->why, "%s: no cuda route in precis for this spec; the cpu backend's arithmetic only",
             name);
  }
  /* The accumulators the cpu backend emulates: FAST_ACCUM fp8 (the k-sum never leaves the tensor
   * core, so its width is the error), the native block-scaled MMAs (whose partial sums are wider
   * than fp32's), and the fp16/bf16/tf32 MMAs with fp32 accumulation of a plain float spec (every
   * fused dot-add aligned and truncated to the row's width, D an fp32 rounded toward zero:
   * src/eval/cpu_gemm_mma.h). Everything else keeps fp32 sums. */
  if (plan->way == PRECIS_TARGET_NATIVE && plan->acc && plan->acc->has_tensor_cores && plan->acc->fraction_bits > 0) {
    precis_mma_family f = plan->acc->family;
    bool float_mma = (f == PRECIS_MMA_F16 || f == PRECIS_MMA_TF32) && plain_float_mma(spec);
    if (float_mma || (f == PRECIS_MMA_FP8 && spec->fast_accum) || f == PRECIS_MMA_MXFP8 || f == PRECIS_MMA_FP4) {
      plan->model.fraction_bits = plan->acc->fraction_bits;
      plan->model.block = precis_accumulator_row_block(plan->acc);
      plan->model.family = f;
    }
  }
}

void precis_target_plan_details(const precis_target_plan *plan, precis_kv_list *details) {
  precis_kv_set(details, "target", precis_target_name(plan->target));
  precis_kv_set(details, "target_way", precis_target_way_name(plan->way));
  precis_kv_set(details, "target_plan", plan->why);
  if (!plan->acc) return;
  const precis_accumulator_row *r = plan->acc;
  char text[768];
  if (!r->has_tensor_cores)
    snprintf(text, sizeof text, "%s on %s: %s", precis_mma_family_name(r->family), precis_target_name(r->target),
             r->promotion);
  else if (r->fraction_bits < 0)
    snprintf(text, sizeof text, "%s on %s: exact (s32), %d products per instruction; source: %s",
             precis_mma_family_name(r->family), precis_target_name(r->target), r->instruction_k, r->source);
  else
  {
    char split[64] = "";
    if (r->dot_k > 0 && r->dot_k != r->instruction_k)
      snprintf(split, sizeof split, " (two fused dot-adds of %d)", r->dot_k);
    const char *emulated = !plan->model.fraction_bits ? "fp32 sums (OpenBLAS sgemm)"
                           : plan->model.family == PRECIS_MMA_F16 || plan->model.family == PRECIS_MMA_TF32
                               ? "that accumulator (each fused dot-add aligned at the operands' exponent sum and "
                                 "truncated, D written to fp32 toward zero; MMA-Sim's model)"
                               : "that accumulator (truncated k-sum)";
    snprintf(text, sizeof text, "%s on %s: %d fraction bits kept, %d products per instruction%s, %s; promotion: %s; "
                                "source: %s%s; emulated here: %s",
             precis_mma_family_name(r->family), precis_target_name(r->target), r->fraction_bits, r->instruction_k,
             split, r->alignment, r->promotion, r->source, r->measured ? "" : " (unmeasured)", emulated);
  }
  precis_kv_set(details, "accumulator", text);
}
