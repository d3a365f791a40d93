/* --target (issue 33, DESIGN §19): the accumulator table, the way each target takes a spec (native,
 * emulated, refused, as capability.c's routes say), and the cpu backend emulating the target's
 * accumulator: fp8 FAST_ACCUM keeps 13 fraction bits on sm_90 and 25 on sm_100, so at k = 4096 its
 * error must fall by the factor the widths predict, 2^(25-13) = 4096 (both truncate once per 32-product
 * block, so the error is proportional to 2^-bits); an fp8 recipe on sm_80 is refused. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "eval/target_plan.h"
#include "cpu_case.h"
#include "harness.h"
#include "numerics/format.h"
#include "numerics/recipe.h"
#include "numerics/spec.h"
#include "numerics/target.h"

TEST(targets_parse_and_name) {
  static const char *const good[] = {"sm_80", "sm_89", "sm_90", "sm_100", "sm_120", "sm90", "10.0", "8.9"};
  static const int cc[] = {80, 89, 90, 100, 120, 90, 100, 89};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    precis_target t;
    CHECK_MSG(precis_target_parse(good[i], &t) && precis_target_cc(t) == cc[i], "%s", good[i]);
  }
  static const char *const bad[] = {"sm_75", "sm_86", "sm_101", "hopper", "", "sm_", "sm_9x", "1000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    precis_target t;
    CHECK_MSG(!precis_target_parse(bad[i], &t), "%s accepted", bad[i]);
  }
  CHECK_STR(precis_target_name(PRECIS_TARGET_SM100), "sm_100");
  CHECK(precis_target_of_cc(8, 6) == PRECIS_TARGET_SM80 && precis_target_of_cc(8, 9) == PRECIS_TARGET_SM89 &&
        precis_target_of_cc(9, 0) == PRECIS_TARGET_SM90 && precis_target_of_cc(10, 3) == PRECIS_TARGET_SM100 &&
        precis_target_of_cc(12, 0) == PRECIS_TARGET_SM120 && precis_target_of_cc(7, 5) == PRECIS_TARGET_DEFAULT);
}

/* The widths the sources publish (docs/formats.md, "Target architectures"). */
TEST(table_has_the_published_widths) {
  size_t rows = 0;
  for (const precis_accumulator_row *r; (r = precis_accumulator_row_at(rows)); rows++) {
    CHECK(r == precis_accumulator_row_get(r->target, r->family));
    CHECK_MSG(r->source && r->source[0] && r->promotion && r->alignment, "row %zu has no source", rows);
  }
  CHECK_EQ_INT((long long)rows, (long long)((PRECIS_TARGET_COUNT - 1) * PRECIS_MMA_FAMILY_COUNT));
#define BITS(t, f) precis_accumulator_row_get(PRECIS_TARGET_##t, PRECIS_MMA_##f)->fraction_bits
#define HAS(t, f) precis_accumulator_row_get(PRECIS_TARGET_##t, PRECIS_MMA_##f)->has_tensor_cores
  CHECK(BITS(SM80, F16) == 24 && BITS(SM89, F16) == 24 && BITS(SM90, F16) == 25 && BITS(SM100, F16) == 25);
  CHECK(BITS(SM80, TF32) == 24 && BITS(SM90, TF32) == 25);
  CHECK(!HAS(SM80, FP8) && BITS(SM89, FP8) == 13 && BITS(SM90, FP8) == 13 && BITS(SM100, FP8) == 25);
  CHECK(!HAS(SM90, MXFP8) && !HAS(SM90, FP4) && BITS(SM100, MXFP8) == 25 && BITS(SM100, FP4) == 35);
  CHECK(BITS(SM90, INT8) == -1);
  CHECK(!precis_accumulator_row_get(PRECIS_TARGET_SM120, PRECIS_MMA_FP4)->measured);
  CHECK(precis_accumulator_row_get(PRECIS_TARGET_SM100, PRECIS_MMA_FP4)->measured);
  CHECK(precis_accumulator_row_get(PRECIS_TARGET_DEFAULT, PRECIS_MMA_FP8) ==
        precis_accumulator_row_get(PRECIS_TARGET_SM90, PRECIS_MMA_FP8));
#undef BITS
#undef HAS
}

static precis_target_plan plan_of(const char *recipe, precis_target t) {
  precis_recipe r;
  precis_target_plan p;
  memset(&p, 0, sizeof p);
  if (precis_recipe_parse(recipe, &r) != PRECIS_OK) {
    fprintf(stderr, "cannot resolve %s: %s\n", recipe, precis_last_error());
    p.way = (precis_target_way)-1;
    return p;
  }
  precis_target_plan_of(&r.spec, t, &p);
  return p;
}

