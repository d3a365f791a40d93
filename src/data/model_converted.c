/* Reading a converted checkpoint (model_converted.h): the formats it stores, their unpacking and
 * dequantization. */
#include "model_converted.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/format.h"
#include "codes.h"

static int64_t read_int(const uint8_t *raw, const char *dtype, uint64_t i) {
  if (strcmp(dtype, "I8") == 0) return (int8_t)raw[i];
  if (strcmp(dtype, "I32") == 0) {
    uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
                 (uint32_t)raw[4 * i + 3] << 24;
    return (int32_t)u;
  }
  uint64_t u = 0;
  for (int b = 7; b >= 0; b--) u = u << 8 | raw[8 * i + (uint64_t)b];
  return (int64_t)u;
}

static bool is_float_dtype(const char *dtype) { return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16"); }

/* ------------------------------------------------------------------ the declared scheme */

/* The int32 words a row of `in` values of `bits` bits takes: 32/bits per word when that divides
 * 32 (pack_to_int32), else the values laid end to end (compressed-tensors >= 0.20's dense 3-bit). */
static int64_t packed_words(int64_t in, int bits) {
  return 32 % bits == 0 ? (in + 32 / bits - 1) / (32 / bits) : (in * bits + 31) / 32;
}

/* gpt-oss MXFP4 (transformers' integrations/mxfp4.py, convert_moe_packed_tensors): a fused expert
 * tensor <t> is stored as <t>_blocks U8 [experts, out, in / 32, 16], two FP4 E2M1 codes a byte (the
 * even column in the low nibble), and <t>_scales U8 [experts, out, in / 32], an E8M0 exponent per
 * block of 32 columns: w[e, r, c] = e2m1(code) * 2^(scale - 127). Finds both for an expert layer. */
void precis_mxfp4_tensors(const precis_model *conv, const precis_model_layer *layer, const precis_model_layer **blocks,
                          const precis_model_layer **scales) {
  /* The fused tensor's name from the layer's ("<tensor>[<e>]"), which --strip-prefix may have shortened
   * as it did the converted checkpoint's names. */
  const char *bracket = strrchr(layer->name, '[');
  const int base = bracket ? (int)(bracket - layer->name) : (int)strlen(layer->name);
  char name[1100];
  snprintf(name, sizeof name, "%.*s_blocks", base, layer->name);
  *blocks = precis_model_find_tensor(conv, name);
  snprintf(name, sizeof name, "%.*s_scales", base, layer->name);
  *scales = precis_model_find_tensor(conv, name);
}

/* One expert's bytes of a fused tensor of the converted checkpoint, as a layer precis_model_read_raw reads. */
static precis_model_layer expert_slice(const precis_model_layer *t, int64_t expert) {
  precis_model_layer slice = *t;
  slice.n_experts = t->dims[0];
  slice.expert = expert;
  slice.bytes = t->bytes / (uint64_t)(t->dims[0] > 0 ? t->dims[0] : 1);
  slice.offset = (uint64_t)expert * slice.bytes;
  return slice;
}

static precis_status mxfp4_check(const precis_model_layer *layer, const precis_model_layer *b, const precis_model_layer *s) {
  const int64_t groups = (layer->in_features + 31) / 32;
  if (strcmp(b->dtype, "U8") || b->rank != 4 || b->dims[0] != layer->n_experts || b->dims[1] != layer->out_features ||
      b->dims[2] != groups || b->dims[3] != 16 || layer->in_features % 32)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 ", %" PRId64 ", 16] (gpt-oss MXFP4: "
                       "[experts, out, in / 32, 16], two E2M1 codes a byte) for %s [%" PRId64 " experts, out %" PRId64
                       ", in %" PRId64 "], found %s of rank %d [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                       b->file, b->tensor, layer->n_experts, layer->out_features, groups, layer->tensor, layer->n_experts,
                       layer->out_features, layer->in_features, b->dtype, b->rank, b->dims[0], b->dims[1], b->dims[2],
                       b->dims[3]);
  if (strcmp(s->dtype, "U8") || s->rank != 3 || s->dims[0] != layer->n_experts || s->dims[1] != layer->out_features ||
      s->dims[2] != groups)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 ", %" PRId64 "] (gpt-oss MXFP4: an "
                       "E8M0 exponent per 32 columns), found %s of rank %d", s->file, s->tensor, layer->n_experts,
                       layer->out_features, groups, s->dtype, s->rank);
  return PRECIS_OK;
}

