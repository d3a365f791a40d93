/* precis grade: the BLAS-3 grading of a recipe (docs/high-precision.md, "BLAS-3 grading"), as
 * cuBLAS's grade_blas3 does it (NVIDIA CUDALibrarySamples, cuBLAS/Emulation/gemm_grading, after
 * Demmel et al., "How to grade the accuracy of an implementation of the BLAS", 2024): square
 * n x n x n products of uniform [0, 1) matrices, the largest componentwise error
 * |C - C_hat|_ij / (eps (|A||B|)_ij) per n, and the slope of log(error) over log(n) by least
 * squares; Grade A when the slope is <= 1. Each recipe runs through the cpu backend's own emulation
 * (precis_cpu_emulate, the bits of `precis run --backend cpu`), so any recipe spec grades. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "cli.h"
#include "data/generate.h"
#include "eval/backend.h"
#include "numerics/grading.h"

/* The recipes graded when --recipes is not given: FP64 and its emulations. ozaki-int8-8 keeps 56
 * bits (7 per slice), FP64's 53 and more; an Ozaki-II preset (ozaki2-int8-N) belongs here once it
 * exists. Any list of presets and specs is accepted by --recipes. */
#define GRADE_DEFAULT_RECIPES "fp64,ozaki-int8-8,ozaki2-int8-16"
#define GRADE_DEFAULT_SIZES "16..1024"
#define GRADE_MAX_SIZES 32
#define GRADE_MAX_N 16384

static const char usage_text[] =
    "usage: precis grade [--recipes LIST] [--n 16..1024] [--k square|K] [--trials T] [--seed S] [-o DIR] [--force]\n"
    "\n"
    "cuBLAS's BLAS-3 grading of each recipe (docs/high-precision.md, \"BLAS-3 grading\"): for every n, A and B\n"
    "are n x k matrices of uniform [0, 1) float64 values, C_hat = A.B by the recipe on the cpu backend, and\n"
    "the error is max_ij |C_hat - A.B|_ij / (eps (|A||B|)_ij), eps = 2^-52, against a double-double reference\n"
    "(the largest over --trials draws). The slope b of log(error) = a + b log(n), fitted by least squares over\n"
    "the sizes with a nonzero error, grades the recipe: Grade A when b <= 1 (errors grow at most linearly).\n"
    "\n"
    "options:\n"
    "  --recipes LIST        recipes to grade (default " GRADE_DEFAULT_RECIPES "); any presets and specs:\n"
    "                        " PRECIS_CLI_RECIPES_HELP
    "  --n SIZES             A..B (every power of two times A up to B) or a comma list, at least two distinct\n"
    "                        sizes (default " GRADE_DEFAULT_SIZES ")\n"
    "  --k square|K          inner dimension: square (k = n, the definition; default) or a fixed K\n"
    "  --trials T            random draws per size; the error is the largest over them (default 1)\n"
    "  --seed S              seed of the random matrices (default 42)\n"
    "  -o, --output DIR      also write DIR/grade.json and DIR/grade.md\n"
    "  --force               replace grade.json and grade.md already in DIR\n"
    "\n"
    "Exit codes: 0 graded (whatever the grades), 2 bad usage or a recipe the cpu backend cannot run,\n"
    "1 a write or allocation failed.\n";

typedef struct grade_result {
  const precis_recipe *recipe;
  double *max_error; /* per size: max over trials of max_ij error / eps */
  precis_grade_fit fit;
} grade_result;

/* splitmix64: a small, seedable generator; the matrices need not match any other tool's. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Uniform [0, 1) with 53 random bits, as std::uniform_real_distribution<double>(0, 1). */
static double uniform01(uint64_t *state) { return (double)(next_random(state) >> 11) * 0x1.0p-53; }

static bool parse_positive(const char *text, long max, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < 1 || v > max) return false;
  *out = v;
  return true;
}

