#include "generate.h"

#include <cblas.h>
#include <errno.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataset_digest.h"
#include "base/fileio.h"
#include "hdf5_guard.h"
#include "precis_version.h"
#include "base/escape.h"
#include "base/parallel.h"
#include "numerics/transpose.h"
#include "rng.h"
#include "file_kind.h"
#include "npy.h"
#include "safetensors.h"

/* ------------------------------------------------------------------------------------------------
 * References */

const char *precis_reference_method(void) {
  static char text[320];
  if (!text[0])
    snprintf(text, sizeof text, "float64 dgemm of the stored float32 values (%s)", openblas_get_config());
  return text;
}

static void widen(const float *in, double *out, uint64_t count) {
  for (uint64_t i = 0; i < count; i++) out[i] = (double)in[i];
}

static void widen_abs(const float *in, double *out, uint64_t count) {
  for (uint64_t i = 0; i < count; i++) out[i] = fabs((double)in[i]);
}

/* |b| in place over the CPUs: the block of b widened for c_ref's pass, for ab_abs's. */
static void absolute_range(void *ctx, size_t first, size_t last) {
  double *b64 = ctx;
  for (size_t i = first; i < last; i++) b64[i] = fabs(b64[i]);
}

/* count values of x (float32 x32, or float64 x64 when x32 is NULL) from offset into the float64
 * scratch, as |x| for ab_abs: exact either way. */
static void load_f64(const float *x32, const double *x64, uint64_t offset, double *out, uint64_t count, bool absolute) {
  if (x32) {
    (absolute ? widen_abs : widen)(x32 + offset, out, count);
  } else if (absolute) {
    for (uint64_t i = 0; i < count; i++) out[i] = fabs(x64[offset + i]);
  } else {
    memcpy(out, x64 + offset, count * sizeof *out);
  }
}

/* The float64 copies are kept from one call to the next (gen calls this per tile and per
 * workload): a fresh buffer of a few MiB costs a page fault per 4 KiB on first touch, which at
 * m = n = k = 384 was a fifth of the dgemm's own time (bench_reference). Thread-local, so that
 * concurrent callers never share one; precis_reference_release frees it. */
static _Thread_local struct {
  double *a64, *b64;
  uint64_t a_cap, b_cap;
} scratch;

void precis_reference_release(void) {
  free(scratch.a64);
  free(scratch.b64);
  memset(&scratch, 0, sizeof scratch);
}

void precis_reference_trim(size_t keep_bytes) {
  if ((scratch.a_cap + scratch.b_cap) * sizeof(double) > keep_bytes) precis_reference_release();
}

static double *scratch_grow(double **buffer, uint64_t *cap, uint64_t count) {
  if (count <= *cap) return *buffer;
  free(*buffer);
  *buffer = malloc(count * sizeof **buffer);
  *cap = *buffer ? count : 0;
  return *buffer;
}

/* a / b as float32 (a32, b32) or float64 (a_wide, b_wide, when a32 is NULL); b32 as [n, k] when
 * b_nk (float32 only). */
static precis_status reference_compute(const float *a32, const float *b32, const double *a_wide, const double *b_wide,
                                       int64_t batch, int64_t m, int64_t n, int64_t k, bool b_batched, bool b_nk,
                                       double *c_ref, double *ab_abs) {
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return precis_fail(PRECIS_E_INPUT, "m, n and k must be below 2^31 (OpenBLAS's int dimensions)");
  const int64_t samples = b_batched ? batch : 1, rows_per = b_batched ? m : batch * m;
  const int64_t block_rows = rows_per < PRECIS_REFERENCE_BLOCK_ROWS ? rows_per : PRECIS_REFERENCE_BLOCK_ROWS;
  const int64_t block_cols = n < PRECIS_REFERENCE_BLOCK_COLS ? n : PRECIS_REFERENCE_BLOCK_COLS;
  const uint64_t kn = (uint64_t)k * (uint64_t)n;
  /* a is loaded a block at a time (the block stays in cache for its dgemm), b a block of columns
   * at a time: a wide b (an lm_head's 49152 or 128256 outputs) is never copied whole to float64. */
  const uint64_t a_count = (uint64_t)block_rows * (uint64_t)k, b_count = (uint64_t)k * (uint64_t)block_cols;
  double *a64 = scratch_grow(&scratch.a64, &scratch.a_cap, a_count);
  double *b64 = scratch_grow(&scratch.b64, &scratch.b_cap, b_count);
  if (!a64 || !b64)
    return precis_fail(PRECIS_E_NOMEM, "out of host memory for the float64 copies of a and b (%.3g GiB)",
                       (double)(a_count + b_count) * 8.0 / 1073741824.0);
  /* One GEMM per block of PRECIS_REFERENCE_BLOCK_ROWS rows (of the whole batch when b is shared,
   * of each sample when it is batched) and PRECIS_REFERENCE_BLOCK_COLS columns: OpenBLAS's result
   * for an element can depend on the shape of the call it is in (its kernels and thread split
   * change with M and N), so fixed blocks make the references independent of how many rows are
   * computed at once, and gen --tile-rows (whole blocks per tile), import and verify's layer
   * checks write the references this path writes. */
  for (int64_t s = 0; s < samples; s++)
    for (int64_t c0 = 0; c0 < n; c0 += block_cols) {
      const int64_t cols = n - c0 < block_cols ? n - c0 : block_cols;
      const uint64_t block = (uint64_t)k * (uint64_t)cols;
      for (int pass = 0; pass < (ab_abs ? 2 : 1); pass++) {
        const bool absolute = pass == 1;
        double *c = absolute ? ab_abs : c_ref;
        /* |b| from the block c_ref's pass loaded (the same values: widening is exact): b, or W
         * transposed, is read once per block. */
        if (absolute)
          precis_parallel_ranges(block, (size_t)1 << 19, absolute_range, b64);
        else if (b_nk)
          precis_transpose_widen(b32 + (uint64_t)s * kn + (uint64_t)c0 * (uint64_t)k, (size_t)k, (size_t)cols,
                                 (size_t)k, b64, (size_t)cols, false);
        else
          for (int64_t p = 0; p < k; p++)
            load_f64(b32, b_wide, (uint64_t)s * kn + (uint64_t)p * (uint64_t)n + (uint64_t)c0,
                     b64 + (uint64_t)p * (uint64_t)cols, (uint64_t)cols, false);
        for (int64_t r0 = 0; r0 < rows_per; r0 += PRECIS_REFERENCE_BLOCK_ROWS) {
          int64_t rows = rows_per - r0 < PRECIS_REFERENCE_BLOCK_ROWS ? rows_per - r0 : PRECIS_REFERENCE_BLOCK_ROWS;
          uint64_t row = (uint64_t)s * (uint64_t)rows_per + (uint64_t)r0;
          load_f64(a32, a_wide, row * (uint64_t)k, a64, (uint64_t)rows * (uint64_t)k, absolute);
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)cols, (int)k, 1.0, a64, (int)k, b64,
                      (int)cols, 0.0, c + row * (uint64_t)n + (uint64_t)c0, (int)n);
        }
      }
    }
  return PRECIS_OK;
}

precis_status precis_reference_compute(const float *a, const float *b, int64_t batch, int64_t m, int64_t n, int64_t k,
                                       bool b_batched, double *c_ref, double *ab_abs) {
  return reference_compute(a, b, NULL, NULL, batch, m, n, k, b_batched, false, c_ref, ab_abs);
}

precis_status precis_reference_compute_nk(const float *a, const float *w, int64_t batch, int64_t m, int64_t n, int64_t k,
                                          double *c_ref, double *ab_abs) {
  return reference_compute(a, w, NULL, NULL, batch, m, n, k, false, true, c_ref, ab_abs);
}

precis_status precis_reference_compute_f64(const double *a, const double *b, int64_t batch, int64_t m, int64_t n,
                                           int64_t k, bool b_batched, double *c_ref, double *ab_abs) {
  return reference_compute(NULL, NULL, a, b, batch, m, n, k, b_batched, false, c_ref, ab_abs);
}

