/* The E8M0 scale rules for all 2^32 fp32 amax patterns: the OCP MX floor rule (code =
 * floor(log2 amax) - emax_elem + 127, for e4m3's emax 8 and e2m1's emax 2) and NVIDIA's rceil rule
 * (code = ceil(log2(amax / max_elem)) + 127, for 448 and 6), both clamped to [0, 254], against a
 * reference written with frexp on doubles; amax that is 0, negative or not finite gives 127 (2^0).
 * Also every code's decoding, and that an rceil scale never makes amax / scale exceed max_elem
 * beyond the rounding of the quotient. `exhaustive_e8m0 sample` checks every 16th block only. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "exhaustive.h"
#include "numerics/format.h"
#include "numerics/format_bits.h"

static int clamp_code(int c) { return c < 0 ? 0 : (c > 254 ? 254 : c); }

static int ref_floor(float a, int emax) {
  if (!(a > 0.0f) || isinf(a)) return 127;
  int e;
  (void)frexp((double)a, &e);
  return clamp_code(e - 1 - emax + 127);
}

static int ref_rceil(float a, float max_elem) {
  if (!(a > 0.0f) || isinf(a)) return 127;
  float q = (float)((double)a / (double)max_elem); /* double then float: innocuous double rounding */
  if (q == 0.0f) return 0;
  int e;
  double m = frexp((double)q, &e);
  return clamp_code((m == 0.5 ? e - 1 : e) + 127);
}

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  (void)scratch_a, (void)scratch_b;
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    float a = in[i];
    uint32_t got[4] = {precis_bits_mx_scale_floor(a, 8), precis_bits_mx_scale_floor(a, 2),
                       precis_bits_mx_scale_rceil(a, 448.0f), precis_bits_mx_scale_rceil(a, 6.0f)};
    uint32_t want[4] = {(uint32_t)ref_floor(a, 8), (uint32_t)ref_floor(a, 2), (uint32_t)ref_rceil(a, 448.0f),
                        (uint32_t)ref_rceil(a, 6.0f)};
    for (int r = 0; r < 4; r++) {
      if (got[r] != want[r]) {
        bad++;
        exhaustive_report(r < 2 ? "e8m0 floor" : "e8m0 rceil", first + i, got[r], want[r]);
      }
    }
    if (a > 0.0f && !isinf(a) && !isnan(a)) {
      double s = ldexp(1.0, (int)got[2] - 127);
      if ((double)a / s > 448.0 * (1.0 + 0x1p-23)) {
        bad++;
        exhaustive_report("e8m0 rceil saturates", first + i, got[2], 0);
      }
    }
  }
  return bad;
}

int main(int argc, char **argv) {
  for (int c = 0; c < 256; c++) {
    float got = precis_e8m0_bits_to_f32((uint8_t)c);
    bool ok = c == 255 ? isnan(got) : (double)got == ldexp(1.0, c - 127);
    if (!ok) {
      fprintf(stderr, "e8m0 code %d decodes to %a\n", c, (double)got);
      return 1;
    }
  }
  if (argc > 1 && strcmp(argv[1], "sample") == 0) {
    static float in[EXHAUSTIVE_BLOCK];
    uint64_t bad = 0;
    for (uint32_t blk = 0; blk < (UINT32_C(1) << 16); blk += 16) {
      uint32_t first = blk << 16;
      for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) in[i] = exhaustive_float_of(first + i);
      bad += check_block(first, in, NULL, NULL);
    }
    printf("e8m0 sample: %llu mismatches\n", (unsigned long long)bad);
    return bad != 0;
  }
  return exhaustive_run("e8m0 scale rules", check_block);
}
