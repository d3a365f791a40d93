#include "model_import.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"
#include "dataset_digest.h"
#include "base/escape.h"
#include "file_kind.h"
#include "base/fileio.h"
#include "generate.h"
#include "precis_version.h"
#include "rng.h"
#include "model_converted.h"
#include "conform.h"
#include "npy.h"
#include "safetensors.h"

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_directory(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}


/* The synthetic distribution as a suite mapping ({dist: NAME, param: value, ...}). */
static void dist_yaml(precis_buf *b, const precis_dist *d) {
  const precis_dist_spec *spec = &precis_dist_specs[d->kind];
  precis_buf_appendf(b, "{dist: %s", spec->name);
  for (int i = 0; i < spec->n_params; i++) {
    char num[32];
    precis_format_double(num, sizeof num, d->params[i]);
    precis_buf_appendf(b, ", %s: %s", spec->param_names[i], num);
  }
  precis_buf_append(b, "}");
}

static void yaml_append_quoted(precis_buf *b, const char *s) {
  char *q = precis_yaml_quote(s);
  if (!q) b->failed = true;
  else precis_buf_append(b, q);
  free(q);
}

typedef struct progress_bar {
  bool enabled, tty;
  size_t count;
} progress_bar;

static void progress_step(const progress_bar *p, size_t index, const precis_model_layer *layer) {
  if (!p->enabled) return;
  enum { WIDTH = 24 };
  int filled = (int)(WIDTH * index / (p->count ? p->count : 1));
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
  bar[WIDTH] = '\0';
  /* Names from the file: control characters would rewrite the terminal. */
  char shown[96];
  size_t j = 0;
  for (const char *c = layer->name; *c && j + 1 < sizeof shown; c++) shown[j++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
  shown[j] = '\0';
  fprintf(stderr, "%sprecis import: [%s] %zu/%zu %s (%" PRId64 "x%" PRId64 " %s)%s", p->tty ? "\r\033[K" : "", bar, index + 1,
          p->count, shown, layer->out_features, layer->in_features, layer->dtype, p->tty ? "" : "\n");
  fflush(stderr);
}

/* Where --activations keeps each layer's [samples, tokens, k] array, judged once from the path. */
typedef enum activation_kind {
  ACTIVATIONS_HDF5,        /* dataset /<layer> */
  ACTIVATIONS_SAFETENSORS, /* tensor <layer> */
  ACTIVATIONS_NPZ,         /* member <layer>.npy, as np.savez(path, **{layer: x}) writes it */
  ACTIVATIONS_NPY,         /* the one array of the file: only when one layer is imported */
  ACTIVATIONS_NPY_DIR,     /* a directory of <layer>.npy files */
} activation_kind;

static const char *activation_expected(activation_kind kind) {
  switch (kind) {
  case ACTIVATIONS_HDF5: return "an HDF5 dataset /<layer>";
  case ACTIVATIONS_SAFETENSORS: return "a safetensors tensor named after the layer";
  case ACTIVATIONS_NPZ: return "an .npz array named after the layer";
  case ACTIVATIONS_NPY: return "the .npy file's array";
  case ACTIVATIONS_NPY_DIR: return "a file <layer>.npy in the directory";
  }
  return "";
}

/* The file and object (NULL for a whole .npy) holding a layer's activations. */
static precis_status activation_location(const char *activations, activation_kind kind, const char *layer, char **path,
                                         char **object) {
  *object = NULL;
  *path = kind == ACTIVATIONS_NPY_DIR ? precis_asprintf("%s/%s.npy", activations, layer) : precis_strdup(activations);
  if (kind == ACTIVATIONS_HDF5) *object = precis_asprintf("/%s", layer);
  else if (kind == ACTIVATIONS_SAFETENSORS || kind == ACTIVATIONS_NPZ) *object = precis_strdup(layer);
  bool needs_object = kind != ACTIVATIONS_NPY && kind != ACTIVATIONS_NPY_DIR;
  if (!*path || (needs_object && !*object)) {
    free(*path);
    free(*object);
    *path = *object = NULL;
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  return PRECIS_OK;
}

/* A directory of <layer>.npy files lacks this layer's: say which files it does hold that are close. */
static precis_status missing_npy(const char *dir_path, const char *layer) {
  char closest[512] = "";
  size_t n = 0, cap = 0;
  char **names = NULL;
  DIR *dir = opendir(dir_path);
  for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
    if (!ends_with(e->d_name, ".npy")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      char **grown = realloc(names, cap * sizeof *grown);
      if (!grown) break;
      names = grown;
    }
    if (!(names[n] = precis_asprintf("%.*s", (int)(strlen(e->d_name) - 4), e->d_name))) break;
    n++;
  }
  if (dir) closedir(dir);
  if (names) precis_closest_names(layer, (const char *const *)names, n, closest, sizeof closest);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return precis_fail(PRECIS_E_INPUT, "%s/%s.npy: no such file (--activations %s is a directory: one [samples, tokens, "
                     "in_features] .npy per layer, named <layer>.npy; it holds %zu .npy files)%s",
                     dir_path, layer, dir_path, n, closest);
}

/* Activations of one layer from --activations: [samples, tokens, k] (or [tokens, k]). */
static precis_status layer_activations(const precis_model_import_options *o, const precis_model_layer *layer,
                                       activation_kind kind, float **values, int64_t *samples, int64_t *tokens) {
  char *object = NULL, *path = NULL;
  precis_status st = activation_location(o->activations, kind, layer->name, &path, &object);
  if (st != PRECIS_OK) return st;
  precis_dist d = {.kind = PRECIS_DIST_FILE, .path = path, .object = object};
  int rank = 0;
  int64_t shape[3] = {0, 0, 0};
  if (kind == ACTIVATIONS_NPY_DIR && !precis_path_exists(path)) st = missing_npy(o->activations, layer->name);
  else st = precis_read_matrix_file(&d, ".", values, &rank, shape);
  if (st != PRECIS_OK) {
    /* Experts are no nn.Linear: precis.torch.capture records none, so say how to import the rest. */
    if (layer->n_experts)
      precis_error_prefix("--activations for expert layer %s (expected %s, shape [samples, tokens, %" PRId64 "]; "
                          "precis.torch.capture records no expert inputs: --exclude '%s*' imports the other layers "
                          "with their activations, and a separate import without --activations the experts)",
                          layer->name, activation_expected(kind), layer->in_features, layer->tensor);
    else
      precis_error_prefix("--activations for layer %s (expected %s, shape [samples, tokens, %" PRId64 "])", layer->name,
                          activation_expected(kind), layer->in_features);
  } else if (shape[rank - 1] != layer->in_features) {
    free(*values);
    *values = NULL;
    char dims[96];
    if (rank == 3) snprintf(dims, sizeof dims, "%" PRId64 ", %" PRId64 ", %" PRId64, shape[0], shape[1], shape[2]);
    else snprintf(dims, sizeof dims, "%" PRId64 ", %" PRId64, shape[0], shape[1]);
    /* The activations fitting the other side of a square-less weight is the signature of a
     * weight stored the other way round (GPT-2's Conv1D without its config.json). */
    const char *hint = shape[rank - 1] != layer->out_features ? ""
                       : layer->in_major ? "; it matches the weight read as [out, in]: drop --in-major for this layer"
                                         : "; it matches the weight read as [in, out] (transformers' Conv1D, as in GPT-2): "
                                           "pass --in-major GLOB for such layers";
    st = precis_fail(PRECIS_E_INPUT,
                     "%s%s%s: shape [%s]: the last dimension is %" PRId64 ", but layer %s has in_features = %" PRId64
                     " (expected [samples, tokens, %" PRId64 "])%s",
                     path, object ? ": " : "", object ? object : "", dims, shape[rank - 1], layer->name,
                     layer->in_features, layer->in_features, hint);
  } else {
    *samples = rank == 3 ? shape[0] : 1;
    *tokens = shape[rank - 2];
  }
  free(object);
  free(path);
  return st;
}

/* dL/dY of one layer from --gradients: [samples, tokens, out] (or [tokens, out]), the held-out
 * samples first as in the activations; the first `batch` samples are kept. */
static precis_status layer_gradients(const precis_model_import_options *o, const precis_model_layer *layer,
                                     activation_kind kind, int64_t batch, int64_t tokens, float *out) {
  char *object = NULL, *path = NULL;
  float *values = NULL;
  precis_status st = activation_location(o->gradients, kind, layer->name, &path, &object);
  if (st != PRECIS_OK) return st;
  precis_dist d = {.kind = PRECIS_DIST_FILE, .path = path, .object = object};
  int rank = 0;
  int64_t shape[3] = {0, 0, 0};
  if (kind == ACTIVATIONS_NPY_DIR && !precis_path_exists(path))
    st = precis_fail(PRECIS_E_INPUT, "%s: no such file (--gradients %s is a directory: one <layer>.npy per layer)", path,
                     o->gradients);
  else st = precis_read_matrix_file(&d, ".", &values, &rank, shape);
  if (st != PRECIS_OK) {
    precis_error_prefix("--gradients for layer %s (expected %s, shape [samples, tokens, %" PRId64 "])", layer->name,
                        activation_expected(kind), layer->out_features);
    goto done;
  }
  int64_t samples = rank == 3 ? shape[0] : 1, rows = shape[rank - 2], cols = shape[rank - 1];
  if (cols != layer->out_features || rows != tokens || samples < batch) {
    st = precis_fail(PRECIS_E_INPUT,
                     "%s%s%s: gradients of layer %s have shape [%" PRId64 ", %" PRId64 ", %" PRId64 "]; expected dL/dY "
                     "[samples >= %" PRId64 ", tokens = %" PRId64 " (as the activations), out_features = %" PRId64 "]",
                     path, object ? ": " : "", object ? object : "", layer->name, samples, rows, cols, batch, tokens,
                     layer->out_features);
    goto done;
  }
  uint64_t count = (uint64_t)batch * (uint64_t)tokens * (uint64_t)cols;
  for (uint64_t i = 0; i < count; i++)
    if (!isfinite(values[i])) {
      st = precis_fail(PRECIS_E_INPUT, "%s: gradients of layer %s: element %" PRIu64 " is not finite", o->gradients,
                       layer->name, i);
      goto done;
    }
  memcpy(out, values, count * sizeof(float));
done:
  free(values);
  free(object);
  free(path);
  return st;
}

/* Judges --activations once: a directory of .npy files, or a file by its first bytes. A lone .npy
 * holds one array, so it can only feed a single layer. */
static precis_status activation_kind_of(const char *activations, size_t n_layers, activation_kind *out) {
  if (is_directory(activations)) {
    *out = ACTIVATIONS_NPY_DIR;
    return PRECIS_OK;
  }
  precis_file_kind kind;
  precis_status st = precis_file_kind_detect(activations, &kind);
  if (st != PRECIS_OK) return st;
  switch (kind) {
  case PRECIS_FILE_HDF5: *out = ACTIVATIONS_HDF5; break;
  case PRECIS_FILE_SAFETENSORS: *out = ACTIVATIONS_SAFETENSORS; break;
  case PRECIS_FILE_NPZ: *out = ACTIVATIONS_NPZ; break;
  case PRECIS_FILE_NPY:
    *out = ACTIVATIONS_NPY;
    if (n_layers != 1)
      return precis_fail(PRECIS_E_INPUT,
                         "--activations %s: a NumPy .npy file holds one array, for one layer, but %zu layers are "
                         "imported (choose one with --layers, or give an .npz with one array per layer name, "
                         "np.savez(FILE, **{layer: x}), or a directory of <layer>.npy files)",
                         activations, n_layers);
    break;
  case PRECIS_FILE_UNKNOWN:
    return precis_fail(PRECIS_E_INPUT,
                       "--activations %s: not a file precis reads activations from (expected HDF5, safetensors, "
                       "NumPy .npz, a .npy for a single layer, or a directory of <layer>.npy files; judged by the "
                       "first bytes)", activations);
  }
  return PRECIS_OK;
}

bool precis_model_activations_hold(const char *activations, const char *layer) {
  activation_kind kind = ACTIVATIONS_HDF5;
  if (activation_kind_of(activations, 2, &kind) != PRECIS_OK) return false; /* 2: a lone .npy is refused */
  char *path = NULL, *object = NULL;
  if (activation_location(activations, kind, layer, &path, &object) != PRECIS_OK) return false;
  bool held = false;
  if (kind == ACTIVATIONS_NPY_DIR) {
    held = precis_path_exists(path);
  } else {
    precis_dist d = {.kind = PRECIS_DIST_FILE, .path = path, .object = object};
    float *values = NULL;
    int rank = 0;
    int64_t shape[3] = {0, 0, 0};
    held = precis_read_matrix_file(&d, ".", &values, &rank, shape) == PRECIS_OK;
    free(values);
  }
  free(path);
  free(object);
  return held;
}

/* What one layer holds at its peak while it is imported (docs/model.md, "Memory"), in bytes:
 * b = W^T in float32 and, at the larger of the two moments, the weight's stored bytes (read and
 * decoded) or the reference dgemm's float64 copies of b and of 256 rows of a; the activations as
 * read and their held-out / calibration copies; with --gradients dL/dY as read and kept; c_ref and
 * ab_abs (float64) of `block` rows of a (all samples' rows one after another). --converted adds the
 * original weights and activations and keeps its whole reference (block = every row). */
typedef struct layer_memory {
  uint64_t weights, activations, gradients, reference, total;
} layer_memory;

static layer_memory layer_memory_of(const precis_model_layer *layer, const precis_model_import_options *o, int64_t samples,
                                    int64_t m, int64_t batch, int64_t block) {
  const uint64_t k = (uint64_t)layer->in_features, n = (uint64_t)layer->out_features, rows = (uint64_t)m;
  const uint64_t ref_copies = 8 * ((uint64_t)PRECIS_REFERENCE_BLOCK_ROWS * k + k * n);
  layer_memory r;
  r.weights = 4 * k * n + (layer->bytes > ref_copies ? layer->bytes : ref_copies) + (o->converted ? 8 * k * n : 0);
  r.activations = 4 * rows * k * ((uint64_t)samples + (uint64_t)batch + (uint64_t)o->calib + (o->converted ? (uint64_t)batch : 0));
  r.gradients = o->gradients ? 4 * rows * n * ((uint64_t)samples + (uint64_t)batch) : 0;
  r.reference = 16 * n * (uint64_t)block;
  r.total = r.weights + r.activations + r.gradients + r.reference;
  return r;
}

/* Rows of a whose reference is computed at once: every row for --converted (its arrays are written
 * whole); else whole blocks of PRECIS_REFERENCE_BLOCK_ROWS rows (precis_reference_compute's
 * GEMMs, so that the values are those of one call over every row), the most whose c_ref and
 * ab_abs take at most 512 MiB, or, under max_memory, the most whose working set fits it (0 when
 * not even one block's does). */
enum { DEFAULT_REFERENCE_BLOCK_BYTES = 512 << 20 };

static int64_t reference_block(const precis_model_layer *layer, const precis_model_import_options *o, int64_t samples,
                               int64_t m, int64_t batch) {
  const int64_t all = batch * m;
  if (o->converted) return all;
  const int64_t unit = PRECIS_REFERENCE_BLOCK_ROWS, units = (all + unit - 1) / unit;
  int64_t best = 0;
  for (int64_t lo = 1, hi = units; lo <= hi;) {
    const int64_t mid = lo + (hi - lo) / 2, rows = mid * unit < all ? mid * unit : all;
    const layer_memory need = layer_memory_of(layer, o, samples, m, batch, rows);
    const bool fits = o->max_memory ? need.total <= o->max_memory : need.reference <= DEFAULT_REFERENCE_BLOCK_BYTES;
    if (fits) best = rows, lo = mid + 1;
    else hi = mid - 1;
  }
  return best || o->max_memory ? best : (unit < all ? unit : all);
}

static void format_bytes(uint64_t bytes, char *out, size_t size) {
  if (bytes >= (1ull << 28)) snprintf(out, size, "%.2f GiB", (double)bytes / (double)(1ull << 30));
  else if (bytes >= (1ull << 20)) snprintf(out, size, "%.0f MiB", (double)bytes / (double)(1ull << 20));
  else snprintf(out, size, "%.0f KiB", (double)bytes / 1024.0);
}

static void describe_layer_memory(const layer_memory *r, int64_t block, char *out, size_t size) {
  char total[32], w[32], a[32], g[32], c[32];
  format_bytes(r->total, total, sizeof total);
  format_bytes(r->weights, w, sizeof w);
  format_bytes(r->activations, a, sizeof a);
  format_bytes(r->gradients, g, sizeof g);
  format_bytes(r->reference, c, sizeof c);
  snprintf(out, size, "%s (weights and their float64 copy %s + activations %s%s%s + c_ref and ab_abs of %" PRId64
                      " rows at a time %s)",
           total, w, a, r->gradients ? " + gradients " : "", r->gradients ? g : "", block, c);
}

/* [samples, tokens] of a layer's --activations array, from its header where the file has one (an
 * HDF5 dataset is read). */
static precis_status layer_activations(const precis_model_import_options *o, const precis_model_layer *layer,
                                       activation_kind kind, float **values, int64_t *samples, int64_t *tokens);

static precis_status activation_rows(const precis_model_import_options *o, const precis_model_layer *layer,
                                     activation_kind kind, int64_t *samples, int64_t *tokens) {
  char *object = NULL, *path = NULL;
  precis_status st = activation_location(o->activations, kind, layer->name, &path, &object);
  if (st != PRECIS_OK) return st;
  int rank = 0;
  const int64_t *shape = NULL;
  precis_npy_array arr;
  memset(&arr, 0, sizeof arr);
  precis_safetensors sf;
  memset(&sf, 0, sizeof sf);
  bool found = false, opened = false;
  if (kind == ACTIVATIONS_NPZ) found = precis_npz_read(path, object, false, &arr) == PRECIS_OK;
  else if (kind == ACTIVATIONS_NPY || kind == ACTIVATIONS_NPY_DIR) found = precis_npy_read(path, false, &arr) == PRECIS_OK;
  if (found) rank = arr.rank, shape = arr.shape;
  if (kind == ACTIVATIONS_SAFETENSORS && (opened = precis_safetensors_open(path, &sf) == PRECIS_OK)) {
    const precis_st_tensor *t = precis_safetensors_find(&sf, object);
    if (t) rank = t->rank, shape = t->shape, found = true;
  }
  if (found && (rank == 2 || rank == 3)) {
    *samples = rank == 3 ? shape[0] : 1;
    *tokens = shape[rank - 2];
  } else {
    /* HDF5, or a file whose header says something unexpected: read it as the import will (with its errors). */
    precis_clear_error();
    float *values = NULL;
    st = layer_activations(o, layer, kind, &values, samples, tokens);
    free(values);
  }
  precis_npy_array_free(&arr);
  if (opened) precis_safetensors_close(&sf);
  free(object);
  free(path);
  return st;
}

/* The inputs a stored so far (their SHA-256 with the shape), so that a layer given the same values
 * as an earlier one (q/k/v and gate/up of a block read the same hidden states) links to them
 * instead of storing them again. */
typedef struct stored_inputs {
  size_t count;
  char **names;
  uint8_t (*digests)[32];
} stored_inputs;

static void inputs_digest(const precis_workload_info *info, const precis_workload_data *data, uint8_t digest[32]) {
  precis_sha256 h;
  precis_sha256_init(&h);
  const int64_t dims[4] = {info->batch, info->m, info->k, info->calib_samples};
  precis_sha256_update(&h, dims, sizeof dims);
  precis_sha256_update(&h, data->a, (uint64_t)info->batch * (uint64_t)info->m * (uint64_t)info->k * sizeof(float));
  if (info->calib_samples > 0)
    precis_sha256_update(&h, data->calib_a,
                         (uint64_t)info->calib_samples * (uint64_t)info->m * (uint64_t)info->k * sizeof(float));
  precis_sha256_final(&h, digest);
}

static const char *inputs_find(const stored_inputs *t, const uint8_t digest[32]) {
  for (size_t i = 0; i < t->count; i++)
    if (!memcmp(t->digests[i], digest, 32)) return t->names[i];
  return NULL;
}

static precis_status inputs_add(stored_inputs *t, const char *name, const uint8_t digest[32]) {
  char **names = realloc(t->names, (t->count + 1) * sizeof *names);
  if (names) t->names = names;
  uint8_t(*digests)[32] = realloc(t->digests, (t->count + 1) * sizeof *digests);
  if (digests) t->digests = digests;
  if (!names || !digests || !(t->names[t->count] = precis_strdup(name))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  memcpy(t->digests[t->count++], digest, 32);
  return PRECIS_OK;
}

static void inputs_free(stored_inputs *t) {
  for (size_t i = 0; i < t->count; i++) free(t->names[i]);
  free(t->names);
  free(t->digests);
  memset(t, 0, sizeof *t);
}

/* c_ref must be finite: a float64 overflow is the inputs' fault, named by its element. */
static precis_status reference_finite(const precis_model_layer *layer, const double *c_ref, uint64_t count, uint64_t first) {
  for (uint64_t i = 0; i < count; i++)
    if (!isfinite(c_ref[i]))
      return precis_fail(PRECIS_E_INPUT, "layer %s: the reference overflows float64 at element %" PRIu64, layer->name,
                         first + i);
  return PRECIS_OK;
}

/* The workload written out of core: a, b, calib/a and grad as held, then c_ref and ab_abs computed
 * `block` rows at a time (a multiple of precis_reference_compute's 256-row GEMMs over the samples'
 * rows one after another, so that the values are those of one call over every row) and written
 * sample by sample. */
static precis_status write_tiled(precis_dataset_writer *w, const precis_workload_info *info, const precis_workload_data *data,
                                 const precis_model_layer *layer, int64_t block, const char *share_a_from) {
  const int64_t m = info->m, n = info->n, k = info->k, all = info->batch * m;
  double *c_ref = NULL, *ab_abs = NULL;
  precis_workload_info with_grad = *info;
  with_grad.has_grad = data->grad != NULL;
  precis_status st = share_a_from ? precis_dataset_writer_share_a(w, share_a_from) : PRECIS_OK;
  if (st == PRECIS_OK) st = precis_dataset_writer_begin(w, &with_grad);
  if (st != PRECIS_OK) return st;
  if ((st = precis_dataset_writer_rows(w, "b", 0, 0, k, data->b)) != PRECIS_OK) goto done;
  for (int64_t s = 0; s < info->batch && st == PRECIS_OK; s++) {
    if (!share_a_from) st = precis_dataset_writer_rows(w, "a", s, 0, m, data->a + (uint64_t)s * (uint64_t)m * (uint64_t)k);
    if (st == PRECIS_OK && data->grad)
      st = precis_dataset_writer_rows(w, "grad", s, 0, m, data->grad + (uint64_t)s * (uint64_t)m * (uint64_t)n);
  }
  for (int64_t s = 0; !share_a_from && s < info->calib_samples && st == PRECIS_OK; s++)
    st = precis_dataset_writer_rows(w, "calib/a", s, 0, m, data->calib_a + (uint64_t)s * (uint64_t)m * (uint64_t)k);
  if (st != PRECIS_OK) goto done;
  c_ref = malloc((uint64_t)block * (uint64_t)n * sizeof(double));
  ab_abs = malloc((uint64_t)block * (uint64_t)n * sizeof(double));
  if (!c_ref || !ab_abs) {
    st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of host memory", layer->name);
    goto done;
  }
  for (int64_t r0 = 0; r0 < all; r0 += block) {
    if (precis_interrupt_signal) {
      st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted");
      goto done;
    }
    const int64_t rows = all - r0 < block ? all - r0 : block;
    st = precis_reference_compute(data->a + (uint64_t)r0 * (uint64_t)k, data->b, 1, rows, n, k, false, c_ref, ab_abs);
    if (st != PRECIS_OK) {
      precis_error_prefix("layer %s", layer->name);
      goto done;
    }
    if ((st = reference_finite(layer, c_ref, (uint64_t)rows * (uint64_t)n, (uint64_t)r0 * (uint64_t)n)) != PRECIS_OK)
      goto done;
    /* Rows [r0, r0 + rows) of the samples' rows one after another, written as pieces of samples. */
    for (int64_t r = r0; r < r0 + rows && st == PRECIS_OK;) {
      const int64_t sample = r / m, first = r % m, count = m - first < r0 + rows - r ? m - first : r0 + rows - r;
      const uint64_t at = (uint64_t)(r - r0) * (uint64_t)n;
      st = precis_dataset_writer_rows(w, "c_ref", sample, first, count, c_ref + at);
      if (st == PRECIS_OK) st = precis_dataset_writer_rows(w, "ab_abs", sample, first, count, ab_abs + at);
      r += count;
    }
    if (st != PRECIS_OK) goto done;
  }
done:
  precis_reference_release(); /* b's float64 copy is not held while the next layer is read */
  free(c_ref);
  free(ab_abs);
  precis_status end = precis_dataset_writer_end(w);
  return st != PRECIS_OK ? st : end;
}

static precis_status import_layer(const precis_model_layer *layer, const precis_model_import_options *o,
                                  activation_kind act_kind, activation_kind grad_kind,
                                  precis_dataset_writer *writer, precis_sha256 *id_hash, precis_buf *suite,
                                  stored_inputs *inputs) {
  precis_status st = PRECIS_OK;
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  precis_workload_data data = {0};
  uint8_t *raw = NULL;
  float *file_a = NULL, *b_original = NULL;
  char converted_what[192] = "";
  double weight_rel_fro = 0;
  float *a_original = NULL;
  char deployed_what[200] = "";
  precis_converted_format found;
  int declared_group = -1;
  bool ignored = false;
  char *description = NULL, *source = NULL;
  char kind[] = "gemm";
  const int64_t n = layer->out_features, k = layer->in_features;
  int64_t m = o->tokens, batch = o->batch > 0 ? o->batch : 1, samples = 0;
  precis_dist b_dist = {.kind = PRECIS_DIST_FILE, .path = layer->file, .object = layer->tensor, .transpose = !layer->in_major};
  precis_dist a_file = {.kind = PRECIS_DIST_FILE};

  if ((st = precis_dataset_check_name(layer->name)) != PRECIS_OK) goto done;
  if (layer->in_major && o->converted && !layer->n_experts) {
    /* The converted formats' scales are per output row of an [out, in] weight. */
    st = precis_fail(PRECIS_E_USAGE, "layer %s: --converted reads [out, in] weights; this layer is stored [in, out] "
                                     "(--in-major): not supported",
                     layer->name);
    goto done;
  }
  /* Weights: SHA-256 of the stored bytes, then b = W^T in float32 (every source dtype widens exactly);
   * an input-major weight already is W^T. */
  if ((st = precis_model_read_raw(layer, &raw)) != PRECIS_OK) goto done;
  precis_sha256 h;
  precis_sha256_init(&h);
  precis_sha256_update(&h, raw, layer->bytes);
  uint8_t digest[32];
  char sha[65];
  precis_sha256_final(&h, digest);
  precis_sha256_hex(digest, sha);
  data.b = malloc((uint64_t)k * (uint64_t)n * sizeof(float));
  if (!data.b) goto nomem;
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < k; i++) {
      uint64_t stored = layer->in_major ? (uint64_t)i * (uint64_t)n + (uint64_t)j : (uint64_t)j * (uint64_t)k + (uint64_t)i;
      float v = precis_model_decode(raw, layer->dtype, stored);
      if (!isfinite(v)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": element [%" PRId64 ", %" PRId64 "] is %s (weights must be finite)",
                         layer->file, layer->tensor, layer->in_major ? i : j, layer->in_major ? j : i,
                         isnan(v) ? "NaN" : "infinite");
        goto done;
      }
      data.b[(uint64_t)i * (uint64_t)n + (uint64_t)j] = v;
    }
  free(raw);
  raw = NULL;
  if (o->converted) {
    /* b becomes the converted weights; the reference keeps the original ones. */
    float *w = NULL;
    if ((st = precis_model_converted_format(o->converted, o->declared, layer, &found, &declared_group, &ignored)) != PRECIS_OK)
      goto done;
    const int declared_bits = declared_group >= 0 && !ignored ? o->declared->groups[declared_group].weights.num_bits : 0;
    if ((st = precis_converted_weight(o->converted, layer, declared_bits, &w, converted_what, sizeof converted_what)) != PRECIS_OK)
      goto done;
    b_original = data.b;
    data.b = malloc((uint64_t)k * (uint64_t)n * sizeof(float));
    if (!data.b) {
      free(w);
      goto nomem;
    }
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < k; i++) data.b[(uint64_t)i * (uint64_t)n + (uint64_t)j] = w[(uint64_t)j * (uint64_t)k + (uint64_t)i];
    free(w);
    /* A conversion stays near its original; a checkpoint of another model with the same shapes does
     * not (two unrelated matrices of equal norm are sqrt(2) apart). */
    double diff2 = 0, orig2 = 0;
    for (uint64_t i = 0; i < (uint64_t)k * (uint64_t)n; i++) {
      const double d = (double)data.b[i] - (double)b_original[i];
      diff2 += d * d;
      orig2 += (double)b_original[i] * (double)b_original[i];
    }
    weight_rel_fro = orig2 > 0 ? sqrt(diff2 / orig2) : diff2 > 0 ? INFINITY : 0;
    if (weight_rel_fro > PRECIS_FOREIGN_REL_FRO(found.bits) && !o->force_foreign) {
      st = precis_fail(PRECIS_E_INPUT,
                       "layer %s: the converted weights (%s, %s) differ from the original's by a relative Frobenius norm of "
                       "%.3g, above %.2g: %s is not a conversion of this model (%s); a conversion stays near its original "
                       "(round-to-nearest INT4 about 0.1, FP8 E4M3 about 0.03). --force-foreign imports it anyway",
                       layer->name, converted_what, o->converted->path, weight_rel_fro, PRECIS_FOREIGN_REL_FRO(found.bits),
                       o->converted->path, layer->file);
      goto done;
    }
  }

  /* Activations. */
  if (o->activations) {
    if ((st = layer_activations(o, layer, act_kind, &file_a, &samples, &m)) != PRECIS_OK) goto done;
    batch = o->batch > 0 ? o->batch : samples - o->calib;
    if (batch < 1 || batch + o->calib > samples) {
      st = precis_fail(PRECIS_E_INPUT, "%s: %s has %" PRId64 " samples; %" PRId64 " held-out + %" PRId64 " calibration needed",
                       o->activations, layer->name, samples, batch < 1 ? 1 : batch, o->calib);
      goto done;
    }
  }
  const uint64_t a_count = (uint64_t)batch * (uint64_t)m * (uint64_t)k, c_count = (uint64_t)batch * (uint64_t)m * (uint64_t)n;
  const uint64_t calib_count = (uint64_t)o->calib * (uint64_t)m * (uint64_t)k;
  data.a = malloc(a_count * sizeof(float));
  if (o->converted) {
    data.c_ref = malloc(c_count * sizeof(double));
    data.ab_abs = malloc(c_count * sizeof(double));
  }
  if (o->calib > 0) data.calib_a = malloc(calib_count * sizeof(float));
  if (!data.a || (o->converted && (!data.c_ref || !data.ab_abs)) || (o->calib > 0 && !data.calib_a)) goto nomem;
  if (file_a) {
    memcpy(data.a, file_a, a_count * sizeof(float));
    if (o->calib > 0) memcpy(data.calib_a, file_a + a_count, calib_count * sizeof(float));
    free(file_a);
    file_a = NULL;
    for (uint64_t i = 0; i < a_count; i++)
      if (!isfinite(data.a[i])) {
        st = precis_fail(PRECIS_E_INPUT, "%s: %s: element %" PRIu64 " is not finite", o->activations, layer->name, i);
        goto done;
      }
    if ((st = activation_location(o->activations, act_kind, layer->name, &a_file.path, &a_file.object)) != PRECIS_OK)
      goto done;
  } else {
    const precis_rng_key key = precis_rng_key_for(o->seed, layer->name);
    precis_dist_fill(o->a, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, batch, m, k, data.a);
    if (o->calib > 0) precis_dist_fill(o->a, key, PRECIS_STREAM_CALIB_A, PRECIS_OPERAND_A, o->calib, m, k, data.calib_a);
  }
  if (o->gradients) {
    if (!(data.grad = malloc(c_count * sizeof(float)))) goto nomem;
    if ((st = layer_gradients(o, layer, grad_kind, batch, m, data.grad)) != PRECIS_OK) goto done;
  }
  /* The deployed scheme: a becomes what the served layer multiplies, c_ref stays from the original. */
  if (o->converted && !o->weights_only && declared_group >= 0 && !ignored && o->declared->groups[declared_group].input.present) {
    if (!(a_original = malloc(a_count * sizeof(float)))) goto nomem;
    memcpy(a_original, data.a, a_count * sizeof(float));
    if ((st = precis_deployed_activations(o->converted, layer, &o->declared->groups[declared_group].input, data.a, batch, m, k,
                                          deployed_what, sizeof deployed_what)) != PRECIS_OK)
      goto done;
  }
  /* The reference: whole for --converted (its arrays are written whole), else `block` samples at a
   * time as the workload is written (the same values: each sample's rows are computed alone). */
  const int64_t block = reference_block(layer, o, samples, m, batch);
  if (block < 1) {
    char need[400], limit[32];
    const int64_t one = PRECIS_REFERENCE_BLOCK_ROWS < batch * m ? PRECIS_REFERENCE_BLOCK_ROWS : batch * m;
    const layer_memory r = layer_memory_of(layer, o, samples, m, batch, one);
    describe_layer_memory(&r, one, need, sizeof need);
    format_bytes(o->max_memory, limit, sizeof limit);
    st = precis_fail(PRECIS_E_USAGE, "--max-memory %s: layer %s needs at least %s", limit, layer->name, need);
    goto done;
  }
  if (o->converted) {
    st = precis_reference_compute(a_original ? a_original : data.a, b_original ? b_original : data.b, batch, m, n, k, false,
                                  data.c_ref, data.ab_abs);
    precis_reference_release(); /* b's float64 copy is not held while the next layer is read */
    if (st != PRECIS_OK) {
      precis_error_prefix("layer %s", layer->name);
      goto done;
    }
    if ((st = reference_finite(layer, data.c_ref, c_count, 0)) != PRECIS_OK) goto done;
  }
  /* The dataset keeps the original weights next to the converted ones: c_ref is checked against them. */
  data.b_ref = b_original;
  b_original = NULL;
  data.a_ref = a_original;
  a_original = NULL;

  cJSON *src = cJSON_CreateObject();
  if (!src) goto nomem;
  cJSON_AddStringToObject(src, "file", layer->file);
  cJSON_AddStringToObject(src, "tensor", layer->tensor);
  cJSON_AddStringToObject(src, "dtype", layer->dtype);
  cJSON *shape = cJSON_AddArrayToObject(src, "shape");
  cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)(layer->in_major ? k : n)));
  cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)(layer->in_major ? n : k)));
  cJSON_AddStringToObject(src, "layout", layer->in_major ? "[in, out]" : "[out, in]");
  cJSON_AddStringToObject(src, "sha256", sha);
  if (o->converted) {
    const precis_model_layer *t = NULL;
    char *wname = precis_asprintf("%s.weight", layer->name), *pname = precis_asprintf("%s.weight_packed", layer->name);
    if (layer->n_experts) {
      const precis_model_layer *scales = NULL;
      precis_mxfp4_tensors(o->converted, layer, &t, &scales);
    }
    if (!t && wname) t = precis_model_find_tensor(o->converted, wname);
    if (!t && pname) t = precis_model_find_tensor(o->converted, pname);
    free(wname);
    free(pname);
    cJSON *c = cJSON_AddObjectToObject(src, "converted");
    cJSON_AddStringToObject(c, "file", t ? t->file : "");
    cJSON_AddStringToObject(c, "weights", converted_what);
    cJSON_AddNumberToObject(c, "weight_rel_fro", weight_rel_fro);
    {
      /* precis conform's verdict on this layer (data/conform.h), with its first finding. */
      precis_conform_options copt = {NULL, o->converted, o->declared, 1, false};
      precis_conform_result cres;
      precis_conform_layer crow;
      memset(&cres, 0, sizeof cres);
      if ((st = precis_conform_one(&copt, layer, &crow, &cres)) != PRECIS_OK) {
        free(crow.name);
        cJSON_Delete(src);
        precis_conform_free(&cres);
        goto done;
      }
      cJSON *conf = cJSON_AddObjectToObject(c, "conform");
      cJSON_AddStringToObject(conf, "status", crow.status ? crow.status : "");
      if (crow.codes) {
        cJSON_AddNumberToObject(conf, "codes_equal", (double)crow.equal / (double)crow.codes);
        cJSON_AddNumberToObject(conf, "codes_within_one", (double)crow.within_one / (double)crow.codes);
        cJSON_AddNumberToObject(conf, "codes_beyond", (double)crow.beyond / (double)crow.codes);
        cJSON_AddNumberToObject(conf, "scales_off", (double)crow.scales_off);
        cJSON_AddNumberToObject(conf, "max_scale_ulps", crow.max_scale_ulps);
      }
      if (cres.n_findings) cJSON_AddStringToObject(conf, "first_finding", cres.findings[0]);
      if (crow.status && !strcmp(crow.status, "differs") && o->progress)
        fprintf(stderr, "precis import: layer %s does not conform to its declared scheme (precis conform names each "
                        "element): %s\n", layer->name, cres.n_findings ? cres.findings[0] : "");
      free(crow.name);
      precis_conform_free(&cres);
    }
    if (found.quantized && found.bits > 0) {
      /* The gate a recipe of the same weight width gets (numerics/criteria.c): 2^-(bits-3) for
       * integer codes; for float codes their unit roundoff (E4M3 2^-4, E2M1 2^-2), several times
       * the typical relative error of a round-to-nearest conversion. */
      const int exponent = found.is_float ? (found.bits == 8 ? 4 : 2) : found.bits - 3;
      char criterion[48];
      snprintf(criterion, sizeof criterion, "rel_fro<=%.17g", ldexp(1.0, -exponent));
      cJSON_AddStringToObject(c, "criterion", criterion);
    }
    {
      char text[400];
      if (deployed_what[0])
        snprintf(text, sizeof text, "the deployed scheme: weights as stored, %s (config_groups.%s.input_activations)",
                 deployed_what, o->declared->groups[declared_group].name);
      else if (o->weights_only) snprintf(text, sizeof text, "weights only (--weights-only): weights as stored, activations as given");
      else snprintf(text, sizeof text, "the deployed scheme: weights as stored, activations not quantized (%s)",
                    declared_group >= 0 && !ignored ? "a weight-only scheme" : "none declared for this layer");
      cJSON_AddStringToObject(c, "measures", text);
    }
    if (o->declared && o->declared->present) {
      char text[200];
      precis_quant_decl_describe(o->declared, text, sizeof text);
      cJSON_AddStringToObject(c, "declared_by", text);
      if (ignored) {
        cJSON_AddStringToObject(c, "declared", "ignored by the producer (left unquantized)");
      } else if (declared_group >= 0) {
        const precis_quant_group *g = &o->declared->groups[declared_group];
        cJSON_AddStringToObject(c, "config_group", g->name);
        precis_quant_args_describe(&g->weights, false, text, sizeof text);
        cJSON_AddStringToObject(c, "declared", text);
        precis_quant_args_describe(&g->input, true, text, sizeof text);
        cJSON_AddStringToObject(c, "declared_activations", text);
      } else {
        cJSON_AddStringToObject(c, "declared", "not targeted by any config group");
      }
    }
  }
  source = cJSON_PrintUnformatted(src);
  cJSON_Delete(src);
  if (o->converted)
    description = precis_asprintf("linear layer %s: b = the converted weights (%s, dequantized to float32) from %s, transposed; "
                                  "c_ref from the original %s weight in %s",
                                  layer->name, converted_what, o->converted->path, layer->dtype, layer->file);
  else if (layer->n_experts)
    description = precis_asprintf("expert %" PRId64 " of %" PRId64 " of the fused tensor %s: %s [%" PRId64 ", %" PRId64 "] from %s, "
                                  "%s", layer->expert, layer->n_experts, layer->tensor, layer->dtype, layer->in_major ? k : n,
                                  layer->in_major ? n : k, layer->file,
                                  layer->in_major ? "stored [experts, in, out] (x @ W[e]): b = W[e] as stored"
                                                  : "stored [experts, out, in] (F.linear): b = W[e]^T");
  else
    description = precis_asprintf("linear layer %s: %s weight [%" PRId64 ", %" PRId64 "] from %s, %s", layer->name,
                                  layer->dtype, layer->in_major ? k : n, layer->in_major ? n : k, layer->file,
                                  layer->in_major ? "stored [in, out] (Conv1D): b = W as stored" : "b = W^T");
  info.name = layer->name;
  info.kind = kind;
  info.m = m;
  info.n = n;
  info.k = k;
  info.batch = batch;
  info.calib_samples = o->calib;
  info.description = description;
  info.a_dist = o->activations ? precis_dist_describe(&a_file) : precis_dist_describe(o->a);
  if (o->converted) {
    info.b_dist = layer->n_experts ? precis_asprintf("converted(path=%s, tensor=%s_blocks, expert=%" PRId64 ", %s, transpose=true)",
                                                     o->converted->path, layer->tensor, layer->expert, converted_what)
                                   : precis_asprintf("converted(path=%s, tensor=%s.weight%s, %s, transpose=true)", o->converted->path,
                                                     layer->name, strstr(converted_what, "packed") ? "_packed" : "", converted_what);
    info.reference = precis_asprintf("%s, from a and the ORIGINAL weights (b holds the converted ones)",
                                     precis_reference_method());
  } else {
    info.b_dist = layer->n_experts ? precis_asprintf("file(path=%s, tensor=%s, expert=%" PRId64 " of %" PRId64 ", %s)", layer->file,
                                                     layer->tensor, layer->expert, layer->n_experts,
                                                     layer->in_major ? "[experts, in, out]: b = W[e]"
                                                                     : "[experts, out, in]: b = W[e]^T")
                                   : precis_dist_describe(&b_dist);
    info.reference = precis_strdup(precis_reference_method());
  }
  info.layer = layer->name;
  info.source = source;
  /* The output projection on captured final hidden states: each output row is one token's logits,
   * and a run judges them as a distribution too (KL, top-1 agreement). Synthetic inputs are not
   * hidden states, so their logits mean nothing as a distribution. */
  static char logits_kind[] = "logits";
  info.output_kind = o->activations && precis_model_is_output_projection(layer->name) ? logits_kind : NULL;
  if (!source || !description || !info.a_dist || !info.b_dist || !info.reference) goto nomem;
  if (o->converted) {
    st = precis_dataset_writer_add(writer, &info, &data);
  } else {
    uint8_t inputs_sha[32];
    inputs_digest(&info, &data, inputs_sha);
    const char *same = inputs_find(inputs, inputs_sha);
    st = write_tiled(writer, &info, &data, layer, block, same);
    if (st == PRECIS_OK && !same) st = inputs_add(inputs, layer->name, inputs_sha);
  }
  if (st != PRECIS_OK) goto done;
  precis_dataset_id_add(id_hash, &info, &data);

  /* The suite this import is equivalent to (the dataset's `suite` attribute). */
  precis_buf_append(suite, "  - name: ");
  yaml_append_quoted(suite, layer->name);
  precis_buf_appendf(suite, "\n    m: %" PRId64 "\n    n: %" PRId64 "\n    k: %" PRId64 "\n    batch: %" PRId64
                            "\n    calib: %" PRId64 "\n    a: ", m, n, k, batch, o->calib);
  if (o->activations) {
    precis_buf_append(suite, "{dist: file, path: ");
    yaml_append_quoted(suite, a_file.path);
    if (a_file.object) {
      precis_buf_append(suite, act_kind == ACTIVATIONS_HDF5 ? ", dataset: " : act_kind == ACTIVATIONS_NPZ ? ", array: " : ", tensor: ");
      yaml_append_quoted(suite, a_file.object);
    }
    precis_buf_append(suite, "}");
  } else {
    dist_yaml(suite, o->a);
  }
  if (layer->n_experts) /* a suite's file b is a whole 2-D tensor: one expert of a 3-D one is not expressible */
    precis_buf_appendf(suite, "\n    # b: expert %" PRId64 " of the fused tensor %s (import --model only)", layer->expert,
                       layer->tensor);
  precis_buf_append(suite, "\n    b: {dist: file, path: ");
  yaml_append_quoted(suite, layer->file);
  precis_buf_append(suite, ", tensor: ");
  yaml_append_quoted(suite, layer->tensor);
  precis_buf_appendf(suite, ", transpose: %s}\n    description: ", layer->in_major ? "false" : "true");
  yaml_append_quoted(suite, description);
  precis_buf_append(suite, "\n");
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of host memory", layer->name);
done:
  free(raw);
  free(file_a);
  free(b_original);
  free(a_original);
  free(a_file.object);
  free(a_file.path);
  free(description);
  free(source);
  free(info.a_dist);
  free(info.b_dist);
  free(info.reference);
  precis_workload_data_free(&data);
  return st;
}

