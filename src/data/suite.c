/* YAML suites through libyaml's document API. Every error names the source, the line and column
 * (from libyaml's marks) and the key, and says what was expected. */
#include "suite.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "dataset.h"
#include "base/fileio.h"
#include "base/escape.h"

typedef struct parse_ctx {
  const char *source;
  yaml_document_t *doc;
} parse_ctx;

/* "SOURCE:LINE:COL: KEY: message" */
static precis_status fail_at(const parse_ctx *ctx, const yaml_node_t *node, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static precis_status fail_at(const parse_ctx *ctx, const yaml_node_t *node, const char *key, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (node)
    return precis_fail(PRECIS_E_INPUT, "%s:%zu:%zu: %s%s%s", ctx->source, node->start_mark.line + 1,
                       node->start_mark.column + 1, key ? key : "", key ? ": " : "", msg);
  return precis_fail(PRECIS_E_INPUT, "%s: %s%s%s", ctx->source, key ? key : "", key ? ": " : "", msg);
}

static const char *node_kind(const yaml_node_t *node) {
  switch (node->type) {
  case YAML_SCALAR_NODE: return "a scalar";
  case YAML_SEQUENCE_NODE: return "a list";
  case YAML_MAPPING_NODE: return "a mapping";
  default: return "nothing";
  }
}

static const char *scalar(const yaml_node_t *node) { return (const char *)node->data.scalar.value; }

static bool is_plain(const yaml_node_t *node) {
  return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static precis_status get_int(const parse_ctx *ctx, const yaml_node_t *node, const char *key, int64_t lo, int64_t hi,
                             int64_t *out) {
  if (!is_plain(node))
    return fail_at(ctx, node, key, "expected an integer, found %s%s%s%s", node->type == YAML_SCALAR_NODE ? "the string \"" : node_kind(node),
                   node->type == YAML_SCALAR_NODE ? scalar(node) : "", node->type == YAML_SCALAR_NODE ? "\"" : "", "");
  const char *text = scalar(node);
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (!text[0] || *end || errno == ERANGE)
    return fail_at(ctx, node, key, "expected an integer, found \"%s\"", text);
  if (v < lo || v > hi) {
    if (lo == 1 && v <= 0)
      return fail_at(ctx, node, key, "expected a positive integer, found %lld", v);
    if (lo == 0 && v < 0)
      return fail_at(ctx, node, key, "expected a non-negative integer, found %lld", v);
    return fail_at(ctx, node, key, "expected an integer in [%" PRId64 ", %" PRId64 "], found %lld", lo, hi, v);
  }
  *out = v;
  return PRECIS_OK;
}

static precis_status get_u64(const parse_ctx *ctx, const yaml_node_t *node, const char *key, uint64_t *out) {
  if (!is_plain(node)) return fail_at(ctx, node, key, "expected a non-negative integer, found %s", node_kind(node));
  const char *text = scalar(node);
  char *end = NULL;
  errno = 0;
  if (text[0] == '-' || text[0] == '+') return fail_at(ctx, node, key, "expected a non-negative integer, found \"%s\"", text);
  unsigned long long v = strtoull(text, &end, 10);
  if (!text[0] || *end || errno == ERANGE)
    return fail_at(ctx, node, key, "expected a non-negative integer below 2^64, found \"%s\"", text);
  *out = v;
  return PRECIS_OK;
}

static precis_status get_number(const parse_ctx *ctx, const yaml_node_t *node, const char *key, double *out) {
  if (!is_plain(node)) return fail_at(ctx, node, key, "expected a number, found %s", node->type == YAML_SCALAR_NODE ? "a quoted string" : node_kind(node));
  const char *text = scalar(node);
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (!text[0] || *end || !isfinite(v)) return fail_at(ctx, node, key, "expected a finite number, found \"%s\"", text);
  *out = v;
  return PRECIS_OK;
}

static precis_status get_bool(const parse_ctx *ctx, const yaml_node_t *node, const char *key, bool *out) {
  if (is_plain(node)) {
    const char *t = scalar(node);
    if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "yes")) { *out = true; return PRECIS_OK; }
    if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "no")) { *out = false; return PRECIS_OK; }
  }
  return fail_at(ctx, node, key, "expected true or false, found %s%s%s", node->type == YAML_SCALAR_NODE ? "\"" : node_kind(node),
                 node->type == YAML_SCALAR_NODE ? scalar(node) : "", node->type == YAML_SCALAR_NODE ? "\"" : "");
}

