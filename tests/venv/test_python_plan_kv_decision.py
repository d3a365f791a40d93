"""The KV cache format as a decision of the plan (issue 42): `precis plan --serve batch=B,context=T
--budget memory=M --kv-candidates kv-sweep.json --objective-map validated/plan.json` on a seeded GQA Llama
(hidden 576, 9 query / 3 KV heads of 64, tied embeddings, vocabulary 1000; tests/venv/tiny_llama.py).

The whole workflow runs: gradients captured, `import --model --gradients`, `run`, `verify --kv-sweep` (the KV
candidates' measured KL), `python -m precis plan --validate` (the fitted map from the Fisher objective to
measured KL), then `precis plan` with the KV decision at a grid of budgets. Checked against an independent
brute force over every (weights assignment, KV candidate) pair, from plan.json's cells, the sweep's KL and
bytes per token (Python's KV rule, not the C one) and the validated fit:

- at every budget the plan's KV format, its total estimated KL and its weights objective are the brute
  force's optimum, and infeasible exactly where no pair fits;
- there is a budget where the plan buys a smaller KV cache with wider weights than the best plan that keeps
  the bf16 cache (and that costs less estimated KL), and a binding budget where it keeps the bf16 cache and
  narrows the weights instead;
- plan.json, plan.md and stdout name the chosen format, its bytes and KL and every alternative; the serving
  estimate and the deployable configs carry it (kv_cache_scheme, kv_cache_quant_algo);
- bad inputs are refused by name (no map, a map of another objective, a bad list, a falling map).
"""
import itertools
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
import scratch  # noqa: E402  (tests/py/scratch.py: scratch under the build tree, removed on a signal)

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
from tiny_llama import seeded_gqa_llama  # noqa: E402

PRECIS = os.environ.get("PRECIS") or os.path.join(BUILD, "precis")
FAILURES = []
FAST = ["--min-samples", "1", "--max-samples", "2", "--max-time-ms", "2", "--quiet"]
KV_FORMATS = ["bf16", "e4m3@tensor", "s8@row:sym", "e2m1@nv:static"]
BATCH, CONTEXT = 2, 4096  # a bf16 cache of 6 MiB beside 7.9 MiB of bf16 weights: comparable, so they trade


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, file=sys.stderr)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def sh(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True, env=SUBPROCESS_ENV)
    if p.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def brute_force(plan, sweep, fit, budget):
    """Every weights assignment x every KV candidate: memory = resident sum + largest transient + the cache,
    estimated KL = 10^(a + b log10 objective) + the cache's measured KL. Returns the optimum (or None),
    and the optimum with the KV fixed at bf16,bf16."""
    layers = plan["layers"]
    recipes = plan["recipes"]
    per_layer = [[r for r in recipes if e["recipes"][r]["passes"]] for e in layers]
    resident = np.array([[e["recipes"][r]["resident_bytes"] for r in recipes] for e in layers], np.float64)
    transient = np.array([[e["recipes"][r]["transient_bytes"] for r in recipes] for e in layers], np.float64)
    error = np.array([[e["recipes"][r]["error"] for r in recipes] for e in layers], np.float64)
    idx = np.array(list(itertools.product(*[[recipes.index(r) for r in rs] for rs in per_layer])), np.int64)
    rows = np.arange(len(layers))
    weights_memory = resident[rows, idx].sum(1) + transient[rows, idx].max(1)
    objective = error[rows, idx].sum(1)
    weights_kl = np.where(objective > 0, 10.0 ** (fit["a"] + fit["b"] * np.log10(np.maximum(objective, 1e-300))), 0.0)
    best, best_bf16 = None, None
    for cell in sweep["cells"]:
        kv_bytes = cell["bytes_per_token"] * BATCH * CONTEXT
        fits = weights_memory + kv_bytes <= budget
        if not fits.any():
            continue
        total = np.where(fits, weights_kl + cell["kl_mean"], np.inf)
        i = int(np.argmin(total))
        cand = {"k": cell["k"], "v": cell["v"], "total_kl": float(total[i]), "kv_bytes": kv_bytes,
                "objective": float(objective[i]), "weights_memory": float(weights_memory[i]),
                "assignment": [recipes[j] for j in idx[i]]}
        if best is None or cand["total_kl"] < best["total_kl"]:
            best = cand
        if cell["k"] == "bf16" and cell["v"] == "bf16":
            best_bf16 = cand
    return best, best_bf16, float(objective.min())


