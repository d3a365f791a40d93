/* The generic quantizer of quantize.h: groups on a 2-D grid, a scale rule per granularity, the
 * per-element rules of format_bits.h (shared with the CUDA kernels). docs/formats.md defines every
 * rule; this file only walks the groups.
 *
 * The matrix is walked one band of group rows at a time, always along its rows: the group maxima
 * of a band are gathered row by row (so `col` and B's k-groups, whose groups are columns, read
 * memory in order), then the band is encoded row by row. */
#include "quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format_bits.h"
#include "quant.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define PRECIS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PRECIS_VECTOR_CLONES
#endif

#define MX_BLOCK 32
#define NV_BLOCK 16
#define NV_TENSOR_DIVISOR 2688.0f /* 6 (e2m1 max) * 448 (e4m3 max) */
#define SMOOTH_MIN_SCALE 1e-5
#define SMOOTH_MAX_SCALE 1e5
#define SMOOTH_ERROR_COLUMNS 64

const char *precis_quant_gran_str(precis_quant_gran g) {
  switch (g) {
  case PRECIS_QUANT_GRAN_TENSOR: return "tensor";
  case PRECIS_QUANT_GRAN_ROW: return "row";
  case PRECIS_QUANT_GRAN_COL: return "col";
  case PRECIS_QUANT_GRAN_K: return "k";
  case PRECIS_QUANT_GRAN_BLOCK: return "block";
  case PRECIS_QUANT_GRAN_MX: return "mx";
  case PRECIS_QUANT_GRAN_MX_RCEIL: return "mx-rceil";
  case PRECIS_QUANT_GRAN_NV: return "nv";
  }
  return "unknown";
}

const char *precis_quant_int_str(precis_quant_int c) {
  switch (c) {
  case PRECIS_QUANT_INT_SYMMETRIC: return "symmetric";
  case PRECIS_QUANT_INT_SYMMETRIC_HALF: return "symmetric-half";
  case PRECIS_QUANT_INT_ASYMMETRIC: return "asymmetric";
  case PRECIS_QUANT_FP8_UE8M0: return "ue8m0";
  }
  return "unknown";
}

static bool is_float_elem(precis_format_id f) {
  return f == PRECIS_FMT_E4M3 || f == PRECIS_FMT_E5M2 || f == PRECIS_FMT_E2M1 || f == PRECIS_FMT_E2M3 ||
         f == PRECIS_FMT_E3M2;
}

static bool is_int_elem(precis_format_id f) {
  return f == PRECIS_FMT_I8 || f == PRECIS_FMT_S4 || f == PRECIS_FMT_U4 || f == PRECIS_FMT_S3 || f == PRECIS_FMT_S2;
}

/* The largest exponent of a normal element (OCP MX v1.0, table 1: emax_elem). */
/* The element's largest exponent, for the MX floor rule (OCP MX v1.0 §6.3: emax_elem): e4m3 8, e5m2
 * 15, e3m2 4, e2m3 2, e2m1 2. */
static int emax_elem(precis_format_id f) {
  return f == PRECIS_FMT_E4M3 ? 8 : f == PRECIS_FMT_E5M2 ? 15 : f == PRECIS_FMT_E3M2 ? 4 : 2;
}

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

precis_status precis_quant_layout_of(const precis_quant_desc *d, size_t rows, size_t cols, precis_quant_layout *out) {
  const precis_format *ef = precis_format_get(d->elem);
  if (!ef || !(is_float_elem(d->elem) || is_int_elem(d->elem)))
    return precis_fail(PRECIS_E_USAGE, "quantizer: element format \"%s\" cannot be quantized (expected e4m3, e5m2, "
                       "e2m1, int8, s4 or u4)", ef ? ef->name : "?");
  if (rows == 0 || cols == 0)
    return precis_fail(PRECIS_E_USAGE, "quantizer: empty %zux%zu matrix (expected at least 1x1)", rows, cols);
  if (d->side != PRECIS_OPERAND_A && d->side != PRECIS_OPERAND_B)
    return precis_fail(PRECIS_E_USAGE, "quantizer: operand side %d (expected A or B)", (int)d->side);
  if (is_int_elem(d->elem)) {
    bool asym = d->ints == PRECIS_QUANT_INT_ASYMMETRIC;
    bool sym = d->ints == PRECIS_QUANT_INT_SYMMETRIC || d->ints == PRECIS_QUANT_INT_SYMMETRIC_HALF;
    if (d->elem == PRECIS_FMT_U4 && !asym)
      return precis_fail(PRECIS_E_USAGE, "quantizer: u4 needs the asymmetric convention (a zero point), got %s",
                         precis_quant_int_str(d->ints));
    if (d->elem != PRECIS_FMT_U4 && !sym)
      return precis_fail(PRECIS_E_USAGE, "quantizer: %s needs a symmetric convention (qmax or qmax+0.5), got %s; "
                         "asymmetric 4-bit weights are u4", ef->name, precis_quant_int_str(d->ints));
  }
  precis_quant_layout l = {.scale_fmt = PRECIS_FMT_F32};
  size_t along_k = 0; /* group length along k for K, MX, NV */
  switch (d->gran) {
  case PRECIS_QUANT_GRAN_TENSOR: l.group_rows = rows, l.group_cols = cols; break;
  case PRECIS_QUANT_GRAN_ROW: l.group_rows = 1, l.group_cols = cols; break;
  case PRECIS_QUANT_GRAN_COL: l.group_rows = rows, l.group_cols = 1; break;
  case PRECIS_QUANT_GRAN_K:
    if (d->group < 1) return precis_fail(PRECIS_E_USAGE, "quantizer: k<G> needs G >= 1, got %d", d->group);
    along_k = (size_t)d->group;
    break;
  case PRECIS_QUANT_GRAN_BLOCK:
    if (d->group < 1 || d->group_cols < 1)
      return precis_fail(PRECIS_E_USAGE, "quantizer: <R>x<C> blocks need R, C >= 1, got %dx%d", d->group, d->group_cols);
    l.group_rows = (size_t)d->group, l.group_cols = (size_t)d->group_cols;
    break;
  case PRECIS_QUANT_GRAN_MX:
  case PRECIS_QUANT_GRAN_MX_RCEIL:
    if (!is_float_elem(d->elem))
      return precis_fail(PRECIS_E_USAGE, "quantizer: %s needs e4m3, e5m2, e3m2, e2m3 or e2m1 elements, got %s",
                         precis_quant_gran_str(d->gran), ef->name);
    along_k = MX_BLOCK;
    l.scale_fmt = PRECIS_FMT_E8M0;
    break;
  case PRECIS_QUANT_GRAN_NV:
    if (d->elem != PRECIS_FMT_E2M1)
      return precis_fail(PRECIS_E_USAGE, "quantizer: nv (NVFP4) needs e2m1 elements, got %s", ef->name);
    along_k = NV_BLOCK;
    l.scale_fmt = PRECIS_FMT_E4M3;
    l.has_tensor_scale = true;
    break;
  default: return precis_fail(PRECIS_E_USAGE, "quantizer: unknown granularity %d", (int)d->gran);
  }
  if (d->ints == PRECIS_QUANT_FP8_UE8M0) {
    bool fp32_scaled = l.scale_fmt == PRECIS_FMT_F32;
    if (!fp32_scaled || (d->elem != PRECIS_FMT_E4M3 && d->elem != PRECIS_FMT_E5M2))
      return precis_fail(PRECIS_E_USAGE, "quantizer: ue8m0 scales need e4m3/e5m2 elements with tensor, row, col, k<G> "
                                         "or <R>x<C> groups, got %s@%s",
                         ef->name, precis_quant_gran_str(d->gran));
    l.scale_fmt = PRECIS_FMT_E8M0;
  }
  if (along_k) {
    l.group_rows = d->side == PRECIS_OPERAND_A ? 1 : along_k;
    l.group_cols = d->side == PRECIS_OPERAND_A ? along_k : 1;
  }
  l.group_rows = l.group_rows < rows ? l.group_rows : rows;
  l.group_cols = l.group_cols < cols ? l.group_cols : cols;
  l.scale_rows = div_up(rows, l.group_rows);
  l.scale_cols = div_up(cols, l.group_cols);
  l.scale_count = l.scale_rows * l.scale_cols;
  l.has_zero_points = is_int_elem(d->elem) && d->ints == PRECIS_QUANT_INT_ASYMMETRIC;
  l.code_bytes = div_up(rows * cols * (size_t)ef->storage_bits, 8);
  l.scale_bytes = l.scale_count * (size_t)precis_format_get(l.scale_fmt)->storage_bits / 8;
  if (l.has_zero_points) l.scale_bytes += div_up(l.scale_count * (size_t)ef->storage_bits, 8);
  if (l.has_tensor_scale) l.scale_bytes += sizeof(float);
  *out = l;
  return PRECIS_OK;
}

