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
 * Layers are listed in natural order ("layer.2" before "layer.10"), the order of the model.
 *
 * This header is the first of four rooms, whose includes run one way: reading a plain checkpoint
 * (model.h) <- reading a converted one, its packing and dequantization (model_converted.h, with
 * quant_decl.h for what its producer declared) <- conformance to that declaration (conform.h) <-
 * the import that writes a dataset from all three (model_import.h). */
#ifndef PRECIS_MODEL_H
#define PRECIS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A layer's weight as float32 [out, in] (every source dtype widens exactly). */
precis_status precis_model_read_f32(const precis_model_layer *layer, float **out);

/* A tensor's bytes and values, for the rooms above (model_converted.c, model_import.c). */
/* The tensor named `name` among a checkpoint's tensors (precis_model_tensors), or NULL. */
const precis_model_layer *precis_model_find_tensor(const precis_model *m, const char *name);
/* The weight's bytes as stored (an expert slice's bytes), malloc'ed; checks the file still holds them. */
precis_status precis_model_read_raw(const precis_model_layer *layer, uint8_t **raw);
/* Element i of stored bytes of dtype F32, F16, BF16, F8_E4M3 or I8, widened exactly to float32. */
float precis_model_decode(const uint8_t *raw, const char *dtype, uint64_t i);
/* A dtype a linear layer's weight is read in: F32, F16, BF16, F8_E4M3. */
bool precis_model_linear_dtype(const char *dtype);

#endif
