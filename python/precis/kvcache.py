"""The KV cache in a served model's formats (DESIGN §23, docs/kv-cache.md).

Keys (after the rotary embedding, as a cache stores them) and values go through the format an
engine stores them in, quantized and dequantized by libprecis (`precis.quantize`), inside the
model's own attention: each attention call of a transformers model goes through the
AttentionInterface, and `kv_cache(model, "e4m3@tensor,s8@row:sym")` routes it through a function
that replaces K and V by what the cache would give back, then calls the model's eager or sdpa
attention unchanged. Masks (causal, padding, sliding windows) are the model's own.

A format is an operand field of libprecis applied to the cache as rows of head_dim values, one row
per (sequence, KV head, token): `s8@row:sym` is int8 per token and head, `s4@k32:sym` 4-bit groups of
32 along head_dim, `e2m1@nv` NVFP4. Per-tensor fp8 is what engines calibrate once:
  e4m3 / e5m2                 scale 1.0 (vLLM kv_cache_dtype=fp8 / fp8_e5m2 without scales)
  e4m3@tensor / e5m2@tensor   one static scale per layer and K/V, amax/448 from calibration
  e4m3@head / e5m2@head       one static scale per KV head (llm-compressor strategy attn_head)
  e2m1@nv:static              NVFP4 with a calibrated fp32 tensor scale (ModelOpt's NVFP4 KV)
and `+had` rotates each head vector by the normalized Hadamard matrix before quantizing (and back
after), as llama.cpp's rotated KV cache. `bf16`, `fp16` store the cache in that type.
"""
import itertools
import math
import sys

import numpy as np

from . import quantize as _quantize
from ._precis import UsageError

__all__ = ["KVFormat", "parse_kv", "kv_cache", "calibrate", "bytes_per_token", "KVError", "ALIASES"]


class KVError(ValueError):
    """A KV format that does not parse, or a model whose attention is not reachable."""


# Short names for the formats engines name (docs/kv-cache.md gives each one's source).
ALIASES = {
    "fp8": "e4m3",
    "fp8-tensor": "e4m3@tensor",
    "fp8-head": "e4m3@head",
    "fp8-e5m2": "e5m2",
    "int8": "s8@row:sym",
    "nvfp4": "e2m1@nv",
    "nvfp4-static": "e2m1@nv:static",
    "int4": "s4@k32:sym",
    "int4-had": "s4@k32:sym+had",
    "int2": "s2@k32:sym",
    "int2-had": "s2@k32:sym+had",
    "mxfp4": "e2m1@mx",
}

_CASTS = {"bf16": 16, "fp16": 16, "fp32": 32, "none": 32}
_ELEM_BITS = {"e4m3": 8, "e5m2": 8, "s8": 8, "e2m1": 4, "s4": 4, "u4": 4, "s3": 3, "s2": 2, "e2m3": 6, "e3m2": 6}


