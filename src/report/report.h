/* Printers over the results model (DESIGN §8), and the reader that brings report.json back. All
 * files are written atomically; every string that came from a dataset is escaped for its format. */
#ifndef PRECIS_REPORT_H
#define PRECIS_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "results.h"
#include "base/status.h"

precis_status precis_report_write_json(const precis_report *report, const char *path, bool force);
precis_status precis_report_read_json(const char *path, precis_report *out);
precis_status precis_report_write_csv(const precis_report *report, const char *path, bool force);
precis_status precis_report_write_markdown(const precis_report *report, const char *path, bool force);
precis_status precis_report_write_html(const precis_report *report, const char *path, bool force);
/* report.json, report.csv, report.md and report.html into dir (created if needed). */
precis_status precis_report_write_all(const precis_report *report, const char *dir, bool force);
/* The compact table on stdout. */
void precis_report_print_table(const precis_report *report, FILE *out);
/* The answer under the table (recommend's rule on the rows' criteria): the recommendation when the
 * run was given a target (--require), else the frontier and how to ask, naming report_path. */
void precis_report_print_answer(const precis_report *report, const char *report_path, FILE *out);

/* One row as a single JSON line (the journal, DESIGN §8), and back. */
char *precis_row_to_json_line(const precis_row *row);
precis_status precis_row_from_json_line(const char *line, precis_row *out);

#endif
