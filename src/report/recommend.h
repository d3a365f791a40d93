/* precis recommend (DESIGN §7, issue 6): the cheapest recipe that meets the accuracy criteria on
 * every workload, with the evidence behind the decision.
 *
 * The rule (docs/reports.md):
 *  - A recipe passes when it has a row for every workload of the report (or of the one workload
 *    asked for), every such row has status "ok", and every row meets the criteria: the --require
 *    expressions re-evaluated on the row's worst-over-samples metrics when given, else the row's
 *    recorded verdict and criteria. A row without any criteria fails (nothing says it is good).
 *  - A target: the --require expressions given here, or those the run was given (the report's
 *    settings.criteria, recorded in every row). Without one the rows' criteria are the recipes'
 *    default gates, which say whether a format behaved as that format should, not what accuracy
 *    the user needs: then nothing is called recommended (has_target false) and the printers show
 *    the frontier and how to ask.
 *  - Cost: latency = the sum over workloads of the median latency per call; memory = the largest
 *    over workloads of the bytes the recipe holds on the device: tracked_peak_bytes on cuda, the
 *    format's bytes (tensor_bytes) on an emulating backend, whose tracked peak counts the float32
 *    working copies of the emulation (memory_by_format).
 *  - The passing recipe of lowest cost wins, except that latencies inside the measured noise are
 *    ties: each row's noise interval is the wider of its samples' interquartile range and the
 *    distribution-free 95% confidence interval of their median (order statistics), summed over
 *    workloads; a passing recipe whose interval overlaps the cheapest one's ties with it, and so
 *    does one within tie_threshold (a fraction, 10% by default) of the cheapest's latency. Ties
 *    (within the noise, or equal cost) go to the lower memory of the format (tensor_bytes), then
 *    to the lower error (the largest rel_fro worst over workloads), then to the earlier recipe in
 *    the preset table (recipe.c).
 *  - When none passes: the closest miss is the failing recipe whose worst criterion miss is the
 *    smallest ratio (value/limit for upper bounds, limit/value for lower bounds). */
#ifndef PRECIS_RECOMMEND_H
#define PRECIS_RECOMMEND_H

#include <stdbool.h>
#include <stdio.h>

#include "numerics/criteria.h"
#include "results.h"
#include "base/status.h"

typedef enum precis_objective { PRECIS_OBJECTIVE_LATENCY, PRECIS_OBJECTIVE_MEMORY } precis_objective;

typedef struct precis_recommend_options {
  const precis_criteria *require; /* NULL or empty: each row's recorded verdict and criteria */
  precis_objective objective;
  const char *workload;           /* NULL: every workload together; else only this one */
  const char *report_path;        /* names the report in the suggested command; NULL: REPORT.json */
  /* Latencies within this fraction of the cheapest also tie (0: the measured noise alone). The
   * command line and the report printers use PRECIS_TIE_THRESHOLD_DEFAULT. */
  double tie_threshold;
} precis_recommend_options;

/* 10%, compare's speed threshold: below it, a difference between separately measured rows is not
 * trusted (rows measured at different moments shift by a few percent, which no statistic of one
 * row's own samples shows). */
#define PRECIS_TIE_THRESHOLD_DEFAULT 0.10

typedef struct precis_recipe_outcome {
  const char *recipe;             /* points into the report */
  const char *spec;               /* canonical spec (the report's, or the preset's for older reports); may be NULL */
  int rank;                       /* position in the recipe table (unknown recipes after) */
  bool passes;
  size_t n_workloads;             /* workloads considered */
  double latency_ms;              /* sum of median latency over workloads; NaN when a row has none */
  double latency_lo_ms, latency_hi_ms; /* the noise interval around it (see the rule above) */
  long long format_bytes;         /* largest tensor_bytes over workloads; -1 when unknown */
  long long memory_bytes;         /* what the memory objective ranks: format_bytes or peak_bytes */
  long long peak_bytes;           /* largest peak over workloads; -1 when unknown */
  double cost;                    /* latency_ms or peak_bytes, per the objective; NaN when unknown */
  double error;                   /* largest rel_fro worst over workloads; NaN when unknown */
  /* Against the baseline preset's spec (fp32, precis_recipe_preset_baseline), whatever its name: */
  double speedup_vs_fp32;         /* baseline latency / this latency; NaN without a baseline row */
  double memory_vs_fp32;          /* this memory_bytes / baseline's; NaN without a baseline row */
  bool tied;                      /* tied with the winner (within the noise, or equal cost) */
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
  const char *report_path;          /* as in the options */
  precis_recipe_outcome *outcomes;  /* in recipe-table order */
  size_t n_outcomes;
  int chosen;                       /* index into outcomes, -1 when none passes */
  int closest_miss;                 /* index, -1 when one passes or nothing failed by a margin */
  bool tie_broken;                  /* the winner tied with another passing recipe (outcomes[].tied) */
  bool tie_within_noise;            /* ... on latency inside the measured noise, not on equal cost */
  double tie_threshold;             /* as in the options */
  char tie_decided_by[64];          /* "memory of the format, then error", ...; "" without a tie */
  bool has_target;                  /* the criteria are the user's (--require), not default gates */
  bool memory_by_format;            /* memory is the format's bytes (an emulating backend) */
  char criteria_source[512];        /* "--require rel_fro<=0.01" or "each row's recorded criteria" */
} precis_recommendation;

precis_status precis_recommend(const precis_report *report, const precis_recommend_options *options,
                               precis_recommendation *out);
void precis_recommendation_free(precis_recommendation *rec);

/* The decision with its evidence, for people. */
void precis_recommendation_print(const precis_report *report, const precis_recommendation *rec, FILE *out);
/* The answer in a few plain-text sentences for the report printers (stdout, Markdown, HTML escape
 * it): the recommendation with its ties, or no recipe passing, or, without a target, the frontier
 * and how to ask. malloc'ed. */
char *precis_recommendation_headline(const precis_recommendation *rec);
/* The same as a JSON object (malloc'ed). */
char *precis_recommendation_json(const precis_recommendation *rec);

#endif
