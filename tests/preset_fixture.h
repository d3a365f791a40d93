/* The recipe presets as precis_recipe values for tests, by name or by position among the presets
 * of `all` (the high-precision family is tested on its own: tests/gpu/test_hiprec.c on cuda). */
#ifndef PRECIS_TEST_PRESET_FIXTURE_H
#define PRECIS_TEST_PRESET_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "numerics/recipe.h"

static inline const precis_recipe *preset_recipe_of_table(size_t index) {
  static precis_recipe cache[PRECIS_RECIPE_PRESET_MAX];
  static bool ready[PRECIS_RECIPE_PRESET_MAX];
  if (index >= precis_recipe_preset_count()) {
    fprintf(stderr, "preset_recipe_of_table(%zu): no such preset\n", index);
    abort();
  }
  if (!ready[index]) {
    if (precis_recipe_from_preset(precis_recipe_preset_at(index), &cache[index]) != PRECIS_OK) abort();
    ready[index] = true;
  }
  return &cache[index];
}

/* The index-th preset of `all`. */
static inline const precis_recipe *preset_recipe_at(size_t index) {
  for (size_t i = 0; i < precis_recipe_preset_count(); i++)
    if (!precis_recipe_preset_at(i)->high_precision && !precis_recipe_preset_at(i)->optional && index-- == 0) return preset_recipe_of_table(i);
  fprintf(stderr, "preset_recipe_at: no such preset\n");
  abort();
}

static inline const precis_recipe *preset_recipe(const char *name) {
  return preset_recipe_of_table(precis_recipe_preset_index(name));
}

#define PRESET_COUNT ((int)precis_recipe_preset_all_count())
/* Every preset, for tests of the cpu backend and of criteria (preset_recipe_of_table). */
#define PRESET_TABLE_COUNT ((int)precis_recipe_preset_count())

#endif
