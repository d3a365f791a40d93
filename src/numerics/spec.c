#include "spec.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_GROUP = 1 << 20, MAX_SPLIT_TERMS = 16, MAX_CRT_MODULI = 20 };

static const char *const field_names[] = {"a", "b", "acc", "out", "scale", "smooth", "split"};
enum { FIELD_A, FIELD_B, FIELD_ACC, FIELD_OUT, FIELD_SCALE, FIELD_SMOOTH, FIELD_SPLIT, FIELD_COUNT };

#define OPERAND_FORMATS "fp64, fp32, tf32, fp16, bf16, e4m3, e5m2, e2m1, e2m3, e3m2, s8, s4, u4, s3, s2"
#define OUT_FORMATS "fp64, fp32, tf32, fp16, bf16, e4m3, e5m2"
#define GRANULARITIES "tensor, row, col, k<G>, <R>x<C>, mx, mx-rceil, nv"

/* Format names of the grammar: the table's, plus the aliases DESIGN §11 accepts. */
static bool format_from_name(const char *name, precis_format_id *out) {
  static const struct {
    const char *alias, *name;
  } aliases[] = {{"f64", "fp64"}, {"f32", "fp32"}, {"f16", "fp16"}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) name = aliases[i].name;
  const precis_format *f = precis_format_by_name(name);
  /* s32 is an accumulator and e8m0 a block scale (the `mx` granularity), never an operand or output. */
  if (!f || f->id == PRECIS_FMT_I32 || f->id == PRECIS_FMT_E8M0) return false;
  *out = f->id;
  return true;
}

static const char *fmt_name(precis_format_id id) { return precis_format_get(id)->name; }

bool precis_operand_is_integer(const precis_operand_spec *op) { return !precis_format_get(op->fmt)->is_float; }

bool precis_operand_scales_ue8m0(const precis_operand_spec *op) { return op->conv == PRECIS_QCONV_UE8M0; }

bool precis_spec_smooths(const precis_spec *s) { return s->smooth_auto || !isnan(s->smooth); }

bool precis_operand_is_scaled(const precis_operand_spec *op) {
  switch (op->fmt) {
  case PRECIS_FMT_E4M3:
  case PRECIS_FMT_E5M2:
  case PRECIS_FMT_E2M1:
  case PRECIS_FMT_E2M3:
  case PRECIS_FMT_E3M2:
  case PRECIS_FMT_I8:
  case PRECIS_FMT_S4:
  case PRECIS_FMT_U4:
  case PRECIS_FMT_S3:
  case PRECIS_FMT_S2: return true;
  default: return false;
  }
}

static const char *const gran_names[] = {
    [PRECIS_GRAN_NONE] = "none", [PRECIS_GRAN_TENSOR] = "tensor", [PRECIS_GRAN_ROW] = "row",
    [PRECIS_GRAN_COL] = "col",   [PRECIS_GRAN_K] = "k",           [PRECIS_GRAN_BLOCK] = "block",
    [PRECIS_GRAN_MX] = "mx",     [PRECIS_GRAN_MX_RCEIL] = "mx-rceil", [PRECIS_GRAN_NV] = "nv",
};
const char *precis_gran_name(precis_gran g) { return gran_names[g]; }

static const char *const conv_names[] = {
    [PRECIS_QCONV_NONE] = "none", [PRECIS_QCONV_SYM] = "sym", [PRECIS_QCONV_SYM_HALF] = "sym-half",
    [PRECIS_QCONV_ASYM] = "asym", [PRECIS_QCONV_UE8M0] = "ue8m0"};

static const char *const scale_names[] = {[PRECIS_SCALE_DYNAMIC] = "dynamic", [PRECIS_SCALE_ABSMAX] = "absmax",
                                          [PRECIS_SCALE_PERCENTILE] = "percentile", [PRECIS_SCALE_MSE] = "mse"};
const char *precis_scale_method_name(precis_scale_method m) { return scale_names[m]; }

static const char *const split_names[] = {[PRECIS_SPLIT_NONE] = "none",     [PRECIS_SPLIT_TF32X3] = "tf32x3",
                                          [PRECIS_SPLIT_BF16X3] = "bf16x3", [PRECIS_SPLIT_BF16X6] = "bf16x6",
                                          [PRECIS_SPLIT_BF16X9] = "bf16x9", [PRECIS_SPLIT_INT8XN] = "int8x",
                                          [PRECIS_SPLIT_CUBLAS_EMU] = "cublas-emu",
                                          [PRECIS_SPLIT_CRT_INT8XN] = "crt-int8x",
                                          [PRECIS_SPLIT_CRT_INT8XN_FAST] = "crt-int8x-fast"};
const char *precis_split_name(precis_split s) { return split_names[s]; }
bool precis_split_is_crt(precis_split s) { return s == PRECIS_SPLIT_CRT_INT8XN || s == PRECIS_SPLIT_CRT_INT8XN_FAST; }

/* "int8x16", "crt-int8x16", "crt-int8x16-fast", or the split's name. */
static void format_split(const precis_spec *s, char *buf, size_t len) {
  if (s->split == PRECIS_SPLIT_INT8XN) snprintf(buf, len, "int8x%d", s->split_terms);
  else if (precis_split_is_crt(s->split))
    snprintf(buf, len, "crt-int8x%d%s", s->split_terms, s->split == PRECIS_SPLIT_CRT_INT8XN_FAST ? "-fast" : "");
  else snprintf(buf, len, "%s", split_names[s->split]);
}

