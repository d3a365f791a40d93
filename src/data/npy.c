#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "file_kind.h"
#include "base/escape.h"

/* Far above any matrix precis evaluates, far below what would overflow the arithmetic. */
#define MAX_ELEMENTS ((uint64_t)1 << 40)

void precis_npy_array_free(precis_npy_array *a) {
  free(a->data);
  memset(a, 0, sizeof *a);
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* ------------------------------------------------------------------------------------------------
 * The header: a Python dict literal, parsed strictly */

typedef struct header_parser {
  const char *p, *end;
  const char *what; /* "x.npy" or "x.npz: member a.npy", for messages */
} header_parser;

static void skip_space(header_parser *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool take(header_parser *h, char c) {
  skip_space(h);
  if (h->p < h->end && *h->p == c) {
    h->p++;
    return true;
  }
  return false;
}

/* A quoted Python string without escapes (the keys and dtype strings NumPy writes). */
static bool quoted(header_parser *h, char *out, size_t len) {
  skip_space(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return false;
  char q = *h->p++;
  size_t n = 0;
  while (h->p < h->end && *h->p != q) {
    if (*h->p == '\\' || n + 1 >= len) return false;
    out[n++] = *h->p++;
  }
  if (h->p >= h->end) return false;
  h->p++;
  out[n] = '\0';
  return true;
}

static bool word(header_parser *h, const char *w) {
  skip_space(h);
  size_t n = strlen(w);
  if ((size_t)(h->end - h->p) >= n && strncmp(h->p, w, n) == 0) {
    h->p += n;
    return true;
  }
  return false;
}

static precis_status bad_header(const header_parser *h, const char *expected) {
  return precis_fail(PRECIS_E_INPUT, "%s: not a valid .npy header: expected %s (the header is {'descr': '<f4', "
                                     "'fortran_order': False, 'shape': (m, k), })",
                     h->what, expected);
}

static precis_status parse_header(const char *what, const char *text, size_t len, precis_npy_array *out, bool *fortran) {
  header_parser h = {text, text + len, what};
  bool have_descr = false, have_order = false, have_shape = false;
  if (!take(&h, '{')) return bad_header(&h, "'{'");
  for (;;) {
    if (take(&h, '}')) break;
    char key[32];
    if (!quoted(&h, key, sizeof key)) return bad_header(&h, "a quoted key");
    if (!take(&h, ':')) return bad_header(&h, "':' after a key");
    if (strcmp(key, "descr") == 0) {
      skip_space(&h);
      if (h.p < h.end && *h.p == '[')
        return precis_fail(PRECIS_E_INPUT, "%s: a structured array (a record dtype); expected a plain float16, float32 "
                                           "or float64 matrix",
                           what);
      if (!quoted(&h, out->descr, sizeof out->descr)) return bad_header(&h, "a dtype string such as '<f4'");
      have_descr = true;
    } else if (strcmp(key, "fortran_order") == 0) {
      if (word(&h, "True")) *fortran = true;
      else if (word(&h, "False")) *fortran = false;
      else return bad_header(&h, "True or False for 'fortran_order'");
      have_order = true;
    } else if (strcmp(key, "shape") == 0) {
      if (!take(&h, '(')) return bad_header(&h, "a tuple for 'shape'");
      out->rank = 0;
      for (;;) {
        if (take(&h, ')')) break;
        skip_space(&h);
        if (h.p >= h.end || !isdigit((unsigned char)*h.p)) return bad_header(&h, "non-negative integers in 'shape'");
        uint64_t v = 0;
        while (h.p < h.end && isdigit((unsigned char)*h.p)) {
          v = v * 10 + (uint64_t)(*h.p++ - '0');
          if (v > INT32_MAX) return precis_fail(PRECIS_E_INPUT, "%s: a dimension above 2^31-1 in 'shape'", what);
        }
        if (h.p < h.end && *h.p == 'L') h.p++; /* Python 2 longs */
        if (out->rank == PRECIS_NPY_MAX_RANK)
          return precis_fail(PRECIS_E_INPUT, "%s: more than %d dimensions", what, PRECIS_NPY_MAX_RANK);
        out->shape[out->rank++] = (int64_t)v;
        if (!take(&h, ',')) {
          if (!take(&h, ')')) return bad_header(&h, "',' or ')' in 'shape'");
          break;
        }
      }
      have_shape = true;
    } else {
      return precis_fail(PRECIS_E_INPUT, "%s: unknown key '%s' in the .npy header (expected descr, fortran_order, shape)",
                         what, key);
    }
    if (!take(&h, ',')) {
      if (!take(&h, '}')) return bad_header(&h, "',' or '}'");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) return bad_header(&h, "the keys descr, fortran_order and shape");
  return PRECIS_OK;
}

/* '<f2', '>f4', '=f8', ... : the element size and byte order; refuses everything else. */
static precis_status parse_descr(const char *what, const char *descr, size_t *size, bool *big_endian) {
  size_t n = strlen(descr);
  if (n == 3 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=') && descr[1] == 'f' &&
      (descr[2] == '2' || descr[2] == '4' || descr[2] == '8')) {
    *size = (size_t)(descr[2] - '0');
    *big_endian = descr[0] == '>';
    return PRECIS_OK;
  }
  if (strcmp(descr, "<V2") == 0 || strcmp(descr, "|V2") == 0)
    return precis_fail(PRECIS_E_INPUT, "%s: dtype '%s' (2-byte raw values, e.g. bfloat16 from ml_dtypes) is ambiguous; "
                                       "expected float16, float32 or float64 ('<f2', '<f4', '<f8'): save with "
                                       ".astype(numpy.float32)",
                       what, descr);
  return precis_fail(PRECIS_E_INPUT, "%s: dtype '%s'; expected float16, float32 or float64 ('<f2', '<f4', '<f8')", what,
                     descr);
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0) bits = sign;
  else { /* subnormal: normalize */
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while (!(mant & 0x400u));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static float element(const unsigned char *p, size_t size, bool big_endian) {
  unsigned char b[8];
  for (size_t i = 0; i < size; i++) b[i] = big_endian ? p[size - 1 - i] : p[i];
  if (size == 2) return half_to_float(le16(b));
  if (size == 4) {
    uint32_t bits = le32(b);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
  }
  uint64_t bits = le64(b);
  double d;
  memcpy(&d, &bits, sizeof d);
  return (float)d; /* round to nearest */
}

/* A whole .npy image in memory (a file's bytes, or a zip member's). */
static precis_status parse_npy(const char *what, const unsigned char *buf, uint64_t len, bool want_data,
                               precis_npy_array *out) {
  memset(out, 0, sizeof *out);
  if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
    return precis_fail(PRECIS_E_INPUT, "%s: not a .npy array (expected the magic \\x93NUMPY)", what);
  unsigned major = buf[6];
  if (major < 1 || major > 3)
    return precis_fail(PRECIS_E_INPUT, "%s: .npy format version %u.%u; expected 1.0, 2.0 or 3.0", what, major, buf[7]);
  uint64_t start = major == 1 ? 10 : 12;
  if (len < start) return precis_fail(PRECIS_E_INPUT, "%s: truncated .npy header", what);
  uint64_t header_len = major == 1 ? le16(buf + 8) : le32(buf + 8);
  if (header_len > len - start) return precis_fail(PRECIS_E_INPUT, "%s: truncated .npy header", what);
  bool fortran = false;
  precis_status st = parse_header(what, (const char *)buf + start, (size_t)header_len, out, &fortran);
  if (st != PRECIS_OK) return st;
  size_t size = 0;
  bool big_endian = false;
  if ((st = parse_descr(what, out->descr, &size, &big_endian)) != PRECIS_OK) return st;
  uint64_t count = 1;
  for (int i = 0; i < out->rank; i++) {
    count *= (uint64_t)out->shape[i];
    if (count > MAX_ELEMENTS) return precis_fail(PRECIS_E_INPUT, "%s: too large (more than 2^40 elements)", what);
  }
  uint64_t data_len = len - start - header_len;
  if (data_len != count * size) {
    char shape[160] = "";
    for (int i = 0, used = 0; i < out->rank && used < (int)sizeof shape; i++)
      used += snprintf(shape + used, sizeof shape - (size_t)used, "%s%" PRId64, i ? ", " : "", out->shape[i]);
    return precis_fail(PRECIS_E_INPUT, "%s: the header's shape (%s) of %s needs %" PRIu64 " bytes of data, found %" PRIu64
                                       " (%s)",
                       what, shape, out->descr, count * size, data_len, data_len < count * size ? "truncated" : "trailing bytes");
  }
  if (!want_data) return PRECIS_OK;
  out->data = malloc((count ? count : 1) * sizeof(float));
  if (!out->data) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory (%" PRIu64 " elements)", what, count);
  const unsigned char *src = buf + start + header_len;
  if (!fortran || out->rank < 2) {
    for (uint64_t i = 0; i < count; i++) out->data[i] = element(src + i * size, size, big_endian);
    return PRECIS_OK;
  }
  /* Fortran order: the first index varies fastest. Walk the C-order destination with a counter. */
  int64_t index[PRECIS_NPY_MAX_RANK] = {0};
  uint64_t stride[PRECIS_NPY_MAX_RANK];
  stride[0] = 1;
  for (int i = 1; i < out->rank; i++) stride[i] = stride[i - 1] * (uint64_t)out->shape[i - 1];
  for (uint64_t c = 0; c < count; c++) {
    uint64_t f = 0;
    for (int i = 0; i < out->rank; i++) f += (uint64_t)index[i] * stride[i];
    out->data[c] = element(src + f * size, size, big_endian);
    for (int i = out->rank - 1; i >= 0; i--) {
      if (++index[i] < out->shape[i]) break;
      index[i] = 0;
    }
  }
  return PRECIS_OK;
}

static precis_status file_size(const char *path, FILE *f, uint64_t *size);

static precis_status read_region(const char *path, FILE *f, uint64_t offset, uint64_t len, unsigned char **out) {
  *out = NULL;
  if (len > MAX_ELEMENTS * 8) return precis_fail(PRECIS_E_INPUT, "%s: too large to read", path);
  /* A length recorded in the file is checked against the file before it becomes an allocation. */
  uint64_t size = 0;
  precis_status st = file_size(path, f, &size);
  if (st != PRECIS_OK) return st;
  if (offset > size || len > size - offset)
    return precis_fail(PRECIS_E_INPUT, "%s: truncated: %" PRIu64 " bytes at offset %" PRIu64 " are past its end (%" PRIu64
                                       " bytes)",
                       path, len, offset, size);
  unsigned char *buf = malloc(len ? (size_t)len : 1);
  if (!buf) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory reading %" PRIu64 " bytes", path, len);
  if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(buf, 1, (size_t)len, f) != len) {
    free(buf);
    return precis_fail(PRECIS_E_INPUT, "%s: truncated: cannot read %" PRIu64 " bytes at offset %" PRIu64, path, len, offset);
  }
  *out = buf;
  return PRECIS_OK;
}

static precis_status file_size(const char *path, FILE *f, uint64_t *size) {
  if (fseeko(f, 0, SEEK_END) != 0) return precis_fail(PRECIS_E_IO, "%s: cannot seek: %s", path, strerror(errno));
  off_t end = ftello(f);
  if (end < 0) return precis_fail(PRECIS_E_IO, "%s: cannot seek: %s", path, strerror(errno));
  *size = (uint64_t)end;
  return PRECIS_OK;
}

precis_status precis_npy_read(const char *path, bool want_data, precis_npy_array *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno));
  unsigned char *buf = NULL;
  uint64_t size = 0;
  precis_status st = file_size(path, f, &size);
  if (st == PRECIS_OK) st = read_region(path, f, 0, size, &buf);
  if (st == PRECIS_OK) st = parse_npy(path, buf, size, want_data, out);
  free(buf);
  fclose(f);
  if (st != PRECIS_OK) precis_npy_array_free(out);
  return st;
}

/* ------------------------------------------------------------------------------------------------
 * .npz: the zip archive's central directory */

typedef struct zip_entry {
  char *name;
  uint16_t method, flags;
  uint32_t crc;
  uint64_t compressed, uncompressed, local_offset;
} zip_entry;

static void entries_free(zip_entry *e, size_t n) {
  for (size_t i = 0; i < n; i++) free(e[i].name);
  free(e);
}

static precis_status zip_directory(const char *path, FILE *f, zip_entry **entries, size_t *count) {
  *entries = NULL;
  *count = 0;
  uint64_t size = 0;
  precis_status st = file_size(path, f, &size);
  if (st != PRECIS_OK) return st;
  uint64_t tail_len = size < 65557 ? size : 65557; /* the end record and a comment of up to 64 KiB */
  unsigned char *tail = NULL, *dir = NULL;
  zip_entry *list = NULL;
  size_t n = 0;
  if ((st = read_region(path, f, size - tail_len, tail_len, &tail)) != PRECIS_OK) return st;
  int64_t at = -1;
  for (int64_t i = (int64_t)tail_len - 22; i >= 0 && at < 0; i--)
    if (memcmp(tail + i, "PK\x05\x06", 4) == 0) at = i;
  if (at < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: not a .npz (zip) archive: no end-of-directory record", path);
    goto done;
  }
  uint64_t entries_total = le16(tail + at + 10), dir_size = le32(tail + at + 12), dir_offset = le32(tail + at + 16);
  if (entries_total == 0xffff || dir_size == 0xffffffffu || dir_offset == 0xffffffffu) {
    /* zip64: the locator sits just before the end record and points at the zip64 end record. */
    unsigned char rec[56];
    if (at < 20 || memcmp(tail + at - 20, "PK\x06\x07", 4) != 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: a zip64 archive without its zip64 locator", path);
      goto done;
    }
    uint64_t rec_offset = le64(tail + at - 20 + 8);
    if (fseeko(f, (off_t)rec_offset, SEEK_SET) != 0 || fread(rec, 1, sizeof rec, f) != sizeof rec ||
        memcmp(rec, "PK\x06\x06", 4) != 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: a damaged zip64 end record", path);
      goto done;
    }
    entries_total = le64(rec + 32);
    dir_size = le64(rec + 40);
    dir_offset = le64(rec + 48);
  }
  if (dir_offset > size || dir_size > size - dir_offset || entries_total > dir_size / 46 + 1) {
    st = precis_fail(PRECIS_E_INPUT, "%s: a damaged zip directory (outside the file)", path);
    goto done;
  }
  if ((st = read_region(path, f, dir_offset, dir_size, &dir)) != PRECIS_OK) goto done;
  list = calloc(entries_total ? (size_t)entries_total : 1, sizeof *list);
  if (!list) {
    st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", path);
    goto done;
  }
  uint64_t p = 0;
  for (; n < entries_total; n++) {
    if (dir_size - p < 46 || memcmp(dir + p, "PK\x01\x02", 4) != 0) {
      st = precis_fail(PRECIS_E_INPUT, "%s: a damaged zip directory (entry %zu)", path, n);
      goto done;
    }
    const unsigned char *e = dir + p;
    zip_entry *z = &list[n];
    z->flags = le16(e + 8);
    z->method = le16(e + 10);
    z->crc = le32(e + 16);
    z->compressed = le32(e + 20);
    z->uncompressed = le32(e + 24);
    uint16_t name_len = le16(e + 28), extra_len = le16(e + 30), comment_len = le16(e + 32);
    z->local_offset = le32(e + 42);
    if (dir_size - p - 46 < (uint64_t)name_len + extra_len + comment_len) {
      st = precis_fail(PRECIS_E_INPUT, "%s: a damaged zip directory (entry %zu)", path, n);
      goto done;
    }
    z->name = precis_asprintf("%.*s", (int)name_len, (const char *)e + 46);
    if (!z->name) {
      st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory", path);
      goto done;
    }
    /* zip64 sizes: the extra field 0x0001 holds, in order, those of the three that are 0xffffffff. */
    const unsigned char *x = e + 46 + name_len, *x_end = x + extra_len;
    while (x_end - x >= 4) {
      uint16_t id = le16(x), len = le16(x + 2);
      if (x_end - x - 4 < len) break;
      if (id == 1) {
        const unsigned char *v = x + 4, *v_end = v + len;
        if (z->uncompressed == 0xffffffffu && v_end - v >= 8) z->uncompressed = le64(v), v += 8;
        if (z->compressed == 0xffffffffu && v_end - v >= 8) z->compressed = le64(v), v += 8;
        if (z->local_offset == 0xffffffffu && v_end - v >= 8) z->local_offset = le64(v), v += 8;
      }
      x += 4 + len;
    }
    p += 46 + (uint64_t)name_len + extra_len + comment_len;
  }
done:
  free(tail);
  free(dir);
  if (st != PRECIS_OK) entries_free(list, n);
  else {
    *entries = list;
    *count = n;
  }
  return st;
}

static bool has_npy_suffix(const char *name) {
  size_t n = strlen(name);
  return n >= 4 && strcmp(name + n - 4, ".npy") == 0;
}

precis_status precis_npz_list(const char *path, char ***names, size_t *count) {
  *names = NULL;
  *count = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno));
  zip_entry *entries = NULL;
  size_t n = 0;
  precis_status st = zip_directory(path, f, &entries, &n);
  fclose(f);
  if (st != PRECIS_OK) return st;
  char **list = calloc(n ? n : 1, sizeof *list);
  if (!list) {
    entries_free(entries, n);
    return precis_fail(PRECIS_E_NOMEM, "%s: out of memory", path);
  }
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(entries[i].name);
    if (has_npy_suffix(entries[i].name)) entries[i].name[len - 4] = '\0';
    list[i] = entries[i].name;
    entries[i].name = NULL;
  }
  entries_free(entries, n);
  *names = list;
  *count = n;
  return PRECIS_OK;
}

