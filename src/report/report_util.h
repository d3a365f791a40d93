/* Helpers shared by the human-facing printers (table, Markdown, HTML) and by recommend/compare:
 * number formatting for people, the backend label, and the order of workloads and recipes. */
#ifndef PRECIS_REPORT_UTIL_H
#define PRECIS_REPORT_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "results.h"

/* The one number formatter of every human-facing output (table, Markdown, HTML, recommend,
 * compare): `digits` significant digits written as people write them, 50, 1000, 12690, 0.0123, with
 * no exponent between 1e-4 and 1e15; smaller magnitudes (errors such as 3e-08) in e-notation; "-"
 * for NaN, "inf" for infinities. */
void precis_fmt_sig(char *buf, size_t len, double v, int digits);
/* A duration: "812.3 ms" below a second, "12.7 s" from a second on; "-" for NaN. */
void precis_fmt_ms(char *buf, size_t len, double ms);
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

/* The run's --min-samples (settings.min_samples); 0 when the report does not record it. */
long precis_report_min_samples(const precis_report *report);
/* True when a row was timed with fewer samples than --min-samples asked for (a slow emulation that
 * ran out of --max-time-ms): its latency is rough, and the printers flag it. */
bool precis_row_few_samples(const precis_row *row, long min_samples);

#endif
