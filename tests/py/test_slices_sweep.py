#!/usr/bin/python3
"""The report's slices sweep (issue 19): `precis run --recipes ozaki-int8-3..8` (a range) gives
the error-vs-slices curve, and report.md (a table) and report.html (a chart) show it in slice
order beside fp64, only when a workload has two Ozaki points or more. On exp_spread data with
double-double references, the curve falls monotonically.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import json
import os
import re
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal

try:
    import h5py  # noqa: F401  (the other tests' dependency set; not used here)
except ImportError as exc:  # pragma: no cover
    print(f"skipped: {exc}")
    sys.exit(77)

PRECIS = os.environ.get("PRECIS") or os.path.join(os.environ.get("PRECIS_BUILD_DIR", "build"), "precis")
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "1", "--min-samples", "1", "--max-samples", "1"]
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True)


def main():
    with scratch.TemporaryDirectory() as tmp:
        suite, data = os.path.join(tmp, "s.yaml"), os.path.join(tmp, "d.h5")
        with open(suite, "w") as f:
            f.write("seed: 4\nreference: double-double\nworkloads:\n"
                    "  - {name: spread, m: 24, n: 20, k: 64, a: {dist: exp_spread, phi: 1}, b: {dist: exp_spread, phi: 1}}\n")
        check(run("gen", suite, "-o", data, "-q").returncode == 0, "gen")
        out = os.path.join(tmp, "r")
        # Out of order on purpose: the sweep sorts by slices.
        proc = run("run", data, "--recipes", "ozaki-int8-6..8,fp64,ozaki-int8-3..5", "-o", out, *FAST)
        check(proc.returncode in (0, 1), f"run with two ranges ({proc.returncode}) {proc.stderr.strip()[:200]}")
        rows = json.load(open(os.path.join(out, "report.json")))["rows"]
        check([r["recipe"] for r in rows] == [f"ozaki-int8-{n}" for n in (6, 7, 8)] + ["fp64"] +
              [f"ozaki-int8-{n}" for n in (3, 4, 5)], "rows in --recipes order")
        err = {r["recipe"]: r["error"]["rel_fro"]["worst"] for r in rows}
        curve = [err[f"ozaki-int8-{n}"] for n in range(3, 9)]
        check(all(curve[i + 1] < curve[i] for i in range(5)), f"the curve falls monotonically {curve}")
        md = open(os.path.join(out, "report.md")).read()
        table = md[md.find("Slices sweep"):]
        lines = [line for line in table.splitlines()[4:12] if line.startswith("|")]
        slices = [line.split("|")[1].strip() for line in lines]
        check(slices == ["3", "4", "5", "6", "7", "8", "-"], f"report.md sweep in slice order, fp64 last: {slices}")
        check("| 8 | 36 | ozaki-int8-8 |" in table, "report.md: 8 slices run 36 int8 GEMMs")
        html = open(os.path.join(out, "report.html")).read()
        svg = re.search(r'<svg class="sweep".*?</svg>', html, re.S)
        check(svg is not None, "report.html has the sweep chart")
        if svg:
            titles = re.findall(r"<title>(ozaki-int8-\d+):", svg.group(0))
            check(titles == [f"ozaki-int8-{n}" for n in range(3, 9)], f"chart points in slice order {titles}")
            check(">fp64</text>" in svg.group(0), "chart marks fp64")
        # One Ozaki point is no sweep.
        out2 = os.path.join(tmp, "r2")
        run("run", data, "--recipes", "fp64,ozaki-int8-4", "-o", out2, *FAST)
        check("Slices sweep" not in open(os.path.join(out2, "report.md")).read() and
              'class="sweep"' not in open(os.path.join(out2, "report.html")).read(), "no sweep for one point")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
