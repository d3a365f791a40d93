/* report.json (DESIGN §8), the source of truth: the writer, the reader that brings a report back
 * into the results model exactly (every double printed in its shortest round-trip form, null for
 * NaN/absent), and the journal's one-row-per-line form. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "numerics/recipe.h"
#include "report.h"
#include "report_util.h"

/* ---------------------------------------------------------------- writer */

typedef struct json_out {
  precis_buf *b;
  bool pretty;
  int depth;
  bool need_comma[32];
  bool inline_depth[32]; /* arrays of numbers stay on one line */
  bool after_key;        /* the next value follows a key: no separator */
} json_out;

static void jo_newline(json_out *o) {
  if (!o->pretty) return;
  precis_buf_append(o->b, "\n");
  for (int i = 0; i < o->depth; i++) precis_buf_append(o->b, "  ");
}

/* Separator and indentation before a value or a key. */
static void jo_item(json_out *o) {
  if (o->depth == 0) return;
  if (o->need_comma[o->depth]) precis_buf_append(o->b, o->inline_depth[o->depth] && o->pretty ? ", " : ",");
  o->need_comma[o->depth] = true;
  if (!o->inline_depth[o->depth]) jo_newline(o);
}

static void jo_string_raw(precis_buf *b, const char *s) {
  precis_buf_append(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': precis_buf_append(b, "\\\""); break;
    case '\\': precis_buf_append(b, "\\\\"); break;
    case '\n': precis_buf_append(b, "\\n"); break;
    case '\r': precis_buf_append(b, "\\r"); break;
    case '\t': precis_buf_append(b, "\\t"); break;
    default:
      if (*p < 0x20 || *p == 0x7f) precis_buf_appendf(b, "\\u%04x", *p);
      else precis_buf_append_n(b, (const char *)p, 1);
    }
  }
  precis_buf_append(b, "\"");
}

static void jo_open(json_out *o, const char *bracket, bool inline_items) {
  precis_buf_append(o->b, bracket);
  o->depth++;
  o->need_comma[o->depth] = false;
  o->inline_depth[o->depth] = inline_items || o->inline_depth[o->depth - 1];
}

static void jo_close(json_out *o, const char *bracket) {
  bool had_items = o->need_comma[o->depth];
  bool was_inline = o->inline_depth[o->depth];
  o->depth--;
  if (had_items && !was_inline) jo_newline(o);
  precis_buf_append(o->b, bracket);
}

static void jo_key(json_out *o, const char *key) {
  jo_item(o);
  jo_string_raw(o->b, key);
  precis_buf_append(o->b, o->pretty ? ": " : ":");
}

/* Values after a key take no separator; values in arrays do. */
static void jo_value_prefix(json_out *o) {
  if (o->after_key) o->after_key = false;
  else jo_item(o);
}

static void jo_k(json_out *o, const char *key) {
  jo_key(o, key);
  o->after_key = true;
}

static void jo_str(json_out *o, const char *s) {
  jo_value_prefix(o);
  if (s) jo_string_raw(o->b, s);
  else precis_buf_append(o->b, "null");
}

static void jo_num(json_out *o, double v) {
  jo_value_prefix(o);
  char buf[40];
  precis_format_double(buf, sizeof buf, v);
  precis_buf_append(o->b, buf);
}

static void jo_int(json_out *o, long long v) {
  jo_value_prefix(o);
  precis_buf_appendf(o->b, "%lld", v);
}

static void jo_bytes(json_out *o, long long v) {
  if (v < 0) jo_str(o, NULL);
  else jo_int(o, v);
}

static void jo_bool(json_out *o, bool v) {
  jo_value_prefix(o);
  precis_buf_append(o->b, v ? "true" : "false");
}

static void jo_begin_object(json_out *o, bool inline_items) {
  jo_value_prefix(o);
  jo_open(o, "{", inline_items);
}
static void jo_end_object(json_out *o) { jo_close(o, "}"); }
static void jo_begin_array(json_out *o, bool inline_items) {
  jo_value_prefix(o);
  jo_open(o, "[", inline_items);
}
static void jo_end_array(json_out *o) { jo_close(o, "]"); }

/* A kv value flagged as a number is written bare: numbers in their shortest round-trip form,
 * JSON literals/arrays/objects (kept by the reader from keys precis does not know) as they are;
 * anything else is written as a string so that the document stays valid. */