precis_status precis_model_converted_format(const precis_model *conv, const precis_quant_decl *decl,
                                            const precis_model_layer *layer, precis_converted_format *f,
                                            int *declared_group, bool *ignored) {
  memset(f, 0, sizeof *f);
  *declared_group = -1;
  *ignored = false;
  const int64_t n_out = layer->out_features, n_in = layer->in_features;
  char name[1100];
  const precis_model_layer *w, *s;
#define LOOKUP(suffix) (snprintf(name, sizeof name, "%s." suffix, layer->name), precis_model_find_tensor(conv, name))
  const precis_model_layer *packed = LOOKUP("weight_packed");
  w = packed ? packed : LOOKUP("weight");
  s = LOOKUP("weight_scale");
  f->scale_name = "weight_scale";
  if (!s && (s = LOOKUP("weight_scale_inv"))) f->scale_name = "weight_scale_inv";
  f->zero_point = LOOKUP("weight_zero_point") != NULL;
  f->g_idx = LOOKUP("weight_g_idx") != NULL;
  f->input_scale = LOOKUP("input_scale") != NULL;
#undef LOOKUP
  if (layer->n_experts) { /* one expert of a fused tensor: gpt-oss MXFP4 blocks and scales */
    packed = NULL;
    precis_mxfp4_tensors(conv, layer, &w, &s);
    f->scale_name = "_scales";
    if (w && s) {
      precis_status st = mxfp4_check(layer, w, s);
      if (st != PRECIS_OK) return st;
    }
    if (w && !s) w = NULL;
    f->zero_point = f->g_idx = f->input_scale = false;
  }
  if (decl && decl->present) *declared_group = precis_quant_decl_match(decl, layer->name, ignored);
  if (!w) return PRECIS_OK;
  f->found = true;
  f->packed = packed != NULL;
  snprintf(f->weight_dtype, sizeof f->weight_dtype, "%s", w->dtype);
  if (layer->n_experts) { /* MXFP4 */
    f->is_float = true;
    f->bits = 4;
    f->quantized = true;
    snprintf(f->scale_dtype, sizeof f->scale_dtype, "E8M0");
    f->scale_rows = layer->out_features;
    f->scale_cols = s->dims[2];
    f->n_groups = f->scale_cols;
    f->group_size = (n_in + f->n_groups - 1) / f->n_groups;
  } else if (!strcmp(w->dtype, "U8")) { /* NVFP4: two E2M1 codes a byte (compressed-tensors weight_packed, ModelOpt weight) */
    f->is_float = true;
    f->bits = 4;
    f->quantized = true;
  } else if (packed) {
    f->quantized = true;
    const int declared_bits = *declared_group >= 0 ? decl->groups[*declared_group].weights.num_bits : 0;
    if (declared_bits >= 1 && declared_bits <= 8 && packed_words(n_in, declared_bits) == w->in_features) f->bits = declared_bits;
    for (int bits = 8; bits >= 2 && !f->bits; bits--)
      if (packed_words(n_in, bits) == w->in_features) f->bits = bits;
  } else if (!strcmp(w->dtype, "I8") || !strcmp(w->dtype, "F8_E4M3")) {
    f->quantized = true;
    f->bits = 8;
    f->is_float = w->dtype[0] == 'F';
  }
  if (s && !layer->n_experts) {
    snprintf(f->scale_dtype, sizeof f->scale_dtype, "%s", s->dtype);
    f->scale_rows = s->rank >= 1 ? s->out_features : 1;
    f->scale_cols = s->rank == 2 ? s->in_features : 1;
    if ((uint64_t)f->scale_rows * (uint64_t)f->scale_cols == 1 && s->rank < 2) f->n_groups = 0;
    else if (f->scale_rows == n_out && f->scale_cols >= 1) {
      f->n_groups = f->scale_cols;
      f->group_size = (n_in + f->n_groups - 1) / f->n_groups;
    } else if (f->scale_rows < n_out && f->scale_rows >= 1 && f->scale_cols >= 1) {
      f->n_groups = -1; /* blocks of [ceil(out / rows), ceil(in / cols)] */
      f->block_rows = (n_out + f->scale_rows - 1) / f->scale_rows;
      f->group_size = (n_in + f->scale_cols - 1) / f->scale_cols;
    }
  }
  if (*declared_group < 0 && !*ignored) return PRECIS_OK;

  /* Checked against the declaration, each mismatch naming the declared and the found values. */
  char declared[160], found[200];
  const precis_quant_group *g = *declared_group >= 0 ? &decl->groups[*declared_group] : NULL;
  const precis_quant_args *a = g ? &g->weights : NULL;
  if (a) precis_quant_args_describe(a, false, declared, sizeof declared);
  precis_converted_format_describe(f, found, sizeof found);
  const char *why = NULL;
  char detail[160] = "";
  if (*ignored) {
    if (f->quantized) why = "the declaration's ignore list names this layer (left unquantized), but it is stored quantized";
  } else if (!a || !a->present) {
    if (f->quantized) why = "its config group quantizes no weights, but they are stored quantized";
  } else if (!f->quantized) {
    why = "declared quantized, but the weight is stored unquantized (and the ignore list does not name it)";
  } else if (a->num_bits != f->bits) {
    snprintf(detail, sizeof detail, "declared %d-bit codes, found %d-bit", a->num_bits, f->bits);
  } else if (a->is_float != f->is_float && !f->packed) {
    snprintf(detail, sizeof detail, "declared %s codes, found %s", a->is_float ? "float" : "integer", w->dtype);
  } else if (!a->is_float && !a->symmetric && !f->zero_point) {
    snprintf(detail, sizeof detail, "declared asymmetric, but there is no %s.weight_zero_point", layer->name);
  } else if (!a->is_float && a->symmetric && f->zero_point && f->packed) {
    snprintf(detail, sizeof detail, "declared symmetric, but %s.weight_zero_point is stored", layer->name);
  } else if (!s) {
    snprintf(detail, sizeof detail, "no %s.weight_scale", layer->name);
  } else if (!strcmp(a->strategy, "tensor") && f->n_groups != 0) {
    snprintf(detail, sizeof detail, "declared one scale per tensor, found %s [%" PRId64 ", %" PRId64 "]", f->scale_name,
             f->scale_rows, f->scale_cols);
  } else if (!strcmp(a->strategy, "channel") && f->n_groups != 1) {
    snprintf(detail, sizeof detail, "declared one scale per output channel ([%" PRId64 ", 1]), found %s [%" PRId64 ", %" PRId64 "]",
             n_out, f->scale_name, f->scale_rows, f->scale_cols);
  } else if ((!strcmp(a->strategy, "group") || !strcmp(a->strategy, "tensor_group")) &&
             (a->group_size <= 0 || f->n_groups != (n_in + a->group_size - 1) / a->group_size)) {
    snprintf(detail, sizeof detail,
             "declared groups of %" PRId64 " columns (%" PRId64 " groups of in_features = %" PRId64 "), found %s [%" PRId64
             ", %" PRId64 "]: %" PRId64 " groups",
             a->group_size, a->group_size > 0 ? (n_in + a->group_size - 1) / a->group_size : 0, n_in, f->scale_name,
             f->scale_rows, f->scale_cols, f->n_groups);
  } else if (!strcmp(a->strategy, "block") &&
             (f->n_groups != -1 || f->scale_rows != (n_out + a->block[0] - 1) / a->block[0] ||
              f->scale_cols != (n_in + a->block[1] - 1) / a->block[1])) {
    snprintf(detail, sizeof detail, "declared blocks of %" PRId64 "x%" PRId64 " ([%" PRId64 ", %" PRId64 "] scales), found %s [%" PRId64
             ", %" PRId64 "]", a->block[0], a->block[1], (n_out + a->block[0] - 1) / a->block[0],
             (n_in + a->block[1] - 1) / a->block[1], f->scale_name, f->scale_rows, f->scale_cols);
  } else if (!strcmp(a->strategy, "token") || a->strategy[0] == '\0') {
    snprintf(detail, sizeof detail, "declared weight strategy \"%s\" is not a weight granularity", a->strategy);
  }
  if (!why && !detail[0]) return PRECIS_OK;
  char where[300];
  if (g) snprintf(where, sizeof where, "%s's %s.config_groups.%s.weights", decl->file, decl->where, g->name);
  else snprintf(where, sizeof where, "%s's %s ignore list", decl->file, decl->where);
  if (!strcmp(decl->producer, "modelopt") || !strcmp(decl->producer, "fp8") || !strcmp(decl->producer, "mxfp4"))
    snprintf(where, sizeof where, "%s's %s (%s)", decl->file, decl->where, decl->producer);
  return precis_fail(PRECIS_E_INPUT, "layer %s: %s does not match what its producer declared: declared %s (%s); found %s%s%s",
                     layer->name, conv->path, a ? declared : "unquantized", where, found, detail[0] ? ": " : "",
                     detail[0] ? detail : why);
}

