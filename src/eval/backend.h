/* The backend interface: a struct of function pointers (DESIGN §1-2). The `cpu` backend is always
 * built; the `cuda` backend (kernels/) when CUDA is found. The runner and accept take a backend by
 * this table, so that eval/ never names the cuda backend: kernels/ sits above eval/ and cli/ picks. The runner owns metrics, criteria,
 * journaling and reports; a backend only executes one (workload, recipe) case and measures it. */
#ifndef PRECIS_BACKEND_H
#define PRECIS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "data/dataset.h"
#include "numerics/quant.h"
#include "numerics/recipe.h"
#include "numerics/spec.h"
#include "numerics/target.h"
#include "report/results.h"
#include "base/status.h"

/* The --int8-act-scale option; precis_recipe_set_static_act_scale writes it into the specs, which
 * are what the backends read. */
typedef enum precis_act_scale {
  PRECIS_ACT_SCALE_ROW,        /* dynamic, per row of the evaluated input (default) */
  PRECIS_ACT_SCALE_ABSMAX,     /* static per tensor from the calibration split */
  PRECIS_ACT_SCALE_PERCENTILE,
  PRECIS_ACT_SCALE_MSE,
} precis_act_scale;

typedef struct precis_case_options {
  precis_act_scale int8_act_scale;
  double percentile;          /* for PRECIS_ACT_SCALE_PERCENTILE, default 99.99 */
  /* Timing (DESIGN §6): warm-up of >= warmup_calls and >= warmup_ms; then samples until
   * min_samples are kept and the relative spread (stdev/median... see timing.h) is under
   * target_rel_spread, or max_time_ms passes (at least min_samples are always kept unless even
   * that exceeds max_time_ms*4, in which case at least 1). */
  int warmup_calls;
  double warmup_ms;
  int min_samples;
  int max_samples;
  double target_rel_spread;
  double max_time_ms;
  bool cold;                  /* flush the cache between samples */
  int autotune;               /* cuda: time the top N heuristic candidates (0/1: take the first) */
  /* The per-worker state run_case uses, from the backend's worker_open; NULL: the backend's own
   * (callers that run one case at a time, such as the runner). Callers that run cases from several
   * threads at once (accept --concurrency N) give each thread its own. */
  void *worker;
  /* cuda: the device ordinal the backend opens (default 0, among those CUDA_VISIBLE_DEVICES shows);
   * `run --devices` and MPI ranks give each worker process its own (docs/scale-out.md). */
  int device;
  /* --target (DESIGN §19): the architecture whose arithmetic the cpu backend emulates and whose
   * routes it follows (PRECIS_TARGET_DEFAULT: sm_90). The cuda backend runs on its device; the
   * command line refuses a --target that differs from it. */
  precis_target target;
  /* NULL: the workload's arrays are host memory (every caller but one). Else (libprecis's
   * precis_emulate_device, DLPack; only the cuda backend reads it, the cpu backend refuses it): A
   * and B are already on the backend's device, dense row-major, and the output goes to device memory
   * there; data->a and data->b are not read. The case is computed once and not timed. */
  const struct precis_device_io *device_io;
} precis_case_options;

/* Device memory of options->device_io: float32, dense row-major, on the backend's device. */
typedef struct precis_device_io {
  const float *a; /* [batch, m, k] */
  const float *b; /* [k, n], or [batch, k, n] when the workload's b is batched */
  float *c;       /* [batch, m, n]: the output widened to float32 (as precis_case_output.c holds it on the host) */
} precis_device_io;

void precis_case_options_default(precis_case_options *o);

