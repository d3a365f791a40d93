/* report.html: one self-contained file (inline CSS and SVG; no script, no network, readable
 * without JavaScript). Per workload: error against throughput with the Pareto front and the
 * recommended recipe, memory per recipe by view, and the latency distribution per recipe; then
 * the environment. Every string from a dataset or a row goes through precis_buf_html. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "recommend.h"
#include "report.h"
#include "report_util.h"

static const char *recipe_color(const char *recipe) {
  static const char *const palette[] = {"#1f77b4", "#17becf", "#2ca02c", "#8c8c00", "#ff7f0e", "#d62728", "#9467bd"};
  int rank = precis_recipe_rank(recipe);
  return rank >= 0 && rank < (int)(sizeof palette / sizeof palette[0]) ? palette[rank] : "#7f7f7f";
}

static const char style[] =
    "<style>\n"
    "body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:20px auto;max-width:1180px;color:#222;"
    "background:#fff;font-size:14px;padding:0 12px}\n"
    "h1{font-size:24px;margin:0 0 8px}h2{font-size:19px;margin:26px 0 6px;border-bottom:2px solid #ddd}"
    "h3{font-size:15px;margin:12px 0 4px}\n"
    ".banner{padding:8px 12px;margin:8px 0;border-radius:4px}\n"
    ".incomplete{background:#fde2e2;border:2px solid #c00;color:#900;font-weight:bold;font-size:16px}\n"
    ".cpu{background:#fff6d6;border:1px solid #d9b000}\n"
    ".decision{background:#e7f4e7;border:1px solid #3a3}\n.nodecision{background:#fde2e2;border:1px solid #c33}\n"
    ".noanswer{background:#eef3fb;border:1px solid #7a9cc6}\n.banner p{margin:3px 0}\n"
    "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;padding:2px 7px;font-size:12.5px;"
    "text-align:right}th{background:#f3f3f3}td.t,th.t{text-align:left}\n"
    ".kv td,.kv th{text-align:left}.pass{color:#070}.fail{color:#b00;font-weight:bold}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:14px}.chart{border:1px solid #e3e3e3;padding:4px}\n"
    ".chart p{margin:2px 4px;font-size:12px;color:#555;max-width:540px}\n"
    "svg text{font-family:'DejaVu Sans',Verdana,sans-serif;font-size:11px;fill:#222}\n"
    "svg .axis{stroke:#444;stroke-width:1}svg .grid{stroke:#e5e5e5;stroke-width:1}\n"
    "svg .pareto{fill:none;stroke:#555;stroke-width:1.5;stroke-dasharray:6 4}\n"
    "svg .recommended-ring{fill:none;stroke:#e0a800;stroke-width:3}\n"
    "svg .lat-box{fill-opacity:.25;stroke-width:1.2}svg .lat-median{stroke:#000;stroke-width:2}\n"
    "svg .lat-whisker{stroke:#555;stroke-width:1}svg .lat-sample{fill-opacity:.55}\n"
    ".muted{color:#666;font-size:12px}\n"
    "table.layers td,table.layers th{font-size:11px;padding:0 5px;height:15px;white-space:nowrap;border-color:#ddd}\n"
    "table.layers th{position:sticky;top:0}table.layers td.t{max-width:460px;overflow:hidden;text-overflow:ellipsis}\n"
    "table.layers td.fail{font-weight:normal;color:#555;background-image:repeating-linear-gradient(45deg,transparent 0 "
    "4px,rgba(0,0,0,.18) 4px 5px)}table.layers td.pass{color:#222}table.layers td.dark{color:#fff}"
    "table.layers td.notrun{color:#999}\n"
    "</style>\n";

/* ------------------------------------------------------------ scatter: error vs throughput */

enum { SC_W = 540, SC_H = 350, SC_L = 72, SC_R = 24, SC_T = 18, SC_B = 48 };

typedef struct point {
  const precis_row *row;
  double x, y;   /* tflops, error as plotted (exact zeros at the floor) */
  bool exact, front;
} point;

static void nice_ticks(double max, double *step) {
  if (!(max > 0) || !isfinite(max)) max = 1; /* keeps every axis loop finite */
  double raw = max / 5, mag = pow(10, floor(log10(raw)));
  double norm = raw / mag;
  *step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

static void html_scatter(precis_buf *b, const precis_report *report, const char *workload, const char *recommended,
                         bool cpu) {
  point pts[64];
  size_t n = 0;
  double min_pos = INFINITY, max_err = 0, max_x = 0;
  precis_buf skipped;
  precis_buf_init(&skipped);
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0) continue;
    const precis_metric_value *rel = &row->error[PRECIS_METRIC_REL_FRO];
    /* An infinite error (an output that overflowed) or a missing figure has no place on the axes;
     * it is listed under the chart instead. */
    if (row->status != PRECIS_ROW_OK || !rel->present || !isfinite(rel->worst) || !(row->tflops > 0) ||
        !isfinite(row->tflops) || n == 64) {
      precis_buf_append(&skipped, skipped.len ? ", " : "");
      precis_buf_html(&skipped, row->recipe);
      precis_buf_append(&skipped, " (");
      precis_buf_html(&skipped, row->status != PRECIS_ROW_OK       ? precis_row_status_str(row->status)
                                : rel->present && isinf(rel->worst) ? "rel_fro infinite"
                                                                    : "no finite error or throughput");
      precis_buf_append(&skipped, ")");
      continue;
    }
    pts[n] = (point){.row = row, .x = row->tflops, .y = rel->worst, .exact = rel->worst <= 0};
    if (rel->worst > 0 && rel->worst < min_pos) min_pos = rel->worst;
    if (rel->worst > max_err) max_err = rel->worst;
    if (row->tflops > max_x) max_x = row->tflops;
    n++;
  }
  double floor_err = isfinite(min_pos) ? min_pos / 10 : 1e-12;
  if (max_err <= 0) max_err = floor_err * 10;
  for (size_t i = 0; i < n; i++)
    if (pts[i].exact) pts[i].y = floor_err;
  /* Pareto front: no other point is at least as fast and at least as accurate, and better in one. */
  for (size_t i = 0; i < n; i++) {
    pts[i].front = true;
    for (size_t j = 0; j < n && pts[i].front; j++)
      if (j != i && pts[j].x >= pts[i].x && pts[j].y <= pts[i].y && (pts[j].x > pts[i].x || pts[j].y < pts[i].y))
        pts[i].front = false;
  }
  double lo = floor(log10(floor_err < min_pos ? floor_err : min_pos)), hi = ceil(log10(max_err));
  if (!isfinite(lo)) lo = -12;
  if (hi <= lo) hi = lo + 1;
  if (hi - lo > 40) lo = hi - 40; /* a bounded axis; smaller errors sit on its floor */
  for (size_t i = 0; i < n; i++)
    if (log10(pts[i].y) < lo) pts[i].y = pow(10, lo);
  double step;
  if (max_x <= 0) max_x = 1;
  nice_ticks(max_x * 1.08, &step);
  double x_max = ceil(max_x * 1.08 / step) * step;
  double pw = SC_W - SC_L - SC_R, ph = SC_H - SC_T - SC_B;
