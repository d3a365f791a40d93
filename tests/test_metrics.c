/* Metrics of DESIGN §5 on hand-worked cases, and the criteria that judge them. */
#include <string.h>

#include "numerics/criteria.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/metrics.h"
#include "numerics/token_math.h"
#include "numerics/recipe.h"

TEST(exact_output_has_zero_error_and_null_sqnr) {
  float c[4] = {1, -2, 3, 0};
  double r[4] = {1, -2, 3, 0}, ab[4] = {1, 2, 3, 0};
  precis_sample_metrics m;
  precis_metrics_sample(c, r, ab, 4, &m);
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_ABS], 0, 0);
  CHECK_NEAR(m.v[PRECIS_METRIC_REL_FRO], 0, 0);
  CHECK(!m.present[PRECIS_METRIC_SQNR_DB]);
  CHECK_NEAR(m.v[PRECIS_METRIC_COSINE], 1.0, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_CW], 0, 0);
  CHECK_NEAR(m.v[PRECIS_METRIC_NONFINITE], 0, 0);
}

TEST(hand_worked_errors) {
  /* c - r = (0.5, 0, -1.5, 0): max_abs 1.5; ||d|| = sqrt(2.5); ||r|| = sqrt(1+4+9+16) = sqrt(30) */
  float c[4] = {1.5f, 2, 1.5f, 4};
  double r[4] = {1, 2, 3, 4}, ab[4] = {2, 4, 3, 8};
  precis_sample_metrics m;
  precis_metrics_sample(c, r, ab, 4, &m);
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_ABS], 1.5, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_REL_FRO], sqrt(2.5 / 30.0), 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_RMSE], sqrt(2.5 / 4), 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_SQNR_DB], -20 * log10(sqrt(2.5 / 30.0)), 1e-12);
  CHECK_NEAR(m.v[PRECIS_METRIC_MEAN_ERR], -1.0 / 4, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_REL], 0.5, 1e-15);     /* 0.5/1 vs 1.5/3 */
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_CW], 0.5, 1e-15);      /* 0.5/2 vs 1.5/3 */
  double dot = 1.5 * 1 + 2 * 2 + 1.5 * 3 + 4 * 4, nc = sqrt(1.5 * 1.5 + 4 + 2.25 + 16);
  CHECK_NEAR(m.v[PRECIS_METRIC_COSINE], dot / (nc * sqrt(30.0)), 1e-15);
}

TEST(max_rel_uses_the_rms_floor) {
  /* r = (0, 100): rms = sqrt(5000) = 70.7; floor 0.0707; an error of 0.01 on the zero gives 0.141 */
  float c[2] = {0.01f, 100};
  double r[2] = {0, 100}, ab[2] = {1, 100};
  precis_sample_metrics m;
  precis_metrics_sample(c, r, ab, 2, &m);
  CHECK_NEAR(m.v[PRECIS_METRIC_MAX_REL], (double)0.01f / (1e-3 * sqrt(5000.0)), 1e-12);
}

TEST(zero_scale_elements_must_be_exact) {
  float c[2] = {1e-30f, 0};
  double r[2] = {0, 0}, ab[2] = {0, 0};
  precis_sample_metrics m;
  precis_metrics_sample(c, r, ab, 2, &m);
  CHECK(isinf(m.v[PRECIS_METRIC_MAX_CW]));
}

TEST(nonfinite_outputs_are_counted_and_infinitely_wrong) {
  float c[3] = {INFINITY, NAN, 1};
  double r[3] = {1, 1, 1}, ab[3] = {1, 1, 1};
  precis_sample_metrics m;
  precis_metrics_sample(c, r, ab, 3, &m);
  CHECK_NEAR(m.v[PRECIS_METRIC_NONFINITE], 2, 0);
  CHECK(isinf(m.v[PRECIS_METRIC_MAX_ABS]));
  CHECK(isinf(m.v[PRECIS_METRIC_REL_FRO]));
  CHECK(m.present[PRECIS_METRIC_SQNR_DB] && m.v[PRECIS_METRIC_SQNR_DB] < 0 && isinf(m.v[PRECIS_METRIC_SQNR_DB]));
}