static void jo_kv_value(json_out *o, const precis_kv *kv) {
  if (!kv->value) {
    jo_str(o, NULL);
    return;
  }
  if (!kv->is_number) {
    jo_str(o, kv->value);
    return;
  }
  char *end = NULL;
  double v = strtod(kv->value, &end);
  if (end != kv->value && *end == '\0' && isfinite(v)) {
    jo_num(o, v);
    return;
  }
  cJSON *parsed = cJSON_Parse(kv->value);
  if (parsed) {
    char *text = cJSON_PrintUnformatted(parsed);
    cJSON_Delete(parsed);
    if (text) {
      jo_value_prefix(o);
      precis_buf_append(o->b, text);
      free(text);
      return;
    }
  }
  jo_str(o, kv->value);
}

static void jo_kv_members(json_out *o, const precis_kv_list *list) {
  for (size_t i = 0; i < list->count; i++) {
    jo_k(o, list->items[i].key);
    jo_kv_value(o, &list->items[i]);
  }
}

/* min_samples: the run's --min-samples, for below_min_samples (0: not known, as in the journal). */
static void write_row(json_out *o, const precis_row *row, long min_samples) {
  jo_begin_object(o, false);
  jo_k(o, "workload"); jo_str(o, row->workload);
  jo_k(o, "recipe"); jo_str(o, row->recipe);
  jo_k(o, "spec"); jo_str(o, row->spec);
  jo_k(o, "description"); jo_str(o, row->description);
  if (row->layer) {
    jo_k(o, "layer"); jo_str(o, row->layer);
  }
  jo_k(o, "recipe_description"); jo_str(o, row->recipe_description);
  jo_k(o, "m"); jo_int(o, row->m);
  jo_k(o, "n"); jo_int(o, row->n);
  jo_k(o, "k"); jo_int(o, row->k);
  jo_k(o, "batch"); jo_int(o, row->batch);
  jo_k(o, "status"); jo_str(o, precis_row_status_str(row->status));
  jo_k(o, "reason"); jo_str(o, row->reason);
  jo_k(o, "verdict"); jo_str(o, precis_verdict_str(row->verdict));
  jo_k(o, "verdict_detail"); jo_str(o, row->verdict_detail);
  jo_k(o, "criteria");
  jo_begin_array(o, true);
  for (size_t i = 0; i < row->criteria.count; i++) {
    char text[96];
    precis_criterion_format(&row->criteria.items[i], text, sizeof text);
    jo_str(o, text);
  }
  jo_end_array(o);
  jo_k(o, "error");
  jo_begin_object(o, false);
  for (int id = 0; id < PRECIS_METRIC_COUNT; id++) {
    const precis_metric_def *def = precis_metric_get((precis_metric_id)id);
    jo_k(o, def->key);
    if (!row->error[id].present) {
      jo_str(o, NULL);
      continue;
    }
    jo_begin_object(o, true);
    jo_k(o, "worst"); jo_num(o, row->error[id].worst);
    jo_k(o, "mean"); jo_num(o, row->error[id].mean);
    jo_end_object(o);
  }
  jo_end_object(o);
  if (row->error[PRECIS_LOGIT_METRIC_FIRST].present) {
    /* A logit workload's row (docs/criteria.md): KL both ways and top-1 agreement, worst and mean
     * over the held-out samples as the error metrics are. */
    jo_k(o, "logits");
    jo_begin_object(o, false);
    for (int id = PRECIS_LOGIT_METRIC_FIRST; id < PRECIS_METRIC_ALL; id++) {
      jo_k(o, precis_metric_get((precis_metric_id)id)->key);
      if (!row->error[id].present) {
        jo_str(o, NULL);
        continue;
      }
      jo_begin_object(o, true);
      jo_k(o, "worst"); jo_num(o, row->error[id].worst);
      jo_k(o, "mean"); jo_num(o, row->error[id].mean);
      jo_end_object(o);
    }
    jo_end_object(o);
  }
  const precis_timing *t = &row->time;
  jo_k(o, "time");
  jo_begin_object(o, false);
  jo_k(o, "min_ms"); jo_num(o, t->min_ms);
  jo_k(o, "median_ms"); jo_num(o, t->median_ms);
  jo_k(o, "mean_ms"); jo_num(o, t->mean_ms);
  jo_k(o, "p95_ms"); jo_num(o, t->p95_ms);
  jo_k(o, "p99_ms"); jo_num(o, t->p99_ms);
  jo_k(o, "stdev_ms"); jo_num(o, t->stdev_ms);
  jo_k(o, "samples"); jo_int(o, t->samples);
  jo_k(o, "calls_per_sample"); jo_int(o, t->calls_per_sample);
  if (min_samples > 0) {
    jo_k(o, "below_min_samples");
    jo_bool(o, precis_row_few_samples(row, min_samples));
  }
  jo_k(o, "convert_ms"); jo_num(o, t->convert_ms);
  jo_k(o, "e2e_median_ms"); jo_num(o, t->e2e_median_ms);
  jo_k(o, "samples_ms");
  jo_begin_array(o, true);
  for (size_t i = 0; i < t->n_samples_ms; i++) jo_num(o, t->samples_ms[i]);
  jo_end_array(o);
  jo_end_object(o);
  jo_k(o, "tflops"); jo_num(o, row->tflops);
  if (row->loss.present) {
    jo_k(o, "loss_change");
    jo_begin_object(o, false);
    jo_k(o, "taylor");
    jo_begin_object(o, false);
    jo_k(o, "mean"); jo_num(o, row->loss.taylor_mean);
    jo_k(o, "worst"); jo_num(o, row->loss.taylor_worst);
    jo_end_object(o);
    jo_k(o, "fisher");
    jo_begin_object(o, false);
    jo_k(o, "mean"); jo_num(o, row->loss.fisher_mean);
    jo_k(o, "worst"); jo_num(o, row->loss.fisher_worst);
    jo_end_object(o);
    jo_end_object(o);
  }
  const precis_memory *mem = &row->memory;
  jo_k(o, "memory");
  jo_begin_object(o, false);
  jo_k(o, "tensor_bytes"); jo_bytes(o, mem->tensor_bytes);
  jo_k(o, "tracked_peak_bytes"); jo_bytes(o, mem->tracked_peak_bytes);
  jo_k(o, "device_baseline_bytes"); jo_bytes(o, mem->device_baseline_bytes);
  jo_k(o, "device_peak_bytes"); jo_bytes(o, mem->device_peak_bytes);
  jo_k(o, "untracked_bytes"); jo_bytes(o, mem->untracked_bytes);
  jo_k(o, "host_peak_rss_bytes"); jo_bytes(o, mem->host_peak_rss_bytes);
  jo_end_object(o);
  jo_k(o, "details");
  jo_begin_object(o, false);
  jo_kv_members(o, &row->details);
  jo_end_object(o);
  jo_k(o, "host"); jo_str(o, row->host);
  jo_k(o, "part"); jo_int(o, row->part);
  jo_k(o, "rank"); if (row->rank >= 0) jo_int(o, row->rank); else jo_str(o, NULL);
  jo_k(o, "device"); if (row->device >= 0) jo_int(o, row->device); else jo_str(o, NULL);
  jo_k(o, "target"); jo_str(o, row->target);
  jo_end_object(o);
}

