/* precis plan: the solver's optimum against brute force on random small cases (ties included),
 * per-layer cheapest, blocking layers, the budget in bits, the sensitivity ranking and the
 * exclusion lists. */
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/fileio.h"
#include "numerics/recipe.h"
#include "harness.h"
#include "report/plan.h"
#include "report_fixture.h"

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static unsigned next_u32(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (unsigned)(rng_state >> 11);
}

/* Every assignment, in layer order summed like the solver; lexicographic (error, cost) minimum. */
static bool brute_force(size_t L, size_t R, const double *cost, const double *error, const bool *allowed, double capacity,
                        double *best_cost, double *best_error) {
  size_t total = 1;
  for (size_t l = 0; l < L; l++) total *= R;
  bool found = false;
  for (size_t code = 0; code < total; code++) {
    size_t rest = code;
    double c = 0, e = 0;
    bool ok = true;
    for (size_t l = 0; l < L && ok; l++) {
      size_t r = rest % R;
      rest /= R;
      ok = allowed[l * R + r];
      c += cost[l * R + r];
      e += error[l * R + r];
    }
    if (!ok || c > capacity) continue;
    if (!found || e < *best_error || (e == *best_error && c < *best_cost)) {
      *best_cost = c;
      *best_error = e;
      found = true;
    }
  }
  return found;
}

TEST(solver_matches_brute_force) {
  int mismatches = 0, feasible_cases = 0;
  for (int trial = 0; trial < 3000; trial++) {
    size_t L = 1 + next_u32() % 6, R = 1 + next_u32() % 4;
    double cost[24], error[24];
    bool allowed[24];
    /* Small integer costs and errors from a short list make ties frequent. */
    static const double errors[] = {0.5, 0.25, 0.125, 0.1, 0.3, 1e-3, 0.0};
    double max_total = 0;
    for (size_t i = 0; i < L * R; i++) {
      cost[i] = (double)(next_u32() % 9);
      error[i] = trial % 2 ? errors[next_u32() % 7] : (double)(next_u32() % 1000) / 997.0;
      allowed[i] = next_u32() % 5 != 0;
      max_total += cost[i];
    }
    double capacity = (double)(next_u32() % (unsigned)(max_total + 2));
    int choice[6];
    double tc = -1, te = -1, bc = -2, be = -2;
    bool exact = false;
    size_t states = 0;
    bool got = precis_plan_solve(L, R, cost, error, allowed, capacity, 0, choice, &tc, &te, &exact, &states);
    bool want = brute_force(L, R, cost, error, allowed, capacity, &bc, &be);
    CHECK(exact);
    if (got != want) {
      mismatches++;
      continue;
    }
    if (!got) continue;
    feasible_cases++;
    /* The choice reproduces the reported totals, fits, uses allowed cells, and is optimal. */
    double c = 0, e = 0;
    bool ok = true;
    for (size_t l = 0; l < L; l++) {
      ok &= choice[l] >= 0 && (size_t)choice[l] < R && allowed[l * R + (size_t)choice[l]];
      if (!ok) break;
      c += cost[l * R + (size_t)choice[l]];
      e += error[l * R + (size_t)choice[l]];
    }
    if (!ok || c != tc || e != te || c > capacity || te != be || tc != bc) mismatches++;
  }
  CHECK_EQ_INT(mismatches, 0);
  CHECK(feasible_cases > 1000);
}

TEST(thinned_frontier_says_heuristic) {
  /* 12 layers with 3 incomparable choices each grow the frontier past a limit of 4. */
  enum { L = 12, R = 3 };
  double cost[L * R], error[L * R];
  bool allowed[L * R];
  for (int l = 0; l < L; l++)
    for (int r = 0; r < R; r++) {
      cost[l * R + r] = (double)((r + 1) << l);
      error[l * R + r] = 1.0 / (double)((r + 1) << l);
      allowed[l * R + r] = true;
    }
  int choice[L];
  double tc, te;
  bool exact = true;
  size_t states;
  CHECK(precis_plan_solve(L, R, cost, error, allowed, 1e9, 4, choice, &tc, &te, &exact, &states));
  CHECK(!exact);
  CHECK(precis_plan_solve(L, R, cost, error, allowed, 1e9, 0, choice, &tc, &te, &exact, &states));
  CHECK(exact);
}