TEST(aggregation_keeps_the_worst_sample) {
  precis_sample_metrics s[3];
  memset(s, 0, sizeof s);
  double rel[3] = {1e-3, 5e-2, 2e-3}, sq[3] = {60, 26, 54}, me[3] = {0.1, -0.3, 0.2};
  for (int i = 0; i < 3; i++) {
    for (int k = 0; k < PRECIS_METRIC_COUNT; k++) s[i].present[k] = true;
    s[i].v[PRECIS_METRIC_REL_FRO] = rel[i];
    s[i].v[PRECIS_METRIC_SQNR_DB] = sq[i];
    s[i].v[PRECIS_METRIC_MEAN_ERR] = me[i];
  }
  s[0].present[PRECIS_METRIC_CLIPPED] = s[1].present[PRECIS_METRIC_CLIPPED] = s[2].present[PRECIS_METRIC_CLIPPED] = false;
  precis_metric_value v[PRECIS_METRIC_ALL];
  precis_metrics_aggregate(s, 3, v);
  CHECK_NEAR(v[PRECIS_METRIC_REL_FRO].worst, 5e-2, 0);
  CHECK_NEAR(v[PRECIS_METRIC_REL_FRO].mean, (1e-3 + 5e-2 + 2e-3) / 3, 1e-15);
  CHECK_NEAR(v[PRECIS_METRIC_SQNR_DB].worst, 26, 0);
  CHECK_NEAR(v[PRECIS_METRIC_MEAN_ERR].worst, -0.3, 0);
  CHECK(!v[PRECIS_METRIC_CLIPPED].present);
}

TEST(aggregation_skips_absent_samples) {
  /* Three samples from the metric code itself: exact, off by 0.5 in one element, off by 1. The exact
   * one has no sqnr_db; the mean and worst are over the other two, not over three (a zero or the
   * unset value of the exact sample must not enter the sum). */
  double r[4] = {1, 2, 3, 4}, ab[4] = {1, 2, 3, 4};
  float exact[4] = {1, 2, 3, 4}, half[4] = {1.5f, 2, 3, 4}, one[4] = {1, 2, 3, 5};
  precis_sample_metrics s[3];
  precis_metrics_sample(half, r, ab, 4, &s[0]);
  precis_metrics_sample(exact, r, ab, 4, &s[1]);
  precis_metrics_sample(one, r, ab, 4, &s[2]);
  CHECK(s[0].present[PRECIS_METRIC_SQNR_DB] && !s[1].present[PRECIS_METRIC_SQNR_DB] &&
        s[2].present[PRECIS_METRIC_SQNR_DB]);
  s[1].v[PRECIS_METRIC_SQNR_DB] = 1e9; /* whatever an absent slot holds, it is not a value */
  double sq_half = -20 * log10(0.5 / sqrt(30.0)), sq_one = -20 * log10(1.0 / sqrt(30.0));
  precis_metric_value v[PRECIS_METRIC_ALL];
  precis_metrics_aggregate(s, 3, v);
  CHECK(v[PRECIS_METRIC_SQNR_DB].present);
  CHECK_NEAR(v[PRECIS_METRIC_SQNR_DB].worst, sq_one, 1e-12);
  CHECK_NEAR(v[PRECIS_METRIC_SQNR_DB].mean, (sq_half + sq_one) / 2, 1e-12);
  /* The other metrics are present in all three: the exact sample's zero does enter their mean. */
  CHECK_NEAR(v[PRECIS_METRIC_MAX_ABS].mean, (0.5 + 0 + 1) / 3, 1e-15);
  CHECK_NEAR(v[PRECIS_METRIC_REL_FRO].mean, (0.5 + 0 + 1) / sqrt(30.0) / 3, 1e-15);
  /* The absent sample first: it must not become the initial worst either. */
  precis_sample_metrics t[2] = {s[1], s[0]};
  precis_metrics_aggregate(t, 2, v);
  CHECK_NEAR(v[PRECIS_METRIC_SQNR_DB].worst, sq_half, 1e-12);
  CHECK_NEAR(v[PRECIS_METRIC_SQNR_DB].mean, sq_half, 1e-12);
  /* Every sample exact: null, not 0 or NaN presented as a value. */
  precis_metrics_aggregate(&s[1], 1, v);
  CHECK(!v[PRECIS_METRIC_SQNR_DB].present);
}

