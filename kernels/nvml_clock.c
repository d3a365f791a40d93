#include "kernels/nvml_clock.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The few NVML declarations used, as nvml.h defines them (NVML_SUCCESS = 0, NVML_CLOCK_SM = 1,
 * NVML_ERROR_INSUFFICIENT_SIZE = 7; nvmlProcessInfo_t of the _v2/_v3 calls has four fields). */
typedef int nvml_return;
typedef void *nvml_device;
typedef struct nvml_process_info {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
} nvml_process_info;
enum { NVML_OK = 0, NVML_CLOCK_SM_ = 1, NVML_INSUFFICIENT_SIZE = 7 };

/* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. */
#define LOAD_SYMBOL(lib, fn, name)            \
  do {                                        \
    void *sym_ = dlsym((lib), (name));        \
    memcpy(&(fn), &sym_, sizeof(fn));         \
  } while (0)

struct precis_nvml {
  void *lib;
  nvml_device device;
  nvml_return (*shutdown)(void);
  nvml_return (*clock_info)(nvml_device, int, unsigned *);
  nvml_return (*max_clock_info)(nvml_device, int, unsigned *);
  nvml_return (*running_processes)(nvml_device, unsigned *, nvml_process_info *);
  nvml_return (*driver_version)(char *, unsigned);
};

precis_nvml *precis_nvml_open(int cuda_device, char *why, size_t why_len) {
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(why, why_len, "NVML not available: %s", dlerror());
    return NULL;
  }
  precis_nvml *n = calloc(1, sizeof *n);
  if (!n) {
    dlclose(lib);
    snprintf(why, why_len, "out of host memory");
    return NULL;
  }
  n->lib = lib;
  nvml_return (*init)(void) = NULL;
  nvml_return (*by_pci)(const char *, nvml_device *) = NULL;
  LOAD_SYMBOL(lib, init, "nvmlInit_v2");
  LOAD_SYMBOL(lib, by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  LOAD_SYMBOL(lib, n->shutdown, "nvmlShutdown");
  LOAD_SYMBOL(lib, n->clock_info, "nvmlDeviceGetClockInfo");
  LOAD_SYMBOL(lib, n->max_clock_info, "nvmlDeviceGetMaxClockInfo");
  LOAD_SYMBOL(lib, n->running_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!n->running_processes) LOAD_SYMBOL(lib, n->running_processes, "nvmlDeviceGetComputeRunningProcesses_v2");
  LOAD_SYMBOL(lib, n->driver_version, "nvmlSystemGetDriverVersion");
  char pci[64] = "";
  if (!init || !by_pci || !n->shutdown) {
    snprintf(why, why_len, "NVML lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2");
    goto fail;
  }
  if (init() != NVML_OK) {
    snprintf(why, why_len, "nvmlInit_v2 failed");
    n->shutdown = NULL;
    goto fail;
  }
  if (cudaDeviceGetPCIBusId(pci, (int)sizeof pci, cuda_device) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, why_len, "cudaDeviceGetPCIBusId failed");
    goto fail;
  }
  if (by_pci(pci, &n->device) != NVML_OK) {
    snprintf(why, why_len, "NVML does not know the device at PCI %s", pci);
    goto fail;
  }
  return n;
fail:
  precis_nvml_close(n);
  return NULL;
}

void precis_nvml_close(precis_nvml *n) {
  if (!n) return;
  if (n->shutdown) n->shutdown();
  if (n->lib) dlclose(n->lib);
  free(n);
}

bool precis_nvml_sm_clock_mhz(precis_nvml *n, unsigned *mhz) {
  return n && n->clock_info && n->clock_info(n->device, NVML_CLOCK_SM_, mhz) == NVML_OK;
}

bool precis_nvml_max_sm_clock_mhz(precis_nvml *n, unsigned *mhz) {
  return n && n->max_clock_info && n->max_clock_info(n->device, NVML_CLOCK_SM_, mhz) == NVML_OK;
}

bool precis_nvml_process_used_bytes(precis_nvml *n, long long *bytes) {
  if (!n || !n->running_processes) return false;
  unsigned count = 64;
  nvml_process_info infos[64];
  if (n->running_processes(n->device, &count, infos) != NVML_OK) return false;
  unsigned pid = (unsigned)getpid();
  for (unsigned i = 0; i < count && i < 64; i++)
    if (infos[i].pid == pid) {
      /* NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot account per process. */
      if (infos[i].used_gpu_memory == ~0ULL) return false;
      *bytes = (long long)infos[i].used_gpu_memory;
      return true;
    }
  return false;
}

bool precis_nvml_driver_version(precis_nvml *n, char *buf, size_t len) {
  return n && n->driver_version && n->driver_version(buf, (unsigned)len) == NVML_OK;
}
