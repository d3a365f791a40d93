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
#include "quant_decl.h"
#include "codes.h"
#include "conform.h"

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

/* A fused mixture-of-experts weight (model.h): 3-D, a float dtype, "experts" in its name, not a bias. */
static bool fused_experts_tensor(const precis_st_tensor *t) {
  return t->rank == 3 && linear_dtype(t->dtype) && strcmp(t->dtype, "F8_E4M3") != 0 && strstr(t->name, "experts") &&
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
      if (x->rank == 2 && linear_dtype(x->dtype) && ends_with(x->name, tables[t]) &&
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

precis_status precis_model_read_f32(const precis_model_layer *layer, float **out) {
  uint8_t *raw = NULL;
  *out = NULL;
  precis_status st = read_weight(layer, &raw);
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
      w[(uint64_t)r * (uint64_t)layer->in_features + (uint64_t)c] = decode(raw, layer->dtype, stored);
    }
  free(raw);
  *out = w;
  return PRECIS_OK;
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

/* ------------------------------------------------------------------ the declared scheme */

/* The int32 words a row of `in` values of `bits` bits takes: 32/bits per word when that divides
 * 32 (pack_to_int32), else the values laid end to end (compressed-tensors >= 0.20's dense 3-bit). */
static int64_t packed_words(int64_t in, int bits) {
  return 32 % bits == 0 ? (in + 32 / bits - 1) / (32 / bits) : (in * bits + 31) / 32;
}

/* gpt-oss MXFP4 (transformers' integrations/mxfp4.py, convert_moe_packed_tensors): a fused expert
 * tensor <t> is stored as <t>_blocks U8 [experts, out, in / 32, 16], two FP4 E2M1 codes a byte (the
 * even column in the low nibble), and <t>_scales U8 [experts, out, in / 32], an E8M0 exponent per
 * block of 32 columns: w[e, r, c] = e2m1(code) * 2^(scale - 127). Finds both for an expert layer. */
static void mxfp4_tensors(const precis_model *conv, const precis_model_layer *layer, const precis_model_layer **blocks,
                          const precis_model_layer **scales) {
  /* The fused tensor's name from the layer's ("<tensor>[<e>]"), which --strip-prefix may have shortened
   * as it did the converted checkpoint's names. */
  const char *bracket = strrchr(layer->name, '[');
  const int base = bracket ? (int)(bracket - layer->name) : (int)strlen(layer->name);
  char name[1100];
  snprintf(name, sizeof name, "%.*s_blocks", base, layer->name);
  *blocks = find_tensor(conv, name);
  snprintf(name, sizeof name, "%.*s_scales", base, layer->name);
  *scales = find_tensor(conv, name);
}

/* One expert's bytes of a fused tensor of the converted checkpoint, as a layer read_weight reads. */
static precis_model_layer expert_slice(const precis_model_layer *t, int64_t expert) {
  precis_model_layer slice = *t;
  slice.n_experts = t->dims[0];
  slice.expert = expert;
  slice.bytes = t->bytes / (uint64_t)(t->dims[0] > 0 ? t->dims[0] : 1);
  slice.offset = (uint64_t)expert * slice.bytes;
  return slice;
}

static precis_status mxfp4_check(const precis_model_layer *layer, const precis_model_layer *b, const precis_model_layer *s) {
  const int64_t groups = (layer->in_features + 31) / 32;
  if (strcmp(b->dtype, "U8") || b->rank != 4 || b->dims[0] != layer->n_experts || b->dims[1] != layer->out_features ||
      b->dims[2] != groups || b->dims[3] != 16 || layer->in_features % 32)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 ", %" PRId64 ", 16] (gpt-oss MXFP4: "
                       "[experts, out, in / 32, 16], two E2M1 codes a byte) for %s [%" PRId64 " experts, out %" PRId64
                       ", in %" PRId64 "], found %s of rank %d [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                       b->file, b->tensor, layer->n_experts, layer->out_features, groups, layer->tensor, layer->n_experts,
                       layer->out_features, layer->in_features, b->dtype, b->rank, b->dims[0], b->dims[1], b->dims[2],
                       b->dims[3]);
  if (strcmp(s->dtype, "U8") || s->rank != 3 || s->dims[0] != layer->n_experts || s->dims[1] != layer->out_features ||
      s->dims[2] != groups)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 ", %" PRId64 "] (gpt-oss MXFP4: an "
                       "E8M0 exponent per 32 columns), found %s of rank %d", s->file, s->tensor, layer->n_experts,
                       layer->out_features, groups, s->dtype, s->rank);
  return PRECIS_OK;
}

