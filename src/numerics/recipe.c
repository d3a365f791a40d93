#include "recipe.h"

#include <stdlib.h>
#include <string.h>

static const precis_recipe recipes[PRECIS_RECIPE_COUNT] = {
    [PRECIS_RECIPE_FP32] = {.id = PRECIS_RECIPE_FP32, .name = "fp32", .input_format = PRECIS_FMT_F32,
                            .compute_format = PRECIS_FMT_F32, .output_format = PRECIS_FMT_F32,
                            .compute_type = "CUBLAS_COMPUTE_32F", .scaling = PRECIS_SCALING_NONE,
                            .min_compute_capability = 50, .required = true,
                            .description = "A,B f32; compute 32F; output f32"},
    [PRECIS_RECIPE_TF32] = {.id = PRECIS_RECIPE_TF32, .name = "tf32", .input_format = PRECIS_FMT_TF32,
                            .compute_format = PRECIS_FMT_F32, .output_format = PRECIS_FMT_F32,
                            .compute_type = "CUBLAS_COMPUTE_32F_FAST_TF32", .scaling = PRECIS_SCALING_NONE,
                            .min_compute_capability = 80,
                            .description = "A,B f32 read as tf32 (10 fraction bits); compute 32F; output f32"},
    [PRECIS_RECIPE_FP16] = {.id = PRECIS_RECIPE_FP16, .name = "fp16", .input_format = PRECIS_FMT_F16,
                            .compute_format = PRECIS_FMT_F32, .output_format = PRECIS_FMT_F16,
                            .compute_type = "CUBLAS_COMPUTE_32F", .scaling = PRECIS_SCALING_NONE,
                            .min_compute_capability = 70, .required = true,
                            .description = "A,B f16 (RNE from f32); compute 32F; output f16"},
    [PRECIS_RECIPE_FP16ACC16] = {.id = PRECIS_RECIPE_FP16ACC16, .name = "fp16acc16", .input_format = PRECIS_FMT_F16,
                                 .compute_format = PRECIS_FMT_F16, .output_format = PRECIS_FMT_F16,
                                 .compute_type = "CUBLAS_COMPUTE_16F", .scaling = PRECIS_SCALING_NONE,
                                 .min_compute_capability = 70,
                                 .description = "A,B f16 (RNE from f32); compute 16F (f16 accumulation); output f16"},
    [PRECIS_RECIPE_BF16] = {.id = PRECIS_RECIPE_BF16, .name = "bf16", .input_format = PRECIS_FMT_BF16,
                            .compute_format = PRECIS_FMT_F32, .output_format = PRECIS_FMT_BF16,
                            .compute_type = "CUBLAS_COMPUTE_32F", .scaling = PRECIS_SCALING_NONE,
                            .min_compute_capability = 80, .required = true,
                            .description = "A,B bf16 (RNE from f32); compute 32F; output bf16"},
    [PRECIS_RECIPE_INT8] = {.id = PRECIS_RECIPE_INT8, .name = "int8", .input_format = PRECIS_FMT_I8,
                            .compute_format = PRECIS_FMT_I32, .output_format = PRECIS_FMT_F32,
                            .compute_type = "CUBLAS_COMPUTE_32I", .scaling = PRECIS_SCALING_INT8_SYMMETRIC,
                            .min_compute_capability = 75, .required = true,
                            .description = "A,B s8 symmetric (A per row, B per column, s=amax/127); compute 32I; "
                                           "output f32 after dequant c=s_a[i]*s_b[j]*acc"},
    [PRECIS_RECIPE_FP8] = {.id = PRECIS_RECIPE_FP8, .name = "fp8", .input_format = PRECIS_FMT_E4M3,
                           .compute_format = PRECIS_FMT_F32, .output_format = PRECIS_FMT_BF16,
                           .compute_type = "CUBLAS_COMPUTE_32F", .scaling = PRECIS_SCALING_FP8_TENSOR,
                           .min_compute_capability = 89,
                           .description = "A,B e4m3 satfinite, per-tensor scales s=amax/448; compute 32F; output bf16"},
};

const precis_recipe *precis_recipe_get(precis_recipe_id id) {
  if ((unsigned)id >= PRECIS_RECIPE_COUNT) return NULL;
  return &recipes[id];
}

const precis_recipe *precis_recipe_by_name(const char *name) {
  for (size_t i = 0; i < PRECIS_RECIPE_COUNT; i++)
    if (strcmp(recipes[i].name, name) == 0) return &recipes[i];
  return NULL;
}

precis_status precis_recipe_parse_list(const char *list, precis_recipe_id *ids, size_t *count) {
  *count = 0;
  if (strcmp(list, "all") == 0) {
    for (size_t i = 0; i < PRECIS_RECIPE_COUNT; i++) ids[(*count)++] = (precis_recipe_id)i;
    return PRECIS_OK;
  }
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char name[32];
    if (len == 0 || len >= sizeof name)
      return precis_fail(PRECIS_E_USAGE, "--recipes: empty or overlong recipe name in \"%s\"", list);
    memcpy(name, p, len);
    name[len] = '\0';
    const precis_recipe *r = precis_recipe_by_name(name);
    if (!r)
      return precis_fail(PRECIS_E_USAGE,
                         "--recipes: unknown recipe \"%s\" (expected fp32, tf32, fp16, fp16acc16, bf16, int8, fp8 or all)",
                         name);
    for (size_t i = 0; i < *count; i++)
      if (ids[i] == r->id) return precis_fail(PRECIS_E_USAGE, "--recipes: \"%s\" given twice", name);
    ids[(*count)++] = r->id;
    p = end ? end + 1 : p + len;
  }
  if (*count == 0) return precis_fail(PRECIS_E_USAGE, "--recipes: no recipe given");
  return PRECIS_OK;
}

long long precis_recipe_tensor_bytes(const precis_recipe *recipe, long long m, long long n, long long k,
                                     long long batch, bool b_batched) {
  long long in_bytes = precis_format_get(recipe->input_format)->storage_bits / 8;
  long long out_bytes = precis_format_get(recipe->output_format)->storage_bits / 8;
  long long a = batch * m * k, b = k * n * (b_batched ? batch : 1), c = batch * m * n;
  long long total = (a + b) * in_bytes + c * out_bytes;
  switch (recipe->scaling) {
  case PRECIS_SCALING_INT8_SYMMETRIC:
    total += c * 4;                                   /* int32 accumulators before dequantization */
    total += (batch * m + n * (b_batched ? batch : 1)) * 4; /* row and column scales */
    break;
  case PRECIS_SCALING_FP8_TENSOR: total += 2 * 4; break;
  case PRECIS_SCALING_NONE: break;
  }
  return total;
}