void precis_converted_format_describe(const precis_converted_format *f, char *buf, size_t len) {
  if (!f->found) {
    snprintf(buf, len, "missing");
    return;
  }
  if (!f->quantized) {
    snprintf(buf, len, "%s (unquantized)", f->weight_dtype);
    return;
  }
  char codes[48], scales[96] = "no scale";
  if (f->is_float && f->bits == 4) snprintf(codes, sizeof codes, "FP4 E2M1 packed");
  else if (f->packed) snprintf(codes, sizeof codes, "INT%d packed", f->bits);
  else snprintf(codes, sizeof codes, "%s", f->is_float ? "FP8 E4M3" : "INT8");
  if (f->scale_dtype[0]) {
    if (f->n_groups == 0) snprintf(scales, sizeof scales, "per tensor %s", f->scale_dtype);
    else if (f->n_groups == 1) snprintf(scales, sizeof scales, "per channel %s", f->scale_dtype);
    else if (f->n_groups > 1) snprintf(scales, sizeof scales, "group %" PRId64 " %s", f->group_size, f->scale_dtype);
    else snprintf(scales, sizeof scales, "block %" PRId64 "x%" PRId64 " %s", f->block_rows, f->group_size, f->scale_dtype);
  }
  snprintf(buf, len, "%s, %s%s%s%s", codes, scales, f->zero_point ? ", zero points" : "", f->g_idx ? ", g_idx" : "",
           f->input_scale ? ", input_scale" : "");
}

/* The value at (row, col) of a tensor packed by compressed-tensors' pack_to_int32: the values of a
 * row (packed_dim 1) or of a column (packed_dim 0) laid end to end, `bits` each, from the lowest bit
 * of the first int32 upward (a value may straddle two words when bits does not divide 32, as
 * compressed-tensors >= 0.20 packs 3-bit codes), each stored as the signed value plus 2^(bits-1). */
static int64_t unpack_value(const uint8_t *raw, int64_t cols_stored, int bits, int packed_dim, int64_t row, int64_t col) {
  const int64_t index = packed_dim == 0 ? row : col, bit = index * bits;
  const int64_t word_row = packed_dim == 0 ? bit / 32 : row, word_col = packed_dim == 1 ? bit / 32 : col;
  const int shift = (int)(bit % 32);
  uint64_t value = (uint32_t)read_int(raw, "I32", (uint64_t)(word_row * cols_stored + word_col)) >> shift;
  if (shift + bits > 32) {
    const int64_t next_row = packed_dim == 0 ? word_row + 1 : word_row, next_col = packed_dim == 1 ? word_col + 1 : word_col;
    value |= (uint64_t)(uint32_t)read_int(raw, "I32", (uint64_t)(next_row * cols_stored + next_col)) << (32 - shift);
  }
  return (int64_t)(value & ((1u << bits) - 1u)) - ((int64_t)1 << (bits - 1));
}

void precis_converted_layer_free(precis_converted_layer *l) {
  free(l->code);
  free(l->scale);
  free(l->group_of);
  free(l->zero_point);
  memset(l, 0, sizeof *l);
}

