#include "host_memory.h"

#include <malloc.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/huge_pages.h"

/* Large blocks freed by a case are kept for the next one. Every recipe of a workload allocates
 * operand copies of the same sizes (a 4096x4096 B: 64 MiB as float32, 128 MiB as the exact
 * integers' doubles); fresh memory from the kernel is zeroed page by page on first touch, which
 * was most of the default run's system time (issue 34: clear_page in the profile). Reused blocks
 * need no zeroing (a tracked block's contents are undefined, as malloc's). A block is reused for a
 * request of at least half its size; at most CACHE_SLOTS blocks and cache_limit() bytes are kept,
 * and precis_tracked_cache_release returns them (the runner calls it between workloads, so that a
 * workload's peak RSS holds no blocks of the one before). New large blocks go into transparent
 * huge pages (base/huge_pages.h). Blocks stay malloc'ed: free() releases one handed out of here. */
enum { CACHE_SLOTS = 12 };
#define CACHE_MIN_BYTES ((size_t)1 << 20)

static struct {
  void *p;
  size_t capacity;
} cache[CACHE_SLOTS];
static size_t cache_bytes;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1/16 of the physical memory, at most 1 GiB. */
static size_t cache_limit(void) {
  static size_t limit;
  if (!limit) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t physical = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)1 << 32;
    limit = physical / 16 < ((size_t)1 << 30) ? physical / 16 : (size_t)1 << 30;
  }
  return limit;
}

static void *cache_take(size_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&cache_lock);
  int best = -1;
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (cache[i].p && cache[i].capacity >= bytes && cache[i].capacity / 2 <= bytes &&
        (best < 0 || cache[i].capacity < cache[best].capacity))
      best = i;
  if (best >= 0) {
    p = cache[best].p;
    cache_bytes -= cache[best].capacity;
    cache[best].p = NULL;
  }
  pthread_mutex_unlock(&cache_lock);
  return p;
}

/* Keeps p (usable size capacity) when it fits, evicting smaller blocks first; frees what is not kept. */
static void cache_put(void *p, size_t capacity) {
  void *evicted[CACHE_SLOTS];
  int n_evicted = 0;
  bool kept = false;
  pthread_mutex_lock(&cache_lock);
  if (capacity <= cache_limit()) {
    while (!kept) {
      int empty = -1, smallest = -1;
      for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!cache[i].p) empty = empty < 0 ? i : empty;
        else if (smallest < 0 || cache[i].capacity < cache[smallest].capacity) smallest = i;
      }
      if (empty >= 0 && cache_bytes + capacity <= cache_limit()) {
        cache[empty].p = p;
        cache[empty].capacity = capacity;
        cache_bytes += capacity;
        kept = true;
      } else if (smallest >= 0) {
        evicted[n_evicted++] = cache[smallest].p;
        cache_bytes -= cache[smallest].capacity;
        cache[smallest].p = NULL;
      } else {
        break;
      }
    }
  }
  pthread_mutex_unlock(&cache_lock);
  for (int i = 0; i < n_evicted; i++) free(evicted[i]);
  if (!kept) free(p);
}

void precis_tracked_cache_release(void) {
  void *released[CACHE_SLOTS];
  int n = 0;
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (cache[i].p) {
      released[n++] = cache[i].p;
      cache[i].p = NULL;
    }
  cache_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
  for (int i = 0; i < n; i++) free(released[i]);
}

void precis_release_free_memory(size_t keep) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 info = mallinfo2();
  if (info.fordblks > keep) malloc_trim(0);
#else
  (void)keep;
#endif
}

void *precis_tracked_alloc(precis_host_tracker *t, size_t bytes) {
  void *p = NULL;
  size_t rounded = (bytes + 63) & ~(size_t)63;
  if (rounded >= CACHE_MIN_BYTES) p = cache_take(rounded);
  if (!p) {
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) return NULL;
    precis_advise_huge_pages(p, rounded);
  }
  t->current += (long long)bytes;
  if (t->current > t->peak) t->peak = t->current;
  return p;
}

void precis_tracked_free(precis_host_tracker *t, void *p, size_t bytes) {
  if (!p) return;
  size_t capacity = malloc_usable_size(p);
  if (capacity >= CACHE_MIN_BYTES) cache_put(p, capacity);
  else free(p);
  t->current -= (long long)bytes;
}

int precis_peak_rss_reset(void) {
  /* Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0). */
  FILE *fp = fopen("/proc/self/clear_refs", "w");
  if (!fp) return -1;
  int ok = fputs("5", fp) >= 0;
  if (fclose(fp) != 0) ok = 0;
  return ok ? 0 : -1;
}

long long precis_peak_rss_bytes(void) {
  FILE *fp = fopen("/proc/self/status", "r");
  if (fp) {
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, fp))
      if (strncmp(line, "VmHWM:", 6) == 0) {
        kib = atoll(line + 6);
        break;
      }
    fclose(fp);
    if (kib >= 0) return kib * 1024;
  }
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) return (long long)ru.ru_maxrss * 1024;
  return -1;
}