static double gamma_n(int64_t n) { return (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53); }

/* The stored bounds are relative to the stored ab_abs, itself a float64 dgemm within gamma_k of
 * |a|.|b|: the factor (1 + 2 gamma_k) covers that. */
double precis_reference_f64_bound(int64_t k) { return gamma_n(k) * (1 + 2 * gamma_n(k)); }

double precis_reference_dd_bound(int64_t k) {
  double g = gamma_n(k > 1 ? k - 1 : 1);
  return g * g * (1 + 2 * gamma_n(k));
}

/* Dot2 (Ogita, Rump & Oishi 2005, Prop. 5.3) before its final rounding: the k rounding errors of the
 * products join the k - 1 of the sums, hence gamma_k^2. */
double precis_reference_dd_bound_f64(int64_t k) {
  double g = gamma_n(k > 1 ? k : 1);
  return g * g * (1 + 2 * gamma_n(k));
}

/* Columns per block of the double-double kernel: a block of B (k x 256 float32) stays in cache
 * while every row of A passes over it. */
enum { DD_BLOCK = 256 };

/* One [m, k] x [k, n] product. The inner loop runs across columns so that it vectorizes; the k
 * order is sequential (Sum2's bound holds for any order). */
static void dd_gemm(const float *a, const float *b, int64_t m, int64_t n, int64_t k, double *c_hi, double *c_lo) {
  double sum[DD_BLOCK], err[DD_BLOCK];
  for (int64_t j0 = 0; j0 < n; j0 += DD_BLOCK) {
    int64_t width = n - j0 < DD_BLOCK ? n - j0 : DD_BLOCK;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < width; j++) sum[j] = err[j] = 0.0;
      const float *arow = a + i * k;
      for (int64_t p = 0; p < k; p++) {
        const double aip = arow[p];
        const float *brow = b + p * n + j0;
        for (int64_t j = 0; j < width; j++) {
          double x = aip * (double)brow[j]; /* exact: 24 x 24 bits */
          double s = sum[j] + x, z = s - sum[j];
          err[j] += (sum[j] - (s - z)) + (x - z); /* TwoSum: s + that = sum + x exactly */
          sum[j] = s;
        }
      }
      for (int64_t j = 0; j < width; j++) {
        double hi = sum[j] + err[j], z = hi - sum[j];
        c_hi[i * n + j0 + j] = hi;
        c_lo[i * n + j0 + j] = (sum[j] - (hi - z)) + (err[j] - z);
      }
    }
  }
}

/* dd_gemm for float64 inputs: a product is no longer exact in float64, so its rounding error
 * (TwoProduct by fma, exact barring underflow) joins the TwoSum errors (Dot2). */
static void dd_gemm_f64(const double *a, const double *b, int64_t m, int64_t n, int64_t k, double *c_hi, double *c_lo) {
  double sum[DD_BLOCK], err[DD_BLOCK];
  for (int64_t j0 = 0; j0 < n; j0 += DD_BLOCK) {
    int64_t width = n - j0 < DD_BLOCK ? n - j0 : DD_BLOCK;
    for (int64_t i = 0; i < m; i++) {
      for (int64_t j = 0; j < width; j++) sum[j] = err[j] = 0.0;
      const double *arow = a + i * k;
      for (int64_t p = 0; p < k; p++) {
        const double aip = arow[p];
        const double *brow = b + p * n + j0;
        for (int64_t j = 0; j < width; j++) {
          double x = aip * brow[j], xe = fma(aip, brow[j], -x);
          double s = sum[j] + x, z = s - sum[j];
          err[j] += ((sum[j] - (s - z)) + (x - z)) + xe;
          sum[j] = s;
        }
      }
      for (int64_t j = 0; j < width; j++) {
        double hi = sum[j] + err[j], z = hi - sum[j];
        c_hi[i * n + j0 + j] = hi;
        c_lo[i * n + j0 + j] = (sum[j] - (hi - z)) + (err[j] - z);
      }
    }
  }
}

precis_status precis_reference_compute_dd_f64(const double *a, const double *b, int64_t batch, int64_t m, int64_t n,
                                              int64_t k, bool b_batched, double *c_hi, double *c_lo) {
  for (int64_t s = 0; s < batch; s++) {
    uint64_t a_off = (uint64_t)s * (uint64_t)m * (uint64_t)k, c_off = (uint64_t)s * (uint64_t)m * (uint64_t)n;
    dd_gemm_f64(a + a_off, b + (b_batched ? (uint64_t)s * (uint64_t)k * (uint64_t)n : 0), m, n, k, c_hi + c_off,
                c_lo + c_off);
  }
  return PRECIS_OK;
}

precis_status precis_reference_compute_dd(const float *a, const float *b, int64_t batch, int64_t m, int64_t n,
                                          int64_t k, bool b_batched, double *c_hi, double *c_lo) {
  for (int64_t s = 0; s < batch; s++) {
    uint64_t a_off = (uint64_t)s * (uint64_t)m * (uint64_t)k, c_off = (uint64_t)s * (uint64_t)m * (uint64_t)n;
    dd_gemm(a + a_off, b + (b_batched ? (uint64_t)s * (uint64_t)k * (uint64_t)n : 0), m, n, k, c_hi + c_off,
            c_lo + c_off);
  }
  return PRECIS_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Matrices from files */

static char *resolve_path(const char *base_dir, const char *path) {
  if (path[0] == '/' || !base_dir || !base_dir[0] || strcmp(base_dir, ".") == 0) return precis_strdup(path);
  return precis_asprintf("%s/%s", base_dir, path);
}

static precis_status read_hdf5_matrix(const char *path, const char *object, float **data, int *rank, int64_t shape[3]) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  precis_status st = PRECIS_OK;
  hid_t file = -1, dset = -1, space = -1, type = -1;
  if (!precis_path_exists(path)) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(ENOENT));
  if (H5Fis_hdf5(path) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return precis_fail(PRECIS_E_INPUT, "%s: not an HDF5 file (or cannot be read)", path);
  }
  if ((st = precis_hdf5_guard(path, precis_hdf5_check_object, object)) != PRECIS_OK) return st;
  file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    H5Eclear2(H5E_DEFAULT);
    return precis_fail(PRECIS_E_INPUT, "%s: cannot open as HDF5", path);
  }
  if (H5Lexists(file, object, H5P_DEFAULT) <= 0 || (dset = H5Dopen2(file, object, H5P_DEFAULT)) < 0) {
    H5Eclear2(H5E_DEFAULT);
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: no such dataset", path, object);
    goto done;
  }
  type = H5Dget_type(dset);
  space = H5Dget_space(dset);
  H5T_class_t cls = H5Tget_class(type);
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: expected a numeric dataset", path, object);
    goto done;
  }
  int r = H5Sget_simple_extent_ndims(space);
  if (r != 2 && r != 3) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: expected a matrix (rank 2) or a stack of matrices (rank 3), found rank %d", path,
                     object, r);
    goto done;
  }
  hsize_t dims[3];
  H5Sget_simple_extent_dims(space, dims, NULL);
  uint64_t count = 1;
  for (int i = 0; i < r; i++) {
    if (dims[i] == 0 || dims[i] > (hsize_t)INT32_MAX) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: dimension %d is %llu (expected 1 .. 2^31-1)", path, object, i,
                       (unsigned long long)dims[i]);
      goto done;
    }
    count *= dims[i]; /* three factors below 2^31 each: no overflow in 64 bits... */
    if (count > ((uint64_t)1 << 40)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: too large (%" PRIu64 "+ elements)", path, object, count);
      goto done;
    }
    shape[i] = (int64_t)dims[i];
  }
  *rank = r;
  *data = malloc(count * sizeof(float));
  if (!*data) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: %s: out of memory", path, object);
    goto done;
  }
  if (H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, *data) < 0) {
    H5Eclear2(H5E_DEFAULT);
    free(*data);
    *data = NULL;
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: read failed (corrupt data or a failed checksum)", path, object);
  }
done:
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  if (dset >= 0) H5Dclose(dset);
  H5Fclose(file);
  return st;
}