#define SX(v) (SC_L + (v) / x_max * pw)
#define SY(v) (SC_T + (hi - log10(v)) / (hi - lo) * ph)
  precis_buf_appendf(b, "<div class=\"chart\"><svg class=\"scatter\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                        "role=\"img\" aria-label=\"error against throughput\">\n",
                     SC_W, SC_H, SC_W, SC_H);
  for (double e = lo; e <= hi + 1e-9; e += 1) {
    double y = SC_T + (hi - e) / (hi - lo) * ph;
    precis_buf_appendf(b, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                       SC_L, SC_W - SC_R, y, y, SC_L - 5, y + 4, (int)e);
  }
  for (double v = 0; v <= x_max + step / 2; v += step) {
    double x = SX(v);
    char label[40];
    precis_fmt_sig(label, sizeof label, v, 3);
    precis_buf_appendf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
                          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                       x, x, SC_T, SC_H - SC_B, x, SC_H - SC_B + 15, label);
  }
  precis_buf_appendf(b, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
                        "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
                     SC_L, SC_W - SC_R, SC_H - SC_B, SC_H - SC_B, SC_L, SC_L, SC_T, SC_H - SC_B);
  precis_buf_appendf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">throughput, TFLOP/s%s</text>\n",
                     SC_L + (int)pw / 2, SC_H - 10, cpu ? " (CPU emulation timings)" : "");
  precis_buf_appendf(b, "<text transform=\"translate(16,%d) rotate(-90)\" text-anchor=\"middle\">rel_fro, worst "
                        "over samples (log scale)</text>\n",
                     SC_T + (int)ph / 2);
  /* The front as a dashed line, from the most accurate to the fastest. */
  size_t order[64], nf = 0;
  for (size_t i = 0; i < n; i++)
    if (pts[i].front) order[nf++] = i;
  for (size_t i = 1; i < nf; i++)
    for (size_t j = i; j > 0 && pts[order[j]].x < pts[order[j - 1]].x; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  precis_buf_append(b, "<path class=\"pareto\" d=\"");
  for (size_t i = 0; i < nf; i++)
    precis_buf_appendf(b, "%s%.1f %.1f", i ? " L" : "M", SX(pts[order[i]].x), SY(pts[order[i]].y));
  precis_buf_append(b, "\"/>\n");
  double placed_x[64], placed_y[64]; /* labels already drawn, to keep new ones off them */
  size_t n_placed = 0;
  for (size_t i = 0; i < n; i++) {
    const precis_row *row = pts[i].row;
    bool fail = row->verdict == PRECIS_VERDICT_FAIL;
    bool rec = recommended && strcmp(recommended, row->recipe) == 0;
    double cx = SX(pts[i].x), cy = SY(pts[i].y);
    const char *color = recipe_color(row->recipe);
    if (rec) precis_buf_appendf(b, "<circle class=\"recommended-ring\" cx=\"%.1f\" cy=\"%.1f\" r=\"10\"/>\n", cx, cy);
    precis_buf_appendf(b, "<circle class=\"point%s%s%s\" data-recipe=\"", fail ? " fail" : "", pts[i].front ? " front" : "",
                       rec ? " recommended" : "");
    precis_buf_html(b, row->recipe);
    precis_buf_appendf(b, "\" cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\" stroke=\"%s\" stroke-width=\"2\"><title>",
                       cx, cy, fail ? "#fff" : color, color);
    precis_buf_html(b, row->recipe);
    char err_text[40], tflops_text[40];
    precis_fmt_sig(err_text, sizeof err_text, pts[i].y, 3);
    precis_fmt_sig(tflops_text, sizeof tflops_text, pts[i].x, 3);
    precis_buf_appendf(b, ": rel_fro %s%s, %s TFLOP/s%s</title></circle>\n", pts[i].exact ? "0 (exact), drawn at " : "",
                       err_text, tflops_text, fail ? ", fails its criteria" : "");
    bool left = cx > SC_W - 110;
    double lx = cx + (left ? -10 : 10), ly = cy - 8;
    static const double offsets[] = {-8, 16, -20, 28, -32, 40};
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
      ly = cy + offsets[o];
      bool clash = false;
      for (size_t j = 0; j < n_placed && !clash; j++) clash = fabs(placed_y[j] - ly) < 12 && fabs(placed_x[j] - lx) < 60;
      if (!clash) break;
    }
    if (n_placed < 64) placed_x[n_placed] = lx, placed_y[n_placed++] = ly;
    precis_buf_appendf(b, "<text x=\"%.1f\" y=\"%.1f\"%s>", lx, ly, left ? " text-anchor=\"end\"" : "");
    precis_buf_html(b, row->recipe);
    if (pts[i].exact) precis_buf_append(b, " (exact)");
    if (fail) precis_buf_append(b, " (fail)");
    if (rec) precis_buf_append(b, " \xe2\x98\x85");
    precis_buf_append(b, "</text>\n");
  }
#undef SX
#undef SY
  precis_buf_append(b, "</svg>\n<p>Error against throughput. Filled: meets its criteria; hollow: fails. Dashed: the "
                       "Pareto front (no other recipe is both faster and more accurate). ");
  if (recommended) {
    precis_buf_append(b, "Ring and \xe2\x98\x85: the recommended recipe for the run's --require (lowest total "
                         "latency among those passing on every workload; latencies within the noise tie), ");
    precis_buf_html(b, recommended);
  } else {
    precis_buf_append(b, "No recipe is marked recommended: the run was given no accuracy target (--require)");
  }
  precis_buf_append(b, ".");
  if (skipped.len) {
    precis_buf_append(b, " Not plotted: ");
    precis_buf_append(b, skipped.data);
    precis_buf_append(b, ".");
  }
  precis_buf_append(b, "</p></div>\n");
  precis_buf_free(&skipped);
}

