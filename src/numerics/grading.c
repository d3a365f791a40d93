/* The BLAS-3 grading fit (grading.h). */
#include "numerics/grading.h"

#include <math.h>
#include <stdbool.h>

const char *precis_grade_name(precis_grade g) {
  switch (g) {
  case PRECIS_GRADE_A: return "A";
  case PRECIS_GRADE_NOT_A: return "not A";
  case PRECIS_GRADE_EXACT: return "exact";
  case PRECIS_GRADE_UNDETERMINED: return "undetermined";
  }
  return "?";
}

double precis_grade_worse(double worst, double error) {
  if (isnan(worst)) return worst;
  return error <= worst ? worst : error;
}

void precis_grade_errors(const long *sizes, const double *errors, size_t count, precis_grade_fit *out) {
  out->slope = out->intercept = NAN;
  out->fitted = 0;
  /* Least squares about the means, in long double (grade_blas3's fitLinearModel). */
  long double sx = 0, sy = 0;
  bool nonfinite = false;
  for (size_t i = 0; i < count; i++) {
    if (!isfinite(errors[i])) nonfinite = true;
    if (!(errors[i] > 0) || !isfinite(errors[i]) || sizes[i] < 1) continue;
    sx += logl((long double)sizes[i]);
    sy += logl((long double)errors[i]);
    out->fitted++;
  }
  if (out->fitted >= 2) {
    long double n = (long double)out->fitted, mx = sx / n, my = sy / n, sxx = 0, sxy = 0;
    for (size_t i = 0; i < count; i++) {
      if (!(errors[i] > 0) || !isfinite(errors[i]) || sizes[i] < 1) continue;
      long double dx = logl((long double)sizes[i]) - mx, dy = logl((long double)errors[i]) - my;
      sxx += dx * dx;
      sxy += dx * dy;
    }
    if (sxx > 0) {
      out->slope = (double)(sxy / sxx);
      out->intercept = (double)(my - (sxy / sxx) * mx);
    }
  }
  if (nonfinite) out->grade = PRECIS_GRADE_NOT_A; /* an infinite or NaN error is no bound at all */
  else if (out->fitted == 0) out->grade = PRECIS_GRADE_EXACT;
  else if (isnan(out->slope)) out->grade = PRECIS_GRADE_UNDETERMINED;
  else out->grade = out->slope <= 1.0 ? PRECIS_GRADE_A : PRECIS_GRADE_NOT_A;
}
