/* precis gen: a dataset with float64 references from a YAML suite or a built-in preset. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "kernels/cuda_api.h"
#include "base/fileio.h"
#include "data/generate.h"
#include "base/mpi_world.h"
#include "base/output_lock.h"
#include "data/suite.h"

static void gen_usage(FILE *out) {
  fprintf(out,
          "usage: precis gen SUITE.yaml -o FILE.h5 [options]\n"
          "       precis gen --preset NAME -o FILE.h5 [options]\n\n"
          "Generates the inputs of every workload of a suite with a counter-based RNG (the same suite and\n"
          "seed give the same inputs and dataset_id on any machine), computes the references c_ref = a.b\n"
          "and ab_abs = |a|.|b| in float64 (OpenBLAS dgemm of the stored float32 values), and writes the\n"
          "HDF5 dataset of docs/dataset-format.md (chunked, Fletcher32 on every dataset).\n\n"
          "options:\n"
          "  -o, --output FILE.h5  the dataset to write (required); written to a temporary file, then renamed\n"
          "  --preset NAME         a built-in suite instead of SUITE.yaml:");
  for (size_t i = 0; i < precis_preset_count; i++) fprintf(out, "%s %s", i ? "," : "", precis_presets[i].name);
  fprintf(out,
          "\n"
          "                        (the YAML files are in datasets/)\n"
          "  --tokens T            set the suite's top-level tokens (m of every workload that has no m);\n"
          "                        e.g. --preset llama2-7b --tokens 128\n"
          "  --seed S              set the suite's top-level seed (non-negative integer)\n"
          "  --inputs float64      set the suite's top-level inputs: a and b drawn and stored in float64\n"
          "                        (53-bit inputs for fp64 and the Ozaki recipes; the other recipes read\n"
          "                        their float32 rounding); float32 (the default) sets it back\n"
          "  --compress            gzip (deflate level 4, with shuffle) every dataset\n"
          "  --tile-rows R         out of core: R rows of a (and of the references) in memory at a time, so\n"
          "                        that memory is bounded by the tile and b, not by m x batch; the file is\n"
          "                        the one the in-core path writes (workloads read from files stay in core)\n"
          "  --reference-device D  cpu (default: OpenBLAS dgemm) or cuda: the float64 references by cuBLAS\n"
          "                        DGEMM on the first CUDA device (under MPI: the device of each rank's local\n"
          "                        rank), recorded in each workload's `reference` attribute; its summation\n"
          "                        order is not the CPU's, so the last bits differ within the recorded\n"
          "                        reference_error_bound. Double-double references and float64 inputs are\n"
          "                        CPU only (refused)\n"
          "  --force               replace FILE.h5 when it exists\n"
          "  -q, --quiet           no progress on stderr\n"
          "  -h, --help            this help\n\n"
          "The dataset's `suite` attribute holds the YAML text used, including --tokens/--seed/--inputs edits.\n"
          "Under mpirun (built with MPI) the references are computed by every rank, blocks of 256 rows dealt\n"
          "in turn, and rank 0 writes the one file: the same file as one process (docs/scale-out.md).\n"
          "exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad input (the message names the file,\n"
          "the line and the key)\n");
}

/* The CUDA device of this process for --reference-device cuda: the first one, or under MPI the one
 * of its local rank (modulo the devices the node shows). */
static precis_status reference_device_for(const precis_mpi_world *mpi, int *device) {
  precis_cuda_inventory inv;
  precis_status st = precis_cuda_inventory_get(&inv);
  if (st != PRECIS_OK) return st;
  if (!inv.built)
    st = precis_fail(PRECIS_E_NOT_BUILT, "--reference-device cuda: %s", inv.error);
  else if (inv.device_count == 0)
    st = precis_fail(PRECIS_E_INPUT, "--reference-device cuda: no CUDA device on this machine (%s); leave the option "
                     "out to compute the references on the CPU", inv.error[0] ? inv.error : "none found");
  else
    *device = inv.devices[mpi->active ? mpi->local_rank % inv.device_count : 0].index;
  precis_cuda_inventory_free(&inv);
  return st;
}

/* A rank other than 0 of `mpirun ... precis gen`: rank 0's suite, then the reference blocks dealt
 * to this rank; exits with rank 0's code (rank 0 reports every error). */