/* A positive decimal integer of at most max, the whole string. */
static bool parse_count(const char *s, int max, int *out) {
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || errno || v < 1 || v > max) return false;
  *out = (int)v;
  return true;
}

static bool parse_number(const char *s, double *out) {
  if (!*s || strchr(" \t\n", *s)) return false;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* The shortest decimal that reads back as v, without an exponent where one is not needed (100,
 * not 1e+02), so that format(parse(t)) == t for canonical t. */
static void format_number(double v, char *buf, size_t len) {
  int shortest = 0;
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, len, "%.*g", digits, v);
    if (strtod(buf, NULL) != v) continue;
    if (!strchr(buf, 'e')) return;
    if (!shortest) shortest = digits;
  }
  if (snprintf(buf, len, "%.*g", shortest ? shortest : 17, v) >= (int)len) buf[len - 1] = '\0';
}

static precis_gran default_gran(precis_format_id fmt, bool is_a) {
  switch (fmt) {
  case PRECIS_FMT_E4M3:
  case PRECIS_FMT_E5M2: return PRECIS_GRAN_TENSOR;
  case PRECIS_FMT_E2M1:
  case PRECIS_FMT_E2M3:
  case PRECIS_FMT_E3M2: return PRECIS_GRAN_MX;
  case PRECIS_FMT_I8: return is_a ? PRECIS_GRAN_ROW : PRECIS_GRAN_COL;
  case PRECIS_FMT_S4:
  case PRECIS_FMT_U4:
  case PRECIS_FMT_S3:
  case PRECIS_FMT_S2: return PRECIS_GRAN_K;
  default: return PRECIS_GRAN_NONE;
  }
}

static void operand_defaults(precis_operand_spec *op, bool is_a) {
  op->gran = default_gran(op->fmt, is_a);
  op->group = op->gran == PRECIS_GRAN_K ? 128 : 0;
  op->block_rows = op->block_cols = 0;
  op->conv = !precis_operand_is_integer(op) ? PRECIS_QCONV_NONE
             : op->fmt == PRECIS_FMT_U4     ? PRECIS_QCONV_ASYM
                                            : PRECIS_QCONV_SYM;
}

static precis_status parse_gran(const char *field, const char *value, const char *g, precis_operand_spec *op) {
  op->group = op->block_rows = op->block_cols = 0;
  for (size_t i = PRECIS_GRAN_TENSOR; i < sizeof gran_names / sizeof gran_names[0]; i++)
    if (i != PRECIS_GRAN_K && i != PRECIS_GRAN_BLOCK && strcmp(g, gran_names[i]) == 0) {
      op->gran = (precis_gran)i;
      return PRECIS_OK;
    }
  if (g[0] == 'k' && g[1] >= '0' && g[1] <= '9') {
    op->gran = PRECIS_GRAN_K;
    if (!parse_count(g + 1, MAX_GROUP, &op->group))
      return precis_fail(PRECIS_E_USAGE, "%s=%s: group size \"%s\" must be an integer from 1 to %d", field, value,
                         g + 1, MAX_GROUP);
    return PRECIS_OK;
  }
  const char *x = strchr(g, 'x');
  if (x && g[0] >= '0' && g[0] <= '9') {
    char rows[16];
    size_t rl = (size_t)(x - g);
    if (rl < sizeof rows) {
      memcpy(rows, g, rl);
      rows[rl] = '\0';
      op->gran = PRECIS_GRAN_BLOCK;
      if (parse_count(rows, MAX_GROUP, &op->block_rows) && parse_count(x + 1, MAX_GROUP, &op->block_cols))
        return PRECIS_OK;
    }
    return precis_fail(PRECIS_E_USAGE, "%s=%s: block \"%s\" must be <R>x<C> with R and C integers from 1 to %d",
                       field, value, g, MAX_GROUP);
  }
  return precis_fail(PRECIS_E_USAGE, "%s=%s: unknown granularity \"%s\" (expected " GRANULARITIES ")", field, value,
                     g);
}

