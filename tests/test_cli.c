/* Foundation: statuses, recipes, the capability rule, atomic files. */
#include <unistd.h>

#include "kernels/cuda_api.h"
#include "base/fileio.h"
#include "harness.h"
#include "preset_fixture.h"
#include "numerics/recipe.h"
#include "base/status.h"

TEST(status_exit_codes) {
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_OK), 0);
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_INPUT), 2);
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_USAGE), 2);
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_IO), 1);
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_CRITERIA), 3);
  CHECK_STR(precis_status_str(PRECIS_E_DOES_NOT_FIT), "does not fit");
  CHECK(precis_fail(PRECIS_E_INPUT, "%s: expected %d", "x.h5", 3) == PRECIS_E_INPUT);
  CHECK_STR(precis_last_error(), "x.h5: expected 3");
  precis_error_prefix("while %s", "reading");
  CHECK_STR(precis_last_error(), "while reading: x.h5: expected 3");
}

TEST(capability_rule) {
  char why[192];
  const precis_spec *fp8 = &preset_recipe("fp8")->spec;
  CHECK(precis_cuda_spec_supported(fp8, 9, 0, why, sizeof why));
  CHECK(precis_cuda_spec_supported(fp8, 8, 9, why, sizeof why));
  CHECK(!precis_cuda_spec_supported(fp8, 8, 0, why, sizeof why));
  CHECK(strstr(why, "sm_80") != NULL);
  CHECK(!precis_cuda_spec_supported(&preset_recipe("bf16")->spec, 7, 5, why, sizeof why));
  CHECK(precis_cuda_spec_supported(&preset_recipe("int8")->spec, 7, 5, why, sizeof why));
}

TEST(atomic_file_keeps_existing_without_force) {
  char dir[] = "/tmp/precis-test-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  precis_atomic_file f;
  CHECK_OK(precis_atomic_open(&f, path, false));
  fputs("first\n", f.fp);
  CHECK_OK(precis_atomic_commit(&f));
  CHECK(precis_atomic_open(&f, path, false) == PRECIS_E_EXISTS);
  CHECK_OK(precis_atomic_open(&f, path, true));
  fputs("second\n", f.fp);
  precis_atomic_abort(&f);
  char *data = NULL;
  CHECK_OK(precis_read_file(path, &data, NULL));
  CHECK_STR(data, "first\n");
  free(data);
  unlink(path);
  rmdir(dir);
}

RUN_TESTS(T(status_exit_codes), T(capability_rule),
          T(atomic_file_keeps_existing_without_force))
