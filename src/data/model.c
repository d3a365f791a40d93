#include "model.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "numerics/format.h"
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

bool precis_model_linear_dtype(const char *dtype) {
  return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16") || !strcmp(dtype, "F8_E4M3");
}

typedef struct discovery {
  const char *const *include, *const *exclude;
  size_t n_include, n_exclude;
  precis_model *model;
  size_t cap;
  bool all_tensors; /* every tensor of rank <= 2, unfiltered (a converted checkpoint) */
} discovery;

/* A fused mixture-of-experts weight (model.h): 3-D, a float dtype, "experts" in its name, not a bias. */
static bool fused_experts_tensor(const precis_st_tensor *t) {
  return t->rank == 3 && precis_model_linear_dtype(t->dtype) && strcmp(t->dtype, "F8_E4M3") != 0 && strstr(t->name, "experts") &&
         !ends_with(t->name, "bias") && t->shape[0] > 0 && t->shape[1] > 0 && t->shape[2] > 0;
}

static precis_status add_layer(discovery *d, const char *path, const precis_st_tensor *t, char *name, int64_t rows,
                               int64_t cols) {
  if (d->model->n_layers == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 64;
    precis_model_layer *grown = realloc(d->model->layers, cap * sizeof *grown);
    if (!grown) {
      free(name);
      return precis_fail(PRECIS_E_NOMEM, "out of memory");
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
  for (int i = 0; i < t->rank && i < 4; i++) layer->dims[i] = t->shape[i];
  if (!layer->file || !layer->tensor) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  return PRECIS_OK;
}

/* One layer per expert of a fused [experts, out, in] tensor, named "<tensor>[<e>]" (stored
 * [experts, in, out] is marked later, from config.json: precis_model_mark_experts_in_major). */
static precis_status add_experts(discovery *d, const char *path, const precis_st_tensor *t) {
  const uint64_t slice = (t->end - t->begin) / (uint64_t)t->shape[0];
  for (int64_t e = 0; e < t->shape[0]; e++) {
    char *name = precis_asprintf("%s[%" PRId64 "]", t->name, e);
    if (!name) return precis_fail(PRECIS_E_NOMEM, "out of memory");
    bool chosen = d->n_include ? matches_any(name, d->include, d->n_include) : true;
    if (!chosen || matches_any(name, d->exclude, d->n_exclude)) {
      free(name);
      continue;
    }
    precis_status st = add_layer(d, path, t, name, t->shape[1], t->shape[2]);
    if (st != PRECIS_OK) return st;
    precis_model_layer *layer = &d->model->layers[d->model->n_layers - 1];
    layer->n_experts = t->shape[0];
    layer->expert = e;
    layer->bytes = slice;
    layer->offset = (uint64_t)e * slice;
  }
  return PRECIS_OK;
}

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
      if (t->rank > 4) continue;
      if (!(name = precis_strdup(t->name))) {
        st = precis_fail(PRECIS_E_NOMEM, "out of memory");
        break;
      }
    } else if (fused_experts_tensor(t)) {
      if (t->shape[1] > INT32_MAX || t->shape[2] > INT32_MAX) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": [%" PRId64 ", %" PRId64 ", %" PRId64 "] has a dimension above "
                         "2^31-1", path, t->name, t->shape[0], t->shape[1], t->shape[2]);
        break;
      }
      st = add_experts(d, path, t);
      continue;
    } else {
      if (!ends_with(t->name, ".weight") || t->rank != 2 || !precis_model_linear_dtype(t->dtype)) continue;
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
    int64_t rows = t->rank >= 1 ? t->shape[0] : 1, cols = t->rank >= 2 ? t->shape[1] : 1;
    if (rows > INT32_MAX || cols > INT32_MAX) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": [%" PRId64 ", %" PRId64 "] has a dimension above 2^31-1", path,
                       t->name, rows, cols);
      free(name);
      break;
    }
    st = add_layer(d, path, t, name, rows, cols);
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
  out->tie_word_embeddings = -1;
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
  const cJSON *tie = cJSON_GetObjectItemCaseSensitive(doc, "tie_word_embeddings");
  out->tie_word_embeddings = cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : -1;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
  if (!cJSON_IsString(type)) goto done;
  snprintf(out->model_type, sizeof out->model_type, "%s", type->valuestring);
  /* transformers' GptOssExperts and Llama4TextExperts hold [experts, in, out] (x @ W[e]); its
   * Mixtral, Qwen-MoE and the others [experts, out, in] (F.linear). */
  static const char *const experts_in_major[] = {"gpt_oss", "llama4", "llama4_text"};
  for (size_t i = 0; i < sizeof experts_in_major / sizeof experts_in_major[0]; i++)
    if (strcmp(type->valuestring, experts_in_major[i]) == 0) out->experts_in_major = true;
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