/* ------------------------------------------------------------ memory by view */

/* The Ozaki slices sweep: rel_fro against slices (log scale), each point titled with its time, and
 * fp64 as a dashed line when it ran. Exact outputs (rel_fro 0) sit on the axis floor. */
static void html_sweep(precis_buf *b, const precis_report *report, const char *workload, bool cpu) {
  precis_sweep_point pts[64];
  const precis_row *fp64;
  size_t n = precis_report_slice_sweep(report, workload, pts, 64, &fp64);
  if (n < 2) return;
  double ys[65];
  double min_pos = INFINITY, max_err = 0;
  for (size_t i = 0; i <= n; i++) {
    const precis_row *row = i < n ? pts[i].row : fp64;
    const precis_metric_value *v = row ? &row->error[PRECIS_METRIC_REL_FRO] : NULL;
    ys[i] = v && v->present && isfinite(v->worst) ? v->worst : NAN;
    if (ys[i] > 0 && ys[i] < min_pos) min_pos = ys[i];
    if (ys[i] > max_err) max_err = ys[i];
  }
  if (!isfinite(min_pos)) min_pos = 1e-17;
  if (!(max_err > 0)) max_err = min_pos * 10;
  double lo = floor(log10(min_pos)) - 1, hi = ceil(log10(max_err));
  if (hi <= lo) hi = lo + 1;
  for (size_t i = 0; i <= n; i++)
    if (!isnan(ys[i]) && !(ys[i] > pow(10, lo))) ys[i] = pow(10, lo);
  int s_min = pts[0].slices, s_max = pts[n - 1].slices;
  if (s_max == s_min) s_max = s_min + 1;
  double pw = SC_W - SC_L - SC_R, ph = SC_H - SC_T - SC_B;
#define SX(s) (SC_L + 20 + ((double)(s) - s_min) / (s_max - s_min) * (pw - 40))
#define SY(v) (SC_T + (hi - log10(v)) / (hi - lo) * ph)
  precis_buf_appendf(b, "<div class=\"chart\"><svg class=\"sweep\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                        "role=\"img\" aria-label=\"error against slices\">\n",
                     SC_W, SC_H, SC_W, SC_H);
  for (double e = lo; e <= hi + 1e-9; e += 1) {
    double y = SC_T + (hi - e) / (hi - lo) * ph;
    precis_buf_appendf(b, "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                          "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                       SC_L, SC_W - SC_R, y, y, SC_L - 5, y + 4, (int)e);
  }
  for (size_t i = 0; i < n; i++)
    precis_buf_appendf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", SX(pts[i].slices),
                       SC_H - SC_B + 15, pts[i].slices);
  precis_buf_appendf(b, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>"
                        "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n",
                     SC_L, SC_W - SC_R, SC_H - SC_B, SC_H - SC_B, SC_L, SC_L, SC_T, SC_H - SC_B);
  precis_buf_appendf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">int8 slices per operand (Ozaki)</text>\n",
                     SC_L + (int)pw / 2, SC_H - 10);
  precis_buf_appendf(b, "<text transform=\"translate(16,%d) rotate(-90)\" text-anchor=\"middle\">rel_fro, worst "
                        "over samples (log scale)</text>\n",
                     SC_T + (int)ph / 2);
  if (fp64 && !isnan(ys[n])) {
    double y = SY(ys[n]);
    precis_buf_appendf(b, "<line class=\"pareto\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                          "<text x=\"%d\" y=\"%.1f\">",
                       SC_L, SC_W - SC_R, y, y, SC_L + 4, y + 14);
    precis_buf_html(b, fp64->recipe);
    precis_buf_append(b, "</text>\n");
  }
  precis_buf_append(b, "<path class=\"pareto\" style=\"stroke-dasharray:none\" d=\"");
  bool started = false;
  for (size_t i = 0; i < n; i++) {
    if (isnan(ys[i])) continue;
    precis_buf_appendf(b, "%s%.1f %.1f", started ? " L" : "M", SX(pts[i].slices), SY(ys[i]));
    started = true;
  }
  precis_buf_append(b, "\"/>\n");
  for (size_t i = 0; i < n; i++) {
    if (isnan(ys[i])) continue;
    const precis_row *row = pts[i].row;
    bool fail = row->verdict == PRECIS_VERDICT_FAIL;
    const char *color = recipe_color(row->recipe);
    precis_buf_appendf(b, "<circle class=\"point%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" "
                          "stroke-width=\"2\"><title>",
                       fail ? " fail" : "", SX(pts[i].slices), SY(ys[i]), fail ? "#fff" : color, color);
    precis_buf_html(b, row->recipe);
    char t[32];
    precis_fmt_sig(t, sizeof t, row->time.median_ms, 3);
    precis_buf_appendf(b, ": rel_fro %.3g, median %s ms%s</title></circle>\n", ys[i], t, fail ? ", fails its criteria" : "");
    precis_buf_appendf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s ms</text>\n", SX(pts[i].slices),
                       SY(ys[i]) - 9, t);
  }
#undef SX
#undef SY
  precis_buf_appendf(b, "</svg>\n<p>Error against int8 slices per operand (Ozaki scheme I; N slices run N(N+1)/2 int8 "
                        "GEMMs), each point labelled with its median time%s. Hollow: fails its criteria (fp64's "
                        "componentwise bound by default). Dashed: fp64.</p></div>\n",
                     cpu ? " (CPU emulation)" : "");
}

