/* The verdict of a benchmark, computed from what it measured rather than printed as a constant.
 *
 * Each goal is checked on a measured ratio; the last line printed is one of
 *   verdict: met (N goals)
 *   verdict: NOT met (K of N goals missed[, S rows skipped or failed])
 *   verdict: nothing measured
 * and the exit status follows it: 0 met, 1 not met, 1 nothing measured (or a case that failed).
 *
 * --report-only (the mode .ci/run uses, where timings on a shared CI machine are noise) prints the
 * same verdict but lets an unmet timing goal exit 0: only "nothing measured" and failed cases exit 1. */
#ifndef PRECIS_BENCH_VERDICT_H
#define PRECIS_BENCH_VERDICT_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct bench_verdict {
  int goals, missed, failed;
  bool report_only;
} bench_verdict;

/* Removes --report-only from argv (so that each benchmark parses the rest as before). */
static inline void bench_verdict_init(bench_verdict *v, int *argc, char **argv) {
  memset(v, 0, sizeof *v);
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--report-only") == 0) v->report_only = true;
    else argv[out++] = argv[i];
  }
  *argc = out;
}

/* One goal lo <= value <= hi (either bound may be NAN: unbounded). A non-finite value is a missed
 * goal: it was not measured. Returns whether it was met. */
static inline bool bench_goal(bench_verdict *v, double value, double lo, double hi) {
  v->goals++;
  bool ok = isfinite(value) && (isnan(lo) || value >= lo) && (isnan(hi) || value <= hi);
  if (!ok) v->missed++;
  return ok;
}

/* A case that did not run (failed, skipped, unsupported): the verdict cannot be "met". */
static inline void bench_failed(bench_verdict *v) { v->failed++; }

static inline int bench_verdict_finish(const bench_verdict *v) {
  if (v->goals == 0) {
    printf("verdict: nothing measured\n");
    return 1;
  }
  if (v->missed == 0 && v->failed == 0) {
    printf("verdict: met (%d goals)\n", v->goals);
    return 0;
  }
  printf("verdict: NOT met (%d of %d goals missed", v->missed, v->goals);
  if (v->failed) printf(", %d rows skipped or failed", v->failed);
  printf(")%s\n", v->report_only ? " [--report-only: timing goals do not set the exit status]" : "");
  if (v->failed) return 1;
  return v->report_only ? 0 : 1;
}

#endif