class KVFormat:
    """One cache format (for K or for V). text: an alias, `bf16`/`fp16`/`none`, `e4m3`/`e5m2`
    (scale 1.0), `FP8@tensor`/`FP8@head` (calibrated static scales) or a libprecis operand field
    (`s8@row:sym`, `s4@k32:sym`, `e2m1@nv`, ...), optionally followed by `+had`."""

    def __init__(self, text):
        if not isinstance(text, str) or not text.strip():
            raise KVError(f"KV format {text!r}: expected a format such as e4m3, e4m3@tensor, s8@row:sym, e2m1@nv")
        self.text = text.strip()
        body = ALIASES.get(self.text, self.text)
        self.hadamard = body.endswith("+had")
        if self.hadamard:
            body = body[:-len("+had")]
        body = ALIASES.get(body, body)
        self.mode = None          # "cast", "unit", "tensor", "head", "operand"
        self.operand = None       # libprecis operand field (operand A: rows of head_dim)
        self.elem = body.split("@")[0].split(":")[0]
        if body in _CASTS:
            self.mode = "cast"
            self.operand = None if body == "none" else f"a={body}"
        elif body in ("e4m3", "e5m2"):
            self.mode, self.operand = "unit", f"a={body}@tensor"
        elif body in ("e4m3@tensor", "e5m2@tensor", "e4m3@head", "e5m2@head"):
            self.mode = body.split("@")[1]
            self.operand = f"a={self.elem}@tensor"
        elif body == "e2m1@nv:static":
            # NVFP4 with its fp32 tensor scale fixed by calibration (amax/2688), as ModelOpt's KV
            # quantizers keep it; the E4M3 block scales are each block's own.
            self.mode, self.operand = "nv-static", "a=e2m1@nv"
        else:
            if "@" not in body:
                raise KVError(f"KV format {self.text!r}: expected FMT@GRANULARITY (s8@row:sym, s4@k32:sym, e2m1@nv), "
                              f"e4m3/e5m2 (scale 1.0), e4m3@tensor/@head (calibrated) or one of {sorted(ALIASES)}")
            gran = body.split("@", 1)[1].split(":")[0]
            if gran in ("tensor", "col") or "x" in gran:
                raise KVError(f"KV format {self.text!r}: @{gran} spans tokens; a cache quantizes each token as it is "
                              "written (use @row, @k<G>, @nv, @mx, or e4m3@tensor for a calibrated static scale)")
            self.mode, self.operand = "operand", f"a={body}"
        if self.operand:
            try:  # libprecis parses (and refuses) the operand field itself
                _quantize(np.zeros((1, 32), np.float32), self.operand)
            except UsageError as e:
                raise KVError(f"KV format {self.text!r}: {e}") from None
        if self.hadamard and self.mode == "cast":
            raise KVError(f"KV format {self.text!r}: +had rotates before a quantizer; {body} has none")

    @property
    def calibrated(self):
        return self.mode in ("tensor", "head", "nv-static")

    def bits_per_value(self, head_dim):
        """Storage per cached value, scales included (precis stores a group scale as fp32, nv's
        and mx's as one byte; static per-tensor/per-head scales are free per token)."""
        if self.mode == "cast":
            return float(_CASTS[self.operand[2:] if self.operand else "none"])
        bits = float(_ELEM_BITS[self.elem])
        if self.mode in ("unit", "tensor", "head"):
            return bits
        gran = self.operand.split("@", 1)[1].split(":")[0]
        if gran == "row":
            groups, scale_bits = 1, 32
        elif gran == "nv":
            groups, scale_bits = math.ceil(head_dim / 16), 8
        elif gran in ("mx", "mx-rceil"):
            groups, scale_bits = math.ceil(head_dim / 32), 8
        elif gran.startswith("k"):
            groups, scale_bits = math.ceil(head_dim / int(gran[1:])), 32
        else:
            raise KVError(f"KV format {self.text!r}: no storage rule for @{gran}")
        if ":asym" in self.operand:
            scale_bits += 4  # the zero point
        return bits + groups * scale_bits / head_dim

    def __repr__(self):
        return f"KVFormat({self.text!r})"


def parse_kv(text):
    """`K[,V]` -> (KVFormat for K, KVFormat for V); one format serves both."""
    if isinstance(text, (tuple, list)):
        parts = list(text)
    else:
        parts = [p for p in str(text).split(",")]
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2:
        raise KVError(f"--kv {text!r}: expected FORMAT or K_FORMAT,V_FORMAT")
    return KVFormat(parts[0]), KVFormat(parts[1])


def bytes_per_token(model, k_fmt, v_fmt):
    """Cache bytes per token of context: layers x KV heads x head_dim x (K bits + V bits) / 8."""
    layers, kv_heads, head_dim = _geometry(model)
    return layers * kv_heads * head_dim * (k_fmt.bits_per_value(head_dim) + v_fmt.bits_per_value(head_dim)) / 8


def _geometry(model):
    cfg = getattr(model, "config", None)
    cfg = cfg.get_text_config() if cfg is not None and hasattr(cfg, "get_text_config") else cfg
    if cfg is None:
        raise KVError("the model has no transformers config (layers, heads)")
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", None)
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None)
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    return int(layers), int(kv_heads), int(head_dim)


def _hadamard(n):
    """The normalized Sylvester Hadamard matrix of order n (a power of two) in float64: entries
    ±1/sqrt(n) (exact in binary for n = 4^j; otherwise the float64 rounding of 1/sqrt(n))."""
    if n < 1 or n & (n - 1):
        raise KVError(f"+had: head_dim {n} is not a power of two (a Sylvester Hadamard matrix needs one)")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / math.sqrt(n)


