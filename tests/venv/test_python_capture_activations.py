"""tools/capture_activations.py: PyTorch forward hooks -> the activations precis import reads.

The tool is a thin command over precis.torch.recording (the staged package of this build, found
through PRECIS_BUILD_DIR); runs with the test venv's torch (under CI it must not skip).

A small transformer-like model (embedding, per block a qkv projection with bias, an MLP, a head;
bfloat16 in one block) runs three batches of [2, 10] token ids under capture(tokens=8). The test
records, with hooks of its own, every Linear's input and output. Then:

- the captured arrays are the inputs (first 8 positions of each sequence), float32
  [6, 8, in_features], bfloat16 widened exactly; a pooler on the first token (a 2-D input) gives
  [6, 1, in_features]; the embedding is not hooked;
- written as .npz, .safetensors and a directory of <layer>.npy, each imports with
  `precis import --model CKPT --activations OUT --calib 2`: a and calib/a are the inputs, and
  c_ref (float64 from a and the checkpoint's weights) equals what the model computed, the module's
  output minus its bias, to float32 accuracy;
- layers=/exclude= choose; a layer never called is reported by missed() and not written;
- errors name the layer: tokens above a sequence's length, no Linear matching the globs;
- each file records the capture's metadata (model class, dtype, tokens) beside the arrays.
"""
import json
import os
import struct
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

import numpy as np

try:
    import h5py
    import torch
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools"))
from capture_activations import CaptureError, capture  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, hidden, dtype):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d, dtype=dtype)
        self.proj = torch.nn.Linear(3 * d, d, bias=False, dtype=dtype)
        self.fc1 = torch.nn.Linear(d, hidden, dtype=dtype)
        self.fc2 = torch.nn.Linear(hidden, d, dtype=dtype)
        self.norm = torch.nn.LayerNorm(d, dtype=dtype)

    def forward(self, x):
        x = x + self.proj(torch.tanh(self.qkv(self.norm(x))))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.blocks = torch.nn.ModuleList([Block(16, 32, torch.float32), Block(16, 24, torch.bfloat16)])
        self.head = torch.nn.Linear(16, 8)
        self.pooler = torch.nn.Linear(16, 16)  # on the first token only: a 2-D input
        self.unused = torch.nn.Linear(16, 4)  # never called in forward

    def forward(self, ids):
        x = self.embed(ids)
        x = self.blocks[0](x)
        x = self.blocks[1](x.to(torch.bfloat16)).float()
        return self.head(x), torch.tanh(self.pooler(x[:, 0]))


