/* The output lock (src/base/output_lock.h) on a filesystem without flock (some NFS and FUSE mounts):
 * there the lock file's pid is all that says whether its holder lives, so kill(pid, 0) decides, and
 * EPERM from it means "alive, another user's process": the lock must not be taken. This program
 * stands in for such a filesystem and such a process by defining flock() and kill() itself: the
 * library linked into it calls these instead of libc's (the executable's definitions come first).
 * Checked: a holder that kill answers with EPERM keeps its lock, a live holder of our own keeps it,
 * a dead holder's lock is taken over, and a lock file that names no holder is never broken. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/output_lock.h"
#include "harness.h"
#include "report/results.h"

static bool flock_unsupported;      /* flock fails with ENOLCK, as on a filesystem without it */
static long pid_of_another_user = -1; /* kill(this pid, 0) fails with EPERM */
static int kill_calls;

int flock(int fd, int operation) {
  if (flock_unsupported) {
    errno = ENOLCK;
    return -1;
  }
  return (int)syscall(SYS_flock, fd, operation);
}

int kill(pid_t pid, int sig) {
  kill_calls++;
  if ((long)pid == pid_of_another_user) {
    errno = EPERM;
    return -1;
  }
  return (int)syscall(SYS_kill, pid, sig);
}

static char *temp_dir(void) {
  char *dir = precis_strdup("/tmp/precis-test-noflock-XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

static void write_holder(const char *path, long pid) {
  char h[256];
  gethostname(h, sizeof h);
  h[sizeof h - 1] = '\0';
  FILE *fp = fopen(path, "w");
  if (fp) {
    fprintf(fp, "pid=%ld host=%s started=2026-01-02T03:04:05Z command=precis run\n", pid, h);
    fclose(fp);
  }
}

static pid_t dead_pid(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  return child;
}

TEST(holder_of_another_user_keeps_its_lock) {
  char *dir = temp_dir();
  char *lock_path = precis_output_lock_path(dir, true);
  /* Our parent lives; kill answers EPERM for it, as for a process of another user. */
  pid_of_another_user = (long)getppid();
  write_holder(lock_path, pid_of_another_user);
  flock_unsupported = true;
  kill_calls = 0;
  precis_output_lock lock;
  char *taken = NULL;
  precis_status st = precis_output_lock_acquire(&lock, dir, true, "run", &taken);
  CHECK_MSG(st == PRECIS_E_EXISTS, "a live holder (kill: EPERM) lost its lock: %s", taken ? taken : "taken");
  CHECK_MSG(kill_calls > 0, "without flock the holder's pid was not asked (the flock stand-in is not in effect)");
  if (st == PRECIS_E_EXISTS) CHECK_MSG(strstr(precis_last_error(), "in use by pid") != NULL, "%s", precis_last_error());
  if (st == PRECIS_OK) precis_output_lock_release(&lock);
  free(taken);
  flock_unsupported = false;
  pid_of_another_user = -1;
  unlink(lock_path);
  rmdir(dir);
  free(lock_path), free(dir);
}

TEST(live_holder_of_ours_keeps_its_lock_dead_one_loses_it) {
  char *dir = temp_dir();
  char *lock_path = precis_output_lock_path(dir, true);
  flock_unsupported = true;
  precis_output_lock lock;
  /* Alive and ours: kill(pid, 0) succeeds. */
  write_holder(lock_path, (long)getppid());
  CHECK(precis_output_lock_acquire(&lock, dir, true, "run", NULL) == PRECIS_E_EXISTS);
  /* Dead: kill fails with ESRCH, the lock is taken over and says so. */
  long dead = (long)dead_pid();
  write_holder(lock_path, dead);
  char *taken = NULL;
  CHECK_OK(precis_output_lock_acquire(&lock, dir, true, "run", &taken));
  CHECK_MSG(taken && strstr(taken, "no longer running"), "%s", taken ? taken : "no take-over message");
  free(taken);
  precis_output_lock_release(&lock);
  /* A file that names no holder is never broken. */
  FILE *fp = fopen(lock_path, "w");
  if (fp) fputs("garbage", fp), fclose(fp);
  CHECK(precis_output_lock_acquire(&lock, dir, true, "run", NULL) == PRECIS_E_EXISTS);
  flock_unsupported = false;
  unlink(lock_path);
  rmdir(dir);
  free(lock_path), free(dir);
}

RUN_TESTS(T(holder_of_another_user_keeps_its_lock), T(live_holder_of_ours_keeps_its_lock_dead_one_loses_it))