class _Store:
    """Quantize-dequantize of one K or V tensor [batch, kv_heads, tokens, head_dim] by a format."""

    def __init__(self, fmt, amax=None):
        self.fmt = fmt
        self.amax = amax or {}  # layer -> float (tensor) or [kv_heads] (head)
        self._had = {}

    def rotation(self, d):
        if d not in self._had:
            self._had[d] = _hadamard(d)
        return self._had[d]

    def rows(self, x):
        """x as fp32 rows of head_dim, rotated with +had (float64 product, one rounding to fp32)."""
        import torch

        b, h, t, d = x.shape
        a = x.detach().to(dtype=torch.float32).reshape(b * h * t, d).cpu().numpy()
        if self.fmt.hadamard:
            a = (a.astype(np.float64) @ self.rotation(d)).astype(np.float32)
        return np.ascontiguousarray(a)

    def apply(self, x, layer):
        import torch

        fmt = self.fmt
        if fmt.mode == "cast" and fmt.operand is None:
            return x
        b, h, t, d = x.shape
        a = self.rows(x)
        if fmt.mode == "unit":
            y = _quantize(a, fmt.operand, amax=_unit_amax(fmt.elem)).values
        elif fmt.mode in ("tensor", "nv-static"):
            y = _quantize(a, fmt.operand, amax=self._amax(layer)).values
        elif fmt.mode == "head":
            amax = self._amax(layer)
            per_head = a.reshape(b, h, t, d)
            y = np.empty_like(per_head)
            for head in range(h):
                y[:, head] = _quantize(np.ascontiguousarray(per_head[:, head].reshape(-1, d)), fmt.operand,
                                       amax=float(amax[head])).values.reshape(b, t, d)
            y = y.reshape(-1, d)
        else:
            y = _quantize(a, fmt.operand).values
        if fmt.hadamard:
            y = (y.astype(np.float64) @ self.rotation(d).T).astype(np.float32)
        return torch.from_numpy(y.reshape(b, h, t, d)).to(dtype=x.dtype, device=x.device)

    def _amax(self, layer):
        if layer not in self.amax:
            raise KVError(f"KV format {self.fmt.text}: no calibrated scale for attention layer {layer} "
                          "(calibrate on inputs that reach it)")
        return self.amax[layer]


def _unit_amax(elem):
    # The amax whose scale is exactly 1.0: the element format's largest finite value.
    return {"e4m3": 448.0, "e5m2": 57344.0}[elem]


def calibrate(model, batches, k_fmt, v_fmt, *, attn_implementation=None):
    """The static amax of every layer (per tensor and per KV head) for K and V over calibration
    batches, as llm-compressor's kv_cache_scheme observer records it: the largest finite |x| of the
    keys after rotary (rotated first with +had) and of the values. Returns (k_amax, v_amax) dicts
    layer -> float (tensor) or float64 array [kv_heads] (head); formats that need none get {}."""
    import torch

    seen = {"k": {}, "v": {}}

    def observe(which, store, x, layer):
        a = store.rows(x)
        b, h, t, d = x.shape
        finite = np.where(np.isfinite(a), np.abs(a), 0.0).reshape(b, h, t, d)
        per_head = finite.max(axis=(0, 2, 3))
        prev = seen[which].get(layer)
        seen[which][layer] = per_head if prev is None else np.maximum(prev, per_head)

    k_store, v_store = _Store(k_fmt), _Store(v_fmt)

    def hook(layer, key, value):
        if k_fmt.calibrated:
            observe("k", k_store, key, layer)
        if v_fmt.calibrated:
            observe("v", v_store, value, layer)
        return key, value

    if not (k_fmt.calibrated or v_fmt.calibrated):
        return {}, {}
    with _routed(model, hook, attn_implementation), torch.no_grad():
        for batch in batches:
            model(**batch)

    def finish(fmt, got):
        if fmt.mode in ("tensor", "nv-static"):
            return {layer: float(v.max()) for layer, v in got.items()}
        if fmt.mode == "head":
            return {layer: v.astype(np.float64) for layer, v in got.items()}
        return {}

    return finish(k_fmt, seen["k"]), finish(v_fmt, seen["v"])


