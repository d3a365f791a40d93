/* libprecis: recipe specs and the presets (DESIGN §3, §11). A recipe is a preset name ("bf16") or
 * a spec given field by field ("a=e4m3@row,b=e4m3@col,out=bf16"); its canonical form names every
 * field in a fixed order, and is how reports pair rows. */
#ifndef PRECIS_PUBLIC_SPEC_H
#define PRECIS_PUBLIC_SPEC_H

#include <stddef.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for any canonical spec and its terminating NUL. */
#define PRECIS_CANONICAL_MAX 256

/* The canonical spec of a preset name or a spec into buf. PRECIS_E_USAGE, with a message naming
 * the field and what it allows, when the text is no recipe; PRECIS_E_USAGE too when len is too small. */
precis_status precis_spec_canonical(const char *recipe, char *buf, size_t len);

/* One preset of `precis recipes`, in the table's order (the order of `all` and of reports). The
 * strings are static. */
typedef struct precis_recipe_entry {
  const char *name;
  const char *spec;        /* canonical */
  const char *description; /* one line */
  int in_all;              /* part of `--recipes all` */
  int high_precision;      /* part of `--recipes high-precision` */
  int baseline;            /* the reference recipe recommend compares against */
  int required;            /* one of DESIGN §3's required recipes */
  int cpu_supported;       /* the cpu backend (and so precis_emulate) runs it */
} precis_recipe_entry;

size_t precis_recipe_count(void);
/* PRECIS_E_USAGE when index >= precis_recipe_count(). */
precis_status precis_recipe_get(size_t index, precis_recipe_entry *out);

/* PRECIS_OK when the cpu backend (precis_emulate) runs the recipe, else PRECIS_E_UNSUPPORTED with
 * the reason (naming the field) in why and in precis_last_error(); PRECIS_E_USAGE for no recipe. */
precis_status precis_recipe_cpu_support(const char *recipe, char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif
