/* Recipes: presets (names for specs, DESIGN §3 and §11) and the recipe lists of the command line.
 * The preset table is the only list of presets; its order is the order of `all`, of reports and of
 * `precis recipes`. */
#ifndef PRECIS_RECIPE_H
#define PRECIS_RECIPE_H

#include <stdbool.h>
#include <stddef.h>

#include "format.h"
#include "spec.h"
#include "base/status.h"

typedef struct precis_recipe_preset {
  const char *name;
  const char *spec;        /* canonical spec text (a test checks format(parse(spec)) == spec) */
  const char *description; /* one line, printed in reports */
  bool baseline;           /* the reference recipe recommend compares against (exactly one) */
  bool required;           /* DESIGN §3: fp32, fp16, bf16, int8 are required */
  /* Issue 19's family (fp64, float splits, Ozaki): not part of `all`, which stays the recipes of
   * ML inference; `--recipes high-precision` names them all. */
  bool high_precision;
  /* A variant kept out of `all` (docs/decisions.md says why for each): run when named in --recipes,
   * listed by `precis recipes`. */
  bool optional;
} precis_recipe_preset;

/* Bound for per-preset arrays (device inventories); recipe.c asserts the table fits. */
#define PRECIS_RECIPE_PRESET_MAX 64

size_t precis_recipe_preset_count(void);
size_t precis_recipe_preset_all_count(void); /* presets in `all`: those neither high_precision nor optional */
const precis_recipe_preset *precis_recipe_preset_at(size_t index);
const precis_recipe_preset *precis_recipe_preset_find(const char *name); /* NULL when unknown */
const precis_recipe_preset *precis_recipe_preset_baseline(void);
/* The preset whose spec is this one, or NULL. */
const precis_recipe_preset *precis_recipe_preset_of_spec(const precis_spec *spec);
/* The spec text a recipe name stands for in a row without a spec (reports from before specs): a
 * preset's spec, the name itself when it is a spec, else NULL. */
const char *precis_recipe_name_spec(const char *name);
/* Table position (for ordering); precis_recipe_preset_count() for a name that is no preset. */
size_t precis_recipe_preset_index(const char *name);

/* One recipe of a run: the name the user gave (a preset's, or the canonical spec for a spec given
 * field by field), its spec and its canonical text. A value type: copy it freely. */
typedef struct precis_recipe {
  char name[PRECIS_SPEC_TEXT_MAX];
  char canonical[PRECIS_SPEC_TEXT_MAX];
  char description[384];
  precis_spec spec;
  const precis_recipe_preset *preset; /* NULL for a spec given field by field */
} precis_recipe;

precis_status precis_recipe_from_preset(const precis_recipe_preset *preset, precis_recipe *out);
/* A preset name or a spec ("a=bf16,b=bf16"). */
precis_status precis_recipe_parse(const char *text, precis_recipe *out);

/* A --recipes list: presets and specs separated by commas; PREFIX<A>..<B> ("ozaki-int8-3..8")
 * stands for the presets PREFIX<A> to PREFIX<B>. Splitting rule: an item containing '='
 * is a field and belongs to the spec that the first such item started; the spec ends at the next
 * item without '=', which is a preset name (or `all`: every preset but the high-precision and the
 * optional ones, in table order; `high-precision`: those). So
 * "fp8,a=bf16,b=bf16,out=fp32,int8" is fp8, the spec a=bf16,b=bf16,out=fp32, and int8. Two
 * recipes with the same canonical spec are refused (PRECIS_E_USAGE). */
typedef struct precis_recipe_list {
  precis_recipe *items; /* malloc'ed */
  size_t count;
} precis_recipe_list;

precis_status precis_recipe_list_parse(const char *text, precis_recipe_list *out);
/* Appends one recipe; refuses a canonical spec already in the list. */
precis_status precis_recipe_list_add(precis_recipe_list *list, const precis_recipe *recipe);
void precis_recipe_list_free(precis_recipe_list *list);

/* The legacy --int8-act-scale option: recipes with integer A scaled per row and dynamically
 * become static per-tensor scales found by `method` from the calibration split (spec fields
 * a=s8@tensor, scale=...). The name stays; the spec and description change. */
void precis_recipe_set_static_act_scale(precis_recipe *recipe, precis_scale_method method, double percentile);

#endif