void precis_npz_names_free(char **names, size_t count) {
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
}

static precis_status member_bytes(const char *path, FILE *f, const zip_entry *z, const char *what, unsigned char **out,
                                  uint64_t *len) {
  *out = NULL;
  if (z->flags & 1) return precis_fail(PRECIS_E_INPUT, "%s: encrypted; expected a plain .npz", what);
  if (z->method != 0 && z->method != 8)
    return precis_fail(PRECIS_E_INPUT, "%s: zip compression method %u; expected stored (numpy.savez) or deflate "
                                       "(numpy.savez_compressed)",
                       what, z->method);
  unsigned char local[30];
  if (fseeko(f, (off_t)z->local_offset, SEEK_SET) != 0 || fread(local, 1, sizeof local, f) != sizeof local ||
      memcmp(local, "PK\x03\x04", 4) != 0)
    return precis_fail(PRECIS_E_INPUT, "%s: a damaged zip entry (no local header)", what);
  uint64_t data_offset = z->local_offset + 30 + le16(local + 26) + le16(local + 28);
  unsigned char *raw = NULL;
  precis_status st = read_region(path, f, data_offset, z->compressed, &raw);
  if (st != PRECIS_OK) return st;
  if (z->method == 0) {
    if (z->compressed != z->uncompressed) {
      free(raw);
      return precis_fail(PRECIS_E_INPUT, "%s: a damaged zip entry (stored sizes differ)", what);
    }
    *out = raw;
    *len = z->uncompressed;
  } else {
    if (z->uncompressed > MAX_ELEMENTS * 8) {
      free(raw);
      return precis_fail(PRECIS_E_INPUT, "%s: too large to read", what);
    }
    /* Deflate expands at most 1032:1 (a 258-byte match per 2 bits, RFC 1951): a larger recorded size
     * is damage, refused before it becomes an allocation. */
    if (z->uncompressed > z->compressed * 1032 + 1024) {
      free(raw);
      return precis_fail(PRECIS_E_INPUT,
                         "%s: a damaged zip entry (its recorded size, %llu bytes, is more than deflate can make of "
                         "%llu compressed bytes)",
                         what, (unsigned long long)z->uncompressed, (unsigned long long)z->compressed);
    }
    unsigned char *plain = malloc(z->uncompressed ? (size_t)z->uncompressed : 1);
    if (!plain) {
      free(raw);
      return precis_fail(PRECIS_E_NOMEM, "%s: out of memory", what);
    }
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int rc = inflateInit2(&zs, -MAX_WBITS); /* raw deflate, as zip stores it */
    uint64_t in_left = z->compressed, out_left = z->uncompressed;
    unsigned char *in_at = raw, *out_at = plain;
    while (rc == Z_OK) {
      /* zlib counts in 32 bits: feed it at most 1 GiB at a time. */
      uInt in_chunk = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
      uInt out_chunk = out_left > (1u << 30) ? (1u << 30) : (uInt)out_left;
      zs.next_in = in_at;
      zs.avail_in = in_chunk;
      zs.next_out = out_at;
      zs.avail_out = out_chunk;
      rc = inflate(&zs, Z_NO_FLUSH);
      in_at += in_chunk - zs.avail_in;
      in_left -= in_chunk - zs.avail_in;
      out_at += out_chunk - zs.avail_out;
      out_left -= out_chunk - zs.avail_out;
      if (rc == Z_OK && zs.avail_in == in_chunk && zs.avail_out == out_chunk) rc = Z_BUF_ERROR; /* no progress */
    }
    inflateEnd(&zs);
    free(raw);
    if (rc != Z_STREAM_END || out_left != 0) {
      free(plain);
      return precis_fail(PRECIS_E_INPUT, "%s: corrupt deflate data (%s)", what,
                         rc == Z_STREAM_END ? "shorter than its recorded size" : zs.msg ? zs.msg : "truncated");
    }
    *out = plain;
    *len = z->uncompressed;
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < *len;) {
    uInt chunk = *len - done > (1u << 30) ? (1u << 30) : (uInt)(*len - done);
    crc = crc32(crc, *out + done, chunk);
    done += chunk;
  }
  if ((uint32_t)crc != z->crc) {
    free(*out);
    *out = NULL;
    return precis_fail(PRECIS_E_INPUT, "%s: CRC-32 mismatch: the archive is corrupt", what);
  }
  return PRECIS_OK;
}