precis_status precis_read_matrix_file(const precis_dist *d, const char *base_dir, float **data, int *rank,
                                      int64_t shape[3]) {
  *data = NULL;
  char *path = resolve_path(base_dir, d->path);
  if (!path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  const char *object = d->object ? d->object : "";
  precis_file_kind kind;
  precis_status st = precis_file_kind_detect(path, &kind);
  if (st == PRECIS_OK && kind == PRECIS_FILE_HDF5) {
    /* HDF5 paths are absolute inside the file: "L0_in" is "/L0_in". */
    char *absolute = object[0] == '/' ? precis_strdup(object) : precis_asprintf("/%s", object);
    if (!absolute) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    else if (!object[0]) st = precis_fail(PRECIS_E_INPUT, "%s: an HDF5 file: name the dataset, FILE:/path/to/dataset", path);
    else st = read_hdf5_matrix(path, absolute, data, rank, shape);
    free(absolute);
  } else if (st == PRECIS_OK && (kind == PRECIS_FILE_NPY || kind == PRECIS_FILE_NPZ)) {
    precis_npy_array arr;
    if (kind == PRECIS_FILE_NPY && object[0])
      st = precis_fail(PRECIS_E_INPUT, "%s: a NumPy .npy file holds one array: give the file alone, without \":%s\"", path,
                       object);
    else if (kind == PRECIS_FILE_NPZ && !object[0])
      st = precis_fail(PRECIS_E_INPUT, "%s: a NumPy .npz archive: name the array, FILE.npz:NAME", path);
    else if (kind == PRECIS_FILE_NPY) st = precis_npy_read(path, true, &arr);
    else st = precis_npz_read(path, object[0] == '/' ? object + 1 : object, true, &arr);
    if (st == PRECIS_OK) {
      if (arr.rank != 2 && arr.rank != 3)
        st = precis_fail(PRECIS_E_INPUT, "%s%s%s: expected a matrix (rank 2) or a stack of matrices (rank 3), found rank %d",
                         path, object[0] ? ":" : "", object, arr.rank);
      for (int i = 0; i < arr.rank && st == PRECIS_OK; i++)
        if (arr.shape[i] <= 0)
          st = precis_fail(PRECIS_E_INPUT, "%s%s%s: dimension %d is 0 (expected 1 .. 2^31-1)", path, object[0] ? ":" : "",
                           object, i);
      if (st == PRECIS_OK) {
        *rank = arr.rank;
        for (int i = 0; i < arr.rank; i++) shape[i] = arr.shape[i];
        *data = arr.data;
        arr.data = NULL;
      }
      precis_npy_array_free(&arr);
    }
  } else if (st == PRECIS_OK && kind == PRECIS_FILE_UNKNOWN) {
    st = precis_fail(PRECIS_E_INPUT, "%s: not a matrix file precis reads: expected HDF5, NumPy .npy or .npz, or "
                                     "safetensors (judged by the first bytes)", path);
  } else if (st == PRECIS_OK) {
    precis_safetensors sf;
    st = precis_safetensors_open(path, &sf);
    if (st == PRECIS_OK) {
      /* "FILE:/name" for a tensor named "name": the '/' came from HDF5 habits. */
      const precis_st_tensor *t = precis_safetensors_find(&sf, object);
      if (!t && object[0] == '/') t = precis_safetensors_find(&sf, object + 1);
      if (!t) {
        char closest[512] = "";
        const char **names = calloc(sf.n_tensors ? sf.n_tensors : 1, sizeof *names);
        for (size_t i = 0; names && i < sf.n_tensors; i++) names[i] = sf.tensors[i].name;
        if (names) precis_closest_names(object, names, sf.n_tensors, closest, sizeof closest);
        free(names);
        st = precis_fail(PRECIS_E_INPUT, "%s: no tensor named \"%s\" (the file holds %zu; precis inspect %s lists them)%s", path,
                         object, sf.n_tensors, path, closest);
      } else if (t->rank != 2 && t->rank != 3)
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": expected rank 2 or 3, found rank %d", path, t->name, t->rank);
      else {
        for (int i = 0; i < t->rank && st == PRECIS_OK; i++)
          if (t->shape[i] <= 0 || t->shape[i] > INT32_MAX)
            st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": dimension %d is %" PRId64 " (expected 1 .. 2^31-1)", path,
                             t->name, i, t->shape[i]);
        if (st == PRECIS_OK) {
          *rank = t->rank;
          for (int i = 0; i < t->rank; i++) shape[i] = t->shape[i];
          st = precis_safetensors_read_f32(&sf, t, data);
        }
      }
      precis_safetensors_close(&sf);
    }
  }
  if (st == PRECIS_OK && d->transpose) {
    /* The file holds each matrix as [cols, rows]; store [rows, cols]. */
    int64_t samples = *rank == 3 ? shape[0] : 1, r = shape[*rank - 1], c = shape[*rank - 2];
    float *t = malloc((uint64_t)samples * (uint64_t)r * (uint64_t)c * sizeof *t);
    if (!t) st = precis_fail(PRECIS_E_NOMEM, "out of memory transposing %s", path);
    else {
      for (int64_t s = 0; s < samples; s++) {
        const float *src = *data + (uint64_t)s * (uint64_t)r * (uint64_t)c;
        float *dst = t + (uint64_t)s * (uint64_t)r * (uint64_t)c;
        for (int64_t i = 0; i < c; i++)
          for (int64_t j = 0; j < r; j++) dst[(uint64_t)j * (uint64_t)c + (uint64_t)i] = src[(uint64_t)i * (uint64_t)r + (uint64_t)j];
      }
      free(*data);
      *data = t;
      shape[*rank - 2] = r;
      shape[*rank - 1] = c;
    }
  }
  if (st != PRECIS_OK) {
    free(*data);
    *data = NULL;
  }
  free(path);
  return st;
}

/* ------------------------------------------------------------------------------------------------
 * Progress: a live line on a terminal, plain lines otherwise (DESIGN §7) */

typedef struct progress {
  bool enabled, tty;
  size_t index, count;
  const char *command;
} progress;

static void progress_say(const progress *p, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void progress_say(const progress *p, const char *name, const char *fmt, ...) {
  if (!p->enabled) return;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (p->tty) fprintf(stderr, "\r\033[Kprecis %s: [%zu/%zu] %s: %s", p->command, p->index + 1, p->count, name, msg);
  else fprintf(stderr, "precis %s: [%zu/%zu] %s: %s\n", p->command, p->index + 1, p->count, name, msg);
  fflush(stderr);
}

/* ------------------------------------------------------------------------------------------------
 * Generation */

/* What computes the float64 references: OpenBLAS on this CPU, or cublasDgemm on a CUDA device
 * (gen --reference-device cuda); method is the workloads' `reference` text. */
typedef struct ref_engine {
  const precis_reference_device *cuda; /* NULL: OpenBLAS */
  int device;
  char method[1024];
} ref_engine;

static precis_status engine_open(ref_engine *e, const precis_reference_device *cuda, int device) {
  memset(e, 0, sizeof *e);
  e->cuda = cuda;
  e->device = device;
  if (cuda) return cuda->describe(device, e->method, sizeof e->method);
  snprintf(e->method, sizeof e->method, "%s", precis_reference_method());
  return PRECIS_OK;
}

static precis_status engine_compute(const ref_engine *e, const float *a, const float *b, int64_t batch, int64_t m,
                                    int64_t n, int64_t k, bool b_batched, double *c_ref, double *ab_abs) {
  return e->cuda ? e->cuda->compute(e->device, a, b, batch, m, n, k, b_batched, c_ref, ab_abs)
                 : precis_reference_compute(a, b, batch, m, n, k, b_batched, c_ref, ab_abs);
}

precis_status precis_gen_check_reference_device(const precis_suite *suite, bool cuda) {
  if (!cuda) return PRECIS_OK;
  for (size_t i = 0; i < suite->n_workloads; i++)
    if (suite->workloads[i].dd_reference)
      return precis_fail(PRECIS_E_INPUT,
                         "%s:%d: workload %s: reference: double-double is computed on the CPU only (Sum2); "
                         "--reference-device cuda computes float64 references: generate the double-double "
                         "workloads without it", suite->source, suite->workloads[i].line, suite->workloads[i].name);
    else if (suite->workloads[i].f64_inputs)
      return precis_fail(PRECIS_E_INPUT,
                         "%s:%d: workload %s: inputs: float64 references are computed on the CPU only; "
                         "--reference-device cuda takes float32 inputs: generate the float64 workloads without it",
                         suite->source, suite->workloads[i].line, suite->workloads[i].name);
  return PRECIS_OK;
}

#define DD_REFERENCE_TEXT \
  "double-double: float32 products exact in float64, summed by cascaded TwoSum (Sum2, Ogita-Rump-Oishi 2005)"

static uint64_t host_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
}