precis_status precis_model_converted_format(const precis_model *conv, const precis_quant_decl *decl,
                                            const precis_model_layer *layer, precis_converted_format *f,
                                            int *declared_group, bool *ignored) {
  memset(f, 0, sizeof *f);
  *declared_group = -1;
  *ignored = false;
  const int64_t n_out = layer->out_features, n_in = layer->in_features;
  char name[1100];
  const precis_model_layer *w, *s;
#define LOOKUP(suffix) (snprintf(name, sizeof name, "%s." suffix, layer->name), find_tensor(conv, name))
  const precis_model_layer *packed = LOOKUP("weight_packed");
  w = packed ? packed : LOOKUP("weight");
  s = LOOKUP("weight_scale");
  f->scale_name = "weight_scale";
  if (!s && (s = LOOKUP("weight_scale_inv"))) f->scale_name = "weight_scale_inv";
  f->zero_point = LOOKUP("weight_zero_point") != NULL;
  f->g_idx = LOOKUP("weight_g_idx") != NULL;
  f->input_scale = LOOKUP("input_scale") != NULL;
#undef LOOKUP
  if (layer->n_experts) { /* one expert of a fused tensor: gpt-oss MXFP4 blocks and scales */
    packed = NULL;
    mxfp4_tensors(conv, layer, &w, &s);
    f->scale_name = "_scales";
    if (w && s) {
      precis_status st = mxfp4_check(layer, w, s);
      if (st != PRECIS_OK) return st;
    }
    if (w && !s) w = NULL;
    f->zero_point = f->g_idx = f->input_scale = false;
  }
  if (decl && decl->present) *declared_group = precis_quant_decl_match(decl, layer->name, ignored);
  if (!w) return PRECIS_OK;
  f->found = true;
  f->packed = packed != NULL;
  snprintf(f->weight_dtype, sizeof f->weight_dtype, "%s", w->dtype);
  if (layer->n_experts) { /* MXFP4 */
    f->is_float = true;
    f->bits = 4;
    f->quantized = true;
    snprintf(f->scale_dtype, sizeof f->scale_dtype, "E8M0");
    f->scale_rows = layer->out_features;
    f->scale_cols = s->dims[2];
    f->n_groups = f->scale_cols;
    f->group_size = (n_in + f->n_groups - 1) / f->n_groups;
  } else if (!strcmp(w->dtype, "U8")) { /* NVFP4: two E2M1 codes a byte (compressed-tensors weight_packed, ModelOpt weight) */
    f->is_float = true;
    f->bits = 4;
    f->quantized = true;
  } else if (packed) {
    f->quantized = true;
    const int declared_bits = *declared_group >= 0 ? decl->groups[*declared_group].weights.num_bits : 0;
    if (declared_bits >= 1 && declared_bits <= 8 && packed_words(n_in, declared_bits) == w->in_features) f->bits = declared_bits;
    for (int bits = 8; bits >= 2 && !f->bits; bits--)
      if (packed_words(n_in, bits) == w->in_features) f->bits = bits;
  } else if (!strcmp(w->dtype, "I8") || !strcmp(w->dtype, "F8_E4M3")) {
    f->quantized = true;
    f->bits = 8;
    f->is_float = w->dtype[0] == 'F';
  }
  if (s && !layer->n_experts) {
    snprintf(f->scale_dtype, sizeof f->scale_dtype, "%s", s->dtype);
    f->scale_rows = s->rank >= 1 ? s->out_features : 1;
    f->scale_cols = s->rank == 2 ? s->in_features : 1;
    if ((uint64_t)f->scale_rows * (uint64_t)f->scale_cols == 1 && s->rank < 2) f->n_groups = 0;
    else if (f->scale_rows == n_out && f->scale_cols >= 1) {
      f->n_groups = f->scale_cols;
      f->group_size = (n_in + f->n_groups - 1) / f->n_groups;
    } else if (f->scale_rows < n_out && f->scale_rows >= 1 && f->scale_cols >= 1) {
      f->n_groups = -1; /* blocks of [ceil(out / rows), ceil(in / cols)] */
      f->block_rows = (n_out + f->scale_rows - 1) / f->scale_rows;
      f->group_size = (n_in + f->scale_cols - 1) / f->scale_cols;
    }
  }
  if (*declared_group < 0 && !*ignored) return PRECIS_OK;

  /* Checked against the declaration, each mismatch naming the declared and the found values. */
  char declared[160], found[200];
  const precis_quant_group *g = *declared_group >= 0 ? &decl->groups[*declared_group] : NULL;
  const precis_quant_args *a = g ? &g->weights : NULL;
  if (a) precis_quant_args_describe(a, false, declared, sizeof declared);
  precis_converted_format_describe(f, found, sizeof found);
  const char *why = NULL;
  char detail[160] = "";
  if (*ignored) {
    if (f->quantized) why = "the declaration's ignore list names this layer (left unquantized), but it is stored quantized";
  } else if (!a || !a->present) {
    if (f->quantized) why = "its config group quantizes no weights, but they are stored quantized";
  } else if (!f->quantized) {
    why = "declared quantized, but the weight is stored unquantized (and the ignore list does not name it)";
  } else if (a->num_bits != f->bits) {
    snprintf(detail, sizeof detail, "declared %d-bit codes, found %d-bit", a->num_bits, f->bits);
  } else if (a->is_float != f->is_float && !f->packed) {
    snprintf(detail, sizeof detail, "declared %s codes, found %s", a->is_float ? "float" : "integer", w->dtype);
  } else if (!a->is_float && !a->symmetric && !f->zero_point) {
    snprintf(detail, sizeof detail, "declared asymmetric, but there is no %s.weight_zero_point", layer->name);
  } else if (!a->is_float && a->symmetric && f->zero_point && f->packed) {
    snprintf(detail, sizeof detail, "declared symmetric, but %s.weight_zero_point is stored", layer->name);
  } else if (!s) {
    snprintf(detail, sizeof detail, "no %s.weight_scale", layer->name);
  } else if (!strcmp(a->strategy, "tensor") && f->n_groups != 0) {
    snprintf(detail, sizeof detail, "declared one scale per tensor, found %s [%" PRId64 ", %" PRId64 "]", f->scale_name,
             f->scale_rows, f->scale_cols);
  } else if (!strcmp(a->strategy, "channel") && f->n_groups != 1) {
    snprintf(detail, sizeof detail, "declared one scale per output channel ([%" PRId64 ", 1]), found %s [%" PRId64 ", %" PRId64 "]",
             n_out, f->scale_name, f->scale_rows, f->scale_cols);
  } else if ((!strcmp(a->strategy, "group") || !strcmp(a->strategy, "tensor_group")) &&
             (a->group_size <= 0 || f->n_groups != (n_in + a->group_size - 1) / a->group_size)) {
    snprintf(detail, sizeof detail,
             "declared groups of %" PRId64 " columns (%" PRId64 " groups of in_features = %" PRId64 "), found %s [%" PRId64
             ", %" PRId64 "]: %" PRId64 " groups",
             a->group_size, a->group_size > 0 ? (n_in + a->group_size - 1) / a->group_size : 0, n_in, f->scale_name,
             f->scale_rows, f->scale_cols, f->n_groups);
  } else if (!strcmp(a->strategy, "block") &&
             (f->n_groups != -1 || f->scale_rows != (n_out + a->block[0] - 1) / a->block[0] ||
              f->scale_cols != (n_in + a->block[1] - 1) / a->block[1])) {
    snprintf(detail, sizeof detail, "declared blocks of %" PRId64 "x%" PRId64 " ([%" PRId64 ", %" PRId64 "] scales), found %s [%" PRId64
             ", %" PRId64 "]", a->block[0], a->block[1], (n_out + a->block[0] - 1) / a->block[0],
             (n_in + a->block[1] - 1) / a->block[1], f->scale_name, f->scale_rows, f->scale_cols);
  } else if (!strcmp(a->strategy, "token") || a->strategy[0] == '\0') {
    snprintf(detail, sizeof detail, "declared weight strategy \"%s\" is not a weight granularity", a->strategy);
  }
  if (!why && !detail[0]) return PRECIS_OK;
  char where[300];
  if (g) snprintf(where, sizeof where, "%s's %s.config_groups.%s.weights", decl->file, decl->where, g->name);
  else snprintf(where, sizeof where, "%s's %s ignore list", decl->file, decl->where);
  if (!strcmp(decl->producer, "modelopt") || !strcmp(decl->producer, "fp8") || !strcmp(decl->producer, "mxfp4"))
    snprintf(where, sizeof where, "%s's %s (%s)", decl->file, decl->where, decl->producer);
  return precis_fail(PRECIS_E_INPUT, "layer %s: %s does not match what its producer declared: declared %s (%s); found %s%s%s",
                     layer->name, conv->path, a ? declared : "unquantized", where, found, detail[0] ? ": " : "",
                     detail[0] ? detail : why);
}

