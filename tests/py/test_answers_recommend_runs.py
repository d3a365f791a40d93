#!/usr/bin/python3
"""Issue 15, made deterministic by issue 34: `precis recommend` gives the same answer on three runs
of the same dataset when the recipes' latencies differ by less than the measured noise. Emulated
recipes whose noise intervals overlap are ties, decided by the memory of the format, then the error,
so run-to-run jitter does not flip the answer; plain and --per-workload. Without --require nothing
is recommended.

The rows come from one real cpu run of a small dataset (real specs, errors and verdicts); only their
timings are replaced by fixed samples (tests/py/report_fixtures.py), as three "runs" in which fp16
and bf16 trade places within a 3% noise band. The answer must be the same in all three and the tie
must be reported; a control in which bf16 is faster by far more than the noise must pick bf16, so
that the tie is not a constant answer. Whether real runs on this machine are stable enough is a
measurement, not a test: tests/bench/answer_stability.py prints it.

Runs with Debian's python3; env PRECIS (binary)."""
import copy
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures  # noqa: E402

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
failures = []

SUITE = """seed: 15
workloads:
  - {name: square, m: 64, n: 128, k: 128, batch: 2}
  - {name: wide, m: 32, n: 256, k: 128, batch: 2}
"""
RECIPES = "fp32,tf32,fp16,bf16,int8,fp8"
# Medians (ms) per recipe in each of three runs: fp16 and bf16 within 2% of each other, in a
# different order each time; everything else well apart. int8 and fp8 are slow (emulated).
RUNS = [
    {"fp32": 4.0, "tf32": 2.9, "fp16": 2.00, "bf16": 2.03, "int8": 3.5, "fp8": 5.0},
    {"fp32": 4.1, "tf32": 2.8, "fp16": 2.04, "bf16": 2.00, "int8": 3.6, "fp8": 5.1},
    {"fp32": 3.9, "tf32": 2.9, "fp16": 2.01, "bf16": 1.99, "int8": 3.4, "fp8": 4.9},
]
# bf16 at half fp16's latency: far outside the noise, no tie.
CONTROL = {"fp32": 4.0, "tf32": 2.9, "fp16": 2.00, "bf16": 1.00, "int8": 3.5, "fp8": 5.0}


def check(cond, what, proc=None):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        if proc is not None:
            print(f"  exit {proc.returncode}\n  stdout: {proc.stdout}\n  stderr: {proc.stderr}")
        failures.append(what)


def precis(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True, timeout=600)


def with_timings(report, medians, scale):
    """The report with each row's timing replaced by fixed samples around medians[recipe] * scale[workload]
    (a 3% spread: report_fixtures.timing)."""
    doc = copy.deepcopy(report)
    for row in doc["rows"]:
        if row["status"] == "ok":
            row["time"] = report_fixtures.timing(medians[row["recipe"]] * scale[row["workload"]], count=40, spread=0.03)
    return doc


def recommend(path, *extra):
    rec = precis("recommend", path, "--require", "rel_fro<=1e-2", "--json", *extra)
    try:
        return rec, json.loads(rec.stdout)
    except ValueError:
        return rec, None


def main():
    with scratch.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "small.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        data = os.path.join(tmp, "small.h5")
        run = precis("gen", suite, "-o", data, "-q")
        check(run.returncode == 0, "gen the small dataset", run)
        if run.returncode:
            return 1
        out = os.path.join(tmp, "run")
        run = precis("run", data, "--backend", "cpu", "--recipes", RECIPES, "--min-samples", "3", "--max-samples", "3", "-o", out, "--quiet")
        check(run.returncode == 0, "one real run", run)
        if run.returncode:
            return 1
        with open(os.path.join(out, "report.json")) as f:
            real = json.load(f)
        scale = {"square": 1.0, "wide": 0.7}

        answers, ties, per_workload, noise_only = [], [], [], []
        for i, medians in enumerate(RUNS):
            path = report_fixtures.write(os.path.join(tmp, f"run{i}.json"), with_timings(real, medians, scale))
            rec, doc = recommend(path)
            check(rec.returncode == 0 and doc is not None, f"recommend on run {i + 1}", rec)
            if doc is None:
                continue
            answers.append(doc["recommended"])
            tied = sorted(r["recipe"] for r in doc["recipes"] if r["tied"])
            ties.append(tied)
            print(f"     run {i + 1}: {doc['recommended']} (tied: {tied}, decided by {doc['tie_decided_by']})")
            rec, doc = recommend(path, "--per-workload")
            check(rec.returncode == 0 and doc is not None, f"recommend --per-workload on run {i + 1}", rec)
            if doc is not None:
                per_workload.append({w["workload"]: w["recommended"] for w in doc["per_workload"]})
            # The measured noise alone (no 10% threshold): the 3% bands overlap, still a tie.
            rec, doc = recommend(path, "--tie-threshold", "0")
            if doc is not None:
                noise_only.append((doc["recommended"], doc["tie_within_noise"],
                                   sorted(r["recipe"] for r in doc["recipes"] if r["tied"])))
            plain = precis("recommend", path)
            check(plain.returncode == 0 and "recommendation:" not in plain.stdout and "--require" in plain.stdout,
                  f"run {i + 1} without --require: no recommendation, how to ask", plain)
        check(len(answers) == 3 and len(set(answers)) == 1 and answers[0] in ("fp16", "bf16"),
              f"the same recommendation on three runs whose fp16/bf16 order flips within the noise: {answers}")
        check(all("fp16" in t and "bf16" in t for t in ties), f"fp16 and bf16 reported as tied in every run: {ties}")
        check(len(per_workload) == 3 and all(p == per_workload[0] for p in per_workload),
              f"the same per-workload recommendations on three runs: {per_workload}")
        check(len(noise_only) == 3 and all(n == (answers[0] if answers else None, True, ["bf16", "fp16"])
                                           for n in noise_only),
              f"--tie-threshold 0: tied within the measured noise alone, the same answer: {noise_only}")

        path = report_fixtures.write(os.path.join(tmp, "control.json"), with_timings(real, CONTROL, scale))
        for extra in ([], ["--tie-threshold", "0"]):
            rec, doc = recommend(path, *extra)
            check(doc is not None and doc["recommended"] == "bf16" and not any(r["tied"] for r in doc["recipes"]),
                  f"control {extra}: bf16 twice as fast as fp16 (far outside the noise) is chosen, untied", rec)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
