/* Datasets: the RNG and distributions, SHA-256, references, the HDF5 writer/reader/validator,
 * checksum failures, the outputs writer, and gen end to end. */
#include <hdf5.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/dataset_digest.h"
#include "data/distributions.h"
#include "base/fileio.h"
#include "data/generate.h"
#include "harness.h"
#include "report/results.h"
#include "data/rng.h"
#include "data/suite.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
  static char path[4][512];
  static int next;
  char *p = path[next++ % 4];
  snprintf(p, 512, "%s/%s", tmpdir, name);
  return p;
}

TEST(philox_known_answers) {
  /* Random123's kat_vectors for philox4x32-10. */
  static const uint32_t cases[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1},
  };
  for (int c = 0; c < 3; c++) {
    uint32_t out[4];
    precis_philox4x32_10(cases[c], cases[c] + 4, out);
    for (int i = 0; i < 4; i++) CHECK_MSG(out[i] == cases[c][6 + i], "case %d word %d: %08x", c, i, out[i]);
  }
}

TEST(reproducible_log_exp) {
  double worst_log = 0, worst_exp = 0;
  for (int i = 1; i < 20000; i++) {
    double x = (double)i * 0.000731 + 1e-300 * i;
    double y = ldexp(1.0 + (double)(i % 977) / 977.0, (i % 200) - 100);
    double rel = fabs(precis_rng_log(y) - log(y)) / fmax(fabs(log(y)), 1e-300);
    if (fabs(log(y)) > 1e-3 && rel > worst_log) worst_log = rel;
    double z = (x - 7.0) * 10.0;
    double e = fabs(precis_rng_exp(z) - exp(z)) / exp(z);
    if (e > worst_exp) worst_exp = e;
  }
  CHECK_MSG(worst_log < 4e-16, "log rel error %g", worst_log);
  CHECK_MSG(worst_exp < 4e-15, "exp rel error %g", worst_exp);
  CHECK(precis_rng_log(1.0) == 0.0);
  CHECK(precis_rng_exp(0.0) == 1.0);
}

static double mean_of(const float *v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += v[i];
  return s / (double)n;
}

