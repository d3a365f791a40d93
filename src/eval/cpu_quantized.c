/* The cpu backend's quantized GEMM (issue 16). Each operand becomes "units" and "factors": value =
 * unit x factor, where the factor is constant over a group and the units are what a kernel feeds
 * its multiply units:
 *   - fp32-scaled granularities (tensor, row, col, k<G>, <R>x<C>): units are the decoded codes
 *     (minus the zero point), factors the fp32 group scales;
 *   - mx / mx-rceil: units are the dequantized values (code x 2^e, exact), factor 1;
 *   - nv: units are code x E4M3 block scale (exact in fp32), factor the fp32 tensor scale;
 *   - an unscaled float operand: its values rounded to its format, factor 1;
 *   - weight-only (one operand scaled, the other an unscaled float): the scaled operand is
 *     dequantized in fp32 and rounded to the other operand's format, factor 1.
 * k is cut into segments at every group boundary of either operand; per segment the unit products
 * are summed (exactly in integers for s8/s4/u4 pairs with acc=s32, else fp32 sgemm), then
 * c += fp32(f_a * f_b) * partial in fp32, segment by segment in k order. With one segment and unit
 * factors that is just the GEMM of the units. This is the arithmetic of the scaled GEMMs it
 * emulates: outer-vector scales applied in the epilogue, 128-blocks promoted per k-block, MX and
 * NVFP4 block scales inside the block-scaled MMA (exact: powers of two, or E4M3 x E2M1). */
#include "cpu_quantized.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_gemm_fp16acc.h"
#include "numerics/format.h"
#include "numerics/format_bits.h"
#include "numerics/quant.h"
#include "numerics/quantize.h"
#include "sysinfo.h"

/* The target's MMA accumulator (src/numerics/target.h; docs/formats.md, "Target architectures"),
 * the model of the bit-accurate tensor-core studies (Fasi, Higham, Mikaitis & Pranesh 2021;
 * Khattak & Mikaitis, arXiv 2512.07004; MMA-Sim, arXiv 2511.10909): one instruction adds `block`
 * products (32 for fp8, 64 for fp4) to the accumulator D by aligning every term (D and each exact
 * product) to the largest exponent among them and truncating it to `fraction_bits` bits below that
 * exponent, summing the aligned terms exactly, and writing the sum into the fp32 D rounded toward
 * zero. D stays in the tensor core for the whole k (FAST_ACCUM; tcgen05's tensor memory), then
 * the f32 factors apply. fp8 FAST_ACCUM keeps 13 bits on sm_89/sm_90 and 25 on sm_100; the
 * block-scaled MMAs of sm_100 keep 25 (MXFP8) and 35 (MXFP4/NVFP4). The widths are the published
 * models'; the round-toward-zero write of D is Fasi et al.'s finding on V100-A100, assumed after. */
enum { HOPPER_FP8_FRACTION_BITS = 13, HOPPER_FP8_BLOCK = 32, MAX_MMA_BLOCK = 64 };

/* The binary exponent of a normal nonzero double. */
static int exponent_of(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return (int)((u >> 52) & 0x7ff) - 1023;
}

/* x truncated toward zero to a multiple of 2^quantum (clearing significand bits). */
static double truncate_to(double x, int quantum) {
  if (x == 0) return x;
  int keep = exponent_of(x) - quantum; /* fraction bits that stay */
  if (keep < 0) return 0.0;
  if (keep >= 52) return x;
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  u &= ~((UINT64_C(1) << (52 - keep)) - 1);
  memcpy(&x, &u, sizeof u);
  return x;
}

