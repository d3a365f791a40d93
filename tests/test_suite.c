/* Suites: YAML parsing, error messages (file, line, key), presets, --seed/--tokens edits. */
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "harness.h"
#include "data/suite.h"

static precis_status parse(const char *text, precis_suite *s) {
  return precis_suite_parse(text, strlen(text), "t.yaml", ".", s);
}

/* Parses text, expects failure whose message contains every fragment given. */
static void expect_error(const char *text, const char *fragment1, const char *fragment2) {
  precis_suite s;
  precis_status st = parse(text, &s);
  CHECK_MSG(st == PRECIS_E_INPUT, "expected an input error for:\n%s", text);
  if (st == PRECIS_OK) {
    precis_suite_free(&s);
    return;
  }
  const char *msg = precis_last_error();
  CHECK_MSG(strstr(msg, fragment1) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment1);
  if (fragment2) CHECK_MSG(strstr(msg, fragment2) != NULL, "message \"%s\" lacks \"%s\"", msg, fragment2);
}

TEST(parses_every_field) {
  const char *text = "seed: 42\n"
                     "description: hello\n"
                     "workloads:\n"
                     "  - name: w1\n"
                     "    m: 3\n"
                     "    n: 4\n"
                     "    k: 5\n"
                     "    batch: 2\n"
                     "    calib: 6\n"
                     "    b_batched: true\n"
                     "    seed: 9\n"
                     "    description: \"first\"\n"
                     "    a: {dist: outlier_channels, fraction: 0.25, lo: 7, hi: 8}\n"
                     "    b: relu\n"
                     "  - name: w2\n"
                     "    m: 1\n"
                     "    n: 1\n"
                     "    k: 1\n"
                     "    a:\n"
                     "      dist: file\n"
                     "      path: x.safetensors\n"
                     "      tensor: layer.weight\n"
                     "      transpose: true\n";
  precis_suite s;
  CHECK_OK(parse(text, &s));
  CHECK_EQ_INT(s.seed, 42);
  CHECK_STR(s.description, "hello");
  CHECK_EQ_INT(s.n_workloads, 2);
  if (s.n_workloads == 2) {
    precis_suite_workload *w = &s.workloads[0];
    CHECK_STR(w->name, "w1");
    CHECK_EQ_INT(w->m, 3);
    CHECK_EQ_INT(w->n, 4);
    CHECK_EQ_INT(w->k, 5);
    CHECK_EQ_INT(w->batch, 2);
    CHECK_EQ_INT(w->calib, 6);
    CHECK(w->b_batched);
    CHECK(w->has_seed && w->seed == 9);
    CHECK_STR(w->description, "first");
    CHECK_EQ_INT(w->a.kind, PRECIS_DIST_OUTLIER_CHANNELS);
    CHECK_NEAR(w->a.params[0], 0.25, 0);
    CHECK_NEAR(w->a.params[1], 7, 0);
    CHECK_NEAR(w->a.params[2], 8, 0);
    CHECK_NEAR(w->a.params[3], 1, 0); /* default std */
    CHECK_EQ_INT(w->b.kind, PRECIS_DIST_RELU);
    CHECK_EQ_INT(w->line, 4);
    w = &s.workloads[1];
    CHECK_EQ_INT(w->batch, 1);
    CHECK_EQ_INT(w->calib, 0);
    CHECK(!w->b_batched && !w->has_seed);
    CHECK_EQ_INT(w->a.kind, PRECIS_DIST_FILE);
    CHECK_STR(w->a.path, "x.safetensors");
    CHECK_STR(w->a.object, "layer.weight");
    CHECK(w->a.transpose);
    CHECK_EQ_INT(w->b.kind, PRECIS_DIST_NORMAL);
    char *desc = precis_dist_describe(&s.workloads[0].a);
    CHECK_STR(desc, "outlier_channels(fraction=0.25, lo=7, hi=8, std=1)");
    free(desc);
    CHECK_STR(s.text, text);
  }
  precis_suite_free(&s);
}

