"""End-to-end metrics of a model's output, reference against emulated, and their statistical gates
(DESIGN §16, docs/verify.md). NumPy only: no GEMM numerics here, only the comparison of outputs.

A *sample* is one sequence (one row of the token ids); its *tokens* are the positions its attention
mask keeps. Every metric is defined on a set of samples by pooling their tokens, so the same
definition gives the per-sample value (a set of one) and the value over all samples, and a
bootstrap resamples samples, never tokens of one sample (tokens of a sequence are not independent).

Logits (`[tokens, vocab]` per sample), in float64 from log-softmax:
  kl_*   KL(ref || q) = sum_v p_ref (log p_ref - log p_q) per token: kl_mean, kl_p99, kl_max
  rkl_*  KL(q || ref), the reverse direction: rkl_mean, rkl_p99, rkl_max
  top1_agree    fraction of tokens whose argmax (the first of tied maxima) agrees
  top5_overlap  mean over tokens of |top5(ref) & top5(q)| / 5 (ties: the lower token id first)
  ce_ref, ce_q, ce_delta  mean cross-entropy of the labels (when given) and q's minus ref's
Hidden states or embeddings (`[tokens, hidden]` per sample):
  cosine_mean, cosine_min  cosine of each token's vector, mean and min over tokens
  rel_fro_mean, rel_fro_max  ||q - r||_F / ||r||_F of each sample, mean and max over samples
p99 is numpy.percentile(.., 99) (linear interpolation).
"""
import math
import re

import numpy as np

from . import kld

LOGIT_METRICS = ("kl_mean", "kl_p99", "kl_max", "rkl_mean", "rkl_p99", "rkl_max", "top1_agree",
                 "top5_overlap", "ce_ref", "ce_q", "ce_delta") + kld.GATE_METRICS
HIDDEN_METRICS = ("cosine_mean", "cosine_min", "rel_fro_mean", "rel_fro_max")
# Which way is better, for the favourable/unfavourable side of a confidence bound.
HIGHER_IS_BETTER = {"top1_agree", "top5_overlap", "cosine_mean", "cosine_min"} | kld.HIGHER_IS_BETTER


class GateError(ValueError):
    """A --require expression that names no end-to-end metric or does not parse."""


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def _top_k(x, k):
    """Per row of x [tokens, vocab], the ids of its k largest values, ties going to the lower id:
    the first k of a stable argsort of -x, without sorting the whole vocabulary (a partition finds
    the k-th largest value; only the ids at or above it are sorted)."""
    kth = -np.partition(-x, k - 1, axis=-1)[:, k - 1]
    out = []
    for row, bound in zip(x, kth):
        ids = np.flatnonzero(row >= bound)  # in id order: the stable sort keeps lower ids first among ties
        out.append(ids[np.argsort(-row[ids], kind="stable")[:k]].tolist())
    return out


# Tokens per piece of logit_token_stats: every quantity is per token (a row of [tokens, vocab]), so
# the rows are taken a piece at a time, each piece's float64 temporaries a few MiB rather than a
# whole sample's ten copies of [tokens, vocab], and the pieces are spread over the CPUs (NumPy
# releases the GIL in its loops). The values do not depend on the split: each row's reductions run
# along its own contiguous vocabulary, whatever rows surround it (test_python_verify_figures).
ROWS_PER_PIECE = 16
_POOL = None