/* 2^e for a normal exponent e. */
static double pow2(int e) {
  uint64_t u = (uint64_t)(e + 1023) << 52;
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* One MMA chain over a segment of k for one output: D += one instruction's products at a time. The
 * aligned terms are counted in units of the quantum 2^(emax - bits): each is below 2^(bits+1) of
 * them, and the conversion to int64 truncates toward zero, so their sum is exact. */
static float mma_chain(const float *a, const float *b, size_t len, int fraction_bits, size_t block) {
  double d = 0.0, t[MAX_MMA_BLOCK];
  for (size_t p0 = 0; p0 < len; p0 += block) {
    size_t blen = len - p0 < block ? len - p0 : block;
    double big = fabs(d);
    for (size_t p = 0; p < blen; p++) {
      t[p] = (double)a[p0 + p] * (double)b[p0 + p]; /* exact: units have at most 24 significant bits */
      double m = fabs(t[p]);
      big = m > big ? m : big;
    }
    if (big == 0) continue;
    int quantum = exponent_of(big) - fraction_bits;
    double inv = pow2(-quantum);
    int64_t sum = (int64_t)(d * inv);
    for (size_t p = 0; p < blen; p++) sum += (int64_t)(t[p] * inv);
    double exact = (double)sum * pow2(quantum); /* below 2^(bits+8) quanta: exact */
    d = sum == 0 ? 0.0 : truncate_to(exact, exponent_of(exact) - 23); /* into the fp32 D, toward zero */
  }
  return (float)d;
}

typedef enum quant_kind {
  QUANT_FLOAT,       /* fp32 sums of units per segment */
  QUANT_INT,         /* exact integer sums per segment (acc=s32) */
  QUANT_WEIGHT_ONLY, /* the scaled operand dequantized to the other's format; one float GEMM */
} quant_kind;

typedef struct q_operand {
  float *units;     /* the matrices' units, contiguous */
  double *ints;     /* QUANT_INT: the same as integer-valued doubles */
  size_t count;     /* elements of units */
  float *factors;   /* per matrix fcount factors, index (r / grow) * fscols + c / gcol */
  size_t mats, fcount, grow, gcol, fscols;
  size_t klen;      /* group length along k (k when the factors do not vary along k) */
  bool unit;        /* every factor is 1 */
} q_operand;

struct precis_cpu_quant {
  const precis_spec *spec;
  const precis_workload_info *w;
  precis_host_tracker *tracker;
  quant_kind kind;
  size_t m, n, k, batch, mats;
  q_operand a, b;
  size_t *seg; /* nseg + 1 boundaries along k, seg[0] = 0, seg[nseg] = k */
  size_t nseg, seg_cap;
  float *partial;  /* rows x n, one segment's sums */
  /* The MMA accumulator model (acc_bits > 0): B's units transposed (per matrix n x k), so that each
   * output's chain reads both operands along k. */
  int acc_bits, acc_block;
  float *b_t;
  double *ipartial;
  float *fb_row;   /* n: B's factors of the current segment */
  double *f16_row; /* acc=fp16 scratch */
  bool direct;     /* one segment, unit factors: the GEMM writes c itself */
  char emulation[384];
};

static void *q_alloc(precis_cpu_quant *q, size_t count, size_t elem) {
  if (count == 0) count = 1;
  if (count > SIZE_MAX / elem) return NULL;
  return precis_tracked_alloc(q->tracker, count * elem);
}

static void q_free(precis_cpu_quant *q, void *p, size_t count, size_t elem) {
  if (count == 0) count = 1;
  if (p) precis_tracked_free(q->tracker, p, count * elem);
}

static bool spec_has_f64(const precis_spec *s) {
  return s->a.fmt == PRECIS_FMT_F64 || s->b.fmt == PRECIS_FMT_F64 || s->acc == PRECIS_FMT_F64 ||
         s->out == PRECIS_FMT_F64;
}

static bool is_fp8(precis_format_id f) { return f == PRECIS_FMT_E4M3 || f == PRECIS_FMT_E5M2; }

/* The operand forms cpu_backend.c has always run (kept there so that their outputs stay bit for bit). */
static bool legacy_operand(const precis_operand_spec *op, bool is_b) {
  if (!precis_operand_is_scaled(op)) return true;
  if (op->fmt == PRECIS_FMT_I8 && op->conv == PRECIS_QCONV_SYM)
    return is_b ? op->gran == PRECIS_GRAN_COL : op->gran == PRECIS_GRAN_ROW || op->gran == PRECIS_GRAN_TENSOR;
  return op->fmt == PRECIS_FMT_E4M3 && op->gran == PRECIS_GRAN_TENSOR && !precis_operand_scales_ue8m0(op);
}

bool precis_cpu_quant_claims(const precis_spec *s) {
  if (s->split != PRECIS_SPLIT_NONE || spec_has_f64(s)) return false;
  if (precis_spec_smooths(s) || is_fp8(s->out) || s->fast_accum) return true;
  /* Static scales: the original path has them for s8 A only. */
  if (s->scale != PRECIS_SCALE_DYNAMIC && !precis_operand_is_integer(&s->a)) return true;
  if (!legacy_operand(&s->a, false) || !legacy_operand(&s->b, true)) return true;
  bool a_int = precis_operand_is_integer(&s->a), b_int = precis_operand_is_integer(&s->b);
  if (a_int != b_int) return true; /* weight-only */
  /* s8 x s8 with float accumulation, and e4m3 with an unscaled float: new shapes of old operands. */
  if (a_int && s->acc != PRECIS_FMT_I32) return true;
  return precis_operand_is_scaled(&s->a) != precis_operand_is_scaled(&s->b);
}

static precis_quant_desc desc_of(const precis_operand_spec *op, precis_operand_side side) {
  precis_quant_desc d = {.elem = op->fmt, .side = side};
  switch (op->gran) {
  case PRECIS_GRAN_ROW: d.gran = PRECIS_QUANT_GRAN_ROW; break;
  case PRECIS_GRAN_COL: d.gran = PRECIS_QUANT_GRAN_COL; break;
  case PRECIS_GRAN_K: d.gran = PRECIS_QUANT_GRAN_K, d.group = op->group; break;
  case PRECIS_GRAN_BLOCK: d.gran = PRECIS_QUANT_GRAN_BLOCK, d.group = op->block_rows, d.group_cols = op->block_cols; break;
  case PRECIS_GRAN_MX: d.gran = PRECIS_QUANT_GRAN_MX; break;
  case PRECIS_GRAN_MX_RCEIL: d.gran = PRECIS_QUANT_GRAN_MX_RCEIL; break;
  case PRECIS_GRAN_NV: d.gran = PRECIS_QUANT_GRAN_NV; break;
  default: d.gran = PRECIS_QUANT_GRAN_TENSOR; break;
  }
  d.ints = op->conv == PRECIS_QCONV_SYM_HALF ? PRECIS_QUANT_INT_SYMMETRIC_HALF
           : op->conv == PRECIS_QCONV_ASYM   ? PRECIS_QUANT_INT_ASYMMETRIC
           : op->conv == PRECIS_QCONV_UE8M0  ? PRECIS_QUANT_FP8_UE8M0
                                             : PRECIS_QUANT_INT_SYMMETRIC;
  return d;
}

precis_quant_desc precis_cpu_quant_desc_of(const precis_operand_spec *op, precis_operand_side side) {
  return desc_of(op, side);
}

/* Units whose factors are 1 (the factor, if any, is exact and inside the units). */
static bool unit_factor_operand(const precis_operand_spec *op) {
  return !precis_operand_is_scaled(op) || op->gran == PRECIS_GRAN_MX || op->gran == PRECIS_GRAN_MX_RCEIL;
}

static quant_kind kind_of(const precis_spec *s) {
  bool a_sc = precis_operand_is_scaled(&s->a), b_sc = precis_operand_is_scaled(&s->b);
  if (precis_operand_is_integer(&s->a) && precis_operand_is_integer(&s->b) && s->acc == PRECIS_FMT_I32)
    return QUANT_INT;
  return a_sc != b_sc ? QUANT_WEIGHT_ONLY : QUANT_FLOAT;
}

bool precis_cpu_quant_route(const precis_spec *s, char *why, size_t len) {
  const precis_operand_spec *ops[2] = {&s->a, &s->b};
  char text[48];
  for (int i = 0; i < 2; i++) {
    if (!precis_operand_is_scaled(ops[i])) continue;
    precis_quant_desc d = desc_of(ops[i], i ? PRECIS_OPERAND_B : PRECIS_OPERAND_A);
    precis_quant_layout l;
    if (precis_quant_layout_of(&d, 1, 1, &l) != PRECIS_OK) {
      precis_operand_format(ops[i], text, sizeof text);
      snprintf(why, len, "%s=%s: %s", i ? "b" : "a", text, precis_last_error());
      return false;
    }
  }
  if (s->scale != PRECIS_SCALE_DYNAMIC && s->a.conv == PRECIS_QCONV_ASYM) {
    snprintf(why, len, "scale=%s with an asymmetric A: static zero points are not implemented on the cpu backend",
             precis_scale_method_name(s->scale));
    return false;
  }
  if (s->scale == PRECIS_SCALE_MSE && !(s->a.fmt == PRECIS_FMT_I8 && s->a.conv == PRECIS_QCONV_SYM)) {
    precis_operand_format(&s->a, text, sizeof text);
    snprintf(why, len, "scale=mse: the clip search minimizes the s8 (amax/127) error; for a=%s use scale=absmax or "
                       "scale=percentile=P", text);
    return false;
  }
  quant_kind kind = kind_of(s);
  if (s->acc == PRECIS_FMT_F16 && (kind == QUANT_FLOAT && !(unit_factor_operand(&s->a) && unit_factor_operand(&s->b)))) {
    snprintf(why, len, "acc=fp16 with fp32 group scales applied after the k-sum: not implemented on the cpu backend "
                       "(fp16 accumulation runs with unscaled, mx or weight-only operands)");
    return false;
  }
  if (s->smooth_auto && !(precis_operand_is_scaled(&s->a) && precis_operand_is_scaled(&s->b))) {
    snprintf(why, len, "smooth=auto searches alpha on the quantization error of both operands; a=%s,b=%s has an "
                       "unscaled one (give smooth=ALPHA)",
             precis_format_get(s->a.fmt)->name, precis_format_get(s->b.fmt)->name);
    return false;
  }
  if (why && len) why[0] = '\0';
  return true;
}

/* Largest |unit| of an integer operand (the s32 overflow bound). */
static double int_unit_bound(const precis_operand_spec *op) {
  double qmax = op->fmt == PRECIS_FMT_I8 ? 127 : 7;
  if (op->fmt == PRECIS_FMT_U4) return 15; /* q - zero with both in 0..15 */
  return op->conv == PRECIS_QCONV_SYM_HALF ? qmax + 1 : qmax;
}

static void describe_operand(const q_operand *o, const precis_operand_spec *op, const char *which, size_t rows,
                             size_t cols, precis_kv_list *details) {
  char text[48], buf[240], key[24];
  precis_operand_format(op, text, sizeof text);
  if (!precis_operand_is_scaled(op))
    snprintf(buf, sizeof buf, "%s: rounded (RNE), unscaled", text);
  else
    snprintf(buf, sizeof buf, "%s: dynamic scales; %s", text,
             o->unit ? "block scales exact inside the values (units), no factor after the sum"
             : o->fcount == 1 ? "one f32 factor per matrix, applied after the k-sum"
                              : "f32 group scales, applied per k-segment after its sum");
  (void)rows, (void)cols;
  snprintf(key, sizeof key, "%s_scales", which);
  precis_kv_set(details, key, buf);
}

/* Quantizes `mats` matrices of rows x cols (B with a tensor scale: one matrix of all of them) and
 * fills the operand's units and factors. round_to: weight-only, the format the dequantized values
 * are rounded to (PRECIS_FMT_F32: none); PRECIS_FMT_COUNT otherwise. */
static precis_status prep_operand(precis_cpu_quant *q, const precis_operand_spec *op, precis_operand_side side,
                                  const float *x, size_t rows, size_t cols, size_t mats, precis_format_id round_to,
                                  const float *static_amax, q_operand *o, size_t *clipped, char *reason,
                                  size_t reason_len) {
  precis_status st = PRECIS_OK;
  o->mats = mats;
  o->count = mats * rows * cols;
  o->units = q_alloc(q, o->count, sizeof(float));
  if (!o->units) goto oom;
  size_t k = side == PRECIS_OPERAND_A ? cols : rows;
  if (!precis_operand_is_scaled(op)) {
    const precis_format *f = precis_format_get(op->fmt);
    if (f->round_array) f->round_array(x, o->units, o->count);
    else memcpy(o->units, x, o->count * sizeof(float));
    o->fcount = 1, o->grow = rows, o->gcol = cols, o->fscols = 1, o->klen = k, o->unit = true;
    o->factors = q_alloc(q, mats, sizeof(float));
    if (!o->factors) goto oom;
    for (size_t g = 0; g < mats; g++) o->factors[g] = 1.0f;
    return PRECIS_OK;
  }
  precis_quant_desc d = desc_of(op, side);
  /* A B with one scale is one tensor, all its matrices together (as the fp8 preset always did). */
  size_t qmats = mats, qrows = rows;
  if (side == PRECIS_OPERAND_B && op->gran == PRECIS_GRAN_TENSOR) qmats = 1, qrows = mats * rows;
  precis_quant_layout l;
  if ((st = precis_quant_layout_of(&d, qrows, cols, &l)) != PRECIS_OK) {
    snprintf(reason, reason_len, "%s", precis_last_error());
    return st;
  }
  bool weight_only = round_to != PRECIS_FMT_COUNT;
  bool mx = op->gran == PRECIS_GRAN_MX || op->gran == PRECIS_GRAN_MX_RCEIL, nv = op->gran == PRECIS_GRAN_NV;
  o->unit = weight_only || mx;
  if (o->unit || nv) {
    o->fcount = 1, o->grow = rows, o->gcol = cols, o->fscols = 1, o->klen = k;
  } else {
    o->fcount = l.scale_count, o->grow = l.group_rows, o->gcol = l.group_cols, o->fscols = l.scale_cols;
    o->klen = side == PRECIS_OPERAND_A ? l.group_cols : l.group_rows;
    if (qmats == 1 && mats > 1) o->fcount = 1, o->grow = rows; /* the one tensor scale, for each matrix */
  }
  o->factors = q_alloc(q, mats * o->fcount, sizeof(float));
  precis_quant_tensor t = {0};
  t.codes = q_alloc(q, qrows * cols, 1);
  t.scales = q_alloc(q, l.scale_count, sizeof(float));
  t.zero_points = q_alloc(q, l.scale_count, 1);
  float *ones = q_alloc(q, l.scale_count, sizeof(float));
  if (!o->factors || !t.codes || !t.scales || !t.zero_points || !ones) {
    q_free(q, t.codes, qrows * cols, 1);
    q_free(q, t.scales, l.scale_count, sizeof(float));
    q_free(q, t.zero_points, l.scale_count, 1);
    q_free(q, ones, l.scale_count, sizeof(float));
    goto oom;
  }
  for (size_t i = 0; i < l.scale_count; i++) ones[i] = 1.0f;
  for (size_t g = 0; g < qmats && st == PRECIS_OK; g++) {
    const float *xg = x + g * qrows * cols;
    float *ug = o->units + g * qrows * cols;
    st = static_amax ? precis_quantize_with_amax(&d, xg, qrows, cols, *static_amax, &t)
                     : precis_quantize(&d, xg, qrows, cols, &t);
    if (st != PRECIS_OK) break;
    *clipped += t.clipped;
    if (o->unit) {
      /* Dequantized values: exact for mx (a power-of-two scale); weight-only then rounds them. */
      if ((st = precis_dequantize(&d, &t, qrows, cols, ug)) != PRECIS_OK) break;
      const precis_format *f = weight_only ? precis_format_get(round_to) : NULL;
      if (f && f->round_array) f->round_array(ug, ug, qrows * cols);
      o->factors[g] = 1.0f;
    } else if (nv) {
      /* code x block scale (exact), the tensor scale as the factor. */
      float s2 = t.tensor_scale;
      t.tensor_scale = 1.0f;
      if ((st = precis_dequantize(&d, &t, qrows, cols, ug)) != PRECIS_OK) break;
      o->factors[g] = s2;
    } else {
      /* The group scales become factors; the units are the codes (minus zero points). */
      float *scales = t.scales;
      memcpy(o->factors + g * o->fcount, scales, o->fcount * sizeof(float));
      t.scales = ones;
      st = precis_dequantize(&d, &t, qrows, cols, ug);
      t.scales = scales;
    }
  }
  if (st == PRECIS_OK && qmats == 1 && mats > 1)
    for (size_t g = 1; g < mats; g++) o->factors[g] = o->factors[0];
  if (st != PRECIS_OK) snprintf(reason, reason_len, "%s", precis_last_error());
  q_free(q, t.codes, qrows * cols, 1);
  q_free(q, t.scales, l.scale_count, sizeof(float));
  q_free(q, t.zero_points, l.scale_count, 1);
  q_free(q, ones, l.scale_count, sizeof(float));
  return st;
oom:
  snprintf(reason, reason_len, "host allocation for the quantized %s operand (%zu elements) failed",
           side == PRECIS_OPERAND_A ? "A" : "B", mats * rows * cols);
  return PRECIS_E_DOES_NOT_FIT;
}

/* Every group boundary of either operand along k. */
static precis_status make_segments(precis_cpu_quant *q) {
  size_t la = q->a.klen ? q->a.klen : q->k, lb = q->b.klen ? q->b.klen : q->k;
  q->seg_cap = (q->k - 1) / la + (q->k - 1) / lb + 2;
  q->seg = q_alloc(q, q->seg_cap, sizeof(size_t));
  if (!q->seg) return PRECIS_E_DOES_NOT_FIT;
  size_t n = 0, pa = la, pb = lb;
  q->seg[n++] = 0;
  while (true) {
    size_t next = pa < pb ? pa : pb;
    if (next >= q->k) break;
    q->seg[n++] = next;
    if (pa == next) pa += la;
    if (pb == next) pb += lb;
  }
  q->seg[n] = q->k;
  q->nseg = n;
  return PRECIS_OK;
}

/* Smooths copies of A and B, with scales from the calibration split (one s per B matrix). */
static precis_status smooth_operands(precis_cpu_quant *q, const precis_workload_data *d, float *a_sm, float *b_sm,
                                     float *s_first, precis_kv_list *details, precis_row_status *status, char *reason,
                                     size_t len) {
  const precis_spec *s = q->spec;
  const precis_workload_info *w = q->w;
  size_t k = q->k, n = q->n, m = q->m;
  /* Without a calibration split the scales come from the evaluated A itself (the report says so). */
  bool calib = d->calib_a && w->calib_samples > 0;
  const float *xs = calib ? d->calib_a : d->a;
  size_t crows = (calib ? (size_t)w->calib_samples : q->batch) * m;
  float *sv = q_alloc(q, k, sizeof(float));
  if (!sv) {
    *status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(reason, len, "host allocation of the %zu SmoothQuant scales failed", k);
    return PRECIS_E_DOES_NOT_FIT;
  }
  memcpy(a_sm, d->a, q->batch * m * k * sizeof(float));
  memcpy(b_sm, d->b, q->mats * k * n * sizeof(float));
  precis_status st = PRECIS_OK;
  double alpha = s->smooth;
  for (size_t g = 0; g < q->mats && st == PRECIS_OK; g++) {
    const float *bg = d->b + g * k * n;
    if (s->smooth_auto) {
      precis_smooth_gemm_ctx ctx = {.x = xs, .w = bg, .m = crows, .k = k, .n = n,
                                    .a = desc_of(&s->a, PRECIS_OPERAND_A), .b = desc_of(&s->b, PRECIS_OPERAND_B)};
      st = precis_smooth_search(xs, crows, k, bg, n, precis_smooth_gemm_error, &ctx, &alpha, sv);
    } else {
      st = precis_smooth_scales(xs, crows, k, bg, n, alpha, sv);
    }
    if (st != PRECIS_OK) break;
    if (g == 0 && s_first) memcpy(s_first, sv, k * sizeof *sv);
    /* A shared B smooths every row of A; a per-batch B the rows of its own batch element. */
    size_t a_rows = q->mats == 1 ? q->batch * m : m;
    precis_smooth_apply(a_sm + g * m * k, a_rows, k, b_sm + g * k * n, n, sv);
  }
  if (st != PRECIS_OK) {
    *status = PRECIS_ROW_FAILED;
    snprintf(reason, len, "smooth: %s", precis_last_error());
  } else {
    char buf[240], from[96];
    if (calib) snprintf(from, sizeof from, "%lld calibration samples", (long long)w->calib_samples);
    else snprintf(from, sizeof from, "the evaluated A (the workload has no calibration split)");
    snprintf(buf, sizeof buf, "SmoothQuant: s_j = max|X_j|^a / max|W_j|^(1-a) from %s, A/s and s*B before "
                              "quantizing%s",
             from, s->smooth_auto ? ", a searched over 0..1 step 0.1" : "");
    precis_kv_set(details, "smooth", buf);
    /* auto with several B matrices: the alpha of the last one (each is searched on its own). */
    precis_kv_set_number(details, "smooth_alpha", alpha);
  }
  q_free(q, sv, k, sizeof(float));
  return st;
}

/* The calibration method behind a static scale spec. */
static precis_calib_method calib_method_of(precis_scale_method m) {
  return m == PRECIS_SCALE_ABSMAX ? PRECIS_CALIB_ABSMAX : m == PRECIS_SCALE_PERCENTILE ? PRECIS_CALIB_PERCENTILE
                                                                                       : PRECIS_CALIB_MSE;
}

/* A's static amax from the calibration split, smoothed by s (all ones without SmoothQuant). */
static precis_status static_amax(precis_cpu_quant *q, const precis_workload_data *d, const float *s, float *amax,
                                 precis_kv_list *details, precis_row_status *status, char *reason, size_t len) {
  size_t rows = (size_t)q->w->calib_samples * q->m, k = q->k;
  float *x = q_alloc(q, rows * k, sizeof(float));
  if (!x) {
    *status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(reason, len, "host allocation of the %zux%zu calibration copy failed", rows, k);
    return PRECIS_E_DOES_NOT_FIT;
  }
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < k; j++) x[i * k + j] = precis_div_rn(d->calib_a[i * k + j], s[j]);
  precis_status st = precis_calib_amax(x, rows * k, calib_method_of(q->spec->scale), q->spec->percentile, amax);
  q_free(q, x, rows * k, sizeof(float));
  if (st != PRECIS_OK) {
    *status = PRECIS_ROW_FAILED;
    snprintf(reason, len, "calibration failed: %s", precis_last_error());
    return st;
  }
  precis_kv_set_number(details, "a_amax_static", *amax);
  return PRECIS_OK;
}