static void html_memory(precis_buf *b, const precis_report *report, const char *workload) {
  static const char *const view_names[] = {"tensor", "tracked peak", "device peak - baseline", "untracked",
                                           "host peak RSS (process)"};
  static const char *const view_keys[] = {"tensor", "tracked", "device", "untracked", "host-rss"};
  static const char *const view_colors[] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d9d9d"};
  enum { VIEWS = 5, BAR_H = 11, LEFT = 90, WIDTH = 540, RIGHT = 110 };
  const precis_row *rows[64];
  size_t n = 0;
  long long max = 0;
  bool used[VIEWS] = {false};
  for (size_t i = 0; i < report->n_rows && n < 64; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0) continue;
    rows[n++] = row;
  }
  long long values[64][VIEWS];
  for (size_t i = 0; i < n; i++) {
    const precis_memory *m = &rows[i]->memory;
    values[i][0] = m->tensor_bytes;
    values[i][1] = m->tracked_peak_bytes;
    values[i][2] = m->device_peak_bytes >= 0 && m->device_baseline_bytes >= 0 ? m->device_peak_bytes - m->device_baseline_bytes : -1;
    values[i][3] = m->untracked_bytes;
    values[i][4] = m->host_peak_rss_bytes;
    for (int v = 0; v < VIEWS; v++)
      if (values[i][v] >= 0) {
        used[v] = true;
        if (values[i][v] > max && v != 4) max = values[i][v];
      }
  }
  /* The process's RSS (hundreds of MiB of libraries and buffers) would flatten the per-recipe
   * views; the scale follows those, and longer RSS bars are cut and marked. */
  long long rss_max = 0;
  for (size_t i = 0; i < n; i++)
    if (values[i][4] > rss_max) rss_max = values[i][4];
  if (max == 0) max = rss_max;
  int n_views = 0;
  for (int v = 0; v < VIEWS; v++) n_views += used[v];
  int group = n_views * (BAR_H + 2) + 10;
  int height = 30 + (int)n * group + 20;
  precis_buf_appendf(b, "<div class=\"chart\"><svg class=\"memory\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                        "role=\"img\" aria-label=\"memory by view\">\n",
                     WIDTH, height, WIDTH, height);
  int lx = LEFT;
  for (int v = 0; v < VIEWS; v++) {
    if (!used[v]) continue;
    precis_buf_appendf(b, "<rect x=\"%d\" y=\"6\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"15\">%s</text>\n",
                       lx, view_colors[v], lx + 13, view_names[v]);
    lx += 18 + (int)strlen(view_names[v]) * 6;
  }
  double scale = max > 0 ? (double)(WIDTH - LEFT - RIGHT) / (double)max : 0;
  for (size_t i = 0; i < n; i++) {
    int y0 = 30 + (int)i * group;
    precis_buf_appendf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LEFT - 6, y0 + group / 2);
    precis_buf_html(b, rows[i]->recipe);
    precis_buf_append(b, "</text>\n");
    int k = 0;
    for (int v = 0; v < VIEWS; v++) {
      if (!used[v]) continue;
      int y = y0 + k * (BAR_H + 2);
      k++;
      char label[32];
      precis_fmt_bytes(label, sizeof label, values[i][v]);
      double w = values[i][v] > 0 ? (double)values[i][v] * scale : 0;
      bool cut = w > WIDTH - LEFT - RIGHT;
      if (cut) w = WIDTH - LEFT - RIGHT;
      if (values[i][v] >= 0) {
        precis_buf_appendf(b, "<rect class=\"mem-bar\" data-view=\"%s\" data-recipe=\"", view_keys[v]);
        precis_buf_html(b, rows[i]->recipe);
        precis_buf_appendf(b, "\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s: %lld bytes</title></rect>\n",
                           LEFT, y, w < 1 && values[i][v] > 0 ? 1.0 : w, BAR_H, view_colors[v], view_names[v],
                           values[i][v]);
      }
      if (cut)
        precis_buf_appendf(b, "<path d=\"M%.1f %d l-5 %d l5 %d\" fill=\"#fff\" stroke=\"#fff\" stroke-width=\"2\"/>\n",
                           LEFT + w, y - 1, BAR_H / 2 + 1, BAR_H / 2 + 1);
      precis_buf_appendf(b, "<text x=\"%.1f\" y=\"%d\" class=\"muted\">%s%s</text>\n", LEFT + w + 4, y + BAR_H - 1,
                         values[i][v] >= 0 ? label : "n/a", cut ? " (cut)" : "");
    }
  }
  precis_buf_append(b, "</svg>\n<p>Memory per recipe, by view: tensor = analytic bytes of inputs, outputs and scales in "
                       "the recipe's formats; tracked peak = the evaluator's own allocations at their peak; device "
                       "peak - baseline and untracked (device peak - baseline - tracked) come from the device; host "
                       "peak RSS is the whole process's, on the CPU backend.</p></div>\n");
}

/* ------------------------------------------------------------ latency distribution */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile_sorted(const double *v, size_t n, double q) {
  double idx = q * (double)(n - 1);
  size_t i = (size_t)floor(idx);
  if (i + 1 >= n) return v[n - 1];
  return v[i] + (v[i + 1] - v[i]) * (idx - (double)i);
}

typedef struct latency_axis {
  bool log;
  double lo, hi; /* linear: 0 .. hi ms; log: decades lo .. hi (log10 ms) */
  double left, width;
} latency_axis;

static double lat_x(const latency_axis *ax, double v) {
  if (!ax->log) return ax->left + v / ax->hi * ax->width;
  double l = v > 0 ? log10(v) : ax->lo;
  if (l < ax->lo) l = ax->lo;
  return ax->left + (l - ax->lo) / (ax->hi - ax->lo) * ax->width;
}

