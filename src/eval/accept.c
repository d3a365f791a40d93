/* The acceptance test: sweeps, the memory budget against measurement, and the verdict (accept.h,
 * docs/accept.md). */
#include "accept.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host_memory.h"
#include "numerics/metrics.h"
#include "timing.h"

void precis_accept_config_default(precis_accept_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  precis_case_options_default(&cfg->case_options);
  cfg->batches[0] = 1, cfg->batches[1] = 2, cfg->batches[2] = 4;
  cfg->n_batches = 3;
  cfg->concurrency[0] = 1;
  cfg->n_concurrency = 1;
  cfg->latency_target_ms = NAN;
  cfg->headroom = 0.10;
  cfg->memory_limit_bytes = 0;
  cfg->memory_limit_source = "";
  cfg->workspace_bytes = 0;
  cfg->repeats = 3;
}

void precis_accept_format_bytes(long long bytes, char *buf, size_t len) {
  if (bytes < 0) {
    snprintf(buf, len, "n/a");
    return;
  }
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) v /= 1024.0, u++;
  if (u == 0) snprintf(buf, len, "%lld B", bytes);
  else snprintf(buf, len, "%.2f %s", v, units[u]);
}

/* ---- results ---------------------------------------------------------------------------------- */

static void point_init(precis_accept_point *p) {
  memset(p, 0, sizeof *p);
  p->status = PRECIS_ROW_FAILED;
  p->min_ms = p->median_ms = p->mean_ms = p->p95_ms = p->p99_ms = p->max_ms = NAN;
  p->throughput_tflops = p->wall_ms = p->overlap = NAN;
  p->tensor_bytes = p->workspace_bytes = p->baseline_bytes = -1;
  p->predicted_tracked_bytes = p->predicted_peak_bytes = -1;
  p->tracked_peak_bytes = p->peak_bytes = p->untracked_bytes = -1;
  p->host_peak_rss_bytes = p->device_baseline_bytes = p->device_peak_bytes = -1;
  p->peak_view = "host_peak_rss";
}

void precis_accept_point_free(precis_accept_point *p) {
  free(p->reason);
  free(p->samples_ms);
  point_init(p);
}

static void recipe_result_init(precis_accept_recipe_result *rr) {
  memset(rr, 0, sizeof *rr);
  rr->peak_max_bytes = rr->peak_min_bytes = rr->peak_spread_bytes = -1;
  rr->allowed_bytes = rr->headroom_bytes = -1;
  rr->accept_p95_ms = rr->accept_median_ms = rr->accept_p99_ms = NAN;
  for (int i = 0; i < PRECIS_METRIC_ALL; i++) rr->error[i] = (precis_metric_value){NAN, NAN, false};
  for (int i = 0; i < PRECIS_ACCEPT_MAX_SWEEP; i++) rr->largest_batch_meeting_target[i] = -1;
  rr->verdict = PRECIS_VERDICT_NONE;
}

static void recipe_result_free(precis_accept_recipe_result *rr) {
  free(rr->recipe);
  free(rr->spec);
  free(rr->recipe_description);
  for (size_t i = 0; i < rr->n_points; i++) precis_accept_point_free(&rr->points[i]);
  free(rr->points);
  free(rr->accuracy_detail);
  for (size_t i = 0; i < rr->n_reasons; i++) free(rr->reasons[i]);
  free(rr->reasons);
  precis_kv_free(&rr->details);
  recipe_result_init(rr);
}

void precis_accept_result_init(precis_accept_result *r) {
  memset(r, 0, sizeof *r);
  r->verdict = PRECIS_VERDICT_NONE;
  r->latency_target_ms = NAN;
}

void precis_accept_result_free(precis_accept_result *r) {
  free(r->tool_version);
  precis_kv_free(&r->environment);
  free(r->dataset_path);
  free(r->dataset_id);
  free(r->workload);
  precis_kv_free(&r->settings);
  free(r->memory_limit_source);
  for (size_t i = 0; i < r->n_criteria_text; i++) free(r->criteria_text[i]);
  free(r->criteria_text);
  for (size_t i = 0; i < r->n_recipes; i++) recipe_result_free(&r->recipes[i]);
  free(r->recipes);
  precis_accept_result_init(r);
}

static precis_status add_point(precis_accept_recipe_result *rr, precis_accept_point *p) {
  if (rr->n_points == rr->cap_points) {
    size_t cap = rr->cap_points ? rr->cap_points * 2 : 8;
    precis_accept_point *grown = realloc(rr->points, cap * sizeof *grown);
    if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory recording an acceptance point");
    rr->points = grown;
    rr->cap_points = cap;
  }
  rr->points[rr->n_points++] = *p;
  point_init(p);
  return PRECIS_OK;
}

static void add_reason(precis_accept_recipe_result *rr, char *reason) {
  if (!reason) return;
  char **grown = realloc(rr->reasons, (rr->n_reasons + 1) * sizeof *grown);
  if (!grown) {
    free(reason);
    return;
  }
  rr->reasons = grown;
  rr->reasons[rr->n_reasons++] = reason;
}

/* ---- scaled inputs ---------------------------------------------------------------------------- */

static void *tile_rows_of(const void *src, size_t elem, long long samples, long long m, long long k, long long factor) {
  if (samples <= 0 || m <= 0 || k <= 0 || factor <= 0) return NULL;
  if ((uint64_t)samples * (uint64_t)m > SIZE_MAX / (uint64_t)k / (uint64_t)factor / elem) return NULL;
  size_t sample_bytes = (size_t)(m * k) * elem;
  char *out = malloc((size_t)samples * sample_bytes * (size_t)factor);
  if (!out) return NULL;
  for (size_t s = 0; s < (size_t)samples; s++)
    for (size_t t = 0; t < (size_t)factor; t++)
      memcpy(out + (s * (size_t)factor + t) * sample_bytes, (const char *)src + s * sample_bytes, sample_bytes);
  return out;
}

static float *tile_rows(const float *src, long long samples, long long m, long long k, long long factor) {
  return tile_rows_of(src, sizeof(float), samples, m, k, factor);
}

