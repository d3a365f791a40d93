#include "kernels/mem_sampler.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <string.h>
#include <time.h>

long long precis_device_used_bytes(void) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return (long long)(total_b - free_b);
}

static void record(precis_mem_sampler *s) {
  long long used = precis_device_used_bytes();
  if (used < 0) {
    atomic_fetch_add(&s->failures, 1);
    return;
  }
  long long peak = atomic_load(&s->peak_used_bytes);
  while (used > peak && !atomic_compare_exchange_weak(&s->peak_used_bytes, &peak, used)) {
  }
  atomic_fetch_add(&s->samples, 1);
}

static void *sampler_main(void *arg) {
  precis_mem_sampler *s = arg;
  /* The runtime binds this thread to the device's primary context, the one the backend uses. */
  if (cudaSetDevice(s->device) != cudaSuccess) {
    (void)cudaGetLastError();
    atomic_fetch_add(&s->failures, 1);
    return NULL;
  }
  struct timespec period = {.tv_sec = 0, .tv_nsec = s->period_us * 1000L};
  while (!atomic_load(&s->stop)) {
    record(s);
    struct timespec left = period;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
  }
  return NULL;
}

precis_status precis_mem_sampler_start(precis_mem_sampler *s, int device, long period_us) {
  memset(s, 0, sizeof *s);
  s->device = device;
  s->period_us = period_us > 0 && period_us <= 1000 ? period_us : 500;
  atomic_init(&s->stop, false);
  atomic_init(&s->peak_used_bytes, -1);
  atomic_init(&s->samples, 0);
  atomic_init(&s->failures, 0);
  record(s);
  int rc = pthread_create(&s->thread, NULL, sampler_main, s);
  if (rc != 0) return precis_fail(PRECIS_E_RUNTIME, "device memory sampler: pthread_create failed: %s", strerror(rc));
  s->running = true;
  return PRECIS_OK;
}

long long precis_mem_sampler_stop(precis_mem_sampler *s) {
  if (s->running) {
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    s->running = false;
  }
  record(s);
  return atomic_load(&s->peak_used_bytes);
}
