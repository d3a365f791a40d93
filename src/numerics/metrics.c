#include "metrics.h"
#include "token_math.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const precis_metric_def metric_defs[PRECIS_METRIC_ALL] = {
    [PRECIS_METRIC_MAX_ABS] = {PRECIS_METRIC_MAX_ABS, "max_abs", PRECIS_LOWER_IS_BETTER, "max |c-r|"},
    [PRECIS_METRIC_MAX_REL] = {PRECIS_METRIC_MAX_REL, "max_rel", PRECIS_LOWER_IS_BETTER,
                               "max |c-r| / max(|r|, 1e-3*rms(r))"},
    [PRECIS_METRIC_REL_FRO] = {PRECIS_METRIC_REL_FRO, "rel_fro", PRECIS_LOWER_IS_BETTER, "||c-r||_F / ||r||_F"},
    [PRECIS_METRIC_RMSE] = {PRECIS_METRIC_RMSE, "rmse", PRECIS_LOWER_IS_BETTER, "sqrt(mean((c-r)^2))"},
    [PRECIS_METRIC_SQNR_DB] = {PRECIS_METRIC_SQNR_DB, "sqnr_db", PRECIS_HIGHER_IS_BETTER,
                               "-20*log10(rel_fro), null when exact"},
    [PRECIS_METRIC_COSINE] = {PRECIS_METRIC_COSINE, "cosine", PRECIS_HIGHER_IS_BETTER, "<c,r> / (||c|| ||r||)"},
    [PRECIS_METRIC_MEAN_ERR] = {PRECIS_METRIC_MEAN_ERR, "mean_err", PRECIS_NEARER_ZERO, "mean(c-r), signed"},
    [PRECIS_METRIC_MAX_CW] = {PRECIS_METRIC_MAX_CW, "max_cw", PRECIS_LOWER_IS_BETTER,
                              "max |c-r| / (|a|.|b|); elements with |a|.|b| = 0 must be exact"},
    [PRECIS_METRIC_NONFINITE] = {PRECIS_METRIC_NONFINITE, "nonfinite", PRECIS_LOWER_IS_BETTER,
                                 "count of NaN/inf in c"},
    [PRECIS_METRIC_CLIPPED] = {PRECIS_METRIC_CLIPPED, "clipped", PRECIS_LOWER_IS_BETTER,
                               "fraction of quantized inputs that saturated (int8, fp8)"},
    [PRECIS_METRIC_KL_MEAN] = {PRECIS_METRIC_KL_MEAN, "kl_mean", PRECIS_LOWER_IS_BETTER,
                               "logits: mean over tokens of KL(ref||q) = sum p_ref (log p_ref - log p_q)"},
    [PRECIS_METRIC_KL_P99] = {PRECIS_METRIC_KL_P99, "kl_p99", PRECIS_LOWER_IS_BETTER,
                              "logits: 99th percentile over tokens of KL(ref||q)"},
    [PRECIS_METRIC_KL_MAX] = {PRECIS_METRIC_KL_MAX, "kl_max", PRECIS_LOWER_IS_BETTER, "logits: max over tokens of KL(ref||q)"},
    [PRECIS_METRIC_RKL_MEAN] = {PRECIS_METRIC_RKL_MEAN, "rkl_mean", PRECIS_LOWER_IS_BETTER,
                                "logits: mean over tokens of KL(q||ref)"},
    [PRECIS_METRIC_RKL_P99] = {PRECIS_METRIC_RKL_P99, "rkl_p99", PRECIS_LOWER_IS_BETTER,
                               "logits: 99th percentile over tokens of KL(q||ref)"},
    [PRECIS_METRIC_RKL_MAX] = {PRECIS_METRIC_RKL_MAX, "rkl_max", PRECIS_LOWER_IS_BETTER, "logits: max over tokens of KL(q||ref)"},
    [PRECIS_METRIC_TOP1_AGREE] = {PRECIS_METRIC_TOP1_AGREE, "top1_agree", PRECIS_HIGHER_IS_BETTER,
                                  "logits: fraction of tokens whose argmax (first of ties) agrees with the reference's"},
};

const precis_metric_def *precis_metric_get(precis_metric_id id) {
  if ((unsigned)id >= PRECIS_METRIC_ALL) return NULL;
  return &metric_defs[id];
}

const precis_metric_def *precis_metric_by_key(const char *key) {
  for (int i = 0; i < PRECIS_METRIC_ALL; i++)
    if (strcmp(metric_defs[i].key, key) == 0) return &metric_defs[i];
  return NULL;
}

