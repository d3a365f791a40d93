#include <stdio.h>
#include <string.h>

#include "deploy.h"
#include "numerics/recipe.h"

const char *precis_deploy_kind_str(precis_deploy_kind k) {
  switch (k) {
  case PRECIS_DEPLOY_UNQUANTIZED: return "unquantized";
  case PRECIS_DEPLOY_SCHEME: return "scheme";
  case PRECIS_DEPLOY_NONE: return "none";
  }
  return "?";
}

void precis_deploy_map_free(precis_deploy_map *m) {
  cJSON_Delete(m->weights);
  cJSON_Delete(m->input_activations);
  m->weights = m->input_activations = NULL;
}

static void none(precis_deploy_map *m, const char *why) {
  precis_deploy_map_free(m);
  m->kind = PRECIS_DEPLOY_NONE;
  m->exact = false;
  m->scheme[0] = '\0';
  snprintf(m->note, sizeof m->note, "%s", why);
}

/* An unscaled float operand (fp32, tf32, fp16, bf16, fp64): nothing quantized. */
static bool unscaled(const precis_operand_spec *op) { return !precis_operand_is_scaled(op); }

/* QuantizationArgs of one operand; NULL (and *why) when compressed-tensors has no such args. */
static cJSON *ct_args(const precis_operand_spec *op, bool is_weight, bool dynamic, const char **why) {
  const char *type = NULL;
  int bits = 0;
  switch (op->fmt) {
  case PRECIS_FMT_I8: type = "int", bits = 8; break;
  case PRECIS_FMT_S4:
  case PRECIS_FMT_U4: type = "int", bits = 4; break;
  case PRECIS_FMT_S3: type = "int", bits = 3; break;
  case PRECIS_FMT_S2: type = "int", bits = 2; break;
  case PRECIS_FMT_E4M3: type = "float", bits = 8; break;
  case PRECIS_FMT_E2M1: type = "float", bits = 4; break;
  default:
    *why = "compressed-tensors quantizes to int or to float E4M3 / E2M1; this operand's format is none of them";
    return NULL;
  }
  cJSON *a = cJSON_CreateObject();
  cJSON_AddNumberToObject(a, "num_bits", bits);
  cJSON_AddStringToObject(a, "type", type);
  cJSON_AddBoolToObject(a, "symmetric", op->conv != PRECIS_QCONV_ASYM);
  switch (op->gran) {
  case PRECIS_GRAN_TENSOR: cJSON_AddStringToObject(a, "strategy", "tensor"); break;
  case PRECIS_GRAN_ROW: cJSON_AddStringToObject(a, "strategy", "token"); break;
  case PRECIS_GRAN_COL: cJSON_AddStringToObject(a, "strategy", "channel"); break;
  case PRECIS_GRAN_K:
    cJSON_AddStringToObject(a, "strategy", "group");
    cJSON_AddNumberToObject(a, "group_size", op->group);
    break;
  case PRECIS_GRAN_BLOCK: {
    /* B = W^T is blocked R along k by C along n; the weight W [out, in] is blocked [C, R]. */
    cJSON_AddStringToObject(a, "strategy", "block");
    cJSON *shape = cJSON_AddArrayToObject(a, "block_structure");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(op->block_cols));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(op->block_rows));
    break;
  }
  /* The scale dtype as compressed-tensors' MXFP4, MXFP8 and NVFP4 presets set it: without it the library rounds
   * no scale to E4M3 and makes no MX power-of-two scale (should_generate_mx_scales wants uint8). */
  case PRECIS_GRAN_MX:
    cJSON_AddStringToObject(a, "strategy", "group");
    cJSON_AddNumberToObject(a, "group_size", 32);
    cJSON_AddStringToObject(a, "scale_dtype", "torch.uint8");
    break;
  case PRECIS_GRAN_NV:
    cJSON_AddStringToObject(a, "strategy", "tensor_group");
    cJSON_AddNumberToObject(a, "group_size", 16);
    cJSON_AddStringToObject(a, "scale_dtype", "torch.float8_e4m3fn");
    break;
  default:
    cJSON_Delete(a);
    *why = "this granularity has no compressed-tensors strategy";
    return NULL;
  }
  if (is_weight) cJSON_AddBoolToObject(a, "dynamic", false);
  else if (op->gran == PRECIS_GRAN_NV && dynamic) cJSON_AddStringToObject(a, "dynamic", "local");
  else cJSON_AddBoolToObject(a, "dynamic", dynamic);
  return a;
}

