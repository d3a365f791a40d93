#!/usr/bin/python3
"""How stable is `precis recommend`'s answer across real runs on this machine? (issue 15's question,
moved out of CTest by issue 34: a shared 2-core machine cannot promise it, so it is measured here and
the tie logic is tested on fixed timings in tests/py/test_answers_recommend_runs.py.)

    /usr/bin/python3 tests/bench/answer_stability.py [--precis build/precis] [--runs 5] [--threads 1]

Generates a small dataset, runs the cpu backend RUNS times on it, and prints per run the
recommendation under rel_fro<=1e-2 (plain and per workload), then per recipe the median latency of
each run and the spread across runs (max/min of the medians, and the widest noise interval that
recommend measured), and whether every run gave the same answer. Exit status 0 either way: this is a
measurement; the load (os.getloadavg) is printed so that a reader can judge it."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SUITE = """seed: 15
workloads:
  - {name: square, m: 64, n: 128, k: 128, batch: 2}
  - {name: wide, m: 32, n: 256, k: 128, batch: 2}
"""
RECIPES = "fp32,tf32,fp16,bf16,int8,fp8"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precis", default=os.path.join(here, "..", "..", "build", "precis"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", default="1", help="OPENBLAS_NUM_THREADS for the runs (default 1)")
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS=args.threads)

    def precis(*a):
        p = subprocess.run([args.precis, *a], capture_output=True, text=True, env=env)
        if p.returncode not in (0, 3):
            sys.exit(f"precis {' '.join(a)}: exit {p.returncode}: {p.stderr}")
        return p

    print("load average before: %.2f %.2f %.2f on %d cores" % (*os.getloadavg(), os.cpu_count()))
    with tempfile.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "small.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        data = os.path.join(tmp, "small.h5")
        precis("gen", suite, "-o", data, "-q")
        answers, per_workload, medians, noise = [], [], {}, {}
        for i in range(args.runs):
            out = os.path.join(tmp, f"run{i}")
            precis("run", data, "--backend", "cpu", "--recipes", RECIPES, "-o", out, "--quiet")
            report = os.path.join(out, "report.json")
            doc = json.loads(precis("recommend", report, "--require", "rel_fro<=1e-2", "--json").stdout)
            pw = json.loads(precis("recommend", report, "--require", "rel_fro<=1e-2", "--json", "--per-workload").stdout)
            answers.append(doc["recommended"])
            per_workload.append({w["workload"]: w["recommended"] for w in pw["per_workload"]})
            tied = [r["recipe"] for r in doc["recipes"] if r["tied"]]
            for r in doc["recipes"]:
                medians.setdefault(r["recipe"], []).append(r["latency_ms"])
                lo, hi = r.get("latency_noise_low_ms"), r.get("latency_noise_high_ms")
                if lo is not None and hi is not None and r["latency_ms"]:
                    noise[r["recipe"]] = max(noise.get(r["recipe"], 0), (hi - lo) / r["latency_ms"])
            print(f"run {i + 1}: {doc['recommended']} (tied {tied}, decided by {doc['tie_decided_by']}); "
                  f"per workload {per_workload[-1]}")
        print("\nrecipe   median per run (ms)                         spread max/min   widest noise interval")
        for recipe, values in medians.items():
            finite = [v for v in values if v]
            spread = max(finite) / min(finite) if finite else float("nan")
            width = noise.get(recipe)
            print(f"{recipe:8s} {' '.join('%7.4f' % v if v else '   n/a ' for v in values):42s}  {spread:8.3f}"
                  f"          {'%.1f%%' % (100 * width) if width is not None else 'n/a'}")
        same = len(set(answers)) == 1
        same_pw = all(p == per_workload[0] for p in per_workload)
        print(f"\nanswer: {'the same in all %d runs' % args.runs if same else 'DIFFERS: %s' % answers}; "
              f"per workload: {'the same' if same_pw else 'DIFFERS'}")
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
