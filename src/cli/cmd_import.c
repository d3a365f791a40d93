/* precis import: a dataset from the user's own matrices. The options become a one-workload suite
 * (YAML, recorded in the dataset's `suite` attribute) with `file` distributions, generated exactly
 * like precis gen does, so the references are computed the same way. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "cli.h"
#include "data/file_kind.h"
#include "base/fileio.h"
#include "data/generate.h"
#include "base/output_lock.h"
#include "report/results.h"
#include "data/suite.h"

#define IMPORT_SOURCE "precis import (its options as a suite)"

static void import_usage(FILE *out) {
  fprintf(out,
          "usage: precis import --b SOURCE [--a DIST|SOURCE] [options] -o OUT.h5\n"
          "       precis import --model PATH [options] -o OUT.h5   (every linear layer; --model x --help)\n\n"
          "Makes a one-workload dataset c = a.b from existing matrices, with float64 references computed as\n"
          "precis gen computes them. SOURCE is FILE:NAME, the file's kind read from its first bytes:\n"
          "  HDF5         FILE.h5:/path/to/dataset (any float or integer dataset, e.g. Keras weights;\n"
          "               the leading '/' may be left out)\n"
          "  safetensors  FILE.safetensors:tensor.name (F32, F16 or BF16; precis inspect FILE lists them)\n"
          "  NumPy        FILE.npy (one array, no :NAME) or FILE.npz:NAME (numpy.savez or savez_compressed);\n"
          "               float16, float32 or float64, C or Fortran order\n"
          "Values are stored as float32 (f16/bf16 widen exactly; float64 rounds to nearest).\n\n"
          "Convention: c = a.b with a [m, k] and b [k, n]. A PyTorch nn.Linear weight W is [out, in] and\n"
          "computes a.W^T, so import it with --transpose-b (a square W is accepted either way: precis\n"
          "warns when a square b comes without --transpose-b).\n\n"
          "options:\n"
          "  --b SOURCE        the weights b: a [k, n] matrix (or [batch, k, n] with --b-batched)\n"
          "  --transpose-b     SOURCE holds b transposed, [n, k] (a PyTorch nn.Linear weight)\n"
          "  --b-batched       SOURCE is [batch, k, n]: one b per sample\n"
          "  --a DIST          the activations a from a distribution: a name (normal, outlier_channels, ...)\n"
          "                    or a YAML mapping such as '{dist: normal, std: 0.5}' (default: normal);\n"
          "                    see datasets/default.yaml for every distribution and parameter\n"
          "  --a SOURCE        a from a file: [m, k] (repeated over the batch) or [samples, m, k]\n"
          "  --transpose-a     the a SOURCE holds each matrix transposed, [k, m]\n"
          "  --m M             rows of a when a comes from a distribution (default 16)\n"
          "  --batch B         held-out samples (default 1; with a [samples, m, k] file, samples - calib)\n"
          "  --calib S         calibration samples (default 0; from a distribution, or the file's samples\n"
          "                    after the held-out ones)\n"
          "  --name NAME       the workload's name (default: the tensor or dataset name)\n"
          "  --seed S          seed for a's distribution (default 0)\n"
          "  --compress        gzip every dataset\n"
          "  --force           replace OUT.h5 when it exists\n"
          "  -o, --output OUT  the dataset to write (required)\n"
          "  -q, --quiet       no progress on stderr\n\n"
          "example: precis import --b model.safetensors:model.layers.0.mlp.down_proj.weight --transpose-b \\\n"
          "           --a outlier_channels --m 128 -o down_proj.h5\n");
}

/* Splits "FILE:OBJECT" at the first ':' whose prefix names an existing file; a spec that is itself
 * an existing file (a .npy) has an empty OBJECT. */
static bool split_source(const char *spec, char **file, char **object) {
  if (precis_path_exists(spec)) {
    *file = precis_strdup(spec);
    *object = precis_strdup("");
    return *file && *object;
  }
  for (const char *colon = strchr(spec, ':'); colon; colon = strchr(colon + 1, ':')) {
    char *prefix = precis_asprintf("%.*s", (int)(colon - spec), spec);
    if (prefix && precis_path_exists(prefix) && colon[1]) {
      *file = prefix;
      *object = precis_strdup(colon + 1);
      return true;
    }
    free(prefix);
  }
  return false;
}