precis_status precis_accept_input_build(const precis_workload_info *w, const precis_workload_data *d,
                                        long long factor, bool with_calib, precis_accept_input *out) {
  memset(out, 0, sizeof *out);
  if (factor < 1) return precis_fail(PRECIS_E_USAGE, "batch factor %lld: expected an integer >= 1", factor);
  if (w->m <= 0 || w->n <= 0 || w->k <= 0 || w->batch <= 0 || !d->a || !d->b)
    return precis_fail(PRECIS_E_INPUT, "workload %s: expected positive m, n, k, batch and loaded a and b",
                       w->name ? w->name : "?");
  if (w->m > INT64_MAX / factor)
    return precis_fail(PRECIS_E_USAGE, "workload %s: m=%lld x batch %lld overflows", w->name, (long long)w->m, factor);
  out->info = *w;
  out->info.m = w->m * factor;
  out->factor = factor;
  out->data.b = d->b;
  out->data.b64 = d->b64;
  out->data.a = tile_rows(d->a, w->batch, w->m, w->k, factor);
  /* float64 inputs: the fp64 and Ozaki recipes read all 53 bits here too, as in precis run. */
  if (d->a64) out->data.a64 = tile_rows_of(d->a64, sizeof(double), w->batch, w->m, w->k, factor);
  if (!out->data.a || (d->a64 && !out->data.a64)) {
    free(out->data.a);
    free(out->data.a64);
    memset(&out->data, 0, sizeof out->data);
    return precis_fail(PRECIS_E_NOMEM, "workload %s: cannot allocate a at %lld x %lld rows (batch %lld)", w->name,
                       (long long)w->batch, (long long)(w->m * factor), factor);
  }
  out->info.calib_samples = 0;
  if (with_calib && d->calib_a && w->calib_samples > 0) {
    out->data.calib_a = tile_rows(d->calib_a, w->calib_samples, w->m, w->k, factor);
    if (!out->data.calib_a) {
      precis_accept_input_free(out);
      return precis_fail(PRECIS_E_NOMEM, "workload %s: cannot allocate calib/a at batch %lld", w->name, factor);
    }
    out->info.calib_samples = w->calib_samples;
  }
  return PRECIS_OK;
}

void precis_accept_input_free(precis_accept_input *in) {
  free(in->data.a);
  free(in->data.a64);
  free(in->data.calib_a);
  memset(in, 0, sizeof *in);
}

precis_status precis_accept_tile_metrics(const precis_workload_info *w, const precis_workload_data *d, long long factor,
                                         const float *c, const double *c64, double clipped_fraction,
                                         precis_metric_value out[PRECIS_METRIC_ALL]) {
  if (!d->c_ref || !d->ab_abs || (!c && !c64))
    return precis_fail(PRECIS_E_INPUT, "workload %s: the accuracy check needs c_ref, ab_abs and an output", w->name);
  size_t tile = (size_t)(w->m * w->n), tiles = (size_t)w->batch * (size_t)factor;
  precis_sample_metrics *samples = calloc(tiles, sizeof *samples);
  /* A logit workload is judged as run judges it (runner.c): also as the distribution each token's
   * logits give, so that a kl_mean or top1_agree gate of accept measures something. */
  const bool logits = w->output_kind && strcmp(w->output_kind, "logits") == 0;
  double *scratch = logits ? malloc(2 * (size_t)w->m * sizeof *scratch) : NULL;
  if (!samples || (logits && !scratch)) {
    free(samples);
    free(scratch);
    return precis_fail(PRECIS_E_NOMEM, "out of memory computing the acceptance point's metrics");
  }
  for (size_t s = 0; s < (size_t)w->batch; s++)
    for (size_t t = 0; t < (size_t)factor; t++) {
      const size_t at = (s * (size_t)factor + t) * tile;
      precis_metrics_sample_wide(c ? c + at : NULL, c64 ? c64 + at : NULL, d->c_ref + s * tile,
                                 d->c_ref_lo ? d->c_ref_lo + s * tile : NULL, d->ab_abs + s * tile, tile,
                                 &samples[s * (size_t)factor + t]);
      if (logits)
        precis_metrics_logits(c ? c + at : NULL, c64 ? c64 + at : NULL, d->c_ref + s * tile,
                              d->c_ref_lo ? d->c_ref_lo + s * tile : NULL, (size_t)w->m, (size_t)w->n, scratch,
                              &samples[s * (size_t)factor + t]);
    }
  precis_metrics_aggregate(samples, tiles, out);
  free(samples);
  free(scratch);
  if (!isnan(clipped_fraction)) out[PRECIS_METRIC_CLIPPED] = (precis_metric_value){clipped_fraction, clipped_fraction, true};
  return PRECIS_OK;
}

/* ---- host memory ------------------------------------------------------------------------------ */

long long precis_accept_current_rss_bytes(void) {
  FILE *fp = fopen("/proc/self/statm", "r");
  if (!fp) return -1;
  long long size = 0, resident = -1;
  int got = fscanf(fp, "%lld %lld", &size, &resident);
  fclose(fp);
  long page = sysconf(_SC_PAGESIZE);
  return got == 2 && resident >= 0 && page > 0 ? resident * (long long)page : -1;
}

precis_status precis_accept_host_memory_limit(long long *bytes) {
  *bytes = 0;
  FILE *fp = fopen("/proc/meminfo", "r");
  if (!fp) return precis_fail(PRECIS_E_RUNTIME, "/proc/meminfo: cannot open (%s); give --memory-limit", strerror(errno));
  char line[256];
  long long kib = -1;
  while (fgets(line, sizeof line, fp))
    if (strncmp(line, "MemAvailable:", 13) == 0) {
      kib = atoll(line + 13);
      break;
    }
  fclose(fp);
  if (kib <= 0) return precis_fail(PRECIS_E_RUNTIME, "/proc/meminfo: no MemAvailable line; give --memory-limit");
  long long rss = precis_accept_current_rss_bytes();
  *bytes = kib * 1024 + (rss > 0 ? rss : 0);
  return PRECIS_OK;
}