float precis_converted_layer_value(const precis_converted_layer *l, int64_t r, int64_t c) {
  const float q = l->code[(uint64_t)r * (uint64_t)l->in + (uint64_t)c];
  if (!l->scale) return q;
  const uint64_t at = (uint64_t)(r / l->rows_per_scale) * (uint64_t)l->scale_cols + (uint64_t)l->group_of[c];
  const float zp = l->zero_point ? (float)l->zero_point[at] : 0.0f;
  float scale = l->global_scale != 1.0f ? l->scale[at] / l->global_scale : l->scale[at];
  if (l->scale_2 != 1.0f) scale *= l->scale_2;
  return (q - zp) * scale;
}

/* Scales of a layer: [1], [out] or [out, 1] one per row; [out, G] groups along in; [R, C] with
 * R < out blocks of [ceil(out / R), ceil(in / C)] (compressed-tensors FP8_BLOCK, DeepSeek's
 * weight_scale_inv). Sets the layout in l and checks it against the weight. */
static precis_status scale_layout(const precis_model_layer *s, const char *sname, precis_converted_layer *l) {
  const bool one = (uint64_t)s->out_features * (uint64_t)s->in_features == 1 && s->rank < 2;
  l->scale_rows = one ? 1 : s->out_features;
  l->scale_cols = one || s->rank < 2 ? 1 : s->in_features;
  if (one) l->rows_per_scale = l->out;
  else if (l->scale_rows == l->out) l->rows_per_scale = 1;
  else if (l->scale_rows >= 1 && l->scale_rows < l->out && l->scale_cols >= 1 &&
           (l->out + (l->out + l->scale_rows - 1) / l->scale_rows - 1) / ((l->out + l->scale_rows - 1) / l->scale_rows) ==
               l->scale_rows)
    l->rows_per_scale = (l->out + l->scale_rows - 1) / l->scale_rows; /* blocks of ceil(out / R) rows */
  else
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one scale, one per output channel ([%" PRId64 "] or [%" PRId64
                       ", 1]), [%" PRId64 ", G] groups or [R, C] blocks; found %s [%" PRId64 ", %" PRId64 "]",
                       s->file, sname, l->out, l->out, l->out, s->dtype, s->out_features, s->in_features);
  if (l->scale_cols > l->in)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %" PRId64 " scale columns for in_features = %" PRId64, s->file, sname,
                       l->scale_cols, l->in);
  return PRECIS_OK;
}

/* Every column's scale column: consecutive runs (groups, blocks), or weight_g_idx. */
static precis_status column_groups(const precis_model *conv, const precis_model_layer *layer, const precis_model_layer *s,
                                   const char *sname, bool blocks, precis_converted_layer *l) {
  const int64_t n_in = l->in, n_groups = l->scale_cols;
  char gname[1100];
  snprintf(gname, sizeof gname, "%s.weight_g_idx", layer->name);
  const precis_model_layer *g = precis_model_find_tensor(conv, gname);
  uint8_t *graw = NULL;
  precis_status st = PRECIS_OK;
  if (!(l->group_of = malloc((uint64_t)n_in * sizeof *l->group_of))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  bool ordered = false;
  if (g) {
    if ((strcmp(g->dtype, "I32") && strcmp(g->dtype, "I64")) || g->rank != 1 || g->out_features != n_in)
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 "] (the group of each input column), found %s "
                         "of %" PRId64 " elements", g->file, gname, n_in, g->dtype, g->out_features * g->in_features);
    if ((st = precis_model_read_raw(g, &graw)) != PRECIS_OK) return st;
    ordered = true;
    for (int64_t c = 0; c < n_in && ordered; c++) ordered = read_int(graw, g->dtype, (uint64_t)c) != -1;
    for (int64_t c = 0; c < n_in && ordered && st == PRECIS_OK; c++) {
      l->group_of[c] = read_int(graw, g->dtype, (uint64_t)c);
      if (l->group_of[c] < 0 || l->group_of[c] >= n_groups)
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element %" PRId64 " is %" PRId64 ", expected a group 0 .. %" PRId64,
                         g->file, gname, c, l->group_of[c], n_groups - 1);
    }
    free(graw);
    if (st != PRECIS_OK) return st;
  }
  l->g_idx = ordered;
  if (!ordered) {
    if (!blocks && n_in % n_groups)
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %" PRId64 " groups do not divide in_features = %" PRId64
                         " (compressed-tensors requires groups of equal size)", s->file, sname, n_groups, n_in);
    const int64_t width = (n_in + n_groups - 1) / n_groups;
    for (int64_t c = 0; c < n_in; c++) l->group_of[c] = c / width;
  }
  return PRECIS_OK;
}

/* A converted layer's codes and scales (model.h). Formats:
 *   - <layer>.weight F8_E4M3 or I8 times <layer>.weight_scale (or DeepSeek's weight_scale_inv, a
 *     multiplier despite its name) per tensor, per channel, per group or per block;
 *   - compressed-tensors pack-quantized (compressed_tensors/compressors/pack_quantized/base.py,
 *     helpers.py pack_to_int32): <layer>.weight_packed I32 [out, ceil(in * bits / 32)], the codes
 *     of a row end to end from the lowest bit, each + 2^(bits-1); <layer>.weight_shape I64 [2];
 *     weight_scale [out, G]; optional weight_zero_point (I32 packed along the rows, or I8) and
 *     weight_g_idx. bits is the declared num_bits, else inferred from the width (4 or 8, or the
 *     one width that fits);
 *   - compressed-tensors nvfp4-pack-quantized (compressors/nvfp4/helpers.py): <layer>.weight_packed
 *     U8 [out, in / 2], two FP4 E2M1 codes a byte, the even column in the low nibble;
 *     weight_scale F8_E4M3 [out, in / 16]; weight_global_scale F32 [1]: w = q * (scale / global);
 *   - a float weight without a scale: a layer left unconverted. */