/* OPERAND := FMT ["@" GRAN [":" CONV]] */
static precis_status parse_operand(const char *field, const char *value, precis_operand_spec *op) {
  bool is_a = field[0] == 'a';
  char text[PRECIS_SPEC_TEXT_MAX];
  snprintf(text, sizeof text, "%s", value);
  char *at = strchr(text, '@');
  char *colon = strchr(text, ':');
  if (colon && (!at || colon < at))
    return precis_fail(PRECIS_E_USAGE, "%s=%s: a scale convention follows a granularity (FMT@GRAN:CONV)", field, value);
  if (at) *at = '\0';
  if (colon) *colon = '\0';
  if (!format_from_name(text, &op->fmt))
    return precis_fail(PRECIS_E_USAGE, "%s=%s: unknown format \"%s\" (expected " OPERAND_FORMATS ")", field, value,
                       text);
  operand_defaults(op, is_a);
  bool scaled = precis_operand_is_scaled(op);
  if (!at) return PRECIS_OK;
  if (!scaled)
    return precis_fail(PRECIS_E_USAGE,
                       "%s=%s: %s operands are a plain cast without scales; a granularity applies to e4m3, e5m2, "
                       "e2m1, s8, s4 and u4",
                       field, value, fmt_name(op->fmt));
  precis_status st = parse_gran(field, value, at + 1, op);
  if (st != PRECIS_OK) return st;
  bool integer = precis_operand_is_integer(op);
  if (is_a && op->gran == PRECIS_GRAN_COL)
    return precis_fail(PRECIS_E_USAGE,
                       "%s=%s: A's scales cannot be per column (a scale along k does not factor out of the sum); "
                       "use tensor, row, k<G>, <R>x<C>, mx or nv",
                       field, value);
  if (!is_a && op->gran == PRECIS_GRAN_ROW)
    return precis_fail(PRECIS_E_USAGE,
                       "%s=%s: B's scales cannot be per row (a scale along k does not factor out of the sum); "
                       "use tensor, col, k<G>, <R>x<C>, mx or nv",
                       field, value);
  if ((op->gran == PRECIS_GRAN_MX || op->gran == PRECIS_GRAN_MX_RCEIL) && integer)
    return precis_fail(PRECIS_E_USAGE, "%s=%s: MX blocks hold e4m3, e5m2, e3m2, e2m3 or e2m1 elements, not %s", field, value,
                       fmt_name(op->fmt));
  if (op->gran == PRECIS_GRAN_NV && op->fmt != PRECIS_FMT_E2M1)
    return precis_fail(PRECIS_E_USAGE, "%s=%s: NVFP4 blocks hold e2m1 elements, not %s", field, value,
                       fmt_name(op->fmt));
  if (!colon) return PRECIS_OK;
  if (!integer && strcmp(colon + 1, "ue8m0") == 0) {
    /* Power-of-two scales for fp8 with fp32-scaled granularities (MX/NVFP4 blocks have their own). */
    bool fp8 = op->fmt == PRECIS_FMT_E4M3 || op->fmt == PRECIS_FMT_E5M2;
    bool fp32_scaled = op->gran == PRECIS_GRAN_TENSOR || op->gran == PRECIS_GRAN_ROW || op->gran == PRECIS_GRAN_COL ||
                       op->gran == PRECIS_GRAN_K || op->gran == PRECIS_GRAN_BLOCK;
    if (!fp8 || !fp32_scaled)
      return precis_fail(PRECIS_E_USAGE,
                         "%s=%s: ue8m0 (power-of-two scales) applies to e4m3/e5m2 with tensor, row, col, k<G> or "
                         "<R>x<C> scales (mx blocks are E8M0 already)",
                         field, value);
    op->conv = PRECIS_QCONV_UE8M0;
    return PRECIS_OK;
  }
  if (!integer)
    return precis_fail(PRECIS_E_USAGE,
                       "%s=%s: a scale convention (sym, sym-half, asym) applies to s8, s4 and u4; e4m3/e5m2 take ue8m0 "
                       "(power-of-two scales), not \"%s\"",
                       field, value, colon + 1);
  for (size_t i = PRECIS_QCONV_SYM; i <= PRECIS_QCONV_ASYM; i++)
    if (strcmp(colon + 1, conv_names[i]) == 0) {
      op->conv = (precis_qconv)i;
      if (op->conv == PRECIS_QCONV_ASYM && op->fmt != PRECIS_FMT_U4)
        return precis_fail(PRECIS_E_USAGE, "%s=%s: %s is symmetric (sym or sym-half); zero points need u4", field,
                           value, fmt_name(op->fmt));
      if (op->conv != PRECIS_QCONV_ASYM && op->fmt == PRECIS_FMT_U4)
        return precis_fail(PRECIS_E_USAGE, "%s=%s: u4 is unsigned and needs a zero point (asym)", field, value);
      return PRECIS_OK;
    }
  return precis_fail(PRECIS_E_USAGE, "%s=%s: unknown scale convention \"%s\" (expected sym, sym-half or asym)", field,
                     value, colon + 1);
}

static precis_status parse_acc(const char *value, precis_format_id *acc, bool *fast) {
  static const struct {
    const char *name;
    precis_format_id id;
    bool fast;
  } accs[] = {{"fp64", PRECIS_FMT_F64, false},    {"f64", PRECIS_FMT_F64, false},   {"fp32", PRECIS_FMT_F32, false},
              {"f32", PRECIS_FMT_F32, false},     {"fp32fast", PRECIS_FMT_F32, true}, {"f32fast", PRECIS_FMT_F32, true},
              {"fp16", PRECIS_FMT_F16, false},    {"f16", PRECIS_FMT_F16, false},   {"s32", PRECIS_FMT_I32, false}};
  for (size_t i = 0; i < sizeof accs / sizeof accs[0]; i++)
    if (strcmp(value, accs[i].name) == 0) {
      *acc = accs[i].id;
      *fast = accs[i].fast;
      return PRECIS_OK;
    }
  return precis_fail(PRECIS_E_USAGE, "acc=%s: unknown accumulation (expected fp64, fp32, fp32fast, fp16 or s32)", value);
}

static precis_status parse_scale(const char *value, precis_spec *spec) {
  const char *pfx = "percentile=";
  if (strncmp(value, pfx, strlen(pfx)) == 0) {
    const char *p = value + strlen(pfx);
    if (!parse_number(p, &spec->percentile) || !(spec->percentile > 0 && spec->percentile <= 100))
      return precis_fail(PRECIS_E_USAGE, "scale=%s: the percentile must be a number in (0, 100]", value);
    spec->scale = PRECIS_SCALE_PERCENTILE;
    return PRECIS_OK;
  }
  for (size_t i = 0; i < sizeof scale_names / sizeof scale_names[0]; i++)
    if (i != PRECIS_SCALE_PERCENTILE && strcmp(value, scale_names[i]) == 0) {
      spec->scale = (precis_scale_method)i;
      return PRECIS_OK;
    }
  return precis_fail(PRECIS_E_USAGE, "scale=%s: unknown scale method (expected dynamic, absmax, percentile=<P> or mse)",
                     value);
}

