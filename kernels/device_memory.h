/* The tracking allocator: every device allocation precis makes for a case (inputs, converted
 * operands, outputs, scales, the cuBLASLt workspace, the L2 flush buffer) goes through here, so
 * that `tracked_peak` is the evaluator's own footprint (DESIGN §6). */
#ifndef PRECIS_KERNELS_DEVICE_MEMORY_H
#define PRECIS_KERNELS_DEVICE_MEMORY_H

#include <stddef.h>

#include "base/status.h"

typedef struct precis_dmem_block {
  void *ptr;
  size_t bytes;
  const char *what;
} precis_dmem_block;

typedef struct precis_dmem {
  precis_dmem_block *blocks;
  size_t count, capacity;
  long long current_bytes, peak_bytes;
} precis_dmem;

/* cudaMalloc of `bytes` (at least 1) for `what` (a static string naming the buffer). Out of device
 * memory: PRECIS_E_DOES_NOT_FIT with the bytes requested, free and total, and what precis already
 * holds; the CUDA error is cleared so that the run can go on. */
precis_status precis_dmem_alloc(precis_dmem *t, size_t bytes, const char *what, void **out);
void precis_dmem_free(precis_dmem *t, void *ptr);
/* Frees every block still held (the peak is kept). */
void precis_dmem_free_all(precis_dmem *t);
void precis_dmem_destroy(precis_dmem *t);

#endif
