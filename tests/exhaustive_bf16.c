/* fp32 -> bf16 for all 2^32 inputs against the generic "round to p significant bits within
 * [emin, emax]" reference (p = 8, emin = -126, emax = 127, overflow to ±inf): scalar encoding,
 * array encoding and the format table's round_array, NaNs checked for NaN and sign. */
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format bf16 = {.name = "bf16", .p = 8, .emin = -126, .emax = 127, .max_finite = 0x1.fep127};

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint16_t *codes = scratch_a;
  float *rounded = scratch_b;
  precis_f32_to_bf16_array(in, codes, EXHAUSTIVE_BLOCK);
  precis_format_get(PRECIS_FMT_BF16)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint16_t code = precis_f32_to_bf16_bits(in[i]);
    float got = precis_bf16_bits_to_f32(code);
    double want = generic_round(&bf16, in[i]);
    if (!generic_matches(got, want)) {
      bad++;
      exhaustive_report("f32->bf16", first + i, exhaustive_bits_of(got), exhaustive_bits_of((float)want));
    } else if (codes[i] != code || exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("f32->bf16 array", first + i, codes[i], code);
    }
  }
  return bad;
}

int main(void) { return exhaustive_run("f32->bf16", check_block); }
