/* cuBLAS and cuBLASLt are loaded on their first call (kernels/cublas_lazy.c), not with the program:
 * a program that links precis, and the cpu backend chosen by `--backend auto` where no GPU is
 * usable, leave them out of the process (they are 150 MiB of resident memory), and the first call
 * that needs them (here the inventory's version query) loads them and answers. The tests run in
 * order in one process: the library is absent until the last one asks for it. */
#include <stdio.h>
#include <string.h>

#include "eval/backend.h"
#include "harness.h"
#include "kernels/cuda_api.h"

/* Whether a file whose path contains `name` is mapped into this process. */
static bool mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

TEST(linked_program_loads_no_cublas) {
  CHECK(mapped("libprecis") || mapped("test_cublas_lazy")); /* the check reads the maps it means to */
  CHECK(!mapped("libcublasLt.so"));
  CHECK(!mapped("libcublas.so"));
}

TEST(auto_backend_without_a_device_loads_no_cublas) {
  const precis_backend *cuda = precis_backend_cuda();
  if (!cuda) return; /* built without CUDA: nothing to load */
  precis_case_options o;
  precis_case_options_default(&o);
  void *ctx = NULL;
  precis_status st = cuda->open(&ctx, &o);
  if (st == PRECIS_OK) { /* a GPU machine: the backend uses cuBLASLt, loaded now */
    cuda->close(ctx);
    CHECK(mapped("libcublasLt.so"));
    return;
  }
  CHECK(st == PRECIS_E_NO_DEVICE);
  precis_clear_error();
  CHECK(!mapped("libcublasLt.so"));
  CHECK(!mapped("libcublas.so"));
}

TEST(first_call_loads_and_answers) {
  precis_cuda_inventory inv;
  CHECK_OK(precis_cuda_inventory_get(&inv));
  if (!inv.built) {
    precis_cuda_inventory_free(&inv);
    CHECK(!mapped("libcublas"));
    return;
  }
  /* cublasGetProperty (cuBLAS) and cublasLtGetVersion (cuBLASLt), major*10000 + minor*100 + patch:
   * CUDA 13's or later (0: the library did not load) */
  CHECK(inv.cublas_version >= 130000);
  CHECK(inv.cublaslt_version >= 130000);
  CHECK(inv.cublas_error[0] == '\0'); /* loaded: no reason to give */
  precis_cuda_inventory_free(&inv);
  CHECK(mapped("libcublasLt.so"));
  CHECK(mapped("libcublas.so"));
}

RUN_TESTS(T(linked_program_loads_no_cublas), T(auto_backend_without_a_device_loads_no_cublas),
          T(first_call_loads_and_answers))
