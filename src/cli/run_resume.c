#include "run_resume.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "report/results.h"

/* A growing piece of text; on running out of memory it stays NULL and the caller says so. */
typedef struct text_buf {
  char *text;
  bool failed;
} text_buf;

static void append(text_buf *b, const char *piece) {
  if (b->failed) return;
  char *joined = precis_asprintf("%s%s", b->text ? b->text : "", piece);
  free(b->text);
  b->text = joined;
  b->failed = joined == NULL;
}

static char *join(char *const *items, size_t count, const char *sep, const char *empty) {
  if (count == 0) return precis_strdup(empty);
  text_buf b = {0};
  for (size_t i = 0; i < count; i++) {
    if (i) append(&b, sep);
    append(&b, items[i] ? items[i] : "");
  }
  return b.text;
}

/* ---------------------------------------------------------------- finding the journal */

/* The single shard journal in DIR ("journal.part-IIII-of-NNNN.jsonl"), for a resume that did not
 * say which part: 0 with *path, 1 when there is none, 2 after a message when there are several. */
static int single_shard_journal(const char *out_dir, char **path, int *index, int *count) {
  DIR *dir = opendir(out_dir);
  if (!dir) return 1;
  int found = 0;
  text_buf names = {0};
  struct dirent *e;
  while ((e = readdir(dir))) {
    int i = 0, n = 0;
    if (sscanf(e->d_name, "journal.part-%d-of-%d.jsonl", &i, &n) != 2 || n < 2 || i < 1 || i > n) continue;
    char *canonical = precis_journal_name(i, n);
    bool ours = canonical && strcmp(canonical, e->d_name) == 0;
    free(canonical);
    if (!ours) continue;
    if (found++ == 0) {
      *path = precis_asprintf("%s/%s", out_dir, e->d_name);
      *index = i;
      *count = n;
    }
    append(&names, found > 1 ? ", " : "");
    append(&names, e->d_name);
  }
  closedir(dir);
  if (found <= 1) {
    free(names.text);
    return found == 1 ? 0 : 1;
  }
  fprintf(stderr, "precis run: --resume %s: the journals of several parts are there (%s): give --shard I/N of the "
                  "part to resume\n",
          out_dir, names.text ? names.text : "out of memory");
  free(names.text);
  free(*path);
  *path = NULL;
  return 2;
}

int precis_run_resume_read(const char *out_dir, int n_parts, int own_part, bool may_infer_shard,
                           precis_run_request *req, precis_journal *journal, char **path) {
  *path = NULL;
  for (int i = 0; i <= n_parts && !*path; i++) {
    int part = i == 0 ? own_part : i;
    if (i > 0 && part == own_part) continue;
    char *name = precis_journal_name(part, n_parts);
    char *candidate = name ? precis_asprintf("%s/%s", out_dir, name) : NULL;
    free(name);
    if (candidate && precis_path_exists(candidate)) *path = candidate;
    else free(candidate);
  }
  if (!*path && may_infer_shard) {
    int index = 0, count = 0;
    int rc = single_shard_journal(out_dir, path, &index, &count);
    if (rc == 2) return 2;
    if (rc == 0) {
      req->shard_index = index;
      req->shard_count = count;
    }
  }
  if (!*path) {
    fprintf(stderr, "precis run: --resume %s: no journal there to resume (nothing was journaled)\n", out_dir);
    return 2;
  }
  precis_status st = precis_journal_read(*path, journal);
  if (st != PRECIS_OK) {
    free(*path);
    *path = NULL;
    return precis_cli_report_error("run", st);
  }
  return 0;
}

/* ---------------------------------------------------------------- taking and comparing options */

/* The measurement options and the settings key each is recorded under. */
static const struct {
  int opt;
  const char *flag, *key;
} measure_keys[] = {
    {PRECIS_OPT_ACT_SCALE, "--int8-act-scale", "int8_act_scale"}, {PRECIS_OPT_PERCENTILE, "--percentile", "percentile"},
    {PRECIS_OPT_MIN_SAMPLES, "--min-samples", "min_samples"},     {PRECIS_OPT_MAX_SAMPLES, "--max-samples", "max_samples"},
    {PRECIS_OPT_MAX_TIME, "--max-time-ms", "max_time_ms"},        {PRECIS_OPT_SPREAD, "--target-spread", "target_rel_spread"},
    {PRECIS_OPT_COLD, "--cold", "cold"},                          {PRECIS_OPT_AUTOTUNE, "--autotune", "autotune"},
    {PRECIS_OPT_TARGET, "--target", "target"},
};