static double var_of(const float *v, size_t n) {
  double m = mean_of(v, n), s = 0;
  for (size_t i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
  return s / (double)(n - 1);
}

TEST(distributions) {
  const int64_t rows = 64, cols = 256;
  const size_t n = (size_t)(rows * cols);
  float *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w);
  precis_rng_key key = precis_rng_key_for(1, "w");
  precis_dist d;

  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  d.params[0] = 3;
  d.params[1] = 2;
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  CHECK_NEAR(mean_of(v, n), 3.0, 0.05);
  CHECK_NEAR(var_of(v, n), 4.0, 0.15);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, w);
  CHECK(memcmp(v, w, n * sizeof *v) == 0); /* a pure function of the counter */
  precis_dist_fill(&d, precis_rng_key_for(2, "w"), PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, w);
  CHECK(memcmp(v, w, n * sizeof *v) != 0);
  precis_dist_fill(&d, precis_rng_key_for(1, "x"), PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, w);
  CHECK(memcmp(v, w, n * sizeof *v) != 0);
  /* The first sample of a batch equals a one-sample fill: samples do not depend on the batch size. */
  float *two = malloc(2 * n * sizeof *two);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 2, rows, cols, two);
  CHECK(memcmp(v, two, n * sizeof *v) == 0);
  free(two);

  precis_dist_init(&d, PRECIS_DIST_UNIFORM);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, 1, rows, cols, v);
  bool in_range = true;
  for (size_t i = 0; i < n; i++) in_range = in_range && v[i] >= -1.0f && v[i] <= 1.0f;
  CHECK(in_range);
  CHECK_NEAR(var_of(v, n), 1.0 / 3.0, 0.02);

  precis_dist_init(&d, PRECIS_DIST_INTEGERS);
  d.params[0] = -2;
  d.params[1] = 2;
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, 1, rows, cols, v);
  int seen[5] = {0};
  bool integral = true;
  for (size_t i = 0; i < n; i++) {
    integral = integral && v[i] == floorf(v[i]) && v[i] >= -2 && v[i] <= 2;
    if (integral) seen[(int)v[i] + 2]++;
  }
  CHECK(integral);
  for (int i = 0; i < 5; i++) CHECK_MSG(seen[i] > (int)n / 6, "value %d seen %d times", i - 2, seen[i]);

  precis_dist_init(&d, PRECIS_DIST_RELU);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  size_t zeros = 0;
  bool nonneg = true;
  for (size_t i = 0; i < n; i++) {
    nonneg = nonneg && v[i] >= 0 && !signbit(v[i]);
    zeros += v[i] == 0;
  }
  CHECK(nonneg);
  CHECK_NEAR((double)zeros / (double)n, 0.5, 0.03);

  precis_dist_init(&d, PRECIS_DIST_OUTLIER_CHANNELS);
  d.params[0] = 0.05;
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  precis_dist_fill(&d, key, PRECIS_STREAM_CALIB_A, PRECIS_OPERAND_A, 1, rows, cols, w);
  int outlier_cols = 0;
  bool same_channels = true;
  for (int64_t c = 0; c < cols; c++) {
    bool all_big = true, calib_big = true;
    for (int64_t r = 0; r < rows; r++) {
      float x = fabsf(v[r * cols + c]);
      all_big = all_big && x >= 6 && x <= 60;
      calib_big = calib_big && fabsf(w[r * cols + c]) >= 6;
    }
    outlier_cols += all_big;
    same_channels = same_channels && all_big == calib_big;
  }
  CHECK_EQ_INT(outlier_cols, 13); /* round(0.05 * 256) */
  CHECK(same_channels);           /* calibration samples share the model's outlier channels */

  precis_dist_init(&d, PRECIS_DIST_SPIKES);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  bool one_per_row = true;
  for (int64_t r = 0; r < rows; r++) {
    int spikes = 0;
    for (int64_t c = 0; c < cols; c++) spikes += fabsf(v[r * cols + c]) == 100.0f;
    one_per_row = one_per_row && spikes == 1;
  }
  CHECK(one_per_row);

  precis_dist_init(&d, PRECIS_DIST_LOG_UNIFORM);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  bool spans = true;
  float lo = INFINITY, hi = 0;
  for (size_t i = 0; i < n; i++) {
    float x = fabsf(v[i]);
    spans = spans && x >= 1e-4f * 0.999f && x <= 1e4f * 1.001f;
    lo = fminf(lo, x);
    hi = fmaxf(hi, x);
  }
  CHECK(spans && lo < 2e-4f && hi > 5e3f);

  precis_dist_init(&d, PRECIS_DIST_STUDENT_T);
  d.params[0] = 5; /* variance nu/(nu-2) = 5/3 */
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  CHECK_NEAR(mean_of(v, n), 0, 0.05);
  CHECK_NEAR(var_of(v, n), 5.0 / 3.0, 0.25);

  /* cancellation: a pairs equal values along K (columns), b pairs opposite rows. */
  precis_dist_init(&d, PRECIS_DIST_CANCELLATION);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, 1, rows, cols, v);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, 1, cols, rows, w);
  bool paired = true;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c += 2) paired = paired && v[r * cols + c] == v[r * cols + c + 1];
  for (int64_t kk = 0; kk < cols; kk += 2)
    for (int64_t j = 0; j < rows; j++) {
      float y0 = w[kk * rows + j], y1 = w[(kk + 1) * rows + j];
      paired = paired && fabsf(y0 + y1) <= 0.01f * (1 + fabsf(y0)) && y0 != 0;
    }
  CHECK(paired);
  free(v);
  free(w);
}

TEST(sha256_vectors) {
  struct {
    const char *msg, *hex;
  } cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    precis_sha256 h;
    uint8_t digest[32];
    char hex[65];
    precis_sha256_init(&h);
    /* fed byte by byte to exercise the buffering */
    for (const char *p = cases[i].msg; *p; p++) precis_sha256_update(&h, p, 1);
    precis_sha256_final(&h, digest);
    precis_sha256_hex(digest, hex);
    CHECK_STR(hex, cases[i].hex);
  }
  /* one million 'a' */
  precis_sha256 h;
  uint8_t digest[32];
  char hex[65];
  char block[1000];
  memset(block, 'a', sizeof block);
  precis_sha256_init(&h);
  for (int i = 0; i < 1000; i++) precis_sha256_update(&h, block, sizeof block);
  precis_sha256_final(&h, digest);
  precis_sha256_hex(digest, hex);
  CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* The SHA-NI compression (when this CPU has it) and the portable one give the same digests: every
 * length from 0 to 300 bytes, fed whole and in odd pieces, and the vectors above both ways. */