static precis_status get_string(const parse_ctx *ctx, const yaml_node_t *node, const char *key, char **out) {
  if (node->type != YAML_SCALAR_NODE) return fail_at(ctx, node, key, "expected a string, found %s", node_kind(node));
  free(*out);
  *out = precis_strdup(scalar(node));
  return *out ? PRECIS_OK : precis_fail(PRECIS_E_NOMEM, "out of memory");
}

/* Walks a mapping: rejects non-scalar and duplicate keys, and keys not in `allowed`. */
typedef struct map_iter {
  const yaml_node_pair_t *pair, *end;
} map_iter;

static precis_status check_mapping(const parse_ctx *ctx, const yaml_node_t *map, const char *where,
                                   const char *const *allowed) {
  if (map->type != YAML_MAPPING_NODE)
    return fail_at(ctx, map, where, "expected a mapping (key: value lines), found %s", node_kind(map));
  for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *key = yaml_document_get_node(ctx->doc, p->key);
    if (!key || key->type != YAML_SCALAR_NODE) return fail_at(ctx, key, where, "keys must be plain names");
    bool known = false;
    for (const char *const *a = allowed; *a; a++) known = known || strcmp(*a, scalar(key)) == 0;
    if (!known) {
      char list[512] = "";
      size_t used = 0;
      for (const char *const *a = allowed; *a && used < sizeof list; a++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", a == allowed ? "" : ", ", *a);
      return fail_at(ctx, key, where, "unknown key \"%s\" (expected one of: %s)", scalar(key), list);
    }
    for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
      const yaml_node_t *other = yaml_document_get_node(ctx->doc, q->key);
      if (other && other->type == YAML_SCALAR_NODE && strcmp(scalar(other), scalar(key)) == 0)
        return fail_at(ctx, key, where, "duplicate key \"%s\"", scalar(key));
    }
  }
  return PRECIS_OK;
}

static const yaml_node_t *map_get(const parse_ctx *ctx, const yaml_node_t *map, const char *name) {
  for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *key = yaml_document_get_node(ctx->doc, p->key);
    if (key && key->type == YAML_SCALAR_NODE && strcmp(scalar(key), name) == 0)
      return yaml_document_get_node(ctx->doc, p->value);
  }
  return NULL;
}

