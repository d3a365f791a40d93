"""precis plan on crafted reports (no run needed):

- 240 layers x 4 recipes: one heatmap row per layer, one chosen cell per row, every chosen cell
  passing; under a latency budget the plan fits and is no worse than a greedy upgrade (a different
  algorithm that is feasible but not always optimal), and is optimal when the budget is large;
- a latency plan on a cpu-emulation report is refused (exit 2) unless --allow-emulated-latency is
  given, and then plan.json/md/html and stdout say that the latencies are CPU timings of an
  emulation; on a cuda report nothing is refused or labelled;
- recorded verdicts without --require; --exclusions-for RECIPE, and the older --target RECIPE read the
  same with a note naming --exclusions-for; --help lists --target once (the architecture) beside
  --exclusions-for (it listed --target twice, a recipe and an architecture); exit 3 naming blocking
  layers;
- hostile layer names are escaped in plan.html / plan.md and quoted in the exclusion lists;
- usage errors exit 2.
"""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures as fx  # noqa: E402

PRECIS = fx.precis_binary()
FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def plan(args, expect):
    p = subprocess.run([PRECIS, "plan"] + args, capture_output=True, text=True)
    if p.returncode != expect:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"precis plan {' '.join(args)}: exit {p.returncode}, expected {expect}")
    return p