TEST(criterion_parsing_and_formatting) {
  precis_criterion c;
  CHECK_OK(precis_criterion_parse("rel_fro<=1e-2", &c));
  CHECK(c.metric == PRECIS_METRIC_REL_FRO && c.op == PRECIS_CMP_LE && c.value == 1e-2);
  CHECK_OK(precis_criterion_parse(" sqnr_db >= 40 ", &c));
  CHECK(c.metric == PRECIS_METRIC_SQNR_DB && c.op == PRECIS_CMP_GE && c.value == 40);
  CHECK_OK(precis_criterion_parse("nonfinite==0", &c));
  CHECK(c.op == PRECIS_CMP_EQ);
  CHECK_OK(precis_criterion_parse("cosine>0.999", &c));
  CHECK(c.op == PRECIS_CMP_GT);
  char buf[64];
  precis_criterion_parse("max_cw<0.00125", &c);
  precis_criterion_format(&c, buf, sizeof buf);
  CHECK_STR(buf, "max_cw<0.00125");
  CHECK(precis_criterion_parse("relfro<=1", &c) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "relfro") != NULL);
  CHECK(precis_criterion_parse("rel_fro=1", &c) == PRECIS_E_USAGE);
  CHECK(precis_criterion_parse("rel_fro<=", &c) == PRECIS_E_USAGE);
  CHECK(precis_criterion_parse("rel_fro<=1x", &c) == PRECIS_E_USAGE);
  CHECK(precis_criterion_parse("rel_fro<=nan", &c) == PRECIS_E_USAGE);
  CHECK(precis_criterion_parse("", &c) == PRECIS_E_USAGE);
}

static void fill_ok(precis_metric_value v[PRECIS_METRIC_ALL]) {
  for (int i = 0; i < PRECIS_METRIC_COUNT; i++) v[i] = (precis_metric_value){0, 0, true};
  v[PRECIS_METRIC_SQNR_DB].present = false;
  v[PRECIS_METRIC_CLIPPED].present = false;
  v[PRECIS_METRIC_COSINE] = (precis_metric_value){1, 1, true};
}

TEST(criteria_check_and_margin) {
  precis_criteria cr = {0};
  precis_criterion_parse("rel_fro<=1e-2", &cr.items[cr.count++]);
  precis_criterion_parse("sqnr_db>=40", &cr.items[cr.count++]);
  precis_metric_value v[PRECIS_METRIC_ALL];
  fill_ok(v);
  size_t failed = 99;
  double margin = 0;
  CHECK(precis_criteria_check(&cr, v, &failed, &margin)); /* exact: sqnr null passes */
  v[PRECIS_METRIC_REL_FRO].worst = 3e-2;
  CHECK(!precis_criteria_check(&cr, v, &failed, &margin));
  CHECK_EQ_INT(failed, 0);
  CHECK_NEAR(margin, 3.0, 1e-12);
  v[PRECIS_METRIC_REL_FRO].worst = 1e-3;
  v[PRECIS_METRIC_SQNR_DB] = (precis_metric_value){20, 30, true};
  CHECK(!precis_criteria_check(&cr, v, &failed, &margin));
  CHECK_EQ_INT(failed, 1);
  CHECK_NEAR(margin, 2.0, 1e-12);
  v[PRECIS_METRIC_REL_FRO].present = false; /* an unknown value cannot pass */
  v[PRECIS_METRIC_SQNR_DB].worst = 50;
  CHECK(!precis_criteria_check(&cr, v, &failed, &margin));
}