/* ---- encoding: one loop per element rule, with one divisor d (and zero point z) per element: each
 * row is encoded in one call, whatever the group shape, with the group divisors spread over the
 * row's columns (a row of floats that stays in cache). ---- */
#define SPAN_CHUNK ((size_t)1 << 30)
#define DEFINE_SPAN(name, RULE)                                                                                  \
  PRECIS_VECTOR_CLONES static size_t name##_span(const float *restrict x, size_t n, const float *restrict dv,    \
                                                 const float *restrict zv, float qmin, float qmax,              \
                                                 uint8_t *restrict codes) {                                     \
    size_t clipped = 0;                                                                                          \
    /* A 32-bit count per chunk: a 64-bit one costs the vector loop widening steps. */                          \
    for (size_t i0 = 0; i0 < n; i0 += SPAN_CHUNK) {                                                              \
      size_t end = n - i0 < SPAN_CHUNK ? n : i0 + SPAN_CHUNK;                                                    \
      uint32_t chunk_clipped = 0;                                                                                \
      for (size_t i = i0; i < end; i++) {                                                                        \
        int c;                                                                                                   \
        float xi = x[i], di = dv[i], zi = zv[i];                                                                 \
        codes[i] = (uint8_t)(RULE);                                                                              \
        chunk_clipped += (uint32_t)c;                                                                            \
        (void)zi;                                                                                                \
      }                                                                                                          \
      clipped += chunk_clipped;                                                                                  \
    }                                                                                                            \
    (void)qmin, (void)qmax;                                                                                      \
    return clipped;                                                                                              \
  }

/* RULE encodes xi with the divisor di (and zero point zi), and sets c when the input clipped. The
 * rules are written without branches (format_bits.h) so that these loops vectorize. */
DEFINE_SPAN(e4m3, precis_bits_fp8_quantize(xi, di, &c))
DEFINE_SPAN(e5m2, precis_bits_e5m2_quantize(xi, di, &c))
DEFINE_SPAN(e2m1, precis_bits_e2m1_quantize(xi, di, &c))
DEFINE_SPAN(e2m3, precis_bits_fp6_quantize(xi, di, &c, 0))
DEFINE_SPAN(e3m2, precis_bits_fp6_quantize(xi, di, &c, 1))
DEFINE_SPAN(int, precis_bits_int_quantize(xi, di, zi, qmin, qmax, &c))

/* ---- AVX2 encoders: the same rules, eight elements at a time, 32 codes per store. GCC does not
 * vectorize these rules well on its own (the 32-to-8-bit narrowing of the codes and the NaN/zero
 * selects cost more than the arithmetic), so they are written with intrinsics and chosen at run
 * time (encoder_of). The floating-point formats round by addition: for |v| in [2^e, 2^(e+1)) (or
 * below the smallest normal) M = 2^(e + 23 - fraction bits) (at least the subnormal unit times
 * 2^23) has the format's spacing as its ulp, so the IEEE sum |v| + M, rounded to nearest even, is
 * M plus |v| rounded to the format, and the difference of the bit patterns counts its units; the
 * exponent of M gives the code's exponent field. Saturation, NaN and zero divisors are the scalar
 * rules' selects. tests/exhaustive_quantize_spans.c checks every fp32 input against the scalar
 * rules (format_bits.h). ---- */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PRECIS_AVX2_SPANS 1
#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2"))) static inline
#define V32(v) _mm256_set1_epi32((int)(v))

