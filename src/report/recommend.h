/* precis recommend (DESIGN §7, issue 6): the cheapest recipe that meets the accuracy criteria on
 * every workload, with the evidence behind the decision.
 *
 * The rule (docs/reports.md):
 *  - A recipe passes when it has a row for every workload of the report (or of the one workload
 *    asked for), every such row has status "ok", and every row meets the criteria: the --require
 *    expressions re-evaluated on the row's worst-over-samples metrics when given, else the row's
 *    recorded verdict and criteria. A row without any criteria fails (nothing says it is good).
 *  - Cost: latency = the sum over workloads of the median latency per call; memory = the largest
 *    peak over workloads (tracked_peak_bytes, else tensor_bytes).
 *  - The passing recipe of lowest cost wins. Ties (equal cost) go to the lower error (the largest
 *    rel_fro worst over workloads), then to the earlier recipe in the preset table (recipe.c).
 *  - When none passes: the closest miss is the failing recipe whose worst criterion miss is the
 *    smallest ratio (value/limit for upper bounds, limit/value for lower bounds). */
#ifndef PRECIS_RECOMMEND_H
#define PRECIS_RECOMMEND_H

#include <stdbool.h>
#include <stdio.h>

#include "criteria.h"
#include "results.h"
#include "status.h"

typedef enum precis_objective { PRECIS_OBJECTIVE_LATENCY, PRECIS_OBJECTIVE_MEMORY } precis_objective;

typedef struct precis_recommend_options {
  const precis_criteria *require; /* NULL or empty: each row's recorded verdict and criteria */
  precis_objective objective;
  const char *workload;           /* NULL: every workload together; else only this one */
} precis_recommend_options;

typedef struct precis_recipe_outcome {
  const char *recipe;             /* points into the report */
  const char *spec;               /* canonical spec (the report's, or the preset's for older reports); may be NULL */
  int rank;                       /* position in the recipe table (unknown recipes after) */
  bool passes;
  size_t n_workloads;             /* workloads considered */
  double latency_ms;              /* sum of median latency over workloads; NaN when a row has none */
  long long peak_bytes;           /* largest peak over workloads; -1 when unknown */
  double cost;                    /* latency_ms or peak_bytes, per the objective; NaN when unknown */
  double error;                   /* largest rel_fro worst over workloads; NaN when unknown */
  /* Against the baseline preset's spec (fp32, precis_recipe_preset_baseline), whatever its name: */
  double speedup_vs_fp32;         /* baseline latency / this latency; NaN without a baseline row */
  double memory_vs_fp32;          /* this peak / baseline peak; NaN without a baseline row */
  bool on_frontier;               /* Pareto-optimal in (error, cost) */
  /* The worst miss of a failing recipe: */
  const char *failed_workload;    /* points into the report */
  char failed_what[256];          /* "rel_fro=0.031 > 0.01" or "status failed: <reason>" */
  char failed_metric[24];         /* metric key, or "" when the row did not run */
  double margin;                  /* miss ratio >= 1 (inf when a row did not run); NaN when passing */
} precis_recipe_outcome;

typedef struct precis_recommendation {
  precis_objective objective;
  const char *workload;             /* as in the options */
  precis_recipe_outcome *outcomes;  /* in recipe-table order */
  size_t n_outcomes;
  int chosen;                       /* index into outcomes, -1 when none passes */
  int closest_miss;                 /* index, -1 when one passes or nothing failed by a margin */
  bool tie_broken;                  /* the winner shared its cost with another passing recipe */
  char criteria_source[512];        /* "--require rel_fro<=0.01" or "each row's recorded criteria" */
} precis_recommendation;

precis_status precis_recommend(const precis_report *report, const precis_recommend_options *options,
                               precis_recommendation *out);
void precis_recommendation_free(precis_recommendation *rec);

/* The decision with its evidence, for people. */
void precis_recommendation_print(const precis_report *report, const precis_recommendation *rec, FILE *out);
/* The same as a JSON object (malloc'ed). */
char *precis_recommendation_json(const precis_recommendation *rec);

#endif
