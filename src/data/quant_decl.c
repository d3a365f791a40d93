#include "quant_decl.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "base/escape.h"

static bool is_dir(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static char *dir_of(const char *path) {
  if (is_dir(path)) return precis_strdup(path);
  const char *slash = strrchr(path, '/');
  return slash ? precis_asprintf("%.*s", (int)(slash - path), path) : precis_strdup(".");
}

void precis_quant_decl_free(precis_quant_decl *d) {
  for (size_t i = 0; i < d->n_groups; i++) {
    for (size_t j = 0; j < d->groups[i].n_targets; j++) free(d->groups[i].targets[j]);
    free(d->groups[i].targets);
    free(d->groups[i].name);
  }
  free(d->groups);
  for (size_t i = 0; i < d->n_ignore; i++) free(d->ignore[i]);
  free(d->ignore);
  free(d->file);
  memset(d, 0, sizeof *d);
}

static precis_status bad(const precis_quant_decl *d, const char *field, const char *expected) {
  return precis_fail(PRECIS_E_INPUT, "%s: %s.%s: expected %s", d->file, d->where, field, expected);
}

/* A list of strings (or one string) into a fresh array. */
static precis_status string_list(const precis_quant_decl *d, const cJSON *item, const char *field, char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!item || cJSON_IsNull(item)) return PRECIS_OK;
  size_t count = cJSON_IsString(item) ? 1 : cJSON_IsArray(item) ? (size_t)cJSON_GetArraySize(item) : SIZE_MAX;
  if (count == SIZE_MAX) return bad(d, field, "a list of module names");
  *out = calloc(count ? count : 1, sizeof **out);
  if (!*out) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  const cJSON *e = cJSON_IsString(item) ? item : item->child;
  for (; e && *n < count; e = cJSON_IsString(item) ? NULL : e->next) {
    if (!cJSON_IsString(e)) return bad(d, field, "a list of strings");
    if (!((*out)[(*n)++] = precis_strdup(e->valuestring))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  return PRECIS_OK;
}

static int64_t int_field(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

/* compressed-tensors' QuantizationArgs as serialized by model_dump(). */
static precis_status parse_args(const precis_quant_decl *d, const cJSON *obj, const char *field, precis_quant_args *a) {
  memset(a, 0, sizeof *a);
  if (!obj || cJSON_IsNull(obj)) return PRECIS_OK;
  if (!cJSON_IsObject(obj)) return bad(d, field, "an object (QuantizationArgs) or null");
  a->present = true;
  a->num_bits = (int)int_field(obj, "num_bits");
  if (a->num_bits < 1 || a->num_bits > 32) return bad(d, field, "num_bits between 1 and 32");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(obj, "type");
  a->is_float = cJSON_IsString(type) && strcmp(type->valuestring, "float") == 0;
  const cJSON *sym = cJSON_GetObjectItemCaseSensitive(obj, "symmetric");
  a->symmetric = !sym || cJSON_IsTrue(sym);
  const cJSON *strategy = cJSON_GetObjectItemCaseSensitive(obj, "strategy");
  if (cJSON_IsString(strategy)) snprintf(a->strategy, sizeof a->strategy, "%s", strategy->valuestring);
  a->group_size = int_field(obj, "group_size");
  const cJSON *block = cJSON_GetObjectItemCaseSensitive(obj, "block_structure");
  if (cJSON_IsArray(block) && cJSON_GetArraySize(block) == 2) {
    a->block[0] = (int64_t)cJSON_GetArrayItem(block, 0)->valuedouble;
    a->block[1] = (int64_t)cJSON_GetArrayItem(block, 1)->valuedouble;
  } else if (cJSON_IsString(block)) { /* older releases: "128x128" */
    long long r = 0, c = 0;
    if (sscanf(block->valuestring, "%lldx%lld", &r, &c) == 2) a->block[0] = r, a->block[1] = c;
  }
  const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(obj, "dynamic");
  /* "local" (NVFP4 activations): per-group scales computed at run time under a static global scale. */
  a->dynamic = cJSON_IsTrue(dyn) || (cJSON_IsString(dyn) && strcmp(dyn->valuestring, "local") == 0);
  if (!a->strategy[0]) /* as compressed-tensors infers it */
    snprintf(a->strategy, sizeof a->strategy, "%s", a->block[0] ? "block" : a->group_size > 0 ? "group" : "tensor");
  return PRECIS_OK;
}

static precis_status add_group(precis_quant_decl *d, const char *name, precis_quant_group **out) {
  precis_quant_group *grown = realloc(d->groups, (d->n_groups + 1) * sizeof *grown);
  if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  d->groups = grown;
  *out = &d->groups[d->n_groups++];
  memset(*out, 0, sizeof **out);
  if (!((*out)->name = precis_strdup(name))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  return PRECIS_OK;
}

static precis_status all_linear(precis_quant_group *g) {
  g->targets = calloc(1, sizeof *g->targets);
  if (!g->targets || !(g->targets[0] = precis_strdup("Linear"))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  g->n_targets = 1;
  return PRECIS_OK;
}

static precis_status parse_compressed_tensors(precis_quant_decl *d, const cJSON *qc) {
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(qc, "format");
  if (cJSON_IsString(format)) snprintf(d->format, sizeof d->format, "%s", format->valuestring);
  const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
  if (!cJSON_IsObject(groups)) return bad(d, "config_groups", "an object {group name: scheme}");
  precis_status st = PRECIS_OK;
  for (const cJSON *g = groups->child; g && st == PRECIS_OK; g = g->next) {
    precis_quant_group *group = NULL;
    if ((st = add_group(d, g->string, &group)) != PRECIS_OK) break;
    char field[160];
    snprintf(field, sizeof field, "config_groups.%s", g->string);
    if (!cJSON_IsObject(g)) return bad(d, field, "a scheme object {targets, weights, input_activations}");
    snprintf(field, sizeof field, "config_groups.%s.targets", g->string);
    if ((st = string_list(d, cJSON_GetObjectItemCaseSensitive(g, "targets"), field, &group->targets, &group->n_targets)) != PRECIS_OK)
      break;
    snprintf(field, sizeof field, "config_groups.%s.weights", g->string);
    if ((st = parse_args(d, cJSON_GetObjectItemCaseSensitive(g, "weights"), field, &group->weights)) != PRECIS_OK) break;
    snprintf(field, sizeof field, "config_groups.%s.input_activations", g->string);
    if ((st = parse_args(d, cJSON_GetObjectItemCaseSensitive(g, "input_activations"), field, &group->input)) != PRECIS_OK) break;
    const cJSON *gf = cJSON_GetObjectItemCaseSensitive(g, "format");
    snprintf(group->format, sizeof group->format, "%s", cJSON_IsString(gf) ? gf->valuestring : d->format);
  }
  if (st == PRECIS_OK) st = string_list(d, cJSON_GetObjectItemCaseSensitive(qc, "ignore"), "ignore", &d->ignore, &d->n_ignore);
  return st;
}

/* ModelOpt: {"quant_algo": "NVFP4" | "FP8" | "W4A8_AWQ" ..., "group_size", "exclude_modules"}. */
static precis_status parse_modelopt(precis_quant_decl *d, const cJSON *q) {
  const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
  if (!cJSON_IsString(algo)) return bad(d, "quant_algo", "a string (NVFP4, FP8, ...)");
  snprintf(d->format, sizeof d->format, "%s", algo->valuestring);
  precis_quant_group *g = NULL;
  precis_status st = add_group(d, algo->valuestring, &g);
  if (st == PRECIS_OK) st = all_linear(g);
  if (st != PRECIS_OK) return st;
  snprintf(g->format, sizeof g->format, "%s", algo->valuestring);
  precis_quant_args w = {.present = true, .symmetric = true, .is_float = true};
  if (strcmp(algo->valuestring, "NVFP4") == 0) {
    int64_t group = int_field(q, "group_size");
    w.num_bits = 4;
    snprintf(w.strategy, sizeof w.strategy, "tensor_group");
    w.group_size = group ? group : 16;
    g->weights = w;
    g->input = w;
    g->input.dynamic = true; /* per-block scales at run time under the static global input_scale */
  } else if (strcmp(algo->valuestring, "FP8") == 0) {
    w.num_bits = 8;
    snprintf(w.strategy, sizeof w.strategy, "tensor");
    g->weights = w;
    g->input = w; /* static per-tensor input_scale */
  } else {
    return precis_fail(PRECIS_E_INPUT, "%s: %s.quant_algo \"%s\": not read (NVFP4 and FP8 are)", d->file, d->where,
                       algo->valuestring);
  }
  return string_list(d, cJSON_GetObjectItemCaseSensitive(q, "exclude_modules"), "exclude_modules", &d->ignore, &d->n_ignore);
}

/* DeepSeek-V3's {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}. */
static precis_status parse_fp8(precis_quant_decl *d, const cJSON *qc) {
  precis_quant_group *g = NULL;
  precis_status st = add_group(d, "fp8", &g);
  if (st == PRECIS_OK) st = all_linear(g);
  if (st != PRECIS_OK) return st;
  precis_quant_args w = {.present = true, .symmetric = true, .is_float = true, .num_bits = 8};
  const cJSON *block = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
  if (cJSON_IsArray(block) && cJSON_GetArraySize(block) == 2) {
    w.block[0] = (int64_t)cJSON_GetArrayItem(block, 0)->valuedouble;
    w.block[1] = (int64_t)cJSON_GetArrayItem(block, 1)->valuedouble;
    snprintf(w.strategy, sizeof w.strategy, "block");
  } else {
    snprintf(w.strategy, sizeof w.strategy, "tensor");
  }
  g->weights = w;
  const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(qc, "activation_scheme");
  g->input = (precis_quant_args){.present = true, .symmetric = true, .is_float = true, .num_bits = 8};
  g->input.dynamic = !cJSON_IsString(scheme) || strcmp(scheme->valuestring, "static") != 0;
  if (w.block[1] && g->input.dynamic) { /* per token, per group of the weight block's width */
    snprintf(g->input.strategy, sizeof g->input.strategy, "group");
    g->input.group_size = w.block[1];
  } else {
    snprintf(g->input.strategy, sizeof g->input.strategy, "%s", g->input.dynamic ? "token" : "tensor");
  }
  snprintf(d->format, sizeof d->format, "fp8%s", w.block[0] ? " block" : "");
  snprintf(g->format, sizeof g->format, "%s", d->format);
  return string_list(d, cJSON_GetObjectItemCaseSensitive(qc, "modules_to_not_convert"), "modules_to_not_convert", &d->ignore,
                     &d->n_ignore);
}

/* gpt-oss: {"quant_method": "mxfp4", "modules_to_not_convert": [...]}: FP4 E2M1 weights in blocks of
 * 32 with an E8M0 scale each; activations not quantized. */
static precis_status parse_mxfp4(precis_quant_decl *d, const cJSON *qc) {
  precis_quant_group *g = NULL;
  precis_status st = add_group(d, "mxfp4", &g);
  if (st != PRECIS_OK) return st;
  /* transformers' replace_with_mxfp4_linear converts only GptOssMLP's experts: the fused
   * gate_up_proj and down_proj, one layer per expert here (model.h). */
  g->targets = calloc(1, sizeof *g->targets);
  if (!g->targets || !(g->targets[0] = precis_strdup("re:.*\\.experts\\.(gate_up_proj|down_proj)\\[[0-9]+\\]$")))
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  g->n_targets = 1;
  g->weights = (precis_quant_args){.present = true, .symmetric = true, .is_float = true, .num_bits = 4, .group_size = 32};
  snprintf(g->weights.strategy, sizeof g->weights.strategy, "group");
  snprintf(d->format, sizeof d->format, "mxfp4");
  snprintf(g->format, sizeof g->format, "mxfp4");
  return string_list(d, cJSON_GetObjectItemCaseSensitive(qc, "modules_to_not_convert"), "modules_to_not_convert", &d->ignore,
                     &d->n_ignore);
}

static precis_status read_json(const char *file, cJSON **out) {
  char *text = NULL;
  size_t size = 0;
  *out = NULL;
  precis_status st = precis_read_file(file, &text, &size);
  if (st != PRECIS_OK) return st;
  *out = cJSON_ParseWithLength(text, size);
  free(text);
  if (!*out) return precis_fail(PRECIS_E_INPUT, "%s: not valid JSON", file);
  return PRECIS_OK;
}

precis_status precis_quant_decl_read(const char *path, precis_quant_decl *out) {
  memset(out, 0, sizeof *out);
  char *dir = dir_of(path), *config = NULL, *modelopt = NULL;
  cJSON *doc = NULL;
  precis_status st = PRECIS_OK;
  if (!dir || !(config = precis_asprintf("%s/config.json", dir)) || !(modelopt = precis_asprintf("%s/hf_quant_config.json", dir))) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (precis_path_exists(modelopt)) {
    if ((st = read_json(modelopt, &doc)) != PRECIS_OK) goto done;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(doc, "quantization");
    out->file = precis_strdup(modelopt);
    snprintf(out->where, sizeof out->where, "quantization");
    snprintf(out->producer, sizeof out->producer, "modelopt");
    out->present = true;
    st = cJSON_IsObject(q) ? parse_modelopt(out, q) : bad(out, "", "an object {quant_algo, exclude_modules}");
    goto done;
  }
  if (!precis_path_exists(config)) goto done;
  if ((st = read_json(config, &doc)) != PRECIS_OK) goto done;
  const cJSON *qc = cJSON_GetObjectItemCaseSensitive(doc, "quantization_config");
  if (!qc || cJSON_IsNull(qc)) goto done;
  out->present = true;
  out->file = precis_strdup(config);
  snprintf(out->where, sizeof out->where, "quantization_config");
  if (!out->file) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (!cJSON_IsObject(qc)) {
    st = bad(out, "", "an object");
    goto done;
  }
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
  snprintf(out->producer, sizeof out->producer, "%s", cJSON_IsString(method) ? method->valuestring : "unknown");
  if (strcmp(out->producer, "compressed-tensors") == 0) st = parse_compressed_tensors(out, qc);
  else if (strcmp(out->producer, "modelopt") == 0) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(qc, "quantization");
    st = parse_modelopt(out, cJSON_IsObject(q) ? q : qc);
  } else if (strcmp(out->producer, "fp8") == 0) st = parse_fp8(out, qc);
  else if (strcmp(out->producer, "mxfp4") == 0) st = parse_mxfp4(out, qc);
  /* Other producers (gptq, awq, bitsandbytes ...) are still a declaration that the weights are
   * quantized: present, with no group precis can check against. */
done:
  if (st != PRECIS_OK) precis_quant_decl_free(out);
  cJSON_Delete(doc);
  free(dir);
  free(config);
  free(modelopt);
  return st;
}

/* compressed-tensors matches "re:" targets with Python's re.match (anchored at the start only).
 * POSIX extended syntax covers what such patterns use; \d is rewritten as [0-9]. */
static bool regex_matches(const char *pattern, const char *name) {
  size_t len = strlen(pattern);
  char *ere = malloc(6 * len + 8), *p = ere;
  if (!ere) return false;
  *p++ = '^';
  *p++ = '(';
  for (const char *c = pattern; *c; c++) {
    if (c[0] == '\\' && c[1] == 'd') {
      memcpy(p, "[0-9]", 5);
      p += 5;
      c++;
    } else {
      *p++ = *c;
    }
  }
  *p++ = ')';
  *p = '\0';
  regex_t re;
  bool ok = regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) == 0;
  bool match = ok && regexec(&re, name, 0, NULL, 0) == 0;
  if (ok) regfree(&re);
  free(ere);
  return match;
}

/* Every layer precis reads is a linear layer, so the class name "Linear" names them all. */
static bool target_matches(const char *target, const char *layer) {
  if (strncmp(target, "re:", 3) == 0) return regex_matches(target + 3, layer);
  if (strcmp(target, "Linear") == 0) return true;
  if (strcmp(target, layer) == 0) return true;
  /* ModelOpt's exclude_modules and gpt-oss's modules_to_not_convert are fnmatch-like globs or
   * name prefixes ("lm_head", "model.layers.*.self_attn"). */
  size_t n = strlen(target);
  if (strncmp(target, layer, n) == 0 && layer[n] == '.') return true;
  if (strchr(target, '*')) {
    const char *star = strchr(target, '*');
    return strncmp(target, layer, (size_t)(star - target)) == 0 && strlen(layer) >= strlen(star + 1) &&
           strcmp(layer + strlen(layer) - strlen(star + 1), star + 1) == 0;
  }
  return false;
}

/* transformers' should_convert_module (quantizers/quantizers_utils.py): the pattern as a regex from
 * the start of the name up to a module boundary (a '.' next, or the end), or a suffix of the name. */
static bool transformers_pattern_matches(const char *pattern, const char *name) {
  size_t n = strlen(pattern), len = strlen(name);
  if (len >= n && strcmp(name + len - n, pattern) == 0) return true;
  char *ere = precis_asprintf("%s)(\\.|$", pattern); /* regex_matches wraps it in ^( ) */
  bool match = ere && regex_matches(ere, name);
  free(ere);
  return match;
}

static bool name_matches(const precis_quant_decl *d, const char *target, const char *layer, bool ignore_entry) {
  if (ignore_entry && !strcmp(d->producer, "mxfp4")) return transformers_pattern_matches(target, layer);
  return target_matches(target, layer);
}

/* The layer as named, then (with --strip-prefix P) as P + layer: the producer named its modules
 * in the checkpoint it wrote, with the prefix or without. */
static bool matches_either(const precis_quant_decl *d, const char *target, const char *layer, const char *prefixed,
                           bool ignore_entry) {
  return name_matches(d, target, layer, ignore_entry) || (prefixed && name_matches(d, target, prefixed, ignore_entry));
}

int precis_quant_decl_match(const precis_quant_decl *d, const char *layer, bool *ignored) {
  *ignored = false;
  char *prefixed = d->strip_prefix && d->strip_prefix[0] ? precis_asprintf("%s%s", d->strip_prefix, layer) : NULL;
  int found = -1;
  for (size_t i = 0; i < d->n_ignore && !*ignored; i++) *ignored = matches_either(d, d->ignore[i], layer, prefixed, true);
  for (size_t g = 0; g < d->n_groups && found < 0; g++)
    for (size_t t = 0; t < d->groups[g].n_targets && found < 0; t++)
      if (matches_either(d, d->groups[g].targets[t], layer, prefixed, false)) found = (int)g;
  free(prefixed);
  return found;
}

void precis_quant_args_describe(const precis_quant_args *a, bool activations, char *buf, size_t len) {
  if (!a->present) {
    snprintf(buf, len, "%s", activations ? "not quantized" : "none");
    return;
  }
  char kind[16], granularity[48];
  if (a->is_float && a->num_bits == 8) snprintf(kind, sizeof kind, "FP8 E4M3");
  else if (a->is_float && a->num_bits == 4) snprintf(kind, sizeof kind, "FP4 E2M1");
  else snprintf(kind, sizeof kind, "%s%d", a->is_float ? "FP" : "INT", a->num_bits);
  if (!strcmp(a->strategy, "group") || !strcmp(a->strategy, "tensor_group"))
    snprintf(granularity, sizeof granularity, "group %" PRId64 "%s", a->group_size,
             !strcmp(a->strategy, "tensor_group") ? " + global scale" : "");
  else if (!strcmp(a->strategy, "block"))
    snprintf(granularity, sizeof granularity, "block %" PRId64 "x%" PRId64, a->block[0], a->block[1]);
  else if (!strcmp(a->strategy, "channel")) snprintf(granularity, sizeof granularity, "per channel");
  else if (!strcmp(a->strategy, "token")) snprintf(granularity, sizeof granularity, "per token");
  else snprintf(granularity, sizeof granularity, "per %s", a->strategy);
  snprintf(buf, len, "%s %s, %s%s", kind, a->is_float ? "" : a->symmetric ? "symmetric" : "asymmetric", granularity,
           !activations ? "" : a->dynamic ? ", dynamic" : ", static input_scale");
  /* "FP8 E4M3 , ..." -> "FP8 E4M3, ..." */
  char *gap = strstr(buf, " ,");
  if (gap) memmove(gap, gap + 1, strlen(gap + 1) + 1);
}

void precis_quant_decl_describe(const precis_quant_decl *d, char *buf, size_t len) {
  const char *slash = d->file ? strrchr(d->file, '/') : NULL;
  snprintf(buf, len, "%s%s%s (%s's %s)", d->producer, d->format[0] ? " " : "", d->format,
           slash ? slash + 1 : d->file ? d->file : "?", d->where);
}
