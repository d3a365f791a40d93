/* The dataset format of DESIGN §4 (docs/dataset-format.md): reader, validator and writer, and the
 * writer of evaluated outputs (--save-outputs). HDF5 prints nothing itself: its error stack is
 * turned into precis messages that name the file and the object. */
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dataset_digest.h"
#include "base/fileio.h"
#include "base/escape.h"
#include "base/huge_pages.h"

/* ------------------------------------------------------------------------------------------------
 * HDF5 errors */

static void hdf5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

typedef struct hdf5_error_scan {
  bool checksum;
  char innermost[256];
} hdf5_error_scan;

static herr_t scan_error(unsigned n, const H5E_error2_t *err, void *data) {
  hdf5_error_scan *scan = data;
  const char *desc = err->desc ? err->desc : "";
  if (n == 0) {
    /* A failed write() comes as "file write failed: time = ..., error message = 'File too large', ...",
     * over two lines: keep the system's words, on one line. */
    const char *said = strstr(desc, "error message = '");
    if (said) {
      said += strlen("error message = '");
      const char *end = strchr(said, '\'');
      snprintf(scan->innermost, sizeof scan->innermost, "%.*s", end ? (int)(end - said) : 200, said);
    } else {
      snprintf(scan->innermost, sizeof scan->innermost, "%s", desc);
    }
    for (char *p = scan->innermost; *p; p++)
      if (*p == '\n' || *p == '\r') *p = ' ';
  }
  if (strcasestr(desc, "checksum") || strcasestr(desc, "fletcher32")) scan->checksum = true;
  return 0;
}

/* Cleanup calls after a failure clear HDF5's stack; the writers keep what it said here first. */
static _Thread_local hdf5_error_scan remembered_error;

/* Reads the current HDF5 error stack (then clears it). */
static hdf5_error_scan hdf5_last_error(void) {
  hdf5_error_scan scan = {false, ""};
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, scan_error, &scan);
  H5Eclear2(H5E_DEFAULT);
  if (!scan.innermost[0] && remembered_error.innermost[0]) scan = remembered_error;
  remembered_error.innermost[0] = '\0';
  remembered_error.checksum = false;
  if (!scan.innermost[0]) snprintf(scan.innermost, sizeof scan.innermost, "HDF5 call failed");
  return scan;
}

static void hdf5_remember_error(void) {
  hdf5_error_scan scan = {false, ""};
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, scan_error, &scan);
  if (scan.innermost[0]) remembered_error = scan;
}

static void close_id(hid_t *id) {
  if (*id < 0) return;
  switch (H5Iget_type(*id)) {
  case H5I_FILE: H5Fclose(*id); break;
  case H5I_GROUP: H5Gclose(*id); break;
  case H5I_DATASET: H5Dclose(*id); break;
  case H5I_DATASPACE: H5Sclose(*id); break;
  case H5I_DATATYPE: H5Tclose(*id); break;
  case H5I_ATTR: H5Aclose(*id); break;
  case H5I_GENPROP_LST: H5Pclose(*id); break;
  default: break;
  }
  *id = -1;
}

/* ------------------------------------------------------------------------------------------------
 * Describing what was found */

static void describe_type(hid_t type, char *buf, size_t len) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  switch (cls) {
  case H5T_FLOAT: snprintf(buf, len, "float%zu", size * 8); break;
  case H5T_INTEGER: snprintf(buf, len, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", size * 8); break;
  case H5T_STRING: snprintf(buf, len, "string"); break;
  case H5T_COMPOUND: snprintf(buf, len, "compound"); break;
  case H5T_ENUM: snprintf(buf, len, "enum (e.g. bool)"); break;
  case H5T_ARRAY: snprintf(buf, len, "array"); break;
  case H5T_VLEN: snprintf(buf, len, "variable-length sequence"); break;
  case H5T_OPAQUE: snprintf(buf, len, "opaque"); break;
  case H5T_REFERENCE: snprintf(buf, len, "reference"); break;
  case H5T_BITFIELD: snprintf(buf, len, "bitfield"); break;
  default: snprintf(buf, len, "unknown type"); break;
  }
}

static void describe_dims(int rank, const int64_t *dims, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < rank && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, i ? "," : "", dims[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

/* Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or -1 when all of s is. Names and texts from a file end up
 * in JSON, HTML and CSV reports, which must be valid UTF-8 themselves. */
static long utf8_invalid_at(const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  size_t i = 0;
  while (s[i]) {
    unsigned c = s[i];
    size_t extra;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) extra = 0;
    else if (c >= 0xC2 && c <= 0xDF) extra = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else return (long)i;
    for (size_t j = 1; j <= extra; j++) {
      unsigned t = s[i + j];
      if (t < (j == 1 ? lo : 0x80) || t > (j == 1 ? hi : 0xBF)) return (long)i;
    }
    i += extra + 1;
  }
  return -1;
}

/* text with every byte outside printable ASCII written as \xNN, for messages about bad names. */
static void printable_escaped(const char *text, char *buf, size_t len) {
  size_t used = 0;
  for (const unsigned char *p = (const unsigned char *)text; *p && used + 5 < len; p++) {
    if (*p >= 0x20 && *p < 0x7F) buf[used++] = (char)*p;
    else used += (size_t)snprintf(buf + used, len - used, "\\x%02X", *p);
  }
  buf[used] = '\0';
}

/* ------------------------------------------------------------------------------------------------
 * Attributes: strings variable- or fixed-length, integers of any width and sign */

static precis_status open_attr(const char *file, hid_t obj, const char *obj_path, const char *name, const char *expected,
                               hid_t *attr) {
  htri_t exists = H5Aexists(obj, name);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return precis_fail(PRECIS_E_INPUT, "%s: %s: missing attribute %s (expected %s)", file, obj_path, name, expected);
  }
  *attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (*attr < 0)
    return precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s cannot be opened: %s", file, obj_path, name,
                       hdf5_last_error().innermost);
  return PRECIS_OK;
}

static precis_status check_single_element(const char *file, hid_t attr, const char *obj_path, const char *name,
                                          const char *expected) {
  hid_t space = H5Aget_space(attr);
  hssize_t points = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  if (space >= 0) H5Sclose(space);
  if (points != 1)
    return precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected a single %s, found %lld elements", file, obj_path,
                       name, expected, (long long)points);
  return PRECIS_OK;
}

static precis_status read_string_attr(const char *file, hid_t obj, const char *obj_path, const char *name, char **out) {
  hid_t attr = -1, ftype = -1, mtype = -1;
  char *raw = NULL;
  precis_status st = open_attr(file, obj, obj_path, name, "a string", &attr);
  if (st != PRECIS_OK) goto done;
  ftype = H5Aget_type(attr);
  if (H5Tget_class(ftype) != H5T_STRING) {
    char found[64];
    describe_type(ftype, found, sizeof found);
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected a string, found %s", file, obj_path, name, found);
    goto done;
  }
  if ((st = check_single_element(file, attr, obj_path, name, "string")) != PRECIS_OK) goto done;
  mtype = H5Tcopy(H5T_C_S1);
  H5Tset_cset(mtype, H5Tget_cset(ftype));
  if (H5Tis_variable_str(ftype) > 0) {
    H5Tset_size(mtype, H5T_VARIABLE);
    if (H5Aread(attr, mtype, &raw) < 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s cannot be read: %s", file, obj_path, name,
                       hdf5_last_error().innermost);
      goto done;
    }
    *out = precis_strdup(raw ? raw : "");
    if (raw) H5free_memory(raw);
    raw = NULL;
  } else {
    size_t size = H5Tget_size(ftype);
    H5Tset_size(mtype, size);
    H5Tset_strpad(mtype, H5T_STR_NULLPAD);
    char *buf = calloc(size + 1, 1);
    if (!buf) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto done;
    }
    if (H5Aread(attr, mtype, buf) < 0) {
      free(buf);
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s cannot be read: %s", file, obj_path, name,
                       hdf5_last_error().innermost);
      goto done;
    }
    if (H5Tget_strpad(ftype) == H5T_STR_SPACEPAD)
      for (size_t len = strlen(buf); len > 0 && buf[len - 1] == ' '; len--) buf[len - 1] = '\0';
    *out = buf;
  }
  if (!*out) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
  long bad = *out ? utf8_invalid_at(*out) : -1;
  if (bad >= 0)
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected UTF-8 text, found the byte 0x%02X at offset %ld", file,
                     obj_path, name, (unsigned)(unsigned char)(*out)[bad], bad);
  /* A refused value is not handed out: callers free only what they were given with PRECIS_OK. */
  if (st != PRECIS_OK) {
    free(*out);
    *out = NULL;
  }
done:
  close_id(&mtype);
  close_id(&ftype);
  close_id(&attr);
  return st;
}

/* Any integer type; `value` holds it when it fits in int64 (u64 values above INT64_MAX are refused
 * except through `u64`). */
static precis_status read_integer_attr(const char *file, hid_t obj, const char *obj_path, const char *name,
                                       int64_t *value, uint64_t *u64) {
  hid_t attr = -1, ftype = -1;
  precis_status st = open_attr(file, obj, obj_path, name, "an integer", &attr);
  if (st != PRECIS_OK) goto done;
  ftype = H5Aget_type(attr);
  if (H5Tget_class(ftype) != H5T_INTEGER) {
    char found[64];
    describe_type(ftype, found, sizeof found);
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected an integer, found %s", file, obj_path, name, found);
    goto done;
  }
  if ((st = check_single_element(file, attr, obj_path, name, "integer")) != PRECIS_OK) goto done;
  if (H5Tget_sign(ftype) == H5T_SGN_NONE) {
    uint64_t v = 0;
    if (H5Aread(attr, H5T_NATIVE_UINT64, &v) < 0) goto read_failed;
    if (u64) *u64 = v;
    if (value) {
      if (v > (uint64_t)INT64_MAX) {
        st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: %" PRIu64 " is out of range", file, obj_path, name, v);
        goto done;
      }
      *value = (int64_t)v;
    }
  } else {
    int64_t v = 0;
    if (H5Aread(attr, H5T_NATIVE_INT64, &v) < 0) goto read_failed;
    if (value) *value = v;
    if (u64) {
      if (v < 0) {
        st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected a non-negative integer, found %" PRId64, file,
                         obj_path, name, v);
        goto done;
      }
      *u64 = (uint64_t)v;
    }
  }
  goto done;
read_failed:
  st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s cannot be read: %s", file, obj_path, name,
                   hdf5_last_error().innermost);
done:
  close_id(&ftype);
  close_id(&attr);
  return st;
}

/* An optional float attribute of any float type; *present false when absent. */
static precis_status read_optional_double_attr(const char *file, hid_t obj, const char *obj_path, const char *name,
                                               double *value, bool *present) {
  *present = false;
  if (H5Aexists(obj, name) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return PRECIS_OK;
  }
  hid_t attr = -1, ftype = -1;
  precis_status st = open_attr(file, obj, obj_path, name, "a float", &attr);
  if (st != PRECIS_OK) return st;
  ftype = H5Aget_type(attr);
  if (ftype < 0 || H5Tget_class(ftype) != H5T_FLOAT) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected a float", file, obj_path, name);
    goto done;
  }
  if ((st = check_single_element(file, attr, obj_path, name, "float")) != PRECIS_OK) goto done;
  if (H5Aread(attr, H5T_NATIVE_DOUBLE, value) < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s cannot be read: %s", file, obj_path, name,
                     hdf5_last_error().innermost);
    goto done;
  }
  *present = true;
