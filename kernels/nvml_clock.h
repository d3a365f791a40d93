/* NVML through dlopen("libnvidia-ml.so.1"), so that precis needs no NVML at build time and runs
 * where it is absent: every query then answers false and the report shows null. */
#ifndef PRECIS_KERNELS_NVML_CLOCK_H
#define PRECIS_KERNELS_NVML_CLOCK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct precis_nvml precis_nvml;

/* NULL (with why filled) when the library, a symbol or the device is missing. */
precis_nvml *precis_nvml_open(int cuda_device, char *why, size_t why_len);
void precis_nvml_close(precis_nvml *n);
bool precis_nvml_sm_clock_mhz(precis_nvml *n, unsigned *mhz);
bool precis_nvml_max_sm_clock_mhz(precis_nvml *n, unsigned *mhz);
/* This process's used device memory as NVML accounts it (context included). */
bool precis_nvml_process_used_bytes(precis_nvml *n, long long *bytes);
bool precis_nvml_driver_version(precis_nvml *n, char *buf, size_t len);

#endif
