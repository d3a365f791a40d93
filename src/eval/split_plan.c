#include "split_plan.h"

#include <stdio.h>
#include <string.h>

#include "numerics/format.h"
#include "numerics/split.h"

/* 256 bytes: cudaMalloc's alignment and cuBLASLt's default MIN_ALIGNMENT_*_BYTES. */
#define TERM_ALIGN_BYTES 256

static int64_t term_stride(const precis_lt_matrix *slot) {
  int64_t bytes = slot->elements * (int64_t)slot->elem_bytes;
  bytes = (bytes + TERM_ALIGN_BYTES - 1) / TERM_ALIGN_BYTES * TERM_ALIGN_BYTES;
  return bytes / (int64_t)slot->elem_bytes; /* elem_bytes (1, 2, 4 or 8) divides 256 */
}

bool precis_split_term_spec(const precis_spec *s, precis_spec *term, char *why, size_t len) {
  if (why && len) why[0] = '\0';
  precis_float_split fs;
  bool is_float = precis_float_split_of(s->split, &fs);
  if (!is_float && s->split != PRECIS_SPLIT_INT8XN) return false;
  const char *name = precis_split_name(s->split);
  if (s->scale != PRECIS_SCALE_DYNAMIC || precis_spec_smooths(s)) {
    if (why && len) snprintf(why, len, "split=%s: splits take no static scales or SmoothQuant", name);
    return false;
  }
  *term = *s; /* scale dynamic and smooth none, as checked; the operands and formats are set below */
  term->split = PRECIS_SPLIT_NONE;
  term->split_terms = 0;
  if (is_float) {
    if (s->a.fmt != PRECIS_FMT_F32 || s->b.fmt != PRECIS_FMT_F32 || s->acc != PRECIS_FMT_F32 ||
        s->out != PRECIS_FMT_F32) {
      if (why && len)
        snprintf(why, len, "split=%s: the cuda backend runs the float splits with a=fp32, b=fp32, acc=fp32, out=fp32",
                 name);
      return false;
    }
    /* tf32 terms travel as float32 read through COMPUTE_32F_FAST_TF32 (exact: they are tf32
     * values); bf16 terms as bf16 with a float32 D, so that the products are summed in fp32. */
    term->a = (precis_operand_spec){.fmt = fs.term_fmt, .gran = PRECIS_GRAN_NONE, .conv = PRECIS_QCONV_NONE};
    term->b = term->a;
    term->acc = PRECIS_FMT_F32;
    term->out = PRECIS_FMT_F32;
    return true;
  }
  bool wide_in = (s->a.fmt == PRECIS_FMT_F64 || s->a.fmt == PRECIS_FMT_F32) &&
                 (s->b.fmt == PRECIS_FMT_F64 || s->b.fmt == PRECIS_FMT_F32) && s->a.gran == PRECIS_GRAN_NONE &&
                 s->b.gran == PRECIS_GRAN_NONE;
  if (!wide_in || s->acc != PRECIS_FMT_F64 || (s->out != PRECIS_FMT_F64 && s->out != PRECIS_FMT_F32)) {
    if (why && len)
      snprintf(why, len, "split=int8x%d: the Ozaki recipes take fp32 or fp64 operands, acc=fp64 and out=fp64 or fp32",
               s->split_terms);
    return false;
  }
  /* The int8 route's layouts (TN, padding, at least 32 rows); its scales are not used: the slices
   * are exact integers and D's int32 products are read as they are. */
  term->a = (precis_operand_spec){.fmt = PRECIS_FMT_I8, .gran = PRECIS_GRAN_ROW, .conv = PRECIS_QCONV_SYM};
  term->b = (precis_operand_spec){.fmt = PRECIS_FMT_I8, .gran = PRECIS_GRAN_COL, .conv = PRECIS_QCONV_SYM};
  term->acc = PRECIS_FMT_I32;
  term->out = PRECIS_FMT_F32;
  return true;
}

