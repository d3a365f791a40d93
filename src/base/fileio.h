/* Files are written to a temporary name in the same directory, then renamed: a reader never sees a
 * half-written report or dataset, and an existing file is replaced only with --force. */
#ifndef PRECIS_FILEIO_H
#define PRECIS_FILEIO_H

#include <stdbool.h>
#include <stdio.h>

#include "status.h"

typedef struct precis_atomic_file {
  FILE *fp;
  char *final_path;
  char *temp_path;
} precis_atomic_file;

/* Fails with PRECIS_E_EXISTS when final_path exists and !force. */
precis_status precis_atomic_open(precis_atomic_file *f, const char *final_path, bool force);
/* Flushes, checks every write, fsyncs and renames; on any error removes the temporary file and
 * leaves final_path as it was. */
precis_status precis_atomic_commit(precis_atomic_file *f);
void precis_atomic_abort(precis_atomic_file *f);

/* Writes text to path atomically (open, write, commit). */
precis_status precis_atomic_write_text(const char *path, const char *text, bool force);

/* A temporary name next to path: "<dir>/.<base>.tmp-<pid>-<n>" (malloc'ed). */
char *precis_temp_path_for(const char *path);
bool precis_path_exists(const char *path);
/* mkdir -p */
precis_status precis_mkdirs(const char *dir);
/* Reads a whole file (NUL-terminated); the message names the file. */
precis_status precis_read_file(const char *path, char **data, size_t *size);

#endif
