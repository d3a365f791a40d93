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
 * and c_ij = that sum · 2^(e_i + f_j).
 *
 * Ozaki scheme II on int8 (split crt-int8x<N>[-fast]; Ozaki, Uchino & Imamura 2025, as GEMMul8
 * builds it): row i of A is scaled by 2^sa_i and column j of B by 2^sb_j and truncated toward zero
 * to integers A', B' (exact in float64) such that sum_p |A'_ip||B'_pj| < M/2, M the product of the
 * first N moduli of precis_crt_modulus (256, then odd numbers below 256, pairwise coprime). For each
 * modulus m, A' and B' reduced mod m into the symmetric int8 range give one exact int8 GEMM (int32
 * sums, k <= PRECIS_CRT_MAX_K), reduced mod m again; the residues give C' = A'B' exactly as the
 * symmetric residue mod M (Garner's mixed radix, exact integer arithmetic), and c_ij = C'_ij ·
 * 2^-(sa_i + sb_j), rounded once to float64. The two variants differ in the shifts only:
 *   fast:     sa_i = min(floor(L - 1) - e_i, floor(L - h·log2(sum_p a_ip^2)) - max(e_i, 0)) with
 *             L = log2(M - 1)/2 - 1.5, e_i = ilogb(max_p |a_ip|), h = 0.5 (1 + 1.2e-6): Cauchy-Schwarz;
 *   accurate: with Â_ip = ceil(|a_ip| 2^(5 - e_i)) <= 64 (likewise B̂ by columns) and the exact
 *             integer product Ĉ = Â·B̂, sa_i = 5 - e_i + floor(L - h·log2(max_j Ĉ_ij)) with
 *             L = log2(M - 1)/2 - 0.5 (sb_j from max_i Ĉ_ij): sum |A'||B'| <= 2^(ta_i+tb_j) Ĉ_ij
 *             <= 2^(2L) < M/2. */
#ifndef PRECIS_SPLIT_H
#define PRECIS_SPLIT_H

#include <limits.h>
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

/* ---- Ozaki scheme II (CRT) ---- */

#define PRECIS_CRT_MAX_MODULI 20
/* Every int8 residue product exact in int32: |r| <= 128, so 128^2 k < 2^31. */
#define PRECIS_CRT_MAX_K 131071LL

/* Modulus l (0-based) of GEMMul8's list: 256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217,
 * 211, 199, 197, 193, 191, 181, 179, 173. */
int precis_crt_modulus(int l);
/* (m_0 ... m_{l-1})^-1 mod m_l, l = 1..PRECIS_CRT_MAX_MODULI-1: Garner's constants. */
int precis_crt_inverse(int l);

/* log2(M - 1)/2 - 1.5 (fast) or - 0.5 (accurate), M the product of the first n moduli. */
double precis_crt_log2p(int n_moduli, bool fast);

/* The shift of a row or column holding an inf or NaN: its outputs are NaN. */
#define PRECIS_CRT_NONFINITE INT_MIN

/* The fast variant's shift of one row of A / column of B: values x[0], x[stride], ... (count). */
int precis_crt_fast_shift(const double *x, size_t count, size_t stride, int n_moduli);

/* The accurate variant's first step: e = 5 - ilogb(amax) of the row/column, and
 * hat[p] = ceil(|x_p| 2^e) in 0..64 (written at the same stride). Returns e. */
int precis_crt_bound_ints(const double *x, size_t count, size_t stride, double *hat);
/* e + floor(L - h log2(cmax)): the accurate shift from the row's (column's) max of Â·B̂. */
int precis_crt_accurate_shift(int e, double cmax, int n_moduli);

/* x scaled by 2^shift and truncated toward zero (exact in float64); 0 for PRECIS_CRT_NONFINITE. */
double precis_crt_scale(double x, int shift);

/* The symmetric residue of an integer-valued double: in [-128, 127] for 256, [-(m-1)/2, (m-1)/2]
 * for odd m. */
int precis_crt_residue(double x, int m);

/* The CRT reconstruction of one output: r[l * stride] in [0, m_l) for l < n_moduli; returns X ·
 * 2^-shift rounded once to float64, X the residue of smallest magnitude mod M (in [-M/2, M/2));
 * NaN when shift is PRECIS_CRT_NONFINITE (callers pass it when either operand's is). */
double precis_crt_reconstruct(const uint8_t *r, size_t stride, int n_moduli, int shift);

#endif