static precis_status parse_dist(const parse_ctx *ctx, const yaml_node_t *node, const char *where, precis_dist *out) {
  char key[160];
  const yaml_node_t *kind_node = node;
  if (node->type == YAML_MAPPING_NODE) {
    kind_node = map_get(ctx, node, "dist");
    if (!kind_node) return fail_at(ctx, node, where, "missing key \"dist\" (the distribution's name)");
  }
  if (kind_node->type != YAML_SCALAR_NODE)
    return fail_at(ctx, kind_node, where, "expected a distribution name or a mapping with \"dist\", found %s", node_kind(kind_node));
  int kind = precis_dist_kind_from_name(scalar(kind_node));
  if (kind < 0) {
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < PRECIS_DIST_KIND_COUNT && used < sizeof list; i++)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", precis_dist_specs[i].name);
    return fail_at(ctx, kind_node, where, "unknown distribution \"%s\" (expected one of: %s)", scalar(kind_node), list);
  }
  precis_dist_init(out, (precis_dist_kind)kind);
  const precis_dist_spec *spec = &precis_dist_specs[kind];
  if (node->type == YAML_MAPPING_NODE) {
    const char *allowed[PRECIS_DIST_MAX_PARAMS + 6] = {"dist"};
    int n = 1;
    if (kind == PRECIS_DIST_FILE) {
      allowed[n++] = "path";
      allowed[n++] = "dataset";
      allowed[n++] = "tensor";
      allowed[n++] = "array";
      allowed[n++] = "transpose";
    }
    for (int i = 0; i < spec->n_params; i++) allowed[n++] = spec->param_names[i];
    allowed[n] = NULL;
    precis_status st = check_mapping(ctx, node, where, allowed);
    if (st != PRECIS_OK) return st;
    for (int i = 0; i < spec->n_params; i++) {
      const yaml_node_t *v = map_get(ctx, node, spec->param_names[i]);
      snprintf(key, sizeof key, "%s.%s", where, spec->param_names[i]);
      if (v && (st = get_number(ctx, v, key, &out->params[i])) != PRECIS_OK) return st;
    }
    if (kind == PRECIS_DIST_FILE) {
      const yaml_node_t *v;
      if ((v = map_get(ctx, node, "path"))) {
        snprintf(key, sizeof key, "%s.path", where);
        if ((st = get_string(ctx, v, key, &out->path)) != PRECIS_OK) return st;
      }
      const yaml_node_t *dset = map_get(ctx, node, "dataset"), *tensor = map_get(ctx, node, "tensor");
      const yaml_node_t *array = map_get(ctx, node, "array");
      if ((dset != NULL) + (tensor != NULL) + (array != NULL) > 1)
        return fail_at(ctx, array ? array : tensor, where,
                       "give one of dataset (HDF5), tensor (safetensors) or array (a NumPy .npz member)");
      if (array) {
        snprintf(key, sizeof key, "%s.array", where);
        if ((st = get_string(ctx, array, key, &out->object)) != PRECIS_OK) return st;
      }
      if (dset) {
        snprintf(key, sizeof key, "%s.dataset", where);
        if ((st = get_string(ctx, dset, key, &out->object)) != PRECIS_OK) return st;
        if (out->object[0] != '/') {
          char *abs = precis_asprintf("/%s", out->object);
          free(out->object);
          out->object = abs;
        }
      }
      if (tensor) {
        snprintf(key, sizeof key, "%s.tensor", where);
        if ((st = get_string(ctx, tensor, key, &out->object)) != PRECIS_OK) return st;
        if (out->object[0] == '/') return fail_at(ctx, tensor, key, "a safetensors tensor name does not start with '/'");
      }
      if ((v = map_get(ctx, node, "transpose"))) {
        snprintf(key, sizeof key, "%s.transpose", where);
        if ((st = get_bool(ctx, v, key, &out->transpose)) != PRECIS_OK) return st;
      }
    }
  } else if (kind == PRECIS_DIST_FILE) {
    return fail_at(ctx, node, where, "file needs a mapping: {dist: file, path: FILE, dataset: /path}, {..., tensor: NAME}, "
                                     "{..., array: NAME} (.npz) or {dist: file, path: FILE.npy}");
  }
  precis_status st = precis_dist_validate(out);
  if (st != PRECIS_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", precis_last_error());
    return fail_at(ctx, node, where, "%s", msg);
  }
  return PRECIS_OK;
}

static void free_workload(precis_suite_workload *w) {
  free(w->name);
  free(w->description);
  precis_dist_free(&w->a);
  precis_dist_free(&w->b);
  memset(w, 0, sizeof *w);
}

void precis_suite_free(precis_suite *suite) {
  if (!suite) return;
  for (size_t i = 0; i < suite->n_workloads; i++) free_workload(&suite->workloads[i]);
  free(suite->workloads);
  free(suite->source);
  free(suite->base_dir);
  free(suite->text);
  free(suite->description);
  memset(suite, 0, sizeof *suite);
}

#define DIM_MAX ((int64_t)INT32_MAX) /* OpenBLAS (LP64) takes int dimensions */