TEST(errors_name_line_and_key) {
  expect_error("workloads:\n  - name: a\n    m: 1\n    n: 1\n    k: 1\n    colour: red\n", "t.yaml:6:5", "unknown key \"colour\"");
  expect_error("workloads:\n  - name: a\n    m: -3\n    n: 1\n    k: 1\n", "t.yaml:3:8", "expected a positive integer, found -3");
  expect_error("workloads:\n  - name: a\n    m: 0\n    n: 1\n    k: 1\n", "m: expected a positive integer", NULL);
  expect_error("workloads:\n  - name: a\n    m: \"16\"\n    n: 1\n    k: 1\n", "m: expected an integer", NULL);
  expect_error("workloads:\n  - name: a\n    m: [1]\n    n: 1\n    k: 1\n", "expected an integer", NULL);
  expect_error("workloads:\n  - name: a\n    m: 1.5\n    n: 1\n    k: 1\n", "expected an integer, found \"1.5\"", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1}\n  - {name: a, m: 1, n: 1, k: 1}\n", "t.yaml:3",
               "duplicate workload name \"a\" (first at line 2)");
  expect_error("workloads:\n  - {name: a, m: 1, m: 2, n: 1, k: 1}\n", "duplicate key \"m\"", NULL);
  expect_error("workloads:\n  - {name: x/y, m: 1, n: 1, k: 1}\n", "contains '/'", NULL);
  expect_error("workloads:\n  - {name: '..', m: 1, n: 1, k: 1}\n", "dots only", NULL);
  expect_error("workloads:\n  - {name: a, n: 1, k: 1}\n", "missing key \"m\"", NULL);
  expect_error("workloads:\n  - {m: 1, n: 1, k: 1}\n", "missing key \"name\"", NULL);
  expect_error("workloads: []\n", "empty list", NULL);
  expect_error("seed: 1\n", "missing key \"workloads\"", NULL);
  expect_error("", "empty suite", NULL);
  expect_error("seed: -1\nworkloads:\n  - {name: a, m: 1, n: 1, k: 1}\n", "seed: expected a non-negative integer", NULL);
  expect_error("sede: 1\nworkloads:\n  - {name: a, m: 1, n: 1, k: 1}\n", "t.yaml:1:1", "unknown key \"sede\"");
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: gaussian}\n", "unknown distribution \"gaussian\"", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: {dist: normal, std: 0}}\n", "std must be > 0", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: {dist: normal, sd: 1}}\n", "unknown key \"sd\"", "mean, std");
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: {dist: uniform, lo: 2, hi: 1}}\n", "lo < hi", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: {dist: integers, lo: 0.5, hi: 1}}\n", "must be integers", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: {std: 1}}\n", "missing key \"dist\"", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, a: file}\n", "file needs a mapping", NULL);
  /* No object is valid (a .npy holds one array; the reader asks for a name when the file needs one),
   * two are not. */
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, b: {dist: file, path: x.h5, dataset: /a, array: a}}\n",
               "give one of dataset (HDF5), tensor (safetensors) or array", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1, b_batched: maybe}\n", "expected true or false", NULL);
  expect_error("workloads:\n  - name: a\n   m: 1\n", "t.yaml:", "invalid YAML");
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 1}\n---\nworkloads: []\n", "more than one YAML document", NULL);
  expect_error("workloads:\n  - {name: a, m: 1, n: 1, k: 99999999999}\n", "k: expected an integer in", NULL);
}