static void write_report(json_out *o, const precis_report *r) {
  jo_begin_object(o, false);
  jo_k(o, "format"); jo_str(o, PRECIS_REPORT_FORMAT);
  jo_k(o, "format_version"); jo_int(o, r->format_version ? r->format_version : PRECIS_REPORT_FORMAT_VERSION);
  jo_k(o, "complete"); jo_bool(o, r->complete);
  jo_k(o, "tool");
  jo_begin_object(o, false);
  jo_k(o, "name"); jo_str(o, "precis");
  jo_k(o, "version"); jo_str(o, r->tool_version);
  jo_k(o, "commit"); jo_str(o, r->tool_commit);
  jo_end_object(o);
  jo_k(o, "environment");
  jo_begin_object(o, false);
  jo_kv_members(o, &r->environment);
  jo_end_object(o);
  jo_k(o, "dataset");
  jo_begin_object(o, false);
  jo_k(o, "path"); jo_str(o, r->dataset_path);
  jo_k(o, "dataset_id"); jo_str(o, r->dataset_id);
  jo_k(o, "label"); jo_str(o, r->dataset_label);
  jo_end_object(o);
  jo_k(o, "settings");
  jo_begin_object(o, false);
  jo_k(o, "recipes");
  jo_begin_array(o, true);
  for (size_t i = 0; i < r->n_recipes; i++) jo_str(o, r->recipes[i]);
  jo_end_array(o);
  jo_k(o, "criteria");
  jo_begin_array(o, true);
  for (size_t i = 0; i < r->n_criteria; i++) jo_str(o, r->criteria[i]);
  jo_end_array(o);
  for (size_t i = 0; i < r->settings.count; i++) {
    const precis_kv *kv = &r->settings.items[i];
    if (strcmp(kv->key, "recipes") == 0 || strcmp(kv->key, "criteria") == 0) continue;
    jo_k(o, kv->key);
    jo_kv_value(o, kv);
  }
  jo_end_object(o);
  jo_k(o, "rows");
  jo_begin_array(o, false);
  for (size_t i = 0; i < r->n_rows; i++) write_row(o, &r->rows[i], precis_report_min_samples(r));
  jo_end_array(o);
  jo_end_object(o);
}