precis_status precis_accept_parse_bytes(const char *text, long long *bytes) {
  char *end = NULL;
  errno = 0;
  double v = text ? strtod(text, &end) : NAN;
  if (!text || end == text || errno || !(v > 0))
    return precis_fail(PRECIS_E_USAGE, "memory size \"%s\": expected a positive number of bytes, optionally with K, M, G or T",
                       text ? text : "");
  double mult = 1;
  switch (*end) {
  case 'k': case 'K': mult = 1024.0, end++; break;
  case 'm': case 'M': mult = 1024.0 * 1024, end++; break;
  case 'g': case 'G': mult = 1024.0 * 1024 * 1024, end++; break;
  case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024, end++; break;
  default: break;
  }
  if (mult > 1 && strcmp(end, "iB") == 0) end += 2;
  else if (strcmp(end, "B") == 0) end += 1;
  if (*end)
    return precis_fail(PRECIS_E_USAGE,
                       "memory size \"%s\": unexpected \"%s\" (expected bytes, or a number with K, M, G, T, KiB, MiB, ...)",
                       text, end);
  double total = v * mult;
  if (!(total >= 1) || total > 9.0e18)
    return precis_fail(PRECIS_E_USAGE, "memory size \"%s\": out of range", text);
  *bytes = (long long)total;
  return PRECIS_OK;
}

/* Samples the resident set every millisecond while a point runs: VmHWM is process-wide and every
 * cpu case resets it when it starts, so a worker that starts late could hide a peak reached by
 * another; the sampler sees it. */
typedef struct rss_sampler {
  pthread_t thread;
  atomic_bool stop;
  atomic_llong max_bytes;
  int fd;
  bool running;
} rss_sampler;

static long long statm_resident(int fd) {
  char buf[128];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long long size = 0, resident = -1;
  if (sscanf(buf, "%lld %lld", &size, &resident) != 2) return -1;
  return resident * (long long)sysconf(_SC_PAGESIZE);
}

static void *rss_sampler_main(void *arg) {
  rss_sampler *s = arg;
  const struct timespec period = {0, 1000000};
  while (!atomic_load(&s->stop)) {
    long long v = statm_resident(s->fd);
    if (v > atomic_load(&s->max_bytes)) atomic_store(&s->max_bytes, v);
    nanosleep(&period, NULL);
  }
  return NULL;
}

static void rss_sampler_start(rss_sampler *s) {
  memset(s, 0, sizeof *s);
  atomic_init(&s->stop, false);
  atomic_init(&s->max_bytes, -1);
  s->fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) return;
  atomic_store(&s->max_bytes, statm_resident(s->fd));
  s->running = pthread_create(&s->thread, NULL, rss_sampler_main, s) == 0;
  if (!s->running) close(s->fd), s->fd = -1;
}

static long long rss_sampler_stop(rss_sampler *s) {
  if (s->running) {
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    long long last = statm_resident(s->fd);
    if (last > atomic_load(&s->max_bytes)) atomic_store(&s->max_bytes, last);
    close(s->fd);
    s->running = false;
  }
  return atomic_load(&s->max_bytes);
}

/* ---- one point -------------------------------------------------------------------------------- */

/* The workers: a pool of threads that lives for the whole acceptance test, as a server's workers
 * would (new threads per point would each bring new allocator arenas and BLAS buffers, and the
 * process would grow from point to point). A point wakes the first N threads with one broadcast,
 * so that their cases start together and overlap, and waits until the N have finished. */
typedef struct accept_worker {
  const precis_accept_config *cfg;
  const precis_recipe *recipe;
  const precis_accept_input *in;
  precis_case_options options; /* the point's, with this worker's backend state */
  precis_case_output out;
  precis_status status;
  char error[512];
  double start_ms, end_ms;
} accept_worker;

typedef struct pool_thread {
  struct precis_accept_pool *pool;
  int index;
  pthread_t thread;
} pool_thread;

struct precis_accept_pool {
  pthread_mutex_t mutex;
  pthread_cond_t wake, done;
  unsigned long generation; /* one per point */
  bool stop;
  int active;               /* threads taking part in the current point */
  int finished;
  accept_worker *jobs;      /* the current point's workers, `active` of them */
  pool_thread *threads;
  int n_threads;
  /* The backend's per-worker state (worker_open), one per thread, opened once before the first
   * point that needs it and closed with the pool: worker i always runs on thread i with state i. */
  const precis_backend *backend;
  void *backend_ctx;
  void **backend_workers;
  int n_backend_workers;
};

static void run_worker(accept_worker *wk) {
  wk->start_ms = precis_now_ms();
  precis_clear_error();
  wk->status = wk->cfg->backend->run_case(wk->cfg->backend_ctx, &wk->recipe->spec, &wk->in->info, &wk->in->data,
                                          &wk->options, &wk->out);
  if (wk->status != PRECIS_OK)
    snprintf(wk->error, sizeof wk->error, "%s", precis_last_error()[0] ? precis_last_error() : precis_status_str(wk->status));
  wk->end_ms = precis_now_ms();
}

static void *pool_main(void *arg) {
  pool_thread *self = arg;
  precis_accept_pool *pool = self->pool;
  unsigned long seen = 0;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    while (!pool->stop && pool->generation == seen) pthread_cond_wait(&pool->wake, &pool->mutex);
    if (pool->stop) break;
    seen = pool->generation;
    if (self->index >= pool->active) continue;
    accept_worker *job = &pool->jobs[self->index];
    pthread_mutex_unlock(&pool->mutex);
    run_worker(job);
    pthread_mutex_lock(&pool->mutex);
    if (++pool->finished == pool->active) pthread_cond_signal(&pool->done);
  }
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

void precis_accept_pool_destroy(precis_accept_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mutex);
  pool->stop = true;
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->mutex);
  for (int i = 0; i < pool->n_threads; i++) pthread_join(pool->threads[i].thread, NULL);
  for (int i = 0; i < pool->n_backend_workers; i++)
    if (pool->backend->worker_close) pool->backend->worker_close(pool->backend_ctx, pool->backend_workers[i]);
  free(pool->backend_workers);
  pthread_cond_destroy(&pool->wake);
  pthread_cond_destroy(&pool->done);
  pthread_mutex_destroy(&pool->mutex);
  free(pool->threads);
  free(pool);
}

