/* The host side of the environment block (DESIGN §6): versions of the libraries precis is linked
 * with, the CPU, and the time. */
#ifndef PRECIS_SYSINFO_H
#define PRECIS_SYSINFO_H

#include <stddef.h>

#include "base/parallel.h" /* precis_online_cpus */
#include "report/results.h"

/* Adds precis_version, precis_commit, hdf5_version, blas, blas_config, blas_threads, cpu, cpu_cores,
 * os, hostname, utc_time. */
void precis_sysinfo_collect(precis_kv_list *env);
/* "2026-11-30T14:05:00Z" */
void precis_utc_now(char *buf, size_t len);

#endif
