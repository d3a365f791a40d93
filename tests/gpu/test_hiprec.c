/* Issue 19's recipes on the cuda backend against the cpu backend (kernels/cuda_hiprec.c,
 * src/eval/split_plan.h):
 * - ozaki-int8-3..8: bit for bit (the same slices, exact int32 products, the same float64
 *   combination in the same order), on float64 inputs with a wide exponent spread, shared and
 *   batched b, few rows (padded to 32) and the cuBLASLt 13.1 int8 split;
 * - fp64: both float64 GEMMs of the same inputs in different orders, each within gamma_k |a|.|b| of
 *   the exact product, so |gpu - cpu| <= 2 gamma_k |a|.|b|;
 * - 3xtf32, bf16x3/x6/x9: bit for bit on small integers (every term and sum exact); on random data
 *   both are float32 sums of the same P·k exact products in different orders (the tensor cores' over
 *   k), each within gamma_{P k}(2^-24) (1 + 2^-7)^2 |a|.|b| of the exact sum with IEEE additions; the
 *   test allows 4x that (2x for the two sides, 2x for accumulators that truncate instead of rounding,
 *   as tests/backend_agreement.h allows 4 gamma_k) and prints the worst ratio;
 * - fp64-emu: `unsupported` below sm_100 or when cuBLAS ran native FP64 (the mantissa-bit-count
 *   pointer read -1, said in the reason); where it ran, within 4 gamma_k |a|.|b| of the cpu's fp64;
 * - every row has a latency and its details the number of cuBLASLt calls.
 * Skipped (77) only on a machine without a CUDA device (gpu_probe.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "kernels/cuda_api.h"
#include "numerics/format.h"
#include "gpu_probe.h"
#include "harness.h"
#include "preset_fixture.h"
#include "eval/split_plan.h"

static const precis_backend *cuda, *cpu;
static void *cuda_ctx, *cpu_ctx;
static int cc_major, cc_minor;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

typedef enum { VALUES_INTEGERS, VALUES_UNIFORM, VALUES_SPREAD } values;

typedef struct workload {
  precis_workload_info info;
  precis_workload_data data;
  double *ab; /* |a|.|b| in float64 (from the float64 inputs when there are) */
} workload;

static void workload_free(workload *w) {
  free(w->data.a);
  free(w->data.b);
  free(w->data.a64);
  free(w->data.b64);
  free(w->ab);
  memset(w, 0, sizeof *w);
}

static double draw(values v) {
  switch (v) {
  case VALUES_INTEGERS: return (double)((int)(uniform() * 9) - 4);
  case VALUES_UNIFORM: return 2 * uniform() - 1;
  case VALUES_SPREAD: { /* (U - 0.5) exp(phi N(0,1)) with phi = 2, N by Box-Muller */
    double z = sqrt(-2 * log(1 - uniform())) * cos(6.283185307179586 * uniform());
    return (uniform() - 0.5) * exp(2 * z);
  }
  }
  return 0;
}

