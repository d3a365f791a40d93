#include "conform.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codes.h"
#include "numerics/format.h"
#include "base/escape.h"

/* ------------------------------------------------------------------ the code formats */

/* FP4 E2M1 magnitudes; a code's ordinal is its index, negative for negative codes. */
static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* A code's position among its format's values, so that neighbours differ by one. */
static double code_ordinal(const precis_converted_layer *l, float q) {
  if (!l->is_float) return q;
  if (l->bits == 4) {
    for (int i = 0; i < 8; i++)
      if (fabsf(q) == e2m1[i]) return q < 0 ? -i : i;
    return NAN;
  }
  const uint8_t bits = precis_f32_to_e4m3_bits(q);
  return bits & 0x80 ? -(double)(bits & 0x7f) : (double)(bits & 0x7f);
}

static float quantize_value(const precis_converted_layer *l, float x, float scale, float zp) {
  return precis_quantize_code(x, scale, zp, l->bits, l->is_float);
}

/* A float32 value rounded to the scale's stored format. */
static float round_to_dtype(const char *dtype, float x) {
  if (!strcmp(dtype, "BF16")) return precis_round_bf16(x);
  if (!strcmp(dtype, "F16")) return precis_round_f16(x);
  if (!strcmp(dtype, "F8_E4M3")) return precis_round_e4m3(x);
  return x;
}

/* How many values of the scale's format lie between a and b. */
static double ulps_apart(const char *dtype, float a, float b) {
  if (a == b) return 0;
  int64_t ia, ib;
  if (!strcmp(dtype, "E8M0")) { /* powers of two: one ULP per binade */
    int ea = 0, eb = 0;
    frexpf(a, &ea);
    frexpf(b, &eb);
    return fabs((double)(ea - eb));
  }
  if (!strcmp(dtype, "BF16") || !strcmp(dtype, "F16")) {
    uint16_t ha = !strcmp(dtype, "BF16") ? precis_f32_to_bf16_bits(a) : precis_f32_to_f16_bits(a);
    uint16_t hb = !strcmp(dtype, "BF16") ? precis_f32_to_bf16_bits(b) : precis_f32_to_f16_bits(b);
    ia = ha & 0x8000 ? -(int64_t)(ha & 0x7fff) : (int64_t)ha;
    ib = hb & 0x8000 ? -(int64_t)(hb & 0x7fff) : (int64_t)hb;
  } else if (!strcmp(dtype, "F8_E4M3")) {
    uint8_t ea = precis_f32_to_e4m3_bits(a), eb = precis_f32_to_e4m3_bits(b);
    ia = ea & 0x80 ? -(int64_t)(ea & 0x7f) : (int64_t)ea;
    ib = eb & 0x80 ? -(int64_t)(eb & 0x7f) : (int64_t)eb;
  } else {
    uint32_t ua, ub;
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    ia = ua & 0x80000000u ? -(int64_t)(ua & 0x7fffffffu) : (int64_t)ua;
    ib = ub & 0x80000000u ? -(int64_t)(ub & 0x7fffffffu) : (int64_t)ub;
  }
  return fabs((double)(ia - ib));
}

/* The scale (and zero point) compressed-tensors' calculate_qparams gives a cell's min and max
 * (widened to include 0): symmetric amax / (range / 2), asymmetric (max - min) / range with the
 * zero point qmin - min / scale rounded and clamped; NVFP4's local scale is global * amax / 6,
 * rounded to E4M3. Then rounded to the stored scale dtype. */