precis_status precis_accept_pool_create(int threads, precis_accept_pool **out) {
  *out = NULL;
  if (threads < 1 || threads > 1024) return precis_fail(PRECIS_E_USAGE, "worker pool of %d threads: expected 1..1024", threads);
  precis_accept_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return precis_fail(PRECIS_E_NOMEM, "out of memory creating %d workers", threads);
  pthread_mutex_init(&pool->mutex, NULL);
  pthread_cond_init(&pool->wake, NULL);
  pthread_cond_init(&pool->done, NULL);
  pool->threads = calloc((size_t)threads, sizeof *pool->threads);
  if (!pool->threads) {
    precis_accept_pool_destroy(pool);
    return precis_fail(PRECIS_E_NOMEM, "out of memory creating %d workers", threads);
  }
  for (int i = 0; i < threads; i++) {
    pool->threads[i].pool = pool;
    pool->threads[i].index = i;
    if (pthread_create(&pool->threads[i].thread, NULL, pool_main, &pool->threads[i]) != 0) {
      precis_accept_pool_destroy(pool); /* joins the n_threads already started */
      return precis_fail(PRECIS_E_RUNTIME, "could not start worker thread %d of %d", i + 1, threads);
    }
    pool->n_threads = i + 1;
  }
  *out = pool;
  return PRECIS_OK;
}

int precis_accept_pool_size(const precis_accept_pool *pool) { return pool ? pool->n_threads : 0; }

/* Opens the backend state of workers [0, workers) that the pool lacks; outside every timed
 * region. A pool serves one backend context. */
static precis_status pool_open_workers(precis_accept_pool *pool, const precis_backend *backend, void *ctx,
                                       int workers) {
  if (!backend->worker_open) return PRECIS_OK;
  if (pool->n_backend_workers > 0 && (pool->backend != backend || pool->backend_ctx != ctx))
    return precis_fail(PRECIS_E_USAGE, "accept: a worker pool serves one backend context");
  if (!pool->backend_workers) {
    pool->backend_workers = calloc((size_t)pool->n_threads, sizeof *pool->backend_workers);
    if (!pool->backend_workers) return precis_fail(PRECIS_E_NOMEM, "out of memory for %d workers' state", pool->n_threads);
  }
  pool->backend = backend;
  pool->backend_ctx = ctx;
  while (pool->n_backend_workers < workers) {
    precis_status st = backend->worker_open(ctx, pool->n_backend_workers, &pool->backend_workers[pool->n_backend_workers]);
    if (st != PRECIS_OK) return st;
    pool->n_backend_workers++;
  }
  return PRECIS_OK;
}

/* Runs jobs[0..workers) on the pool's first `workers` threads, all woken at once; returns when
 * every one has finished. */
