#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"

static atomic_uint temp_counter;

char *precis_temp_path_for(const char *path) {
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path + 1) : 0;
  const char *base = slash ? slash + 1 : path;
  return precis_asprintf("%.*s.%s.tmp-%ld-%u", dir_len, path, base, (long)getpid(),
                         atomic_fetch_add(&temp_counter, 1));
}

bool precis_path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

precis_status precis_mkdirs(const char *dir) {
  char *copy = precis_strdup(dir);
  if (!copy) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_status st = PRECIS_OK;
  for (char *p = copy + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char saved = *p;
      *p = '\0';
      if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
        st = precis_fail(PRECIS_E_IO, "%s: cannot create directory: %s", copy, strerror(errno));
        goto done;
      }
      *p = saved;
      if (saved == '\0') break;
    }
  }
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    st = precis_fail(PRECIS_E_IO, "%s: expected a directory", dir);
done:
  free(copy);
  return st;
}

precis_status precis_atomic_open(precis_atomic_file *f, const char *final_path, bool force) {
  memset(f, 0, sizeof *f);
  if (!force && precis_path_exists(final_path))
    return precis_fail(PRECIS_E_EXISTS, "%s: already exists (use --force to overwrite)", final_path);
  f->final_path = precis_strdup(final_path);
  f->temp_path = precis_temp_path_for(final_path);
  if (!f->final_path || !f->temp_path) {
    precis_atomic_abort(f);
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  }
  int fd = open(f->temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0 || !(f->fp = fdopen(fd, "w"))) {
    precis_status st = precis_fail(PRECIS_E_IO, "%s: cannot create: %s", f->temp_path, strerror(errno));
    if (fd >= 0) close(fd);
    precis_atomic_abort(f);
    return st;
  }
  return PRECIS_OK;
}

precis_status precis_atomic_commit(precis_atomic_file *f) {
  precis_status st = PRECIS_OK;
  if (!f->fp) return precis_fail(PRECIS_E_IO, "%s: not open", f->final_path ? f->final_path : "(null)");
  if (ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0) {
    st = precis_fail(PRECIS_E_IO, "%s: write failed: %s", f->final_path, strerror(errno ? errno : EIO));
  }
  if (fclose(f->fp) != 0 && st == PRECIS_OK)
    st = precis_fail(PRECIS_E_IO, "%s: write failed: %s", f->final_path, strerror(errno));
  f->fp = NULL;
  if (st == PRECIS_OK && rename(f->temp_path, f->final_path) != 0)
    st = precis_fail(PRECIS_E_IO, "%s: cannot rename into place: %s", f->final_path, strerror(errno));
  if (st != PRECIS_OK) unlink(f->temp_path);
  free(f->temp_path);
  free(f->final_path);
  f->temp_path = f->final_path = NULL;
  return st;
}

void precis_atomic_abort(precis_atomic_file *f) {
  if (f->fp) fclose(f->fp);
  if (f->temp_path) unlink(f->temp_path);
  free(f->temp_path);
  free(f->final_path);
  memset(f, 0, sizeof *f);
}

precis_status precis_atomic_write_text(const char *path, const char *text, bool force) {
  precis_atomic_file f;
  precis_status st = precis_atomic_open(&f, path, force);
  if (st != PRECIS_OK) return st;
  fputs(text, f.fp);
  return precis_atomic_commit(&f);
}

precis_status precis_read_file(const char *path, char **data, size_t *size) {
  *data = NULL;
  if (size) *size = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp) return precis_fail(errno == ENOENT ? PRECIS_E_INPUT : PRECIS_E_IO, "%s: cannot open: %s", path, strerror(errno));
  precis_status st = PRECIS_OK;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (len + 1 >= cap) {
      char *grown = realloc(buf, cap * 2);
      if (!grown) { free(buf); buf = NULL; break; }
      buf = grown;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len - 1, fp);
    len += got;
    if (got == 0) break;
  }
  if (!buf) st = precis_fail(PRECIS_E_NOMEM, "%s: out of memory reading the file", path);
  else if (ferror(fp)) st = precis_fail(PRECIS_E_IO, "%s: read error", path);
  fclose(fp);
  if (st != PRECIS_OK) { free(buf); return st; }
  buf[len] = '\0';
  *data = buf;
  if (size) *size = len;
  return PRECIS_OK;
}
