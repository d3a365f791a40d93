/* Recipe specs (DESIGN §11): every field of the grammar, every error, the canonical round trip,
 * presets <-> specs, the --recipes splitting rule, and the backends' answers for specs. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/backend.h"
#include "numerics/format.h"
#include "eval/cpu_quantized.h"
#include "numerics/quantize.h"
#include "kernels/cuda_api.h"
#include "eval/gemm_plan.h"
#include "harness.h"
#include "numerics/recipe.h"
#include "numerics/spec.h"

#define TAIL ",scale=dynamic,smooth=none,split=none"

static void check_canonical(const char *text, const char *canonical) {
  precis_spec s;
  precis_status st = precis_spec_parse(text, &s);
  CHECK_MSG(st == PRECIS_OK, "\"%s\": %s", text, precis_last_error());
  if (st != PRECIS_OK) return;
  char out[PRECIS_SPEC_TEXT_MAX];
  CHECK(precis_spec_format(&s, out, sizeof out));
  CHECK_MSG(strcmp(out, canonical) == 0, "\"%s\" -> \"%s\", expected \"%s\"", text, out, canonical);
  /* The canonical form reads back as itself. */
  precis_spec again;
  CHECK_OK(precis_spec_parse(out, &again));
  char out2[PRECIS_SPEC_TEXT_MAX];
  precis_spec_format(&again, out2, sizeof out2);
  CHECK_STR(out2, out);
  CHECK(precis_spec_equal(&s, &again));
}

/* The error names the field (or the piece) and says what is allowed. */
static void check_error(const char *text, const char *mentions, const char *allowed) {
  precis_spec s;
  precis_status st = precis_spec_parse(text, &s);
  CHECK_MSG(st == PRECIS_E_USAGE, "\"%s\" was accepted", text);
  if (st != PRECIS_E_USAGE) return;
  CHECK_MSG(strstr(precis_last_error(), mentions) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", text,
            precis_last_error(), mentions);
  CHECK_MSG(strstr(precis_last_error(), allowed) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", text,
            precis_last_error(), allowed);
}

TEST(presets_are_canonical_specs) {
  size_t baselines = 0;
  /* The seven of DESIGN §3, then issue 16's nine (all in `all`), fp8-fast and fp8-block-ue8m0
   * (optional), then the high-precision family. */
  CHECK_EQ_INT(precis_recipe_preset_all_count(), 16);
  /* fp8-fast, fp8-block-ue8m0, mxfp6-e2m3/e3m2; fp64, 3xtf32, bf16x3/6/9, ozaki-int8-3..8,
   * ozaki2-int8-8..20 and ozaki2-int8-fast-8..20, fp64-emu */
  CHECK_EQ_INT(precis_recipe_preset_count(), 16 + 4 + 4 + 5 + 6 + 26 + 1); /* + w4a8, w4afp8, w3a16, w2a16 */
  for (size_t i = 0; i < precis_recipe_preset_count(); i++) {
    const precis_recipe_preset *p = precis_recipe_preset_at(i);
    check_canonical(p->spec, p->spec);
    precis_recipe r;
    CHECK_OK(precis_recipe_parse(p->name, &r));
    CHECK_STR(r.name, p->name);
    CHECK_STR(r.canonical, p->spec);
    CHECK(r.preset == p);
    CHECK(precis_recipe_preset_of_spec(&r.spec) == p);
    CHECK(precis_recipe_preset_find(p->name) == p);
    CHECK_EQ_INT(precis_recipe_preset_index(p->name), i);
    CHECK_STR(precis_recipe_name_spec(p->name), p->spec);
    baselines += p->baseline;
    for (size_t j = 0; j < i; j++) {
      CHECK(strcmp(precis_recipe_preset_at(j)->name, p->name) != 0);
      CHECK(strcmp(precis_recipe_preset_at(j)->spec, p->spec) != 0);
    }
  }
  CHECK_EQ_INT(baselines, 1);
  CHECK_STR(precis_recipe_preset_baseline()->name, "fp32");
  CHECK(precis_recipe_preset_find("fp12") == NULL);
  CHECK_EQ_INT(precis_recipe_preset_index("fp12"), precis_recipe_preset_count());
  CHECK(precis_recipe_name_spec("fp12") == NULL);
}

/* DESIGN §3's seven recipes, spelled as specs (docs/decisions.md: tf32 and fp16acc16). */
TEST(presets_mean_what_design_says) {
  static const struct {
    const char *name, *spec;
  } expected[] = {
      {"fp32", "a=fp32,b=fp32,acc=fp32,out=fp32" TAIL},
      {"tf32", "a=tf32,b=tf32,acc=fp32,out=fp32" TAIL},
      {"fp16", "a=fp16,b=fp16,acc=fp32,out=fp16" TAIL},
      {"fp16acc16", "a=fp16,b=fp16,acc=fp16,out=fp16" TAIL},
      {"bf16", "a=bf16,b=bf16,acc=fp32,out=bf16" TAIL},
      {"int8", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32" TAIL},
      {"fp8", "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=bf16" TAIL},
  };
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    const precis_recipe_preset *p = precis_recipe_preset_at(i);
    CHECK_STR(p->name, expected[i].name);
    CHECK_STR(p->spec, expected[i].spec);
  }
  /* Other spellings of the same computations. */
  check_canonical("a=f32,b=f32,acc=fp32fast", expected[1].spec);
  check_canonical("a=fp32,acc=f32fast", expected[1].spec);
  check_canonical("out=fp16,b=f16,a=fp16,acc=f16", expected[3].spec);
  check_canonical("a=s8,b=s8", expected[5].spec);
  check_canonical("a=s8@row:sym,b=s8@col:sym,acc=s32,out=f32,scale=dynamic", expected[5].spec);
  check_canonical("a=e4m3,b=e4m3,out=bf16", expected[6].spec);
}

/* acc=fp32fast: tf32 operands with fp32 ones (the tf32 preset, above), cuBLASLt FAST_ACCUM with fp8
 * ones -- a field of its own that round-trips and makes a spec distinct from fp8's. */
