#!/usr/bin/python3
"""`precis gen --inputs float64` and `precis accept` on out=fp64 recipes (issue 19).

- gen writes a and b as float64 with more than float32's 24 bits, records `inputs: float64` in the
  stored suite, and the float32 draws of the same suite are exactly their float32 rounding (same
  RNG, rounded at the end); a per-workload `inputs: float32` overrides the top level; --tile-rows
  gives the same values (float64 inputs are generated in core).
- The double-double reference of float64 inputs (TwoProduct + TwoSum, Dot2) is within its stored
  bound gamma_k^2 |a|.|b| of the exact rational product (Fraction), and far inside float64's
  rounding; the plain float64 reference is a dgemm of the float64 values.
- `precis run` and `precis accept` judge fp64 on such data near 1e-16: accept used to measure a
  fp64 output through its float32 rounding (rel_fro ~1e-8, and the fp64 gate failed).
- Bad values (`--inputs float16`, `inputs: 16` in a suite) exit 2 naming the option/key.

Runs with Debian's python3 + python3-h5py + python3-numpy; env PRECIS (binary)."""
import json
import os
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
FAST = ["--backend", "cpu", "--quiet", "--max-time-ms", "5", "--min-samples", "1", "--max-samples", "3"]
failures = []


def check(cond, what):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([PRECIS, *args], capture_output=True, text=True)


SUITE = """seed: 11
reference: double-double
workloads:
  - name: spread
    m: 12
    n: 20
    k: 96
    batch: 2
    a: {dist: exp_spread, phi: 2}
    b: normal
  - name: cancel
    m: 8
    n: 8
    k: 32
    a: cancellation
    b: cancellation
  - name: narrow
    m: 4
    n: 4
    k: 8
    inputs: float32
"""


def gamma(n):
    u = 2.0 ** -53
    return n * u / (1 - n * u)


