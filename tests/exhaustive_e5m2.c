/* fp32 -> OCP FP8 E5M2 for all 2^32 inputs, without and with satfinite, against the generic "round
 * to p significant bits within [emin, emax]" reference (p = 3, emin = -14, emax = 15, max 57344;
 * overflow to ±inf, or to ±57344 with satfinite): scalar and array encodings, and round_array. */
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format e5m2 = {.name = "e5m2", .p = 3, .emin = -14, .emax = 15, .max_finite = 57344.0};
static const generic_format e5m2_satfinite = {
    .name = "e5m2 satfinite", .p = 3, .emin = -14, .emax = 15, .max_finite = 57344.0, .saturate = true};

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint8_t *codes = scratch_a, *sat_codes = (uint8_t *)scratch_a + EXHAUSTIVE_BLOCK;
  float *rounded = scratch_b;
  precis_f32_to_e5m2_array(in, codes, EXHAUSTIVE_BLOCK, false);
  precis_f32_to_e5m2_array(in, sat_codes, EXHAUSTIVE_BLOCK, true);
  precis_format_get(PRECIS_FMT_E5M2)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint8_t code = precis_f32_to_e5m2_bits(in[i], false);
    uint8_t sat_code = precis_f32_to_e5m2_bits(in[i], true);
    float got = precis_e5m2_bits_to_f32(code), sat_got = precis_e5m2_bits_to_f32(sat_code);
    double want = generic_round(&e5m2, in[i]), sat_want = generic_round(&e5m2_satfinite, in[i]);
    if (!generic_matches(got, want)) {
      bad++;
      exhaustive_report("f32->e5m2", first + i, code, exhaustive_bits_of((float)want));
    } else if (!generic_matches(sat_got, sat_want)) {
      bad++;
      exhaustive_report("f32->e5m2 satfinite", first + i, sat_code, exhaustive_bits_of((float)sat_want));
    } else if (codes[i] != code || sat_codes[i] != sat_code ||
               exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("f32->e5m2 array", first + i, codes[i], code);
    }
  }
  return bad;
}

int main(void) { return exhaustive_run("f32->e5m2 (and satfinite)", check_block); }
