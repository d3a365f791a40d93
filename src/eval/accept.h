/* The acceptance test (issue 8, docs/accept.md): "will this workload, in this format, fit and
 * perform at the largest input and the concurrency we will really run?"
 *
 * A sweep over batch sizes (the rows of `a` scaled: a batch B stacks B copies of each held-out
 * sample's m rows) and concurrency (N workers, one thread each, every one calling the backend's
 * run_case with its own buffers, woken together (one pool of threads for the whole test) so that they overlap). Per point:
 * the per-request latency pooled over the workers, the aggregate throughput, every memory view and
 * a memory budget (tensors x workers + workspace x workers + the measured baseline) set against
 * the measurement. The largest point is then repeated and judged: memory with headroom (against
 * the limit and against the run-to-run spread of the peak), p95 latency against a target, and the
 * outputs against the accuracy criteria, tile by tile against the held-out references.
 *
 * The library takes a workload already in memory (precis_workload_info/data) so that it can be
 * driven and tested without a dataset file; cmd_accept.c does the loading and the files. */
#ifndef PRECIS_ACCEPT_H
#define PRECIS_ACCEPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "numerics/criteria.h"
#include "data/dataset.h"
#include "numerics/recipe.h"
#include "report/results.h"
#include "base/status.h"

#define PRECIS_ACCEPT_FORMAT "precis-accept"
#define PRECIS_ACCEPT_FORMAT_VERSION 1
#define PRECIS_ACCEPT_MAX_SWEEP 32
/* The cuBLASLt workspace each cuda worker holds (issue 7: 32 MiB); the cpu backend has none. A
 * backend that reports `workspace_bytes` in a case's details overrides it. */
#define PRECIS_ACCEPT_CUDA_WORKSPACE_BYTES (32LL << 20)

typedef struct precis_accept_config {
  const precis_backend *backend;
  void *backend_ctx;
  precis_case_options case_options; /* timing of every point */
  const precis_recipe *recipes;
  size_t n_recipes;
  long long batches[PRECIS_ACCEPT_MAX_SWEEP]; /* row factors, strictly ascending, >= 1 */
  size_t n_batches;
  int concurrency[PRECIS_ACCEPT_MAX_SWEEP];   /* worker counts, strictly ascending, >= 1 */
  size_t n_concurrency;
  double latency_target_ms;      /* p95 per request at the acceptance point; NaN: not judged */
  double headroom;               /* fraction of the limit kept free, in [0, 1) */
  long long memory_limit_bytes;  /* > 0 */
  const char *memory_limit_source; /* how the limit was chosen, for the report */
  long long workspace_bytes;     /* per worker (see PRECIS_ACCEPT_CUDA_WORKSPACE_BYTES) */
  const precis_criteria *require; /* NULL: each recipe's default criteria */
  int repeats;                   /* runs of the acceptance point, >= 1 (the sweep's run is the first) */
  bool progress;                 /* one line per point on stderr */
} precis_accept_config;

/* Sets defaults: batches {1,2,4}, concurrency {1}, no latency target, headroom 10%, 3 repeats,
 * workspace 0, limit unset (0). The caller fills backend, recipes and the limit. */
void precis_accept_config_default(precis_accept_config *cfg);

