/* The device view of memory (DESIGN §6): a background thread samples cudaMemGetInfo every
 * period_us (<= 1 ms) so that transient peaks between the backend's own observations are caught.
 * cudaMemGetInfo reports the whole device: memory held by other processes counts too. */
#ifndef PRECIS_KERNELS_MEM_SAMPLER_H
#define PRECIS_KERNELS_MEM_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/status.h"

typedef struct precis_mem_sampler {
  pthread_t thread;
  bool running;
  int device;
  long period_us;
  atomic_bool stop;
  atomic_llong peak_used_bytes; /* total - free at its highest */
  atomic_llong samples;
  atomic_int failures;          /* cudaMemGetInfo calls that failed in the thread */
} precis_mem_sampler;

/* Device memory in use now (total - free), or -1 when cudaMemGetInfo fails. */
long long precis_device_used_bytes(void);

/* Takes a first sample on the calling thread, then starts the thread. */
precis_status precis_mem_sampler_start(precis_mem_sampler *s, int device, long period_us);
/* Takes a last sample, stops and joins the thread; returns the peak seen (-1 when none). */
long long precis_mem_sampler_stop(precis_mem_sampler *s);

#endif