def write_checkpoint(path, model):
    """The model's state_dict as safetensors (F32 and BF16 as they are), as save_file would."""
    header, offset, blobs = {}, 0, []
    for name, t in model.state_dict().items():
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            dtype, raw = "BF16", t.view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            dtype, raw = "F32", t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    tmp = scratch.mkdtemp(prefix="precis-capture-")
    torch.manual_seed(0)
    model = Tiny().eval()
    ckpt = os.path.join(tmp, "model.safetensors")
    write_checkpoint(ckpt, model)
    batches = [torch.randint(0, 50, (2, 10)) for _ in range(3)]

    # The test's own record of every Linear's input and output, by module name.
    seen_in, seen_out = {}, {}
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}

    def recorder(name):
        def hook(module, inputs, output):
            x, y = inputs[0].detach().float().numpy(), output.detach().float().numpy()
            if x.ndim == 2:  # [batch, k]: batch samples of one token
                x, y = x[:, None, :], y[:, None, :]
            seen_in.setdefault(name, []).append(x[:, :8])
            seen_out.setdefault(name, []).append(y[:, :8])
        return hook

    handles = [m.register_forward_hook(recorder(n)) for n, m in linears.items()]
    outs = {}
    for fmt in ("acts.npz", "acts.safetensors", "acts-dir"):
        seen_in.clear()
        seen_out.clear()
        with torch.no_grad(), capture(model, os.path.join(tmp, fmt), tokens=8) as cap:
            for ids in batches:
                model(ids)
        outs[fmt] = cap
    for h in handles:
        h.remove()
    cap = outs["acts.npz"]
    arrays = cap.arrays()
    called = sorted(n for n in linears if n != "unused")
    check(sorted(arrays) == called, f"captured layers {sorted(arrays)}")
    check(cap.missed() == ["unused"] and "unused: never called" in cap.summary(), f"missed: {cap.missed()}")
    for name in called:
        want = np.concatenate(seen_in[name]).astype(np.float32)
        tokens = 1 if name == "pooler" else 8
        check(arrays[name].dtype == np.float32 and arrays[name].shape == (6, tokens, linears[name].in_features),
              f"{name}: shape {arrays[name].shape}")
        check(np.array_equal(arrays[name], want), f"{name}: captured values are not the layer's inputs")
    npz = np.load(os.path.join(tmp, "acts.npz"))
    check(sorted(npz.files) == sorted(called + ["@capture"]) and all(np.array_equal(npz[n], arrays[n]) for n in called),
          f"the .npz holds the arrays and the metadata: {npz.files}")
    meta = json.loads(str(npz["@capture"]))
    check(meta.get("model_class") == "Tiny" and meta.get("inputs") == "tools/capture_activations.py", f"metadata {meta}")
    check(sorted(os.listdir(os.path.join(tmp, "acts-dir"))) == sorted([n + ".npy" for n in called] + ["capture.json"]),
          "the directory holds <layer>.npy and capture.json")

    # Each format imports; c_ref is what the model computed (output minus bias), a is the input.
    for fmt in ("acts.npz", "acts.safetensors", "acts-dir"):
        ds = os.path.join(tmp, fmt + ".h5")
        run(["import", "--model", ckpt, "--activations", os.path.join(tmp, fmt), "--exclude", "unused", "--calib", "2",
             "-o", ds, "-q"])
        with h5py.File(ds, "r") as d:
            check(sorted(d["workloads"].keys()) == called, f"{fmt}: workloads {sorted(d['workloads'].keys())}")
            for name in called:
                g = d["workloads"][name]
                x = arrays[name]
                check(np.array_equal(g["a"][()], x[:4]) and np.array_equal(g["calib/a"][()], x[4:]), f"{fmt}: {name}: a, calib/a")
                bias = linears[name].bias
                y = np.concatenate(seen_out[name])[:4].astype(np.float64)
                if bias is not None:
                    y = y - bias.detach().float().numpy().astype(np.float64)
                c = g["c_ref"][()]
                # The model computed in float32 (bfloat16 for block 1, whose outputs are rounded to it).
                tol = (1e-5 if linears[name].weight.dtype == torch.float32 else 4e-3) * np.abs(c).max()
                check(np.abs(c - y).max() <= tol, f"{fmt}: {name}: c_ref differs from the model's output by "
                                                  f"{np.abs(c - y).max():.3g} (tolerance {tol:.3g})")

    # layers= / exclude= choose; errors name the layer.
    with torch.no_grad(), capture(model, os.path.join(tmp, "some.npz"), layers=["blocks.*"], exclude=["*.fc2"]) as some:
        model(batches[0])
    check(sorted(some.arrays()) == sorted(n for n in called if n.startswith("blocks.") and not n.endswith("fc2")),
          f"layers/exclude: {sorted(some.arrays())}")
    check(some.arrays()["blocks.0.qkv"].shape == (2, 10, 16), "tokens default to the first call's sequence length")
    try:
        with torch.no_grad(), capture(model, os.path.join(tmp, "long.npz"), tokens=12):
            model(batches[0])
        check(False, "tokens above the sequence length is refused")
    except CaptureError as e:
        check("fewer than tokens=12" in str(e) and "layer blocks.0.qkv" in str(e), f"tokens error: {e}")
    check(not os.path.exists(os.path.join(tmp, "long.npz")), "nothing written after an error")
    try:
        with capture(model, os.path.join(tmp, "none.npz"), layers=["nothing.*"]):
            pass
        check(False, "no matching Linear is refused")
    except CaptureError as e:
        check("nothing.*" in str(e), f"no-match error: {e}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
