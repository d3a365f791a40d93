/* precis plan (DESIGN §12): a per-layer precision plan from a report over a model's layers.
 *
 * A layer is a workload of the report (precis import --model names each workload after its
 * PyTorch module). For every (layer, recipe) cell: does the row meet the criteria (the --require
 * expressions on its worst-over-samples metrics, else the row's recorded verdict), its error
 * (rel_fro worst over samples) and its cost in the budget's dimension:
 *   memory  (default) tensor_bytes of the row: A, B, output and scales in the recipe's formats
 *   bits    the weights' storage: bits of the recipe's input format times k*n
 *   latency the row's median latency per call (ms)
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
#include "report/results.h"
#include "base/status.h"

typedef enum precis_plan_budget { PRECIS_PLAN_NO_BUDGET, PRECIS_PLAN_MEMORY, PRECIS_PLAN_BITS, PRECIS_PLAN_LATENCY } precis_plan_budget;
const char *precis_plan_budget_str(precis_plan_budget b); /* "none", "memory", "bits", "latency" */

typedef struct precis_plan_options {
  const precis_criteria *require; /* NULL or empty: each row's recorded verdict */
  precis_plan_budget budget;
  double budget_value;            /* bytes, average bits per weight, or ms */
  precis_plan_budget cost_kind;   /* the cost dimension without a budget (memory by default) */
  const char *target;             /* recipe the exclusion lists are relative to; NULL: the cheapest */
  size_t state_limit;             /* frontier states per layer before thinning; 0: 1<<20 */
  /* A latency cost (budget or --cost) on a cpu-emulation report is refused unless this is set: its
   * timings are the CPU's cost of emulating each format (fp32 fastest), not the formats' speed on
   * the hardware they stand for. When set, the plan says so wherever it is shown. */
  bool allow_emulated_latency;
} precis_plan_options;

typedef struct precis_plan_cell {
  bool present;      /* the report has a row */
  bool passes;
  double error;      /* rel_fro worst; NaN when unknown */
  double cost;       /* in the plan's cost dimension; NaN when unknown */
  char what[200];    /* why it does not pass ("" when it does) */
} precis_plan_cell;

typedef struct precis_plan {
  size_t n_layers, n_recipes;
  const char **layers;  /* point into the report */
  const char **recipes;
  long long *weights;   /* k*n per layer (-1 unknown) */
  precis_plan_cell *cells; /* [layer * n_recipes + recipe] */
  precis_plan_budget cost_kind, budget;
  double budget_value, capacity; /* capacity in the cost dimension (NaN without a budget) */
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

/* Printers: plan.json, plan.md, plan.html, modelopt_exclude.json and llmcompressor_ignore.yaml
 * into dir (created when needed). */
precis_status precis_plan_write_all(const precis_plan *plan, const precis_report *report, const char *report_path,
                                    const char *dir, bool force);
/* The short summary on stdout. */
void precis_plan_print(const precis_plan *plan, FILE *out);

#endif
