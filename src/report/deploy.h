/* Deployable output of a plan (DESIGN §17): each recipe mapped to a scheme a deployment framework
 * reads — compressed-tensors QuantizationArgs (config_groups) and ModelOpt's per-layer quant_algo —
 * or said to have none. A recipe is never silently replaced by a nearby scheme: a mapping that is
 * close but not the same computation says so (exact false, with why). */
#ifndef PRECIS_DEPLOY_H
#define PRECIS_DEPLOY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "numerics/spec.h"

typedef enum precis_deploy_kind {
  PRECIS_DEPLOY_UNQUANTIZED, /* the weights stay as they are: the framework's ignore / exclude list */
  PRECIS_DEPLOY_SCHEME,      /* a named scheme */
  PRECIS_DEPLOY_NONE,        /* no equivalent in this framework */
} precis_deploy_kind;

typedef struct precis_deploy_map {
  precis_deploy_kind kind;
  bool exact;         /* the framework computes what the recipe computes */
  char scheme[48];    /* compressed-tensors: the format ("pack-quantized", ...); ModelOpt: the quant_algo */
  int group_size;     /* ModelOpt: group size of the weights' scales, 0 when none */
  char note[300];     /* why none, or how it differs */
  cJSON *weights, *input_activations; /* compressed-tensors QuantizationArgs (NULL when none); the caller frees */
} precis_deploy_map;

void precis_deploy_compressed_tensors(const precis_spec *spec, precis_deploy_map *out);
void precis_deploy_modelopt(const precis_spec *spec, precis_deploy_map *out);
void precis_deploy_map_free(precis_deploy_map *m);
const char *precis_deploy_kind_str(precis_deploy_kind k); /* "unquantized", "scheme", "none" */

#endif
