/* precis._precis: the C extension of the Python package (DESIGN §15), over the public C API only
 * (the headers under include/precis/). CPython's stable ABI (Py_LIMITED_API 3.11, for the buffer protocol).
 *
 * Arrays come in through the buffer protocol, dense and C-ordered (a non-contiguous buffer is
 * refused by PyObject_GetBuffer itself), with their element type checked; the output of emulate is
 * a writable buffer the caller allocated. NumPy is not used here: the thin layer in precis/ converts.
 * Every C error becomes an exception of precis.Error's family carrying precis's message, its status
 * name (`status`) and the CLI's exit code for it (`exit_code`). The GIL is released around every call
 * that computes or touches files. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "precis/precis.h"

static PyObject *error_base, *error_usage, *error_unsupported, *error_memory, *error_io;

/* The exception of a status: precis.UsageError is a ValueError, precis.UnsupportedError a
 * NotImplementedError, precis.OutOfMemoryError a MemoryError, precis.IOError an OSError. */
static PyObject *raise_status(precis_status st) {
  PyObject *type = error_base;
  switch (st) {
  case PRECIS_E_USAGE:
  case PRECIS_E_INPUT:
  case PRECIS_E_EXISTS: type = error_usage; break;
  case PRECIS_E_UNSUPPORTED: type = error_unsupported; break;
  case PRECIS_E_NOMEM:
  case PRECIS_E_DOES_NOT_FIT: type = error_memory; break;
  case PRECIS_E_IO: type = error_io; break;
  default: break;
  }
  const char *msg = precis_last_error();
  PyObject *exc = PyObject_CallFunction(type, "s", msg && msg[0] ? msg : precis_status_str(st));
  if (!exc) return NULL;
  PyObject *name = PyUnicode_FromString(precis_status_str(st));
  PyObject *code = PyLong_FromLong(precis_status_exit_code(st));
  if (name && code) {
    PyObject_SetAttrString(exc, "status", name);
    PyObject_SetAttrString(exc, "exit_code", code);
  }
  Py_XDECREF(name);
  Py_XDECREF(code);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* The element type of a buffer's struct format: "f"/"<f"/"=f" float32, "d" float64; -1 otherwise. */
static int format_dtype(const char *fmt) {
  if (!fmt) return -1;
  if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
  if (strcmp(fmt, "f") == 0) return PRECIS_DTYPE_F32;
  if (strcmp(fmt, "d") == 0) return PRECIS_DTYPE_F64;
  return -1;
}

/* Takes a C-contiguous buffer of float32 (or float64 when allow_f64) holding exactly `count`
 * elements. Raises TypeError (element type), BufferError (not contiguous, from CPython) or
 * ValueError (size) naming the argument. */
static int get_array(PyObject *obj, const char *name, int writable, int allow_f64, Py_ssize_t count, Py_buffer *view,
                     precis_dtype *dtype) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, view, flags) != 0) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    PyErr_Format(PyExc_BufferError, "%s: expected a C-contiguous%s array (%S)", name, writable ? ", writable" : "",
                 text ? text : Py_None);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
  }
  int t = format_dtype(view->format);
  if (t < 0 || (t == PRECIS_DTYPE_F64 && !allow_f64)) {
    PyErr_Format(PyExc_TypeError, "%s: element type \"%s\": expected float32%s", name, view->format ? view->format : "B",
                 allow_f64 ? " or float64" : "");
    PyBuffer_Release(view);
    return -1;
  }
  if (view->len != count * view->itemsize) {
    PyErr_Format(PyExc_ValueError, "%s: %zd elements, expected %zd", name, view->len / view->itemsize, count);
    PyBuffer_Release(view);
    return -1;
  }
  *dtype = (precis_dtype)t;
  return 0;
}

/* count = d0*d1*d2 with every dimension >= 1, or a ValueError. */
static int checked_count(const char *what, long long d0, long long d1, long long d2, Py_ssize_t *count) {
  if (d0 < 1 || d1 < 1 || d2 < 1) {
    PyErr_Format(PyExc_ValueError, "%s of shape [%lld, %lld, %lld]: every dimension must be at least 1 (empty arrays "
                 "have nothing to compute)", what, d0, d1, d2);
    return -1;
  }
  if (d1 > PY_SSIZE_T_MAX / 8 / d0 || d2 > PY_SSIZE_T_MAX / 8 / (d0 * d1)) {
    PyErr_Format(PyExc_ValueError, "%s of shape [%lld, %lld, %lld]: too large", what, d0, d1, d2);
    return -1;
  }
  *count = (Py_ssize_t)(d0 * d1 * d2);
  return 0;
}

/* ---- specs and recipes -------------------------------------------------------------------- */

static PyObject *py_spec_canonical(PyObject *self, PyObject *args) {
  const char *text;
  if (!PyArg_ParseTuple(args, "s:spec_canonical", &text)) return NULL;
  char buf[PRECIS_CANONICAL_MAX];
  precis_status st = precis_spec_canonical(text, buf, sizeof buf);
  if (st != PRECIS_OK) return raise_status(st);
  return PyUnicode_FromString(buf);
}

static PyObject *py_recipes(PyObject *self, PyObject *unused) {
  size_t n = precis_recipe_count();
  PyObject *list = PyList_New(0);
  if (!list) return NULL;
  for (size_t i = 0; i < n; i++) {
    precis_recipe_entry e;
    if (precis_recipe_get(i, &e) != PRECIS_OK) {
      Py_DECREF(list);
      return raise_status(PRECIS_E_RUNTIME);
    }
    PyObject *d = Py_BuildValue("{s:s,s:s,s:s,s:O,s:O,s:O,s:O,s:O}", "name", e.name, "spec", e.spec, "description",
                                e.description, "in_all", e.in_all ? Py_True : Py_False, "high_precision",
                                e.high_precision ? Py_True : Py_False, "baseline", e.baseline ? Py_True : Py_False,
                                "required", e.required ? Py_True : Py_False, "cpu", e.cpu_supported ? Py_True : Py_False);
    if (!d || PyList_Append(list, d) != 0) {
      Py_XDECREF(d);
      Py_DECREF(list);
      return NULL;
    }
    Py_DECREF(d);
  }
  return list;
}

static PyObject *py_cpu_support(PyObject *self, PyObject *args) {
  const char *text;
  if (!PyArg_ParseTuple(args, "s:cpu_support", &text)) return NULL;
  char why[512];
  precis_status st = precis_recipe_cpu_support(text, why, sizeof why);
  if (st == PRECIS_OK) return Py_BuildValue("(Os)", Py_True, "");
  if (st == PRECIS_E_UNSUPPORTED) return Py_BuildValue("(Os)", Py_False, why);
  return raise_status(st);
}

static PyObject *py_out_dtype(PyObject *self, PyObject *args) {
  const char *text;
  if (!PyArg_ParseTuple(args, "s:out_dtype", &text)) return NULL;
  precis_dtype t;
  precis_status st = precis_emulate_out_dtype(text, &t);
  if (st != PRECIS_OK) return raise_status(st);
  return PyUnicode_FromString(t == PRECIS_DTYPE_F64 ? "float64" : "float32");
}

