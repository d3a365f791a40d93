/* Number formats: one table drives every per-format decision (DESIGN §2). Adding a format is one
 * table row plus its conversions. */
#ifndef PRECIS_FORMAT_H
#define PRECIS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum precis_format_id {
  PRECIS_FMT_F64,
  PRECIS_FMT_F32,
  PRECIS_FMT_TF32,
  PRECIS_FMT_F16,
  PRECIS_FMT_BF16,
  PRECIS_FMT_E4M3,
  PRECIS_FMT_E5M2,
  PRECIS_FMT_I8,
  PRECIS_FMT_I32,
  PRECIS_FMT_E2M1, /* OCP MX FP4 (element of mxfp4 and nvfp4) */
  PRECIS_FMT_E8M0, /* OCP MX scale: a power of two, no sign, no zero */
  PRECIS_FMT_S4,   /* signed 4-bit integer, two per byte */
  PRECIS_FMT_U4,   /* unsigned 4-bit integer (asymmetric, with a zero point), two per byte */
  PRECIS_FMT_E2M3, /* OCP MX FP6 E2M3 (element of mxfp6-e2m3) */
  PRECIS_FMT_E3M2, /* OCP MX FP6 E3M2 (element of mxfp6-e3m2) */
  PRECIS_FMT_S2,   /* signed 2-bit integer (-2..1; W2A16, issue 39) */
  PRECIS_FMT_S3,   /* signed 3-bit integer (-4..3; W3A16, issue 39) */
  PRECIS_FMT_COUNT
} precis_format_id;

/* cudaDataType_t values, as plain integers so that src/ needs no CUDA header. */
enum {
  PRECIS_CUDA_R_32F = 0,
  PRECIS_CUDA_R_64F = 1,
  PRECIS_CUDA_R_16F = 2,
  PRECIS_CUDA_R_8I = 3,
  PRECIS_CUDA_R_32I = 10,
  PRECIS_CUDA_R_4I = 16,
  PRECIS_CUDA_R_4U = 18,
  PRECIS_CUDA_R_16BF = 14,
  PRECIS_CUDA_R_8F_E4M3 = 28,
  PRECIS_CUDA_R_8F_E5M2 = 29,
  PRECIS_CUDA_R_8F_UE8M0 = 30,
  PRECIS_CUDA_R_6F_E2M3 = 31,
  PRECIS_CUDA_R_6F_E3M2 = 32,
  PRECIS_CUDA_R_4F_E2M1 = 33,
};

typedef struct precis_format {
  precis_format_id id;
  const char *name;        /* "fp16", "bf16", "e4m3", ... */
  const char *long_name;   /* "IEEE 754 binary16" */
  int storage_bits;        /* bits in memory (tf32 is stored in 32) */
  int significand_bits;    /* precision p, implicit bit included; 0 for integers */
  double unit_roundoff;    /* u = 2^-p for RNE; 0 for integers (exact) */
  double max_finite;
  double min_normal;       /* 0 for integers */
  double min_subnormal;    /* 0 for integers */
  bool has_inf;
  bool is_float;
  int cuda_data_type;      /* PRECIS_CUDA_R_*; tf32 is carried as 32F; -1 where precis has no route yet */
  /* fp32 -> this format -> fp32, round to nearest even, exactly as the GPU path rounds. NULL for
   * formats that are not a rounding of fp32 (fp64, integers). */
  float (*round_f32)(float x);
  void (*round_array)(const float *in, float *out, size_t n);
} precis_format;

const precis_format *precis_format_get(precis_format_id id);
const precis_format *precis_format_by_name(const char *name); /* NULL when unknown */

/* Bit-level conversions (the CPU twins of kernels/convert.cu). RNE, subnormals kept, signed zero
 * kept, NaN stays NaN. Overflow: fp16 -> ±inf from |x| >= 65520; bf16 -> ±inf; e4m3 saturates to
 * ±448 (no inf; NaN -> 0x7f/0xff); e5m2 -> ±inf unless satfinite (then ±57344). */
