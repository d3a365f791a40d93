"""The figures users compare quantizations by (DESIGN §22, docs/verify.md "The figures users compare"):
llama.cpp's `perplexity --kl-divergence` block and ExLlamaV3's per-token figures, from the
reference's and the emulated model's logits. NumPy statistics of outputs only (no GEMM numerics).

Sources, with the same definitions:
- llama.cpp, tools/perplexity/perplexity.cpp: `log_softmax(..., kl_divergence_result &)` (per token:
  nll, nll_base, KL, same top, p_diff) and `kl_divergence()` (the sums, `mean_and_uncertainty`,
  `covariance`, `percentile`, and the printed block). Scored positions there: the second half of
  each window of n_ctx tokens (`first = n_ctx/2`, positions first .. n_ctx-2, each predicting the
  next token).
- ExLlamaV3, eval/model_diff.py: label in top-K for K = 1..5 of each model, and "KL divergence
  (A, B), by reference confidence" with the bins [0, .25), [.25, .5), [.5, .75), [.75, .95),
  [.95, 1] of the reference's top-token probability (share of tokens, mean and median KL per bin).

Differences from llama.cpp, all on the side of exactness: the reference's log-probabilities are
float64 from its float32 logits (llama.cpp stores them as 16-bit codes over [max - 16, max] and
drops terms with log p_base <= -16 from the KL sum), and the per-token arithmetic is float64
(llama.cpp's is float32 with float64 sums). The standard errors are llama.cpp's formulas exactly,
including its rules that an SE is 0 with 10 or fewer tokens and a covariance 0 with fewer than 10.
"""
import math

import numpy as np

SCORES = ("all", "second-half")
# ExLlamaV3 eval/model_diff.py: `for c_lo, c_hi in [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 0.95),
# (0.95, 1.01)]` (the last bin's 1.01 makes it closed at 1).
CONFIDENCE_BINS = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 0.95), (0.95, 1.0))
TOP_K = 5
# llama.cpp's printed percentiles, as fractions (kl_divergence(): "99.9%   KLD" ... " 0.1%   KLD").
KL_PERCENTILES = (("p99.9", 0.999), ("p99", 0.99), ("p95", 0.95), ("p90", 0.90), ("p10", 0.10), ("p5", 0.05),
                  ("p1", 0.01), ("p0.1", 0.001))
DP_PERCENTILES = (("p99.9", 0.999), ("p99", 0.99), ("p95", 0.95), ("p90", 0.90), ("p75", 0.75), ("p25", 0.25),
                  ("p10", 0.10), ("p5", 0.05), ("p1", 0.01), ("p0.1", 0.001))

# Flat names of the block's figures for gates (--require) and the per-sample table.
GATE_METRICS = ("ppl_q", "ppl_base", "ppl_ratio", "ln_ppl_ratio", "ppl_diff", "kl_median", "kl_p90", "kl_p95",
                "kl_p999", "dp_mean", "dp_rms", "same_top", "jsd_mean", "label_top1_q", "label_top5_q")
HIGHER_IS_BETTER = {"same_top", "label_top1_q", "label_top5_q"}


def token_extras(lp, lq, labels=None, p=None, q=None):
    """Per-token quantities beside endtoend's (lp, lq: float64 log-softmax [tokens, vocab]):
    jsd      Jensen-Shannon divergence in nats, 1/2 KL(p||m) + 1/2 KL(q||m), m = (p + q)/2
    conf     the reference's top-token probability max_v p_ref (ExLlamaV3's confidence)
    rank_ref, rank_q  the label's 0-based rank in each model's distribution (ties: the lower token
             id first, as argmax and endtoend's top-5), -1 where there is no label.
    p, q: exp(lp), exp(lq) when the caller has them (the same values, not computed twice)."""
    p = np.exp(lp) if p is None else p
    q = np.exp(lq) if q is None else q
    lm = np.logaddexp(lp, lq) - math.log(2.0)
    with np.errstate(invalid="ignore"):
        jsd = 0.5 * np.sum(np.where(p > 0, p * (lp - lm), 0.0), axis=-1) + \
            0.5 * np.sum(np.where(q > 0, q * (lq - lm), 0.0), axis=-1)
    out = {"jsd": jsd, "conf": np.exp(np.max(lp, axis=-1))}
    if labels is not None:
        labels = np.asarray(labels, np.int64)
        keep = labels >= 0
        rows = np.arange(len(labels))
        lab = np.where(keep, labels, 0)
        ids = np.arange(lp.shape[-1])[None, :]
        for name, x in (("rank_ref", lp), ("rank_q", lq)):
            at = x[rows, lab][:, None]
            rank = np.sum((x > at) | ((x == at) & (ids < lab[:, None])), axis=-1)
            out[name] = np.where(keep, rank, -1)
    return out


