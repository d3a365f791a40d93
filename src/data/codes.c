#include "codes.h"

#include <math.h>

#include "numerics/format.h"

float precis_quantize_code(float x, float scale, float zero_point, int bits, bool is_float) {
  const float scaled = x / scale;
  if (is_float && bits == 8) return precis_round_e4m3(fminf(fmaxf(scaled, -448.0f), 448.0f));
  if (is_float) return precis_round_e2m1(scaled);
  const float lo = -ldexpf(1.0f, bits - 1), hi = ldexpf(1.0f, bits - 1) - 1.0f;
  return fminf(fmaxf(rintf(scaled + zero_point), lo), hi);
}

float precis_code_half_range(int bits, bool is_float) {
  if (is_float) return bits == 8 ? 448.0f : 6.0f;
  return (ldexpf(1.0f, bits) - 1.0f) / 2.0f;
}