/* Every default gate must be able to fail: a perturbed output is rejected by each. */
TEST(each_default_gate_rejects_a_perturbation) {
  for (int r = 0; r < PRESET_TABLE_COUNT; r++) {
    const precis_recipe *recipe = preset_recipe_of_table((size_t)r);
    precis_criteria cr;
    precis_default_criteria(&recipe->spec, 1024, &cr);
    CHECK(cr.count >= 2);
    precis_metric_value v[PRECIS_METRIC_ALL];
    fill_ok(v);
    CHECK_MSG(precis_criteria_check(&cr, v, NULL, NULL), "%s: exact output must pass", recipe->name);
    for (size_t i = 0; i < cr.count; i++) {
      fill_ok(v);
      precis_criterion *c = &cr.items[i];
      /* Perturb just this criterion's metric past its limit. */
      v[c->metric].worst = c->value > 0 ? c->value * 1.5 : 1.0;
      size_t failed = 99;
      CHECK_MSG(!precis_criteria_check(&cr, v, &failed, NULL), "%s: criterion %zu did not reject", recipe->name, i);
      CHECK_EQ_INT(failed, i);
    }
  }
}

TEST(default_bounds_scale_with_k_and_roundoff) {
  precis_criteria a, b, f;
  precis_default_criteria(&preset_recipe("bf16")->spec, 256, &a);
  precis_default_criteria(&preset_recipe("bf16")->spec, 16384, &b);
  precis_default_criteria(&preset_recipe("fp32")->spec, 256, &f);
  CHECK(a.items[1].metric == PRECIS_METRIC_MAX_CW);
  CHECK(b.items[1].value > a.items[1].value);
  CHECK(f.items[1].value < a.items[1].value);
  /* bf16, k=256: 2*2^-8 + 2^-16 + 2*256*2^-24 + 2^-8 = 0.01176... rounded up to 3 digits */
  CHECK_NEAR(a.items[1].value, 0.0118, 1e-12);
}

/* The default gates are rounded up to 3 significant digits: never below the bound, and the double
 * applied is the one the 3 printed digits read back as. v just above a 3-digit decimal (one ulp
 * above 1e-18) must round up to 1.01e-18; scaling by a binary power of ten gave 9.999999999999999e-19. */
static void check_round_up(double v) {
  double r = precis_round_up_3_digits(v);
  char printed[40];
  snprintf(printed, sizeof printed, "%.3g", r);
  CHECK_MSG(r >= v, "round_up_3(%.17g) = %.17g is below it", v, r);
  CHECK_MSG(strtod(printed, NULL) == r, "round_up_3(%.17g) = %.17g prints as %s, which reads back as %.17g", v, r,
            printed, strtod(printed, NULL));
  /* The smallest such: the 3-digit decimal one step below reads back below v. */
  char below[40];
  snprintf(below, sizeof below, "%.2e", r);
  int digits = (below[0] - '0') * 100 + (below[2] - '0') * 10 + (below[3] - '0') - 1, exponent = atoi(below + 5);
  if (digits == 99) digits = 999, exponent--;
  snprintf(below, sizeof below, "%d.%02de%d", digits / 100, digits % 100, exponent);
  CHECK_MSG(strtod(below, NULL) < v, "round_up_3(%.17g) = %.17g, but %s is >= v too", v, r, below);
}

