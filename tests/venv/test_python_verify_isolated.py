"""verify's isolated rows, computed in its reference pass (include/precis/layer_check.h), equal the
rows `precis run` writes for the dataset `precis import --model --activations` makes of the same
inputs, in every metric field, bit for bit (issue 40). The old way is done here by hand: the
reference model's inputs captured with precis.torch.capture, the weights written as a checkpoint,
import, run. A Llama built here (seeded): hidden 96 and intermediate 160 (not multiples of 128),
grouped KV heads (6 query heads, 2 KV heads), a 5000-word head (wider than the reference's column
blocks of 4096: a full block and a partial one); a plan mixing int8 (row scales), fp8 (a tensor
scale over the whole A), bf16 and the head's logit metrics. The head's c_ref in the imported
dataset is checked against NumPy's float64 product, so that the blocks are seen to be placed right.

- batch = all samples: every planned layer's row is equal (a tensor scale spans the same rows);
- --batch-size 4 with 64-token windows (each batch whole blocks of 256 reference rows): the layers
  whose quantization has no cross-row scale (int8, bf16) are still equal;
- --isolated REPORT.json takes the run's rows as they are; --isolated skip computes none and keeps
  the cumulative error, which on the first layer equals the isolated error.
Every row is measured here (layer_rows=None; the default subsample is test_python_verify_layer_rows.py's).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
from cli_checks import FAILURES, PRECIS, check  # noqa: E402

try:
    import numpy as np
    import torch
    import transformers
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

# Every field of a row that a measurement sets, timing and host aside.
METRIC_FIELDS = ("workload", "layer", "recipe", "spec", "m", "n", "k", "batch", "status", "reason", "verdict",
                 "verdict_detail", "criteria", "error", "logits", "loss_change")


def llama():
    torch.manual_seed(1)
    config = transformers.LlamaConfig(vocab_size=5000, hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return model


PLAN = {"lm_head": "int8", "*.self_attn.q_proj": "fp8", "*.mlp.down_proj": "bf16", "*": "int8"}


def precis_run_rows(tmp, model, chosen, ids, positions=None):
    """The old way: capture, checkpoint, import, run; layer -> row. positions: only these tokens of each
    window are imported (the dataset of verify --layer-rows's subsample)."""
    cap = pt.capture(model, [ids], gradients=False, tokens=ids.shape[1])
    arrays = cap.arrays()
    if positions is not None:
        arrays = {n: np.ascontiguousarray(arrays[n][:, positions]) for n in chosen}
    modules = dict(model.named_modules())
    weights = {f"{n}.weight": modules[n].weight.detach().float().numpy() for n in chosen}
    ckpt = os.path.join(tmp, "w.safetensors")
    pt._write_safetensors(ckpt, weights)
    acts = os.path.join(tmp, "acts.npz")
    pt.write_arrays(acts, {n: arrays[n] for n in chosen})
    ds = os.path.join(tmp, "layers.h5")
    args = [PRECIS, "import", "--model", ckpt, "--activations", acts, "-o", ds, "-q"]
    for n in chosen:
        args += ["--layers", n]
    p = subprocess.run(args, capture_output=True, text=True)
    check(p.returncode == 0, f"import: {p.stderr[-800:]}")
    import h5py

    with h5py.File(ds, "r") as f:  # the head's reference, in column blocks of 4096: FP64-accurate
        a = arrays["lm_head"].astype(np.float64).reshape(-1, arrays["lm_head"].shape[-1])
        w = weights["lm_head.weight"].astype(np.float64)
        c_ref = f["/workloads/lm_head/c_ref"][()].reshape(a.shape[0], -1)
        ab_abs = f["/workloads/lm_head/ab_abs"][()].reshape(a.shape[0], -1)
        bound = a.shape[1] * 2.0 ** -52 * (np.abs(a) @ np.abs(w.T))
        check(c_ref.shape == (a.shape[0], w.shape[0]) and np.all(np.abs(c_ref - a @ w.T) <= bound)
              and np.all(np.abs(ab_abs - np.abs(a) @ np.abs(w.T)) <= bound),
              f"lm_head: the imported c_ref/ab_abs are not a.W^T, |a|.|W|^T to FP64 accuracy")
    rows = {}
    for i, recipe in enumerate(sorted(set(chosen.values()))):
        names = [n for n, r in chosen.items() if r == recipe]
        out = os.path.join(tmp, f"run-{i}")
        p = subprocess.run([PRECIS, "run", ds, "--backend", "cpu", "--recipes", recipe, "--workloads", ",".join(names),
                            "-o", out, "--quiet", "--min-samples", "1", "--max-samples", "1", "--max-time-ms", "1"],
                           capture_output=True, text=True)
        check(p.returncode in (0, 3), f"run {recipe}: {p.stderr[-800:]}")
        for r in json.load(open(os.path.join(out, "report.json")))["rows"]:
            rows[r["layer"]] = r
    return rows, os.path.join(tmp, "run-all")


def same_row(got, want, what):
    for f in METRIC_FIELDS:
        if got.get(f) != want.get(f):
            check(False, f"{what}: field {f}: verify {json.dumps(got.get(f))[:400]} != precis run {json.dumps(want.get(f))[:400]}")
            return False
    return True


def main():
    tmp = scratch.mkdtemp(prefix="precis-verify-isolated-")
    try:
        model = llama()
        ids = np.random.default_rng(3).integers(0, 5000, (8, 64)).astype(np.int64)
        chosen = pt.resolve_plan(model, PLAN)
        want, _ = precis_run_rows(tmp, model, chosen, torch.from_numpy(ids))
        check(want["lm_head"].get("logits") is not None, "the run's lm_head row carries the logit metrics")

        res = verify.verify(model, PLAN, ids, batch_size=8, layer_rows=None)
        got = {r["layer"]: r for r in res.report["rows"]}
        check(sorted(got) == sorted(chosen), f"one isolated row per planned layer: {sorted(got)}")
        equal = sum(same_row(got[n], want[n], f"batch 8, {n} ({chosen[n]})") for n in chosen if n in got)
        check(equal == len(chosen), f"{equal} of {len(chosen)} rows equal precis run's")
        check(any(got[n]["error"]["rel_fro"]["worst"] > 1e-4 for n in chosen), "the rows measure visible errors")

        res4 = verify.verify(model, PLAN, ids, batch_size=4, layer_rows=None)
        got4 = {r["layer"]: r for r in res4.report["rows"]}
        rowwise = [n for n in chosen if chosen[n] in ("int8", "bf16")]
        for n in rowwise:
            same_row(got4[n], want[n], f"batch 4, {n} ({chosen[n]})")
        fp8 = [n for n in chosen if chosen[n] == "fp8"]
        check(all(got4[n]["error"] != want[n]["error"] for n in fp8),
              "batch 4: fp8's tensor scale spans one batch, so its row differs from the whole-A run")

        # --isolated REPORT.json: the run's rows are taken as they are.
        report = os.path.join(tmp, "run-rows.json")
        with open(report, "w") as f:
            json.dump({"format": "precis-report", "rows": list(want.values())}, f)
        taken = verify.verify(model, PLAN, ids, batch_size=8, isolated=report, layer_rows=None)
        t = {r["layer"]: r for r in taken.report["rows"]}
        check(all(t[n]["error"] == want[n]["error"] for n in chosen), "--isolated REPORT takes the run's rows")
        # skip: no rows, the cumulative error is still there; the first layer's equals its isolated one.
        skipped = verify.verify(model, PLAN, ids, batch_size=8, isolated=False, layer_rows=None)
        first = skipped.per_layer[0]
        check(not skipped.report["rows"] and first["isolated"] is None
              and first["cumulative"]["rel_fro"] == want[first["layer"]]["error"]["rel_fro"],
              f"skip: cumulative of the first layer {first['cumulative']['rel_fro']} == isolated "
              f"{want[first['layer']]['error']['rel_fro']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
