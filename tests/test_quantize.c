/* The generic quantizer (quantize.h), e2m1/e8m0 and 4-bit packing on hand-worked cases: every
 * scale rule's edges (amax 0, subnormal amax, amax at a power of two, inf/NaN inputs), the layouts
 * of each granularity on both operands, the integer conventions, the legacy int8/fp8 quantizers
 * reproduced, SmoothQuant. The bit-for-bit comparison on random data is the ml_dtypes oracle in
 * tests/venv/test_formats_oracle.py. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/format.h"
#include "numerics/format_bits.h"
#include "harness.h"
#include "numerics/quant.h"
#include "numerics/quantize.h"
#include "base/status.h"

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

TEST(e2m1_codes_and_rounding) {
  static const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; c++) {
    float v = precis_e2m1_bits_to_f32((uint8_t)c);
    CHECK_MSG(bits_of(v) == bits_of(c & 8 ? -table[c & 7] : table[c & 7]), "code 0x%x -> %g", c, (double)v);
    CHECK_EQ_INT(precis_f32_to_e2m1_bits(v), c); /* every code round-trips, -0 included */
  }
  static const struct { float x; uint8_t code; } cases[] = {
      {0.25f, 0x0}, {0.2501f, 0x1}, {0.75f, 0x2}, {1.25f, 0x2}, {1.75f, 0x4}, {2.5f, 0x4}, {3.5f, 0x6},
      {5.0f, 0x6},  {6.5f, 0x7},    {6.99f, 0x7}, {7.0f, 0x7},  {1e30f, 0x7}, {INFINITY, 0x7}, {-INFINITY, 0xf},
      {-0.1f, 0x8}, {-5.0f, 0xe},   {0x1p-149f, 0x0}, {NAN, 0x7}, {-NAN, 0x7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK_MSG(precis_f32_to_e2m1_bits(cases[i].x) == cases[i].code, "e2m1(%g) = 0x%x, want 0x%x", (double)cases[i].x,
              precis_f32_to_e2m1_bits(cases[i].x), cases[i].code);
}

TEST(e8m0_codes_and_scale_rules) {
  CHECK_EQ_INT(bits_of(precis_e8m0_bits_to_f32(0)), 0x00400000); /* 2^-127, an fp32 subnormal */
  CHECK(precis_e8m0_bits_to_f32(127) == 1.0f);
  CHECK(precis_e8m0_bits_to_f32(254) == 0x1p127f);
  CHECK(isnan(precis_e8m0_bits_to_f32(255)));
  /* OCP floor rule, e4m3 (emax 8): scale 2^(floor(log2 amax) - 8). */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(448.0f, 8), 127);        /* floor(log2 448) = 8 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(256.0f, 8), 127);        /* exactly a power of two */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(nextafterf(256.0f, 0.0f), 8), 126);
  CHECK_EQ_INT(precis_bits_mx_scale_floor(0.0f, 8), 127);          /* amax 0: scale 1 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(0x1p-149f, 8), 0);       /* subnormal amax: clamped to 2^-127 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(0x1p-120f, 8), 0);       /* -128 clamps to -127 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(0x1p-119f, 8), 0);       /* -127 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(0x1p-118f, 8), 1);
  CHECK_EQ_INT(precis_bits_mx_scale_floor(FLT_MAX, 8), 127 + 127 - 8);
  CHECK_EQ_INT(precis_bits_mx_scale_floor(6.0f, 2), 127);          /* e2m1: floor(log2 6) = 2 */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(INFINITY, 8), 127);      /* callers pass finite amax; documented */
  CHECK_EQ_INT(precis_bits_mx_scale_floor(NAN, 8), 127);
  /* rceil: amax / max_elem rounded up to a power of two. */
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(448.0f, 448.0f), 127);   /* quotient 1 exactly */
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(449.0f, 448.0f), 128);   /* just above: up to 2 */
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(224.0f, 448.0f), 126);
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(6.0f, 6.0f), 127);
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(0.0f, 448.0f), 127);
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(0x1p-149f, 448.0f), 0); /* quotient underflows to 0 */
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(0x1p-140f, 448.0f), 0); /* subnormal quotient, ceil -> 2^-148 -> clamp */
  CHECK_EQ_INT(precis_bits_mx_scale_rceil(FLT_MAX, 6.0f), 127 + 126);
}