static char *report_to_json(const precis_report *report) {
  precis_buf b;
  precis_buf_init(&b);
  json_out o = {.b = &b, .pretty = true};
  write_report(&o, report);
  precis_buf_append(&b, "\n");
  return precis_buf_take(&b);
}

precis_status precis_report_write_json(const precis_report *report, const char *path, bool force) {
  char *text = report_to_json(report);
  if (!text) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory formatting the report", path);
  precis_status st = precis_atomic_write_text(path, text, force);
  free(text);
  return st;
}

char *precis_row_to_json_line(const precis_row *row) {
  precis_buf b;
  precis_buf_init(&b);
  json_out o = {.b = &b, .pretty = false};
  write_row(&o, row, 0);
  return precis_buf_take(&b);
}

/* ---------------------------------------------------------------- reader */

/* Where the reader is in the document, for messages: "rows[3].time.median_ms". */
typedef struct json_in {
  const char *file;
  char path[256];
  precis_status st;
} json_in;

static const char *json_type_name(const cJSON *v) {
  if (!v) return "nothing (key missing)";
  if (cJSON_IsNull(v)) return "null";
  if (cJSON_IsBool(v)) return "a boolean";
  if (cJSON_IsNumber(v)) return "a number";
  if (cJSON_IsString(v)) return "a string";
  if (cJSON_IsArray(v)) return "an array";
  if (cJSON_IsObject(v)) return "an object";
  return "an invalid value";
}

static bool ji_bad(json_in *in, const char *key, const char *expected, const cJSON *found) {
  if (in->st == PRECIS_OK)
    in->st = precis_fail(PRECIS_E_INPUT, "%s: %s%s%s: expected %s, found %s", in->file, in->path,
                         in->path[0] && key[0] ? "." : "", key, expected, json_type_name(found));
  return false;
}

/* Pushes ".key" onto the path, or "rows[i]" when key is NULL; returns the previous length for
 * ji_pop. */
static size_t ji_push(json_in *in, const char *key, size_t index) {
  size_t len = strlen(in->path);
  if (key) snprintf(in->path + len, sizeof in->path - len, "%s%s", len ? "." : "", key);
  else snprintf(in->path + len, sizeof in->path - len, "rows[%zu]", index);
  return len;
}
static void ji_pop(json_in *in, size_t len) { in->path[len] = '\0'; }

/* Optional string: absent or null gives NULL. */
static bool ji_string(json_in *in, const cJSON *obj, const char *key, char **out, bool required) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v)) {
    if (required) return ji_bad(in, key, "a string", v);
    return true;
  }
  if (!cJSON_IsString(v)) return ji_bad(in, key, "a string or null", v);
  *out = precis_strdup(v->valuestring);
  if (!*out) {
    in->st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", in->file);
    return false;
  }
  return true;
}

static bool ji_double(json_in *in, const cJSON *obj, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NAN;
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsNumber(v)) return ji_bad(in, key, "a number or null", v);
  *out = v->valuedouble;
  return true;
}

static bool ji_integer(json_in *in, const cJSON *obj, const char *key, long long *out, long long absent) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = absent;
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9.007199254740992e15)
    return ji_bad(in, key, "an integer or null", v);
  *out = (long long)v->valuedouble;
  return true;
}

static bool ji_kv_object(json_in *in, const cJSON *obj, precis_kv_list *list, const char *const *skip) {
  const cJSON *item;
  cJSON_ArrayForEach(item, obj) {
    bool skipped = false;
    for (const char *const *s = skip; s && *s; s++)
      if (strcmp(item->string, *s) == 0) skipped = true;
    if (skipped) continue;
    size_t before = list->count;
    if (cJSON_IsNull(item)) {
      precis_kv_set(list, item->string, NULL);
    } else if (cJSON_IsString(item)) {
      precis_kv_set(list, item->string, item->valuestring);
    } else if (cJSON_IsNumber(item)) {
      char num[40];
      precis_format_double(num, sizeof num, item->valuedouble);
      precis_kv_set(list, item->string, num);
      if (list->count > before) list->items[list->count - 1].is_number = true;
    } else {
      char *text = cJSON_PrintUnformatted(item);
      precis_kv_set(list, item->string, text);
      if (list->count > before) list->items[list->count - 1].is_number = true;
      free(text);
    }
    if (list->count == before) {
      in->st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", in->file);
      return false;
    }
  }
  return true;
}

