/* What gpu_test_cuda_backend expects of the cuda backend, checked on the CPU (issue 27, cause 4):
 * its random-data comparison walks the presets of `all` over shapes that include a b per batch
 * element. nvfp4 runs emulated on sm_90 (bf16 GEMM, alpha = the nv fp32 tensor scales): with a b per
 * batch element each b has its own tensor scale and one GEMM has one alpha, so the emulation refuses
 * the case. An expectation of `ok` there fails on every H200 whatever the GPU does; here the same
 * cases are built with the same generator and every refusal the emulation gives (the function the
 * backend calls) must be expected by cuda_expected_refusal (tests/gpu/cuda_cases.h), with its reason.
 * Needs no GPU: it plans and dequantizes only. */
#include "gpu/cuda_cases.h"
#include "harness.h"
#include "preset_fixture.h"

/* The emulation's own verdict on a case, independent of cuda_cases.h: NULL when it takes it. */
static bool emulation_refuses(const precis_spec *spec, const workload *w, int major, int minor, char *reason,
                              size_t len) {
  precis_spec sub;
  reason[0] = '\0';
  if (!precis_lt_emulated_on(spec, major, minor, &sub, NULL, 0)) return false;
  float *a = NULL, *b = NULL, alpha = 1;
  size_t clipped = 0;
  precis_status st = precis_cpu_quant_dequantized_inputs_alpha(spec, &w->info, &w->data, &a, &b, &alpha, &clipped,
                                                               reason, len);
  free(a);
  free(b);
  return st == PRECIS_E_UNSUPPORTED;
}

static void walk(bool integers, int major, int minor, int *nv_refused) {
  for (int id = 0; id <= PRESET_COUNT; id++) {
    const precis_recipe *r = id < PRESET_COUNT ? preset_recipe_at((size_t)id) : preset_recipe("fp8-fast");
    if (!precis_cuda_spec_supported(&r->spec, major, minor, NULL, 0)) continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      workload w;
      workload_make(&w, shapes[s].m, shapes[s].n, shapes[s].k, shapes[s].batch, shapes[s].b_batched, integers, 0);
      char reason[512], why[512];
      bool refused = emulation_refuses(&r->spec, &w, major, minor, reason, sizeof reason);
      const char *expected = cuda_expected_refusal(&r->spec, &w.info, &w.data, major, minor, why, sizeof why);
      if (refused) {
        CHECK_MSG(expected && strstr(reason, expected), "sm_%d%d %s shape %zu (%s): the emulation refuses (%s) but the "
                  "GPU test expects %s", major, minor, r->name, s, integers ? "integers" : "uniform", reason,
                  expected ? expected : "ok");
        if (strcmp(r->name, "nvfp4") == 0) (*nv_refused)++;
      }
      /* A refusal the test expects must be one the backend gives: the plan's or the emulation's. */
      if (expected && !refused) {
        precis_gemm_plan plan;
        precis_spec sub;
        const precis_spec *spec = precis_lt_emulated_on(&r->spec, major, minor, &sub, NULL, 0) ? &sub : &r->spec;
        precis_status st = precis_gemm_plan_make(spec, w.info.m, w.info.n, w.info.k, w.info.batch, w.info.b_batched,
                                                 &plan);
        CHECK_MSG(st == PRECIS_E_UNSUPPORTED && strstr(precis_last_error(), expected),
                  "sm_%d%d %s shape %zu: the test expects a refusal (%s) that neither the plan nor the emulation gives",
                  major, minor, r->name, s, expected);
        precis_clear_error();
      }
      workload_free(&w);
    }
  }
}

TEST(nvfp4_with_a_b_per_batch_element_is_expected_refused_on_random_data) {
  int nv_refused = 0;
  walk(false, 9, 0, &nv_refused);
  /* {5,9,30,2,b per batch} and {2,33,17,4,b per batch}: the two failures the review found. */
  CHECK_MSG(nv_refused == 2, "nvfp4 refused on %d random-data shapes on sm_90, expected 2", nv_refused);
}

TEST(integer_data_and_other_devices_agree_too) {
  int nv_refused = 0;
  walk(true, 9, 0, &nv_refused);
  walk(false, 8, 0, &nv_refused);
  walk(false, 10, 0, &nv_refused); /* native nvfp4: the plan's "no batch stride" */
}

RUN_TESTS(T(nvfp4_with_a_b_per_batch_element_is_expected_refused_on_random_data),
          T(integer_data_and_other_devices_agree_too))
