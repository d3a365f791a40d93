/* `precis run --resume DIR` finishes the run that was started: the options that decide a row are
 * taken from the journal in DIR; an option given again must agree with it (docs/robustness.md). */
#ifndef PRECIS_CLI_RUN_RESUME_H
#define PRECIS_CLI_RUN_RESUME_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "report/journal.h"

#define PRECIS_RUN_MEASURE_OPTIONS (PRECIS_OPT_TARGET - PRECIS_CLI_MEASURE_OPTION_BASE + 1)

/* What a `precis run` command line asked for, each option with whether it was given. A resume
 * fills in what was not given from the journal. */
typedef struct precis_run_request {
  const char *recipes_arg;
  bool recipes_given;
  char **workloads; /* malloc'ed list (NULL: all); replaced when taken from the journal */
  size_t n_workloads;
  bool workloads_given;
  const char *backend_arg;
  bool backend_given;
  bool gate;
  bool gate_given;
  precis_case_options *options;
  precis_cli_require *require;
  bool measure_given[PRECIS_RUN_MEASURE_OPTIONS]; /* indexed by opt - PRECIS_CLI_MEASURE_OPTION_BASE */
  bool *max_time_given;                           /* --max-time-ms given or taken from the journal */
  int shard_index, shard_count;
  bool shard_given;
  char *adopted_recipes; /* the journal's recipe list as text, when taken from it (malloc'ed) */
} precis_run_request;

/* Reads the journal a resume continues: the own part's (own_part of n_parts), else another part's
 * (their settings are the run's); a run in one part without --shard whose directory holds the
 * journal of a single shard resumes that shard (req->shard_index/count are set to it). Returns 0,
 * or 2 after a message naming DIR and what is missing. *path is malloc'ed. */
int precis_run_resume_read(const char *out_dir, int n_parts, int own_part, bool may_infer_shard,
                           precis_run_request *req, precis_journal *journal, char **path);

/* Takes every option that decides a row and was not given from the journal, and compares those
 * that were given with it. Returns 0, or 2 after one message naming each option that differs with
 * both values ("--recipes: the journal has fp32,bf16, this run fp32"). */
int precis_run_resume_adopt(const precis_journal *journal, const char *journal_path, precis_run_request *req);

void precis_run_request_free(precis_run_request *req);

#endif