static void html_latency(precis_buf *b, const precis_report *report, const char *workload, bool cpu) {
  enum { WIDTH = 540, LEFT = 90, RIGHT = 24, ROW_H = 30, MAX_DOTS = 300 };
  const precis_row *rows[64];
  size_t n = 0;
  double max = 0, min_pos = INFINITY;
  for (size_t i = 0; i < report->n_rows && n < 64; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0 || !isfinite(row->time.median_ms)) continue;
    rows[n++] = row;
    double top = isfinite(row->time.p99_ms) ? row->time.p99_ms : row->time.median_ms;
    double bottom = isfinite(row->time.min_ms) ? row->time.min_ms : row->time.median_ms;
    for (size_t s = 0; s < row->time.n_samples_ms; s++) {
      double v = row->time.samples_ms[s];
      if (isfinite(v) && v > top) top = v;
      if (isfinite(v) && v > 0 && v < bottom) bottom = v;
    }
    if (top > max) max = top;
    if (bottom > 0 && bottom < min_pos) min_pos = bottom;
  }
  int height = 20 + (int)n * ROW_H + 40;
  precis_buf_appendf(b, "<div class=\"chart\"><svg class=\"latency\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                        "role=\"img\" aria-label=\"latency distribution\">\n",
                     WIDTH, height, WIDTH, height);
  if (n == 0) {
    precis_buf_append(b, "<text x=\"10\" y=\"30\">no timed rows</text></svg></div>\n");
    return;
  }
  if (!(max > 0)) max = 1;
  /* A slow recipe more than ~10x the fastest would squash the others to a sliver on a linear axis:
   * then the axis is logarithmic, in decades with 1-2-5 ticks, and labelled so. */
  latency_axis ax = {.log = isfinite(min_pos) && max / min_pos > 10, .left = LEFT, .width = WIDTH - LEFT - RIGHT};
  int axis_y = 20 + (int)n * ROW_H;
  if (ax.log) {
    ax.lo = floor(log10(min_pos));
    ax.hi = ceil(log10(max));
    if (ax.hi <= ax.lo) ax.hi = ax.lo + 1;
    for (double e = ax.lo; e <= ax.hi + 1e-9; e += 1)
      for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
        double v = (double)m * pow(10, e);
        if (log10(v) > ax.hi + 1e-9) break;
        char label[40];
        precis_fmt_sig(label, sizeof label, v, 3);
        precis_buf_appendf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"12\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
                              "text-anchor=\"middle\">%s</text>\n",
                           lat_x(&ax, v), lat_x(&ax, v), axis_y, lat_x(&ax, v), axis_y + 15, m == 1 ? label : "");
      }
  } else {
    double step;
    nice_ticks(max * 1.05, &step);
    ax.hi = ceil(max * 1.05 / step) * step;
    for (double v = 0; v <= ax.hi + step / 2; v += step) {
      char label[40];
      precis_fmt_sig(label, sizeof label, v, 3);
      precis_buf_appendf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"12\" y2=\"%d\"/><text x=\"%.1f\" y=\"%d\" "
                            "text-anchor=\"middle\">%s</text>\n",
                         lat_x(&ax, v), lat_x(&ax, v), axis_y, lat_x(&ax, v), axis_y + 15, label);
    }
  }
#define LX(v) lat_x(&ax, (v))
  double pw = ax.width;
  precis_buf_appendf(b, "<line class=\"axis\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n", LEFT, WIDTH - RIGHT, axis_y, axis_y);
  precis_buf_appendf(b, "<text class=\"lat-axis-label\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">latency per call, ms%s%s</text>\n",
                     LEFT + (int)pw / 2, axis_y + 32, ax.log ? " (log scale)" : "", cpu ? " (CPU timings, not GPU)" : "");
  for (size_t i = 0; i < n; i++) {
    const precis_row *row = rows[i];
    const precis_timing *t = &row->time;
    int yc = 20 + (int)i * ROW_H + ROW_H / 2;
    const char *color = recipe_color(row->recipe);
    precis_buf_appendf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LEFT - 6, yc + 4);
    precis_buf_html(b, row->recipe);
    precis_buf_append(b, "</text>\n");
    double q1 = t->median_ms, q3 = t->median_ms, lo = t->min_ms, hi = t->p99_ms;
    double *sorted = NULL;
    if (t->n_samples_ms > 0 && (sorted = malloc(t->n_samples_ms * sizeof *sorted))) {
      memcpy(sorted, t->samples_ms, t->n_samples_ms * sizeof *sorted);
      qsort(sorted, t->n_samples_ms, sizeof *sorted, cmp_double);
      q1 = quantile_sorted(sorted, t->n_samples_ms, 0.25);
      q3 = quantile_sorted(sorted, t->n_samples_ms, 0.75);
      if (isnan(lo)) lo = sorted[0];
      if (isnan(hi)) hi = sorted[t->n_samples_ms - 1];
    }
    if (isnan(lo)) lo = t->median_ms;
    if (isnan(hi)) hi = isnan(t->p95_ms) ? t->median_ms : t->p95_ms;
    precis_buf_appendf(b, "<line class=\"lat-whisker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>\n", LX(lo), LX(hi), yc, yc);
    precis_buf_appendf(b, "<rect class=\"lat-box\" data-recipe=\"");
    precis_buf_html(b, row->recipe);
    precis_buf_appendf(b, "\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"%s\"><title>",
                       LX(q1), yc - 9, fmax(LX(q3) - LX(q1), 1.0), 18, color, color);
    precis_buf_html(b, row->recipe);
    char med[40], p95[40], p99[40], mn[40];
    precis_fmt_ms(med, sizeof med, t->median_ms);
    precis_fmt_ms(p95, sizeof p95, t->p95_ms);
    precis_fmt_ms(p99, sizeof p99, t->p99_ms);
    precis_fmt_ms(mn, sizeof mn, t->min_ms);
    precis_buf_appendf(b, ": median %s, p95 %s, p99 %s, min %s, %ld samples</title></rect>\n", med, p95, p99, mn,
                       t->samples);
    /* Samples as a strip, thinned evenly to at most MAX_DOTS, jittered deterministically. */
    size_t stride = t->n_samples_ms > MAX_DOTS ? (t->n_samples_ms + MAX_DOTS - 1) / MAX_DOTS : 1;
    for (size_t s = 0; s < t->n_samples_ms; s += stride) {
      double jitter = fmod((double)s * 0.6180339887, 1.0) * 14 - 7;
      precis_buf_appendf(b, "<circle class=\"lat-sample\" cx=\"%.1f\" cy=\"%.1f\" r=\"1.8\" fill=\"%s\"/>", LX(t->samples_ms[s]),
                         yc + jitter, color);
    }
    precis_buf_appendf(b, "\n<line class=\"lat-median\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>\n", LX(t->median_ms),
                       LX(t->median_ms), yc - 11, yc + 11);
    if (!isnan(t->p95_ms))
      precis_buf_appendf(b, "<line class=\"lat-whisker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>\n", LX(t->p95_ms),
                         LX(t->p95_ms), yc - 5, yc + 5);
    free(sorted);
  }
