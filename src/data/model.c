#include "model.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
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
#include "numerics/format.h"
#include "generate.h"
#include "precis_version.h"
#include "rng.h"
#include "safetensors.h"

/* ------------------------------------------------------------------ discovery */

void precis_model_free(precis_model *m) {
  for (size_t i = 0; i < m->n_layers; i++) {
    free(m->layers[i].name);
    free(m->layers[i].file);
    free(m->layers[i].tensor);
  }
  free(m->layers);
  free(m->path);
  memset(m, 0, sizeof *m);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool is_directory(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Digits compare as numbers, so that layer.2 comes before layer.10. */
static int natural_compare(const char *a, const char *b) {
  while (*a && *b) {
    if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
      while (*a == '0' && a[1] >= '0' && a[1] <= '9') a++;
      while (*b == '0' && b[1] >= '0' && b[1] <= '9') b++;
      size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
      if (na != nb) return na < nb ? -1 : 1;
      int c = strncmp(a, b, na);
      if (c) return c;
      a += na;
      b += nb;
    } else {
      if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
      a++;
      b++;
    }
  }
  return *a ? 1 : *b ? -1 : 0;
}

static int layer_order(const void *pa, const void *pb) {
  const precis_model_layer *a = pa, *b = pb;
  int c = natural_compare(a->name, b->name);
  return c ? c : strcmp(a->name, b->name);
}

static bool matches_any(const char *name, const char *const *globs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fnmatch(globs[i], name, 0) == 0) return true;
  return false;
}

static bool linear_dtype(const char *dtype) {
  return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F8_E4M3");
}

typedef struct discovery {
  const char *const *include, *const *exclude;
  size_t n_include, n_exclude;
  precis_model *model;
  size_t cap;
  bool all_tensors; /* every tensor of rank <= 2, unfiltered (a converted checkpoint) */
} discovery;

/* Adds the linear layers of one file. A shard's tensors are taken from the file itself (a name
 * lookup in a large index per tensor would be quadratic); a weight found in two shards is refused
 * after the scan. */
static precis_status scan_file(discovery *d, const char *path) {
  precis_safetensors sf;
  precis_status st = precis_safetensors_open(path, &sf);
  if (st != PRECIS_OK) return st;
  for (size_t i = 0; i < sf.n_tensors && st == PRECIS_OK; i++) {
    const precis_st_tensor *t = &sf.tensors[i];
    d->model->n_tensors++;
    char *name = NULL;
    if (d->all_tensors) {
      /* A converted checkpoint: every tensor is looked up by name later (weights and scales). */
      if (t->rank > 2 || !(name = precis_strdup(t->name))) {
        if (t->rank > 2) continue;
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        break;
      }
    } else {
      if (!ends_with(t->name, ".weight") || t->rank != 2 || !linear_dtype(t->dtype)) continue;
      size_t len = strlen(t->name) - strlen(".weight");
      if (len == 0) continue;
      name = precis_asprintf("%.*s", (int)len, t->name);
      if (!name) {
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        break;
      }
      bool chosen = d->n_include ? matches_any(name, d->include, d->n_include) : strstr(name, "embed") == NULL;
      if (!chosen || matches_any(name, d->exclude, d->n_exclude) || t->shape[0] <= 0 || t->shape[1] <= 0) {
        free(name);
        continue;
      }
    }
    int64_t rows = t->rank >= 1 ? t->shape[0] : 1, cols = t->rank == 2 ? t->shape[1] : 1;
    if (rows > INT32_MAX || cols > INT32_MAX) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": [%" PRId64 ", %" PRId64 "] has a dimension above 2^31-1", path,
                       t->name, rows, cols);
      free(name);
      break;
    }
    if (d->model->n_layers == d->cap) {
      size_t cap = d->cap ? 2 * d->cap : 64;
      precis_model_layer *grown = realloc(d->model->layers, cap * sizeof *grown);
      if (!grown) {
        free(name);
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        break;
      }
      d->model->layers = grown;
      d->cap = cap;
    }
    precis_model_layer *layer = &d->model->layers[d->model->n_layers++];
    memset(layer, 0, sizeof *layer);
    layer->name = name;
    layer->file = precis_strdup(path);
    layer->tensor = precis_strdup(t->name);
    snprintf(layer->dtype, sizeof layer->dtype, "%s", t->dtype);
    layer->out_features = rows;
    layer->in_features = cols;
    layer->rank = t->rank;
    layer->bytes = t->end - t->begin;
    if (!layer->file || !layer->tensor) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  precis_safetensors_close(&sf);
  return st;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? precis_asprintf("%.*s", (int)(slash - path), path) : precis_strdup(".");
}

/* ------------------------------------------------------------------ layout */

