"""Attention's two GEMMs as precis recipes (DESIGN §23, docs/kv-cache.md).

Inside a transformers model's attention (the AttentionInterface, as precis.kvcache routes it),
S = Q·Kᵀ and O = P·V run through `precis.emulate` for every (sequence, head) at once, as batched
GEMMs: A = Q [batch*heads, q_len, head_dim] with B = Kᵀ [batch*heads, head_dim, kv_len], then
A = P with B = V. Between them, in fp32 as the kernels keep S in registers: S·scaling, the model's
additive mask (causal, padding, sliding window), softmax. GQA's K and V are repeated to the query
heads first, as the eager attention does (a per-tensor scale is the same either way).

Recipes (`--attention NAME`, or `QK_RECIPE|PV_RECIPE` with any two precis recipes):
  bf16, fp16   FlashAttention-2: S = Q·Kᵀ from bf16/fp16 inputs, fp32 accumulator, kept fp32; P
               rounded to bf16/fp16 for P·V, fp32 accumulator, output bf16/fp16
  fp16acc16    the same with an fp16 accumulator in both GEMMs
  fa3-fp8      FlashAttention-3 FP8: Q, K, V e4m3 with one scale per tensor (amax/448 of the
               tensors of this call: its q/k/v descale), fp32 accumulator; P quantized to e4m3
               with the scale 1.0 (P ≤ 1; FA3 converts P to e4m3 without a scale); output bf16
  fa3-fp8-fast the same with Hopper's FP8 accumulator (acc=fp32fast)
  fa3-fp8-block FlashAttention-3's block quantization: one e4m3 scale per block of 128 query rows
               (Q) and per block of 128 tokens (K, V) of each (sequence, head); P as in fa3-fp8.
               Each (sequence, head) is its own emulate call, so that no block spans two heads.
"""
import numpy as np

from . import emulate as _emulate
from . import spec as _spec
from ._precis import UsageError

__all__ = ["RECIPES", "AttentionRecipe", "attention_function", "emulated_attention"]

RECIPES = {
    "bf16": ("a=bf16,b=bf16,acc=fp32,out=fp32", "a=bf16,b=bf16,acc=fp32,out=bf16", False),
    "fp16": ("a=fp16,b=fp16,acc=fp32,out=fp32", "a=fp16,b=fp16,acc=fp32,out=fp16", False),
    "fp16acc16": ("a=fp16,b=fp16,acc=fp16,out=fp16", "a=fp16,b=fp16,acc=fp16,out=fp16", False),
    "fa3-fp8": ("a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=fp32",
                "a=e4m3@tensor,b=e4m3@tensor,acc=fp32,out=bf16,scale=absmax", True),
    "fa3-fp8-fast": ("a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=fp32",
                     "a=e4m3@tensor,b=e4m3@tensor,acc=fp32fast,out=bf16,scale=absmax", True),
    # {d}: the head dimension. Q [q, d] in 128 x d blocks, Kᵀ [d, s] in d x 128, V [s, d] in 128 x d.
    "fa3-fp8-block": ("a=e4m3@128x{d},b=e4m3@{d}x128,acc=fp32,out=fp32",
                      "a=e4m3@tensor,b=e4m3@128x{d},acc=fp32,out=bf16,scale=absmax", True),
}
PER_MATRIX = {"fa3-fp8-block"}


class AttentionRecipe:
    """qk, pv: the two GEMMs' canonical specs; p_unit_scale: P is quantized with the scale 1.0
    (its static amax the element format's largest value), as FA3 converts P."""

    def __init__(self, text, head_dim=64):
        self.text = text
        self.per_matrix = text in PER_MATRIX
        self._specs = {}
        if text in RECIPES:
            qk, pv, self.p_unit_scale = RECIPES[text]
        elif "|" in text:
            qk, pv = text.split("|", 1)
            self.p_unit_scale = False
        else:
            qk = pv = text
            self.p_unit_scale = False
        self._templates = (qk, pv)
        try:
            self.qk, self.pv = self.for_head_dim(head_dim)
        except UsageError as e:
            raise ValueError(f"--attention {text!r}: {e} (or one of {', '.join(RECIPES)}, or QK_RECIPE|PV_RECIPE)") from None
        for name, s in (("QK", self.qk), ("PV", self.pv)):
            if "scale=dynamic" not in s and not (name == "PV" and self.p_unit_scale):
                raise ValueError(f"--attention {text!r}: the {name} recipe {s} needs static calibrated scales; "
                                 "attention recipes take their scales from the tensors of each call")

    def for_head_dim(self, d):
        """The canonical (QK, PV) specs at head dimension d."""
        if d not in self._specs:
            self._specs[d] = tuple(_spec(t.replace("{d}", str(d))) for t in self._templates)
        return self._specs[d]

    def __repr__(self):
        return f"AttentionRecipe({self.text!r}: QK {self.qk} | PV {self.pv})"