TEST(fp8_fast_accumulation_is_its_own_spec) {
  const char *fast = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=bf16" TAIL;
  check_canonical("a=e4m3,acc=f32fast,out=bf16", fast);
  check_canonical("a=e4m3,b=e4m3,acc=fp32fast,out=bf16", fast);
  check_canonical(fast, fast);
  check_canonical("a=e4m3@row,b=e5m2@col,acc=f32fast", "a=e4m3@row,b=e5m2@col,acc=fp32fast,out=fp32" TAIL);
  precis_spec f, plain;
  CHECK_OK(precis_spec_parse(fast, &f));
  CHECK_OK(precis_spec_parse(precis_recipe_preset_find("fp8")->spec, &plain));
  CHECK(f.fast_accum && !plain.fast_accum && f.acc == PRECIS_FMT_F32);
  CHECK(!precis_spec_equal(&f, &plain));
  CHECK_STR(precis_spec_acc_name(&f), "fp32fast");
  const precis_recipe_preset *p = precis_recipe_preset_find("fp8-fast");
  CHECK(p && strcmp(p->spec, fast) == 0 && p->optional);
  /* fp8-fast and fp8 are two recipes in one list; fp8-fast is not in `all`. */
  precis_recipe_list l;
  CHECK(precis_recipe_list_parse("fp8-fast,a=e4m3,acc=f32fast,out=bf16,int8", &l) == PRECIS_E_USAGE); /* the same */
  CHECK_OK(precis_recipe_list_parse("fp8,fp8-fast", &l));
  CHECK_EQ_INT((long long)l.count, 2);
  precis_recipe_list_free(&l);
  CHECK_OK(precis_recipe_list_parse("all", &l));
  for (size_t i = 0; i < l.count; i++) CHECK_MSG(strcmp(l.items[i].name, "fp8-fast") != 0, "fp8-fast in all");
  CHECK_EQ_INT((long long)l.count, (long long)precis_recipe_preset_all_count());
  precis_recipe_list_free(&l);
  /* The describe line says so. */
  char line[512];
  precis_spec_describe(&f, line, sizeof line);
  CHECK_MSG(strstr(line, "FAST_ACCUM") != NULL, "%s", line);
  /* Where FAST_ACCUM means nothing: one fp8 operand, or scales applied per k-block. */
  check_error("a=e4m3,b=bf16,acc=fp32fast", "acc=fp32fast with a=e4m3,b=bf16", "both operands e4m3 or e5m2");
  check_error("a=e4m3@k128,b=e4m3@128x128,acc=fp32fast", "a=e4m3@k128", "tensor, row (A) or col (B)");
  check_error("a=e4m3,b=e4m3@mx,acc=f32fast", "b=e4m3@mx", "tensor, row (A) or col (B)");
}

