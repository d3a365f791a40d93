/* libprecis: the per-token quantities of verify's end-to-end figures (DESIGN §22; python/precis/
 * endtoend.py and kld.py define them), computed from the reference's and the emulated model's logits
 * in one pass per token instead of a dozen array passes. */
#ifndef PRECIS_PUBLIC_TOKEN_STATS_H
#define PRECIS_PUBLIC_TOKEN_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "precis/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The columns of one token's row of out, in this order. */
typedef enum precis_token_stat {
  PRECIS_TOKEN_STAT_KL,       /* KL(ref || q) = sum p (lp - lq), nats (not clamped at 0) */
  PRECIS_TOKEN_STAT_RKL,      /* KL(q || ref) */
  PRECIS_TOKEN_STAT_TOP1,     /* 1 when the argmaxes (the first of tied maxima) agree, else 0 */
  PRECIS_TOKEN_STAT_TOP5,     /* shared ids among each side's top min(5, vocab), over that count */
  PRECIS_TOKEN_STAT_JSD,      /* Jensen-Shannon, nats, m = (p + q)/2 (terms of p = 0, q = 0 left out) */
  PRECIS_TOKEN_STAT_CONF,     /* the reference's top probability exp(max lp) */
  PRECIS_TOKEN_STAT_CE_REF,   /* -lp at the label (NaN without one) */
  PRECIS_TOKEN_STAT_CE_Q,     /* -lq at the label */
  PRECIS_TOKEN_STAT_RANK_REF, /* the label's 0-based rank in lp, ties to lower ids (-1 without one) */
  PRECIS_TOKEN_STAT_RANK_Q,
  PRECIS_TOKEN_STAT_COUNT
} precis_token_stat;

/* ref and q: [tokens, vocab] logits, each float32 or float64 (its dtype: PRECIS_DTYPE_F32 /
 * PRECIS_DTYPE_F64 of precis/emulate.h). Per token, in float64: lp = x - max - log(sum exp(x - max)),
 * p = exp(lp), then the columns above. labels: NULL, or [tokens] label ids (a value below 0: none).
 * out: [tokens, PRECIS_TOKEN_STAT_COUNT]; finite: [tokens], 0 where a logit of that token is not
 * finite (its row of out is left as it was: the caller decides what NaN and inf give), else 1.
 * Sums run in blocks of 128 terms. PRECIS_E_USAGE for a label at or above vocab, or a bad argument. */
precis_status precis_logit_token_stats(const void *ref, int ref_dtype, const void *q, int q_dtype, int64_t tokens,
                                       int64_t vocab, const int64_t *labels, double *out, unsigned char *finite);

#ifdef __cplusplus
}
#endif

#endif
