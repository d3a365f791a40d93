/* A run in several parts at once (DESIGN §13, docs/scale-out.md): `run --devices` (one worker
 * process per GPU) and MPI ranks (one worker process per rank). Every part runs in a worker process
 * of its own and journals its rows (journal.part-IIII-of-NNNN.jsonl, journal.h); the gatherer (the
 * parent, or rank 0) builds the one report from the parts' journals and from how each worker ended.
 * A worker that dies (a crash in a driver, the OOM killer, kill -9) takes only its unfinished cases
 * with it: they become failed rows naming the part and why, and every other row is kept.
 *
 * Workers are processes rather than threads because a GPU context and a library crash are per
 * process, and because CUDA cannot be used in a child forked after the parent initialized it: the
 * parent never touches CUDA. */
#ifndef PRECIS_PARTS_H
#define PRECIS_PARTS_H

#include <stdbool.h>
#include <stddef.h>

#include "report/journal.h"
#include "runner.h"

/* How a part's worker ended. */
typedef struct precis_part_end {
  bool started;      /* a worker was started for the part */
  int exit_code;     /* when it exited */
  int signal;        /* the signal that ended it; 0 when it exited */
  char host[256];
  int rank, device;  /* -1: no MPI / no device */
  long pid;
} precis_part_end;

/* Starts a worker process that runs fn(arg) and ends with _exit(its value), running no exit
 * handlers (the parent's MPI and library state are the parent's). */
precis_status precis_part_spawn(int (*fn)(void *), void *arg, long *pid);
/* Waits for the worker and records how it ended. */
void precis_part_wait(long pid, precis_part_end *end);
/* "killed by signal 9 (Killed)", "exited with status 2", "was not started". */
void precis_part_end_describe(const precis_part_end *end, char *buf, size_t len);
/* Interrupted (SIGINT/SIGTERM, or exit 130/143): its cases are not run yet, not failed. */
bool precis_part_end_interrupted(const precis_part_end *end);
/* Whether it ended by itself with a run's exit status (0, 1, 3, or interrupted). */
bool precis_part_end_normal(const precis_part_end *end);

/* Fills report from the n_parts journals (journals[p] is part p+1's; header_json NULL when it left
 * none) of the run cfg describes (dataset, workloads, recipes, part_count; cfg->part_index is not
 * used): rows in dataset order; a case missing from its part's journal is a failed row naming why
 * when the worker died or failed, and absent (report->complete false) when it was interrupted.
 * Header, settings and environment come from the first part that left a journal; every part's
 * environment is kept in environment.parts. Rows are moved out of the journals. */
precis_status precis_parts_gather(const precis_run_config *cfg, precis_journal *journals, const precis_part_end *ends,
                                  int n_parts, precis_report *report);

#endif