static precis_status parse_smooth(const char *value, precis_spec *spec) {
  spec->smooth_auto = strcmp(value, "auto") == 0;
  spec->smooth = NAN;
  if (spec->smooth_auto || strcmp(value, "none") == 0) return PRECIS_OK;
  if (!parse_number(value, &spec->smooth) || !(spec->smooth >= 0 && spec->smooth <= 1))
    return precis_fail(PRECIS_E_USAGE, "smooth=%s: expected a number in [0, 1], auto or none", value);
  return PRECIS_OK;
}

static precis_status parse_split(const char *value, precis_spec *spec) {
  spec->split_terms = 0;
  for (size_t i = 0; i < PRECIS_SPLIT_INT8XN; i++)
    if (strcmp(value, split_names[i]) == 0) {
      spec->split = (precis_split)i;
      return PRECIS_OK;
    }
  if (strncmp(value, "int8x", 5) == 0) {
    spec->split = PRECIS_SPLIT_INT8XN;
    if (parse_count(value + 5, MAX_SPLIT_TERMS, &spec->split_terms) && spec->split_terms >= 2) return PRECIS_OK;
    return precis_fail(PRECIS_E_USAGE, "split=%s: the Ozaki slice count N of int8x<N> must be from 2 to %d", value,
                       MAX_SPLIT_TERMS);
  }
  if (strcmp(value, split_names[PRECIS_SPLIT_CUBLAS_EMU]) == 0) {
    spec->split = PRECIS_SPLIT_CUBLAS_EMU;
    return PRECIS_OK;
  }
  if (strncmp(value, "crt-int8x", 9) == 0) {
    char count[16];
    const char *digits = value + 9;
    size_t len = strlen(digits);
    bool fast = len > 5 && strcmp(digits + len - 5, "-fast") == 0;
    if (fast) len -= 5;
    spec->split = fast ? PRECIS_SPLIT_CRT_INT8XN_FAST : PRECIS_SPLIT_CRT_INT8XN;
    if (len < sizeof count) {
      memcpy(count, digits, len);
      count[len] = '\0';
      if (parse_count(count, MAX_CRT_MODULI, &spec->split_terms) && spec->split_terms >= 2) return PRECIS_OK;
    }
    return precis_fail(PRECIS_E_USAGE,
                       "split=%s: the Ozaki scheme II modulus count N of crt-int8x<N> or crt-int8x<N>-fast must be from "
                       "2 to %d",
                       value, MAX_CRT_MODULI);
  }
  return precis_fail(PRECIS_E_USAGE,
                     "split=%s: unknown split (expected none, tf32x3, bf16x3, bf16x6, bf16x9, int8x<N>, cublas-emu, "
                     "crt-int8x<N> or crt-int8x<N>-fast)",
                     value);
}

static precis_format_id default_acc(const precis_spec *s) {
  if (precis_operand_is_integer(&s->a) && precis_operand_is_integer(&s->b)) return PRECIS_FMT_I32;
  if (s->a.fmt == PRECIS_FMT_F64 || s->b.fmt == PRECIS_FMT_F64) return PRECIS_FMT_F64;
  return PRECIS_FMT_F32;
}

static bool is_fp8_operand(const precis_operand_spec *op) {
  return op->fmt == PRECIS_FMT_E4M3 || op->fmt == PRECIS_FMT_E5M2;
}

/* acc=fp32fast names two cuBLAS(Lt) switches, told apart by the operands. With fp8 operands it is
 * CUBLASLT_MATMUL_DESC_FAST_ACCUM (the k-sum stays in the tensor core's narrow accumulator, never
 * promoted), a field of its own. Otherwise it is COMPUTE_32F_FAST_TF32: fp32 accumulation of fp32
 * operands read as tf32, spelled with tf32 operands so that one computation has one canonical spec. */
static precis_status apply_fast_accum(precis_spec *s) {
  bool a8 = is_fp8_operand(&s->a), b8 = is_fp8_operand(&s->b);
  if (!a8 && !b8) {
    if (s->a.fmt == PRECIS_FMT_F32) s->a.fmt = PRECIS_FMT_TF32;
    if (s->b.fmt == PRECIS_FMT_F32) s->b.fmt = PRECIS_FMT_TF32;
    return PRECIS_OK;
  }
  if (!a8 || !b8)
    return precis_fail(PRECIS_E_USAGE, "acc=fp32fast with a=%s,b=%s: fp8 fast accumulation (cuBLASLt FAST_ACCUM) "
                                       "needs both operands e4m3 or e5m2",
                       fmt_name(s->a.fmt), fmt_name(s->b.fmt));
  const precis_operand_spec *ops[2] = {&s->a, &s->b};
  for (int i = 0; i < 2; i++) {
    precis_gran g = ops[i]->gran;
    char text[48];
    precis_operand_format(ops[i], text, sizeof text);
    if (g != PRECIS_GRAN_TENSOR && g != PRECIS_GRAN_ROW && g != PRECIS_GRAN_COL)
      return precis_fail(PRECIS_E_USAGE,
                         "acc=fp32fast with %s=%s: fp8 fast accumulation keeps the whole k-sum in the tensor core's "
                         "accumulator, which scales applied per k-block (k<G>, <R>x<C>, mx) interrupt; use tensor, "
                         "row (A) or col (B) scales",
                         i ? "b" : "a", text);
  }
  s->fast_accum = true;
  s->acc = PRECIS_FMT_F32;
  return PRECIS_OK;
}

