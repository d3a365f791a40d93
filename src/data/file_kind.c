#include "file_kind.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

precis_status precis_file_kind_detect(const char *path, precis_file_kind *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno));
  unsigned char head[9] = {0};
  size_t got = fread(head, 1, sizeof head, f);
  precis_status st = PRECIS_OK;
  if (ferror(f)) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot read: %s", path, strerror(errno));
    goto done;
  }
  *out = PRECIS_FILE_UNKNOWN;
  if (got >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) *out = PRECIS_FILE_NPY;
  else if (got >= 4 && (memcmp(head, "PK\x03\x04", 4) == 0 || memcmp(head, "PK\x05\x06", 4) == 0)) *out = PRECIS_FILE_NPZ;
  else {
    /* The superblock may follow a user block of 512, 1024, 2048, ... bytes. */
    for (long offset = 0; offset >= 0 && offset <= (1L << 40); offset = offset ? offset * 2 : 512) {
      if (fseek(f, offset, SEEK_SET) != 0) break;
      unsigned char sig[8];
      if (fread(sig, 1, sizeof sig, f) != sizeof sig) break;
      if (memcmp(sig, hdf5_signature, sizeof sig) == 0) {
        *out = PRECIS_FILE_HDF5;
        break;
      }
    }
    if (*out == PRECIS_FILE_UNKNOWN && got == sizeof head && head[8] == '{' && fseek(f, 0, SEEK_END) == 0) {
      uint64_t header_len = 0;
      for (int i = 0; i < 8; i++) header_len |= (uint64_t)head[i] << (8 * i);
      long size = ftell(f);
      if (size >= 9 && header_len <= (uint64_t)size - 8) *out = PRECIS_FILE_SAFETENSORS;
    }
  }
done:
  fclose(f);
  return st;
}

const char *precis_file_kind_name(precis_file_kind kind) {
  switch (kind) {
  case PRECIS_FILE_HDF5: return "HDF5";
  case PRECIS_FILE_NPY: return "NumPy .npy";
  case PRECIS_FILE_NPZ: return "NumPy .npz";
  case PRECIS_FILE_SAFETENSORS: return "safetensors";
  case PRECIS_FILE_UNKNOWN: return "unknown";
  }
  return "unknown";
}

size_t precis_edit_distance(const char *a, const char *b, size_t cap) {
  size_t la = strlen(a), lb = strlen(b);
  if ((la > lb ? la - lb : lb - la) > cap) return cap + 1;
  size_t *row = malloc((lb + 1) * sizeof *row);
  if (!row) return cap + 1;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0], best = row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t v = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < v) v = up + 1;
      if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
      row[j] = v;
      diag = up;
      if (v < best) best = v;
    }
    if (best > cap) { /* every later row is at least this far */
      free(row);
      return cap + 1;
    }
  }
  size_t d = row[lb];
  free(row);
  return d > cap ? cap + 1 : d;
}

void precis_closest_names(const char *wanted, const char *const *names, size_t count, char *buf, size_t len) {
  enum { SHOWN = 3 };
  size_t cap = strlen(wanted) / 3 + 2;
  size_t best[SHOWN], dist[SHOWN], n = 0;
  for (size_t i = 0; i < count; i++) {
    size_t d = precis_edit_distance(wanted, names[i], cap);
    /* A name that holds the wanted one (a prefix left out: "layers.0.q" in "model.layers.0.q") is close too. */
    if (d > cap && wanted[0] && strstr(names[i], wanted)) d = cap;
    if (d > cap) continue;
    size_t at = n < SHOWN ? n++ : SHOWN;
    if (at == SHOWN) {
      if (d >= dist[SHOWN - 1]) continue;
      at = SHOWN - 1;
    }
    while (at > 0 && dist[at - 1] > d) {
      best[at] = best[at - 1];
      dist[at] = dist[at - 1];
      at--;
    }
    best[at] = i;
    dist[at] = d;
  }
  if (n == 0 || len == 0) return;
  size_t used = strlen(buf);
  for (size_t i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "; closest: ", names[best[i]]);
}