/* One (recipe, batch, workers) measurement. Bytes are -1 where a view does not exist. */
typedef struct precis_accept_point {
  long long batch;    /* row factor */
  int workers;
  int repeat;         /* 0: the sweep's run; 1..: the extra runs of the acceptance point */
  long long rows;     /* rows of a per held-out sample at this point: m * batch */
  precis_row_status status;
  char *reason;       /* NULL when ok */
  /* Latency per request (per GEMM call), every worker's samples pooled. */
  long samples;
  double min_ms, median_ms, mean_ms, p95_ms, p99_ms, max_ms;
  double *samples_ms; /* pooled, in worker order (kept for the acceptance point's repeats) */
  size_t n_samples_ms;
  /* Sum over workers of 2*rows*n*k*batch / median of that worker (steady-state aggregate). */
  double throughput_tflops;
  double wall_ms;     /* from the first worker's start to the last worker's end */
  double overlap;     /* fraction of wall_ms during which every worker was running */
  /* Memory budget: predicted = baseline + workers * (tensor + workspace). */
  long long tensor_bytes;     /* per worker, precis_spec_tensor_bytes at this shape */
  long long workspace_bytes;  /* per worker */
  long long baseline_bytes;   /* cpu: resident set before the point; cuda: device_baseline */
  long long predicted_tracked_bytes;
  long long predicted_peak_bytes;
  /* Measured. */
  long long tracked_peak_bytes;   /* sum of the workers' tracked peaks */
  long long peak_bytes;           /* the view judged: host peak RSS (cpu) or device peak (cuda) */
  const char *peak_view;          /* "host_peak_rss" or "device_peak" */
  long long untracked_bytes;      /* peak - baseline - tracked */
  long long host_peak_rss_bytes;
  long long device_baseline_bytes;
  long long device_peak_bytes;
  bool meets_latency;             /* p95 <= target (false when no target) */
} precis_accept_point;

typedef struct precis_accept_recipe_result {
  char *recipe;
  char *spec; /* canonical */
  char *recipe_description;
  precis_accept_point *points; /* the sweep (batch-major, then workers), then the repeats */
  size_t n_points, cap_points;
  /* The acceptance point: the largest batch at the largest concurrency. */
  long long accept_batch;
  int accept_workers;
  int runs;                       /* runs of the acceptance point that completed */
  long long peak_max_bytes, peak_min_bytes, peak_spread_bytes;
  long long allowed_bytes;        /* (1 - headroom) * limit */
  long long headroom_bytes;       /* headroom * limit */
  double accept_p95_ms;           /* pooled over every run of the acceptance point */
  double accept_median_ms, accept_p99_ms;
  precis_criteria criteria;
  precis_metric_value error[PRECIS_METRIC_ALL];
  bool accuracy_ran;
  char *accuracy_detail;          /* the failing criterion, NULL when passing */
  bool fits, headroom_covers_spread, meets_latency, meets_accuracy;
  precis_verdict verdict;
  char **reasons;                 /* why it failed (empty when it passed) */
  size_t n_reasons;
  /* Per entry of config.concurrency: the largest batch in the sweep whose p95 meets the target
   * (-1: none does, or no target). */
  long long largest_batch_meeting_target[PRECIS_ACCEPT_MAX_SWEEP];
  precis_kv_list details;         /* from the backend, first worker of the acceptance point */
} precis_accept_recipe_result;

typedef struct precis_accept_result {
  precis_verdict verdict;
  char *tool_version;
  precis_kv_list environment;
  char *dataset_path;
  char *dataset_id;
  char *workload;
  long long m, n, k, batch;
  bool b_batched;
  precis_kv_list settings;
  long long batches[PRECIS_ACCEPT_MAX_SWEEP];
  size_t n_batches;
  int concurrency[PRECIS_ACCEPT_MAX_SWEEP];
  size_t n_concurrency;
  double latency_target_ms;
  double headroom;
  long long memory_limit_bytes;
  char *memory_limit_source;
  int repeats;
  char **criteria_text;           /* --require as given; empty: recipe defaults */
  size_t n_criteria_text;
  precis_accept_recipe_result *recipes;
  size_t n_recipes;
  bool complete;                  /* false when interrupted */
} precis_accept_result;

void precis_accept_result_init(precis_accept_result *r);
void precis_accept_result_free(precis_accept_result *r);
void precis_accept_point_free(precis_accept_point *p);

/* A workload whose rows are scaled: every held-out sample's m rows of `a` repeated `factor` times
 * (row i of the result is row i mod m), b shared with the source. c_ref and ab_abs are NULL: a
 * tile of the output is compared with the source's references (precis_accept_tile_metrics). With
 * with_calib, calib/a is tiled the same way (static int8 scales see the same distribution). */
typedef struct precis_accept_input {
  precis_workload_info info; /* strings borrowed from the source */
  precis_workload_data data; /* a and calib_a owned, b borrowed */
  long long factor;
} precis_accept_input;
precis_status precis_accept_input_build(const precis_workload_info *w, const precis_workload_data *d,
                                        long long factor, bool with_calib, precis_accept_input *out);