/* One expert of a gpt-oss MXFP4 fused tensor (precis_mxfp4_tensors): codes [out, in] as E2M1 values, one
 * scale 2^(e - 127) per 32 columns (exact in float32: E8M0 spans 2^-127 .. 2^127). */
static precis_status mxfp4_layer_read(const precis_model *conv, const precis_model_layer *layer, precis_converted_layer *l) {
  const precis_model_layer *b = NULL, *s = NULL;
  uint8_t *braw = NULL, *sraw = NULL;
  precis_mxfp4_tensors(conv, layer, &b, &s);
  precis_status st = PRECIS_OK;
  if (!b || !s) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensors %s_blocks and %s_scales (gpt-oss MXFP4) for expert %" PRId64 " of %s",
                     conv->path, layer->tensor, layer->tensor, layer->expert, layer->tensor);
    goto done;
  }
  if ((st = mxfp4_check(layer, b, s)) != PRECIS_OK) goto done;
  const precis_model_layer bslice = expert_slice(b, layer->expert), sslice = expert_slice(s, layer->expert);
  if ((st = precis_model_read_raw(&bslice, &braw)) != PRECIS_OK || (st = precis_model_read_raw(&sslice, &sraw)) != PRECIS_OK) goto done;
  const int64_t n_out = l->out, n_in = l->in, groups = n_in / 32;
  l->bits = 4;
  l->is_float = l->quantized = true;
  l->scale_rows = n_out;
  l->scale_cols = groups;
  l->rows_per_scale = 1;
  snprintf(l->scale_dtype, sizeof l->scale_dtype, "E8M0");
  if (!(l->code = malloc((uint64_t)n_out * (uint64_t)n_in * sizeof *l->code)) ||
      !(l->scale = malloc((uint64_t)n_out * (uint64_t)groups * sizeof *l->scale)) ||
      !(l->group_of = malloc((uint64_t)n_in * sizeof *l->group_of))) {
    st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
    goto done;
  }
  for (int64_t c = 0; c < n_in; c++) l->group_of[c] = c / 32;
  for (uint64_t i = 0; i < (uint64_t)n_out * (uint64_t)groups; i++) {
    if (sraw[i] == 255) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expert %" PRId64 ", element %" PRIu64 " is 255, E8M0's NaN", s->file,
                       s->tensor, layer->expert, i);
      goto done;
    }
    l->scale[i] = ldexpf(1.0f, (int)sraw[i] - 127);
  }
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++) {
      const uint8_t byte = braw[(uint64_t)r * (uint64_t)(n_in / 2) + (uint64_t)(c / 2)];
      l->code[(uint64_t)r * (uint64_t)n_in + (uint64_t)c] = precis_e2m1_bits_to_f32((uint8_t)((byte >> (4 * (c % 2))) & 15u));
    }
  snprintf(l->what, sizeof l->what, "FP4 E2M1 packed x E8M0 scales, %" PRId64 " groups of 32 columns (gpt-oss MXFP4, expert %" PRId64 ")",
           groups, layer->expert);
done:
  free(braw);
  free(sraw);
  if (st != PRECIS_OK) precis_converted_layer_free(l);
  return st;
}