TEST(nibble_packing_order_and_round_trip) {
  uint8_t codes[5] = {0x1, 0x2, 0xf, 0x8, 0x7}, packed[3], back[5];
  precis_pack_nibbles(codes, 5, packed);
  CHECK_EQ_INT(packed[0], 0x21); /* element 0 in the low nibble */
  CHECK_EQ_INT(packed[1], 0x8f);
  CHECK_EQ_INT(packed[2], 0x07); /* odd n: the last high nibble is 0 */
  precis_unpack_nibbles(packed, 5, back);
  CHECK(memcmp(codes, back, 5) == 0);
  int8_t s4[5];
  precis_unpack_s4(packed, 5, s4);
  CHECK(s4[0] == 1 && s4[1] == 2 && s4[2] == -1 && s4[3] == -8 && s4[4] == 7);
  /* every pair of nibbles, s4 values written as int8 codes (sign-extended) */
  int bad = 0;
  for (int a = -8; a < 8; a++) {
    for (int b = -8; b < 8; b++) {
      uint8_t c[2] = {(uint8_t)(int8_t)a, (uint8_t)(int8_t)b}, p;
      int8_t v[2];
      precis_pack_nibbles(c, 2, &p);
      precis_unpack_s4(&p, 2, v);
      bad += v[0] != a || v[1] != b;
    }
  }
  CHECK_EQ_INT(bad, 0);
}

TEST(format_rows_of_new_formats) {
  const precis_format *e2m1 = precis_format_by_name("e2m1"), *e8m0 = precis_format_by_name("e8m0");
  const precis_format *s4 = precis_format_by_name("s4"), *u4 = precis_format_by_name("u4");
  CHECK(e2m1 && e8m0 && s4 && u4);
  if (!e2m1 || !e8m0 || !s4 || !u4) return;
  CHECK(e2m1->max_finite == 6.0 && e2m1->storage_bits == 4 && e2m1->cuda_data_type == 33);
  CHECK(e8m0->cuda_data_type == 30 && e8m0->max_finite == 0x1p127 && e8m0->round_f32 == NULL);
  CHECK(s4->cuda_data_type == 16 && s4->max_finite == 7.0 && s4->storage_bits == 4);
  CHECK(u4->cuda_data_type == 18 && u4->max_finite == 15.0);
}

/* Runs the quantizer into freshly allocated buffers; the caller frees with quant_free. */
typedef struct run {
  precis_quant_layout l;
  precis_quant_tensor q;
  float *y;
  precis_status st;
} run;

static run quant_run(precis_quant_desc d, const float *x, size_t rows, size_t cols) {
  run r = {0};
  r.st = precis_quant_layout_of(&d, rows, cols, &r.l);
  if (r.st != PRECIS_OK) return r;
  r.q.codes = calloc(rows * cols, 1);
  r.q.scales = calloc(r.l.scale_count, sizeof(float));
  r.q.scale_codes = calloc(r.l.scale_count, 1);
  r.q.zero_points = calloc(r.l.scale_count, 1);
  r.y = calloc(rows * cols, sizeof(float));
  r.st = precis_quantize(&d, x, rows, cols, &r.q);
  if (r.st == PRECIS_OK) r.st = precis_dequantize(&d, &r.q, rows, cols, r.y);
  return r;
}

static void quant_free(run *r) {
  free(r->q.codes);
  free(r->q.scales);
  free(r->q.scale_codes);
  free(r->q.zero_points);
  free(r->y);
}

TEST(layouts_of_each_granularity) {
  static const struct {
    precis_quant_desc d;
    size_t rows, cols, gr, gc, sr, sc, code_bytes, scale_bytes;
  } cases[] = {
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A}, 8, 64, 8, 64, 1, 1, 512, 4},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A}, 8, 64, 1, 64, 8, 1, 512, 32},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_COL, 0, 0, 0, PRECIS_OPERAND_B}, 8, 64, 8, 1, 1, 64, 512, 256},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 128, 0, 0, PRECIS_OPERAND_A}, 4, 256, 1, 128, 4, 2, 1024, 32},
      {{PRECIS_FMT_S4, PRECIS_QUANT_GRAN_K, 128, 0, 0, PRECIS_OPERAND_B}, 256, 64, 128, 1, 2, 64, 8192, 512},
      {{PRECIS_FMT_U4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_B}, 256, 64, 128, 1, 2,
       64, 8192, 512 + 64},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_BLOCK, 128, 128, 0, PRECIS_OPERAND_B}, 256, 384, 128, 128, 2, 3, 98304, 24},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A}, 2, 64, 1, 32, 2, 2, 128, 4},
      {{PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_MX_RCEIL, 0, 0, 0, PRECIS_OPERAND_B}, 64, 3, 32, 1, 2, 3, 96, 6},
      {{PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_A}, 4, 32, 1, 16, 4, 2, 64, 8 + 4},
      {{PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 128, 0, 0, PRECIS_OPERAND_A}, 3, 200, 1, 128, 3, 2, 600, 24}, /* cut */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    precis_quant_layout l;
    CHECK_OK(precis_quant_layout_of(&cases[i].d, cases[i].rows, cases[i].cols, &l));
    CHECK_MSG(l.group_rows == cases[i].gr && l.group_cols == cases[i].gc, "case %zu: group %zux%zu", i, l.group_rows,
              l.group_cols);
    CHECK_MSG(l.scale_rows == cases[i].sr && l.scale_cols == cases[i].sc, "case %zu: grid %zux%zu", i, l.scale_rows,
              l.scale_cols);
    CHECK_MSG(l.code_bytes == cases[i].code_bytes, "case %zu: code bytes %zu", i, l.code_bytes);
    CHECK_MSG(l.scale_bytes == cases[i].scale_bytes, "case %zu: scale bytes %zu", i, l.scale_bytes);
  }
}