def main():
    tmp = scratch.mkdtemp(prefix="precis-plan-kv-")
    model = seeded_gqa_llama(layers=1)
    calib = torch.randint(0, 1000, (8, 32), generator=torch.Generator().manual_seed(2)).numpy()
    held = torch.randint(0, 1000, (8, 32), generator=torch.Generator().manual_seed(3)).numpy()
    cap = pt.capture(model, [torch.from_numpy(calib)])
    cap.save(os.path.join(tmp, "acts.npz"), grads=os.path.join(tmp, "grads.safetensors"))
    ckpt = os.path.join(tmp, "ckpt")
    model.save_pretrained(ckpt)
    np.save(os.path.join(tmp, "held.npy"), held)
    ds = os.path.join(tmp, "ds.h5")
    sh([PRECIS, "import", "--model", os.path.join(ckpt, "model.safetensors"), "--activations", os.path.join(tmp, "acts.npz"),
        "--gradients", os.path.join(tmp, "grads.safetensors"), "--calib", "4", "-o", ds, "-q"])
    rep = os.path.join(tmp, "rep", "report.json")
    sh([PRECIS, "run", ds, "--backend", "cpu", "--recipes", "bf16,fp8,nvfp4", "-o", os.path.dirname(rep)] + FAST)

    # The KV candidates' KL, measured on the model alone, and the map from the Fisher objective to KL.
    sweep_dir = os.path.join(tmp, "sweep")
    sh([sys.executable, "-m", "precis", "verify", "--model", ckpt, "--inputs", os.path.join(tmp, "held.npy"),
        "--kv-sweep", ";".join(KV_FORMATS), "-o", sweep_dir])
    sweep_path = os.path.join(sweep_dir, "kv-sweep.json")
    sweep = json.load(open(sweep_path))
    val = os.path.join(tmp, "val")
    sh([sys.executable, "-m", "precis", "plan", rep, "--validate", "--model", ckpt, "--inputs", os.path.join(tmp, "held.npy"),
        "--deploy", "none", "--budget", "memory=6000000", "--validate-budgets", "memory=3500000,4500000,5500000,6500000",
        "-o", val])
    validated = os.path.join(val, "plan.json")
    fit = json.load(open(validated))["validation"]["fit"]
    check(fit["b"] > 0 and fit["a"] > 1, f"the fit {fit}: the Fisher objective is far below KL here (a > 1), "
                                         "which is why an identity map would be wrong")

    # A grid of budgets from below the smallest pair to above the largest.
    base = json.load(open(validated))
    smallest_w = sum(min(e["recipes"][r]["resident_bytes"] for r in base["recipes"]) for e in base["layers"])
    largest_w = sum(max(e["recipes"][r]["resident_bytes"] for r in base["recipes"]) for e in base["layers"])
    kv_bytes = [c["bytes_per_token"] * BATCH * CONTEXT for c in sweep["cells"]]
    budgets = np.linspace(smallest_w + min(kv_bytes) * 0.9, largest_w + max(kv_bytes) + 1e6, 28)
    smaller_kv_wider_weights = keeps_bf16_narrows_weights = None
    for n, budget in enumerate(budgets):
        out = os.path.join(tmp, f"plan{n}")
        p = subprocess.run([PRECIS, "plan", rep, "--deploy", "none", "--serve", f"batch={BATCH},context={CONTEXT}",
                            "--budget", f"memory={budget:.0f}", "--kv-candidates", sweep_path, "--objective-map", validated,
                            "-o", out], capture_output=True, text=True)
        budget = float(f"{budget:.0f}")
        # The cells (the same at every budget) from the validated plan, not from the plan under test.
        best, best_bf16, least_objective = brute_force(base, sweep, fit, budget)
        label = f"memory={budget:.0f}"
        if best is None:
            check(p.returncode == 3 and "leaves no room for the weights" in p.stdout + p.stderr,
                  f"{label}: brute force finds no pair, plan exit {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")
            continue
        plan = json.load(open(os.path.join(out, "plan.json")))
        check(p.returncode == 0 and plan["feasible"], f"{label}: plan exit {p.returncode}: {p.stderr[-500:]}")
        d = plan["kv_decision"]
        chosen = d["chosen"]
        check((chosen["k"], chosen["v"]) == (best["k"], best["v"]) and close(chosen["total_kl"], best["total_kl"]),
              f"{label}: plan chose K {chosen['k']} V {chosen['v']} ({chosen['total_kl']}), brute force "
              f"{best['k']},{best['v']} ({best['total_kl']})")
        assignment = {e["layer"]: e["recipe"] for e in plan["layers"]}
        objective = sum(e["recipes"][assignment[e["layer"]]]["error"] for e in plan["layers"])
        check(close(objective, best["objective"]) and close(plan["objective"]["predicted_loss_change"], best["objective"]),
              f"{label}: weights objective {objective}, brute force {best['objective']}")
        check(plan["memory"]["total_bytes"] + chosen["kv_cache_bytes"] <= budget
              and close(chosen["kv_cache_bytes"], best["kv_bytes"]), f"{label}: over the budget or KV bytes differ")
        s = plan["serving_estimate"]
        want_format = chosen["k"] if chosen["k"] == chosen["v"] else f"{chosen['k']},{chosen['v']}"
        check(s["kv_format"] == want_format and close(s["kv_cache_bytes"], chosen["kv_cache_bytes"]),
              f"{label}: serving estimate {s['kv_format']} {s['kv_cache_bytes']}")
        check(len(d["candidates"]) == len(sweep["cells"]) and sum(c["chosen"] for c in d["candidates"]) == 1,
              f"{label}: the alternatives")
        for c in d["candidates"]:  # every alternative's own optimum, as brute force with that KV alone
            one = dict(sweep, cells=[x for x in sweep["cells"] if (x["k"], x["v"]) == (c["k"], c["v"])])
            alone, _, _ = brute_force(base, one, fit, budget)
            check(c["feasible"] == (alone is not None) and (alone is None or close(c["total_kl"], alone["total_kl"])),
                  f"{label}: alternative {c['k']},{c['v']}: {c['total_kl']} vs {alone and alone['total_kl']}")
        bf16_bytes = 768 * BATCH * CONTEXT
        if (best_bf16 is not None and chosen["kv_cache_bytes"] < bf16_bytes
                and best["weights_memory"] > best_bf16["weights_memory"] and best["total_kl"] < best_bf16["total_kl"]
                and plan["memory"]["total_bytes"] > best_bf16["weights_memory"]):
            smaller_kv_wider_weights = smaller_kv_wider_weights or (budget, chosen, best_bf16)
        if (best_bf16 is not None and (chosen["k"], chosen["v"]) == ("bf16", "bf16")
                and best_bf16["objective"] > least_objective * (1 + 1e-9)):
            keeps_bf16_narrows_weights = keeps_bf16_narrows_weights or (budget, chosen)
    check(smaller_kv_wider_weights is not None, "no budget where the plan buys a smaller KV with wider weights")
    check(keeps_bf16_narrows_weights is not None, "no binding budget where the plan keeps the bf16 KV and narrows weights")
    if smaller_kv_wider_weights:
        budget, chosen, alt = smaller_kv_wider_weights
        print(f"memory={budget:.0f}: K {chosen['k']} V {chosen['v']} ({chosen['kv_cache_bytes']:.0f} B, KL {chosen['kv_kl']:.3g}) "
              f"+ weights KL {chosen['weights_kl']:.3g} = {chosen['total_kl']:.3g}; bf16 KV with narrower weights "
              f"({alt['weights_memory']:.0f} B): {alt['total_kl']:.3g}", file=sys.stderr)
    if keeps_bf16_narrows_weights:
        budget, chosen = keeps_bf16_narrows_weights
        print(f"memory={budget:.0f}: keeps bf16 KV, weights KL {chosen['weights_kl']:.3g}", file=sys.stderr)

    # The chosen format in the files and the deployable configs.
    budget = smaller_kv_wider_weights[0] if smaller_kv_wider_weights else budgets[-1]
    out = os.path.join(tmp, "fp8kv")
    fp8 = next(c for c in sweep["cells"] if c["k"] == c["v"] == "e4m3@tensor")
    p = sh([PRECIS, "plan", rep, "--deploy", "none", "--serve", f"batch={BATCH},context={CONTEXT}", "--budget",
            f"memory={largest_w + 8e6:.0f}", "--kv-candidates", f"fp8-tensor={fp8['kl_mean']!r};s8@row:sym,e2m1@nv:static=0.5",
            "--objective-map", f"a={fit['a']!r},b={fit['b']!r}", "-o", out])
    plan = json.load(open(os.path.join(out, "plan.json")))
    check(plan["kv_decision"]["chosen"]["k"] == "e4m3@tensor" and "KV cache: K e4m3@tensor, V e4m3@tensor chosen of 2" in p.stdout,
          f"list form: {plan['kv_decision']['chosen']} {p.stdout[-400:]}")
    ct = json.load(open(os.path.join(out, "compressed_tensors_config.json")))
    mo = json.load(open(os.path.join(out, "modelopt_hf_quant_config.json")))
    check(ct.get("kv_cache_scheme", {}).get("strategy") == "tensor", f"kv_cache_scheme {ct.get('kv_cache_scheme')}")
    check(mo["quantization"].get("kv_cache_quant_algo") == "FP8", f"modelopt {mo['quantization']}")
    md = open(os.path.join(out, "plan.md")).read()
    check("## KV cache format (a decision of the budget)" in md and "**chosen**" in md and "`e2m1@nv:static`" in md,
          "plan.md names the decision and the alternatives")

    # Refusals, by name.
    common = [PRECIS, "plan", rep, "--deploy", "none", "--serve", f"batch={BATCH},context={CONTEXT}", "--budget", "memory=2e7",
              "-o", os.path.join(tmp, "bad"), "--force"]
    for extra, needle in [(["--kv-candidates", sweep_path], "--kv-candidates needs --objective-map"),
                          (["--kv-candidates", sweep_path, "--objective-map", validated, "--objective", "rel_fro"],
                           "maps the fisher objective, this plan's is rel_fro"),
                          (["--kv-candidates", "bf16=0;e9m9=0.1", "--objective-map", "identity"], "\"e9m9\" is not a KV cache format"),
                          (["--kv-candidates", "bf16", "--objective-map", "identity"], "expected K[,V]=KL"),
                          (["--kv-candidates", "bf16=0", "--objective-map", "a=1,b=-1"], "must increase")]:
        p = subprocess.run(common + extra, capture_output=True, text=True)
        check(p.returncode == 2 and needle in p.stderr, f"{extra}: exit {p.returncode}: {p.stderr.strip()}")
    p = subprocess.run([PRECIS, "plan", rep, "--deploy", "none", "--budget", "memory=2e7", "--kv-candidates", "bf16=0",
                        "--objective-map", "identity", "-o", os.path.join(tmp, "bad"), "--force"], capture_output=True, text=True)
    check(p.returncode == 2 and "needs --serve" in p.stderr, f"no --serve: {p.returncode} {p.stderr.strip()}")
    p = subprocess.run([sys.executable, "-m", "precis", "plan", rep, "--validate", "--model", ckpt, "--inputs",
                        os.path.join(tmp, "held.npy"), "--budget", "memory=2e7", "--kv-candidates", sweep_path, "-o",
                        os.path.join(tmp, "bad-validate")], capture_output=True, text=True, env=SUBPROCESS_ENV)
    check(p.returncode == 2 and "validate without --kv-candidates" in p.stderr, f"--validate with --kv-candidates: "
          f"{p.returncode} {p.stderr.strip()[-300:]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
