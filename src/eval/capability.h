/* Which spec runs on which GPU (the route table of src/eval/capability.c): plain C over the
 * cuBLASLt plan, shared by the cuda backend, `precis info`, `recipes`, `explain` and the plan; it
 * needs no device, so it sits in eval/, below kernels/. */
#ifndef PRECIS_CAPABILITY_H
#define PRECIS_CAPABILITY_H

#include <stdbool.h>
#include <stddef.h>

#include "numerics/spec.h"

/* Capability rule for one spec on a compute capability (shared by info, recipes, explain and the
 * backend): a route (gemm_plan.h) and its minimum compute capability. */
bool precis_cuda_spec_supported(const precis_spec *spec, int cc_major, int cc_minor, char *reason, size_t len);
/* Specs the cuda backend runs by exact dequantization on the host (issue 16): weight-only with a
 * bf16/fp16 activation and the same output format, and MX/NVFP4 on both operands with a bf16 output
 * (nv: the tensor scales go to alpha at run time). true with the
 * spec of the GEMM that then runs (bf16 or fp16 operands, fp32 accumulation) and a line for reports.
 * The dequantized operands are precis_cpu_quant_dequantized_inputs (cpu_quantized.h). */
bool precis_lt_dequant_emulation(const precis_spec *spec, precis_spec *sub, char *how, size_t len);
/* The same on a device of compute capability cc_major.cc_minor: false when a route runs the spec
 * natively there (mxfp8/mxfp4/nvfp4 on cc >= 10.0), else precis_lt_dequant_emulation. Every caller
 * that picks between a native route and the emulation asks this. */
bool precis_lt_emulated_on(const precis_spec *spec, int cc_major, int cc_minor, precis_spec *sub, char *how,
                           size_t len);

#endif
