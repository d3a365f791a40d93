/* precis import --model PATH: a dataset with one workload per linear layer of a safetensors
 * checkpoint (model.h says what a layer is). precis import hands every command line holding
 * --model to this file. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data/file_kind.h"
#include "data/model.h"
#include "data/model_converted.h"
#include "data/model_import.h"
#include "report/results.h"
#include "data/suite.h"
#include "eval/accept.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: precis import --model PATH [--layers GLOB]... [--exclude GLOB]... [options] -o OUT.h5\n\n"
          "One workload per linear layer of a model: PATH is a .safetensors file, a sharded checkpoint's\n"
          "*.safetensors.index.json, or a directory holding either. A linear layer is a 2-D \"<module>.weight\"\n"
          "tensor (F32, F16, BF16 or F8_E4M3); the workload is named after the module, b = W^T (k = in_features,\n"
          "n = out_features), with attributes layer and source (file, tensor, dtype, SHA-256 of the bytes).\n"
          "Tensors whose name contains \"embed\" (lookup tables) are skipped unless --layers names them.\n\n"
          "options:\n"
          "  --layers GLOB       only layers whose name matches (fnmatch; repeatable: any of them)\n"
          "  --exclude GLOB      skip layers whose name matches (repeatable)\n"
          "  --in-major GLOB     layers whose weight is stored [in, out] (transformers' Conv1D) instead of\n"
          "                      nn.Linear's [out, in] (repeatable). Read from config.json beside the weights\n"
          "                      when it says model_type gpt2 or openai-gpt (their c_attn, c_proj and c_fc;\n"
          "                      GPT-2's wte and wpe are lookups, skipped); --in-major none ignores config.json\n"
          "  --list              print the layers found and exit (no -o needed); with --converted, each layer's\n"
          "                      declared and stored format\n"
          "  --tokens M          rows of the synthetic activations a (default 32)\n"
          "  --a DIST            their distribution: a name or a YAML mapping such as '{dist: outlier_channels,\n"
          "                      ratio: 0.01, scale: 50}' (default outlier_channels)\n"
          "  --activations PATH  captured inputs instead, per layer an array of shape [samples, tokens, in_features]\n"
          "                      named after the layer: a safetensors file (tensor <layer>), an HDF5 file\n"
          "                      (/<layer>), a NumPy .npz (array <layer>: np.savez(PATH, **{layer: x})), a\n"
          "                      directory of <layer>.npy files, or one .npy when one layer is imported\n"
          "  --gradients PATH    dL/dY of a scalar loss at each layer's output, [samples, tokens, out_features], in\n"
          "                      the same kinds of file as --activations and for the same samples (precis.torch.capture\n"
          "                      writes both); the held-out samples' gradients are kept, and each row of a run reports\n"
          "                      the predicted loss change (taylor, fisher: docs/criteria.md)\n"
          "  --converted PATH    evaluate a converted checkpoint (file, index or directory) against PATH: b holds\n"
          "                      its weights dequantized (<layer>.weight in F8_E4M3 or I8 times <layer>.weight_scale,\n"
          "                      per tensor or per output channel; or compressed-tensors pack-quantized INT4/INT8:\n"
          "                      <layer>.weight_packed, weight_scale per group, optional weight_zero_point and\n"
          "                      weight_g_idx), c_ref stays a.W^T of the original weights;\n"
          "                      run --recipes fp32 then measures the conversion's error. What the producer\n"
          "                      declared (config.json's quantization_config, ModelOpt's hf_quant_config.json)\n"
          "                      is read first and every layer checked against it\n"
          "  --strip-prefix P    read names starting with P without it, in both checkpoints (a task head's\n"
          "                      \"bert.\", a wrapper's \"model.\")\n"
          "  --weights-only      with --converted: keep the activations as given; by default a holds them quantized\n"
          "                      as the producer declared (dynamic per token/group/tensor, or the checkpoint's\n"
          "                      static input_scale), the deployed scheme, and c_ref comes from the original a\n"
          "                      (kept as a_ref)\n"
          "  --force-foreign     import converted layers even when they are far from the original's (relative\n"
          "                      Frobenius norm above 0.5, 0.9 for 2/3-bit codes: \"not a conversion of this model\")\n"
          "  --batch B           held-out samples (default 1; from --activations: samples - calib)\n"
          "  --calib S           calibration samples (default 0; from --activations: the last S samples)\n"
          "  --seed S            seed for the synthetic activations (default 0)\n"
          "  --compress          gzip every dataset\n"
          "  --max-memory BYTES  what one layer's working set may hold (8G, 1.5GiB, 500M): its reference is\n"
          "                      computed fewer samples at a time, or the import is refused naming the figure\n"
          "                      (the estimate is printed before the first layer; docs/model.md \"Memory\")\n"
          "  --force             replace OUT.h5 when it exists\n"
          "  -o, --output OUT    the dataset to write\n"
          "  -q, --quiet         no progress bar on stderr\n\n"
          "example: precis import --model ./Llama-3.2-1B --layers 'model.layers.0.*' --tokens 64 -o llama.h5\n");
}

/* The distribution given to --a, parsed the way a suite's `a:` is. */
static precis_status parse_dist(const char *text, precis_dist *out) {
  if (strpbrk(text, "\n\r")) return precis_fail(PRECIS_E_USAGE, "--a: one line expected");
  char *yaml = precis_asprintf("workloads:\n  - name: x\n    m: 1\n    n: 1\n    k: 1\n    a: %s\n", text);
  if (!yaml) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  precis_suite suite;
  memset(&suite, 0, sizeof suite);
  precis_status st = precis_suite_parse(yaml, strlen(yaml), "--a", ".", &suite);
  free(yaml);
  if (st != PRECIS_OK) return st;
  if (suite.workloads[0].a.kind == PRECIS_DIST_FILE)
    st = precis_fail(PRECIS_E_USAGE, "--a: a file distribution is not for --model (use --activations FILE)");
  else
    st = precis_dist_copy(out, &suite.workloads[0].a);
  precis_suite_free(&suite);
  return st;
}