static void sha256_of(const uint8_t *data, size_t len, size_t piece, char hex[65]) {
  precis_sha256 h;
  uint8_t digest[32];
  precis_sha256_init(&h);
  for (size_t at = 0; at < len; at += piece) precis_sha256_update(&h, data + at, len - at < piece ? len - at : piece);
  precis_sha256_final(&h, digest);
  precis_sha256_hex(digest, hex);
}

TEST(sha256_accelerated_matches_portable) {
  bool accelerated = precis_sha256_set_accelerated(true);
  printf("  SHA-NI %s on this CPU\n", accelerated ? "used" : "not available: the portable path twice");
  static uint8_t data[300];
  uint32_t s = 12345;
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
  for (size_t len = 0; len <= sizeof data; len++)
    for (size_t piece = 1; piece <= 301; piece += 100) {
      char fast[65], slow[65];
      precis_sha256_set_accelerated(true);
      sha256_of(data, len, piece, fast);
      precis_sha256_set_accelerated(false);
      sha256_of(data, len, piece, slow);
      CHECK_MSG(strcmp(fast, slow) == 0, "length %zu, pieces of %zu: %s vs %s", len, piece, fast, slow);
    }
  precis_sha256_set_accelerated(false);
  sha256_vectors();
  precis_sha256_set_accelerated(true);
  sha256_vectors();
}

TEST(references_match_naive_float64) {
  const int64_t batch = 3, m = 5, n = 7, k = 33;
  float a[3 * 5 * 33], b[3 * 33 * 7];
  precis_dist d;
  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  precis_rng_key key = precis_rng_key_for(9, "ref");
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, batch, m, k, a);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, batch, k, n, b);
  double c[3 * 5 * 7], ab[3 * 5 * 7];
  for (int batched = 0; batched < 2; batched++) {
    CHECK_OK(precis_reference_compute(a, b, batch, m, n, k, batched, c, ab));
    double worst = 0;
    for (int64_t s = 0; s < batch; s++)
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          long double sum = 0, abs_sum = 0;
          for (int64_t l = 0; l < k; l++) {
            long double p = (long double)a[(s * m + i) * k + l] * b[(batched ? s * k * n : 0) + l * n + j];
            sum += p;
            abs_sum += fabsl(p);
          }
          size_t at = (size_t)((s * m + i) * n + j);
          worst = fmax(worst, (double)(fabsl((long double)c[at] - sum) / abs_sum));
          worst = fmax(worst, (double)(fabsl((long double)ab[at] - abs_sum) / abs_sum));
        }
    CHECK_MSG(worst < 1e-14, "worst relative error %g (batched %d)", worst, batched);
  }
}

/* The arrays write_sample wrote last: w0 (b shared) uses b[0 .. 40*5), w1 (b batched) all of b;
 * c and ab hold w1's references, c0 and ab0 w0's. */
static float sample_a[2 * 6 * 40], sample_b[2 * 40 * 5], sample_ca[3 * 6 * 40];
static double sample_c0[2 * 6 * 5], sample_ab0[2 * 6 * 5], sample_c1[2 * 6 * 5], sample_ab1[2 * 6 * 5];

/* When set, write_sample stores c_ref rounded to float32 (in its float64 dataset): the reference a
 * careless writer computes with float32 arithmetic. */
static bool sample_c_ref_rounded_to_f32;

