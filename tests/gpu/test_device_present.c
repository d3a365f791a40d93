/* Smoke test of the CUDA inventory: skipped (77) only on a machine without a CUDA device. */
#include "kernels/cuda_api.h"
#include "gpu_probe.h"
#include "harness.h"
#include "numerics/recipe.h"

static precis_cuda_inventory inv;

TEST(inventory_lists_devices_with_recipes) {
  CHECK(inv.built);
  CHECK(inv.device_count > 0);
  CHECK(inv.runtime_version > 0);
  CHECK(inv.cublaslt_version > 0);
  for (int d = 0; d < inv.device_count; d++) {
    CHECK(inv.devices[d].name[0] != '\0');
    CHECK(inv.devices[d].sm_count > 0);
    CHECK(inv.devices[d].mem_total_bytes > 0);
    CHECK(inv.devices[d].recipe_supported[precis_recipe_preset_index("fp32")]);
  }
}

int main(void) {
  int probe = precis_gpu_probe();
  if (probe != 0) return probe;
  /* A device is there: an inventory that cannot list it is a failure, not a skip. */
  if (precis_cuda_inventory_get(&inv) != PRECIS_OK || inv.device_count == 0) {
    printf("FAIL: the CUDA inventory lists no device on a machine that has one: %s\n", inv.error);
    return 1;
  }
  static const harness_test tests[] = {T(inventory_lists_devices_with_recipes)};
  int rc = harness_run(tests, 1);
  precis_cuda_inventory_free(&inv);
  return rc;
}