static void pool_run(precis_accept_pool *pool, accept_worker *jobs, int workers) {
  pthread_mutex_lock(&pool->mutex);
  pool->jobs = jobs;
  pool->active = workers;
  pool->finished = 0;
  pool->generation++;
  pthread_cond_broadcast(&pool->wake);
  while (pool->finished < pool->active) pthread_cond_wait(&pool->done, &pool->mutex);
  pool->jobs = NULL;
  pool->active = 0;
  pthread_mutex_unlock(&pool->mutex);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* min, median, mean, p95, p99, max of values (unsorted, not modified). */
static bool latency_stats(const double *values, size_t n, double out[6]) {
  for (int i = 0; i < 6; i++) out[i] = NAN;
  if (n == 0) return true;
  double *sorted = malloc(n * sizeof *sorted);
  if (!sorted) return false;
  memcpy(sorted, values, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_double);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += sorted[i];
  out[0] = sorted[0];
  out[1] = precis_percentile_sorted(sorted, n, 50);
  out[2] = sum / (double)n;
  out[3] = precis_percentile_sorted(sorted, n, 95);
  out[4] = precis_percentile_sorted(sorted, n, 99);
  out[5] = sorted[n - 1];
  free(sorted);
  return true;
}

static long long workspace_of(const precis_accept_config *cfg, const precis_kv_list *details) {
  const char *reported = details ? precis_kv_get(details, "workspace_bytes") : NULL;
  if (reported) {
    char *end = NULL;
    long long v = strtoll(reported, &end, 10);
    if (end != reported && *end == '\0' && v >= 0) return v;
  }
  return cfg->workspace_bytes;
}

precis_status precis_accept_run_point(const precis_accept_config *cfg, precis_accept_pool *pool,
                                      const precis_recipe *recipe, const precis_accept_input *in, int workers,
                                      precis_accept_point *point, float **first_output, double **first_output64,
                                      double *first_clipped, precis_kv_list *first_details) {
  point_init(point);
  if (first_output) *first_output = NULL;
  if (first_output64) *first_output64 = NULL;
  if (first_clipped) *first_clipped = NAN;
  point->batch = in->factor;
  point->workers = workers;
  point->rows = in->info.m;
  if (workers < 1) return precis_fail(PRECIS_E_USAGE, "concurrency %d: expected at least 1 worker", workers);

  precis_status st = PRECIS_OK;
  precis_accept_pool *own_pool = NULL;
  accept_worker *wk = calloc((size_t)workers, sizeof *wk);
  rss_sampler sampler;
  memset(&sampler, 0, sizeof sampler);
  sampler.fd = -1;
  if (!wk) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory preparing %d workers", workers);
    goto done;
  }
  if (!pool) {
    st = precis_accept_pool_create(workers, &own_pool);
    if (st != PRECIS_OK) goto done;
    pool = own_pool;
  }
  if (pool->n_threads < workers) {
    st = precis_fail(PRECIS_E_USAGE, "a point of %d workers on a pool of %d threads", workers, pool->n_threads);
    goto done;
  }
  /* With several workers the spread rule is off: each samples for the whole time budget (or up to
   * max_samples), so that none finishes early and leaves the others running without contention. */
  precis_case_options options = cfg->case_options;
  if (workers > 1) options.target_rel_spread = 0;
  st = pool_open_workers(pool, cfg->backend, cfg->backend_ctx, workers);
  if (st != PRECIS_OK) goto done;
  for (int i = 0; i < workers; i++) {
    wk[i].options = options;
    wk[i].options.worker = cfg->backend->worker_open ? pool->backend_workers[i] : NULL;
    wk[i].cfg = cfg;
    wk[i].recipe = recipe;
    wk[i].in = in;
    precis_case_output_init(&wk[i].out);
  }

  /* The baseline is what the process holds before any worker allocates: the loaded dataset, the
   * scaled input, libraries, earlier points' freed-but-kept heap. */
#ifdef __GLIBC__
  /* Heap freed by earlier points stays resident until trimmed, and this point's allocations would
   * reuse it: the baseline would count it and the growth would not show. */
  malloc_trim(0);
#endif
  point->baseline_bytes = precis_accept_current_rss_bytes();
  precis_peak_rss_reset();
  rss_sampler_start(&sampler);
  pool_run(pool, wk, workers);
  long long sampled_peak = rss_sampler_stop(&sampler);
  long long hwm = precis_peak_rss_bytes();

  /* Status: the first worker whose case did not complete names the point's failure. */
  point->status = PRECIS_ROW_OK;
  for (int i = 0; i < workers; i++) {
    precis_row_status ws = wk[i].out.status;
    const char *why = wk[i].out.reason;
    if (wk[i].status != PRECIS_OK && ws == PRECIS_ROW_OK) ws = PRECIS_ROW_FAILED, why = wk[i].error;
    if (ws == PRECIS_ROW_OK && !wk[i].out.c) ws = PRECIS_ROW_FAILED, why = "the backend returned no output";
    if (ws != PRECIS_ROW_OK) {
      point->status = ws;
      point->reason = precis_asprintf("worker %d of %d: %s", i + 1, workers, why && why[0] ? why : "unknown failure");
      break;
    }
  }

  /* Latency: every worker's per-call samples, pooled. */
  size_t total = 0;
  for (int i = 0; i < workers; i++) total += wk[i].out.time.n_samples_ms;
  if (total) {
    point->samples_ms = malloc(total * sizeof *point->samples_ms);
    if (!point->samples_ms) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory pooling %zu latency samples", total);
      goto done;
    }
    for (int i = 0; i < workers; i++) {
      memcpy(point->samples_ms + point->n_samples_ms, wk[i].out.time.samples_ms,
             wk[i].out.time.n_samples_ms * sizeof(double));
      point->n_samples_ms += wk[i].out.time.n_samples_ms;
    }
  }
  double stats[6];
  if (!latency_stats(point->samples_ms, point->n_samples_ms, stats)) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory sorting latency samples");
    goto done;
  }
  point->samples = (long)point->n_samples_ms;
  point->min_ms = stats[0], point->median_ms = stats[1], point->mean_ms = stats[2];
  point->p95_ms = stats[3], point->p99_ms = stats[4], point->max_ms = stats[5];
  if (point->status == PRECIS_ROW_OK) {
    const precis_workload_info *w = &in->info;
    double flops = 2.0 * (double)w->m * (double)w->n * (double)w->k * (double)w->batch;
    double sum = 0;
    for (int i = 0; i < workers; i++)
      if (wk[i].out.time.median_ms > 0) sum += flops / (wk[i].out.time.median_ms * 1e-3) / 1e12;
    point->throughput_tflops = sum;
  }
  double first_start = wk[0].start_ms, last_start = wk[0].start_ms, first_end = wk[0].end_ms, last_end = wk[0].end_ms;
  for (int i = 1; i < workers; i++) {
    first_start = fmin(first_start, wk[i].start_ms), last_start = fmax(last_start, wk[i].start_ms);
    first_end = fmin(first_end, wk[i].end_ms), last_end = fmax(last_end, wk[i].end_ms);
  }
  point->wall_ms = last_end - first_start;
  point->overlap = point->wall_ms > 0 ? fmax(0.0, first_end - last_start) / point->wall_ms : 1.0;

  /* Memory views. */
  const precis_workload_info *w = &in->info;
  point->tensor_bytes = precis_spec_tensor_bytes(&recipe->spec, w->m, w->n, w->k, w->batch, w->b_batched);
  point->workspace_bytes = workspace_of(cfg, &wk[0].out.details);
  long long tracked = 0;
  long long device_baseline = -1, device_peak = -1, worker_rss = -1;
  for (int i = 0; i < workers; i++) {
    const precis_memory *m = &wk[i].out.memory;
    if (tracked >= 0) tracked = m->tracked_peak_bytes >= 0 ? tracked + m->tracked_peak_bytes : -1;
    if (m->device_baseline_bytes >= 0 && (device_baseline < 0 || m->device_baseline_bytes < device_baseline))
      device_baseline = m->device_baseline_bytes;
    if (m->device_peak_bytes > device_peak) device_peak = m->device_peak_bytes;
    if (m->host_peak_rss_bytes > worker_rss) worker_rss = m->host_peak_rss_bytes;
  }
  point->tracked_peak_bytes = tracked;
  long long rss_peak = hwm;
  if (sampled_peak > rss_peak) rss_peak = sampled_peak;
  if (worker_rss > rss_peak) rss_peak = worker_rss;
  point->host_peak_rss_bytes = rss_peak;
  point->device_baseline_bytes = device_baseline;
  point->device_peak_bytes = device_peak;
  if (device_peak >= 0) {
    /* cuda: device memory is what must fit; the baseline is the context and handles (the
     * earliest worker's view, before the others allocated, when they started together). */
    point->peak_view = "device_peak";
    point->peak_bytes = device_peak;
    point->baseline_bytes = device_baseline;
  } else {
    point->peak_view = "host_peak_rss";
    point->peak_bytes = rss_peak;
  }
  long long per_worker = point->tensor_bytes + point->workspace_bytes;
  point->predicted_tracked_bytes = per_worker * workers;
  point->predicted_peak_bytes = point->baseline_bytes >= 0 ? point->baseline_bytes + point->predicted_tracked_bytes : -1;
  if (point->peak_bytes >= 0 && point->baseline_bytes >= 0 && tracked >= 0)
    point->untracked_bytes = point->peak_bytes - point->baseline_bytes - tracked;
  point->meets_latency = point->status == PRECIS_ROW_OK && !isnan(cfg->latency_target_ms) &&
                         point->p95_ms <= cfg->latency_target_ms;

  if (point->status == PRECIS_ROW_OK) {
    if (first_output) {
      *first_output = wk[0].out.c;
      wk[0].out.c = NULL;
    }
    if (first_output64) {
      *first_output64 = wk[0].out.c64;
      wk[0].out.c64 = NULL;
    }
    if (first_clipped) *first_clipped = wk[0].out.clipped_fraction;
    if (first_details) {
      precis_kv_free(first_details);
      *first_details = wk[0].out.details;
      memset(&wk[0].out.details, 0, sizeof wk[0].out.details);
    }
  }

