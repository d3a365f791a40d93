/* Quantization codes as the declared schemes define them (compressed-tensors' quantize(): x / scale
 * plus the zero point, rounded to the code format and clamped), shared by conform and the deployed
 * scheme's activations. */
#ifndef PRECIS_CODES_H
#define PRECIS_CODES_H

#include <stdbool.h>

/* The code of x: INT`bits` (clamped to [-2^(bits-1), 2^(bits-1) - 1]), FP8 E4M3 (clamped to
 * +-448) or FP4 E2M1 (numerics/format.h's rounding, to nearest even). */
float precis_quantize_code(float x, float scale, float zero_point, int bits, bool is_float);
/* The largest code magnitude of the format: the denominator of a symmetric min-max scale
 * (compressed-tensors' calculate_qparams: (qmax - qmin) / 2 for integers, 448, 6). */
float precis_code_half_range(int bits, bool is_float);

#endif
