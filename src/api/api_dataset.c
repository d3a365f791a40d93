/* libprecis: open and inspect a dataset, read a workload's arrays (include/precis/dataset.h) over
 * data/dataset.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "data/dataset.h"
#include "precis/dataset.h"

struct precis_data {
  precis_dataset *ds;
};

struct precis_arrays {
  precis_workload_info info; /* a shallow copy: its strings belong to the dataset */
  precis_workload_data data;
};

precis_status precis_data_open(const char *path, precis_data **out) {
  if (!out) return precis_fail(PRECIS_E_USAGE, "precis_data_open: no output");
  *out = NULL;
  if (!path) return precis_fail(PRECIS_E_USAGE, "dataset path: NULL");
  precis_data *d = calloc(1, sizeof *d);
  if (!d) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_status st = precis_dataset_open(path, &d->ds);
  if (st != PRECIS_OK) {
    free(d);
    return st;
  }
  *out = d;
  return PRECIS_OK;
}

void precis_data_close(precis_data *d) {
  if (!d) return;
  precis_dataset_close(d->ds);
  free(d);
}

static const char *or_empty(const char *s) { return s ? s : ""; }

const char *precis_data_path(const precis_data *d) { return d ? or_empty(d->ds->path) : ""; }
const char *precis_data_id(const precis_data *d) { return d ? or_empty(d->ds->dataset_id) : ""; }
const char *precis_data_generator(const precis_data *d) { return d ? or_empty(d->ds->generator) : ""; }
const char *precis_data_created_utc(const precis_data *d) { return d ? or_empty(d->ds->created_utc) : ""; }
const char *precis_data_suite(const precis_data *d) { return d ? or_empty(d->ds->suite) : ""; }
size_t precis_data_workload_count(const precis_data *d) { return d ? d->ds->n_workloads : 0; }

precis_status precis_data_workload(const precis_data *d, size_t index, precis_workload_desc *out) {
  if (!d || !out) return precis_fail(PRECIS_E_USAGE, "precis_data_workload: NULL argument");
  if (index >= d->ds->n_workloads)
    return precis_fail(PRECIS_E_USAGE, "%s: workload index %zu: the dataset has %zu workloads", d->ds->path, index,
                       d->ds->n_workloads);
  const precis_workload_info *w = &d->ds->workloads[index];
  memset(out, 0, sizeof *out);
  out->name = or_empty(w->name);
  out->kind = or_empty(w->kind);
  out->description = or_empty(w->description);
  out->a_dist = or_empty(w->a_dist);
  out->b_dist = or_empty(w->b_dist);
  out->reference = or_empty(w->reference);
  out->layer = or_empty(w->layer);
  out->reference_precision = or_empty(w->reference_precision);
  out->m = w->m, out->n = w->n, out->k = w->k, out->batch = w->batch, out->calib_samples = w->calib_samples;
  out->b_batched = w->b_batched;
  out->a_f64 = w->a_f64, out->b_f64 = w->b_f64;
  out->has_c_ref_lo = w->has_c_ref_lo, out->has_b_ref = w->has_b_ref;
  out->reference_error_bound = w->reference_error_bound;
  out->stored_bytes = w->stored_bytes;
  return PRECIS_OK;
}

precis_status precis_data_find(const precis_data *d, const char *name, size_t *index) {
  if (!d || !name || !index) return precis_fail(PRECIS_E_USAGE, "precis_data_find: NULL argument");
  for (size_t i = 0; i < d->ds->n_workloads; i++)
    if (strcmp(d->ds->workloads[i].name, name) == 0) {
      *index = i;
      return PRECIS_OK;
    }
  return precis_fail(PRECIS_E_USAGE, "%s: no workload named \"%s\"", d->ds->path, name);
}

precis_status precis_data_load(precis_data *d, size_t index, precis_arrays **out) {
  if (!out) return precis_fail(PRECIS_E_USAGE, "precis_data_load: no output");
  *out = NULL;
  if (!d) return precis_fail(PRECIS_E_USAGE, "precis_data_load: no dataset");
  if (index >= d->ds->n_workloads)
    return precis_fail(PRECIS_E_USAGE, "%s: workload index %zu: the dataset has %zu workloads", d->ds->path, index,
                       d->ds->n_workloads);
  precis_arrays *w = calloc(1, sizeof *w);
  if (!w) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_status st = precis_dataset_load(d->ds, index, &w->data);
  if (st != PRECIS_OK) {
    free(w);
    return st;
  }
  w->info = d->ds->workloads[index];
  *out = w;
  return PRECIS_OK;
}

void precis_arrays_free(precis_arrays *w) {
  if (!w) return;
  precis_workload_data_free(&w->data);
  free(w);
}

static void set_shape(int64_t shape[3], int *ndim, int64_t d0, int64_t d1, int64_t d2) {
  shape[0] = d0, shape[1] = d1, shape[2] = d2;
  *ndim = d2 ? 3 : 2;
}

const void *precis_arrays_get(const precis_arrays *w, const char *name, precis_dtype *dtype, int64_t shape[3],
                              int *ndim) {
  precis_dtype t_unused;
  int64_t s_unused[3];
  int n_unused;
  if (!dtype) dtype = &t_unused;
  if (!shape) shape = s_unused;
  if (!ndim) ndim = &n_unused;
  if (!w || !name) {
    precis_fail(PRECIS_E_USAGE, "precis_arrays_get: NULL argument");
    return NULL;
  }
  const precis_workload_info *i = &w->info;
  const precis_workload_data *d = &w->data;
  const void *p = NULL;
  *dtype = PRECIS_DTYPE_F64;
  if (strcmp(name, "a") == 0) {
    p = d->a64 ? (const void *)d->a64 : (const void *)d->a;
    *dtype = d->a64 ? PRECIS_DTYPE_F64 : PRECIS_DTYPE_F32;
    set_shape(shape, ndim, i->batch, i->m, i->k);
  } else if (strcmp(name, "b") == 0 || strcmp(name, "b_ref") == 0) {
    bool ref = name[1] == '_';
    p = ref ? (const void *)d->b_ref : d->b64 ? (const void *)d->b64 : (const void *)d->b;
    *dtype = !ref && d->b64 ? PRECIS_DTYPE_F64 : PRECIS_DTYPE_F32;
    if (i->b_batched && !ref) set_shape(shape, ndim, i->batch, i->k, i->n);
    else set_shape(shape, ndim, i->k, i->n, 0);
  } else if (strcmp(name, "c_ref") == 0 || strcmp(name, "ab_abs") == 0 || strcmp(name, "c_ref_lo") == 0) {
    p = name[0] == 'a' ? d->ab_abs : strcmp(name, "c_ref") == 0 ? d->c_ref : d->c_ref_lo;
    set_shape(shape, ndim, i->batch, i->m, i->n);
  } else if (strcmp(name, "calib/a") == 0) {
    p = d->calib_a;
    *dtype = PRECIS_DTYPE_F32;
    set_shape(shape, ndim, i->calib_samples, i->m, i->k);
  } else {
    precis_fail(PRECIS_E_USAGE, "array \"%s\": expected a, b, c_ref, ab_abs, calib/a, b_ref or c_ref_lo", name);
    return NULL;
  }
  if (!p) precis_fail(PRECIS_E_USAGE, "workload %s has no array \"%s\"", i->name, name);
  return p;
}
