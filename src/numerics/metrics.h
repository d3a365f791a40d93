/* Error metrics of DESIGN §5, computed per held-out sample in float64, reported as the worst and
 * the mean over samples. */
#ifndef PRECIS_METRICS_H
#define PRECIS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum precis_metric_id {
  PRECIS_METRIC_MAX_ABS,
  PRECIS_METRIC_MAX_REL,
  PRECIS_METRIC_REL_FRO,
  PRECIS_METRIC_RMSE,
  PRECIS_METRIC_SQNR_DB,
  PRECIS_METRIC_COSINE,
  PRECIS_METRIC_MEAN_ERR,
  PRECIS_METRIC_MAX_CW,
  PRECIS_METRIC_NONFINITE,
  PRECIS_METRIC_CLIPPED,
  PRECIS_METRIC_COUNT, /* the error metrics above: every row has them (report.json's "error") */
  /* Logit metrics (docs/criteria.md): only rows of a workload whose output is logits (the dataset's
   * output_kind = "logits", precis import --model's lm_head) have them (report.json's "logits").
   * Each row of the [tokens, vocab] output is one token's logits; softmax in float64. */
  PRECIS_METRIC_KL_MEAN = PRECIS_METRIC_COUNT, /* KL(ref||q) per token, mean over the sample's tokens */
  PRECIS_METRIC_KL_P99,                        /* its 99th percentile (NumPy's linear interpolation) */
  PRECIS_METRIC_KL_MAX,
  PRECIS_METRIC_RKL_MEAN,                      /* KL(q||ref), the other direction */
  PRECIS_METRIC_RKL_P99,
  PRECIS_METRIC_RKL_MAX,
  PRECIS_METRIC_TOP1_AGREE,                    /* fraction of tokens whose argmax (first of ties) agrees */
  PRECIS_METRIC_ALL                            /* error metrics and logit metrics */
} precis_metric_id;

#define PRECIS_LOGIT_METRIC_FIRST PRECIS_METRIC_KL_MEAN

typedef enum precis_metric_sense {
  PRECIS_LOWER_IS_BETTER,  /* worst = max */
  PRECIS_HIGHER_IS_BETTER, /* worst = min (sqnr_db, cosine) */
  PRECIS_NEARER_ZERO,      /* worst = largest magnitude, sign kept (mean_err) */
} precis_metric_sense;

typedef struct precis_metric_def {
  precis_metric_id id;
  const char *key; /* the JSON key and the name used in criteria */
  precis_metric_sense sense;
  const char *definition;
} precis_metric_def;

/* Both cover the logit metrics too (ids up to PRECIS_METRIC_ALL). */
const precis_metric_def *precis_metric_get(precis_metric_id id);
const precis_metric_def *precis_metric_by_key(const char *key); /* NULL when unknown */
static inline bool precis_metric_is_logit(precis_metric_id id) {
  return id >= PRECIS_LOGIT_METRIC_FIRST && id < PRECIS_METRIC_ALL;
}

/* present == false is JSON null (e.g. sqnr_db when the output is exact, cosine of a zero vector). */
typedef struct precis_metric_value {
  double worst;
  double mean;
  bool present;
} precis_metric_value;

/* Metrics of one sample. c: evaluated output (m*n, float32 as widened from the recipe's output);
 * r: c_ref; ab: |a|·|b|. `present` flags follow the definitions (sqnr null when exact). */
typedef struct precis_sample_metrics {
  double v[PRECIS_METRIC_ALL];
  bool present[PRECIS_METRIC_ALL];
} precis_sample_metrics;

void precis_metrics_sample(const float *c, const double *r, const double *ab, size_t count,
                           precis_sample_metrics *out);
/* The same with an output in float64 (c64, used instead of c when not NULL) and a reference held
 * as an unevaluated pair r + r_lo (double-double; r_lo NULL: r alone). The error is (c - r) - r_lo,
 * so errors far below float64's unit roundoff of r (down to about 1e-30 relative) are measured. */
void precis_metrics_sample_wide(const float *c, const double *c64, const double *r, const double *r_lo,
                                const double *ab, size_t count, precis_sample_metrics *out);
/* The logit metrics of one sample: c (or c64) and r (+ r_lo) hold `tokens` rows of `vocab` logits.
 * Per token, in float64: log p = x - max - log(sum exp(x - max)); KL(ref||q) = sum p_ref (log p_ref -
 * log p_q), KL(q||ref) the other way; then mean, p99 and max over the tokens, and the fraction of
 * tokens whose argmax (the first of tied maxima) agrees. A token with a non-finite logit in c has
 * KL = inf (and disagrees). Sets only the logit entries of *out. scratch: 2*tokens doubles. */
void precis_metrics_logits(const float *c, const double *c64, const double *r, const double *r_lo, size_t tokens,
                           size_t vocab, double *scratch, precis_sample_metrics *out);
/* The per-token quantities of verify's end-to-end figures (python/precis/endtoend.py, kld.py), one
 * row of PRECIS_TOKEN_COLUMNS doubles per token, in this order (api/api_token_stats.c
 * checks that it is precis/token_stats.h's). Per token, in float64 from r
 * (the reference's logits: r32 float32, or r64 float64 when not NULL) and q (q32 / q64):
 * lp = x - max - log(sum exp(x - max)) for each; p = exp(lp); KL(ref||q) = sum p (lp - lq) and the
 * reverse (not clamped: a sum of rounded terms may end a few ulps below zero); top-1 agreement of the
 * argmaxes (the first of tied maxima) as 0/1; the share of shared ids among each side's top
 * min(5, vocab) (ties to the lower id); Jensen-Shannon in nats with m = (p + q)/2, terms with p = 0
 * (q = 0) left out; the reference's top probability exp(max lp); and, where labels[t] >= 0 (labels
 * NULL: none), -lp and -lq at the label and the label's 0-based rank in each (ties: lower ids first),
 * else NaN and -1. Sums run in blocks of 128 terms (error about (128 + vocab/128) ulps, as close as
 * NumPy's pairwise sums). finite[t] = 0 (and the row untouched) when a logit of the token is not
 * finite: the caller's own arithmetic decides what NaN and inf give. scratch: 4 * vocab doubles. */
enum {
  PRECIS_TOKEN_KL,
  PRECIS_TOKEN_RKL,
  PRECIS_TOKEN_TOP1,
  PRECIS_TOKEN_TOP5,
  PRECIS_TOKEN_JSD,
  PRECIS_TOKEN_CONF,
  PRECIS_TOKEN_CE_REF,
  PRECIS_TOKEN_CE_Q,
  PRECIS_TOKEN_RANK_REF,
  PRECIS_TOKEN_RANK_Q,
  PRECIS_TOKEN_COLUMNS
};
void precis_metrics_token_stats(const float *r32, const double *r64, const float *q32, const double *q64, size_t tokens,
                              size_t vocab, const int64_t *labels, double *scratch, double *out, unsigned char *finite);

/* Worst and mean over samples (the logit metrics too when samples[0] has them); `clipped` (a property of the quantized inputs, not of one sample) is
 * set by the caller afterwards. */
void precis_metrics_aggregate(const precis_sample_metrics *samples, size_t n_samples,
                              precis_metric_value out[PRECIS_METRIC_ALL]);

/* Percentile (0..100) of sorted values, linear interpolation between closest ranks (NumPy's default):
 * the latency statistics of timing.c, accept and recommend's noise interval. */
double precis_percentile_sorted(const double *sorted, size_t n, double pct);

#endif
