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


USAGE = """usage: python -m precis capture --model DIR --inputs FILE --attention [RECIPE] -o DIR [options]

Records each attention layer's Q, Kᵀ (keys after the rotary embedding, GQA heads repeated), P and V on
the inputs and writes them as batched GEMM workloads with float64 references (precis import
--b-batched, one B per (sequence, head)): DIR/<layer>.qk.h5 (A = Q, B = Kᵀ) and DIR/<layer>.pv.h5
(A = P, B = V, plus the calibration sample of fa3's unit P scale). `precis run DIR/<layer>.qk.h5
--recipes SPEC` then judges attention's GEMMs alone, as verify --attention's isolated rows do
(docs/kv-cache.md "Isolated"). RECIPE (default fp32, the reference model's attention to float32
rounding) is the attention the operands are recorded under: its P and, for later layers, its
effect on the inputs. With --batch-size, each batch's calls are workloads of their own
(<layer>.1.qk, ...): a tensor scale spans one call, as in the model."""


def main(argv=None):
    """python -m precis capture --attention: the CLI of capture_attention + import_attention."""
    import argparse
    import shutil

    from . import verify as _verify
    from .signals import Stopped, stopped_by_signals

    parser = argparse.ArgumentParser(prog="python -m precis capture", description=USAGE.split("\n\n", 1)[1],
                                     usage=USAGE.split("\n")[0][len("usage: "):],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a transformers checkpoint directory")
    parser.add_argument("--inputs", required=True, help="a text file (read with the model's tokenizer) or token ids "
                        "[samples, tokens] in .npy")
    parser.add_argument("--attention", nargs="?", const="fp32", required=True, metavar="RECIPE",
                        help="record attention's Q, K, V, P under RECIPE (default fp32)")
    parser.add_argument("-o", "--output", required=True, help="directory of the datasets")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per sample of a text file (default 64)")
    parser.add_argument("--samples", type=int, default=None, help="at most this many samples")
    parser.add_argument("--batch-size", type=int, default=None, help="samples per forward (default all in one)")
    parser.add_argument("--layers", default=None, help="comma-separated attention modules to keep (default all)")
    parser.add_argument("--force", action="store_true", help="write into an existing directory's datasets")
    args = parser.parse_args(argv)
    try:
        from . import attention as _attention
        _attention.AttentionRecipe(args.attention)
        if os.path.exists(args.output) and os.listdir(args.output) and not args.force:
            raise _verify.VerifyError(f"-o {args.output}: exists and is not empty (--force writes into it)")
        model, tokenizer = _verify.load_model(args.model)
        ids = _verify.load_inputs(args.inputs, tokenizer, args.tokens, args.samples)
        if len(ids) == 0:
            raise _verify.VerifyError(f"--inputs {args.inputs}: no samples")
        batches = list(_verify._batches(ids, args.batch_size or len(ids)))
        layers = set(args.layers.split(",")) if args.layers else None
        fresh = not os.path.exists(args.output)
        with stopped_by_signals():
            try:
                records = capture_attention(model, batches, args.attention)
                if layers is not None and not layers & {r["layer"] for r in records}:
                    raise _verify.VerifyError(f"--layers {args.layers}: none of the model's attention modules "
                                              f"({', '.join(sorted({r['layer'] for r in records}))})")
                made = import_attention(records, args.output, layers=layers)
            except BaseException:
                if fresh:
                    shutil.rmtree(args.output, ignore_errors=True)
                raise
    except Stopped as e:
        print(f"precis capture: interrupted by signal {e.signum}; no file left behind", file=sys.stderr)
        return 128 + e.signum
    except (ValueError, RuntimeError, OSError) as e:
        print(f"precis capture: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    for name, path in made:
        print(f"{name}: {path}")
    print(f"precis capture: {len(made)} attention workloads of {len(ids)} samples x {ids.shape[1]} tokens "
          f"({args.attention}) in {args.output}/")
    return 0
