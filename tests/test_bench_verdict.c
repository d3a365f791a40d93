/* The benchmarks' verdict (tests/bench/bench_verdict.h): computed from the measured ratios, never
 * "met" with nothing measured or a row skipped, and --report-only relaxing only the timing goals. */
#include "bench/bench_verdict.h"
#include "harness.h"

static bench_verdict fresh(bool report_only) {
  char a0[] = "bench", a1[] = "--report-only", a2[] = "256";
  char *argv[] = {a0, a1, a2, NULL};
  int argc = report_only ? 3 : 1;
  if (!report_only) argv[1] = a2, argc = 2;
  bench_verdict v;
  bench_verdict_init(&v, &argc, argv);
  CHECK_EQ_INT(argc, 2); /* --report-only removed, the size kept */
  CHECK_STR(argv[1], "256");
  CHECK(v.report_only == report_only);
  return v;
}

TEST(nothing_measured_fails_in_both_modes) {
  for (int ro = 0; ro < 2; ro++) {
    bench_verdict v = fresh(ro);
    CHECK_EQ_INT(bench_verdict_finish(&v), 1);
  }
}

TEST(goals_are_judged_on_the_value) {
  bench_verdict v = fresh(false);
  CHECK(bench_goal(&v, 1.29, NAN, 1.3));
  CHECK(!bench_goal(&v, 1.31, NAN, 1.3));
  CHECK(bench_goal(&v, 0.91, 0.9, NAN));
  CHECK(!bench_goal(&v, 0.89, 0.9, NAN));
  CHECK(bench_goal(&v, 1.0, 0.99, 1 / 0.99));
  CHECK(!bench_goal(&v, 1.02, 0.99, 1 / 0.99)); /* two-sided */
  CHECK(!bench_goal(&v, 0.98, 0.99, 1 / 0.99));
  CHECK(!bench_goal(&v, NAN, 0.9, NAN)); /* not measured is not met */
  CHECK(!bench_goal(&v, INFINITY, NAN, 1.3));
  CHECK_EQ_INT(v.goals, 9);
  CHECK_EQ_INT(v.missed, 6);
  CHECK_EQ_INT(bench_verdict_finish(&v), 1);
}

TEST(all_met_exits_zero) {
  bench_verdict v = fresh(false);
  CHECK(bench_goal(&v, 1.0, NAN, 1.3));
  CHECK(bench_goal(&v, 0.95, 0.9, NAN));
  CHECK_EQ_INT(bench_verdict_finish(&v), 0);
}

TEST(report_only_relaxes_timing_goals_but_not_skipped_rows) {
  bench_verdict v = fresh(true);
  CHECK(!bench_goal(&v, 2.0, NAN, 1.3));
  CHECK_EQ_INT(bench_verdict_finish(&v), 0);
  bench_failed(&v);
  CHECK_EQ_INT(bench_verdict_finish(&v), 1);
  /* A skipped row is never "met", whatever was measured. */
  bench_verdict w = fresh(false);
  CHECK(bench_goal(&w, 1.0, NAN, 1.3));
  bench_failed(&w);
  CHECK_EQ_INT(bench_verdict_finish(&w), 1);
}

RUN_TESTS(T(nothing_measured_fails_in_both_modes), T(goals_are_judged_on_the_value), T(all_met_exits_zero),
          T(report_only_relaxes_timing_goals_but_not_skipped_rows))