static precis_status to_ints(precis_cpu_quant *q, q_operand *o) {
  o->ints = q_alloc(q, o->count, sizeof(double));
  if (!o->ints) return PRECIS_E_DOES_NOT_FIT;
  for (size_t i = 0; i < o->count; i++) o->ints[i] = (double)o->units[i];
  /* The float units are not read again. */
  q_free(q, o->units, o->count, sizeof(float));
  o->units = NULL;
  return PRECIS_OK;
}

precis_status precis_cpu_quant_prepare(const precis_spec *spec, const precis_workload_info *w,
                                       const precis_workload_data *d, const precis_acc_model *model,
                                       precis_host_tracker *tracker,
                                       precis_kv_list *details, precis_cpu_quant **out, size_t *clipped,
                                       precis_row_status *status, char *reason, size_t reason_len) {
  *out = NULL;
  precis_cpu_quant *q = calloc(1, sizeof *q);
  if (!q) {
    *status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(reason, reason_len, "host allocation of the quantized GEMM state failed");
    return PRECIS_E_DOES_NOT_FIT;
  }
  q->spec = spec, q->w = w, q->tracker = tracker;
  q->m = (size_t)w->m, q->n = (size_t)w->n, q->k = (size_t)w->k, q->batch = (size_t)w->batch;
  q->mats = w->b_batched ? q->batch : 1;
  q->kind = kind_of(spec);
  /* fp16/bf16/tf32 models belong to plain float specs (cpu_gemm_mma.c, run by cpu_backend.c); a
   * quantized spec of those operands (an fp8 output, say) keeps its fp32 sums. */
  bool chain_model = model && model->fraction_bits > 0 && model->family != PRECIS_MMA_F16 &&
                     model->family != PRECIS_MMA_TF32;
  if (q->kind == QUANT_FLOAT && chain_model)
    q->acc_bits = model->fraction_bits,
    q->acc_block = model->block > 0 && model->block <= MAX_MMA_BLOCK ? model->block : HOPPER_FP8_BLOCK;
  else if (spec->fast_accum)
    q->acc_bits = HOPPER_FP8_FRACTION_BITS, q->acc_block = HOPPER_FP8_BLOCK;
  size_t a_count = q->batch * q->m * q->k, b_count = q->mats * q->k * q->n, k_count = q->k;
  float *a_sm = NULL, *b_sm = NULL, *s_first = NULL;
  const float *a_src = d->a, *b_src = d->b;
  precis_status st = PRECIS_OK;
  *status = PRECIS_ROW_OK;

  bool is_static = spec->scale != PRECIS_SCALE_DYNAMIC;
  if (is_static && (!d->calib_a || w->calib_samples <= 0)) {
    st = PRECIS_E_INPUT;
    *status = PRECIS_ROW_FAILED;
    snprintf(reason, reason_len, "scale=%s: static activation scales need the workload's calibration split (calib/a), "
                                 "which it lacks", precis_scale_method_name(spec->scale));
    goto done;
  }
  if (is_static && precis_spec_smooths(spec) && q->mats > 1) {
    st = PRECIS_E_UNSUPPORTED;
    *status = PRECIS_ROW_UNSUPPORTED;
    snprintf(reason, reason_len, "static scales with SmoothQuant and a per-batch b: one calibration amax cannot serve "
                                 "the %zu smoothings", q->mats);
    goto done;
  }
  if (is_static) {
    s_first = q_alloc(q, q->k, sizeof(float));
    if (!s_first) {
      st = PRECIS_E_DOES_NOT_FIT;
      *status = PRECIS_ROW_DOES_NOT_FIT;
      snprintf(reason, reason_len, "host allocation of the smoothing scales failed");
      goto done;
    }
    for (size_t j = 0; j < q->k; j++) s_first[j] = 1.0f;
  }
  if (precis_spec_smooths(spec)) {
    a_sm = q_alloc(q, a_count, sizeof(float));
    b_sm = q_alloc(q, b_count, sizeof(float));
    if (!a_sm || !b_sm) {
      st = PRECIS_E_DOES_NOT_FIT;
      *status = PRECIS_ROW_DOES_NOT_FIT;
      snprintf(reason, reason_len, "host allocation of the smoothed operands failed");
      goto done;
    }
    if ((st = smooth_operands(q, d, a_sm, b_sm, s_first, details, status, reason, reason_len)) != PRECIS_OK) goto done;
    a_src = a_sm, b_src = b_sm;
  }
  float amax_static = 0.0f;
  if (is_static && (st = static_amax(q, d, s_first, &amax_static, details, status, reason, reason_len)) != PRECIS_OK)
    goto done;

  precis_format_id a_round = PRECIS_FMT_COUNT, b_round = PRECIS_FMT_COUNT;
  if (q->kind == QUANT_WEIGHT_ONLY) {
    if (precis_operand_is_scaled(&spec->a)) a_round = spec->b.fmt;
    else b_round = spec->a.fmt;
  }
  st = prep_operand(q, &spec->a, PRECIS_OPERAND_A, a_src, q->batch * q->m, q->k, 1, a_round,
                    is_static ? &amax_static : NULL, &q->a, clipped, reason, reason_len);
  if (st == PRECIS_OK)
    st = prep_operand(q, &spec->b, PRECIS_OPERAND_B, b_src, q->k, q->n, q->mats, b_round, NULL, &q->b, clipped, reason,
                      reason_len);
  if (st == PRECIS_OK && (st = make_segments(q)) != PRECIS_OK) snprintf(reason, reason_len, "out of memory (segments)");
  if (st != PRECIS_OK) {
    *status = st == PRECIS_E_DOES_NOT_FIT ? PRECIS_ROW_DOES_NOT_FIT : PRECIS_ROW_FAILED;
    goto done;
  }
  describe_operand(&q->a, &spec->a, "a", q->batch * q->m, q->k, details);
  if (is_static) {
    char buf[160];
    snprintf(buf, sizeof buf, "per tensor, static from %lld calibration samples (%s%s)", (long long)w->calib_samples,
             precis_scale_method_name(spec->scale), precis_spec_smooths(spec) ? ", of the smoothed calib/a" : "");
    precis_kv_set(details, "a_scales", buf);
  }
  describe_operand(&q->b, &spec->b, "b", q->k, q->n, details);

  size_t max_seg = 0;
  for (size_t s = 0; s < q->nseg; s++)
    if (q->seg[s + 1] - q->seg[s] > max_seg) max_seg = q->seg[s + 1] - q->seg[s];
  if (q->kind == QUANT_INT) {
    double bound = int_unit_bound(&spec->a) * int_unit_bound(&spec->b) * (double)max_seg;
    if (bound > 2147483647.0) {
      st = PRECIS_E_UNSUPPORTED;
      *status = PRECIS_ROW_UNSUPPORTED;
      snprintf(reason, reason_len, "k-segment of %zu: s32 accumulation could overflow (%.0f > 2^31-1); use k-groups",
               max_seg, bound);
      goto done;
    }
    if ((st = to_ints(q, &q->a)) != PRECIS_OK || (st = to_ints(q, &q->b)) != PRECIS_OK) {
      *status = PRECIS_ROW_DOES_NOT_FIT;
      snprintf(reason, reason_len, "host allocation of the integer operands failed");
      goto done;
    }
  }
  /* The MMA accumulator model always takes the segment path, which holds it (mma_segment). */
  q->direct = q->nseg == 1 && q->a.unit && q->b.unit && q->kind != QUANT_INT && q->acc_bits == 0;
  size_t rows = w->b_batched ? q->m : q->batch * q->m;
  if (!q->direct) {
    q->fb_row = q_alloc(q, q->n, sizeof(float));
    if (q->kind == QUANT_INT) q->ipartial = q_alloc(q, rows * q->n, sizeof(double));
    else q->partial = q_alloc(q, rows * q->n, sizeof(float));
  }
  if (q->acc_bits > 0) {
    if (!(q->b_t = q_alloc(q, q->b.count, sizeof(float)))) {
      st = PRECIS_E_DOES_NOT_FIT;
      *status = PRECIS_ROW_DOES_NOT_FIT;
      snprintf(reason, reason_len, "host allocation of the transposed B units (%zu) failed", q->b.count);
      goto done;
    }
    for (size_t g = 0; g < q->mats; g++)
      for (size_t p = 0; p < q->k; p++)
        for (size_t j = 0; j < q->n; j++) q->b_t[(g * q->n + j) * q->k + p] = q->b.units[(g * q->k + p) * q->n + j];
  }
  if (spec->acc == PRECIS_FMT_F16) q->f16_row = q_alloc(q, q->n, sizeof(double));
  if ((!q->direct && (!q->fb_row || (!q->ipartial && !q->partial))) || (spec->acc == PRECIS_FMT_F16 && !q->f16_row)) {
    st = PRECIS_E_DOES_NOT_FIT;
    *status = PRECIS_ROW_DOES_NOT_FIT;
    snprintf(reason, reason_len, "host allocation of the %zux%zu partial sums failed", rows, q->n);
    goto done;
  }
  const char *sums = spec->acc == PRECIS_FMT_F16 ? "every partial sum rounded to fp16 (sequential k)"
                                                 : "f32 products and sums (OpenBLAS sgemm)";
  if (q->acc_bits > 0)
    snprintf(q->emulation, sizeof q->emulation,
             "tensor-core accumulator model (%s): per instruction of %d products, D and the exact products "
             "aligned to the largest exponent and truncated to %d fraction bits, summed exactly, written to the "
             "fp32 D toward zero; D kept over the whole k, then the f32 factors",
             spec->fast_accum ? "fp8 FAST_ACCUM" : "block-scaled MMA", q->acc_block, q->acc_bits);
  else if (q->kind == QUANT_INT)
    snprintf(q->emulation, sizeof q->emulation,
             "exact integer products and s32 sums per k-segment (%zu), then c += (s_a*s_b)*float(acc) in f32", q->nseg);
  else if (q->kind == QUANT_WEIGHT_ONLY)
    snprintf(q->emulation, sizeof q->emulation, "%s dequantized in f32 and rounded to %s, then %s",
             precis_operand_is_scaled(&spec->a) ? "A" : "B",
             precis_format_get(precis_operand_is_scaled(&spec->a) ? spec->b.fmt : spec->a.fmt)->name, sums);
  else if (q->direct)
    snprintf(q->emulation, sizeof q->emulation, "dequantized operands (exact), %s", sums);
  else
    snprintf(q->emulation, sizeof q->emulation,
             "decoded codes, f32 sums per k-segment (%zu, OpenBLAS sgemm), then c += (s_a*s_b)*partial in f32",
             q->nseg);
  precis_kv_set_int(details, "k_segments", (long long)q->nseg);
  *out = q;
  q = NULL;
done:
  q_free(*out ? *out : q, a_sm, a_count, sizeof(float));
  q_free(*out ? *out : q, b_sm, b_count, sizeof(float));
  q_free(*out ? *out : q, s_first, k_count, sizeof(float));
  if (q) precis_cpu_quant_free(q);
  return st;
}

