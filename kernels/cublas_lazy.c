/* cuBLAS and cuBLASLt loaded on their first call, not when a program or libprecis is loaded.
 *
 * Why: loading libcublas.so.13 (and the libcublasLt it needs) adds about 150 MiB to a process's
 * resident memory and 0.1 s to its start on this machine, before any GPU is asked for: every
 * `precis run` on the cpu backend paid it, and every Python process that imported libprecis before
 * torch (whose own copy then loaded beside it) carried both in the peak that verify's memory
 * target counts. The CUDA runtime stays linked: loading it costs nothing measurable.
 *
 * Every cuBLAS and cuBLASLt function kernels/ and the GPU tests call is defined here with the
 * header's own prototype (the compiler checks each against it), and forwards to the library's
 * function, which the first call looks up (dlopen by soname: a copy already loaded, by torch for
 * one, is reused; LD_LIBRARY_PATH and the loader's cache are searched; then the toolkit's library
 * directory this was built against). Where a library cannot be loaded, its functions return
 * CUBLAS_STATUS_NOT_INITIALIZED and cublasLtGetStatusString says why (dlerror's text), so that
 * the message PRECIS_TRY records names the missing file. A function the library lacks returns
 * CUBLAS_STATUS_NOT_SUPPORTED.
 *
 * The definitions are hidden: a shared object that links this (the Python module) does not export
 * cuBLAS's names, so it never stands in for another library's cuBLAS. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#pragma GCC visibility push(hidden)
#include <cublasLt.h>
#include <cublas_v2.h>
#pragma GCC visibility pop

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define CUBLAS_SONAME_SUFFIX ".so." STRINGIFY(CUBLAS_VER_MAJOR)

#ifndef PRECIS_CUDA_LIBRARY_DIR
#define PRECIS_CUDA_LIBRARY_DIR ""
#endif

enum { LIB_LT, LIB_BLAS, LIB_COUNT };
static const char *const lib_names[LIB_COUNT] = {"libcublasLt" CUBLAS_SONAME_SUFFIX, "libcublas" CUBLAS_SONAME_SUFFIX};

/* X(library, name, parameters, arguments): the functions whose result is a status. */
#define PRECIS_CUBLAS_STATUS_FUNCTIONS(X)                                                                         \
  X(LIB_LT, cublasLtCreate, (cublasLtHandle_t * handle), (handle))                                               \
  X(LIB_LT, cublasLtDestroy, (cublasLtHandle_t handle), (handle))                                                \
  X(LIB_LT, cublasLtGetProperty, (libraryPropertyType type, int *value), (type, value))                          \
  X(LIB_LT, cublasLtEmulationDescCreate, (cublasLtEmulationDesc_t * desc), (desc))                               \
  X(LIB_LT, cublasLtEmulationDescDestroy, (cublasLtEmulationDesc_t desc), (desc))                                \
  X(LIB_LT, cublasLtEmulationDescSetAttribute,                                                                   \
    (cublasLtEmulationDesc_t desc, cublasLtEmulationDescAttributes_t attr, const void *buf, size_t size),        \
    (desc, attr, buf, size))                                                                                     \
  X(LIB_LT, cublasLtMatmul,                                                                                      \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *a,                       \
     cublasLtMatrixLayout_t a_desc, const void *b, cublasLtMatrixLayout_t b_desc, const void *beta, const void *c, \
     cublasLtMatrixLayout_t c_desc, void *d, cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t *algo,    \
     void *workspace, size_t workspace_bytes, cudaStream_t stream),                                              \
    (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace, workspace_bytes,    \
     stream))                                                                                                    \
  X(LIB_LT, cublasLtMatmulAlgoConfigGetAttribute,                                                                \
    (const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, void *buf, size_t size,        \
     size_t *written),                                                                                           \
    (algo, attr, buf, size, written))                                                                            \
  X(LIB_LT, cublasLtMatmulAlgoGetHeuristic,                                                                      \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,                          \
     cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,                \
     cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],           \
     int *returned),                                                                                             \
    (handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested, results, returned))                   \
  X(LIB_LT, cublasLtMatmulDescCreate,                                                                            \
    (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale), (desc, compute, scale))    \
  X(LIB_LT, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))                                      \
  X(LIB_LT, cublasLtMatmulDescSetAttribute,                                                                      \
    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t size),              \
    (desc, attr, buf, size))                                                                                     \
  X(LIB_LT, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))                         \
  X(LIB_LT, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))                          \
  X(LIB_LT, cublasLtMatmulPreferenceSetAttribute,                                                                \
    (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf, size_t size),  \
    (pref, attr, buf, size))                                                                                     \
  X(LIB_LT, cublasLtMatrixLayoutCreate,                                                                          \
    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),              \
    (layout, type, rows, cols, ld))                                                                              \
  X(LIB_LT, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))                              \
  X(LIB_LT, cublasLtMatrixLayoutSetAttribute,                                                                    \
    (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void *buf, size_t size),         \
    (layout, attr, buf, size))                                                                                   \
  X(LIB_BLAS, cublasCreate_v2, (cublasHandle_t * handle), (handle))                                              \
  X(LIB_BLAS, cublasDestroy_v2, (cublasHandle_t handle), (handle))                                               \
  X(LIB_BLAS, cublasGetProperty, (libraryPropertyType type, int *value), (type, value))                          \
  X(LIB_BLAS, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))                     \
  X(LIB_BLAS, cublasDgemm_v2,                                                                                    \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,             \
     const double *alpha, const double *a, int lda, const double *b, int ldb, const double *beta, double *c,     \
     int ldc),                                                                                                   \
    (handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))

