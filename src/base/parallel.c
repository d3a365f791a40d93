#include "parallel.h"

#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#define PARALLEL_MAX_THREADS 8

typedef struct {
  precis_range_fn fn;
  void *ctx;
  size_t first, last;
} range_job;

static void *range_main(void *arg) {
  const range_job *job = arg;
  job->fn(job->ctx, job->first, job->last);
  return NULL;
}

size_t precis_online_cpus(void) {
  static _Atomic size_t cached;
  size_t cpus = cached;
  if (cpus == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cached = cpus = online < 1 ? 1 : (size_t)online;
  }
  return cpus;
}

void precis_parallel_ranges(size_t items, size_t min_items, precis_range_fn fn, void *ctx) {
  if (items == 0) return;
  if (min_items < 1) min_items = 1;
  size_t threads = precis_online_cpus();
  if (threads > PARALLEL_MAX_THREADS) threads = PARALLEL_MAX_THREADS;
  if (threads > items / min_items) threads = items / min_items;
  if (threads <= 1) {
    fn(ctx, 0, items);
    return;
  }
  range_job jobs[PARALLEL_MAX_THREADS];
  pthread_t ids[PARALLEL_MAX_THREADS];
  bool started[PARALLEL_MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    jobs[t] = (range_job){fn, ctx, items * t / threads, items * (t + 1) / threads};
    started[t] = t > 0 && pthread_create(&ids[t], NULL, range_main, &jobs[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++)
    if (!started[t]) range_main(&jobs[t]);
  for (size_t t = 1; t < threads; t++)
    if (started[t]) pthread_join(ids[t], NULL);
}