TEST(every_field_parses) {
  /* a, b: formats, defaults of the other operand, granularities, conventions. */
  check_canonical("a=bf16", "a=bf16,b=bf16,acc=fp32,out=fp32" TAIL);
  check_canonical("b=fp16", "a=fp16,b=fp16,acc=fp32,out=fp32" TAIL);
  check_canonical("a=f64", "a=fp64,b=fp64,acc=fp64,out=fp32" TAIL);
  check_canonical("a=e4m3@row,b=e4m3@col,out=bf16", "a=e4m3@row,b=e4m3@col,acc=fp32,out=bf16" TAIL);
  check_canonical("a=e4m3@k128,b=e4m3@128x128,out=bf16", "a=e4m3@k128,b=e4m3@128x128,acc=fp32,out=bf16" TAIL);
  check_canonical("a=e5m2@mx,b=e4m3@mx-rceil", "a=e5m2@mx,b=e4m3@mx-rceil,acc=fp32,out=fp32" TAIL);
  check_canonical("a=e2m1,b=e2m1@nv", "a=e2m1@mx,b=e2m1@nv,acc=fp32,out=fp32" TAIL);
  check_canonical("a=bf16,b=s4@k128,out=bf16", "a=bf16,b=s4@k128:sym,acc=fp32,out=bf16" TAIL);
  check_canonical("a=bf16,b=u4@k64", "a=bf16,b=u4@k64:asym,acc=fp32,out=fp32" TAIL);
  check_canonical("a=bf16,b=u4", "a=bf16,b=u4@k128:asym,acc=fp32,out=fp32" TAIL);
  check_canonical("b=s4", "a=s4@k128:sym,b=s4@k128:sym,acc=s32,out=fp32" TAIL);
  check_canonical("a=s8@tensor:sym-half,b=s8@64x32", "a=s8@tensor:sym-half,b=s8@64x32:sym,acc=s32,out=fp32" TAIL);
  check_canonical("a=s8@k32,b=s8@tensor:sym", "a=s8@k32:sym,b=s8@tensor:sym,acc=s32,out=fp32" TAIL);
  /* acc and out. */
  check_canonical("a=fp16,acc=fp16,out=e4m3", "a=fp16,b=fp16,acc=fp16,out=e4m3" TAIL);
  check_canonical("a=bf16,acc=fp64,out=fp64", "a=bf16,b=bf16,acc=fp64,out=fp64" TAIL);
  check_canonical("a=fp32,out=tf32", "a=fp32,b=fp32,acc=fp32,out=tf32" TAIL);
  check_canonical("a=e5m2,out=e5m2", "a=e5m2@tensor,b=e5m2@tensor,acc=fp32,out=e5m2" TAIL);
  check_canonical("a=s8,b=s8,acc=fp32", "a=s8@row:sym,b=s8@col:sym,acc=fp32,out=fp32" TAIL);
  /* scale: static methods need A per tensor. */
  check_canonical("a=s8@tensor,b=s8,scale=absmax",
                  "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=absmax,smooth=none,split=none");
  check_canonical("a=s8@tensor,b=s8,scale=mse",
                  "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=mse,smooth=none,split=none");
  check_canonical("a=s8@tensor,b=s8,scale=percentile=99.90",
                  "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=percentile=99.9,smooth=none,split=none");
  check_canonical("a=e4m3@tensor,scale=percentile=100",
                  "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=fp32,scale=percentile=100,smooth=none,split=none");
  /* smooth */
  check_canonical("a=s8,smooth=0.5", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=0.5,split=none");
  check_canonical("a=s8,smooth=.75", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=0.75,split=none");
  check_canonical("a=s8,smooth=0.1", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=0.1,split=none");
  check_canonical("a=s8,smooth=auto", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=auto,split=none");
  check_canonical("a=s8,smooth=none", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32" TAIL);
  /* split */
  static const char *splits[] = {"tf32x3",      "bf16x3",       "bf16x6",           "bf16x9",          "int8x2",
                                 "int8x7",      "int8x16",      "crt-int8x2",       "crt-int8x20",     "crt-int8x14-fast",
                                 "crt-int8x2-fast", "none"};
  for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
    char in[64], want[160];
    snprintf(in, sizeof in, "a=fp32,split=%s", splits[i]);
    snprintf(want, sizeof want, "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=%s", splits[i]);
    check_canonical(in, want);
  }
}

/* An operand given alone is copied to the other with the other's own defaults: b=s8 gives A the
 * activations' per-row scales (s8@row), not B's per-column ones; a=s8 gives B s8@col. */
TEST(operand_copied_from_the_other_takes_its_own_defaults) {
  check_canonical("b=s8", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32" TAIL);
  check_canonical("a=s8", "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32" TAIL);
  check_canonical("b=s8@tensor", "a=s8@row:sym,b=s8@tensor:sym,acc=s32,out=fp32" TAIL);
  check_canonical("a=s8@tensor:sym-half", "a=s8@tensor:sym-half,b=s8@col:sym,acc=s32,out=fp32" TAIL);
}

TEST(every_error_names_the_field_and_what_is_allowed) {
  check_error("", "empty field", "recipe spec");
  check_error("a=bf16,", "empty field", "recipe spec");
  check_error("a=", "a= has no value", "a=");
  check_error("x=1", "unknown field \"x\"", "a, b, acc, out, scale, smooth, split");
  check_error("bf16,a=bf16", "\"bf16\" is not a field", "a=, b=, acc=");
  check_error("a=bf16,a=fp16", "a given twice", "a");
  check_error("out=bf16", "needs a= or b=", "operand");
  check_error("a=fp12", "a=fp12: unknown format \"fp12\"", "fp64, fp32, tf32, fp16, bf16, e4m3, e5m2, e2m1, e2m3, e3m2, s8, s4, u4");
  check_error("b=s32", "b=s32: unknown format", "s8, s4, u4");
  check_error("a=e8m0", "a=e8m0: unknown format", "e2m3, e3m2, s8, s4, u4"); /* a block scale, not an operand */
  check_error("a=fp16,out=e8m0", "out=e8m0: unknown output format", "e4m3, e5m2");
  check_error("a=int8", "a=int8: unknown format", "s8");
  check_error("a=bf16@row", "a=bf16@row", "e4m3, e5m2, e2m1, s8, s4 and u4");
  check_error("a=s8@foo", "a=s8@foo: unknown granularity \"foo\"", "tensor, row, col, k<G>, <R>x<C>, mx, mx-rceil, nv");
  check_error("a=s8@k0", "a=s8@k0: group size", "from 1 to");
  check_error("a=s8@k12x", "a=s8@k12x: group size", "from 1 to");
  check_error("b=s8@0x4", "b=s8@0x4: block", "<R>x<C>");
  check_error("b=s8@4x", "b=s8@4x: block", "<R>x<C>");
  check_error("a=s8@col", "a=s8@col: A's scales cannot be per column", "tensor, row, k<G>");
  check_error("a=s8,b=s8@row", "b=s8@row: B's scales cannot be per row", "tensor, col, k<G>");
  check_error("a=s8@mx", "a=s8@mx: MX blocks", "e4m3, e5m2, e3m2, e2m3 or e2m1");
  check_error("a=e4m3@nv", "a=e4m3@nv: NVFP4", "e2m1");
  check_error("a=e4m3@tensor:sym", "a=e4m3@tensor:sym: a scale convention", "s8, s4 and u4");
  check_error("a=s8@row:foo", "a=s8@row:foo: unknown scale convention", "sym, sym-half or asym");
  check_error("a=s8@row:asym", "a=s8@row:asym", "zero points need u4");
  check_error("a=bf16,b=u4@k128:sym", "b=u4@k128:sym", "asym");
  check_error("a=s8:sym", "a=s8:sym", "FMT@GRAN:CONV");
  check_error("a=bf16,acc=bf16", "acc=bf16: unknown accumulation", "fp64, fp32, fp32fast, fp16 or s32");
  check_error("a=bf16,acc=s32", "acc=s32", "integer operands");
  check_error("a=bf16,out=s8", "out=s8: unknown output format", "fp64, fp32, tf32, fp16, bf16, e4m3, e5m2");
  check_error("a=bf16,out=e2m1", "out=e2m1", "fp64, fp32");
  check_error("a=s8@tensor,scale=foo", "scale=foo: unknown scale method", "dynamic, absmax, percentile=<P> or mse");
  check_error("a=s8@tensor,scale=percentile=0", "scale=percentile=0", "(0, 100]");
  check_error("a=s8@tensor,scale=percentile=100.5", "scale=percentile=100.5", "(0, 100]");
  check_error("a=s8@tensor,scale=percentile=x", "scale=percentile=x", "(0, 100]");
  check_error("a=s8@tensor,scale=percentile=", "scale=percentile=", "(0, 100]");
  check_error("a=bf16,scale=absmax", "scale=absmax: static scales", "not bf16");
  check_error("a=s8@row,scale=mse", "scale=mse", "a=s8@tensor");
  check_error("a=s8,smooth=2", "smooth=2", "[0, 1], auto or none");
  check_error("a=s8,smooth=half", "smooth=half", "[0, 1], auto or none");
  check_error("a=s8,smooth=nan", "smooth=nan", "[0, 1]");
  check_error("a=fp32,split=foo", "split=foo: unknown split", "none, tf32x3, bf16x3, bf16x6, bf16x9, int8x<N>, cublas-emu, crt-int8x<N> or crt-int8x<N>-fast");
  check_error("a=fp32,split=int8x1", "split=int8x1", "from 2 to 16");
  check_error("a=fp32,split=int8x17", "split=int8x17", "from 2 to 16");
  check_error("a=fp32,split=crt-int8x1", "split=crt-int8x1", "from 2 to 20");
  check_error("a=fp32,split=crt-int8x21-fast", "split=crt-int8x21-fast", "from 2 to 20");
  check_error("a=fp32,split=crt-int8x16-slow", "split=crt-int8x16-slow", "crt-int8x<N>-fast");
  check_error("a=fp32,split=crt-int8x", "split=crt-int8x", "from 2 to 20");
  char overlong[400];
  memset(overlong, 'a', sizeof overlong - 1);
  overlong[sizeof overlong - 1] = '\0';
  check_error(overlong, "recipe spec of 399 characters", "at most");
}

static size_t list_count(const char *text, precis_recipe_list *out) {
  precis_status st = precis_recipe_list_parse(text, out);
  CHECK_MSG(st == PRECIS_OK, "\"%s\": %s", text, precis_last_error());
  return st == PRECIS_OK ? out->count : 0;
}

TEST(recipe_lists_split_at_preset_names) {
  precis_recipe_list l;
  CHECK_EQ_INT(list_count("fp32,bf16,int8", &l), 3);
  if (l.count == 3) CHECK(strcmp(l.items[0].name, "fp32") == 0 && strcmp(l.items[2].name, "int8") == 0);
  precis_recipe_list_free(&l);
  /* A spec's fields run until the next item without '=': fp8, one spec, int8. */
  CHECK_EQ_INT(list_count("fp8,a=bf16,b=bf16,out=f32,int8", &l), 3);
  if (l.count == 3) {
    CHECK_STR(l.items[0].name, "fp8");
    CHECK_STR(l.items[1].canonical, "a=bf16,b=bf16,acc=fp32,out=fp32" TAIL);
    CHECK_STR(l.items[1].name, l.items[1].canonical); /* a spec is named by its canonical form */
    CHECK(l.items[1].preset == NULL);
    CHECK_STR(l.items[2].name, "int8");
  }
  precis_recipe_list_free(&l);
  CHECK_EQ_INT(list_count("a=s8@tensor,b=s8,scale=percentile=99.9,fp32", &l), 2);
  precis_recipe_list_free(&l);
  /* Two specs need a preset between them; without one they are one spec. */
  CHECK(precis_recipe_list_parse("a=bf16,b=bf16,a=fp16", &l) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "a given twice") != NULL);
  /* all: every preset in table order. */
  CHECK_EQ_INT(list_count("all", &l), precis_recipe_preset_all_count());
  for (size_t i = 0; i < l.count; i++) CHECK_STR(l.items[i].name, precis_recipe_preset_at(i)->name);
  precis_recipe_list_free(&l);
  CHECK_EQ_INT(list_count("all,a=bf16,out=fp32", &l), precis_recipe_preset_all_count() + 1);
  precis_recipe_list_free(&l);
  /* Every preset is in `all`, in high-precision, or optional (fp8-fast, fp8-block-ue8m0, mxfp6-*,
   * w4a8, w4afp8, w3a16, w2a16). */
  CHECK_EQ_INT(list_count("high-precision", &l), precis_recipe_preset_count() - precis_recipe_preset_all_count() - 8);
  precis_recipe_list_free(&l);
  /* A range of a preset family, in order; every member must exist. */
  CHECK_EQ_INT(list_count("fp64,ozaki-int8-3..8", &l), 7);
  if (l.count == 7) {
    CHECK_STR(l.items[1].name, "ozaki-int8-3");
    CHECK_STR(l.items[6].name, "ozaki-int8-8");
    CHECK_STR(l.items[6].canonical, "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x8");
  }
  precis_recipe_list_free(&l);
  /* Ozaki scheme II: both variants as families, 8..20 moduli. */
  CHECK_EQ_INT(list_count("ozaki2-int8-14..16,ozaki2-int8-fast-8..20", &l), 3 + 13);
  if (l.count == 16) {
    CHECK_STR(l.items[2].canonical, "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x16");
    CHECK_STR(l.items[15].canonical,
              "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x20-fast");
  }
  precis_recipe_list_free(&l);
  CHECK(precis_recipe_list_parse("ozaki2-int8-7..8", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("ozaki-int8-3..9", &l) == PRECIS_E_USAGE);
  CHECK_MSG(strstr(precis_last_error(), "ozaki-int8-9") != NULL, "%s", precis_last_error());
  CHECK(precis_recipe_list_parse("ozaki-int8-8..3", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("ozaki-int8-4..4,ozaki-int8-4", &l) == PRECIS_E_USAGE);
  /* Duplicates by canonical spec, whatever the spelling. */
  CHECK(precis_recipe_list_parse("fp32,fp32", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("all,bf16", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("bf16,a=bf16,out=bf16", &l) == PRECIS_E_USAGE);
  CHECK_MSG(strstr(precis_last_error(), "\"bf16\"") && strstr(precis_last_error(), "same recipe"), "%s",
            precis_last_error());
  CHECK(precis_recipe_list_parse("tf32,a=fp32,acc=fp32fast", &l) == PRECIS_E_USAGE);
  /* Bad items. */
  CHECK(precis_recipe_list_parse("fp32,,bf16", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("fp32,", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("", &l) == PRECIS_E_USAGE);
  CHECK(precis_recipe_list_parse("fp9", &l) == PRECIS_E_USAGE);
  CHECK_MSG(strstr(precis_last_error(), "fp9") && strstr(precis_last_error(), "fp16acc16"), "%s", precis_last_error());
  CHECK(precis_recipe_list_parse("a=bf16,b=bf16,oops", &l) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "oops") != NULL);
  CHECK(precis_recipe_list_parse("fp8,a=fp12", &l) == PRECIS_E_USAGE);
  CHECK(strstr(precis_last_error(), "a=fp12") != NULL);
}

TEST(static_activation_scales_rewrite_the_spec) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("int8", &r));
  precis_recipe_set_static_act_scale(&r, PRECIS_SCALE_PERCENTILE, 99.99);
  CHECK_STR(r.name, "int8");
  CHECK_STR(r.canonical,
            "a=s8@tensor:sym,b=s8@col:sym,acc=s32,out=fp32,scale=percentile=99.99,smooth=none,split=none");
  CHECK(strstr(r.description, "static") != NULL);
  CHECK_OK(precis_recipe_parse("a=s8,b=s8", &r));
  precis_recipe_set_static_act_scale(&r, PRECIS_SCALE_ABSMAX, 0);
  CHECK_STR(r.name, r.canonical);
  CHECK(strstr(r.canonical, "scale=absmax") != NULL);
  /* Float recipes and dynamic keep their spec. */
  CHECK_OK(precis_recipe_parse("fp8", &r));
  precis_recipe_set_static_act_scale(&r, PRECIS_SCALE_MSE, 0);
  CHECK_STR(r.canonical, precis_recipe_preset_find("fp8")->spec);
  CHECK_OK(precis_recipe_parse("int8", &r));
  precis_recipe_set_static_act_scale(&r, PRECIS_SCALE_DYNAMIC, 0);
  CHECK_STR(r.canonical, precis_recipe_preset_find("int8")->spec);
}

static long long bytes_of(const char *text, long long m, long long n, long long k, long long batch, bool b_batched) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse(text, &r));
  return precis_spec_tensor_bytes(&r.spec, m, n, k, batch, b_batched);
}

TEST(tensor_bytes_follow_the_formats_and_scales) {
  /* m=3 n=5 k=7 batch=2, b shared: A 42, B 35, C 30 elements. */
  CHECK_EQ_INT(bytes_of("fp32", 3, 5, 7, 2, false), (42 + 35 + 30) * 4);
  CHECK_EQ_INT(bytes_of("bf16", 3, 5, 7, 2, false), (42 + 35 + 30) * 2);
  CHECK_EQ_INT(bytes_of("fp16acc16", 3, 5, 7, 2, false), (42 + 35 + 30) * 2);
  /* int8: codes, f32 output, int32 accumulators, 6 row and 5 column scales. */
  CHECK_EQ_INT(bytes_of("int8", 3, 5, 7, 2, false), 42 + 35 + 30 * 4 + 30 * 4 + (6 + 5) * 4);
  CHECK_EQ_INT(bytes_of("int8", 3, 5, 7, 2, true), 42 + 70 + 30 * 4 + 30 * 4 + (6 + 10) * 4);
  /* fp8: codes, bf16 output, two per-tensor scales. */
  CHECK_EQ_INT(bytes_of("fp8", 3, 5, 7, 2, false), 42 + 35 + 30 * 2 + 8);
  /* 4-bit B in groups of 4 along k: 35 codes = 18 bytes, ceil(7/4) = 2 groups per column. */
  CHECK_EQ_INT(bytes_of("a=bf16,b=s4@k4,out=bf16", 3, 5, 7, 2, false), 42 * 2 + 18 + 30 * 2 + 5 * 2 * 4);
  /* Asymmetric: the 10 zero points too, packed two per byte. */
  CHECK_EQ_INT(bytes_of("a=bf16,b=u4@k4:asym,out=bf16", 3, 5, 7, 2, false), 42 * 2 + 18 + 30 * 2 + 5 * 2 * 4 + 5);
  /* mxfp4: 42 and 35 e2m1 codes (21 and 18 bytes), one E8M0 byte per 32 k of each row of A (6) and
   * column of B (5). nvfp4: one E4M3 byte per 16 k, plus an f32 tensor scale per operand. */
  CHECK_EQ_INT(bytes_of("mxfp4", 3, 5, 7, 2, false), 21 + 18 + 30 * 2 + 6 + 5);
  CHECK_EQ_INT(bytes_of("nvfp4", 3, 5, 7, 2, false), 21 + 18 + 30 * 2 + 6 + 4 + 5 + 4);
  /* A b per batch element: each b matrix its own E4M3 grid and fp32 tensor scale. */
  CHECK_EQ_INT(bytes_of("nvfp4", 3, 5, 7, 2, true), 21 + 35 + 30 * 2 + 6 + 4 + 2 * (5 + 4));
  /* fp8-block: A 1x128 groups (6 f32 scales), B 128x128 blocks (1 per matrix; b per batch: 2). */
  CHECK_EQ_INT(bytes_of("fp8-block", 3, 5, 7, 2, true), 42 + 70 + 30 * 2 + 6 * 4 + 2 * 4);
  /* fp8 output: e4m3 codes of C and D's f32 scale. */
  CHECK_EQ_INT(bytes_of("a=e4m3@tensor,b=e4m3@tensor,out=e4m3", 3, 5, 7, 2, false), 42 + 35 + 30 + 8 + 4);
}

TEST(backends_answer_from_the_spec) {
  const precis_backend *cpu = precis_backend_cpu();
  char why[256];
  for (size_t i = 0; i < precis_recipe_preset_count(); i++) {
    precis_recipe r;
    CHECK_OK(precis_recipe_from_preset(precis_recipe_preset_at(i), &r));
    bool cuda_only = r.spec.split == PRECIS_SPLIT_CUBLAS_EMU;
    CHECK_MSG(cpu->supports(NULL, &r.spec, why, sizeof why) != cuda_only, "%s: %s", r.name, why);
    if (precis_split_is_crt(r.spec.split)) {
      /* Ozaki scheme II runs on the cpu only: the cuda backend refuses it, saying so. */
      CHECK(r.preset->high_precision && !precis_lt_route_find(&r.spec, NULL, 0));
      CHECK_MSG(!precis_cuda_spec_supported(&r.spec, 10, 0, why, sizeof why) &&
                    strstr(why, "Ozaki scheme II is not built on the cuda backend"),
                "%s: %s", r.name, why);
      continue;
    }
    if (r.preset->high_precision) {
      /* Issue 19: fp64 and cuBLAS's emulation are one cuBLASLt call each (a route), the splits several
       * (src/eval/split_plan.h); the emulation needs Blackwell. */
      bool single = r.spec.split == PRECIS_SPLIT_NONE || cuda_only;
      const precis_lt_route *route = precis_lt_route_find(&r.spec, why, sizeof why);
      CHECK_MSG(single ? route && strcmp(route->name, r.name) == 0 : !route, "%s: %s", r.name, why);
      CHECK_MSG(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why) == !cuda_only, "%s: %s", r.name, why);
      if (cuda_only) CHECK(strstr(why, "sm_100") && precis_cuda_spec_supported(&r.spec, 10, 0, why, sizeof why));
      continue;
    }
    const precis_lt_route *route = precis_lt_route_find(&r.spec, why, sizeof why);
    if (strncmp(r.name, "mxfp6-", 6) == 0) {
      /* No cuBLASLt route: the bf16 GEMM of the exactly dequantized inputs on every device. */
      precis_spec sub;
      CHECK_MSG(!route && precis_lt_emulated_on(&r.spec, 10, 0, &sub, NULL, 0), "%s", r.name);
      continue;
    }
    if (strcmp(r.name, "fp8-block-ue8m0") == 0) {
      /* UE8M0 scales from the host quantizer into fp8-block's fp32 scale tensors (powers of two). */
      CHECK_MSG(route && strcmp(route->name, "fp8-block") == 0, "%s: %s", r.name, why);
      continue;
    }
    if (strcmp(r.name, "fp8-rowwise") == 0 || strcmp(r.name, "fp8-block") == 0) {
      /* Native on sm_90 through cuBLASLt's scale modes, not below. */
      CHECK_MSG(route && strcmp(route->name, r.name) == 0, "%s: %s", r.name, why);
      CHECK_MSG(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why), "%s: %s", r.name, why);
      CHECK(!precis_cuda_spec_supported(&r.spec, 8, 9, why, sizeof why) && strstr(why, "sm_90"));
      continue;
    }
    if (strcmp(r.name, "w4a8") == 0 || strcmp(r.name, "w4afp8") == 0) {
      /* Mixed-input int4 x 8-bit GEMMs: no cuBLASLt route, said plainly (issue 39). */
      CHECK_MSG(!route && !precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why) &&
                    strstr(why, "not supported on cuda") != NULL, "%s: %s", r.name, why);
      continue;
    }
    if (strcmp(r.name, "w3a16") == 0 || strcmp(r.name, "w2a16") == 0) {
      /* Weight-only like w4a16: the host dequantizes, then the bf16 GEMM. */
      precis_spec sub;
      CHECK_MSG(!route && precis_lt_emulated_on(&r.spec, 9, 0, &sub, NULL, 0), "%s: %s", r.name, why);
      continue;
    }
    if (r.preset->optional) {
      /* fp8-fast: the fp8 route plus FAST_ACCUM. */
      CHECK_MSG(route && strcmp(route->name, r.name) == 0 && route->fast_accum, "%s: %s", r.name, why);
      CHECK_MSG(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why), "%s: %s", r.name, why);
      continue;
    }
    if (strcmp(r.name, "mxfp8") == 0 || strcmp(r.name, "mxfp4") == 0 || strcmp(r.name, "nvfp4") == 0) {
      /* Native on sm_100 (VEC32_UE8M0 / VEC16_UE4M3); below, the bf16 GEMM of the exactly
       * dequantized inputs (nv: with the tensor scales in alpha), down to sm_80. */
      precis_spec sub;
      CHECK_MSG(route && strcmp(route->name, r.name) == 0 && route->min_cc == 100, "%s: %s", r.name, why);
      CHECK_MSG(!precis_lt_emulated_on(&r.spec, 10, 0, &sub, why, sizeof why), "%s native on sm_100", r.name);
      CHECK_MSG(precis_lt_emulated_on(&r.spec, 9, 0, &sub, why, sizeof why), "%s emulated on sm_90", r.name);
      CHECK(strstr(why, "not a fused kernel's speed") && (strcmp(r.name, "nvfp4") != 0 || strstr(why, "alpha")));
      const precis_lt_route *plain = precis_lt_route_find(&sub, NULL, 0);
      CHECK_MSG(plain && strcmp(plain->name, "bf16") == 0, "%s: emulated as %s", r.name, plain ? plain->name : "?");
      CHECK_MSG(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why), "%s: %s", r.name, why);
      CHECK_MSG(precis_cuda_spec_supported(&r.spec, 10, 0, why, sizeof why), "%s: %s", r.name, why);
      CHECK(!precis_cuda_spec_supported(&r.spec, 7, 5, why, sizeof why) && strstr(why, "sm_80"));
      continue;
    }
    if (i >= 7) {
      /* Issue 16's presets: no cuda route yet, and the reason names the way planned for it. */
      static const struct {
        const char *name, *why;
      } planned[] = {{"fp8-rowwise", "OUTER_VEC_32F"}, {"fp8-block", "VEC128_32F"},  {"w8a16", "weight-only"},
                     {"w4a16", "weight-only"},         {"w4a16-asym", "weight-only"}, {"mxfp8", "VEC32_UE8M0"},
                     {"mxfp4", "VEC32_UE8M0"},         {"nvfp4", "VEC16_UE4M3"},      {"int8-sq", "SmoothQuant"}};
      CHECK_MSG(!route && strstr(why, planned[i - 7].why) && strcmp(r.name, planned[i - 7].name) == 0, "%s: %s",
                r.name, why);
      /* Weight-only and MX x MX run on cuda as the bf16 GEMM of dequantized inputs (sm_80+). */
      precis_spec sub;
      bool emulated = precis_lt_dequant_emulation(&r.spec, &sub, why, sizeof why);
      bool expect = strcmp(planned[i - 7].why, "weight-only") == 0 || strcmp(r.name, "mxfp8") == 0 ||
                    strcmp(r.name, "mxfp4") == 0;
      CHECK_MSG(emulated == expect, "%s: emulated %d", r.name, emulated);
      CHECK_EQ_INT(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why), expect);
      if (expect) {
        const precis_lt_route *plain = precis_lt_route_find(&sub, NULL, 0);
        CHECK_MSG(plain && strcmp(plain->name, "bf16") == 0, "%s: emulated as %s", r.name, plain ? plain->name : "?");
        CHECK(!precis_cuda_spec_supported(&r.spec, 7, 5, why, sizeof why) && strstr(why, "sm_80"));
      }
      continue;
    }
    CHECK_MSG(route && strcmp(route->name, r.name) == 0, "%s: %s", r.name, why);
    CHECK_MSG(precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why), "%s: %s", r.name, why);
  }
  static const struct {
    const char *spec;
    bool cpu;
    const char *cpu_why;
    bool cuda;
    const char *cuda_why;
  } cases[] = {
      {"a=bf16,b=bf16,out=fp32", true, "", true, ""}, /* the bf16 splits' product route */
      {"a=bf16,b=bf16,out=fp16", true, "", false, "no cuBLASLt route"},
      {"a=e4m3,b=bf16,out=bf16", true, "", true, ""}, /* A dequantized to bf16 (precis_lt_dequant_emulation) */
      {"a=e4m3,b=bf16,out=fp32", true, "", false, "weight-only"},
      {"a=s8@tensor,b=s8", true, "", false, "int8 route takes s8:sym A per row"},
      {"a=s8@tensor,b=s8,scale=absmax", true, "", true, ""},
      {"a=e2m1,b=e2m1", true, "", false, "VEC32_UE8M0"},
      {"a=bf16,b=s4@k128", true, "", false, "weight-only"},
      {"a=e5m2,b=e5m2", true, "", false, "e5m2 x e5m2"},
      {"a=e4m3@row,b=e4m3@col,out=bf16", true, "", true, ""},
      {"a=e4m3@row,b=e4m3@col,out=fp32", true, "", false, "fp8-rowwise route"},
      {"a=e4m3@1x128,b=e4m3@128x128,out=bf16", true, "", true, ""}, /* 1x128 on A is k128 */
      {"a=e4m3@k128,b=e4m3@128x64,out=bf16", true, "", false, "BLK128x128_32F: b=e4m3@128x128"},
      {"a=e4m3@k64,b=e4m3@128x128,out=bf16", true, "", false, "VEC128_32F"},
      {"a=e4m3@tensor,b=e4m3@tensor,out=e4m3", true, "", true, ""},
      {"a=e4m3@tensor,b=e4m3@tensor,out=e5m2", true, "", false, "e4m3 D only"},
      {"a=e4m3@128x128,b=e4m3@128x128", true, "", false, "never BLK x BLK"},
      {"a=e4m3@row,b=e4m3@col,acc=fp16", false, "acc=fp16 with fp32 group scales", false, "OUTER_VEC_32F"},
      {"a=e5m2@tensor,b=e4m3@tensor,scale=absmax", true, "", false, "e4m3 x e4m3 only"},
      {"a=e4m3@tensor,scale=mse", false, "scale=mse: the clip search minimizes the s8", false, "no cuBLASLt route"},
      {"a=u4@tensor:asym,b=u4@col:asym,scale=absmax", false, "static zero points", false, "int8 route takes"},
      {"a=bf16,b=s4@k128,smooth=auto", false, "smooth=auto", false, "SmoothQuant"},
      {"a=s4@k32,b=s4@k32", true, "", false, "int8 route takes"},
      {"a=s8,smooth=0.5", true, "", false, "SmoothQuant"},
      {"a=s8,b=s8,acc=fp32", true, "", false, "int8 route takes"},
      {"a=e4m3@tensor,scale=absmax", true, "", false, "no cuBLASLt route"},
      {"a=fp32,split=tf32x3", true, "", true, ""},
      {"a=bf16,split=tf32x3", false, "split=tf32x3: splits take fp32 or fp64", false, "a=fp32, b=fp32, acc=fp32"},
      {"a=fp32,acc=fp64,split=tf32x3", false, "emulates fp32", false, "a=fp32, b=fp32, acc=fp32, out=fp32"},
      {"a=fp32,split=int8x4", false, "acc=fp64", false, "acc=fp64"},
      {"a=fp32,acc=fp64,split=int8x4", true, "", true, ""},
      {"a=fp32,split=crt-int8x14", false, "acc=fp64", false, "Ozaki scheme II is not built on the cuda backend"},
      {"a=fp32,acc=fp64,split=crt-int8x14-fast", true, "", false, "Ozaki scheme II is not built on the cuda backend"},
      {"a=fp64,b=fp32", false, "a=fp64, b=fp64 and acc=fp64 together", false, "the cuda route is a=fp64,b=fp64"},
      {"a=fp64", true, "", false, "out=fp32 has none"},
      {"a=fp64,out=fp64,split=cublas-emu", false, "cuda backend only", false, "sm_100"},
      {"a=fp32,split=cublas-emu", false, "cuda backend only", false, "takes a=fp64,b=fp64,acc=fp64,out=fp64"},
      {"a=fp32,out=fp64", false, "out=fp64 needs acc=fp64", false, "fp64"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    precis_recipe r;
    CHECK_OK(precis_recipe_parse(cases[i].spec, &r));
    bool cpu_ok = cpu->supports(NULL, &r.spec, why, sizeof why);
    CHECK_MSG(cpu_ok == cases[i].cpu && strstr(why, cases[i].cpu_why), "%s: cpu %d \"%s\"", cases[i].spec, cpu_ok, why);
    bool cuda_ok = precis_cuda_spec_supported(&r.spec, 9, 0, why, sizeof why);
    CHECK_MSG(cuda_ok == cases[i].cuda && strstr(why, cases[i].cuda_why), "%s: cuda %d \"%s\"", cases[i].spec, cuda_ok,
              why);
  }
}

