/* Test-only driver for the independent oracle (tests/venv/test_formats_oracle.py): runs the C
 * quantizers on raw binary inputs and writes their outputs as raw binary, so that Python can
 * recompute every code and scale with ml_dtypes and compare bit for bit. Not installed; the
 * oracle finds it through $PRECIS_QUANT_DRIVER.
 *
 *   quantize_driver quantize ELEM GRAN INTS SIDE ROWS COLS IN.f32 PREFIX
 *       ELEM: e4m3 e5m2 e2m1 int8 s4 u4; GRAN: tensor row col k<G> <R>x<C> mx mx-rceil nv;
 *       INTS: sym half asym, or ue8m0 (fp8: power-of-two scales, PRECIS_QUANT_FP8_UE8M0); SIDE: a b. Writes PREFIX.codes (u8, rows*cols), .scales (f32),
 *       .scale_codes (u8), .zeros (u8), .deq (f32, rows*cols) and .meta (text: scale_rows
 *       scale_cols clipped tensor_scale_bits).
 *   quantize_driver encode e2m1|e8m0 IN OUT.u8   e2m1: IN is f32, one code per value;
 *                                                e8m0: IN is f32 amax values, OUT has the floor
 *                                                (emax 8) and rceil (/448) codes, interleaved
 *   quantize_driver smooth ALPHA M K N X.f32 W.f32 OUT.f32
 *   quantize_driver range e2m3|e3m2 FIRST COUNT OUT.u8   the codes of the fp32 bit patterns FIRST ..
 *                                                       FIRST+COUNT-1 (exhaustive checks without an
 *                                                       input file)
 * Exit 0 on success, 2 on bad arguments (the library's message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/format.h"
#include "numerics/format_bits.h"
#include "numerics/quantize.h"
#include "base/status.h"

static void *read_all(const char *path, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc(len > 0 ? (size_t)len : 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *bytes = (size_t)len;
  return buf;
}

static int write_all(const char *prefix, const char *suffix, const void *data, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", prefix, suffix);
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  size_t wrote = bytes ? fwrite(data, 1, bytes, f) : 0;
  return (fclose(f) != 0 || wrote != bytes) ? 1 : 0;
}

static int parse_gran(const char *s, precis_quant_desc *d) {
  static const struct {
    const char *name;
    precis_quant_gran g;
  } fixed[] = {{"tensor", PRECIS_QUANT_GRAN_TENSOR}, {"row", PRECIS_QUANT_GRAN_ROW},
               {"col", PRECIS_QUANT_GRAN_COL},       {"mx", PRECIS_QUANT_GRAN_MX},
               {"mx-rceil", PRECIS_QUANT_GRAN_MX_RCEIL}, {"nv", PRECIS_QUANT_GRAN_NV}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (strcmp(s, fixed[i].name) == 0) return d->gran = fixed[i].g, 0;
  if (s[0] == 'k') return d->gran = PRECIS_QUANT_GRAN_K, d->group = atoi(s + 1), 0;
  if (sscanf(s, "%dx%d", &d->group, &d->group_cols) == 2) return d->gran = PRECIS_QUANT_GRAN_BLOCK, 0;
  return 1;
}

static int cmd_quantize(char **argv) {
  precis_quant_desc d = {0};
  const precis_format *f = precis_format_by_name(argv[0]);
  if (!f || parse_gran(argv[1], &d)) return fprintf(stderr, "bad ELEM or GRAN\n"), 2;
  d.elem = f->id;
  d.ints = strcmp(argv[2], "asym") == 0    ? PRECIS_QUANT_INT_ASYMMETRIC
           : strcmp(argv[2], "half") == 0  ? PRECIS_QUANT_INT_SYMMETRIC_HALF
           : strcmp(argv[2], "ue8m0") == 0 ? PRECIS_QUANT_FP8_UE8M0
                                           : PRECIS_QUANT_INT_SYMMETRIC;
  d.side = argv[3][0] == 'b' ? PRECIS_OPERAND_B : PRECIS_OPERAND_A;
  size_t rows = strtoull(argv[4], NULL, 10), cols = strtoull(argv[5], NULL, 10), bytes;
  float *x = read_all(argv[6], &bytes);
  if (!x || bytes != rows * cols * sizeof(float)) return fprintf(stderr, "%s: expected %zu floats\n", argv[6], rows * cols), 2;
  precis_quant_layout l;
  if (precis_quant_layout_of(&d, rows, cols, &l) != PRECIS_OK) return fprintf(stderr, "%s\n", precis_last_error()), 2;
  precis_quant_tensor q = {.codes = malloc(rows * cols), .scales = malloc(l.scale_count * sizeof(float)),
                           .scale_codes = calloc(l.scale_count, 1), .zero_points = calloc(l.scale_count, 1)};
  float *y = malloc(rows * cols * sizeof *y);
  int rc = 1;
  if (!q.codes || !q.scales || !q.scale_codes || !q.zero_points || !y) goto done;
  if (precis_quantize(&d, x, rows, cols, &q) != PRECIS_OK || precis_dequantize(&d, &q, rows, cols, y) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    goto done;
  }
  const char *p = argv[7];
  char meta[256];
  int len = snprintf(meta, sizeof meta, "%zu %zu %zu %u\n", l.scale_rows, l.scale_cols, q.clipped,
                     (unsigned)precis_bits_of_f32(q.tensor_scale));
  rc = write_all(p, ".codes", q.codes, rows * cols) | write_all(p, ".scales", q.scales, l.scale_count * sizeof(float)) |
       write_all(p, ".scale_codes", q.scale_codes, l.scale_count) | write_all(p, ".zeros", q.zero_points, l.scale_count) |
       write_all(p, ".deq", y, rows * cols * sizeof *y) | write_all(p, ".meta", meta, (size_t)len);
done:
  free(x);
  free(q.codes);
  free(q.scales);
  free(q.scale_codes);
  free(q.zero_points);
  free(y);
  return rc;
}

static int cmd_encode(char **argv) {
  size_t bytes;
  float *x = read_all(argv[1], &bytes);
  if (!x) return fprintf(stderr, "cannot read %s\n", argv[1]), 2;
  size_t n = bytes / sizeof(float);
  int e8m0 = strcmp(argv[0], "e8m0") == 0;
  uint8_t *out = malloc(n * 2 + 1);
  if (!out) return free(x), 1;
  for (size_t i = 0; i < n; i++) {
    if (e8m0) {
      out[2 * i] = precis_bits_mx_scale_floor(x[i], 8);
      out[2 * i + 1] = precis_bits_mx_scale_rceil(x[i], 448.0f);
    } else {
      out[i] = precis_f32_to_e2m1_bits(x[i]);
    }
  }
  int rc = write_all(argv[2], "", out, e8m0 ? 2 * n : n);
  free(x);
  free(out);
  return rc;
}

static int cmd_smooth(char **argv) {
  double alpha = atof(argv[0]);
  size_t m = strtoull(argv[1], NULL, 10), k = strtoull(argv[2], NULL, 10), n = strtoull(argv[3], NULL, 10), bx, bw;
  float *x = read_all(argv[4], &bx), *w = read_all(argv[5], &bw), *s = malloc(k * sizeof *s);
  int rc = 2;
  if (!x || !w || !s || bx != m * k * sizeof(float) || bw != k * n * sizeof(float)) goto done;
  if (precis_smooth_scales(x, m, k, w, n, alpha, s) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    goto done;
  }
  rc = write_all(argv[6], "", s, k * sizeof *s);
done:
  free(x);
  free(w);
  free(s);
  return rc;
}

static int cmd_range(char **argv) {
  int e3m2 = strcmp(argv[0], "e3m2") == 0;
  if (!e3m2 && strcmp(argv[0], "e2m3") != 0) return fprintf(stderr, "range: e2m3 or e3m2\n"), 2;
  unsigned long long first = strtoull(argv[1], NULL, 0), count = strtoull(argv[2], NULL, 0);
  if (count == 0 || first + count > (1ull << 32)) return fprintf(stderr, "range: bad FIRST/COUNT\n"), 2;
  uint8_t *codes = malloc((size_t)count);
  if (!codes) return fprintf(stderr, "range: out of memory\n"), 2;
  for (unsigned long long i = 0; i < count; i++) {
    float x = precis_f32_of_bits((uint32_t)(first + i));
    codes[i] = e3m2 ? precis_bits_f32_to_e3m2(x) : precis_bits_f32_to_e2m3(x);
  }
  int rc = write_all(argv[3], "", codes, (size_t)count);
  free(codes);
  return rc ? 2 : 0;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "range") == 0) return cmd_range(argv + 2);
  if (argc == 10 && strcmp(argv[1], "quantize") == 0) return cmd_quantize(argv + 2);
  if (argc == 5 && strcmp(argv[1], "encode") == 0) return cmd_encode(argv + 2);
  if (argc == 9 && strcmp(argv[1], "smooth") == 0) return cmd_smooth(argv + 2);
  fprintf(stderr, "usage: see the comment at the top of tests/quantize_driver.c\n");
  return 2;
}
