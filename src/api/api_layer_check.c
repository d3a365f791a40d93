/* libprecis: one layer's rows of `precis run` from inputs at hand (include/precis/layer_check.h).
 * Nothing numeric is computed here: the reference is data/generate.c's (what import stores), the
 * isolated output the cpu backend's (precis_cpu_emulate, what a run evaluates), each sample's
 * metrics the runner's (precis_case_sample_metrics), the row's aggregate, criteria and verdict the
 * runner's too. So the row equals the one `precis run --backend cpu` writes for the dataset
 * `precis import --model --activations` makes of the same inputs, bit for bit in every metric. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/status.h"
#include "data/dataset.h"
#include "data/generate.h"
#include "eval/backend.h"
#include "eval/host_memory.h"
#include "eval/runner.h"
#include "numerics/criteria.h"
#include "numerics/metrics.h"
#include "numerics/recipe.h"
#include "numerics/target.h"
#include "precis/layer_check.h"
#include "report/report.h"

/* The reference's float64 copies of a and b (data/generate.c: 8*(256*k + k*min(n, 4096)) bytes) are
 * kept for the next check (of a layer that is not large) when at most this large: fresh, they cost a
 * page fault per page on first touch in every check (a model's consecutive layers have the same few
 * shapes; on a 135M model that was 2.5 % of a verify's CPU time). Larger ones go back after each
 * check, as before. */
#define KEEP_REFERENCE_BYTES ((size_t)32 << 20)

/* The per-sample metrics of one output, grown as samples are added. */
typedef struct sample_list {
  precis_sample_metrics *items;
  size_t count, capacity;
} sample_list;

struct precis_layer_check {
  precis_recipe recipe;
  char *layer;
  int64_t k, n;
  int64_t m_rows; /* m of the samples added (0 before the first) */
  bool logits, isolated;
  sample_list iso, other;
  double clipped, inputs; /* clipped inputs over every add (the fraction's numerator and denominator) */
  double clipped_fraction; /* of the one add when there was one, as a run computes it */
  size_t adds;
  precis_kv_list details;
  precis_row_status status;
  char *reason;
};

static precis_status list_grow(sample_list *list, size_t more) {
  if (list->count + more <= list->capacity) return PRECIS_OK;
  size_t cap = list->capacity ? list->capacity : 16;
  while (cap < list->count + more) cap *= 2;
  precis_sample_metrics *grown = realloc(list->items, cap * sizeof *grown);
  if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory for per-sample metrics");
  list->items = grown;
  list->capacity = cap;
  return PRECIS_OK;
}

precis_status precis_layer_check_open(const char *recipe, const char *layer, int64_t k, int64_t n, int logits, int isolated,
                                      precis_layer_check **out) {
  *out = NULL;
  if (!recipe || !layer) return precis_fail(PRECIS_E_USAGE, "precis_layer_check_open: recipe and layer are required");
  if (k < 1 || n < 1 || k > INT32_MAX || n > INT32_MAX)
    return precis_fail(PRECIS_E_USAGE, "layer %s: k=%lld, n=%lld: each must be in 1 .. 2^31-1", layer, (long long)k,
                       (long long)n);
  precis_layer_check *c = calloc(1, sizeof *c);
  if (!c) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_status st = precis_recipe_parse(recipe, &c->recipe);
  if (st != PRECIS_OK) goto fail;
  c->layer = precis_strdup(layer);
  if (!c->layer) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto fail;
  }
  c->k = k, c->n = n;
  c->logits = logits != 0;
  c->isolated = isolated != 0;
  c->status = PRECIS_ROW_OK;
  *out = c;
  return PRECIS_OK;
fail:
  precis_layer_check_free(c);
  return st;
}

void precis_layer_check_free(precis_layer_check *c) {
  if (!c) return;
  free(c->layer);
  free(c->iso.items);
  free(c->other.items);
  precis_kv_free(&c->details);
  free(c->reason);
  free(c);
}

/* Samples per piece of the reference: whole blocks of PRECIS_REFERENCE_BLOCK_ROWS rows, so that each
 * dgemm call covers the rows a computation of every sample at once would give it (OpenBLAS's
 * result for an element can depend on the call's shape; data/generate.c). */
