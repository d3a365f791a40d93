/* The BLAS-3 grading fit (src/numerics/grading.h): power laws e = c n^p of known exponent give the
 * slope p back, Grade A exactly when p <= 1 (the cuBLAS grade_blas3 rule); zero errors are left out
 * of the fit as grade_blas3 leaves them out; an infinite or NaN error is never Grade A. */
#include <math.h>

#include "harness.h"
#include "numerics/grading.h"

static const long sizes[] = {16, 32, 64, 128, 256, 512, 1024};
enum { N_SIZES = sizeof sizes / sizeof sizes[0] };

TEST(power_laws_give_their_exponent_and_grade) {
  static const double exponents[] = {-0.5, 0.0, 0.5, 0.999, 1.001, 1.2, 2.0};
  for (size_t e = 0; e < sizeof exponents / sizeof exponents[0]; e++) {
    double errors[N_SIZES];
    for (size_t i = 0; i < N_SIZES; i++) errors[i] = 3.5 * pow((double)sizes[i], exponents[e]);
    precis_grade_fit fit;
    precis_grade_errors(sizes, errors, N_SIZES, &fit);
    CHECK_MSG(fabs(fit.slope - exponents[e]) < 1e-12, "exponent %g: slope %.15g", exponents[e], fit.slope);
    CHECK_MSG(fabs(fit.intercept - log(3.5)) < 1e-12, "exponent %g: intercept %.15g", exponents[e], fit.intercept);
    CHECK_EQ_INT(fit.fitted, N_SIZES);
    CHECK_EQ_INT(fit.grade, exponents[e] <= 1 ? PRECIS_GRADE_A : PRECIS_GRADE_NOT_A);
  }
}

TEST(least_squares_of_noisy_points) {
  /* The slope of the least-squares line through (log n, log e): Sxy / Sxx, written out here. */
  static const double errors[N_SIZES] = {1.8, 2.9, 3.5, 5.6, 8.6, 12.0, 17.6};
  double mx = 0, my = 0;
  for (size_t i = 0; i < N_SIZES; i++) mx += log((double)sizes[i]) / N_SIZES, my += log(errors[i]) / N_SIZES;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < N_SIZES; i++) {
    sxx += (log((double)sizes[i]) - mx) * (log((double)sizes[i]) - mx);
    sxy += (log((double)sizes[i]) - mx) * (log(errors[i]) - my);
  }
  precis_grade_fit fit;
  precis_grade_errors(sizes, errors, N_SIZES, &fit);
  CHECK_MSG(fabs(fit.slope - sxy / sxx) < 1e-12, "slope %.15g, expected %.15g", fit.slope, sxy / sxx);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_A);
}

TEST(zeros_and_nonfinite_errors) {
  double zeros[N_SIZES] = {0};
  precis_grade_fit fit;
  precis_grade_errors(sizes, zeros, N_SIZES, &fit);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_EXACT);
  CHECK_EQ_INT(fit.fitted, 0);
  CHECK(isnan(fit.slope));

  double one[N_SIZES] = {0, 0, 0, 4.0, 0, 0, 0};
  precis_grade_errors(sizes, one, N_SIZES, &fit);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_UNDETERMINED);

  /* Zeros are left out: the others still lie on n^2. */
  double some[N_SIZES];
  for (size_t i = 0; i < N_SIZES; i++) some[i] = i % 2 ? 0.0 : (double)sizes[i] * (double)sizes[i];
  precis_grade_errors(sizes, some, N_SIZES, &fit);
  CHECK_EQ_INT(fit.fitted, 4);
  CHECK_MSG(fabs(fit.slope - 2.0) < 1e-12, "slope %.15g", fit.slope);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_NOT_A);

  double flat[N_SIZES] = {1, 1, 1, 1, 1, 1, INFINITY};
  precis_grade_errors(sizes, flat, N_SIZES, &fit);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_NOT_A);
  flat[6] = NAN;
  precis_grade_errors(sizes, flat, N_SIZES, &fit);
  CHECK_EQ_INT(fit.grade, PRECIS_GRADE_NOT_A);
}

/* precis grade keeps, per size, the worst error over its trials with precis_grade_worse. A NaN of
 * any trial, the first or a later one, must reach the fit: with a plain max (e > worst) a NaN of a
 * later trial is dropped, the finite errors of the other trials lie on n^0.5 and the recipe that
 * produced a nonfinite output is graded A. */
TEST(nan_of_any_trial_is_the_worst) {
  CHECK(isnan(precis_grade_worse(3.0, NAN)));
  CHECK(isnan(precis_grade_worse(NAN, 3.0)));
  CHECK(isnan(precis_grade_worse(NAN, INFINITY)));
  CHECK(precis_grade_worse(3.0, 5.0) == 5.0);
  CHECK(precis_grade_worse(5.0, 3.0) == 5.0);
  CHECK(precis_grade_worse(0.0, INFINITY) == INFINITY);

  enum { TRIALS = 3 };
  for (size_t nan_trial = 0; nan_trial < TRIALS; nan_trial++) {
    double worst[N_SIZES];
    for (size_t s = 0; s < N_SIZES; s++)
      for (size_t t = 0; t < TRIALS; t++) {
        double e = (1.0 + 0.25 * (double)t) * sqrt((double)sizes[s]);
        if (t == nan_trial && s == 4) e = NAN;
        worst[s] = t == 0 ? e : precis_grade_worse(worst[s], e);
      }
    CHECK_MSG(isnan(worst[4]), "NaN in trial %zu: worst over trials %g", nan_trial, worst[4]);
    CHECK_MSG(worst[0] == 1.5 * 4.0, "size 16: %g", worst[0]);
    precis_grade_fit fit;
    precis_grade_errors(sizes, worst, N_SIZES, &fit);
    CHECK_MSG(fit.grade == PRECIS_GRADE_NOT_A, "NaN in trial %zu graded %s", nan_trial, precis_grade_name(fit.grade));
  }
}

RUN_TESTS(T(power_laws_give_their_exponent_and_grade), T(least_squares_of_noisy_points), T(zeros_and_nonfinite_errors),
          T(nan_of_any_trial_is_the_worst))