static int gen_worker(precis_mpi_world *mpi, bool reference_cuda) {
  int rc = precis_mpi_bcast_int(mpi, 0);
  if (rc == 0) {
    char *fields[3] = {NULL, NULL, NULL};
    size_t len = 0;
    for (int i = 0; i < 3; i++) precis_mpi_bcast_bytes(mpi, &fields[i], &len);
    precis_suite suite;
    memset(&suite, 0, sizeof suite);
    precis_status st = fields[0] && fields[1] && fields[2]
                           ? precis_suite_parse(fields[0], strlen(fields[0]), fields[1], fields[2], &suite)
                           : precis_fail(PRECIS_E_NOMEM, "out of memory receiving the suite");
    if (st != PRECIS_OK) precis_error_prefix("rank 0's suite");
    bool parsed = st == PRECIS_OK;
    int device = 0;
    if (st == PRECIS_OK && reference_cuda) st = reference_device_for(mpi, &device);
    precis_install_signal_handlers();
    precis_generate_worker(st == PRECIS_OK ? &suite : NULL, mpi, reference_cuda ? precis_cuda_reference_device() : NULL,
                           device);
    if (parsed) precis_suite_free(&suite);
    for (int i = 0; i < 3; i++) free(fields[i]);
  }
  /* Rank 0's final code, which it sends after an early refusal too. */
  rc = precis_mpi_bcast_int(mpi, 0);
  precis_mpi_leave(mpi);
  return rc;
}

static int parse_u64(const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  if (!text || !text[0] || text[0] == '-') return 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (*end || errno) return 0;
  *out = v;
  return 1;
}