done:
  close_id(&ftype);
  close_id(&attr);
  return st;
}

static precis_status read_positive_attr(const char *file, hid_t obj, const char *obj_path, const char *name,
                                        int64_t *value) {
  precis_status st = read_integer_attr(file, obj, obj_path, name, value, NULL);
  if (st == PRECIS_OK && *value <= 0)
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute %s: expected a positive integer, found %" PRId64 "%s", file,
                     obj_path, name, *value, *value == 0 ? " (zero-sized dimensions are refused)" : "");
  return st;
}

/* ------------------------------------------------------------------------------------------------
 * Datasets: type, rank, shape, filters */

typedef enum element_type { ELEM_F32, ELEM_F64 } element_type;

static const char *element_type_name(element_type t) { return t == ELEM_F32 ? "float32" : "float64"; }

typedef struct dataset_facts {
  bool fletcher32;
  bool gzip;
  uint64_t stored_bytes;
} dataset_facts;

/* Checks that `path` is a dataset of element type `type` and one of the shapes given (rank_a with
 * dims_a, or rank_b with dims_b when rank_b > 0); reports the first mismatch as
 * "FILE: PATH: expected float64 [1,64,32], found float32 [1,64,32]". *which is 0 or 1 (which
 * shape matched). */
static precis_status check_dataset(const char *file, hid_t loc, const char *name, const char *path, element_type type, int rank_a,
                                   const int64_t *dims_a, int rank_b, const int64_t *dims_b, int *which,
                                   dataset_facts *facts) {
  hid_t dset = -1, ftype = -1, space = -1, dcpl = -1;
  precis_status st = PRECIS_OK;
  char expected[256], found[160], shape_a[96], shape_b[96] = "";
  describe_dims(rank_a, dims_a, shape_a, sizeof shape_a);
  if (rank_b > 0) describe_dims(rank_b, dims_b, shape_b, sizeof shape_b);
  snprintf(expected, sizeof expected, "%s %s%s%s", element_type_name(type), shape_a, rank_b > 0 ? " or " : "", shape_b);

  htri_t exists = H5Lexists(loc, name, H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: missing (expected a dataset of %s)", file, path, expected);
    goto done;
  }
  hid_t obj = H5Oopen(loc, name, H5P_DEFAULT);
  if (obj < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: cannot be opened: %s", file, path, hdf5_last_error().innermost);
    goto done;
  }
  if (H5Iget_type(obj) != H5I_DATASET) {
    H5Oclose(obj);
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: expected a dataset of %s, found a group or a named type", file, path,
                     expected);
    goto done;
  }
  dset = obj;
  ftype = H5Dget_type(dset);
  space = H5Dget_space(dset);
  int rank = H5Sget_simple_extent_ndims(space);
  hsize_t hdims[H5S_MAX_RANK];
  int64_t dims[H5S_MAX_RANK];
  if (rank < 0 || rank > H5S_MAX_RANK) rank = 0;
  H5Sget_simple_extent_dims(space, hdims, NULL);
  for (int i = 0; i < rank; i++) dims[i] = hdims[i] > (hsize_t)INT64_MAX ? INT64_MAX : (int64_t)hdims[i];
  char found_type[64], found_dims[96];
  describe_type(ftype, found_type, sizeof found_type);
  if (H5Sget_simple_extent_type(space) == H5S_SCALAR) snprintf(found_dims, sizeof found_dims, "scalar");
  else describe_dims(rank, dims, found_dims, sizeof found_dims);
  snprintf(found, sizeof found, "%s %s", found_type, found_dims);

  size_t want_size = type == ELEM_F32 ? 4 : 8;
  bool type_ok = H5Tget_class(ftype) == H5T_FLOAT && H5Tget_size(ftype) == want_size;
  int matched = -1;
  if (rank == rank_a && memcmp(dims, dims_a, (size_t)rank * sizeof *dims) == 0) matched = 0;
  else if (rank_b > 0 && rank == rank_b && memcmp(dims, dims_b, (size_t)rank * sizeof *dims) == 0) matched = 1;
  if (!type_ok || matched < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: expected %s, found %s", file, path, expected, found);
    goto done;
  }
  if (which) *which = matched;
  if (facts) {
    memset(facts, 0, sizeof *facts);
    dcpl = H5Dget_create_plist(dset);
    int nfilters = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nfilters; i++) {
      unsigned flags = 0, config = 0;
      size_t nelmts = 0;
      char filter_name[64];
      H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nelmts, NULL, sizeof filter_name, filter_name, &config);
      if (id == H5Z_FILTER_FLETCHER32) facts->fletcher32 = true;
      if (id == H5Z_FILTER_DEFLATE) facts->gzip = true;
    }
    facts->stored_bytes = H5Dget_storage_size(dset);
  }
done:
  close_id(&dcpl);
  close_id(&space);
  close_id(&ftype);
  close_id(&dset);
  return st;
}

/* ------------------------------------------------------------------------------------------------
 * Sizes */

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* Element counts of a workload's arrays; false when a product overflows. */
static bool workload_counts(const precis_workload_info *w, uint64_t *a, uint64_t *b, uint64_t *c, uint64_t *calib) {
  uint64_t mk, kn, mn;
  if (!mul_ok((uint64_t)w->m, (uint64_t)w->k, &mk) || !mul_ok((uint64_t)w->k, (uint64_t)w->n, &kn) ||
      !mul_ok((uint64_t)w->m, (uint64_t)w->n, &mn))
    return false;
  if (!mul_ok(mk, (uint64_t)w->batch, a) || !mul_ok(mn, (uint64_t)w->batch, c)) return false;
  if (!mul_ok(kn, w->b_batched ? (uint64_t)w->batch : 1, b)) return false;
  if (!mul_ok(mk, (uint64_t)w->calib_samples, calib)) return false;
  uint64_t total = 0, part;
  if (!mul_ok(*a, 4, &part) || __builtin_add_overflow(total, part, &total)) return false;
  if (!mul_ok(*b, 4, &part) || __builtin_add_overflow(total, part, &total)) return false;
  if (!mul_ok(*c, 16, &part) || __builtin_add_overflow(total, part, &total)) return false;
  if (!mul_ok(*calib, 4, &part) || __builtin_add_overflow(total, part, &total)) return false;
  return total <= ((uint64_t)1 << 62);
}

uint64_t precis_workload_bytes(const precis_workload_info *info) {
  uint64_t a, b, c, calib;
  if (!workload_counts(info, &a, &b, &c, &calib)) return UINT64_MAX;
  return (info->a_f64 ? 12 : 4) * a + (info->b_f64 ? 12 : 4) * b + (info->has_c_ref_lo ? 24 : 16) * c + 4 * calib +
         (info->has_b_ref ? 4 * (uint64_t)info->k * (uint64_t)info->n : 0) + (info->has_a_ref ? 4 * a : 0) +
         (info->has_grad ? 4 * c : 0);
}

static uint64_t host_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return UINT64_MAX;
  return (uint64_t)pages * (uint64_t)page;
}

/* ------------------------------------------------------------------------------------------------
 * Open and validate */

static void free_workload_info(precis_workload_info *w) {
  free(w->name);
  free(w->kind);
  free(w->description);
  free(w->a_dist);
  free(w->b_dist);
  free(w->reference);
  free(w->layer);
  free(w->source);
  free(w->output_kind);
  free(w->reference_precision);
  memset(w, 0, sizeof *w);
}

void precis_dataset_close(precis_dataset *ds) {
  if (!ds) return;
  hid_t file = (hid_t)ds->file_handle;
  close_id(&file);
  for (size_t i = 0; i < ds->n_workloads; i++) free_workload_info(&ds->workloads[i]);
  free(ds->workloads);
  free(ds->path);
  free(ds->dataset_id);
  free(ds->generator);
  free(ds->created_utc);
  free(ds->suite);
  free(ds->model_config);
  free(ds);
}

/* Whether loc/name is a dataset of 8-byte floats (anything else is checked as float32). */
static bool stored_as_float64(hid_t loc, const char *name) {
  bool f64 = false;
  if (H5Lexists(loc, name, H5P_DEFAULT) > 0) {
    hid_t obj = H5Oopen(loc, name, H5P_DEFAULT);
    if (obj >= 0 && H5Iget_type(obj) == H5I_DATASET) {
      hid_t type = H5Dget_type(obj);
      f64 = type >= 0 && H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 8;
      if (type >= 0) H5Tclose(type);
    }
    if (obj >= 0) H5Oclose(obj);
  }
  H5Eclear2(H5E_DEFAULT);
  return f64;
}

