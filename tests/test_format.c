/* The format table and the fp32 <-> format conversions on hand-worked cases: rounding ties, the
 * overflow thresholds, subnormals, signed zero, inf and NaN; the 256 FP8 codes against the OCP
 * definition; the array paths against the scalar ones. The exhaustive_*.c tests cover all inputs. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "numerics/format.h"
#include "harness.h"

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static bool same_bits(float a, float b) { return bits_of(a) == bits_of(b); }

TEST(table_rows_are_consistent) {
  static const char *names[PRECIS_FMT_COUNT] = {"fp64", "fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2",
                                                "s8",   "s32",  "e2m1", "e8m0", "s4",   "u4",   "e2m3", "e3m2", "s2",   "s3"};
  for (int i = 0; i < PRECIS_FMT_COUNT; i++) {
    const precis_format *f = precis_format_get((precis_format_id)i);
    CHECK(f != NULL);
    if (!f) continue;
    CHECK_EQ_INT(f->id, i);
    CHECK_STR(f->name, names[i]);
    CHECK(f->long_name && f->long_name[0]);
    CHECK(precis_format_by_name(names[i]) == f);
    if (f->is_float) {
      CHECK_MSG(f->unit_roundoff == ldexp(1.0, -f->significand_bits), "%s: u = 2^-p", f->name);
      CHECK_MSG(f->min_subnormal == ldexp(f->min_normal, -(f->significand_bits - 1)), "%s: min subnormal", f->name);
      if (f->round_f32) {
        CHECK_MSG(f->round_f32((float)f->max_finite) == (float)f->max_finite, "%s: max finite is representable",
                  f->name);
        CHECK_MSG(f->round_f32((float)f->min_subnormal) == (float)f->min_subnormal, "%s: min subnormal representable",
                  f->name);
        CHECK_MSG(f->round_f32((float)(f->min_subnormal * 0.5)) == 0.0f, "%s: half min subnormal ties to 0", f->name);
        CHECK(f->round_array != NULL);
      }
    } else {
      CHECK(f->round_f32 == NULL && f->significand_bits == 0 && f->unit_roundoff == 0.0);
    }
  }
  CHECK(precis_format_get(PRECIS_FMT_COUNT) == NULL);
  CHECK(precis_format_by_name("fp8") == NULL);
  CHECK(precis_format_by_name(NULL) == NULL);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_F16)->cuda_data_type, 2);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_BF16)->cuda_data_type, 14);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_E4M3)->cuda_data_type, 28);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_E5M2)->cuda_data_type, 29);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_I8)->cuda_data_type, 3);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_I32)->cuda_data_type, 10);
  CHECK_EQ_INT(precis_format_get(PRECIS_FMT_TF32)->cuda_data_type, 0);
  CHECK(!precis_format_get(PRECIS_FMT_E4M3)->has_inf && precis_format_get(PRECIS_FMT_E5M2)->has_inf);
  CHECK(precis_format_get(PRECIS_FMT_F16)->max_finite == 65504.0);
  CHECK(precis_format_get(PRECIS_FMT_E4M3)->max_finite == 448.0);
  CHECK(precis_format_get(PRECIS_FMT_E5M2)->max_finite == 57344.0);
  CHECK(precis_format_get(PRECIS_FMT_BF16)->max_finite == (double)precis_bf16_bits_to_f32(0x7f7f));
  CHECK(precis_format_get(PRECIS_FMT_TF32)->max_finite == (double)precis_round_tf32(float_of(0x7f7fe000u)));
}

TEST(fp16_rounding_cases) {
  CHECK_EQ_INT(precis_f32_to_f16_bits(1.0f), 0x3c00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(-2.0f), 0xc000);
  CHECK_EQ_INT(precis_f32_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);        /* tie, even below */
  CHECK_EQ_INT(precis_f32_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie, even above */
  CHECK_EQ_INT(precis_f32_to_f16_bits(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
  CHECK_EQ_INT(precis_f32_to_f16_bits(65504.0f), 0x7bff);
  CHECK_EQ_INT(precis_f32_to_f16_bits(nextafterf(65520.0f, 0.0f)), 0x7bff);
  CHECK_EQ_INT(precis_f32_to_f16_bits(65520.0f), 0x7c00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(-65520.0f), 0xfc00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(FLT_MAX), 0x7c00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(INFINITY), 0x7c00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(-INFINITY), 0xfc00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(0x1p-14f), 0x0400);               /* min normal */
  CHECK_EQ_INT(precis_f32_to_f16_bits(nextafterf(0x1p-14f, 0.0f)), 0x0400); /* rounds up into normal */
  CHECK_EQ_INT(precis_f32_to_f16_bits(0x1p-24f), 0x0001);
  CHECK_EQ_INT(precis_f32_to_f16_bits(0x1p-25f), 0x0000);               /* tie to even zero */
  CHECK_EQ_INT(precis_f32_to_f16_bits(nextafterf(0x1p-25f, 1.0f)), 0x0001);
  CHECK_EQ_INT(precis_f32_to_f16_bits(3 * 0x1p-25f), 0x0002);           /* 1.5 units: tie to even 2 */
  CHECK_EQ_INT(precis_f32_to_f16_bits(5 * 0x1p-25f), 0x0002);           /* 2.5 units: tie to even 2 */
  CHECK_EQ_INT(precis_f32_to_f16_bits(-0x1p-24f), 0x8001);
  CHECK_EQ_INT(precis_f32_to_f16_bits(FLT_TRUE_MIN), 0x0000);
  CHECK_EQ_INT(precis_f32_to_f16_bits(-FLT_TRUE_MIN), 0x8000);          /* signed zero kept */
  CHECK_EQ_INT(precis_f32_to_f16_bits(-0.0f), 0x8000);
  CHECK_EQ_INT(precis_f32_to_f16_bits(float_of(0x7fc00000u)), 0x7e00);
  CHECK_EQ_INT(precis_f32_to_f16_bits(float_of(0xffc00000u)), 0xfe00);  /* sign kept */
  CHECK_EQ_INT(precis_f32_to_f16_bits(float_of(0x7f800001u)), 0x7e00);  /* signalling -> quiet, low payload dropped */
  CHECK_EQ_INT(precis_f32_to_f16_bits(float_of(0x7fbfe000u)), 0x7fff);  /* top payload bits kept */
  CHECK(same_bits(precis_f16_bits_to_f32(0x7c00), INFINITY));
  CHECK(same_bits(precis_f16_bits_to_f32(0x8000), -0.0f));
  CHECK(precis_f16_bits_to_f32(0x0001) == 0x1p-24f);
  CHECK(precis_f16_bits_to_f32(0x03ff) == 1023 * 0x1p-24f);
  CHECK(precis_f16_bits_to_f32(0x7bff) == 65504.0f);
  CHECK_EQ_INT(bits_of(precis_f16_bits_to_f32(0x7d00)), 0x7fe00000u);   /* signalling widens quiet */
  CHECK_EQ_INT(bits_of(precis_f16_bits_to_f32(0xfe00)), 0xffc00000u);
}

TEST(fp16_decode_all_codes) {
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    int s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    float got = precis_f16_bits_to_f32((uint16_t)h);
    if (e == 31) {
      mismatches += m ? !isnan(got) : !(isinf(got) && (signbit(got) != 0) == s);
      continue;
    }
    double mag = e == 0 ? ldexp(m, -24) : ldexp(1.0 + m / 1024.0, e - 15);
    double want = s ? -mag : mag;
    if (!((double)got == want && (signbit(got) != 0) == s)) mismatches++;
    if (precis_f32_to_f16_bits(got) != h) mismatches++; /* every finite code round-trips */
  }
  CHECK_EQ_INT(mismatches, 0);
}

TEST(bf16_and_tf32_rounding_cases) {
  CHECK_EQ_INT(precis_f32_to_bf16_bits(1.0f), 0x3f80);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);       /* tie to even below */
  CHECK_EQ_INT(precis_f32_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);   /* tie to even above */
  CHECK_EQ_INT(precis_f32_to_bf16_bits(-(1.0f + 0x1p-8f + 0x1p-20f)), 0xbf81);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(FLT_MAX), 0x7f80);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(float_of(0x7f7f7fffu)), 0x7f7f);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(float_of(0x7f7f8000u)), 0x7f80); /* tie at the top: to even = inf */
  CHECK_EQ_INT(precis_f32_to_bf16_bits(-INFINITY), 0xff80);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(FLT_TRUE_MIN), 0x0000);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(float_of(0x00008001u)), 0x0001); /* subnormal rounds up */
  CHECK_EQ_INT(precis_f32_to_bf16_bits(-0.0f), 0x8000);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(float_of(0x7f800001u)), 0x7fc0);
  CHECK_EQ_INT(precis_f32_to_bf16_bits(float_of(0xff812345u)), 0xffc1);
  CHECK(same_bits(precis_bf16_bits_to_f32(0x8000), -0.0f));

  CHECK(precis_round_tf32(1.0f + 0x1p-11f) == 1.0f);
  CHECK(precis_round_tf32(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
  CHECK(precis_round_tf32(1.0f + 0x1p-11f + 0x1p-23f) == 1.0f + 0x1p-10f);
  CHECK(isinf(precis_round_tf32(FLT_MAX)));
  CHECK(precis_round_tf32(float_of(0x7f7fefffu)) == float_of(0x7f7fe000u));
  CHECK(same_bits(precis_round_tf32(-INFINITY), -INFINITY));
  CHECK(same_bits(precis_round_tf32(-0.0f), -0.0f));
  CHECK(precis_round_tf32(float_of(0x00001000u)) == 0.0f);               /* subnormal tie to even */
  CHECK(precis_round_tf32(float_of(0x00003000u)) == float_of(0x00004000u));
  CHECK_EQ_INT(bits_of(precis_round_tf32(float_of(0x7f800001u))), 0x7fc00000u);
  CHECK_EQ_INT(bits_of(precis_round_tf32(float_of(0xffa12345u))), 0xffe12000u);
}

/* The OCP 8-bit floating point specification (v1.0), written out per code. */
static double ocp_e4m3_value(uint8_t v, bool *is_nan) {
  int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  *is_nan = e == 15 && m == 7;
  double mag = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

static double ocp_e5m2_value(uint8_t v, bool *is_nan, bool *is_inf) {
  int s = v >> 7, e = (v >> 2) & 31, m = v & 3;
  *is_nan = e == 31 && m != 0;
  *is_inf = e == 31 && m == 0;
  double mag = e == 0 ? ldexp(m / 4.0, -14) : ldexp(1.0 + m / 4.0, e - 15);
  return s ? -mag : mag;
}

TEST(fp8_codes_match_ocp) {
  int nan_codes = 0, e5m2_nan_codes = 0, inf_codes = 0;
  double e4m3_max = 0, e5m2_max = 0, e4m3_min_sub = INFINITY, e5m2_min_sub = INFINITY;
  for (int c = 0; c < 256; c++) {
    bool is_nan, is_inf;
    double want = ocp_e4m3_value((uint8_t)c, &is_nan);
    float got = precis_e4m3_bits_to_f32((uint8_t)c);
    if (is_nan) {
      nan_codes++;
      CHECK_MSG(isnan(got) && (signbit(got) != 0) == (c >> 7), "e4m3 code 0x%02x", c);
      CHECK_EQ_INT(precis_f32_to_e4m3_bits(got), c); /* the NaN keeps its sign */
    } else {
      CHECK_MSG((double)got == want && (signbit(got) != 0) == (c >> 7), "e4m3 code 0x%02x: %g, want %g", c,
                (double)got, want);
      CHECK_EQ_INT(precis_f32_to_e4m3_bits(got), c);
      if (want > e4m3_max) e4m3_max = want;
      if (want > 0 && want < e4m3_min_sub) e4m3_min_sub = want;
    }
    want = ocp_e5m2_value((uint8_t)c, &is_nan, &is_inf);
    got = precis_e5m2_bits_to_f32((uint8_t)c);
    if (is_nan) {
      e5m2_nan_codes++;
      CHECK_MSG(isnan(got), "e5m2 code 0x%02x", c);
    } else if (is_inf) {
      inf_codes++;
      CHECK_MSG(isinf(got) && (signbit(got) != 0) == (c >> 7), "e5m2 code 0x%02x", c);
      CHECK_EQ_INT(precis_f32_to_e5m2_bits(got, false), c);
      CHECK_EQ_INT(precis_f32_to_e5m2_bits(got, true), c - 1); /* satfinite: ±inf -> ±57344 */
    } else {
      CHECK_MSG((double)got == want && (signbit(got) != 0) == (c >> 7), "e5m2 code 0x%02x: %g, want %g", c,
                (double)got, want);
      CHECK_EQ_INT(precis_f32_to_e5m2_bits(got, false), c);
      CHECK_EQ_INT(precis_f32_to_e5m2_bits(got, true), c);
      if (want > e5m2_max) e5m2_max = want;
      if (want > 0 && want < e5m2_min_sub) e5m2_min_sub = want;
    }
  }
  CHECK_EQ_INT(nan_codes, 2); /* only S.1111.111 */
  CHECK_EQ_INT(e5m2_nan_codes, 6);
  CHECK_EQ_INT(inf_codes, 2);
  CHECK(e4m3_max == 448.0 && e5m2_max == 57344.0);
  CHECK(e4m3_min_sub == 0x1p-9 && e5m2_min_sub == 0x1p-16);
}

TEST(fp8_rounding_cases) {
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(448.0f), 0x7e);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(464.0f), 0x7e);                /* tie with "480": to even 448 */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(nextafterf(464.0f, 1e9f)), 0x7e); /* saturates */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(1e30f), 0x7e);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(INFINITY), 0x7e);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(-INFINITY), 0xfe);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(NAN), 0x7f);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(-NAN), 0xff);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(0x1p-10f), 0x00);              /* half min subnormal: to even 0 */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(-0x1p-10f), 0x80);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(nextafterf(0x1p-10f, 1.0f)), 0x01);
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(3 * 0x1p-10f), 0x02);          /* 1.5 units: to even 2 */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(15 * 0x1p-10f), 0x08);         /* 7.5 units: up into min normal */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(1.0f + 0x1p-4f), 0x38);        /* tie to even */
  CHECK_EQ_INT(precis_f32_to_e4m3_bits(1.0f + 3 * 0x1p-4f), 0x3a);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(57344.0f, false), 0x7b);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(nextafterf(61440.0f, 0.0f), false), 0x7b);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(61440.0f, false), 0x7c);      /* tie to even = inf */
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(61440.0f, true), 0x7b);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(-1e30f, true), 0xfb);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(-INFINITY, false), 0xfc);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(NAN, false), 0x7e);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(-NAN, true), 0xfe);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(0x1p-17f, false), 0x00);
  CHECK_EQ_INT(precis_f32_to_e5m2_bits(3 * 0x1p-17f, false), 0x02);
  CHECK(precis_round_e4m3(300.0f) == 288.0f);
  CHECK(precis_round_e5m2(1e6f) == INFINITY);
  CHECK(precis_round_e5m2_satfinite(1e6f) == 57344.0f);
}