precis_status precis_model_read_config(const char *path, char **out) {
  *out = NULL;
  char *dir = is_directory(path) ? precis_strdup(path) : dir_of(path);
  char *config = dir ? precis_asprintf("%s/config.json", dir) : NULL, *text = NULL;
  size_t size = 0;
  cJSON *doc = NULL, *kept = NULL;
  precis_status st = PRECIS_OK;
  if (!config) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (!precis_path_exists(config)) goto done;
  if ((st = precis_read_file(config, &text, &size)) != PRECIS_OK) goto done;
  if (!(doc = cJSON_ParseWithLength(text, size)) || !cJSON_IsObject(doc)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: not a JSON object (it is read for the model's shape; remove or fix it)", config);
    goto done;
  }
  const cJSON *from = doc, *text_config = cJSON_GetObjectItemCaseSensitive(doc, "text_config");
  if (!cJSON_GetObjectItemCaseSensitive(doc, "num_hidden_layers") && cJSON_IsObject(text_config)) from = text_config;
  static const char *const numbers[] = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                                        "hidden_size"};
  if (!(kept = cJSON_CreateObject())) goto nomem;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "model_type");
  if (cJSON_IsString(type) && !cJSON_AddStringToObject(kept, "model_type", type->valuestring)) goto nomem;
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(from, numbers[i]);
    if (cJSON_IsNumber(v) && !cJSON_AddNumberToObject(kept, numbers[i], v->valuedouble)) goto nomem;
  }
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(from, "torch_dtype");
  if (!cJSON_IsString(dtype)) dtype = cJSON_GetObjectItemCaseSensitive(doc, "torch_dtype");
  if (cJSON_IsString(dtype) && !cJSON_AddStringToObject(kept, "torch_dtype", dtype->valuestring)) goto nomem;
  /* plan reads these (DESIGN §21): a tied head's charge, the families of fused layers. */
  const cJSON *tie = cJSON_GetObjectItemCaseSensitive(doc, "tie_word_embeddings");
  if (!cJSON_IsBool(tie)) tie = cJSON_GetObjectItemCaseSensitive(from, "tie_word_embeddings");
  if (cJSON_IsBool(tie) && !cJSON_AddBoolToObject(kept, "tie_word_embeddings", cJSON_IsTrue(tie))) goto nomem;
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(doc, "architectures");
  if (cJSON_IsArray(archs) && !cJSON_AddItemToObject(kept, "architectures", cJSON_Duplicate(archs, true))) goto nomem;
  if (!(*out = cJSON_PrintUnformatted(kept))) goto nomem;
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "out of memory");
done:
  cJSON_Delete(kept);
  cJSON_Delete(doc);
  free(text);
  free(config);
  free(dir);
  return st;
}

bool precis_model_is_output_projection(const char *name) {
  return strcmp(name, "lm_head") == 0 || ends_with(name, ".lm_head");
}

