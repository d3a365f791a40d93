/* precis_case_options.device_io (issue 40, src/eval/backend.h): device arrays are for the cuda backend
 * only. The cpu backend must refuse them as a row `unsupported` without reading them (here: pointers
 * that would fault if read), and the kernels layer's device entry answers for this build and machine
 * before touching an array: not built (no CUDA), no device, or a pointer refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "harness.h"
#include "kernels/cuda_api.h"

static void workload(precis_workload_info *w) {
  memset(w, 0, sizeof *w);
  w->name = (char *)"device-io";
  w->kind = (char *)"gemm";
  w->description = w->a_dist = w->b_dist = w->reference = (char *)"";
  w->reference_precision = (char *)"float64";
  w->m = 4, w->n = 3, w->k = 5, w->batch = 1;
}

TEST(cpu_backend_refuses_device_arrays) {
  precis_workload_info w;
  workload(&w);
  precis_workload_data d;
  memset(&d, 0, sizeof d); /* NULL host arrays: reading them would crash */
  /* Addresses no host code may dereference. */
  precis_device_io io = {.a = (const float *)(uintptr_t)0x10, .b = (const float *)(uintptr_t)0x20,
                         .c = (float *)(uintptr_t)0x30};
  precis_case_options o;
  precis_case_options_default(&o);
  o.device_io = &io;
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("bf16", &r));
  const precis_backend *cpu = precis_backend_cpu();
  void *ctx = NULL;
  CHECK_OK(cpu->open(&ctx, &o));
  precis_case_output out;
  precis_case_output_init(&out);
  CHECK_OK(cpu->run_case(ctx, &r.spec, &w, &d, &o, &out));
  CHECK_EQ_INT(out.status, PRECIS_ROW_UNSUPPORTED);
  CHECK(strstr(out.reason, "CUDA device") != NULL && out.c == NULL);
  precis_case_output_free(&out);
  cpu->close(ctx);
}

TEST(device_entry_answers_before_touching_arrays) {
  precis_workload_info w;
  workload(&w);
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("bf16", &r));
  float host[32] = {0};
  precis_device_io io = {.a = host, .b = host, .c = host};
  precis_case_output out;
  precis_case_output_init(&out);
  precis_status st = precis_cuda_device_gemm(0, 0, &r.spec, &w, &io, &out);
  const char *built = getenv("PRECIS_CUDA_BUILT");
  if (built && atoi(built) == 0) {
    CHECK_EQ_INT(st, PRECIS_E_NOT_BUILT);
  } else {
    /* A CUDA build: no device here, or a device that refuses host memory as an operand. */
    CHECK_MSG(st == PRECIS_E_NO_DEVICE || (st == PRECIS_E_USAGE && strstr(precis_last_error(), "host memory")), "%d %s",
              (int)st, precis_last_error());
  }
  CHECK(out.c == NULL);
  precis_case_output_free(&out);
  void *p = (void *)host;
  st = precis_cuda_device_alloc(0, 64, &p);
  CHECK(p == NULL || st == PRECIS_OK);
  if (st == PRECIS_OK) precis_cuda_device_free(0, p);
}

RUN_TESTS(T(cpu_backend_refuses_device_arrays), T(device_entry_answers_before_touching_arrays))
