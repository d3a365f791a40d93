/* The target table (docs/formats.md, "Target architectures"). The widths are those the two
 * bit-accurate models publish (MMA-Sim, Xie et al., arXiv 2511.10909: ten architectures validated
 * bitwise on hardware; Khattak & Mikaitis, arXiv 2512.07004: V100, A100, H100 and B200 models):
 * fp16/bf16/tf32 keep 24 fraction bits on Turing to Ada and 25 on Hopper and Blackwell; FP8 keeps
 * 13 on Ada and Hopper (DeepSeek-V3 §3.3.2 measured "about 14" on H800) and 25 on Blackwell's
 * tcgen05 (FP8 and MXFP8); MXFP4/NVFP4 keep 35. sm_120 (consumer Blackwell, mma.sync rather than
 * tcgen05) is measured by neither for fp8 and the block-scaled MMAs: those rows repeat sm_100's and
 * say so (measured = false); its fp16/bf16/tf32 mma.sync is MMA-Sim's "RTX Blackwell" (25 bits, one
 * fused dot-add per instruction). Ampere and Ada split their f16/bf16 and tf32 instructions into two
 * fused dot-adds (dot_k = k/2, MMA-Sim's is_split_k). */
#include "numerics/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[PRECIS_TARGET_COUNT] = {"default", "sm_80", "sm_89", "sm_90", "sm_100", "sm_120"};
static const int ccs[PRECIS_TARGET_COUNT] = {0, 80, 89, 90, 100, 120};

const char *precis_target_name(precis_target t) { return t < PRECIS_TARGET_COUNT ? names[t] : "?"; }

int precis_target_cc(precis_target t) { return t < PRECIS_TARGET_COUNT ? ccs[t] : 0; }

bool precis_target_parse(const char *text, precis_target *out) {
  if (!text) return false;
  const char *p = text;
  if (strncmp(p, "sm_", 3) == 0) p += 3;
  else if (strncmp(p, "sm", 2) == 0) p += 2;
  /* 90, 8.9, 10.0: the forms --cc takes. */
  char digits[8];
  size_t n = 0;
  for (; *p && n + 1 < sizeof digits; p++) {
    if (*p == '.') continue;
    if (*p < '0' || *p > '9') return false;
    digits[n++] = *p;
  }
  if (*p || n < 2 || n > 3) return false;
  digits[n] = '\0';
  int cc = atoi(digits);
  for (int t = PRECIS_TARGET_SM80; t < PRECIS_TARGET_COUNT; t++)
    if (ccs[t] == cc) {
      *out = (precis_target)t;
      return true;
    }
  return false;
}

precis_target precis_target_of_cc(int major, int minor) {
  if (major < 8) return PRECIS_TARGET_DEFAULT;
  if (major == 8) return minor >= 9 ? PRECIS_TARGET_SM89 : PRECIS_TARGET_SM80;
  if (major == 9) return PRECIS_TARGET_SM90;
  return major < 12 ? PRECIS_TARGET_SM100 : PRECIS_TARGET_SM120;
}

static const char *const family_names[PRECIS_MMA_FAMILY_COUNT] = {"fp16/bf16", "tf32", "fp8", "mxfp8", "mxfp4/nvfp4",
                                                                  "int8"};

const char *precis_mma_family_name(precis_mma_family f) { return f < PRECIS_MMA_FAMILY_COUNT ? family_names[f] : "?"; }

#define ALIGN_TRUNC "products aligned to the largest exponent among them and the accumulator, bits below the kept width truncated"
#define PROMOTE_EACH "every instruction: D is an fp32 register (tensor memory on tcgen05)"
#define PROMOTE_FP8_HOPPER                                                                                             \
  "none with FAST_ACCUM (the whole k in the tensor core); without it cuBLASLt adds partial sums into fp32 on the "   \
  "CUDA cores (interval not documented)"
#define SRC_KM "Khattak & Mikaitis, arXiv 2512.07004"
#define SRC_SIM "MMA-Sim, arXiv 2511.10909"
#define SRC_BOTH SRC_SIM "; " SRC_KM
#define SRC_120 "not measured by " SRC_SIM " or " SRC_KM ": sm_100's row (same generation, mma.sync not tcgen05)"
#define NONE_FP8 "no FP8 tensor cores before sm_89"
#define NONE_BLOCK "no block-scaled MMA before sm_100"

#define ROW(T, F, HAS, BITS, K, PROMO, ALIGN, SRC, MEAS)                                                              \
  {.target = T, .family = F, .has_tensor_cores = HAS, .fraction_bits = BITS, .instruction_k = K, .promotion = PROMO, \
   .alignment = ALIGN, .source = SRC, .measured = MEAS}
/* Ampere and Ada run mma.sync m16n8k16 (f16/bf16) and m16n8k8 (tf32) as two fused dot-adds of k/2
 * (MMA-Sim's is_split_k, arXiv 2511.10909; Fasi et al. 2021 found the same 8-product blocks on A100). */
#define ROW_SPLIT(T, F, BITS, K, SRC)                                                                                 \
  {.target = T, .family = F, .has_tensor_cores = true, .fraction_bits = BITS, .instruction_k = K, .dot_k = (K) / 2,  \
   .promotion = PROMOTE_EACH, .alignment = ALIGN_TRUNC, .source = SRC, .measured = true}
#define SRC_RTX SRC_SIM " (RTX Blackwell, mma.sync)"

#define INT8_ROW(T, MEAS)                                                                                              \
  ROW(T, PRECIS_MMA_INT8, true, -1, 32, "none needed: exact s32 sums", "exact integer products", MEAS ? SRC_BOTH : SRC_120, MEAS)

