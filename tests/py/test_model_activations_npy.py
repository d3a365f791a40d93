"""precis import --model --activations from NumPy files (Debian's NumPy + h5py only):

- an .npz (np.savez and np.savez_compressed) with one array per layer name, float16 / float32 /
  float64, [samples, tokens, k] or [tokens, k]: a and calib/a equal the arrays (float16 widened,
  float64 rounded to nearest float32), c_ref = a.W^T in float64;
- a directory of <layer>.npy files, the same;
- a single .npy feeds a single layer (--layers); with several layers it is refused;
- the dataset's `suite` attribute, given to precis gen, rebuilds the same a (the suite names the
  .npz member with `array:` and each .npy by its path);
- bad input, each exit 2 with a message naming the file and what was expected, and no output left
  behind: a layer missing from the .npz (the closest names listed), a missing <layer>.npy, the wrong
  last dimension (the shape found and in_features), rank 4, an integer array, a file that is none of
  the formats.
"""
import os
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402
from safetensors_fixture import write_safetensors_f32 as write_safetensors  # noqa: E402


def check_dataset(ds, weights, acts, calib, what):
    """a / calib/a are the arrays as float32 (the last `calib` samples are calib/a); c_ref = a.W^T."""
    with h5py.File(ds, "r") as d:
        for layer, w in weights.items():
            g = d["workloads"][layer]
            x = acts[layer].astype(np.float32)
            if x.ndim == 2:
                x = x[None]
            held = x[: x.shape[0] - calib]
            check(g["a"].shape == held.shape and np.array_equal(g["a"][()], held), f"{what}: {layer}: a")
            if calib:
                check(np.array_equal(g["calib/a"][()], x[x.shape[0] - calib:]), f"{what}: {layer}: calib/a")
            check(g.attrs["m"] == x.shape[1] and g.attrs["batch"] == held.shape[0], f"{what}: {layer}: m, batch")
            ref = held.astype(np.float64) @ w.T.astype(np.float64)
            check(np.allclose(g["c_ref"][()], ref, rtol=1e-12, atol=1e-12), f"{what}: {layer}: c_ref")
        return d.attrs["suite"]


