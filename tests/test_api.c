/* libprecis's public C API (the headers under include/precis/, DESIGN §15) as a C client sees it: this file
 * includes nothing else of precis. Error paths return statuses with messages naming the argument
 * (under the sanitizer build, with leak detection, they also leak nothing); emulate computes what
 * exact arithmetic gives where the recipe is exact; the CLI runs as a function, twice. The bits
 * against `precis run --save-outputs` for every preset: tests/venv/test_python_api.py. */
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "precis/precis.h"

TEST(status_and_version) {
  CHECK_STR(precis_status_str(PRECIS_OK), "ok");
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_USAGE), 2);
  CHECK_EQ_INT(precis_status_exit_code(PRECIS_E_CRITERIA), 3);
  CHECK(strlen(precis_version()) > 0 && strlen(precis_commit()) > 0);
}

TEST(specs_and_presets) {
  char buf[PRECIS_CANONICAL_MAX];
  CHECK_OK(precis_spec_canonical("int8", buf, sizeof buf));
  CHECK_STR(buf, "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=none,split=none");
  CHECK_EQ_INT(precis_spec_canonical("a=s8@col", buf, sizeof buf), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "a=s8@col") != NULL);
  CHECK_EQ_INT(precis_spec_canonical("bf16", buf, 8), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_spec_canonical(NULL, buf, sizeof buf), PRECIS_E_USAGE);
  size_t n = precis_recipe_count();
  CHECK(n >= 16);
  precis_recipe_entry e;
  CHECK_OK(precis_recipe_get(0, &e));
  CHECK_STR(e.name, "fp32");
  CHECK(e.baseline && e.in_all && e.cpu_supported);
  CHECK_EQ_INT(precis_recipe_get(n, &e), PRECIS_E_USAGE);
  char why[256];
  CHECK_OK(precis_recipe_cpu_support("nvfp4", why, sizeof why));
  CHECK_EQ_INT(precis_recipe_cpu_support("fp64-emu", why, sizeof why), PRECIS_E_UNSUPPORTED);
  CHECK(why[0] != '\0');
}

TEST(emulate_exact_cases) {
  /* Small integers: every recipe with fp32 sums (and int8, whose scales are then exact powers of
   * two times 1/127) gives A·B for these values; fp32 exactly. */
  enum { S = 2, M = 3, K = 4, N = 5 };
  float a[S * M * K], b[K * N], c[S * M * N];
  double c64[S * M * N];
  for (int i = 0; i < S * M * K; i++) a[i] = (float)(i % 7 - 3);
  for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5 - 2);
  precis_gemm g = {.batch = S, .m = M, .n = N, .k = K, .a = a, .a_dtype = PRECIS_DTYPE_F32, .b = b,
                   .b_dtype = PRECIS_DTYPE_F32};
  precis_emulate_info info;
  CHECK_OK(precis_emulate("fp32", &g, c, PRECIS_DTYPE_F32, &info));
  int exact = 1;
  for (int s = 0; s < S; s++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        double sum = 0;
        for (int l = 0; l < K; l++) sum += (double)a[(s * M + i) * K + l] * b[l * N + j];
        exact &= c[(s * M + i) * N + j] == (float)sum;
      }
  CHECK(exact);
  CHECK_EQ_INT(info.out_dtype, PRECIS_DTYPE_F32);
  CHECK(strstr(info.canonical, "a=fp32") == info.canonical);
  CHECK(strlen(info.emulation) > 0);
  /* fp64 recipes give float64; their float32 rounding when asked for float32. */
  precis_dtype t;
  CHECK_OK(precis_emulate_out_dtype("fp64", &t));
  CHECK_EQ_INT(t, PRECIS_DTYPE_F64);
  CHECK_OK(precis_emulate("fp64", &g, c64, PRECIS_DTYPE_F64, &info));
  CHECK_OK(precis_emulate("fp64", &g, c, PRECIS_DTYPE_F32, NULL));
  for (int i = 0; i < S * M * N; i++) exact &= (float)c64[i] == c[i];
  CHECK(exact);
  /* float64 inputs: the fp64 recipe reads all their bits. */
  double a64[S * M * K], b64[K * N];
  for (int i = 0; i < S * M * K; i++) a64[i] = a[i] + 0x1p-40;
  for (int i = 0; i < K * N; i++) b64[i] = b[i];
  precis_gemm g64 = g;
  g64.a = a64, g64.a_dtype = PRECIS_DTYPE_F64, g64.b = b64, g64.b_dtype = PRECIS_DTYPE_F64;
  CHECK_OK(precis_emulate("fp64", &g64, c64, PRECIS_DTYPE_F64, NULL));
  double sum0 = 0;
  for (int l = 0; l < K; l++) sum0 += a64[l] * b64[l * N];
  CHECK(c64[0] == sum0);
}