void precis_metrics_sample(const float *c, const double *r, const double *ab, size_t count,
                           precis_sample_metrics *out) {
  precis_metrics_sample_wide(c, NULL, r, NULL, ab, count, out);
}

void precis_metrics_sample_wide(const float *c, const double *c64, const double *r, const double *r_lo,
                                const double *ab, size_t count, precis_sample_metrics *out) {
  for (int m = PRECIS_METRIC_COUNT; m < PRECIS_METRIC_ALL; m++) out->v[m] = NAN, out->present[m] = false;
  double max_abs = 0, sum_sq_err = 0, sum_sq_r = 0, sum_sq_c = 0, dot = 0, sum_err = 0, max_cw = 0;
  long long nonfinite = 0;
  for (size_t i = 0; i < count; i++) {
    double ri = r[i];
    sum_sq_r += ri * ri;
  }
  double rms_r = count ? sqrt(sum_sq_r / (double)count) : 0.0;
  double rel_floor = 1e-3 * rms_r;
  double max_rel = 0;
  for (size_t i = 0; i < count; i++) {
    double ci = c64 ? c64[i] : (double)c[i], ri = r[i];
    if (!isfinite(ci)) {
      /* A non-finite output is infinitely wrong: every error metric says so. */
      nonfinite++;
      max_abs = max_rel = max_cw = INFINITY;
      sum_sq_err = INFINITY;
      sum_err = isnan(ci) ? NAN : sum_err + (ci - ri);
      continue;
    }
    /* c - r is exact when c is near r (Sterbenz), so the low part of the reference still counts. */
    double d = r_lo ? (ci - ri) - r_lo[i] : ci - ri, ad = fabs(d);
    if (ad > max_abs) max_abs = ad;
    double denom = fmax(fabs(ri), rel_floor);
    double rel = denom > 0 ? ad / denom : (ad > 0 ? INFINITY : 0.0);
    if (rel > max_rel) max_rel = rel;
    double cw = ab[i] > 0 ? ad / ab[i] : (ad > 0 ? INFINITY : 0.0);
    if (cw > max_cw) max_cw = cw;
    sum_sq_err += d * d;
    sum_sq_c += ci * ci;
    dot += ci * ri;
    sum_err += d;
  }
  memset(out, 0, sizeof *out);
  double n = count ? (double)count : 1.0;
  double norm_err = sqrt(sum_sq_err), norm_r = sqrt(sum_sq_r), norm_c = sqrt(sum_sq_c);
  double rel_fro = norm_r > 0 ? norm_err / norm_r : (norm_err > 0 ? INFINITY : 0.0);
  out->v[PRECIS_METRIC_MAX_ABS] = max_abs;
  out->v[PRECIS_METRIC_MAX_REL] = max_rel;
  out->v[PRECIS_METRIC_REL_FRO] = rel_fro;
  out->v[PRECIS_METRIC_RMSE] = sqrt(sum_sq_err / n);
  out->v[PRECIS_METRIC_SQNR_DB] = rel_fro > 0 ? -20.0 * log10(rel_fro) : NAN;
  out->present[PRECIS_METRIC_SQNR_DB] = rel_fro > 0; /* null when exact */
  if (nonfinite) out->v[PRECIS_METRIC_COSINE] = NAN;
  else if (norm_c > 0 && norm_r > 0) out->v[PRECIS_METRIC_COSINE] = dot / (norm_c * norm_r);
  else out->v[PRECIS_METRIC_COSINE] = (norm_c == 0 && norm_r == 0) ? 1.0 : 0.0;
  out->v[PRECIS_METRIC_MEAN_ERR] = sum_err / n;
  out->v[PRECIS_METRIC_MAX_CW] = max_cw;
  out->v[PRECIS_METRIC_NONFINITE] = (double)nonfinite;
  out->v[PRECIS_METRIC_CLIPPED] = NAN;
  for (int m = 0; m < PRECIS_METRIC_COUNT; m++)
    if (m != PRECIS_METRIC_SQNR_DB && m != PRECIS_METRIC_CLIPPED) out->present[m] = !isnan(out->v[m]);
}

