/* Suites: the YAML files `precis gen` reads (datasets/default.yaml documents every field), and
 * the built-in presets, which are datasets/NAME.yaml embedded byte for byte at build time. */
#ifndef PRECIS_SUITE_H
#define PRECIS_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distributions.h"
#include "base/status.h"

typedef struct precis_suite_workload {
  char *name;
  int64_t m, n, k;
  int64_t batch; /* held-out samples */
  int64_t calib; /* calibration samples (calib/a), 0 for none */
  bool b_batched; /* one b per sample ([batch, k, n]) instead of a shared [k, n] */
  precis_dist a, b;
  bool has_seed;
  uint64_t seed; /* the workload's own seed; else the suite's */
  char *description;
  bool dd_reference; /* reference: double-double (else float64) */
  bool f64_inputs;   /* inputs: float64 (a and b drawn and stored in float64; else float32) */
  int line; /* 1-based line of the workload in the suite, for messages */
} precis_suite_workload;

typedef struct precis_suite {
  char *source;   /* the file name, or "preset NAME" */
  char *base_dir; /* where relative `file` paths are resolved */
  char *text;     /* the YAML text, exactly as used (stored in the dataset's `suite` attribute) */
  uint64_t seed;
  bool has_tokens;
  int64_t tokens; /* m for workloads that do not give one */
  char *description;
  bool dd_reference; /* top-level reference: the workloads' default */
  bool f64_inputs;   /* top-level inputs: the workloads' default */
  precis_suite_workload *workloads;
  size_t n_workloads;
} precis_suite;

/* Parses YAML text (source names it in messages: "SOURCE:LINE:COL: key: what was expected"). */
precis_status precis_suite_parse(const char *text, size_t len, const char *source, const char *base_dir,
                                 precis_suite *out);
precis_status precis_suite_load_file(const char *path, precis_suite *out);
precis_status precis_suite_load_preset(const char *name, precis_suite *out);
/* Rewrites the top-level `seed` / `tokens` lines of the suite's text (adding them when absent)
 * and parses it again, so that the text stored in the dataset is the one that was used. NULL
 * leaves a value alone. */
precis_status precis_suite_override(precis_suite *suite, const uint64_t *seed, const int64_t *tokens);
/* The same for the top-level `inputs` line (gen --inputs float32|float64). */
precis_status precis_suite_override_inputs(precis_suite *suite, const char *inputs);
void precis_suite_free(precis_suite *suite);

/* The presets, generated from datasets/NAME.yaml by src/CMakeLists.txt. */
typedef struct precis_preset_text {
  const char *name;
  const char *text;
  size_t size;
} precis_preset_text;
extern const precis_preset_text precis_presets[];
extern const size_t precis_preset_count;

#endif
