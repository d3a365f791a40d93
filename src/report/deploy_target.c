#include "deploy_target.h"

#include <stdio.h>
#include <string.h>

#include "deploy.h"

#define ARCH(t) (1u << (t))
#define SM80_UP (ARCH(PRECIS_TARGET_SM80) | ARCH(PRECIS_TARGET_SM89) | ARCH(PRECIS_TARGET_SM90) | ARCH(PRECIS_TARGET_SM100) | ARCH(PRECIS_TARGET_SM120))
#define SM89_UP (ARCH(PRECIS_TARGET_SM89) | ARCH(PRECIS_TARGET_SM90) | ARCH(PRECIS_TARGET_SM100) | ARCH(PRECIS_TARGET_SM120))
#define SM100_UP (ARCH(PRECIS_TARGET_SM100) | ARCH(PRECIS_TARGET_SM120))

static const char *const engine_names[PRECIS_DEPLOY_ENGINE_COUNT] = {"none", "vllm", "trtllm"};
static const char *const engine_descriptions[PRECIS_DEPLOY_ENGINE_COUNT] = {
    "none: exploration, every recipe precis evaluates, no engine's shape or fusion rules",
    "vllm: vLLM serving a compressed-tensors checkpoint (compressed_tensors_config.json)",
    "trtllm: TensorRT-LLM serving a ModelOpt checkpoint (modelopt_hf_quant_config.json)",
};

const char *precis_deploy_engine_name(precis_deploy_engine e) {
  return e >= 0 && e < PRECIS_DEPLOY_ENGINE_COUNT ? engine_names[e] : "?";
}

const char *precis_deploy_engine_describe(precis_deploy_engine e) {
  return e >= 0 && e < PRECIS_DEPLOY_ENGINE_COUNT ? engine_descriptions[e] : "?";
}

bool precis_deploy_engine_parse(const char *text, precis_deploy_engine *out) {
  for (int e = 0; e < PRECIS_DEPLOY_ENGINE_COUNT; e++)
    if (strcmp(text, engine_names[e]) == 0) {
      *out = (precis_deploy_engine)e;
      return true;
    }
  if (strcmp(text, "tensorrt-llm") == 0 || strcmp(text, "modelopt") == 0) *out = PRECIS_DEPLOY_ENGINE_TRTLLM;
  else if (strcmp(text, "compressed-tensors") == 0) *out = PRECIS_DEPLOY_ENGINE_VLLM;
  else return false;
  return true;
}

/* ------------------------------------------------------------------ the tables (docs/deploy.md) */

static const char src_ct[] = "compressed-tensors 0.20.1 quantization/quant_scheme.py (PRESET_SCHEMES)";
static const char src_vllm_marlin[] =
    "vLLM model_executor/layers/quantization/utils/marlin_utils.py (Marlin: sm_80+, groups -1/32/64/128; "
    "n % 64, k % 128 or another mixed-precision kernel: kernels/mixed_precision/__init__.py)";

/* vLLM: the compressed-tensors schemes it runs (vllm/model_executor/layers/quantization/
 * compressed_tensors/schemes/). The index is used by vllm_scheme() below. */