/* |v| rounded to nearest even on a float grid by adding M (see above): the code's magnitude bits.
 * mant_bits: the format's fraction bits; min_m_exp: the biased exponent of the smallest M (the
 * subnormal unit times 2^23). Inputs whose M overflows are saturated by the caller. */
AVX2_FN __m256i avx2_round_magnitude(__m256i a, int mant_bits, unsigned min_m_exp) {
  __m256i m = _mm256_max_epu32(_mm256_add_epi32(_mm256_and_si256(a, V32(0x7f800000u)), V32((23u - (unsigned)mant_bits) << 23)),
                               V32(min_m_exp << 23));
  __m256i sum = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(m)));
  __m256i exp_field = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_srli_epi32(m, 23), V32(min_m_exp)), mant_bits);
  return _mm256_add_epi32(_mm256_sub_epi32(sum, m), exp_field);
}

/* Lanes with a zero divisor: code 0, clipped when x is not finite (the scalar rules' zero_scale).
 * Every rule ends here: it counts the lane's clipping into *clip (a mask is -1, so subtracting it
 * adds 1) and returns the codes. */
AVX2_FN __m256i avx2_zero_divisor(__m256 x, __m256 d, __m256i code, __m256i clipped, __m256i *clip) {
  __m256i zero = _mm256_castps_si256(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ));
  __m256i x_abs = _mm256_and_si256(_mm256_castps_si256(x), V32(0x7fffffffu));
  __m256i not_finite = _mm256_cmpgt_epi32(x_abs, V32(0x7f7fffffu));
  *clip = _mm256_sub_epi32(*clip, _mm256_blendv_epi8(clipped, not_finite, zero));
  return _mm256_andnot_si256(zero, code);
}

/* precis_bits_fp8_quantize */
AVX2_FN __m256i avx2_e4m3(__m256 x, __m256 d, __m256 z, __m256 qmin, __m256 qmax, __m256i *clip) {
  (void)z, (void)qmin, (void)qmax;
  __m256i u = _mm256_castps_si256(_mm256_div_ps(x, d));
  __m256i a = _mm256_and_si256(u, V32(0x7fffffffu));
  __m256i saturated = _mm256_cmpgt_epi32(a, V32(0x43e80000u)); /* |v| > 464, NaN included */
  __m256i mag = _mm256_blendv_epi8(avx2_round_magnitude(a, 3, 141), V32(0x7eu), saturated);
  __m256i code = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 24), V32(0x80u)), mag);
  __m256i nan_code = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 24), V32(0x80u)),
                                     V32(0x7fu));
  code = _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(a, V32(0x7f800000u)));
  return avx2_zero_divisor(x, d, code, saturated, clip);
}

/* precis_bits_e5m2_quantize (satfinite) */
AVX2_FN __m256i avx2_e5m2(__m256 x, __m256 d, __m256 z, __m256 qmin, __m256 qmax, __m256i *clip) {
  (void)z, (void)qmin, (void)qmax;
  __m256i u = _mm256_castps_si256(_mm256_div_ps(x, d));
  __m256i a = _mm256_and_si256(u, V32(0x7fffffffu));
  __m256i saturated = _mm256_cmpgt_epi32(a, V32(0x476fffffu)); /* |v| >= 61440, inf and NaN included */
  __m256i mag = _mm256_blendv_epi8(avx2_round_magnitude(a, 2, 134), V32(0x7bu), saturated);
  __m256i code = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 24), V32(0x80u)), mag);
  __m256i nan_code = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 24), V32(0x80u)),
                                     V32(0x7eu));
  code = _mm256_blendv_epi8(code, nan_code, _mm256_cmpgt_epi32(a, V32(0x7f800000u)));
  return avx2_zero_divisor(x, d, code, saturated, clip);
}

/* precis_bits_e2m1_quantize: NaN gives +6 (code 7), |v| >= 7 saturates to 6 with v's sign. */
AVX2_FN __m256i avx2_e2m1(__m256 x, __m256 d, __m256 z, __m256 qmin, __m256 qmax, __m256i *clip) {
  (void)z, (void)qmin, (void)qmax;
  __m256i u = _mm256_castps_si256(_mm256_div_ps(x, d));
  __m256i a = _mm256_and_si256(u, V32(0x7fffffffu));
  __m256i saturated = _mm256_cmpgt_epi32(a, V32(0x40dfffffu)); /* |v| >= 7, inf and NaN included */
  __m256i mag = _mm256_blendv_epi8(avx2_round_magnitude(a, 1, 149), V32(0x7u), saturated);
  __m256i nan = _mm256_cmpgt_epi32(a, V32(0x7f800000u));
  __m256i sign = _mm256_andnot_si256(nan, _mm256_and_si256(_mm256_srli_epi32(u, 28), V32(0x8u)));
  return avx2_zero_divisor(x, d, _mm256_or_si256(sign, mag), saturated, clip);
}

/* precis_bits_int_quantize: clamp(rne(x/d) + z, qmin, qmax), NaN -> z; the code is the low byte. */
AVX2_FN __m256i avx2_int(__m256 x, __m256 d, __m256 z, __m256 qmin, __m256 qmax, __m256i *clip) {
  __m256 v = _mm256_div_ps(x, d);
  __m256 r = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
  __m256 over = _mm256_cmp_ps(r, qmax, _CMP_GT_OQ), under = _mm256_cmp_ps(r, qmin, _CMP_LT_OQ);
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  __m256 t = _mm256_blendv_ps(r, qmax, over);
  t = _mm256_blendv_ps(t, qmin, under);
  t = _mm256_blendv_ps(t, z, nan);
  __m256i clipped = _mm256_castps_si256(_mm256_or_ps(_mm256_or_ps(over, under), nan));
  __m256i code = _mm256_and_si256(_mm256_cvttps_epi32(t), V32(0xffu));
  return avx2_zero_divisor(x, d, code, clipped, clip);
}

/* The span loop: 32 elements per store (the four groups' codes packed to bytes in order), the tail
 * by the scalar span. */