/* Three layers: "q" tolerant, "fc2" sensitive (int8 fails), "head" only fp32 passes. */
static void model_report(precis_report *r) {
  fixture_report(r);
  const char *layers[] = {"encoder.q", "encoder.fc2", "head"};
  const double int8_err[] = {4e-3, 2e-2, 5e-2}, bf16_err[] = {2e-3, 3e-3, 2e-2};
  for (int l = 0; l < 3; l++) {
    fixture_row(r, layers[l], "fp32", 1e-7, 4.0, 4000 + 1024, 1e-2);
    fixture_row(r, layers[l], "bf16", bf16_err[l], 2.0, 2000 + 1024, 1e-2);
    fixture_row(r, layers[l], "int8", int8_err[l], 1.0, 1000 + 1024, 1e-2);
  }
}

static const char *chosen(const precis_plan *p, size_t l) { return p->chosen[l] >= 0 ? p->recipes[p->chosen[l]] : "-"; }

TEST(cheapest_per_layer_and_exclusions) {
  precis_report r;
  model_report(&r);
  precis_plan_options opt = {.budget = PRECIS_PLAN_NO_BUDGET};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_STR(chosen(&p, 0), "int8");
  CHECK_STR(chosen(&p, 1), "bf16");
  CHECK_STR(chosen(&p, 2), "fp32");
  /* Memory (the fixture's layers are 256x256 with 256 tokens): resident weights int8 65536 + 512
   * (bf16 scale per column), bf16 131072, fp32 262144; plus int8's transient, the largest:
   * A 65536 + fp32 output 262144 + int32 accumulators 262144 + row scales 1024. */
  CHECK_NEAR(p.resident_total, 66048 + 131072 + 262144, 0);
  CHECK_NEAR(p.peak_transient, 65536 + 262144 + 262144 + 1024, 0);
  CHECK_NEAR(p.total_cost, 66048 + 131072 + 262144 + 590848, 0);
  CHECK_STR(p.target >= 0 ? p.recipes[p.target] : "-", "int8");
  /* head is the most sensitive layer under every recipe. */
  CHECK_STR(p.layers[p.by_sensitivity[0]], "head");
  CHECK_STR(p.layers[p.by_sensitivity[2]], "encoder.q");
  char dir[] = "/tmp/precis_test_plan_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(precis_plan_write_all(&p, &r, "report.json", dir, false));
  char *path = precis_asprintf("%s/llmcompressor_ignore.yaml", dir), *text = NULL;
  size_t size = 0;
  CHECK_OK(precis_read_file(path, &text, &size));
  CHECK(text && strstr(text, "ignore:\n  - \"encoder.fc2\"\n  - \"head\"\n") != NULL);
  CHECK(text && strstr(text, "encoder.q\"") == NULL);
  free(text);
  free(path);
  path = precis_asprintf("%s/modelopt_exclude.json", dir);
  CHECK_OK(precis_read_file(path, &text, &size));
  CHECK(text && strstr(text, "\"quantizer_name\":\t\"*head.*\"") != NULL);
  free(text);
  free(path);
  path = precis_asprintf("%s/plan.html", dir);
  CHECK_OK(precis_read_file(path, &text, &size));
  CHECK(text && strstr(text, "<script") == NULL && strstr(text, "class=\"pass chosen\"") != NULL);
  free(text);
  free(path);
  const char *names[] = {"plan.json", "plan.md", "plan.html", "modelopt_exclude.json", "llmcompressor_ignore.yaml"};
  for (int i = 0; i < 5; i++) {
    path = precis_asprintf("%s/%s", dir, names[i]);
    remove(path);
    free(path);
  }
  rmdir(dir);
  precis_plan_free(&p);
  precis_report_free(&r);
}