static const precis_accumulator_row table[] = {
    ROW_SPLIT(PRECIS_TARGET_SM80, PRECIS_MMA_F16, 24, 16, SRC_BOTH " (A100)"),
    ROW_SPLIT(PRECIS_TARGET_SM80, PRECIS_MMA_TF32, 24, 8, SRC_BOTH " (A100)"),
    ROW(PRECIS_TARGET_SM80, PRECIS_MMA_FP8, false, 0, 0, NONE_FP8, "-", "capability.c (FP8 route min_cc 89)", true),
    ROW(PRECIS_TARGET_SM80, PRECIS_MMA_MXFP8, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    ROW(PRECIS_TARGET_SM80, PRECIS_MMA_FP4, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    INT8_ROW(PRECIS_TARGET_SM80, true),
    ROW_SPLIT(PRECIS_TARGET_SM89, PRECIS_MMA_F16, 24, 16, SRC_SIM " (Ada)"),
    ROW_SPLIT(PRECIS_TARGET_SM89, PRECIS_MMA_TF32, 24, 8, SRC_SIM " (Ada)"),
    ROW(PRECIS_TARGET_SM89, PRECIS_MMA_FP8, true, 13, 32, PROMOTE_FP8_HOPPER, ALIGN_TRUNC, SRC_SIM " (Ada FP8)", true),
    ROW(PRECIS_TARGET_SM89, PRECIS_MMA_MXFP8, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    ROW(PRECIS_TARGET_SM89, PRECIS_MMA_FP4, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    INT8_ROW(PRECIS_TARGET_SM89, true),
    ROW(PRECIS_TARGET_SM90, PRECIS_MMA_F16, true, 25, 16, PROMOTE_EACH, ALIGN_TRUNC, SRC_BOTH " (H100)", true),
    ROW(PRECIS_TARGET_SM90, PRECIS_MMA_TF32, true, 25, 8, PROMOTE_EACH, ALIGN_TRUNC, SRC_BOTH " (H100)", true),
    ROW(PRECIS_TARGET_SM90, PRECIS_MMA_FP8, true, 13, 32, PROMOTE_FP8_HOPPER, ALIGN_TRUNC,
        SRC_BOTH " (H100); DeepSeek-V3 arXiv 2412.19437 §3.3.2 (about 14 bits)", true),
    ROW(PRECIS_TARGET_SM90, PRECIS_MMA_MXFP8, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    ROW(PRECIS_TARGET_SM90, PRECIS_MMA_FP4, false, 0, 0, NONE_BLOCK, "-", "capability.c (block-scaled min_cc 100)", true),
    INT8_ROW(PRECIS_TARGET_SM90, true),
    ROW(PRECIS_TARGET_SM100, PRECIS_MMA_F16, true, 25, 16, PROMOTE_EACH, ALIGN_TRUNC, SRC_BOTH " (B200)", true),
    ROW(PRECIS_TARGET_SM100, PRECIS_MMA_TF32, true, 25, 8, PROMOTE_EACH, ALIGN_TRUNC, SRC_BOTH " (B200)", true),
    ROW(PRECIS_TARGET_SM100, PRECIS_MMA_FP8, true, 25, 32, PROMOTE_EACH, ALIGN_TRUNC, SRC_BOTH " (B200, tcgen05)", true),
    ROW(PRECIS_TARGET_SM100, PRECIS_MMA_MXFP8, true, 25, 32, PROMOTE_EACH, ALIGN_TRUNC, SRC_SIM " (B200, tcgen05 kind::mxf8f6f4)", true),
    ROW(PRECIS_TARGET_SM100, PRECIS_MMA_FP4, true, 35, 64, PROMOTE_EACH, ALIGN_TRUNC, SRC_SIM " (B200, tcgen05 kind::mxf4nvf4)", true),
    INT8_ROW(PRECIS_TARGET_SM100, true),
    ROW(PRECIS_TARGET_SM120, PRECIS_MMA_F16, true, 25, 16, PROMOTE_EACH, ALIGN_TRUNC, SRC_RTX, true),
    ROW(PRECIS_TARGET_SM120, PRECIS_MMA_TF32, true, 25, 8, PROMOTE_EACH, ALIGN_TRUNC, SRC_RTX, true),
    ROW(PRECIS_TARGET_SM120, PRECIS_MMA_FP8, true, 25, 32, PROMOTE_EACH, ALIGN_TRUNC, SRC_120, false),
    ROW(PRECIS_TARGET_SM120, PRECIS_MMA_MXFP8, true, 25, 32, PROMOTE_EACH, ALIGN_TRUNC, SRC_120, false),
    ROW(PRECIS_TARGET_SM120, PRECIS_MMA_FP4, true, 35, 64, PROMOTE_EACH, ALIGN_TRUNC, SRC_120, false),
    INT8_ROW(PRECIS_TARGET_SM120, false),
};
_Static_assert(sizeof table / sizeof table[0] == (PRECIS_TARGET_COUNT - 1) * PRECIS_MMA_FAMILY_COUNT,
               "one row per (target, family)");

int precis_accumulator_row_block(const precis_accumulator_row *row) {
  return row->dot_k > 0 ? row->dot_k : row->instruction_k;
}

const precis_accumulator_row *precis_accumulator_row_at(size_t index) {
  return index < sizeof table / sizeof table[0] ? &table[index] : NULL;
}

const precis_accumulator_row *precis_accumulator_row_get(precis_target target, precis_mma_family family) {
  if (target == PRECIS_TARGET_DEFAULT) target = PRECIS_TARGET_CPU_DEFAULT;
  if (target >= PRECIS_TARGET_COUNT || family >= PRECIS_MMA_FAMILY_COUNT) return NULL;
  return &table[(size_t)(target - 1) * PRECIS_MMA_FAMILY_COUNT + family];
}