/* "A..B" (A, 2A, 4A, ... up to B) or "n1,n2,...". Sizes are kept in the order given. */
static bool parse_sizes(const char *text, long *sizes, size_t *count) {
  *count = 0;
  const char *dots = strstr(text, "..");
  if (dots) {
    char first[32];
    size_t len = (size_t)(dots - text);
    if (len == 0 || len >= sizeof first) return false;
    memcpy(first, text, len);
    first[len] = '\0';
    long a, b;
    if (!parse_positive(first, GRADE_MAX_N, &a) || !parse_positive(dots + 2, GRADE_MAX_N, &b) || b < a) return false;
    for (long n = a; n <= b && *count < GRADE_MAX_SIZES; n *= 2) sizes[(*count)++] = n;
    return true;
  }
  char *copy = precis_strdup(text);
  if (!copy) return false;
  bool ok = true;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok && ok; tok = strtok_r(NULL, ",", &save)) {
    long v;
    ok = *count < GRADE_MAX_SIZES && parse_positive(tok, GRADE_MAX_N, &v);
    if (ok) sizes[(*count)++] = v;
  }
  free(copy);
  return ok && *count > 0;
}

/* The largest error / eps of one recipe on one draw. Returns false (and says why) when the cpu
 * backend did not run the recipe. */
static bool measure(const precis_recipe *recipe, const precis_workload_info *w, const precis_workload_data *d,
                    const double *c_hi, const double *c_lo, const double *ab_abs, size_t count, double *max_error) {
  precis_case_output out;
  precis_case_output_init(&out);
  bool ok = false;
  precis_status st = precis_cpu_emulate(&recipe->spec, w, d, &out);
  if (st != PRECIS_OK) {
    fprintf(stderr, "precis grade: %s: %s\n", recipe->name, precis_last_error());
    goto done;
  }
  if (out.status != PRECIS_ROW_OK || !out.c) {
    fprintf(stderr, "precis grade: %s: the cpu backend does not run it: %s\n", recipe->name,
            out.reason[0] ? out.reason : "no output");
    goto done;
  }
  double worst = 0;
  for (size_t i = 0; i < count; i++) {
    double c = out.c64 ? out.c64[i] : (double)out.c[i];
    double e = fabs((c - c_hi[i]) - c_lo[i]) / DBL_EPSILON;
    if (ab_abs[i] > 0) e /= ab_abs[i];
    worst = precis_grade_worse(worst, e);
    if (isnan(worst)) break;
  }
  *max_error = worst;
  ok = true;
done:
  precis_case_output_free(&out);
  return ok;
}

static cJSON *results_json(const grade_result *results, size_t n_recipes, const long *sizes, size_t n_sizes,
                           long k_fixed, long trials, uint64_t seed) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "definition",
                          "max_ij |C_hat - A.B|_ij / (eps (|A||B|)_ij), eps = 2^-52, A and B uniform [0,1) float64, "
                          "double-double reference; slope of log(error) over log(n) by least squares over the sizes "
                          "with a nonzero error; Grade A when slope <= 1 (cuBLAS grade_blas3, Demmel et al. 2024)");
  cJSON_AddStringToObject(root, "backend", "cpu");
  if (k_fixed > 0) cJSON_AddNumberToObject(root, "k", (double)k_fixed);
  else cJSON_AddStringToObject(root, "k", "square");
  cJSON_AddNumberToObject(root, "trials", (double)trials);
  cJSON_AddNumberToObject(root, "seed", (double)seed);
  cJSON *list = cJSON_AddArrayToObject(root, "recipes");
  for (size_t r = 0; r < n_recipes; r++) {
    const grade_result *g = &results[r];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", g->recipe->name);
    cJSON_AddStringToObject(o, "spec", g->recipe->canonical);
    cJSON *points = cJSON_AddArrayToObject(o, "points");
    for (size_t s = 0; s < n_sizes; s++) {
      cJSON *p = cJSON_CreateObject();
      cJSON_AddNumberToObject(p, "n", (double)sizes[s]);
      cJSON_AddNumberToObject(p, "k", (double)(k_fixed > 0 ? k_fixed : sizes[s]));
      if (isfinite(g->max_error[s])) cJSON_AddNumberToObject(p, "max_error", g->max_error[s]);
      else cJSON_AddNullToObject(p, "max_error");
      cJSON_AddItemToArray(points, p);
    }
    if (isfinite(g->fit.slope)) cJSON_AddNumberToObject(o, "slope", g->fit.slope);
    else cJSON_AddNullToObject(o, "slope");
    cJSON_AddNumberToObject(o, "fitted_points", (double)g->fit.fitted);
    cJSON_AddStringToObject(o, "grade", precis_grade_name(g->fit.grade));
    cJSON_AddItemToArray(list, o);
  }
  return root;
}

