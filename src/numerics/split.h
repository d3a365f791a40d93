/* Multi-term emulation of higher precision (DESIGN §11 `split=`, docs/high-precision.md): the
 * operand splitting rules and the reference arithmetic of the cpu backend, shared with the tests.
 *
 * Float splits (tf32x3, bf16x3, bf16x6, bf16x9): x = t0 + t1 (+ t2), t0 = RNE(x) in the term
 * format, t1 = RNE(x - t0), t2 = RNE(x - t0 - t1); every residual is exact in fp32. The products
 * t_i(A)·t_j(B) with i + j <= max_level are summed into one fp32 accumulator per output element,
 * k in order, and within each k from the smallest level to the largest (big·big last), each
 * product exact in fp32 and each sum RNE.
 *
 * Ozaki scheme I on int8 (split int8x<N>): each row i of A is scaled by 2^-e_i where e_i is the
 * smallest integer with amax_i < 2^e_i (frexp), likewise each column j of B by 2^-f_j, so that
 * every scaled value x lies in (-1, 1); x is cut into N base-2^7 digits by truncation toward zero,
 * x = sum_t s_t 2^-7t + r with s_t in [-127, 127] and |r| < 2^-7N (all exact in float64). Slice
 * products A_s·B_t (s + t <= N + 1) are exact int32 GEMMs; those of one level g = s + t are summed
 * exactly, the levels are summed in float64 from the smallest (g = N + 1) to the largest (g = 2),
 * and c_ij = that sum · 2^(e_i + f_j). */
#ifndef PRECIS_SPLIT_H
#define PRECIS_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "spec.h"

/* Bits per Ozaki slice: int8 holds 7 bits and a sign. */
#define PRECIS_OZAKI_SLICE_BITS 7

/* The shape of a float split: terms per operand, the term format and the largest level i + j kept. */
typedef struct precis_float_split {
  precis_format_id term_fmt;
  int terms;
  int max_level;
  int products; /* pairs (i, j) with i, j < terms and i + j <= max_level */
} precis_float_split;

/* false for PRECIS_SPLIT_NONE and PRECIS_SPLIT_INT8XN. */
bool precis_float_split_of(precis_split split, precis_float_split *out);

/* terms[t * count + i] = term t of x[i] (split->terms arrays of count). */
void precis_split_float_terms(const precis_float_split *split, const float *x, size_t count, float *terms);

/* C [rows, n] = sum over kept (i, j) of A_i [rows, k] · B_j [k, n] in the order described above.
 * a_terms / b_terms as written by precis_split_float_terms for a [rows, k] and b [k, n]. acc: n
 * floats of scratch. */
void precis_split_float_gemm(const precis_float_split *split, const float *a_terms, size_t a_count,
                             const float *b_terms, size_t b_count, size_t rows, size_t n, size_t k, float *c);

/* The power-of-two exponent e with amax < 2^e (0 for amax == 0). */
int precis_ozaki_exponent(double amax);

/* Rows of a [rows, k]: exps[i] and slices[(t * rows + i) * k + p] (t = 0..n_slices-1) as
 * integer-valued doubles in [-127, 127]. */
void precis_ozaki_split_rows(const double *a, size_t rows, size_t k, int n_slices, int *exps, double *slices);
/* Columns of b [k, n]: exps[j] and slices[(t * k + p) * n + j]. */
void precis_ozaki_split_cols(const double *b, size_t k, size_t n, int n_slices, int *exps, double *slices);

/* Combines the level sums: level[(g - 2) * rows * n + ...] holds sum_{s+t=g} A_s·B_t (exact
 * integers) for g = 2..n_slices+1; c = sum over g from N+1 down to 2 of level_g · 2^-7g, scaled by
 * 2^(a_exps[i] + b_exps[j]). */
void precis_ozaki_combine(const double *levels, int n_slices, size_t rows, size_t n, const int *a_exps,
                          const int *b_exps, double *c);

#endif