int precis_cmd_gen(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    gen_usage(stdout);
    return 0;
  }
  const char *suite_path = NULL, *preset = NULL, *output = NULL, *inputs = NULL;
  bool force = false, compress = false, quiet = false, have_seed = false, have_tokens = false, reference_cuda = false;
  uint64_t seed = 0, tokens_u = 0, tile_rows = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(arg, "-o") || !strcmp(arg, "--output") || !strcmp(arg, "--preset") || !strcmp(arg, "--tokens") ||
        !strcmp(arg, "--seed") || !strcmp(arg, "--tile-rows") || !strcmp(arg, "--inputs") ||
        !strcmp(arg, "--reference-device")) {
      if (!value) {
        fprintf(stderr, "precis gen: %s needs a value (see precis gen --help)\n", arg);
        return 2;
      }
      i++;
      if (!strcmp(arg, "--preset")) preset = value;
      else if (!strcmp(arg, "--inputs")) {
        if (strcmp(value, "float32") != 0 && strcmp(value, "float64") != 0) {
          fprintf(stderr, "precis gen: --inputs: expected float32 or float64, found \"%s\"\n", value);
          return 2;
        }
        inputs = value;
      }
      else if (!strcmp(arg, "--tokens")) {
        if (!parse_u64(value, &tokens_u) || tokens_u < 1 || tokens_u > INT32_MAX) {
          fprintf(stderr, "precis gen: --tokens: expected a positive integer, found \"%s\"\n", value);
          return 2;
        }
        have_tokens = true;
      } else if (!strcmp(arg, "--tile-rows")) {
        if (!parse_u64(value, &tile_rows) || tile_rows < 1 || tile_rows > INT32_MAX) {
          fprintf(stderr, "precis gen: --tile-rows: expected a positive integer, found \"%s\"\n", value);
          return 2;
        }
      } else if (!strcmp(arg, "--reference-device")) {
        if (strcmp(value, "cpu") != 0 && strcmp(value, "cuda") != 0) {
          fprintf(stderr, "precis gen: --reference-device: expected cpu or cuda, found \"%s\"\n", value);
          return 2;
        }
        reference_cuda = !strcmp(value, "cuda");
      } else if (!strcmp(arg, "--seed")) {
        if (!parse_u64(value, &seed)) {
          fprintf(stderr, "precis gen: --seed: expected a non-negative integer, found \"%s\"\n", value);
          return 2;
        }
        have_seed = true;
      } else output = value;
    } else if (!strcmp(arg, "--force")) force = true;
    else if (!strcmp(arg, "--compress")) compress = true;
    else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) quiet = true;
    else if (arg[0] == '-' && arg[1]) {
      fprintf(stderr, "precis gen: unknown option %s (see precis gen --help)\n", arg);
      return 2;
    } else if (!suite_path) suite_path = arg;
    else {
      fprintf(stderr, "precis gen: more than one suite given (%s and %s)\n", suite_path, arg);
      return 2;
    }
  }
  if (!suite_path == !preset) {
    fprintf(stderr, "precis gen: give either SUITE.yaml or --preset NAME (see precis gen --help)\n");
    return 2;
  }
  if (!output) {
    fprintf(stderr, "precis gen: -o FILE.h5 is required\n");
    return 2;
  }
  int launcher_ranks = precis_mpi_launcher_size();
  if (launcher_ranks > 1 && !precis_mpi_built()) {
    fprintf(stderr, "precis gen: started by an MPI launcher as one of %d ranks, but this precis was built without "
                    "MPI (configure with -DPRECIS_MPI=ON; docs/scale-out.md): every rank would write %s\n",
            launcher_ranks, output);
    return 2;
  }
  precis_mpi_world mpi;
  precis_status st = precis_mpi_join(&mpi);
  if (st != PRECIS_OK) return precis_cli_report_error("gen", st);
  if (mpi.active && mpi.rank != 0) return gen_worker(&mpi, reference_cuda);
  int rc = 0;
  precis_output_lock lock;
  precis_output_lock_init(&lock);
  precis_suite suite;
  memset(&suite, 0, sizeof suite);
  st = preset ? precis_suite_load_preset(preset, &suite) : precis_suite_load_file(suite_path, &suite);
  bool loaded = st == PRECIS_OK;
  if (st == PRECIS_OK && inputs) st = precis_suite_override_inputs(&suite, inputs);
  if (st == PRECIS_OK && (have_seed || have_tokens)) {
    int64_t tokens = (int64_t)tokens_u;
    st = precis_suite_override(&suite, have_seed ? &seed : NULL, have_tokens ? &tokens : NULL);
  }
  /* Double-double references and float64 inputs are refused on a GPU before any device is looked for. */
  if (st == PRECIS_OK && reference_cuda) st = precis_gen_check_reference_device(&suite, true);
  int device = 0;
  if (st == PRECIS_OK && reference_cuda) st = reference_device_for(&mpi, &device);
  if (st != PRECIS_OK) rc = precis_cli_report_error("gen", st);
  /* One writer per output: a second gen to the same file would rename over the first one's. */
  if (rc == 0) rc = precis_cli_lock_output("gen", &lock, output, false);
  if (rc == 0 && mpi.active && !force && precis_path_exists(output)) {
    fprintf(stderr, "precis gen: %s: already exists (use --force to overwrite)\n", output);
    rc = 2;
  }
  /* Under MPI the other ranks wait for rank 0's suite: the text as used (--tokens/--seed/--inputs applied),
   * so that they need not read the file. */
  if (mpi.active && (rc = precis_mpi_bcast_int(&mpi, rc)) == 0) {
    char *fields[3] = {suite.text, suite.source, suite.base_dir};
    for (int i = 0; i < 3; i++) {
      size_t len = fields[i] ? strlen(fields[i]) : 0;
      precis_mpi_bcast_bytes(&mpi, fields[i] ? &fields[i] : &(char *){""}, &len);
    }
  }
  if (rc != 0) goto done;
  precis_install_signal_handlers();
  precis_gen_options options = {output, force, compress ? 4 : 0, !quiet, "gen", &mpi,
                                reference_cuda ? precis_cuda_reference_device() : NULL, device};
  char id[65];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = precis_generate_tiled(&suite, &options, (int64_t)tile_rows, id);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (st != PRECIS_OK) rc = precis_cli_report_error("gen", st);
  else
    printf("%s: %zu workloads, dataset_id %s (%.1f s%s)\n", output, suite.n_workloads, id,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9,
           mpi.active ? ", references over MPI ranks" : "");
  if (mpi.active && st == PRECIS_E_INTERRUPTED) {
    /* mpirun is ending the job (a rank died, or Ctrl-C): the file is removed; do not wait in a
     * collective for ranks that may be gone. */
    fflush(NULL);
    precis_output_lock_release(&lock);
    precis_mpi_abort(&mpi, rc);
  }
done:
  precis_output_lock_release(&lock);
  if (loaded) precis_suite_free(&suite);
  rc = precis_mpi_bcast_int(&mpi, rc);
  precis_mpi_leave(&mpi);
  return rc;
}
