"""import --model in bounded memory (issue 40, DESIGN §20; docs/model.md "Memory").

A checkpoint of four layers (hidden 96, intermediate 160, an lm_head of 3000 outputs: widths that
are not multiples of 128), captured-style activations [12, 64, k] and gradients [12, 64, n]:
- k_proj given q_proj's inputs (as a capture gives them) stores no a of its own: a hard link to
  q_proj's, read the same (nothing stored twice, docs/model.md);
- the default import prints its estimate before the first layer, naming the largest layer (the
  head) and how many samples of its reference are computed at a time;
- c_ref and ab_abs equal a float64 a·W^T (numpy) to 1e-12 relative to |a|·|W^T|, every sample;
- --max-memory that leaves the head one block of 256 rows (4 samples) at a time: the estimate says
  256 rows, and every dataset and attribute of the file is bit for bit the default import's, the
  dataset_id too (and --calib 3 likewise);
- --max-memory under one sample of the first layer: exit 2 naming the figure, no file written.
"""
import os
import re
import shutil
import struct
import json
import subprocess
import sys

import h5py
import numpy as np

import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from cli_checks import FAILURES, PRECIS, check

SHAPES = {"model.layers.0.mlp.up_proj": (160, 96), "model.layers.0.mlp.down_proj": (96, 160),
          "model.layers.0.self_attn.q_proj": (96, 96), "model.layers.0.self_attn.k_proj": (32, 96), "lm_head": (3000, 96)}


def write_safetensors(path, arrays):
    header, blobs, offset = {}, [], 0
    for name, x in arrays.items():
        raw = np.ascontiguousarray(x, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def import_model(args):
    return subprocess.run([PRECIS, "import", "--force"] + args, capture_output=True, text=True)


def datasets(path):
    """name -> (bytes, dtype, shape, chunks, compression, attributes) of every dataset and group."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            attrs = {k: np.asarray(v).tobytes() for k, v in obj.attrs.items()}
            if isinstance(obj, h5py.Dataset):
                x = obj[()]
                out[name] = (x.tobytes(), x.dtype.str, x.shape, obj.chunks, obj.compression, obj.fletcher32, attrs)
            else:
                out[name] = attrs
        f.visititems(visit)
        out["/"] = {k: np.asarray(v).tobytes() for k, v in f.attrs.items() if k not in ("created_utc",)}
    return out


def main():
    tmp = scratch.mkdtemp(prefix="precis-import-memory-")
    try:
        rng = np.random.default_rng(3)
        weights = {name: (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32) for name, shape in SHAPES.items()}
        ckpt = os.path.join(tmp, "model.safetensors")
        write_safetensors(ckpt, {n + ".weight": w for n, w in weights.items()})
        acts = {n: rng.standard_normal((12, 64, w.shape[1])).astype(np.float32) for n, w in weights.items()}
        acts["model.layers.0.self_attn.k_proj"] = acts["model.layers.0.self_attn.q_proj"].copy()  # one input, as captured
        grads = {n: rng.standard_normal((12, 64, w.shape[0])).astype(np.float32) for n, w in weights.items()}
        np.savez(os.path.join(tmp, "acts.npz"), **acts)
        np.savez(os.path.join(tmp, "grads.npz"), **grads)
        common = ["--model", ckpt, "--activations", os.path.join(tmp, "acts.npz"), "--gradients",
                  os.path.join(tmp, "grads.npz")]

        whole = os.path.join(tmp, "whole.h5")
        p = import_model(common + ["-o", whole])
        check(p.returncode == 0, f"import: exit {p.returncode}: {p.stderr[-600:]}")
        estimate = [ln for ln in p.stderr.splitlines() if "peak memory ≈" in ln]
        check(len(estimate) == 1 and "at layer lm_head" in estimate[0] and "768 rows at a time" in estimate[0]
              and "5 layers, 12 held-out samples x 64 tokens" in estimate[0],
              f"the estimate before the first layer: {p.stderr[-800:]}")
        check(p.stderr.find("peak memory") < p.stderr.find("1/5"), "the estimate comes before the first layer")
        with h5py.File(whole, "r") as f:
            for name, w in weights.items():
                g = f["workloads"][name]
                a = acts[name].astype(np.float64)
                c = a @ w.T.astype(np.float64)
                ab = np.abs(a) @ np.abs(w.T).astype(np.float64)
                check(g["c_ref"].shape == (12, 64, w.shape[0]) and
                      np.all(np.abs(g["c_ref"][()] - c) <= 1e-12 * ab) and np.all(np.abs(g["ab_abs"][()] - ab) <= 1e-12 * ab),
                      f"{name}: c_ref / ab_abs differ from float64 a.W^T")
                check(np.array_equal(g["grad"][()], grads[name]) and np.array_equal(g["a"][()], acts[name]),
                      f"{name}: grad or a differs from what was given")
            # Nothing stored twice: k_proj's a (the same values as q_proj's) is q_proj's dataset under a second name.
            q, k = f["workloads/model.layers.0.self_attn.q_proj/a"], f["workloads/model.layers.0.self_attn.k_proj/a"]
            up = f["workloads/model.layers.0.mlp.up_proj/a"]
            check(q.id == k.id and h5py.h5o.get_info(q.id).rc == 2 and up.id != q.id,
                  "k_proj's a is not q_proj's stored once (a hard link), or up_proj's is")

        # The head's reference 256 rows (4 samples) at a time: the same file.
        need_one = 16 * 256 * 3000  # one block of 256 rows of the head's c_ref and ab_abs
        m = re.search(r"peak memory ≈ ([0-9.]+) (KiB|MiB)", estimate[0])
        total = float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1 << 20)
        limit = int(total - 1.5 * need_one)
        blocked = os.path.join(tmp, "blocked.h5")
        p = import_model(common + ["-o", blocked, "--max-memory", str(limit)])
        check(p.returncode == 0, f"import --max-memory {limit}: exit {p.returncode}: {p.stderr[-600:]}")
        m = re.search(r"of (\d+) rows at a time", p.stderr)
        check(m is not None and int(m.group(1)) == 256, f"--max-memory {limit}: the head in blocks: {p.stderr[-600:]}")
        dw, db = datasets(whole), datasets(blocked)
        check(dw == db, "import --max-memory wrote another file than the whole-layer import: "
              + str([k for k in set(dw) | set(db) if dw.get(k) != db.get(k)]))

        for name, extra in (("calib-whole.h5", []), ("calib-blocked.h5", ["--max-memory", str(limit)])):
            p = import_model(common + ["--calib", "3", "-q", "-o", os.path.join(tmp, name)] + extra)
            check(p.returncode == 0 and "peak memory" not in p.stderr, f"import --calib 3 {extra}: {p.stderr[-600:]}")
        check(datasets(os.path.join(tmp, "calib-whole.h5")) == datasets(os.path.join(tmp, "calib-blocked.h5")),
              "import --calib 3 --max-memory wrote another file")

        refused = os.path.join(tmp, "refused.h5")
        p = import_model(common + ["-o", refused, "--max-memory", "100K"])
        check(p.returncode == 2 and re.search(r"--max-memory 100 KiB: layer \S+ needs at least [0-9.]+ (KiB|MiB) \(weights",
                                              p.stderr) is not None and not os.path.exists(refused),
              f"--max-memory under one sample: exit {p.returncode}: {p.stderr[-600:]}")
        check(not [n for n in os.listdir(tmp) if n.startswith(".refused")], f"temporary files left: {os.listdir(tmp)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