#define DEFINE_AVX2_SPAN(name)                                                                                  \
  __attribute__((target("avx2"))) static size_t name##_span_avx2(const float *restrict x, size_t n,            \
                                                                  const float *restrict dv,                   \
                                                                  const float *restrict zv, float qmin,       \
                                                                  float qmax, uint8_t *restrict codes) {      \
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);                                         \
    const __m256 lo = _mm256_set1_ps(qmin), hi = _mm256_set1_ps(qmax);                                        \
    size_t i = 0, clipped = 0;                                                                                 \
    while (i + 32 <= n) {                                                                                      \
      /* Per-lane counts of clipped elements stay far from overflow within a chunk. */                         \
      size_t end = n - i < SPAN_CHUNK ? n : i + SPAN_CHUNK;                                                    \
      __m256i clip = _mm256_setzero_si256();                                                                   \
      for (; i + 32 <= end; i += 32) {                                                                         \
        __m256i c[4];                                                                                          \
        for (int g = 0; g < 4; g++)                                                                            \
          c[g] = avx2_##name(_mm256_loadu_ps(x + i + 8 * g), _mm256_loadu_ps(dv + i + 8 * g),                  \
                             _mm256_loadu_ps(zv + i + 8 * g), lo, hi, &clip);                                   \
        __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3])); \
        _mm256_storeu_si256((__m256i *)(codes + i), _mm256_permutevar8x32_epi32(bytes, order));               \
      }                                                                                                        \
      uint32_t lanes[8];                                                                                       \
      _mm256_storeu_si256((__m256i *)lanes, clip);                                                             \
      for (int l = 0; l < 8; l++) clipped += lanes[l];                                                         \
    }                                                                                                          \
    return clipped + name##_span(x + i, n - i, dv + i, zv + i, qmin, qmax, codes + i);                         \
  }

DEFINE_AVX2_SPAN(e4m3)
DEFINE_AVX2_SPAN(e5m2)
DEFINE_AVX2_SPAN(e2m1)
DEFINE_AVX2_SPAN(int)
#else
#define PRECIS_AVX2_SPANS 0
#endif

typedef struct encoder {
  size_t (*span)(const float *, size_t, const float *, const float *, float, float, uint8_t *);
  float qmin, qmax;    /* integers */
  float max_elem;      /* the divisor of amax in the fp32 scale rules */
} encoder;

static encoder encoder_of(const precis_quant_desc *d) {
  encoder e = {0};
  switch (d->elem) {
  case PRECIS_FMT_E4M3: e = (encoder){e4m3_span, 0, 0, 448.0f}; break;
  case PRECIS_FMT_E5M2: e = (encoder){e5m2_span, 0, 0, 57344.0f}; break;
  case PRECIS_FMT_E2M1: e = (encoder){e2m1_span, 0, 0, 6.0f}; break;
  case PRECIS_FMT_E2M3: e = (encoder){e2m3_span, 0, 0, 7.5f}; break;
  case PRECIS_FMT_E3M2: e = (encoder){e3m2_span, 0, 0, 28.0f}; break;
  default: {
    float qmax = d->elem == PRECIS_FMT_I8 ? 127.0f : d->elem == PRECIS_FMT_S4 ? 7.0f : d->elem == PRECIS_FMT_S3 ? 3.0f
               : d->elem == PRECIS_FMT_S2 ? 1.0f : 15.0f;
    e = (encoder){int_span, -qmax, qmax, qmax};
    if (d->ints == PRECIS_QUANT_INT_SYMMETRIC_HALF) e.qmin = -qmax - 1.0f, e.max_elem = qmax + 0.5f;
    if (d->ints == PRECIS_QUANT_INT_ASYMMETRIC) e.qmin = 0.0f;
    break;
  }
  }
#if PRECIS_AVX2_SPANS
  /* FP6 has no AVX2 loop (the scalar one vectorizes by itself well enough for a rare format). */
  if (__builtin_cpu_supports("avx2") && e.span != e2m3_span && e.span != e3m2_span)
    e.span = e.span == e4m3_span ? e4m3_span_avx2 : e.span == e5m2_span ? e5m2_span_avx2
           : e.span == e2m1_span ? e2m1_span_avx2 : int_span_avx2;
#endif
  return e;
}

/* Group statistics of one band, gathered row by row: the largest finite |x| as a bit pattern, and
 * for asymmetric integers the min and max with non-finite values read as 0 (the range always
 * includes 0, as in GPTQ, so a 0 in place of inf/NaN changes nothing). */
PRECIS_VECTOR_CLONES static void band_absmax_percol(const float *row, size_t n, uint32_t *amax) {
  for (size_t j = 0; j < n; j++) {
    uint32_t a = precis_bits_finite_abs_bits(row[j]);
    amax[j] = a > amax[j] ? a : amax[j];
  }
}

/* The same along a row cut into groups of g columns: one call per row, not per group. */
PRECIS_VECTOR_CLONES static void row_groups_absmax(const float *row, size_t n, size_t g, uint32_t *amax) {
  for (size_t c0 = 0, gj = 0; c0 < n; c0 += g, gj++) {
    size_t len = n - c0 < g ? n - c0 : g;
    uint32_t m = amax[gj];
    for (size_t i = 0; i < len; i++) {
      uint32_t a = precis_bits_finite_abs_bits(row[c0 + i]);
      m = a > m ? a : m;
    }
    amax[gj] = m;
  }
}

#if PRECIS_AVX2_SPANS
/* row_groups_absmax for groups of a multiple of 8 columns: one vector max per 8 elements, one
 * horizontal max per group (GCC's own loop pays a peel and an epilogue per group). */
__attribute__((target("avx2"))) static void row_groups_absmax_avx2(const float *row, size_t n, size_t g,
                                                                   uint32_t *amax) {
  size_t full = n / g, gj = 0;
  for (; gj < full; gj++) {
    const float *p = row + gj * g;
    __m256i m = _mm256_setzero_si256();
    for (size_t i = 0; i < g; i += 8) {
      __m256i a = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(p + i)), V32(0x7fffffffu));
      /* finite |x| (its bits below the infinity's), else 0: precis_bits_finite_abs_bits */
      m = _mm256_max_epu32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(V32(0x7f800000u), a)));
    }
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
    uint32_t v = (uint32_t)_mm_cvtsi128_si32(h);
    amax[gj] = v > amax[gj] ? v : amax[gj];
  }
  if (full * g < n) row_groups_absmax(row + full * g, n - full * g, g, amax + full);
}
#endif