precis_status precis_model_import(const precis_model *model, const precis_model_import_options *o, char dataset_id[65]) {
  if (o->tokens < 1 && !o->activations) return precis_fail(PRECIS_E_USAGE, "--tokens must be positive");
  activation_kind act_kind = ACTIVATIONS_HDF5;
  precis_status st = PRECIS_OK;
  if (o->activations && (st = activation_kind_of(o->activations, model->n_layers, &act_kind)) != PRECIS_OK) return st;
  activation_kind grad_kind = ACTIVATIONS_HDF5;
  if (o->gradients && !o->activations)
    return precis_fail(PRECIS_E_USAGE, "--gradients needs --activations: the gradients belong to the captured inputs, "
                                       "not to synthetic ones");
  if (o->gradients && (st = activation_kind_of(o->gradients, model->n_layers, &grad_kind)) != PRECIS_OK) {
    precis_error_prefix("--gradients");
    return st;
  }
  /* The estimate, before anything is written: the largest working set of one layer, with the
   * first layer's [samples, tokens] for every layer (a capture gives every layer the same). */
  int64_t est_samples = 0, est_m = o->tokens, est_batch = o->batch > 0 ? o->batch : 1;
  if (o->activations && model->n_layers) {
    if ((st = activation_rows(o, &model->layers[0], act_kind, &est_samples, &est_m)) != PRECIS_OK) return st;
    est_batch = o->batch > 0 ? o->batch : est_samples - o->calib;
  }
  if (est_batch >= 1 && model->n_layers) {
    size_t worst = 0;
    int64_t worst_block = 0;
    layer_memory worst_mem = {0};
    for (size_t i = 0; i < model->n_layers; i++) {
      const int64_t block = reference_block(&model->layers[i], o, est_samples, est_m, est_batch);
      if (block < 1) {
        char need[400], limit[32];
        const int64_t one = PRECIS_REFERENCE_BLOCK_ROWS < est_batch * est_m ? PRECIS_REFERENCE_BLOCK_ROWS : est_batch * est_m;
        const layer_memory r = layer_memory_of(&model->layers[i], o, est_samples, est_m, est_batch, one);
        describe_layer_memory(&r, one, need, sizeof need);
        format_bytes(o->max_memory, limit, sizeof limit);
        return precis_fail(PRECIS_E_USAGE, "--max-memory %s: layer %s needs at least %s", limit, model->layers[i].name,
                           need);
      }
      const layer_memory r = layer_memory_of(&model->layers[i], o, est_samples, est_m, est_batch, block);
      if (r.total > worst_mem.total) worst = i, worst_mem = r, worst_block = block;
    }
    if (o->progress) {
      char text[400];
      describe_layer_memory(&worst_mem, worst_block, text, sizeof text);
      fprintf(stderr, "precis import: %zu layers, %" PRId64 " held-out samples x %" PRId64 " tokens; peak memory ≈ %s at "
                      "layer %s (one layer at a time; the process's own baseline comes on top)\n",
              model->n_layers, est_batch, est_m, text, model->layers[worst].name);
    }
  }
  precis_dataset_write_options wopt = {o->force, o->gzip_level};
  precis_dataset_writer *writer = NULL;
  if ((st = precis_dataset_writer_open(o->output, &wopt, &writer)) != PRECIS_OK) return st;
  progress_bar bar = {o->progress, o->progress && isatty(2), model->n_layers};
  stored_inputs inputs = {0, NULL, NULL};
  precis_sha256 hash;
  precis_dataset_id_begin(&hash, o->seed, model->n_layers);
  precis_buf suite;
  precis_buf_init(&suite);
  precis_buf_append(&suite, "# precis import --model ");
  for (const char *c = model->path; *c; c++) precis_buf_appendf(&suite, "%c", *c == '\n' || *c == '\r' ? ' ' : *c);
  precis_buf_appendf(&suite, ": the suite equivalent to this import (F8_E4M3 weights are read by import only)\n"
                             "%sseed: %" PRIu64 "\nworkloads:\n",
                     o->converted ? "# b holds the converted checkpoint's weights (--converted), which this suite cannot\n"
                                    "# express: it rebuilds the original weights, and the same c_ref\n"
                                  : "",
                     o->seed);
  for (size_t i = 0; i < model->n_layers; i++) {
    if (precis_interrupt_signal) {
      st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted; %s was not written", o->output);
      goto failed;
    }
    progress_step(&bar, i, &model->layers[i]);
    if ((st = import_layer(&model->layers[i], o, act_kind, grad_kind, writer, &hash, &suite, &inputs)) != PRECIS_OK)
      goto failed;
  }
  if (bar.tty) fprintf(stderr, "\r\033[K");
  char *suite_text = precis_buf_take(&suite);
  if (!suite_text) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto failed;
  }
  char id[65], created[32], generator[128];
  precis_dataset_id_finish(&hash, id);
  time_t now = time(NULL);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  snprintf(generator, sizeof generator, "precis %s (commit %s)", PRECIS_VERSION, PRECIS_COMMIT);
  precis_dataset_root_attrs root = {generator, created, o->seed, suite_text, id, o->model_config};
  st = precis_dataset_writer_commit(writer, &root);
  free(suite_text);
  inputs_free(&inputs);
  if (st == PRECIS_OK && dataset_id) memcpy(dataset_id, id, 65);
  return st;
failed:
  if (bar.tty) fprintf(stderr, "\n");
  inputs_free(&inputs);
  precis_buf_free(&suite);
  precis_dataset_writer_abort(writer);
  return st;
}