/* c (+)= fp32(f_a[i] * f_b[j]) * partial, for one segment of one GEMM. */
static void scale_segment(precis_cpu_quant *q, float *c, size_t rows, size_t row0, size_t g, size_t k0, bool first) {
  const q_operand *a = &q->a, *b = &q->b;
  const float *fb = b->factors + g * b->fcount + (k0 / b->grow) * b->fscols;
  for (size_t j = 0; j < q->n; j++) q->fb_row[j] = fb[j / b->gcol];
  for (size_t i = 0; i < rows; i++) {
    float fa = a->factors[((row0 + i) / a->grow) * a->fscols + k0 / a->gcol];
    float *ci = c + i * q->n;
    if (q->kind == QUANT_INT) {
      const double *p = q->ipartial + i * q->n;
      for (size_t j = 0; j < q->n; j++) {
        float v = precis_mul_rn(precis_mul_rn(fa, q->fb_row[j]), (float)p[j]);
        ci[j] = first ? v : ci[j] + v;
      }
    } else {
      const float *p = q->partial + i * q->n;
      for (size_t j = 0; j < q->n; j++) {
        float v = precis_mul_rn(precis_mul_rn(fa, q->fb_row[j]), p[j]);
        ci[j] = first ? v : ci[j] + v;
      }
    }
  }
}