/* Per row, groups of g columns (one call per row); the vector loop where the CPU has it. */
static void row_groups_absmax_any(const float *row, size_t n, size_t g, uint32_t *amax) {
#if PRECIS_AVX2_SPANS
  if (g % 8 == 0 && __builtin_cpu_supports("avx2")) {
    row_groups_absmax_avx2(row, n, g, amax);
    return;
  }
#endif
  row_groups_absmax(row, n, g, amax);
}

PRECIS_VECTOR_CLONES static void band_minmax_percol(const float *row, size_t n, float *mn, float *mx) {
  for (size_t j = 0; j < n; j++) {
    float v = precis_bits_is_finite(row[j]) ? row[j] : 0.0f;
    mn[j] = v < mn[j] ? v : mn[j];
    mx[j] = v > mx[j] ? v : mx[j];
  }
}

static void row_groups_minmax(const float *row, size_t n, size_t g, float *mn, float *mx) {
  for (size_t c0 = 0, gj = 0; c0 < n; c0 += g, gj++) {
    size_t len = n - c0 < g ? n - c0 : g;
    float lo = mn[gj], hi = mx[gj];
    for (size_t i = 0; i < len; i++) {
      float v = precis_bits_is_finite(row[c0 + i]) ? row[c0 + i] : 0.0f;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    mn[gj] = lo, mx[gj] = hi;
  }
}

/* One group's scale: the value stored, its code (mx, nv), the zero point, and the divisor d of the
 * elements (0 for a group that quantizes to all zeros). */
/* The scale rule of the description, as format_bits.h numbers them (shared with the device). */
static int scale_rule_of(const precis_quant_desc *d) {
  switch (d->gran) {
  case PRECIS_QUANT_GRAN_MX: return PRECIS_SCALE_RULE_MX_FLOOR;
  case PRECIS_QUANT_GRAN_MX_RCEIL: return PRECIS_SCALE_RULE_MX_RCEIL;
  case PRECIS_QUANT_GRAN_NV: return PRECIS_SCALE_RULE_NV;
  default:
    if (d->ints == PRECIS_QUANT_FP8_UE8M0) return PRECIS_SCALE_RULE_MX_RCEIL; /* amax/max rounded up to a power of two */
    return is_int_elem(d->elem) && d->ints == PRECIS_QUANT_INT_ASYMMETRIC ? PRECIS_SCALE_RULE_ASYM
                                                                          : PRECIS_SCALE_RULE_DIVIDE;
  }
}

/* One band's groups: their maxima in, their scales, scale codes, zero points and each column's
 * divisor and zero point out. */
typedef struct band_scale_args {
  const uint32_t *amax;
  const float *mins, *maxs;
  size_t count, group_cols, cols;
  float max_elem;
  int emax_elem;
  float tensor_scale;
  float *scales;
  uint8_t *scale_codes; /* NULL: fp32 scales only */
  uint8_t *zero_points; /* NULL: symmetric */
  float *dv, *zv;
  const float *e4m3_values; /* nv: the value of each E4M3 code */
} band_scale_args;

/* The loop of one scale rule: RULE is a constant, so the rule's other branches fold away. */
#define BAND_SCALE_LOOP(RULE)                                                                                  \
  for (size_t gj = 0; gj < a->count; gj++) {                                                                   \
    precis_bits_scale g = precis_bits_group_scale(RULE, precis_f32_of_bits(a->amax[gj]), a->mins[gj],         \
                                                  a->maxs[gj], a->max_elem, a->emax_elem, a->tensor_scale);   \
    a->scales[gj] = g.scale;                                                                                   \
    if (a->scale_codes) a->scale_codes[gj] = (uint8_t)g.code;                                                  \
    size_t c0 = gj * a->group_cols, c1 = c0 + a->group_cols < a->cols ? c0 + a->group_cols : a->cols;         \
    for (size_t c = c0; c < c1; c++) a->dv[c] = g.divisor;                                                     \
    if (a->zero_points) {                                                                                      \
      a->zero_points[gj] = (uint8_t)g.zero;                                                                    \
      for (size_t c = c0; c < c1; c++) a->zv[c] = g.zero;                                                      \
    }                                                                                                          \
  }

#if PRECIS_AVX2_SPANS
/* The nv loop below, eight groups at a time (nv's groups of 16 make a million of them in a 4096²
 * matrix); returns the groups done, the rest is the scalar loop's. The quotient amax/(6·s2) is
 * finite and >= 0 (amax <= the tensor's amax = 2688·s2), so its E4M3 code needs no sign or NaN. */
__attribute__((target("avx2"))) static size_t nv_band_scales_avx2(const band_scale_args *a) {
  float denom = precis_mul_rn(6.0f, a->tensor_scale);
  const __m256 vdenom = _mm256_set1_ps(denom), vts = _mm256_set1_ps(a->tensor_scale);
  size_t gj = 0;
  for (; gj + 8 <= a->count; gj += 8) {
    __m256 amax = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(a->amax + gj)));
    __m256i q = _mm256_castps_si256(_mm256_div_ps(amax, vdenom));
    __m256i code = _mm256_blendv_epi8(avx2_round_magnitude(q, 3, 141), V32(0x7eu), _mm256_cmpgt_epi32(q, V32(0x43e80000u)));
    code = _mm256_blendv_epi8(code, V32(0x38u), _mm256_cmpeq_epi32(code, _mm256_setzero_si256()));
    __m256 scale = _mm256_i32gather_ps(a->e4m3_values, code, 4);
    __m256 divisor = _mm256_and_ps(_mm256_mul_ps(scale, vts), _mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_GT_OQ));
    _mm256_storeu_ps(a->scales + gj, scale);
    uint32_t codes[8];
    float divisors[8];
    _mm256_storeu_si256((__m256i *)codes, code);
    _mm256_storeu_ps(divisors, divisor);
    if (a->scale_codes)
      for (int l = 0; l < 8; l++) a->scale_codes[gj + (size_t)l] = (uint8_t)codes[l];
    if (a->group_cols == 1 && gj + 8 <= a->cols) {
      _mm256_storeu_ps(a->dv + gj, divisor); /* B: one group per column */
    } else if (a->group_cols == 16 && (gj + 8) * 16 <= a->cols) {
      for (int l = 0; l < 8; l++) { /* A: 16 columns per group */
        __m256 v = _mm256_set1_ps(divisors[l]);
        _mm256_storeu_ps(a->dv + (gj + (size_t)l) * 16, v);
        _mm256_storeu_ps(a->dv + (gj + (size_t)l) * 16 + 8, v);
      }
    } else {
      for (int l = 0; l < 8; l++) {
        size_t c0 = (gj + (size_t)l) * a->group_cols, c1 = c0 + a->group_cols < a->cols ? c0 + a->group_cols : a->cols;
        for (size_t c = c0; c < c1; c++) a->dv[c] = divisors[l];
      }
    }
  }
  return gj;
}
#endif