/* Combinations of valid fields that mean nothing. */
static precis_status check_spec(const precis_spec *s) {
  bool a_int = precis_operand_is_integer(&s->a), b_int = precis_operand_is_integer(&s->b);
  if (s->acc == PRECIS_FMT_I32 && !(a_int && b_int))
    return precis_fail(PRECIS_E_USAGE, "acc=s32: integer accumulation needs integer operands (a=%s, b=%s)",
                       fmt_name(s->a.fmt), fmt_name(s->b.fmt));
  if (s->scale != PRECIS_SCALE_DYNAMIC && !precis_operand_is_scaled(&s->a))
    return precis_fail(PRECIS_E_USAGE, "scale=%s: static scales are for a scaled A (e4m3, e5m2, e2m1, s8, s4, u4), not %s",
                       scale_names[s->scale], fmt_name(s->a.fmt));
  if (s->scale != PRECIS_SCALE_DYNAMIC && s->a.gran != PRECIS_GRAN_TENSOR)
    return precis_fail(PRECIS_E_USAGE,
                       "scale=%s: static scales from the calibration split are per tensor; write a=%s@tensor",
                       scale_names[s->scale], fmt_name(s->a.fmt));
  if (s->scale != PRECIS_SCALE_DYNAMIC && s->a.conv == PRECIS_QCONV_UE8M0)
    return precis_fail(PRECIS_E_USAGE, "scale=%s: static scales are fp32 (the calibration's amax); ue8m0 scales are "
                                       "dynamic only (drop :ue8m0 or scale=)",
                       scale_names[s->scale]);
  return PRECIS_OK;
}

static int field_index(const char *name) {
  for (int i = 0; i < FIELD_COUNT; i++)
    if (strcmp(name, field_names[i]) == 0) return i;
  return -1;
}

precis_status precis_spec_parse(const char *text, precis_spec *out) {
  precis_spec s;
  memset(&s, 0, sizeof s);
  s.out = PRECIS_FMT_F32;
  s.scale = PRECIS_SCALE_DYNAMIC;
  s.smooth = NAN;
  s.split = PRECIS_SPLIT_NONE;
  bool given[FIELD_COUNT] = {false};
  bool fast = false;
  if (strlen(text) >= PRECIS_SPEC_TEXT_MAX)
    return precis_fail(PRECIS_E_USAGE, "recipe spec of %zu characters: at most %d", strlen(text),
                       PRECIS_SPEC_TEXT_MAX - 1);
  char buf[PRECIS_SPEC_TEXT_MAX];
  snprintf(buf, sizeof buf, "%s", text);
  char *item = buf;
  while (item) {
    char *next = strchr(item, ',');
    if (next) *next++ = '\0';
    char *eq = strchr(item, '=');
    if (!*item) return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": empty field", text);
    if (!eq)
      return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": \"%s\" is not a field (expected a=, b=, acc=, out=, "
                                         "scale=, smooth=, split=)",
                         text, item);
    *eq = '\0';
    const char *value = eq + 1;
    int f = field_index(item);
    if (f < 0)
      return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": unknown field \"%s\" (expected a, b, acc, out, scale, "
                                         "smooth, split)",
                         text, item);
    if (given[f]) return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": %s given twice", text, item);
    given[f] = true;
    if (!*value) return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": %s= has no value", text, item);
    precis_status st = PRECIS_OK;
    switch (f) {
    case FIELD_A: st = parse_operand("a", value, &s.a); break;
    case FIELD_B: st = parse_operand("b", value, &s.b); break;
    case FIELD_ACC: st = parse_acc(value, &s.acc, &fast); break;
    case FIELD_OUT:
      if (!format_from_name(value, &s.out) || !precis_format_get(s.out)->is_float || s.out == PRECIS_FMT_E2M1 ||
          s.out == PRECIS_FMT_E2M3 || s.out == PRECIS_FMT_E3M2)
        st = precis_fail(PRECIS_E_USAGE, "out=%s: unknown output format (expected " OUT_FORMATS ")", value);
      break;
    case FIELD_SCALE: st = parse_scale(value, &s); break;
    case FIELD_SMOOTH: st = parse_smooth(value, &s); break;
    case FIELD_SPLIT: st = parse_split(value, &s); break;
    }
    if (st != PRECIS_OK) return st;
    item = next;
  }
  if (!given[FIELD_A] && !given[FIELD_B])
    return precis_fail(PRECIS_E_USAGE, "recipe spec \"%s\": needs a= or b= (the operand formats)", text);
  if (!given[FIELD_A]) {
    s.a.fmt = s.b.fmt;
    operand_defaults(&s.a, true);
  }
  if (!given[FIELD_B]) {
    s.b.fmt = s.a.fmt;
    operand_defaults(&s.b, false);
  }
  if (fast) {
    precis_status fst = apply_fast_accum(&s);
    if (fst != PRECIS_OK) return fst;
  }
  if (!given[FIELD_ACC]) s.acc = default_acc(&s);
  precis_status st = check_spec(&s);
  if (st != PRECIS_OK) return st;
  *out = s;
  return PRECIS_OK;
}