def _p_calib(shape):
    """A calibration input whose amax is e4m3's 448: P's static scale is then exactly 1.0."""
    c = np.zeros((1,) + shape, np.float32)
    c.flat[0] = 448.0
    return c


def emulated_attention(recipe, query, key, value, attention_mask, scaling, num_key_value_groups=1, record=None):
    """The attention of one call: query [b, h, q, d], key/value [b, h_kv, s, d] (torch tensors),
    attention_mask additive [b, 1|h, q, s] (float) or bool (True = attend) or None. Returns
    (output [b, q, h, d] in query's dtype, P [b, h, q, s] float32). record: a dict given the
    call's GEMM operands and outputs (fp32 numpy, batched over b*h) when not None: "q", "kt" and
    their product "s" (before scaling), "p", "v" and their product "o"."""
    import torch

    b, h, q_len, d = query.shape
    if num_key_value_groups > 1:
        key = key.repeat_interleave(num_key_value_groups, dim=1)
        value = value.repeat_interleave(num_key_value_groups, dim=1)
    s_len = key.shape[2]
    qa = np.ascontiguousarray(query.detach().float().reshape(b * h, q_len, d).cpu().numpy())
    kt = np.ascontiguousarray(key.detach().float().reshape(b * h, s_len, d).transpose(1, 2).cpu().numpy())
    v = np.ascontiguousarray(value.detach().float().reshape(b * h, s_len, d).cpu().numpy())
    qk_spec, pv_spec = recipe.for_head_dim(d)
    if recipe.per_matrix:
        s_raw = np.stack([_emulate(qa[i], kt[i], qk_spec, out_dtype=np.float32) for i in range(b * h)])
    else:
        s_raw = _emulate(qa, kt, qk_spec, out_dtype=np.float32)
    scores = torch.from_numpy(s_raw).reshape(b, h, q_len, s_len)
    scores = scores * torch.tensor(scaling if scaling is not None else d ** -0.5, dtype=torch.float32)
    if attention_mask is not None:
        mask = attention_mask[..., :s_len]
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    p = torch.softmax(scores, dim=-1, dtype=torch.float32)
    pa = np.ascontiguousarray(p.reshape(b * h, q_len, s_len).numpy())
    calib = _p_calib((q_len, s_len)) if recipe.p_unit_scale else None
    if recipe.per_matrix:
        out = np.stack([_emulate(pa[i], v[i], pv_spec, calib=calib, out_dtype=np.float32) for i in range(b * h)])
    else:
        out = _emulate(pa, v, pv_spec, calib=calib, out_dtype=np.float32)
    if record is not None:
        record.update(q=qa, kt=kt, s=s_raw, p=pa, v=v, o=out)
    o = torch.from_numpy(out).reshape(b, h, q_len, d).transpose(1, 2).contiguous().to(query.dtype)
    return o, p


def attention_function(recipe, record=None, layer_of=None):
    """An attention function for transformers' AttentionInterface computing with `recipe`. record:
    a list that gets each call's operands (emulated_attention), with "layer" = layer_of(module)."""
    if isinstance(recipe, str):
        recipe = AttentionRecipe(recipe)

    def attend(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        if kwargs.get("softcap") is not None or kwargs.get("s_aux") is not None:
            raise ValueError(f"--attention {recipe.text}: {type(module).__name__} uses softcap or attention sinks, "
                             "which the emulated attention does not model")
        if module.training and dropout:
            raise ValueError("--attention: the emulated attention runs in eval mode only (dropout)")
        rec = None if record is None else {}
        out = emulated_attention(recipe, query, key, value, attention_mask, scaling,
                                 getattr(module, "num_key_value_groups", 1), rec)
        if record is not None:
            rec["layer"] = layer_of(module) if layer_of else type(module).__name__
            record.append(rec)
        return out

    return attend
