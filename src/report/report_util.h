/* Helpers shared by the human-facing printers (table, Markdown, HTML) and by recommend/compare:
 * number formatting for people, the backend label, and the order of workloads and recipes. */
#ifndef PRECIS_REPORT_UTIL_H
#define PRECIS_REPORT_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "results.h"

/* "%.3g"-style with `digits` significant digits; "-" for NaN. */
void precis_fmt_sig(char *buf, size_t len, double v, int digits);
/* "12.5 MiB", "812 KiB", "96 B"; "-" when negative (view absent). */
void precis_fmt_bytes(char *buf, size_t len, long long bytes);

/* The environment's backend ("cpu-emulation", "cuda"), or "unknown". */
const char *precis_report_backend(const precis_report *report);
bool precis_report_is_cpu_emulation(const precis_report *report);

/* Distinct workload names (or recipe names) in order of first appearance in the rows. The array
 * holds pointers into the report (free only the array). */
const char **precis_report_workloads(const precis_report *report, size_t *count);
const char **precis_report_recipe_names(const precis_report *report, size_t *count);
/* Position of a preset in the preset table (recipe.c); other names sort after, by name. */
int precis_recipe_rank(const char *name);

/* The slices sweep of one workload (docs/high-precision.md): its measured rows whose spec splits
 * into int8 slices (Ozaki), in increasing slice count, at most `max`; *fp64 the row of a plain
 * fp64 GEMM (a, b, acc fp64, no split) when there is one, else NULL. A view draws the sweep when
 * it has two points or more. */
typedef struct precis_sweep_point {
  const precis_row *row;
  int slices;
} precis_sweep_point;
size_t precis_report_slice_sweep(const precis_report *report, const char *workload, precis_sweep_point *points,
                                 size_t max, const precis_row **fp64);

/* The peak memory a recipe needs on the backend, the figure recommend's memory objective and the
 * charts use: tracked_peak_bytes when recorded, else tensor_bytes; -1 when neither is. */
long long precis_row_peak_bytes(const precis_row *row);

#endif