/* reference: float64 (dgemm) | double-double (docs/high-precision.md). */
static precis_status get_reference(const parse_ctx *ctx, const yaml_node_t *node, const char *key, bool *dd) {
  if (node->type == YAML_SCALAR_NODE && strcmp(scalar(node), "float64") == 0) *dd = false;
  else if (node->type == YAML_SCALAR_NODE && strcmp(scalar(node), "double-double") == 0) *dd = true;
  else return fail_at(ctx, node, key, "expected float64 or double-double");
  return PRECIS_OK;
}

/* inputs: float32 | float64 (the stored dtype of a and b; docs/high-precision.md). */
static precis_status get_inputs(const parse_ctx *ctx, const yaml_node_t *node, const char *key, bool *f64) {
  if (node->type == YAML_SCALAR_NODE && strcmp(scalar(node), "float32") == 0) *f64 = false;
  else if (node->type == YAML_SCALAR_NODE && strcmp(scalar(node), "float64") == 0) *f64 = true;
  else return fail_at(ctx, node, key, "expected float32 or float64");
  return PRECIS_OK;
}

static precis_status parse_workload(const parse_ctx *ctx, const precis_suite *suite, const yaml_node_t *node, size_t index,
                                    precis_suite_workload *w) {
  static const char *const allowed[] = {"name", "m", "n", "k", "batch", "calib", "a", "b", "b_batched", "seed",
                                        "description", "reference", "inputs", NULL};
  char where[300], key[360];
  snprintf(where, sizeof where, "workloads[%zu]", index);
  w->line = (int)node->start_mark.line + 1;
  precis_status st = check_mapping(ctx, node, where, allowed);
  if (st != PRECIS_OK) return st;
  const yaml_node_t *v = map_get(ctx, node, "name");
  if (!v) return fail_at(ctx, node, where, "missing key \"name\"");
  if ((st = get_string(ctx, v, "name", &w->name)) != PRECIS_OK) return st;
  snprintf(where, sizeof where, "workloads[%zu] (%s)", index, w->name);
  if ((st = precis_dataset_check_name(w->name)) != PRECIS_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", precis_last_error());
    return fail_at(ctx, v, "name", "%s", msg);
  }
  struct {
    const char *name;
    int64_t *dest, lo, dflt;
    bool required;
  } ints[] = {
      {"m", &w->m, 1, suite->has_tokens ? suite->tokens : 0, !suite->has_tokens},
      {"n", &w->n, 1, 0, true},
      {"k", &w->k, 1, 0, true},
      {"batch", &w->batch, 1, 1, false},
      {"calib", &w->calib, 0, 0, false},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    v = map_get(ctx, node, ints[i].name);
    snprintf(key, sizeof key, "%s.%s", where, ints[i].name);
    if (!v) {
      if (ints[i].required)
        return fail_at(ctx, node, where, "missing key \"%s\"%s", ints[i].name,
                       strcmp(ints[i].name, "m") == 0 ? " (or a top-level tokens)" : "");
      *ints[i].dest = ints[i].dflt;
    } else if ((st = get_int(ctx, v, key, ints[i].lo, DIM_MAX, ints[i].dest)) != PRECIS_OK) {
      return st;
    }
  }
  precis_dist_init(&w->a, PRECIS_DIST_NORMAL);
  precis_dist_init(&w->b, PRECIS_DIST_NORMAL);
  if ((v = map_get(ctx, node, "a"))) {
    snprintf(key, sizeof key, "%s.a", where);
    if ((st = parse_dist(ctx, v, key, &w->a)) != PRECIS_OK) return st;
  }
  if ((v = map_get(ctx, node, "b"))) {
    snprintf(key, sizeof key, "%s.b", where);
    if ((st = parse_dist(ctx, v, key, &w->b)) != PRECIS_OK) return st;
  }
  if ((v = map_get(ctx, node, "b_batched"))) {
    snprintf(key, sizeof key, "%s.b_batched", where);
    if ((st = get_bool(ctx, v, key, &w->b_batched)) != PRECIS_OK) return st;
  }
  if ((v = map_get(ctx, node, "seed"))) {
    snprintf(key, sizeof key, "%s.seed", where);
    if ((st = get_u64(ctx, v, key, &w->seed)) != PRECIS_OK) return st;
    w->has_seed = true;
  }
  if ((v = map_get(ctx, node, "description"))) {
    snprintf(key, sizeof key, "%s.description", where);
    if ((st = get_string(ctx, v, key, &w->description)) != PRECIS_OK) return st;
  } else {
    w->description = precis_strdup("");
  }
  w->dd_reference = suite->dd_reference;
  if ((v = map_get(ctx, node, "reference"))) {
    snprintf(key, sizeof key, "%s.reference", where);
    if ((st = get_reference(ctx, v, key, &w->dd_reference)) != PRECIS_OK) return st;
  }
  w->f64_inputs = suite->f64_inputs;
  if ((v = map_get(ctx, node, "inputs"))) {
    snprintf(key, sizeof key, "%s.inputs", where);
    if ((st = get_inputs(ctx, v, key, &w->f64_inputs)) != PRECIS_OK) return st;
  }
  if (w->a.kind == PRECIS_DIST_CANCELLATION && w->k < 2)
    return fail_at(ctx, node, where, "cancellation needs k >= 2 (values cancel in pairs along K)");
  return PRECIS_OK;
}

