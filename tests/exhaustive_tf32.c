/* fp32 -> tf32 for all 2^32 inputs against the generic "round to p significant bits within
 * [emin, emax]" reference (p = 11, emin = -126, emax = 127, overflow to ±inf), plus the carrier
 * rule: the low 13 bits of every result are zero. Scalar path and the format table's round_array. */
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format tf32 = {.name = "tf32", .p = 11, .emin = -126, .emax = 127, .max_finite = 0x1.ffcp127};

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  float *rounded = scratch_a;
  (void)scratch_b;
  precis_format_get(PRECIS_FMT_TF32)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    float got = precis_round_tf32(in[i]);
    double want = generic_round(&tf32, in[i]);
    if (!generic_matches(got, want) || (exhaustive_bits_of(got) & 0x1fffu) != 0) {
      bad++;
      exhaustive_report("f32->tf32", first + i, exhaustive_bits_of(got), exhaustive_bits_of((float)want));
    } else if (exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("f32->tf32 array", first + i, exhaustive_bits_of(rounded[i]), exhaustive_bits_of(got));
    }
  }
  return bad;
}

int main(void) { return exhaustive_run("f32->tf32", check_block); }
