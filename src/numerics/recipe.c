#include "recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The presets of DESIGN §3 as specs, then the high-precision family (docs/high-precision.md). tf32
 * is spelled with tf32 operands (acc=fp32fast parses to the same spec); fp16acc16 is acc=fp16. */
static const precis_recipe_preset presets[] = {
    {.name = "fp32", .spec = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none",
     .description = "A,B f32; compute 32F; output f32", .baseline = true, .required = true},
    {.name = "tf32", .spec = "a=tf32,b=tf32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=none",
     .description = "A,B f32 read as tf32 (10 fraction bits); compute 32F; output f32"},
    {.name = "fp16", .spec = "a=fp16,b=fp16,acc=fp32,out=fp16,scale=dynamic,smooth=none,split=none",
     .description = "A,B f16 (RNE from f32); compute 32F; output f16", .required = true},
    {.name = "fp16acc16", .spec = "a=fp16,b=fp16,acc=fp16,out=fp16,scale=dynamic,smooth=none,split=none",
     .description = "A,B f16 (RNE from f32); compute 16F (f16 accumulation); output f16"},
    {.name = "bf16", .spec = "a=bf16,b=bf16,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "A,B bf16 (RNE from f32); compute 32F; output bf16", .required = true},
    {.name = "int8", .spec = "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=none,split=none",
     .description = "A,B s8 symmetric (A per row, B per column, s=amax/127); compute 32I; "
                    "output f32 after dequant c=s_a[i]*s_b[j]*acc",
     .required = true},
    {.name = "fp8", .spec = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "A,B e4m3 satfinite, per-tensor scales s=amax/448; compute 32F; output bf16"},
    /* Issue 16: the formats deployed in 2026 (docs/formats.md gives each rule's source). */
    {.name = "fp8-rowwise", .spec = "a=e4m3@row,b=e4m3@col,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "A e4m3 per row (token), B e4m3 per column (channel), s=amax/448; compute 32F; "
                    "c=s_a[i]*s_b[j]*acc; output bf16 (torchao/FBGEMM rowwise, cuBLASLt outer-vector)"},
    {.name = "fp8-block", .spec = "a=e4m3@k128,b=e4m3@128x128,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "A e4m3 per 1x128 (row, k-group), B e4m3 per 128x128 block, s=amax/448; each 128-k partial sum "
                    "scaled in f32; output bf16 (DeepSeek-V3, cuBLASLt VEC128/BLK128x128)"},
    {.name = "w8a16", .spec = "a=bf16,b=s8@col:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "weight-only: B s8 per column, s=amax/127.5 (the INT8 weights of compressed-tensors' W8A8; its W8A16 "
                    "preset is group 128 since 0.20), dequantized to bf16; "
                    "A bf16; compute 32F; output bf16"},
    {.name = "w4a16", .spec = "a=bf16,b=s4@k128:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "weight-only: B s4 per 128 k of a column, s=amax/7.5 (compressed-tensors W4A16), dequantized "
                    "to bf16; A bf16; compute 32F; output bf16"},
    {.name = "w4a16-asym", .spec = "a=bf16,b=u4@k128:asym,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "weight-only: B u4 with zero points per 128 k of a column (GPTQ asymmetric), dequantized to "
                    "bf16; A bf16; compute 32F; output bf16"},
    {.name = "mxfp8", .spec = "a=e4m3@mx,b=e4m3@mx,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "OCP MXFP8: A,B e4m3 in blocks of 32 along k with E8M0 scales (floor rule); compute 32F; "
                    "output bf16"},
    {.name = "mxfp4", .spec = "a=e2m1@mx,b=e2m1@mx,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "OCP MXFP4: A,B e2m1 in blocks of 32 along k with E8M0 scales (floor rule); compute 32F; "
                    "output bf16"},
    {.name = "nvfp4", .spec = "a=e2m1@nv,b=e2m1@nv,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "NVFP4: A,B e2m1 in blocks of 16 along k, E4M3 block scales and an f32 tensor scale; "
                    "compute 32F; output bf16"},
    {.name = "int8-sq", .spec = "a=s8@row:sym,b=s8@col:sym,acc=s32,out=fp32,scale=dynamic,smooth=0.5,split=none",
     .description = "SmoothQuant (alpha 0.5, scales from the calibration split) then int8: A per row, B per "
                    "column, s=amax/127; compute 32I; output f32"},
    /* cuBLASLt's FAST_ACCUM (issue 16): fp8's spec with the k-sum never promoted out of the tensor
     * core. Not in `all`: a speed switch the cpu backend cannot time, and its error only differs from
     * fp8's at long k (docs/decisions.md). */
    {.name = "fp8-fast", .spec = "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "A,B e4m3 satfinite, per-tensor scales s=amax/448; compute 32F with CUBLASLT_MATMUL_DESC_FAST_ACCUM "
                    "(the k-sum kept in the tensor core's ~13-bit accumulator, never promoted); output bf16 "
                    "(torch._scaled_mm use_fast_accum=True)",
     .optional = true},
    /* Issue 33: DeepSeek-V3's fp8 blocks with DeepGEMM's power-of-two (UE8M0) scales, which its
     * Blackwell kernels require: fp8-block's groups, each scale amax/448 rounded up to 2^e. Not in
     * `all` (fp8-block is; this is its scale encoding). */
    {.name = "fp8-block-ue8m0",
     .spec = "a=e4m3@k128:ue8m0,b=e4m3@128x128:ue8m0,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "DeepGEMM fp8 blocks: A e4m3 per 1x128 along k, B e4m3 per 128x128 block, each scale "
                    "amax/448 rounded up to a power of two (UE8M0, one byte); compute 32F; output bf16",
     .optional = true},
    /* Issue 33: OCP MXFP6 (MX v1.0 §5.3.2), the two FP6 element formats in blocks of 32 with E8M0
     * scales (floor rule). Not in `all`: no cuBLASLt route yet (emulated by bf16 dequantization). */
    {.name = "mxfp6-e2m3", .spec = "a=e2m3@mx,b=e2m3@mx,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "OCP MXFP6 E2M3: A,B e2m3 (max 7.5) in blocks of 32 along k with E8M0 scales (floor rule); "
                    "compute 32F; output bf16",
     .optional = true},
    {.name = "mxfp6-e3m2", .spec = "a=e3m2@mx,b=e3m2@mx,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "OCP MXFP6 E3M2: A,B e3m2 (max 28) in blocks of 32 along k with E8M0 scales (floor rule); "
                    "compute 32F; output bf16",
     .optional = true},
    /* Issue 39: the mixed-input schemes serving engines run (docs/deploy.md): int4 weights in groups
     * of 128 with int8 or fp8 activations per token, compressed-tensors' W4A8 and W4AFP8 presets. Not
     * in `all`: no cuBLASLt route (cuBLASLt has no int4 x int8 / int4 x fp8 GEMM); the cpu backend
     * quantizes both operands and sums the dequantized products in fp32. */
    {.name = "w4a8", .spec = "a=s8@row:sym-half,b=s4@k128:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "W4A8: B s4 per 128 k of a column, s=amax/7.5; A s8 per row (token), dynamic, s=amax/127.5 "
                    "(compressed-tensors W4A8); products of the dequantized values summed in fp32; output bf16",
     .optional = true},
    {.name = "w4afp8", .spec = "a=e4m3@row,b=s4@k128:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "W4AFP8: B s4 per 128 k of a column, s=amax/7.5; A e4m3 per row (token), dynamic, s=amax/448 "
                    "(compressed-tensors W4AFP8, vLLM's CUTLASS W4A8 on Hopper); summed in fp32; output bf16",
     .optional = true},
    /* Issue 39: compressed-tensors' W3A16 / W2A16 (3- and 2-bit integer weights, groups of 128, the
     * full code range -4..3 / -2..1: s = amax/3.5, amax/1.5). Not in `all`. */
    {.name = "w3a16", .spec = "a=bf16,b=s3@k128:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "weight-only: B s3 per 128 k of a column, s=amax/3.5 (compressed-tensors W3A16), dequantized to "
                    "bf16; A bf16; compute 32F; output bf16",
     .optional = true},
    {.name = "w2a16", .spec = "a=bf16,b=s2@k128:sym-half,acc=fp32,out=bf16,scale=dynamic,smooth=none,split=none",
     .description = "weight-only: B s2 per 128 k of a column, s=amax/1.5 (compressed-tensors W2A16), dequantized to "
                    "bf16; A bf16; compute 32F; output bf16",
     .optional = true},
    /* High precision at low-precision speed (issue 19, docs/high-precision.md). */
    {.name = "fp64", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=none",
     .description = "A,B f64 (exact from f32 inputs); compute 64F; output f64", .high_precision = true},
    {.name = "3xtf32", .spec = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=tf32x3",
     .description = "A,B f32 split into tf32 big + small (RNE); big*big + big*small + small*big summed in f32; "
                    "output f32",
     .high_precision = true},
    {.name = "bf16x3", .spec = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=bf16x3",
     .description = "A,B f32 split into 2 bf16 terms (RNE); the 3 largest products summed in f32; output f32",
     .high_precision = true},
    {.name = "bf16x6", .spec = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=bf16x6",
     .description = "A,B f32 split into 3 bf16 terms (RNE); the 6 largest of the 9 products summed in f32; "
                    "output f32",
     .high_precision = true},
    {.name = "bf16x9", .spec = "a=fp32,b=fp32,acc=fp32,out=fp32,scale=dynamic,smooth=none,split=bf16x9",
     .description = "A,B f32 split into 3 bf16 terms (RNE); all 9 products summed in f32; output f32",
     .high_precision = true},
    {.name = "ozaki-int8-3", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x3",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 3 int8 slices per row of A / column of B, power-of-two "
                    "scales, 6 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki-int8-4", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x4",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 4 int8 slices per row of A / column of B, power-of-two "
                    "scales, 10 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki-int8-5", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x5",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 5 int8 slices per row of A / column of B, power-of-two "
                    "scales, 15 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki-int8-6", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x6",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 6 int8 slices per row of A / column of B, power-of-two "
                    "scales, 21 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki-int8-7", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x7",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 7 int8 slices per row of A / column of B, power-of-two "
                    "scales, 28 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki-int8-8", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=int8x8",
     .description = "FP64 emulated on int8 (Ozaki scheme I): 8 int8 slices per row of A / column of B, power-of-two "
                    "scales, 36 exact int32 slice products summed in f64; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-8", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x8",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 8 moduli, 9 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-8", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x8-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 8 moduli, 8 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-9", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x9",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 9 moduli, 10 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-9", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x9-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 9 moduli, 9 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-10", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x10",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 10 moduli, 11 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-10", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x10-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 10 moduli, 10 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-11", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x11",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 11 moduli, 12 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-11", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x11-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 11 moduli, 11 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-12", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x12",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 12 moduli, 13 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-12", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x12-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 12 moduli, 12 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-13", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x13",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 13 moduli, 14 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-13", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x13-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 13 moduli, 13 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-14", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x14",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 14 moduli, 15 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-14", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x14-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 14 moduli, 14 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-15", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x15",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 15 moduli, 16 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-15", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x15-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 15 moduli, 15 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-16", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x16",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 16 moduli, 17 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-16", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x16-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 16 moduli, 16 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-17", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x17",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 17 moduli, 18 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-17", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x17-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 17 moduli, 17 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-18", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x18",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 18 moduli, 19 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-18", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x18-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 18 moduli, 18 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-19", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x19",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 19 moduli, 20 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-19", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x19-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 19 moduli, 19 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-20", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x20",
     .description = "FP64 emulated on int8 (Ozaki scheme II, accurate): 20 moduli, 21 exact int8 GEMMs, "
                    "shifts from an exact bound product |A|.|B| (one more int8 GEMM), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "ozaki2-int8-fast-20", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=crt-int8x20-fast",
     .description = "FP64 emulated on int8 (Ozaki scheme II, fast): 20 moduli, 20 exact int8 GEMMs, "
                    "shifts from row/column norms (Cauchy-Schwarz), CRT reconstruction; output f64",
     .high_precision = true},
    {.name = "fp64-emu", .spec = "a=fp64,b=fp64,acc=fp64,out=fp64,scale=dynamic,smooth=none,split=cublas-emu",
     .description = "FP64 through cuBLAS's own fixed-point emulation (CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, CUDA 13, "
                    "Blackwell): cuda only, found at run time; output f64",
     .high_precision = true},
};

_Static_assert(sizeof presets / sizeof presets[0] <= PRECIS_RECIPE_PRESET_MAX, "PRECIS_RECIPE_PRESET_MAX bounds the preset table");

size_t precis_recipe_preset_count(void) { return sizeof presets / sizeof presets[0]; }

size_t precis_recipe_preset_all_count(void) {
  size_t count = 0;
  for (size_t i = 0; i < precis_recipe_preset_count(); i++) count += !presets[i].high_precision && !presets[i].optional;
  return count;
}

const precis_recipe_preset *precis_recipe_preset_at(size_t index) {
  return index < precis_recipe_preset_count() ? &presets[index] : NULL;
}

const precis_recipe_preset *precis_recipe_preset_find(const char *name) {
  for (size_t i = 0; i < precis_recipe_preset_count(); i++)
    if (strcmp(presets[i].name, name) == 0) return &presets[i];
  return NULL;
}

size_t precis_recipe_preset_index(const char *name) {
  const precis_recipe_preset *p = name ? precis_recipe_preset_find(name) : NULL;
  return p ? (size_t)(p - presets) : precis_recipe_preset_count();
}

const char *precis_recipe_name_spec(const char *name) {
  if (!name) return NULL;
  const precis_recipe_preset *p = precis_recipe_preset_find(name);
  return p ? p->spec : strchr(name, '=') ? name : NULL;
}

const precis_recipe_preset *precis_recipe_preset_baseline(void) {
  for (size_t i = 0; i < precis_recipe_preset_count(); i++)
    if (presets[i].baseline) return &presets[i];
  return NULL;
}

const precis_recipe_preset *precis_recipe_preset_of_spec(const precis_spec *spec) {
  char text[PRECIS_SPEC_TEXT_MAX];
  precis_spec_format(spec, text, sizeof text);
  for (size_t i = 0; i < precis_recipe_preset_count(); i++)
    if (strcmp(presets[i].spec, text) == 0) return &presets[i];
  return NULL;
}

static void preset_names(char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < precis_recipe_preset_count() && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", presets[i].name);
}

precis_status precis_recipe_from_preset(const precis_recipe_preset *preset, precis_recipe *out) {
  memset(out, 0, sizeof *out);
  precis_status st = precis_spec_parse(preset->spec, &out->spec);
  if (st != PRECIS_OK) return st;
  snprintf(out->name, sizeof out->name, "%s", preset->name);
  precis_spec_format(&out->spec, out->canonical, sizeof out->canonical);
  snprintf(out->description, sizeof out->description, "%s", preset->description);
  out->preset = preset;
  return PRECIS_OK;
}

precis_status precis_recipe_parse(const char *text, precis_recipe *out) {
  if (!strchr(text, '=')) {
    const precis_recipe_preset *p = precis_recipe_preset_find(text);
    if (p) return precis_recipe_from_preset(p, out);
    char names[1024];
    preset_names(names, sizeof names);
    return precis_fail(PRECIS_E_USAGE,
                       "--recipes: unknown recipe \"%s\" (expected a preset: %s, all, high-precision; or a spec of "
                       "fields a=, b=, acc=, out=, scale=, smooth=, split=)",
                       text, names);
  }
  memset(out, 0, sizeof *out);
  precis_status st = precis_spec_parse(text, &out->spec);
  if (st != PRECIS_OK) return st;
  precis_spec_format(&out->spec, out->canonical, sizeof out->canonical);
  snprintf(out->name, sizeof out->name, "%s", out->canonical);
  precis_spec_describe(&out->spec, out->description, sizeof out->description);
  return PRECIS_OK;
}

precis_status precis_recipe_list_add(precis_recipe_list *list, const precis_recipe *recipe) {
  for (size_t i = 0; i < list->count; i++)
    if (strcmp(list->items[i].canonical, recipe->canonical) == 0)
      return precis_fail(PRECIS_E_USAGE, "--recipes: \"%s\" and \"%s\" are the same recipe (%s)", list->items[i].name,
                         recipe->name, recipe->canonical);
  precis_recipe *grown = realloc(list->items, (list->count + 1) * sizeof *grown);
  if (!grown) return precis_fail(PRECIS_E_NOMEM, "out of memory parsing --recipes");
  list->items = grown;
  list->items[list->count++] = *recipe;
  return PRECIS_OK;
}

void precis_recipe_list_free(precis_recipe_list *list) {
  free(list->items);
  list->items = NULL;
  list->count = 0;
}

/* "ozaki-int8-3..8": PREFIX<A>..<B> where every PREFIX<i> is a preset (the sweep of a family).
 * Returns false when text is no range; a range with a missing member is an error. */
static bool range_text(const char *text, precis_recipe_list *list, precis_status *st) {
  const char *dots = strstr(text, "..");
  if (!dots || dots == text) return false;
  const char *digits = dots;
  while (digits > text && digits[-1] >= '0' && digits[-1] <= '9') digits--;
  char *end;
  long from = strtol(digits, &end, 10);
  if (digits == dots || end != dots) return false;
  const char *hi = dots + 2;
  if (*hi < '0' || *hi > '9') return false;
  long to = strtol(hi, &end, 10);
  if (*end) return false;
  int prefix = (int)(digits - text);
  if (to < from || to - from > 64) {
    *st = precis_fail(PRECIS_E_USAGE, "--recipes: range \"%s\" must run upwards over at most 64 members", text);
    return true;
  }
  *st = PRECIS_OK;
  for (long i = from; i <= to && *st == PRECIS_OK; i++) {
    char name[PRECIS_SPEC_TEXT_MAX];
    snprintf(name, sizeof name, "%.*s%ld", prefix, text, i);
    const precis_recipe_preset *p = precis_recipe_preset_find(name);
    precis_recipe r;
    if (!p) *st = precis_fail(PRECIS_E_USAGE, "--recipes: range \"%s\": no preset named \"%s\"", text, name);
    else if ((*st = precis_recipe_from_preset(p, &r)) == PRECIS_OK) *st = precis_recipe_list_add(list, &r);
  }
  return true;
}

static precis_status add_text(precis_recipe_list *list, const char *text) {
  precis_recipe r;
  precis_status ranged;
  if (range_text(text, list, &ranged)) return ranged;
  bool all = strcmp(text, "all") == 0, high = strcmp(text, "high-precision") == 0;
  if (all || high) {
    for (size_t i = 0; i < precis_recipe_preset_count(); i++) {
      if (presets[i].high_precision != high || (all && presets[i].optional)) continue;
      precis_status st = precis_recipe_from_preset(&presets[i], &r);
      if (st == PRECIS_OK) st = precis_recipe_list_add(list, &r);
      if (st != PRECIS_OK) return st;
    }
    return PRECIS_OK;
  }
  precis_status st = precis_recipe_parse(text, &r);
  return st == PRECIS_OK ? precis_recipe_list_add(list, &r) : st;
}

precis_status precis_recipe_list_parse(const char *text, precis_recipe_list *out) {
  memset(out, 0, sizeof *out);
  size_t len = strlen(text);
  char *buf = malloc(len + 1), *spec = malloc(len + 1);
  precis_status st = PRECIS_OK;
  if (!buf || !spec) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory parsing --recipes");
    goto done;
  }
  memcpy(buf, text, len + 1);
  spec[0] = '\0';
  char *item = buf;
  while (item && st == PRECIS_OK) {
    char *next = strchr(item, ',');
    if (next) *next++ = '\0';
    if (!*item) {
      st = precis_fail(PRECIS_E_USAGE, "--recipes: empty item in \"%s\"", text);
      break;
    }
    if (strchr(item, '=')) { /* a field: it continues the spec being collected */
      if (spec[0]) strcat(spec, ",");
      strcat(spec, item);
    } else {
      if (spec[0]) st = add_text(out, spec);
      spec[0] = '\0';
      if (st == PRECIS_OK) st = add_text(out, item);
    }
    item = next;
  }
  if (st == PRECIS_OK && spec[0]) st = add_text(out, spec);
  if (st == PRECIS_OK && out->count == 0) st = precis_fail(PRECIS_E_USAGE, "--recipes: no recipe given");
done:
  free(buf);
  free(spec);
  if (st != PRECIS_OK) precis_recipe_list_free(out);
  return st;
}

void precis_recipe_set_static_act_scale(precis_recipe *r, precis_scale_method method, double percentile) {
  if (method == PRECIS_SCALE_DYNAMIC || !precis_operand_is_integer(&r->spec.a) || r->spec.a.gran != PRECIS_GRAN_ROW ||
      r->spec.scale != PRECIS_SCALE_DYNAMIC)
    return;
  r->spec.a.gran = PRECIS_GRAN_TENSOR;
  r->spec.scale = method;
  r->spec.percentile = method == PRECIS_SCALE_PERCENTILE ? percentile : 0;
  bool named_by_spec = strcmp(r->name, r->canonical) == 0;
  precis_spec_format(&r->spec, r->canonical, sizeof r->canonical);
  if (named_by_spec) snprintf(r->name, sizeof r->name, "%s", r->canonical);
  size_t used = strlen(r->description);
  snprintf(r->description + used, sizeof r->description - used, "; A scale static per tensor (%s)",
           precis_scale_method_name(method));
}