done:
  if (sampler.running) rss_sampler_stop(&sampler);
  if (wk)
    for (int i = 0; i < workers; i++) precis_case_output_free(&wk[i].out);
  free(wk);
  precis_accept_pool_destroy(own_pool);
  return st;
}

/* ---- judgement -------------------------------------------------------------------------------- */

void precis_accept_judge_memory(const long long *peaks, size_t n_peaks, long long limit, double headroom,
                                precis_accept_recipe_result *rr) {
  rr->allowed_bytes = (long long)floor((1.0 - headroom) * (double)limit);
  rr->headroom_bytes = limit - rr->allowed_bytes;
  rr->peak_max_bytes = rr->peak_min_bytes = rr->peak_spread_bytes = -1;
  rr->fits = rr->headroom_covers_spread = false;
  long long hi = -1, lo = -1;
  for (size_t i = 0; i < n_peaks; i++) {
    if (peaks[i] < 0) continue;
    if (hi < 0 || peaks[i] > hi) hi = peaks[i];
    if (lo < 0 || peaks[i] < lo) lo = peaks[i];
  }
  if (hi < 0) return;
  rr->peak_max_bytes = hi;
  rr->peak_min_bytes = lo;
  rr->peak_spread_bytes = hi - lo;
  rr->fits = hi <= rr->allowed_bytes;
  rr->headroom_covers_spread = rr->headroom_bytes >= rr->peak_spread_bytes;
}

static bool is_accept_point(const precis_accept_config *cfg, const precis_accept_point *p) {
  return p->batch == cfg->batches[cfg->n_batches - 1] && p->workers == cfg->concurrency[cfg->n_concurrency - 1];
}

static void judge_recipe(const precis_accept_config *cfg, precis_accept_recipe_result *rr) {
  char a[48], b[48], c[48];
  rr->accept_batch = cfg->batches[cfg->n_batches - 1];
  rr->accept_workers = cfg->concurrency[cfg->n_concurrency - 1];
  if (rr->verdict == PRECIS_VERDICT_FAIL) return; /* unsupported: already has its reason */

  long long peaks[PRECIS_ACCEPT_MAX_SWEEP * 4];
  size_t n_peaks = 0, n_samples = 0;
  const precis_accept_point *failed = NULL;
  for (size_t i = 0; i < rr->n_points; i++) {
    const precis_accept_point *p = &rr->points[i];
    if (!is_accept_point(cfg, p)) continue;
    if (p->status != PRECIS_ROW_OK) {
      if (!failed) failed = p;
      continue;
    }
    if (n_peaks < sizeof peaks / sizeof peaks[0]) peaks[n_peaks++] = p->peak_bytes;
    n_samples += p->n_samples_ms;
  }
  rr->runs = (int)n_peaks;
  precis_accept_judge_memory(peaks, n_peaks, cfg->memory_limit_bytes, cfg->headroom, rr);

  if (failed) {
    add_reason(rr, precis_asprintf("%s: the acceptance point (batch %lld, %d workers) did not complete: %s",
                                   failed->status == PRECIS_ROW_DOES_NOT_FIT ? "memory" : "run", rr->accept_batch,
                                   rr->accept_workers, failed->reason ? failed->reason : "unknown failure"));
    if (failed->status == PRECIS_ROW_DOES_NOT_FIT) rr->fits = false;
  }
  if (n_peaks > 0) {
    precis_accept_format_bytes(rr->peak_max_bytes, a, sizeof a);
    precis_accept_format_bytes(rr->allowed_bytes, b, sizeof b);
    precis_accept_format_bytes(cfg->memory_limit_bytes, c, sizeof c);
    if (rr->peak_max_bytes < 0)
      add_reason(rr, precis_asprintf("memory: no peak was measured at the acceptance point (the %s view is unavailable)",
                                     rr->points[0].peak_view));
    else if (!rr->fits)
      add_reason(rr, precis_asprintf("memory: peak %s (%lld B, %s, max of %d runs) exceeds %s = (1 - %.4g%% headroom) x "
                                     "limit %s (%s)",
                                     a, rr->peak_max_bytes, rr->points[0].peak_view, rr->runs, b, cfg->headroom * 100,
                                     c, cfg->memory_limit_source));
    else if (!rr->headroom_covers_spread) {
      precis_accept_format_bytes(rr->peak_spread_bytes, a, sizeof a);
      precis_accept_format_bytes(rr->headroom_bytes, b, sizeof b);
      add_reason(rr, precis_asprintf("memory: the peak varied by %s across %d runs, more than the headroom of %s: the "
                                     "margin is within run-to-run noise (raise --headroom)",
                                     a, rr->runs, b));
    }
  }

  /* Latency at the acceptance point, every run pooled. */
  if (n_samples) {
    double *pooled = malloc(n_samples * sizeof *pooled);
    size_t at = 0;
    for (size_t i = 0; pooled && i < rr->n_points; i++) {
      const precis_accept_point *p = &rr->points[i];
      if (!is_accept_point(cfg, p) || p->status != PRECIS_ROW_OK) continue;
      memcpy(pooled + at, p->samples_ms, p->n_samples_ms * sizeof *pooled);
      at += p->n_samples_ms;
    }
    double stats[6];
    if (pooled && latency_stats(pooled, at, stats)) {
      rr->accept_median_ms = stats[1];
      rr->accept_p95_ms = stats[3];
      rr->accept_p99_ms = stats[4];
    }
    free(pooled);
  }
  /* Largest batch meeting the latency target, per concurrency: the sweep's runs, and for the
   * acceptance point the p95 pooled over all its runs (the figure the verdict uses). */
  for (size_t ci = 0; ci < cfg->n_concurrency; ci++) {
    rr->largest_batch_meeting_target[ci] = -1;
    for (size_t i = 0; i < rr->n_points; i++) {
      const precis_accept_point *p = &rr->points[i];
      bool meets = is_accept_point(cfg, p) ? p->status == PRECIS_ROW_OK && !isnan(cfg->latency_target_ms) &&
                                                 rr->accept_p95_ms <= cfg->latency_target_ms
                                           : p->meets_latency;
      if (p->repeat == 0 && p->workers == cfg->concurrency[ci] && meets && p->batch > rr->largest_batch_meeting_target[ci])
        rr->largest_batch_meeting_target[ci] = p->batch;
    }
  }
  if (isnan(cfg->latency_target_ms)) rr->meets_latency = n_peaks > 0;
  else {
    rr->meets_latency = n_peaks > 0 && rr->accept_p95_ms <= cfg->latency_target_ms;
    if (n_peaks > 0 && !rr->meets_latency)
      add_reason(rr, precis_asprintf("latency: p95 %.4g ms per request at batch %lld with %d workers exceeds the target "
                                     "%.4g ms (largest batch meeting it at this concurrency: %s)",
                                     rr->accept_p95_ms, rr->accept_batch, rr->accept_workers, cfg->latency_target_ms,
                                     rr->largest_batch_meeting_target[cfg->n_concurrency - 1] > 0
                                         ? (snprintf(a, sizeof a, "%lld",
                                                     rr->largest_batch_meeting_target[cfg->n_concurrency - 1]),
                                            a)
                                         : "none in the sweep"));
  }

  if (!rr->accuracy_ran) {
    rr->meets_accuracy = false;
    if (!failed) add_reason(rr, precis_strdup("accuracy: the acceptance point's output could not be checked"));
  } else {
    size_t failed_index = 0;
    double margin = 0;
    rr->meets_accuracy = precis_criteria_check(&rr->criteria, rr->error, &failed_index, &margin);
    if (!rr->meets_accuracy) {
      const precis_criterion *crit = &rr->criteria.items[failed_index];
      char text[96];
      precis_criterion_format(crit, text, sizeof text);
      const precis_metric_value *v = &rr->error[crit->metric];
      rr->accuracy_detail =
          v->present ? precis_asprintf("%s=%.4g fails %s (%.3gx the limit)", precis_metric_get(crit->metric)->key,
                                       v->worst, text, margin)
                     : precis_asprintf("%s is null, fails %s", precis_metric_get(crit->metric)->key, text);
      add_reason(rr, precis_asprintf("accuracy: %s (worst over every held-out tile at batch %lld)",
                                     rr->accuracy_detail ? rr->accuracy_detail : "criteria not met", rr->accept_batch));
    }
  }
  rr->verdict = rr->n_reasons == 0 && rr->fits && rr->headroom_covers_spread && rr->meets_latency && rr->meets_accuracy
                    ? PRECIS_VERDICT_PASS
                    : PRECIS_VERDICT_FAIL;
  if (rr->verdict == PRECIS_VERDICT_FAIL && rr->n_reasons == 0)
    add_reason(rr, precis_strdup("the acceptance point produced no measurement"));
}