precis_status precis_split_plan_make(const precis_spec *spec, int64_t m, int64_t n, int64_t k, int64_t batch,
                                     bool b_batched, int lt_version, precis_split_plan *plan) {
  memset(plan, 0, sizeof *plan);
  char why[256];
  precis_spec term;
  if (!precis_split_term_spec(spec, &term, why, sizeof why))
    return precis_fail(PRECIS_E_UNSUPPORTED, "%s", why[0] ? why : "not a split recipe");
  plan->spec = *spec;
  plan->term_spec = term;
  plan->ozaki = spec->split == PRECIS_SPLIT_INT8XN;
  if (plan->ozaki) {
    const int slices = spec->split_terms;
    /* Every slice product exact in int32: |sum| <= 127^2 k. */
    if (k > 133143) /* the cpu backend's limit (INT8_MAX_K), so that both refuse the same k */
      return precis_fail(PRECIS_E_UNSUPPORTED,
                         "split=int8x%d: k = %lld exceeds 133143, beyond which an int8 slice product may overflow "
                         "int32 (127^2 k >= 2^31)",
                         slices, (long long)k);
    plan->terms = slices;
    for (int g = slices + 1; g >= 2; g--)
      for (int s = 1; s <= slices; s++) {
        int t = g - s;
        if (t < 1 || t > slices) continue;
        plan->term_a[plan->products] = s - 1;
        plan->term_b[plan->products] = t - 1;
        plan->level[plan->products] = g;
        plan->products++;
      }
  } else {
    precis_float_split fs;
    precis_float_split_of(spec->split, &fs);
    plan->terms = fs.terms;
    /* The cpu backend's order (src/numerics/split.c): the smallest products first, big·big last. */
    for (int level = fs.max_level; level >= 0; level--)
      for (int i = 0; i < fs.terms; i++) {
        int j = level - i;
        if (j < 0 || j >= fs.terms) continue;
        plan->term_a[plan->products] = i;
        plan->term_b[plan->products] = j;
        plan->level[plan->products] = level;
        plan->products++;
      }
  }
  precis_status st = precis_gemm_plan_make_for(&term, m, n, k, batch, b_batched, lt_version, &plan->gemm);
  if (st != PRECIS_OK) return st;
  /* Term t of each operand starts t * stride into one buffer (kernels/cuda_hiprec.c). With a stride
   * of `elements`, odd shapes put a product's A and B pointers at 2- or 4-byte alignment: the
   * heuristic then offers only slow unaligned kernels (or none that fit 256, cublasLt.h's default
   * MIN_ALIGNMENT). Rounding the stride to 256 bytes keeps every term as aligned as the buffer. */
  plan->lt_a_term_stride = term_stride(&plan->gemm.lt_a);
  plan->lt_b_term_stride = term_stride(&plan->gemm.lt_b);
  const int64_t strides[2] = {plan->lt_a_term_stride * (int64_t)plan->gemm.lt_a.elem_bytes,
                              plan->lt_b_term_stride * (int64_t)plan->gemm.lt_b.elem_bytes};
  for (int i = 0; i < 2 && plan->terms > 1; i++) {
    int align = plan->gemm.call_align_bytes;
    while (align > 1 && strides[i] % align != 0) align /= 2;
    plan->gemm.call_align_bytes = align;
  }
  plan->lt_calls = (int64_t)plan->products * plan->gemm.lt_calls;
  return PRECIS_OK;
}

long long precis_split_plan_device_bytes(const precis_split_plan *plan) {
  const precis_gemm_plan *g = &plan->gemm;
  long long terms = (long long)plan->terms * (plan->lt_a_term_stride * (long long)g->lt_a.elem_bytes +
                                              plan->lt_b_term_stride * (long long)g->lt_b.elem_bytes);
  if (!plan->ozaki) return terms;
  long long out = g->batch * g->m * g->n;
  /* exponents, the level and running sums, the float64 output; D (int32) is the GEMM's own */
  return terms + 4 * (g->row_scale_count + g->col_scale_count) + 3 * 8 * out;
}