/* Writes a small dataset through the writer; returns the path. */
static const char *write_sample(const char *name, bool checksum_target_calib) {
  const char *path = tmp_path(name);
  unlink(path);
  precis_dataset_write_options opt = {false, 0};
  precis_dataset_writer *w = NULL;
  CHECK_OK(precis_dataset_writer_open(path, &opt, &w));
  if (!w) return path;
  const int64_t batch = 2, m = 6, n = 5, k = 40, calib = checksum_target_calib ? 3 : 0;
  float *a = sample_a, *b = sample_b, *ca = sample_ca;
  precis_dist d;
  precis_dist_init(&d, PRECIS_DIST_NORMAL);
  precis_rng_key key = precis_rng_key_for(3, name);
  precis_dist_fill(&d, key, PRECIS_STREAM_A, PRECIS_OPERAND_A, batch, m, k, a);
  precis_dist_fill(&d, key, PRECIS_STREAM_B, PRECIS_OPERAND_B, batch, k, n, b);
  precis_dist_fill(&d, key, PRECIS_STREAM_CALIB_A, PRECIS_OPERAND_A, 3, m, k, ca);
  char kind[] = "gemm", desc[] = "d", ad[] = "normal", bd[] = "normal", ref[] = "test";
  for (int batched = 0; batched < 2; batched++) {
    double *c = batched ? sample_c1 : sample_c0, *ab = batched ? sample_ab1 : sample_ab0;
    CHECK_OK(precis_reference_compute(a, b, batch, m, n, k, batched, c, ab));
    if (sample_c_ref_rounded_to_f32)
      for (int64_t i = 0; i < batch * m * n; i++) c[i] = (double)(float)c[i];
    char wname[32];
    snprintf(wname, sizeof wname, "w%d", batched);
    precis_workload_info info = {.name = wname, .kind = kind, .description = desc, .a_dist = ad, .b_dist = bd,
                                 .m = m, .n = n, .k = k, .batch = batch, .b_batched = batched,
                                 .calib_samples = batched ? 0 : calib, .reference = ref};
    precis_workload_data data = {.a = a, .b = b, .c_ref = c, .ab_abs = ab, .calib_a = batched ? NULL : ca};
    CHECK_OK(precis_dataset_writer_add(w, &info, &data));
  }
  precis_dataset_root_attrs root = {"test", "2024-01-01T00:00:00Z", 77, "suite: text", "id-1", NULL};
  CHECK_OK(precis_dataset_writer_commit(w, &root));
  return path;
}

TEST(write_read_round_trip) {
  const char *path = write_sample("round.h5", true);
  precis_dataset *ds = NULL;
  CHECK_OK(precis_dataset_open(path, &ds));
  if (!ds) return;
  CHECK_STR(ds->dataset_id, "id-1");
  CHECK_STR(ds->generator, "test");
  CHECK_STR(ds->suite, "suite: text");
  CHECK_EQ_INT(ds->seed, 77);
  CHECK_EQ_INT(ds->n_workloads, 2);
  if (ds->n_workloads == 2) {
    CHECK_STR(ds->workloads[0].name, "w0");
    CHECK(!ds->workloads[0].b_batched && ds->workloads[1].b_batched);
    CHECK_EQ_INT(ds->workloads[0].calib_samples, 3);
    CHECK_EQ_INT(ds->workloads[1].calib_samples, 0);
    CHECK(ds->workloads[0].checksummed);
    CHECK_STR(ds->workloads[0].reference, "test");
    /* Every array reads back bit for bit as written. */
    precis_workload_data data;
    CHECK_OK(precis_dataset_load(ds, 0, &data));
    CHECK(data.a && data.b && data.c_ref && data.ab_abs && data.calib_a);
    if (data.a && data.b && data.c_ref && data.ab_abs && data.calib_a) {
      CHECK(memcmp(data.a, sample_a, sizeof sample_a) == 0);
      CHECK(memcmp(data.b, sample_b, 40 * 5 * sizeof(float)) == 0);
      CHECK(memcmp(data.c_ref, sample_c0, sizeof sample_c0) == 0);
      CHECK(memcmp(data.ab_abs, sample_ab0, sizeof sample_ab0) == 0);
      CHECK(memcmp(data.calib_a, sample_ca, sizeof sample_ca) == 0);
    }
    precis_workload_data_free(&data);
    CHECK_OK(precis_dataset_load(ds, 1, &data));
    CHECK(data.calib_a == NULL && data.a && data.b && data.c_ref && data.ab_abs);
    if (data.a && data.b && data.c_ref && data.ab_abs) {
      CHECK(memcmp(data.a, sample_a, sizeof sample_a) == 0);
      CHECK(memcmp(data.b, sample_b, sizeof sample_b) == 0);
      CHECK(memcmp(data.c_ref, sample_c1, sizeof sample_c1) == 0);
      CHECK(memcmp(data.ab_abs, sample_ab1, sizeof sample_ab1) == 0);
    }
    precis_workload_data_free(&data);
    CHECK(precis_dataset_load(ds, 2, &data) != PRECIS_OK);
  }
  CHECK_OK(precis_dataset_verify_data(ds));
  precis_dataset_close(ds);

  /* An existing file is not replaced without force, and is with it. */
  precis_dataset_write_options opt = {false, 0};
  precis_dataset_writer *w = NULL;
  CHECK(precis_dataset_writer_open(path, &opt, &w) == PRECIS_E_EXISTS);
  opt.force = true;
  CHECK_OK(precis_dataset_writer_open(path, &opt, &w));
  precis_dataset_writer_abort(w); /* abort leaves the old file in place */
  CHECK_OK(precis_dataset_open(path, &ds));
  precis_dataset_close(ds);
}