def workers():
    """Threads of logit_token_stats: the CPUs this process may use, at most 8."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(8, cpus))


def _pool():
    global _POOL
    if _POOL is None:
        import concurrent.futures

        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="precis-e2e")
    return _POOL


def logit_token_stats(ref, q, labels=None):
    """Per-token quantities of one sample: ref, q [tokens, vocab]; labels [tokens] or None."""
    ref, q = np.asarray(ref), np.asarray(q)
    n = ref.shape[0]
    if n <= ROWS_PER_PIECE:
        return _logit_rows(ref, q, labels)
    starts = range(0, n, ROWS_PER_PIECE)
    labels = None if labels is None else np.asarray(labels)
    parts = list(_pool().map(lambda s: _logit_rows(ref[s:s + ROWS_PER_PIECE], q[s:s + ROWS_PER_PIECE],
                                                   None if labels is None else labels[s:s + ROWS_PER_PIECE]), starts))
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


# The columns of libprecis's precis_logit_token_stats (include/precis/token_stats.h), in order.
_TOKEN_COLUMNS = ("kl", "rkl", "top1", "top5", "jsd", "conf", "ce_ref", "ce_q", "rank_ref", "rank_q")


def _logit_rows(ref, q, labels=None):
    """Per-token quantities of a piece of tokens: libprecis's one pass per token (the same definitions
    as _logit_rows_numpy, sums in blocks of 128 terms instead of NumPy's pairwise ones: equal to a
    few ulps, test_python_token_stats), NumPy's arithmetic for tokens with a non-finite logit."""
    from . import _precis

    ref, q = np.asarray(ref), np.asarray(q)
    ref = np.ascontiguousarray(ref, ref.dtype if ref.dtype in (np.float32, np.float64) else np.float64)
    q = np.ascontiguousarray(q, q.dtype if q.dtype in (np.float32, np.float64) else np.float64)
    if ref.ndim != 2 or ref.shape != q.shape or ref.shape[1] < 1:
        return _logit_rows_numpy(ref, q, labels)
    n, vocab = ref.shape
    out = np.empty((n, len(_TOKEN_COLUMNS)), np.float64)
    finite = np.zeros(n, np.uint8)
    lab = None if labels is None else np.ascontiguousarray(labels, np.float64)
    _precis.logit_token_stats(ref, q, n, vocab, lab, out, finite)
    col = dict(zip(_TOKEN_COLUMNS, out.T))
    # The keys in _logit_rows_numpy's order; the label's quantities only with labels.
    keys = ("kl", "rkl", "top1", "top5") + (("ce_ref", "ce_q") if labels is not None else ()) + ("jsd", "conf") + \
        (("rank_ref", "rank_q") if labels is not None else ())
    res = {key: np.ascontiguousarray(col[key], np.int64 if key.startswith("rank") else np.float64) for key in keys}
    bad = np.flatnonzero(finite == 0)
    if len(bad):
        slow = _logit_rows_numpy(ref[bad], q[bad], None if labels is None else np.asarray(labels)[bad])
        for key in res:
            res[key][bad] = slow[key]
    return res


def _logit_rows_numpy(ref, q, labels=None):
    lp, lq = _log_softmax(ref), _log_softmax(q)
    p, pq = np.exp(lp), np.exp(lq)
    out = {
        "kl": np.sum(p * (lp - lq), axis=-1),
        "rkl": np.sum(pq * (lq - lp), axis=-1),
        "top1": (np.argmax(lp, axis=-1) == np.argmax(lq, axis=-1)).astype(np.float64),
    }
    # Ties (frequent once the logits are rounded to bf16) go to the lower token id, as argmax does.
    k = min(5, lp.shape[-1])
    t_ref, t_q = _top_k(lp, k), _top_k(lq, k)
    out["top5"] = np.array([len(set(a) & set(b)) / k for a, b in zip(t_ref, t_q)], np.float64)
    if labels is not None:
        labels = np.asarray(labels, np.int64)
        keep = labels >= 0
        rows = np.arange(len(labels))
        out["ce_ref"] = np.where(keep, -lp[rows, np.where(keep, labels, 0)], np.nan)
        out["ce_q"] = np.where(keep, -lq[rows, np.where(keep, labels, 0)], np.nan)
    out.update(kld.token_extras(lp, lq, labels, p=p, q=pq))  # JSD, the reference's confidence, the label's ranks
    return out


