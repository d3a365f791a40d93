/* Value distributions for dataset inputs (DESIGN §4, datasets/default.yaml documents each one).
 *
 * A distribution fills one operand: `a` is [samples, m, k] and `b` is [samples, k, n]; the
 * reduction dimension K is the columns of `a` and the rows of `b`, which is what the
 * channel-structured distributions (outlier_channels, cancellation) follow. Every value comes from
 * the counter-based RNG (rng.h), so data are identical on every machine. */
#ifndef PRECIS_DISTRIBUTIONS_H
#define PRECIS_DISTRIBUTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "rng.h"
#include "base/status.h"

typedef enum precis_dist_kind {
  PRECIS_DIST_NORMAL,
  PRECIS_DIST_UNIFORM,
  PRECIS_DIST_OUTLIER_CHANNELS,
  PRECIS_DIST_SPIKES,
  PRECIS_DIST_STUDENT_T,
  PRECIS_DIST_RELU,
  PRECIS_DIST_LOG_UNIFORM,
  PRECIS_DIST_CANCELLATION,
  PRECIS_DIST_INTEGERS,
  PRECIS_DIST_EXP_SPREAD,
  PRECIS_DIST_FILE,
  PRECIS_DIST_KIND_COUNT
} precis_dist_kind;

#define PRECIS_DIST_MAX_PARAMS 4

/* One row per kind: its name and its numeric parameters with their defaults. */
typedef struct precis_dist_spec {
  const char *name;
  int n_params;
  const char *param_names[PRECIS_DIST_MAX_PARAMS];
  double param_defaults[PRECIS_DIST_MAX_PARAMS];
  const char *summary;
} precis_dist_spec;

extern const precis_dist_spec precis_dist_specs[PRECIS_DIST_KIND_COUNT];

typedef struct precis_dist {
  precis_dist_kind kind;
  double params[PRECIS_DIST_MAX_PARAMS];
  /* kind == PRECIS_DIST_FILE: an HDF5 dataset (object starts with '/') or a safetensors tensor. */
  char *path;
  char *object;
  bool transpose; /* the file holds the operand transposed (e.g. a PyTorch Linear weight [n, k]) */
} precis_dist;

typedef enum precis_operand { PRECIS_OPERAND_A, PRECIS_OPERAND_B } precis_operand;

/* -1 when no kind has that name. */
int precis_dist_kind_from_name(const char *name);
/* A distribution with every parameter at its default. */
void precis_dist_init(precis_dist *d, precis_dist_kind kind);
void precis_dist_free(precis_dist *d);
precis_status precis_dist_copy(precis_dist *dst, const precis_dist *src);
/* Checks the parameters (std > 0, lo < hi, ...); the message names the parameter. */
precis_status precis_dist_validate(const precis_dist *d);
/* The canonical text stored in the a_dist/b_dist attributes, e.g. "normal(mean=0, std=1)". */
char *precis_dist_describe(const precis_dist *d);

/* Fills out[samples][rows][cols] (row-major) from the generated distributions. `stream` separates
 * the held-out and calibration draws; `first_sample` offsets the element counter so that sample s
 * of one call equals sample s + first_sample of a longer one. Not for PRECIS_DIST_FILE. */
void precis_dist_fill(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                      int64_t samples, int64_t rows, int64_t cols, float *out);
/* Elements [first, first + count) of the same tensor (flattened row-major): out-of-core generation
 * fills it a tile at a time, and every tile equals that part of the whole. */
void precis_dist_fill_range(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                            int64_t samples, int64_t rows, int64_t cols, uint64_t first, uint64_t count, float *out);

/* The same draws kept in float64 (gen --inputs float64): every value before its rounding to float32,
 * so that precis_dist_fill's output is this one's float32 rounding except where the float32 draw
 * reuses a rounded value (a cancelling pair's partner, a t deviate before its scale). */
void precis_dist_fill_f64(const precis_dist *d, precis_rng_key key, uint32_t stream, precis_operand operand,
                          int64_t samples, int64_t rows, int64_t cols, double *out);

/* Streams: one per (operand, split), plus the per-channel choices that must be shared between the
 * held-out and calibration splits (the outlier channels are a property of the model, not of a
 * sample). */
enum {
  PRECIS_STREAM_A = 1,
  PRECIS_STREAM_B = 2,
  PRECIS_STREAM_CALIB_A = 3,
  PRECIS_STREAM_CHANNELS_A = 16,
  PRECIS_STREAM_CHANNELS_B = 17,
};

#endif