TEST(tokens_give_m) {
  precis_suite s;
  CHECK_OK(parse("tokens: 32\nworkloads:\n  - {name: a, n: 2, k: 3}\n  - {name: b, m: 5, n: 2, k: 3}\n", &s));
  if (s.n_workloads == 2) {
    CHECK_EQ_INT(s.workloads[0].m, 32);
    CHECK_EQ_INT(s.workloads[1].m, 5);
  }
  int64_t tokens = 7;
  uint64_t seed = 123;
  CHECK_OK(precis_suite_override(&s, &seed, &tokens));
  CHECK_EQ_INT(s.seed, 123);
  CHECK_EQ_INT(s.tokens, 7);
  if (s.n_workloads == 2) CHECK_EQ_INT(s.workloads[0].m, 7);
  CHECK(strstr(s.text, "tokens: 7\n") != NULL);
  CHECK(strstr(s.text, "seed: 123\n") != NULL);
  CHECK(strstr(s.text, "tokens: 32") == NULL);
  precis_suite_free(&s);

  /* A suite without tokens/seed lines gets them added; comments above are kept. */
  CHECK_OK(parse("# comment\nworkloads:\n  - {name: a, m: 1, n: 2, k: 3}\n", &s));
  seed = 5;
  CHECK_OK(precis_suite_override(&s, &seed, NULL));
  CHECK_EQ_INT(s.seed, 5);
  CHECK(strncmp(s.text, "# comment\nseed: 5\nworkloads:", strlen("# comment\nseed: 5\nworkloads:")) == 0);
  precis_suite_free(&s);
}

TEST(presets_are_the_shipped_files) {
  const char *source = getenv("PRECIS_SOURCE_DIR");
  const char *expected[] = {"default", "llama2-7b", "deepbench", "square-sweep", "ozaki-phi"};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    precis_suite s;
    CHECK_OK(precis_suite_load_preset(expected[i], &s));
    CHECK_MSG(s.n_workloads > 0, "preset %s has workloads", expected[i]);
    if (source && s.text) {
      char path[1024];
      snprintf(path, sizeof path, "%s/datasets/%s.yaml", source, expected[i]);
      char *text = NULL;
      size_t len = 0;
      CHECK_OK(precis_read_file(path, &text, &len));
      CHECK_MSG(text && strcmp(text, s.text) == 0, "built-in preset %s differs from %s (re-run cmake)", expected[i], path);
      free(text);
    }
    precis_suite_free(&s);
  }
  precis_suite s;
  CHECK(precis_suite_load_preset("nope", &s) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "default") != NULL);

  /* The default preset holds the mix issue 4 asks for. */
  CHECK_OK(precis_suite_load_preset("default", &s));
  bool square[3] = {false, false, false}, llm = false, decode = false, long_k = false, integers = false;
  for (size_t i = 0; i < s.n_workloads; i++) {
    const precis_suite_workload *w = &s.workloads[i];
    for (int j = 0; j < 3; j++)
      if (w->m == (256 << j) && w->n == w->m && w->k == w->m) square[j] = true;
    if (w->m == 128 && w->n == 4096 && w->k == 4096 && w->a.kind == PRECIS_DIST_OUTLIER_CHANNELS && w->calib > 0) llm = true;
    if (w->m == 1) decode = true;
    if (w->k == 16384) long_k = true;
    if (w->a.kind == PRECIS_DIST_INTEGERS && w->b.kind == PRECIS_DIST_INTEGERS) {
      /* exact in every float recipe: |c| <= k * max|a| * max|b| <= 256 (bf16 output) */
      double bound = (double)w->k * fmax(fabs(w->a.params[0]), fabs(w->a.params[1])) *
                     fmax(fabs(w->b.params[0]), fabs(w->b.params[1]));
      integers = bound <= 256;
    }
  }
  CHECK(square[0] && square[1] && square[2]);
  CHECK(llm && decode && long_k && integers);
  precis_suite_free(&s);

  /* --tokens changes llama2-7b's m everywhere. */
  CHECK_OK(precis_suite_load_preset("llama2-7b", &s));
  int64_t tokens = 64;
  CHECK_OK(precis_suite_override(&s, NULL, &tokens));
  bool all = s.n_workloads == 7;
  for (size_t i = 0; i < s.n_workloads; i++) all = all && s.workloads[i].m == 64;
  CHECK(all);
  precis_suite_free(&s);
}

TEST(file_errors) {
  precis_suite s;
  CHECK(precis_suite_load_file("/nonexistent/suite.yaml", &s) == PRECIS_E_INPUT);
  CHECK(strstr(precis_last_error(), "/nonexistent/suite.yaml") != NULL);
}

RUN_TESTS(T(parses_every_field), T(errors_name_line_and_key), T(tokens_give_m), T(presets_are_the_shipped_files),
          T(file_errors))
