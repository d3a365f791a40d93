#include "criteria.h"

#include "format.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *precis_cmp_str(precis_cmp op) {
  switch (op) {
  case PRECIS_CMP_LE: return "<=";
  case PRECIS_CMP_LT: return "<";
  case PRECIS_CMP_GE: return ">=";
  case PRECIS_CMP_GT: return ">";
  case PRECIS_CMP_EQ: return "==";
  }
  return "?";
}

precis_status precis_criterion_parse(const char *text, precis_criterion *out) {
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  const char *key_start = p;
  while (isalnum((unsigned char)*p) || *p == '_') p++;
  size_t key_len = (size_t)(p - key_start);
  char key[32];
  if (key_len == 0 || key_len >= sizeof key)
    return precis_fail(PRECIS_E_USAGE, "criterion \"%s\": expected METRIC OP NUMBER, e.g. rel_fro<=1e-2", text);
  memcpy(key, key_start, key_len);
  key[key_len] = '\0';
  const precis_metric_def *def = precis_metric_by_key(key);
  if (!def)
    return precis_fail(PRECIS_E_USAGE,
                       "criterion \"%s\": unknown metric \"%s\" (expected max_abs, max_rel, rel_fro, rmse, sqnr_db, "
                       "cosine, mean_err, max_cw, nonfinite, clipped; on logit rows kl_mean, kl_p99, kl_max, rkl_mean, "
                       "rkl_p99, rkl_max, top1_agree)",
                       text, key);
  while (isspace((unsigned char)*p)) p++;
  precis_cmp op;
  if (strncmp(p, "<=", 2) == 0) op = PRECIS_CMP_LE, p += 2;
  else if (strncmp(p, ">=", 2) == 0) op = PRECIS_CMP_GE, p += 2;
  else if (strncmp(p, "==", 2) == 0) op = PRECIS_CMP_EQ, p += 2;
  else if (*p == '<') op = PRECIS_CMP_LT, p += 1;
  else if (*p == '>') op = PRECIS_CMP_GT, p += 1;
  else
    return precis_fail(PRECIS_E_USAGE, "criterion \"%s\": expected one of <=, <, >=, >, == after \"%s\"", text, key);
  while (isspace((unsigned char)*p)) p++;
  if (*p == '\0') return precis_fail(PRECIS_E_USAGE, "criterion \"%s\": expected a number after the operator", text);
  char *end = NULL;
  errno = 0;
  double value = strtod(p, &end);
  if (end == p || errno == ERANGE || !isfinite(value))
    return precis_fail(PRECIS_E_USAGE, "criterion \"%s\": \"%s\" is not a finite number", text, p);
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return precis_fail(PRECIS_E_USAGE, "criterion \"%s\": unexpected \"%s\" after the number", text, end);
  out->metric = def->id;
  out->op = op;
  out->value = value;
  return PRECIS_OK;
}

static void shortest_double(double v, char *buf, size_t len) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

void precis_criterion_format(const precis_criterion *c, char *buf, size_t len) {
  char num[40];
  shortest_double(c->value, num, sizeof num);
  snprintf(buf, len, "%s%s%s", precis_metric_get(c->metric)->key, precis_cmp_str(c->op), num);
}

double precis_round_up_3_digits(double v) {
  if (!(v > 0) || !isfinite(v)) return v;
  /* The nearest 3-digit decimal d, in text (printf rounds the exact binary value correctly), and the
   * double nearest it. Rounding is monotone, so double(d) < v only when d < v; then the next decimal
   * up is above v (v is within half a step of d) and so is its double. Scaling by powers of ten in
   * binary instead would round on the way and could land below v. */
  char buf[40];
  snprintf(buf, sizeof buf, "%.2e", v); /* "d.dde±XX" */
  double printed = strtod(buf, NULL);
  if (printed >= v) return printed;
  int digits = (buf[0] - '0') * 100 + (buf[2] - '0') * 10 + (buf[3] - '0') + 1;
  int exponent = atoi(buf + 5);
  if (digits == 1000) digits = 100, exponent++;
  snprintf(buf, sizeof buf, "%d.%02de%d", digits / 100, digits % 100, exponent);
  return strtod(buf, NULL);
}

/* Hopper fp8 tensor cores: about 13-14 fraction bits between promotions (criteria.h). 2^-13 is the
 * coarser of the two, and the bound's doubling for truncation covers a truncating 13-bit sum. */
#define FP8_ACC_UNIT 0x1p-13
#define FP8_ACC_INTERVAL 128

static bool is_fp8(precis_format_id fmt) { return fmt == PRECIS_FMT_E4M3 || fmt == PRECIS_FMT_E5M2; }

precis_accumulation precis_spec_accumulation(const precis_spec *spec) {
  const precis_format *acc = precis_format_get(spec->acc);
  /* FAST_ACCUM: no promotion, the whole k in the narrow accumulator (docs/formats.md). */
  if (spec->fast_accum) return (precis_accumulation){FP8_ACC_UNIT, 0, FP8_ACC_UNIT};
  if ((is_fp8(spec->a.fmt) || is_fp8(spec->b.fmt)) && spec->acc == PRECIS_FMT_F32)
    return (precis_accumulation){FP8_ACC_UNIT, FP8_ACC_INTERVAL, acc->unit_roundoff};
  return (precis_accumulation){acc->unit_roundoff, 0, acc->unit_roundoff};
}