TEST(each_target_takes_each_recipe_as_the_cuda_backend_would) {
  precis_target_plan p = plan_of("fp8", PRECIS_TARGET_SM80);
  CHECK_MSG(p.way == PRECIS_TARGET_REFUSED && strstr(p.why, "sm_89"), "fp8 on sm_80: %s", p.why);
  p = plan_of("fp8", PRECIS_TARGET_SM89);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.acc && p.acc->family == PRECIS_MMA_FP8 && p.model.fraction_bits == 0);
  p = plan_of("fp8-fast", PRECIS_TARGET_SM90);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.model.fraction_bits == 13 && p.model.block == 32);
  p = plan_of("fp8-fast", PRECIS_TARGET_SM100);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.model.fraction_bits == 25 && p.model.block == 32);
  p = plan_of("nvfp4", PRECIS_TARGET_SM90);
  CHECK_MSG(p.way == PRECIS_TARGET_EMULATED && p.acc && p.acc->family == PRECIS_MMA_F16 && p.model.fraction_bits == 0,
            "nvfp4 on sm_90: %s", p.why);
  p = plan_of("nvfp4", PRECIS_TARGET_SM100);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.acc->family == PRECIS_MMA_FP4 && p.model.fraction_bits == 35 &&
        p.model.block == 64);
  p = plan_of("mxfp8", PRECIS_TARGET_SM100);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.model.fraction_bits == 25 && p.model.block == 32);
  /* The output format aside: the same operands' route decides (an out=fp32 twin is not refused). */
  p = plan_of("a=e2m1@mx,b=e2m1@mx,out=fp32", PRECIS_TARGET_SM90);
  CHECK_MSG(p.way == PRECIS_TARGET_EMULATED, "mxfp4 out=fp32 on sm_90: %s", p.why);
  p = plan_of("a=e2m1@nv,b=e2m1@nv,out=fp32", PRECIS_TARGET_SM100);
  CHECK_MSG(p.way == PRECIS_TARGET_NATIVE && p.model.fraction_bits == 35, "nvfp4 out=fp32 on sm_100: %s", p.why);
  p = plan_of("a=e4m3@tensor,b=e4m3@tensor,out=fp32", PRECIS_TARGET_SM80);
  CHECK(p.way == PRECIS_TARGET_REFUSED);
  p = plan_of("fp8-block", PRECIS_TARGET_SM89);
  CHECK_MSG(p.way == PRECIS_TARGET_REFUSED, "fp8-block on sm_89: %s", p.why);
  /* fp16/bf16/tf32 with fp32 accumulation run the MMA model (issue 33): sm_80 splits each
   * instruction into two fused dot-adds (MMA-Sim's is_split_k), sm_90 does not. */
  p = plan_of("bf16", PRECIS_TARGET_SM80);
  CHECK(p.way == PRECIS_TARGET_NATIVE && p.acc->fraction_bits == 24 && p.model.fraction_bits == 24 &&
        p.model.block == 8 && p.model.family == PRECIS_MMA_F16);
  p = plan_of("bf16", PRECIS_TARGET_SM90);
  CHECK(p.model.fraction_bits == 25 && p.model.block == 16);
  p = plan_of("tf32", PRECIS_TARGET_SM80);
  CHECK(p.model.fraction_bits == 24 && p.model.block == 4 && p.model.family == PRECIS_MMA_TF32);
  p = plan_of("tf32", PRECIS_TARGET_SM100);
  CHECK(p.model.fraction_bits == 25 && p.model.block == 8);
  p = plan_of("fp16", PRECIS_TARGET_SM120);
  CHECK(p.model.fraction_bits == 25 && p.model.block == 16 && p.acc->measured);
  p = plan_of("fp16acc16", PRECIS_TARGET_SM90); /* fp16 accumulation: its own rounding loop */
  CHECK(p.model.fraction_bits == 0);
  p = plan_of("w8a16", PRECIS_TARGET_SM90); /* emulated by a bf16 GEMM: fp32 sums (not modelled) */
  CHECK(p.model.fraction_bits == 0);
  p = plan_of("int8-sq", PRECIS_TARGET_SM90);
  CHECK_MSG(p.way == PRECIS_TARGET_NO_ROUTE, "int8-sq: %s", p.why);
  p = plan_of("fp32", PRECIS_TARGET_SM100);
  CHECK(p.way == PRECIS_TARGET_NATIVE && !p.acc);
  p = plan_of("ozaki-int8-6", PRECIS_TARGET_SM80);
  CHECK_MSG(p.way == PRECIS_TARGET_NATIVE && p.acc && p.acc->family == PRECIS_MMA_INT8, "ozaki: %s", p.why);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 32);
}

