/* INT8 symmetric and FP8 per-tensor quantization, and the calibration of amax. The per-element
 * rules are in format_bits.h, shared with the CUDA kernels; docs/formats.md defines each method. */
#include "quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "format_bits.h"
#include "base/parallel.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define PRECIS_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PRECIS_VECTOR_CLONES
#endif

/* MSE calibration: the number of clip candidates and the most values the MSE is evaluated on. */
#define MSE_CANDIDATES 128
#define MSE_MAX_EVAL_VALUES ((size_t)1 << 22)

const char *precis_calib_method_str(precis_calib_method m) {
  switch (m) {
  case PRECIS_CALIB_ABSMAX: return "absmax";
  case PRECIS_CALIB_PERCENTILE: return "percentile";
  case PRECIS_CALIB_MSE: return "mse";
  }
  return "unknown";
}

precis_status precis_calib_method_parse(const char *s, precis_calib_method *out) {
  static const precis_calib_method methods[] = {PRECIS_CALIB_ABSMAX, PRECIS_CALIB_PERCENTILE, PRECIS_CALIB_MSE};
  for (size_t i = 0; s && i < sizeof methods / sizeof methods[0]; i++) {
    if (strcmp(s, precis_calib_method_str(methods[i])) == 0) {
      *out = methods[i];
      return PRECIS_OK;
    }
  }
  return precis_fail(PRECIS_E_USAGE, "calibration method \"%s\": expected absmax, percentile or mse", s ? s : "(null)");
}

/* Non-negative floats order like their bit patterns, so the max is an integer max (which
 * vectorizes without fast-math). Non-finite values contribute 0. */
