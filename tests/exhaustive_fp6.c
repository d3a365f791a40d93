/* fp32 -> OCP MX FP6 (E2M3 and E3M2, OCP Microscaling Formats v1.0 §5.3.2) for all 2^32 inputs
 * against the generic "round to p significant bits within [emin, emax]" reference of exhaustive.h
 * (e2m3: p = 4, emin = 0, emax = 2, max 7.5; e3m2: p = 3, emin = -2, emax = 4, max 28; both
 * saturating: beyond max, ±inf give ±max), except NaN, which gives +max (code 0x1f, CUDA's satfinite
 * rule; the formats have no NaN): scalar encoding, the format table's round_array, and the decoding
 * of every code against the OCP value table written out independently. ml_dtypes' float6 types are
 * the second oracle (tests/venv/test_fp6_oracle.py).
 * `exhaustive_fp6 sample` checks only |x| in [2^-6, 2^6), both signs, and every 256th other block. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format e2m3 = {.name = "e2m3", .p = 4, .emin = 0, .emax = 2, .max_finite = 7.5, .saturate = true};
static const generic_format e3m2 = {.name = "e3m2", .p = 3, .emin = -2, .emax = 4, .max_finite = 28.0, .saturate = true};

static uint64_t check_format(uint32_t first, const float *in, float *rounded, const generic_format *g,
                             precis_format_id id, uint8_t (*encode)(float), float (*decode)(uint8_t), double max) {
  precis_format_get(id)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint8_t code = encode(in[i]);
    float got = decode(code);
    bool ok;
    double want;
    if (isnan(in[i])) {
      want = max;
      ok = code == 0x1f;
    } else {
      want = generic_round(g, in[i]);
      ok = code <= 0x3f && generic_matches(got, want);
    }
    if (!ok) {
      bad++;
      exhaustive_report(g->name, first + i, code, exhaustive_bits_of((float)want));
    } else if (exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("round_array", first + i, exhaustive_bits_of(rounded[i]), exhaustive_bits_of(got));
    }
  }
  return bad;
}

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  (void)scratch_b;
  float *rounded = scratch_a;
  return check_format(first, in, rounded, &e2m3, PRECIS_FMT_E2M3, precis_f32_to_e2m3_bits, precis_e2m3_bits_to_f32,
                      7.5) +
         check_format(first, in, rounded, &e3m2, PRECIS_FMT_E3M2, precis_f32_to_e3m2_bits, precis_e3m2_bits_to_f32,
                      28.0);
}

/* Every code against the OCP tables: e2m3 = 2^(e-1)(1 + m/8), subnormal m/8; e3m2 = 2^(e-3)(1 +
 * m/4), subnormal m/16; sign at bit 5. */
static int check_codes(void) {
  for (int c = 0; c < 64; c++) {
    int s = c >> 5, e2 = (c >> 3) & 3, m3 = c & 7, e3 = (c >> 2) & 7, m2 = c & 3;
    double v23 = e2 ? ldexp(1.0 + m3 / 8.0, e2 - 1) : m3 / 8.0;
    double v32 = e3 ? ldexp(1.0 + m2 / 4.0, e3 - 3) : m2 / 16.0;
    float w23 = (float)(s ? -v23 : v23), w32 = (float)(s ? -v32 : v32);
    if (exhaustive_bits_of(precis_e2m3_bits_to_f32((uint8_t)c)) != exhaustive_bits_of(w23) ||
        exhaustive_bits_of(precis_e3m2_bits_to_f32((uint8_t)c)) != exhaustive_bits_of(w32)) {
      fprintf(stderr, "code 0x%02x decodes to %a / %a, want %a / %a\n", c, (double)precis_e2m3_bits_to_f32((uint8_t)c),
              (double)precis_e3m2_bits_to_f32((uint8_t)c), (double)w23, (double)w32);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (check_codes()) return 1;
  if (argc > 1 && strcmp(argv[1], "sample") == 0) {
    static float in[EXHAUSTIVE_BLOCK], a[EXHAUSTIVE_BLOCK];
    uint64_t bad = 0;
    for (uint32_t blk = 0; blk < (UINT32_C(1) << 16); blk++) {
      uint32_t first = blk << 16, mag = first & 0x7fffffffu;
      if ((mag < 0x3c800000u || mag >= 0x42800000u) && blk % 256u) continue;
      for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) in[i] = exhaustive_float_of(first + i);
      bad += check_block(first, in, a, NULL);
    }
    printf("fp6 sample: %llu mismatches\n", (unsigned long long)bad);
    return bad != 0;
  }
  return exhaustive_run("f32->e2m3,e3m2", check_block);
}