static precis_status parse_document(const parse_ctx *ctx, precis_suite *suite) {
  static const char *const allowed[] = {"seed", "tokens", "description", "reference", "inputs", "workloads", NULL};
  const yaml_node_t *root = yaml_document_get_root_node(ctx->doc);
  if (!root) return fail_at(ctx, NULL, NULL, "empty suite (expected a mapping with a workloads list)");
  precis_status st = check_mapping(ctx, root, "suite", allowed);
  if (st != PRECIS_OK) return st;
  const yaml_node_t *v;
  if ((v = map_get(ctx, root, "seed")) && (st = get_u64(ctx, v, "seed", &suite->seed)) != PRECIS_OK) return st;
  if ((v = map_get(ctx, root, "tokens"))) {
    if ((st = get_int(ctx, v, "tokens", 1, DIM_MAX, &suite->tokens)) != PRECIS_OK) return st;
    suite->has_tokens = true;
  }
  if ((v = map_get(ctx, root, "description")) && (st = get_string(ctx, v, "description", &suite->description)) != PRECIS_OK)
    return st;
  if (!suite->description) suite->description = precis_strdup("");
  if ((v = map_get(ctx, root, "reference")) && (st = get_reference(ctx, v, "reference", &suite->dd_reference)) != PRECIS_OK)
    return st;
  if ((v = map_get(ctx, root, "inputs")) && (st = get_inputs(ctx, v, "inputs", &suite->f64_inputs)) != PRECIS_OK) return st;
  const yaml_node_t *list = map_get(ctx, root, "workloads");
  if (!list) return fail_at(ctx, root, "suite", "missing key \"workloads\" (a list of workloads)");
  if (list->type != YAML_SEQUENCE_NODE) return fail_at(ctx, list, "workloads", "expected a list, found %s", node_kind(list));
  size_t count = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
  if (count == 0) return fail_at(ctx, list, "workloads", "empty list (expected at least one workload)");
  suite->workloads = calloc(count, sizeof *suite->workloads);
  if (!suite->workloads) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  for (size_t i = 0; i < count; i++) {
    const yaml_node_t *item = yaml_document_get_node(ctx->doc, list->data.sequence.items.start[i]);
    suite->n_workloads = i + 1;
    if ((st = parse_workload(ctx, suite, item, i, &suite->workloads[i])) != PRECIS_OK) return st;
    for (size_t j = 0; j < i; j++)
      if (strcmp(suite->workloads[j].name, suite->workloads[i].name) == 0)
        return fail_at(ctx, item, "name", "duplicate workload name \"%s\" (first at line %d)", suite->workloads[i].name,
                       suite->workloads[j].line);
  }
  return PRECIS_OK;
}