/* ---- emulate -------------------------------------------------------------------------------- */

/* emulate(recipe, a, b, out, batch, m, n, k, b_batched, calib=None, calib_samples=0, target=None) -> dict */
static PyObject *py_emulate(PyObject *self, PyObject *args) {
  const char *recipe, *target = NULL;
  PyObject *a_obj, *b_obj, *c_obj, *calib_obj = Py_None;
  long long batch, m, n, k, calib_samples = 0;
  int b_batched, b_transposed = 0;
  if (!PyArg_ParseTuple(args, "sOOOLLLLp|OLzp:emulate", &recipe, &a_obj, &b_obj, &c_obj, &batch, &m, &n, &k, &b_batched,
                        &calib_obj, &calib_samples, &target, &b_transposed))
    return NULL;
  Py_ssize_t a_count, b_count, c_count, calib_count = 0;
  if (checked_count("a", batch, m, k, &a_count) || checked_count("b", b_batched ? batch : 1, k, n, &b_count) ||
      checked_count("c", batch, m, n, &c_count))
    return NULL;
  if (calib_obj != Py_None && checked_count("calib", calib_samples, m, k, &calib_count)) return NULL;
  Py_buffer a = {0}, b = {0}, c = {0}, calib = {0};
  precis_dtype a_t, b_t, c_t, calib_t;
  PyObject *result = NULL;
  int have_a = 0, have_b = 0, have_c = 0, have_calib = 0;
  if (get_array(a_obj, "a", 0, 1, a_count, &a, &a_t)) goto done;
  have_a = 1;
  if (get_array(b_obj, "b", 0, 1, b_count, &b, &b_t)) goto done;
  have_b = 1;
  if (get_array(c_obj, "out", 1, 1, c_count, &c, &c_t)) goto done;
  have_c = 1;
  if (calib_obj != Py_None) {
    if (get_array(calib_obj, "calib", 0, 0, calib_count, &calib, &calib_t)) goto done;
    have_calib = 1;
  }
  precis_gemm g = {.batch = batch, .m = m, .n = n, .k = k, .b_batched = b_batched, .a = a.buf, .a_dtype = a_t,
                   .b = b.buf, .b_dtype = b_t, .calib_a = have_calib ? calib.buf : NULL,
                   .calib_samples = have_calib ? calib_samples : 0, .b_transposed = b_transposed};
  precis_emulate_info info;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_emulate_target(recipe, &g, c.buf, c_t, target, &info);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) {
    raise_status(st);
    goto done;
  }
  result = Py_BuildValue("{s:s,s:d,s:s,s:s}", "spec", info.canonical, "clipped_fraction", info.clipped_fraction,
                         "emulation", info.emulation, "out_dtype",
                         info.out_dtype == PRECIS_DTYPE_F64 ? "float64" : "float32");
done:
  if (have_a) PyBuffer_Release(&a);
  if (have_b) PyBuffer_Release(&b);
  if (have_c) PyBuffer_Release(&c);
  if (have_calib) PyBuffer_Release(&calib);
  return result;
}

/* emulate_b_bytes(recipe, k, n, target or None) -> the host bytes emulate holds for a W [n, k] */
static PyObject *py_emulate_b_bytes(PyObject *self, PyObject *args) {
  (void)self;
  const char *recipe, *target = NULL;
  long long k, n;
  if (!PyArg_ParseTuple(args, "sLL|z:emulate_b_bytes", &recipe, &k, &n, &target)) return NULL;
  int64_t bytes = 0;
  precis_status st = precis_emulate_b_bytes(recipe, k, n, target, &bytes);
  if (st != PRECIS_OK) return raise_status(st);
  return PyLong_FromLongLong((long long)bytes);
}

/* emulate_operands(recipe, a, b, a_out, b_out, batch, m, n, k, b_batched) -> alpha */
static PyObject *py_emulate_operands(PyObject *self, PyObject *args) {
  const char *recipe;
  PyObject *a_obj, *b_obj, *ao_obj, *bo_obj;
  long long batch, m, n, k;
  int b_batched;
  if (!PyArg_ParseTuple(args, "sOOOOLLLLp:emulate_operands", &recipe, &a_obj, &b_obj, &ao_obj, &bo_obj, &batch, &m, &n,
                        &k, &b_batched))
    return NULL;
  Py_ssize_t a_count, b_count;
  if (checked_count("a", batch, m, k, &a_count) || checked_count("b", b_batched ? batch : 1, k, n, &b_count)) return NULL;
  Py_buffer a = {0}, b = {0}, ao = {0}, bo = {0};
  precis_dtype a_t, b_t, ao_t, bo_t;
  PyObject *result = NULL;
  int have_a = 0, have_b = 0, have_ao = 0, have_bo = 0;
  if (get_array(a_obj, "a", 0, 1, a_count, &a, &a_t)) goto done;
  have_a = 1;
  if (get_array(b_obj, "b", 0, 1, b_count, &b, &b_t)) goto done;
  have_b = 1;
  if (get_array(ao_obj, "a_out", 1, 0, a_count, &ao, &ao_t)) goto done;
  have_ao = 1;
  if (get_array(bo_obj, "b_out", 1, 0, b_count, &bo, &bo_t)) goto done;
  have_bo = 1;
  precis_gemm g = {.batch = batch, .m = m, .n = n, .k = k, .b_batched = b_batched, .a = a.buf, .a_dtype = a_t,
                   .b = b.buf, .b_dtype = b_t};
  float alpha = 1.0f;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_emulate_operands(recipe, &g, ao.buf, bo.buf, &alpha);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) {
    raise_status(st);
    goto done;
  }
  result = PyFloat_FromDouble((double)alpha);
done:
  if (have_a) PyBuffer_Release(&a);
  if (have_b) PyBuffer_Release(&b);
  if (have_ao) PyBuffer_Release(&ao);
  if (have_bo) PyBuffer_Release(&bo);
  return result;
}

/* ---- quantize ------------------------------------------------------------------------------- */

static PyObject *bytes_or_none(const void *p, Py_ssize_t len) {
  if (!p) Py_RETURN_NONE;
  return PyBytes_FromStringAndSize((const char *)p, len);
}

/* quantize(operand, x, batch, rows, cols[, amax]) -> dict of bytes (codes u8, scales f32, scale_codes u8,
 * zero_points u8, tensor_scales f32, values f32) and the scale grid's shape. */