/* Flips one byte in the middle of a dataset's first chunk. */
static void corrupt_chunk(const char *path, const char *dataset) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, dataset, H5P_DEFAULT);
  haddr_t addr = 0;
  hsize_t size = 0, offset[3] = {0, 0, 0};
  unsigned mask = 0;
  herr_t rc = H5Dget_chunk_info_by_coord(d, offset, &mask, &addr, &size);
  H5Dclose(d);
  H5Fclose(f);
  CHECK(rc >= 0 && size > 0);
  FILE *fp = fopen(path, "r+b");
  if (!fp) return;
  fseeko(fp, (off_t)(addr + size / 2), SEEK_SET);
  int byte = fgetc(fp);
  fseeko(fp, (off_t)(addr + size / 2), SEEK_SET);
  fputc(byte ^ 0x21, fp);
  fclose(fp);
}

TEST(checksum_failure_names_the_dataset) {
  const char *names[] = {"/workloads/w0/a", "/workloads/w1/b", "/workloads/w0/ab_abs", "/workloads/w0/calib/a"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *path = write_sample("corrupt.h5", true);
    corrupt_chunk(path, names[i]);
    precis_dataset *ds = NULL;
    CHECK_OK(precis_dataset_open(path, &ds)); /* structure is intact */
    if (!ds) continue;
    precis_status st = precis_dataset_verify_data(ds);
    CHECK(st == PRECIS_E_INPUT);
    const char *msg = precis_last_error();
    CHECK_MSG(strstr(msg, names[i]) && strstr(msg, "checksum failed") && strstr(msg, path), "message: %s", msg);
    precis_dataset_close(ds);
    unlink(path);
  }
}

/* Writes an HDF5 file by hand, the way h5py would, with one deliberate defect. */
typedef enum defect { NONE, C_REF_F32, FUTURE_VERSION, NO_WORKLOADS, ZERO_M, OVERFLOW, WRONG_FORMAT, NAN_INPUT } defect;

static void put_str(hid_t obj, const char *name, const char *value) {
  hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, &value);
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
}

static void put_int(hid_t obj, const char *name, int64_t value) {
  hid_t s = H5Screate(H5S_SCALAR), a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &value);
  H5Aclose(a);
  H5Sclose(s);
}