static const char *const conv1d_layers[] = {"*c_attn", "*c_proj", "*c_fc"};
static const char *const gpt2_lookups[] = {"*wte", "*wpe"};
static const struct {
  const char *model_type;
  const char *const *lookups;
  size_t n_lookups;
} conv1d_models[] = {
    {"gpt2", gpt2_lookups, 2},
    {"openai-gpt", NULL, 0}, /* its tables, tokens_embed and positions_embed, already say "embed" */
};

precis_status precis_model_read_layout(const char *path, precis_model_layout *out) {
  memset(out, 0, sizeof *out);
  char *dir = is_directory(path) ? precis_strdup(path) : dir_of(path);
  char *config = dir ? precis_asprintf("%s/config.json", dir) : NULL, *text = NULL;
  size_t size = 0;
  cJSON *doc = NULL;
  precis_status st = PRECIS_OK;
  if (!config) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (!precis_path_exists(config)) goto done;
  if ((st = precis_read_file(config, &text, &size)) != PRECIS_OK) goto done;
  if (!(doc = cJSON_ParseWithLength(text, size))) {
    st = precis_fail(PRECIS_E_INPUT, "%s: not valid JSON (it is read for model_type; remove or fix it)", config);
    goto done;
  }
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
  if (!cJSON_IsString(type)) goto done;
  snprintf(out->model_type, sizeof out->model_type, "%s", type->valuestring);
  for (size_t i = 0; i < sizeof conv1d_models / sizeof conv1d_models[0]; i++)
    if (strcmp(type->valuestring, conv1d_models[i].model_type) == 0) {
      out->in_major = conv1d_layers;
      out->n_in_major = sizeof conv1d_layers / sizeof conv1d_layers[0];
      out->lookups = conv1d_models[i].lookups;
      out->n_lookups = conv1d_models[i].n_lookups;
    }
done:
  cJSON_Delete(doc);
  free(text);
  free(config);
  free(dir);
  return st;
}

size_t precis_model_mark_in_major(precis_model *model, const char *const *globs, size_t n_globs) {
  size_t marked = 0;
  for (size_t i = 0; i < model->n_layers; i++) {
    precis_model_layer *layer = &model->layers[i];
    if (layer->in_major || !matches_any(layer->name, globs, n_globs)) continue;
    int64_t stored_rows = layer->out_features;
    layer->out_features = layer->in_features;
    layer->in_features = stored_rows;
    layer->in_major = true;
    marked++;
  }
  return marked;
}

static precis_status scan_index(discovery *d, const char *index_path) {
  char *text = NULL, *dir = NULL;
  size_t size = 0, n_files = 0, cap_files = 0;
  const char **files = NULL; /* distinct shard names, pointing into the JSON tree */
  cJSON *root = NULL;
  precis_status st = precis_read_file(index_path, &text, &size);
  if (st != PRECIS_OK) return st;
  root = cJSON_ParseWithLength(text, size);
  const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
  if (!cJSON_IsObject(map)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: expected a JSON object with a \"weight_map\" object {tensor: file}", index_path);
    goto done;
  }
  dir = dir_of(index_path);
  if (!dir) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  /* Each distinct file once, in the order the map first names it. */
  for (const cJSON *entry = map->child; entry && st == PRECIS_OK; entry = entry->next) {
    if (!cJSON_IsString(entry)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: weight_map[\"%s\"]: expected a file name", index_path, entry->string);
      break;
    }
    const char *file = entry->valuestring;
    if (!file[0] || file[0] == '/' || strstr(file, "..")) {
      st = precis_fail(PRECIS_E_INPUT, "%s: weight_map[\"%s\"]: \"%s\" is not a file name next to the index", index_path,
                       entry->string, file);
      break;
    }
    bool seen = false;
    for (size_t i = 0; i < n_files && !seen; i++) seen = strcmp(files[i], file) == 0;
    if (seen) continue;
    if (n_files == cap_files) {
      cap_files = cap_files ? 2 * cap_files : 16;
      const char **grown = realloc(files, cap_files * sizeof *grown);
      if (!grown) {
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        break;
      }
      files = grown;
    }
    files[n_files++] = file;
    char *path = precis_asprintf("%s/%s", dir, file);
    if (!path) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      break;
    }
    st = scan_file(d, path);
    if (st != PRECIS_OK) precis_error_prefix("%s (shard of %s)", file, index_path);
    free(path);
  }