double precis_accumulation_gamma(const precis_spec *spec, long long k) {
  precis_accumulation a = precis_spec_accumulation(spec);
  if (a.interval <= 0) return (double)k * a.unit;
  return (double)(k < a.interval ? k : a.interval) * a.unit + (double)k * a.promoted_unit;
}

static double operand_roundoff(const precis_operand_spec *op) {
  return op->fmt == PRECIS_FMT_F32 ? 0.0 : precis_format_get(op->fmt)->unit_roundoff;
}

void precis_default_criteria(const precis_spec *spec, long long k, precis_criteria *out) {
  memset(out, 0, sizeof *out);
  out->items[out->count++] = (precis_criterion){PRECIS_METRIC_NONFINITE, PRECIS_CMP_EQ, 0};
  bool a_int = precis_operand_is_integer(&spec->a), b_int = precis_operand_is_integer(&spec->b);
  if (a_int || b_int) {
    /* Quantization noise is relative to each row's/column's (group's) amax, not to each element, so
     * no componentwise bound exists. The gate leaves 3 of the narrowest integer operand's bits as
     * headroom: 2^-5 (about 30 dB SQNR) for 8 bits, which rejects outlier-dominated int8 rows, and
     * 2^-1 for 4-bit weights, whose round-to-nearest noise is about 0.1 (docs/criteria.md). */
    int bits = 64;
    if (a_int) bits = precis_format_get(spec->a.fmt)->storage_bits;
    if (b_int && precis_format_get(spec->b.fmt)->storage_bits < bits) bits = precis_format_get(spec->b.fmt)->storage_bits;
    out->items[out->count++] = (precis_criterion){PRECIS_METRIC_REL_FRO, PRECIS_CMP_LE, ldexp(1.0, -(bits - 3))};
    return;
  }
  /* Componentwise bound for a dot product of length K (Higham, Accuracy and Stability, §3.1):
   * inputs rounded to the input format (2u_in + u_in^2), K sums in the accumulation format
   * (gamma_K ~ K*u_acc, doubled because tensor cores may truncate instead of rounding; fp8 has its
   * own accumulation model, precis_accumulation_gamma), the output rounded once (u_out). Holds for
   * any summation order. */
  const precis_format *outf = precis_format_get(spec->out);
  double u_a = operand_roundoff(&spec->a), u_b = operand_roundoff(&spec->b);
  double u_in = u_a > u_b ? u_a : u_b;
  double input_error = 2 * u_in + u_in * u_in;
  /* Float splits of fp32 operands: what the terms miss per product. Each term after the first is at
   * most u_t of the one before (u_t = 2^-11 tf32, 2^-8 bf16) and the terms are exact products, so
   * a product loses the dropped pairs and the last term's rounding: tf32x3 and bf16x3 drop
   * small·small (u_t^2) and leave a residual of u_t^2 on each operand, 3 u_t^2 in all; bf16x6 drops
   * the pairs of level 3 and 4 (2 u_t^3 + u_t^4); bf16x9 holds every bit of an fp32 value. */
  if (spec->split == PRECIS_SPLIT_TF32X3) input_error = 3 * 0x1p-22;
  else if (spec->split == PRECIS_SPLIT_BF16X3) input_error = 3 * 0x1p-16;
  else if (spec->split == PRECIS_SPLIT_BF16X6) input_error = 3 * 0x1p-24;
  else if (spec->split == PRECIS_SPLIT_BF16X9) input_error = 0;
  double bound = input_error + 2.0 * precis_accumulation_gamma(spec, k) + outf->unit_roundoff;
  out->items[out->count++] = (precis_criterion){PRECIS_METRIC_MAX_CW, PRECIS_CMP_LE, precis_round_up_3_digits(bound)};
}

static bool compare(double v, precis_cmp op, double limit) {
  switch (op) {
  case PRECIS_CMP_LE: return v <= limit;
  case PRECIS_CMP_LT: return v < limit;
  case PRECIS_CMP_GE: return v >= limit;
  case PRECIS_CMP_GT: return v > limit;
  case PRECIS_CMP_EQ: return v == limit;
  }
  return false;
}

bool precis_criteria_check(const precis_criteria *criteria, const precis_metric_value values[PRECIS_METRIC_ALL],
                           size_t *failed_index, double *margin) {
  for (size_t i = 0; i < criteria->count; i++) {
    const precis_criterion *c = &criteria->items[i];
    const precis_metric_value *mv = &values[c->metric];
    double v;
    if (!mv->present && precis_metric_is_logit(c->metric)) continue; /* a row whose output is not logits */
    if (mv->present) v = mv->worst;
    else if (c->metric == PRECIS_METRIC_SQNR_DB) v = INFINITY; /* exact output */
    else if (c->metric == PRECIS_METRIC_CLIPPED) v = 0.0;      /* nothing was quantized */
    else v = NAN;                                              /* unknown: cannot pass */
    if (!isnan(v) && compare(v, c->op, c->value)) continue;
    if (failed_index) *failed_index = i;
    if (margin) {
      double lim = c->value, m;
      if (isnan(v)) m = INFINITY;
      else if (c->op == PRECIS_CMP_LE || c->op == PRECIS_CMP_LT || c->op == PRECIS_CMP_EQ)
        m = lim > 0 ? v / lim : INFINITY;
      else
        m = (v > 0 && lim > 0) ? lim / v : INFINITY;
      *margin = m;
    }
    return false;
  }
  return true;
}
