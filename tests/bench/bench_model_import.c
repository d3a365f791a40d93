/* precis import --model's memory bound (DESIGN §12): a synthetic BF16 checkpoint of many layers
 * and one large one is imported in-process; the peak RSS growth over the process's baseline is
 * compared with the largest layer's working set (its dataset arrays a, b, c_ref, ab_abs, plus the
 * weight's stored bytes and the float64 copies of a and b that the reference dgemm reads). One
 * layer in memory at a time means the ratio stays near 1 (goal <= 2) however many layers there are.
 *
 * With a fifth argument `int4`, the same layers are also written as a compressed-tensors
 * pack-quantized INT4 checkpoint (groups of 128, F32 scales) and imported with --converted: the
 * working set then also holds the original weights kept as b_ref.
 *
 * usage: bench_model_import [LAYERS=24] [N=1024] [BIG=4096] [TOKENS=64] [int4] */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "data/distributions.h"
#include "numerics/format.h"
#include "data/model.h"
#include "data/model_import.h"

static long long peak_rss_bytes(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (long long)ru.ru_maxrss * 1024;
}

static long long current_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (long long)resident * sysconf(_SC_PAGESIZE);
}

/* A safetensors file of `layers` [n, n] BF16 weights and one [big, big], written tensor by tensor. */
static int write_checkpoint(const char *path, int layers, int n, int big) {
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  char *header = malloc(64 + (size_t)(layers + 1) * 160);
  size_t len = 0;
  uint64_t offset = 0;
  len += (size_t)sprintf(header + len, "{");
  for (int i = 0; i <= layers; i++) {
    int d = i == layers ? big : n;
    uint64_t bytes = (uint64_t)d * (uint64_t)d * 2;
    len += (size_t)sprintf(header + len, "%s\"model.layers.%d.proj.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],"
                                         "\"data_offsets\":[%llu,%llu]}",
                           i ? "," : "", i, d, d, (unsigned long long)offset, (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  len += (size_t)sprintf(header + len, "}");
  while (len % 8) header[len++] = ' ';
  uint64_t hlen = len;
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hlen >> (8 * i));
  fwrite(le, 1, 8, f);
  fwrite(header, 1, len, f);
  free(header);
  uint16_t *row = malloc((size_t)big * 2);
  for (int i = 0; i <= layers; i++) {
    int d = i == layers ? big : n;
    for (int r = 0; r < d; r++) {
      for (int c = 0; c < d; c++) row[c] = precis_f32_to_bf16_bits((float)((r * 31 + c * 17 + i) % 257 - 128) / 1024.0f);
      fwrite(row, 2, (size_t)d, f);
    }
  }
  free(row);
  return fclose(f) != 0;
}

/* The same layers as pack-quantized INT4: weight_packed I32 [d, d/8], weight_scale F32 [d, d/128],
 * weight_shape I64 [2]; the values do not matter for memory, only the layout. */
static int write_int4_checkpoint(const char *path, int layers, int n, int big) {
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  char *header = malloc(64 + (size_t)(layers + 1) * 600);
  size_t len = 0;
  uint64_t offset = 0;
  len += (size_t)sprintf(header + len, "{");
  for (int i = 0; i <= layers; i++) {
    int d = i == layers ? big : n;
    uint64_t packed = (uint64_t)d * (uint64_t)(d / 8) * 4, scales = (uint64_t)d * (uint64_t)(d / 128) * 4;
    len += (size_t)sprintf(header + len,
                           "%s\"model.layers.%d.proj.weight_packed\":{\"dtype\":\"I32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]},"
                           "\"model.layers.%d.proj.weight_scale\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]},"
                           "\"model.layers.%d.proj.weight_shape\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[%llu,%llu]}",
                           i ? "," : "", i, d, d / 8, (unsigned long long)offset, (unsigned long long)(offset + packed), i, d,
                           d / 128, (unsigned long long)(offset + packed), (unsigned long long)(offset + packed + scales), i,
                           (unsigned long long)(offset + packed + scales), (unsigned long long)(offset + packed + scales + 16));
    offset += packed + scales + 16;
  }
  len += (size_t)sprintf(header + len, "}");
  while (len % 8) header[len++] = ' ';
  uint64_t hlen = len;
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hlen >> (8 * i));
  fwrite(le, 1, 8, f);
  fwrite(header, 1, len, f);
  free(header);
  uint32_t *row = malloc((size_t)big * 4);
  for (int i = 0; i <= layers; i++) {
    int d = i == layers ? big : n;
    for (int r = 0; r < d; r++) {
      for (int c = 0; c < d / 8; c++) row[c] = 0x9ABCDEF0u ^ (uint32_t)(r * 31 + c * 17 + i);
      fwrite(row, 4, (size_t)(d / 8), f);
    }
    for (int r = 0; r < d; r++) {
      float scale[64];
      for (int g = 0; g < d / 128 && g < 64; g++) scale[g] = 1.0f / 512;
      for (int g = 0; g < d / 128; g += 64) fwrite(scale, 4, (size_t)(d / 128 - g < 64 ? d / 128 - g : 64), f);
    }
    int64_t shape[2] = {d, d};
    fwrite(shape, 8, 2, f);
  }
  free(row);
  return fclose(f) != 0;
}

int main(int argc, char **argv) {
  int layers = argc > 1 ? atoi(argv[1]) : 24, n = argc > 2 ? atoi(argv[2]) : 1024, big = argc > 3 ? atoi(argv[3]) : 4096,
      tokens = argc > 4 ? atoi(argv[4]) : 64;
  bool int4 = argc > 5 && strcmp(argv[5], "int4") == 0;
  if (layers < 0 || n <= 0 || big <= 0 || tokens <= 0 || (argc > 5 && !int4) || (int4 && (n % 128 || big % 128))) {
    fprintf(stderr, "usage: bench_model_import [LAYERS] [N] [BIG] [TOKENS] [int4]  (int4: N and BIG multiples of 128)\n");
    return 2;
  }
  char dir[] = "/tmp/precis_bench_model_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char ckpt[256], out[256], conv_path[256];
  snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", dir);
  snprintf(conv_path, sizeof conv_path, "%s/int4.safetensors", dir);
  snprintf(out, sizeof out, "%s/model.h5", dir);
  if (write_checkpoint(ckpt, layers, n, big)) {
    fprintf(stderr, "cannot write %s\n", ckpt);
    return 1;
  }
  precis_model model;
  if (precis_model_discover(ckpt, NULL, 0, NULL, 0, &model) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    return 1;
  }
  precis_model converted;
  memset(&converted, 0, sizeof converted);
  if (int4 && (write_int4_checkpoint(conv_path, layers, n, big) || precis_model_tensors(conv_path, &converted) != PRECIS_OK)) {
    fprintf(stderr, "cannot write or read %s: %s\n", conv_path, precis_last_error());
    return 1;
  }
  precis_dist a;
  precis_dist_init(&a, PRECIS_DIST_OUTLIER_CHANNELS);
  precis_model_import_options o = {out, true, 0, false, tokens, 1, 0, 0, &a, NULL, NULL, NULL, int4 ? &converted : NULL, false, NULL, false, 0};
  long long baseline = current_rss_bytes();
  char id[65];
  if (precis_model_import(&model, &o, id) != PRECIS_OK) {
    fprintf(stderr, "%s\n", precis_last_error());
    return 1;
  }
  long long peak = peak_rss_bytes();
  /* The largest layer: [big, big] BF16, m = tokens. */
  double k = big, nn = big, m = tokens;
  double arrays = 4 * m * k + 4 * k * nn + 2 * 8 * m * nn; /* a, b, c_ref, ab_abs */
  double working = arrays + 2 * k * nn + 8 * (m * k + k * nn); /* + stored bytes, float64 copies */
  if (int4) working += 4 * k * nn;                              /* + b_ref, the original weights */
  printf("layers %zu (%d of %dx%d and one %dx%d, BF16%s), tokens %d\n", model.n_layers, layers, n, n, big, big,
         int4 ? "; b from an INT4 pack-quantized --converted checkpoint" : "", tokens);
  printf("baseline RSS %.1f MiB, peak RSS %.1f MiB, growth %.1f MiB\n", baseline / 1048576.0, peak / 1048576.0,
         (peak - baseline) / 1048576.0);
  printf("largest layer: dataset arrays %.1f MiB, working set %.1f MiB\n", arrays / 1048576.0, working / 1048576.0);
  printf("peak RSS growth / largest layer's working set = %.2f (goal <= 2)\n", (double)(peak - baseline) / working);
  unlink(ckpt);
  unlink(out);
  if (int4) unlink(conv_path);
  precis_model_free(&converted);
  rmdir(dir);
  precis_model_free(&model);
  return 0;
}
