/* The target architecture (DESIGN §19, issue 33): which GPU a run's arithmetic stands for, and the
 * accumulator its tensor cores use for each operand family, from a table with its source per row
 * (docs/formats.md, "Target architectures"). The cpu backend emulates the row's accumulator where
 * it models one (precis_target_plan in src/eval/target_plan.h decides per spec). */
#ifndef PRECIS_TARGET_H
#define PRECIS_TARGET_H

#include <stdbool.h>
#include <stddef.h>

typedef enum precis_target {
  PRECIS_TARGET_DEFAULT = 0, /* the backend's own: sm_90 on the cpu, the detected device on cuda */
  PRECIS_TARGET_SM80,        /* Ampere (A100) */
  PRECIS_TARGET_SM89,        /* Ada (L40, RTX 4090) */
  PRECIS_TARGET_SM90,        /* Hopper (H100, H200) */
  PRECIS_TARGET_SM100,       /* Blackwell data centre (B200, GB200): tcgen05 */
  PRECIS_TARGET_SM120,       /* Blackwell consumer / workstation (RTX 50, RTX PRO 6000) */
  PRECIS_TARGET_COUNT,
} precis_target;

#define PRECIS_TARGET_CPU_DEFAULT PRECIS_TARGET_SM90
#define PRECIS_TARGET_NAMES "sm_80, sm_89, sm_90, sm_100, sm_120"

/* "sm_90" etc.; "default" for PRECIS_TARGET_DEFAULT. */
const char *precis_target_name(precis_target t);
/* Accepts sm_80|sm_89|sm_90|sm_100|sm_120 (also sm80, 90, 10.0 forms of the same five). false
 * for anything else. */
bool precis_target_parse(const char *text, precis_target *out);
/* The compute capability as major*10+minor (80, 89, 90, 100, 120); 0 for the default. */
int precis_target_cc(precis_target t);
/* The target of a device's compute capability: the newest of the five whose cc is <= the device's
 * within the same major generation (sm_86 -> sm_80, sm_103 -> sm_100); PRECIS_TARGET_DEFAULT when
 * none (pre-Ampere). */
precis_target precis_target_of_cc(int major, int minor);

/* The operand families of the tensor cores' MMA instructions. */
typedef enum precis_mma_family {
  PRECIS_MMA_F16,   /* fp16 / bf16 inputs, fp32 accumulation (HMMA, wgmma, tcgen05 kind::f16) */
  PRECIS_MMA_TF32,  /* tf32 inputs */
  PRECIS_MMA_FP8,   /* e4m3 / e5m2 inputs, per-tensor or outer scales (QGMMA, tcgen05 kind::f8f6f4) */
  PRECIS_MMA_MXFP8, /* e4m3 / e5m2 with E8M0 block scales in the MMA (tcgen05 kind::mxf8f6f4) */
  PRECIS_MMA_FP4,   /* MXFP4 / NVFP4: e2m1 with E8M0 / E4M3 block scales (kind::mxf4nvf4) */
  PRECIS_MMA_INT8,  /* s8 inputs, s32 accumulation (IMMA) */
  PRECIS_MMA_FAMILY_COUNT,
} precis_mma_family;

const char *precis_mma_family_name(precis_mma_family f); /* "fp16/bf16", "tf32", "fp8", "mxfp8", "mxfp4/nvfp4", "int8" */

typedef struct precis_accumulator_row {
  precis_target target;
  precis_mma_family family;
  bool has_tensor_cores;  /* false: the target has no MMA for this family */
  int fraction_bits;      /* bits kept after the leading one by the MMA's internal sum; -1: exact (integers) */
  int instruction_k;      /* products summed by one MMA instruction */
  int dot_k;              /* products per fused dot-add (the model's block) when the instruction runs as
                           * several (Ampere/Ada m16n8k16, m16n8k8: two of k/2); 0: instruction_k */
  const char *promotion;  /* when partial sums leave the narrow accumulator */
  const char *alignment;  /* how products are aligned before they are summed */
  const char *source;     /* where the width comes from */
  bool measured;          /* false: not measured by the sources, taken from the nearest measured row */
} precis_accumulator_row;

/* The row of (target, family); target DEFAULT reads as the cpu default (sm_90). Never NULL for
 * valid arguments. */
const precis_accumulator_row *precis_accumulator_row_get(precis_target target, precis_mma_family family);
/* Row i of the whole table (PRECIS_TARGET_COUNT-1 targets x families), NULL past the end. */
const precis_accumulator_row *precis_accumulator_row_at(size_t index);

/* The products one fused dot-add of the row's MMA sums (dot_k, else instruction_k). */
int precis_accumulator_row_block(const precis_accumulator_row *row);

/* The accumulator the cpu backend emulates for one spec: fraction_bits > 0 means the k-sum is held
 * in an accumulator truncated (toward zero) to that many fraction bits after every `block`
 * products, never promoted before the k-sum ends (then rounded to fp32); 0 means the backend's
 * fp32-sum model (OpenBLAS sgemm). `family` says which MMA: fp16/bf16 and tf32 run the fused
 * dot-add of src/eval/cpu_gemm_mma.h (alignment at the operands' exponent sum, MMA-Sim's rule),
 * fp8 and the block-scaled families cpu_quantized.c's chain. */
typedef struct precis_acc_model {
  int fraction_bits;
  int block;
  precis_mma_family family;
} precis_acc_model;

#endif