static void put_data(hid_t g, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data, hid_t mem) {
  hid_t s = H5Screate_simple(rank, dims, NULL), d = H5Dcreate2(g, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Sclose(s);
}

static const char *handmade(defect what) {
  const char *path = tmp_path("hand.h5");
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put_str(f, "format", what == WRONG_FORMAT ? "precis-outputs" : "precis-dataset");
  put_int(f, "format_version", what == FUTURE_VERSION ? 3 : 1);
  put_str(f, "generator", "hand");
  put_str(f, "created_utc", "now");
  put_int(f, "seed", 0);
  put_str(f, "suite", "");
  put_str(f, "dataset_id", "hand-1");
  hid_t ws = H5Gcreate2(f, "workloads", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (what != NO_WORKLOADS) {
    hid_t g = H5Gcreate2(ws, "x", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const int64_t m = 2, n = 3, k = 4;
    put_str(g, "kind", "gemm");
    put_int(g, "m", what == ZERO_M ? 0 : what == OVERFLOW ? ((int64_t)1 << 40) : m);
    put_int(g, "n", what == OVERFLOW ? ((int64_t)1 << 40) : n);
    put_int(g, "k", what == OVERFLOW ? ((int64_t)1 << 40) : k);
    put_int(g, "batch", 1);
    put_str(g, "description", "");
    put_str(g, "a_dist", "");
    put_str(g, "b_dist", "");
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
    if (what == NAN_INPUT) a[5] = NAN;
    double c[6], ab[6];
    float cf[6];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) {
        double s = 0, t = 0;
        for (int l = 0; l < 4; l++) {
          s += (double)a[i * 4 + l] * b[l * 3 + j];
          t += fabs((double)a[i * 4 + l] * b[l * 3 + j]);
        }
        c[i * 3 + j] = s;
        ab[i * 3 + j] = t;
        cf[i * 3 + j] = (float)s;
      }
    hsize_t adims[3] = {1, 2, 4}, bdims[2] = {4, 3}, cdims[3] = {1, 2, 3};
    put_data(g, "a", H5T_IEEE_F32LE, 3, adims, a, H5T_NATIVE_FLOAT);
    put_data(g, "b", H5T_IEEE_F32BE, 2, bdims, b, H5T_NATIVE_FLOAT); /* big-endian is fine */
    if (what == C_REF_F32) put_data(g, "c_ref", H5T_IEEE_F32LE, 3, cdims, cf, H5T_NATIVE_FLOAT);
    else put_data(g, "c_ref", H5T_IEEE_F64LE, 3, cdims, c, H5T_NATIVE_DOUBLE);
    put_data(g, "ab_abs", H5T_IEEE_F64LE, 3, cdims, ab, H5T_NATIVE_DOUBLE);
    H5Gclose(g);
  }
  H5Gclose(ws);
  H5Fclose(f);
  return path;
}

static void expect_open_error(defect what, const char *fragment) {
  const char *path = handmade(what);
  precis_dataset *ds = NULL;
  precis_status st = precis_dataset_open(path, &ds);
  if (st == PRECIS_OK) {
    st = precis_dataset_verify_data(ds);
    precis_dataset_close(ds);
  }
  CHECK_MSG(st == PRECIS_E_INPUT, "defect %d accepted", (int)what);
  const char *msg = precis_last_error();
  CHECK_MSG(strstr(msg, fragment) && strstr(msg, path), "defect %d: message \"%s\" lacks \"%s\"", (int)what, msg, fragment);
}

TEST(validation_reports_first_mismatch) {
  precis_dataset *ds = NULL;
  CHECK_OK(precis_dataset_open(handmade(NONE), &ds)); /* unchunked, no checksum: accepted (h5py's default) */
  if (ds) {
    CHECK(!ds->workloads[0].checksummed);
    CHECK_OK(precis_dataset_verify_data(ds));
    precis_dataset_close(ds);
  }
  expect_open_error(C_REF_F32, "/workloads/x/c_ref: expected float64 [1,2,3], found float32 [1,2,3]");
  expect_open_error(FUTURE_VERSION, "format_version 3 is newer");
  expect_open_error(NO_WORKLOADS, "/workloads: empty");
  expect_open_error(ZERO_M, "zero-sized");
  expect_open_error(OVERFLOW, "overflow 64 bits");
  expect_open_error(WRONG_FORMAT, "saved outputs");
  expect_open_error(NAN_INPUT, "/workloads/x/a: element [0,1,1] is NaN");
  CHECK(precis_dataset_open(tmp_path("missing.h5"), &ds) == PRECIS_E_INPUT);
}

/* The load checks c_ref against a float64 accumulation of the stored inputs to (k+2)·2^-52·|a|.|b|:
 * a c_ref rounded to float32 (relative error up to 2^-24) is refused, naming the element, while the
 * same dataset with its float64 references loads. A tolerance of float32's size would let it pass. */
TEST(float32_rounded_reference_is_refused) {
  sample_c_ref_rounded_to_f32 = true;
  const char *path = write_sample("cref32.h5", false);
  sample_c_ref_rounded_to_f32 = false;
  precis_dataset *ds = NULL;
  CHECK_OK(precis_dataset_open(path, &ds));
  if (!ds) return;
  precis_workload_data data;
  precis_status st = precis_dataset_load(ds, 0, &data);
  CHECK_MSG(st == PRECIS_E_INPUT, "a float32-rounded c_ref was loaded");
  if (st == PRECIS_OK) precis_workload_data_free(&data);
  CHECK_MSG(strstr(precis_last_error(), "/workloads/w0/c_ref: element") != NULL &&
                strstr(precis_last_error(), "must be computed in float64") != NULL,
            "%s", precis_last_error());
  precis_dataset_close(ds);
  unlink(path);
  path = write_sample("cref64.h5", false);
  ds = NULL;
  CHECK_OK(precis_dataset_open(path, &ds));
  if (!ds) return;
  CHECK_OK(precis_dataset_load(ds, 0, &data));
  precis_workload_data_free(&data);
  precis_dataset_close(ds);
  unlink(path);
}

TEST(outputs_writer) {
  const char *path = tmp_path("outputs.h5");
  unlink(path);
  precis_outputs_writer *w = NULL;
  CHECK_OK(precis_outputs_open(path, false, "id-9", &w));
  float c[2 * 3 * 4];
  for (int i = 0; i < 24; i++) c[i] = (float)i * 0.5f;
  CHECK_OK(precis_outputs_write(w, "wl", "fp32", c, 2, 3, 4));
  CHECK_OK(precis_outputs_write(w, "wl", "bf16", c, 2, 3, 4));
  CHECK(precis_outputs_write(w, "wl", "fp32", c, 2, 3, 4) != PRECIS_OK); /* twice */
  CHECK(!precis_path_exists(path));                                       /* not before commit */
  CHECK_OK(precis_outputs_close(w, true));
  CHECK(precis_path_exists(path));
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK(f >= 0);
  hid_t d = H5Dopen2(f, "/workloads/wl/bf16/c", H5P_DEFAULT);
  float back[24] = {0};
  CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
  CHECK(memcmp(back, c, sizeof c) == 0);
  hid_t s = H5Dget_space(d);
  hsize_t dims[3];
  CHECK_EQ_INT(H5Sget_simple_extent_dims(s, dims, NULL), 3);
  CHECK(dims[0] == 2 && dims[1] == 3 && dims[2] == 4);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  /* A dataset reader refuses an outputs file and says what it is. */
  precis_dataset *ds = NULL;
  CHECK(precis_dataset_open(path, &ds) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "saved outputs") != NULL);
  CHECK(precis_outputs_open(path, false, "id", &w) == PRECIS_E_EXISTS);
  CHECK_OK(precis_outputs_open(path, true, "id", &w));
  CHECK_OK(precis_outputs_close(w, false)); /* discarded: old file stays */
  CHECK(precis_path_exists(path));
}

/* Overwrites one float of a float32 dataset in place (the chunk checksum is recomputed on write). */
static void poke_float(const char *path, const char *dataset, float value) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, dataset, H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t start[3] = {0, 0, 0}, count[3] = {1, 1, 1};
  herr_t rc = H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
  hid_t mem = H5Screate_simple(3, count, NULL);
  if (rc >= 0) rc = H5Dwrite(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &value);
  CHECK(rc >= 0);
  H5Sclose(mem), H5Sclose(space), H5Dclose(d), H5Fclose(f);
}