static int64_t reference_piece(int64_t m, int64_t samples) {
  int64_t block = PRECIS_REFERENCE_BLOCK_ROWS, a = m, b = block;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  int64_t piece = block / a; /* block / gcd(m, block): piece * m is a multiple of the block */
  return piece < samples ? piece : samples;
}

static precis_status layer_check_add(precis_layer_check *c, const float *a, int64_t samples, int64_t m, const float *b,
                                     bool b_nk, int b_batched, const float *other, const float *calib_a,
                                     int64_t calib_samples);

precis_status precis_layer_check_add(precis_layer_check *c, const float *a, int64_t samples, int64_t m, const float *b,
                                     const float *other) {
  return layer_check_add(c, a, samples, m, b, false, 0, other, NULL, 0);
}

precis_status precis_layer_check_add_weights(precis_layer_check *c, const float *a, int64_t samples, int64_t m,
                                             const float *w, const float *other) {
  return layer_check_add(c, a, samples, m, w, true, 0, other, NULL, 0);
}

precis_status precis_layer_check_add_batched(precis_layer_check *c, const float *a, int64_t samples, int64_t m,
                                             const float *b, int b_batched, const float *other, const float *calib_a,
                                             int64_t calib_samples) {
  return layer_check_add(c, a, samples, m, b, false, b_batched, other, calib_a, calib_samples);
}