long long precis_split_plan_operand_bytes(const precis_split_plan *plan) {
  const precis_gemm_plan *g = &plan->gemm;
  return (long long)plan->terms * (plan->lt_a_term_stride * (long long)g->lt_a.elem_bytes +
                                   plan->lt_b_term_stride * (long long)g->lt_b.elem_bytes) +
         precis_lt_matrix_bytes(&g->lt_d);
}

void precis_split_plan_describe(const precis_split_plan *plan, precis_kv_list *details) {
  char buf[512];
  const precis_gemm_plan *g = &plan->gemm;
  const precis_format *tf = precis_format_get(plan->term_spec.a.fmt);
  precis_kv_set(details, "split", plan->ozaki ? "Ozaki scheme I on int8" : "float split");
  precis_kv_set_int(details, "split_terms", plan->terms);
  precis_kv_set_int(details, "split_products", plan->products);
  precis_kv_set_int(details, "lt_calls_total", plan->lt_calls);
  if (plan->ozaki)
    snprintf(buf, sizeof buf,
             "%d x int8 GEMM (A_lt, B_lt CUDA_R_8I, D CUDA_R_32I, CUBLAS_COMPUTE_32I, TN), %lld cublasLtMatmul call(s) "
             "each",
             plan->products, (long long)g->lt_calls);
  else
    snprintf(buf, sizeof buf, "%d x %s GEMM (A_lt, B_lt %s, D CUDA_R_32F, %s), %lld cublasLtMatmul call(s) each",
             plan->products, tf->name, tf->id == PRECIS_FMT_TF32 ? "CUDA_R_32F holding tf32 values" : "CUDA_R_16BF",
             g->compute_type == PRECIS_LT_COMPUTE_32F_FAST_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F",
             (long long)g->lt_calls);
  precis_kv_set(details, "split_call_types", buf);
  size_t used = 0;
  buf[0] = '\0';
  for (int q = 0; q < plan->products && used < sizeof buf; q++)
    used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s%d*%s%d", q ? " " : "", plan->ozaki ? "A" : "a",
                             plan->term_a[q] + (plan->ozaki ? 1 : 0), plan->ozaki ? "B" : "b",
                             plan->term_b[q] + (plan->ozaki ? 1 : 0));
  precis_kv_set(details, "split_order", buf);
  snprintf(buf, sizeof buf,
           "terms of b (A_lt) %lld bytes apart (%lld of data), terms of a (B_lt) %lld bytes apart (%lld of data): "
           "strides rounded up to 256 bytes, every product pointer 256-byte aligned",
           (long long)(plan->lt_a_term_stride * (int64_t)g->lt_a.elem_bytes),
           (long long)(g->lt_a.elements * (int64_t)g->lt_a.elem_bytes),
           (long long)(plan->lt_b_term_stride * (int64_t)g->lt_b.elem_bytes),
           (long long)(g->lt_b.elements * (int64_t)g->lt_b.elem_bytes));
  precis_kv_set(details, "split_term_stride", buf);
  if (plan->ozaki) {
    precis_kv_set(details, "split_operands",
                  "on the device: exponent per row of a / column of b (frexp of the amax), slices by truncation "
                  "toward zero (the cpu backend's rule), written as int8 in the int8 route's layouts");
    precis_kv_set(details, "split_combine",
                  "each int32 product added exactly into its level's float64 sum; levels from g = N+1 down to 2 "
                  "added scaled by 2^-7g into a float64 sum, times 2^(e_i + f_j): the cpu backend's order, bit for "
                  "bit");
  } else {
    precis_kv_set(details, "split_operands",
                  "on the device: t0 = RNE(x), t1 = RNE(x - t0), t2 = RNE(x - t0 - t1) in the term format");
    precis_kv_set(details, "split_combine",
                  "one float32 D: the first product with beta = 0, every later one with beta = 1 (D += A_i*B_j), "
                  "smallest level first; within a call the tensor cores' order over k");
  }
  precis_kv_set(details, "split_timing", "CUDA events around the splitting of a and b, every product GEMM and the "
                                         "combination (an FP32/FP64 GEMM's caller splits both each call)");
  precis_kv_set_int(details, "split_device_bytes", precis_split_plan_device_bytes(plan));
  precis_gemm_plan_describe(g, details);
}