/* What a backend hands back for one case. The runner frees c and the timing samples. */
typedef struct precis_case_output {
  precis_row_status status;   /* ok, unsupported, does-not-fit, failed */
  char reason[512];           /* when status != ok */
  float *c;                   /* [batch, m, n], the recipe's output widened to float32 (malloc) */
  /* out=fp64: the output in float64 [batch, m, n] (malloc), which metrics and saved outputs use;
   * c is then its float32 rounding. NULL for every narrower output. */
  double *c64;
  double clipped_fraction;    /* quantized recipes: fraction of A and B inputs that saturated; else NaN */
  precis_timing time;
  precis_memory memory;
  precis_kv_list details;     /* scales granularity, calibration method, algorithm, padding, ... */
} precis_case_output;

void precis_case_output_init(precis_case_output *out);
void precis_case_output_free(precis_case_output *out);

typedef struct precis_backend {
  const char *name;  /* "cpu", "cuda" */
  const char *label; /* how reports mark its figures: "cpu-emulation", "cuda" */
  /* Fails with PRECIS_E_NO_DEVICE (and a message with the real CUDA error) when unusable. */
  precis_status (*open)(void **ctx, const precis_case_options *options);
  void (*close)(void *ctx);
  /* Adds the backend's part of the environment block (device, versions, clocks, ...). */
  void (*environment)(void *ctx, precis_kv_list *env);
  /* false with a reason when this spec cannot run here (row status `unsupported`). A backend
   * decides from the spec's fields, never from a recipe's name. */
  bool (*supports)(void *ctx, const precis_spec *spec, char *reason, size_t reason_len);
  /* Runs one case. A returned error status means the backend itself broke; anything that concerns
   * only this case is reported through out->status and out->reason with PRECIS_OK. */
  precis_status (*run_case)(void *ctx, const precis_spec *spec, const precis_workload_info *workload,
                            const precis_workload_data *data, const precis_case_options *options,
                            precis_case_output *out);
  /* Optional (NULL: run_case needs no per-worker state). The state of worker `index` for callers
   * that run cases concurrently: cuda: its own stream, events and cuBLASLt handle, so that workers
   * neither serialize on one stream nor time each other's work. Opened before any timed region
   * (it creates handles and may allocate), passed to run_case as options->worker by that worker
   * only, closed after its last case. */
  precis_status (*worker_open)(void *ctx, int index, void **worker);
  void (*worker_close)(void *ctx, void *worker);
} precis_backend;

const precis_backend *precis_backend_cpu(void);
/* One case's output exactly as the cpu backend's run_case computes it (the same preparation, GEMM
 * and output rounding, so the same bits), computed once and not timed: libprecis's emulate
 * (DESIGN §15). out->status and reason say when it did not run; returns PRECIS_OK. */
precis_status precis_cpu_emulate(const precis_spec *spec, const precis_workload_info *w,
                                 const precis_workload_data *d, precis_case_output *out);
/* The same under a --target's arithmetic (PRECIS_TARGET_DEFAULT: sm_90, as precis_cpu_emulate). */
precis_status precis_cpu_emulate_target(const precis_spec *spec, const precis_workload_info *w,
                                        const precis_workload_data *d, precis_target target, precis_case_output *out);
/* The same, with c_dest (batch*m*n float32, or NULL): where the output may be written instead of
 * out->c. When it was (a head-sized W emulated a block of columns at a time), out->c is NULL with
 * status ok: no second copy of a head's output. */
precis_status precis_cpu_emulate_into(const precis_spec *spec, const precis_workload_info *w,
                                      const precis_workload_data *d, precis_target target, precis_case_output *out,
                                      float *c_dest);
/* Host bytes the cpu backend holds for B beyond the caller's while it emulates this spec on a
 * GEMM given W [n, k] (workload data b_nk): its copies of B (codes, rounded values, a [k, n] copy
 * for the routes that need one), a block of columns' for a head-sized W whose output columns are
 * computed independently. About, for the quantized block formats; 0 when the spec does not run. */
size_t precis_cpu_emulate_b_bytes(const precis_spec *spec, int64_t k, int64_t n, precis_target target);
/* The cuda backend is declared by kernels/cuda_api.h (precis_backend_cuda), above this layer. */

#endif
