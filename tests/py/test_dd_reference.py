#!/usr/bin/python3
"""Double-double references (issue 19) against exact rational results.

`reference: double-double` in a suite makes `precis gen` store c_ref + c_ref_lo; this test checks,
on small cases with Python `fractions`, that the pair is within the bound the dataset records
(reference_error_bound * ab_abs) of the exact product, that it is far better than the float64
reference on inputs that cancel, that the metrics of a run measure errors far below float64's
unit roundoff against it, and that a file whose attributes and datasets disagree is refused.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import json
import os
import shutil
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
from fractions import Fraction

try:
    import h5py
    import numpy as np
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


SUITE = """seed: 23
reference: double-double
workloads:
  - {name: normal, m: 4, n: 5, k: 30, batch: 2}
  - {name: wide, m: 3, n: 4, k: 25, b_batched: true, batch: 2, a: {dist: log_uniform, lo: 1e-20, hi: 1e20}, b: {dist: log_uniform, lo: 1e-12, hi: 1e12}}
  - {name: cancel, m: 4, n: 3, k: 64, a: {dist: cancellation}, b: {dist: normal}}
  - {name: plain, m: 2, n: 3, k: 9, reference: float64}
"""


def exact(a, b):
    rows, k = a.shape
    n = b.shape[1]
    fa = [[Fraction(float(v)) for v in r] for r in a]
    fb = [[Fraction(float(v)) for v in r] for r in b]
    return [[sum(fa[i][p] * fb[p][j] for p in range(k)) for j in range(n)] for i in range(rows)]


def main():
    tmp = scratch.mkdtemp()
    try:
        suite, data = os.path.join(tmp, "s.yaml"), os.path.join(tmp, "d.h5")
        with open(suite, "w") as f:
            f.write(SUITE)
        proc = run("gen", suite, "-o", data, "-q")
        check(proc.returncode == 0, f"gen with reference: double-double {proc.stderr.strip()}")
        dd_gain = []
        with h5py.File(data, "r") as f:
            for name, w in f["workloads"].items():
                dd = name != "plain"
                check(w.attrs["reference_precision"] == ("double-double" if dd else "float64"),
                      f"{name}: reference_precision")
                check(("c_ref_lo" in w) == dd, f"{name}: c_ref_lo present exactly for double-double")
                k = int(w.attrs["k"])
                bound = float(w.attrs["reference_error_bound"])
                u = 2.0 ** -53
                want = ((k - 1) * u / (1 - (k - 1) * u)) ** 2 if dd else k * u / (1 - k * u)
                check(want <= bound <= want * 1.001, f"{name}: reference_error_bound {bound:.3g} (gamma {want:.3g})")
                a, b, hi, ab = w["a"][()], w["b"][()], w["c_ref"][()], w["ab_abs"][()]
                lo = w["c_ref_lo"][()] if dd else np.zeros_like(hi)
                worst, worst_f64 = Fraction(0), Fraction(0)
                for s in range(a.shape[0]):
                    e = exact(a[s], b[s] if b.ndim == 3 else b)
                    for i in range(hi.shape[1]):
                        for j in range(hi.shape[2]):
                            scale = Fraction(float(ab[s, i, j]))
                            err = abs(Fraction(float(hi[s, i, j])) + Fraction(float(lo[s, i, j])) - e[i][j])
                            worst = max(worst, err / scale)
                            check(abs(float(lo[s, i, j])) <= abs(float(hi[s, i, j])) * 2.0 ** -53,
                                  f"{name}[{s},{i},{j}]: c_ref_lo is a low part") if (i, j) == (0, 0) else None
                            # float64 rounding of the exact value: what a float64 reference can at best be.
                            worst_f64 = max(worst_f64, abs(Fraction(float(e[i][j])) - e[i][j]) / scale)
                check(worst <= bound, f"{name}: |c_ref + c_ref_lo - exact| <= bound * ab_abs ({float(worst):.3g} <= {bound:.3g})")
                if dd:
                    dd_gain.append((name, float(worst), float(worst_f64)))
        for name, err, f64 in dd_gain:
            check(err < f64 * 1e-6 or err == 0, f"{name}: double-double ({err:.3g}) far below float64 rounding ({f64:.3g})")

        # Metrics against the pair: fp64's error near 1e-16 is measured, not zero.
        out = os.path.join(tmp, "r")
        proc = run("run", data, "--recipes", "fp64,ozaki-int8-8", "-o", out, *FAST)
        check(proc.returncode in (0, 1), f"run fp64 against double-double references ({proc.returncode})")
        rows = {(r["workload"], r["recipe"]): r for r in json.load(open(os.path.join(out, "report.json")))["rows"]}
        fro = rows[("normal", "fp64")]["error"]["rel_fro"]["worst"]
        check(fro is not None and 1e-18 < fro < 1e-14, f"normal fp64: rel_fro {fro} (measured, near 1e-16)")
        check("double-double" in rows[("normal", "fp64")]["details"].get("reference", "") and
              "reference" not in rows[("plain", "fp64")]["details"], "rows say when their reference is double-double")
        fro = rows[("plain", "fp64")]["error"]["rel_fro"]["worst"]
        check(fro == 0, f"plain fp64 against its own float64 reference: rel_fro {fro} (the reference is the same dgemm)")

        # A file whose attributes and datasets disagree is refused with the path named.
        bad = os.path.join(tmp, "bad.h5")
        shutil.copy(data, bad)
        with h5py.File(bad, "r+") as f:
            del f["workloads/normal/c_ref_lo"]
        proc = run("run", bad, "--recipes", "fp64", "-o", os.path.join(tmp, "r2"), *FAST)
        check(proc.returncode == 2 and "/workloads/normal" in proc.stderr and "c_ref_lo" in proc.stderr,
              f"missing c_ref_lo refused: {proc.stderr.strip()[:200]}")
        shutil.copy(data, bad)
        with h5py.File(bad, "r+") as f:
            lo = f["workloads/cancel/c_ref_lo"]
            v = lo[()]
            v[0, 0, 0] = 1.0
            lo[...] = v
        proc = run("run", bad, "--recipes", "fp64", "-o", os.path.join(tmp, "r3"), *FAST)
        check(proc.returncode == 2 and "c_ref_lo" in proc.stderr, f"a c_ref_lo that is no low part refused: {proc.stderr.strip()[:200]}")
        shutil.copy(data, bad)
        with h5py.File(bad, "r+") as f:
            f["workloads/plain"].attrs["reference_precision"] = "quad"
        proc = run("run", bad, "--recipes", "fp64", "-o", os.path.join(tmp, "r4"), *FAST)
        check(proc.returncode == 2 and "reference_precision" in proc.stderr, "an unknown reference_precision refused")
    finally:
        shutil.rmtree(tmp)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
