/* precis conform ORIGINAL CONVERTED [-o DIR]: does a converted checkpoint hold what its declared
 * scheme makes of the original weights (data/conform.h)? Exit 3 when a layer does not conform. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/fileio.h"
#include "data/conform.h"
#include "data/model.h"
#include "report/results.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: precis conform ORIGINAL CONVERTED [--layers GLOB]... [--exclude GLOB]... [-o DIR]\n\n"
          "Checks a converted checkpoint against its original, layer by layer, under the scheme its producer\n"
          "declared (config.json's quantization_config, ModelOpt's hf_quant_config.json; else the stored format):\n"
          "  codes      the original re-quantized with the stored scales (round to nearest, as compressed-tensors'\n"
          "             quantize() does): fraction equal, within one code, beyond; each differing element named\n"
          "  scales     recomputed from the original by the min-max rule (compressed-tensors' calculate_qparams),\n"
          "             compared in ULPs of the scale's format; more than 1 ULP apart is named\n"
          "  applied    scales ignored (the codes alone are the weights) or needed twice\n"
          "  foreign    dequantized weights further than relative Frobenius 0.5 (0.9 for 2/3-bit codes) from the\n"
          "             original's: not a conversion of this model's layer\n"
          "  idempotence how many scales and codes move when the dequantized weights are re-quantized\n"
          "             (reported, not judged: min-max symmetric INT scales move by design)\n"
          "A conversion by GPTQ, AWQ or an MSE observer differs from round to nearest by design: its codes and\n"
          "scales are reported as differing.\n\n"
          "options:\n"
          "  --layers GLOB, --exclude GLOB, --strip-prefix P   as for precis import --model\n"
          "  -o, --output DIR    write DIR/conform.json\n"
          "  --force             replace DIR/conform.json\n"
          "  -q, --quiet         no progress lines\n\n"
          "exit codes: 0 every layer conforms, 3 some layer does not (each finding names layer, tensor and\n"
          "element), 2 bad input\n");
}

int precis_cmd_conform(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *paths[2] = {NULL, NULL}, *output = NULL, *prefix = NULL;
  const char **include = calloc((size_t)argc + 1, sizeof *include), **exclude = calloc((size_t)argc + 1, sizeof *exclude);
  size_t n_include = 0, n_exclude = 0, n_paths = 0;
  bool quiet = false, force = false;
  int exit_code = 2;
  precis_model model, conv;
  precis_quant_decl decl;
  precis_conform_result result;
  memset(&model, 0, sizeof model);
  memset(&conv, 0, sizeof conv);
  memset(&decl, 0, sizeof decl);
  memset(&result, 0, sizeof result);
  char *json = NULL, *json_path = NULL;
  precis_status st = PRECIS_OK;
  if (!include || !exclude) goto done;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const bool takes = !strcmp(arg, "--layers") || !strcmp(arg, "--exclude") || !strcmp(arg, "-o") || !strcmp(arg, "--output") ||
                       !strcmp(arg, "--strip-prefix");
    if (takes && i + 1 >= argc) {
      fprintf(stderr, "precis conform: %s needs a value (see precis conform --help)\n", arg);
      goto done;
    }
    if (!strcmp(arg, "--layers")) include[n_include++] = argv[++i];
    else if (!strcmp(arg, "--exclude")) exclude[n_exclude++] = argv[++i];
    else if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) output = argv[++i];
    else if (!strcmp(arg, "--strip-prefix")) prefix = argv[++i];
    else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) quiet = true;
    else if (!strcmp(arg, "--force")) force = true;
    else if (arg[0] == '-' && arg[1]) {
      fprintf(stderr, "precis conform: unknown option %s (see precis conform --help)\n", arg);
      goto done;
    } else if (n_paths < 2) paths[n_paths++] = arg;
    else {
      fprintf(stderr, "precis conform: one ORIGINAL and one CONVERTED expected, found also %s\n", arg);
      goto done;
    }
  }
  if (n_paths != 2) {
    fprintf(stderr, "precis conform: ORIGINAL and CONVERTED are required (see precis conform --help)\n");
    goto done;
  }
  if ((st = precis_model_discover(paths[0], include, n_include, exclude, n_exclude, &model)) != PRECIS_OK ||
      (st = precis_model_tensors(paths[1], &conv)) != PRECIS_OK || (st = precis_quant_decl_read(paths[1], &decl)) != PRECIS_OK)
    goto report;
  /* Fused expert tensors stored [experts, in, out] (gpt-oss, Llama 4), as import --model reads them. */
  precis_model_layout layout;
  if ((st = precis_model_read_layout(paths[0], &layout)) != PRECIS_OK) goto report;
  if (layout.experts_in_major) precis_model_mark_experts_in_major(&model);
  if (prefix) {
    decl.strip_prefix = prefix; /* its ignore and target names may carry the prefix or not */
    const size_t n = strlen(prefix);
    for (int side = 0; side < 2; side++) {
      precis_model *m = side ? &conv : &model;
      for (size_t i = 0; i < m->n_layers; i++)
        if (!strncmp(m->layers[i].name, prefix, n) && m->layers[i].name[n])
          memmove(m->layers[i].name, m->layers[i].name + n, strlen(m->layers[i].name + n) + 1);
    }
  }
  precis_conform_options options = {&model, &conv, &decl, 5, !quiet};
  if ((st = precis_conform(&options, &result)) != PRECIS_OK) goto report;
  printf("declared: %s\n", result.declared_by);
  printf("%-44s %-11s %9s %9s %9s %9s %9s  %s\n", "layer", "status", "equal", "within 1", "beyond", "scale ULP", "rel_fro",
         "re-quantized: scales / codes moved");
  for (size_t i = 0; i < result.n_layers; i++) {
    const precis_conform_layer *l = &result.layers[i];
    if (!l->codes) {
      printf("%-44s %-11s %9s %9s %9s %9s %9.3g  (%s; %s)\n", l->name, l->status, "-", "-", "-", "-", l->weight_rel_fro,
             l->declared, l->found);
      continue;
    }
    const double n = (double)l->codes;
    printf("%-44s %-11s %8.4f%% %8.4f%% %8.4f%% %9.0f %9.3g  %" PRIu64 "/%" PRIu64 " / %" PRIu64 "\n", l->name, l->status,
           100.0 * (double)l->equal / n, 100.0 * (double)l->within_one / n, 100.0 * (double)l->beyond / n, l->max_scale_ulps,
           l->weight_rel_fro, l->idem_scales_moved, l->scales, l->idem_codes_moved);
  }
  for (size_t i = 0; i < result.n_findings; i++) printf("finding: %s\n", result.findings[i]);
  if (result.n_nonconforming) printf("%zu of %zu layers do not conform\n", result.n_nonconforming, result.n_layers);
  else printf("all %zu layers conform\n", result.n_layers);
  if (output) {
    if ((st = precis_mkdirs(output)) != PRECIS_OK) goto report;
    if (!(json = precis_conform_json(&result, paths[0], paths[1])) || !(json_path = precis_asprintf("%s/conform.json", output))) {
      st = precis_fail(PRECIS_E_NOMEM, "out of memory");
      goto report;
    }
    if ((st = precis_atomic_write_text(json_path, json, force)) != PRECIS_OK) goto report;
  }
  exit_code = result.n_nonconforming ? 3 : 0;
  goto done;
report:
  exit_code = precis_cli_report_error("conform", st);
done:
  precis_conform_free(&result);
  precis_model_free(&model);
  precis_model_free(&conv);
  precis_quant_decl_free(&decl);
  free(json);
  free(json_path);
  free(include);
  free(exclude);
  return exit_code;
}