void precis_metrics_aggregate(const precis_sample_metrics *samples, size_t n_samples,
                              precis_metric_value out[PRECIS_METRIC_ALL]) {
  for (int m = 0; m < PRECIS_METRIC_ALL; m++) {
    precis_metric_sense sense = metric_defs[m].sense;
    double worst = NAN, sum = 0;
    size_t present = 0;
    for (size_t s = 0; s < n_samples; s++) {
      if (!samples[s].present[m]) continue;
      double v = samples[s].v[m];
      /* A NaN (a sample whose figure is undefined, e.g. an interpolation into non-finite values)
       * is the worst whatever the sense, and stays so: comparisons with NaN are false, so without
       * this the sample order would decide whether a gate sees it. */
      if (present == 0 || isnan(v)) worst = v;
      else if (isnan(worst)) {
      } else if (sense == PRECIS_LOWER_IS_BETTER && v > worst) worst = v;
      else if (sense == PRECIS_HIGHER_IS_BETTER && v < worst) worst = v;
      else if (sense == PRECIS_NEARER_ZERO && fabs(v) > fabs(worst)) worst = v;
      sum += v;
      present++;
    }
    /* sqnr_db: a sample without a value was exact, the best possible. Worst and mean are over the
     * inexact samples; all exact leaves it null. */
    out[m].present = present > 0;
    out[m].worst = present ? worst : NAN;
    out[m].mean = present ? sum / (double)present : NAN;
  }
}

static int compare_doubles(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return a < b ? -1 : a > b ? 1 : 0;
}

/* log-softmax pieces of one token's logits x (x_lo added when not NULL): the max, the index of the
 * first maximum, and log(sum exp(x - max)). False when a logit is not finite. */
static bool token_softmax(const float *c, const double *c64, const double *lo, size_t vocab, double *max, size_t *arg,
                          double *log_sum) {
  double best = -INFINITY;
  size_t at = 0;
  for (size_t v = 0; v < vocab; v++) {
    double x = c64 ? c64[v] : (double)c[v];
    if (lo) x += lo[v];
    if (!isfinite(x)) return false;
    if (v == 0 || x > best) best = x, at = v;
  }
  double sum = 0;
  for (size_t v = 0; v < vocab; v++) {
    double x = (c64 ? c64[v] : (double)c[v]) + (lo ? lo[v] : 0);
    sum += exp(x - best);
  }
  *max = best;
  *arg = at;
  *log_sum = log(sum);
  return true;
}

void precis_metrics_logits(const float *c, const double *c64, const double *r, const double *r_lo, size_t tokens,
                           size_t vocab, double *scratch, precis_sample_metrics *out) {
  double *kl = scratch, *rkl = scratch + tokens;
  size_t agree = 0;
  for (size_t t = 0; t < tokens; t++) {
    const size_t row = t * vocab;
    double r_max, r_log_sum, q_max, q_log_sum;
    size_t r_arg, q_arg;
    bool r_ok = token_softmax(NULL, r + row, r_lo ? r_lo + row : NULL, vocab, &r_max, &r_arg, &r_log_sum);
    bool q_ok = token_softmax(c64 ? NULL : c + row, c64 ? c64 + row : NULL, NULL, vocab, &q_max, &q_arg, &q_log_sum);
    if (!r_ok || !q_ok) {
      /* A non-finite logit: the evaluated distribution is not a distribution (the reference's
       * logits are always finite, a product of finite inputs). */
      kl[t] = rkl[t] = INFINITY;
      continue;
    }
    double forward = 0, reverse = 0;
    for (size_t v = 0; v < vocab; v++) {
      double lp = r[row + v] + (r_lo ? r_lo[row + v] : 0) - r_max - r_log_sum;
      double lq = (c64 ? c64[row + v] : (double)c[row + v]) - q_max - q_log_sum;
      forward += exp(lp) * (lp - lq);
      reverse += exp(lq) * (lq - lp);
    }
    /* KL >= 0; a sum of rounded terms can end a few ulps below zero when the two agree. */
    kl[t] = forward > 0 ? forward : 0;
    rkl[t] = reverse > 0 ? reverse : 0;
    agree += r_arg == q_arg;
  }
  const precis_metric_id ids[2][3] = {{PRECIS_METRIC_KL_MEAN, PRECIS_METRIC_KL_P99, PRECIS_METRIC_KL_MAX},
                                      {PRECIS_METRIC_RKL_MEAN, PRECIS_METRIC_RKL_P99, PRECIS_METRIC_RKL_MAX}};
  double *values[2] = {kl, rkl};
  for (int d = 0; d < 2; d++) {
    double sum = 0;
    for (size_t t = 0; t < tokens; t++) sum += values[d][t];
    qsort(values[d], tokens, sizeof(double), compare_doubles);
    out->v[ids[d][0]] = tokens ? sum / (double)tokens : NAN;
    out->v[ids[d][1]] = precis_percentile_sorted(values[d], tokens, 99.0);
    out->v[ids[d][2]] = tokens ? values[d][tokens - 1] : NAN;
    for (int i = 0; i < 3; i++) out->present[ids[d][i]] = tokens > 0;
  }
  out->v[PRECIS_METRIC_TOP1_AGREE] = tokens ? (double)agree / (double)tokens : NAN;
  out->present[PRECIS_METRIC_TOP1_AGREE] = tokens > 0;
}