precis_status precis_converted_layer_read(const precis_model *conv, const precis_model_layer *layer, int declared_bits,
                                          precis_converted_layer *l) {
  memset(l, 0, sizeof *l);
  l->out = layer->out_features;
  l->in = layer->in_features;
  l->global_scale = 1.0f;
  l->scale_2 = 1.0f;
  if (layer->n_experts) return mxfp4_layer_read(conv, layer, l);
  const int64_t n_out = l->out, n_in = l->in;
  char wname[1100], pname[1100], sname[1100], zname[1100], shname[1100], gsname[1100];
  snprintf(wname, sizeof wname, "%s.weight", layer->name);
  snprintf(pname, sizeof pname, "%s.weight_packed", layer->name);
  snprintf(sname, sizeof sname, "%s.weight_scale", layer->name);
  snprintf(zname, sizeof zname, "%s.weight_zero_point", layer->name);
  snprintf(shname, sizeof shname, "%s.weight_shape", layer->name);
  snprintf(gsname, sizeof gsname, "%s.weight_global_scale", layer->name);
  const precis_model_layer *p = precis_model_find_tensor(conv, pname), *t = p ? p : precis_model_find_tensor(conv, wname), *s = precis_model_find_tensor(conv, sname);
  if (!s) {
    snprintf(sname, sizeof sname, "%s.weight_scale_inv", layer->name);
    s = precis_model_find_tensor(conv, sname);
  }
  const precis_model_layer *z = precis_model_find_tensor(conv, zname), *sh = precis_model_find_tensor(conv, shname), *gs = precis_model_find_tensor(conv, gsname);
  char s2name[1100];
  snprintf(s2name, sizeof s2name, "%s.weight_scale_2", layer->name);
  const precis_model_layer *s2 = precis_model_find_tensor(conv, s2name);
  uint8_t *raw = NULL, *sraw = NULL, *zraw = NULL, *aux = NULL;
  precis_status st = PRECIS_OK;
  if (!t) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s or %s (the converted checkpoint lacks layer %s)", conv->path, wname, pname,
                     layer->name);
    goto done;
  }
  const uint64_t count = (uint64_t)n_out * (uint64_t)n_in;
  const bool nvfp4 = !strcmp(t->dtype, "U8");
  if (p && !nvfp4) {
    if (strcmp(p->dtype, "I32") || p->rank != 2 || p->out_features != n_out) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", in/8] (compressed-tensors pack-quantized), "
                       "found %s [%" PRId64 ", %" PRId64 "]", p->file, pname, n_out, p->dtype, p->out_features, p->in_features);
      goto done;
    }
    int bits = declared_bits;
    if (!bits) { /* undeclared: the two widths llm-compressor's W4A16 / W8A16 write */
      const bool fits4 = p->in_features == packed_words(n_in, 4), fits8 = p->in_features == packed_words(n_in, 8);
      bits = fits4 == fits8 ? 0 : fits4 ? 4 : 8;
      if (!bits) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "] %s for in_features = %" PRId64
                         " (expected [%" PRId64 ", %" PRId64 "] for 4-bit values, 8 per int32, or [%" PRId64 ", %" PRId64
                         "] for 8-bit, 4 per int32; config.json's quantization_config would say which)", p->file, pname, n_out,
                         p->in_features, fits4 && fits8 ? "is ambiguous" : "does not fit", n_in, n_out, packed_words(n_in, 4),
                         n_out, packed_words(n_in, 8));
        goto done;
      }
    }
    if (p->in_features != packed_words(n_in, bits)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "] does not hold %d-bit codes of in_features = %" PRId64
                       " (expected [%" PRId64 ", %" PRId64 "])", p->file, pname, n_out, p->in_features, bits, n_in, n_out,
                       packed_words(n_in, bits));
      goto done;
    }
    l->bits = bits;
  } else if (nvfp4) {
    if (t->rank != 2 || t->out_features != n_out || t->in_features != (n_in + 1) / 2) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 "] (two FP4 E2M1 codes a byte, "
                       "NVFP4), found [%" PRId64 ", %" PRId64 "]", t->file, t->tensor, n_out, (n_in + 1) / 2,
                       t->out_features, t->in_features);
      goto done;
    }
    l->bits = 4;
    l->is_float = true;
  } else {
    if (t->rank != 2 || t->out_features != n_out || t->in_features != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected [%" PRId64 ", %" PRId64 "] as in the original, found [%" PRId64
                       ", %" PRId64 "]", t->file, wname, n_out, n_in, t->out_features, t->in_features);
      goto done;
    }
    const bool quantized = !strcmp(t->dtype, "F8_E4M3") || !strcmp(t->dtype, "I8");
    if (!quantized && !precis_model_linear_dtype(t->dtype)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: dtype %s is not read (expected F8_E4M3 or I8 with a weight_scale, or "
                       "F32/F16/BF16)", t->file, wname, t->dtype);
      goto done;
    }
    if (quantized) {
      l->bits = 8;
      l->is_float = t->dtype[0] == 'F';
    } else {
      s = NULL; /* a layer left unconverted: its values as they are */
    }
  }
  l->quantized = l->bits > 0;
  if (p && sh) {
    if ((strcmp(sh->dtype, "I64") && strcmp(sh->dtype, "I32")) || sh->rank != 1 || sh->out_features != 2) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I64 [2] (the unpacked [out, in]), found %s of %" PRId64
                       " elements", sh->file, shname, sh->dtype, sh->out_features * sh->in_features);
      goto done;
    }
    if ((st = precis_model_read_raw(sh, &aux)) != PRECIS_OK) goto done;
    const int64_t so = read_int(aux, sh->dtype, 0), si = read_int(aux, sh->dtype, 1);
    if (so != n_out || si != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "], but the original weight is [%" PRId64
                       ", %" PRId64 "]", sh->file, shname, so, si, n_out, n_in);
      goto done;
    }
    free(aux);
    aux = NULL;
  }
  if (l->quantized && !s) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s.weight_scale for the %s weight %s", conv->path, layer->name, t->dtype,
                     t->tensor);
    goto done;
  }
  if (s) {
    if (!is_float_dtype(s->dtype) && strcmp(s->dtype, "F8_E4M3")) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected F32, F16, BF16 (or F8_E4M3 for NVFP4) scales, found %s", s->file,
                       sname, s->dtype);
      goto done;
    }
    snprintf(l->scale_dtype, sizeof l->scale_dtype, "%s", s->dtype);
    if ((st = scale_layout(s, sname, l)) != PRECIS_OK) goto done;
    const bool blocks = l->rows_per_scale > 1 && l->rows_per_scale < n_out;
    if ((st = column_groups(conv, layer, s, sname, blocks, l)) != PRECIS_OK) goto done;
    const uint64_t n_scale = (uint64_t)l->scale_rows * (uint64_t)l->scale_cols;
    if ((st = precis_model_read_raw(s, &sraw)) != PRECIS_OK) goto done;
    if (!(l->scale = malloc(n_scale * sizeof *l->scale))) goto nomem;
    for (uint64_t i = 0; i < n_scale; i++) l->scale[i] = precis_model_decode(sraw, s->dtype, i);
    if (z) {
      const int bits = l->bits;
      if (!strcmp(z->dtype, "I32") && z->rank == 2 && z->out_features == packed_words(l->scale_rows, bits) &&
          z->in_features == l->scale_cols)
        l->zp_packed = true;
      else if (!(!strcmp(z->dtype, "I8") && ((uint64_t)z->out_features * (uint64_t)z->in_features == 1 ||
                                             (z->out_features == l->scale_rows && z->in_features == l->scale_cols)))) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", %" PRId64 "] (packed along the rows) or I8 "
                         "[%" PRId64 ", %" PRId64 "]; found %s [%" PRId64 ", %" PRId64 "]", z->file, zname,
                         packed_words(l->scale_rows, bits), l->scale_cols, l->scale_rows, l->scale_cols, z->dtype,
                         z->out_features, z->in_features);
        goto done;
      }
      if ((st = precis_model_read_raw(z, &zraw)) != PRECIS_OK) goto done;
      if (!(l->zero_point = malloc(n_scale * sizeof *l->zero_point))) goto nomem;
      const bool one = (uint64_t)z->out_features * (uint64_t)z->in_features == 1;
      for (int64_t r = 0; r < l->scale_rows; r++)
        for (int64_t g = 0; g < l->scale_cols; g++)
          l->zero_point[r * l->scale_cols + g] =
              (int32_t)(l->zp_packed ? unpack_value(zraw, l->scale_cols, bits, 0, r, g)
                                     : read_int(zraw, "I8", one ? 0 : (uint64_t)(r * l->scale_cols + g)));
    }
    if (gs) {
      if ((uint64_t)gs->out_features * (uint64_t)gs->in_features != 1 || !is_float_dtype(gs->dtype)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one F32 value", gs->file, gsname);
        goto done;
      }
      if ((st = precis_model_read_raw(gs, &aux)) != PRECIS_OK) goto done;
      l->global_scale = precis_model_decode(aux, gs->dtype, 0);
      if (!(l->global_scale > 0) || !isfinite(l->global_scale)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", gs->file, gsname, l->global_scale);
        goto done;
      }
    } else if (s2) { /* ModelOpt: the second-level scale multiplies */
      if ((uint64_t)s2->out_features * (uint64_t)s2->in_features != 1 || !is_float_dtype(s2->dtype)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one F32 value", s2->file, s2->tensor);
        goto done;
      }
      if ((st = precis_model_read_raw(s2, &aux)) != PRECIS_OK) goto done;
      l->scale_2 = precis_model_decode(aux, s2->dtype, 0);
      if (!(l->scale_2 > 0) || !isfinite(l->scale_2)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", s2->file, s2->tensor, l->scale_2);
        goto done;
      }
    } else if (nvfp4) {
      st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s (compressed-tensors) or %s.weight_scale_2 (ModelOpt) for the NVFP4 "
                       "weight %s", conv->path, gsname, layer->name, t->tensor);
      goto done;
    }
  }
  if ((st = precis_model_read_raw(t, &raw)) != PRECIS_OK) goto done;
  if (!(l->code = malloc(count * sizeof *l->code))) goto nomem;
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++) {
      const uint64_t i = (uint64_t)r * (uint64_t)n_in + (uint64_t)c;
      if (nvfp4) l->code[i] = precis_e2m1_bits_to_f32((uint8_t)((raw[(uint64_t)r * (uint64_t)t->in_features + (uint64_t)c / 2] >> (4 * (c % 2))) & 15u));
      else if (p) l->code[i] = (float)unpack_value(raw, p->in_features, l->bits, 1, r, c);
      else l->code[i] = precis_model_decode(raw, t->dtype, i);
    }
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++)
      if (!isfinite(precis_converted_layer_value(l, r, c))) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element [%" PRId64 ", %" PRId64 "] dequantizes to a non-finite value",
                         t->file, t->tensor, r, c);
        goto done;
      }
  /* What was read, in words (source.converted.weights). */
  char codes[48];
  if (nvfp4) snprintf(codes, sizeof codes, "FP4 E2M1 packed");
  else if (p) snprintf(codes, sizeof codes, "INT%d packed", l->bits);
  else snprintf(codes, sizeof codes, "%s", t->dtype);
  const bool blocks = l->scale && l->rows_per_scale > 1 && l->rows_per_scale < n_out;
  if (!l->scale) snprintf(l->what, sizeof l->what, "%s", t->dtype);
  else if (l->rows_per_scale == n_out && l->scale_cols == 1)
    snprintf(l->what, sizeof l->what, "%s x per-tensor %s%s", codes, l->scale_dtype, l->zero_point ? ", zero points" : "");
  else if (blocks)
    snprintf(l->what, sizeof l->what, "%s x %s scales, blocks of %" PRId64 "x%" PRId64 "%s", codes, l->scale_dtype,
             l->rows_per_scale, (n_in + l->scale_cols - 1) / l->scale_cols, strstr(sname, "_inv") ? " (weight_scale_inv)" : "");
  else if (l->scale_cols == 1)
    snprintf(l->what, sizeof l->what, "%s x per-channel %s%s", codes, l->scale_dtype, l->zero_point ? ", zero points" : "");
  else
    snprintf(l->what, sizeof l->what, "%s x %s scales, %" PRId64 " groups of %" PRId64 " columns%s%s%s", codes, l->scale_dtype,
             l->scale_cols, (n_in + l->scale_cols - 1) / l->scale_cols, l->g_idx ? " (weight_g_idx)" : "",
             l->zero_point ? ", zero points" : "", gs ? ", global scale" : s2 ? ", weight_scale_2" : "");
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
done:
  free(raw);
  free(sraw);
  free(zraw);
  free(aux);
  if (st != PRECIS_OK) precis_converted_layer_free(l);
  return st;
}

