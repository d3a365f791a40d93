#include "journal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "precis_version.h"
#include "report.h"

char *precis_journal_name(int index, int count) {
  if (count <= 1) return precis_strdup("journal.jsonl");
  return precis_asprintf("journal.part-%04d-of-%04d.jsonl", index, count);
}

char *precis_journal_case_key(const precis_row *row) {
  /* Joined with the unit separator (\x1f), which dataset names do not use; the key is only ever
   * compared, never shown. A case is its canonical spec (two spellings of one spec are one case);
   * a row without a spec (a journal from before specs) falls back to the recipe's name. */
  const char *recipe = row->spec ? row->spec : row->recipe;
  return precis_asprintf("%s\x1f%s", row->workload ? row->workload : "", recipe ? recipe : "");
}

/* ---------------------------------------------------------------- header */

static cJSON *kv_value_json(const precis_kv *kv) {
  if (!kv->value) return cJSON_CreateNull();
  if (kv->is_number) return cJSON_CreateRaw(kv->value);
  return cJSON_CreateString(kv->value);
}

static cJSON *string_array(char *const *items, size_t count) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a && i < count; i++) cJSON_AddItemToArray(a, cJSON_CreateString(items[i] ? items[i] : ""));
  return a;
}

/* The header of a run as text, one line without its newline (malloc'ed). */
static char *header_text(const precis_journal_run *run) {
  const precis_report *r = run->report;
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", PRECIS_JOURNAL_FORMAT);
  cJSON_AddNumberToObject(root, "format_version", PRECIS_JOURNAL_FORMAT_VERSION);
  cJSON *tool = cJSON_AddObjectToObject(root, "tool");
  cJSON_AddStringToObject(tool, "version", r->tool_version ? r->tool_version : PRECIS_VERSION);
  if (r->tool_commit) cJSON_AddStringToObject(tool, "commit", r->tool_commit);
  else cJSON_AddNullToObject(tool, "commit");
  cJSON *dataset = cJSON_AddObjectToObject(root, "dataset");
  if (r->dataset_path) cJSON_AddStringToObject(dataset, "path", r->dataset_path);
  else cJSON_AddNullToObject(dataset, "path");
  if (r->dataset_id) cJSON_AddStringToObject(dataset, "dataset_id", r->dataset_id);
  else cJSON_AddNullToObject(dataset, "dataset_id");
  /* The writer's label, informative: the identity compared on --resume is dataset_id, the digest. */
  if (r->dataset_label) cJSON_AddStringToObject(dataset, "label", r->dataset_label);
  else cJSON_AddNullToObject(dataset, "label");
  cJSON *settings = cJSON_AddObjectToObject(root, "settings");
  cJSON_AddItemToObject(settings, "recipes", string_array(r->recipes, r->n_recipes));
  cJSON_AddItemToObject(settings, "criteria", string_array(r->criteria, r->n_criteria));
  for (size_t i = 0; i < r->settings.count; i++) {
    const precis_kv *kv = &r->settings.items[i];
    if (strcmp(kv->key, "recipes") == 0 || strcmp(kv->key, "criteria") == 0) continue;
    cJSON_AddItemToObject(settings, kv->key, kv_value_json(kv));
  }
  if (run->workloads) cJSON_AddItemToObject(root, "workloads", string_array(run->workloads, run->n_workloads));
  else cJSON_AddNullToObject(root, "workloads");
  const char *device = precis_kv_get(&r->environment, "device");
  if (device) cJSON_AddStringToObject(root, "device", device);
  else cJSON_AddNullToObject(root, "device");
  cJSON *part = cJSON_AddObjectToObject(root, "part");
  cJSON_AddNumberToObject(part, "index", run->part_count > 1 ? run->part_index : 0);
  cJSON_AddNumberToObject(part, "count", run->part_count > 1 ? run->part_count : 1);
  /* Informative only (never compared): who wrote the journal, and when. */
  char host[256] = "";
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  char started[32];
  time_t now = time(NULL);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  cJSON_AddStringToObject(root, "host", host);
  cJSON_AddNumberToObject(root, "pid", (double)getpid());
  cJSON_AddStringToObject(root, "started", started);
  /* The environment the rows were measured in, for a gatherer that did not measure them (a rank
   * or device worker's parent). */
  cJSON *env = cJSON_AddObjectToObject(root, "environment");
  for (size_t i = 0; env && i < r->environment.count; i++) {
    const precis_kv *kv = &r->environment.items[i];
    cJSON *value = kv->value && kv->is_number ? cJSON_Parse(kv->value) : NULL;
    cJSON_AddItemToObject(env, kv->key, value ? value : kv_value_json(kv));
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

/* ---------------------------------------------------------------- writer */

static precis_status write_line(precis_journal_writer *w, const char *text) {
  size_t len = strlen(text);
  char *line = malloc(len + 2);
  if (!line) return precis_fail(PRECIS_E_NOMEM, "out of memory writing the journal");
  memcpy(line, text, len);
  line[len] = '\n';
  off_t before = lseek(w->fd, 0, SEEK_END);
  /* One write() normally; a short one (full disk, file size limit) is followed by another for the
   * rest, which then says why it cannot go on. */
  size_t done = 0;
  int err = 0;
  while (done < len + 1) {
    ssize_t n = write(w->fd, line + done, len + 1 - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += (size_t)n;
  }
  free(line);
  if (done == len + 1) {
    fsync(w->fd);
    return PRECIS_OK;
  }
  /* Cut the partial line off again, so that the journal stays whole (shrinking is allowed past a
   * full disk and under a file size limit). When even that fails the reader finds a torn line. */
  if (done > 0 && before >= 0 && ftruncate(w->fd, before) == 0) fsync(w->fd);
  return precis_fail(PRECIS_E_IO, "%s: write failed: %s", w->path, strerror(err));
}

precis_status precis_journal_create(precis_journal_writer *w, const char *path, const precis_journal_run *run) {
  w->path = precis_strdup(path);
  w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (w->fd < 0) {
    precis_status st = precis_fail(PRECIS_E_IO, "%s: cannot create the journal: %s", path, strerror(errno));
    precis_journal_close(w);
    return st;
  }
  char *header = header_text(run);
  if (!header) return precis_fail(PRECIS_E_NOMEM, "out of memory writing the journal");
  precis_status st = write_line(w, header);
  cJSON_free(header);
  return st;
}

precis_status precis_journal_reopen(precis_journal_writer *w, const char *path, long long valid_bytes) {
  w->path = precis_strdup(path);
  w->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (w->fd < 0) {
    precis_status st = precis_fail(PRECIS_E_IO, "%s: cannot open the journal: %s", path, strerror(errno));
    precis_journal_close(w);
    return st;
  }
  struct stat sb;
  if (fstat(w->fd, &sb) == 0 && sb.st_size > valid_bytes && ftruncate(w->fd, (off_t)valid_bytes) != 0) {
    precis_status st = precis_fail(PRECIS_E_IO, "%s: cannot cut off the incomplete last line: %s", path, strerror(errno));
    precis_journal_close(w);
    return st;
  }
  return PRECIS_OK;
}

precis_status precis_journal_append(precis_journal_writer *w, const precis_row *row) {
  char *line = precis_row_to_json_line(row);
  if (!line) return precis_fail(PRECIS_E_NOMEM, "out of memory writing the journal");
  precis_status st = write_line(w, line);
  free(line);
  return st;
}

void precis_journal_close(precis_journal_writer *w) {
  if (w->fd >= 0) close(w->fd);
  free(w->path);
  w->fd = -1;
  w->path = NULL;
}

/* ---------------------------------------------------------------- reader */

void precis_journal_free(precis_journal *j) {
  free(j->header_json);
  for (size_t i = 0; i < j->n_workloads; i++) free(j->workloads[i]);
  free(j->workloads);
  precis_report_free(&j->run);
  memset(j, 0, sizeof *j);
  precis_report_init(&j->run);
}

/* A header object into a kv list as report.json's reader keeps it: strings, numbers, null, and any
 * other value as its JSON text (written back as it is). */
static void kv_from_object(const cJSON *obj, precis_kv_list *list, bool skip_lists) {
  const cJSON *item;
  cJSON_ArrayForEach(item, obj) {
    if (skip_lists && (strcmp(item->string, "recipes") == 0 || strcmp(item->string, "criteria") == 0)) continue;
    if (cJSON_IsNull(item)) precis_kv_set(list, item->string, NULL);
    else if (cJSON_IsString(item)) precis_kv_set(list, item->string, item->valuestring);
    else {
      char *text = cJSON_PrintUnformatted(item);
      if (text) precis_kv_set_json(list, item->string, text);
      cJSON_free(text);
    }
  }
}

static char **strings_from_array(const cJSON *array, size_t *count) {
  *count = 0;
  int n = cJSON_IsArray(array) ? cJSON_GetArraySize(array) : 0;
  char **items = n > 0 ? calloc((size_t)n, sizeof *items) : NULL;
  const cJSON *s;
  if (items) cJSON_ArrayForEach(s, array) if (cJSON_IsString(s)) items[(*count)++] = precis_strdup(s->valuestring);
  return items;
}

static precis_status read_header(const char *path, const char *line, precis_journal *j) {
  cJSON *root = cJSON_Parse(line);
  precis_status st = PRECIS_OK;
  const cJSON *format = root ? cJSON_GetObjectItemCaseSensitive(root, "format") : NULL;
  if (!cJSON_IsString(format) || strcmp(format->valuestring, PRECIS_JOURNAL_FORMAT) != 0) {
    st = precis_fail(PRECIS_E_INPUT,
                     "%s:1: expected the journal header {\"format\": \"" PRECIS_JOURNAL_FORMAT
                     "\", ...} (a journal of an older precis cannot be resumed)",
                     path);
    goto done;
  }
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "format_version");
  if (!cJSON_IsNumber(version) || version->valuedouble != PRECIS_JOURNAL_FORMAT_VERSION) {
    st = precis_fail(PRECIS_E_INPUT, "%s:1: format_version: this precis reads journal version %d", path,
                     PRECIS_JOURNAL_FORMAT_VERSION);
    goto done;
  }
  const cJSON *dataset = cJSON_GetObjectItemCaseSensitive(root, "dataset");
  const cJSON *id = dataset ? cJSON_GetObjectItemCaseSensitive(dataset, "dataset_id") : NULL;
  const cJSON *dpath = dataset ? cJSON_GetObjectItemCaseSensitive(dataset, "path") : NULL;
  const cJSON *label = dataset ? cJSON_GetObjectItemCaseSensitive(dataset, "label") : NULL;
  if (cJSON_IsString(id)) j->run.dataset_id = precis_strdup(id->valuestring);
  if (cJSON_IsString(label)) j->run.dataset_label = precis_strdup(label->valuestring);
  if (cJSON_IsString(dpath)) j->run.dataset_path = precis_strdup(dpath->valuestring);
  const cJSON *tool = cJSON_GetObjectItemCaseSensitive(root, "tool");
  const cJSON *tv = tool ? cJSON_GetObjectItemCaseSensitive(tool, "version") : NULL;
  const cJSON *tc = tool ? cJSON_GetObjectItemCaseSensitive(tool, "commit") : NULL;
  if (cJSON_IsString(tv)) j->run.tool_version = precis_strdup(tv->valuestring);
  if (cJSON_IsString(tc)) j->run.tool_commit = precis_strdup(tc->valuestring);
  const cJSON *settings = cJSON_GetObjectItemCaseSensitive(root, "settings");
  if (cJSON_IsObject(settings)) {
    j->run.recipes = strings_from_array(cJSON_GetObjectItemCaseSensitive(settings, "recipes"), &j->run.n_recipes);
    j->run.criteria = strings_from_array(cJSON_GetObjectItemCaseSensitive(settings, "criteria"), &j->run.n_criteria);
    kv_from_object(settings, &j->run.settings, true);
  }
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(root, "environment");
  if (cJSON_IsObject(env)) kv_from_object(env, &j->run.environment, false);
  const cJSON *workloads = cJSON_GetObjectItemCaseSensitive(root, "workloads");
  j->has_workloads = cJSON_IsArray(workloads);
  j->workloads = strings_from_array(workloads, &j->n_workloads);
  const cJSON *part = cJSON_GetObjectItemCaseSensitive(root, "part");
  const cJSON *pi = part ? cJSON_GetObjectItemCaseSensitive(part, "index") : NULL;
  const cJSON *pc = part ? cJSON_GetObjectItemCaseSensitive(part, "count") : NULL;
  j->part_index = cJSON_IsNumber(pi) ? pi->valueint : 0;
  j->part_count = cJSON_IsNumber(pc) ? pc->valueint : 1;
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(root, "host");
  const cJSON *pid = cJSON_GetObjectItemCaseSensitive(root, "pid");
  snprintf(j->host, sizeof j->host, "%s", cJSON_IsString(host) ? host->valuestring : "");
  j->pid = cJSON_IsNumber(pid) ? (long)pid->valuedouble : 0;
  j->header_json = precis_strdup(line);
done:
  cJSON_Delete(root);
  return st;
}

precis_status precis_journal_read(const char *path, precis_journal *out) {
  memset(out, 0, sizeof *out);
  precis_report_init(&out->run);
  char *text = NULL;
  size_t size = 0;
  precis_status st = precis_read_file(path, &text, &size);
  if (st != PRECIS_OK) return st;
  st = precis_journal_parse(path, text, size, out);
  free(text);
  return st;
}

precis_status precis_journal_parse(const char *path, char *text, size_t size, precis_journal *out) {
  memset(out, 0, sizeof *out);
  precis_report_init(&out->run);
  precis_status st = PRECIS_OK;
  char **keys = NULL;
  size_t line_no = 0, start = 0;
  while (start < size) {
    const char *nl = memchr(text + start, '\n', size - start);
    line_no++;
    if (!nl) {
      /* No newline: the writer died or the disk filled in the middle of this line. */
      out->torn_line = line_no;
      out->torn_bytes = size - start;
      break;
    }
    size_t len = (size_t)(nl - (text + start));
    char *line = text + start;
    line[len] = '\0';
    if (strlen(line) != len) {
      st = precis_fail(PRECIS_E_INPUT, "%s:%zu: a NUL byte inside the line (the file is damaged)", path, line_no);
      goto done;
    }
    if (line_no == 1) {
      if ((st = read_header(path, line, out)) != PRECIS_OK) goto done;
    } else {
      precis_row row;
      st = precis_row_from_json_line(line, &row);
      if (st != PRECIS_OK) {
        precis_error_prefix("%s:%zu", path, line_no);
        goto done;
      }
      char *key = precis_journal_case_key(&row);
      char **grown = key ? realloc(keys, (out->rows_lines + 1) * sizeof *keys) : NULL;
      if (!grown) {
        free(key);
        precis_row_free(&row);
        st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", path);
        goto done;
      }
      keys = grown;
      for (size_t i = 0; i < out->rows_lines; i++)
        if (strcmp(keys[i], key) == 0) {
          st = precis_fail(PRECIS_E_INPUT, "%s:%zu: a second row for workload \"%s\", recipe \"%s\" (the journal is damaged)",
                           path, line_no, row.workload, row.recipe);
          free(key);
          precis_row_free(&row);
          goto done;
        }
      keys[out->rows_lines++] = key;
      st = precis_report_add_row(&out->run, &row);
      precis_row_free(&row);
      if (st != PRECIS_OK) goto done;
    }
    start += len + 1;
    out->valid_bytes = (long long)start;
  }
  if (!out->header_json) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s", path,
                     size == 0 ? "empty: no journal header (the run ended before it began)"
                               : "the header line is incomplete (the run was killed as it began)");
  }
done:
  for (size_t i = 0; keys && i < out->rows_lines; i++) free(keys[i]);
  free(keys);
  if (st != PRECIS_OK) precis_journal_free(out);
  return st;
}