static precis_status validate_workload(const char *file, hid_t workloads, const char *name, precis_workload_info *w) {
  hid_t group = -1;
  precis_status st = PRECIS_OK;
  char path[1024];
  snprintf(path, sizeof path, "/workloads/%s", name);
  w->name = precis_strdup(name);
  if (!w->name) return precis_fail(PRECIS_E_NOMEM, "out of memory");

  hid_t obj = H5Oopen(workloads, name, H5P_DEFAULT);
  if (obj < 0) return precis_fail(PRECIS_E_INPUT, "%s: %s: cannot be opened: %s", file, path, hdf5_last_error().innermost);
  if (H5Iget_type(obj) != H5I_GROUP) {
    H5Oclose(obj);
    return precis_fail(PRECIS_E_INPUT, "%s: %s: expected a group (one workload), found a dataset or a named type", file, path);
  }
  group = obj;

  if ((st = read_string_attr(file, group, path, "kind", &w->kind)) != PRECIS_OK) goto done;
  if (strcmp(w->kind, "gemm") != 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute kind: expected \"gemm\", found \"%s\"", file, path, w->kind);
    goto done;
  }
  if ((st = read_positive_attr(file, group, path, "m", &w->m)) != PRECIS_OK) goto done;
  if ((st = read_positive_attr(file, group, path, "n", &w->n)) != PRECIS_OK) goto done;
  if ((st = read_positive_attr(file, group, path, "k", &w->k)) != PRECIS_OK) goto done;
  if ((st = read_positive_attr(file, group, path, "batch", &w->batch)) != PRECIS_OK) goto done;
  if ((st = read_string_attr(file, group, path, "description", &w->description)) != PRECIS_OK) goto done;
  if ((st = read_string_attr(file, group, path, "a_dist", &w->a_dist)) != PRECIS_OK) goto done;
  if ((st = read_string_attr(file, group, path, "b_dist", &w->b_dist)) != PRECIS_OK) goto done;
  if (H5Aexists(group, "reference") > 0) {
    if ((st = read_string_attr(file, group, path, "reference", &w->reference)) != PRECIS_OK) goto done;
  } else {
    H5Eclear2(H5E_DEFAULT);
    w->reference = precis_strdup("");
  }
  /* Optional model attributes (precis import --model); NULL when absent. */
  if (H5Aexists(group, "layer") > 0 && (st = read_string_attr(file, group, path, "layer", &w->layer)) != PRECIS_OK) goto done;
  if (H5Aexists(group, "source") > 0 && (st = read_string_attr(file, group, path, "source", &w->source)) != PRECIS_OK)
    goto done;
  if (H5Aexists(group, "output_kind") > 0) {
    if ((st = read_string_attr(file, group, path, "output_kind", &w->output_kind)) != PRECIS_OK) goto done;
    if (strcmp(w->output_kind, "logits") != 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute output_kind: expected \"logits\" (or no attribute), found \"%s\"",
                       file, path, w->output_kind);
      goto done;
    }
  }
  H5Eclear2(H5E_DEFAULT);
  if (H5Aexists(group, "reference_precision") > 0) {
    if ((st = read_string_attr(file, group, path, "reference_precision", &w->reference_precision)) != PRECIS_OK)
      goto done;
    if (strcmp(w->reference_precision, "float64") != 0 && strcmp(w->reference_precision, "double-double") != 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute reference_precision: expected \"float64\" or "
                       "\"double-double\", found \"%s\"", file, path, w->reference_precision);
      goto done;
    }
  } else {
    H5Eclear2(H5E_DEFAULT);
    w->reference_precision = precis_strdup("float64");
  }
  bool has_bound;
  w->reference_error_bound = NAN;
  if ((st = read_optional_double_attr(file, group, path, "reference_error_bound", &w->reference_error_bound,
                                      &has_bound)) != PRECIS_OK)
    goto done;
  if (has_bound && !(w->reference_error_bound >= 0 && w->reference_error_bound < 1)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: attribute reference_error_bound: expected a number in [0, 1), found %g",
                     file, path, w->reference_error_bound);
    goto done;
  }

  /* Overflow before anything is multiplied for a shape (calib is checked once its size is known). */
  uint64_t a_count, b_count, c_count, calib_count;
  w->calib_samples = 0;
  w->b_batched = true;
  if (!workload_counts(w, &a_count, &b_count, &c_count, &calib_count)) {
    st = precis_fail(PRECIS_E_INPUT,
                     "%s: %s: m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " batch=%" PRId64
                     " give arrays whose sizes overflow 64 bits (refused)",
                     file, path, w->m, w->n, w->k, w->batch);
    goto done;
  }

  int64_t a_dims[3] = {w->batch, w->m, w->k}, b2[2] = {w->k, w->n}, b3[3] = {w->batch, w->k, w->n};
  int64_t c_dims[3] = {w->batch, w->m, w->n};
  dataset_facts facts[8];
  int n_facts = 0, which = 0;
  char dpath_a[1100], dpath_b[1100], dpath_c_ref[1100], dpath_ab_abs[1100], dpath_calib_a[1100];
  snprintf(dpath_a, sizeof dpath_a, "%s/a", path);
  snprintf(dpath_b, sizeof dpath_b, "%s/b", path);
  snprintf(dpath_c_ref, sizeof dpath_c_ref, "%s/c_ref", path);
  snprintf(dpath_ab_abs, sizeof dpath_ab_abs, "%s/ab_abs", path);
  snprintf(dpath_calib_a, sizeof dpath_calib_a, "%s/calib/a", path);
  /* a and b: float32, or float64 for inputs with all 53 bits (DESIGN §13). */
  w->a_f64 = stored_as_float64(group, "a");
  w->b_f64 = stored_as_float64(group, "b");
  if ((st = check_dataset(file, group, "a", dpath_a, w->a_f64 ? ELEM_F64 : ELEM_F32, 3, a_dims, 0, NULL, NULL,
                          &facts[n_facts++])) != PRECIS_OK)
    goto done;
  if ((st = check_dataset(file, group, "b", dpath_b, w->b_f64 ? ELEM_F64 : ELEM_F32, 2, b2, 3, b3, &which,
                          &facts[n_facts++])) != PRECIS_OK)
    goto done;
  w->b_batched = which == 1;
  if ((st = check_dataset(file, group, "c_ref", dpath_c_ref, ELEM_F64, 3, c_dims, 0, NULL, NULL, &facts[n_facts++])) != PRECIS_OK)
    goto done;
  if ((st = check_dataset(file, group, "ab_abs", dpath_ab_abs, ELEM_F64, 3, c_dims, 0, NULL, NULL, &facts[n_facts++])) != PRECIS_OK)
    goto done;
  /* Optional: the weights c_ref was computed from, when b holds converted ones. */
  if (H5Lexists(group, "b_ref", H5P_DEFAULT) > 0) {
    char dpath_b_ref[1100];
    snprintf(dpath_b_ref, sizeof dpath_b_ref, "%s/b_ref", path);
    if (w->b_batched) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: b_ref goes with a shared b [k, n], not a batched one", file, dpath_b_ref);
      goto done;
    }
    if ((st = check_dataset(file, group, "b_ref", dpath_b_ref, ELEM_F32, 2, b2, 0, NULL, NULL, &facts[n_facts++])) != PRECIS_OK)
      goto done;
    w->has_b_ref = true;
  }
  /* Optional: the loss's gradient at the layer's output, one per held-out sample. */
  if (H5Lexists(group, "grad", H5P_DEFAULT) > 0) {
    char dpath_grad[1100];
    snprintf(dpath_grad, sizeof dpath_grad, "%s/grad", path);
    if ((st = check_dataset(file, group, "grad", dpath_grad, ELEM_F32, 3, c_dims, 0, NULL, NULL, &facts[n_facts++])) != PRECIS_OK)
      goto done;
    w->has_grad = true;
  }
  H5Eclear2(H5E_DEFAULT);
  /* Optional: the activations c_ref was computed from, when a holds quantized ones. */
  if (H5Lexists(group, "a_ref", H5P_DEFAULT) > 0) {
    char dpath_a_ref[1100];
    snprintf(dpath_a_ref, sizeof dpath_a_ref, "%s/a_ref", path);
    if ((st = check_dataset(file, group, "a_ref", dpath_a_ref, ELEM_F32, 3, a_dims, 0, NULL, NULL, NULL)) != PRECIS_OK) goto done;
    w->has_a_ref = true;
  }
  H5Eclear2(H5E_DEFAULT);
  /* A double-double reference: its low part, present exactly when the attribute says so. */
  w->has_c_ref_lo = H5Lexists(group, "c_ref_lo", H5P_DEFAULT) > 0;
  H5Eclear2(H5E_DEFAULT);
  bool dd = strcmp(w->reference_precision, "double-double") == 0;
  if (w->has_c_ref_lo != dd) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: %s", file, path,
                     dd ? "reference_precision is \"double-double\" but the dataset c_ref_lo is missing"
                        : "c_ref_lo (the low part of a double-double reference) needs reference_precision = "
                          "\"double-double\"");
    goto done;
  }
  if (dd) {
    char dpath_lo[1100];
    snprintf(dpath_lo, sizeof dpath_lo, "%s/c_ref_lo", path);
    if ((st = check_dataset(file, group, "c_ref_lo", dpath_lo, ELEM_F64, 3, c_dims, 0, NULL, NULL,
                            &facts[n_facts++])) != PRECIS_OK)
      goto done;
  }

  htri_t has_calib = H5Lexists(group, "calib", H5P_DEFAULT);
  if (has_calib > 0) {
    hid_t calib = H5Oopen(group, "calib", H5P_DEFAULT);
    bool is_group = calib >= 0 && H5Iget_type(calib) == H5I_GROUP;
    int64_t samples = -1;
    if (is_group && H5Lexists(calib, "a", H5P_DEFAULT) > 0) {
      hid_t d = H5Dopen2(calib, "a", H5P_DEFAULT);
      hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
      hsize_t dims[H5S_MAX_RANK] = {0};
      if (sp >= 0 && H5Sget_simple_extent_ndims(sp) >= 1) {
        H5Sget_simple_extent_dims(sp, dims, NULL);
        samples = (int64_t)dims[0];
      }
      close_id(&sp);
      close_id(&d);
    }
    H5Eclear2(H5E_DEFAULT);
    if (calib >= 0) H5Oclose(calib);
    if (!is_group) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s/calib: expected a group holding the dataset a", file, path);
      goto done;
    }
    if (samples == 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s/calib/a: zero calibration samples (refused; omit calib instead)", file, path);
      goto done;
    }
    w->calib_samples = samples > 0 ? samples : 1; /* a shape error below when it could not be read */
    if (!workload_counts(w, &a_count, &b_count, &c_count, &calib_count)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s/calib/a: %" PRId64 " samples give a size that overflows 64 bits (refused)",
                       file, path, samples);
      goto done;
    }
    int64_t calib_dims[3] = {w->calib_samples, w->m, w->k};
    if ((st = check_dataset(file, group, "calib/a", dpath_calib_a, ELEM_F32, 3, calib_dims, 0, NULL, NULL, &facts[n_facts++])) != PRECIS_OK)
      goto done;
  } else {
    H5Eclear2(H5E_DEFAULT);
  }
  w->checksummed = true;
  w->compressed = false;
  w->stored_bytes = 0;
  for (int i = 0; i < n_facts; i++) {
    w->checksummed = w->checksummed && facts[i].fletcher32;
    w->compressed = w->compressed || facts[i].gzip;
    w->stored_bytes += facts[i].stored_bytes;
  }
  goto done;
done:
  close_id(&group);
  return st;
}

