/* The journal of a run (DIR/journal.jsonl): JSON Lines, written as the run goes so that an
 * interrupt, a crash or a full disk loses no completed case, and read back by `precis run --resume`.
 *
 *   line 1     the header: {"format": "precis-journal", "format_version": 1, "dataset": {...},
 *              "settings": {...}, "workloads": [...] | null, "part": {"index": 0, "count": 1}, ...}
 *   line 2...  one row per completed case, the same object as in report.json's "rows"
 *
 * Every line is written with one write() on an O_APPEND descriptor and fsync'ed, so lines of one
 * writer never interleave and a line is either whole or the torn last line of a killed writer (or of
 * a write that hit a full disk, which the writer cuts off again when it can). The reader takes only
 * lines that end in a newline and reports a torn last line instead of misreading it.
 *
 * Parts: a run split over shards or MPI ranks (DESIGN §13) gives each part its own journal,
 * named by precis_journal_name, whose header records the part; only the gatherer writes the report. */
#ifndef PRECIS_JOURNAL_H
#define PRECIS_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "results.h"

#define PRECIS_JOURNAL_FORMAT "precis-journal"
#define PRECIS_JOURNAL_FORMAT_VERSION 1

/* The file name of part `index` of `count`: "journal.jsonl" for a run in one part, else
 * "journal.part-0003-of-0016.jsonl" (zero-padded, so that a directory listing is in part order).
 * malloc'ed. */
char *precis_journal_name(int index, int count);

/* The identity of a case across runs: the key under which --resume matches a journaled row with a
 * case of this run (malloc'ed). Every comparison of cases goes through this one function. */
char *precis_journal_case_key(const precis_row *row);

/* What the header records of a run: the report's dataset, settings, recipes and criteria (rows are
 * ignored), the workload selection (NULL: all) and the part. */
typedef struct precis_journal_run {
  const precis_report *report;
  char *const *workloads;
  size_t n_workloads;
  int part_index, part_count;
} precis_journal_run;

typedef struct precis_journal_writer {
  int fd;
  char *path;
} precis_journal_writer;

/* Creates (truncates) the journal and writes its header. */
precis_status precis_journal_create(precis_journal_writer *w, const char *path, const precis_journal_run *run);
/* Opens an existing journal for appending after its first valid_bytes (a torn tail is cut off). */
precis_status precis_journal_reopen(precis_journal_writer *w, const char *path, long long valid_bytes);
/* Appends one row as one line. On a failed or short write the partial line is cut off again (when
 * the system allows) and the error names the file and the system's words. */
precis_status precis_journal_append(precis_journal_writer *w, const precis_row *row);
void precis_journal_close(precis_journal_writer *w);

typedef struct precis_journal {
  char *header_json;      /* the header line as written (for comparisons) */
  precis_report run;      /* tool, dataset, settings, recipes, criteria and environment from the header;
                             rows from the lines */
  int part_index, part_count; /* the header's part */
  bool has_workloads;     /* the header's workload selection (--workloads); false: all */
  char **workloads;
  size_t n_workloads;
  char host[256];         /* who wrote it (informative) */
  long pid;
  size_t rows_lines;      /* whole row lines read */
  size_t torn_line;       /* 1-based number of an incomplete last line; 0 when the file ends whole */
  size_t torn_bytes;      /* its length */
  long long valid_bytes;  /* bytes up to the end of the last whole line */
} precis_journal;

/* Reads a journal. A torn last line is not an error: it is ignored and described by torn_line and
 * torn_bytes. A malformed whole line, a missing or foreign header, or two rows of one case are
 * errors naming the file and the line. */
precis_status precis_journal_read(const char *path, precis_journal *out);
/* The same from a journal's text (size bytes; the text is modified); path names it in messages. */
precis_status precis_journal_parse(const char *path, char *text, size_t size, precis_journal *out);
void precis_journal_free(precis_journal *j);

/* NULL when `run` is the run the journal recorded (same dataset_id, settings, recipes, criteria,
 * workload selection and part); else a malloc'ed sentence naming the first difference, e.g.
 * "settings.min_samples: the journal has 3, this run 10". */
char *precis_journal_difference(const precis_journal *j, const precis_journal_run *run);

#endif