PRECIS_VECTOR_CLONES static uint32_t absmax_bits(const float *x, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t a = precis_bits_finite_abs_bits(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

float precis_absmax(const float *x, size_t n) { return precis_f32_of_bits(absmax_bits(x, n)); }

/* The value of nearest rank `rank` (1-based) among the bit patterns of the finite |x|: a two-pass
 * radix select on the high and low 16 bits, O(n) with no copy of the data. */
static precis_status select_abs_rank(const float *x, size_t n, size_t rank, float *out) {
  precis_status st = PRECIS_OK;
  size_t *hist = calloc((size_t)1 << 16, sizeof *hist);
  if (!hist) {
    st = precis_fail(PRECIS_E_NOMEM, "percentile calibration: cannot allocate a 65536-bin histogram");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t a = precis_bits_of_f32(x[i]) & PRECIS_F32_ABS_MASK;
    if (a < PRECIS_F32_INF_BITS) hist[a >> 16]++;
  }
  size_t below = 0;
  uint32_t high = 0;
  for (; high < 0xffffu; high++) {
    if (below + hist[high] >= rank) break;
    below += hist[high];
  }
  memset(hist, 0, ((size_t)1 << 16) * sizeof *hist);
  for (size_t i = 0; i < n; i++) {
    uint32_t a = precis_bits_of_f32(x[i]) & PRECIS_F32_ABS_MASK;
    if (a < PRECIS_F32_INF_BITS && (a >> 16) == high) hist[a & 0xffffu]++;
  }
  uint32_t low = 0;
  for (; low < 0xffffu; low++) {
    if (below + hist[low] >= rank) break;
    below += hist[low];
  }
  *out = precis_f32_of_bits((high << 16) | low);
done:
  free(hist);
  return st;
}

static size_t count_finite(const float *x, size_t n) {
  size_t finite = 0;
  for (size_t i = 0; i < n; i++) finite += precis_bits_is_finite(x[i]) ? 1u : 0u;
  return finite;
}

/* Mean over xs of ((double)q*s - x)^2 with s = clip/127, q the int8 quantization of x. */
PRECIS_VECTOR_CLONES static double int8_mse(const float *xs, size_t n, float clip) {
  float s = precis_int8_scale_from_amax(clip);
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) {
    int clipped;
    int8_t q = precis_bits_int8_quantize(xs[i], s, &clipped);
    double e = (double)q * (double)s - (double)xs[i];
    sum += e * e;
  }
  return sum / (double)n;
}

static precis_status calib_mse(const float *x, size_t n, size_t finite, float amax, float *amax_out) {
  precis_status st = PRECIS_OK;
  size_t stride = (finite + MSE_MAX_EVAL_VALUES - 1) / MSE_MAX_EVAL_VALUES;
  size_t eval_cap = (finite + stride - 1) / stride;
  float *eval = malloc(eval_cap * sizeof *eval);
  if (!eval) {
    st = precis_fail(PRECIS_E_NOMEM, "mse calibration: cannot allocate %zu evaluation values", eval_cap);
    goto done;
  }
  /* Every stride-th finite value, in order: deterministic, and all of them when finite <= 2^22. */
  size_t count = 0, seen = 0;
  for (size_t i = 0; i < n; i++) {
    if (!precis_bits_is_finite(x[i])) continue;
    if (seen++ % stride == 0) eval[count++] = x[i];
  }
  float best_clip = amax;
  double best_mse = INFINITY;
  /* From amax downwards with a strict comparison: a tie keeps the larger clip (less clipping). */
  for (int k = MSE_CANDIDATES; k >= 1; k--) {
    float clip = (float)((double)amax * k / MSE_CANDIDATES);
    if (clip <= 0.0f) continue;
    double mse = int8_mse(eval, count, clip);
    if (mse < best_mse) {
      best_mse = mse;
      best_clip = clip;
    }
  }
  *amax_out = best_clip;
done:
  free(eval);
  return st;
}

precis_status precis_calib_amax(const float *x, size_t n, precis_calib_method method, double percentile,
                                float *amax_out) {
  if (n == 0) return precis_fail(PRECIS_E_INPUT, "calibration: the calibration set is empty (expected >= 1 value)");
  float amax = precis_absmax(x, n);
  switch (method) {
  case PRECIS_CALIB_ABSMAX:
    *amax_out = amax;
    return PRECIS_OK;
  case PRECIS_CALIB_PERCENTILE: {
    if (!(percentile > 0.0 && percentile <= 100.0))
      return precis_fail(PRECIS_E_USAGE, "percentile calibration: percentile %g is out of range (expected 0 < p <= 100)",
                         percentile);
    size_t finite = count_finite(x, n);
    if (finite == 0) {
      *amax_out = 0.0f;
      return PRECIS_OK;
    }
    /* Nearest rank: ceil(p*N/100), with a relative tolerance so that an exact product (p = 99.99,
     * N = 10000) is not pushed to the next rank by the rounding of p*N/100. */
    double r = percentile * (double)finite / 100.0;
    double rank_f = ceil(r - r * 1e-12);
    size_t rank = rank_f < 1.0 ? 1 : (rank_f > (double)finite ? finite : (size_t)rank_f);
    return select_abs_rank(x, n, rank, amax_out);
  }
  case PRECIS_CALIB_MSE: {
    size_t finite = count_finite(x, n);
    if (finite == 0 || amax == 0.0f) {
      *amax_out = 0.0f;
      return PRECIS_OK;
    }
    return calib_mse(x, n, finite, amax, amax_out);
  }
  }
  return precis_fail(PRECIS_E_USAGE, "calibration: unknown method %d", (int)method);
}

float precis_int8_scale_from_amax(float amax) { return precis_div_rn(amax, 127.0f); }

int8_t precis_int8_quantize_one(float x, float scale) {
  int clipped;
  return precis_bits_int8_quantize(x, scale, &clipped);
}

/* Rows over the CPUs from 2^20 elements (W of a layer; not a few tokens' A), at least 2^19 a thread. */
static size_t parallel_min_rows(size_t cols) { return ((size_t)1 << 19) / (cols ? cols : 1) + 1; }

typedef struct {
  const float *x;
  size_t cols;
  float *scales;
  const float *row_scales;
  int8_t *q;
  _Atomic size_t clipped;
} rows_job;

static void row_scales_range(void *ctx, size_t first, size_t last) {
  rows_job *j = ctx;
  for (size_t i = first; i < last; i++) j->scales[i] = precis_int8_scale_from_amax(precis_absmax(j->x + i * j->cols, j->cols));
}

void precis_int8_row_scales(const float *x, size_t rows, size_t cols, float *scales) {
  rows_job job = {.x = x, .cols = cols, .scales = scales};
  precis_parallel_ranges(rows, parallel_min_rows(cols), row_scales_range, &job);
}

/* Column maxima as bit patterns, a block of columns at a time so that each pass reads whole row
 * segments. */
#define COLUMN_BLOCK 256
PRECIS_VECTOR_CLONES static void column_block_absmax_bits(const float *x, size_t rows, size_t cols, size_t width,
                                                          uint32_t *m) {
  for (size_t j = 0; j < width; j++) m[j] = 0;
  for (size_t i = 0; i < rows; i++) {
    const float *row = x + i * cols;
    for (size_t j = 0; j < width; j++) {
      uint32_t a = precis_bits_finite_abs_bits(row[j]);
      m[j] = a > m[j] ? a : m[j];
    }
  }
}

void precis_int8_col_scales(const float *x, size_t rows, size_t cols, float *scales) {
  uint32_t m[COLUMN_BLOCK];
  for (size_t j0 = 0; j0 < cols; j0 += COLUMN_BLOCK) {
    size_t width = cols - j0 < COLUMN_BLOCK ? cols - j0 : COLUMN_BLOCK;
    column_block_absmax_bits(x + j0, rows, cols, width, m);
    for (size_t j = 0; j < width; j++) scales[j0 + j] = precis_int8_scale_from_amax(precis_f32_of_bits(m[j]));
  }
}

PRECIS_VECTOR_CLONES static size_t quantize_span(const float *x, size_t n, float s, int8_t *q) {
  size_t clipped_total = 0;
  for (size_t i = 0; i < n; i++) {
    int clipped;
    q[i] = precis_bits_int8_quantize(x[i], s, &clipped);
    clipped_total += (size_t)clipped;
  }
  return clipped_total;
}

static void quantize_rows_range(void *ctx, size_t first, size_t last) {
  rows_job *j = ctx;
  size_t clipped = 0;
  for (size_t i = first; i < last; i++) clipped += quantize_span(j->x + i * j->cols, j->cols, j->row_scales[i], j->q + i * j->cols);
  j->clipped += clipped;
}

size_t precis_int8_quantize_rows(const float *x, size_t rows, size_t cols, const float *row_scales, int8_t *q) {
  rows_job job = {.x = x, .cols = cols, .row_scales = row_scales, .q = q, .clipped = 0};
  precis_parallel_ranges(rows, parallel_min_rows(cols), quantize_rows_range, &job);
  return job.clipped;
}

/* One row of B against its column scales. A function of its own with restrict pointers: written as
 * one loop nest over q[i * cols + j], GCC left it scalar (q is int8_t, which may alias the scales),
 * a division per element: the int8 emulation's per-call quantization of B was 7 % of an int8
 * verify's CPU time. The same operations per element, so the same codes. */
PRECIS_VECTOR_CLONES static size_t quantize_span_scales(const float *restrict x, size_t n, const float *restrict s,
                                                        int8_t *restrict q) {
  size_t clipped_total = 0;
  for (size_t j = 0; j < n; j++) {
    /* precis_bits_int8_quantize with its scale-is-zero selects as arithmetic on 0/1 values: with a
     * scale per element GCC would not if-convert them, and a loop with branches stays scalar. */
    const float v = precis_div_rn(x[j], s[j]);
    const float r = nearbyintf(v);
    const int is_nan = v != v, over = r > 127.0f, under = r < -127.0f, zero_scale = s[j] == 0.0f;
    float t = over ? 127.0f : r;
    t = under ? -127.0f : t;
    t = is_nan | zero_scale ? 0.0f : t;
    const int not_finite = !precis_bits_is_finite(x[j]);
    clipped_total += (size_t)((zero_scale & not_finite) | ((1 - zero_scale) & (over | under | is_nan)));
    q[j] = (int8_t)(int)t;
  }
  return clipped_total;
}

size_t precis_int8_quantize_cols(const float *x, size_t rows, size_t cols, const float *col_scales, int8_t *q) {
  size_t clipped = 0;
  for (size_t i = 0; i < rows; i++) clipped += quantize_span_scales(x + i * cols, cols, col_scales, q + i * cols);
  return clipped;
}

size_t precis_int8_quantize_tensor(const float *x, size_t n, float scale, int8_t *q) {
  return quantize_span(x, n, scale, q);
}

PRECIS_VECTOR_CLONES void precis_int8_dequantize(const int32_t *acc, size_t rows, size_t cols, const float *row_scales,
                                                 const float *col_scales, float *c) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++)
      c[i * cols + j] = precis_bits_dequantize(acc[i * cols + j], row_scales[i], col_scales[j]);
}

PRECIS_VECTOR_CLONES void precis_int8_dequantize_sums(const float *sums, size_t rows, size_t cols,
                                                      const float *row_scales, const float *col_scales, float *c) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++)
      c[i * cols + j] = precis_bits_dequantize((int32_t)sums[i * cols + j], row_scales[i], col_scales[j]);
}

float precis_fp8_scale_from_amax(float amax) { return precis_div_rn(amax, 448.0f); }

PRECIS_VECTOR_CLONES size_t precis_fp8_quantize_tensor(const float *x, size_t n, float scale, uint8_t *q) {
  size_t clipped_total = 0;
  for (size_t i = 0; i < n; i++) {
    int clipped;
    q[i] = precis_bits_fp8_quantize(x[i], scale, &clipped);
    clipped_total += (size_t)clipped;
  }
  return clipped_total;
}
