/* The readers under fuzz take a path: each input is written to one per-process file (in /dev/shm
 * when possible, so that fuzzing does not wear a disk). */
#ifndef PRECIS_FUZZ_INPUT_H
#define PRECIS_FUZZ_INPUT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *fuzz_input_file(const uint8_t *data, size_t size, const char *suffix) {
  static char temp_path[256];
  if (!temp_path[0]) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(temp_path, sizeof temp_path, "%s/precis-fuzz-%ld%s", dir, (long)getpid(), suffix);
  }
  FILE *f = fopen(temp_path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  if (fclose(f) != 0) abort();
  return temp_path;
}

#endif