TEST(budget_trades_error_for_cost) {
  precis_report r;
  model_report(&r);
  precis_criteria require = {.count = 1, .items = {{PRECIS_METRIC_REL_FRO, PRECIS_CMP_LE, 1e-2}}};
  /* Memory as a model holds it, by hand (256x256 layers, 256 tokens, batch 1): resident weights
   * fp32 262144, bf16 131072, int8 65536 + 512 scale bytes; transient (input + output + scales)
   * fp32 524288, bf16 262144, int8 590848 (its int32 accumulators and fp32 output). Passing: q
   * any, fc2 bf16 or fp32, head fp32 only. The least memory is q bf16 + fc2 bf16 + head fp32:
   * 524288 resident + head's 524288 transient = 1048576 — less than putting q on int8 (459264 +
   * 590848 = 1050112), whose transient is the largest. */
  precis_plan_options opt = {.require = &require, .budget = PRECIS_PLAN_MEMORY, .budget_value = 1048576};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible && p.exact);
  CHECK_STR(chosen(&p, 0), "bf16");
  CHECK_STR(chosen(&p, 1), "bf16");
  CHECK_STR(chosen(&p, 2), "fp32");
  CHECK_NEAR(p.total_cost, 1048576, 0);
  CHECK_NEAR(p.resident_total, 524288, 0);
  CHECK_NEAR(p.peak_transient, 524288, 0);
  CHECK_EQ_INT(p.peak_layer, 2);
  precis_plan_free(&p);
  /* 1179648: fc2 on fp32 (err 3e-3 -> 1e-7) fits beside q bf16 (655360 + 524288); q on fp32
   * instead costs the same and gains less. All fp32 needs 786432 + 524288 = 1310720. */
  opt.budget_value = 1179648;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_STR(chosen(&p, 0), "bf16");
  CHECK_STR(chosen(&p, 1), "fp32");
  CHECK_STR(chosen(&p, 2), "fp32");
  CHECK_NEAR(p.total_cost, 1179648, 0);
  precis_plan_free(&p);
  opt.budget_value = 1310720;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  for (size_t l = 0; l < 3; l++) CHECK_STR(chosen(&p, l), "fp32");
  precis_plan_free(&p);
  opt.budget_value = 1048575; /* below the least memory of any passing plan */
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(!p.feasible && p.n_blocking == 0 && strstr(p.infeasible_why, "over the budget") != NULL);
  precis_plan_free(&p);
  /* bits: the fixture's layers are 256x256; fp32 32, bf16 16, int8 8 bits per weight plus a 16-bit
   * scale per output channel (effective bits, 8 + 16/256). An average of 16 bits over 3 layers = 48
   * bits per weight to share: int8 + bf16 + fp32 = 56 + 16/256 does not fit. */
  opt.budget = PRECIS_PLAN_BITS;
  opt.budget_value = 16;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(!p.feasible);
  precis_plan_free(&p);
  /* 56 bits per weight without int8's scales: they do not fit either. */
  opt.budget_value = 56.0 / 3.0 + 1e-9;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(!p.feasible);
  precis_plan_free(&p);
  opt.budget_value = (56.0 + 16.0 / 256) / 3.0 + 1e-9;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_NEAR(p.total_cost, 56.0 * 256 * 256 + 256 * 16, 0);
  precis_plan_free(&p);
  precis_report_free(&r);
}

/* --moe-active K/E under a bits budget, by hand: three 256x256 layers, two of them experts; bf16
 * 16 bits per weight (1048576 bits a layer), int8 8 + 16/256 (528384). With 1/2 active the experts
 * count half: weights 65536 + 2 x 32768, capacity 12 x 131072 = 1572864, an expert's cost halved.
 * attn int8 + one expert bf16 = 528384 + 524288 + 264192 = 1316864 fits; any other plan with more
 * bf16 does not (1576960). Without the weighting (capacity 12 x 196608 = 2359296) only one layer
 * fits in bf16, and the plan lifts attn, whose gain is the largest. */