#undef LX
  precis_buf_append(b, "</svg>\n<p>Latency per call: dots are the timed samples, the box spans the 25th to 75th "
                       "percentile, the black bar is the median, the short tick p95, the line min to p99.</p></div>\n");
}

/* ------------------------------------------------------------ tables and page */

static void html_sig(precis_buf *b, double v, int digits) {
  char num[40];
  precis_fmt_sig(num, sizeof num, v, digits);
  precis_buf_append(b, num);
}

static void html_rows_table(precis_buf *b, const precis_report *report, const char *workload, bool cpu) {
  long min_samples = precis_report_min_samples(report);
  precis_buf_appendf(b, "<table><tr><th class=\"t\">recipe</th><th class=\"t\">status</th><th class=\"t\">verdict</th>"
                        "<th>rel_fro</th><th>max_abs</th><th>max_cw</th><th>sqnr_db</th><th>nonfinite</th>"
                        "<th>median ms%s</th><th>p95 ms</th><th>TFLOP/s</th><th>tensor</th><th>peak</th>"
                        "<th class=\"t\">criteria / reason</th></tr>\n",
                     cpu ? " (CPU)" : "");
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0) continue;
    bool ok = row->status == PRECIS_ROW_OK;
    precis_buf_append(b, "<tr><td class=\"t\" title=\"");
    precis_buf_html(b, row->recipe_description);
    if (row->spec) {
      precis_buf_append(b, " &#10;");
      precis_buf_html(b, row->spec);
    }
    precis_buf_append(b, "\">");
    precis_buf_html(b, row->recipe);
    precis_buf_appendf(b, "</td><td class=\"t%s\">%s</td>", ok ? "" : " fail", precis_row_status_str(row->status));
    const char *verdict = precis_verdict_str(row->verdict);
    precis_buf_appendf(b, "<td class=\"t %s\">%s</td>", verdict ? verdict : "", verdict ? verdict : "-");
    static const precis_metric_id shown[] = {PRECIS_METRIC_REL_FRO, PRECIS_METRIC_MAX_ABS, PRECIS_METRIC_MAX_CW,
                                             PRECIS_METRIC_SQNR_DB, PRECIS_METRIC_NONFINITE};
    for (size_t j = 0; j < sizeof shown / sizeof shown[0]; j++) {
      precis_buf_append(b, "<td>");
      const precis_metric_value *v = &row->error[shown[j]];
      if (!ok) precis_buf_append(b, "-");
      else if (!v->present) precis_buf_append(b, shown[j] == PRECIS_METRIC_SQNR_DB ? "exact" : "null");
      else html_sig(b, v->worst, 3);
      precis_buf_append(b, "</td>");
    }
    char bytes[32];
    precis_buf_append(b, "<td>");
    html_sig(b, row->time.median_ms, 4);
    if (precis_row_few_samples(row, min_samples))
      precis_buf_appendf(b, " <span class=\"fail few-samples\" title=\"fewer timed samples than --min-samples: the "
                            "--max-time-ms budget ran out; a rough latency\">(%ld samples &lt; %ld)</span>",
                         row->time.samples, min_samples);
    precis_buf_append(b, "</td><td>");
    html_sig(b, row->time.p95_ms, 4);
    precis_buf_append(b, "</td><td>");
    html_sig(b, row->tflops, 3);
    precis_fmt_bytes(bytes, sizeof bytes, row->memory.tensor_bytes);
    precis_buf_appendf(b, "</td><td>%s</td>", bytes);
    precis_fmt_bytes(bytes, sizeof bytes, precis_row_peak_bytes(row));
    precis_buf_appendf(b, "<td>%s</td><td class=\"t\">", bytes);
    if (!ok) {
      precis_buf_html(b, row->reason ? row->reason : "(no reason recorded)");
    } else {
      for (size_t c = 0; c < row->criteria.count; c++) {
        char text[96];
        precis_criterion_format(&row->criteria.items[c], text, sizeof text);
        precis_buf_append(b, c ? ", " : "");
        precis_buf_html(b, text);
      }
      if (row->verdict == PRECIS_VERDICT_FAIL && row->verdict_detail) {
        precis_buf_append(b, " <span class=\"fail\">");
        precis_buf_html(b, row->verdict_detail);
        precis_buf_append(b, "</span>");
      }
    }
    precis_buf_append(b, "</td></tr>\n");
  }
  precis_buf_append(b, "</table>\n");
}

/* A logit workload (an imported lm_head): the model's output distribution per recipe, as report.md's
 * Logits section gives it. Nothing for other workloads. */
static void html_logits_table(precis_buf *b, const precis_report *report, const char *workload) {
  static const precis_metric_id ids[] = {PRECIS_METRIC_KL_MEAN, PRECIS_METRIC_KL_P99, PRECIS_METRIC_KL_MAX,
                                         PRECIS_METRIC_RKL_MEAN, PRECIS_METRIC_RKL_MAX, PRECIS_METRIC_TOP1_AGREE};
  size_t shown = 0;
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    if (strcmp(row->workload, workload) != 0 || !row->error[PRECIS_LOGIT_METRIC_FIRST].present) continue;
    if (shown++ == 0)
      precis_buf_append(b, "<h3>Logits</h3>\n<p class=\"muted\">Each output row is one token's logits: KL divergence "
                           "per token both ways (softmax in float64) and top-1 agreement with the reference logits, "
                           "worst over held-out samples.</p>\n<table class=\"logits\"><tr><th class=\"t\">recipe</th>"
                           "<th>kl_mean</th><th>kl_p99</th><th>kl_max</th><th>rkl_mean</th><th>rkl_max</th>"
                           "<th>top1_agree</th></tr>\n");
    precis_buf_append(b, "<tr><td class=\"t\">");
    precis_buf_html(b, row->recipe);
    precis_buf_append(b, "</td>");
    for (size_t j = 0; j < sizeof ids / sizeof ids[0]; j++) {
      const precis_metric_value *v = &row->error[ids[j]];
      precis_buf_append(b, "<td>");
      if (v->present) html_sig(b, v->worst, 4);
      else precis_buf_append(b, "-");
      precis_buf_append(b, "</td>");
    }
    precis_buf_append(b, "</tr>\n");
  }
  if (shown) precis_buf_append(b, "</table>\n");
}