class kv_cache:
    """with kv_cache(model, "e4m3@tensor,s8@row:sym", calibration=batches): the model's attention
    sees K and V as the cache would give them back. kv: "K[,V]" or None (the cache as the model
    keeps it); attention: an attention recipe (precis.attention: "bf16", "fa3-fp8", "QK|PV") that
    computes QKᵀ and PV through precis.emulate, or None (the model's own eager/sdpa attention).
    calibration: an iterable of model kwargs (dicts) for calibrated formats, or amax=(k_amax,
    v_amax) from calibrate(). record: a list that gets each attention call's Q, Kᵀ, P, V (with an
    attention recipe). Restores the model's attention implementation on exit; `calls` counts the
    attention calls per layer."""

    def __init__(self, model, kv=None, *, attention=None, calibration=None, amax=None, attn_implementation=None,
                 record=None):
        from . import attention as attn

        self.model = model
        if kv is None:
            self.k_fmt = self.v_fmt = KVFormat("none")
        elif isinstance(kv, tuple) and isinstance(kv[0], KVFormat):
            self.k_fmt, self.v_fmt = kv
        else:
            self.k_fmt, self.v_fmt = parse_kv(kv)
        self.recipe = None if attention is None else (
            attention if isinstance(attention, attn.AttentionRecipe) else attn.AttentionRecipe(attention))
        if amax is None and (self.k_fmt.calibrated or self.v_fmt.calibrated):
            if calibration is None:
                raise KVError(f"KV format {self.k_fmt.text},{self.v_fmt.text}: a calibrated static scale needs "
                              "calibration inputs (or amax=)")
            amax = calibrate(model, calibration, self.k_fmt, self.v_fmt, attn_implementation=attn_implementation)
        self.amax = amax or ({}, {})
        self.k_store = _Store(self.k_fmt, self.amax[0])
        self.v_store = _Store(self.v_fmt, self.amax[1])
        self.calls = {}
        names = {id(m): n for n, m in model.named_modules()}
        fn = None if self.recipe is None else attn.attention_function(
            self.recipe, record, layer_of=lambda m: names.get(id(m), type(m).__name__))
        self._ctx = _routed(model, self._hook, attn_implementation, attention=fn)

    def _hook(self, layer, key, value):
        self.calls[layer] = self.calls.get(layer, 0) + 1
        return self.k_store.apply(key, layer), self.v_store.apply(value, layer)

    def __enter__(self):
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


_serial = itertools.count()


class _routed:
    """Routes every attention call of a transformers model through hook(layer, key, value) ->
    (key, value) and then the model's own attention function (eager or sdpa), by registering a
    function under a fresh name in transformers' AttentionInterface (and the base's mask function
    in AttentionMaskInterface) and pointing the model's configs at it. layer: the attention
    module's qualified name."""

    def __init__(self, model, hook, attn_implementation=None, attention=None):
        self.model, self.hook, self.base, self.attention = model, hook, attn_implementation, attention
        self.saved = []

    def __enter__(self):
        try:
            from transformers.masking_utils import AttentionMaskInterface
            from transformers.modeling_utils import AttentionInterface
        except ImportError as e:
            raise KVError(f"KV cache emulation needs transformers' attention interface ({e})") from None
        configs = _configs(self.model)
        if not configs:
            raise KVError(f"{type(self.model).__name__}: not a transformers model (no config with _attn_implementation)")
        base = self.base or configs[0]._attn_implementation or "eager"
        if base not in ("eager", "sdpa"):
            raise KVError(f"attention implementation {base!r}: KV emulation wraps eager or sdpa "
                          "(load the model with attn_implementation='eager' or 'sdpa')")
        names = {id(m): n for n, m in self.model.named_modules()}
        base_fn = AttentionInterface._global_mapping["sdpa"] if base == "sdpa" else None
        hook, attention = self.hook, self.attention

        def routed(module, query, key, value, attention_mask, **kwargs):
            layer = names.get(id(module), type(module).__name__)
            key, value = hook(layer, key, value)
            fn = attention or base_fn or _eager_of(module)
            return fn(module, query, key, value, attention_mask, **kwargs)

        self.key = f"precis_{base}_{next(_serial)}"
        AttentionInterface.register(self.key, routed)
        # An emulated attention adds the mask itself: the eager mask (always materialized, additive)
        # rather than sdpa's, which may be None for a causal model that sdpa runs with is_causal.
        mask_base = "eager" if attention is not None else base
        AttentionMaskInterface.register(self.key, AttentionMaskInterface._global_mapping[mask_base])
        for cfg in configs:
            self.saved.append((cfg, cfg._attn_implementation_internal))
            cfg._attn_implementation_internal = self.key
        return self

    def __exit__(self, *exc):
        from transformers.masking_utils import AttentionMaskInterface
        from transformers.modeling_utils import AttentionInterface

        for cfg, value in reversed(self.saved):
            cfg._attn_implementation_internal = value
        self.saved = []
        AttentionInterface._global_mapping.pop(self.key, None)
        AttentionMaskInterface._global_mapping.pop(self.key, None)
        return False


def _configs(model):
    out, seen = [], set()
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation_internal") and id(cfg) not in seen:
            seen.add(id(cfg))
            out.append(cfg)
    return out


def _eager_of(module):
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        raise KVError(f"{type(module).__module__}: no eager_attention_forward to call (load with attn_implementation='sdpa')")
    return fn