/* The k largest of a row kept in descending order, ties to the lower id: a value enters only when
 * strictly above the k-th kept, so an equal one met later (a higher id) stays out. */
#define TOKEN_TOP_K 5
typedef struct top_list {
  double value[TOKEN_TOP_K];
  size_t id[TOKEN_TOP_K];
  size_t count, k;
} top_list;

static void top_insert(top_list *t, double x, size_t id) {
  if (t->count == t->k && !(x > t->value[t->k - 1])) return;
  size_t at = t->count < t->k ? t->count++ : t->k - 1;
  while (at > 0 && x > t->value[at - 1]) {
    t->value[at] = t->value[at - 1];
    t->id[at] = t->id[at - 1];
    at--;
  }
  t->value[at] = x;
  t->id[at] = id;
}

/* A sum in blocks of 128 terms: each block summed alone, then the block sums. */
typedef struct block_sum {
  double total, block;
  unsigned count;
} block_sum;

static inline void block_add(block_sum *s, double x) {
  s->block += x;
  if (++s->count == 128) {
    s->total += s->block;
    s->block = 0;
    s->count = 0;
  }
}

static inline double block_total(const block_sum *s) { return s->total + s->block; }

/* The per-token loops, compiled for AVX2 and the baseline ISA and picked at load time. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define TOKEN_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TOKEN_VECTOR_CLONES
#endif

/* The terms of one block of (at most) 128 logits: e^(x - best) into p[], x - best into lp[]. */
TOKEN_VECTOR_CLONES static void softmax_block(const float *x32, const double *x64, size_t n, double best, double *lp,
                                              double *p) {
  if (x64)
    for (size_t v = 0; v < n; v++) lp[v] = x64[v] - best;
  else
    for (size_t v = 0; v < n; v++) lp[v] = (double)x32[v] - best;
  for (size_t v = 0; v < n; v++) p[v] = token_exp_nonpositive(lp[v]);
}

TOKEN_VECTOR_CLONES static void softmax_normalize(double *lp, double *p, size_t vocab, double log_sum, double total) {
  for (size_t v = 0; v < vocab; v++) {
    lp[v] -= log_sum;
    p[v] /= total;
  }
}

/* lp of one token's logits (float32 or float64) into lp[] and p = exp(lp) into p[] (as exp(x - max)
 * / sum: the same value to an ulp, without a second exp); false when a logit is not finite. */
static bool token_log_softmax(const float *x32, const double *x64, size_t vocab, double *lp, double *p) {
  double best = -INFINITY;
  for (size_t v = 0; v < vocab; v++) {
    double x = x64 ? x64[v] : (double)x32[v];
    if (!isfinite(x)) return false;
    if (x > best) best = x;
  }
  block_sum sum = {0, 0, 0};
  for (size_t v0 = 0; v0 < vocab; v0 += 128) {
    const size_t n = vocab - v0 < 128 ? vocab - v0 : 128;
    softmax_block(x64 ? NULL : x32 + v0, x64 ? x64 + v0 : NULL, n, best, lp + v0, p + v0);
    for (size_t v = v0; v < v0 + n; v++) block_add(&sum, p[v]);
  }
  const double total = block_total(&sum), log_sum = log(total);
  softmax_normalize(lp, p, vocab, log_sum, total);
  return true;
}

/* One block's terms of KL(p||q), KL(q||p) and the two halves of Jensen-Shannon: log m = log((p +
 * q) / 2) from the larger side, lp + log((1 + q/p) / 2), which is lp itself where p = q (a JSD of
 * exactly 0 for equal distributions, as NumPy's logaddexp gives); 0 where p (or q) is 0. */
TOKEN_VECTOR_CLONES static void divergence_block(const double *restrict lp, const double *restrict lq,
                                                 const double *restrict pp, const double *restrict pq, size_t n,
                                                 double *restrict kl, double *restrict rkl, double *restrict jsd_p,
                                                 double *restrict jsd_q) {
  for (size_t v = 0; v < n; v++) {
    const double p = pp[v], q = pq[v];
    kl[v] = p * (lp[v] - lq[v]);
    rkl[v] = q * (lq[v] - lp[v]);
    /* The smaller over the larger (0 when both are 0), as selects and one division: the loop stays
     * free of branches. */
    const double larger = p >= q ? p : q, smaller = p >= q ? q : p, l_larger = p >= q ? lp[v] : lq[v];
    const double ratio = smaller / (larger > 0 ? larger : 1.0);
    const double lm = l_larger + token_log_half_to_one(0.5 * (1.0 + ratio));
    jsd_p[v] = p * (lp[v] - lm);
    jsd_q[v] = q * (lq[v] - lm);
  }
}

