"""The implementation-noise floor of verify's metrics (DESIGN §22, docs/verify.md "Noise floor").

A metric of the plan (reference against emulated) is only as meaningful as the same metric's
change when the same formats are computed another correct way. verify computes the end-to-end
metrics again under each *alternative*, one thing changed:

  target=SM      the plan emulated under another architecture's accumulator model (precis.emulate's
                 target: sm_80's 24-bit, 8-product fused dot-adds against sm_90's 25-bit, 16-product
                 ones; the same element formats, scales and output rounding)
  sum=fp64       the plan's rounded operands (precis.emulate_operands: element formats and scales
                 applied) multiplied with products and sums in float64 -- an exact-sum
                 implementation -- and rounded to float32, then to the recipe's output format
  gemm=torch     the same operands through PyTorch's own matmul, as a framework deployment computes
                 them: in bfloat16/float16 (torch's GEMM, float32 accumulation inside, output in that
                 format) when both operands and the output are of that format, else in float32 and
                 rounded to the output format
  reference=fp64 the reference's final outputs from the model in float64 instead of float32

The floor of a metric is the *spread across the correct implementations*: the largest difference
of the metric between any two of {the plan, each alternative} (max - min). A metric whose departure
from its ideal value (0 for divergences and changes, 1 for agreements and the PPL ratio) is within
its floor is *indistinguishable from implementation noise*: two correct implementations of the same
formats differ from each other by as much as the plan differs from the reference. Signed metrics
(Δ CE, Δp mean, ln PPL ratio) keep their sign in the spread, so one alternative above and one below
the plan widen it by both. Metrics without an ideal value (ce_ref, ce_q, ppl_q, ppl_base,
label-in-top-K) are not judged.

A second verdict puts the two errors a measured metric carries side by side: which correct
implementation computed it (the floor) and which samples it was measured on (the sampling interval:
the two-sided 1 - alpha percentile-bootstrap interval over samples, the alpha/2 and 1 - alpha/2
quantiles, from the same resamples as the gates' one-sided bounds).
A metric is *indistinguishable from noise (implementation and sampling)* when its ideal value lies
within the floor of the interval (widened to hold the measured value): [min(lo, value) - floor,
max(hi, value) + floor]. The first verdict implies the second. A mean over a few hundred tokens,
such as a near-lossless plan's delta CE, is a signed quantity whose sampling error is often larger
than the implementations' spread; the second verdict is the one that says whether the measurement
can tell the plan from the reference at all. The rules and why: docs/decisions.md, "The noise floor".
"""
import re

import numpy as np

IDEAL = {"kl_mean": 0.0, "kl_p99": 0.0, "kl_max": 0.0, "rkl_mean": 0.0, "rkl_p99": 0.0, "rkl_max": 0.0,
         "top1_agree": 1.0, "top5_overlap": 1.0, "ce_delta": 0.0, "ppl_ratio": 1.0, "ln_ppl_ratio": 0.0,
         "ppl_diff": 0.0, "kl_median": 0.0, "kl_p90": 0.0, "kl_p95": 0.0, "kl_p999": 0.0, "dp_mean": 0.0,
         "dp_rms": 0.0, "same_top": 1.0, "jsd_mean": 0.0, "cosine_mean": 1.0, "cosine_min": 1.0,
         "rel_fro_mean": 0.0, "rel_fro_max": 0.0}
LABEL = "indistinguishable from implementation noise"
LABEL_WITH_SAMPLING = "indistinguishable from noise (implementation and sampling)"
# `--noise-floor` without a value: three more emulated forwards per batch, each a different way of
# summing the same rounded operands (another accumulator, an exact sum, a framework's GEMM).
# reference=fp64 is left out: it needs a float64 copy of the model and moves metrics by ~1e-7.
DEFAULT = ("target=sm_80", "sum=fp64", "gemm=torch")
_ALT = re.compile(r"^(target)=(sm_80|sm_89|sm_90|sm_100|sm_120)$|^(reference)=(fp64)$|^(sum)=(fp64)$|^(gemm)=(torch)$")
_SYNTAX = "target=sm_80|sm_89|sm_90|sm_100|sm_120, sum=fp64, gemm=torch, reference=fp64 or default"


class NoiseError(ValueError):
    """A --noise-floor alternative that does not parse."""


def parse(text):
    m = _ALT.match(text.strip())
    if not m:
        raise NoiseError(f"--noise-floor {text!r}: expected {_SYNTAX}")
    groups = [g for g in m.groups() if g is not None]
    return groups[0], groups[1]


def expand(texts):
    """The alternatives asked for, `default` (or an empty value) standing for DEFAULT, each once, in order."""
    out = []
    for text in texts or ():
        for t in (DEFAULT if text is None or text.strip() in ("", "default") else (text,)):
            key = "=".join(parse(t))
            if key not in out:
                out.append(key)
    return out


def _round_to(c, out):
    """float32 c rounded (to nearest even) to the recipe's output format, as float32."""
    import torch

    if out == "fp32":
        return c
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[out]
    return torch.from_numpy(np.ascontiguousarray(c)).to(dtype).to(torch.float32).numpy()


