/* precis recommend on crafted reports: a known winner with its evidence, none passing (closest
 * miss and margin), ties (lower error, then the recipe table), failed rows, --require, the memory
 * objective, per workload, and the frontier. */
#include "harness.h"
#include "report/recommend.h"
#include "report_fixture.h"

static const precis_recipe_outcome *outcome(const precis_recommendation *rec, const char *recipe) {
  for (size_t i = 0; i < rec->n_outcomes; i++)
    if (strcmp(rec->outcomes[i].recipe, recipe) == 0) return &rec->outcomes[i];
  return NULL;
}

static const char *chosen(const precis_recommendation *rec) {
  return rec->chosen >= 0 ? rec->outcomes[rec->chosen].recipe : "(none)";
}

/* fp32 exact and slow, bf16 passes and is fast, int8 fastest but fails on one workload. */
static void standard(precis_report *r) {
  fixture_report(r);
  const char *workloads[] = {"square", "tall"};
  for (int w = 0; w < 2; w++) {
    fixture_row(r, workloads[w], "fp32", 1e-7, 4.0, 800000, 1e-2);
    fixture_row(r, workloads[w], "fp16", 4e-4, 2.2, 400000, 1e-2);
    fixture_row(r, workloads[w], "bf16", 3e-3, 2.0, 400000, 1e-2);
    fixture_row(r, workloads[w], "int8", w == 1 ? 2.5e-2 : 8e-3, 1.0, 300000, 1e-2);
  }
}

