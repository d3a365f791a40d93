/* The host-side passes between BLAS calls that are not GEMMs (the reference's float64 copy of W, int8
 * quantization of W's rows) split over the CPUs: while one of them runs serially, the cores that
 * OpenBLAS's GEMM just used sit idle (the float64 transposes and int8 quantization were a tenth of
 * a 1B int8 verify's time, all on one core). */
#ifndef PRECIS_PARALLEL_H
#define PRECIS_PARALLEL_H

#include <stddef.h>

/* The online CPUs (at least 1), asked once per process: sysconf reads /sys, tens of microseconds,
 * more than a small GEMM or a row's metrics. The threaded CPU paths split their work over these. */
size_t precis_online_cpus(void);

/* fn(ctx, first, last) for disjoint contiguous ranges covering [0, items). */
typedef void (*precis_range_fn)(void *ctx, size_t first, size_t last);

/* Calls fn over [0, items) in at most one range per online CPU (and at most 8), each of at least
 * min_items (so small passes stay on the calling thread); the calling thread runs the first range
 * and waits for the others. fn must write only what its range owns. A range whose thread cannot be
 * started runs on the calling thread: the result never depends on how many threads ran. */
void precis_parallel_ranges(size_t items, size_t min_items, precis_range_fn fn, void *ctx);

#endif
