/* One writer per output (src/base/output_lock.h): a second writer is refused with the holder named;
 * a holder killed with SIGKILL leaves its lock file, which the next writer on this host takes over;
 * a lock from another host is never broken; a file that names no holder is not broken either. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "harness.h"
#include "base/output_lock.h"
#include "report/results.h"

static char *temp_dir(void) {
  char *dir = precis_strdup("/tmp/precis-test-lock-XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

static void write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  if (fp) {
    fputs(text, fp);
    fclose(fp);
  }
}

static char *read_text(const char *path) {
  char *text = NULL;
  size_t size;
  if (precis_read_file(path, &text, &size) != PRECIS_OK) return precis_strdup("");
  return text;
}

static void host(char *out, size_t size) {
  gethostname(out, size);
  out[size - 1] = '\0';
}

/* A pid that no process has: a child that has exited and been reaped. */
static pid_t dead_pid(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  return child;
}

TEST(lock_paths) {
  char *d = precis_output_lock_path("out/reports/", true), *f = precis_output_lock_path("out/d.h5", false),
       *bare = precis_output_lock_path("d.h5", false);
  CHECK_STR(d, "out/reports/.precis-lock");
  CHECK_STR(f, "out/.d.h5.precis-lock");
  CHECK_STR(bare, ".d.h5.precis-lock");
  free(d), free(f), free(bare);
}

TEST(second_writer_is_refused_with_the_holder_named) {
  char *dir = temp_dir();
  precis_output_lock first, second;
  CHECK_OK(precis_output_lock_acquire(&first, dir, true, "run", NULL));
  char *lock_path = precis_output_lock_path(dir, true);
  CHECK(precis_path_exists(lock_path));
  char *content = read_text(lock_path);
  char expected[64];
  snprintf(expected, sizeof expected, "pid=%ld ", (long)getpid());
  CHECK_MSG(strstr(content, expected) == content, "%s", content);
  free(content);

  /* flock belongs to an open file description: a second acquire in this process conflicts too. */
  CHECK(precis_output_lock_acquire(&second, dir, true, "gen", NULL) == PRECIS_E_EXISTS);
  char h[256], who[512];
  host(h, sizeof h);
  snprintf(who, sizeof who, "%s: in use by pid %ld on host %s (precis run, started 20", dir, (long)getpid(), h);
  CHECK_MSG(strstr(precis_last_error(), who) == precis_last_error(), "%s", precis_last_error());
  CHECK(strstr(precis_last_error(), lock_path) != NULL);
  CHECK(!strchr(precis_last_error(), '\n'));

  precis_output_lock_release(&first);
  CHECK(!precis_path_exists(lock_path));
  CHECK_OK(precis_output_lock_acquire(&second, dir, true, "gen", NULL));
  precis_output_lock_release(&second);
  precis_output_lock_release(&second); /* twice is harmless */
  rmdir(dir);
  free(lock_path);
  free(dir);
}