void precis_converted_format_describe(const precis_converted_format *f, char *buf, size_t len) {
  if (!f->found) {
    snprintf(buf, len, "missing");
    return;
  }
  if (!f->quantized) {
    snprintf(buf, len, "%s (unquantized)", f->weight_dtype);
    return;
  }
  char codes[48], scales[96] = "no scale";
  if (f->is_float && f->bits == 4) snprintf(codes, sizeof codes, "FP4 E2M1 packed");
  else if (f->packed) snprintf(codes, sizeof codes, "INT%d packed", f->bits);
  else snprintf(codes, sizeof codes, "%s", f->is_float ? "FP8 E4M3" : "INT8");
  if (f->scale_dtype[0]) {
    if (f->n_groups == 0) snprintf(scales, sizeof scales, "per tensor %s", f->scale_dtype);
    else if (f->n_groups == 1) snprintf(scales, sizeof scales, "per channel %s", f->scale_dtype);
    else if (f->n_groups > 1) snprintf(scales, sizeof scales, "group %" PRId64 " %s", f->group_size, f->scale_dtype);
    else snprintf(scales, sizeof scales, "block %" PRId64 "x%" PRId64 " %s", f->block_rows, f->group_size, f->scale_dtype);
  }
  snprintf(buf, len, "%s, %s%s%s%s", codes, scales, f->zero_point ? ", zero points" : "", f->g_idx ? ", g_idx" : "",
           f->input_scale ? ", input_scale" : "");
}

/* The value at (row, col) of a tensor packed by compressed-tensors' pack_to_int32: the values of a
 * row (packed_dim 1) or of a column (packed_dim 0) laid end to end, `bits` each, from the lowest bit
 * of the first int32 upward (a value may straddle two words when bits does not divide 32, as
 * compressed-tensors >= 0.20 packs 3-bit codes), each stored as the signed value plus 2^(bits-1). */
static int64_t unpack_value(const uint8_t *raw, int64_t cols_stored, int bits, int packed_dim, int64_t row, int64_t col) {
  const int64_t index = packed_dim == 0 ? row : col, bit = index * bits;
  const int64_t word_row = packed_dim == 0 ? bit / 32 : row, word_col = packed_dim == 1 ? bit / 32 : col;
  const int shift = (int)(bit % 32);
  uint64_t value = (uint32_t)read_int(raw, "I32", (uint64_t)(word_row * cols_stored + word_col)) >> shift;
  if (shift + bits > 32) {
    const int64_t next_row = packed_dim == 0 ? word_row + 1 : word_row, next_col = packed_dim == 1 ? word_col + 1 : word_col;
    value |= (uint64_t)(uint32_t)read_int(raw, "I32", (uint64_t)(next_row * cols_stored + next_col)) << (32 - shift);
  }
  return (int64_t)(value & ((1u << bits) - 1u)) - ((int64_t)1 << (bits - 1));
}

void precis_converted_layer_free(precis_converted_layer *l) {
  free(l->code);
  free(l->scale);
  free(l->group_of);
  free(l->zero_point);
  memset(l, 0, sizeof *l);
}

float precis_converted_layer_value(const precis_converted_layer *l, int64_t r, int64_t c) {
  const float q = l->code[(uint64_t)r * (uint64_t)l->in + (uint64_t)c];
  if (!l->scale) return q;
  const uint64_t at = (uint64_t)(r / l->rows_per_scale) * (uint64_t)l->scale_cols + (uint64_t)l->group_of[c];
  const float zp = l->zero_point ? (float)l->zero_point[at] : 0.0f;
  float scale = l->global_scale != 1.0f ? l->scale[at] / l->global_scale : l->scale[at];
  if (l->scale_2 != 1.0f) scale *= l->scale_2;
  return (q - zp) * scale;
}

/* Scales of a layer: [1], [out] or [out, 1] one per row; [out, G] groups along in; [R, C] with
 * R < out blocks of [ceil(out / R), ceil(in / C)] (compressed-tensors FP8_BLOCK, DeepSeek's
 * weight_scale_inv). Sets the layout in l and checks it against the weight. */