TEST(gates_round_up_to_what_they_print) {
  double v = 1.0000000000000003e-18;
  CHECK(v == nextafter(1e-18, 1.0));
  CHECK_MSG(precis_round_up_3_digits(v) == 1.01e-18, "%.17g", precis_round_up_3_digits(v));
  CHECK(precis_round_up_3_digits(1e-18) == 1e-18);
  CHECK(precis_round_up_3_digits(0.011759) == 0.0118);
  CHECK(precis_round_up_3_digits(9.991e-5) == 1e-4 && precis_round_up_3_digits(1.001e-5) == 1.01e-5);
  CHECK(precis_round_up_3_digits(0.9991) == 1.0);
  CHECK(precis_round_up_3_digits(0) == 0 && isinf(precis_round_up_3_digits(INFINITY)));
  /* Every 3-digit decimal over a wide range of exponents, and the doubles just around it. */
  for (int e = -300; e <= 10; e += 7)
    for (int d = 100; d <= 999; d += 7) {
      char text[40];
      snprintf(text, sizeof text, "%d.%02de%d", d / 100, d % 100, e);
      double x = strtod(text, NULL);
      check_round_up(x);
      check_round_up(nextafter(x, INFINITY));
      check_round_up(nextafter(x, 0));
    }
  /* Random doubles. */
  unsigned long long s = 0x2545F4914F6CDD1DULL;
  for (int i = 0; i < 20000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    double x = ldexp((double)(s >> 11) * 0x1p-53 + 0.5, (int)(s % 200) - 190);
    check_round_up(x);
  }
  /* The default gates as printed are the gates applied. */
  const char *presets[] = {"fp32", "bf16", "fp16", "fp8", "tf32", "fp64"};
  const long long ks[] = {1, 7, 256, 4095, 16384, 1000003};
  for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++)
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
      precis_criteria c;
      precis_default_criteria(&preset_recipe(presets[p])->spec, ks[j], &c);
      for (size_t i = 0; i < c.count; i++) {
        char text[64];
        precis_criterion_format(&c.items[i], text, sizeof text);
        precis_criterion back;
        CHECK_OK(precis_criterion_parse(text, &back));
        CHECK_MSG(back.value == c.items[i].value, "%s k=%lld: %s reads back as %.17g, applied %.17g", presets[p], ks[j],
                  text, back.value, c.items[i].value);
      }
    }
}