TEST(moe_active_weighs_expert_layers) {
  precis_report r;
  fixture_report(&r);
  const char *layers[] = {"attn", "moe.experts.0.w", "moe.experts.1.w"};
  const double int8_err[] = {0.05, 0.03, 0.02};
  for (int l = 0; l < 3; l++) {
    fixture_row(&r, layers[l], "bf16", 0.01, 2.0, 1000, 1);
    fixture_row(&r, layers[l], "int8", int8_err[l], 1.0, 1000, 1);
  }
  precis_criteria require = {.count = 1, .items = {{PRECIS_METRIC_REL_FRO, PRECIS_CMP_LE, 1}}};
  precis_plan_options opt = {.require = &require, .budget = PRECIS_PLAN_BITS, .budget_value = 12, .moe_active = 0.5};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_NEAR(p.capacity, 12.0 * 131072, 0);
  CHECK_STR(chosen(&p, 0), "int8");
  CHECK_STR(chosen(&p, 1), "bf16");
  CHECK_STR(chosen(&p, 2), "int8");
  CHECK_NEAR(p.total_cost, 1316864, 0);
  precis_plan_free(&p);
  opt.moe_active = 0;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_NEAR(p.capacity, 12.0 * 196608, 0);
  CHECK_STR(chosen(&p, 0), "bf16");
  CHECK_STR(chosen(&p, 1), "int8");
  CHECK_STR(chosen(&p, 2), "int8");
  precis_plan_free(&p);
  precis_report_free(&r);
}

/* The bits budget counts the weights (B), never the activations (A): a weight-only recipe with 4-bit
 * weights in groups of 128 with a bf16 scale costs 4 + 16/128 = 4.125 effective bits per weight
 * (DESIGN §17), so a 4.125-bit average fits it alone. Counting A's format would cost it 16 bits and
 * leave no plan at all. */
TEST(bits_budget_counts_the_weights_format) {
  precis_report r;
  fixture_report(&r);
  fixture_row(&r, "layer", "bf16", 2e-3, 2.0, 2000 + 1024, 1e-2);
  precis_row *w4 = fixture_row(&r, "layer", "w4-bf16-act", 5e-3, 1.0, 600 + 1024, 1e-2);
  w4->spec = precis_strdup("a=bf16,b=s4@k128:sym,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none");
  /* And the other way round: 8-bit activations on bf16 weights cost 16 bits per weight. */
  precis_row *a8 = fixture_row(&r, "layer", "a8-bf16-weights", 1e-3, 1.5, 1500 + 1024, 1e-2);
  a8->spec = precis_strdup("a=s8@row:sym,b=bf16,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none");
  precis_plan_options opt = {.budget = PRECIS_PLAN_BITS, .budget_value = 4.125};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK_MSG(p.feasible, "a 4.125-bit budget found no plan: %s", p.infeasible_why ? p.infeasible_why : "");
  CHECK_STR(chosen(&p, 0), "w4-bf16-act");
  CHECK_NEAR(p.total_cost, 4.125 * 256 * 256, 0);
  precis_plan_free(&p);
  opt.budget_value = 16; /* room for 16-bit weights: the most accurate of them, a8 on bf16 weights */
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_STR(chosen(&p, 0), "a8-bf16-weights");
  CHECK_NEAR(p.total_cost, 16.0 * 256 * 256, 0);
  precis_plan_free(&p);
  precis_report_free(&r);
}

TEST(blocking_layers_are_named) {
  precis_report r;
  model_report(&r);
  precis_criteria require = {.count = 1, .items = {{PRECIS_METRIC_REL_FRO, PRECIS_CMP_LE, 1e-9}}};
  precis_plan_options opt = {.require = &require};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(!p.feasible);
  CHECK_EQ_INT(p.n_blocking, 3);
  precis_plan_free(&p);
  require.items[0].value = 1e-3; /* only fp32 passes, on every layer */
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  for (size_t l = 0; l < 3; l++) CHECK_STR(chosen(&p, l), "fp32");
  precis_plan_free(&p);
  fixture_failed_row(&r, "extra", "fp32", "out of memory");
  require.items[0].value = 1e-2;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(!p.feasible && p.n_blocking == 1 && strcmp(p.layers[p.blocking[0]], "extra") == 0);
  CHECK(strstr(p.cells[p.blocking[0] * p.n_recipes].what, "out of memory") != NULL);
  precis_plan_free(&p);
  precis_report_free(&r);
}