static PyObject *py_quantize(PyObject *self, PyObject *args) {
  const char *operand;
  PyObject *x_obj;
  long long batch, rows, cols;
  PyObject *amax_obj = Py_None;
  if (!PyArg_ParseTuple(args, "sOLLL|O:quantize", &operand, &x_obj, &batch, &rows, &cols, &amax_obj)) return NULL;
  double amax = 0.0;
  if (amax_obj != Py_None) {
    amax = PyFloat_AsDouble(amax_obj);
    if (amax == -1.0 && PyErr_Occurred()) return NULL;
  }
  Py_ssize_t count;
  if (checked_count("x", batch, rows, cols, &count)) return NULL;
  Py_buffer x;
  precis_dtype t;
  if (get_array(x_obj, "x", 0, 0, count, &x, &t)) return NULL;
  precis_quantized *q = NULL;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = amax_obj == Py_None ? precis_quantize_operand(operand, x.buf, batch, rows, cols, &q)
                           : precis_quantize_operand_static(operand, x.buf, batch, rows, cols, (float)amax, &q);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&x);
  if (st != PRECIS_OK) return raise_status(st);
  int64_t mats = 0, srows = 0, scols = 0;
  const float *scales = precis_quantized_scales(q, &mats, &srows, &scols);
  Py_ssize_t n_scales = (Py_ssize_t)(mats * srows * scols);
  PyObject *codes = bytes_or_none(precis_quantized_codes(q), count);
  PyObject *scales_b = bytes_or_none(scales, n_scales * (Py_ssize_t)sizeof(float));
  PyObject *scale_codes = bytes_or_none(precis_quantized_scale_codes(q), n_scales);
  PyObject *zeros = bytes_or_none(precis_quantized_zero_points(q), n_scales);
  PyObject *tensor = bytes_or_none(precis_quantized_tensor_scales(q), (Py_ssize_t)mats * (Py_ssize_t)sizeof(float));
  PyObject *values = bytes_or_none(precis_quantized_values(q), count * (Py_ssize_t)sizeof(float));
  PyObject *result = NULL;
  if (codes && scales_b && scale_codes && zeros && tensor && values) {
    char side[2] = {precis_quantized_side(q), 0};
    result = Py_BuildValue("{s:s,s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O,s:(LLL),s:n}", "operand", precis_quantized_operand(q),
                           "side", side, "scaled", precis_quantized_is_scaled(q) ? Py_True : Py_False, "codes", codes,
                           "scales", scales_b, "scale_codes", scale_codes, "zero_points", zeros, "tensor_scales", tensor,
                           "values", values, "scale_shape", (long long)mats, (long long)srows, (long long)scols,
                           "clipped", (Py_ssize_t)precis_quantized_clipped(q));
  }
  Py_XDECREF(codes);
  Py_XDECREF(scales_b);
  Py_XDECREF(scale_codes);
  Py_XDECREF(zeros);
  Py_XDECREF(tensor);
  Py_XDECREF(values);
  precis_quantized_free(q);
  return result;
}

/* ---- datasets ------------------------------------------------------------------------------- */

static PyObject *workload_dict(const precis_workload_desc *w) {
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:L,s:L,s:L,s:L,s:L,s:O,s:O,s:O,s:O,s:O,s:d,s:K}", "name",
                       w->name, "kind", w->kind, "description", w->description, "a_dist", w->a_dist, "b_dist", w->b_dist,
                       "reference", w->reference, "layer", w->layer, "reference_precision", w->reference_precision, "m",
                       (long long)w->m, "n", (long long)w->n, "k", (long long)w->k, "batch", (long long)w->batch,
                       "calib_samples", (long long)w->calib_samples, "b_batched", w->b_batched ? Py_True : Py_False,
                       "a_float64", w->a_f64 ? Py_True : Py_False, "b_float64", w->b_f64 ? Py_True : Py_False,
                       "has_c_ref_lo", w->has_c_ref_lo ? Py_True : Py_False, "has_b_ref",
                       w->has_b_ref ? Py_True : Py_False, "reference_error_bound", w->reference_error_bound,
                       "stored_bytes", (unsigned long long)w->stored_bytes);
}

/* dataset_info(path) -> dict: id, generator, created_utc, suite, workloads (list of dicts). */
static PyObject *py_dataset_info(PyObject *self, PyObject *args) {
  const char *path;
  if (!PyArg_ParseTuple(args, "s:dataset_info", &path)) return NULL;
  precis_data *ds = NULL;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_data_open(path, &ds);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) return raise_status(st);
  PyObject *workloads = PyList_New(0), *result = NULL;
  for (size_t i = 0; workloads && i < precis_data_workload_count(ds); i++) {
    precis_workload_desc w;
    PyObject *d = NULL;
    if (precis_data_workload(ds, i, &w) != PRECIS_OK || !(d = workload_dict(&w)) || PyList_Append(workloads, d) != 0) {
      Py_XDECREF(d);
      Py_CLEAR(workloads);
      break;
    }
    Py_DECREF(d);
  }
  if (workloads)
    result = Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:O}", "path", precis_data_path(ds), "id", precis_data_id(ds),
                           "generator", precis_data_generator(ds), "created_utc", precis_data_created_utc(ds), "suite",
                           precis_data_suite(ds), "workloads", workloads);
  Py_XDECREF(workloads);
  precis_data_close(ds);
  return result;
}

/* dataset_arrays(path, workload) -> {name: (bytes, "float32"|"float64", shape)} for every array
 * the workload has. */
static PyObject *py_dataset_arrays(PyObject *self, PyObject *args) {
  const char *path, *name;
  if (!PyArg_ParseTuple(args, "ss:dataset_arrays", &path, &name)) return NULL;
  precis_data *ds = NULL;
  precis_arrays *w = NULL;
  size_t index = 0;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_data_open(path, &ds);
  if (st == PRECIS_OK) st = precis_data_find(ds, name, &index);
  if (st == PRECIS_OK) st = precis_data_load(ds, index, &w);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) {
    precis_data_close(ds);
    return raise_status(st);
  }
  static const char *const names[] = {"a", "b", "c_ref", "ab_abs", "calib/a", "b_ref", "c_ref_lo"};
  PyObject *result = PyDict_New();
  for (size_t i = 0; result && i < sizeof names / sizeof names[0]; i++) {
    precis_dtype t;
    int64_t shape[3];
    int ndim;
    const void *p = precis_arrays_get(w, names[i], &t, shape, &ndim);
    if (!p) continue;
    Py_ssize_t count = (Py_ssize_t)(shape[0] * shape[1] * (ndim == 3 ? shape[2] : 1));
    Py_ssize_t size = t == PRECIS_DTYPE_F64 ? 8 : 4;
    PyObject *item = ndim == 3 ? Py_BuildValue("(y#s(LLL))", (const char *)p, count * size,
                                               t == PRECIS_DTYPE_F64 ? "float64" : "float32", (long long)shape[0],
                                               (long long)shape[1], (long long)shape[2])
                               : Py_BuildValue("(y#s(LL))", (const char *)p, count * size,
                                               t == PRECIS_DTYPE_F64 ? "float64" : "float32", (long long)shape[0],
                                               (long long)shape[1]);
    if (!item || PyDict_SetItemString(result, names[i], item) != 0) Py_CLEAR(result);
    Py_XDECREF(item);
  }
  precis_arrays_free(w);
  precis_data_close(ds);
  return result;
}

/* ---- reports, runs, the CLI ----------------------------------------------------------------- */