TEST(invalid_descriptions_are_usage_errors) {
  static const precis_quant_desc bad[] = {
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_A},                            /* nv needs e2m1 */
      {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A},                              /* mx needs floats */
      {PRECIS_FMT_U4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_B},    /* u4 is asymmetric */
      {PRECIS_FMT_S4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_B},   /* s4 is symmetric */
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 0, 0, 0, PRECIS_OPERAND_A},                             /* k0 */
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_BLOCK, 128, 0, 0, PRECIS_OPERAND_A},                       /* 128x0 */
      {PRECIS_FMT_BF16, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A},                           /* not quantizable */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    precis_quant_layout l;
    CHECK_MSG(precis_quant_layout_of(&bad[i], 16, 256, &l) == PRECIS_E_USAGE, "case %zu accepted", i);
  }
  precis_quant_layout l;
  CHECK(precis_quant_layout_of(&bad[0], 16, 256, &l) == PRECIS_E_USAGE && strstr(precis_last_error(), "nv"));
  precis_quant_desc ok = {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A};
  CHECK(precis_quant_layout_of(&ok, 0, 16, &l) == PRECIS_E_USAGE);
}

TEST(fp8_scale_rule_edges) {
  precis_quant_desc d = {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A};
  /* row 0: amax 0 with inf/NaN in it; row 1: amax 448 exactly (scale 1) with inf/-inf/NaN;
   * row 2: a subnormal amax whose scale loses precision; row 3: -0 only */
  const float x[4][4] = {{0.0f, INFINITY, NAN, -0.0f},
                         {448.0f, INFINITY, -INFINITY, -NAN},
                         {1000 * 0x1p-149f, 0.0f, 0.0f, 0.0f},
                         {-0.0f, -0.0f, -0.0f, -0.0f}};
  run r = quant_run(d, &x[0][0], 4, 4);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.scales[0] == 1.0f); /* amax 0 -> scale 1, zeros, and the non-finite inputs clipped */
    CHECK(r.q.codes[0] == 0 && r.q.codes[1] == 0 && r.q.codes[2] == 0 && r.q.codes[3] == 0);
    CHECK(r.q.scales[1] == 1.0f);
    CHECK_EQ_INT(r.q.codes[4], 0x7e);
    CHECK_EQ_INT(r.q.codes[5], 0x7e); /* +inf saturates to 448 */
    CHECK_EQ_INT(r.q.codes[6], 0xfe);
    CHECK_EQ_INT(r.q.codes[7], 0xff); /* NaN keeps its sign */
    /* 1000 * 2^-149 / 448 rounds to 2 * 2^-149: x / s = 500 saturates and counts as clipped */
    CHECK_EQ_INT(bits_of(r.q.scales[2]), 2);
    CHECK_EQ_INT(r.q.codes[8], 0x7e);
    CHECK(r.q.scales[3] == 1.0f && r.q.codes[12] == 0);
    CHECK_EQ_INT(r.q.clipped, 2 + 3 + 1);
    CHECK(r.y[4] == 448.0f && r.y[5] == 448.0f && r.y[6] == -448.0f && isnan(r.y[7]) && r.y[0] == 0.0f);
  }
  quant_free(&r);
  /* e5m2 per tensor: scale amax / 57344, satfinite; NaN -> 0x7e with its sign */
  d = (precis_quant_desc){PRECIS_FMT_E5M2, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A};
  const float y[4] = {57344.0f, -INFINITY, -NAN, 1.0f};
  r = quant_run(d, y, 1, 4);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.scales[0] == 1.0f);
    CHECK_EQ_INT(r.q.codes[0], 0x7b);
    CHECK_EQ_INT(r.q.codes[1], 0xfb);
    CHECK_EQ_INT(r.q.codes[2], 0xfe);
    CHECK_EQ_INT(r.q.codes[3], 0x3c);
    CHECK_EQ_INT(r.q.clipped, 2);
  }
  quant_free(&r);
}