static char *results_markdown(const grade_result *results, size_t n_recipes, const long *sizes, size_t n_sizes,
                              long k_fixed) {
  size_t cap = 4096 + n_recipes * (512 + n_sizes * 96), len = 0;
  char *text = malloc(cap);
  if (!text) return NULL;
#define ADD(...) len += (size_t)snprintf(text + len, len < cap ? cap - len : 0, __VA_ARGS__)
  ADD("# BLAS-3 grading (precis grade)\n\n"
      "Error: max_ij |C_hat - A.B|_ij / (eps (|A||B|)_ij), eps = 2^-52, A and B uniform [0, 1), double-double "
      "reference; slope of log(error) over log(n) by least squares; Grade A when the slope is <= 1 "
      "(docs/high-precision.md).\n\n");
  for (size_t r = 0; r < n_recipes; r++) {
    const grade_result *g = &results[r];
    ADD("## %s\n\n`%s`\n\n| n | k | max error / eps |\n|---|---|---|\n", g->recipe->name, g->recipe->canonical);
    for (size_t s = 0; s < n_sizes; s++)
      ADD("| %ld | %ld | %.6g |\n", sizes[s], k_fixed > 0 ? k_fixed : sizes[s], g->max_error[s]);
    if (isfinite(g->fit.slope)) ADD("\nslope %.4f, grade %s\n\n", g->fit.slope, precis_grade_name(g->fit.grade));
    else ADD("\nslope -, grade %s\n\n", precis_grade_name(g->fit.grade));
  }
#undef ADD
  if (len >= cap) text[cap - 1] = '\0';
  return text;
}

static precis_status write_outputs(const char *dir, bool force, const grade_result *results, size_t n_recipes,
                                   const long *sizes, size_t n_sizes, long k_fixed, long trials, uint64_t seed) {
  char *json_path = precis_asprintf("%s/grade.json", dir), *md_path = precis_asprintf("%s/grade.md", dir);
  char *json_text = NULL, *md_text = NULL;
  cJSON *root = NULL;
  precis_status st = PRECIS_OK;
  if (!json_path || !md_path) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if ((st = precis_mkdirs(dir)) != PRECIS_OK) goto done;
  /* Refuse before writing either, so that a refusal leaves DIR as it was. */
  if (!force && (precis_path_exists(json_path) || precis_path_exists(md_path))) {
    st = precis_fail(PRECIS_E_EXISTS, "%s: grade.json or grade.md exists (give --force to replace them)", dir);
    goto done;
  }
  root = results_json(results, n_recipes, sizes, n_sizes, k_fixed, trials, seed);
  json_text = root ? cJSON_Print(root) : NULL;
  md_text = results_markdown(results, n_recipes, sizes, n_sizes, k_fixed);
  if (!json_text || !md_text) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory writing the grading");
    goto done;
  }
  size_t jl = strlen(json_text);
  char *with_newline = realloc(json_text, jl + 2);
  if (!with_newline) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory writing the grading");
    goto done;
  }
  json_text = with_newline;
  memcpy(json_text + jl, "\n", 2);
  if ((st = precis_atomic_write_text(json_path, json_text, true)) != PRECIS_OK) goto done;
  st = precis_atomic_write_text(md_path, md_text, true);
done:
  cJSON_Delete(root);
  free(json_text);
  free(md_text);
  free(json_path);
  free(md_path);
  return st;
}

