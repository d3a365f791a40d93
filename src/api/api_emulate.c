/* libprecis: emulate one batched GEMM and quantize one operand (include/precis/emulate.h). Both
 * go through the cpu backend's own functions (eval/cpu_backend.c's precis_cpu_emulate, the
 * quantizer and operand descriptions of eval/cpu_quantized.c): nothing numeric is computed here,
 * so the bits are those of `precis run --backend cpu --save-outputs`. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "eval/backend.h"
#include "eval/cpu_quantized.h"
#include "eval/host_memory.h"
#include "kernels/cuda_api.h"
#include "numerics/format.h"
#include "numerics/quantize.h"
#include "numerics/recipe.h"
#include "numerics/spec.h"
#include "precis/emulate.h"
#include "precis/spec.h"

/* Elements of a [d0, d1, d2] array, or 0 when a dimension is < 1 or the count (times 8 bytes)
 * would overflow. */
static size_t elements(int64_t d0, int64_t d1, int64_t d2) {
  if (d0 < 1 || d1 < 1 || d2 < 1) return 0;
  uint64_t limit = (uint64_t)SIZE_MAX / 8;
  uint64_t n = (uint64_t)d0;
  if ((uint64_t)d1 > limit / n) return 0;
  n *= (uint64_t)d1;
  if ((uint64_t)d2 > limit / n) return 0;
  return (size_t)(n * (uint64_t)d2);
}

static bool dtype_ok(precis_dtype t) { return t == PRECIS_DTYPE_F32 || t == PRECIS_DTYPE_F64; }

precis_status precis_emulate_out_dtype(const char *recipe, precis_dtype *out) {
  if (!recipe) return precis_fail(PRECIS_E_USAGE, "recipe: expected a preset name or a spec, got NULL");
  precis_recipe r;
  precis_status st = precis_recipe_parse(recipe, &r);
  if (st != PRECIS_OK) return st;
  if (out) *out = r.spec.out == PRECIS_FMT_F64 ? PRECIS_DTYPE_F64 : PRECIS_DTYPE_F32;
  return PRECIS_OK;
}

/* An input as the dataset loader holds it: float32 as given; float64 kept for fp64 recipes and
 * rounded (RNE, a C cast as in data/dataset.c) to the float32 that narrower recipes read. */
static precis_status take_input(const char *name, const void *x, precis_dtype dtype, size_t count, float **f32,
                                double **f64, float **owned) {
  *owned = NULL;
  *f64 = NULL;
  if (!x) return precis_fail(PRECIS_E_USAGE, "%s: no data (NULL)", name);
  if (!dtype_ok(dtype)) return precis_fail(PRECIS_E_USAGE, "%s: dtype %d: expected float32 or float64", name, (int)dtype);
  if (dtype == PRECIS_DTYPE_F32) {
    *f32 = (float *)(uintptr_t)x; /* read only: the backend takes const workload data */
    return PRECIS_OK;
  }
  const double *wide = x;
  float *narrow = malloc(count * sizeof *narrow);
  if (!narrow) return precis_fail(PRECIS_E_NOMEM, "%s: out of memory rounding %zu float64 values", name, count);
  for (size_t i = 0; i < count; i++) narrow[i] = (float)wide[i];
  *f32 = narrow;
  *f64 = (double *)(uintptr_t)wide;
  *owned = narrow;
  return PRECIS_OK;
}

static precis_status row_status_error(const char *recipe, const precis_case_output *out) {
  switch (out->status) {
  case PRECIS_ROW_OK: return PRECIS_OK;
  case PRECIS_ROW_UNSUPPORTED:
    return precis_fail(PRECIS_E_UNSUPPORTED, "%s: not run by the cpu backend: %s", recipe, out->reason);
  case PRECIS_ROW_DOES_NOT_FIT: return precis_fail(PRECIS_E_DOES_NOT_FIT, "%s: %s", recipe, out->reason);
  case PRECIS_ROW_FAILED: break;
  }
  return precis_fail(PRECIS_E_RUNTIME, "%s: %s", recipe, out->reason[0] ? out->reason : "failed");
}