static bool same_value(const char *a, const char *b) {
  if (!a || !b) return a == b;
  char *end_a = NULL, *end_b = NULL;
  double x = strtod(a, &end_a), y = strtod(b, &end_b);
  if (end_a != a && *end_a == '\0' && end_b != b && *end_b == '\0') return x == y;
  return strcmp(a, b) == 0;
}

static void differs(text_buf *diffs, const char *flag, const char *journal_value, const char *run_value) {
  char *line = precis_asprintf("%s%s: the journal has %s, this run %s", diffs->text ? "; " : "", flag, journal_value,
                               run_value);
  if (!line) {
    diffs->failed = true;
    return;
  }
  append(diffs, line);
  free(line);
}

static bool same_list(char *const *a, size_t na, char *const *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if (strcmp(a[i] ? a[i] : "", b[i] ? b[i] : "") != 0) return false;
  return true;
}

/* The journal's run was sampled for the cpu backend's default budget (no --max-time-ms). */
static bool journal_cpu_budget(const precis_journal *j) {
  const char *policy = precis_kv_get(&j->run.settings, "timing_policy");
  return policy && strncmp(policy, "cpu backend", 11) == 0;
}

static int compare_recipes(const precis_journal *j, precis_run_request *req, text_buf *diffs) {
  precis_recipe_list given = {0};
  if (!precis_cli_parse_recipes("run", req->recipes_arg, false, &given)) return 2;
  char **names = calloc(given.count ? given.count : 1, sizeof *names);
  for (size_t i = 0; names && i < given.count; i++) names[i] = (char *)given.items[i].name;
  if (names && !same_list(j->run.recipes, j->run.n_recipes, names, given.count)) {
    char *then = join(j->run.recipes, j->run.n_recipes, ",", "none"), *now = join(names, given.count, ",", "none");
    differs(diffs, "--recipes", then ? then : "?", now ? now : "?");
    free(then);
    free(now);
  }
  diffs->failed = diffs->failed || !names;
  free(names);
  precis_recipe_list_free(&given);
  return 0;
}

static int take_or_compare_measure_options(const precis_journal *j, precis_run_request *req, text_buf *diffs) {
  precis_kv_list now = {0};
  precis_cli_measure_settings(req->options, 0, &now);
  precis_kv_set_int(&now, "autotune", req->options->autotune);
  int rc = 0;
  for (size_t i = 0; i < sizeof measure_keys / sizeof measure_keys[0] && rc == 0; i++) {
    int opt = measure_keys[i].opt;
    const char *flag = measure_keys[i].flag, *key = measure_keys[i].key;
    const char *then = precis_kv_get(&j->run.settings, key);
    if (req->measure_given[opt - PRECIS_CLI_MEASURE_OPTION_BASE]) {
      const char *value = precis_kv_get(&now, key);
      if (opt == PRECIS_OPT_MAX_TIME && journal_cpu_budget(j)) {
        char *had = precis_asprintf("none (the cpu backend's budget, %s ms)", then ? then : "?");
        differs(diffs, flag, had ? had : "none", value ? value : "?");
        free(had);
      } else if (!same_value(then, value)) {
        differs(diffs, flag, then ? then : "none (the default)", value ? value : "none");
      }
      continue;
    }
    /* Not given: the journal's value, as if given again (a missing one is the default). */
    if (!then) continue;
    if (opt == PRECIS_OPT_MAX_TIME && journal_cpu_budget(j)) continue;
    if (opt == PRECIS_OPT_COLD && strcmp(then, "true") != 0) continue;
    if (precis_cli_measure_option("run", opt, then, req->options, req->require) != 1) {
      fprintf(stderr, "precis run: the journal's settings.%s (%s) is not a value of %s\n", key, then, flag);
      rc = 2;
    }
    if (opt == PRECIS_OPT_MAX_TIME) *req->max_time_given = true;
  }
  precis_kv_free(&now);
  return rc;
}