/* results_read(path) -> the report's JSON text, as validated by precis's reader. */
static PyObject *py_results_read(PyObject *self, PyObject *args) {
  const char *path;
  if (!PyArg_ParseTuple(args, "s:results_read", &path)) return NULL;
  precis_results *r = NULL;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_results_read(path, &r);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) return raise_status(st);
  PyObject *text = PyUnicode_FromString(precis_results_json(r));
  precis_results_free(r);
  return text;
}

/* A list of str as a NULL-terminated C array of borrowed UTF-8 pointers (valid while the list lives
 * and is not changed: the caller holds a reference and the strings are immutable). */
static const char **string_array(PyObject *list, const char *what, size_t *n) {
  if (!PyList_Check(list)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a list of str", what);
    return NULL;
  }
  Py_ssize_t len = PyList_Size(list);
  const char **items = PyMem_Calloc((size_t)len + 1, sizeof *items);
  if (!items) {
    PyErr_NoMemory();
    return NULL;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *s = PyList_GetItem(list, i);
    Py_ssize_t size = 0;
    if (!s || !PyUnicode_Check(s) || !(items[i] = PyUnicode_AsUTF8AndSize(s, &size))) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s[%zd]: expected str", what, i);
      PyMem_Free(items);
      return NULL;
    }
    if (strlen(items[i]) != (size_t)size) {
      PyErr_Format(PyExc_ValueError, "%s[%zd]: embedded NUL character", what, i);
      PyMem_Free(items);
      return NULL;
    }
  }
  *n = (size_t)len;
  return items;
}

/* run(dataset, output_dir, recipes, require: list, backend, workloads, save_outputs, force, gate,
 *     extra_args: list) -> (exit_code, report JSON text or None, messages) */
static PyObject *py_run(PyObject *self, PyObject *args) {
  const char *dataset, *output_dir, *recipes, *backend, *workloads, *save_outputs;
  PyObject *require_list, *extra_list;
  int force, gate;
  if (!PyArg_ParseTuple(args, "zszOzzzppO:run", &dataset, &output_dir, &recipes, &require_list, &backend, &workloads,
                        &save_outputs, &force, &gate, &extra_list))
    return NULL;
  size_t n_require = 0, n_extra = 0;
  const char **require = string_array(require_list, "require", &n_require);
  if (!require) return NULL;
  const char **extra = string_array(extra_list, "extra_args", &n_extra);
  if (!extra) {
    PyMem_Free(require);
    return NULL;
  }
  precis_run_options o = {.dataset = dataset, .output_dir = output_dir, .recipes = recipes, .require = require,
                          .n_require = n_require, .backend = backend, .workloads = workloads,
                          .save_outputs = save_outputs, .force = force, .gate = gate, .extra_args = extra,
                          .n_extra_args = n_extra};
  precis_results *r = NULL;
  int code = 0;
  char *messages = NULL;
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_run(&o, &r, &code, &messages);
  Py_END_ALLOW_THREADS
  PyMem_Free(require);
  PyMem_Free(extra);
  PyObject *result = NULL;
  if (!r && st == PRECIS_OK) {
    precis_free(messages);
    return raise_status(PRECIS_E_RUNTIME);
  }
  const char *last = precis_last_error();
  result = Py_BuildValue("(iOss)", code, Py_None, messages ? messages : "", st == PRECIS_OK ? "" : last);
  if (result && r) {
    PyObject *text = PyUnicode_FromString(precis_results_json(r));
    if (!text) Py_CLEAR(result);
    else PyTuple_SetItem(result, 1, text); /* steals text; replaces the None */
  }
  precis_results_free(r);
  precis_free(messages);
  return result;
}

/* main(argv: list of str) -> exit code of `precis argv[1:]`. */
static PyObject *py_main(PyObject *self, PyObject *args) {
  PyObject *list;
  if (!PyArg_ParseTuple(args, "O!:main", &PyList_Type, &list)) return NULL;
  size_t n = 0;
  const char **items = string_array(list, "argv", &n);
  if (!items) return NULL;
  if (n == 0) {
    PyMem_Free(items);
    PyErr_SetString(PyExc_ValueError, "argv: expected at least the program name");
    return NULL;
  }
  /* The commands take char ** (getopt permutes the array, never the strings): copies. */
  char **argv = PyMem_Calloc(n + 1, sizeof *argv);
  int ok = argv != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    size_t len = strlen(items[i]);
    argv[i] = PyMem_Malloc(len + 1);
    if (argv[i]) memcpy(argv[i], items[i], len + 1);
    else ok = 0;
  }
  PyMem_Free(items);
  int code = 2;
  if (ok) {
    Py_BEGIN_ALLOW_THREADS
    code = precis_main((int)n, argv);
    Py_END_ALLOW_THREADS
  }
  for (size_t i = 0; argv && i < n; i++) PyMem_Free(argv[i]);
  PyMem_Free(argv);
  if (!ok) return PyErr_NoMemory();
  return PyLong_FromLong(code);
}

