/* precis conform ORIGINAL CONVERTED (DESIGN §18): does a converted checkpoint hold what its declared
 * scheme makes of the original weights? Per layer, the original is re-quantized with the declared
 * scheme (round to nearest, as compressed-tensors' quantize() does, with the stored scales and zero
 * points) and compared with the stored codes element by element; the scales are recomputed with
 * the min-max rule of compressed-tensors' calculate_qparams and compared in ULPs of the scale's
 * format; the scales are checked for having been ignored or applied twice; and re-quantizing the
 * dequantized weights shows how many scales and codes move (idempotence). */
#ifndef PRECIS_CONFORM_H
#define PRECIS_CONFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_converted.h"
#include "base/status.h"

typedef struct precis_conform_layer {
  char *name;
  char declared[200];       /* the declared scheme, "ignored by the producer", or "undeclared" */
  char found[200];          /* the stored format */
  const char *status;       /* conforms, differs, ignored, unquantized, foreign, mismatch */
  uint64_t codes, equal, within_one, beyond; /* code comparison (stored vs round-to-nearest of the original) */
  double max_code_diff;     /* in code steps (integers; FP8/FP4: representable values apart) */
  int64_t code_row, code_col;
  uint64_t scales, scales_off; /* scales more than 1 ULP from the min-max rule */
  double max_scale_ulps;
  int64_t scale_row, scale_col;
  double weight_rel_fro;    /* dequantized vs original */
  double codes_alone_rel_fro, scale_twice_rel_fro;
  uint64_t idem_scales_moved, idem_codes_moved; /* re-quantizing the dequantized weights */
} precis_conform_layer;

typedef struct precis_conform_result {
  precis_conform_layer *layers;
  size_t n_layers;
  char **findings;          /* "layer: tensor[element]: what" */
  size_t n_findings;
  size_t n_nonconforming;
  char declared_by[240];
} precis_conform_result;

typedef struct precis_conform_options {
  const precis_model *original;   /* the layers to check (precis_model_discover) */
  const precis_model *converted;  /* its tensors (precis_model_tensors) */
  const precis_quant_decl *declared;
  size_t findings_per_check;      /* elements named per layer and kind (default 5) */
  bool progress;
} precis_conform_options;

precis_status precis_conform(const precis_conform_options *options, precis_conform_result *out);
/* One layer (options->original is not read): its row in *out, its findings appended to result. */
precis_status precis_conform_one(const precis_conform_options *options, const precis_model_layer *layer,
                                   precis_conform_layer *out, precis_conform_result *result);
void precis_conform_free(precis_conform_result *result);
/* The result as JSON (conform.json). */
char *precis_conform_json(const precis_conform_result *result, const char *original, const char *converted);

#endif