def mean_and_uncertainty(x):
    """llama.cpp kl_divergence()'s `mean_and_uncertainty(sum, sum2, count)`: the mean and
    sqrt((sum2/n - mean^2)/(n - 1)), 0 unless that variance is positive and n > 10."""
    n = len(x)
    if n < 1:
        return 0.0, 0.0
    x = np.asarray(x, np.float64)
    f = float(np.sum(x)) / n
    df = float(np.sum(x * x)) / n - f * f
    return f, (math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0)


def covariance(a, b):
    """llama.cpp's `covariance(suma, sumb, sumab, count)`: (sumab/n - suma/n * sumb/n)/(n - 1), 0
    with fewer than 10 values."""
    n = len(a)
    if n < 10:
        return 0.0
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (float(np.sum(a * b)) / n - (float(np.sum(a)) / n) * (float(np.sum(b)) / n)) / (n - 1)


def percentile(sorted_values, fraction):
    """llama.cpp's `percentile` lambda on sorted values: linear interpolation at fraction*(n - 1)."""
    v = sorted_values
    if fraction <= 0:
        return float(v[0])
    if fraction >= 1:
        return float(v[-1])
    pos = fraction * (len(v) - 1)
    i = int(pos)
    w = pos - i
    return float((1 - w) * v[i] + w * v[min(i + 1, len(v) - 1)])


