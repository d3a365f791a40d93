/* Crash-proof parsing (hdf5_guard.h): the checks run in a forked child; the parent only waits.
 *
 * Why a process and not a check in place: the defects are inside libhdf5 (a global-heap index out of
 * range read in H5HG_read, a cache entry loop in H5C_protect; docs/robustness.md), reached through
 * its public API with valid arguments, so precis cannot test for them beforehand. What the child
 * reads is what the parent's own validation reads first (every attribute, object header and type,
 * and every chunk index), so once the child came back, the same library on the same bytes does the
 * same in the parent. Chunk data are not read by the child (that would double the cost of a large
 * dataset): they are checked by Fletcher32 in the parent, and decoding them runs in the filters,
 * not in the structure parsers the fuzzer breaks. */
#include "hdf5_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"

/* Set by ASan/UBSan builds (and libFuzzer through them): in the child, a sanitizer's report must
 * end the child, not run the fuzzer's crash handler (which would save the input as a precis crash). */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

enum { CHILD_VALID = 0, CHILD_REFUSED = 3 };

#define GUARD_DEFAULT_TIMEOUT_S 20.0

double precis_hdf5_guard_timeout_s(void) {
  const char *text = getenv("PRECIS_HDF5_CHECK_TIMEOUT");
  if (text && *text) {
    char *end = NULL;
    double s = strtod(text, &end);
    if (end && *end == '\0' && s > 0 && s < 1e6) return s;
  }
  return GUARD_DEFAULT_TIMEOUT_S;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The child prints nothing (one line per error is the parent's), dies of its crash (default action,
 * no core file) and leaves no sanitizer callback behind. */
static void child_prepare(void) {
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    close(devnull);
  }
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) signal(crash_signals[i], SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(NULL);
}

static const char *signal_label(int sig) {
  switch (sig) {
  case SIGSEGV: return " (SIGSEGV)";
  case SIGBUS: return " (SIGBUS)";
  case SIGABRT: return " (SIGABRT)";
  case SIGFPE: return " (SIGFPE)";
  case SIGILL: return " (SIGILL)";
  case SIGKILL: return " (SIGKILL: out of memory?)";
  default: return "";
  }
}

precis_status precis_hdf5_guard(const char *path, precis_hdf5_check_fn check, const void *arg) {
  /* Buffered output would otherwise be inherited, and written twice if the child flushed it. */
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return PRECIS_OK; /* no isolation possible: validate in process, as without the guard */
  if (pid == 0) {
    child_prepare();
    /* A test hook (tests/py/test_hdf5_guard.py): the child crashes or hangs as libhdf5 does on the
     * files of tests/corpus/libhdf5-crashes/, so that every command's path through the guard is
     * tested, also where no crashing file is known (import and gen sources). */
    const char *fault = getenv("PRECIS_HDF5_GUARD_FAULT");
    if (fault && strcmp(fault, "crash") == 0) raise(SIGSEGV);
    if (fault && strcmp(fault, "hang") == 0)
      for (;;) pause();
    precis_status st = check(path, arg);
    _exit(st == PRECIS_OK ? CHILD_VALID : CHILD_REFUSED);
  }

  double limit = precis_hdf5_guard_timeout_s(), deadline = now_s() + limit;
  long pause_ns = 50000; /* 0.05 ms, doubling up to 1 ms: a valid file answers within milliseconds */
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return PRECIS_OK; /* the child is not ours to wait for any more */
    if (now_s() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return precis_fail(PRECIS_E_INPUT,
                         "%s: corrupt file (the HDF5 library failed reading it): no answer within %g s while "
                         "validating it in a separate process (PRECIS_HDF5_CHECK_TIMEOUT)",
                         path, limit);
    }
    struct timespec pause = {0, pause_ns};
    nanosleep(&pause, NULL);
    if (pause_ns < 1000000) pause_ns *= 2;
  }
  if (WIFSIGNALED(status))
    return precis_fail(PRECIS_E_INPUT,
                       "%s: corrupt file (the HDF5 library failed reading it): the separate process validating "
                       "it was killed by signal %d%s",
                       path, WTERMSIG(status), signal_label(WTERMSIG(status)));
  if (WIFEXITED(status) && WEXITSTATUS(status) != CHILD_VALID && WEXITSTATUS(status) != CHILD_REFUSED)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: corrupt file (the HDF5 library failed reading it): the validating process stopped "
                       "with status %d (a sanitizer's report)",
                       path, WEXITSTATUS(status));
  return PRECIS_OK;
}