TEST(known_winner_with_evidence) {
  precis_report r;
  standard(&r);
  precis_recommendation rec;
  /* The recorded criteria are a target when the run was given them (--require). */
  r.criteria = calloc(1, sizeof *r.criteria);
  r.criteria[0] = precis_strdup("rel_fro<=0.01");
  r.n_criteria = 1;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "bf16");
  CHECK(!rec.tie_broken);
  const precis_recipe_outcome *bf16 = outcome(&rec, "bf16"), *int8 = outcome(&rec, "int8");
  CHECK(bf16 && bf16->passes);
  CHECK_NEAR(bf16->latency_ms, 4.0, 1e-12);
  CHECK_NEAR(bf16->speedup_vs_fp32, 2.0, 1e-12);
  /* cpu emulation: memory is the format's bytes (tensor_bytes, 1 KiB below the fixture's peak). */
  CHECK_NEAR(bf16->memory_vs_fp32, (400000.0 - 1024) / (800000.0 - 1024), 1e-12);
  CHECK(int8 && !int8->passes);
  CHECK_STR(int8 ? int8->failed_workload : NULL, "tall");
  CHECK_STR(int8 ? int8->failed_metric : NULL, "rel_fro");
  CHECK_NEAR(int8 ? int8->margin : 0, 2.5, 1e-12);
  /* Frontier: fp32 (most accurate), fp16, bf16, int8 (fastest) are all Pareto-optimal. */
  for (size_t i = 0; i < rec.n_outcomes; i++) CHECK(rec.outcomes[i].on_frontier);
  /* The evidence printed names the failing workload and margin. */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  precis_recommendation_print(&r, &rec, mem);
  fclose(mem);
  CHECK(text && strstr(text, "recommendation: bf16") != NULL);
  CHECK(text && strstr(text, "tall: rel_fro=0.025 > 0.01 (2.5x the limit)") != NULL);
  CHECK(text && strstr(text, "2.00x") != NULL);
  free(text);
  char *json = precis_recommendation_json(&rec);
  CHECK(json && strstr(json, "\"recommended\":\t\"bf16\"") != NULL);
  free(json);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(dominated_recipe_is_off_the_frontier) {
  precis_report r;
  standard(&r);
  /* tf32: slower than bf16 and less accurate than fp16: dominated by fp16. */
  fixture_row(&r, "square", "tf32", 5e-4, 3.0, 800000, 1e-2);
  fixture_row(&r, "tall", "tf32", 5e-4, 3.0, 800000, 1e-2);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  const precis_recipe_outcome *tf32 = outcome(&rec, "tf32");
  CHECK(tf32 && tf32->passes && !tf32->on_frontier);
  CHECK(rec.outcomes[1].recipe && strcmp(rec.outcomes[1].recipe, "tf32") == 0); /* recipe-table order */
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(none_passes_names_closest_miss) {
  precis_report r;
  standard(&r);
  precis_criteria require = {.count = 1};
  CHECK_OK(precis_criterion_parse("rel_fro<=1e-8", &require.items[0]));
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY, .require = &require};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_EQ_INT(rec.chosen, -1);
  CHECK(rec.closest_miss >= 0);
  if (rec.closest_miss >= 0) {
    CHECK_STR(rec.outcomes[rec.closest_miss].recipe, "fp32");
    CHECK_NEAR(rec.outcomes[rec.closest_miss].margin, 10.0, 1e-9);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  precis_recommendation_print(&r, &rec, mem);
  fclose(mem);
  CHECK(text && strstr(text, "no recipe meets the criteria") != NULL);
  CHECK(text && strstr(text, "closest miss: fp32, off by a factor 10") != NULL);
  free(text);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(lower_bound_criteria_margin) {
  precis_report r;
  standard(&r);
  precis_criteria require = {.count = 1};
  CHECK_OK(precis_criterion_parse("sqnr_db>=200", &require.items[0]));
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY, .require = &require};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_EQ_INT(rec.chosen, -1);
  CHECK(rec.closest_miss >= 0 && strcmp(rec.outcomes[rec.closest_miss].recipe, "fp32") == 0);
  if (rec.closest_miss >= 0) CHECK_NEAR(rec.outcomes[rec.closest_miss].margin, 200.0 / 140.0, 1e-9);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(require_overrides_recorded_criteria) {
  precis_report r;
  standard(&r);
  precis_criteria require = {.count = 1};
  CHECK_OK(precis_criterion_parse("rel_fro<=0.05", &require.items[0]));
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY, .require = &require};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "int8");
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(ties_go_to_lower_error_then_recipe_table) {
  precis_report r;
  fixture_report(&r);
  /* Same latency: fp16 has the lower error and wins although bf16 comes first in the rows. */
  fixture_row(&r, "w", "bf16", 3e-3, 2.0, 400000, 1e-2);
  fixture_row(&r, "w", "fp16", 4e-4, 2.0, 400000, 1e-2);
  fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  CHECK(rec.tie_broken);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
  /* Same latency and error: the earlier recipe in the recipe table (fp16 before bf16). */
  fixture_report(&r);
  fixture_row(&r, "w", "bf16", 1e-3, 2.0, 400000, 1e-2);
  fixture_row(&r, "w", "fp16", 1e-3, 2.0, 400000, 1e-2);
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  CHECK(rec.tie_broken);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(failed_row_fails_its_recipe) {
  precis_report r;
  standard(&r);
  fixture_failed_row(&r, "tall", "fp8", "unsupported here: needs sm_89");
  fixture_row(&r, "square", "fp8", 1e-3, 0.5, 200000, 1e-2);
  precis_row *bf16 = fixture_find(&r, "tall", "bf16");
  bf16->status = PRECIS_ROW_DOES_NOT_FIT;
  bf16->reason = precis_strdup("out of memory");
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "fp16");
  const precis_recipe_outcome *fp8 = outcome(&rec, "fp8"), *b = outcome(&rec, "bf16");
  CHECK(fp8 && !fp8->passes && isinf(fp8->margin));
  CHECK(fp8 && strstr(fp8->failed_what, "needs sm_89") != NULL);
  CHECK(b && !b->passes && strstr(b->failed_what, "does-not-fit") != NULL);
  precis_recommendation_free(&rec);
  /* A recipe missing a workload entirely fails too. */
  precis_report_free(&r);
  standard(&r);
  fixture_row(&r, "square", "tf32", 1e-4, 0.1, 100000, 1e-2);
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "bf16");
  const precis_recipe_outcome *tf32 = outcome(&rec, "tf32");
  CHECK(tf32 && !tf32->passes && strstr(tf32->failed_what, "no row") != NULL);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(memory_objective_and_per_workload) {
  precis_report r;
  standard(&r);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_MEMORY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  /* fp16 and bf16 tie at 400000 bytes: the lower error (fp16) wins. */
  CHECK_STR(chosen(&rec), "fp16");
  precis_recommendation_free(&rec);
  opt.objective = PRECIS_OBJECTIVE_LATENCY;
  opt.workload = "square";
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_STR(chosen(&rec), "int8"); /* int8 passes on "square" alone */
  precis_recommendation_free(&rec);
  opt.workload = "nope";
  CHECK(precis_recommend(&r, &opt, &rec) == PRECIS_E_INPUT);
  precis_report_free(&r);
}

TEST(no_criteria_is_not_a_pass) {
  precis_report r;
  fixture_report(&r);
  fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 0);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_EQ_INT(rec.chosen, -1);
  CHECK(rec.n_outcomes == 1 && strstr(rec.outcomes[0].failed_what, "--require") != NULL);
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

/* The speed-up is against the baseline preset's spec, whatever the row's name; a row named fp32
 * whose spec is something else is no baseline. */
TEST(baseline_is_found_by_spec) {
  precis_report r;
  fixture_report(&r);
  const char *fp32 = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none";
  fixture_row(&r, "square", "my-reference", 1e-7, 4.0, 800000, 1e-2);
  fixture_row(&r, "square", "bf16", 3e-3, 2.0, 400000, 1e-2);
  precis_row *base = fixture_find(&r, "square", "my-reference"); /* after every add: rows may move */
  base->spec = precis_strdup(fp32);
  fixture_find(&r, "square", "bf16")->spec =
      precis_strdup("a=bf16,b=bf16,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none");
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  const precis_recipe_outcome *o = outcome(&rec, "bf16");
  CHECK_NEAR(o ? o->speedup_vs_fp32 : 0, 2.0, 1e-12);
  precis_recommendation_free(&rec);
  free(base->spec);
  base->spec = precis_strdup("a=tf32,b=tf32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none");
  free(base->recipe);
  base->recipe = precis_strdup("fp32"); /* the name alone does not make a baseline */
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  o = outcome(&rec, "bf16");
  CHECK(o && isnan(o->speedup_vs_fp32));
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

TEST(frontier_membership_of_tied_points) {
  precis_report r;
  fixture_report(&r);
  /* Latency is the cost. fp16 and bf16 tie exactly (neither dominates: both on the frontier);
   * tf32 ties fp32's cost with more error, int8 ties fp16's error at a higher cost: both dominated
   * by a tied point; fp8 is the fastest. */
  fixture_row(&r, "w", "fp32", 1e-7, 4.0, 800000, 1e-2);
  fixture_row(&r, "w", "tf32", 5e-4, 4.0, 800000, 1e-2);
  fixture_row(&r, "w", "fp16", 1e-3, 2.0, 400000, 1e-2);
  fixture_row(&r, "w", "bf16", 1e-3, 2.0, 400000, 1e-2);
  fixture_row(&r, "w", "int8", 1e-3, 3.0, 300000, 1e-2);
  fixture_row(&r, "w", "fp8", 2e-2, 1.0, 300000, 1e-2);
  precis_recommendation rec;
  precis_recommend_options opt = {.objective = PRECIS_OBJECTIVE_LATENCY};
  CHECK_OK(precis_recommend(&r, &opt, &rec));
  CHECK_EQ_INT(rec.n_outcomes, 6);
  const char *on[] = {"fp32", "fp16", "bf16", "fp8"}, *off[] = {"tf32", "int8"};
  for (size_t i = 0; i < 4; i++) {
    const precis_recipe_outcome *o = outcome(&rec, on[i]);
    CHECK_MSG(o && o->on_frontier, "%s should be on the frontier", on[i]);
  }
  for (size_t i = 0; i < 2; i++) {
    const precis_recipe_outcome *o = outcome(&rec, off[i]);
    CHECK_MSG(o && !o->on_frontier, "%s should be off the frontier", off[i]);
  }
  precis_recommendation_free(&rec);
  precis_report_free(&r);
}

RUN_TESTS(T(known_winner_with_evidence), T(baseline_is_found_by_spec), T(frontier_membership_of_tied_points), T(dominated_recipe_is_off_the_frontier), T(none_passes_names_closest_miss),
          T(lower_bound_criteria_margin), T(require_overrides_recorded_criteria),
          T(ties_go_to_lower_error_then_recipe_table), T(failed_row_fails_its_recipe),
          T(memory_objective_and_per_workload), T(no_criteria_is_not_a_pass))
