#include "output_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "escape.h"

/* What a lock file says about its holder. Fields are empty when the file could not be parsed. */
typedef struct lock_holder {
  long pid;
  char host[256];
  char started[32];
  char command[64];
} lock_holder;

void precis_output_lock_init(precis_output_lock *lock) {
  lock->fd = -1;
  lock->lock_path = NULL;
}

char *precis_output_lock_path(const char *output, bool is_dir) {
  if (is_dir) {
    size_t len = strlen(output);
    while (len > 1 && output[len - 1] == '/') len--;
    return precis_asprintf("%.*s/.precis-lock", (int)len, output);
  }
  const char *slash = strrchr(output, '/');
  int dir_len = slash ? (int)(slash - output + 1) : 0;
  return precis_asprintf("%.*s.%s.precis-lock", dir_len, output, slash ? slash + 1 : output);
}

static void this_host(char *host, size_t size) {
  if (gethostname(host, size) != 0) snprintf(host, size, "unknown-host");
  host[size - 1] = '\0';
}

static void parse_holder(const char *text, lock_holder *h) {
  memset(h, 0, sizeof *h);
  const char *p;
  if ((p = strstr(text, "pid="))) h->pid = strtol(p + 4, NULL, 10);
  if ((p = strstr(text, "host="))) sscanf(p + 5, "%255s", h->host);
  if ((p = strstr(text, "started="))) sscanf(p + 8, "%31s", h->started);
  if ((p = strstr(text, "command="))) sscanf(p + 8, "%63[^\n]", h->command);
}

static void read_holder(int fd, lock_holder *h) {
  char text[512];
  ssize_t got = pread(fd, text, sizeof text - 1, 0);
  text[got > 0 ? got : 0] = '\0';
  parse_holder(text, h);
}

static void describe_holder(const lock_holder *h, char *out, size_t size) {
  if (h->pid <= 0 || !h->host[0]) snprintf(out, size, "a holder that could not be read");
  else
    snprintf(out, size, "pid %ld on host %s (%s, started %s)", h->pid, h->host, h->command[0] ? h->command : "precis",
             h->started[0] ? h->started : "at an unknown time");
}