/* b is [k, n] (or [samples, k, n] when b_batched), or its transpose w [n, k] when b_nk. */
static precis_status layer_check_add(precis_layer_check *c, const float *a, int64_t samples, int64_t m, const float *b,
                                     bool b_nk, int b_batched, const float *other, const float *calib_a,
                                     int64_t calib_samples) {
  if (!c || !a || !b) return precis_fail(PRECIS_E_USAGE, "precis_layer_check_add: no check, no inputs or no weights");
  if (c->isolated && c->recipe.spec.scale != PRECIS_SCALE_DYNAMIC && (!calib_a || calib_samples < 1))
    return precis_fail(PRECIS_E_USAGE, "layer %s: %s takes A's scale from calibration inputs, which verify does not have",
                       c->layer, c->recipe.name);
  if (samples < 1 || m < 1 || (uint64_t)samples * (uint64_t)m > INT32_MAX)
    return precis_fail(PRECIS_E_USAGE, "layer %s: samples=%lld, m=%lld: each at least 1, samples*m below 2^31", c->layer,
                       (long long)samples, (long long)m);
  if (c->m_rows && m != c->m_rows)
    return precis_fail(PRECIS_E_USAGE, "layer %s: samples of %lld rows after samples of %lld: every sample of a row has the "
                                       "same rows", c->layer, (long long)m, (long long)c->m_rows);
  c->m_rows = m;
  precis_status st = PRECIS_OK;
  const bool large = c->logits || (double)c->k * (double)c->n * 4.0 >= (double)PRECIS_LARGE_B_BYTES;
  precis_case_output out;
  precis_case_output_init(&out);
  double *c_ref = NULL, *ab_abs = NULL;
  static char kind[] = "gemm", empty[] = "", precision[] = "float64", logits_kind[] = "logits";
  precis_workload_info w;
  memset(&w, 0, sizeof w);
  w.name = c->layer;
  w.layer = c->layer;
  w.kind = kind;
  w.description = w.a_dist = w.b_dist = w.reference = empty;
  w.reference_precision = precision;
  w.reference_error_bound = NAN;
  w.output_kind = c->logits ? logits_kind : NULL;
  w.m = m, w.n = c->n, w.k = c->k, w.batch = samples;
  w.b_batched = b_batched != 0;
  precis_workload_data d;
  memset(&d, 0, sizeof d);
  d.a = (float *)(uintptr_t)a;
  d.b = (float *)(uintptr_t)b;
  d.b_nk = b_nk;
  if (calib_a && calib_samples > 0) {
    w.calib_samples = calib_samples;
    d.calib_a = (float *)(uintptr_t)calib_a;
  }

  if (c->isolated && c->status == PRECIS_ROW_OK) {
    precis_clear_error();
    if ((st = precis_cpu_emulate(&c->recipe.spec, &w, &d, &out)) != PRECIS_OK) goto done;
    if (out.status != PRECIS_ROW_OK || !out.c) {
      /* Unsupported or failed: the row says so, as a run's would; no metrics. */
      c->status = out.status == PRECIS_ROW_OK ? PRECIS_ROW_FAILED : out.status;
      free(c->reason);
      c->reason = precis_strdup(out.reason[0] ? out.reason : "the backend returned no output");
    } else {
      if (c->adds == 0) {
        precis_kv_free(&c->details);
        c->details = out.details;
        memset(&out.details, 0, sizeof out.details);
      }
      const double count = (double)samples * (double)m * (double)c->k + (b_batched ? (double)samples : 1.0) * (double)c->k * (double)c->n;
      c->clipped_fraction = out.clipped_fraction;
      if (!isnan(out.clipped_fraction)) {
        c->clipped += out.clipped_fraction * count;
        c->inputs += count;
      }
    }
  }
  /* The emulation's operand copies went to the cpu backend's cache of freed blocks (eval/host_memory.c);
   * a head's (its B as integers or rounded values: k*n*4 bytes) would sit beside c_ref and ab_abs below,
   * and no later layer has its shape. Smaller layers keep them: the next layer of the same shape
   * reuses them without page faults. */
  if (large) precis_tracked_cache_release();
  const bool iso = c->isolated && c->status == PRECIS_ROW_OK;
  if (!iso && !other) goto done;
  if ((iso && (st = list_grow(&c->iso, (size_t)samples)) != PRECIS_OK) ||
      (other && (st = list_grow(&c->other, (size_t)samples)) != PRECIS_OK))
    goto done;
  const int64_t piece = reference_piece(m, samples);
  const size_t piece_c = (size_t)piece * (size_t)m * (size_t)c->n, per_sample_a = (size_t)m * (size_t)c->k,
               per_sample_c = (size_t)m * (size_t)c->n;
  c_ref = malloc(piece_c * sizeof *c_ref);
  ab_abs = malloc(piece_c * sizeof *ab_abs);
  if (!c_ref || !ab_abs) {
    st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of host memory for the reference of %lld samples (%.3g GiB)", c->layer,
                     (long long)piece, 16.0 * (double)piece_c / 1073741824.0);
    goto done;
  }
  for (int64_t s0 = 0; s0 < samples && !precis_interrupt_signal; s0 += piece) {
    const int64_t here = samples - s0 < piece ? samples - s0 : piece;
    const float *b_here = b_batched ? b + (size_t)s0 * (size_t)c->k * (size_t)c->n : b;
    if ((st = b_nk ? precis_reference_compute_nk(a + (size_t)s0 * per_sample_a, b, here, m, c->n, c->k, c_ref, ab_abs)
                   : precis_reference_compute(a + (size_t)s0 * per_sample_a, b_here, here, m, c->n, c->k, b_batched != 0,
                                              c_ref, ab_abs)) != PRECIS_OK) {
      precis_error_prefix("layer %s", c->layer);
      goto done;
    }
    precis_workload_info wp = w;
    wp.batch = here;
    precis_workload_data dp = d;
    dp.a = (float *)(uintptr_t)(a + (size_t)s0 * per_sample_a);
    dp.b = (float *)(uintptr_t)b_here;
    dp.c_ref = c_ref;
    dp.ab_abs = ab_abs;
    if (iso && (st = precis_case_sample_metrics(&wp, &dp, out.c + (size_t)s0 * per_sample_c,
                                                out.c64 ? out.c64 + (size_t)s0 * per_sample_c : NULL,
                                                c->iso.items + c->iso.count + s0)) != PRECIS_OK)
      goto done;
    if (other && (st = precis_case_sample_metrics(&wp, &dp, other + (size_t)s0 * per_sample_c, NULL,
                                                  c->other.items + c->other.count + s0)) != PRECIS_OK)
      goto done;
  }
  if (precis_interrupt_signal) {
    st = precis_fail(PRECIS_E_INTERRUPTED, "layer %s: interrupted by signal %d", c->layer, precis_interrupt_signal);
    goto done;
  }
  if (iso) c->iso.count += (size_t)samples;
  if (other) c->other.count += (size_t)samples;
  c->adds++;