/* One operand from a `file` distribution, fitted to [samples, rows, cols]. */
static precis_status operand_from_file(const precis_suite *suite, const precis_suite_workload *w, const precis_dist *d,
                                       bool is_a, float *held_out, float *calib) {
  float *data = NULL;
  int rank = 0;
  int64_t shape[3] = {0, 0, 0};
  precis_status st = precis_read_matrix_file(d, suite->base_dir, &data, &rank, shape);
  if (st != PRECIS_OK) {
    precis_error_prefix("%s:%d: workload %s: %s", suite->source, w->line, w->name, is_a ? "a" : "b");
    return st;
  }
  const int64_t rows = is_a ? w->m : w->k, cols = is_a ? w->k : w->n;
  const char *what = is_a ? "a" : "b";
  int64_t file_rows = shape[rank - 2], file_cols = shape[rank - 1], file_samples = rank == 3 ? shape[0] : 1;
  const uint64_t per = (uint64_t)rows * (uint64_t)cols;
  if (file_rows != rows || file_cols != cols) {
    st = precis_fail(PRECIS_E_INPUT, "workload %s: %s from %s:%s is [%" PRId64 ",%" PRId64 "]%s, expected [%" PRId64 ",%" PRId64 "] (%s)",
                     w->name, what, d->path, d->object ? d->object : "", file_rows, file_cols, d->transpose ? " after transposing" : "", rows,
                     cols, is_a ? "m x k" : "k x n");
    goto done;
  }
  if (is_a) {
    if (rank == 2) {
      if (w->calib > 0) {
        st = precis_fail(PRECIS_E_INPUT,
                         "workload %s: calib needs a rank-3 file [samples, m, k] for a (held-out samples first, then calibration)",
                         w->name);
        goto done;
      }
      for (int64_t s = 0; s < w->batch; s++) memcpy(held_out + (uint64_t)s * per, data, per * sizeof(float));
    } else {
      if (file_samples < w->batch + w->calib) {
        st = precis_fail(PRECIS_E_INPUT, "workload %s: a from %s:%s has %" PRId64 " samples, fewer than batch + calib = %" PRId64,
                         w->name, d->path, d->object ? d->object : "", file_samples, w->batch + w->calib);
        goto done;
      }
      memcpy(held_out, data, (uint64_t)w->batch * per * sizeof(float));
      if (w->calib > 0) memcpy(calib, data + (uint64_t)w->batch * per, (uint64_t)w->calib * per * sizeof(float));
    }
  } else {
    if (rank == 3 && (!w->b_batched || file_samples != w->batch)) {
      st = precis_fail(PRECIS_E_INPUT, "workload %s: b from %s:%s has rank 3 with %" PRId64 " matrices; that needs b_batched: true and batch: %" PRId64,
                       w->name, d->path, d->object ? d->object : "", file_samples, file_samples);
      goto done;
    }
    if (rank == 2 && w->b_batched) {
      for (int64_t s = 0; s < w->batch; s++) memcpy(held_out + (uint64_t)s * per, data, per * sizeof(float));
    } else {
      memcpy(held_out, data, (w->b_batched ? (uint64_t)w->batch : 1) * per * sizeof(float));
    }
  }
done:
  free(data);
  return st;
}

/* The float32 rounding (RNE) of float64 inputs, which recipes with narrower inputs read: what the
 * dataset reader derives from the stored float64 values. */
static void narrow_inputs(const double *wide, float *narrow, uint64_t count) {
  for (uint64_t i = 0; i < count; i++) narrow[i] = (float)wide[i];
}

static precis_status check_finite(const precis_suite_workload *w, const char *what, const precis_dist *d, const float *v,
                                  uint64_t count) {
  for (uint64_t i = 0; i < count; i++) {
    if (isfinite(v[i])) continue;
    if (d->kind == PRECIS_DIST_FILE)
      return precis_fail(PRECIS_E_INPUT, "%s: %s: element %" PRIu64 " is %s (workload %s: %s must be finite in float32)",
                         d->path, d->object ? d->object : "", i, isnan(v[i]) ? "NaN" : "infinite", w->name, what);
    return precis_fail(PRECIS_E_INPUT,
                       "workload %s: %s element %" PRIu64 " is %s (the distribution's parameters overflow float32)", w->name,
                       what, i, isnan(v[i]) ? "NaN" : "infinite");
  }
  return PRECIS_OK;
}

