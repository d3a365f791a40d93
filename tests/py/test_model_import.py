"""precis import --model on checkpoints written here byte by byte (Debian's NumPy + h5py only):

- BF16 and F8_E4M3 weights decode exactly (b = W^T), F32 too; the SHA-256 in `source` is the
  tensor's stored bytes; 1-D tensors, *.bias, non-float dtypes and embeddings are skipped;
- --layers / --exclude (fnmatch), natural layer order, --list;
- --activations from HDF5 and from safetensors, [samples, tokens, k], with --calib splitting the
  last samples into calib/a;
- --converted: an I8 per-channel checkpoint dequantizes exactly and keeps the original as b_ref;
  a missing weight_scale or group-wise scales are refused; a b_ref of the wrong shape or one that
  does not give c_ref is refused by inspect;
- bad input: a missing path, a directory without checkpoints, an index naming a missing tensor or
  a path outside its directory, activations of the wrong width, a layer missing from the
  activations; each exits 2 with a message naming the file, and leaves no output behind.
"""
import hashlib
import json
import os
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402
from safetensors_fixture import write_safetensors  # noqa: E402


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (finite inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def e4m3_value(bits):
    """OCP E4M3 (bias 7, no inf, 0x7f/0xff NaN) -> float64, from the bit fields."""
    s = -1.0 if bits & 0x80 else 1.0
    e = (bits >> 3) & 0xF
    m = bits & 7
    if e == 0:
        return s * m / 8 * 2.0 ** -6
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def main():
    tmp = scratch.mkdtemp(prefix="precis-model-import-")
    rng = np.random.default_rng(5)
    # Layer "blocks.10.fc" after "blocks.2.fc" (natural order); out x in shapes differ.
    w_bf = (rng.standard_normal((24, 40)) * 0.1).astype(np.float32)
    bf_bits = bf16_bits(w_bf)
    w_f8_bits = rng.integers(0, 256, size=(16, 24), dtype=np.uint8)
    w_f8_bits[(w_f8_bits & 0x7F) == 0x7F] = 0x11  # no NaN encodings
    w_f32 = rng.standard_normal((8, 16)).astype(np.float32)
    ckpt = os.path.join(tmp, "model.safetensors")
    write_safetensors(ckpt, {
        "blocks.10.fc.weight": ("BF16", (24, 40), bf_bits.astype("<u2").tobytes()),
        "blocks.2.fc.weight": ("F8_E4M3", (16, 24), w_f8_bits.tobytes()),
        "head.weight": ("F32", (8, 16), w_f32.astype("<f4").tobytes()),
        "head.bias": ("F32", (8,), np.zeros(8, "<f4").tobytes()),
        "norm.weight": ("F32", (16,), np.ones(16, "<f4").tobytes()),
        "tok_embed.weight": ("F32", (4, 16), np.ones((4, 16), "<f4").tobytes()),
        "counts.weight": ("I32", (2, 2), np.zeros((2, 2), "<i4").tobytes()),
    })
    p = run(["import", "--model", ckpt, "--list"])
    names = [line.split("\t")[0] for line in p.stdout.splitlines()]
    check(names == ["blocks.2.fc", "blocks.10.fc", "head"], f"--list: {names}")
    p = run(["import", "--model", ckpt, "--list", "--layers", "blocks.*", "--exclude", "*.2.*"])
    check(p.stdout.split("\t")[0] == "blocks.10.fc" and len(p.stdout.splitlines()) == 1, f"globs: {p.stdout}")
    p = run(["import", "--model", ckpt, "--list", "--layers", "*embed*"])
    check(p.stdout.startswith("tok_embed\t"), "an explicit --layers glob takes an embedding")

    ds = os.path.join(tmp, "m.h5")
    run(["import", "--model", ckpt, "--tokens", "5", "--calib", "2", "-o", ds, "-q"])
    expected_w = {
        "blocks.10.fc": (bf_bits.astype(np.uint32) << 16).view(np.float32),
        "blocks.2.fc": np.vectorize(e4m3_value)(w_f8_bits).astype(np.float32),
        "head": w_f32,
    }
    raw = {"blocks.10.fc": bf_bits.astype("<u2").tobytes(), "blocks.2.fc": w_f8_bits.tobytes(),
           "head": w_f32.astype("<f4").tobytes()}
    with h5py.File(ds, "r") as d:
        check(list(d["workloads"].keys()) == ["blocks.2.fc", "blocks.10.fc", "head"], f"workloads in model order: {list(d['workloads'].keys())}")
        for layer, w in expected_w.items():
            g = d["workloads"][layer]
            check(np.array_equal(g["b"][()], w.T), f"{layer}: b is not W^T")
            src = json.loads(g.attrs["source"])
            check(src["sha256"] == hashlib.sha256(raw[layer]).hexdigest(), f"{layer}: sha256")
            check(g.attrs["layer"] == layer and src["shape"] == list(w.shape), f"{layer}: attrs")
            check(g["calib/a"].shape == (2, 5, w.shape[1]) and g["a"].shape == (1, 5, w.shape[1]), f"{layer}: a, calib/a shapes")
            a = g["a"][()].astype(np.float64)
            check(np.allclose(g["c_ref"][()], a @ w.T.astype(np.float64), rtol=1e-12, atol=1e-12), f"{layer}: c_ref")
        check("blocks.2.fc" in d.attrs["suite"] and "transpose: true" in d.attrs["suite"], "suite attribute")

    # Activations from HDF5 and from safetensors: [samples, tokens, k]; the last --calib samples are calib/a.
    acts = {layer: rng.standard_normal((3, 4, w.shape[1])).astype(np.float32) for layer, w in expected_w.items()}
    acts_h5 = os.path.join(tmp, "acts.h5")
    with h5py.File(acts_h5, "w") as f:
        for layer, x in acts.items():
            f[layer] = x
    acts_st = os.path.join(tmp, "acts.safetensors")
    write_safetensors(acts_st, {layer: ("F32", x.shape, x.astype("<f4").tobytes()) for layer, x in acts.items()})
    for src in (acts_h5, acts_st):
        out = os.path.join(tmp, "acts-" + os.path.basename(src) + ".h5")
        run(["import", "--model", ckpt, "--activations", src, "--calib", "1", "-o", out, "-q"])
        with h5py.File(out, "r") as d:
            for layer, x in acts.items():
                g = d["workloads"][layer]
                check(np.array_equal(g["a"][()], x[:2]) and np.array_equal(g["calib/a"][()], x[2:]),
                      f"{src}: {layer}: a / calib/a from the file")
                check(g.attrs["m"] == 4 and g.attrs["batch"] == 2, f"{src}: {layer}: m, batch")

    # --converted: I8 per channel ([out]), the original kept as b_ref.
    # (a conversion of these weights: random codes would be refused as "not a conversion of this model")
    scale = (np.abs(w_f32).max(axis=1) / np.float32(127)).astype(np.float32)
    q = np.clip(np.rint(w_f32 / scale[:, None]), -127, 127).astype(np.int8)
    conv = os.path.join(tmp, "conv.safetensors")
    write_safetensors(conv, {"head.weight": ("I8", q.shape, q.tobytes()),
                             "head.weight_scale": ("F32", scale.shape, scale.astype("<f4").tobytes())})
    cds = os.path.join(tmp, "conv.h5")
    run(["import", "--model", ckpt, "--layers", "head", "--converted", conv, "--tokens", "4", "-o", cds, "-q"])
    with h5py.File(cds, "r") as d:
        g = d["workloads/head"]
        check(np.array_equal(g["b"][()], (q.astype(np.float32) * scale[:, None]).T), "converted b = q x scale, transposed")
        check(np.array_equal(g["b_ref"][()], w_f32.T), "b_ref is the original W^T")
        a = g["a"][()].astype(np.float64)
        check(np.allclose(g["c_ref"][()], a @ w_f32.T.astype(np.float64), rtol=1e-12, atol=1e-12), "c_ref from the original")
    check("(matches the contents)" in run(["inspect", cds]).stdout, "inspect accepts a converted dataset")
    # A b_ref that does not give c_ref, or of the wrong shape, is refused.
    bad_ref = os.path.join(tmp, "bad-ref.h5")
    for name, value in (("b_ref", lambda g: g["b_ref"][()] * 2), ("b_ref", lambda g: np.ones((3, 3), np.float32))):
        import shutil
        shutil.copy(cds, bad_ref)
        with h5py.File(bad_ref, "r+") as d:
            g = d["workloads/head"]
            v = value(g)
            del g[name]
            g[name] = v
        p = run(["inspect", bad_ref], expect=2)
        check("/workloads/head/b_ref" in p.stderr or "a.b_ref" in p.stderr, f"a bad b_ref is refused: {p.stderr}")
    write_safetensors(conv, {"head.weight": ("I8", q.shape, q.tobytes())})
    p = run(["import", "--model", ckpt, "--layers", "head", "--converted", conv, "-o", cds, "--force"], expect=2)
    check("head.weight_scale" in p.stderr, f"missing weight_scale: {p.stderr}")
    # Group-wise scales on I8 weights (compressed-tensors int-quantized with a group strategy): two groups.
    groups = np.ascontiguousarray(np.repeat(scale[:, None], 2, axis=1) * np.array([1, 2], np.float32)).astype("<f4")
    write_safetensors(conv, {"head.weight": ("I8", q.shape, q.tobytes()),
                             "head.weight_scale": ("F32", groups.shape, groups.tobytes())})
    run(["import", "--model", ckpt, "--layers", "head", "--converted", conv, "-o", cds, "--force", "--force-foreign", "-q"])
    half = q.shape[1] // 2
    want = np.concatenate([q[:, :half].astype(np.float32) * groups[:, :1], q[:, half:].astype(np.float32) * groups[:, 1:]], axis=1)
    with h5py.File(cds, "r") as d:
        check(np.array_equal(d["workloads/head/b"][()], want.T), "group-wise scales on I8 weights: two groups of columns")

    # Bad input: exit 2, the file named, nothing written.
    out = os.path.join(tmp, "bad.h5")
    p = run(["import", "--model", os.path.join(tmp, "nope.safetensors"), "-o", out], expect=2)
    check("nope.safetensors" in p.stderr, f"missing path: {p.stderr}")
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    p = run(["import", "--model", empty, "-o", out], expect=2)
    check("no *.safetensors" in p.stderr, f"empty directory: {p.stderr}")
    shard = os.path.join(tmp, "shard")
    os.mkdir(shard)
    write_safetensors(os.path.join(shard, "a.safetensors"), {"x.weight": ("F32", (2, 2), np.ones((2, 2), "<f4").tobytes())})
    json.dump({"weight_map": {"x.weight": "a.safetensors", "y.weight": "missing.safetensors"}},
              open(os.path.join(shard, "model.safetensors.index.json"), "w"))
    p = run(["import", "--model", shard, "-o", out], expect=2)
    check("missing.safetensors" in p.stderr, f"index naming a missing shard: {p.stderr}")
    json.dump({"weight_map": {"x.weight": "../a.safetensors"}}, open(os.path.join(shard, "model.safetensors.index.json"), "w"))
    p = run(["import", "--model", shard, "-o", out], expect=2)
    check("not a file name next to the index" in p.stderr, f"index escaping its directory: {p.stderr}")
    narrow = os.path.join(tmp, "narrow.h5")
    with h5py.File(narrow, "w") as f:
        for layer, x in acts.items():
            f[layer] = x[:, :, :-1]
    p = run(["import", "--model", ckpt, "--activations", narrow, "-o", out], expect=2)
    check("in_features" in p.stderr and "narrow.h5" in p.stderr, f"activations of the wrong width: {p.stderr}")
    partial = os.path.join(tmp, "partial.h5")
    with h5py.File(partial, "w") as f:
        f["head"] = acts["head"]
    p = run(["import", "--model", ckpt, "--activations", partial, "-o", out], expect=2)
    check("blocks.2.fc" in p.stderr, f"a layer missing from the activations: {p.stderr}")
    check(not os.path.exists(out) and not [n for n in os.listdir(tmp) if ".tmp-" in n], "no output left behind")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