/* Rows [first, last) of one segment's sums in the tensor-core accumulator model (mma_chain per
 * output) into q->partial. */
typedef struct mma_segment_job {
  precis_cpu_quant *q;
  size_t first, last, row0, g, k0, len;
} mma_segment_job;

static void *mma_segment_rows(void *arg) {
  const mma_segment_job *job = arg;
  precis_cpu_quant *q = job->q;
  size_t n = q->n, k = q->k;
  for (size_t i = job->first; i < job->last; i++) {
    const float *ai = q->a.units + (job->row0 + i) * k + job->k0;
    for (size_t j = 0; j < n; j++)
      q->partial[i * n + j] =
          mma_chain(ai, q->b_t + (job->g * n + j) * k + job->k0, job->len, q->acc_bits, (size_t)q->acc_block);
  }
  return NULL;
}

#define MMA_SEGMENT_MAX_THREADS 64
#define MMA_SEGMENT_MIN_WORK (1u << 18) /* products per thread (a chain costs ~10 ns a product) */

/* One segment, the rows split over the online CPUs (issue 40: threads on every core). Each output's
 * chain is independent of the others, so the bits do not depend on the split. */
static void mma_segment(precis_cpu_quant *q, size_t rows, size_t row0, size_t g, size_t k0, size_t len) {
  size_t cpus = precis_online_cpus();
  size_t threads = cpus > MMA_SEGMENT_MAX_THREADS ? MMA_SEGMENT_MAX_THREADS : cpus;
  double work = (double)rows * (double)q->n * (double)len;
  while (threads > 1 && work / (double)threads < (double)MMA_SEGMENT_MIN_WORK) threads--;
  if (threads > rows) threads = rows > 0 ? rows : 1;
  mma_segment_job jobs[MMA_SEGMENT_MAX_THREADS];
  pthread_t ids[MMA_SEGMENT_MAX_THREADS];
  bool started[MMA_SEGMENT_MAX_THREADS];
  for (size_t t = 0; t < threads; t++) {
    jobs[t] = (mma_segment_job){q, rows * t / threads, rows * (t + 1) / threads, row0, g, k0, len};
    started[t] = t > 0 && pthread_create(&ids[t], NULL, mma_segment_rows, &jobs[t]) == 0;
  }
  for (size_t t = 0; t < threads; t++)
    if (!started[t]) mma_segment_rows(&jobs[t]); /* the first, and any that could not start */
  for (size_t t = 1; t < threads; t++)
    if (started[t]) pthread_join(ids[t], NULL);
}

