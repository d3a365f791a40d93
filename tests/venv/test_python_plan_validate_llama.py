"""plan --validate on a small causal LM (transformers' Llama, 3 layers, hidden 64, seeded weights; the
model of test_python_verify_llama.py): gradients of the next-token loss captured on calibration ids,
`precis import --model --gradients`, `precis run`, then `python -m precis plan --validate` with a Fisher
plan and five bits budgets on held-out ids (DESIGN §17, issue 31 "Prediction checked against the
truth"). Checked independently of precis.validate:

- every point's predicted value is the Fisher objective summed over its plan's layers, recomputed from
  the cells of plan.json (and, for a Fisher plan, equal to that plan's own predicted_loss_change);
- the measured KL(ref||q) of two plans recomputed with PyTorch (float64) from the reference model's
  and the emulated model's logits;
- Spearman and Pearson recomputed with NumPy from the points;
- what must hold: the rank correlation of predicted and measured over the plans is >= 0.8, and the
  Fisher plan's measured KL is no worse than the rel_fro plan's at each budget (equal effective bits);
- plan.md and plan.html carry the table and the scatter plot (one mark per plan); the C command refuses
  --validate naming python -m precis plan; a bad budget list is refused naming the option.
"""
import json
import math
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from cli_checks import FAILURES, PRECIS, check, run  # noqa: E402

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

FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]
RECIPES = "fp32,bf16,fp8,int8,nvfp4,mxfp4,w4a16"
BUDGETS = [4.5, 5, 6, 8, 10]
SPEARMAN_FLOOR = 0.8
# A budget asked in measured KL (issue 41): between the 6- and 8-bit plans of docs/verify.md's table.
KL_LIMIT = 0.001


from tiny_llama import tiny_llama as _tiny_llama  # noqa: E402


def tiny_llama():
    return _tiny_llama(layers=3, tied=False)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def np_spearman_pearson(x, y):
    """Independent of precis.validate: ranks by double argsort (the points have no ties, checked)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1]), float(np.corrcoef(x, y)[0, 1])


def kl_of_plan(model, assignment, ids):
    """KL(ref||q) per token, mean, from the two models' logits in float64 (all ids in one batch, as verify)."""
    with torch.no_grad():
        ref = model(torch.from_numpy(ids)).logits.double()
        with pt.emulate(model, assignment):
            q = model(torch.from_numpy(ids)).logits.double()
    kl = torch.nn.functional.kl_div(torch.log_softmax(q, -1), torch.log_softmax(ref, -1), log_target=True,
                                    reduction="none").sum(-1)
    return kl.mean().item()


