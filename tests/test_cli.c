/* Foundation: statuses, recipes, the capability rule, atomic files. */
#include <unistd.h>

#include "cuda_api.h"
#include "fileio.h"
#include "harness.h"
#include "recipe.h"
#include "status.h"

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

TEST(recipe_table_is_consistent) {
  for (int i = 0; i < PRECIS_RECIPE_COUNT; i++) {
    const precis_recipe *r = precis_recipe_get((precis_recipe_id)i);
    CHECK(r && r->id == (precis_recipe_id)i && r->name && r->description);
    CHECK(precis_recipe_by_name(r->name) == r);
  }
  CHECK(precis_recipe_by_name("fp12") == NULL);
}

TEST(recipe_list_parsing) {
  precis_recipe_id ids[PRECIS_RECIPE_COUNT];
  size_t n = 0;
  CHECK_OK(precis_recipe_parse_list("fp32,bf16,int8", ids, &n));
  CHECK_EQ_INT(n, 3);
  CHECK(ids[0] == PRECIS_RECIPE_FP32 && ids[1] == PRECIS_RECIPE_BF16 && ids[2] == PRECIS_RECIPE_INT8);
  CHECK(precis_recipe_parse_list("fp32,fp32", ids, &n) == PRECIS_E_USAGE);
  CHECK(precis_recipe_parse_list("fp32,,bf16", ids, &n) == PRECIS_E_USAGE);
  CHECK(precis_recipe_parse_list("fp9", ids, &n) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "fp9") != NULL);
  CHECK_OK(precis_recipe_parse_list("all", ids, &n));
  CHECK_EQ_INT(n, PRECIS_RECIPE_COUNT);
}

TEST(capability_rule) {
  char why[192];
  const precis_recipe *fp8 = precis_recipe_get(PRECIS_RECIPE_FP8);
  CHECK(precis_cuda_recipe_supported(fp8, 9, 0, why, sizeof why));
  CHECK(precis_cuda_recipe_supported(fp8, 8, 9, why, sizeof why));
  CHECK(!precis_cuda_recipe_supported(fp8, 8, 0, why, sizeof why));
  CHECK(strstr(why, "sm_80") != NULL);
  CHECK(!precis_cuda_recipe_supported(precis_recipe_get(PRECIS_RECIPE_BF16), 7, 5, why, sizeof why));
  CHECK(precis_cuda_recipe_supported(precis_recipe_get(PRECIS_RECIPE_INT8), 7, 5, why, sizeof why));
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

RUN_TESTS(T(status_exit_codes), T(recipe_table_is_consistent), T(recipe_list_parsing), T(capability_rule),
          T(atomic_file_keeps_existing_without_force))