done:
  free(files);
  cJSON_Delete(root);
  free(text);
  free(dir);
  return st;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static precis_status scan_directory(discovery *d, const char *dir_path) {
  DIR *dir = opendir(dir_path);
  if (!dir) return precis_fail(PRECIS_E_INPUT, "%s: cannot open the directory: %s", dir_path, strerror(errno));
  char **files = NULL, *index = NULL;
  size_t n = 0, cap = 0;
  precis_status st = PRECIS_OK;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    if (ends_with(e->d_name, ".safetensors.index.json")) {
      /* The conventional name first; otherwise the first in name order. */
      if (!index || strcmp(e->d_name, "model.safetensors.index.json") == 0 ||
          (strcmp(index, "model.safetensors.index.json") != 0 && strcmp(e->d_name, index) < 0)) {
        free(index);
        index = precis_strdup(e->d_name);
      }
    } else if (ends_with(e->d_name, ".safetensors")) {
      if (n == cap) {
        cap = cap ? 2 * cap : 16;
        char **grown = realloc(files, cap * sizeof *grown);
        if (!grown) {
          st = precis_fail(PRECIS_E_NOMEM, "out of memory");
          break;
        }
        files = grown;
      }
      if (!(files[n++] = precis_strdup(e->d_name))) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    }
  }
  closedir(dir);
  if (st == PRECIS_OK) {
    if (index) {
      char *path = precis_asprintf("%s/%s", dir_path, index);
      st = path ? scan_index(d, path) : precis_fail(PRECIS_E_NOMEM, "out of memory");
      free(path);
    } else if (n == 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: no *.safetensors file and no *.safetensors.index.json in this directory", dir_path);
    } else {
      qsort(files, n, sizeof *files, compare_strings);
      for (size_t i = 0; i < n && st == PRECIS_OK; i++) {
        char *path = precis_asprintf("%s/%s", dir_path, files[i]);
        st = path ? scan_file(d, path) : precis_fail(PRECIS_E_NOMEM, "out of memory");
        free(path);
      }
    }
  }
  for (size_t i = 0; i < n; i++) free(files[i]);
  free(files);
  free(index);
  return st;
}

static precis_status scan(discovery *d, const char *path) {
  if (!precis_path_exists(path)) return precis_fail(PRECIS_E_INPUT, "%s: no such file or directory", path);
  if (is_directory(path)) return scan_directory(d, path);
  if (ends_with(path, ".json")) return scan_index(d, path);
  return scan_file(d, path);
}

precis_status precis_model_discover(const char *path, const char *const *include, size_t n_include,
                                    const char *const *exclude, size_t n_exclude, precis_model *out) {
  memset(out, 0, sizeof *out);
  discovery d = {include, exclude, n_include, n_exclude, out, 0, false};
  precis_status st = scan(&d, path);
  if (st == PRECIS_OK && !(out->path = precis_strdup(path))) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
  if (st == PRECIS_OK) {
    qsort(out->layers, out->n_layers, sizeof *out->layers, layer_order);
    for (size_t i = 1; i < out->n_layers && st == PRECIS_OK; i++)
      if (strcmp(out->layers[i].name, out->layers[i - 1].name) == 0)
        st = precis_fail(PRECIS_E_INPUT, "layer %s: its weight is in two files (%s and %s)", out->layers[i].name,
                         out->layers[i - 1].file, out->layers[i].file);
  }
  if (st == PRECIS_OK && out->n_layers == 0)
    st = precis_fail(PRECIS_E_INPUT,
                     "%s: no linear layer found among %zu tensors (expected 2-D \"<module>.weight\" tensors in F32, F16, "
                     "BF16 or F8_E4M3%s)",
                     path, out->n_tensors, n_include || n_exclude ? " matching --layers and not --exclude" : "");
  if (st != PRECIS_OK) precis_model_free(out);
  return st;
}

precis_status precis_model_tensors(const char *path, precis_model *out) {
  memset(out, 0, sizeof *out);
  discovery d = {NULL, NULL, 0, 0, out, 0, true};
  precis_status st = scan(&d, path);
  if (st == PRECIS_OK && !(out->path = precis_strdup(path))) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
  if (st != PRECIS_OK) precis_model_free(out);
  return st;
}

static const precis_model_layer *find_tensor(const precis_model *m, const char *name) {
  for (size_t i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].name, name) == 0) return &m->layers[i];
  return NULL;
}

/* ------------------------------------------------------------------ import */

/* The weight's bytes as stored, for the SHA-256 and the conversion. */
static precis_status read_weight(const precis_model_layer *layer, uint8_t **raw) {
  precis_safetensors sf;
  precis_status st = precis_safetensors_open(layer->file, &sf);
  if (st != PRECIS_OK) return st;
  const precis_st_tensor *t = precis_safetensors_find(&sf, layer->tensor);
  FILE *fp = NULL;
  *raw = NULL;
  if (!t || t->end - t->begin != layer->bytes) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\" changed since the layers were listed", layer->file, layer->tensor);
    goto done;
  }
  *raw = malloc(layer->bytes ? layer->bytes : 1);
  if (!*raw) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: tensor \"%s\": out of memory (%" PRIu64 " bytes)", layer->file, layer->tensor,
                     layer->bytes);
    goto done;
  }
  fp = fopen(layer->file, "rb");
  if (!fp || fseeko(fp, (off_t)(sf.data_start + t->begin), SEEK_SET) != 0 || fread(*raw, 1, layer->bytes, fp) != layer->bytes)
    st = precis_fail(PRECIS_E_IO, "%s: tensor \"%s\": cannot read %" PRIu64 " bytes", layer->file, layer->tensor, layer->bytes);