static void html_kv_table(precis_buf *b, const precis_kv_list *list) {
  precis_buf_append(b, "<table class=\"kv\">\n");
  for (size_t i = 0; i < list->count; i++) {
    precis_buf_append(b, "<tr><th>");
    precis_buf_html(b, list->items[i].key);
    precis_buf_append(b, "</th><td>");
    precis_buf_html(b, list->items[i].value ? list->items[i].value : "null");
    precis_buf_append(b, "</td></tr>\n");
  }
  precis_buf_append(b, "</table>\n");
}

static void html_decision(precis_buf *b, const precis_recommendation *rec, bool have_rec) {
  if (!have_rec) return;
  char *answer = precis_recommendation_headline(rec);
  const char *cls = !rec->has_target ? "noanswer" : rec->chosen >= 0 ? "decision" : "nodecision";
  precis_buf_appendf(b, "<div class=\"banner %s\">", cls);
  if (rec->has_target && rec->chosen >= 0) precis_buf_append(b, "<b>Recommended</b> ");
  else if (!rec->has_target) precis_buf_append(b, "<b>No target given, so nothing is recommended.</b> ");
  else precis_buf_append(b, "<b>No recipe meets the target.</b> ");
  for (char *line = answer, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    precis_buf_append(b, "<p>");
    precis_buf_html(b, line);
    precis_buf_append(b, "</p>");
  }
  precis_buf_append(b, "<p class=\"muted\">precis recommend report.json gives the full evidence.</p></div>\n");
  free(answer);
}

/* A model's dataset: a layers x recipes table of rel_fro coloured by log10 error, each layer linking
 * to its section; compact rows (15 px) and a sticky header keep 200+ layers readable. */
static void html_layers(precis_buf *b, const precis_report *report, const char *const *workloads, size_t n_workloads) {
  size_t n_layers = 0, n_recipes = 0;
  const char **layers = precis_report_layer_workloads(report, &n_layers);
  if (!layers) return;
  const char **recipes = precis_report_recipe_names(report, &n_recipes);
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < report->n_rows; i++) {
    const precis_row *row = &report->rows[i];
    double e = row->error[PRECIS_METRIC_REL_FRO].worst;
    if (row->layer && row->status == PRECIS_ROW_OK && row->error[PRECIS_METRIC_REL_FRO].present && isfinite(e) && e > 0) {
      lo = fmin(lo, log10(e));
      hi = fmax(hi, log10(e));
    }
  }
  char num[40], color[16];
  precis_buf_appendf(b, "<section id=\"layers\"><h2>Per layer</h2>\n<p>%zu layers of a model (precis import --model), in "
                        "model order: rel_fro, worst over held-out samples, per layer and recipe, coloured from ",
                     n_layers);
  precis_fmt_sig(num, sizeof num, isfinite(lo) ? pow(10, lo) : NAN, 2);
  precis_buf_html(b, num);
  precis_buf_append(b, " (light) to ");
  precis_fmt_sig(num, sizeof num, isfinite(hi) ? pow(10, hi) : NAN, 2);
  precis_buf_html(b, num);
  precis_buf_append(b, " (dark red) on a log scale; hatched cells fail their criteria (hover for why). Each layer links "
                       "to its section below. <code>precis plan report.json --require ...</code> picks a recipe per "
                       "layer.</p>\n<table class=\"layers\"><thead><tr><th>#</th><th class=\"t\">layer</th><th>k x n</th>");
  for (size_t r = 0; recipes && r < n_recipes; r++) {
    precis_buf_append(b, "<th>");
    precis_buf_html(b, recipes[r]);
    size_t passing = 0;
    for (size_t l = 0; l < n_layers; l++) {
      const precis_row *row = precis_report_find_row(report, layers[l], recipes[r]);
      passing += row && row->status == PRECIS_ROW_OK && row->verdict == PRECIS_VERDICT_PASS;
    }
    precis_buf_appendf(b, "<br><span class=\"muted\">%zu/%zu pass</span></th>", passing, n_layers);
  }
  precis_buf_append(b, "</tr></thead><tbody>\n");
  for (size_t l = 0; l < n_layers; l++) {
    size_t section = 0;
    for (size_t w = 0; w < n_workloads; w++)
      if (strcmp(workloads[w], layers[l]) == 0) section = w + 1;
    const precis_row *any = NULL;
    for (size_t r = 0; recipes && r < n_recipes && !any; r++) any = precis_report_find_row(report, layers[l], recipes[r]);
    const char *layer = precis_report_layer_of(report, layers[l]);
    precis_buf_appendf(b, "<tr><td>%zu</td><td class=\"t\" title=\"", l + 1);
    precis_buf_html(b, layer);
    precis_buf_appendf(b, "\"><a href=\"#workload-%zu\">", section);
    precis_buf_html(b, layer);
    if (any) precis_buf_appendf(b, "</a></td><td>%lld x %lld</td>", any->k, any->n);
    else precis_buf_append(b, "</a></td><td>-</td>");
    for (size_t r = 0; recipes && r < n_recipes; r++) {
      const precis_row *row = precis_report_find_row(report, layers[l], recipes[r]);
      if (!row) {
        precis_buf_append(b, "<td class=\"notrun\">-</td>");
        continue;
      }
      if (row->status != PRECIS_ROW_OK) {
        precis_buf_append(b, "<td class=\"notrun\" title=\"");
        precis_buf_html(b, row->reason ? row->reason : "");
        precis_buf_append(b, "\">");
        precis_buf_html(b, precis_row_status_str(row->status));
        precis_buf_append(b, "</td>");
        continue;
      }
      double e = row->error[PRECIS_METRIC_REL_FRO].present ? row->error[PRECIS_METRIC_REL_FRO].worst : NAN;
      bool dark = precis_heat_color(e, lo, hi, color, sizeof color) > 0.7;
      bool fail = row->verdict == PRECIS_VERDICT_FAIL;
      precis_buf_appendf(b, "<td class=\"%s%s\" style=\"background-color:%s\" title=\"", fail ? "fail" : "pass",
                         dark ? " dark" : "", color);
      precis_buf_html(b, recipes[r]);
      precis_fmt_sig(num, sizeof num, e, 3);
      precis_buf_append(b, ": rel_fro ");
      precis_buf_html(b, num);
      if (fail && row->verdict_detail) {
        precis_buf_append(b, "; fails: ");
        precis_buf_html(b, row->verdict_detail);
      }
      precis_buf_append(b, "\">");
      if (row->error[PRECIS_METRIC_REL_FRO].present) precis_buf_html(b, num);
      else precis_buf_append(b, "null");
      precis_buf_append(b, "</td>");
    }
    precis_buf_append(b, "</tr>\n");
  }
  precis_buf_append(b, "</tbody></table></section>\n");
  free(recipes);
  free(layers);
}

