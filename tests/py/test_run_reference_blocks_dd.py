"""precis run with references in blocks of samples on double-double references (issue 40; the model
case, with gradients and logits, is tests/venv/test_python_run_reference_blocks.py).

`precis gen` of a suite with `reference: double-double` (c_ref + c_ref_lo), one workload with b per
sample (b_batched), run with fp64, fp32 and bf16 once with every reference whole and once with
--reference-block 6000 (bytes: blocks of 1 sample of the first workload, 2 of the second, the last
block shorter). Checked: every row equal field by field but its timings and memory, the saved outputs
equal; and a NaN in c_ref's first block beside a c_ref_lo that is not a low part in its last block
is refused by both runs with the same message (c_ref_lo's check comes first in a whole load);
--reference-block 0 is refused (exit 2) naming the option.
"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from cli_checks import FAILURES, PRECIS, check

SUITE = """seed: 41
reference: double-double
workloads:
  - {name: dd, m: 8, n: 40, k: 50, batch: 7}
  - {name: dd-batched-b, m: 4, n: 30, k: 20, b_batched: true, batch: 5}
"""
FAST = ["--backend", "cpu", "--recipes", "fp64,fp32,bf16", "--min-samples", "1", "--max-samples", "1",
        "--max-time-ms", "1", "--quiet"]
MEASURED = {"time", "tflops", "memory"}


def run(args, expect=0):
    p = subprocess.run([PRECIS] + args, capture_output=True, text=True)
    check(p.returncode == expect, f"precis {' '.join(args[:3])}: exit {p.returncode}, expected {expect}: {p.stderr[-800:]}")
    return p


def main():
    tmp = scratch.mkdtemp(prefix="precis-run-blocks-dd-")
    try:
        suite = os.path.join(tmp, "suite.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        ds = os.path.join(tmp, "dd.h5")
        run(["gen", suite, "-o", ds])
        reports = {}
        for label, block in (("whole", "1G"), ("blocked", "6000")):
            out = os.path.join(tmp, label)
            run(["run", ds, "-o", out, "--reference-block", block, "--save-outputs", out + ".h5"] + FAST)
            reports[label] = json.load(open(os.path.join(out, "report.json")))
        a, b = reports["whole"]["rows"], reports["blocked"]["rows"]
        check(len(a) == len(b) == 6, f"rows: {len(a)}, {len(b)}")
        for x, y in zip(a, b):
            for key in sorted(set(x) | set(y)):
                if key not in MEASURED:
                    check(x.get(key) == y.get(key), f"{x['workload']} {x['recipe']}: {key}: {str(x.get(key))[:200]} "
                          f"(whole) vs {str(y.get(key))[:200]} (blocked)")
        check(all("double-double" in r["details"].get("reference", "") for r in b if r["status"] == "ok"),
              "the rows say their reference is double-double")
        with h5py.File(os.path.join(tmp, "whole.h5"), "r") as f, h5py.File(os.path.join(tmp, "blocked.h5"), "r") as g:
            names = []
            f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
            check(len(names) == 6, f"saved outputs: {names}")
            for n in names:
                check(np.array_equal(f[n][()].view(np.uint8), g[n][()].view(np.uint8)), f"saved output {n} differs")

        p = run(["run", ds, "-o", os.path.join(tmp, "no"), "--reference-block", "0"], expect=2)
        check('--reference-block: memory size "0"' in p.stderr, f"--reference-block 0 refused naming it: {p.stderr[-300:]}")

        bad = os.path.join(tmp, "bad.h5")
        shutil.copy(ds, bad)
        with h5py.File(bad, "r+") as f:
            f["workloads/dd/c_ref"][0, 0, 0] = np.nan
            hi = float(f["workloads/dd/c_ref"][6, 7, 39])
            f["workloads/dd/c_ref_lo"][6, 7, 39] = abs(hi) * 1e-10 + 1e-300
        errors = []
        for block in ("1G", "6000"):
            p = run(["run", bad, "-o", os.path.join(tmp, "bad-" + block), "--force", "--reference-block", block] + FAST,
                    expect=2)
            lines = [line for line in p.stderr.splitlines() if "/workloads/" in line]
            errors.append(lines[-1] if lines else p.stderr[-300:])
        check(errors[0] == errors[1], f"whole and blocked runs refuse differently:\n  {errors[0]}\n  {errors[1]}")
        check("/workloads/dd/c_ref_lo" in errors[1] and "[6,7,39]" in errors[1], f"the error names c_ref_lo: {errors[1]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