static void computed_id(const char *path, char id[65]) {
  precis_dataset *ds = NULL;
  id[0] = '\0';
  CHECK_OK(precis_dataset_open(path, &ds));
  if (!ds) return;
  CHECK_OK(precis_dataset_verify_data_id(ds, id));
  /* The identity a run records (read from the inputs alone) is the digest inspect recomputes. */
  const char *content = NULL;
  CHECK_OK(precis_dataset_content_id(ds, &content));
  CHECK_STR(content ? content : "", id);
  precis_dataset_close(ds);
}

TEST(dataset_id_covers_the_calibration_split) {
  const char *path = write_sample("calibid.h5", true);
  char before[65], after_calib[65];
  computed_id(path, before);
  CHECK(strlen(before) == 64);
  poke_float(path, "/workloads/w0/calib/a", sample_ca[0] + 1.0f);
  computed_id(path, after_calib);
  CHECK(strlen(after_calib) == 64);
  CHECK_MSG(strcmp(before, after_calib) != 0, "dataset_id %s unchanged after calib/a changed", before);
  /* The original value again: the first id again (the id is a function of the contents alone). */
  poke_float(path, "/workloads/w0/calib/a", sample_ca[0]);
  char restored[65];
  computed_id(path, restored);
  CHECK_STR(restored, before);
  unlink(path);
}