/* Integer operands: 3 bits of headroom below the narrowest one's width (docs/criteria.md). */
TEST(integer_gates_follow_the_narrowest_width) {
  const struct {
    const char *preset;
    double limit;
  } cases[] = {{"int8", 0x1p-5}, {"int8-sq", 0x1p-5}, {"w8a16", 0x1p-5}, {"w4a16", 0x1p-1}, {"w4a16-asym", 0x1p-1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    precis_criteria c;
    precis_default_criteria(&preset_recipe(cases[i].preset)->spec, 4096, &c);
    CHECK_EQ_INT(c.count, 2);
    CHECK_MSG(c.items[1].metric == PRECIS_METRIC_REL_FRO && c.items[1].op == PRECIS_CMP_LE &&
                  c.items[1].value == cases[i].limit,
              "%s: rel_fro<=%g expected, got %g", cases[i].preset, cases[i].limit, c.items[1].value);
  }
  precis_spec mixed;
  CHECK_OK(precis_spec_parse("a=s8@row,b=s4@k128", &mixed)); /* the narrower operand decides */
  precis_criteria c;
  precis_default_criteria(&mixed, 4096, &c);
  CHECK(c.items[1].value == 0x1p-1);
}

/* Three tokens of a vocabulary of 2, worked by hand:
 *  token 0: ref (0, 0) -> p = (1/2, 1/2); q (ln 3, 0) -> (3/4, 1/4). KL(ref||q) = 1/2 ln(4/3);
 *           KL(q||ref) = 3/4 ln(3/2) + 1/4 ln(1/2); argmax 0 both (the first of ref's tie): agrees.
 *  token 1: ref (2, 1), q (1, 2): p = (s, 1-s), q = (1-s, s), s = sigmoid(1). Both KLs are
 *           (2s-1) ln(s/(1-s)) = tanh(1/2); argmax 0 vs 1: disagrees.
 *  token 2: ref (0, 1), q (3, 4): the same distribution shifted: KL 0, agrees. */
TEST(logit_metrics_hand_worked) {
  double r[6] = {0, 0, 2, 1, 0, 1}, c64[6] = {log(3.0), 0, 1, 2, 3, 4};
  float c[6];
  for (int i = 0; i < 6; i++) c[i] = (float)c64[i];
  const double kl0 = 0.5 * log(4.0 / 3.0), rkl0 = 0.75 * log(1.5) + 0.25 * log(0.5), kl1 = tanh(0.5);
  double scratch[6];
  precis_sample_metrics m;
  precis_metrics_logits(NULL, c64, r, NULL, 3, 2, scratch, &m);
  CHECK_NEAR(m.v[PRECIS_METRIC_KL_MEAN], (kl0 + kl1) / 3, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_KL_MAX], kl1, 1e-15);
  /* p99 of the sorted (0, kl0, kl1): position 0.99 * 2 = 1.98, NumPy's linear interpolation */
  CHECK_NEAR(m.v[PRECIS_METRIC_KL_P99], kl0 + 0.98 * (kl1 - kl0), 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_RKL_MEAN], (rkl0 + kl1) / 3, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_RKL_MAX], kl1, 1e-15);
  CHECK_NEAR(m.v[PRECIS_METRIC_TOP1_AGREE], 2.0 / 3.0, 0);
  CHECK(m.present[PRECIS_METRIC_KL_MEAN] && m.present[PRECIS_METRIC_TOP1_AGREE]);
  /* float32 logits: ln 3 rounded, so KL of token 0 moves by about 1e-8, not more */
  precis_sample_metrics f;
  precis_metrics_logits(c, NULL, r, NULL, 3, 2, scratch, &f);
  CHECK_NEAR(f.v[PRECIS_METRIC_KL_MEAN], m.v[PRECIS_METRIC_KL_MEAN], 1e-7);
  CHECK_NEAR(f.v[PRECIS_METRIC_TOP1_AGREE], 2.0 / 3.0, 0);
  /* A reference held as r + r_lo: the low part makes token 1's reference (2, 2), p = (1/2, 1/2):
   * KL(ref||q) = 1/2 ln(1/2 / (1-s)) + 1/2 ln(1/2 / s); its tie goes to token id 0: disagrees. */
  double r_lo[6] = {0, 0, 0, 1, 0, 0};
  precis_sample_metrics lo;
  precis_metrics_logits(NULL, c64, r, r_lo, 3, 2, scratch, &lo);
  const double s = 1 / (1 + exp(-1.0)), kl1_tied = 0.5 * log(0.5 / (1 - s)) + 0.5 * log(0.5 / s);
  CHECK_NEAR(lo.v[PRECIS_METRIC_KL_MEAN], (kl0 + kl1_tied) / 3, 1e-15);
  CHECK_NEAR(lo.v[PRECIS_METRIC_TOP1_AGREE], 2.0 / 3.0, 0);
  /* A non-finite logit: that token's KL is infinite and it disagrees. */
  double bad[6] = {log(3.0), 0, 1, 2, NAN, 4};
  precis_metrics_logits(NULL, bad, r, NULL, 3, 2, scratch, &f);
  CHECK(isinf(f.v[PRECIS_METRIC_KL_MAX]) && isinf(f.v[PRECIS_METRIC_RKL_MEAN]));
  CHECK_NEAR(f.v[PRECIS_METRIC_TOP1_AGREE], 1.0 / 3.0, 0); /* token 0 agrees, 1 does not, 2 is not finite */
}

/* Found in review: two non-finite tokens of eight made kl_p99 NaN (inf - inf), and a NaN sample
 * after a finite one was dropped by the worst-of-samples rule, so kl_p99<=0.01 passed. */
