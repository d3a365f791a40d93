"""Attention's GEMMs as precis workloads (DESIGN §23, docs/kv-cache.md "Isolated").

capture_attention runs a transformers model with an attention recipe and records, per attention call,
Q and Kᵀ (keys after rotary, GQA heads repeated; [batch*heads, tokens, head_dim]) with their product
S, and P with V and their product O. import_attention turns each record into two batched GEMM
workloads with `precis import` (one B per (sequence, head): --b-batched), so that `precis run` judges
QKᵀ and PV alone like any workload, with float64 references:

  <layer>.qk   a = Q, b = Kᵀ                 c = Q·Kᵀ
  <layer>.pv   a = P, b = V                  c = P·V   (P: the softmax of the recorded call)

Captured with the fp32 attention recipe, P is the reference model's. The PV dataset carries one
calibration sample whose amax is 448, so a recipe with a static scale on A (fa3-fp8's P at scale
1.0) finds it there as precis.attention passes it to emulate.
"""
import os
import subprocess
import sys

import numpy as np

__all__ = ["capture_attention", "import_attention"]


def capture_attention(model, batches, recipe="fp32", *, kv=None, calibration=None):
    """[record, ...] in call order (precis.attention.emulated_attention's dicts with "layer")."""
    import torch

    from . import kvcache
    from . import torch as pt

    record = []
    with kvcache.kv_cache(model, kv, attention=recipe, calibration=calibration, record=record), torch.no_grad():
        for batch in batches:
            model(**pt.as_batch(batch))
    return record


def precis_command():
    """How to run the precis CLI: $PRECIS (a path) when set, else this package's own
    (`python -m precis`, the same C code as emulate)."""
    env = os.environ.get("PRECIS")
    if env:
        return [env]
    return [sys.executable, "-m", "precis"]


def _cli(cmd, args):
    r = subprocess.run(cmd + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"precis {args[0]} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")


def import_attention(records, out_dir, *, precis_cli=None, layers=None):
    """Writes each record's QKᵀ and PV workloads as datasets OUT_DIR/<layer>.qk.h5 and .pv.h5 (a layer
    called more than once gets .<call> appended). Returns [(workload name, dataset path), ...]."""
    cmd = precis_cli or precis_command()
    os.makedirs(out_dir, exist_ok=True)
    made, seen = [], {}
    for rec in records:
        layer = rec["layer"]
        if layers is not None and layer not in layers:
            continue
        n = seen.get(layer, 0)
        seen[layer] = n + 1
        base = layer if n == 0 else f"{layer}.{n}"
        arrays = os.path.join(out_dir, base + ".npz")
        p = rec["p"]
        unit = np.zeros((1,) + p.shape[1:], np.float32)
        unit.flat[0] = 448.0
        np.savez(arrays, q=rec["q"], kt=rec["kt"], p=np.concatenate([p, unit]), v=rec["v"])
        for gemm, a, b, extra in (("qk", "q", "kt", []), ("pv", "p", "v", ["--calib", "1"])):
            name = f"{base}.{gemm}"
            ds = os.path.join(out_dir, name + ".h5")
            _cli(cmd, ["import", "--a", f"{arrays}:{a}", "--b", f"{arrays}:{b}", "--b-batched", *extra,
                       "--name", name, "-o", ds, "--force", "-q"])
            made.append((name, ds))
        os.remove(arrays)
    return made