done:
  if (fp) fclose(fp);
  if (st != PRECIS_OK) {
    free(*raw);
    *raw = NULL;
  }
  precis_safetensors_close(&sf);
  return st;
}

static float decode(const uint8_t *raw, const char *dtype, uint64_t i) {
  if (dtype[0] == 'F' && dtype[1] == '3') {
    uint32_t bits = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
                    (uint32_t)raw[4 * i + 3] << 24;
    float v;
    memcpy(&v, &bits, 4);
    return v;
  }
  if (strcmp(dtype, "F8_E4M3") == 0) return precis_e4m3_bits_to_f32(raw[i]);
  if (strcmp(dtype, "I8") == 0) return (float)(int8_t)raw[i];
  uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
  return strcmp(dtype, "F16") == 0 ? precis_f16_bits_to_f32(h) : precis_bf16_bits_to_f32(h);
}

static char *yaml_quote(const char *s) {
  size_t len = strlen(s);
  char *out = malloc(4 * len + 3), *p = out;
  if (!out) return NULL;
  *p++ = '"';
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      *p++ = '\\';
      *p++ = (char)*c;
    } else if (*c < 0x20 || *c == 0x7f) {
      p += sprintf(p, "\\x%02x", *c);
    } else {
      *p++ = (char)*c;
    }
  }
  *p++ = '"';
  *p = '\0';
  return out;
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
  char *q = yaml_quote(s);
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

static int64_t read_int(const uint8_t *raw, const char *dtype, uint64_t i) {
  if (strcmp(dtype, "I8") == 0) return (int8_t)raw[i];
  if (strcmp(dtype, "I32") == 0) {
    uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
                 (uint32_t)raw[4 * i + 3] << 24;
    return (int32_t)u;
  }
  uint64_t u = 0;
  for (int b = 7; b >= 0; b--) u = u << 8 | raw[8 * i + (uint64_t)b];
  return (int64_t)u;
}