/* wide: float64 inputs (a64/b64, with a/b their float32 rounding), as `gen --inputs float64` writes. */
static void workload_make(workload *w, int64_t m, int64_t n, int64_t k, int64_t batch, bool b_batched, values v,
                          bool wide) {
  memset(w, 0, sizeof *w);
  w->info.name = "gpu-hiprec";
  w->info.kind = "gemm";
  w->info.description = "";
  w->info.a_dist = w->info.b_dist = "test";
  w->info.m = m, w->info.n = n, w->info.k = k, w->info.batch = batch;
  w->info.b_batched = b_batched;
  w->info.a_f64 = w->info.b_f64 = wide;
  int64_t nb = b_batched ? batch : 1, na = batch * m * k, nbv = nb * k * n;
  w->data.a = malloc(sizeof(float) * (size_t)na);
  w->data.b = malloc(sizeof(float) * (size_t)nbv);
  double *a64 = malloc(sizeof(double) * (size_t)na), *b64 = malloc(sizeof(double) * (size_t)nbv);
  for (int64_t i = 0; i < na; i++) a64[i] = draw(v);
  for (int64_t i = 0; i < nbv; i++) b64[i] = draw(v);
  for (int64_t i = 0; i < na; i++) w->data.a[i] = (float)a64[i];
  for (int64_t i = 0; i < nbv; i++) w->data.b[i] = (float)b64[i];
  if (!wide) { /* the values the recipes read: the float32 ones */
    for (int64_t i = 0; i < na; i++) a64[i] = w->data.a[i];
    for (int64_t i = 0; i < nbv; i++) b64[i] = w->data.b[i];
  }
  w->ab = calloc((size_t)(batch * m * n), sizeof(double));
  for (int64_t s = 0; s < batch; s++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double t = 0;
        const double *bm = b64 + (b_batched ? s : 0) * k * n;
        for (int64_t p = 0; p < k; p++) t += fabs(a64[(s * m + i) * k + p]) * fabs(bm[p * n + j]);
        w->ab[(s * m + i) * n + j] = t;
      }
  if (wide) {
    w->data.a64 = a64;
    w->data.b64 = b64;
  } else {
    free(a64);
    free(b64);
  }
}

static precis_case_options quick_options(void) {
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1;
  o.warmup_ms = 0;
  o.min_samples = 2;
  o.max_samples = 4;
  o.max_time_ms = 50;
  return o;
}

static bool run(const precis_backend *be, void *ctx, const precis_recipe *r, const workload *w,
                precis_case_output *out) {
  precis_case_options o = quick_options();
  precis_case_output_init(out);
  precis_status st = be->run_case(ctx, &r->spec, &w->info, &w->data, &o, out);
  if (st != PRECIS_OK || out->status != PRECIS_ROW_OK || !out->c) {
    printf("  %s backend, %s: status %s: %s %s\n", be->name, r->name, precis_row_status_str(out->status), out->reason,
           st != PRECIS_OK ? precis_last_error() : "");
    return false;
  }
  return true;
}

static double gamma_of(double n, double u) { return n * u / (1 - n * u); }

typedef struct shape {
  int64_t m, n, k, batch;
  bool b_batched;
} shape;
static const shape shapes[] = {
    {33, 20, 45, 1, false}, {5, 9, 30, 2, true}, {64, 64, 64, 1, false}, {2, 33, 17, 4, true}, {96, 80, 256, 2, false},
};

/* Runs r on both backends; bound 0: bit for bit (float64 outputs compared as float64). */
static void compare(const precis_recipe *r, const workload *w, double bound_factor, const char *label) {
  precis_case_output g, c;
  bool ok_g = run(cuda, cuda_ctx, r, w, &g), ok_c = run(cpu, cpu_ctx, r, w, &c);
  CHECK_MSG(ok_g && ok_c, "%s %s ran on both backends", r->name, label);
  if (ok_g && ok_c) {
    bool wide = r->spec.out == PRECIS_FMT_F64;
    CHECK_MSG(!wide || (g.c64 && c.c64), "%s: out=fp64 hands over float64 outputs", r->name);
    int64_t count = w->info.batch * w->info.m * w->info.n, bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < count && (!wide || (g.c64 && c.c64)); i++) {
      double x = wide ? g.c64[i] : g.c[i], y = wide ? c.c64[i] : c.c[i];
      bool ok;
      if (bound_factor == 0) {
        ok = wide ? memcmp(&g.c64[i], &c.c64[i], sizeof(double)) == 0 : memcmp(&g.c[i], &c.c[i], sizeof(float)) == 0;
      } else {
        double limit = bound_factor * w->ab[i];
        ok = fabs(x - y) <= limit;
        if (limit > 0) worst = fmax(worst, fabs(x - y) / limit);
      }
      if (!ok && first < 0) first = i;
      bad += !ok;
    }
    if (bound_factor > 0)
      printf("  %s %s m=%lld n=%lld k=%lld: worst |gpu-cpu|/bound = %.3g\n", r->name, label, (long long)w->info.m,
             (long long)w->info.n, (long long)w->info.k, worst);
    CHECK_MSG(bad == 0, "%s %s m=%lld n=%lld k=%lld batch=%lld: %lld of %lld differ, first at %lld: gpu %.17g cpu %.17g",
              r->name, label, (long long)w->info.m, (long long)w->info.n, (long long)w->info.k,
              (long long)w->info.batch, (long long)bad, (long long)count, (long long)first,
              first < 0 ? 0.0 : wide ? g.c64[first] : g.c[first], first < 0 ? 0.0 : wide ? c.c64[first] : c.c[first]);
    CHECK_MSG(g.time.median_ms > 0, "%s: a latency (%g ms)", r->name, g.time.median_ms);
    if (r->spec.split != PRECIS_SPLIT_NONE && r->spec.split != PRECIS_SPLIT_CUBLAS_EMU)
      CHECK_MSG(precis_kv_get(&g.details, "lt_calls_total") != NULL, "%s: details give lt_calls_total", r->name);
  }
  precis_case_output_free(&g);
  precis_case_output_free(&c);
}