static bool ji_object(json_in *in, const cJSON *parent, const char *key, const cJSON **out, bool required) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(parent, key);
  *out = NULL;
  if (!v || cJSON_IsNull(v)) {
    if (required) return ji_bad(in, key, "an object", v);
    return true;
  }
  if (!cJSON_IsObject(v)) return ji_bad(in, key, "an object", v);
  *out = v;
  return true;
}

/* The row's canonical spec: as written (normalized), or, in reports from before specs, the spec of
 * the preset the row names. */
static bool read_spec(json_in *in, const cJSON *obj, precis_row *row) {
  char *given = NULL;
  if (!ji_string(in, obj, "spec", &given, false)) return false;
  const char *text = given;
  if (!text) text = precis_recipe_name_spec(row->recipe);
  if (!text) return true; /* an unknown name without a spec: it pairs with nothing */
  precis_spec spec;
  precis_status st = precis_spec_parse(text, &spec);
  free(given);
  if (st != PRECIS_OK) {
    if (in->st == PRECIS_OK)
      in->st = precis_fail(PRECIS_E_INPUT, "%s: %s.spec: %s", in->file, in->path, precis_last_error());
    return false;
  }
  char canonical[PRECIS_SPEC_TEXT_MAX];
  precis_spec_format(&spec, canonical, sizeof canonical);
  row->spec = precis_strdup(canonical);
  return true;
}