int precis_run_resume_adopt(const precis_journal *j, const char *journal_path, precis_run_request *req) {
  text_buf diffs = {0};
  int rc = 0;
  /* Recipes */
  if (req->recipes_given) {
    if ((rc = compare_recipes(j, req, &diffs)) != 0) goto done;
  } else if (j->run.n_recipes == 0) {
    fprintf(stderr, "precis run: %s: the journal records no recipes: give --recipes\n", journal_path);
    rc = 2;
    goto done;
  } else {
    free(req->adopted_recipes);
    req->adopted_recipes = join(j->run.recipes, j->run.n_recipes, ",", "");
    req->recipes_arg = req->adopted_recipes;
  }
  /* Workloads */
  if (req->workloads_given) {
    if (j->has_workloads != (req->workloads != NULL) ||
        !same_list(j->workloads, j->n_workloads, req->workloads, req->n_workloads)) {
      char *then = j->has_workloads ? join(j->workloads, j->n_workloads, ",", "none") : precis_strdup("all");
      char *now = join(req->workloads, req->n_workloads, ",", "none");
      differs(&diffs, "--workloads", then ? then : "?", now ? now : "?");
      free(then);
      free(now);
    }
  } else if (j->has_workloads) {
    req->workloads = calloc(j->n_workloads ? j->n_workloads : 1, sizeof *req->workloads);
    for (size_t i = 0; req->workloads && i < j->n_workloads; i++) req->workloads[i] = precis_strdup(j->workloads[i]);
    req->n_workloads = req->workloads ? j->n_workloads : 0;
    diffs.failed = diffs.failed || !req->workloads;
  }
  /* Backend: "auto" given again is compared once it has picked one (the runner's check). */
  const char *backend = precis_kv_get(&j->run.settings, "backend");
  if (req->backend_given) {
    if (backend && strcmp(req->backend_arg, "auto") != 0 && strcmp(req->backend_arg, backend) != 0)
      differs(&diffs, "--backend", backend, req->backend_arg);
  } else if (backend) {
    req->backend_arg = strcmp(backend, "cuda") == 0 ? "cuda" : strcmp(backend, "cpu") == 0 ? "cpu" : req->backend_arg;
  }
  /* Criteria, then --gate (recorded as true with --require too). */
  bool require_given = req->measure_given[PRECIS_OPT_REQUIRE - PRECIS_CLI_MEASURE_OPTION_BASE];
  if (require_given) {
    if (!same_list(j->run.criteria, j->run.n_criteria, req->require->texts, req->require->n_texts)) {
      char *then = join(j->run.criteria, j->run.n_criteria, " and ", "none");
      char *now = join(req->require->texts, req->require->n_texts, " and ", "none");
      differs(&diffs, "--require", then ? then : "?", now ? now : "?");
      free(then);
      free(now);
    }
  } else {
    for (size_t i = 0; i < j->run.n_criteria && rc == 0; i++)
      if (precis_cli_measure_option("run", PRECIS_OPT_REQUIRE, j->run.criteria[i], req->options, req->require) != 1)
        rc = 2;
    if (rc) goto done;
  }
  const char *gate = precis_kv_get(&j->run.settings, "gate");
  bool journal_gate = gate && strcmp(gate, "true") == 0;
  if (req->gate_given) {
    if (!journal_gate) differs(&diffs, "--gate", "false", "true");
  } else if (journal_gate && req->require->n_texts == 0) {
    req->gate = true;
  }
  if ((rc = take_or_compare_measure_options(j, req, &diffs)) != 0) goto done;
  if (diffs.failed) {
    fprintf(stderr, "precis run: out of memory comparing with the journal\n");
    rc = 1;
  } else if (diffs.text) {
    fprintf(stderr, "precis run: %s: cannot resume a different run: %s (leave an option out to take the journal's)\n",
            journal_path, diffs.text);
    rc = 2;
  }
done:
  free(diffs.text);
  return rc;
}

void precis_run_request_free(precis_run_request *req) {
  for (size_t i = 0; req->workloads && i < req->n_workloads; i++) free(req->workloads[i]);
  free(req->workloads);
  req->workloads = NULL;
  req->n_workloads = 0;
  free(req->adopted_recipes);
  req->adopted_recipes = NULL;
}