precis_status precis_dataset_open_in_process(const char *path, precis_dataset **out) {
  *out = NULL;
  hdf5_quiet();
  precis_status st = PRECIS_OK;
  hid_t file = -1, workloads = -1, gcpl = -1;
  precis_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  ds->file_handle = -1;
  ds->path = precis_strdup(path);
  if (!precis_path_exists(path)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
    goto done;
  }
  htri_t is_hdf5 = H5Fis_hdf5(path);
  if (is_hdf5 <= 0) {
    H5Eclear2(H5E_DEFAULT);
    st = precis_fail(PRECIS_E_INPUT, "%s: not an HDF5 file (expected a precis dataset, see docs/dataset-format.md)", path);
    goto done;
  }
  file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, hdf5_last_error().innermost);
    goto done;
  }
  ds->file_handle = file;

  char *format = NULL;
  if ((st = read_string_attr(path, file, "/", "format", &format)) != PRECIS_OK) goto done;
  if (strcmp(format, PRECIS_DATASET_FORMAT) != 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /: attribute format: expected \"%s\", found \"%s\"%s", path,
                     PRECIS_DATASET_FORMAT, format,
                     strcmp(format, "precis-outputs") == 0 ? " (this file holds saved outputs, not a dataset)" : "");
    free(format);
    goto done;
  }
  free(format);
  int64_t version = 0;
  if ((st = read_integer_attr(path, file, "/", "format_version", &version, NULL)) != PRECIS_OK) goto done;
  if (version > PRECIS_DATASET_FORMAT_VERSION) {
    st = precis_fail(PRECIS_E_INPUT,
                     "%s: format_version %" PRId64 " is newer than this precis reads (%d); use a newer precis", path,
                     version, PRECIS_DATASET_FORMAT_VERSION);
    goto done;
  }
  if (version < 1) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /: attribute format_version: expected 1, found %" PRId64, path, version);
    goto done;
  }
  if ((st = read_string_attr(path, file, "/", "generator", &ds->generator)) != PRECIS_OK) goto done;
  if ((st = read_string_attr(path, file, "/", "created_utc", &ds->created_utc)) != PRECIS_OK) goto done;
  if ((st = read_integer_attr(path, file, "/", "seed", NULL, &ds->seed)) != PRECIS_OK) goto done;
  if ((st = read_string_attr(path, file, "/", "suite", &ds->suite)) != PRECIS_OK) goto done;
  /* The writer's own label, optional: the identity of the contents is their digest
   * (precis_dataset_content_id), which precis computes itself. */
  if (H5Aexists(file, "dataset_id") > 0 &&
      (st = read_string_attr(path, file, "/", "dataset_id", &ds->dataset_id)) != PRECIS_OK)
    goto done;
  H5Eclear2(H5E_DEFAULT);
  if (H5Aexists(file, "model_config") > 0 &&
      (st = read_string_attr(path, file, "/", "model_config", &ds->model_config)) != PRECIS_OK)
    goto done;
  H5Eclear2(H5E_DEFAULT);
  if (ds->dataset_id && !ds->dataset_id[0]) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /: attribute dataset_id: expected a non-empty string", path);
    goto done;
  }

  htri_t has_workloads = H5Lexists(file, "workloads", H5P_DEFAULT);
  if (has_workloads < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /: the group structure cannot be read (the file is corrupt): %s", path,
                     hdf5_last_error().innermost);
    goto done;
  }
  if (has_workloads == 0) {
    H5Eclear2(H5E_DEFAULT);
    st = precis_fail(PRECIS_E_INPUT, "%s: /workloads: missing (expected a group with one group per workload)", path);
    goto done;
  }
  hid_t obj = H5Oopen(file, "workloads", H5P_DEFAULT);
  if (obj < 0 || H5Iget_type(obj) != H5I_GROUP) {
    if (obj >= 0) H5Oclose(obj);
    H5Eclear2(H5E_DEFAULT);
    st = precis_fail(PRECIS_E_INPUT, "%s: /workloads: expected a group", path);
    goto done;
  }
  workloads = obj;
  H5G_info_t ginfo;
  if (H5Gget_info(workloads, &ginfo) < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /workloads: cannot be read: %s", path, hdf5_last_error().innermost);
    goto done;
  }
  if (ginfo.nlinks == 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: /workloads: empty (expected at least one workload group)", path);
    goto done;
  }
  /* Suite order when the writer tracked creation order (precis does), else name order (h5py's
   * default). */
  H5_index_t index = H5_INDEX_NAME;
  unsigned crt_flags = 0;
  gcpl = H5Gget_create_plist(workloads);
  if (gcpl >= 0 && H5Pget_link_creation_order(gcpl, &crt_flags) >= 0 && (crt_flags & H5P_CRT_ORDER_TRACKED))
    index = H5_INDEX_CRT_ORDER;
  ds->workloads = calloc(ginfo.nlinks, sizeof *ds->workloads);
  if (!ds->workloads) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (hsize_t i = 0; i < ginfo.nlinks; i++) {
    char name[512];
    ssize_t len = H5Lget_name_by_idx(workloads, ".", index, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    if (len < 0 && index == H5_INDEX_CRT_ORDER) {
      H5Eclear2(H5E_DEFAULT);
      index = H5_INDEX_NAME;
      len = H5Lget_name_by_idx(workloads, ".", index, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    }
    if (len < 0 || (size_t)len >= sizeof name) {
      st = precis_fail(PRECIS_E_INPUT, "%s: /workloads: link %llu has an unreadable or overlong name", path,
                       (unsigned long long)i);
      goto done;
    }
    if (utf8_invalid_at(name) >= 0) {
      char shown[sizeof name * 4];
      printable_escaped(name, shown, sizeof shown);
      st = precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s: the workload name is not valid UTF-8 (expected UTF-8 text)", path,
                       shown);
      goto done;
    }
    ds->n_workloads = (size_t)i + 1;
    if ((st = validate_workload(path, workloads, name, &ds->workloads[i])) != PRECIS_OK) goto done;
  }
done:
  close_id(&gcpl);
  close_id(&workloads);
  if (st != PRECIS_OK) {
    precis_dataset_close(ds);
    return st;
  }
  *out = ds;
  return PRECIS_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Reading data */

void precis_workload_data_free(precis_workload_data *d) {
  if (!d) return;
  free(d->a);
  free(d->b);
  free(d->c_ref);
  free(d->c_ref_lo);
  free(d->a64);
  free(d->b64);
  free(d->ab_abs);
  free(d->calib_a);
  free(d->b_ref);
  free(d->a_ref);
  free(d->grad);
  memset(d, 0, sizeof *d);
}

static precis_status read_array(const precis_dataset *ds, const precis_workload_info *w, const char *name,
                                element_type type, void *buf) {
  char path[1100];
  snprintf(path, sizeof path, "/workloads/%s/%s", w->name, name);
  hid_t dset = H5Dopen2((hid_t)ds->file_handle, path, H5P_DEFAULT);
  if (dset < 0) return precis_fail(PRECIS_E_INPUT, "%s: %s: cannot be opened: %s", ds->path, path, hdf5_last_error().innermost);
  herr_t rc = H5Dread(dset, type == ELEM_F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  /* Before any other call: every HDF5 API call starts by clearing the error stack. */
  hdf5_error_scan scan = rc < 0 ? hdf5_last_error() : (hdf5_error_scan){false, ""};
  H5Dclose(dset);
  if (rc < 0) {
    if (scan.checksum)
      return precis_fail(PRECIS_E_INPUT, "%s: %s: checksum failed (Fletcher32): the stored data are corrupt", ds->path, path);
    return precis_fail(PRECIS_E_INPUT, "%s: %s: read failed: %s", ds->path, path, scan.innermost);
  }
  return PRECIS_OK;
}

static void index_text(uint64_t flat, int64_t d1, int64_t d2, char *buf, size_t len) {
  uint64_t i2 = flat % (uint64_t)d2, i1 = (flat / (uint64_t)d2) % (uint64_t)d1, i0 = flat / ((uint64_t)d2 * (uint64_t)d1);
  snprintf(buf, len, "[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", i0, i1, i2);
}

/* v holds elements [offset, offset + count) of the array (a block of samples, or all of it). */
static precis_status check_finite_f32(const precis_dataset *ds, const precis_workload_info *w, const char *name,
                                      const float *v, uint64_t count, uint64_t offset, int64_t d1, int64_t d2) {
  for (uint64_t i = 0; i < count; i++)
    if (!isfinite(v[i])) {
      char at[96];
      index_text(offset + i, d1, d2, at, sizeof at);
      return precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s/%s: element %s is %s (inputs must be finite)", ds->path,
                         w->name, name, at, isnan(v[i]) ? "NaN" : "infinite");
    }
  return PRECIS_OK;
}

/* c_ref and ab_abs: finite, ab_abs non-negative (elements [offset, offset + count)). */
static precis_status check_references_finite(const precis_dataset *ds, const precis_workload_info *w, const double *c_ref,
                                             const double *ab_abs, uint64_t count, uint64_t offset) {
  for (uint64_t i = 0; i < count; i++) {
    if (!isfinite(c_ref[i]) || !isfinite(ab_abs[i]) || ab_abs[i] < 0) {
      char at[96];
      index_text(offset + i, w->m, w->n, at, sizeof at);
      bool c_bad = !isfinite(c_ref[i]);
      return precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s/%s: element %s is %g (expected a finite%s value)", ds->path,
                         w->name, c_bad ? "c_ref" : "ab_abs", at, c_bad ? c_ref[i] : ab_abs[i], c_bad ? "" : ", non-negative");
    }
  }
  return PRECIS_OK;
}

/* c_ref_lo: the low part of a double-double value (elements [offset, offset + count)). */
static precis_status check_reference_low(const precis_dataset *ds, const precis_workload_info *w, const double *c_ref,
                                         const double *c_ref_lo, uint64_t count, uint64_t offset) {
  for (uint64_t i = 0; i < count; i++)
    if (!isfinite(c_ref_lo[i]) || fabs(c_ref_lo[i]) > 0x1p-52 * fabs(c_ref[i])) {
      char at[96];
      index_text(offset + i, w->m, w->n, at, sizeof at);
      return precis_fail(PRECIS_E_INPUT,
                         "%s: /workloads/%s/c_ref_lo: element %s is %g for c_ref %g (expected the low part of a "
                         "double-double value: |c_ref_lo| <= ulp(c_ref)/2)",
                         ds->path, w->name, at, c_ref_lo[i], c_ref[i]);
    }
  return PRECIS_OK;
}

/* The entries of c_ref and ab_abs that check_sampled_references recomputes: a spread of
 * REFERENCE_CHECKS flat indices (all of them below that many), the last one always among them. */
enum { REFERENCE_CHECKS = 256 };

static uint64_t reference_check_count(uint64_t total) { return total < REFERENCE_CHECKS ? total : REFERENCE_CHECKS; }

static uint64_t reference_check_at(uint64_t t, uint64_t checks, uint64_t total) {
  return t == checks - 1 ? total - 1 : (uint64_t)(((unsigned __int128)t * 0x9E3779B97F4A7C15ull) % total);
}

/* c_ref and ab_abs must be what a float64 accumulation of the stored values gives (float32, or
 * float64 inputs whose products the check splits exactly with fma). A
 * float32 matmul widened to float64 (a common slip when writing a dataset by hand) is off by about
 * 1e-7 relative to |a|.|b|, far outside float64's k*2^-53: check a spread of entries against a
 * compensated dot product (products of two float32 values are exact in float64). c_at[t] and
 * ab_at[t] are c_ref and ab_abs at reference_check_at(t): the references need not be in memory whole. */
static precis_status check_sampled_references(const precis_dataset *ds, const precis_workload_info *w,
                                              const precis_workload_data *d, const double *c_at, const double *ab_at) {
  const uint64_t total = (uint64_t)w->batch * (uint64_t)w->m * (uint64_t)w->n;
  const uint64_t checks = reference_check_count(total);
  const int64_t m = w->m, n = w->n, k = w->k;
  const double allowed = ((double)k + 2.0) * 0x1p-52;
  for (uint64_t t = 0; t < checks; t++) {
    uint64_t flat = reference_check_at(t, checks, total);
    uint64_t s = flat / ((uint64_t)m * (uint64_t)n), i = (flat / (uint64_t)n) % (uint64_t)m, j = flat % (uint64_t)n;
    /* b_ref (a converted checkpoint's original weights, shared by every sample) when present. */
    const uint64_t a_row = (s * (uint64_t)m + i) * (uint64_t)k,
                   b_mat = !d->b_ref && w->b_batched ? s * (uint64_t)k * (uint64_t)n : 0;
    const float *b32 = d->b_ref ? d->b_ref : d->b;
    const double *b64 = d->b_ref ? NULL : d->b64;
    double sum = 0, comp = 0, abs_sum = 0, abs_comp = 0;
    for (int64_t l = 0; l < k; l++) {
      uint64_t b_at = b_mat + (uint64_t)l * (uint64_t)n + j;
      double x = d->a_ref ? (double)d->a_ref[a_row + (uint64_t)l]
                 : d->a64 ? d->a64[a_row + (uint64_t)l] : (double)d->a[a_row + (uint64_t)l];
      double y = b64 ? b64[b_at] : (double)b32[b_at];
      double p = x * y;
      comp += fma(x, y, -p); /* the product's rounding error: 0 for float32 inputs */
      double t2 = sum + p; /* Neumaier's compensated summation */
      comp += fabs(sum) >= fabs(p) ? (sum - t2) + p : (p - t2) + sum;
      sum = t2;
      double ap = fabs(p), t3 = abs_sum + ap;
      abs_comp += (abs_sum - t3) + ap;
      abs_sum = t3;
    }
    sum += comp;
    abs_sum += abs_comp;
    double c = c_at[t], ab = ab_at[t];
    double tol = allowed * abs_sum;
    const char *bad = NULL;
    double stored = 0, want = 0;
    if (fabs(c - sum) > tol) bad = "c_ref", stored = c, want = sum;
    else if (fabs(ab - abs_sum) > tol) bad = "ab_abs", stored = ab, want = abs_sum;
    if (bad) {
      char at[96];
      index_text(flat, m, n, at, sizeof at);
      return precis_fail(PRECIS_E_INPUT,
                         "%s: /workloads/%s/%s: element %s = %.17g, but %s accumulated in float64 from the stored float32 "
                         "a and %s gives %.17g (difference %.3g, allowed %.3g): %s must be computed in float64 from the "
                         "stored float32 values",
                         ds->path, w->name, bad, at, stored,
                         strcmp(bad, "c_ref") == 0 ? (d->b_ref ? "a.b_ref" : "a.b") : (d->b_ref ? "|a|.|b_ref|" : "|a|.|b|"),
                         d->b_ref ? "b_ref" : "b", want,
                         fabs(stored - want), tol, bad);
    }
  }
  return PRECIS_OK;
}