class OperandGemm:
    """An alternative implementation of each planned GEMM from the operands the plan multiplies
    (precis.emulate_operands), summed another way (how = "sum=fp64" or "gemm=torch"). A recipe
    whose operands are not a plain product (int8 per row, group-scaled activations, static scales,
    acc other than fp32) runs the plan's own emulation instead; `as_plan` says which and why."""

    def __init__(self, how):
        self.how = how
        self.as_plan = {}

    def __call__(self, a, b, recipe):
        import precis

        spec = dict(f.split("=", 1) for f in precis.spec(recipe).split(","))
        out = spec["out"]
        try:
            if out not in ("fp32", "bf16", "fp16"):
                raise precis.UnsupportedError(f"out={out}: only fp32, bf16 and fp16 outputs are rounded here")
            av, bv, alpha = precis.emulate_operands(a, b, recipe)
        except precis.UnsupportedError as e:
            self.as_plan.setdefault(recipe, str(e))
            return precis.emulate(a, b, recipe)
        if self.how == "sum=fp64":
            c = np.matmul(av.astype(np.float64), bv.astype(np.float64))
            return _round_to((c * alpha).astype(np.float32), out)
        return self._torch(av, bv, alpha, out)

    @staticmethod
    def _torch(av, bv, alpha, out):
        import torch

        ta, tb = torch.from_numpy(av), torch.from_numpy(bv)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(out)
        if dtype is not None and alpha == 1.0:
            la, lb = ta.to(dtype), tb.to(dtype)
            if torch.equal(la.to(torch.float32), ta) and torch.equal(lb.to(torch.float32), tb):
                return torch.matmul(la, lb).to(torch.float32).numpy()  # the framework's own low-precision GEMM
        c = torch.matmul(ta, tb)
        if alpha != 1.0:
            c = c * alpha
        return _round_to(c.numpy(), out)


def floors(metrics, alternatives, boot=None, alpha=0.05):
    """metrics: the plan's metrics; alternatives: {name: metrics under that alternative}; boot: the
    plan's metrics on bootstrap resamples of the samples (endtoend.bootstrap; None: no sampling
    interval). Returns {metric: {"value", "ideal", "floor", "by": {alternative: signed difference
    from the plan}, "noise": bool, "interval": [lo, hi] or None, "noise_and_sampling": bool or
    None}}; floor = max - min of the metric over the plan and the alternatives; interval = the
    alpha/2 and 1 - alpha/2 quantiles of the metric over boot (a two-sided 1 - alpha interval: "is the
    metric distinguishable from its ideal value" asks about both sides)."""
    out = {}
    for name, ideal in IDEAL.items():
        if name not in metrics or metrics[name] is None:
            continue
        by = {alt: m[name] - metrics[name] for alt, m in alternatives.items() if m.get(name) is not None}
        if not by:
            continue
        value = metrics[name]
        values = [0.0] + list(by.values())  # differences from the plan: the plan's own is 0
        floor = max(values) - min(values)
        interval, with_sampling = None, None
        dist = None if boot is None else np.array([b[name] for b in boot if b.get(name) is not None], np.float64)
        if dist is not None and len(dist) and np.all(np.isfinite(dist)):
            interval = [float(np.quantile(dist, alpha / 2)), float(np.quantile(dist, 1 - alpha / 2))]
            with_sampling = bool(min(interval[0], value) - floor <= ideal <= max(interval[1], value) + floor)
        out[name] = {"value": value, "ideal": ideal, "floor": floor, "by": by,
                     "noise": bool(abs(value - ideal) <= floor), "interval": interval,
                     "noise_and_sampling": with_sampling}
    return out


def verdict(f):
    """The words of one metric's two verdicts (floors()'s entry), for report.md/html."""
    if f["noise"]:
        return LABEL
    if f.get("noise_and_sampling"):
        return f"above the floor; {LABEL_WITH_SAMPLING}"
    if f.get("noise_and_sampling") is None:
        return "above the floor (no sampling interval: fewer than 2 samples)"
    return "above the floor and its sampling interval"


def mark_gates(gates, table):
    """Each gate whose metric is within its floor (noise), or within the floor of its sampling
    interval (noise_and_sampling), says so (the flags, and in its detail)."""
    for g in gates:
        f = table.get(g["metric"])
        g["noise"] = bool(f and f["noise"])
        g["noise_and_sampling"] = None if not f else f["noise_and_sampling"]
        if g["noise"]:
            g["detail"] += (f"; {LABEL}: |{g['metric']} - {f['ideal']:g}| = {abs(f['value'] - f['ideal']):.3g} "
                            f"<= floor {f['floor']:.3g}")
        elif g["noise_and_sampling"]:
            lo, hi = f["interval"]
            g["detail"] += (f"; {LABEL_WITH_SAMPLING}: {f['ideal']:g} within floor {f['floor']:.3g} of the sampling "
                            f"interval [{lo:.3g}, {hi:.3g}]")
    return gates
