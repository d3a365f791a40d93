/* Transposes (numerics/transpose.h). On x86 with AVX2, 8 x 8 blocks are transposed in registers
 * (unpack, shuffle, permute) and stored a row of the output at a time; bands of 32 input rows keep
 * the output rows being written few enough for the cache. Elsewhere, and for the edges, tiles of
 * 32 x 32 elements read along rows and written along columns. Values are moved (or widened, which
 * is exact), never rounded: every path gives the same bits. */
#include "transpose.h"

#include <math.h>
#include <stdint.h>

#include "base/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PRECIS_AVX2_TRANSPOSE 1
#include <immintrin.h>
#else
#define PRECIS_AVX2_TRANSPOSE 0
#endif

enum { TILE = 32, BAND = 32 };

typedef enum { AS_F32, AS_F64, AS_F64_ABS } transposed_as;

/* Scalar tiles over input rows [r_first, r_end) x columns [c_first, c_end): everything without
 * AVX2, else what the 8 x 8 blocks leave. */
static void scalar_part(const float *in, size_t in_stride, size_t r_first, size_t r_end, size_t c_first, size_t c_end,
                        void *out, size_t out_stride, transposed_as as) {
  for (size_t r0 = r_first; r0 < r_end; r0 += TILE) {
    const size_t r1 = r_end - r0 < TILE ? r_end : r0 + TILE;
    for (size_t c0 = c_first; c0 < c_end; c0 += TILE) {
      const size_t c1 = c_end - c0 < TILE ? c_end : c0 + TILE;
      for (size_t c = c0; c < c1; c++)
        for (size_t r = r0; r < r1; r++) {
          const float x = in[r * in_stride + c];
          if (as == AS_F32) ((float *)out)[c * out_stride + r] = x;
          else ((double *)out)[c * out_stride + r] = as == AS_F64_ABS ? fabs((double)x) : (double)x;
        }
    }
  }
}

#if PRECIS_AVX2_TRANSPOSE
__attribute__((target("avx2"))) static void transpose_avx2(const float *in, size_t is, size_t rows, size_t cols,
                                                           void *out, size_t os, transposed_as as) {
  const size_t rows8 = rows & ~(size_t)7, cols8 = cols & ~(size_t)7;
  const __m256d sign = _mm256_set1_pd(-0.0);
  for (size_t band = 0; band < rows8; band += BAND) {
    const size_t band_end = band + BAND < rows8 ? band + BAND : rows8;
    for (size_t c0 = 0; c0 < cols8; c0 += 8)
      for (size_t r0 = band; r0 < band_end; r0 += 8) {
        const float *p = in + r0 * is + c0;
        __m256 x0 = _mm256_loadu_ps(p), x1 = _mm256_loadu_ps(p + is), x2 = _mm256_loadu_ps(p + 2 * is),
               x3 = _mm256_loadu_ps(p + 3 * is), x4 = _mm256_loadu_ps(p + 4 * is), x5 = _mm256_loadu_ps(p + 5 * is),
               x6 = _mm256_loadu_ps(p + 6 * is), x7 = _mm256_loadu_ps(p + 7 * is);
        __m256 t0 = _mm256_unpacklo_ps(x0, x1), t1 = _mm256_unpackhi_ps(x0, x1), t2 = _mm256_unpacklo_ps(x2, x3),
               t3 = _mm256_unpackhi_ps(x2, x3), t4 = _mm256_unpacklo_ps(x4, x5), t5 = _mm256_unpackhi_ps(x4, x5),
               t6 = _mm256_unpacklo_ps(x6, x7), t7 = _mm256_unpackhi_ps(x6, x7);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        __m256 y[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                       _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                       _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                       _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
        for (size_t c = 0; c < 8; c++) {
          if (as == AS_F32) {
            _mm256_storeu_ps((float *)out + (c0 + c) * os + r0, y[c]);
          } else {
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(y[c])), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(y[c], 1));
            if (as == AS_F64_ABS) lo = _mm256_andnot_pd(sign, lo), hi = _mm256_andnot_pd(sign, hi);
            double *o = (double *)out + (c0 + c) * os + r0;
            _mm256_storeu_pd(o, lo);
            _mm256_storeu_pd(o + 4, hi);
          }
        }
      }
  }
  scalar_part(in, is, 0, rows8, cols8, cols, out, os, as);   /* the last cols % 8 columns of the blocks' rows */
  scalar_part(in, is, rows8, rows, 0, cols, out, os, as);    /* the last rows % 8 rows */
}
#endif

static void transpose_serial(const float *in, size_t in_stride, size_t rows, size_t cols, void *out,
                             size_t out_stride, transposed_as as) {
#if PRECIS_AVX2_TRANSPOSE
  if (__builtin_cpu_supports("avx2")) {
    transpose_avx2(in, in_stride, rows, cols, out, out_stride, as);
    return;
  }
#endif
  scalar_part(in, in_stride, 0, rows, 0, cols, out, out_stride, as);
}

/* Transposes of 2^20 elements and more over the CPUs (at least 2^19 a thread), each thread a band of
 * the input's columns in groups of 8 (the output's rows: each thread writes whole rows of its own). */
enum { COLUMN_GROUP = 8, PARALLEL_MIN_ELEMENTS = 1 << 19 };

typedef struct {
  const float *in;
  size_t in_stride, rows, cols;
  void *out;
  size_t out_stride;
  transposed_as as;
} transpose_job;

static void transpose_columns(void *ctx, size_t first, size_t last) {
  const transpose_job *j = ctx;
  const size_t c0 = first * COLUMN_GROUP, c1 = last * COLUMN_GROUP < j->cols ? last * COLUMN_GROUP : j->cols;
  const size_t element = j->as == AS_F32 ? sizeof(float) : sizeof(double);
  transpose_serial(j->in + c0, j->in_stride, j->rows, c1 - c0, (char *)j->out + c0 * j->out_stride * element,
                   j->out_stride, j->as);
}

static void transpose(const float *in, size_t in_stride, size_t rows, size_t cols, void *out, size_t out_stride,
                      transposed_as as) {
  if (rows == 0 || cols == 0) return;
  transpose_job job = {in, in_stride, rows, cols, out, out_stride, as};
  const size_t groups = (cols + COLUMN_GROUP - 1) / COLUMN_GROUP;
  const size_t min_groups = PARALLEL_MIN_ELEMENTS / (rows * COLUMN_GROUP) + 1;
  precis_parallel_ranges(groups, min_groups, transpose_columns, &job);
}

void precis_transpose_f32(const float *in, size_t in_stride, size_t rows, size_t cols, float *out, size_t out_stride) {
  transpose(in, in_stride, rows, cols, out, out_stride, AS_F32);
}

void precis_transpose_widen(const float *in, size_t in_stride, size_t rows, size_t cols, double *out, size_t out_stride,
                            bool absolute) {
  transpose(in, in_stride, rows, cols, out, out_stride, absolute ? AS_F64_ABS : AS_F64);
}

void precis_transpose_f64(const double *in, size_t in_stride, size_t rows, size_t cols, double *out,
                          size_t out_stride) {
  for (size_t r0 = 0; r0 < rows; r0 += TILE) {
    const size_t r1 = rows - r0 < TILE ? rows : r0 + TILE;
    for (size_t c0 = 0; c0 < cols; c0 += TILE) {
      const size_t c1 = cols - c0 < TILE ? cols : c0 + TILE;
      for (size_t c = c0; c < c1; c++)
        for (size_t r = r0; r < r1; r++) out[c * out_stride + r] = in[r * in_stride + c];
    }
  }
}
