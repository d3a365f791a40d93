/* Host-side memory views for the cpu backend: the bytes precis itself allocated for a case (tracked,
 * with its peak) and the process's peak resident set, reset per case where Linux allows it. */
#ifndef PRECIS_HOST_MEMORY_H
#define PRECIS_HOST_MEMORY_H

#include <stddef.h>

typedef struct precis_host_tracker {
  long long current;
  long long peak;
} precis_host_tracker;

/* A GEMM whose B is at least this large as float32 (a model's head: 576 x 49152 is 113 MB) gives the
 * cache's blocks back after its emulation: no later GEMM of a model has its shape, and its operand
 * copies would otherwise sit beside its output while that is handed over. */
#define PRECIS_LARGE_B_BYTES ((size_t)64 << 20)

void *precis_tracked_alloc(precis_host_tracker *t, size_t bytes); /* 64-byte aligned; NULL on failure */
void precis_tracked_free(precis_host_tracker *t, void *p, size_t bytes);
/* Large freed blocks are kept for reuse by the next allocations (host_memory.c says why); this
 * returns them to the system. A block from precis_tracked_alloc may also be released with free(). */
void precis_tracked_cache_release(void);
/* Returns malloc's free pages to the system once more than `keep` bytes of them are held (glibc;
 * nothing elsewhere). glibc raises its mmap threshold to the largest block freed (up to 32 MiB),
 * so after a large workload the next ones are served from its arenas, whose free pages stay
 * resident: over a 135M model's 211 workloads that grew a run by 1 GB. Trimming only above `keep`
 * leaves the pages that the next workload reuses (fresh pages are zeroed by the kernel). */
void precis_release_free_memory(size_t keep);

/* Resets the kernel's peak-RSS counter (VmHWM) when possible; returns 0 on success. */
int precis_peak_rss_reset(void);
/* Peak RSS in bytes since the last reset (VmHWM), or since process start; -1 when unknown. */
long long precis_peak_rss_bytes(void);

#endif