def main():
    with scratch.TemporaryDirectory() as tmp:
        suite = os.path.join(tmp, "s.yaml")
        with open(suite, "w") as f:
            f.write(SUITE)
        d64, d32, dtiled = (os.path.join(tmp, n) for n in ("d64.h5", "d32.h5", "dt.h5"))
        p = run("gen", suite, "-o", d64, "--inputs", "float64", "-q")
        check(p.returncode == 0, f"gen --inputs float64 succeeds ({p.stderr.strip()})")
        check(run("gen", suite, "-o", d32, "-q").returncode == 0, "gen without --inputs succeeds")
        check(run("gen", suite, "-o", dtiled, "--inputs", "float64", "--tile-rows", "4", "-q").returncode == 0,
              "gen --inputs float64 --tile-rows succeeds")
        with h5py.File(d64) as f64, h5py.File(d32) as f32, h5py.File(dtiled) as ft:
            check("inputs: float64" in f64.attrs["suite"], "the stored suite records inputs: float64")
            for name in ("spread", "cancel"):
                w64, w32 = f64["workloads"][name], f32["workloads"][name]
                a, b = w64["a"][()], w64["b"][()]
                check(a.dtype == np.float64 and b.dtype == np.float64, f"{name}: a and b stored as float64")
                check(w32["a"].dtype == np.float32, f"{name}: float32 by default")
                wide = np.count_nonzero(a != a.astype(np.float32).astype(np.float64))
                check(wide > a.size // 2, f"{name}: a holds more than 24 bits ({wide} of {a.size} values)")
                if name == "spread":
                    # Same RNG draws; the float32 dataset rounds them once at the end.
                    check(np.array_equal(a.astype(np.float32), w32["a"][()]) and
                          np.array_equal(b.astype(np.float32), w32["b"][()]),
                          f"{name}: float32 inputs are the float32 rounding of the float64 draws")
                check(np.array_equal(a, ft["workloads"][name]["a"][()]) and
                      np.array_equal(w64["c_ref"][()], ft["workloads"][name]["c_ref"][()]),
                      f"{name}: --tile-rows gives the same values")
                attrs = dict(w64.attrs)
                k = int(attrs["k"])
                bound = float(attrs["reference_error_bound"])
                check(attrs["reference_precision"] == "double-double" and
                      abs(bound - gamma(k) ** 2 * (1 + 2 * gamma(k))) <= 1e-12 * bound,
                      f"{name}: Dot2 bound gamma_k^2 recorded ({bound:.3g})")
                hi, lo, ab = w64["c_ref"][()], w64["c_ref_lo"][()], w64["ab_abs"][()]
                bb = b if b.ndim == 3 else np.broadcast_to(b, (a.shape[0],) + b.shape)
                worst_dd, worst_f64 = 0.0, 0.0
                for s in range(a.shape[0]):
                    for i in range(0, a.shape[1], 3):
                        for j in range(0, b.shape[-1], 2):
                            exact = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[s, i, :], bb[s, :, j]))
                            err = abs(Fraction(float(hi[s, i, j])) + Fraction(float(lo[s, i, j])) - exact)
                            worst_dd = max(worst_dd, float(err) / ab[s, i, j])
                            worst_f64 = max(worst_f64, abs(float(Fraction(float(hi[s, i, j])) - exact)) / ab[s, i, j])
                check(worst_dd <= bound, f"{name}: double-double within its bound of the exact product "
                                         f"({worst_dd:.3g} <= {bound:.3g})")
                check(worst_dd < 1e-25, f"{name}: double-double far below float64 rounding ({worst_dd:.3g})")
            w = f64["workloads"]["narrow"]
            check(w["a"].dtype == np.float32, "a per-workload inputs: float32 overrides the top level")

        # fp64 on 53-bit inputs against the double-double reference, in run and in accept.
        out = os.path.join(tmp, "run")
        p = run("run", d64, "--recipes", "fp64,fp32", "--workloads", "spread", "-o", out, *FAST)
        check(p.returncode == 0, f"run succeeds ({p.stderr.strip()[-300:]})")
        with open(os.path.join(out, "report.json")) as f:
            rows = {r["recipe"]: r for r in json.load(f)["rows"]}
        fro = rows["fp64"]["error"]["rel_fro"]["worst"]
        check(fro < 1e-15, f"run: fp64 sees the float64 inputs (rel_fro {fro:.3g})")
        check(rows["fp32"]["error"]["rel_fro"]["worst"] > 1e-9, "run: fp32 reads their float32 rounding")

        for data, what in ((d64, "float64 inputs"), (d32, "float32 inputs")):
            out = os.path.join(tmp, "acc-" + what.split()[0])
            p = run("accept", data, "--workload", "spread", "--recipe", "fp64", "--batches", "1,2", "-o", out, *FAST)
            if not os.path.exists(os.path.join(out, "accept.json")):
                check(False, f"accept ({what}) writes accept.json (exit {p.returncode}: {p.stderr.strip()[-300:]})")
                continue
            with open(os.path.join(out, "accept.json")) as f:
                rec = json.load(f)["recipes"][0]
            acc = rec["acceptance"]["accuracy"]
            fro = acc["error"]["rel_fro"]["worst"]
            # The old path rounded the fp64 output to float32 first: ~1e-8 and a failed fp64 gate.
            check(fro < 1e-15, f"accept ({what}): fp64 judged in float64 (rel_fro {fro:.3g})")
            check(p.returncode == 0 and acc["meets_criteria"] and rec["verdict"] == "pass",
                  f"accept ({what}): fp64 passes its fp64 gate (exit {p.returncode}, {rec['reasons']})")

        # Bad values.
        p = run("gen", suite, "-o", os.path.join(tmp, "x.h5"), "--inputs", "float16")
        check(p.returncode == 2 and "--inputs" in p.stderr and "float16" in p.stderr,
              f"--inputs float16 exits 2 naming the option ({p.stderr.strip()})")
        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write(SUITE.replace("inputs: float32", "inputs: 16"))
        p = run("gen", bad, "-o", os.path.join(tmp, "y.h5"))
        check(p.returncode == 2 and "inputs" in p.stderr and "float32 or float64" in p.stderr,
              f"a bad inputs key exits 2 naming it ({p.stderr.strip()})")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
