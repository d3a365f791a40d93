/* A converted checkpoint's declaration (src/data/quant_decl.h), read from config.json /
 * hf_quant_config.json files written here:
 *   - a compressed-tensors QuantizationArgs without "symmetric" is symmetric: the library's pydantic
 *     model defaults it to True (compressed_tensors 0.20.1: QuantizationArgs.model_fields["symmetric"]
 *     .default is True; model_dump(exclude_defaults=True), hand-written and older configs leave it
 *     out); "symmetric": false is asymmetric;
 *   - an ignore / exclude_modules name prefix matches at module boundaries only: "model.layers.1"
 *     names model.layers.1 and what is inside it, never model.layers.10 ... model.layers.19. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/status.h"
#include "data/quant_decl.h"
#include "harness.h"

/* Scratch under the working directory (the build tree when CTest runs it), made and removed by each test. */
static char scratch[256];

static bool write_text(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  FILE *f = fopen(path, "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

static void make_scratch(void) {
  snprintf(scratch, sizeof scratch, "test_quant_decl.scratch.%ld", (long)getpid());
  if (mkdir(scratch, 0700) != 0) perror(scratch);
}

static void drop_scratch(void) {
  char path[512];
  static const char *const names[] = {"config.json", "hf_quant_config.json"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", scratch, names[i]);
    unlink(path);
  }
  rmdir(scratch);
}

TEST(symmetric_is_the_default) {
  make_scratch();
  CHECK(write_text("config.json",
                   "{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"compressed-tensors\","
                   " \"format\": \"pack-quantized\", \"config_groups\": {"
                   "  \"group_0\": {\"targets\": [\"re:.*self_attn.*\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\","
                   "   \"strategy\": \"group\", \"group_size\": 128}},"
                   "  \"group_1\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"int\","
                   "   \"symmetric\": false, \"strategy\": \"group\", \"group_size\": 128}}},"
                   " \"ignore\": [\"lm_head\"]}}"));
  precis_quant_decl d;
  CHECK_OK(precis_quant_decl_read(scratch, &d));
  CHECK(d.present);
  CHECK_EQ_INT(d.n_groups, 2);
  if (d.n_groups == 2) {
    CHECK_MSG(d.groups[0].weights.symmetric, "a QuantizationArgs without \"symmetric\" read as asymmetric "
                                             "(compressed-tensors' default is symmetric)");
    CHECK_MSG(!d.groups[1].weights.symmetric, "\"symmetric\": false read as symmetric");
    CHECK_EQ_INT(d.groups[0].weights.group_size, 128);
    char text[160];
    precis_quant_args_describe(&d.groups[0].weights, false, text, sizeof text);
    CHECK_MSG(strstr(text, "asymmetric") == NULL && strstr(text, "symmetric") != NULL, "described as \"%s\"", text);
  }
  bool ignored = false;
  CHECK_EQ_INT(precis_quant_decl_match(&d, "model.layers.0.self_attn.q_proj", &ignored), 0);
  CHECK_EQ_INT(precis_quant_decl_match(&d, "model.layers.0.mlp.down_proj", &ignored), 1);
  CHECK(!ignored);
  precis_quant_decl_match(&d, "lm_head", &ignored);
  CHECK(ignored);
  precis_quant_decl_free(&d);
  drop_scratch();
}

/* ModelOpt's exclude_modules are name prefixes or globs (its NVFP4 checkpoints list
 * "model.layers.1" style names). A prefix without the module boundary would also exclude
 * layers 10-19 and leave their quantized weights unchecked. */
TEST(prefix_matches_at_module_boundaries) {
  make_scratch();
  CHECK(write_text("hf_quant_config.json",
                   "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"NVFP4\","
                   " \"group_size\": 16, \"exclude_modules\": [\"lm_head\", \"model.layers.1\"]}}"));
  precis_quant_decl d;
  CHECK_OK(precis_quant_decl_read(scratch, &d));
  CHECK(d.present);
  static const struct {
    const char *layer;
    bool excluded;
  } cases[] = {
      {"model.layers.1.mlp.down_proj", true},       {"model.layers.1.self_attn.q_proj", true},
      {"model.layers.1", true},                     {"model.layers.10.mlp.down_proj", false},
      {"model.layers.13.self_attn.o_proj", false},  {"model.layers.19.mlp.gate_proj", false},
      {"model.layers.0.mlp.down_proj", false},      {"lm_head", true},
      {"model.layers.11.mlp.down_proj", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bool ignored = false;
    int group = precis_quant_decl_match(&d, cases[i].layer, &ignored);
    CHECK_MSG(ignored == cases[i].excluded, "%s: excluded %d, expected %d (exclude_modules: lm_head, "
              "model.layers.1)", cases[i].layer, ignored, cases[i].excluded);
    CHECK_EQ_INT(group, 0);
  }
  precis_quant_decl_free(&d);
  drop_scratch();
}

RUN_TESTS(T(symmetric_is_the_default), T(prefix_matches_at_module_boundaries))