void precis_deploy_compressed_tensors(const precis_spec *s, precis_deploy_map *m) {
  memset(m, 0, sizeof *m);
  if (unscaled(&s->a) && unscaled(&s->b)) {
    m->kind = PRECIS_DEPLOY_UNQUANTIZED;
    m->exact = s->split == PRECIS_SPLIT_NONE && s->acc != PRECIS_FMT_F16 && s->a.fmt != PRECIS_FMT_TF32;
    snprintf(m->note, sizeof m->note, "%s",
             m->exact ? "weights unquantized: in ignore"
                      : "weights unquantized (in ignore); the compute mode (split, tf32 or fp16 accumulation) is the "
                        "runtime's choice, not the checkpoint's");
    return;
  }
  if (unscaled(&s->b)) return none(m, "activations quantized, weights not: compressed-tensors has no such scheme here");
  if (precis_spec_smooths(s))
    return none(m, "SmoothQuant smoothing is a separate transform (llm-compressor's SmoothQuantModifier), not part of a "
                   "quantization_config");
  if (s->scale == PRECIS_SCALE_PERCENTILE || s->scale == PRECIS_SCALE_MSE)
    return none(m, "static activation scales from percentile or MSE calibration: compressed-tensors' observers differ");
  if (s->b.gran == PRECIS_GRAN_MX_RCEIL || s->a.gran == PRECIS_GRAN_MX_RCEIL)
    return none(m, "MX with the round-up (RCEIL) scale rule: compressed-tensors' MX scales follow OCP's FLOOR rule");
  const char *why = NULL;
  m->weights = ct_args(&s->b, true, false, &why);
  if (!m->weights) return none(m, why);
  if (!unscaled(&s->a)) {
    m->input_activations = ct_args(&s->a, false, s->scale == PRECIS_SCALE_DYNAMIC, &why);
    if (!m->input_activations) return none(m, why);
  }
  m->kind = PRECIS_DEPLOY_SCHEME;
  m->exact = true;
  bool weight_int = precis_operand_is_integer(&s->b);
  /* 4-bit integer weights are packed whatever the activations (W4A8, W4AFP8: vLLM's loaders read
   * weight_packed); int-quantized stores one byte per weight, what W8A8 is. */
  const char *format = weight_int ? (unscaled(&s->a) || s->b.fmt != PRECIS_FMT_I8 ? "pack-quantized" : "int-quantized")
                       : s->b.fmt == PRECIS_FMT_E2M1 ? (s->b.gran == PRECIS_GRAN_NV ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized")
                       : s->b.gran == PRECIS_GRAN_MX ? "mxfp8-quantized"
                                                     : "float-quantized";
  snprintf(m->scheme, sizeof m->scheme, "%s", format);
  /* compressed-tensors' symmetric integer scale is amax / ((2^b - 1) / 2), the full code range:
   * precis's sym-half; its plain sym (amax / (2^(b-1) - 1)) is a different rounding grid. */
  if ((weight_int && s->b.conv == PRECIS_QCONV_SYM) || s->a.conv == PRECIS_QCONV_SYM) {
    m->exact = false;
    snprintf(m->note, sizeof m->note, "the closest scheme: compressed-tensors scales integers by amax/127.5 (the full "
                                      "code range, precis's sym-half), this recipe by amax/127 (sym)");
  } else if (s->b.conv == PRECIS_QCONV_ASYM) {
    m->exact = false;
    snprintf(m->note, sizeof m->note, "asymmetric: the zero point's rounding convention is not checked against "
                                      "compressed-tensors'");
  } else if (s->scale == PRECIS_SCALE_ABSMAX) {
    m->exact = false;
    snprintf(m->note, sizeof m->note, "static activation scales: compressed-tensors' observer calibrates its own");
  }
}

/* ModelOpt's quant_algo names (hf_quant_config.json) for the presets whose computation they are. */
static const struct {
  const char *preset, *algo;
  int group_size;
} modelopt_algos[] = {
    {"fp8", "FP8", 0},
    {"fp8-rowwise", "FP8_PER_CHANNEL_PER_TOKEN", 0},
    {"fp8-block", "FP8_BLOCK_SCALES", 128},
    {"nvfp4", "NVFP4", 16},
    {"mxfp8", "MXFP8", 32},
    {"w8a16", "W8A16", 0},
};

void precis_deploy_modelopt(const precis_spec *s, precis_deploy_map *m) {
  memset(m, 0, sizeof *m);
  if (unscaled(&s->a) && unscaled(&s->b)) {
    m->kind = PRECIS_DEPLOY_UNQUANTIZED;
    m->exact = true;
    snprintf(m->note, sizeof m->note, "weights unquantized: in exclude_modules");
    return;
  }
  const precis_recipe_preset *preset = precis_recipe_preset_of_spec(s);
  for (size_t i = 0; preset && i < sizeof modelopt_algos / sizeof modelopt_algos[0]; i++)
    if (strcmp(preset->name, modelopt_algos[i].preset) == 0) {
      m->kind = PRECIS_DEPLOY_SCHEME;
      m->exact = true;
      snprintf(m->scheme, sizeof m->scheme, "%s", modelopt_algos[i].algo);
      m->group_size = modelopt_algos[i].group_size;
      return;
    }
  if (preset && (!strcmp(preset->name, "int8") || !strcmp(preset->name, "int8-sq")))
    return none(m, "ModelOpt's INT8 export is INT8_SQ, SmoothQuant with its own calibrated alpha: not this recipe");
  if (preset && (!strcmp(preset->name, "w4a16") || !strcmp(preset->name, "w4a16-asym")))
    return none(m, "ModelOpt's INT4 weight-only export is INT4_AWQ (AWQ-calibrated, with pre_quant_scale), not "
                   "round-to-nearest groups of 128");
  if (preset && (!strcmp(preset->name, "w4a8") || !strcmp(preset->name, "w4afp8")))
    return none(m, "ModelOpt's int4-weight, 8-bit-activation export is W4A8_AWQ (AWQ-calibrated int4 weights with fp8 "
                   "activations and a pre_quant_scale), not round-to-nearest groups of 128");
  none(m, "no ModelOpt quant_algo computes this recipe");
}
