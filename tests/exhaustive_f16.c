/* fp32 -> fp16 for all 2^32 inputs and fp16 -> fp32 for all 2^16 codes, bit for bit against an
 * independent path: the x86 F16C instructions when the CPU has them, else GCC's _Float16. The
 * scalar bit-manipulation path, the dispatched array path and the portable array path are all
 * compared, NaN payloads included (the documented NaN rule is the one F16C implements). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "exhaustive.h"
#include "numerics/format.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
__attribute__((target("f16c"))) static uint16_t f16c_narrow(float x) {
  return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }
#else
#define HAVE_X86 0
#endif

#if defined(__FLT16_MAX__)
static uint16_t float16_narrow(float x) {
  _Float16 h = (_Float16)x;
  uint16_t b;
  memcpy(&b, &h, sizeof b);
  return b;
}
static float float16_widen(uint16_t b) {
  _Float16 h;
  memcpy(&h, &b, sizeof h);
  return (float)h;
}
#define HAVE_FLOAT16 1
#else
#define HAVE_FLOAT16 0
#endif

static uint16_t (*reference_narrow)(float);
static float (*reference_widen)(uint16_t);

static uint64_t check_narrow_block(uint32_t first, const float *in, void *scratch_a, void *scratch_b) {
  uint16_t *dispatched = scratch_a, *portable = scratch_b;
  precis_f32_to_f16_array(in, dispatched, EXHAUSTIVE_BLOCK);
  precis_f32_to_f16_array_portable(in, portable, EXHAUSTIVE_BLOCK);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < EXHAUSTIVE_BLOCK; i++) {
    uint16_t want = reference_narrow(in[i]);
    uint16_t scalar = precis_f32_to_f16_bits(in[i]);
    if (scalar != want) {
      bad++;
      exhaustive_report("f32->f16 scalar", first + i, scalar, want);
    } else if (dispatched[i] != want || portable[i] != want) {
      bad++;
      exhaustive_report("f32->f16 array", first + i, dispatched[i] != want ? dispatched[i] : portable[i], want);
    }
  }
  return bad;
}

static int check_widen_all(void) {
  static uint16_t codes[65536];
  static float widened[65536];
  for (uint32_t h = 0; h < 65536; h++) codes[h] = (uint16_t)h;
  precis_f16_to_f32_array(codes, widened, 65536);
  uint64_t bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    uint32_t want = exhaustive_bits_of(reference_widen((uint16_t)h));
    uint32_t scalar = exhaustive_bits_of(precis_f16_bits_to_f32((uint16_t)h));
    uint32_t array = exhaustive_bits_of(widened[h]);
    if (scalar != want || array != want) {
      bad++;
      exhaustive_report("f16->f32", h, scalar != want ? scalar : array, want);
    }
  }
  printf("f16->f32: checked 65536 inputs, %" PRIu64 " mismatches\n", bad);
  return bad == 0 ? 0 : 1;
}

int main(void) {
  const char *reference = NULL;
#if HAVE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("f16c")) {
    reference_narrow = f16c_narrow;
    reference_widen = f16c_widen;
    reference = "x86 F16C (vcvtps2ph / vcvtph2ps)";
  }
#endif
#if HAVE_FLOAT16
  if (!reference) {
    reference_narrow = float16_narrow;
    reference_widen = float16_widen;
    reference = "GCC _Float16";
  }
#endif
  if (!reference) {
    printf("skipped: this CPU has no F16C and the compiler no _Float16, so there is no independent fp16 path\n");
    return 77;
  }
  printf("reference: %s\n", reference);
  int failed = check_widen_all();
  failed |= exhaustive_run("f32->f16", check_narrow_block);
  return failed;
}
