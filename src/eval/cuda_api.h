/* What src/ may ask of the CUDA side without including a CUDA header. Implemented in kernels/
 * when CUDA is built, and by cuda_stub.c otherwise. */
#ifndef PRECIS_CUDA_API_H
#define PRECIS_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numerics/recipe.h"
#include "numerics/spec.h"
#include "base/status.h"

typedef struct precis_device_info {
  int index;
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  long long mem_total_bytes, mem_free_bytes;
  long long l2_bytes;
  /* Per preset, in table order (precis_preset_at). */
  bool recipe_supported[PRECIS_RECIPE_PRESET_MAX];
  char recipe_reason[PRECIS_RECIPE_PRESET_MAX][192]; /* why not, when unsupported */
} precis_device_info;

typedef struct precis_cuda_inventory {
  bool built;             /* false: this binary has no CUDA backend */
  int driver_version;     /* cudaDriverGetVersion, e.g. 13000; 0 when unknown */
  int runtime_version;    /* cudaRuntimeGetVersion */
  int cublas_version;     /* cublasGetVersion (needs no device); 0 when unknown */
  long long cublaslt_version; /* cublasLtGetVersion */
  char error[256];        /* when no device is usable: the CUDA error name and string */
  int device_count;
  precis_device_info *devices; /* malloc'ed, device_count entries */
} precis_cuda_inventory;

precis_status precis_cuda_inventory_get(precis_cuda_inventory *out);
void precis_cuda_inventory_free(precis_cuda_inventory *inv);
/* Capability rule for one spec on a compute capability (shared by info, recipes, explain and the
 * backend): a route (gemm_plan.h) and its minimum compute capability. */
bool precis_cuda_spec_supported(const precis_spec *spec, int cc_major, int cc_minor, char *reason, size_t len);
/* Specs the cuda backend runs by exact dequantization on the host (issue 16): weight-only with a
 * bf16/fp16 activation and the same output format, and MX/NVFP4 on both operands with a bf16 output
 * (nv: the tensor scales go to alpha at run time). true with the
 * spec of the GEMM that then runs (bf16 or fp16 operands, fp32 accumulation) and a line for reports.
 * The dequantized operands are precis_cpu_quant_dequantized_inputs (cpu_quantized.h). */
bool precis_lt_dequant_emulation(const precis_spec *spec, precis_spec *sub, char *how, size_t len);
/* The same on a device of compute capability cc_major.cc_minor: false when a route runs the spec
 * natively there (mxfp8/mxfp4/nvfp4 on cc >= 10.0), else precis_lt_dequant_emulation. Every caller
 * that picks between a native route and the emulation asks this. */
bool precis_lt_emulated_on(const precis_spec *spec, int cc_major, int cc_minor, precis_spec *sub, char *how,
                           size_t len);

/* gen --reference-device cuda (kernels/reference_dgemm.c): c_ref = a.b and (when ab_abs is not
 * NULL) ab_abs = |a|.|b| by cublasDgemm on CUDA device `device`, in calls of
 * PRECIS_REFERENCE_BLOCK_ROWS rows as on the CPU; shapes as precis_reference_compute. Without
 * CUDA: PRECIS_E_NOT_BUILT. */
precis_status precis_cuda_reference_compute(int device, const float *a, const float *b, int64_t batch, int64_t m,
                                            int64_t n, int64_t k, bool b_batched, double *c_ref, double *ab_abs);
/* The `reference` text of those references: device, compute capability, cuBLAS and CUDA versions. */
precis_status precis_cuda_reference_describe(int device, char *text, size_t len);

#endif