/* The outputs of one spec on a small workload (calib/a = a, so static absmax equals dynamic per
 * tensor), or NULL with the row status in *status. */
static float *cpu_output(const char *spec, precis_row_status *status) {
  enum { M = 5, N = 6, K = 24, BATCH = 2 };
  static float a[BATCH * M * K], b[K * N];
  static double c_ref[BATCH * M * N], ab_abs[BATCH * M * N];
  for (int i = 0; i < BATCH * M * K; i++) a[i] = (float)sin(0.37 * i) * (i % 7 == 0 ? 9.0f : 1.0f);
  for (int i = 0; i < K * N; i++) b[i] = (float)cos(0.11 * i + 0.5);
  static char name[] = "w", kind[] = "gemm", empty[] = "";
  precis_workload_info info = {.name = name, .kind = kind, .description = empty, .a_dist = empty, .b_dist = empty,
                               .reference = empty, .m = M, .n = N, .k = K, .batch = BATCH, .calib_samples = BATCH};
  precis_workload_data data = {.a = a, .b = b, .c_ref = c_ref, .ab_abs = ab_abs, .calib_a = a};
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 1, o.max_samples = 1, o.max_time_ms = 1;
  precis_recipe r;
  if (precis_recipe_parse(spec, &r) != PRECIS_OK) return NULL;
  precis_case_output out;
  precis_case_output_init(&out);
  const precis_backend *cpu = precis_backend_cpu();
  CHECK_OK(cpu->run_case(NULL, &r.spec, &info, &data, &o, &out));
  *status = out.status;
  float *c = out.c;
  out.c = NULL;
  precis_case_output_free(&out);
  return c;
}

