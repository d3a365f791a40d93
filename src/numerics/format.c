/* The format table and the CPU conversions. The rounding rules themselves live in format_bits.h,
 * shared with the CUDA kernels; this file adds the table, the scalar wrappers and fast array loops. */
#include "format.h"

#include <float.h>
#include <string.h>

#include "format_bits.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define PRECIS_X86 1
#else
#define PRECIS_X86 0
#endif

/* Array loops are compiled twice, for AVX2 and for the baseline ISA, and picked at load time. */
#if PRECIS_X86 && defined(__GNUC__) && !defined(__clang__)
#define PRECIS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PRECIS_VECTOR_CLONES
#endif

uint16_t precis_f32_to_f16_bits(float x) { return precis_bits_f32_to_f16(x); }
float precis_f16_bits_to_f32(uint16_t h) { return precis_bits_f16_to_f32(h); }
uint16_t precis_f32_to_bf16_bits(float x) { return precis_bits_f32_to_bf16(x); }
float precis_bf16_bits_to_f32(uint16_t h) { return precis_bits_bf16_to_f32(h); }
uint8_t precis_f32_to_e4m3_bits(float x) { return precis_bits_f32_to_e4m3(x); }
float precis_e4m3_bits_to_f32(uint8_t v) { return precis_bits_e4m3_to_f32(v); }
uint8_t precis_f32_to_e5m2_bits(float x, bool satfinite) { return precis_bits_f32_to_e5m2(x, satfinite); }
float precis_e5m2_bits_to_f32(uint8_t v) { return precis_bits_e5m2_to_f32(v); }
float precis_round_tf32(float x) { return precis_bits_round_tf32(x); }

float precis_round_f16(float x) { return precis_bits_f16_to_f32(precis_bits_f32_to_f16(x)); }
float precis_round_bf16(float x) { return precis_bits_bf16_to_f32(precis_bits_f32_to_bf16(x)); }
float precis_round_e4m3(float x) { return precis_bits_e4m3_to_f32(precis_bits_f32_to_e4m3(x)); }
float precis_round_e5m2(float x) { return precis_bits_e5m2_to_f32(precis_bits_f32_to_e5m2(x, 0)); }
float precis_round_e5m2_satfinite(float x) { return precis_bits_e5m2_to_f32(precis_bits_f32_to_e5m2(x, 1)); }

uint8_t precis_f32_to_e2m1_bits(float x) { return precis_bits_f32_to_e2m1(x); }
float precis_e2m1_bits_to_f32(uint8_t v) { return precis_bits_e2m1_to_f32(v); }
float precis_round_e2m1(float x) { return precis_bits_e2m1_to_f32(precis_bits_f32_to_e2m1(x)); }
float precis_e8m0_bits_to_f32(uint8_t v) { return precis_bits_e8m0_to_f32(v); }

uint8_t precis_f32_to_e2m3_bits(float x) { return precis_bits_f32_to_e2m3(x); }
float precis_e2m3_bits_to_f32(uint8_t v) { return precis_bits_e2m3_to_f32(v); }
float precis_round_e2m3(float x) { return precis_bits_e2m3_to_f32(precis_bits_f32_to_e2m3(x)); }
uint8_t precis_f32_to_e3m2_bits(float x) { return precis_bits_f32_to_e3m2(x); }
float precis_e3m2_bits_to_f32(uint8_t v) { return precis_bits_e3m2_to_f32(v); }
float precis_round_e3m2(float x) { return precis_bits_e3m2_to_f32(precis_bits_f32_to_e3m2(x)); }

PRECIS_VECTOR_CLONES void precis_round_e2m3_array(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_e2m3_to_f32(precis_bits_f32_to_e2m3(in[i]));
}

PRECIS_VECTOR_CLONES void precis_round_e3m2_array(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_e3m2_to_f32(precis_bits_f32_to_e3m2(in[i]));
}

PRECIS_VECTOR_CLONES void precis_f32_to_e2m1_array(const float *in, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f32_to_e2m1(in[i]);
}

PRECIS_VECTOR_CLONES void precis_round_e2m1_array(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_e2m1_to_f32(precis_bits_f32_to_e2m1(in[i]));
}

void precis_pack_nibbles(const uint8_t *codes, size_t n, uint8_t *packed) {
  size_t pairs = n / 2;
  for (size_t i = 0; i < pairs; i++) packed[i] = precis_bits_pack_nibbles(codes[2 * i], codes[2 * i + 1]);
  if (n % 2) packed[pairs] = precis_bits_pack_nibbles(codes[n - 1], 0);
}

void precis_unpack_nibbles(const uint8_t *packed, size_t n, uint8_t *codes) {
  for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)((packed[i / 2] >> (4 * (i % 2))) & 0xfu);
}

