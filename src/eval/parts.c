#include "parts.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataset.h"
#include "deal.h"
#include "base/escape.h"

precis_status precis_part_spawn(int (*fn)(void *), void *arg, long *pid) {
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  if (child < 0) return precis_fail(PRECIS_E_RUNTIME, "cannot start a worker process: fork: %s", strerror(errno));
  if (child == 0) {
    /* Its own process group: a Ctrl-C at the terminal reaches the parent only, which passes it on
     * once (precis_part_wait); a second one reaching the worker directly would end it at once. */
    setpgid(0, 0);
    int code = fn(arg);
    fflush(stdout);
    fflush(stderr);
    _exit(code);
  }
  *pid = (long)child;
  return PRECIS_OK;
}

void precis_part_wait(long pid, precis_part_end *end) {
  int status = 0;
  pid_t got;
  bool passed_on = false;
  for (;;) {
    if (precis_interrupt_signal && !passed_on) {
      /* The parent was asked to stop (Ctrl-C, or mpirun passing SIGTERM on): so is the worker. */
      kill((pid_t)pid, precis_interrupt_signal);
      passed_on = true;
    }
    got = waitpid((pid_t)pid, &status, 0);
    if (got >= 0 || errno != EINTR) break;
  }
  end->pid = pid;
  if (got < 0) {
    end->exit_code = 1;
    end->signal = 0;
    return;
  }
  end->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  end->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + end->signal;
}

void precis_part_end_describe(const precis_part_end *end, char *buf, size_t len) {
  if (!end->started) snprintf(buf, len, "was not started");
  else if (end->signal) snprintf(buf, len, "was killed by signal %d (%s)", end->signal, strsignal(end->signal));
  else snprintf(buf, len, "exited with status %d", end->exit_code);
}

bool precis_part_end_interrupted(const precis_part_end *end) {
  if (!end->started) return false;
  if (end->signal) return end->signal == SIGINT || end->signal == SIGTERM;
  return end->exit_code == 130 || end->exit_code == 143;
}

bool precis_part_end_normal(const precis_part_end *end) {
  return end->started && !end->signal && (end->exit_code == 0 || end->exit_code == 1 || end->exit_code == 3);
}

/* environment.parts: per part, who ran it and its environment (from its journal's header). */
static char *parts_environment(const precis_journal *journals, const precis_part_end *ends, int n_parts) {
  cJSON *array = cJSON_CreateArray();
  for (int p = 0; array && p < n_parts; p++) {
    cJSON *env = cJSON_CreateObject();
    char how[160];
    precis_part_end_describe(&ends[p], how, sizeof how);
    cJSON_AddNumberToObject(env, "part", p + 1);
    cJSON_AddStringToObject(env, "host", journals[p].host[0] ? journals[p].host : ends[p].host);
    if (ends[p].rank >= 0) cJSON_AddNumberToObject(env, "rank", ends[p].rank);
    else cJSON_AddNullToObject(env, "rank");
    if (ends[p].device >= 0) cJSON_AddNumberToObject(env, "device_ordinal", ends[p].device);
    cJSON_AddNumberToObject(env, "pid", (double)(journals[p].pid ? journals[p].pid : ends[p].pid));
    cJSON_AddStringToObject(env, "worker", how);
    const precis_kv_list *list = &journals[p].run.environment;
    for (size_t k = 0; k < list->count; k++) {
      const precis_kv *kv = &list->items[k];
      if (cJSON_GetObjectItemCaseSensitive(env, kv->key)) continue;
      cJSON *value = !kv->value ? cJSON_CreateNull() : kv->is_number ? cJSON_Parse(kv->value) : NULL;
      if (!value) value = cJSON_CreateString(kv->value ? kv->value : "");
      cJSON_AddItemToObject(env, kv->key, value);
    }
    cJSON_AddItemToArray(array, env);
  }
  char *text = array ? cJSON_PrintUnformatted(array) : NULL;
  cJSON_Delete(array);
  char *copy = precis_strdup(text);
  cJSON_free(text);
  return copy;
}

static void copy_kv(precis_kv_list *to, const precis_kv_list *from, const char *skip) {
  for (size_t k = 0; k < from->count; k++) {
    const precis_kv *kv = &from->items[k];
    if (skip && strcmp(kv->key, skip) == 0) continue;
    precis_kv_set(to, kv->key, kv->value);
    if (to->count && strcmp(to->items[to->count - 1].key, kv->key) == 0) to->items[to->count - 1].is_number = kv->is_number;
  }
}

static char **copy_strings(char *const *items, size_t n) {
  char **out = calloc(n ? n : 1, sizeof *out);
  for (size_t i = 0; out && i < n; i++) out[i] = precis_strdup(items[i]);
  return out;
}

