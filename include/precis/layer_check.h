/* libprecis: one linear layer's rows of `precis run`, computed where its inputs are at hand (verify's
 * reference pass, DESIGN §16, §20) instead of from a dataset written to disk and read back. Held-out
 * samples are added a batch at a time; the row comes out when they are all in. */
#ifndef PRECIS_PUBLIC_LAYER_CHECK_H
#define PRECIS_PUBLIC_LAYER_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct precis_layer_check precis_layer_check;

/* A check of the layer `layer` (its PyTorch module name: the row's workload and layer) of k inputs
 * and n outputs, for `recipe`. It holds per-sample metrics only (no weights, no inputs). logits: the
 * layer's outputs are a vocabulary's logits (an lm_head), as import marks it (output_kind), so the
 * rows carry KL and top-1 agreement too. isolated: 0 computes no isolated row (only what
 * precis_layer_check_add's `other` is measured against: the reference). */
precis_status precis_layer_check_open(const char *recipe, const char *layer, int64_t k, int64_t n, int logits, int isolated,
                                      precis_layer_check **out);
void precis_layer_check_free(precis_layer_check *check);

/* Adds `samples` held-out samples of `m` rows: a [samples, m, k] float32, the layer's inputs in the
 * reference model, b [k, n] float32 its weights (W^T, as `precis import --model` stores them; the
 * same at every add). As the dataset of `precis import --model --activations` would hold them: c_ref and
 * ab_abs are the float64 dgemm import computes (the same function, in the same blocks of rows), the
 * isolated output is the recipe emulated by the cpu backend on these samples as one A (a tensor scale
 * spans them), and each sample's metrics are those `precis run` computes. other: NULL, or [samples,
 * m, n] float32, another output of the layer on the same samples (verify: the layer's GEMM output
 * inside the emulated model), measured against the same c_ref into the second row. Memory, during
 * the call: the isolated output [samples, m, n] float32, the emulation's quantized operands, b in
 * float64 (the reference dgemm's copy), and c_ref and ab_abs of whole blocks of 256 rows (at least
 * one sample) at a time. */
precis_status precis_layer_check_add(precis_layer_check *check, const float *a, int64_t samples, int64_t m,
                                     const float *b, const float *other);

/* The same with the weights as a linear layer holds them: w [n, k] float32 (W, whose transpose is
 * b): the same rows, bit for bit, without the caller's transposed copy of W. */
precis_status precis_layer_check_add_weights(precis_layer_check *check, const float *a, int64_t samples, int64_t m,
                                             const float *w, const float *other);

/* The same with, when b_batched, one b per sample (b [samples, k, n], as `precis import --b-batched`
 * stores it: attention's QKᵀ and PV, one B per (sequence, head)), and calibration inputs calib_a
 * [calib_samples, m, k] for a recipe whose A scale is static (NULL, 0: none, and such a recipe's
 * isolated row is refused, as precis_layer_check_add refuses it): the split a dataset's calib/a holds. */
precis_status precis_layer_check_add_batched(precis_layer_check *check, const float *a, int64_t samples, int64_t m,
                                             const float *b, int b_batched, const float *other, const float *calib_a,
                                             int64_t calib_samples);

/* The rows as `precis run` writes them into report.json (JSON text, free with precis_free): the
 * isolated row (NULL when opened without it), judged by the recipe's default criteria, and the
 * other output's row (NULL when no add gave one), judged the same way. The metrics over samples
 * aggregate every sample added, in order; a row has no timing (nothing was timed). */
precis_status precis_layer_check_rows(precis_layer_check *check, char **isolated_json, char **other_json);

#ifdef __cplusplus
}
#endif

#endif
