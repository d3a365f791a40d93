/* A converted checkpoint (DESIGN §18), read against the original's layers (model.h): which format
 * it stores for a layer (model_converted.c lists them: FP8/INT8 with scales, compressed-tensors
 * pack-quantized and NVFP4, gpt-oss MXFP4), its codes and scales as stored (unpacked), the
 * dequantized weights, and the activations of the scheme its producer declared (quant_decl.h). */
#ifndef PRECIS_MODEL_CONVERTED_H
#define PRECIS_MODEL_CONVERTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "quant_decl.h"
#include "base/status.h"

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

/* A converted layer's codes and scales as stored (the formats are listed at
 * precis_converted_layer_read in model_converted.c). */
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

/* A converted layer dequantized to float32 [out, in] (precis_converted_layer_value for every element);
 * what receives the layer's format in words (precis_converted_layer.what). */
precis_status precis_converted_weight(const precis_model *conv, const precis_model_layer *layer, int declared_bits, float **out,
                                      char *what, size_t what_len);
/* a [samples, m, k] quantized and dequantized in place as the declared activations `args` say the served
 * layer quantizes its input (model_converted.c says how); what receives them in words. */
precis_status precis_deployed_activations(const precis_model *conv, const precis_model_layer *layer, const precis_quant_args *args,
                                          float *a, int64_t samples, int64_t m, int64_t k, char *what, size_t what_len);
/* A gpt-oss MXFP4 expert layer's <tensor>_blocks and <tensor>_scales among conv's tensors (NULL when absent). */
void precis_mxfp4_tensors(const precis_model *conv, const precis_model_layer *layer, const precis_model_layer **blocks,
                          const precis_model_layer **scales);

#endif