static bool same_bits(const float *x, const float *y, size_t n) { return x && y && memcmp(x, y, n * sizeof *x) == 0; }

/* Specs beyond the presets that the cpu backend runs follow from the presets' arithmetic. */
TEST(cpu_runs_specs_by_their_fields) {
  enum { COUNT = 2 * 5 * 6 };
  precis_row_status st = PRECIS_ROW_FAILED;
  /* bf16 operands with a float32 output, rounded to bf16 afterwards, are the bf16 preset. */
  float *bf16 = cpu_output("bf16", &st), *wide = cpu_output("a=bf16,b=bf16,out=fp32", &st);
  CHECK(st == PRECIS_ROW_OK && bf16 && wide);
  if (wide) precis_round_bf16_array(wide, wide, COUNT);
  CHECK_MSG(same_bits(bf16, wide, COUNT), "bf16 = round_bf16(a=bf16,b=bf16,out=fp32)");
  free(bf16), free(wide);
  /* int8 with A's scale per tensor: dynamic over A equals static absmax over a calibration split
   * that is A itself; per row differs (the rows' amax differ). */
  float *dyn = cpu_output("a=s8@tensor,b=s8", &st), *stat = cpu_output("a=s8@tensor,b=s8,scale=absmax", &st);
  float *row = cpu_output("int8", &st);
  CHECK(st == PRECIS_ROW_OK && dyn && stat && row);
  CHECK_MSG(same_bits(dyn, stat, COUNT), "a=s8@tensor dynamic = static absmax when calib/a = a");
  CHECK_MSG(!same_bits(dyn, row, COUNT), "per tensor differs from per row");
  free(dyn), free(stat), free(row);
  /* Mixed operands: e4m3 A per tensor with bf16 B runs; bf16 B with fp32 A differs from fp32. */
  float *mixed = cpu_output("a=e4m3,b=bf16,out=bf16", &st);
  CHECK(st == PRECIS_ROW_OK && mixed);
  free(mixed);
  float *half = cpu_output("a=fp32,b=bf16", &st), *full = cpu_output("fp32", &st);
  CHECK(half && full && !same_bits(half, full, COUNT));
  free(half), free(full);
  /* Issue 16's general path (cpu_quantized.c) reproduces the original int8 and fp8 paths bit for bit
   * when its groups cover the same elements: k<24> with k = 24 is per row, a 10x24 block of the
   * stacked 2x5x24 A and a 24x6 block of B are per tensor. */
  float *int8_k = cpu_output("a=s8@k24,b=s8@col,acc=s32", &st), *int8_p = cpu_output("int8", &st);
  CHECK(st == PRECIS_ROW_OK && int8_k && int8_p);
  CHECK_MSG(same_bits(int8_k, int8_p, COUNT), "a=s8@k24 (one group per row) = int8");
  free(int8_k), free(int8_p);
  float *fp8_b = cpu_output("a=e4m3@10x24,b=e4m3@24x6,out=bf16", &st), *fp8_p = cpu_output("fp8", &st);
  CHECK(st == PRECIS_ROW_OK && fp8_b && fp8_p);
  CHECK_MSG(same_bits(fp8_b, fp8_p, COUNT), "whole-matrix blocks = fp8 per tensor");
  free(fp8_b), free(fp8_p);
  /* Finer groups change the result (k<8>: three segments per dot product). */
  float *int8_k8 = cpu_output("a=s8@k8,b=s8@col,acc=s32", &st), *int8_r = cpu_output("int8", &st);
  CHECK(st == PRECIS_ROW_OK && int8_k8 && int8_r && !same_bits(int8_k8, int8_r, COUNT));
  free(int8_k8), free(int8_r);
  /* An fp8 output is the f32 result quantized per tensor (scale_D = amax/448) and dequantized. */
  float *wide8 = cpu_output("a=e4m3@row,b=e4m3@col,out=fp32", &st), *out8 = cpu_output("a=e4m3@row,b=e4m3@col,out=e4m3", &st);
  CHECK(st == PRECIS_ROW_OK && wide8 && out8);
  if (wide8 && out8) {
    precis_quant_desc d = {.elem = PRECIS_FMT_E4M3, .gran = PRECIS_QUANT_GRAN_TENSOR, .side = PRECIS_OPERAND_A};
    uint8_t codes[COUNT];
    float scale, back[COUNT];
    precis_quant_tensor t = {.codes = codes, .scales = &scale};
    CHECK_OK(precis_quantize(&d, wide8, COUNT, 1, &t));
    CHECK_OK(precis_dequantize(&d, &t, COUNT, 1, back));
    CHECK_MSG(same_bits(back, out8, COUNT), "out=e4m3 = dequant(quant_tensor(out=fp32))");
    CHECK(!same_bits(wide8, out8, COUNT));
  }
  free(wide8), free(out8);
  /* A valid spec without an implementation: a row `unsupported`, no output. */
  float *none = cpu_output("a=e4m3@row,b=e4m3@col,acc=fp16", &st);
  CHECK(none == NULL && st == PRECIS_ROW_UNSUPPORTED);
  free(none);
}

