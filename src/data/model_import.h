/* precis import --model (DESIGN §12): a dataset with one workload per linear layer of a checkpoint
 * (model.h), b from its weights or from a converted checkpoint's (model_converted.h, with that layer's
 * conformance, conform.h), a from synthetic or captured activations. */
#ifndef PRECIS_MODEL_IMPORT_H
#define PRECIS_MODEL_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distributions.h"
#include "model.h"
#include "quant_decl.h"
#include "base/status.h"

/* Whether --activations PATH holds an array for this layer (read to check; false when it is not a
 * file precis reads activations from, or a lone .npy). */
bool precis_model_activations_hold(const char *activations, const char *layer);

typedef struct precis_model_import_options {
  const char *output;
  bool force;
  int gzip_level;
  bool progress;            /* a progress bar on stderr, one step per layer */
  int64_t tokens;           /* m: rows of a (synthetic activations) */
  int64_t batch;            /* held-out samples (synthetic; from a file: samples - calib when 0) */
  int64_t calib;            /* calibration samples */
  uint64_t seed;
  const precis_dist *a;     /* the synthetic activations' distribution */
  const char *activations;  /* NULL, or where one [samples, tokens, k] array per layer is, named
                               after the layer: a safetensors, HDF5 (/<layer>) or .npz file, a
                               directory of <layer>.npy files, or one .npy for a single layer */
  const char *gradients;     /* NULL, or where dL/dY per layer, [samples, tokens, out], is: the same kinds of file as
                               activations, the same samples (the held-out ones first) and tokens */
  const char *model_config;  /* NULL, or precis_model_read_config's JSON, recorded as the root attribute model_config */
  const precis_model *converted; /* NULL, or the tensors of a converted checkpoint (precis_model_tensors):
                                    b holds its dequantized weights, c_ref stays the original's */
  bool force_foreign;       /* import a converted layer even when it is far from the original's */
  const precis_quant_decl *declared; /* NULL, or what the converted checkpoint's producer declared */
  bool weights_only;        /* a as given even when the declared scheme quantizes the activations */
  uint64_t max_memory;      /* 0, or bytes one layer's working set must fit (docs/model.md "Memory"): its
                               reference is computed fewer samples at a time, or the import is refused */
} precis_model_import_options;

/* Writes the dataset: one workload per layer, b = W^T (k = in, n = out), attributes layer and
 * source; only one layer's arrays are in memory at a time, and its c_ref and ab_abs a block of
 * samples at a time (at most 512 MiB of them, or what max_memory leaves; the values are the same
 * whatever the block). With progress, the estimate of the peak is printed before the first layer. */
precis_status precis_model_import(const precis_model *model, const precis_model_import_options *options,
                                  char dataset_id[65]);

#endif