/* A converted layer dequantized to float32 [out, in]: w = (code - zero point) * scale (/ global
 * scale), the product rounded once to float32, as a kernel that dequantizes in float32 computes it
 * (exact for F16/BF16 scales; compressed-tensors' own decompression rounds it to the scale's dtype,
 * a further error of at most half an ulp of that dtype). */
precis_status precis_converted_weight(const precis_model *conv, const precis_model_layer *layer, int declared_bits, float **out,
                                      char *what, size_t what_len) {
  precis_converted_layer l;
  *out = NULL;
  precis_status st = precis_converted_layer_read(conv, layer, declared_bits, &l);
  if (st != PRECIS_OK) return st;
  float *w = malloc((uint64_t)l.out * (uint64_t)l.in * sizeof *w);
  if (!w) {
    precis_converted_layer_free(&l);
    return precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
  }
  for (int64_t r = 0; r < l.out; r++)
    for (int64_t c = 0; c < l.in; c++) w[(uint64_t)r * (uint64_t)l.in + (uint64_t)c] = precis_converted_layer_value(&l, r, c);
  snprintf(what, what_len, "%s", l.what);
  precis_converted_layer_free(&l);
  *out = w;
  return PRECIS_OK;
}

/* The deployed scheme's activations: a quantized and dequantized as the declaration says the
 * served layer quantizes its input (compressed-tensors' forward: dynamic per token, per group of
 * a token or per tensor with the min-max scale; static with the checkpoint's input_scale (and
 * input_zero_point); NVFP4's per-16 E4M3 scales under the static input_global_scale). The rows
 * are tokens; a dynamic per-tensor scale is taken over each sample. */