static void band_scales(int rule, const band_scale_args *a) {
  switch (rule) {
  case PRECIS_SCALE_RULE_MX_FLOOR: BAND_SCALE_LOOP(PRECIS_SCALE_RULE_MX_FLOOR) break;
  case PRECIS_SCALE_RULE_MX_RCEIL: BAND_SCALE_LOOP(PRECIS_SCALE_RULE_MX_RCEIL) break;
  case PRECIS_SCALE_RULE_NV: {
    /* precis_bits_group_scale's NV rule with the E4M3 decoding from a table (its branches made
     * this loop the slowest part of nv with groups of 16). */
    float denom = precis_mul_rn(6.0f, a->tensor_scale);
    size_t gj = 0;
#if PRECIS_AVX2_SPANS
    if (__builtin_cpu_supports("avx2")) gj = nv_band_scales_avx2(a);
#endif
    for (; gj < a->count; gj++) {
      float amax = precis_f32_of_bits(a->amax[gj]);
      uint32_t code = precis_bits_f32_to_e4m3(precis_div_rn(amax, denom));
      code = code == 0u ? 0x38u : code; /* a block scale that rounds to 0 becomes 1.0 */
      float scale = a->e4m3_values[code];
      float divisor = amax > 0.0f ? precis_mul_rn(scale, a->tensor_scale) : 0.0f;
      a->scales[gj] = scale;
      if (a->scale_codes) a->scale_codes[gj] = (uint8_t)code;
      size_t c0 = gj * a->group_cols, c1 = c0 + a->group_cols < a->cols ? c0 + a->group_cols : a->cols;
      for (size_t c = c0; c < c1; c++) a->dv[c] = divisor;
    }
    break;
  }
  case PRECIS_SCALE_RULE_ASYM: BAND_SCALE_LOOP(PRECIS_SCALE_RULE_ASYM) break;
  default: BAND_SCALE_LOOP(PRECIS_SCALE_RULE_DIVIDE) break;
  }
}

/* The statistics of band gi (its group rows): each group's amax bits, or (asymmetric) its min and
 * max, into amax / mins, maxs of l->scale_cols entries, which this sets first (mins and maxs may
 * be NULL when not asym). */
static void gather_band(const float *x, size_t rows, size_t cols, const precis_quant_layout *l, size_t gi, bool asym,
                        uint32_t *amax, float *mins, float *maxs) {
  size_t sc = l->scale_cols, gc = l->group_cols;
  size_t r0 = gi * l->group_rows, r1 = r0 + l->group_rows < rows ? r0 + l->group_rows : rows;
  memset(amax, 0, sc * sizeof *amax);
  if (mins && maxs)
    for (size_t j = 0; j < sc; j++) mins[j] = 0.0f, maxs[j] = 0.0f;
  for (size_t r = r0; r < r1; r++) {
    const float *row = x + r * cols;
    if (gc == 1) {
      if (asym) band_minmax_percol(row, cols, mins, maxs);
      else band_absmax_percol(row, cols, amax);
    } else {
      if (asym) row_groups_minmax(row, cols, gc, mins, maxs);
      else row_groups_absmax_any(row, cols, gc, amax);
    }
  }
}

/* nv_tensor_amax: NULL, or nv's static (calibrated) tensor amax in place of the matrix's own. */
static precis_status quantize_matrix(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                                     const float *nv_tensor_amax, precis_quant_tensor *q) {
  precis_status st = PRECIS_OK;
  precis_quant_layout l;
  uint32_t *amax = NULL, *all_amax = NULL;
  float *mins = NULL, *maxs = NULL, *dv = NULL, *zv = NULL;
  if ((st = precis_quant_layout_of(d, rows, cols, &l)) != PRECIS_OK) goto done;
  if (!q->codes || !q->scales || (l.has_zero_points && !q->zero_points)) {
    st = precis_fail(PRECIS_E_USAGE, "quantizer: the output needs codes, scales%s (allocate them from the layout)",
                     l.has_zero_points ? " and zero points" : "");
    goto done;
  }
  size_t sc = l.scale_cols, gc = l.group_cols;
  amax = malloc(sc * sizeof *amax);
  mins = malloc(sc * sizeof *mins);
  maxs = malloc(sc * sizeof *maxs);
  dv = malloc(cols * sizeof *dv); /* each column's divisor and zero point in the current band */
  zv = malloc(cols * sizeof *zv);
  if (!amax || !mins || !maxs || !dv || !zv) {
    st = precis_fail(PRECIS_E_NOMEM, "quantizer: cannot allocate scratch for a band of %zu columns", cols);
    goto done;
  }
  encoder e = encoder_of(d);
  int rule = scale_rule_of(d);
  bool asym = l.has_zero_points;
  q->tensor_scale = 1.0f;
  if (l.has_tensor_scale) {
    /* nv: the tensor scale needs the whole matrix before any block scale, so the matrix is read
     * twice. The first pass keeps every group's amax (their max is the tensor's), so that the
     * second only encodes, streaming, instead of waiting on memory for the maxima and then
     * computing. Without room for them, the maxima are gathered again band by band. */
    all_amax = calloc(l.scale_count, sizeof *all_amax);
    uint32_t m = 0;
    if (all_amax) {
      for (size_t gi = 0; gi < l.scale_rows; gi++)
        gather_band(x, rows, cols, &l, gi, false, all_amax + gi * sc, NULL, NULL);
      for (size_t i = 0; i < l.scale_count; i++) m = all_amax[i] > m ? all_amax[i] : m;
    }
    float s2 = nv_tensor_amax ? precis_div_rn(*nv_tensor_amax, NV_TENSOR_DIVISOR)
                              : precis_div_rn(all_amax ? precis_f32_of_bits(m) : precis_absmax(x, rows * cols), NV_TENSOR_DIVISOR);
    q->tensor_scale = s2 > 0.0f ? s2 : 1.0f;
  }
  for (size_t c = 0; c < cols; c++) zv[c] = 0.0f; /* symmetric formats keep these zero points */
  for (size_t j = 0; j < sc; j++) mins[j] = 0.0f, maxs[j] = 0.0f; /* nv gathers none; only asym reads them */
  float e4m3_values[256];
  for (int c = 0; c < 256; c++) e4m3_values[c] = precis_bits_e4m3_to_f32((uint8_t)c);
  size_t clipped = 0;
  for (size_t gi = 0; gi < l.scale_rows; gi++) {
    size_t r0 = gi * l.group_rows, r1 = r0 + l.group_rows < rows ? r0 + l.group_rows : rows;
    if (!all_amax) gather_band(x, rows, cols, &l, gi, asym, amax, mins, maxs);
    band_scale_args a = {.amax = all_amax ? all_amax + gi * sc : amax, .mins = mins, .maxs = maxs, .count = sc,
                         .group_cols = gc, .cols = cols,
                         .max_elem = e.max_elem, .emax_elem = emax_elem(d->elem), .tensor_scale = q->tensor_scale,
                         .scales = q->scales + gi * sc,
                         .scale_codes = q->scale_codes && l.scale_fmt != PRECIS_FMT_F32 ? q->scale_codes + gi * sc : NULL,
                         .zero_points = asym ? q->zero_points + gi * sc : NULL, .dv = dv, .zv = zv,
                         .e4m3_values = e4m3_values};
    band_scales(rule, &a);
    for (size_t r = r0; r < r1; r++) clipped += e.span(x + r * cols, cols, dv, zv, e.qmin, e.qmax, q->codes + r * cols);
  }
  q->clipped = clipped;
done:
  free(all_amax);
  free(amax);
  free(mins);
  free(maxs);
  free(dv);
  free(zv);
  return st;
}

