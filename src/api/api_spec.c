/* libprecis: recipe specs and presets (include/precis/spec.h) over numerics/recipe.h and the cpu
 * backend's own answer to "does it run here". */
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "eval/backend.h"
#include "numerics/recipe.h"
#include "precis/spec.h"

precis_status precis_spec_canonical(const char *recipe, char *buf, size_t len) {
  if (!recipe) return precis_fail(PRECIS_E_USAGE, "recipe: expected a preset name or a spec, got NULL");
  if (!buf || len == 0) return precis_fail(PRECIS_E_USAGE, "precis_spec_canonical: no output buffer");
  precis_recipe r;
  precis_status st = precis_recipe_parse(recipe, &r);
  if (st != PRECIS_OK) return st;
  if (strlen(r.canonical) >= len)
    return precis_fail(PRECIS_E_USAGE, "precis_spec_canonical: %zu bytes are too few for \"%s\"", len, r.canonical);
  snprintf(buf, len, "%s", r.canonical);
  return PRECIS_OK;
}

size_t precis_recipe_count(void) { return precis_recipe_preset_count(); }

precis_status precis_recipe_get(size_t index, precis_recipe_entry *out) {
  if (!out) return precis_fail(PRECIS_E_USAGE, "precis_recipe_get: no output");
  if (index >= precis_recipe_preset_count())
    return precis_fail(PRECIS_E_USAGE, "recipe index %zu: there are %zu presets", index, precis_recipe_preset_count());
  const precis_recipe_preset *p = precis_recipe_preset_at(index);
  memset(out, 0, sizeof *out);
  out->name = p->name;
  out->spec = p->spec;
  out->description = p->description;
  out->in_all = !p->high_precision && !p->optional;
  out->high_precision = p->high_precision;
  out->baseline = p->baseline;
  out->required = p->required;
  precis_recipe r;
  if (precis_recipe_from_preset(p, &r) == PRECIS_OK) {
    const precis_backend *cpu = precis_backend_cpu();
    out->cpu_supported = cpu->supports(NULL, &r.spec, NULL, 0);
  }
  return PRECIS_OK;
}

precis_status precis_recipe_cpu_support(const char *recipe, char *why, size_t len) {
  if (!recipe) return precis_fail(PRECIS_E_USAGE, "recipe: expected a preset name or a spec, got NULL");
  precis_recipe r;
  precis_status st = precis_recipe_parse(recipe, &r);
  if (st != PRECIS_OK) return st;
  char reason[512] = "";
  const precis_backend *cpu = precis_backend_cpu();
  bool ok = cpu->supports(NULL, &r.spec, reason, sizeof reason);
  if (why && len) snprintf(why, len, "%s", ok ? "" : reason);
  if (ok) return PRECIS_OK;
  return precis_fail(PRECIS_E_UNSUPPORTED, "%s: %s", recipe, reason);
}