/* Runs spec on the cpu backend for a target; rel_fro against the float64 product (NaN on failure,
 * with the row's status in *status). */
static double run_rel_fro(const char *spec_text, precis_target target, float *a, float *b, size_t m,
                          size_t n, size_t k, precis_row_status *status, char *reason, size_t reason_len) {
  cpu_case_result res;
  if (!cpu_case_run(spec_text, target, "target", a, b, m, n, k, &res)) return NAN;
  *status = res.status;
  snprintf(reason, reason_len, "%s", res.reason);
  double rel = NAN;
  if (res.c) {
    double num = 0, den = 0;
    for (size_t i = 0; i < m; i++)
      for (size_t j = 0; j < n; j++) {
        double ref = 0;
        for (size_t p = 0; p < k; p++) ref += (double)a[i * k + p] * (double)b[p * n + j];
        double e = (double)res.c[i * n + j] - ref;
        num += e * e, den += ref * ref;
      }
    rel = sqrt(num / den);
  }
  if (strcmp(res.target, precis_target_name(target)) != 0) rel = NAN; /* every row records its target */
  free(res.c);
  return rel;
}

/* Exact e4m3 values with 448 in every row of A and column of B: the quantization is exact (scale
 * 1), only the accumulation errs. Products spread over 2^-18..2^17. */
static void make_operands(float *a, float *b, size_t m, size_t n, size_t k) {
  for (size_t i = 0; i < m * k; i++) a[i] = precis_e4m3_bits_to_f32((uint8_t)(next_u32() % 127u));
  for (size_t i = 0; i < k * n; i++) b[i] = precis_e4m3_bits_to_f32((uint8_t)(next_u32() % 127u));
  for (size_t i = 0; i < m; i++) a[i * k] = 448.0f;
  for (size_t j = 0; j < n; j++) b[j] = 448.0f;
}

/* The tensor-core accumulator of docs/formats.md written again, independently of cpu_quantized.c
 * (frexp/ldexp/trunc rather than bit masks): per instruction of `block` products, D and the exact
 * products aligned to the largest exponent and truncated to `bits` fraction bits, summed, and D
 * written as an fp32 rounded toward zero. */
static float reference_chain(const float *a, const float *b, size_t n, size_t j, size_t k, int bits, size_t block) {
  double d = 0;
  for (size_t p0 = 0; p0 < k; p0 += block) {
    double terms[65];
    size_t count = 0;
    terms[count++] = d;
    for (size_t p = p0; p < p0 + block && p < k; p++) terms[count++] = (double)a[p] * (double)b[p * n + j];
    int emax = INT32_MIN;
    for (size_t t = 0; t < count; t++)
      if (terms[t] != 0) {
        int e;
        frexp(terms[t], &e);
        if (e - 1 > emax) emax = e - 1;
      }
    if (emax == INT32_MIN) continue;
    double quantum = ldexp(1.0, emax - bits), sum = 0;
    for (size_t t = 0; t < count; t++) sum += trunc(terms[t] / quantum) * quantum;
    if (sum != 0) {
      int e;
      frexp(sum, &e);
      double q32 = ldexp(1.0, e - 1 - 23);
      sum = trunc(sum / q32) * q32;
    }
    d = sum;
  }
  return (float)d;
}

/* Outputs of the cpu backend for a target (NULL on failure). */
static float *run_outputs(const char *spec_text, precis_target target, float *a, float *b, size_t m, size_t n,
                          size_t k) {
  cpu_case_result res;
  return cpu_case_run(spec_text, target, "target", a, b, m, n, k, &res) ? res.c : NULL;
}