/* release_memory(): precis_release_memory (precis/status.h), the GIL released. */
static PyObject *py_release_memory(PyObject *self, PyObject *unused) {
  Py_BEGIN_ALLOW_THREADS
  precis_release_memory();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

/* ---- one layer's rows from inputs at hand (precis/layer_check.h) ------------------------------ */

static const char LAYER_CHECK[] = "precis.layer_check";

static void layer_check_destroy(PyObject *capsule) {
  precis_layer_check_free(PyCapsule_GetPointer(capsule, LAYER_CHECK));
}

/* layer_check_open(recipe, layer, k, n, logits, isolated) -> capsule */
static PyObject *py_layer_check_open(PyObject *self, PyObject *args) {
  const char *recipe, *layer;
  long long k, n;
  int logits, isolated;
  if (!PyArg_ParseTuple(args, "ssLLpp:layer_check_open", &recipe, &layer, &k, &n, &logits, &isolated)) return NULL;
  precis_layer_check *check = NULL;
  precis_status st = precis_layer_check_open(recipe, layer, k, n, logits, isolated, &check);
  if (st != PRECIS_OK) return raise_status(st);
  PyObject *capsule = PyCapsule_New(check, LAYER_CHECK, layer_check_destroy);
  if (!capsule) precis_layer_check_free(check);
  return capsule;
}

/* layer_check_add(capsule, a, samples, m, k, n, b, other or None[, b_batched, calib or None, b_nk]):
 * b is [samples, k, n] when b_batched; calib [calib_samples, m, k] (precis_layer_check_add_batched);
 * b_nk: b is the weights W [n, k] (precis_layer_check_add_weights; neither batched nor with calib). */
static PyObject *py_layer_check_add(PyObject *self, PyObject *args) {
  PyObject *capsule, *a_obj, *b_obj, *other_obj, *calib_obj = Py_None;
  long long samples, m, k, n;
  int b_batched = 0, b_nk = 0;
  if (!PyArg_ParseTuple(args, "OOLLLLOO|pOp:layer_check_add", &capsule, &a_obj, &samples, &m, &k, &n, &b_obj, &other_obj,
                        &b_batched, &calib_obj, &b_nk))
    return NULL;
  if (b_nk && (b_batched || calib_obj != Py_None)) {
    PyErr_SetString(PyExc_ValueError, "b_nk: the weights W [n, k] are one matrix, without calibration inputs");
    return NULL;
  }
  precis_layer_check *check = PyCapsule_GetPointer(capsule, LAYER_CHECK);
  if (!check) return NULL;
  Py_ssize_t a_count, b_count, other_count = 0, calib_count = 0;
  long long calib_samples = 0;
  if (calib_obj != Py_None) {
    PyObject *shape = PyObject_GetAttrString(calib_obj, "shape");
    PyObject *first = shape ? PySequence_GetItem(shape, 0) : NULL;
    calib_samples = first ? PyLong_AsLongLong(first) : -1;
    Py_XDECREF(first);
    Py_XDECREF(shape);
    if (calib_samples < 1) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "calib: expected a [calib_samples, m, k] array");
      return NULL;
    }
  }
  if (checked_count("a", samples, m, k, &a_count) || checked_count("b", b_batched ? samples : 1, k, n, &b_count) ||
      (other_obj != Py_None && checked_count("other", samples, m, n, &other_count)) ||
      (calib_obj != Py_None && checked_count("calib", calib_samples, m, k, &calib_count)))
    return NULL;
  Py_buffer a = {0}, b = {0}, other = {0}, calib = {0};
  precis_dtype t;
  int have_a = 0, have_b = 0, have_other = 0, have_calib = 0;
  PyObject *result = NULL;
  if (get_array(a_obj, "a", 0, 0, a_count, &a, &t)) goto done;
  have_a = 1;
  if (get_array(b_obj, "b", 0, 0, b_count, &b, &t)) goto done;
  have_b = 1;
  if (other_obj != Py_None) {
    if (get_array(other_obj, "other", 0, 0, other_count, &other, &t)) goto done;
    have_other = 1;
  }
  if (calib_obj != Py_None) {
    if (get_array(calib_obj, "calib", 0, 0, calib_count, &calib, &t)) goto done;
    have_calib = 1;
  }
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  if (b_nk)
    st = precis_layer_check_add_weights(check, a.buf, samples, m, b.buf, have_other ? other.buf : NULL);
  else
    st = precis_layer_check_add_batched(check, a.buf, samples, m, b.buf, b_batched, have_other ? other.buf : NULL,
                                        have_calib ? calib.buf : NULL, have_calib ? calib_samples : 0);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) {
    raise_status(st);
    goto done;
  }
  result = Py_None;
  Py_INCREF(result);
done:
  if (have_a) PyBuffer_Release(&a);
  if (have_b) PyBuffer_Release(&b);
  if (have_other) PyBuffer_Release(&other);
  if (have_calib) PyBuffer_Release(&calib);
  return result;
}

/* logit_token_stats(ref, q, tokens, vocab, labels or None, out, finite): ref and q [tokens, vocab]
 * float32 or float64; labels [tokens] float64 holding integer ids (< 0: none); out [tokens, 10]
 * float64 and finite a writable bytes-like of `tokens` bytes, both filled (precis/token_stats.h). */
static PyObject *py_logit_token_stats(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *ref_obj, *q_obj, *labels_obj, *out_obj, *finite_obj;
  long long tokens, vocab;
  if (!PyArg_ParseTuple(args, "OOLLOOO:logit_token_stats", &ref_obj, &q_obj, &tokens, &vocab, &labels_obj, &out_obj,
                        &finite_obj))
    return NULL;
  Py_ssize_t count, out_count;
  if (checked_count("logits", tokens, vocab, 1, &count) ||
      checked_count("out", tokens, PRECIS_TOKEN_STAT_COUNT, 1, &out_count))
    return NULL;
  Py_buffer ref = {0}, q = {0}, labels = {0}, out = {0}, finite = {0};
  precis_dtype ref_t, q_t, t;
  int have_ref = 0, have_q = 0, have_labels = 0, have_out = 0, have_finite = 0;
  int64_t *ids = NULL;
  PyObject *result = NULL;
  if (get_array(ref_obj, "ref", 0, 1, count, &ref, &ref_t)) goto done;
  have_ref = 1;
  if (get_array(q_obj, "q", 0, 1, count, &q, &q_t)) goto done;
  have_q = 1;
  if (labels_obj != Py_None) {
    if (get_array(labels_obj, "labels", 0, 1, tokens, &labels, &t)) goto done;
    have_labels = 1;
    if (t != PRECIS_DTYPE_F64) {
      PyErr_SetString(PyExc_TypeError, "labels: expected float64 ids");
      goto done;
    }
  }
  if (get_array(out_obj, "out", 1, 1, out_count, &out, &t)) goto done;
  have_out = 1;
  if (t != PRECIS_DTYPE_F64) {
    PyErr_SetString(PyExc_TypeError, "out: expected float64");
    goto done;
  }
  if (PyObject_GetBuffer(finite_obj, &finite, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) goto done;
  have_finite = 1;
  if (finite.len != tokens) {
    PyErr_Format(PyExc_ValueError, "finite: %zd bytes, expected %lld", finite.len, tokens);
    goto done;
  }
  if (have_labels) {
    ids = PyMem_Malloc((size_t)(tokens ? tokens : 1) * sizeof *ids);
    if (!ids) {
      PyErr_NoMemory();
      goto done;
    }
    const double *l = labels.buf;
    for (long long i = 0; i < tokens; i++) ids[i] = l[i] >= 0 && l[i] < 9.2e18 ? (int64_t)l[i] : -1;
  }
  precis_status st;
  Py_BEGIN_ALLOW_THREADS
  st = precis_logit_token_stats(ref.buf, ref_t, q.buf, q_t, tokens, vocab, ids, out.buf, finite.buf);
  Py_END_ALLOW_THREADS
  if (st != PRECIS_OK) {
    raise_status(st);
    goto done;
  }
  result = Py_None;
  Py_INCREF(result);
done:
  PyMem_Free(ids);
  if (have_ref) PyBuffer_Release(&ref);
  if (have_q) PyBuffer_Release(&q);
  if (have_labels) PyBuffer_Release(&labels);
  if (have_out) PyBuffer_Release(&out);
  if (have_finite) PyBuffer_Release(&finite);
  return result;
}

static PyObject *str_or_none(char *text) {
  if (!text) Py_RETURN_NONE;
  PyObject *s = PyUnicode_FromString(text);
  precis_free(text);
  return s;
}

/* layer_check_rows(capsule) -> (isolated row JSON or None, other row JSON or None) */
static PyObject *py_layer_check_rows(PyObject *self, PyObject *args) {
  PyObject *capsule;
  if (!PyArg_ParseTuple(args, "O:layer_check_rows", &capsule)) return NULL;
  precis_layer_check *check = PyCapsule_GetPointer(capsule, LAYER_CHECK);
  if (!check) return NULL;
  char *iso = NULL, *other = NULL;
  precis_status st = precis_layer_check_rows(check, &iso, &other);
  if (st != PRECIS_OK) return raise_status(st);
  PyObject *a = str_or_none(iso), *b = str_or_none(other);
  if (!a || !b) {
    Py_XDECREF(a);
    Py_XDECREF(b);
    return NULL;
  }
  PyObject *pair = PyTuple_Pack(2, a, b);
  Py_DECREF(a);
  Py_DECREF(b);
  return pair;
}

/* ---- DLPack -------------------------------------------------------------------------------- */
/* Arrays of any library that exports DLPack (torch, NumPy, CuPy, JAX): `__dlpack_device__()` says
 * where the data is, `__dlpack__(stream=, max_version=)` hands over a capsule holding a
 * DLManagedTensor(Versioned). Once its pointer is taken the consumer owns it: the capsule is renamed
 * "used_dltensor" ("used_dltensor_versioned") so that the producer's capsule destructor leaves it
 * alone, and the consumer calls the tensor's deleter when done with the data (here: after the GEMM).
 * The structs are DLPack's stable ABI (dlpack.h, v1.0), written out so as not to need its header. */

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_CUDA_MANAGED = 13 };
enum { DL_FLOAT = 2 };
#define DL_FLAG_READ_ONLY ((uint64_t)1)