static void set_string_attr(const char *path, const char *group_path, const char *name, const char *value) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), g = H5Gopen2(f, group_path, H5P_DEFAULT);
  hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
  H5Tset_size(type, strlen(value));
  hid_t attr = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  CHECK(attr >= 0 && H5Awrite(attr, type, value) >= 0);
  H5Aclose(attr), H5Sclose(space), H5Tclose(type), H5Gclose(g), H5Fclose(f);
}

/* A logit workload's rows carry KL and top-1 columns the same data without the attribute lacks, so
 * resume must see another dataset. */
TEST(dataset_id_covers_the_output_kind) {
  const char *path = write_sample("kindid.h5", true);
  char before[65], logits[65];
  computed_id(path, before);
  set_string_attr(path, "/workloads/w0", "output_kind", "logits");
  computed_id(path, logits);
  CHECK(strlen(logits) == 64);
  CHECK_MSG(strcmp(before, logits) != 0, "dataset_id %s unchanged by output_kind", before);
  unlink(path);
}

TEST(gen_is_deterministic_and_validates) {
  const char *text = "seed: 5\n"
                     "workloads:\n"
                     "  - {name: one, m: 8, n: 12, k: 64, batch: 2, calib: 3, a: outlier_channels}\n"
                     "  - {name: two, m: 3, n: 5, k: 7, b_batched: true, batch: 2, a: integers, b: spikes}\n";
  precis_suite suite;
  CHECK_OK(precis_suite_parse(text, strlen(text), "t.yaml", ".", &suite));
  char id1[65] = "", id2[65] = "";
  precis_gen_options opt = {.output = tmp_path("g1.h5"), .force = true};
  CHECK_OK(precis_generate(&suite, &opt, id1));
  opt.output = tmp_path("g2.h5");
  opt.gzip_level = 6;
  CHECK_OK(precis_generate(&suite, &opt, id2));
  CHECK_STR(id1, id2);
  precis_suite_free(&suite);
  for (int i = 0; i < 2; i++) {
    precis_dataset *ds = NULL;
    CHECK_OK(precis_dataset_open(tmp_path(i ? "g2.h5" : "g1.h5"), &ds));
    if (!ds) continue;
    char computed[65];
    CHECK_OK(precis_dataset_verify_data_id(ds, computed));
    CHECK_STR(computed, ds->dataset_id);
    const char *content = NULL;
    CHECK_OK(precis_dataset_content_id(ds, &content));
    CHECK_STR(content ? content : "", computed);
    CHECK_STR(ds->dataset_id, id1);
    CHECK_STR(ds->suite, text);
    CHECK_EQ_INT(ds->seed, 5);
    CHECK(ds->n_workloads == 2 && strcmp(ds->workloads[0].name, "one") == 0); /* suite order */
    CHECK(ds->workloads[0].compressed == (i == 1));
    precis_dataset_close(ds);
  }
  /* The output is refused up front when it exists and force is off. */
  CHECK_OK(precis_suite_parse(text, strlen(text), "t.yaml", ".", &suite));
  opt.force = false;
  CHECK(precis_generate(&suite, &opt, id2) == PRECIS_E_EXISTS);
  precis_suite_free(&suite);
}

RUN_TESTS(T(philox_known_answers), T(reproducible_log_exp), T(distributions), T(sha256_vectors),
          T(sha256_accelerated_matches_portable),
          T(references_match_naive_float64), T(write_read_round_trip), T(checksum_failure_names_the_dataset),
          T(validation_reports_first_mismatch), T(float32_rounded_reference_is_refused), T(outputs_writer),
          T(dataset_id_covers_the_calibration_split), T(dataset_id_covers_the_output_kind),
          T(gen_is_deterministic_and_validates))

__attribute__((constructor)) static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/precis-test-dataset-XXXXXX");
  if (!mkdtemp(tmpdir)) snprintf(tmpdir, sizeof tmpdir, "/tmp");
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

__attribute__((destructor)) static void remove_tmpdir(void) {
  const char *names[] = {"round.h5", "corrupt.h5", "hand.h5", "outputs.h5", "g1.h5", "g2.h5"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
  if (strcmp(tmpdir, "/tmp") != 0) rmdir(tmpdir);
}