enum {
  V_W4A16, V_W8A16, V_W2W3A16, V_W8A8_INT8, V_W4A8_INT, V_W4AFP8, V_FP8, V_FP8_BLOCK, V_FP8_W8A16, V_NVFP4, V_NVFP4A16, V_MXFP4,
  V_MXFP8, V_COUNT
};
static const precis_deploy_scheme vllm_schemes[V_COUNT] = {
    [V_W4A16] = {"W4A16", "pack-quantized", SM80_UP,
                 "CompressedTensorsWNA16: Marlin, Machete (sm_90) or ExLlama; k divisible by the group", src_vllm_marlin},
    [V_W8A16] = {"W8A16", "pack-quantized", SM80_UP, "CompressedTensorsWNA16 (8-bit): Marlin or Machete", src_vllm_marlin},
    [V_W2W3A16] = {"W2A16 / W3A16", "pack-quantized", 0,
                   "CompressedTensorsWNA16 takes 4- and 8-bit weights only (WNA16_SUPPORTED_BITS)",
                   "vLLM compressed_tensors/schemes/compressed_tensors_wNa16.py"},
    [V_W8A8_INT8] = {"W8A8 INT8", "int-quantized", ARCH(PRECIS_TARGET_SM80) | ARCH(PRECIS_TARGET_SM89) | ARCH(PRECIS_TARGET_SM90),
                     "CompressedTensorsW8A8Int8: CUTLASS scaled_mm (built for sm_75..sm_90)",
                     "vLLM csrc/quantization/cutlass_w8a8/scaled_mm_entry.cu (int8 kernels up to sm_90)"},
    [V_W4A8_INT] = {"W4A8 INT", "pack-quantized", 0,
                    "CompressedTensorsW4A8Int: CPU / Arm kernels only (dynamic_4bit), no NVIDIA GPU kernel",
                    "vLLM compressed_tensors/schemes/compressed_tensors_w4a8_int.py"},
    [V_W4AFP8] = {"W4AFP8", "pack-quantized", ARCH(PRECIS_TARGET_SM90),
                  "CompressedTensorsW4A8Fp8: CutlassW4A8LinearKernel, Hopper only; group 128",
                  "vLLM kernels/mixed_precision/cutlass.py (CutlassW4A8LinearKernel: compute capability 90)"},
    [V_FP8] = {"FP8 W8A8", "float-quantized", SM89_UP,
               "CompressedTensorsW8A8Fp8: cuBLASLt / CUTLASS fp8 (sm_89+); on sm_80 weight-only through Marlin, "
               "which is not this recipe",
               "vLLM compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py"},
    [V_FP8_BLOCK] = {"FP8 block", "float-quantized", SM89_UP,
                     "CompressedTensorsW8A8Fp8 with block weights: CUTLASS / DeepGEMM (sm_90, sm_100) or Triton; "
                     "k divisible by the block",
                     "vLLM model_executor/layers/quantization/utils/fp8_utils.py (apply_fp8_block_linear)"},
    [V_FP8_W8A16] = {"FP8 W8A16", "float-quantized", SM80_UP, "fp8 weights, bf16 activations: Marlin",
                     "vLLM utils/marlin_utils_fp8.py"},
    [V_NVFP4] = {"NVFP4", "nvfp4-pack-quantized", SM100_UP, "CompressedTensorsW4A4Fp4: CUTLASS FP4 (sm_100, sm_120)",
                 "vLLM compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py"},
    [V_NVFP4A16] = {"NVFP4A16", "nvfp4-pack-quantized", SM80_UP, "CompressedTensorsW4A16Fp4: Marlin FP4",
                    "vLLM compressed_tensors/schemes/compressed_tensors_w4a16_nvfp4.py"},
    [V_MXFP4] = {"MXFP4", "mxfp4-pack-quantized", ARCH(PRECIS_TARGET_SM100), "block-scaled FP4 (tcgen05) on sm_100",
                 src_ct},
    [V_MXFP8] = {"MXFP8", "mxfp8-quantized", ARCH(PRECIS_TARGET_SM100), "block-scaled FP8 (tcgen05) on sm_100", src_ct},
};

/* TensorRT-LLM: the quant_algo values of hf_quant_config.json precis writes (deploy.h) with the
 * architectures TensorRT-LLM's support matrix gives them. */