typedef struct {
  int32_t device_type, device_id;
} dl_device;
typedef struct {
  uint8_t code, bits;
  uint16_t lanes;
} dl_dtype;
typedef struct {
  void *data;
  dl_device device;
  int32_t ndim;
  dl_dtype dtype;
  int64_t *shape, *strides; /* strides in elements; NULL: dense row-major */
  uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
  dl_tensor tensor;
  void *manager_ctx;
  void (*deleter)(struct dl_managed *self);
} dl_managed;
typedef struct dl_managed_versioned {
  uint32_t major, minor;
  void *manager_ctx;
  void (*deleter)(struct dl_managed_versioned *self);
  uint64_t flags;
  dl_tensor tensor;
} dl_managed_versioned;

/* One array taken from a DLPack producer: ownership of its managed tensor until dl_release. */
typedef struct dl_array {
  PyObject *capsule;
  dl_managed *legacy;
  dl_managed_versioned *versioned;
  int device_type, device_id;
  int ndim;
  int64_t shape[3];
  void *data; /* data + byte_offset */
} dl_array;

static void dl_release(dl_array *x) {
  /* The deleter frees the producer's hold on the data (NumPy: a reference to the array; torch: the
   * tensor's storage). Called once, by whoever renamed the capsule: this code. It may run Python
   * (a destructor), which must not find an exception pending: the caller's is put aside meanwhile. */
  if (!x->capsule && !x->versioned && !x->legacy) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (x->versioned && x->versioned->deleter) x->versioned->deleter(x->versioned);
  else if (x->legacy && x->legacy->deleter) x->legacy->deleter(x->legacy);
  x->versioned = NULL;
  x->legacy = NULL;
  Py_CLEAR(x->capsule);
  PyErr_Restore(type, value, tb);
}

static const char *dl_device_name(int type) {
  switch (type) {
  case DL_CPU: return "the CPU (kDLCPU)";
  case DL_CUDA: return "CUDA (kDLCUDA)";
  case DL_CUDA_HOST: return "pinned host memory (kDLCUDAHost)";
  case DL_CUDA_MANAGED: return "CUDA managed memory (kDLCUDAManaged)";
  default: return "another device";
  }
}

/* (device_type, device_id) from obj.__dlpack_device__(); -1 with an exception naming `name`. */
static int dl_device_of(PyObject *obj, const char *name, int *type, int *id) {
  PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (!dev) return -1;
  int ok = PyTuple_Check(dev) && PyTuple_Size(dev) == 2;
  long t = ok ? PyLong_AsLong(PyTuple_GetItem(dev, 0)) : -1;
  long i = ok ? PyLong_AsLong(PyTuple_GetItem(dev, 1)) : -1;
  Py_DECREF(dev);
  if (!ok || PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() must return (device_type, device_id) integers", name);
    return -1;
  }
  *type = (int)t;
  *id = (int)i;
  return 0;
}

/* Takes obj's data through DLPack: float32, ndim in [min_ndim, 3], dense row-major (a size-1
 * dimension may have any stride), writable when `writable`. `stream` is the consumer's CUDA stream
 * (a cudaStream_t as an integer) for CUDA arrays: the producer orders its writes before work queued
 * there. -1 with an exception naming `name` and what was expected; the capsule is released then. */