void precis_operand_format(const precis_operand_spec *op, char *buf, size_t len) {
  const char *name = fmt_name(op->fmt);
  char gran[32];
  switch (op->gran) {
  case PRECIS_GRAN_NONE: snprintf(buf, len, "%s", name); return;
  case PRECIS_GRAN_K: snprintf(gran, sizeof gran, "k%d", op->group); break;
  case PRECIS_GRAN_BLOCK: snprintf(gran, sizeof gran, "%dx%d", op->block_rows, op->block_cols); break;
  default: snprintf(gran, sizeof gran, "%s", gran_names[op->gran]); break;
  }
  if (op->conv == PRECIS_QCONV_NONE) snprintf(buf, len, "%s@%s", name, gran);
  else snprintf(buf, len, "%s@%s:%s", name, gran, conv_names[op->conv]);
}

bool precis_spec_format(const precis_spec *s, char *buf, size_t len) {
  char a[48], b[48], scale[48], smooth[32], split[24];
  precis_operand_format(&s->a, a, sizeof a);
  precis_operand_format(&s->b, b, sizeof b);
  if (s->scale == PRECIS_SCALE_PERCENTILE) {
    char p[32];
    format_number(s->percentile, p, sizeof p);
    snprintf(scale, sizeof scale, "percentile=%s", p);
  } else {
    snprintf(scale, sizeof scale, "%s", scale_names[s->scale]);
  }
  if (s->smooth_auto) snprintf(smooth, sizeof smooth, "auto");
  else if (isnan(s->smooth)) snprintf(smooth, sizeof smooth, "none");
  else format_number(s->smooth, smooth, sizeof smooth);
  format_split(s, split, sizeof split);
  int n = snprintf(buf, len, "a=%s,b=%s,acc=%s,out=%s,scale=%s,smooth=%s,split=%s", a, b, precis_spec_acc_name(s),
                   fmt_name(s->out), scale, smooth, split);
  return n >= 0 && (size_t)n < len;
}

const char *precis_spec_acc_name(const precis_spec *s) { return s->fast_accum ? "fp32fast" : fmt_name(s->acc); }

bool precis_spec_equal(const precis_spec *x, const precis_spec *y) {
  char tx[PRECIS_SPEC_TEXT_MAX], ty[PRECIS_SPEC_TEXT_MAX];
  precis_spec_format(x, tx, sizeof tx);
  precis_spec_format(y, ty, sizeof ty);
  return strcmp(tx, ty) == 0;
}

static void describe_operand(const char *which, const precis_operand_spec *op, char *buf, size_t len) {
  const char *name = fmt_name(op->fmt);
  if (!precis_operand_is_scaled(op)) {
    snprintf(buf, len, "%s %s%s", which, name,
             op->fmt == PRECIS_FMT_F32 ? "" : op->fmt == PRECIS_FMT_F64 ? " (exact from f32)" : " (RNE from f32)");
    return;
  }
  char gran[96];
  switch (op->gran) {
  case PRECIS_GRAN_TENSOR: snprintf(gran, sizeof gran, "per tensor"); break;
  case PRECIS_GRAN_ROW: snprintf(gran, sizeof gran, "per row"); break;
  case PRECIS_GRAN_COL: snprintf(gran, sizeof gran, "per column"); break;
  case PRECIS_GRAN_K: snprintf(gran, sizeof gran, "per group of %d along k", op->group); break;
  case PRECIS_GRAN_BLOCK: snprintf(gran, sizeof gran, "per %dx%d block", op->block_rows, op->block_cols); break;
  case PRECIS_GRAN_MX: snprintf(gran, sizeof gran, "MX blocks of 32 (E8M0 scales)"); break;
  case PRECIS_GRAN_MX_RCEIL: snprintf(gran, sizeof gran, "MX blocks of 32 (E8M0 scales, round-up rule)"); break;
  case PRECIS_GRAN_NV: snprintf(gran, sizeof gran, "NVFP4 blocks of 16 (E4M3 scales + f32 tensor scale)"); break;
  case PRECIS_GRAN_NONE: gran[0] = '\0'; break;
  }
  const precis_format *f = precis_format_get(op->fmt);
  if (op->conv == PRECIS_QCONV_ASYM) snprintf(buf, len, "%s %s %s, min/max with zero point", which, name, gran);
  else if (op->conv == PRECIS_QCONV_UE8M0)
    snprintf(buf, len, "%s %s %s, s=2^ceil(log2(amax/%g)) (UE8M0)", which, name, gran, f->max_finite);
  else if (op->conv == PRECIS_QCONV_SYM_HALF) snprintf(buf, len, "%s %s %s, s=amax/%g", which, name, gran, f->max_finite + 0.5);
  else snprintf(buf, len, "%s %s %s, s=amax/%g", which, name, gran, f->max_finite);
}