precis_status precis_model_add_tied_head(precis_model *model, const precis_model *tensors, const char **from) {
  *from = NULL;
  static const char *const tables[] = {"embed_tokens.weight", "wte.weight", "word_embeddings.weight"};
  const precis_model_layer *table = NULL;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0] && !table; t++)
    for (size_t i = 0; i < tensors->n_layers && !table; i++) {
      const precis_model_layer *x = &tensors->layers[i];
      if (x->rank == 2 && precis_model_linear_dtype(x->dtype) && ends_with(x->name, tables[t]) &&
          (strlen(x->name) == strlen(tables[t]) || x->name[strlen(x->name) - strlen(tables[t]) - 1] == '.'))
        table = x;
    }
  if (!table) return PRECIS_OK;
  precis_model_layer *grown = realloc(model->layers, (model->n_layers + 1) * sizeof *grown);
  if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  model->layers = grown;
  precis_model_layer *head = &model->layers[model->n_layers];
  *head = *table;
  head->in_major = false; /* an embedding table is [vocab, hidden]: the head's [out, in] */
  head->name = precis_strdup("lm_head");
  head->file = precis_strdup(table->file);
  head->tensor = precis_strdup(table->name);
  if (!head->name || !head->file || !head->tensor) {
    free(head->name), free(head->file), free(head->tensor);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  model->n_layers++;
  *from = table->name;
  return PRECIS_OK;
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

size_t precis_model_mark_experts_in_major(precis_model *model) {
  size_t marked = 0;
  for (size_t i = 0; i < model->n_layers; i++) {
    precis_model_layer *layer = &model->layers[i];
    if (layer->in_major || !layer->n_experts) continue;
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

size_t precis_model_quantized_tensors(const precis_model *tensors, char *example, size_t len) {
  static const char *const suffixes[] = {".weight_scale", ".weight_scale_inv", ".weight_packed", ".weight_global_scale",
                                         ".weight_scale_2", ".input_scale", "_blocks", ".weight_zero_point"};
  size_t count = 0;
  if (len) example[0] = '\0';
  for (size_t i = 0; i < tensors->n_layers; i++) {
    const precis_model_layer *t = &tensors->layers[i];
    bool quantized = ends_with(t->name, ".weight") && t->rank == 2 &&
                     !strcmp(t->dtype, "I8");
    for (size_t j = 0; j < sizeof suffixes / sizeof suffixes[0] && !quantized; j++) quantized = ends_with(t->name, suffixes[j]);
    if (!quantized) continue;
    if (count++ == 0 && len) snprintf(example, len, "%s (%s)", t->name, t->dtype);
  }
  return count;
}

const precis_model_layer *precis_model_find_tensor(const precis_model *m, const char *name) {
  for (size_t i = 0; i < m->n_layers; i++)
    if (strcmp(m->layers[i].name, name) == 0) return &m->layers[i];
  return NULL;
}

/* ------------------------------------------------------------------ the weights */

/* The weight's bytes as stored, for the SHA-256 and the conversion. */
precis_status precis_model_read_raw(const precis_model_layer *layer, uint8_t **raw) {
  precis_safetensors sf;
  precis_status st = precis_safetensors_open(layer->file, &sf);
  if (st != PRECIS_OK) return st;
  const precis_st_tensor *t = precis_safetensors_find(&sf, layer->tensor);
  FILE *fp = NULL;
  *raw = NULL;
  if (!t || (layer->n_experts ? layer->offset + layer->bytes > t->end - t->begin : t->end - t->begin != layer->bytes)) {
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
  if (!fp || fseeko(fp, (off_t)(sf.data_start + t->begin + layer->offset), SEEK_SET) != 0 || fread(*raw, 1, layer->bytes, fp) != layer->bytes)
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

float precis_model_decode(const uint8_t *raw, const char *dtype, uint64_t i) {
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

precis_status precis_model_read_f32(const precis_model_layer *layer, float **out) {
  uint8_t *raw = NULL;
  *out = NULL;
  precis_status st = precis_model_read_raw(layer, &raw);
  if (st != PRECIS_OK) return st;
  const uint64_t count = (uint64_t)layer->out_features * (uint64_t)layer->in_features;
  float *w = malloc(count * sizeof *w);
  if (!w) {
    free(raw);
    return precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
  }
  for (int64_t r = 0; r < layer->out_features; r++)
    for (int64_t c = 0; c < layer->in_features; c++) {
      const uint64_t stored = layer->in_major ? (uint64_t)c * (uint64_t)layer->out_features + (uint64_t)r
                                              : (uint64_t)r * (uint64_t)layer->in_features + (uint64_t)c;
      w[(uint64_t)r * (uint64_t)layer->in_features + (uint64_t)c] = precis_model_decode(raw, layer->dtype, stored);
    }
  free(raw);
  *out = w;
  return PRECIS_OK;
}