/* An input stored as float64: kept in *wide, rounded to float32 into narrow. Values must be finite;
 * one beyond float32's range rounds to +-inf in narrow, which is what a float32 recipe would see. */
static precis_status read_input(const precis_dataset *ds, const precis_workload_info *w, const char *name, bool f64,
                                uint64_t count, int64_t d1, int64_t d2, float *narrow, double **wide) {
  if (!f64) return read_array(ds, w, name, ELEM_F32, narrow);
  if (!(*wide = malloc(count * sizeof(double))))
    return precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s/%s: out of host memory", ds->path, w->name, name);
  precis_status st = read_array(ds, w, name, ELEM_F64, *wide);
  if (st != PRECIS_OK) return st;
  for (uint64_t i = 0; i < count; i++) {
    if (!isfinite((*wide)[i])) {
      char at[96];
      index_text(i, d1, d2, at, sizeof at);
      return precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s/%s: element %s is %s (inputs must be finite)", ds->path,
                         w->name, name, at, isnan((*wide)[i]) ? "NaN" : "infinite");
    }
    narrow[i] = (float)(*wide)[i];
  }
  return PRECIS_OK;
}

/* One sample range [first, first + count) of a [batch, m, n] array (c_ref, ab_abs, c_ref_lo, grad),
 * with read_array's errors (the same text: a block is part of the array it names). */
static precis_status read_samples(const precis_dataset *ds, const precis_workload_info *w, const char *name,
                                  element_type type, int64_t first, int64_t count, void *buf) {
  if (first == 0 && count == w->batch) return read_array(ds, w, name, type, buf);
  char path[1100];
  snprintf(path, sizeof path, "/workloads/%s/%s", w->name, name);
  hid_t dset = H5Dopen2((hid_t)ds->file_handle, path, H5P_DEFAULT);
  if (dset < 0) return precis_fail(PRECIS_E_INPUT, "%s: %s: cannot be opened: %s", ds->path, path, hdf5_last_error().innermost);
  const hsize_t start[3] = {(hsize_t)first, 0, 0}, size[3] = {(hsize_t)count, (hsize_t)w->m, (hsize_t)w->n};
  hid_t file_space = H5Dget_space(dset), mem_space = H5Screate_simple(3, size, NULL);
  herr_t rc = file_space < 0 || mem_space < 0 ? -1 : H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, size, NULL);
  if (rc >= 0)
    rc = H5Dread(dset, type == ELEM_F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, mem_space, file_space, H5P_DEFAULT, buf);
  /* Before any other call: every HDF5 API call starts by clearing the error stack. */
  hdf5_error_scan scan = rc < 0 ? hdf5_last_error() : (hdf5_error_scan){false, ""};
  if (mem_space >= 0) H5Sclose(mem_space);
  if (file_space >= 0) H5Sclose(file_space);
  H5Dclose(dset);
  if (rc < 0) {
    if (scan.checksum)
      return precis_fail(PRECIS_E_INPUT, "%s: %s: checksum failed (Fletcher32): the stored data are corrupt", ds->path, path);
    return precis_fail(PRECIS_E_INPUT, "%s: %s: read failed: %s", ds->path, path, scan.innermost);
  }
  return PRECIS_OK;
}

uint64_t precis_reference_sample_bytes(const precis_workload_info *w) {
  return (uint64_t)w->m * (uint64_t)w->n * (16u + (w->has_c_ref_lo ? 8u : 0u) + (w->has_grad ? 4u : 0u));
}

int64_t precis_reference_block_samples(const precis_workload_info *w, uint64_t budget) {
  const uint64_t per_sample = precis_reference_sample_bytes(w);
  const uint64_t fit = per_sample ? budget / per_sample : (uint64_t)w->batch;
  return fit < 1 ? 1 : fit > (uint64_t)w->batch ? w->batch : (int64_t)fit;
}

/* The load's checks, each with its rank: a load reports the error of the lowest rank, and within a
 * rank the one at the lowest index, which is the error a whole load that checks in this order and
 * stops at the first finds. A load that reads its references in blocks of samples finds them in
 * another order (block by block) and keeps the first by rank, so that a damaged file is refused with
 * the same message whatever the block. A read error of an array outranks every check of its values. */
enum {
  RANK_C_REF_READ = 1, RANK_AB_ABS_READ, RANK_LO_READ, RANK_LO_VALUE, RANK_CALIB_READ, RANK_GRAD_READ, RANK_GRAD_FINITE,
  RANK_B_REF_READ, RANK_B_REF_FINITE, RANK_A_REF_READ, RANK_A_REF_FINITE, RANK_A_FINITE, RANK_B_FINITE, RANK_CALIB_FINITE,
  RANK_REFERENCES_FINITE, RANK_REFERENCES_SAMPLED, RANK_NONE
};

typedef struct first_error {
  int rank;
  precis_status status;
  char message[2048];
} first_error;

/* Whether a check of this rank can still change the outcome (a lower-ranked error is final). */
static bool error_matters(const first_error *e, int rank) { return rank < e->rank; }

/* Keeps the error precis_fail recorded for st when it outranks the one kept; returns st == OK. */
static bool keep_error(first_error *e, int rank, precis_status st) {
  if (st == PRECIS_OK) return true;
  if (rank < e->rank) {
    e->rank = rank;
    e->status = st;
    snprintf(e->message, sizeof e->message, "%s", precis_last_error());
  }
  return false;
}

precis_status precis_dataset_load_blocked(precis_dataset *ds, size_t index, int64_t block, precis_workload_data *out) {
  memset(out, 0, sizeof *out);
  hdf5_quiet();
  if (!ds || index >= ds->n_workloads) return precis_fail(PRECIS_E_USAGE, "workload index %zu out of range", index);
  const precis_workload_info *w = &ds->workloads[index];
  uint64_t a_count, b_count, c_count, calib_count;
  if (!workload_counts(w, &a_count, &b_count, &c_count, &calib_count))
    return precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s: sizes overflow 64 bits", ds->path, w->name);
  if (block < 1 || block > w->batch) block = w->batch;
  const uint64_t per_sample = (uint64_t)w->m * (uint64_t)w->n, block_count = (uint64_t)block * per_sample;
  /* What this load holds: the inputs whole and one block of the references. */
  uint64_t need = precis_workload_bytes(w) - precis_reference_sample_bytes(w) * (uint64_t)(w->batch - block),
           have = host_memory_bytes();
  if (need > have)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: /workloads/%s: needs %.3g GiB of host memory to load, more than this machine has (%.3g GiB)",
                       ds->path, w->name, (double)need / 1073741824.0, (double)have / 1073741824.0);
  precis_status st = PRECIS_OK;
  first_error first = {.rank = RANK_NONE};
  const uint64_t checks = reference_check_count(c_count);
  double *c_at = NULL, *ab_at = NULL;
  out->ref_capacity = block;
  out->a = precis_malloc_large(a_count * sizeof(float));
  out->b = precis_malloc_large(b_count * sizeof(float));
  out->c_ref = precis_malloc_large(block_count * sizeof(double));
  out->ab_abs = precis_malloc_large(block_count * sizeof(double));
  if (w->calib_samples > 0) out->calib_a = precis_malloc_large(calib_count * sizeof(float));
  c_at = malloc(checks * sizeof *c_at);
  ab_at = malloc(checks * sizeof *ab_at);
  if (!out->a || !out->b || !out->c_ref || !out->ab_abs || (w->calib_samples > 0 && !out->calib_a) || !c_at || !ab_at) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s: out of host memory loading %.3g GiB", ds->path, w->name,
                     (double)need / 1073741824.0);
    goto done;
  }
  if (w->has_c_ref_lo && !(out->c_ref_lo = precis_malloc_large(block_count * sizeof(double)))) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s: out of host memory loading c_ref_lo", ds->path, w->name);
    goto done;
  }
  if (w->has_grad && !(out->grad = precis_malloc_large(block_count * sizeof(float)))) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s/grad: out of host memory", ds->path, w->name);
    goto done;
  }
  if (w->has_b_ref && !(out->b_ref = malloc((uint64_t)w->k * (uint64_t)w->n * sizeof(float)))) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s/b_ref: out of host memory", ds->path, w->name);
    goto done;
  }
  if (w->has_a_ref && !(out->a_ref = malloc(a_count * sizeof(float)))) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s/a_ref: out of host memory", ds->path, w->name);
    goto done;
  }
  /* a and b come first: nothing outranks their read errors. */
  if ((st = read_input(ds, w, "a", w->a_f64, a_count, w->m, w->k, out->a, &out->a64)) != PRECIS_OK) goto done;
  if ((st = read_input(ds, w, "b", w->b_f64, b_count, w->k, w->n, out->b, &out->b64)) != PRECIS_OK) goto done;
  /* The other inputs, whole. */
  if (out->calib_a && keep_error(&first, RANK_CALIB_READ, read_array(ds, w, "calib/a", ELEM_F32, out->calib_a)))
    keep_error(&first, RANK_CALIB_FINITE, check_finite_f32(ds, w, "calib/a", out->calib_a, calib_count, 0, w->m, w->k));
  if (out->b_ref && keep_error(&first, RANK_B_REF_READ, read_array(ds, w, "b_ref", ELEM_F32, out->b_ref)))
    keep_error(&first, RANK_B_REF_FINITE,
               check_finite_f32(ds, w, "b_ref", out->b_ref, (uint64_t)w->k * (uint64_t)w->n, 0, w->k, w->n));
  if (out->a_ref && keep_error(&first, RANK_A_REF_READ, read_array(ds, w, "a_ref", ELEM_F32, out->a_ref)))
    keep_error(&first, RANK_A_REF_FINITE, check_finite_f32(ds, w, "a_ref", out->a_ref, a_count, 0, w->m, w->k));
  if (!w->a_f64) keep_error(&first, RANK_A_FINITE, check_finite_f32(ds, w, "a", out->a, a_count, 0, w->m, w->k));
  if (!w->b_f64) keep_error(&first, RANK_B_FINITE, check_finite_f32(ds, w, "b", out->b, b_count, 0, w->k, w->n));
  /* The references, a block of samples at a time; the block read last stays in out. */
  for (int64_t s0 = 0; s0 < w->batch; s0 += block) {
    const int64_t here = w->batch - s0 < block ? w->batch - s0 : block;
    const uint64_t offset = (uint64_t)s0 * per_sample, count = (uint64_t)here * per_sample;
    out->ref_first = s0;
    out->ref_samples = here;
    /* Nothing outranks a read error of c_ref. */
    if ((st = read_samples(ds, w, "c_ref", ELEM_F64, s0, here, out->c_ref)) != PRECIS_OK) goto done;
    const bool ab_ok = error_matters(&first, RANK_AB_ABS_READ) &&
                       keep_error(&first, RANK_AB_ABS_READ, read_samples(ds, w, "ab_abs", ELEM_F64, s0, here, out->ab_abs));
    if (out->c_ref_lo && error_matters(&first, RANK_LO_READ) &&
        keep_error(&first, RANK_LO_READ, read_samples(ds, w, "c_ref_lo", ELEM_F64, s0, here, out->c_ref_lo)) &&
        error_matters(&first, RANK_LO_VALUE))
      keep_error(&first, RANK_LO_VALUE, check_reference_low(ds, w, out->c_ref, out->c_ref_lo, count, offset));
    if (out->grad && error_matters(&first, RANK_GRAD_READ) &&
        keep_error(&first, RANK_GRAD_READ, read_samples(ds, w, "grad", ELEM_F32, s0, here, out->grad)) &&
        error_matters(&first, RANK_GRAD_FINITE))
      keep_error(&first, RANK_GRAD_FINITE, check_finite_f32(ds, w, "grad", out->grad, count, offset, w->m, w->n));
    if (!ab_ok) continue;
    if (error_matters(&first, RANK_REFERENCES_FINITE))
      keep_error(&first, RANK_REFERENCES_FINITE, check_references_finite(ds, w, out->c_ref, out->ab_abs, count, offset));
    for (uint64_t t = 0; t < checks; t++) {
      const uint64_t flat = reference_check_at(t, checks, c_count);
      if (flat >= offset && flat - offset < count) c_at[t] = out->c_ref[flat - offset], ab_at[t] = out->ab_abs[flat - offset];
    }
  }
  if (error_matters(&first, RANK_REFERENCES_SAMPLED))
    keep_error(&first, RANK_REFERENCES_SAMPLED, check_sampled_references(ds, w, out, c_at, ab_at));
  if (first.rank != RANK_NONE) st = precis_fail(first.status, "%s", first.message);