static bool is_float_dtype(const char *dtype) { return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16"); }

/* The value stored at (row, col) of a tensor packed by compressed-tensors' pack_to_int32: each
 * int32 holds 32/bits values along `packed_dim`, the first in the lowest bits, each stored as the
 * signed value plus 2^(bits-1). */
static int64_t unpack_value(const uint8_t *raw, int64_t cols_stored, int bits, int packed_dim, int64_t row, int64_t col) {
  const int64_t per_word = 32 / bits;
  const int64_t word_row = packed_dim == 0 ? row / per_word : row, word_col = packed_dim == 1 ? col / per_word : col;
  const int64_t slot = packed_dim == 0 ? row % per_word : col % per_word;
  const uint32_t word = (uint32_t)read_int(raw, "I32", (uint64_t)(word_row * cols_stored + word_col));
  return (int64_t)((word >> (bits * slot)) & ((1u << bits) - 1u)) - ((int64_t)1 << (bits - 1));
}

/* A layer of a compressed-tensors "pack-quantized" checkpoint (what llm-compressor saves for its
 * W4A16 / W8A16 schemes), dequantized to float32 [out, in]. Read as compressed-tensors'
 * PackedQuantizationCompressor writes and decompress_module reads it
 * (compressed_tensors/compressors/quantized_compressors/pack_quantized.py):
 *   <layer>.weight_packed     I32 [out, ceil(in / (32/bits))]: q = ((w >> bits*(c mod 32/bits)) & mask)
 *                             - 2^(bits-1) for column c in word c div (32/bits); bits is 4 or 8,
 *                             inferred from the packed width;
 *   <layer>.weight_shape      I64/I32 [2] = [out, in] (checked against the original);
 *   <layer>.weight_scale      F32/F16/BF16 [out, G] (G groups of in/G columns; G = 1 per channel),
 *                             [out] or one value;
 *   <layer>.weight_zero_point optional (absent when symmetric): I32 [ceil(out / (32/bits)), G]
 *                             packed along the rows (pack_to_int32(..., packed_dim=0)), or I8
 *                             [out, G] / one value unpacked;
 *   <layer>.weight_g_idx      optional (activation ordering): I32/I64 [in], the group of each
 *                             column; -1 entries mean column order.
 * w = (q - zero_point) * scale, the product rounded once to float32 (exact for F16/BF16 scales;
 * compressed-tensors rounds it to the scale's dtype instead). */
static precis_status packed_weight(const precis_model *conv, const precis_model_layer *layer, float **out, char *what,
                                   size_t what_len) {
  *out = NULL;
  const int64_t n_out = layer->out_features, n_in = layer->in_features;
  char *names[5] = {precis_asprintf("%s.weight_packed", layer->name), precis_asprintf("%s.weight_shape", layer->name),
                    precis_asprintf("%s.weight_scale", layer->name), precis_asprintf("%s.weight_zero_point", layer->name),
                    precis_asprintf("%s.weight_g_idx", layer->name)};
  uint8_t *raw = NULL, *sraw = NULL, *zraw = NULL, *graw = NULL, *shraw = NULL;
  float *w = NULL;
  int64_t *group_of = NULL;
  precis_status st = PRECIS_OK;
  for (int i = 0; i < 5; i++)
    if (!names[i]) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto done;
    }
  const precis_model_layer *p = find_tensor(conv, names[0]), *sh = find_tensor(conv, names[1]),
                           *s = find_tensor(conv, names[2]), *z = find_tensor(conv, names[3]),
                           *g = find_tensor(conv, names[4]);
  if (strcmp(p->dtype, "I32") || p->rank != 2 || p->out_features != n_out) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", in/8] (compressed-tensors pack-quantized), "
                     "found %s [%" PRId64 ", %" PRId64 "]", p->file, names[0], n_out, p->dtype, p->out_features, p->in_features);
    goto done;
  }
  const int64_t cols = p->in_features;
  const bool fits4 = cols == (n_in + 7) / 8, fits8 = cols == (n_in + 3) / 4;
  if (fits4 == fits8) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "] %s for in_features = %" PRId64
                     " (expected [%" PRId64 ", %" PRId64 "] for 4-bit values, 8 per int32, or [%" PRId64 ", %" PRId64
                     "] for 8-bit, 4 per int32)", p->file, names[0], n_out, cols, fits4 ? "is ambiguous" : "does not fit",
                     n_in, n_out, (n_in + 7) / 8, n_out, (n_in + 3) / 4);
    goto done;
  }
  const int bits = fits4 ? 4 : 8;
  if (sh) {
    if ((strcmp(sh->dtype, "I64") && strcmp(sh->dtype, "I32")) || sh->rank != 1 || sh->out_features != 2) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I64 [2] (the unpacked [out, in]), found %s of %" PRId64
                       " elements", sh->file, names[1], sh->dtype, sh->out_features * sh->in_features);
      goto done;
    }
    if ((st = read_weight(sh, &shraw)) != PRECIS_OK) goto done;
    int64_t so = read_int(shraw, sh->dtype, 0), si = read_int(shraw, sh->dtype, 1);
    if (so != n_out || si != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "], but the original weight is [%" PRId64
                       ", %" PRId64 "]", sh->file, names[1], so, si, n_out, n_in);
      goto done;
    }
  }
  if (!s) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s for the packed weight %s", conv->path, names[2], names[0]);
    goto done;
  }
  const uint64_t n_scale = (uint64_t)s->out_features * (uint64_t)s->in_features;
  const bool per_tensor = n_scale == 1 && s->rank < 2;
  const int64_t n_groups = per_tensor ? 1 : s->rank == 2 ? s->in_features : 1;
  if (!is_float_dtype(s->dtype) || (!per_tensor && s->out_features != n_out) || n_groups < 1 || n_groups > n_in) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected F32/F16/BF16 [%" PRId64 ", G] (G groups of in_features/G "
                     "columns), [%" PRId64 "] or one value; found %s [%" PRId64 ", %" PRId64 "]",
                     s->file, names[2], n_out, n_out, s->dtype, s->out_features, s->in_features);
    goto done;
  }
  /* The group of each column: consecutive runs of in/G columns, or weight_g_idx. */
  group_of = malloc((uint64_t)n_in * sizeof *group_of);
  if (!group_of) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  bool ordered = false;
  if (g) {
    if ((strcmp(g->dtype, "I32") && strcmp(g->dtype, "I64")) || g->rank != 1 || g->out_features != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 "] (the group of each input column), found %s "
                       "of %" PRId64 " elements", g->file, names[4], n_in, g->dtype, g->out_features * g->in_features);
      goto done;
    }
    if ((st = read_weight(g, &graw)) != PRECIS_OK) goto done;
    ordered = true;
    for (int64_t c = 0; c < n_in && ordered; c++) ordered = read_int(graw, g->dtype, (uint64_t)c) != -1;
    for (int64_t c = 0; c < n_in && ordered; c++) {
      group_of[c] = read_int(graw, g->dtype, (uint64_t)c);
      if (group_of[c] < 0 || group_of[c] >= n_groups) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element %" PRId64 " is %" PRId64 ", expected a group 0 .. %" PRId64,
                         g->file, names[4], c, group_of[c], n_groups - 1);
        goto done;
      }
    }
  }
  if (!ordered) {
    if (n_in % n_groups) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %" PRId64 " groups do not divide in_features = %" PRId64
                       " (compressed-tensors requires groups of equal size)", s->file, names[2], n_groups, n_in);
      goto done;
    }
    for (int64_t c = 0; c < n_in; c++) group_of[c] = c / (n_in / n_groups);
  }
  /* Zero points: packed I32 along the rows, or plain I8. */
  int zp_packed = -1; /* -1: none, 0: I8 values, 1: packed */
  if (z) {
    const uint64_t n_zp = (uint64_t)z->out_features * (uint64_t)z->in_features;
    const int64_t per_word = 32 / bits;
    if (!strcmp(z->dtype, "I32") && z->rank == 2 && z->out_features == (n_out + per_word - 1) / per_word &&
        z->in_features == n_groups)
      zp_packed = 1;
    else if (!strcmp(z->dtype, "I8") && (n_zp == 1 || (z->out_features == n_out && n_zp == (uint64_t)(n_out * n_groups))))
      zp_packed = 0;
    else {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", %" PRId64 "] (packed along the rows) or I8 "
                       "[%" PRId64 ", %" PRId64 "]; found %s [%" PRId64 ", %" PRId64 "]", z->file, names[3],
                       (n_out + per_word - 1) / per_word, n_groups, n_out, n_groups, z->dtype, z->out_features,
                       z->in_features);
      goto done;
    }
    if ((st = read_weight(z, &zraw)) != PRECIS_OK) goto done;
  }
  if ((st = read_weight(s, &sraw)) != PRECIS_OK || (st = read_weight(p, &raw)) != PRECIS_OK) goto done;
  w = malloc((uint64_t)n_out * (uint64_t)n_in * sizeof *w);
  if (!w) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  const uint64_t n_zp_values = z ? (uint64_t)z->out_features * (uint64_t)z->in_features : 0;
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++) {
      const int64_t grp = group_of[c];
      int64_t zp = 0;
      if (zp_packed == 1) zp = unpack_value(zraw, n_groups, bits, 0, r, grp);
      else if (zp_packed == 0) zp = read_int(zraw, "I8", n_zp_values == 1 ? 0 : (uint64_t)(r * n_groups + grp));
      const int64_t q = unpack_value(raw, cols, bits, 1, r, c);
      const float scale = decode(sraw, s->dtype, per_tensor ? 0 : (uint64_t)(r * n_groups + grp));
      const float v = (float)(q - zp) * scale;
      if (!isfinite(v)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element [%" PRId64 ", %" PRId64 "] dequantizes to a non-finite value",
                         p->file, names[0], r, c);
        goto done;
      }
      w[(uint64_t)r * (uint64_t)n_in + (uint64_t)c] = v;
    }
  if (per_tensor) snprintf(what, what_len, "INT%d packed x per-tensor %s%s", bits, s->dtype, z ? ", zero points" : "");
  else if (n_groups == 1) snprintf(what, what_len, "INT%d packed x per-channel %s%s", bits, s->dtype, z ? ", zero points" : "");
  else
    snprintf(what, what_len, "INT%d packed x %s scales, %" PRId64 " groups of %" PRId64 " columns%s%s", bits, s->dtype,
             n_groups, n_in / n_groups, ordered ? " (weight_g_idx)" : "", z ? ", zero points" : "");
  *out = w;
  w = NULL;