def split_plan(plan):
    """A plan (path, dict or list) -> (the plan of linear layers or None, kv, attention): the keys
    "kv" ("K[,V]") and "attention" (a recipe) of a plan file are decisions of their own; a plan
    with only those quantizes no linear layer."""
    import json
    import os

    if plan is None:
        return None, None, None
    if isinstance(plan, (str, os.PathLike)):
        try:
            with open(os.fspath(plan)) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return plan, None, None  # load_plan reports it, naming the file
        if not isinstance(data, dict) or not ({"kv", "attention"} & set(data)):
            return plan, None, None
        plan = data
    if not isinstance(plan, dict):
        return plan, None, None
    rest = dict(plan)
    kv, attention = rest.pop("kv", None), rest.pop("attention", None)
    for key, value in (("kv", kv), ("attention", attention)):
        if value is not None and not isinstance(value, str):
            raise KVError(f"the plan's \"{key}\": expected a string (\"e4m3@tensor,s8@row:sym\", \"fa3-fp8\"), "
                          f"got {type(value).__name__}")
    layered = "layers" in rest or any(k not in ("kv", "attention") and isinstance(v, (str, type(None)))
                                      for k, v in rest.items())
    return (rest if layered else None), kv, attention


SWEEP_FORMATS = ["bf16", "e4m3", "e4m3@tensor", "e4m3@head", "e5m2", "s8@row:sym", "e2m1@nv", "s4@k32:sym",
                 "s4@k32:sym+had"]


def sweep(model, batches, formats=None, *, v_formats=None, calibration=None, reference_outputs=None, kind=None,
          labels=None, attn_implementation=None, progress=None):
    """KL (or cosine for hidden states) of every K format x V format against the reference model:
    returns {"k": [...], "v": [...], "cells": {(k, v): {"kl_mean", "kl_p99", ... , "bytes_per_token"}}}.
    batches: a list of model kwargs; calibration: batches for the calibrated formats (default: batches)."""
    import torch

    from . import endtoend
    from . import torch as pt

    k_list = [KVFormat(f) for f in (formats or SWEEP_FORMATS)]
    v_list = [KVFormat(f) for f in (v_formats or formats or SWEEP_FORMATS)]
    calibration = list(calibration if calibration is not None else batches)

    def run():
        outs = []
        with torch.no_grad():
            for batch in batches:
                y, k = pt.final_output(model(**batch))
                outs.append(y.float().numpy())
        return np.concatenate(outs), k

    if reference_outputs is None:
        reference_outputs, kind = run()
    # Calibrate each calibrated format once (K and V amax are recorded together).
    amax = {}
    for f in {f.text: f for f in k_list + v_list}.values():
        if f.calibrated:
            amax[f.text] = calibrate(model, calibration, f, f, attn_implementation=attn_implementation)
    cells = {}
    for kf in k_list:
        for vf in v_list:
            a = (amax.get(kf.text, ({}, {}))[0], amax.get(vf.text, ({}, {}))[1])
            with kv_cache(model, (kf, vf), amax=a, attn_implementation=attn_implementation):
                q, _ = run()
            m = endtoend.Outputs.compare(reference_outputs, q, labels=labels, kind=kind).metrics()
            m["bytes_per_token"] = bytes_per_token(model, kf, vf)
            cells[(kf.text, vf.text)] = m
            if progress:
                progress(kf.text, vf.text, m)
    return {"k": [f.text for f in k_list], "v": [f.text for f in v_list], "kind": kind, "cells": cells}


def sweep_table(result, bf16_bytes=None):
    """The K x V table as Markdown: each cell KL mean / p99 (logits) or 1 - cosine mean / max
    rel_fro (hidden states), and the bytes per token of the pair."""
    logits = result["kind"] == "logits"
    what = "KL(ref‖q) mean / p99" if logits else "1 − cosine mean / rel_fro max"
    head = f"| K \\ V ({what}; bytes/token) | " + " | ".join(f"`{v}`" for v in result["v"]) + " |"
    lines = [head, "|---" * (len(result["v"]) + 1) + "|"]
    for k in result["k"]:
        row = []
        for v in result["v"]:
            m = result["cells"][(k, v)]
            if logits:
                a, b = m["kl_mean"], m["kl_p99"]
            else:
                a, b = 1.0 - m["cosine_mean"], m["rel_fro_max"]
            row.append(f"{a:.3g} / {b:.3g}; {m['bytes_per_token']:.0f}")
        lines.append(f"| `{k}` | " + " | ".join(row) + " |")
    return "\n".join(lines)