static bool read_row(json_in *in, const cJSON *obj, precis_row *row) {
  if (!cJSON_IsObject(obj)) return ji_bad(in, "", "an object (one row)", obj);
  if (!ji_string(in, obj, "workload", &row->workload, true) || !ji_string(in, obj, "recipe", &row->recipe, true) ||
      !ji_string(in, obj, "description", &row->description, false) ||
      !ji_string(in, obj, "layer", &row->layer, false) ||
      !ji_string(in, obj, "recipe_description", &row->recipe_description, false) ||
      !ji_integer(in, obj, "m", &row->m, 0) || !ji_integer(in, obj, "n", &row->n, 0) ||
      !ji_integer(in, obj, "k", &row->k, 0) || !ji_integer(in, obj, "batch", &row->batch, 0) ||
      !ji_string(in, obj, "reason", &row->reason, false) ||
      !ji_string(in, obj, "verdict_detail", &row->verdict_detail, false) || !read_spec(in, obj, row))
    return false;

  const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
  if (!cJSON_IsString(status) || !precis_row_status_parse(status->valuestring, &row->status))
    return ji_bad(in, "status", "one of \"ok\", \"unsupported\", \"does-not-fit\", \"failed\"", status);

  const cJSON *verdict = cJSON_GetObjectItemCaseSensitive(obj, "verdict");
  if (!verdict || cJSON_IsNull(verdict)) row->verdict = PRECIS_VERDICT_NONE;
  else if (cJSON_IsString(verdict) && strcmp(verdict->valuestring, "pass") == 0) row->verdict = PRECIS_VERDICT_PASS;
  else if (cJSON_IsString(verdict) && strcmp(verdict->valuestring, "fail") == 0) row->verdict = PRECIS_VERDICT_FAIL;
  else return ji_bad(in, "verdict", "\"pass\", \"fail\" or null", verdict);

  const cJSON *criteria = cJSON_GetObjectItemCaseSensitive(obj, "criteria");
  if (criteria && !cJSON_IsNull(criteria)) {
    if (!cJSON_IsArray(criteria)) return ji_bad(in, "criteria", "an array of strings", criteria);
    const cJSON *c;
    cJSON_ArrayForEach(c, criteria) {
      if (!cJSON_IsString(c)) return ji_bad(in, "criteria", "an array of strings", c);
      if (row->criteria.count == PRECIS_MAX_CRITERIA)
        return ji_bad(in, "criteria", "at most 32 criteria", criteria);
      if (precis_criterion_parse(c->valuestring, &row->criteria.items[row->criteria.count]) != PRECIS_OK) {
        precis_error_prefix("%s: %s%scriteria", in->file, in->path, in->path[0] ? "." : "");
        in->st = PRECIS_E_INPUT;
        return false;
      }
      row->criteria.count++;
    }
  }

  static const struct { const char *key; int first, end; } metric_groups[] = {
      {"error", 0, PRECIS_METRIC_COUNT}, {"logits", PRECIS_LOGIT_METRIC_FIRST, PRECIS_METRIC_ALL}};
  for (size_t g = 0; g < sizeof metric_groups / sizeof metric_groups[0]; g++) {
    const cJSON *error;
    if (!ji_object(in, obj, metric_groups[g].key, &error, false)) return false;
    if (error) {
      size_t saved = ji_push(in, metric_groups[g].key, 0);
      for (int id = metric_groups[g].first; id < metric_groups[g].end; id++) {
        const char *key = precis_metric_get((precis_metric_id)id)->key;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(error, key);
        if (!m || cJSON_IsNull(m)) continue;
        if (!cJSON_IsObject(m)) return ji_bad(in, key, "an object {\"worst\", \"mean\"} or null", m);
        size_t saved_metric = ji_push(in, key, 0);
        if (!ji_double(in, m, "worst", &row->error[id].worst) || !ji_double(in, m, "mean", &row->error[id].mean))
          return false;
        ji_pop(in, saved_metric);
        row->error[id].present = true;
      }
      ji_pop(in, saved);
    }
  }

  const cJSON *time;
  if (!ji_object(in, obj, "time", &time, false)) return false;
  if (time) {
    precis_timing *t = &row->time;
    size_t saved = ji_push(in, "time", 0);
    long long samples, calls;
    if (!ji_double(in, time, "min_ms", &t->min_ms) || !ji_double(in, time, "median_ms", &t->median_ms) ||
        !ji_double(in, time, "mean_ms", &t->mean_ms) || !ji_double(in, time, "p95_ms", &t->p95_ms) ||
        !ji_double(in, time, "p99_ms", &t->p99_ms) || !ji_double(in, time, "stdev_ms", &t->stdev_ms) ||
        !ji_integer(in, time, "samples", &samples, 0) || !ji_integer(in, time, "calls_per_sample", &calls, 0) ||
        !ji_double(in, time, "convert_ms", &t->convert_ms) ||
        !ji_double(in, time, "e2e_median_ms", &t->e2e_median_ms))
      return false;
    t->samples = (long)samples;
    t->calls_per_sample = (long)calls;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(time, "samples_ms");
    if (list && !cJSON_IsNull(list)) {
      if (!cJSON_IsArray(list)) return ji_bad(in, "samples_ms", "an array of numbers", list);
      int n = cJSON_GetArraySize(list);
      if (n > 0) {
        t->samples_ms = malloc((size_t)n * sizeof *t->samples_ms);
        if (!t->samples_ms) {
          in->st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", in->file);
          return false;
        }
        const cJSON *s;
        cJSON_ArrayForEach(s, list) {
          if (!cJSON_IsNumber(s)) return ji_bad(in, "samples_ms", "an array of numbers", s);
          t->samples_ms[t->n_samples_ms++] = s->valuedouble;
        }
      }
    }
    ji_pop(in, saved);
  }
  if (!ji_double(in, obj, "tflops", &row->tflops)) return false;
  const cJSON *loss;
  if (!ji_object(in, obj, "loss_change", &loss, false)) return false;
  if (loss) {
    size_t saved = ji_push(in, "loss_change", 0);
    const cJSON *taylor, *fisher;
    if (!ji_object(in, loss, "taylor", &taylor, true) || !ji_object(in, loss, "fisher", &fisher, true)) return false;
    size_t inner = ji_push(in, "taylor", 0);
    if (!ji_double(in, taylor, "mean", &row->loss.taylor_mean) || !ji_double(in, taylor, "worst", &row->loss.taylor_worst))
      return false;
    ji_pop(in, inner);
    inner = ji_push(in, "fisher", 0);
    if (!ji_double(in, fisher, "mean", &row->loss.fisher_mean) || !ji_double(in, fisher, "worst", &row->loss.fisher_worst))
      return false;
    ji_pop(in, inner);
    ji_pop(in, saved);
    row->loss.present = true;
  }

  const cJSON *memory;
  if (!ji_object(in, obj, "memory", &memory, false)) return false;
  if (memory) {
    precis_memory *mem = &row->memory;
    size_t saved = ji_push(in, "memory", 0);
    if (!ji_integer(in, memory, "tensor_bytes", &mem->tensor_bytes, -1) ||
        !ji_integer(in, memory, "tracked_peak_bytes", &mem->tracked_peak_bytes, -1) ||
        !ji_integer(in, memory, "device_baseline_bytes", &mem->device_baseline_bytes, -1) ||
        !ji_integer(in, memory, "device_peak_bytes", &mem->device_peak_bytes, -1) ||
        !ji_integer(in, memory, "untracked_bytes", &mem->untracked_bytes, -1) ||
        !ji_integer(in, memory, "host_peak_rss_bytes", &mem->host_peak_rss_bytes, -1))
      return false;
    ji_pop(in, saved);
  }

  const cJSON *details;
  if (!ji_object(in, obj, "details", &details, false)) return false;
  if (details && !ji_kv_object(in, details, &row->details, NULL)) return false;
  /* Where it ran: absent in reports from before scale-out. */
  long long part, rank, device;
  if (!ji_string(in, obj, "host", &row->host, false) || !ji_string(in, obj, "target", &row->target, false) ||
      !ji_integer(in, obj, "part", &part, 0) ||
      !ji_integer(in, obj, "rank", &rank, -1) || !ji_integer(in, obj, "device", &device, -1))
    return false;
  if (part < 0 || part > 1000000) return ji_bad(in, "part", "a part number >= 0", cJSON_GetObjectItemCaseSensitive(obj, "part"));
  if (rank < -1 || rank > 100000000) return ji_bad(in, "rank", "an MPI rank >= 0 or null", cJSON_GetObjectItemCaseSensitive(obj, "rank"));
  if (device < -1 || device > 100000) return ji_bad(in, "device", "a device ordinal >= 0 or null", cJSON_GetObjectItemCaseSensitive(obj, "device"));
  row->part = (int)part, row->rank = (int)rank, row->device = (int)device;
  return true;
}

