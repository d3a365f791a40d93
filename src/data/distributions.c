#include "distributions.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

const precis_dist_spec precis_dist_specs[PRECIS_DIST_KIND_COUNT] = {
    [PRECIS_DIST_NORMAL] = {"normal", 2, {"mean", "std"}, {0.0, 1.0}, "N(mean, std^2)"},
    [PRECIS_DIST_UNIFORM] = {"uniform", 2, {"lo", "hi"}, {-1.0, 1.0}, "uniform on [lo, hi)"},
    [PRECIS_DIST_OUTLIER_CHANNELS] = {"outlier_channels", 4, {"fraction", "lo", "hi", "std"}, {0.01, 6.0, 60.0, 1.0},
                                      "N(0, std^2) except a fraction of the K channels, whose magnitudes are uniform "
                                      "in [lo, hi] with random signs (LLM.int8-style outlier features)"},
    [PRECIS_DIST_SPIKES] = {"spikes", 2, {"magnitude", "std"}, {100.0, 1.0},
                            "N(0, std^2) plus one value of +-magnitude at a random position in every row"},
    [PRECIS_DIST_STUDENT_T] = {"student_t", 2, {"nu", "scale"}, {3.0, 1.0}, "scale * Student's t with nu degrees of freedom"},
    [PRECIS_DIST_RELU] = {"relu", 2, {"mean", "std"}, {0.0, 1.0}, "max(0, N(mean, std^2)): non-negative, half zeros"},
    [PRECIS_DIST_LOG_UNIFORM] = {"log_uniform", 2, {"lo", "hi"}, {1e-4, 1e4},
                                 "magnitudes log-uniform in [lo, hi] with random signs (wide exponent range)"},
    [PRECIS_DIST_CANCELLATION] = {"cancellation", 2, {"eps", "scale"}, {1e-3, 1.0},
                                  "pairs along K that cancel: a repeats each value twice, b pairs y with -(y + eps*scale*z); "
                                  "use it for both a and b so that |c| << |a|.|b|"},
    [PRECIS_DIST_INTEGERS] = {"integers", 2, {"lo", "hi"}, {-4.0, 4.0},
                              "integers uniform in [lo, hi]: float recipes are exact while every partial sum stays "
                              "below 2^24 and every output is representable in the output format"},
    [PRECIS_DIST_EXP_SPREAD] = {"exp_spread", 2, {"phi", "scale"}, {1.0, 1.0},
                                "scale * (U - 0.5) * exp(phi * N(0,1)), U uniform on [0,1): the exponent spread phi of "
                                "the Ozaki-scheme papers (phi = 0: uniform; each +1 widens the range by e^(+-phi))"},
    [PRECIS_DIST_FILE] = {"file", 0, {NULL}, {0.0}, "a matrix from an HDF5 dataset, a safetensors tensor or a NumPy .npy/.npz array"},
};

int precis_dist_kind_from_name(const char *name) {
  for (int i = 0; i < PRECIS_DIST_KIND_COUNT; i++)
    if (strcmp(precis_dist_specs[i].name, name) == 0) return i;
  return -1;
}

void precis_dist_init(precis_dist *d, precis_dist_kind kind) {
  memset(d, 0, sizeof *d);
  d->kind = kind;
  for (int i = 0; i < precis_dist_specs[kind].n_params; i++) d->params[i] = precis_dist_specs[kind].param_defaults[i];
}

void precis_dist_free(precis_dist *d) {
  free(d->path);
  free(d->object);
  d->path = d->object = NULL;
}