static precis_status generate_workload(const precis_suite *suite, const precis_suite_workload *w, precis_dataset_writer *writer,
                                       precis_sha256 *hash, const progress *prog, const ref_engine *eng) {
  precis_status st = PRECIS_OK;
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  info.name = w->name;
  char kind[] = "gemm";
  info.kind = kind;
  info.m = w->m;
  info.n = w->n;
  info.k = w->k;
  info.batch = w->batch;
  info.b_batched = w->b_batched;
  info.calib_samples = w->calib;
  info.description = w->description;
  const bool wide = w->f64_inputs;
  if (w->dd_reference)
    info.reference = precis_strdup(wide ? "double-double: float64 products split by TwoProduct (fma) and summed with "
                                          "their errors by cascaded TwoSum (Dot2, Ogita-Rump-Oishi 2005)"
                                        : DD_REFERENCE_TEXT);
  else if (wide) /* precis_gen_check_reference_device keeps float64 inputs on the CPU */
    info.reference = precis_asprintf("float64 dgemm of the stored float64 values (%s)", openblas_get_config());
  else info.reference = precis_strdup(eng->method);
  info.reference_precision = precis_strdup(w->dd_reference ? "double-double" : "float64");
  info.reference_error_bound = !w->dd_reference ? precis_reference_f64_bound(w->k)
                               : wide           ? precis_reference_dd_bound_f64(w->k)
                                                : precis_reference_dd_bound(w->k);
  info.has_c_ref_lo = w->dd_reference;
  info.a_f64 = info.b_f64 = wide;
  uint64_t bytes = precis_workload_bytes(&info);
  uint64_t a_count = (uint64_t)w->batch * (uint64_t)w->m * (uint64_t)w->k;
  uint64_t b_count = (w->b_batched ? (uint64_t)w->batch : 1) * (uint64_t)w->k * (uint64_t)w->n;
  uint64_t c_count = (uint64_t)w->batch * (uint64_t)w->m * (uint64_t)w->n;
  uint64_t calib_count = (uint64_t)w->calib * (uint64_t)w->m * (uint64_t)w->k;
  /* bytes counts the float64 inputs (and their float32 rounding) when wide; the float64 copies of
   * precis_reference_compute are a block of rows of a, and a block of columns of b. */
  const uint64_t copies = 8 * ((uint64_t)PRECIS_REFERENCE_BLOCK_ROWS * (uint64_t)w->k +
                                (uint64_t)w->k * (uint64_t)(w->n < PRECIS_REFERENCE_BLOCK_COLS ? w->n : PRECIS_REFERENCE_BLOCK_COLS));
  uint64_t need = bytes == UINT64_MAX ? UINT64_MAX : bytes + copies, have = host_memory();
  if (bytes == UINT64_MAX || need > have) {
    free(info.reference);
    free(info.reference_precision);
    return precis_fail(PRECIS_E_INPUT,
                       "%s:%d: workload %s: needs %.3g GiB of host memory to generate, more than this machine has (%.3g GiB)",
                       suite->source, w->line, w->name, (double)need / 1073741824.0, (double)have / 1073741824.0);
  }
  precis_workload_data data = {0};
  info.a_dist = precis_dist_describe(&w->a);
  info.b_dist = precis_dist_describe(&w->b);
  data.a = malloc(a_count * sizeof(float));
  data.b = malloc(b_count * sizeof(float));
  data.c_ref = malloc(c_count * sizeof(double));
  data.ab_abs = malloc(c_count * sizeof(double));
  if (w->calib > 0) data.calib_a = malloc(calib_count * sizeof(float));
  if (w->dd_reference) data.c_ref_lo = malloc(c_count * sizeof(double));
  if (wide) {
    data.a64 = malloc(a_count * sizeof(double));
    data.b64 = malloc(b_count * sizeof(double));
  }
  if ((wide && (!data.a64 || !data.b64)) || (w->dd_reference && !data.c_ref_lo) || !info.reference_precision || !info.reference || !info.a_dist || !info.b_dist || !data.a || !data.b || !data.c_ref || !data.ab_abs || (w->calib > 0 && !data.calib_a)) {
    st = precis_fail(PRECIS_E_NOMEM, "workload %s: out of host memory (%.3g GiB)", w->name, (double)bytes / 1073741824.0);
    goto done;
  }
  progress_say(prog, w->name, "inputs (%" PRId64 "x%" PRId64 "x%" PRId64 ", batch %" PRId64 ")", w->m, w->n, w->k, w->batch);
  const precis_rng_key key = precis_rng_key_for(w->has_seed ? w->seed : suite->seed, w->name);
  if (w->a.kind == PRECIS_DIST_FILE) {
    if ((st = operand_from_file(suite, w, &w->a, true, data.a, data.calib_a)) != PRECIS_OK) goto done;
    if (wide) widen(data.a, data.a64, a_count);
  } else {
    if (wide) {
      precis_dist_fill_f64(&w->a, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, w->batch, w->m, w->k, data.a64);
      narrow_inputs(data.a64, data.a, a_count);
    } else precis_dist_fill(&w->a, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, w->batch, w->m, w->k, data.a);
    if (w->calib > 0) precis_dist_fill(&w->a, key, PRECIS_STREAM_CALIB_A, PRECIS_OPERAND_A, w->calib, w->m, w->k, data.calib_a);
  }
  if (w->b.kind == PRECIS_DIST_FILE) {
    if ((st = operand_from_file(suite, w, &w->b, false, data.b, NULL)) != PRECIS_OK) goto done;
    if (wide) widen(data.b, data.b64, b_count);
  } else if (wide) {
    precis_dist_fill_f64(&w->b, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, w->b_batched ? w->batch : 1, w->k, w->n, data.b64);
    narrow_inputs(data.b64, data.b, b_count);
  } else {
    precis_dist_fill(&w->b, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, w->b_batched ? w->batch : 1, w->k, w->n, data.b);
  }
  if ((st = check_finite(w, "a", &w->a, data.a, a_count)) != PRECIS_OK ||
      (st = check_finite(w, "b", &w->b, data.b, b_count)) != PRECIS_OK ||
      (data.calib_a && (st = check_finite(w, "calib/a", &w->a, data.calib_a, calib_count)) != PRECIS_OK))
    goto done;
  progress_say(prog, w->name, "float64 references");
  st = wide ? precis_reference_compute_f64(data.a64, data.b64, w->batch, w->m, w->n, w->k, w->b_batched, data.c_ref,
                                           data.ab_abs)
            : engine_compute(eng, data.a, data.b, w->batch, w->m, w->n, w->k, w->b_batched, data.c_ref, data.ab_abs);
  if (st != PRECIS_OK) {
    precis_error_prefix("workload %s", w->name);
    goto done;
  }
  if (w->dd_reference) {
    progress_say(prog, w->name, "double-double references");
    st = wide ? precis_reference_compute_dd_f64(data.a64, data.b64, w->batch, w->m, w->n, w->k, w->b_batched, data.c_ref,
                                                data.c_ref_lo)
              : precis_reference_compute_dd(data.a, data.b, w->batch, w->m, w->n, w->k, w->b_batched, data.c_ref,
                                            data.c_ref_lo);
    if (st != PRECIS_OK) goto done;
  }
  for (uint64_t i = 0; i < c_count; i++)
    if (!isfinite(data.c_ref[i]) || !isfinite(data.ab_abs[i])) {
      st = precis_fail(PRECIS_E_INPUT, "workload %s: the reference overflows float64 at element %" PRIu64, w->name, i);
      goto done;
    }
  progress_say(prog, w->name, "writing %.1f MiB", (double)bytes / 1048576.0);
  if ((st = precis_dataset_writer_add(writer, &info, &data)) != PRECIS_OK) goto done;
  precis_dataset_id_add(hash, &info, &data);
done:
  free(info.reference);
  free(info.reference_precision);
  free(info.a_dist);
  free(info.b_dist);
  precis_workload_data_free(&data);
  return st;
}

/* Rows [row, row + rows) of a [samples, m, cols] array, split at the samples' boundaries. */
static precis_status write_stack_rows(precis_dataset_writer *writer, const char *array, int64_t m, int64_t row,
                                      int64_t rows, const void *values, size_t row_bytes) {
  for (int64_t done = 0; done < rows;) {
    int64_t at = row + done, sample = at / m, local = at % m;
    int64_t here = rows - done < m - local ? rows - done : m - local;
    precis_status st = precis_dataset_writer_rows(writer, array, sample, local, here,
                                                  (const char *)values + (size_t)done * row_bytes);
    if (st != PRECIS_OK) return st;
    done += here;
  }
  return PRECIS_OK;
}

/* ------------------------------------------------------------------------------------------------
 * References dealt to MPI ranks (docs/scale-out.md). Every rank walks the suite's generated
 * workloads in order and, within each, the reference blocks (PRECIS_REFERENCE_BLOCK_ROWS rows of a
 * group: the whole batch when b is shared, one sample when it is batched); block number j of the
 * walk belongs to rank j mod size. A rank other than 0 computes its blocks (it generates their rows
 * of a and its b itself: the generators are counter-based) and sends each to rank 0, in order;
 * rank 0 generates, hashes and writes everything, computes its own blocks and receives the others'
 * where they fall. Each block is the same dgemm call (and Sum2 rows) as in one process, so the
 * references are those of a single gen. */

enum { TAG_BLOCK = 1, TAG_FAIL, TAG_END, TAG_CANCEL };

typedef struct ref_deal {
  const precis_mpi_world *mpi;
  uint64_t next;       /* blocks dealt so far in the walk */
  char *inbox;         /* one block's message */
  size_t inbox_cap;
  char *reference;     /* the float64 `reference` text of dealt workloads (NULL: this rank's) */
} ref_deal;

/* Workloads whose a and b come from files are generated by rank 0 alone, in core. */
/* float64 inputs are made in core by rank 0 (their Dot2 references are not in the tiled path). */
static bool dealt_workload(const precis_suite_workload *w) {
  return w->a.kind != PRECIS_DIST_FILE && w->b.kind != PRECIS_DIST_FILE && !w->f64_inputs;
}

static int deal_owner(ref_deal *d) { return (int)(d->next++ % (uint64_t)d->mpi->size); }

/* The references of `rows` rows of a against one b (k x n): c_ref and ab_abs by dgemm and, for a
 * double-double reference, c_ref + c_lo by Sum2 (per row: a row's values do not depend on the
 * others). The in-core path's values, as long as rows is whole reference blocks of a group. */
static precis_status tile_references(const ref_engine *eng, const precis_suite_workload *w, const float *a, const float *b,
                                     int64_t rows, double *c, double *abs_c, double *c_lo) {
  precis_status st = engine_compute(eng, a, b, 1, rows, w->n, w->k, false, c, abs_c);
  if (st == PRECIS_OK && c_lo) st = precis_reference_compute_dd(a, b, 1, rows, w->n, w->k, false, c, c_lo);
  if (st != PRECIS_OK) precis_error_prefix("workload %s", w->name);
  return st;
}