/* ---- the whole test --------------------------------------------------------------------------- */

static precis_status check_config(const precis_accept_config *cfg) {
  if (!cfg->backend) return precis_fail(PRECIS_E_USAGE, "accept: no backend");
  if (cfg->n_recipes == 0) return precis_fail(PRECIS_E_USAGE, "accept: no recipe to evaluate");
  if (cfg->n_batches == 0 || cfg->n_batches > PRECIS_ACCEPT_MAX_SWEEP)
    return precis_fail(PRECIS_E_USAGE, "accept: expected 1 to %d batch sizes", PRECIS_ACCEPT_MAX_SWEEP);
  if (cfg->n_concurrency == 0 || cfg->n_concurrency > PRECIS_ACCEPT_MAX_SWEEP)
    return precis_fail(PRECIS_E_USAGE, "accept: expected 1 to %d concurrency levels", PRECIS_ACCEPT_MAX_SWEEP);
  for (size_t i = 0; i < cfg->n_batches; i++)
    if (cfg->batches[i] < 1 || (i && cfg->batches[i] <= cfg->batches[i - 1]))
      return precis_fail(PRECIS_E_USAGE, "accept: batch sizes must be >= 1 and strictly ascending (got %lld after %lld)",
                         cfg->batches[i], i ? cfg->batches[i - 1] : 0);
  for (size_t i = 0; i < cfg->n_concurrency; i++)
    if (cfg->concurrency[i] < 1 || cfg->concurrency[i] > 1024 || (i && cfg->concurrency[i] <= cfg->concurrency[i - 1]))
      return precis_fail(PRECIS_E_USAGE, "accept: concurrency levels must be in [1, 1024] and strictly ascending");
  if (!(cfg->headroom >= 0 && cfg->headroom < 1))
    return precis_fail(PRECIS_E_USAGE, "accept: headroom %g: expected a fraction in [0, 1)", cfg->headroom);
  if (cfg->memory_limit_bytes <= 0) return precis_fail(PRECIS_E_USAGE, "accept: no memory limit to judge against");
  if (!isnan(cfg->latency_target_ms) && !(cfg->latency_target_ms > 0))
    return precis_fail(PRECIS_E_USAGE, "accept: latency target %g ms: expected a positive number", cfg->latency_target_ms);
  if (cfg->repeats < 1 || cfg->repeats > 100) return precis_fail(PRECIS_E_USAGE, "accept: repeats %d: expected 1..100", cfg->repeats);
  return PRECIS_OK;
}

static void progress_line(const precis_accept_config *cfg, const precis_accept_recipe_result *rr,
                          const precis_accept_point *p) {
  if (!cfg->progress) return;
  char peak[48];
  precis_accept_format_bytes(p->peak_bytes, peak, sizeof peak);
  if (p->status != PRECIS_ROW_OK)
    fprintf(stderr, "[accept] %s batch %lld x %d workers%s: %s: %s\n", rr->recipe, p->batch, p->workers,
            p->repeat ? " (repeat)" : "", precis_row_status_str(p->status), p->reason ? p->reason : "");
  else
    fprintf(stderr, "[accept] %s batch %lld x %d workers%s: p95 %.4g ms, %.4g TFLOP/s, peak %s (%s)\n", rr->recipe,
            p->batch, p->workers, p->repeat ? " (repeat)" : "", p->p95_ms, p->throughput_tflops, peak, p->peak_view);
  fflush(stderr);
}