done:
  free(c_at);
  free(ab_at);
  if (st != PRECIS_OK) precis_workload_data_free(out);
  return st;
}

precis_status precis_dataset_load(precis_dataset *ds, size_t index, precis_workload_data *out) {
  return precis_dataset_load_blocked(ds, index, 0, out);
}

precis_status precis_dataset_read_references(precis_dataset *ds, size_t index, int64_t first, int64_t count,
                                             precis_workload_data *out) {
  hdf5_quiet();
  if (!ds || index >= ds->n_workloads) return precis_fail(PRECIS_E_USAGE, "workload index %zu out of range", index);
  const precis_workload_info *w = &ds->workloads[index];
  if (first < 0 || count < 1 || count > out->ref_capacity || first > w->batch - count)
    return precis_fail(PRECIS_E_USAGE, "%s: /workloads/%s: samples [%lld, %lld) of %lld do not fit a block of %lld",
                       ds->path, w->name, (long long)first, (long long)(first + count), (long long)w->batch,
                       (long long)out->ref_capacity);
  if (first == out->ref_first && count == out->ref_samples) return PRECIS_OK;
  /* Read and checked as the load read and checked them (the same errors, in its order), in case the
   * file changed since: a reference that does not pass is never used. */
  const uint64_t offset = (uint64_t)first * (uint64_t)w->m * (uint64_t)w->n, n = (uint64_t)count * (uint64_t)w->m * (uint64_t)w->n;
  out->ref_first = out->ref_samples = 0;
  precis_status st;
  if ((st = read_samples(ds, w, "c_ref", ELEM_F64, first, count, out->c_ref)) != PRECIS_OK) return st;
  if ((st = read_samples(ds, w, "ab_abs", ELEM_F64, first, count, out->ab_abs)) != PRECIS_OK) return st;
  if (out->c_ref_lo) {
    if ((st = read_samples(ds, w, "c_ref_lo", ELEM_F64, first, count, out->c_ref_lo)) != PRECIS_OK) return st;
    if ((st = check_reference_low(ds, w, out->c_ref, out->c_ref_lo, n, offset)) != PRECIS_OK) return st;
  }
  if (out->grad) {
    if ((st = read_samples(ds, w, "grad", ELEM_F32, first, count, out->grad)) != PRECIS_OK) return st;
    if ((st = check_finite_f32(ds, w, "grad", out->grad, n, offset, w->m, w->n)) != PRECIS_OK) return st;
  }
  if ((st = check_references_finite(ds, w, out->c_ref, out->ab_abs, n, offset)) != PRECIS_OK) return st;
  out->ref_first = first;
  out->ref_samples = count;
  return PRECIS_OK;
}

precis_status precis_dataset_verify_data_id(precis_dataset *ds, char id_hex[65]) {
  precis_sha256 hash;
  if (id_hex) precis_dataset_id_begin(&hash, ds->seed, ds->n_workloads);
  for (size_t i = 0; i < ds->n_workloads; i++) {
    precis_workload_data data;
    precis_status st = precis_dataset_load(ds, i, &data);
    if (st != PRECIS_OK) return st;
    if (id_hex) precis_dataset_id_add(&hash, &ds->workloads[i], &data);
    precis_workload_data_free(&data);
  }
  if (id_hex) precis_dataset_id_finish(&hash, id_hex);
  return PRECIS_OK;
}

precis_status precis_dataset_verify_data(precis_dataset *ds) { return precis_dataset_verify_data_id(ds, NULL); }

precis_status precis_dataset_content_id(precis_dataset *ds, const char **id) {
  *id = NULL;
  if (ds->content_id[0]) {
    *id = ds->content_id;
    return PRECIS_OK;
  }
  hdf5_quiet();
  precis_status st = PRECIS_OK;
  precis_sha256 hash;
  precis_dataset_id_begin(&hash, ds->seed, ds->n_workloads);
  /* Only what the digest covers (a, b, calib/a, b_ref, a_ref, grad): the references are not read, so that this
   * costs one pass over the inputs, not a second load of the whole file. */
  for (size_t i = 0; i < ds->n_workloads && st == PRECIS_OK; i++) {
    const precis_workload_info *w = &ds->workloads[i];
    precis_workload_data data;
    memset(&data, 0, sizeof data);
    uint64_t a_count, b_count, c_count, calib_count;
    if (!workload_counts(w, &a_count, &b_count, &c_count, &calib_count)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s: sizes overflow 64 bits", ds->path, w->name);
      break;
    }
    /* Refused as a load refuses a workload too large for the machine, before allocating: what this
     * pass holds (the inputs and grad, not the references: a run reads those a block at a time). */
    uint64_t need = precis_workload_bytes(w) - precis_reference_sample_bytes(w) * (uint64_t)w->batch +
                    (w->has_grad ? 4 * c_count : 0),
             have = host_memory_bytes();
    if (need > have) {
      st = precis_fail(PRECIS_E_INPUT,
                       "%s: /workloads/%s: needs %.3g GiB of host memory to load, more than this machine has (%.3g GiB)",
                       ds->path, w->name, (double)need / 1073741824.0, (double)have / 1073741824.0);
      break;
    }
    if (!(data.a = precis_malloc_large(a_count * sizeof(float))) ||
        !(data.b = precis_malloc_large(b_count * sizeof(float))) ||
        (w->calib_samples > 0 && !(data.calib_a = precis_malloc_large(calib_count * sizeof(float)))) ||
        (w->has_b_ref && !(data.b_ref = malloc((uint64_t)w->k * (uint64_t)w->n * sizeof(float)))) ||
        (w->has_a_ref && !(data.a_ref = precis_malloc_large(a_count * sizeof(float)))) ||
        (w->has_grad && !(data.grad = precis_malloc_large(c_count * sizeof(float))))) {
      st = precis_fail(PRECIS_E_NOMEM, "%s: /workloads/%s: out of host memory computing the dataset's digest", ds->path,
                       w->name);
    }
    if (st == PRECIS_OK) st = read_input(ds, w, "a", w->a_f64, a_count, w->m, w->k, data.a, &data.a64);
    if (st == PRECIS_OK) st = read_input(ds, w, "b", w->b_f64, b_count, w->k, w->n, data.b, &data.b64);
    if (st == PRECIS_OK && data.calib_a) st = read_array(ds, w, "calib/a", ELEM_F32, data.calib_a);
    if (st == PRECIS_OK && data.b_ref) st = read_array(ds, w, "b_ref", ELEM_F32, data.b_ref);
    /* a_ref (a converted checkpoint's original activations) and grad are hashed too when present,
     * so that the id a run records is the one import wrote. */
    if (st == PRECIS_OK && data.a_ref) st = read_array(ds, w, "a_ref", ELEM_F32, data.a_ref);
    if (st == PRECIS_OK && data.grad) st = read_array(ds, w, "grad", ELEM_F32, data.grad);
    if (st == PRECIS_OK) precis_dataset_id_add(&hash, w, &data);
    precis_workload_data_free(&data);
  }
  if (st != PRECIS_OK) return st;
  precis_dataset_id_finish(&hash, ds->content_id);
  *id = ds->content_id;
  return PRECIS_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Writing */

precis_status precis_dataset_check_name(const char *name) {
  if (!name || !name[0]) return precis_fail(PRECIS_E_INPUT, "workload name is empty");
  if (strchr(name, '/'))
    return precis_fail(PRECIS_E_INPUT, "workload name \"%s\" contains '/' (names become HDF5 group names)", name);
  if (strspn(name, ".") == strlen(name))
    return precis_fail(PRECIS_E_INPUT, "workload name \"%s\" is made of dots only (not a valid HDF5 group name)", name);
  if (strlen(name) > 255) return precis_fail(PRECIS_E_INPUT, "workload name \"%.40s...\" is longer than 255 bytes", name);
  if (utf8_invalid_at(name) >= 0) {
    char shown[256 * 4];
    printable_escaped(name, shown, sizeof shown);
    return precis_fail(PRECIS_E_INPUT, "workload name \"%s\" is not valid UTF-8 (expected UTF-8 text)", shown);
  }
  return PRECIS_OK;
}

static herr_t write_string_attr(hid_t obj, const char *name, const char *value) {
  hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR), attr = -1;
  herr_t rc = -1;
  if (type < 0 || space < 0) goto done;
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr < 0) goto done;
  const char *text = value ? value : "";
  rc = H5Awrite(attr, type, &text);
done:
  if (rc < 0) hdf5_remember_error();
  close_id(&attr);
  close_id(&space);
  close_id(&type);
  return rc;
}

static herr_t write_int_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, const void *value) {
  hid_t space = H5Screate(H5S_SCALAR), attr = -1;
  herr_t rc = -1;
  if (space < 0) goto done;
  attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) rc = H5Awrite(attr, mem_type, value);
done:
  if (rc < 0) hdf5_remember_error();
  close_id(&attr);
  close_id(&space);
  return rc;
}