/* One cpu run of a spec on the given data (NULL with *status on failure). */
static float *cpu_run(const char *spec, const precis_workload_info *info, const precis_workload_data *data,
                      precis_row_status *status) {
  precis_case_options o;
  precis_case_options_default(&o);
  o.warmup_calls = 1, o.warmup_ms = 0, o.min_samples = 1, o.max_samples = 1, o.max_time_ms = 1;
  precis_recipe r;
  if (precis_recipe_parse(spec, &r) != PRECIS_OK) return NULL;
  precis_case_output out;
  precis_case_output_init(&out);
  CHECK_OK(precis_backend_cpu()->run_case(NULL, &r.spec, info, data, &o, &out));
  *status = out.status;
  float *c = out.c;
  out.c = NULL;
  precis_case_output_free(&out);
  return c;
}

/* The plain GEMM of dequantized inputs with fp32 sums (OpenBLAS sgemm), rounded to `out`: what the
 * cpu backend's quantized path sums such specs with. (The cpu backend's own plain bf16/fp16 spec
 * now runs the target's tensor-core MMA model, issue 33, so it is not the comparison here.) */
static float *sgemm_of(const precis_workload_info *info, const float *a, const float *b, precis_format_id out) {
  size_t m = (size_t)info->m, n = (size_t)info->n, k = (size_t)info->k, batch = (size_t)info->batch;
  float *c = malloc(batch * m * n * sizeof *c);
  if (!c) return NULL;
  for (size_t g = 0; g < batch; g++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a + g * m * k, (int)k,
                b + (info->b_batched ? g * k * n : 0), (int)n, 0.0f, c + g * m * n, (int)n);
  const precis_format *f = precis_format_get(out);
  if (out != PRECIS_FMT_F32 && f->round_array) f->round_array(c, c, batch * m * n);
  return c;
}