void precis_unpack_s4(const uint8_t *packed, size_t n, int8_t *values) {
  for (size_t i = 0; i < n; i++) values[i] = precis_bits_s4_of_nibble((uint8_t)(packed[i / 2] >> (4 * (i % 2))));
}

static float round_identity(float x) { return x; }

static void round_identity_array(const float *in, float *out, size_t n) {
  if (in != out) memmove(out, in, n * sizeof *out);
}

/* ---- fp16: F16C when the CPU has it (its rounding, NaN rule included, is the one in
 * format_bits.h; the exhaustive test checks both against each other), else the portable loop. */
#if PRECIS_X86 && defined(__GNUC__)
#define PRECIS_HAVE_F16C_PATH 1
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *in, uint16_t *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(void *)(out + i), h);
  }
  for (; i < n; i++) out[i] = precis_bits_f32_to_f16(in[i]);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *in, float *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; i++) out[i] = precis_bits_f16_to_f32(in[i]);
}

__attribute__((target("avx,f16c"))) static void round_f16_f16c(const float *in, float *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; i++) out[i] = precis_round_f16(in[i]);
}

/* CPUID rather than __builtin_cpu_supports("f16c"), which clang 14 (the fuzzing build) lacks: AVX
 * and F16C (leaf 1, ECX), and the OS saving the YMM state (OSXSAVE, then XCR0 bits 1 and 2). */
static bool cpu_has_f16c(void) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if (!(ecx & bit_AVX) || !(ecx & bit_F16C) || !(ecx & bit_OSXSAVE)) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  return (xcr0_lo & 6u) == 6u;
}
#else
#define PRECIS_HAVE_F16C_PATH 0
#endif

PRECIS_VECTOR_CLONES static void f32_to_f16_portable(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f32_to_f16(in[i]);
}

void precis_f32_to_f16_array(const float *in, uint16_t *out, size_t n) {
#if PRECIS_HAVE_F16C_PATH
  if (cpu_has_f16c()) {
    f32_to_f16_f16c(in, out, n);
    return;
  }
#endif
  f32_to_f16_portable(in, out, n);
}