static precis_status scale_layout(const precis_model_layer *s, const char *sname, precis_converted_layer *l) {
  const bool one = (uint64_t)s->out_features * (uint64_t)s->in_features == 1 && s->rank < 2;
  l->scale_rows = one ? 1 : s->out_features;
  l->scale_cols = one || s->rank < 2 ? 1 : s->in_features;
  if (one) l->rows_per_scale = l->out;
  else if (l->scale_rows == l->out) l->rows_per_scale = 1;
  else if (l->scale_rows >= 1 && l->scale_rows < l->out && l->scale_cols >= 1 &&
           (l->out + (l->out + l->scale_rows - 1) / l->scale_rows - 1) / ((l->out + l->scale_rows - 1) / l->scale_rows) ==
               l->scale_rows)
    l->rows_per_scale = (l->out + l->scale_rows - 1) / l->scale_rows; /* blocks of ceil(out / R) rows */
  else
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one scale, one per output channel ([%" PRId64 "] or [%" PRId64
                       ", 1]), [%" PRId64 ", G] groups or [R, C] blocks; found %s [%" PRId64 ", %" PRId64 "]",
                       s->file, sname, l->out, l->out, l->out, s->dtype, s->out_features, s->in_features);
  if (l->scale_cols > l->in)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %" PRId64 " scale columns for in_features = %" PRId64, s->file, sname,
                       l->scale_cols, l->in);
  return PRECIS_OK;
}

/* Every column's scale column: consecutive runs (groups, blocks), or weight_g_idx. */
static precis_status column_groups(const precis_model *conv, const precis_model_layer *layer, const precis_model_layer *s,
                                   const char *sname, bool blocks, precis_converted_layer *l) {
  const int64_t n_in = l->in, n_groups = l->scale_cols;
  char gname[1100];
  snprintf(gname, sizeof gname, "%s.weight_g_idx", layer->name);
  const precis_model_layer *g = find_tensor(conv, gname);
  uint8_t *graw = NULL;
  precis_status st = PRECIS_OK;
  if (!(l->group_of = malloc((uint64_t)n_in * sizeof *l->group_of))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  bool ordered = false;
  if (g) {
    if ((strcmp(g->dtype, "I32") && strcmp(g->dtype, "I64")) || g->rank != 1 || g->out_features != n_in)
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 "] (the group of each input column), found %s "
                         "of %" PRId64 " elements", g->file, gname, n_in, g->dtype, g->out_features * g->in_features);
    if ((st = read_weight(g, &graw)) != PRECIS_OK) return st;
    ordered = true;
    for (int64_t c = 0; c < n_in && ordered; c++) ordered = read_int(graw, g->dtype, (uint64_t)c) != -1;
    for (int64_t c = 0; c < n_in && ordered && st == PRECIS_OK; c++) {
      l->group_of[c] = read_int(graw, g->dtype, (uint64_t)c);
      if (l->group_of[c] < 0 || l->group_of[c] >= n_groups)
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element %" PRId64 " is %" PRId64 ", expected a group 0 .. %" PRId64,
                         g->file, gname, c, l->group_of[c], n_groups - 1);
    }
    free(graw);
    if (st != PRECIS_OK) return st;
  }
  l->g_idx = ordered;
  if (!ordered) {
    if (!blocks && n_in % n_groups)
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %" PRId64 " groups do not divide in_features = %" PRId64
                         " (compressed-tensors requires groups of equal size)", s->file, sname, n_groups, n_in);
    const int64_t width = (n_in + n_groups - 1) / n_groups;
    for (int64_t c = 0; c < n_in; c++) l->group_of[c] = c / width;
  }
  return PRECIS_OK;
}

/* A converted layer's codes and scales (model.h). Formats:
 *   - <layer>.weight F8_E4M3 or I8 times <layer>.weight_scale (or DeepSeek's weight_scale_inv, a
 *     multiplier despite its name) per tensor, per channel, per group or per block;
 *   - compressed-tensors pack-quantized (compressed_tensors/compressors/pack_quantized/base.py,
 *     helpers.py pack_to_int32): <layer>.weight_packed I32 [out, ceil(in * bits / 32)], the codes
 *     of a row end to end from the lowest bit, each + 2^(bits-1); <layer>.weight_shape I64 [2];
 *     weight_scale [out, G]; optional weight_zero_point (I32 packed along the rows, or I8) and
 *     weight_g_idx. bits is the declared num_bits, else inferred from the width (4 or 8, or the
 *     one width that fits);
 *   - compressed-tensors nvfp4-pack-quantized (compressors/nvfp4/helpers.py): <layer>.weight_packed
 *     U8 [out, in / 2], two FP4 E2M1 codes a byte, the even column in the low nibble;
 *     weight_scale F8_E4M3 [out, in / 16]; weight_global_scale F32 [1]: w = q * (scale / global);
 *   - a float weight without a scale: a layer left unconverted. */
/* One expert of a gpt-oss MXFP4 fused tensor (mxfp4_tensors): codes [out, in] as E2M1 values, one
 * scale 2^(e - 127) per 32 columns (exact in float32: E8M0 spans 2^-127 .. 2^127). */
