/* precis plan (DESIGN §12): a per-layer precision plan from a report over a model's layers.
 *
 * A layer is a workload of the report (precis import --model names each workload after its
 * PyTorch module). For every (layer, recipe) cell: does the row meet the criteria (the --require
 * expressions on its worst-over-samples metrics, else the row's recorded verdict), its error
 * (rel_fro worst over samples) and its cost in the budget's dimension:
 *   memory  (default) the resident weights: their effective bits (below) in bytes, rounded up;
 *           a plan's memory is the sum of those over layers plus the largest transient of one
 *           layer (its input, output and scales, and the workspace a cuda row records), never the
 *           sum of every layer's activations
 *   bits    the weights' effective bits: elements plus the scales and zero points of the recipe's b
 *           operand as a checkpoint stores them (precis_operand_weight_total_bits, docs/criteria.md)
 *   latency the row's median latency per call (ms)
 *
 * A memory budget is not a plain sum (the transient term is a maximum): it is solved exactly by
 * solving the sum for each candidate peak transient T (every distinct transient of a passing cell)
 * with the cells of transient <= T and capacity budget - T, keeping the most accurate.
 *
 * Without a budget every layer gets its cheapest passing recipe (ties: lower error, then the
 * earlier recipe in the report). With a budget (memory=BYTES, latency=MS: the sum over layers;
 * bits=B: the average bits per weight over the layers) the plan is the assignment of one passing
 * recipe per layer that minimizes the total error sum_l error(l, r_l) subject to
 * sum_l cost(l, r_l) <= capacity; ties go to the lower total cost. It is solved exactly by dynamic
 * programming over layers on the Pareto frontier of (cost, error) partial sums: a partial
 * assignment is dropped only when another one is no more costly and no more erroneous, which
 * (float addition being monotone) can never remove the optimum. Only when a frontier would exceed
 * the state limit is it thinned, and the plan then says it is a heuristic. */
#ifndef PRECIS_PLAN_H
#define PRECIS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "numerics/criteria.h"
#include "numerics/target.h"
#include "report/deploy_target.h"
#include "report/results.h"
#include "base/status.h"

/* The cuBLASLt workspace the cuda backend allocates, for the serving estimate. The plan sits below
 * eval/ (src/layers.txt), so eval/gemm_plan.c checks at compile time that its
 * PRECIS_LT_WORKSPACE_BYTES is this value. */
#define PRECIS_PLAN_LT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef enum precis_plan_budget { PRECIS_PLAN_NO_BUDGET, PRECIS_PLAN_MEMORY, PRECIS_PLAN_BITS, PRECIS_PLAN_LATENCY } precis_plan_budget;
const char *precis_plan_budget_str(precis_plan_budget b); /* "none", "memory", "bits", "latency" */

/* What the plan minimizes, summed over layers (DESIGN §17): a cell's rel_fro (worst over samples),
 * or the loss change its row predicts from the dataset's gradients (docs/criteria.md): fisher
 * (loss_change.fisher mean over samples) or taylor (|loss_change.taylor mean|). AUTO: fisher when the
 * report's rows carry loss_change, else rel_fro. */
typedef enum precis_plan_objective {
  PRECIS_PLAN_OBJECTIVE_AUTO,
  PRECIS_PLAN_OBJECTIVE_REL_FRO,
  PRECIS_PLAN_OBJECTIVE_FISHER,
  PRECIS_PLAN_OBJECTIVE_TAYLOR,
} precis_plan_objective;
const char *precis_plan_objective_str(precis_plan_objective o); /* "auto", "rel_fro", "fisher", "taylor" */
/* "rel_fro (worst over samples)", ... */
const char *precis_plan_objective_definition(precis_plan_objective o);

typedef struct precis_plan_options {
  precis_plan_objective objective;
  const precis_criteria *require; /* NULL or empty: each row's recorded verdict */
  precis_plan_budget budget;
  double budget_value;            /* bytes, average bits per weight, or ms */
  precis_plan_budget cost_kind;   /* the cost dimension without a budget (memory by default) */
  const char *target;             /* recipe the exclusion lists are relative to; NULL: the cheapest */
  size_t state_limit;             /* frontier states per layer before thinning; 0: 1<<20 */
  /* --serve batch=B,context=T[,kv=FMT]: a serving estimate beside the plan (serve_batch 0: none). */
  long long serve_batch, serve_context;
  const char *serve_kv;           /* the KV cache's format name; NULL: bf16 */
  /* --kv-candidates (docs/kv-cache.md, "The KV format as a decision of the plan"): with --serve and a
   * memory budget, the KV cache format becomes a decision. A kv-sweep.json of verify --kv-sweep or a
   * list "K[,V]=KL;..." (KL: measured KL(ref||q) mean of the cache alone). The budget then covers the
   * weights' memory + the KV cache at batch x context, and the plan is the (weights plan, KV format)
   * pair of least map(weights objective) + KL(KV). objective_map puts the weights' objective on KL's
   * scale: "identity", "a=A,b=B" (log10 KL = A + B log10 objective), or a plan.json of
   * python -m precis plan --validate (its validation.fit). Both NULL: no KV decision. */
  const char *kv_candidates;
  const char *objective_map;
  /* --moe-active top_k/num_experts: a token reads only top_k of num_experts experts, so a bits
   * budget (bits per weight a token reads) weighs each expert layer (a name with ".experts." in it)
   * by this fraction, in its cost and in the weights the average is over. 0 or 1: no weighting. */
  double moe_active;
  /* A latency cost (budget or --cost) on a cpu-emulation report is refused unless this is set: its
   * timings are the CPU's cost of emulating each format (fp32 fastest), not the formats' speed on
   * the hardware they stand for. When set, the plan says so wherever it is shown. */
  bool allow_emulated_latency;
  /* --deploy (DESIGN §21, docs/deploy.md): the engine whose rules the plan obeys (recipes a layer's
   * shape or the architecture cannot deploy are dropped, fused layers share one recipe, a tied head
   * is charged its quantized copy); PRECIS_DEPLOY_ENGINE_NONE for exploration. deploy_arch: the
   * architecture (--target sm_XX); PRECIS_TARGET_DEFAULT: PRECIS_DEPLOY_ARCH_DEFAULT. */
  precis_deploy_engine deploy;
  precis_target deploy_arch;
} precis_plan_options;

