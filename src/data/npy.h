/* NumPy's .npy and .npz files, read strictly (issue 15): where users' activations live.
 *
 * .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): the magic
 * "\x93NUMPY", a major version 1, 2 or 3 (a 2- or 4-byte little-endian header length), then a
 * Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (m, k), } and the data.
 * Accepted dtypes: float16, float32, float64, little- or big-endian ('<f2', '>f4', '=f8', ...),
 * widened (f2) or rounded to nearest (f8) to float32; Fortran order is reordered to C order. The
 * data must be exactly shape-product times itemsize bytes. Anything else (objects, structured
 * types, integers, bfloat16 saved as the void type '<V2') is refused with a message naming the
 * file and what was expected.
 *
 * .npz: a zip archive of NAME.npy members, stored (np.savez) or deflate-compressed
 * (np.savez_compressed), with zip64 sizes; the CRC-32 of each member read is checked. */
#ifndef PRECIS_NPY_H
#define PRECIS_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PRECIS_NPY_MAX_RANK 8

typedef struct precis_npy_array {
  int rank;
  int64_t shape[PRECIS_NPY_MAX_RANK];
  char descr[16]; /* as in the header: "<f4" */
  float *data;    /* C order, float32; NULL when only the header was read */
} precis_npy_array;

/* Reads a .npy file (want_data false: only the header, to list or size it). */
precis_status precis_npy_read(const char *path, bool want_data, precis_npy_array *out);

/* The members of a .npz archive, names without the ".npy" suffix (malloc'ed array of malloc'ed
 * strings; precis_npz_names_free). */
precis_status precis_npz_list(const char *path, char ***names, size_t *count);
void precis_npz_names_free(char **names, size_t count);
/* Reads member `name` (with or without ".npy"); an unknown name lists the closest members. */
precis_status precis_npz_read(const char *path, const char *name, bool want_data, precis_npy_array *out);

void precis_npy_array_free(precis_npy_array *a);

#endif
