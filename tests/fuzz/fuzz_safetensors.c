/* libFuzzer target: the safetensors reader (precis import, `file` operands of a suite). The input
 * is written to a temporary file and opened; every tensor the header accepts is then read, which
 * checks that the accepted offsets really lie inside the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/safetensors.h"

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  const char *path = fuzz_input_file(data, size, ".safetensors");
  precis_safetensors st;
  memset(&st, 0, sizeof st);
  if (precis_safetensors_open(path, &st) == PRECIS_OK) {
    for (size_t i = 0; i < st.n_tensors; i++) {
      const precis_st_tensor *t = &st.tensors[i];
      if (t->end < t->begin || st.data_start + t->end > st.file_size) abort(); /* accepted, but outside the file */
      if (precis_safetensors_find(&st, t->name) == NULL) abort();
      float *values = NULL;
      if (precis_safetensors_read_f32(&st, t, &values) == PRECIS_OK) free(values);
    }
    precis_safetensors_close(&st);
  }
  unlink(path);
  return 0;
}
