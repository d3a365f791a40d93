/* Recipes: what "running a workload in precision X" means (DESIGN §3). One table; the report
 * prints the recipe's full description, not only its name. */
#ifndef PRECIS_RECIPE_H
#define PRECIS_RECIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "format.h"
#include "status.h"

typedef enum precis_recipe_id {
  PRECIS_RECIPE_FP32,
  PRECIS_RECIPE_TF32,
  PRECIS_RECIPE_FP16,
  PRECIS_RECIPE_FP16ACC16,
  PRECIS_RECIPE_BF16,
  PRECIS_RECIPE_INT8,
  PRECIS_RECIPE_FP8,
  PRECIS_RECIPE_COUNT
} precis_recipe_id;

typedef enum precis_scaling {
  PRECIS_SCALING_NONE,
  PRECIS_SCALING_INT8_SYMMETRIC, /* A per row (or static per tensor), B per column */
  PRECIS_SCALING_FP8_TENSOR,     /* per-tensor amax/448 for A and B */
} precis_scaling;

typedef struct precis_recipe {
  precis_recipe_id id;
  const char *name;
  precis_format_id input_format;   /* A and B as the GEMM reads them */
  precis_format_id compute_format; /* accumulation */
  precis_format_id output_format;  /* what the GEMM (plus dequant) writes */
  const char *compute_type;        /* cuBLAS compute type, e.g. "CUBLAS_COMPUTE_32F_FAST_TF32" */
  precis_scaling scaling;
  int min_compute_capability;      /* major*10 + minor */
  bool required;                   /* DESIGN §3: fp32, fp16, bf16, int8 are required */
  const char *description;         /* one line, printed in reports */
} precis_recipe;

const precis_recipe *precis_recipe_get(precis_recipe_id id);
const precis_recipe *precis_recipe_by_name(const char *name); /* NULL when unknown */

/* Parses "fp32,bf16,int8" (or "all") into ids, in the order given; duplicates rejected. */
precis_status precis_recipe_parse_list(const char *list, precis_recipe_id *ids, size_t *count);

/* Bytes of the tensors a recipe holds for one workload (DESIGN §6 tensor_bytes): A and B in the
 * input format, the GEMM output (int8: the int32 accumulators and the float32 dequantized output),
 * and the scales. Padding added by a backend is not included. */
long long precis_recipe_tensor_bytes(const precis_recipe *recipe, long long m, long long n, long long k,
                                     long long batch, bool b_batched);

#endif