def main():
    tmp = scratch.mkdtemp(prefix="precis-model-npy-")
    rng = np.random.default_rng(11)
    weights = {
        "blocks.0.attn.qkv": rng.standard_normal((12, 8)).astype(np.float32),
        "blocks.0.mlp.fc1": rng.standard_normal((16, 12)).astype(np.float32),
        "blocks.1.mlp.fc2": rng.standard_normal((8, 16)).astype(np.float32),
    }
    ckpt = os.path.join(tmp, "model.safetensors")
    write_safetensors(ckpt, {f"{k}.weight": v for k, v in weights.items()})
    k_of = {layer: w.shape[1] for layer, w in weights.items()}
    # One layer in float16, one in float64 (rounded to float32 on read), one [tokens, k] in float32.
    acts = {
        "blocks.0.attn.qkv": rng.standard_normal((3, 5, 8)).astype(np.float16),
        "blocks.0.mlp.fc1": rng.standard_normal((3, 5, 12)) * (1 + 1e-9),
        "blocks.1.mlp.fc2": rng.standard_normal((5, 16)).astype(np.float32),
    }
    out = os.path.join(tmp, "out.h5")

    # .npz, stored and compressed. The [tokens, k] layer has one sample, so no calibration split.
    for saver in (np.savez, np.savez_compressed):
        npz = os.path.join(tmp, f"acts-{saver.__name__}.npz")
        saver(npz, **acts)
        run(["import", "--model", ckpt, "--activations", npz, "--exclude", "blocks.1.*", "--calib", "1", "-o", out,
             "-q", "--force"])
        suite = check_dataset(out, {k: v for k, v in weights.items() if not k.startswith("blocks.1")}, acts, 1, saver.__name__)
        check(f"array: \"blocks.0.mlp.fc1\"" in suite, f"{saver.__name__}: the suite names the .npz member: {suite}")
        run(["import", "--model", ckpt, "--activations", npz, "-o", out, "-q", "--force"])
        check_dataset(out, weights, acts, 0, saver.__name__ + ", no calib")
    # The suite attribute rebuilds the same activations with precis gen.
    suite_path = os.path.join(tmp, "suite.yaml")
    with open(suite_path, "w") as f:
        f.write(suite)
    regen = os.path.join(tmp, "regen.h5")
    run(["gen", suite_path, "-o", regen])
    with h5py.File(out, "r") as a, h5py.File(regen, "r") as b:
        for layer in ("blocks.0.attn.qkv", "blocks.0.mlp.fc1"):
            check(np.array_equal(a["workloads"][layer]["a"][()][:2], b["workloads"][layer]["a"][()]),
                  f"gen of the suite attribute: {layer}: a")

    # A directory of <layer>.npy files.
    npy_dir = os.path.join(tmp, "acts-dir")
    os.mkdir(npy_dir)
    for layer, x in acts.items():
        np.save(os.path.join(npy_dir, layer + ".npy"), x)
    run(["import", "--model", ckpt, "--activations", npy_dir, "-o", out, "-q", "--force"])
    suite = check_dataset(out, weights, acts, 0, "directory")
    check(os.path.join(npy_dir, "blocks.0.mlp.fc1.npy") in suite, f"directory: the suite names each .npy: {suite}")

    # A single .npy: one layer only.
    single = os.path.join(npy_dir, "blocks.0.mlp.fc1.npy")
    run(["import", "--model", ckpt, "--layers", "blocks.0.mlp.fc1", "--activations", single, "--calib", "2", "-o", out,
         "-q", "--force"])
    check_dataset(out, {"blocks.0.mlp.fc1": weights["blocks.0.mlp.fc1"]}, acts, 2, "single .npy")
    os.remove(out)
    p = run(["import", "--model", ckpt, "--activations", single, "-o", out], expect=2)
    check("one array" in p.stderr and single in p.stderr and "3 layers" in p.stderr, f"a .npy for 3 layers: {p.stderr}")

    # Bad input.
    partial = os.path.join(tmp, "partial.npz")
    np.savez(partial, **{"blocks.0.attn.qkv": acts["blocks.0.attn.qkv"], "blocks.0.mlp.fc": acts["blocks.0.mlp.fc1"]})
    p = run(["import", "--model", ckpt, "--activations", partial, "-o", out], expect=2)
    check("partial.npz" in p.stderr and "blocks.0.mlp.fc1" in p.stderr and "\"blocks.0.mlp.fc\"" in p.stderr,
          f"a layer missing from the .npz (with the closest member): {p.stderr}")
    wide = os.path.join(tmp, "wide.npz")
    np.savez(wide, **{layer: np.zeros((2, 3, k + 1), np.float32) for layer, k in k_of.items()})
    p = run(["import", "--model", ckpt, "--activations", wide, "-o", out], expect=2)
    check("wide.npz" in p.stderr and "[2, 3, 9]" in p.stderr and "in_features = 8" in p.stderr,
          f"the wrong last dimension: {p.stderr}")
    os.remove(os.path.join(npy_dir, "blocks.1.mlp.fc2.npy"))
    np.save(os.path.join(npy_dir, "blocks.1.mlp_fc2.npy"), acts["blocks.1.mlp.fc2"])
    p = run(["import", "--model", ckpt, "--activations", npy_dir, "-o", out], expect=2)
    check(os.path.join(npy_dir, "blocks.1.mlp.fc2.npy") in p.stderr and "blocks.1.mlp_fc2" in p.stderr,
          f"a missing <layer>.npy (with the closest file): {p.stderr}")
    rank4 = os.path.join(tmp, "rank4.npz")
    np.savez(rank4, **{layer: np.zeros((1, 2, 3, k), np.float32) for layer, k in k_of.items()})
    p = run(["import", "--model", ckpt, "--activations", rank4, "-o", out], expect=2)
    check("rank4.npz" in p.stderr and "rank 4" in p.stderr, f"rank 4: {p.stderr}")
    ints = os.path.join(tmp, "ints.npz")
    np.savez(ints, **{layer: np.zeros((2, 3, k), np.int32) for layer, k in k_of.items()})
    p = run(["import", "--model", ckpt, "--activations", ints, "-o", out], expect=2)
    check("ints.npz" in p.stderr and "<i4" in p.stderr, f"an integer array: {p.stderr}")
    junk = os.path.join(tmp, "junk.bin")
    with open(junk, "wb") as f:
        f.write(b"not an array file at all" * 4)
    p = run(["import", "--model", ckpt, "--activations", junk, "-o", out], expect=2)
    check("junk.bin" in p.stderr and ".npz" in p.stderr, f"an unknown file: {p.stderr}")
    check(not os.path.exists(out) and not [n for n in os.listdir(tmp) if ".tmp-" in n], "no output left behind")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