static const precis_deploy_scheme trtllm_schemes[] = {
    {"FP8", "FP8", SM89_UP, "per-tensor fp8 (QGMMA / cuBLASLt)",
     "TensorRT-LLM docs/source/reference/precision.md; ModelOpt modelopt/torch/export/model_config.py"},
    {"FP8 per channel, per token", "FP8_PER_CHANNEL_PER_TOKEN", SM89_UP, "fp8 rowwise",
     "TensorRT-LLM docs/source/reference/precision.md"},
    {"FP8 block scales", "FP8_BLOCK_SCALES", ARCH(PRECIS_TARGET_SM90) | ARCH(PRECIS_TARGET_SM100),
     "DeepSeek-style 128x128 weight blocks; k divisible by 128", "TensorRT-LLM docs/source/reference/precision.md"},
    {"NVFP4", "NVFP4", SM100_UP, "FP4 with E4M3 scales per 16", "TensorRT-LLM docs/source/reference/precision.md"},
    {"MXFP8", "MXFP8", ARCH(PRECIS_TARGET_SM100), "MXFP8 (Blackwell)", "ModelOpt modelopt/torch/export/model_config.py"},
    {"W8A16", "W8A16", SM80_UP, "int8 weight-only, per channel", "TensorRT-LLM docs/source/reference/precision.md"},
};

size_t precis_deploy_schemes(precis_deploy_engine e, const precis_deploy_scheme **out) {
  switch (e) {
  case PRECIS_DEPLOY_ENGINE_VLLM: *out = vllm_schemes; return V_COUNT;
  case PRECIS_DEPLOY_ENGINE_TRTLLM: *out = trtllm_schemes; return sizeof trtllm_schemes / sizeof trtllm_schemes[0];
  default: *out = NULL; return 0;
  }
}

void precis_deploy_archs_describe(unsigned archs, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int t = PRECIS_TARGET_SM80; t < PRECIS_TARGET_COUNT && used < len; t++)
    if (archs & ARCH(t)) used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", precis_target_name((precis_target)t));
  if (!used) snprintf(buf, len, "none");
}

/* ------------------------------------------------------------------ shapes */

/* The groups and blocks along k the weight's scales need (compressed-tensors:
 * quantization/lifecycle/forward_helpers.py raises "tensor column shape must be divisble by the
 * given group_size" for GROUP and TENSOR_GROUP; initialize.py: block columns must divide). */
static int k_divisor(const precis_operand_spec *b) {
  switch (b->gran) {
  case PRECIS_GRAN_K: return b->group;
  case PRECIS_GRAN_BLOCK: return b->block_rows; /* B = W^T: rows run along k */
  case PRECIS_GRAN_MX:
  case PRECIS_GRAN_MX_RCEIL: return 32;
  case PRECIS_GRAN_NV: return 16;
  default: return 1;
  }
}

bool precis_deploy_ct_shape_ok(const precis_spec *spec, long long k, long long n, char *why, size_t why_len) {
  (void)n;
  if (!precis_operand_is_scaled(&spec->b)) return true;
  int d = k_divisor(&spec->b);
  if (d > 1 && k % d != 0) {
    snprintf(why, why_len, "input width k=%lld is not a multiple of the weights' %s %d (compressed-tensors: \"tensor "
             "column shape must be divisible by the given group_size\")", k,
             spec->b.gran == PRECIS_GRAN_BLOCK ? "block of" : "group of", d);
    return false;
  }
  return true;
}

static long long gcd_ll(long long a, long long b) { return b ? gcd_ll(b, a % b) : a; }

static long long lcm_ll(long long a, long long b) { return a / gcd_ll(a, b) * b; }

/* The k that makes a row of this operand's elements whole 16-byte units: 128 / gcd(128, bits). */
static long long row_multiple(const precis_operand_spec *op) {
  return 128 / gcd_ll(128, precis_format_get(op->fmt)->storage_bits);
}

/* Quantized operands are read in rows of k elements that the GEMM kernels load 16 bytes at a time
 * (cuBLASLt: leading dimensions of fp8 / int8 operands a multiple of 16 bytes; CUTLASS and Marlin
 * tiles likewise): k * bits / 8 a multiple of 16. */
static bool row_aligned(const precis_operand_spec *op, long long k, char *why, size_t why_len, const char *which) {
  if (!precis_operand_is_scaled(op)) return true;
  int bits = precis_format_get(op->fmt)->storage_bits;
  long long multiple = row_multiple(op);
  if (k % multiple == 0) return true;
  snprintf(why, why_len, "%s rows of k=%lld %d-bit elements are not a multiple of 16 bytes (k must be a multiple of %lld)",
           which, k, bits, multiple);
  return false;
}