void precis_cpu_quant_gemm(precis_cpu_quant *q, float *c) {
  size_t m = q->m, n = q->n, k = q->k;
  bool batched = q->mats > 1;
  size_t groups = batched ? q->batch : 1, rows = batched ? m : q->batch * m;
  for (size_t g = 0; g < groups; g++) {
    size_t row0 = g * rows;
    float *cg = c + row0 * n;
    if (q->direct) {
      const float *ag = q->a.units + row0 * k, *bg = q->b.units + g * k * n;
      if (q->spec->acc == PRECIS_FMT_F16) precis_gemm_fp16acc(ag, bg, cg, rows, n, k, q->f16_row);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, ag, (int)k, bg, (int)n,
                    0.0f, cg, (int)n);
      continue;
    }
    for (size_t s = 0; s < q->nseg; s++) {
      size_t k0 = q->seg[s], len = q->seg[s + 1] - k0;
      if (q->kind == QUANT_INT)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)len, 1.0,
                    q->a.ints + row0 * k + k0, (int)k, q->b.ints + g * k * n + k0 * n, (int)n, 0.0, q->ipartial,
                    (int)n);
      else if (q->acc_bits > 0)
        mma_segment(q, rows, row0, g, k0, len);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)len, 1.0f,
                    q->a.units + row0 * k + k0, (int)k, q->b.units + g * k * n + k0 * n, (int)n, 0.0f, q->partial,
                    (int)n);
      scale_segment(q, cg, rows, row0, g, k0, s == 0);
    }
  }
}

