/* What kind of matrix file a path is, from its first bytes (issue 15), never from its name or from
 * a '/' in FILE:NAME: HDF5 (the superblock signature "\x89HDF\r\n\x1a\n" at offset 0, 512, 1024,
 * 2048, ... as the HDF5 format allows a user block before it), NumPy .npy ("\x93NUMPY"), NumPy
 * .npz (a zip archive, "PK\x03\x04" or the "PK\x05\x06" of an empty one), safetensors (an 8-byte
 * little-endian header length that fits in the file, then '{'), else unknown. */
#ifndef PRECIS_FILE_KIND_H
#define PRECIS_FILE_KIND_H

#include <stddef.h>

#include "base/status.h"

typedef enum precis_file_kind {
  PRECIS_FILE_HDF5,
  PRECIS_FILE_NPY,
  PRECIS_FILE_NPZ,
  PRECIS_FILE_SAFETENSORS,
  PRECIS_FILE_UNKNOWN, /* none of these: not even a plausible safetensors header */
} precis_file_kind;

/* Fails (naming the file) when it cannot be opened or read. */
precis_status precis_file_kind_detect(const char *path, precis_file_kind *out);
/* "HDF5", "NumPy .npy", "NumPy .npz", "safetensors". */
const char *precis_file_kind_name(precis_file_kind kind);

/* Levenshtein distance between a and b, capped: values above `cap` are returned as cap + 1. */
size_t precis_edit_distance(const char *a, const char *b, size_t cap);
/* Appends to buf (a C string of capacity len) up to three of names, closest to wanted first, as
 * "; closest: \"a\", \"b\"" — those within an edit distance of about a third of the name, or those
 * containing it; nothing when none is close. */
void precis_closest_names(const char *wanted, const char *const *names, size_t count, char *buf, size_t len);

#endif