static size_t block_message_bytes(const precis_suite_workload *w, int64_t rows) {
  return (size_t)rows * (size_t)w->n * sizeof(double) * (w->dd_reference ? 3 : 2);
}

static precis_status inbox_reserve(ref_deal *d, size_t bytes) {
  if (bytes <= d->inbox_cap) return PRECIS_OK;
  free(d->inbox);
  d->inbox = malloc(bytes);
  d->inbox_cap = d->inbox ? bytes : 0;
  if (d->inbox) return PRECIS_OK;
  return precis_fail(PRECIS_E_NOMEM, "out of host memory for a block of references (%zu bytes)", bytes);
}

/* Rank 0: the next message of rank `from`, which must be its block of `rows` rows. */
static precis_status receive_block(ref_deal *d, int from, const precis_suite_workload *w, int64_t row, int64_t rows,
                                   double *c, double *abs_c, double *c_lo, bool *ended) {
  const size_t want = block_message_bytes(w, rows);
  precis_status st = inbox_reserve(d, want < 4096 ? 4096 : want);
  if (st != PRECIS_OK) return st;
  int tag = 0;
  size_t got = 0;
  if ((st = precis_mpi_recv(d->mpi, from, &tag, d->inbox, d->inbox_cap, &got)) != PRECIS_OK) return st;
  if (tag == TAG_FAIL) {
    d->inbox[got < d->inbox_cap ? got : d->inbox_cap - 1] = '\0';
    return precis_fail(PRECIS_E_RUNTIME, "MPI rank %d: %s", from, d->inbox);
  }
  if (tag == TAG_END) {
    ended[from] = true;
    return precis_fail(PRECIS_E_RUNTIME, "MPI rank %d ended before sending the references of workload %s, rows %" PRId64
                       "-%" PRId64 " (do all ranks run the same precis?)", from, w->name, row, row + rows);
  }
  if (tag != TAG_BLOCK || got != want)
    return precis_fail(PRECIS_E_RUNTIME, "MPI rank %d sent %zu bytes (tag %d) for workload %s, rows %" PRId64 "-%" PRId64
                       ", expected a block of %zu bytes (do all ranks run the same precis?)", from, got, tag, w->name,
                       row, row + rows, want);
  const size_t part = (size_t)rows * (size_t)w->n * sizeof(double);
  memcpy(c, d->inbox, part);
  memcpy(abs_c, d->inbox + part, part);
  if (c_lo) memcpy(c_lo, d->inbox + 2 * part, part);
  return PRECIS_OK;
}

/* Rank 0's references of a tile (rows from `row` of the group's stack, whole blocks): its own
 * blocks computed, the others received. Without MPI: the whole tile here. */
static precis_status deal_tile(ref_deal *d, const ref_engine *eng, const precis_suite_workload *w, const float *a,
                               const float *b, int64_t row,
                               int64_t rows, double *c, double *abs_c, double *c_lo, bool *ended) {
  if (!d) return tile_references(eng, w, a, b, rows, c, abs_c, c_lo);
  for (int64_t r0 = 0; r0 < rows; r0 += PRECIS_REFERENCE_BLOCK_ROWS) {
    int64_t here = rows - r0 < PRECIS_REFERENCE_BLOCK_ROWS ? rows - r0 : PRECIS_REFERENCE_BLOCK_ROWS;
    const uint64_t off = (uint64_t)r0 * (uint64_t)w->n;
    int owner = deal_owner(d);
    double *lo = c_lo ? c_lo + off : NULL;
    precis_status st = owner == 0 ? tile_references(eng, w, a + (uint64_t)r0 * (uint64_t)w->k, b, here, c + off, abs_c + off, lo)
                                  : receive_block(d, owner, w, row + r0, here, c + off, abs_c + off, lo, ended);
    if (st != PRECIS_OK) return st;
  }
  return PRECIS_OK;
}

/* One workload out of core: a (and calib/a) generated, checked, hashed and written `tile` rows at a
 * time with its c_ref and ab_abs (and c_ref_lo) rows; b is held whole (per sample when batched).
 * The values, the file and the dataset_id are those of generate_workload. Under MPI (deal) the
 * tiles' references are dealt to the ranks. */
static precis_status generate_workload_tiled(const precis_suite *suite, const precis_suite_workload *w,
                                             precis_dataset_writer *writer, precis_sha256 *hash, const progress *prog,
                                             int64_t tile, const ref_engine *eng, ref_deal *deal, bool *ended) {
  precis_status st = PRECIS_OK;
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  info.name = w->name;
  char kind[] = "gemm";
  info.kind = kind;
  info.m = w->m, info.n = w->n, info.k = w->k, info.batch = w->batch;
  info.b_batched = w->b_batched;
  info.calib_samples = w->calib;
  info.description = w->description;
  info.reference = precis_strdup(w->dd_reference ? DD_REFERENCE_TEXT
                                 : deal && deal->reference ? deal->reference : eng->method);
  info.reference_precision = precis_strdup(w->dd_reference ? "double-double" : "float64");
  info.reference_error_bound = w->dd_reference ? precis_reference_dd_bound(w->k) : precis_reference_f64_bound(w->k);
  info.has_c_ref_lo = w->dd_reference;
  info.a_dist = precis_dist_describe(&w->a);
  info.b_dist = precis_dist_describe(&w->b);
  /* Whole reference blocks per tile, so that each dgemm call is the in-core path's. */
  tile = (tile + PRECIS_REFERENCE_BLOCK_ROWS - 1) / PRECIS_REFERENCE_BLOCK_ROWS * PRECIS_REFERENCE_BLOCK_ROWS;
  if (tile > (w->b_batched ? w->m : w->batch * w->m)) tile = w->b_batched ? w->m : w->batch * w->m;
  const uint64_t kn = (uint64_t)w->k * (uint64_t)w->n, tile_c = (uint64_t)tile * (uint64_t)w->n;
  float *b = malloc(kn * sizeof *b), *a = malloc((uint64_t)tile * (uint64_t)w->k * sizeof *a);
  double *c = malloc(tile_c * sizeof *c), *abs_c = malloc(tile_c * sizeof *abs_c);
  double *c_lo = w->dd_reference ? malloc(tile_c * sizeof *c_lo) : NULL;
  bool begun = false;
  if (!info.reference || !info.reference_precision || !info.a_dist || !info.b_dist || !b || !a || !c || !abs_c ||
      (w->dd_reference && !c_lo)) {
    st = precis_fail(PRECIS_E_NOMEM, "workload %s: out of host memory for a tile of %" PRId64 " rows", w->name, tile);
    goto done;
  }
  const precis_rng_key key = precis_rng_key_for(w->has_seed ? w->seed : suite->seed, w->name);
  const int64_t b_samples = w->b_batched ? w->batch : 1;
  if ((st = precis_dataset_writer_begin(writer, &info)) != PRECIS_OK) goto done;
  begun = true;
  precis_dataset_id_add_header(hash, &info);
  /* Tiles run over the rows of the whole batch when b is shared and over each sample's rows when it
   * is batched: the blocks of precis_reference_compute. */
  const int64_t groups = w->b_batched ? w->batch : 1, rows_per = w->b_batched ? w->m : w->batch * w->m;
  if (tile > rows_per) tile = rows_per;
  for (int64_t g = 0; g < groups; g++) {
    precis_dist_fill_range(&w->b, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, b_samples, w->k, w->n, (uint64_t)g * kn, kn, b);
    if ((st = check_finite(w, "b", &w->b, b, kn)) != PRECIS_OK ||
        (st = precis_dataset_writer_rows(writer, "b", g, 0, w->k, b)) != PRECIS_OK)
      goto done;
    for (int64_t r0 = 0; r0 < rows_per; r0 += tile) {
      if (precis_interrupt_signal) {
        st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted in workload %s", w->name);
        goto done;
      }
      int64_t rows = rows_per - r0 < tile ? rows_per - r0 : tile;
      int64_t row = g * rows_per + r0; /* of the whole [batch * m] stack */
      progress_say(prog, w->name, "rows %" PRId64 "-%" PRId64 " of %" PRId64, row, row + rows, w->batch * w->m);
      uint64_t count = (uint64_t)rows * (uint64_t)w->k;
      precis_dist_fill_range(&w->a, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, w->batch, w->m, w->k,
                             (uint64_t)row * (uint64_t)w->k, count, a);
      if ((st = check_finite(w, "a", &w->a, a, count)) != PRECIS_OK) goto done;
      precis_dataset_id_add_floats(hash, a, count);
      if ((st = deal_tile(deal, eng, w, a, b, row, rows, c, abs_c, c_lo, ended)) != PRECIS_OK) goto done;
      for (uint64_t i = 0; i < (uint64_t)rows * (uint64_t)w->n; i++)
        if (!isfinite(c[i]) || !isfinite(abs_c[i])) {
          st = precis_fail(PRECIS_E_INPUT, "workload %s: the reference overflows float64 at element %" PRIu64, w->name,
                           (uint64_t)row * (uint64_t)w->n + i);
          goto done;
        }
      if ((st = write_stack_rows(writer, "a", w->m, row, rows, a, (size_t)w->k * sizeof *a)) != PRECIS_OK ||
          (st = write_stack_rows(writer, "c_ref", w->m, row, rows, c, (size_t)w->n * sizeof *c)) != PRECIS_OK ||
          (st = write_stack_rows(writer, "ab_abs", w->m, row, rows, abs_c, (size_t)w->n * sizeof *abs_c)) != PRECIS_OK ||
          (c_lo &&
           (st = write_stack_rows(writer, "c_ref_lo", w->m, row, rows, c_lo, (size_t)w->n * sizeof *c_lo)) != PRECIS_OK))
        goto done;
    }
  }
  /* The digest takes b after the whole of a, as the in-core path does. */
  for (int64_t g = 0; g < b_samples; g++) {
    if (b_samples > 1)
      precis_dist_fill_range(&w->b, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, b_samples, w->k, w->n, (uint64_t)g * kn, kn, b);
    precis_dataset_id_add_floats(hash, b, kn);
  }
  for (int64_t r0 = 0; r0 < w->calib * w->m; r0 += tile) {
    int64_t rows = w->calib * w->m - r0 < tile ? w->calib * w->m - r0 : tile;
    uint64_t count = (uint64_t)rows * (uint64_t)w->k;
    precis_dist_fill_range(&w->a, key, PRECIS_STREAM_CALIB_A, PRECIS_OPERAND_A, w->calib, w->m, w->k,
                           (uint64_t)r0 * (uint64_t)w->k, count, a);
    if ((st = check_finite(w, "calib/a", &w->a, a, count)) != PRECIS_OK ||
        (st = write_stack_rows(writer, "calib/a", w->m, r0, rows, a, (size_t)w->k * sizeof *a)) != PRECIS_OK)
      goto done;
    precis_dataset_id_add_floats(hash, a, count);
  }
  precis_dataset_id_add_reference(hash, &info);
done:
  if (begun) precis_dataset_writer_end(writer);
  free(info.reference);
  free(info.reference_precision);
  free(info.a_dist);
  free(info.b_dist);
  free(a);
  free(b);
  free(c);
  free(abs_c);
  free(c_lo);
  return st;
}

