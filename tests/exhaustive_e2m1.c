/* fp32 -> OCP MX FP4 E2M1 for all 2^32 inputs against the generic "round to p significant bits
 * within [emin, emax]" reference (p = 2, emin = 0, emax = 2, max 6, saturating: |x| >= 7 and ±inf
 * give ±6), except NaN, which gives +6 (code 0x7, CUDA's rule; the format has no NaN): scalar and
 * array encoding, the format table's round_array, and the decoding of every code.
 * `exhaustive_e2m1 sample` checks only |x| in [2^-3, 2^4) (where every rounding decision of e2m1 is
 * made), both signs, and every 256th other block: a quick self-check while developing. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "exhaustive.h"
#include "numerics/format.h"

static const generic_format e2m1 = {.name = "e2m1", .p = 2, .emin = 0, .emax = 2, .max_finite = 6.0, .saturate = true};

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint8_t *codes = scratch_a;
  float *rounded = scratch_b;
  precis_f32_to_e2m1_array(in, codes, EXHAUSTIVE_BLOCK);
  precis_format_get(PRECIS_FMT_E2M1)->round_array(in, rounded, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint8_t code = precis_f32_to_e2m1_bits(in[i]);
    float got = precis_e2m1_bits_to_f32(code);
    bool ok;
    double want;
    if (isnan(in[i])) {
      want = 6.0;
      ok = code == 0x7;
    } else {
      want = generic_round(&e2m1, in[i]);
      ok = code <= 0xf && generic_matches(got, want);
    }
    if (!ok) {
      bad++;
      exhaustive_report("f32->e2m1", first + i, code, exhaustive_bits_of((float)want));
    } else if (codes[i] != code || exhaustive_bits_of(rounded[i]) != exhaustive_bits_of(got)) {
      bad++;
      exhaustive_report("f32->e2m1 array", first + i, codes[i], code);
    }
  }
  return bad;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "sample") == 0) {
    static float in[EXHAUSTIVE_BLOCK];
    static uint8_t a[EXHAUSTIVE_BLOCK * 4], b[EXHAUSTIVE_BLOCK * 4];
    uint64_t bad = 0;
    for (uint32_t blk = 0; blk < (UINT32_C(1) << 16); blk++) {
      uint32_t first = blk << 16, mag = first & 0x7fffffffu;
      if ((mag < 0x3e000000u || mag >= 0x41800000u) && blk % 256u) continue;
      for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) in[i] = exhaustive_float_of(first + i);
      bad += check_block(first, in, a, b);
    }
    printf("e2m1 sample: %llu mismatches\n", (unsigned long long)bad);
    return bad != 0;
  }
  /* The 16 codes decode to the OCP table, written out independently. */
  static const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 16; c++) {
    float want = c & 8 ? -table[c & 7] : table[c & 7];
    float got = precis_e2m1_bits_to_f32((uint8_t)c);
    if (exhaustive_bits_of(got) != exhaustive_bits_of(want)) {
      fprintf(stderr, "e2m1 code 0x%x decodes to %a, want %a\n", c, (double)got, (double)want);
      return 1;
    }
  }
  return exhaustive_run("f32->e2m1", check_block);
}