def main():
    started = time.time()
    tmp = scratch.mkdtemp(prefix="precis-validate-llama-")
    model = tiny_llama()
    calib = torch.randint(0, 96, (16, 32), generator=torch.Generator().manual_seed(2)).numpy()
    held = torch.randint(0, 96, (12, 32), generator=torch.Generator().manual_seed(3)).numpy()
    cap = pt.capture(model, [torch.from_numpy(calib)])  # a causal LM: dL/dY of the next-token loss
    check(cap.meta["loss"] == "causal_lm_loss", f"capture loss {cap.meta.get('loss')}")
    cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.safetensors"))
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    np.save(os.path.join(tmp, "held.npy"), held)
    ds = os.path.join(tmp, "ds.h5")
    run(["import", "--model", os.path.join(ckpt, "model.safetensors"), "--activations", os.path.join(tmp, "acts.npz"),
         "--gradients", os.path.join(tmp, "grads.safetensors"), "--calib", "4", "-o", ds, "-q"])
    rep = os.path.join(tmp, "rep")
    run(["run", ds, "--backend", "cpu", "--recipes", RECIPES, "-o", rep] + FAST)

    out = os.path.join(tmp, "plan")
    # --deploy none: this checks predicted against measured loss over every evaluated recipe (nvfp4 and
    # w4a16 g128 on widths of 64 included), not what an engine deploys (test_python_plan_deploy_shapes.py).
    cmd = [sys.executable, "-m", "precis", "plan", os.path.join(rep, "report.json"), "--validate", "--model", ckpt,
           "--inputs", os.path.join(tmp, "held.npy"), "--budget", "bits=6", "--deploy", "none", "--validate-budgets",
           "bits=" + ",".join(f"{b:g}" for b in BUDGETS), "--validate-max", str(KL_LIMIT), "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0 and "Spearman" in p.stdout, f"plan --validate: exit {p.returncode}: {p.stdout[-800:]} {p.stderr[-1500:]}")
    plan = json.load(open(os.path.join(out, "plan.json")))
    v = plan["validation"]
    check(v["objective"] == "fisher" and v["measure"] == "kl_mean" and v["output_kind"] == "logits"
          and v["budgets"] == {"kind": "bits", "values": BUDGETS} and v["against"] == "rel_fro" and v["samples"] == 12,
          f"validation header {dict((k, v[k]) for k in ('objective', 'measure', 'budgets', 'against', 'samples'))}")
    points = {q["label"]: q for q in v["points"]}
    want = ["chosen"] + [f"{o}-bits{b:g}" for b in BUDGETS for o in ("fisher", "rel_fro")]
    check(list(points) == want, f"points {list(points)}")

    # Predicted: the Fisher cells of the chosen plan summed over each point's layers.
    cells = {e["layer"]: e["recipes"] for e in plan["layers"]}
    assignments = {}
    for label, q in points.items():
        sub = json.load(open(os.path.join(out, q["plan"])))
        assignments[label] = {e["layer"]: e["recipe"] for e in sub["layers"]}
        fisher_sum = sum(cells[layer][recipe]["error"] for layer, recipe in assignments[label].items())
        check(close(q["predicted"], fisher_sum), f"{label}: predicted {q['predicted']}, summed cells {fisher_sum}")
        if q["objective"] == "fisher":
            check(close(q["predicted"], sub["objective"]["predicted_loss_change"]),
                  f"{label}: predicted {q['predicted']} is not its plan's predicted_loss_change")
            check(q["budget"] is None or sub["budget"]["value"] == q["budget"]["value"], f"{label}: budget")
        if q["budget"]:
            check(q["effective_bits"] <= q["budget"]["value"] + 1e-9, f"{label}: {q['effective_bits']} bits over its budget")
    check(assignments["chosen"] == assignments["fisher-bits6"], "the chosen plan is the Fisher plan at bits=6")

    # Measured: KL from PyTorch for two plans.
    for label in ("chosen", "rel_fro-bits5"):
        kl = kl_of_plan(model, assignments[label], held)
        check(close(points[label]["measured"], kl, 1e-9), f"{label}: measured {points[label]['measured']}, PyTorch KL {kl}")
        check(points[label]["measured"] == points[label]["metrics"]["kl_mean"], f"{label}: measured is kl_mean")

    # The correlations, recomputed; what must hold.
    distinct, seen = [], set()
    for q in v["points"]:
        key = (q["predicted"], q["measured"])
        if key not in seen:
            seen.add(key)
            distinct.append(q)
    xs, ys = [q["predicted"] for q in distinct], [q["measured"] for q in distinct]
    check(len(set(xs)) == len(xs) and len(set(ys)) == len(ys), "no ties among the points (the independent ranks assume none)")
    rho, r = np_spearman_pearson(xs, ys)
    check(v["distinct_points"] == len(distinct) >= 5, f"{v['distinct_points']} distinct plans, {len(distinct)} here")
    check(close(v["spearman"], rho, 1e-12) and close(v["pearson"], r, 1e-12),
          f"spearman {v['spearman']} / {rho}, pearson {v['pearson']} / {r}")
    check(rho >= SPEARMAN_FLOOR and v["spearman_own_objective"] >= SPEARMAN_FLOOR,
          f"rank correlation of predicted and measured: {rho} (Fisher plans alone {v['spearman_own_objective']}), "
          f"floor {SPEARMAN_FLOOR}")
    # Issue 41: the prediction's units, the fitted map from predicted to measured KL and a budget in measured KL,
    # recomputed with NumPy's lstsq (the map is fitted over the distinct plans).
    check("ranks plans" in plan["objective"]["units"] and plan["objective"]["ranks_plans"] is True
          and "ranks plans" in v["units"], f"the objective's units: {plan['objective'].get('units')}")
    lx, ly = np.log10(xs), np.log10(ys)
    (slope, intercept), *_ = np.linalg.lstsq(np.stack([lx, np.ones_like(lx)], 1), ly, rcond=None)
    rms = float(np.sqrt(np.mean((ly - intercept - slope * lx) ** 2)))
    fit = v["fit"]
    check(fit["points"] == len(distinct) and close(fit["b"], slope, 1e-9) and close(fit["a"], intercept, 1e-9)
          and close(fit["rms_log10_residual"], rms, 1e-9), f"fit {fit}, lstsq {slope} {intercept} {rms}")
    for q in v["points"]:
        check(close(q["fitted"], 10 ** (intercept + slope * math.log10(q["predicted"])), 1e-9), f"{q['label']}: fitted")
    ok = [q for q in distinct if q["measured"] <= KL_LIMIT]
    mb = v["measured_budget"]
    want_mb = min(ok, key=lambda q: q["effective_bits"]) if ok else None
    check(mb["limit"] == KL_LIMIT and mb["met"] == bool(ok) and (not ok or (mb["effective_bits"] == want_mb["effective_bits"]
          and mb["measured"] <= KL_LIMIT)), f"budget in measured KL: {mb}")
    check(close(mb["predicted_at_limit"], 10 ** ((math.log10(KL_LIMIT) - intercept) / slope), 1e-9), "predicted at the limit")
    print(f"llama: fitted log10 KL = {intercept:.4g} + {slope:.4g} log10 predicted, rms {rms:.3g} (factor "
          f"{10 ** rms:.3g}); kl_mean<={KL_LIMIT}: {mb.get('label')} at {mb.get('effective_bits')} bits", file=sys.stderr)
    check(len(v["comparison"]) == len(BUDGETS), f"comparison at {len(v['comparison'])} budgets")
    for c in v["comparison"]:
        f, rf = c["fisher"], c["rel_fro"]
        label = f"bits={c['budget']['value']:g}"
        check(abs(f["effective_bits"] - rf["effective_bits"]) <= 0.05 * c["budget"]["value"],
              f"{label}: effective bits {f['effective_bits']} and {rf['effective_bits']} are not equal within 5%")
        check(f["measured"] <= rf["measured"] and c["no_worse"],
              f"{label}: the Fisher plan's KL {f['measured']} is worse than the rel_fro plan's {rf['measured']}")
    print("llama: spearman %.4f pearson %.4f over %d plans; fisher/rel_fro KL at bits %s: %s" % (
        rho, r, len(distinct), BUDGETS, ", ".join(f"{c['fisher']['measured']:.3g}/{c['rel_fro']['measured']:.3g}"
                                                 for c in v["comparison"])), file=sys.stderr)

    # The plan's files.
    md = open(os.path.join(out, "plan.md")).read()
    check("## Validation: predicted against measured" in md and "Spearman rank correlation" in md
          and md.count("| rel\\_fro-bits") == len(BUDGETS), "plan.md has the validation section")
    page = open(os.path.join(out, "plan.html")).read()
    svg = page[page.find("<svg", page.find("Validation")):]
    svg = svg[:svg.find("</svg>")]
    marks = svg.count("<circle") - 2 + svg.count("<rect") - 2  # legend: 2 circles; frame + legend box: 2 rects
    check("<script" not in page and marks == len(v["points"]), f"plan.html: scatter with {marks} marks, {len(v['points'])} points")
    check(os.path.isfile(os.path.join(out, "validate", "rel_fro-bits5", "verify", "report.json")), "each point's verify report")

    # The C command refuses, pointing at the Python one; bad budgets are refused by name.
    p = subprocess.run([PRECIS, "plan", os.path.join(rep, "report.json"), "--validate", "-o", os.path.join(tmp, "c")],
                       capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "python -m precis plan REPORT.json --validate" in p.stderr
          and not os.path.exists(os.path.join(tmp, "c")), f"precis plan --validate: exit {p.returncode}: {p.stderr}")
    p = subprocess.run(cmd[:-1] + [os.path.join(tmp, "bad"), "--validate-budgets", "bits=5"], capture_output=True, text=True,
                       env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "--validate-budgets" in p.stderr, f"one budget: exit {p.returncode}: {p.stderr[-400:]}")
    p = subprocess.run(cmd, capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "exists" in p.stderr, f"an existing plan is kept without --force: exit {p.returncode}")

    # Without --validate-budgets: six bits budgets per weight from the cheapest plan to the least-error
    # one (the plan's totals are bits over all weights; a budget is bits per weight).
    auto = os.path.join(tmp, "auto")
    p = subprocess.run(cmd[:cmd.index("--validate-budgets")] + ["--validate-against", "none", "-o", auto],
                       capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 0, f"plan --validate without --validate-budgets: exit {p.returncode}: {p.stderr[-800:]}")
    if p.returncode == 0:
        va = json.load(open(os.path.join(auto, "plan.json")))["validation"]
        weights = sum(e["weights"] for e in plan["layers"] if e.get("weights"))
        lo = plan["cheapest_total_cost"] / weights
        values = va["budgets"]["values"]
        check(va["budgets"]["kind"] == "bits" and 2 <= len(values) <= 6 and values == sorted(values),
              f"derived budgets {va['budgets']}")
        check(lo <= values[0] <= lo * (1 + 1e-5) and values[-1] <= 32,
              f"derived budgets {values}: the first is the cheapest plan's {lo} effective bits rounded up, all per weight")
        sweep = [q for q in va["points"] if q["label"] != "chosen"]
        check(len(sweep) == len(values) and all(q["effective_bits"] <= q["budget"]["value"] + 1e-9 for q in sweep),
              f"every derived budget planned and verified: {[(q['label'], q['effective_bits']) for q in sweep]}")
    # An infeasible budget: exit 3 (a gate), not 2 (usage).
    p = subprocess.run(cmd[:cmd.index("--budget")] + ["--budget", "bits=1"] + cmd[cmd.index("--budget") + 2:-1]
                       + [os.path.join(tmp, "infeasible")], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 3 and "not feasible" in p.stderr, f"bits=1: exit {p.returncode}: {p.stderr[-400:]}")

    print(f"{time.time() - started:.1f} s", file=sys.stderr)
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok: plan --validate on a small Llama: predicted vs measured, correlations and Fisher vs rel_fro checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