precis_status precis_dist_copy(precis_dist *dst, const precis_dist *src) {
  *dst = *src;
  dst->path = precis_strdup(src->path);
  dst->object = precis_strdup(src->object);
  if ((src->path && !dst->path) || (src->object && !dst->object)) {
    precis_dist_free(dst);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  return PRECIS_OK;
}

precis_status precis_dist_validate(const precis_dist *d) {
  const precis_dist_spec *spec = &precis_dist_specs[d->kind];
  for (int i = 0; i < spec->n_params; i++)
    if (!isfinite(d->params[i]))
      return precis_fail(PRECIS_E_INPUT, "%s: parameter %s must be a finite number", spec->name, spec->param_names[i]);
  const double *p = d->params;
  switch (d->kind) {
  case PRECIS_DIST_NORMAL:
  case PRECIS_DIST_RELU:
    if (!(p[1] > 0)) return precis_fail(PRECIS_E_INPUT, "%s: std must be > 0 (found %g)", spec->name, p[1]);
    break;
  case PRECIS_DIST_UNIFORM:
    if (!(p[0] < p[1])) return precis_fail(PRECIS_E_INPUT, "uniform: expected lo < hi (found lo=%g, hi=%g)", p[0], p[1]);
    break;
  case PRECIS_DIST_OUTLIER_CHANNELS:
    if (!(p[0] >= 0 && p[0] <= 1))
      return precis_fail(PRECIS_E_INPUT, "outlier_channels: fraction must be in [0, 1] (found %g)", p[0]);
    if (!(p[1] >= 0 && p[1] <= p[2]))
      return precis_fail(PRECIS_E_INPUT, "outlier_channels: expected 0 <= lo <= hi (found lo=%g, hi=%g)", p[1], p[2]);
    if (!(p[3] > 0)) return precis_fail(PRECIS_E_INPUT, "outlier_channels: std must be > 0 (found %g)", p[3]);
    break;
  case PRECIS_DIST_SPIKES:
    if (!(p[0] > 0)) return precis_fail(PRECIS_E_INPUT, "spikes: magnitude must be > 0 (found %g)", p[0]);
    if (!(p[1] > 0)) return precis_fail(PRECIS_E_INPUT, "spikes: std must be > 0 (found %g)", p[1]);
    break;
  case PRECIS_DIST_STUDENT_T:
    if (!(p[0] > 0)) return precis_fail(PRECIS_E_INPUT, "student_t: nu must be > 0 (found %g)", p[0]);
    if (!(p[1] > 0)) return precis_fail(PRECIS_E_INPUT, "student_t: scale must be > 0 (found %g)", p[1]);
    break;
  case PRECIS_DIST_LOG_UNIFORM:
    if (!(p[0] > 0 && p[0] < p[1]))
      return precis_fail(PRECIS_E_INPUT, "log_uniform: expected 0 < lo < hi (found lo=%g, hi=%g)", p[0], p[1]);
    if (p[0] < 0x1p-149 || p[1] > 3.4e38)
      return precis_fail(PRECIS_E_INPUT, "log_uniform: lo and hi must lie within float32's range");
    break;
  case PRECIS_DIST_CANCELLATION:
    if (!(p[0] >= 0)) return precis_fail(PRECIS_E_INPUT, "cancellation: eps must be >= 0 (found %g)", p[0]);
    if (!(p[1] > 0)) return precis_fail(PRECIS_E_INPUT, "cancellation: scale must be > 0 (found %g)", p[1]);
    break;
  case PRECIS_DIST_INTEGERS:
    if (p[0] != floor(p[0]) || p[1] != floor(p[1]))
      return precis_fail(PRECIS_E_INPUT, "integers: lo and hi must be integers (found lo=%g, hi=%g)", p[0], p[1]);
    if (!(p[0] <= p[1])) return precis_fail(PRECIS_E_INPUT, "integers: expected lo <= hi (found lo=%g, hi=%g)", p[0], p[1]);
    if (fabs(p[0]) > 16777216.0 || fabs(p[1]) > 16777216.0)
      return precis_fail(PRECIS_E_INPUT, "integers: |lo| and |hi| must be <= 2^24 (exact in float32)");
    break;
  case PRECIS_DIST_EXP_SPREAD:
    /* exp(phi z) stays within float32 for |z| up to about 8 standard deviations when phi <= 10. */
    if (!(p[0] >= 0 && p[0] <= 10)) return precis_fail(PRECIS_E_INPUT, "exp_spread: phi must be in [0, 10] (found %g)", p[0]);
    if (!(p[1] > 0)) return precis_fail(PRECIS_E_INPUT, "exp_spread: scale must be > 0 (found %g)", p[1]);
    break;
  case PRECIS_DIST_FILE:
    if (!d->path || !d->path[0]) return precis_fail(PRECIS_E_INPUT, "file: path is required");
    /* The object may be empty (a .npy holds one array): the reader, which knows the file's kind,
     * says when a name is needed. */
    break;
  case PRECIS_DIST_KIND_COUNT: break;
  }
  return PRECIS_OK;
}

/* The shortest of %.15g/%.17g that reads back as the same double. */
static void format_number(char *buf, size_t len, double v) {
  snprintf(buf, len, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, len, "%.17g", v);
}

char *precis_dist_describe(const precis_dist *d) {
  const precis_dist_spec *spec = &precis_dist_specs[d->kind];
  if (d->kind == PRECIS_DIST_FILE && (!d->object || !d->object[0]))
    return precis_asprintf("file(path=%s%s)", d->path ? d->path : "", d->transpose ? ", transpose=true" : "");
  if (d->kind == PRECIS_DIST_FILE)
    return precis_asprintf("file(path=%s, %s=%s%s)", d->path ? d->path : "", d->object && d->object[0] == '/' ? "dataset" : "tensor",
                           d->object ? d->object : "", d->transpose ? ", transpose=true" : "");
  char text[512];
  size_t used = (size_t)snprintf(text, sizeof text, "%s(", spec->name);
  for (int i = 0; i < spec->n_params && used < sizeof text; i++) {
    char num[40];
    format_number(num, sizeof num, d->params[i]);
    used += (size_t)snprintf(text + used, sizeof text - used, "%s%s=%s", i ? ", " : "", spec->param_names[i], num);
  }
  if (used < sizeof text) snprintf(text + used, sizeof text - used, ")");
  return precis_strdup(text);
}

/* A secondary stream for the extra draws of an element (signs, magnitudes, positions), so that
 * they never reuse a counter of the main stream. */
static uint32_t aux_stream(uint32_t stream) { return stream + 0x10000u; }

static double normal_at(precis_rng_key key, uint32_t stream, uint64_t index) {
  double z[2];
  precis_rng_normal_pair(key, stream, index / 2, z);
  return z[index & 1];
}

/* Exactly round(fraction*K) channels (at least one when fraction > 0), by a partial Fisher-Yates
 * shuffle driven by the RNG. */
static bool *choose_channels(const precis_dist *d, precis_rng_key key, uint32_t channel_stream, int64_t channels) {
  bool *mask = calloc((size_t)channels, sizeof *mask);
  int64_t *order = malloc((size_t)channels * sizeof *order);
  if (!mask || !order) {
    free(mask);
    free(order);
    return NULL;
  }
  int64_t count = llround(d->params[0] * (double)channels);
  if (count == 0 && d->params[0] > 0) count = 1;
  if (count > channels) count = channels;
  for (int64_t i = 0; i < channels; i++) order[i] = i;
  for (int64_t i = 0; i < count; i++) {
    uint32_t w[4];
    precis_rng_block(key, channel_stream, (uint64_t)i, 0, w);
    int64_t j = i + (int64_t)precis_rng_below(w[0], w[1], (uint64_t)(channels - i));
    int64_t t = order[i];
    order[i] = order[j];
    order[j] = t;
    mask[order[i]] = true;
  }
  free(order);
  return mask;
}

static double student_t_at(precis_rng_key key, uint32_t stream, uint64_t index, double nu) {
  /* Bailey's polar method (Math. Comp. 62, 1994): t = u sqrt(nu (w^(-2/nu) - 1) / w). */
  for (uint32_t attempt = 0;; attempt++) {
    uint32_t w4[4];
    precis_rng_block(key, stream, index, attempt, w4);
    double u = 2.0 * precis_u53(w4[0], w4[1]) - 1.0;
    double v = 2.0 * precis_u53(w4[2], w4[3]) - 1.0;
    double w = u * u + v * v;
    if (w >= 1.0 || w == 0.0) continue;
    double pow_w = precis_rng_exp(-2.0 / nu * precis_rng_log(w));
    return u * sqrt(nu * (pow_w - 1.0) / w);
  }
}

/* Every value is a function of its element index (counter-based), so any range of elements comes
 * out as it does in the whole tensor: out[j] is element first + j. Values drawn in pairs (normal
 * deviates) are computed a pair at a time, the half outside the range discarded. */
static void fill_range(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand, int64_t rows,
                       int64_t cols, uint64_t first, uint64_t count, float *narrow, double *wide) {
  const double *p = d->params;
  const uint64_t end = first + count, pairs_from = first & ~(uint64_t)1;
#define PUT(index, value)                                                                                          \
  do {                                                                                                             \
    uint64_t at_ = (index);                                                                                        \
    if (at_ >= first && at_ < end) STORE(at_ - first, (value));                                                   \
  } while (0)
  /* Values are computed in float64 and stored as such (wide) or rounded to float32 (narrow); a value
   * that the float32 draw rounds before using it again (a cancelling pair's partner, a t deviate
   * before its scale) is rounded only in the narrow draw. */
#define STORE(j, value)                                                                                            \
  do {                                                                                                             \
    double v_ = (value);                                                                                           \
    if (wide) wide[j] = v_;                                                                                        \
    else narrow[j] = (float)v_;                                                                                    \
  } while (0)
#define NARROW(x) (wide ? (x) : (double)(float)(x))
  switch (d->kind) {
  case PRECIS_DIST_NORMAL:
    for (uint64_t i = pairs_from; i < end; i += 2) {
      double z[2];
      precis_rng_normal_pair(key, stream, i / 2, z);
      PUT(i, p[0] + p[1] * z[0]);
      PUT(i + 1, p[0] + p[1] * z[1]);
    }
    break;
  case PRECIS_DIST_RELU:
    for (uint64_t i = pairs_from; i < end; i += 2) {
      double z[2];
      precis_rng_normal_pair(key, stream, i / 2, z);
      for (int h = 0; h < 2; h++) {
        double x = p[0] + p[1] * z[h];
        PUT(i + (uint64_t)h, x > 0 ? x : 0.0);
      }
    }
    break;
  case PRECIS_DIST_UNIFORM:
  case PRECIS_DIST_INTEGERS:
    for (uint64_t i = pairs_from; i < end; i += 2) {
      uint32_t w[4];
      precis_rng_block(key, stream, i / 2, 0, w);
      for (int h = 0; h < 2; h++) {
        uint32_t hi = w[2 * h], lo = w[2 * h + 1];
        double x = d->kind == PRECIS_DIST_UNIFORM
                       ? p[0] + (p[1] - p[0]) * precis_u53(hi, lo)
                       : p[0] + (double)precis_rng_below(hi, lo, (uint64_t)(p[1] - p[0]) + 1);
        PUT(i + (uint64_t)h, x);
      }
    }
    break;
  case PRECIS_DIST_LOG_UNIFORM: {
    const double log_lo = precis_rng_log(p[0]), log_hi = precis_rng_log(p[1]);
    for (uint64_t i = first; i < end; i++) {
      uint32_t w[4];
      precis_rng_block(key, stream, i, 0, w);
      double mag = precis_rng_exp(log_lo + (log_hi - log_lo) * precis_u53(w[0], w[1]));
      STORE(i - first, (w[2] & 1u) ? -mag : mag);
    }
    break;
  }
  case PRECIS_DIST_STUDENT_T:
    for (uint64_t i = first; i < end; i++) STORE(i - first, p[1] * NARROW(student_t_at(key, stream, i, p[0])));
    break;
  case PRECIS_DIST_EXP_SPREAD:
    for (uint64_t i = first; i < end; i++) {
      uint32_t w[4];
      precis_rng_block(key, stream, i, 0, w);
      double u = precis_u53(w[0], w[1]) - 0.5;
      STORE(i - first, p[1] * u * precis_rng_exp(p[0] * normal_at(key, aux_stream(stream), i)));
    }
    break;
  case PRECIS_DIST_SPIKES:
    for (uint64_t i = pairs_from; i < end; i += 2) {
      double z[2];
      precis_rng_normal_pair(key, stream, i / 2, z);
      PUT(i, p[1] * z[0]);
      PUT(i + 1, p[1] * z[1]);
    }
    for (uint64_t row = first / (uint64_t)cols; count && row <= (end - 1) / (uint64_t)cols; row++) {
      uint32_t w[4];
      precis_rng_block(key, aux_stream(stream), row, 0, w);
      uint64_t col = precis_rng_below(w[0], w[1], (uint64_t)cols);
      PUT(row * (uint64_t)cols + col, (w[2] & 1u) ? -p[0] : p[0]);
    }
    break;
  case PRECIS_DIST_OUTLIER_CHANNELS: {
    const int64_t channels = operand == PRECIS_OPERAND_A ? cols : rows;
    uint32_t channel_stream = operand == PRECIS_OPERAND_A ? PRECIS_STREAM_CHANNELS_A : PRECIS_STREAM_CHANNELS_B;
    bool *mask = choose_channels(d, key, channel_stream, channels);
    for (uint64_t i = first; i < end; i++) {
      uint64_t col = i % (uint64_t)cols, row = (i / (uint64_t)cols) % (uint64_t)rows;
      bool outlier = mask ? mask[operand == PRECIS_OPERAND_A ? col : row] : false;
      if (outlier) {
        uint32_t w[4];
        precis_rng_block(key, aux_stream(stream), i, 0, w);
        double mag = p[1] + (p[2] - p[1]) * precis_u53(w[0], w[1]);
        STORE(i - first, (w[2] & 1u) ? -mag : mag);
      } else {
        STORE(i - first, p[3] * normal_at(key, stream, i));
      }
    }
    free(mask);
    break;
  }
  case PRECIS_DIST_CANCELLATION:
    /* Pairs along k: the even element of a pair draws both deviates (counter = its own index), the
     * odd one repeats (A) or nearly cancels (B) its partner's value. */
    for (uint64_t i = first; i < end; i++) {
      uint64_t col = i % (uint64_t)cols, row = (i / (uint64_t)cols) % (uint64_t)rows;
      uint64_t along_k = operand == PRECIS_OPERAND_A ? col : row;
      uint64_t step = operand == PRECIS_OPERAND_A ? 1 : (uint64_t)cols; /* distance to the pair's partner */
      double z[2];
      if ((along_k & 1) == 0) {
        precis_rng_normal_pair(key, stream, i, z);
        STORE(i - first, p[1] * z[0]);
      } else {
        precis_rng_normal_pair(key, stream, i - step, z);
        double partner = NARROW(p[1] * z[0]);
        STORE(i - first, operand == PRECIS_OPERAND_A ? partner : -(partner + p[0] * p[1] * z[1]));
      }
    }
    break;
  case PRECIS_DIST_FILE:
  case PRECIS_DIST_KIND_COUNT: break;
  }
#undef NARROW
#undef STORE
#undef PUT
}

void precis_dist_fill(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                      int64_t samples, int64_t rows, int64_t cols, float *out) {
  fill_range(d, key, stream, operand, rows, cols, 0, (uint64_t)samples * (uint64_t)rows * (uint64_t)cols, out, NULL);
}

void precis_dist_fill_range(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                            int64_t samples, int64_t rows, int64_t cols, uint64_t first, uint64_t count, float *out) {
  (void)samples;
  fill_range(d, key, stream, operand, rows, cols, first, count, out, NULL);
}

void precis_dist_fill_f64(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                          int64_t samples, int64_t rows, int64_t cols, double *out) {
  fill_range(d, key, stream, operand, rows, cols, 0, (uint64_t)samples * (uint64_t)rows * (uint64_t)cols, NULL, out);
}