precis_status precis_deployed_activations(const precis_model *conv, const precis_model_layer *layer, const precis_quant_args *args,
                                          float *a, int64_t samples, int64_t m, int64_t k, char *what, size_t what_len) {
  char name[1100], described[160];
  precis_quant_args_describe(args, true, described, sizeof described);
  float static_scale = 0, static_zp = 0, global = 1;
  const bool tensor_group = !strcmp(args->strategy, "tensor_group");
  if (tensor_group || !args->dynamic) {
    snprintf(name, sizeof name, "%s.%s", layer->name, tensor_group ? "input_global_scale" : "input_scale");
    const precis_model_layer *t = precis_model_find_tensor(conv, name);
    bool inverse = false; /* ModelOpt NVFP4 stores the activations' second-level scale as input_scale = 1 / global */
    if (!t && tensor_group) {
      snprintf(name, sizeof name, "%s.input_scale", layer->name);
      inverse = (t = precis_model_find_tensor(conv, name)) != NULL;
    }
    uint8_t *raw = NULL;
    if (!t || (uint64_t)t->out_features * (uint64_t)t->in_features != 1 || !is_float_dtype(t->dtype))
      return precis_fail(PRECIS_E_INPUT, "%s: layer %s: the declared activations (%s) need one F32 %s; %s", conv->path,
                         layer->name, described, name, t ? "it holds another shape or dtype" : "there is none");
    precis_status st = precis_model_read_raw(t, &raw);
    if (st != PRECIS_OK) return st;
    const float v = precis_model_decode(raw, t->dtype, 0);
    free(raw);
    if (!(v > 0) || !isfinite(v))
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", conv->path, name, v);
    if (tensor_group) global = inverse ? 1.0f / v : v;
    else static_scale = v;
    snprintf(name, sizeof name, "%s.input_zero_point", layer->name);
    const precis_model_layer *z = precis_model_find_tensor(conv, name);
    if (z && !tensor_group) {
      if ((st = precis_model_read_raw(z, &raw)) != PRECIS_OK) return st;
      static_zp = (float)read_int(raw, z->dtype[0] == 'I' && z->dtype[1] == '8' ? "I8" : z->dtype, 0);
      free(raw);
    }
  }
  const float half = precis_code_half_range(args->num_bits, args->is_float);
  int64_t width = k; /* columns sharing a scale */
  if (!strcmp(args->strategy, "group") || tensor_group) width = args->group_size > 0 ? args->group_size : k;
  const bool per_sample = !strcmp(args->strategy, "tensor");
  for (int64_t s = 0; s < samples; s++)
    for (int64_t row = 0; row < (per_sample ? 1 : m); row++)
      for (int64_t c0 = 0; c0 < k; c0 += width) {
        const int64_t rows = per_sample ? m : 1, r0 = per_sample ? 0 : row, c1 = c0 + width < k ? c0 + width : k;
        float lo = 0, hi = 0;
        for (int64_t r = r0; r < r0 + rows; r++)
          for (int64_t c = c0; c < c1; c++) {
            const float v = a[((uint64_t)s * (uint64_t)m + (uint64_t)r) * (uint64_t)k + (uint64_t)c];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
          }
        float scale = static_scale, zp = static_zp;
        if (tensor_group) {
          scale = precis_round_e4m3(global * (fmaxf(-lo, hi) / half)) / global;
        } else if (args->dynamic) {
          if (args->symmetric || args->is_float) {
            scale = fmaxf(-lo, hi) / half;
          } else {
            scale = (hi - lo) / (2 * half);
            zp = scale > 0 ? fminf(fmaxf(rintf(-(half + 0.5f) - lo / scale), -(half + 0.5f)), half - 0.5f) : 0;
          }
        }
        if (!(scale > 0)) continue; /* an all-zero block stays zero */
        for (int64_t r = r0; r < r0 + rows; r++)
          for (int64_t c = c0; c < c1; c++) {
            float *v = &a[((uint64_t)s * (uint64_t)m + (uint64_t)r) * (uint64_t)k + (uint64_t)c];
            *v = (precis_quantize_code(*v, scale, zp, args->num_bits, args->is_float) - zp) * scale;
          }
      }
  snprintf(what, what_len, "activations %s", described);
  return PRECIS_OK;
}