void precis_f16_to_f32_array(const uint16_t *in, float *out, size_t n) {
#if PRECIS_HAVE_F16C_PATH
  if (cpu_has_f16c()) {
    f16_to_f32_f16c(in, out, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f16_to_f32(in[i]);
}

/* The portable paths, exposed so that tests compare them with the dispatched ones. */
void precis_f32_to_f16_array_portable(const float *in, uint16_t *out, size_t n) { f32_to_f16_portable(in, out, n); }

void precis_round_f16_array(const float *in, float *out, size_t n) {
#if PRECIS_HAVE_F16C_PATH
  if (cpu_has_f16c()) {
    round_f16_f16c(in, out, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) out[i] = precis_round_f16(in[i]);
}

PRECIS_VECTOR_CLONES void precis_f32_to_bf16_array(const float *in, uint16_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f32_to_bf16(in[i]);
}

PRECIS_VECTOR_CLONES void precis_bf16_to_f32_array(const uint16_t *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_bf16_to_f32(in[i]);
}

PRECIS_VECTOR_CLONES void precis_round_bf16_array(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_bf16_to_f32(precis_bits_f32_to_bf16(in[i]));
}

PRECIS_VECTOR_CLONES void precis_round_tf32_array(const float *in, float *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_round_tf32(in[i]);
}

PRECIS_VECTOR_CLONES void precis_f32_to_e4m3_array(const float *in, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f32_to_e4m3(in[i]);
}

/* 256 codes: decoding is a table lookup. */
static float e4m3_decode_table[256];
static float e5m2_decode_table[256];
static int decode_tables_ready;

static void ensure_decode_tables(void) {
  if (__atomic_load_n(&decode_tables_ready, __ATOMIC_ACQUIRE)) return;
  /* Idempotent: concurrent first callers write identical values. */
  for (int v = 0; v < 256; v++) {
    e4m3_decode_table[v] = precis_bits_e4m3_to_f32((uint8_t)v);
    e5m2_decode_table[v] = precis_bits_e5m2_to_f32((uint8_t)v);
  }
  __atomic_store_n(&decode_tables_ready, 1, __ATOMIC_RELEASE);
}

void precis_e4m3_to_f32_array(const uint8_t *in, float *out, size_t n) {
  ensure_decode_tables();
  for (size_t i = 0; i < n; i++) out[i] = e4m3_decode_table[in[i]];
}

PRECIS_VECTOR_CLONES void precis_f32_to_e5m2_array(const float *in, uint8_t *out, size_t n, bool satfinite) {
  int sat = satfinite;
  for (size_t i = 0; i < n; i++) out[i] = precis_bits_f32_to_e5m2(in[i], sat);
}

void precis_e5m2_to_f32_array(const uint8_t *in, float *out, size_t n) {
  ensure_decode_tables();
  for (size_t i = 0; i < n; i++) out[i] = e5m2_decode_table[in[i]];
}

PRECIS_VECTOR_CLONES void precis_round_e4m3_array(const float *in, float *out, size_t n) {
  ensure_decode_tables();
  for (size_t i = 0; i < n; i++) out[i] = e4m3_decode_table[precis_bits_f32_to_e4m3(in[i])];
}

PRECIS_VECTOR_CLONES void precis_round_e5m2_array(const float *in, float *out, size_t n) {
  ensure_decode_tables();
  for (size_t i = 0; i < n; i++) out[i] = e5m2_decode_table[precis_bits_f32_to_e5m2(in[i], 0)];
}

/* One row per format; every per-format decision elsewhere reads this table. */
static const precis_format formats[PRECIS_FMT_COUNT] = {
    [PRECIS_FMT_F64] = {.id = PRECIS_FMT_F64, .name = "fp64", .long_name = "IEEE 754 binary64",
                        .storage_bits = 64, .significand_bits = 53, .unit_roundoff = 0x1p-53,
                        .max_finite = DBL_MAX, .min_normal = 0x1p-1022, .min_subnormal = 0x1p-1074,
                        .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_64F,
                        .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_F32] = {.id = PRECIS_FMT_F32, .name = "fp32", .long_name = "IEEE 754 binary32",
                        .storage_bits = 32, .significand_bits = 24, .unit_roundoff = 0x1p-24,
                        .max_finite = 0x1.fffffep127, .min_normal = 0x1p-126, .min_subnormal = 0x1p-149,
                        .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_32F,
                        .round_f32 = round_identity, .round_array = round_identity_array},
    [PRECIS_FMT_TF32] = {.id = PRECIS_FMT_TF32, .name = "tf32",
                         .long_name = "NVIDIA TensorFloat-32 (fp32 range, 10 fraction bits, stored as fp32)",
                         .storage_bits = 32, .significand_bits = 11, .unit_roundoff = 0x1p-11,
                         .max_finite = 0x1.ffcp127, .min_normal = 0x1p-126, .min_subnormal = 0x1p-136,
                         .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_32F,
                         .round_f32 = precis_round_tf32, .round_array = precis_round_tf32_array},
    [PRECIS_FMT_F16] = {.id = PRECIS_FMT_F16, .name = "fp16", .long_name = "IEEE 754 binary16",
                        .storage_bits = 16, .significand_bits = 11, .unit_roundoff = 0x1p-11,
                        .max_finite = 65504.0, .min_normal = 0x1p-14, .min_subnormal = 0x1p-24,
                        .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_16F,
                        .round_f32 = precis_round_f16, .round_array = precis_round_f16_array},
    [PRECIS_FMT_BF16] = {.id = PRECIS_FMT_BF16, .name = "bf16", .long_name = "bfloat16 (fp32 range, 7 fraction bits)",
                         .storage_bits = 16, .significand_bits = 8, .unit_roundoff = 0x1p-8,
                         .max_finite = 0x1.fep127, .min_normal = 0x1p-126, .min_subnormal = 0x1p-133,
                         .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_16BF,
                         .round_f32 = precis_round_bf16, .round_array = precis_round_bf16_array},
    [PRECIS_FMT_E4M3] = {.id = PRECIS_FMT_E4M3, .name = "e4m3", .long_name = "OCP FP8 E4M3 (satfinite, no inf)",
                         .storage_bits = 8, .significand_bits = 4, .unit_roundoff = 0x1p-4,
                         .max_finite = 448.0, .min_normal = 0x1p-6, .min_subnormal = 0x1p-9,
                         .has_inf = false, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_8F_E4M3,
                         .round_f32 = precis_round_e4m3, .round_array = precis_round_e4m3_array},
    [PRECIS_FMT_E5M2] = {.id = PRECIS_FMT_E5M2, .name = "e5m2", .long_name = "OCP FP8 E5M2",
                         .storage_bits = 8, .significand_bits = 3, .unit_roundoff = 0x1p-3,
                         .max_finite = 57344.0, .min_normal = 0x1p-14, .min_subnormal = 0x1p-16,
                         .has_inf = true, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_8F_E5M2,
                         .round_f32 = precis_round_e5m2, .round_array = precis_round_e5m2_array},
    [PRECIS_FMT_I8] = {.id = PRECIS_FMT_I8, .name = "s8", .long_name = "signed 8-bit integer (symmetric, -127..127)",
                       .storage_bits = 8, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 127.0,
                       .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                       .cuda_data_type = PRECIS_CUDA_R_8I, .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_I32] = {.id = PRECIS_FMT_I32, .name = "s32", .long_name = "signed 32-bit integer (accumulator)",
                        .storage_bits = 32, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 2147483647.0,
                        .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                        .cuda_data_type = PRECIS_CUDA_R_32I, .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_E2M1] = {.id = PRECIS_FMT_E2M1, .name = "e2m1",
                         .long_name = "OCP MX FP4 E2M1 (satfinite, no inf, no NaN; two per byte)",
                         .storage_bits = 4, .significand_bits = 2, .unit_roundoff = 0x1p-2,
                         .max_finite = 6.0, .min_normal = 1.0, .min_subnormal = 0.5,
                         .has_inf = false, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_4F_E2M1,
                         .round_f32 = precis_round_e2m1, .round_array = precis_round_e2m1_array},
    /* A scale, set from an exponent by the MX rules rather than rounded from fp32: no round_f32. */
    [PRECIS_FMT_E8M0] = {.id = PRECIS_FMT_E8M0, .name = "e8m0",
                         .long_name = "OCP MX E8M0 scale (UE8M0: 2^(e-127), 0xff NaN, no zero, no sign)",
                         .storage_bits = 8, .significand_bits = 1, .unit_roundoff = 0x1p-1,
                         .max_finite = 0x1p127, .min_normal = 0x1p-127, .min_subnormal = 0x1p-127,
                         .has_inf = false, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_8F_UE8M0,
                         .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_S4] = {.id = PRECIS_FMT_S4, .name = "s4", .long_name = "signed 4-bit integer (-8..7, two per byte)",
                       .storage_bits = 4, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 7.0,
                       .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                       .cuda_data_type = PRECIS_CUDA_R_4I, .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_U4] = {.id = PRECIS_FMT_U4, .name = "u4",
                       .long_name = "unsigned 4-bit integer (0..15 with a zero point, two per byte)",
                       .storage_bits = 4, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 15.0,
                       .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                       .cuda_data_type = PRECIS_CUDA_R_4U, .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_E2M3] = {.id = PRECIS_FMT_E2M3, .name = "e2m3",
                         .long_name = "OCP MX FP6 E2M3 (satfinite, no inf, no NaN; 6 bits)",
                         .storage_bits = 6, .significand_bits = 4, .unit_roundoff = 0x1p-4,
                         .max_finite = 7.5, .min_normal = 1.0, .min_subnormal = 0.125,
                         .has_inf = false, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_6F_E2M3,
                         .round_f32 = precis_round_e2m3, .round_array = precis_round_e2m3_array},
    [PRECIS_FMT_E3M2] = {.id = PRECIS_FMT_E3M2, .name = "e3m2",
                         .long_name = "OCP MX FP6 E3M2 (satfinite, no inf, no NaN; 6 bits)",
                         .storage_bits = 6, .significand_bits = 3, .unit_roundoff = 0x1p-3,
                         .max_finite = 28.0, .min_normal = 0.25, .min_subnormal = 0.0625,
                         .has_inf = false, .is_float = true, .cuda_data_type = PRECIS_CUDA_R_6F_E3M2,
                         .round_f32 = precis_round_e3m2, .round_array = precis_round_e3m2_array},
    /* Issue 39: the low-bit integer weights of compressed-tensors' W2A16 / W3A16 (codes packed densely
     * into int32 by its pack-quantized format: ceil(E * bits / 32) words). cuBLASLt has no such type. */
    [PRECIS_FMT_S2] = {.id = PRECIS_FMT_S2, .name = "s2", .long_name = "signed 2-bit integer (-2..1)",
                       .storage_bits = 2, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 1.0,
                       .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                       .cuda_data_type = -1, .round_f32 = NULL, .round_array = NULL},
    [PRECIS_FMT_S3] = {.id = PRECIS_FMT_S3, .name = "s3", .long_name = "signed 3-bit integer (-4..3)",
                       .storage_bits = 3, .significand_bits = 0, .unit_roundoff = 0.0, .max_finite = 3.0,
                       .min_normal = 0.0, .min_subnormal = 0.0, .has_inf = false, .is_float = false,
                       .cuda_data_type = -1, .round_f32 = NULL, .round_array = NULL},
};

const precis_format *precis_format_get(precis_format_id id) {
  if ((unsigned)id >= PRECIS_FMT_COUNT) return NULL;
  return &formats[id];
}

const precis_format *precis_format_by_name(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < PRECIS_FMT_COUNT; i++)
    if (strcmp(formats[i].name, name) == 0) return &formats[i];
  return NULL;
}
