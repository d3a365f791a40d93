/* One GEMM case run once on the cpu backend: the unit tests' shared way to get a spec's output for
 * C[m, n] = A[m, k] . B[k, n] (batch 1, one sample: the timing loop is not what these tests check). */
#ifndef PRECIS_TEST_CPU_CASE_H
#define PRECIS_TEST_CPU_CASE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "eval/backend.h"
#include "numerics/spec.h"
#include "numerics/target.h"

typedef struct cpu_case_result {
  precis_row_status status;
  char reason[512];
  char target[32]; /* the row's recorded target ("" when none) */
  float *c;        /* m * n outputs (malloc'ed, the caller frees), NULL unless status is ok */
} cpu_case_result;

/* Runs spec_text for `target` (PRECIS_TARGET_DEFAULT: the backend's) on A and B. Returns false when
 * the spec does not parse, the backend does not open or run_case fails; else true with the row's
 * status, reason, target and (status ok) outputs in *out. */
static inline bool cpu_case_run(const char *spec_text, precis_target target, char *name, float *a, float *b,
                                size_t m, size_t n, size_t k, cpu_case_result *out) {
  memset(out, 0, sizeof *out);
  precis_spec spec;
  if (precis_spec_parse(spec_text, &spec) != PRECIS_OK) return false;
  const precis_backend *cpu = precis_backend_cpu();
  void *ctx = NULL;
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 1, o.max_samples = 1, o.max_time_ms = 1;
  o.target = target;
  if (cpu->open(&ctx, &o) != PRECIS_OK) return false;
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  info.name = name;
  info.kind = "gemm";
  info.m = (int64_t)m, info.n = (int64_t)n, info.k = (int64_t)k, info.batch = 1;
  precis_workload_data data;
  memset(&data, 0, sizeof data);
  data.a = a, data.b = b;
  precis_case_output res;
  precis_case_output_init(&res);
  bool ran = cpu->run_case(ctx, &spec, &info, &data, &o, &res) == PRECIS_OK;
  if (ran) {
    out->status = res.status;
    snprintf(out->reason, sizeof out->reason, "%s", res.reason);
    const char *t = precis_kv_get(&res.details, "target");
    snprintf(out->target, sizeof out->target, "%s", t ? t : "");
    if (res.status == PRECIS_ROW_OK) {
      out->c = res.c;
      res.c = NULL;
    }
  }
  precis_case_output_free(&res);
  cpu->close(ctx);
  return ran;
}

#endif
