/* Which recipe runs on which compute capability: plain C, shared by `precis info` and the cuda
 * backend, and tested on the CPU. */
#include <stdio.h>

#include "cuda_api.h"

bool precis_cuda_recipe_supported(const precis_recipe *recipe, int cc_major, int cc_minor, char *reason, size_t len) {
  int cc = cc_major * 10 + cc_minor;
  if (cc >= recipe->min_compute_capability) {
    if (reason && len) reason[0] = '\0';
    return true;
  }
  static const char *why[PRECIS_RECIPE_COUNT] = {
      [PRECIS_RECIPE_FP32] = "needs sm_50 or newer",
      [PRECIS_RECIPE_TF32] = "TF32 tensor cores need sm_80 (Ampere) or newer",
      [PRECIS_RECIPE_FP16] = "FP16 tensor cores need sm_70 (Volta) or newer",
      [PRECIS_RECIPE_FP16ACC16] = "FP16 tensor cores need sm_70 (Volta) or newer",
      [PRECIS_RECIPE_BF16] = "BF16 needs sm_80 (Ampere) or newer",
      [PRECIS_RECIPE_INT8] = "cuBLASLt INT8 IMMA needs sm_75 (Turing) or newer",
      [PRECIS_RECIPE_FP8] = "FP8 (e4m3) matmul needs sm_89 (Ada) or sm_90 (Hopper) or newer",
  };
  if (reason && len)
    snprintf(reason, len, "%s; device is sm_%d%d", why[recipe->id] ? why[recipe->id] : "unsupported", cc_major,
             cc_minor);
  return false;
}
