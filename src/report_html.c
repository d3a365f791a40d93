/* report.html: one self-contained file (inline CSS and SVG, no script, no network). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "fileio.h"
#include "report.h"
#include "report_util.h"

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

static char *html_text(const precis_report *report) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_append(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>precis report</title>"
                        "</head><body>\n<h1>precis report</h1>\n");
  if (!report->complete) precis_buf_append(&b, "<p class=\"incomplete\">INCOMPLETE REPORT</p>\n");
  precis_buf_append(&b, "<h2>Environment</h2>\n");
  html_kv_table(&b, &report->environment);
  precis_buf_append(&b, "</body></html>\n");
  return precis_buf_take(&b);
}

precis_status precis_report_write_html(const precis_report *report, const char *path, bool force) {
  char *text = html_text(report);
  if (!text) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory formatting the HTML report", path);
  precis_atomic_file f;
  precis_status st = precis_atomic_open(&f, path, force);
  if (st == PRECIS_OK) {
    fputs(text, f.fp);
    st = precis_atomic_commit(&f);
  }
  free(text);
  return st;
}