static char *html_text(const precis_report *report) {
  precis_buf b;
  precis_buf_init(&b);
  bool cpu = precis_report_is_cpu_emulation(report);
  precis_recommendation rec;
  precis_recommend_options options = {
      .objective = PRECIS_OBJECTIVE_LATENCY, .tie_threshold = PRECIS_TIE_THRESHOLD_DEFAULT, .report_path = "report.json"};
  bool have_rec = report->n_rows > 0 && precis_recommend(report, &options, &rec) == PRECIS_OK;
  const char *recommended = have_rec && rec.has_target && rec.chosen >= 0 ? rec.outcomes[rec.chosen].recipe : NULL;

  precis_buf_append(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                        "<title>precis report</title>\n");
  precis_buf_append(&b, style);
  precis_buf_append(&b, "</head><body>\n<h1>precis report</h1>\n");
  if (!report->complete)
    precis_buf_append(&b, "<p class=\"banner incomplete\">INCOMPLETE REPORT: the run ended early (interrupted or stopped "
                          "by an error); only the rows shown were measured.</p>\n");
  precis_buf_append(&b, "<p class=\"banner cpu\">Backend: <b>");
  precis_buf_html(&b, precis_report_backend(report));
  precis_buf_append(&b, "</b>");
  if (cpu)
    precis_buf_append(&b, ". <b>All timings and throughputs are CPU timings</b> of a software emulation of the number "
                          "formats, not GPU figures. fp16/bf16/tf32, fp8 fast accumulation and the block-scaled MMAs "
                          "follow the target's tensor-core accumulator (each row's details name the model); other "
                          "float recipes use FP32 products and sums; INT8 is exact.");
  else {
    const char *device = precis_kv_get(&report->environment, "device");
    if (device) {
      precis_buf_append(&b, " on ");
      precis_buf_html(&b, device);
    }
  }
  precis_buf_append(&b, "</p>\n<p class=\"muted\">precis ");
  precis_buf_html(&b, report->tool_version ? report->tool_version : "?");
  if (report->tool_commit) {
    precis_buf_append(&b, " (commit ");
    precis_buf_html(&b, report->tool_commit);
    precis_buf_append(&b, ")");
  }
  precis_buf_append(&b, " &middot; dataset ");
  precis_buf_html(&b, report->dataset_path ? report->dataset_path : "-");
  precis_buf_append(&b, " &middot; dataset_id ");
  precis_buf_html(&b, report->dataset_id ? report->dataset_id : "-");
  const char *when = precis_kv_get(&report->environment, "utc_time");
  if (when) {
    precis_buf_append(&b, " &middot; ");
    precis_buf_html(&b, when);
  }
  precis_buf_append(&b, "</p>\n");
  html_decision(&b, &rec, have_rec);

  size_t n_workloads;
  const char **workloads = precis_report_workloads(report, &n_workloads);
  html_layers(&b, report, workloads, n_workloads);
  for (size_t w = 0; workloads && w < n_workloads; w++) {
    const precis_row *first = precis_report_find_row(report, workloads[w], report->rows[0].recipe);
    for (size_t i = 0; !first && i < report->n_rows; i++)
      if (strcmp(report->rows[i].workload, workloads[w]) == 0) first = &report->rows[i];
    precis_buf_appendf(&b, "<section class=\"workload\" id=\"workload-%zu\">\n<h2>Workload ", w + 1);
    precis_buf_html(&b, workloads[w]);
    precis_buf_appendf(&b, "</h2>\n<p>m=%lld, n=%lld, k=%lld, batch=%lld", first->m, first->n, first->k, first->batch);
    if (first->description && first->description[0]) {
      precis_buf_append(&b, " &middot; ");
      precis_buf_html(&b, first->description);
    }
    precis_buf_append(&b, "</p>\n<div class=\"charts\">\n");
    html_scatter(&b, report, workloads[w], recommended, cpu);
    html_sweep(&b, report, workloads[w], cpu);
    html_latency(&b, report, workloads[w], cpu);
    html_memory(&b, report, workloads[w]);
    precis_buf_append(&b, "</div>\n");
    html_rows_table(&b, report, workloads[w], cpu);
    html_logits_table(&b, report, workloads[w]);
    precis_buf_append(&b, "</section>\n");
  }
  free(workloads);
  if (report->n_rows == 0) precis_buf_append(&b, "<p>No rows were measured.</p>\n");

  precis_buf_append(&b, "<h2>Settings</h2>\n<table class=\"kv\"><tr><th>recipes</th><td>");
  for (size_t i = 0; i < report->n_recipes; i++) {
    precis_buf_append(&b, i ? ", " : "");
    precis_buf_html(&b, report->recipes[i]);
  }
  precis_buf_append(&b, "</td></tr><tr><th>criteria</th><td>");
  if (report->n_criteria == 0) precis_buf_append(&b, "the recipe defaults (listed per row)");
  for (size_t i = 0; i < report->n_criteria; i++) {
    precis_buf_append(&b, i ? ", " : "");
    precis_buf_html(&b, report->criteria[i]);
  }
  precis_buf_append(&b, "</td></tr></table>\n");
  html_kv_table(&b, &report->settings);
  precis_buf_append(&b, "<h2>Environment</h2>\n");
  html_kv_table(&b, &report->environment);
  precis_buf_append(&b, "<p class=\"muted\">report.json next to this file is the source of truth; report.csv has one "
                        "line per workload and recipe with every metric.</p>\n</body></html>\n");
  if (have_rec) precis_recommendation_free(&rec);
  return precis_buf_take(&b);
}

precis_status precis_report_write_html(const precis_report *report, const char *path, bool force) {
  char *text = html_text(report);
  if (!text) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory formatting the HTML report", path);
  precis_status st = precis_atomic_write_text(path, text, force);
  free(text);
  return st;
}