static bool read_string_array(json_in *in, const cJSON *obj, const char *key, char ***items, size_t *count) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *items = NULL;
  *count = 0;
  if (!v || cJSON_IsNull(v)) return true;
  if (!cJSON_IsArray(v)) return ji_bad(in, key, "an array of strings", v);
  int n = cJSON_GetArraySize(v);
  if (n == 0) return true;
  *items = calloc((size_t)n, sizeof **items);
  if (!*items) {
    in->st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", in->file);
    return false;
  }
  const cJSON *s;
  cJSON_ArrayForEach(s, v) {
    if (!cJSON_IsString(s)) return ji_bad(in, key, "an array of strings", s);
    (*items)[(*count)++] = precis_strdup(s->valuestring);
  }
  return true;
}

static bool read_report(json_in *in, const cJSON *root, precis_report *r) {
  if (!cJSON_IsObject(root)) return ji_bad(in, "(top level)", "an object", root);
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
  if (!cJSON_IsString(format) || strcmp(format->valuestring, PRECIS_REPORT_FORMAT) != 0)
    return ji_bad(in, "format", "\"" PRECIS_REPORT_FORMAT "\" (is this a precis report?)", format);
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "format_version");
  if (!cJSON_IsNumber(version)) return ji_bad(in, "format_version", "an integer", version);
  if (version->valuedouble != PRECIS_REPORT_FORMAT_VERSION) {
    in->st = precis_fail(PRECIS_E_INPUT, "%s: format_version: this precis reads version %d, found %g", in->file,
                         PRECIS_REPORT_FORMAT_VERSION, version->valuedouble);
    return false;
  }
  r->format_version = PRECIS_REPORT_FORMAT_VERSION;
  const cJSON *complete = cJSON_GetObjectItemCaseSensitive(root, "complete");
  if (complete && !cJSON_IsBool(complete)) return ji_bad(in, "complete", "true or false", complete);
  r->complete = complete ? cJSON_IsTrue(complete) : false;

  const cJSON *tool, *env, *dataset, *settings;
  if (!ji_object(in, root, "tool", &tool, false) || !ji_object(in, root, "environment", &env, false) ||
      !ji_object(in, root, "dataset", &dataset, false) || !ji_object(in, root, "settings", &settings, false))
    return false;
  if (tool) {
    size_t saved = ji_push(in, "tool", 0);
    if (!ji_string(in, tool, "version", &r->tool_version, false) || !ji_string(in, tool, "commit", &r->tool_commit, false))
      return false;
    ji_pop(in, saved);
  }
  if (env && !ji_kv_object(in, env, &r->environment, NULL)) return false;
  if (dataset) {
    size_t saved = ji_push(in, "dataset", 0);
    if (!ji_string(in, dataset, "path", &r->dataset_path, false) ||
        !ji_string(in, dataset, "dataset_id", &r->dataset_id, false) ||
        !ji_string(in, dataset, "label", &r->dataset_label, false))
      return false;
    ji_pop(in, saved);
  }
  if (settings) {
    static const char *const lists[] = {"recipes", "criteria", NULL};
    size_t saved = ji_push(in, "settings", 0);
    if (!read_string_array(in, settings, "recipes", &r->recipes, &r->n_recipes) ||
        !read_string_array(in, settings, "criteria", &r->criteria, &r->n_criteria) ||
        !ji_kv_object(in, settings, &r->settings, lists))
      return false;
    ji_pop(in, saved);
  }

  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "rows");
  if (!cJSON_IsArray(rows)) return ji_bad(in, "rows", "an array of rows", rows);
  size_t index = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, rows) {
    precis_row row;
    precis_row_init(&row);
    size_t saved = ji_push(in, NULL, index);
    bool ok = read_row(in, item, &row);
    if (ok && precis_report_find_row(r, row.workload, row.recipe)) {
      in->st = precis_fail(PRECIS_E_INPUT, "%s: %s: a second row for workload \"%s\", recipe \"%s\"", in->file,
                           in->path, row.workload, row.recipe);
      ok = false;
    }
    if (ok && precis_report_add_row(r, &row) != PRECIS_OK) {
      in->st = PRECIS_E_NOMEM;
      ok = false;
    }
    precis_row_free(&row);
    if (!ok) return false;
    ji_pop(in, saved);
    index++;
  }
  return true;
}