/* The nearest group along k (smaller, so no coarser than asked) that k divides and that keeps rows
 * aligned; 0 when none. */
static int nearest_group(const precis_spec *spec, long long k) {
  static const int groups[] = {128, 64, 32, 16};
  for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
    if (groups[i] >= spec->b.group || k % groups[i] != 0) continue;
    return groups[i];
  }
  return 0;
}

long long precis_deploy_k_multiple(precis_deploy_engine e, const precis_spec *spec) {
  if (e == PRECIS_DEPLOY_ENGINE_NONE) return 1;
  long long m = 1;
  if (precis_operand_is_scaled(&spec->b)) m = lcm_ll(lcm_ll(m, k_divisor(&spec->b)), row_multiple(&spec->b));
  if (precis_operand_is_scaled(&spec->a)) m = lcm_ll(m, row_multiple(&spec->a));
  return m;
}

static bool shape_ok(precis_deploy_engine e, const precis_spec *spec, long long k, long long n, precis_deploy_verdict *v) {
  if (!precis_deploy_ct_shape_ok(spec, k, n, v->why, sizeof v->why)) return false;
  if (!row_aligned(&spec->b, k, v->why, sizeof v->why, "weight") || !row_aligned(&spec->a, k, v->why, sizeof v->why, "activation"))
    return false;
  if (e == PRECIS_DEPLOY_ENGINE_TRTLLM && spec->b.gran == PRECIS_GRAN_BLOCK && n % spec->b.block_cols != 0) {
    snprintf(v->why, sizeof v->why, "output width n=%lld is not a multiple of the weights' block of %d (TensorRT-LLM "
             "FP8_BLOCK_SCALES)", n, spec->b.block_cols);
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------ schemes of a spec */

static bool is_int(precis_format_id f) { return !precis_format_get(f)->is_float; }

/* The vLLM scheme of a compressed-tensors mapping; -1 when vLLM has none. */
static int vllm_scheme(const precis_spec *s) {
  const precis_operand_spec *a = &s->a, *b = &s->b;
  bool act = precis_operand_is_scaled(a);
  if (is_int(b->fmt)) {
    int bits = precis_format_get(b->fmt)->storage_bits;
    if (bits < 4) return act ? -1 : V_W2W3A16;
    if (!act) return bits == 8 ? V_W8A16 : V_W4A16;
    if (a->fmt == PRECIS_FMT_I8) return bits == 8 ? V_W8A8_INT8 : V_W4A8_INT;
    if (a->fmt == PRECIS_FMT_E4M3 && bits == 4) return V_W4AFP8;
    return -1;
  }
  if (b->fmt == PRECIS_FMT_E4M3) {
    if (b->gran == PRECIS_GRAN_MX) return a->fmt == PRECIS_FMT_E4M3 && a->gran == PRECIS_GRAN_MX ? V_MXFP8 : -1;
    if (!act) return V_FP8_W8A16;
    if (a->fmt != PRECIS_FMT_E4M3) return -1;
    return b->gran == PRECIS_GRAN_BLOCK ? V_FP8_BLOCK : V_FP8;
  }
  if (b->fmt == PRECIS_FMT_E2M1) {
    if (b->gran == PRECIS_GRAN_NV) return !act ? V_NVFP4A16 : a->gran == PRECIS_GRAN_NV ? V_NVFP4 : -1;
    if (b->gran == PRECIS_GRAN_MX) return act && a->gran == PRECIS_GRAN_MX ? V_MXFP4 : -1;
  }
  return -1;
}

void precis_deploy_check(precis_deploy_engine e, precis_target arch, const precis_spec *spec, long long k, long long n,
                         precis_deploy_verdict *v) {
  memset(v, 0, sizeof *v);
  v->deployable = v->exact = true;
  if (e == PRECIS_DEPLOY_ENGINE_NONE) return;
  if (arch == PRECIS_TARGET_DEFAULT) arch = PRECIS_DEPLOY_ARCH_DEFAULT;
  precis_deploy_map map;
  if (e == PRECIS_DEPLOY_ENGINE_VLLM) precis_deploy_compressed_tensors(spec, &map);
  else precis_deploy_modelopt(spec, &map);
  precis_deploy_map_free(&map);
  v->exact = map.exact;
  if (map.kind == PRECIS_DEPLOY_NONE) {
    v->deployable = false;
    snprintf(v->why, sizeof v->why, "%s", map.note);
    return;
  }
  if (map.kind == PRECIS_DEPLOY_UNQUANTIZED) {
    if (!map.exact) {
      v->deployable = false;
      snprintf(v->why, sizeof v->why, "unquantized, but %s serves unquantized layers in the checkpoint's dtype with fp32 "
               "accumulation: a split, tf32 or fp16-accumulation recipe is not what it runs", precis_deploy_engine_name(e));
    }
    return;
  }
  if (!map.exact) snprintf(v->why, sizeof v->why, "%s", map.note);
  if (e == PRECIS_DEPLOY_ENGINE_VLLM) {
    int i = vllm_scheme(spec);
    if (i < 0) {
      v->deployable = false;
      snprintf(v->why, sizeof v->why, "compressed-tensors can write it (%s) but vLLM has no scheme for this combination",
               map.scheme);
      return;
    }
    v->scheme = &vllm_schemes[i];
  } else {
    for (size_t i = 0; i < sizeof trtllm_schemes / sizeof trtllm_schemes[0]; i++)
      if (strcmp(trtllm_schemes[i].checkpoint, map.scheme) == 0) v->scheme = &trtllm_schemes[i];
    if (!v->scheme) {
      v->deployable = false;
      snprintf(v->why, sizeof v->why, "ModelOpt quant_algo %s is not in precis's TensorRT-LLM table", map.scheme);
      return;
    }
  }
  if (!v->scheme->archs) {
    v->deployable = false;
    snprintf(v->why, sizeof v->why, "%s has no NVIDIA GPU kernel for %s (%s)", precis_deploy_engine_name(e), v->scheme->name,
             v->scheme->kernel);
    return;
  }
  if (!(v->scheme->archs & ARCH(arch))) {
    char archs[96];
    precis_deploy_archs_describe(v->scheme->archs, archs, sizeof archs);
    v->deployable = false;
    snprintf(v->why, sizeof v->why, "%s runs %s on %s only (%s), not on %s", precis_deploy_engine_name(e), v->scheme->name,
             archs, v->scheme->kernel, precis_target_name(arch));
    return;
  }
  if (!shape_ok(e, spec, k, n, v)) {
    v->deployable = false;
    if (spec->b.gran == PRECIS_GRAN_K) {
      int g = nearest_group(spec, k);
      precis_spec near = *spec;
      near.b.group = g;
      if (near.a.gran == PRECIS_GRAN_K) near.a.group = g;
      precis_deploy_verdict nv;
      if (g && (precis_deploy_check(e, arch, &near, k, n, &nv), nv.deployable)) precis_spec_format(&near, v->nearest, sizeof v->nearest);
    }
  }
}

bool precis_deploy_unties_head(precis_deploy_engine e) { return e != PRECIS_DEPLOY_ENGINE_NONE; }

/* ------------------------------------------------------------------ KV cache */

/* The KV formats an engine stores (docs/deploy.md, "KV cache"), one format for K and V. */
typedef struct kv_scheme {
  precis_deploy_engine engine;
  const char *format;
  unsigned archs;
  const char *how;
} kv_scheme;

static const kv_scheme kv_schemes[] = {
    {PRECIS_DEPLOY_ENGINE_VLLM, "bf16", ~0u, "kv_cache_dtype auto"},
    {PRECIS_DEPLOY_ENGINE_VLLM, "fp16", ~0u, "kv_cache_dtype auto"},
    {PRECIS_DEPLOY_ENGINE_VLLM, "e4m3", ~0u, "kv_cache_dtype fp8 without scales (1.0)"},
    {PRECIS_DEPLOY_ENGINE_VLLM, "e5m2", ~0u, "kv_cache_dtype fp8_e5m2"},
    {PRECIS_DEPLOY_ENGINE_VLLM, "e4m3@tensor", ~0u, "kv_cache_scheme strategy tensor (k_scale, v_scale)"},
    {PRECIS_DEPLOY_ENGINE_VLLM, "e4m3@head", ~0u, "kv_cache_scheme strategy attn_head"},
    {PRECIS_DEPLOY_ENGINE_TRTLLM, "bf16", ~0u, "the model's dtype"},
    {PRECIS_DEPLOY_ENGINE_TRTLLM, "fp16", ~0u, "the model's dtype"},
    {PRECIS_DEPLOY_ENGINE_TRTLLM, "e4m3", ~0u, "kv_cache_quant_algo FP8"},
    {PRECIS_DEPLOY_ENGINE_TRTLLM, "e4m3@tensor", ~0u, "kv_cache_quant_algo FP8 (calibrated scales)"},
    {PRECIS_DEPLOY_ENGINE_TRTLLM, "e2m1@nv:static", SM100_UP, "kv_cache_quant_algo NVFP4"},
};

bool precis_deploy_kv_ok(precis_deploy_engine e, precis_target arch, const char *k, const char *v, char *why,
                         size_t why_len) {
  if (why_len) why[0] = '\0';
  if (e == PRECIS_DEPLOY_ENGINE_NONE) return true;
  if (arch == PRECIS_TARGET_DEFAULT) arch = PRECIS_DEPLOY_ARCH_DEFAULT;
  if (strcmp(k, v) != 0) {
    snprintf(why, why_len, "%s stores K and V in one format (K %s, V %s)", precis_deploy_engine_name(e), k, v);
    return false;
  }
  for (size_t i = 0; i < sizeof kv_schemes / sizeof kv_schemes[0]; i++) {
    const kv_scheme *s = &kv_schemes[i];
    if (s->engine != e || strcmp(s->format, k) != 0) continue;
    if (s->archs & ARCH(arch)) return true;
    char archs[96];
    precis_deploy_archs_describe(s->archs, archs, sizeof archs);
    snprintf(why, why_len, "%s stores a %s KV cache (%s) on %s, not %s", precis_deploy_engine_name(e), k, s->how, archs,
             precis_target_name(arch));
    return false;
  }
  snprintf(why, why_len, "%s has no %s KV cache", precis_deploy_engine_name(e), k);
  return false;
}

/* ------------------------------------------------------------------ fused groups */

/* Families of transformers' module names, by config.json's model_type: the sibling projections
 * vLLM's model definitions (vllm/model_executor/models/<family>.py: QKVParallelLinear,
 * MergedColumnParallelLinear) and TensorRT-LLM's (QKVConfig, MLPConfig.merge_gate_fc) load into one
 * GEMM. */
typedef struct fused_family {
  const char *const *model_types; /* NULL-terminated */
  const char *const *sets[3];     /* each a NULL-terminated list of sibling names; NULL after the last */
} fused_family;

static const char *const qkv[] = {"q_proj", "k_proj", "v_proj", NULL};
static const char *const gate_up[] = {"gate_proj", "up_proj", NULL};
static const char *const bert_qkv[] = {"query", "key", "value", NULL};
static const char *const distil_qkv[] = {"q_lin", "k_lin", "v_lin", NULL};
static const char *const llama_like[] = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                                         "gemma", "gemma2", "gemma3", "gemma3_text", "granite", "granitemoe", "olmo",
                                         "olmo2", "olmoe", "smollm3", "cohere", "stablelm", "deepseek_v2", "deepseek_v3",
                                         "phi", "starcoder2", "internlm2", "exaone", "glm", "hunyuan_v1_dense", NULL};
static const char *const bert_like[] = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "mpnet", NULL};
static const char *const distil_like[] = {"distilbert", NULL};
/* Projections already fused in the checkpoint (one module): nothing to group. */
static const char *const prefused[] = {"gpt2", "openai-gpt", "gpt_neox", "gptj", "phi3", "falcon", "bloom", "mpt",
                                       "gpt_bigcode", "gpt_oss", NULL};

