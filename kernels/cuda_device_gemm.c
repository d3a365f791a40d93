/* libprecis's device entry (precis_emulate_device, include/precis/emulate.h; DLPack in the Python
 * package): one GEMM of arrays that already live on a CUDA device, run by the cuda backend's own
 * run_case with options.device_io, so that the inputs are read in place and the output is written on
 * the device: no copy through host memory, no kernel of its own.
 *
 * NOT YET RUN ON A GPU: written, compiled and linked on a machine without one (issue 40). Its
 * argument checks run there (tests/test_api.c, tests/venv/test_python_dlpack.py); everything after
 * cudaGetDeviceCount waits for tests/gpu/test_device_gemm.c on a device.
 *
 * One backend context per device, opened on first use and held for the process's life (a context
 * open costs the capability probes and a cuBLASLt handle, too much per layer of a forward pass); a
 * lock serializes the calls, which share the context's stream. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_api.h"

#define DEVICE_CONTEXTS 64

static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static void *contexts[DEVICE_CONTEXTS];

static precis_status no_device(cudaError_t err) {
  (void)cudaGetLastError();
  return precis_fail(PRECIS_E_NO_DEVICE, "no usable CUDA device: cudaGetDeviceCount failed with %s (%s)",
                     cudaGetErrorName(err), cudaGetErrorString(err));
}

/* The device ordinal exists in this process (CUDA_VISIBLE_DEVICES numbering, as torch's cuda:N). */
static precis_status check_device(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return no_device(err);
  if (count == 0) return precis_fail(PRECIS_E_NO_DEVICE, "no usable CUDA device: cudaGetDeviceCount found none");
  if (device < 0 || device >= count || device >= DEVICE_CONTEXTS)
    return precis_fail(PRECIS_E_USAGE, "device %d: this process sees %d CUDA device(s) (ordinals 0 to %d)", device,
                       count, count - 1);
  return PRECIS_OK;
}

/* A caller's pointer must be memory of `device` (device or managed): a host pointer would make the
 * kernels fault, which poisons the whole context. */
static precis_status check_pointer(const char *name, const void *p, int device) {
  struct cudaPointerAttributes attr;
  memset(&attr, 0, sizeof attr);
  cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return precis_fail(PRECIS_E_USAGE, "%s: cudaPointerGetAttributes(%p) failed with %s: expected device memory of "
                                       "CUDA device %d", name, p, cudaGetErrorName(err), device);
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return precis_fail(PRECIS_E_USAGE, "%s: %p is %s memory: expected device memory of CUDA device %d", name, p,
                       attr.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host", device);
  if (attr.type == cudaMemoryTypeDevice && attr.device != device)
    return precis_fail(PRECIS_E_USAGE, "%s: %p is memory of CUDA device %d: expected device %d (every array on one "
                                       "device)", name, p, attr.device, device);
  return PRECIS_OK;
}

precis_status precis_cuda_device_gemm(int device, uintptr_t stream, const precis_spec *spec,
                                      const precis_workload_info *w, const precis_device_io *io,
                                      precis_case_output *out) {
  precis_status st = check_device(device);
  if (st != PRECIS_OK) return st;
  if ((st = check_pointer("a", io->a, device)) != PRECIS_OK || (st = check_pointer("b", io->b, device)) != PRECIS_OK ||
      (st = check_pointer("c", io->c, device)) != PRECIS_OK)
    return st;
  const precis_backend *cuda = precis_backend_cuda();
  int previous = -1;
  bool restore = cudaGetDevice(&previous) == cudaSuccess;
  (void)cudaGetLastError();
  cudaError_t err;
  precis_workload_data none;
  memset(&none, 0, sizeof none);
  pthread_mutex_lock(&contexts_lock);
  precis_case_options o;
  precis_case_options_default(&o);
  o.device = device;
  o.device_io = io;
  if (!contexts[device] && (st = cuda->open(&contexts[device], &o)) != PRECIS_OK) goto done;
  /* The caller's work that wrote a and b (torch's current stream, given to __dlpack__) comes first:
   * the backend's own stream is non-blocking and would not wait for it. */
  err = cudaStreamSynchronize((cudaStream_t)stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    st = precis_fail(PRECIS_E_RUNTIME, "waiting for the inputs' stream %#llx: cudaStreamSynchronize failed with %s (%s)",
                     (unsigned long long)stream, cudaGetErrorName(err), cudaGetErrorString(err));
    goto done;
  }
  st = cuda->run_case(contexts[device], spec, w, &none, &o, out);
done:
  pthread_mutex_unlock(&contexts_lock);
  /* torch keeps its own current device; leave the thread's as it was. */
  if (restore && previous >= 0) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  return st;
}

precis_status precis_cuda_device_alloc(int device, size_t bytes, void **out) {
  *out = NULL;
  precis_status st = check_device(device);
  if (st != PRECIS_OK) return st;
  int previous = -1;
  bool restore = cudaGetDevice(&previous) == cudaSuccess;
  cudaError_t err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaMalloc(out, bytes);
  if (err != cudaSuccess) {
    *out = NULL;
    st = precis_fail(err == cudaErrorMemoryAllocation ? PRECIS_E_DOES_NOT_FIT : PRECIS_E_RUNTIME,
                     "cudaMalloc of %zu bytes on CUDA device %d failed with %s (%s)", bytes, device,
                     cudaGetErrorName(err), cudaGetErrorString(err));
  }
  if (restore && previous >= 0) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  return st;
}

void precis_cuda_device_free(int device, void *p) {
  if (!p) return;
  int previous = -1;
  bool restore = cudaGetDevice(&previous) == cudaSuccess;
  if (cudaSetDevice(device) == cudaSuccess) (void)cudaFree(p);
  if (restore && previous >= 0) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}
