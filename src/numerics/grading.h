/* The BLAS-3 grading of a matrix multiplication (docs/high-precision.md, "BLAS-3 grading"): given
 * the largest componentwise error max_ij |C_hat - A.B|_ij / (eps (|A||B|)_ij) measured at several
 * sizes n, the slope b of log(error) = a + b log(n) fitted by least squares (cuBLAS's grade_blas3,
 * NVIDIA CUDALibrarySamples cuBLAS/Emulation/gemm_grading, after Demmel, Li, Langou, Pereira,
 * Gates & Rubio-Gonzalez, "How to grade the accuracy of an implementation of the BLAS", 2024).
 * Grade A (the componentwise bound f(n) eps |A||B| with f at most linear) when b <= 1. */
#ifndef PRECIS_GRADING_H
#define PRECIS_GRADING_H

#include <stddef.h>

typedef enum precis_grade {
  PRECIS_GRADE_A,            /* slope <= 1 */
  PRECIS_GRADE_NOT_A,        /* slope > 1, or an infinite / NaN error at some size */
  PRECIS_GRADE_EXACT,        /* every error is zero: nothing grows */
  PRECIS_GRADE_UNDETERMINED, /* a single nonzero error: no slope */
} precis_grade;

/* "A", "not A", "exact", "undetermined". */
const char *precis_grade_name(precis_grade g);

typedef struct precis_grade_fit {
  double slope, intercept; /* natural logs; NaN when fewer than two points were fitted */
  size_t fitted;           /* the points of the fit: the sizes whose error is finite and > 0 */
  precis_grade grade;
} precis_grade_fit;

/* Fits the points (log sizes[i], log errors[i]) with errors[i] finite and > 0, as grade_blas3
 * does (zero errors are left out of the fit), and grades them. */
void precis_grade_errors(const long *sizes, const double *errors, size_t count, precis_grade_fit *out);

/* The worse of two errors of one size (the running worst over elements or trials, and a new one):
 * the larger, and NaN when either is NaN, whichever comes first: a nonfinite output is the worst,
 * and a plain max (e > worst) would drop a later NaN and let the fit grade the finite rest. */
double precis_grade_worse(double worst, double error);

#endif