TEST(emulate_operands) {
  /* The operands a bf16 recipe multiplies: its RNE roundings (1 + 2^-9 is a tie: to 1, even; 1 + 3*2^-9
   * rounds up to 1 + 2^-7), and alpha 1; summed in double they give what precis_emulate gives here
   * (exact sums). Refusals name the accumulator; float64 inputs are freed on every path. */
  enum { M = 2, K = 4, N = 2 };
  float a[M * K] = {1.0f + 0x1p-9f, 1.0f + 3 * 0x1p-9f, 2, 3, 4, 5, 6, 7}, b[K * N] = {1, 0, 0, 1, 1, 0, 0, 1};
  float ao[M * K], bo[K * N], c[M * N], alpha = 0;
  precis_gemm g = {.batch = 1, .m = M, .n = N, .k = K, .a = a, .a_dtype = PRECIS_DTYPE_F32, .b = b,
                   .b_dtype = PRECIS_DTYPE_F32};
  CHECK_OK(precis_emulate_operands("bf16", &g, ao, bo, &alpha));
  CHECK(alpha == 1.0f && ao[0] == 1.0f && ao[1] == 1.0f + 0x1p-7f && ao[2] == 2.0f && bo[2] == 0.0f);
  CHECK_OK(precis_emulate("a=bf16,b=bf16,acc=fp32,out=fp32", &g, c, PRECIS_DTYPE_F32, NULL));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double sum = 0;
      for (int l = 0; l < K; l++) sum += (double)ao[i * K + l] * bo[l * N + j];
      CHECK(c[i * N + j] == (float)sum);
    }
  CHECK_EQ_INT(precis_emulate_operands("int8", &g, ao, bo, &alpha), PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "acc=s32") != NULL);
  CHECK_EQ_INT(precis_emulate_operands("bf16", &g, NULL, bo, &alpha), PRECIS_E_USAGE);
  double a64[M * K], b64[K * N];
  for (int i = 0; i < M * K; i++) a64[i] = a[i];
  for (int i = 0; i < K * N; i++) b64[i] = b[i];
  precis_gemm g64 = g;
  g64.a = a64, g64.a_dtype = PRECIS_DTYPE_F64, g64.b = b64, g64.b_dtype = PRECIS_DTYPE_F64;
  CHECK_EQ_INT(precis_emulate_operands("a=bf16,b=bf16,acc=fp16,out=bf16", &g64, ao, bo, &alpha), PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "acc=fp16") != NULL);
  CHECK_OK(precis_emulate_operands("w4a16", &g64, ao, bo, &alpha));
  CHECK(ao[1] == 1.0f + 0x1p-7f);
}