/* ------------------------------------------------------------------------------------------------
 * The checks (run in the child) */

typedef struct chunk_walk {
  const char *path;
  precis_status st;
} chunk_walk;

/* Counting the chunks of a chunked dataset traverses its whole chunk index (B-tree nodes and keys),
 * which is what every read looks chunks up in. */
static precis_status walk_one_dataset(const char *path, const char *name, hid_t dset) {
  precis_status st = PRECIS_OK;
  hid_t dcpl = H5Dget_create_plist(dset), space = -1;
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
    hsize_t chunks = 0;
    space = H5Dget_space(dset);
    if (space < 0 || H5Dget_num_chunks(dset, space, &chunks) < 0) {
      H5Eclear2(H5E_DEFAULT);
      st = precis_fail(PRECIS_E_INPUT, "%s: %s: the chunk index cannot be read (the file is corrupt)", path, name);
    }
  }
  if (space >= 0) H5Sclose(space);
  if (dcpl >= 0) H5Pclose(dcpl);
  return st;
}

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t link_info;
#else
typedef H5L_info_t link_info;
#endif

static herr_t walk_link(hid_t group, const char *name, const link_info *info, void *data) {
  chunk_walk *walk = data;
  if (info->type != H5L_TYPE_HARD) return 0;
  hid_t dset = H5Dopen2(group, name, H5P_DEFAULT);
  if (dset < 0) { /* a group, or another kind of object */
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  walk->st = walk_one_dataset(walk->path, name, dset);
  H5Dclose(dset);
  return walk->st == PRECIS_OK ? 0 : 1;
}

precis_status precis_hdf5_walk_chunk_indexes(const char *path, long long file) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  chunk_walk walk = {path, PRECIS_OK};
  if (H5Lvisit((hid_t)file, H5_INDEX_NAME, H5_ITER_NATIVE, walk_link, &walk) < 0 && walk.st == PRECIS_OK) {
    H5Eclear2(H5E_DEFAULT);
    walk.st = precis_fail(PRECIS_E_INPUT, "%s: the group structure cannot be read (the file is corrupt)", path);
  }
  return walk.st;
}

precis_status precis_hdf5_check_dataset(const char *path, const void *unused) {
  (void)unused;
  precis_dataset *ds = NULL;
  precis_status st = precis_dataset_open_in_process(path, &ds);
  if (st == PRECIS_OK) st = precis_hdf5_walk_chunk_indexes(path, (long long)ds->file_handle);
  precis_dataset_close(ds);
  return st;
}

precis_status precis_hdf5_check_object(const char *path, const void *object) {
  const char *name = object;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (H5Fis_hdf5(path) <= 0) return precis_fail(PRECIS_E_INPUT, "%s: not an HDF5 file", path);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), dset = -1, type = -1, space = -1;
  if (file < 0) return precis_fail(PRECIS_E_INPUT, "%s: cannot open as HDF5", path);
  precis_status st = PRECIS_OK;
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0 || (dset = H5Dopen2(file, name, H5P_DEFAULT)) < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: no such dataset", path, name);
    goto done;
  }
  type = H5Dget_type(dset);
  space = H5Dget_space(dset);
  if (type < 0 || space < 0) {
    st = precis_fail(PRECIS_E_INPUT, "%s: %s: unreadable type or shape", path, name);
    goto done;
  }
  st = walk_one_dataset(path, name, dset);
done:
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (dset >= 0) H5Dclose(dset);
  H5Fclose(file);
  return st;
}

/* ------------------------------------------------------------------------------------------------
 * Every open of a dataset goes through the guard (inspect, run, accept, the default dataset's cache
 * check); the child itself opens in process. */

precis_status precis_dataset_open(const char *path, precis_dataset **out) {
  *out = NULL;
  precis_status st = precis_hdf5_guard(path, precis_hdf5_check_dataset, NULL);
  if (st != PRECIS_OK) return st;
  return precis_dataset_open_in_process(path, out);
}
