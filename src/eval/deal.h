/* Dealing the cases of a run to parts (DESIGN §13, docs/scale-out.md): shards (`run --shard I/N`),
 * MPI ranks and device workers get their cases by one deterministic rule, so that every part
 * computes the same deal on its own from the dataset and the options, and no coordinator is needed
 * before the run.
 *
 * The rule (cost-greedy, "longest processing time first"): each case (workload, recipe) is given a
 * cost, 2·m·n·k·batch flops plus PRECIS_DEAL_FLOPS_PER_BYTE per byte of its tensors in the recipe's
 * formats; cases are taken by decreasing cost (equal costs in dataset order: workload, then recipe
 * in the order of --recipes) and each goes to the part with the least cost dealt so far (equal: the
 * lowest part). Costs are integers, so the deal is the same on every machine. */
#ifndef PRECIS_DEAL_H
#define PRECIS_DEAL_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"
#include "numerics/recipe.h"
#include "base/status.h"

/* A byte moved counts as this many flops: roughly a machine's arithmetic-to-memory balance, so that
 * a skinny, memory-bound GEMM is not dealt as if it were free. */
#define PRECIS_DEAL_FLOPS_PER_BYTE 32

/* The estimated cost of one case (saturates instead of overflowing). */
uint64_t precis_deal_cost(const precis_workload_info *w, const precis_recipe *recipe);

/* Deals n_workloads × n_recipes cases (index wi * n_recipes + ri) to parts 1..n_parts: part[i]
 * receives the part of case i. With n_parts <= 1 every case is part 1. */
precis_status precis_deal_cases(const precis_workload_info *const *workloads, size_t n_workloads,
                                const precis_recipe *recipes, size_t n_recipes, int n_parts, int *part);

/* What a part records in its report's settings as "shard" (malloc'ed JSON text):
 * {"index": I, "count": N, "deal": "cost-greedy", "cases": C, "workloads": [names in dataset order]},
 * so that `precis merge` can check that the parts cover every case once and restore dataset order
 * without the dataset. */
char *precis_deal_describe(int index, int count, size_t cases, const precis_workload_info *const *workloads,
                           size_t n_workloads);

#endif
