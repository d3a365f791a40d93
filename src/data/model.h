/* The user's model (DESIGN §12): the linear layers of a safetensors checkpoint, and a dataset
 * with one workload per layer.
 *
 * Mixture-of-experts models whose experts are stored fused, one 3-D tensor per projection
 * (gpt-oss and Llama 4: "<m>.experts.gate_up_proj" [experts, in, out], used as x @ W[e];
 * transformers >= 5's in-memory Mixtral/Qwen-MoE layout [experts, out, in], used as
 * F.linear(x, W[e])), give one layer per expert, named "<tensor>[<e>]": a 3-D F32/F16/BF16 tensor
 * whose name holds "experts" and does not end in "bias". Which of the two layouts is read from
 * config.json's model_type (precis_model_layout.experts_in_major), else [experts, out, in].
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
#include "quant_decl.h"
#include "base/status.h"

typedef struct precis_model_layer {
  char *name;   /* module name */
  char *file;   /* the safetensors file holding the weight */
  char *tensor; /* the weight's tensor name */
  char dtype[12];
  int64_t out_features, in_features; /* n = out, k = in */
  bool in_major;                     /* stored [in, out] (transformers' Conv1D) instead of nn.Linear's [out, in] */
  int rank;                          /* 2 for a layer (3 for an expert slice); 0..4 for a converted checkpoint's tensors */
  uint64_t bytes;                    /* the weight's bytes in the file (an expert slice's bytes) */
  int64_t dims[4];                   /* the stored tensor's shape (rank entries) */
  /* One expert of a fused mixture-of-experts tensor [experts, out, in] (or [experts, in, out],
   * in_major): tensor names the whole 3-D tensor, the layer is named "<tensor>[<expert>]", and
   * its bytes start at offset within the tensor's data. n_experts is 0 for any other layer. */
  int64_t n_experts, expert;
  uint64_t offset;
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
  bool experts_in_major; /* fused expert tensors are [experts, in, out] (gpt_oss, llama4, llama4_text) */
  int tie_word_embeddings; /* config.json's tie_word_embeddings: 1 true, 0 false, -1 not said (transformers' default: tied) */
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

/* The model's output projection, whose inputs are the final hidden states and whose outputs are the
 * logits: a layer named "lm_head" or "<prefix>.lm_head" (transformers' name for it). */
bool precis_model_is_output_projection(const char *name);

/* A tied output projection (transformers' tie_word_embeddings: the checkpoint holds no
 * lm_head.weight, the logits are x . E^T with E the input embedding table): appends a layer named
 * "lm_head" whose weight is the embedding table among `tensors` (precis_model_tensors): the first of
 * *embed_tokens.weight, *wte.weight, *word_embeddings.weight of rank 2. *from receives that tensor's
 * name (owned by `tensors`), NULL when the checkpoint has none (nothing appended). */
precis_status precis_model_add_tied_head(precis_model *model, const precis_model *tensors, const char **from);

/* Whether --activations PATH holds an array for this layer (read to check; false when it is not a
 * file precis reads activations from, or a lone .npy). */
bool precis_model_activations_hold(const char *activations, const char *layer);

/* Marks the layers matching any glob as stored [in, out]: their in/out features swap. Returns how
 * many were marked. */
size_t precis_model_mark_in_major(precis_model *model, const char *const *globs, size_t n_globs);
/* Marks every expert slice as stored [in, out]; returns how many. */
size_t precis_model_mark_experts_in_major(precis_model *model);
/* Every tensor of rank <= 4 of a checkpoint, unfiltered, named by its full tensor name (a
 * converted checkpoint's weights and weight_scale tensors, gpt-oss's 4-D *_blocks and 3-D
 * *_scales); out_features and in_features hold the first two dimensions. */
precis_status precis_model_tensors(const char *path, precis_model *out);
/* How many of a checkpoint's tensors (precis_model_tensors) only a quantized checkpoint holds:
 * <m>.weight_scale, .weight_scale_inv, .weight_packed, .weight_global_scale, .weight_scale_2,
 * .input_scale, gpt-oss's *_blocks, and 2-D integer "<m>.weight" tensors. The first one's name is
 * copied to example. */
size_t precis_model_quantized_tensors(const precis_model *tensors, char *example, size_t len);