bool precis_cpu_quant_finish(precis_cpu_quant *q, float *c, precis_kv_list *details) {
  const precis_spec *s = q->spec;
  size_t count = q->batch * q->m * q->n;
  if (is_fp8(s->out)) {
    /* fp8 output: D = fp8(c / scale_D) with the current-scaling scale_D = amax(c) / max (amax read
     * back), the output handed on dequantized (code x scale_D). */
    precis_quant_desc d = {.elem = s->out, .gran = PRECIS_QUANT_GRAN_TENSOR, .side = PRECIS_OPERAND_A};
    precis_quant_tensor t = {0};
    t.codes = q_alloc(q, count, 1);
    t.scales = q_alloc(q, 1, sizeof(float));
    bool ok = t.codes && t.scales && precis_quantize(&d, c, count, 1, &t) == PRECIS_OK &&
              precis_dequantize(&d, &t, count, 1, c) == PRECIS_OK;
    if (ok) {
      precis_kv_set_number(details, "d_scale", t.scales[0]);
      precis_kv_set(details, "d_scaling", "fp8 output: scale_D = amax(D)/max of the f32 result (current scaling)");
    }
    q_free(q, t.codes, count, 1);
    q_free(q, t.scales, 1, sizeof(float));
    return ok;
  }
  const precis_format *out = precis_format_get(s->out);
  if (s->out != s->acc && out->round_array) out->round_array(c, c, count);
  return true;
}

