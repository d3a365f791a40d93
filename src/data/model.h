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
#include "base/status.h"

typedef struct precis_model_layer {
  char *name;   /* module name */
  char *file;   /* the safetensors file holding the weight */
  char *tensor; /* the weight's tensor name */
  char dtype[12];
  int64_t out_features, in_features; /* n = out, k = in */
  bool in_major;                     /* stored [in, out] (transformers' Conv1D) instead of nn.Linear's [out, in] */
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

/* What a checkpoint's config.json (next to the weights: in the directory given, or beside the
 * file or index) says about the layout of its weights. GPT-2-style models (model_type gpt2,
 * openai-gpt) build their linear layers from transformers' Conv1D, whose weight is [in, out]:
 * in_major lists those layers' globs, lookups the embedding tables whose name lacks "embed". Both
 * empty when there is no config.json or the model is not one of these. A config.json that is not
 * valid JSON is an error naming it. */
typedef struct precis_model_layout {
  char model_type[48];
  const char *const *in_major;
  size_t n_in_major;
  const char *const *lookups;
  size_t n_lookups;
} precis_model_layout;
precis_status precis_model_read_layout(const char *path, precis_model_layout *out);

/* What a serving estimate needs from the same config.json (DESIGN §17): a compact JSON object with
 * those of model_type, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * hidden_size and torch_dtype that it holds (a multimodal model's text_config when the top level
 * lacks num_hidden_layers). *out is NULL when there is no config.json; the caller frees it. */
precis_status precis_model_read_config(const char *path, char **out);

/* Marks the layers matching any glob as stored [in, out]: their in/out features swap. Returns how
 * many were marked. */
size_t precis_model_mark_in_major(precis_model *model, const char *const *globs, size_t n_globs);
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
  const char *activations;  /* NULL, or where one [samples, tokens, k] array per layer is, named
                               after the layer: a safetensors, HDF5 (/<layer>) or .npz file, a
                               directory of <layer>.npy files, or one .npy for a single layer */
  const char *gradients;     /* NULL, or where dL/dY per layer, [samples, tokens, out], is: the same kinds of file as
                               activations, the same samples (the held-out ones first) and tokens */
  const char *model_config;  /* NULL, or precis_model_read_config's JSON, recorded as the root attribute model_config */
  const precis_model *converted; /* NULL, or the tensors of a converted checkpoint (precis_model_tensors):
                                    b holds its dequantized weights, c_ref stays the original's */
} precis_model_import_options;

/* Writes the dataset: one workload per layer, b = W^T (k = in, n = out), attributes layer and
 * source; only one layer's arrays are in memory at a time. */
precis_status precis_model_import(const precis_model *model, const precis_model_import_options *options,
                                  char dataset_id[65]);

#endif