/* Deployment targets (DESIGN §21): what the library accepts of a shape, and the nearest that does. */
TEST(deploy_check_shapes_and_nearest) {
  precis_spec w4, fp8, nv;
  CHECK_OK(precis_spec_parse(precis_recipe_name_spec("w4a16"), &w4));
  CHECK_OK(precis_spec_parse(precis_recipe_name_spec("fp8-rowwise"), &fp8));
  CHECK_OK(precis_spec_parse(precis_recipe_name_spec("nvfp4"), &nv));
  precis_deploy_verdict v;
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &w4, 576, 576, &v);
  CHECK(!v.deployable && strstr(v.why, "k=576") != NULL);
  CHECK_MSG(strstr(v.nearest, "b=s4@k64:sym-half") != NULL, "nearest for 576: %s", v.nearest);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &w4, 960, 576, &v);
  CHECK(!v.deployable && strstr(v.nearest, "b=s4@k64") != NULL);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &w4, 1000, 576, &v); /* 1000 = 8 * 125 */
  CHECK(!v.deployable && v.nearest[0] == '\0');
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &w4, 4096, 576, &v);
  CHECK(v.deployable && v.scheme && strcmp(v.scheme->name, "W4A16") == 0);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_NONE, PRECIS_TARGET_SM90, &w4, 576, 576, &v);
  CHECK(v.deployable);
  /* fp8 rows: 16 bytes of e4m3 = 16 elements. */
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &fp8, 584, 576, &v);
  CHECK(!v.deployable && strstr(v.why, "16 bytes") != NULL);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM80, &fp8, 576, 576, &v);
  CHECK(!v.deployable && strstr(v.why, "sm_80") != NULL);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM90, &nv, 576, 576, &v);
  CHECK(!v.deployable);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_VLLM, PRECIS_TARGET_SM100, &nv, 576, 576, &v);
  CHECK(v.deployable);
  precis_deploy_check(PRECIS_DEPLOY_ENGINE_TRTLLM, PRECIS_TARGET_SM90, &w4, 4096, 4096, &v);
  CHECK(!v.deployable && strstr(v.why, "INT4_AWQ") != NULL);
  CHECK_EQ_INT((int)precis_deploy_k_multiple(PRECIS_DEPLOY_ENGINE_VLLM, &w4), 128);
  CHECK_EQ_INT((int)precis_deploy_k_multiple(PRECIS_DEPLOY_ENGINE_VLLM, &fp8), 16);
}

TEST(deploy_fused_groups_by_model_type) {
  const char *llama[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                         "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj",
                         "model.layers.0.mlp.gate_proj",     "model.layers.0.mlp.up_proj",
                         "model.layers.0.mlp.down_proj",     "model.layers.1.self_attn.q_proj",
                         "model.layers.1.self_attn.k_proj",  "lm_head"};
  long long k[] = {576, 576, 576, 576, 576, 576, 960, 576, 576, 576};
  int group[10];
  size_t n = 0;
  char rule[300];
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "llama", llama, k, 10, group, &n, rule, sizeof rule));
  CHECK_EQ_INT((int)n, 3);
  CHECK(group[0] >= 0 && group[0] == group[1] && group[1] == group[2] && group[3] < 0);
  CHECK(group[4] >= 0 && group[4] == group[5] && group[4] != group[0] && group[6] < 0);
  CHECK(group[7] >= 0 && group[7] == group[8] && group[7] != group[0] && group[9] < 0);
  /* Siblings that read different inputs are not one GEMM. */
  k[1] = 192;
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "llama", llama, k, 10, group, &n, rule, sizeof rule));
  CHECK(group[0] >= 0 && group[1] < 0 && group[0] == group[2]);
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_NONE, "llama", llama, k, 10, group, &n, rule, sizeof rule));
  CHECK_EQ_INT((int)n, 0);
  /* BERT's attention.self.query/key/value; its intermediate and output dense layers alone. */
  const char *bert[] = {"encoder.layer.0.attention.self.query", "encoder.layer.0.attention.self.key",
                        "encoder.layer.0.attention.self.value", "encoder.layer.0.attention.output.dense",
                        "encoder.layer.0.intermediate.dense"};
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "bert", bert, NULL, 5, group, &n, rule, sizeof rule));
  CHECK(n == 1 && group[0] == 0 && group[1] == 0 && group[2] == 0 && group[3] < 0 && group[4] < 0);
  /* gpt2's c_attn is already one module: nothing to group, even with llama-like names around. */
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "gpt2", llama, NULL, 10, group, &n, rule, sizeof rule));
  CHECK_EQ_INT((int)n, 0);
  /* An unknown model_type: the common names, and the rule says so. */
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "newarch", bert, NULL, 5, group, &n, rule, sizeof rule));
  CHECK(n == 1 && strstr(rule, "not in precis's table") != NULL);
  /* MoE: vLLM's FusedMoE takes a block's experts as one layer; ModelOpt groups them alike. */
  const char *moe[] = {"model.layers.0.block_sparse_moe.experts.0.w1", "model.layers.0.block_sparse_moe.experts.0.w2",
                       "model.layers.0.block_sparse_moe.experts.0.w3", "model.layers.0.block_sparse_moe.experts.1.w1",
                       "model.layers.0.block_sparse_moe.experts.1.w2", "model.layers.0.block_sparse_moe.experts.1.w3",
                       "model.layers.1.block_sparse_moe.experts.0.w1"};
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_VLLM, "mixtral", moe, NULL, 7, group, &n, rule, sizeof rule));
  CHECK(n == 1 && group[0] == 0 && group[1] == 0 && group[5] == 0 && group[6] < 0);
  CHECK_OK(precis_deploy_fused_groups(PRECIS_DEPLOY_ENGINE_TRTLLM, "mixtral", moe, NULL, 7, group, &n, rule, sizeof rule));
  CHECK(n == 1 && group[0] == group[1] && group[0] == group[5] && group[6] < 0);
}