TEST(mx_and_nv_rules) {
  /* mx e4m3 on A, one block of 32: amax 448 * 2^-3 = 56 -> floor(log2 56) = 5 -> scale 2^-3 */
  float x[64];
  for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.5f;
  x[7] = 56.0f;
  for (int i = 32; i < 64; i++) x[i] = 0.0f; /* a zero block */
  x[40] = -INFINITY;
  precis_quant_desc d = {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A};
  run r = quant_run(d, x, 1, 64);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK_EQ_INT(r.q.scale_codes[0], 127 - 3);
    CHECK(r.q.scales[0] == 0.125f);
    CHECK_EQ_INT(r.q.codes[7], 0x7e); /* 56 / 2^-3 = 448 */
    CHECK_EQ_INT(r.q.scale_codes[1], 127);
    CHECK(r.q.codes[40] == 0);
    CHECK_EQ_INT(r.q.clipped, 1);
    int exact = 1;
    for (int i = 0; i < 32; i++) exact &= r.y[i] == x[i]; /* all representable after the power-of-two scale */
    CHECK(exact);
  }
  quant_free(&r);
  /* OCP floor can saturate: amax 60 -> floor(log2 60) = 5 -> scale 2^-3 -> 480 saturates to 448 */
  x[7] = 60.0f;
  r = quant_run(d, x, 1, 32);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) CHECK(r.q.codes[7] == 0x7e && r.q.clipped == 1);
  quant_free(&r);
  /* ... rceil never does: 60 / 448 rounds up to 2^-2, 60 / 0.25 = 240 */
  d.gran = PRECIS_QUANT_GRAN_MX_RCEIL;
  r = quant_run(d, x, 1, 32);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) CHECK(r.q.scales[0] == 0.25f && r.q.clipped == 0 && r.y[7] == 60.0f);
  quant_free(&r);
  /* nv: tensor amax 2688 -> s2 = 1; block 0 amax 2688 -> 2688/6 = 448; block 1 amax 3 -> 0.5;
   * block 2 all zero -> block scale 1.0 (0x38); NaN -> +6 and clipped */
  float v[48] = {0};
  v[0] = 2688.0f;
  v[1] = -1344.0f;
  v[16] = 3.0f;
  v[17] = 0.75f;
  v[18] = NAN;
  d = (precis_quant_desc){PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_A};
  r = quant_run(d, v, 1, 48);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.tensor_scale == 1.0f);
    CHECK_EQ_INT(r.q.scale_codes[0], 0x7e);
    CHECK(r.q.scales[1] == 0.5f);
    CHECK_EQ_INT(r.q.scale_codes[2], 0x38);
    CHECK_EQ_INT(r.q.codes[0], 0x7);
    CHECK_EQ_INT(r.q.codes[1], 0xd); /* -1344 / 448 = -3 */
    CHECK_EQ_INT(r.q.codes[16], 0x7);
    CHECK_EQ_INT(r.q.codes[17], 0x3); /* 0.75 / 0.5 = 1.5 */
    CHECK_EQ_INT(r.q.codes[18], 0x7);
    CHECK_EQ_INT(r.q.clipped, 1);
    CHECK(r.y[0] == 2688.0f && r.y[1] == -1344.0f && r.y[17] == 0.75f);
  }
  quant_free(&r);
  /* all-zero tensor: s2 = 1, every block scale 1 */
  float z[16] = {0};
  r = quant_run(d, z, 1, 16);
  CHECK(r.st == PRECIS_OK && r.q.tensor_scale == 1.0f && r.q.scale_codes[0] == 0x38);
  quant_free(&r);
}