/* The cuda backend runs weight-only and MX x MX specs as the plain bf16 GEMM of inputs dequantized
 * on the host (precis_lt_dequant_emulation): on the cpu backend the fp32-sum GEMM of those inputs
 * is the spec's own output, bit for bit, so the two backends multiply the same values. */
TEST(dequantized_inputs_reproduce_the_spec) {
  enum { M = 6, N = 10, K = 70, BATCH = 2, COUNT = BATCH * M * N };
  static float a[BATCH * M * K], b[BATCH * K * N];
  static double c_ref[COUNT], ab_abs[COUNT];
  for (int i = 0; i < BATCH * M * K; i++) a[i] = (float)sin(0.41 * i) * (i % 11 == 0 ? 30.0f : 1.0f);
  for (int i = 0; i < BATCH * K * N; i++) b[i] = (float)cos(0.17 * i + 0.3) * 0.1f;
  static char name[] = "w", kind[] = "gemm", empty[] = "";
  for (int batched = 0; batched < 2; batched++) {
    precis_workload_info info = {.name = name, .kind = kind, .description = empty, .a_dist = empty, .b_dist = empty,
                                 .reference = empty, .m = M, .n = N, .k = K, .batch = BATCH, .b_batched = batched};
    precis_workload_data data = {.a = a, .b = b, .c_ref = c_ref, .ab_abs = ab_abs};
    const char *specs[] = {"w8a16", "w4a16", "w4a16-asym", "mxfp8", "mxfp4", "a=fp16,b=e2m1@k32,out=fp16"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
      precis_recipe r;
      CHECK_OK(precis_recipe_parse(specs[i], &r));
      precis_spec sub;
      CHECK_MSG(precis_lt_dequant_emulation(&r.spec, &sub, NULL, 0), "%s is emulated on cuda", specs[i]);
      char plain[PRECIS_SPEC_TEXT_MAX], reason[256] = "";
      precis_spec_format(&sub, plain, sizeof plain);
      float *ad = NULL, *bd = NULL;
      size_t clipped = 0;
      CHECK_OK(precis_cpu_quant_dequantized_inputs(&r.spec, &info, &data, &ad, &bd, &clipped, reason, sizeof reason));
      precis_row_status st1 = PRECIS_ROW_FAILED, st2 = PRECIS_ROW_FAILED;
      float *own = cpu_run(specs[i], &info, &data, &st1), *emulated = sgemm_of(&info, ad, bd, sub.out);
      st2 = emulated ? PRECIS_ROW_OK : PRECIS_ROW_FAILED;
      CHECK_MSG(st1 == PRECIS_ROW_OK && st2 == PRECIS_ROW_OK && own && emulated && same_bits(own, emulated, COUNT),
                "%s (b batched %d) = %s on the dequantized inputs", specs[i], batched, plain);
      free(own), free(emulated), free(ad), free(bd);
    }
  }
  /* nv's f32 tensor scale is applied after the sum: no plain-GEMM form. */
  precis_workload_info info = {.name = name, .kind = kind, .description = empty, .a_dist = empty, .b_dist = empty,
                               .reference = empty, .m = M, .n = N, .k = K, .batch = 1};
  precis_workload_data data = {.a = a, .b = b, .c_ref = c_ref, .ab_abs = ab_abs};
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("nvfp4", &r));
  float *ad = NULL, *bd = NULL;
  size_t clipped = 0;
  char reason[256];
  CHECK(precis_cpu_quant_dequantized_inputs(&r.spec, &info, &data, &ad, &bd, &clipped, reason, sizeof reason) ==
        PRECIS_E_UNSUPPORTED);
  CHECK(ad == NULL && bd == NULL);
}

