/* Operand layouts: B [k, n] from the W [n, k] a linear layer holds (B = W^T), in cache tiles. The
 * values are copied, never computed on, so a GEMM given the transposed copy reads the same numbers. */
#ifndef PRECIS_TRANSPOSE_H
#define PRECIS_TRANSPOSE_H

#include <stdbool.h>
#include <stddef.h>

/* out[c * out_stride + r] = in[r * in_stride + c] for r < rows, c < cols. */
void precis_transpose_f32(const float *in, size_t in_stride, size_t rows, size_t cols, float *out, size_t out_stride);
void precis_transpose_f64(const double *in, size_t in_stride, size_t rows, size_t cols, double *out,
                          size_t out_stride);
/* The same, widened to float64 (|x| when absolute): the reference dgemm's copy of W^T. */
void precis_transpose_widen(const float *in, size_t in_stride, size_t rows, size_t cols, double *out, size_t out_stride,
                            bool absolute);

#endif
