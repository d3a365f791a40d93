"""precis import --model on a GPT-2-style checkpoint (Debian's NumPy + h5py only): transformers'
Conv1D stores its weight [in, out], the transpose of nn.Linear's [out, in].

- with config.json saying model_type gpt2, c_attn/c_proj/c_fc are read [in, out]: b is the weight
  as stored, c_ref = a.W, the source records the layout; wte and wpe (lookups) are skipped;
- --in-major GLOB does the same without config.json, and --in-major none ignores config.json;
- without either, activations whose width is the weight's first dimension are refused with a hint
  naming --in-major (the silent alternative is a transposed GEMM that measures the wrong product);
- --converted with an input-major layer is refused, naming the layer;
- a config.json that is not JSON is an error naming it.
"""
import json
import os
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402
from safetensors_fixture import write_safetensors_f32  # noqa: E402


def main():
    tmp = scratch.mkdtemp(prefix="precis-conv1d-")
    rng = np.random.default_rng(11)
    d = 8
    # Stored [in, out], as GPT-2's model.safetensors has them.
    conv = {"h.0.attn.c_attn": rng.standard_normal((d, 3 * d)).astype(np.float32),
            "h.0.attn.c_proj": rng.standard_normal((d, d)).astype(np.float32),
            "h.0.mlp.c_fc": rng.standard_normal((d, 4 * d)).astype(np.float32),
            "h.0.mlp.c_proj": rng.standard_normal((4 * d, d)).astype(np.float32)}
    tensors = {f"{n}.weight": w for n, w in conv.items()}
    tensors["wte.weight"] = rng.standard_normal((50, d)).astype(np.float32)
    tensors["wpe.weight"] = rng.standard_normal((16, d)).astype(np.float32)
    gpt2 = os.path.join(tmp, "gpt2")
    os.makedirs(gpt2)
    write_safetensors_f32(os.path.join(gpt2, "model.safetensors"), tensors)
    with open(os.path.join(gpt2, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": d}, f)
    acts = os.path.join(tmp, "acts.npz")
    inputs = {n: rng.standard_normal((2, 4, w.shape[0])).astype(np.float32) for n, w in conv.items()}
    np.savez(acts, **inputs)

    # config.json: the four Conv1D layers, in model order, read [in, out]; the tables skipped.
    listing = run(["import", "--model", gpt2, "--list"]).stdout.splitlines()
    # GPT-2's output projection is tied to wte (tie_word_embeddings unsaid: true): listed, marked as
    # imported only with --activations that hold its inputs (issue 38), never as a lookup table.
    tied = [line for line in listing if line.startswith("lm_head\t")]
    check(len(tied) == 1 and "tied to wte.weight" in tied[0] and "imported only with --activations" in tied[0],
          f"--list: the tied lm_head, marked: {tied}")
    listing = [line for line in listing if not line.startswith("lm_head\t")]
    names = [line.split("\t")[0] for line in listing]
    check(sorted(names) == sorted(conv), f"--list: the Conv1D layers and no lookup table: {names}")
    for line in listing:
        name, shape = line.split("\t")[:2]
        w = conv[name]
        check(shape == f"{w.shape[1]}x{w.shape[0]}" and line.endswith("stored [in, out]"),
              f"--list: {name} is out x in = {w.shape[1]}x{w.shape[0]}, stored [in, out]: {line!r}")

    ds = os.path.join(tmp, "gpt2.h5")
    p = run(["import", "--model", gpt2, "--activations", acts, "--calib", "0", "-o", ds, "-q"])
    check("model_type gpt2" in p.stderr and "4 layers read as [in, out]" in p.stderr,
          f"import says what config.json changed: {p.stderr}")
    with h5py.File(ds, "r") as f:
        for name, w in conv.items():
            g = f[f"workloads/{name}"]
            check(np.array_equal(g["b"][()], w), f"{name}: b is the weight as stored (already W^T)")
            a = inputs[name].astype(np.float64)
            check(np.allclose(g["c_ref"][()], a @ w.astype(np.float64), rtol=1e-12, atol=1e-12), f"{name}: c_ref = a.W")
            src = json.loads(g.attrs["source"])
            check(src["layout"] == "[in, out]" and src["shape"] == list(w.shape), f"{name}: source {src}")
            check(g.attrs["k"] == w.shape[0] and g.attrs["n"] == w.shape[1], f"{name}: k = in, n = out")
    run(["run", ds, "--backend", "cpu", "--recipes", "fp32", "-o", os.path.join(tmp, "rep"), "--min-samples", "1",
         "--max-samples", "2", "--max-time-ms", "1"])

    # The same checkpoint without config.json: --in-major names the layers; without it, refused with a hint.
    bare = os.path.join(tmp, "bare")
    os.makedirs(bare)
    write_safetensors_f32(os.path.join(bare, "model.safetensors"), {f"{n}.weight": w for n, w in conv.items()})
    ds2 = os.path.join(tmp, "bare.h5")
    run(["import", "--model", bare, "--in-major", "*c_*", "--activations", acts, "-o", ds2, "-q"])
    with h5py.File(ds2, "r") as f:
        check(all(np.array_equal(f[f"workloads/{n}"]["b"][()], w) for n, w in conv.items()), "--in-major GLOB reads [in, out]")
    p = run(["import", "--model", bare, "--layers", "*c_attn", "--activations", acts, "-o", os.path.join(tmp, "x.h5"),
             "-q"], expect=2)
    check("--in-major" in p.stderr and "Conv1D" in p.stderr and "h.0.attn.c_attn" in p.stderr,
          f"activations that fit the weight's other side name --in-major: {p.stderr}")
    p = run(["import", "--model", gpt2, "--in-major", "none", "--layers", "*c_fc", "--activations", acts, "-o",
             os.path.join(tmp, "y.h5"), "-q"], expect=2)
    check("--in-major" in p.stderr, f"--in-major none ignores config.json: {p.stderr}")

    # --converted has per-output-row scales of [out, in] weights: refused for an input-major layer.
    p = run(["import", "--model", gpt2, "--layers", "*c_fc", "--converted", gpt2, "-o", os.path.join(tmp, "z.h5"), "-q"],
            expect=2)
    check("h.0.mlp.c_fc" in p.stderr and "[in, out]" in p.stderr, f"--converted with Conv1D refused: {p.stderr}")
    check(not os.path.exists(os.path.join(tmp, "z.h5")), "no dataset left behind by a refused import")

    with open(os.path.join(gpt2, "config.json"), "w") as f:
        f.write("{model_type: gpt2")
    p = run(["import", "--model", gpt2, "--list"], expect=2)
    check("config.json" in p.stderr and "JSON" in p.stderr, f"a broken config.json is named: {p.stderr}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("conv1d (GPT-2 layout) import: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
