"""precis import --model --gradients and the loss change of each row (DESIGN §17), Debian's NumPy +
h5py (+ jsonschema when installed):

- the gradients file (an .npz of dL/dY per layer, [samples, tokens, out], as precis.torch.capture
  writes it) is stored per workload as /grad, the held-out samples only (the calibration sample's
  gradient is left out like its activations);
- every row of a run over that dataset reports loss_change: the Taylor term sum g*(C - C_ref) and
  the Fisher term 1/2 sum (g*(C - C_ref))^2 per held-out sample, mean and worst, recomputed here in
  NumPy for two layers and two recipes from the run's saved outputs (--save-outputs), the
  dataset's c_ref and the gradients this test wrote; report.csv carries the same four numbers;
- report.json validates against docs/report-schema.json; a dataset without gradients has no
  loss_change; bad gradients (wrong shape, no --activations) are refused naming the problem.
"""
import csv
import json
import os
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import FAILURES, check, run  # noqa: E402
from safetensors_fixture import write_safetensors_f32  # noqa: E402

try:
    import jsonschema
except ImportError:
    jsonschema = None

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]
SAMPLES, CALIB, TOKENS = 4, 1, 6


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def main():
    tmp = tempfile.mkdtemp(prefix="precis-grad-")
    rng = np.random.default_rng(11)
    shapes = {"blocks.0.attn": (16, 24), "blocks.0.mlp": (24, 16)}  # (in, out)
    ckpt = os.path.join(tmp, "model.safetensors")
    write_safetensors_f32(ckpt, {f"{n}.weight": rng.standard_normal((o, i)).astype(np.float32)
                                 for n, (i, o) in shapes.items()})
    acts = {n: rng.standard_normal((SAMPLES, TOKENS, i)).astype(np.float32) for n, (i, o) in shapes.items()}
    # Gradients of a loss at each output: the second layer's scaled up, as a layer nearer the loss may be.
    grads = {n: (rng.standard_normal((SAMPLES, TOKENS, o)) * (1 + 9 * j)).astype(np.float32)
             for j, (n, (i, o)) in enumerate(shapes.items())}
    np.savez(os.path.join(tmp, "acts.npz"), **acts)
    np.savez(os.path.join(tmp, "grads.npz"), **grads)
    ds = os.path.join(tmp, "m.h5")
    run(["import", "--model", ckpt, "--activations", os.path.join(tmp, "acts.npz"), "--gradients",
         os.path.join(tmp, "grads.npz"), "--calib", str(CALIB), "-o", ds, "-q"])
    held = SAMPLES - CALIB
    with h5py.File(ds, "r") as d:
        for n in shapes:
            g = d[f"workloads/{n}/grad"][()]
            check(g.shape == (held, TOKENS, shapes[n][1]) and np.array_equal(g, grads[n][:held]),
                  f"{n}: /grad holds the held-out samples' gradients, shape {g.shape}")

    rep = os.path.join(tmp, "rep")
    saved = os.path.join(tmp, "out.h5")
    run(["run", ds, "--backend", "cpu", "--recipes", "bf16,int8", "--save-outputs", saved, "-o", rep] + FAST, expect=None)
    report = json.load(open(os.path.join(rep, "report.json")))
    if jsonschema:
        jsonschema.validate(report, json.load(open(os.path.join(SOURCE, "docs", "report-schema.json"))))
    rows = {(r["workload"], r["recipe"]): r for r in report["rows"]}
    with open(os.path.join(rep, "report.csv"), newline="", encoding="utf-8") as fh:
        csv_rows = {(r["workload"], r["recipe"]): r for r in csv.DictReader(fh)}
    with h5py.File(ds, "r") as d, h5py.File(saved, "r") as o:
        for (wl, recipe), row in rows.items():
            c = o[f"/workloads/{wl}/{recipe}/c"][()].astype(np.float64)
            r = d[f"/workloads/{wl}/c_ref"][()]
            g = grads[wl][:held].astype(np.float64)
            delta = c - r
            taylor = (g * delta).sum(axis=(1, 2))
            fisher = 0.5 * ((g * delta) ** 2).sum(axis=(1, 2))
            want = {("taylor", "mean"): taylor.mean(), ("taylor", "worst"): taylor[np.argmax(np.abs(taylor))],
                    ("fisher", "mean"): fisher.mean(), ("fisher", "worst"): fisher.max()}
            lc = row.get("loss_change")
            check(lc is not None, f"{wl}/{recipe}: loss_change present")
            if not lc:
                continue
            for (term, stat), value in want.items():
                got = lc[term][stat]
                check(close(got, value, 1e-9), f"{wl}/{recipe} {term} {stat}: report {got}, NumPy {value}")
                got_csv = float(csv_rows[(wl, recipe)][f"{term}_{stat}"])
                check(close(got_csv, value, 1e-9), f"{wl}/{recipe} csv {term}_{stat}: {got_csv}, NumPy {value}")
            check(lc["fisher"]["worst"] > 0, f"{wl}/{recipe}: a quantized output changes the loss")
    # int8 moves the outputs more than bf16: its Fisher term is the larger on both layers.
    for wl in shapes:
        check(rows[(wl, "int8")]["loss_change"]["fisher"]["mean"] > rows[(wl, "bf16")]["loss_change"]["fisher"]["mean"],
              f"{wl}: int8's Fisher term above bf16's")

    # Without gradients: no loss_change, empty csv cells.
    ds2 = os.path.join(tmp, "plain.h5")
    run(["import", "--model", ckpt, "--activations", os.path.join(tmp, "acts.npz"), "-o", ds2, "-q"])
    rep2 = os.path.join(tmp, "rep2")
    run(["run", ds2, "--backend", "cpu", "--recipes", "bf16", "-o", rep2] + FAST, expect=None)
    report2 = json.load(open(os.path.join(rep2, "report.json")))
    check(all("loss_change" not in r for r in report2["rows"]), "no gradients, no loss_change")

    # Refusals: gradients of the wrong width; gradients without captured activations.
    bad = dict(grads)
    bad["blocks.0.mlp"] = grads["blocks.0.mlp"][:, :, :8]
    np.savez(os.path.join(tmp, "bad.npz"), **bad)
    p = run(["import", "--model", ckpt, "--activations", os.path.join(tmp, "acts.npz"), "--gradients",
             os.path.join(tmp, "bad.npz"), "-o", os.path.join(tmp, "bad.h5"), "-q"], expect=2)
    check("blocks.0.mlp" in p.stderr and "out_features = 16" in p.stderr, f"wrong width named: {p.stderr}")
    p = run(["import", "--model", ckpt, "--gradients", os.path.join(tmp, "grads.npz"), "-o",
             os.path.join(tmp, "bad.h5"), "-q"], expect=2)
    check("--gradients needs --activations" in p.stderr, f"gradients without activations: {p.stderr}")
    if FAILURES:
        raise SystemExit(f"{len(FAILURES)} failures")
    print("ok: gradients imported, Taylor and Fisher terms match NumPy")


if __name__ == "__main__":
    main()