int precis_cmd_grade(int argc, char **argv) {
  enum { OPT_RECIPES = 1000, OPT_N, OPT_K, OPT_TRIALS, OPT_SEED, OPT_FORCE };
  static const struct option long_options[] = {
      {"recipes", required_argument, 0, OPT_RECIPES}, {"n", required_argument, 0, OPT_N},
      {"k", required_argument, 0, OPT_K},             {"trials", required_argument, 0, OPT_TRIALS},
      {"seed", required_argument, 0, OPT_SEED},       {"output", required_argument, 0, 'o'},
      {"force", no_argument, 0, OPT_FORCE},           {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char *recipes_text = GRADE_DEFAULT_RECIPES, *sizes_text = GRADE_DEFAULT_SIZES, *out_dir = NULL;
  long sizes[GRADE_MAX_SIZES], k_fixed = 0, trials = 1;
  size_t n_sizes = 0;
  uint64_t seed = 42;
  bool force = false;
  precis_recipe_list recipes;
  memset(&recipes, 0, sizeof recipes);
  grade_result *results = NULL;
  double *a = NULL, *b = NULL, *c_hi = NULL, *c_lo = NULL, *ab_abs = NULL;
  float *a32 = NULL, *b32 = NULL;
  int rc = 2, opt;
  optind = 1;
  opterr = 0;
  while ((opt = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
    switch (opt) {
    case 'h': fputs(usage_text, stdout); return 0;
    case OPT_RECIPES: recipes_text = optarg; break;
    case OPT_N: sizes_text = optarg; break;
    case OPT_K:
      if (strcmp(optarg, "square") != 0 && !parse_positive(optarg, GRADE_MAX_N, &k_fixed)) {
        fprintf(stderr, "precis grade: --k \"%s\": expected square or an integer from 1 to %d\n", optarg, GRADE_MAX_N);
        return 2;
      }
      break;
    case OPT_TRIALS:
      if (!parse_positive(optarg, 1000, &trials)) {
        fprintf(stderr, "precis grade: --trials \"%s\": expected an integer from 1 to 1000\n", optarg);
        return 2;
      }
      break;
    case OPT_SEED: {
      char *end = NULL;
      errno = 0;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (errno || end == optarg || *end || optarg[0] == '-') {
        fprintf(stderr, "precis grade: --seed \"%s\": expected a non-negative integer\n", optarg);
        return 2;
      }
      seed = (uint64_t)v;
      break;
    }
    case 'o': out_dir = optarg; break;
    case OPT_FORCE: force = true; break;
    case ':': fprintf(stderr, "precis grade: %s needs a value\n", argv[optind - 1]); return 2;
    default:
      fprintf(stderr, "precis grade: unknown option \"%s\" (see precis grade --help)\n", argv[optind - 1]);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "precis grade: unexpected argument \"%s\" (see precis grade --help)\n", argv[optind]);
    return 2;
  }
  if (!parse_sizes(sizes_text, sizes, &n_sizes)) {
    fprintf(stderr,
            "precis grade: --n \"%s\": expected A..B (powers of two times A up to B) or a comma list of sizes from 1 "
            "to %d\n",
            sizes_text, GRADE_MAX_N);
    return 2;
  }
  bool distinct = false;
  for (size_t s = 1; s < n_sizes; s++) distinct = distinct || sizes[s] != sizes[0];
  if (!distinct) {
    fprintf(stderr, "precis grade: --n \"%s\": the slope needs at least two distinct sizes\n", sizes_text);
    return 2;
  }
  if (!precis_cli_parse_recipes("grade", recipes_text, false, &recipes)) goto done;
  if (recipes.count == 0) {
    fprintf(stderr, "precis grade: --recipes \"%s\": no recipes\n", recipes_text);
    goto done;
  }

  rc = 1;
  results = calloc(recipes.count, sizeof *results);
  if (!results) goto oom;
  for (size_t r = 0; r < recipes.count; r++) {
    results[r].recipe = &recipes.items[r];
    results[r].max_error = calloc(n_sizes, sizeof(double));
    if (!results[r].max_error) goto oom;
  }
  long n_max = 0, k_max = 0;
  for (size_t s = 0; s < n_sizes; s++) {
    n_max = sizes[s] > n_max ? sizes[s] : n_max;
    long k = k_fixed > 0 ? k_fixed : sizes[s];
    k_max = k > k_max ? k : k_max;
  }
  size_t ak = (size_t)n_max * (size_t)k_max, cc = (size_t)n_max * (size_t)n_max;
  a = malloc(ak * sizeof *a), b = malloc(ak * sizeof *b), a32 = malloc(ak * sizeof *a32), b32 = malloc(ak * sizeof *b32);
  c_hi = malloc(cc * sizeof *c_hi), c_lo = malloc(cc * sizeof *c_lo), ab_abs = malloc(cc * sizeof *ab_abs);
  if (!a || !b || !a32 || !b32 || !c_hi || !c_lo || !ab_abs) goto oom;

  uint64_t state = seed;
  for (size_t s = 0; s < n_sizes; s++) {
    long n = sizes[s], k = k_fixed > 0 ? k_fixed : n;
    size_t a_count = (size_t)n * (size_t)k, c_count = (size_t)n * (size_t)n;
    for (long t = 0; t < trials; t++) {
      for (size_t i = 0; i < a_count; i++) a[i] = uniform01(&state), a32[i] = (float)a[i];
      for (size_t i = 0; i < a_count; i++) b[i] = uniform01(&state), b32[i] = (float)b[i];
      precis_status st = precis_reference_compute_dd_f64(a, b, 1, n, n, k, false, c_hi, c_lo);
      /* |A||B| of nonnegative inputs is A.B: the reference pair's sum, to float64. */
      if (st == PRECIS_OK)
        for (size_t i = 0; i < c_count; i++) ab_abs[i] = c_hi[i] + c_lo[i];
      if (st != PRECIS_OK) {
        rc = precis_cli_report_error("grade", st);
        goto done;
      }
      precis_workload_info w;
      memset(&w, 0, sizeof w);
      w.name = (char *)"grade";
      w.kind = (char *)"gemm";
      w.description = w.a_dist = w.b_dist = w.reference = (char *)"";
      w.m = n, w.n = n, w.k = k, w.batch = 1;
      w.reference_precision = (char *)"double-double";
      w.reference_error_bound = precis_reference_dd_bound_f64(k);
      w.has_c_ref_lo = true;
      w.a_f64 = w.b_f64 = true;
      precis_workload_data d;
      memset(&d, 0, sizeof d);
      d.a = a32, d.b = b32, d.a64 = a, d.b64 = b;
      d.c_ref = c_hi, d.c_ref_lo = c_lo, d.ab_abs = ab_abs;
      for (size_t r = 0; r < recipes.count; r++) {
        double e = 0;
        if (!measure(&recipes.items[r], &w, &d, c_hi, c_lo, ab_abs, c_count, &e)) {
          rc = 2;
          goto done;
        }
        double *slot = &results[r].max_error[s];
        /* The largest over trials; a NaN of any trial, earlier or later, stays. */
        *slot = t == 0 ? e : precis_grade_worse(*slot, e);
      }
    }
  }

  for (size_t r = 0; r < recipes.count; r++) {
    grade_result *g = &results[r];
    precis_grade_errors(sizes, g->max_error, n_sizes, &g->fit);
    printf("%s  (%s)\n%8s %8s %16s\n", g->recipe->name, g->recipe->canonical, "n", "k", "max_error/eps");
    for (size_t s = 0; s < n_sizes; s++)
      printf("%8ld %8ld %16.9g\n", sizes[s], k_fixed > 0 ? k_fixed : sizes[s], g->max_error[s]);
    const char *grade = precis_grade_name(g->fit.grade);
    if (isfinite(g->fit.slope)) printf("slope %.6f over %zu sizes: grade %s\n\n", g->fit.slope, g->fit.fitted, grade);
    else printf("slope - over %zu sizes: grade %s\n\n", g->fit.fitted, grade);
  }
  if (out_dir) {
    precis_status st = write_outputs(out_dir, force, results, recipes.count, sizes, n_sizes, k_fixed, trials, seed);
    if (st != PRECIS_OK) {
      rc = precis_cli_report_error("grade", st);
      if (st == PRECIS_E_EXISTS) rc = 2;
      goto done;
    }
    printf("precis grade: wrote %s/grade.json and %s/grade.md\n", out_dir, out_dir);
  }
  rc = 0;
  goto done;
oom:
  fprintf(stderr, "precis grade: out of memory (sizes up to %ld)\n", sizes[n_sizes - 1]);
  rc = 1;
done:
  if (results)
    for (size_t r = 0; r < recipes.count; r++) free(results[r].max_error);
  free(results);
  free(a), free(b), free(a32), free(b32), free(c_hi), free(c_lo), free(ab_abs);
  precis_recipe_list_free(&recipes);
  return rc;
}