static const fused_family families[] = {
    {llama_like, {qkv, gate_up, NULL}},
    {bert_like, {bert_qkv, NULL}},
    {distil_like, {distil_qkv, NULL}},
    {prefused, {NULL}},
};
static const fused_family generic = {NULL, {qkv, gate_up, bert_qkv}};

static bool in_list(const char *s, const char *const *list) {
  for (; list && *list; list++)
    if (strcmp(s, *list) == 0) return true;
  return false;
}

/* The key a layer is grouped under ("" when on its own), written to key. */
static void fusion_key(precis_deploy_engine e, const fused_family *f, const char *name, char *key, size_t len) {
  key[0] = '\0';
  const char *experts = strstr(name, ".experts.");
  if (experts) {
    /* vLLM's FusedMoE holds every expert's gate/up (w13) and down (w2) projections in one layer
     * with one quantization method; ModelOpt's AutoQuantize groups the same way for TensorRT-LLM
     * (quant_grouping_rules: "<block>.experts.N.(gate|up|down)_proj", "<block>.N.(w1|w2|w3)"). */
    (void)e;
    snprintf(key, len, "%.*s.experts", (int)(experts - name), name);
    return;
  }
  const char *last = strrchr(name, '.');
  const char *leaf = last ? last + 1 : name;
  size_t parent = last ? (size_t)(last - name) : 0;
  for (int s = 0; s < 3 && f->sets[s]; s++)
    if (in_list(leaf, f->sets[s])) {
      snprintf(key, len, "%.*s:%d", (int)parent, name, s);
      return;
    }
}

