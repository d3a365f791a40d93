/* The command line's dispatch, a library function (DESIGN §15): the executable (main.c) and
 * libprecis's precis_main (`python -m precis`) both call it, and it returns the exit code. */
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "precis_version.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
  const precis_cli_option *options; /* every option the command reads (precis_cli_check_options) */
} command;

/* The options of each command, checked here before the command reads them, so that every command
 * takes exact option names and the same one-letter forms (cli.h). A command's parser and its table
 * change together; tests/py/test_cli_options.py tries every option each --help names. */
#define V true  /* takes a value */
#define F false /* a flag */
#define MEASURE_OPTIONS                                                                                      \
  {"require", V, 0}, {"int8-act-scale", V, 0}, {"percentile", V, 0}, {"min-samples", V, 0},                   \
      {"max-samples", V, 0}, {"max-time-ms", V, 0}, {"target-spread", V, 0}, {"cold", F, 0}, {"autotune", V, 0}, \
      {"target", V, 0}
static const precis_cli_option info_options[] = {{"json", F, 0}, {NULL, F, 0}};
static const precis_cli_option gen_options[] = {
    {"output", V, 'o'}, {"preset", V, 0},      {"tokens", V, 0},           {"seed", V, 0},
    {"tile-rows", V, 0}, {"inputs", V, 0},     {"reference-device", V, 0}, {"compress", F, 0},
    {"force", F, 0},     {"quiet", F, 'q'},    {NULL, F, 0}};
static const precis_cli_option inspect_options[] = {{"suite", F, 0}, {NULL, F, 0}};
/* import of matrices and import --model (cmd_import_model.c) together. */
static const precis_cli_option import_options[] = {
    {"b", V, 0},           {"a", V, 0},           {"output", V, 'o'},     {"m", V, 0},         {"batch", V, 0},
    {"calib", V, 0},       {"name", V, 0},        {"seed", V, 0},         {"transpose-a", F, 0}, {"transpose-b", F, 0},
    {"b-batched", F, 0},   {"compress", F, 0},    {"force", F, 0},        {"quiet", F, 'q'},   {"model", V, 0},
    {"layers", V, 0},      {"exclude", V, 0},     {"in-major", V, 0},     {"tokens", V, 0},    {"activations", V, 0},
    {"converted", V, 0},   {"list", F, 0},        {"gradients", V, 0},    {"force-foreign", F, 0},
    {"weights-only", F, 0}, {"strip-prefix", V, 0}, {"max-memory", V, 0}, {NULL, F, 0}};
static const precis_cli_option run_options[] = {
    {"recipes", V, 0}, {"workloads", V, 0}, {"backend", V, 0}, {"gate", F, 0},    {"output", V, 'o'},
    {"force", F, 0},   {"save-outputs", V, 0}, {"quiet", F, 'q'}, {"resume", V, 0}, {"shard", V, 0},
    {"devices", V, 0}, {"reference-block", V, 0}, MEASURE_OPTIONS,     {NULL, F, 0}};
static const precis_cli_option recommend_options[] = {{"require", V, 0},      {"objective", V, 0}, {"tie-threshold", V, 0},
                                                      {"per-workload", F, 0}, {"json", F, 0},      {"target", V, 0},
                                                      {NULL, F, 0}};
static const precis_cli_option plan_options[] = {
    {"require", V, 0}, {"budget", V, 0}, {"cost", V, 0}, {"target", V, 0}, {"exclusions-for", V, 0},
    {"output", V, 'o'}, {"force", F, 0},
    {"allow-emulated-latency", F, 0}, {"objective", V, 0}, {"serve", V, 0}, {"moe-active", V, 0},
    {"kv-candidates", V, 0}, {"objective-map", V, 0},
    {"deploy", V, 0},
    /* plan --validate and its options are `python -m precis plan --validate`'s (it runs the model):
     * accepted here only so that cmd_plan.c refuses them with that pointer, not as unknown. */
    {"validate", F, 0}, {"model", V, 0}, {"inputs", V, 0}, {"validate-budgets", V, 0}, {"validate-against", V, 0},
    {"validate-measure", V, 0}, {NULL, F, 0}};
static const precis_cli_option conform_options[] = {{"output", V, 'o'}, {"force", F, 0},      {"quiet", F, 'q'},
                                                    {"layers", V, 0},   {"exclude", V, 0},    {"strip-prefix", V, 0},
                                                    {NULL, F, 0}};