uint16_t precis_f32_to_f16_bits(float x);
float precis_f16_bits_to_f32(uint16_t h);
uint16_t precis_f32_to_bf16_bits(float x);
float precis_bf16_bits_to_f32(uint16_t h);
uint8_t precis_f32_to_e4m3_bits(float x);
float precis_e4m3_bits_to_f32(uint8_t v);
uint8_t precis_f32_to_e5m2_bits(float x, bool satfinite);
float precis_e5m2_bits_to_f32(uint8_t v);
float precis_round_tf32(float x);

float precis_round_f16(float x);
float precis_round_bf16(float x);
float precis_round_e4m3(float x);
float precis_round_e5m2(float x);

/* Array versions, at a good fraction of memory bandwidth. */
void precis_f32_to_f16_array(const float *in, uint16_t *out, size_t n);
void precis_f16_to_f32_array(const uint16_t *in, float *out, size_t n);
void precis_f32_to_bf16_array(const float *in, uint16_t *out, size_t n);
void precis_bf16_to_f32_array(const uint16_t *in, float *out, size_t n);
void precis_f32_to_e4m3_array(const float *in, uint8_t *out, size_t n);
void precis_e4m3_to_f32_array(const uint8_t *in, float *out, size_t n);
void precis_f32_to_e5m2_array(const float *in, uint8_t *out, size_t n, bool satfinite);
void precis_e5m2_to_f32_array(const uint8_t *in, float *out, size_t n);
/* The F16C-free loop behind precis_f32_to_f16_array, for tests that compare the two paths. */
void precis_f32_to_f16_array_portable(const float *in, uint16_t *out, size_t n);

/* fp32 -> format -> fp32 over arrays (the formats' round_array; in == out allowed). */
void precis_round_tf32_array(const float *in, float *out, size_t n);
void precis_round_f16_array(const float *in, float *out, size_t n);
void precis_round_bf16_array(const float *in, float *out, size_t n);
void precis_round_e4m3_array(const float *in, float *out, size_t n);
void precis_round_e5m2_array(const float *in, float *out, size_t n);
/* e5m2 with satfinite: overflow (and ±inf) gives ±57344 instead of ±inf. */
float precis_round_e5m2_satfinite(float x);

/* e2m1 (FP4): RNE with saturation to ±6 (|x| >= 7 and ±inf), NaN -> +6 (code 0x7); the code is the
 * low nibble. e8m0: code -> 2^(code-127), 0xff -> NaN. */
uint8_t precis_f32_to_e2m1_bits(float x);
float precis_e2m1_bits_to_f32(uint8_t v);
float precis_round_e2m1(float x);
void precis_f32_to_e2m1_array(const float *in, uint8_t *out, size_t n);
void precis_round_e2m1_array(const float *in, float *out, size_t n);
float precis_e8m0_bits_to_f32(uint8_t v);

/* FP6 (OCP MX v1.0): e2m3 (max 7.5) and e3m2 (max 28), RNE with saturation (|x| >= 7.75 / 30 and
 * ±inf give ±max), NaN -> +max; the code is the low 6 bits (sign at bit 5). */
uint8_t precis_f32_to_e2m3_bits(float x);
float precis_e2m3_bits_to_f32(uint8_t v);
float precis_round_e2m3(float x);
void precis_round_e2m3_array(const float *in, float *out, size_t n);
uint8_t precis_f32_to_e3m2_bits(float x);
float precis_e3m2_bits_to_f32(uint8_t v);
float precis_round_e3m2(float x);
void precis_round_e3m2_array(const float *in, float *out, size_t n);

/* 4-bit codes (s4, u4, e2m1), two per byte: element 2i in the low nibble, 2i+1 in the high nibble
 * (CUDA's __nv_fp4x2 order). `packed` holds (n+1)/2 bytes; for odd n the last high nibble is 0.
 * Unpacking gives the nibble (u4, e2m1) or its sign extension (s4, as int8). */
void precis_pack_nibbles(const uint8_t *codes, size_t n, uint8_t *packed);
void precis_unpack_nibbles(const uint8_t *packed, size_t n, uint8_t *codes);
void precis_unpack_s4(const uint8_t *packed, size_t n, int8_t *values);

#endif
