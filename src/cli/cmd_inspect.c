/* precis inspect: validates a dataset against the format (DESIGN §4), reads every checksum, and
 * describes it. Any violation: exit 2 with a message naming the object. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data/dataset.h"
#include "data/file_kind.h"
#include "data/npy.h"
#include "data/safetensors.h"

static void inspect_usage(FILE *out) {
  fprintf(out,
          "usage: precis inspect FILE.h5 [--suite]\n"
          "       precis inspect MODEL.safetensors | ARRAYS.npz | ARRAY.npy\n\n"
          "Validates a dataset (docs/dataset-format.md): every attribute, type, rank and shape; reads every\n"
          "dataset in full so that each chunk's Fletcher32 checksum is verified; checks that c_ref and\n"
          "ab_abs are finite and match a.b and |a|.|b| accumulated in float64 on a spread of entries; and\n"
          "recomputes dataset_id from the contents. Then prints one line per workload.\n"
          "A safetensors or NumPy file (told by its first bytes) is listed instead: one line per tensor or\n"
          "array with its name, dtype, shape and bytes, the names precis import --b/--a take.\n\n"
          "options:\n"
          "  --suite     also print the suite (YAML) the dataset was made from\n"
          "  -h, --help  this help\n\n"
          "exit codes: 0 valid, 2 invalid (the message names the file and the object), 1 i/o failure\n");
}

static void human_bytes(uint64_t bytes, char *buf, size_t len) {
  if (bytes >= ((uint64_t)1 << 30)) snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
  else if (bytes >= ((uint64_t)1 << 20)) snprintf(buf, len, "%.1f MiB", (double)bytes / 1048576.0);
  else snprintf(buf, len, "%.1f KiB", (double)bytes / 1024.0);
}

static void shape_text(char *buf, size_t len, int rank, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < rank && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, i ? ", " : "", shape[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

/* One line per tensor: what `precis import --b FILE:NAME` can take. */
static int list_safetensors(const char *path) {
  precis_safetensors st;
  precis_status status = precis_safetensors_open(path, &st);
  if (status != PRECIS_OK) return precis_cli_report_error("inspect", status);
  int width = (int)strlen("tensor");
  for (size_t i = 0; i < st.n_tensors; i++)
    if ((int)strlen(st.tensors[i].name) > width) width = (int)strlen(st.tensors[i].name);
  uint64_t total = 0;
  for (size_t i = 0; i < st.n_tensors; i++) total += st.tensors[i].end - st.tensors[i].begin;
  char total_text[32];
  human_bytes(total, total_text, sizeof total_text);
  printf("%s: safetensors, %zu tensor%s, %s of data\n\n", path, st.n_tensors, st.n_tensors == 1 ? "" : "s", total_text);
  printf("%-*s  %-7s  %-24s  %12s\n", width, "tensor", "dtype", "shape", "bytes");
  for (size_t i = 0; i < st.n_tensors; i++) {
    const precis_st_tensor *t = &st.tensors[i];
    char shape[160];
    shape_text(shape, sizeof shape, t->rank, t->shape);
    printf("%-*s  %-7s  %-24s  %12" PRIu64 "\n", width, t->name, t->dtype, shape, t->end - t->begin);
  }
  precis_safetensors_close(&st);
  return 0;
}

static size_t npy_itemsize(const char *descr) {
  size_t n = strlen(descr);
  return n >= 3 ? (size_t)strtoul(descr + 2, NULL, 10) : 0;
}

