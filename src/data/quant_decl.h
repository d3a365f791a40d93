/* What a converted checkpoint's producer declared about its quantization (DESIGN §18), read before
 * any of its tensors is trusted:
 *   - compressed-tensors (llm-compressor): config.json's "quantization_config" with quant_method
 *     "compressed-tensors": config_groups {name: {targets, weights, input_activations, format}},
 *     ignore, format;
 *   - ModelOpt: hf_quant_config.json {"quantization": {quant_algo, group_size, exclude_modules}}
 *     (or the same under config.json's quantization_config with quant_method "modelopt");
 *   - DeepSeek-style FP8: quantization_config {quant_method "fp8", weight_block_size, activation_scheme};
 *   - gpt-oss MXFP4: quantization_config {quant_method "mxfp4", modules_to_not_convert}.
 * The files are looked for next to the weights (in the directory given, or beside the file or
 * index), as precis_model_read_layout finds config.json. */
#ifndef PRECIS_QUANT_DECL_H
#define PRECIS_QUANT_DECL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* One tensor's quantization as declared (compressed-tensors' QuantizationArgs). */
typedef struct precis_quant_args {
  bool present;
  int num_bits;
  bool is_float;        /* type "float" (FP8/FP4), else "int" */
  bool symmetric;
  char strategy[16];    /* tensor, channel, group, block, token, tensor_group */
  int64_t group_size;   /* 0: none */
  int64_t block[2];     /* block_structure [rows, cols]; 0: none */
  bool dynamic;         /* activations: scales computed at run time (false: a static input_scale) */
} precis_quant_args;

typedef struct precis_quant_group {
  char *name;           /* "group_0", or the producer's algorithm name */
  char **targets;       /* "Linear", an exact module name, or "re:REGEX" */
  size_t n_targets;
  precis_quant_args weights, input;
  char format[48];      /* pack-quantized, int-quantized, float-quantized, naive-quantized, nvfp4-pack-quantized, ... */
} precis_quant_group;

typedef struct precis_quant_decl {
  bool present;
  char *file;           /* the file the declaration was read from */
  char where[64];       /* "quantization_config" or "quantization" (hf_quant_config.json) */
  char producer[48];    /* quant_method: compressed-tensors, modelopt, fp8, mxfp4 */
  char format[48];
  precis_quant_group *groups;
  size_t n_groups;
  char **ignore;        /* module names or "re:REGEX" the producer left unquantized */
  size_t n_ignore;
  /* Set by the caller (not owned): --strip-prefix's P. The layers are named without it, but the
   * producer's ignore and target names may carry it: a name matches with or without P. */
  const char *strip_prefix;
} precis_quant_decl;

/* Reads the declaration next to PATH; present is false when there is none. A file that is not
 * valid JSON, or a declaration of an unexpected shape, is an error naming the file and field. */
precis_status precis_quant_decl_read(const char *path, precis_quant_decl *out);
void precis_quant_decl_free(precis_quant_decl *decl);

/* The group whose targets name the layer (the first, as compressed-tensors resolves them), or -1.
 * *ignored is set when the declaration's ignore list names it. With strip_prefix set, the layer
 * also matches as strip_prefix + layer. gpt-oss's mxfp4 declaration targets only the fused expert
 * layers ("<m>.experts.gate_up_proj[e]", ".down_proj[e]": transformers converts nothing else), and
 * its modules_to_not_convert match as transformers' should_convert_module does (a regex from the
 * start to a module boundary, or a suffix). */
int precis_quant_decl_match(const precis_quant_decl *decl, const char *layer, bool *ignored);

/* "INT4 symmetric, group 128" / "FP8 E4M3 per tensor, static" ... */
void precis_quant_args_describe(const precis_quant_args *args, bool activations, char *buf, size_t len);
/* One line for the whole declaration: "compressed-tensors pack-quantized (config.json
 * quantization_config)". */
void precis_quant_decl_describe(const precis_quant_decl *decl, char *buf, size_t len);

#endif