/* One point of one recipe; the acceptance point's first run also checks the outputs. */
static precis_status measure(const precis_accept_config *cfg, precis_accept_pool *pool, const precis_recipe *recipe,
                             const precis_accept_input *in,
                             int workers, int repeat, bool check_accuracy, const precis_workload_info *w,
                             const precis_workload_data *d, precis_accept_recipe_result *rr) {
  precis_accept_point p;
  float *output = NULL;
  double *output64 = NULL; /* out=fp64: judged in float64, not through its float32 rounding */
  double clipped = NAN;
  precis_status st = precis_accept_run_point(cfg, pool, recipe, in, workers, &p, check_accuracy ? &output : NULL,
                                             check_accuracy ? &output64 : NULL, check_accuracy ? &clipped : NULL,
                                             check_accuracy ? &rr->details : NULL);
  if (st != PRECIS_OK) {
    precis_accept_point_free(&p);
    return st;
  }
  p.repeat = repeat;
  if (check_accuracy && output) {
    st = precis_accept_tile_metrics(w, d, in->factor, output, output64, clipped, rr->error);
    free(output);
    free(output64);
    if (st != PRECIS_OK) {
      precis_accept_point_free(&p);
      return st;
    }
    rr->accuracy_ran = true;
  }
  progress_line(cfg, rr, &p);
  st = add_point(rr, &p);
  if (st != PRECIS_OK) precis_accept_point_free(&p);
  return st;
}

precis_status precis_accept_run(const precis_accept_config *cfg, const precis_workload_info *w,
                                const precis_workload_data *d, precis_accept_result *result) {
  precis_status st = check_config(cfg);
  if (st != PRECIS_OK) return st;
  if (!d->c_ref || !d->ab_abs)
    return precis_fail(PRECIS_E_INPUT, "workload %s: c_ref and ab_abs are needed for the accuracy check", w->name);
  result->workload = precis_strdup(w->name);
  result->m = w->m, result->n = w->n, result->k = w->k, result->batch = w->batch;
  result->b_batched = w->b_batched;
  memcpy(result->batches, cfg->batches, sizeof result->batches);
  result->n_batches = cfg->n_batches;
  memcpy(result->concurrency, cfg->concurrency, sizeof result->concurrency);
  result->n_concurrency = cfg->n_concurrency;
  result->latency_target_ms = cfg->latency_target_ms;
  result->headroom = cfg->headroom;
  result->memory_limit_bytes = cfg->memory_limit_bytes;
  result->memory_limit_source = precis_strdup(cfg->memory_limit_source);
  result->repeats = cfg->repeats;
  result->complete = false;
  result->recipes = calloc(cfg->n_recipes, sizeof *result->recipes);
  if (!result->recipes) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  result->n_recipes = cfg->n_recipes;

  bool *runnable = calloc(cfg->n_recipes, sizeof *runnable);
  if (!runnable) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  bool static_scales = false;
  for (size_t ri = 0; ri < cfg->n_recipes; ri++) {
    precis_accept_recipe_result *rr = &result->recipes[ri];
    recipe_result_init(rr);
    const precis_recipe *recipe = &cfg->recipes[ri];
    rr->recipe = precis_strdup(recipe->name);
    rr->spec = precis_strdup(recipe->canonical);
    rr->recipe_description = precis_strdup(recipe->description);
    static_scales = static_scales || recipe->spec.scale != PRECIS_SCALE_DYNAMIC;
    if (cfg->require) rr->criteria = *cfg->require;
    else precis_default_criteria(&recipe->spec, w->k, &rr->criteria);
    char reason[512] = "";
    runnable[ri] = cfg->backend->supports(cfg->backend_ctx, &recipe->spec, reason, sizeof reason);
    if (!runnable[ri]) {
      rr->verdict = PRECIS_VERDICT_FAIL;
      add_reason(rr, precis_asprintf("unsupported on the %s backend: %s", cfg->backend->name, reason));
    }
  }

  precis_accept_input in;
  memset(&in, 0, sizeof in);
  precis_accept_pool *pool = NULL;
  st = precis_accept_pool_create(cfg->concurrency[cfg->n_concurrency - 1], &pool);
  if (st != PRECIS_OK) goto done;
  for (size_t bi = 0; bi < cfg->n_batches && !precis_interrupt_signal; bi++) {
    st = precis_accept_input_build(w, d, cfg->batches[bi], static_scales, &in);
    if (st != PRECIS_OK) goto done;
    bool last_batch = bi + 1 == cfg->n_batches;
    for (size_t ci = 0; ci < cfg->n_concurrency && !precis_interrupt_signal; ci++) {
      bool accept_point = last_batch && ci + 1 == cfg->n_concurrency;
      for (size_t ri = 0; ri < cfg->n_recipes && !precis_interrupt_signal; ri++) {
        if (!runnable[ri]) continue;
        st = measure(cfg, pool, &cfg->recipes[ri], &in, cfg->concurrency[ci], 0, accept_point, w, d,
                     &result->recipes[ri]);
        if (st != PRECIS_OK) goto done;
      }
    }
    /* The extra runs of the acceptance point, for the peak's run-to-run spread; one recipe's runs
     * back to back, so that they see the same history of the heap. */
    for (size_t ri = 0; last_batch && ri < cfg->n_recipes && !precis_interrupt_signal; ri++)
      for (int rep = 1; rep < cfg->repeats && !precis_interrupt_signal; rep++) {
        if (!runnable[ri]) continue;
        st = measure(cfg, pool, &cfg->recipes[ri], &in, cfg->concurrency[cfg->n_concurrency - 1], rep,
                     false, w, d, &result->recipes[ri]);
        if (st != PRECIS_OK) goto done;
      }
    precis_accept_input_free(&in);
  }
  if (precis_interrupt_signal) {
    st = precis_fail(PRECIS_E_INTERRUPTED, "interrupted by signal %d", precis_interrupt_signal);
    goto done;
  }
  result->complete = true;
  bool all_pass = true;
  for (size_t ri = 0; ri < cfg->n_recipes; ri++) {
    judge_recipe(cfg, &result->recipes[ri]);
    all_pass = all_pass && result->recipes[ri].verdict == PRECIS_VERDICT_PASS;
  }
  result->verdict = all_pass ? PRECIS_VERDICT_PASS : PRECIS_VERDICT_FAIL;

done:
  free(runnable);
  precis_accept_pool_destroy(pool);
  precis_accept_input_free(&in);
  return st;
}