const char *precis_cpu_quant_emulation(const precis_cpu_quant *q) { return q->emulation; }

static void free_operand(precis_cpu_quant *q, q_operand *o);

precis_status precis_cpu_quant_dequantized_inputs(const precis_spec *spec, const precis_workload_info *w,
                                                  const precis_workload_data *d, float **a_out, float **b_out,
                                                  size_t *clipped, char *reason, size_t reason_len) {
  return precis_cpu_quant_dequantized_inputs_alpha(spec, w, d, a_out, b_out, NULL, clipped, reason, reason_len);
}

precis_status precis_cpu_quant_dequantized_inputs_alpha(const precis_spec *spec, const precis_workload_info *w,
                                                        const precis_workload_data *d, float **a_out, float **b_out,
                                                        float *alpha, size_t *clipped, char *reason,
                                                        size_t reason_len) {
  *a_out = *b_out = NULL;
  if (alpha) *alpha = 1.0f;
  if (precis_spec_smooths(spec) || spec->scale != PRECIS_SCALE_DYNAMIC) {
    snprintf(reason, reason_len, "dequantized inputs: smoothing and static scales are not covered");
    return PRECIS_E_UNSUPPORTED;
  }
  precis_host_tracker tracker = {0};
  precis_cpu_quant q = {.spec = spec, .w = w, .tracker = &tracker};
  q.m = (size_t)w->m, q.n = (size_t)w->n, q.k = (size_t)w->k, q.batch = (size_t)w->batch;
  q.mats = w->b_batched ? q.batch : 1;
  q.kind = kind_of(spec);
  precis_format_id a_round = PRECIS_FMT_COUNT, b_round = PRECIS_FMT_COUNT;
  if (q.kind == QUANT_WEIGHT_ONLY) {
    if (precis_operand_is_scaled(&spec->a)) a_round = spec->b.fmt;
    else b_round = spec->a.fmt;
  }
  size_t a_count = q.batch * q.m * q.k, b_count = q.mats * q.k * q.n;
  precis_status st = prep_operand(&q, &spec->a, PRECIS_OPERAND_A, d->a, q.batch * q.m, q.k, 1, a_round, NULL, &q.a,
                                  clipped, reason, reason_len);
  if (st == PRECIS_OK)
    st = prep_operand(&q, &spec->b, PRECIS_OPERAND_B, d->b, q.k, q.n, q.mats, b_round, NULL, &q.b, clipped, reason,
                      reason_len);
  /* nv: one fp32 factor per matrix (the tensor scale), applied by the cpu backend as
   * fp32(f_a * f_b) times the whole k-sum: the same product becomes the GEMM's alpha. */
  bool per_matrix = alpha && (q.a.unit || q.a.fcount == 1) && (q.b.unit || q.b.fcount == 1) &&
                    q.a.klen == q.k && q.b.klen == q.k;
  if (st == PRECIS_OK && (!q.a.unit || !q.b.unit) && !per_matrix) {
    snprintf(reason, reason_len, "dequantized inputs: the spec has f32 group scales applied after the k-sum");
    st = PRECIS_E_UNSUPPORTED;
  }
  if (st == PRECIS_OK && per_matrix) {
    for (size_t g = 1; g < q.b.mats && st == PRECIS_OK; g++)
      if (q.b.factors[g] != q.b.factors[0]) {
        snprintf(reason, reason_len, "dequantized inputs: b per batch element has %zu different nv tensor scales, and "
                                     "one GEMM has one alpha (run it on the cpu backend)", q.b.mats);
        st = PRECIS_E_UNSUPPORTED;
      }
    if (st == PRECIS_OK) *alpha = precis_mul_rn(q.a.factors[0], q.b.factors[0]);
  }
  if (st == PRECIS_OK) {
    *a_out = malloc(a_count * sizeof(float));
    *b_out = malloc(b_count * sizeof(float));
    if (!*a_out || !*b_out) {
      free(*a_out), free(*b_out);
      *a_out = *b_out = NULL;
      snprintf(reason, reason_len, "host allocation of the dequantized operands failed");
      st = PRECIS_E_DOES_NOT_FIT;
    } else {
      memcpy(*a_out, q.a.units, a_count * sizeof(float));
      memcpy(*b_out, q.b.units, b_count * sizeof(float));
    }
  }
  free_operand(&q, &q.a);
  free_operand(&q, &q.b);
  return st;
}

static void free_operand(precis_cpu_quant *q, q_operand *o) {
  q_free(q, o->units, o->count, sizeof(float));
  q_free(q, o->ints, o->count, sizeof(double));
  q_free(q, o->factors, o->mats * o->fcount, sizeof(float));
  memset(o, 0, sizeof *o);
}

void precis_cpu_quant_free(precis_cpu_quant *q) {
  if (!q) return;
  size_t rows = q->mats > 1 ? q->m : q->batch * q->m;
  q_free(q, q->b_t, q->b.count, sizeof(float));
  free_operand(q, &q->a);
  free_operand(q, &q->b);
  q_free(q, q->seg, q->seg_cap, sizeof(size_t));
  q_free(q, q->partial, rows * q->n, sizeof(float));
  q_free(q, q->ipartial, rows * q->n, sizeof(double));
  q_free(q, q->fb_row, q->n, sizeof(float));
  q_free(q, q->f16_row, q->n, sizeof(double));
  free(q);
}