static bool parse_count(const char *text, long long lo, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (!text[0] || *end || errno || v < lo || v > INT32_MAX) return false;
  *out = v;
  return true;
}

static bool glob_any(const char *name, const char **globs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fnmatch(globs[i], name, 0) == 0) return true;
  return false;
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The module name of a converted checkpoint's weight tensor (<m>.weight, <m>.weight_packed), or NULL. */
static char *converted_layer_name(const char *tensor) {
  static const char *const suffixes[] = {".weight_packed", ".weight"};
  for (size_t i = 0; i < 2; i++)
    if (has_suffix(tensor, suffixes[i])) return precis_asprintf("%.*s", (int)(strlen(tensor) - strlen(suffixes[i])), tensor);
  return NULL;
}

static bool converted_has_layer(const precis_model *conv, const precis_model_layer *original) {
  const char *layer = original->name;
  size_t n = strlen(layer);
  if (original->n_experts) { /* an expert of a fused tensor: gpt-oss's <tensor>_blocks, or the tensor itself */
    const char *bracket = strrchr(layer, '[');
    size_t t = bracket ? (size_t)(bracket - layer) : n; /* the fused tensor's name, prefix stripped as the layer's */
    for (size_t i = 0; i < conv->n_layers; i++)
      if (strncmp(conv->layers[i].name, layer, t) == 0 &&
          (!strcmp(conv->layers[i].name + t, "_blocks") || !conv->layers[i].name[t]))
        return true;
    return false;
  }
  for (size_t i = 0; i < conv->n_layers; i++) {
    const char *t = conv->layers[i].name;
    if (strncmp(t, layer, n) == 0 && (!strcmp(t + n, ".weight") || !strcmp(t + n, ".weight_packed"))) return true;
  }
  return false;
}

/* Every original layer must be in the converted checkpoint; when one is not, the closest names
 * are shown, and a prefix one side has and the other lacks (a task head's "bert.", a wrapper's
 * "model.") is pointed at --strip-prefix. */