static precis_status mxfp4_layer_read(const precis_model *conv, const precis_model_layer *layer, precis_converted_layer *l) {
  const precis_model_layer *b = NULL, *s = NULL;
  uint8_t *braw = NULL, *sraw = NULL;
  mxfp4_tensors(conv, layer, &b, &s);
  precis_status st = PRECIS_OK;
  if (!b || !s) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensors %s_blocks and %s_scales (gpt-oss MXFP4) for expert %" PRId64 " of %s",
                     conv->path, layer->tensor, layer->tensor, layer->expert, layer->tensor);
    goto done;
  }
  if ((st = mxfp4_check(layer, b, s)) != PRECIS_OK) goto done;
  const precis_model_layer bslice = expert_slice(b, layer->expert), sslice = expert_slice(s, layer->expert);
  if ((st = read_weight(&bslice, &braw)) != PRECIS_OK || (st = read_weight(&sslice, &sraw)) != PRECIS_OK) goto done;
  const int64_t n_out = l->out, n_in = l->in, groups = n_in / 32;
  l->bits = 4;
  l->is_float = l->quantized = true;
  l->scale_rows = n_out;
  l->scale_cols = groups;
  l->rows_per_scale = 1;
  snprintf(l->scale_dtype, sizeof l->scale_dtype, "E8M0");
  if (!(l->code = malloc((uint64_t)n_out * (uint64_t)n_in * sizeof *l->code)) ||
      !(l->scale = malloc((uint64_t)n_out * (uint64_t)groups * sizeof *l->scale)) ||
      !(l->group_of = malloc((uint64_t)n_in * sizeof *l->group_of))) {
    st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
    goto done;
  }
  for (int64_t c = 0; c < n_in; c++) l->group_of[c] = c / 32;
  for (uint64_t i = 0; i < (uint64_t)n_out * (uint64_t)groups; i++) {
    if (sraw[i] == 255) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expert %" PRId64 ", element %" PRIu64 " is 255, E8M0's NaN", s->file,
                       s->tensor, layer->expert, i);
      goto done;
    }
    l->scale[i] = ldexpf(1.0f, (int)sraw[i] - 127);
  }
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++) {
      const uint8_t byte = braw[(uint64_t)r * (uint64_t)(n_in / 2) + (uint64_t)(c / 2)];
      l->code[(uint64_t)r * (uint64_t)n_in + (uint64_t)c] = precis_e2m1_bits_to_f32((uint8_t)((byte >> (4 * (c % 2))) & 15u));
    }
  snprintf(l->what, sizeof l->what, "FP4 E2M1 packed x E8M0 scales, %" PRId64 " groups of 32 columns (gpt-oss MXFP4, expert %" PRId64 ")",
           groups, layer->expert);
done:
  free(braw);
  free(sraw);
  if (st != PRECIS_OK) precis_converted_layer_free(l);
  return st;
}