TEST(integer_conventions) {
  /* symmetric half-range (compressed-tensors): amax 127.5 -> scale 1; -127.5 ties to -128 (kept),
   * 127.5 ties to 128 (clipped to 127) */
  const float a[4] = {-127.5f, 127.5f, 2.5f, -0.5f};
  precis_quant_desc d = {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_TENSOR, 0, 0, PRECIS_QUANT_INT_SYMMETRIC_HALF,
                         PRECIS_OPERAND_A};
  run r = quant_run(d, a, 1, 4);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.scales[0] == 1.0f);
    CHECK((int8_t)r.q.codes[0] == -128 && (int8_t)r.q.codes[1] == 127 && (int8_t)r.q.codes[2] == 2);
    CHECK_EQ_INT(r.q.clipped, 1);
  }
  quant_free(&r);
  /* s4 symmetric: amax 7 -> scale 1, codes -7..7 */
  const float b[4] = {-7.0f, 7.0f, 3.5f, -8.0f};
  d = (precis_quant_desc){PRECIS_FMT_S4, PRECIS_QUANT_GRAN_TENSOR, 0, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_A};
  r = quant_run(d, b, 1, 4);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.scales[0] == 8.0f / 7.0f); /* amax is 8 */
    CHECK((int8_t)r.q.codes[3] == -7 && (int8_t)r.q.codes[1] == 6);
  }
  quant_free(&r);
  /* GPTQ asymmetric u4: min -1, max 3.5 -> scale 4.5/15 = 0.3, zero = rne(1/0.3 = 3.33) = 3 */
  const float c[4] = {-1.0f, 0.0f, 2.0f, 3.5f};
  d = (precis_quant_desc){PRECIS_FMT_U4, PRECIS_QUANT_GRAN_ROW, 0, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_A};
  r = quant_run(d, c, 1, 4);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(r.q.scales[0] == 4.5f / 15.0f);
    CHECK_EQ_INT(r.q.zero_points[0], 3);
    CHECK(r.q.codes[0] == 0 && r.q.codes[1] == 3 && r.q.codes[2] == 10 && r.q.codes[3] == 15);
    CHECK(r.y[1] == 0.0f); /* 0 is exact: the zero point is an integer */
  }
  quant_free(&r);
  /* a range wider than FLT_MAX still gets a finite scale */
  const float huge[2] = {3e38f, -3e38f};
  r = quant_run(d, huge, 1, 2);
  CHECK(r.st == PRECIS_OK && isfinite(r.q.scales[0]) && r.q.codes[0] == 15 && r.q.codes[1] == 0);
  quant_free(&r);
  /* positive-only data: the range still includes 0 (min 0 -> zero point 0) */
  const float e[2] = {1.0f, 2.0f};
  r = quant_run(d, e, 1, 2);
  CHECK(r.st == PRECIS_OK && r.q.zero_points[0] == 0 && r.q.codes[1] == 15 && r.q.scales[0] == 2.0f / 15.0f);
  quant_free(&r);
}

/* The generic quantizer reproduces the legacy int8 (per row) and fp8 (per tensor) codes. */
TEST(legacy_quantizers_reproduced) {
  enum { R = 17, C = 300 };
  float *x = malloc(R * C * sizeof *x), srow[R];
  int8_t *q8 = malloc(R * C);
  uint8_t *f8 = malloc(R * C);
  uint32_t s = 7;
  for (int i = 0; i < R * C; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = ((float)(s >> 8) * 0x1p-24f - 0.5f) * (i % 37 == 0 ? 300.0f : 4.0f);
  }
  precis_int8_row_scales(x, R, C, srow);
  size_t clipped8 = precis_int8_quantize_rows(x, R, C, srow, q8);
  precis_quant_desc d = {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_ROW, 0, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_A};
  run r = quant_run(d, x, R, C);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(memcmp(r.q.codes, q8, R * C) == 0);
    CHECK(memcmp(r.q.scales, srow, sizeof srow) == 0);
    CHECK_EQ_INT(r.q.clipped, clipped8);
  }
  quant_free(&r);
  float st = precis_fp8_scale_from_amax(precis_absmax(x, R * C));
  size_t clipped_f8 = precis_fp8_quantize_tensor(x, R * C, st, f8);
  d = (precis_quant_desc){PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A};
  r = quant_run(d, x, R, C);
  CHECK_OK(r.st);
  if (r.st == PRECIS_OK) {
    CHECK(memcmp(r.q.codes, f8, R * C) == 0);
    CHECK(r.q.scales[0] == st);
    CHECK_EQ_INT(r.q.clipped, clipped_f8);
  }
  quant_free(&r);
  free(x);
  free(q8);
  free(f8);
}

/* Static scales: the data's own amax reproduces the dynamic quantizer; half of it reproduces the
 * legacy fp8 quantizer with that scale (saturating, clipped counted); a k-group or asymmetric
 * description is refused. */
TEST(static_amax_quantizes_per_tensor) {
  enum { R = 9, C = 70 };
  float x[R * C];
  uint8_t codes[R * C], legacy[R * C];
  float scale;
  for (int i = 0; i < R * C; i++) x[i] = sinf(0.7f * (float)i) * (i % 13 == 0 ? 50.0f : 1.0f);
  precis_quant_desc d = {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A};
  run r = quant_run(d, x, R, C);
  CHECK_OK(r.st);
  precis_quant_tensor t = {.codes = codes, .scales = &scale};
  CHECK_OK(precis_quantize_with_amax(&d, x, R, C, precis_absmax(x, R * C), &t));
  if (r.st == PRECIS_OK) {
    CHECK(memcmp(codes, r.q.codes, sizeof codes) == 0 && scale == r.q.scales[0] && t.clipped == r.q.clipped);
  }
  quant_free(&r);
  float half = precis_absmax(x, R * C) / 2;
  CHECK_OK(precis_quantize_with_amax(&d, x, R, C, half, &t));
  float s_legacy = precis_fp8_scale_from_amax(half);
  size_t clipped = precis_fp8_quantize_tensor(x, R * C, s_legacy, legacy);
  CHECK(memcmp(codes, legacy, sizeof codes) == 0 && scale == s_legacy);
  CHECK(t.clipped == clipped && clipped > 0);
  d.gran = PRECIS_QUANT_GRAN_K, d.group = 16;
  CHECK(precis_quantize_with_amax(&d, x, R, C, half, &t) == PRECIS_E_USAGE);
  d = (precis_quant_desc){PRECIS_FMT_U4, PRECIS_QUANT_GRAN_TENSOR, 0, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_A};
  CHECK(precis_quantize_with_amax(&d, x, R, C, half, &t) == PRECIS_E_USAGE);
}