static bool write_all_at(int fd, const char *text) {
  size_t len = strlen(text), done = 0;
  while (done < len) {
    ssize_t n = pwrite(fd, text + done, len - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

/* flock when the filesystem has it; false (and no lock) when it does not. */
static bool try_flock(int fd, bool *would_block) {
  *would_block = false;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    *would_block = errno == EWOULDBLOCK;
    return false;
  }
  return true;
}

static bool same_file(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Creates the lock file whole: content written and flocked under a temporary name, then linked into
 * place, so that nobody ever sees an empty lock file. Returns the fd, -1 with *exists when the lock
 * file is there already, -1 with a recorded error otherwise. */
static int create_lock(const char *lock_path, const char *output, const char *content, bool *exists) {
  *exists = false;
  char *temp = precis_temp_path_for(lock_path);
  if (!temp) {
    precis_fail(PRECIS_E_NOMEM, "out of memory");
    return -1;
  }
  int fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    precis_fail(PRECIS_E_IO, "%s: cannot create the lock file %s: %s", output, lock_path, strerror(errno));
    free(temp);
    return -1;
  }
  bool would_block;
  try_flock(fd, &would_block); /* a fresh file: nobody else can hold it */
  if (!write_all_at(fd, content) || fsync(fd) != 0) {
    precis_fail(PRECIS_E_IO, "%s: cannot write the lock file %s: %s", output, lock_path, strerror(errno ? errno : EIO));
    goto failed;
  }
  if (link(temp, lock_path) == 0) {
    unlink(temp);
    free(temp);
    return fd;
  }
  if (errno == EEXIST) *exists = true;
  else if (errno == EPERM || errno == ENOSYS || errno == EOPNOTSUPP) {
    /* A filesystem without hard links: rename is atomic too, but replaces; so create exclusively
     * and write in place (a reader may then see the file empty for a moment, and waits). */
    unlink(temp);
    close(fd);
    free(temp);
    fd = open(lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST) *exists = true;
      else precis_fail(PRECIS_E_IO, "%s: cannot create the lock file %s: %s", output, lock_path, strerror(errno));
      return -1;
    }
    try_flock(fd, &would_block);
    if (!write_all_at(fd, content) || fsync(fd) != 0) {
      precis_fail(PRECIS_E_IO, "%s: cannot write the lock file %s: %s", output, lock_path, strerror(errno ? errno : EIO));
      unlink(lock_path);
      close(fd);
      return -1;
    }
    return fd;
  } else
    precis_fail(PRECIS_E_IO, "%s: cannot create the lock file %s: %s", output, lock_path, strerror(errno));
failed:
  unlink(temp);
  close(fd);
  free(temp);
  return -1;
}

precis_status precis_output_lock_acquire(precis_output_lock *lock, const char *output, bool is_dir, const char *command,
                                         char **taken_over) {
  if (taken_over) *taken_over = NULL;
  precis_output_lock_init(lock);
  char host[256], started[32], content[512], holder_text[512];
  this_host(host, sizeof host);
  time_t now = time(NULL);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  snprintf(content, sizeof content, "pid=%ld host=%s started=%s command=precis %s\n", (long)getpid(), host, started,
           command);
  char *lock_path = precis_output_lock_path(output, is_dir);
  if (!lock_path) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_status st = PRECIS_OK;

  /* Each pass either takes the lock or finds a holder; a pass starts again only when the lock file
   * changed under it (released, or created by someone else a moment ago). */
  for (int attempt = 0; attempt < 50; attempt++) {
    bool exists;
    int fd = create_lock(lock_path, output, content, &exists);
    if (fd >= 0) {
      lock->fd = fd;
      lock->lock_path = lock_path;
      return PRECIS_OK;
    }
    if (!exists) {
      st = PRECIS_E_IO;
      goto failed;
    }
    fd = open(lock_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue; /* released meanwhile */
      st = precis_fail(PRECIS_E_IO, "%s: cannot open the lock file %s: %s", output, lock_path, strerror(errno));
      goto failed;
    }
    bool would_block;
    bool flocked = try_flock(fd, &would_block);
    lock_holder holder;
    read_holder(fd, &holder);
    describe_holder(&holder, holder_text, sizeof holder_text);
    if (would_block) {
      close(fd);
      st = precis_fail(PRECIS_E_EXISTS, "%s: in use by %s; lock file %s", output, holder_text, lock_path);
      goto failed;
    }
    if (!same_file(fd, lock_path)) {
      /* The holder released it (unlink, then close) between our open and our flock. */
      close(fd);
      continue;
    }
    if (holder.pid <= 0 || !holder.host[0]) {
      close(fd);
      if (!flocked && attempt < 49) {
        /* Without flock an empty file may be one being written right now: look again shortly. */
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        continue;
      }
      st = precis_fail(PRECIS_E_EXISTS, "%s: the lock file %s cannot be read; remove it if no precis is writing %s", output,
                       lock_path, output);
      goto failed;
    }
    if (strcmp(holder.host, host) != 0) {
      /* On a shared filesystem another machine's flock may not be visible here: never break it. */
      close(fd);
      st = precis_fail(PRECIS_E_EXISTS,
                       "%s: locked by %s, another host: precis cannot tell whether it still runs; remove %s if it does not",
                       output, holder_text, lock_path);
      goto failed;
    }
    bool holder_alive;
    if (flocked) holder_alive = false; /* its flock died with it (a live pid now is a reused one) */
    else holder_alive = holder.pid == (long)getpid() || kill((pid_t)holder.pid, 0) == 0 || errno == EPERM;
    if (holder_alive) {
      close(fd);
      st = precis_fail(PRECIS_E_EXISTS, "%s: in use by %s; lock file %s", output, holder_text, lock_path);
      goto failed;
    }
    /* Taken over in place: the file keeps its inode, so that a racing taker blocks on our flock. */
    if (ftruncate(fd, 0) != 0 || !write_all_at(fd, content) || fsync(fd) != 0) {
      st = precis_fail(PRECIS_E_IO, "%s: cannot write the lock file %s: %s", output, lock_path, strerror(errno ? errno : EIO));
      close(fd);
      goto failed;
    }
    if (taken_over)
      *taken_over = precis_asprintf("%s: took over the lock left by %s, which is no longer running", output, holder_text);
    lock->fd = fd;
    lock->lock_path = lock_path;
    return PRECIS_OK;
  }
  st = precis_fail(PRECIS_E_EXISTS, "%s: the lock file %s keeps changing; is another precis starting?", output, lock_path);
failed:
  free(lock_path);
  return st;
}

void precis_output_lock_release(precis_output_lock *lock) {
  if (lock->fd >= 0) {
    /* Unlink first, then close (dropping the flock): a waiter that opened the old file sees it
     * unlinked and starts again instead of taking a lock nobody can see. */
    unlink(lock->lock_path);
    close(lock->fd);
  }
  free(lock->lock_path);
  precis_output_lock_init(lock);
}
