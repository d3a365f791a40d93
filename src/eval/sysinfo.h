/* The host side of the environment block (DESIGN §6): versions of the libraries precis is linked
 * with, the CPU, and the time. */
#ifndef PRECIS_SYSINFO_H
#define PRECIS_SYSINFO_H

#include <stddef.h>

#include "report/results.h"

/* Adds precis_version, precis_commit, hdf5_version, blas, blas_config, blas_threads, cpu, cpu_cores,
 * os, hostname, utc_time. */
void precis_sysinfo_collect(precis_kv_list *env);
/* The online CPUs (at least 1), asked once per process: sysconf reads /sys, tens of microseconds,
 * more than a small GEMM or a row's metrics. The threaded CPU paths split their work over these. */
size_t precis_online_cpus(void);
/* "2026-11-30T14:05:00Z" */
void precis_utc_now(char *buf, size_t len);

#endif