precis_status precis_deploy_fused_groups(precis_deploy_engine e, const char *model_type, const char *const *layers,
                                         const long long *k, size_t n_layers, int *group, size_t *n_groups, char *rule,
                                         size_t rule_len) {
  *n_groups = 0;
  for (size_t l = 0; l < n_layers; l++) group[l] = -1;
  if (e == PRECIS_DEPLOY_ENGINE_NONE) {
    snprintf(rule, rule_len, "none: --deploy none fuses nothing");
    return PRECIS_OK;
  }
  const fused_family *f = NULL;
  for (size_t i = 0; model_type && i < sizeof families / sizeof families[0] && !f; i++)
    if (in_list(model_type, families[i].model_types)) f = &families[i];
  if (f)
    snprintf(rule, rule_len, "model_type %s: %s", model_type,
             f->sets[0] == qkv ? "q/k/v and gate/up projections of a block, and the experts of a MoE block"
             : f->sets[0] ? "the attention's query/key/value" : "projections already fused in the checkpoint; the experts of a MoE block");
  else {
    f = &generic;
    snprintf(rule, rule_len, "%s%s%s: the common names (q_proj/k_proj/v_proj, gate_proj/up_proj, query/key/value, "
             "the experts of a MoE block)", model_type ? "model_type " : "no model_type recorded",
             model_type ? model_type : "", model_type ? " is not in precis's table" : "");
  }
  char key_l[512], key_m[512];
  for (size_t l = 0; l < n_layers; l++) {
    if (group[l] >= 0) continue;
    fusion_key(e, f, layers[l], key_l, sizeof key_l);
    if (!key_l[0]) continue;
    bool experts = strstr(key_l, ".experts") != NULL;
    size_t members = 1;
    int id = (int)*n_groups;
    for (size_t m = l + 1; m < n_layers; m++) {
      if (group[m] >= 0) continue;
      fusion_key(e, f, layers[m], key_m, sizeof key_m);
      /* Siblings fused into one GEMM read the same input: a differing k means they are not. */
      if (strcmp(key_l, key_m) != 0 || (!experts && k && k[l] != k[m])) continue;
      group[m] = id;
      members++;
    }
    if (members > 1) {
      group[l] = id;
      (*n_groups)++;
    } else {
      for (size_t m = l + 1; m < n_layers; m++)
        if (group[m] == id) group[m] = -1;
    }
  }
  return PRECIS_OK;
}