done:
  /* A head's (or any large layer's) copies go, as its cached blocks: no later layer has its shape.
   * precis_release_memory frees what stays. */
  if (large) {
    precis_reference_release();
  } else {
    precis_reference_trim(KEEP_REFERENCE_BYTES);
  }
  free(c_ref);
  free(ab_abs);
  precis_case_output_free(&out);
  return st;
}

/* A row as a run starts one (runner.c's precis_case_row) for this layer and recipe. */
static precis_status start_row(const precis_layer_check *c, size_t samples, int64_t m, precis_row *row) {
  precis_row_init(row);
  char host[256];
  if (gethostname(host, sizeof host) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  row->workload = precis_strdup(c->layer);
  row->layer = precis_strdup(c->layer);
  row->description = precis_asprintf("linear layer %s on the reference model's inputs (verify, computed in its reference pass)",
                                     c->layer);
  row->recipe = precis_strdup(c->recipe.name);
  row->spec = precis_strdup(c->recipe.canonical);
  row->recipe_description = precis_strdup(c->recipe.description);
  row->m = m, row->n = c->n, row->k = c->k, row->batch = (long long)samples;
  row->host = precis_strdup(host);
  row->target = precis_strdup(precis_target_name(PRECIS_TARGET_CPU_DEFAULT));
  row->part = 0;
  row->rank = -1;
  row->device = -1;
  if (!row->workload || !row->layer || !row->description || !row->recipe || !row->spec || !row->recipe_description ||
      !row->host || !row->target)
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  return PRECIS_OK;
}

static precis_status finish_row(const precis_layer_check *c, const sample_list *list, bool isolated, int64_t m, char **json) {
  precis_row row;
  precis_status st = start_row(c, list->count, m, &row);
  if (st != PRECIS_OK) goto done;
  row.status = isolated ? c->status : PRECIS_ROW_OK;
  if (row.status != PRECIS_ROW_OK) {
    row.reason = precis_strdup(c->reason ? c->reason : "failed");
  } else {
    precis_metrics_aggregate(list->items, list->count, row.error);
    if (isolated) {
      const double fraction = c->adds == 1 ? c->clipped_fraction : c->inputs > 0 ? c->clipped / c->inputs : NAN;
      if (!isnan(fraction)) row.error[PRECIS_METRIC_CLIPPED] = (precis_metric_value){fraction, fraction, true};
      for (size_t i = 0; i < c->details.count; i++) {
        const precis_kv *kv = &c->details.items[i];
        if (kv->is_number) precis_kv_set_json(&row.details, kv->key, kv->value);
        else precis_kv_set(&row.details, kv->key, kv->value);
      }
    }
  }
  precis_criteria defaults;
  precis_default_criteria(&c->recipe.spec, c->k, &defaults);
  precis_row_judge(&row, &defaults);
  *json = precis_row_to_json_line(&row);
  if (!*json) st = precis_fail(PRECIS_E_NOMEM, "out of memory");
done:
  precis_row_free(&row);
  return st;
}

precis_status precis_layer_check_rows(precis_layer_check *c, char **isolated_json, char **other_json) {
  if (isolated_json) *isolated_json = NULL;
  if (other_json) *other_json = NULL;
  if (!c) return precis_fail(PRECIS_E_USAGE, "precis_layer_check_rows: no check");
  precis_status st = PRECIS_OK;
  const int64_t m = c->m_rows;
  if (isolated_json && c->isolated && (c->iso.count || c->status != PRECIS_ROW_OK))
    st = finish_row(c, &c->iso, true, m, isolated_json);
  if (st == PRECIS_OK && other_json && c->other.count) st = finish_row(c, &c->other, false, m, other_json);
  return st;
}