/* A KV cache format of `--serve kv=` (docs/kv-cache.md: the formats of precis.kvcache and verify --kv,
 * or an element format name such as bf16, e4m3): its canonical name and what stores and deploys it. */
typedef struct precis_kv_format {
  const char *name;        /* canonical: "e4m3@tensor", "s8@row:sym", "e2m1@nv", ... */
  const char *alias;       /* "fp8-tensor", "int8", "nvfp4", ...; NULL */
  int elem_bits;
  int group;               /* values per group scale along head_dim; 0: no per-token scale; -1: one per head vector */
  int scale_bits;          /* storage of one group scale */
  const char *ct_strategy; /* compressed-tensors kv_cache_scheme strategy; NULL when it has none */
  const char *modelopt;    /* ModelOpt kv_cache_quant_algo; NULL when it has none */
} precis_kv_format;

/* The format named `text` (canonical, alias or element format), or NULL. */
const precis_kv_format *precis_kv_format_find(const char *text);
/* Bits per cached value with head vectors of head_dim values, group scales included. */
double precis_kv_format_bits(const precis_kv_format *f, long long head_dim);

/* The memory a served model holds, estimated from the plan and the model's config.json (recorded
 * by import --model in the report's settings.model_config): each term in bytes. An estimate until
 * precis accept measures it on a GPU. */
typedef struct precis_plan_serving {
  bool requested, available;
  char why[240];               /* why not available */
  long long batch, context;
  char kv_format[56];          /* the KV cache format (docs/kv-cache.md), canonical; "K,V" when they differ */
  double kv_bits;              /* bits per cached value at head_dim, group scales included */
  const char *kv_ct_strategy;  /* compressed-tensors kv_cache_scheme strategy ("tensor", "attn_head"); NULL: none */
  const char *kv_modelopt;     /* ModelOpt kv_cache_quant_algo ("FP8", "NVFP4"); NULL: none */
  long long layers, kv_heads, head_dim;
  double weights;              /* the planned layers' resident weights and scales */
  double kv_cache;             /* 2 * context * batch * kv_heads * head_dim * layers elements of kv_bits */
  double transient;            /* the largest input + output (+ scales) of one layer at batch*context tokens */
  int transient_layer;
  double workspace;            /* the cuBLASLt workspace (PRECIS_PLAN_LT_WORKSPACE_BYTES) */
  double total;
} precis_plan_serving;

/* One KV cache format of the KV decision and what the budget leaves the weights with it. */
typedef struct precis_plan_kv_candidate {
  char k[24], v[24];          /* canonical format names */
  double kl;                  /* measured KL(ref||q) mean of this cache alone (kv-sweep) */
  double bits;                /* bits per cached value, K and V averaged, group scales included */
  double bytes;               /* the cache at batch x context (precis_plan_serving.kv_cache's rule) */
  bool feasible;              /* a weights plan fits in the budget less the cache */
  double weights_objective;   /* that weights plan's objective sum (NaN when infeasible) */
  double weights_kl;          /* the objective mapped to KL */
  double weights_memory;      /* resident + peak transient of that weights plan */
  double total_kl;            /* weights_kl + kl: what the decision minimizes */
  const char *ct_strategy;    /* compressed-tensors strategy when K and V share a format that has one */
  const char *modelopt;       /* ModelOpt kv_cache_quant_algo, likewise */
  bool deployable;            /* the plan's --deploy engine stores it (precis_deploy_kv_ok); else never chosen */
  char why[200];              /* why not deployable */
} precis_plan_kv_candidate;

typedef struct precis_plan_kv_decision {
  bool requested;
  size_t n;
  precis_plan_kv_candidate *candidates;
  int chosen;                 /* -1: none feasible */
  char source[512];           /* where the KLs came from */
  bool map_identity;          /* the objective taken as KL */
  double map_a, map_b;        /* otherwise log10 KL = a + b log10 objective */
  char map_source[512];
} precis_plan_kv_decision;

