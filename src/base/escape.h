/* Text building and escaping (base/, so that data/ and report/ share it; the report printers are its
 * main users). Every string that came from a dataset
 * (workload names, descriptions, reasons) goes through the escaper of the format it lands in:
 * HTML, Markdown, CSV (RFC 4180 plus spreadsheet formula neutralization) or a terminal. */
#ifndef PRECIS_ESCAPE_H
#define PRECIS_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* A growable NUL-terminated string. On allocation failure `failed` is set and later appends are
 * ignored, so that a printer checks once at the end. */
typedef struct precis_buf {
  char *data;
  size_t len, cap;
  bool failed;
} precis_buf;

void precis_buf_init(precis_buf *b);
void precis_buf_free(precis_buf *b);
void precis_buf_append(precis_buf *b, const char *s);
void precis_buf_append_n(precis_buf *b, const char *s, size_t n);
void precis_buf_appendf(precis_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the string over (caller frees) and resets the buffer; NULL when an allocation failed. */
char *precis_buf_take(precis_buf *b);

/* The shortest decimal form that reads back to exactly the same double ("0.1", "6291456",
 * "2.9000000000000001e-03" never). buf needs 32 bytes. Non-finite values give "null". */
void precis_format_double(char *buf, size_t len, double value);

/* Appends s escaped for HTML text and attribute values (& < > " ' and control characters). */
void precis_buf_html(precis_buf *b, const char *s);
/* Appends s escaped for a Markdown table cell: characters with Markdown meaning are
 * backslash-escaped, < > & become entities (GitHub renders inline HTML), line breaks become
 * spaces, so that a cell can neither break the table nor inject markup. */
void precis_buf_markdown(precis_buf *b, const char *s);
/* Appends one CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF (quotes
 * doubled). Text fields whose first character is = + - @ TAB or CR are prefixed with a single
 * quote so that spreadsheets do not evaluate them as formulas (OWASP "CSV injection"); numeric
 * fields are written with is_text false and are never altered. */
void precis_buf_csv(precis_buf *b, const char *s, bool is_text);
/* Appends s for a terminal: control characters (ESC sequences could rewrite the screen) are
 * replaced by '?'. At most max_width bytes when max_width > 0, cut with "~". */
void precis_buf_terminal(precis_buf *b, const char *s, size_t max_width);

/* A copy of s (NULL-safe: NULL gives NULL), and a formatted string; NULL when allocation failed. */
char *precis_strdup(const char *s);
char *precis_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocating conveniences (NULL-safe: NULL gives ""). */
char *precis_html_escape(const char *s);
char *precis_markdown_escape(const char *s);

/* s as a double-quoted YAML scalar (backslash and " escaped, control bytes as \\xHH); malloc'd, NULL when
 * out of memory. The suites that import writes name the user's files with it. */
char *precis_yaml_quote(const char *s);

#endif
