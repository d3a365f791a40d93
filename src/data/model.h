/* The user's model (DESIGN §12): the linear layers of a safetensors checkpoint, and a dataset
 * with one workload per layer.
 *
 * A checkpoint is a .safetensors file, a sharded checkpoint's index (*.safetensors.index.json,
 * whose weight_map names the file of every tensor) or a directory holding either. A linear layer
 * is a 2-D tensor named "<module>.weight" in F32, F16, BF16 or F8_E4M3; its name is the module
 * name (the weight's name without ".weight"). Embedding tables are 2-D "*.weight" tensors too,
 * but lookups, not GEMMs: names containing "embed" are skipped unless a --layers glob names them.
 * Layers are listed in natural order ("layer.2" before "layer.10"), the order of the model. */
#ifndef PRECIS_MODEL_H
#define PRECIS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "distributions.h"
#include "status.h"

typedef struct precis_model_layer {
  char *name;   /* module name */
  char *file;   /* the safetensors file holding the weight */
  char *tensor; /* the weight's tensor name */
  char dtype[12];
  int64_t out_features, in_features; /* the weight is [out, in]: n = out, k = in */
  int rank;                          /* 2 for a layer; 0..2 for a converted checkpoint's tensors */
  uint64_t bytes;                    /* the weight's bytes in the file */
} precis_model_layer;

typedef struct precis_model {
  char *path;
  precis_model_layer *layers;
  size_t n_layers;
  size_t n_tensors; /* tensors seen in all files */
} precis_model;

/* Finds the linear layers; include (any of, fnmatch on the layer name; none: all) and exclude
 * (none of) choose among them. */
precis_status precis_model_discover(const char *path, const char *const *include, size_t n_include,
                                    const char *const *exclude, size_t n_exclude, precis_model *out);
void precis_model_free(precis_model *model);
/* Every tensor of rank <= 2 of a checkpoint, unfiltered, named by its full tensor name (a
 * converted checkpoint's weights and weight_scale tensors). */
precis_status precis_model_tensors(const char *path, precis_model *out);

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
  const char *activations;  /* NULL, or a safetensors / HDF5 file with one [samples, tokens, k]
                               array per layer, named after the layer (HDF5: /<layer>) */
  const precis_model *converted; /* NULL, or the tensors of a converted checkpoint (precis_model_tensors):
                                    b holds its dequantized weights, c_ref stays the original's */
} precis_model_import_options;

/* Writes the dataset: one workload per layer, b = W^T (k = in, n = out), attributes layer and
 * source; only one layer's arrays are in memory at a time. */
precis_status precis_model_import(const precis_model *model, const precis_model_import_options *options,
                                  char dataset_id[65]);

#endif
