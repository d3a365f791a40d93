/* The command line's dispatch, a library function (DESIGN §15): the executable (main.c) and
 * libprecis's precis_main (`python -m precis`) both call it, and it returns the exit code. */
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "precis_version.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"info", precis_cmd_info, "versions, devices, and which recipes each device supports"},
    {"gen", precis_cmd_gen, "build a dataset with FP64 references from a YAML suite or a preset"},
    {"inspect", precis_cmd_inspect, "validate and describe a dataset"},
    {"import", precis_cmd_import, "make a dataset from existing HDF5 or safetensors matrices"},
    {"run", precis_cmd_run, "evaluate recipes on a dataset and write reports"},
    {"recommend", precis_cmd_recommend, "the cheapest recipe that meets the accuracy criteria"},
    {"plan", precis_cmd_plan, "a precision per layer of a model from a report: cheapest passing, or exact under a budget"},
    {"compare", precis_cmd_compare, "accuracy and speed differences between two reports, with a verdict"},
    {"merge", precis_cmd_merge, "join the reports of a run's shards (run --shard I/N) into one report"},
    {"recipes", precis_cmd_recipes, "presets, their canonical specs, and what each backend does with them"},
    {"explain", precis_cmd_explain, "the cuBLASLt call the cuda backend would make for each case (no GPU needed)"},
    {"accept", precis_cmd_accept, "acceptance test: batch/concurrency sweep, memory headroom, latency target"},
};

static void usage(FILE *out) {
  fprintf(out,
          "precis %s - precision and quantization trade-off evaluator\n\n"
          "usage: precis COMMAND [OPTIONS]\n       precis COMMAND --help\n\ncommands:\n",
          PRECIS_VERSION);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\noptions:\n  -h, --help     this help\n  -V, --version  version and git commit\n\n"
               "exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad input, 3 criteria not met or regression,\n"
               "            130/143 interrupted\n");
}

int precis_cli_main(int argc, char **argv) {
  /* Past a file size limit (ulimit -f) write() then fails with EFBIG, which every writer reports
   * and cleans up after, instead of the process being killed with a half-written temporary file. */
  signal(SIGXFSZ, SIG_IGN);
  /* After a failed write (disk full, EFBIG) HDF5 1.10 cannot close the file, and its own clean-up
   * at exit then dereferences the half-closed file and crashes. Every file precis opens is closed
   * explicitly, so the library's exit handler has nothing else to do. */
  H5dont_atexit();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("precis %s (commit %s)\n", PRECIS_VERSION, PRECIS_COMMIT);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "precis: unknown command \"%s\" (try precis --help)\n", argv[1]);
  return 2;
}
