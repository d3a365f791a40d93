/* safetensors: valid files of F32/F16/BF16 tensors read exactly; every malformed header refused
 * with a message naming the file and the problem. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "data/safetensors.h"

static char path[256];

/* Writes [u64 header length][header][data]. */
static void write_file(const char *header, const void *data, size_t data_len, uint64_t declared_len) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return;
  uint64_t len = declared_len ? declared_len : strlen(header);
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(len >> (8 * i));
  fwrite(le, 1, 8, fp);
  fwrite(header, 1, strlen(header), fp);
  if (data_len) fwrite(data, 1, data_len, fp);
  fclose(fp);
}

TEST(reads_f32_f16_bf16) {
  /* F32 [2,2] = 1, -2, 0.5, 3; F16 [3] = 1, -2, smallest subnormal, ; BF16 [2] = 1.5, -inf */
  uint8_t data[16 + 6 + 4];
  float f32[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  memcpy(data, f32, 16); /* little-endian host */
  uint16_t f16[3] = {0x3c00, 0xc000, 0x0001};
  memcpy(data + 16, f16, 6);
  uint16_t bf16[2] = {0x3fc0, 0xff80};
  memcpy(data + 22, bf16, 4);
  write_file("{\"__metadata__\":{\"format\":\"pt\"},"
             "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
             "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[22,26]}}  ",
             data, sizeof data, 0);
  precis_safetensors st;
  CHECK_OK(precis_safetensors_open(path, &st));
  CHECK_EQ_INT(st.n_tensors, 3);
  const precis_st_tensor *w = precis_safetensors_find(&st, "w"), *h = precis_safetensors_find(&st, "h"),
                         *b = precis_safetensors_find(&st, "b");
  CHECK(w && h && b && !precis_safetensors_find(&st, "__metadata__"));
  if (w && h && b) {
    CHECK(w->rank == 2 && w->shape[0] == 2 && w->shape[1] == 2);
    float *v = NULL;
    CHECK_OK(precis_safetensors_read_f32(&st, w, &v));
    CHECK(v && memcmp(v, f32, 16) == 0);
    free(v);
    CHECK_OK(precis_safetensors_read_f32(&st, h, &v));
    CHECK(v && v[0] == 1.0f && v[1] == -2.0f && v[2] == ldexpf(1.0f, -24));
    free(v);
    CHECK_OK(precis_safetensors_read_f32(&st, b, &v));
    CHECK(v && v[0] == 1.5f && isinf(v[1]) && v[1] < 0);
    free(v);
  }
  precis_safetensors_close(&st);

  /* Every f16 bit pattern widens to the value it encodes. */
  uint16_t *all = malloc(65536 * 2);
  for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  write_file("{\"all\":{\"dtype\":\"F16\",\"shape\":[65536],\"data_offsets\":[0,131072]}}", all, 131072, 0);
  CHECK_OK(precis_safetensors_open(path, &st));
  float *v = NULL;
  if (st.n_tensors == 1) CHECK_OK(precis_safetensors_read_f32(&st, &st.tensors[0], &v));
  int wrong = 0;
  for (uint32_t i = 0; v && i < 65536; i++) {
    uint32_t e = (i >> 10) & 31, mant = i & 1023;
    double expect = e == 0 ? ldexp(mant, -24) : e == 31 ? (mant ? NAN : INFINITY) : ldexp(1024 + mant, (int)e - 25);
    if (i & 0x8000) expect = -expect;
    if (isnan(expect) ? !isnan(v[i]) : (double)v[i] != expect) wrong++;
  }
  CHECK_EQ_INT(wrong, 0);
  free(v);
  free(all);
  precis_safetensors_close(&st);
}

static void expect_refused(const char *header, size_t data_len, uint64_t declared_len, const char *fragment) {
  uint8_t *data = calloc(1, data_len + 1);
  write_file(header, data, data_len, declared_len);
  free(data);
  precis_safetensors st;
  precis_status status = precis_safetensors_open(path, &st);
  CHECK_MSG(status == PRECIS_E_INPUT, "accepted: %s", header);
  if (status == PRECIS_OK) {
    precis_safetensors_close(&st);
    return;
  }
  const char *msg = precis_last_error();
  CHECK_MSG(strstr(msg, path) && strstr(msg, fragment), "message \"%s\" lacks \"%s\"", msg, fragment);
}

TEST(refuses_malformed_files) {
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 12, 0, "past the end");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,16]}}", 16, 0, "needs 24");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, 0, "end before they begin");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 12, 0, "overlaps");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 0, "unindexed bytes");
  expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, 0, "after the last tensor");
  expect_refused("{\"t\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, "unknown dtype");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", 4, 0,
                 "overflows 64 bits");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, 0, "shape[0]");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 0, "data_offsets");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4, 0, "unknown field");
  expect_refused("{\"t\": [1, 2", 4, 0, "not valid JSON");
  expect_refused("[1]", 0, 0, "not a JSON object");
  expect_refused("{}", 0, (uint64_t)1 << 40, "header length");
  expect_refused("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 8, 0, "listed twice");
  FILE *fp = fopen(path, "wb");
  if (fp) {
    fputs("abc", fp);
    fclose(fp);
  }
  precis_safetensors st;
  CHECK(precis_safetensors_open(path, &st) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "too short") != NULL);
}

TEST(unsupported_dtype_is_named_on_read) {
  write_file("{\"t\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", "\1\2\3\4", 4, 0);
  precis_safetensors st;
  CHECK_OK(precis_safetensors_open(path, &st));
  float *v = NULL;
  if (st.n_tensors == 1) {
    CHECK(precis_safetensors_read_f32(&st, &st.tensors[0], &v) == PRECIS_E_INPUT);
    CHECK(strstr(precis_last_error(), "I8 is not supported") != NULL);
  }
  precis_safetensors_close(&st);
}

RUN_TESTS(T(reads_f32_f16_bf16), T(refuses_malformed_files), T(unsupported_dtype_is_named_on_read))

__attribute__((constructor)) static void make_path(void) {
  snprintf(path, sizeof path, "/tmp/precis-test-safetensors-%ld.safetensors", (long)getpid());
}

__attribute__((destructor)) static void remove_path(void) { unlink(path); }