precis_status precis_converted_layer_read(const precis_model *conv, const precis_model_layer *layer, int declared_bits,
                                          precis_converted_layer *l) {
  memset(l, 0, sizeof *l);
  l->out = layer->out_features;
  l->in = layer->in_features;
  l->global_scale = 1.0f;
  l->scale_2 = 1.0f;
  if (layer->n_experts) return mxfp4_layer_read(conv, layer, l);
  const int64_t n_out = l->out, n_in = l->in;
  char wname[1100], pname[1100], sname[1100], zname[1100], shname[1100], gsname[1100];
  snprintf(wname, sizeof wname, "%s.weight", layer->name);
  snprintf(pname, sizeof pname, "%s.weight_packed", layer->name);
  snprintf(sname, sizeof sname, "%s.weight_scale", layer->name);
  snprintf(zname, sizeof zname, "%s.weight_zero_point", layer->name);
  snprintf(shname, sizeof shname, "%s.weight_shape", layer->name);
  snprintf(gsname, sizeof gsname, "%s.weight_global_scale", layer->name);
  const precis_model_layer *p = find_tensor(conv, pname), *t = p ? p : find_tensor(conv, wname), *s = find_tensor(conv, sname);
  if (!s) {
    snprintf(sname, sizeof sname, "%s.weight_scale_inv", layer->name);
    s = find_tensor(conv, sname);
  }
  const precis_model_layer *z = find_tensor(conv, zname), *sh = find_tensor(conv, shname), *gs = find_tensor(conv, gsname);
  char s2name[1100];
  snprintf(s2name, sizeof s2name, "%s.weight_scale_2", layer->name);
  const precis_model_layer *s2 = find_tensor(conv, s2name);
  uint8_t *raw = NULL, *sraw = NULL, *zraw = NULL, *aux = NULL;
  precis_status st = PRECIS_OK;
  if (!t) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s or %s (the converted checkpoint lacks layer %s)", conv->path, wname, pname,
                     layer->name);
    goto done;
  }
  const uint64_t count = (uint64_t)n_out * (uint64_t)n_in;
  const bool nvfp4 = !strcmp(t->dtype, "U8");
  if (p && !nvfp4) {
    if (strcmp(p->dtype, "I32") || p->rank != 2 || p->out_features != n_out) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", in/8] (compressed-tensors pack-quantized), "
                       "found %s [%" PRId64 ", %" PRId64 "]", p->file, pname, n_out, p->dtype, p->out_features, p->in_features);
      goto done;
    }
    int bits = declared_bits;
    if (!bits) { /* undeclared: the two widths llm-compressor's W4A16 / W8A16 write */
      const bool fits4 = p->in_features == packed_words(n_in, 4), fits8 = p->in_features == packed_words(n_in, 8);
      bits = fits4 == fits8 ? 0 : fits4 ? 4 : 8;
      if (!bits) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "] %s for in_features = %" PRId64
                         " (expected [%" PRId64 ", %" PRId64 "] for 4-bit values, 8 per int32, or [%" PRId64 ", %" PRId64
                         "] for 8-bit, 4 per int32; config.json's quantization_config would say which)", p->file, pname, n_out,
                         p->in_features, fits4 && fits8 ? "is ambiguous" : "does not fit", n_in, n_out, packed_words(n_in, 4),
                         n_out, packed_words(n_in, 8));
        goto done;
      }
    }
    if (p->in_features != packed_words(n_in, bits)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "] does not hold %d-bit codes of in_features = %" PRId64
                       " (expected [%" PRId64 ", %" PRId64 "])", p->file, pname, n_out, p->in_features, bits, n_in, n_out,
                       packed_words(n_in, bits));
      goto done;
    }
    l->bits = bits;
  } else if (nvfp4) {
    if (t->rank != 2 || t->out_features != n_out || t->in_features != (n_in + 1) / 2) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected U8 [%" PRId64 ", %" PRId64 "] (two FP4 E2M1 codes a byte, "
                       "NVFP4), found [%" PRId64 ", %" PRId64 "]", t->file, t->tensor, n_out, (n_in + 1) / 2,
                       t->out_features, t->in_features);
      goto done;
    }
    l->bits = 4;
    l->is_float = true;
  } else {
    if (t->rank != 2 || t->out_features != n_out || t->in_features != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected [%" PRId64 ", %" PRId64 "] as in the original, found [%" PRId64
                       ", %" PRId64 "]", t->file, wname, n_out, n_in, t->out_features, t->in_features);
      goto done;
    }
    const bool quantized = !strcmp(t->dtype, "F8_E4M3") || !strcmp(t->dtype, "I8");
    if (!quantized && !linear_dtype(t->dtype)) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: dtype %s is not read (expected F8_E4M3 or I8 with a weight_scale, or "
                       "F32/F16/BF16)", t->file, wname, t->dtype);
      goto done;
    }
    if (quantized) {
      l->bits = 8;
      l->is_float = t->dtype[0] == 'F';
    } else {
      s = NULL; /* a layer left unconverted: its values as they are */
    }
  }
  l->quantized = l->bits > 0;
  if (p && sh) {
    if ((strcmp(sh->dtype, "I64") && strcmp(sh->dtype, "I32")) || sh->rank != 1 || sh->out_features != 2) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I64 [2] (the unpacked [out, in]), found %s of %" PRId64
                       " elements", sh->file, shname, sh->dtype, sh->out_features * sh->in_features);
      goto done;
    }
    if ((st = read_weight(sh, &aux)) != PRECIS_OK) goto done;
    const int64_t so = read_int(aux, sh->dtype, 0), si = read_int(aux, sh->dtype, 1);
    if (so != n_out || si != n_in) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: [%" PRId64 ", %" PRId64 "], but the original weight is [%" PRId64
                       ", %" PRId64 "]", sh->file, shname, so, si, n_out, n_in);
      goto done;
    }
    free(aux);
    aux = NULL;
  }
  if (l->quantized && !s) {
    st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s.weight_scale for the %s weight %s", conv->path, layer->name, t->dtype,
                     t->tensor);
    goto done;
  }
  if (s) {
    if (!is_float_dtype(s->dtype) && strcmp(s->dtype, "F8_E4M3")) {
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected F32, F16, BF16 (or F8_E4M3 for NVFP4) scales, found %s", s->file,
                       sname, s->dtype);
      goto done;
    }
    snprintf(l->scale_dtype, sizeof l->scale_dtype, "%s", s->dtype);
    if ((st = scale_layout(s, sname, l)) != PRECIS_OK) goto done;
    const bool blocks = l->rows_per_scale > 1 && l->rows_per_scale < n_out;
    if ((st = column_groups(conv, layer, s, sname, blocks, l)) != PRECIS_OK) goto done;
    const uint64_t n_scale = (uint64_t)l->scale_rows * (uint64_t)l->scale_cols;
    if ((st = read_weight(s, &sraw)) != PRECIS_OK) goto done;
    if (!(l->scale = malloc(n_scale * sizeof *l->scale))) goto nomem;
    for (uint64_t i = 0; i < n_scale; i++) l->scale[i] = decode(sraw, s->dtype, i);
    if (z) {
      const int bits = l->bits;
      if (!strcmp(z->dtype, "I32") && z->rank == 2 && z->out_features == packed_words(l->scale_rows, bits) &&
          z->in_features == l->scale_cols)
        l->zp_packed = true;
      else if (!(!strcmp(z->dtype, "I8") && ((uint64_t)z->out_features * (uint64_t)z->in_features == 1 ||
                                             (z->out_features == l->scale_rows && z->in_features == l->scale_cols)))) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected I32 [%" PRId64 ", %" PRId64 "] (packed along the rows) or I8 "
                         "[%" PRId64 ", %" PRId64 "]; found %s [%" PRId64 ", %" PRId64 "]", z->file, zname,
                         packed_words(l->scale_rows, bits), l->scale_cols, l->scale_rows, l->scale_cols, z->dtype,
                         z->out_features, z->in_features);
        goto done;
      }
      if ((st = read_weight(z, &zraw)) != PRECIS_OK) goto done;
      if (!(l->zero_point = malloc(n_scale * sizeof *l->zero_point))) goto nomem;
      const bool one = (uint64_t)z->out_features * (uint64_t)z->in_features == 1;
      for (int64_t r = 0; r < l->scale_rows; r++)
        for (int64_t g = 0; g < l->scale_cols; g++)
          l->zero_point[r * l->scale_cols + g] =
              (int32_t)(l->zp_packed ? unpack_value(zraw, l->scale_cols, bits, 0, r, g)
                                     : read_int(zraw, "I8", one ? 0 : (uint64_t)(r * l->scale_cols + g)));
    }
    if (gs) {
      if ((uint64_t)gs->out_features * (uint64_t)gs->in_features != 1 || !is_float_dtype(gs->dtype)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one F32 value", gs->file, gsname);
        goto done;
      }
      if ((st = read_weight(gs, &aux)) != PRECIS_OK) goto done;
      l->global_scale = decode(aux, gs->dtype, 0);
      if (!(l->global_scale > 0) || !isfinite(l->global_scale)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", gs->file, gsname, l->global_scale);
        goto done;
      }
    } else if (s2) { /* ModelOpt: the second-level scale multiplies */
      if ((uint64_t)s2->out_features * (uint64_t)s2->in_features != 1 || !is_float_dtype(s2->dtype)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: expected one F32 value", s2->file, s2->tensor);
        goto done;
      }
      if ((st = read_weight(s2, &aux)) != PRECIS_OK) goto done;
      l->scale_2 = decode(aux, s2->dtype, 0);
      if (!(l->scale_2 > 0) || !isfinite(l->scale_2)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", s2->file, s2->tensor, l->scale_2);
        goto done;
      }
    } else if (nvfp4) {
      st = precis_fail(PRECIS_E_INPUT, "%s: no tensor %s (compressed-tensors) or %s.weight_scale_2 (ModelOpt) for the NVFP4 "
                       "weight %s", conv->path, gsname, layer->name, t->tensor);
      goto done;
    }
  }
  if ((st = read_weight(t, &raw)) != PRECIS_OK) goto done;
  if (!(l->code = malloc(count * sizeof *l->code))) goto nomem;
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++) {
      const uint64_t i = (uint64_t)r * (uint64_t)n_in + (uint64_t)c;
      if (nvfp4) l->code[i] = precis_e2m1_bits_to_f32((uint8_t)((raw[(uint64_t)r * (uint64_t)t->in_features + (uint64_t)c / 2] >> (4 * (c % 2))) & 15u));
      else if (p) l->code[i] = (float)unpack_value(raw, p->in_features, l->bits, 1, r, c);
      else l->code[i] = decode(raw, t->dtype, i);
    }
  for (int64_t r = 0; r < n_out; r++)
    for (int64_t c = 0; c < n_in; c++)
      if (!isfinite(precis_converted_layer_value(l, r, c))) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor %s: element [%" PRId64 ", %" PRId64 "] dequantizes to a non-finite value",
                         t->file, t->tensor, r, c);
        goto done;
      }
  /* What was read, in words (source.converted.weights). */
  char codes[48];
  if (nvfp4) snprintf(codes, sizeof codes, "FP4 E2M1 packed");
  else if (p) snprintf(codes, sizeof codes, "INT%d packed", l->bits);
  else snprintf(codes, sizeof codes, "%s", t->dtype);
  const bool blocks = l->scale && l->rows_per_scale > 1 && l->rows_per_scale < n_out;
  if (!l->scale) snprintf(l->what, sizeof l->what, "%s", t->dtype);
  else if (l->rows_per_scale == n_out && l->scale_cols == 1)
    snprintf(l->what, sizeof l->what, "%s x per-tensor %s%s", codes, l->scale_dtype, l->zero_point ? ", zero points" : "");
  else if (blocks)
    snprintf(l->what, sizeof l->what, "%s x %s scales, blocks of %" PRId64 "x%" PRId64 "%s", codes, l->scale_dtype,
             l->rows_per_scale, (n_in + l->scale_cols - 1) / l->scale_cols, strstr(sname, "_inv") ? " (weight_scale_inv)" : "");
  else if (l->scale_cols == 1)
    snprintf(l->what, sizeof l->what, "%s x per-channel %s%s", codes, l->scale_dtype, l->zero_point ? ", zero points" : "");
  else
    snprintf(l->what, sizeof l->what, "%s x %s scales, %" PRId64 " groups of %" PRId64 " columns%s%s%s", codes, l->scale_dtype,
             l->scale_cols, (n_in + l->scale_cols - 1) / l->scale_cols, l->g_idx ? " (weight_g_idx)" : "",
             l->zero_point ? ", zero points" : "", gs ? ", global scale" : s2 ? ", weight_scale_2" : "");
  goto done;
