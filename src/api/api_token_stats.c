/* libprecis: verify's per-token quantities (include/precis/token_stats.h); the arithmetic is
 * numerics/metrics.c's precis_metrics_token_stats. */
#include <stdlib.h>

#include "base/status.h"
#include "numerics/metrics.h"
#include "precis/token_stats.h"

_Static_assert((int)PRECIS_TOKEN_STAT_KL == (int)PRECIS_TOKEN_KL &&
                   (int)PRECIS_TOKEN_STAT_RKL == (int)PRECIS_TOKEN_RKL &&
                   (int)PRECIS_TOKEN_STAT_TOP1 == (int)PRECIS_TOKEN_TOP1 &&
                   (int)PRECIS_TOKEN_STAT_TOP5 == (int)PRECIS_TOKEN_TOP5 &&
                   (int)PRECIS_TOKEN_STAT_JSD == (int)PRECIS_TOKEN_JSD &&
                   (int)PRECIS_TOKEN_STAT_CONF == (int)PRECIS_TOKEN_CONF &&
                   (int)PRECIS_TOKEN_STAT_CE_REF == (int)PRECIS_TOKEN_CE_REF &&
                   (int)PRECIS_TOKEN_STAT_CE_Q == (int)PRECIS_TOKEN_CE_Q &&
                   (int)PRECIS_TOKEN_STAT_RANK_REF == (int)PRECIS_TOKEN_RANK_REF &&
                   (int)PRECIS_TOKEN_STAT_RANK_Q == (int)PRECIS_TOKEN_RANK_Q &&
                   (int)PRECIS_TOKEN_STAT_COUNT == (int)PRECIS_TOKEN_COLUMNS,
               "the public columns are numerics/metrics.h's, in the same order");


precis_status precis_logit_token_stats(const void *ref, int ref_dtype, const void *q, int q_dtype, int64_t tokens,
                                       int64_t vocab, const int64_t *labels, double *out, unsigned char *finite) {
  if (!ref || !q || !out || !finite)
    return precis_fail(PRECIS_E_USAGE, "precis_logit_token_stats: no logits or no output");
  if ((ref_dtype != PRECIS_DTYPE_F32 && ref_dtype != PRECIS_DTYPE_F64) ||
      (q_dtype != PRECIS_DTYPE_F32 && q_dtype != PRECIS_DTYPE_F64))
    return precis_fail(PRECIS_E_USAGE, "precis_logit_token_stats: logits must be float32 or float64");
  if (tokens < 0 || vocab < 1)
    return precis_fail(PRECIS_E_USAGE, "precis_logit_token_stats: tokens=%lld, vocab=%lld: expected tokens >= 0, vocab >= 1",
                       (long long)tokens, (long long)vocab);
  for (int64_t t = 0; labels && t < tokens; t++)
    if (labels[t] >= vocab)
      return precis_fail(PRECIS_E_USAGE, "labels[%lld] = %lld: expected below the vocabulary's %lld (or negative: none)",
                         (long long)t, (long long)labels[t], (long long)vocab);
  double *scratch = malloc(4 * (size_t)vocab * sizeof *scratch);
  if (!scratch) return precis_fail(PRECIS_E_NOMEM, "out of memory for four rows of %lld logits", (long long)vocab);
  const bool r64 = ref_dtype == PRECIS_DTYPE_F64, q64 = q_dtype == PRECIS_DTYPE_F64;
  precis_metrics_token_stats(r64 ? NULL : ref, r64 ? ref : NULL, q64 ? NULL : q, q64 ? q : NULL, (size_t)tokens,
                             (size_t)vocab, labels, scratch, out, finite);
  free(scratch);
  return PRECIS_OK;
}