static double label_rank(const double *lp, size_t vocab, size_t label) {
  const double at = lp[label];
  size_t rank = 0;
  for (size_t v = 0; v < vocab; v++) rank += lp[v] > at || (lp[v] == at && v < label);
  return (double)rank;
}

void precis_metrics_token_stats(const float *r32, const double *r64, const float *q32, const double *q64, size_t tokens,
                              size_t vocab, const int64_t *labels, double *scratch, double *out, unsigned char *finite) {
  double *lp = scratch, *lq = scratch + vocab, *pp = scratch + 2 * vocab, *pq = scratch + 3 * vocab;
  const size_t k = vocab < TOKEN_TOP_K ? vocab : TOKEN_TOP_K;
  for (size_t t = 0; t < tokens; t++) {
    const size_t row = t * vocab;
    double *o = out + t * PRECIS_TOKEN_COLUMNS;
    finite[t] = token_log_softmax(r64 ? NULL : r32 + row, r64 ? r64 + row : NULL, vocab, lp, pp) &&
                token_log_softmax(q64 ? NULL : q32 + row, q64 ? q64 + row : NULL, vocab, lq, pq);
    if (!finite[t]) continue;
    block_sum kl = {0, 0, 0}, rkl = {0, 0, 0}, jsd_p = {0, 0, 0}, jsd_q = {0, 0, 0};
    top_list top_r = {.k = k}, top_q = {.k = k};
    double t_kl[128], t_rkl[128], t_jp[128], t_jq[128];
    for (size_t v0 = 0; v0 < vocab; v0 += 128) {
      const size_t n = vocab - v0 < 128 ? vocab - v0 : 128;
      divergence_block(lp + v0, lq + v0, pp + v0, pq + v0, n, t_kl, t_rkl, t_jp, t_jq);
      for (size_t i = 0; i < n; i++) {
        block_add(&kl, t_kl[i]);
        block_add(&rkl, t_rkl[i]);
        block_add(&jsd_p, t_jp[i]);
        block_add(&jsd_q, t_jq[i]);
      }
    }
    for (size_t v = 0; v < vocab; v++) {
      top_insert(&top_r, lp[v], v);
      top_insert(&top_q, lq[v], v);
    }
    size_t shared = 0;
    for (size_t i = 0; i < k; i++)
      for (size_t j = 0; j < k; j++) shared += top_r.id[i] == top_q.id[j];
    o[PRECIS_TOKEN_KL] = block_total(&kl);
    o[PRECIS_TOKEN_RKL] = block_total(&rkl);
    o[PRECIS_TOKEN_TOP1] = top_r.id[0] == top_q.id[0] ? 1.0 : 0.0;
    o[PRECIS_TOKEN_TOP5] = (double)shared / (double)k;
    o[PRECIS_TOKEN_JSD] = 0.5 * block_total(&jsd_p) + 0.5 * block_total(&jsd_q);
    o[PRECIS_TOKEN_CONF] = exp(top_r.value[0]);
    const bool labelled = labels && labels[t] >= 0 && (uint64_t)labels[t] < (uint64_t)vocab;
    const size_t label = labelled ? (size_t)labels[t] : 0;
    o[PRECIS_TOKEN_CE_REF] = labelled ? -lp[label] : NAN;
    o[PRECIS_TOKEN_CE_Q] = labelled ? -lq[label] : NAN;
    o[PRECIS_TOKEN_RANK_REF] = labelled ? label_rank(lp, vocab, label) : -1.0;
    o[PRECIS_TOKEN_RANK_Q] = labelled ? label_rank(lq, vocab, label) : -1.0;
  }
}

double precis_percentile_sorted(const double *sorted, size_t n, double pct) {
  if (n == 0) return NAN;
  double pos = pct / 100.0 * (double)(n - 1);
  size_t lo = (size_t)floor(pos);
  size_t hi = lo + 1 < n ? lo + 1 : lo;
  double frac = pos - (double)lo;
  /* Exact positions and equal neighbours need no interpolation, which would turn an infinite value
   * into NaN (inf - inf, or inf * 0); a step toward infinity is infinite. */
  if (frac == 0 || sorted[hi] == sorted[lo]) return sorted[lo];
  if (isinf(sorted[hi])) return sorted[hi];
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