TEST(fp8_fast_error_falls_by_the_width_ratio_from_hopper_to_blackwell) {
  enum { M = 8, N = 8, K = 4096 };
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
  make_operands(a, b, M, N, K);
  const char *fast = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=fp32";
  precis_row_status st = PRECIS_ROW_FAILED;
  char reason[512] = "";
  double hopper = run_rel_fro(fast, PRECIS_TARGET_SM90, a, b, M, N, K, &st, reason, sizeof reason);
  double ada = run_rel_fro(fast, PRECIS_TARGET_SM89, a, b, M, N, K, &st, reason, sizeof reason);
  double blackwell = run_rel_fro(fast, PRECIS_TARGET_SM100, a, b, M, N, K, &st, reason, sizeof reason);
  double ratio = hopper / blackwell, predicted = ldexp(1.0, 25 - 13);
  printf("  k=%d rel_fro: sm_90 %.4g, sm_89 %.4g, sm_100 %.4g; ratio %.4g (widths predict 2^12 = %.0f)\n", K, hopper,
         ada, blackwell, ratio, predicted);
  CHECK_MSG(hopper == ada, "sm_89 and sm_90 keep the same 13 bits: %g vs %g", ada, hopper);
  /* The quantum falls by 2^12; the error by less, because a product far below the quantum is lost
   * whole (less than a quantum) at 13 bits but only partly at 25: with products spread log-uniformly
   * the loss per product is about q(1 + ln(U/q)/2) for the quantum q and the largest product U, a
   * factor 2 to 3 here. So the ratio must lie between 2^12/4 and 2^12. */
  CHECK_MSG(ratio > predicted / 4 && ratio <= predicted, "ratio %g, predicted at most %g", ratio, predicted);
  /* And the outputs are the model's, bit for bit, at both widths. */
  static const struct {
    precis_target target;
    int bits;
  } widths[] = {{PRECIS_TARGET_SM90, 13}, {PRECIS_TARGET_SM100, 25}};
  for (size_t w = 0; w < 2; w++) {
    float *c = run_outputs(fast, widths[w].target, a, b, M, N, K);
    CHECK(c != NULL);
    size_t differ = 0;
    for (size_t i = 0; c && i < M; i++)
      for (size_t j = 0; j < N; j++) {
        float want = reference_chain(a + i * K, b, N, j, K, widths[w].bits, 32);
        if (memcmp(&want, &c[i * N + j], sizeof want) != 0) differ++;
      }
    CHECK_MSG(differ == 0, "%s: %zu of %d outputs differ from the %d-bit reference", precis_target_name(widths[w].target),
              differ, M * N, widths[w].bits);
    free(c);
  }
  /* sm_80 has no FP8 tensor cores: refused as the cuda backend would be there. */
  double none = run_rel_fro(fast, PRECIS_TARGET_SM80, a, b, M, N, K, &st, reason, sizeof reason);
  CHECK_MSG(isnan(none) && st == PRECIS_ROW_UNSUPPORTED && strstr(reason, "sm_89"), "sm_80: status %d, %s", (int)st,
            reason);
  free(a), free(b);
}

/* Scale encodings (issue 33 item 2): `:ue8m0` on fp8 operands with fp32-scaled groups. */
TEST(ue8m0_is_a_spec_field) {
  precis_spec s;
  char text[PRECIS_SPEC_TEXT_MAX];
  CHECK_OK(precis_spec_parse("a=e4m3@k128:ue8m0,b=e4m3@128x128:ue8m0,out=bf16", &s));
  CHECK(precis_spec_format(&s, text, sizeof text));
  CHECK_STR(text, "a=e4m3@k128:ue8m0,b=e4m3@128x128:ue8m0,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none");
  CHECK(precis_operand_scales_ue8m0(&s.a) && precis_operand_scales_ue8m0(&s.b));
  precis_spec plain;
  CHECK_OK(precis_spec_parse("a=e4m3@k128,b=e4m3@128x128,out=bf16", &plain));
  CHECK(!precis_spec_equal(&s, &plain) && !precis_operand_scales_ue8m0(&plain.a));
  /* One byte per scale: A 64 rows x 2 groups of 128, B 2 x 2 blocks, 3 bytes saved on each. */
  CHECK_EQ_INT(precis_spec_tensor_bytes(&plain, 64, 256, 256, 1, false) - precis_spec_tensor_bytes(&s, 64, 256, 256, 1, false),
               3 * (64 * 2 + 2 * 2));
  static const char *const bad[] = {"a=e2m1@mx:ue8m0", "a=s8@row:ue8m0", "a=e2m1@k32:ue8m0", "a=bf16:ue8m0",
                                    "a=e4m3@nv:ue8m0", "a=e4m3@tensor:ue8m0,b=e4m3@tensor,scale=absmax"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_MSG(precis_spec_parse(bad[i], &s) != PRECIS_OK, "%s", bad[i]);
  precis_clear_error();
}

RUN_TESTS(T(targets_parse_and_name), T(ue8m0_is_a_spec_field), T(table_has_the_published_widths),
          T(each_target_takes_each_recipe_as_the_cuda_backend_would),
          T(fp8_fast_error_falls_by_the_width_ratio_from_hopper_to_blackwell))