TEST(logit_p99_with_nonfinite_tokens_is_infinite_and_fails) {
  enum { T8 = 8, V = 2 };
  double r[T8 * V], q[T8 * V], scratch[2 * T8];
  for (int i = 0; i < T8 * V; i++) r[i] = q[i] = (double)(i % 3);
  q[2 * V] = NAN, q[5 * V + 1] = INFINITY;
  precis_sample_metrics s[2];
  memset(s, 0, sizeof s); /* precis_metrics_logits sets only the logit entries */
  precis_metrics_logits(NULL, r, r, NULL, T8, V, scratch, &s[0]); /* q = ref: all zero */
  precis_metrics_logits(NULL, q, r, NULL, T8, V, scratch, &s[1]);
  CHECK_NEAR(s[0].v[PRECIS_METRIC_KL_P99], 0, 0);
  CHECK_MSG(isinf(s[1].v[PRECIS_METRIC_KL_P99]) && isinf(s[1].v[PRECIS_METRIC_RKL_P99]), "kl_p99 %g rkl_p99 %g",
            s[1].v[PRECIS_METRIC_KL_P99], s[1].v[PRECIS_METRIC_RKL_P99]);
  /* An exact position into infinite values: the value there, not inf * 0. */
  const double sorted[3] = {1, INFINITY, INFINITY};
  CHECK(isinf(precis_percentile_sorted(sorted, 3, 50.0)) && isinf(precis_percentile_sorted(sorted, 3, 99.0)));
  CHECK_NEAR(precis_percentile_sorted(sorted, 3, 0.0), 1, 0);
  precis_metric_value v[PRECIS_METRIC_ALL];
  precis_metrics_aggregate(s, 2, v);
  precis_criteria cr = {0};
  CHECK(precis_criterion_parse("kl_p99<=0.01", &cr.items[cr.count++]) == PRECIS_OK);
  CHECK_MSG(!precis_criteria_check(&cr, v, NULL, NULL), "kl_p99<=0.01 passed with worst %g", v[PRECIS_METRIC_KL_P99].worst);
  /* A NaN sample is the worst in either order. */
  precis_sample_metrics nan_first[2] = {s[0], s[0]};
  nan_first[0].v[PRECIS_METRIC_KL_P99] = NAN;
  precis_metrics_aggregate(nan_first, 2, v);
  CHECK(isnan(v[PRECIS_METRIC_KL_P99].worst));
  nan_first[1] = nan_first[0], nan_first[0] = s[0];
  precis_metrics_aggregate(nan_first, 2, v);
  CHECK(isnan(v[PRECIS_METRIC_KL_P99].worst));
  CHECK(!precis_criteria_check(&cr, v, NULL, NULL));
}

TEST(logit_metrics_aggregate_and_gate_only_logit_rows) {
  /* Two samples: the worst KL sample and the worst top-1 sample are kept; sample metrics of a
   * plain GEMM have no logit entries, and a logit criterion does not apply to them. */
  float c[2] = {1, 2};
  double r[2] = {1, 2}, ab[2] = {1, 2};
  precis_sample_metrics s[2];
  precis_metrics_sample(c, r, ab, 2, &s[0]);
  CHECK(!s[0].present[PRECIS_METRIC_KL_MEAN] && !s[0].present[PRECIS_METRIC_TOP1_AGREE]);
  precis_metric_value v[PRECIS_METRIC_ALL];
  precis_metrics_aggregate(s, 1, v);
  precis_criteria cr = {0};
  CHECK(precis_criterion_parse("kl_mean<=0.01", &cr.items[cr.count++]) == PRECIS_OK);
  CHECK(precis_criterion_parse("top1_agree>=0.99", &cr.items[cr.count++]) == PRECIS_OK);
  CHECK(precis_criteria_check(&cr, v, NULL, NULL));
  s[1] = s[0];
  s[0].v[PRECIS_METRIC_KL_MEAN] = 0.001, s[1].v[PRECIS_METRIC_KL_MEAN] = 0.03;
  s[0].v[PRECIS_METRIC_TOP1_AGREE] = 0.9, s[1].v[PRECIS_METRIC_TOP1_AGREE] = 1.0;
  for (int i = 0; i < 2; i++) s[i].present[PRECIS_METRIC_KL_MEAN] = s[i].present[PRECIS_METRIC_TOP1_AGREE] = true;
  precis_metrics_aggregate(s, 2, v);
  CHECK_NEAR(v[PRECIS_METRIC_KL_MEAN].worst, 0.03, 0);
  CHECK_NEAR(v[PRECIS_METRIC_KL_MEAN].mean, 0.0155, 1e-15);
  CHECK_NEAR(v[PRECIS_METRIC_TOP1_AGREE].worst, 0.9, 0);
  size_t failed = 99;
  double margin = 0;
  CHECK(!precis_criteria_check(&cr, v, &failed, &margin));
  CHECK(failed == 0);
  CHECK_NEAR(margin, 3.0, 1e-12);
  char text[96];
  precis_criterion_format(&cr.items[1], text, sizeof text);
  CHECK(strcmp(text, "top1_agree>=0.99") == 0);
}