static herr_t write_double_attr(hid_t obj, const char *name, double value) {
  return write_int_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

static herr_t write_i64_attr(hid_t obj, const char *name, int64_t value) {
  return write_int_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

/* Chunks of about 2^18 elements (1 MiB of float32), whole rows when a row fits, one sample per
 * chunk: each chunk carries its own Fletcher32 checksum, so corruption is located to a chunk. */
static void choose_chunks(int rank, const hsize_t *dims, hsize_t *chunk) {
  const hsize_t target = (hsize_t)1 << 18;
  hsize_t last = dims[rank - 1] < target ? dims[rank - 1] : target;
  chunk[rank - 1] = last;
  hsize_t rows = target / last;
  if (rows < 1) rows = 1;
  chunk[rank - 2] = dims[rank - 2] < rows ? dims[rank - 2] : rows;
  if (rank == 3) chunk[0] = 1;
}

/* An empty chunked, checksummed (and optionally compressed) dataset; -1 on failure (remembered). */
static hid_t create_array(hid_t loc, const char *name, int rank, const int64_t *dims, element_type type,
                          int gzip_level) {
  hsize_t hdims[3], chunk[3];
  for (int i = 0; i < rank; i++) hdims[i] = (hsize_t)dims[i];
  choose_chunks(rank, hdims, chunk);
  hid_t space = H5Screate_simple(rank, hdims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE), dset = -1;
  if (space < 0 || dcpl < 0) goto done;
  if (H5Pset_chunk(dcpl, rank, chunk) < 0) goto done;
  /* Checksum last in the pipeline: it covers the bytes as stored, after compression. */
  if (gzip_level > 0 && (H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, (unsigned)gzip_level) < 0)) goto done;
  if (H5Pset_fletcher32(dcpl) < 0) goto done;
  hid_t ftype = type == ELEM_F32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
  dset = H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
done:
  if (dset < 0) hdf5_remember_error();
  close_id(&dcpl);
  close_id(&space);
  return dset;
}

static herr_t write_array(hid_t loc, const char *name, int rank, const int64_t *dims, element_type type,
                          const void *data, int gzip_level) {
  hid_t dset = create_array(loc, name, rank, dims, type, gzip_level);
  herr_t rc = -1;
  if (dset >= 0) rc = H5Dwrite(dset, type == ELEM_F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                               H5P_DEFAULT, data);
  if (dset >= 0 && rc < 0) hdf5_remember_error();
  close_id(&dset);
  return rc;
}

/* The arrays of a workload written out of core, in precis_dataset_writer_rows's names. */
enum { TILED_A, TILED_B, TILED_C_REF, TILED_AB_ABS, TILED_CALIB_A, TILED_C_REF_LO, TILED_GRAD, TILED_COUNT };
static const char *const TILED_NAMES[TILED_COUNT] = {"a", "b", "c_ref", "ab_abs", "calib/a", "c_ref_lo", "grad"};

struct precis_dataset_writer {
  char *final_path;
  char *temp_path;
  hid_t file;
  hid_t workloads;
  int gzip_level;
  bool force;
  /* The workload being written out of core (begin ... end). */
  hid_t tiled_group, tiled_calib, tiled[TILED_COUNT];
  int tiled_rank[TILED_COUNT];
  int64_t tiled_cols[TILED_COUNT];
  char *tiled_name;
  char *share_a_from; /* the next begin links a and calib/a to this workload's (precis_dataset_writer_share_a) */
};

static void tiled_close(precis_dataset_writer *w) {
  for (int i = 0; i < TILED_COUNT; i++) close_id(&w->tiled[i]);
  close_id(&w->tiled_calib);
  close_id(&w->tiled_group);
  free(w->tiled_name);
  w->tiled_name = NULL;
}

static void writer_free(precis_dataset_writer *w, bool remove_temp) {
  tiled_close(w);
  free(w->share_a_from);
  close_id(&w->workloads);
  close_id(&w->file);
  if (remove_temp && w->temp_path) unlink(w->temp_path);
  free(w->final_path);
  free(w->temp_path);
  free(w);
}

/* Creates an HDF5 file under a temporary name; shared by the dataset and outputs writers. */
static precis_status create_temp_hdf5(const char *path, bool force, char **temp_path, hid_t *file) {
  hdf5_quiet();
  if (!force && precis_path_exists(path))
    return precis_fail(PRECIS_E_EXISTS, "%s: already exists (use --force to overwrite)", path);
  *temp_path = precis_temp_path_for(path);
  if (!*temp_path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  /* Object-header format of HDF5 1.8 and later: its metadata carries checksums, so damaged headers
   * are refused by the library before it parses them (any HDF5 >= 1.8 and h5py read it). */
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl >= 0) H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
  *file = H5Fcreate(*temp_path, H5F_ACC_EXCL, H5P_DEFAULT, fapl >= 0 ? fapl : H5P_DEFAULT);
  if (fapl >= 0) H5Pclose(fapl);
  if (*file < 0) {
    precis_status st = precis_fail(PRECIS_E_IO, "%s: cannot create: %s", *temp_path, hdf5_last_error().innermost);
    free(*temp_path);
    *temp_path = NULL;
    return st;
  }
  return PRECIS_OK;
}

/* Closes the file, syncs it to disk and renames it into place. */
static precis_status finish_temp_hdf5(hid_t *file, const char *temp_path, const char *final_path) {
  precis_status st = PRECIS_OK;
  if (H5Fflush(*file, H5F_SCOPE_GLOBAL) < 0)
    st = precis_fail(PRECIS_E_IO, "%s: write failed: %s", final_path, hdf5_last_error().innermost);
  if (H5Fclose(*file) < 0 && st == PRECIS_OK)
    st = precis_fail(PRECIS_E_IO, "%s: write failed on close: %s", final_path, hdf5_last_error().innermost);
  *file = -1;
  if (st != PRECIS_OK) return st;
  int fd = open(temp_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) st = precis_fail(PRECIS_E_IO, "%s: cannot sync to disk: %s", final_path, strerror(errno));
  if (fd >= 0) close(fd);
  if (st == PRECIS_OK && rename(temp_path, final_path) != 0)
    st = precis_fail(PRECIS_E_IO, "%s: cannot rename into place: %s", final_path, strerror(errno));
  return st;
}

precis_status precis_dataset_writer_open(const char *path, const precis_dataset_write_options *options,
                                         precis_dataset_writer **out) {
  *out = NULL;
  precis_dataset_writer *w = calloc(1, sizeof *w);
  if (!w) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  w->file = w->workloads = -1;
  w->tiled_group = w->tiled_calib = -1;
  for (int i = 0; i < TILED_COUNT; i++) w->tiled[i] = -1;
  w->force = options && options->force;
  w->gzip_level = options ? options->gzip_level : 0;
  w->final_path = precis_strdup(path);
  precis_status st = create_temp_hdf5(path, w->force, &w->temp_path, &w->file);
  if (st != PRECIS_OK) {
    writer_free(w, false);
    return st;
  }
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  if (gcpl >= 0) H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  w->workloads = H5Gcreate2(w->file, "workloads", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  close_id(&gcpl);
  if (w->workloads < 0) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot create /workloads: %s", path, hdf5_last_error().innermost);
    writer_free(w, true);
    return st;
  }
  *out = w;
  return PRECIS_OK;
}

/* /workloads/<name> with its attributes; -1 with the error remembered, or *st set for a refusal. */
static hid_t workload_group(precis_dataset_writer *w, const precis_workload_info *info, precis_status *st) {
  *st = precis_dataset_check_name(info->name);
  if (*st != PRECIS_OK) return -1;
  if (H5Lexists(w->workloads, info->name, H5P_DEFAULT) > 0) {
    *st = precis_fail(PRECIS_E_INPUT, "%s: /workloads/%s: written twice (workload names must be unique)", w->final_path,
                      info->name);
    return -1;
  }
  H5Eclear2(H5E_DEFAULT);
  hid_t group = H5Gcreate2(w->workloads, info->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0) return -1;
  if (write_string_attr(group, "kind", "gemm") < 0 || write_i64_attr(group, "m", info->m) < 0 ||
      write_i64_attr(group, "n", info->n) < 0 || write_i64_attr(group, "k", info->k) < 0 ||
      write_i64_attr(group, "batch", info->batch) < 0 || write_string_attr(group, "description", info->description) < 0 ||
      write_string_attr(group, "a_dist", info->a_dist) < 0 || write_string_attr(group, "b_dist", info->b_dist) < 0 ||
      (info->reference && info->reference[0] && write_string_attr(group, "reference", info->reference) < 0) ||
      (info->layer && write_string_attr(group, "layer", info->layer) < 0) ||
      (info->source && write_string_attr(group, "source", info->source) < 0) ||
      (info->output_kind && write_string_attr(group, "output_kind", info->output_kind) < 0) ||
      (info->reference_precision && write_string_attr(group, "reference_precision", info->reference_precision) < 0) ||
      (info->reference_precision && !isnan(info->reference_error_bound) &&
       write_double_attr(group, "reference_error_bound", info->reference_error_bound) < 0)) {
    close_id(&group);
    return -1;
  }
  return group;
}

precis_status precis_dataset_writer_add(precis_dataset_writer *w, const precis_workload_info *info,
                                        const precis_workload_data *data) {
  precis_status st = PRECIS_OK;
  hid_t calib = -1;
  hid_t group = workload_group(w, info, &st);
  if (st != PRECIS_OK) return st;
  if (group < 0) goto failed;
  if (data->c_ref_lo && write_array(group, "c_ref_lo", 3, (int64_t[3]){info->batch, info->m, info->n}, ELEM_F64,
                                    data->c_ref_lo, w->gzip_level) < 0)
    goto failed;
  int64_t a_dims[3] = {info->batch, info->m, info->k}, c_dims[3] = {info->batch, info->m, info->n};
  int64_t b_dims3[3] = {info->batch, info->k, info->n};
  bool a64 = info->a_f64 && data->a64, b64 = info->b_f64 && data->b64;
  if (write_array(group, "a", 3, a_dims, a64 ? ELEM_F64 : ELEM_F32, a64 ? (const void *)data->a64 : data->a,
                  w->gzip_level) < 0)
    goto failed;
  if (write_array(group, "b", info->b_batched ? 3 : 2, info->b_batched ? b_dims3 : b_dims3 + 1,
                  b64 ? ELEM_F64 : ELEM_F32, b64 ? (const void *)data->b64 : data->b, w->gzip_level) < 0)
    goto failed;
  if (write_array(group, "c_ref", 3, c_dims, ELEM_F64, data->c_ref, w->gzip_level) < 0) goto failed;
  if (write_array(group, "ab_abs", 3, c_dims, ELEM_F64, data->ab_abs, w->gzip_level) < 0) goto failed;
  if (data->grad && write_array(group, "grad", 3, c_dims, ELEM_F32, data->grad, w->gzip_level) < 0) goto failed;
  if (data->b_ref && (info->b_batched || write_array(group, "b_ref", 2, b_dims3 + 1, ELEM_F32, data->b_ref, w->gzip_level) < 0))
    goto failed;
  if (data->a_ref && write_array(group, "a_ref", 3, a_dims, ELEM_F32, data->a_ref, w->gzip_level) < 0) goto failed;
  if (info->calib_samples > 0) {
    int64_t calib_dims[3] = {info->calib_samples, info->m, info->k};
    calib = H5Gcreate2(group, "calib", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (calib < 0 || write_array(calib, "a", 3, calib_dims, ELEM_F32, data->calib_a, w->gzip_level) < 0) goto failed;
  }
  close_id(&calib);
  close_id(&group);
  return PRECIS_OK;
failed:
  st = precis_fail(PRECIS_E_IO, "%s: cannot write /workloads/%s: %s", w->final_path, info->name, hdf5_last_error().innermost);
  close_id(&calib);
  close_id(&group);
  return st;
}

precis_status precis_dataset_writer_begin(precis_dataset_writer *w, const precis_workload_info *info) {
  precis_status st = PRECIS_OK;
  tiled_close(w);
  w->tiled_group = workload_group(w, info, &st);
  if (st != PRECIS_OK) return st;
  w->tiled_name = precis_strdup(info->name);
  if (w->tiled_group < 0 || !w->tiled_name) goto failed;
  int64_t a_dims[3] = {info->batch, info->m, info->k}, c_dims[3] = {info->batch, info->m, info->n};
  int64_t b_dims[3] = {info->batch, info->k, info->n}, calib_dims[3] = {info->calib_samples, info->m, info->k};
  const int64_t *dims[TILED_COUNT] = {a_dims, info->b_batched ? b_dims : b_dims + 1, c_dims, c_dims, calib_dims, c_dims,
                                      c_dims};
  for (int i = 0; i < TILED_COUNT; i++) {
    w->tiled_rank[i] = i == TILED_B && !info->b_batched ? 2 : 3;
    w->tiled_cols[i] = dims[i][w->tiled_rank[i] - 1];
  }
  /* First, as precis_dataset_writer_add creates it. */
  if (info->has_c_ref_lo &&
      (w->tiled[TILED_C_REF_LO] = create_array(w->tiled_group, "c_ref_lo", 3, c_dims, ELEM_F64, w->gzip_level)) < 0)
    goto failed;
  /* A shared a is a hard link to the dataset written before: readers find the same values under
   * both names, stored once. */
  char *shared = w->share_a_from;
  w->share_a_from = NULL;
  char *shared_a = shared ? precis_asprintf("/workloads/%s/a", shared) : NULL;
  char *shared_calib = shared ? precis_asprintf("/workloads/%s/calib/a", shared) : NULL;
  free(shared);
  if (shared && (!shared_a || !shared_calib)) {
    free(shared_a);
    free(shared_calib);
    tiled_close(w);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  if (shared_a) {
    if (H5Lcreate_hard(w->file, shared_a, w->tiled_group, "a", H5P_DEFAULT, H5P_DEFAULT) < 0) goto failed_shared;
  } else {
    w->tiled[TILED_A] = create_array(w->tiled_group, "a", 3, a_dims, ELEM_F32, w->gzip_level);
    if (w->tiled[TILED_A] < 0) goto failed_shared;
  }
  w->tiled[TILED_B] = create_array(w->tiled_group, "b", w->tiled_rank[TILED_B], dims[TILED_B], ELEM_F32, w->gzip_level);
  w->tiled[TILED_C_REF] = create_array(w->tiled_group, "c_ref", 3, c_dims, ELEM_F64, w->gzip_level);
  w->tiled[TILED_AB_ABS] = create_array(w->tiled_group, "ab_abs", 3, c_dims, ELEM_F64, w->gzip_level);
  for (int i = TILED_B; i < TILED_CALIB_A; i++)
    if (w->tiled[i] < 0) goto failed_shared;
  if (info->has_grad && (w->tiled[TILED_GRAD] = create_array(w->tiled_group, "grad", 3, c_dims, ELEM_F32, w->gzip_level)) < 0)
    goto failed;
  if (info->calib_samples > 0) {
    w->tiled_calib = H5Gcreate2(w->tiled_group, "calib", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (w->tiled_calib < 0) goto failed_shared;
    if (shared_calib) {
      if (H5Lcreate_hard(w->file, shared_calib, w->tiled_calib, "a", H5P_DEFAULT, H5P_DEFAULT) < 0) goto failed_shared;
    } else {
      w->tiled[TILED_CALIB_A] = create_array(w->tiled_calib, "a", 3, calib_dims, ELEM_F32, w->gzip_level);
      if (w->tiled[TILED_CALIB_A] < 0) goto failed_shared;
    }
  }
  free(shared_a);
  free(shared_calib);
  return PRECIS_OK;
failed_shared:
  if (shared_a) hdf5_remember_error();
  free(shared_a);
  free(shared_calib);
failed:
  st = precis_fail(PRECIS_E_IO, "%s: cannot write /workloads/%s: %s", w->final_path, info->name, hdf5_last_error().innermost);
  tiled_close(w);
  return st;
}

precis_status precis_dataset_writer_rows(precis_dataset_writer *w, const char *array, int64_t sample, int64_t first_row,
                                         int64_t n_rows, const void *values) {
  int i = 0;
  while (i < TILED_COUNT && strcmp(TILED_NAMES[i], array) != 0) i++;
  if (i == TILED_COUNT || w->tiled[i] < 0)
    return precis_fail(PRECIS_E_RUNTIME, "%s: /workloads/%s/%s: not being written", w->final_path,
                       w->tiled_name ? w->tiled_name : "?", array);
  int rank = w->tiled_rank[i];
  hsize_t start[3] = {(hsize_t)sample, (hsize_t)first_row, 0}, count[3] = {1, (hsize_t)n_rows, (hsize_t)w->tiled_cols[i]};
  const hsize_t *s0 = rank == 3 ? start : start + 1, *c0 = rank == 3 ? count : count + 1;
  hid_t file_space = H5Dget_space(w->tiled[i]), mem_space = H5Screate_simple(rank, c0, NULL);
  herr_t rc = -1;
  if (file_space >= 0 && mem_space >= 0 && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, s0, NULL, c0, NULL) >= 0)
    rc = H5Dwrite(w->tiled[i], i == TILED_C_REF || i == TILED_AB_ABS || i == TILED_C_REF_LO ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, mem_space,
                  file_space, H5P_DEFAULT, values);
  if (rc < 0) hdf5_remember_error();
  close_id(&mem_space);
  close_id(&file_space);
  if (rc < 0)
    return precis_fail(PRECIS_E_IO, "%s: cannot write /workloads/%s/%s: %s", w->final_path, w->tiled_name, array,
                       hdf5_last_error().innermost);
  return PRECIS_OK;
}

precis_status precis_dataset_writer_share_a(precis_dataset_writer *w, const char *from) {
  free(w->share_a_from);
  w->share_a_from = precis_strdup(from);
  return w->share_a_from ? PRECIS_OK : precis_fail(PRECIS_E_NOMEM, "out of memory");
}

precis_status precis_dataset_writer_end(precis_dataset_writer *w) {
  tiled_close(w);
  return PRECIS_OK;
}

precis_status precis_dataset_writer_commit(precis_dataset_writer *w, const precis_dataset_root_attrs *root) {
  precis_status st = PRECIS_OK;
  int64_t version = PRECIS_DATASET_FORMAT_VERSION;
  if (write_string_attr(w->file, "format", PRECIS_DATASET_FORMAT) < 0 || write_i64_attr(w->file, "format_version", version) < 0 ||
      write_string_attr(w->file, "generator", root->generator) < 0 ||
      write_string_attr(w->file, "created_utc", root->created_utc) < 0 ||
      write_int_attr(w->file, "seed", H5T_STD_U64LE, H5T_NATIVE_UINT64, &root->seed) < 0 ||
      write_string_attr(w->file, "suite", root->suite) < 0 || write_string_attr(w->file, "dataset_id", root->dataset_id) < 0 ||
      (root->model_config && write_string_attr(w->file, "model_config", root->model_config) < 0)) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot write the root attributes: %s", w->final_path, hdf5_last_error().innermost);
    writer_free(w, true);
    return st;
  }
  close_id(&w->workloads);
  st = finish_temp_hdf5(&w->file, w->temp_path, w->final_path);
  writer_free(w, st != PRECIS_OK);
  return st;
}

void precis_dataset_writer_abort(precis_dataset_writer *w) {
  if (w) writer_free(w, true);
}

/* ------------------------------------------------------------------------------------------------
 * Outputs (--save-outputs) */

struct precis_outputs_writer {
  char *final_path;
  char *temp_path;
  hid_t file;
};

static void outputs_free(precis_outputs_writer *w, bool remove_temp) {
  close_id(&w->file);
  if (remove_temp && w->temp_path) unlink(w->temp_path);
  free(w->final_path);
  free(w->temp_path);
  free(w);
}

precis_status precis_outputs_open(const char *path, bool force, const char *dataset_id, precis_outputs_writer **out) {
  *out = NULL;
  precis_outputs_writer *w = calloc(1, sizeof *w);
  if (!w) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  w->file = -1;
  w->final_path = precis_strdup(path);
  precis_status st = create_temp_hdf5(path, force, &w->temp_path, &w->file);
  if (st != PRECIS_OK) {
    outputs_free(w, false);
    return st;
  }
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE), group = -1;
  if (gcpl >= 0) H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  group = H5Gcreate2(w->file, "workloads", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  if (group < 0 || write_string_attr(w->file, "format", "precis-outputs") < 0 ||
      write_i64_attr(w->file, "format_version", 1) < 0 || write_string_attr(w->file, "dataset_id", dataset_id) < 0) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot write: %s", path, hdf5_last_error().innermost);
    close_id(&group);
    close_id(&gcpl);
    outputs_free(w, true);
    return st;
  }
  close_id(&group);
  close_id(&gcpl);
  *out = w;
  return PRECIS_OK;
}

static precis_status outputs_write(precis_outputs_writer *w, const char *workload, const char *recipe,
                                   element_type type, const void *c, int64_t batch, int64_t m, int64_t n) {
  precis_status st = precis_dataset_check_name(workload);
  if (st == PRECIS_OK) st = precis_dataset_check_name(recipe);
  if (st != PRECIS_OK) return st;
  if (batch <= 0 || m <= 0 || n <= 0)
    return precis_fail(PRECIS_E_USAGE, "%s: /workloads/%s/%s/c: shape [%" PRId64 ",%" PRId64 ",%" PRId64 "] is empty",
                       w->final_path, workload, recipe, batch, m, n);
  char path[600];
  snprintf(path, sizeof path, "workloads/%s", workload);
  hid_t group = -1, recipe_group = -1;
  if (H5Lexists(w->file, path, H5P_DEFAULT) > 0) group = H5Gopen2(w->file, path, H5P_DEFAULT);
  else {
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (gcpl >= 0) H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    group = H5Gcreate2(w->file, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    close_id(&gcpl);
  }
  if (group < 0) goto failed;
  if (H5Lexists(group, recipe, H5P_DEFAULT) > 0) {
    close_id(&group);
    return precis_fail(PRECIS_E_USAGE, "%s: /workloads/%s/%s: written twice", w->final_path, workload, recipe);
  }
  recipe_group = H5Gcreate2(group, recipe, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (recipe_group < 0) goto failed;
  int64_t dims[3] = {batch, m, n};
  if (write_array(recipe_group, "c", 3, dims, type, c, 0) < 0) goto failed;
  close_id(&recipe_group);
  close_id(&group);
  return PRECIS_OK;
failed:
  st = precis_fail(PRECIS_E_IO, "%s: cannot write /workloads/%s/%s/c: %s", w->final_path, workload, recipe,
                   hdf5_last_error().innermost);
  close_id(&recipe_group);
  close_id(&group);
  return st;
}

precis_status precis_outputs_write(precis_outputs_writer *w, const char *workload, const char *recipe, const float *c,
                                   int64_t batch, int64_t m, int64_t n) {
  return outputs_write(w, workload, recipe, ELEM_F32, c, batch, m, n);
}

precis_status precis_outputs_write_f64(precis_outputs_writer *w, const char *workload, const char *recipe,
                                       const double *c, int64_t batch, int64_t m, int64_t n) {
  return outputs_write(w, workload, recipe, ELEM_F64, c, batch, m, n);
}

precis_status precis_outputs_close(precis_outputs_writer *w, bool commit) {
  if (!w) return PRECIS_OK;
  if (!commit) {
    outputs_free(w, true);
    return PRECIS_OK;
  }
  precis_status st = finish_temp_hdf5(&w->file, w->temp_path, w->final_path);
  outputs_free(w, st != PRECIS_OK);
  return st;
}