static int dl_take(PyObject *obj, const char *name, int min_ndim, int writable, uintptr_t stream, dl_array *x) {
  memset(x, 0, sizeof *x);
  if (!PyObject_HasAttrString(obj, "__dlpack__") || !PyObject_HasAttrString(obj, "__dlpack_device__")) {
    PyErr_Format(PyExc_TypeError, "%s: %S has no __dlpack__/__dlpack_device__: expected a DLPack array (a torch "
                 "tensor, a NumPy array, ...)", name, (PyObject *)Py_TYPE(obj));
    return -1;
  }
  int type, id;
  if (dl_device_of(obj, name, &type, &id)) return -1;
  if (type != DL_CPU && type != DL_CUDA) {
    PyErr_Format(PyExc_ValueError, "%s: on %s (DLPack device type %d): expected the CPU or a CUDA device", name,
                 dl_device_name(type), type);
    return -1;
  }
  /* DLPack's stream argument: None on the CPU; on CUDA the stream, 1 for the legacy default stream
   * (0 is ambiguous there, and refused by the standard). */
  PyObject *kwargs = PyDict_New(), *empty = PyTuple_New(0), *method = PyObject_GetAttrString(obj, "__dlpack__");
  PyObject *version = Py_BuildValue("(ii)", 1, 0);
  PyObject *stream_arg = type == DL_CUDA ? PyLong_FromUnsignedLongLong(stream ? (unsigned long long)stream : 1ULL)
                                         : (Py_INCREF(Py_None), Py_None);
  PyObject *capsule = NULL;
  if (kwargs && empty && method && version && stream_arg && PyDict_SetItemString(kwargs, "stream", stream_arg) == 0 &&
      PyDict_SetItemString(kwargs, "max_version", version) == 0) {
    capsule = PyObject_Call(method, empty, kwargs);
    if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
      /* A producer from before DLPack 1.0 takes no max_version. */
      PyErr_Clear();
      if (PyDict_DelItemString(kwargs, "max_version") == 0) capsule = PyObject_Call(method, empty, kwargs);
    }
  }
  Py_XDECREF(kwargs);
  Py_XDECREF(empty);
  Py_XDECREF(method);
  Py_XDECREF(version);
  Py_XDECREF(stream_arg);
  if (!capsule) return -1;
  x->capsule = capsule;
  dl_tensor *t = NULL;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    x->versioned = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (!x->versioned) goto fail;
    if (PyCapsule_SetName(capsule, "used_dltensor_versioned")) goto fail;
    if (x->versioned->major != 1) {
      PyErr_Format(PyExc_ValueError, "%s: DLPack version %u.%u: expected 1.x", name, x->versioned->major,
                   x->versioned->minor);
      goto fail;
    }
    if (writable && (x->versioned->flags & DL_FLAG_READ_ONLY)) {
      PyErr_Format(PyExc_ValueError, "%s: a read-only DLPack array: expected a writable one (the output)", name);
      goto fail;
    }
    t = &x->versioned->tensor;
  } else if (PyCapsule_IsValid(capsule, "dltensor")) {
    x->legacy = PyCapsule_GetPointer(capsule, "dltensor");
    if (!x->legacy) goto fail;
    if (PyCapsule_SetName(capsule, "used_dltensor")) goto fail;
    t = &x->legacy->tensor;
  } else {
    const char *cname = PyCapsule_CheckExact(capsule) ? PyCapsule_GetName(capsule) : NULL;
    PyErr_Clear();
    if (cname && strncmp(cname, "used_dltensor", 13) == 0)
      PyErr_Format(PyExc_ValueError, "%s: __dlpack__ returned a capsule already consumed (\"%s\"): a DLPack capsule "
                   "is used once", name, cname);
    else
      PyErr_Format(PyExc_TypeError, "%s: __dlpack__ returned %S%s%s%s: expected a \"dltensor\" or "
                   "\"dltensor_versioned\" capsule", name, (PyObject *)Py_TYPE(capsule), cname ? " named \"" : "",
                   cname ? cname : "", cname ? "\"" : "");
    goto fail;
  }
  x->device_type = t->device.device_type;
  x->device_id = t->device.device_id;
  if (x->device_type != type || x->device_id != id) {
    PyErr_Format(PyExc_ValueError, "%s: __dlpack_device__ says (%d, %d), the tensor (%d, %d)", name, type, id,
                 x->device_type, x->device_id);
    goto fail;
  }
  if (t->dtype.code != DL_FLOAT || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    static const char *const kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    const char *kind = t->dtype.code < sizeof kinds / sizeof *kinds ? kinds[t->dtype.code] : "code ";
    char lanes[32] = "";
    if (t->dtype.lanes != 1) snprintf(lanes, sizeof lanes, " x %d lanes", (int)t->dtype.lanes);
    PyErr_Format(PyExc_TypeError, "%s: dtype %s%d%s (DLPack code %d): expected float32 (convert it first, e.g. "
                 "%s.float())", name, kind, (int)t->dtype.bits, lanes, (int)t->dtype.code, name);
    goto fail;
  }
  if (t->ndim < min_ndim || t->ndim > 3) {
    PyErr_Format(PyExc_ValueError, "%s: %d dimensions: expected %s", name, (int)t->ndim,
                 min_ndim == 2 ? "2 or 3 ([rows, cols] or [batch, rows, cols])" : "1 to 3");
    goto fail;
  }
  x->ndim = t->ndim;
  int64_t dense = 1;
  for (int i = x->ndim - 1; i >= 0; i--) {
    x->shape[i] = t->shape[i];
    if (t->shape[i] < 1) {
      PyErr_Format(PyExc_ValueError, "%s: dimension %d of size %lld: every dimension must be at least 1", name, i,
                   (long long)t->shape[i]);
      goto fail;
    }
    if (t->strides && t->shape[i] > 1 && t->strides[i] != dense) {
      char got[96] = "", want[96] = "";
      size_t g = 0, wn = 0;
      int64_t d = 1, expect[3];
      for (int j = x->ndim - 1; j >= 0; j--) expect[j] = d, d *= t->shape[j];
      for (int j = 0; j < x->ndim; j++) {
        g += (size_t)snprintf(got + g, sizeof got - g, "%s%lld", j ? ", " : "", (long long)t->strides[j]);
        wn += (size_t)snprintf(want + wn, sizeof want - wn, "%s%lld", j ? ", " : "", (long long)expect[j]);
      }
      PyErr_Format(PyExc_ValueError, "%s: strides (%s) in elements: expected dense row-major (%s) (make it contiguous "
                   "first, e.g. %s.contiguous())", name, got, want, name);
      goto fail;
    }
    dense *= t->shape[i];
  }
  x->data = (char *)t->data + t->byte_offset;
  return 0;
fail:
  dl_release(x);
  return -1;
}

static const char *dl_where(const dl_array *x, char *buf, size_t len) {
  if (x->device_type == DL_CUDA) snprintf(buf, len, "CUDA device %d", x->device_id);
  else snprintf(buf, len, "the CPU");
  return buf;
}

/* emulate_dlpack(recipe, a, b, out, stream=0, target=None) -> dict. a [m, k] or [batch, m, k], b
 * [k, n] or [batch, k, n], out [m, n] or [batch, m, n]: float32 DLPack arrays on one device. On the
 * CPU, precis_emulate_target on their memory (the cpu backend); on CUDA, precis_emulate_device (the
 * cuda backend, the arrays in place; NOT YET RUN ON A GPU). stream: the caller's CUDA stream. */
static PyObject *py_emulate_dlpack(PyObject *self, PyObject *args) {
  const char *recipe, *target = NULL;
  PyObject *a_obj, *b_obj, *c_obj;
  unsigned long long stream = 0;
  if (!PyArg_ParseTuple(args, "sOOO|Kz:emulate_dlpack", &recipe, &a_obj, &b_obj, &c_obj, &stream, &target)) return NULL;
  dl_array a = {0}, b = {0}, c = {0};
  PyObject *result = NULL;
  char w1[48], w2[48];
  if (dl_take(a_obj, "a", 2, 0, (uintptr_t)stream, &a) || dl_take(b_obj, "b", 2, 0, (uintptr_t)stream, &b) ||
      dl_take(c_obj, "out", 2, 1, (uintptr_t)stream, &c))
    goto done;
  if (b.device_type != a.device_type || b.device_id != a.device_id || c.device_type != a.device_type ||
      c.device_id != a.device_id) {
    const dl_array *other = b.device_type != a.device_type || b.device_id != a.device_id ? &b : &c;
    PyErr_Format(PyExc_ValueError, "a is on %s, %s on %s: expected a, b and out on one device",
                 dl_where(&a, w1, sizeof w1), other == &b ? "b" : "out", dl_where(other, w2, sizeof w2));
    goto done;
  }
  long long batch = a.ndim == 3 ? a.shape[0] : 1, m = a.shape[a.ndim - 2], k = a.shape[a.ndim - 1];
  long long n = b.shape[b.ndim - 1];
  int b_batched = b.ndim == 3;
  if (b.shape[b.ndim - 2] != k) {
    PyErr_Format(PyExc_ValueError, "a's k=%lld differs from b's k=%lld (a [.., m, k], b [.., k, n])", k,
                 (long long)b.shape[b.ndim - 2]);
    goto done;
  }
  if (b_batched && (a.ndim != 3 || b.shape[0] != batch)) {
    PyErr_Format(PyExc_ValueError, "b of batch %lld: a batched b needs a batched a with the same batch (a has %lld)",
                 (long long)b.shape[0], a.ndim == 3 ? batch : 0LL);
    goto done;
  }
  if (c.ndim != a.ndim || c.shape[c.ndim - 2] != m || c.shape[c.ndim - 1] != n || (c.ndim == 3 && c.shape[0] != batch)) {
    PyErr_Format(PyExc_ValueError, "out: expected shape %s%lld, %lld]", a.ndim == 3 ? "[batch, " : "[", m, n);
    goto done;
  }
  precis_emulate_info info;
  precis_status st;
  if (a.device_type == DL_CPU) {
    precis_gemm g = {.batch = batch, .m = m, .n = n, .k = k, .b_batched = b_batched, .a = a.data,
                     .a_dtype = PRECIS_DTYPE_F32, .b = b.data, .b_dtype = PRECIS_DTYPE_F32};
    Py_BEGIN_ALLOW_THREADS
    st = precis_emulate_target(recipe, &g, c.data, PRECIS_DTYPE_F32, target, &info);
    Py_END_ALLOW_THREADS
  } else {
    if (target) {
      PyErr_Format(PyExc_ValueError, "target=%s: CUDA arrays run on the device's own arithmetic (the cuda backend); "
                   "a target is emulated by the cpu backend on host arrays", target);
      goto done;
    }
    precis_device_gemm g = {.device = a.device_id, .batch = batch, .m = m, .n = n, .k = k, .b_batched = b_batched,
                            .a = a.data, .b = b.data, .c = c.data, .stream = (uintptr_t)stream};
    Py_BEGIN_ALLOW_THREADS
    st = precis_emulate_device(recipe, &g, NULL, &info);
    Py_END_ALLOW_THREADS
  }
  if (st != PRECIS_OK) {
    raise_status(st);
    goto done;
  }
  result = Py_BuildValue("{s:s,s:d,s:s,s:s,s:s}", "spec", info.canonical, "clipped_fraction", info.clipped_fraction,
                         "emulation", info.emulation, "out_dtype", "float32", "backend",
                         a.device_type == DL_CPU ? "cpu" : "cuda");
done:
  dl_release(&a);
  dl_release(&b);
  dl_release(&c);
  return result;
}