TEST(lock_of_a_killed_holder_is_taken_over) {
  char *dir = temp_dir();
  char *output = precis_asprintf("%s/d.h5", dir);
  char *lock_path = precis_output_lock_path(output, false);
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t child = fork();
  if (child == 0) {
    precis_output_lock lock;
    char byte = precis_output_lock_acquire(&lock, output, false, "gen", NULL) == PRECIS_OK ? 'y' : 'n';
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte = 0;
  CHECK(read(ready[0], &byte, 1) == 1 && byte == 'y');
  precis_output_lock lock;
  /* While the holder lives, it is named. */
  CHECK(precis_output_lock_acquire(&lock, output, false, "gen", NULL) == PRECIS_E_EXISTS);
  char pid_text[64];
  snprintf(pid_text, sizeof pid_text, "in use by pid %ld on host", (long)child);
  CHECK_MSG(strstr(precis_last_error(), pid_text) != NULL, "%s", precis_last_error());

  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  CHECK(precis_path_exists(lock_path)); /* SIGKILL ran no clean-up */
  char *taken = NULL;
  CHECK_OK(precis_output_lock_acquire(&lock, output, false, "gen", &taken));
  snprintf(pid_text, sizeof pid_text, "took over the lock left by pid %ld on host", (long)child);
  CHECK_MSG(taken && strstr(taken, pid_text) && strstr(taken, "no longer running"), "%s", taken ? taken : "(none)");
  char *content = read_text(lock_path);
  snprintf(pid_text, sizeof pid_text, "pid=%ld ", (long)getpid());
  CHECK_MSG(strstr(content, pid_text) == content, "%s", content);
  free(content);
  free(taken);
  precis_output_lock_release(&lock);
  close(ready[0]), close(ready[1]);
  rmdir(dir);
  free(lock_path), free(output), free(dir);
}

TEST(lock_from_another_host_is_never_broken) {
  char *dir = temp_dir();
  char *lock_path = precis_output_lock_path(dir, true);
  const char *text = "pid=4242 host=elsewhere.example started=2026-01-02T03:04:05Z command=precis run\n";
  write_text(lock_path, text);
  precis_output_lock lock;
  CHECK(precis_output_lock_acquire(&lock, dir, true, "run", NULL) == PRECIS_E_EXISTS);
  CHECK_MSG(strstr(precis_last_error(), "locked by pid 4242 on host elsewhere.example (precis run, started "
                                        "2026-01-02T03:04:05Z), another host") != NULL,
            "%s", precis_last_error());
  char *after = read_text(lock_path);
  CHECK_STR(after, text);
  free(after);
  unlink(lock_path);
  rmdir(dir);
  free(lock_path), free(dir);
}

/* A lock file on this host that nobody flocks any more is stale, whatever pid it names. */
TEST(unflocked_lock_file_on_this_host_is_stale) {
  char *dir = temp_dir();
  char *lock_path = precis_output_lock_path(dir, true);
  char h[256], text[512];
  host(h, sizeof h);
  snprintf(text, sizeof text, "pid=%ld host=%s started=2026-01-02T03:04:05Z command=precis run\n", (long)getppid(), h);
  write_text(lock_path, text);
  precis_output_lock lock;
  /* flock succeeds here (nobody holds it), and on this host that alone proves the holder gone,
   * even though the recorded pid (our parent) lives: a reused pid. */
  char *taken = NULL;
  CHECK_OK(precis_output_lock_acquire(&lock, dir, true, "run", &taken));
  CHECK(taken != NULL);
  free(taken);
  precis_output_lock_release(&lock);

  snprintf(text, sizeof text, "pid=%ld host=%s started=2026-01-02T03:04:05Z command=precis run\n", (long)dead_pid(), h);
  write_text(lock_path, text);
  taken = NULL;
  CHECK_OK(precis_output_lock_acquire(&lock, dir, true, "run", &taken));
  CHECK(taken && strstr(taken, "no longer running"));
  free(taken);
  precis_output_lock_release(&lock);

  /* A file that names no holder is not broken: it may be someone else's. */
  write_text(lock_path, "garbage");
  CHECK(precis_output_lock_acquire(&lock, dir, true, "run", NULL) == PRECIS_E_EXISTS);
  CHECK_MSG(strstr(precis_last_error(), "cannot be read") != NULL, "%s", precis_last_error());
  unlink(lock_path);
  rmdir(dir);
  free(lock_path), free(dir);
}

TEST(missing_directory_is_an_io_error_naming_it) {
  precis_output_lock lock;
  CHECK(precis_output_lock_acquire(&lock, "/nonexistent-precis-dir/d.h5", false, "gen", NULL) == PRECIS_E_IO);
  CHECK_MSG(strstr(precis_last_error(), "/nonexistent-precis-dir/d.h5: cannot create the lock file") != NULL, "%s",
            precis_last_error());
}

RUN_TESTS(T(lock_paths), T(second_writer_is_refused_with_the_holder_named), T(lock_of_a_killed_holder_is_taken_over),
          T(lock_from_another_host_is_never_broken), T(unflocked_lock_file_on_this_host_is_stale),
          T(missing_directory_is_an_io_error_naming_it))
