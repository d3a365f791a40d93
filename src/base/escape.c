#include "escape.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void precis_buf_init(precis_buf *b) { memset(b, 0, sizeof *b); }

void precis_buf_free(precis_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static bool buf_reserve(precis_buf *b, size_t extra) {
  if (b->failed) return false;
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *grown = realloc(b->data, cap);
  if (!grown) {
    b->failed = true;
    return false;
  }
  b->data = grown;
  b->cap = cap;
  return true;
}

void precis_buf_append_n(precis_buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void precis_buf_append(precis_buf *b, const char *s) {
  if (s) precis_buf_append_n(b, s, strlen(s));
}

void precis_buf_appendf(precis_buf *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n >= 0 && buf_reserve(b, (size_t)n)) {
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  } else if (n < 0) {
    b->failed = true;
  }
  va_end(ap2);
}

char *precis_buf_take(precis_buf *b) {
  if (b->failed) {
    precis_buf_free(b);
    return NULL;
  }
  if (!b->data && !buf_reserve(b, 0)) return NULL;
  if (b->len == 0) b->data[0] = '\0';
  char *s = b->data;
  memset(b, 0, sizeof *b);
  return s;
}

void precis_format_double(char *buf, size_t len, double value) {
  if (!isfinite(value)) {
    snprintf(buf, len, "null");
    return;
  }
  if (value == 0) {
    snprintf(buf, len, signbit(value) ? "-0" : "0");
    return;
  }
  /* Integers print as integers ("50", not "5e+01"): shorter to read, and what JSON readers expect
   * for counts. */
  if (fabs(value) < 1e15 && value == trunc(value)) {
    snprintf(buf, len, "%.0f", value);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, value);
    if (strtod(buf, NULL) == value) return;
  }
}

void precis_buf_html(precis_buf *b, const char *s) {
  if (!s) return;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '&': precis_buf_append(b, "&amp;"); break;
    case '<': precis_buf_append(b, "&lt;"); break;
    case '>': precis_buf_append(b, "&gt;"); break;
    case '"': precis_buf_append(b, "&quot;"); break;
    case '\'': precis_buf_append(b, "&#39;"); break;
    default:
      if (*p < 0x20 && *p != '\n' && *p != '\t') precis_buf_appendf(b, "&#xFFFD;");
      else precis_buf_append_n(b, (const char *)p, 1);
    }
  }
}

void precis_buf_markdown(precis_buf *b, const char *s) {
  if (!s) return;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    if (c == '&') precis_buf_append(b, "&amp;");
    else if (c == '<') precis_buf_append(b, "&lt;");
    else if (c == '>') precis_buf_append(b, "&gt;");
    else if (c < 0x20 || c == 0x7f) precis_buf_append(b, " ");
    else if (strchr("\\|`*_[]~", c) || (p == (const unsigned char *)s && strchr("#-+=!.", c))) {
      /* The second set only means something at the start of a cell (heading, list); escaping it
       * everywhere would make names like "square-1024" unreadable in the source. */
      precis_buf_append(b, "\\");
      precis_buf_append_n(b, (const char *)p, 1);
    } else {
      precis_buf_append_n(b, (const char *)p, 1);
    }
  }
}

void precis_buf_csv(precis_buf *b, const char *s, bool is_text) {
  if (!s) return;
  bool formula = is_text && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r');
  bool quote = formula || strpbrk(s, ",\"\r\n") != NULL;
  if (quote) precis_buf_append(b, "\"");
  if (formula) precis_buf_append(b, "'");
  for (const char *p = s; *p; p++) {
    if (*p == '"') precis_buf_append(b, "\"\"");
    else precis_buf_append_n(b, p, 1);
  }
  if (quote) precis_buf_append(b, "\"");
}

void precis_buf_terminal(precis_buf *b, const char *s, size_t max_width) {
  if (!s) return;
  size_t n = strlen(s);
  bool cut = max_width > 0 && n > max_width;
  size_t keep = cut ? max_width - 1 : n;
  while (cut && keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80) keep--; /* whole UTF-8 characters */
  for (size_t i = 0; i < keep; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f) precis_buf_append(b, "?");
    else precis_buf_append_n(b, &s[i], 1);
  }
  if (cut) precis_buf_append(b, "~");
}

char *precis_html_escape(const char *s) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_html(&b, s);
  return precis_buf_take(&b);
}

char *precis_markdown_escape(const char *s) {
  precis_buf b;
  precis_buf_init(&b);
  precis_buf_markdown(&b, s);
  return precis_buf_take(&b);
}

char *precis_strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

char *precis_asprintf(const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

char *precis_yaml_quote(const char *s) {
  size_t len = strlen(s);
  char *out = malloc(4 * len + 3), *p = out;
  if (!out) return NULL;
  *p++ = '"';
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      *p++ = '\\';
      *p++ = (char)*c;
    } else if (*c < 0x20 || *c == 0x7f) {
      p += sprintf(p, "\\x%02x", *c);
    } else {
      *p++ = (char)*c;
    }
  }
  *p++ = '"';
  *p = '\0';
  return out;
}
