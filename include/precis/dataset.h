/* libprecis: open and inspect a dataset (DESIGN §4, docs/dataset-format.md), and read a workload's
 * arrays. Opening validates the whole structure (in a child process first, so that a file that
 * crashes libhdf5 is refused as corrupt instead of taking the caller down). */
#ifndef PRECIS_PUBLIC_DATASET_H
#define PRECIS_PUBLIC_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct precis_data precis_data;       /* an open dataset */
typedef struct precis_arrays precis_arrays;   /* one workload's arrays, in memory */

precis_status precis_data_open(const char *path, precis_data **out);
void precis_data_close(precis_data *ds);

const char *precis_data_path(const precis_data *ds);
const char *precis_data_id(const precis_data *ds);        /* dataset_id: SHA-256 of the contents */
const char *precis_data_generator(const precis_data *ds);
const char *precis_data_created_utc(const precis_data *ds);
const char *precis_data_suite(const precis_data *ds);     /* the YAML it was made from ("" if none) */
size_t precis_data_workload_count(const precis_data *ds);

/* One workload's attributes; the strings belong to ds (never NULL: "" when the file has none). */
typedef struct precis_workload_desc {
  const char *name, *kind, *description, *a_dist, *b_dist, *reference, *layer, *reference_precision;
  int64_t m, n, k, batch, calib_samples;
  int b_batched;                    /* b is [batch, k, n] */
  int a_f64, b_f64;                 /* a / b stored as float64 */
  int has_c_ref_lo, has_b_ref;
  double reference_error_bound;     /* NaN when the file does not say */
  uint64_t stored_bytes;
} precis_workload_desc;

/* PRECIS_E_USAGE when index >= the workload count. */
precis_status precis_data_workload(const precis_data *ds, size_t index, precis_workload_desc *out);
/* The index of a workload by name; PRECIS_E_USAGE naming it when the dataset has none. */
precis_status precis_data_find(const precis_data *ds, const char *name, size_t *index);

/* Reads a workload's arrays (HDF5 checks every chunk's Fletcher32 checksum). */
precis_status precis_data_load(precis_data *ds, size_t index, precis_arrays **out);
void precis_arrays_free(precis_arrays *w);
/* One array by its dataset name: "a", "b", "c_ref", "ab_abs", "calib/a", "b_ref", "c_ref_lo". a and
 * b come in their stored type (float64 when stored so). NULL when the workload has no such array
 * (the message says so); ndim is 2 or 3, shape[0..ndim). The memory belongs to w. */
const void *precis_arrays_get(const precis_arrays *w, const char *name, precis_dtype *dtype, int64_t shape[3],
                              int *ndim);

#ifdef __cplusplus
}
#endif

#endif
