/* Accuracy criteria: expressions over metric keys ("rel_fro<=1e-2", "nonfinite==0",
 * "sqnr_db>=40"), applied to each row's worst-over-samples value. */
#ifndef PRECIS_CRITERIA_H
#define PRECIS_CRITERIA_H

#include <stdbool.h>
#include <stddef.h>

#include "metrics.h"
#include "spec.h"
#include "base/status.h"

typedef enum precis_cmp { PRECIS_CMP_LE, PRECIS_CMP_LT, PRECIS_CMP_GE, PRECIS_CMP_GT, PRECIS_CMP_EQ } precis_cmp;

typedef struct precis_criterion {
  precis_metric_id metric;
  precis_cmp op;
  double value;
} precis_criterion;

#define PRECIS_MAX_CRITERIA 32

typedef struct precis_criteria {
  size_t count;
  precis_criterion items[PRECIS_MAX_CRITERIA];
} precis_criteria;

/* Parses one expression; the message names the expression and what was expected. */
precis_status precis_criterion_parse(const char *text, precis_criterion *out);
/* "rel_fro<=0.01" (shortest round-trip number form). */
void precis_criterion_format(const precis_criterion *c, char *buf, size_t len);
const char *precis_cmp_str(precis_cmp op);

/* How a spec's GEMM accumulates, for the error bounds (docs/criteria.md): partial sums kept with
 * unit roundoff `unit` over at most `interval` products, then added into an accumulator of unit
 * `promoted_unit` (interval 0: every sum in `unit`). fp8 on Hopper tensor cores keeps about 13-14
 * fraction bits between promotions (DeepSeek-V3 technical report §3.3.2; Khattak & Mikaitis, arXiv
 * 2512.07004): unit 2^-13, promoted into float32 every 128 products (DeepSeek-V3's N_C; cuBLASLt's
 * interval with CUBLASLT_MATMUL_DESC_FAST_ACCUM = 0 is not documented: docs/cuda-backend.md). With
 * FAST_ACCUM (spec->fast_accum) nothing is promoted: unit 2^-13 over all k (interval 0). */
typedef struct precis_accumulation {
  double unit;
  long long interval;
  double promoted_unit;
} precis_accumulation;
precis_accumulation precis_spec_accumulation(const precis_spec *spec);
/* The accumulation term of a length-k dot product's bound, the gamma_k of Higham §3.1 for this
 * model: min(k, interval)*unit + k*promoted_unit (interval 0: k*unit). */
double precis_accumulation_gamma(const precis_spec *spec, long long k);

/* The smallest decimal of 3 significant digits that is >= v, as the double nearest it (v itself when
 * not positive and finite): the default gates are rounded up with it, so that the gate printed
 * (3 digits, e.g. "1.01e-18") is exactly the gate applied and never below the bound. */
double precis_round_up_3_digits(double v);

/* The default gate of a recipe spec for a reduction length k (docs/criteria.md says where each
 * comes from). */
void precis_default_criteria(const precis_spec *spec, long long k, precis_criteria *out);

/* Evaluates every criterion on the worst values. A criterion on a null metric: sqnr_db null means
 * exact (passes any lower bound); a logit metric (kl_mean, top1_agree, ...) is null on rows whose
 * output is not logits and does not apply to them; other nulls fail. Returns true when all pass. When one fails,
 * `failed_index` receives the first failing criterion and `margin` how far it missed, as a
 * ratio >= 1 (value/limit for upper bounds, limit/value for lower bounds; inf when the limit is 0). */
bool precis_criteria_check(const precis_criteria *criteria, const precis_metric_value values[PRECIS_METRIC_ALL],
                           size_t *failed_index, double *margin);

#endif
