/* The runner: workloads × recipes on one backend. It owns everything around a case — loading data,
 * metrics against the held-out references, criteria and verdicts, the journal, saved outputs —
 * so that a backend only executes and measures. Each case is isolated: a failure becomes a row
 * with status `failed` and the run goes on. */
#ifndef PRECIS_RUNNER_H
#define PRECIS_RUNNER_H

#include <stdbool.h>

#include "backend.h"
#include "numerics/criteria.h"
#include "numerics/recipe.h"
#include "report/results.h"

typedef struct precis_run_config {
  const char *dataset_path;
  const precis_recipe *recipes; /* in the order of the report's rows */
  size_t n_recipes;
  char *const *workloads; /* only these workloads (NULL: all) */
  size_t n_workloads;
  const precis_backend *backend;
  void *backend_ctx;
  precis_case_options case_options;
  const precis_criteria *require; /* NULL: each recipe's default criteria */
  const char *journal_path;       /* rows appended as JSON Lines as they complete (NULL: none) */
  bool resume;                    /* continue the run journal_path recorded (docs/robustness.md, "Resuming a run") */
  const char *save_outputs;       /* HDF5 file of every evaluated output (NULL: none) */
  bool force;
  bool progress_live;             /* a live \r line (terminal) rather than one line per row */
  bool progress_quiet;            /* no progress lines at all */
  const char *fault_inject;       /* "workload:recipe" made to fail (tests of case isolation) */
  /* A run split into parts (DESIGN §13): the cases are dealt to part_count parts by the rule of
   * deal.h and this process runs part part_index (1-based) only; part_count <= 1: every case. The
   * journal header records the part. */
  int part_index, part_count;
  /* Recorded in every row this process runs (precis_row's host, rank, device). */
  const char *host;
  int rank, device; /* -1: no MPI / no device */
  const char *target; /* the row's target ("sm_90"); NULL: none recorded */
  /* A workload's references (c_ref, ab_abs, c_ref_lo, grad: [batch, m, n] each) are held at most
   * this many bytes at a time, whole samples, at least one (0: PRECIS_REFERENCE_BLOCK_DEFAULT); the
   * rows are the same whatever the block (docs/model.md, "Running it in bounded memory"). */
  uint64_t reference_block_bytes;
} precis_run_config;

#define PRECIS_REFERENCE_BLOCK_DEFAULT ((uint64_t)256 << 20)

/* Fills report->rows (and dataset path/id); report->complete is false when interrupted. Returns
 * PRECIS_E_INTERRUPTED after an interrupt (the report holds every completed row), an error for
 * problems that concern the whole run (unreadable dataset, journal not writable), else PRECIS_OK.
 * report's settings, recipes and criteria must be filled in already: the journal header records
 * them, and with `resume` they are compared with the journal's (a difference is PRECIS_E_USAGE,
 * naming it); the journal's rows of this run's cases are then kept, not run again. */
precis_status precis_run_workloads(const precis_run_config *config, precis_report *report);

/* A row as a case of this run starts: names, shape and where it runs (cfg's host, part, rank,
 * device), nothing measured, status failed. */
void precis_case_row(precis_row *row, const precis_run_config *cfg, const precis_workload_info *w,
                     const precis_recipe *recipe);

/* The metrics of each held-out sample of an evaluated output (c, or c64 for out=fp64) against the
 * workload's c_ref and ab_abs (and, for a logit workload, its logit metrics): what a run aggregates
 * into a row's error. samples: w->batch entries. */
precis_status precis_case_sample_metrics(const precis_workload_info *w, const precis_workload_data *d, const float *c,
                                         const double *c64, precis_sample_metrics *samples);

/* Applies criteria to a row with status ok: sets verdict and verdict_detail. */
void precis_row_judge(precis_row *row, const precis_criteria *criteria);

#endif
