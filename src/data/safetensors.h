/* safetensors reader (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
 * length N, N bytes of JSON ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
 * {...}}), then the data. Opening checks every entry against the file: known dtype, shape product
 * times the element size equals the byte length (no overflow), offsets inside the data area, and
 * tensors that neither overlap nor leave holes (as the reference implementation requires). */
#ifndef PRECIS_SAFETENSORS_H
#define PRECIS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PRECIS_SAFETENSORS_MAX_RANK 8

typedef struct precis_st_tensor {
  char *name;
  char dtype[12];   /* "F32", "F16", "BF16", ... as in the file */
  size_t elem_size; /* bytes per element */
  int rank;
  int64_t shape[PRECIS_SAFETENSORS_MAX_RANK];
  uint64_t begin, end; /* byte offsets relative to the data area */
} precis_st_tensor;

typedef struct precis_safetensors {
  char *path;
  uint64_t file_size;
  uint64_t data_start; /* 8 + N */
  precis_st_tensor *tensors;
  size_t n_tensors;
} precis_safetensors;

precis_status precis_safetensors_open(const char *path, precis_safetensors *out);
const precis_st_tensor *precis_safetensors_find(const precis_safetensors *st, const char *name);
/* Reads a F32, F16 or BF16 tensor widened to float32 (exact); other dtypes are refused. */
precis_status precis_safetensors_read_f32(const precis_safetensors *st, const precis_st_tensor *t, float **out);
void precis_safetensors_close(precis_safetensors *st);

#endif