/* Distance in ulps between two non-negative or two non-positive doubles (the bit patterns of
 * same-signed doubles are ordered as their values, subnormals included). */
static uint64_t ulps_apart(double x, double y) {
  uint64_t a, b;
  memcpy(&a, &x, sizeof a);
  memcpy(&b, &y, sizeof b);
  return a > b ? a - b : b - a;
}

/* numerics/token_math.h, the per-token sums' exp and log, against libm (within 1 ulp itself) over
 * the ranges they are used on: e^x for x in [-1100, 0] (subnormal results and 0 below -745 included),
 * log y for y in [1/2, 1], with the exact values the sums rely on. */
TEST(token_exp_and_log_within_two_ulps_of_libm) {
  uint64_t worst_exp = 0, worst_log = 0;
  double at_exp = 0, at_log = 0;
  uint64_t state = 12345;
  for (int i = 0; i < 2000000; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(state >> 11) * 0x1p-53;
    /* Half the points near 0 (where most logits are), half over the whole range. */
    const double x = i % 2 ? -1100.0 * u : -40.0 * u * u;
    const uint64_t e = ulps_apart(token_exp_nonpositive(x), exp(x));
    if (e > worst_exp) worst_exp = e, at_exp = x;
    const double y = 0.5 + 0.5 * u;
    const uint64_t l = ulps_apart(token_log_half_to_one(y), log(y));
    if (l > worst_log) worst_log = l, at_log = y;
  }
  CHECK_MSG(worst_exp <= 2, "exp: %llu ulps at x = %a", (unsigned long long)worst_exp, at_exp);
  CHECK_MSG(worst_log <= 2, "log: %llu ulps at y = %a", (unsigned long long)worst_log, at_log);
  CHECK(token_exp_nonpositive(0.0) == 1.0);
  CHECK(token_exp_nonpositive(-INFINITY) == 0.0);
  CHECK(token_exp_nonpositive(-800.0) == 0.0);
  CHECK(token_exp_nonpositive(-0x1.74385446d71c3p+9) == exp(-0x1.74385446d71c3p+9)); /* the smallest subnormal */
  CHECK(token_log_half_to_one(1.0) == 0.0); /* a JSD of exactly 0 for equal distributions */
  CHECK(ulps_apart(token_log_half_to_one(0.5), log(0.5)) == 0);
  for (double y = 0.5; y <= 1.0; y = nextafter(y, 2.0) + 0x1p-20) /* monotone: no step down */
    CHECK_MSG(token_log_half_to_one(nextafter(y, 2.0)) >= token_log_half_to_one(y), "log not monotone at %a", y);
}

RUN_TESTS(T(logit_metrics_hand_worked), T(logit_p99_with_nonfinite_tokens_is_infinite_and_fails), T(logit_metrics_aggregate_and_gate_only_logit_rows), T(exact_output_has_zero_error_and_null_sqnr), T(hand_worked_errors), T(max_rel_uses_the_rms_floor),
          T(zero_scale_elements_must_be_exact), T(nonfinite_outputs_are_counted_and_infinitely_wrong),
          T(aggregation_keeps_the_worst_sample), T(aggregation_skips_absent_samples), T(criterion_parsing_and_formatting), T(criteria_check_and_margin),
          T(each_default_gate_rejects_a_perturbation), T(default_bounds_scale_with_k_and_roundoff),
          T(integer_gates_follow_the_narrowest_width), T(gates_round_up_to_what_they_print), T(token_exp_and_log_within_two_ulps_of_libm))
