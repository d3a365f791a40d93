/* The cuda backend's high-precision recipes (issue 19, docs/high-precision.md): fp64 (one cuBLASLt
 * DGEMM), fp64-emu (cuBLAS's own FP64 fixed-point emulation, found at run time), the float splits
 * and the Ozaki recipes (several cuBLASLt GEMMs, src/eval/split_plan.h). Kept apart from
 * cuda_backend.c, which hands these specs over after its support check. */
#ifndef PRECIS_KERNELS_CUDA_HIPREC_H
#define PRECIS_KERNELS_CUDA_HIPREC_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#include "eval/backend.h"
#include "data/dataset.h"
#include "kernels/device_memory.h"
#include "numerics/spec.h"
#include "base/status.h"

/* What the backend lends one case: its worker's stream, events and handle, and its allocator. */
typedef struct precis_cuda_hiprec_env {
  cublasLtHandle_t lt;
  cudaStream_t stream;
  cudaEvent_t start, stop;
  int cc_major, cc_minor;
  int lt_version;
  precis_dmem *mem;
  long long l2_bytes; /* cudaDeviceProp.l2CacheSize, for the rows' l2_resident */
} precis_cuda_hiprec_env;

/* true for the specs precis_cuda_hiprec_run carries out: any split, and the fp64 routes. */
bool precis_cuda_hiprec_handles(const precis_spec *spec);

/* Runs one case. Errors that concern only this case come back as a status (the backend turns them
 * into the row's status and reason, as for its other recipes); out->c (and out->c64 for out=fp64)
 * on success. fp64-emu whose mantissa-bit-count pointer reads -1 (cuBLAS ran native FP64) returns
 * PRECIS_E_UNSUPPORTED saying so. */
precis_status precis_cuda_hiprec_run(const precis_cuda_hiprec_env *env, const precis_spec *spec,
                                     const precis_workload_info *w, const precis_workload_data *data,
                                     const precis_case_options *o, precis_case_output *out);

#endif