static float minmax_scale(const precis_converted_layer *l, bool symmetric, float lo, float hi, float *zp) {
  lo = fminf(lo, 0.0f);
  hi = fmaxf(hi, 0.0f);
  *zp = 0;
  if (!strcmp(l->scale_dtype, "E8M0")) {
    /* MXFP4 (gpt-oss): OCP MX v1.0's floor rule, 2^(floor(log2(amax)) - emax_elem) with E2M1's
     * emax_elem = 2, as precis's own mxfp4 recipe; an all-zero block takes E8M0's smallest, 2^-127. */
    const float amax = fmaxf(fabsf(lo), fabsf(hi));
    if (!(amax > 0)) return ldexpf(1.0f, -127);
    int e = 0;
    frexpf(amax, &e); /* amax = f 2^e, f in [0.5, 1): floor(log2(amax)) = e - 1 */
    const int exponent = e - 1 - 2;
    return ldexpf(1.0f, exponent < -127 ? -127 : exponent > 127 ? 127 : exponent);
  }
  float scale;
  if (l->is_float) {
    const float amax = fmaxf(fabsf(lo), fabsf(hi));
    scale = l->bits == 8 ? amax / 448.0f : l->scale_2 != 1.0f ? (amax / 6.0f) / l->scale_2 : l->global_scale * (amax / 6.0f);
  } else {
    const float qmin = -ldexpf(1.0f, l->bits - 1), qmax = ldexpf(1.0f, l->bits - 1) - 1.0f, range = qmax - qmin;
    if (symmetric) {
      scale = fmaxf(fabsf(lo), fabsf(hi)) / (range / 2.0f);
    } else {
      scale = (hi - lo) / range;
      if (scale > 0) *zp = fminf(fmaxf(rintf(qmin - lo / scale), qmin), qmax);
    }
  }
  return round_to_dtype(l->scale_dtype, scale);
}

/* ------------------------------------------------------------------ findings */