typedef struct precis_plan_cell {
  bool present;      /* the report has a row */
  bool passes;
  double error;      /* the objective's value (rel_fro worst by default); NaN when unknown */
  double rel_fro;    /* rel_fro worst, whatever the objective; NaN when unknown */
  double cost;       /* in the plan's cost dimension; NaN when unknown */
  double resident;   /* bytes of the weights and their scales (effective bits / 8, rounded up); NaN unknown */
  double transient;  /* bytes held only while the layer runs: input, output, their scales, workspace */
  char what[200];    /* why it does not pass ("" when it does) */
  /* The deployment target cannot run it on this layer (its shape, the architecture, no scheme):
   * not a candidate. why says so; nearest is a spec of the same family that deploys ("" none). */
  bool dropped;
  char dropped_why[320];
  char nearest[PRECIS_SPEC_TEXT_MAX];
} precis_plan_cell;

typedef struct precis_plan {
  size_t n_layers, n_recipes;
  const char **layers;  /* point into the report */
  const char **recipes;
  long long *weights;   /* k*n per layer (-1 unknown) */
  precis_plan_cell *cells; /* [layer * n_recipes + recipe] */
  precis_plan_budget cost_kind, budget;
  precis_plan_objective objective; /* never AUTO once built */
  /* Per recipe: the objective summed over layers with every layer on it (NaN when a layer lacks
   * the value), and whether it passes on every layer: the single-format alternatives. */
  double *single_format;
  bool *single_passes;
  double budget_value, capacity; /* capacity in the cost dimension (NaN without a budget) */
  double moe_active;    /* the expert layers' weight under a bits budget (1: none) */
  double *weight_factor; /* per layer: the MoE active fraction for an expert layer under a bits budget, else 1 */
  int *cheapest;        /* per layer, cheapest passing recipe; -1 when none */
  int *chosen;          /* per layer, the plan; -1 when none */
  double *sensitivity;  /* per layer; NaN when no recipe has an error */
  size_t *by_sensitivity; /* layer indices, most sensitive first */
  int target;           /* recipe index of the exclusion lists' target; -1 when none */
  bool feasible;
  bool latency_emulated; /* the cost is latency, from CPU timings of an emulation (allow_emulated_latency) */
  bool exact;           /* false only when a frontier was thinned */
  size_t states;        /* frontier states explored */
  double total_cost, total_error, cheapest_total_cost;
  /* Memory cost: total_cost = resident_total + peak_transient, the peak of layer peak_layer. */
  double resident_total, peak_transient;
  int peak_layer;
  precis_plan_serving serving;
  precis_plan_kv_decision kv; /* --kv-candidates; requested false without */
  precis_deploy_engine deploy;
  precis_target deploy_arch;  /* never DEFAULT once built */
  /* Fused groups (precis_deploy_fused_groups): group[l] or -1; the plan gives a group's members one
   * recipe, its cost and error their sums. */
  int *group;
  size_t n_groups;
  char fusion_rule[300];
  /* The output projection tied to the input embeddings (-1 none) and how it is charged. */
  int tied_head;
  bool tied_charged_copy; /* its unquantized cells cost 0 and its weights leave a bits budget's average */
  size_t n_dropped;       /* cells dropped as not deployable */
  size_t n_blocking;
  size_t *blocking;     /* layers without a passing recipe */
  char method[200];
  char infeasible_why[300];
  char criteria_source[512];
} precis_plan;

precis_status precis_plan_build(const precis_report *report, const precis_plan_options *options, precis_plan *out);
void precis_plan_free(precis_plan *plan);

/* The solver on its own (tests compare it with brute force): cost and error are [n_layers *
 * n_recipes]; allowed says which cells may be chosen. Minimizes sum error subject to sum cost <=
 * capacity (ties: lower cost). Returns false when no assignment fits; choice receives the recipe
 * per layer. *exact is false when a frontier had to be thinned to state_limit. */
bool precis_plan_solve(size_t n_layers, size_t n_recipes, const double *cost, const double *error, const bool *allowed,
                       double capacity, size_t state_limit, int *choice, double *total_cost, double *total_error,
                       bool *exact, size_t *states);

/* Bits per cached value of a K,V pair (each precis_kv_format_bits, averaged) and the cache's bytes at
 * batch x context: 2 * context * batch * kv_heads * head_dim * layers values, rounded up. */
double precis_kv_cache_bytes(double bits_per_value, long long batch, long long context, long long kv_heads,
                             long long head_dim, long long layers);

/* Printers: plan.json, plan.md, plan.html, modelopt_exclude.json and llmcompressor_ignore.yaml
 * into dir (created when needed). */
precis_status precis_plan_write_all(const precis_plan *plan, const precis_report *report, const char *report_path,
                                    const char *dir, bool force);
/* The short summary on stdout. */
void precis_plan_print(const precis_plan *plan, FILE *out);

#endif