/* Operand B's k-groups run down the columns: the same matrix transposed and quantized as A gives
 * the transposed codes and scales. */
TEST(operand_b_groups_run_along_k) {
  enum { K = 64, N = 5 };
  float b[K * N], at[N * K];
  for (int i = 0; i < K; i++)
    for (int j = 0; j < N; j++) b[i * N + j] = at[j * K + i] = sinf((float)(i * 7 + j * 3)) * (float)(1 + j);
  precis_quant_desc db = {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_B};
  precis_quant_desc da = db;
  da.side = PRECIS_OPERAND_A;
  run rb = quant_run(db, b, K, N), ra = quant_run(da, at, N, K);
  CHECK(rb.st == PRECIS_OK && ra.st == PRECIS_OK);
  if (rb.st == PRECIS_OK && ra.st == PRECIS_OK) {
    CHECK(rb.l.scale_rows == K / 16 && rb.l.scale_cols == N);
    int bad = 0;
    for (int i = 0; i < K; i++)
      for (int j = 0; j < N; j++) bad += rb.q.codes[i * N + j] != ra.q.codes[j * K + i];
    for (int g = 0; g < K / 16; g++)
      for (int j = 0; j < N; j++) bad += rb.q.scale_codes[g * N + j] != ra.q.scale_codes[j * (K / 16) + g];
    CHECK_EQ_INT(bad, 0);
  }
  quant_free(&rb);
  quant_free(&ra);
}

/* A deliberately plain quantizer from the rules of format_bits.h (docs/formats.md, "The generic
 * quantizer"): each group's statistics element by element, its scale by precis_bits_group_scale,
 * each element by the scalar rule. precis_quantize (band walks, vector encoders, specialised scale
 * loops) must give the same codes, scales, scale codes, zero points and clipped count. */
static void naive_quantize(const precis_quant_desc *d, const float *x, size_t rows, size_t cols,
                           const precis_quant_layout *l, uint8_t *codes, float *scales, uint8_t *scale_codes,
                           uint8_t *zeros, size_t *clipped) {
  int rule = d->gran == PRECIS_QUANT_GRAN_MX         ? PRECIS_SCALE_RULE_MX_FLOOR
             : d->gran == PRECIS_QUANT_GRAN_MX_RCEIL ? PRECIS_SCALE_RULE_MX_RCEIL
             : d->gran == PRECIS_QUANT_GRAN_NV       ? PRECIS_SCALE_RULE_NV
             : d->ints == PRECIS_QUANT_INT_ASYMMETRIC && d->elem == PRECIS_FMT_U4 ? PRECIS_SCALE_RULE_ASYM
                                                                                 : PRECIS_SCALE_RULE_DIVIDE;
  bool is_int = d->elem == PRECIS_FMT_I8 || d->elem == PRECIS_FMT_S4 || d->elem == PRECIS_FMT_U4;
  float qmax = d->elem == PRECIS_FMT_I8 ? 127.0f : d->elem == PRECIS_FMT_S4 ? 7.0f : 15.0f, qmin = -qmax;
  float max_elem = d->elem == PRECIS_FMT_E4M3 ? 448.0f : d->elem == PRECIS_FMT_E5M2 ? 57344.0f
                   : d->elem == PRECIS_FMT_E2M1 ? 6.0f : qmax;
  if (is_int && d->ints == PRECIS_QUANT_INT_SYMMETRIC_HALF) qmin = -qmax - 1.0f, max_elem = qmax + 0.5f;
  if (rule == PRECIS_SCALE_RULE_ASYM) qmin = 0.0f;
  int emax = d->elem == PRECIS_FMT_E4M3 ? 8 : d->elem == PRECIS_FMT_E5M2 ? 15 : 2;
  float ts = 1.0f;
  if (rule == PRECIS_SCALE_RULE_NV) {
    float m = 0;
    for (size_t i = 0; i < rows * cols; i++) m = fmaxf(m, precis_bits_finite_abs(x[i]));
    ts = m / 2688.0f > 0.0f ? m / 2688.0f : 1.0f;
  }
  *clipped = 0;
  for (size_t gr = 0; gr < l->scale_rows; gr++)
    for (size_t gc = 0; gc < l->scale_cols; gc++) {
      size_t r0 = gr * l->group_rows, c0 = gc * l->group_cols;
      size_t r1 = r0 + l->group_rows < rows ? r0 + l->group_rows : rows;
      size_t c1 = c0 + l->group_cols < cols ? c0 + l->group_cols : cols;
      float amax = 0, lo = 0, hi = 0;
      for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) {
          float v = x[r * cols + c], f = precis_bits_is_finite(v) ? v : 0.0f;
          amax = fmaxf(amax, precis_bits_finite_abs(v));
          lo = fminf(lo, f), hi = fmaxf(hi, f);
        }
      precis_bits_scale g = precis_bits_group_scale(rule, amax, lo, hi, max_elem, emax, ts);
      size_t idx = gr * l->scale_cols + gc;
      scales[idx] = g.scale, scale_codes[idx] = (uint8_t)g.code, zeros[idx] = (uint8_t)g.zero;
      for (size_t r = r0; r < r1; r++)
        for (size_t c = c0; c < c1; c++) {
          float v = x[r * cols + c];
          int clip = 0;
          uint8_t code = d->elem == PRECIS_FMT_E4M3   ? precis_bits_fp8_quantize(v, g.divisor, &clip)
                         : d->elem == PRECIS_FMT_E5M2 ? precis_bits_e5m2_quantize(v, g.divisor, &clip)
                         : d->elem == PRECIS_FMT_E2M1 ? precis_bits_e2m1_quantize(v, g.divisor, &clip)
                                                      : (uint8_t)precis_bits_int_quantize(v, g.divisor, g.zero, qmin, qmax, &clip);
          codes[r * cols + c] = code;
          *clipped += (size_t)clip;
        }
    }
}