void precis_spec_describe(const precis_spec *s, char *buf, size_t len) {
  char a[192], b[192], extra[96] = "";
  describe_operand("A", &s->a, a, sizeof a);
  describe_operand("B", &s->b, b, sizeof b);
  size_t used = 0;
  if (s->scale != PRECIS_SCALE_DYNAMIC)
    used += (size_t)snprintf(extra + used, sizeof extra - used, "; A scales static (%s)", scale_names[s->scale]);
  if (precis_spec_smooths(s))
    used += (size_t)snprintf(extra + used, sizeof extra - used, "; SmoothQuant");
  if (s->split == PRECIS_SPLIT_INT8XN && used < sizeof extra)
    snprintf(extra + used, sizeof extra - used, "; split into %d int8 slices (Ozaki)", s->split_terms);
  else if (precis_split_is_crt(s->split) && used < sizeof extra)
    snprintf(extra + used, sizeof extra - used, "; %d int8 moduli, CRT (Ozaki II, %s)", s->split_terms,
             s->split == PRECIS_SPLIT_CRT_INT8XN_FAST ? "fast" : "accurate");
  else if (s->split != PRECIS_SPLIT_NONE && used < sizeof extra)
    snprintf(extra + used, sizeof extra - used, "; split %s", split_names[s->split]);
  snprintf(buf, len, "%s; %s; acc %s; out %s%s", a, b,
           s->fast_accum ? "fp32 fast (FAST_ACCUM: the k-sum never promoted out of the tensor core)" : fmt_name(s->acc),
           fmt_name(s->out), extra);
}

static long long ceil_div(long long x, long long y) { return (x + y - 1) / y; }

/* Scales of one operand holding `mats` matrices of rows x cols, k along cols for A, along rows for B. */
static long long scale_bytes(const precis_operand_spec *op, bool is_a, long long rows, long long cols,
                             long long mats) {
  long long along_k = is_a ? cols : rows, across = is_a ? rows : cols;
  /* Asymmetric integers: one zero point per scale, packed at the element width. */
  if (op->conv == PRECIS_QCONV_ASYM) {
    precis_operand_spec sym = *op;
    sym.conv = PRECIS_QCONV_SYM;
    long long bytes = scale_bytes(&sym, is_a, rows, cols, mats);
    return bytes + ceil_div(bytes / 4 * precis_format_get(op->fmt)->storage_bits, 8);
  }
  /* UE8M0: one byte per scale where fp32 takes four. */
  if (op->conv == PRECIS_QCONV_UE8M0) {
    precis_operand_spec f32 = *op;
    f32.conv = PRECIS_QCONV_NONE;
    return scale_bytes(&f32, is_a, rows, cols, mats) / 4;
  }
  switch (op->gran) {
  case PRECIS_GRAN_NONE: return 0;
  case PRECIS_GRAN_TENSOR: return 4;
  case PRECIS_GRAN_ROW:
  case PRECIS_GRAN_COL: return mats * across * 4;
  case PRECIS_GRAN_K: return mats * across * ceil_div(along_k, op->group) * 4;
  case PRECIS_GRAN_BLOCK: return mats * ceil_div(rows, op->block_rows) * ceil_div(cols, op->block_cols) * 4;
  case PRECIS_GRAN_MX:
  case PRECIS_GRAN_MX_RCEIL: return mats * across * ceil_div(along_k, 32);
  /* nv: plus the fp32 tensor scales: one for A (quantized as one tensor over the batch), one per
   * b matrix (each is its own tensor). */
  case PRECIS_GRAN_NV: return mats * across * ceil_div(along_k, 16) + 4 * (is_a ? 1 : mats);
  }
  return 0;
}

long long precis_spec_tensor_bytes(const precis_spec *s, long long m, long long n, long long k, long long batch,
                                   bool b_batched) {
  long long b_mats = b_batched ? batch : 1;
  long long a = batch * m * k, b = k * n * b_mats, c = batch * m * n;
  long long total = ceil_div(a * precis_format_get(s->a.fmt)->storage_bits, 8) +
                    ceil_div(b * precis_format_get(s->b.fmt)->storage_bits, 8) +
                    c * (precis_format_get(s->out)->storage_bits / 8);
  if (s->acc == PRECIS_FMT_I32) {
    /* int32 accumulators before dequantization; the dequantization reads one A scale per row even
     * when a static scale is the same for all rows. */
    total += c * 4;
    total += (s->a.gran == PRECIS_GRAN_TENSOR ? batch * m * 4 : scale_bytes(&s->a, true, m, k, batch)) +
             scale_bytes(&s->b, false, k, n, b_mats);
  } else {
    total += scale_bytes(&s->a, true, m, k, batch) + scale_bytes(&s->b, false, k, n, b_mats);
  }
  /* An fp8 output carries its f32 scale (scale_D). */
  if (s->out == PRECIS_FMT_E4M3 || s->out == PRECIS_FMT_E5M2) total += 4;
  /* Split recipes hold their terms beside the operands: float splits 2 or 3 terms (tf32 stored in
   * 32 bits, bf16 in 16); Ozaki N int8 slices, an exponent per row of A / column of B, one int32
   * slice product and the fp64 sum of the levels. */
  static const int float_terms[] = {[PRECIS_SPLIT_TF32X3] = 2, [PRECIS_SPLIT_BF16X3] = 2, [PRECIS_SPLIT_BF16X6] = 3,
                                    [PRECIS_SPLIT_BF16X9] = 3};
  switch (s->split) {
  case PRECIS_SPLIT_NONE:
  case PRECIS_SPLIT_CUBLAS_EMU: break; /* the library's own buffers, not precis's */
  case PRECIS_SPLIT_INT8XN:
    total += (long long)s->split_terms * (a + b) + 4 * (batch * m + b_mats * n) + c * (4 + 8);
    break;
  case PRECIS_SPLIT_CRT_INT8XN:
  case PRECIS_SPLIT_CRT_INT8XN_FAST:
    /* Ozaki II: the scaled integer operands (float64), N int8 residues of each, a shift per row of
     * A / column of B, one int32 product, N residues of the output (a byte each), the f64 sum. */
    total += (long long)s->split_terms * (a + b) + 8 * (a + b) + 4 * (batch * m + b_mats * n) +
             c * (4 + s->split_terms + 8);
    break;
  default: total += (long long)float_terms[s->split] * (a + b) * (s->split == PRECIS_SPLIT_TF32X3 ? 4 : 2); break;
  }
  return total;
}