/* One decision per fused group: q/k/v on one recipe, chosen by the members' summed error and cost. */
TEST(fused_group_gets_one_recipe) {
  precis_report r;
  fixture_report(&r);
  precis_kv_set_json(&r.settings, "model_config", "{\"model_type\":\"llama\"}");
  const char *layers[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                          "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"};
  /* fp8-rowwise is cheap and fine on q and v, poor on k; bf16 fine everywhere. */
  const double fp8_err[] = {1e-3, 9e-2, 1e-3, 2e-3};
  for (int l = 0; l < 4; l++) {
    fixture_row(&r, layers[l], "bf16", 1e-4, 2.0, 4096, 1)->spec = precis_strdup(precis_recipe_name_spec("bf16"));
    fixture_row(&r, layers[l], "fp8-rowwise", fp8_err[l], 1.0, 4096, 1)->spec =
        precis_strdup(precis_recipe_name_spec("fp8-rowwise"));
  }
  precis_criteria require = {.count = 1, .items = {{PRECIS_METRIC_REL_FRO, PRECIS_CMP_LE, 5e-2}}};
  precis_plan_options opt = {.require = &require, .deploy = PRECIS_DEPLOY_ENGINE_NONE};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible && p.n_groups == 0);
  CHECK_STR(chosen(&p, 0), "fp8-rowwise");
  CHECK_STR(chosen(&p, 1), "bf16");
  precis_plan_free(&p);
  /* vllm: k fails fp8 in the group, so the group takes bf16; o_proj alone keeps fp8. */
  opt.deploy = PRECIS_DEPLOY_ENGINE_VLLM;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible && p.n_groups == 1);
  for (int l = 0; l < 3; l++) CHECK_STR(chosen(&p, l), "bf16");
  CHECK_STR(chosen(&p, 3), "fp8-rowwise");
  precis_plan_free(&p);
  /* A bits budget with room for fp8 on the group or nothing else: the group's cost is its members' sum. */
  require.items[0].value = 1;
  opt.budget = PRECIS_PLAN_BITS;
  opt.budget_value = 12; /* 4 layers: 48 bits per weight of a layer in all; 3 x 8 + 16 = 40 fits, 16 + 16+16 + 8 = 56 does not */
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_STR(chosen(&p, 0), "fp8-rowwise");
  CHECK_STR(chosen(&p, 1), "fp8-rowwise");
  CHECK_STR(chosen(&p, 2), "fp8-rowwise");
  precis_plan_free(&p);
  precis_report_free(&r);
}