static bool runs_here(const precis_recipe *r) {
  char reason[512] = "";
  bool ok = cuda->supports(cuda_ctx, &r->spec, reason, sizeof reason);
  bool cc_ok = precis_cuda_spec_supported(&r->spec, cc_major, cc_minor, NULL, 0);
  if (!ok) printf("  %s unsupported here: %s\n", r->name, reason);
  CHECK_MSG(ok || !cc_ok, "%s: sm_%d%d should run it, but the backend says: %s", r->name, cc_major, cc_minor, reason);
  return ok;
}

TEST(ozaki_matches_the_cpu_backend_bit_for_bit) {
  for (int n = 3; n <= 8; n++) {
    char name[32];
    snprintf(name, sizeof name, "ozaki-int8-%d", n);
    const precis_recipe *r = preset_recipe(name);
    if (!runs_here(r)) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      workload w;
      workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, VALUES_SPREAD,
                    true);
      compare(r, &w, 0, "float64 spread");
      workload_free(&w);
    }
  }
  /* float32 inputs read as float64, and an fp32 output. */
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("a=fp32,b=fp32,acc=fp64,out=fp32,split=int8x4", &r));
  workload w;
  workload_make(&w, 7, 11, 40, 3, false, VALUES_UNIFORM, false);
  if (runs_here(&r)) compare(&r, &w, 0, "float32 inputs, out=fp32");
  workload_free(&w);
}

TEST(float_splits_exact_on_integers_and_within_the_bound) {
  static const char *names[] = {"3xtf32", "bf16x3", "bf16x6", "bf16x9"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const precis_recipe *r = preset_recipe(names[i]);
    if (!runs_here(r)) continue;
    precis_split_plan sp;
    CHECK_OK(precis_split_plan_make(&r->spec, 4, 4, 4, 1, false, 0, &sp));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      workload w;
      workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, VALUES_INTEGERS,
                    false);
      compare(r, &w, 0, "integers");
      workload_free(&w);
      workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, VALUES_UNIFORM,
                    false);
      double factor = 4 * gamma_of((double)sp.products * (double)shapes[s].k, 0x1p-24) * (1 + 0x1p-7) * (1 + 0x1p-7);
      compare(r, &w, factor, "uniform");
      workload_free(&w);
    }
  }
}

TEST(fp64_within_two_gamma_k) {
  const precis_recipe *r = preset_recipe("fp64");
  if (!runs_here(r)) return;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    workload w;
    workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, VALUES_SPREAD, true);
    compare(r, &w, 2 * gamma_of((double)shapes[s].k, 0x1p-53), "float64 spread");
    workload_free(&w);
  }
}

