/* What the layers above kernels/ (cli/, the tests, src/api/) may ask of the CUDA side without
 * including a CUDA header. Implemented in kernels/ when CUDA is built, and by kernels/cuda_stub.c
 * otherwise (then the only file of the kernels library). eval/ and data/ sit below kernels/
 * (src/layers.txt): they never call these; the cuda backend reaches the runner as a precis_backend
 * (a table of function pointers) and the device references reach gen as a precis_reference_device. */
#ifndef PRECIS_CUDA_API_H
#define PRECIS_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "eval/backend.h"
#include "eval/capability.h" /* the route table, which callers of the inventory ask too */
#include "numerics/recipe.h"

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
  char cublas_error[512]; /* why cuBLAS or cuBLASLt could not be loaded (kernels/cublas_lazy.c); "" when they were */
  char error[256];        /* when no device is usable: the CUDA error name and string */
  int device_count;
  precis_device_info *devices; /* malloc'ed, device_count entries */
} precis_cuda_inventory;

precis_status precis_cuda_inventory_get(precis_cuda_inventory *out);
void precis_cuda_inventory_free(precis_cuda_inventory *inv);
/* gen --reference-device cuda (kernels/reference_dgemm.c): c_ref = a.b and (when ab_abs is not
 * NULL) ab_abs = |a|.|b| by cublasDgemm on CUDA device `device`, in calls of
 * PRECIS_REFERENCE_BLOCK_ROWS rows as on the CPU; shapes as precis_reference_compute. Without
 * CUDA: PRECIS_E_NOT_BUILT. */
precis_status precis_cuda_reference_compute(int device, const float *a, const float *b, int64_t batch, int64_t m,
                                            int64_t n, int64_t k, bool b_batched, double *c_ref, double *ab_abs);
/* The `reference` text of those references: device, compute capability, cuBLAS and CUDA versions. */
precis_status precis_cuda_reference_describe(int device, char *text, size_t len);
/* Those two as the table gen takes (precis_gen_options.reference_cuda; data/generate.h, which this
 * header does not include: its distributions.h and numerics/quantize.h both name PRECIS_OPERAND_A). */
struct precis_reference_device;
const struct precis_reference_device *precis_cuda_reference_device(void);

/* The cuda backend (kernels/cuda_backend.c); NULL when this binary was built without CUDA. */
const precis_backend *precis_backend_cuda(void);

/* libprecis's precis_emulate_device (kernels/cuda_device_gemm.c; NOT YET RUN ON A GPU): the cuda
 * backend's run_case on CUDA device `device` with io's device arrays read and written in place
 * (precis_case_options.device_io), after the work queued on `stream` (a cudaStream_t; 0: the legacy
 * default stream). The case's row status and reason come back in out. PRECIS_E_NO_DEVICE without a
 * usable device, PRECIS_E_USAGE for a bad ordinal or a pointer that is not memory of that device;
 * without CUDA: PRECIS_E_NOT_BUILT. */
precis_status precis_cuda_device_gemm(int device, uintptr_t stream, const precis_spec *spec,
                                      const precis_workload_info *w, const precis_device_io *io,
                                      precis_case_output *out);
/* cudaMalloc / cudaFree on CUDA device `device` (the thread's current device left as it was). */
precis_status precis_cuda_device_alloc(int device, size_t bytes, void **out);
void precis_cuda_device_free(int device, void *p);

#endif