static precis_status check_converted_names(const precis_model *model, const precis_model *conv, const char *conv_path) {
  size_t n_missing = 0;
  const char *first = NULL;
  for (size_t i = 0; i < model->n_layers; i++)
    if (!converted_has_layer(conv, &model->layers[i]) && n_missing++ == 0) first = model->layers[i].name;
  if (!n_missing) return PRECIS_OK;
  char **names = calloc(conv->n_layers + 1, sizeof *names);
  size_t n_names = 0;
  if (!names) return precis_fail(PRECIS_E_NOMEM, "out of memory");
  for (size_t i = 0; i < conv->n_layers; i++) {
    char *name = converted_layer_name(conv->layers[i].name);
    if (name) names[n_names++] = name;
  }
  char closest[1200] = "", hint[400] = "";
  precis_closest_names(first, (const char *const *)names, n_names, closest, sizeof closest);
  size_t len = strlen(first);
  for (size_t i = 0; i < n_names && !hint[0]; i++) {
    size_t n = strlen(names[i]);
    if (n > len && names[i][n - len - 1] == '.' && strcmp(names[i] + n - len, first) == 0)
      snprintf(hint, sizeof hint, "; the converted checkpoint's names carry the prefix \"%.*s\" that the original's lack: "
               "--strip-prefix %.*s", (int)(n - len), names[i], (int)(n - len), names[i]);
    else if (len > n && first[len - n - 1] == '.' && strcmp(first + len - n, names[i]) == 0)
      snprintf(hint, sizeof hint, "; the original's names carry the prefix \"%.*s\" that the converted checkpoint's lack: "
               "--strip-prefix %.*s", (int)(len - n), first, (int)(len - n), first);
  }
  for (size_t i = 0; i < n_names; i++) free(names[i]);
  free(names);
  return precis_fail(PRECIS_E_INPUT, "%s: %zu of the %zu layers are not in this converted checkpoint, such as %s (no tensor "
                     "%s.weight or %s.weight_packed)%s%s", conv_path, n_missing, model->n_layers, first, first, first,
                     closest, hint);
}

/* Removes PREFIX from the names that start with it (the layers of the original, the tensors of a
 * converted checkpoint). */
static void strip_prefix(precis_model *m, const char *prefix) {
  size_t n = strlen(prefix);
  for (size_t i = 0; i < m->n_layers; i++)
    if (strncmp(m->layers[i].name, prefix, n) == 0 && m->layers[i].name[n])
      memmove(m->layers[i].name, m->layers[i].name + n, strlen(m->layers[i].name + n) + 1);
}

/* --list --converted: per layer, what the producer declared and what is stored. */
static int list_converted(const precis_model *model, const precis_model *conv, const precis_quant_decl *decl) {
  int exit_code = 0;
  if (decl->present) {
    char what[200];
    precis_quant_decl_describe(decl, what, sizeof what);
    printf("# declared: %s\n", what);
  } else {
    printf("# declared: nothing (no quantization_config in config.json, no hf_quant_config.json)\n");
  }
  printf("# layer\tshape\tdeclared\tfound\n");
  for (size_t i = 0; i < model->n_layers; i++) {
    const precis_model_layer *layer = &model->layers[i];
    precis_converted_format found;
    int group = -1;
    bool ignored = false;
    precis_status st = precis_model_converted_format(conv, decl, layer, &found, &group, &ignored);
    char declared[400] = "-", stored[200];
    if (ignored) snprintf(declared, sizeof declared, "ignored by the producer");
    else if (group >= 0) {
      char w[100], a[100];
      precis_quant_args_describe(&decl->groups[group].weights, false, w, sizeof w);
      precis_quant_args_describe(&decl->groups[group].input, true, a, sizeof a);
      snprintf(declared, sizeof declared, "%s: weights %s; activations %s", decl->groups[group].name, w, a);
    } else if (decl->present) snprintf(declared, sizeof declared, "not targeted");
    precis_converted_format_describe(&found, stored, sizeof stored);
    printf("%s\t%" PRId64 "x%" PRId64 "\t%s\t%s%s\n", layer->name, layer->out_features, layer->in_features, declared, stored,
           st != PRECIS_OK ? "\tMISMATCH" : "");
    if (st != PRECIS_OK) {
      fprintf(stderr, "precis import: %s\n", precis_last_error());
      exit_code = 2;
    }
  }
  return exit_code;
}