def main():
    tmp = scratch.mkdtemp(prefix="precis-plan-")
    recipes = [("fp32", 4.0, 1e-7), ("bf16", 2.0, 3e-3), ("fp8", 1.2, 2e-2), ("int8", 1.0, 1e-2)]
    rows = []
    layers = [f"model.layers.{i // 6}.{['q', 'k', 'v', 'o', 'up', 'down'][i % 6]}" for i in range(240)]
    for i, layer in enumerate(layers):
        for recipe, ms, err in recipes:
            scale = 1 + (i * 37 % 11) / 5  # layer sensitivity, deterministic
            rows.append(fx.row(layer, recipe, err * scale if recipe != "fp32" else err, ms * (1 + (i % 3) / 10),
                               criteria=("rel_fro<=0.03",)))
    rep = fx.write(os.path.join(tmp, "report.json"), fx.report(rows))
    # The same rows measured on a GPU: latency plans need no permission there.
    rep_cuda = fx.write(os.path.join(tmp, "report-cuda.json"), fx.report(rows, backend="cuda"))
    cells = {(r["workload"], r["recipe"]): r for r in rows}

    out = os.path.join(tmp, "p1")
    plan([rep, "--require", "rel_fro<=3e-2", "-o", out], 0)
    doc = json.load(open(os.path.join(out, "plan.json")))
    html = open(os.path.join(out, "plan.html")).read()
    check(doc["feasible"] and len(doc["layers"]) == 240, "240-layer plan")
    check(html.count("<tr><td>") == 240 and html.count(" chosen") == 240, "one heatmap row and one chosen cell per layer")
    for e in doc["layers"]:
        c = cells[(e["layer"], e["recipe"])]
        check(c["error"]["rel_fro"]["worst"] <= 3e-2, f"{e['layer']}: chosen {e['recipe']} fails")

    # Latency budget: fits, and beats (or ties) a greedy feasible plan.
    cheapest = {l: min((cells[(l, r)]["time"]["median_ms"], r) for r, _, _ in recipes
                       if cells[(l, r)]["error"]["rel_fro"]["worst"] <= 3e-2)[1] for l in layers}
    base = sum(cells[(l, cheapest[l])]["time"]["median_ms"] for l in layers)
    budget = base * 1.4
    greedy = dict(cheapest)
    spent = base
    gains = []
    for l in layers:
        for r, _, _ in recipes:
            d_cost = cells[(l, r)]["time"]["median_ms"] - cells[(l, cheapest[l])]["time"]["median_ms"]
            d_err = cells[(l, cheapest[l])]["error"]["rel_fro"]["worst"] - cells[(l, r)]["error"]["rel_fro"]["worst"]
            if d_cost > 0 and d_err > 0:
                gains.append((d_err / d_cost, l, r, d_cost))
    for _, l, r, d_cost in sorted(gains, reverse=True):
        old = cells[(l, greedy[l])]["time"]["median_ms"] - cells[(l, cheapest[l])]["time"]["median_ms"]
        if greedy[l] == cheapest[l] and spent + d_cost <= budget:
            greedy[l] = r
            spent += d_cost - old
    greedy_err = sum(cells[(l, greedy[l])]["error"]["rel_fro"]["worst"] for l in layers)
    out = os.path.join(tmp, "p2")
    plan([rep_cuda, "--require", "rel_fro<=3e-2", "--budget", f"latency={budget!r}", "-o", out], 0)
    doc = json.load(open(os.path.join(out, "plan.json")))
    check(doc["cost_basis"] is None and "emulation" not in open(os.path.join(out, "plan.md")).read(),
          "a cuda report's latency plan carries no emulation note")
    check(doc["exact"] and doc["total_cost"] <= budget, f"latency plan fits: {doc['total_cost']} <= {budget}")
    check(doc["total_error"] <= greedy_err * (1 + 1e-12), f"exact plan {doc['total_error']} worse than greedy {greedy_err}")
    # A budget that allows everything: every layer on its most accurate passing recipe (fp32).
    plan([rep_cuda, "--require", "rel_fro<=3e-2", "--budget", "latency=1e9", "-o", out, "--force"], 0)
    doc = json.load(open(os.path.join(out, "plan.json")))
    check(all(e["recipe"] == "fp32" for e in doc["layers"]), "unbounded budget: fp32 everywhere")
    check(doc["target"] == "int8" and doc["keep_high_precision"] == layers,
          "the default target is the cheapest recipe; every layer off it is kept")

    # Latency on cpu-emulation timings: refused, naming the way out; allowed on request, and labelled.
    for how in (["--budget", f"latency={budget!r}"], ["--cost", "latency"]):
        out = os.path.join(tmp, "p-emulated-" + how[0][2:])
        p = plan([rep, "--require", "rel_fro<=3e-2", *how, "-o", out], 2)
        check("cpu-emulation" in p.stderr and "--allow-emulated-latency" in p.stderr and not os.path.exists(out),
              f"{how}: latency on emulation timings refused: {p.stderr}")
        p = plan([rep, "--require", "rel_fro<=3e-2", *how, "--allow-emulated-latency", "-o", out, "--force"], 0)
        note = "CPU timings of an emulation"
        doc = json.load(open(os.path.join(out, "plan.json")))
        check(note in p.stdout, f"{how}: stdout does not say the latencies are emulated: {p.stdout[:300]}")
        check(doc["cost_basis"] and note in doc["cost_basis"], f"{how}: plan.json cost_basis {doc['cost_basis']}")
        check(note in open(os.path.join(out, "plan.md")).read(), f"{how}: plan.md has no emulation note")
        check(note in open(os.path.join(out, "plan.html")).read(), f"{how}: plan.html has no emulation note")
    # Memory and bits on an emulation report need nothing.
    plan([rep, "--require", "rel_fro<=3e-2", "--budget", "bits=16", "-o", os.path.join(tmp, "p-bits")], 0)

    # Recorded verdicts (rel_fro<=0.03 in the rows) and the exclusion lists' recipe.
    out = os.path.join(tmp, "p3")
    p = plan([rep, "--exclusions-for", "fp8", "-o", out], 0)
    check("note" not in p.stderr, f"--exclusions-for: no note: {p.stderr}")
    doc = json.load(open(os.path.join(out, "plan.json")))
    check(doc["criteria"] == "each row's recorded verdict" and doc["target"] == "fp8", "recorded verdicts, --exclusions-for")
    ignore = open(os.path.join(out, "llmcompressor_ignore.yaml")).read()
    check(ignore.count('  - "') == sum(1 for e in doc["layers"] if e["recipe"] != "fp8"), "ignore list = layers not on fp8")
    # The older form --target RECIPE: the same plan, and a note that names the option now.
    old = os.path.join(tmp, "p3-old")
    p = plan([rep, "--target", "fp8", "-o", old], 0)
    check("--target fp8 names a recipe" in p.stderr and "--exclusions-for fp8" in p.stderr, f"--target RECIPE note: {p.stderr}")
    check(json.load(open(os.path.join(old, "plan.json")))["target"] == "fp8" and
          open(os.path.join(old, "llmcompressor_ignore.yaml")).read() == ignore, "--target fp8 plans as --exclusions-for fp8")
    # --help: one entry per option; --target is the architecture only.
    usage = subprocess.run([PRECIS, "plan", "--help"], capture_output=True, text=True).stdout
    entries = [line.split()[0] for line in usage.splitlines() if line.startswith("  --")]
    check(entries.count("--target") == 1 and entries.count("--exclusions-for") == 1 and len(entries) == len(set(entries)),
          f"plan --help option entries: {entries}")
    check(any(line.startswith("  --target ARCH") for line in usage.splitlines()), "--target ARCH in plan --help")
    for args, why in ((["--exclusions-for", "sm_90"], "an architecture"),
                      (["--exclusions-for", "fp8", "--exclusions-for", "int8"], "given twice"),
                      (["--exclusions-for", "fp64"], "--exclusions-for fp64: the report has no rows")):
        p = subprocess.run([PRECIS, "plan", rep, "-o", os.path.join(tmp, "u"), *args], capture_output=True, text=True)
        check(p.returncode == 2 and why in p.stderr, f"{args}: exit {p.returncode}: {p.stderr[:300]}")

    # Exit 3: one layer fails everything.
    bad_rows = rows + [fx.row("lm_head", r, 0.5, ms, criteria=("rel_fro<=0.03",)) for r, ms, _ in recipes]
    rep3 = fx.write(os.path.join(tmp, "report3.json"), fx.report(bad_rows))
    p = plan([rep3, "--require", "rel_fro<=3e-2", "-o", os.path.join(tmp, "p4")], 3)
    check("blocking: lm_head" in p.stdout and p.stdout.count("blocking:") == 1, f"blocking layer named: {p.stdout[:300]}")
    doc = json.load(open(os.path.join(tmp, "p4", "plan.json")))
    check(doc["blocking"] == ["lm_head"] and not doc["feasible"], "plan.json names the blocking layer")

    # Hostile names.
    evil = 'x"<script>alert(1)</script>\\|*'
    hostile = [fx.row(evil, "fp32", 1e-7, 4.0), fx.row(evil, "int8", 0.5, 1.0), fx.row("ok", "fp32", 1e-7, 4.0),
               fx.row("ok", "int8", 1e-3, 1.0)]
    rep5 = fx.write(os.path.join(tmp, "report5.json"), fx.report(hostile))
    out = os.path.join(tmp, "p5")
    plan([rep5, "--require", "rel_fro<=1e-2", "-o", out], 0)
    html = open(os.path.join(out, "plan.html")).read()
    check("<script" not in html and "&lt;script&gt;" in html, "layer names escaped in plan.html")
    check("<script" not in open(os.path.join(out, "plan.md")).read(), "layer names escaped in plan.md")
    yaml_text = open(os.path.join(out, "llmcompressor_ignore.yaml")).read()
    check('  - "x\\"<script>alert(1)</script>\\\\|*"' in yaml_text, f"YAML quoting: {yaml_text}")
    mo = json.load(open(os.path.join(out, "modelopt_exclude.json")))
    check(mo["exclude_modules"] == [evil] and mo["quant_cfg"][0]["quantizer_name"] == "*" + evil + ".*", "ModelOpt list")

    # Usage errors.
    for args in (["--budget", "memory=lots"], ["--budget", "watts=3"], ["--cost", "speed"], ["--target", "fp64"],
                 ["--require", "rel_fro<<1"]):
        p = subprocess.run([PRECIS, "plan", rep, "-o", os.path.join(tmp, "u")] + args, capture_output=True, text=True)
        check(p.returncode == 2 and p.stderr.startswith("precis plan:"), f"{args}: exit {p.returncode} {p.stderr[:200]}")
    p = subprocess.run([PRECIS, "plan", rep], capture_output=True, text=True)
    check(p.returncode == 2 and "-o DIR" in p.stderr, "missing -o")
    p = subprocess.run([PRECIS, "plan", rep, "-o", os.path.join(tmp, "p1")], capture_output=True, text=True)
    check(p.returncode == 2 and "exists" in p.stderr, f"existing outputs without --force: {p.stderr[:200]}")

    if FAILURES:
        print(f"{len(FAILURES)} failure(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