static int list_numpy(const char *path, precis_file_kind kind) {
  char **names = NULL;
  size_t count = 1;
  precis_status status = PRECIS_OK;
  if (kind == PRECIS_FILE_NPZ && (status = precis_npz_list(path, &names, &count)) != PRECIS_OK)
    return precis_cli_report_error("inspect", status);
  int width = (int)strlen(names ? "array" : "(the file)");
  for (size_t i = 0; names && i < count; i++)
    if ((int)strlen(names[i]) > width) width = (int)strlen(names[i]);
  printf("%s: %s, %zu array%s\n\n", path, precis_file_kind_name(kind), count, count == 1 ? "" : "s");
  printf("%-*s  %-7s  %-24s  %12s\n", width, "array", "dtype", "shape", "bytes");
  for (size_t i = 0; i < count && status == PRECIS_OK; i++) {
    precis_npy_array a;
    status = names ? precis_npz_read(path, names[i], false, &a) : precis_npy_read(path, false, &a);
    if (status != PRECIS_OK) break;
    char shape[160];
    shape_text(shape, sizeof shape, a.rank, a.shape);
    uint64_t bytes = npy_itemsize(a.descr);
    for (int d = 0; d < a.rank; d++) bytes *= (uint64_t)a.shape[d];
    printf("%-*s  %-7s  %-24s  %12" PRIu64 "\n", width, names ? names[i] : "(the file)", a.descr, shape, bytes);
    precis_npy_array_free(&a);
  }
  precis_npz_names_free(names, names ? count : 0);
  return status == PRECIS_OK ? 0 : precis_cli_report_error("inspect", status);
}

static int width_of(const precis_dataset *ds, const char *header, const char *(*field)(const precis_workload_info *)) {
  int w = (int)strlen(header);
  for (size_t i = 0; i < ds->n_workloads; i++) {
    int l = (int)strlen(field(&ds->workloads[i]));
    if (l > w) w = l;
  }
  return w;
}
static const char *field_name(const precis_workload_info *w) { return w->name; }
static const char *field_a(const precis_workload_info *w) { return w->a_dist; }
static const char *field_b(const precis_workload_info *w) { return w->b_dist; }