static void add_finding(precis_conform_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_finding(precis_conform_result *r, const char *fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char **grown = realloc(r->findings, (r->n_findings + 1) * sizeof *grown);
  if (!grown) return;
  r->findings = grown;
  if ((r->findings[r->n_findings] = precis_strdup(text))) r->n_findings++;
}

static double rel_fro(const double *diff2, const double *ref2) { return *ref2 > 0 ? sqrt(*diff2 / *ref2) : *diff2 > 0 ? INFINITY : 0; }

/* The cell's min and max over a set of values (original or dequantized). */
typedef struct cell_range {
  float lo, hi;
} cell_range;

static void cell_ranges(const precis_converted_layer *l, const float *w, cell_range *cells) {
  const uint64_t n_cells = (uint64_t)l->scale_rows * (uint64_t)l->scale_cols;
  for (uint64_t i = 0; i < n_cells; i++) cells[i] = (cell_range){INFINITY, -INFINITY};
  for (int64_t r = 0; r < l->out; r++)
    for (int64_t c = 0; c < l->in; c++) {
      const float v = w[(uint64_t)r * (uint64_t)l->in + (uint64_t)c];
      cell_range *cell = &cells[(uint64_t)(r / l->rows_per_scale) * (uint64_t)l->scale_cols + (uint64_t)l->group_of[c]];
      if (v < cell->lo) cell->lo = v;
      if (v > cell->hi) cell->hi = v;
    }
}

precis_status precis_conform_one(const precis_conform_options *o, const precis_model_layer *layer, precis_conform_layer *out,
                                   precis_conform_result *result) {
  const size_t shown = o->findings_per_check ? o->findings_per_check : 5;
  precis_converted_format fmt;
  int group = -1;
  bool ignored = false;
  memset(out, 0, sizeof *out);
  if (!(out->name = precis_strdup(layer->name))) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  out->code_row = out->code_col = out->scale_row = out->scale_col = -1;
  precis_status st = precis_model_converted_format(o->converted, o->declared, layer, &fmt, &group, &ignored);
  precis_converted_format_describe(&fmt, out->found, sizeof out->found);
  snprintf(out->declared, sizeof out->declared, "%s", ignored ? "ignored by the producer" : "undeclared");
  if (group >= 0 && !ignored) precis_quant_args_describe(&o->declared->groups[group].weights, false, out->declared, sizeof out->declared);
  if (st != PRECIS_OK) {
    out->status = "mismatch";
    result->n_nonconforming++;
    add_finding(result, "%s", precis_last_error());
    return PRECIS_OK;
  }
  if (!fmt.found) {
    out->status = "missing";
    result->n_nonconforming++;
    add_finding(result, "%s: not in the converted checkpoint", layer->name);
    return PRECIS_OK;
  }
  const int declared_bits = group >= 0 && !ignored ? o->declared->groups[group].weights.num_bits : 0;
  const bool symmetric = group >= 0 && !ignored ? o->declared->groups[group].weights.symmetric : !fmt.zero_point;
  precis_converted_layer l;
  float *w = NULL, *deq = NULL;
  cell_range *cells = NULL;
  if ((st = precis_model_read_f32(layer, &w)) != PRECIS_OK) return st;
  if ((st = precis_converted_layer_read(o->converted, layer, declared_bits, &l)) != PRECIS_OK) {
    free(w);
    out->status = "mismatch";
    result->n_nonconforming++;
    add_finding(result, "%s: %s", layer->name, precis_last_error());
    return PRECIS_OK;
  }
  const uint64_t count = (uint64_t)l.out * (uint64_t)l.in, n_cells = (uint64_t)l.scale_rows * (uint64_t)l.scale_cols;
  if (!(deq = malloc(count * sizeof *deq)) || (l.scale && !(cells = malloc((n_cells ? n_cells : 1) * sizeof *cells)))) {
    st = precis_fail(PRECIS_E_NOMEM, "layer %s: out of memory", layer->name);
    goto done;
  }
  double diff2 = 0, ref2 = 0, alone2 = 0, twice2 = 0;
  for (int64_t r = 0; r < l.out; r++)
    for (int64_t c = 0; c < l.in; c++) {
      const uint64_t i = (uint64_t)r * (uint64_t)l.in + (uint64_t)c;
      deq[i] = precis_converted_layer_value(&l, r, c);
      const double d = (double)deq[i] - w[i];
      diff2 += d * d;
      ref2 += (double)w[i] * w[i];
      if (l.scale) {
        const uint64_t at = (uint64_t)(r / l.rows_per_scale) * (uint64_t)l.scale_cols + (uint64_t)l.group_of[c];
        const double zp = l.zero_point ? l.zero_point[at] : 0, s = (double)l.scale[at] / l.global_scale * l.scale_2;
        const double alone = (double)l.code[i] - zp, twice = alone * s * s;
        alone2 += (alone - w[i]) * (alone - w[i]);
        twice2 += (twice - w[i]) * (twice - w[i]);
      }
    }
  out->weight_rel_fro = rel_fro(&diff2, &ref2);
  if (!l.quantized || ignored) {
    out->status = l.quantized ? "differs" : ignored ? "ignored" : "unquantized";
    goto done;
  }
  out->codes_alone_rel_fro = rel_fro(&alone2, &ref2);
  out->scale_twice_rel_fro = rel_fro(&twice2, &ref2);
  bool conforms = true;
  /* The tensors findings name: "<layer>.weight" and "<layer>.weight_scale", or one expert's slice of
   * gpt-oss's "<tensor>_blocks" and "<tensor>_scales". */
  char code_tensor[1200], scale_tensor[1200];
  if (layer->n_experts) {
    snprintf(code_tensor, sizeof code_tensor, "%s_blocks[%" PRId64 "]", layer->tensor, layer->expert);
    snprintf(scale_tensor, sizeof scale_tensor, "%s_scales[%" PRId64 "]", layer->tensor, layer->expert);
  } else {
    snprintf(code_tensor, sizeof code_tensor, "%s.%s", layer->name, fmt.packed ? "weight_packed" : "weight");
    snprintf(scale_tensor, sizeof scale_tensor, "%s.%s", layer->name, fmt.scale_name ? fmt.scale_name : "weight_scale");
  }
  const char *scale_name = scale_tensor;
  if (out->weight_rel_fro > PRECIS_FOREIGN_REL_FRO(l.bits)) {
    conforms = false;
    add_finding(result, "%s: %s: the dequantized weights differ from the original's by a relative Frobenius norm of %.3g "
                "(above %.2g): not a conversion of this model's layer", layer->name, code_tensor,
                out->weight_rel_fro, PRECIS_FOREIGN_REL_FRO(l.bits));
  }
  /* Scales ignored (the codes alone already are the weights) or applied twice. */
  if (out->codes_alone_rel_fro < 0.5 * out->weight_rel_fro) {
    conforms = false;
    add_finding(result, "%s: %s: the codes alone are the original to rel_fro %.3g, codes x scale only to %.3g: the scale "
                "looks already applied to the stored values (a reader applying %s applies it twice)", layer->name,
                scale_name, out->codes_alone_rel_fro, out->weight_rel_fro, scale_name);
  } else if (out->scale_twice_rel_fro < 0.5 * out->weight_rel_fro) {
    conforms = false;
    add_finding(result, "%s: %s: codes x scale^2 are the original to rel_fro %.3g, codes x scale only to %.3g: the stored "
                "values need the scale twice (it was divided out twice when quantizing)", layer->name, scale_name,
                out->scale_twice_rel_fro, out->weight_rel_fro);
  }
  /* Scales: recomputed from the original by the min-max rule, compared in ULPs of their format. */
  cell_ranges(&l, w, cells);
  size_t named = 0;
  const bool e8m0 = !strcmp(l.scale_dtype, "E8M0");
  out->scales = n_cells;
  for (uint64_t i = 0; i < n_cells; i++) {
    float zp = 0;
    const float want = minmax_scale(&l, symmetric, cells[i].lo, cells[i].hi, &zp);
    const double ulps = ulps_apart(l.scale_dtype, l.scale[i], want);
    if (ulps > out->max_scale_ulps) {
      out->max_scale_ulps = ulps;
      out->scale_row = (int64_t)(i / (uint64_t)l.scale_cols);
      out->scale_col = (int64_t)(i % (uint64_t)l.scale_cols);
    }
    if (ulps > (e8m0 ? 0 : 1)) { /* an E8M0 ULP is a factor of two */
      out->scales_off++;
      if (named++ < shown)
        add_finding(result, "%s: %s[%" PRIu64 ", %" PRIu64 "]: stored %.9g, the %s rule on the original gives %.9g "
                    "(%.0f ULPs of %s apart)", layer->name, scale_name, i / (uint64_t)l.scale_cols,
                    i % (uint64_t)l.scale_cols, (double)l.scale[i], e8m0 ? "OCP MX floor" : "min-max", (double)want, ulps, l.scale_dtype);
    }
  }
  if (out->scales_off) conforms = false;
  /* Codes: the original re-quantized with the stored scales and zero points. */
  named = 0;
  out->codes = count;
  for (int64_t r = 0; r < l.out; r++)
    for (int64_t c = 0; c < l.in; c++) {
      const uint64_t i = (uint64_t)r * (uint64_t)l.in + (uint64_t)c;
      const uint64_t at = (uint64_t)(r / l.rows_per_scale) * (uint64_t)l.scale_cols + (uint64_t)l.group_of[c];
      const float zp = l.zero_point ? (float)l.zero_point[at] : 0.0f;
      float scale = l.global_scale != 1.0f ? l.scale[at] / l.global_scale : l.scale[at];
      if (l.scale_2 != 1.0f) scale *= l.scale_2;
      const float want = quantize_value(&l, w[i], scale, zp);
      const double diff = fabs(code_ordinal(&l, l.code[i]) - code_ordinal(&l, want));
      if (diff == 0) out->equal++;
      else if (diff <= 1) out->within_one++;
      else out->beyond++;
      if (diff > out->max_code_diff) {
        out->max_code_diff = diff;
        out->code_row = r;
        out->code_col = c;
      }
      if (diff > 0 && named++ < shown)
        add_finding(result, "%s: %s[%" PRId64 ", %" PRId64 "]: stored code %g, round to nearest of the original (%.9g) with "
                    "the stored scale gives %g (%g code%s apart)", layer->name, code_tensor, r, c,
                    (double)l.code[i], (double)w[i], (double)want, diff, diff == 1 ? "" : "s");
      /* Idempotence: the dequantized value re-quantized with the same scale. */
      if (quantize_value(&l, deq[i], scale, zp) != l.code[i]) out->idem_codes_moved++;
    }
  if (out->equal != count) conforms = false;
  /* Idempotence of the scales: the min-max rule on the dequantized weights. */
  cell_ranges(&l, deq, cells);
  for (uint64_t i = 0; i < n_cells; i++) {
    float zp = 0;
    if (ulps_apart(l.scale_dtype, l.scale[i], minmax_scale(&l, symmetric, cells[i].lo, cells[i].hi, &zp)) >= 1)
      out->idem_scales_moved++;
  }
  out->status = conforms ? "conforms" : "differs";
done:
  if (out->status && strcmp(out->status, "conforms") && strcmp(out->status, "ignored") && strcmp(out->status, "unquantized"))
    result->n_nonconforming++;
  free(cells);
  free(deq);
  free(w);
  precis_converted_layer_free(&l);
  return st;
}

precis_status precis_conform(const precis_conform_options *o, precis_conform_result *out) {
  memset(out, 0, sizeof *out);
  if (o->declared && o->declared->present) precis_quant_decl_describe(o->declared, out->declared_by, sizeof out->declared_by);
  else snprintf(out->declared_by, sizeof out->declared_by, "nothing declared: the scheme is judged from the tensors");
  if (!(out->layers = calloc(o->original->n_layers ? o->original->n_layers : 1, sizeof *out->layers)))
    return precis_fail(PRECIS_E_NOMEM, "out of memory");
  for (size_t i = 0; i < o->original->n_layers; i++) {
    if (o->progress) fprintf(stderr, "precis conform: [%zu/%zu] %s\n", i + 1, o->original->n_layers, o->original->layers[i].name);
    precis_status st = precis_conform_one(o, &o->original->layers[i], &out->layers[i], out);
    out->n_layers = i + 1;
    if (st != PRECIS_OK) return st;
  }
  return PRECIS_OK;
}

void precis_conform_free(precis_conform_result *r) {
  for (size_t i = 0; i < r->n_layers; i++) free(r->layers[i].name);
  free(r->layers);
  for (size_t i = 0; i < r->n_findings; i++) free(r->findings[i]);
  free(r->findings);
  memset(r, 0, sizeof *r);
}

char *precis_conform_json(const precis_conform_result *r, const char *original, const char *converted) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "original", original);
  cJSON_AddStringToObject(root, "converted", converted);
  cJSON_AddStringToObject(root, "declared_by", r->declared_by);
  cJSON_AddBoolToObject(root, "conforms", r->n_nonconforming == 0);
  cJSON *layers = cJSON_AddArrayToObject(root, "layers");
  for (size_t i = 0; i < r->n_layers; i++) {
    const precis_conform_layer *l = &r->layers[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(layers, o);
    cJSON_AddStringToObject(o, "layer", l->name);
    cJSON_AddStringToObject(o, "status", l->status ? l->status : "");
    cJSON_AddStringToObject(o, "declared", l->declared);
    cJSON_AddStringToObject(o, "found", l->found);
    cJSON_AddNumberToObject(o, "weight_rel_fro", l->weight_rel_fro);
    cJSON *codes = cJSON_AddObjectToObject(o, "codes");
    cJSON_AddNumberToObject(codes, "count", (double)l->codes);
    cJSON_AddNumberToObject(codes, "equal", (double)l->equal);
    cJSON_AddNumberToObject(codes, "within_one", (double)l->within_one);
    cJSON_AddNumberToObject(codes, "beyond", (double)l->beyond);
    cJSON_AddNumberToObject(codes, "max_diff", l->max_code_diff);
    cJSON *scales = cJSON_AddObjectToObject(o, "scales");
    cJSON_AddNumberToObject(scales, "count", (double)l->scales);
    cJSON_AddNumberToObject(scales, "off_by_more_than_1_ulp", (double)l->scales_off);
    cJSON_AddNumberToObject(scales, "max_ulps", l->max_scale_ulps);
    cJSON_AddNumberToObject(o, "codes_alone_rel_fro", l->codes_alone_rel_fro);
    cJSON_AddNumberToObject(o, "scale_twice_rel_fro", l->scale_twice_rel_fro);
    cJSON *idem = cJSON_AddObjectToObject(o, "requantized_dequantized");
    cJSON_AddNumberToObject(idem, "scales_moved", (double)l->idem_scales_moved);
    cJSON_AddNumberToObject(idem, "codes_moved", (double)l->idem_codes_moved);
  }
  cJSON *findings = cJSON_AddArrayToObject(root, "findings");
  for (size_t i = 0; i < r->n_findings; i++) cJSON_AddItemToArray(findings, cJSON_CreateString(r->findings[i]));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
