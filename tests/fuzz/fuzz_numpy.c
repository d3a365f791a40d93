/* libFuzzer target: the NumPy readers (precis import, `file` operands of a suite) and the file-kind
 * sniffer in front of them. The input is written to a temporary file; the kind is detected from its
 * bytes; a .npy is read whole, a .npz has every member listed and read (stored or deflate, CRC
 * checked). An accepted array must hold exactly shape-product elements. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/file_kind.h"
#include "data/npy.h"

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const precis_npy_array *a) {
  uint64_t count = 1;
  for (int i = 0; i < a->rank; i++) count *= (uint64_t)a->shape[i];
  /* Touch every element: ASan reports a buffer shorter than the shape says. */
  volatile float sink = 0;
  for (uint64_t i = 0; a->data && i < count; i++) sink += a->data[i];
  (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  const char *path = fuzz_input_file(data, size, ".bin");
  precis_file_kind kind;
  if (precis_file_kind_detect(path, &kind) == PRECIS_OK) {
    precis_npy_array a;
    if (kind == PRECIS_FILE_NPY && precis_npy_read(path, true, &a) == PRECIS_OK) {
      check(&a);
      precis_npy_array_free(&a);
    } else if (kind == PRECIS_FILE_NPZ) {
      char **names = NULL;
      size_t count = 0;
      if (precis_npz_list(path, &names, &count) == PRECIS_OK) {
        for (size_t i = 0; i < count && i < 16; i++)
          if (precis_npz_read(path, names[i], true, &a) == PRECIS_OK) {
            check(&a);
            precis_npy_array_free(&a);
          }
        precis_npz_names_free(names, count);
      }
      if (precis_npz_read(path, "x", false, &a) == PRECIS_OK) precis_npy_array_free(&a);
    }
  }
  unlink(path);
  return 0;
}