TEST(every_granularity_matches_a_plain_reference) {
  static const precis_quant_desc descs[] = {
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_COL, 0, 0, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 128, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_K, 24, 0, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_BLOCK, 16, 40, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_E5M2, PRECIS_QUANT_GRAN_ROW, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E4M3, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E5M2, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_MX, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_MX_RCEIL, 0, 0, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_A},
      {PRECIS_FMT_E2M1, PRECIS_QUANT_GRAN_NV, 0, 0, 0, PRECIS_OPERAND_B},
      {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_ROW, 0, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_A},
      {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_COL, 0, 0, PRECIS_QUANT_INT_SYMMETRIC_HALF, PRECIS_OPERAND_B},
      {PRECIS_FMT_S4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_SYMMETRIC, PRECIS_OPERAND_B},
      {PRECIS_FMT_S4, PRECIS_QUANT_GRAN_K, 32, 0, PRECIS_QUANT_INT_SYMMETRIC_HALF, PRECIS_OPERAND_A},
      {PRECIS_FMT_U4, PRECIS_QUANT_GRAN_K, 128, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_B},
      {PRECIS_FMT_U4, PRECIS_QUANT_GRAN_K, 16, 0, PRECIS_QUANT_INT_ASYMMETRIC, PRECIS_OPERAND_A},
  };
  /* Shapes with and without ragged groups; values over many binades, with zeros, subnormals, huge
   * values, inf and NaN, and whole groups of zeros (zero divisors). */
  static const size_t shapes[][2] = {{37, 70}, {64, 256}, {3, 300}};
  uint32_t state = 12345;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    size_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
      state = state * 1664525u + 1013904223u;
      uint32_t r = state >> 8;
      float v = ldexpf((float)(r & 0xffff) / 65536.0f - 0.5f, (int)((r >> 16) % 40) - 20);
      switch (r % 97) {
      case 0: v = INFINITY; break;
      case 1: v = -INFINITY; break;
      case 2: v = NAN; break;
      case 3: v = -NAN; break;
      case 4: v = 1e-40f; break;
      case 5: v = -3e38f; break;
      default: break;
      }
      x[i] = (i / cols) % 7 == 5 ? 0.0f : v; /* zero rows: zero groups on every side */
    }
    for (size_t k = 0; k < sizeof descs / sizeof descs[0]; k++) {
      const precis_quant_desc *d = &descs[k];
      precis_quant_layout l;
      CHECK_OK(precis_quant_layout_of(d, rows, cols, &l));
      uint8_t *codes = malloc(n), *want_codes = malloc(n), *sc = calloc(l.scale_count, 1),
              *want_sc = calloc(l.scale_count, 1), *zp = calloc(l.scale_count, 1), *want_zp = calloc(l.scale_count, 1);
      float *scales = malloc(l.scale_count * sizeof *scales), *want_scales = malloc(l.scale_count * sizeof *scales);
      precis_quant_tensor q = {.codes = codes, .scales = scales, .scale_codes = sc, .zero_points = zp};
      CHECK_OK(precis_quantize(d, x, rows, cols, &q));
      size_t want_clipped = 0;
      naive_quantize(d, x, rows, cols, &l, want_codes, want_scales, want_sc, want_zp, &want_clipped);
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) bad += codes[i] != want_codes[i];
      for (size_t i = 0; i < l.scale_count; i++) {
        bad += bits_of(scales[i]) != bits_of(want_scales[i]);
        if (l.scale_fmt != PRECIS_FMT_F32) bad += sc[i] != want_sc[i];
        if (l.has_zero_points) bad += zp[i] != want_zp[i];
      }
      CHECK_MSG(bad == 0 && q.clipped == want_clipped, "%s@%s:%s side %d, %zux%zu: %zu mismatches, clipped %zu vs %zu",
                precis_format_get(d->elem)->name, precis_quant_gran_str(d->gran), precis_quant_int_str(d->ints),
                (int)d->side, rows, cols, bad, q.clipped, want_clipped);
      free(codes), free(want_codes), free(sc), free(want_sc), free(zp), free(want_zp), free(scales), free(want_scales);
    }
    free(x);
  }
}