precis_status precis_suite_parse(const char *text, size_t len, const char *source, const char *base_dir,
                                 precis_suite *out) {
  memset(out, 0, sizeof *out);
  yaml_parser_t parser;
  yaml_document_t doc;
  bool have_doc = false;
  precis_status st = PRECIS_OK;
  out->source = precis_strdup(source);
  out->base_dir = precis_strdup(base_dir ? base_dir : ".");
  out->text = malloc(len + 1);
  if (!out->source || !out->base_dir || !out->text) {
    precis_suite_free(out);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  memcpy(out->text, text, len);
  out->text[len] = '\0';
  if (memchr(text, '\0', len)) {
    precis_suite_free(out);
    return precis_fail(PRECIS_E_INPUT, "%s: contains a NUL byte (expected YAML text)", source);
  }
  if (!yaml_parser_initialize(&parser)) {
    precis_suite_free(out);
    return precis_fail(PRECIS_E_NOMEM, "out of memory (YAML parser)");
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)out->text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    st = precis_fail(PRECIS_E_INPUT, "%s:%zu:%zu: invalid YAML: %s%s%s", source, parser.problem_mark.line + 1,
                     parser.problem_mark.column + 1, parser.problem ? parser.problem : "syntax error",
                     parser.context ? " " : "", parser.context ? parser.context : "");
    goto done;
  }
  have_doc = true;
  parse_ctx ctx = {source, &doc};
  st = parse_document(&ctx, out);
  if (st != PRECIS_OK) goto done;
  /* A second document would be silently ignored: refuse it. */
  yaml_document_t extra;
  if (!yaml_parser_load(&parser, &extra)) {
    st = precis_fail(PRECIS_E_INPUT, "%s:%zu:%zu: invalid YAML: %s", source, parser.problem_mark.line + 1,
                     parser.problem_mark.column + 1, parser.problem ? parser.problem : "syntax error");
    goto done;
  }
  bool more = yaml_document_get_root_node(&extra) != NULL;
  yaml_document_delete(&extra);
  if (more) st = precis_fail(PRECIS_E_INPUT, "%s: holds more than one YAML document (expected one suite)", source);
done:
  if (have_doc) yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  if (st != PRECIS_OK) precis_suite_free(out);
  return st;
}

precis_status precis_suite_load_file(const char *path, precis_suite *out) {
  char *text = NULL;
  size_t len = 0;
  memset(out, 0, sizeof *out);
  precis_status st = precis_read_file(path, &text, &len);
  if (st != PRECIS_OK) return st;
  const char *slash = strrchr(path, '/');
  char *dir = slash ? precis_asprintf("%.*s", (int)(slash - path), path) : precis_strdup(".");
  if (slash == path) {
    free(dir);
    dir = precis_strdup("/");
  }
  st = precis_suite_parse(text, len, path, dir, out);
  free(dir);
  free(text);
  return st;
}

precis_status precis_suite_load_preset(const char *name, precis_suite *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < precis_preset_count; i++)
    if (strcmp(precis_presets[i].name, name) == 0) {
      char source[128];
      snprintf(source, sizeof source, "preset %s (datasets/%s.yaml)", name, name);
      return precis_suite_parse(precis_presets[i].text, precis_presets[i].size, source, ".", out);
    }
  char list[512] = "";
  size_t used = 0;
  for (size_t i = 0; i < precis_preset_count && used < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", precis_presets[i].name);
  return precis_fail(PRECIS_E_USAGE, "unknown preset \"%s\" (expected one of: %s)", name, list);
}

/* Replaces the line of top-level `key` with "key: value", or inserts that line before the first
 * top-level key. Only block-style top-level mappings can be edited this way. */