def median(sorted_values):
    v, n = sorted_values, len(sorted_values)
    return float(0.5 * (v[n // 2] + v[n // 2 - 1]) if n % 2 == 0 else v[n // 2])


def _pm(value, se):
    return {"value": float(value), "se": float(se)}


def block(kl, nll_q, nll_base, same_top, jsd=None, conf=None, rank_ref=None, rank_q=None, scored="all"):
    """llama.cpp's --kl-divergence block and ExLlamaV3's figures from per-token arrays over the
    scored positions (each one predicting a labelled next token): KL(ref||q), the two
    negative log-likelihoods of the label, same-top (argmax agreement) as 0/1, and
    token_extras' jsd, conf and ranks. Returns a dict (JSON-ready); None when no token is scored."""
    kl = np.asarray(kl, np.float64)
    nll_q, nll_base = np.asarray(nll_q, np.float64), np.asarray(nll_base, np.float64)
    n = len(kl)
    if n == 0:
        return None
    out = {"scored": scored, "tokens": n,
           "source": "llama.cpp tools/perplexity/perplexity.cpp kl_divergence(); ExLlamaV3 eval/model_diff.py"}
    lq, lq_se = mean_and_uncertainty(nll_q)
    lb, lb_se = mean_and_uncertainty(nll_base)
    cov = covariance(nll_q, nll_base)
    ppl, ppl_base = math.exp(lq), math.exp(lb)
    out["ppl_q"] = _pm(ppl, ppl * lq_se)
    out["ppl_base"] = _pm(ppl_base, ppl_base * lb_se)
    out["cor_ln_ppl"] = cov / (lq_se * lb_se) if lq_se > 0 and lb_se > 0 else None
    ln_ratio = lq - lb
    ln_ratio_se = math.sqrt(max(lq_se * lq_se + lb_se * lb_se - 2.0 * cov, 0.0))
    out["ln_ppl_ratio"] = _pm(ln_ratio, ln_ratio_se)
    out["ppl_ratio"] = _pm(math.exp(ln_ratio), math.exp(ln_ratio) * ln_ratio_se)
    ppl_cov = ppl * ppl_base * cov
    out["ppl_diff"] = _pm(ppl - ppl_base, math.sqrt(max((ppl * lq_se) ** 2 + (ppl_base * lb_se) ** 2 - 2.0 * ppl_cov,
                                                         0.0)))
    ks = np.sort(kl)
    m, se = mean_and_uncertainty(kl)
    out["kl"] = {"mean": _pm(m, se), "max": float(ks[-1]), "median": median(ks), "min": float(ks[0])}
    for name, f in KL_PERCENTILES:
        out["kl"][name] = percentile(ks, f)
    dp = np.exp(-nll_q) - np.exp(-nll_base)
    ds = np.sort(dp)
    m, se = mean_and_uncertainty(dp)
    out["dp"] = {"mean": _pm(m, se), "max": float(ds[-1]), "median": median(ds), "min": float(ds[0])}
    for name, f in DP_PERCENTILES:
        out["dp"][name] = percentile(ds, f)
    mse, mse_se = mean_and_uncertainty(dp * dp)
    rms = math.sqrt(mse)
    out["rms_dp"] = _pm(rms, 0.5 / rms * mse_se if rms > 0 else 0.0)
    st = float(np.sum(np.asarray(same_top, np.float64))) / n
    out["same_top"] = _pm(st, math.sqrt(st * (1.0 - st) / (n - 1)) if n > 1 else 0.0)
    if jsd is not None:
        js = np.sort(np.asarray(jsd, np.float64))
        out["jsd"] = {"mean": float(np.mean(js)), "median": median(js), "p99": percentile(js, 0.99),
                      "max": float(js[-1])}
    if conf is not None:
        conf = np.asarray(conf, np.float64)
        bins = []
        for lo, hi in CONFIDENCE_BINS:
            sel = (conf >= lo) & ((conf < hi) if hi < 1.0 else (conf <= hi))
            k = int(np.sum(sel))
            entry = {"bin": [lo, hi], "closed": hi >= 1.0, "tokens": k, "share": k / n}
            if k:
                entry["kl_mean"] = float(np.mean(kl[sel]))
                entry["kl_median"] = float(np.median(kl[sel]))
            bins.append(entry)
        out["kl_by_confidence"] = bins
    if rank_ref is not None and rank_q is not None:
        rr, rq = np.asarray(rank_ref), np.asarray(rank_q)
        out["label_in_top_k"] = {"k": list(range(1, TOP_K + 1)),
                                 "ref": [float(np.mean(rr < k)) for k in range(1, TOP_K + 1)],
                                 "q": [float(np.mean(rq < k)) for k in range(1, TOP_K + 1)]}
    return out


def flat(b):
    """The block's figures under GATE_METRICS names (values only, for gates and per-sample tables)."""
    if b is None:
        return {}
    out = {"ppl_q": b["ppl_q"]["value"], "ppl_base": b["ppl_base"]["value"], "ppl_ratio": b["ppl_ratio"]["value"],
           "ln_ppl_ratio": b["ln_ppl_ratio"]["value"], "ppl_diff": b["ppl_diff"]["value"],
           "kl_median": b["kl"]["median"], "kl_p90": b["kl"]["p90"], "kl_p95": b["kl"]["p95"],
           "kl_p999": b["kl"]["p99.9"], "dp_mean": b["dp"]["mean"]["value"], "dp_rms": b["rms_dp"]["value"],
           "same_top": b["same_top"]["value"]}
    if "jsd" in b:
        out["jsd_mean"] = b["jsd"]["mean"]
    if "label_in_top_k" in b:
        out["label_top1_q"] = b["label_in_top_k"]["q"][0]
        out["label_top5_q"] = b["label_in_top_k"]["q"][-1]
    return out


def _f(x, pct=False, width=10, prec=6):
    if x is None:
        return "–"
    return f"{100.0 * x:.3f}" if pct else f"{x:.{prec}f}"


def render_text(b):
    """The block as llama.cpp prints it (its labels and units: Δp and same top in %), plus ExLlamaV3's."""
    if b is None:
        return ""
    pm = lambda d, pct=False: f"{_f(d['value'], pct)} ± {_f(d['se'], pct)}" + (" %" if pct else "")  # noqa: E731
    lines = [f"scored positions: {b['scored']} ({b['tokens']} tokens, each predicting its labelled next token)",
             "====== Perplexity statistics ======",
             f"Mean PPL(Q)                   : {pm(b['ppl_q'])}",
             f"Mean PPL(base)                : {pm(b['ppl_base'])}",
             "Cor(ln(PPL(Q)), ln(PPL(base))): " + ("–" if b["cor_ln_ppl"] is None else f"{100 * b['cor_ln_ppl']:.2f}%"),
             f"Mean ln(PPL(Q)/PPL(base))     : {pm(b['ln_ppl_ratio'])}",
             f"Mean PPL(Q)/PPL(base)         : {pm(b['ppl_ratio'])}",
             f"Mean PPL(Q)-PPL(base)         : {pm(b['ppl_diff'])}",
             "", "====== KL divergence statistics ======",
             f"Mean    KLD: {pm(b['kl']['mean'])}", f"Maximum KLD: {_f(b['kl']['max'])}"]
    for name, _ in KL_PERCENTILES[:4]:
        lines.append(f"{name[1:] + '%':<8}KLD: {_f(b['kl'][name])}")
    lines.append(f"Median  KLD: {_f(b['kl']['median'])}")
    for name, _ in KL_PERCENTILES[4:]:
        lines.append(f"{name[1:] + '%':<8}KLD: {_f(b['kl'][name])}")
    lines += [f"Minimum KLD: {_f(b['kl']['min'])}", "", "====== Token probability statistics ======",
              f"Mean    Δp: {pm(b['dp']['mean'], True)}", f"Maximum Δp: {_f(b['dp']['max'], True)}%"]
    for name, _ in DP_PERCENTILES[:5]:
        lines.append(f"{name[1:] + '%':<8}Δp: {_f(b['dp'][name], True)}%")
    lines.append(f"Median  Δp: {_f(b['dp']['median'], True)}%")
    for name, _ in DP_PERCENTILES[5:]:
        lines.append(f"{name[1:] + '%':<8}Δp: {_f(b['dp'][name], True)}%")
    lines += [f"Minimum Δp: {_f(b['dp']['min'], True)}%", f"RMS Δp    : {pm(b['rms_dp'], True)}",
              f"Same top p: {pm(b['same_top'], True)}"]
    if "jsd" in b:
        lines += ["", f"Jensen-Shannon (nats): mean {_f(b['jsd']['mean'])}, median {_f(b['jsd']['median'])}, "
                  f"p99 {_f(b['jsd']['p99'])}, max {_f(b['jsd']['max'])}"]
    if "label_in_top_k" in b:
        t = b["label_in_top_k"]
        lines += ["", "Label in top-K   " + "  ".join(f"K={k}" + " " * 3 for k in t["k"]),
                  "  reference      " + "  ".join(f"{v:.4f}" for v in t["ref"]),
                  "  emulated       " + "  ".join(f"{v:.4f}" for v in t["q"])]
    if "kl_by_confidence" in b:
        lines += ["", "KL(ref‖q) by the reference's top-token probability:"]
        for e in b["kl_by_confidence"]:
            lo, hi = e["bin"]
            close = "]" if e["closed"] else ")"
            tail = (f"   mean {_f(e['kl_mean'])}   median {_f(e['kl_median'])}" if e["tokens"] else "")
            lines.append(f"  [{lo:4.2f}, {hi:4.2f}{close}: {100 * e['share']:5.1f}% of tokens{tail}")
    return "\n".join(lines)