static precis_status parabola_error(const float *s, void *ctx, double *error) {
  (void)s;
  int *calls = ctx;
  double alpha = (*calls)++ / 10.0;
  *error = (alpha - 0.3) * (alpha - 0.3);
  return PRECIS_OK;
}

TEST(smoothquant_scales_and_search) {
  /* channel 0: max|X| 4, max|W| 1 -> s = sqrt(4/1) = 2 at alpha 0.5; channel 1: X is 0 -> s = 1 */
  float x[4] = {4.0f, 0.0f, -2.0f, 0.0f}, w[4] = {1.0f, -0.5f, 9.0f, 3.0f}, s[2];
  CHECK_OK(precis_smooth_scales(x, 2, 2, w, 2, 0.5, s));
  CHECK(s[0] == 2.0f && s[1] == 1.0f);
  CHECK_OK(precis_smooth_scales(x, 2, 2, w, 2, 1.0, s));
  CHECK(s[0] == 4.0f);
  CHECK(precis_smooth_scales(x, 2, 2, w, 2, 1.5, s) == PRECIS_E_USAGE);
  precis_smooth_apply(x, 2, 2, w, 2, (const float[]){2.0f, 1.0f});
  CHECK(x[0] == 2.0f && x[2] == -1.0f && w[0] == 2.0f && w[1] == -1.0f && w[2] == 9.0f);
  int calls = 0;
  double alpha = -1;
  CHECK_OK(precis_smooth_search(x, 2, 2, w, 2, parabola_error, &calls, &alpha, s));
  CHECK_EQ_INT(calls, 11);
  CHECK_NEAR(alpha, 0.3, 1e-12);
  /* Outlier channels in X, int8 per tensor on both sides: the searched smoothing lowers the error
   * of the product below no smoothing at all (s = 1). */
  enum { M = 32, K = 64, N = 48 };
  float *X = malloc(M * K * sizeof *X), *W = malloc(K * N * sizeof *W), one[K], best[K];
  uint32_t r = 3;
  for (int i = 0; i < M * K; i++) {
    r = r * 1664525u + 1013904223u;
    X[i] = ((float)(r >> 8) * 0x1p-24f - 0.5f) * ((i % K) % 16 == 3 ? 80.0f : 1.0f);
  }
  for (int i = 0; i < K * N; i++) {
    r = r * 1664525u + 1013904223u;
    W[i] = (float)(r >> 8) * 0x1p-24f - 0.5f;
  }
  for (int j = 0; j < K; j++) one[j] = 1.0f;
  precis_smooth_gemm_ctx ctx = {.x = X, .w = W, .m = M, .k = K, .n = N,
                                .a = {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A},
                                .b = {PRECIS_FMT_I8, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_B}};
  double e_none, e_best;
  CHECK_OK(precis_smooth_gemm_error(one, &ctx, &e_none));
  CHECK_OK(precis_smooth_search(X, M, K, W, N, precis_smooth_gemm_error, &ctx, &alpha, best));
  CHECK_OK(precis_smooth_gemm_error(best, &ctx, &e_best));
  CHECK_MSG(e_best < 0.5 * e_none, "smoothed error %g, unsmoothed %g (alpha %g)", e_best, e_none, alpha);
  CHECK(alpha > 0.0);
  free(X);
  free(W);
}

RUN_TESTS(T(e2m1_codes_and_rounding), T(e8m0_codes_and_scale_rules), T(nibble_packing_order_and_round_trip),
          T(format_rows_of_new_formats), T(layouts_of_each_granularity), T(invalid_descriptions_are_usage_errors),
          T(fp8_scale_rule_edges), T(mx_and_nv_rules), T(integer_conventions), T(legacy_quantizers_reproduced),
          T(operand_b_groups_run_along_k), T(smoothquant_scales_and_search), T(static_amax_quantizes_per_tensor),
          T(every_granularity_matches_a_plain_reference))
