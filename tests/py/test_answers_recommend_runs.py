#!/usr/bin/python3
"""Issue 15: `precis recommend` gives the same answer on three real runs of the same dataset on the
cpu backend. Emulated recipes that differ by less than the measured noise are ties, decided by the
memory of the format, then the error, so run-to-run jitter no longer flips the answer; plain and
--per-workload. Without --require nothing is recommended.

The runs use a single-threaded BLAS (OPENBLAS_NUM_THREADS=1): this test runs beside others on CI
machines with more runnable threads than cores, where OpenBLAS's two threads wait on each other and
whole rows land in slow phases (30% and more, for seconds) that no statistic of a row's own
samples can see. One thread is timesliced instead, and its sub-millisecond samples stay clean.

Runs with Debian's python3; env PRECIS (binary). About 10-30 s on a loaded CPU."""
import json
import os
import subprocess
import sys
import tempfile

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
failures = []

SUITE = """seed: 15
workloads:
  - {name: square, m: 64, n: 128, k: 128, batch: 2}
  - {name: wide, m: 32, n: 256, k: 128, batch: 2}
"""


def check(cond, what, proc=None):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        if proc is not None:
            print(f"  exit {proc.returncode}\n  stdout: {proc.stdout}\n  stderr: {proc.stderr}")
        failures.append(what)


def precis(*args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([PRECIS, *args], capture_output=True, text=True, timeout=600, env=env)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "small.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        data = os.path.join(tmp, "small.h5")
        run = precis("gen", suite, "-o", data, "-q")
        check(run.returncode == 0, "gen the small dataset", run)
        if run.returncode:
            return 1
        answers, per_workload = [], []
        for i in range(3):
            out = os.path.join(tmp, f"run{i}")
            run = precis("run", data, "--backend", "cpu", "--recipes", "fp32,tf32,fp16,bf16,int8,fp8", "-o", out, "--quiet")
            check(run.returncode == 0, f"run {i + 1}", run)
            report = os.path.join(out, "report.json")
            rec = precis("recommend", report, "--require", "rel_fro<=1e-2", "--json")
            check(rec.returncode == 0, f"recommend on run {i + 1}", rec)
            try:
                doc = json.loads(rec.stdout)
                answers.append(doc["recommended"])
                print(f"     run {i + 1}: {doc['recommended']} (tied: {[r['recipe'] for r in doc['recipes'] if r['tied']]}, "
                      f"decided by {doc['tie_decided_by']}; medians "
                      f"{ {r['recipe']: round(r['latency_ms'], 4) for r in doc['recipes']} })")
            except (ValueError, KeyError) as e:
                check(False, f"recommend --json on run {i + 1}: {e}", rec)
            rec = precis("recommend", report, "--require", "rel_fro<=1e-2", "--per-workload", "--json")
            try:
                per_workload.append({w["workload"]: w["recommended"] for w in json.loads(rec.stdout)["per_workload"]})
            except (ValueError, KeyError) as e:
                check(False, f"recommend --per-workload --json on run {i + 1}: {e}", rec)
            plain = precis("recommend", report)
            check(plain.returncode == 0 and "recommendation:" not in plain.stdout and "--require" in plain.stdout,
                  f"run {i + 1} without --require: no recommendation, how to ask", plain)
        check(len(answers) == 3 and len(set(answers)) == 1 and answers[0] is not None,
              f"the same recommendation on three runs: {answers}")
        check(len(per_workload) == 3 and all(p == per_workload[0] for p in per_workload),
              f"the same per-workload recommendations on three runs: {per_workload}")
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