void precis_accept_input_free(precis_accept_input *in);

/* Metrics of an output of the scaled workload: each tile (factor per held-out sample, m*n values
 * each, exactly the stored sample's input) against that sample's c_ref and ab_abs; worst and mean
 * over every tile. c64 (out=fp64 recipes; c may then be NULL) is used instead of c when not NULL,
 * so that a float64 output is not judged through its float32 rounding. clipped_fraction NaN: not a
 * quantized recipe. */
precis_status precis_accept_tile_metrics(const precis_workload_info *w, const precis_workload_data *d, long long factor,
                                         const float *c, const double *c64, double clipped_fraction,
                                         precis_metric_value out[PRECIS_METRIC_ALL]);

/* The worker threads, created once for a whole acceptance test (as a server's workers are). */
typedef struct precis_accept_pool precis_accept_pool;
precis_status precis_accept_pool_create(int threads, precis_accept_pool **out);
void precis_accept_pool_destroy(precis_accept_pool *pool); /* NULL-safe; joins every thread */
int precis_accept_pool_size(const precis_accept_pool *pool);

/* Runs one point: the pool's first `workers` threads woken together, each calling run_case on `in`
 * (pool NULL: a pool of `workers` threads made for this point). Fills *point; with first_output,
 * worker 0's output is handed over (malloc'ed; first_output64 its float64 output, NULL unless
 * out=fp64), with first_details its details too. Returns an
 * error only when the workers cannot run; a case that fails is point->status/reason. */
precis_status precis_accept_run_point(const precis_accept_config *cfg, precis_accept_pool *pool,
                                      const precis_recipe *recipe, const precis_accept_input *in, int workers,
                                      precis_accept_point *point, float **first_output, double **first_output64,
                                      double *first_clipped, precis_kv_list *first_details);

/* The memory judgement of the acceptance point from the peaks of its runs: fits when the largest
 * peak <= (1 - headroom) * limit; the headroom covers the spread when headroom * limit >= the
 * peaks' max - min. Fills the recipe result's peak/allowed/headroom fields and flags. */
void precis_accept_judge_memory(const long long *peaks, size_t n_peaks, long long limit, double headroom,
                                precis_accept_recipe_result *rr);

/* The whole acceptance test on one workload; result->verdict PASS when every recipe passes.
 * Returns PRECIS_E_INTERRUPTED after SIGINT/SIGTERM (result incomplete), PRECIS_E_USAGE for a bad
 * configuration, errors for runtime failures that concern the whole run. */
precis_status precis_accept_run(const precis_accept_config *cfg, const precis_workload_info *w,
                                const precis_workload_data *d, precis_accept_result *result);

/* The default limit on the cpu backend: MemAvailable (/proc/meminfo) plus this process's resident
 * set, i.e. what the process could grow to now. */
precis_status precis_accept_host_memory_limit(long long *bytes);
/* "512M", "2GiB", "1048576": binary multiples (K, M, G, T, with optional "iB" or "B"). */
precis_status precis_accept_parse_bytes(const char *text, long long *bytes);
/* "1.50 GiB"; "n/a" for a negative count. */
void precis_accept_format_bytes(long long bytes, char *buf, size_t len);
/* The process's resident set now, from /proc/self/statm; -1 when unknown. */
long long precis_accept_current_rss_bytes(void);

/* Printers (accept_report.c, beside accept, since report/ sits below eval/). The JSON object is the
 * whole accept.json document; the Markdown and HTML functions write a section ("## Acceptance ...")
 * that can stand in accept.md/accept.html or be embedded into report.md/report.html. */
struct cJSON;
struct cJSON *precis_accept_to_json(const precis_accept_result *r);
void precis_accept_write_markdown_section(const precis_accept_result *r, FILE *out);
void precis_accept_write_html_section(const precis_accept_result *r, FILE *out);
/* The terminal summary: verdict, reasons, the acceptance point and the sweep table. */
void precis_accept_print_summary(const precis_accept_result *r, FILE *out);
/* accept.json, accept.md and accept.html into dir (created if needed), each written atomically. */
precis_status precis_accept_write_all(const precis_accept_result *r, const char *dir, bool force);

#endif