/* Rank 0, at the end: every other rank's TAG_END. After a failure the others are told to stop
 * first and their blocks in flight are received and dropped (a rank blocked in a send would never
 * reach its end). Not after an interrupt: mpirun is ending the job, and a dead rank sends nothing. */
static precis_status deal_finish(ref_deal *d, bool *ended, bool failed) {
  precis_status st = PRECIS_OK;
  const precis_mpi_world *mpi = d->mpi;
  if (failed)
    for (int r = 1; r < mpi->size; r++)
      if (!ended[r]) precis_mpi_send(mpi, r, TAG_CANCEL, "", 0);
  for (int r = 1; r < mpi->size && st == PRECIS_OK; r++)
    while (!ended[r]) {
      int tag = 0;
      size_t got = 0;
      if ((st = inbox_reserve(d, 4096)) != PRECIS_OK ||
          (st = precis_mpi_recv(mpi, r, &tag, d->inbox, d->inbox_cap, &got)) != PRECIS_OK)
        break;
      if (tag == TAG_END) ended[r] = true;
      else if (!failed && tag == TAG_FAIL) {
        d->inbox[got < d->inbox_cap ? got : d->inbox_cap - 1] = '\0';
        st = precis_fail(PRECIS_E_RUNTIME, "MPI rank %d: %s", r, d->inbox);
      } else if (!failed)
        st = precis_fail(PRECIS_E_RUNTIME, "MPI rank %d sent more references than were dealt to it (do all ranks run "
                         "the same precis?)", r);
    }
  return st;
}

/* Rank 0: every rank's reference method; ranks whose OpenBLAS differs from rank 0's are named in
 * the `reference` text of the dealt workloads (their blocks' last bits may differ). */
static precis_status deal_methods(ref_deal *d, const char *mine, bool warn) {
  const precis_mpi_world *mpi = d->mpi;
  char **texts = calloc((size_t)mpi->size, sizeof *texts);
  size_t *lens = calloc((size_t)mpi->size, sizeof *lens);
  precis_status st = texts && lens ? PRECIS_OK : precis_fail(PRECIS_E_NOMEM, "out of memory");
  /* Collective: taken part in also after a failure here. */
  precis_status gathered = precis_mpi_gather_text(mpi, mine, strlen(mine), texts && lens ? texts : NULL, lens);
  if (st == PRECIS_OK) st = gathered;
  if (st == PRECIS_OK && mpi->rank == 0) {
    char *text = precis_strdup(mine);
    for (int r = 1; r < mpi->size && text; r++) {
      if (strcmp(texts[r], mine) == 0) continue;
      if (warn) fprintf(stderr, "precis gen: warning: MPI rank %d computes references otherwise (%s) than rank 0 (%s): "
                                "the last bits of its blocks may differ from a single gen's\n", r, texts[r], mine);
      char *longer = precis_asprintf("%s; MPI rank %d's blocks: %s", text, r, texts[r]);
      free(text);
      text = longer;
    }
    if (!text) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    d->reference = text;
  }
  for (int r = 0; texts && r < mpi->size; r++) free(texts[r]);
  free(texts);
  free(lens);
  return st;
}

precis_status precis_generate(const precis_suite *suite, const precis_gen_options *options, char dataset_id[65]) {
  return precis_generate_tiled(suite, options, 0, dataset_id);
}