/* The suite's key for the object follows the file's kind (read from its first bytes). */
static char *file_dist_yaml(const char *file, const char *object, precis_file_kind kind, bool transpose) {
  const char *key = kind == PRECIS_FILE_HDF5 ? "dataset" : kind == PRECIS_FILE_NPZ ? "array" : "tensor";
  /* The readers find "name" for "/name" in a safetensors or .npz file; the suite spells it without. */
  bool strip = (kind == PRECIS_FILE_NPZ || kind == PRECIS_FILE_SAFETENSORS) && object[0] == '/';
  char *qf = precis_yaml_quote(file), *qo = precis_yaml_quote(strip ? object + 1 : object);
  char *text = !qf || !qo               ? NULL
               : kind == PRECIS_FILE_NPY ? precis_asprintf("{dist: file, path: %s%s}", qf, transpose ? ", transpose: true" : "")
                                         : precis_asprintf("{dist: file, path: %s, %s: %s%s}", qf, key, qo,
                                                           transpose ? ", transpose: true" : "");
  free(qf);
  free(qo);
  return text;
}

static bool parse_count(const char *text, int64_t lo, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (!text[0] || *end || errno || v < lo || v > INT32_MAX) return false;
  *out = v;
  return true;
}

int precis_cmd_import(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--model")) return precis_cmd_import_model(argc, argv);
  if (precis_cli_wants_help(argc, argv)) {
    import_usage(stdout);
    return 0;
  }
  const char *b_spec = NULL, *a_spec = NULL, *output = NULL, *name = NULL, *seed_text = "0";
  bool transpose_a = false, transpose_b = false, b_batched = false, compress = false, force = false, quiet = false;
  int64_t m = -1, batch = -1, calib = 0;
  const char *seen[32];
  size_t n_seen = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    /* Every option is single-valued: a second one would silently win over the first. */
    const char *canonical = !strcmp(arg, "-o") ? "--output" : !strcmp(arg, "-q") ? "--quiet" : arg;
    for (size_t j = 0; j < n_seen && arg[0] == '-'; j++)
      if (!strcmp(seen[j], canonical)) {
        fprintf(stderr, "precis import: %s given twice; give it once\n", arg);
        return 2;
      }
    if (arg[0] == '-' && n_seen < sizeof seen / sizeof seen[0]) seen[n_seen++] = canonical;
    bool takes_value = !strcmp(arg, "--b") || !strcmp(arg, "--a") || !strcmp(arg, "-o") || !strcmp(arg, "--output") ||
                       !strcmp(arg, "--m") || !strcmp(arg, "--batch") || !strcmp(arg, "--calib") || !strcmp(arg, "--name") ||
                       !strcmp(arg, "--seed");
    if (takes_value) {
      if (!value) {
        fprintf(stderr, "precis import: %s needs a value (see precis import --help)\n", arg);
        return 2;
      }
      i++;
      bool ok = true;
      if (!strcmp(arg, "--b")) b_spec = value;
      else if (!strcmp(arg, "--a")) a_spec = value;
      else if (!strcmp(arg, "--name")) name = value;
      else if (!strcmp(arg, "--seed")) seed_text = value, ok = value[0] >= '0' && value[0] <= '9' && strspn(value, "0123456789") == strlen(value);
      else if (!strcmp(arg, "--m")) ok = parse_count(value, 1, &m);
      else if (!strcmp(arg, "--batch")) ok = parse_count(value, 1, &batch);
      else if (!strcmp(arg, "--calib")) ok = parse_count(value, 0, &calib);
      else output = value;
      if (!ok) {
        fprintf(stderr, "precis import: %s: expected a %s integer, found \"%s\"\n", arg,
                !strcmp(arg, "--calib") || !strcmp(arg, "--seed") ? "non-negative" : "positive", value);
        return 2;
      }
    } else if (!strcmp(arg, "--transpose-a")) transpose_a = true;
    else if (!strcmp(arg, "--transpose-b")) transpose_b = true;
    else if (!strcmp(arg, "--b-batched")) b_batched = true;
    else if (!strcmp(arg, "--compress")) compress = true;
    else if (!strcmp(arg, "--force")) force = true;
    else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) quiet = true;
    else {
      fprintf(stderr, "precis import: unknown argument %s (see precis import --help)\n", arg);
      return 2;
    }
  }
  if (!b_spec || !output) {
    fprintf(stderr, "precis import: --b SOURCE and -o OUT.h5 are required (see precis import --help)\n");
    return 2;
  }
  int exit_code = 2;
  precis_status st = PRECIS_OK;
  char *b_file = NULL, *b_object = NULL, *a_file = NULL, *a_object = NULL, *b_yaml = NULL, *a_yaml = NULL, *text = NULL,
       *qname = NULL, *qdesc = NULL;
  float *probe = NULL;
  precis_suite suite;
  memset(&suite, 0, sizeof suite);
  precis_output_lock lock;
  precis_output_lock_init(&lock);
  if (!split_source(b_spec, &b_file, &b_object)) {
    fprintf(stderr, "precis import: --b %s: expected FILE.h5:/path/to/dataset, FILE.safetensors:tensor, FILE.npy or "
                    "FILE.npz:array (FILE must exist)\n",
            b_spec);
    goto done;
  }
  precis_file_kind b_kind, a_kind;
  if ((st = precis_file_kind_detect(b_file, &b_kind)) != PRECIS_OK) goto report;
  /* The shapes decide k, n (and m, batch for a file a): read them the way gen will. */
  precis_dist probe_dist = {.kind = PRECIS_DIST_FILE, .path = b_file, .object = b_object, .transpose = transpose_b};
  int rank = 0;
  int64_t shape[3];
  if ((st = precis_read_matrix_file(&probe_dist, ".", &probe, &rank, shape)) != PRECIS_OK) goto report;
  free(probe);
  probe = NULL;
  int64_t k = shape[rank - 2], n = shape[rank - 1];
  if (k == n && !transpose_b)
    fprintf(stderr,
            "precis import: warning: --b %s is square (%" PRId64 " x %" PRId64 "), read as b[k, n] with c = a.b. A PyTorch "
            "nn.Linear weight is [out, in] and computes a.W^T: if this is one, import it with --transpose-b.\n",
            b_spec, k, n);
  if (rank == 3 && !b_batched) {
    fprintf(stderr, "precis import: --b %s is a stack of %" PRId64 " matrices: add --b-batched (one b per sample)\n", b_spec,
            shape[0]);
    goto done;
  }
  if (rank == 3) {
    if (batch > 0 && batch != shape[0]) {
      fprintf(stderr, "precis import: --batch %" PRId64 " differs from the %" PRId64 " matrices of --b\n", batch, shape[0]);
      goto done;
    }
    batch = shape[0];
  }
  b_yaml = file_dist_yaml(b_file, b_object, b_kind, transpose_b);
  if (a_spec && split_source(a_spec, &a_file, &a_object)) {
    if ((st = precis_file_kind_detect(a_file, &a_kind)) != PRECIS_OK) goto report;
    precis_dist a_probe = {.kind = PRECIS_DIST_FILE, .path = a_file, .object = a_object, .transpose = transpose_a};
    if ((st = precis_read_matrix_file(&a_probe, ".", &probe, &rank, shape)) != PRECIS_OK) goto report;
    free(probe);
    probe = NULL;
    if (shape[rank - 1] != k) {
      bool fits_transposed = !transpose_b && shape[rank - 1] == n;
      fprintf(stderr,
              "precis import: --a %s has %" PRId64 " columns but b%s has k = %" PRId64 " rows (c = a.b: a is [m, k], b is "
              "[k, n])%s\n",
              a_spec, shape[rank - 1], transpose_b ? " (after --transpose-b)" : "", k,
              fits_transposed ? "; b's other side matches: a PyTorch nn.Linear weight is [out, in], import it with --transpose-b"
              : transpose_b   ? "; without --transpose-b b would be read as it is stored"
                              : "; if b is stored [n, k] (a PyTorch nn.Linear weight, [out, in]), add --transpose-b");
      goto done;
    }
    if (m > 0 && m != shape[rank - 2]) {
      fprintf(stderr, "precis import: --m %" PRId64 " differs from the %" PRId64 " rows of --a\n", m, shape[rank - 2]);
      goto done;
    }
    m = shape[rank - 2];
    if (rank == 3 && batch < 0) batch = shape[0] - calib;
    a_yaml = file_dist_yaml(a_file, a_object, a_kind, transpose_a);
  } else {
    if (transpose_a) {
      fprintf(stderr, "precis import: --transpose-a applies to an --a SOURCE file only\n");
      goto done;
    }
    const char *dist = a_spec ? a_spec : "normal";
    if (dist[0] != '{' && strpbrk(dist, "./:")) {
      fprintf(stderr, "precis import: --a %s: no such file (expected FILE:NAME or FILE.npy of an existing file, or a "
                      "distribution name such as normal)\n", dist);
      goto done;
    }
    if (strpbrk(dist, "\n\r")) {
      fprintf(stderr, "precis import: --a: one line expected\n");
      goto done;
    }
    a_yaml = precis_strdup(dist);
    if (m < 0) m = 16;
  }
  if (batch < 1) batch = 1;
  /* The tensor's last path component, or (a .npy) the file's name without its directory and suffix. */
  char *file_stem = NULL;
  if (!b_object[0]) {
    const char *base = strrchr(b_file, '/') ? strrchr(b_file, '/') + 1 : b_file;
    const char *dot = strrchr(base, '.');
    file_stem = precis_asprintf("%.*s", (int)(dot && dot != base ? dot - base : (ptrdiff_t)strlen(base)), base);
  }
  const char *default_name = file_stem ? file_stem : strrchr(b_object, '/') ? strrchr(b_object, '/') + 1 : b_object;
  qname = precis_yaml_quote(name ? name : default_name);
  free(file_stem);
  char *description = precis_asprintf("imported: b from %s%s%s%s%s%s", b_file, b_object[0] ? ":" : "", b_object,
                                      transpose_b ? " (transposed)" : "",
                                      a_file ? ", a from " : "", a_file ? a_spec : "");
  qdesc = description ? precis_yaml_quote(description) : NULL;
  free(description);
  text = precis_asprintf("# precis import: the suite equivalent to this import (paths relative to where it ran)\n"
                         "seed: %s\n"
                         "workloads:\n"
                         "  - name: %s\n"
                         "    m: %" PRId64 "\n"
                         "    n: %" PRId64 "\n"
                         "    k: %" PRId64 "\n"
                         "    batch: %" PRId64 "\n"
                         "    calib: %" PRId64 "\n"
                         "    b_batched: %s\n"
                         "    a: %s\n"
                         "    b: %s\n"
                         "    description: %s\n",
                         seed_text, qname, m, n, k, batch, calib, b_batched ? "true" : "false", a_yaml, b_yaml, qdesc);
  if (!text || !b_yaml || !a_yaml || !qname || !qdesc) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto report;
  }
  if ((st = precis_suite_parse(text, strlen(text), IMPORT_SOURCE, ".", &suite)) != PRECIS_OK) {
    /* The suite is this command's own: name the option, not a line and column of a file the user never wrote. */
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", precis_last_error());
    const char *what = msg;
    if (strncmp(what, IMPORT_SOURCE ":", strlen(IMPORT_SOURCE) + 1) == 0) {
      what += strlen(IMPORT_SOURCE) + 1;
      what += strspn(what, "0123456789:");
      what += strspn(what, " ");
    }
    /* "workloads[0] (NAME).a: ..." or "workloads[0].a.std: ..." -> "--a SPEC: ..." */
    const char *option = NULL;
    if (strncmp(what, "workloads[0]", 12) == 0) {
      const char *field = what + 12;
      if (field[0] == ' ' && field[1] == '(' && strchr(field, ')')) field = strchr(field, ')') + 1;
      const char *colon = strstr(field, ": ");
      if (field[0] == '.' && (field[1] == 'a' || field[1] == 'b') && colon) {
        option = field[1] == 'a' ? "--a" : "--b";
        what = colon + 2;
      }
    }
    const char *value = !option ? NULL : !strcmp(option, "--a") ? a_spec : b_spec;
    if (option)
      fprintf(stderr, "precis import: %s %s: %s\n", option, value ? value : "", what);
    else
      fprintf(stderr, "precis import: %s\n", what);
    goto done;
  }
  if ((exit_code = precis_cli_lock_output("import", &lock, output, false)) != 0) goto done;
  exit_code = 2;
  precis_install_signal_handlers();
  precis_gen_options options = {
      .output = output, .force = force, .gzip_level = compress ? 4 : 0, .progress = !quiet, .command = "import"};
  char id[65];
  if ((st = precis_generate(&suite, &options, id)) != PRECIS_OK) goto report;
  printf("%s: workload %s, m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " batch=%" PRId64 ", dataset_id %s\n", output,
         suite.workloads[0].name, m, n, k, batch, id);
  exit_code = 0;
  goto done;
report:
  exit_code = precis_cli_report_error("import", st);
done:
  precis_output_lock_release(&lock);
  precis_suite_free(&suite);
  free(probe);
  free(b_file);
  free(b_object);
  free(a_file);
  free(a_object);
  free(b_yaml);
  free(a_yaml);
  free(text);
  free(qname);
  free(qdesc);
  return exit_code;
}
