/* libFuzzer target: the dataset validator (every command opens a dataset with it). The input is
 * written to a temporary file, opened (structure, attributes, types, shapes), and each workload
 * small enough for the fuzzer's memory limit is loaded (data, checksums, finiteness, the reference
 * spot check) and digested as precis inspect does. Seeds: tests/fuzz/make_seeds.py.
 *
 * precis_dataset_open first validates the file in a child process (src/data/hdf5_guard.c), as every
 * command does: an input that crashes or hangs libhdf5 there is refused like any corrupt file, and
 * the fuzzer goes on. The child's coverage is not seen by libFuzzer, but the parent then runs the
 * same validation in process on every input the child survived, so the feedback is kept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"

#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The child's time limit stays below libFuzzer's -timeout (5 s in run_fuzzers.py), so that a hang
 * inside libhdf5 is the guard's refusal, not a fuzzer timeout. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("PRECIS_HDF5_CHECK_TIMEOUT", "2", 0);
  return 0;
}

/* Larger workloads are refused or allocated exactly as small ones; loading them would only trip
 * libFuzzer's memory limit. */
#define FUZZ_MAX_WORKLOAD_BYTES (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  const char *path = fuzz_input_file(data, size, ".h5");
  precis_dataset *ds = NULL;
  if (precis_dataset_open(path, &ds) == PRECIS_OK) {
    if (ds->n_workloads == 0) abort(); /* an empty /workloads must be refused */
    bool small = true;
    for (size_t i = 0; i < ds->n_workloads; i++) {
      const precis_workload_info *w = &ds->workloads[i];
      if (w->m < 1 || w->n < 1 || w->k < 1 || w->batch < 1) abort();
      if (precis_workload_bytes(w) > FUZZ_MAX_WORKLOAD_BYTES) {
        small = false;
        continue;
      }
      precis_workload_data d;
      if (precis_dataset_load(ds, i, &d) == PRECIS_OK) precis_workload_data_free(&d);
    }
    char id[65];
    if (small) (void)precis_dataset_verify_data_id(ds, id);
  }
  precis_dataset_close(ds);
  unlink(path);
  return 0;
}