/* The functions with other results, by hand below. */
#define PRECIS_CUBLAS_OTHER_FUNCTIONS(X)                                                                          \
  X(LIB_LT, cublasLtGetVersion)                                                                                  \
  X(LIB_LT, cublasLtGetStatusName)                                                                               \
  X(LIB_LT, cublasLtGetStatusString)

#define SYMBOL_ENUM(lib, name, ...) SYM_##name,
enum { PRECIS_CUBLAS_STATUS_FUNCTIONS(SYMBOL_ENUM) PRECIS_CUBLAS_OTHER_FUNCTIONS(SYMBOL_ENUM) SYM_COUNT };
#undef SYMBOL_ENUM

#define SYMBOL_ENTRY(lib, name, ...) {lib, #name},
static const struct {
  int lib;
  const char *name;
} symbols[SYM_COUNT] = {PRECIS_CUBLAS_STATUS_FUNCTIONS(SYMBOL_ENTRY) PRECIS_CUBLAS_OTHER_FUNCTIONS(SYMBOL_ENTRY)};
#undef SYMBOL_ENTRY

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static void *libs[LIB_COUNT];
static char load_errors[LIB_COUNT][512];
static void *resolved[SYM_COUNT];

static void *open_library(int lib) {
  const char *soname = lib_names[lib];
  void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle) return handle;
  char first[256];
  snprintf(first, sizeof first, "%s", dlerror());
  if (PRECIS_CUDA_LIBRARY_DIR[0]) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PRECIS_CUDA_LIBRARY_DIR, soname);
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle) return handle;
  }
  snprintf(load_errors[lib], sizeof load_errors[lib],
           "%s could not be loaded (%s; nor from %s, the CUDA toolkit this precis was built with): install cuBLAS "
           "%d or put its directory on LD_LIBRARY_PATH",
           soname, first, PRECIS_CUDA_LIBRARY_DIR[0] ? PRECIS_CUDA_LIBRARY_DIR : "(unknown)", CUBLAS_VER_MAJOR);
  return NULL;
}

static void load_libraries(void) {
  for (int lib = 0; lib < LIB_COUNT; lib++) libs[lib] = open_library(lib);
  for (int s = 0; s < SYM_COUNT; s++)
    if (libs[symbols[s].lib]) resolved[s] = dlsym(libs[symbols[s].lib], symbols[s].name);
}

/* The library whose absence failed this thread's last call, -1 when its last call reached cuBLAS:
 * cublasLtGetStatusString then says why the library is missing, not what the status means. */
static _Thread_local int missing_library = -1;

/* The library's function `s`, or NULL (then *status says why: the library or the function missing). */
static void *lookup(int s, cublasStatus_t *status) {
  pthread_once(&load_once, load_libraries);
  const int lib = symbols[s].lib;
  *status = libs[lib] ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_NOT_INITIALIZED;
  missing_library = libs[lib] ? -1 : lib;
  return resolved[s];
}

/* dlsym's object pointer as a function pointer (POSIX guarantees the two have one representation;
 * ISO C has no conversion between them). */
#define AS_FUNCTION(pointer, fn) memcpy(&(fn), &(pointer), sizeof(fn))

#define DEFINE_STATUS_FUNCTION(lib, name, params, args)                                                           \
  cublasStatus_t CUBLASWINAPI name params {                                                                      \
    cublasStatus_t missing;                                                                                      \
    void *pointer = lookup(SYM_##name, &missing);                                                                \
    if (!pointer) return missing;                                                                                \
    __typeof__(&name) fn;                                                                                        \
    AS_FUNCTION(pointer, fn);                                                                                    \
    return fn args;                                                                                              \
  }
PRECIS_CUBLAS_STATUS_FUNCTIONS(DEFINE_STATUS_FUNCTION)
#undef DEFINE_STATUS_FUNCTION

/* 0 (unknown, as the inventory reads it) when cuBLASLt is not there. */
size_t CUBLASWINAPI cublasLtGetVersion(void) {
  cublasStatus_t missing;
  void *pointer = lookup(SYM_cublasLtGetVersion, &missing);
  if (!pointer) return 0;
  __typeof__(&cublasLtGetVersion) fn;
  AS_FUNCTION(pointer, fn);
  return fn();
}

const char *CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  const int missing_before = missing_library;
  cublasStatus_t missing;
  void *pointer = lookup(SYM_cublasLtGetStatusName, &missing);
  if (missing_before >= 0) missing_library = missing_before; /* kept for cublasLtGetStatusString */
  if (!pointer) return status == CUBLAS_STATUS_NOT_INITIALIZED ? "CUBLAS_STATUS_NOT_INITIALIZED"
                       : status == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                                               : "CUBLAS_STATUS_UNKNOWN";
  __typeof__(&cublasLtGetStatusName) fn;
  AS_FUNCTION(pointer, fn);
  return fn(status);
}

/* After a call that failed for a missing library: why it is missing. */
const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  const int missing_before = missing_library;
  cublasStatus_t missing;
  void *pointer = lookup(SYM_cublasLtGetStatusString, &missing);
  if (status == CUBLAS_STATUS_NOT_INITIALIZED && missing_before >= 0) {
    missing_library = missing_before;
    return load_errors[missing_before];
  }
  if (!pointer) return "cublasLtGetStatusString is not in this cuBLASLt";
  __typeof__(&cublasLtGetStatusString) fn;
  AS_FUNCTION(pointer, fn);
  return fn(status);
}