static precis_status generate_all(const precis_suite *suite, const precis_gen_options *options, int64_t tile_rows,
                                  char dataset_id[65]) {
  precis_dataset_writer *writer = NULL;
  ref_deal deal_state = {0}, *deal = NULL;
  bool *ended = NULL;
  ref_engine eng;
  memset(&eng, 0, sizeof eng);
  precis_status st = precis_gen_check_reference_device(suite, options->reference_cuda != NULL);
  if (st == PRECIS_OK) st = engine_open(&eng, options->reference_cuda, options->reference_cuda_device);
  if (options->mpi && options->mpi->active) {
    deal_state.mpi = options->mpi;
    deal = &deal_state;
    ended = calloc((size_t)options->mpi->size, sizeof *ended);
    /* Collective: taken part in also after a failure above, which is then reported. */
    char failure[1024];
    snprintf(failure, sizeof failure, "%s", precis_last_error());
    precis_status methods = deal_methods(deal, eng.method, options->progress);
    if (st != PRECIS_OK) precis_fail(st, "%s", failure);
    else if (!ended) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    else st = methods;
  }
  if (st != PRECIS_OK) goto failed;
  precis_dataset_write_options wopt = {options->force, options->gzip_level};
  if ((st = precis_dataset_writer_open(options->output, &wopt, &writer)) != PRECIS_OK) goto failed;
  progress prog = {options->progress, options->progress && isatty(2), 0, suite->n_workloads,
                   options->command ? options->command : "gen"};
  precis_sha256 hash;
  precis_dataset_id_begin(&hash, suite->seed, suite->n_workloads);
  for (size_t i = 0; i < suite->n_workloads; i++) {
    if (precis_interrupt_signal) {
      st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted; %s was not written", options->output);
      goto failed;
    }
    prog.index = i;
    const precis_suite_workload *w = &suite->workloads[i];
    /* Matrices from files are read whole, in core (and by rank 0 alone under MPI). Under MPI
     * without --tile-rows a tile is a whole group: memory as in core. */
    bool tiled = dealt_workload(w) && (tile_rows > 0 || deal);
    st = tiled ? generate_workload_tiled(suite, w, writer, &hash, &prog, tile_rows > 0 ? tile_rows : w->batch * w->m,
                                         &eng, deal, ended)
               : generate_workload(suite, w, writer, &hash, &prog, &eng);
    if (st != PRECIS_OK) goto failed;
  }
  if (prog.tty) fprintf(stderr, "\r\033[K");
  /* Every rank has sent all its blocks before the file is committed. */
  if (deal && (st = deal_finish(deal, ended, false)) != PRECIS_OK) {
    deal = NULL; /* finished, or failed in a way a second drain would not mend */
    goto failed;
  }
  char id[65];
  precis_dataset_id_finish(&hash, id);
  char created[32];
  time_t now = time(NULL);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  char generator[128];
  snprintf(generator, sizeof generator, "precis %s (commit %s)", PRECIS_VERSION, PRECIS_COMMIT);
  precis_dataset_root_attrs root = {generator, created, suite->seed, suite->text, id, NULL};
  st = precis_dataset_writer_commit(writer, &root);
  if (st == PRECIS_OK && dataset_id) memcpy(dataset_id, id, 65);
  goto done;
failed:
  if (options->progress && isatty(2)) fprintf(stderr, "\n");
  if (writer) precis_dataset_writer_abort(writer);
  if (options->mpi && options->mpi->active) precis_error_prefix("%s was not written", options->output);
  /* The other ranks stop and are drained, unless the job is being ended (they may be dead). */
  if (deal && st != PRECIS_E_INTERRUPTED) deal_finish(deal, ended, true);
done:
  free(deal_state.inbox);
  free(deal_state.reference);
  free(ended);
  return st;
}

precis_status precis_generate_tiled(const precis_suite *suite, const precis_gen_options *options, int64_t tile_rows,
                                    char dataset_id[65]) {
  precis_status st = generate_all(suite, options, tile_rows, dataset_id);
  precis_reference_release();
  return st;
}

/* A rank other than 0: its blocks of the walk, in order, each sent to rank 0; then TAG_END. */
static precis_status worker_blocks(const precis_suite *suite, const precis_mpi_world *mpi, const ref_engine *eng) {
  precis_status st = PRECIS_OK;
  uint64_t next = 0;
  float *a = NULL, *b = NULL;
  char *out = NULL;
  const char *inject = getenv("PRECIS_FAULT_INJECT");
  for (size_t i = 0; i < suite->n_workloads && st == PRECIS_OK; i++) {
    const precis_suite_workload *w = &suite->workloads[i];
    if (!dealt_workload(w)) continue;
    free(a), free(b), free(out);
    const uint64_t kn = (uint64_t)w->k * (uint64_t)w->n;
    const int64_t groups = w->b_batched ? w->batch : 1, rows_per = w->b_batched ? w->m : w->batch * w->m;
    const size_t part = (size_t)PRECIS_REFERENCE_BLOCK_ROWS * (size_t)w->n * sizeof(double);
    a = malloc((uint64_t)PRECIS_REFERENCE_BLOCK_ROWS * (uint64_t)w->k * sizeof *a);
    b = malloc(kn * sizeof *b);
    out = malloc(part * (w->dd_reference ? 3 : 2));
    if (!a || !b || !out) {
      st = precis_fail(PRECIS_E_NOMEM, "workload %s: out of host memory for a block of references", w->name);
      break;
    }
    const precis_rng_key key = precis_rng_key_for(w->has_seed ? w->seed : suite->seed, w->name);
    for (int64_t g = 0; g < groups && st == PRECIS_OK; g++) {
      bool have_b = false;
      for (int64_t r0 = 0; r0 < rows_per; r0 += PRECIS_REFERENCE_BLOCK_ROWS) {
        if (next++ % (uint64_t)mpi->size != (uint64_t)mpi->rank) continue;
        /* Rank 0 has failed (its error is the one reported): stop. */
        if (precis_mpi_pending(mpi, 0, TAG_CANCEL)) goto end;
        if (precis_interrupt_signal) {
          st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted in workload %s", w->name);
          break;
        }
        /* A test's way to make a rank other than 0 fail, or die, while rank 0 is writing
         * (tests/py/test_mpi_gen.py): PRECIS_FAULT_INJECT=gen-rank:R or gen-rank-kill:R. */
        if (inject && strncmp(inject, "gen-rank-kill:", 14) == 0 && atoi(inject + 14) == mpi->rank) raise(SIGKILL);
        if (inject && strncmp(inject, "gen-rank:", 9) == 0 && atoi(inject + 9) == mpi->rank) {
          st = precis_fail(PRECIS_E_RUNTIME, "workload %s: a failure injected by PRECIS_FAULT_INJECT=%s", w->name, inject);
          break;
        }
        if (!have_b) {
          precis_dist_fill_range(&w->b, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, groups, w->k, w->n, (uint64_t)g * kn, kn, b);
          have_b = true;
        }
        int64_t rows = rows_per - r0 < PRECIS_REFERENCE_BLOCK_ROWS ? rows_per - r0 : PRECIS_REFERENCE_BLOCK_ROWS;
        int64_t row = g * rows_per + r0;
        precis_dist_fill_range(&w->a, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, w->batch, w->m, w->k,
                               (uint64_t)row * (uint64_t)w->k, (uint64_t)rows * (uint64_t)w->k, a);
        const size_t here = (size_t)rows * (size_t)w->n * sizeof(double);
        double *c = (double *)out, *abs_c = (double *)(out + here);
        double *c_lo = w->dd_reference ? (double *)(out + 2 * here) : NULL;
        if ((st = tile_references(eng, w, a, b, rows, c, abs_c, c_lo)) != PRECIS_OK ||
            (st = precis_mpi_send(mpi, 0, TAG_BLOCK, out, here * (w->dd_reference ? 3 : 2))) != PRECIS_OK)
          break;
      }
    }
  }
  if (st != PRECIS_OK) {
    const char *why = precis_last_error();
    precis_mpi_send(mpi, 0, TAG_FAIL, why, strlen(why) + 1);
  }
end:
  precis_mpi_send(mpi, 0, TAG_END, "", 0);
  free(a);
  free(b);
  free(out);
  return st;
}

precis_status precis_generate_worker(const precis_suite *suite, const precis_mpi_world *mpi,
                                     const precis_reference_device *reference_cuda, int reference_cuda_device) {
  ref_deal deal = {.mpi = mpi};
  /* No suite: this rank could not take part; the reason is the current error message. */
  precis_status st = suite ? PRECIS_OK : precis_fail(PRECIS_E_INPUT, "%s", precis_last_error());
  ref_engine eng;
  memset(&eng, 0, sizeof eng);
  if (st == PRECIS_OK) st = engine_open(&eng, reference_cuda, reference_cuda_device);
  char failure[1024];
  snprintf(failure, sizeof failure, "%s", precis_last_error());
  precis_status methods = deal_methods(&deal, eng.method, false);
  if (st == PRECIS_OK) st = methods;
  else precis_fail(st, "%s", failure);
  /* A rank that cannot take part still ends its part of the protocol: rank 0 is waiting for it. */
  if (st != PRECIS_OK) {
    const char *why = precis_last_error();
    precis_mpi_send(mpi, 0, TAG_FAIL, why, strlen(why) + 1);
    precis_mpi_send(mpi, 0, TAG_END, "", 0);
  } else {
    st = worker_blocks(suite, mpi, &eng);
  }
  precis_reference_release();
  return st;
}