/* A value set with every special case of every format and a spread of ordinary values. */
static size_t fill_specials(float *v, size_t cap) {
  static const uint32_t specials[] = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
      0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffbfffffu, 0x477ff000u, 0x477fefffu, 0xc77ff000u,
      0x43e80000u, 0x43e80001u, 0x47700000u, 0x476fffffu, 0x33000000u, 0x33000001u, 0x3a800000u, 0x37800000u,
      0x3f801000u, 0x3f803000u, 0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x7f7fefffu, 0x387fe000u, 0x3c7fffffu};
  size_t n = 0;
  for (size_t i = 0; i < sizeof specials / sizeof specials[0] && n < cap; i++) v[n++] = float_of(specials[i]);
  uint32_t state = 12345u;
  while (n < cap) {
    state = state * 1664525u + 1013904223u;
    v[n++] = float_of(state);
  }
  return n;
}

TEST(array_paths_match_scalar) {
  enum { N = 4099 }; /* odd: exercises every vector tail */
  static float in[N], out[N], inplace[N];
  static uint16_t h[N], h2[N];
  static uint8_t b[N];
  fill_specials(in, N);
  precis_f32_to_f16_array(in, h, N);
  precis_f32_to_f16_array_portable(in, h2, N);
  int bad = 0;
  for (size_t i = 0; i < N; i++) bad += h[i] != precis_f32_to_f16_bits(in[i]) || h2[i] != h[i];
  precis_f16_to_f32_array(h, out, N);
  for (size_t i = 0; i < N; i++) bad += !same_bits(out[i], precis_f16_bits_to_f32(h[i]));
  precis_f32_to_bf16_array(in, h, N);
  for (size_t i = 0; i < N; i++) bad += h[i] != precis_f32_to_bf16_bits(in[i]);
  precis_bf16_to_f32_array(h, out, N);
  for (size_t i = 0; i < N; i++) bad += !same_bits(out[i], precis_bf16_bits_to_f32(h[i]));
  precis_f32_to_e4m3_array(in, b, N);
  for (size_t i = 0; i < N; i++) bad += b[i] != precis_f32_to_e4m3_bits(in[i]);
  precis_e4m3_to_f32_array(b, out, N);
  for (size_t i = 0; i < N; i++) bad += !same_bits(out[i], precis_e4m3_bits_to_f32(b[i]));
  for (int sat = 0; sat < 2; sat++) {
    precis_f32_to_e5m2_array(in, b, N, sat);
    for (size_t i = 0; i < N; i++) bad += b[i] != precis_f32_to_e5m2_bits(in[i], sat);
  }
  precis_e5m2_to_f32_array(b, out, N);
  for (size_t i = 0; i < N; i++) bad += !same_bits(out[i], precis_e5m2_bits_to_f32(b[i]));
  CHECK_EQ_INT(bad, 0);
  for (int f = 0; f < PRECIS_FMT_COUNT; f++) {
    const precis_format *fmt = precis_format_get((precis_format_id)f);
    if (!fmt->round_array) continue;
    fmt->round_array(in, out, N);
    memcpy(inplace, in, sizeof inplace);
    fmt->round_array(inplace, inplace, N);
    int fbad = 0;
    for (size_t i = 0; i < N; i++) fbad += !same_bits(out[i], fmt->round_f32(in[i])) || !same_bits(inplace[i], out[i]);
    CHECK_MSG(fbad == 0, "%s: %d array/scalar mismatches", fmt->name, fbad);
  }
}

RUN_TESTS(T(table_rows_are_consistent), T(fp16_rounding_cases), T(fp16_decode_all_codes), T(bf16_and_tf32_rounding_cases),
          T(fp8_codes_match_ocp), T(fp8_rounding_cases), T(array_paths_match_scalar))