int precis_cmd_inspect(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    inspect_usage(stdout);
    return 0;
  }
  const char *path = NULL;
  bool show_suite = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--suite")) show_suite = true;
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "precis inspect: unknown option %s (see precis inspect --help)\n", argv[i]);
      return 2;
    } else if (!path) path = argv[i];
    else {
      fprintf(stderr, "precis inspect: one file at a time (%s and %s given)\n", path, argv[i]);
      return 2;
    }
  }
  if (!path) {
    inspect_usage(stderr);
    return 2;
  }
  precis_file_kind kind;
  precis_status st = precis_file_kind_detect(path, &kind);
  if (st != PRECIS_OK) return precis_cli_report_error("inspect", st);
  if (kind == PRECIS_FILE_SAFETENSORS || kind == PRECIS_FILE_NPY || kind == PRECIS_FILE_NPZ) {
    if (show_suite) {
      fprintf(stderr, "precis inspect: --suite: %s is a %s file, not a precis dataset: it has no suite\n", path,
              precis_file_kind_name(kind));
      return 2;
    }
    return kind == PRECIS_FILE_SAFETENSORS ? list_safetensors(path) : list_numpy(path, kind);
  }
  precis_dataset *ds = NULL;
  st = precis_dataset_open(path, &ds);
  if (st != PRECIS_OK) return precis_cli_report_error("inspect", st);
  char computed_id[65];
  st = precis_dataset_verify_data_id(ds, computed_id);
  if (st != PRECIS_OK) {
    precis_dataset_close(ds);
    return precis_cli_report_error("inspect", st);
  }
  uint64_t memory = 0, stored = 0;
  for (size_t i = 0; i < ds->n_workloads; i++) {
    memory += precis_workload_bytes(&ds->workloads[i]);
    stored += ds->workloads[i].stored_bytes;
  }
  char mem_text[32], disk_text[32];
  human_bytes(memory, mem_text, sizeof mem_text);
  human_bytes(stored, disk_text, sizeof disk_text);
  printf("%s: valid %s format_version %d, %zu workload%s, %s in memory, %s stored; every checksum verified\n", path,
         PRECIS_DATASET_FORMAT, PRECIS_DATASET_FORMAT_VERSION, ds->n_workloads, ds->n_workloads == 1 ? "" : "s", mem_text,
         disk_text);
  printf("  generator    %s\n  created_utc  %s\n  seed         %" PRIu64 "\n", ds->generator, ds->created_utc, ds->seed);
  bool id_matches = ds->dataset_id && strcmp(computed_id, ds->dataset_id) == 0;
  if (!ds->dataset_id) printf("  dataset_id   none (the attribute is optional: reports identify the file by its contents)\n");
  else
    printf("  dataset_id   %s (%s)\n", ds->dataset_id,
           id_matches ? "matches the contents"
                      : "the writer's label, not the digest of the contents: written by another tool, or edited");
  if (!id_matches)
    printf("  contents     %s (SHA-256 of the inputs, docs/dataset-format.md: the dataset_id of reports and "
           "journals)\n",
           computed_id);
  size_t suite_lines = 0;
  for (const char *p = ds->suite; *p; p++) suite_lines += *p == '\n';
  printf("  suite        %s\n\n", ds->suite[0] ? (show_suite ? "(below)" : "recorded (precis inspect --suite prints it)") : "none recorded");

  int wn = width_of(ds, "workload", field_name), wa = width_of(ds, "a", field_a), wb = width_of(ds, "b", field_b);
  printf("%-*s  %-16s  %5s  %-7s  %5s  %-*s  %-*s  %10s  %-10s  %s\n", wn, "workload", "m x n x k", "batch", "b", "calib", wa,
         "a", wb, "b", "bytes", "checksum", "reference");
  const char *first_reference = ds->workloads[0].reference;
  bool same_reference = true;
  for (size_t i = 0; i < ds->n_workloads; i++) {
    const precis_workload_info *w = &ds->workloads[i];
    same_reference = same_reference && strcmp(w->reference, first_reference) == 0;
    char shape[64], bytes[32];
    snprintf(shape, sizeof shape, "%" PRId64 "x%" PRId64 "x%" PRId64, w->m, w->n, w->k);
    human_bytes(precis_workload_bytes(w), bytes, sizeof bytes);
    const char *reference = !w->reference[0] ? "unspecified" : strncmp(w->reference, "float64 dgemm", 13) == 0 ? "float64 dgemm" : "see below";
    printf("%-*s  %-16s  %5" PRId64 "  %-7s  %5" PRId64 "  %-*s  %-*s  %10s  %-10s  %s\n", wn, w->name, shape, w->batch,
           w->b_batched ? "batched" : "shared", w->calib_samples, wa, w->a_dist, wb, w->b_dist, bytes,
           w->checksummed ? (w->compressed ? "fletcher32+gzip" : "fletcher32") : "NONE", reference);
  }
  if (first_reference[0] && same_reference) printf("\nreference: %s\n", first_reference);
  else
    for (size_t i = 0; i < ds->n_workloads; i++)
      if (ds->workloads[i].reference[0]) printf("reference of %s: %s\n", ds->workloads[i].name, ds->workloads[i].reference);
  /* What the high-precision recipes need to know (docs/high-precision.md). */
  for (size_t i = 0; i < ds->n_workloads; i++) {
    const precis_workload_info *w = &ds->workloads[i];
    if (w->a_f64 || w->b_f64) printf("inputs of %s: a %s, b %s\n", w->name, w->a_f64 ? "float64" : "float32",
                                     w->b_f64 ? "float64" : "float32");
    if (!isnan(w->reference_error_bound))
      printf("reference precision of %s: %s, |c_ref%s - a.b| <= %.3g * ab_abs\n", w->name, w->reference_precision,
             w->has_c_ref_lo ? " + c_ref_lo" : "", w->reference_error_bound);
    else if (w->has_c_ref_lo)
      printf("reference precision of %s: %s (no reference_error_bound recorded)\n", w->name, w->reference_precision);
  }
  for (size_t i = 0; i < ds->n_workloads; i++)
    if (!ds->workloads[i].checksummed)
      fprintf(stderr,
              "precis inspect: warning: /workloads/%s: some datasets have no Fletcher32 checksum, so corruption cannot be "
              "detected (write them with fletcher32=True, see docs/dataset-format.md)\n",
              ds->workloads[i].name);
  if (show_suite && ds->suite[0]) printf("\n%s%s", ds->suite, ds->suite[strlen(ds->suite) - 1] == '\n' ? "" : "\n");
  (void)suite_lines;
  precis_dataset_close(ds);
  return 0;
}
