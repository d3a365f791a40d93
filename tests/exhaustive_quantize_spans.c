/* The quantizer's element loops (src/numerics/quantize.c: the vector encoders, and the scalar ones
 * where the CPU has no AVX2) against the scalar rules of format_bits.h, for all 2^32 fp32 inputs:
 * each input quantized per tensor with a static amax that makes the divisor 1 (so x/d = x covers
 * every quotient the rules can see) and with amax 0 (divisor 0: codes 0, non-finite inputs
 * clipped). Codes and clipped counts must be identical, NaN codes and signs included. */
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format_bits.h"
#include "numerics/quantize.h"

typedef struct span_case {
  const char *name;
  precis_quant_desc d;
  float amax, divisor, qmin, qmax;
} span_case;

#define FLOAT_CASE(fmt, amax, div) {#fmt, {PRECIS_FMT_##fmt, PRECIS_QUANT_GRAN_TENSOR, 0, 0, 0, PRECIS_OPERAND_A}, amax, div, 0, 0}
#define INT_CASE(name, fmt, conv, amax, div, lo, hi) {name, {fmt, PRECIS_QUANT_GRAN_TENSOR, 0, 0, conv, PRECIS_OPERAND_A}, amax, div, lo, hi}

static const span_case cases[] = {
    FLOAT_CASE(E4M3, 448.0f, 1.0f),
    FLOAT_CASE(E4M3, 0.0f, 0.0f),
    FLOAT_CASE(E5M2, 57344.0f, 1.0f),
    FLOAT_CASE(E5M2, 0.0f, 0.0f),
    FLOAT_CASE(E2M1, 6.0f, 1.0f),
    FLOAT_CASE(E2M1, 0.0f, 0.0f),
    INT_CASE("s8", PRECIS_FMT_I8, PRECIS_QUANT_INT_SYMMETRIC, 127.0f, 1.0f, -127.0f, 127.0f),
    INT_CASE("s8 half", PRECIS_FMT_I8, PRECIS_QUANT_INT_SYMMETRIC_HALF, 127.5f, 1.0f, -128.0f, 127.0f),
    INT_CASE("s4", PRECIS_FMT_S4, PRECIS_QUANT_INT_SYMMETRIC, 7.0f, 1.0f, -7.0f, 7.0f),
    INT_CASE("s8 zero", PRECIS_FMT_I8, PRECIS_QUANT_INT_SYMMETRIC, 0.0f, 0.0f, -127.0f, 127.0f),
};

static uint8_t scalar_rule(const span_case *c, float x, int *clipped) {
  switch (c->d.elem) {
  case PRECIS_FMT_E4M3: return precis_bits_fp8_quantize(x, c->divisor, clipped);
  case PRECIS_FMT_E5M2: return precis_bits_e5m2_quantize(x, c->divisor, clipped);
  case PRECIS_FMT_E2M1: return precis_bits_e2m1_quantize(x, c->divisor, clipped);
  default: return (uint8_t)precis_bits_int_quantize(x, c->divisor, 0.0f, c->qmin, c->qmax, clipped);
  }
}

static uint64_t check_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint8_t *codes = scratch_a;
  (void)scratch_b;
  uint64_t bad = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const span_case *c = &cases[k];
    float scale = 0;
    precis_quant_tensor q = {.codes = codes, .scales = &scale};
    if (precis_quantize_with_amax(&c->d, in, 1, EXHAUSTIVE_BLOCK, c->amax, &q) != PRECIS_OK) {
      fprintf(stderr, "%s: precis_quantize_with_amax failed\n", c->name);
      return EXHAUSTIVE_BLOCK;
    }
    size_t clipped = 0;
    for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
      int clip;
      uint8_t want = scalar_rule(c, in[i], &clip);
      clipped += (size_t)clip;
      if (codes[i] != want) {
        bad++;
        exhaustive_report(c->name, first + i, codes[i], want);
      }
    }
    if (clipped != q.clipped) {
      bad++;
      exhaustive_report(c->name, first, (uint32_t)q.clipped, (uint32_t)clipped);
    }
  }
  return bad;
}

int main(void) { return exhaustive_run("quantizer element loops vs format_bits.h rules", check_block); }
