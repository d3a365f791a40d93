/* The cpu backend's path for the quantized specs of issue 16 (DESIGN §11): every operand format and
 * granularity of the quantizer (src/numerics/quantize.h), integer conventions, weight-only specs,
 * SmoothQuant and fp8 outputs. The specs of the original presets (int8 per row x per column, fp8
 * per tensor, plain floats) keep cpu_backend.c's own paths, bit for bit as before; everything else
 * that is quantized comes here. docs/formats.md ("The cpu backend's quantized GEMM") states the
 * arithmetic exactly; tests/venv/test_quantized_oracle.py recomputes it with NumPy. */
#ifndef PRECIS_CPU_QUANTIZED_H
#define PRECIS_CPU_QUANTIZED_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "host_memory.h"
#include "numerics/quantize.h"

/* true when this path runs the spec (the caller then asks precis_cpu_quant_route whether it can).
 * Specs with split= or fp64 anywhere are never claimed. */
bool precis_cpu_quant_claims(const precis_spec *spec);
/* false with the reason, naming the field, when a claimed spec cannot run here. */
bool precis_cpu_quant_route(const precis_spec *spec, char *why, size_t len);

typedef struct precis_cpu_quant precis_cpu_quant;

/* Smooths, quantizes and lays out the operands (the part timed as convert_ms). On failure returns
 * the error with *status (unsupported, does-not-fit, failed) and reason saying why; *out is then NULL. */
precis_status precis_cpu_quant_prepare(const precis_spec *spec, const precis_workload_info *w,
                                       const precis_workload_data *d, precis_host_tracker *tracker,
                                       precis_kv_list *details, precis_cpu_quant **out, size_t *clipped,
                                       precis_row_status *status, char *reason, size_t reason_len);
/* The timed GEMM: writes the [batch, m, n] float32 result (before the output format) into c. */
void precis_cpu_quant_gemm(precis_cpu_quant *q, float *c);
/* After the timed loop: the output format (fp8 outputs with a per-tensor scale_D). false when out
 * of memory. */
bool precis_cpu_quant_finish(precis_cpu_quant *q, float *c, precis_kv_list *details);
const char *precis_cpu_quant_emulation(const precis_cpu_quant *q);

/* The operands exactly as this path multiplies them when every factor is 1 (weight-only: the
 * scaled operand dequantized and rounded to the other's format; mx: code x 2^e; unscaled: the RNE
 * cast), as malloc'ed float32 arrays of the workload's shapes, for the cuda backend's emulation of
 * such specs (precis_lt_dequant_emulation). PRECIS_E_UNSUPPORTED for specs with other factors. */
precis_status precis_cpu_quant_dequantized_inputs(const precis_spec *spec, const precis_workload_info *w,
                                                  const precis_workload_data *d, float **a_out, float **b_out,
                                                  size_t *clipped, char *reason, size_t reason_len);
/* The same, and for nv operands (NVFP4) also the factor the cpu backend multiplies the whole k-sum
 * by: *alpha = fp32(s_a * s_b) of the fp32 tensor scales (1 without nv), the inputs then being
 * code x E4M3 block scale. PRECIS_E_UNSUPPORTED when the factor varies (a b per batch element). */
precis_status precis_cpu_quant_dequantized_inputs_alpha(const precis_spec *spec, const precis_workload_info *w,
                                                        const precis_workload_data *d, float **a_out, float **b_out,
                                                        float *alpha, size_t *clipped, char *reason,
                                                        size_t reason_len);
void precis_cpu_quant_free(precis_cpu_quant *q);

/* The quantizer's description of a scaled operand field, as this path quantizes it (libprecis's
 * precis_quantize_operand, DESIGN §15). */
precis_quant_desc precis_cpu_quant_desc_of(const precis_operand_spec *op, precis_operand_side side);

#endif