/* ------------------------------------------------------------------ effective bits (DESIGN §17) */

void precis_operand_weight_bits(const precis_operand_spec *op, precis_weight_bits *out) {
  memset(out, 0, sizeof *out);
  out->element_bits = precis_format_get(op->fmt)->storage_bits;
  switch (op->gran) {
  case PRECIS_GRAN_NONE: out->group = -1; break;
  case PRECIS_GRAN_TENSOR:
    out->scale_bits = 32;
    out->group = -1;
    break;
  case PRECIS_GRAN_ROW:
  case PRECIS_GRAN_COL:
    out->scale_bits = 16;
    out->group = 0;
    break;
  case PRECIS_GRAN_K:
    out->scale_bits = 16;
    out->group = op->group;
    break;
  case PRECIS_GRAN_BLOCK:
    out->scale_bits = 32;
    out->group = -2;
    out->block_rows = op->block_rows;
    out->block_cols = op->block_cols;
    break;
  case PRECIS_GRAN_MX:
  case PRECIS_GRAN_MX_RCEIL:
    out->scale_bits = 8;
    out->group = 32;
    break;
  case PRECIS_GRAN_NV:
    out->scale_bits = 8;
    out->group = 16;
    out->tensor_scale_bits = 32;
    break;
  }
  if (op->conv == PRECIS_QCONV_ASYM && out->scale_bits > 0) out->zero_point_bits = out->element_bits;
}

double precis_operand_weight_total_bits(const precis_operand_spec *op, long long k, long long n) {
  precis_weight_bits w;
  precis_operand_weight_bits(op, &w);
  double scales; /* how many scales (and zero points) the k x n weight holds */
  if (w.scale_bits == 0) scales = 0;
  else if (w.group == -1) scales = 1;
  else if (w.group == 0) scales = (double)n;
  else if (w.group == -2) scales = (double)ceil_div(k, w.block_rows) * (double)ceil_div(n, w.block_cols);
  else scales = (double)n * (double)ceil_div(k, w.group);
  return (double)w.element_bits * (double)k * (double)n + scales * (double)(w.scale_bits + w.zero_point_bits) +
         (double)w.tensor_scale_bits;
}

double precis_operand_weight_bits_per_weight(const precis_operand_spec *op) {
  precis_weight_bits w;
  precis_operand_weight_bits(op, &w);
  if (w.scale_bits == 0) return (double)w.element_bits;
  if (w.group <= 0 || w.tensor_scale_bits) return NAN;
  return (double)w.element_bits + (double)(w.scale_bits + w.zero_point_bits) / (double)w.group;
}

void precis_operand_weight_bits_describe(const precis_operand_spec *op, char *buf, size_t len) {
  precis_weight_bits w;
  precis_operand_weight_bits(op, &w);
  const char *fmt = precis_format_get(op->fmt)->name;
  int per_scale = w.scale_bits + w.zero_point_bits;
  char what[96] = "";
  const char *article = w.scale_bits == 8 ? "an" : "a";
  if (w.zero_point_bits)
    snprintf(what, sizeof what, "%s %d-bit scale and a %d-bit zero point", article, w.scale_bits, w.zero_point_bits);
  else snprintf(what, sizeof what, "%s %d-bit scale", article, w.scale_bits);
  if (w.scale_bits == 0)
    snprintf(buf, len, "%d bits per weight (%s, no scales)", w.element_bits, fmt);
  else if (w.group > 0 && w.tensor_scale_bits)
    snprintf(buf, len, "%d + %d/%lld = %g bits per weight, + %d bits per tensor (%s elements, %s per %lld along k, a %d-bit tensor scale)",
             w.element_bits, per_scale, w.group, (double)w.element_bits + (double)per_scale / (double)w.group,
             w.tensor_scale_bits, fmt, what, w.group, w.tensor_scale_bits);
  else if (w.group > 0)
    snprintf(buf, len, "%d + %d/%lld = %g bits per weight (%s elements, %s per %lld along k)", w.element_bits, per_scale,
             w.group, (double)w.element_bits + (double)per_scale / (double)w.group, fmt, what, w.group);
  else if (w.group == 0)
    snprintf(buf, len, "%d + %d/k bits per weight (%s elements, %s per output channel)", w.element_bits, per_scale, fmt, what);
  else if (w.group == -2)
    snprintf(buf, len, "%d + %d/(%dx%d) bits per weight, edge blocks rounded up (%s elements, %s per %dx%d block)",
             w.element_bits, per_scale, w.block_rows, w.block_cols, fmt, what, w.block_rows, w.block_cols);
  else
    snprintf(buf, len, "%d bits per weight + %d bits per tensor (%s elements, %s per tensor)", w.element_bits, per_scale,
             fmt, what);
}