/* A converted layer whose dequantized weights differ from the original's by more than this
 * relative Frobenius norm is refused as not a conversion of this model (unless forced): 0.5 for
 * codes of 4 bits or more (round-to-nearest INT4 is about 0.1, FP8 E4M3 0.03), 0.9 for 2 and 3
 * bits (INT2 group 128 is about 0.6). Two unrelated matrices are at least about 1 apart (sqrt(2)
 * for equal norms). */
#define PRECIS_FOREIGN_REL_FRO(bits) ((bits) > 0 && (bits) <= 3 ? 0.9 : 0.5)

/* What a converted checkpoint stores for one layer, judged from its tensors' names, dtypes and
 * shapes (no data read). */
typedef struct precis_converted_format {
  bool found;           /* some tensor of the layer is there */
  bool quantized;       /* false: the weight stayed F32/F16/BF16 */
  bool packed;          /* <layer>.weight_packed (compressed-tensors pack-quantized) */
  bool is_float;        /* FP8 codes, else integers */
  int bits;             /* of the codes; 0 when the packed width fits no known width */
  char weight_dtype[12], scale_dtype[12];
  const char *scale_name; /* "weight_scale" or "weight_scale_inv" */
  int64_t scale_rows, scale_cols;
  int64_t n_groups;     /* along in: 0 one scale per tensor, 1 per output channel, G groups; -1 blocks */
  int64_t group_size;   /* columns per group (in / G, rounded up); for blocks the block's [rows, cols] */
  int64_t block_rows;
  bool zero_point, g_idx, input_scale;
} precis_converted_format;

/* The format a converted checkpoint stores for a layer, and (decl may be NULL) what its producer
 * declared for it: *declared_group is the config group (-1: none), *ignored set when the
 * declaration's ignore list names the layer. A layer whose stored format contradicts the
 * declaration is an error naming the declared and the found values. */
precis_status precis_model_converted_format(const precis_model *conv, const precis_quant_decl *decl,
                                            const precis_model_layer *layer, precis_converted_format *found,
                                            int *declared_group, bool *ignored);
void precis_converted_format_describe(const precis_converted_format *f, char *buf, size_t len);

/* A layer's weight as float32 [out, in] (every source dtype widens exactly). */
precis_status precis_model_read_f32(const precis_model_layer *layer, float **out);

/* A converted layer's codes and scales as stored (the formats are listed at
 * precis_converted_layer_read in model.c). */
typedef struct precis_converted_layer {
  int64_t out, in;
  float *code;             /* [out, in]: the integer code (zero point not subtracted), the FP8/FP4 value, or
                              the weight itself for a layer left unconverted */
  float *scale;            /* NULL (unconverted), or [scale_rows, scale_cols] widened to float32 */
  int64_t scale_rows, scale_cols;
  int64_t rows_per_scale;  /* weight rows per scale row: out (per tensor), 1, or a block's height */
  int64_t *group_of;       /* [in]: each column's scale column */
  int32_t *zero_point;     /* NULL, or [scale_rows, scale_cols] */
  float global_scale;      /* scales are divided by it (NVFP4's weight_global_scale); 1 when none */
  float scale_2;           /* scales are multiplied by it (ModelOpt NVFP4's weight_scale_2); 1 when none */
  int bits;                /* of the codes; 0 when unconverted */
  bool quantized, is_float, g_idx, zp_packed;
  char scale_dtype[12];
  char what[192];          /* in words, as source.converted.weights records it */
} precis_converted_layer;

/* declared_bits: the declared code width (0: inferred, 4 or 8 for pack-quantized). */
precis_status precis_converted_layer_read(const precis_model *conv, const precis_model_layer *layer, int declared_bits,
                                          precis_converted_layer *out);
void precis_converted_layer_free(precis_converted_layer *layer);
/* w[r, c] = (code - zero point) * (scale / global scale), rounded once to float32. */
float precis_converted_layer_value(const precis_converted_layer *layer, int64_t r, int64_t c);

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
} precis_model_import_options;

/* Writes the dataset: one workload per layer, b = W^T (k = in, n = out), attributes layer and
 * source; only one layer's arrays are in memory at a time. */
precis_status precis_model_import(const precis_model *model, const precis_model_import_options *options,
                                  char dataset_id[65]);

#endif