precis_status precis_quantize(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                              precis_quant_tensor *q) {
  return quantize_matrix(d, x, rows, cols, NULL, q);
}

precis_status precis_quantize_with_amax(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                                        float amax, precis_quant_tensor *q) {
  precis_quant_layout l;
  precis_status st = precis_quant_layout_of(d, rows, cols, &l);
  if (st != PRECIS_OK) return st;
  if (d->gran == PRECIS_QUANT_GRAN_NV) { /* a static second-level scale amax/2688; block scales stay dynamic */
    if (!(amax >= 0.0f) || !precis_bits_is_finite(amax))
      return precis_fail(PRECIS_E_USAGE, "quantizer: static amax %g (expected a finite value >= 0)", (double)amax);
    return quantize_matrix(d, x, rows, cols, &amax, q);
  }
  if (d->gran != PRECIS_QUANT_GRAN_TENSOR || l.has_zero_points)
    return precis_fail(PRECIS_E_USAGE, "quantizer: a static amax needs a per-tensor description with float elements "
                       "or a symmetric integer convention (got %s, %s)", precis_quant_gran_str(d->gran),
                       precis_quant_int_str(d->ints));
  if (!(amax >= 0.0f) || !precis_bits_is_finite(amax))
    return precis_fail(PRECIS_E_USAGE, "quantizer: static amax %g (expected a finite value >= 0)", (double)amax);
  if (!q->codes || !q->scales)
    return precis_fail(PRECIS_E_USAGE, "quantizer: the output needs codes and scales (allocate them from the layout)");
  if (d->ints == PRECIS_QUANT_FP8_UE8M0)
    return precis_fail(PRECIS_E_USAGE, "quantizer: a static amax gives an fp32 scale; ue8m0 scales are dynamic only");
  float *dv = malloc(cols * sizeof *dv), *zv = calloc(cols, sizeof *zv);
  if (!dv || !zv) {
    free(dv);
    free(zv);
    return precis_fail(PRECIS_E_NOMEM, "quantizer: cannot allocate scratch for a band of %zu columns", cols);
  }
  encoder e = encoder_of(d);
  precis_bits_scale g = precis_bits_group_scale(PRECIS_SCALE_RULE_DIVIDE, amax, 0.0f, 0.0f, e.max_elem,
                                                emax_elem(d->elem), 1.0f);
  q->scales[0] = g.scale;
  q->tensor_scale = 1.0f;
  for (size_t c = 0; c < cols; c++) dv[c] = g.divisor;
  size_t clipped = 0;
  for (size_t r = 0; r < rows; r++) clipped += e.span(x + r * cols, cols, dv, zv, e.qmin, e.qmax, q->codes + r * cols);
  q->clipped = clipped;
  free(dv);
  free(zv);
  return PRECIS_OK;
}

static float decode_code(precis_format_id f, uint8_t c) {
  switch (f) {
  case PRECIS_FMT_E4M3: return precis_bits_e4m3_to_f32(c);
  case PRECIS_FMT_E5M2: return precis_bits_e5m2_to_f32(c);
  case PRECIS_FMT_E2M1: return precis_bits_e2m1_to_f32(c);
  case PRECIS_FMT_E2M3: return precis_bits_e2m3_to_f32(c);
  case PRECIS_FMT_E3M2: return precis_bits_e3m2_to_f32(c);
  case PRECIS_FMT_U4: return (float)c;
  default: return (float)(int8_t)c; /* int8, s4 (sign-extended) */
  }
}