def hidden_token_stats(ref, q):
    """Per-token cosines and the sample's squared norms, ref and q [tokens, hidden]."""
    r, c = np.asarray(ref, np.float64), np.asarray(q, np.float64)
    nr, nc = np.linalg.norm(r, axis=-1), np.linalg.norm(c, axis=-1)
    dot = np.sum(r * c, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where((nr > 0) & (nc > 0), dot / (nr * nc), np.where((nr == 0) & (nc == 0), 1.0, 0.0))
    return {"cosine": cos, "err2": float(np.sum((c - r) ** 2)), "ref2": float(np.sum(r * r))}


class Outputs:
    """Per-sample token statistics of reference vs emulated outputs; metrics on any subset."""

    def __init__(self, kind, stats, score="all"):
        self.kind, self.stats, self.score = kind, stats, score  # kind "logits" | "hidden"

    @classmethod
    def compare(cls, ref, q, mask=None, labels=None, kind=None, score="all"):
        """ref, q: [samples, tokens, features] (arrays or lists of [tokens, features]); mask
        [samples, tokens] (nonzero: a real token); labels [samples, tokens] (-100 or < 0: none).
        kind: "logits" or "hidden"; default logits when labels are given, else hidden.
        score: the scored positions of logits, "all" or "second-half" (llama.cpp's: of each
        sample's n real tokens, positions n//2 .. n-1, so that every scored token has at least
        half a window of context)."""
        if kind is None:
            kind = "logits" if labels is not None else "hidden"
        if kind not in ("logits", "hidden"):
            raise ValueError(f"kind must be logits or hidden, not {kind!r}")
        if score not in kld.SCORES:
            raise ValueError(f"score must be one of {', '.join(kld.SCORES)}, not {score!r}")
        stats = []
        for i in range(len(ref)):
            r, c = np.asarray(ref[i]), np.asarray(q[i])
            if r.shape != c.shape:
                raise ValueError(f"sample {i}: reference shape {r.shape} and emulated shape {c.shape} differ")
            if r.ndim == 1:
                r, c = r[None], c[None]
            keep = np.ones(r.shape[0], bool) if mask is None else np.asarray(mask[i], bool)[: r.shape[0]]
            lab = None if labels is None else np.asarray(labels[i])[: r.shape[0]][keep]
            if not keep.all():  # a copy of the kept rows only where the mask drops some
                r, c = r[keep], c[keep]
            if kind == "logits" and score == "second-half":
                first = r.shape[0] // 2  # llama.cpp kl_divergence(): first = n_ctx/2
                r, c = r[first:], c[first:]
                lab = None if lab is None else lab[first:]
            if r.shape[0] == 0:
                continue
            stats.append(logit_token_stats(r, c, lab) if kind == "logits" else hidden_token_stats(r, c))
        if not stats:
            raise ValueError("no sample has a token its mask keeps")
        return cls(kind, stats, score if kind == "logits" else "all")

    def __len__(self):
        return len(self.stats)

    def metrics(self, idx=None):
        """The metrics over the samples idx (default all), tokens pooled."""
        s = self.stats if idx is None else [self.stats[i] for i in idx]
        if self.kind == "hidden":
            cos = np.concatenate([x["cosine"] for x in s])
            rel = np.array([math.sqrt(x["err2"] / x["ref2"]) if x["ref2"] > 0 else (0.0 if x["err2"] == 0 else math.inf)
                            for x in s])
            return {"cosine_mean": float(np.mean(cos)), "cosine_min": float(np.min(cos)),
                    "rel_fro_mean": float(np.mean(rel)), "rel_fro_max": float(np.max(rel))}
        out = {}
        for key in ("kl", "rkl"):
            v = np.concatenate([x[key] for x in s])
            out[key + "_mean"] = float(np.mean(v))
            out[key + "_p99"] = float(np.percentile(v, 99))
            out[key + "_max"] = float(np.max(v))
        out["top1_agree"] = float(np.mean(np.concatenate([x["top1"] for x in s])))
        out["top5_overlap"] = float(np.mean(np.concatenate([x["top5"] for x in s])))
        if "ce_ref" in s[0]:
            ce_r = np.concatenate([x["ce_ref"] for x in s])
            ce_q = np.concatenate([x["ce_q"] for x in s])
            keep = ~np.isnan(ce_r)
            if keep.any():
                out["ce_ref"] = float(np.mean(ce_r[keep]))
                out["ce_q"] = float(np.mean(ce_q[keep]))
                out["ce_delta"] = out["ce_q"] - out["ce_ref"]
        out.update(kld.flat(self.block(idx, _stats=s)))
        return out

    def block(self, idx=None, _stats=None):
        """llama.cpp's --kl-divergence block and ExLlamaV3's figures (precis.kld.block) over the
        scored positions that have a label, tokens of the samples idx pooled; None without labels."""
        s = _stats if _stats is not None else (self.stats if idx is None else [self.stats[i] for i in idx])
        if self.kind != "logits" or "ce_ref" not in s[0]:
            return None
        cat = {k: np.concatenate([x[k] for x in s]) for k in ("kl", "ce_ref", "ce_q", "top1", "jsd", "conf", "rank_ref",
                                                             "rank_q")}
        keep = ~np.isnan(cat["ce_ref"])
        return kld.block(cat["kl"][keep], cat["ce_q"][keep], cat["ce_ref"][keep], cat["top1"][keep], jsd=cat["jsd"][keep],
                         conf=cat["conf"][keep], rank_ref=cat["rank_ref"][keep], rank_q=cat["rank_q"][keep],
                         scored=self.score)

    def per_sample(self):
        return [self.metrics([i]) for i in range(len(self.stats))]

    def tokens(self):
        key = "cosine" if self.kind == "hidden" else "kl"
        return int(sum(len(x[key]) for x in self.stats))


_GATE = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([-+0-9.eE]+|inf)\s*$")


def parse_gate(text):
    """'kl_mean<=0.01' -> (metric, op, limit). Refused with a message naming the expression."""
    m = _GATE.match(text)
    if not m:
        raise GateError(f"--require {text!r}: expected METRIC OP NUMBER with OP one of <= < >= >")
    name, op, value = m.group(1), m.group(2), m.group(3)
    if name not in LOGIT_METRICS + HIDDEN_METRICS:
        raise GateError(f"--require {text!r}: {name} is not an end-to-end metric (logits: {', '.join(LOGIT_METRICS)}; "
                        f"hidden states: {', '.join(HIDDEN_METRICS)})")
    try:
        limit = float(value)
    except ValueError:
        raise GateError(f"--require {text!r}: {value!r} is not a number") from None
    return name, op, limit


def _meets(value, op, limit):
    return {"<=": value <= limit, "<": value < limit, ">=": value >= limit, ">": value > limit}[op]


def bootstrap(outputs, resamples=2000, seed=0):
    """The metrics of `resamples` sets of samples drawn with replacement (seeded): the sampling
    distribution the gates and the noise floor's sampling interval (precis.noise) read their bounds
    from; None with fewer than 2 samples. One draw serves both, so they agree and it is paid once."""
    n = len(outputs)
    if n < 2:
        return None
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    return [outputs.metrics(idx) for idx in draws]


def judge(outputs, requires, alpha=0.05, resamples=2000, seed=0, boot=None):
    """Each --require on the end-to-end metrics, judged with its sampling error: the metric's
    percentile-bootstrap distribution over samples (resampled with replacement, `resamples` times,
    seeded; or `boot`, bootstrap()'s list when the caller has drawn it already) gives a one-sided
    bound at level alpha on each side. The verdict is
      pass       the unfavourable bound meets the limit (e.g. kl_mean's upper 1-alpha quantile <= 0.01),
      fail       even the favourable bound misses it,
      undecided  in between, or fewer than 2 samples: too few samples to decide.
    Returns a list of dicts (expression, metric, op, limit, value, bound, favourable_bound, verdict)."""
    if not 0 < alpha < 0.5:
        raise GateError(f"alpha must be in (0, 0.5), not {alpha}")
    parsed = [parse_gate(t) if isinstance(t, str) else t for t in requires]
    n = len(outputs)
    point = outputs.metrics()
    if boot is None and parsed:
        boot = bootstrap(outputs, resamples, seed)
    results = []
    for name, op, limit in parsed:
        expr = f"{name}{op}{limit}"  # the shortest form that reads back as the limit
        if name not in point:
            results.append({"expression": expr, "metric": name, "op": op, "limit": limit, "value": None, "bound": None,
                            "favourable_bound": None, "verdict": "fail",
                            "detail": f"{name} does not apply to these outputs ({outputs.kind})"})
            continue
        value = point[name]
        if boot is None:
            results.append({"expression": expr, "metric": name, "op": op, "limit": limit, "value": value, "bound": None,
                            "favourable_bound": None, "verdict": "undecided",
                            "detail": f"too few samples to decide ({n}; a bound needs at least 2)"})
            continue
        dist = np.array([b[name] for b in boot])
        lo, hi = float(np.quantile(dist, alpha)), float(np.quantile(dist, 1 - alpha))
        upper_limit = op in ("<=", "<")
        bound, favourable = (hi, lo) if upper_limit else (lo, hi)
        if _meets(bound, op, limit):
            verdict, detail = "pass", f"{1 - alpha:.0%} bound {bound:.6g} {op} {limit:g}"
        elif not _meets(favourable, op, limit):
            verdict, detail = "fail", f"even the favourable {1 - alpha:.0%} bound {favourable:.6g} misses {op} {limit:g}"
        else:
            verdict = "undecided"
            detail = (f"too few samples to decide: value {value:.6g}, {1 - alpha:.0%} bounds [{min(lo, hi):.6g}, "
                      f"{max(lo, hi):.6g}] straddle {limit:g} ({n} samples)")
        results.append({"expression": expr, "metric": name, "op": op, "limit": limit, "value": value, "bound": bound,
                        "favourable_bound": favourable, "verdict": verdict, "detail": detail})
    return results
