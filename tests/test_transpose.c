/* numerics/transpose.h against the element-by-element definition, bit for bit: shapes around the
 * 8 x 8 blocks and 32-row bands (and their remainders), strides wider than the rows, the widened
 * and absolute copies, and the values a move must keep (-0, NaN payloads, infinities, subnormals). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/parallel.h"
#include "numerics/transpose.h"

static float value(uint32_t i) {
  static const float special[] = {-0.0f, 0.0f, INFINITY, -INFINITY, 1e-45f, -1e-40f, 3.4e38f};
  if (i % 37 == 5) return special[(i / 37) % (sizeof special / sizeof special[0])];
  if (i % 41 == 7) {
    uint32_t bits = 0x7fc00000u | (i & 0x3fffffu) | ((i & 1u) << 31); /* a NaN with a payload and a sign */
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
  }
  return (float)((int32_t)(i * 2654435761u) >> 8) * 0x1p-20f;
}

TEST(transposes_are_moves) {
  static const size_t shapes[][2] = {{1, 1}, {1, 9}, {7, 1}, {8, 8}, {9, 17}, {31, 33}, {32, 32}, {33, 31},
                                     {40, 8}, {64, 72}, {100, 3}, {3, 100}, {65, 129}, {576, 192},
                                     /* 2^20 elements and more: over the CPUs (base/parallel.h) */
                                     {1031, 1029}, {2048, 577}, {129, 8200}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const size_t rows = shapes[s][0], cols = shapes[s][1], in_stride = cols + (s % 3) * 5, out_stride = rows + (s % 2) * 3;
    float *in = malloc(rows * in_stride * sizeof *in), *out = malloc(cols * out_stride * sizeof *out);
    double *in64 = malloc(rows * in_stride * sizeof *in64), *w = malloc(cols * out_stride * sizeof *w),
           *wa = malloc(cols * out_stride * sizeof *wa), *o64 = malloc(cols * out_stride * sizeof *o64);
    CHECK(in && out && in64 && w && wa && o64);
    if (!in || !out || !in64 || !w || !wa || !o64) goto next;
    for (size_t i = 0; i < rows * in_stride; i++) in[i] = value((uint32_t)(i + 977 * s)), in64[i] = (double)in[i] * 1.0000001;
    /* Padding between the rows of the outputs must stay as it was. */
    memset(out, 0xab, cols * out_stride * sizeof *out);
    memset(w, 0xab, cols * out_stride * sizeof *w);
    memset(wa, 0xab, cols * out_stride * sizeof *wa);
    memset(o64, 0xab, cols * out_stride * sizeof *o64);
    precis_transpose_f32(in, in_stride, rows, cols, out, out_stride);
    precis_transpose_widen(in, in_stride, rows, cols, w, out_stride, false);
    precis_transpose_widen(in, in_stride, rows, cols, wa, out_stride, true);
    precis_transpose_f64(in64, in_stride, rows, cols, o64, out_stride);
    size_t bad = 0, padding = 0;
    for (size_t c = 0; c < cols; c++)
      for (size_t r = 0; r < out_stride; r++) {
        const size_t o = c * out_stride + r;
        if (r >= rows) {
          uint32_t p32;
          uint64_t p64;
          memcpy(&p32, out + o, sizeof p32);
          memcpy(&p64, w + o, sizeof p64);
          padding += p32 != 0xabababab || p64 != 0xababababababababull;
          continue;
        }
        const float x = in[r * in_stride + c];
        const double xw = (double)x, xa = fabs((double)x);
        bad += memcmp(out + o, &x, sizeof x) != 0 || memcmp(w + o, &xw, sizeof xw) != 0 ||
               memcmp(wa + o, &xa, sizeof xa) != 0 || memcmp(o64 + o, in64 + r * in_stride + c, sizeof(double)) != 0;
      }
    CHECK_MSG(bad == 0, "%zu x %zu (strides %zu, %zu): %zu elements differ", rows, cols, in_stride, out_stride, bad);
    CHECK_MSG(padding == 0, "%zu x %zu: %zu padding elements written", rows, cols, padding);
  next:
    free(in);
    free(out);
    free(in64);
    free(w);
    free(wa);
    free(o64);
  }
}

/* Each index of [0, items) in exactly one range, whatever the sizes. */
static void count_range(void *ctx, size_t first, size_t last) {
  unsigned char *seen = ctx;
  for (size_t i = first; i < last; i++) seen[i]++;
}

TEST(parallel_ranges_cover_each_item_once) {
  static const size_t cases[][2] = {{0, 1}, {1, 1}, {7, 1}, {7, 100}, {1000, 1}, {1000, 333}, {(1u << 21) + 3, 1u << 18}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const size_t items = cases[c][0];
    unsigned char *seen = calloc(items + 1, 1);
    CHECK(seen != NULL);
    if (!seen) return;
    precis_parallel_ranges(items, cases[c][1], count_range, seen);
    size_t wrong = 0;
    for (size_t i = 0; i < items; i++) wrong += seen[i] != 1;
    CHECK_MSG(wrong == 0 && seen[items] == 0, "%zu items (at least %zu a range): %zu not seen once", items, cases[c][1],
              wrong);
    free(seen);
  }
}

RUN_TESTS(T(transposes_are_moves), T(parallel_ranges_cover_each_item_once))