precis_status precis_parts_gather(const precis_run_config *cfg, precis_journal *journals, const precis_part_end *ends,
                                  int n_parts, precis_report *report) {
  precis_dataset *ds = NULL;
  const precis_workload_info **selected = NULL;
  int *part_of = NULL;
  char ***keys = NULL; /* per part, per journal row: its case key (NULL once taken) */
  precis_status st = precis_dataset_open(cfg->dataset_path, &ds);
  if (st != PRECIS_OK) return st;
  int first = -1;
  for (int p = 0; p < n_parts && first < 0; p++)
    if (journals[p].header_json) first = p;
  if (first < 0) {
    precis_buf why;
    precis_buf_init(&why);
    for (int p = 0; p < n_parts; p++) {
      char how[160];
      precis_part_end_describe(&ends[p], how, sizeof how);
      precis_buf_appendf(&why, "%spart %d %s", p ? "; " : "", p + 1, how);
    }
    char *text = precis_buf_take(&why);
    st = precis_fail(PRECIS_E_RUNTIME, "no part of the run left a journal (%s)", text ? text : "");
    free(text);
    goto done;
  }
  const char *content_id = NULL;
  if ((st = precis_dataset_content_id(ds, &content_id)) != PRECIS_OK) goto done;
  for (int p = 0; p < n_parts; p++)
    if (journals[p].header_json && !(journals[p].run.dataset_id && strcmp(journals[p].run.dataset_id, content_id) == 0)) {
      st = precis_fail(PRECIS_E_INPUT, "part %d of %d (host %s) ran on dataset %s, not %s (%s): a dataset path "
                                       "must hold the same file on every node",
                       p + 1, n_parts, journals[p].host, journals[p].run.dataset_id ? journals[p].run.dataset_id : "null",
                       content_id, cfg->dataset_path);
      goto done;
    }

  /* The header of the run: the first part's, without its part. */
  const precis_report *base = &journals[first].run;
  report->tool_version = precis_strdup(base->tool_version);
  report->tool_commit = precis_strdup(base->tool_commit);
  report->dataset_path = precis_strdup(cfg->dataset_path);
  report->dataset_id = precis_strdup(content_id);
  report->dataset_label = ds->dataset_id ? precis_strdup(ds->dataset_id) : NULL;
  copy_kv(&report->environment, &base->environment, NULL);
  copy_kv(&report->settings, &base->settings, "shard");
  report->recipes = copy_strings(base->recipes, base->n_recipes);
  report->n_recipes = base->n_recipes;
  report->criteria = copy_strings(base->criteria, base->n_criteria);
  report->n_criteria = base->n_criteria;
  char *envs = parts_environment(journals, ends, n_parts);
  if (!envs || !report->recipes || !report->criteria) {
    free(envs);
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  precis_kv_set_json(&report->environment, "parts", envs);
  free(envs);

  /* The cases and their parts: the workers' own deal (deal.h). */
  size_t n_selected = 0;
  selected = calloc(ds->n_workloads ? ds->n_workloads : 1, sizeof *selected);
  part_of = calloc(ds->n_workloads * cfg->n_recipes + 1, sizeof *part_of);
  keys = calloc((size_t)n_parts, sizeof *keys);
  if (!selected || !part_of || !keys) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (size_t wi = 0; wi < ds->n_workloads; wi++) {
    bool chosen = !cfg->workloads;
    for (size_t i = 0; !chosen && i < cfg->n_workloads; i++) chosen = strcmp(cfg->workloads[i], ds->workloads[wi].name) == 0;
    if (chosen) selected[n_selected++] = &ds->workloads[wi];
  }
  if ((st = precis_deal_cases(selected, n_selected, cfg->recipes, cfg->n_recipes, n_parts, part_of)) != PRECIS_OK)
    goto done;
  for (int p = 0; p < n_parts; p++) {
    keys[p] = calloc(journals[p].run.n_rows + 1, sizeof **keys);
    if (!keys[p]) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto done;
    }
    for (size_t r = 0; r < journals[p].run.n_rows; r++) keys[p][r] = precis_journal_case_key(&journals[p].run.rows[r]);
  }

  bool missing = false;
  for (size_t si = 0; si < n_selected; si++)
    for (size_t ri = 0; ri < cfg->n_recipes; ri++) {
      int p = part_of[si * cfg->n_recipes + ri] - 1;
      const precis_part_end *end = &ends[p];
      precis_run_config where = *cfg;
      where.host = journals[p].host[0] ? journals[p].host : end->host;
      where.part_index = p + 1;
      where.part_count = n_parts;
      where.rank = end->rank;
      where.device = end->device;
      precis_row row;
      precis_case_row(&row, &where, selected[si], &cfg->recipes[ri]);
      char *key = precis_journal_case_key(&row);
      size_t found = SIZE_MAX;
      for (size_t r = 0; key && found == SIZE_MAX && r < journals[p].run.n_rows; r++)
        if (keys[p][r] && strcmp(keys[p][r], key) == 0) found = r;
      free(key);
      if (found != SIZE_MAX) {
        precis_row_free(&row);
        free(keys[p][found]);
        keys[p][found] = NULL;
        st = precis_report_add_row(report, &journals[p].run.rows[found]);
      } else if (precis_part_end_interrupted(end)) {
        /* Not run yet: --resume runs it. */
        precis_row_free(&row);
        missing = true;
        continue;
      } else {
        char how[160];
        precis_part_end_describe(end, how, sizeof how);
        char rank[32] = "";
        if (end->rank >= 0) snprintf(rank, sizeof rank, "MPI rank %d, ", end->rank);
        row.status = PRECIS_ROW_FAILED;
        row.reason = precis_asprintf("not measured: the worker of part %d of %d (%shost %s, pid %ld) %s before this "
                                     "case finished",
                                     p + 1, n_parts, rank, where.host ? where.host : "?",
                                     journals[p].pid ? journals[p].pid : end->pid, how);
        st = precis_report_add_row(report, &row);
      }
      if (st != PRECIS_OK) {
        precis_row_free(&row);
        goto done;
      }
    }
  report->complete = !missing;

done:
  for (int p = 0; keys && p < n_parts; p++) {
    for (size_t r = 0; keys[p] && r < journals[p].run.n_rows; r++) free(keys[p][r]);
    free(keys[p]);
  }
  free(keys);
  free(selected);
  free(part_of);
  precis_dataset_close(ds);
  return st;
}