static precis_status parse_failure(const char *file, const char *text) {
  const char *where = cJSON_GetErrorPtr();
  if (!where || where < text) return precis_fail(PRECIS_E_INPUT, "%s: not valid JSON", file);
  size_t line = 1, col = 1;
  for (const char *p = text; p < where && *p; p++) {
    if (*p == '\n') line++, col = 1;
    else col++;
  }
  return precis_fail(PRECIS_E_INPUT, "%s:%zu:%zu: not valid JSON", file, line, col);
}

precis_status precis_report_read_json(const char *path, precis_report *out) {
  precis_report_init(out);
  char *text = NULL;
  size_t size = 0;
  precis_status st = precis_read_file(path, &text, &size);
  if (st != PRECIS_OK) return st;
  cJSON *root = cJSON_ParseWithLength(text, size);
  if (!root) {
    st = parse_failure(path, text);
    goto done;
  }
  json_in in = {.file = path, .st = PRECIS_OK};
  if (!read_report(&in, root, out)) st = in.st != PRECIS_OK ? in.st : PRECIS_E_INPUT;
done:
  cJSON_Delete(root);
  free(text);
  if (st != PRECIS_OK) precis_report_free(out);
  return st;
}

precis_status precis_row_from_json_line(const char *line, precis_row *out) {
  precis_row_init(out);
  cJSON *root = cJSON_Parse(line);
  if (!root) return precis_fail(PRECIS_E_INPUT, "journal line: not valid JSON");
  json_in in = {.file = "journal line", .st = PRECIS_OK};
  bool ok = read_row(&in, root, out);
  cJSON_Delete(root);
  if (!ok) {
    precis_row_free(out);
    return in.st != PRECIS_OK ? in.st : PRECIS_E_INPUT;
  }
  return PRECIS_OK;
}

/* ---------------------------------------------------------------- all formats */

precis_status precis_report_write_all(const precis_report *report, const char *dir, bool force) {
  precis_status st = precis_mkdirs(dir);
  if (st != PRECIS_OK) return st;
  static const char *const names[] = {"report.json", "report.csv", "report.md", "report.html"};
  precis_status (*const writers[])(const precis_report *, const char *, bool) = {
      precis_report_write_json, precis_report_write_csv, precis_report_write_markdown, precis_report_write_html};
  /* Refuse before writing anything, so that a refused run does not leave a mix of old and new. */
  if (!force)
    for (size_t i = 0; i < 4; i++) {
      char *path = precis_asprintf("%s/%s", dir, names[i]);
      if (!path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
      bool exists = precis_path_exists(path);
      st = exists ? precis_fail(PRECIS_E_EXISTS, "%s: already exists (use --force to overwrite)", path) : PRECIS_OK;
      free(path);
      if (st != PRECIS_OK) return st;
    }
  for (size_t i = 0; i < 4 && st == PRECIS_OK; i++) {
    char *path = precis_asprintf("%s/%s", dir, names[i]);
    if (!path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
    st = writers[i](report, path, force);
    free(path);
  }
  return st;
}