static const precis_cli_option compare_options[] = {{"error-factor", V, 0}, {"time-threshold", V, 0},
                                                    {"memory-threshold", V, 0}, {"json", V, 0},
                                                    {"markdown", V, 0},     {"force", F, 0},
                                                    {NULL, F, 0}};
static const precis_cli_option merge_options[] = {{"output", V, 'o'}, {"force", F, 0}, {"quiet", F, 'q'}, {NULL, F, 0}};
static const precis_cli_option recipes_options[] = {{"recipes", V, 0}, {"cc", V, 0}, {"json", F, 0}, {"target", V, 0},
                                                    {"deploy", V, 0}, {NULL, F, 0}};
static const precis_cli_option explain_options[] = {{"recipes", V, 0}, {"workloads", V, 0}, {"cc", V, 0},
                                                    {"json", F, 0},    {"cublaslt-version", V, 0}, {"target", V, 0},
                                                    {NULL, F, 0}};
static const precis_cli_option grade_options[] = {{"recipes", V, 0}, {"n", V, 0},        {"k", V, 0},
                                                  {"trials", V, 0},  {"seed", V, 0},     {"output", V, 'o'},
                                                  {"force", F, 0},   {NULL, F, 0}};
static const precis_cli_option accept_options[] = {
    {"workload", V, 0},       {"recipe", V, 0},         {"recipes", V, 0},  {"max-batch", V, 0},
    {"batches", V, 0},        {"concurrency", V, 0},    {"concurrency-list", V, 0},
    {"latency-target", V, 0}, {"headroom", V, 0},       {"memory-limit", V, 0}, {"repeats", V, 0},
    {"backend", V, 0},        {"output", V, 'o'},       {"force", F, 0},    {"quiet", F, 'q'},
    MEASURE_OPTIONS,          {NULL, F, 0}};
#undef V
#undef F
#undef MEASURE_OPTIONS

static const command commands[] = {
    {"info", precis_cmd_info, "versions, devices, and which recipes each device supports", info_options},
    {"gen", precis_cmd_gen, "build a dataset with FP64 references from a YAML suite or a preset", gen_options},
    {"inspect", precis_cmd_inspect, "validate and describe a dataset", inspect_options},
    {"import", precis_cmd_import, "make a dataset from existing HDF5 or safetensors matrices", import_options},
    {"run", precis_cmd_run, "evaluate recipes on a dataset and write reports", run_options},
    {"recommend", precis_cmd_recommend, "the cheapest recipe that meets the accuracy criteria", recommend_options},
    {"plan", precis_cmd_plan, "a precision per layer of a model from a report: cheapest passing, or exact under a budget",
     plan_options},
    {"conform", precis_cmd_conform, "does a converted checkpoint hold its declared scheme of the original? per element",
     conform_options},
    {"compare", precis_cmd_compare, "accuracy and speed differences between two reports, with a verdict",
     compare_options},
    {"merge", precis_cmd_merge, "join the reports of a run's shards (run --shard I/N) into one report", merge_options},
    {"recipes", precis_cmd_recipes, "presets, their canonical specs, and what each backend does with them",
     recipes_options},
    {"explain", precis_cmd_explain, "the cuBLASLt call the cuda backend would make for each case (no GPU needed)",
     explain_options},
    {"grade", precis_cmd_grade, "BLAS-3 grading: the slope of the componentwise error over n (Grade A <= 1)",
     grade_options},
    {"accept", precis_cmd_accept, "acceptance test: batch/concurrency sweep, memory headroom, latency target",
     accept_options},
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
    if (strcmp(argv[1], commands[i].name) == 0) {
      /* The check rewrites -q, -o, -h to their long names: in a copy, so that the caller's argv
       * (libprecis's client's) stays as it was. */
      char **args = calloc((size_t)argc, sizeof *args);
      if (!args) {
        fprintf(stderr, "precis: out of memory\n");
        return 1;
      }
      for (int a = 1; a < argc; a++) args[a - 1] = argv[a];
      int rc = precis_cli_check_options(commands[i].name, argc - 1, args, commands[i].options);
      if (rc == 0) rc = commands[i].run(argc - 1, args);
      free(args);
      return rc;
    }
  fprintf(stderr, "precis: unknown command \"%s\" (try precis --help)\n", argv[1]);
  return 2;
}