precis_status precis_emulate(const char *recipe_text, const precis_gemm *g, void *c, precis_dtype c_dtype,
                             precis_emulate_info *info) {
  return precis_emulate_target(recipe_text, g, c, c_dtype, NULL, info);
}

/* What precis_emulate_target and precis_emulate_operands share: the checks of the GEMM's shape and
 * the recipe, and the workload the cpu backend reads (inputs that are float64 rounded to float32
 * into *a_owned / *b_owned, which the caller frees). */
static precis_status gemm_workload(const char *recipe_text, const precis_gemm *g, precis_recipe *recipe,
                                   precis_workload_info *w, precis_workload_data *d, float **a_owned, float **b_owned) {
  *a_owned = *b_owned = NULL;
  if (!recipe_text) return precis_fail(PRECIS_E_USAGE, "recipe: expected a preset name or a spec, got NULL");
  if (!g) return precis_fail(PRECIS_E_USAGE, "precis_emulate: the GEMM is NULL");
  size_t a_count = elements(g->batch, g->m, g->k);
  size_t b_count = elements(g->b_batched ? g->batch : 1, g->k, g->n);
  size_t c_count = elements(g->batch, g->m, g->n);
  if (!a_count || !b_count || !c_count)
    return precis_fail(PRECIS_E_USAGE,
                       "shape batch=%lld, m=%lld, n=%lld, k=%lld: every dimension must be at least 1 (and the arrays "
                       "addressable)",
                       (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k);
  /* The backend indexes with int (BLAS): every dimension and leading dimension must fit. */
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->batch * g->m > INT32_MAX)
    return precis_fail(PRECIS_E_USAGE, "shape m=%lld, n=%lld, k=%lld, batch=%lld: each (and batch*m) must be below 2^31",
                       (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
  precis_status st;
  if ((st = precis_recipe_parse(recipe_text, recipe)) != PRECIS_OK) return st;
  if (recipe->spec.scale != PRECIS_SCALE_DYNAMIC && (g->calib_samples < 1 || !g->calib_a))
    return precis_fail(PRECIS_E_USAGE,
                       "%s: scale=%s takes A's scale from calibration inputs: give calib_a [calib_samples, m, k]",
                       recipe_text, precis_scale_method_name(recipe->spec.scale));
  if (g->calib_samples > 0 && (!g->calib_a || !elements(g->calib_samples, g->m, g->k)))
    return precis_fail(PRECIS_E_USAGE, "calib_a: %lld samples of [%lld, %lld] without data", (long long)g->calib_samples,
                       (long long)g->m, (long long)g->k);

  memset(w, 0, sizeof *w);
  w->name = (char *)"emulate";
  w->kind = (char *)"gemm";
  w->description = w->a_dist = w->b_dist = w->reference = (char *)"";
  w->m = g->m, w->n = g->n, w->k = g->k, w->batch = g->batch;
  w->b_batched = g->b_batched != 0;
  w->calib_samples = g->calib_a ? g->calib_samples : 0;
  w->reference_precision = (char *)"float64";
  w->reference_error_bound = NAN;
  w->a_f64 = g->a_dtype == PRECIS_DTYPE_F64;
  w->b_f64 = g->b_dtype == PRECIS_DTYPE_F64;
  memset(d, 0, sizeof *d);
  if ((st = take_input("a", g->a, g->a_dtype, a_count, &d->a, &d->a64, a_owned)) != PRECIS_OK) return st;
  if ((st = take_input("b", g->b, g->b_dtype, b_count, &d->b, &d->b64, b_owned)) != PRECIS_OK) return st;
  d->b_nk = g->b_transposed != 0;
  d->calib_a = w->calib_samples ? (float *)(uintptr_t)g->calib_a : NULL;
  return PRECIS_OK;
}

precis_status precis_emulate_target(const char *recipe_text, const precis_gemm *g, void *c, precis_dtype c_dtype,
                                    const char *target_name, precis_emulate_info *info) {
  precis_target target = PRECIS_TARGET_DEFAULT;
  if (target_name && !precis_target_parse(target_name, &target))
    return precis_fail(PRECIS_E_USAGE, "target %s: expected one of %s", target_name, PRECIS_TARGET_NAMES);
  precis_case_output out;
  precis_case_output_init(&out);
  float *a_owned = NULL, *b_owned = NULL;
  precis_status st = PRECIS_OK;
  if (!c) return precis_fail(PRECIS_E_USAGE, "precis_emulate: the output is NULL");
  if (!dtype_ok(c_dtype)) return precis_fail(PRECIS_E_USAGE, "c: dtype %d: expected float32 or float64", (int)c_dtype);
  precis_recipe recipe;
  precis_workload_info w;
  precis_workload_data d;
  if ((st = gemm_workload(recipe_text, g, &recipe, &w, &d, &a_owned, &b_owned)) != PRECIS_OK) goto done;
  size_t c_count = elements(g->batch, g->m, g->n);

  precis_clear_error();
  /* A float32 output may be written in place (a head emulated a block of columns at a time). */
  if ((st = precis_cpu_emulate_into(&recipe.spec, &w, &d, target, &out, c_dtype == PRECIS_DTYPE_F32 ? c : NULL)) !=
      PRECIS_OK)
    goto done;
  if ((st = row_status_error(recipe_text, &out)) != PRECIS_OK) goto done;
  const bool in_place = !out.c && c_dtype == PRECIS_DTYPE_F32;
  if (!out.c && !in_place) {
    st = precis_fail(PRECIS_E_RUNTIME, "%s: the cpu backend returned no output", recipe_text);
    goto done;
  }
  /* A head's operand copies (its B as integers or rounded values) would otherwise stay cached while
   * the output is copied out: with the caller's B and both outputs, the peak of a verify. */
  if ((double)g->k * (double)g->n * 4.0 >= (double)PRECIS_LARGE_B_BYTES) precis_tracked_cache_release();
  if (in_place) {
    /* written by the backend */
  } else if (c_dtype == PRECIS_DTYPE_F32) memcpy(c, out.c, c_count * sizeof(float));
  else if (out.c64) memcpy(c, out.c64, c_count * sizeof(double));
  else
    for (size_t i = 0; i < c_count; i++) ((double *)c)[i] = out.c[i];
  if (info) {
    memset(info, 0, sizeof *info);
    info->out_dtype = recipe.spec.out == PRECIS_FMT_F64 ? PRECIS_DTYPE_F64 : PRECIS_DTYPE_F32;
    info->clipped_fraction = out.clipped_fraction;
    snprintf(info->canonical, sizeof info->canonical, "%s", recipe.canonical);
    const char *how = precis_kv_get(&out.details, "emulation");
    snprintf(info->emulation, sizeof info->emulation, "%s", how ? how : "");
  }
done:
  precis_case_output_free(&out);
  free(a_owned);
  free(b_owned);
  return st;
}

precis_status precis_emulate_b_bytes(const char *recipe_text, int64_t k, int64_t n, const char *target_name,
                                     int64_t *bytes) {
  if (!recipe_text || !bytes) return precis_fail(PRECIS_E_USAGE, "precis_emulate_b_bytes: recipe and bytes are required");
  if (k < 1 || n < 1) return precis_fail(PRECIS_E_USAGE, "k=%lld, n=%lld: each at least 1", (long long)k, (long long)n);
  precis_target target = PRECIS_TARGET_DEFAULT;
  if (target_name && !precis_target_parse(target_name, &target))
    return precis_fail(PRECIS_E_USAGE, "target %s: expected one of %s", target_name, PRECIS_TARGET_NAMES);
  precis_recipe recipe;
  precis_status st = precis_recipe_parse(recipe_text, &recipe);
  if (st != PRECIS_OK) return st;
  *bytes = (int64_t)precis_cpu_emulate_b_bytes(&recipe.spec, k, n, target);
  return PRECIS_OK;
}

precis_status precis_emulate_operands(const char *recipe_text, const precis_gemm *g, float *a_out, float *b_out,
                                      float *alpha) {
  float *a_owned = NULL, *b_owned = NULL, *a_units = NULL, *b_units = NULL;
  precis_status st = PRECIS_OK;
  char why[300] = "";
  if (!a_out || !b_out || !alpha) return precis_fail(PRECIS_E_USAGE, "precis_emulate_operands: an output is NULL");
  precis_recipe recipe;
  precis_workload_info w;
  precis_workload_data d;
  if (g && g->b_transposed) {
    st = precis_fail(PRECIS_E_USAGE, "precis_emulate_operands: b as [n, k] (b_transposed): give B as [k, n], the layout "
                                     "b_out is written in");
    goto done;
  }
  if ((st = gemm_workload(recipe_text, g, &recipe, &w, &d, &a_owned, &b_owned)) != PRECIS_OK) goto done;
  if ((st = precis_recipe_cpu_support(recipe_text, why, sizeof why)) != PRECIS_OK) goto done;
  const precis_spec *s = &recipe.spec;
  /* Another implementation of the same recipe may sum the operands differently only where the
   * recipe promises an fp32 accumulator: acc=fp16 and fp32fast name a narrower sum, s32 and fp64
   * are exact already, and splits define their own terms. */
  if (s->acc != PRECIS_FMT_F32 || s->fast_accum || s->split != PRECIS_SPLIT_NONE || s->out == PRECIS_FMT_F64) {
    st = precis_fail(PRECIS_E_UNSUPPORTED,
                     "%s: acc=%s%s: the operands of another summation are those of an fp32-accumulating recipe "
                     "without split= (acc=fp32)",
                     recipe_text, precis_spec_acc_name(s), s->split != PRECIS_SPLIT_NONE ? " with split=" : "");
    goto done;
  }
  size_t clipped = 0;
  st = precis_cpu_quant_dequantized_inputs_alpha(s, &w, &d, &a_units, &b_units, alpha, &clipped, why, sizeof why);
  if (st != PRECIS_OK) {
    st = precis_fail(st, "%s: %s", recipe_text, why);
    goto done;
  }
  memcpy(a_out, a_units, elements(g->batch, g->m, g->k) * sizeof(float));
  memcpy(b_out, b_units, elements(g->b_batched ? g->batch : 1, g->k, g->n) * sizeof(float));
done:
  free(a_units);
  free(b_units);
  free(a_owned);
  free(b_owned);
  return st;
}

/* ---------------------------------------------------------------- device arrays
 * precis_emulate_device: the checks here run everywhere (tests/test_api.c); the GEMM itself is the
 * cuda backend's (kernels/cuda_device_gemm.c), which has NOT YET RUN ON A GPU. */

int precis_cuda_built(void) { return PRECIS_HAVE_CUDA ? 1 : 0; }

void precis_device_free(int device, void *p) { precis_cuda_device_free(device, p); }

/* Dense row-major [d0, d1, d2] or refused: all-zero strides mean dense; a dimension of size 1 has
 * no step, so any stride is taken there (as DLPack and torch allow). */
static precis_status check_dense(const char *name, const int64_t strides[3], int64_t d0, int64_t d1, int64_t d2,
                                 bool has_batch) {
  if (!strides[0] && !strides[1] && !strides[2]) return PRECIS_OK;
  const int64_t dims[3] = {d0, d1, d2}, dense[3] = {d1 * d2, d2, 1};
  for (int i = has_batch ? 0 : 1; i < 3; i++)
    if (dims[i] > 1 && strides[i] != dense[i]) {
      if (has_batch)
        return precis_fail(PRECIS_E_USAGE,
                           "%s: strides [%lld, %lld, %lld] (elements) of shape [%lld, %lld, %lld]: expected dense "
                           "row-major [%lld, %lld, 1] (make it contiguous on the device first)",
                           name, (long long)strides[0], (long long)strides[1], (long long)strides[2], (long long)d0,
                           (long long)d1, (long long)d2, (long long)dense[0], (long long)dense[1]);
      return precis_fail(PRECIS_E_USAGE,
                         "%s: strides [%lld, %lld] (elements) of shape [%lld, %lld]: expected dense row-major [%lld, 1] "
                         "(make it contiguous on the device first)",
                         name, (long long)strides[1], (long long)strides[2], (long long)d1, (long long)d2,
                         (long long)dense[1]);
    }
  return PRECIS_OK;
}

precis_status precis_emulate_device(const char *recipe_text, const precis_device_gemm *g, float **c_allocated,
                                    precis_emulate_info *info) {
  if (c_allocated) *c_allocated = NULL;
  if (!recipe_text) return precis_fail(PRECIS_E_USAGE, "recipe: expected a preset name or a spec, got NULL");
  if (!g) return precis_fail(PRECIS_E_USAGE, "precis_emulate_device: the GEMM is NULL");
  if (!elements(g->batch, g->m, g->k) || !elements(g->b_batched ? g->batch : 1, g->k, g->n) ||
      !elements(g->batch, g->m, g->n))
    return precis_fail(PRECIS_E_USAGE,
                       "shape batch=%lld, m=%lld, n=%lld, k=%lld: every dimension must be at least 1 (and the arrays "
                       "addressable)",
                       (long long)g->batch, (long long)g->m, (long long)g->n, (long long)g->k);
  if (g->m > INT32_MAX || g->n > INT32_MAX || g->k > INT32_MAX || g->batch * g->m > INT32_MAX)
    return precis_fail(PRECIS_E_USAGE, "shape m=%lld, n=%lld, k=%lld, batch=%lld: each (and batch*m) must be below 2^31",
                       (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch);
  if (!g->a || !g->b) return precis_fail(PRECIS_E_USAGE, "%s: no data (NULL)", !g->a ? "a" : "b");
  if (!g->c && !c_allocated)
    return precis_fail(PRECIS_E_USAGE, "c: NULL without c_allocated: give the output or where to return it");
  precis_status st;
  if ((st = check_dense("a", g->a_strides, g->batch, g->m, g->k, true)) != PRECIS_OK ||
      (st = check_dense("b", g->b_strides, g->b_batched ? g->batch : 1, g->k, g->n, g->b_batched != 0)) != PRECIS_OK ||
      (st = check_dense("c", g->c_strides, g->batch, g->m, g->n, true)) != PRECIS_OK)
    return st;
  precis_recipe recipe;
  if ((st = precis_recipe_parse(recipe_text, &recipe)) != PRECIS_OK) return st;
  if (recipe.spec.scale != PRECIS_SCALE_DYNAMIC)
    return precis_fail(PRECIS_E_USAGE,
                       "%s: scale=%s takes A's scale from calibration inputs, which device arrays do not carry: use "
                       "precis_emulate with calib_a on host arrays",
                       recipe_text, precis_scale_method_name(recipe.spec.scale));

  precis_workload_info w;
  memset(&w, 0, sizeof w);
  w.name = (char *)"emulate";
  w.kind = (char *)"gemm";
  w.description = w.a_dist = w.b_dist = w.reference = (char *)"";
  w.m = g->m, w.n = g->n, w.k = g->k, w.batch = g->batch;
  w.b_batched = g->b_batched != 0;
  w.reference_precision = (char *)"float64";
  w.reference_error_bound = NAN;

  precis_case_output out;
  precis_case_output_init(&out);
  float *c = g->c, *owned = NULL;
  size_t c_bytes = elements(g->batch, g->m, g->n) * sizeof(float);
  if (!c) {
    if ((st = precis_cuda_device_alloc(g->device, c_bytes, (void **)&owned)) != PRECIS_OK) goto done;
    c = owned;
  }
  precis_device_io io = {.a = g->a, .b = g->b, .c = c};
  precis_clear_error();
  if ((st = precis_cuda_device_gemm(g->device, g->stream, &recipe.spec, &w, &io, &out)) != PRECIS_OK) goto done;
  switch (out.status) {
  case PRECIS_ROW_OK: break;
  case PRECIS_ROW_UNSUPPORTED:
    st = precis_fail(PRECIS_E_UNSUPPORTED, "%s on CUDA device %d: %s", recipe_text, g->device, out.reason);
    goto done;
  case PRECIS_ROW_DOES_NOT_FIT:
    st = precis_fail(PRECIS_E_DOES_NOT_FIT, "%s on CUDA device %d: %s", recipe_text, g->device, out.reason);
    goto done;
  case PRECIS_ROW_FAILED:
  default:
    st = precis_fail(PRECIS_E_RUNTIME, "%s on CUDA device %d: %s", recipe_text, g->device,
                     out.reason[0] ? out.reason : "failed");
    goto done;
  }
  if (info) {
    memset(info, 0, sizeof *info);
    info->out_dtype = PRECIS_DTYPE_F32;
    info->clipped_fraction = out.clipped_fraction;
    snprintf(info->canonical, sizeof info->canonical, "%s", recipe.canonical);
    const char *how = precis_kv_get(&out.details, "emulation");
    const char *algo = precis_kv_get(&out.details, "lt_route");
    snprintf(info->emulation, sizeof info->emulation, "cuda backend on device %d (cuBLASLt%s%s), device arrays in place%s%s",
             g->device, algo ? " route " : "", algo ? algo : "", how ? "; " : "", how ? how : "");
  }
  if (c_allocated) *c_allocated = owned;
  owned = NULL;
done:
  precis_case_output_free(&out);
  if (owned) precis_cuda_device_free(g->device, owned);
  return st;
}

/* ---------------------------------------------------------------- quantize */

struct precis_quantized {
  char operand[64];
  char side;
  bool scaled;
  size_t count;                       /* batch * rows * cols */
  int64_t mats, scale_rows, scale_cols;
  uint8_t *codes, *scale_codes, *zero_points;
  float *scales, *tensor_scales, *values;
  size_t clipped;
};

void precis_quantized_free(precis_quantized *q) {
  if (!q) return;
  free(q->codes);
  free(q->scale_codes);
  free(q->zero_points);
  free(q->scales);
  free(q->tensor_scales);
  free(q->values);
  free(q);
}

/* "a=FMT@GRAN", "b=...", or a bare operand (A): the side and the spec field. */
static precis_status parse_operand_field(const char *text, char *side, precis_operand_spec *op) {
  char field[PRECIS_SPEC_TEXT_MAX];
  if ((text[0] == 'a' || text[0] == 'b') && text[1] == '=') {
    *side = text[0];
    snprintf(field, sizeof field, "%s", text);
  } else {
    *side = 'a';
    if (strchr(text, '=') || strchr(text, ','))
      return precis_fail(PRECIS_E_USAGE, "operand \"%s\": expected a=FMT[@GRAN[:CONV]], b=... or FMT[@GRAN[:CONV]]",
                         text);
    if (snprintf(field, sizeof field, "a=%s", text) >= (int)sizeof field)
      return precis_fail(PRECIS_E_USAGE, "operand of %zu characters: too long", strlen(text));
  }
  if (strchr(field, ','))
    return precis_fail(PRECIS_E_USAGE, "operand \"%s\": one operand field (a= or b=), not a whole spec", text);
  precis_spec spec;
  precis_status st = precis_spec_parse(field, &spec);
  if (st != PRECIS_OK) return st;
  *op = *side == 'a' ? spec.a : spec.b;
  return PRECIS_OK;
}

/* static_amax: NULL for the spec's own (dynamic) scales, else the calibrated amax of a per-tensor operand. */
static precis_status quantize_operand(const char *operand, const float *x, int64_t batch, int64_t rows, int64_t cols,
                                      const float *static_amax, precis_quantized **out) {
  if (!out) return precis_fail(PRECIS_E_USAGE, "precis_quantize_operand: no output");
  *out = NULL;
  if (!operand) return precis_fail(PRECIS_E_USAGE, "operand: expected a=FMT[@GRAN[:CONV]] or b=..., got NULL");
  if (!x) return precis_fail(PRECIS_E_USAGE, "x: no data (NULL)");
  size_t count = elements(batch, rows, cols);
  if (!count)
    return precis_fail(PRECIS_E_USAGE, "x of shape [%lld, %lld, %lld]: every dimension must be at least 1",
                       (long long)batch, (long long)rows, (long long)cols);
  precis_operand_spec op;
  char side;
  precis_status st = parse_operand_field(operand, &side, &op);
  if (st != PRECIS_OK) return st;
  precis_quantized *q = calloc(1, sizeof *q);
  if (!q) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  q->side = side;
  q->count = count;
  q->scaled = precis_operand_is_scaled(&op);
  q->mats = 1;
  precis_operand_format(&op, q->operand, sizeof q->operand);
  q->values = malloc(count * sizeof(float));
  if (!q->values) goto oom;
  if (!q->scaled) {
    const precis_format *f = precis_format_get(op.fmt);
    if (static_amax) {
      precis_status bad = precis_fail(PRECIS_E_USAGE, "%c=%s: a static amax needs a scaled per-tensor operand "
                                      "(e4m3@tensor, e5m2@tensor, s8@tensor:sym ...), not a plain cast", side, q->operand);
      precis_quantized_free(q);
      return bad;
    }
    if (f->round_array) f->round_array(x, q->values, count);
    else memcpy(q->values, x, count * sizeof(float));
    *out = q;
    return PRECIS_OK;
  }
  /* As the cpu backend lays the operands out (cpu_quantized.c prep_operand): A is one matrix of
   * batch*rows rows; B is one matrix per batch element, or all of them as one tensor with @tensor. */
  precis_operand_side qside = side == 'a' ? PRECIS_OPERAND_A : PRECIS_OPERAND_B;
  size_t mats = (size_t)batch, qrows = (size_t)rows, qcols = (size_t)cols;
  if (qside == PRECIS_OPERAND_A || op.gran == PRECIS_GRAN_TENSOR) mats = 1, qrows = (size_t)batch * (size_t)rows;
  precis_quant_desc desc = precis_cpu_quant_desc_of(&op, qside);
  precis_quant_layout l;
  if ((st = precis_quant_layout_of(&desc, qrows, qcols, &l)) != PRECIS_OK) {
    precis_error_prefix("%c=%s", side, q->operand);
    goto fail;
  }
  q->mats = (int64_t)mats;
  q->scale_rows = (int64_t)l.scale_rows;
  q->scale_cols = (int64_t)l.scale_cols;
  size_t n_scales = mats * l.scale_count;
  q->codes = malloc(count);
  q->scales = malloc(n_scales * sizeof(float));
  q->scale_codes = l.scale_fmt != PRECIS_FMT_F32 ? malloc(n_scales) : NULL;
  q->zero_points = l.has_zero_points ? malloc(n_scales) : NULL;
  q->tensor_scales = l.has_tensor_scale ? malloc(mats * sizeof(float)) : NULL;
  uint8_t *zeros_scratch = l.has_zero_points ? NULL : malloc(l.scale_count);
  if (!q->codes || !q->scales || (l.scale_fmt != PRECIS_FMT_F32 && !q->scale_codes) ||
      (l.has_zero_points && !q->zero_points) || (l.has_tensor_scale && !q->tensor_scales) ||
      (!l.has_zero_points && !zeros_scratch)) {
    free(zeros_scratch);
    goto oom;
  }
  for (size_t g = 0; g < mats && st == PRECIS_OK; g++) {
    size_t off = g * qrows * qcols, soff = g * l.scale_count;
    precis_quant_tensor t = {0};
    t.codes = q->codes + off;
    t.scales = q->scales + soff;
    t.scale_codes = q->scale_codes ? q->scale_codes + soff : NULL;
    t.zero_points = q->zero_points ? q->zero_points + soff : zeros_scratch;
    st = static_amax ? precis_quantize_with_amax(&desc, x + off, qrows, qcols, *static_amax, &t)
                     : precis_quantize(&desc, x + off, qrows, qcols, &t);
    if (st != PRECIS_OK && static_amax) precis_error_prefix("%c=%s with a static amax", side, q->operand);
    if (st == PRECIS_OK) st = precis_dequantize(&desc, &t, qrows, qcols, q->values + off);
    q->clipped += t.clipped;
    if (q->tensor_scales) q->tensor_scales[g] = t.tensor_scale;
  }
  free(zeros_scratch);
  if (st != PRECIS_OK) goto fail;
  *out = q;
  return PRECIS_OK;
oom:
  st = precis_fail(PRECIS_E_NOMEM, "out of memory quantizing %zu values", count);
fail:
  precis_quantized_free(q);
  return st;
}

precis_status precis_quantize_operand(const char *operand, const float *x, int64_t batch, int64_t rows, int64_t cols,
                                      precis_quantized **out) {
  return quantize_operand(operand, x, batch, rows, cols, NULL, out);
}

precis_status precis_quantize_operand_static(const char *operand, const float *x, int64_t batch, int64_t rows,
                                             int64_t cols, float amax, precis_quantized **out) {
  if (out) *out = NULL;
  if (!(amax >= 0.0f) || amax > FLT_MAX)
    return precis_fail(PRECIS_E_USAGE, "amax: %g: expected a finite value >= 0 (a calibrated largest |x|)", (double)amax);
  return quantize_operand(operand, x, batch, rows, cols, &amax, out);
}

const char *precis_quantized_operand(const precis_quantized *q) { return q ? q->operand : NULL; }
char precis_quantized_side(const precis_quantized *q) { return q ? q->side : 0; }
int precis_quantized_is_scaled(const precis_quantized *q) { return q && q->scaled; }
const uint8_t *precis_quantized_codes(const precis_quantized *q) { return q ? q->codes : NULL; }
const float *precis_quantized_scales(const precis_quantized *q, int64_t *n_mats, int64_t *rows, int64_t *cols) {
  if (n_mats) *n_mats = q ? q->mats : 0;
  if (rows) *rows = q ? q->scale_rows : 0;
  if (cols) *cols = q ? q->scale_cols : 0;
  return q ? q->scales : NULL;
}
const uint8_t *precis_quantized_scale_codes(const precis_quantized *q) { return q ? q->scale_codes : NULL; }
const uint8_t *precis_quantized_zero_points(const precis_quantized *q) { return q ? q->zero_points : NULL; }
const float *precis_quantized_tensor_scales(const precis_quantized *q) { return q ? q->tensor_scales : NULL; }
const float *precis_quantized_values(const precis_quantized *q) { return q ? q->values : NULL; }
size_t precis_quantized_clipped(const precis_quantized *q) { return q ? q->clipped : 0; }