nomem:
  st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
done:
  free(raw);
  free(sraw);
  free(zraw);
  free(aux);
  if (st != PRECIS_OK) precis_converted_layer_free(l);
  return st;
}

/* A converted layer dequantized to float32 [out, in]: w = (code - zero point) * scale (/ global
 * scale), the product rounded once to float32, as a kernel that dequantizes in float32 computes it
 * (exact for F16/BF16 scales; compressed-tensors' own decompression rounds it to the scale's dtype,
 * a further error of at most half an ulp of that dtype). */
static precis_status converted_weight(const precis_model *conv, const precis_model_layer *layer, int declared_bits, float **out,
                                      char *what, size_t what_len) {
  precis_converted_layer l;
  *out = NULL;
  precis_status st = precis_converted_layer_read(conv, layer, declared_bits, &l);
  if (st != PRECIS_OK) return st;
  float *w = malloc((uint64_t)l.out * (uint64_t)l.in * sizeof *w);
  if (!w) {
    precis_converted_layer_free(&l);
    return precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
  }
  for (int64_t r = 0; r < l.out; r++)
    for (int64_t c = 0; c < l.in; c++) w[(uint64_t)r * (uint64_t)l.in + (uint64_t)c] = precis_converted_layer_value(&l, r, c);
  snprintf(what, what_len, "%s", l.what);
  precis_converted_layer_free(&l);
  *out = w;
  return PRECIS_OK;
}

/* The deployed scheme's activations: a quantized and dequantized as the declaration says the
 * served layer quantizes its input (compressed-tensors' forward: dynamic per token, per group of
 * a token or per tensor with the min-max scale; static with the checkpoint's input_scale (and
 * input_zero_point); NVFP4's per-16 E4M3 scales under the static input_global_scale). The rows
 * are tokens; a dynamic per-tensor scale is taken over each sample. */