static double weight_bits_of(const char *text, long long k, long long n) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse(text, &r));
  return precis_operand_weight_total_bits(&r.spec.b, k, n);
}

static double per_weight_of(const char *text) {
  precis_recipe r;
  CHECK_OK(precis_recipe_parse(text, &r));
  return precis_operand_weight_bits_per_weight(&r.spec.b);
}

/* DESIGN §17's effective bits, computed by hand: element bits + scale (+ zero point) bits per group. */
TEST(effective_bits_count_scales_and_zero_points) {
  CHECK(per_weight_of("nvfp4") != per_weight_of("nvfp4")); /* NaN: NVFP4's tensor scale depends on the shape */
  CHECK(per_weight_of("mxfp4") == 4.25);
  CHECK(per_weight_of("mxfp8") == 8.25);
  CHECK(per_weight_of("w4a16") == 4.125);                /* a bf16 scale per 128 */
  CHECK(per_weight_of("w4a16-asym") == 4.0 + 20.0 / 128); /* + a 4-bit zero point per 128 */
  CHECK(per_weight_of("bf16") == 16 && per_weight_of("fp32") == 32 && per_weight_of("3xtf32") == 32);
  CHECK(isnan(per_weight_of("int8")) && isnan(per_weight_of("fp8")) && isnan(per_weight_of("fp8-block")));
  /* k = 256, n = 64: 16384 weights. */
  CHECK(weight_bits_of("nvfp4", 256, 64) == 4.0 * 16384 + 64 * 16 * 8 + 32); /* 4.5 bits + one f32 tensor scale */
  CHECK(weight_bits_of("mxfp4", 256, 64) == 4.25 * 16384);
  CHECK(weight_bits_of("mxfp8", 256, 64) == 8.25 * 16384);
  CHECK(weight_bits_of("w4a16", 256, 64) == 4.125 * 16384);
  CHECK(weight_bits_of("w4a16-asym", 256, 64) == 4.0 * 16384 + 64 * 2 * (16 + 4));
  CHECK(weight_bits_of("int8", 256, 64) == 8.0 * 16384 + 64 * 16);   /* a bf16 scale per output channel */
  CHECK(weight_bits_of("fp8", 256, 64) == 8.0 * 16384 + 32);         /* one f32 scale */
  CHECK(weight_bits_of("bf16", 256, 64) == 16.0 * 16384);
  /* Ragged shapes round the last group or block up: k = 200 is two groups of 128 along k. */
  CHECK(weight_bits_of("w4a16", 200, 3) == 4.0 * 600 + 3 * 2 * 16);
  CHECK(weight_bits_of("fp8-block", 200, 130) == 8.0 * 26000 + 2 * 2 * 32);
  CHECK(weight_bits_of("mxfp4", 40, 1) == 4.0 * 40 + 2 * 8);
  char text[200];
  precis_recipe r;
  CHECK_OK(precis_recipe_parse("w4a16", &r));
  precis_operand_weight_bits_describe(&r.spec.b, text, sizeof text);
  CHECK_STR(text, "4 + 16/128 = 4.125 bits per weight (s4 elements, a 16-bit scale per 128 along k)");
}

RUN_TESTS(T(presets_are_canonical_specs), T(presets_mean_what_design_says), T(fp8_fast_accumulation_is_its_own_spec),
          T(every_field_parses), T(operand_copied_from_the_other_takes_its_own_defaults),
          T(every_error_names_the_field_and_what_is_allowed), T(recipe_lists_split_at_preset_names),
          T(static_activation_scales_rewrite_the_spec), T(tensor_bytes_follow_the_formats_and_scales), T(effective_bits_count_scales_and_zero_points),
          T(backends_answer_from_the_spec), T(cpu_runs_specs_by_their_fields), T(dequantized_inputs_reproduce_the_spec))
