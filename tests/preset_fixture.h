/* The recipe presets as precis_recipe values for tests, by name or by table position. */
#ifndef PRECIS_TEST_PRESET_FIXTURE_H
#define PRECIS_TEST_PRESET_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "recipe.h"

static inline const precis_recipe *preset_recipe_at(size_t index) {
  static precis_recipe cache[PRECIS_RECIPE_PRESET_MAX];
  static bool ready[PRECIS_RECIPE_PRESET_MAX];
  if (index >= precis_recipe_preset_count()) {
    fprintf(stderr, "preset_recipe_at(%zu): no such preset\n", index);
    abort();
  }
  if (!ready[index]) {
    if (precis_recipe_from_preset(precis_recipe_preset_at(index), &cache[index]) != PRECIS_OK) abort();
    ready[index] = true;
  }
  return &cache[index];
}

static inline const precis_recipe *preset_recipe(const char *name) {
  return preset_recipe_at(precis_recipe_preset_index(name));
}

#define PRESET_COUNT ((int)precis_recipe_preset_count())

#endif
