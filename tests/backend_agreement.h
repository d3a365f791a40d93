/* How far two backends' outputs of the same recipe may differ (tests/gpu/test_cuda_backend.c, and
 * tests/test_fp8_accumulation.c which checks the fp8 model on the CPU):
 *
 *   |gpu - cpu| <= 4 * gamma_k * slack * |a|·|b| + 2 * u_out * (|gpu| + |cpu|)
 *
 * Both approximate the same rounded-input product: each side's accumulation error is at most
 * gamma_k * |a|·|b| (precis_accumulation_gamma: k*u_acc, fp8 its own model), doubled once for the
 * two sides and once for truncating tensor cores; each output is rounded once (u_out). slack: fp8's
 * |q*s| may exceed |x| after rounding (1.25); |a|·|b| is of the unquantized inputs. */
#ifndef PRECIS_TESTS_BACKEND_AGREEMENT_H
#define PRECIS_TESTS_BACKEND_AGREEMENT_H

#include <math.h>
#include <stdbool.h>

#include "numerics/criteria.h"
#include "numerics/format.h"
#include "numerics/recipe.h"

typedef struct agreement {
  double acc_coef; /* times |a|·|b|: the accumulation part of the bound */
  double u_out;
} agreement;

static inline agreement agreement_for(const precis_spec *s, long long k) {
  bool fp8 = s->a.fmt == PRECIS_FMT_E4M3 || s->a.fmt == PRECIS_FMT_E5M2 || s->b.fmt == PRECIS_FMT_E4M3 ||
             s->b.fmt == PRECIS_FMT_E5M2;
  /* 4-bit operands (issue 16) round small values up by as much as half a step of a coarser grid. */
  bool fp4 = s->a.fmt == PRECIS_FMT_E2M1 || s->b.fmt == PRECIS_FMT_E2M1 || s->a.fmt == PRECIS_FMT_S4 ||
             s->b.fmt == PRECIS_FMT_S4 || s->a.fmt == PRECIS_FMT_U4 || s->b.fmt == PRECIS_FMT_U4;
  double slack = fp4 ? 1.5 : fp8 ? 1.25 : 1.0;
  return (agreement){4.0 * precis_accumulation_gamma(s, k) * slack, precis_format_get(s->out)->unit_roundoff};
}

static inline double agreement_bound(const agreement *a, double ab, double gpu, double cpu) {
  return a->acc_coef * ab + 2.0 * a->u_out * (fabs(gpu) + fabs(cpu)) + 1e-30;
}

/* The part of |gpu - cpu| that output rounding does not explain, in units of the accumulation
 * term: what the tensor cores' accumulation actually costs against the model (above 1: the model
 * is too optimistic). Output-rounding flips alone give 0. */
static inline double agreement_excess(const agreement *a, double ab, double gpu, double cpu) {
  double beyond = fabs(gpu - cpu) - 2.0 * a->u_out * (fabs(gpu) + fabs(cpu));
  if (!(beyond > 0)) return 0.0;
  return ab > 0 ? beyond / (a->acc_coef * ab) : INFINITY;
}

#endif