/* Recipes a layer's shape cannot deploy are not candidates; a tied head is charged its copy. */
TEST(dropped_recipes_and_tied_head) {
  precis_report r;
  fixture_report(&r);
  precis_kv_set_json(&r.settings, "model_config",
                     "{\"model_type\":\"llama\",\"tie_word_embeddings\":true,\"tied_output_projection\":\"lm_head\"}");
  const char *layers[] = {"model.layers.0.mlp.down_proj", "lm_head"};
  for (int l = 0; l < 2; l++) {
    precis_row *b = fixture_row(&r, layers[l], "bf16", 1e-4, 2.0, 4096, 1);
    b->spec = precis_strdup(precis_recipe_name_spec("bf16"));
    precis_row *w = fixture_row(&r, layers[l], "w4a16", 1e-2, 1.0, 4096, 1);
    w->spec = precis_strdup(precis_recipe_name_spec("w4a16"));
    b->k = w->k = l == 0 ? 960 : 512;
    b->n = w->n = l == 0 ? 576 : 3001;
  }
  precis_plan_options opt = {.deploy = PRECIS_DEPLOY_ENGINE_VLLM, .budget = PRECIS_PLAN_BITS, .budget_value = 16};
  precis_plan p;
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible);
  CHECK_EQ_INT((int)p.n_dropped, 1);
  const precis_plan_cell *dropped = &p.cells[0 * p.n_recipes + 1];
  CHECK(dropped->dropped && !dropped->passes && strstr(dropped->nearest, "b=s4@k64") != NULL);
  CHECK_STR(chosen(&p, 0), "bf16");
  /* The tied head unquantized costs 0 and leaves the average; bf16 (1e-4) beats w4a16 there. */
  CHECK_EQ_INT(p.tied_head, 1);
  CHECK_NEAR(p.cells[1 * p.n_recipes + 0].cost, 0, 0);
  CHECK_NEAR(p.capacity, 16.0 * 960 * 576, 0);
  CHECK_STR(chosen(&p, 1), "bf16");
  precis_plan_free(&p);
  /* Exploration: the head is its own matrix and w4a16 g128 is a candidate on 960. */
  opt.deploy = PRECIS_DEPLOY_ENGINE_NONE;
  opt.budget_value = 4.2; /* 960 = 7.5 groups of 128: 8 scales per column */
  CHECK_OK(precis_plan_build(&r, &opt, &p));
  CHECK(p.feasible && p.n_dropped == 0);
  CHECK_NEAR(p.cells[1 * p.n_recipes + 0].cost, 16.0 * 512 * 3001, 0);
  CHECK_STR(chosen(&p, 0), "w4a16");
  char dir[] = "/tmp/precis_test_plan_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_OK(precis_plan_write_all(&p, &r, "report.json", dir, false));
  char *path = precis_asprintf("%s/plan.json", dir), *text = NULL;
  size_t size = 0;
  CHECK_OK(precis_read_file(path, &text, &size));
  cJSON *doc = text ? cJSON_Parse(text) : NULL;
  const cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "deployment"), "compressed_tensors");
  CHECK(cJSON_IsFalse(cJSON_GetObjectItem(ct, "complete")));
  CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(ct, "layers_rejected_by_shape")), 1);
  CHECK(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(ct, "recipes"), "w4a16"), "exact")));
  cJSON_Delete(doc);
  free(text);
  free(path);
  path = precis_asprintf("%s/compressed_tensors_config.json", dir);
  CHECK_OK(precis_read_file(path, &text, &size));
  CHECK(text && strstr(text, "down_proj") == NULL); /* left out, not written for the library to refuse */
  free(text);
  free(path);
  const char *names[] = {"plan.json", "plan.md", "plan.html", "modelopt_exclude.json", "llmcompressor_ignore.yaml",
                         "compressed_tensors_config.json", "modelopt_hf_quant_config.json"};
  for (int i = 0; i < 7; i++) {
    path = precis_asprintf("%s/%s", dir, names[i]);
    remove(path);
    free(path);
  }
  rmdir(dir);
  precis_plan_free(&p);
  precis_report_free(&r);
}

RUN_TESTS(T(solver_matches_brute_force), T(thinned_frontier_says_heuristic), T(cheapest_per_layer_and_exclusions),
          T(budget_trades_error_for_cost), T(bits_budget_counts_the_weights_format), T(blocking_layers_are_named),
          T(moe_active_weighs_expert_layers), T(deploy_check_shapes_and_nearest), T(deploy_fused_groups_by_model_type),
          T(fused_group_gets_one_recipe), T(dropped_recipes_and_tied_head))
