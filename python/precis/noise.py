"""The implementation-noise floor of verify's metrics (DESIGN §22, docs/verify.md "Noise floor").

A metric of the plan (reference against emulated) is only as meaningful as the same metric's
change when the same formats are computed another correct way. verify computes the end-to-end
metrics again with one thing changed per *alternative*:

  target=SM      the plan emulated under another architecture's accumulator model (precis.emulate's
                 target: sm_80's 24-bit, 8-product fused dot-adds against sm_90's 25-bit, 16-product
                 ones; the same element formats, scales and output rounding)
  reference=fp64 the reference's final outputs from the model in float64 instead of float32

The floor of a metric is the largest |metric(alternative) - metric| over the alternatives. A metric
whose departure from its ideal value (0 for divergences and changes, 1 for agreements, 1 for the
PPL ratio) is within its floor is *indistinguishable from implementation noise*: another correct
implementation moves it as far as the plan does. Metrics without an ideal value (ce_ref, ce_q,
ppl_q, ppl_base, label-in-top-K) are not judged.
"""
import re

IDEAL = {"kl_mean": 0.0, "kl_p99": 0.0, "kl_max": 0.0, "rkl_mean": 0.0, "rkl_p99": 0.0, "rkl_max": 0.0,
         "top1_agree": 1.0, "top5_overlap": 1.0, "ce_delta": 0.0, "ppl_ratio": 1.0, "ln_ppl_ratio": 0.0,
         "ppl_diff": 0.0, "kl_median": 0.0, "kl_p90": 0.0, "kl_p95": 0.0, "kl_p999": 0.0, "dp_mean": 0.0,
         "dp_rms": 0.0, "same_top": 1.0, "jsd_mean": 0.0, "cosine_mean": 1.0, "cosine_min": 1.0,
         "rel_fro_mean": 0.0, "rel_fro_max": 0.0}
LABEL = "indistinguishable from implementation noise"
_ALT = re.compile(r"^(target)=(sm_80|sm_89|sm_90|sm_100|sm_120)$|^(reference)=(fp64)$")


class NoiseError(ValueError):
    """A --noise-floor alternative that does not parse."""


def parse(text):
    m = _ALT.match(text.strip())
    if not m:
        raise NoiseError(f"--noise-floor {text!r}: expected target=sm_80|sm_89|sm_90|sm_100|sm_120 or reference=fp64")
    return (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))


def floors(metrics, alternatives):
    """metrics: the plan's metrics; alternatives: {name: metrics under that alternative}. Returns
    {metric: {"value", "ideal", "floor", "by": {alternative: |difference|}, "noise": bool}}."""
    out = {}
    for name, ideal in IDEAL.items():
        if name not in metrics or metrics[name] is None:
            continue
        by = {alt: abs(m[name] - metrics[name]) for alt, m in alternatives.items() if m.get(name) is not None}
        if not by:
            continue
        floor = max(by.values())
        out[name] = {"value": metrics[name], "ideal": ideal, "floor": floor, "by": by,
                     "noise": abs(metrics[name] - ideal) <= floor}
    return out


def mark_gates(gates, table):
    """Each gate whose metric is within its floor says so (noise: true, and in its detail)."""
    for g in gates:
        f = table.get(g["metric"])
        g["noise"] = bool(f and f["noise"])
        if g["noise"]:
            g["detail"] += (f"; {LABEL}: |{g['metric']} - {f['ideal']:g}| = {abs(f['value'] - f['ideal']):.3g} "
                            f"<= floor {f['floor']:.3g}")
    return gates