precis_status precis_dequantize(const precis_quant_desc *d, const precis_quant_tensor *q, size_t rows, size_t cols,
                                float *y) {
  precis_quant_layout l;
  precis_status st = precis_quant_layout_of(d, rows, cols, &l);
  if (st != PRECIS_OK) return st;
  bool nv = d->gran == PRECIS_QUANT_GRAN_NV;
  float table[256];
  for (int c = 0; c < 256; c++) table[c] = decode_code(d->elem, (uint8_t)c);
  for (size_t r = 0; r < rows; r++) {
    size_t gi = r / l.group_rows;
    for (size_t c = 0; c < cols; c++) {
      size_t idx = gi * l.scale_cols + c / l.group_cols;
      float v = table[q->codes[r * cols + c]];
      if (l.has_zero_points) v = v - (float)q->zero_points[idx]; /* exact: small integers */
      float s = q->scales[idx];
      y[r * cols + c] = nv ? precis_mul_rn(precis_mul_rn(v, s), q->tensor_scale) : precis_mul_rn(v, s);
    }
  }
  return PRECIS_OK;
}

/* ---- SmoothQuant ---- */
precis_status precis_smooth_scales(const float *x, size_t m, size_t k, const float *w, size_t n, double alpha,
                                   float *s) {
  if (!(alpha >= 0.0 && alpha <= 1.0))
    return precis_fail(PRECIS_E_USAGE, "smoothquant: alpha %g is out of range (expected 0 <= alpha <= 1, or auto)", alpha);
  uint32_t *xmax = calloc(k ? k : 1, sizeof *xmax);
  if (!xmax) return precis_fail(PRECIS_E_NOMEM, "smoothquant: cannot allocate %zu channel maxima", k);
  for (size_t i = 0; i < m; i++) band_absmax_percol(x + i * k, k, xmax);
  for (size_t j = 0; j < k; j++) {
    double ax = precis_f32_of_bits(xmax[j]);
    double aw = precis_absmax(w + j * n, n);
    double v = 1.0;
    if (ax > 0.0 && aw > 0.0) v = pow(ax, alpha) / pow(aw, 1.0 - alpha);
    v = v < SMOOTH_MIN_SCALE ? SMOOTH_MIN_SCALE : (v > SMOOTH_MAX_SCALE ? SMOOTH_MAX_SCALE : v);
    s[j] = (float)v;
  }
  free(xmax);
  return PRECIS_OK;
}

void precis_smooth_apply(float *x, size_t m, size_t k, float *w, size_t n, const float *s) {
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < k; j++) x[i * k + j] = precis_div_rn(x[i * k + j], s[j]);
  for (size_t j = 0; j < k; j++)
    for (size_t l = 0; l < n; l++) w[j * n + l] = precis_mul_rn(w[j * n + l], s[j]);
}

/* Quantize then dequantize a copy of v in place. */
static precis_status fake_quantize(const precis_quant_desc *d, float *v, size_t rows, size_t cols) {
  precis_status st;
  precis_quant_layout l;
  precis_quant_tensor q = {0};
  if ((st = precis_quant_layout_of(d, rows, cols, &l)) != PRECIS_OK) return st;
  q.codes = malloc(rows * cols);
  q.scales = malloc(l.scale_count * sizeof *q.scales);
  q.zero_points = malloc(l.scale_count);
  if (!q.codes || !q.scales || !q.zero_points) {
    st = precis_fail(PRECIS_E_NOMEM, "smoothquant: cannot allocate a %zux%zu quantized copy", rows, cols);
    goto done;
  }
  if ((st = precis_quantize(d, v, rows, cols, &q)) != PRECIS_OK) goto done;
  st = precis_dequantize(d, &q, rows, cols, v);
done:
  free(q.codes);
  free(q.scales);
  free(q.zero_points);
  return st;
}

precis_status precis_smooth_gemm_error(const float *s, void *ctx_v, double *error) {
  const precis_smooth_gemm_ctx *c = ctx_v;
  precis_status st = PRECIS_OK;
  float *xs = malloc(c->m * c->k * sizeof *xs), *ws = malloc(c->k * c->n * sizeof *ws);
  if (!xs || !ws) {
    st = precis_fail(PRECIS_E_NOMEM, "smoothquant: cannot allocate the smoothed %zux%zu and %zux%zu copies", c->m,
                     c->k, c->k, c->n);
    goto done;
  }
  memcpy(xs, c->x, c->m * c->k * sizeof *xs);
  memcpy(ws, c->w, c->k * c->n * sizeof *ws);
  precis_smooth_apply(xs, c->m, c->k, ws, c->n, s);
  if ((st = fake_quantize(&c->a, xs, c->m, c->k)) != PRECIS_OK) goto done;
  if ((st = fake_quantize(&c->b, ws, c->k, c->n)) != PRECIS_OK) goto done;
  size_t stride = div_up(c->n, SMOOTH_ERROR_COLUMNS);
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < c->m; i++) {
    for (size_t l = 0; l < c->n; l += stride) {
      double ref = 0.0, got = 0.0;
      for (size_t j = 0; j < c->k; j++) {
        ref += (double)c->x[i * c->k + j] * (double)c->w[j * c->n + l];
        got += (double)xs[i * c->k + j] * (double)ws[j * c->n + l];
      }
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  *error = den > 0.0 ? sqrt(num / den) : sqrt(num);
done:
  free(xs);
  free(ws);
  return st;
}

precis_status precis_smooth_search(const float *x, size_t m, size_t k, const float *w, size_t n,
                                   precis_smooth_error_fn error_fn, void *ctx, double *alpha_out, float *s_out) {
  precis_status st = PRECIS_OK;
  float *s = malloc((k ? k : 1) * sizeof *s);
  double best = INFINITY;
  int best_step = -1;
  if (!s) return precis_fail(PRECIS_E_NOMEM, "smoothquant: cannot allocate %zu scales", k);
  for (int step = 0; step <= 10; step++) {
    double alpha = step / 10.0, err;
    if ((st = precis_smooth_scales(x, m, k, w, n, alpha, s)) != PRECIS_OK) goto done;
    if ((st = error_fn(s, ctx, &err)) != PRECIS_OK) goto done;
    if (err < best) { /* strict: a tie keeps the smaller alpha; a NaN error never wins */
      best = err;
      best_step = step;
      memcpy(s_out, s, k * sizeof *s);
    }
  }
  if (best_step < 0) {
    st = precis_fail(PRECIS_E_INPUT, "smoothquant: alpha=auto found no finite error on the calibration data "
                     "(non-finite values in it?)");
    goto done;
  }
  *alpha_out = best_step / 10.0;
done:
  free(s);
  return st;
}