TEST(emulate_refuses_bad_arguments) {
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {1, 0, 0, 1, 1, 0, 0, 1}, c[8];
  precis_gemm g = {.batch = 1, .m = 2, .n = 2, .k = 4, .a = a, .a_dtype = PRECIS_DTYPE_F32, .b = b,
                   .b_dtype = PRECIS_DTYPE_F32};
  CHECK_EQ_INT(precis_emulate("bf16", NULL, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_emulate("bf16", &g, NULL, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_emulate("bf17", &g, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "bf17") != NULL);
  CHECK_EQ_INT(precis_emulate("bf16", &g, c, (precis_dtype)7, NULL), PRECIS_E_USAGE);
  precis_gemm bad = g;
  bad.k = 0;
  CHECK_EQ_INT(precis_emulate("bf16", &bad, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "k=0") != NULL);
  bad = g;
  bad.a = NULL;
  CHECK_EQ_INT(precis_emulate("bf16", &bad, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  bad = g;
  bad.b_dtype = (precis_dtype)3;
  CHECK_EQ_INT(precis_emulate("bf16", &bad, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  bad = g;
  bad.m = INT64_MAX / 2;
  CHECK_EQ_INT(precis_emulate("bf16", &bad, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_emulate("fp64-emu", &g, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_UNSUPPORTED);
  CHECK(strstr(precis_last_error(), "fp64-emu") != NULL);
  CHECK_EQ_INT(precis_emulate("a=s8@tensor,b=s8@col,scale=absmax", &g, c, PRECIS_DTYPE_F32, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "calib") != NULL);
  g.calib_a = a, g.calib_samples = 1;
  CHECK_OK(precis_emulate("a=s8@tensor,b=s8@col,scale=absmax", &g, c, PRECIS_DTYPE_F32, NULL));
}

/* precis_emulate_device (NOT YET RUN ON A GPU: tests/gpu/test_device_gemm.c is its device test): its
 * argument checks come before anything CUDA, and then a build without CUDA says so (not built), a
 * CUDA build on a machine without a device says that (no device); on a machine with one, host memory
 * posing as device memory is refused by the pointer check. PRECIS_CUDA_BUILT comes from the build. */
TEST(emulate_device_refusals) {
  const char *env = getenv("PRECIS_CUDA_BUILT");
  if (env) CHECK_EQ_INT(precis_cuda_built(), atoi(env));
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {1, 0, 0, 1, 1, 0, 0, 1}, c[4];
  precis_device_gemm g = {.device = 0, .batch = 1, .m = 2, .n = 2, .k = 4, .a = a, .b = b, .c = c};
  float *allocated = (float *)&g; /* must come back NULL on every failure */
  CHECK_EQ_INT(precis_emulate_device(NULL, &g, NULL, NULL), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_emulate_device("bf16", NULL, NULL, NULL), PRECIS_E_USAGE);
  precis_device_gemm bad = g;
  bad.k = 0;
  CHECK_EQ_INT(precis_emulate_device("bf16", &bad, &allocated, NULL), PRECIS_E_USAGE);
  CHECK(allocated == NULL && strstr(precis_last_error(), "k=0") != NULL);
  bad = g;
  bad.c = NULL;
  CHECK_EQ_INT(precis_emulate_device("bf16", &bad, NULL, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "c_allocated") != NULL);
  /* Strides: dense row-major taken (explicitly too), a transposed b refused naming it. */
  bad = g;
  bad.b_strides[1] = 1, bad.b_strides[2] = 4;
  CHECK_EQ_INT(precis_emulate_device("bf16", &bad, NULL, NULL), PRECIS_E_USAGE);
  CHECK_MSG(strstr(precis_last_error(), "b: strides [1, 4] (elements) of shape [4, 2]: expected dense row-major [2, 1]"),
            "%s", precis_last_error());
  bad = g;
  bad.batch = 2, bad.a_strides[0] = 9, bad.a_strides[1] = 4, bad.a_strides[2] = 1;
  CHECK_EQ_INT(precis_emulate_device("bf16", &bad, NULL, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "a: strides [9, 4, 1]") != NULL && strstr(precis_last_error(), "[8, 4, 1]"));
  bad = g;
  bad.c_strides[0] = 77, bad.c_strides[1] = 3, bad.c_strides[2] = 1; /* batch 1: its stride is free */
  CHECK_EQ_INT(precis_emulate_device("bf16", &bad, NULL, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "c: strides [77, 3, 1]") != NULL);
  CHECK_EQ_INT(precis_emulate_device("a=s8@tensor,b=s8@col,scale=absmax", &g, NULL, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "calibration inputs, which device arrays do not carry") != NULL);
  CHECK_EQ_INT(precis_emulate_device("bf17", &g, NULL, NULL), PRECIS_E_USAGE);
  /* Valid arguments: what this build and machine say. */
  bad = g;
  bad.a_strides[0] = 123, bad.a_strides[1] = 4, bad.a_strides[2] = 1; /* dense: batch 1 */
  precis_status st = precis_emulate_device("bf16", &bad, NULL, NULL);
  const char *msg = precis_last_error();
  if (!precis_cuda_built()) {
    CHECK_EQ_INT(st, PRECIS_E_NOT_BUILT);
    CHECK_MSG(strstr(msg, "this libprecis was built without CUDA (PRECIS_CUDA=OFF"), "%s", msg);
  } else if (st == PRECIS_E_NO_DEVICE) {
    CHECK_MSG(strstr(msg, "no usable CUDA device"), "%s", msg);
  } else {
    CHECK_EQ_INT(st, PRECIS_E_USAGE);
    CHECK_MSG(strstr(msg, "a: ") == msg && strstr(msg, "expected device memory of CUDA device 0"), "%s", msg);
  }
  bad.c = NULL;
  allocated = (float *)&g;
  st = precis_emulate_device("bf16", &bad, &allocated, NULL);
  CHECK(st != PRECIS_OK && allocated == NULL);
  precis_device_free(0, NULL);
}

TEST(quantize_operands) {
  float x[2 * 32];
  for (int i = 0; i < 64; i++) x[i] = (float)(i - 20) * 0.25f;
  precis_quantized *q = NULL;
  CHECK_OK(precis_quantize_operand("a=e4m3@tensor", x, 1, 2, 32, &q));
  CHECK(q && precis_quantized_is_scaled(q) && precis_quantized_side(q) == 'a');
  CHECK_STR(precis_quantized_operand(q), "e4m3@tensor");
  int64_t mats, rows, cols;
  const float *scales = precis_quantized_scales(q, &mats, &rows, &cols);
  CHECK(scales && mats == 1 && rows == 1 && cols == 1);
  CHECK(scales[0] == 43.0f / 4 / 448.0f); /* amax 10.75 */
  CHECK(precis_quantized_codes(q) && !precis_quantized_zero_points(q) && !precis_quantized_tensor_scales(q));
  CHECK(precis_quantized_values(q)[63] == 10.75f);
  precis_quantized_free(q);
  CHECK_OK(precis_quantize_operand("b=u4@k16:asym", x, 1, 32, 2, &q));
  CHECK(precis_quantized_zero_points(q) != NULL && precis_quantized_side(q) == 'b');
  precis_quantized_free(q);
  CHECK_OK(precis_quantize_operand("e2m1@nv", x, 2, 1, 32, &q));
  CHECK(precis_quantized_tensor_scales(q) && precis_quantized_scale_codes(q));
  precis_quantized_free(q);
  CHECK_OK(precis_quantize_operand("b=bf16", x, 1, 2, 32, &q));
  CHECK(!precis_quantized_is_scaled(q) && !precis_quantized_codes(q) && precis_quantized_values(q)[0] == -5.0f);
  precis_quantized_free(q);
  q = (precis_quantized *)1;
  CHECK_EQ_INT(precis_quantize_operand("b=e4m3@row", x, 1, 2, 32, &q), PRECIS_E_USAGE);
  CHECK(q == NULL && strstr(precis_last_error(), "b=e4m3@row") != NULL);
  CHECK_EQ_INT(precis_quantize_operand("a=bf16,b=bf16", x, 1, 2, 32, &q), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_quantize_operand("a=e4m3", x, 1, 0, 32, &q), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_quantize_operand("a=e4m3", NULL, 1, 2, 32, &q), PRECIS_E_USAGE);
  precis_quantized_free(NULL);
}

TEST(datasets_and_reports_refuse_what_is_missing) {
  precis_data *ds = (precis_data *)1;
  CHECK(precis_data_open("/nonexistent/precis-test.h5", &ds) != PRECIS_OK);
  CHECK(ds == NULL && strstr(precis_last_error(), "precis-test.h5") != NULL);
  precis_results *r = (precis_results *)1;
  CHECK(precis_results_read("/nonexistent/report.json", &r) != PRECIS_OK);
  CHECK(r == NULL && strstr(precis_last_error(), "/nonexistent/report.json") != NULL);
  precis_run_options o = {0};
  int code = 0;
  CHECK_EQ_INT(precis_run(&o, &r, &code, NULL), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "output_dir") != NULL);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* gen through the CLI function, then a run and its report read back; a bad criterion is the
 * command's own refusal (exit 2) with its message. */
TEST(run_and_read_back) {
  char dir[] = "/tmp/precis-test-api-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char suite[256], data[256], out[256];
  snprintf(suite, sizeof suite, "%s/s.yaml", dir);
  snprintf(data, sizeof data, "%s/d.h5", dir);
  snprintf(out, sizeof out, "%s/report", dir);
  FILE *f = fopen(suite, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("workloads:\n  - name: w\n    m: 5\n    n: 6\n    k: 7\n    batch: 2\n", f);
  fclose(f);
  char prog[] = "precis", gen[] = "gen", o[] = "-o";
  char *g[] = {prog, gen, suite, o, data, NULL};
  CHECK_EQ_INT(precis_main(5, g), 0);
  precis_data *ds = NULL;
  CHECK_OK(precis_data_open(data, &ds));
  if (ds) {
    CHECK_EQ_INT(precis_data_workload_count(ds), 1);
    precis_workload_desc w;
    CHECK_OK(precis_data_workload(ds, 0, &w));
    CHECK(strcmp(w.name, "w") == 0 && w.m == 5 && w.n == 6 && w.k == 7 && w.batch == 2 && !w.b_batched);
    precis_arrays *arr = NULL;
    CHECK_OK(precis_data_load(ds, 0, &arr));
    precis_dtype t;
    int64_t shape[3];
    int ndim;
    CHECK(precis_arrays_get(arr, "a", &t, shape, &ndim) && ndim == 3 && shape[2] == 7 && t == PRECIS_DTYPE_F32);
    CHECK(precis_arrays_get(arr, "calib/a", &t, shape, &ndim) == NULL);
    precis_arrays_free(arr);
    precis_data_close(ds);
  }
  const char *extra[] = {"--max-time-ms", "1", "--min-samples", "1"};
  precis_run_options ro = {.dataset = data, .output_dir = out, .recipes = "bf16,int8", .backend = "cpu",
                           .extra_args = extra, .n_extra_args = 4};
  precis_results *r = NULL;
  int code = -1;
  char *messages = NULL;
  CHECK_OK(precis_run(&ro, &r, &code, &messages));
  CHECK_EQ_INT(code, 0);
  CHECK(messages != NULL && r != NULL);
  if (r) {
    CHECK_EQ_INT(precis_results_row_count(r), 2);
    CHECK(precis_results_complete(r) && strstr(precis_results_json(r), "\"rows\"") != NULL);
    precis_result_row row;
    CHECK_OK(precis_results_row(r, 1, &row));
    CHECK(strcmp(row.recipe, "int8") == 0 && strcmp(row.status, "ok") == 0 && row.rel_fro_worst > 0 &&
          row.median_ms > 0);
    CHECK_EQ_INT(precis_results_row(r, 2, &row), PRECIS_E_USAGE);
  }
  precis_results_free(r);
  precis_free(messages);
  const char *bad[] = {"rel_fro <="};
  ro.require = bad, ro.n_require = 1, ro.force = 1;
  r = NULL;
  CHECK_EQ_INT(precis_run(&ro, &r, &code, NULL), PRECIS_E_USAGE);
  CHECK_EQ_INT(code, 2);
  CHECK(r == NULL && strstr(precis_last_error(), "rel_fro <=") != NULL);
  nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TEST(the_cli_as_a_function) {
  char prog[] = "precis", version[] = "--version", bogus[] = "bogus", run[] = "run", opt[] = "-hx", help[] = "-h";
  char *v[] = {prog, version, NULL}, *b[] = {prog, bogus, NULL}, *r[] = {prog, run, opt, NULL};
  char *h[] = {prog, run, help, NULL};
  CHECK_EQ_INT(precis_main(2, v), 0);
  CHECK_EQ_INT(precis_main(2, b), 2);
  /* A parse that stops inside a cluster of short options, then another command: getopt starts afresh. */
  CHECK_EQ_INT(precis_main(3, r), 0);
  CHECK_EQ_INT(precis_main(3, h), 0);
  CHECK_EQ_INT(precis_main(2, v), 0);
}

TEST(emulate_weights_as_held) {
  /* B given as W [n, k] (b_transposed): the bits of B itself, float64 inputs included; the bytes
   * precis_emulate_b_bytes states: int8's codes and floats (5 per weight), a head's a block of
   * 16 MiB of W (at least 64 columns), fp32's rounded copy whole; refusals name the argument. */
  enum { S = 2, M = 3, K = 7, N = 5 };
  float a[S * M * K], b[K * N], w[N * K], c[S * M * N], c_w[S * M * N];
  double w64[N * K], b64[K * N], d[S * M * N], d_w[S * M * N];
  for (int i = 0; i < S * M * K; i++) a[i] = (float)((i * 37) % 23 - 11) * 0.37f;
  for (int p = 0; p < K; p++)
    for (int j = 0; j < N; j++) b[p * N + j] = w[j * K + p] = (float)((p * 13 + j * 7) % 17 - 8) * 0.61f;
  for (int i = 0; i < K * N; i++) b64[i] = (double)b[i] + 0x1p-40, w64[(i % N) * K + i / N] = b64[i];
  precis_gemm g = {.batch = S, .m = M, .n = N, .k = K, .a = a, .a_dtype = PRECIS_DTYPE_F32, .b = b,
                   .b_dtype = PRECIS_DTYPE_F32};
  precis_gemm gw = g;
  gw.b = w, gw.b_transposed = 1;
  static const char *recipes[] = {"int8", "bf16", "fp32", "fp8", "w4a16", "bf16x3"};
  for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
    CHECK_OK(precis_emulate(recipes[r], &g, c, PRECIS_DTYPE_F32, NULL));
    CHECK_OK(precis_emulate(recipes[r], &gw, c_w, PRECIS_DTYPE_F32, NULL));
    CHECK_MSG(memcmp(c, c_w, sizeof c) == 0, "%s: b_transposed changed the output", recipes[r]);
  }
  precis_gemm g64 = g, gw64 = gw;
  g64.b = b64, g64.b_dtype = PRECIS_DTYPE_F64, gw64.b = w64, gw64.b_dtype = PRECIS_DTYPE_F64;
  CHECK_OK(precis_emulate("fp64", &g64, d, PRECIS_DTYPE_F64, NULL));
  CHECK_OK(precis_emulate("fp64", &gw64, d_w, PRECIS_DTYPE_F64, NULL));
  CHECK(memcmp(d, d_w, sizeof d) == 0);
  int64_t bytes = 0;
  CHECK_OK(precis_emulate_b_bytes("int8", 576, 1536, NULL, &bytes));
  CHECK(bytes == 576LL * 1536 * 5);
  CHECK_OK(precis_emulate_b_bytes("int8", 576, 49152, NULL, &bytes));
  CHECK(bytes == 576LL * 7232 * 5); /* 16 MiB / (576 * 4) = 7281 columns, a multiple of 64 below */
  CHECK_OK(precis_emulate_b_bytes("fp32", 576, 49152, NULL, &bytes));
  CHECK(bytes == 576LL * 49152 * 4);
  CHECK_EQ_INT(precis_emulate_b_bytes("nope", 5, 5, NULL, &bytes), PRECIS_E_USAGE);
  CHECK_EQ_INT(precis_emulate_b_bytes("int8", 0, 5, NULL, &bytes), PRECIS_E_USAGE);
  float ao[S * M * K], bo[K * N], alpha;
  CHECK_EQ_INT(precis_emulate_operands("bf16", &gw, ao, bo, &alpha), PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "b_transposed") != NULL);
}

RUN_TESTS(T(status_and_version), T(specs_and_presets), T(emulate_exact_cases), T(emulate_weights_as_held), T(emulate_operands),
          T(emulate_device_refusals),
          T(emulate_refuses_bad_arguments),
          T(quantize_operands), T(datasets_and_reports_refuse_what_is_missing),
          T(run_and_read_back), T(the_cli_as_a_function))
