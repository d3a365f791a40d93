"""What deployability costs (docs/deploy.md): all-MiniLM-L6-v2's plan at one bits budget with
--deploy none (every evaluated recipe, layer by layer) and --deploy vllm (what vLLM runs from a
compressed-tensors checkpoint on sm_90: q/k/v on one recipe, nvfp4/mxfp4 dropped), side by side,
with the predicted loss change (Fisher objective) of each.

Run with the test venv's python from the repository root after building:
  PRECIS=build/precis build/venv/bin/python tests/bench/plan_deploy_minilm.py [BITS ...]
Prints a Markdown table per budget (default 4.5 and 6 bits per weight)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "venv"))
from minilm_model import load_minilm, minilm_dir  # noqa: E402

import torch  # noqa: E402

BUILD = os.path.abspath(os.environ.get("PRECIS_BUILD_DIR", "build"))
sys.path.insert(0, os.environ.get("PRECIS_PY_STAGE") or os.path.join(BUILD, "python"))
import precis.torch as pt  # noqa: E402
from precis import verify  # noqa: E402

PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
RECIPES = "bf16,fp8-rowwise,int8,w8a16,w4a16,nvfp4,mxfp4"
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "1"]


def precis(*args):
    p = subprocess.run([PRECIS, *args], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"precis {' '.join(args)}: exit {p.returncode}: {p.stderr[-2000:]}")
    return p


def main():
    budgets = sys.argv[1:] or ["4.5", "6"]
    tmp = tempfile.mkdtemp(prefix="precis-deploy-minilm-")
    try:
        model, tokenizer = load_minilm()
        calib = verify.load_inputs(os.path.join(SOURCE, "docs", "model.md"), tokenizer, 64, 12)
        cap = pt.capture(model, [torch.from_numpy(calib)], loss=pt.output_projection_loss(0), source="docs/model.md")
        cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.npz"))
        ds = os.path.join(tmp, "ds.h5")
        precis("import", "--model", os.path.join(minilm_dir(), "model.safetensors"), "--activations",
               os.path.join(tmp, "acts.npz"), "--gradients", os.path.join(tmp, "grads.npz"), "--calib", "3", "-o", ds, "-q")
        rep = os.path.join(tmp, "rep")
        precis("run", ds, "--backend", "cpu", "--recipes", RECIPES, "-o", rep, *FAST)
        report = os.path.join(rep, "report.json")
        for bits in budgets:
            plans = {}
            for target in ("none", "vllm"):
                out = os.path.join(tmp, f"plan-{target}-{bits}")
                precis("plan", report, "--budget", f"bits={bits}", "--deploy", target, "-o", out)
                plans[target] = json.load(open(os.path.join(out, "plan.json")))
            none, vllm = plans["none"], plans["vllm"]
            print(f"\n### bits={bits} (recipes {RECIPES}; objective {none['objective']['kind']})\n")
            print("| layer | --deploy none | --deploy vllm |\n|---|---|---|")
            chosen = {t: {e["layer"]: e["recipe"] for e in p["layers"]} for t, p in plans.items()}
            for layer in chosen["none"]:
                a, b = chosen["none"][layer], chosen["vllm"][layer]
                print(f"| {layer} | {a} | {b}{' *' if a != b else ''} |")
            for t, p in plans.items():
                o = p["objective"]
                loss = o.get("predicted_loss_change", o.get("total"))
                weights = sum(e["weights"] for e in p["layers"])
                cost = p["total_cost"]
                ct = p["deployment"]["compressed_tensors"]
                print(f"\n- --deploy {t}: feasible {p['feasible']}, predicted loss change {loss:.6g}, "
                      f"{cost / weights if cost else float('nan'):.4f} effective bits per weight, "
                      f"{len(p['deploy_target']['fused_groups'])} fused groups, "
                      f"{len(p['deploy_target']['dropped'])} (layer, recipe) cells dropped; compressed-tensors "
                      f"complete {ct['complete']} (without equivalent {len(ct['layers_without_equivalent'])}, rejected by "
                      f"shape {len(ct['layers_rejected_by_shape'])}, fused layers on different schemes "
                      f"{len(ct['fused_layers_on_different_schemes'])})")
            ln = none["objective"].get("predicted_loss_change")
            lv = vllm["objective"].get("predicted_loss_change")
            if ln and lv:
                print(f"\nDeployability costs {lv - ln:.4g} in predicted loss change ({lv / ln:.2f}x) at {bits} bits.")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
