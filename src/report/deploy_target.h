/* Deployment targets (DESIGN §21): what a serving engine runs, as data. Per target (vLLM reading a
 * compressed-tensors checkpoint, TensorRT-LLM reading a ModelOpt checkpoint, or `none` for
 * exploration): the schemes it runs per GPU architecture, the shapes each needs (group along k,
 * block shape, 16-byte rows), the layers it fuses into one GEMM (which then share one scheme), and
 * whether a tied output projection is stored as its own copy. docs/deploy.md cites the source of
 * every row. The tables are static arrays below so that a scheme (or a KV-cache scheme, issue 23)
 * is one more row. */
#ifndef PRECIS_DEPLOY_TARGET_H
#define PRECIS_DEPLOY_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "numerics/spec.h"
#include "numerics/target.h"

typedef enum precis_deploy_engine {
  PRECIS_DEPLOY_ENGINE_NONE,   /* exploration: every recipe precis evaluates, no engine's rules */
  PRECIS_DEPLOY_ENGINE_VLLM,   /* vLLM serving a compressed-tensors checkpoint */
  PRECIS_DEPLOY_ENGINE_TRTLLM, /* TensorRT-LLM serving a ModelOpt (hf_quant_config.json) checkpoint */
  PRECIS_DEPLOY_ENGINE_COUNT,
} precis_deploy_engine;

/* plan's default: a target that deploys (docs/deploy.md says why vLLM). */
#define PRECIS_DEPLOY_ENGINE_DEFAULT PRECIS_DEPLOY_ENGINE_VLLM
/* The architecture a deployment check assumes when the plan names none (--target sm_XX). */
#define PRECIS_DEPLOY_ARCH_DEFAULT PRECIS_TARGET_SM90

const char *precis_deploy_engine_name(precis_deploy_engine e);     /* "none", "vllm", "trtllm" */
const char *precis_deploy_engine_describe(precis_deploy_engine e); /* one line: engine and checkpoint format */
bool precis_deploy_engine_parse(const char *text, precis_deploy_engine *out);

/* One scheme an engine runs. */
typedef struct precis_deploy_scheme {
  const char *name;       /* "W4A16", "FP8 W8A8", ... */
  const char *checkpoint; /* compressed-tensors format or ModelOpt quant_algo */
  unsigned archs;         /* bit (1u << precis_target) per architecture that runs it */
  const char *kernel;     /* the engine's path, and what it needs of the shape */
  const char *source;     /* where the row comes from */
} precis_deploy_scheme;

size_t precis_deploy_schemes(precis_deploy_engine e, const precis_deploy_scheme **out);
/* "sm_89, sm_90, sm_100, sm_120" (or "none") */
void precis_deploy_archs_describe(unsigned archs, char *buf, size_t len);

typedef struct precis_deploy_verdict {
  bool deployable;
  bool exact;                         /* the engine computes what the recipe computes */
  const precis_deploy_scheme *scheme; /* the engine's scheme (NULL: unquantized, or none) */
  char why[320];                      /* why not (or how it differs when !exact) */
  char nearest[PRECIS_SPEC_TEXT_MAX]; /* a spec of the same family that deploys on this shape; "" when none */
} precis_deploy_verdict;

/* Can the engine run `spec` on a layer of k inputs and n outputs on `arch`
 * (PRECIS_TARGET_DEFAULT: PRECIS_DEPLOY_ARCH_DEFAULT)? The `none` engine runs everything. */
void precis_deploy_check(precis_deploy_engine e, precis_target arch, const precis_spec *spec, long long k, long long n,
                         precis_deploy_verdict *out);

/* The input width k must be a multiple of this for the engine to run `spec` (groups, blocks, 16-byte
 * rows); 1 when anything goes (the `none` engine, unquantized layers). */
long long precis_deploy_k_multiple(precis_deploy_engine e, const precis_spec *spec);

/* The divisibility compressed-tensors itself needs of the weight (what ModelCompressor.compress_model
 * raises on), whatever the engine: false with *why when k cannot take the spec's groups or blocks. */
bool precis_deploy_ct_shape_ok(const precis_spec *spec, long long k, long long n, char *why, size_t why_len);

/* Fused groups: layers the engine runs as one GEMM, which must share one scheme. group[l] is the
 * group's index (0..*n_groups-1) or -1 for a layer on its own. The families come from config.json's
 * model_type (the names its modules have in transformers); a model_type outside the table is
 * grouped by the common names, and *rule says which. Members of a q/k/v or gate/up group must read
 * the same input (equal k), else they are not grouped. */
precis_status precis_deploy_fused_groups(precis_deploy_engine e, const char *model_type, const char *const *layers,
                                         const long long *k, size_t n_layers, int *group, size_t *n_groups, char *rule,
                                         size_t rule_len);

/* Can the engine store its KV cache with keys in format k and values in v (canonical KV format
 * names of docs/kv-cache.md: "bf16", "e4m3@tensor", "s8@row:sym", ...) on `arch`
 * (PRECIS_TARGET_DEFAULT: PRECIS_DEPLOY_ARCH_DEFAULT)? false with *why (the plan's KV decision then
 * drops the format). The `none` engine stores everything. */
bool precis_deploy_kv_ok(precis_deploy_engine e, precis_target arch, const char *k, const char *v, char *why,
                         size_t why_len);

/* Whether the engine's checkpoint stores a quantized tied output projection as its own copy beside
 * the embedding table (so that an unquantized tied head costs nothing, a quantized one its copy). */
bool precis_deploy_unties_head(precis_deploy_engine e);

#endif
