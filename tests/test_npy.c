/* The .npy reader's float16 widening (src/data/npy.h), on every one of the 65536 half-precision bit
 * patterns, little- and big-endian, against a decoding written from the IEEE 754 binary16 definition
 * with ldexp: subnormals m * 2^-24, normals (1024 + m) * 2^(e - 25), infinities and NaNs. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/npy.h"
#include "harness.h"

/* binary16 from its definition; exact in float32 (11-bit significands, exponents -24..15). */
static float half_reference(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0x1f) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = ldexpf((float)mant, -24);
  else v = ldexpf((float)(1024 + mant), exp - 25);
  return sign ? -v : v;
}

/* A version-1 .npy of `count` float16 values in the given byte order. */
static char *write_f16_npy(const char *name, const uint16_t *values, size_t count, bool big_endian) {
  char *path = NULL;
  if (asprintf(&path, "/tmp/precis_test_npy_%ld_%s", (long)getpid(), name) < 0) return NULL;
  char header[128];
  int len = snprintf(header, sizeof header, "{'descr': '%cf2', 'fortran_order': False, 'shape': (%zu,), }",
                     big_endian ? '>' : '<', count);
  /* Padded with spaces to a multiple of 64 bytes with the 10-byte preamble, ending in a newline. */
  int total = ((10 + len + 1 + 63) / 64) * 64;
  int padded = total - 10;
  memset(header + len, ' ', (size_t)(padded - len - 1));
  header[padded - 1] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(path);
    return NULL;
  }
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(padded & 0xff),
                           (unsigned char)(padded >> 8)};
  fwrite(pre, 1, sizeof pre, f);
  fwrite(header, 1, (size_t)padded, f);
  for (size_t i = 0; i < count; i++) {
    unsigned char b[2] = {(unsigned char)(values[i] & 0xff), (unsigned char)(values[i] >> 8)};
    if (big_endian) {
      unsigned char t = b[0];
      b[0] = b[1];
      b[1] = t;
    }
    fwrite(b, 1, 2, f);
  }
  fclose(f);
  return path;
}

static void check_every_half(bool big_endian) {
  uint16_t *values = malloc(65536 * sizeof *values);
  if (!values) return;
  for (uint32_t i = 0; i < 65536; i++) values[i] = (uint16_t)i;
  char *path = write_f16_npy(big_endian ? "be.npy" : "le.npy", values, 65536, big_endian);
  CHECK(path != NULL);
  precis_npy_array a;
  memset(&a, 0, sizeof a);
  if (path) CHECK_OK(precis_npy_read(path, true, &a));
  if (a.data) {
    CHECK_EQ_INT(a.rank, 1);
    CHECK_EQ_INT(a.shape[0], 65536);
    int wrong = 0;
    for (uint32_t i = 0; i < 65536; i++) {
      float want = half_reference((uint16_t)i), got = a.data[i];
      bool same = isnan(want) ? isnan(got) && signbit(got) == signbit(want)
                              : memcmp(&want, &got, sizeof got) == 0; /* bit for bit, signed zeros too */
      if (!same && wrong++ < 5)
        CHECK_MSG(same, "%s half 0x%04x: read %a, expected %a", big_endian ? "big-endian" : "little-endian", i,
                  (double)got, (double)want);
    }
    CHECK_MSG(wrong == 0, "%d of 65536 half values decoded wrong", wrong);
  }
  precis_npy_array_free(&a);
  if (path) unlink(path);
  free(path);
  free(values);
}

TEST(float16_every_value_little_endian) { check_every_half(false); }
TEST(float16_every_value_big_endian) { check_every_half(true); }

/* The subnormal range by name, so that a failure says which values: the smallest, the largest, a
 * power of two in between. */
TEST(float16_subnormals) {
  const uint16_t values[] = {0x0001, 0x0002, 0x0200, 0x03ff, 0x8001, 0x0400};
  const float want[] = {0x1p-24f, 0x1p-23f, 0x1p-15f, 0x3ffp-24f, -0x1p-24f, 0x1p-14f};
  char *path = write_f16_npy("sub.npy", values, 6, false);
  precis_npy_array a;
  memset(&a, 0, sizeof a);
  if (path) CHECK_OK(precis_npy_read(path, true, &a));
  for (int i = 0; a.data && i < 6; i++)
    CHECK_MSG(a.data[i] == want[i], "half 0x%04x: read %a, expected %a", values[i], (double)a.data[i], (double)want[i]);
  precis_npy_array_free(&a);
  if (path) unlink(path);
  free(path);
}

RUN_TESTS(T(float16_every_value_little_endian), T(float16_every_value_big_endian), T(float16_subnormals))