int precis_cmd_import_model(int argc, char **argv) {
  if (precis_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model_path = NULL, *output = NULL, *a_text = "outlier_channels", *activations = NULL, *converted = NULL,
             *prefix = NULL, *gradients = NULL;
  const char **include = calloc((size_t)argc, sizeof *include), **exclude = calloc((size_t)argc + 4, sizeof *exclude);
  const char **in_major = calloc((size_t)argc + 4, sizeof *in_major);
  size_t n_include = 0, n_exclude = 0, n_in_major = 0;
  bool read_config = true;
  bool list = false, force = false, compress = false, quiet = false, force_foreign = false, weights_only = false;
  int64_t tokens = 32, batch = 0, calib = 0, seed = 0;
  uint64_t max_memory = 0;
  int exit_code = 2;
  char *model_config = NULL; /* config.json in brief, recorded in the dataset for plan --serve */
  precis_model model, converted_model, model_tensors;
  precis_quant_decl model_decl, declared;
  memset(&model_decl, 0, sizeof model_decl);
  memset(&declared, 0, sizeof declared);
  memset(&model_tensors, 0, sizeof model_tensors);
  memset(&model, 0, sizeof model);
  memset(&converted_model, 0, sizeof converted_model);
  precis_dist a;
  memset(&a, 0, sizeof a);
  bool have_a = false;
  if (!include || !exclude || !in_major) {
    fprintf(stderr, "precis import: out of memory\n");
    goto done;
  }
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    bool takes_value = !strcmp(arg, "--model") || !strcmp(arg, "--layers") || !strcmp(arg, "--exclude") || !strcmp(arg, "--in-major") ||
                       !strcmp(arg, "--tokens") || !strcmp(arg, "--a") || !strcmp(arg, "--activations") || !strcmp(arg, "--gradients") ||
                       !strcmp(arg, "--batch") || !strcmp(arg, "--calib") || !strcmp(arg, "--seed") || !strcmp(arg, "-o") ||
                       !strcmp(arg, "--output") || !strcmp(arg, "--converted") || !strcmp(arg, "--strip-prefix") ||
                       !strcmp(arg, "--max-memory");
    if (takes_value && !value) {
      fprintf(stderr, "precis import: %s needs a value (see precis import --model x --help)\n", arg);
      goto done;
    }
    if (takes_value) i++;
    bool ok = true;
    if (!strcmp(arg, "--model")) model_path = value;
    else if (!strcmp(arg, "--layers")) include[n_include++] = value;
    else if (!strcmp(arg, "--exclude")) exclude[n_exclude++] = value;
    else if (!strcmp(arg, "--in-major") && !strcmp(value, "none")) read_config = false;
    else if (!strcmp(arg, "--in-major")) in_major[n_in_major++] = value;
    else if (!strcmp(arg, "--tokens")) ok = parse_count(value, 1, &tokens);
    else if (!strcmp(arg, "--batch")) ok = parse_count(value, 1, &batch);
    else if (!strcmp(arg, "--calib")) ok = parse_count(value, 0, &calib);
    else if (!strcmp(arg, "--seed")) ok = parse_count(value, 0, &seed);
    else if (!strcmp(arg, "--a")) a_text = value;
    else if (!strcmp(arg, "--activations")) activations = value;
    else if (!strcmp(arg, "--gradients")) gradients = value;
    else if (!strcmp(arg, "--converted")) converted = value;
    else if (!strcmp(arg, "--strip-prefix")) prefix = value;
    else if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) output = value;
    else if (!strcmp(arg, "--list")) list = true;
    else if (!strcmp(arg, "--force")) force = true;
    else if (!strcmp(arg, "--force-foreign")) force_foreign = true;
    else if (!strcmp(arg, "--weights-only")) weights_only = true;
    else if (!strcmp(arg, "--compress")) compress = true;
    else if (!strcmp(arg, "--max-memory")) {
      long long limit = 0;
      precis_status bytes_st = precis_accept_parse_bytes(value, &limit);
      if (bytes_st != PRECIS_OK) {
        precis_error_prefix("--max-memory");
        exit_code = precis_cli_report_error("import", bytes_st);
        goto done;
      }
      max_memory = (uint64_t)limit;
    }
    else if (!strcmp(arg, "-q") || !strcmp(arg, "--quiet")) quiet = true;
    else {
      fprintf(stderr, "precis import: --model: unknown argument %s (see precis import --model x --help)\n", arg);
      goto done;
    }
    if (!ok) {
      fprintf(stderr, "precis import: %s: expected a %s integer below 2^31, found \"%s\"\n", arg,
              !strcmp(arg, "--calib") || !strcmp(arg, "--seed") ? "non-negative" : "positive", value);
      goto done;
    }
  }
  if (!model_path || (!output && !list)) {
    fprintf(stderr, "precis import: --model PATH and -o OUT.h5 are required (see precis import --model x --help)\n");
    goto done;
  }
  precis_model_layout layout;
  memset(&layout, 0, sizeof layout);
  precis_status st = read_config ? precis_model_read_layout(model_path, &layout) : PRECIS_OK;
  if (st != PRECIS_OK) goto report;
  if (read_config && !list && (st = precis_model_read_config(model_path, &model_config)) != PRECIS_OK) goto report;
  for (size_t i = 0; i < layout.n_in_major; i++) in_major[n_in_major++] = layout.in_major[i];
  if (!n_include) /* a lookup table named by --layers is the user's choice */
    for (size_t i = 0; i < layout.n_lookups; i++) exclude[n_exclude++] = layout.lookups[i];
  /* --model takes the original weights: a quantized checkpoint read as one would lose its scales
   * (FP8 codes read as values) or its packed layers (skipped as not linear). */
  if ((st = precis_quant_decl_read(model_path, &model_decl)) != PRECIS_OK) goto report;
  if ((st = precis_model_tensors(model_path, &model_tensors)) != PRECIS_OK) goto report;
  char example[600];
  size_t n_quantized = precis_model_quantized_tensors(&model_tensors, example, sizeof example);
  if (model_decl.present || n_quantized) {
    char said[700] = "", held[800] = "";
    if (model_decl.present) {
      char what[200];
      precis_quant_decl_describe(&model_decl, what, sizeof what);
      snprintf(said, sizeof said, "its producer declares it quantized: %s", what);
    }
    if (n_quantized)
      snprintf(held, sizeof held, "%s%zu tensors hold quantization data, such as %s", said[0] ? "; " : "", n_quantized, example);
    fprintf(stderr,
            "precis import: %s%s is a quantized checkpoint (%s%s). --model takes the original, unquantized weights "
            "(read as one, its codes would lose their scales and its packed layers would be skipped); give this "
            "checkpoint as --converted: precis import --model ORIGINAL --converted %s -o OUT.h5\n",
            list ? "note: " : "", model_path, said, held, model_path);
    if (!list) goto done;
  }
  if ((st = precis_model_discover(model_path, include, n_include, exclude, n_exclude, &model)) != PRECIS_OK) goto report;
  /* A tied output projection (tie_word_embeddings: true, or not said, transformers' default) has no
   * lm_head.weight: its weight is the embedding table. It is imported when the captured
   * activations hold its inputs (the final hidden states), so that its logits are judged too;
   * without them nothing changes. */
  const char *tied_from = NULL;
  bool has_head = false;
  for (size_t i = 0; i < model.n_layers; i++) has_head |= precis_model_is_output_projection(model.layers[i].name);
  if (!has_head && activations && !converted && layout.tie_word_embeddings != 0 &&
      (!n_include || glob_any("lm_head", include, n_include)) && !glob_any("lm_head", exclude, n_exclude) &&
      precis_model_activations_hold(activations, "lm_head") &&
      (st = precis_model_add_tied_head(&model, &model_tensors, &tied_from)) != PRECIS_OK)
    goto report;
  /* --list without --activations lists the tied head too, marked: an import with a capture that
   * holds its inputs makes it, and the list is where a user looks for what an import makes. */
  bool tied_only_with_activations = false;
  if (list && !has_head && !activations && !converted && layout.tie_word_embeddings != 0 &&
      (!n_include || glob_any("lm_head", include, n_include)) && !glob_any("lm_head", exclude, n_exclude)) {
    if ((st = precis_model_add_tied_head(&model, &model_tensors, &tied_from)) != PRECIS_OK) goto report;
    tied_only_with_activations = tied_from != NULL;
  }
  if (tied_from && model_config) {
    /* plan charges a tied head what a deployed checkpoint adds (DESIGN §21): say which layer it is. */
    cJSON *doc = cJSON_Parse(model_config);
    char *text = NULL;
    if (doc && cJSON_AddStringToObject(doc, "tied_output_projection", "lm_head") &&
        cJSON_AddStringToObject(doc, "tied_to", tied_from) && (text = cJSON_PrintUnformatted(doc))) {
      free(model_config);
      model_config = text;
    }
    cJSON_Delete(doc);
  }
  size_t marked = precis_model_mark_in_major(&model, in_major, n_in_major);
  if (layout.experts_in_major) {
    size_t experts = precis_model_mark_experts_in_major(&model);
    if (experts && !list)
      fprintf(stderr, "precis import: config.json says model_type %s: its %zu expert layers are read as [experts, in, out] "
                      "(x @ W[e])\n", layout.model_type, experts);
  }
  if (layout.n_in_major && !list)
    fprintf(stderr, "precis import: config.json says model_type %s: %zu layers read as [in, out] (Conv1D)%s\n",
            layout.model_type, marked, layout.n_lookups ? ", its position and token tables skipped" : "");
  if (converted && (st = precis_quant_decl_read(converted, &declared)) != PRECIS_OK) goto report;
  if (converted && (st = precis_model_tensors(converted, &converted_model)) != PRECIS_OK) goto report;
  if (prefix) {
    strip_prefix(&model, prefix);
    if (converted) strip_prefix(&converted_model, prefix);
    declared.strip_prefix = prefix; /* its ignore and target names may carry the prefix or not */
  }
  if (converted && (st = check_converted_names(&model, &converted_model, converted)) != PRECIS_OK) goto report;
  if (list && converted) {
    exit_code = list_converted(&model, &converted_model, &declared);
    goto done;
  }
  if (list) {
    for (size_t i = 0; i < model.n_layers; i++) {
      const bool tied = tied_from && !strcmp(model.layers[i].name, "lm_head");
      printf("%s\t%" PRId64 "x%" PRId64 "\t%s\t%s%s", model.layers[i].name, model.layers[i].out_features,
             model.layers[i].in_features, model.layers[i].dtype, model.layers[i].file,
             model.layers[i].in_major ? "\tstored [in, out]" : "");
      if (tied) printf("\ttied to %s", tied_from);
      if (tied && tied_only_with_activations)
        printf(": imported only with --activations holding its inputs (the final hidden states)");
      putchar('\n');
    }
    exit_code = 0;
    goto done;
  }
  if ((st = parse_dist(a_text, &a)) != PRECIS_OK) goto report;
  have_a = true;
  if (converted && declared.present) {
    char what[200];
    precis_quant_decl_describe(&declared, what, sizeof what);
    if (!quiet) fprintf(stderr, "precis import: %s: declared %s; every layer is checked against it\n", converted, what);
  }
  precis_install_signal_handlers();
  precis_model_import_options options = {output, force, compress ? 4 : 0, !quiet, tokens, batch, calib, (uint64_t)seed,
                                         &a, activations, gradients, model_config, converted ? &converted_model : NULL,
                                         force_foreign, converted ? &declared : NULL, weights_only, max_memory};
  char id[65];
  if ((st = precis_model_import(&model, &options, id)) != PRECIS_OK) goto report;
  printf("%s: %zu linear layers of %s (of %zu tensors), dataset_id %s\n", output, model.n_layers, model_path,
         model.n_tensors, id);
  for (size_t i = 0; activations && i < model.n_layers; i++)
    if (precis_model_is_output_projection(model.layers[i].name))
      printf("%s: the output projection%s%s%s: its rows are logits workloads (output_kind = \"logits\"); a run reports "
             "KL(ref||q), KL(q||ref) per token and top-1 agreement for them\n", model.layers[i].name,
             tied_from && !strcmp(model.layers[i].name, "lm_head") ? ", tied to the input embeddings (tie_word_embeddings): "
                                                                    "weight " : "",
             tied_from && !strcmp(model.layers[i].name, "lm_head") ? tied_from : "",
             tied_from && !strcmp(model.layers[i].name, "lm_head") ? " (the checkpoint has no lm_head.weight)" : "");
  exit_code = 0;
  goto done;
report:
  exit_code = precis_cli_report_error("import", st);
done:
  if (have_a) precis_dist_free(&a);
  precis_model_free(&model);
  precis_model_free(&converted_model);
  precis_model_free(&model_tensors);
  precis_quant_decl_free(&model_decl);
  precis_quant_decl_free(&declared);
  free(include);
  free(exclude);
  free(in_major);
  free(model_config);
  return exit_code;
}