done:
  free(w);
  free(group_of);
  free(raw);
  free(sraw);
  free(zraw);
  free(graw);
  free(shraw);
  for (int i = 0; i < 5; i++) free(names[i]);
  return st;
}

/* A converted checkpoint's weight for a layer, dequantized to float32 [out, in]: the stored values
 * (F8_E4M3 or I8, or a float dtype for a layer left unconverted) times `<layer>.weight_scale` (one
 * value, or one per output channel: [out] or [out, 1]), each product rounded once to float32, as a
 * kernel that dequantizes in float32 computes it. Group-wise scales on unpacked weights are refused;
 * a layer stored as <layer>.weight_packed is read by packed_weight. */
static precis_status converted_weight(const precis_model *conv, const precis_model_layer *layer, float **out,
                                      char *what, size_t what_len) {
  *out = NULL;
  char *wname = precis_asprintf("%s.weight", layer->name), *sname = precis_asprintf("%s.weight_scale", layer->name);
  uint8_t *raw = NULL, *sraw = NULL;
  float *w = NULL;
  precis_status st = PRECIS_OK;
  if (!wname || !sname) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  const precis_model_layer *t = find_tensor(conv, wname), *s = find_tensor(conv, sname);
  if (!t) {
    char *packed = precis_asprintf("%s.weight_packed", layer->name);
    bool has_packed = packed && find_tensor(conv, packed);
    free(packed);
    if (has_packed) {
      st = packed_weight(conv, layer, out, what, what_len);
      goto done;
    }
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s or %s_packed (the converted checkpoint lacks layer %s)", conv->path,
                     wname, wname, layer->name);
    goto done;
  }
  if (t->rank != 2 || t->out_features != layer->out_features || t->in_features != layer->in_features) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected [%" PRId64 ", %" PRId64 "] as in the original, found [%" PRId64
                     ", %" PRId64 "]", t->file, wname, layer->out_features, layer->in_features, t->out_features,
                     t->in_features);
    goto done;
  }
  bool quantized = !strcmp(t->dtype, "F8_E4M3") || !strcmp(t->dtype, "I8");
  if (!quantized && !linear_dtype(t->dtype)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: dtype %s is not read (expected F8_E4M3 or I8 with a weight_scale, or "
                     "F32/F16/BF16)", t->file, wname, t->dtype);
    goto done;
  }
  uint64_t n_scale = 0;
  if (s) {
    if (strcmp(s->dtype, "F32") && strcmp(s->dtype, "F16") && strcmp(s->dtype, "BF16")) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected F32, F16 or BF16 scales, found %s", s->file, sname, s->dtype);
      goto done;
    }
    n_scale = (uint64_t)s->out_features * (uint64_t)s->in_features;
    if (n_scale != 1 && !(n_scale == (uint64_t)layer->out_features && s->in_features == 1)) {
      st = precis_fail(PRECIS_E_INPUT,
                       "%s: tensor %s: expected one scale or one per output channel ([%" PRId64 "] or [%" PRId64
                       ", 1]), found [%" PRId64 ", %" PRId64 "] (group-wise scales are not read)",
                       s->file, sname, layer->out_features, layer->out_features, s->out_features, s->in_features);
      goto done;
    }
    if ((st = read_weight(s, &sraw)) != PRECIS_OK) goto done;
  } else if (quantized) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s for the %s weight %s", conv->path, sname, t->dtype, wname);
    goto done;
  }
  if ((st = read_weight(t, &raw)) != PRECIS_OK) goto done;
  uint64_t count = (uint64_t)layer->out_features * (uint64_t)layer->in_features;
  w = malloc(count * sizeof *w);
  if (!w) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (uint64_t i = 0; i < count; i++) {
    float v = decode(raw, t->dtype, i);
    if (sraw) v *= decode(sraw, s->dtype, n_scale == 1 ? 0 : i / (uint64_t)layer->in_features);
    if (!isfinite(v)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element %" PRIu64 " dequantizes to a non-finite value", t->file, wname, i);
      goto done;
    }
    w[i] = v;
  }
  snprintf(what, what_len, "%s%s%s", t->dtype, !sraw ? "" : n_scale == 1 ? " x per-tensor " : " x per-channel ",
           sraw ? s->dtype : "");
  *out = w;
  w = NULL;