TEST(cublas_fp64_emulation_is_found_at_run_time_never_assumed) {
  const precis_recipe *r = preset_recipe("fp64-emu");
  char reason[512] = "";
  bool supported = cuda->supports(cuda_ctx, &r->spec, reason, sizeof reason);
  if (cc_major < 10) {
    CHECK_MSG(!supported && strstr(reason, "sm_100"), "fp64-emu below sm_100: unsupported naming it (%s)", reason);
    return;
  }
  if (!supported) {
    printf("  fp64-emu unsupported here: %s\n", reason);
    return;
  }
  workload w;
  workload_make(&w, 64, 48, 96, 1, false, VALUES_SPREAD, true);
  precis_case_options o = quick_options();
  precis_case_output g;
  precis_case_output_init(&g);
  CHECK_OK(cuda->run_case(cuda_ctx, &r->spec, &w.info, &w.data, &o, &g));
  if (g.status == PRECIS_ROW_UNSUPPORTED) {
    /* cuBLAS ran native FP64: the row must say so, not pretend. */
    printf("  fp64-emu: %s\n", g.reason);
    CHECK_MSG(strstr(g.reason, "native FP64") && strstr(g.reason, "-1"), "the reason says emulation was not used: %s",
              g.reason);
  } else {
    CHECK_MSG(g.status == PRECIS_ROW_OK && g.c64, "fp64-emu ran: %s", g.reason);
    const char *bits = precis_kv_get(&g.details, "fp64_emulation_mantissa_bits");
    CHECK_MSG(bits && atoi(bits) > 0, "fp64-emu: mantissa bits recorded (%s)", bits ? bits : "null");
    precis_case_output c;
    if (g.c64 && run(cpu, cpu_ctx, preset_recipe("fp64"), &w, &c) && c.c64) {
      double worst = 0;
      for (int64_t i = 0; i < w.info.m * w.info.n; i++)
        worst = fmax(worst, fabs(g.c64[i] - c.c64[i]) / (4 * gamma_of((double)w.info.k, 0x1p-53) * w.ab[i]));
      printf("  fp64-emu (%s mantissa bits): worst |emu - cpu fp64| / (4 gamma_k |a||b|) = %.3g\n", bits, worst);
      CHECK(worst <= 1);
      precis_case_output_free(&c);
    }
  }
  precis_case_output_free(&g);
  workload_free(&w);
}

int main(void) {
  cuda = precis_backend_cuda();
  cpu = precis_backend_cpu();
  if (!cuda) {
    printf("FAIL: precis_backend_cuda() is NULL in a build with the CUDA backend\n");
    return 1;
  }
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  precis_case_options o;
  precis_case_options_default(&o);
  if (cuda->open(&cuda_ctx, &o) != PRECIS_OK) {
    printf("FAIL: cuda backend: %s\n", precis_last_error());
    return 1;
  }
  precis_kv_list env = {0};
  cuda->environment(cuda_ctx, &env);
  const char *cc = precis_kv_get(&env, "compute_capability");
  if (!cc || sscanf(cc, "%d.%d", &cc_major, &cc_minor) != 2) {
    printf("the cuda backend's environment lacks compute_capability\n");
    precis_kv_free(&env);
    return 1;
  }
  precis_kv_free(&env);
  if (cpu->open(&cpu_ctx, &o) != PRECIS_OK) {
    printf("cpu backend: %s\n", precis_last_error());
    return 1;
  }
  static const harness_test tests[] = {
      T(ozaki_matches_the_cpu_backend_bit_for_bit),
      T(float_splits_exact_on_integers_and_within_the_bound),
      T(fp64_within_two_gamma_k),
      T(cublas_fp64_emulation_is_found_at_run_time_never_assumed),
  };
  int rc = harness_run(tests, sizeof tests / sizeof tests[0]);
  cuda->close(cuda_ctx);
  cpu->close(cpu_ctx);
  return rc;
}
