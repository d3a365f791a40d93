/* What a target architecture does with one spec (DESIGN §19, issue 33): the cuda backend's way on
 * that compute capability (native route, host emulation, or refused, from capability.c's route
 * table), the accumulator row of the MMA family that then runs (src/numerics/target.h), and the
 * accumulator the cpu backend emulates for it. Shared by the cpu backend, `precis explain
 * --target` and the rows' details, so that all three say the same. */
#ifndef PRECIS_TARGET_PLAN_H
#define PRECIS_TARGET_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "numerics/spec.h"
#include "numerics/target.h"
#include "report/results.h"

typedef enum precis_target_way {
  PRECIS_TARGET_NATIVE,   /* a cuBLASLt route the target's tensor cores run */
  PRECIS_TARGET_EMULATED, /* the route needs a newer target; the cuda backend emulates it (host dequantization) */
  PRECIS_TARGET_REFUSED,  /* the route needs a newer target and has no emulation: the row is unsupported */
  PRECIS_TARGET_NO_ROUTE, /* precis has no cuda route for the spec at all: the cpu backend's arithmetic only */
} precis_target_way;

const char *precis_target_way_name(precis_target_way w); /* "native", "emulated", "refused", "cpu-only" */

typedef struct precis_target_plan {
  precis_target target;                /* resolved: never DEFAULT */
  precis_target_way way;
  const precis_accumulator_row *acc;   /* the MMA that runs (NULL: none, e.g. fp32/fp64 SIMT, refused) */
  precis_acc_model model;              /* what the cpu backend emulates (fraction_bits 0: its fp32 sums) */
  char why[400];                       /* the plan in words (the refusal's reason when refused) */
} precis_target_plan;

/* target DEFAULT means sm_90 (the cpu default). */
void precis_target_plan_of(const precis_spec *spec, precis_target target, precis_target_plan *plan);
/* The plan as a row's details: target, target_way, target_plan, and accumulator (the row's width,
 * promotion and source) when an MMA runs. */
void precis_target_plan_details(const precis_target_plan *plan, precis_kv_list *details);

#endif