done:
  free(w);
  free(raw);
  free(sraw);
  free(wname);
  free(sname);
  return st;
}

static precis_status import_layer(const precis_model_layer *layer, const precis_model_import_options *o,
                                  activation_kind act_kind,
                                  precis_dataset_writer *writer, precis_sha256 *id_hash, precis_buf *suite) {
  precis_status st = PRECIS_OK;
  precis_workload_info info;
  memset(&info, 0, sizeof info);
  precis_workload_data data = {0};
  uint8_t *raw = NULL;
  float *file_a = NULL, *b_original = NULL;
  char converted_what[128] = "";
  char *description = NULL, *source = NULL;
  char kind[] = "gemm";
  const int64_t n = layer->out_features, k = layer->in_features;
  int64_t m = o->tokens, batch = o->batch > 0 ? o->batch : 1, samples = 0;
  precis_dist b_dist = {.kind = PRECIS_DIST_FILE, .path = layer->file, .object = layer->tensor, .transpose = !layer->in_major};
  precis_dist a_file = {.kind = PRECIS_DIST_FILE};

  if ((st = precis_dataset_check_name(layer->name)) != PRECIS_OK) goto done;
  if (layer->in_major && o->converted) {
    /* The converted formats' scales are per output row of an [out, in] weight. */
    st = precis_fail(PRECIS_E_USAGE, "layer %s: --converted reads [out, in] weights; this layer is stored [in, out] "
                                     "(--in-major): not supported",
                     layer->name);
    goto done;
  }
  /* Weights: SHA-256 of the stored bytes, then b = W^T in float32 (every source dtype widens exactly);
   * an input-major weight already is W^T. */
  if ((st = read_weight(layer, &raw)) != PRECIS_OK) goto done;
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
      float v = decode(raw, layer->dtype, stored);
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
    if ((st = converted_weight(o->converted, layer, &w, converted_what, sizeof converted_what)) != PRECIS_OK) goto done;
    b_original = data.b;
    data.b = malloc((uint64_t)k * (uint64_t)n * sizeof(float));
    if (!data.b) {
      free(w);
      goto nomem;
    }
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = 0; i < k; i++) data.b[(uint64_t)i * (uint64_t)n + (uint64_t)j] = w[(uint64_t)j * (uint64_t)k + (uint64_t)i];
    free(w);
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
  data.c_ref = malloc(c_count * sizeof(double));
  data.ab_abs = malloc(c_count * sizeof(double));
  if (o->calib > 0) data.calib_a = malloc(calib_count * sizeof(float));
  if (!data.a || !data.c_ref || !data.ab_abs || (o->calib > 0 && !data.calib_a)) goto nomem;
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
  st = precis_reference_compute(data.a, b_original ? b_original : data.b, batch, m, n, k, false, data.c_ref, data.ab_abs);
  precis_reference_release(); /* b's float64 copy is not held while the next layer is read */
  if (st != PRECIS_OK) {
    precis_error_prefix("layer %s", layer->name);
    goto done;
  }
  for (uint64_t i = 0; i < c_count; i++)
    if (!isfinite(data.c_ref[i])) {
      st = precis_fail(PRECIS_E_INPUT, "layer %s: the reference overflows float64 at element %" PRIu64, layer->name, i);
      goto done;
    }
  /* The dataset keeps the original weights next to the converted ones: c_ref is checked against them. */
  data.b_ref = b_original;
  b_original = NULL;

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
    if (wname) t = find_tensor(o->converted, wname);
    if (!t && pname) t = find_tensor(o->converted, pname);
    free(wname);
    free(pname);
    cJSON *c = cJSON_AddObjectToObject(src, "converted");
    cJSON_AddStringToObject(c, "file", t ? t->file : "");
    cJSON_AddStringToObject(c, "weights", converted_what);
  }
  source = cJSON_PrintUnformatted(src);
  cJSON_Delete(src);
  if (o->converted)
    description = precis_asprintf("linear layer %s: b = the converted weights (%s, dequantized to float32) from %s, transposed; "
                                  "c_ref from the original %s weight in %s",
                                  layer->name, converted_what, o->converted->path, layer->dtype, layer->file);
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
    info.b_dist = precis_asprintf("converted(path=%s, tensor=%s.weight%s, %s, transpose=true)", o->converted->path,
                                  layer->name, strstr(converted_what, "packed") ? "_packed" : "", converted_what);
    info.reference = precis_asprintf("%s, from a and the ORIGINAL weights (b holds the converted ones)",
                                     precis_reference_method());
  } else {
    info.b_dist = precis_dist_describe(&b_dist);
    info.reference = precis_strdup(precis_reference_method());
  }
  info.layer = layer->name;
  info.source = source;
  if (!source || !description || !info.a_dist || !info.b_dist || !info.reference) goto nomem;
  if ((st = precis_dataset_writer_add(writer, &info, &data)) != PRECIS_OK) goto done;
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
  precis_buf_append(suite, "\n    b: {dist: file, path: ");
  yaml_append_quoted(suite, layer->file);
  precis_buf_append(suite, ", tensor: ");
  yaml_append_quoted(suite, layer->tensor);
  precis_buf_append(suite, ", transpose: true}\n    description: ");
  yaml_append_quoted(suite, description);
  precis_buf_append(suite, "\n");
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of host memory", layer->name);
done:
  free(raw);
  free(file_a);
  free(b_original);
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
  precis_dataset_write_options wopt = {o->force, o->gzip_level};
  precis_dataset_writer *writer = NULL;
  if ((st = precis_dataset_writer_open(o->output, &wopt, &writer)) != PRECIS_OK) return st;
  progress_bar bar = {o->progress, o->progress && isatty(2), model->n_layers};
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
    if ((st = import_layer(&model->layers[i], o, act_kind, writer, &hash, &suite)) != PRECIS_OK) goto failed;
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
  precis_dataset_root_attrs root = {generator, created, o->seed, suite_text, id};
  st = precis_dataset_writer_commit(writer, &root);
  free(suite_text);
  if (st == PRECIS_OK && dataset_id) memcpy(dataset_id, id, 65);
  return st;
failed:
  if (bar.tty) fprintf(stderr, "\n");
  precis_buf_free(&suite);
  precis_dataset_writer_abort(writer);
  return st;
}
