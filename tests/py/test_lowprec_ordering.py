#!/usr/bin/python3
"""Issue 16's acceptance run: on the default preset's llm-128x4096x4096 (0.5% of the activation
channels are outliers of magnitude 6..60), the low-precision presets order as a user expects --
finer scales and smoothing lower the error:

    fp8-block < fp8-rowwise < fp8          (1x128/128x128 blocks < per row x column < per tensor)
    int8-sq < int8                         (SmoothQuant moves the outliers into the weights)
    nvfp4 < mxfp4                          (16-element E4M3 scales < 32-element power-of-two scales)
    every 8-bit recipe < every 4-bit one (w4a16, mxfp4, nvfp4)

in the worst-sample rel_fro of the report. Prints the table (the numbers the docs quote).
Runs with Debian's python3; env PRECIS (binary)."""
import json
import os
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
RECIPES = ["fp8", "fp8-rowwise", "fp8-block", "int8", "int8-sq", "w4a16", "mxfp4", "nvfp4"]
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def main():
    tmp = scratch.mkdtemp(prefix="precis-order-")
    ds = os.path.join(tmp, "default.h5")
    subprocess.run([PRECIS, "gen", "--preset", "default", "-o", ds, "-q"], check=True)
    out = os.path.join(tmp, "rep")
    proc = subprocess.run([PRECIS, "run", ds, "--recipes", ",".join(RECIPES), "--workloads", "llm-128x4096x4096",
                           "-o", out, *FAST], capture_output=True, text=True)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"precis run -> {proc.returncode}\n{proc.stderr}")
    rows = {r["recipe"]: r for r in json.load(open(os.path.join(out, "report.json")))["rows"]}
    for r in RECIPES:
        check(rows[r]["status"] == "ok", f"{r}: status {rows[r]['status']} {rows[r].get('reason', '')}")
    err = {r: rows[r]["error"]["rel_fro"]["worst"] for r in RECIPES}
    print("recipe        rel_fro")
    for r in RECIPES:
        print(f"{r:<13} {err[r]:.4g}")
    check(err["fp8-block"] < err["fp8-rowwise"] < err["fp8"], "fp8-block < fp8-rowwise < fp8")
    check(err["int8-sq"] < err["int8"], "int8-sq < int8 (SmoothQuant on outlier channels)")
    check(err["nvfp4"] < err["mxfp4"], "nvfp4 < mxfp4")
    eight, four = ["fp8", "fp8-rowwise", "fp8-block", "int8", "int8-sq"], ["w4a16", "mxfp4", "nvfp4"]
    check(max(err[r] for r in eight) < min(err[r] for r in four), "every 8-bit recipe below every 4-bit one")
    print(f"{len(failures)} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