static precis_status set_top_level_line(precis_suite *suite, const char *key, const char *value) {
  yaml_parser_t parser;
  yaml_document_t doc;
  precis_status st = PRECIS_OK;
  if (!yaml_parser_initialize(&parser)) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  yaml_parser_set_input_string(&parser, (const unsigned char *)suite->text, strlen(suite->text));
  if (!yaml_parser_load(&parser, &doc)) {
    yaml_parser_delete(&parser);
    return precis_fail(PRECIS_E_INPUT, "%s: invalid YAML", suite->source);
  }
  const yaml_node_t *root = yaml_document_get_root_node(&doc);
  size_t line = SIZE_MAX;
  bool replace = false;
  if (!root || root->type != YAML_MAPPING_NODE || root->data.mapping.style == YAML_FLOW_MAPPING_STYLE) {
    st = precis_fail(PRECIS_E_USAGE, "%s: cannot set %s: the suite is not a block-style mapping", suite->source, key);
    goto done;
  }
  for (const yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
    const yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
    if (p == root->data.mapping.pairs.start) line = k->start_mark.line;
    if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), key) == 0) {
      if (v->type != YAML_SCALAR_NODE || v->start_mark.line != k->start_mark.line || v->end_mark.line != k->start_mark.line ||
          k->start_mark.column != 0) {
        st = precis_fail(PRECIS_E_USAGE, "%s:%zu: cannot set %s: write it as one line \"%s: VALUE\"", suite->source,
                         k->start_mark.line + 1, key, key);
        goto done;
      }
      line = k->start_mark.line;
      replace = true;
    }
  }
  /* Find the byte range of `line`. */
  const char *text = suite->text, *start = text;
  for (size_t l = 0; l < line && *start; l++) {
    const char *nl = strchr(start, '\n');
    start = nl ? nl + 1 : start + strlen(start);
  }
  const char *end = start;
  if (replace) {
    const char *nl = strchr(start, '\n');
    end = nl ? nl : start + strlen(start);
  }
  char *edited = precis_asprintf("%.*s%s: %s%s%s", (int)(start - text), text, key, value, replace ? "" : "\n", end);
  if (!edited) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  free(suite->text);
  suite->text = edited;
done:
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return st;
}

precis_status precis_suite_override_inputs(precis_suite *suite, const char *inputs) {
  if (strcmp(inputs, "float32") != 0 && strcmp(inputs, "float64") != 0)
    return precis_fail(PRECIS_E_USAGE, "--inputs: expected float32 or float64, found \"%s\"", inputs);
  precis_status st = set_top_level_line(suite, "inputs", inputs);
  if (st != PRECIS_OK) return st;
  precis_suite reparsed;
  st = precis_suite_parse(suite->text, strlen(suite->text), suite->source, suite->base_dir, &reparsed);
  if (st != PRECIS_OK) return st;
  precis_suite_free(suite);
  *suite = reparsed;
  return PRECIS_OK;
}

precis_status precis_suite_override(precis_suite *suite, const uint64_t *seed, const int64_t *tokens) {
  char value[32];
  precis_status st;
  if (seed) {
    snprintf(value, sizeof value, "%" PRIu64, *seed);
    if ((st = set_top_level_line(suite, "seed", value)) != PRECIS_OK) return st;
  }
  if (tokens) {
    if (*tokens < 1 || *tokens > DIM_MAX) return precis_fail(PRECIS_E_USAGE, "--tokens: expected a positive integer");
    snprintf(value, sizeof value, "%" PRId64, *tokens);
    if ((st = set_top_level_line(suite, "tokens", value)) != PRECIS_OK) return st;
  }
  precis_suite reparsed;
  char *text = suite->text, *source = suite->source, *base = suite->base_dir;
  st = precis_suite_parse(text, strlen(text), source, base, &reparsed);
  if (st != PRECIS_OK) return st;
  precis_suite_free(suite);
  *suite = reparsed;
  return PRECIS_OK;
}