/* ---------------------------------------------------------------- comparison */

static char *json_text(const cJSON *item) {
  if (!item) return precis_strdup("nothing");
  char *t = cJSON_PrintUnformatted(item);
  char *copy = precis_strdup(t ? t : "?");
  cJSON_free(t);
  return copy;
}

static char *differ(const char *what, const cJSON *journal, const cJSON *now) {
  if (journal && now && cJSON_Compare(journal, now, true)) return NULL;
  char *a = json_text(journal), *b = json_text(now);
  char *text = precis_asprintf("%s: the journal has %s, this run %s", what, a, b);
  free(a);
  free(b);
  return text;
}

static const cJSON *member(const cJSON *obj, const char *key) {
  return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

char *precis_journal_difference(const precis_journal *j, const precis_journal_run *run) {
  char *now_text = header_text(run);
  cJSON *then = cJSON_Parse(j->header_json ? j->header_json : "null");
  cJSON *now = now_text ? cJSON_Parse(now_text) : NULL;
  cJSON_free(now_text);
  char *diff = NULL;
  if (!then || !now) {
    diff = precis_strdup("the journal header cannot be compared (out of memory)");
    goto done;
  }
  /* Everything that decides what a case measures, in the order a user would check it. */
  if ((diff = differ("dataset_id", member(member(then, "dataset"), "dataset_id"),
                     member(member(now, "dataset"), "dataset_id"))))
    goto done;
  if ((diff = differ("precis version", member(member(then, "tool"), "version"), member(member(now, "tool"), "version"))))
    goto done;
  const cJSON *s_then = member(then, "settings"), *s_now = member(now, "settings");
  const cJSON *item;
  cJSON_ArrayForEach(item, s_now) {
    char *what = precis_asprintf("settings.%s", item->string);
    diff = differ(what ? what : "settings", member(s_then, item->string), item);
    free(what);
    if (diff) goto done;
  }
  cJSON_ArrayForEach(item, s_then) {
    if (member(s_now, item->string)) continue;
    char *what = precis_asprintf("settings.%s", item->string);
    diff = differ(what ? what : "settings", item, NULL);
    free(what);
    goto done;
  }
  if ((diff = differ("workloads (--workloads)", member(then, "workloads"), member(now, "workloads")))) goto done;
  if ((diff = differ("device", member(then, "device"), member(now, "device")))) goto done;
  diff = differ("part", member(then, "part"), member(now, "part"));
done:
  cJSON_Delete(then);
  cJSON_Delete(now);
  return diff;
}