precis_status precis_npz_read(const char *path, const char *name, bool want_data, precis_npy_array *out) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno));
  zip_entry *entries = NULL;
  size_t n = 0;
  unsigned char *bytes = NULL;
  char *what = NULL;
  precis_status st = zip_directory(path, f, &entries, &n);
  if (st != PRECIS_OK) goto done;
  const zip_entry *found = NULL;
  for (size_t i = 0; i < n && !found; i++) {
    size_t len = strlen(entries[i].name);
    bool exact = strcmp(entries[i].name, name) == 0;
    bool stem = has_npy_suffix(entries[i].name) && strlen(name) == len - 4 && strncmp(entries[i].name, name, len - 4) == 0;
    if (exact || stem) found = &entries[i];
  }
  if (!found) {
    const char **names = calloc(n ? n : 1, sizeof *names);
    char closest[512] = "";
    for (size_t i = 0; names && i < n; i++) {
      if (has_npy_suffix(entries[i].name)) entries[i].name[strlen(entries[i].name) - 4] = '\0';
      names[i] = entries[i].name;
    }
    if (names) precis_closest_names(name, names, n, closest, sizeof closest);
    free(names);
    st = precis_fail(PRECIS_E_INPUT, "%s: no array named \"%s\" (the archive holds %zu)%s", path, name, n, closest);
    goto done;
  }
  what = precis_asprintf("%s: array \"%s\"", path, name);
  if (!what) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  uint64_t len = 0;
  if ((st = member_bytes(path, f, found, what, &bytes, &len)) != PRECIS_OK) goto done;
  st = parse_npy(what, bytes, len, want_data, out);
done:
  free(bytes);
  free(what);
  entries_free(entries, n);
  fclose(f);
  if (st != PRECIS_OK) precis_npy_array_free(out);
  return st;
}