static precis_status deployed_activations(const precis_model *conv, const precis_model_layer *layer, const precis_quant_args *args,
                                          float *a, int64_t samples, int64_t m, int64_t k, char *what, size_t what_len) {
  char name[1100], described[160];
  precis_quant_args_describe(args, true, described, sizeof described);
  float static_scale = 0, static_zp = 0, global = 1;
  const bool tensor_group = !strcmp(args->strategy, "tensor_group");
  if (tensor_group || !args->dynamic) {
    snprintf(name, sizeof name, "%s.%s", layer->name, tensor_group ? "input_global_scale" : "input_scale");
    const precis_model_layer *t = find_tensor(conv, name);
    bool inverse = false; /* ModelOpt NVFP4 stores the activations' second-level scale as input_scale = 1 / global */
    if (!t && tensor_group) {
      snprintf(name, sizeof name, "%s.input_scale", layer->name);
      inverse = (t = find_tensor(conv, name)) != NULL;
    }
    uint8_t *raw = NULL;
    if (!t || (uint64_t)t->out_features * (uint64_t)t->in_features != 1 || !is_float_dtype(t->dtype))
      return precis_fail(PRECIS_E_INPUT, "%s: layer %s: the declared activations (%s) need one F32 %s; %s", conv->path,
                         layer->name, described, name, t ? "it holds another shape or dtype" : "there is none");
    precis_status st = read_weight(t, &raw);
    if (st != PRECIS_OK) return st;
    const float v = decode(raw, t->dtype, 0);
    free(raw);
    if (!(v > 0) || !isfinite(v))
      return precis_fail(PRECIS_E_INPUT, "%s: tensor %s: %g is not a positive finite scale", conv->path, name, v);
    if (tensor_group) global = inverse ? 1.0f / v : v;
    else static_scale = v;
    snprintf(name, sizeof name, "%s.input_zero_point", layer->name);
    const precis_model_layer *z = find_tensor(conv, name);
    if (z && !tensor_group) {
      if ((st = read_weight(z, &raw)) != PRECIS_OK) return st;
      static_zp = (float)read_int(raw, z->dtype[0] == 'I' && z->dtype[1] == '8' ? "I8" : z->dtype, 0);
      free(raw);
    }
  }
  const float half = precis_code_half_range(args->num_bits, args->is_float);
  int64_t width = k; /* columns sharing a scale */
  if (!strcmp(args->strategy, "group") || tensor_group) width = args->group_size > 0 ? args->group_size : k;
  const bool per_sample = !strcmp(args->strategy, "tensor");
  for (int64_t s = 0; s < samples; s++)
    for (int64_t row = 0; row < (per_sample ? 1 : m); row++)
      for (int64_t c0 = 0; c0 < k; c0 += width) {
        const int64_t rows = per_sample ? m : 1, r0 = per_sample ? 0 : row, c1 = c0 + width < k ? c0 + width : k;
        float lo = 0, hi = 0;
        for (int64_t r = r0; r < r0 + rows; r++)
          for (int64_t c = c0; c < c1; c++) {
            const float v = a[((uint64_t)s * (uint64_t)m + (uint64_t)r) * (uint64_t)k + (uint64_t)c];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
          }
        float scale = static_scale, zp = static_zp;
        if (tensor_group) {
          scale = precis_round_e4m3(global * (fmaxf(-lo, hi) / half)) / global;
        } else if (args->dynamic) {
          if (args->symmetric || args->is_float) {
            scale = fmaxf(-lo, hi) / half;
          } else {
            scale = (hi - lo) / (2 * half);
            zp = scale > 0 ? fminf(fmaxf(rintf(-(half + 0.5f) - lo / scale), -(half + 0.5f)), half - 0.5f) : 0;
          }
        }
        if (!(scale > 0)) continue; /* an all-zero block stays zero */
        for (int64_t r = r0; r < r0 + rows; r++)
          for (int64_t c = c0; c < c1; c++) {
            float *v = &a[((uint64_t)s * (uint64_t)m + (uint64_t)r) * (uint64_t)k + (uint64_t)c];
            *v = (precis_quantize_code(*v, scale, zp, args->num_bits, args->is_float) - zp) * scale;
          }
      }
  snprintf(what, what_len, "activations %s", described);
  return PRECIS_OK;
}

static precis_status import_layer(const precis_model_layer *layer, const precis_model_import_options *o,
                                  activation_kind act_kind, activation_kind grad_kind,
                                  precis_dataset_writer *writer, precis_sha256 *id_hash, precis_buf *suite) {
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
    if ((st = precis_model_converted_format(o->converted, o->declared, layer, &found, &declared_group, &ignored)) != PRECIS_OK)
      goto done;
    const int declared_bits = declared_group >= 0 && !ignored ? o->declared->groups[declared_group].weights.num_bits : 0;
    if ((st = converted_weight(o->converted, layer, declared_bits, &w, converted_what, sizeof converted_what)) != PRECIS_OK)
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
  if (o->gradients) {
    if (!(data.grad = malloc(c_count * sizeof(float)))) goto nomem;
    if ((st = layer_gradients(o, layer, grad_kind, batch, m, data.grad)) != PRECIS_OK) goto done;
  }
  /* The deployed scheme: a becomes what the served layer multiplies, c_ref stays from the original. */
  if (o->converted && !o->weights_only && declared_group >= 0 && !ignored && o->declared->groups[declared_group].input.present) {
    if (!(a_original = malloc(a_count * sizeof(float)))) goto nomem;
    memcpy(a_original, data.a, a_count * sizeof(float));
    if ((st = deployed_activations(o->converted, layer, &o->declared->groups[declared_group].input, data.a, batch, m, k,
                                   deployed_what, sizeof deployed_what)) != PRECIS_OK)
      goto done;
  }
  st = precis_reference_compute(a_original ? a_original : data.a, b_original ? b_original : data.b, batch, m, n, k, false,
                                data.c_ref, data.ab_abs);
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
      mxfp4_tensors(o->converted, layer, &t, &scales);
    }
    if (!t && wname) t = find_tensor(o->converted, wname);
    if (!t && pname) t = find_tensor(o->converted, pname);
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
    if ((st = import_layer(&model->layers[i], o, act_kind, grad_kind, writer, &hash, &suite)) != PRECIS_OK) goto failed;
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
  if (st == PRECIS_OK && dataset_id) memcpy(dataset_id, id, 65);
  return st;
failed:
  if (bar.tty) fprintf(stderr, "\n");
  precis_buf_free(&suite);
  precis_dataset_writer_abort(writer);
  return st;
}