/* cuda_built() -> bool: this libprecis has the CUDA backend (a device may still be absent). */
static PyObject *py_cuda_built(PyObject *self, PyObject *unused) { return PyBool_FromLong(precis_cuda_built()); }

static PyObject *py_version(PyObject *self, PyObject *unused) {
  return Py_BuildValue("(ss)", precis_version(), precis_commit());
}

static PyMethodDef methods[] = {
    {"spec_canonical", py_spec_canonical, METH_VARARGS, "The canonical spec of a preset name or a spec."},
    {"release_memory", py_release_memory, METH_NOARGS, "Memory kept for reuse between calls back to the system."},
    {"recipes", py_recipes, METH_NOARGS, "The presets of `precis recipes`, in table order."},
    {"cpu_support", py_cpu_support, METH_VARARGS, "(True, '') or (False, why) for the cpu backend."},
    {"out_dtype", py_out_dtype, METH_VARARGS, "'float64' for out=fp64 recipes, else 'float32'."},
    {"emulate", py_emulate, METH_VARARGS, "One batched GEMM exactly as the cpu backend computes it."},
    {"emulate_b_bytes", py_emulate_b_bytes, METH_VARARGS, "Host bytes emulate holds for a W [n, k]."},
    {"emulate_operands", py_emulate_operands, METH_VARARGS, "The operands an fp32-accumulating recipe multiplies."},
    {"quantize", py_quantize, METH_VARARGS, "Codes, scales and values of one operand."},
    {"dataset_info", py_dataset_info, METH_VARARGS, "A dataset's attributes and workloads."},
    {"dataset_arrays", py_dataset_arrays, METH_VARARGS, "A workload's arrays."},
    {"results_read", py_results_read, METH_VARARGS, "A report's JSON text, validated."},
    {"run", py_run, METH_VARARGS, "`precis run` with these options."},
    {"main", py_main, METH_VARARGS, "The command line; returns the exit code."},
    {"version", py_version, METH_NOARGS, "(version, commit)."},
    {"emulate_dlpack", py_emulate_dlpack, METH_VARARGS, "emulate on DLPack arrays: the CPU's or a CUDA device's."},
    {"cuda_built", py_cuda_built, METH_NOARGS, "Whether libprecis has the CUDA backend."},
    {"layer_check_open", py_layer_check_open, METH_VARARGS, "Opens one layer's check (precis/layer_check.h)."},
    {"layer_check_add", py_layer_check_add, METH_VARARGS, "Adds held-out samples of the layer's inputs."},
    {"layer_check_rows", py_layer_check_rows, METH_VARARGS, "The isolated and the other row, as JSON text."},
    {"logit_token_stats", py_logit_token_stats, METH_VARARGS, "verify's per-token quantities of two sets of logits."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "precis._precis", "libprecis's C extension.", -1, methods,
                                    NULL, NULL, NULL, NULL};

static PyObject *new_error(PyObject *mod, const char *name, PyObject *bases, const char *doc) {
  char qualified[64];
  snprintf(qualified, sizeof qualified, "precis.%s", name);
  PyObject *type = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
  if (!type) return NULL;
  if (PyModule_AddObject(mod, name, type) != 0) {
    Py_DECREF(type);
    return NULL;
  }
  Py_INCREF(type); /* AddObject stole one; the module-level pointer keeps another */
  return type;
}

PyMODINIT_FUNC PyInit__precis(void);
PyMODINIT_FUNC PyInit__precis(void) {
  /* As the executable's main does: every file precis opens is closed explicitly, and HDF5's own exit
   * handler would crash after a failed write (src/cli/cli_main.c). */
  H5dont_atexit();
  PyObject *mod = PyModule_Create(&module);
  if (!mod) return NULL;
  PyObject *usage_bases = NULL, *unsupported_bases = NULL, *memory_bases = NULL, *io_bases = NULL;
  if (!(error_base = new_error(mod, "Error", NULL, "An error reported by precis (status, exit_code).")))
    goto fail;
  usage_bases = PyTuple_Pack(2, error_base, PyExc_ValueError);
  unsupported_bases = PyTuple_Pack(2, error_base, PyExc_NotImplementedError);
  memory_bases = PyTuple_Pack(2, error_base, PyExc_MemoryError);
  io_bases = PyTuple_Pack(2, error_base, PyExc_OSError);
  if (!usage_bases || !unsupported_bases || !memory_bases || !io_bases) goto fail;
  if (!(error_usage = new_error(mod, "UsageError", usage_bases, "Bad argument or input (exit code 2).")) ||
      !(error_unsupported =
            new_error(mod, "UnsupportedError", unsupported_bases, "The backend does not run this recipe.")) ||
      !(error_memory = new_error(mod, "OutOfMemoryError", memory_bases, "Host memory exhausted.")) ||
      !(error_io = new_error(mod, "IOError", io_bases, "A read or write failed.")))
    goto fail;
  Py_DECREF(usage_bases);
  Py_DECREF(unsupported_bases);
  Py_DECREF(memory_bases);
  Py_DECREF(io_bases);
  return mod;
fail:
  Py_XDECREF(usage_bases);
  Py_XDECREF(unsupported_bases);
  Py_XDECREF(memory_bases);
  Py_XDECREF(io_bases);
  Py_DECREF(mod);
  return NULL;
}
