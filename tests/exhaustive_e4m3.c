/* fp32 -> OCP FP8 E4M3 (satfinite) for all 2^32 inputs against the generic "round to p significant
 * bits within [emin, emax]" reference (p = 4, emin = -6, emax = 8, max 448, saturating: overflow
 * and ±inf give ±448): scalar encoding, array encoding and the format table's round_array. */
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format e4m3 = {.name = "e4m3", .p = 4, .emin = -6, .emax = 8, .max_finite = 448.0, .saturate = true};

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint8_t *codes = scratch_a;
  float *rounded = scratch_b;
  precis_f32_to_e4m3_array(in, codes, EXHAUSTIVE_BLOCK);
  precis_format_get(PRECIS_FMT_E4M3)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint8_t code = precis_f32_to_e4m3_bits(in[i]);
    float got = precis_e4m3_bits_to_f32(code);
    double want = generic_round(&e4m3, in[i]);
    if (!generic_matches(got, want)) {
      bad++;
      exhaustive_report("f32->e4m3", first + i, code, exhaustive_bits_of((float)want));
    } else if (codes[i] != code || exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("f32->e4m3 array", first + i, codes[i], code);
    }
  }
  return bad;
}

int main(void) { return exhaustive_run("f32->e4m3", check_block); }
